//! CCA: the top-`k` canonical directions of the two languages' term
//! vectors of the training pairs as the projections (the fit:
//! [`crate::models::kit::cca`]). Paper, cost and notes: `docs/models.md`.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

pub use crate::models::kit::cca::{fit, fit_up_to, CcaFit};
use crate::models::kit::implicit;
use crate::models::kit::linear::{closed_form_input, logging_warnings, subspace_opts, LinearModel};
use crate::models::{Hooks, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::Vocabs;
use crate::Result;

/// The registry name.
pub const KIND: &str = "cca";

/// Trains and reloads CCA models.
#[derive(Debug, Clone, Copy, Default)]
pub struct CcaTrainer;

/// The fit's own settings (`dim` apart): `reg` and the eigensolver's.
fn settings(
    p: &crate::models::ModelParams<'_>,
    seed: u64,
) -> Result<(f64, crate::models::kit::implicit::SubspaceOpts)> {
    Ok((p.get("reg")?, subspace_opts(p, seed)?))
}

impl Trainer for CcaTrainer {
    /// Reads the settings before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        crate::models::kit::linear::closed_form_settings(KIND, params, |p| settings(p, 0))
            .map(|_| ())
    }

    fn plan(&self, data: &TrainData, _params: &Params) -> Result<Vec<Phase>> {
        Ok(vec![Phase::closed_form(data.train_src.n_rows())])
    }

    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        _device: &Device,
        seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> Result<Box<dyn Model>> {
        let (k, (reg, opts), xs, xt) =
            closed_form_input(KIND, data, params, resume.is_some(), hooks, |p| {
                settings(p, seed)
            })?;
        let t0 = std::time::Instant::now();
        let f = logging_warnings(hooks, |warn| fit(&xs, &xt, k, reg, &opts, warn))?;
        hooks.log(&format!(
            "cca: fitted in {:.1}s ({}); canonical correlations {:.4} .. {:.4}",
            t0.elapsed().as_secs_f64(),
            implicit::describe(opts.solver, f.cg_iters),
            f.correlations[0],
            f.correlations[k - 1]
        ));
        let model = LinearModel::new(KIND, data.vocabs.clone(), f.source, f.target)?;
        hooks.epoch_end("train", 1, &model, Vec::new())?;
        Ok(Box::new(model))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        _params: &Params,
        _device: &Device,
    ) -> Result<Box<dyn Model>> {
        Ok(Box::new(LinearModel::from_tensors(KIND, vocabs, &tensors)?))
    }
}
