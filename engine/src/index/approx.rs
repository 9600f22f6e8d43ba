//! Approximate top-k over unit-row embeddings: Rosetta's own HNSW graph
//! ([`super::hnsw`]) searched by inner product, for collections where one
//! exact scan per query ([`super::dense`]) gets slow.
//!
//! The graph is built once from the document rows and searches them in place
//! (it holds links only). It can be saved in its own file format beside a
//! small JSON description ([`ApproxIndex::save`]) that records the rows'
//! content hash: [`ApproxIndex::load_for`] only returns a saved graph built
//! from the same rows, so a changed model or collection never answers from a
//! stale graph. Scores are inner products; the hits a query gets back are
//! sorted in the evaluator's order ([`TieOrder`]), but a document the graph
//! search missed is simply absent.

use std::path::{Path, PathBuf};

use ndarray::ArrayView2;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::hnsw::{Graph, Rows, VisitedPool, FORMAT_VERSION};
use super::{Embeddings, Hit, TieOrder};
use crate::{Error, Result};

/// Settings of an HNSW graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HnswParams {
    /// Links per node (HNSW's `M`; twice as many on layer 0).
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

/// The graph implementation and file format a description names
/// ([`ApproxMeta::library`]); a saved graph naming another is stale.
pub fn library() -> String {
    format!("rosetta-hnsw {FORMAT_VERSION}")
}

/// What a saved graph was built from: written beside it as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApproxMeta {
    /// Rosetta's version.
    pub rosetta: String,
    /// The graph implementation and its file format ([`library`]).
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

/// An HNSW graph over document rows, sharing the rows with its caller.
pub struct ApproxIndex {
    graph: Graph,
    rows: Embeddings,
    visited: VisitedPool,
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

/// The content hash [`ApproxMeta::rows_hash`] records.
pub fn rows_hash(rows: ArrayView2<f32>) -> String {
    let mut h = rows_hasher(rows.dim());
    hash_rows(&mut h, rows);
    h.finalize().to_hex().to_string()
}

/// [`rows_hash`] of a table, block by block (a mapped table's pages
/// released as it goes: [`Embeddings::for_blocks`]).
fn table_hash(rows: &Embeddings) -> String {
    let mut h = rows_hasher(rows.dim());
    let _ = rows.for_blocks(|_, b| {
        hash_rows(&mut h, b);
        Ok::<(), ()>(())
    });
    h.finalize().to_hex().to_string()
}

fn rows_hasher((n, d): (usize, usize)) -> blake3::Hasher {
    let mut h = blake3::Hasher::new();
    h.update(&(n as u64).to_le_bytes());
    h.update(&(d as u64).to_le_bytes());
    h
}

fn hash_rows(h: &mut blake3::Hasher, rows: ArrayView2<f32>) {
    let mut buf = Vec::with_capacity(rows.ncols() * 4);
    for row in rows.rows() {
        buf.clear();
        for v in row {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        h.update(&buf);
    }
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
    /// parallel on the current rayon pool; the graph keeps the rows (shared,
    /// not copied, when they are in standard layout or mapped). Ties among
    /// the hits a search returns are broken by row (see
    /// [`ApproxIndex::with_docnos`]).
    pub fn build(docs: impl Into<Embeddings>, params: HnswParams) -> Result<Self> {
        params.validate()?;
        let docs: Embeddings = docs.into();
        let (len, dim) = docs.dim();
        if dim == 0 {
            return Err(Error::invalid("HNSW index: rows of dimension 0"));
        }
        check_finite(docs.view(), "document embedding")?;
        if len > u32::MAX as usize {
            return Err(Error::invalid(format!(
                "HNSW index: {len} rows, more than a graph of u32 links holds"
            )));
        }
        let start = std::time::Instant::now();
        let graph = Graph::build(Self::rows_of(&docs), params.m, params.ef_construction);
        let meta = ApproxMeta {
            rosetta: env!("CARGO_PKG_VERSION").to_string(),
            library: library(),
            docs: len,
            dim,
            params,
            rows_hash: table_hash(&docs),
            build_seconds: start.elapsed().as_secs_f64(),
        };
        Ok(Self::assemble(graph, docs, meta))
    }

    fn rows_of(docs: &Embeddings) -> Rows<'_> {
        Rows::new(docs.as_slice(), docs.ncols())
    }

    fn assemble(graph: Graph, rows: Embeddings, meta: ApproxMeta) -> Self {
        ApproxIndex {
            visited: graph.visited_pool(),
            graph,
            dim: rows.ncols(),
            len: rows.nrows(),
            rows,
            ties: TieOrder::by_row(),
            meta,
        }
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

    /// Bytes the graph's links hold (the rows it searches are the caller's).
    pub fn memory_bytes(&self) -> usize {
        self.graph.memory_bytes()
    }

    /// Changes `efSearch` for later searches (a search for `k` documents
    /// uses at least `k`).
    pub fn set_ef_search(&mut self, ef: usize) -> Result<()> {
        if ef == 0 {
            return Err(Error::invalid("HNSW efSearch must be positive"));
        }
        self.meta.params.ef_search = ef;
        Ok(())
    }

    /// The (approximately) `k` best documents of every query row, queries in
    /// parallel on the current rayon pool, each list in evaluator order and
    /// each document at most once.
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
        let rows = Self::rows_of(&self.rows);
        let ef = self.meta.params.ef_search;
        let queries = queries.as_standard_layout();
        Ok(queries
            .axis_iter(ndarray::Axis(0))
            .into_par_iter()
            .map(|q| {
                let q = q.to_slice().expect("standard layout rows are contiguous");
                let mut hits: Vec<Hit> = self
                    .graph
                    .search(rows, &self.visited, q, k, ef)
                    .into_iter()
                    .map(|s| Hit {
                        doc: s.id,
                        score: f64::from(s.sim),
                    })
                    .collect();
                self.ties.sort(&mut hits);
                hits
            })
            .collect())
    }

    /// The JSON description saved beside a graph file.
    pub fn meta_path(path: &Path) -> PathBuf {
        let mut p = path.as_os_str().to_owned();
        p.push(".json");
        PathBuf::from(p)
    }

    /// Saves the graph to `path` (Rosetta's graph format: links only, not
    /// the rows) and its description to `path.json`, each written to a
    /// temporary file first and renamed into place; the old description goes
    /// first, so an interrupted save leaves no graph that
    /// [`ApproxIndex::load_for`] would take.
    pub fn save(&self, path: &Path) -> Result<()> {
        let meta_path = Self::meta_path(path);
        match std::fs::remove_file(&meta_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(&meta_path, e))
            }
            _ => {}
        }
        crate::util::write_atomic(path, &self.graph.to_bytes(self.dim))?;
        crate::util::write_atomic(
            &meta_path,
            serde_json::to_string_pretty(&self.meta)
                .expect("the description serialises")
                .as_bytes(),
        )
    }

    /// Loads the graph saved at `path` if it was built from exactly these
    /// rows (and searches them); `Ok(None)` when there is none or it is
    /// stale (other rows, another Rosetta version or graph format); an error
    /// naming the file when it is unreadable, truncated or damaged.
    pub fn load_for(path: &Path, docs: impl Into<Embeddings>) -> Result<Option<Self>> {
        let meta_path = Self::meta_path(path);
        let here = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        if !here(path) || !here(&meta_path) {
            return Ok(None);
        }
        // regular files only, never through a link (a FIFO is an error
        // naming it, not a read that waits for a writer)
        use crate::util::{read_regular, read_regular_text, Links, SMALL_FILE_LIMIT};
        let text = read_regular_text(&meta_path, Links::Refuse, SMALL_FILE_LIMIT)?;
        let Ok(meta) = serde_json::from_str::<ApproxMeta>(&text) else {
            return Ok(None);
        };
        let docs: Embeddings = docs.into();
        if meta.rosetta != env!("CARGO_PKG_VERSION")
            || meta.library != library()
            || meta.docs != docs.nrows()
            || meta.dim != docs.ncols()
            || meta.params.validate().is_err()
            || meta.rows_hash != table_hash(&docs)
        {
            return Ok(None);
        }
        let bytes = read_regular(path, Links::Refuse, u64::MAX)?;
        let graph = Graph::from_bytes(&bytes, path, meta.docs, meta.dim)?;
        if graph.m() != meta.params.m {
            return Err(Error::file(
                path,
                format!(
                    "the HNSW graph has M {}, its description says {}",
                    graph.m(),
                    meta.params.m
                ),
            ));
        }
        Ok(Some(Self::assemble(graph, docs, meta)))
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

    /// Unit rows of intrinsic dimension `r` in `d` dimensions (a fixed
    /// basis, noise of 0.1).
    fn rows_in(n: usize, d: usize, r: usize, seed: u64) -> Array2<f32> {
        let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let basis: Vec<f32> = (0..d * r).map(|_| StandardNormal.sample(&mut a)).collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut m = Array2::<f32>::zeros((n, d));
        for mut row in m.rows_mut() {
            let z: Vec<f32> = (0..r).map(|_| StandardNormal.sample(&mut rng)).collect();
            for (j, x) in row.iter_mut().enumerate() {
                let e: f32 = StandardNormal.sample(&mut rng);
                *x = (0..r).map(|t| basis[j * r + t] * z[t]).sum::<f32>() + 0.1 * e;
            }
            let n = row.dot(&row).sqrt();
            row.mapv_inplace(|v| v / n);
        }
        m
    }

    /// Unit rows of intrinsic dimension 4 in 16 dimensions.
    fn rows(n: usize, seed: u64) -> Array2<f32> {
        rows_in(n, 16, 4, seed)
    }

    fn exact(docs: &Array2<f32>, qs: &Array2<f32>, k: usize) -> Vec<Vec<Hit>> {
        top_k(docs.view(), qs.view(), k, &TieOrder::by_row(), Matmul::Faer).unwrap()
    }

    /// Every list sorted in evaluator order (score descending, ties by the
    /// greater row), each document once, scores the inner products.
    fn assert_well_formed(docs: &Array2<f32>, qs: &Array2<f32>, lists: &[Vec<Hit>]) {
        for (q, hits) in lists.iter().enumerate() {
            for w in hits.windows(2) {
                assert!(
                    w[0].score > w[1].score || (w[0].score == w[1].score && w[0].doc > w[1].doc),
                    "query {q}: {w:?}"
                );
            }
            let distinct: std::collections::HashSet<u32> = hits.iter().map(|h| h.doc).collect();
            assert_eq!(distinct.len(), hits.len(), "query {q} repeats a document");
            for h in hits {
                let dot = docs.row(h.doc as usize).dot(&qs.row(q)) as f64;
                assert!((dot - h.score).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn finds_what_exact_search_finds() {
        let docs = rows(2000, 1);
        let qs = rows(50, 2);
        let idx = ApproxIndex::build(docs.clone(), HnswParams::default()).unwrap();
        let approx = idx.search(qs.view(), 10).unwrap();
        let r = recall_at_k(&exact(&docs, &qs, 10), &approx);
        assert!(r > 0.95, "recall@10 {r}");
        assert_well_formed(&docs, &qs, &approx);
        assert!(idx.meta().library.starts_with("rosetta-hnsw"));
    }

    #[test]
    fn finds_the_exact_top_10_in_128_dimensions_of_intrinsic_dimension_16() {
        // the bench's shape, small: M 16, efConstruction 40 (faiss's)
        let docs = rows_in(2000, 128, 16, 11);
        let qs = rows_in(100, 128, 16, 12);
        let p = HnswParams {
            m: 16,
            ef_construction: 40,
            ef_search: 64,
        };
        let mut idx = ApproxIndex::build(docs.clone(), p).unwrap();
        let want = exact(&docs, &qs, 10);
        let got = idx.search(qs.view(), 10).unwrap();
        let r = recall_at_k(&want, &got);
        assert!(r >= 0.95, "recall@10 {r} at efSearch 64");
        assert_well_formed(&docs, &qs, &got);
        // a longer candidate list finds at least about as much
        idx.set_ef_search(200).unwrap();
        let r2 = recall_at_k(&want, &idx.search(qs.view(), 10).unwrap());
        assert!(
            r2 >= 0.99 && r2 + 0.01 >= r,
            "recall@10 {r2} at efSearch 200"
        );
    }

    #[test]
    fn a_one_thread_build_is_the_same_graph_every_time() {
        // the levels come from a fixed seed; on one thread the insertion
        // order is fixed too (on more, the links depend on interleaving)
        let docs = rows(600, 21);
        let p = HnswParams::default();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let a = one.install(|| ApproxIndex::build(docs.clone(), p)).unwrap();
        let b = one.install(|| ApproxIndex::build(docs.clone(), p)).unwrap();
        assert_eq!(a.graph, b.graph);
        assert_eq!(a.meta().rows_hash, b.meta().rows_hash);
    }

    #[test]
    fn a_deeper_list_than_ef_search_is_returned_whole() {
        let docs = rows(300, 3);
        let qs = rows(2, 4);
        let p = HnswParams {
            ef_search: 8,
            ..HnswParams::default()
        };
        let idx = ApproxIndex::build(docs.clone(), p).unwrap();
        let hits = idx.search(qs.view(), 100).unwrap();
        assert!(hits.iter().all(|h| h.len() == 100));
        assert_eq!(idx.meta().params.ef_search, 8);
        // more than the collection: what the graph search reaches, each
        // document once (a graph walk need not reach every node)
        let all = idx.search(qs.view(), 1000).unwrap();
        assert!((250..=300).contains(&all[0].len()), "{}", all[0].len());
        assert_well_formed(&docs, &qs, &all);
    }

    #[test]
    fn saved_graph_is_reused_only_for_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hnsw.graph");
        let docs = rows(500, 5);
        let qs = rows(20, 6);
        let idx = ApproxIndex::build(docs.clone(), HnswParams::default()).unwrap();
        idx.save(&path).unwrap();
        let back = ApproxIndex::load_for(&path, docs.clone()).unwrap().unwrap();
        assert_eq!(back.len(), 500);
        assert_eq!(back.graph, idx.graph);
        assert_eq!(back.meta(), idx.meta());
        // the same answers, bit for bit
        let (a, b) = (
            idx.search(qs.view(), 10).unwrap(),
            back.search(qs.view(), 10).unwrap(),
        );
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!(x
                .iter()
                .zip(y)
                .all(|(x, y)| x.doc == y.doc && x.score.to_bits() == y.score.to_bits()));
            assert_eq!(x.len(), y.len());
        }
        // other rows: stale, not used
        let mut other = docs.clone();
        other[[3, 0]] += 0.01;
        assert!(ApproxIndex::load_for(&path, other).unwrap().is_none());
        assert!(
            ApproxIndex::load_for(&dir.path().join("none"), docs.clone())
                .unwrap()
                .is_none()
        );
        // a description from another graph format (usearch's): stale
        let meta_path = ApproxIndex::meta_path(&path);
        let text = std::fs::read_to_string(&meta_path).unwrap();
        std::fs::write(&meta_path, text.replace("rosetta-hnsw 1", "usearch 2.26.6")).unwrap();
        assert!(ApproxIndex::load_for(&path, docs.clone())
            .unwrap()
            .is_none());
        std::fs::write(&meta_path, &text).unwrap();
        assert!(ApproxIndex::load_for(&path, docs.clone())
            .unwrap()
            .is_some());
    }

    #[test]
    fn a_damaged_graph_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hnsw.graph");
        let docs = rows(300, 5);
        let idx = ApproxIndex::build(docs.clone(), HnswParams::default()).unwrap();
        idx.save(&path).unwrap();
        let good = std::fs::read(&path).unwrap();
        let mut flipped = good.clone();
        flipped[good.len() / 2] ^= 0x10;
        let mut version = good.clone();
        version[8] = 9;
        for (what, bytes) in [
            ("not a graph", b"not a graph".to_vec()),
            ("empty", Vec::new()),
            ("truncated", good[..good.len() - 100].to_vec()),
            ("header only", good[..20].to_vec()),
            ("a flipped bit", flipped),
            ("another version", version),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let e = ApproxIndex::load_for(&path, docs.clone()).unwrap_err();
            let e = e.to_string();
            assert!(
                e.contains("hnsw.graph") && e.contains("HNSW graph"),
                "{what}: {e}"
            );
        }
        // a checksum that matches but links that do not: node 0's count on
        // layer 0 (after the 60-byte header and the 300 levels) past 2M
        let mut body = good[..good.len() - 32].to_vec();
        body[60 + 300..60 + 304].copy_from_slice(&999u32.to_le_bytes());
        let hash = *blake3::hash(&body).as_bytes();
        body.extend_from_slice(&hash);
        std::fs::write(&path, &body).unwrap();
        let e = ApproxIndex::load_for(&path, docs.clone()).unwrap_err();
        assert!(e.to_string().contains("999 links on level 0"), "{e}");
        // a well-formed file for other rows (its description edited to
        // match): refused by the sizes it records
        let small = rows(100, 5);
        let other = ApproxIndex::build(small, HnswParams::default()).unwrap();
        std::fs::write(&path, other.graph.to_bytes(16)).unwrap();
        let e = ApproxIndex::load_for(&path, docs.clone()).unwrap_err();
        assert!(e.to_string().contains("100 rows"), "{e}");
    }

    #[test]
    fn bad_input_is_refused() {
        let mut docs = rows(10, 7);
        for (m, efc, efs) in [(1, 128, 64), (257, 128, 64), (16, 0, 64), (16, 128, 0)] {
            let p = HnswParams {
                m,
                ef_construction: efc,
                ef_search: efs,
            };
            assert!(p.validate().is_err(), "{p:?}");
            assert!(ApproxIndex::build(docs.clone(), p).is_err(), "{p:?}");
        }
        let mut idx = ApproxIndex::build(docs.clone(), HnswParams::default()).unwrap();
        assert!(idx.set_ef_search(0).is_err());
        let q = Array2::<f32>::zeros((1, 8));
        assert!(idx.search(q.view(), 3).is_err());
        let mut q = rows(1, 8);
        q[[0, 0]] = f32::NAN;
        assert!(idx.search(q.view(), 3).is_err());
        docs[[2, 2]] = f32::INFINITY;
        let e = ApproxIndex::build(docs.clone(), HnswParams::default()).unwrap_err();
        assert!(e.to_string().contains("row 2"), "{e}");
        let empty = Array2::<f32>::zeros((0, 16));
        let idx = ApproxIndex::build(empty, HnswParams::default()).unwrap();
        assert_eq!(idx.search(rows(2, 9).view(), 5).unwrap(), vec![vec![]; 2]);
    }

    #[test]
    fn rows_not_in_standard_layout_are_searched_as_their_values() {
        let docs = rows(400, 13);
        let qs = rows(10, 14);
        let mut fortran = Array2::<f32>::zeros(ndarray::ShapeBuilder::f((400, 16)));
        fortran.assign(&docs);
        assert!(!fortran.is_standard_layout());
        let idx = ApproxIndex::build(fortran, HnswParams::default()).unwrap();
        let got = idx.search(qs.view(), 5).unwrap();
        assert_well_formed(&docs, &qs, &got);
        assert!(recall_at_k(&exact(&docs, &qs, 5), &got) > 0.9);
    }
}
