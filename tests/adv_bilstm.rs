//! The adversarial BiLSTM (seed 003) end to end on the tiny fixture
//! workspace: M streams its loss terms and the discriminator's game, ends
//! with a searchable space that has neighbours and evaluates; M_adv is the
//! same job without the adversary; bad settings are refused before anything
//! is written.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{assert_searchable, rosetta_in as rosetta, tiny_workspace, train};

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

fn records(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn adv_bilstm_streams_the_game_and_searches() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    let dir = root.join("m");
    train(root, &wsf, "adv-bilstm", &dir, &QUICK);
    let recs = records(&dir);
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
    for s in records(&dir).iter().filter(|r| r["kind"] == "step") {
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
