//! The models: every way of putting two languages' texts into one space,
//! behind one [`Model`] trait. One file per model.
//!
//! A model sees texts as raw term counts over its side's [`Vocabulary`] (a
//! [`CsrMatrix`] row per text) and applies its own weighting; it returns
//! unit-length rows so that a dot product is the cosine.

pub mod bae;
pub mod bm25;
pub mod xcnn;

use std::collections::BTreeMap;

use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::text::{CsrMatrix, Vocabulary};
use crate::Result;

/// Which language of a workspace a text is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The query language (`[source]`).
    Source,
    /// The document language (`[target]`).
    Target,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::Source => Side::Target,
            Side::Target => Side::Source,
        }
    }
}

/// A trained model that maps texts of either language into one space.
pub trait Model: Send + Sync {
    /// The model's registry name (`cl-lsi`, `s2net`, `xcnn`, ...).
    fn kind(&self) -> &'static str;
    /// Dimension of the shared space.
    fn dim(&self) -> usize;
    /// Unit-length embeddings (one row per text) of texts given as raw term
    /// counts over `side`'s vocabulary. A text with no known term gets a zero row.
    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>>;
    /// Unit-length vectors of every single term of `side`'s vocabulary, in id order.
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>>;
    /// The model's parameters as named tensors, for a safetensors checkpoint.
    fn tensors(&self) -> Result<Vec<(String, candle_core::Tensor)>>;
}

/// Hyper-parameters given as `--set key=value` (and the common flags), which
/// records every value a model reads, defaults included, so the session's
/// `config.toml` lists them all.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Params {
    given: BTreeMap<String, String>,
    #[serde(skip)]
    used: std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

impl Params {
    /// Parameters from `key=value` settings.
    pub fn new(given: BTreeMap<String, String>) -> Self {
        Params {
            given,
            used: Default::default(),
        }
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

    /// The value of `key` parsed as `T`, or `default`; the choice is recorded.
    pub fn get<T>(&self, key: &str, default: T) -> Result<T>
    where
        T: std::str::FromStr + ToString,
        T::Err: std::fmt::Display,
    {
        match self.given.get(key) {
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

    /// An optional string value (recorded when present).
    pub fn get_opt(&self, key: &str) -> Option<String> {
        let v = self.given.get(key).cloned();
        if let Some(s) = &v {
            self.record(key, s);
        }
        v
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

/// Vocabularies of both sides, as a model was trained with them.
#[derive(Debug, Clone)]
pub struct Vocabs {
    /// Query-language vocabulary.
    pub source: Vocabulary,
    /// Document-language vocabulary.
    pub target: Vocabulary,
}

impl Vocabs {
    /// The vocabulary of `side`.
    pub fn side(&self, side: Side) -> &Vocabulary {
        match side {
            Side::Source => &self.source,
            Side::Target => &self.target,
        }
    }
}

pub mod cca;
pub mod cl_lsi;
pub mod linear;
pub mod opca;
pub mod s2net;

/// Names of every trainable model, in the order `rosetta train --help` lists them.
pub const MODEL_NAMES: &[&str] = &["cl-lsi", "opca", "cca", "s2net", "xcnn", "bae"];

/// Every `--set` key each model reads (the runner's own keys aside, see
/// [`RUNNER_SETTINGS`]), so that a front-end can check a job before
/// launching it. `init` is read only when given. A test trains every model
/// and compares this table with the settings its session recorded.
pub const MODEL_SETTINGS: &[(&str, &[&str])] = &[
    ("cl-lsi", &["dim", "oversample", "power_iters"]),
    ("opca", &["dim", "oversample", "power_iters", "ridge"]),
    ("cca", &["dim", "oversample", "power_iters", "reg"]),
    (
        "s2net",
        &[
            "batch",
            "beta",
            "dim",
            "epochs",
            "gamma",
            "init",
            "init_scale",
            "lr",
            "optim",
            "weight_decay",
        ],
    ),
    (
        "xcnn",
        &[
            "batch",
            "dim",
            "epochs",
            "init",
            "init_bias",
            "init_scale",
            "layers",
            "loss",
            "lr",
            "mono_epochs",
            "mono_negatives",
            "mono_patience",
            "mono_valid",
            "negatives",
            "optim",
            "positives",
            "train_target",
            "valid_max",
            "weight_decay",
        ],
    ),
    (
        "bae",
        &[
            "batch",
            "center",
            "corr",
            "dim",
            "epochs",
            "init_scale",
            "input",
            "lr",
            "optim",
            "recon",
            "valid_max",
            "weight_decay",
        ],
    ),
    ("bm25", &["b", "k1"]),
    ("bm25-dict", &["b", "k1", "keep_untranslated"]),
    ("bm25-mt", &["b", "k1"]),
];

/// Settings the job runner reads for every trained model (not the lexical
/// baselines): early-stopping patience, step-record interval, test slow-down.
pub const RUNNER_SETTINGS: &[&str] = &["patience", "log_every", "step_delay_ms"];

/// Whether `model` reads the `--set` key `key` (runner keys included for
/// trained models); false for an unknown model.
pub fn takes_setting(model: &str, key: &str) -> bool {
    let own = MODEL_SETTINGS
        .iter()
        .find(|(m, _)| *m == model)
        .is_some_and(|(_, keys)| keys.contains(&key));
    own || (MODEL_NAMES.contains(&model) && RUNNER_SETTINGS.contains(&key))
}

/// Every name `rosetta train --model` takes: the models with a space, then
/// the lexical baselines ([`bm25::LEXICAL_NAMES`]).
pub fn all_model_names() -> Vec<&'static str> {
    MODEL_NAMES
        .iter()
        .chain(bm25::LEXICAL_NAMES)
        .copied()
        .collect()
}

/// The trainer of model `name`; an unknown name is an error listing the
/// known ones. One match arm per model.
pub fn trainer(name: &str) -> Result<Box<dyn crate::train::Trainer>> {
    match name {
        "cl-lsi" => Ok(Box::new(cl_lsi::ClLsiTrainer)),
        "opca" => Ok(Box::new(opca::OpcaTrainer)),
        "cca" => Ok(Box::new(cca::CcaTrainer)),
        "s2net" => Ok(Box::new(s2net::S2NetTrainer)),
        "xcnn" => Ok(xcnn::xcnn_trainer()),
        "bae" => Ok(bae::bae_trainer()),
        other if bm25::is_lexical(other) => Err(crate::Error::invalid(format!(
            "`{other}` is a lexical baseline: it has no trainer or embedding space"
        ))),
        other => Err(crate::Error::invalid(format!(
            "unknown model `{other}`; known models: {}",
            all_model_names().join(", ")
        ))),
    }
}
