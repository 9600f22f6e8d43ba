//! Adversarial BiLSTM representations (seed 003): model M, and with
//! `adversarial=false` its ablation M_adv.
//!
//! Three encoders, for source queries q_s, target queries q_t and target
//! documents d_t (`share_target` makes the last two one): word embeddings →
//! [`BiLstm`] → max-pooling over time → NN_dim (tanh layers, linear output of
//! `dim`) giving z. The generator minimises
//! `L_G = γ₁·L_tra + γ₂·L_matc + γ₃·L_matm + L_reg` and, for M, minus `λ`
//! times the discriminator's cross-entropy (the log-likelihood of the true
//! source of each z; `adv_loss=confusion`: plus `λ` times the cross-entropy
//! against the uniform distribution, [`AdvLoss`]); the discriminator NN_adv (three feed-forward layers,
//! softmax over {q_s, q_t, d_t}) takes `disc_steps` steps per generator step
//! on the same batch's codes (detached), alternating. The generator's
//! gradients are clipped to a global norm (`clip`) to keep the game stable.
//! Documents z_dt are the target side of the space; term vectors are the
//! encodings of one-word texts. Equations and choices: `docs/models.md`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var, D};
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::index::bm25::{Bm25Index, Bm25Params, Query};
use crate::models::kit::linear::{self, init_projections, PROJ_SOURCE};
use crate::models::kit::lstm::{length_batches, max_pool, BiLstm, PaddedBatch, Recurrence};
use crate::models::kit::nn::{
    check_loss, check_shape, epoch_rng, normal_tensor, to_array, uniform_tensor, unit_rows,
};
use crate::models::kit::optim::Adam;
use crate::models::settings::ModelDef;
use crate::models::settings::{
    self, boxed, model_config, s, Check, ModelConfig, Settings, BATCH, DIM, EPOCHS, FROZEN_EPOCHS,
    INIT, PRECISION, VECTORS,
};
use crate::models::{
    Flow, Hooks, InitWeights, Model, Params, Phase, Resume, StepReport, TrainData, Trainer,
};
use crate::text::{CsrMatrix, Sequences, Side, Vocabs};
use crate::{Error, Result};

/// The model's registry name.
pub const NAME: &str = "adv-bilstm";
/// Texts encoded per forward pass at inference.
const ENCODE_CHUNK: usize = 256;

/// Settings of `adv-bilstm`, built from its typed [`Config`].
#[derive(Debug, Clone)]
pub struct AdvConfig {
    /// Word-embedding size.
    pub emb: usize,
    /// LSTM units per direction.
    pub hidden: usize,
    /// Widths of NN_dim's tanh layers (1 or 2).
    pub nn_hidden: Vec<usize>,
    /// Size k of the shared space (NN_dim's linear output).
    pub dim: usize,
    /// One encoder for target queries and target documents.
    pub share_target: bool,
    /// Model M (true) or its ablation M_adv (false).
    pub adversarial: bool,
    /// Weight λ of the adversarial term in the generator's loss.
    pub adv_weight: f64,
    /// The generator's adversarial term (`adv_loss`).
    pub adv_loss: AdvLoss,
    /// Discriminator steps per generator step.
    pub disc_steps: usize,
    /// Width of the discriminator's two hidden layers.
    pub disc_hidden: usize,
    /// Discriminator learning rate.
    pub disc_lr: f64,
    /// Generator learning rate.
    pub lr: f64,
    /// β_c of L_matc.
    pub beta_c: f64,
    /// β_m of L_matm.
    pub beta_m: f64,
    /// γ₁ (L_tra), γ₂ (L_matc), γ₃ (L_matm).
    pub gamma: [f64; 3],
    /// Weight of the in-batch pairwise loss over (q_s, q_t) (0: off; the
    /// peer `torch_ref.py --model bilstm` trains with it).
    pub gamma_inbatch: f64,
    /// β of the in-batch loss.
    pub beta_inbatch: f64,
    /// Encoder passes run on parallel threads on the CPU (1: in order).
    pub threads: usize,
    /// Coefficient of the squared Frobenius norm of the weight matrices.
    pub reg: f64,
    /// Largest global norm of the generator's gradient (0: no clipping).
    pub clip: f64,
    /// Pairs per step.
    pub batch: usize,
    /// Epochs.
    pub epochs: usize,
    /// Tokens kept per query.
    pub max_query_len: usize,
    /// Tokens kept per document.
    pub max_doc_len: usize,
    /// A trained session whose term vectors start the embeddings.
    pub init: Option<PathBuf>,
    /// `.vec` files (source, target) that start the embeddings.
    pub vectors: Option<(PathBuf, PathBuf)>,
    /// First epochs with the embeddings held fixed (needs `vectors`).
    pub frozen_epochs: usize,
    /// A session whose term vectors start the embeddings (`vectors=SESSION`,
    /// fitted to `emb` columns: [`crate::models::kit::pretrained::fit_width`]).
    pub vectors_session: Option<PathBuf>,
    /// Std of the random embeddings.
    pub init_scale: f64,
    /// `precision`: the arithmetic of the encoders', the discriminator's and
    /// the in-batch loss's products.
    pub precision: crate::models::kit::precision::Precision,
    /// `recurrence`: Rosetta's own steps or cuDNN's RNN (CUDA).
    pub recurrence: Recurrence,
}

/// What the generator of M does against the discriminator (`adv_loss`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvLoss {
    /// The seed's minimax game: the generator minimises `L_G − λ·CE`, the
    /// discriminator's cross-entropy on the codes' true sources. Unbounded
    /// below: the generator gains by making the discriminator confidently
    /// wrong, not only unsure.
    Minimax,
    /// Domain confusion (Tzeng et al., "Simultaneous deep transfer across
    /// domains and tasks", ICCV 2015): the generator minimises
    /// `L_G + λ·(CE(uniform) − ln C)`, the cross-entropy of the
    /// discriminator's output against the uniform distribution over the `C`
    /// sources, less its minimum: zero exactly when the discriminator cannot
    /// tell the sources apart, never negative.
    Confusion,
}

/// The confusion term of [`AdvLoss::Confusion`] for discriminator `logits`
/// (`n × C`): the mean over rows of `−(1/C)·Σ_c log softmax(logits)_c`,
/// less `ln C`. Zero for rows of equal logits, positive otherwise.
pub fn confusion_loss(logits: &Tensor) -> Result<Tensor> {
    let c = logits.dim(D::Minus1)?;
    let logp = candle_nn::ops::log_softmax(logits, D::Minus1)?;
    Ok(((logp.mean_all()? * -1.0)? - (c as f64).ln())?)
}

fn widths(v: &str) -> std::result::Result<Vec<usize>, String> {
    let w: Vec<usize> = v
        .split(',')
        .map(|x| x.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("expected one or two widths like `128` or `256,128`, got `{v}`"))?;
    if w.is_empty() || w.len() > 2 || w.iter().any(|&x| x == 0 || x > 65_536) {
        return Err(format!(
            "expected one or two widths in 1..=65536, got `{v}`"
        ));
    }
    Ok(w)
}

/// Registry check of `nn_hidden`.
pub fn check_widths(v: &str) -> std::result::Result<(), String> {
    widths(v).map(|_| ())
}

model_config! {
    /// The adversarial BiLSTM's settings, as given (`--set`) and recorded
    /// (`config.toml`).
    pub struct Config {
        adv_loss: String = s("minimax", Check::Choice(&["minimax", "confusion"]), "the generator's adversarial term: minimax (the seed's: maximise the discriminator's cross-entropy) or confusion (its cross-entropy against the uniform distribution over the three sources, bounded; Tzeng et al. 2015)"),
        adv_weight: f64 = s("1", Check::NonNegative, "weight λ of the adversarial term (adv_loss) in the generator's loss"),
        adversarial: bool = s("true", Check::Bool, "model M (true) or the ablation M_adv without the adversary (false)"),
        batch: usize = s("100", BATCH, "pairs per step"),
        beta_c: f64 = s("10", Check::Positive, "β_c of the cross-language matching loss"),
        beta_inbatch: f64 = s("10", Check::Positive, "β of the in-batch loss"),
        beta_m: f64 = s("10", Check::Positive, "β_m of the monolingual matching loss"),
        clip: f64 = s("1", Check::NonNegative, "largest global norm of the generator's gradient (0: none)"),
        dim: usize = DIM,
        disc_hidden: usize = s("128", Check::Int { min: 1, max: 65_536 }, "width of the discriminator's two hidden layers"),
        disc_lr: f64 = s("0.001", Check::Positive, "discriminator's Adam learning rate"),
        disc_steps: usize = s("1", Check::Int { min: 1, max: 100 }, "discriminator steps per generator step"),
        emb: usize = s("512", Check::Int { min: 1, max: 65_536 }, "word-embedding size"),
        encoder_threads: usize = s("2", Check::Int { min: 1, max: 64 }, "CPU: encoder passes on parallel threads, candle's kernels single-threaded (1: in order, candle's own threads)"),
        epochs: usize = s("10", EPOCHS, "training epochs"),
        frozen_epochs: usize = FROZEN_EPOCHS,
        gamma_inbatch: f64 = s("0", Check::NonNegative, "weight of an in-batch pairwise loss over the translation pairs (torch_ref's bilstm)"),
        gamma_matc: f64 = s("1", Check::NonNegative, "γ₂: weight of the cross-language matching loss"),
        gamma_matm: f64 = s("1", Check::NonNegative, "γ₃: weight of the monolingual matching loss"),
        gamma_tra: f64 = s("1", Check::NonNegative, "γ₁: weight of the translation loss"),
        hidden: usize = s("256", Check::Int { min: 1, max: 65_536 }, "LSTM units per direction"),
        init: Option<String> = INIT.help("start the embeddings from a trained session's term vectors (linear model or xcnn)"),
        init_scale: f64 = s("1", Check::Positive, "std of the random embeddings (torch's N(0,1))"),
        lr: f64 = s("0.001", Check::Positive, "generator's Adam learning rate"),
        max_doc_len: usize = s("300", Check::Int { min: 1, max: 100_000 }, "tokens kept per document"),
        max_query_len: usize = s("30", Check::Int { min: 1, max: 100_000 }, "tokens kept per query"),
        nn_hidden: String = s("128", Check::Parse(check_widths), "NN_dim's tanh layer widths (one or two, comma-separated)"),
        precision: String = PRECISION,
        recurrence: String = s("steps", Check::Choice(&["steps", "cudnn"]), "how the BiLSTM's recurrence runs: steps (Rosetta's own: one op over the sequence on the CPU, a fused cell per step on CUDA) or cudnn (cuDNN's RNN on CUDA, as PyTorch's nn.LSTM; needs a build with the cudnn feature)").compute_only(),
        reg: f64 = s("0.00001", Check::NonNegative, "coefficient of the weights' squared Frobenius norm (L_reg)"),
        share_target: bool = s("false", Check::Bool, "one encoder for target queries and documents"),
        vectors: String = VECTORS
            .check(Check::Parse(crate::models::kit::pretrained::check_any))
            .help("a session (encoder or any model with a space) or SOURCE.vec,TARGET.vec whose vectors start the embeddings"),
    }
}

impl ModelConfig for Config {
    fn init(&self) -> Option<&Path> {
        settings::init(&self.init)
    }
    fn vectors(&self) -> Result<Option<crate::models::kit::pretrained::VectorsSetting>> {
        settings::vectors(&self.vectors)
    }
    fn precision(&self) -> Result<Option<crate::models::kit::precision::Precision>> {
        settings::precision(&self.precision)
    }
    fn recurrence(&self) -> Result<Option<Recurrence>> {
        self.recurrence.parse().map(Some)
    }
}

/// The adversarial BiLSTM in the registry.
pub static DEF: ModelDef = ModelDef {
    name: NAME,
    summary: "BiLSTM encoders with an adversarial discriminator (M of the paper “Adversarial learning of task-specific text representations for CLIR”; adversarial=false: M_adv)",
    space: true,
    runner: true,
    gpu: true,
    word2vec: true,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(adv_bilstm_trainer),
    text: &[],
    presets: &[],
};

impl AdvConfig {
    /// The settings from `p` (defaults and checks from the definition).
    pub fn from_params(p: &Params) -> Result<Self> {
        let p = Config::from_params(p, NAME)?;
        let nn_hidden = widths(&p.nn_hidden).map_err(Error::invalid)?;
        use crate::models::kit::pretrained::VectorsSetting;
        let (vectors, vectors_session) = match crate::models::kit::pretrained::setting(&p.vectors)?
        {
            VectorsSetting::None => (None, None),
            VectorsSetting::Files(a, b) => (Some((a, b)), None),
            VectorsSetting::Session(d) => (None, Some(d)),
        };
        let init = p.init.as_deref().map(PathBuf::from);
        if init.is_some() && (vectors.is_some() || vectors_session.is_some()) {
            return Err(Error::invalid(
                "adv-bilstm: give `init` (a session) or `vectors` (a session or .vec files), not both",
            ));
        }
        let frozen_epochs = p.frozen_epochs;
        let started = init.is_some() || vectors.is_some() || vectors_session.is_some();
        crate::models::kit::pretrained::check_frozen(NAME, frozen_epochs, started)?;
        let adversarial = p.adversarial;
        let adv_loss = match p.adv_loss.as_str() {
            "minimax" => AdvLoss::Minimax,
            "confusion" => AdvLoss::Confusion,
            other => {
                return Err(Error::invalid(format!(
                    "adv-bilstm: adv_loss: expected minimax or confusion, got `{other}`"
                )))
            }
        };
        if !adversarial && adv_loss == AdvLoss::Confusion {
            return Err(Error::invalid(
                "adv-bilstm: adv_loss=confusion chooses M's adversarial term, but adversarial=false (M_adv) has none; drop one of the two",
            ));
        }
        Ok(AdvConfig {
            emb: p.emb,
            hidden: p.hidden,
            nn_hidden,
            dim: p.dim,
            share_target: p.share_target,
            adversarial,
            adv_weight: p.adv_weight,
            adv_loss,
            disc_steps: p.disc_steps,
            disc_hidden: p.disc_hidden,
            disc_lr: p.disc_lr,
            lr: p.lr,
            beta_c: p.beta_c,
            beta_m: p.beta_m,
            gamma: [p.gamma_tra, p.gamma_matc, p.gamma_matm],
            gamma_inbatch: p.gamma_inbatch,
            beta_inbatch: p.beta_inbatch,
            threads: p.encoder_threads,
            reg: p.reg,
            clip: p.clip,
            batch: p.batch,
            epochs: p.epochs,
            max_query_len: p.max_query_len,
            max_doc_len: p.max_doc_len,
            init,
            vectors,
            vectors_session,
            frozen_epochs,
            init_scale: p.init_scale,
            precision: crate::models::kit::precision::setting(&p.precision)?,
            recurrence: p.recurrence.parse()?,
        })
    }
}

/// One text encoder: embeddings → BiLSTM → max-pool → NN_dim.
pub struct Encoder {
    /// `V × emb` word embeddings.
    pub emb: Var,
    /// The recurrent layer.
    pub lstm: BiLstm,
    /// NN_dim: `(weight in × out, bias out)` per layer; tanh between, the last linear.
    pub ff: Vec<(Var, Var)>,
    /// How the BiLSTM runs ([`AdvModel::set_recurrence`]; Rosetta's own
    /// steps when built from tensors).
    pub recurrence: Recurrence,
}

impl Encoder {
    /// A random encoder, or one whose embeddings start from `emb`.
    #[allow(clippy::too_many_arguments)]
    fn random(
        vocab: usize,
        cfg: &AdvConfig,
        emb: Option<&Array2<f32>>,
        rng: &mut ChaCha8Rng,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let table = match emb {
            Some(a) => Tensor::from_vec(a.iter().copied().collect::<Vec<f32>>(), a.dim(), device)?
                .to_dtype(dtype)?,
            None => normal_tensor((vocab, cfg.emb), cfg.init_scale, rng, dtype, device)?,
        };
        let e = table.dim(1)?;
        let lstm = BiLstm::new(e, cfg.hidden, rng, dtype, device)?;
        let mut ff = Vec::new();
        let mut fan_in = 2 * cfg.hidden;
        for &w in cfg.nn_hidden.iter().chain(std::iter::once(&cfg.dim)) {
            // torch's nn.Linear: weight and bias uniform in ±1/√fan_in
            let k = 1.0 / (fan_in as f64).sqrt();
            let wt = uniform_tensor(&[fan_in, w], k, rng, dtype, device)?;
            let b = uniform_tensor(&[w], k, rng, dtype, device)?;
            ff.push((Var::from_tensor(&wt)?, Var::from_tensor(&b)?));
            fan_in = w;
        }
        Ok(Encoder {
            emb: Var::from_tensor(&table)?,
            lstm,
            ff,
            recurrence: cfg.recurrence,
        })
    }

    fn named_vars(&self, prefix: &str) -> Vec<(String, Var)> {
        let mut v = vec![(format!("{prefix}.emb"), self.emb.clone())];
        v.extend(self.lstm.named_vars(&format!("{prefix}.lstm")));
        for (j, (w, b)) in self.ff.iter().enumerate() {
            v.push((format!("{prefix}.ff.w{}", j + 1), w.clone()));
            v.push((format!("{prefix}.ff.b{}", j + 1), b.clone()));
        }
        v
    }

    /// The weight matrices L_reg penalises (recurrent and feed-forward; not
    /// the embeddings, not the biases).
    fn weights(&self) -> Vec<&Tensor> {
        let mut w = vec![self.lstm.w_ih.as_tensor(), self.lstm.w_hh.as_tensor()];
        w.extend(self.ff.iter().map(|(w, _)| w.as_tensor()));
        w
    }

    fn from_tensors(
        prefix: &str,
        t: &HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let get = |name: &str| -> Result<Tensor> {
            let t = t
                .get(name)
                .ok_or_else(|| Error::invalid(format!("checkpoint lacks tensor `{name}`")))?;
            Ok(t.to_dtype(dtype)?.to_device(device)?)
        };
        let emb = get(&format!("{prefix}.emb"))?;
        check_shape(&format!("{prefix}.emb"), &emb, &[None, None])?;
        let lstm = BiLstm::from_tensors(&format!("{prefix}.lstm"), t, dtype, device)?;
        if lstm.input() != emb.dim(1)? {
            return Err(Error::invalid(format!(
                "checkpoint: `{prefix}.lstm` reads {} inputs but `{prefix}.emb` has {}",
                lstm.input(),
                emb.dim(1)?
            )));
        }
        let mut ff = Vec::new();
        let mut fan_in = 2 * lstm.hidden();
        for j in 1.. {
            let (wk, bk) = (format!("{prefix}.ff.w{j}"), format!("{prefix}.ff.b{j}"));
            if !t.contains_key(&wk) {
                break;
            }
            let w = get(&wk)?;
            check_shape(&wk, &w, &[Some(fan_in), None])?;
            let out = w.dim(1)?;
            let b = get(&bk)?;
            check_shape(&bk, &b, &[Some(out)])?;
            ff.push((Var::from_tensor(&w)?, Var::from_tensor(&b)?));
            fan_in = out;
        }
        if ff.is_empty() {
            return Err(Error::invalid(format!("checkpoint lacks `{prefix}.ff.w1`")));
        }
        Ok(Encoder {
            emb: Var::from_tensor(&emb)?,
            lstm,
            ff,
            recurrence: Recurrence::Steps,
        })
    }

    fn vocab(&self) -> usize {
        self.emb.dims()[0]
    }

    fn dim(&self) -> usize {
        self.ff.last().map_or(0, |(w, _)| w.dims()[1])
    }

    /// Codes z (`B × dim`) of a padded batch; texts with no known term get
    /// a zero row.
    fn forward(&self, pb: &PaddedBatch, words: &BatchWords) -> Result<Tensor> {
        let (b, t) = pb.ids.dims2()?;
        let gather = crate::models::kit::rows::gather_rows;
        // each distinct word of the batch is embedded (and projected) once
        let x = gather(self.emb.as_tensor(), &words.uniq)?;
        let h = match self.recurrence {
            Recurrence::Steps => {
                let proj = gather(&self.lstm.project(&x)?, &words.local)?.reshape((
                    b,
                    t,
                    8 * self.lstm.hidden(),
                ))?;
                self.lstm.recur(&proj, &pb.mask)?
            }
            // cuDNN projects every step itself
            Recurrence::Cudnn => {
                let steps = gather(&x, &words.local)?.reshape((b, t, x.dim(1)?))?;
                self.lstm.forward_cudnn(&steps, &pb.mask, &pb.lengths)?
            }
        };
        let mut z = max_pool(&h, &pb.mask)?;
        let last = self.ff.len() - 1;
        for (j, (w, bias)) in self.ff.iter().enumerate() {
            z = crate::models::kit::precision::matmul(&z, w.as_tensor())?
                .broadcast_add(bias.as_tensor())?;
            if j < last {
                z = z.tanh()?;
            }
        }
        // a text with no real step has no code: zero (ranks last)
        let nonempty = pb.mask.max_keepdim(1)?;
        Ok(z.broadcast_mul(&nonempty)?)
    }

    /// Codes of rows `rows` of `seqs`, truncated to `max_len` tokens.
    fn codes(
        &self,
        seqs: &Sequences,
        rows: &[usize],
        max_len: usize,
        dtype: DType,
    ) -> Result<Tensor> {
        let s: Vec<&[u32]> = rows.iter().map(|&r| seqs.row(r)).collect();
        let device = self.emb.device();
        let pb = PaddedBatch::new(&s, max_len, dtype, device)?;
        let words = BatchWords::of(&s, pb.steps, max_len, device)?;
        self.forward(&pb, &words)
    }
}

/// The distinct word ids of a padded batch and, per step (row-major, padding
/// as id 0), its position among them.
struct BatchWords {
    uniq: Tensor,
    local: Tensor,
}

impl BatchWords {
    fn of(seqs: &[&[u32]], steps: usize, max_len: usize, device: &Device) -> Result<Self> {
        let mut ids = vec![0u32; seqs.len() * steps];
        for (r, s) in seqs.iter().enumerate() {
            let n = s.len().min(max_len);
            ids[r * steps..r * steps + n].copy_from_slice(&s[..n]);
        }
        let mut uniq = ids.clone();
        uniq.sort_unstable();
        uniq.dedup();
        let local: Vec<u32> = ids
            .iter()
            .map(|w| uniq.binary_search(w).unwrap_or(0) as u32)
            .collect();
        Ok(BatchWords {
            uniq: Tensor::from_vec(uniq.clone(), uniq.len(), device)?,
            local: Tensor::from_vec(local, ids.len(), device)?,
        })
    }
}

/// NN_adv: three feed-forward layers (ReLU, ReLU, softmax over the three sources).
pub struct Discriminator {
    /// `(weight, bias)` per layer.
    pub layers: Vec<(Var, Var)>,
}

impl Discriminator {
    fn random(
        dim: usize,
        hidden: usize,
        rng: &mut ChaCha8Rng,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let mut layers = Vec::new();
        for (i, o) in [(dim, hidden), (hidden, hidden), (hidden, 3)] {
            let w = normal_tensor((i, o), 1.0 / (i as f64).sqrt(), rng, dtype, device)?;
            layers.push((
                Var::from_tensor(&w)?,
                Var::from_tensor(&Tensor::zeros(o, dtype, device)?)?,
            ));
        }
        Ok(Discriminator { layers })
    }

    fn named_vars(&self) -> Vec<(String, Var)> {
        let mut v = Vec::new();
        for (j, (w, b)) in self.layers.iter().enumerate() {
            v.push((format!("disc.w{}", j + 1), w.clone()));
            v.push((format!("disc.b{}", j + 1), b.clone()));
        }
        v
    }

    fn from_tensors(
        t: &HashMap<String, Tensor>,
        dim: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let mut layers = Vec::new();
        let mut fan_in = dim;
        for j in 1..=3 {
            let (wk, bk) = (format!("disc.w{j}"), format!("disc.b{j}"));
            let get = |k: &str| -> Result<Tensor> {
                let x = t
                    .get(k)
                    .ok_or_else(|| Error::invalid(format!("checkpoint lacks tensor `{k}`")))?;
                Ok(x.to_dtype(dtype)?.to_device(device)?)
            };
            let w = get(&wk)?;
            check_shape(
                &wk,
                &w,
                &[Some(fan_in), if j == 3 { Some(3) } else { None }],
            )?;
            let out = w.dim(1)?;
            let b = get(&bk)?;
            check_shape(&bk, &b, &[Some(out)])?;
            layers.push((Var::from_tensor(&w)?, Var::from_tensor(&b)?));
            fan_in = out;
        }
        Ok(Discriminator { layers })
    }

    /// Logits (`n × 3`) of codes `z`.
    fn logits(&self, z: &Tensor) -> Result<Tensor> {
        let mut x = z.clone();
        for (j, (w, b)) in self.layers.iter().enumerate() {
            x = crate::models::kit::precision::matmul(&x, w.as_tensor())?
                .broadcast_add(b.as_tensor())?;
            if j < 2 {
                x = x.relu()?;
            }
        }
        Ok(x)
    }
}

/// A trained (or training) model M / M_adv.
pub struct AdvModel {
    /// Source-query encoder.
    pub qs: Encoder,
    /// Target-query encoder (also the documents' when `dt` is `None`).
    pub qt: Encoder,
    /// Target-document encoder, unless shared with `qt`.
    pub dt: Option<Encoder>,
    /// The discriminator.
    pub disc: Discriminator,
    /// Tokens kept per query (source texts).
    pub max_query_len: usize,
    /// Tokens kept per document (target texts).
    pub max_doc_len: usize,
}

impl AdvModel {
    fn doc_encoder(&self) -> &Encoder {
        self.dt.as_ref().unwrap_or(&self.qt)
    }

    fn generator_vars(&self) -> Vec<(String, Var)> {
        let mut v = self.qs.named_vars("qs");
        v.extend(self.qt.named_vars("qt"));
        if let Some(dt) = &self.dt {
            v.extend(dt.named_vars("dt"));
        }
        v
    }

    /// Runs every encoder's BiLSTM by `r` (a model built from tensors runs
    /// Rosetta's own steps until told otherwise).
    pub fn set_recurrence(&mut self, r: Recurrence) {
        self.qs.recurrence = r;
        self.qt.recurrence = r;
        if let Some(dt) = &mut self.dt {
            dt.recurrence = r;
        }
    }

    /// Rebuilds a model from its named tensors.
    pub fn from_tensors(
        t: &HashMap<String, Tensor>,
        max_query_len: usize,
        max_doc_len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let qs = Encoder::from_tensors("qs", t, dtype, device)?;
        let qt = Encoder::from_tensors("qt", t, dtype, device)?;
        let dt = if t.contains_key("dt.emb") {
            Some(Encoder::from_tensors("dt", t, dtype, device)?)
        } else {
            None
        };
        let dim = qs.dim();
        for (name, e) in [("qt", Some(&qt)), ("dt", dt.as_ref())] {
            if let Some(e) = e {
                if e.dim() != dim || e.vocab() != qt.vocab() {
                    return Err(Error::invalid(format!(
                        "checkpoint: encoder `{name}` has {} terms × {} dims, `qt` {} terms, `qs` {dim} dims",
                        e.vocab(),
                        e.dim(),
                        qt.vocab()
                    )));
                }
            }
        }
        let disc = Discriminator::from_tensors(t, dim, dtype, device)?;
        Ok(AdvModel {
            qs,
            qt,
            dt,
            disc,
            max_query_len,
            max_doc_len,
        })
    }

    /// Unit codes of `seqs` through `side`'s encoder, in chunks sorted by length.
    fn encode_rows(&self, side: Side, seqs: &Sequences) -> Result<Array2<f32>> {
        let (enc, max_len) = match side {
            Side::Source => (&self.qs, self.max_query_len),
            Side::Target => (self.doc_encoder(), self.max_doc_len),
        };
        let n = seqs.n_rows();
        let mut out = Array2::<f32>::zeros((n, enc.dim()));
        let lengths = seqs.lengths();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| lengths[i]);
        let dtype = enc.emb.dtype();
        for chunk in order.chunks(ENCODE_CHUNK) {
            let z = unit_rows(&enc.codes(seqs, chunk, max_len, dtype)?)?;
            let z = to_array(&z)?;
            for (k, &r) in chunk.iter().enumerate() {
                out.row_mut(r).assign(&z.row(k));
            }
        }
        if out.iter().any(|v| !v.is_finite()) {
            return Err(Error::invalid("adv-bilstm: an encoding is not finite"));
        }
        Ok(out)
    }

    fn tensors_named(&self) -> Result<Vec<(String, Tensor)>> {
        let mut v = self.generator_vars();
        v.extend(self.disc.named_vars());
        crate::models::kit::nn::copy_vars(v)
    }
}

impl Model for AdvModel {
    fn kind(&self) -> &'static str {
        NAME
    }
    fn dim(&self) -> usize {
        self.qs.dim()
    }
    fn encode(&self, _side: Side, _counts: &CsrMatrix) -> Result<Array2<f32>> {
        Err(Error::invalid(
            "adv-bilstm reads word order: its texts must be given as sequences, not counts",
        ))
    }
    fn reads_order(&self) -> bool {
        true
    }
    fn encode_sequences(&self, side: Side, seqs: &Sequences) -> Result<Array2<f32>> {
        let vocab = match side {
            Side::Source => self.qs.vocab(),
            Side::Target => self.doc_encoder().vocab(),
        };
        if seqs.n_terms() != vocab {
            return Err(Error::invalid(format!(
                "adv-bilstm: texts over {} terms, the model's {side:?} vocabulary has {vocab}",
                seqs.n_terms()
            )));
        }
        self.encode_rows(side, seqs)
    }
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        let v = match side {
            Side::Source => self.qs.vocab(),
            Side::Target => self.doc_encoder().vocab(),
        };
        let mut s = Sequences::new(v);
        for i in 0..v as u32 {
            s.push_row(&[i]);
        }
        self.encode_rows(side, &s)
    }
    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        self.tensors_named()
    }
}

/// The trainer of `adv-bilstm`.
pub struct AdvTrainer;

/// The registry's constructor.
pub fn adv_bilstm_trainer() -> Box<dyn Trainer> {
    Box::new(AdvTrainer)
}

/// For every training pair, its pseudo-relevant document: the BM25 top hit
/// (Rosetta's BM25, k1 1.2, b 0.75) of the pair's target text in the
/// monolingual collection, skipping a document identical to the query (a
/// copy of the query teaches matching nothing). `None` when no document
/// shares a term.
pub fn pseudo_relevant(
    queries: &Sequences,
    mono: &Sequences,
    vocab: &crate::text::Vocabulary,
) -> Result<Vec<Option<u32>>> {
    let words = |s: &Sequences, i: usize| -> Vec<&str> {
        s.row(i).iter().map(|&t| vocab.term(t)).collect()
    };
    let docs: Vec<Vec<&str>> = (0..mono.n_rows()).map(|i| words(mono, i)).collect();
    let index = Bm25Index::build(&docs, Bm25Params::default())?;
    let qs: Vec<Query> = (0..queries.n_rows())
        .map(|i| Query::from_tokens(&words(queries, i)))
        .collect();
    let hits = index.search_many(&qs, 3);
    Ok(hits
        .iter()
        .enumerate()
        .map(|(i, h)| {
            h.iter()
                .find(|hit| mono.row(hit.doc as usize) != queries.row(i))
                .map(|hit| hit.doc)
        })
        .collect())
}

/// Term vectors of an `init` checkpoint (S2Net or another linear model, or
/// XCNN, rebuilt by its trainer) to start the embeddings from:
/// `(source, target)`, `V × k` each.
fn init_vectors(init: &InitWeights, vocabs: &Vocabs) -> Result<(Array2<f32>, Array2<f32>)> {
    let ck = &init.checkpoint;
    if let Some(p) = init.tensors.get(PROJ_SOURCE) {
        let k = p.dim(1)?;
        let (s, g) = init_projections(init, vocabs, k)?;
        return Ok((linear::unit_rows(s), linear::unit_rows(g)));
    }
    if let Some(w1) = init.tensors.get("src.w1") {
        // an XCNN checkpoint: its model, with the shapes it holds
        let layers = (1..)
            .take_while(|j| init.tensors.contains_key(&format!("src.w{j}")))
            .count();
        let shape = Params::new(BTreeMap::from([
            ("dim".to_string(), w1.dim(1)?.to_string()),
            ("layers".to_string(), layers.to_string()),
        ]));
        if let Some(kind) = init.kind.as_deref().filter(|k| *k != super::xcnn::DEF.name) {
            return Err(Error::file(
                ck,
                format!("init: XCNN tensors (src.w1) in a checkpoint whose metadata says `{kind}`"),
            ));
        }
        let m = super::xcnn::XcnnTrainer
            .load(vocabs, init.tensors.clone(), &shape, &Device::Cpu)
            .map_err(|e| Error::file(ck, format!("init: {e}")))?;
        let (s, t) = (m.term_vectors(Side::Source)?, m.term_vectors(Side::Target)?);
        for (side, rows, v) in [
            ("source", s.nrows(), &vocabs.source),
            ("target", t.nrows(), &vocabs.target),
        ] {
            if rows != v.len() {
                return Err(Error::file(
                    ck,
                    format!("init: the session's {side} vocabulary differs from this job's"),
                ));
            }
        }
        return Ok((s, t));
    }
    Err(Error::file(
        ck,
        "init: not a linear (cl-lsi, opca, cca, s2net) or xcnn checkpoint",
    ))
}

/// Renames an optimiser's state tensors `adam.*` to `PREFIX.adam.*` (two
/// optimisers share one checkpoint).
fn prefixed(prefix: &str, state: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    state
        .into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// The state tensors of `prefix` with the prefix taken off.
fn unprefixed(prefix: &str, t: &HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    let p = format!("{prefix}.");
    t.iter()
        .filter_map(|(n, x)| Some((n.strip_prefix(&p)?.to_string(), x.clone())))
        .collect()
}

/// Scales the gradients of `vars` so their global norm is at most
/// `max_norm`, on the device; returns the norm before clipping.
fn clip_grads(
    grads: &mut GradStore,
    vars: &[(String, Var)],
    max_norm: f64,
) -> Result<Option<Tensor>> {
    let mut sq: Option<Tensor> = None;
    for (_, v) in vars {
        if let Some(g) = grads.get(v.as_tensor()) {
            let s = g.sqr()?.sum_all()?;
            sq = Some(match sq {
                None => s,
                Some(a) => (a + s)?,
            });
        }
    }
    let Some(sq) = sq else {
        return Ok(None);
    };
    let norm = sq.sqrt()?;
    if max_norm > 0.0 {
        let scale = (norm.clone() / max_norm)?.maximum(1.0)?.recip()?;
        for (_, v) in vars {
            if let Some(g) = grads.get(v.as_tensor()) {
                let c = g.broadcast_mul(&scale)?;
                grads.insert(v.as_tensor(), c);
            }
        }
    }
    Ok(Some(norm))
}

/// Mean of `softplus(−β·(cos(q, p) − cos(q, n)))`: the cross-entropy of the
/// positive ranked over the negative (P = 1).
fn match_loss(q: &Tensor, p: &Tensor, n: &Tensor, beta: f64) -> Result<Tensor> {
    let (q, p, n) = (unit_rows(q)?, unit_rows(p)?, unit_rows(n)?);
    let delta = ((&q * &p)?.sum(1)? - (&q * &n)?.sum(1)?)?;
    let x = (delta * (-beta))?;
    let sp = crate::models::kit::nn::softplus(&x)?;
    Ok(sp.mean_all()?)
}

/// One encoder pass: encoder, texts, rows, tokens kept.
type EncodeJob<'a> = (&'a Encoder, &'a Sequences, &'a [usize], usize);

/// A step's encoder passes. In order on one graph, or (on the CPU with more
/// than one thread) each on its own OS thread with its own graph: the loss
/// then reads detached copies of the codes, and [`Passes::backward`] carries
/// its gradient back through every pass in parallel (`Σ z·∂L/∂z` per pass),
/// adding the encoders' gradients to the loss's.
struct Passes {
    /// The codes as the passes computed them (with their graphs).
    graphs: Vec<Tensor>,
    /// The codes the loss reads: detached leaves when split, else `graphs`.
    leaves: Option<Vec<Var>>,
}

/// Joins scoped threads' results (a panic becomes an error).
fn join_all<T>(handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T>>>) -> Result<Vec<T>> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| Error::invalid("adv-bilstm: an encoder thread panicked"))?
        })
        .collect()
}

impl Passes {
    fn forward(jobs: &[EncodeJob], parallel: bool, dtype: DType) -> Result<Passes> {
        if !parallel {
            let graphs = jobs
                .iter()
                .map(|(e, s, r, l)| e.codes(s, r, *l, dtype))
                .collect::<Result<Vec<_>>>()?;
            return Ok(Passes {
                graphs,
                leaves: None,
            });
        }
        // the trainer's precision holds on the passes' threads too
        let precision = crate::models::kit::precision::current();
        let graphs = std::thread::scope(|sc| {
            join_all(
                jobs.iter()
                    .map(|(e, s, r, l)| {
                        sc.spawn(move || {
                            let _p = precision.enter_thread();
                            e.codes(s, r, *l, dtype)
                        })
                    })
                    .collect(),
            )
        })?;
        let leaves = graphs
            .iter()
            .map(|z| Ok(Var::from_tensor(&z.detach())?))
            .collect::<Result<Vec<_>>>()?;
        Ok(Passes {
            graphs,
            leaves: Some(leaves),
        })
    }

    /// The codes for the loss, one per pass.
    fn codes(&self) -> Vec<Tensor> {
        match &self.leaves {
            Some(l) => l.iter().map(|v| v.as_tensor().clone()).collect(),
            None => self.graphs.clone(),
        }
    }

    /// Completes `grads` (the loss's) with the encoders' gradients of `vars`.
    fn backward(&self, grads: &mut GradStore, vars: &[(String, Var)]) -> Result<()> {
        let Some(leaves) = &self.leaves else {
            return Ok(());
        };
        let upstream: Vec<Option<Tensor>> = leaves
            .iter()
            .map(|l| grads.get(l.as_tensor()).cloned())
            .collect();
        let stores = std::thread::scope(|sc| {
            join_all(
                self.graphs
                    .iter()
                    .zip(&upstream)
                    .filter_map(|(z, g)| Some((z, g.as_ref()?)))
                    .map(|(z, g)| sc.spawn(move || Ok((z * g)?.sum_all()?.backward()?)))
                    .collect(),
            )
        })?;
        for (_, v) in vars {
            let mut total = grads.get(v.as_tensor()).cloned();
            for st in &stores {
                if let Some(g) = st.get(v.as_tensor()) {
                    total = Some(match total {
                        None => g.clone(),
                        Some(t) => (t + g)?,
                    });
                }
            }
            if let Some(t) = total {
                grads.insert(v.as_tensor(), t);
            }
        }
        Ok(())
    }
}

/// The S2Net in-batch loss of seed 003's peer (`torch_ref.py --model
/// bilstm`): mean over ordered pairs i ≠ j of softplus(−β·(cos(s_i, t_i) −
/// cos(s_i, t_j))).
fn in_batch_loss(zs: &Tensor, zt: &Tensor, beta: f64) -> Result<Tensor> {
    let n = zs.dim(0)?;
    if n < 2 {
        return Ok(Tensor::zeros((), zs.dtype(), zs.device())?);
    }
    let c = crate::models::kit::precision::matmul(&unit_rows(zs)?, &unit_rows(zt)?.t()?)?;
    let own = c
        .mul(&Tensor::eye(n, c.dtype(), c.device())?)?
        .sum_keepdim(1)?;
    let x = (c.broadcast_sub(&own)? * beta)?;
    let sp = crate::models::kit::nn::softplus(&x)?;
    // the diagonal adds softplus(0) = ln 2 per row: taken out of the mean
    let total = (sp.sum_all()? - (n as f64) * std::f64::consts::LN_2)?;
    Ok((total / (n * (n - 1)) as f64)?)
}

/// The data one epoch draws from.
struct Pairs {
    /// Training pairs with both sides known and a pseudo-relevant document.
    rows: Vec<usize>,
    /// Their documents (rows of `mono`).
    positive: Vec<u32>,
}

impl AdvTrainer {
    /// The training pairs, with their pseudo-relevant documents when the
    /// matching losses are on (`docs`); without them every pair with both
    /// sides known trains (document 0 stands in, never read).
    fn pairs(data: &TrainData, docs: bool, hooks: &mut dyn Hooks) -> Result<Pairs> {
        let s = data.seqs.as_ref().ok_or_else(|| {
            Error::invalid("adv-bilstm reads word order: the training data has no sequences")
        })?;
        let both: Vec<usize> = (0..s.train_src.n_rows())
            .filter(|&i| !s.train_src.row(i).is_empty() && !s.train_tgt.row(i).is_empty())
            .collect();
        if !docs {
            hooks.log(&format!(
                "adv-bilstm: {} training pairs; γ₂ = γ₃ = 0: no documents, no matching losses",
                both.len()
            ));
            return Ok(Pairs {
                positive: vec![0; both.len()],
                rows: both,
            });
        }
        let pos = pseudo_relevant(
            &s.train_tgt.select_rows(&both),
            &s.mono,
            &data.vocabs.target,
        )?;
        let mut out = Pairs {
            rows: Vec::new(),
            positive: Vec::new(),
        };
        for (k, &i) in both.iter().enumerate() {
            if let Some(p) = pos[k] {
                out.rows.push(i);
                out.positive.push(p);
            }
        }
        hooks.log(&format!(
            "adv-bilstm: {} training pairs, {} with a pseudo-relevant document among {} monolingual texts",
            both.len(),
            out.rows.len(),
            s.mono.n_rows()
        ));
        Ok(out)
    }
}

impl Trainer for AdvTrainer {
    /// The three encoders' (two with `share_target`) embeddings, BiLSTMs
    /// and NN_dim layers and the discriminator, with gradients and Adam
    /// moments, and a batch's LSTM activations (gates and outputs of both
    /// directions at every step of the longest text) per encoder.
    fn memory_estimate(
        &self,
        params: &Params,
        sizes: &crate::models::DataSizes,
    ) -> Result<Option<crate::models::MemoryEstimate>> {
        let cfg = AdvConfig::from_params(params)?;
        let (e, h) = (cfg.emb as f64, cfg.hidden as f64);
        let mut ff = 0.0;
        let mut fan_in = 2.0 * h;
        for &w in cfg.nn_hidden.iter().chain(std::iter::once(&cfg.dim)) {
            ff += fan_in * w as f64 + w as f64;
            fan_in = w as f64;
        }
        let encoder = |vocab: usize| vocab as f64 * e + e * 8.0 * h + 8.0 * h + 8.0 * h * h + ff;
        let mut p = encoder(sizes.source_terms) + encoder(sizes.target_terms);
        if !cfg.share_target {
            p += encoder(sizes.target_terms);
        }
        let dh = cfg.disc_hidden as f64;
        p += cfg.dim as f64 * dh + dh + dh * dh + dh + 3.0 * dh + 3.0;
        let steps = cfg.max_query_len.max(cfg.max_doc_len) as f64;
        let encoders = if cfg.share_target { 2.0 } else { 3.0 };
        let act = encoders * cfg.batch as f64 * steps * 10.0 * h;
        Ok(Some(crate::models::MemoryEstimate::adam_f32(p, act)))
    }

    fn check(&self, params: &Params) -> Result<()> {
        let cfg = AdvConfig::from_params(params)?;
        if cfg.gamma[1] == 0.0 && cfg.gamma[2] == 0.0 && !cfg.share_target {
            return Err(Error::invalid(
                "adv-bilstm: with gamma_matc=0 and gamma_matm=0 no document is encoded, so the \
                 document encoder would never train; add --set share_target=true",
            ));
        }
        if let Some((a, b)) = &cfg.vectors {
            for p in [a, b] {
                if !p.is_file() {
                    return Err(Error::file(p, "vectors: no such file"));
                }
            }
        }
        Ok(())
    }

    /// One phase, `train`, early-stopped on validation MRR.
    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let cfg = AdvConfig::from_params(params)?;
        Ok(vec![Phase::new(
            "train",
            cfg.epochs,
            data.train_src.n_rows(),
        )])
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
        let cfg = AdvConfig::from_params(params)?;
        params.check_unused()?;
        let _precision = cfg.precision.enter(NAME, device)?;
        data.check_shapes(NAME)?;
        let dtype = DType::F32;
        let docs = cfg.gamma[1] > 0.0 || cfg.gamma[2] > 0.0;
        let pairs = Self::pairs(data, docs, hooks)?;
        if pairs.rows.is_empty() && cfg.epochs > 0 {
            return Err(Error::invalid(
                "adv-bilstm: no training pair has known terms on both sides and a pseudo-relevant document",
            ));
        }
        let seqs = data.seqs.as_ref().expect("checked by pairs");
        let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut step, mut start) = (0usize, 0usize);
        let mut model = match &resume {
            Some(r) => {
                if r.phase != "train" {
                    return Err(Error::invalid(format!(
                        "adv-bilstm: cannot resume from phase {:?}",
                        r.phase
                    )));
                }
                step = r.step;
                start = r.epoch;
                let m = AdvModel::from_tensors(
                    &r.tensors,
                    cfg.max_query_len,
                    cfg.max_doc_len,
                    dtype,
                    device,
                )?;
                if m.qs.vocab() != vs || m.qt.vocab() != vt || m.dim() != cfg.dim {
                    return Err(Error::invalid(
                        "adv-bilstm: the checkpoint's shapes differ from this job's vocabularies or dim",
                    ));
                }
                m
            }
            None => {
                let init = match (&cfg.init, &cfg.vectors) {
                    (None, None) if cfg.vectors_session.is_some() => {
                        let dir = cfg.vectors_session.as_deref().unwrap_or(Path::new("."));
                        let f = crate::models::kit::pretrained::start(
                            data.pretrained.as_ref(),
                            dir,
                            NAME,
                            cfg.emb,
                            cfg.init_scale,
                            &mut rng,
                            hooks,
                        )?;
                        Some((f.source, f.target))
                    }
                    (Some(dir), _) => {
                        let (s, t) = init_vectors(data.init_for(NAME)?, &data.vocabs)?;
                        hooks.log(&format!(
                            "adv-bilstm: embeddings start from the term vectors of {} ({} dims)",
                            dir.display(),
                            s.ncols()
                        ));
                        Some((s, t))
                    }
                    (None, Some((a, b))) => {
                        let s = crate::text::read_vec(a, &data.vocabs.source)?;
                        let t = crate::text::read_vec(b, &data.vocabs.target)?;
                        hooks.log(&format!(
                            "adv-bilstm: embeddings start from {} ({} of {} terms found) and {} ({} of {})",
                            a.display(),
                            s.hits,
                            vs,
                            b.display(),
                            t.hits,
                            vt
                        ));
                        Some((s.rows, t.rows))
                    }
                    (None, None) => {
                        hooks.log("adv-bilstm: random embeddings");
                        None
                    }
                };
                if let Some((s, _)) = &init {
                    if s.ncols() != cfg.emb {
                        return Err(Error::invalid(format!(
                            "adv-bilstm: the starting vectors have {} dims; set --set emb={}",
                            s.ncols(),
                            s.ncols()
                        )));
                    }
                }
                let qs = Encoder::random(
                    vs,
                    &cfg,
                    init.as_ref().map(|x| &x.0),
                    &mut rng,
                    dtype,
                    device,
                )?;
                let qt = Encoder::random(
                    vt,
                    &cfg,
                    init.as_ref().map(|x| &x.1),
                    &mut rng,
                    dtype,
                    device,
                )?;
                let dt = if cfg.share_target {
                    None
                } else {
                    Some(Encoder::random(
                        vt,
                        &cfg,
                        init.as_ref().map(|x| &x.1),
                        &mut rng,
                        dtype,
                        device,
                    )?)
                };
                let disc =
                    Discriminator::random(cfg.dim, cfg.disc_hidden, &mut rng, dtype, device)?;
                AdvModel {
                    qs,
                    qt,
                    dt,
                    disc,
                    max_query_len: cfg.max_query_len,
                    max_doc_len: cfg.max_doc_len,
                }
            }
        };
        cfg.recurrence.check_build()?;
        if cfg.recurrence == Recurrence::Cudnn && !device.is_cuda() {
            return Err(Error::invalid(
                "adv-bilstm: recurrence=cudnn runs on a CUDA device; this job's device is the CPU",
            ));
        }
        model.set_recurrence(cfg.recurrence);
        let gen_vars = model.generator_vars();
        // on the CPU, the encoder passes run on their own threads with
        // candle's kernels single-threaded: candle's spinning worker pool
        // costs more than it gives on a BiLSTM's small per-step products
        let parallel = device.is_cpu() && cfg.threads > 1;
        if parallel {
            crate::models::kit::nn::single_threaded_candle();
        }
        let mut opt_g = Adam::new(gen_vars.clone(), cfg.lr, 0.0)?;
        let mut opt_d = Adam::new(model.disc.named_vars(), cfg.disc_lr, 0.0)?;
        if let Some(r) = &resume {
            opt_g.restore(&unprefixed("gen", &r.tensors))?;
            opt_d.restore(&unprefixed("disc", &r.tensors))?;
        }
        let mut reg_weights: Vec<&Tensor> = model.qs.weights();
        reg_weights.extend(model.qt.weights());
        if let Some(dt) = &model.dt {
            reg_weights.extend(dt.weights());
        }
        let n_mono = seqs.mono.n_rows();
        let lengths = {
            let l = seqs.train_src.lengths();
            pairs.rows.iter().map(|&i| l[i]).collect::<Vec<_>>()
        };
        hooks.log(&format!(
            "adv-bilstm: model {} ({} encoders), emb {}, BiLSTM {}×2, NN_dim {:?}→{}, batch {}, lr {}",
            match (cfg.adversarial, cfg.adv_loss) {
                (false, _) => "M_adv (no adversary)",
                (true, AdvLoss::Minimax) => "M",
                (true, AdvLoss::Confusion) => "M, confusion adversary",
            },
            if model.dt.is_some() { 3 } else { 2 },
            cfg.emb,
            cfg.hidden,
            cfg.nn_hidden,
            cfg.dim,
            cfg.batch,
            cfg.lr
        ));
        let embeddings: Vec<&str> = gen_vars
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| n.ends_with(".emb"))
            .collect();
        for epoch in start + 1..=cfg.epochs {
            // the pretrained embeddings held while the encoders adapt
            opt_g.freeze(if epoch <= cfg.frozen_epochs {
                &embeddings
            } else {
                &[]
            })?;
            hooks.epoch_start("train", epoch);
            let mut rng = epoch_rng(seed, 3, epoch);
            for batch in length_batches(&lengths, cfg.batch, &mut rng) {
                let b = batch.len();
                let rows: Vec<usize> = batch.iter().map(|&k| pairs.rows[k]).collect();
                let pos: Vec<usize> = batch.iter().map(|&k| pairs.positive[k] as usize).collect();
                let neg: Vec<usize> = if !docs {
                    Vec::new()
                } else {
                    pos.iter()
                        .map(|&p| {
                            let mut n = rng.random_range(0..n_mono);
                            if n == p && n_mono > 1 {
                                n = (n + 1 + rng.random_range(0..n_mono - 1)) % n_mono;
                            }
                            n
                        })
                        .collect()
                };
                // the encoder passes: q_s, q_t, and with the matching
                // losses d_t+ and d_t−
                let mut jobs: Vec<EncodeJob> = vec![
                    (&model.qs, &seqs.train_src, &rows, cfg.max_query_len),
                    (&model.qt, &seqs.train_tgt, &rows, cfg.max_query_len),
                ];
                if docs {
                    let denc = model.doc_encoder();
                    jobs.push((denc, &seqs.mono, &pos, cfg.max_doc_len));
                    jobs.push((denc, &seqs.mono, &neg, cfg.max_doc_len));
                }
                let passes = Passes::forward(&jobs, parallel, dtype)?;
                let codes = passes.codes();
                let (zs, zt) = (&codes[0], &codes[1]);
                let l_tra = (zs - zt)?.sqr()?.sum(1)?.mean_all()?;
                let l_ib = if cfg.gamma_inbatch > 0.0 {
                    in_batch_loss(zs, zt, cfg.beta_inbatch)?
                } else {
                    Tensor::zeros((), dtype, device)?
                };
                let (l_matc, l_matm, zp) = if docs {
                    let (zp, zn) = (&codes[2], &codes[3]);
                    (
                        match_loss(zs, zp, zn, cfg.beta_c)?,
                        match_loss(zt, zp, zn, cfg.beta_m)?,
                        Some(zp),
                    )
                } else {
                    let zero = Tensor::zeros((), dtype, device)?;
                    (zero.clone(), zero, None)
                };
                let mut l_reg = Tensor::zeros((), dtype, device)?;
                for w in &reg_weights {
                    l_reg = (l_reg + w.sqr()?.sum_all()?)?;
                }
                let l_reg = (l_reg * cfg.reg)?;
                let [g1, g2, g3] = cfg.gamma;
                let l_g = ((&l_tra * g1)?
                    + (&l_matc * g2)?
                    + (&l_matm * g3)?
                    + (&l_ib * cfg.gamma_inbatch)?
                    + &l_reg)?;
                // the discriminator: k steps on this batch's codes, detached
                let mut sources = vec![zs, zt];
                sources.extend(zp);
                let z = Tensor::cat(&sources, 0)?;
                let n_src = sources.len() as u32;
                let labels: Vec<u32> = (0..n_src).flat_map(|c| std::iter::repeat_n(c, b)).collect();
                let labels = Tensor::from_vec(labels, n_src as usize * b, device)?;
                let zd = z.detach();
                let mut d_loss = Tensor::zeros((), dtype, device)?;
                let mut d_acc = Tensor::zeros((), dtype, device)?;
                for _ in 0..cfg.disc_steps {
                    let logits = model.disc.logits(&zd)?;
                    d_loss = candle_nn::loss::cross_entropy(&logits, &labels)?;
                    d_acc = logits
                        .argmax(D::Minus1)?
                        .eq(&labels)?
                        .to_dtype(dtype)?
                        .mean_all()?;
                    opt_d.backward_step(&d_loss)?;
                }
                // the generator: L_G, minus λ·CE of the updated discriminator
                // (M, minimax), or plus λ·its confusion term
                let loss = if cfg.adversarial {
                    let logits = model.disc.logits(&z)?;
                    match cfg.adv_loss {
                        AdvLoss::Minimax => {
                            let ce = candle_nn::loss::cross_entropy(&logits, &labels)?;
                            (&l_g - (ce * cfg.adv_weight)?)?
                        }
                        AdvLoss::Confusion => {
                            (&l_g + (confusion_loss(&logits)? * cfg.adv_weight)?)?
                        }
                    }
                } else {
                    l_g.clone()
                };
                let mut grads = loss.backward()?;
                passes.backward(&mut grads, &gen_vars)?;
                let gnorm = clip_grads(&mut grads, &gen_vars, cfg.clip)?.unwrap_or(Tensor::zeros(
                    (),
                    dtype,
                    device,
                )?);
                opt_g.step(&grads)?;
                step += 1;
                // one read-back of every logged scalar
                let figs = Tensor::stack(
                    &[
                        &loss,
                        &l_tra,
                        &l_matc,
                        &l_matm,
                        &l_ib,
                        &l_reg,
                        &d_loss,
                        &d_acc,
                        &gnorm.to_dtype(dtype)?,
                    ],
                    0,
                )?
                .to_dtype(DType::F64)?
                .to_vec1::<f64>()?;
                check_loss(NAME, figs[0], "train", step)?;
                let names = [
                    "L_tra",
                    "L_matc",
                    "L_matm",
                    "L_inbatch",
                    "L_reg",
                    "disc_loss",
                    "disc_acc",
                    "grad_norm",
                ];
                let flow = hooks.step(&StepReport {
                    phase: "train".into(),
                    epoch,
                    step,
                    loss: figs[0],
                    examples: b,
                    parts: names
                        .iter()
                        .zip(&figs[1..])
                        .map(|(n, v)| (n.to_string(), *v))
                        .collect(),
                })?;
                if flow == Flow::Stop {
                    return Ok(Box::new(model));
                }
            }
            let mut extra = prefixed("gen", opt_g.state()?);
            extra.extend(prefixed("disc", opt_d.state()?));
            if hooks.epoch_end("train", epoch, &model, extra)? == Flow::Stop {
                break;
            }
        }
        Ok(Box::new(model))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>> {
        let cfg = AdvConfig::from_params(params)?;
        let mut m = AdvModel::from_tensors(
            &tensors,
            cfg.max_query_len,
            cfg.max_doc_len,
            DType::F32,
            device,
        )?;
        // a session trained with cuDNN's recurrence encodes with it on a GPU
        // of a cuDNN build, and with Rosetta's own elsewhere
        m.set_recurrence(cfg.recurrence.on(device));
        if m.qs.vocab() != vocabs.source.len() || m.qt.vocab() != vocabs.target.len() {
            return Err(Error::invalid(format!(
                "adv-bilstm checkpoint has {} × {} terms but the vocabularies have {} × {}",
                m.qs.vocab(),
                m.qt.vocab(),
                vocabs.source.len(),
                vocabs.target.len()
            )));
        }
        if m.dim() != cfg.dim {
            return Err(Error::invalid(format!(
                "adv-bilstm checkpoint has dim {}, the session's settings say {}",
                m.dim(),
                cfg.dim
            )));
        }
        Ok(Box::new(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The confusion term is zero where the discriminator cannot tell the
    /// sources apart, its closed form elsewhere, and its gradient moves the
    /// logits towards equal values.
    #[test]
    fn confusion_loss_is_zero_only_at_uniform_output() {
        let dev = Device::Cpu;
        let even = Tensor::new(&[[0.0f64, 0.0, 0.0], [2.0, 2.0, 2.0]], &dev).unwrap();
        let v: f64 = confusion_loss(&even).unwrap().to_scalar().unwrap();
        assert!(v.abs() < 1e-12, "{v}");
        // one row (a, 0, 0): −(1/3)·Σ log p − ln 3 with p = softmax
        let a = 3.0f64;
        let z = a.exp() + 2.0;
        let want = -((a - z.ln()) + 2.0 * (-z.ln())) / 3.0 - 3f64.ln();
        let x = Var::new(&[[a, 0.0, 0.0]], &dev).unwrap();
        let l = confusion_loss(x.as_tensor()).unwrap();
        let got: f64 = l.to_scalar().unwrap();
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        assert!(got > 0.1);
        let g = l.backward().unwrap();
        let g = g.get(&x).unwrap().to_vec2::<f64>().unwrap();
        // d/dx_c = p_c − 1/3: the large logit is pushed down, the others up
        assert!(g[0][0] > 0.0 && g[0][1] < 0.0 && g[0][2] < 0.0, "{g:?}");
        assert!((g[0][0] - (a.exp() / z - 1.0 / 3.0)).abs() < 1e-12);
    }

    /// NN_dim starts as torch's `nn.Linear` (what `torch_ref.py --model
    /// bilstm` trains): weight and bias uniform in ±1/√fan_in, variance
    /// 1/(3·fan_in). The former N(0, 1/fan_in) weights with zero biases made
    /// the codes ~3× larger at the start, so the unnormalised translation
    /// loss outweighed the in-batch loss and the model learnt about half as
    /// much per epoch as the peer (docs/results.md, issue 41).
    #[test]
    fn nn_dim_starts_as_torch_linear() {
        let mut given = std::collections::BTreeMap::new();
        for (k, v) in [
            ("emb", "4"),
            ("hidden", "16"),
            ("nn_hidden", "256"),
            ("dim", "64"),
        ] {
            given.insert(k.to_string(), v.to_string());
        }
        let cfg = AdvConfig::from_params(&Params::new(given)).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let enc = Encoder::random(10, &cfg, None, &mut rng, DType::F32, &Device::Cpu).unwrap();
        assert_eq!(enc.ff.len(), 2);
        for (j, (w, b)) in enc.ff.iter().enumerate() {
            let fan_in = w.dims()[0];
            let k = 1.0 / (fan_in as f64).sqrt();
            for (name, t) in [("weight", w), ("bias", b)] {
                let v: Vec<f64> = t
                    .as_tensor()
                    .flatten_all()
                    .unwrap()
                    .to_dtype(DType::F64)
                    .unwrap()
                    .to_vec1()
                    .unwrap();
                let n = v.len() as f64;
                let max = v.iter().fold(0f64, |m, x| m.max(x.abs()));
                assert!(max <= k, "layer {j} {name}: |x| up to {max}, bound {k}");
                assert!(max > 0.9 * k, "layer {j} {name}: |x| only up to {max}");
                let mean = v.iter().sum::<f64>() / n;
                let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
                let want = k * k / 3.0;
                // sampling error of the variance of a uniform: ~0.9·want/√n
                let tol = 5.0 * want / n.sqrt();
                assert!(
                    (var - want).abs() < tol.max(0.25 * want),
                    "layer {j} {name}: variance {var}, torch's {want}"
                );
                assert!(
                    mean.abs() < 5.0 * k / (3.0 * n).sqrt(),
                    "layer {j} {name}: mean {mean}"
                );
            }
        }
    }
}
