//! The `rosetta` binary: the CLI, or the TUI workbench when no subcommand is given.

mod cli;
mod tui;

use clap::Parser;

/// mimalloc rather than glibc's allocator: candle allocates every op's
/// output afresh, and glibc returns large blocks to the kernel at once, so
/// each step paid page faults for them (Cargo.toml, docs/results.md).
/// Wrapped so that a failed allocation inside a job is recorded in its
/// session before the process aborts (`RecordingAlloc`).
#[global_allocator]
static GLOBAL: rosetta::train::runner::RecordingAlloc<mimalloc::MiMalloc> =
    rosetta::train::runner::RecordingAlloc(mimalloc::MiMalloc);

extern "C" {
    /// mimalloc's own setter (linked through the `mimalloc` crate).
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// `mi_option_purge_delay` in mimalloc's `mi_option_e`.
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// Freed pages stay with the process instead of going back to the kernel
/// 10 ms later: a training step frees and reallocates blocks of megabytes
/// (BAE: the decoders' gradients), and each purge cost a zeroing page fault
/// per page on reuse (BAE: 40,000 faults and 7% of the CPU per epoch).
/// Resident memory stays at its peak instead; so only the commands that run
/// training steps ask for it: elsewhere (closed-form fits, search, HNSW
/// builds) pages freed by one thread's heap and not reused by another's
/// made the peak grow (a CCA fit at 50k terms: 985 MB against 852 MB).
fn keep_freed_pages() {
    // SAFETY: a documented mimalloc option set to a documented value
    // (-1: never purge), before any thread but this one exists.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

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
    // parsing starts no thread: the option is still set before any other exists
    let mut args = cli::Cli::parse();
    // before any thread, as both settings below
    rosetta::models::kit::nn::yielding_candle_pool();
    if args
        .command
        .as_ref()
        .is_some_and(cli::Command::runs_training_steps)
    {
        keep_freed_pages();
    }
    if args
        .command
        .as_ref()
        .is_some_and(cli::Command::reports_heap_peak)
    {
        rosetta::train::runner::count_heap();
    }
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
        // an error may quote stored text (a status's error, a name):
        // never its terminal control sequences
        eprintln!(
            "rosetta: error: {}",
            rosetta::util::strip_controls(&format!("{e:#}"))
        );
        std::process::exit(1);
    }
}
