//! Rosetta's own HNSW graph (Malkov & Yashunin 2018) over unit rows, searched
//! by inner product.
//!
//! The graph holds links only: it searches the caller's rows in place (one
//! contiguous row-major `f32` slice), so the rows are never copied. Layer 0
//! is one flat `u32` array of `2M + 1` slots per node (a count, then the
//! links); the upper layers, which hold about one node in `M`, are stored
//! per node after it. Neighbours are chosen with the paper's heuristic
//! (Algorithm 4, as faiss and hnswlib do, without keeping pruned links).
//!
//! Insertion runs in parallel on the current rayon pool with a lock per node
//! (hnswlib's scheme): a node's links are only written under its lock and
//! read as atomics, so a search during the build sees each slot either
//! before or after a write. The nodes' levels are drawn from a fixed seed,
//! so they are the same on every build; the links are deterministic on a
//! one-thread pool and depend on the threads' interleaving otherwise.
//!
//! A search walks the upper layers greedily, then layer 0 with a candidate
//! list of `ef`; the rows of the next neighbours are prefetched before their
//! inner products are taken, and visited nodes are marked in a per-search
//! table reused across searches (an epoch counter: no clearing per query).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Mutex;

use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use crate::{Error, Result};

/// Seed of the nodes' level draws.
const LEVEL_SEED: u64 = 0x4853_4e57;

/// Highest level a node may draw (never reached in practice: a level above
/// 12 has odds below `M^-12`).
const MAX_LEVEL: usize = 30;

/// First bytes of a graph file.
pub const MAGIC: &[u8; 8] = b"RSTHNSW\0";

/// Version of the graph file format.
pub const FORMAT_VERSION: u32 = 1;

// ---------------------------------------------------------------- kernels

/// An inner product kernel, picked once per build or search.
pub(crate) trait Kernel: Copy + Send + Sync {
    fn dot(self, a: &[f32], b: &[f32]) -> f32;
}

/// The portable kernel: eight independent partial sums.
#[derive(Clone, Copy)]
pub(crate) struct Portable;

impl Kernel for Portable {
    #[inline]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        dot_portable(a, b)
    }
}

/// The AVX2 + FMA kernel; a value exists only on a CPU that has both.
#[derive(Clone, Copy)]
pub(crate) struct Avx2Fma(());

impl Avx2Fma {
    /// The kernel, when this CPU has AVX2 and FMA.
    pub(crate) fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Some(Avx2Fma(()));
            }
        }
        None
    }
}

impl Kernel for Avx2Fma {
    #[inline]
    fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: a value of this type proves the CPU has AVX2 and FMA.
            unsafe { dot_avx2(a, b) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            dot_portable(a, b)
        }
    }
}

/// The inner product of two `f32` rows with the best kernel this CPU has
/// (AVX2 + FMA, four independent accumulators, else portable).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    match Avx2Fma::detect() {
        Some(k) => k.dot(a, b),
        None => dot_portable(a, b),
    }
}

pub(crate) fn dot_portable(a: &[f32], b: &[f32]) -> f32 {
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

/// Asks the CPU to bring `row` into cache (a no-op off x86-64).
#[inline(always)]
fn prefetch(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = row.as_ptr() as *const i8;
        let bytes = std::mem::size_of_val(row);
        let mut off = 0;
        while off < bytes {
            // SAFETY: SSE is part of x86-64; the address lies in `row`, and a
            // prefetch never faults anyway.
            unsafe { _mm_prefetch(p.add(off), _MM_HINT_T0) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

// ---------------------------------------------------------------- the rows

/// Row-major unit rows the graph is over.
#[derive(Clone, Copy)]
pub(crate) struct Rows<'a> {
    data: &'a [f32],
    dim: usize,
}

impl<'a> Rows<'a> {
    /// `data` holds rows of `dim` values (`dim > 0`).
    pub(crate) fn new(data: &'a [f32], dim: usize) -> Self {
        debug_assert!(dim > 0 && data.len().is_multiple_of(dim));
        Rows { data, dim }
    }

    fn len(&self) -> usize {
        self.data.len() / self.dim
    }

    #[inline(always)]
    fn row(&self, i: u32) -> &'a [f32] {
        let s = i as usize * self.dim;
        &self.data[s..s + self.dim]
    }
}

// ---------------------------------------------------------------- heaps

/// A node and its inner product with the query; ordered by the product
/// (ties by node, so orders are total and reproducible).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Scored {
    pub sim: f32,
    pub id: u32,
}

impl Eq for Scored {}

impl Ord for Scored {
    fn cmp(&self, o: &Self) -> Ordering {
        self.sim.total_cmp(&o.sim).then(o.id.cmp(&self.id))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The worst of the results first (a min-heap by product).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Worst(Scored);

impl Ord for Worst {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.cmp(&self.0)
    }
}

impl PartialOrd for Worst {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

// ---------------------------------------------------------------- visited

/// Which nodes a search has seen: `mark[i] == epoch`.
struct Visited {
    mark: Vec<u16>,
    epoch: u16,
}

impl Visited {
    fn new(n: usize) -> Self {
        Visited {
            mark: vec![0; n],
            epoch: 0,
        }
    }

    /// Starts a new search: every node unseen.
    fn reset(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.mark.fill(0);
            self.epoch = 1;
        }
    }

    /// Marks `i`; whether it was unseen.
    #[inline(always)]
    fn insert(&mut self, i: u32) -> bool {
        let m = &mut self.mark[i as usize];
        let fresh = *m != self.epoch;
        *m = self.epoch;
        fresh
    }
}

/// Visited tables kept for reuse by later searches (one per concurrent
/// search at most).
pub(crate) struct VisitedPool {
    n: usize,
    free: Mutex<Vec<Visited>>,
}

impl VisitedPool {
    fn new(n: usize) -> Self {
        VisitedPool {
            n,
            free: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Visited {
        let got = self.free.lock().map(|mut f| f.pop()).unwrap_or(None);
        let mut v = got.unwrap_or_else(|| Visited::new(self.n));
        v.reset();
        v
    }

    fn give(&self, v: Visited) {
        if let Ok(mut f) = self.free.lock() {
            f.push(v);
        }
    }
}

// ---------------------------------------------------------------- links

/// Read access to a graph's links, while it is built or once it is frozen.
trait Links: Sync {
    /// Appends the links of `node` on `level` to `out`.
    fn links(&self, node: u32, level: usize, out: &mut Vec<u32>);
}

/// Per-search scratch space.
struct Scratch {
    visited: Visited,
    links: Vec<u32>,
    fresh: Vec<u32>,
}

/// What a walk needs: the kernel, the rows and the links.
struct Walk<'a, K, L> {
    k: K,
    rows: Rows<'a>,
    g: &'a L,
}

/// The best node of `level` reached greedily from `ep`.
fn greedy<K: Kernel, L: Links>(
    w: &Walk<K, L>,
    q: &[f32],
    mut ep: Scored,
    level: usize,
    buf: &mut Vec<u32>,
) -> Scored {
    let (k, rows, g) = (w.k, w.rows, w.g);
    loop {
        buf.clear();
        g.links(ep.id, level, buf);
        for &nb in buf.iter() {
            prefetch(rows.row(nb));
        }
        let mut moved = false;
        for &nb in buf.iter() {
            let s = Scored {
                sim: k.dot(q, rows.row(nb)),
                id: nb,
            };
            if s > ep {
                ep = s;
                moved = true;
            }
        }
        if !moved {
            return ep;
        }
    }
}

/// The `ef` best nodes of `level` found from the entry points `eps` (HNSW's
/// SEARCH-LAYER), best first.
fn search_layer<K: Kernel, L: Links>(
    w: &Walk<K, L>,
    q: &[f32],
    eps: &[Scored],
    ef: usize,
    level: usize,
    sc: &mut Scratch,
) -> Vec<Scored> {
    let (k, rows, g) = (w.k, w.rows, w.g);
    sc.visited.reset();
    let mut cand: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef * 4);
    let mut best: BinaryHeap<Worst> = BinaryHeap::with_capacity(ef + 1);
    for &e in eps {
        if sc.visited.insert(e.id) {
            cand.push(e);
            best.push(Worst(e));
            if best.len() > ef {
                best.pop();
            }
        }
    }
    while let Some(c) = cand.pop() {
        let worst = best.peek().map_or(f32::NEG_INFINITY, |w| w.0.sim);
        if c.sim < worst && best.len() >= ef {
            break;
        }
        sc.links.clear();
        g.links(c.id, level, &mut sc.links);
        sc.fresh.clear();
        for &nb in &sc.links {
            if sc.visited.insert(nb) {
                prefetch(rows.row(nb));
                sc.fresh.push(nb);
            }
        }
        for &nb in &sc.fresh {
            let s = Scored {
                sim: k.dot(q, rows.row(nb)),
                id: nb,
            };
            if best.len() < ef || s > best.peek().expect("ef > 0").0 {
                cand.push(s);
                best.push(Worst(s));
                if best.len() > ef {
                    best.pop();
                }
            }
        }
    }
    let mut out: Vec<Scored> = best.into_iter().map(|w| w.0).collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// HNSW's neighbour heuristic: from `cands` (best first, products with the
/// node being linked), keeps a candidate only if it is nearer that node than
/// every candidate already kept; at most `m`.
fn select<K: Kernel>(k: K, rows: Rows, cands: &[Scored], m: usize, out: &mut Vec<u32>) {
    out.clear();
    let mut kept: Vec<Scored> = Vec::with_capacity(m);
    for &c in cands {
        if kept.len() >= m {
            break;
        }
        let rc = rows.row(c.id);
        if kept.iter().all(|r| k.dot(rc, rows.row(r.id)) < c.sim) {
            kept.push(c);
        }
    }
    out.extend(kept.iter().map(|s| s.id));
}

// ---------------------------------------------------------------- the build

/// A graph being built: layer 0 as atomics (written under the node's lock),
/// the upper layers behind the node's lock.
struct Building {
    m: usize,
    m0: usize,
    levels: Vec<u8>,
    layer0: Vec<AtomicU32>,
    /// Per node: its upper layers, `m + 1` slots each (a count, then the
    /// links), levels 1..=its level; the lock also guards its layer 0.
    upper: Vec<Mutex<Vec<u32>>>,
}

impl Links for Building {
    fn links(&self, node: u32, level: usize, out: &mut Vec<u32>) {
        let n = node as usize;
        if level == 0 {
            let base = n * (self.m0 + 1);
            let c = (self.layer0[base].load(Relaxed) as usize).min(self.m0);
            out.extend(
                self.layer0[base + 1..base + 1 + c]
                    .iter()
                    .map(|a| a.load(Relaxed)),
            );
        } else {
            let up = self.upper[n].lock().unwrap_or_else(|e| e.into_inner());
            let base = (level - 1) * (self.m + 1);
            if base < up.len() {
                let c = up[base] as usize;
                out.extend_from_slice(&up[base + 1..base + 1 + c]);
            }
        }
    }
}

impl Building {
    /// Adds `new` to the links of `node` on `level`; when the list would
    /// overflow, the heuristic picks what stays among the old and new links.
    fn add_links<K: Kernel>(&self, k: K, rows: Rows, node: u32, level: usize, new: &[u32]) {
        let n = node as usize;
        let cap = if level == 0 { self.m0 } else { self.m };
        let mut up = self.upper[n].lock().unwrap_or_else(|e| e.into_inner());
        let mut cur: Vec<u32> = Vec::with_capacity(cap + new.len());
        if level == 0 {
            let base = n * (self.m0 + 1);
            let c = self.layer0[base].load(Relaxed) as usize;
            cur.extend(
                self.layer0[base + 1..base + 1 + c]
                    .iter()
                    .map(|a| a.load(Relaxed)),
            );
        } else {
            let base = (level - 1) * (self.m + 1);
            let c = up[base] as usize;
            cur.extend_from_slice(&up[base + 1..base + 1 + c]);
        }
        for &x in new {
            if x != node && !cur.contains(&x) {
                cur.push(x);
            }
        }
        if cur.len() > cap {
            let r = rows.row(node);
            let mut cands: Vec<Scored> = cur
                .iter()
                .map(|&id| Scored {
                    sim: k.dot(r, rows.row(id)),
                    id,
                })
                .collect();
            cands.sort_unstable_by(|a, b| b.cmp(a));
            select(k, rows, &cands, cap, &mut cur);
        }
        if level == 0 {
            let base = n * (self.m0 + 1);
            for (slot, &x) in self.layer0[base + 1..].iter().zip(&cur) {
                slot.store(x, Relaxed);
            }
            self.layer0[base].store(cur.len() as u32, Relaxed);
        } else {
            let base = (level - 1) * (self.m + 1);
            up[base] = cur.len() as u32;
            up[base + 1..base + 1 + cur.len()].copy_from_slice(&cur);
        }
    }
}

/// Where searches start: the node of the highest level.
#[derive(Clone, Copy)]
struct Entry {
    node: u32,
    level: usize,
}

/// The nodes' levels: `⌊−ln U · 1/ln M⌋`, from the fixed seed.
fn draw_levels(n: usize, m: usize) -> Vec<u8> {
    let ml = 1.0 / (m as f64).ln();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(LEVEL_SEED);
    (0..n)
        .map(|_| {
            let u: f64 = rng.random::<f64>();
            let l = (-(1.0 - u).ln() * ml).floor();
            (l as usize).min(MAX_LEVEL) as u8
        })
        .collect()
}

/// A finished graph: what searches walk and what a file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    m: usize,
    levels: Vec<u8>,
    /// `2m + 1` slots per node: a count, then the links.
    layer0: Vec<u32>,
    /// Where a node's upper layers start in `upper` (`m + 1` slots per level
    /// 1..=its level); `upper_start[n]` is the end.
    upper_start: Vec<u64>,
    upper: Vec<u32>,
    entry: u32,
    max_level: usize,
}

impl Links for Graph {
    #[inline]
    fn links(&self, node: u32, level: usize, out: &mut Vec<u32>) {
        let n = node as usize;
        if level == 0 {
            let base = n * (2 * self.m + 1);
            let c = self.layer0[base] as usize;
            out.extend_from_slice(&self.layer0[base + 1..base + 1 + c]);
        } else {
            let base = self.upper_start[n] as usize + (level - 1) * (self.m + 1);
            let c = self.upper[base] as usize;
            out.extend_from_slice(&self.upper[base + 1..base + 1 + c]);
        }
    }
}

fn scratch(pool: &VisitedPool) -> Scratch {
    Scratch {
        visited: pool.take(),
        links: Vec::new(),
        fresh: Vec::new(),
    }
}

impl Graph {
    /// Builds the graph over `rows` with `m` links per node (twice that on
    /// layer 0) and a candidate list of `ef_construction`, inserting in
    /// parallel on the current rayon pool.
    pub(crate) fn build(rows: Rows, m: usize, ef_construction: usize) -> Graph {
        match Avx2Fma::detect() {
            Some(k) => Self::build_with(k, rows, m, ef_construction),
            None => Self::build_with(Portable, rows, m, ef_construction),
        }
    }

    fn build_with<K: Kernel>(k: K, rows: Rows, m: usize, ef_c: usize) -> Graph {
        let n = rows.len();
        let m0 = 2 * m;
        let levels = draw_levels(n, m);
        let b = Building {
            m,
            m0,
            layer0: (0..n * (m0 + 1)).map(|_| AtomicU32::new(0)).collect(),
            upper: levels
                .iter()
                .map(|&l| Mutex::new(vec![0; l as usize * (m + 1)]))
                .collect(),
            levels,
        };
        if n == 0 {
            return Graph::freeze(b, Entry { node: 0, level: 0 });
        }
        // the first node of the highest level starts the graph; the others
        // go in order of level, highest first (as faiss does), so the entry
        // point rarely changes during the build
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(b.levels[i as usize]));
        let first = order[0];
        let entry = Mutex::new(Entry {
            node: first,
            level: b.levels[first as usize] as usize,
        });
        let pool = VisitedPool::new(n);
        order[1..].par_iter().for_each_init(
            || scratch(&pool),
            |sc, &node| insert(k, rows, &b, &entry, ef_c, node, sc),
        );
        let e = *entry.lock().unwrap_or_else(|e| e.into_inner());
        Graph::freeze(b, e)
    }

    fn freeze(b: Building, e: Entry) -> Graph {
        let mut upper_start = Vec::with_capacity(b.levels.len() + 1);
        let mut upper = Vec::new();
        for u in b.upper {
            upper_start.push(upper.len() as u64);
            upper.extend(u.into_inner().unwrap_or_else(|e| e.into_inner()));
        }
        upper_start.push(upper.len() as u64);
        Graph {
            m: b.m,
            levels: b.levels,
            layer0: b.layer0.into_iter().map(AtomicU32::into_inner).collect(),
            upper_start,
            upper,
            entry: e.node,
            max_level: e.level,
        }
    }

    /// Links per node (`M`).
    pub fn m(&self) -> usize {
        self.m
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// Bytes the graph holds (not the rows).
    pub fn memory_bytes(&self) -> usize {
        self.levels.len() + 4 * (self.layer0.len() + self.upper.len()) + 8 * self.upper_start.len()
    }

    /// A pool of visited tables for searching this graph.
    pub(crate) fn visited_pool(&self) -> VisitedPool {
        VisitedPool::new(self.len())
    }

    /// The (approximately) `k` best rows for `q`, best first, from a walk
    /// with a candidate list of `max(ef, k)`.
    pub(crate) fn search(
        &self,
        rows: Rows,
        pool: &VisitedPool,
        q: &[f32],
        k: usize,
        ef: usize,
    ) -> Vec<Scored> {
        match Avx2Fma::detect() {
            Some(kern) => self.search_with(kern, rows, pool, q, k, ef),
            None => self.search_with(Portable, rows, pool, q, k, ef),
        }
    }

    fn search_with<K: Kernel>(
        &self,
        kern: K,
        rows: Rows,
        pool: &VisitedPool,
        q: &[f32],
        k: usize,
        ef: usize,
    ) -> Vec<Scored> {
        if self.is_empty() || k == 0 {
            return Vec::new();
        }
        let mut sc = scratch(pool);
        let w = Walk {
            k: kern,
            rows,
            g: self,
        };
        let mut ep = Scored {
            sim: kern.dot(q, rows.row(self.entry)),
            id: self.entry,
        };
        for level in (1..=self.max_level).rev() {
            ep = greedy(&w, q, ep, level, &mut sc.links);
        }
        let mut found = search_layer(&w, q, &[ep], ef.max(k), 0, &mut sc);
        pool.give(sc.visited);
        found.truncate(k);
        found
    }

    // ------------------------------------------------------------ the file

    /// The graph as bytes: [`MAGIC`], [`FORMAT_VERSION`], the sizes, the
    /// levels, layer 0, the upper layers, then a blake3 hash of all before.
    pub fn to_bytes(&self, dim: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.memory_bytes());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        for v in [
            self.len() as u64,
            dim as u64,
            self.m as u64,
            u64::from(self.entry),
            self.max_level as u64,
            self.upper.len() as u64,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.levels);
        for &v in self.layer0.iter().chain(&self.upper) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let h = blake3::hash(&out);
        out.extend_from_slice(h.as_bytes());
        out
    }

    /// Reads a graph written by [`Graph::to_bytes`] for `n` rows of `dim`,
    /// checking its hash, sizes and every link; errors name `path`.
    pub fn from_bytes(bytes: &[u8], path: &Path, n: usize, dim: usize) -> Result<Graph> {
        let bad = |what: String| Error::file(path, format!("not a valid HNSW graph file: {what}"));
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(bad("it does not start with Rosetta's graph header".into()));
        }
        if bytes.len() < MAGIC.len() + 4 + 6 * 8 + 32 {
            return Err(bad(format!("truncated ({} bytes)", bytes.len())));
        }
        let (body, hash) = bytes.split_at(bytes.len() - 32);
        let mut r = Reader {
            b: body,
            at: MAGIC.len(),
        };
        let version = r.u32();
        if version != FORMAT_VERSION {
            return Err(bad(format!(
                "format version {version}, this Rosetta reads {FORMAT_VERSION}"
            )));
        }
        if blake3::hash(body).as_bytes() != hash {
            return Err(bad(
                "its checksum does not match (truncated or corrupted)".into()
            ));
        }
        let [len, fdim, m, entry, max_level, n_upper] = [0; 6].map(|_| r.u64());
        if len != n as u64 || fdim != dim as u64 {
            return Err(bad(format!(
                "it holds {len} rows of dimension {fdim}, the rows are {n} of {dim}"
            )));
        }
        if !(2..=256).contains(&m) || max_level > MAX_LEVEL as u64 {
            return Err(bad(format!("M {m}, top level {max_level}")));
        }
        let m = m as usize;
        let n_l0 = n as u64 * (2 * m as u64 + 1);
        if entry >= len.max(1) {
            return Err(bad(format!("entry point {entry} of {len} rows")));
        }
        let want = n as u128 + 4 * (u128::from(n_l0) + u128::from(n_upper));
        if (r.b.len() - r.at) as u128 != want {
            return Err(bad(format!(
                "{} bytes of levels and links, {want} expected",
                r.b.len() - r.at
            )));
        }
        let levels = r.b[r.at..r.at + n].to_vec();
        r.at += n;
        let layer0: Vec<u32> = (0..n_l0).map(|_| r.u32()).collect();
        let upper: Vec<u32> = (0..n_upper).map(|_| r.u32()).collect();
        let mut upper_start = Vec::with_capacity(n + 1);
        let mut at = 0u64;
        for &l in &levels {
            upper_start.push(at);
            at += u64::from(l) * (m as u64 + 1);
        }
        upper_start.push(at);
        if at != n_upper {
            return Err(bad(format!(
                "{n_upper} upper-layer slots, the levels need {at}"
            )));
        }
        let g = Graph {
            m,
            levels,
            layer0,
            upper_start,
            upper,
            entry: entry as u32,
            max_level: max_level as usize,
        };
        g.check().map_err(bad)?;
        Ok(g)
    }

    /// Every count within its list and every link to a node of the level.
    fn check(&self) -> std::result::Result<(), String> {
        let n = self.len();
        if n == 0 {
            return Ok(());
        }
        if self.entry as usize >= n || self.levels[self.entry as usize] as usize != self.max_level {
            return Err(format!(
                "entry point {} is not on the top level",
                self.entry
            ));
        }
        for (node, &l) in self.levels.iter().enumerate() {
            if l as usize > self.max_level {
                return Err(format!("node {node} is above the top level"));
            }
            for level in 0..=l as usize {
                let (list, cap) = if level == 0 {
                    let b = node * (2 * self.m + 1);
                    (&self.layer0[b..b + 2 * self.m + 1], 2 * self.m)
                } else {
                    let b = self.upper_start[node] as usize + (level - 1) * (self.m + 1);
                    (&self.upper[b..b + self.m + 1], self.m)
                };
                let c = list[0] as usize;
                if c > cap {
                    return Err(format!("node {node} has {c} links on level {level}"));
                }
                if let Some(&x) = list[1..=c]
                    .iter()
                    .find(|&&x| x as usize >= n || (self.levels[x as usize] as usize) < level)
                {
                    return Err(format!(
                        "node {node} links to node {x}, not on level {level}"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Little-endian reads from a slice whose length was checked first.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn u32(&mut self) -> u32 {
        let v = u32::from_le_bytes(self.b[self.at..self.at + 4].try_into().expect("4 bytes"));
        self.at += 4;
        v
    }

    fn u64(&mut self) -> u64 {
        let v = u64::from_le_bytes(self.b[self.at..self.at + 8].try_into().expect("8 bytes"));
        self.at += 8;
        v
    }
}

/// Inserts `node` (HNSW's INSERT): a greedy descent to its level, then on
/// each of its levels a search for `ef_c` candidates, links to the
/// heuristic's choice of them and links back from them.
fn insert<K: Kernel>(
    k: K,
    rows: Rows,
    b: &Building,
    entry: &Mutex<Entry>,
    ef_c: usize,
    node: u32,
    sc: &mut Scratch,
) {
    let level = b.levels[node as usize] as usize;
    let q = rows.row(node);
    let w = Walk { k, rows, g: b };
    // a node above the top holds the entry lock for its whole insertion
    let mut guard = Some(entry.lock().unwrap_or_else(|e| e.into_inner()));
    let top = **guard.as_ref().expect("held");
    if level <= top.level {
        guard = None;
    }
    let mut ep = Scored {
        sim: k.dot(q, rows.row(top.node)),
        id: top.node,
    };
    for l in (level + 1..=top.level).rev() {
        ep = greedy(&w, q, ep, l, &mut sc.links);
    }
    let mut eps = vec![ep];
    let mut chosen = Vec::with_capacity(b.m);
    for l in (0..=level.min(top.level)).rev() {
        let found = search_layer(&w, q, &eps, ef_c, l, sc);
        select(k, rows, &found, b.m, &mut chosen);
        b.add_links(k, rows, node, l, &chosen);
        for &nb in &chosen {
            b.add_links(k, rows, nb, l, &[node]);
        }
        eps = found;
    }
    if let Some(mut g) = guard {
        *g = Entry { node, level };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_distr::{Distribution, StandardNormal};

    #[test]
    fn kernels_are_the_inner_product() {
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
    fn levels_are_drawn_from_the_seed_at_rate_one_in_m() {
        let a = draw_levels(20_000, 16);
        assert_eq!(a, draw_levels(20_000, 16));
        let above = a.iter().filter(|&&l| l > 0).count();
        // P(level > 0) = 1/16: 1,250 expected
        assert!((1_000..1_500).contains(&above), "{above}");
    }

    #[test]
    fn visited_table_forgets_between_searches_even_past_the_epoch_wrap() {
        let mut v = Visited::new(4);
        for _ in 0..70_000 {
            v.reset();
            assert!(v.insert(2));
            assert!(!v.insert(2));
        }
    }
}
