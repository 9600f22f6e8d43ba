//! The `rosetta` binary: the CLI, or the TUI workbench when no subcommand is given.

mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    let result = match args.command {
        Some(cmd) => cli::run(cmd),
        None => Err(anyhow::anyhow!(
            "the workbench is not built yet; see `rosetta --help` for the commands"
        )),
    };
    if let Err(e) = result {
        eprintln!("rosetta: error: {e:#}");
        std::process::exit(1);
    }
}
