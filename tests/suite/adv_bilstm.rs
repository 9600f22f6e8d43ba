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

/// M_adv trains the discriminator only as a probe: the generator's loss is
/// L_G alone, so it equals the sum of its weighted terms.
#[test]
fn without_the_adversary_the_loss_is_l_g() {
    let ws = tiny_workspace();
    let root = ws.path();
    let dir = root.join("madv");
    let mut args: Vec<&str> = QUICK.to_vec();
    args.extend(["--set", "adversarial=false"]);
    train(
        root,
        &root.join("workspace.toml"),
        "adv-bilstm",
        &dir,
        &args,
    );
    for s in metrics_records(&dir).iter().filter(|r| r["kind"] == "step") {
        let p = &s["parts"];
        let sum: f64 = ["L_tra", "L_matc", "L_matm", "L_reg"]
            .iter()
            .map(|k| p[k].as_f64().unwrap())
            .sum();
        let loss = s["loss"].as_f64().unwrap();
        assert!((loss - sum).abs() < 1e-4 * (1.0 + sum.abs()), "{s}");
    }
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
    ] {
        let dir = root.join("refused");
        let out = rosetta(
            root,
            &[
                "train",
                "--workspace",
                wsf.to_str().unwrap(),
                "--model",
                "adv-bilstm",
                "--device",
                "cpu",
                "--session",
                dir.to_str().unwrap(),
                "--set",
                set,
            ],
        );
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
