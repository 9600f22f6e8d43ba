//! A toy model, compiled in tests only: the proof that a new model is one
//! file (this one: its `Config` and its [`ModelDef`]) plus one line in
//! [`MODELS`](super::registry::MODELS). Nothing else in the registry, the
//! `--set` validation or the help names it.

use super::registry::ModelDef;
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
};

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::registry;
    use super::super::Params;
    use super::*;

    fn given(k: &str, v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn a_model_in_the_list_is_known_everywhere() {
        assert!(registry::names().any(|n| n == "toy"));
        // validation, from its Config alone
        let e = registry::validate_settings("toy", &given("width", "10"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--set width=10") && e.contains("1..=9"), "{e}");
        let e = registry::check_setting("toy", "wdth", "2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `width`?"), "{e}");
        assert_eq!(
            registry::check_setting("toy", "shape", " square ").unwrap(),
            "square"
        );
        // the help and the README's table
        let help = registry::settings_help();
        assert!(help.contains("toy: a model added in tests only"), "{help}");
        assert!(help.contains(&format!("{:<18} [3] how wide the toy is", "width")));
        assert!(registry::markdown_table().contains("`width=3` `shape=round` `bli_seed=4`"));
        // config.toml's resolved settings, and the typed config read back
        let resolved = registry::resolve_settings("toy", &given("shape", "square")).unwrap();
        assert_eq!(resolved.len(), Config::SETTINGS.len());
        let params = Params::with_recorded(BTreeMap::new(), resolved);
        let c = Config::from_params(&params, "toy").unwrap();
        assert_eq!((c.width, c.shape.as_str(), c.bli_seed), (3, "square", 4));
        // capabilities, asked of the typed config
        let cfg = registry::spec("toy").unwrap().config(&params).unwrap();
        assert!(cfg.needs_dictionary() && cfg.init().is_none());
        assert_eq!(cfg.bli_seed(), Some(4));
    }
}
