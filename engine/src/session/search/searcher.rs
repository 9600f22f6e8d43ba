//! A session ready to search its collection ([`Searcher`]): the model's
//! ranking (exact, or through the session's HNSW graph), fusion with BM25,
//! whole documents and the judged queries' figures.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use ndarray::Array1;
use serde::Serialize;
use unicode_segmentation::UnicodeSegmentation;

use super::align::{self, Alignment};
use super::explain::Explain;
use super::{
    marked_neighbours, Corpus, Hit, Judged, JudgedRanking, NeighbourResult, RankedDoc, SearchResult,
};
use crate::eval::metrics::{evaluate_rankings, query_metrics, Metrics};
use crate::index::adhoc::Translation;
use crate::index::fusion::{fuse, Fusion};
use crate::index::translate::translate_dict_units;
use crate::index::{ApproxIndex, Bm25Index, DenseIndex, Embeddings, HnswParams, Query};
use crate::models::bm25::Bm25Baseline;
use crate::models::kit::late::LateRerank;
use crate::models::{Params, TextRole};
use crate::session::retrieval::RUN_DEPTH;
use crate::session::{collection, Loaded, Session};
use crate::text::{Analyzer, Dropped, QueryWords, Side};
use crate::{Error, Result};

/// A ranked list of `(document id, score)`.
type Ranking = Vec<(String, f64)>;

enum Ranker {
    Dense {
        m: Box<Loaded>,
        dense: DenseIndex,
        /// Shared with the exact index and the HNSW graph, which search
        /// them in place: memory-mapped from the session's index when the
        /// model reads raw text (an encoder), else in memory.
        doc_emb: Embeddings,
        /// The session's HNSW graph, when it searches by one.
        approx: Option<Box<ApproxIndex>>,
    },
    Lexical {
        baseline: Bm25Baseline,
        /// Its index: the corpus's ([`Corpus::bm25`]), or its own when its
        /// BM25 parameters are not the corpus index's.
        index: Arc<Bm25Index>,
    },
}

pub use crate::session::files::HNSW_FILE;

/// How many documents an approximate model ranking asks for: the `k` shown
/// or this many, whichever is more (enough for fusion and a judged query's
/// metrics over the top of the list); the graph walk may reach fewer.
pub const APPROX_DEPTH: usize = 100;

/// How a trained model's ranking is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DenseSearch {
    /// One exact scan of every document per query.
    Exact,
    /// The session's saved HNSW graph when it has one built from the same
    /// document embeddings, else exact (the workbench, and `rosetta search`
    /// by default).
    #[default]
    Saved,
    /// The session's HNSW graph, built with these settings and saved in the
    /// session when it has none (`rosetta search --approx`).
    Approx(HnswParams),
}

/// What [`Searcher::open_checked`] found.
pub enum Opened {
    /// The session, ready to search.
    Ready(Box<Searcher>),
    /// Its collection is not encoded, and encoding it was estimated (on a
    /// sample) to take longer than allowed: nothing was encoded.
    TooLong(collection::Estimate),
}

/// A session ready to search its workspace's collection.
pub struct Searcher {
    /// The collection.
    pub corpus: Arc<Corpus>,
    /// The session.
    pub session: Session,
    ranker: Ranker,
    evaluation: OnceLock<BTreeMap<String, Metrics>>,
    /// The session's reranking by late interaction (its `rerank` setting):
    /// [`Searcher::search`], the judged rankings and the ad-hoc figures
    /// rank with it.
    rerank: Option<LateRerank>,
}

impl Searcher {
    /// Opens the session in `dir` over `corpus` (which must be its
    /// workspace's; see [`Corpus::load`]): loads the model on the CPU and
    /// encodes the documents, or for a lexical baseline builds its index.
    /// Refuses a session whose workspace changed since it was made.
    pub fn open(dir: &Path, corpus: Arc<Corpus>, progress: &dyn Fn(f64, &str)) -> Result<Searcher> {
        Searcher::open_with(dir, corpus, DenseSearch::Saved, progress)
    }

    /// [`Searcher::open`] searching a trained model's documents as `mode`
    /// says. `DenseSearch::Approx` on a lexical baseline, or on a model that
    /// ranks by another similarity than the cosine, is an error.
    pub fn open_with(
        dir: &Path,
        corpus: Arc<Corpus>,
        mode: DenseSearch,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Searcher> {
        Searcher::open_within(dir, corpus, mode, None, progress)
    }

    /// [`Searcher::open_with`] starting no encoding of the collection
    /// estimated ([`collection::estimate`], on a sample) to take more than
    /// `max_encode_s` seconds: that is an error giving the estimate and the
    /// `rosetta index build` command. `None`: any encoding, in the
    /// foreground, reported through `progress` batch by batch.
    pub fn open_within(
        dir: &Path,
        corpus: Arc<Corpus>,
        mode: DenseSearch,
        max_encode_s: Option<f64>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Searcher> {
        match Searcher::open_checked(dir, corpus, mode, max_encode_s, progress)? {
            Opened::Ready(s) => Ok(*s),
            Opened::TooLong(e) => Err(collection::too_long(dir, &e, None)),
        }
    }

    /// [`Searcher::open_within`] answering an encoding estimated to take
    /// more than `max_encode_s` seconds with [`Opened::TooLong`] and its
    /// estimate rather than an error, for a front-end that offers to build
    /// the index as a job (the workbench). Nothing is encoded or written
    /// then.
    pub fn open_checked(
        dir: &Path,
        corpus: Arc<Corpus>,
        mode: DenseSearch,
        max_encode_s: Option<f64>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Opened> {
        let session = Session::open(dir)?;
        if let DenseSearch::Approx(p) = mode {
            p.validate()?;
            if session.is_lexical() {
                return Err(Error::invalid(format!(
                    "{} is a BM25 baseline: approximate search applies to trained models' embeddings",
                    session.config.model
                )));
            }
        }
        session
            .config
            .check_workspace_hash(dir, &corpus.ws.content_hash()?)?;
        let ranker = if session.is_lexical() {
            progress(0.5, "building the baseline's index");
            let params = Params::new(session.config.run_params());
            let baseline = Bm25Baseline::new(&session.config.model, &params)?;
            let index = if baseline.params == crate::index::Bm25Params::default() {
                corpus.bm25()?
            } else {
                let docs: Vec<Vec<String>> = corpus
                    .doc_full
                    .iter()
                    .map(|t| corpus.tgt.analyze(t))
                    .collect();
                Arc::new(Bm25Index::build(&docs, baseline.params)?.with_docnos(&corpus.doc_ids)?)
            };
            Ranker::Lexical { baseline, index }
        } else {
            progress(0.45, "loading the model");
            let m = Loaded::open(dir, &candle_core::Device::Cpu)?;
            let texts = &corpus.doc_full;
            // an encoder's collection, encoded once into the session, is
            // searched from the disk (memory-mapped), not read into memory;
            // a damaged table is an error naming it
            let mapped = if m.model.reads_text() {
                m.collection_cache(Side::Target, texts)?.map()?
            } else {
                None
            };
            let doc_emb = match mapped {
                Some(e) => e,
                None => {
                    if let Some(e) = collection::check_within(
                        &m,
                        "cpu",
                        Side::Target,
                        texts,
                        max_encode_s,
                        &|what| progress(0.5, what),
                    )? {
                        return Ok(Opened::TooLong(e));
                    }
                    progress(0.6, "encoding documents");
                    Embeddings::from(collection::encode_reporting(
                        &m,
                        Side::Target,
                        texts,
                        &|f, what| progress(0.6 + 0.2 * f, what),
                    )?)
                }
            };
            let dense = DenseIndex::new(doc_emb.clone())?
                .with_docnos(&corpus.doc_ids)?
                .with_similarity(m.model.similarity())?;
            let cosine = m.model.similarity() == crate::space::Similarity::Cosine;
            let path = dir.join(HNSW_FILE);
            let approx = match mode {
                DenseSearch::Exact => None,
                DenseSearch::Saved if !cosine => None,
                DenseSearch::Saved => {
                    progress(0.8, "reading the HNSW graph");
                    ApproxIndex::load_for(&path, doc_emb.clone())?
                }
                DenseSearch::Approx(_) if !cosine => {
                    return Err(Error::invalid(format!(
                        "{} ranks by the {} similarity: approximate search needs cosine embeddings",
                        session.config.model,
                        m.model.similarity().name()
                    )))
                }
                DenseSearch::Approx(p) => {
                    progress(0.8, "reading the HNSW graph");
                    match ApproxIndex::load_for(&path, doc_emb.clone())? {
                        Some(mut g) => {
                            g.set_ef_search(p.ef_search)?;
                            Some(g)
                        }
                        None => {
                            progress(
                                0.8,
                                &format!("building the HNSW graph ({} documents)", doc_emb.nrows()),
                            );
                            let g = ApproxIndex::build(doc_emb.clone(), p)?;
                            g.save(&path)?;
                            Some(g)
                        }
                    }
                }
            };
            let approx = approx
                .map(|g| g.with_docnos(&corpus.doc_ids).map(Box::new))
                .transpose()?;
            Ranker::Dense {
                m: Box::new(m),
                dense,
                doc_emb,
                approx,
            }
        };
        progress(1.0, "ready");
        let rerank = session.rerank()?;
        Ok(Opened::Ready(Box::new(Searcher {
            corpus,
            session,
            ranker,
            evaluation: OnceLock::new(),
            rerank,
        })))
    }

    /// When the model a searcher of `dir` would load was last written (the
    /// best checkpoint's time, else the last one's; `None` without either,
    /// as for a lexical baseline): a cache compares it to know when to load
    /// a session again.
    pub fn model_stamp(dir: &Path) -> Option<std::time::SystemTime> {
        [
            crate::session::BEST_CHECKPOINT,
            crate::session::LAST_CHECKPOINT,
        ]
        .iter()
        .find_map(|f| {
            std::fs::metadata(dir.join(f))
                .and_then(|m| m.modified())
                .ok()
        })
    }

    /// Opens a session with its own corpus, searching as `mode` says,
    /// encoding as [`Searcher::open_within`] allows. With `max_encode_s`, a
    /// refusal the session's kept estimate already gives
    /// ([`collection::refuse_recorded`]) comes before the collection is
    /// indexed or the model loaded.
    pub fn open_alone(
        dir: &Path,
        mode: DenseSearch,
        max_encode_s: Option<f64>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Searcher> {
        let session = Session::open(dir)?;
        if let Some(limit) = max_encode_s {
            // a refusal measured before comes without loading anything
            progress(0.02, "reading the session's estimate");
            collection::refuse_recorded(dir, "cpu", limit)?;
        }
        let corpus = Arc::new(Corpus::load(
            &session.config.workspace,
            session.config.text.as_ref(),
            progress,
        )?);
        Searcher::open_within(dir, corpus, mode, max_encode_s, progress)
    }

    /// The HNSW graph a trained model's ranking comes from, if it searches
    /// by one (then rankings hold the best [`APPROX_DEPTH`] documents, or
    /// `k` when more).
    pub fn approx(&self) -> Option<&ApproxIndex> {
        match &self.ranker {
            Ranker::Dense { approx, .. } => approx.as_deref(),
            Ranker::Lexical { .. } => None,
        }
    }

    /// Whether the session is a lexical baseline.
    pub fn is_lexical(&self) -> bool {
        matches!(self.ranker, Ranker::Lexical { .. })
    }

    /// What the ranker makes of each word of `query` (source language): the
    /// term it searches with, or why it drops the word. `rosetta search` and
    /// the workbench's Search screen report this.
    pub fn query_words(&self, query: &str) -> QueryWords {
        let c = &self.corpus;
        match &self.ranker {
            Ranker::Dense { m, .. } => {
                QueryWords::against(m.analyzer(Side::Source), query, &m.vocabs.source)
            }
            Ranker::Lexical { baseline, index } => {
                let by_units = baseline.translation != Translation::Dict;
                QueryWords::explain(&c.src, query, by_units, |t| match baseline.translation {
                    Translation::Dict => (!(c.dict.contains_key(t)
                        || baseline.keep_untranslated && index.contains(t)))
                    .then_some(Dropped::NoTranslation),
                    Translation::None => (!index.contains(t)).then_some(Dropped::NotInCollection),
                    // the translation decides: every word goes to it
                    Translation::Mt => None,
                })
            }
        }
    }

    /// The model's own ranking of every document it scores.
    fn model_ranking(&self, query: &str, k: usize) -> Result<(Ranking, Option<Array1<f32>>)> {
        let c = &self.corpus;
        match &self.ranker {
            Ranker::Dense {
                m, dense, approx, ..
            } => {
                let q = m.encode_texts(Side::Source, &[query])?;
                let hits = match approx {
                    // the zero vector (no unit of the query has weight) is
                    // answered below, before any ranking is used
                    Some(g) if q.iter().any(|v| *v != 0.0) => {
                        g.search(q.view(), k.max(APPROX_DEPTH))?.pop()
                    }
                    _ => dense.search(q.view(), c.len())?.pop(),
                }
                .unwrap_or_default();
                let ranked = hits
                    .iter()
                    .map(|h| (c.doc_ids[h.doc as usize].clone(), h.score))
                    .collect();
                Ok((ranked, Some(q.row(0).to_owned())))
            }
            Ranker::Lexical { baseline, index } => {
                let an = &c.src;
                let q = match baseline.translation {
                    // the corpus holds the analysed dictionary: no rereading per query
                    Translation::Dict => {
                        let words = an.analyze_words(query);
                        translate_dict_units(&words, &c.dict, baseline.keep_untranslated, &c.tgt)
                            .query
                    }
                    Translation::None => Query::from_tokens(&an.analyze(query)),
                    Translation::Mt => baseline.queries(&c.ws, &[query])?.pop().unwrap_or_default(),
                };
                let q = crate::index::expand::expand(index, &q, baseline.expansion).query;
                Ok((c.hits(index, &q), None))
            }
        }
    }

    /// The `k` best documents for `query` (source language), ranked by the
    /// model (reranked as the session's `rerank` setting says) or fused
    /// with BM25 over its dictionary translation.
    pub fn search(&self, query: &str, k: usize, fusion: Fusion) -> Result<SearchResult> {
        self.search_with(query, k, fusion, self.rerank)
    }

    /// The session's own reranking (its `rerank` setting), which
    /// [`Searcher::search`] uses.
    pub fn rerank(&self) -> Option<LateRerank> {
        self.rerank
    }

    /// [`Searcher::search`] with the model's ranking reranked by late
    /// interaction as `rerank` says, whatever the session's setting
    /// (`None`: the cosine ranking): its `depth` best documents scored
    /// `(1 − w)·cosine + w·MaxSim` as `eval --rerank maxsim:W` scores them
    /// ([`crate::session::rerank`]), before any fusion. Refused for a model
    /// with no token states (every model but an encoder).
    pub fn search_with(
        &self,
        query: &str,
        k: usize,
        fusion: Fusion,
        rerank: Option<LateRerank>,
    ) -> Result<SearchResult> {
        fusion.validate()?;
        if let Some(LateRerank { weight: w, depth }) = rerank {
            let has_states = match &self.ranker {
                Ranker::Dense { m, .. } => m
                    .model
                    .token_states(Side::Source, TextRole::Query, &[])
                    .is_some(),
                Ranker::Lexical { .. } => false,
            };
            if !has_states {
                let model = &self.session.config.model;
                return Err(crate::session::rerank::no_token_states(model));
            }
            if !(0.0..=1.0).contains(&w) || depth == 0 {
                return Err(Error::invalid(format!(
                    "rerank: MaxSim's weight {w} must lie in 0..1 and the depth {depth} be at least 1"
                )));
            }
        }
        if fusion.uses_bm25() && self.is_lexical() {
            return Err(Error::invalid(format!(
                "{} is itself a BM25 baseline: fusion with BM25 applies to trained models",
                self.session.config.model
            )));
        }
        let c = &self.corpus;
        let account = self.query_words(query);
        if let Some(why) = account.unanswerable() {
            return Ok(SearchResult {
                hits: Vec::new(),
                query: account,
                unanswerable: Some(why),
                judged: None,
                approximate: None,
            });
        }
        let (model, qv) = self.model_ranking(query, k)?;
        if qv.as_ref().is_some_and(|q| q.iter().all(|x| *x == 0.0)) {
            // units the model gave no weight (n-grams no training text used)
            return Ok(SearchResult {
                hits: Vec::new(),
                query: account,
                unanswerable: Some(
                    "the model maps the query to the zero vector: its units carry no weight in it"
                        .into(),
                ),
                judged: None,
                approximate: None,
            });
        }
        if model.is_empty() {
            // an MT baseline whose translation kept nothing searchable
            return Ok(SearchResult {
                hits: Vec::new(),
                query: account,
                unanswerable: Some("the translated query matches no document".into()),
                judged: None,
                approximate: None,
            });
        }
        // how many documents the model's list holds (an HNSW walk may reach
        // fewer than it was asked for)
        let model_depth = model.len();
        let (model, reranked) = match (rerank, &self.ranker) {
            (Some(LateRerank { weight: w, depth }), Ranker::Dense { m, .. }) => {
                let text = |d: &str| c.doc_full[c.rows[d]].clone();
                let mut r = crate::session::rerank::rerank_ranking(
                    m.model.as_ref(),
                    query,
                    &model,
                    text,
                    depth,
                    w,
                )?;
                (std::mem::take(&mut r.ranking), Some(r))
            }
            _ => (model, None),
        };
        let ranked = if fusion.uses_bm25() {
            fuse(&model, &c.bm25_dict(&c.src.analyze_words(query))?, fusion)
        } else {
            model
        };
        // a judged query: the first workspace query with the same words
        let words = Analyzer::words(query);
        let judged_q = c
            .queries
            .iter()
            .find(|(id, t)| c.qrels.judgements.contains_key(id) && Analyzer::words(t) == words);
        let judgements = judged_q.and_then(|(id, _)| c.qrels.judgements.get(id));
        let judged = judged_q.zip(judgements).map(|((id, _), j)| {
            let m = query_metrics(&ranked, j);
            Judged {
                label: c.query_label(id).to_string(),
                qid: id.clone(),
                rr: m.mrr,
                ap: m.map,
                relevant: j.values().filter(|g| **g > 0).count(),
            }
        });
        let shown: Vec<&str> = ranked
            .iter()
            .take(k)
            .map(|(docno, _)| c.doc_short[c.rows[docno]].as_str())
            .collect();
        let related = self.related(query, qv, &shown)?;
        let rows: Vec<usize> = ranked.iter().take(k).map(|(d, _)| c.rows[d]).collect();
        let mut aligned = self.alignments(query, &rows, reranked.as_ref())?;
        let hits = ranked
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, (docno, score))| {
                let d = c.rows[docno];
                let text = &c.doc_short[d];
                let mut spans = related.spans(c, text);
                let explained = related.explain.as_ref().and_then(|e| e.contributions(d));
                let a = aligned.as_mut().and_then(|v| v[i].take());
                let (mut contributions, mut rest) = match explained {
                    Some(e) => (e.words, Some(e.rest)),
                    None => (Vec::new(), None),
                };
                if let Some(a) = &a {
                    // the shown text is the full one's first characters
                    let full = &c.doc_full[d];
                    spans.extend(a.spans.iter().filter(|&&(x, y)| {
                        text.get(x..y).is_some_and(|w| full.get(x..y) == Some(w))
                    }));
                    spans.sort_unstable();
                    spans.dedup();
                    contributions = a.words.iter().map(|w| (w.query.clone(), w.share)).collect();
                    contributions.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
                    rest = Some(a.maxsim - a.words.iter().map(|w| w.share).sum::<f64>());
                }
                Hit {
                    rank: i + 1,
                    relevant: judgements.map(|j| j.get(docno).is_some_and(|g| *g > 0)),
                    label: c.label_of(d).to_string(),
                    docno: docno.clone(),
                    score: *score,
                    text: text.clone(),
                    spans,
                    rest,
                    contributions,
                    maxsim: a.as_ref().map(|a| a.maxsim),
                    aligned: a.map(|a| a.words).unwrap_or_default(),
                }
            })
            .collect();
        let approximate = self.approx().map(|g| {
            let m = g.meta();
            format!(
                "approximate: {} HNSW (M {}, efSearch {}), the best {} documents",
                m.library,
                m.params.m,
                m.params.ef_search.max(k.max(APPROX_DEPTH)),
                model_depth
            )
        });
        Ok(SearchResult {
            hits,
            query: account,
            unanswerable: None,
            judged,
            approximate,
        })
    }

    /// The token alignments ([`align::align`]) of `query` with the full
    /// texts of the documents `rows`, for a model with token states (an
    /// encoder); `None` for any other model. The token states a rerank
    /// already read (`known`) are used, not read again.
    fn alignments(
        &self,
        query: &str,
        rows: &[usize],
        known: Option<&crate::session::rerank::SearchRerank>,
    ) -> Result<Option<Vec<Option<Alignment>>>> {
        let Ranker::Dense { m, .. } = &self.ranker else {
            return Ok(None);
        };
        let query = query.to_string();
        let read;
        let q = match known {
            Some(k) => &k.query,
            None => {
                let Some(q) = m.model.token_states(
                    Side::Source,
                    TextRole::Query,
                    std::slice::from_ref(&query),
                ) else {
                    return Ok(None);
                };
                read = q?
                    .pop()
                    .ok_or_else(|| Error::invalid("encoder: no token states for the query"))?;
                &read
            }
        };
        let c = &self.corpus;
        let had = |r: usize| known.and_then(|k| k.docs.get(&c.doc_ids[r]));
        let missing: Vec<usize> = rows.iter().copied().filter(|&r| had(r).is_none()).collect();
        let texts: Vec<String> = missing.iter().map(|&r| c.doc_full[r].clone()).collect();
        let mut ds = m
            .model
            .token_states(Side::Target, TextRole::Document, &texts)
            .ok_or_else(|| Error::invalid("encoder: no token states for the documents"))??
            .into_iter();
        let mut out = Vec::with_capacity(rows.len());
        for &r in rows {
            let read_now;
            let d = match had(r) {
                Some(d) => d,
                None => {
                    read_now = ds.next().ok_or_else(|| {
                        Error::invalid("encoder: a document lost its token states")
                    })?;
                    &read_now
                }
            };
            out.push(align::align(&query, q, &c.doc_full[r], d));
        }
        Ok(Some(out))
    }

    /// What marks a document word as related to `query` (`qv` its vector
    /// in a dense model's space) in the target-language `texts` (the texts
    /// [`Related::spans`] will be asked about: a dense model's closeness is
    /// computed for their words only).
    fn related(&self, query: &str, qv: Option<Array1<f32>>, texts: &[&str]) -> Result<Related<'_>> {
        let c = &self.corpus;
        let query_words = c.src.analyze_words(query);
        let translations: HashSet<&str> = query_words
            .iter()
            .filter_map(|t| c.dict.get(t))
            .flatten()
            .map(String::as_str)
            .collect();
        let explain = match (&self.ranker, qv) {
            // an encoder is explained by its token alignment instead
            (Ranker::Dense { m, .. }, _)
                if m.model
                    .token_states(Side::Source, TextRole::Query, &[])
                    .is_some() =>
            {
                None
            }
            (Ranker::Dense { m, doc_emb, .. }, Some(q)) => {
                let shown: BTreeSet<u32> = texts
                    .iter()
                    .flat_map(|t| t.unicode_words())
                    .flat_map(|w| c.tgt.analyze(w))
                    .filter_map(|t| m.vocabs.target.id(&t))
                    .collect();
                let shown: Vec<u32> = shown.into_iter().collect();
                Some(Explain::new(m, doc_emb, query, q, &shown)?)
            }
            _ => None,
        };
        Ok(Related {
            translations,
            explain,
            query_words: query_words.into_iter().collect(),
        })
    }

    /// One whole document, named by id (`train:12`) or label (`John 1:8`;
    /// an unknown name is an error): its text uncut, its label, and its
    /// aligned source-language text where the collection has one. With a
    /// `query`, the words related to it are marked as in [`Searcher::search`]
    /// (and the query's own words in the source text). `rosetta search
    /// --show`/`--full` and the workbench's document view show this.
    pub fn document(&self, name: &str, query: Option<&str>) -> Result<Document> {
        let c = &self.corpus;
        let row = c.row_of(name)?;
        let text = c.doc_full[row].clone();
        let source = c.doc_sources.as_ref().map(|s| s[row].clone());
        let (spans, source_spans) = match query.map(str::trim).filter(|q| !q.is_empty()) {
            Some(q) => {
                let qv = match &self.ranker {
                    Ranker::Dense { m, .. } => {
                        let v = m.encode_texts(Side::Source, &[q])?.row(0).to_owned();
                        // a zero vector relates nothing
                        v.iter().any(|x| *x != 0.0).then_some(v)
                    }
                    Ranker::Lexical { .. } => None,
                };
                let related = self.related(q, qv, &[text.as_str()])?;
                let ss = source
                    .as_deref()
                    .map(|s| related.source_spans(c, s))
                    .unwrap_or_default();
                let mut spans = related.spans(c, &text);
                if let Some(Some(a)) = self.alignments(q, &[row], None)?.and_then(|mut v| v.pop()) {
                    spans.extend(a.spans);
                    spans.sort_unstable();
                    spans.dedup();
                }
                (spans, ss)
            }
            None => (Vec::new(), Vec::new()),
        };
        Ok(Document {
            docno: c.doc_ids[row].clone(),
            label: c.label_of(row).to_string(),
            lang: c.ws.target_lang.clone(),
            source_lang: c.ws.source_lang.clone(),
            text,
            spans,
            source,
            source_spans,
        })
    }

    /// Nearest terms of `term` in both languages, the dictionary's
    /// translations marked ([`marked_neighbours`]); `known` is false, with
    /// the reason, for a stop word or a word outside the vocabulary. A
    /// lexical baseline has no term space: an error.
    pub fn neighbours(
        &self,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult> {
        let Ranker::Dense { m, .. } = &self.ranker else {
            return Err(Error::invalid(format!(
                "{} is a lexical baseline: it has no term space to look up neighbours in",
                self.session.config.model
            )));
        };
        let c = &self.corpus;
        let dict = c.ws.dictionary.is_some().then_some((&c.dict, &c.dict_rev));
        marked_neighbours(m, term, side, k, csls, dict, Some(&c.dict_written))
    }

    /// The loaded model, or `None` for a lexical baseline (no term space).
    pub fn loaded(&self) -> Option<&Loaded> {
        match &self.ranker {
            Ranker::Dense { m, .. } => Some(m),
            Ranker::Lexical { .. } => None,
        }
    }

    /// Judged query `qid`'s ranking by the model alone, to the depth the
    /// ad-hoc scores use: its best `k` documents and where each relevant
    /// one came ([`JudgedRanking`]). An unknown or unjudged query id is an
    /// error.
    pub fn judged_ranking(&self, qid: &str, k: usize) -> Result<JudgedRanking> {
        let c = &self.corpus;
        let judgements = c.qrels.judgements.get(qid);
        let text = c
            .queries
            .iter()
            .find(|(q, _)| q == qid)
            .map(|(_, t)| t.clone());
        let (Some(j), Some(text)) = (judgements, text) else {
            return Err(Error::invalid(format!(
                "{qid}: not a judged query of {}",
                c.path.display()
            )));
        };
        let depth = RUN_DEPTH.min(c.len());
        let ranked: Ranking = match &self.ranker {
            Ranker::Dense { m, doc_emb, .. } => {
                // as adhoc_evaluation ranks: the exact scan to the depth
                let q = m.encode_texts(Side::Source, &[text.as_str()])?;
                let ranked: Ranking = crate::session::retrieval::rank(
                    doc_emb.view(),
                    &q,
                    &c.doc_ids,
                    depth,
                    m.model.similarity(),
                )
                .pop()
                .unwrap_or_default()
                .into_iter()
                .map(|(d, s)| (c.doc_ids[d].clone(), s))
                .collect();
                match self.rerank {
                    // as the session ranks
                    Some(r) => {
                        crate::session::rerank::rerank_ranking(
                            m.model.as_ref(),
                            &text,
                            &ranked,
                            |d: &str| c.doc_full[c.rows[d]].clone(),
                            r.depth,
                            r.weight,
                        )?
                        .ranking
                    }
                    None => ranked,
                }
            }
            Ranker::Lexical { .. } => {
                let mut r = self.model_ranking(&text, depth)?.0;
                r.truncate(depth);
                r
            }
        };
        let is_rel = |d: &str| j.get(d).is_some_and(|g| *g > 0);
        let hits = ranked
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, (d, score))| {
                let row = c.rows[d];
                RankedDoc {
                    rank: i + 1,
                    docno: d.clone(),
                    label: c.label_of(row).to_string(),
                    score: *score,
                    relevant: is_rel(d),
                    text: c.doc_short[row].clone(),
                }
            })
            .collect();
        let mut relevant: Vec<(String, Option<usize>)> = j
            .iter()
            .filter(|(_, g)| **g > 0)
            .map(|(d, _)| {
                let label = c
                    .rows
                    .get(d)
                    .map_or(d.as_str(), |r| c.label_of(*r))
                    .to_string();
                (
                    label,
                    ranked.iter().position(|(x, _)| x == d).map(|p| p + 1),
                )
            })
            .collect();
        relevant.sort_by_key(|(l, r)| (r.is_none(), *r, l.clone()));
        Ok(JudgedRanking {
            qid: qid.to_string(),
            label: c.query_label(qid).to_string(),
            text,
            hits,
            relevant,
            depth,
        })
    }

    /// Per-query trec_eval figures of the model alone on the workspace's
    /// judged queries ([`RUN_DEPTH`] documents each), computed once.
    pub fn adhoc_evaluation(&self) -> Result<&BTreeMap<String, Metrics>> {
        if let Some(e) = self.evaluation.get() {
            return Ok(e);
        }
        let c = &self.corpus;
        let judged = c.judged_queries();
        let depth = RUN_DEPTH.min(c.len());
        let rankings: BTreeMap<String, Vec<(String, f64)>> = match &self.ranker {
            Ranker::Dense { m, doc_emb, .. } => {
                // the ranking `rosetta eval` uses (select, then sort the depth kept)
                let texts: Vec<&str> = judged.iter().map(|(_, t)| t.as_str()).collect();
                let q = m.encode_texts(Side::Source, &texts)?;
                let ranked = crate::session::retrieval::rank(
                    doc_emb.view(),
                    &q,
                    &c.doc_ids,
                    depth,
                    m.model.similarity(),
                );
                let results = judged
                    .iter()
                    .zip(ranked)
                    .map(|((qid, _), hs)| {
                        let list = hs
                            .into_iter()
                            .map(|(d, s)| (c.doc_ids[d].clone(), s))
                            .collect();
                        (qid.clone(), list)
                    })
                    .collect();
                match self.rerank {
                    // as the session ranks
                    Some(r) => {
                        let run = crate::eval::trec::Run {
                            results,
                            tag: String::new(),
                        };
                        let (ids, texts): (Vec<String>, Vec<String>) =
                            judged.iter().cloned().unzip();
                        crate::session::rerank::reranked_run(
                            m.model.as_ref(),
                            &run,
                            (&ids, &texts),
                            (&c.doc_ids, &c.doc_full),
                            r,
                            &|_, _| {},
                        )?
                        .results
                    }
                    None => results,
                }
            }
            Ranker::Lexical { baseline, .. } => {
                let task = c.ws.adhoc()?;
                baseline.adhoc_run(&c.ws, &task, depth)?.run.results
            }
        };
        let e = evaluate_rankings(&rankings, &c.qrels).per_query;
        Ok(self.evaluation.get_or_init(|| e))
    }
}

/// One whole document of the collection ([`Searcher::document`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Document {
    /// Document id.
    pub docno: String,
    /// Its name in the collection's own terms (a verse reference), else its id.
    pub label: String,
    /// The document's language (the workspace's target language).
    pub lang: String,
    /// The whole text, never shortened.
    pub text: String,
    /// Byte ranges of `text` related to the query, when one was given.
    pub spans: Vec<(usize, usize)>,
    /// The aligned source-language text (the other side of the pair for a
    /// task derived from parallel data), where the collection has one.
    pub source: Option<String>,
    /// The source language.
    pub source_lang: String,
    /// Byte ranges of `source` holding a word of the query.
    pub source_spans: Vec<(usize, usize)>,
}

/// What marks a word as related to a query: a dictionary translation of a
/// query word, or (dense models) closeness to the query in the model's space.
struct Related<'a> {
    translations: HashSet<&'a str>,
    explain: Option<Explain<'a>>,
    /// The query's analysed words (for the source side).
    query_words: HashSet<String>,
}

impl Related<'_> {
    /// Byte ranges of the target-language words of `text` related to the query.
    fn spans(&self, c: &Corpus, text: &str) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        for (off, w) in text.unicode_word_indices() {
            let related = c.tgt.analyze(w).iter().any(|t| {
                self.translations.contains(t.as_str())
                    || self.explain.as_ref().is_some_and(|e| e.related(t))
            });
            if related {
                spans.push((off, off + w.len()));
            }
        }
        spans
    }

    /// Byte ranges of the source-language words of `text` that are query words.
    fn source_spans(&self, c: &Corpus, text: &str) -> Vec<(usize, usize)> {
        text.unicode_word_indices()
            .filter(|(_, w)| {
                c.src
                    .analyze_words(w)
                    .iter()
                    .any(|t| self.query_words.contains(t))
            })
            .map(|(off, w)| (off, off + w.len()))
            .collect()
    }
}
