//! Training: what a model's training loop reports to the job runner, and the
//! data it is given. The runner (sessions, checkpoints, metrics) lives here too.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use crate::models::{Model, Params, Vocabs};
use crate::text::CsrMatrix;
use crate::Result;

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
}

impl TrainData {
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
    /// Training phase (`train`, or `mono` / `cross` for XCNN).
    pub phase: String,
    /// Epoch, from 1.
    pub epoch: usize,
    /// Optimiser step, from 1, counted over the whole job.
    pub step: usize,
    /// Mean loss of the step.
    pub loss: f64,
    /// Training examples in the step.
    pub examples: usize,
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
    /// A human-readable line for the session's `log.txt`.
    fn log(&mut self, msg: &str);
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

/// How to train and reload one kind of model.
pub trait Trainer: Send + Sync {
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
}
pub mod lexical;
pub mod optim;
pub mod runner;
