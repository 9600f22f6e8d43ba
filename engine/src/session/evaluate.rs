//! One evaluation entry point for a session, trained model or lexical
//! baseline: parallel sentence retrieval, ad-hoc retrieval (optionally
//! fused with BM25), bilingual lexicon induction, on the workspace's data
//! or on other files given. It returns an [`EvalReport`] that front-ends
//! print as text ([`EvalReport::lines`]) or JSON (serde).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::rerank::{self, RerankEvaluation, RerankSpec};
use super::retrieval::{
    bli, bli_scorable, encode_adhoc, encode_split, run_from_embeddings, BliScores,
};
use super::{collection, Loaded, Session};
use crate::corpus::prepare::SplitData;
use crate::corpus::{AdhocTask, BliSplit, Dictionary, ParallelText, Prepared, Workspace};
use crate::eval::metrics::{Evaluation, Metric, Metrics};
use crate::eval::sentence::{sentence_retrieval, SentenceScores};
use crate::eval::trec::write_run;
use crate::index::adhoc::Translation;
use crate::index::expand::Expansion;
use crate::index::fusion::{evaluate_fusion_with, BetaSpec, FusedEvaluation, FusionSpec, Norm};
use crate::models::bm25::Bm25Baseline;
use crate::models::Params;
use crate::models::TextRole;
use crate::text::Side;
use crate::{Error, Result};

/// Which evaluation to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// Parallel sentence retrieval (MRR, P@1) on a split.
    Sentence,
    /// Ad-hoc retrieval (trec_eval figures).
    Adhoc,
    /// Bilingual lexicon induction (P@1/5/10, cosine and CSLS).
    Bli,
    /// Every task the workspace has data for.
    All,
}

/// Which parallel split sentence retrieval uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// The validation split.
    Valid,
    /// The test split.
    Test,
}

impl Split {
    /// `valid` or `test`.
    pub fn name(self) -> &'static str {
        match self {
            Split::Valid => "valid",
            Split::Test => "test",
        }
    }
}

/// What to evaluate, and on which data.
#[derive(Debug, Clone)]
pub struct EvalRequest {
    /// The session folder.
    pub session: PathBuf,
    /// Task(s).
    pub task: Task,
    /// Split for sentence retrieval on the workspace's data.
    pub split: Split,
    /// Other parallel data for sentence retrieval: one TSV of pairs or two
    /// aligned files.
    pub test: Option<Vec<PathBuf>>,
    /// Another ad-hoc collection: documents, queries, qrels.
    pub adhoc: Option<Vec<PathBuf>>,
    /// Another dictionary for lexicon induction (read whole: a test
    /// dictionary).
    pub dictionary: Option<PathBuf>,
    /// Seed of the train/test split of the workspace dictionary that lexicon
    /// induction is scored on the test part of ([`BliSplit`]).
    pub bli_seed: u64,
    /// Where to write the ad-hoc run (TREC format).
    pub run: Option<PathBuf>,
    /// Documents ranked per query in the ad-hoc runs, scored and written
    /// ([`RUN_DEPTH`](super::retrieval::RUN_DEPTH), trec_eval's usual 1000,
    /// by default).
    pub depth: usize,
    /// Also score the ad-hoc run fused with BM25 over translated queries.
    pub fuse: Option<FusionSpec>,
    /// Seed of the query split that `fuse` tunes on one half of.
    pub fuse_seed: u64,
    /// Where to write `fuse`'s fused run on the held-out queries (TREC
    /// format); its BM25 partner on the same queries goes to `FILE.bm25`.
    pub fuse_run: Option<PathBuf>,
    /// How `fuse` builds its BM25 partner and the model's Eq. 1 mix.
    pub fuse_options: FuseOptions,
    /// Rerank the ad-hoc run and sentence retrieval by late interaction
    /// (an encoder's MaxSim); a tuned weight is chosen on the tuning half
    /// of `fuse_seed`'s split, and the reranked run is what `fuse` fuses.
    /// `None`: the session's own `rerank` setting
    /// ([`SessionConfig::rerank`](super::SessionConfig::rerank));
    /// [`RerankSpec::Off`]: none.
    pub rerank: Option<RerankSpec>,
    /// Documents reranked per query; `None`: the session's `rerank_depth`,
    /// else [`rerank::DEFAULT_DEPTH`].
    pub rerank_depth: Option<usize>,
    /// Device to load the model on.
    pub device: crate::models::DeviceSpec,
    /// The most seconds of encoding an un-indexed ad-hoc collection that
    /// [`evaluate`] starts ([`collection::encode_within`]: above it, the
    /// refusal with the estimate and the `rosetta index build` command);
    /// `None`: any, in the foreground (`rosetta eval --build`).
    pub max_encode_s: Option<f64>,
}

/// How `rosetta eval --fuse` builds its parts (seed 004's Eq. 1-2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FuseOptions {
    /// β of Eq. 1: the source query's run alone (the default), a fixed β or
    /// one tuned with λ; with β the translated query's run takes part.
    pub beta: BetaSpec,
    /// How queries are translated, for BM25 and for the model's target
    /// side: `Dict` (the default) or `Mt`.
    pub translation: Translation,
    /// Pseudo-relevance feedback of BM25's translated queries.
    pub expansion: Expansion,
    /// Score normalisation of the fusion.
    pub norm: Norm,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            beta: BetaSpec::Source,
            translation: Translation::Dict,
            expansion: Expansion::None,
            norm: Norm::MinMax,
        }
    }
}

/// Sentence-retrieval figures and what they are over.
#[derive(Debug, Clone, Serialize)]
pub struct SentenceFigures {
    /// MRR, P@1 and the number of queries.
    #[serde(flatten)]
    pub scores: SentenceScores,
    /// The split's name, or the files' label.
    pub split: String,
    /// Pairs with no known term on a side (they encode to zero vectors);
    /// not counted for a lexical baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pairs_without_known_terms: Option<usize>,
    /// Source texts of the pairs evaluated that encode to nothing (no term
    /// of the session's vocabulary: a zero count vector); not counted for a
    /// lexical baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_source_texts: Option<usize>,
    /// Target texts of the pairs evaluated that encode to nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_target_texts: Option<usize>,
    /// How each source's best targets were reranked by MaxSim (`--rerank`
    /// or the session's `rerank`), with the figures before: `scores` are
    /// then the reranked ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reranked: Option<SentenceRerank>,
}

/// Sentence retrieval reranked by late interaction
/// ([`rerank::sentence_reranked_ranks`]).
#[derive(Debug, Clone, Serialize)]
pub struct SentenceRerank {
    /// MaxSim's weight: given, or the one the ad-hoc task's tuning half chose.
    pub weight: f64,
    /// Targets reranked per source.
    pub depth: usize,
    /// The figures before reranking (the pooled vectors' cosine).
    pub model: SentenceScores,
    /// Seconds spent reading token states and scoring.
    pub seconds: f64,
}

/// Ad-hoc figures and what they are over.
#[derive(Debug, Clone, Serialize)]
pub struct AdhocFigures {
    /// Mean figures over the judged queries.
    #[serde(flatten)]
    pub mean: Metrics,
    /// Judged queries evaluated.
    pub queries: usize,
    /// Whether the task is derived from the parallel test split.
    pub derived: bool,
    /// Documents in the collection.
    #[serde(skip)]
    pub docs: usize,
    /// A lexical baseline's query statistics (translation, OOV).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_stats: Option<serde_json::Value>,
    /// The run file written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<PathBuf>,
    /// The qrels written beside the run for a derived task (no file of
    /// its own holds them): `<run>.qrels`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qrels: Option<PathBuf>,
    /// Judged queries that encode to nothing (no term of the session's
    /// vocabulary); not counted for a lexical baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_queries: Option<usize>,
    /// Documents that encode to nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_documents: Option<usize>,
}

/// Lexicon-induction figures, by the model's plain similarity and by CSLS.
#[derive(Debug, Clone, Serialize)]
pub struct BliFigures {
    /// The model's similarity (the cosine for most models).
    pub similarity: crate::space::Similarity,
    /// Nearest neighbours by that similarity (named `cosine` for every
    /// model, as scripts read it).
    pub cosine: BliScores,
    /// By CSLS.
    pub csls: BliScores,
    /// The split of the workspace dictionary whose test part the figures are
    /// on; `None` for a dictionary given with `--dictionary` (read whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<BliSplitReport>,
}

/// The dictionary split lexicon induction was scored with (MUSE's protocol:
/// [`BliSplit`]), as recorded in the session.
#[derive(Debug, Clone, Serialize)]
pub struct BliSplitReport {
    /// Its seed.
    pub seed: u64,
    /// The share of source words held out.
    pub test_share: f64,
    /// Source words (analysed) in the training part.
    pub train_words: usize,
    /// Source words (analysed) in the test part, of which the figures count
    /// those in the session's vocabularies (`queries`).
    pub test_words: usize,
    /// The session file recording both parts' words.
    pub file: PathBuf,
}

/// The dictionary split whose training part a session's model was fitted
/// on (its `bli_seed` setting: `procrustes`), if any.
fn fitted_bli_seed(config: &super::SessionConfig) -> Option<u64> {
    let recorded = Params::with_recorded(Default::default(), config.params.clone());
    crate::models::registry::spec(&config.model)
        .and_then(|def| def.config(&recorded))
        .ok()?
        .bli_seed()
}

/// Why lexicon induction on the test part of the dictionary's split
/// `seed` would be unfair to a session, if it would: its model (a
/// `procrustes` map) was fitted on the training part of another split, so
/// that test part holds words it was fitted on.
fn fitted_elsewhere(config: &super::SessionConfig, seed: u64) -> Option<String> {
    match fitted_bli_seed(config) {
        Some(s) if s != seed => Some(format!(
            "the session's {} map was fitted on the training part of the dictionary's \
             split {s}; --bli-seed {seed} would score words it was fitted on \
             (use --bli-seed {s})",
            config.model
        )),
        _ => None,
    }
}

/// The workspace dictionary `dict` analysed as the session reads words,
/// split by source word with `seed` ([`BliSplit`]): its test part (what
/// lexicon induction scores) and the split.
fn bli_test_part(
    l: &Loaded,
    dict: &Dictionary,
    seed: u64,
) -> (std::collections::HashMap<String, Vec<String>>, BliSplit) {
    let analysed = dict.analysed(l.analyzer(Side::Source), l.analyzer(Side::Target));
    let split = BliSplit::of(&analysed, seed);
    (split.test_part(&analysed), split)
}

/// The session file recording the dictionary split of seed `seed`.
pub fn bli_split_file(session: &Path, seed: u64) -> PathBuf {
    session.join(format!("bli-split-{seed}.json"))
}

/// What [`evaluate`] found.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// The session folder.
    pub session: PathBuf,
    /// Its model.
    pub model: String,
    /// Sentence retrieval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sentence: Option<SentenceFigures>,
    /// Ad-hoc retrieval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adhoc: Option<AdhocFigures>,
    /// Ad-hoc retrieval reranked by late interaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adhoc_reranked: Option<RerankEvaluation>,
    /// Ad-hoc retrieval fused with BM25.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adhoc_fused: Option<FusedEvaluation>,
    /// Lexicon induction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bli: Option<BliFigures>,
    /// The checkpoint evaluated (a trained model; with a warning when it
    /// is not the best one the status names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<super::ModelSource>,
    /// Remarks for a reader (a derived task used, a run written).
    #[serde(skip)]
    pub notes: Vec<String>,
}

impl EvalReport {
    fn empty(session: &Path, model: &str) -> EvalReport {
        EvalReport {
            session: session.to_path_buf(),
            model: model.to_string(),
            sentence: None,
            adhoc: None,
            adhoc_reranked: None,
            adhoc_fused: None,
            bli: None,
            checkpoint: None,
            notes: Vec::new(),
        }
    }

    /// The report as human-readable lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(s) = &self.sentence {
            let missing = match (s.empty_source_texts, s.empty_target_texts) {
                (Some(a), Some(b)) => {
                    format!("; {a} source and {b} target texts encode to nothing")
                }
                _ => s
                    .pairs_without_known_terms
                    .map(|n| format!(", {n} with no known term on a side"))
                    .unwrap_or_default(),
            };
            let how = s
                .reranked
                .as_ref()
                .map(|r| format!(", reranked by MaxSim: top {}, weight {}", r.depth, r.weight))
                .unwrap_or_default();
            out.push(format!(
                "sentence retrieval ({}, {} pairs{missing}{how}): MRR {:.4}  P@1 {:.4}  (ties for the answer: MRR {:.4}  P@1 {:.4})",
                s.split,
                s.scores.queries,
                s.scores.mrr,
                s.scores.p1,
                s.scores.mrr_ties_for,
                s.scores.p1_ties_for
            ));
            if let Some(r) = &s.reranked {
                out.push(format!(
                    "  before reranking (the pooled vectors' cosine; reranking {:.1} s): MRR {:.4}  P@1 {:.4}  (ties for the answer: MRR {:.4}  P@1 {:.4})",
                    r.seconds, r.model.mrr, r.model.p1, r.model.mrr_ties_for, r.model.p1_ties_for
                ));
            }
        }
        if let Some(a) = &self.adhoc {
            let missing = match (a.empty_queries, a.empty_documents) {
                (Some(q), Some(d)) => format!(
                    "; {q} quer{} and {d} document{} encode to nothing",
                    if q == 1 { "y" } else { "ies" },
                    if d == 1 { "" } else { "s" }
                ),
                _ => String::new(),
            };
            let how = match &self.adhoc_reranked {
                Some(r) if r.tried.is_empty() => {
                    format!(", reranked by MaxSim: top {}, weight {}", r.depth, r.weight)
                }
                _ => String::new(),
            };
            out.push(format!(
                "ad-hoc retrieval ({}{} queries, {} documents{missing}{how}): MRR {:.4}  MAP {:.4}  P@1 {:.4}  nDCG@10 {:.4}  R@100 {:.4}",
                if a.derived { "derived, " } else { "" },
                a.queries,
                a.docs,
                a.mean.mrr,
                a.mean.map,
                a.mean.p1,
                a.mean.ndcg10,
                a.mean.r100
            ));
            if let Some(p) = &a.run {
                let what = match &self.adhoc_reranked {
                    Some(r) if r.split_seed.is_some() => {
                        "reranked run of the held-out queries written to"
                    }
                    Some(_) => "reranked run written to",
                    None => "run written to",
                };
                out.push(match &a.qrels {
                    Some(q) if what != "run written to" => {
                        format!("{what} {} (their qrels to {})", p.display(), q.display())
                    }
                    Some(q) => format!(
                        "{what} {} (the derived task's qrels to {})",
                        p.display(),
                        q.display()
                    ),
                    None => format!("{what} {}", p.display()),
                });
            }
        }
        if let Some(r) = &self.adhoc_reranked {
            if !r.tried.is_empty() {
                let list: Vec<String> = r
                    .tried
                    .iter()
                    .map(|(w, m)| format!("{}{w:.1} {m:.4}", if *w == r.weight { "*" } else { "" }))
                    .collect();
                out.push(format!(
                    "--rerank maxsim: MAP on the tuning half by MaxSim's weight: {} (* chosen)",
                    list.join(", ")
                ));
            }
            out.push(format!(
                "reranked by MaxSim (top {}, weight {:.1}{}; {} {}queries, {:.1} s): MAP {:.4} (model {:.4})  MRR {:.4} (model {:.4})  nDCG@10 {:.4} (model {:.4})",
                r.depth,
                r.weight,
                if r.tried.is_empty() { "" } else { " chosen on the other half" },
                r.queries,
                if r.tried.is_empty() { "" } else { "held-out " },
                r.seconds,
                r.reranked.map,
                r.model.map,
                r.reranked.mrr,
                r.model.mrr,
                r.reranked.ndcg10,
                r.model.ndcg10
            ));
        }
        if let Some(f) = &self.adhoc_fused {
            if let Some(tried) = &f.auto {
                let list: Vec<String> = tried
                    .iter()
                    .map(|c| {
                        format!(
                            "{}{}{} {:.4}",
                            if c.chosen { "*" } else { "" },
                            c.bm25_run,
                            if c.beta { "+β" } else { "" },
                            c.tuning_map
                        )
                    })
                    .collect();
                out.push(format!(
                    "--fuse auto: {} signal sets, fused MAP on the tuning half: {} (* chosen)",
                    tried.len(),
                    list.join(", ")
                ));
            }
            out.push(format!(
                "fused with {} ({}{}{}{}; {} held-out queries): MAP {:.4} (model {:.4}, BM25 {:.4})  MRR {:.4} (model {:.4}, BM25 {:.4})  nDCG@10 {:.4} (model {:.4}, BM25 {:.4})",
                f.bm25_run,
                f.fusion,
                f.beta
                    .map(|b| format!(
                        ", β={b:.1} on {} translations (model mix MAP {:.4})",
                        f.query_translation.as_deref().unwrap_or("?"),
                        f.model_mixed.map_or(f64::NAN, |m| m.map)
                    ))
                    .unwrap_or_default(),
                if f.norm == "max" { ", max-normalised" } else { "" },
                f.tuning
                    .as_ref()
                    .map(|t| format!(
                        ", {} chosen on {} queries (MAP {:.4})",
                        if t.beta.is_some() { "λ and β" } else { "λ" },
                        t.queries,
                        t.score
                    ))
                    .unwrap_or_default(),
                f.queries,
                f.fused.map,
                f.model.map,
                f.bm25.map,
                f.fused.mrr,
                f.model.mrr,
                f.bm25.mrr,
                f.fused.ndcg10,
                f.model.ndcg10,
                f.bm25.ndcg10
            ));
        }
        if let Some(b) = &self.bli {
            let (c, s) = (&b.cosine, &b.csls);
            let over = match &b.split {
                Some(x) => format!(
                    "test part, seed {}: {} of its {} words, {} words kept for training",
                    x.seed, c.queries, x.test_words, x.train_words
                ),
                None => format!("{} of {} entries", c.queries, c.entries),
            };
            out.push(format!(
                "lexicon induction ({over}): {} P@1 {:.4} P@5 {:.4} P@10 {:.4}; CSLS P@1 {:.4} P@5 {:.4} P@10 {:.4}",
                b.similarity.label(), c.p1, c.p5, c.p10, s.p1, s.p5, s.p10
            ));
        }
        out
    }
}

impl EvalRequest {
    fn wants(&self, t: Task) -> bool {
        self.task == t || self.task == Task::All
    }

    /// Refuses a data flag whose task is not evaluated (it would do nothing).
    fn check_task_flags(&self) -> Result<()> {
        for (given, flag, task, name) in [
            (self.test.is_some(), "--test", Task::Sentence, "sentence"),
            (self.adhoc.is_some(), "--adhoc", Task::Adhoc, "adhoc"),
            (self.dictionary.is_some(), "--dictionary", Task::Bli, "bli"),
        ] {
            if given && !self.wants(task) {
                return Err(Error::invalid(format!(
                    "{flag} applies to --task {name} (or all)"
                )));
            }
        }
        if (self.rerank.is_some_and(RerankSpec::is_on) || self.rerank_depth.is_some())
            && !self.wants(Task::Adhoc)
            && !self.wants(Task::Sentence)
        {
            return Err(Error::invalid(
                "--rerank and --rerank-depth apply to the ad-hoc and sentence tasks (--task adhoc, \
                 sentence or all)",
            ));
        }
        if self.rerank == Some(RerankSpec::MaxSim(None)) && !self.wants(Task::Adhoc) {
            return Err(Error::invalid(
                "--rerank maxsim tunes its weight on the ad-hoc task's queries: give one \
                 (--rerank maxsim:W) for --task sentence",
            ));
        }
        if self.rerank_depth == Some(0) {
            return Err(Error::invalid(
                "--rerank-depth must be at least 1 (documents reranked per query)",
            ));
        }
        if self.fuse.is_some() && !self.wants(Task::Adhoc) {
            return Err(Error::invalid(
                "--fuse applies to the ad-hoc task (--task adhoc or all)",
            ));
        }
        let o = &self.fuse_options;
        if self.fuse.is_none() && *o != FuseOptions::default() {
            return Err(Error::invalid(
                "--beta, --fuse-translate, --fuse-expand and --fuse-norm apply with --fuse",
            ));
        }
        if o.translation == Translation::None {
            return Err(Error::invalid(
                "the fusion's queries are translated by dict or mt, not none",
            ));
        }
        if self.fuse == Some(FusionSpec::Auto)
            && (o.beta != BetaSpec::Source || o.expansion != FuseOptions::default().expansion)
        {
            return Err(Error::invalid(
                "--fuse auto chooses β and the query expansion itself: leave out --beta and \
                 --fuse-expand, or give --fuse bm25:auto with them",
            ));
        }
        o.expansion.validate()?;
        Ok(())
    }
}

/// Evaluates a session as `req` asks (a trained model or a lexical
/// baseline); refused when the workspace changed since the session was made.
pub fn evaluate(req: &EvalRequest) -> Result<EvalReport> {
    evaluate_with(req, &|_, _| {})
}

/// [`evaluate`], telling `progress(fraction, line)` how the encoding of an
/// encoder's ad-hoc collection goes, batch by batch. An encoder's
/// documents go through the session's collection cache (what `rosetta
/// index build` wrote is read, not encoded again), and an encoding longer
/// than `req.max_encode_s` is refused before it starts.
pub fn evaluate_with(req: &EvalRequest, progress: &dyn Fn(f64, &str)) -> Result<EvalReport> {
    req.check_task_flags()?;
    let session = Session::open(&req.session)?;
    if session.is_lexical() {
        if req.rerank.is_some_and(RerankSpec::is_on) {
            return Err(rerank::no_token_states(&session.config.model));
        }
        if req.rerank_depth.is_some() {
            return Err(rerank::depth_without_rerank(&req.session));
        }
        return evaluate_lexical(req);
    }
    let (device, device_name) = crate::models::select_device(req.device)?;
    if let (Some(limit), true, None) = (req.max_encode_s, req.wants(Task::Adhoc), &req.adhoc) {
        // a refusal measured before comes before the model loads
        collection::refuse_recorded(&req.session, &device_name, limit)?;
    }
    let l = Loaded::open(&req.session, &device)?;
    // the reranking asked for, else the session's own
    let rerank = RerankSpec::resolve(req.rerank, req.rerank_depth, l.session.rerank()?);
    if rerank.is_none() && req.rerank_depth.is_some() {
        return Err(rerank::depth_without_rerank(&req.session));
    }
    if rerank.is_some()
        && l.model
            .token_states(Side::Source, TextRole::Query, &[])
            .is_none()
    {
        return Err(rerank::no_token_states(l.model.kind()));
    }
    let ws =
        Workspace::load_with_text(&l.session.config.workspace, l.session.config.text.as_ref())?;
    let prepared = Prepared::load_or_build(&ws)?;
    l.session
        .config
        .check_workspace_hash(&req.session, &prepared.hash)?;
    super::check_same_terms(&req.session, &l.vocabs, &prepared.vocabs)?;
    let mut report = EvalReport::empty(&req.session, &l.session.config.model);
    report.checkpoint = l.checkpoint.clone();
    report
        .notes
        .extend(l.checkpoint_warning().map(str::to_string));
    if req.wants(Task::Adhoc) {
        let tag = session_tag(&l.session.dir);
        let other = req.adhoc.as_deref().map(other_task).transpose()?;
        // with β (tried by `--fuse auto` too), the documents' embeddings
        // serve the translated queries too
        let keep_docs = req.fuse == Some(FusionSpec::Auto)
            || (req.fuse.is_some() && req.fuse_options.beta != BetaSpec::Source);
        let mut doc_side: Option<(ndarray::Array2<f32>, Vec<String>)> = None;
        let (run, qrels, derived, docs, empty) = match &other {
            Some(task) => {
                let d = collection_embeddings(&l, &device_name, &task.docs.texts, req, progress)?;
                let q = l.encode_texts(Side::Source, &task.queries.texts)?;
                if keep_docs {
                    doc_side = Some((d.clone(), task.docs.ids.clone()));
                }
                let run = run_from_embeddings(
                    d,
                    &q,
                    &task.docs.ids,
                    &task.queries.ids,
                    req.depth,
                    &tag,
                    l.model.similarity(),
                )?;
                let judged = |i: usize| task.qrels.judgements.contains_key(&task.queries.ids[i]);
                let empty = (
                    empty_rows(&l.counts(Side::Source, &task.queries.texts), judged),
                    empty_rows(&l.counts(Side::Target, &task.docs.texts), |_| true),
                );
                (run, &task.qrels, false, task.docs.len(), empty)
            }
            None => {
                let a = &prepared.adhoc;
                if a.derived && req.task == Task::Adhoc {
                    report.notes.push(
                        "the workspace has no [adhoc] collection; using the task derived from its parallel data"
                            .into(),
                    );
                }
                let (d, q) = if l.model.reads_text() {
                    // the collection a search reads, through the same cache
                    let d = collection_embeddings(&l, &device_name, &a.doc_texts, req, progress)?;
                    (d, l.encode_texts(Side::Source, &a.query_texts)?)
                } else {
                    encode_adhoc(l.model.as_ref(), a)?
                };
                if keep_docs {
                    doc_side = Some((d.clone(), a.doc_ids.clone()));
                }
                let run = run_from_embeddings(
                    d,
                    &q,
                    &a.doc_ids,
                    &a.query_ids,
                    req.depth,
                    &tag,
                    l.model.similarity(),
                )?;
                let judged = |i: usize| a.qrels.judgements.contains_key(&a.query_ids[i]);
                let empty = (
                    empty_rows(&a.queries, judged),
                    empty_rows(&a.docs, |_| true),
                );
                (run, &a.qrels, a.derived, a.doc_ids.len(), empty)
            }
        };
        let mut e = crate::eval::evaluate_rankings(&run.results, qrels);
        let mut run = run;
        if let Some((spec, depth)) = rerank {
            let (q, d) = match &other {
                Some(t) => (
                    (&t.queries.ids[..], &t.queries.texts[..]),
                    (&t.docs.ids[..], &t.docs.texts[..]),
                ),
                None => {
                    let a = &prepared.adhoc;
                    (
                        (&a.query_ids[..], &a.query_texts[..]),
                        (&a.doc_ids[..], &a.doc_texts[..]),
                    )
                }
            };
            let t0 = std::time::Instant::now();
            let late = rerank::late_scores(l.model.as_ref(), &run, q, d, depth, progress)?;
            let r = rerank::evaluate_rerank(
                &run,
                &late,
                qrels,
                spec,
                depth,
                req.fuse_seed,
                t0.elapsed().as_secs_f64(),
            );
            run = r.runs.0.clone();
            if r.split_seed.is_none() {
                // a fixed weight: the reranked run is the run, its figures
                // the ad-hoc figures (those before are `adhoc_reranked`'s)
                e = crate::eval::evaluate_rankings(&run.results, qrels);
            }
            report.adhoc_reranked = Some(r);
        }
        let mut written = None;
        if let Some(p) = &req.run {
            written = match report
                .adhoc_reranked
                .as_ref()
                .filter(|r| r.split_seed.is_some())
            {
                // a weight tuned on half the queries: the run of the other
                // half, with its qrels beside (as --fuse-run writes)
                Some(r) => {
                    let keep = &r.runs.1;
                    let held = crate::index::fusion::restrict(&run, keep);
                    write_run(&held, p, &qrels.restricted_to(keep), true)?
                }
                None => write_run(&run, p, qrels, derived)?,
            };
        }
        let mut figures = adhoc_figures(&e, derived, docs, req.run.clone());
        figures.qrels = written;
        (figures.empty_queries, figures.empty_documents) = (Some(empty.0), Some(empty.1));
        report.adhoc = Some(figures);
        if let Some(spec) = req.fuse {
            let task = match other {
                Some(t) => t,
                None => ws.adhoc()?,
            };
            let o = req.fuse_options;
            // the translations as the BM25 baselines read the workspace
            let lex = crate::models::bm25::lexical_workspace(&ws)?;
            let translated = match doc_side {
                Some((d, doc_ids)) => {
                    let texts = crate::index::adhoc::translate_texts(
                        &lex,
                        &task.queries.texts,
                        o.translation,
                    )?;
                    let q = l.encode_texts_as(Side::Target, TextRole::Query, &texts)?;
                    let tag = format!("{tag}-{}", o.translation.name());
                    Some(run_from_embeddings(
                        d,
                        &q,
                        &doc_ids,
                        &task.queries.ids,
                        req.depth,
                        &tag,
                        l.model.similarity(),
                    )?)
                }
                None => None,
            };
            let f = match spec {
                FusionSpec::Auto => {
                    fused_auto(&lex, &task, &run, translated.as_ref(), o, req.fuse_seed)?
                }
                _ => fused_adhoc(
                    &lex,
                    &task,
                    &run,
                    translated.as_ref(),
                    spec,
                    o,
                    req.fuse_seed,
                )?,
            };
            if let Some(p) = &req.fuse_run {
                // the held-out queries' qrels always go beside: the runs
                // hold those queries only
                let (bm, fused, qrels) = &f.held_out_runs;
                let mut fused = crate::index::fusion::truncated(fused, req.depth);
                fused.tag = format!("{tag}+{}", bm.tag);
                write_run(&fused, p, qrels, true)?;
                let mut bp = p.as_os_str().to_owned();
                bp.push(".bm25");
                crate::index::fusion::truncated(bm, req.depth).write(Path::new(&bp))?;
            }
            report.adhoc_fused = Some(f);
        }
    }
    if req.wants(Task::Sentence) {
        // after the ad-hoc task: a tuned MaxSim weight is chosen there
        let w = match rerank {
            Some((RerankSpec::MaxSim(Some(w)), depth)) => Some((w, depth)),
            Some((RerankSpec::MaxSim(None), depth)) => {
                report.adhoc_reranked.as_ref().map(|r| (r.weight, depth))
            }
            _ => None,
        };
        report.sentence = sentence_figures(req, &l, &prepared, w, progress)?;
    }
    if req.wants(Task::Bli) {
        // --dictionary FILE is read as written; the workspace's with its `reverse`
        let dict = match &req.dictionary {
            Some(path) => {
                let d = Dictionary::read(path)?;
                if d.is_empty() {
                    return Err(Error::file(
                        path,
                        "no dictionary entries: lexicon induction over nothing gives no figure",
                    ));
                }
                Some(d)
            }
            None => ws.read_dictionary()?,
        };
        match dict {
            None if req.task == Task::Bli => {
                return Err(Error::file(
                    &ws.path,
                    "the workspace has no [dictionary] (give one with --dictionary)",
                ))
            }
            None => {}
            Some(dict) => {
                // the workspace's dictionary is split by source word and
                // scored on its test part; a file given is a test dictionary
                let (scored, split) = if req.dictionary.is_some() {
                    (
                        dict.analysed(l.analyzer(Side::Source), l.analyzer(Side::Target)),
                        None,
                    )
                } else {
                    let (scored, split) = bli_test_part(&l, &dict, req.bli_seed);
                    (scored, Some(split))
                };
                let unseen = split
                    .as_ref()
                    .and_then(|_| fitted_elsewhere(&l.session.config, req.bli_seed));
                if let Some(what) = unseen {
                    if req.task == Task::Bli {
                        return Err(Error::invalid(format!("lexicon induction: {what}")));
                    }
                    report
                        .notes
                        .push(format!("lexicon induction left out: {what}"));
                } else if bli_scorable(&l, &scored) == 0 {
                    let what = match &split {
                        Some(s) => format!(
                            "no word of the dictionary's test part (seed {}, {} words) has itself and a translation in the session's vocabularies",
                            s.seed,
                            s.test.len()
                        ),
                        None => format!(
                            "none of the dictionary's {} entries has a source word and a translation in the session's vocabularies",
                            scored.len()
                        ),
                    };
                    let path = req.dictionary.as_deref().unwrap_or(&ws.path);
                    if req.task == Task::Bli {
                        return Err(Error::file(path, format!("lexicon induction: {what}")));
                    }
                    report
                        .notes
                        .push(format!("lexicon induction left out: {what}"));
                } else {
                    let cosine = bli(&l, &scored, false)?;
                    let csls = bli(&l, &scored, true)?;
                    // the split is recorded once it has scored something
                    let split = match split {
                        Some(split) => {
                            let file = bli_split_file(&l.session.dir, split.seed);
                            let json = serde_json::to_string_pretty(&split)
                                .map_err(|e| Error::invalid(format!("dictionary split: {e}")))?;
                            crate::util::write_atomic(&file, json.as_bytes())?;
                            Some(BliSplitReport {
                                seed: split.seed,
                                test_share: split.test_share,
                                train_words: split.train.len(),
                                test_words: split.test.len(),
                                file,
                            })
                        }
                        None => None,
                    };
                    report.bli = Some(BliFigures {
                        similarity: l.model.similarity(),
                        cosine,
                        csls,
                        split,
                    });
                }
            }
        }
    }
    Ok(report)
}

/// Sentence retrieval of a loaded model on `--test` data or a workspace split.
fn sentence_figures(
    req: &EvalRequest,
    l: &Loaded,
    prepared: &Prepared,
    rerank: Option<(f64, usize)>,
    progress: &dyn Fn(f64, &str),
) -> Result<Option<SentenceFigures>> {
    let reranked =
        |src: &[String], tgt: &[String], s: &ndarray::Array2<f32>, t: &ndarray::Array2<f32>| {
            rerank
                .map(|(w, depth)| -> Result<(SentenceRerank, SentenceScores)> {
                    let t0 = std::time::Instant::now();
                    let ranks = rerank::sentence_reranked_ranks(
                        l.model.as_ref(),
                        src,
                        tgt,
                        s,
                        t,
                        depth,
                        w,
                        progress,
                    )?;
                    let scores = SentenceScores::from_ranks(&ranks);
                    Ok((
                        SentenceRerank {
                            weight: w,
                            depth,
                            model: sentence_retrieval(s, t, l.model.similarity()),
                            seconds: t0.elapsed().as_secs_f64(),
                        },
                        scores,
                    ))
                })
                .transpose()
        };
    let zero = |m: &ndarray::Array2<f32>, i: usize| m.row(i).iter().all(|x| *x == 0.0);
    if let Some(files) = &req.test {
        let pairs = read_pairs(files)?;
        let rows = pairs.usable();
        if rows.is_empty() {
            return Err(Error::invalid(format!(
                "{}: no usable pair (both sides non-empty): sentence retrieval over nothing \
                 gives no figure",
                files_label(files)
            )));
        }
        let side = |s: Side, texts: &[String]| {
            let t: Vec<&str> = rows.iter().map(|&i| texts[i].as_str()).collect();
            l.encode_texts_as(s, TextRole::Query, &t)
        };
        let (s, t) = (
            side(Side::Source, &pairs.source)?,
            side(Side::Target, &pairs.target)?,
        );
        let without = (0..rows.len())
            .filter(|&i| zero(&s, i) || zero(&t, i))
            .count();
        // counted with the session's vocabulary, as the model sees them
        let counts = |s: Side, texts: &[String]| {
            let t: Vec<&str> = rows.iter().map(|&i| texts[i].as_str()).collect();
            l.counts(s, &t)
        };
        let texts = |v: &[String]| -> Vec<String> { rows.iter().map(|&i| v[i].clone()).collect() };
        let (reranked, scores) =
            match reranked(&texts(&pairs.source), &texts(&pairs.target), &s, &t)? {
                Some((r, scores)) => (Some(r), scores),
                None => (None, sentence_retrieval(&s, &t, l.model.similarity())),
            };
        return Ok(Some(SentenceFigures {
            reranked,
            scores,
            split: files_label(files),
            pairs_without_known_terms: Some(without),
            empty_source_texts: Some(empty_rows(&counts(Side::Source, &pairs.source), |_| true)),
            empty_target_texts: Some(empty_rows(&counts(Side::Target, &pairs.target), |_| true)),
        }));
    }
    let name = req.split.name();
    let split = match req.split {
        Split::Valid => &prepared.valid,
        Split::Test => &prepared.test,
    };
    let rows = split.nonblank();
    if rows.is_empty() {
        if req.task == Task::Sentence {
            return Err(Error::invalid(format!(
                "the {name} split has no usable pairs"
            )));
        }
        return Ok(None);
    }
    let without = rows.len() - split.trainable().len();
    let (s, t) = encode_pairs(l, prepared, split, &rows)?;
    let empty = |m: &crate::text::CsrMatrix| rows.iter().filter(|&&i| m.row_is_empty(i)).count();
    let texts = |v: &[String]| -> Vec<String> { rows.iter().map(|&i| v[i].clone()).collect() };
    let (reranked, scores) =
        match reranked(&texts(&split.src_text), &texts(&split.tgt_text), &s, &t)? {
            Some((r, scores)) => (Some(r), scores),
            None => (None, sentence_retrieval(&s, &t, l.model.similarity())),
        };
    Ok(Some(SentenceFigures {
        reranked,
        scores,
        split: name.to_string(),
        pairs_without_known_terms: Some(without),
        empty_source_texts: Some(empty(&split.src)),
        empty_target_texts: Some(empty(&split.tgt)),
    }))
}

/// Both sides' embeddings of the pairs `rows` of a workspace split.
fn encode_pairs(
    l: &Loaded,
    prepared: &Prepared,
    split: &SplitData,
    rows: &[usize],
) -> Result<(ndarray::Array2<f32>, ndarray::Array2<f32>)> {
    let side = |side| encode_split(l.model.as_ref(), split, side, &prepared.vocabs, rows);
    Ok((side(Side::Source)?, side(Side::Target)?))
}

fn adhoc_figures(e: &Evaluation, derived: bool, docs: usize, run: Option<PathBuf>) -> AdhocFigures {
    AdhocFigures {
        mean: e.mean,
        queries: e.queries,
        derived,
        docs,
        query_stats: None,
        run,
        qrels: None,
        empty_queries: None,
        empty_documents: None,
    }
}

/// Rows of `m` with no non-zero entry (texts that encode to nothing), among
/// those `counted` keeps.
fn empty_rows(m: &crate::text::CsrMatrix, counted: impl Fn(usize) -> bool) -> usize {
    (0..m.n_rows())
        .filter(|&i| counted(i) && m.row_is_empty(i))
        .count()
}

/// A lexical baseline's evaluation: the same tasks and report as a trained
/// model's, lexicon induction excepted (a BM25 baseline has no term space;
/// its dictionary is its translation).
/// The embeddings of ad-hoc documents `texts` for `evaluate_with`: an
/// encoder's through the session's collection cache, refused above
/// `req.max_encode_s` ([`collection::encode_within`]); other models'
/// encoded at once.
fn collection_embeddings(
    l: &Loaded,
    device: &str,
    texts: &[String],
    req: &EvalRequest,
    progress: &dyn Fn(f64, &str),
) -> Result<ndarray::Array2<f32>> {
    if !l.model.reads_text() {
        return l.encode_texts(Side::Target, texts);
    }
    let other = req
        .adhoc
        .as_ref()
        .and_then(|f| f.first())
        .map(PathBuf::as_path);
    collection::encode_within(
        l,
        device,
        Side::Target,
        texts,
        other,
        req.max_encode_s,
        &|w| progress(0.0, w),
    )?;
    collection::encode_reporting(l, Side::Target, texts, progress)
}

fn evaluate_lexical(req: &EvalRequest) -> Result<EvalReport> {
    let session = Session::open(&req.session)?;
    let ws = Workspace::load_with_text(&session.config.workspace, session.config.text.as_ref())?;
    session
        .config
        .check_workspace_hash(&req.session, &ws.content_hash()?)?;
    let params = Params::new(session.config.run_params());
    let baseline = Bm25Baseline::new(&session.config.model, &params)?;
    let model = &session.config.model;
    if req.fuse.is_some() {
        return Err(Error::invalid(format!(
            "{}: --fuse blends BM25 into a trained model; `{model}` is a BM25 baseline itself",
            req.session.display()
        )));
    }
    if req.task == Task::Bli || req.dictionary.is_some() {
        return Err(Error::invalid(format!(
            "{}: lexicon induction does not apply to the lexical baseline `{model}` (it has no term space)",
            req.session.display()
        )));
    }
    let mut report = EvalReport::empty(&req.session, model);
    if req.wants(Task::Sentence) {
        let (name, pairs) = match &req.test {
            Some(files) => (files_label(files), read_pairs(files)?),
            None => {
                let name = req.split.name();
                let split = ws.splits()?.get(name).cloned().ok_or_else(|| {
                    Error::file(&ws.path, format!("the workspace has no {name} split"))
                })?;
                (name.to_string(), split)
            }
        };
        report.sentence = Some(SentenceFigures {
            reranked: None,
            scores: baseline.sentence_retrieval(&ws, &pairs)?,
            split: name,
            pairs_without_known_terms: None,
            empty_source_texts: None,
            empty_target_texts: None,
        });
    }
    if req.wants(Task::Adhoc) {
        let task = match &req.adhoc {
            Some(files) => other_task(files)?,
            None => ws.adhoc()?,
        };
        let mut r = baseline.adhoc_run(&ws, &task, req.depth)?;
        r.run.tag = session_tag(&req.session);
        let e = crate::eval::evaluate(&r.run, &task.qrels);
        let mut written = None;
        if let Some(p) = &req.run {
            written = write_run(&r.run, p, &task.qrels, task.derived)?;
        }
        let mut a = adhoc_figures(&e, task.derived, task.docs.len(), req.run.clone());
        a.qrels = written;
        a.query_stats = Some(
            serde_json::to_value(&r.stats)
                .map_err(|e| Error::invalid(format!("query statistics: {e}")))?,
        );
        report.adhoc = Some(a);
    }
    Ok(report)
}

/// The model's ad-hoc run (and, with β, its translated queries' run) fused
/// with BM25 over translated, optionally expanded queries on `lex` (the
/// workspace as the BM25 baselines read it), scored on held-out queries
/// ([`evaluate_fusion_with`]).
fn fused_adhoc(
    lex: &Workspace,
    task: &AdhocTask,
    run: &crate::eval::Run,
    translated: Option<&crate::eval::Run>,
    spec: FusionSpec,
    o: FuseOptions,
    seed: u64,
) -> Result<FusedEvaluation> {
    use crate::index::adhoc::{bm25_run, Bm25RunConfig};
    let cfg = Bm25RunConfig {
        translation: o.translation,
        expansion: o.expansion,
        ..Default::default()
    };
    let bm = bm25_run(lex, task, &cfg)?;
    fused_with(task, run, translated, &bm.run, spec, o, seed)
}

/// [`fused_adhoc`] with the BM25 run `bm` already made (with `o`'s
/// translation and expansion).
fn fused_with(
    task: &AdhocTask,
    run: &crate::eval::Run,
    translated: Option<&crate::eval::Run>,
    bm: &crate::eval::Run,
    spec: FusionSpec,
    o: FuseOptions,
    seed: u64,
) -> Result<FusedEvaluation> {
    let mut f = evaluate_fusion_with(run, translated, bm, &task.qrels, spec, o.beta, o.norm, seed)?;
    if f.beta.is_some() {
        f.query_translation = Some(o.translation.name().to_string());
    }
    Ok(f)
}

/// `--fuse auto`: λ-tuned linear fusion of the model with BM25 over the
/// translated queries as they are, expanded by Bo1 and by RM3, each with
/// the model's source-query run alone and with its translated-query run
/// mixed in (β tuned with λ): the set with the best fused MAP on the tuning
/// half is reported on the other half, every set's tuning MAP beside it.
/// Nothing is chosen on the held-out queries.
fn fused_auto(
    lex: &Workspace,
    task: &AdhocTask,
    run: &crate::eval::Run,
    translated: Option<&crate::eval::Run>,
    o: FuseOptions,
    seed: u64,
) -> Result<FusedEvaluation> {
    use crate::index::expand::Expansion;
    use crate::index::fusion::AutoCandidate;
    let betas: Vec<BetaSpec> = match translated {
        Some(_) => vec![BetaSpec::Source, BetaSpec::Tuned],
        None => vec![BetaSpec::Source],
    };
    let mut best: Option<FusedEvaluation> = None;
    let mut tried = Vec::new();
    for expansion in [Expansion::None, Expansion::bo1(), Expansion::rm3()] {
        // one BM25 run per expansion, fused without and with β
        let cfg = crate::index::adhoc::Bm25RunConfig {
            translation: o.translation,
            expansion,
            ..Default::default()
        };
        let bm = crate::index::adhoc::bm25_run(lex, task, &cfg)?;
        for &beta in &betas {
            let opts = FuseOptions {
                beta,
                expansion,
                ..o
            };
            let f = fused_with(
                task,
                run,
                translated,
                &bm.run,
                FusionSpec::TunedLinear,
                opts,
                seed,
            )?;
            let score = f.fused_tuning.map_or(f64::NEG_INFINITY, |m| m.map);
            tried.push(AutoCandidate {
                bm25_run: f.bm25_run.clone(),
                beta: beta != BetaSpec::Source,
                tuning_map: score,
                chosen: false,
            });
            let better = best
                .as_ref()
                .is_none_or(|b| score > b.fused_tuning.map_or(f64::NEG_INFINITY, |m| m.map));
            if better {
                best = Some(f);
            }
        }
    }
    let mut f = best.ok_or_else(|| Error::invalid("--fuse auto: no signal set to try"))?;
    let at = f.fused_tuning.map_or(f64::NEG_INFINITY, |m| m.map);
    if let Some(c) = tried
        .iter_mut()
        .find(|c| c.tuning_map == at && c.bm25_run == f.bm25_run && c.beta == f.beta.is_some())
    {
        c.chosen = true;
    }
    f.auto = Some(tried);
    Ok(f)
}

/// Parallel text from `--test`: one TSV of pairs, or two aligned files.
fn read_pairs(files: &[PathBuf]) -> Result<ParallelText> {
    let pairs = match files {
        [tsv] => ParallelText::read_tsv(tsv)?,
        [src, tgt] => ParallelText::read_files(src, tgt)?,
        _ => {
            return Err(Error::invalid(
                "--test takes one TSV of pairs or two aligned files",
            ))
        }
    };
    if pairs.usable().is_empty() {
        return Err(Error::invalid(format!(
            "{}: no pair with text on both sides",
            files_label(files)
        )));
    }
    Ok(pairs)
}

/// The ad-hoc task of `--adhoc DOCS QUERIES QRELS`.
fn other_task(files: &[PathBuf]) -> Result<AdhocTask> {
    match files {
        [docs, queries, qrels] => AdhocTask::from_files(docs, queries, None, qrels),
        _ => Err(Error::invalid("--adhoc takes DOCS QUERIES QRELS")),
    }
}

/// Files named as one label (`a.en+a.hi`).
fn files_label(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join("+")
}

/// The session's folder name, for run tags.
pub fn session_tag(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "rosetta".into())
}

/// The seed of the dictionary split lexicon induction is scored with when
/// none is given (`rosetta eval` and `rosetta compare --task bli`).
pub const DEFAULT_BLI_SEED: u64 = 1;

/// A task sessions are compared on query by query (`rosetta compare
/// --sessions --task`): each session's per-query scores, paired between
/// sessions by query id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairedTask {
    /// The ad-hoc task of each session's workspace, the model alone
    /// ([`super::Workbench::adhoc_scores`]): every metric.
    Adhoc,
    /// Parallel sentence retrieval on a split of the workspace: per pair
    /// (query id `SPLIT:INDEX`, the pair's index in the split) the
    /// reciprocal rank of its translation (MRR) and whether it ranks first
    /// (P@1), ties counted against the answer, as `rosetta eval` counts
    /// them; their means are `eval`'s MRR and P@1.
    Sentence(Split),
    /// Lexicon induction on the test part of the workspace dictionary's
    /// split of seed `seed` ([`BliSplit`]): per source word it scores (the
    /// query id is the word, analysed) whether a translation is among the
    /// 1, 5, 10 nearest target words (P@1, P@5, P@10), by the model's own
    /// similarity or, with `csls`, by CSLS, as `rosetta eval --task bli`.
    Bli {
        /// The dictionary split's seed.
        seed: u64,
        /// Rank by CSLS instead of the model's similarity.
        csls: bool,
    },
}

impl PairedTask {
    /// The metrics the task scores per query, in table order.
    pub fn metrics(self) -> &'static [Metric] {
        match self {
            PairedTask::Adhoc => &Metric::ALL,
            PairedTask::Sentence(_) => &[Metric::Mrr, Metric::P1],
            PairedTask::Bli { .. } => &[Metric::P1, Metric::P5, Metric::P10],
        }
    }

    /// `adhoc`, `sentence` or `bli`.
    pub fn name(self) -> &'static str {
        match self {
            PairedTask::Adhoc => "adhoc",
            PairedTask::Sentence(_) => "sentence",
            PairedTask::Bli { .. } => "bli",
        }
    }

    /// Error naming the first of `metrics` the task does not score.
    pub fn check_metrics(self, metrics: &[Metric]) -> Result<()> {
        let known = self.metrics();
        match metrics.iter().find(|m| !known.contains(m)) {
            None => Ok(()),
            Some(m) => Err(Error::invalid(format!(
                "{m} is not scored on the {} task; it scores {}",
                self.name(),
                known
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Why a lexical baseline (BM25) cannot be scored per query on this
    /// task, if it cannot.
    pub fn lexical_reason(self, model: &str) -> Option<String> {
        match self {
            PairedTask::Adhoc | PairedTask::Sentence(_) => None,
            PairedTask::Bli { .. } => Some(format!(
                "`{model}` is a BM25 baseline: lexicon induction does not apply (it has no term space)"
            )),
        }
    }
}

/// A session's per-query scores on sentence retrieval or lexicon induction
/// ([`paired_scores`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PairedScores {
    /// The session's model.
    pub model: String,
    /// What the scores are over: the task, its split, its queries (pairs or
    /// test words) and their fingerprint.
    pub task: crate::eval::compare::Task,
    /// Scores per query id (`SPLIT:INDEX` for a pair, the analysed word for
    /// a dictionary word).
    pub per_query: std::collections::BTreeMap<String, Metrics>,
    /// Per query id, its text: a pair's source text, a word's translations.
    pub texts: std::collections::BTreeMap<String, String>,
}

/// Per-pair scores of sentence retrieval from each usable pair's rank of
/// its translation (ties against the answer, as `eval`'s MRR): `rows` the
/// pairs' indices in a split of `pairs` pairs named `name`, `texts(i)` pair
/// i's source and target text. The fingerprint covers every scored pair's
/// index and texts, so only the same pairs are paired.
fn sentence_paired<'a>(
    model: &str,
    name: &str,
    pairs: usize,
    rows: &[usize],
    ranks: &[crate::eval::sentence::TiedRank],
    texts: impl Fn(usize) -> [&'a str; 2],
) -> Result<PairedScores> {
    use crate::eval::compare::Task as Over;
    if rows.is_empty() || rows.len() != ranks.len() {
        return Err(Error::invalid(format!(
            "the {name} split has no usable pairs: nothing to compare on"
        )));
    }
    let width = pairs.saturating_sub(1).to_string().len();
    let id = |i: usize| format!("{name}:{i:0width$}");
    let mut h = blake3::Hasher::new();
    for &i in rows {
        h.update(&(i as u64).to_le_bytes());
        for text in texts(i) {
            h.update(&(text.len() as u64).to_le_bytes());
            h.update(text.as_bytes());
        }
    }
    let per_query = rows
        .iter()
        .zip(ranks)
        .map(|(&i, r)| {
            let first = f64::from(u8::from(r.against == 1));
            let m = Metrics {
                mrr: 1.0 / r.against as f64,
                p1: first,
                top1: first,
                ..Default::default()
            };
            (id(i), m)
        })
        .collect();
    Ok(PairedScores {
        model: model.to_string(),
        task: Over {
            name: "parallel sentence retrieval".into(),
            split: Some(name.to_string()),
            queries: rows.len(),
            judgements: h.finalize().to_hex()[..16].to_string(),
            collection: String::new(),
        },
        per_query,
        texts: rows
            .iter()
            .map(|&i| (id(i), texts(i)[0].to_string()))
            .collect(),
    })
}

/// A session's per-query scores on `task` (sentence retrieval or lexicon
/// induction; see [`PairedTask`]), a trained model loaded on the CPU; a
/// BM25 baseline scores sentence retrieval only (its own ranking of the
/// split, as `eval` computes it).
/// What they are over ([`Task`](crate::eval::compare::Task)) names
/// the task and split and fingerprints what pairs queries: for sentence
/// retrieval the split's pairs (every pair's index, source and target text:
/// the candidates each pair is ranked among), for lexicon induction the
/// dictionary's test part as the session analyses it (each source word and
/// its translations), so two sessions pair only on the same pairs or the
/// same test words. Writes nothing in the session folder (`rosetta eval`
/// records the dictionary split; this does not). Errors for a lexical
/// baseline on lexicon induction (see [`PairedTask::lexical_reason`]), for the ad-hoc task (read
/// it with [`super::Workbench::adhoc_scores`]), when the workspace changed
/// since the session was made, and when nothing can be scored.
pub fn paired_scores(
    dir: &Path,
    task: PairedTask,
    progress: &dyn Fn(f64, &str),
) -> Result<PairedScores> {
    use crate::eval::compare::Task as Over;
    let session = Session::open(dir)?;
    if session.is_lexical() {
        if let PairedTask::Sentence(which) = task {
            // a BM25 baseline ranks the split's target sentences itself
            progress(0.0, "ranking the split's sentences with BM25");
            let ws =
                Workspace::load_with_text(&session.config.workspace, session.config.text.as_ref())?;
            session
                .config
                .check_workspace_hash(dir, &ws.content_hash()?)?;
            let baseline = Bm25Baseline::new(
                &session.config.model,
                &Params::new(session.config.run_params()),
            )?;
            let name = which.name();
            let split = ws.splits()?.get(name).cloned().ok_or_else(|| {
                Error::file(&ws.path, format!("the workspace has no {name} split"))
            })?;
            let (rows, ranks) = baseline.sentence_ranks(&ws, &split)?;
            let texts = |i: usize| [split.source[i].as_str(), split.target[i].as_str()];
            return sentence_paired(
                &session.config.model,
                name,
                split.len(),
                &rows,
                &ranks,
                texts,
            );
        }
        let why = task
            .lexical_reason(&session.config.model)
            .unwrap_or_else(|| "a BM25 baseline's ad-hoc scores come from the workbench".into());
        return Err(Error::invalid(why));
    }
    progress(0.0, "loading the model");
    let l = Loaded::open(dir, &candle_core::Device::Cpu)?;
    let ws =
        Workspace::load_with_text(&l.session.config.workspace, l.session.config.text.as_ref())?;
    let prepared = Prepared::load_or_build(&ws)?;
    l.session.config.check_workspace_hash(dir, &prepared.hash)?;
    super::check_same_terms(dir, &l.vocabs, &prepared.vocabs)?;
    let model = l.session.config.model.clone();
    match task {
        PairedTask::Adhoc => Err(Error::invalid(
            "the ad-hoc task's per-query scores come from the workbench (adhoc_scores)",
        )),
        PairedTask::Sentence(which) => {
            let name = which.name();
            let split = match which {
                Split::Valid => &prepared.valid,
                Split::Test => &prepared.test,
            };
            let rows = split.nonblank();
            if rows.is_empty() {
                return Err(Error::file(
                    &ws.path,
                    format!("the {name} split has no usable pairs: nothing to compare on"),
                ));
            }
            progress(
                0.3,
                &format!("encoding the {name} split's {} pairs", rows.len()),
            );
            let (s, t) = encode_pairs(&l, &prepared, split, &rows)?;
            progress(0.8, "ranking");
            // ranked as the session ranks (its `rerank` setting)
            let ranks = match l.session.rerank()? {
                Some(r) => {
                    let texts = |v: &[String]| -> Vec<String> {
                        rows.iter().map(|&i| v[i].clone()).collect()
                    };
                    rerank::sentence_reranked_ranks(
                        l.model.as_ref(),
                        &texts(&split.src_text),
                        &texts(&split.tgt_text),
                        &s,
                        &t,
                        r.depth,
                        r.weight,
                        &|f, w| progress(0.8 + 0.2 * f, w),
                    )?
                }
                None => crate::eval::sentence::aligned_ranks_both(&s, &t, l.model.similarity()),
            };
            let texts = |i: usize| [split.src_text[i].as_str(), split.tgt_text[i].as_str()];
            sentence_paired(&model, name, split.pairs(), &rows, &ranks, texts)
        }
        PairedTask::Bli { seed, csls } => {
            let Some(dict) = ws.read_dictionary()? else {
                return Err(Error::file(
                    &ws.path,
                    "the workspace has no [dictionary]: no lexicon induction to compare on",
                ));
            };
            if let Some(what) = fitted_elsewhere(&l.session.config, seed) {
                return Err(Error::invalid(format!("lexicon induction: {what}")));
            }
            let (scored, split) = bli_test_part(&l, &dict, seed);
            progress(0.3, "ranking the target words");
            let ranks = super::retrieval::bli_ranks(&l, &scored, csls)?;
            if ranks.is_empty() {
                return Err(Error::file(
                    &ws.path,
                    format!(
                        "lexicon induction: no word of the dictionary's test part (seed {seed}, \
                         {} words) has itself and a translation in the session's vocabularies",
                        split.test.len()
                    ),
                ));
            }
            // the test part as analysed, translations in order: what pairs words
            let mut entries: Vec<(&String, Vec<&String>)> = scored
                .iter()
                .map(|(w, ts)| {
                    let mut ts: Vec<&String> = ts.iter().collect();
                    ts.sort();
                    ts.dedup();
                    (w, ts)
                })
                .collect();
            entries.sort();
            let mut h = blake3::Hasher::new();
            for (w, ts) in &entries {
                h.update(w.as_bytes());
                for t in ts {
                    h.update(b"\0");
                    h.update(t.as_bytes());
                }
                h.update(b"\n");
            }
            let hit = |r: usize, k: usize| f64::from(u8::from(r <= k));
            let per_query = ranks
                .iter()
                .map(|(w, r)| {
                    let m = Metrics {
                        p1: hit(*r, 1),
                        p5: hit(*r, 5),
                        p10: hit(*r, 10),
                        top1: hit(*r, 1),
                        ..Default::default()
                    };
                    (w.clone(), m)
                })
                .collect();
            let texts = entries
                .iter()
                .map(|(w, ts)| {
                    let ts: Vec<&str> = ts.iter().map(|t| t.as_str()).collect();
                    ((*w).clone(), format!("→ {}", ts.join(", ")))
                })
                .collect();
            Ok(PairedScores {
                model,
                task: Over {
                    name: format!(
                        "lexicon induction ({})",
                        if csls { "CSLS" } else { "nearest neighbours" }
                    ),
                    split: Some(format!("dictionary seed-{seed} test")),
                    queries: split.test.len(),
                    judgements: h.finalize().to_hex()[..16].to_string(),
                    collection: String::new(),
                },
                per_query,
                texts,
            })
        }
    }
}
