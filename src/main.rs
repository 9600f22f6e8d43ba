//! The `rosetta` binary: the CLI, or the TUI workbench when no subcommand is given.

mod cli;
mod tui;

use clap::Parser;

/// mimalloc rather than glibc's allocator: candle allocates every op's
/// output afresh, and glibc returns large blocks to the kernel at once, so
/// each step paid page faults for them (Cargo.toml, docs/results.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `rosetta` with no subcommand: the workbench, or a clear message (and a
/// non-zero exit) when stdout is not a terminal.
fn open_workbench(args: cli::Cli) -> anyhow::Result<()> {
    if args.print_config {
        print!("{}", tui::default_config_text());
        return Ok(());
    }
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        anyhow::bail!(
            "the workbench needs a terminal (stdout or stdin is not one); see `rosetta --help` for the commands"
        );
    }
    tui::run(tui::Options {
        theme: args.theme,
        config: args.config,
        sessions: args.sessions,
    })?;
    Ok(())
}

fn main() {
    let mut args = cli::Cli::parse();
    let result = match args.command.take() {
        Some(cmd) => {
            // a closed pipe (`rosetta search ... | head`) ends the command
            // quietly, as for other Unix tools, instead of a panic in print!
            // SAFETY: restoring the default disposition of one signal.
            unsafe {
                libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            }
            cli::run(cmd)
        }
        None => open_workbench(args),
    };
    if let Err(e) = result {
        eprintln!("rosetta: error: {e:#}");
        std::process::exit(1);
    }
}
