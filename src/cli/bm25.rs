//! `rosetta bm25`: a BM25 run on a workspace's ad-hoc task, written as a TREC
//! run and scored against the task's qrels.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::json;

use rosetta::corpus::Workspace;
use rosetta::eval::{evaluate, Metric};
use rosetta::index::adhoc::{bm25_run, Bm25RunConfig, Translation};
use rosetta::index::{Bm25Params, Expansion};
use rosetta::text::Side;

/// Which queries of the task are searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueriesArg {
    /// The source-language queries (cross-language).
    Source,
    /// The target-language queries (monolingual ceiling).
    Target,
}

/// How source-language queries are translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TranslateArg {
    /// Not at all (only shared names and numbers can match).
    None,
    /// Word by word through the workspace dictionary (Pirkola structured
    /// queries: a term's translations count as one).
    Dict,
    /// Whole queries through Apertium (`apertium -u SRC-TGT`).
    Mt,
}

/// Pseudo-relevance feedback of the queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExpandArg {
    /// None: the queries as they are.
    None,
    /// Terrier's Bo1 (Bose-Einstein 1, parameter-free normalisation; 3
    /// feedback documents and 10 terms by default).
    Bo1,
    /// Anserini's RM3 (relevance model interpolated with the query; 10
    /// feedback documents, 10 terms, original weight 0.5 by default).
    Rm3,
}

impl ExpandArg {
    /// The engine's name of the method.
    pub fn name(self) -> &'static str {
        match self {
            ExpandArg::None => "none",
            ExpandArg::Bo1 => "bo1",
            ExpandArg::Rm3 => "rm3",
        }
    }
}

/// Arguments of `rosetta bm25`.
#[derive(Debug, Args)]
pub struct Bm25Args {
    /// The workspace TOML file.
    #[arg(long)]
    pub workspace: PathBuf,
    /// Which queries to search with.
    #[arg(long, value_enum, default_value = "source")]
    pub queries: QueriesArg,
    /// Translation of source-language queries (target queries take `none`).
    #[arg(long, value_enum, default_value = "none")]
    pub translate: TranslateArg,
    /// BM25 term-frequency saturation.
    #[arg(long, default_value_t = 1.2)]
    pub k1: f64,
    /// BM25 length normalisation (0 to 1).
    #[arg(long, default_value_t = 0.75)]
    pub b: f64,
    /// With --translate dict: keep query terms the dictionary lacks as they
    /// are (names, numbers, cognates) instead of dropping them.
    #[arg(long)]
    pub keep_untranslated: bool,
    /// Pseudo-relevance feedback of the queries (after translation, on the
    /// target-language index).
    #[arg(long, value_enum, default_value = "none")]
    pub expand: ExpandArg,
    /// With --expand: feedback documents [default: 3 for bo1, 10 for rm3].
    #[arg(long, value_name = "N")]
    pub fb_docs: Option<usize>,
    /// With --expand: expansion terms [default: 10].
    #[arg(long, value_name = "N")]
    pub fb_terms: Option<usize>,
    /// With --expand rm3: weight of the original query, 0 to 1 [default: 0.5].
    #[arg(long, value_name = "X")]
    pub rm3_weight: Option<f64>,
    /// Documents kept per query: trec_eval's usual depth, for MAP as TREC
    /// reports it. A run file holds one line per document kept (about 40
    /// bytes): 3,108 queries at 1000 are about 120 MB; `--depth 100` writes a
    /// tenth and moves no query's AP by more than 1/101.
    #[arg(long, default_value_t = 1000)]
    pub depth: usize,
    /// Write the TREC run file (and, for a task derived from parallel data,
    /// its qrels to RUN.qrels): to FILE, or with `--run` alone to
    /// `sessions/runs/<workspace name>.<tag>.run` (inside the git-ignored
    /// sessions folder, never the current folder: a run at depth 1000 is
    /// 120 MB for the Bible). Without `--run` the figures are computed and
    /// printed and no file is written.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub run: Option<Option<PathBuf>>,
    /// Print one JSON object (metrics, query statistics) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Where `--run` alone writes: `sessions/runs/<workspace>.<tag>.run`, the
/// workspace name kept to letters, digits, `-`, `_` and `.` (so it names no
/// other folder); the folder is made.
fn default_run_path(workspace: &str, tag: &str) -> anyhow::Result<PathBuf> {
    let name: String = workspace
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = name.trim_start_matches('.');
    let dir = PathBuf::from("sessions").join("runs");
    std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    Ok(dir.join(format!(
        "{}.{tag}.run",
        if name.is_empty() { "workspace" } else { name }
    )))
}

/// Runs `rosetta bm25`.
pub fn run(a: Bm25Args) -> anyhow::Result<()> {
    let t = Instant::now();
    let model = match a.translate {
        TranslateArg::None => "bm25",
        TranslateArg::Dict => "bm25-dict",
        TranslateArg::Mt => "bm25-mt",
    };
    // the baseline's own [text] defaults, as for its sessions
    let text = rosetta::models::registry::spec(model)?.text;
    let ws = Workspace::load(&a.workspace)?.with_model_text(text)?;
    let task = ws.adhoc()?;
    let cfg = Bm25RunConfig {
        params: Bm25Params { k1: a.k1, b: a.b },
        queries: match a.queries {
            QueriesArg::Source => Side::Source,
            QueriesArg::Target => Side::Target,
        },
        translation: match a.translate {
            TranslateArg::None => Translation::None,
            TranslateArg::Dict => Translation::Dict,
            TranslateArg::Mt => Translation::Mt,
        },
        depth: a.depth,
        keep_untranslated: a.keep_untranslated,
        expansion: Expansion::from_parts(a.expand.name(), a.fb_docs, a.fb_terms, a.rm3_weight)?,
    };
    let run_path = match &a.run {
        Some(Some(path)) => Some(path.clone()),
        Some(None) => Some(default_run_path(
            &ws.name,
            &rosetta::index::adhoc::run_tag(&cfg),
        )?),
        None => None,
    };
    let out = {
        let _p = super::progress::Progress::start(format!(
            "{model}: {} queries against {} documents",
            task.queries.len(),
            task.docs.len()
        ));
        bm25_run(&ws, &task, &cfg)?
    };
    let qrels = match &run_path {
        Some(path) => rosetta::eval::trec::write_run(&out.run, path, &task.qrels, task.derived)?,
        None => None,
    };
    let ev = evaluate(&out.run, &task.qrels);
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        let mut v = json!({
            "workspace": a.workspace.display().to_string(),
            "run": run_path.as_ref().map(|r| r.display().to_string()),
            "qrels": qrels.as_ref().map(|q| q.display().to_string()),
            "tag": out.run.tag,
            "queries": match cfg.queries { Side::Source => "source", Side::Target => "target" },
            "translate": cfg.translation.name(),
            "k1": a.k1,
            "b": a.b,
            "depth": a.depth,
            "keep_untranslated": a.keep_untranslated,
            "expansion": cfg.expansion,
            "documents": task.docs.len(),
            "judged_queries": ev.queries,
            "query_stats": out.stats,
            "metrics": ev.mean,
            "seconds": (secs * 1000.0).round() / 1000.0,
        });
        if !out.expansions.is_empty() {
            v["expansion_terms"] = serde_json::to_value(&out.expansions)?;
        }
        println!("{v}");
    } else {
        let s = &out.stats;
        println!(
            "{}: {} queries ({} without results) against {} documents, {}{}",
            out.run.tag,
            s.queries,
            s.without_results,
            task.docs.len(),
            match &run_path {
                Some(r) => format!("run written to {}", r.display()),
                None => "no run file written (--run [FILE] writes one)".into(),
            },
            qrels
                .map(|q| format!(" (the derived task's qrels to {})", q.display()))
                .unwrap_or_default()
        );
        if cfg.translation == Translation::Dict {
            println!(
                "dictionary: {} of {} query tokens translated, {} dropped",
                s.translated_tokens, s.tokens, s.dropped_tokens
            );
        }
        if let Some(e) = &s.expansion {
            println!(
                "expansion: {}: {} of {} queries got feedback terms ({} terms in all)",
                cfg.expansion, e.expanded_queries, s.queries, e.terms
            );
        }
        for m in Metric::ALL {
            println!("{:<8}\t{:.4}", m.name(), ev.mean.get(m));
        }
        println!("{:<8}\t{}", "queries", ev.queries);
    }
    Ok(())
}
