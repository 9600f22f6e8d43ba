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

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::Serialize;

pub use self::align::AlignedWord;
use super::Loaded;
use crate::corpus::{Workspace, WrittenWords};
use crate::eval::Qrels;
use crate::index::{translate_dict, Bm25Index, Bm25Params, Query};
use crate::models::bm25::analysed_dictionary;
use crate::text::Side;
use crate::text::{Analyzer, Dropped, QueryWords, TextConfig};
use crate::{Error, Result};

mod align;
mod explain;
mod history;
mod searcher;

pub use history::{QueryHistory, HISTORY_LEN};
pub use searcher::{DenseSearch, Document, Opened, Searcher, APPROX_DEPTH, HNSW_FILE};

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
    /// The dictionary's words as it writes them, by term.
    dict_written: WrittenWords,
    /// The BM25 index (default parameters) over the documents, built the
    /// first time fusion or a lexical baseline needs it ([`Corpus::bm25`]).
    bm25: OnceLock<Arc<Bm25Index>>,
    /// Document id → row.
    rows: HashMap<String, usize>,
    /// Document label → row (first document with the label).
    label_rows: HashMap<String, usize>,
    src: Analyzer,
    tgt: Analyzer,
}

impl Corpus {
    /// Reads the workspace's ad-hoc task (declared or derived) and its
    /// dictionary, reporting progress from 0 to about 0.4; the BM25 index
    /// is built when first needed ([`Corpus::bm25`]).
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
        progress(0.35, "reading the dictionary");
        let (dict, dict_rev) = analysed_dictionary(&lex, &src, &tgt)?;
        let dict_written = lex
            .read_dictionary()?
            .map(|d| d.written_words(&src, &tgt))
            .unwrap_or_default();
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
            dict_written,
            bm25: OnceLock::new(),
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
    fn bm25_dict(&self, tokens: &[String]) -> Result<Vec<(String, f64)>> {
        let tr = translate_dict(tokens, &self.dict);
        let index = self.bm25()?;
        Ok(self.hits(&index, &tr.query))
    }

    /// The BM25 index (default parameters) over the documents as the BM25
    /// baselines analyse them, built on first use (a search by the model
    /// alone never needs it: a third of a second on the Bible's 31,084
    /// verses).
    pub fn bm25(&self) -> Result<Arc<Bm25Index>> {
        if let Some(i) = self.bm25.get() {
            return Ok(Arc::clone(i));
        }
        let docs: Vec<Vec<String>> = self.doc_full.iter().map(|t| self.tgt.analyze(t)).collect();
        let built =
            Arc::new(Bm25Index::build(&docs, Bm25Params::default())?.with_docnos(&self.doc_ids)?);
        Ok(Arc::clone(self.bm25.get_or_init(|| built)))
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
    /// An encoder's explanation (late interaction over its token states,
    /// ColBERT's MaxSim): every query word with the document word its
    /// tokens matched best. Then `contributions` are the words' shares of
    /// `maxsim` rather than of the cosine, and `rest` the part of tokens
    /// outside any word (punctuation). Empty for every other model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aligned: Vec<AlignedWord>,
    /// An encoder's MaxSim of the query with this document: the mean over
    /// the query's tokens of each one's best cosine with a document token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxsim: Option<f64>,
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
    /// The same translations as words to show: each its commonest training
    /// word where the model's vocabulary has its term, else as the
    /// dictionary writes it (`acuarela`, never the stem `acuarel`).
    pub translation_words: Option<Vec<String>>,
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
/// texts) lists as translations of the word marked `gold`, and those
/// translations as words (`written`: the dictionary's own forms, for terms
/// the vocabulary lacks). `rosetta neighbours` and the workbench's
/// Neighbours screen both answer with this.
pub fn marked_neighbours(
    m: &Loaded,
    word: &str,
    side: Side,
    k: usize,
    csls: bool,
    dictionary: Option<(&TermTranslations, &TermTranslations)>,
    written: Option<&WrittenWords>,
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
    // a translation the vocabulary lacks has no training word: the
    // dictionary's own, never the stem
    let other = side.other();
    let translation_words = translations.as_ref().map(|ts| {
        ts.iter()
            .map(|t| {
                let own = match other {
                    Side::Source => written.and_then(|w| w.source.get(t)),
                    Side::Target => written.and_then(|w| w.target.get(t)),
                };
                match own {
                    Some(w) if m.vocabs.side(other).id(t).is_none() => w.clone(),
                    _ => m.show(other, t),
                }
            })
            .collect()
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
        translation_words,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortened_texts_say_so() {
        let long = "ab ".repeat(TEXT_CHARS);
        let s = shorten(&long);
        assert_eq!(s.chars().count(), TEXT_CHARS + 1);
        assert!(s.ends_with('…'));
        assert_eq!(shorten("short"), "short");
    }

    /// The corpus builds its BM25 index only when fusion or a BM25 session
    /// asks for it, and that index is the one the BM25 baselines build.
    #[test]
    fn the_bm25_index_is_built_on_first_use_as_the_baselines_build_it() {
        let tmp = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/corpus/tiny");
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
            }
        }
        let path = tmp.path().join("workspace.toml");
        let c = Corpus::load(&path, None, &|_, _| {}).unwrap();
        assert!(c.bm25.get().is_none(), "not built by loading");
        let lazy = c.bm25().unwrap();
        assert!(c.bm25.get().is_some());
        let ws = Workspace::load(&path).unwrap();
        let lex = crate::models::bm25::lexical_workspace(&ws).unwrap();
        let task = lex.adhoc().unwrap();
        let eager =
            crate::index::adhoc::index_documents(&lex, &task, Bm25Params::default()).unwrap();
        let mut compared = 0;
        for (_, q) in &c.queries {
            let toks = c.tgt.analyze(q);
            let translated = translate_dict(&c.src.analyze_words(q), &c.dict).query;
            for query in [Query::from_tokens(&toks), translated] {
                assert_eq!(lazy.search(&query, 50), eager.search(&query, 50), "{q}");
                compared += 1;
            }
        }
        assert!(compared > 0);
    }
}
