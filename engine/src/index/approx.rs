//! Approximate top-k over unit-row embeddings: an HNSW graph (the `usearch`
//! crate) searched by inner product, for collections where one exact scan per
//! query ([`super::dense`]) gets slow.
//!
//! The graph is built once from the document rows and can be saved beside a
//! small JSON description ([`ApproxIndex::save`]) that records the rows'
//! content hash: [`ApproxIndex::load_for`] only returns a saved graph built
//! from the same rows, so a changed model or collection never answers from a
//! stale graph. Scores are inner products (`1 − distance`); the hits a query
//! gets back are sorted in the evaluator's order ([`TieOrder`]), but a
//! document the graph search missed is simply absent.

use std::path::{Path, PathBuf};

use ndarray::ArrayView2;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use super::{Hit, TieOrder};
use crate::{Error, Result};

/// Settings of an HNSW graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Links per node (HNSW's `M`).
    pub m: usize,
    /// Candidate list length while inserting (`efConstruction`).
    pub ef_construction: usize,
    /// Candidate list length while searching (`efSearch`); a search for `k`
    /// documents uses at least `k`.
    pub ef_search: usize,
}

impl Default for HnswParams {
    /// `M` 16, `efConstruction` 128, `efSearch` 64 (recall@10 about 0.99 on
    /// 128-dimensional embeddings of intrinsic dimension 16; docs/results.md).
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 128,
            ef_search: 64,
        }
    }
}

impl HnswParams {
    /// Refuses settings the graph cannot use.
    pub fn validate(&self) -> Result<()> {
        if self.m < 2 || self.m > 256 {
            return Err(Error::invalid(format!(
                "HNSW M must be in 2..=256, not {}",
                self.m
            )));
        }
        if self.ef_construction == 0 || self.ef_search == 0 {
            return Err(Error::invalid(
                "HNSW efConstruction and efSearch must be positive",
            ));
        }
        Ok(())
    }
}

/// What a saved graph was built from: written beside it as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApproxMeta {
    /// Rosetta's version.
    pub rosetta: String,
    /// The graph library and its version.
    pub library: String,
    /// Number of documents.
    pub docs: usize,
    /// Dimension of the rows.
    pub dim: usize,
    /// Graph settings.
    pub params: HnswParams,
    /// blake3 of the rows' little-endian `f32` bytes.
    pub rows_hash: String,
    /// Seconds the build took.
    pub build_seconds: f64,
}

/// An HNSW graph over document rows.
pub struct ApproxIndex {
    index: Index,
    dim: usize,
    len: usize,
    ties: TieOrder,
    meta: ApproxMeta,
}

impl std::fmt::Debug for ApproxIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApproxIndex")
            .field("meta", &self.meta)
            .finish_non_exhaustive()
    }
}

fn ffi<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> Error + '_ {
    move |e| Error::invalid(format!("HNSW index: {what}: {e}"))
}

/// The content hash [`ApproxMeta::rows_hash`] records.
pub fn rows_hash(rows: ArrayView2<f32>) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&(rows.nrows() as u64).to_le_bytes());
    h.update(&(rows.ncols() as u64).to_le_bytes());
    let mut buf = Vec::with_capacity(rows.ncols() * 4);
    for row in rows.rows() {
        buf.clear();
        for v in row {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        h.update(&buf);
    }
    h.finalize().to_hex().to_string()
}

/// The inner product of two `f32` rows, in `f32` with independent partial
/// sums: usearch's own kernel for `f32` (numkong, dispatched to its AVX2
/// version on this machine) widens to `f64` and accumulates in one chain,
/// which took 60% of a search's time. [`use_own_dot`] picks the kernel once.
#[cfg(test)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    if avx2_fma() {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { dot_avx2(a, b) };
    }
    dot_portable(a, b)
}

fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut s = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (j, acc) in s.iter_mut().enumerate() {
            let o = i + 8 * j;
            *acc = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(o)), _mm256_loadu_ps(pb.add(o)), *acc);
        }
        i += 32;
    }
    while i + 8 <= n {
        s[0] = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(i)), _mm256_loadu_ps(pb.add(i)), s[0]);
        i += 8;
    }
    let v = _mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3]));
    let mut lanes = [0f32; 8];
    _mm256_storeu_ps(lanes.as_mut_ptr(), v);
    let mut sum: f32 = lanes.iter().sum();
    while i < n {
        sum += *pa.add(i) * *pb.add(i);
        i += 1;
    }
    sum
}

/// Gives the graph our inner product as its distance (`1 − a·b`, usearch's
/// inner product distance), the kernel chosen once here, not per distance.
fn use_own_dot(index: &mut Index, dim: usize) {
    // SAFETY (both closures): usearch calls the metric with two rows of this
    // index, each `dim` contiguous f32 values.
    let rows = move |a: *const f32, b: *const f32| unsafe {
        (
            std::slice::from_raw_parts(a, dim),
            std::slice::from_raw_parts(b, dim),
        )
    };
    #[cfg(target_arch = "x86_64")]
    if avx2_fma() {
        index.change_metric::<f32>(Box::new(move |a: *const f32, b: *const f32| {
            let (a, b) = rows(a, b);
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            1.0 - unsafe { dot_avx2(a, b) }
        }));
        return;
    }
    index.change_metric::<f32>(Box::new(move |a: *const f32, b: *const f32| {
        let (a, b) = rows(a, b);
        1.0 - dot_portable(a, b)
    }));
}

fn new_index(dim: usize, params: HnswParams) -> Result<Index> {
    let opts = IndexOptions {
        dimensions: dim,
        metric: MetricKind::IP,
        quantization: ScalarKind::F32,
        connectivity: params.m,
        expansion_add: params.ef_construction,
        expansion_search: params.ef_search,
        multi: false,
    };
    let mut index = Index::new(&opts).map_err(ffi("creating"))?;
    use_own_dot(&mut index, dim);
    Ok(index)
}

fn check_finite(rows: ArrayView2<f32>, what: &str) -> Result<()> {
    if let Some(pos) = rows.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!(
            "{what} row {} has a value that is not finite",
            pos / rows.ncols().max(1)
        )));
    }
    Ok(())
}

impl ApproxIndex {
    /// Builds the graph over `docs` (unit rows, finite), inserting in
    /// parallel on the current rayon pool. Ties among the hits a search
    /// returns are broken by row (see [`ApproxIndex::with_docnos`]).
    pub fn build(docs: ArrayView2<f32>, params: HnswParams) -> Result<Self> {
        params.validate()?;
        let (len, dim) = docs.dim();
        if dim == 0 {
            return Err(Error::invalid("HNSW index: rows of dimension 0"));
        }
        check_finite(docs, "document embedding")?;
        let start = std::time::Instant::now();
        let index = new_index(dim, params)?;
        index
            .reserve_capacity_and_threads(len.max(1), rayon::current_num_threads())
            .map_err(ffi("reserving"))?;
        let docs = docs.as_standard_layout();
        docs.axis_iter(ndarray::Axis(0))
            .into_par_iter()
            .enumerate()
            .try_for_each(|(i, row)| {
                let row = row.to_slice().expect("standard layout rows are contiguous");
                index.add(i as u64, row).map_err(ffi("adding a row"))
            })?;
        let meta = ApproxMeta {
            rosetta: env!("CARGO_PKG_VERSION").to_string(),
            library: format!("usearch {}", usearch::version()),
            docs: len,
            dim,
            params,
            rows_hash: rows_hash(docs.view()),
            build_seconds: start.elapsed().as_secs_f64(),
        };
        Ok(ApproxIndex {
            index,
            dim,
            len,
            ties: TieOrder::by_row(),
            meta,
        })
    }

    /// Breaks ties among returned hits by these document ids (greater
    /// first), as the evaluator does.
    pub fn with_docnos<S: AsRef<str>>(mut self, docnos: &[S]) -> Result<Self> {
        if docnos.len() != self.len {
            return Err(Error::invalid(format!(
                "{} document ids for an HNSW index of {} documents",
                docnos.len(),
                self.len
            )));
        }
        self.ties = TieOrder::from_docnos(docnos);
        Ok(self)
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What the graph was built from and how.
    pub fn meta(&self) -> &ApproxMeta {
        &self.meta
    }

    /// Bytes the graph and its copy of the rows hold (usearch's estimate).
    pub fn memory_bytes(&self) -> usize {
        self.index.memory_usage()
    }

    /// Changes `efSearch` for later searches (a search for `k` documents
    /// uses at least `k`).
    pub fn set_ef_search(&mut self, ef: usize) -> Result<()> {
        if ef == 0 {
            return Err(Error::invalid("HNSW efSearch must be positive"));
        }
        self.index.change_expansion_search(ef);
        self.meta.params.ef_search = ef;
        Ok(())
    }

    /// The (approximately) `k` best documents of every query row, queries in
    /// parallel, each list in evaluator order.
    pub fn search(&self, queries: ArrayView2<f32>, k: usize) -> Result<Vec<Vec<Hit>>> {
        if queries.ncols() != self.dim {
            return Err(Error::invalid(format!(
                "queries of dimension {} for an HNSW index of dimension {}",
                queries.ncols(),
                self.dim
            )));
        }
        check_finite(queries, "query")?;
        let k = k.min(self.len);
        if k == 0 {
            return Ok(vec![Vec::new(); queries.nrows()]);
        }
        // usearch widens the candidate list to `k` when `k > efSearch`
        let queries = queries.as_standard_layout();
        queries
            .axis_iter(ndarray::Axis(0))
            .into_par_iter()
            .map(|q| {
                let q = q.to_slice().expect("standard layout rows are contiguous");
                let m = self.index.search(q, k).map_err(ffi("searching"))?;
                let mut hits: Vec<Hit> = m
                    .keys
                    .iter()
                    .zip(&m.distances)
                    .map(|(&key, &d)| Hit {
                        doc: key as u32,
                        score: f64::from(1.0 - d),
                    })
                    .collect();
                self.ties.sort(&mut hits);
                Ok(hits)
            })
            .collect()
    }

    /// The JSON description saved beside a graph file.
    pub fn meta_path(path: &Path) -> PathBuf {
        let mut p = path.as_os_str().to_owned();
        p.push(".json");
        PathBuf::from(p)
    }

    /// Saves the graph to `path` and its description to `path.json`, each
    /// written to a temporary file first and renamed into place; the old
    /// description goes first, so an interrupted save leaves no graph that
    /// [`ApproxIndex::load_for`] would take.
    pub fn save(&self, path: &Path) -> Result<()> {
        let meta_path = Self::meta_path(path);
        match std::fs::remove_file(&meta_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(&meta_path, e))
            }
            _ => {}
        }
        let tmp = path.with_extension("partial");
        let tmp_str = tmp
            .to_str()
            .ok_or_else(|| Error::file(&tmp, "the path is not UTF-8"))?;
        self.index
            .save(tmp_str)
            .map_err(|e| Error::file(&tmp, format!("saving the HNSW index: {e}")))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
        crate::util::write_atomic(
            &meta_path,
            serde_json::to_string_pretty(&self.meta)
                .expect("the description serialises")
                .as_bytes(),
        )
    }

    /// Loads the graph saved at `path` if it was built from exactly these
    /// rows; `Ok(None)` when there is none or it is stale (other rows, another
    /// Rosetta version); an error when the file is unreadable or damaged.
    pub fn load_for(path: &Path, docs: ArrayView2<f32>) -> Result<Option<Self>> {
        let meta_path = Self::meta_path(path);
        if !path.exists() || !meta_path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&meta_path).map_err(|e| Error::io(&meta_path, e))?;
        let Ok(meta) = serde_json::from_str::<ApproxMeta>(&text) else {
            return Ok(None);
        };
        if meta.rosetta != env!("CARGO_PKG_VERSION")
            || meta.docs != docs.nrows()
            || meta.dim != docs.ncols()
            || meta.rows_hash != rows_hash(docs)
        {
            return Ok(None);
        }
        let mut index = new_index(meta.dim, meta.params)?;
        let p = path
            .to_str()
            .ok_or_else(|| Error::file(path, "the path is not UTF-8"))?;
        index
            .load(p)
            .map_err(|e| Error::file(path, format!("not a readable HNSW index: {e}")))?;
        if index.size() != meta.docs || index.dimensions() != meta.dim {
            return Err(Error::file(
                path,
                format!(
                    "the HNSW index holds {} rows of dimension {}, its description says {} of {}",
                    index.size(),
                    index.dimensions(),
                    meta.docs,
                    meta.dim
                ),
            ));
        }
        // loading may restore the saved metric kind: the own kernel again
        use_own_dot(&mut index, meta.dim);
        index.change_expansion_search(meta.params.ef_search);
        Ok(Some(ApproxIndex {
            index,
            dim: meta.dim,
            len: meta.docs,
            ties: TieOrder::by_row(),
            meta,
        }))
    }
}

/// Fraction of the exact top-k ids found among the approximate ones,
/// averaged over queries (recall@k against exact search).
pub fn recall_at_k(exact: &[Vec<Hit>], approx: &[Vec<Hit>]) -> f64 {
    let mut found = 0usize;
    let mut wanted = 0usize;
    for (e, a) in exact.iter().zip(approx) {
        let got: std::collections::HashSet<u32> = a.iter().map(|h| h.doc).collect();
        found += e.iter().filter(|h| got.contains(&h.doc)).count();
        wanted += e.len();
    }
    if wanted == 0 {
        1.0
    } else {
        found as f64 / wanted as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::dense::{top_k, Matmul};
    use ndarray::Array2;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    /// Unit rows of intrinsic dimension 4 in 16 dimensions.
    fn rows(n: usize, seed: u64) -> Array2<f32> {
        let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let basis: Vec<f32> = (0..16 * 4).map(|_| StandardNormal.sample(&mut a)).collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut m = Array2::<f32>::zeros((n, 16));
        for mut r in m.rows_mut() {
            let z: Vec<f32> = (0..4).map(|_| StandardNormal.sample(&mut rng)).collect();
            for (j, x) in r.iter_mut().enumerate() {
                let e: f32 = StandardNormal.sample(&mut rng);
                *x = (0..4).map(|t| basis[j * 4 + t] * z[t]).sum::<f32>() + 0.1 * e;
            }
            let n = r.dot(&r).sqrt();
            r.mapv_inplace(|v| v / n);
        }
        m
    }

    #[test]
    fn own_dot_kernel_is_the_inner_product() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for n in [0usize, 1, 7, 8, 31, 32, 33, 128, 300] {
            let a: Vec<f32> = (0..n).map(|_| StandardNormal.sample(&mut rng)).collect();
            let b: Vec<f32> = (0..n).map(|_| StandardNormal.sample(&mut rng)).collect();
            let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            assert!((dot(&a, &b) as f64 - want).abs() < 1e-4, "n {n}");
            assert!((dot_portable(&a, &b) as f64 - want).abs() < 1e-4, "n {n}");
        }
    }

    #[test]
    fn finds_what_exact_search_finds() {
        let docs = rows(2000, 1);
        let qs = rows(50, 2);
        let idx = ApproxIndex::build(docs.view(), HnswParams::default()).unwrap();
        let exact = top_k(
            docs.view(),
            qs.view(),
            10,
            &TieOrder::by_row(),
            Matmul::Faer,
        )
        .unwrap();
        let approx = idx.search(qs.view(), 10).unwrap();
        let r = recall_at_k(&exact, &approx);
        assert!(r > 0.95, "recall@10 {r}");
        // scores are inner products, in evaluator order
        for (q, hits) in approx.iter().enumerate() {
            for w in hits.windows(2) {
                assert!(w[0].score >= w[1].score);
            }
            let h = hits[0];
            let dot = docs.row(h.doc as usize).dot(&qs.row(q)) as f64;
            assert!((dot - h.score).abs() < 1e-5);
        }
    }

    #[test]
    fn a_deeper_list_than_ef_search_is_returned_whole() {
        let docs = rows(300, 3);
        let qs = rows(2, 4);
        let p = HnswParams {
            ef_search: 8,
            ..HnswParams::default()
        };
        let idx = ApproxIndex::build(docs.view(), p).unwrap();
        let hits = idx.search(qs.view(), 100).unwrap();
        assert!(hits.iter().all(|h| h.len() == 100));
        assert_eq!(idx.meta().params.ef_search, 8);
        // more than the collection: what the graph search reaches, each
        // document once (a graph walk need not reach every node)
        let all = &idx.search(qs.view(), 1000).unwrap()[0];
        let distinct: std::collections::HashSet<u32> = all.iter().map(|h| h.doc).collect();
        assert!((250..=300).contains(&all.len()), "{}", all.len());
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn saved_graph_is_reused_only_for_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hnsw.usearch");
        let docs = rows(500, 5);
        let qs = rows(5, 6);
        let idx = ApproxIndex::build(docs.view(), HnswParams::default()).unwrap();
        idx.save(&path).unwrap();
        let back = ApproxIndex::load_for(&path, docs.view()).unwrap().unwrap();
        assert_eq!(back.len(), 500);
        assert_eq!(
            idx.search(qs.view(), 5).unwrap(),
            back.search(qs.view(), 5).unwrap()
        );
        let mut other = docs.clone();
        other[[3, 0]] += 0.01;
        assert!(ApproxIndex::load_for(&path, other.view())
            .unwrap()
            .is_none());
        assert!(ApproxIndex::load_for(&dir.path().join("none"), docs.view())
            .unwrap()
            .is_none());
        // a damaged graph is an error naming the file, not a silent rebuild
        std::fs::write(&path, b"not a graph").unwrap();
        let e = ApproxIndex::load_for(&path, docs.view()).unwrap_err();
        assert!(e.to_string().contains("hnsw.usearch"), "{e}");
    }

    #[test]
    fn bad_input_is_refused() {
        let mut docs = rows(10, 7);
        assert!(ApproxIndex::build(
            docs.view(),
            HnswParams {
                m: 1,
                ..HnswParams::default()
            }
        )
        .is_err());
        let idx = ApproxIndex::build(docs.view(), HnswParams::default()).unwrap();
        let q = Array2::<f32>::zeros((1, 8));
        assert!(idx.search(q.view(), 3).is_err());
        let mut q = rows(1, 8);
        q[[0, 0]] = f32::NAN;
        assert!(idx.search(q.view(), 3).is_err());
        docs[[2, 2]] = f32::INFINITY;
        let e = ApproxIndex::build(docs.view(), HnswParams::default()).unwrap_err();
        assert!(e.to_string().contains("row 2"), "{e}");
        let empty = Array2::<f32>::zeros((0, 16));
        let idx = ApproxIndex::build(empty.view(), HnswParams::default()).unwrap();
        assert_eq!(idx.search(rows(2, 9).view(), 5).unwrap(), vec![vec![]; 2]);
    }
}
