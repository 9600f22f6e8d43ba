//! Seed 004's fusion in `rosetta eval --fuse`: the model's score mixes the
//! source query and its translation encoded by the model's target side
//! (Eq. 1, `--beta`), fused with BM25 over the translated (and optionally
//! expanded) query (Eq. 2), on the tiny English→Spanish workspace.

use serde_json::Value;

use crate::common;
use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(ok(out).trim()).unwrap()
}

/// A small S2Net session on the tiny workspace: the workspace (kept alive),
/// the folder the session is in and the session.
fn s2net_session() -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let s2 = root.path().join("s2net");
    train(
        root.path(),
        &wsf,
        "s2net",
        &s2,
        &["--dim", "4", "--epochs", "2"],
    );
    (ws, root, s2)
}

/// `rosetta eval --session S2 --task adhoc --json` with `more`: its
/// `adhoc_fused` report.
fn fused(root: &tempfile::TempDir, s2: &std::path::Path, more: &[&str]) -> Value {
    let mut args = vec![
        "eval",
        "--session",
        s2.to_str().unwrap(),
        "--task",
        "adhoc",
        "--json",
    ];
    args.extend_from_slice(more);
    json(&rosetta(root.path(), &args))["adhoc_fused"].clone()
}

#[test]
fn dictionary_translations_become_target_text() {
    use rosetta::corpus::Workspace;
    use rosetta::index::adhoc::{translate_texts, Translation};
    let ws = tiny_workspace();
    let w = Workspace::load(&ws.path().join("workspace.toml")).unwrap();
    // every translation of each word as the dictionary writes it (fish has
    // two); `the` and words it lacks are left out
    let t = translate_texts(&w, &["The cat eats fish", "zebra"], Translation::Dict).unwrap();
    assert_eq!(t, ["gato comer pescado pez", ""]);
    assert!(translate_texts(&w, &["cat"], Translation::None).is_err());
}

#[test]
fn beta_auto_tunes_beta_and_lambda_and_beta_one_is_the_old_fusion() {
    let (_ws, root, s2) = s2net_session();
    let eval = |more: &[&str]| fused(&root, &s2, more);
    let old = eval(&["--fuse", "bm25:auto"]);
    assert!(old.get("beta").is_none(), "{old}");
    assert_eq!(old["tuning"]["tried"].as_array().unwrap().len(), 11);
    assert_eq!(old["bm25_run"], "bm25-dict");

    let f = eval(&["--fuse", "bm25:auto", "--beta", "auto"]);
    let t = &f["tuning"];
    let pairs = t["tried_pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 11 * 21, "{t}");
    let mut betas: Vec<f64> = pairs.iter().map(|p| p[0].as_f64().unwrap()).collect();
    let mut lambdas: Vec<f64> = pairs.iter().map(|p| p[1].as_f64().unwrap()).collect();
    for v in [&mut betas, &mut lambdas] {
        v.sort_by(f64::total_cmp);
        v.dedup();
    }
    assert_eq!(betas.len(), 11);
    assert_eq!(lambdas.len(), 21);
    for (i, b) in betas.iter().enumerate() {
        assert!((b - i as f64 * 0.1).abs() < 1e-9, "{betas:?}");
    }
    for (i, l) in lambdas.iter().enumerate() {
        assert!((l - i as f64 * 0.05).abs() < 1e-9, "{lambdas:?}");
    }
    // the choice: the best pair of the grid, reported with its figures
    let (beta, lambda) = (t["beta"].as_f64().unwrap(), t["lambda"].as_f64().unwrap());
    let best = pairs
        .iter()
        .map(|p| p[2].as_f64().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(t["score"].as_f64().unwrap(), best);
    assert_eq!(f["beta"].as_f64().unwrap(), beta);
    assert_eq!(f["fusion"], format!("bm25:{lambda}"));
    assert_eq!(f["query_translation"], "dict");
    assert_eq!(f["fused_tuning"]["MAP"].as_f64().unwrap(), best);
    for k in ["model", "model_mixed", "bm25", "fused"] {
        assert!(f[k]["MAP"].as_f64().is_some(), "{k}: {f}");
    }
    assert_eq!(f["queries"], old["queries"]);
    // at β = 1 the joint grid holds the old one: the same tuning figures
    let old_tried = old["tuning"]["tried"].as_array().unwrap();
    for p in pairs.iter().filter(|p| p[0] == 1.0) {
        if let Some(o) = old_tried.iter().find(|o| o[0] == p[1]) {
            assert_eq!(o[1], p[2], "λ={}", p[1]);
        }
    }

    // β = 1 is the old fusion, figure for figure
    let plain = eval(&["--fuse", "bm25:0.3"]);
    let one = eval(&["--fuse", "bm25:0.3", "--beta", "1"]);
    assert_eq!(one["fused"], plain["fused"]);
    assert_eq!(one["model_mixed"], plain["model"]);
    assert_eq!(one["beta"], 1.0);
    // a fixed β tunes λ alone, on the 0.05 grid
    let fixed = eval(&["--fuse", "bm25:auto", "--beta", "0.5"]);
    assert_eq!(fixed["beta"], 0.5);
    assert!(fixed["tuning"].get("beta").is_none());
    assert_eq!(fixed["tuning"]["tried"].as_array().unwrap().len(), 21);
    // the BM25 side expanded
    let bo1 = eval(&["--fuse", "bm25:0.3", "--fuse-expand", "bo1"]);
    assert_eq!(bo1["bm25_run"], "bm25-dict-bo1");
    let max = eval(&["--fuse", "bm25:0.3", "--fuse-norm", "max"]);
    assert_eq!(max["norm"], "max");

    // the held-out fused run and its BM25 partner, written for `compare`:
    // their figures are the report's
    let run = root.path().join("fused.run");
    let f = eval(&[
        "--fuse",
        "bm25:auto",
        "--beta",
        "auto",
        "--fuse-run",
        run.to_str().unwrap(),
    ]);
    let qrels = root.path().join("fused.run.qrels");
    let cmp = json(&rosetta(
        root.path(),
        &[
            "compare",
            &format!("{}.bm25", run.display()),
            run.to_str().unwrap(),
            "--qrels",
            qrels.to_str().unwrap(),
            "--json",
        ],
    ));
    let text = cmp.to_string();
    for (want, key) in [(&f["bm25"]["MAP"], 0), (&f["fused"]["MAP"], 1)] {
        let got = &cmp["systems"][key]["means"]["MAP"];
        assert!(
            (got.as_f64().unwrap() - want.as_f64().unwrap()).abs() < 1e-9,
            "{key}: {got} vs {want} in {text}"
        );
    }

    // β needs linear fusion and --fuse
    let bad = |args: &[&str]| {
        let mut a = vec!["eval", "--session", s2.to_str().unwrap(), "--task", "adhoc"];
        a.extend_from_slice(args);
        let out = rosetta(root.path(), &a);
        assert!(!out.status.success(), "{args:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(bad(&["--fuse", "rrf", "--beta", "auto"]).contains("linear fusion"));
    assert!(bad(&["--beta", "auto"]).contains("--fuse"));
    assert!(bad(&["--fuse", "bm25:auto", "--beta", "2"]).contains("0 to 1"));
}

#[test]
fn fused_queries_through_apertium_when_installed() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let s2 = root.path().join("s2net");
    train(
        root.path(),
        &wsf,
        "s2net",
        &s2,
        &["--dim", "4", "--epochs", "1"],
    );
    let out = rosetta(
        root.path(),
        &[
            "eval",
            "--session",
            s2.to_str().unwrap(),
            "--task",
            "adhoc",
            "--fuse",
            "bm25:auto",
            "--beta",
            "auto",
            "--fuse-translate",
            "mt",
            "--json",
        ],
    );
    match rosetta::index::translate::apertium_pairs() {
        Ok(p) if p.iter().any(|p| p == "eng-spa") => {
            let f = &json(&out)["adhoc_fused"];
            assert_eq!(f["bm25_run"], "bm25-mt");
            assert_eq!(f["query_translation"], "mt");
        }
        _ => {
            assert!(!out.status.success());
            assert!(String::from_utf8_lossy(&out.stderr).contains("apertium"));
        }
    }
}

/// `--fuse auto` tries six signal sets (BM25 over the translated queries as
/// they are, with Bo1, with RM3; each without and with the model's
/// translated-query run) and reports the one with the best tuning-half MAP:
/// the same figures as asking for that set by its flags.
#[test]
fn fuse_auto_chooses_the_signal_set_on_the_tuning_half() {
    let (_ws, root, s2) = s2net_session();
    let eval = |more: &[&str]| fused(&root, &s2, more);
    let f = eval(&["--fuse", "auto"]);
    let tried = f["auto"].as_array().unwrap();
    let sets: Vec<(String, bool)> = tried
        .iter()
        .map(|c| {
            (
                c["bm25_run"].as_str().unwrap().to_string(),
                c["beta"] == true,
            )
        })
        .collect();
    let want: Vec<(String, bool)> = ["bm25-dict", "bm25-dict-bo1", "bm25-dict-rm3"]
        .iter()
        .flat_map(|r| [(r.to_string(), false), (r.to_string(), true)])
        .collect();
    assert_eq!(sets, want);
    let chosen: Vec<&serde_json::Value> = tried.iter().filter(|c| c["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1, "{f}");
    let best = tried
        .iter()
        .map(|c| c["tuning_map"].as_f64().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(chosen[0]["tuning_map"].as_f64().unwrap(), best);
    assert_eq!(f["fused_tuning"]["MAP"].as_f64().unwrap(), best);
    // the chosen set asked for by its flags gives the same figures
    let mut flags = vec!["--fuse", "bm25:auto"];
    let run = chosen[0]["bm25_run"].as_str().unwrap();
    if let Some(e) = run.strip_prefix("bm25-dict-") {
        flags.extend(["--fuse-expand", e]);
    }
    if chosen[0]["beta"] == true {
        flags.extend(["--beta", "auto"]);
    }
    let same = eval(&flags);
    for k in ["fused", "model", "bm25", "fusion", "beta"] {
        assert_eq!(f[k], same[k], "{k}");
    }
    // auto chooses β and the expansion itself
    let out = rosetta(
        root.path(),
        &[
            "eval",
            "--session",
            s2.to_str().unwrap(),
            "--fuse",
            "auto",
            "--beta",
            "auto",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fuse auto chooses"));
}
