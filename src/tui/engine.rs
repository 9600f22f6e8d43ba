//! The engine-backed half of the workbench's backend: a cache of the
//! engine's [`Searcher`]s (a session over its workspace's collection: search
//! with fusion, neighbours, per-query ad-hoc figures) and the compare table
//! built from them, plus workspace figures. Everything here is slow and runs
//! on worker threads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::backend::{
    CompareRow, CompareTable, Fusion, IndexInfo, NeighbourResult, SearchResult, Significance,
    SplitStats, WorkspaceStats,
};
use crate::corpus::Workspace;
use crate::eval::{Correction, Metric, Metrics, PairedTest};
use crate::session::search::{Corpus, Searcher};
use crate::session::Session;
use crate::text::Side;
use crate::{Error, Result};

/// Metrics the compare table shows.
const COMPARE_METRICS: [Metric; 5] = [
    Metric::Mrr,
    Metric::Map,
    Metric::P1,
    Metric::P10,
    Metric::Ndcg10,
];
/// Significance level of the compare table's marks (after Holm correction).
const ALPHA: f64 = 0.05;

/// A loaded searcher with the time of the model it loaded.
type Cached = (Arc<Searcher>, Option<std::time::SystemTime>);

/// Loaded sessions and workspace collections (the engine's
/// [`Searcher`]s and [`Corpus`]es), kept for later calls.
#[derive(Default)]
pub struct Engine {
    sessions: Mutex<HashMap<PathBuf, Cached>>,
    corpora: Mutex<HashMap<PathBuf, Arc<Corpus>>>,
}

impl Engine {
    fn corpus(&self, path: &Path, progress: &dyn Fn(f64, &str)) -> Result<Arc<Corpus>> {
        if let Some(c) = self.corpora.lock().expect("engine lock").get(path) {
            return Ok(c.clone());
        }
        // built outside the lock: other requests go on meanwhile
        let c = Arc::new(Corpus::load(path, progress)?);
        Ok(self
            .corpora
            .lock()
            .expect("engine lock")
            .entry(path.to_path_buf())
            .or_insert(c)
            .clone())
    }

    /// The session's searcher, loaded again when its model changed since
    /// (a job that was still training when it was first searched).
    fn session(&self, dir: &Path, progress: &dyn Fn(f64, &str)) -> Result<Arc<Searcher>> {
        let stamp = Searcher::model_stamp(dir);
        if let Some((s, at)) = self.sessions.lock().expect("engine lock").get(dir) {
            if *at == stamp {
                return Ok(s.clone());
            }
        }
        let session = Session::open(dir)?;
        let corpus = self.corpus(&session.config.workspace, progress)?;
        let s = Arc::new(Searcher::open(dir, corpus, progress)?);
        self.sessions
            .lock()
            .expect("engine lock")
            .insert(dir.to_path_buf(), (s.clone(), stamp));
        Ok(s)
    }

    /// Loads a session's model and encodes its workspace's documents.
    pub fn load_index(
        &self,
        id: &str,
        dir: &Path,
        progress: &dyn Fn(f64, &str),
    ) -> Result<IndexInfo> {
        let l = self.session(dir, progress)?;
        Ok(IndexInfo {
            session: id.to_string(),
            docs: l.corpus.len(),
            judged_queries: l.corpus.judged_queries(),
        })
    }

    /// Ranks the documents for `query` (see [`Fusion`]).
    pub fn search(
        &self,
        dir: &Path,
        query: &str,
        k: usize,
        fusion: Fusion,
    ) -> Result<SearchResult> {
        self.session(dir, &|_, _| {})?.search(query, k, fusion)
    }

    /// Nearest terms of `term` in both languages, translations marked.
    pub fn neighbours(
        &self,
        dir: &Path,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult> {
        self.session(dir, &|_, _| {})?
            .neighbours(term, side, k, csls)
    }

    /// Sessions × metrics on each session's ad-hoc task (model alone), with
    /// paired t-tests against the baseline (Holm-corrected per metric).
    /// `sessions` are (id, folder, model) triples.
    pub fn compare(
        &self,
        sessions: &[(String, PathBuf, String)],
        baseline: Option<&str>,
        progress: &dyn Fn(usize, usize, &str),
    ) -> Result<CompareTable> {
        let mut evals = Vec::new();
        let mut skipped = Vec::new();
        for (i, (id, dir, model)) in sessions.iter().enumerate() {
            progress(i, sessions.len(), id);
            match self
                .session(dir, &|_, _| {})
                .and_then(|l| Ok(l.adhoc_evaluation()?.clone()))
            {
                Ok(e) => evals.push((id.clone(), model.clone(), e)),
                Err(e) => skipped.push((id.clone(), e.to_string())),
            }
        }
        let base = baseline
            .and_then(|b| evals.iter().find(|e| e.0 == b))
            .cloned();
        let mut marks: Vec<Vec<Significance>> =
            vec![vec![Significance::None; COMPARE_METRICS.len()]; evals.len()];
        let mut test = None;
        if let Some((bid, _, be)) = &base {
            for (mi, m) in COMPARE_METRICS.iter().enumerate() {
                let mut ps = Vec::new();
                let mut who = Vec::new();
                for (ri, (id, _, e)) in evals.iter().enumerate() {
                    if id == bid {
                        continue;
                    }
                    // pair on the queries both were scored on
                    let qs: Vec<&String> = e.keys().filter(|q| be.contains_key(*q)).collect();
                    let a: Vec<f64> = qs.iter().map(|q| e[*q].get(*m)).collect();
                    let b: Vec<f64> = qs.iter().map(|q| be[*q].get(*m)).collect();
                    if let Ok(r) = PairedTest::T.run(&a, &b) {
                        ps.push(r.p_value);
                        who.push((ri, r.mean_difference));
                    }
                }
                for (p, (ri, diff)) in Correction::Holm.adjust(&ps).into_iter().zip(who) {
                    if p < ALPHA && diff != 0.0 {
                        marks[ri][mi] = if diff > 0.0 {
                            Significance::Better
                        } else {
                            Significance::Worse
                        };
                    }
                }
            }
            test = Some(format!("paired t-test, Holm-corrected, p<{ALPHA}"));
        }
        let rows = evals
            .iter()
            .zip(marks)
            .map(|((id, model, e), marks)| {
                let mean = Metrics::mean(e.values());
                CompareRow {
                    session: id.clone(),
                    model: model.clone(),
                    values: COMPARE_METRICS
                        .iter()
                        .map(|m| (!e.is_empty()).then(|| mean.get(*m)))
                        .collect(),
                    marks,
                }
            })
            .collect();
        Ok(CompareTable {
            metrics: COMPARE_METRICS
                .iter()
                .map(|m| m.name().to_string())
                .collect(),
            rows,
            baseline: base.map(|b| b.0),
            test,
            skipped,
        })
    }
}

/// Figures of a workspace for the Data screen (`rosetta data inspect`'s).
pub fn workspace_stats(path: &str) -> Result<WorkspaceStats> {
    let ws = Workspace::load(Path::new(path))?;
    let ins = crate::corpus::inspect::Inspection::of(&ws)?;
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let mut splits: Vec<SplitStats> = ins
        .splits
        .iter()
        .map(|s| SplitStats {
            name: s.name.clone(),
            size: s.pairs,
            source_oov: Some(s.source.oov_rate),
            target_oov: Some(s.target.oov_rate),
        })
        .collect();
    splits.push(SplitStats {
        name: "docs".into(),
        size: ins.adhoc.docs.texts,
        source_oov: None,
        target_oov: Some(ins.adhoc.docs.oov_rate),
    });
    splits.push(SplitStats {
        name: "queries".into(),
        size: ins.adhoc.queries.texts,
        source_oov: Some(ins.adhoc.queries.oov_rate),
        target_oov: None,
    });
    let mut figures = vec![
        ("name".to_string(), ins.name.clone()),
        (
            format!("vocabulary {} / {}", ins.source_lang, ins.target_lang),
            format!("{} / {}", ins.source_vocab, ins.target_vocab),
        ),
        (
            "ad-hoc task".into(),
            format!(
                "{}{} judged queries, {} judgements ({} relevant)",
                if ins.adhoc.derived { "derived: " } else { "" },
                ins.adhoc.qrels_queries,
                ins.adhoc.qrels_judgements,
                ins.adhoc.qrels_relevant
            ),
        ),
        (
            "monolingual texts".into(),
            format!(
                "{} (OOV {})",
                ins.monolingual.texts,
                pct(ins.monolingual.oov_rate)
            ),
        ),
    ];
    for s in &ins.splits {
        figures.push((
            format!(
                "{} coverage {} / {}",
                s.name, ins.source_lang, ins.target_lang
            ),
            format!("{} / {}", pct(s.source.coverage), pct(s.target.coverage)),
        ));
    }
    match &ins.dictionary {
        Some(d) => {
            figures.push((
                "dictionary".into(),
                format!("{} ({} headwords)", d.path, d.headwords),
            ));
            figures.push((
                "dictionary covers vocabulary".into(),
                format!(
                    "{} {} / {} {}",
                    ins.source_lang,
                    pct(d.source_vocab_coverage),
                    ins.target_lang,
                    pct(d.target_vocab_coverage)
                ),
            ));
            figures.push((
                "dictionary covers source tokens".into(),
                pct(d.source_token_coverage),
            ));
        }
        None => figures.push(("dictionary".into(), "none".into())),
    }
    Ok(WorkspaceStats {
        path: path.to_string(),
        source_lang: ins.source_lang.clone(),
        target_lang: ins.target_lang.clone(),
        splits,
        figures,
    })
}

/// The error for a session that cannot be searched yet.
pub fn not_finished(id: &str) -> Error {
    Error::invalid(format!(
        "{id} has no checkpoint yet: wait until it has trained an epoch"
    ))
}
