//! The command line: argument definitions and one handler per command, each a
//! thin call into the engine.

mod bench;

use clap::{Parser, Subcommand};

/// Rosetta: a terminal workbench for cross-language information retrieval.
#[derive(Debug, Parser)]
#[command(name = "rosetta", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmarks of the index (dense top-k against faiss, pseudo-relevance mining).
    Bench(bench::BenchArgs),
}

/// Runs one command; the error is printed by `main`.
pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Bench(a) => bench::run(a),
    }
}
