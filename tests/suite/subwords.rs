//! Subword units (`[text] units = "bpe" | "unigram" | "char-ngrams"`) through
//! the CLI on the tiny English→Spanish fixture workspace: a dense model and
//! the BM25 baselines train and evaluate, the learnt unit model is saved in
//! the session and used when the session is loaded again, and neighbours show
//! units readably.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common;
use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(ok(out).trim()).unwrap()
}

/// The tiny workspace with `units` (and no stemming) in its `[text]`.
fn workspace_with(dir: &Path, units: &str, extra: &str) -> PathBuf {
    let wsf = dir.join("workspace.toml");
    let text = std::fs::read_to_string(&wsf).unwrap();
    assert!(text.contains("stem = true"));
    let text = text.replace(
        "stem = true",
        &format!("stem = false\nunits = \"{units}\"\n{extra}"),
    );
    std::fs::write(&wsf, text).unwrap();
    wsf
}

fn eval(root: &Path, session: &Path) -> Value {
    json(&rosetta(
        root,
        &[
            "eval",
            "--session",
            session.to_str().unwrap(),
            "--task",
            "all",
            "--json",
        ],
    ))
}

fn search(root: &Path, session: &Path, query: &str) -> Vec<String> {
    let s = json(&rosetta(
        root,
        &[
            "search",
            "--session",
            session.to_str().unwrap(),
            "--query",
            query,
            "--k",
            "10",
            "--json",
        ],
    ));
    s["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["docno"].as_str().unwrap().to_string())
        .collect()
}

fn mrr(e: &Value, task: &str) -> f64 {
    e[task]["MRR"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {task} MRR in {e}"))
}

/// Every term of a neighbours answer reads without the internal `<`/`>` marks.
fn readable_neighbours(root: &Path, session: &Path, word: &str) -> Value {
    let args = [
        "neighbours",
        "--session",
        session.to_str().unwrap(),
        "--term",
        word,
        "--k",
        "5",
    ];
    let n = json(&rosetta(root, &[&args[..], &["--json"]].concat()));
    let text = n.to_string();
    // the JSON keeps the units as indexed (`term`, `translations`); what is
    // shown (`surface`, the text output) reads without marks
    let shown = ok(&rosetta(root, &args));
    assert!(!shown.contains('<') && !shown.contains('>'), "{shown}");
    for list in ["cross", "own"] {
        let terms = n[list].as_array().unwrap_or_else(|| panic!("{n}"));
        assert!(!terms.is_empty(), "{n}");
        for t in terms {
            let t = t["surface"].as_str().unwrap();
            assert!(!t.contains('<') && !t.contains('>'), "{t} in {text}");
        }
    }
    n
}

#[test]
fn bpe_workspace_trains_evaluates_and_reloads_its_units() {
    let ws = tiny_workspace();
    // few pieces, so that words are cut
    let wsf = workspace_with(ws.path(), "bpe", "subword_vocab = 60");
    let root = tempfile::tempdir().unwrap();
    let cca = root.path().join("cca");
    let dict = root.path().join("dict");
    train(root.path(), &wsf, "cca", &cca, &["--dim", "8"]);
    train(root.path(), &wsf, "bm25-dict", &dict, &[]);

    // the learnt models are saved next to the vocabularies, and the
    // vocabularies hold marked units
    for f in ["units.source.json", "units.target.json"] {
        assert!(cca.join(f).is_file(), "{f} missing from the session");
    }
    let vocab = std::fs::read_to_string(cca.join("vocab.target.json")).unwrap();
    assert!(vocab.contains('<') && vocab.contains('>'), "{vocab}");

    // both evaluate well above chance (about 6 test pairs, 20 documents)
    let e = eval(root.path(), &cca);
    assert!(mrr(&e, "sentence") > 0.5, "{e}");
    assert!(mrr(&e, "adhoc") > 0.3, "{e}");
    let d = eval(root.path(), &dict);
    assert!(mrr(&d, "adhoc") > 0.3, "{d}");
    assert_eq!(
        search(root.path(), &dict, "dog drinks water")[0],
        "d01",
        "BM25 over dictionary translations cut into units"
    );

    // per-term contributions name units readably
    let s = json(&rosetta(
        root.path(),
        &[
            "search",
            "--session",
            cca.to_str().unwrap(),
            "--query",
            "the dog drinks water",
            "--json",
        ],
    ));
    let contributions = s["hits"][0]["contributions"].to_string();
    assert!(contributions.len() > 2, "{s}");
    assert!(
        !contributions.contains('<') && !contributions.contains('>'),
        "{contributions}"
    );

    // reload: the same ranking when the workspace's cache (and with it the
    // workspace's own unit models) is gone and learnt again
    let before = search(root.path(), &cca, "the dog drinks water");
    assert!(!before.is_empty());
    std::fs::remove_dir_all(ws.path().join(".rosetta-cache")).unwrap();
    assert_eq!(search(root.path(), &cca, "the dog drinks water"), before);
    // and the session's own model is what is read: without it, a clear error
    std::fs::rename(cca.join("units.source.json"), root.path().join("u.json")).unwrap();
    let out = rosetta(
        root.path(),
        &[
            "search",
            "--session",
            cca.to_str().unwrap(),
            "--query",
            "dog",
            "--json",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("units.source.json"), "{err}");
    std::fs::rename(root.path().join("u.json"), cca.join("units.source.json")).unwrap();

    // neighbours: units shown readably; a word cut into several units is
    // looked up by the sum of its units
    readable_neighbours(root.path(), &cca, "water");
    readable_neighbours(root.path(), &cca, "waterdog");
}

#[test]
fn char_ngram_workspace_trains_and_evaluates() {
    let ws = tiny_workspace();
    let wsf = workspace_with(ws.path(), "char-ngrams", "ngram_max = 4");
    let root = tempfile::tempdir().unwrap();
    let lsi = root.path().join("lsi");
    let bm = root.path().join("bm25");
    train(root.path(), &wsf, "cl-lsi", &lsi, &["--dim", "8"]);
    train(root.path(), &wsf, "bm25", &bm, &[]);
    // no learnt model to save
    assert!(!lsi.join("units.source.json").exists());
    let vocab = std::fs::read_to_string(lsi.join("vocab.source.json")).unwrap();
    assert!(
        vocab.contains("\"<wat\"") && vocab.contains("\"<water>\""),
        "{vocab}"
    );
    assert!(
        !vocab.contains("\"<wate\""),
        "n = 5 is beyond ngram_max: {vocab}"
    );

    let e = eval(root.path(), &lsi);
    assert!(mrr(&e, "sentence") > 0.5, "{e}");
    let b = eval(root.path(), &bm);
    assert!(b["adhoc"]["MRR"].as_f64().is_some(), "{b}");

    let n = readable_neighbours(root.path(), &lsi, "water");
    assert!(
        n["own"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["surface"].as_str().unwrap().contains('…')),
        "{n}"
    );
    // inspect works on unit workspaces
    let i = json(&rosetta(
        root.path(),
        &[
            "data",
            "inspect",
            "--workspace",
            wsf.to_str().unwrap(),
            "--json",
        ],
    ));
    assert!(i.to_string().contains("oov"), "{i}");
}

/// Every trainable model trains and evaluates on a subword workspace
/// (the units reach them only as vocabulary ids, as words do).
#[test]
fn every_model_trains_and_evaluates_on_subword_units() {
    for (units, extra) in [
        ("bpe", "subword_vocab = 60"),
        ("unigram", "subword_vocab = 60"),
    ] {
        let ws = tiny_workspace();
        let wsf = workspace_with(ws.path(), units, extra);
        for (model, more) in [
            ("cl-lsi", vec!["--dim", "4"]),
            ("opca", vec!["--dim", "4"]),
            ("cca", vec!["--dim", "4"]),
            ("s2net", vec!["--dim", "4", "--epochs", "2"]),
            (
                "xcnn",
                vec!["--dim", "4", "--epochs", "1", "--set", "mono_epochs=1"],
            ),
            ("bae", vec!["--dim", "4", "--epochs", "1"]),
            ("bm25", vec![]),
            ("bm25-dict", vec![]),
        ] {
            let dir = ws.path().join(format!("s-{model}"));
            train(ws.path(), &wsf, model, &dir, &more);
            let e = eval(ws.path(), &dir);
            let adhoc = e["adhoc"]["MAP"].as_f64();
            assert!(adhoc.is_some_and(f64::is_finite), "{units} {model}: {e}");
        }
    }
}
