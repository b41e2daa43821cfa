//! `sextant`: build indexes, search them, serve the HTTP API, evaluate on BEIR sets.

mod admin;
mod bench;
mod commands;
mod serve;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SEXTANT_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    commands::run(commands::Cli::parse())
}
