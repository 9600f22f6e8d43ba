//! Oriented principal component analysis: the generalised eigenproblem
//! `S v = λ N v` in the joint term space of both languages (`S` the covariance
//! of all training texts, `N` the second moment of the pairs' differences plus
//! a relative ridge). The default solver is matrix-free (`models::implicit`:
//! memory linear in the vocabulary); `solver=dense` takes a dense Cholesky
//! factor of `N` (memory quadratic in the vocabulary; a factor that fails gets
//! a growing ridge, logged) and a randomised subspace iteration that applies
//! `S` through the sparse data. Paper, cost and notes: `docs/models.md`.

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use faer::Mat;

use crate::models::kit::implicit::{self, Covariance, Solver, SubspaceOpts};
use crate::models::kit::linear::{
    add_outer_products, check_rank, cholesky_with_ridge, closed_form_input, col_means, csr_mul,
    csr_t_mul, hconcat, logging_warnings, mean_diag, randomized_svd, solve_lower, solve_lower_t,
    split_joint, subspace_opts, vstack_joint, LinOp, LinearModel,
};
use crate::models::settings::ModelDef;
use crate::models::settings::{
    boxed, model_config, s, Check, ModelConfig, Settings, CG_TOL, DIM, MAX_CG_ITERS, OVERSAMPLE,
    POWER_ITERS_6, SOLVER,
};
use crate::models::{Hooks, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::CsrMatrix;
use crate::text::Vocabs;
use crate::{Error, Result};

/// The registry name.
pub const KIND: &str = "opca";

/// A fitted OPCA model.
#[derive(Debug, Clone)]
pub struct OpcaFit {
    /// `(V_s + V_t) × k` generalised eigenvectors, `vᵀ (N + ridge I) v = 1`.
    pub joint: Mat<f64>,
    /// The `k` largest generalised eigenvalues, descending.
    pub eigenvalues: Vec<f64>,
    /// The absolute ridge added to `N`'s diagonal.
    pub ridge: f64,
    /// Conjugate-gradient iterations the implicit solver took (0: dense).
    pub cg_iters: usize,
}

/// `M = L⁻¹ S L⁻ᵀ`, with `S u = (1/m) Xᵀ X u − μ μᵀ u`.
struct Whitened<'a> {
    x: &'a CsrMatrix,
    mu: Mat<f64>,
    l: &'a Mat<f64>,
}

impl Whitened<'_> {
    fn s_apply(&self, y: &Mat<f64>) -> Mat<f64> {
        let m = self.x.n_rows() as f64;
        let xy = csr_mul(self.x, y);
        let mut out = csr_t_mul(self.x, &xy);
        out *= faer::Scale(1.0 / m);
        let mty = self.mu.transpose() * y; // 1 × l
        out - &self.mu * mty
    }
}

impl LinOp for Whitened<'_> {
    fn nrows(&self) -> usize {
        self.l.nrows()
    }
    fn ncols(&self) -> usize {
        self.l.nrows()
    }
    fn apply(&self, x: &Mat<f64>) -> Mat<f64> {
        let y = solve_lower_t(self.l, x.clone());
        solve_lower(self.l, self.s_apply(&y))
    }
    fn apply_t(&self, y: &Mat<f64>) -> Mat<f64> {
        self.apply(y)
    }
}

/// OPCA of weighted aligned matrices (`src`, `tgt` rows are parallel texts).
/// `ridge` is relative to the mean diagonal of `N`; warnings go to `warn`.
pub fn fit(
    src: &CsrMatrix,
    tgt: &CsrMatrix,
    k: usize,
    ridge: f64,
    opts: &SubspaceOpts,
    warn: &mut dyn FnMut(&str),
) -> Result<OpcaFit> {
    let n = src.n_rows();
    let v = src.n_cols + tgt.n_cols;
    if !(ridge.is_finite() && ridge >= 0.0) {
        return Err(Error::invalid(format!(
            "opca: ridge must be a finite number ≥ 0, got {ridge}"
        )));
    }
    // noise: differences of the pairs
    let mut neg = tgt.clone();
    neg.values.iter_mut().for_each(|x| *x = -*x);
    let diffs = hconcat(src, &neg);
    // signal: all texts of both languages in the joint space
    let x = vstack_joint(src, tgt);
    let fit = match opts.solver {
        Solver::Dense => fit_dense(&diffs, &x, n, k, ridge, opts, warn)?,
        Solver::Implicit => {
            let noise = Covariance::new(&diffs, false);
            let md = noise.mean_diag();
            let unseen = noise.diag().iter().filter(|d| **d <= 0.0).count();
            check_noise(md, n, v, unseen, ridge, warn)?;
            let abs_ridge = implicit::relative_ridge(ridge, md, warn);
            let signal = Covariance::new(&x, true);
            let (joint, eigenvalues, stats) =
                implicit::generalised_eigen(&signal, &noise, abs_ridge, k, opts)?;
            stats.warn_unconverged(opts, warn);
            OpcaFit {
                joint,
                eigenvalues,
                ridge: abs_ridge,
                cg_iters: stats.cg_iters,
            }
        }
    };
    check_rank(KIND, &fit.eigenvalues, k)?;
    Ok(fit)
}

/// Refuses a noise covariance without terms; warns when it is singular.
fn check_noise(
    md: f64,
    n: usize,
    v: usize,
    unseen: usize,
    ridge: f64,
    warn: &mut dyn FnMut(&str),
) -> Result<()> {
    if md.is_nan() || md <= 0.0 {
        return Err(Error::invalid(
            "opca: the training pairs have no terms (all differences are zero)".to_string(),
        ));
    }
    if n < v || unseen > 0 {
        warn(&format!(
            "opca: noise covariance N is singular ({n} pairs for {v} terms, {unseen} terms \
             never seen): adding ridge {:.3e} (= {ridge} × mean diagonal)",
            ridge * md
        ));
    }
    Ok(())
}

/// Dense `N`, its Cholesky factor, randomised SVD of `L⁻¹ S L⁻ᵀ` (memory `V²`).
fn fit_dense(
    diffs: &CsrMatrix,
    x: &CsrMatrix,
    n: usize,
    k: usize,
    ridge: f64,
    opts: &SubspaceOpts,
    warn: &mut dyn FnMut(&str),
) -> Result<OpcaFit> {
    let v = diffs.n_cols;
    let mut nm = Mat::<f64>::zeros(v, v);
    add_outer_products(&mut nm, diffs, 1.0 / n.max(1) as f64);
    let md = mean_diag(&nm);
    let unseen = (0..v).filter(|i| nm[(*i, *i)] <= 0.0).count();
    check_noise(md, n, v, unseen, ridge, warn)?;
    crate::models::kit::linear::symmetrize_from_upper(&mut nm);
    let used = cholesky_with_ridge(&mut nm, ridge * md, md, warn)?;
    let mu = col_means(x);
    let op = Whitened {
        x,
        mu: Mat::from_fn(v, 1, |i, _| mu[i]),
        l: &nm,
    };
    let svd = randomized_svd(&op, k, opts.oversample, opts.power_iters, opts.seed)?;
    let joint = solve_lower_t(&nm, svd.v);
    Ok(OpcaFit {
        joint,
        eigenvalues: svd.s,
        ridge: used,
        cg_iters: 0,
    })
}

/// Trains and reloads OPCA models.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpcaTrainer;

model_config! {
    /// OPCA's settings.
    pub struct Config {
        cg_tol: f64 = CG_TOL,
        dim: usize = DIM,
        max_cg_iters: usize = MAX_CG_ITERS,
        oversample: usize = OVERSAMPLE,
        power_iters: usize = POWER_ITERS_6,
        ridge: f64 = s("0.1", Check::NonNegative, "ridge on the noise covariance"),
        solver: String = SOLVER,
    }
}

impl ModelConfig for Config {}

/// OPCA in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary: "oriented PCA: generalised eigenproblem of translation-noise covariance (Yih et al., CoNLL 2011)",
    space: true,
    runner: true,
    gpu: false,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(|| Box::new(OpcaTrainer)),
    text: &[],
    presets: &[],
};

/// The fit's dimension and own settings: `ridge` and the eigensolver's.
fn settings(
    params: &Params,
    seed: u64,
) -> Result<(usize, (f64, crate::models::implicit::SubspaceOpts))> {
    let c = Config::from_params(params, KIND)?;
    let opts = subspace_opts(
        &c.solver,
        c.oversample,
        c.power_iters,
        c.cg_tol,
        c.max_cg_iters,
        seed,
    )?;
    Ok((c.dim, (c.ridge, opts)))
}

impl Trainer for OpcaTrainer {
    /// Reads the settings before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        settings(params, 0).map(|_| ())
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
        let (k, (ridge, opts), xs, xt) =
            closed_form_input(KIND, data, params, resume.is_some(), hooks, || {
                settings(params, seed)
            })?;
        let v = xs.n_cols + xt.n_cols;
        if opts.solver == Solver::Dense {
            hooks.log(&format!(
                "opca: dense noise covariance {v} × {v} f64 ({:.2} GB), Cholesky ~{:.1e} flops",
                (v * v * 8) as f64 / 1e9,
                (v as f64).powi(3) / 3.0
            ));
        }
        let t0 = std::time::Instant::now();
        let f = logging_warnings(hooks, |warn| fit(&xs, &xt, k, ridge, &opts, warn))?;
        hooks.log(&format!(
            "opca: fitted in {:.1}s ({}); eigenvalues {:.4} .. {:.4}, ridge {:.3e}",
            t0.elapsed().as_secs_f64(),
            implicit::describe(opts.solver, f.cg_iters),
            f.eigenvalues[0],
            f.eigenvalues[k - 1],
            f.ridge
        ));
        let (ps, pt) = split_joint(&f.joint, xs.n_cols);
        let model = LinearModel::new(KIND, data.vocabs.clone(), ps, pt)?;
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
