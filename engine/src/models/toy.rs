//! A toy model, compiled in tests only: the proof that a new model is one
//! file (this one: its `Config` and its [`ModelDef`]) plus one line in
//! the registry's `MODELS`. Nothing else in the registry, the `--set`
//! validation or the help names it (the registry's test
//! `a_model_in_the_list_is_known_everywhere` shows each knows it).

use super::settings::ModelDef;
use super::settings::{boxed, model_config, s, Check, ModelConfig, Settings};

model_config! {
    /// The toy's settings.
    pub struct Config {
        width: usize = s("3", Check::Int { min: 1, max: 9 }, "how wide the toy is"),
        shape: String = s("round", Check::Choice(&["round", "square"]), "the toy's shape"),
        bli_seed: u64 = s("4", Check::Int { min: 0, max: u64::MAX }, "the dictionary split it fits on"),
    }
}

impl ModelConfig for Config {
    fn bli_seed(&self) -> Option<u64> {
        Some(self.bli_seed)
    }
}

/// The toy in the registry.
pub static DEF: ModelDef = ModelDef {
    name: "toy",
    summary: "a model added in tests only",
    space: false,
    runner: false,
    gpu: false,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: None,
    text: &[],
    presets: &[],
};
