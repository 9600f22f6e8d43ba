//! Pseudo-relevance feedback for BM25 queries: Bo1 as Terrier does it and
//! RM3 as Anserini/Pyserini do it. Both search once, read the top documents
//! through the index's direct index, and return a weighted query that is
//! searched instead; the retrieval model stays this crate's BM25, in which a
//! clause weight multiplies the clause's score (Lucene's boost).
//!
//! # Bo1 (Terrier 5: `QueryExpansion`, `DFRBagExpansionTerms`, `Bo1`)
//!
//! * Feedback set: the first pass's top `fb_docs` documents (default 3).
//! * Candidates: every term of the feedback set. With at least
//!   [`BO1_MIN_DOCUMENTS`] feedback documents, a term in fewer of them than
//!   that is dropped unless it is an original query term (Terrier's
//!   `expansion.mindocuments`, default 2).
//! * Weight (Bose-Einstein 1):
//!   `w(t) = tf_x · log2((1 + P_n) / P_n) + log2(1 + P_n)`
//!   with `P_n = F_t / N`, `tf_x` the term's count in the feedback
//!   set, `F_t` its count in the collection and `N` the number of documents
//!   (this index's `N`: documents with at least one term).
//! * Normalisation: Terrier's default parameter-free one
//!   (`parameter.free.expansion = true`, so Rocchio's β = 0.4 is not
//!   applied): every weight is divided by
//!   `tf_m · log2((1 + f) / f) + log2(1 + f)`,
//!   `f = tf_m / N`, where `tf_m` is the feedback-set count of the
//!   best-weighted term.
//! * Combination: the original clause weights are divided by the largest
//!   of them (Terrier's `normaliseTermWeights`, which PyTerrier also calls
//!   before expanding); the `max(fb_terms, clauses)` best candidates (default
//!   `fb_terms` = 10) then add their normalised weight to the query: to the
//!   single-term clause of the same term where there is one (Terrier's
//!   `addTermPropertyWeight`), else as a new single-term clause. A synonym
//!   set (a `bm25-dict` structured clause) is one query term of its own, as
//!   Terrier's `#syn` operator is: a member that is chosen is added beside it.
//! * Ties (which Terrier leaves to hash order) go to the term that sorts
//!   first.
//!
//! # RM3 (Anserini `Rm3Reranker`, Pyserini `set_rm3` defaults)
//!
//! * Feedback set: the top `fb_docs` documents (default 10) with their
//!   first-pass BM25 scores `s_d`.
//! * Each feedback document's term counts, without the terms found in more
//!   than [`RM3_MAX_DF_RATIO`] (10 %) of the documents, cut
//!   to its `fb_terms` most frequent terms; `|d|` is the sum of the counts
//!   kept.
//! * Relevance model: `rm(t) = Σ_d tf(t, d) / |d| · s_d`, cut to the
//!   `fb_terms` best terms (default 10) and scaled to sum 1.
//! * Query model: the clause weights scaled to sum 1; the expanded query is
//!   `α · q + (1 − α) · rm` with `α` = `original_weight` (default 0.5), a
//!   feedback term joining the single-term clause of the same term.
//! * Anserini also drops terms outside `[a-z0-9]{2,20}` (Pyserini's
//!   `filter_terms`); that filter is for English and would drop every Hindi
//!   term, so it is not applied. Scores are `f64` where Anserini uses `f32`.
//!   Ties go to the term that sorts first.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::bm25::{Bm25Index, Query};
use super::Hit;
use crate::{Error, Result};

/// Bo1's default number of feedback documents (Terrier's `expansion.documents`).
pub const BO1_FB_DOCS: usize = 3;
/// Bo1's default number of expansion terms (Terrier's `expansion.terms`).
pub const BO1_FB_TERMS: usize = 10;
/// Terrier's `expansion.mindocuments`: feedback documents a new term must occur in.
pub const BO1_MIN_DOCUMENTS: usize = 2;
/// RM3's default number of feedback documents (Anserini/Pyserini).
pub const RM3_FB_DOCS: usize = 10;
/// RM3's default number of feedback terms (Anserini/Pyserini).
pub const RM3_FB_TERMS: usize = 10;
/// RM3's default weight of the original query (Anserini/Pyserini).
pub const RM3_ORIGINAL_WEIGHT: f64 = 0.5;
/// Anserini's RM3 leaves out terms found in more than this share of the documents.
pub const RM3_MAX_DF_RATIO: f64 = 0.1;

/// Pseudo-relevance feedback of a BM25 query.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "lowercase")]
pub enum Expansion {
    /// The query as it is.
    #[default]
    None,
    /// Terrier's Bo1 (see the module docs).
    Bo1 {
        /// Feedback documents.
        fb_docs: usize,
        /// Expansion terms.
        fb_terms: usize,
    },
    /// Anserini's RM3 (see the module docs).
    Rm3 {
        /// Feedback documents.
        fb_docs: usize,
        /// Feedback terms.
        fb_terms: usize,
        /// Weight α of the original query, 0 to 1.
        original_weight: f64,
    },
}

impl Expansion {
    /// Bo1 with Terrier's defaults (3 documents, 10 terms).
    pub fn bo1() -> Expansion {
        Expansion::Bo1 {
            fb_docs: BO1_FB_DOCS,
            fb_terms: BO1_FB_TERMS,
        }
    }

    /// RM3 with Anserini's defaults (10 documents, 10 terms, α = 0.5).
    pub fn rm3() -> Expansion {
        Expansion::Rm3 {
            fb_docs: RM3_FB_DOCS,
            fb_terms: RM3_FB_TERMS,
            original_weight: RM3_ORIGINAL_WEIGHT,
        }
    }

    /// `method` (`none`, `bo1`, `rm3`) with the method's defaults where
    /// `fb_docs`, `fb_terms` or `rm3_weight` is `None`. A value the method
    /// does not read (any with `none`, `rm3_weight` with `bo1`) is an error,
    /// as is a count of 0 or a weight outside 0..1.
    pub fn from_parts(
        method: &str,
        fb_docs: Option<usize>,
        fb_terms: Option<usize>,
        rm3_weight: Option<f64>,
    ) -> Result<Expansion> {
        let mut e: Expansion = method.parse()?;
        match &mut e {
            Expansion::None => {
                if fb_docs.is_some() || fb_terms.is_some() || rm3_weight.is_some() {
                    return Err(Error::invalid(
                        "feedback documents, terms and the RM3 weight apply to query expansion (bo1 or rm3), not to none",
                    ));
                }
            }
            Expansion::Bo1 {
                fb_docs: d,
                fb_terms: t,
            } => {
                if rm3_weight.is_some() {
                    return Err(Error::invalid(
                        "the RM3 weight of the original query applies to rm3, not to bo1",
                    ));
                }
                *d = fb_docs.unwrap_or(*d);
                *t = fb_terms.unwrap_or(*t);
            }
            Expansion::Rm3 {
                fb_docs: d,
                fb_terms: t,
                original_weight: w,
            } => {
                *d = fb_docs.unwrap_or(*d);
                *t = fb_terms.unwrap_or(*t);
                *w = rm3_weight.unwrap_or(*w);
            }
        }
        e.validate()?;
        Ok(e)
    }

    /// `none`, `bo1` or `rm3`.
    pub fn name(&self) -> &'static str {
        match self {
            Expansion::None => "none",
            Expansion::Bo1 { .. } => "bo1",
            Expansion::Rm3 { .. } => "rm3",
        }
    }

    /// Whether the query is left as it is.
    pub fn is_none(&self) -> bool {
        matches!(self, Expansion::None)
    }

    /// Feedback documents and terms (0 and 0 for `None`).
    pub fn feedback(&self) -> (usize, usize) {
        match *self {
            Expansion::None => (0, 0),
            Expansion::Bo1 { fb_docs, fb_terms }
            | Expansion::Rm3 {
                fb_docs, fb_terms, ..
            } => (fb_docs, fb_terms),
        }
    }

    /// Checks that the counts are at least 1 and α lies in 0..1.
    pub fn validate(&self) -> Result<()> {
        if let Expansion::Rm3 {
            original_weight, ..
        } = *self
        {
            if !(0.0..=1.0).contains(&original_weight) {
                return Err(Error::invalid(format!(
                    "the RM3 weight of the original query must lie in [0, 1], got {original_weight}"
                )));
            }
        }
        let (d, t) = self.feedback();
        if !self.is_none() && (d == 0 || t == 0) {
            return Err(Error::invalid(format!(
                "{} needs at least 1 feedback document and 1 term (got {d} and {t})",
                self.name()
            )));
        }
        Ok(())
    }
}

impl fmt::Display for Expansion {
    /// `none`, `bo1 (3 docs, 10 terms)`, `rm3 (10 docs, 10 terms, α=0.5)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Expansion::None => write!(f, "none"),
            Expansion::Bo1 { fb_docs, fb_terms } => {
                write!(f, "bo1 ({fb_docs} docs, {fb_terms} terms)")
            }
            Expansion::Rm3 {
                fb_docs,
                fb_terms,
                original_weight,
            } => write!(
                f,
                "rm3 ({fb_docs} docs, {fb_terms} terms, α={original_weight})"
            ),
        }
    }
}

impl FromStr for Expansion {
    type Err = Error;

    /// `none`, `bo1` or `rm3`, with the method's defaults.
    fn from_str(s: &str) -> Result<Expansion> {
        match s.trim() {
            "none" => Ok(Expansion::None),
            "bo1" => Ok(Expansion::bo1()),
            "rm3" => Ok(Expansion::rm3()),
            other => Err(Error::invalid(format!(
                "unknown query expansion `{other}` (expected none, bo1 or rm3)"
            ))),
        }
    }
}

/// A term the feedback added to a query, with the weight it added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddedTerm {
    /// The (analysed) term.
    pub term: String,
    /// Weight added to the query (Bo1: the normalised Bo1 weight; RM3:
    /// `(1 − α) · rm(t)`).
    pub weight: f64,
}

/// A query after pseudo-relevance feedback.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expanded {
    /// The query to search with (the original one for [`Expansion::None`]).
    pub query: Query,
    /// Terms the feedback chose, best first, with the weight each added.
    pub terms: Vec<AddedTerm>,
    /// Feedback documents used (fewer than asked when fewer match).
    pub feedback_docs: usize,
}

/// Bo1's weight of a term with count `tf_x` in the feedback set and `cf` in
/// a collection of `n` documents: `tf_x · log2((1 + P) / P) + log2(1 + P)`,
/// `P = cf / n`.
pub fn bo1_weight(tf_x: f64, cf: f64, n: f64) -> f64 {
    let p = cf / n;
    tf_x * ((1.0 + p) / p).log2() + (1.0 + p).log2()
}

/// Terrier's parameter-free Bo1 normaliser: [`bo1_weight`] of a term whose
/// collection count were `max_tf`, the feedback-set count of the
/// best-weighted term.
pub fn bo1_normaliser(max_tf: f64, n: f64) -> f64 {
    bo1_weight(max_tf, max_tf, n)
}

/// `query` after `expansion` on `index` (see the module docs).
pub fn expand(index: &Bm25Index, query: &Query, expansion: Expansion) -> Expanded {
    let (fb_docs, _) = expansion.feedback();
    let hits = if expansion.is_none() {
        Vec::new()
    } else {
        index.search(query, fb_docs)
    };
    expand_from(index, query, &hits, expansion)
}

/// [`expand`] for many queries: the first pass in one
/// [`Bm25Index::search_many`], the feedback in parallel.
pub fn expand_many(index: &Bm25Index, queries: &[Query], expansion: Expansion) -> Vec<Expanded> {
    if expansion.is_none() {
        return queries
            .iter()
            .map(|q| expand_from(index, q, &[], expansion))
            .collect();
    }
    let (fb_docs, _) = expansion.feedback();
    let hits = index.search_many(queries, fb_docs);
    queries
        .par_iter()
        .zip(hits.par_iter())
        .map(|(q, h)| expand_from(index, q, h, expansion))
        .collect()
}

/// The expansion of `query` from its first pass's top documents `hits`.
fn expand_from(index: &Bm25Index, query: &Query, hits: &[Hit], expansion: Expansion) -> Expanded {
    match expansion {
        Expansion::None => Expanded {
            query: query.clone(),
            ..Default::default()
        },
        Expansion::Bo1 { fb_terms, .. } => bo1(index, query, hits, fb_terms),
        Expansion::Rm3 {
            fb_terms,
            original_weight,
            ..
        } => rm3(index, query, hits, fb_terms, original_weight),
    }
}

/// Sorts `(term id, weight)` best first, ties by term.
fn rank_terms(index: &Bm25Index, v: &mut [(u32, f64)]) {
    v.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| index.term(a.0).cmp(index.term(b.0)))
    });
}

fn bo1(index: &Bm25Index, query: &Query, hits: &[Hit], fb_terms: usize) -> Expanded {
    let max_w = query.max_weight();
    let normalised = if max_w > 0.0 {
        query.scaled(1.0 / max_w)
    } else {
        query.clone()
    };
    if hits.is_empty() {
        return Expanded {
            query: normalised,
            ..Default::default()
        };
    }
    // term → (count in the feedback set, feedback documents holding it)
    let mut bag: HashMap<u32, (f64, usize)> = HashMap::new();
    for h in hits {
        let (ids, tfs) = index.doc_terms(h.doc);
        for (&t, &tf) in ids.iter().zip(tfs) {
            let e = bag.entry(t).or_default();
            e.0 += tf as f64;
            e.1 += 1;
        }
    }
    let originals: HashSet<u32> = query
        .clauses
        .iter()
        .filter(|c| c.terms.len() == 1)
        .filter_map(|c| index.term_id(&c.terms[0]))
        .collect();
    let min_docs = if hits.len() < BO1_MIN_DOCUMENTS {
        0
    } else {
        BO1_MIN_DOCUMENTS
    };
    let n = index.n_nonempty() as f64;
    let mut cands: Vec<(u32, f64)> = bag
        .iter()
        .filter(|(t, (_, df))| *df >= min_docs || originals.contains(t))
        .map(|(&t, &(tf, _))| (t, bo1_weight(tf, index.collection_frequency(t), n)))
        .collect();
    rank_terms(index, &mut cands);
    let Some(&(best, _)) = cands.first() else {
        return Expanded {
            query: normalised,
            feedback_docs: hits.len(),
            ..Default::default()
        };
    };
    let norm = bo1_normaliser(bag[&best].0, n);
    let k = fb_terms.max(query.clauses.len());
    let added = cands.iter().take(k).map(|&(t, w)| (t, w / norm));
    with_terms(index, normalised, added, hits.len())
}

/// `query` with the positive-weight terms of `added` appended as clauses of
/// their own.
fn with_terms(
    index: &Bm25Index,
    mut query: Query,
    added: impl Iterator<Item = (u32, f64)>,
    feedback_docs: usize,
) -> Expanded {
    let mut terms = Vec::new();
    for (t, w) in added {
        if w > 0.0 {
            query.add(vec![index.term(t).to_string()], w);
            terms.push(AddedTerm {
                term: index.term(t).to_string(),
                weight: w,
            });
        }
    }
    Expanded {
        query,
        terms,
        feedback_docs,
    }
}

fn rm3(index: &Bm25Index, query: &Query, hits: &[Hit], fb_terms: usize, alpha: f64) -> Expanded {
    let total = query.total_weight();
    let out = if total > 0.0 {
        query.scaled(alpha / total)
    } else {
        query.clone()
    };
    let n_docs = index.n_docs() as f64;
    let mut rm: HashMap<u32, f64> = HashMap::new();
    for h in hits {
        let (ids, tfs) = index.doc_terms(h.doc);
        let mut v: Vec<(u32, f64)> = ids
            .iter()
            .zip(tfs)
            .filter(|(&t, _)| index.postings().df(t) as f64 / n_docs <= RM3_MAX_DF_RATIO)
            .map(|(&t, &tf)| (t, tf as f64))
            .collect();
        rank_terms(index, &mut v);
        v.truncate(fb_terms);
        let len: f64 = v.iter().map(|x| x.1).sum();
        // Anserini skips (near) empty feedback documents
        if len <= 0.001 {
            continue;
        }
        for (t, tf) in v {
            *rm.entry(t).or_default() += tf / len * h.score;
        }
    }
    let mut rm: Vec<(u32, f64)> = rm.into_iter().collect();
    rank_terms(index, &mut rm);
    rm.truncate(fb_terms);
    let sum: f64 = rm.iter().map(|x| x.1).sum();
    let added = rm
        .into_iter()
        .filter(|_| sum > 0.0)
        .map(|(t, p)| (t, (1.0 - alpha) * p / sum));
    with_terms(index, out, added, hits.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Bm25Params;

    #[test]
    fn settings_take_the_methods_defaults_and_refuse_strays() {
        assert_eq!(
            Expansion::from_parts("bo1", None, None, None).unwrap(),
            Expansion::Bo1 {
                fb_docs: 3,
                fb_terms: 10
            }
        );
        assert_eq!(
            Expansion::from_parts("rm3", Some(5), None, Some(0.7)).unwrap(),
            Expansion::Rm3 {
                fb_docs: 5,
                fb_terms: 10,
                original_weight: 0.7
            }
        );
        for (m, d, w) in [
            ("none", Some(3), None),
            ("bo1", None, Some(0.5)),
            ("rm3", Some(0), None),
            ("rm3", None, Some(1.5)),
            ("kl", None, None),
        ] {
            assert!(Expansion::from_parts(m, d, None, w).is_err(), "{m}");
        }
        assert_eq!(Expansion::bo1().to_string(), "bo1 (3 docs, 10 terms)");
    }

    #[test]
    fn none_leaves_the_query_and_rm3_with_alpha_one_keeps_its_ranking() {
        let docs = vec![vec!["a", "b"], vec!["a", "c", "c"], vec!["d"]];
        let idx = Bm25Index::build(&docs, Bm25Params::default()).unwrap();
        let q = Query::from_tokens(&["a", "a", "c"]);
        assert_eq!(expand(&idx, &q, Expansion::None).query, q);
        let e = expand(
            &idx,
            &q,
            Expansion::Rm3 {
                fb_docs: 2,
                fb_terms: 5,
                original_weight: 1.0,
            },
        );
        assert!(e.terms.is_empty());
        let order = |q: &Query| idx.search(q, 10).iter().map(|h| h.doc).collect::<Vec<_>>();
        assert_eq!(order(&e.query), order(&q));
    }
}
