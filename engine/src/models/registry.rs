//! The model registry: one table naming every model once, with its settings,
//! their defaults and checks, whether it has an embedding space, and its
//! trainer. `rosetta train --help`, the workbench's job form, the README's
//! model table and the validation of `--set` values all read it; a model
//! reads its settings through [`Params`](super::Params), which takes the
//! default and the check from here.
//!
//! Adding a model: one file under `models/` with its [`Trainer`], and one
//! [`ModelSpec`] row in [`MODELS`].

use super::{
    adv_bilstm, bae, cca, cl_lsi, dbn_cca, encoder, hdlr, opca, plsa, procrustes, s2net, xcnn,
    Trainer,
};

/// What a setting's value must be. Every check refuses NaN and infinities.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// A whole number in `min..=max`.
    Int {
        /// Smallest value.
        min: u64,
        /// Largest value.
        max: u64,
    },
    /// A finite number `> 0`.
    Positive,
    /// A finite number `≥ 0`.
    NonNegative,
    /// A finite number in `[min, max]` (`max` excluded when `open`).
    Range {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// Whether `max` itself is refused.
        open: bool,
    },
    /// `true` or `false`.
    Bool,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// A value with its own grammar, checked by the function (the message
    /// says what is expected).
    Parse(fn(&str) -> Result<(), String>),
    /// A path (read when the job starts).
    Path,
}

impl Check {
    /// Checks `value`; the message says what was expected.
    pub fn check(&self, value: &str) -> Result<(), String> {
        let v = value.trim();
        let number = || -> Result<f64, String> {
            let x: f64 = v
                .parse()
                .map_err(|_| format!("expected a number, got `{v}`"))?;
            if x.is_finite() {
                Ok(x)
            } else {
                Err(format!("expected a finite number, got `{v}`"))
            }
        };
        match *self {
            Check::Int { min, max } => {
                let x: u64 = v
                    .parse()
                    .map_err(|_| format!("expected a whole number in {min}..={max}, got `{v}`"))?;
                if x < min || x > max {
                    return Err(format!("{x} is out of range ({min}..={max})"));
                }
                Ok(())
            }
            Check::Positive => {
                let x = number()?;
                if x > 0.0 {
                    Ok(())
                } else {
                    Err(format!("must be > 0, got {x}"))
                }
            }
            Check::NonNegative => {
                let x = number()?;
                if x >= 0.0 {
                    Ok(())
                } else {
                    Err(format!("must be ≥ 0, got {x}"))
                }
            }
            Check::Range { min, max, open } => {
                let x = number()?;
                let ok = x >= min && if open { x < max } else { x <= max };
                if ok {
                    Ok(())
                } else {
                    let close = if open { ")" } else { "]" };
                    Err(format!("must lie in [{min}, {max}{close}, got {x}"))
                }
            }
            Check::Bool => match v {
                "true" | "false" => Ok(()),
                _ => Err(format!("expected true or false, got `{v}`")),
            },
            Check::Choice(words) => {
                if words.contains(&v) {
                    Ok(())
                } else {
                    Err(format!("expected {}, got `{v}`", words.join(" or ")))
                }
            }
            Check::Parse(f) => f(v),
            Check::Path => {
                if v.is_empty() {
                    Err("expected a path".into())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// A short description of the accepted values, for help texts.
    pub fn describe(&self) -> String {
        match *self {
            Check::Int { min, max } if max == u64::MAX => format!("integer ≥ {min}"),
            Check::Int { min, max } => format!("integer {min}..={max}"),
            Check::Positive => "number > 0".into(),
            Check::NonNegative => "number ≥ 0".into(),
            Check::Range { min, max, open } => {
                format!("number in [{min}, {max}{}", if open { ")" } else { "]" })
            }
            Check::Bool => "true|false".into(),
            Check::Choice(w) => w.join("|"),
            Check::Parse(_) => "see the model's docs".into(),
            Check::Path => "path".into(),
        }
    }
}

/// One `--set` key of a model.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The key.
    pub key: &'static str,
    /// The default as written in `config.toml`; `None`: unset unless given.
    pub default: Option<&'static str>,
    /// What a value must be.
    pub check: Check,
    /// One line of help.
    pub help: &'static str,
}

/// One model of the registry.
#[derive(Clone, Copy)]
pub struct ModelSpec {
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
    /// The model's own settings.
    pub settings: &'static [Setting],
    /// Its trainer; `None` for the lexical baselines (run by their own job).
    pub trainer: Option<fn() -> Box<dyn Trainer>>,
    /// Its own `[text]` defaults, as `(key, value)` in the workspace TOML's
    /// syntax: they replace the global defaults for a workspace that does
    /// not set the key (measured: `docs/results.md`, "Text defaults").
    pub text: &'static [(&'static str, &'static str)],
}

impl std::fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSpec")
            .field("name", &self.name)
            .field("space", &self.space)
            .finish_non_exhaustive()
    }
}

impl ModelSpec {
    /// The setting `key`, the runner's included where they apply.
    pub fn setting(&self, key: &str) -> Option<&'static Setting> {
        self.all_settings().find(|s| s.key == key)
    }

    /// Every setting the model reads: its own, then the runner's.
    pub fn all_settings(&self) -> impl Iterator<Item = &'static Setting> {
        let runner: &'static [Setting] = if self.runner { RUNNER_SETTINGS } else { &[] };
        self.settings.iter().chain(runner.iter())
    }
}

const fn s(key: &'static str, default: &'static str, check: Check, help: &'static str) -> Setting {
    Setting {
        key,
        default: Some(default),
        check,
        help,
    }
}

const DIM: Setting = s(
    "dim",
    "128",
    Check::Int {
        min: 1,
        max: super::nn::MAX_DIM as u64,
    },
    "dimension of the shared space (--dim)",
);
const EPOCHS: Check = Check::Int {
    min: 1,
    max: 1_000_000,
};
const BATCH: Check = Check::Int {
    min: 1,
    max: 1_000_000,
};
const COUNT: Check = Check::Int {
    min: 0,
    max: 1_000_000,
};
const CONSTRAINTS: Check = Check::Int {
    min: 0,
    max: 100_000_000,
};
const PERCENT: Check = Check::Range {
    min: 0.0,
    max: 100.0,
    open: false,
};
const OPTIM: Check = Check::Choice(&["adam", "lazy-adam"]);
const INIT: Setting = Setting {
    key: "init",
    default: None,
    check: Check::Path,
    help: "start from a trained session (or checkpoint)",
};
/// Epochs at the start during which a `vectors=` start stays fixed.
const FROZEN_EPOCHS: Setting = s(
    "frozen_epochs",
    "0",
    COUNT,
    "first epochs with the vectors= embeddings held fixed (0: trained from the start)",
);
/// A pretrained start from another session's term vectors
/// ([`super::pretrained`]).
const VECTORS: Setting = s(
    "vectors",
    "none",
    Check::Parse(super::pretrained::check_session_only),
    "a session (an encoder, or any model with a space) whose term vectors start the first layer",
);
/// The arithmetic of a candle-trained model's matrix products
/// ([`super::precision`]): a row of every model whose registry row has
/// `gpu` (the models that compute on candle), and of no other.
const PRECISION: Setting = s(
    "precision",
    "f32",
    Check::Choice(&["f32", "bf16", "tf32"]),
    "matrix products: f32; bf16 (bfloat16 inputs, f32 results; weights, optimiser, losses f32); tf32 (CUDA only: TF32 tensor cores)",
);
const OVERSAMPLE: Setting = s(
    "oversample",
    "10",
    COUNT,
    "randomised SVD: extra sketch columns",
);
const POWER_ITERS_6: Setting = s(
    "power_iters",
    "6",
    COUNT,
    "randomised SVD: power iterations",
);
const SOLVER: Setting = s(
    "solver",
    "implicit",
    Check::Choice(&["implicit", "dense"]),
    "implicit: matrix-free, memory linear in the vocabulary; dense: V × V covariances, Cholesky whitening",
);
const CG_TOL: Setting = s(
    "cg_tol",
    "1e-3",
    Check::Positive,
    "implicit solver: relative residual each conjugate-gradient solve stops at",
);
const MAX_CG_ITERS: Setting = s(
    "max_cg_iters",
    "500",
    Check::Int {
        min: 1,
        max: 1_000_000,
    },
    "implicit solver: most conjugate-gradient iterations per solve",
);
const WEIGHT_DECAY: Setting = s(
    "weight_decay",
    "0",
    Check::NonNegative,
    "decoupled weight decay",
);
const VALID_MAX: Setting = s(
    "valid_max",
    "2000",
    Check::Int {
        min: 1,
        max: u64::MAX,
    },
    "validation pairs scored per epoch (at most)",
);
const BM25_K1: Setting = s("k1", "1.2", Check::NonNegative, "BM25 term saturation");
const BM25_B: Setting = s(
    "b",
    "0.75",
    Check::Range {
        min: 0.0,
        max: 1.0,
        open: false,
    },
    "BM25 length normalisation",
);
const BM25_EXPAND: Setting = s(
    "expand",
    "none",
    Check::Choice(&["none", "bo1", "rm3"]),
    "pseudo-relevance feedback: Terrier's Bo1 or Anserini's RM3",
);
const BM25_FB_DOCS: Setting = s(
    "fb_docs",
    "auto",
    Check::Parse(auto_count),
    "feedback documents (auto: 3 for bo1, 10 for rm3)",
);
const BM25_FB_TERMS: Setting = s(
    "fb_terms",
    "auto",
    Check::Parse(auto_count),
    "expansion terms (auto: 10)",
);
const BM25_RM3_WEIGHT: Setting = s(
    "rm3_weight",
    "0.5",
    Check::Range {
        min: 0.0,
        max: 1.0,
        open: false,
    },
    "RM3: weight of the original query",
);

const PLSA_ALPHA: Setting = s(
    "alpha",
    "1.1",
    Check::Range {
        min: 1.0,
        max: 1e6,
        open: false,
    },
    "Dirichlet prior on each pair's topic distribution θ (MAP: α − 1 pseudo-counts)",
);
const PLSA_BETA: Setting = s(
    "beta",
    "1.01",
    Check::Range {
        min: 1.0,
        max: 1e6,
        open: false,
    },
    "Dirichlet prior on each topic's word distribution φ (MAP: β − 1 pseudo-counts)",
);
const PLSA_DIM: Setting = s(
    "dim",
    "128",
    Check::Int {
        min: 1,
        max: super::nn::MAX_DIM as u64,
    },
    "number of topics K (--dim)",
);
const PLSA_EPOCHS: Setting = s("epochs", "50", EPOCHS, "EM iterations (one epoch each)");
const PLSA_FOLD_IN: Setting = s(
    "fold_in",
    "10",
    Check::Int {
        min: 1,
        max: 10_000,
    },
    "EM iterations folding in a text's θ (the seed's 10)",
);
const PLSA_FOLD_IN_ALPHA: Setting = s(
    "fold_in_alpha",
    "1.001",
    Check::Range {
        min: 1.0,
        max: 1e6,
        open: false,
    },
    "Dirichlet prior on a folded-in text's θ (short texts want it near 1)",
);
/// JPLSA's settings; CPLSA's are these and its constraint's.
const PLSA_SETTINGS: &[Setting] = &[
    PLSA_ALPHA,
    PLSA_BETA,
    PLSA_DIM,
    PLSA_EPOCHS,
    PLSA_FOLD_IN,
    PLSA_FOLD_IN_ALPHA,
];
/// The topic models' `[text]` defaults: PLSA models every token, so stop
/// words (which would fill the topics) are removed, and a text is its
/// known words (no n-gram units).
const PLSA_TEXT: &[(&str, &str)] = &[("stopwords", "true"), ("oov_ngrams", "0")];

fn auto_count(v: &str) -> Result<(), String> {
    match v.parse::<u64>() {
        _ if v == "auto" => Ok(()),
        Ok(n) if (1..=100_000).contains(&n) => Ok(()),
        _ => Err(format!(
            "expected auto or a whole number in 1..=100000, got `{v}`"
        )),
    }
}
fn negatives(v: &str) -> Result<(), String> {
    v.parse::<xcnn::Negatives>().map(|_| ())
}
fn xcnn_loss(v: &str) -> Result<(), String> {
    v.parse::<xcnn::Loss>().map(|_| ())
}
fn init_bias(v: &str) -> Result<(), String> {
    if v == "random" || v.parse::<f64>().is_ok_and(f64::is_finite) {
        Ok(())
    } else {
        Err(format!("expected random or a number, got `{v}`"))
    }
}
fn dbn_layers(v: &str) -> Result<(), String> {
    dbn_cca::parse_layers(v).map(|_| ())
}
fn recon(v: &str) -> Result<(), String> {
    match v.strip_prefix("sampled:").map(str::parse::<usize>) {
        _ if v == "full" => Ok(()),
        Some(Ok(n)) if n > 0 => Ok(()),
        _ => Err(format!("expected full or sampled:N (N ≥ 1), got `{v}`")),
    }
}

/// Settings the job runner reads for every trained model (not the lexical
/// baselines).
pub const RUNNER_SETTINGS: &[Setting] = &[
    s(
        "patience",
        "5",
        Check::Int {
            min: 1,
            max: u64::MAX,
        },
        "epochs without a better validation MRR before early stopping",
    ),
    s(
        "log_every",
        "10",
        Check::Int {
            min: 1,
            max: u64::MAX,
        },
        "a step record every N optimiser steps",
    ),
    s(
        "step_delay_ms",
        "0",
        COUNT,
        "test only: sleep after every step",
    ),
];

/// The job runner's settings ([`RUNNER_SETTINGS`]), read once from a job's
/// [`Params`](super::Params) (the runner's own typed config, as each
/// trainer has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerSettings {
    /// `patience`: epochs without a better validation MRR before early stopping.
    pub patience: usize,
    /// `log_every`: a step record every N optimiser steps.
    pub log_every: usize,
    /// `step_delay_ms`: sleep after every step (tests).
    pub step_delay_ms: u64,
}

impl RunnerSettings {
    /// Reads (and records) every runner setting: the given values or the
    /// defaults.
    pub fn from_params(params: &super::Params) -> crate::Result<RunnerSettings> {
        let p = params.runner();
        Ok(RunnerSettings {
            patience: p.get("patience")?,
            log_every: p.get("log_every")?,
            step_delay_ms: p.get("step_delay_ms")?,
        })
    }
}

/// The runner's settings alone, for [`Params::runner`](super::Params::runner).
pub(super) static RUNNER: ModelSpec = ModelSpec {
    name: "runner",
    summary: "the job runner's settings",
    space: false,
    runner: true,
    gpu: false,
    settings: &[],
    trainer: None,
    text: &[],
};

/// Every model, in the order `rosetta train --help` lists them: the models
/// with a space, then the lexical baselines.
pub static MODELS: &[ModelSpec] = &[
    ModelSpec {
        name: "cl-lsi",
        summary: "cross-language LSI: truncated SVD of the stacked bilingual term-document matrix",
        space: true,
        runner: true,
        gpu: false,
        settings: &[
            DIM,
            OVERSAMPLE,
            s(
                "power_iters",
                "4",
                COUNT,
                "randomised SVD: power iterations",
            ),
        ],
        trainer: Some(|| Box::new(cl_lsi::ClLsiTrainer)),
        // measured on enhi: stop words kept or n-gram units cost ad-hoc MAP
        // 0.18 -> 0.14 (while sentence MRR rises 0.20 -> 0.34 and the
        // Bible gains everywhere): the baseline keeps the settings it was
        // compared under; `stopwords = false` in a workspace gives the rest
        text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    },
    ModelSpec {
        name: "opca",
        summary:
            "oriented PCA: generalised eigenproblem of translation-noise covariance (Yih et al., CoNLL 2011)",
        space: true,
        runner: true,
        gpu: false,
        settings: &[
            CG_TOL,
            DIM,
            MAX_CG_ITERS,
            OVERSAMPLE,
            POWER_ITERS_6,
            s(
                "ridge",
                "0.1",
                Check::NonNegative,
                "ridge on the noise covariance",
            ),
            SOLVER,
        ],
        trainer: Some(|| Box::new(opca::OpcaTrainer)),
        text: &[],
    },
    ModelSpec {
        name: "cca",
        summary: "regularised canonical correlation analysis of the aligned bags of words",
        space: true,
        runner: true,
        gpu: false,
        settings: &[
            CG_TOL,
            DIM,
            MAX_CG_ITERS,
            OVERSAMPLE,
            POWER_ITERS_6,
            s(
                "reg",
                "0.3",
                Check::NonNegative,
                "ridge relative to the covariances' mean diagonal",
            ),
            SOLVER,
        ],
        trainer: Some(|| Box::new(cca::CcaTrainer)),
        text: &[],
    },
    ModelSpec {
        name: "s2net",
        summary: "Siamese linear projection trained on in-batch cosine margins (Yih et al., CoNLL 2011)",
        space: true,
        runner: true,
        gpu: true,
        settings: &[
            s(
                "batch",
                "100",
                Check::Int {
                    min: 2,
                    max: 1_000_000,
                },
                "pairs per minibatch (the others are the negatives)",
            ),
            s(
                "beta",
                "0",
                Check::NonNegative,
                "pull towards the start (needs optim=adam)",
            ),
            DIM,
            s("epochs", "10", EPOCHS, "training epochs"),
            s(
                "gamma",
                "10",
                Check::Positive,
                "scale of the cosine margins",
            ),
            INIT,
            s(
                "init_scale",
                "0.01",
                Check::Positive,
                "std of the random start",
            ),
            s("lr", "0.001", Check::Positive, "Adam learning rate"),
            s("optim", "adam", OPTIM, "dense Adam or row-sparse lazy Adam"),
            PRECISION,
            VECTORS,
            WEIGHT_DECAY,
        ],
        trainer: Some(|| Box::new(s2net::S2NetTrainer)),
        text: &[],
    },
    ModelSpec {
        name: "hdlr",
        summary: "high-dimension low-rank metric learning: ITML on A = U Uᵀ from an OPCA start (Yih et al., CoNLL 2011)",
        space: true,
        runner: true,
        gpu: false,
        settings: &[
            s(
                "cg_tol",
                "1e-3",
                Check::Positive,
                "OPCA start (no init), implicit solver: conjugate-gradient relative residual",
            ),
            DIM,
            s(
                "dissimilar_pct",
                "95",
                PERCENT,
                "l: random pairs' start-distance percentile dissimilar pairs must exceed",
            ),
            s("epochs", "10", EPOCHS, "ITML passes over the constraints"),
            s(
                "gamma",
                "1",
                Check::Positive,
                "ITML slack trade-off (large: hard constraints)",
            ),
            Setting {
                key: "init",
                default: None,
                check: Check::Path,
                help: "start from a linear model's session (opca); unset: fit OPCA first",
            },
            s(
                "max_cg_iters",
                "500",
                Check::Int {
                    min: 1,
                    max: 1_000_000,
                },
                "OPCA start (no init), implicit solver: most conjugate-gradient iterations per solve",
            ),
            s(
                "negatives",
                "10000",
                CONSTRAINTS,
                "dissimilar constraints: random non-aligned pairs",
            ),
            s(
                "oversample",
                "10",
                COUNT,
                "OPCA start (no init): randomised SVD's extra sketch columns",
            ),
            s(
                "positives",
                "10000",
                CONSTRAINTS,
                "similar constraints: aligned training pairs (repeated beyond their number)",
            ),
            s(
                "power_iters",
                "6",
                COUNT,
                "OPCA start (no init): randomised SVD's power iterations",
            ),
            s(
                "ridge",
                "0.1",
                Check::NonNegative,
                "OPCA start (no init): ridge on the noise covariance",
            ),
            s(
                "similar_pct",
                "5",
                PERCENT,
                "u: random pairs' start-distance percentile similar pairs must stay below",
            ),
            s(
                "solver",
                "implicit",
                Check::Choice(&["implicit", "dense"]),
                "OPCA start (no init): implicit (matrix-free) or dense (V × V) eigensolver",
            ),
        ],
        trainer: Some(|| Box::new(hdlr::HdlrTrainer)),
        text: &[],
    },
    ModelSpec {
        name: "xcnn",
        summary:
            "cross-lingual compositional network with monolingual pre-initialisation (Gupta, Banchs and Rosso, IP&M 2017)",
        space: true,
        runner: true,
        gpu: true,
        settings: &[
            s("batch", "100", BATCH, "pairs per minibatch"),
            DIM,
            s(
                "epochs",
                "50",
                COUNT,
                "cross-language epochs (0: pre-initialisation only)",
            ),
            INIT,
            s(
                "init_bias",
                "random",
                Check::Parse(init_bias),
                "random or a constant start of the biases",
            ),
            s(
                "init_scale",
                "0.1",
                Check::Positive,
                "std of the random start",
            ),
            s(
                "layers",
                "1",
                Check::Int { min: 1, max: 8 },
                "tanh layers per network",
            ),
            s("loss", "cos", Check::Parse(xcnn_loss), "cos or logistic:γ"),
            s("lr", "0.01", Check::Positive, "Adam learning rate"),
            s(
                "mono_epochs",
                "20",
                COUNT,
                "monolingual pre-initialisation epochs (0: none)",
            ),
            s(
                "mono_negatives",
                "random:1",
                Check::Parse(negatives),
                "negatives of the mono phase",
            ),
            s(
                "mono_patience",
                "3",
                COUNT,
                "mono epochs without gain before it stops",
            ),
            s(
                "mono_valid",
                "0.05",
                Check::Range {
                    min: 0.0,
                    max: 1.0,
                    open: true,
                },
                "share of mono texts held out",
            ),
            s(
                "negatives",
                "random:1",
                Check::Parse(negatives),
                "random:K or in-batch",
            ),
            s(
                "optim",
                "lazy-adam",
                OPTIM,
                "dense Adam or row-sparse lazy Adam",
            ),
            s(
                "positives",
                "tfidf",
                Check::Choice(&["tfidf", "bm25"]),
                "how mono positives are mined",
            ),
            PRECISION,
            s(
                "train_target",
                "false",
                Check::Bool,
                "train the target network in the cross phase",
            ),
            VALID_MAX,
            VECTORS,
            WEIGHT_DECAY,
        ],
        trainer: Some(xcnn::xcnn_trainer),
        // measured on enhi (docs/results.md, "Text defaults"): stop words
        // kept cost ad-hoc MAP 0.23 -> 0.17 (the pseudo-relevance
        // pre-initialisation mines on them), n-gram units 0.23 -> 0.21
        text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    },
    ModelSpec {
        name: "bae",
        summary: "bilingual autoencoder with cross-reconstruction and a correlation term",
        space: true,
        runner: true,
        gpu: true,
        settings: &[
            s("batch", "100", BATCH, "pairs per minibatch"),
            s(
                "center",
                "side",
                Check::Choice(&["side", "none"]),
                "centre the codes per language",
            ),
            s(
                "corr",
                "5",
                Check::NonNegative,
                "weight of the correlation term",
            ),
            DIM,
            s("epochs", "50", EPOCHS, "training epochs"),
            FROZEN_EPOCHS,
            s(
                "init_scale",
                "0.1",
                Check::Positive,
                "std of the random start",
            ),
            s(
                "input",
                "binary",
                Check::Choice(&["binary", "tf"]),
                "binary bags or term counts",
            ),
            s("lr", "0.01", Check::Positive, "Adam learning rate"),
            s("optim", "adam", OPTIM, "dense Adam or row-sparse lazy Adam"),
            PRECISION,
            s(
                "recon",
                "full",
                Check::Parse(recon),
                "full or sampled:N reconstruction",
            ),
            VALID_MAX,
            VECTORS,
            WEIGHT_DECAY,
        ],
        trainer: Some(bae::bae_trainer),
        // measured on enhi: stop words kept cost every figure (BLI P@1
        // 0.22 -> 0.15); its old text settings stay
        text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    },
    ModelSpec {
        name: "dbn-cca",
        summary: "deep belief network per language (replicated softmax + RBMs), CCA on the codes (Kim, Nam and Gurevych, COLING 2012)",
        space: true,
        runner: true,
        gpu: true,
        settings: &[
            BM25_B,
            s("batch", "100", BATCH, "texts per minibatch (pre-training and fine-tuning)"),
            s("cd_k", "1", Check::Int { min: 1, max: 100 }, "Gibbs steps of contrastive divergence (CD-k)"),
            s("dim", "128", Check::Int { min: 1, max: super::nn::MAX_DIM as u64 }, "dimension of the CCA space (at most the code size)"),
            s("epochs", "50", COUNT, "pre-training epochs per RBM"),
            s("finetune_epochs", "20", COUNT, "autoencoder fine-tuning epochs (0: CCA on the pre-trained stacks)"),
            s("finetune_lr", "0.001", Check::Positive, "Adam learning rate of fine-tuning"),
            s("init_scale", "0.1", Check::Positive, "std of the RBM weights' random start (Hinton & Salakhutdinov's 0.1)"),
            s("input_terms", "10000", Check::Int { min: 1, max: 1_000_000 }, "input terms per language (the most frequent)"),
            BM25_K1,
            s("layers", "500,500,3000,128", Check::Parse(dbn_layers), "hidden layer sizes, bottom up (the last is the code)"),
            s("length_ratio", "3", Check::NonNegative, "drop training pairs with D_src >= ratio * D_tgt (0: keep all)"),
            s("lr", "0.1", Check::Positive, "learning rate of the binary RBMs"),
            s("lr_rsm", "0.0001", Check::Positive, "learning rate of the replicated softmax layer"),
            s("momentum", "0.9", Check::Range { min: 0.0, max: 1.0, open: true }, "momentum of the RBM updates"),
            s("momentum_warmup", "0", COUNT, "first epochs of each RBM at momentum 0.5"),
            PRECISION,
            s("reg", "0.1", Check::NonNegative, "CCA ridge relative to the codes' mean variance"),
            s("upper_data", "probs", Check::Choice(&["probs", "states"]), "an upper RBM's data: the layer below's probabilities, or binary states drawn from them"),
            VALID_MAX,
            s("visible", "sample", Check::Choice(&["sample", "mean"]), "replicated softmax reconstruction: draw D words, or mean-field"),
            s("weight_decay", "0.0002", Check::NonNegative, "weight decay of the RBMs"),
        ],
        trainer: Some(dbn_cca::dbn_cca_trainer),
        // a bag of the most frequent words, as the paper: stop words
        // removed (they would fill the 10,000 inputs), no n-gram units
        text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    },
    ModelSpec {
        name: "adv-bilstm",
        summary: "BiLSTM encoders with an adversarial discriminator (M of the paper “Adversarial learning of task-specific text representations for CLIR”; adversarial=false: M_adv)",
        space: true,
        runner: true,
        gpu: true,
        settings: &[
            s("adv_loss", "minimax", Check::Choice(&["minimax", "confusion"]), "the generator's adversarial term: minimax (the seed's: maximise the discriminator's cross-entropy) or confusion (its cross-entropy against the uniform distribution over the three sources, bounded; Tzeng et al. 2015)"),
            s("adv_weight", "1", Check::NonNegative, "weight λ of the adversarial term (adv_loss) in the generator's loss"),
            s("adversarial", "true", Check::Bool, "model M (true) or the ablation M_adv without the adversary (false)"),
            s("batch", "100", BATCH, "pairs per step"),
            s("beta_c", "10", Check::Positive, "β_c of the cross-language matching loss"),
            s("beta_inbatch", "10", Check::Positive, "β of the in-batch loss"),
            s("beta_m", "10", Check::Positive, "β_m of the monolingual matching loss"),
            s("clip", "1", Check::NonNegative, "largest global norm of the generator's gradient (0: none)"),
            DIM,
            s("disc_hidden", "128", Check::Int { min: 1, max: 65_536 }, "width of the discriminator's two hidden layers"),
            s("disc_lr", "0.001", Check::Positive, "discriminator's Adam learning rate"),
            s("disc_steps", "1", Check::Int { min: 1, max: 100 }, "discriminator steps per generator step"),
            s("emb", "512", Check::Int { min: 1, max: 65_536 }, "word-embedding size"),
            s("encoder_threads", "2", Check::Int { min: 1, max: 64 }, "CPU: encoder passes on parallel threads, candle's kernels single-threaded (1: in order, candle's own threads)"),
            s("epochs", "10", EPOCHS, "training epochs"),
            FROZEN_EPOCHS,
            s("gamma_inbatch", "0", Check::NonNegative, "weight of an in-batch pairwise loss over the translation pairs (torch_ref's bilstm)"),
            s("gamma_matc", "1", Check::NonNegative, "γ₂: weight of the cross-language matching loss"),
            s("gamma_matm", "1", Check::NonNegative, "γ₃: weight of the monolingual matching loss"),
            s("gamma_tra", "1", Check::NonNegative, "γ₁: weight of the translation loss"),
            s("hidden", "256", Check::Int { min: 1, max: 65_536 }, "LSTM units per direction"),
            Setting {
                key: "init",
                default: None,
                check: Check::Path,
                help: "start the embeddings from a trained session's term vectors (linear model or xcnn)",
            },
            s("init_scale", "1", Check::Positive, "std of the random embeddings (torch's N(0,1))"),
            s("lr", "0.001", Check::Positive, "generator's Adam learning rate"),
            s("max_doc_len", "300", Check::Int { min: 1, max: 100_000 }, "tokens kept per document"),
            s("max_query_len", "30", Check::Int { min: 1, max: 100_000 }, "tokens kept per query"),
            s("nn_hidden", "128", Check::Parse(adv_bilstm::check_widths), "NN_dim's tanh layer widths (one or two, comma-separated)"),
            PRECISION,
            s("recurrence", "steps", Check::Choice(&["steps", "cudnn"]), "how the BiLSTM's recurrence runs: steps (Rosetta's own: one op over the sequence on the CPU, a fused cell per step on CUDA) or cudnn (cuDNN's RNN on CUDA, as PyTorch's nn.LSTM; needs a build with the cudnn feature)"),
            s("reg", "0.00001", Check::NonNegative, "coefficient of the weights' squared Frobenius norm (L_reg)"),
            s("share_target", "false", Check::Bool, "one encoder for target queries and documents"),
            s("vectors", "none", Check::Parse(super::pretrained::check_any), "a session (encoder or any model with a space) or SOURCE.vec,TARGET.vec whose vectors start the embeddings"),
        ],
        trainer: Some(adv_bilstm::adv_bilstm_trainer),
        text: &[],
    },
    ModelSpec {
        name: "encoder",
        summary: "a pretrained transformer encoder (multilingual-e5, any BERT/XLM-R in Hugging Face layout): zero-shot (epochs=0) or fine-tuned contrastively",
        space: true,
        runner: true,
        gpu: true,
        settings: &[
            s("batch", "32", Check::Int { min: 2, max: 100_000 }, "pairs per fine-tuning step (the others are the negatives)"),
            s("distill_weight", "1", Check::Positive, "loss=infonce+distill: weight of the distillation term"),
            s("doc_prefix", "passage:", Check::Parse(encoder::check_prefix), "word put before each document (none: nothing)"),
            s("encode_batch", "32", Check::Int { min: 1, max: 100_000 }, "windows per forward pass when encoding"),
            s("epochs", "0", Check::Int { min: 0, max: 1_000_000 }, "fine-tuning epochs (0: the pretrained space, zero-shot)"),
            s("frozen_epochs", "0", COUNT, "first epochs with the word-embedding table frozen (phase `frozen`)"),
            s("gamma", "10", Check::Positive, "loss=pairwise: scale of the cosine margins"),
            s("group_by_length", "false", Check::Bool, "batches of similar lengths: the shuffled pairs sorted by length in groups of 50 batches (transformers' LengthGroupedSampler)"),
            s("loss", "infonce", Check::Choice(&["infonce", "pairwise", "distill", "infonce+distill"]), "in-batch contrastive loss (both ways), the seeds' pairwise logistic loss, multilingual distillation (both texts of a pair drawn to the frozen start's embedding of the source text: Reimers & Gurevych 2020) or both"),
            s("lr", "0.00002", Check::Positive, "Adam learning rate"),
            s("max_len", "auto", Check::Parse(encoder::check_max_len), "tokens per window, auto: the model's positions (longer texts: several windows, averaged)"),
            s("max_pairs", "0", COUNT, "fine-tune on the first N training pairs (0: all)"),
            s("pooling", "mean", Check::Choice(&["mean", "cls"]), "a window's vector: mean of its tokens or the first token"),
            PRECISION,
            s("query_prefix", "query:", Check::Parse(encoder::check_prefix), "word put before each query and sentence (none: nothing)"),
            s("temperature", "0.05", Check::Positive, "loss=infonce: softmax temperature"),
            s("train_max_len", "128", Check::Int { min: 3, max: 100_000 }, "tokens kept per text while fine-tuning"),
            s("weight_decay", "0.01", Check::NonNegative, "decoupled weight decay (AdamW)"),
            Setting {
                key: "weights",
                default: None,
                check: Check::Path,
                help: "the encoder: a Hugging Face layout folder (config.json, model.safetensors, tokenizer.json) or a hub id",
            },
            s("wise", "1", Check::Range { min: 0.0, max: 1.0, open: false }, "WiSE-FT: the model is pretrained + wise × (fine-tuned − pretrained); validation, checkpoints' model and evaluation use the mix, training steps the fine-tuned weights (1: the fine-tuned weights)"),
        ],
        trainer: Some(|| Box::new(encoder::EncoderTrainer)),
        text: &[],
    },
    ModelSpec {
        name: "procrustes",
        summary: "orthogonal Procrustes map between another session's term vectors of the two languages, fitted on the dictionary's training part and refined by CSLS (MUSE, Conneau et al., ICLR 2018)",
        space: true,
        runner: true,
        gpu: false,
        settings: &[
            s("bli_seed", "1", Check::Int { min: 0, max: u64::MAX }, "which split of the workspace's dictionary it fits on (the training part); must match eval's --bli-seed"),
            s("csls_k", "10", Check::Int { min: 1, max: 10_000 }, "refinement: nearest terms in CSLS's hub penalty"),
            s("refine", "5", Check::Int { min: 0, max: 1_000 }, "refinement rounds on the mutual CSLS neighbours (0: plain Procrustes)"),
            s("refine_words", "15000", Check::Int { min: 1, max: 100_000_000 }, "refinement: the most frequent words per language it pairs up"),
            Setting {
                key: "vectors",
                default: None,
                check: Check::Parse(super::pretrained::check_session_only),
                help: "required: the session (an encoder, or any model with a space) whose term vectors it maps",
            },
        ],
        trainer: Some(|| Box::new(procrustes::ProcrustesTrainer)),
        text: &[],
    },
    ModelSpec {
        name: "jplsa",
        summary: "joint PLSA: bilingual topic model, one θ per pair, φ per language, MAP by EM (Yih et al., CoNLL 2011)",
        space: true,
        runner: true,
        gpu: false,
        settings: PLSA_SETTINGS,
        trainer: Some(plsa::jplsa_trainer),
        text: PLSA_TEXT,
    },
    ModelSpec {
        name: "cplsa",
        summary: "coupled PLSA: JPLSA with posterior regularisation of the pair's topic fractions (Yih et al., CoNLL 2011)",
        space: true,
        runner: true,
        gpu: false,
        settings: &[
            PLSA_ALPHA,
            PLSA_BETA,
            PLSA_DIM,
            PLSA_EPOCHS,
            PLSA_FOLD_IN,
            PLSA_FOLD_IN_ALPHA,
            s(
                "pr_epsilon",
                "0",
                Check::Range {
                    min: 0.0,
                    max: 1.0,
                    open: false,
                },
                "largest allowed gap between a pair's sides' expected fractions of a topic",
            ),
            s(
                "pr_steps",
                "5",
                Check::Int { min: 0, max: 1000 },
                "proximal-gradient steps on each pair's dual per E-step (0: JPLSA's E-step)",
            ),
        ],
        trainer: Some(plsa::cplsa_trainer),
        text: PLSA_TEXT,
    },
    ModelSpec {
        name: "bm25",
        summary: "BM25 with untranslated queries (lexical baseline)",
        space: false,
        runner: false,
        gpu: false,
        settings: &[
            BM25_B,
            BM25_EXPAND,
            BM25_FB_DOCS,
            BM25_FB_TERMS,
            BM25_K1,
            BM25_RM3_WEIGHT,
        ],
        trainer: None,
        text: LEXICAL_TEXT,
    },
    ModelSpec {
        name: "bm25-dict",
        summary: "BM25 over dictionary-translated queries (lexical baseline)",
        space: false,
        runner: false,
        gpu: false,
        settings: &[
            BM25_B,
            BM25_EXPAND,
            BM25_FB_DOCS,
            BM25_FB_TERMS,
            BM25_K1,
            s(
                "keep_untranslated",
                "false",
                Check::Bool,
                "keep words the dictionary lacks",
            ),
            BM25_RM3_WEIGHT,
        ],
        trainer: None,
        text: LEXICAL_TEXT,
    },
    ModelSpec {
        name: "bm25-mt",
        summary: "BM25 over machine-translated queries (Apertium; lexical baseline)",
        space: false,
        runner: false,
        gpu: false,
        settings: &[
            BM25_B,
            BM25_EXPAND,
            BM25_FB_DOCS,
            BM25_FB_TERMS,
            BM25_K1,
            BM25_RM3_WEIGHT,
        ],
        trainer: None,
        text: LEXICAL_TEXT,
    },
];

/// The lexical baselines' own `[text]` defaults: the settings they were
/// compared under. Measured on enhi (docs/results.md, "Text defaults"):
/// stop words kept cost `bm25-dict` XQuAD MAP 0.4354 -> 0.3603 (English
/// stop words translate to Hindi words in every paragraph), though on the
/// Bible it gains (0.2931 -> 0.5175); `stopwords = false` in a workspace
/// gives that.
const LEXICAL_TEXT: &[(&str, &str)] = &[("stopwords", "true"), ("oov_ngrams", "0")];

/// The registry row of `name`; an unknown name is an error listing the known ones.
pub fn spec(name: &str) -> crate::Result<&'static ModelSpec> {
    MODELS.iter().find(|m| m.name == name).ok_or_else(|| {
        let known: Vec<&str> = names().collect();
        let hint = crate::util::closest(name, &known)
            .map(|m| format!(" (did you mean `{m}`?)"))
            .unwrap_or_default();
        crate::Error::invalid(format!(
            "unknown model `{name}`{hint}; known models: {}",
            known.join(", ")
        ))
    })
}

/// `; did you mean `KEY`?` for a key `model` lacks, where one of its own
/// keys is near (empty otherwise), then the list of its keys.
fn key_hint(spec: &ModelSpec, key: &str) -> String {
    let keys: Vec<&str> = spec.all_settings().map(|s| s.key).collect();
    let mean = crate::util::closest(key, &keys)
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default();
    format!("{mean} ({}'s settings: {})", spec.name, keys.join(", "))
}

/// Every model name, in registry order.
pub fn names() -> impl Iterator<Item = &'static str> {
    MODELS.iter().map(|m| m.name)
}

/// Checks `key=value` settings for `model` before anything is written:
/// every key known to the model, every value passing its check. The error
/// names the key and the value.
pub fn validate_settings<'a>(
    model: &str,
    given: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> crate::Result<()> {
    let spec = spec(model)?;
    let mut unknown = Vec::new();
    for (k, v) in given {
        match spec.setting(k) {
            None => unknown.push(k.as_str()),
            Some(s) => s
                .check
                .check(v)
                .map_err(|e| crate::Error::invalid(format!("{model}: --set {k}={v}: {e}")))?,
        }
    }
    if unknown.is_empty() {
        Ok(())
    } else {
        let keys: Vec<&str> = spec.all_settings().map(|s| s.key).collect();
        let means: Vec<String> = unknown
            .iter()
            .filter_map(|u| crate::util::closest(u, &keys).map(|k| format!("`{k}` for `{u}`")))
            .collect();
        let mean = if means.is_empty() {
            String::new()
        } else {
            format!("; did you mean {}?", means.join(", "))
        };
        Err(crate::Error::invalid(format!(
            "unknown setting(s) for {model}: {}{mean} (its settings: {})",
            unknown.join(", "),
            keys.join(", ")
        )))
    }
}

/// Checks one setting for `model` against the model registry: the model
/// (or, for trained models, the runner) reads `key`, and the value passes
/// the key's check. Returns the value as it will be recorded (trimmed).
pub fn check_setting(model: &str, key: &str, value: &str) -> crate::Result<String> {
    let spec = spec(model)?;
    let Some(setting) = spec.setting(key) else {
        let readers: Vec<&str> = MODELS
            .iter()
            .filter(|m| m.setting(key).is_some())
            .map(|m| m.name)
            .collect();
        let hint = key_hint(spec, key);
        return Err(crate::Error::invalid(if readers.is_empty() {
            format!("{model} does not take {key} (no model reads it){hint}")
        } else {
            format!(
                "{model} does not take {key} (read by {}){hint}",
                readers.join(", ")
            )
        }));
    };
    let v = value.trim();
    setting
        .check
        .check(v)
        .map_err(|e| crate::Error::invalid(format!("{key}: {e}")))?;
    Ok(v.to_string())
}

/// Checks `given` for `model` ([`validate_settings`]) and resolves every
/// setting the model and the runner read: the given values, and the
/// registry's defaults for the others (settings without a default, like
/// `init`, only when given). What a job records in `config.toml` before
/// anything else is written, so a resume at any moment runs with exactly
/// these values.
pub fn resolve_settings(
    model: &str,
    given: &std::collections::BTreeMap<String, String>,
) -> crate::Result<std::collections::BTreeMap<String, String>> {
    validate_settings(model, given)?;
    let spec = spec(model)?;
    let mut out = std::collections::BTreeMap::new();
    for s in spec.all_settings() {
        match (given.get(s.key), s.default) {
            (Some(v), _) => {
                out.insert(s.key.to_string(), v.trim().to_string());
            }
            (None, Some(d)) => {
                out.insert(s.key.to_string(), d.to_string());
            }
            (None, None) => {}
        }
    }
    Ok(out)
}

/// The models and their settings with defaults, as `rosetta train --help`
/// and the README list them.
pub fn settings_help() -> String {
    let mut out =
        String::from("Models and their settings (--set KEY=VALUE; default in brackets):\n");
    for m in MODELS {
        out.push_str(&format!("\n  {}: {}\n", m.name, m.summary));
        for s in m.settings {
            out.push_str(&format!(
                "    {:<18} [{}] {} ({})\n",
                s.key,
                s.default.unwrap_or("unset"),
                s.help,
                s.check.describe()
            ));
        }
    }
    let with_text: Vec<String> = MODELS
        .iter()
        .filter(|m| !m.text.is_empty())
        .map(|m| {
            let kv: Vec<String> = m.text.iter().map(|(k, v)| format!("{k} = {v}")).collect();
            format!("{} ({})", m.name, kv.join(", "))
        })
        .collect();
    if !with_text.is_empty() {
        out.push_str(&format!(
            "\n  models with their own [text] defaults (where the workspace does not set the key): {}\n",
            with_text.join("; ")
        ));
    }
    out.push_str("\n  every trained model (not the bm25 baselines) also takes:\n");
    for s in RUNNER_SETTINGS {
        out.push_str(&format!(
            "    {:<18} [{}] {}\n",
            s.key,
            s.default.unwrap_or("unset"),
            s.help
        ));
    }
    out
}

/// The README's model table (Markdown): every model with its summary,
/// whether it has a space, and its settings with defaults. A test keeps the
/// README's copy equal to this.
pub fn markdown_table() -> String {
    let mut out =
        String::from("| model | what it is | space | settings (defaults) |\n|---|---|---|---|\n");
    for m in MODELS {
        let settings: Vec<String> = m
            .settings
            .iter()
            .map(|s| match s.default {
                Some(d) => format!("`{}={d}`", s.key),
                None => format!("`{}`", s.key),
            })
            .collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            m.name,
            m.summary,
            if m.space { "yes" } else { "no" },
            settings.join(" ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_passes_its_check_and_names_are_unique() {
        let mut names: Vec<&str> = names().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MODELS.len());
        for m in MODELS {
            let mut keys: Vec<&str> = m.all_settings().map(|s| s.key).collect();
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(
                keys.len(),
                m.all_settings().count(),
                "{}: key twice",
                m.name
            );
            for s in m.all_settings() {
                if let Some(d) = s.default {
                    assert!(s.check.check(d).is_ok(), "{}: {}={d}", m.name, s.key);
                }
            }
            assert_eq!(m.space, m.trainer.is_some(), "{}", m.name);
        }
    }

    #[test]
    fn checks_refuse_non_finite_and_out_of_range_values() {
        let given = |k: &str, v: &str| {
            let m = std::collections::BTreeMap::from([(k.to_string(), v.to_string())]);
            validate_settings("xcnn", &m).map_err(|e| e.to_string())
        };
        for (k, v) in [
            ("weight_decay", "NaN"),
            ("weight_decay", "-1"),
            ("lr", "inf"),
            ("lr", "0"),
            ("dim", "0"),
            ("dim", "99999"),
            ("layers", "9"),
            ("negatives", "random:x"),
            ("mono_valid", "1"),
            ("train_target", "yes"),
        ] {
            let e = given(k, v).unwrap_err();
            assert!(e.contains(k) && e.contains(v), "{k}={v}: {e}");
        }
        assert!(given("lr", "0.5").is_ok());
        assert!(given("negatives", "in-batch").is_ok());
        let e = given("gamma", "1").unwrap_err();
        assert!(e.contains("unknown setting") && e.contains("gamma"), "{e}");
        assert!(given("patience", "2").is_ok(), "runner keys apply to xcnn");
        let bm = std::collections::BTreeMap::from([("patience".to_string(), "2".to_string())]);
        assert!(validate_settings("bm25", &bm).is_err(), "not to a baseline");
        assert!(validate_settings("nope", &bm)
            .unwrap_err()
            .to_string()
            .contains("known models"));
    }

    #[test]
    fn settings_help_lists_every_model_and_default() {
        let h = settings_help();
        for m in MODELS {
            assert!(h.contains(m.name));
            for s in m.settings {
                assert!(h.contains(s.key), "{}", s.key);
            }
        }
        assert!(h.contains("[lazy-adam]") && h.contains("[random:1]"));
    }
}
