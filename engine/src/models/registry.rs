//! The model registry: the list of every model's definition
//! ([`ModelDef`], declared in the model's own file), and what is generated
//! from it: lookup by name, the validation of `--set` values (with
//! did-you-mean hints), `rosetta train --help`'s settings and docs/cli/train.md's
//! model list. A model reads its settings as one typed `Config`
//! ([`model_config!`](super::settings::model_config), in its file).
//!
//! Adding a model: one file under `models/` with its `Config`, its
//! [`Trainer`] and its `pub static DEF: ModelDef`, and one line `&file::DEF`
//! in [`MODELS`]. Adding a setting to a model: one line in its `Config`
//! (see [`super::settings`]); nothing here changes.

use super::{
    adv_bilstm, bae, bm25, cca, cl_lsi, dbn_cca, encoder, hdlr, opca, plsa, procrustes, s2net, xcnn,
};

use super::{DeviceSpec, Trainer};

pub use super::settings::{Check, ModelDef, ModelSpec, RunnerSettings, Setting, RUNNER_SETTINGS};

/// Every model, in the order `rosetta train --help` lists them: the models
/// with a space, then the lexical baselines.
pub static MODELS: &[&ModelDef] = &[
    &cl_lsi::DEF,
    &opca::DEF,
    &cca::DEF,
    &s2net::DEF,
    &hdlr::DEF,
    &xcnn::DEF,
    &bae::DEF,
    &dbn_cca::DEF,
    &adv_bilstm::DEF,
    &encoder::DEF,
    &procrustes::DEF,
    &plsa::JPLSA_DEF,
    &plsa::CPLSA_DEF,
    &bm25::BM25,
    &bm25::BM25_DICT,
    &bm25::BM25_MT,
    #[cfg(test)]
    &super::toy::DEF,
];

/// The registry row of `name`; an unknown name is an error listing the known ones.
pub fn spec(name: &str) -> crate::Result<&'static ModelDef> {
    MODELS
        .iter()
        .copied()
        .find(|m| m.name == name)
        .ok_or_else(|| {
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
    let given = &spec.with_presets(given);
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
        for p in m.presets {
            let sets: Vec<String> = p.sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!(
                "    preset {}={}: {} (gives {}; a setting given beside it wins)\n",
                p.key,
                p.name,
                p.help,
                sets.join(", ")
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

/// The model list of docs/cli/train.md (Markdown, no line over 100
/// columns): every model with its summary, whether it has a space, and its
/// settings with defaults. A test keeps the reference's copy equal to this.
pub fn markdown_models() -> String {
    let mut out = String::new();
    for m in MODELS {
        let space = if m.space { "" } else { " (no space)" };
        out.push_str(&wrap_words(
            &format!("- **`{}`**{space}: {}", m.name, m.summary),
            100,
            "  ",
        ));
        let settings: Vec<String> = m
            .settings
            .iter()
            .map(|s| match s.default {
                Some(d) => format!("`{}={d}`", s.key),
                None => format!("`{}`", s.key),
            })
            .collect();
        if !settings.is_empty() {
            out.push_str(&wrap_words(
                &format!("  - settings: {}", settings.join(" ")),
                100,
                "    ",
            ));
        }
        for p in m.presets {
            let sets: Vec<String> = p.sets.iter().map(|(k, v)| format!("`{k}={v}`")).collect();
            out.push_str(&wrap_words(
                &format!(
                    "  - preset `{}={}`: {}; gives {} (a setting given beside it wins)",
                    p.key,
                    p.name,
                    p.help,
                    sets.join(" ")
                ),
                100,
                "    ",
            ));
        }
    }
    out
}

/// `text` cut between words into lines of at most `width` columns (a word
/// longer than that on a line of its own), each line after the first
/// starting with `indent`; every line ends with a newline.
fn wrap_words(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    let lead: String = text.chars().take_while(|c| *c == ' ').collect();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if len > 0 && line.trim().is_empty() {
            // after an indent: no space
        } else if len > 0 {
            line.push(' ');
        } else {
            line.push_str(&lead);
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// Whether `model` reads the `--set` key `key` (runner keys included for
/// trained models); false for an unknown model.
pub fn takes_setting(model: &str, key: &str) -> bool {
    spec(model).is_ok_and(|m| m.setting(key).is_some())
}

/// Whether `name` is a lexical baseline (no trainer, no space).
pub fn is_lexical(name: &str) -> bool {
    spec(name).is_ok_and(|m| m.trainer.is_none())
}

/// The trainer of model `name`; an unknown name is an error listing the
/// known ones, a lexical baseline one saying it has no trainer.
pub fn trainer(name: &str) -> crate::Result<Box<dyn Trainer>> {
    let spec = spec(name)?;
    match spec.trainer {
        Some(make) => Ok(make()),
        None => Err(crate::Error::invalid(format!(
            "`{name}` is a lexical baseline: it has no trainer or embedding space"
        ))),
    }
}

/// Error when `device` names a GPU for `model`, which computes on the CPU
/// only (its definition's `gpu` is false): `auto` and `cpu` are fine; then
/// [`DeviceSpec::check_build`].
pub fn check_device(model: &str, device: DeviceSpec) -> crate::Result<()> {
    let def = spec(model)?;
    if device.is_cuda() && !def.gpu {
        return Err(crate::Error::invalid(format!(
            "--device {device}: {model} {} runs on the CPU only; use --device cpu or auto",
            if def.trainer.is_none() {
                "is a lexical baseline and"
            } else {
                "computes in closed form or by CPU code, and"
            }
        )));
    }
    device.check_build()
}

/// The device a job of `model` opens when `asked` was asked: the CPU for a
/// model that computes on the CPU only (so `auto` never opens a GPU it
/// would not use, and a session recorded as `cuda` before such models
/// refused it still runs), else `asked`. A name outside the registry (a
/// test's trainer) gets `asked`.
pub fn runs_on(model: &str, asked: DeviceSpec) -> DeviceSpec {
    match spec(model) {
        Ok(def) if !def.gpu => DeviceSpec::Cpu,
        _ => asked,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::settings::Settings;
    use super::super::Params;
    use super::*;

    #[test]
    fn every_default_passes_its_check_and_names_are_unique() {
        let mut names: Vec<&str> = names().collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), MODELS.len());
        for m in MODELS {
            let all: Vec<Setting> = m.all_settings().copied().collect();
            if let Err(e) = super::super::settings::check_table(&all) {
                panic!("{}: {e}", m.name);
            }
            assert_eq!(m.space, m.trainer.is_some(), "{}", m.name);
            // `word2vec` says what its `vectors` setting accepts
            let files = m
                .setting(super::super::pretrained::KEY)
                .is_some_and(|s| s.check.check("a.vec,b.vec").is_ok());
            assert_eq!(m.word2vec, files, "{}", m.name);
            // its typed config reads from its defaults alone
            let params = Params::new(Default::default());
            if let Err(e) = m.config(&params) {
                panic!("{}: {e}", m.name);
            }
            // each preset is a value of one of its settings, and gives
            // values its settings accept, which the typed config reads
            for p in m.presets {
                let named = m.setting(p.key).map(|s| s.check.check(p.name));
                assert!(matches!(named, Some(Ok(()))), "{}: {p:?}", m.name);
                let given =
                    std::collections::BTreeMap::from([(p.key.to_string(), p.name.to_string())]);
                let expanded = m.with_presets(&given);
                assert_eq!(expanded.len(), p.sets.len() + 1, "{}: {p:?}", m.name);
                validate_settings(m.name, &expanded).unwrap();
                m.config(&Params::new(expanded)).unwrap();
            }
        }
    }

    #[test]
    fn a_preset_gives_its_settings_and_a_given_one_wins() {
        let given = |kv: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let r = resolve_settings("encoder", &given(&[("recipe", "clir")])).unwrap();
        assert_eq!(r["rerank"], "maxsim:1");
        assert_eq!(r["rerank_depth"], "100");
        assert_eq!(r["epochs"], "0");
        let r = resolve_settings(
            "encoder",
            &given(&[
                ("recipe", "clir"),
                ("rerank", "maxsim:0.5"),
                ("epochs", "2"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (r["rerank"].as_str(), r["epochs"].as_str()),
            ("maxsim:0.5", "2")
        );
        // without the preset: the plain defaults
        let r = resolve_settings("encoder", &given(&[])).unwrap();
        assert_eq!(
            (r["recipe"].as_str(), r["rerank"].as_str()),
            ("none", "none")
        );
        assert!(settings_help().contains("preset recipe=clir"));
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

    /// The toy model (`models/toy.rs`, in tests only): one file and one
    /// line in [`MODELS`] make it known everywhere.
    fn given(k: &str, v: &str) -> std::collections::BTreeMap<String, String> {
        std::collections::BTreeMap::from([(k.to_string(), v.to_string())])
    }

    #[test]
    fn a_model_in_the_list_is_known_everywhere() {
        assert!(names().any(|n| n == "toy"));
        // validation, from its Config alone
        let e = validate_settings("toy", &given("width", "10"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--set width=10") && e.contains("1..=9"), "{e}");
        let e = check_setting("toy", "wdth", "2").unwrap_err().to_string();
        assert!(e.contains("did you mean `width`?"), "{e}");
        assert_eq!(check_setting("toy", "shape", " square ").unwrap(), "square");
        // the help and the README's table
        let help = settings_help();
        assert!(help.contains("toy: a model added in tests only"), "{help}");
        assert!(help.contains(&format!("{:<18} [3] how wide the toy is", "width")));
        let list = markdown_models();
        assert!(
            list.contains("`width=3` `shape=round` `bli_seed=4`"),
            "{list}"
        );
        assert!(list.lines().all(|l| l.chars().count() <= 100), "{list}");
        // config.toml's resolved settings, and the typed config read back
        let resolved = resolve_settings("toy", &given("shape", "square")).unwrap();
        assert_eq!(resolved.len(), super::super::toy::Config::SETTINGS.len());
        let params = Params::with_recorded(BTreeMap::new(), resolved);
        let c = super::super::toy::Config::from_params(&params, "toy").unwrap();
        assert_eq!((c.width, c.shape.as_str(), c.bli_seed), (3, "square", 4));
        // capabilities, asked of the typed config
        let cfg = spec("toy").unwrap().config(&params).unwrap();
        assert!(cfg.needs_dictionary() && cfg.init().is_none());
        assert_eq!(cfg.bli_seed(), Some(4));
    }

    #[test]
    fn cpu_only_models_refuse_a_gpu_and_take_auto() {
        for m in [
            "cl-lsi",
            "opca",
            "cca",
            "hdlr",
            "jplsa",
            "cplsa",
            "procrustes",
            "bm25",
        ] {
            let e = check_device(m, DeviceSpec::Cuda(0))
                .unwrap_err()
                .to_string();
            assert!(e.contains("CPU only") && e.contains(m), "{m}: {e}");
            check_device(m, DeviceSpec::Auto).unwrap();
            check_device(m, DeviceSpec::Cpu).unwrap();
            assert_eq!(runs_on(m, DeviceSpec::Auto), DeviceSpec::Cpu, "{m}");
        }
        for m in ["s2net", "xcnn", "bae", "dbn-cca", "adv-bilstm", "encoder"] {
            let r = check_device(m, DeviceSpec::Cuda(0));
            assert_eq!(r.is_ok(), cfg!(feature = "cuda"), "{m}: {r:?}");
            assert_eq!(runs_on(m, DeviceSpec::Auto), DeviceSpec::Auto, "{m}");
        }
    }

    #[test]
    fn only_kernels_precision_checkpointing_and_reranking_say_how_a_model_computes() {
        for def in MODELS {
            for s in def.all_settings() {
                assert_eq!(
                    s.compute_only,
                    matches!(
                        s.key,
                        "recurrence"
                            | "attention"
                            | "precision"
                            | "gradient_checkpointing"
                            | "rerank"
                            | "rerank_depth"
                    ),
                    "{}: {}",
                    def.name,
                    s.key
                );
            }
        }
        let keys = |m: &str| -> Vec<&str> {
            spec(m)
                .unwrap()
                .all_settings()
                .filter(|s| s.compute_only)
                .map(|s| s.key)
                .collect()
        };
        assert_eq!(keys("adv-bilstm"), ["precision", "recurrence"]);
        assert_eq!(
            keys("encoder"),
            [
                "attention",
                "gradient_checkpointing",
                "precision",
                "rerank",
                "rerank_depth"
            ]
        );
        assert!(keys("cca").is_empty());
    }
}
