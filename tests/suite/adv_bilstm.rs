//! The adversarial BiLSTM (seed 003) end to end on the tiny fixture
//! workspace: M streams its loss terms and the discriminator's game, ends
//! with a searchable space that has neighbours and evaluates; M_adv is the
//! same job without the adversary; bad settings are refused before anything
//! is written.

use serde_json::Value;

use crate::common;
use common::{assert_searchable, metrics_records, rosetta_in as rosetta, tiny_workspace, train};

const QUICK: [&str; 16] = [
    "--set",
    "emb=8",
    "--set",
    "hidden=6",
    "--set",
    "nn_hidden=8",
    "--set",
    "dim=4",
    "--set",
    "disc_hidden=5",
    "--set",
    "epochs=2",
    "--set",
    "batch=8",
    "--set",
    "lr=0.01",
];

#[test]
fn adv_bilstm_streams_the_game_and_searches() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    let dir = root.join("m");
    train(root, &wsf, "adv-bilstm", &dir, &QUICK);
    let recs = metrics_records(&dir);
    let steps: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "step").collect();
    assert!(!steps.is_empty());
    for s in &steps {
        let parts = &s["parts"];
        for k in [
            "L_tra",
            "L_matc",
            "L_matm",
            "L_reg",
            "disc_loss",
            "disc_acc",
            "grad_norm",
        ] {
            let v = parts[k].as_f64().unwrap_or(f64::NAN);
            assert!(v.is_finite(), "{k} in {s}");
        }
        let acc = parts["disc_acc"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&acc), "{s}");
    }
    let valid: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "valid").collect();
    assert_eq!(valid.len(), 2, "{recs:?}");
    for v in &valid {
        let m = v["MRR"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&m), "{v}");
    }
    assert_searchable(root, &dir, "the dog drinks water", "water");
}

/// Trains a QUICK model with `extra` settings into `root/name` and returns
/// each step's (loss, sum of L_G's terms).
fn losses_and_l_g(root: &std::path::Path, name: &str, extra: &[&str]) -> Vec<(f64, f64)> {
    let dir = root.join(name);
    let mut args: Vec<&str> = QUICK.to_vec();
    for kv in extra {
        args.extend(["--set", kv]);
    }
    train(
        root,
        &root.join("workspace.toml"),
        "adv-bilstm",
        &dir,
        &args,
    );
    metrics_records(&dir)
        .iter()
        .filter(|r| r["kind"] == "step")
        .map(|s| {
            let p = &s["parts"];
            let l_g: f64 = ["L_tra", "L_matc", "L_matm", "L_reg"]
                .iter()
                .map(|k| p[k].as_f64().unwrap())
                .sum();
            (s["loss"].as_f64().unwrap(), l_g)
        })
        .collect()
}

/// M_adv trains the discriminator only as a probe: the generator's loss is
/// L_G alone, so it equals the sum of its weighted terms.
#[test]
fn without_the_adversary_the_loss_is_l_g() {
    let ws = tiny_workspace();
    let steps = losses_and_l_g(ws.path(), "madv", &["adversarial=false"]);
    assert!(!steps.is_empty());
    for (loss, sum) in steps {
        assert!(
            (loss - sum).abs() < 1e-4 * (1.0 + sum.abs()),
            "{loss} vs {sum}"
        );
    }
}

/// With the confusion adversary the generator's loss is L_G plus λ times a
/// term that is never negative (zero only where the discriminator's output is
/// uniform): the step's loss is at least the sum of L_G's terms, and above it
/// while the discriminator still tells the sources apart. The seed's minimax
/// term is subtracted instead.
#[test]
fn the_confusion_adversary_adds_a_term_that_is_never_negative() {
    let ws = tiny_workspace();
    let root = ws.path();
    let gaps = |name: &str, adv_loss: &str| -> Vec<f64> {
        let kv = format!("adv_loss={adv_loss}");
        losses_and_l_g(root, name, &[&kv, "adv_weight=2"])
            .into_iter()
            .map(|(loss, l_g)| loss - l_g)
            .collect()
    };
    let confusion = gaps("confusion", "confusion");
    assert!(!confusion.is_empty());
    assert!(confusion.iter().all(|&g| g >= -1e-5), "{confusion:?}");
    assert!(confusion.iter().any(|&g| g > 1e-4), "{confusion:?}");
    // minimax: L_G − λ·CE, and a cross-entropy over three sources is positive
    let minimax = gaps("minimax", "minimax");
    assert!(minimax.iter().all(|&g| g < 0.0), "{minimax:?}");
}

#[test]
fn bad_adv_bilstm_settings_are_refused_before_anything_is_written() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    for (set, want) in [
        ("nn_hidden=1,2,3", "one or two widths"),
        ("nn_hidden=0", "one or two widths"),
        ("vectors=only-one.vec", "SOURCE.vec,TARGET.vec"),
        ("vectors=a.vec,b.vec", "no such file"),
        ("hidden=0", "hidden"),
        ("adv_loss=wasserstein", "expected minimax or confusion"),
        ("recurrence=fused", "recurrence"),
        // cuDNN's recurrence: not in a build without it, and never on the CPU
        (
            "recurrence=cudnn",
            if cfg!(feature = "cudnn") {
                "runs on a CUDA GPU"
            } else {
                "this build has no cuDNN"
            },
        ),
        // two settings, space-separated: M_adv has no adversarial term to choose
        (
            "adversarial=false adv_loss=confusion",
            "adversarial=false (M_adv) has none",
        ),
    ] {
        let dir = root.join("refused");
        let mut args = vec![
            "train",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            "adv-bilstm",
            "--device",
            "cpu",
            "--session",
            dir.to_str().unwrap(),
        ];
        for kv in set.split_whitespace() {
            args.extend(["--set", kv]);
        }
        let out = rosetta(root, &args);
        assert!(!out.status.success(), "{set:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{set:?}: {err}");
        assert!(!dir.exists(), "{set:?}: a session was written");
    }
}

/// The discriminator's updates reach only the discriminator: in M_adv the
/// generator never sees it, so the encoders (and the term vectors they give)
/// are the same whatever the discriminator's learning rate; in M its
/// cross-entropy is in the generator's loss, so they differ.
#[test]
fn the_discriminator_reaches_the_encoders_only_in_m() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    let vectors = |name: &str, adversarial: &str, disc_lr: &str| -> Vec<u8> {
        let dir = root.join(name);
        let mut args: Vec<String> = QUICK.iter().map(|s| s.to_string()).collect();
        for kv in [
            format!("adversarial={adversarial}"),
            format!("disc_lr={disc_lr}"),
        ] {
            args.push("--set".into());
            args.push(kv);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        train(root, &wsf, "adv-bilstm", &dir, &args);
        let out = root.join(format!("{name}-export"));
        let o = rosetta(
            root,
            &[
                "export",
                "--session",
                dir.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut bytes = Vec::new();
        for f in ["terms.en.vec", "terms.es.vec"] {
            bytes.extend(std::fs::read(out.join(f)).unwrap());
        }
        bytes
    };
    let a = vectors("madv-a", "false", "0.001");
    let b = vectors("madv-b", "false", "0.1");
    assert!(
        a == b,
        "M_adv's encoders moved with the discriminator's learning rate"
    );
    let c = vectors("m-a", "true", "0.001");
    let d = vectors("m-b", "true", "0.1");
    assert!(c != d, "M's encoders ignore the discriminator");
}

/// A session trained with `recurrence=cudnn` loads in every build: on the
/// CPU (and in a build without cuDNN) it encodes with Rosetta's own
/// recurrence, the same function, so its figures are those of the steps.
#[test]
fn a_cudnn_session_evaluates_on_the_cpu_with_the_steps() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    let dir = root.join("trained");
    train(root, &wsf, "adv-bilstm", &dir, &QUICK);
    let sentence = |dir: &std::path::Path| -> Value {
        let o = rosetta(
            root,
            &[
                "eval",
                "--session",
                dir.to_str().unwrap(),
                "--task",
                "sentence",
                "--json",
                "--device",
                "cpu",
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()["sentence"].clone()
    };
    let steps = sentence(&dir);
    let cfg = dir.join("config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("recurrence = \"steps\""), "{text}");
    std::fs::write(
        &cfg,
        text.replace("recurrence = \"steps\"", "recurrence = \"cudnn\""),
    )
    .unwrap();
    assert_eq!(sentence(&dir), steps);
}
