//! A model's typed settings: what a `--set` key accepts ([`Check`]), its
//! row in help texts ([`Setting`]), and [`model_config!`], which declares a
//! model's `Config` struct with each field's default, check and help
//! beside it.
//!
//! Why a declarative macro and not a derive: a derive needs a proc-macro
//! crate (a second crate to build and keep, for about forty lines of
//! expansion), and `serde`'s own attributes cannot carry a check or a help
//! line. [`model_config!`] writes the struct (deriving `Serialize` and
//! `Deserialize`), its [`Settings::SETTINGS`] table (the registry's
//! validation, `--help` and README rows) and its [`Settings::read`] from
//! one list, so a field, its key, its default and its check cannot drift
//! apart. The key of a setting is its field's name.
//!
//! Adding a setting to a model is one line in its `Config`:
//! `name: Type = s("default", Check::..., "help"),` (or a shared [`Spec`]
//! such as [`DIM`]); the registry, `--set` validation, `rosetta train
//! --help` and `config.toml` pick it up (docs/cli/train.md's model list is
//! checked against the registry by a test: paste the new list).

pub use super::params::{Check, ModelParams, Params, Setting};
use super::Trainer;
use crate::Result;

/// A setting before its key is known: what a [`model_config!`] field
/// declares beside it (the field's name becomes the key).
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The default as written in `config.toml`; `None`: unset unless given.
    pub default: Option<&'static str>,
    /// What a value must be.
    pub check: Check,
    /// One line of help.
    pub help: &'static str,
    /// [`Setting::compute_only`].
    pub compute_only: bool,
}

impl Spec {
    /// The setting `key` of this spec.
    pub const fn keyed(self, key: &'static str) -> Setting {
        Setting {
            key,
            default: self.default,
            check: self.check,
            help: self.help,
            compute_only: self.compute_only,
        }
    }

    /// The same setting with another help line.
    pub const fn help(self, help: &'static str) -> Spec {
        Spec { help, ..self }
    }

    /// The same setting with another check.
    pub const fn check(self, check: Check) -> Spec {
        Spec { check, ..self }
    }

    /// The same setting, saying how the model computes rather than what it
    /// holds ([`Setting::compute_only`]).
    pub const fn compute_only(self) -> Spec {
        Spec {
            compute_only: true,
            ..self
        }
    }
}

/// A setting with a default.
pub const fn s(default: &'static str, check: Check, help: &'static str) -> Spec {
    Spec {
        default: Some(default),
        check,
        help,
        compute_only: false,
    }
}

/// A setting unset unless given (its field an `Option<String>`).
pub const fn unset(check: Check, help: &'static str) -> Spec {
    Spec {
        default: None,
        check,
        help,
        compute_only: false,
    }
}

/// A field type of a [`model_config!`] struct: read from [`ModelParams`]
/// (checked, defaulted and recorded there). Implemented for the plain
/// types a setting holds; a value with its own grammar is a `String`
/// (checked by its [`Check::Parse`]) that the model parses.
pub trait FromSetting: Sized {
    /// The value of `key`.
    fn from_setting(p: &ModelParams<'_>, key: &str) -> Result<Self>;
}

macro_rules! from_str_setting {
    ($($t:ty),*) => {$(
        impl FromSetting for $t {
            fn from_setting(p: &ModelParams<'_>, key: &str) -> Result<Self> {
                p.get(key)
            }
        }
    )*};
}
from_str_setting!(usize, u64, u32, f64, f32, bool, String);

impl FromSetting for Option<String> {
    fn from_setting(p: &ModelParams<'_>, key: &str) -> Result<Self> {
        p.get_opt(key)
    }
}

/// A typed settings struct, as [`model_config!`] declares it.
pub trait Settings: Sized {
    /// Its settings, in field order: the registry's rows.
    const SETTINGS: &'static [Setting];
    /// Every field read from `p` (given values checked, defaults filled in,
    /// each recorded).
    fn read(p: &ModelParams<'_>) -> Result<Self>;
    /// [`Settings::read`] from `params` for model `model` (named in errors).
    fn from_params(params: &Params, model: &str) -> Result<Self> {
        Self::read(&params.with_settings(model, Self::SETTINGS))
    }
}

/// What the job layer asks of a model's typed settings, whatever the
/// model: each answer is `None` for a model without that setting.
pub trait ModelConfig: std::fmt::Debug {
    /// The session (or checkpoint) `init=` starts from.
    fn init(&self) -> Option<&std::path::Path> {
        None
    }
    /// The `vectors=` start (`None` for a model without it; `Some(None)`
    /// spelled as [`VectorsSetting::None`](super::pretrained::VectorsSetting)).
    fn vectors(&self) -> Result<Option<super::pretrained::VectorsSetting>> {
        Ok(None)
    }
    /// The seed of the dictionary split the model fits on (`bli_seed`).
    fn bli_seed(&self) -> Option<u64> {
        None
    }
    /// Whether the job is handed the workspace's dictionary: a model that
    /// fits on a split of it.
    fn needs_dictionary(&self) -> bool {
        self.bli_seed().is_some()
    }
    /// How a recurrent model's recurrence runs.
    fn recurrence(&self) -> Result<Option<super::kit::lstm::Recurrence>> {
        Ok(None)
    }
    /// The arithmetic of a candle-trained model's products.
    fn precision(&self) -> Result<Option<super::precision::Precision>> {
        Ok(None)
    }
    /// How the model's rankings are reranked by late interaction (`None`:
    /// they are not, or the model has no token states).
    fn rerank(&self) -> Result<Option<super::kit::late::LateRerank>> {
        Ok(None)
    }
}

/// [`Settings::from_params`] as a boxed [`ModelConfig`], for
/// [`ModelDef::config`].
pub fn boxed<C: Settings + ModelConfig + 'static>(
    params: &Params,
    model: &str,
) -> Result<Box<dyn ModelConfig>> {
    Ok(Box::new(C::from_params(params, model)?))
}

/// A `precision` field's answer to [`ModelConfig::precision`].
pub fn precision(v: &str) -> Result<Option<super::precision::Precision>> {
    super::precision::setting(v).map(Some)
}

/// A `vectors` field's answer to [`ModelConfig::vectors`].
pub fn vectors(v: &str) -> Result<Option<super::pretrained::VectorsSetting>> {
    super::pretrained::setting(v).map(Some)
}

/// A typed config as the `key = "value"` settings `config.toml` records
/// (its `Serialize`: numbers in their shortest form that reads back the
/// same value), for a model that runs another with its own settings
/// (HDLR's OPCA start).
pub fn to_given<C: serde::Serialize>(
    config: &C,
) -> Result<std::collections::BTreeMap<String, String>> {
    let bad = |e: String| crate::Error::invalid(format!("settings as text: {e}"));
    let serde_json::Value::Object(map) =
        serde_json::to_value(config).map_err(|e| bad(e.to_string()))?
    else {
        return Err(bad("not a struct".into()));
    };
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in map {
        let text = match v {
            serde_json::Value::Null => continue,
            serde_json::Value::String(s) => s,
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Number(n) => n.to_string(),
            other => return Err(bad(format!("{k}: not a plain value: {other}"))),
        };
        out.insert(k, text);
    }
    Ok(out)
}

/// A `String` field with its own grammar (already checked by its
/// [`Check::Parse`]) as the model's type.
pub fn parse<T>(v: &str) -> Result<T>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    v.parse()
        .map_err(|e| crate::Error::invalid(format!("`{v}`: {e}")))
}

/// An `init` field's answer to [`ModelConfig::init`].
pub fn init(v: &Option<String>) -> Option<&std::path::Path> {
    v.as_deref().map(std::path::Path::new)
}

/// Declares a model's typed settings: a struct whose every field has its
/// [`Spec`] (default, check, help) beside it, deriving `Serialize` and
/// `Deserialize`, with [`Settings`] implemented from the same list.
///
/// ```ignore
/// model_config! {
///     /// S2Net's settings.
///     pub struct Config {
///         batch: usize = s("100", Check::Int { min: 2, max: 1_000_000 }, "pairs per minibatch"),
///         dim: usize = DIM,
///         init: Option<String> = INIT,
///     }
/// }
/// ```
macro_rules! model_config {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $spec:expr ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        $vis struct $name {
            $( $(#[$fmeta])* #[allow(missing_docs)] pub $field: $ty, )*
        }

        impl $crate::models::settings::Settings for $name {
            const SETTINGS: &'static [$crate::models::settings::Setting] = &[
                $( ($spec).keyed(stringify!($field)), )*
            ];
            fn read(p: &$crate::models::ModelParams<'_>) -> $crate::Result<Self> {
                Ok($name {
                    $( $field: $crate::models::settings::FromSetting::from_setting(
                        p,
                        stringify!($field),
                    )?, )*
                })
            }
        }
    };
}
pub(crate) use model_config;

/// One model: its name, what it is, its capabilities and its typed
/// settings. Capabilities that come with a value (an `init=` start, a
/// `vectors=` start, the dictionary split it fits on, a recurrence, a
/// precision) are asked of the typed config ([`ModelDef::config`]), which
/// answers `None` for a model without them.
#[derive(Clone, Copy)]
pub struct ModelDef {
    /// Registry name (`--model`).
    pub name: &'static str,
    /// One line: what the model is, and its paper.
    pub summary: &'static str,
    /// Whether texts and terms are mapped into a space (neighbours, export,
    /// lexicon induction); false for the lexical baselines.
    pub space: bool,
    /// Whether the job runner's settings ([`RUNNER_SETTINGS`]) apply.
    pub runner: bool,
    /// Whether its trainer computes on the device asked for (`--device
    /// cuda` trains on a GPU); false for a model that runs on the CPU
    /// whatever is asked (the closed-form fits, the topic models, the
    /// lexical baselines): `--device cuda` is refused for it before a
    /// session is written, and `auto` runs it on the CPU.
    pub gpu: bool,
    /// Whether its `vectors=` also reads word2vec files (`SOURCE.vec,TARGET.vec`),
    /// not only a session.
    pub word2vec: bool,
    /// The model's own settings: its `Config`'s [`Settings::SETTINGS`].
    pub settings: &'static [Setting],
    /// Its typed settings read from a job's [`Params`] (named for errors):
    /// [`boxed`]`::<Config>`.
    pub read: fn(&Params, &str) -> crate::Result<Box<dyn ModelConfig>>,
    /// Its trainer; `None` for the lexical baselines (run by their own job).
    pub trainer: Option<fn() -> Box<dyn Trainer>>,
    /// Its own `[text]` defaults, as `(key, value)` in the workspace TOML's
    /// syntax: they replace the global defaults for a workspace that does
    /// not set the key (measured: `docs/results.md`, "Text defaults").
    pub text: &'static [(&'static str, &'static str)],
    /// Its named presets ([`Preset`]): one setting's value standing for a
    /// set of others (the encoder's `recipe=clir`).
    pub presets: &'static [Preset],
}

/// A named preset of a model's settings: `--set KEY=NAME` gives each of
/// `sets` unless that setting is given beside it (a preset is overridable
/// setting by setting). The preset is expanded once, when a job's settings
/// are resolved, so `config.toml` records both the preset and every value
/// it gave.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    /// The setting naming it (`recipe`).
    pub key: &'static str,
    /// Its name: that setting's value (`clir`).
    pub name: &'static str,
    /// What it is for, with the figure that chose it (one line).
    pub help: &'static str,
    /// The settings it gives, `(key, value)`.
    pub sets: &'static [(&'static str, &'static str)],
}

/// The name the registry's rows had before they were typed definitions.
pub type ModelSpec = ModelDef;

impl std::fmt::Debug for ModelDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDef")
            .field("name", &self.name)
            .field("space", &self.space)
            .finish_non_exhaustive()
    }
}

impl ModelDef {
    /// The setting `key`, the runner's included where they apply.
    pub fn setting(&self, key: &str) -> Option<&'static Setting> {
        self.all_settings().find(|s| s.key == key)
    }

    /// Every setting the model reads: its own, then the runner's.
    pub fn all_settings(&self) -> impl Iterator<Item = &'static Setting> {
        let runner: &'static [Setting] = if self.runner { RUNNER_SETTINGS } else { &[] };
        self.settings.iter().chain(runner.iter())
    }

    /// `given` with the presets it names expanded: each setting a named
    /// preset gives is added unless given itself.
    pub fn with_presets(
        &self,
        given: &std::collections::BTreeMap<String, String>,
    ) -> std::collections::BTreeMap<String, String> {
        let mut out = given.clone();
        for p in self.presets {
            if given.get(p.key).map(|v| v.trim()) == Some(p.name) {
                for (k, v) in p.sets {
                    out.entry(k.to_string()).or_insert_with(|| v.to_string());
                }
            }
        }
        out
    }

    /// The model's typed settings read from `params` (each given value
    /// checked, defaults filled in, every value recorded).
    pub fn config(&self, params: &Params) -> crate::Result<Box<dyn ModelConfig>> {
        (self.read)(params, self.name)
    }
}

model_config! {
    /// The job runner's settings, read for every trained model (not the
    /// lexical baselines).
    pub struct RunnerSettings {
        patience: usize = s(
            "5",
            Check::Int { min: 1, max: u64::MAX },
            "epochs without a better validation MRR before early stopping",
        ),
        log_every: usize = s(
            "10",
            Check::Int { min: 1, max: u64::MAX },
            "a step record every N optimiser steps",
        ),
        step_delay_ms: u64 = s(
            "0",
            COUNT,
            "test only: sleep after every step",
        ),
        valid_sample: usize = s(
            "0",
            COUNT,
            "validation pairs scored each epoch: a sample of N drawn with the session's seed, the same every epoch (0: all); an encoder validates minutes faster on a CPU",
        ),
    }
}

/// Settings the job runner reads for every trained model (not the lexical
/// baselines): [`RunnerSettings`]'.
pub const RUNNER_SETTINGS: &[Setting] = RunnerSettings::SETTINGS;

impl RunnerSettings {
    /// Reads (and records) every runner setting: the given values or the
    /// defaults.
    pub fn from_params(params: &Params) -> crate::Result<RunnerSettings> {
        Self::read(&params.with_settings("runner", RUNNER_SETTINGS))
    }
}

// --- settings several models share -------------------------------------

/// Dimension of the shared space.
pub const DIM: Spec = s(
    "128",
    Check::Int {
        min: 1,
        max: super::nn::MAX_DIM as u64,
    },
    "dimension of the shared space (--dim)",
);
/// Training epochs.
pub const EPOCHS: Check = Check::Int {
    min: 1,
    max: 1_000_000,
};
/// Examples per minibatch.
pub const BATCH: Check = Check::Int {
    min: 1,
    max: 1_000_000,
};
/// A count that may be 0.
pub const COUNT: Check = Check::Int {
    min: 0,
    max: 1_000_000,
};
/// A number of constraints.
pub const CONSTRAINTS: Check = Check::Int {
    min: 0,
    max: 100_000_000,
};
/// A percentage.
pub const PERCENT: Check = Check::Range {
    min: 0.0,
    max: 100.0,
    open: false,
};
/// Dense or lazy Adam.
pub const OPTIM: Check = Check::Choice(&["adam", "lazy-adam"]);
/// A start from a trained session.
pub const INIT: Spec = unset(Check::Path, "start from a trained session (or checkpoint)");
/// Epochs at the start during which a `vectors=` start stays fixed.
pub const FROZEN_EPOCHS: Spec = s(
    "0",
    COUNT,
    "first epochs with the vectors= embeddings held fixed (0: trained from the start)",
);
/// A pretrained start from another session's term vectors
/// ([`super::pretrained`]).
pub const VECTORS: Spec = s(
    "none",
    Check::Parse(super::pretrained::check_session_only),
    "a session (an encoder, or any model with a space) whose term vectors start the first layer",
);
/// The arithmetic of a candle-trained model's matrix products
/// ([`super::precision`]): a setting of every model whose definition has
/// `gpu` (the models that compute on candle), and of no other.
pub const PRECISION: Spec = s(
    "f32",
    Check::Choice(&["f32", "bf16", "tf32"]),
    "matrix products: f32; bf16 (bfloat16 inputs, f32 results; weights, optimiser, losses f32); tf32 (CUDA only: TF32 tensor cores)",
)
.compute_only();
/// Randomised SVD's oversampling.
pub const OVERSAMPLE: Spec = s("10", COUNT, "randomised SVD: extra sketch columns");
/// Randomised SVD's power iterations (6).
pub const POWER_ITERS_6: Spec = s("6", COUNT, "randomised SVD: power iterations");
/// The closed-form eigensolver.
pub const SOLVER: Spec = s(
    "implicit",
    Check::Choice(&["implicit", "dense"]),
    "implicit: matrix-free, memory linear in the vocabulary; dense: V × V covariances, Cholesky whitening",
);
/// The implicit solver's tolerance.
pub const CG_TOL: Spec = s(
    "1e-3",
    Check::Positive,
    "implicit solver: relative residual each conjugate-gradient solve stops at",
);
/// The implicit solver's iteration cap.
pub const MAX_CG_ITERS: Spec = s(
    "500",
    Check::Int {
        min: 1,
        max: 1_000_000,
    },
    "implicit solver: most conjugate-gradient iterations per solve",
);
/// Decoupled weight decay.
pub const WEIGHT_DECAY: Spec = s("0", Check::NonNegative, "decoupled weight decay");
/// Validation pairs scored per epoch.
pub const VALID_MAX: Spec = s(
    "2000",
    Check::Int {
        min: 1,
        max: u64::MAX,
    },
    "validation pairs scored per epoch (at most)",
);
/// BM25's term saturation.
pub const BM25_K1: Spec = s("1.2", Check::NonNegative, "BM25 term saturation");
/// BM25's length normalisation.
pub const BM25_B: Spec = s(
    "0.75",
    Check::Range {
        min: 0.0,
        max: 1.0,
        open: false,
    },
    "BM25 length normalisation",
);

/// Whether the default of every setting of `settings` passes its check and
/// no key is there twice (the registry's test of every model's settings).
pub fn check_table(settings: &[Setting]) -> std::result::Result<(), String> {
    let mut keys: Vec<&str> = settings.iter().map(|s| s.key).collect();
    keys.sort_unstable();
    keys.dedup();
    if keys.len() != settings.len() {
        return Err("a key twice".into());
    }
    for s in settings {
        if let Some(d) = s.default {
            s.check
                .check(d)
                .map_err(|e| format!("{}={d}: {e}", s.key))?;
        }
    }
    Ok(())
}
