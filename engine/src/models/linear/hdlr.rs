//! HDLR: high-dimension low-rank metric learning (Davis & Dhillon 2008;
//! seed 001 Sec. 2.3, 4.1). A Mahalanobis metric `A = U Uᵀ` on the joint
//! term space of both languages (a text is its log-tf·idf vector with unit
//! rows, non-zero only in its language's block), learnt by ITML (Davis et
//! al. 2007) from a low-rank start `A₀ = U₀ U₀ᵀ` (an OPCA projection, or any
//! linear model's). ITML's Bregman projections keep the range of `U₀`, so
//! `A = U₀ B U₀ᵀ` with a `k × k` symmetric positive definite `B` (start `I`)
//! and every update works on `B` in the projected space: for a constraint
//! `(i, j)` with `z = U_sᵀ f_i − U_tᵀ f_j`, `p = zᵀ B z`, and
//! `B ← B + β B z zᵀ B`. The trained model is the [`LinearModel`] with
//! projections `U₀ L` (`B = L Lᵀ`), compared by the cosine like every linear
//! model. Paper, choices and measured notes: `docs/models.md`.

use std::collections::{BTreeMap, HashMap};

use candle_core::{DType, Device, Tensor};
use faer::{Accum, Mat, Par};
use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::models::kit::linear::{
    array_to_tensor, check_fit_sizes, init_projections, to_faer, to_ndarray, weighted, LinearModel,
    PROJ_SOURCE, PROJ_TARGET,
};
use crate::models::linear::opca;
use crate::models::settings::ModelDef;
use crate::models::settings::{
    self, boxed, model_config, s, Check, ModelConfig, Settings, CG_TOL, CONSTRAINTS, DIM, EPOCHS,
    INIT, MAX_CG_ITERS, OVERSAMPLE, PERCENT, POWER_ITERS_6, SOLVER,
};
use crate::models::{
    Flow, Hooks, InitWeights, LogOnly, Phase, Resume, StepReport, TrainData, Trainer,
};
use crate::models::{Model, Params};
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

/// The registry name.
pub const KIND: &str = "hdlr";
/// Phase of the start when OPCA is fitted in the job (no `init`).
pub const PHASE_OPCA: &str = "opca";
/// Phase of the start when it is read from a session (`init=`).
pub const PHASE_INIT: &str = "init";
/// Phase of ITML's passes over the constraints.
pub const PHASE_ITML: &str = "itml";
/// Constraints per reported step.
pub const STEP_CONSTRAINTS: usize = 1000;
/// Random non-aligned pairs whose start distances give `u` and `l`.
pub const BOUND_SAMPLE: usize = 10_000;

model_config! {
    /// HDLR's settings: ITML's, and those of the OPCA start it fits
    /// without `init` (OPCA's own, with their own defaults).
    pub struct Config {
        cg_tol: f64 = CG_TOL.help(
            "OPCA start (no init), implicit solver: conjugate-gradient relative residual",
        ),
        dim: usize = DIM,
        dissimilar_pct: f64 = s(
            "95",
            PERCENT,
            "l: random pairs' start-distance percentile dissimilar pairs must exceed",
        ),
        epochs: usize = s("10", EPOCHS, "ITML passes over the constraints"),
        gamma: f64 = s("1", Check::Positive, "ITML slack trade-off (large: hard constraints)"),
        init: Option<String> = INIT.help(
            "start from a linear model's session (opca); unset: fit OPCA first",
        ),
        max_cg_iters: usize = MAX_CG_ITERS.help(
            "OPCA start (no init), implicit solver: most conjugate-gradient iterations per solve",
        ),
        negatives: usize = s(
            "10000",
            CONSTRAINTS,
            "dissimilar constraints: random non-aligned pairs",
        ),
        oversample: usize = OVERSAMPLE.help(
            "OPCA start (no init): randomised SVD's extra sketch columns",
        ),
        positives: usize = s(
            "10000",
            CONSTRAINTS,
            "similar constraints: aligned training pairs (repeated beyond their number)",
        ),
        power_iters: usize = POWER_ITERS_6.help(
            "OPCA start (no init): randomised SVD's power iterations",
        ),
        ridge: f64 = s("0.1", Check::NonNegative, "OPCA start (no init): ridge on the noise covariance"),
        similar_pct: f64 = s(
            "5",
            PERCENT,
            "u: random pairs' start-distance percentile similar pairs must stay below",
        ),
        solver: String = SOLVER.help(
            "OPCA start (no init): implicit (matrix-free) or dense (V × V) eigensolver",
        ),
    }
}

impl ModelConfig for Config {
    fn init(&self) -> Option<&std::path::Path> {
        settings::init(&self.init)
    }
}

/// HDLR in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary: "high-dimension low-rank metric learning: ITML on A = U Uᵀ from an OPCA start (Yih et al., CoNLL 2011)",
    space: true,
    runner: true,
    gpu: false,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(|| Box::new(HdlrTrainer)),
    text: &[],
    presets: &[],
};

impl Config {
    /// The OPCA start's settings: OPCA's, as HDLR's were given.
    fn opca(&self) -> opca::Config {
        opca::Config {
            cg_tol: self.cg_tol,
            dim: self.dim,
            max_cg_iters: self.max_cg_iters,
            oversample: self.oversample,
            power_iters: self.power_iters,
            ridge: self.ridge,
            solver: self.solver.clone(),
        }
    }
}

// extra checkpoint tensors (a resume continues exactly)
const T_U0_SOURCE: &str = "hdlr.u0.source";
const T_U0_TARGET: &str = "hdlr.u0.target";
const T_B: &str = "hdlr.b";
const T_LAMBDA: &str = "hdlr.lambda";
const T_XI: &str = "hdlr.xi";
const T_STATS: &str = "hdlr.stats";

/// One ITML constraint: source text `src` and target text `tgt` of the
/// training pairs, similar (`d ≤ u`, an aligned pair) or dissimilar
/// (`d ≥ l`, a random non-aligned pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Constraint {
    /// Row of the source text.
    pub src: u32,
    /// Row of the target text.
    pub tgt: u32,
    /// Similar (`true`) or dissimilar.
    pub similar: bool,
}

/// What one Bregman projection did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projection {
    /// `zᵀ B z` before the update.
    pub p: f64,
    /// The step `β` of `B ← B + β B z zᵀ B` (0: nothing changed).
    pub beta: f64,
}

/// ITML's state in the `k`-dimensional space of `U₀` (Davis et al. 2007,
/// Algorithm 1, on `B` for `A = U₀ B U₀ᵀ`): `B`, one dual variable `λ ≥ 0`
/// and one slack bound `ξ` per constraint, the slack trade-off `γ`, and
/// `tr B` and `log det B` tracked through every update (for the LogDet
/// divergence `D(B, I) = tr B − log det B − k`).
#[derive(Debug, Clone)]
pub struct Itml {
    /// The `k × k` factor of `A = U₀ B U₀ᵀ`.
    pub b: Mat<f64>,
    /// Dual variables, one per constraint.
    pub lambda: Vec<f64>,
    /// Slack-adjusted bounds, one per constraint (start: `u` or `l`).
    pub xi: Vec<f64>,
    /// Slack trade-off `γ > 0` (large: hard constraints).
    pub gamma: f64,
    trace: f64,
    logdet: f64,
    w: Mat<f64>,
    zm: Mat<f64>,
}

impl Itml {
    /// `B = I`, `λ = 0`, `ξ = bounds` (the constraints' `u` or `l`).
    pub fn new(k: usize, bounds: Vec<f64>, gamma: f64) -> Itml {
        Itml {
            b: Mat::identity(k, k),
            lambda: vec![0.0; bounds.len()],
            xi: bounds,
            gamma,
            trace: k as f64,
            logdet: 0.0,
            w: Mat::zeros(k, 1),
            zm: Mat::zeros(k, 1),
        }
    }

    /// Dimension `k`.
    pub fn dim(&self) -> usize {
        self.b.nrows()
    }

    /// `zᵀ B z`: the squared distance of a projected difference `z`.
    pub fn distance(&self, z: &[f64]) -> f64 {
        z.iter()
            .enumerate()
            .map(|(i, zi)| {
                zi * z
                    .iter()
                    .enumerate()
                    .map(|(j, zj)| self.b[(i, j)] * zj)
                    .sum::<f64>()
            })
            .sum()
    }

    /// The Bregman projection of constraint `c` (`similar`: `d ≤ ξ_c`, else
    /// `d ≥ ξ_c`) for the projected difference `z`:
    /// `α = min(λ_c, δ γ/(γ+1) (1/p − 1/ξ_c))`, `β = δα/(1 − δαp)`,
    /// `ξ_c ← γ ξ_c/(γ + δ α ξ_c)`, `λ_c ← λ_c − α`, `B ← B + β B z zᵀ B`
    /// (δ = +1 similar, −1 dissimilar). This is the update of the authors'
    /// ITML code; it makes the constraint tight against its slack bound
    /// (`p' = ξ'_c`), see `docs/models.md` for how it differs from the
    /// paper's printed Algorithm 1. A `z` with `p ≈ 0` (no direction to
    /// move) is skipped: `beta = 0`.
    pub fn project(&mut self, c: usize, z: &[f64], similar: bool) -> Projection {
        let k = self.dim();
        debug_assert_eq!(z.len(), k);
        for (i, v) in z.iter().enumerate() {
            self.zm[(i, 0)] = *v;
        }
        faer::linalg::matmul::matmul(
            self.w.as_mut(),
            Accum::Replace,
            self.b.as_ref(),
            self.zm.as_ref(),
            1.0,
            Par::Seq,
        );
        let mut p = 0.0;
        let mut ww = 0.0;
        for (i, zi) in z.iter().enumerate() {
            let wi = self.w[(i, 0)];
            p += zi * wi;
            ww += wi * wi;
        }
        let zz: f64 = z.iter().map(|v| v * v).sum();
        let tiny = 1e-12 * zz.max(f64::MIN_POSITIVE);
        if p.is_nan() || p <= tiny || !p.is_finite() {
            return Projection { p, beta: 0.0 };
        }
        let delta = if similar { 1.0 } else { -1.0 };
        let gproj = self.gamma / (self.gamma + 1.0);
        let xi = self.xi[c];
        let alpha = self.lambda[c].min(delta * gproj * (1.0 / p - 1.0 / xi));
        let denom = 1.0 - delta * alpha * p;
        let xden = self.gamma + delta * alpha * xi;
        // ITML's α keeps both positive; rounding at the edge skips the step
        let usable = denom > 0.0 && xden > 0.0;
        if alpha == 0.0 || !usable {
            return Projection { p, beta: 0.0 };
        }
        let beta = delta * alpha / denom;
        self.xi[c] = self.gamma * xi / xden;
        self.lambda[c] -= alpha;
        faer::linalg::matmul::matmul(
            self.b.as_mut(),
            Accum::Add,
            self.w.as_ref(),
            self.w.as_ref().transpose(),
            beta,
            Par::Seq,
        );
        // tr(B + β w wᵀ) and det(B)(1 + β p) (matrix determinant lemma)
        self.trace += beta * ww;
        self.logdet += (beta * p).ln_1p();
        Projection { p, beta }
    }

    /// The LogDet divergence `D(B, I) = tr B − log det B − k` of `B` from
    /// its start (equal to `D(A, A₀)` on the range of `U₀`), tracked
    /// through the updates.
    pub fn divergence(&self) -> f64 {
        self.trace - self.logdet - self.dim() as f64
    }

    /// Makes `B` exactly symmetric (`(B + Bᵀ)/2`; rounding leaves it so to
    /// about 1e-16 relative).
    pub fn symmetrize(&mut self) {
        let k = self.dim();
        for i in 0..k {
            for j in i + 1..k {
                let m = 0.5 * (self.b[(i, j)] + self.b[(j, i)]);
                self.b[(i, j)] = m;
                self.b[(j, i)] = m;
            }
        }
    }

    /// The lower Cholesky factor `L` of `B = L Lᵀ`; an error when `B` is not
    /// positive definite (which ITML's updates rule out up to rounding).
    pub fn factor(&self) -> Result<Mat<f64>> {
        let llt = self.b.llt(faer::Side::Lower).map_err(|e| {
            Error::invalid(format!(
                "hdlr: B is no longer positive definite ({e:?}); the updates lost precision"
            ))
        })?;
        Ok(llt.L().to_owned())
    }

    /// The state as extra checkpoint tensors (f64, exact).
    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let k = self.dim();
        let b: Vec<f64> = (0..k * k).map(|x| self.b[(x / k, x % k)]).collect();
        let t = |v: Vec<f64>, shape: &[usize]| Tensor::from_vec(v, shape, &Device::Cpu);
        Ok(vec![
            (T_B.into(), t(b, &[k, k])?),
            (
                T_LAMBDA.into(),
                t(self.lambda.clone(), &[self.lambda.len()])?,
            ),
            (T_XI.into(), t(self.xi.clone(), &[self.xi.len()])?),
            (T_STATS.into(), t(vec![self.trace, self.logdet], &[2])?),
        ])
    }

    /// The state from a checkpoint's extra tensors, checked against `k`
    /// and the number of constraints `m`.
    fn from_tensors(t: &HashMap<String, Tensor>, k: usize, m: usize, gamma: f64) -> Result<Itml> {
        let get = |name: &str, len: usize| -> Result<Vec<f64>> {
            let x = t
                .get(name)
                .ok_or_else(|| Error::invalid(format!("hdlr resume: no tensor `{name}`")))?;
            let v: Vec<f64> = x
                .to_dtype(DType::F64)?
                .to_device(&Device::Cpu)?
                .flatten_all()?
                .to_vec1()?;
            if v.len() != len {
                return Err(Error::invalid(format!(
                    "hdlr resume: `{name}` holds {} values, expected {len} (dim {k}, {m} constraints): \
                     the settings changed since the checkpoint",
                    v.len()
                )));
            }
            Ok(v)
        };
        let b = get(T_B, k * k)?;
        let stats = get(T_STATS, 2)?;
        let mut s = Itml::new(k, get(T_XI, m)?, gamma);
        s.b = Mat::from_fn(k, k, |i, j| b[i * k + j]);
        s.lambda = get(T_LAMBDA, m)?;
        s.trace = stats[0];
        s.logdet = stats[1];
        Ok(s)
    }
}

/// The `pct`-th percentile (0..=100) of `v`, by linear interpolation
/// between order statistics; `None` for an empty `v`.
pub fn percentile(v: &[f64], pct: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let pos = pct.clamp(0.0, 100.0) / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(s[lo] + (s[hi] - s[lo]) * (pos - lo as f64))
}

/// The constraints of a job on `n` training pairs, seeded: `positives`
/// aligned pairs (every pair once, in random order, before any pair
/// repeats), then `negatives` random pairs `(i, j)`, `i ≠ j`.
pub fn sample_constraints(
    n: usize,
    positives: usize,
    negatives: usize,
    seed: u64,
) -> Result<Vec<Constraint>> {
    if positives > 0 && n == 0 {
        return Err(Error::invalid(
            "hdlr: no training pairs for positive constraints",
        ));
    }
    if negatives > 0 && n < 2 {
        return Err(Error::invalid(format!(
            "hdlr: {n} training pair(s): negatives need at least 2 (a text and another's translation)"
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4844_4c52_636f_6e73);
    let mut out = Vec::with_capacity(positives + negatives);
    let mut perm: Vec<u32> = (0..n as u32).collect();
    while out.len() < positives {
        perm.shuffle(&mut rng);
        for &i in perm.iter().take(positives - out.len()) {
            out.push(Constraint {
                src: i,
                tgt: i,
                similar: true,
            });
        }
    }
    for _ in 0..negatives {
        let i = rng.random_range(0..n);
        let j = (i + rng.random_range(1..n)) % n;
        out.push(Constraint {
            src: i as u32,
            tgt: j as u32,
            similar: false,
        });
    }
    Ok(out)
}

/// Row-major `n × k` f64 copy of the projected texts `X U` (f32 product).
fn projected(x: &crate::text::CsrMatrix, u: &Array2<f32>) -> Vec<f64> {
    x.matmul_dense(u).iter().map(|v| *v as f64).collect()
}

/// `z = P_s[i] − P_t[j]` into `z`.
fn difference(ps: &[f64], pt: &[f64], c: Constraint, z: &mut [f64]) {
    let k = z.len();
    let (a, b) = (c.src as usize * k, c.tgt as usize * k);
    for (x, (s, t)) in z.iter_mut().zip(ps[a..a + k].iter().zip(&pt[b..b + k])) {
        *x = s - t;
    }
}

/// What an `init=` checkpoint is: the model kind its metadata names (when
/// it says) and the dimension of its projections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitInfo {
    /// The checkpoint's model kind (`opca`, ...), when its metadata says.
    pub kind: Option<String>,
    /// Columns of its projections.
    pub dim: usize,
}

/// Checks an `init=` start before anything is trained or written: the
/// checkpoint the job layer read must be a linear projection model's
/// (`proj.source` and `proj.target`) whose projections have `dim` columns.
/// The vocabularies are checked when the job reads it for training
/// ([`crate::session::init::for_job`]) and by the projections' shapes.
pub fn check_init(init: &InitWeights, dim: usize) -> Result<InitInfo> {
    let path = &init.checkpoint;
    let kind = init.kind.clone();
    let linear = [PROJ_SOURCE, PROJ_TARGET]
        .iter()
        .all(|n| init.tensors.contains_key(*n));
    if let (Some(k), false) = (&kind, linear) {
        return Err(Error::file(
            path,
            format!(
                "hdlr init=: a session of `{k}`, not of a linear projection model \
                 (opca, cl-lsi, cca, s2net, hdlr, procrustes)"
            ),
        ));
    }
    let mut cols = None;
    for name in [PROJ_SOURCE, PROJ_TARGET] {
        let t = init.tensors.get(name).ok_or_else(|| {
            Error::file(
                path,
                format!("hdlr init=: no `{name}` tensor: not a linear projection model"),
            )
        })?;
        match t.dims() {
            [_, c] if cols.is_none_or(|x| x == *c) => cols = Some(*c),
            s => {
                return Err(Error::file(
                    path,
                    format!(
                        "hdlr init=: `{name}` has shape {s:?}, not a projection matching the other"
                    ),
                ))
            }
        }
    }
    let got = cols.unwrap_or(0);
    if got != dim {
        return Err(Error::file(
            path,
            format!(
                "hdlr init=: the session's projections have dim {got}, this job's dim is {dim}; \
                 set --dim {got} (or --set dim={got}) to start from it"
            ),
        ));
    }
    Ok(InitInfo { kind, dim: got })
}

/// HDLR's settings, as the registry checks them.
#[derive(Debug, Clone)]
struct HdlrConfig {
    k: usize,
    epochs: usize,
    gamma: f64,
    init: Option<String>,
    positives: usize,
    negatives: usize,
    similar_pct: f64,
    dissimilar_pct: f64,
    /// The OPCA start's settings, as given to the registry's OPCA; `None`
    /// with `init`, which gives the start (`check` refuses them given with it).
    opca: Option<BTreeMap<String, String>>,
}

impl HdlrConfig {
    fn from_params(params: &Params) -> Result<HdlrConfig> {
        let c = Config::from_params(params, KIND)?;
        let opca = match c.init {
            Some(_) => None,
            None => Some(settings::to_given(&c.opca())?),
        };
        Ok(HdlrConfig {
            k: c.dim,
            epochs: c.epochs,
            gamma: c.gamma,
            init: c.init,
            positives: c.positives,
            negatives: c.negatives,
            similar_pct: c.similar_pct,
            dissimilar_pct: c.dissimilar_pct,
            opca,
        })
    }

    fn check(&self) -> Result<()> {
        if let Some(given) = &self.opca {
            // the start's settings are OPCA's: checked by OPCA
            opca::OpcaTrainer.check(&Params::new(given.clone()))?;
        }
        if self.positives + self.negatives == 0 {
            return Err(Error::invalid(
                "hdlr: positives=0 and negatives=0 leave ITML no constraint; set either",
            ));
        }
        if self.similar_pct >= self.dissimilar_pct {
            return Err(Error::invalid(format!(
                "hdlr: similar_pct={} must be below dissimilar_pct={} (similar pairs are held \
                 closer than dissimilar ones)",
                self.similar_pct, self.dissimilar_pct
            )));
        }
        Ok(())
    }

    fn start_phase(&self) -> &'static str {
        if self.init.is_some() {
            PHASE_INIT
        } else {
            PHASE_OPCA
        }
    }
}

/// The start `U₀` (f32, as checkpointed, so a resume reads back the very
/// values) from the `init` session or an OPCA fit.
fn start_projection(
    cfg: &HdlrConfig,
    data: &TrainData,
    params: &Params,
    seed: u64,
    hooks: &mut dyn Hooks,
) -> Result<(Array2<f32>, Array2<f32>)> {
    match &cfg.init {
        Some(dir) => {
            params.check_unused()?;
            let init = data.init_for(KIND)?;
            let info = check_init(init, cfg.k)?;
            let (s, t) = init_projections(init, &data.vocabs, cfg.k)?;
            hooks.log(&format!(
                "hdlr: starting from {dir} ({} projection, dim {})",
                info.kind.as_deref().unwrap_or("linear"),
                info.dim
            ));
            Ok((s, t))
        }
        None => {
            // the registry's OPCA, fitted on this job's data with HDLR's
            // OPCA settings (the same seed: the same start as an OPCA job)
            let given = cfg
                .opca
                .clone()
                .ok_or_else(|| Error::invalid("hdlr: no OPCA start"))?;
            params.check_unused()?;
            check_fit_sizes(KIND, data, cfg.k)?;
            let t0 = std::time::Instant::now();
            let opca = opca::OpcaTrainer.train(
                data,
                &Params::new(given),
                &Device::Cpu,
                seed,
                None,
                &mut LogOnly(hooks),
            )?;
            hooks.log(&format!(
                "hdlr: OPCA start fitted in {:.1}s (dim {})",
                t0.elapsed().as_secs_f64(),
                cfg.k
            ));
            let t: HashMap<String, Tensor> = opca.tensors()?.into_iter().collect();
            let m = LinearModel::from_tensors(KIND, &data.vocabs, &t)?;
            Ok((m.proj_source, m.proj_target))
        }
    }
}

/// The model `U₀ L` of `B = L Lᵀ` (`l = None`: `U₀` itself).
fn model_of(
    vocabs: &Vocabs,
    u0: &(Array2<f32>, Array2<f32>),
    u0f: &(Mat<f64>, Mat<f64>),
    l: Option<&Mat<f64>>,
) -> Result<LinearModel> {
    let (s, t) = match l {
        None => (u0.0.clone(), u0.1.clone()),
        Some(l) => (to_ndarray(&(&u0f.0 * l)), to_ndarray(&(&u0f.1 * l))),
    };
    LinearModel::new(KIND, vocabs.clone(), s, t)
}

fn array_from(
    t: &HashMap<String, Tensor>,
    name: &str,
    shape: (usize, usize),
) -> Result<Array2<f32>> {
    let x = t
        .get(name)
        .ok_or_else(|| Error::invalid(format!("hdlr resume: no tensor `{name}`")))?;
    let v: Vec<f32> = x
        .to_dtype(DType::F32)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1()?;
    if v.len() != shape.0 * shape.1 || x.dims().len() != 2 || x.dims()[1] != shape.1 {
        return Err(Error::invalid(format!(
            "hdlr resume: `{name}` has shape {:?}, expected {shape:?}",
            x.dims()
        )));
    }
    Array2::from_shape_vec(shape, v).map_err(|e| Error::invalid(e.to_string()))
}

/// Trains and reloads HDLR models.
#[derive(Debug, Clone, Copy, Default)]
pub struct HdlrTrainer;

impl Trainer for HdlrTrainer {
    /// Settings that depend on each other, and the `init` session (a
    /// linear model's, of this `dim`), before the job's session is written.
    fn check(&self, params: &Params) -> Result<()> {
        let cfg = HdlrConfig::from_params(params)?;
        cfg.check()?;
        if let Some(dir) = &cfg.init {
            // OPCA's settings but the space's dimension only apply to its start
            let given: Vec<&str> = opca::Config::SETTINGS
                .iter()
                .filter(|s| s.help != DIM.help && params.is_given(s.key))
                .map(|s| s.key)
                .collect();
            if !given.is_empty() {
                return Err(Error::invalid(format!(
                    "hdlr: {} only apply to the OPCA start fitted without init; init={dir} \
                     gives the start: drop {} or init",
                    given.join(", "),
                    if given.len() == 1 { "it" } else { "them" }
                )));
            }
        }
        Ok(())
    }

    /// The `init` start: a linear model's projections of this `dim`.
    fn check_init(&self, params: &Params, init: &InitWeights) -> Result<()> {
        check_init(init, HdlrConfig::from_params(params)?.k).map(|_| ())
    }

    /// The start (`opca`: OPCA fitted here; `init`: read from a session),
    /// one closed-form epoch validated like the others, so that the best
    /// checkpoint stays the start when ITML never beats it; then `itml`,
    /// `epochs` passes over the constraints, early-stopped on MRR.
    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let cfg = HdlrConfig::from_params(params)?;
        Ok(vec![
            Phase::new(cfg.start_phase(), 1, data.train_src.n_rows()),
            Phase::new(PHASE_ITML, cfg.epochs, cfg.positives + cfg.negatives),
        ])
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
        // faer's dense work split the same way whatever the thread count
        crate::models::kit::linear::fix_parallelism();
        let cfg = HdlrConfig::from_params(params)?;
        cfg.check()?;
        data.check_shapes(KIND)?;
        let k = cfg.k;
        let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
        let start = cfg.start_phase();
        // the start: fitted/read, or the checkpoint's copy
        let (u0, mut itml_from, mut step) = match &resume {
            None => (start_projection(&cfg, data, params, seed, hooks)?, None, 0),
            Some(r) => {
                // OPCA's settings (read by HdlrConfig) were used when the job began
                params.check_unused()?;
                let u0 = (
                    array_from(&r.tensors, T_U0_SOURCE, (vs, k))?,
                    array_from(&r.tensors, T_U0_TARGET, (vt, k))?,
                );
                let from = match r.phase.as_str() {
                    PHASE_ITML => Some(r.epoch),
                    p if p == start => None,
                    p => {
                        return Err(Error::invalid(format!(
                            "hdlr resume: checkpoint of phase `{p}`, this job's phases are \
                             {start} and {PHASE_ITML}"
                        )))
                    }
                };
                hooks.log(&format!(
                    "hdlr: resuming after {} epoch {}",
                    r.phase, r.epoch
                ));
                (u0, from, r.step)
            }
        };
        let u0f = (to_faer(&u0.0), to_faer(&u0.1));
        let u0_tensors = vec![
            (T_U0_SOURCE.to_string(), array_to_tensor(&u0.0)?),
            (T_U0_TARGET.to_string(), array_to_tensor(&u0.1)?),
        ];
        if resume.is_none() {
            let model = model_of(&data.vocabs, &u0, &u0f, None)?;
            if hooks.epoch_end(start, 1, &model, u0_tensors.clone())? == Flow::Stop {
                return Ok(Box::new(model));
            }
        }

        // the constraints and their bounds, from the start's distances
        let n = data.train_src.n_rows();
        let cons = sample_constraints(n, cfg.positives, cfg.negatives, seed)?;
        let xs = weighted(&data.train_src, &data.vocabs, Side::Source);
        let xt = weighted(&data.train_tgt, &data.vocabs, Side::Target);
        let ps = projected(&xs, &u0.0);
        let pt = projected(&xt, &u0.1);
        let mut z = vec![0.0f64; k];
        let dist0 = |c: Constraint, z: &mut [f64]| {
            difference(&ps, &pt, c, z);
            z.iter().map(|v| v * v).sum::<f64>()
        };
        // ITML's convention: percentiles of random pairs' distances (here
        // random non-aligned cross-language pairs)
        let sample = if n >= 2 {
            sample_constraints(n, 0, BOUND_SAMPLE, seed ^ 0x626f_756e_6473)?
        } else {
            cons.clone()
        };
        let d: Vec<f64> = sample.iter().map(|c| dist0(*c, &mut z)).collect();
        let u = percentile(&d, cfg.similar_pct).unwrap_or(0.0);
        let l = percentile(&d, cfg.dissimilar_pct).unwrap_or(0.0);
        if !(u > 0.0 && u.is_finite() && l.is_finite()) {
            return Err(Error::invalid(format!(
                "hdlr: the start's distances give bounds u = {u}, l = {l}: the start projection \
                 maps the texts to (nearly) one point; check the init session or the data"
            )));
        }
        let start_viol = {
            let (mut vp, mut vn) = (0usize, 0usize);
            for c in &cons {
                let d = dist0(*c, &mut z);
                if c.similar && d > u {
                    vp += 1;
                } else if !c.similar && d < l {
                    vn += 1;
                }
            }
            (vp, vn)
        };
        hooks.log(&format!(
            "hdlr: {} positive and {} negative constraints; bounds u = {u:.4e} ({}th percentile of \
             {} random pairs' start distances), l = {l:.4e} ({}th); violated at the start: {} \
             positives, {} negatives; gamma {}",
            cfg.positives,
            cfg.negatives,
            cfg.similar_pct,
            d.len(),
            cfg.dissimilar_pct,
            start_viol.0,
            start_viol.1,
            cfg.gamma
        ));
        let bounds: Vec<f64> = cons.iter().map(|c| if c.similar { u } else { l }).collect();
        let epoch0 = itml_from.unwrap_or(0);
        let mut itml = match (itml_from.take(), &resume) {
            (Some(_), Some(r)) => Itml::from_tensors(&r.tensors, k, cons.len(), cfg.gamma)?,
            _ => Itml::new(k, bounds, cfg.gamma),
        };

        let m = cons.len();
        let mut order: Vec<usize> = (0..m).collect();
        let mut current = model_of(&data.vocabs, &u0, &u0f, None)?;
        for epoch in epoch0 + 1..=cfg.epochs {
            hooks.epoch_start(PHASE_ITML, epoch);
            let mut rng = ChaCha8Rng::seed_from_u64(
                seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            order.sort_unstable();
            order.shuffle(&mut rng);
            let (mut viol, mut seen) = (0usize, 0usize);
            let t0 = std::time::Instant::now();
            for chunk in order.chunks(STEP_CONSTRAINTS) {
                let (mut vs_, mut vd, mut ns, mut nd) = (0usize, 0usize, 0usize, 0usize);
                for &ci in chunk {
                    let c = cons[ci];
                    difference(&ps, &pt, c, &mut z);
                    let pr = itml.project(ci, &z, c.similar);
                    if c.similar {
                        ns += 1;
                        vs_ += (pr.p > u) as usize;
                    } else {
                        nd += 1;
                        vd += (pr.p < l) as usize;
                    }
                }
                step += 1;
                viol += vs_ + vd;
                seen += chunk.len();
                let frac = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
                let report = StepReport {
                    phase: PHASE_ITML.to_string(),
                    epoch,
                    step,
                    loss: frac(vs_ + vd, chunk.len()),
                    examples: chunk.len(),
                    parts: vec![
                        ("similar_violated".into(), frac(vs_, ns)),
                        ("dissimilar_violated".into(), frac(vd, nd)),
                        ("divergence".into(), itml.divergence()),
                    ],
                };
                if !itml.divergence().is_finite() {
                    return Err(Error::invalid(format!(
                        "hdlr: the LogDet divergence became {} at itml epoch {epoch}, step {step}",
                        itml.divergence()
                    )));
                }
                if hooks.step(&report)? == Flow::Stop {
                    itml.symmetrize();
                    return Ok(Box::new(model_of(
                        &data.vocabs,
                        &u0,
                        &u0f,
                        Some(&itml.factor()?),
                    )?));
                }
            }
            itml.symmetrize();
            let lfac = itml.factor()?;
            hooks.log(&format!(
                "hdlr: itml pass {epoch}: {m} constraints in {:.2}s, {:.1}% violated on visit, \
                 D(B, I) = {:.4}",
                t0.elapsed().as_secs_f64(),
                100.0 * viol as f64 / seen.max(1) as f64,
                itml.divergence()
            ));
            hooks.epoch_scores(vec![
                ("violated".into(), viol as f64 / seen.max(1) as f64),
                ("divergence".into(), itml.divergence()),
            ]);
            current = model_of(&data.vocabs, &u0, &u0f, Some(&lfac))?;
            let mut extra = u0_tensors.clone();
            extra.extend(itml.tensors()?);
            if hooks.epoch_end(PHASE_ITML, epoch, &current, extra)? == Flow::Stop {
                return Ok(Box::new(current));
            }
        }
        if epoch0 >= cfg.epochs {
            // resumed after the last pass: the checkpoint's model
            current = model_of(&data.vocabs, &u0, &u0f, Some(&itml.factor()?))?;
        }
        Ok(Box::new(current))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate() {
        let v = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 100.0), Some(5.0));
        assert_eq!(percentile(&v, 50.0), Some(3.0));
        assert_eq!(percentile(&v, 12.5), Some(1.5));
        assert_eq!(percentile(&[], 5.0), None);
    }

    #[test]
    fn constraints_cover_every_pair_before_repeating_and_negatives_are_not_aligned() {
        let c = sample_constraints(7, 10, 50, 3).unwrap();
        assert_eq!(c.len(), 60);
        let mut first: Vec<u32> = c[..7].iter().map(|c| c.src).collect();
        first.sort_unstable();
        assert_eq!(first, (0..7).collect::<Vec<_>>());
        assert!(c[..10].iter().all(|c| c.similar && c.src == c.tgt));
        assert!(c[10..]
            .iter()
            .all(|c| !c.similar && c.src != c.tgt && c.tgt < 7));
        assert_eq!(c, sample_constraints(7, 10, 50, 3).unwrap(), "seeded");
        assert_ne!(c, sample_constraints(7, 10, 50, 4).unwrap());
        assert!(sample_constraints(1, 0, 3, 1).is_err());
        assert!(sample_constraints(0, 1, 0, 1).is_err());
    }

    #[test]
    fn tracked_divergence_matches_a_direct_one_and_b_stays_spd() {
        let k = 4;
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let zs: Vec<Vec<f64>> = (0..40)
            .map(|_| (0..k).map(|_| rng.random_range(-1.0..1.0)).collect())
            .collect();
        let bounds: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { 0.1 } else { 2.0 })
            .collect();
        let mut it = Itml::new(k, bounds, 1.0);
        for _ in 0..5 {
            for (c, z) in zs.iter().enumerate() {
                it.project(c, z, c % 2 == 0);
            }
        }
        it.symmetrize();
        let l = it.factor().unwrap();
        let logdet: f64 = (0..k).map(|i| 2.0 * l[(i, i)].ln()).sum();
        let trace: f64 = (0..k).map(|i| it.b[(i, i)]).sum();
        let direct = trace - logdet - k as f64;
        assert!(
            (direct - it.divergence()).abs() < 1e-9 * (1.0 + direct.abs()),
            "{direct} vs {}",
            it.divergence()
        );
        assert!(it.divergence() > 0.0);
        assert!(it.lambda.iter().all(|x| *x >= 0.0));
    }
}
