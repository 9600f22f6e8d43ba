//! Approximate search through a session's HNSW graph: `rosetta search
//! --approx` builds it once and saves it in the session, later searches use
//! it (and say so), `--exact` bypasses it, a stale graph is never used and a
//! damaged one is an error naming its file.

use crate::common;

use std::path::Path;

use serde_json::Value;

use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

fn search(cwd: &Path, more: &[&str]) -> Value {
    let mut args = vec!["search", "--session", "s", "--query", "the dog", "--json"];
    args.extend_from_slice(more);
    serde_json::from_str(&ok(&rosetta(cwd, &args))).unwrap()
}

fn docnos(v: &Value) -> Vec<String> {
    v["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|h| h["docno"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn hnsw_graph_is_built_once_and_used_until_the_model_changes() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    train(root, &wsf, "cl-lsi", "s", &["--dim", "4"]);
    let graph = root.join("s/hnsw.graph");

    let exact = search(root, &["--k", "5"]);
    assert!(exact.get("approximate").is_none(), "{exact}");
    assert!(!graph.exists());

    // built and saved; on a collection this small the graph finds the
    // exact top 5
    let approx = search(root, &["--k", "5", "--approx"]);
    let how = approx["approximate"]
        .as_str()
        .unwrap_or_else(|| panic!("{approx}"));
    assert!(how.contains("HNSW") && how.contains("M 16"), "{how}");
    assert!(graph.exists() && root.join("s/hnsw.graph.json").exists());
    assert_eq!(docnos(&approx), docnos(&exact));

    // the saved graph is used by default, not with --exact
    let again = search(root, &["--k", "5"]);
    assert!(again["approximate"].is_string(), "{again}");
    assert_eq!(docnos(&again), docnos(&exact));
    assert!(search(root, &["--k", "5", "--exact"])
        .get("approximate")
        .is_none());

    // the plain output says so too
    let text = ok(&rosetta(
        root,
        &["search", "--session", "s", "--query", "the dog"],
    ));
    assert!(text.contains("approximate: rosetta-hnsw"), "{text}");

    // another model (other dimension) has other embeddings: a graph built
    // for s is stale in its session and is not used
    train(root, &wsf, "cl-lsi", "t", &["--dim", "3"]);
    for f in ["hnsw.graph", "hnsw.graph.json"] {
        std::fs::copy(root.join("s").join(f), root.join("t").join(f)).unwrap();
    }
    let other: Value = serde_json::from_str(&ok(&rosetta(
        root,
        &["search", "--session", "t", "--query", "the dog", "--json"],
    )))
    .unwrap();
    assert!(other.get("approximate").is_none(), "{other}");

    // a damaged graph that matches its description is an error naming it
    search(root, &["--approx"]);
    std::fs::write(&graph, b"not a graph").unwrap();
    let out = rosetta(root, &["search", "--session", "s", "--query", "the dog"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hnsw.graph"), "{err}");
}

#[test]
fn invalid_approximate_requests_are_refused() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    train(root, &wsf, "cl-lsi", "s", &["--dim", "4"]);
    for args in [
        // settings of a graph without asking for one
        &["--ef-search", "8"][..],
        &["--approx", "--exact"],
        &["--approx", "--hnsw-m", "1"],
        &["--approx", "--ef-search", "0"],
    ] {
        let mut all = vec!["search", "--session", "s", "--query", "the dog"];
        all.extend_from_slice(args);
        let out = rosetta(root, &all);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(
            !root.join("s/hnsw.graph").exists(),
            "{args:?} wrote a graph"
        );
    }
}
