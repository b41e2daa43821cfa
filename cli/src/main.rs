//! `sextant`: build indexes, search them, serve the HTTP API, evaluate on BEIR sets.
//!
//! Modules, from the entry point down: [`cli`] (arguments) → [`commands`] (what each
//! sub-command does) → [`build`], [`serve`], [`bench`] ([`capacity`]), [`admin`] → [`indexes`] (building,
//! caching and opening indexes); [`report`] draws `eval`'s and `bench`'s figures as a page of charts.

mod admin;
mod bench;
mod build;
mod capacity;
mod cli;
mod commands;
mod eval;
mod index_admin;
mod indexes;
mod jsonl;
mod merge_bench;
mod plan_bench;
mod progress;
mod put;
mod report;
mod serve;
mod shard_bench;
mod shard_workers;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    // Warnings, this binary's progress (index builds, `serve`'s start) and one access line
    // per request served.
    let filter = tracing_subscriber::EnvFilter::try_from_env("SEXTANT_LOG")
        .unwrap_or_else(|_| "warn,sextant=info,access=info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match cli.log_format.as_str() {
        "json" => logs.json().flatten_event(true).with_current_span(true).with_span_list(false).init(),
        _ => logs.init(),
    }
    commands::run(cli)
}
