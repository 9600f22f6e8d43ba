//! What the linear projection models (CL-LSI, OPCA, CCA, S2Net, HDLR) share: a
//! projection matrix per language applied to log-tf·idf weighted,
//! row-normalised sparse term vectors, and the numerical kit they are fitted
//! with (seeded randomised SVD over implicit operators, dense Cholesky with a
//! ridge, triangular whitening, with faer). Checkpoint tensors of every
//! linear model: `proj.source` (V_s × k) and `proj.target` (V_t × k), f32.

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Mat, Par};
use ndarray::{Array2, Axis};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

use crate::models::Model;
use crate::models::{InitWeights, TrainData};
use crate::text::weight::{weigh, Weighting};
use crate::text::CsrMatrix;
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

/// Name of the source-side projection tensor in checkpoints.
pub const PROJ_SOURCE: &str = "proj.source";
/// Name of the target-side projection tensor in checkpoints.
pub const PROJ_TARGET: &str = "proj.target";

/// A trained linear projection model: `encode(x) = unit(Aᵀ w(x))` where
/// `w` is log-tf·idf with unit-length rows over the side's vocabulary.
#[derive(Debug, Clone)]
pub struct LinearModel {
    kind: &'static str,
    vocabs: Vocabs,
    /// `V_s × k` source projection.
    pub proj_source: Array2<f32>,
    /// `V_t × k` target projection.
    pub proj_target: Array2<f32>,
}

impl LinearModel {
    /// A model from its two projections; errors if their shapes do not fit
    /// the vocabularies, or a value is not finite.
    pub fn new(
        kind: &'static str,
        vocabs: Vocabs,
        proj_source: Array2<f32>,
        proj_target: Array2<f32>,
    ) -> Result<Self> {
        if proj_source.nrows() != vocabs.source.len() || proj_target.nrows() != vocabs.target.len()
        {
            return Err(Error::invalid(format!(
                "{kind}: projection shapes {:?} / {:?} do not fit vocabularies of {} / {} terms \
                 (a checkpoint from another workspace or vocabulary?)",
                proj_source.dim(),
                proj_target.dim(),
                vocabs.source.len(),
                vocabs.target.len()
            )));
        }
        if proj_source.ncols() != proj_target.ncols() || proj_source.ncols() == 0 {
            return Err(Error::invalid(format!(
                "{kind}: projections have {} and {} columns; both must have the same dim > 0",
                proj_source.ncols(),
                proj_target.ncols()
            )));
        }
        if !proj_source
            .iter()
            .chain(proj_target.iter())
            .all(|v| v.is_finite())
        {
            return Err(Error::invalid(format!(
                "{kind}: the fitted projection has non-finite values (NaN or infinity); \
                 try a larger ridge/reg or a smaller lr"
            )));
        }
        Ok(LinearModel {
            kind,
            vocabs,
            proj_source,
            proj_target,
        })
    }

    /// Rebuilds a model from checkpoint tensors (`proj.source`, `proj.target`).
    pub fn from_tensors(
        kind: &'static str,
        vocabs: &Vocabs,
        tensors: &HashMap<String, Tensor>,
    ) -> Result<Self> {
        let s = tensor_to_array(tensors, PROJ_SOURCE, kind)?;
        let t = tensor_to_array(tensors, PROJ_TARGET, kind)?;
        LinearModel::new(kind, vocabs.clone(), s, t)
    }

    /// The projection of `side`.
    pub fn proj(&self, side: Side) -> &Array2<f32> {
        match side {
            Side::Source => &self.proj_source,
            Side::Target => &self.proj_target,
        }
    }

    /// The vocabularies the model was trained with.
    pub fn vocabs(&self) -> &Vocabs {
        &self.vocabs
    }
}

fn tensor_to_array(
    tensors: &HashMap<String, Tensor>,
    name: &str,
    kind: &str,
) -> Result<Array2<f32>> {
    let t = tensors
        .get(name)
        .ok_or_else(|| Error::invalid(format!("{kind} checkpoint has no tensor `{name}`")))?;
    let (r, c) = t.dims2().map_err(|_| {
        Error::invalid(format!(
            "{kind} checkpoint tensor `{name}` has shape {:?}, expected a matrix",
            t.dims()
        ))
    })?;
    let v: Vec<f32> = t
        .to_dtype(candle_core::DType::F32)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1()?;
    Array2::from_shape_vec((r, c), v).map_err(|e| Error::invalid(e.to_string()))
}

/// A candle tensor (f32, CPU) of an ndarray matrix.
pub fn array_to_tensor(a: &Array2<f32>) -> Result<Tensor> {
    let v: Vec<f32> = a.iter().copied().collect();
    Ok(Tensor::from_vec(v, a.dim(), &Device::Cpu)?)
}

/// Scales every row to unit length; zero rows stay zero.
pub fn unit_rows(mut m: Array2<f32>) -> Array2<f32> {
    for mut r in m.axis_iter_mut(Axis(0)) {
        let n = r.dot(&r).sqrt();
        if n > 0.0 && n.is_finite() {
            r.mapv_inplace(|v| v / n);
        } else if !n.is_finite() {
            // the squares overflow (a row of huge values): scale by the
            // largest magnitude first; a row holding NaN or ±inf has no
            // direction and stays NaN, so evaluation ranks it last and the
            // runner calls the model diverged
            let top = r.iter().fold(0f32, |a, v| a.max(v.abs()));
            if top.is_finite() && top > 0.0 {
                r.mapv_inplace(|v| v / top);
                let n = r.dot(&r).sqrt();
                r.mapv_inplace(|v| v / n);
            } else {
                r.fill(f32::NAN);
            }
        }
    }
    m
}

/// The projections of a linear model's checkpoint handed as an `init=`
/// start (`proj.source`, `proj.target`), checked against this job's
/// vocabulary sizes and the wanted dimension `k`.
pub fn init_projections(
    init: &InitWeights,
    vocabs: &Vocabs,
    k: usize,
) -> Result<(Array2<f32>, Array2<f32>)> {
    let path = &init.checkpoint;
    let get = |name: &str, rows: usize, side: &str| -> Result<Array2<f32>> {
        if !init.tensors.contains_key(name) {
            return Err(Error::file(
                path,
                format!("init=: no `{name}` tensor: not a linear projection model"),
            ));
        }
        let a = tensor_to_array(&init.tensors, name, "init=")?;
        if a.dim() != (rows, k) {
            return Err(Error::file(
                path,
                format!(
                    "init=: `{name}` is {:?} but this workspace's {side} vocabulary and dim \
                     need ({rows}, {k}): another vocabulary/workspace, or set dim to match",
                    a.dim()
                ),
            ));
        }
        Ok(a)
    };
    Ok((
        get(PROJ_SOURCE, vocabs.source.len(), "source")?,
        get(PROJ_TARGET, vocabs.target.len(), "target")?,
    ))
}

/// Scales a projection so that its root mean square is `rms` (the random
/// init's): every cosine stays the same (each language's rows are normalised
/// on their own), and `lr` means the same for any starting model.
pub fn rescale(mut a: Array2<f32>, rms: f64) -> Array2<f32> {
    let cur = (a.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / a.len().max(1) as f64).sqrt();
    if cur > 0.0 && cur.is_finite() {
        let f = (rms / cur) as f32;
        a.mapv_inplace(|v| v * f);
    }
    a
}

/// The weighting every linear model uses: log-tf·idf, rows of unit length.
pub fn weighted(counts: &CsrMatrix, vocabs: &Vocabs, side: Side) -> CsrMatrix {
    weigh(counts, vocabs.side(side), Weighting::LogTfIdf, true)
}

impl Model for LinearModel {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn dim(&self) -> usize {
        self.proj_source.ncols()
    }

    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>> {
        let proj = self.proj(side);
        if counts.n_cols != proj.nrows() {
            return Err(Error::invalid(format!(
                "{}: texts counted over {} terms, the model's {:?} vocabulary has {}",
                self.kind,
                counts.n_cols,
                side,
                proj.nrows()
            )));
        }
        let w = weighted(counts, &self.vocabs, side);
        Ok(unit_rows(w.matmul_dense(proj)))
    }

    fn term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        Ok(unit_rows(self.proj(side).clone()))
    }

    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        Ok(vec![
            (PROJ_SOURCE.to_string(), array_to_tensor(&self.proj_source)?),
            (PROJ_TARGET.to_string(), array_to_tensor(&self.proj_target)?),
        ])
    }
}

/// The start every closed-form fit (CL-LSI, OPCA, CCA) shares: a note that
/// a resume fits again, the dimension and the model's own settings (read
/// by `own` from its typed `Config`, before unknown settings are refused),
/// the size check,
/// and both sides' training matrices weighted for the fit.
pub fn closed_form_input<T>(
    kind: &str,
    data: &TrainData,
    params: &crate::models::Params,
    resume: bool,
    hooks: &mut dyn crate::models::Hooks,
    own: impl FnOnce() -> Result<(usize, T)>,
) -> Result<(usize, T, CsrMatrix, CsrMatrix)> {
    if resume {
        hooks.log(&format!(
            "{kind}: a closed-form fit has no partial state to resume; fitting again (seeded, same result)"
        ));
    }
    let (k, settings) = own()?;
    params.check_unused()?;
    check_fit_sizes(kind, data, k)?;
    let xs = weighted(&data.train_src, &data.vocabs, Side::Source);
    let xt = weighted(&data.train_tgt, &data.vocabs, Side::Target);
    Ok((k, settings, xs, xt))
}

/// Workers faer splits a dense operation into (products, QR, SVD,
/// Cholesky, triangular solves): a number fixed here, never the thread
/// count, so that a closed-form fit gives the same result bit for bit
/// whatever `RAYON_NUM_THREADS` is (faer's default, `Par::rayon(0)`, splits
/// by the current pool's threads, and its sums' order with them).
pub const FAER_WORKERS: usize = 8;

/// faer's parallelism for the closed-form fits: [`FAER_WORKERS`] workers.
pub fn par() -> Par {
    Par::rayon(FAER_WORKERS)
}

/// Sets faer's global parallelism (what its operators, `qr`, `thin_svd`
/// and `llt` use) to [`par`], once per process: called by every
/// closed-form fit before it starts. Process-wide: other faer users of the
/// global setting get the same fixed split.
pub fn fix_parallelism() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| faer::set_global_parallelism(par()));
}

/// The eigensolver settings every closed-form model with a ridge (OPCA,
/// CCA, HDLR's OPCA start) reads: `solver`, `oversample`, `power_iters`,
/// `cg_tol`, `max_cg_iters`.
pub fn subspace_opts(
    solver: &str,
    oversample: usize,
    power_iters: usize,
    cg_tol: f64,
    max_cg_iters: usize,
    seed: u64,
) -> Result<crate::models::kit::implicit::SubspaceOpts> {
    fix_parallelism();
    Ok(crate::models::kit::implicit::SubspaceOpts {
        solver: crate::models::kit::implicit::Solver::parse(solver)?,
        oversample,
        power_iters,
        seed,
        tol: cg_tol,
        max_cg_iters,
    })
}

/// Runs a fit that reports warnings through a callback, logging each.
pub fn logging_warnings<T>(
    hooks: &mut dyn crate::models::Hooks,
    fit: impl FnOnce(&mut dyn FnMut(&str)) -> Result<T>,
) -> Result<T> {
    let mut warnings = Vec::new();
    let r = fit(&mut |m: &str| warnings.push(m.to_string()));
    for w in &warnings {
        hooks.log(&format!("warning: {w}"));
    }
    r
}

/// Checks that `k` directions can be fitted from `data`: a clear error for a
/// zero `k`, a vocabulary smaller than `k`, or fewer training pairs than `k`.
pub fn check_fit_sizes(kind: &str, data: &TrainData, k: usize) -> Result<()> {
    let n = data.train_src.n_rows();
    if data.train_tgt.n_rows() != n {
        return Err(Error::invalid(format!(
            "{kind}: {n} source but {} target training texts; pairs must be aligned",
            data.train_tgt.n_rows()
        )));
    }
    if k == 0 {
        return Err(Error::invalid(format!("{kind}: dim must be at least 1")));
    }
    let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
    if vs < k || vt < k {
        return Err(Error::invalid(format!(
            "{kind}: dim {k} is larger than a vocabulary ({vs} source, {vt} target terms); \
             lower dim (--dim or --set dim=) or use more data"
        )));
    }
    if n < k {
        return Err(Error::invalid(format!(
            "{kind}: {n} training pairs are fewer than dim {k}; lower dim (--dim or --set dim=) or add pairs"
        )));
    }
    if data.train_src.n_cols != vs || data.train_tgt.n_cols != vt {
        return Err(Error::invalid(format!(
            "{kind}: training matrices have {} / {} columns but the vocabularies {vs} / {vt}",
            data.train_src.n_cols, data.train_tgt.n_cols
        )));
    }
    Ok(())
}

/// Splits a joint `(V_s + V_t) × k` projection into its source and target parts.
pub fn split_joint(joint: &Mat<f64>, vs: usize) -> (Array2<f32>, Array2<f32>) {
    let k = joint.ncols();
    let vt = joint.nrows() - vs;
    let s = Array2::from_shape_fn((vs, k), |(i, j)| joint[(i, j)] as f32);
    let t = Array2::from_shape_fn((vt, k), |(i, j)| joint[(vs + i, j)] as f32);
    (s, t)
}

/// A faer copy of an ndarray matrix (f32 → f64).
pub fn to_faer(a: &Array2<f32>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[[i, j]] as f64)
}

/// An ndarray copy of a faer matrix (f64 → f32).
pub fn to_ndarray(m: &Mat<f64>) -> Array2<f32> {
    Array2::from_shape_fn((m.nrows(), m.ncols()), |(i, j)| m[(i, j)] as f32)
}

/// A CSR matrix with the rows of `a` in columns `0..a.n_cols` and those of
/// `b` (the same number of rows) after them: `[a | b]`.
pub fn hconcat(a: &CsrMatrix, b: &CsrMatrix) -> CsrMatrix {
    let off = a.n_cols as u32;
    let mut m = CsrMatrix::new(a.n_cols + b.n_cols);
    for i in 0..a.n_rows() {
        let (ca, va) = a.row(i);
        let (cb, vb) = b.row(i);
        m.indices.extend_from_slice(ca);
        m.values.extend_from_slice(va);
        m.indices.extend(cb.iter().map(|c| c + off));
        m.values.extend_from_slice(vb);
        m.indptr.push(m.indices.len());
    }
    m
}

/// A CSR matrix of `a`'s rows followed by `b`'s, in a joint column space:
/// `a`'s rows keep columns `0..a.n_cols`, `b`'s are shifted after them.
pub fn vstack_joint(a: &CsrMatrix, b: &CsrMatrix) -> CsrMatrix {
    let off = a.n_cols as u32;
    let mut m = CsrMatrix::new(a.n_cols + b.n_cols);
    for i in 0..a.n_rows() {
        let (c, v) = a.row(i);
        m.indices.extend_from_slice(c);
        m.values.extend_from_slice(v);
        m.indptr.push(m.indices.len());
    }
    for i in 0..b.n_rows() {
        let (c, v) = b.row(i);
        m.indices.extend(c.iter().map(|c| c + off));
        m.values.extend_from_slice(v);
        m.indptr.push(m.indices.len());
    }
    m
}

/// Column means of a CSR matrix.
pub fn col_means(m: &CsrMatrix) -> Vec<f64> {
    let mut mu = vec![0.0f64; m.n_cols];
    for (c, v) in m.indices.iter().zip(&m.values) {
        mu[*c as usize] += *v as f64;
    }
    let n = m.n_rows().max(1) as f64;
    mu.iter_mut().for_each(|x| *x /= n);
    mu
}

/// `m · x` for a sparse `m` and dense `x` (f64 in, f64 out; f32 products).
pub fn csr_mul(m: &CsrMatrix, x: &Mat<f64>) -> Mat<f64> {
    let xd = to_ndarray(x);
    to_faer(&m.matmul_dense(&xd))
}

/// `mᵀ · y` for a sparse `m` and dense `y`.
pub fn csr_t_mul(m: &CsrMatrix, y: &Mat<f64>) -> Mat<f64> {
    let yd = to_ndarray(y);
    to_faer(&m.t_matmul_dense(&yd))
}

/// A matrix given only by its products with dense blocks.
pub trait LinOp {
    /// Rows of the operator.
    fn nrows(&self) -> usize;
    /// Columns of the operator.
    fn ncols(&self) -> usize;
    /// `A · x` for an `ncols × l` block.
    fn apply(&self, x: &Mat<f64>) -> Mat<f64>;
    /// `Aᵀ · y` for an `nrows × l` block.
    fn apply_t(&self, y: &Mat<f64>) -> Mat<f64>;
}

/// A sparse matrix as an operator.
pub struct CsrOp<'a>(pub &'a CsrMatrix);

impl LinOp for CsrOp<'_> {
    fn nrows(&self) -> usize {
        self.0.n_rows()
    }
    fn ncols(&self) -> usize {
        self.0.n_cols
    }
    fn apply(&self, x: &Mat<f64>) -> Mat<f64> {
        csr_mul(self.0, x)
    }
    fn apply_t(&self, y: &Mat<f64>) -> Mat<f64> {
        csr_t_mul(self.0, y)
    }
}

/// A truncated SVD `A ≈ U diag(s) Vᵀ`.
#[derive(Debug, Clone)]
pub struct Svd {
    /// Left singular vectors, `nrows × k`.
    pub u: Mat<f64>,
    /// Singular values, descending.
    pub s: Vec<f64>,
    /// Right singular vectors, `ncols × k`.
    pub v: Mat<f64>,
}

fn orth(m: &Mat<f64>) -> Mat<f64> {
    m.qr().compute_thin_Q()
}

/// Top-`k` singular triplets of `op` by randomised subspace iteration
/// (Halko et al. 2011, Alg. 4.4): a seeded Gaussian sketch of `k + oversample`
/// columns, `iters` power iterations with re-orthonormalisation (thin QR), then
/// a small dense SVD (faer). Memory is `O((nrows + ncols)·(k + oversample))`.
pub fn randomized_svd(
    op: &dyn LinOp,
    k: usize,
    oversample: usize,
    iters: usize,
    seed: u64,
) -> Result<Svd> {
    let (m, n) = (op.nrows(), op.ncols());
    if k == 0 || k > m.min(n) {
        return Err(Error::invalid(format!(
            "cannot take {k} singular vectors of a {m} × {n} matrix"
        )));
    }
    fix_parallelism();
    let l = (k + oversample).min(m.min(n));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let omega = Mat::from_fn(n, l, |_, _| StandardNormal.sample(&mut rng));
    let mut q = orth(&op.apply(&omega));
    for _ in 0..iters {
        let z = orth(&op.apply_t(&q));
        q = orth(&op.apply(&z));
    }
    let bt = op.apply_t(&q); // n × l = (Qᵀ A)ᵀ
    if !bt.col_iter().all(|c| c.iter().all(|v| v.is_finite())) {
        return Err(Error::invalid(
            "non-finite values in the matrix to factorise".to_string(),
        ));
    }
    let svd = bt
        .thin_svd()
        .map_err(|e| Error::invalid(format!("dense SVD did not converge: {e:?}")))?;
    // Bᵀ = Ub S Vbᵀ  →  A ≈ Q B = (Q Vb) S Ubᵀ
    let u_full = &q * svd.V();
    let s: Vec<f64> = (0..k).map(|i| svd.S()[i]).collect();
    let u = Mat::from_fn(m, k, |i, j| u_full[(i, j)]);
    let v = Mat::from_fn(n, k, |i, j| svd.U()[(i, j)]);
    Ok(Svd { u, s, v })
}

/// Numerical rank test: errors when the `k`-th singular value is negligible
/// against the first (the data do not span `k` directions).
pub fn check_rank(kind: &str, s: &[f64], k: usize) -> Result<()> {
    let top = s.first().copied().unwrap_or(0.0);
    let last = s.get(k - 1).copied().unwrap_or(0.0);
    if top.is_nan() || top <= 0.0 || last.is_nan() || last <= top * 1e-7 {
        let rank = s.iter().filter(|x| **x > top * 1e-7).count();
        return Err(Error::invalid(format!(
            "{kind}: the training data span only {rank} directions, fewer than dim {k} \
             (rank-deficient matrix); lower dim (--dim or --set dim=) or add varied training texts"
        )));
    }
    Ok(())
}

/// A dense symmetric matrix's lower Cholesky factor, in place. Adds `ridge`
/// to the diagonal first; when the factorisation still fails, multiplies the
/// ridge by ten (up to six times) and says so through `warn`. Returns the
/// ridge finally used.
pub fn cholesky_with_ridge(
    a: &mut Mat<f64>,
    mut ridge: f64,
    mean_diag: f64,
    warn: &mut dyn FnMut(&str),
) -> Result<f64> {
    let n = a.nrows();
    let floor = 1e-8 * mean_diag.max(1e-12);
    if ridge < floor {
        warn(&format!(
            "ridge {ridge:.3e} is too small for a safe Cholesky factor; using {floor:.3e}"
        ));
        ridge = floor;
    }
    let diag: Vec<f64> = (0..n).map(|i| a[(i, i)]).collect();
    for attempt in 0..7 {
        for (i, d) in diag.iter().enumerate() {
            a[(i, i)] = d + ridge;
        }
        // restore the lower triangle from the upper one (an earlier failed
        // attempt overwrote part of it)
        if attempt > 0 {
            for j in 0..n {
                for i in j + 1..n {
                    a[(i, j)] = a[(j, i)];
                }
            }
        }
        let par = par();
        let mut mem = faer::dyn_stack::MemBuffer::new(
            faer::linalg::cholesky::llt::factor::cholesky_in_place_scratch::<f64>(
                n,
                par,
                Default::default(),
            ),
        );
        let stack = faer::dyn_stack::MemStack::new(&mut mem);
        let ok = faer::linalg::cholesky::llt::factor::cholesky_in_place(
            a.as_mut(),
            Default::default(),
            par,
            stack,
            Default::default(),
        )
        .is_ok();
        if ok && (0..n).all(|i| a[(i, i)].is_finite() && a[(i, i)] > 0.0) {
            return Ok(ridge);
        }
        let next = ridge * 10.0;
        warn(&format!(
            "matrix not positive definite with ridge {ridge:.3e}; retrying with {next:.3e}"
        ));
        ridge = next;
    }
    Err(Error::invalid(
        "covariance matrix stays singular even with a large ridge; the training data \
         are degenerate"
            .to_string(),
    ))
}

/// `L⁻¹ x` for the lower factor `l` (stored in the lower triangle).
pub fn solve_lower(l: &Mat<f64>, mut x: Mat<f64>) -> Mat<f64> {
    solve_lower_triangular_in_place(l.as_ref(), x.as_mut(), par());
    x
}

/// `L⁻ᵀ x` for the lower factor `l` (stored in the lower triangle).
pub fn solve_lower_t(l: &Mat<f64>, mut x: Mat<f64>) -> Mat<f64> {
    solve_upper_triangular_in_place(l.as_ref().transpose(), x.as_mut(), par());
    x
}

/// Adds `scale · Σ_rows d dᵀ` of the rows of `m` to the dense `acc`
/// (upper triangle and diagonal only; call [`symmetrize_from_upper`] after).
pub fn add_outer_products(acc: &mut Mat<f64>, m: &CsrMatrix, scale: f64) {
    for i in 0..m.n_rows() {
        let (c, v) = m.row(i);
        for (a, (ca, va)) in c.iter().zip(v).enumerate() {
            let x = *va as f64 * scale;
            for (cb, vb) in c[a..].iter().zip(&v[a..]) {
                let (r, col) = if ca <= cb { (*ca, *cb) } else { (*cb, *ca) };
                acc[(r as usize, col as usize)] += x * *vb as f64;
            }
        }
    }
}

/// Copies the upper triangle of a square matrix onto its lower one.
pub fn symmetrize_from_upper(a: &mut Mat<f64>) {
    let n = a.nrows();
    for j in 0..n {
        for i in j + 1..n {
            a[(i, j)] = a[(j, i)];
        }
    }
}

/// Mean of the diagonal of a square matrix.
pub fn mean_diag(a: &Mat<f64>) -> f64 {
    let n = a.nrows().max(1);
    (0..a.nrows()).map(|i| a[(i, i)]).sum::<f64>() / n as f64
}
