//! S2Net: one linear projection per language on log-tf·idf term vectors
//! with unit rows, trained with the pairwise logistic loss over in-batch
//! negatives (`L(Δ) = log(1 + exp(−γΔ))`, `Δ = cos(s_i, t_i) − cos(s_i, t_j)`),
//! optionally pulled towards its start (`beta`). Trained in candle on the
//! given device; the sparse input is gathered and segment-summed, never
//! densified. Adam's moments go to the checkpoint, so a resume continues the
//! optimiser exactly. Paper, choices and measured notes: `docs/models.md`.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

use crate::models::kit::linear::{
    check_fit_sizes, init_projections, rescale, weighted, LinearModel, PROJ_SOURCE, PROJ_TARGET,
};
use crate::models::kit::optim::Adam;
use crate::models::settings::ModelDef;
use crate::models::settings::{
    self, boxed, model_config, s, Check, ModelConfig, Settings, DIM, EPOCHS, INIT, OPTIM,
    PRECISION, VECTORS, WEIGHT_DECAY,
};
use crate::models::{Flow, Hooks, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

/// The registry name.
pub const KIND: &str = "s2net";

pub use crate::models::kit::nn::SparseBatch;
/// The batch layout shared with XCNN: term ids, local ids, weights and the
/// row of every entry, for the gather / segment-sum input layer.
use crate::models::kit::nn::{report_step, s2net_loss};

/// `X · W` for a batch `X`: gathers the rows of `w` (V × k) of the batch's
/// terms, weighted, and sums them per text (rows × k).
pub fn encode_batch(w: &Tensor, batch: &SparseBatch) -> Result<Tensor> {
    batch.compose(w, false)
}

/// The full training objective of one batch: [`s2net_loss`] of the encoded
/// pairs plus `β/2 (‖A_s − A_s⁰‖² + ‖A_t − A_t⁰‖²)` when `anchor` is given.
pub fn batch_objective(
    a_s: &Tensor,
    a_t: &Tensor,
    src: &SparseBatch,
    tgt: &SparseBatch,
    gamma: f64,
    anchor: Option<(&Tensor, &Tensor, f64)>,
) -> Result<Tensor> {
    let loss = s2net_loss(&encode_batch(a_s, src)?, &encode_batch(a_t, tgt)?, gamma)?;
    match anchor {
        Some((s0, t0, beta)) if beta > 0.0 => {
            let r = ((a_s - s0)?.sqr()?.sum_all()? + (a_t - t0)?.sqr()?.sum_all()?)?;
            Ok((loss + (r * (beta / 2.0))?)?)
        }
        _ => Ok(loss),
    }
}

fn to_array(t: &Tensor) -> Result<Array2<f32>> {
    let (r, c) = t.dims2()?;
    let v: Vec<f32> = t
        .to_dtype(DType::F32)?
        .to_device(&Device::Cpu)?
        .flatten_all()?
        .to_vec1()?;
    Array2::from_shape_vec((r, c), v).map_err(|e| Error::invalid(e.to_string()))
}

fn from_array(a: &Array2<f32>, device: &Device) -> Result<Tensor> {
    let v: Vec<f32> = a.iter().copied().collect();
    Ok(Tensor::from_vec(v, a.dim(), device)?)
}

fn random_init(rows: usize, k: usize, scale: f64, rng: &mut impl rand::Rng) -> Array2<f32> {
    Array2::from_shape_simple_fn((rows, k), || {
        let z: f64 = StandardNormal.sample(rng);
        (z * scale) as f32
    })
}

/// Trains and reloads S2Net models.
#[derive(Debug, Clone, Copy, Default)]
pub struct S2NetTrainer;

/// S2Net's settings, read once from its typed [`Config`].
#[derive(Debug, Clone)]
pub struct S2NetConfig {
    /// `dim`: the shared space's dimension.
    pub dim: usize,
    /// `batch`: pairs per step (each batch's other pairs are the negatives).
    pub batch: usize,
    /// `lr`: Adam's learning rate.
    pub lr: f64,
    /// `epochs`.
    pub epochs: usize,
    /// `gamma`: the logistic loss's scale.
    pub gamma: f64,
    /// `weight_decay`.
    pub weight_decay: f64,
    /// `init_scale`: the start's scale.
    pub init_scale: f64,
    /// `beta`: the pull towards the start (0: none).
    pub beta: f64,
    /// `optim=lazy-adam`: only a batch's rows are updated.
    pub lazy: bool,
    /// `init`: a linear session to start from.
    pub init: Option<String>,
    /// `vectors`: pretrained term vectors to start from.
    pub vectors: crate::models::kit::pretrained::VectorsSetting,
    /// `precision`: the arithmetic of the loss's cosine products.
    pub precision: crate::models::kit::precision::Precision,
}

model_config! {
    /// S2Net's settings, as given (`--set`) and recorded (`config.toml`).
    pub struct Config {
        batch: usize = s(
            "100",
            Check::Int { min: 2, max: 1_000_000 },
            "pairs per minibatch (the others are the negatives)",
        ),
        beta: f64 = s("0", Check::NonNegative, "pull towards the start (needs optim=adam)"),
        dim: usize = DIM,
        epochs: usize = s("10", EPOCHS, "training epochs"),
        gamma: f64 = s("10", Check::Positive, "scale of the cosine margins"),
        init: Option<String> = INIT,
        init_scale: f64 = s("0.01", Check::Positive, "std of the random start"),
        lr: f64 = s("0.001", Check::Positive, "Adam learning rate"),
        optim: String = s("adam", OPTIM, "dense Adam or row-sparse lazy Adam"),
        precision: String = PRECISION,
        vectors: String = VECTORS,
        weight_decay: f64 = WEIGHT_DECAY,
    }
}

impl ModelConfig for Config {
    fn init(&self) -> Option<&std::path::Path> {
        settings::init(&self.init)
    }
    fn vectors(&self) -> Result<Option<crate::models::kit::pretrained::VectorsSetting>> {
        settings::vectors(&self.vectors)
    }
    fn precision(&self) -> Result<Option<crate::models::kit::precision::Precision>> {
        settings::precision(&self.precision)
    }
}

/// S2Net in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary:
        "Siamese linear projection trained on in-batch cosine margins (Yih et al., CoNLL 2011)",
    space: true,
    runner: true,
    gpu: true,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(|| Box::new(S2NetTrainer)),
    text: &[],
    presets: &[],
};

impl S2NetConfig {
    /// Reads every setting and refuses combinations that cannot train
    /// (`init` with `vectors`; `optim=lazy-adam` with `beta > 0`).
    pub fn from_params(params: &Params) -> Result<Self> {
        let c = Config::from_params(params, KIND)?;
        let cfg = S2NetConfig {
            dim: c.dim,
            batch: c.batch,
            lr: c.lr,
            epochs: c.epochs,
            gamma: c.gamma,
            weight_decay: c.weight_decay,
            init_scale: c.init_scale,
            beta: c.beta,
            lazy: crate::models::kit::nn::lazy_optim(&c.optim),
            init: c.init,
            vectors: crate::models::kit::pretrained::setting(&c.vectors)?,
            precision: crate::models::kit::precision::setting(&c.precision)?,
        };
        if cfg.init.is_some() && cfg.vectors.session().is_some() {
            return Err(init_and_vectors());
        }
        if cfg.lazy && cfg.beta > 0.0 {
            return Err(Error::invalid(
                "s2net: optim=lazy-adam updates only a batch's rows, but beta > 0 ties every row \
                 to its start; use optim=adam with beta"
                    .to_string(),
            ));
        }
        Ok(cfg)
    }
}

/// `init` and `vectors` both given.
fn init_and_vectors() -> Error {
    Error::invalid(
        "s2net: give `init` (a linear session) or `vectors` (pretrained term vectors), not both",
    )
}

impl Trainer for S2NetTrainer {
    /// `init` and `vectors` are refused together before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        S2NetConfig::from_params(params).map(|_| ())
    }

    /// The two `V × dim` projections with gradients and Adam moments.
    fn memory_estimate(
        &self,
        params: &Params,
        sizes: &crate::models::DataSizes,
    ) -> Result<Option<crate::models::MemoryEstimate>> {
        let S2NetConfig { dim: k, batch, .. } = S2NetConfig::from_params(params)?;
        let terms = (sizes.source_terms + sizes.target_terms) as f64;
        Ok(Some(crate::models::MemoryEstimate::adam_f32(
            terms * k as f64,
            4.0 * batch as f64 * k as f64,
        )))
    }

    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let epochs = S2NetConfig::from_params(params)?.epochs;
        Ok(vec![Phase::new("train", epochs, data.train_src.n_rows())])
    }

    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        device: &Device,
        seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> Result<Box<dyn Model>> {
        let S2NetConfig {
            dim: k,
            batch,
            lr,
            epochs,
            gamma,
            weight_decay,
            init_scale,
            beta,
            lazy,
            init,
            vectors,
            precision,
        } = S2NetConfig::from_params(params)?;
        params.check_unused()?;
        let _precision = precision.enter(KIND, device)?;
        check_fit_sizes(KIND, data, k)?;
        let xs = weighted(&data.train_src, &data.vocabs, Side::Source);
        let xt = weighted(&data.train_tgt, &data.vocabs, Side::Target);
        let n = xs.n_rows();

        let (s0, t0) = match (&init, vectors.session()) {
            (Some(_), Some(_)) => return Err(init_and_vectors()),
            // the projection's rows are the term vectors: a text starts as
            // the tf-idf weighted sum of its words' vectors
            (None, Some(dir)) => {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                let f = crate::models::kit::pretrained::start(
                    data.pretrained.as_ref(),
                    dir,
                    KIND,
                    k,
                    init_scale,
                    &mut rng,
                    hooks,
                )?;
                (f.source, f.target)
            }
            (Some(dir), None) => {
                let (s, t) = init_projections(data.init_for(KIND)?, &data.vocabs, k)?;
                hooks.log(&format!("s2net: starting from {dir}"));
                (rescale(s, init_scale), rescale(t, init_scale))
            }
            (None, None) => {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                (
                    random_init(data.vocabs.source.len(), k, init_scale, &mut rng),
                    random_init(data.vocabs.target.len(), k, init_scale, &mut rng),
                )
            }
        };
        let anchor = if beta > 0.0 {
            Some((from_array(&s0, device)?, from_array(&t0, device)?))
        } else {
            None
        };
        // on the CPU the step's candle ops are small and Adam's pass runs on
        // rayon's threads (measured in docs/results.md, issue 20)
        if device.is_cpu() {
            crate::models::kit::nn::single_threaded_candle();
        }
        let a_s = Var::from_tensor(&from_array(&s0, device)?)?;
        let a_t = Var::from_tensor(&from_array(&t0, device)?)?;
        let mut opt = Adam::new(
            vec![
                ("source".into(), a_s.clone()),
                ("target".into(), a_t.clone()),
            ],
            lr,
            weight_decay,
        )?;
        let (mut epoch0, mut step) = (0, 0);
        if let Some(r) = resume {
            let get = |name: &str| -> Result<Tensor> {
                r.tensors
                    .get(name)
                    .ok_or_else(|| Error::invalid(format!("s2net resume: no tensor `{name}`")))?
                    .to_dtype(DType::F32)?
                    .to_device(device)
                    .map_err(Error::from)
            };
            let (ps, pt) = (get(PROJ_SOURCE)?, get(PROJ_TARGET)?);
            if ps.dims() != a_s.dims() || pt.dims() != a_t.dims() {
                return Err(Error::invalid(format!(
                    "s2net resume: checkpoint shapes {:?} / {:?} do not fit {:?} / {:?}",
                    ps.dims(),
                    pt.dims(),
                    a_s.dims(),
                    a_t.dims()
                )));
            }
            a_s.set(&ps)?;
            a_t.set(&pt)?;
            // checkpoints keep the step count as the resume step
            // a checkpoint written without optimiser moments (plain SGD)
            // restarts AdamW, saying so; moments that are there but do not
            // fit (a wrong shape, one missing) are refused: a silently
            // restarted optimiser would not continue the same run
            if r.tensors.keys().any(|k| k.starts_with("adam.")) {
                opt.restore_moments(&r.tensors)
                    .map_err(|e| Error::invalid(format!("s2net resume: {e}")))?;
                opt.set_step(r.step);
            } else {
                hooks.log(
                    "warning: s2net resume: no optimiser moments in the checkpoint; AdamW restarts",
                );
            }
            epoch0 = r.epoch;
            step = r.step;
            hooks.log(&format!(
                "s2net: resuming after epoch {epoch0}, step {step}"
            ));
        }

        let current = |a_s: &Var, a_t: &Var| -> Result<LinearModel> {
            LinearModel::new(
                KIND,
                data.vocabs.clone(),
                to_array(a_s.as_tensor())?,
                to_array(a_t.as_tensor())?,
            )
        };
        let mut order: Vec<usize> = (0..n).collect();
        for epoch in epoch0 + 1..=epochs {
            hooks.epoch_start("train", epoch);
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
                seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            order.sort_unstable();
            order.shuffle(&mut rng);
            for chunk in order.chunks(batch) {
                if chunk.len() < 2 {
                    continue;
                }
                let bs = SparseBatch::new(&xs, chunk, false, DType::F32, device)?;
                let bt = SparseBatch::new(&xt, chunk, false, DType::F32, device)?;
                let loss = if lazy || anchor.is_none() {
                    // the loss sees only the batch's rows, as leaves: lazy
                    // Adam changes only those rows and their moments; dense
                    // Adam every row, from the rows' gradient (no V × k
                    // gradient is built, the same arithmetic)
                    let ls = Var::from_tensor(&a_s.as_tensor().index_select(&bs.uniq, 0)?)?;
                    let lt = Var::from_tensor(&a_t.as_tensor().index_select(&bt.uniq, 0)?)?;
                    let loss = s2net_loss(
                        &bs.compose(ls.as_tensor(), true)?,
                        &bt.compose(lt.as_tensor(), true)?,
                        gamma,
                    )?;
                    let rows = [("source", &bs.uniq, &ls), ("target", &bt.uniq, &lt)];
                    if lazy {
                        opt.backward_step_rows(&loss, &rows)?;
                    } else {
                        opt.backward_step_dense_rows(&loss, &rows)?;
                    }
                    loss
                } else {
                    let loss = batch_objective(
                        a_s.as_tensor(),
                        a_t.as_tensor(),
                        &bs,
                        &bt,
                        gamma,
                        anchor.as_ref().map(|(s, t)| (s, t, beta)),
                    )?;
                    opt.backward_step(&loss)?;
                    loss
                };
                step += 1;
                let flow = report_step(hooks, KIND, "train", (epoch, step), &loss, chunk.len())?;
                if flow == Flow::Stop {
                    return Ok(Box::new(current(&a_s, &a_t)?));
                }
            }
            let model = current(&a_s, &a_t)?;
            let extra = opt.state()?;
            if hooks.epoch_end("train", epoch, &model, extra)? == Flow::Stop {
                return Ok(Box::new(model));
            }
        }
        Ok(Box::new(current(&a_s, &a_t)?))
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
