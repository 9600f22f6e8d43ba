//! Regularised canonical correlation analysis between the two languages'
//! term vectors of the training pairs (log-tf·idf, unit rows): the top-`k`
//! canonical pairs of `C_xy` against the ridged `C_xx`, `C_yy`. The default
//! solver is matrix-free (`models::implicit`: memory linear in the
//! vocabularies); `solver=dense` whitens with dense Cholesky factors of the
//! covariances (memory `V_s² + V_t²`) and takes a randomised SVD of
//! `L_x⁻¹ C_xy L_y⁻ᵀ`. Paper, cost and notes: `docs/models.md`.

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use faer::Mat;
use ndarray::Array2;

use crate::models::implicit::{self, Covariance, Solver, SubspaceOpts};
use crate::models::linear::{
    add_outer_products, check_rank, cholesky_with_ridge, closed_form_input, col_means, csr_mul,
    csr_t_mul, logging_warnings, mean_diag, randomized_svd, solve_lower, solve_lower_t,
    subspace_opts, symmetrize_from_upper, to_ndarray, LinOp, LinearModel,
};
use crate::models::{Hooks, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::CsrMatrix;
use crate::text::Vocabs;
use crate::{Error, Result};

/// The registry name.
pub const KIND: &str = "cca";

/// A fitted CCA model.
#[derive(Debug, Clone)]
pub struct CcaFit {
    /// `V_s × k` canonical directions of the source language.
    pub source: Array2<f32>,
    /// `V_t × k` canonical directions of the target language.
    pub target: Array2<f32>,
    /// The `k` largest canonical correlations, descending.
    pub correlations: Vec<f64>,
    /// Absolute ridges added to `C_xx` and `C_yy`.
    pub ridges: (f64, f64),
    /// Conjugate-gradient iterations the implicit solver took (0: dense).
    pub cg_iters: usize,
}

/// Dense `(1/n) Xᵀ X − μ μᵀ`, both triangles.
fn covariance(x: &CsrMatrix, mu: &[f64]) -> Mat<f64> {
    let v = x.n_cols;
    let mut c = Mat::<f64>::zeros(v, v);
    add_outer_products(&mut c, x, 1.0 / x.n_rows().max(1) as f64);
    for j in 0..v {
        if mu[j] == 0.0 {
            continue;
        }
        for i in 0..=j {
            c[(i, j)] -= mu[i] * mu[j];
        }
    }
    symmetrize_from_upper(&mut c);
    c
}

struct Whitened<'a> {
    xs: &'a CsrMatrix,
    xt: &'a CsrMatrix,
    mus: Mat<f64>,
    mut_: Mat<f64>,
    lx: &'a Mat<f64>,
    ly: &'a Mat<f64>,
}

impl Whitened<'_> {
    /// `C_ab w = (1/n) Aᵀ (B w) − μ_a (μ_bᵀ w)`.
    fn cross(
        a: &CsrMatrix,
        b: &CsrMatrix,
        mua: &Mat<f64>,
        mub: &Mat<f64>,
        w: &Mat<f64>,
    ) -> Mat<f64> {
        let n = a.n_rows().max(1) as f64;
        let mut out = csr_t_mul(a, &csr_mul(b, w));
        out *= faer::Scale(1.0 / n);
        out - mua * (mub.transpose() * w)
    }
}

impl LinOp for Whitened<'_> {
    fn nrows(&self) -> usize {
        self.lx.nrows()
    }
    fn ncols(&self) -> usize {
        self.ly.nrows()
    }
    fn apply(&self, x: &Mat<f64>) -> Mat<f64> {
        let w = solve_lower_t(self.ly, x.clone());
        solve_lower(
            self.lx,
            Self::cross(self.xs, self.xt, &self.mus, &self.mut_, &w),
        )
    }
    fn apply_t(&self, y: &Mat<f64>) -> Mat<f64> {
        let w = solve_lower_t(self.lx, y.clone());
        solve_lower(
            self.ly,
            Self::cross(self.xt, self.xs, &self.mut_, &self.mus, &w),
        )
    }
}

/// Regularised CCA of weighted aligned matrices; `reg` is relative to each
/// covariance's mean diagonal. Warnings (ridge growth) go to `warn`. Errors
/// when the data do not span `k` directions.
pub fn fit(
    src: &CsrMatrix,
    tgt: &CsrMatrix,
    k: usize,
    reg: f64,
    opts: &SubspaceOpts,
    warn: &mut dyn FnMut(&str),
) -> Result<CcaFit> {
    fit_with(src, tgt, k, reg, opts, true, warn)
}

/// [`fit`], but with data that span fewer than `k` directions the fit keeps
/// the directions they span (its `correlations` say how many), and says so
/// through `warn`.
pub fn fit_up_to(
    src: &CsrMatrix,
    tgt: &CsrMatrix,
    k: usize,
    reg: f64,
    opts: &SubspaceOpts,
    warn: &mut dyn FnMut(&str),
) -> Result<CcaFit> {
    fit_with(src, tgt, k, reg, opts, false, warn)
}

fn no_variance() -> Error {
    Error::invalid(
        "cca: a language's training texts have no variance (no terms, or all alike)".to_string(),
    )
}

fn fit_with(
    src: &CsrMatrix,
    tgt: &CsrMatrix,
    k: usize,
    reg: f64,
    opts: &SubspaceOpts,
    strict: bool,
    warn: &mut dyn FnMut(&str),
) -> Result<CcaFit> {
    if !(reg.is_finite() && reg >= 0.0) {
        return Err(Error::invalid(format!(
            "cca: reg must be a finite number ≥ 0, got {reg}"
        )));
    }
    let mut f = match opts.solver {
        Solver::Dense => fit_dense(src, tgt, k, reg, opts, warn)?,
        Solver::Implicit => fit_implicit(src, tgt, k, reg, opts, warn)?,
    };
    if strict {
        check_rank(KIND, &f.correlations, k)?;
    } else {
        let top = f.correlations.first().copied().unwrap_or(0.0);
        let rank = f.correlations.iter().filter(|&&x| x > top * 1e-7).count();
        if rank == 0 {
            check_rank(KIND, &f.correlations, k)?;
        }
        if rank < k {
            warn(&format!(
                "the data span only {rank} of the {k} directions asked: keeping {rank}"
            ));
            f.correlations.truncate(rank);
            f.source = f.source.slice(ndarray::s![.., ..rank]).to_owned();
            f.target = f.target.slice(ndarray::s![.., ..rank]).to_owned();
        }
    }
    Ok(f)
}

/// Matrix-free: covariance operators, conjugate gradients, subspace
/// iteration (`models::implicit`); memory linear in the vocabularies.
fn fit_implicit(
    src: &CsrMatrix,
    tgt: &CsrMatrix,
    k: usize,
    reg: f64,
    opts: &SubspaceOpts,
    warn: &mut dyn FnMut(&str),
) -> Result<CcaFit> {
    let (cx, cy) = (Covariance::new(src, true), Covariance::new(tgt, true));
    let (mdx, mdy) = (cx.mean_diag(), cy.mean_diag());
    if mdx.is_nan() || mdx <= 0.0 || mdy.is_nan() || mdy <= 0.0 {
        return Err(no_variance());
    }
    let rx = implicit::relative_ridge(reg, mdx, warn);
    let ry = implicit::relative_ridge(reg, mdy, warn);
    let pairs = implicit::canonical(&cx, &cy, (rx, ry), k, opts)?;
    let stats = &pairs.stats;
    stats.warn_unconverged(opts, warn);
    Ok(CcaFit {
        source: to_ndarray(&pairs.a),
        target: to_ndarray(&pairs.b),
        ridges: (rx, ry),
        cg_iters: stats.cg_iters,
        correlations: pairs.rho,
    })
}

/// Dense covariances, Cholesky whitening, randomised SVD of the whitened
/// cross-covariance (memory `V_s² + V_t²`).
fn fit_dense(
    src: &CsrMatrix,
    tgt: &CsrMatrix,
    k: usize,
    reg: f64,
    opts: &SubspaceOpts,
    warn: &mut dyn FnMut(&str),
) -> Result<CcaFit> {
    let (mus, mut_) = (col_means(src), col_means(tgt));
    let mut cxx = covariance(src, &mus);
    let mdx = mean_diag(&cxx);
    let mut cyy = covariance(tgt, &mut_);
    let mdy = mean_diag(&cyy);
    if mdx.is_nan() || mdx <= 0.0 || mdy.is_nan() || mdy <= 0.0 {
        return Err(no_variance());
    }
    let rx = cholesky_with_ridge(&mut cxx, reg * mdx, mdx, warn)?;
    let ry = cholesky_with_ridge(&mut cyy, reg * mdy, mdy, warn)?;
    let op = Whitened {
        xs: src,
        xt: tgt,
        mus: Mat::from_fn(mus.len(), 1, |i, _| mus[i]),
        mut_: Mat::from_fn(mut_.len(), 1, |i, _| mut_[i]),
        lx: &cxx,
        ly: &cyy,
    };
    let svd = randomized_svd(&op, k, opts.oversample, opts.power_iters, opts.seed)?;
    let a = solve_lower_t(&cxx, svd.u);
    let b = solve_lower_t(&cyy, svd.v);
    Ok(CcaFit {
        source: to_ndarray(&a),
        target: to_ndarray(&b),
        correlations: svd.s,
        ridges: (rx, ry),
        cg_iters: 0,
    })
}

/// Trains and reloads CCA models.
#[derive(Debug, Clone, Copy, Default)]
pub struct CcaTrainer;

/// The fit's own settings (`dim` apart): `reg` and the eigensolver's.
fn settings(
    p: &crate::models::ModelParams<'_>,
    seed: u64,
) -> Result<(f64, crate::models::implicit::SubspaceOpts)> {
    Ok((p.get("reg")?, subspace_opts(p, seed)?))
}

impl Trainer for CcaTrainer {
    /// Reads the settings before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        crate::models::linear::closed_form_settings(KIND, params, |p| settings(p, 0)).map(|_| ())
    }

    fn plan(&self, data: &TrainData, _params: &Params) -> Result<Vec<Phase>> {
        Ok(vec![Phase::closed_form(data.train_src.n_rows())])
    }

    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        _device: &Device,
        seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> Result<Box<dyn Model>> {
        let (k, (reg, opts), xs, xt) =
            closed_form_input(KIND, data, params, resume.is_some(), hooks, |p| {
                settings(p, seed)
            })?;
        let t0 = std::time::Instant::now();
        let f = logging_warnings(hooks, |warn| fit(&xs, &xt, k, reg, &opts, warn))?;
        hooks.log(&format!(
            "cca: fitted in {:.1}s ({}); canonical correlations {:.4} .. {:.4}",
            t0.elapsed().as_secs_f64(),
            implicit::describe(opts.solver, f.cg_iters),
            f.correlations[0],
            f.correlations[k - 1]
        ));
        let model = LinearModel::new(KIND, data.vocabs.clone(), f.source, f.target)?;
        hooks.epoch_end("train", 1, &model, Vec::new())?;
        Ok(Box::new(model))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        _params: &Params,
        _device: &Device,
    ) -> Result<Box<dyn Model>> {
        Ok(Box::new(LinearModel::from_tensors(KIND, vocabs, &tensors)?))
    }
}
