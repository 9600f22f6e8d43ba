//! Cross-language latent semantic indexing: a truncated (randomised) SVD of
//! the concatenated training pairs `D = [X_src | X_tgt]` (log-tf·idf, unit
//! rows per language); each language projects with its own rows of the top-`k`
//! right singular vectors. Memory linear in the vocabulary: no `(V_s + V_t)²`
//! matrix is formed. Paper, cost and notes: `docs/models.md`.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use crate::models::kit::linear::{
    check_rank, closed_form_input, hconcat, randomized_svd, split_joint, CsrOp, LinearModel,
};
use crate::models::settings::ModelDef;
use crate::models::settings::{
    boxed, model_config, s, ModelConfig, Settings, COUNT, DIM, OVERSAMPLE,
};
use crate::models::{Hooks, Phase, Resume, TrainData, Trainer};
use crate::models::{Model, Params};
use crate::text::CsrMatrix;
use crate::text::Vocabs;
use crate::Result;

/// The registry name.
pub const KIND: &str = "cl-lsi";

/// A fitted CL-LSI factorisation.
#[derive(Debug, Clone)]
pub struct ClLsiFit {
    /// `(V_s + V_t) × k` right singular vectors of `[X_src | X_tgt]`.
    pub joint: faer::Mat<f64>,
    /// The `k` largest singular values.
    pub singular_values: Vec<f64>,
}

/// CL-LSI of weighted (already log-tf·idf, row-normalised) aligned matrices.
pub fn fit(
    src: &CsrMatrix,
    tgt: &CsrMatrix,
    k: usize,
    oversample: usize,
    power_iters: usize,
    seed: u64,
) -> Result<ClLsiFit> {
    let d = hconcat(src, tgt);
    let svd = randomized_svd(&CsrOp(&d), k, oversample, power_iters, seed)?;
    check_rank(KIND, &svd.s, k)?;
    Ok(ClLsiFit {
        joint: svd.v,
        singular_values: svd.s,
    })
}

/// Trains and reloads CL-LSI models.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClLsiTrainer;

model_config! {
    /// CL-LSI's settings.
    pub struct Config {
        dim: usize = DIM,
        oversample: usize = OVERSAMPLE,
        power_iters: usize = s("4", COUNT, "randomised SVD: power iterations"),
    }
}

impl ModelConfig for Config {}

/// CL-LSI in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary: "cross-language LSI: truncated SVD of the stacked bilingual term-document matrix",
    space: true,
    runner: true,
    gpu: false,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(|| Box::new(ClLsiTrainer)),
    // measured on enhi: stop words kept or n-gram units cost ad-hoc MAP
    // 0.18 -> 0.14 (while sentence MRR rises 0.20 -> 0.34 and the
    // Bible gains everywhere): the baseline keeps the settings it was
    // compared under; `stopwords = false` in a workspace gives the rest
    text: &[("stopwords", "true"), ("oov_ngrams", "0")],
    presets: &[],
};

/// CL-LSI's dimension and own settings: `oversample`, `power_iters`.
fn settings(params: &Params) -> Result<(usize, (usize, usize))> {
    let c = Config::from_params(params, KIND)?;
    Ok((c.dim, (c.oversample, c.power_iters)))
}

impl Trainer for ClLsiTrainer {
    /// Reads the settings before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        settings(params).map(|_| ())
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
        let (k, (oversample, iters), xs, xt) =
            closed_form_input(KIND, data, params, resume.is_some(), hooks, || {
                settings(params)
            })?;
        let t0 = std::time::Instant::now();
        let f = fit(&xs, &xt, k, oversample, iters, seed)?;
        hooks.log(&format!(
            "cl-lsi: randomised SVD of {} pairs × {} terms, k={k}, p={oversample}, q={iters} \
             in {:.1}s; singular values {:.3} .. {:.3}",
            xs.n_rows(),
            xs.n_cols + xt.n_cols,
            t0.elapsed().as_secs_f64(),
            f.singular_values[0],
            f.singular_values[k - 1]
        ));
        let (ps, pt) = split_joint(&f.joint, xs.n_cols);
        let model = LinearModel::new(KIND, data.vocabs.clone(), ps, pt)?;
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
