//! BAE, a bilingual autoencoder: one shared sigmoid code layer between two
//! languages' bags of words, untied sigmoid decoders trained with binary
//! cross-entropy (six reconstructions per pair: each language from itself,
//! from the other, from both), minus a correlation term between the two
//! languages' codes. Document and term vectors are codes centred by the
//! language's mean training code and scaled to unit length. The trainer
//! keeps the epoch of best validation MRR. Paper, choices and measured notes:
//! `docs/models.md`.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use candle_nn::ops::sigmoid;
use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::models::kit::nn::{
    epoch_rng, normal_tensor, report_step, to_array, unit_rows, valid_mrr, SparseBatch,
};
use crate::models::kit::optim::Adam;
use crate::models::settings::ModelDef;
use crate::models::settings::{
    self, boxed, model_config, s, Check, ModelConfig, Settings, BATCH, DIM, EPOCHS, FROZEN_EPOCHS,
    OPTIM, PRECISION, VALID_MAX, VECTORS, WEIGHT_DECAY,
};
use crate::models::{Flow, Hooks, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::CsrMatrix;
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

/// Settings of a BAE job, read from [`Params`].
#[derive(Debug, Clone)]
pub struct BaeConfig {
    /// Code size `k`.
    pub dim: usize,
    /// Mini-batch size.
    pub batch: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Epochs (maximum).
    pub epochs: usize,
    /// Binary bags (`true`) or raw counts as encoder input.
    pub binary: bool,
    /// Weight of the correlation term.
    pub corr: f64,
    /// Centre codes by each language's mean training code.
    pub center: bool,
    /// Scale of the normal initialisation.
    pub init_scale: f64,
    /// Validation pairs used to pick the best epoch.
    pub valid_max: usize,
    /// Row-sparse ("lazy") Adam on the encoder tables (and on the decoder
    /// rows a sampled reconstruction uses).
    pub lazy: bool,
    /// Reconstruction over the whole vocabulary (`None`) or over the batch's
    /// terms plus this many sampled other terms.
    pub sampled: Option<usize>,
    /// Session whose term vectors start the encoders (`vectors=`).
    pub vectors: Option<std::path::PathBuf>,
    /// First epochs with the encoders' tables held fixed (needs `vectors`).
    pub frozen_epochs: usize,
    /// `precision`: the arithmetic of the decoders' products.
    pub precision: crate::models::kit::precision::Precision,
}

model_config! {
    /// The bilingual autoencoder's settings, as given (`--set`) and
    /// recorded (`config.toml`).
    pub struct Config {
        batch: usize = s("100", BATCH, "pairs per minibatch"),
        center: String = s(
            "side",
            Check::Choice(&["side", "none"]),
            "centre the codes per language",
        ),
        corr: f64 = s("5", Check::NonNegative, "weight of the correlation term"),
        dim: usize = DIM,
        epochs: usize = s("50", EPOCHS, "training epochs"),
        frozen_epochs: usize = FROZEN_EPOCHS,
        init_scale: f64 = s("0.1", Check::Positive, "std of the random start"),
        input: String = s(
            "binary",
            Check::Choice(&["binary", "tf"]),
            "binary bags or term counts",
        ),
        lr: f64 = s("0.01", Check::Positive, "Adam learning rate"),
        optim: String = s("adam", OPTIM, "dense Adam or row-sparse lazy Adam"),
        precision: String = PRECISION,
        recon: String = s("full", Check::Parse(check_recon), "full or sampled:N reconstruction"),
        valid_max: usize = VALID_MAX,
        vectors: String = VECTORS,
        weight_decay: f64 = WEIGHT_DECAY,
    }
}

impl ModelConfig for Config {
    fn vectors(&self) -> Result<Option<crate::models::kit::pretrained::VectorsSetting>> {
        settings::vectors(&self.vectors)
    }
    fn precision(&self) -> Result<Option<crate::models::kit::precision::Precision>> {
        settings::precision(&self.precision)
    }
}

/// The bilingual autoencoder in the registry.
pub static DEF: ModelDef = ModelDef {
    name: "bae",
    summary: "bilingual autoencoder with cross-reconstruction and a correlation term",
    space: true,
    runner: true,
    gpu: true,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(bae_trainer),
    // measured on enhi: stop words kept cost every figure (BLI P@1
    // 0.22 -> 0.15); its old text settings stay
    text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    presets: &[],
};

fn check_recon(v: &str) -> std::result::Result<(), String> {
    match v.strip_prefix("sampled:").map(str::parse::<usize>) {
        _ if v == "full" => Ok(()),
        Some(Ok(n)) if n > 0 => Ok(()),
        _ => Err(format!("expected full or sampled:N (N ≥ 1), got `{v}`")),
    }
}

impl BaeConfig {
    /// Reads (and records) every setting; the registry checks the values.
    pub fn from_params(p: &Params) -> Result<Self> {
        let p = Config::from_params(p, "bae")?;
        let c = BaeConfig {
            dim: p.dim,
            batch: p.batch,
            lr: p.lr,
            weight_decay: p.weight_decay,
            epochs: p.epochs,
            // the check admits binary or tf, side or none
            binary: p.input == "binary",
            corr: p.corr,
            center: p.center == "side",
            init_scale: p.init_scale,
            valid_max: p.valid_max,
            sampled: {
                match p.recon.as_str() {
                    "full" => None,
                    o => match o.strip_prefix("sampled:").map(|n| n.parse::<usize>()) {
                        Some(Ok(n)) if n > 0 => Some(n),
                        _ => {
                            return Err(Error::invalid(format!(
                                "bae: recon={o}: expected full or sampled:N (N >= 1)"
                            )))
                        }
                    },
                }
            },
            lazy: crate::models::kit::nn::lazy_optim(&p.optim),
            vectors: crate::models::kit::pretrained::setting(&p.vectors)?
                .session()
                .map(std::path::Path::to_path_buf),
            frozen_epochs: p.frozen_epochs,
            precision: crate::models::kit::precision::setting(&p.precision)?,
        };
        crate::models::kit::pretrained::check_frozen("bae", c.frozen_epochs, c.vectors.is_some())?;
        Ok(c)
    }
}

/// A bilingual autoencoder's parameters.
pub struct BaeModel {
    enc_src: Var,
    enc_tgt: Var,
    enc_b: Var,
    dec_src: Var,
    dec_src_c: Var,
    dec_tgt: Var,
    dec_tgt_c: Var,
    mean_src: Tensor,
    mean_tgt: Tensor,
    binary: bool,
}

const NAMES: [&str; 7] = [
    "enc.src.w",
    "enc.tgt.w",
    "enc.b",
    "dec.src.w",
    "dec.src.c",
    "dec.tgt.w",
    "dec.tgt.c",
];

impl BaeModel {
    fn random(
        vs: usize,
        vt: usize,
        cfg: &BaeConfig,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Self> {
        let (k, s, dt) = (cfg.dim, cfg.init_scale, DType::F32);
        let v = |t: Tensor| Var::from_tensor(&t);
        Ok(BaeModel {
            enc_src: v(normal_tensor((vs, k), s, rng, dt, device)?)?,
            enc_tgt: v(normal_tensor((vt, k), s, rng, dt, device)?)?,
            enc_b: v(Tensor::zeros(k, dt, device)?)?,
            dec_src: v(normal_tensor((vs, k), s, rng, dt, device)?)?,
            dec_src_c: v(Tensor::zeros(vs, dt, device)?)?,
            dec_tgt: v(normal_tensor((vt, k), s, rng, dt, device)?)?,
            dec_tgt_c: v(Tensor::zeros(vt, dt, device)?)?,
            mean_src: Tensor::zeros(k, dt, device)?,
            mean_tgt: Tensor::zeros(k, dt, device)?,
            binary: cfg.binary,
        })
    }

    /// The model from checkpoint tensors.
    pub fn from_tensors(tensors: &HashMap<String, Tensor>, device: &Device) -> Result<Self> {
        let get = |n: &str| -> Result<Tensor> {
            Ok(tensors
                .get(n)
                .ok_or_else(|| Error::invalid(format!("bae checkpoint lacks {n}")))?
                .to_dtype(DType::F32)?
                .to_device(device)?)
        };
        let var = |n: &str| -> Result<Var> { Ok(Var::from_tensor(&get(n)?)?) };
        for (n, rank) in [
            ("enc.src.w", 2),
            ("enc.tgt.w", 2),
            ("enc.b", 1),
            ("dec.src.w", 2),
            ("dec.tgt.w", 2),
        ] {
            crate::models::kit::nn::check_shape(n, &get(n)?, &vec![None; rank])?;
        }
        let binary = get("cfg.binary")?.flatten_all()?.to_vec1::<f32>()?;
        let binary = *binary
            .first()
            .ok_or_else(|| Error::invalid("checkpoint tensor `cfg.binary` is empty"))?
            != 0.0;
        let m = BaeModel {
            enc_src: var("enc.src.w")?,
            enc_tgt: var("enc.tgt.w")?,
            enc_b: var("enc.b")?,
            dec_src: var("dec.src.w")?,
            dec_src_c: var("dec.src.c")?,
            dec_tgt: var("dec.tgt.w")?,
            dec_tgt_c: var("dec.tgt.c")?,
            mean_src: get("mean.src")?,
            mean_tgt: get("mean.tgt")?,
            binary,
        };
        let k = m.enc_b.dims()[0];
        if m.enc_src.dims()[1] != k
            || m.enc_tgt.dims()[1] != k
            || m.dec_src.dims() != [m.enc_src.dims()[0], k]
            || m.dec_tgt.dims() != [m.enc_tgt.dims()[0], k]
        {
            return Err(Error::invalid(format!(
                "bae checkpoint: inconsistent tensor shapes (enc.b {:?}, enc.src.w {:?}, \
                 enc.tgt.w {:?}, dec.src.w {:?}, dec.tgt.w {:?})",
                m.enc_b.dims(),
                m.enc_src.dims(),
                m.enc_tgt.dims(),
                m.dec_src.dims(),
                m.dec_tgt.dims()
            )));
        }
        let (vs, vt) = (m.enc_src.dims()[0], m.enc_tgt.dims()[0]);
        for (n, t, want) in [
            ("dec.src.c", m.dec_src_c.as_tensor(), vs),
            ("dec.tgt.c", m.dec_tgt_c.as_tensor(), vt),
            ("mean.src", &m.mean_src, k),
            ("mean.tgt", &m.mean_tgt, k),
        ] {
            if t.elem_count() != want {
                return Err(Error::invalid(format!(
                    "checkpoint tensor `{n}` has shape {:?}, expected {want} values",
                    t.dims()
                )));
            }
        }
        Ok(m)
    }

    fn vars(&self) -> Vec<(String, Var)> {
        let v = [
            &self.enc_src,
            &self.enc_tgt,
            &self.enc_b,
            &self.dec_src,
            &self.dec_src_c,
            &self.dec_tgt,
            &self.dec_tgt_c,
        ];
        NAMES
            .iter()
            .zip(v)
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect()
    }

    fn enc(&self, side: Side) -> &Var {
        match side {
            Side::Source => &self.enc_src,
            Side::Target => &self.enc_tgt,
        }
    }

    /// Encoder pre-activation `W x` (without bias) of a batch.
    fn pre(&self, side: Side, b: &SparseBatch) -> Result<Tensor> {
        b.compose(self.enc(side).as_tensor(), false)
    }

    /// Raw codes `σ(W x + b)` of texts, in chunks.
    fn codes(&self, side: Side, counts: &CsrMatrix) -> Result<Tensor> {
        let w = self.enc(side);
        if counts.n_cols != w.dims()[0] {
            return Err(Error::invalid(format!(
                "texts counted over {} terms but the bae encoder knows {}",
                counts.n_cols,
                w.dims()[0]
            )));
        }
        let dev = w.device().clone();
        let mut parts = Vec::new();
        const CHUNK: usize = 4096;
        let mut start = 0;
        while start < counts.n_rows() {
            let end = (start + CHUNK).min(counts.n_rows());
            let rows: Vec<usize> = (start..end).collect();
            let b = SparseBatch::new(counts, &rows, self.binary, DType::F32, &dev)?;
            let h = sigmoid(&self.pre(side, &b)?.broadcast_add(self.enc_b.as_tensor())?)?;
            parts.push(h.detach());
            start = end;
        }
        if parts.is_empty() {
            return Ok(Tensor::zeros((0, self.dim()), DType::F32, &dev)?);
        }
        Ok(Tensor::cat(&parts, 0)?)
    }

    /// Sets each language's mean code over its (non-empty) training texts.
    fn set_means(&mut self, data: &TrainData, center: bool) -> Result<()> {
        for side in [Side::Source, Side::Target] {
            let m = match side {
                Side::Source => &data.train_src,
                Side::Target => &data.train_tgt,
            };
            let mean = if center && m.n_rows() > 0 {
                self.codes(side, m)?.mean(0)?
            } else {
                Tensor::zeros(self.dim(), DType::F32, self.enc_b.device())?
            };
            match side {
                Side::Source => self.mean_src = mean,
                Side::Target => self.mean_tgt = mean,
            }
        }
        Ok(())
    }

    fn mean(&self, side: Side) -> &Tensor {
        match side {
            Side::Source => &self.mean_src,
            Side::Target => &self.mean_tgt,
        }
    }

    /// Deep copy.
    fn snapshot(&self) -> Result<BaeModel> {
        let map: HashMap<String, Tensor> = self.tensors()?.into_iter().collect();
        BaeModel::from_tensors(&map, self.enc_b.device())
    }
}

impl Model for BaeModel {
    fn kind(&self) -> &'static str {
        "bae"
    }
    fn dim(&self) -> usize {
        self.enc_b.dims()[0]
    }
    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>> {
        let h = self.codes(side, counts)?.broadcast_sub(self.mean(side))?;
        let mut out = to_array(&unit_rows(&h)?)?;
        // An empty text has no code of its own: a zero row.
        for i in 0..counts.n_rows() {
            if counts.row_is_empty(i) {
                out.row_mut(i).fill(0.0);
            }
        }
        Ok(out)
    }
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        let h = sigmoid(
            &self
                .enc(side)
                .as_tensor()
                .broadcast_add(self.enc_b.as_tensor())?,
        )?;
        to_array(&unit_rows(&h.broadcast_sub(self.mean(side))?)?)
    }
    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let mut v: Vec<(String, Tensor)> = self
            .vars()
            .into_iter()
            .map(|(n, v)| Ok((n, v.as_tensor().copy()?)))
            .collect::<Result<_>>()?;
        v.push(("mean.src".into(), self.mean_src.copy()?));
        v.push(("mean.tgt".into(), self.mean_tgt.copy()?));
        v.push((
            "cfg.binary".into(),
            Tensor::new(&[if self.binary { 1f32 } else { 0.0 }], self.enc_b.device())?,
        ));
        Ok(v)
    }
}

/// Sum over the vocabulary, mean over the rows, of the binary cross-entropy
/// of `σ(logits)` against 0/1 `targets`: `softplus(z) − t·z`, computed
/// stably as `max(z,0) + ln(1 + e^{−|z|}) − t·z`.
pub fn bce_with_logits(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let sp = crate::models::kit::nn::softplus(logits)?;
    let l = (sp - (targets * logits)?)?;
    let rows = logits.dim(0)?.max(1) as f64;
    Ok((l.sum_all()? / rows)?)
}

/// Sum over dimensions of the correlation of two code matrices' columns over
/// the batch.
pub fn correlation(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let ac = a.broadcast_sub(&a.mean_keepdim(0)?)?;
    let bc = b.broadcast_sub(&b.mean_keepdim(0)?)?;
    let num = (&ac * &bc)?.sum(0)?;
    let den = ((ac.sqr()?.sum(0)? * bc.sqr()?.sum(0)?)? + 1e-8)?.sqrt()?;
    Ok((num / den)?.sum_all()?)
}

/// [`bce_with_logits`] against binary bags given by the flat positions
/// (`row · vocab + term`, `u32`) of their ones: `Σ softplus(z) − Σ_{ones} z`,
/// so no dense target matrix is built and the second sum is a gather.
pub fn bce_sparse(logits: &Tensor, ones: &Tensor) -> Result<Tensor> {
    let rows = logits.dim(0)?.max(1) as f64;
    Ok((crate::models::kit::nn::bce_logits_sum(logits, ones)? / rows)?)
}

/// Flat positions of the ones of rows `rows` of `m` in a `(copies·n) × vocab`
/// matrix holding `copies` stacked copies of the `n` bags.
fn bag_positions(m: &CsrMatrix, rows: &[usize], copies: usize, device: &Device) -> Result<Tensor> {
    let (n, vocab) = (rows.len(), m.n_cols);
    let mut idx: Vec<u32> = Vec::new();
    for c in 0..copies {
        for (b, &r) in rows.iter().enumerate() {
            let base = ((c * n + b) * vocab) as u32;
            idx.extend(m.row(r).0.iter().map(|t| base + t));
        }
    }
    let len = idx.len();
    Ok(Tensor::from_vec(idx, len, device)?)
}

/// Reconstruction loss of the bags of rows `rows` of `m` (stacked `copies`
/// times, as the rows of `codes`) through the decoder `(dec, c)`, a mean over
/// the rows of `codes`. `sampled = Some(N)`: over the batch's own terms and
/// `N` sampled other terms whose cross-entropy is scaled up to stand for all
/// the other terms (reconstruction sampling, Dauphin et al. 2011); with
/// `lazy`, the decoder rows used become leaves pushed on `leaves` (name,
/// row ids, leaf) for [`Adam::backward_step_rows`].
#[allow(clippy::too_many_arguments)]
fn recon_loss(
    codes: &Tensor,
    dec: (&str, &Var),
    bias: (&str, &Var),
    m: &CsrMatrix,
    rows: &[usize],
    copies: usize,
    sampled: Option<usize>,
    lazy: bool,
    rng: &mut ChaCha8Rng,
    leaves: &mut Vec<(String, Tensor, Var)>,
) -> Result<Tensor> {
    let device = codes.device();
    let Some(n_neg) = sampled else {
        let ones = bag_positions(m, rows, copies, device)?;
        let sum = crate::models::kit::nn::decoder_bce_sum(
            codes,
            dec.1.as_tensor(),
            bias.1.as_tensor(),
            &ones,
        )?;
        return Ok((sum / codes.dim(0)?.max(1) as f64)?);
    };
    let vocab = m.n_cols;
    let mut union: Vec<u32> = rows
        .iter()
        .flat_map(|&r| m.row(r).0.iter().copied())
        .collect();
    union.sort_unstable();
    union.dedup();
    let mut negs: Vec<u32> = (0..n_neg)
        .map(|_| rng.random_range(0..vocab as u32))
        .filter(|t| union.binary_search(t).is_err())
        .collect();
    negs.sort_unstable();
    negs.dedup();
    let scale = if negs.is_empty() {
        0.0
    } else {
        (vocab - union.len()) as f32 / negs.len() as f32
    };
    let ncols = union.len() + negs.len();
    let mut weights = vec![1f32; union.len()];
    weights.extend(std::iter::repeat_n(scale, negs.len()));
    let n = rows.len();
    let mut ones: Vec<u32> = Vec::new();
    for c in 0..copies {
        for (b, &r) in rows.iter().enumerate() {
            let base = ((c * n + b) * ncols) as u32;
            ones.extend(
                m.row(r)
                    .0
                    .iter()
                    .map(|t| base + union.binary_search(t).expect("own term") as u32),
            );
        }
    }
    let mut cols = union;
    cols.extend(negs);
    let cols = Tensor::from_vec(cols, ncols, device)?;
    let mut take = |(name, v): (&str, &Var)| -> Result<Tensor> {
        let sub = crate::models::kit::rows::gather_rows(v.as_tensor(), &cols)?;
        if lazy {
            let leaf = Var::from_tensor(&sub)?;
            let t = leaf.as_tensor().clone();
            leaves.push((name.to_string(), cols.clone(), leaf));
            Ok(t)
        } else {
            Ok(sub)
        }
    };
    let d = take(dec)?;
    let c = take(bias)?;
    let z = crate::models::kit::precision::matmul(codes, &d.t()?)?.broadcast_add(&c)?;
    let sp = crate::models::kit::nn::softplus(&z)?;
    let w = Tensor::from_vec(weights, (1, ncols), device)?;
    let sp = sp.broadcast_mul(&w)?.sum_all()?;
    let nones = ones.len();
    let hit = crate::models::kit::rows::gather_rows(
        &z.flatten_all()?,
        &Tensor::from_vec(ones, nones, device)?,
    )?
    .sum_all()?;
    Ok(((sp - hit)? / codes.dim(0)?.max(1) as f64)?)
}

/// Trains and reloads [`BaeModel`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct BaeTrainer;

/// The BAE trainer, boxed for the model registry.
pub fn bae_trainer() -> Box<dyn Trainer> {
    Box::new(BaeTrainer)
}

impl Trainer for BaeTrainer {
    /// Reads the settings before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        BaeConfig::from_params(params).map(|_| ())
    }

    /// The encoders' and decoders' `V × dim` matrices with gradients and
    /// Adam moments, and a batch's reconstruction over both vocabularies.
    fn memory_estimate(
        &self,
        params: &Params,
        sizes: &crate::models::DataSizes,
    ) -> Result<Option<crate::models::MemoryEstimate>> {
        let c = BaeConfig::from_params(params)?;
        let terms = (sizes.source_terms + sizes.target_terms) as f64;
        let (k, b) = (c.dim as f64, c.batch as f64);
        Ok(Some(crate::models::MemoryEstimate::adam_f32(
            2.0 * terms * k + terms + k,
            2.0 * b * terms + 4.0 * b * k,
        )))
    }

    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let epochs = BaeConfig::from_params(params)?.epochs;
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
        let cfg = BaeConfig::from_params(params)?;
        params.check_unused()?;
        let _precision = cfg.precision.enter("bae", device)?;
        let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
        data.check_shapes("bae")?;
        let pairs: Vec<usize> = (0..data.train_src.n_rows())
            .filter(|&i| !data.train_src.row_is_empty(i) && !data.train_tgt.row_is_empty(i))
            .collect();
        if pairs.is_empty() && cfg.epochs > 0 {
            return Err(Error::invalid(
                "bae: no training pair has known terms on both sides",
            ));
        }
        // on the CPU the decoders' products and passes run on rayon's
        // threads (`nn::decoder_bce_sum`); the rest are small candle ops
        if device.is_cpu() {
            crate::models::kit::nn::single_threaded_candle();
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut start, mut step) = (0usize, 0usize);
        let mut model = match &resume {
            Some(r) => {
                if r.phase != "train" {
                    return Err(Error::invalid(format!(
                        "bae: cannot resume from phase {:?} (expected train)",
                        r.phase
                    )));
                }
                start = r.epoch;
                step = r.step;
                let m = BaeModel::from_tensors(&r.tensors, device)?;
                if m.enc_src.dims()[0] != vs || m.enc_tgt.dims()[0] != vt || m.dim() != cfg.dim {
                    return Err(Error::invalid(
                        "bae: the checkpoint's shapes differ from this job's vocabularies or dim",
                    ));
                }
                m
            }
            None => {
                let mut m = BaeModel::random(vs, vt, &cfg, &mut rng, device)?;
                if let Some(dir) = &cfg.vectors {
                    // the encoders' rows are the term vectors (the
                    // decoders keep their random start)
                    let f = crate::models::kit::pretrained::start(
                        data.pretrained.as_ref(),
                        dir,
                        "bae",
                        cfg.dim,
                        cfg.init_scale,
                        &mut rng,
                        hooks,
                    )?;
                    let t = |a: &ndarray::Array2<f32>| -> Result<Var> {
                        let v: Vec<f32> = a.iter().copied().collect();
                        Ok(Var::from_tensor(&Tensor::from_vec(v, a.dim(), device)?)?)
                    };
                    m.enc_src = t(&f.source)?;
                    m.enc_tgt = t(&f.target)?;
                }
                m
            }
        };
        model.binary = cfg.binary;
        let mut opt = Adam::new(model.vars(), cfg.lr, cfg.weight_decay)?;
        if let Some(r) = &resume {
            opt.restore(&r.tensors)?;
        }
        model.set_means(data, cfg.center)?;
        let mut best = (valid_mrr(&model, data, cfg.valid_max)?, model.snapshot()?);
        // a resume continues the interrupted run's choice of best epoch
        if let Some(r) = &resume {
            if let Some((score, _, snap)) =
                crate::models::kit::nn::restore_best_state("best.", &r.tensors)?
            {
                best = (score, BaeModel::from_tensors(&snap, device)?);
                best.1.binary = cfg.binary;
            }
        }
        hooks.log(&format!(
            "bae: {} pairs, vocab {vs}/{vt}, start validation MRR {:.4}",
            pairs.len(),
            best.0
        ));
        let dt = DType::F32;
        for epoch in start + 1..=cfg.epochs {
            // the pretrained encoders held while the decoders adapt
            opt.freeze(if epoch <= cfg.frozen_epochs {
                &NAMES[..2]
            } else {
                &[]
            })?;
            hooks.epoch_start("train", epoch);
            let mut erng = epoch_rng(seed, 3, epoch);
            let mut order = pairs.clone();
            order.shuffle(&mut erng);
            let mut stop = false;
            for chunk in order.chunks(cfg.batch) {
                let n = chunk.len();
                let sb = SparseBatch::new(&data.train_src, chunk, cfg.binary, dt, device)?;
                let tb = SparseBatch::new(&data.train_tgt, chunk, cfg.binary, dt, device)?;
                // encoder pre-activations; with lazy Adam through per-step
                // leaves holding only the batch's rows of the tables
                let mut leaves = Vec::new();
                // (dense Adam reads the rows' gradient through a row map:
                // no V × k gradient is built, the same arithmetic)
                let mut pre = |side: Side, b: &SparseBatch| -> Result<Tensor> {
                    let rows = model.enc(side).as_tensor().index_select(&b.uniq, 0)?;
                    let leaf = Var::from_tensor(&rows)?;
                    let y = b.compose(leaf.as_tensor(), true)?;
                    leaves.push(leaf);
                    Ok(y)
                };
                let (ps, pt) = (pre(Side::Source, &sb)?, pre(Side::Target, &tb)?);
                let b = model.enc_b.as_tensor();
                let hs = sigmoid(&ps.broadcast_add(b)?)?;
                let ht = sigmoid(&pt.broadcast_add(b)?)?;
                let hst = sigmoid(&(&ps + &pt)?.broadcast_add(b)?)?;
                let codes = Tensor::cat(&[&hs, &ht, &hst], 0)?;
                // six reconstructions (each language from each code), each a
                // mean over the batch
                let mut dleaves = Vec::new();
                let ls = recon_loss(
                    &codes,
                    ("dec.src.w", &model.dec_src),
                    ("dec.src.c", &model.dec_src_c),
                    &data.train_src,
                    chunk,
                    3,
                    cfg.sampled,
                    cfg.lazy,
                    &mut erng,
                    &mut dleaves,
                )?;
                let lt = recon_loss(
                    &codes,
                    ("dec.tgt.w", &model.dec_tgt),
                    ("dec.tgt.c", &model.dec_tgt_c),
                    &data.train_tgt,
                    chunk,
                    3,
                    cfg.sampled,
                    cfg.lazy,
                    &mut erng,
                    &mut dleaves,
                )?;
                let mut loss = ((ls + lt)? * 3.0)?;
                if cfg.corr > 0.0 && n > 1 {
                    loss = (loss - (correlation(&hs, &ht)? * cfg.corr)?)?;
                }
                let mut rows: Vec<(&str, &Tensor, &Var)> = vec![
                    ("enc.src.w", &sb.uniq, &leaves[0]),
                    ("enc.tgt.w", &tb.uniq, &leaves[1]),
                ];
                if cfg.lazy {
                    rows.extend(dleaves.iter().map(|(n, i, v)| (n.as_str(), i, v)));
                    opt.backward_step_rows(&loss, &rows)?;
                } else {
                    opt.backward_step_dense_rows(&loss, &rows)?;
                }
                step += 1;
                if report_step(hooks, "bae", "train", (epoch, step), &loss, n)? == Flow::Stop {
                    stop = true;
                    break;
                }
            }
            if stop {
                break;
            }
            model.set_means(data, cfg.center)?;
            let mrr = valid_mrr(&model, data, cfg.valid_max)?;
            hooks.log(&format!("bae epoch {epoch}: validation MRR {mrr:.4}"));
            if mrr > best.0 || best.0.is_nan() {
                best = (mrr, model.snapshot()?);
            }
            let mut extra = opt.state()?;
            extra.extend(crate::models::kit::nn::best_state(
                "best.",
                best.0,
                0,
                best.1.tensors()?,
                device,
            )?);
            if hooks.epoch_end("train", epoch, &model, extra)? == Flow::Stop {
                break;
            }
        }
        Ok(Box::new(best.1))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        _params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>> {
        let m = BaeModel::from_tensors(&tensors, device)?;
        if m.enc_src.dims()[0] != vocabs.source.len() || m.enc_tgt.dims()[0] != vocabs.target.len()
        {
            return Err(Error::invalid(format!(
                "bae checkpoint has {} × {} terms but the vocabularies have {} × {}",
                m.enc_src.dims()[0],
                m.enc_tgt.dims()[0],
                vocabs.source.len(),
                vocabs.target.len()
            )));
        }
        Ok(Box::new(m))
    }
}
