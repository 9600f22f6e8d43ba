//! Interactive search over a session's workspace collection: one query at a
//! time, ranked by the session's model (cosine in its space, or BM25 for a
//! lexical baseline), optionally fused with BM25 over a dictionary
//! translation of the query ([`crate::index::fusion`]), with what a reader
//! needs to judge the answer: out-of-vocabulary words, each query term's
//! contribution to a document's cosine (additive models), the document words
//! related to the query, and the query's own RR and AP when it is one of the
//! workspace's judged queries. Also the per-query ad-hoc figures of the
//! model alone (for comparisons) and term neighbours with the dictionary's
//! translations marked.
//!
//! `rosetta search` and the workbench's Search, Neighbours and Compare
//! screens all go through here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use ndarray::{Array1, Array2};
use serde::Serialize;
use unicode_segmentation::UnicodeSegmentation;

use super::{Loaded, Session};
use crate::corpus::Workspace;
use crate::eval::metrics::{evaluate_rankings, query_metrics, Metrics};
use crate::eval::Qrels;
use crate::index::adhoc::Translation;
use crate::index::fusion::{fuse, Fusion};
use crate::index::translate::translate_dict_units;
use crate::index::{
    translate_dict, ApproxIndex, Bm25Index, Bm25Params, DenseIndex, HnswParams, Query,
};
use crate::models::bm25::{analysed_dictionary, Bm25Baseline};
use crate::models::Params;
use crate::session::retrieval::RUN_DEPTH;
use crate::text::Side;
use crate::text::{Analyzer, Dropped, QueryWords, TextConfig};
use crate::{Error, Result};

/// Longest document text a [`Hit`] carries, in characters (a longer one
/// ends in `…`; [`Searcher::document`] has the whole text).
pub const TEXT_CHARS: usize = 400;
/// Similarity (cosine, or Jensen–Shannon score) from which a document term
/// counts as related to the query.
const RELATED_SIMILARITY: f32 = 0.5;

/// `text`, cut to [`TEXT_CHARS`] characters with `…` when longer.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(TEXT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A workspace's ad-hoc collection, analysed once and shared by the sessions
/// on that workspace: texts, judged queries, the analysed dictionary and a
/// BM25 index (default parameters) for fusion.
pub struct Corpus {
    /// The workspace file.
    pub path: PathBuf,
    /// The workspace.
    pub ws: Workspace,
    /// Document ids, in collection order.
    pub doc_ids: Vec<String>,
    doc_full: Vec<String>,
    doc_short: Vec<String>,
    /// Display labels of the documents (verse references), when the
    /// collection has them.
    doc_labels: Option<Vec<String>>,
    /// Aligned source-language texts of the documents, where the collection has them.
    doc_sources: Option<Vec<String>>,
    /// Query id → display label, when the collection has them.
    query_labels: HashMap<String, String>,
    /// The workspace's queries `(id, text)`.
    pub queries: Vec<(String, String)>,
    /// Their judgements.
    pub qrels: Qrels,
    dict: HashMap<String, Vec<String>>,
    dict_rev: HashMap<String, Vec<String>>,
    bm25: Bm25Index,
    /// Document id → row.
    rows: HashMap<String, usize>,
    /// Document label → row (first document with the label).
    label_rows: HashMap<String, usize>,
    src: Analyzer,
    tgt: Analyzer,
}

impl Corpus {
    /// Reads and indexes the workspace's ad-hoc task (declared or derived),
    /// reporting progress from 0 to about 0.4.
    pub fn load(
        path: &Path,
        text: Option<&TextConfig>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Corpus> {
        progress(0.05, "reading the workspace");
        let ws = Workspace::load_with_text(path, text)?;
        // the index, the dictionary and the query analysis of the BM25 side
        // (baselines, fusion, highlights) as the BM25 baselines read the
        // workspace, whatever text settings the session has
        let lex = crate::models::bm25::lexical_workspace(&ws)?;
        let (src, tgt) = crate::corpus::workspace_analyzers(&lex)?;
        progress(0.1, "reading documents and queries");
        let task = ws.adhoc()?;
        progress(0.2, "building the BM25 index");
        let bm25 = crate::index::adhoc::index_documents(&lex, &task, Bm25Params::default())?;
        progress(0.35, "reading the dictionary");
        let (dict, dict_rev) = analysed_dictionary(&lex, &src, &tgt)?;
        let mut label_rows = HashMap::new();
        for (i, l) in task.doc_labels.iter().flatten().enumerate() {
            label_rows.entry(l.clone()).or_insert(i);
        }
        let query_labels = match &task.query_labels {
            Some(l) => task
                .queries
                .ids
                .iter()
                .cloned()
                .zip(l.iter().cloned())
                .collect(),
            None => HashMap::new(),
        };
        Ok(Corpus {
            rows: task
                .docs
                .ids
                .iter()
                .enumerate()
                .map(|(i, d)| (d.clone(), i))
                .collect(),
            label_rows,
            doc_labels: task.doc_labels,
            doc_sources: task.doc_sources,
            query_labels,
            src,
            tgt,
            path: path.to_path_buf(),
            doc_short: task.docs.texts.iter().map(|t| shorten(t)).collect(),
            doc_ids: task.docs.ids,
            doc_full: task.docs.texts,
            queries: task
                .queries
                .ids
                .into_iter()
                .zip(task.queries.texts)
                .collect(),
            qrels: task.qrels,
            dict,
            dict_rev,
            bm25,
            ws,
        })
    }

    /// The workspace queries that have judgements, `(id, text)`.
    pub fn judged_queries(&self) -> Vec<(String, String)> {
        self.queries
            .iter()
            .filter(|(q, _)| self.qrels.judgements.contains_key(q))
            .cloned()
            .collect()
    }

    /// The collection's fingerprint ([`crate::eval::compare::collection_fingerprint`]):
    /// what tells two workspaces of one name but other documents apart.
    pub fn collection_fingerprint(&self) -> String {
        crate::eval::compare::collection_fingerprint(&self.doc_ids, &self.doc_full)
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.doc_ids.len()
    }

    /// Whether the collection is empty.
    pub fn is_empty(&self) -> bool {
        self.doc_ids.is_empty()
    }

    /// The display label of the document in `row`: its label in the
    /// collection's own terms (a verse reference) where it has one, else its id.
    fn label_of(&self, row: usize) -> &str {
        self.doc_labels
            .as_ref()
            .and_then(|l| l.get(row))
            .unwrap_or(&self.doc_ids[row])
    }

    /// The display label of query `qid`: a verse reference where the
    /// collection has one, else the id.
    pub fn query_label<'a>(&'a self, qid: &'a str) -> &'a str {
        self.query_labels.get(qid).map_or(qid, String::as_str)
    }

    /// The row of the document named `name`: its id (`train:12`) or its
    /// label (`John 1:8`). An unknown name is an error saying what names
    /// the collection uses.
    pub fn row_of(&self, name: &str) -> Result<usize> {
        let name = name.trim();
        if let Some(r) = self.rows.get(name).or_else(|| self.label_rows.get(name)) {
            return Ok(*r);
        }
        let example = |i: usize| {
            let id = &self.doc_ids[i];
            match &self.doc_labels {
                Some(l) => format!("`{id}` or `{}`", l[i]),
                None => format!("`{id}`"),
            }
        };
        Err(Error::invalid(format!(
            "no document {name:?} in the collection of {} ({} documents{})",
            self.path.display(),
            self.len(),
            if self.is_empty() {
                String::new()
            } else {
                format!(", named like {}", example(0))
            }
        )))
    }

    /// BM25 over the dictionary translation of analysed source tokens (the
    /// fusion partner), every matching document.
    fn bm25_dict(&self, tokens: &[String]) -> Vec<(String, f64)> {
        let tr = translate_dict(tokens, &self.dict);
        self.hits(&self.bm25, &tr.query)
    }

    fn hits(&self, index: &Bm25Index, q: &Query) -> Vec<(String, f64)> {
        if q.is_empty() {
            return Vec::new();
        }
        index
            .search(q, self.len())
            .into_iter()
            .map(|h| (self.doc_ids[h.doc as usize].clone(), h.score))
            .collect()
    }
}

/// One ranked document.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Hit {
    /// 1-based rank.
    pub rank: usize,
    /// Document id.
    pub docno: String,
    /// The document's name in the collection's own terms (a verse reference
    /// such as `John 1:8`), else its id.
    pub label: String,
    /// Score (fused when fusing).
    pub score: f64,
    /// Document text, shortened to [`TEXT_CHARS`] characters and `…` when longer.
    pub text: String,
    /// Byte ranges of `text` related to the query (dictionary translations
    /// of a query term, or terms close to the query in the model's space).
    pub spans: Vec<(usize, usize)>,
    /// A dense cosine model's explanation: every query word the model read
    /// (as typed), with its share of the model's cosine of the query with
    /// this document, largest first (see [`Hit::rest`]); empty for lexical
    /// baselines and Jensen–Shannon models.
    pub contributions: Vec<(String, f64)>,
    /// The model's cosine less the sum of `contributions`: the part no
    /// single word accounts for (a non-linear encoder's interactions; 0
    /// within rounding for a model linear in its counts, as CL-LSI, OPCA,
    /// CCA and S2Net). With fusion, `score` is the fused score while the
    /// contributions and `rest` add up to the model's own cosine. `None`
    /// without contributions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rest: Option<f64>,
    /// Judged relevant, when the query is a judged workspace query.
    pub relevant: Option<bool>,
}

/// A query's own evaluation, when it is one of the workspace's judged queries.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Judged {
    /// Query id.
    pub qid: String,
    /// Its name in the collection's own terms (a verse reference), else its id.
    pub label: String,
    /// Reciprocal rank of the first relevant document.
    pub rr: f64,
    /// Average precision.
    pub ap: f64,
    /// Number of relevant documents.
    pub relevant: usize,
}

/// The answer to a query.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SearchResult {
    /// Ranked documents; none when no word of the query can be used.
    pub hits: Vec<Hit>,
    /// Every word of the query: the term searched with, or why it was
    /// dropped (stop word, out of the model's vocabulary, below `min_df`,
    /// no dictionary translation for `bm25-dict`).
    pub query: QueryWords,
    /// Why there is no ranking: no word of the query can be used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unanswerable: Option<String>,
    /// Present when the query is a judged workspace query.
    pub judged: Option<Judged>,
    /// Present when the model's ranking came from an HNSW graph: how it was
    /// searched (its list then holds only the graph's best documents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approximate: Option<String>,
}

/// One document of a [`JudgedRanking`].
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RankedDoc {
    /// 1-based rank.
    pub rank: usize,
    /// Document id.
    pub docno: String,
    /// Its label in the collection's own terms (a verse reference), else its id.
    pub label: String,
    /// The model's score.
    pub score: f64,
    /// Judged relevant to the query.
    pub relevant: bool,
    /// Its text, shortened as a [`Hit`]'s.
    pub text: String,
}

/// A judged workspace query's ranking by a session's model alone, as its
/// per-query ad-hoc scores were computed ([`Searcher::adhoc_evaluation`]):
/// the best documents with their relevance, and where every relevant
/// document was ranked. The Compare screen's rankings view and `rosetta
/// compare --rankings` show two side by side.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct JudgedRanking {
    /// Query id.
    pub qid: String,
    /// Its label (a verse reference), else its id.
    pub label: String,
    /// Its text.
    pub text: String,
    /// The best documents, best first.
    pub hits: Vec<RankedDoc>,
    /// Every document judged relevant: label and rank within the scored
    /// depth ([`RUN_DEPTH`]; `None` below it), best first, unranked last.
    pub relevant: Vec<(String, Option<usize>)>,
    /// Documents ranked (the scored depth).
    pub depth: usize,
}

/// One nearest term, marked when the dictionary lists it as a translation.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct MarkedNeighbour {
    /// The term (stemmed where the language stems).
    pub term: String,
    /// The commonest training word behind the term, to show.
    pub surface: String,
    /// The model's similarity, or the CSLS score built on it.
    pub score: f64,
    /// The plain similarity (equal to `score` without CSLS).
    pub plain: f64,
    /// Listed as a translation of the looked-up term in the workspace's
    /// dictionary (other-language neighbours only).
    pub gold: bool,
}

/// Nearest terms of one term in both languages ([`marked_neighbours`]).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NeighbourResult {
    /// Whether the term is in the model's vocabulary (when not, `dropped`
    /// says why and the lists are empty).
    pub known: bool,
    /// Why the word has no neighbours: a stop word, out of the vocabulary
    /// (and why), as [`Searcher::search`] reports query words.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub dropped: Option<Dropped>,
    /// The word as given.
    pub word: String,
    /// Its index term.
    pub term: String,
    /// The commonest training word behind the term.
    pub surface: String,
    /// Whether scores of `cross` are CSLS.
    pub csls: bool,
    /// The measure the scores are built on.
    pub similarity: crate::space::Similarity,
    /// The dictionary's translations of the term (analysed), `None` without a dictionary.
    pub translations: Option<Vec<String>>,
    /// Nearest terms in the other language, best first.
    pub cross: Vec<MarkedNeighbour>,
    /// Nearest terms in the term's own language (the term left out).
    pub own: Vec<MarkedNeighbour>,
}

/// Analysed terms → their analysed dictionary translations.
pub type TermTranslations = HashMap<String, Vec<String>>;

/// `word`'s nearest terms in the model of `m`, in the other language and in
/// its own ([`Loaded::neighbours`], whose errors it returns: no word, more
/// than one; a stop word or a word outside the vocabulary is answered with
/// `known` false and the reason), the other-language terms that `dictionary`
/// (source → target and target → source terms, analysed as the session's
/// texts) lists as translations of the word marked `gold`. `rosetta neighbours` and
/// the workbench's Neighbours screen both answer with this.
pub fn marked_neighbours(
    m: &Loaded,
    word: &str,
    side: Side,
    k: usize,
    csls: bool,
    dictionary: Option<(&TermTranslations, &TermTranslations)>,
) -> Result<NeighbourResult> {
    // a term lookup: the n-gram back-off of texts does not apply
    let vocab = m.vocabs.side(side);
    let account = QueryWords::explain(m.analyzer(side), word, true, |t| {
        vocab.why_unknown(t).map(Dropped::Vocabulary)
    });
    if let [w] = account.words.as_slice() {
        if let Some(d) = &w.dropped {
            return Ok(NeighbourResult {
                known: false,
                dropped: Some(d.clone()),
                word: word.to_string(),
                term: w.term.clone().unwrap_or_default(),
                surface: w.word.clone(),
                ..Default::default()
            });
        }
    }
    let n = m.neighbours(word, side, k, csls)?;
    let surface = m.show(side, &n.term);
    let translations: Option<Vec<String>> = dictionary.map(|(fwd, rev)| {
        match side {
            Side::Source => fwd.get(n.term.as_str()),
            Side::Target => rev.get(n.term.as_str()),
        }
        .cloned()
        .unwrap_or_default()
    });
    let gold: HashSet<&str> = translations.iter().flatten().map(String::as_str).collect();
    // subword units shown readably (`light…`, `…ing`); words as their
    // commonest training form
    let conv =
        |v: &[super::Neighbour], gold: &HashSet<&str>, other: Side| -> Vec<MarkedNeighbour> {
            v.iter()
                .map(|x| MarkedNeighbour {
                    gold: gold.contains(x.term.as_str()),
                    term: x.term.clone(),
                    surface: m.show(other, &x.term),
                    score: x.score as f64,
                    plain: x.plain as f64,
                })
                .collect()
        };
    Ok(NeighbourResult {
        known: true,
        dropped: None,
        surface,
        cross: conv(&n.cross, &gold, side.other()),
        own: conv(&n.same, &HashSet::new(), side),
        word: n.word,
        term: n.term,
        csls: n.csls,
        similarity: n.similarity,
        translations,
    })
}

/// A ranked list of `(document id, score)`.
type Ranking = Vec<(String, f64)>;

enum Ranker {
    Dense {
        m: Box<Loaded>,
        dense: DenseIndex,
        /// Shared with the HNSW graph, which searches them in place.
        doc_emb: Arc<Array2<f32>>,
        /// The session's HNSW graph, when it searches by one.
        approx: Option<Box<ApproxIndex>>,
    },
    Lexical {
        baseline: Bm25Baseline,
        /// Its own index when its BM25 parameters are not the corpus index's.
        index: Option<Box<Bm25Index>>,
    },
}

/// The file in a session folder holding its HNSW graph over the document
/// embeddings, in Rosetta's graph format (with its description beside it,
/// `hnsw.graph.json`); safe to delete.
pub const HNSW_FILE: &str = "hnsw.graph";

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

/// A session ready to search its workspace's collection.
pub struct Searcher {
    /// The collection.
    pub corpus: Arc<Corpus>,
    /// The session.
    pub session: Session,
    ranker: Ranker,
    evaluation: OnceLock<BTreeMap<String, Metrics>>,
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
            let index = if baseline.params == corpus.bm25.params() {
                None
            } else {
                let docs: Vec<Vec<String>> = corpus
                    .doc_full
                    .iter()
                    .map(|t| corpus.tgt.analyze(t))
                    .collect();
                Some(Box::new(
                    Bm25Index::build(&docs, baseline.params)?.with_docnos(&corpus.doc_ids)?,
                ))
            };
            Ranker::Lexical { baseline, index }
        } else {
            progress(0.45, "loading the model");
            let m = Loaded::open(dir, &candle_core::Device::Cpu)?;
            progress(0.6, "encoding documents");
            let doc_emb = Arc::new(m.encode_collection(Side::Target, &corpus.doc_full)?);
            let dense = DenseIndex::new(Array2::clone(&doc_emb))?
                .with_docnos(&corpus.doc_ids)?
                .with_similarity(m.model.similarity())?;
            let cosine = m.model.similarity() == crate::space::Similarity::Cosine;
            let path = dir.join(HNSW_FILE);
            let approx = match mode {
                DenseSearch::Exact => None,
                DenseSearch::Saved if !cosine => None,
                DenseSearch::Saved => {
                    progress(0.8, "reading the HNSW graph");
                    ApproxIndex::load_for(&path, Arc::clone(&doc_emb))?
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
                    match ApproxIndex::load_for(&path, Arc::clone(&doc_emb))? {
                        Some(mut g) => {
                            g.set_ef_search(p.ef_search)?;
                            Some(g)
                        }
                        None => {
                            progress(
                                0.8,
                                &format!("building the HNSW graph ({} documents)", doc_emb.nrows()),
                            );
                            let g = ApproxIndex::build(Arc::clone(&doc_emb), p)?;
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
        Ok(Searcher {
            corpus,
            session,
            ranker,
            evaluation: OnceLock::new(),
        })
    }

    /// When the model a searcher of `dir` would load was last written (the
    /// best checkpoint's time, else the last one's; `None` without either,
    /// as for a lexical baseline): a cache compares it to know when to load
    /// a session again.
    pub fn model_stamp(dir: &Path) -> Option<std::time::SystemTime> {
        [super::BEST_CHECKPOINT, super::LAST_CHECKPOINT]
            .iter()
            .find_map(|f| {
                std::fs::metadata(dir.join(f))
                    .and_then(|m| m.modified())
                    .ok()
            })
    }

    /// Opens a session with its own corpus, searching as `mode` says.
    pub fn open_alone(
        dir: &Path,
        mode: DenseSearch,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Searcher> {
        let session = Session::open(dir)?;
        let corpus = Arc::new(Corpus::load(
            &session.config.workspace,
            session.config.text.as_ref(),
            progress,
        )?);
        Searcher::open_with(dir, corpus, mode, progress)
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
                let index = index.as_deref().unwrap_or(&c.bm25);
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
                let index = index.as_deref().unwrap_or(&c.bm25);
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
    /// model or fused with BM25 over its dictionary translation.
    pub fn search(&self, query: &str, k: usize, fusion: Fusion) -> Result<SearchResult> {
        fusion.validate()?;
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
        let ranked = if fusion.uses_bm25() {
            fuse(&model, &c.bm25_dict(&c.src.analyze_words(query)), fusion)
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
        let hits = ranked
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, (docno, score))| {
                let d = c.rows[docno];
                let text = &c.doc_short[d];
                let spans = related.spans(c, text);
                let explained = related.explain.as_ref().and_then(|e| e.contributions(d));
                Hit {
                    rank: i + 1,
                    relevant: judgements.map(|j| j.get(docno).is_some_and(|g| *g > 0)),
                    label: c.label_of(d).to_string(),
                    docno: docno.clone(),
                    score: *score,
                    text: text.clone(),
                    spans,
                    rest: explained.as_ref().map(|e| e.rest),
                    contributions: explained.map(|e| e.words).unwrap_or_default(),
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
                (related.spans(c, &text), ss)
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
        marked_neighbours(m, term, side, k, csls, dict)
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
                super::retrieval::rank(doc_emb, &q, &c.doc_ids, depth, m.model.similarity())
                    .pop()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(d, s)| (c.doc_ids[d].clone(), s))
                    .collect()
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
                let ranked =
                    super::retrieval::rank(doc_emb, &q, &c.doc_ids, depth, m.model.similarity());
                judged
                    .iter()
                    .zip(ranked)
                    .map(|((qid, _), hs)| {
                        let list = hs
                            .into_iter()
                            .map(|(d, s)| (c.doc_ids[d].clone(), s))
                            .collect();
                        (qid.clone(), list)
                    })
                    .collect()
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

/// Queries asked before, oldest first, kept in a small text file, one query
/// a line (`$XDG_STATE_HOME/rosetta/search-history.txt`, else
/// `~/.local/state/rosetta/search-history.txt`, beside the workbench's log):
/// the workbench's Search screen recalls them with ↑/↓ while editing, and
/// `rosetta search --history` lists them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryHistory {
    /// The queries, oldest first, each once.
    pub queries: Vec<String>,
}

/// Most queries a [`QueryHistory`] keeps (the oldest go first).
pub const HISTORY_LEN: usize = 200;

impl QueryHistory {
    /// The default history file.
    pub fn default_path() -> PathBuf {
        std::env::var_os("XDG_STATE_HOME")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .unwrap_or_else(std::env::temp_dir)
            .join("rosetta")
            .join("search-history.txt")
    }

    /// Reads the history at `path`; a missing file is an empty history.
    /// Blank lines are skipped; only the newest [`HISTORY_LEN`] are kept.
    pub fn load(path: &Path) -> Result<QueryHistory> {
        if !path.exists() {
            return Ok(QueryHistory::default());
        }
        let mut h = QueryHistory::default();
        for l in crate::text::io::read_lines(path)? {
            h.push(&l);
        }
        Ok(h)
    }

    /// Adds `query` (white space collapsed) as the newest, moving an equal
    /// earlier entry; `false` when nothing changed (blank, or already the
    /// newest).
    pub fn push(&mut self, query: &str) -> bool {
        let q = query.split_whitespace().collect::<Vec<_>>().join(" ");
        if q.is_empty() || self.queries.last() == Some(&q) {
            return false;
        }
        self.queries.retain(|x| *x != q);
        self.queries.push(q);
        if self.queries.len() > HISTORY_LEN {
            let extra = self.queries.len() - HISTORY_LEN;
            self.queries.drain(..extra);
        }
        true
    }

    /// Writes the history to `path` (atomically; its folder is created).
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut text = self.queries.join("\n");
        text.push('\n');
        crate::util::write_atomic(path, text.as_bytes())
    }
}

/// Why a dense model ranked a document: each query term's share of the
/// cosine (exact for additive models, whose text vector is a sum of term
/// vectors; a topic model's terms count by their own similarity to the
/// document) and the document terms close to the query.
/// How a dense model's cosine of the query with a document divides among
/// the query's words. The query vector `q` is written as a combination
/// `Σ a_u v_u` of the unit term vectors of the units the model read from
/// the query (least squares: exact for a model whose encoding is linear in
/// the weighted counts, as CL-LSI, OPCA, CCA and S2Net are); unit `u`
/// contributes `a_u (v_u · d)` to the cosine `q · d`, and a word the sum
/// of its units' shares. What no single word accounts for (a non-linear
/// encoder's interactions) is kept apart as the rest.
struct Explain<'a> {
    m: &'a Loaded,
    doc_emb: &'a Array2<f32>,
    /// The query's units: id and coefficient `a_u`.
    units: Vec<(u32, f64)>,
    /// Each matched word as shown, with `(index into units, share)`.
    words: Vec<(String, Vec<(usize, f64)>)>,
    query: Array1<f32>,
    /// The term vectors of `units`, row k for unit k.
    tv_src: Array2<f32>,
    /// The target terms of the texts shown that are close to the query in
    /// the model's space ([`RELATED_SIMILARITY`]).
    related: HashSet<u32>,
}

/// One hit's explanation: per matched word its share of the model's
/// cosine, and the part no word accounts for.
struct Contributions {
    words: Vec<(String, f64)>,
    rest: f64,
}

/// Coefficients `a` with `Σ a_i rows[i]` the least-squares approximation
/// of `q` (modified Gram–Schmidt; a row that depends on the earlier ones
/// gets 0).
fn span_coefficients(rows: &[Vec<f64>], q: &[f64]) -> Vec<f64> {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let k = rows.len();
    // orthonormal basis, and R (upper triangular) over the kept rows
    let mut basis: Vec<Vec<f64>> = Vec::new();
    let mut kept: Vec<usize> = Vec::new();
    let mut r = vec![vec![0.0; k]; k];
    for (i, v) in rows.iter().enumerate() {
        let norm0 = dot(v, v).sqrt();
        let mut u = v.clone();
        for (j, b) in basis.iter().enumerate() {
            let c = dot(b, &u);
            r[j][i] = c;
            u.iter_mut().zip(b).for_each(|(x, y)| *x -= c * y);
        }
        let n = dot(&u, &u).sqrt();
        if n > 1e-9 * norm0.max(1e-30) {
            r[basis.len()][i] = n;
            u.iter_mut().for_each(|x| *x /= n);
            basis.push(u);
            kept.push(i);
        }
    }
    let c: Vec<f64> = basis.iter().map(|b| dot(b, q)).collect();
    // back substitution over the kept rows: R[:, kept] a_kept = c
    let mut a = vec![0.0; k];
    for j in (0..kept.len()).rev() {
        let mut s = c[j];
        for l in j + 1..kept.len() {
            s -= r[j][kept[l]] * a[kept[l]];
        }
        a[kept[j]] = s / r[j][kept[j]];
    }
    a
}

impl<'a> Explain<'a> {
    /// The explanation of `query_text` (encoded as `query`), with the
    /// target terms `shown` (the words of the texts that will be marked)
    /// checked for closeness to the query. Only the term vectors of the
    /// query's units and of `shown` are needed ([`Loaded::term_vectors_of`]).
    fn new(
        m: &'a Loaded,
        doc_emb: &'a Array2<f32>,
        query_text: &str,
        query: Array1<f32>,
        shown: &[u32],
    ) -> Result<Explain<'a>> {
        let an = m.analyzer(Side::Source);
        let vocab = &m.vocabs.source;
        // exactly the units the encoder read (n-gram fallback included)
        let counts = m.counts(Side::Source, &[query_text]);
        let ids: Vec<u32> = counts.row(0).0.to_vec();
        let tv_src = m.term_vectors_of(Side::Source, &ids)?;
        let rows: Vec<Vec<f64>> = tv_src
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|&x| x as f64).collect())
            .collect();
        let q: Vec<f64> = query.iter().map(|&x| x as f64).collect();
        let a = span_coefficients(&rows, &q);
        let units: Vec<(u32, f64)> = ids.iter().copied().zip(a).collect();
        // which words gave each unit, and how often
        let mut by_word: Vec<(String, Vec<u32>)> = Vec::new();
        for (word, term) in an.analyze_pairs(query_text) {
            let mut us: Vec<u32> = an
                .segment(vec![term.clone()])
                .iter()
                .filter_map(|u| vocab.id(u))
                .collect();
            us.extend(vocab.fallback_units(&term));
            match by_word.iter_mut().find(|(w, _)| *w == word) {
                Some((_, have)) => have.extend(us),
                None => by_word.push((word, us)),
            }
        }
        let given = |u: u32| -> usize {
            by_word
                .iter()
                .map(|(_, us)| us.iter().filter(|x| **x == u).count())
                .sum()
        };
        let words = by_word
            .iter()
            .filter_map(|(w, us)| {
                let parts: Vec<(usize, f64)> = units
                    .iter()
                    .enumerate()
                    .filter_map(|(k, (u, _))| {
                        let n = us.iter().filter(|x| *x == u).count();
                        (n > 0).then(|| (k, n as f64 / given(*u) as f64))
                    })
                    .collect();
                (!parts.is_empty()).then(|| (w.clone(), parts))
            })
            .collect();
        let sim = m.model.similarity();
        let tv_tgt = m.term_vectors_of(Side::Target, shown)?;
        let related = shown
            .iter()
            .zip(tv_tgt.rows())
            .filter(|(_, v)| sim.score(*v, query.view()) >= RELATED_SIMILARITY)
            .map(|(id, _)| *id)
            .collect();
        Ok(Explain {
            m,
            doc_emb,
            units,
            words,
            query,
            tv_src,
            related,
        })
    }

    /// Every matched word's share of the cosine of the query with document
    /// `doc`, largest first; the shares and `rest` sum to that cosine.
    /// `None` for a model whose similarity is not a cosine (a
    /// Jensen–Shannon score has no additive reading).
    fn contributions(&self, doc: usize) -> Option<Contributions> {
        if self.m.model.similarity() != crate::space::Similarity::Cosine {
            return None;
        }
        let de = self.doc_emb.row(doc);
        let dot = |v: ndarray::ArrayView1<f32>| -> f64 {
            v.iter()
                .zip(de.iter())
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum()
        };
        let cosine = dot(self.query.view());
        let per_unit: Vec<f64> = self
            .units
            .iter()
            .enumerate()
            .map(|(k, (_, a))| a * dot(self.tv_src.row(k)))
            .collect();
        let mut words: Vec<(String, f64)> = self
            .words
            .iter()
            .map(|(w, parts)| (w.clone(), parts.iter().map(|(k, s)| per_unit[*k] * s).sum()))
            .collect();
        words.sort_by(|a, b| {
            crate::eval::trec::rank_key(b.1)
                .total_cmp(&crate::eval::trec::rank_key(a.1))
                .then_with(|| a.0.cmp(&b.0))
        });
        let explained: f64 = words.iter().map(|(_, c)| c).sum();
        Some(Contributions {
            words,
            rest: cosine - explained,
        })
    }

    /// Whether target term `term` is close to the query; only the terms
    /// given as `shown` to [`Explain::new`] are known.
    fn related(&self, term: &str) -> bool {
        self.m
            .vocabs
            .target
            .id(term)
            .is_some_and(|id| self.related.contains(&id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_history_keeps_each_query_once_newest_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/rosetta/search-history.txt");
        let mut h = QueryHistory::load(&path).unwrap();
        assert!(h.queries.is_empty(), "a missing file is an empty history");
        assert!(h.push("light of  men"));
        assert!(h.push("the word"));
        assert!(!h.push("the word"), "already the newest");
        assert!(!h.push("   "));
        assert!(h.push("light of men"));
        assert_eq!(h.queries, vec!["the word", "light of men"]);
        h.save(&path).unwrap();
        assert_eq!(QueryHistory::load(&path).unwrap(), h);
        for i in 0..HISTORY_LEN + 5 {
            h.push(&format!("q{i}"));
        }
        assert_eq!(h.queries.len(), HISTORY_LEN);
        assert_eq!(h.queries.last().unwrap(), &format!("q{}", HISTORY_LEN + 4));
        assert_eq!(h.queries[0], "q5");
    }

    #[test]
    fn shortened_texts_say_so() {
        let long = "ab ".repeat(TEXT_CHARS);
        let s = shorten(&long);
        assert_eq!(s.chars().count(), TEXT_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(shorten("short"), "short");
    }
}
