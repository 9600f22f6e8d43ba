//! XCNN, the external-data composition network: a text is the sum over its
//! tokens of its terms' vectors `y_i = g(W_m … g(W_1 e_i + b_1) … + b_m)`
//! (`g = tanh`), composed on the device by a sparse gather and segment sum.
//! The plan has two phases: `mono` pre-initialises the target network on
//! pseudo-relevance triples of monolingual texts (skipped when `mono_epochs`
//! is 0 or `init` gives a network), keeping its best epoch by held-out
//! pairwise accuracy and stopping after `mono_patience` epochs without gain;
//! `cross` trains the source network on parallel pairs against the frozen
//! target network (or both, with `train_target`). Paper, equations, choices
//! and measured notes: `docs/models.md`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor, Var};
use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::models::kit::linear::{init_projections, rescale, PROJ_SOURCE};
use crate::models::kit::nn::{
    epoch_rng, lazy_optim, nonempty_rows, normal_tensor, report_step, softplus, to_array,
    unit_rows, valid_mrr, SparseBatch,
};
use crate::models::kit::optim::Adam;
use crate::models::settings::ModelDef;
use crate::models::settings::{
    self, boxed, model_config, s, Check, ModelConfig, Settings, BATCH, COUNT, DIM, INIT, OPTIM,
    PRECISION, VALID_MAX, VECTORS, WEIGHT_DECAY,
};
use crate::models::{Flow, Hooks, InitWeights, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::CsrMatrix;
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

// ---------------------------------------------------------------------------
// The composition network
// ---------------------------------------------------------------------------

/// One language's composition network (Eq. 5): a `V × k` first layer, its
/// bias, and `layers − 1` further `k × k` layers, all tanh.
pub struct Composer {
    /// `(weight, bias)` per layer; layer 0's weight is the `V × k` term table.
    pub layers: Vec<(Var, Var)>,
}

impl Composer {
    /// A network with `N(0,1)·scale` weights; biases `N(0,1)·scale` too (the
    /// paper's "parameters") or, with `bias` given, that constant in every
    /// entry (the authors' jDNN code starts its biases at −1.5).
    #[allow(clippy::too_many_arguments)]
    pub fn random(
        vocab: usize,
        dim: usize,
        layers: usize,
        scale: f64,
        bias: Option<f64>,
        rng: &mut ChaCha8Rng,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let mut out = Vec::new();
        for j in 0..layers {
            let rows = if j == 0 { vocab } else { dim };
            let w = normal_tensor((rows, dim), scale, rng, dtype, device)?;
            let b = normal_tensor((1, dim), scale, rng, dtype, device)?.reshape(dim)?;
            let b = match bias {
                Some(v) => (b.zeros_like()? + v)?,
                None => b,
            };
            out.push((Var::from_tensor(&w)?, Var::from_tensor(&b)?));
        }
        Ok(Composer { layers: out })
    }

    /// A network from named tensors `PREFIX.wJ` / `PREFIX.bJ` (J from 1).
    pub fn from_tensors(
        prefix: &str,
        tensors: &HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let mut layers = Vec::new();
        for j in 1.. {
            let (wk, bk) = (format!("{prefix}.w{j}"), format!("{prefix}.b{j}"));
            let (Some(w), Some(b)) = (tensors.get(&wk), tensors.get(&bk)) else {
                break;
            };
            // layer 1: a V × k term table; later layers k × k; biases k
            let k = layers
                .first()
                .map(|(w, _): &(Var, Var)| w.dims().get(1).copied().unwrap_or(0));
            let rows = if j == 1 { None } else { k };
            crate::models::kit::nn::check_shape(&wk, w, &[rows, k])?;
            let k = w.dims()[1];
            crate::models::kit::nn::check_shape(&bk, b, &[Some(k)])?;
            let w = w.to_dtype(dtype)?.to_device(device)?;
            let b = b.to_dtype(dtype)?.to_device(device)?;
            layers.push((Var::from_tensor(&w)?, Var::from_tensor(&b)?));
        }
        if layers.is_empty() {
            return Err(Error::invalid(format!(
                "checkpoint has no {prefix}.w1/{prefix}.b1 tensors"
            )));
        }
        Ok(Composer { layers })
    }

    /// Vocabulary size.
    pub fn vocab(&self) -> usize {
        self.layers[0].0.dims()[0]
    }

    /// Output dimension.
    pub fn dim(&self) -> usize {
        self.layers[0].0.dims()[1]
    }

    /// The variables, named `PREFIX.wJ` / `PREFIX.bJ`.
    pub fn named_vars(&self, prefix: &str) -> Vec<(String, Var)> {
        let mut out = Vec::new();
        for (j, (w, b)) in self.layers.iter().enumerate() {
            out.push((format!("{prefix}.w{}", j + 1), w.clone()));
            out.push((format!("{prefix}.b{}", j + 1), b.clone()));
        }
        out
    }

    /// Deep copies of the parameters, named as in [`Composer::named_vars`].
    pub fn snapshot(&self, prefix: &str) -> Result<Vec<(String, Tensor)>> {
        crate::models::kit::nn::copy_vars(self.named_vars(prefix))
    }

    /// Sets the parameters from a snapshot taken with the same prefix.
    pub fn set_from(&self, prefix: &str, snap: &[(String, Tensor)]) -> Result<()> {
        crate::models::kit::nn::set_vars(self.named_vars(prefix), snap)
    }

    /// Term vectors `y_i` of the terms `ids` (`None`: every term), one row each.
    pub fn term_table(&self, ids: Option<&Tensor>) -> Result<Tensor> {
        let w1 = &self.layers[0].0;
        let first = match ids {
            Some(ids) => crate::models::kit::rows::gather_rows(w1.as_tensor(), ids)?,
            None => w1.as_tensor().clone(),
        };
        self.table_from_rows(&first)
    }

    /// Term vectors from given first-layer rows (`W_1[:, i]` of some terms).
    pub fn table_from_rows(&self, first: &Tensor) -> Result<Tensor> {
        let b1 = &self.layers[0].1;
        let mut h = first.broadcast_add(b1.as_tensor())?.tanh()?;
        for (w, b) in &self.layers[1..] {
            h = crate::models::kit::precision::matmul(&h, w.as_tensor())?
                .broadcast_add(b.as_tensor())?
                .tanh()?;
        }
        Ok(h)
    }

    /// Like [`Composer::compose`], but the first-layer rows of the batch's
    /// terms become a fresh leaf variable (returned), so the gradient of the
    /// `V × k` table is only its `u × k` touched rows: for
    /// [`Adam::backward_step_rows`].
    pub fn compose_rows(&self, batch: &SparseBatch) -> Result<(Tensor, Var)> {
        let rows = self.layers[0].0.as_tensor().index_select(&batch.uniq, 0)?;
        let leaf = Var::from_tensor(&rows)?;
        let table = self.table_from_rows(leaf.as_tensor())?;
        Ok((batch.compose(&table, true)?, leaf))
    }

    /// Composed (unnormalised) vectors of a batch's texts, differentiable.
    pub fn compose(&self, batch: &SparseBatch) -> Result<Tensor> {
        if batch.nnz == 0 {
            return batch.compose(&self.term_table(None)?, false);
        }
        let table = self.term_table(Some(&batch.uniq))?;
        batch.compose(&table, true)
    }
}

// ---------------------------------------------------------------------------
// The objective
// ---------------------------------------------------------------------------

/// Which negatives the cross-lingual extension uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negatives {
    /// `K` random target texts of the training set per pair.
    Random(usize),
    /// Every other target text of the mini-batch.
    InBatch,
}

impl std::str::FromStr for Negatives {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "in-batch" {
            return Ok(Negatives::InBatch);
        }
        if let Some(k) = s.strip_prefix("random:") {
            return match k.parse::<usize>() {
                Ok(k) if (1..=MAX_NEGATIVES).contains(&k) => Ok(Negatives::Random(k)),
                _ => Err(format!(
                    "random:K needs K in 1..={MAX_NEGATIVES}, got {k:?} \
                     (each negative is a composed text per pair and step)"
                )),
            };
        }
        if s == "random" {
            return Ok(Negatives::Random(1));
        }
        Err("expected random:K or in-batch".to_string())
    }
}

/// Most random negatives per pair (`random:K`): beyond it a step composes
/// thousands of texts per pair and a job runs for hours without learning more.
pub const MAX_NEGATIVES: usize = 1000;

impl std::fmt::Display for Negatives {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Negatives::Random(k) => write!(f, "random:{k}"),
            Negatives::InBatch => write!(f, "in-batch"),
        }
    }
}

/// Mean of `J = cos(q, p) − mean_k cos(q, n_k)` over a batch (Eq. 7 / 9;
/// with several negatives the differences are averaged). `q`, `pos` are
/// `B × k`; `neg` is `(B·K) × k` with row `b·K + j` the `j`-th negative of
/// pair `b`, or `None` for in-batch negatives (every other row of `pos`).
pub fn objective(q: &Tensor, pos: &Tensor, neg: Option<&Tensor>) -> Result<Tensor> {
    let (b, k) = q.dims2()?;
    let qn = unit_rows(q)?;
    let pn = unit_rows(pos)?;
    let cp = (&qn * &pn)?.sum(1)?;
    let cn = match neg {
        Some(neg) => {
            let kk = neg.dim(0)? / b.max(1);
            let nn = unit_rows(neg)?.reshape((b, kk, k))?;
            nn.broadcast_mul(&qn.unsqueeze(1)?)?.sum(2)?.mean(1)?
        }
        None => {
            if b < 2 {
                cp.zeros_like()?
            } else {
                let c = crate::models::kit::precision::matmul(&qn, &pn.t()?)?;
                ((c.sum(1)? - &cp)? / (b as f64 - 1.0))?
            }
        }
    };
    Ok((cp - cn)?.mean_all()?)
}

/// What the training steps minimise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// The paper's objective (Eq. 7 / 9): minimise `−J`, `J = cos(q, p) −
    /// mean cos(q, n)`. Every negative pulls with the same weight, so with
    /// many negatives it pushes `q` from their centroid, not from the close
    /// ones.
    CosDiff,
    /// S2Net's pairwise logistic loss on the same cosines: the mean over
    /// (pair, negative) of `log(1 + exp(−γ (cos(q, p) − cos(q, n))))`, which
    /// weights a negative by how close it comes (not in the paper).
    Logistic(f64),
}

impl std::str::FromStr for Loss {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "cos" {
            return Ok(Loss::CosDiff);
        }
        if let Some(g) = s.strip_prefix("logistic:") {
            return match g.parse::<f64>() {
                Ok(g) if g.is_finite() && g > 0.0 => Ok(Loss::Logistic(g)),
                _ => Err(format!("logistic:G needs G > 0, got {g:?}")),
            };
        }
        Err("expected cos or logistic:G".to_string())
    }
}

impl std::fmt::Display for Loss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Loss::CosDiff => write!(f, "cos"),
            Loss::Logistic(g) => write!(f, "logistic:{g}"),
        }
    }
}

/// The loss of a batch to minimise (see [`Loss`]); `q`, `pos`, `neg` as in
/// [`objective`]. For [`Loss::CosDiff`] it is exactly `−objective`.
pub fn batch_loss(q: &Tensor, pos: &Tensor, neg: Option<&Tensor>, loss: Loss) -> Result<Tensor> {
    let gamma = match loss {
        Loss::CosDiff => return Ok(objective(q, pos, neg)?.neg()?),
        Loss::Logistic(g) => g,
    };
    let (b, k) = q.dims2()?;
    let qn = unit_rows(q)?;
    let pn = unit_rows(pos)?;
    let cp = (&qn * &pn)?.sum_keepdim(1)?;
    match neg {
        Some(neg) => {
            let kk = neg.dim(0)? / b.max(1);
            let nn = unit_rows(neg)?.reshape((b, kk, k))?;
            let cn = nn.broadcast_mul(&qn.unsqueeze(1)?)?.sum(2)?;
            let delta = cn.broadcast_sub(&cp)?;
            Ok(softplus(&(delta * gamma)?)?.mean_all()?)
        }
        None => {
            if b < 2 {
                return Ok(cp.sum_all()?.zeros_like()?);
            }
            // Every (i, j ≠ i); the diagonal has delta 0, softplus(0) = ln 2,
            // and no gradient (cp − c_ii is identically zero), so it is
            // subtracted as a constant.
            let c = crate::models::kit::precision::matmul(&qn, &pn.t()?)?;
            let delta = c.broadcast_sub(&cp)?;
            let all = softplus(&(delta * gamma)?)?.sum_all()?;
            let off = (all - (b as f64) * std::f64::consts::LN_2)?;
            Ok((off / ((b * (b - 1)) as f64))?)
        }
    }
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

/// A trained XCNN: one composition network per language.
pub struct XcnnModel {
    src: Composer,
    tgt: Composer,
}

impl XcnnModel {
    /// The model from checkpoint tensors (`src.*`, `tgt.*`).
    pub fn from_tensors(
        tensors: &HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let src = Composer::from_tensors("src", tensors, dtype, device)?;
        let tgt = Composer::from_tensors("tgt", tensors, dtype, device)?;
        if src.dim() != tgt.dim() {
            return Err(Error::invalid(format!(
                "xcnn checkpoint: source dim {} but target dim {}",
                src.dim(),
                tgt.dim()
            )));
        }
        Ok(XcnnModel { src, tgt })
    }

    fn net(&self, side: Side) -> &Composer {
        match side {
            Side::Source => &self.src,
            Side::Target => &self.tgt,
        }
    }

    /// Deep copy (a snapshot that later training does not change).
    fn snapshot(&self) -> Result<XcnnModel> {
        let map: HashMap<String, Tensor> = self.tensors()?.into_iter().collect();
        let dev = self.src.layers[0].0.device().clone();
        XcnnModel::from_tensors(&map, self.src.layers[0].0.dtype(), &dev)
    }
}

/// Unit rows of the texts of `counts` composed with `net` (zero rows for empty
/// texts), in chunks so memory stays bounded.
pub fn encode_with(net: &Composer, counts: &CsrMatrix) -> Result<Array2<f32>> {
    if counts.n_cols != net.vocab() {
        return Err(Error::invalid(format!(
            "texts counted over {} terms but the network knows {}",
            counts.n_cols,
            net.vocab()
        )));
    }
    let table = net.term_table(None)?.detach();
    let dev = table.device().clone();
    let mut out = Array2::zeros((counts.n_rows(), net.dim()));
    const CHUNK: usize = 4096;
    let mut start = 0;
    while start < counts.n_rows() {
        let end = (start + CHUNK).min(counts.n_rows());
        let rows: Vec<usize> = (start..end).collect();
        let b = SparseBatch::new(counts, &rows, false, table.dtype(), &dev)?;
        let y = unit_rows(&b.compose(&table, false)?)?;
        out.slice_mut(ndarray::s![start..end, ..])
            .assign(&to_array(&y)?);
        start = end;
    }
    Ok(out)
}

impl Model for XcnnModel {
    fn kind(&self) -> &'static str {
        "xcnn"
    }
    fn dim(&self) -> usize {
        self.src.dim()
    }
    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>> {
        encode_with(self.net(side), counts)
    }
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        to_array(&unit_rows(&self.net(side).term_table(None)?)?)
    }
    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let mut v = self.src.snapshot("src")?;
        v.extend(self.tgt.snapshot("tgt")?);
        Ok(v)
    }
}

// ---------------------------------------------------------------------------
// The trainer
// ---------------------------------------------------------------------------

/// Settings of an XCNN job, read from [`Params`].
#[derive(Debug, Clone)]
pub struct XcnnConfig {
    /// Shared-space dimension `k`.
    pub dim: usize,
    /// Composition depth `m`.
    pub layers: usize,
    /// Scale of the normal initialisation.
    pub init_scale: f64,
    /// Constant initial bias (`None`: `N(0,1)·init_scale` like the weights).
    pub init_bias: Option<f64>,
    /// Mini-batch size.
    pub batch: usize,
    /// Adam learning rate.
    pub lr: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Cross-lingual extension epochs (maximum).
    pub epochs: usize,
    /// Monolingual pre-initialisation epochs (maximum).
    pub mono_epochs: usize,
    /// Mono epochs without a better validation figure before it stops.
    pub mono_patience: usize,
    /// Share of mono triples held out for the mono validation figure.
    pub mono_valid: f64,
    /// Cross-lingual negatives.
    pub negatives: Negatives,
    /// What both phases minimise.
    pub loss: Loss,
    /// Negatives of the mono phase (the paper: one random text).
    pub mono_negatives: Negatives,
    /// How the mono phase's pseudo-relevant positives are mined.
    pub positives: Positives,
    /// Train the target network in the cross phase too (the paper freezes it).
    pub train_target: bool,
    /// Validation pairs used for the trainer's own best-epoch choice.
    pub valid_max: usize,
    /// Session directory to take a pre-initialised target network from.
    pub init: Option<PathBuf>,
    /// Session whose term vectors start both networks (`vectors=`); like a
    /// linear `init`, it replaces the monolingual pre-initialisation.
    pub vectors: Option<PathBuf>,
    /// Row-sparse ("lazy") Adam on the term tables instead of dense Adam.
    pub lazy: bool,
    /// `precision`: the arithmetic of the upper layers' and the in-batch
    /// cosines' products.
    pub precision: crate::models::kit::precision::Precision,
}

model_config! {
    /// XCNN's settings, as given (`--set`) and recorded (`config.toml`).
    pub struct Config {
        batch: usize = s("100", BATCH, "pairs per minibatch"),
        dim: usize = DIM,
        epochs: usize = s("50", COUNT, "cross-language epochs (0: pre-initialisation only)"),
        init: Option<String> = INIT,
        init_bias: String = s(
            "random",
            Check::Parse(check_init_bias),
            "random or a constant start of the biases",
        ),
        init_scale: f64 = s("0.1", Check::Positive, "std of the random start"),
        layers: usize = s("1", Check::Int { min: 1, max: 8 }, "tanh layers per network"),
        loss: String = s("cos", Check::Parse(check_loss), "cos or logistic:γ"),
        lr: f64 = s("0.01", Check::Positive, "Adam learning rate"),
        mono_epochs: usize = s("20", COUNT, "monolingual pre-initialisation epochs (0: none)"),
        mono_negatives: String = s(
            "random:1",
            Check::Parse(check_negatives),
            "negatives of the mono phase",
        ),
        mono_patience: usize = s("3", COUNT, "mono epochs without gain before it stops"),
        mono_valid: f64 = s(
            "0.05",
            Check::Range { min: 0.0, max: 1.0, open: true },
            "share of mono texts held out",
        ),
        negatives: String = s("random:1", Check::Parse(check_negatives), "random:K or in-batch"),
        optim: String = s("lazy-adam", OPTIM, "dense Adam or row-sparse lazy Adam"),
        positives: String = s(
            "tfidf",
            Check::Choice(&["tfidf", "bm25"]),
            "how mono positives are mined",
        ),
        precision: String = PRECISION,
        train_target: bool = s("false", Check::Bool, "train the target network in the cross phase"),
        valid_max: usize = VALID_MAX,
        vectors: String = VECTORS,
        weight_decay: f64 = WEIGHT_DECAY,
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
}

/// XCNN in the registry.
pub static DEF: ModelDef = ModelDef {
    name: "xcnn",
    summary: "cross-lingual compositional network with monolingual pre-initialisation (Gupta, Banchs and Rosso, IP&M 2017)",
    space: true,
    runner: true,
    gpu: true,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(xcnn_trainer),
    // measured on enhi (docs/results.md, "Text defaults"): stop words
    // kept cost ad-hoc MAP 0.23 -> 0.17 (the pseudo-relevance
    // pre-initialisation mines on them), n-gram units 0.23 -> 0.21
    text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    presets: &[],
};

fn check_negatives(v: &str) -> std::result::Result<(), String> {
    v.parse::<Negatives>().map(|_| ())
}
fn check_loss(v: &str) -> std::result::Result<(), String> {
    v.parse::<Loss>().map(|_| ())
}
fn check_init_bias(v: &str) -> std::result::Result<(), String> {
    if v == "random" || v.parse::<f64>().is_ok_and(f64::is_finite) {
        Ok(())
    } else {
        Err(format!("expected random or a number, got `{v}`"))
    }
}

impl XcnnConfig {
    /// Reads (and records) every setting; the registry checks the values.
    pub fn from_params(p: &Params) -> Result<Self> {
        let p = Config::from_params(p, "xcnn")?;
        let c =
            XcnnConfig {
                dim: p.dim,
                layers: p.layers,
                init_scale: p.init_scale,
                init_bias: match p.init_bias.as_str() {
                    "random" => None,
                    v => Some(v.parse::<f64>().ok().filter(|b| b.is_finite()).ok_or_else(
                        || {
                            Error::invalid(format!(
                                "xcnn: init_bias={v}: expected random or a number"
                            ))
                        },
                    )?),
                },
                batch: p.batch,
                lr: p.lr,
                weight_decay: p.weight_decay,
                epochs: p.epochs,
                mono_epochs: p.mono_epochs,
                mono_patience: p.mono_patience,
                mono_valid: p.mono_valid,
                negatives: settings::parse(&p.negatives)?,
                loss: settings::parse(&p.loss)?,
                mono_negatives: settings::parse(&p.mono_negatives)?,
                positives: settings::parse(&p.positives)?,
                train_target: p.train_target,
                valid_max: p.valid_max,
                init: p.init.as_deref().map(PathBuf::from),
                vectors: crate::models::kit::pretrained::setting(&p.vectors)?
                    .session()
                    .map(Path::to_path_buf),
                lazy: lazy_optim(&p.optim),
                precision: crate::models::kit::precision::setting(&p.precision)?,
            };
        if c.init.is_some() && c.vectors.is_some() {
            return Err(Error::invalid(
                "xcnn: give `init` (a session) or `vectors` (pretrained term vectors), not both",
            ));
        }
        let in_batch = |n: Negatives, epochs: usize| n == Negatives::InBatch && epochs > 0;
        if c.precision != crate::models::kit::precision::Precision::F32
            && c.layers < 2
            && !in_batch(c.negatives, c.epochs)
            && !in_batch(c.mono_negatives, c.mono_epochs)
        {
            return Err(Error::invalid(format!(
                "xcnn: precision={} would change nothing: with layers=1 and random negatives \
                 the network has no dense product (its input layer is a sparse gather-sum, \
                 kept in f32); set layers >= 2 or negatives=in-batch, or leave precision=f32",
                c.precision
            )));
        }
        Ok(c)
    }
}

/// How the pseudo-relevant positive of a monolingual text is chosen (when
/// the training data brings none): its best match by log-tf·idf cosine
/// (`tfidf`, the paper's Sec. 5.1 "most relevant title according to the
/// TF-IDF score") or by BM25 (`bm25`, k1 1.2, b 0.75), other than itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Positives {
    /// Best log-tf·idf cosine match.
    TfIdf,
    /// Best BM25 match.
    Bm25,
}

impl std::str::FromStr for Positives {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "tfidf" => Ok(Positives::TfIdf),
            "bm25" => Ok(Positives::Bm25),
            _ => Err("expected tfidf or bm25".into()),
        }
    }
}

impl std::fmt::Display for Positives {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Positives::TfIdf => "tfidf",
            Positives::Bm25 => "bm25",
        })
    }
}

/// Trains and reloads [`XcnnModel`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct XcnnTrainer;

/// The XCNN trainer, boxed for the model registry.
pub fn xcnn_trainer() -> Box<dyn Trainer> {
    Box::new(XcnnTrainer)
}

/// For each row of `m` (raw counts over `vocab`), the row of its best
/// log-tf·idf cosine match other than itself, or `None` when no other row
/// shares a term: the paper's pseudo-relevant positives (Sec. 5.1 uses the
/// best TF-IDF match). Runs the index's exact pruned miner
/// ([`crate::index::mining`]) with TF-IDF scoring and the vocabulary's df.
pub fn tfidf_positives(m: &CsrMatrix, vocab: &crate::text::Vocabulary) -> Result<Vec<Option<u32>>> {
    use crate::index::mining::{mine_positives, IdfSource, MineConfig, MineScoring};
    let cfg = MineConfig {
        scoring: MineScoring::TfIdfCosine,
        idf: IdfSource::Vocabulary,
        skip_duplicates: false,
    };
    Ok(mine_positives(m, vocab, &cfg)?.positives)
}

/// Pseudo-relevance triples of the mono phase, split into training and
/// held-out parts, with fixed negatives for the held-out figure.
struct MonoData {
    train: Vec<(usize, usize)>,
    held: Vec<(usize, usize, Vec<usize>)>,
    pool: Vec<usize>,
}

const MONO_VALID_NEGATIVES: usize = 10;

fn mono_data(
    data: &TrainData,
    cfg: &XcnnConfig,
    seed: u64,
    hooks: &mut dyn Hooks,
) -> Result<MonoData> {
    let m = &data.mono;
    if m.n_cols != data.vocabs.target.len() {
        return Err(Error::invalid(format!(
            "xcnn: monolingual texts counted over {} terms but the target vocabulary has {}",
            m.n_cols,
            data.vocabs.target.len()
        )));
    }
    let computed;
    let positives =
        if !data.mono_positive.is_empty() && data.mono_positive.iter().any(|p| p.is_some()) {
            if data.mono_positive.len() != m.n_rows() {
                return Err(Error::invalid(format!(
                    "xcnn: {} monolingual texts but {} pseudo-relevance entries",
                    m.n_rows(),
                    data.mono_positive.len()
                )));
            }
            hooks.log("xcnn mono: pseudo-relevant positives given with the training data");
            &data.mono_positive
        } else {
            let t = std::time::Instant::now();
            computed = match cfg.positives {
                Positives::TfIdf => tfidf_positives(m, &data.vocabs.target)?,
                Positives::Bm25 => {
                    use crate::index::mining::{mine_positives, MineConfig};
                    mine_positives(m, &data.vocabs.target, &MineConfig::default())?.positives
                }
            };
            hooks.log(&format!(
                "xcnn mono: best {} match mined for {} of {} monolingual texts in {:.1} s",
                cfg.positives,
                computed.iter().filter(|p| p.is_some()).count(),
                m.n_rows(),
                t.elapsed().as_secs_f64()
            ));
            &computed
        };
    let mut pairs = Vec::new();
    for (q, p) in positives.iter().enumerate() {
        if let Some(p) = *p {
            let p = p as usize;
            if p >= m.n_rows() {
                return Err(Error::invalid(format!(
                    "xcnn: pseudo-relevant positive {p} of mono text {q} is past the {} texts",
                    m.n_rows()
                )));
            }
            if p != q && !m.row_is_empty(q) && !m.row_is_empty(p) {
                pairs.push((q, p));
            }
        }
    }
    let pool = nonempty_rows(m);
    if pairs.is_empty() || pool.len() < 2 {
        return Err(Error::invalid(format!(
            "xcnn: mono_epochs={} but no monolingual text has a usable pseudo-relevant positive \
             (no two texts share a term); give mono data or set mono_epochs=0",
            cfg.mono_epochs
        )));
    }
    let mut rng = epoch_rng(seed, 7, 0);
    pairs.shuffle(&mut rng);
    let n_held = ((pairs.len() as f64) * cfg.mono_valid).round() as usize;
    let n_held = n_held.min(pairs.len().saturating_sub(1));
    let held = pairs
        .drain(..n_held)
        .map(|(q, p)| {
            let negs = (0..MONO_VALID_NEGATIVES)
                .map(|_| pool[rng.random_range(0..pool.len())])
                .collect();
            (q, p, negs)
        })
        .collect();
    Ok(MonoData {
        train: pairs,
        held,
        pool,
    })
}

/// Share of (held-out query, negative) pairs where the positive scores higher.
fn mono_accuracy(
    net: &Composer,
    m: &CsrMatrix,
    held: &[(usize, usize, Vec<usize>)],
) -> Result<f64> {
    if held.is_empty() {
        return Ok(f64::NAN);
    }
    let mut rows: Vec<usize> = Vec::new();
    for (q, p, n) in held {
        rows.push(*q);
        rows.push(*p);
        rows.extend(n);
    }
    let emb = encode_with(net, &m.select_rows(&rows))?;
    let (mut won, mut all) = (0usize, 0usize);
    let mut i = 0;
    for (_, _, n) in held {
        let q = emb.row(i);
        let sp = q.dot(&emb.row(i + 1));
        for j in 0..n.len() {
            let sn = q.dot(&emb.row(i + 2 + j));
            won += usize::from(sp > sn);
            all += 1;
        }
        i += 2 + n.len();
    }
    Ok(won as f64 / all.max(1) as f64)
}

/// Takes the target network of a pre-initialised session: the tensors
/// `tgt.*` of the `init` checkpoint the job layer read (a session's best
/// checkpoint, or a checkpoint file given directly, e.g. a session's
/// `checkpoints/last.safetensors`). Any checkpoint of an XCNN session
/// written in its cross phase holds the final pre-initialised target
/// network, since that phase never changes it. The job layer checked the
/// saved vocabularies; the shape is checked here.
pub fn load_init(
    init: &InitWeights,
    vocabs: &Vocabs,
    dim: usize,
    dtype: DType,
    device: &Device,
) -> Result<Composer> {
    let ck = &init.checkpoint;
    let net = Composer::from_tensors("tgt", &init.tensors, dtype, device)
        .map_err(|e| Error::file(ck, format!("init: {e}")))?;
    if net.vocab() != vocabs.target.len() || net.dim() != dim {
        return Err(Error::file(
            ck,
            format!(
                "init: target network is {} terms × {} dims, this job has {} × {dim}",
                net.vocab(),
                net.dim(),
                vocabs.target.len()
            ),
        ));
    }
    Ok(net)
}

/// Whether an `init` checkpoint is a linear model's (it holds
/// `proj.source`), rather than an XCNN one.
fn is_linear(init: &InitWeights) -> bool {
    init.tensors.contains_key(PROJ_SOURCE)
}

/// Both composition networks (one layer, biases 0) from the projections of a
/// trained linear model's checkpoint (checked as S2Net's `init`): term
/// row i is `idf_i · P[i]`, scaled so the table's root mean square is
/// `scale`. While tanh is near linear at that scale, a text's XCNN vector
/// `Σ count_i · tanh(row_i)` is then the linear model's projection of its
/// tf·idf vector up to a positive factor, which cosine ignores: training
/// starts where the linear model ended, as S2Net starts from OPCA (the
/// paper's XCNN starts from random parameters; this is for comparison).
pub fn composers_from_linear(
    init: &InitWeights,
    vocabs: &Vocabs,
    cfg: &XcnnConfig,
    dtype: DType,
    device: &Device,
) -> Result<(Composer, Composer)> {
    let (ps, pt) = init_projections(init, vocabs, cfg.dim)?;
    composers_from_tables(ps, pt, vocabs, cfg, dtype, device)
}

/// Both composition networks (one layer, biases 0) from term tables
/// (`vocabulary × dim` per language): row i is `idf_i · P[i]`, scaled so
/// the table's root mean square is `cfg.init_scale` (as
/// [`composers_from_linear`]).
pub fn composers_from_tables(
    ps: Array2<f32>,
    pt: Array2<f32>,
    vocabs: &Vocabs,
    cfg: &XcnnConfig,
    dtype: DType,
    device: &Device,
) -> Result<(Composer, Composer)> {
    if cfg.layers != 1 {
        return Err(Error::invalid(format!(
            "xcnn: a start from a linear model or term vectors needs layers=1 (got {})",
            cfg.layers
        )));
    }
    let net = |mut p: Array2<f32>, v: &crate::text::Vocabulary| -> Result<Composer> {
        for (i, mut row) in p.rows_mut().into_iter().enumerate() {
            row *= v.idf(i as u32);
        }
        let p = rescale(p, cfg.init_scale);
        let w = Tensor::from_vec(p.iter().copied().collect::<Vec<f32>>(), p.dim(), device)?
            .to_dtype(dtype)?;
        let b = Tensor::zeros(cfg.dim, dtype, device)?;
        Ok(Composer {
            layers: vec![(Var::from_tensor(&w)?, Var::from_tensor(&b)?)],
        })
    };
    Ok((net(ps, &vocabs.source)?, net(pt, &vocabs.target)?))
}

impl XcnnTrainer {
    #[allow(clippy::too_many_arguments)]
    fn mono_phase(
        &self,
        data: &TrainData,
        cfg: &XcnnConfig,
        model: &XcnnModel,
        device: &Device,
        seed: u64,
        start_epoch: usize,
        step: &mut usize,
        resume: Option<&HashMap<String, Tensor>>,
        hooks: &mut dyn Hooks,
    ) -> Result<Flow> {
        let md = mono_data(data, cfg, seed, hooks)?;
        hooks.log(&format!(
            "xcnn mono: {} training triples, {} held out",
            md.train.len(),
            md.held.len()
        ));
        let net = &model.tgt;
        let mut opt = Adam::new(net.named_vars("tgt"), cfg.lr, cfg.weight_decay)?;
        if let Some(t) = resume {
            opt.restore(t)?;
        }
        let dtype = net.layers[0].0.dtype();
        let mut best = (
            mono_accuracy(net, &data.mono, &md.held)?,
            net.snapshot("tgt")?,
        );
        let mut since_best = 0;
        // a resume continues the interrupted run's best snapshot and patience
        if let Some(t) = resume {
            if let Some((acc, since, snap)) =
                crate::models::kit::nn::restore_best_state("mono.best.", t)?
            {
                let mut snap: Vec<(String, Tensor)> = snap.into_iter().collect();
                snap.sort_by(|a, b| a.0.cmp(&b.0));
                best = (acc, snap);
                since_best = since;
            }
        }
        for epoch in start_epoch + 1..=cfg.mono_epochs {
            // patience is checked before an epoch, so that a run resumed
            // after the epoch that ran out of it stops as the original did
            if since_best >= cfg.mono_patience && !md.held.is_empty() {
                hooks.log(&format!(
                    "xcnn mono: no better held-out accuracy for {since_best} epochs; best {:.4}",
                    best.0
                ));
                break;
            }
            hooks.epoch_start("mono", epoch);
            let mut rng = epoch_rng(seed, 1, epoch);
            let mut order = md.train.clone();
            order.shuffle(&mut rng);
            for chunk in order.chunks(cfg.batch) {
                let b = chunk.len();
                let mut rows: Vec<usize> = chunk.iter().map(|t| t.0).collect();
                rows.extend(chunk.iter().map(|t| t.1));
                if let Negatives::Random(k) = cfg.mono_negatives {
                    for (q, _) in chunk {
                        for _ in 0..k {
                            let mut n = md.pool[rng.random_range(0..md.pool.len())];
                            if n == *q {
                                n = md.pool[rng.random_range(0..md.pool.len())];
                            }
                            rows.push(n);
                        }
                    }
                }
                let batch = SparseBatch::new(&data.mono, &rows, false, dtype, device)?;
                let (y, leaf) = if cfg.lazy {
                    let (y, leaf) = net.compose_rows(&batch)?;
                    (y, Some(leaf))
                } else {
                    (net.compose(&batch)?, None)
                };
                let (q, pos) = (y.narrow(0, 0, b)?, y.narrow(0, b, b)?);
                let loss = match cfg.mono_negatives {
                    Negatives::Random(_) => {
                        let neg = y.narrow(0, 2 * b, rows.len() - 2 * b)?;
                        batch_loss(&q, &pos, Some(&neg), cfg.loss)?
                    }
                    Negatives::InBatch => batch_loss(&q, &pos, None, cfg.loss)?,
                };
                match &leaf {
                    Some(leaf) => {
                        opt.backward_step_rows(&loss, &[("tgt.w1", &batch.uniq, leaf)])?
                    }
                    None => opt.backward_step(&loss)?,
                }
                *step += 1;
                if report_step(hooks, "xcnn", "mono", (epoch, *step), &loss, b)? == Flow::Stop {
                    net.set_from("tgt", &best.1)?;
                    return Ok(Flow::Stop);
                }
            }
            let acc = mono_accuracy(net, &data.mono, &md.held)?;
            hooks.log(&format!(
                "xcnn mono epoch {epoch}: held-out pairwise accuracy {acc:.4}"
            ));
            if acc > best.0 || best.0.is_nan() {
                best = (acc, net.snapshot("tgt")?);
                since_best = 0;
            } else {
                since_best += 1;
            }
            let mut extra = opt.state()?;
            extra.push((
                "mono.valid_accuracy".into(),
                Tensor::new(&[acc as f32], device)?,
            ));
            extra.extend(crate::models::kit::nn::best_state(
                "mono.best.",
                best.0,
                since_best,
                best.1.clone(),
                device,
            )?);
            if hooks.epoch_end("mono", epoch, model, extra)? == Flow::Stop {
                // The runner's early stopping looks at cross-lingual MRR, which
                // means nothing before the source network is trained: a stop
                // here ends the pre-initialisation only. A cancellation is
                // still honoured at the next step (`Hooks::step`).
                hooks.log(&format!(
                    "xcnn mono: stop requested after epoch {epoch}; going on to the cross phase"
                ));
                break;
            }
        }
        net.set_from("tgt", &best.1)?;
        Ok(Flow::Continue)
    }

    #[allow(clippy::too_many_arguments)]
    fn cross_phase(
        &self,
        data: &TrainData,
        cfg: &XcnnConfig,
        model: &XcnnModel,
        device: &Device,
        seed: u64,
        start_epoch: usize,
        step: &mut usize,
        resume: Option<&HashMap<String, Tensor>>,
        hooks: &mut dyn Hooks,
    ) -> Result<XcnnModel> {
        let pairs: Vec<usize> = (0..data.train_src.n_rows())
            .filter(|&i| !data.train_src.row_is_empty(i) && !data.train_tgt.row_is_empty(i))
            .collect();
        let pool = nonempty_rows(&data.train_tgt);
        let src = &model.src;
        let dtype = src.layers[0].0.dtype();
        // The target network is frozen: its term table once, outside the graph.
        // (unless `train_target` is set: then it trains along, not the paper)
        let tgt_table = if cfg.train_target {
            None
        } else {
            Some(model.tgt.term_table(None)?.detach())
        };
        let mut vars = src.named_vars("src");
        if cfg.train_target {
            vars.extend(model.tgt.named_vars("tgt"));
        }
        let mut opt = Adam::new(vars, cfg.lr, cfg.weight_decay)?;
        if let Some(t) = resume {
            opt.restore(t)?;
        }
        let mut best = (valid_mrr(model, data, cfg.valid_max)?, model.snapshot()?);
        if let Some(t) = resume {
            if let Some((mrr, _, snap)) =
                crate::models::kit::nn::restore_best_state("cross.best.", t)?
            {
                best = (mrr, XcnnModel::from_tensors(&snap, dtype, device)?);
            }
        }
        hooks.log(&format!(
            "xcnn cross: {} pairs, negatives {}, loss {}, start validation MRR {:.4}",
            pairs.len(),
            cfg.negatives,
            cfg.loss,
            best.0
        ));
        for epoch in start_epoch + 1..=cfg.epochs {
            hooks.epoch_start("cross", epoch);
            let mut rng = epoch_rng(seed, 2, epoch);
            let mut order = pairs.clone();
            order.shuffle(&mut rng);
            for chunk in order.chunks(cfg.batch) {
                let b = chunk.len();
                let sb = SparseBatch::new(&data.train_src, chunk, false, dtype, device)?;
                let mut trows = chunk.to_vec();
                if let Negatives::Random(k) = cfg.negatives {
                    for &i in chunk {
                        for _ in 0..k {
                            let mut n = pool[rng.random_range(0..pool.len())];
                            if n == i && pool.len() > 1 {
                                n = pool[rng.random_range(0..pool.len())];
                            }
                            trows.push(n);
                        }
                    }
                }
                let tb = SparseBatch::new(&data.train_tgt, &trows, false, dtype, device)?;
                let (yt, tleaf) = match &tgt_table {
                    Some(table) => (tb.compose(table, false)?, None),
                    None if cfg.lazy => {
                        let (y, leaf) = model.tgt.compose_rows(&tb)?;
                        (y, Some(leaf))
                    }
                    None => (model.tgt.compose(&tb)?, None),
                };
                let (ys, leaf) = if cfg.lazy {
                    let (y, leaf) = src.compose_rows(&sb)?;
                    (y, Some(leaf))
                } else {
                    (src.compose(&sb)?, None)
                };
                let pos = yt.narrow(0, 0, b)?;
                let loss = match cfg.negatives {
                    Negatives::Random(_) => {
                        let neg = yt.narrow(0, b, trows.len() - b)?;
                        batch_loss(&ys, &pos, Some(&neg), cfg.loss)?
                    }
                    Negatives::InBatch => batch_loss(&ys, &pos, None, cfg.loss)?,
                };
                match (&leaf, &tleaf) {
                    (Some(leaf), Some(tleaf)) => opt.backward_step_rows(
                        &loss,
                        &[("src.w1", &sb.uniq, leaf), ("tgt.w1", &tb.uniq, tleaf)],
                    )?,
                    (Some(leaf), None) => {
                        opt.backward_step_rows(&loss, &[("src.w1", &sb.uniq, leaf)])?
                    }
                    _ => opt.backward_step(&loss)?,
                }
                *step += 1;
                if report_step(hooks, "xcnn", "cross", (epoch, *step), &loss, b)? == Flow::Stop {
                    return Ok(best.1);
                }
            }
            let mrr = valid_mrr(model, data, cfg.valid_max)?;
            hooks.log(&format!(
                "xcnn cross epoch {epoch}: validation MRR {mrr:.4}"
            ));
            if mrr > best.0 || best.0.is_nan() {
                best = (mrr, model.snapshot()?);
            }
            let mut extra = opt.state()?;
            extra.extend(crate::models::kit::nn::best_state(
                "cross.best.",
                best.0,
                0,
                best.1.tensors()?,
                device,
            )?);
            if hooks.epoch_end("cross", epoch, model, extra)? == Flow::Stop {
                break;
            }
        }
        Ok(best.1)
    }
}

/// A start that fills one layer (a linear model's projections or term
/// vectors) needs `layers=1`.
fn one_layer_start(cfg: &XcnnConfig) -> Result<()> {
    if cfg.layers != 1 {
        return Err(Error::invalid(format!(
            "xcnn: a start from a linear model or term vectors needs layers=1 (got {})",
            cfg.layers
        )));
    }
    Ok(())
}

impl Trainer for XcnnTrainer {
    /// A start from a linear session or from term vectors fills one layer:
    /// refused with `layers` > 1 before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        let cfg = XcnnConfig::from_params(params)?;
        if cfg.vectors.is_some() {
            one_layer_start(&cfg)?;
        }
        Ok(())
    }

    /// A start from a linear model's checkpoint fills one layer: refused
    /// with `layers` > 1 before the session is written.
    fn check_init(&self, params: &Params, init: &InitWeights) -> Result<()> {
        let cfg = XcnnConfig::from_params(params)?;
        if is_linear(init) {
            one_layer_start(&cfg)?;
        }
        Ok(())
    }

    /// `mono` (pre-initialising the target network on monolingual texts,
    /// when `mono_epochs` > 0 and no `init` session), then `cross`.
    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let cfg = XcnnConfig::from_params(params)?;
        let mut plan = Vec::new();
        if cfg.mono_epochs > 0 && cfg.init.is_none() && cfg.vectors.is_none() {
            plan.push(Phase::pretraining(
                "mono",
                cfg.mono_epochs,
                data.mono.n_rows(),
            ));
        }
        plan.push(Phase::new("cross", cfg.epochs, data.train_src.n_rows()));
        Ok(plan)
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
        let cfg = XcnnConfig::from_params(params)?;
        params.check_unused()?;
        let _precision = cfg.precision.enter("xcnn", device)?;
        let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
        data.check_shapes("xcnn")?;
        let usable = (0..data.train_src.n_rows())
            .filter(|&i| !data.train_src.row_is_empty(i) && !data.train_tgt.row_is_empty(i))
            .count();
        if usable == 0 && cfg.epochs > 0 {
            return Err(Error::invalid(
                "xcnn: no training pair has known terms on both sides",
            ));
        }
        if cfg.dim > vs.max(vt) {
            hooks.log(&format!(
                "xcnn: warning: dim {} is larger than the vocabularies ({vs}, {vt})",
                cfg.dim
            ));
        }
        let dtype = DType::F32;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut step = 0usize;
        let (mut mono_start, mut cross_start) = (0usize, 0usize);
        let mut do_mono = cfg.mono_epochs > 0;
        // the `init` start the job layer read (a fresh start only)
        let init = match (&resume, &cfg.init) {
            (None, Some(_)) => Some(data.init_for("xcnn")?),
            _ => None,
        };
        let model = match &resume {
            Some(r) => {
                step = r.step;
                match r.phase.as_str() {
                    "mono" => mono_start = r.epoch,
                    "cross" => {
                        cross_start = r.epoch;
                        do_mono = false;
                    }
                    p => {
                        return Err(Error::invalid(format!(
                            "xcnn: cannot resume from phase {p:?} (expected mono or cross)"
                        )))
                    }
                }
                let m = XcnnModel::from_tensors(&r.tensors, dtype, device)?;
                if m.src.vocab() != vs || m.tgt.vocab() != vt || m.dim() != cfg.dim {
                    return Err(Error::invalid(
                        "xcnn: the checkpoint's shapes differ from this job's vocabularies or dim",
                    ));
                }
                m
            }
            None if init.is_some_and(is_linear) => {
                let dir = cfg.init.as_deref().unwrap_or(Path::new("."));
                do_mono = false;
                hooks.log(&format!(
                    "xcnn: both networks from the linear model in {}",
                    dir.display()
                ));
                let init = data.init_for("xcnn")?;
                let (src, tgt) = composers_from_linear(init, &data.vocabs, &cfg, dtype, device)?;
                XcnnModel { src, tgt }
            }
            None if cfg.vectors.is_some() => {
                let dir = cfg.vectors.as_deref().unwrap_or(Path::new("."));
                do_mono = false;
                let f = crate::models::kit::pretrained::start(
                    data.pretrained.as_ref(),
                    dir,
                    "xcnn",
                    cfg.dim,
                    cfg.init_scale,
                    &mut rng,
                    hooks,
                )?;
                let (src, tgt) =
                    composers_from_tables(f.source, f.target, &data.vocabs, &cfg, dtype, device)?;
                XcnnModel { src, tgt }
            }
            None => {
                let src = Composer::random(
                    vs,
                    cfg.dim,
                    cfg.layers,
                    cfg.init_scale,
                    cfg.init_bias,
                    &mut rng,
                    dtype,
                    device,
                )?;
                let tgt = match &cfg.init {
                    Some(dir) => {
                        do_mono = false;
                        hooks.log(&format!("xcnn: target network from {}", dir.display()));
                        load_init(data.init_for("xcnn")?, &data.vocabs, cfg.dim, dtype, device)?
                    }
                    None => Composer::random(
                        vt,
                        cfg.dim,
                        cfg.layers,
                        cfg.init_scale,
                        cfg.init_bias,
                        &mut rng,
                        dtype,
                        device,
                    )?,
                };
                XcnnModel { src, tgt }
            }
        };
        let rt = resume.as_ref().map(|r| &r.tensors);
        // (a resume after the last mono epoch still goes through the phase:
        // it restores the best mono snapshot, as the uninterrupted run did)
        if do_mono && mono_start <= cfg.mono_epochs {
            let flow = self.mono_phase(
                data, &cfg, &model, device, seed, mono_start, &mut step, rt, hooks,
            )?;
            if flow == Flow::Stop {
                return Ok(Box::new(model));
            }
        }
        let cross_resume = if cross_start > 0 { rt } else { None };
        let best = self.cross_phase(
            data,
            &cfg,
            &model,
            device,
            seed,
            cross_start,
            &mut step,
            cross_resume,
            hooks,
        )?;
        Ok(Box::new(best))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>> {
        let m = XcnnModel::from_tensors(&tensors, DType::F32, device)?;
        // the shapes the session's settings promise
        let XcnnConfig { dim, layers, .. } = XcnnConfig::from_params(params)?;
        for (side, net) in [("src", &m.src), ("tgt", &m.tgt)] {
            if net.dim() != dim || net.layers.len() != layers {
                return Err(Error::invalid(format!(
                    "xcnn checkpoint: `{side}` network has {} layer(s) of dim {}, \
                     the session's settings say {layers} of dim {dim} (`{side}.w1` {:?})",
                    net.layers.len(),
                    net.dim(),
                    net.layers[0].0.dims()
                )));
            }
        }
        if m.src.vocab() != vocabs.source.len() || m.tgt.vocab() != vocabs.target.len() {
            return Err(Error::invalid(format!(
                "xcnn checkpoint has {} × {} terms but the vocabularies have {} × {}",
                m.src.vocab(),
                m.tgt.vocab(),
                vocabs.source.len(),
                vocabs.target.len()
            )));
        }
        Ok(Box::new(m))
    }
}
