//! The command line: argument definitions and one handler per command, each a
//! thin call into the engine.

use clap::{Parser, Subcommand};

/// Rosetta: a terminal workbench for cross-language information retrieval.
#[derive(Debug, Parser)]
#[command(name = "rosetta", version, about, long_about = None)]
pub struct Cli {
    /// Colour theme of the workbench (`rosetta` with no subcommand); NO_COLOR wins.
    #[arg(long, value_parser = ["light", "dark"])]
    pub theme: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {}

/// Runs one command; the error is printed by `main`.
pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {}
}
