//! The models: every way of putting two languages' texts into one space,
//! behind one [`Model`] trait. One file per model, in its family's folder.
//!
//! - the contract, here: [`Model`], [`Trainer`] and what they exchange
//!   ([`trainer`]), the settings ([`Params`]) and the [`registry`];
//! - [`kit`]: what several families share (layers, optimisers, row kernels,
//!   linear algebra, pretrained starts); it imports no model;
//! - the families, each importing only the contract and the kit:
//!   [`linear`] (linear and closed-form: CL-LSI, OPCA, CCA, S2Net, HDLR,
//!   Procrustes), [`neural`] (XCNN, BAE, DBN-CCA, the adversarial BiLSTM),
//!   [`topic`] (JPLSA, CPLSA), [`lexical`] (BM25), [`encoder`] (pretrained
//!   transformer encoders). `tests/suite/layers.rs` checks the rule.
//!
//! A model sees texts as raw term counts over its side's [`Vocabulary`](crate::text::Vocabulary) (a
//! [`CsrMatrix`] row per text) and applies its own weighting; it returns
//! rows its [`Similarity`] compares: unit-length rows (a dot product is the
//! cosine) for almost every model, topic distributions for the topic models.

pub mod encoder;
pub mod kit;
pub mod lexical;
pub mod linear;
pub mod neural;
pub mod topic;
pub mod trainer;

// every model and kit module at its old path (`models::s2net`,
// `models::nn`, ...), for the front-ends, tests and examples
pub use kit::{implicit, lstm, nn, optim, precision, pretrained, rbm, rows};
pub use lexical::bm25;
pub use linear::{cca, cl_lsi, hdlr, opca, procrustes, s2net};
pub use neural::{adv_bilstm, bae, dbn_cca, xcnn};
pub use topic::plsa;

pub use trainer::{
    check_memory, DataSizes, Flow, Hooks, InitWeights, LogOnly, MemoryEstimate, Phase,
    PretrainedVectors, Resume, StepReport, TrainData, TrainDictionary, TrainSequences, TrainTexts,
    Trainer, ZERO_SHOT_PHASE,
};

use std::collections::BTreeMap;

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::space::Similarity;
use crate::text::{CsrMatrix, Sequences, Side};
use crate::{Error, Result};

mod device;
pub use device::{select_device, DeviceSpec};

/// `ids` as row indices of a term table of `rows` rows; an id past it is an
/// error naming it.
pub fn term_rows(ids: &[u32], rows: usize) -> Result<Vec<usize>> {
    ids.iter()
        .map(|&i| {
            if (i as usize) < rows {
                Ok(i as usize)
            } else {
                Err(Error::invalid(format!(
                    "term id {i} is past the vocabulary ({rows} terms)"
                )))
            }
        })
        .collect()
}

/// A trained model that maps texts of either language into one space.
pub trait Model: Send + Sync {
    /// The model's registry name (`cl-lsi`, `s2net`, `xcnn`, ...).
    fn kind(&self) -> &'static str;
    /// Dimension of the shared space.
    fn dim(&self) -> usize;
    /// Embeddings (one row per text, as [`Model::similarity`] compares them)
    /// of texts given as raw term counts over `side`'s vocabulary. A text
    /// with no known term gets a zero row.
    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>>;
    /// Vectors of every single term of `side`'s vocabulary, in id order, in
    /// the same form as [`Model::encode`]'s rows.
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>>;
    /// The rows `ids` of [`Model::term_vectors`], in the order of `ids` (an
    /// id past the vocabulary is an error). Default: the whole table, then
    /// those rows. A model whose whole table is costly (an encoder runs its
    /// network once per word) computes only these.
    fn term_vectors_of(&self, side: Side, ids: &[u32]) -> Result<Array2<f32>> {
        let all = self.term_vectors(side)?;
        let rows = term_rows(ids, all.nrows())?;
        Ok(all.select(ndarray::Axis(0), &rows))
    }
    /// How rows of this model's space are compared. Default: the cosine of
    /// unit-length rows.
    fn similarity(&self) -> Similarity {
        Similarity::Cosine
    }
    /// The model's parameters as named tensors, for a safetensors checkpoint.
    fn tensors(&self) -> Result<Vec<(String, candle_core::Tensor)>>;
    /// Whether the model maps texts into its shared space yet: false for a
    /// model still in pre-training (layers with no cross-language map), whose
    /// `encode` errors and whose epochs the runner does not validate.
    fn has_space(&self) -> bool {
        true
    }
    /// Whether the model reads word order (a sequence encoder): its texts
    /// must come as [`Sequences`] through [`Model::encode_sequences`], and
    /// [`Model::encode`] on counts alone is an error.
    fn reads_order(&self) -> bool {
        false
    }
    /// Embeddings of texts given as term ids in reading order.
    /// Default: the texts' counts through [`Model::encode`].
    fn encode_sequences(&self, side: Side, seqs: &Sequences) -> Result<Array2<f32>> {
        self.encode(side, &seqs.counts())
    }
    /// Whether the model reads raw text with its own tokenizer (a
    /// pretrained encoder): its texts must come through
    /// [`Model::encode_raw`], and [`Model::encode`] on counts is an error.
    fn reads_text(&self) -> bool {
        false
    }
    /// Embeddings of raw texts of `side` read as `role` (an encoder's query
    /// or passage prefix). Default: an error (the model reads terms).
    fn encode_raw(&self, side: Side, role: TextRole, texts: &[String]) -> Result<Array2<f32>> {
        let _ = (side, role, texts);
        Err(Error::invalid(format!(
            "{} reads analysed terms, not raw text",
            self.kind()
        )))
    }
}

/// What a text is to the task, for models that treat queries and documents
/// differently (an e5 encoder's `query: ` and `passage: ` prefixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRole {
    /// A query, or either side of a parallel sentence pair (a symmetric task).
    Query,
    /// A document of an ad-hoc collection.
    Document,
}

impl TextRole {
    /// The role of `side`'s texts in an ad-hoc task: source queries,
    /// target documents.
    pub fn adhoc(side: Side) -> TextRole {
        match side {
            Side::Source => TextRole::Query,
            Side::Target => TextRole::Document,
        }
    }
}

/// Texts as every kind of model reads them, row for row: counts over the
/// side's vocabulary, term ids in reading order (for sequence models), and
/// the raw texts (for models with their own tokenizer).
#[derive(Debug, Clone, Copy)]
pub struct TextRows<'a> {
    /// Raw term counts.
    pub counts: &'a CsrMatrix,
    /// Term ids in reading order, where known.
    pub seqs: Option<&'a Sequences>,
    /// The raw texts, where known.
    pub raw: Option<&'a [String]>,
}

/// Embeddings of texts known both as counts and (where `seqs` is given) as
/// sequences, row for row: a model that reads word order gets the
/// sequences, an encoder the raw texts, any other the counts. A sequence
/// model with no sequences (an encoder with no raw texts) is an error, never
/// a silent bag-of-words reading.
pub fn encode_texts(
    model: &dyn Model,
    side: Side,
    role: TextRole,
    rows: TextRows<'_>,
) -> Result<Array2<f32>> {
    let TextRows { counts, seqs, raw } = rows;
    if model.reads_text() {
        return match raw {
            Some(r) if r.len() == counts.n_rows() => model.encode_raw(side, role, r),
            Some(r) => Err(Error::invalid(format!(
                "{} texts as counts but {} as raw text",
                counts.n_rows(),
                r.len()
            ))),
            None => Err(Error::invalid(format!(
                "{} reads raw text, and these texts were given as terms only",
                model.kind()
            ))),
        };
    }
    if !model.reads_order() {
        return model.encode(side, counts);
    }
    match seqs {
        Some(s) if s.n_rows() == counts.n_rows() => model.encode_sequences(side, s),
        Some(s) => Err(Error::invalid(format!(
            "{} texts as counts but {} as sequences",
            counts.n_rows(),
            s.n_rows()
        ))),
        None => Err(Error::invalid(format!(
            "{} reads word order, and these texts were given as counts only",
            model.kind()
        ))),
    }
}

/// Hyper-parameters given as `--set key=value` (and the common flags), which
/// records every value a model reads, defaults included, so the session's
/// `config.toml` lists them all.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Params {
    given: BTreeMap<String, String>,
    /// Values resolved when the session was made (`config.toml`'s
    /// `[params]`): used for a key not given, before the registry default,
    /// so a resume reads what the interrupted run read.
    #[serde(default)]
    recorded: BTreeMap<String, String>,
    #[serde(skip)]
    used: std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

impl Params {
    /// Parameters from `key=value` settings.
    pub fn new(given: BTreeMap<String, String>) -> Self {
        Params {
            given,
            recorded: BTreeMap::new(),
            used: Default::default(),
        }
    }

    /// Parameters from the given settings, falling back to `recorded`
    /// values (a session's resolved `[params]`) before registry defaults.
    /// Only given keys count for [`Params::check_unused`].
    pub fn with_recorded(
        given: BTreeMap<String, String>,
        recorded: BTreeMap<String, String>,
    ) -> Self {
        Params {
            given,
            recorded,
            used: Default::default(),
        }
    }

    /// The given value of `key`, else its recorded one.
    fn lookup(&self, key: &str) -> Option<&String> {
        self.given.get(key).or_else(|| self.recorded.get(key))
    }

    /// Whether `key` was given (not merely recorded or defaulted).
    pub fn is_given(&self, key: &str) -> bool {
        self.given.contains_key(key)
    }

    /// Sets or replaces one value.
    pub fn set(&mut self, key: &str, value: impl ToString) {
        self.given.insert(key.to_string(), value.to_string());
    }

    fn record(&self, key: &str, v: &str) {
        self.used
            .lock()
            .expect("params lock")
            .insert(key.to_string(), v.to_string());
    }

    /// The settings of model `name` as read through its definition
    /// (defaults and checks from its `Config`, the runner's included).
    pub fn of(&self, name: &str) -> Result<ModelParams<'_>> {
        let def = registry::spec(name)?;
        Ok(ModelParams {
            params: self,
            name: def.name,
            settings: def.settings,
            runner: def.runner,
        })
    }

    /// The job runner's settings ([`registry::RUNNER_SETTINGS`]), whatever the model.
    pub fn runner(&self) -> ModelParams<'_> {
        self.with_settings("runner", registry::RUNNER_SETTINGS)
    }

    /// These parameters read as the settings `settings` of model `name`
    /// (a typed `Config`'s [`settings::Settings::SETTINGS`]).
    pub fn with_settings<'a>(
        &'a self,
        name: &'a str,
        settings: &'static [Setting],
    ) -> ModelParams<'a> {
        ModelParams {
            params: self,
            name,
            settings,
            runner: false,
        }
    }

    /// The value of `key` parsed as `T`, or `default`, with no registry
    /// check; the choice is recorded. For trainers outside the registry
    /// (test doubles); registered models read their typed `Config` ([`settings::Settings`]).
    pub fn get_or<T>(&self, key: &str, default: T) -> Result<T>
    where
        T: std::str::FromStr + ToString,
        T::Err: std::fmt::Display,
    {
        match self.lookup(key) {
            Some(s) => {
                let v = s.parse::<T>().map_err(|e| {
                    crate::Error::invalid(format!("--set {key}={s}: not a valid value ({e})"))
                })?;
                self.record(key, s);
                Ok(v)
            }
            None => {
                self.record(key, &default.to_string());
                Ok(default)
            }
        }
    }

    /// Every value read so far, defaults included.
    pub fn resolved(&self) -> BTreeMap<String, String> {
        self.used.lock().expect("params lock").clone()
    }

    /// Keys that were given but never read: an error naming them, so that a
    /// misspelt `--set` is not silently ignored.
    pub fn check_unused(&self) -> Result<()> {
        let used = self.used.lock().expect("params lock");
        let unused: Vec<&String> = self
            .given
            .keys()
            .filter(|k| !used.contains_key(*k))
            .collect();
        if unused.is_empty() {
            Ok(())
        } else {
            Err(crate::Error::invalid(format!(
                "unknown setting(s) for this model: {}",
                unused
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }
}

pub mod registry;
pub mod settings;
#[cfg(test)]
mod toy;

pub use registry::{ModelDef, ModelSpec, Setting, MODELS};

/// One model's view of [`Params`]: values are checked and defaulted by the
/// model's settings, and every value read is recorded.
#[derive(Debug, Clone, Copy)]
pub struct ModelParams<'a> {
    params: &'a Params,
    name: &'a str,
    settings: &'static [Setting],
    /// Whether the runner's settings are read through it too.
    runner: bool,
}

impl ModelParams<'_> {
    fn setting(&self, key: &str) -> Result<&'static Setting> {
        let runner: &'static [Setting] = if self.runner {
            registry::RUNNER_SETTINGS
        } else {
            &[]
        };
        self.settings
            .iter()
            .chain(runner)
            .find(|s| s.key == key)
            .ok_or_else(|| {
                crate::Error::invalid(format!(
                    "{}: `{key}` is not one of the model's settings",
                    self.name
                ))
            })
    }

    /// The value of `key` parsed as `T`: the given one (checked by the
    /// registry) or the registry default; the choice is recorded.
    pub fn get<T>(&self, key: &str) -> Result<T>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        let setting = self.setting(key)?;
        let name = self.name;
        let (value, given) = match self.params.lookup(key) {
            Some(v) => (v.as_str(), true),
            None => (
                setting.default.ok_or_else(|| {
                    crate::Error::invalid(format!("{name}: `{key}` has no default; set it"))
                })?,
                false,
            ),
        };
        if given {
            setting
                .check
                .check(value)
                .map_err(|e| crate::Error::invalid(format!("{name}: --set {key}={value}: {e}")))?;
        }
        let v = value.trim().parse::<T>().map_err(|e| {
            crate::Error::invalid(format!(
                "{name}: --set {key}={value}: not a valid value ({e})"
            ))
        })?;
        self.params.record(key, value.trim());
        Ok(v)
    }

    /// An optional setting with no default (`init`): the given value,
    /// checked and recorded, or `None`.
    pub fn get_opt(&self, key: &str) -> Result<Option<String>> {
        let setting = self.setting(key)?;
        match self.params.lookup(key) {
            None => Ok(None),
            Some(v) => {
                setting.check.check(v).map_err(|e| {
                    crate::Error::invalid(format!("{}: --set {key}={v}: {e}", self.name))
                })?;
                self.params.record(key, v);
                Ok(Some(v.clone()))
            }
        }
    }

    /// [`Params::check_unused`].
    pub fn check_unused(&self) -> Result<()> {
        self.params.check_unused()
    }
}

/// Whether `model` reads the `--set` key `key` (runner keys included for
/// trained models); false for an unknown model.
pub fn takes_setting(model: &str, key: &str) -> bool {
    registry::spec(model).is_ok_and(|m| m.setting(key).is_some())
}

/// Whether `name` is a lexical baseline (no trainer, no space).
pub fn is_lexical(name: &str) -> bool {
    registry::spec(name).is_ok_and(|m| m.trainer.is_none())
}

/// The trainer of model `name`; an unknown name is an error listing the
/// known ones, a lexical baseline one saying it has no trainer.
pub fn trainer(name: &str) -> Result<Box<dyn Trainer>> {
    let spec = registry::spec(name)?;
    match spec.trainer {
        Some(make) => Ok(make()),
        None => Err(crate::Error::invalid(format!(
            "`{name}` is a lexical baseline: it has no trainer or embedding space"
        ))),
    }
}
