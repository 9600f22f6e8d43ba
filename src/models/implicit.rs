//! Matrix-free solvers for the closed-form linear models (OPCA, CCA): no
//! `V × V` matrix is ever formed. Covariances are operators applied through
//! the sparse training matrices (`C w = (1/n) Xᵀ(X w) − μ (μᵀ w) + r w`),
//! ridge systems are solved by block conjugate gradients with a Jacobi
//! preconditioner, and the top generalised eigenpairs come from subspace
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

    /// Per-column dot products `Σ_i a[i,c] b[i,c]`.
    fn col_dots(&self, other: &Block) -> Vec<f64> {
        let l = self.cols;
        self.data
            .par_chunks(l * 1024)
            .zip(other.data.par_chunks(l * 1024))
            .map(|(a, b)| {
                let mut acc = vec![0.0; l];
                for (ra, rb) in a.chunks(l).zip(b.chunks(l)) {
                    for c in 0..l {
                        acc[c] += ra[c] * rb[c];
                    }
                }
                acc
            })
            .reduce(
                || vec![0.0; l],
                |mut x, y| {
                    x.iter_mut().zip(&y).for_each(|(a, b)| *a += b);
                    x
                },
            )
    }

    fn all_finite(&self) -> bool {
        self.data.iter().all(|v| v.is_finite())
    }
}

/// `Aᵀ (B W)` for sparse `A` (`n × V_a`) and `B` (`n × V_b`) with the same
/// rows and a `V_b × l` block, row by row: each row's `b_iᵀ W` (a gather)
/// is scattered into `a_i`'s terms. No `n × l` intermediate; each worker
/// sums into its own `V_a × l` block (cache-resident for moderate `V`),
/// and the blocks are added at the end.
fn rows_gram(a: &CsrMatrix, b: &CsrMatrix, w: &Block) -> Block {
    let (n, l) = (a.n_rows(), w.cols);
    let parts = rayon::current_num_threads().clamp(1, n.max(1));
    let bounds: Vec<(usize, usize)> = (0..parts)
        .map(|p| (p * n / parts, (p + 1) * n / parts))
        .collect();
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
    let mut iter = partials.into_iter();
    let mut data = iter.next().unwrap_or_else(|| vec![0.0; a.n_cols * l]);
    for part in iter {
        data.par_chunks_mut(4096)
            .zip(part.par_chunks(4096))
            .for_each(|(d, p)| d.iter_mut().zip(p).for_each(|(d, p)| *d += p));
    }
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

/// How a block of conjugate-gradient solves went.
#[derive(Debug, Clone, Copy, Default)]
pub struct CgReport {
    /// Iterations taken (the slowest column's).
    pub iters: usize,
    /// Largest relative residual `‖b − A x‖ / ‖b‖` at the end.
    pub residual: f64,
}

/// Solves `(C + ridge I) X = B` column by column (each with its own step
/// sizes) by conjugate gradients preconditioned with `C`'s diagonal, until
/// every column's relative residual is below `tol` or `max_iters` pass.
/// `start` is an initial guess `X₀` with `(C + ridge I) X₀` (zero if none).
pub fn solve(
    c: &Covariance<'_>,
    ridge: f64,
    b: &Block,
    start: Option<(Block, Block)>,
    tol: f64,
    max_iters: usize,
) -> (Block, CgReport) {
    let l = b.cols.max(1);
    let inv_diag: Vec<f64> = c.diag.iter().map(|d| 1.0 / (d + ridge)).collect();
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
    // p = z = M⁻¹ r; sums of r·r and r·z per column
    let mut p = r.clone();
    let (mut rr, mut rz) = (vec![0.0; b.cols], vec![0.0; b.cols]);
    fused_rows(&mut p, &r, &inv_diag, |p, r, d, acc| {
        for c in 0..p.len() {
            p[c] = r[c] * d;
            acc[0][c] += r[c] * r[c];
            acc[1][c] += r[c] * p[c];
        }
    })
    .into_iter()
    .zip([&mut rr, &mut rz])
    .for_each(|(a, out)| *out = a);
    let residual = |rr: &[f64]| {
        rr.iter()
            .zip(&bnorm)
            .map(|(rr, bn)| if *bn > 0.0 { rr.sqrt() / bn } else { 0.0 })
            .fold(0.0f64, f64::max)
    };
    let mut report = CgReport {
        iters: 0,
        residual: residual(&rr),
    };
    while report.residual > tol && report.iters < max_iters {
        let ap = c.apply(&p, ridge);
        let pap = p.col_dots(&ap);
        let alpha: Vec<f64> = rz
            .iter()
            .zip(&pap)
            .map(|(a, b)| if *b > 0.0 { a / b } else { 0.0 })
            .collect();
        // x += α p; r −= α Ap; sums of r·r and r·M⁻¹r, in one pass
        let sums: Vec<Vec<f64>> = x
            .data
            .par_chunks_mut(l)
            .zip(r.data.par_chunks_mut(l))
            .zip(p.data.par_chunks(l).zip(ap.data.par_chunks(l)))
            .zip(inv_diag.par_iter())
            .fold(
                || vec![vec![0.0; l]; 2],
                |mut acc, (((x, r), (p, ap)), d)| {
                    for c in 0..x.len() {
                        x[c] += alpha[c] * p[c];
                        r[c] -= alpha[c] * ap[c];
                        acc[0][c] += r[c] * r[c];
                        acc[1][c] += r[c] * r[c] * d;
                    }
                    acc
                },
            )
            .reduce(|| vec![vec![0.0; l]; 2], add_sums);
        report.iters += 1;
        report.residual = residual(&sums[0]);
        if report.residual <= tol {
            break;
        }
        let beta: Vec<f64> = sums[1]
            .iter()
            .zip(&rz)
            .map(|(a, b)| if *b > 0.0 { a / b } else { 0.0 })
            .collect();
        // p = M⁻¹ r + β p
        p.data
            .par_chunks_mut(l)
            .zip(r.data.par_chunks(l))
            .zip(inv_diag.par_iter())
            .for_each(|((p, r), d)| {
                for c in 0..p.len() {
                    p[c] = r[c] * d + beta[c] * p[c];
                }
            });
        rz = sums[1].clone();
    }
    (x, report)
}

fn add_sums(mut a: Vec<Vec<f64>>, b: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    for (a, b) in a.iter_mut().zip(b) {
        a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
    }
    a
}

/// Runs `f(out_row, in_row, inv_diag_i, sums)` over the rows of two blocks
/// in parallel; returns the two per-column sums it accumulates.
fn fused_rows(
    out: &mut Block,
    inp: &Block,
    inv_diag: &[f64],
    f: impl Fn(&mut [f64], &[f64], f64, &mut [Vec<f64>]) + Sync,
) -> Vec<Vec<f64>> {
    let l = out.cols.max(1);
    out.data
        .par_chunks_mut(l)
        .zip(inp.data.par_chunks(l))
        .zip(inv_diag.par_iter())
        .fold(
            || vec![vec![0.0; l]; 2],
            |mut acc, ((o, i), d)| {
                f(o, i, *d, &mut acc);
                acc
            },
        )
        .reduce(|| vec![vec![0.0; l]; 2], add_sums)
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
    // W ← orth((N + r)⁻¹ S W), started from the solution's part in span(W)
    let step = |w: &Block, guess: bool, stats: &mut SolveStats| -> Result<Block> {
        let rhs = s.apply(w, 0.0);
        let start = if guess {
            galerkin_start(n, ridge, w, &rhs)
        } else {
            None
        };
        let (x, rep) = solve(n, ridge, &rhs, start, opts.tol, opts.max_cg_iters);
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
        let (z, rep) = solve(to, r, &rhs, start, opts.tol, opts.max_cg_iters);
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
        let (sol, rep) = solve(&c, 0.1, &b, None, 1e-12, 100);
        assert!(rep.residual <= 1e-12, "{rep:?}");
        let back = c.apply(&sol, 0.1);
        for (a, b) in back.data.iter().zip(&b.data) {
            assert!((a - b).abs() < 1e-9);
        }
    }
}
