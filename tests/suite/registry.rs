//! The command reference's model list (docs/cli/train.md) is the
//! registry's: a model added to the registry shows up there (and in
//! `rosetta train --help`) or this fails.
//! Every trainer in it keeps the hooks' order of epochs and steps.

use crate::common;

#[test]
fn reference_model_table_is_the_registry() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli/train.md")).unwrap();
    let table = rosetta::models::registry::markdown_models();
    assert!(
        readme.contains(&table),
        "docs/cli/train.md's model list differs from the registry; paste this:\n{table}"
    );
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
}

#[test]
fn train_help_lists_every_model_setting_with_its_default() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(["train", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{help}");
    // papers are named, never by the number of a file of seeds (next to
    // `--seed`, "(seed 001)" reads as a random seed)
    for n in ["seed 000", "seed 001", "seed 002", "seed 003", "seed 004"] {
        assert!(!help.contains(n), "{n} in:\n{help}");
    }
    assert!(help.contains("Yih et al., CoNLL 2011"), "{help}");
    for m in rosetta::models::MODELS {
        assert!(help.contains(&format!("{}: ", m.name)), "{}", m.name);
        for s in m.settings {
            let default = s.default.unwrap_or("unset");
            assert!(
                help.contains(&format!("{:<18} [{default}]", s.key)),
                "{} {}",
                m.name,
                s.key
            );
        }
    }
}

/// What a trainer reports, in order, as a check of the hooks' contract.
#[derive(Default)]
struct Order {
    /// The epoch opened last (`epoch_start`), if still open.
    open: Option<(String, usize)>,
    /// Every broken rule, for the assertion's message.
    faults: Vec<String>,
    steps: usize,
}

impl rosetta::models::Hooks for Order {
    fn step(&mut self, r: &rosetta::models::StepReport) -> rosetta::Result<rosetta::models::Flow> {
        self.steps += 1;
        if self.open.as_ref() != Some(&(r.phase.clone(), r.epoch)) {
            self.faults.push(format!(
                "step {} of {} epoch {} while {:?} is open",
                r.step, r.phase, r.epoch, self.open
            ));
        }
        Ok(rosetta::models::Flow::Continue)
    }
    fn epoch_start(&mut self, phase: &str, epoch: usize) {
        if let Some(o) = &self.open {
            self.faults
                .push(format!("{phase} epoch {epoch} opened while {o:?} is open"));
        }
        self.open = Some((phase.to_string(), epoch));
    }
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        _model: &dyn rosetta::models::Model,
        _extra: Vec<(String, candle_core::Tensor)>,
    ) -> rosetta::Result<rosetta::models::Flow> {
        // a closed-form fit ends an epoch it never opened: it has no steps
        if let Some(o) = self.open.take() {
            if o != (phase.to_string(), epoch) {
                self.faults
                    .push(format!("{phase} epoch {epoch} ended while {o:?} is open"));
            }
        }
        Ok(rosetta::models::Flow::Continue)
    }
    fn log(&mut self, _msg: &str) {}
}

/// Every trainer in the registry opens each epoch (`Hooks::epoch_start`,
/// where benchmarks start their clocks) before its first step and ends it
/// before the next opens, in every phase of its plan.
#[test]
fn every_trainer_opens_each_epoch_before_its_steps() {
    let ws = common::tiny_workspace();
    let quick: &[(&str, &[(&str, &str)])] = &[
        ("s2net", &[("epochs", "2")]),
        ("xcnn", &[("epochs", "2"), ("mono_epochs", "2")]),
        ("bae", &[("epochs", "2")]),
        (
            "dbn-cca",
            &[
                ("layers", "12,6"),
                ("input_terms", "60"),
                ("epochs", "2"),
                ("finetune_epochs", "2"),
                ("batch", "10"),
            ],
        ),
        (
            "adv-bilstm",
            &[
                ("emb", "8"),
                ("hidden", "6"),
                ("nn_hidden", "8"),
                ("disc_hidden", "5"),
                ("epochs", "2"),
                ("batch", "8"),
            ],
        ),
        (
            "hdlr",
            &[("epochs", "2"), ("positives", "60"), ("negatives", "120")],
        ),
        ("jplsa", &[("epochs", "3")]),
        ("cplsa", &[("epochs", "3")]),
    ];
    let mut trained = Vec::new();
    for spec in rosetta::models::registry::MODELS {
        if spec.trainer.is_none() {
            continue;
        }
        let text = rosetta::corpus::workspace::Workspace::load(&ws.path().join("workspace.toml"))
            .unwrap()
            .with_model_text(spec.text)
            .unwrap()
            .text;
        let (prepared, mut data, _) =
            rosetta::jobs::load_workspace(&ws.path().join("workspace.toml"), Some(&text)).unwrap();
        let mut kv: Vec<(String, String)> = vec![("dim".into(), "4".into())];
        if spec.name == "encoder" {
            // a tiny pretrained encoder (no `dim`: its width is the model's)
            let folder = ws.path().join("tiny-encoder");
            if !folder.exists() {
                common::encoder::tiny_encoder_folder(ws.path(), &folder, 1);
            }
            kv = vec![
                ("weights".into(), folder.to_string_lossy().into()),
                ("epochs".into(), "2".into()),
                ("batch".into(), "8".into()),
                ("train_max_len".into(), "32".into()),
            ];
        }
        if spec.name == "procrustes" {
            // term vectors as the job layer hands them over (no `dim`: the
            // map keeps the vectors' width), and the workspace's dictionary
            let vectors = |n: usize, shift: usize| {
                ndarray::Array2::from_shape_fn((n, 8), |(i, j)| {
                    ((i * 7 + j * 3 + shift) % 11) as f32 - 5.0
                })
            };
            let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
            data.pretrained = Some(rosetta::models::PretrainedVectors {
                session: "vectors-session".into(),
                checkpoint_blake3: "h".into(),
                source: vectors(vs, 0),
                target: vectors(vt, 2),
                found_source: vec![true; vs],
                found_target: vec![true; vt],
            });
            data.dictionary = Some(
                rosetta::jobs::training_dictionary(
                    &ws.path().join("workspace.toml"),
                    Some(&text),
                    &prepared,
                )
                .unwrap(),
            );
            kv = vec![("vectors".into(), "vectors-session".into())];
        }
        if let Some((_, more)) = quick.iter().find(|(n, _)| *n == spec.name) {
            kv.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        }
        let mut order = Order::default();
        let params = rosetta::models::Params::new(kv.into_iter().collect());
        rosetta::models::registry::trainer(spec.name)
            .unwrap()
            .train(
                &data,
                &params,
                &candle_core::Device::Cpu,
                7,
                None,
                &mut order,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", spec.name));
        assert!(order.faults.is_empty(), "{}: {:?}", spec.name, order.faults);
        // every setting of the model's registry row that has a default is
        // read by its trainer (a listed setting that does nothing is a bug:
        // adv-bilstm's `valid_max` once was one); the runner's own are read
        // by the runner, optional ones only when given
        let read = params.resolved();
        let unread: Vec<&str> = spec
            .settings
            .iter()
            .filter(|st| st.default.is_some() && !read.contains_key(st.key))
            .map(|st| st.key)
            .collect();
        assert!(
            unread.is_empty(),
            "{}: registry settings its trainer never reads: {unread:?}",
            spec.name
        );
        trained.push((spec.name, order.steps));
    }
    // the iterative trainers took steps, so the rule was exercised
    for name in [
        "s2net",
        "xcnn",
        "bae",
        "dbn-cca",
        "adv-bilstm",
        "hdlr",
        "jplsa",
        "encoder",
    ] {
        let steps = trained.iter().find(|t| t.0 == name).map(|t| t.1);
        assert!(steps.unwrap_or(0) > 0, "{name}: {steps:?} steps");
    }
}

/// Every command that loads or trains a model picks its device the same way
/// by default (`auto`: the GPU when the build has CUDA and one answers).
#[test]
fn every_model_command_defaults_to_the_same_device() {
    for cmd in ["train", "eval", "neighbours", "export", "sweep"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
            .args([cmd, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        // the option's text: from `--device` to the next option
        let at = help
            .find("--device <DEVICE>")
            .unwrap_or_else(|| panic!("{cmd}: no --device in\n{help}"));
        let rest = &help[at + 2..];
        let para = &rest[..rest.find("\n      -").unwrap_or(rest.len())];
        assert!(para.contains("[default: auto]"), "{cmd}: {para}");
    }
}

/// Every model's typed settings, built from its defaults alone (nothing is
/// trained: `Trainer::check` builds the trainer's config as `plan`, `train`
/// and `load` do; a lexical baseline's is `Bm25Baseline::new`; the runner's
/// `RunnerSettings`), read exactly the keys of its registry row that have a
/// default, and the optional ones given: a listed setting that no config
/// reads (a setting that does nothing: adv-bilstm's `valid_max` once was
/// one) fails, and so does a config reading a key the row lacks (refused by
/// `ModelParams`, so its config cannot be built).
#[test]
fn every_model_config_reads_exactly_its_registry_row() {
    use rosetta::models::{registry, Params};
    let ws = common::tiny_workspace();
    let encoder = ws.path().join("tiny-encoder");
    common::encoder::tiny_encoder_folder(ws.path(), &encoder, 1);
    let mut faults = Vec::new();
    for spec in rosetta::models::MODELS {
        // the settings with no default that a model cannot start without
        let given: Vec<(String, String)> = match spec.name {
            "encoder" => vec![("weights".into(), encoder.display().to_string())],
            "procrustes" => vec![("vectors".into(), "vectors-session".into())],
            _ => Vec::new(),
        };
        let params = Params::new(given.iter().cloned().collect());
        let built = match spec.trainer {
            None => rosetta::models::bm25::Bm25Baseline::new(spec.name, &params).map(|_| ()),
            Some(_) => rosetta::models::registry::trainer(spec.name)
                .unwrap()
                .check(&params)
                .and_then(|()| registry::RunnerSettings::from_params(&params).map(|_| ())),
        };
        if let Err(e) = built {
            faults.push(format!("{}: its config cannot be built: {e}", spec.name));
            continue;
        }
        let read: Vec<String> = params.resolved().into_keys().collect();
        let mut want: Vec<String> = spec
            .all_settings()
            .filter(|s| s.default.is_some())
            .map(|s| s.key.to_string())
            .chain(given.iter().map(|(k, _)| k.clone()))
            .collect();
        want.sort();
        let never: Vec<&String> = want.iter().filter(|k| !read.contains(k)).collect();
        let unlisted: Vec<&String> = read.iter().filter(|k| !want.contains(k)).collect();
        if !(never.is_empty() && unlisted.is_empty()) {
            faults.push(format!(
                "{}: registry settings its config never reads: {never:?}; read but not \
                 in its row (or without a default): {unlisted:?}",
                spec.name
            ));
        }
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

/// A setting the model's registry row lacks is refused by `rosetta train`
/// before a session folder is written: `--set valid_max=10` for the
/// adversarial BiLSTM (issue 35: it was listed, accepted, written into a
/// queued session, and failed at start), with the models that read it named.
#[test]
fn train_refuses_a_setting_the_model_lacks_before_writing_anything() {
    let ws = common::tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sessions/adv");
    let out = common::rosetta_in(
        root.path(),
        &[
            "train",
            "--workspace",
            ws.path().join("workspace.toml").to_str().unwrap(),
            "--model",
            "adv-bilstm",
            "--set",
            "valid_max=10",
            "--device",
            "cpu",
            "--session",
            dir.to_str().unwrap(),
        ],
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{e}");
    assert!(
        e.contains("adv-bilstm does not take valid_max (read by xcnn, bae, dbn-cca)"),
        "{e}"
    );
    assert!(!dir.exists() && !root.path().join("sessions").exists());
}

/// A model that computes on the CPU only (its registry row's `gpu` false:
/// the closed-form fits, HDLR, the topic models, procrustes) refuses
/// `--device cuda` in one line naming it, before a session folder is
/// written, whatever this build's CUDA support; `--device` itself is parsed
/// by clap, so a misspelt device is a usage error.
#[test]
fn a_cpu_only_model_refuses_a_gpu_before_writing_anything() {
    let ws = common::tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sessions/gpu");
    let train = |model: &str, device: &str| {
        common::rosetta_in(
            root.path(),
            &[
                "train",
                "--workspace",
                wsf.to_str().unwrap(),
                "--model",
                model,
                "--device",
                device,
                "--session",
                dir.to_str().unwrap(),
            ],
        )
    };
    for spec in rosetta::models::MODELS.iter().filter(|m| !m.gpu) {
        let out = train(spec.name, "cuda:1");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: {e}", spec.name);
        assert!(
            e.contains(&format!("--device cuda:1: {} ", spec.name)) && e.contains("CPU only"),
            "{}: {e}",
            spec.name
        );
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(!dir.exists(), "{}", spec.name);
    }
    let out = train("s2net", "gpu");
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("invalid value 'gpu' for '--device <DEVICE>'")
            && e.contains("expected auto, cpu, cuda or cuda:<index>"),
        "{e}"
    );
    assert!(!dir.exists());
}

/// `config.toml` files written before the settings were typed (by the code
/// of 7692ff6, one per model, under `tests/fixtures/configs/`) still load:
/// each model's typed settings read from them, and resolving their given
/// settings again gives exactly the values recorded (no default moved).
#[test]
fn config_files_written_before_typed_settings_still_load() {
    use rosetta::models::registry;
    use rosetta::session::SessionConfig;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/configs");
    for def in rosetta::models::MODELS {
        let dir = root.join(def.name);
        let cfg = SessionConfig::read(&dir).unwrap_or_else(|e| panic!("{}: {e}", def.name));
        assert_eq!(cfg.model, def.name);
        let params = cfg.run_settings();
        let typed = def
            .config(&params)
            .unwrap_or_else(|e| panic!("{}: {e}", def.name));
        if def.runner {
            registry::RunnerSettings::from_params(&params).unwrap();
        } else {
            rosetta::models::bm25::Bm25Baseline::new(def.name, &params).unwrap();
        }
        // every value the typed settings read is the one recorded, or, for a
        // setting added since the file was written, its default
        let default_of = |k: &str| {
            def.all_settings()
                .find(|s| s.key == k)
                .and_then(|s| s.default)
                .map(str::to_string)
        };
        for (k, v) in params.resolved() {
            match cfg.params.get(&k) {
                Some(rec) => assert_eq!(rec, &v, "{}: {k}", def.name),
                None => assert_eq!(default_of(&k), Some(v), "{}: new {k}", def.name),
            }
        }
        let mut again = cfg.clone();
        again.params.clear();
        again.resolve().unwrap();
        for (k, v) in &again.params {
            match cfg.params.get(k) {
                Some(rec) => assert_eq!(rec, v, "{}: a default moved ({k})", def.name),
                None => assert_eq!(default_of(k).as_ref(), Some(v), "{}: new {k}", def.name),
            }
        }
        assert!(
            cfg.params.keys().all(|k| again.params.contains_key(k)),
            "{}: a recorded setting is no longer resolved",
            def.name
        );
        // the capabilities the job layer asks of the typed settings
        assert_eq!(
            typed.needs_dictionary(),
            def.name == "procrustes",
            "{}",
            def.name
        );
        assert_eq!(
            typed.precision().unwrap().is_some(),
            def.gpu,
            "{}",
            def.name
        );
        assert_eq!(
            typed.recurrence().unwrap().is_some(),
            def.name == "adv-bilstm",
            "{}",
            def.name
        );
        let vectors = typed.vectors().unwrap();
        assert_eq!(
            vectors.as_ref().and_then(|v| v.session()).is_some(),
            def.name == "procrustes",
            "{}",
            def.name
        );
    }
}
