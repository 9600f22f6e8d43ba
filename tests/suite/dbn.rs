//! DBN-CCA (seed 004) end to end on the tiny fixture workspace: a job of
//! per-layer phases streams each layer's curve and held-out figures, ends
//! with a searchable space that has neighbours, and refuses bad settings
//! before writing anything.

use serde_json::Value;

use crate::common;
use common::{assert_searchable, metrics_records, rosetta_in as rosetta, tiny_workspace, train};

const QUICK: [&str; 14] = [
    "--set",
    "layers=12,6",
    "--set",
    "input_terms=60",
    "--set",
    "epochs=3",
    "--set",
    "finetune_epochs=3",
    "--set",
    "batch=10",
    "--set",
    "dim=4",
    "--set",
    "lr_rsm=0.01",
];

#[test]
fn dbn_cca_trains_layer_by_layer_and_searches() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    let dir = root.join("dbn");
    train(root, &wsf, "dbn-cca", &dir, &QUICK);
    let recs = metrics_records(&dir);
    // every phase of the plan streamed steps, in order
    let mut phases: Vec<String> = Vec::new();
    for r in &recs {
        if r["kind"] == "step" {
            let p = r["phase"].as_str().unwrap().to_string();
            if phases.last() != Some(&p) {
                phases.push(p);
            }
        }
    }
    assert_eq!(
        phases,
        ["src.rsm", "src.rbm2", "tgt.rsm", "tgt.rbm2", "finetune"],
        "{phases:?}"
    );
    // layer epochs carry held-out figures and no MRR (no space yet); the
    // fine-tuning epochs are validated
    for r in recs.iter().filter(|r| r["kind"] == "valid") {
        let phase = r["phase"].as_str().unwrap();
        if phase == "finetune" {
            let m = r["MRR"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&m), "{r}");
            assert!(r["held_out_ce.src"].as_f64().unwrap().is_finite(), "{r}");
        } else {
            assert!(r.get("MRR").is_none(), "{r}");
            for k in ["held_out_error", "free_energy_gap", "hidden_spread"] {
                assert!(r[k].as_f64().unwrap().is_finite(), "{k} in {r}");
            }
        }
    }
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(status["state"], "done", "{status}");
    // the session searches, has neighbours and evaluates
    assert_searchable(root, &dir, "the dog drinks water", "water");
}

/// CCA straight on the pre-trained stacks (no fine-tuning) is a closed-form
/// last phase.
#[test]
fn dbn_cca_without_finetuning_ends_with_a_cca_phase() {
    let ws = tiny_workspace();
    let root = ws.path();
    let dir = root.join("dbn0");
    let args: Vec<&str> = QUICK
        .iter()
        .map(|a| {
            if *a == "finetune_epochs=3" {
                "finetune_epochs=0"
            } else {
                a
            }
        })
        .collect();
    train(root, &root.join("workspace.toml"), "dbn-cca", &dir, &args);
    let recs = metrics_records(&dir);
    let last = recs.iter().rfind(|r| r["kind"] == "valid").unwrap();
    assert_eq!(last["phase"], "cca", "{last}");
    assert!(last["MRR"].as_f64().is_some(), "{last}");
}

#[test]
fn bad_dbn_settings_are_refused_before_anything_is_written() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    for (set, want) in [
        ("layers=0,5", "layer sizes"),
        ("layers=a", "layer sizes"),
        ("layers=12,6 --set dim=99", "code size"),
        ("layers=12,6 --set visible=maybe", "sample or mean"),
        ("layers=12,6 --set momentum=1", "must lie in"),
    ] {
        let set: Vec<&str> = set.split(' ').collect();
        let dir = root.join("refused");
        let out = rosetta(
            root,
            &[
                "train",
                "--workspace",
                wsf.to_str().unwrap(),
                "--model",
                "dbn-cca",
                "--device",
                "cpu",
                "--session",
                dir.to_str().unwrap(),
                "--set",
            ]
            .into_iter()
            .chain(set.iter().copied())
            .collect::<Vec<_>>(),
        );
        assert!(!out.status.success(), "{set:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{set:?}: {err}");
        assert!(!dir.exists(), "{set:?}: a session was written");
    }
}
