//! Exact top-k search over unit-row embeddings by blocked matrix products.
//!
//! The scores of a block of queries against a block of documents come from one
//! matrix product into a small buffer (`QUERY_BLOCK × DOC_BLOCK` floats), and
//! each query keeps its `k` best in a sorted array whose worst score is a
//! threshold: most scores fail one comparison with it. Documents are split into
//! contiguous ranges searched in parallel (rayon), each range with its own
//! top-k lists, merged at the end. Memory beyond the document matrix is the
//! per-thread buffers and the top-k lists: no `queries × docs` matrix is ever
//! made.
//!
//! Ties are broken like the evaluator ([`super::TieOrder`]): equal scores rank
//! the greater document id (or row) first, whatever the block or thread layout.

use ndarray::ArrayView2;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{Embeddings, Hit, TieOrder};
use crate::space::{js_scores_into, Similarity};
use crate::{Error, Result};

/// Queries per matrix product.
const QUERY_BLOCK: usize = 256;
/// Documents per matrix product.
const DOC_BLOCK: usize = 1024;

/// Which matrix-product kernel computes the score blocks (all are exact
/// single-precision products; they differ in speed only, see
/// `rosetta bench search --matmul`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Matmul {
    /// The `gemm` crate (candle's CPU kernel).
    Gemm,
    /// ndarray's `general_mat_mul` (the `matrixmultiply` crate).
    Ndarray,
    /// faer's `matmul` (the fastest here: the default).
    #[default]
    Faer,
}

impl Matmul {
    /// All kernels, for benchmarks.
    pub const ALL: [Matmul; 3] = [Matmul::Faer, Matmul::Gemm, Matmul::Ndarray];

    /// The kernel's name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            Matmul::Gemm => "gemm",
            Matmul::Ndarray => "ndarray",
            Matmul::Faer => "faer",
        }
    }

    /// `out (m × n, row-major) = a (m × d, row-major) · b (n × d, row-major)ᵀ`.
    fn a_bt(self, a: &[f32], b: &[f32], d: usize, out: &mut [f32]) {
        let m = a.len() / d;
        let n = b.len() / d;
        debug_assert_eq!(out.len(), m * n);
        if m == 0 || n == 0 {
            return;
        }
        match self {
            Matmul::Gemm => unsafe {
                // SAFETY: the three slices hold exactly m×d, n×d and m×n
                // elements (checked above) and the strides describe them.
                gemm::gemm(
                    m,
                    n,
                    d,
                    out.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    a.as_ptr(),
                    1,
                    d as isize,
                    b.as_ptr(),
                    d as isize,
                    1,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                )
            },
            Matmul::Ndarray => {
                let av = ArrayView2::from_shape((m, d), a).expect("block shape");
                let bv = ArrayView2::from_shape((n, d), b).expect("block shape");
                let mut ov = ndarray::ArrayViewMut2::from_shape((m, n), out).expect("block shape");
                ndarray::linalg::general_mat_mul(1.0, &av, &bv.t(), 0.0, &mut ov);
            }
            Matmul::Faer => {
                let av = faer::MatRef::from_row_major_slice(a, m, d);
                let bv = faer::MatRef::from_row_major_slice(b, n, d);
                let ov = faer::MatMut::from_row_major_slice_mut(out, m, n);
                faer::linalg::matmul::matmul(
                    ov,
                    faer::Accum::Replace,
                    av,
                    bv.transpose(),
                    1.0f32,
                    faer::Par::Seq,
                );
            }
        }
    }
}

impl std::str::FromStr for Matmul {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Matmul::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| Error::invalid(format!("unknown matmul {s:?}: gemm, ndarray or faer")))
    }
}

/// The `k` best (score, tie key, row) of many queries, each sorted best first.
struct TopK {
    k: usize,
    scores: Vec<f32>,
    keys: Vec<u32>,
    docs: Vec<u32>,
    len: Vec<usize>,
    thresh: Vec<f32>,
}

impl TopK {
    fn new(nq: usize, k: usize) -> Self {
        TopK {
            k,
            scores: vec![0.0; nq * k],
            keys: vec![0; nq * k],
            docs: vec![0; nq * k],
            len: vec![0; nq],
            thresh: vec![f32::NEG_INFINITY; nq],
        }
    }

    /// Offers `doc` with score `s` and tie key `key` to query `q`.
    #[inline(never)]
    fn offer(&mut self, q: usize, s: f32, doc: u32, key: u32) {
        let (k, base) = (self.k, q * self.k);
        let mut n = self.len[q];
        if n == k {
            let (ws, wk) = (self.scores[base + k - 1], self.keys[base + k - 1]);
            if s < ws || (s == ws && key <= wk) {
                return;
            }
            n = k - 1;
        }
        let mut p = n;
        while p > 0 {
            let (ps, pk) = (self.scores[base + p - 1], self.keys[base + p - 1]);
            if s > ps || (s == ps && key > pk) {
                self.scores[base + p] = ps;
                self.keys[base + p] = pk;
                self.docs[base + p] = self.docs[base + p - 1];
                p -= 1;
            } else {
                break;
            }
        }
        self.scores[base + p] = s;
        self.keys[base + p] = key;
        self.docs[base + p] = doc;
        self.len[q] = n + 1;
        if n + 1 == k {
            self.thresh[q] = self.scores[base + k - 1];
        }
    }

    /// Scans one query's scores of documents `first..first + row.len()`.
    #[inline]
    fn scan(&mut self, q: usize, row: &[f32], first: usize, ties: &TieOrder) {
        const LANES: usize = 16;
        let mut th = self.thresh[q];
        for (c, chunk) in row.chunks(LANES).enumerate() {
            let any = chunk.iter().fold(false, |a, &s| a | (s >= th));
            if !any {
                continue;
            }
            for (i, &s) in chunk.iter().enumerate() {
                // a non-finite score (a diverged model) is never retrieved
                if s >= th && s.is_finite() {
                    let doc = (first + c * LANES + i) as u32;
                    self.offer(q, s, doc, ties.key(doc));
                    th = self.thresh[q];
                }
            }
        }
    }
}

/// Exact top-`k` of every query row against the document rows by dot product
/// (the cosine for unit rows), ranked in evaluator order. Runs on the current
/// rayon pool with the given kernel.
pub fn top_k(
    docs: ArrayView2<f32>,
    queries: ArrayView2<f32>,
    k: usize,
    ties: &TieOrder,
    matmul: Matmul,
) -> Result<Vec<Vec<Hit>>> {
    top_k_scored(
        docs,
        queries,
        k,
        ties,
        |q, d, _, dim, out| matmul.a_bt(q, d, dim, out),
        &|_| {},
    )
}

/// [`top_k`] with rows compared by `sim`: the cosine through `matmul`, the
/// Jensen–Shannon score pair by pair.
pub fn top_k_by(
    docs: ArrayView2<f32>,
    queries: ArrayView2<f32>,
    k: usize,
    ties: &TieOrder,
    sim: Similarity,
    matmul: Matmul,
) -> Result<Vec<Vec<Hit>>> {
    top_k_releasing(docs, queries, k, ties, sim, matmul, &|_| {})
}

/// [`top_k_by`] calling `release(rows)` on each block of document rows once
/// it is scored (a mapped table's pages then leave resident memory:
/// [`super::Embeddings::release`]).
fn top_k_releasing(
    docs: ArrayView2<f32>,
    queries: ArrayView2<f32>,
    k: usize,
    ties: &TieOrder,
    sim: Similarity,
    matmul: Matmul,
    release: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<Vec<Vec<Hit>>> {
    match sim {
        Similarity::Cosine => top_k_scored(
            docs,
            queries,
            k,
            ties,
            |q, d, _, dim, out| matmul.a_bt(q, d, dim, out),
            release,
        ),
        Similarity::JensenShannon => top_k_scored(
            docs,
            queries,
            k,
            ties,
            |q, d, _, dim, out| js_scores_into(q, d, dim, out),
            release,
        ),
    }
}

/// [`top_k_by`] ranked by `2·sim(q, d) − penalty[d]`: the CSLS score
/// (cross-domain similarity local scaling, Conneau et al. 2018) less the
/// query's own penalty, which is the same for every document and does not
/// change a ranking. `penalty` holds one value per document row; the hits
/// carry the adjusted score.
pub fn top_k_penalised(
    docs: ArrayView2<f32>,
    queries: ArrayView2<f32>,
    k: usize,
    ties: &TieOrder,
    sim: Similarity,
    matmul: Matmul,
    penalty: &[f32],
) -> Result<Vec<Vec<Hit>>> {
    if penalty.len() != docs.nrows() {
        return Err(Error::invalid(format!(
            "{} penalties for {} documents",
            penalty.len(),
            docs.nrows()
        )));
    }
    top_k_scored(
        docs,
        queries,
        k,
        ties,
        |q, d, first, dim, out| {
            match sim {
                Similarity::Cosine => matmul.a_bt(q, d, dim, out),
                Similarity::JensenShannon => js_scores_into(q, d, dim, out),
            }
            let nd = d.len() / dim;
            for row in out.chunks_exact_mut(nd) {
                for (s, p) in row.iter_mut().zip(&penalty[first..first + nd]) {
                    *s = 2.0 * *s - p;
                }
            }
        },
        &|_| {},
    )
}

/// Exact top-`k` with `score(query block, doc block, first doc row, dim,
/// out)` filling the row-major `queries × docs` scores of one block pair;
/// `release(rows)` is called on each block of document rows once every
/// query has scored it.
fn top_k_scored(
    docs: ArrayView2<f32>,
    queries: ArrayView2<f32>,
    k: usize,
    ties: &TieOrder,
    score: impl Fn(&[f32], &[f32], usize, usize, &mut [f32]) + Sync,
    release: &(dyn Fn(std::ops::Range<usize>) + Sync),
) -> Result<Vec<Vec<Hit>>> {
    let (n, d) = docs.dim();
    let nq = queries.nrows();
    if queries.ncols() != d {
        return Err(Error::invalid(format!(
            "queries have {} dimensions but documents {d}",
            queries.ncols()
        )));
    }
    if n > u32::MAX as usize {
        return Err(Error::invalid("too many documents for one index"));
    }
    if !ties.is_empty() && ties.len() != n {
        return Err(Error::invalid(format!(
            "tie order covers {} documents, the index {n}",
            ties.len()
        )));
    }
    let k = k.min(n);
    if k == 0 || nq == 0 || d == 0 {
        return Ok(vec![Vec::new(); nq]);
    }
    let docs_std = docs.as_standard_layout();
    let dslice = docs_std.as_slice().expect("standard layout");
    let q_std = queries.as_standard_layout();
    let qslice = q_std.as_slice().expect("standard layout");

    // contiguous document ranges, a few per thread for balance
    let parts = (rayon::current_num_threads() * 4).max(1);
    let per = n.div_ceil(parts).div_ceil(DOC_BLOCK) * DOC_BLOCK;
    let ranges: Vec<(usize, usize)> = (0..n)
        .step_by(per.max(1))
        .map(|a| (a, (a + per).min(n)))
        .collect();
    let partial: Vec<TopK> = ranges
        .par_iter()
        .map(|&(a, e)| {
            let mut top = TopK::new(nq, k);
            let (qbs, dbs) = (QUERY_BLOCK, DOC_BLOCK);
            let mut buf = vec![0f32; qbs.min(nq) * dbs.min(e - a)];
            for db in (a..e).step_by(dbs) {
                let de = (db + dbs).min(e);
                let dblk = &dslice[db * d..de * d];
                let nd = de - db;
                for qb in (0..nq).step_by(qbs) {
                    let qe = (qb + qbs).min(nq);
                    let out = &mut buf[..(qe - qb) * nd];
                    score(&qslice[qb * d..qe * d], dblk, db, d, out);
                    for (i, row) in out.chunks_exact(nd).enumerate() {
                        top.scan(qb + i, row, db, ties);
                    }
                }
                release(db..de);
            }
            top
        })
        .collect();
    let mut out = Vec::with_capacity(nq);
    for q in 0..nq {
        let mut hits: Vec<Hit> = Vec::with_capacity(k * partial.len());
        for t in &partial {
            let base = q * k;
            for i in 0..t.len[q] {
                hits.push(Hit {
                    doc: t.docs[base + i],
                    score: t.scores[base + i] as f64,
                });
            }
        }
        ties.sort(&mut hits);
        hits.truncate(k);
        out.push(hits);
    }
    Ok(out)
}

/// A dense index: the document embeddings (one row per document, in memory
/// or memory-mapped: [`Embeddings`]), the similarity they are searched by
/// and how ties are broken. A search scans mapped rows block by block,
/// each block's pages released once scored, so the process's resident
/// memory does not grow with the collection.
#[derive(Debug, Clone)]
pub struct DenseIndex {
    docs: Embeddings,
    ties: TieOrder,
    matmul: Matmul,
    similarity: Similarity,
}

impl DenseIndex {
    /// Wraps document embeddings (rows; finite values: checked block by
    /// block, a mapped table's pages released as it goes). Rows are used as
    /// they are: normalise them first for cosine.
    pub fn new(docs: impl Into<Embeddings>) -> Result<Self> {
        let docs = docs.into();
        let d = docs.ncols().max(1);
        docs.for_blocks(|first, b| match b.iter().position(|v| !v.is_finite()) {
            Some(pos) => Err(Error::invalid(format!(
                "document embedding row {} has a value that is not finite{}",
                first + pos / d,
                docs.mapped_from()
                    .map(|p| format!(" ({})", p.display()))
                    .unwrap_or_default()
            ))),
            None => Ok(()),
        })?;
        Ok(DenseIndex {
            docs,
            ties: TieOrder::by_row(),
            matmul: Matmul::default(),
            similarity: Similarity::Cosine,
        })
    }

    /// Breaks ties by these document ids (greater first), as the evaluator.
    pub fn with_docnos<S: AsRef<str>>(mut self, docnos: &[S]) -> Result<Self> {
        if docnos.len() != self.docs.nrows() {
            return Err(Error::invalid(format!(
                "{} document ids for {} embeddings",
                docnos.len(),
                self.docs.nrows()
            )));
        }
        self.ties = TieOrder::from_docnos(docnos);
        Ok(self)
    }

    /// Searches by `sim` (default: the cosine, as a dot product); errors if
    /// the rows are not what it compares (see [`Similarity::check_rows`]).
    pub fn with_similarity(mut self, sim: Similarity) -> Result<Self> {
        if sim != Similarity::Cosine {
            // the cosine's check (finite values) was made by `new`
            self.docs.for_blocks(|first, b| {
                sim.check_rows(
                    b,
                    &format!("document embeddings (rows counted from {first})"),
                )
            })?;
        }
        self.similarity = sim;
        Ok(self)
    }

    /// Uses another matrix-product kernel.
    pub fn with_matmul(mut self, matmul: Matmul) -> Self {
        self.matmul = matmul;
        self
    }

    /// The document embeddings.
    pub fn docs(&self) -> &Embeddings {
        &self.docs
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.nrows()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.docs.nrows() == 0
    }

    /// The `k` best documents of every query row, in evaluator order.
    pub fn search(&self, queries: ArrayView2<f32>, k: usize) -> Result<Vec<Vec<Hit>>> {
        top_k_releasing(
            self.docs.view(),
            queries,
            k,
            &self.ties,
            self.similarity,
            self.matmul,
            &|rows| self.docs.release(rows),
        )
    }
}

pub use super::npy::{npy_bytes, read_npy, read_npy_checked, write_npy};

/// The mean of the `k` largest values of `c` (reordered), 0 when empty.
pub fn mean_of_top(c: &mut [f32], k: usize) -> f32 {
    let k = k.min(c.len());
    if k == 0 {
        return 0.0;
    }
    let key = super::rank_key32;
    c.select_nth_unstable_by(k - 1, |a, b| key(*b).total_cmp(&key(*a)));
    c[..k].iter().sum::<f32>() / k as f32
}

/// For every row of `a`, the mean of its `k` largest similarities with rows
/// of `b` (blocked, so memory stays at block × |b|).
pub fn mean_top_k(
    a: &ndarray::Array2<f32>,
    b: &ndarray::Array2<f32>,
    k: usize,
    sim: crate::space::Similarity,
) -> ndarray::Array1<f32> {
    let mut out = ndarray::Array1::<f32>::zeros(a.nrows());
    const BLOCK: usize = 1024;
    for (bi, chunk) in a.axis_chunks_iter(ndarray::Axis(0), BLOCK).enumerate() {
        let sims = sim.scores(chunk, b.view());
        for (r, row) in sims.axis_iter(ndarray::Axis(0)).enumerate() {
            let mut v = row.to_vec();
            out[bi * BLOCK + r] = mean_of_top(&mut v, k);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn ties_rank_greater_row_first() {
        let docs = array![[1.0f32, 0.0], [0.0, 1.0], [1.0, 0.0], [0.5, 0.5]];
        let q = array![[1.0f32, 0.0]];
        for m in Matmul::ALL {
            let hits = top_k(docs.view(), q.view(), 3, &TieOrder::by_row(), m).unwrap();
            let rows: Vec<u32> = hits[0].iter().map(|h| h.doc).collect();
            assert_eq!(rows, vec![2, 0, 3], "{m:?}");
        }
    }

    #[test]
    fn penalised_top_k_ranks_by_twice_the_score_less_the_penalty() {
        // cosine 1.0, 0.8, 0.6: the penalty of the first two reverses them
        // under the third, and the hits carry 2·sim − penalty
        let docs = array![[1.0f32, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]];
        let q = array![[1.0f32, 0.0]];
        let pen = [1.5f32, 1.0, 0.0, 0.0];
        for sim in [Similarity::Cosine, Similarity::JensenShannon] {
            // distributions for Jensen–Shannon
            let (docs, q) = match sim {
                Similarity::Cosine => (docs.clone(), q.clone()),
                Similarity::JensenShannon => (
                    array![[0.9f32, 0.1], [0.7, 0.3], [0.4, 0.6], [0.1, 0.9]],
                    array![[0.9f32, 0.1]],
                ),
            };
            let hits = top_k_penalised(
                docs.view(),
                q.view(),
                4,
                &TieOrder::by_row(),
                sim,
                Matmul::default(),
                &pen,
            )
            .unwrap();
            let mut want: Vec<(u32, f32)> = (0..4)
                .map(|d| (d as u32, 2.0 * sim.score(q.row(0), docs.row(d)) - pen[d]))
                .collect();
            want.sort_by(|a, b| b.1.total_cmp(&a.1));
            let got: Vec<u32> = hits[0].iter().map(|h| h.doc).collect();
            assert_eq!(got, want.iter().map(|w| w.0).collect::<Vec<_>>(), "{sim:?}");
            for (h, w) in hits[0].iter().zip(&want) {
                assert!((h.score - f64::from(w.1)).abs() < 1e-5, "{sim:?}");
            }
            if sim == Similarity::Cosine {
                assert_eq!(got, vec![2, 1, 0, 3]);
            }
        }
        let e = top_k_penalised(
            docs.view(),
            q.view(),
            1,
            &TieOrder::by_row(),
            Similarity::Cosine,
            Matmul::default(),
            &[0.0],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("1 penalties for 4 documents"), "{e}");
    }

    #[test]
    fn jensen_shannon_index_ranks_by_js_score() {
        // (½,½) has the same dot product with every distribution; JS tells them apart.
        let docs = array![[0.9f32, 0.1], [0.45, 0.55], [0.0, 0.0], [0.7, 0.3]];
        let idx = DenseIndex::new(docs.clone())
            .unwrap()
            .with_similarity(Similarity::JensenShannon)
            .unwrap();
        let q = array![[0.5f32, 0.5]];
        let hits = idx.search(q.view(), 4).unwrap();
        let rows: Vec<u32> = hits[0].iter().map(|h| h.doc).collect();
        assert_eq!(rows, vec![1, 3, 0, 2]);
        for h in &hits[0] {
            let want = crate::space::js_score(q.row(0), docs.row(h.doc as usize));
            assert!((h.score - f64::from(want)).abs() < 1e-5);
        }
        // rows that are not distributions are refused
        let e = DenseIndex::new(array![[0.6f32, 0.8]])
            .unwrap()
            .with_similarity(Similarity::JensenShannon)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sums to"), "{e}");
    }
}
