//! Matrix-free solvers for the closed-form linear models (OPCA, CCA): no
//! `V × V` matrix is ever formed. Covariances are operators applied through
//! the sparse training matrices (`C w = (1/n) Xᵀ(X w) − μ (μᵀ w) + r w`),
//! ridge systems are solved by block conjugate gradients with a block-Jacobi
//! preconditioner (OPCA: pairs of strongly coupled terms; CCA: the
//! diagonal), and the top generalised eigenpairs come from subspace
//! iteration (the same power sequence the dense whitened solver applies)
//! closed by an exact Rayleigh–Ritz step on the final subspace. Memory is
//! the sparse data plus `O(threads · V · l)` for `l = k + oversample`
//! columns. Cost and measurements: `docs/models.md`, `docs/results.md`.

use faer::linalg::solvers::Solve;
use faer::{Mat, MatRef, Side};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use crate::text::CsrMatrix;
use crate::{Error, Result};

/// Row-major dense `rows × cols` block of `f64` (the right-hand sides and
/// iterates: `V × l` or `n × l`).
#[derive(Debug, Clone)]
pub struct Block {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Block {
    fn zeros(rows: usize, cols: usize) -> Self {
        Block {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    fn random(rows: usize, cols: usize, seed: u64) -> Self {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let data = (0..rows * cols)
            .map(|_| StandardNormal.sample(&mut rng))
            .collect();
        Block { rows, cols, data }
    }

    fn view(&self) -> MatRef<'_, f64> {
        MatRef::from_row_major_slice(&self.data, self.rows, self.cols)
    }

    fn from_mat(m: MatRef<'_, f64>) -> Self {
        let (rows, cols) = (m.nrows(), m.ncols());
        let mut data = Vec::with_capacity(rows * cols);
        for i in 0..rows {
            data.extend((0..cols).map(|j| m[(i, j)]));
        }
        Block { rows, cols, data }
    }

    fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Per-column dot products `Σ_i a[i,c] b[i,c]`, summed in a fixed
    /// order ([`GROUP_ROWS`]) whatever the thread count.
    fn col_dots(&self, other: &Block) -> Vec<f64> {
        let l = self.cols.max(1);
        let parts: Vec<Vec<f64>> = self
            .data
            .par_chunks(l * GROUP_ROWS)
            .zip(other.data.par_chunks(l * GROUP_ROWS))
            .map(|(a, b)| {
                let mut acc = vec![0.0; l];
                for (ra, rb) in a.chunks(l).zip(b.chunks(l)) {
                    for c in 0..l {
                        acc[c] += ra[c] * rb[c];
                    }
                }
                acc
            })
            .collect();
        sum_in_order(parts, l)
    }

    fn all_finite(&self) -> bool {
        self.data.iter().all(|v| v.is_finite())
    }
}

/// Rows per group of the parallel reductions: each group's partial sums
/// are added in group order, so a figure never depends on how rayon split
/// the work or on the thread count (the pattern of `bce.rs`'s loss pass).
const GROUP_ROWS: usize = 1024;

/// Per-column partial sums added in their order.
fn sum_in_order(parts: Vec<Vec<f64>>, l: usize) -> Vec<f64> {
    parts.into_iter().fold(vec![0.0; l], add_cols)
}

/// Parts of [`rows_gram`]'s rows at most: a number fixed by the data, never
/// by the thread count, so the sum's order is the same on any machine.
const GRAM_PARTS: usize = 16;

/// `Aᵀ (B W)` for sparse `A` (`n × V_a`) and `B` (`n × V_b`) with the same
/// rows and a `V_b × l` block, row by row: each row's `b_iᵀ W` (a gather)
/// is scattered into `a_i`'s terms. No `n × l` intermediate; each part of
/// the rows (at most [`GRAM_PARTS`], at least 256 rows each) sums into its
/// own `V_a × l` block (cache-resident for moderate `V`), and the blocks are
/// added in part order, a thread count's worth at a time: the same result,
/// bit for bit, with any number of threads.
fn rows_gram(a: &CsrMatrix, b: &CsrMatrix, w: &Block) -> Block {
    let (n, l) = (a.n_rows(), w.cols);
    let parts = n.div_ceil(256).clamp(1, GRAM_PARTS);
    let bounds: Vec<(usize, usize)> = (0..parts)
        .map(|p| (p * n / parts, (p + 1) * n / parts))
        .collect();
    let wave = rayon::current_num_threads().max(1);
    let mut data: Option<Vec<f64>> = None;
    for bounds in bounds.chunks(wave) {
        let partials: Vec<Vec<f64>> = bounds
            .par_iter()
            .map(|&(lo, hi)| {
                let mut out = vec![0.0; a.n_cols * l];
                let mut t = vec![0.0; l];
                for i in lo..hi {
                    let (bi, bv) = b.row(i);
                    if bi.is_empty() {
                        continue;
                    }
                    t.iter_mut().for_each(|x| *x = 0.0);
                    for (j, v) in bi.iter().zip(bv) {
                        let v = *v as f64;
                        for (t, w) in t.iter_mut().zip(w.row(*j as usize)) {
                            *t += v * w;
                        }
                    }
                    let (ai, av) = a.row(i);
                    for (j, v) in ai.iter().zip(av) {
                        let v = *v as f64;
                        let o = &mut out[*j as usize * l..(*j as usize + 1) * l];
                        for (o, t) in o.iter_mut().zip(&t) {
                            *o += v * t;
                        }
                    }
                }
                out
            })
            .collect();
        for part in partials {
            match data.as_mut() {
                None => data = Some(part),
                Some(d) => d
                    .par_chunks_mut(4096)
                    .zip(part.par_chunks(4096))
                    .for_each(|(d, p)| d.iter_mut().zip(p).for_each(|(d, p)| *d += p)),
            }
        }
    }
    let data = data.unwrap_or_else(|| vec![0.0; a.n_cols * l]);
    Block {
        rows: a.n_cols,
        cols: l,
        data,
    }
}

/// A term covariance `C = (1/n) Xᵀ X − μ μᵀ` of a sparse `n × V` matrix (or
/// the uncentred second moment, `μ = 0`), applied without forming it.
pub struct Covariance<'a> {
    x: &'a CsrMatrix,
    mu: Option<Vec<f64>>,
    diag: Vec<f64>,
}

impl<'a> Covariance<'a> {
    /// The covariance of `x`'s rows; `centred` subtracts the column means.
    pub fn new(x: &'a CsrMatrix, centred: bool) -> Self {
        let n = x.n_rows().max(1) as f64;
        let mut sum = vec![0.0f64; x.n_cols];
        let mut sq = vec![0.0f64; x.n_cols];
        for (c, v) in x.indices.iter().zip(&x.values) {
            let v = *v as f64;
            sum[*c as usize] += v;
            sq[*c as usize] += v * v;
        }
        let mu: Vec<f64> = sum.iter().map(|s| s / n).collect();
        let diag = sq
            .iter()
            .zip(&mu)
            .map(|(q, m)| q / n - if centred { m * m } else { 0.0 })
            .collect();
        Covariance {
            x,
            mu: centred.then_some(mu),
            diag,
        }
    }

    /// Terms (rows and columns of `C`).
    pub fn dim(&self) -> usize {
        self.x.n_cols
    }

    /// `C`'s diagonal.
    pub fn diag(&self) -> &[f64] {
        &self.diag
    }

    /// Mean of `C`'s diagonal (what a relative ridge is scaled by).
    pub fn mean_diag(&self) -> f64 {
        self.diag.iter().sum::<f64>() / self.diag.len().max(1) as f64
    }

    fn inv_n(&self) -> f64 {
        1.0 / self.x.n_rows().max(1) as f64
    }

    /// `(C + ridge I) w`.
    pub fn apply(&self, w: &Block, ridge: f64) -> Block {
        let mut out = rows_gram(self.x, self.x, w);
        let s = self.inv_n();
        out.data
            .par_iter_mut()
            .zip(&w.data)
            .for_each(|(o, w)| *o = *o * s + ridge * w);
        if let Some(mu) = &self.mu {
            subtract_rank_one(&mut out, mu, &proj(mu, w), 1.0);
        }
        out
    }

    /// The cross-covariance `C_xy w = (1/n) Xᵀ (Y w) − μ_x (μ_yᵀ w)` of two
    /// matrices with the same rows (`self` is `x`).
    pub fn cross(&self, y: &Covariance<'_>, w: &Block) -> Block {
        let mut out = rows_gram(self.x, y.x, w);
        let s = self.inv_n();
        out.data.par_iter_mut().for_each(|o| *o *= s);
        if let (Some(mx), Some(my)) = (&self.mu, &y.mu) {
            subtract_rank_one(&mut out, mx, &proj(my, w), 1.0);
        }
        out
    }
}

/// `μᵀ W` (a row of `l`).
fn proj(mu: &[f64], w: &Block) -> Vec<f64> {
    let mut r = vec![0.0; w.cols];
    for (i, m) in mu.iter().enumerate() {
        if *m != 0.0 {
            for (r, w) in r.iter_mut().zip(w.row(i)) {
                *r += m * w;
            }
        }
    }
    r
}

/// `out −= scale · μ rᵀ`.
fn subtract_rank_one(out: &mut Block, mu: &[f64], r: &[f64], scale: f64) {
    let l = out.cols;
    out.data
        .par_chunks_mut(l.max(1))
        .zip(mu)
        .for_each(|(o, m)| {
            if *m != 0.0 {
                for (o, r) in o.iter_mut().zip(r) {
                    *o -= scale * m * r;
                }
            }
        });
}

/// A sparse matrix by columns (CSC): each term's rows and values.
struct Columns {
    ptr: Vec<usize>,
    rows: Vec<u32>,
    vals: Vec<f32>,
}

impl Columns {
    fn of(x: &CsrMatrix) -> Self {
        let mut ptr = vec![0usize; x.n_cols + 1];
        for &c in &x.indices {
            ptr[c as usize + 1] += 1;
        }
        for j in 0..x.n_cols {
            ptr[j + 1] += ptr[j];
        }
        let mut next = ptr.clone();
        let (mut rows, mut vals) = (vec![0u32; x.nnz()], vec![0f32; x.nnz()]);
        for i in 0..x.n_rows() {
            let (cs, vs) = x.row(i);
            for (&c, &v) in cs.iter().zip(vs) {
                let at = &mut next[c as usize];
                rows[*at] = i as u32;
                vals[*at] = v;
                *at += 1;
            }
        }
        Columns { ptr, rows, vals }
    }

    fn col(&self, j: usize) -> (&[u32], &[f32]) {
        let (a, b) = (self.ptr[j], self.ptr[j + 1]);
        (&self.rows[a..b], &self.vals[a..b])
    }

    /// `Σ_i x_ia x_ib` (rows ascending in both columns).
    fn dot(&self, a: usize, b: usize) -> f64 {
        let ((ra, va), (rb, vb)) = (self.col(a), self.col(b));
        let (mut i, mut j, mut s) = (0, 0, 0.0f64);
        while i < ra.len() && j < rb.len() {
            match ra[i].cmp(&rb[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    s += va[i] as f64 * vb[j] as f64;
                    i += 1;
                    j += 1;
                }
            }
        }
        s
    }
}
/// A block-Jacobi preconditioner `M⁻¹` for `C + ridge I`: terms are grouped
/// into small blocks (at most `max_block` terms) by their strongest
/// normalised couplings `|C_jk| / √((C_jj + r)(C_kk + r))` (greedy, strongest
/// first), and `M` is `C + ridge I` restricted to those blocks, inverted
/// exactly. With `max_block = 1` it is the Jacobi (diagonal) preconditioner.
/// For OPCA's noise covariance the strongest couplings pair a term with its
/// translation, which the diagonal alone cannot see. Memory `O(V)`.
pub struct Precond {
    /// Each term's block.
    block_of: Vec<u32>,
    /// Each term's position in its block.
    pos: Vec<u8>,
    /// Block `b`'s terms are `members[ptr[b]..ptr[b + 1]]`.
    ptr: Vec<usize>,
    members: Vec<u32>,
    /// Block `b`'s `s × s` inverse, row-major, from `inv[inv_at[b]..]`.
    inv_at: Vec<usize>,
    inv: Vec<f64>,
}

/// Couplings weaker than this (normalised) are left out of the blocks.
const MIN_COUPLING: f64 = 0.05;
/// Candidate partners kept per term.
const CANDIDATES: usize = 3;

impl Precond {
    /// The diagonal of `C + ridge I`, inverted.
    pub fn jacobi(c: &Covariance<'_>, ridge: f64) -> Self {
        let v = c.dim();
        let mut p = Precond {
            block_of: (0..v as u32).collect(),
            pos: vec![0; v],
            ptr: (0..=v).collect(),
            members: (0..v as u32).collect(),
            inv_at: (0..v).collect(),
            inv: c.diag.iter().map(|d| 1.0 / (d + ridge)).collect(),
        };
        p.inv_at.push(v);
        p
    }

    /// Blocks of at most `max_block` terms over the strongest couplings of
    /// `C + ridge I` (`ridge > 0`). Costs `Σ_rows nnz²` to find them.
    pub fn blocks(c: &Covariance<'_>, ridge: f64, max_block: usize) -> Self {
        let v = c.dim();
        if max_block <= 1 || v < 2 {
            return Self::jacobi(c, ridge);
        }
        let max_block = max_block.min(255);
        let cols = Columns::of(c.x);
        let scale: Vec<f64> = c.diag.iter().map(|d| 1.0 / (d + ridge).sqrt()).collect();
        let inv_n = c.inv_n();
        let mu = c.mu.as_deref();
        // each term's strongest partners: (weight, j, k)
        let chunk = 256;
        let mut edges: Vec<(f64, u32, u32)> = (0..v.div_ceil(chunk))
            .into_par_iter()
            .map_init(
                || (vec![0.0f64; v], Vec::<u32>::new()),
                |(acc, touched), ch| {
                    let mut out = Vec::new();
                    for j in ch * chunk..((ch + 1) * chunk).min(v) {
                        let (rows, vals) = cols.col(j);
                        for (&i, &vj) in rows.iter().zip(vals) {
                            let (ks, vs) = c.x.row(i as usize);
                            for (&k, &vk) in ks.iter().zip(vs) {
                                let a = &mut acc[k as usize];
                                if *a == 0.0 {
                                    touched.push(k);
                                }
                                *a += vj as f64 * vk as f64;
                                if *a == 0.0 {
                                    *a = f64::MIN_POSITIVE;
                                }
                            }
                        }
                        let mut best: Vec<(f64, u32)> = Vec::with_capacity(CANDIDATES + 1);
                        for &k in touched.iter() {
                            let s = acc[k as usize];
                            acc[k as usize] = 0.0;
                            if k as usize == j {
                                continue;
                            }
                            let cjk = s * inv_n - mu.map_or(0.0, |m| m[j] * m[k as usize]);
                            let w = cjk.abs() * scale[j] * scale[k as usize];
                            if w >= MIN_COUPLING
                                && (best.len() < CANDIDATES || w > best[best.len() - 1].0)
                            {
                                let at = best.partition_point(|b| b.0 >= w);
                                best.insert(at, (w, k));
                                best.truncate(CANDIDATES);
                            }
                        }
                        touched.clear();
                        out.extend(best.into_iter().map(|(w, k)| (w, j as u32, k)));
                    }
                    out
                },
            )
            .flatten()
            .collect();
        edges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        // greedy union of the strongest couplings, blocks capped in size
        let mut parent: Vec<u32> = (0..v as u32).collect();
        let mut size = vec![1usize; v];
        fn root(parent: &mut [u32], mut i: u32) -> u32 {
            while parent[i as usize] != i {
                let g = parent[parent[i as usize] as usize];
                parent[i as usize] = g;
                i = g;
            }
            i
        }
        for &(_, j, k) in &edges {
            let (a, b) = (root(&mut parent, j), root(&mut parent, k));
            if a != b && size[a as usize] + size[b as usize] <= max_block {
                let (big, small) = if size[a as usize] >= size[b as usize] {
                    (a, b)
                } else {
                    (b, a)
                };
                parent[small as usize] = big;
                size[big as usize] += size[small as usize];
            }
        }
        // blocks in order of their first term
        let mut block_id = vec![u32::MAX; v];
        let mut block_of = vec![0u32; v];
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for t in 0..v as u32 {
            let r = root(&mut parent, t) as usize;
            if block_id[r] == u32::MAX {
                block_id[r] = groups.len() as u32;
                groups.push(Vec::new());
            }
            block_of[t as usize] = block_id[r];
            groups[block_id[r] as usize].push(t);
        }
        let mut pos = vec![0u8; v];
        let (mut ptr, mut members, mut inv_at) = (vec![0], Vec::with_capacity(v), Vec::new());
        for g in &groups {
            for (p, &t) in g.iter().enumerate() {
                pos[t as usize] = p as u8;
            }
            members.extend_from_slice(g);
            ptr.push(members.len());
        }
        // each block's matrix, inverted (Cholesky; a principal block of an
        // SPD matrix is SPD, a failure falls back to its diagonal)
        let invs: Vec<Vec<f64>> = groups
            .par_iter()
            .map(|g| {
                let s = g.len();
                let diag_inv = || {
                    let mut m = vec![0.0; s * s];
                    for (a, &t) in g.iter().enumerate() {
                        m[a * s + a] = 1.0 / (c.diag[t as usize] + ridge);
                    }
                    m
                };
                if s == 1 {
                    return diag_inv();
                }
                let mut m = Mat::<f64>::zeros(s, s);
                for a in 0..s {
                    let ta = g[a] as usize;
                    m[(a, a)] = c.diag[ta] + ridge;
                    for b in a + 1..s {
                        let tb = g[b] as usize;
                        let e = cols.dot(ta, tb) * inv_n - mu.map_or(0.0, |m| m[ta] * m[tb]);
                        m[(a, b)] = e;
                        m[(b, a)] = e;
                    }
                }
                match m.llt(Side::Lower) {
                    Ok(llt) => {
                        let inv = llt.solve(Mat::<f64>::identity(s, s));
                        let mut out = vec![0.0; s * s];
                        for a in 0..s {
                            for b in 0..s {
                                out[a * s + b] = 0.5 * (inv[(a, b)] + inv[(b, a)]);
                            }
                        }
                        out
                    }
                    Err(_) => diag_inv(),
                }
            })
            .collect();
        let mut inv = Vec::with_capacity(invs.iter().map(Vec::len).sum());
        for m in invs {
            inv_at.push(inv.len());
            inv.extend(m);
        }
        inv_at.push(inv.len());
        Precond {
            block_of,
            pos,
            ptr,
            members,
            inv_at,
            inv,
        }
    }

    /// Terms in blocks of two or more.
    pub fn coupled_terms(&self) -> usize {
        self.ptr
            .windows(2)
            .filter(|w| w[1] - w[0] > 1)
            .map(|w| w[1] - w[0])
            .sum()
    }

    /// `z = M⁻¹ r`, returning the per-column sums `Σ_i r_i z_i`.
    fn apply_dot(&self, r: &Block, z: &mut Block) -> Vec<f64> {
        let l = r.cols.max(1);
        let parts: Vec<Vec<f64>> = z
            .data
            .par_chunks_mut(l * GROUP_ROWS)
            .enumerate()
            .map(|(g, zg)| {
                let mut acc = vec![0.0; l];
                for (j, zi) in zg.chunks_mut(l).enumerate() {
                    let i = g * GROUP_ROWS + j;
                    let b = self.block_of[i] as usize;
                    let (lo, hi) = (self.ptr[b], self.ptr[b + 1]);
                    let ri = r.row(i);
                    if hi - lo == 1 {
                        let d = self.inv[self.inv_at[b]];
                        for c in 0..zi.len() {
                            zi[c] = ri[c] * d;
                            acc[c] += ri[c] * zi[c];
                        }
                    } else {
                        let s = hi - lo;
                        let row = &self.inv[self.inv_at[b] + self.pos[i] as usize * s..][..s];
                        zi.iter_mut().for_each(|z| *z = 0.0);
                        for (m, &t) in row.iter().zip(&self.members[lo..hi]) {
                            for (z, r) in zi.iter_mut().zip(r.row(t as usize)) {
                                *z += m * r;
                            }
                        }
                        for c in 0..zi.len() {
                            acc[c] += ri[c] * zi[c];
                        }
                    }
                }
                acc
            })
            .collect();
        sum_in_order(parts, l)
    }
}

/// How a block of conjugate-gradient solves went.
#[derive(Debug, Clone, Copy, Default)]
pub struct CgReport {
    /// Iterations taken (the slowest column's).
    pub iters: usize,
    /// Largest relative residual `‖b − A x‖ / ‖b‖` at the end.
    pub residual: f64,
}

/// Solves `(C + ridge I) X = B` column by column (each with its own step
/// sizes) by conjugate gradients preconditioned with `m` (built for the same
/// `C` and `ridge`), until every column's relative residual is below `tol`
/// or `max_iters` pass. `start` is an initial guess `X₀` with
/// `(C + ridge I) X₀` (zero if none).
pub fn solve(
    c: &Covariance<'_>,
    ridge: f64,
    m: &Precond,
    b: &Block,
    start: Option<(Block, Block)>,
    tol: f64,
    max_iters: usize,
) -> (Block, CgReport) {
    let l = b.cols.max(1);
    let bnorm: Vec<f64> = b.col_dots(b).iter().map(|v| v.sqrt()).collect();
    let (mut x, mut r) = match start {
        None => (Block::zeros(b.rows, b.cols), b.clone()),
        Some((x0, cx0)) => {
            let mut r = b.clone();
            r.data
                .par_iter_mut()
                .zip(&cx0.data)
                .for_each(|(r, c)| *r -= c);
            (x0, r)
        }
    };
    // z = M⁻¹ r, p = z; per-column sums r·z
    let mut z = Block::zeros(b.rows, b.cols);
    let mut rz = m.apply_dot(&r, &mut z);
    let mut p = z.clone();
    let residual = |rr: &[f64]| {
        rr.iter()
            .zip(&bnorm)
            .map(|(rr, bn)| if *bn > 0.0 { rr.sqrt() / bn } else { 0.0 })
            .fold(0.0f64, f64::max)
    };
    let mut report = CgReport {
        iters: 0,
        residual: residual(&r.col_dots(&r)),
    };
    while report.residual > tol && report.iters < max_iters {
        let ap = c.apply(&p, ridge);
        let pap = p.col_dots(&ap);
        let alpha: Vec<f64> = rz
            .iter()
            .zip(&pap)
            .map(|(a, b)| if *b > 0.0 { a / b } else { 0.0 })
            .collect();
        // x += α p; r −= α Ap; sums of r·r, in one pass
        let g = l * GROUP_ROWS;
        let parts: Vec<Vec<f64>> = x
            .data
            .par_chunks_mut(g)
            .zip(r.data.par_chunks_mut(g))
            .zip(p.data.par_chunks(g).zip(ap.data.par_chunks(g)))
            .map(|((xg, rg), (pg, apg))| {
                let mut acc = vec![0.0; l];
                let rows = xg
                    .chunks_mut(l)
                    .zip(rg.chunks_mut(l))
                    .zip(pg.chunks(l).zip(apg.chunks(l)));
                for ((x, r), (p, ap)) in rows {
                    for c in 0..x.len() {
                        x[c] += alpha[c] * p[c];
                        r[c] -= alpha[c] * ap[c];
                        acc[c] += r[c] * r[c];
                    }
                }
                acc
            })
            .collect();
        let rr = sum_in_order(parts, l);
        report.iters += 1;
        report.residual = residual(&rr);
        if report.residual <= tol {
            break;
        }
        let rz_new = m.apply_dot(&r, &mut z);
        let beta: Vec<f64> = rz_new
            .iter()
            .zip(&rz)
            .map(|(a, b)| if *b > 0.0 { a / b } else { 0.0 })
            .collect();
        // p = z + β p
        p.data
            .par_chunks_mut(l)
            .zip(z.data.par_chunks(l))
            .for_each(|(p, z)| {
                for c in 0..p.len() {
                    p[c] = z[c] + beta[c] * p[c];
                }
            });
        rz = rz_new;
    }
    (x, report)
}

fn add_cols(mut a: Vec<f64>, b: Vec<f64>) -> Vec<f64> {
    a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
    a
}

/// The best start for `(C + ridge I) X = B` within `span(W)` (Galerkin:
/// `X₀ = W (Wᵀ (C + ridge I) W)⁻¹ Wᵀ B`) and its product with the matrix.
/// Subspace iteration converges, so the previous subspace holds most of the
/// next solution and conjugate gradients start close to it. `None` when the
/// projected matrix is not positive definite.
fn galerkin_start(c: &Covariance<'_>, ridge: f64, w: &Block, b: &Block) -> Option<(Block, Block)> {
    let cw = c.apply(w, ridge);
    let mut g = gram(w, &cw);
    symmetrize(&mut g);
    let llt = g.llt(Side::Lower).ok()?;
    let coef = llt.solve(gram(w, b));
    if !coef.col_iter().all(|c| c.iter().all(|v| v.is_finite())) {
        return None;
    }
    let x0 = Block::from_mat((w.view() * &coef).as_ref());
    let cx0 = Block::from_mat((cw.view() * &coef).as_ref());
    Some((x0, cx0))
}

/// Orthonormal columns spanning `w`'s (thin QR).
fn orth(w: &Block) -> Block {
    let q = w.view().to_owned().qr().compute_thin_Q();
    Block::from_mat(q.as_ref())
}

/// `Wᵀ V` (small, `l × l`).
fn gram(w: &Block, v: &Block) -> Mat<f64> {
    w.view().transpose() * v.view()
}

fn symmetrize(g: &mut Mat<f64>) {
    for i in 0..g.nrows() {
        for j in 0..i {
            let a = 0.5 * (g[(i, j)] + g[(j, i)]);
            g[(i, j)] = a;
            g[(j, i)] = a;
        }
    }
}

/// How a closed-form model's eigenproblem is solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Solver {
    /// Matrix-free: covariance operators, conjugate gradients, subspace
    /// iteration (this module). Memory linear in the vocabulary.
    Implicit,
    /// Dense `V × V` covariances, Cholesky whitening (memory `V²`, time `V³`).
    Dense,
}

impl Solver {
    /// `implicit` or `dense`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "implicit" => Ok(Solver::Implicit),
            "dense" => Ok(Solver::Dense),
            _ => Err(Error::invalid(format!(
                "solver must be implicit or dense, got {s:?}"
            ))),
        }
    }
}

/// `dense solver` or `implicit solver, N CG iterations`, for a fit's log.
pub fn describe(solver: Solver, cg_iters: usize) -> String {
    match solver {
        Solver::Dense => "dense solver".to_string(),
        Solver::Implicit => format!("implicit solver, {cg_iters} CG iterations"),
    }
}

/// Settings of an eigenproblem solve (both solvers).
#[derive(Debug, Clone, Copy)]
pub struct SubspaceOpts {
    /// Which solver.
    pub solver: Solver,
    /// Columns beyond `k` in the subspace.
    pub oversample: usize,
    /// Power iterations (as the dense solver's: each applies the operator
    /// and its transpose).
    pub power_iters: usize,
    /// Seed of the random start.
    pub seed: u64,
    /// Relative residual each conjugate-gradient solve stops at (implicit).
    pub tol: f64,
    /// Most conjugate-gradient iterations per solve (implicit).
    pub max_cg_iters: usize,
}

/// Iteration counts of a fit, for the log.
#[derive(Debug, Clone, Default)]
pub struct SolveStats {
    /// Conjugate-gradient solves run.
    pub solves: usize,
    /// Conjugate-gradient iterations over all solves.
    pub cg_iters: usize,
    /// Largest final relative residual of any solve.
    pub worst_residual: f64,
}

impl SolveStats {
    /// Says through `warn` when a solve stopped above `opts.tol`.
    pub fn warn_unconverged(&self, opts: &SubspaceOpts, warn: &mut dyn FnMut(&str)) {
        if self.worst_residual > opts.tol {
            warn(&format!(
                "conjugate gradients stopped at relative residual {:.2e} (> tol {:.0e}) after {} \
                 iterations; raise max_cg_iters or the ridge",
                self.worst_residual, opts.tol, opts.max_cg_iters
            ));
        }
    }

    fn add(&mut self, r: CgReport) {
        self.solves += 1;
        self.cg_iters += r.iters;
        self.worst_residual = self.worst_residual.max(r.residual);
    }
}

/// Refuses `k` directions of a problem with fewer than `k` terms (or none).
fn check_k(k: usize, terms: usize) -> Result<()> {
    if k == 0 || k > terms {
        return Err(Error::invalid(format!(
            "cannot take {k} directions of a problem over {terms} terms"
        )));
    }
    Ok(())
}

fn lower_cholesky(a: &Mat<f64>, what: &str) -> Result<Mat<f64>> {
    let llt = a.llt(Side::Lower).map_err(|e| {
        Error::invalid(format!(
            "{what}: projected matrix not positive definite ({e:?})"
        ))
    })?;
    Ok(llt.L().to_owned())
}

fn finite(b: &Block, what: &str) -> Result<()> {
    if b.all_finite() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what}: non-finite values in the subspace iteration"
        )))
    }
}

/// The top `k` pairs of `S v = λ (N + ridge I) v` for covariance operators
/// `S` and `N` over the same terms: `(V × k` directions with
/// `vᵀ (N + ridge I) v = 1`, eigenvalues descending`)`.
pub fn generalised_eigen(
    s: &Covariance<'_>,
    n: &Covariance<'_>,
    ridge: f64,
    k: usize,
    opts: &SubspaceOpts,
) -> Result<(Mat<f64>, Vec<f64>, SolveStats)> {
    let v = s.dim();
    check_k(k, v)?;
    let l = (k + opts.oversample).min(v);
    let mut stats = SolveStats::default();
    // pairs of terms (a term and its translation, mostly): measured on the
    // synthetic bench, blocks of 4 took no fewer iterations than pairs
    let m = Precond::blocks(n, ridge, 2);
    // W ← orth((N + r)⁻¹ S W), started from the solution's part in span(W)
    let step = |w: &Block, guess: bool, stats: &mut SolveStats| -> Result<Block> {
        let rhs = s.apply(w, 0.0);
        let start = if guess {
            galerkin_start(n, ridge, w, &rhs)
        } else {
            None
        };
        let (x, rep) = solve(n, ridge, &m, &rhs, start, opts.tol, opts.max_cg_iters);
        stats.add(rep);
        finite(&x, "opca")?;
        Ok(orth(&x))
    };
    let mut w = step(&Block::random(v, l, opts.seed), false, &mut stats)?;
    for _ in 0..2 * opts.power_iters {
        w = step(&w, true, &mut stats)?;
    }
    // Rayleigh–Ritz on span(W): (Wᵀ S W) y = λ (Wᵀ (N + r) W) y
    let sw = s.apply(&w, 0.0);
    let nw = n.apply(&w, ridge);
    let mut a = gram(&w, &sw);
    let mut b = gram(&w, &nw);
    symmetrize(&mut a);
    symmetrize(&mut b);
    let lb = lower_cholesky(&b, "opca")?;
    let mut m = a.clone();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        lb.as_ref(),
        m.as_mut(),
        faer::Par::Seq,
    );
    let mut mt = m.transpose().to_owned();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        lb.as_ref(),
        mt.as_mut(),
        faer::Par::Seq,
    );
    symmetrize(&mut mt);
    let eig = mt
        .self_adjoint_eigen(Side::Lower)
        .map_err(|e| Error::invalid(format!("opca: small eigenproblem failed ({e:?})")))?;
    // ascending → take the last k, descending
    let u = eig.U();
    let vals: Vec<f64> = (0..l).rev().take(k).map(|i| eig.S()[i]).collect();
    let mut y = Mat::from_fn(l, k, |i, j| u[(i, l - 1 - j)]);
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        lb.as_ref().transpose(),
        y.as_mut(),
        faer::Par::Seq,
    );
    let dirs = w.view() * &y;
    Ok((dirs, vals, stats))
}

/// Canonical pairs found by [`canonical`].
#[derive(Debug, Clone)]
pub struct CanonicalPairs {
    /// `V_x × k` directions, `aᵀ (C_xx + r_x) a = 1`.
    pub a: Mat<f64>,
    /// `V_y × k` directions, `bᵀ (C_yy + r_y) b = 1`.
    pub b: Mat<f64>,
    /// Canonical correlations, descending.
    pub rho: Vec<f64>,
    /// How the solves went.
    pub stats: SolveStats,
}

/// The top `k` canonical pairs of the ridged covariances `C_xx + r_x I`,
/// `C_yy + r_y I` and cross-covariance `C_xy`.
pub fn canonical(
    x: &Covariance<'_>,
    y: &Covariance<'_>,
    (rx, ry): (f64, f64),
    k: usize,
    opts: &SubspaceOpts,
) -> Result<CanonicalPairs> {
    check_k(k, x.dim().min(y.dim()))?;
    let l = (k + opts.oversample).min(x.dim()).min(y.dim());
    let mut stats = SolveStats::default();
    // W_to ← orth((C_to + r)⁻¹ C_to,from W_from), started from the
    // solution's part in the side's previous subspace
    let side = |from: &Covariance<'_>,
                to: &Covariance<'_>,
                r: f64,
                w: &Block,
                prev: Option<&Block>,
                stats: &mut SolveStats|
     -> Result<Block> {
        let rhs = to.cross(from, w);
        let start = prev.and_then(|p| galerkin_start(to, r, p, &rhs));
        let m = Precond::jacobi(to, r);
        let (z, rep) = solve(to, r, &m, &rhs, start, opts.tol, opts.max_cg_iters);
        stats.add(rep);
        finite(&z, "cca")?;
        Ok(orth(&z))
    };
    let omega = Block::random(y.dim(), l, opts.seed);
    let mut wx = side(y, x, rx, &omega, None, &mut stats)?;
    let mut wy: Option<Block> = None;
    for _ in 0..opts.power_iters {
        let next = side(x, y, ry, &wx, wy.as_ref(), &mut stats)?;
        wx = side(y, x, rx, &next, Some(&wx), &mut stats)?;
        wy = Some(next);
    }
    let wy = side(x, y, ry, &wx, wy.as_ref(), &mut stats)?;
    // Rayleigh–Ritz on span(W_x) × span(W_y)
    let mut ax = gram(&wx, &x.apply(&wx, rx));
    let mut ay = gram(&wy, &y.apply(&wy, ry));
    symmetrize(&mut ax);
    symmetrize(&mut ay);
    let c = gram(&wx, &x.cross(y, &wy));
    let (lx, ly) = (lower_cholesky(&ax, "cca")?, lower_cholesky(&ay, "cca")?);
    // K = Lx⁻¹ C Ly⁻ᵀ
    let mut kx = c;
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        lx.as_ref(),
        kx.as_mut(),
        faer::Par::Seq,
    );
    let mut kt = kx.transpose().to_owned();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        ly.as_ref(),
        kt.as_mut(),
        faer::Par::Seq,
    );
    let svd = kt
        .transpose()
        .to_owned()
        .thin_svd()
        .map_err(|e| Error::invalid(format!("cca: small SVD did not converge ({e:?})")))?;
    let kk = k.min(l);
    let rho: Vec<f64> = (0..kk).map(|i| svd.S()[i]).collect();
    let mut ua = Mat::from_fn(l, kk, |i, j| svd.U()[(i, j)]);
    let mut vb = Mat::from_fn(l, kk, |i, j| svd.V()[(i, j)]);
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        lx.as_ref().transpose(),
        ua.as_mut(),
        faer::Par::Seq,
    );
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        ly.as_ref().transpose(),
        vb.as_mut(),
        faer::Par::Seq,
    );
    Ok(CanonicalPairs {
        a: wx.view() * &ua,
        b: wy.view() * &vb,
        rho,
        stats,
    })
}

/// A ridge `reg × mean diagonal`, raised to a floor that keeps the system
/// well posed (said through `warn`).
pub fn relative_ridge(reg: f64, mean_diag: f64, warn: &mut dyn FnMut(&str)) -> f64 {
    let r = reg * mean_diag;
    let floor = 1e-8 * mean_diag.max(1e-12);
    if r < floor {
        warn(&format!(
            "ridge {r:.3e} is too small for a well-posed system; using {floor:.3e}"
        ));
        floor
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sparse(rows: &[&[(u32, f32)]], cols: usize) -> CsrMatrix {
        let mut m = CsrMatrix::new(cols);
        for r in rows {
            m.push_row(r.iter().copied());
        }
        m
    }

    #[test]
    fn covariance_operator_matches_dense_definition() {
        let x = sparse(
            &[
                &[(0, 1.0), (2, 2.0)],
                &[(1, 3.0)],
                &[(0, -1.0), (1, 1.0), (2, 0.5)],
            ],
            3,
        );
        let c = Covariance::new(&x, true);
        let d = x.to_dense();
        let n = 3.0;
        let mu: Vec<f64> = (0..3)
            .map(|j| (0..3).map(|i| d[[i, j]] as f64).sum::<f64>() / n)
            .collect();
        let w = Block::random(3, 2, 7);
        let got = c.apply(&w, 0.5);
        for a in 0..3 {
            for col in 0..2 {
                let mut want = 0.5 * w.row(a)[col];
                for b in 0..3 {
                    let cab = (0..3)
                        .map(|i| d[[i, a]] as f64 * d[[i, b]] as f64)
                        .sum::<f64>()
                        / n
                        - mu[a] * mu[b];
                    want += cab * w.row(b)[col];
                }
                assert!((got.row(a)[col] - want).abs() < 1e-12, "{a},{col}");
            }
            let dd = (0..3).map(|i| (d[[i, a]] as f64).powi(2)).sum::<f64>() / n - mu[a] * mu[a];
            assert!((c.diag()[a] - dd).abs() < 1e-12);
        }
    }

    #[test]
    fn more_directions_than_terms_is_an_error_not_a_panic() {
        let x = sparse(&[&[(0, 1.0)], &[(1, 2.0)], &[(0, 1.0), (2, 1.0)]], 3);
        let c = Covariance::new(&x, true);
        let opts = SubspaceOpts {
            solver: Solver::Implicit,
            oversample: 2,
            power_iters: 1,
            seed: 1,
            tol: 1e-6,
            max_cg_iters: 10,
        };
        let e = generalised_eigen(&c, &c, 0.1, 4, &opts).unwrap_err();
        assert!(e.to_string().contains("4 directions"), "{e}");
        assert!(canonical(&c, &c, (0.1, 0.1), 0, &opts).is_err());
    }

    #[test]
    fn conjugate_gradients_solve_the_ridge_system() {
        let x = sparse(
            &[
                &[(0, 1.0), (2, 2.0)],
                &[(1, 3.0), (3, 1.0)],
                &[(0, -1.0), (1, 1.0), (2, 0.5)],
                &[(3, 2.0)],
            ],
            4,
        );
        let c = Covariance::new(&x, true);
        let b = Block::random(4, 3, 1);
        let (sol, rep) = solve(&c, 0.1, &Precond::jacobi(&c, 0.1), &b, None, 1e-12, 100);
        assert!(rep.residual <= 1e-12, "{rep:?}");
        let back = c.apply(&sol, 0.1);
        for (a, b) in back.data.iter().zip(&b.data) {
            assert!((a - b).abs() < 1e-9);
        }
    }

    /// Differences of aligned texts whose terms translate one to one (with
    /// noise): the noise covariance's largest off-diagonal entries pair a
    /// term with its translation, which Jacobi cannot see.
    fn paired_differences(n: usize, v: usize, seed: u64) -> CsrMatrix {
        use rand::Rng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut m = CsrMatrix::new(2 * v);
        for _ in 0..n {
            let mut row = Vec::new();
            for _ in 0..4 {
                let t = rng.random_range(0..v) as u32;
                let w: f32 = rng.random_range(0.5..1.5);
                let u = if rng.random_range(0.0..1.0) < 0.8 {
                    t
                } else {
                    rng.random_range(0..v) as u32
                };
                row.push((t, w));
                row.push((v as u32 + u, -w * rng.random_range(0.8..1.2)));
            }
            m.push_row(row);
        }
        m
    }

    #[test]
    fn pair_preconditioner_pairs_translations_and_cuts_iterations() {
        let v = 60;
        let d = paired_differences(600, v, 3);
        let c = Covariance::new(&d, false);
        let ridge = 0.01 * c.mean_diag();
        let pairs = Precond::blocks(&c, ridge, 2);
        // every coupled block is a source term and its translation
        assert!(pairs.coupled_terms() >= v, "{}", pairs.coupled_terms());
        for b in 0..pairs.ptr.len() - 1 {
            let m = &pairs.members[pairs.ptr[b]..pairs.ptr[b + 1]];
            assert!(m.len() <= 2);
            if m.len() == 2 {
                assert_eq!(m[0] as usize + v, m[1] as usize, "{m:?}");
            }
        }
        let b = Block::random(2 * v, 5, 9);
        let tol = 1e-10;
        let (_, jac) = solve(&c, ridge, &Precond::jacobi(&c, ridge), &b, None, tol, 1000);
        let (x, rep) = solve(&c, ridge, &pairs, &b, None, tol, 1000);
        assert!(
            jac.residual <= tol && rep.residual <= tol,
            "{jac:?} {rep:?}"
        );
        assert!(
            rep.iters * 4 < jac.iters * 3,
            "pairs {rep:?}, jacobi {jac:?}"
        );
        let back = c.apply(&x, ridge);
        let bn = b.col_dots(&b);
        let mut err = b.clone();
        err.data
            .iter_mut()
            .zip(&back.data)
            .for_each(|(e, a)| *e -= a);
        for (e, n) in err.col_dots(&err).iter().zip(&bn) {
            assert!((e / n).sqrt() < 1e-8, "{e} {n}");
        }
    }
}
