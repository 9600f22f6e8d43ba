//! DBN-CCA (seed 004, Kim, Nam & Gurevych 2012): one deep belief network
//! per language maps a text's bag of words (BM25 weights rounded to whole
//! counts over the language's most frequent terms) to a 128-unit code;
//! regularised CCA on the codes of the training pairs gives the shared
//! space, where the cosine ranks.
//!
//! Training is a plan of phases the runner executes and resumes: per
//! language, a replicated softmax model then binary RBMs, each pre-trained
//! greedily by contrastive divergence ([`crate::models::kit::rbm`]); then the stacks are
//! unrolled into deep autoencoders (decoders start as the transposed
//! weights) fine-tuned on the softmax reconstruction's cross-entropy (Adam,
//! where the paper used L-BFGS); at the end of every fine-tuning epoch CCA
//! is fitted on the codes and the epoch validated. Term vectors are the
//! mapped codes of one-term texts. Paper, settings and measurements:
//! `docs/models.md`.
//!
//! Checkpoint tensors, per side `S` (`src`, `tgt`): `S.input` (vocabulary
//! ids of the input columns, u32), `S.idf`, `S.bm25` (`[k1, b, avgdl]`),
//! `S.l{i}.w|b|c` (layer `i`'s RBM), `S.d{i}.w|c` (decoder, once
//! fine-tuning began), and `space.S.mean|proj` (once CCA was fitted).

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::ops::{log_softmax, sigmoid};
use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::models::kit::nn::{epoch_rng, report_step, to_array, unit_rows, SparseBatch};
use crate::models::kit::optim::Adam;
use crate::models::kit::rbm::{CdConfig, Increments, Rbm, Visible};
use crate::models::settings::ModelDef;
use crate::models::settings::{
    self, boxed, model_config, s, Check, ModelConfig, Settings, BATCH, BM25_B, BM25_K1, COUNT, DIM,
    PRECISION, VALID_MAX,
};
use crate::models::{Flow, Hooks, Model, Params, Phase, Resume, TrainData, Trainer};
use crate::text::weight::bm25_idf;
use crate::text::{CsrMatrix, Side, Vocabs};
use crate::{Error, Result};

/// The registry name.
pub const KIND: &str = "dbn-cca";

/// The settings of a DBN-CCA job, read from [`Params`].
#[derive(Debug, Clone)]
pub struct DbnConfig {
    /// Hidden layer sizes, bottom up (the last is the code).
    pub layers: Vec<usize>,
    /// Input terms per language: the most frequent (by training df).
    pub input_terms: usize,
    /// Training pairs with `D_src ≥ ratio · D_tgt` are dropped (0: none).
    pub length_ratio: f64,
    /// BM25 `k1` of the input weights.
    pub k1: f32,
    /// BM25 `b` of the input weights.
    pub b: f32,
    /// Gibbs steps of contrastive divergence.
    pub cd_k: usize,
    /// Mini-batch size (pre-training and fine-tuning).
    pub batch: usize,
    /// Pre-training epochs per RBM.
    pub epochs: usize,
    /// Learning rate of the binary RBMs.
    pub lr: f64,
    /// Learning rate of the replicated softmax layer.
    pub lr_rsm: f64,
    /// Weight decay of the RBMs.
    pub weight_decay: f64,
    /// Momentum of the RBM updates.
    pub momentum: f64,
    /// First epochs of each RBM run with momentum 0.5.
    pub momentum_warmup: usize,
    /// The replicated softmax's reconstruction draws `D` words (else mean-field).
    pub sample_visible: bool,
    /// An upper RBM trains on binary states drawn from the layer below's
    /// probabilities (fresh each epoch), else on the probabilities.
    pub upper_states: bool,
    /// Std of the weights' random start.
    pub init_scale: f64,
    /// Fine-tuning epochs (0: CCA on the pre-trained stacks).
    pub finetune_epochs: usize,
    /// Adam learning rate of fine-tuning.
    pub finetune_lr: f64,
    /// Dimension of the CCA space.
    pub dim: usize,
    /// CCA ridge, relative to the codes' mean variance.
    pub reg: f64,
    /// Held-out texts scored per epoch (at most).
    pub valid_max: usize,
    /// `precision`: the arithmetic of the RBMs' and the autoencoder's
    /// products (the CCA is solved in f64 whatever it is).
    pub precision: crate::models::kit::precision::Precision,
}

model_config! {
    /// DBN-CCA's settings, as given (`--set`) and recorded (`config.toml`).
    pub struct Config {
        b: f32 = BM25_B,
        batch: usize = s("100", BATCH, "texts per minibatch (pre-training and fine-tuning)"),
        cd_k: usize = s("1", Check::Int { min: 1, max: 100 }, "Gibbs steps of contrastive divergence (CD-k)"),
        dim: usize = DIM.help("dimension of the CCA space (at most the code size)"),
        epochs: usize = s("50", COUNT, "pre-training epochs per RBM"),
        finetune_epochs: usize = s("20", COUNT, "autoencoder fine-tuning epochs (0: CCA on the pre-trained stacks)"),
        finetune_lr: f64 = s("0.001", Check::Positive, "Adam learning rate of fine-tuning"),
        init_scale: f64 = s("0.1", Check::Positive, "std of the RBM weights' random start (Hinton & Salakhutdinov's 0.1)"),
        input_terms: usize = s("10000", Check::Int { min: 1, max: 1_000_000 }, "input terms per language (the most frequent)"),
        k1: f32 = BM25_K1,
        layers: String = s("500,500,3000,128", Check::Parse(check_layers), "hidden layer sizes, bottom up (the last is the code)"),
        length_ratio: f64 = s("3", Check::NonNegative, "drop training pairs with D_src >= ratio * D_tgt (0: keep all)"),
        lr: f64 = s("0.1", Check::Positive, "learning rate of the binary RBMs"),
        lr_rsm: f64 = s("0.0001", Check::Positive, "learning rate of the replicated softmax layer"),
        momentum: f64 = s("0.9", Check::Range { min: 0.0, max: 1.0, open: true }, "momentum of the RBM updates"),
        momentum_warmup: usize = s("0", COUNT, "first epochs of each RBM at momentum 0.5"),
        precision: String = PRECISION,
        reg: f64 = s("0.1", Check::NonNegative, "CCA ridge relative to the codes' mean variance"),
        upper_data: String = s("probs", Check::Choice(&["probs", "states"]), "an upper RBM's data: the layer below's probabilities, or binary states drawn from them"),
        valid_max: usize = VALID_MAX,
        visible: String = s("sample", Check::Choice(&["sample", "mean"]), "replicated softmax reconstruction: draw D words, or mean-field"),
        weight_decay: f64 = s("0.0002", Check::NonNegative, "weight decay of the RBMs"),
    }
}

impl ModelConfig for Config {
    fn precision(&self) -> Result<Option<crate::models::kit::precision::Precision>> {
        settings::precision(&self.precision)
    }
}

/// DBN-CCA in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary: "deep belief network per language (replicated softmax + RBMs), CCA on the codes (Kim, Nam and Gurevych, COLING 2012)",
    space: true,
    runner: true,
    gpu: true,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(dbn_cca_trainer),
    // a bag of the most frequent words, as the paper: stop words
    // removed (they would fill the 10,000 inputs), no n-gram units
    text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    presets: &[],
};

fn check_layers(v: &str) -> std::result::Result<(), String> {
    parse_layers(v).map(|_| ())
}

impl DbnConfig {
    /// Reads (and records) every setting.
    pub fn from_params(p: &Params) -> Result<Self> {
        let p = Config::from_params(p, KIND)?;
        let layers = &p.layers;
        let cfg = DbnConfig {
            layers: parse_layers(layers)
                .map_err(|e| Error::invalid(format!("{KIND}: --set layers={layers}: {e}")))?,
            input_terms: p.input_terms,
            length_ratio: p.length_ratio,
            k1: p.k1,
            b: p.b,
            cd_k: p.cd_k,
            batch: p.batch,
            epochs: p.epochs,
            lr: p.lr,
            lr_rsm: p.lr_rsm,
            weight_decay: p.weight_decay,
            momentum: p.momentum,
            momentum_warmup: p.momentum_warmup,
            sample_visible: p.visible == "sample",
            upper_states: p.upper_data == "states",
            init_scale: p.init_scale,
            finetune_epochs: p.finetune_epochs,
            finetune_lr: p.finetune_lr,
            dim: p.dim,
            reg: p.reg,
            valid_max: p.valid_max,
            precision: crate::models::kit::precision::setting(&p.precision)?,
        };
        let top = *cfg.layers.last().expect("parse_layers gives ≥ 1 layer");
        if cfg.dim > top {
            return Err(Error::invalid(format!(
                "{KIND}: dim {} exceeds the code size {top} (the last of layers)",
                cfg.dim
            )));
        }
        Ok(cfg)
    }
}

/// Parses `500,500,3000,128`: one to eight hidden layer sizes, each ≥ 1.
pub fn parse_layers(v: &str) -> std::result::Result<Vec<usize>, String> {
    let sizes: Vec<usize> = v
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("expected comma-separated layer sizes, got `{v}`"))?;
    if sizes.is_empty()
        || sizes.len() > 8
        || sizes.contains(&0)
        || sizes.iter().any(|&s| s > 100_000)
    {
        return Err(format!(
            "expected 1 to 8 layer sizes in 1..=100000, got `{v}`"
        ));
    }
    Ok(sizes)
}

/// A language's input: which vocabulary terms are input columns and how a
/// text's counts become rounded BM25 weights over them.
#[derive(Debug, Clone)]
struct InputMap {
    /// Vocabulary id of every input column.
    cols: Vec<u32>,
    /// Input column of every vocabulary id (`u32::MAX`: not an input).
    col_of: Vec<u32>,
    /// BM25 idf of every column.
    idf: Vec<f32>,
    k1: f32,
    b: f32,
    /// Mean training text length (known terms).
    avgdl: f32,
}

impl InputMap {
    /// The `n` most frequent word units of `vocab` (by df; ties by id).
    fn new(vocab: &crate::text::Vocabulary, n: usize, train: &CsrMatrix, k1: f32, b: f32) -> Self {
        let mut ids: Vec<u32> = (0..vocab.words() as u32).collect();
        ids.sort_by_key(|&t| (std::cmp::Reverse(vocab.df[t as usize]), t));
        ids.truncate(n);
        ids.sort_unstable();
        let idf = ids
            .iter()
            .map(|&t| bm25_idf(vocab.n_docs, vocab.df[t as usize]))
            .collect();
        let total: f64 = train.values.iter().map(|&v| v as f64).sum();
        let avgdl = (total / train.n_rows().max(1) as f64).max(1.0) as f32;
        InputMap::from_parts(ids, idf, k1, b, avgdl, vocab.len())
    }

    fn from_parts(
        cols: Vec<u32>,
        idf: Vec<f32>,
        k1: f32,
        b: f32,
        avgdl: f32,
        vocab_len: usize,
    ) -> Self {
        let mut col_of = vec![u32::MAX; vocab_len];
        for (c, &t) in cols.iter().enumerate() {
            if let Some(slot) = col_of.get_mut(t as usize) {
                *slot = c as u32;
            }
        }
        InputMap {
            cols,
            col_of,
            idf,
            k1,
            b,
            avgdl,
        }
    }

    fn len(&self) -> usize {
        self.cols.len()
    }

    /// Texts (raw counts over the vocabulary) as whole-number BM25 weights
    /// over the input columns: `round(tf (k1+1) / (tf + k1 (1 − b + b·dl/avgdl)) · idf)`,
    /// `dl` the text's count of known terms; weights that round to 0 vanish.
    fn weigh(&self, counts: &CsrMatrix) -> CsrMatrix {
        let mut out = CsrMatrix::new(self.len());
        for i in 0..counts.n_rows() {
            let (c, v) = counts.row(i);
            let dl: f32 = v.iter().sum();
            let norm = self.k1 * (1.0 - self.b + self.b * dl / self.avgdl);
            out.push_row(c.iter().zip(v).filter_map(|(&t, &tf)| {
                let col = *self.col_of.get(t as usize)?;
                if col == u32::MAX {
                    return None;
                }
                let w = (tf * (self.k1 + 1.0) / (tf + norm) * self.idf[col as usize]).round();
                (w > 0.0).then_some((col, w))
            }));
        }
        out
    }
}

/// Lengths `D` of a weighted batch's rows (host and `B × 1` device).
fn lengths(x: &CsrMatrix, rows: &[usize], device: &Device) -> Result<(Vec<usize>, Tensor)> {
    let d: Vec<usize> = rows
        .iter()
        .map(|&r| x.row(r).1.iter().sum::<f32>() as usize)
        .collect();
    let t = Tensor::from_vec(
        d.iter().map(|&x| x as f32).collect::<Vec<_>>(),
        (rows.len(), 1),
        device,
    )?;
    Ok((d, t))
}

/// One language's network: the input map, the RBM stack (encoder weights,
/// hidden biases, visible biases) and, once fine-tuning began, the decoder.
#[derive(Debug, Clone)]
struct Net {
    input: InputMap,
    layers: Vec<Rbm>,
    /// Decoder weights `H × I` and output biases, per layer (bottom first).
    decoder: Vec<(Tensor, Tensor)>,
}

impl Net {
    /// Encoder of layers `0..upto` on a weighted batch: the activation
    /// probabilities of layer `upto − 1`.
    fn up(&self, x: &CsrMatrix, rows: &[usize], upto: usize, device: &Device) -> Result<Tensor> {
        let batch = SparseBatch::new(x, rows, false, DType::F32, device)?;
        let (_, d) = lengths(x, rows, device)?;
        let mut h = self.layers[0].hidden_probs(&Visible::Counts {
            batch: &batch,
            lengths: &d,
            host_lengths: &[],
        })?;
        for l in &self.layers[1..upto] {
            h = l.hidden_probs(&Visible::Probs(&h))?;
        }
        Ok(h)
    }

    /// [`Net::up`] of every row, in chunks.
    fn up_all(&self, x: &CsrMatrix, upto: usize, device: &Device) -> Result<Tensor> {
        const CHUNK: usize = 2048;
        let mut parts = Vec::new();
        let mut start = 0;
        while start < x.n_rows() {
            let end = (start + CHUNK).min(x.n_rows());
            let rows: Vec<usize> = (start..end).collect();
            parts.push(self.up(x, &rows, upto, device)?);
            start = end;
        }
        if parts.is_empty() {
            let w = self.layers[upto - 1].n_hidden();
            return Ok(Tensor::zeros((0, w), DType::F32, device)?);
        }
        Ok(Tensor::cat(&parts, 0)?)
    }

    fn tensors(&self, side: &str, device: &Device) -> Result<Vec<(String, Tensor)>> {
        let n = self.input.len();
        let mut v = vec![
            (
                format!("{side}.input"),
                Tensor::from_vec(self.input.cols.clone(), n, device)?,
            ),
            (
                format!("{side}.idf"),
                Tensor::from_vec(self.input.idf.clone(), n, device)?,
            ),
            (
                format!("{side}.bm25"),
                Tensor::new(&[self.input.k1, self.input.b, self.input.avgdl], device)?,
            ),
        ];
        for (i, l) in self.layers.iter().enumerate() {
            v.push((format!("{side}.l{i}.w"), l.w.copy()?));
            v.push((format!("{side}.l{i}.b"), l.b.copy()?));
            v.push((format!("{side}.l{i}.c"), l.c.copy()?));
        }
        for (i, (w, c)) in self.decoder.iter().enumerate() {
            v.push((format!("{side}.d{i}.w"), w.copy()?));
            v.push((format!("{side}.d{i}.c"), c.copy()?));
        }
        Ok(v)
    }

    fn from_tensors(
        side: &str,
        t: &HashMap<String, Tensor>,
        vocab_len: usize,
        device: &Device,
    ) -> Result<Self> {
        let get = |n: &str| -> Result<Tensor> {
            Ok(t.get(n)
                .ok_or_else(|| Error::invalid(format!("{KIND} checkpoint lacks `{n}`")))?
                .to_device(device)?)
        };
        let f32s = |n: &str| -> Result<Vec<f32>> {
            Ok(get(n)?
                .to_dtype(DType::F32)?
                .flatten_all()?
                .to_vec1::<f32>()?)
        };
        let cols = get(&format!("{side}.input"))?
            .to_dtype(DType::U32)?
            .to_vec1::<u32>()?;
        if let Some(bad) = cols.iter().find(|&&c| c as usize >= vocab_len) {
            return Err(Error::invalid(format!(
                "{KIND} checkpoint: input term {bad} of `{side}` is beyond the vocabulary of \
                 {vocab_len} terms (a checkpoint from another workspace?)"
            )));
        }
        let idf = f32s(&format!("{side}.idf"))?;
        let bm = f32s(&format!("{side}.bm25"))?;
        if idf.len() != cols.len() || bm.len() != 3 {
            return Err(Error::invalid(format!(
                "{KIND} checkpoint: `{side}.idf` / `{side}.bm25` have the wrong sizes"
            )));
        }
        let input = InputMap::from_parts(cols, idf, bm[0], bm[1], bm[2], vocab_len);
        let mut layers = Vec::new();
        while t.contains_key(&format!("{side}.l{}.w", layers.len())) {
            let i = layers.len();
            let w = get(&format!("{side}.l{i}.w"))?.to_dtype(DType::F32)?;
            let below = if i == 0 {
                input.len()
            } else {
                Rbm::n_hidden(&layers[i - 1])
            };
            crate::models::kit::nn::check_shape(
                &format!("{side}.l{i}.w"),
                &w,
                &[Some(below), None],
            )?;
            let h = w.dims()[1];
            let b = get(&format!("{side}.l{i}.b"))?.to_dtype(DType::F32)?;
            let c = get(&format!("{side}.l{i}.c"))?.to_dtype(DType::F32)?;
            crate::models::kit::nn::check_shape(&format!("{side}.l{i}.b"), &b, &[Some(h)])?;
            crate::models::kit::nn::check_shape(&format!("{side}.l{i}.c"), &c, &[Some(below)])?;
            layers.push(Rbm { w, b, c });
        }
        // (a side not yet pre-trained has none)
        if layers.is_empty() && t.contains_key("space.src.proj") {
            return Err(Error::invalid(format!(
                "{KIND} checkpoint has a CCA space but no layer for `{side}`"
            )));
        }
        let mut decoder = Vec::new();
        while t.contains_key(&format!("{side}.d{}.w", decoder.len())) {
            let i = decoder.len();
            let w = get(&format!("{side}.d{i}.w"))?.to_dtype(DType::F32)?;
            let c = get(&format!("{side}.d{i}.c"))?.to_dtype(DType::F32)?;
            let l = layers.get(i).ok_or_else(|| {
                Error::invalid(format!(
                    "{KIND} checkpoint: decoder {i} of `{side}` has no layer"
                ))
            })?;
            let (iv, ih) = (l.n_visible(), l.n_hidden());
            crate::models::kit::nn::check_shape(
                &format!("{side}.d{i}.w"),
                &w,
                &[Some(ih), Some(iv)],
            )?;
            crate::models::kit::nn::check_shape(&format!("{side}.d{i}.c"), &c, &[Some(iv)])?;
            decoder.push((w, c));
        }
        Ok(Net {
            input,
            layers,
            decoder,
        })
    }
}

/// The CCA map of the codes: per side the training mean code and the
/// `code × dim` projection.
#[derive(Debug, Clone)]
struct Space {
    mean: [Tensor; 2],
    proj: [Tensor; 2],
}

/// A DBN-CCA model: two networks and, once fitted, the CCA space.
pub struct DbnCcaModel {
    vocabs: Vocabs,
    nets: [Net; 2],
    space: Option<Space>,
    device: Device,
}

fn idx(side: Side) -> usize {
    match side {
        Side::Source => 0,
        Side::Target => 1,
    }
}

const SIDES: [&str; 2] = ["src", "tgt"];

impl DbnCcaModel {
    /// The model from checkpoint tensors.
    pub fn from_tensors(
        vocabs: &Vocabs,
        t: &HashMap<String, Tensor>,
        device: &Device,
    ) -> Result<Self> {
        let nets = [
            Net::from_tensors("src", t, vocabs.source.len(), device)?,
            Net::from_tensors("tgt", t, vocabs.target.len(), device)?,
        ];
        let space = if t.contains_key("space.src.proj") {
            let get = |n: &str| -> Result<Tensor> {
                Ok(t.get(n)
                    .ok_or_else(|| Error::invalid(format!("{KIND} checkpoint lacks `{n}`")))?
                    .to_dtype(DType::F32)?
                    .to_device(device)?)
            };
            let mut mean = Vec::new();
            let mut proj = Vec::new();
            let mut dim = None;
            for (s, net) in SIDES.iter().zip(&nets) {
                let top = net.layers.last().expect("≥ 1 layer").n_hidden();
                let m = get(&format!("space.{s}.mean"))?;
                let p = get(&format!("space.{s}.proj"))?;
                crate::models::kit::nn::check_shape(&format!("space.{s}.mean"), &m, &[Some(top)])?;
                crate::models::kit::nn::check_shape(
                    &format!("space.{s}.proj"),
                    &p,
                    &[Some(top), dim],
                )?;
                dim = Some(p.dims()[1]);
                mean.push(m);
                proj.push(p);
            }
            let [m0, m1]: [Tensor; 2] = mean.try_into().expect("two sides");
            let [p0, p1]: [Tensor; 2] = proj.try_into().expect("two sides");
            Some(Space {
                mean: [m0, m1],
                proj: [p0, p1],
            })
        } else {
            None
        };
        Ok(DbnCcaModel {
            vocabs: vocabs.clone(),
            nets,
            space,
            device: device.clone(),
        })
    }

    /// Codes (top-layer activation probabilities) of texts given as raw
    /// counts; texts with no input term get zero rows (reported by `empty`).
    fn codes(&self, side: Side, counts: &CsrMatrix) -> Result<(Tensor, Vec<bool>)> {
        let net = &self.nets[idx(side)];
        let x = net.input.weigh(counts);
        let empty = (0..x.n_rows()).map(|i| x.row_is_empty(i)).collect();
        Ok((net.up_all(&x, net.layers.len(), &self.device)?, empty))
    }
}

impl Model for DbnCcaModel {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn dim(&self) -> usize {
        self.space.as_ref().map_or(0, |s| s.proj[0].dims()[1])
    }

    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>> {
        let Some(space) = &self.space else {
            return Err(Error::invalid(format!(
                "{KIND}: the model is still in pre-training (no CCA space yet): \
                 resume the job or search a finished session"
            )));
        };
        let vocab = match side {
            Side::Source => &self.vocabs.source,
            Side::Target => &self.vocabs.target,
        };
        if counts.n_cols != vocab.len() {
            return Err(Error::invalid(format!(
                "texts counted over {} terms but the {KIND} vocabulary has {}",
                counts.n_cols,
                vocab.len()
            )));
        }
        let i = idx(side);
        let (codes, empty) = self.codes(side, counts)?;
        let y = codes
            .broadcast_sub(&space.mean[i])?
            .matmul(&space.proj[i])?;
        let mut out = to_array(&unit_rows(&y)?)?;
        for (r, e) in empty.iter().enumerate() {
            if *e {
                out.row_mut(r).fill(0.0);
            }
        }
        Ok(out)
    }

    fn term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        let n = match side {
            Side::Source => self.vocabs.source.len(),
            Side::Target => self.vocabs.target.len(),
        };
        let mut one = CsrMatrix::new(n);
        for t in 0..n as u32 {
            one.push_row([(t, 1.0)]);
        }
        self.encode(side, &one)
    }

    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let mut v = Vec::new();
        for (s, net) in SIDES.iter().zip(&self.nets) {
            v.extend(net.tensors(s, &self.device)?);
        }
        if let Some(sp) = &self.space {
            for (i, s) in SIDES.iter().enumerate() {
                v.push((format!("space.{s}.mean"), sp.mean[i].copy()?));
                v.push((format!("space.{s}.proj"), sp.proj[i].copy()?));
            }
        }
        Ok(v)
    }

    fn has_space(&self) -> bool {
        self.space.is_some()
    }
}

/// Fits CCA on the codes of the training pairs; `Space` holds the mean
/// codes and projections.
fn fit_space(
    codes: [&Tensor; 2],
    dim: usize,
    reg: f64,
    seed: u64,
    hooks: &mut dyn Hooks,
) -> Result<Space> {
    // centred here: the CCA kit's cross-covariance takes f32 products, and
    // sigmoid codes (means near 0.5, small variances) would cancel in them
    let dense = |t: &Tensor| -> Result<(CsrMatrix, Tensor)> {
        let (n, k) = t.dims2()?;
        let mean = if n > 0 {
            t.mean(0)?
        } else {
            Tensor::zeros(k, DType::F32, t.device())?
        };
        let v = t
            .broadcast_sub(&mean)?
            .to_dtype(DType::F32)?
            .to_vec2::<f32>()?;
        let mut m = CsrMatrix::new(k);
        for row in &v {
            m.push_row(row.iter().enumerate().map(|(j, &x)| (j as u32, x)));
        }
        Ok((m, mean))
    };
    let (xs, ms) = dense(codes[0])?;
    let (xt, mt) = dense(codes[1])?;
    // codes that span fewer than `dim` directions (units that collapsed: see
    // `hidden_spread`) give a smaller space, with a warning in the log
    let fit = crate::models::kit::linear::logging_warnings(hooks, |warn| {
        // 128-d codes: the dense solver is exact and cheap at this size
        let opts = crate::models::kit::implicit::SubspaceOpts {
            solver: crate::models::kit::implicit::Solver::Dense,
            oversample: 10,
            power_iters: 6,
            seed,
            tol: 1e-8,
            max_cg_iters: 0,
        };
        crate::models::kit::cca::fit_up_to(&xs, &xt, dim, reg, &opts, warn)
    })
    .map_err(|e| Error::invalid(format!("{KIND}: CCA on the codes: {e}")))?;
    let dev = codes[0].device();
    let tensor = |a: &Array2<f32>| -> Result<Tensor> {
        Ok(Tensor::from_vec(
            a.iter().copied().collect::<Vec<f32>>(),
            a.dim(),
            dev,
        )?)
    };
    hooks.log(&format!(
        "{KIND}: CCA on {} code pairs, {} dimensions; canonical correlations {:.4} .. {:.4}",
        xs.n_rows(),
        fit.correlations.len(),
        fit.correlations.first().copied().unwrap_or(f64::NAN),
        fit.correlations.last().copied().unwrap_or(f64::NAN)
    ));
    Ok(Space {
        mean: [ms, mt],
        proj: [tensor(&fit.source)?, tensor(&fit.target)?],
    })
}

/// The plan's phase names: per side, `S.rsm` then `S.rbm2`, `S.rbm3`, ...;
/// then `finetune` (or `cca` when fine-tuning is off).
fn phase_names(cfg: &DbnConfig) -> Vec<String> {
    let mut v = Vec::new();
    for s in SIDES {
        for l in 0..cfg.layers.len() {
            v.push(if l == 0 {
                format!("{s}.rsm")
            } else {
                format!("{s}.rbm{}", l + 1)
            });
        }
    }
    v.push(if cfg.finetune_epochs > 0 {
        "finetune".into()
    } else {
        "cca".into()
    });
    v
}

/// The training pairs' weighted inputs after the length filter.
struct Inputs {
    x: [CsrMatrix; 2],
    valid: [CsrMatrix; 2],
}

/// Trains and reloads [`DbnCcaModel`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct DbnCcaTrainer;

/// The DBN-CCA trainer, boxed for the model registry.
pub fn dbn_cca_trainer() -> Box<dyn Trainer> {
    Box::new(DbnCcaTrainer)
}

impl DbnCcaTrainer {
    fn inputs(
        cfg: &DbnConfig,
        data: &TrainData,
        maps: [&InputMap; 2],
        hooks: &mut dyn Hooks,
    ) -> Inputs {
        let xs = maps[0].weigh(&data.train_src);
        let xt = maps[1].weigh(&data.train_tgt);
        let len = |m: &CsrMatrix, i: usize| m.row(i).1.iter().sum::<f32>() as f64;
        let keep: Vec<usize> = (0..xs.n_rows())
            .filter(|&i| {
                let (ds, dt) = (len(&xs, i), len(&xt, i));
                ds > 0.0 && dt > 0.0 && (cfg.length_ratio <= 0.0 || ds < cfg.length_ratio * dt)
            })
            .collect();
        hooks.log(&format!(
            "{KIND}: {} of {} training pairs kept (both sides with an input term{})",
            keep.len(),
            xs.n_rows(),
            if cfg.length_ratio > 0.0 {
                format!(", D_src < {} · D_tgt", cfg.length_ratio)
            } else {
                String::new()
            }
        ));
        let vs = maps[0].weigh(&data.valid_src);
        let vt = maps[1].weigh(&data.valid_tgt);
        let vkeep: Vec<usize> = (0..vs.n_rows())
            .filter(|&i| !vs.row_is_empty(i) && !vt.row_is_empty(i))
            .take(cfg.valid_max)
            .collect();
        Inputs {
            x: [xs.select_rows(&keep), xt.select_rows(&keep)],
            valid: [vs.select_rows(&vkeep), vt.select_rows(&vkeep)],
        }
    }
}

/// Mean cross-entropy, per text, of the softmax reconstruction `logits`
/// against the normalised counts of rows `rows` of `x`.
fn reconstruction_ce(logits: &Tensor, x: &CsrMatrix, rows: &[usize]) -> Result<Tensor> {
    let v = x.n_cols;
    let (mut flat, mut w) = (Vec::new(), Vec::new());
    for (b, &r) in rows.iter().enumerate() {
        let (c, val) = x.row(r);
        let d: f32 = val.iter().sum();
        for (&t, &n) in c.iter().zip(val) {
            flat.push((b * v) as u32 + t);
            w.push(n / d.max(1.0));
        }
    }
    let dev = logits.device();
    let lp = log_softmax(logits, D::Minus1)?;
    let n = flat.len();
    let hit = lp
        .flatten_all()?
        .index_select(&Tensor::from_vec(flat, n, dev)?, 0)?;
    let w = Tensor::from_vec(w, n, dev)?;
    Ok(((hit * w)?.sum_all()?.neg()? / rows.len().max(1) as f64)?)
}

/// The deep autoencoder of one side as variables: encoder `(w, b)` per
/// layer, decoder `(w, c)` per layer (bottom first).
struct Unrolled {
    enc: Vec<(Var, Var)>,
    dec: Vec<(Var, Var)>,
}

impl Unrolled {
    fn new(net: &Net) -> Result<Self> {
        let enc = net
            .layers
            .iter()
            .map(|l| {
                Ok((
                    Var::from_tensor(&l.w.copy()?)?,
                    Var::from_tensor(&l.b.copy()?)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let dec = if net.decoder.len() == net.layers.len() {
            net.decoder
                .iter()
                .map(|(w, c)| Ok((Var::from_tensor(&w.copy()?)?, Var::from_tensor(&c.copy()?)?)))
                .collect::<Result<Vec<_>>>()?
        } else {
            // the decoder starts as the transposed encoder
            net.layers
                .iter()
                .map(|l| {
                    Ok((
                        Var::from_tensor(&l.w.t()?.contiguous()?)?,
                        Var::from_tensor(&l.c.copy()?)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()?
        };
        Ok(Unrolled { enc, dec })
    }

    fn vars(&self, side: &str) -> Vec<(String, Var)> {
        let mut v = Vec::new();
        for (i, (w, b)) in self.enc.iter().enumerate() {
            v.push((format!("{side}.l{i}.w"), w.clone()));
            v.push((format!("{side}.l{i}.b"), b.clone()));
        }
        for (i, (w, c)) in self.dec.iter().enumerate() {
            v.push((format!("{side}.d{i}.w"), w.clone()));
            v.push((format!("{side}.d{i}.c"), c.clone()));
        }
        v
    }

    /// The net with these weights (visible biases kept from `net`),
    /// detached from the variables: encoding with it records no gradient
    /// graph (with the variables, the codes of every training text for the
    /// CCA fit held their whole forward graphs: 3.6 GB on the Bible).
    fn net(&self, net: &Net) -> Net {
        Net {
            input: net.input.clone(),
            layers: net
                .layers
                .iter()
                .zip(&self.enc)
                .map(|(l, (w, b))| Rbm {
                    w: w.as_tensor().detach(),
                    b: b.as_tensor().detach(),
                    c: l.c.clone(),
                })
                .collect(),
            decoder: self
                .dec
                .iter()
                .map(|(w, c)| (w.as_tensor().detach(), c.as_tensor().detach()))
                .collect(),
        }
    }

    /// Reconstruction cross-entropy of a batch through the autoencoder.
    fn loss(&self, x: &CsrMatrix, rows: &[usize], device: &Device) -> Result<Tensor> {
        use crate::models::kit::precision::matmul as mm;
        let batch = SparseBatch::new(x, rows, false, DType::F32, device)?;
        let (_, d) = lengths(x, rows, device)?;
        let (w0, b0) = &self.enc[0];
        let mut h = sigmoid(
            &batch
                .compose(w0.as_tensor(), false)?
                .add(&mm(&d, &b0.as_tensor().unsqueeze(0)?)?)?,
        )?;
        for (w, b) in &self.enc[1..] {
            h = sigmoid(&mm(&h, w.as_tensor())?.broadcast_add(b.as_tensor())?)?;
        }
        for (w, c) in self.dec[1..].iter().rev() {
            h = sigmoid(&mm(&h, w.as_tensor())?.broadcast_add(c.as_tensor())?)?;
        }
        let (w, c) = &self.dec[0];
        let logits = mm(&h, w.as_tensor())?.broadcast_add(c.as_tensor())?;
        reconstruction_ce(&logits, x, rows)
    }
}

impl Trainer for DbnCcaTrainer {
    fn check(&self, params: &Params) -> Result<()> {
        DbnConfig::from_params(params).map(|_| ())
    }

    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let cfg = DbnConfig::from_params(params)?;
        let n = data.train_src.n_rows();
        let names = phase_names(&cfg);
        let last = names.len() - 1;
        Ok(names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                if i < last {
                    Phase::pretraining(name, cfg.epochs, n)
                } else if cfg.finetune_epochs > 0 {
                    Phase::new(name, cfg.finetune_epochs, n)
                } else {
                    Phase::new(name, 1, n)
                }
            })
            .collect())
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
        let cfg = DbnConfig::from_params(params)?;
        params.check_unused()?;
        let _precision = cfg.precision.enter(KIND, device)?;
        data.check_shapes(KIND)?;
        let names = phase_names(&cfg);
        // where to start: the phase after a finished one, or the next epoch
        // of an interrupted one
        let mut step = resume.as_ref().map_or(0, |r| r.step);
        let (mut model, start_phase, start_epoch, resume_tensors) = match resume {
            Some(r) => {
                let p = names.iter().position(|n| *n == r.phase).ok_or_else(|| {
                    Error::invalid(format!(
                        "{KIND}: cannot resume from phase {:?}: this job's phases are {}",
                        r.phase,
                        names.join(", ")
                    ))
                })?;
                let m = DbnCcaModel::from_tensors(&data.vocabs, &r.tensors, device)?;
                let planned = if p == names.len() - 1 {
                    if cfg.finetune_epochs > 0 {
                        cfg.finetune_epochs
                    } else {
                        1
                    }
                } else {
                    cfg.epochs
                };
                if r.epoch >= planned {
                    (m, p + 1, 1, None)
                } else {
                    (m, p, r.epoch + 1, Some(r.tensors))
                }
            }
            None => {
                let maps = [
                    InputMap::new(
                        &data.vocabs.source,
                        cfg.input_terms,
                        &data.train_src,
                        cfg.k1,
                        cfg.b,
                    ),
                    InputMap::new(
                        &data.vocabs.target,
                        cfg.input_terms,
                        &data.train_tgt,
                        cfg.k1,
                        cfg.b,
                    ),
                ];
                let net = |input: InputMap| Net {
                    input,
                    layers: Vec::new(),
                    decoder: Vec::new(),
                };
                let [a, b] = maps;
                (
                    DbnCcaModel {
                        vocabs: data.vocabs.clone(),
                        nets: [net(a), net(b)],
                        space: None,
                        device: device.clone(),
                    },
                    0,
                    1,
                    None,
                )
            }
        };
        let inputs = Self::inputs(
            &cfg,
            data,
            [&model.nets[0].input, &model.nets[1].input],
            hooks,
        );
        if inputs.x[0].n_rows() == 0 {
            return Err(Error::invalid(format!(
                "{KIND}: no training pair has an input term on both sides"
            )));
        }
        hooks.log(&format!(
            "{KIND}: input {} / {} terms, layers {:?}, {} pairs",
            model.nets[0].input.len(),
            model.nets[1].input.len(),
            cfg.layers,
            inputs.x[0].n_rows()
        ));
        let n_layers = cfg.layers.len();
        for (p, name) in names.iter().enumerate().skip(start_phase) {
            let first_epoch = if p == start_phase { start_epoch } else { 1 };
            let resumed = if p == start_phase {
                resume_tensors.as_ref()
            } else {
                None
            };
            if p < 2 * n_layers {
                let (s, l) = (p / n_layers, p % n_layers);
                let flow = pretrain_layer(
                    &mut model,
                    (s, l),
                    name,
                    &cfg,
                    &inputs,
                    (seed, p as u64, first_epoch),
                    resumed,
                    &mut step,
                    hooks,
                )?;
                if flow == Flow::Stop {
                    return Ok(Box::new(model));
                }
            } else if cfg.finetune_epochs > 0 {
                return finetune(
                    model,
                    data,
                    &cfg,
                    &inputs,
                    (seed, p as u64, first_epoch),
                    resumed,
                    &mut step,
                    hooks,
                );
            } else {
                model.fit_space(&inputs, &cfg, seed, hooks)?;
                hooks.epoch_end("cca", 1, &model, Vec::new())?;
            }
        }
        Ok(Box::new(model))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        _params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>> {
        let m = DbnCcaModel::from_tensors(vocabs, &tensors, device)?;
        if m.space.is_none() {
            return Err(Error::invalid(format!(
                "{KIND}: this checkpoint was written in pre-training (no CCA space yet); \
                 resume the job to finish it"
            )));
        }
        Ok(Box::new(m))
    }
}

/// Seeds the device's generator for one (phase, epoch) where it has one
/// (CUDA); the CPU draws from the trainer's seeded generator.
fn seed_device(device: &Device, seed: u64) -> Result<()> {
    if !device.is_cpu() {
        device.set_seed(seed)?;
    }
    Ok(())
}

/// Pre-trains layer `l` of side `s` by CD-k for the configured epochs,
/// from `first_epoch` (with the resumed layer and momentum when given).
#[allow(clippy::too_many_arguments)]
fn pretrain_layer(
    model: &mut DbnCcaModel,
    (s, l): (usize, usize),
    phase: &str,
    cfg: &DbnConfig,
    inputs: &Inputs,
    (seed, phase_id, first_epoch): (u64, u64, usize),
    resumed: Option<&HashMap<String, Tensor>>,
    step: &mut usize,
    hooks: &mut dyn Hooks,
) -> Result<Flow> {
    let device = model.device.clone();
    let side = SIDES[s];
    let x = &inputs.x[s];
    let n = x.n_rows();
    // the layer's data: counts for the bottom, probabilities above
    let below = |m: &CsrMatrix| -> Result<Option<Tensor>> {
        if l == 0 {
            Ok(None)
        } else {
            Ok(Some(model.nets[s].up_all(m, l, &device)?))
        }
    };
    let data = below(x)?;
    let held = below(&inputs.valid[s])?;
    let n_visible = if l == 0 {
        model.nets[s].input.len()
    } else {
        cfg.layers[l - 1]
    };
    model.nets[s].layers.truncate(l);
    model.nets[s].decoder.clear();
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (phase_id + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let (rbm, mut inc) = match resumed {
        Some(t) => {
            let net = Net::from_tensors(side, t, model.vocabs_len(s), &device)?;
            let rbm = net.layers.get(l).cloned().ok_or_else(|| {
                Error::invalid(format!("{KIND}: the checkpoint of {phase} lacks layer {l}"))
            })?;
            let get = |n: &str| -> Result<Tensor> {
                Ok(t.get(n)
                    .ok_or_else(|| Error::invalid(format!("{KIND} checkpoint lacks `{n}`")))?
                    .to_dtype(DType::F32)?
                    .to_device(&device)?)
            };
            let inc = Increments {
                w: get("momentum.w")?,
                b: get("momentum.b")?,
                c: get("momentum.c")?,
            };
            (rbm, inc)
        }
        None => {
            let rbm = Rbm::random(n_visible, cfg.layers[l], cfg.init_scale, &mut rng, &device)?;
            let inc = rbm.zero_increments()?;
            (rbm, inc)
        }
    };
    model.nets[s].layers.push(rbm);
    let lr = if l == 0 { cfg.lr_rsm } else { cfg.lr };
    for epoch in first_epoch..=cfg.epochs {
        hooks.epoch_start(phase, epoch);
        let mut erng = epoch_rng(seed, phase_id + 100, epoch);
        seed_device(&device, seed ^ (phase_id << 32) ^ epoch as u64)?;
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut erng);
        let ccfg = CdConfig {
            k: cfg.cd_k,
            lr,
            weight_decay: cfg.weight_decay,
            momentum: if epoch <= cfg.momentum_warmup {
                0.5
            } else {
                cfg.momentum
            },
            sample_visible: cfg.sample_visible,
        };
        let t0 = std::time::Instant::now();
        for chunk in order.chunks(cfg.batch) {
            let rbm = model.nets[s]
                .layers
                .last_mut()
                .expect("the layer in training");
            let stats = match &data {
                None => {
                    let batch = SparseBatch::new(x, chunk, false, DType::F32, &device)?;
                    let (host, d) = lengths(x, chunk, &device)?;
                    rbm.cd_update(
                        &mut inc,
                        &Visible::Counts {
                            batch: &batch,
                            lengths: &d,
                            host_lengths: &host,
                        },
                        &ccfg,
                        &mut erng,
                    )?
                }
                Some(all) => {
                    let ids: Vec<u32> = chunk.iter().map(|&i| i as u32).collect();
                    let mut rows =
                        all.index_select(&Tensor::from_vec(ids, chunk.len(), &device)?, 0)?;
                    if cfg.upper_states {
                        rows = crate::models::kit::rbm::bernoulli(&rows, &mut erng)?;
                    }
                    rbm.cd_update(&mut inc, &Visible::Probs(&rows), &ccfg, &mut erng)?
                }
            };
            *step += 1;
            if report_step(
                hooks,
                KIND,
                phase,
                (epoch, *step),
                &stats.error,
                chunk.len(),
            )? == Flow::Stop
            {
                return Ok(Flow::Stop);
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        // held-out figures: reconstruction error, and the free-energy gap
        // between as many training texts and the held-out ones (a widening
        // gap is over-fitting: Hinton's practical guide, Sec. 6)
        let rbm = model.nets[s].layers.last().expect("the layer in training");
        let mut scores = vec![("epoch_s".to_string(), secs)];
        let m = inputs.valid[s].n_rows().min(n);
        if m > 0 {
            let rows: Vec<usize> = (0..m).collect();
            let (valid_err, gap, spread) = match (&data, &held) {
                (None, _) => {
                    let vb = SparseBatch::new(&inputs.valid[s], &rows, false, DType::F32, &device)?;
                    let (_, vd) = lengths(&inputs.valid[s], &rows, &device)?;
                    let tb = SparseBatch::new(x, &rows, false, DType::F32, &device)?;
                    let (_, td) = lengths(x, &rows, &device)?;
                    let vv = Visible::Counts {
                        batch: &vb,
                        lengths: &vd,
                        host_lengths: &[],
                    };
                    let tv = Visible::Counts {
                        batch: &tb,
                        lengths: &td,
                        host_lengths: &[],
                    };
                    (
                        rbm.reconstruction_error(&vv)?,
                        rbm.free_energy(&vv)? - rbm.free_energy(&tv)?,
                        rbm.hidden_spread(&vv)?,
                    )
                }
                (Some(all), Some(h)) => {
                    let tv = all.narrow(0, 0, m)?;
                    let vv = h.narrow(0, 0, m)?;
                    (
                        rbm.reconstruction_error(&Visible::Probs(&vv))?,
                        rbm.free_energy(&Visible::Probs(&vv))?
                            - rbm.free_energy(&Visible::Probs(&tv))?,
                        rbm.hidden_spread(&Visible::Probs(&vv))?,
                    )
                }
                _ => unreachable!("held-out data exist with the training data"),
            };
            scores.push(("held_out_error".into(), valid_err));
            scores.push(("free_energy_gap".into(), gap));
            scores.push(("hidden_spread".into(), spread));
        }
        hooks.epoch_scores(scores);
        let extra = vec![
            ("momentum.w".to_string(), inc.w.copy()?),
            ("momentum.b".to_string(), inc.b.copy()?),
            ("momentum.c".to_string(), inc.c.copy()?),
        ];
        if hooks.epoch_end(phase, epoch, &*model, extra)? == Flow::Stop {
            return Ok(Flow::Stop);
        }
    }
    Ok(Flow::Continue)
}

impl DbnCcaModel {
    /// Fits the CCA space on the codes of the training pairs.
    fn fit_space(
        &mut self,
        inputs: &Inputs,
        cfg: &DbnConfig,
        seed: u64,
        hooks: &mut dyn Hooks,
    ) -> Result<()> {
        let top = self.nets[0].layers.len();
        let codes = [
            self.nets[0].up_all(&inputs.x[0], top, &self.device)?,
            self.nets[1].up_all(&inputs.x[1], top, &self.device)?,
        ];
        self.space = Some(fit_space(
            [&codes[0], &codes[1]],
            cfg.dim,
            cfg.reg,
            seed,
            hooks,
        )?);
        Ok(())
    }

    fn vocabs_len(&self, s: usize) -> usize {
        if s == 0 {
            self.vocabs.source.len()
        } else {
            self.vocabs.target.len()
        }
    }
}

/// Fine-tunes both autoencoders (one Adam step per batch of pairs, the sum
/// of the two sides' cross-entropies), fitting CCA and validating after
/// every epoch; returns the epoch of best validation MRR.
#[allow(clippy::too_many_arguments)]
fn finetune(
    mut model: DbnCcaModel,
    data: &TrainData,
    cfg: &DbnConfig,
    inputs: &Inputs,
    (seed, phase_id, first_epoch): (u64, u64, usize),
    resumed: Option<&HashMap<String, Tensor>>,
    step: &mut usize,
    hooks: &mut dyn Hooks,
) -> Result<Box<dyn Model>> {
    let device = model.device.clone();
    let nets = [
        Unrolled::new(&model.nets[0])?,
        Unrolled::new(&model.nets[1])?,
    ];
    let mut vars = nets[0].vars("src");
    vars.extend(nets[1].vars("tgt"));
    let mut opt = Adam::new(vars, cfg.finetune_lr, 0.0)?;
    let n = inputs.x[0].n_rows();
    let snapshot = |m: &DbnCcaModel| -> Result<DbnCcaModel> {
        let t: HashMap<String, Tensor> = m.tensors()?.into_iter().collect();
        DbnCcaModel::from_tensors(&m.vocabs, &t, &device)
    };
    let mut best: (f64, Option<DbnCcaModel>) = (f64::NAN, None);
    if let Some(t) = resumed {
        opt.restore(t)?;
        if let Some((score, _, snap)) = crate::models::kit::nn::restore_best_state("best.", t)? {
            best = (
                score,
                Some(DbnCcaModel::from_tensors(&model.vocabs, &snap, &device)?),
            );
        }
    }
    for epoch in first_epoch..=cfg.finetune_epochs {
        hooks.epoch_start("finetune", epoch);
        let mut erng = epoch_rng(seed, phase_id + 100, epoch);
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut erng);
        let t0 = std::time::Instant::now();
        for chunk in order.chunks(cfg.batch) {
            let loss = (nets[0].loss(&inputs.x[0], chunk, &device)?
                + nets[1].loss(&inputs.x[1], chunk, &device)?)?;
            opt.backward_step(&loss)?;
            *step += 1;
            if report_step(hooks, KIND, "finetune", (epoch, *step), &loss, chunk.len())?
                == Flow::Stop
            {
                return Ok(Box::new(best.1.unwrap_or(model)));
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        model.nets = [nets[0].net(&model.nets[0]), nets[1].net(&model.nets[1])];
        let mut scores = vec![("epoch_s".to_string(), secs)];
        for (s, name) in ["held_out_ce.src", "held_out_ce.tgt"].iter().enumerate() {
            let v = &inputs.valid[s];
            if v.n_rows() > 0 {
                let rows: Vec<usize> = (0..v.n_rows()).collect();
                let ce = nets[s].loss(v, &rows, &device)?;
                scores.push((
                    name.to_string(),
                    ce.to_dtype(DType::F64)?.to_scalar::<f64>()?,
                ));
            }
        }
        model.fit_space(inputs, cfg, seed, hooks)?;
        let mrr = crate::models::kit::nn::valid_mrr(&model, data, cfg.valid_max)?;
        if best.1.is_none() || mrr > best.0 || best.0.is_nan() {
            best = (mrr, Some(snapshot(&model)?));
        }
        hooks.epoch_scores(scores);
        let mut extra = opt.state()?;
        let b = best.1.as_ref().expect("a best model after an epoch");
        extra.extend(crate::models::kit::nn::best_state(
            "best.",
            best.0,
            0,
            b.tensors()?,
            &device,
        )?);
        if hooks.epoch_end("finetune", epoch, &model, extra)? == Flow::Stop {
            break;
        }
    }
    Ok(Box::new(best.1.unwrap_or(model)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The net taken out of fine-tuning is detached from its variables, so
    /// encoding every training text for the CCA fit records no gradient
    /// graph (it held 3.6 GB of forward graphs on the Bible), yet it still
    /// encodes with the fine-tuned weights.
    #[test]
    fn the_fine_tuned_net_is_detached_from_its_variables() {
        let dev = Device::Cpu;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let net = Net {
            input: InputMap::from_parts((0..6).collect(), vec![1.0; 6], 1.2, 0.75, 3.0, 6),
            layers: vec![
                Rbm::random(6, 4, 0.1, &mut rng, &dev).unwrap(),
                Rbm::random(4, 2, 0.1, &mut rng, &dev).unwrap(),
            ],
            decoder: Vec::new(),
        };
        let unrolled = Unrolled::new(&net).unwrap();
        // a fine-tuning step changes a variable in place
        let (w0, _) = &unrolled.enc[0];
        w0.set(&w0.as_tensor().affine(2.0, 0.0).unwrap()).unwrap();
        let tuned = unrolled.net(&net);
        for l in &tuned.layers {
            assert!(!l.w.is_variable() && !l.b.is_variable());
        }
        for (w, c) in &tuned.decoder {
            assert!(!w.is_variable() && !c.is_variable());
        }
        let (a, b) = (
            tuned.layers[0].w.to_vec2::<f32>().unwrap(),
            net.layers[0].w.to_vec2::<f32>().unwrap(),
        );
        assert_eq!(a[1][2], 2.0 * b[1][2]);
        // encoding through it is not tracked: no gradient reaches the variable
        let mut x = CsrMatrix::new(6);
        x.push_row([(0u32, 2.0f32), (3, 1.0)]);
        let code = tuned.up(&x, &[0], 2, &dev).unwrap();
        let grads = code.sum_all().unwrap().backward().unwrap();
        assert!(
            grads.get(w0.as_tensor()).is_none(),
            "the code records its forward graph"
        );
    }
}
