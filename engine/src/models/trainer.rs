//! The training contract between a model and the job runner: the data a
//! trainer is given, the hooks it reports through, and how it resumes.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use super::{Model, Params};
use crate::corpus::Prepared;
use crate::text::{CsrMatrix, Sequences, Side, Vocabs};
use crate::{Error, Result};

/// Everything a model trains on, already analysed and counted.
#[derive(Debug, Clone)]
pub struct TrainData {
    /// Vocabularies of both languages.
    pub vocabs: Vocabs,
    /// Raw term counts of the training pairs (row i of each side aligned);
    /// pairs with an empty side are already dropped.
    pub train_src: CsrMatrix,
    /// Target side of the training pairs.
    pub train_tgt: CsrMatrix,
    /// Validation pairs (source side), same conventions.
    pub valid_src: CsrMatrix,
    /// Validation pairs (target side).
    pub valid_tgt: CsrMatrix,
    /// Target-language monolingual texts for pseudo-relevance training
    /// (defaults to the target side of the training pairs).
    pub mono: CsrMatrix,
    /// For each row of `mono`, the row of its pseudo-relevant positive (seed
    /// 000 Sec. 4.1), or `None`; all `None` (or empty) lets XCNN mine its own
    /// by its `positives` setting (best TF-IDF or BM25 match).
    pub mono_positive: Vec<Option<u32>>,
    /// The same texts as term ids in reading order, for models that read
    /// word order ([`Model::reads_order`](super::Model::reads_order)); `None`
    /// when the data was given as counts only.
    pub seqs: Option<TrainSequences>,
    /// The same texts as raw strings, for models with their own tokenizer
    /// ([`Model::reads_text`](super::Model::reads_text)); `None` when the
    /// data was given as counts only.
    pub texts: Option<TrainTexts>,
    /// Pretrained term vectors for this vocabulary (`vectors=SESSION`),
    /// resolved by the job layer before training; `None` when the job has
    /// none (a trainer given `vectors=SESSION` without them refuses to start).
    pub pretrained: Option<PretrainedVectors>,
    /// The workspace's bilingual dictionary, for a model that fits on it
    /// (a model whose typed settings answer `needs_dictionary`: `procrustes`); filled by
    /// the job layer ([`crate::jobs::training_dictionary`]), `None` for
    /// every other model.
    pub dictionary: Option<TrainDictionary>,
    /// The start an `init=` setting names (another session's checkpoint),
    /// read and checked against these vocabularies by the job layer
    /// ([`crate::session::init`]); `None` when the job has no `init` (a
    /// trainer given `init` without it refuses to start: [`TrainData::init_for`]).
    pub init: Option<InitWeights>,
}

/// The checkpoint an `init=` setting names, as the job layer hands it to a
/// trainer ([`crate::session::init::read`]): its tensors and what its
/// metadata says, never a path to read. The session's saved vocabularies
/// were checked against the job's where it saved them.
#[derive(Debug, Clone)]
pub struct InitWeights {
    /// The checkpoint file the tensors came from, for messages only.
    pub checkpoint: std::path::PathBuf,
    /// The model kind its metadata names (`opca`, `xcnn`, ...), when it says.
    pub kind: Option<String>,
    /// Every tensor of the checkpoint, on the CPU.
    pub tensors: HashMap<String, Tensor>,
}

/// A workspace's dictionary as a trainer gets it: every entry analysed to
/// terms exactly as `eval --task bli` analyses it, so that a model which
/// splits it with [`crate::corpus::dictionary::BliSplit`] under eval's
/// `--bli-seed` fits on the very part that eval does not score.
#[derive(Debug, Clone)]
pub struct TrainDictionary {
    /// The dictionary file (for messages).
    pub file: std::path::PathBuf,
    /// Source term → its target terms (entries that analyse to one term
    /// on each side, as [`crate::corpus::Dictionary::analysed`] gives them).
    pub entries: HashMap<String, Vec<String>>,
}

/// Term vectors of another session for a job's vocabularies, row for row
/// (`vectors=SESSION`: the start the seed papers took from word2vec). Both
/// sides come from one model, so they live in one space.
#[derive(Debug, Clone)]
pub struct PretrainedVectors {
    /// The session folder they came from (as given).
    pub session: std::path::PathBuf,
    /// BLAKE3 of the checkpoint they were computed from.
    pub checkpoint_blake3: String,
    /// `source vocabulary × d`: term i's vector, zeros where `found_source[i]`
    /// is false.
    pub source: ndarray::Array2<f32>,
    /// `target vocabulary × d`, as `source`.
    pub target: ndarray::Array2<f32>,
    /// Whether source term i has a vector (a session of another vocabulary
    /// lacks some terms; an encoder has a vector for every word).
    pub found_source: Vec<bool>,
    /// Whether target term i has a vector.
    pub found_target: Vec<bool>,
}

/// The rows of [`TrainData`]'s pair matrices as raw texts, row for row.
#[derive(Debug, Clone, Default)]
pub struct TrainTexts {
    /// Source side of the training pairs.
    pub train_src: Vec<String>,
    /// Target side of the training pairs.
    pub train_tgt: Vec<String>,
    /// Source side of the validation pairs.
    pub valid_src: Vec<String>,
    /// Target side of the validation pairs.
    pub valid_tgt: Vec<String>,
}

/// The rows of [`TrainData`]'s matrices as term-id sequences, row for row.
#[derive(Debug, Clone, Default)]
pub struct TrainSequences {
    /// Source side of the training pairs.
    pub train_src: Sequences,
    /// Target side of the training pairs.
    pub train_tgt: Sequences,
    /// Source side of the validation pairs.
    pub valid_src: Sequences,
    /// Target side of the validation pairs.
    pub valid_tgt: Sequences,
    /// The monolingual target-language texts.
    pub mono: Sequences,
}

impl TrainData {
    /// The start of `init=` for model `kind`: an error when the job layer
    /// did not hand one (a trainer called with `init` but no [`TrainData::init`]).
    pub fn init_for(&self, kind: &str) -> Result<&InitWeights> {
        self.init.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "{kind}: `init` is set but its checkpoint was not read \
                 (the job layer hands it in TrainData::init: rosetta::session::init::resolve)"
            ))
        })
    }

    /// The trainable pairs of a prepared workspace (pairs with an empty side
    /// dropped) and its monolingual texts. `mono_positive` is empty when no
    /// positives are known (all `None`); otherwise it must have one entry per
    /// row of [`Prepared::mono`] (a mismatch is a programming error and panics).
    pub fn from_prepared(prepared: &Prepared, mono_positive: Vec<Option<u32>>) -> TrainData {
        let mono_positive = if mono_positive.is_empty() {
            vec![None; prepared.mono.n_rows()]
        } else {
            assert_eq!(
                mono_positive.len(),
                prepared.mono.n_rows(),
                "mono_positive needs one entry per monolingual text"
            );
            mono_positive
        };
        let tr = prepared.train.trainable();
        let va = prepared.valid.trainable();
        let v = &prepared.vocabs;
        let pick = |t: &[String], rows: &[usize]| -> Vec<String> {
            rows.iter().map(|&i| t[i].clone()).collect()
        };
        TrainData {
            vocabs: prepared.vocabs.clone(),
            train_src: prepared.train.src.select_rows(&tr),
            train_tgt: prepared.train.tgt.select_rows(&tr),
            valid_src: prepared.valid.src.select_rows(&va),
            valid_tgt: prepared.valid.tgt.select_rows(&va),
            mono: prepared.mono.clone(),
            mono_positive,
            seqs: Some(TrainSequences {
                train_src: prepared.train.sequences(Side::Source, v).select_rows(&tr),
                train_tgt: prepared.train.sequences(Side::Target, v).select_rows(&tr),
                valid_src: prepared.valid.sequences(Side::Source, v).select_rows(&va),
                valid_tgt: prepared.valid.sequences(Side::Target, v).select_rows(&va),
                mono: prepared.mono_seqs.clone(),
            }),
            texts: Some(TrainTexts {
                train_src: pick(&prepared.train.src_text, &tr),
                train_tgt: pick(&prepared.train.tgt_text, &tr),
                valid_src: pick(&prepared.valid.src_text, &va),
                valid_tgt: pick(&prepared.valid.tgt_text, &va),
            }),
            pretrained: None,
            dictionary: None,
            init: None,
        }
    }

    /// Checks that the matrices fit the vocabularies and that the training
    /// sides are aligned; `model` names the model in the message.
    pub fn check_shapes(&self, model: &str) -> Result<()> {
        let (vs, vt) = (self.vocabs.source.len(), self.vocabs.target.len());
        if vs == 0 || vt == 0 {
            return Err(crate::Error::invalid(format!(
                "{model}: empty vocabulary (source {vs} terms, target {vt} terms)"
            )));
        }
        if self.train_src.n_cols != vs || self.train_tgt.n_cols != vt {
            return Err(crate::Error::invalid(format!(
                "{model}: training counts do not match the vocabularies"
            )));
        }
        if self.train_src.n_rows() != self.train_tgt.n_rows() {
            return Err(crate::Error::invalid(format!(
                "{model}: {} source but {} target training texts",
                self.train_src.n_rows(),
                self.train_tgt.n_rows()
            )));
        }
        Ok(())
    }
}

/// Whether training goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep training.
    Continue,
    /// Stop now (cancelled, early stop): return the best model so far.
    Stop,
}

/// One training-loss report.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// Training phase (a [`Phase`] name of the trainer's plan).
    pub phase: String,
    /// Epoch, from 1.
    pub epoch: usize,
    /// Optimiser step, from 1, counted over the whole job.
    pub step: usize,
    /// Mean loss of the step.
    pub loss: f64,
    /// Training examples in the step.
    pub examples: usize,
    /// The loss's named terms and the step's other figures (an adversarial
    /// trainer's discriminator loss and accuracy), logged with the loss.
    pub parts: Vec<(String, f64)>,
}

/// The job runner's side of a training loop.
pub trait Hooks {
    /// Called after every optimiser step. Returns [`Flow::Stop`] when the job
    /// was cancelled; a non-finite loss is an error the runner reports.
    fn step(&mut self, report: &StepReport) -> Result<Flow>;
    /// Called at the end of every epoch with the current model and any extra
    /// state (optimiser moments) a resume needs: validates, logs, checkpoints
    /// and decides early stopping.
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        extra: Vec<(String, Tensor)>,
    ) -> Result<Flow>;
    /// Called as an epoch begins, after the trainer's set-up and any
    /// validation before it, before its first batch is drawn (benchmarks
    /// time the loop from here). Default: nothing.
    fn epoch_start(&mut self, phase: &str, epoch: usize) {
        let _ = (phase, epoch);
    }
    /// A human-readable line for the session's `log.txt`.
    fn log(&mut self, msg: &str);
    /// A record of how training started (`pretrained.json`:
    /// [`super::pretrained::RECORD_FILE`]) written into the session folder
    /// (replaced atomically). Default: dropped (no session).
    fn record(&mut self, name: &'static str, json: &str) -> Result<()> {
        let _ = (name, json);
        Ok(())
    }
    /// Figures of the epoch about to end that the trainer computes itself
    /// (a layer's held-out reconstruction error): recorded with the epoch's
    /// validation figures by the next [`Hooks::epoch_end`]. Default: dropped.
    fn epoch_scores(&mut self, scores: Vec<(String, f64)>) {
        let _ = scores;
    }
}

/// The hooks of a model trained inside another model's job (HDLR's OPCA
/// start, [`OpcaTrainer`](crate::models::opca::OpcaTrainer)): its log lines are the
/// job's; its steps, epochs and records are not (the outer trainer reports
/// its own).
pub struct LogOnly<'a>(pub &'a mut dyn Hooks);

impl Hooks for LogOnly<'_> {
    fn step(&mut self, _report: &StepReport) -> Result<Flow> {
        Ok(Flow::Continue)
    }

    fn epoch_end(
        &mut self,
        _phase: &str,
        _epoch: usize,
        _model: &dyn Model,
        _extra: Vec<(String, Tensor)>,
    ) -> Result<Flow> {
        Ok(Flow::Continue)
    }

    fn log(&mut self, msg: &str) {
        self.0.log(msg);
    }
}

/// A checkpoint to continue from.
#[derive(Debug)]
pub struct Resume {
    /// Phase the checkpoint was written in.
    pub phase: String,
    /// Last completed epoch.
    pub epoch: usize,
    /// Last optimiser step.
    pub step: usize,
    /// Model and extra tensors of the checkpoint.
    pub tensors: HashMap<String, Tensor>,
}

/// The name of the one phase of a session that trains nothing and only
/// validates its starting model (an encoder with `epochs=0`): its status,
/// log and listings say `zero-shot`, never `epoch 1/1`.
pub const ZERO_SHOT_PHASE: &str = "zero-shot";

/// One phase of a trainer's plan, as the runner executes and reports it:
/// progress, the planned epochs shown, whether its epochs are
/// early-stopped on validation MRR. A resume continues in the phase its
/// checkpoint names; patience counts within a phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    /// Name, as in the metrics records and checkpoints (`train`, `mono`,
    /// `cross`, `layer1`, ...).
    pub name: String,
    /// Planned epochs (the phase may end sooner by its own rule or an early stop).
    pub epochs: usize,
    /// Training examples in one epoch (progress within an epoch).
    pub examples: usize,
    /// Whether the runner's patience (`patience`) on validation MRR may end
    /// this phase; false for pre-training, whose epochs the cross-language
    /// MRR says little about.
    pub early_stop: bool,
}

impl Phase {
    /// A phase that the runner early-stops on validation MRR.
    pub fn new(name: &str, epochs: usize, examples: usize) -> Phase {
        Phase {
            name: name.to_string(),
            epochs,
            examples,
            early_stop: true,
        }
    }

    /// A pre-training phase: never early-stopped by the runner.
    pub fn pretraining(name: &str, epochs: usize, examples: usize) -> Phase {
        Phase {
            early_stop: false,
            ..Phase::new(name, epochs, examples)
        }
    }

    /// A closed-form fit: one "epoch" over the training pairs.
    pub fn closed_form(examples: usize) -> Phase {
        Phase::new("train", 1, examples)
    }
}

/// The sizes of a job's data that its memory depends on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataSizes {
    /// Source-language terms (the source vocabulary).
    pub source_terms: usize,
    /// Target-language terms.
    pub target_terms: usize,
}

/// A trainer's estimate of the memory its job needs.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEstimate {
    /// Bytes, at least.
    pub bytes: f64,
    /// What they are, for people (`"412.3M parameters ×4 (values, gradients,
    /// Adam moments) + activations"`).
    pub detail: String,
}

impl MemoryEstimate {
    /// Bytes of `params` f32 parameters held four times (values, gradients
    /// and two Adam moments) plus `activations` f32 values.
    pub fn adam_f32(params: f64, activations: f64) -> MemoryEstimate {
        MemoryEstimate {
            bytes: 4.0 * (4.0 * params + activations),
            detail: format!(
                "{} parameters, each held 4 times (values, gradients, 2 Adam moments), \
                 + {} activation values, 4 bytes each",
                fmt_count(params),
                fmt_count(activations)
            ),
        }
    }
}

/// Refuses a job whose [`Trainer::memory_estimate`] exceeds `limit` bytes
/// (the user's) or, without one, this machine's memory
/// ([`crate::util::memory_limit`]); the error gives the estimate. The
/// settings alone are checked first; `sizes` (which may read the data) only
/// when they pass.
pub fn check_memory(
    model: &str,
    trainer: &dyn Trainer,
    params: &Params,
    limit: Option<u64>,
    sizes: impl FnOnce() -> Result<DataSizes>,
) -> Result<()> {
    let (limit, what) = match limit {
        Some(l) => (l, "the limit given (--max-memory)"),
        None => match crate::util::memory_limit() {
            Some(l) => (l, "this machine's memory"),
            None => return Ok(()),
        },
    };
    let refuse = |e: MemoryEstimate| {
        Err(Error::invalid(format!(
            "{model}: these settings need about {} ({}), more than {what} ({}); \
             lower the sizes (--set) or raise --max-memory",
            crate::util::fmt_bytes(e.bytes),
            e.detail,
            crate::util::fmt_bytes(limit as f64),
        )))
    };
    match trainer.memory_estimate(params, &DataSizes::default())? {
        None => return Ok(()),
        Some(e) if e.bytes > limit as f64 => return refuse(e),
        Some(_) => {}
    }
    match trainer.memory_estimate(params, &sizes()?)? {
        Some(e) if e.bytes > limit as f64 => refuse(e),
        _ => Ok(()),
    }
}

/// `1.2G`, `35.0M`, `812`.
pub fn fmt_count(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.1}G", x / 1e9),
        x if x >= 1e6 => format!("{:.1}M", x / 1e6),
        x if x >= 1e3 => format!("{:.1}k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

/// How to train and reload one kind of model.
pub trait Trainer: Send + Sync {
    /// The memory a job with `params` on data of `sizes` needs at least
    /// (its large dense parameters and the state kept with them), so that a
    /// job that cannot run here is refused before its session is written
    /// ([`crate::jobs::create`]). Called with zero sizes first (a bound from
    /// the settings alone). Default: no estimate.
    fn memory_estimate(
        &self,
        params: &Params,
        sizes: &DataSizes,
    ) -> Result<Option<MemoryEstimate>> {
        let _ = (params, sizes);
        Ok(None)
    }

    /// Builds the trainer's typed settings from `params`, as `plan`,
    /// `train` and `load` do (its model's `Config`,
    /// [`settings::Settings::from_params`](super::settings::Settings::from_params)),
    /// and checks those that depend on each other (each value alone was
    /// checked by the registry). No training data is read; files a setting
    /// names (an `init` session, an encoder's weights) may be.
    /// [`crate::jobs::create`] calls it, then refuses any given key it left
    /// unread, before a session is written; the registry test builds every
    /// model's settings from its defaults this way and fails unless they
    /// read exactly its definition's keys.
    fn check(&self, params: &Params) -> Result<()>;

    /// Checks the start an `init=` setting names against the settings (its
    /// kind, shapes and dimension; the vocabularies are checked when the job
    /// reads it for training), so a job is refused before its session is
    /// written ([`crate::session::init::check`]). Default: nothing to check.
    fn check_init(&self, params: &Params, init: &InitWeights) -> Result<()> {
        let _ = (params, init);
        Ok(())
    }
    /// The phases `train` will run on `data` with `params`, in order (the
    /// runner reports progress and applies early stopping from it).
    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>>;
    /// Trains on `data`, reporting through `hooks`.
    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        device: &Device,
        seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> Result<Box<dyn Model>>;
    /// Rebuilds a trained model from its checkpoint tensors.
    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>>;
    /// [`Trainer::load`] for the session in folder `dir`, where loading may
    /// keep what it computed for next time (an encoder records its weights'
    /// BLAKE3 there, tied to the weights file's size, inode and times, so
    /// that an unchanged file is not hashed again at every load). Default:
    /// [`Trainer::load`].
    fn load_in(
        &self,
        dir: &std::path::Path,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>> {
        let _ = dir;
        self.load(vocabs, tensors, params, device)
    }
}
