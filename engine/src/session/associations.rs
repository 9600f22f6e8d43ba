//! Term associations of a model with a term space, against the workspace's
//! bilingual dictionary: the term pairs the model links most strongly that
//! the dictionary does not list ([`AssocKind::New`]), and the dictionary
//! pairs the model fails to link ([`AssocKind::Missed`]).
//!
//! - *New pairs*: each of the `terms` most frequent source words (by
//!   training document frequency) with its nearest target word, by the
//!   model's similarity or by CSLS, where the dictionary does not list that
//!   target word as a translation of the source word. `mutual` says whether
//!   the source word is in turn the target word's nearest source word.
//! - *Missed pairs*: each dictionary headword in the model's vocabulary with
//!   a translation in it, none of whose translations is among its `k`
//!   nearest target words (ties count against the translation, as `rosetta
//!   eval --task bli` counts P@k: with the same dictionary given as
//!   `--dictionary` and `k` = 10 the missed headwords are the (1 − P@10)
//!   share of its queries; on the workspace's own dictionary `eval` scores
//!   only the test part of its split, associations every entry). The row
//!   shows the best-ranked translation, its rank and the model's nearest
//!   target word instead.
//!
//! Words only: the n-gram fallback's units are never paired. Nearest
//! neighbours come from the exact blocked top-k of [`crate::index::dense`].
//! `rosetta associations` and the workbench's Neighbours screen (its
//! association table) both go through [`associations`].

use std::collections::{HashMap, HashSet};
use std::path::Path;

use ndarray::{Array2, ArrayView2, Axis};
use serde::{Deserialize, Serialize};

use super::search::TermTranslations;
use super::{Loaded, Session, Workbench};
use crate::corpus::Workspace;
use crate::index::dense::{top_k_by, top_k_penalised};
use crate::index::{Matmul, TieOrder};
use crate::space::Similarity;
use crate::text::Side;
use crate::{Error, Result};

/// Source words looked up for new pairs by default.
pub const DEFAULT_TERMS: usize = 10_000;
/// Neighbours within which a dictionary translation counts as linked, by default.
pub const DEFAULT_K: usize = 10;

/// Which list of pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssocKind {
    /// Pairs the model links that the dictionary lacks.
    #[default]
    New,
    /// Dictionary pairs the model fails to link.
    Missed,
}

impl AssocKind {
    /// `new` or `missed`.
    pub fn name(self) -> &'static str {
        match self {
            AssocKind::New => "new",
            AssocKind::Missed => "missed",
        }
    }

    /// The other kind.
    pub fn other(self) -> AssocKind {
        match self {
            AssocKind::New => AssocKind::Missed,
            AssocKind::Missed => AssocKind::New,
        }
    }
}

/// How rows are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssocSort {
    /// Strongest finding first: new pairs by score, highest first; missed
    /// pairs by the translation's rank, worst first (then lowest score).
    #[default]
    Sim,
    /// The source word's training document frequency, highest first.
    Freq,
}

impl AssocSort {
    /// `sim` or `freq`.
    pub fn name(self) -> &'static str {
        match self {
            AssocSort::Sim => "sim",
            AssocSort::Freq => "freq",
        }
    }

    /// The other order.
    pub fn other(self) -> AssocSort {
        match self {
            AssocSort::Sim => AssocSort::Freq,
            AssocSort::Freq => AssocSort::Sim,
        }
    }
}

/// What to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AssocOptions {
    /// New or missed pairs.
    pub kind: AssocKind,
    /// Score by CSLS (`2 sim(x, y) − r(x) − r(y)`, demoting hub terms)
    /// instead of the model's similarity.
    pub csls: bool,
    /// New pairs: the number of most frequent source words looked up
    /// (0: every source word).
    pub terms: usize,
    /// Missed pairs: a translation among a headword's `k` nearest target
    /// words counts as linked (at least 1).
    pub k: usize,
    /// New pairs: keep mutual nearest neighbours only.
    pub mutual: bool,
}

impl Default for AssocOptions {
    fn default() -> Self {
        AssocOptions {
            kind: AssocKind::New,
            csls: false,
            terms: DEFAULT_TERMS,
            k: DEFAULT_K,
            mutual: false,
        }
    }
}

/// One source–target pair.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Association {
    /// The source word as shown: its commonest training word.
    pub source: String,
    /// The target word as shown (missed pairs: the best-ranked translation).
    pub target: String,
    /// The source index term (stemmed where the language stems).
    pub source_term: String,
    /// The target index term.
    pub target_term: String,
    /// The score: CSLS when asked for, else the model's similarity.
    pub score: f64,
    /// The model's plain similarity (cosine, or the Jensen–Shannon score).
    pub similarity: f64,
    /// Rank of the target among the source's nearest target words (1: the
    /// nearest; new pairs are always 1).
    pub rank: usize,
    /// Training document frequency of the source word.
    pub source_df: u32,
    /// Training document frequency of the target word.
    pub target_df: u32,
    /// New pairs: the source is also the target's nearest source word.
    pub mutual: bool,
    /// Missed pairs: the model's nearest target word, as shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nearest: Option<String>,
    /// The dictionary's translations of the source word, as shown (empty:
    /// the dictionary has no entry for it).
    pub dictionary: Vec<String>,
}

impl Association {
    /// Whether `needle` (case-insensitive; empty matches all) occurs in a
    /// word or term of the row, its nearest word or its dictionary entry.
    pub fn matches(&self, needle: &str) -> bool {
        let n = needle.trim().to_lowercase();
        if n.is_empty() {
            return true;
        }
        [
            &self.source,
            &self.target,
            &self.source_term,
            &self.target_term,
        ]
        .into_iter()
        .chain(self.nearest.as_ref())
        .chain(self.dictionary.iter())
        .any(|w| w.to_lowercase().contains(&n))
    }
}

/// The answer of [`associations`].
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Associations {
    /// Which pairs.
    pub kind: AssocKind,
    /// Whether `score` is CSLS.
    pub csls: bool,
    /// The model's similarity.
    pub similarity: Similarity,
    /// Source language code.
    pub source_lang: String,
    /// Target language code.
    pub target_lang: String,
    /// New pairs: source words looked up; missed pairs: dictionary headwords
    /// with a translation, both in the vocabulary.
    pub looked_up: usize,
    /// The source vocabulary's index terms: its words and its character
    /// n-gram units together (what `data inspect` counts as terms).
    pub source_terms: usize,
    /// Of those, the words (the n-gram units left out): the most `looked_up`
    /// can be for new pairs.
    pub source_words: usize,
    /// Missed pairs: the `k` a translation must be within.
    pub k: usize,
    /// New pairs: whether only mutual nearest neighbours are kept.
    pub mutual_only: bool,
    /// The order of `rows`.
    pub sort: AssocSort,
    /// The pairs, in `sort` order.
    pub rows: Vec<Association>,
}

/// The dictionary associations are checked against.
#[derive(Debug, Clone, Default)]
pub struct AssocDictionary {
    /// Source term → target terms, analysed as the session's texts.
    pub terms: TermTranslations,
    /// Source term → its translations as the dictionary writes them, shown
    /// in the rows' `dictionary`; a headword missing here shows its target
    /// terms (as their commonest training word where the vocabulary has them).
    pub written: HashMap<String, Vec<String>>,
}

impl From<TermTranslations> for AssocDictionary {
    fn from(terms: TermTranslations) -> Self {
        AssocDictionary {
            terms,
            written: HashMap::new(),
        }
    }
}

/// Tab-separated columns of [`Associations::tsv`], by kind.
const NEW_COLUMNS: &[&str] = &[
    "source",
    "target",
    "score",
    "similarity",
    "mutual",
    "source_df",
    "target_df",
    "dictionary",
    "source_term",
    "target_term",
];
const MISSED_COLUMNS: &[&str] = &[
    "source",
    "translation",
    "score",
    "similarity",
    "rank",
    "nearest",
    "source_df",
    "target_df",
    "dictionary",
    "source_term",
    "target_term",
];

impl Associations {
    /// Orders the rows by `by` (ties by source word, then target word).
    pub fn sort(&mut self, by: AssocSort) {
        let kind = self.kind;
        self.rows.sort_by(|a, b| {
            let key = match (by, kind) {
                (AssocSort::Freq, _) => b.source_df.cmp(&a.source_df),
                (AssocSort::Sim, AssocKind::New) => {
                    score_key(b.score).total_cmp(&score_key(a.score))
                }
                (AssocSort::Sim, AssocKind::Missed) => b
                    .rank
                    .cmp(&a.rank)
                    .then(score_key(a.score).total_cmp(&score_key(b.score))),
            };
            key.then_with(|| score_key(b.score).total_cmp(&score_key(a.score)))
                .then_with(|| a.source.cmp(&b.source))
                .then_with(|| a.target.cmp(&b.target))
        });
        self.sort = by;
    }

    /// Keeps the rows that match `needle` ([`Association::matches`]).
    pub fn retain_matching(&mut self, needle: &str) {
        self.rows.retain(|r| r.matches(needle));
    }

    /// The rows that match `needle`, in order.
    pub fn matching(&self, needle: &str) -> Vec<&Association> {
        self.rows.iter().filter(|r| r.matches(needle)).collect()
    }

    /// `rows` as tab-separated values with a header line (columns by kind:
    /// new `source target score similarity mutual source_df target_df
    /// dictionary source_term target_term`; missed `source translation score
    /// similarity rank nearest source_df target_df dictionary source_term
    /// target_term`; the dictionary entry comma-separated).
    pub fn tsv(&self, rows: &[&Association]) -> String {
        let cols = match self.kind {
            AssocKind::New => NEW_COLUMNS,
            AssocKind::Missed => MISSED_COLUMNS,
        };
        let mut s = cols.join("\t");
        s.push('\n');
        // words never hold tabs or line breaks; keep the file parseable anyway
        let clean = |w: &str| w.replace(['\t', '\n', '\r'], " ");
        for r in rows {
            let dict = clean(&r.dictionary.join(", "));
            let f: Vec<String> = match self.kind {
                AssocKind::New => vec![
                    clean(&r.source),
                    clean(&r.target),
                    format!("{:.6}", r.score),
                    format!("{:.6}", r.similarity),
                    r.mutual.to_string(),
                    r.source_df.to_string(),
                    r.target_df.to_string(),
                    dict,
                    clean(&r.source_term),
                    clean(&r.target_term),
                ],
                AssocKind::Missed => vec![
                    clean(&r.source),
                    clean(&r.target),
                    format!("{:.6}", r.score),
                    format!("{:.6}", r.similarity),
                    r.rank.to_string(),
                    clean(r.nearest.as_deref().unwrap_or("")),
                    r.source_df.to_string(),
                    r.target_df.to_string(),
                    dict,
                    clean(&r.source_term),
                    clean(&r.target_term),
                ],
            };
            s.push_str(&f.join("\t"));
            s.push('\n');
        }
        s
    }

    /// Writes the rows matching `needle`, in order, to `path` as
    /// [`Associations::tsv`] (atomically; folders made); returns how many.
    pub fn write_tsv(&self, path: &Path, needle: &str) -> Result<usize> {
        let rows = self.matching(needle);
        crate::util::write_atomic(path, self.tsv(&rows).as_bytes())?;
        Ok(rows.len())
    }
}

fn score_key(s: f64) -> f64 {
    crate::eval::trec::rank_key(s)
}

/// The association pairs of the loaded model `m` against `dict` (see
/// [`workspace_dictionary`]), in [`AssocSort::Sim`] order. Errors when the
/// model has no term vectors, or when no dictionary pair has both terms in
/// the vocabulary (missed pairs).
pub fn associations(
    m: &Loaded,
    dict: &AssocDictionary,
    opts: &AssocOptions,
) -> Result<Associations> {
    let dictionary = &dict.terms;
    let src = m.term_vectors(Side::Source)?;
    let tgt = m.term_vectors(Side::Target)?;
    let (vs, vt) = (&m.vocabs.source, &m.vocabs.target);
    let (ns, nt) = (vs.words().min(src.nrows()), vt.words().min(tgt.nrows()));
    let sim = m.model.similarity();
    let (rs, rt) = if opts.csls {
        (
            Some(m.csls_penalty(Side::Source)?),
            Some(m.csls_penalty(Side::Target)?),
        )
    } else {
        (None, None)
    };
    let src_words = src.slice(ndarray::s![..ns, ..]);
    let tgt_words = tgt.slice(ndarray::s![..nt, ..]);
    let space = Space {
        sim,
        rs: rs.map(|r| &r.as_slice().expect("contiguous")[..ns]),
        rt: rt.map(|r| &r.as_slice().expect("contiguous")[..nt]),
    };
    let shown_dict = |s: &str| -> Vec<String> {
        if let Some(w) = dict.written.get(s) {
            return w.clone();
        }
        dictionary
            .get(s)
            .map(|ts| ts.iter().map(|t| m.show(Side::Target, t)).collect())
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    let looked_up;
    match opts.kind {
        AssocKind::New => {
            // the most frequent source words (ties by id)
            let mut ids: Vec<usize> = (0..ns).collect();
            ids.sort_by(|a, b| vs.df[*b].cmp(&vs.df[*a]).then(a.cmp(b)));
            if opts.terms > 0 {
                ids.truncate(opts.terms);
            }
            looked_up = ids.len();
            let q = gather(src, &ids);
            let nearest = space.nearest(tgt_words, q.view(), 1, space.rt)?;
            // the targets found, in turn against every source word
            let found: Vec<usize> = nearest
                .iter()
                .filter_map(|h| h.first().map(|h| h.doc as usize))
                .collect::<HashSet<_>>()
                .into_iter()
                .collect();
            let back = space.nearest(src_words, gather(tgt, &found).view(), 1, space.rs)?;
            let back: HashMap<usize, usize> = found
                .iter()
                .zip(&back)
                .filter_map(|(t, h)| Some((*t, h.first()?.doc as usize)))
                .collect();
            for (&s, hits) in ids.iter().zip(&nearest) {
                let Some(h) = hits.first() else { continue };
                let t = h.doc as usize;
                let (s_term, t_term) = (vs.term(s as u32), vt.term(t as u32));
                if dictionary
                    .get(s_term)
                    .is_some_and(|ts| ts.iter().any(|x| x == t_term))
                {
                    continue;
                }
                let mutual = back.get(&t) == Some(&s);
                if opts.mutual && !mutual {
                    continue;
                }
                rows.push(Association {
                    source: m.show(Side::Source, s_term),
                    target: m.show(Side::Target, t_term),
                    source_term: s_term.to_string(),
                    target_term: t_term.to_string(),
                    score: space.score(src, tgt, s, t) as f64,
                    similarity: sim.score(src.row(s), tgt.row(t)) as f64,
                    rank: 1,
                    source_df: vs.df[s],
                    target_df: vt.df[t],
                    mutual,
                    nearest: None,
                    dictionary: shown_dict(s_term),
                });
            }
        }
        AssocKind::Missed => {
            let k = opts.k.max(1);
            // headwords in the vocabulary with their translations in it
            let mut entries: Vec<(usize, Vec<usize>)> = dictionary
                .iter()
                .filter_map(|(s, ts)| {
                    let s = vs.id(s).map(|i| i as usize).filter(|i| *i < ns)?;
                    let gold: Vec<usize> = ts
                        .iter()
                        .filter_map(|t| vt.id(t).map(|i| i as usize))
                        .filter(|i| *i < nt)
                        .collect();
                    (!gold.is_empty()).then_some((s, gold))
                })
                .collect();
            entries.sort();
            if entries.is_empty() {
                return Err(Error::invalid(format!(
                    "no dictionary pair has both words in the session's vocabularies \
                     ({} {} and {} {} words): nothing to check",
                    ns, vs.lang, nt, vt.lang
                )));
            }
            looked_up = entries.len();
            // each headword's best translation (by the score) and its rank
            let best: Vec<usize> = entries
                .iter()
                .map(|(s, gold)| {
                    *gold
                        .iter()
                        .max_by(|a, b| {
                            let (x, y) = (
                                space.score(src, tgt, *s, **a),
                                space.score(src, tgt, *s, **b),
                            );
                            score_key(x as f64)
                                .total_cmp(&score_key(y as f64))
                                .then(b.cmp(a))
                        })
                        .expect("a translation")
                })
                .collect();
            let ids: Vec<usize> = entries.iter().map(|(s, _)| *s).collect();
            let ranks = space.ranks(tgt_words, gather(src, &ids).view(), &best);
            let missed: Vec<usize> = (0..entries.len()).filter(|&i| ranks[i] > k).collect();
            let q_missed = gather(src, &missed.iter().map(|&i| ids[i]).collect::<Vec<_>>());
            let near = space.nearest(tgt_words, q_missed.view(), 1, space.rt)?;
            for (&i, near) in missed.iter().zip(&near) {
                let (s, g) = (ids[i], best[i]);
                let (s_term, t_term) = (vs.term(s as u32), vt.term(g as u32));
                rows.push(Association {
                    source: m.show(Side::Source, s_term),
                    target: m.show(Side::Target, t_term),
                    source_term: s_term.to_string(),
                    target_term: t_term.to_string(),
                    score: space.score(src, tgt, s, g) as f64,
                    similarity: sim.score(src.row(s), tgt.row(g)) as f64,
                    rank: ranks[i],
                    source_df: vs.df[s],
                    target_df: vt.df[g],
                    mutual: false,
                    nearest: near.first().map(|h| m.show(Side::Target, vt.term(h.doc))),
                    dictionary: shown_dict(s_term),
                });
            }
        }
    }
    let mut out = Associations {
        kind: opts.kind,
        csls: opts.csls,
        similarity: sim,
        source_lang: vs.lang.clone(),
        target_lang: vt.lang.clone(),
        looked_up,
        source_terms: vs.len(),
        source_words: vs.words(),
        k: opts.k.max(1),
        mutual_only: opts.mutual && opts.kind == AssocKind::New,
        sort: AssocSort::Sim,
        rows,
    };
    out.sort(AssocSort::Sim);
    Ok(out)
}

/// Opens the session in `dir` (model on the CPU) and lists its associations
/// against its workspace's dictionary. A lexical baseline, a session
/// without a checkpoint or a workspace without a dictionary is an error
/// saying so.
pub fn session_associations(dir: &Path, opts: &AssocOptions) -> Result<Associations> {
    let session = Session::open(dir)?;
    if session.is_lexical() {
        return Err(lexical_error(dir, &session.config.model));
    }
    let m = Loaded::open(dir, &candle_core::Device::Cpu)?;
    let dict = session_dictionary(&m)?;
    associations(&m, &dict, opts)
}

/// The error for a lexical baseline's session in `dir`.
pub fn lexical_error(dir: &Path, model: &str) -> Error {
    Error::file(
        dir,
        format!(
            "the session is the lexical baseline `{model}`: it has no embedding space, so no \
             term associations (they need a trained model with term vectors: s2net, cca, \
             opca, cl-lsi, xcnn, bae, ...)"
        ),
    )
}

impl Workbench {
    /// The associations of the session in `dir` ([`associations`]) against
    /// its workspace's dictionary, with the session's kept searcher (see
    /// [`Workbench::searcher`]). A lexical baseline is an error.
    pub fn associations(&self, dir: &Path, opts: &AssocOptions) -> Result<Associations> {
        let s = self.searcher(dir, &|_, _| {})?;
        let Some(m) = s.loaded() else {
            return Err(lexical_error(dir, &s.session.config.model));
        };
        let dict = workspace_dictionary(&s.corpus.ws, m)?;
        associations(m, &dict, opts)
    }
}

/// The workspace dictionary of `m`'s session, analysed as the session's
/// texts (word by word, translations cut into the target's units, as
/// [`crate::models::bm25::analysed_dictionary`] reads it); an error naming
/// the workspace when it has none.
pub fn session_dictionary(m: &Loaded) -> Result<AssocDictionary> {
    let ws = crate::corpus::Workspace::load_with_text(
        &m.session.config.workspace,
        m.session.config.text.as_ref(),
    )?;
    workspace_dictionary(&ws, m)
}

/// [`session_dictionary`] from the workspace `ws` already read.
pub fn workspace_dictionary(ws: &Workspace, m: &Loaded) -> Result<AssocDictionary> {
    let d = ws.read_dictionary()?;
    let Some(d) = d else {
        return Err(Error::file(
            &ws.path,
            "the workspace has no [dictionary]: term associations compare the model with one",
        ));
    };
    let (src, tgt) = (m.analyzer(Side::Source), m.analyzer(Side::Target));
    Ok(AssocDictionary {
        terms: crate::index::translate::unit_dictionary(d.analysed_words(src, tgt), tgt),
        written: d.surface_words(src, tgt),
    })
}

/// Rows `ids` of `a`, in that order.
fn gather(a: &Array2<f32>, ids: &[usize]) -> Array2<f32> {
    a.select(Axis(0), ids)
}

/// The term space compared: its similarity and, for CSLS, each word's
/// penalty (words only).
struct Space<'a> {
    sim: Similarity,
    rs: Option<&'a [f32]>,
    rt: Option<&'a [f32]>,
}

impl Space<'_> {
    /// The `k` nearest rows of `docs` for each query, by the similarity or,
    /// with `penalty`, by CSLS.
    fn nearest(
        &self,
        docs: ArrayView2<f32>,
        queries: ArrayView2<f32>,
        k: usize,
        penalty: Option<&[f32]>,
    ) -> Result<Vec<Vec<crate::index::Hit>>> {
        let ties = TieOrder::by_row();
        match penalty {
            Some(p) => top_k_penalised(docs, queries, k, &ties, self.sim, Matmul::default(), p),
            None => top_k_by(docs, queries, k, &ties, self.sim, Matmul::default()),
        }
    }

    /// The score of source word `s` and target word `t`.
    fn score(&self, src: &Array2<f32>, tgt: &Array2<f32>, s: usize, t: usize) -> f32 {
        let c = self.sim.score(src.row(s), tgt.row(t));
        match (self.rs, self.rt) {
            (Some(rs), Some(rt)) => 2.0 * c - rs[s] - rt[t],
            _ => c,
        }
    }

    /// For each query row (a source word) the rank among `docs`
    /// (target words) of target word `gold[i]`: how many words score at
    /// least as much as it (ties count against it, as lexicon induction
    /// counts); a score that is not finite ranks last. Blocked, so memory
    /// stays at a block of rows × `docs`.
    fn ranks(&self, docs: ArrayView2<f32>, queries: ArrayView2<f32>, gold: &[usize]) -> Vec<usize> {
        const BLOCK: usize = 256;
        let mut out = Vec::with_capacity(queries.nrows());
        for (b, chunk) in queries.axis_chunks_iter(Axis(0), BLOCK).enumerate() {
            let scores = self.sim.scores(chunk, docs);
            for (r, row) in scores.axis_iter(Axis(0)).enumerate() {
                let i = b * BLOCK + r;
                // the query's own CSLS penalty is the same for every word
                let adjusted = |t: usize, c: f32| match self.rt {
                    Some(rt) => 2.0 * c - rt[t],
                    None => c,
                };
                let g = adjusted(gold[i], row[gold[i]]);
                let n = if g.is_finite() {
                    row.iter()
                        .enumerate()
                        .filter(|(t, c)| adjusted(*t, **c) >= g)
                        .count()
                } else {
                    docs.nrows()
                };
                out.push(n.max(1));
            }
        }
        out
    }
}
