//! The command line: argument definitions and one handler per command, each a
//! thin call into the engine.

mod bench;
mod bm25;

use clap::{Parser, Subcommand};

mod data;
mod eval;

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
pub enum Command {
    /// Score a TREC run against qrels with trec_eval's conventions (MRR, MAP,
    /// P@k, R@100, nDCG@k, Top-1).
    TrecEval(eval::TrecEvalArgs),
    /// Compare TREC runs on the same qrels, with paired significance tests
    /// against a baseline.
    Compare(eval::CompareArgs),
    /// Inspect a workspace's data.
    #[command(subcommand)]
    Data(data::DataCommand),
    /// Create the default Bible workspace (English KJV / Spanish RV1909,
    /// verse-aligned) from the SWORD modules, installing them if needed.
    Setup(data::SetupArgs),
    /// A BM25 run on a workspace's ad-hoc task (monolingual, untranslated,
    /// dictionary or MT queries), written as a TREC run and scored.
    Bm25(bm25::Bm25Args),
    /// Benchmarks of the index (dense top-k against faiss, pseudo-relevance mining).
    Bench(bench::BenchArgs),
}

/// Runs one command; the error is printed by `main`.
pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::TrecEval(a) => eval::trec_eval(a),
        Command::Compare(a) => eval::compare(a),
        Command::Data(c) => data::run_data(c),
        Command::Setup(a) => data::run_setup(a),
        Command::Bm25(a) => bm25::run(a),
        Command::Bench(a) => bench::run(a),
    }
}
