//! Why a dense model ranked a document where it did: each query word's
//! share of the cosine, and the document words close to the query.

use std::collections::HashSet;

use ndarray::{Array1, Array2};

use super::RELATED_SIMILARITY;
use crate::session::Loaded;
use crate::text::Side;
use crate::Result;

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
pub(super) struct Explain<'a> {
    m: &'a Loaded,
    doc_emb: &'a crate::index::Embeddings,
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
pub(super) struct Contributions {
    pub(super) words: Vec<(String, f64)>,
    pub(super) rest: f64,
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
    pub(super) fn new(
        m: &'a Loaded,
        doc_emb: &'a crate::index::Embeddings,
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
    pub(super) fn contributions(&self, doc: usize) -> Option<Contributions> {
        if self.m.model.similarity() != crate::space::Similarity::Cosine {
            return None;
        }
        let rows = self.doc_emb.view();
        let de = rows.row(doc);
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
    pub(super) fn related(&self, term: &str) -> bool {
        self.m
            .vocabs
            .target
            .id(term)
            .is_some_and(|id| self.related.contains(&id))
    }
}
