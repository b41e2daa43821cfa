//! `sextant`: build indexes, search them, serve the HTTP API, evaluate on BEIR sets.
//!
//! Modules, from the entry point down: [`cli`] (arguments) → [`commands`] (what each
//! sub-command does) → [`build`], [`serve`], [`bench`] ([`capacity`]), [`admin`] → [`indexes`] (building,
//! caching and opening indexes).

mod admin;
mod bench;
mod build;
mod capacity;
mod cli;
mod commands;
mod indexes;
mod serve;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SEXTANT_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    commands::run(cli::Cli::parse())
}
