//! CCA: the top-`k` canonical directions of the two languages' term
//! vectors of the training pairs as the projections (the fit:
//! [`crate::models::kit::cca`]). Paper, cost and notes: `docs/models.md`.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

pub use crate::models::kit::cca::{fit, fit_up_to, CcaFit};
use crate::models::kit::implicit;
use crate::models::kit::linear::{closed_form_input, logging_warnings, subspace_opts, LinearModel};
use crate::models::settings::ModelDef;
use crate::models::settings::{
    boxed, model_config, s, Check, ModelConfig, Settings, CG_TOL, DIM, MAX_CG_ITERS, OVERSAMPLE,
    POWER_ITERS_6, SOLVER,
};
use crate::models::{Hooks, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::Vocabs;
use crate::Result;

/// The registry name.
pub const KIND: &str = "cca";

/// Trains and reloads CCA models.
#[derive(Debug, Clone, Copy, Default)]
pub struct CcaTrainer;

model_config! {
    /// CCA's settings.
    pub struct Config {
        cg_tol: f64 = CG_TOL,
        dim: usize = DIM,
        max_cg_iters: usize = MAX_CG_ITERS,
        oversample: usize = OVERSAMPLE,
        power_iters: usize = POWER_ITERS_6,
        reg: f64 = s("0.3", Check::NonNegative, "ridge relative to the covariances' mean diagonal"),
        solver: String = SOLVER,
    }
}

impl ModelConfig for Config {}

/// CCA in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary: "regularised canonical correlation analysis of the aligned bags of words",
    space: true,
    runner: true,
    gpu: false,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(|| Box::new(CcaTrainer)),
    text: &[],
    presets: &[],
};

/// The fit's dimension and own settings: `reg` and the eigensolver's.
fn settings(
    params: &Params,
    seed: u64,
) -> Result<(usize, (f64, crate::models::kit::implicit::SubspaceOpts))> {
    let c = Config::from_params(params, KIND)?;
    let opts = subspace_opts(
        &c.solver,
        c.oversample,
        c.power_iters,
        c.cg_tol,
        c.max_cg_iters,
        seed,
    )?;
    Ok((c.dim, (c.reg, opts)))
}

impl Trainer for CcaTrainer {
    /// Reads the settings before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        settings(params, 0).map(|_| ())
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
            closed_form_input(KIND, data, params, resume.is_some(), hooks, || {
                settings(params, seed)
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
