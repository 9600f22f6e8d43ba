//! Sessions kept loaded for interactive use (the workbench, and `rosetta
//! compare --sessions`): a cache of [`Searcher`]s and of the workspace
//! [`Corpus`]es they share, with search, neighbours, the sessions' ad-hoc
//! comparison ([`crate::eval::compare`]) and a workspace's figures for the
//! Data screen. Everything here may be slow; callers run it off their UI
//! thread.
//!
//! A session's per-query ad-hoc scores are cached on disk in the session
//! folder ([`SCORES_CACHE`]), keyed on the size and modification time of its
//! config, status, metrics, vocabularies and checkpoints, on its
//! workspace's content hash and on Rosetta's version: a comparison after a
//! restart reads them instead of loading each model again, and any change
//! to the session or its data makes them be computed afresh.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::collection::{self, Estimate};
use super::evaluate::{paired_scores, PairedTask};
use super::search::{
    Corpus, DenseSearch, Document, NeighbourResult, Opened, SearchResult, Searcher,
};
use super::Session;
use crate::corpus::Workspace;
use crate::eval::compare::{CompareOptions, Comparison, Skipped, System, Task};
use crate::eval::Metrics;
use crate::index::fusion::Fusion;
use crate::text::{Side, TextConfig};
use crate::{Error, Result};

/// A loaded search index.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IndexInfo {
    /// The session's label (its folder name).
    pub session: String,
    /// Number of documents.
    pub docs: usize,
    /// Query ids of the workspace that have relevance judgements, with their text.
    pub judged_queries: Vec<(String, String)>,
}

/// One split of a workspace.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SplitStats {
    /// Split name (`train`, `valid`, `test`, `docs`, `queries`).
    pub name: String,
    /// Number of pairs or texts.
    pub size: usize,
    /// Share of source-language tokens outside the vocabulary.
    pub source_oov: Option<f64>,
    /// Share of target-language tokens outside the vocabulary.
    pub target_oov: Option<f64>,
}

/// Figures about a workspace (the Data screen's; `rosetta data inspect`'s).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WorkspaceStats {
    /// Workspace file.
    pub path: String,
    /// Source (query) language code.
    pub source_lang: String,
    /// Target (document) language code.
    pub target_lang: String,
    /// Splits with sizes and OOV rates.
    pub splits: Vec<SplitStats>,
    /// Other named figures (vocabulary sizes, coverage, dictionary coverage).
    pub figures: Vec<(String, String)>,
}

/// A loaded searcher with the time of the model it loaded.
type Cached = (Arc<Searcher>, Option<std::time::SystemTime>);

/// What a refusal to encode was measured against: the model's time and
/// the time of the session's collection cache meta file (an index build
/// that finishes writes it).
type RefusalStamp = (Option<std::time::SystemTime>, Option<std::time::SystemTime>);

/// Opening a session's index ([`Workbench::open_index`]).
#[derive(Debug, Clone, PartialEq)]
pub enum IndexOpening {
    /// Loaded: ready to search.
    Ready(IndexInfo),
    /// The collection is not encoded, and encoding it would take longer than
    /// the workbench's limit ([`Workbench::with_encode_limit`]): nothing was
    /// encoded. `command` builds the index as a job.
    NeedsBuild {
        /// The estimate, measured on a sample of the collection.
        estimate: Estimate,
        /// `rosetta index build --session DIR --detach`.
        command: String,
    },
}

/// Loaded sessions and workspace collections, kept for later calls. Safe to
/// share between threads.
#[derive(Default)]
pub struct Workbench {
    sessions: Mutex<HashMap<PathBuf, Cached>>,
    /// By workspace file and the text settings read with it.
    corpora: Mutex<HashMap<(PathBuf, String), Arc<Corpus>>>,
    /// Seconds of encoding a collection that loading a session may start;
    /// `None`: any.
    max_encode_s: Option<f64>,
    /// Sessions refused for a long encoding, with what the refusal was
    /// measured against: asked again unchanged, they are refused at once
    /// (the model is not loaded and timed again).
    refused: Mutex<HashMap<PathBuf, (RefusalStamp, Estimate)>>,
}

/// The stamp a refusal of session `dir` holds while nothing changed.
fn refusal_stamp(dir: &Path) -> RefusalStamp {
    let meta = collection::cache_meta_path(dir, Side::Target);
    (
        Searcher::model_stamp(dir),
        std::fs::metadata(meta).and_then(|m| m.modified()).ok(),
    )
}

/// A session's label: its folder name.
pub fn session_label(dir: &Path) -> String {
    dir.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Error unless the session in `dir` can be searched: a lexical baseline, or
/// a model with a checkpoint.
pub fn ensure_searchable(dir: &Path) -> Result<()> {
    let session = Session::open(dir)?;
    if session.is_lexical() || Searcher::model_stamp(dir).is_some() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{} has no checkpoint yet: wait until it has trained an epoch",
            session_label(dir)
        )))
    }
}

impl Workbench {
    /// An empty cache.
    pub fn new() -> Workbench {
        Workbench::default()
    }

    /// The collection of the workspace file `path`, with the text settings
    /// a session recorded when given (see [`Corpus::load`]), loaded once.
    pub fn corpus(
        &self,
        path: &Path,
        text: Option<&TextConfig>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Arc<Corpus>> {
        let key = (
            path.to_path_buf(),
            serde_json::to_string(&text).unwrap_or_default(),
        );
        if let Some(c) = self.corpora.lock().expect("workbench lock").get(&key) {
            return Ok(c.clone());
        }
        // built outside the lock: other requests go on meanwhile
        let c = Arc::new(Corpus::load(path, text, progress)?);
        Ok(self
            .corpora
            .lock()
            .expect("workbench lock")
            .entry(key)
            .or_insert(c)
            .clone())
    }

    /// This workbench starting no encoding of a collection estimated (on a
    /// sample, [`collection::estimate`]) to take more than `max_encode_s`
    /// seconds: loading such a session is refused with the estimate and the
    /// `rosetta index build` command ([`Workbench::open_index`] answers
    /// [`IndexOpening::NeedsBuild`]). `None` (the default): any encoding.
    pub fn with_encode_limit(mut self, max_encode_s: Option<f64>) -> Workbench {
        self.max_encode_s = max_encode_s;
        self
    }

    /// The session's searcher (see [`ensure_searchable`]), loaded again when
    /// its model changed since (a job still training when first searched).
    /// An encoding over the workbench's limit is refused
    /// ([`collection::too_long`]: the estimate and the command).
    pub fn searcher(&self, dir: &Path, progress: &dyn Fn(f64, &str)) -> Result<Arc<Searcher>> {
        match self.open_searcher(dir, progress)? {
            Ok(s) => Ok(s),
            Err(e) => Err(collection::too_long(dir, &e, None)),
        }
    }

    /// [`Workbench::searcher`], an encoding over the limit answered with its
    /// estimate.
    fn open_searcher(
        &self,
        dir: &Path,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Result<Arc<Searcher>, Estimate>> {
        let stamp = Searcher::model_stamp(dir);
        if let Some((s, at)) = self.sessions.lock().expect("workbench lock").get(dir) {
            if *at == stamp {
                return Ok(Ok(s.clone()));
            }
        }
        if self.max_encode_s.is_some() {
            let refused = self.refused.lock().expect("workbench lock");
            if let Some((at, e)) = refused.get(dir) {
                if *at == refusal_stamp(dir) {
                    return Ok(Err(e.clone()));
                }
            }
        }
        ensure_searchable(dir)?;
        if let Some(limit) = self.max_encode_s {
            // a refusal measured before comes without loading anything
            if let Some(e) = collection::recorded_too_long(dir, "cpu", limit) {
                return Ok(Err(e));
            }
        }
        let session = Session::open(dir)?;
        let corpus = self.corpus(
            &session.config.workspace,
            session.config.text.as_ref(),
            progress,
        )?;
        let before = refusal_stamp(dir);
        let s: Arc<Searcher> = match Searcher::open_checked(
            dir,
            corpus,
            DenseSearch::Saved,
            self.max_encode_s,
            progress,
        )? {
            Opened::Ready(s) => Arc::from(s),
            Opened::TooLong(e) => {
                self.refused
                    .lock()
                    .expect("workbench lock")
                    .insert(dir.to_path_buf(), (before, e.clone()));
                return Ok(Err(e));
            }
        };
        self.refused.lock().expect("workbench lock").remove(dir);
        self.sessions
            .lock()
            .expect("workbench lock")
            .insert(dir.to_path_buf(), (s.clone(), stamp));
        Ok(Ok(s))
    }

    /// Loads a session's model and encodes its workspace's documents (an
    /// encoding over the workbench's limit is an error: see
    /// [`Workbench::open_index`]).
    pub fn load_index(&self, dir: &Path, progress: &dyn Fn(f64, &str)) -> Result<IndexInfo> {
        match self.open_index(dir, progress)? {
            IndexOpening::Ready(info) => Ok(info),
            IndexOpening::NeedsBuild { estimate, .. } => {
                Err(collection::too_long(dir, &estimate, None))
            }
        }
    }

    /// Loads a session's model and encodes its workspace's documents,
    /// unless that encoding is estimated to take longer than the
    /// workbench's limit: then nothing is encoded and the answer is the
    /// estimate with the command that builds the index as a job.
    pub fn open_index(&self, dir: &Path, progress: &dyn Fn(f64, &str)) -> Result<IndexOpening> {
        Ok(match self.open_searcher(dir, progress)? {
            Ok(l) => IndexOpening::Ready(IndexInfo {
                session: session_label(dir),
                docs: l.corpus.len(),
                judged_queries: l.corpus.judged_queries(),
            }),
            Err(estimate) => IndexOpening::NeedsBuild {
                estimate,
                command: collection::build_command(dir),
            },
        })
    }

    /// Ranks the documents for `query` ([`Searcher::search`]).
    pub fn search(
        &self,
        dir: &Path,
        query: &str,
        k: usize,
        fusion: Fusion,
    ) -> Result<SearchResult> {
        self.searcher(dir, &|_, _| {})?.search(query, k, fusion)
    }

    /// One whole document by id or label, the words related to `query`
    /// marked ([`Searcher::document`]).
    pub fn document(&self, dir: &Path, name: &str, query: Option<&str>) -> Result<Document> {
        self.searcher(dir, &|_, _| {})?.document(name, query)
    }

    /// Nearest terms of `term` in both languages, translations marked
    /// ([`Searcher::neighbours`]).
    pub fn neighbours(
        &self,
        dir: &Path,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult> {
        self.searcher(dir, &|_, _| {})?
            .neighbours(term, side, k, csls)
    }

    /// Judged query `qid`'s ranking by the session's model alone, its best
    /// `k` documents ([`Searcher::judged_ranking`]).
    pub fn judged_ranking(
        &self,
        dir: &Path,
        qid: &str,
        k: usize,
    ) -> Result<super::search::JudgedRanking> {
        self.searcher(dir, &|_, _| {})?.judged_ranking(qid, k)
    }

    /// The session's per-query scores on its workspace's ad-hoc task (the
    /// model alone, [`Searcher::adhoc_evaluation`]), read from its
    /// [`SCORES_CACHE`] when that is current, else computed (loading the
    /// session: slow) and cached. `progress(fraction, what)` reports the
    /// loading. A cache that cannot be written is not an error: the
    /// scores come back with `cache_note` saying why.
    pub fn adhoc_scores(&self, dir: &Path, progress: &dyn Fn(f64, &str)) -> Result<AdhocScores> {
        let key = ScoresKey::of(dir)?;
        let path = dir.join(SCORES_CACHE);
        // a regular file only, never through a link, within a bound: a
        // FIFO or a device there is no cache (and never a read that waits)
        if let Some(c) = crate::util::read_regular(&path, crate::util::Links::Refuse, 256 << 20)
            .ok()
            .and_then(|b| serde_json::from_slice::<CachedScores>(&b).ok())
            .filter(|c| c.key == key && c.scores.plausible())
        {
            progress(1.0, "read from the cache");
            return Ok(AdhocScores {
                cached: true,
                cache_note: None,
                ..c.scores
            });
        }
        let s = self.searcher(dir, &|f, w| progress(f * 0.8, w))?;
        progress(0.8, "scoring the ad-hoc queries");
        let per_query = s.adhoc_evaluation()?.clone();
        if per_query.is_empty() {
            return Err(Error::invalid(format!(
                "the ad-hoc task of {} has no judged query",
                s.corpus.path.display()
            )));
        }
        let ws = &s.corpus.ws;
        let derived = ws.adhoc.is_none();
        let judged = s.corpus.judged_queries();
        let scores = AdhocScores {
            model: s.session.config.model.clone(),
            task: Task {
                name: if derived {
                    format!("{}: derived ad-hoc task", ws.name)
                } else {
                    format!("{}: ad-hoc collection", ws.name)
                },
                split: derived.then(|| "test".to_string()),
                queries: judged.len(),
                judgements: crate::eval::compare::judgements_fingerprint(
                    &s.corpus.qrels.judgements,
                    &judged.iter().cloned().collect(),
                ),
                collection: s.corpus.collection_fingerprint(),
            },
            per_query,
            labels: judged
                .iter()
                .filter_map(|(q, _)| {
                    let l = s.corpus.query_label(q);
                    (l != q).then(|| (q.clone(), l.to_string()))
                })
                .collect(),
            texts: judged.into_iter().collect(),
            cached: false,
            cache_note: None,
        };
        let cached = CachedScores {
            key,
            scores: scores.clone(),
        };
        let written = serde_json::to_vec(&cached)
            .map_err(|e| Error::invalid(e.to_string()))
            .and_then(|b| crate::util::write_atomic(&path, &b));
        progress(1.0, "scored");
        Ok(AdhocScores {
            cache_note: written
                .err()
                .map(|e| format!("{}: scores not cached: {e}", session_label(dir))),
            ..scores
        })
    }

    /// Sessions `(label, folder)` compared on each one's own workspace's
    /// ad-hoc task ([`Workbench::adhoc_scores`], cached) against the
    /// session labelled `baseline`, if any. A session that cannot be scored
    /// (no model yet, no judged query, ...) is an error naming it, or with
    /// `skip_unusable` is listed in the table's `skipped` (and a skipped
    /// baseline leaves the table without one). `progress(fraction, what)`
    /// reports the whole comparison from 0 to 1, `what` naming the session
    /// (`lsi (1/2): encoding documents`).
    pub fn compare(
        &self,
        sessions: &[(String, PathBuf)],
        baseline: Option<&str>,
        options: &CompareOptions,
        skip_unusable: bool,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Comparison> {
        self.compare_on(
            PairedTask::Adhoc,
            sessions,
            baseline,
            options,
            skip_unusable,
            progress,
        )
    }

    /// [`Workbench::compare`] on `task`: the ad-hoc task as there, or
    /// each session's per-pair sentence-retrieval or per-word
    /// lexicon-induction scores ([`paired_scores`], computed afresh, never
    /// cached). A session is tested against the baseline only when both
    /// were scored on the same task (the same split's pairs, the same
    /// dictionary test part: see [`paired_scores`]), else shown untested
    /// with the reason. A lexical baseline (BM25) is scored on sentence
    /// retrieval by its own ranking; on lexicon induction it is left out
    /// (`skipped`) with the reason
    /// ([`PairedTask::lexical_reason`]); as the baseline, an error. Errors
    /// when `options` names a metric the task does not score.
    pub fn compare_on(
        &self,
        task: PairedTask,
        sessions: &[(String, PathBuf)],
        baseline: Option<&str>,
        options: &CompareOptions,
        skip_unusable: bool,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Comparison> {
        options.validate()?;
        task.check_metrics(&options.metrics)?;
        let mut systems = Vec::with_capacity(sessions.len());
        let mut skipped = Vec::new();
        let mut notes = Vec::new();
        let n = sessions.len();
        for (i, (label, dir)) in sessions.iter().enumerate() {
            let step = |f: f64, what: &str| {
                progress(
                    (i as f64 + f.clamp(0.0, 1.0)) / n as f64,
                    &format!("{label} ({}/{n}): {what}", i + 1),
                )
            };
            step(0.0, "starting");
            if task != PairedTask::Adhoc {
                let session =
                    Session::open(dir).map_err(|e| Error::invalid(format!("{label}: {e}")))?;
                if let Some(why) = task.lexical_reason(&session.config.model) {
                    if session.is_lexical() {
                        if baseline == Some(label.as_str()) {
                            return Err(Error::invalid(format!(
                                "the baseline {label}: {why}; choose another baseline"
                            )));
                        }
                        skipped.push(Skipped {
                            system: label.clone(),
                            reason: why,
                        });
                        continue;
                    }
                }
            }
            let scores = match task {
                PairedTask::Adhoc => self.adhoc_scores(dir, &step),
                _ => paired_scores(dir, task, &step).map(|p| AdhocScores {
                    model: p.model,
                    task: p.task,
                    per_query: p.per_query,
                    texts: p.texts,
                    ..Default::default()
                }),
            };
            match scores {
                Ok(s) => {
                    notes.extend(s.cache_note);
                    systems.push(System {
                        name: label.clone(),
                        detail: s.model,
                        task: s.task,
                        per_query: s.per_query,
                        texts: s.texts,
                        labels: s.labels,
                    });
                }
                Err(e) if skip_unusable => skipped.push(Skipped {
                    system: label.clone(),
                    reason: e.to_string(),
                }),
                Err(e) => {
                    // an error naming the session's folder names it already
                    let m = e.to_string();
                    return Err(if m.starts_with(&format!("{label}: ")) {
                        e
                    } else {
                        Error::invalid(format!("{label}: {m}"))
                    });
                }
            }
        }
        progress(1.0, "done");
        let baseline = baseline.filter(|b| !skipped.iter().any(|s| s.system == *b));
        let mut table = Comparison::build(&systems, baseline, options)?;
        table.skipped = skipped;
        table.notes = notes;
        Ok(table)
    }
}

pub use crate::session::files::SCORES_CACHE;

/// The layout of [`SCORES_CACHE`]; raised when what it holds changes.
const SCORES_FORMAT: u32 = 3;

/// Files of a session whose change makes its cached scores stale.
const SCORED_FILES: [&str; 7] = [
    super::CONFIG_FILE,
    super::STATUS_FILE,
    super::METRICS_FILE,
    super::VOCAB_SOURCE,
    super::VOCAB_TARGET,
    super::BEST_CHECKPOINT,
    super::LAST_CHECKPOINT,
];

/// A session's per-query scores on one task: its workspace's ad-hoc task
/// ([`Workbench::adhoc_scores`]), or sentence retrieval or lexicon
/// induction ([`paired_scores`], read into this form by
/// [`Workbench::compare_on`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AdhocScores {
    /// The session's model.
    pub model: String,
    /// The task scored: workspace, split and judged queries.
    pub task: Task,
    /// Scores per judged query id.
    pub per_query: BTreeMap<String, Metrics>,
    /// The judged queries' texts by id.
    pub texts: BTreeMap<String, String>,
    /// The judged queries' labels by id (verse references), where the
    /// collection has them.
    pub labels: BTreeMap<String, String>,
    /// Whether they were read from the cache.
    #[serde(skip)]
    pub cached: bool,
    /// Why they could not be cached, if they could not.
    #[serde(skip)]
    pub cache_note: Option<String>,
}

impl AdhocScores {
    /// Whether these scores could have been computed: one set of figures
    /// per judged query the task counts, each figure finite and within
    /// [0, 1] (every metric is a rate). A cache failing this (an edited
    /// `adhoc-scores.json` claiming an MRR of 2.3) is computed again.
    fn plausible(&self) -> bool {
        self.per_query.len() == self.task.queries
            && self.per_query.values().all(|m| {
                serde_json::to_value(m).is_ok_and(|v| {
                    v.as_object().is_some_and(|o| {
                        o.values().all(|x| {
                            x.as_f64()
                                .is_some_and(|f| f.is_finite() && (0.0..=1.0).contains(&f))
                        })
                    })
                })
            })
    }
}

/// What the cached scores were computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ScoresKey {
    /// The cache's layout ([`SCORES_FORMAT`]): a cache of another layout
    /// (one before tasks had a judgements fingerprint) is read as stale.
    format: u32,
    /// Rosetta's version (scoring may change between versions).
    rosetta: String,
    /// The run depth scored.
    depth: usize,
    /// The workspace's content hash as read with the session's text settings.
    workspace_hash: String,
    /// Per file of [`SCORED_FILES`]: its stamp, or `None` when absent.
    files: Vec<(String, Option<FileStamp>)>,
}

/// A file's size and modification time (seconds and nanoseconds since the epoch).
type FileStamp = (u64, u64, u32);

impl ScoresKey {
    fn of(dir: &Path) -> Result<ScoresKey> {
        let session = Session::open(dir)?;
        let ws =
            Workspace::load_with_text(&session.config.workspace, session.config.text.as_ref())?;
        let files = SCORED_FILES
            .iter()
            .map(|f| {
                let stamp = std::fs::metadata(dir.join(f)).ok().map(|m| {
                    let t = m
                        .modified()
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .unwrap_or_default();
                    (m.len(), t.as_secs(), t.subsec_nanos())
                });
                (f.to_string(), stamp)
            })
            .collect();
        Ok(ScoresKey {
            format: SCORES_FORMAT,
            rosetta: env!("CARGO_PKG_VERSION").to_string(),
            depth: super::retrieval::RUN_DEPTH,
            workspace_hash: ws.content_hash()?,
            files,
        })
    }
}

/// The cache file's content.
#[derive(Serialize, Deserialize)]
struct CachedScores {
    key: ScoresKey,
    scores: AdhocScores,
}

/// Figures of a workspace for the Data screen (`rosetta data inspect`'s).
pub fn workspace_stats(path: &Path) -> Result<WorkspaceStats> {
    let ws = Workspace::load(path)?;
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
        path: path.display().to_string(),
        source_lang: ins.source_lang.clone(),
        target_lang: ins.target_lang.clone(),
        splits,
        figures,
    })
}
