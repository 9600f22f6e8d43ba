//! BM25 baselines as sessions (`rosetta train --model bm25|bm25-dict`), and
//! fusion of a trained model with BM25 (`rosetta search --fuse`, `rosetta
//! eval --fuse`), on the tiny English→Spanish fixture workspace.

use std::path::Path;

use serde_json::Value;

use crate::common;
use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

fn err(out: &std::process::Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(ok(out).trim()).unwrap()
}

#[test]
fn bm25_dict_session_is_a_row_like_any_other() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let dict = root.path().join("sessions/dict");
    let none = root.path().join("sessions/none");
    train(root.path(), &wsf, "bm25-dict", &dict, &["--set", "k1=1.0"]);
    train(root.path(), &wsf, "bm25", &none, &[]);

    // a finished session: status, config with every setting, one valid record
    let st: Value =
        serde_json::from_str(&std::fs::read_to_string(dict.join("status.json")).unwrap()).unwrap();
    assert_eq!(st["state"], "done");
    assert!(st["best_mrr"].as_f64().unwrap() > 0.0);
    let cfg = std::fs::read_to_string(dict.join("config.toml")).unwrap();
    for key in [
        "k1 = \"1.0\"",
        "b = \"0.75\"",
        "keep_untranslated = \"false\"",
    ] {
        assert!(cfg.contains(key), "{key} missing from\n{cfg}");
    }
    let metrics = std::fs::read_to_string(dict.join("metrics.jsonl")).unwrap();
    assert!(metrics.contains("\"kind\":\"valid\"") && metrics.contains("adhoc_MAP"));
    let jobs = json(&rosetta(root.path(), &["jobs", "--json"]));
    let rows = jobs.to_string();
    assert!(
        rows.contains("bm25-dict") && rows.contains("done"),
        "{rows}"
    );

    // eval: the ad-hoc figures equal `rosetta bm25 --translate dict` with the same k1
    let e = json(&rosetta(
        root.path(),
        &["eval", "--session", dict.to_str().unwrap(), "--json"],
    ));
    let run = root.path().join("bm25.run");
    let b = json(&rosetta(
        root.path(),
        &[
            "bm25",
            "--workspace",
            wsf.to_str().unwrap(),
            "--translate",
            "dict",
            "--k1",
            "1.0",
            "--run",
            run.to_str().unwrap(),
            "--json",
        ],
    ));
    assert_eq!(e["adhoc"]["MAP"], b["metrics"]["MAP"]);
    assert_eq!(e["adhoc"]["MRR"], b["metrics"]["MRR"]);
    // dictionary translation beats none on sentence retrieval
    let n = json(&rosetta(
        root.path(),
        &["eval", "--session", none.to_str().unwrap(), "--json"],
    ));
    let (d_mrr, n_mrr) = (
        e["sentence"]["MRR"].as_f64().unwrap(),
        n["sentence"]["MRR"].as_f64().unwrap(),
    );
    assert!(d_mrr > n_mrr, "dict {d_mrr} vs none {n_mrr}");

    // search ranks the right document; no term space for BLI or neighbours
    let s = json(&rosetta(
        root.path(),
        &[
            "search",
            "--session",
            dict.to_str().unwrap(),
            "--query",
            "dog drinks water",
            "--json",
        ],
    ));
    assert_eq!(s["hits"][0]["docno"], "d01", "{s}");
    assert_eq!(s["judged"]["qid"], "q1");
    assert_eq!(s["judged"]["rr"], 1.0);
    let e = err(&rosetta(
        root.path(),
        &["eval", "--session", dict.to_str().unwrap(), "--task", "bli"],
    ));
    assert!(e.contains("lexicon induction does not apply"), "{e}");
    let e = err(&rosetta(
        root.path(),
        &[
            "neighbours",
            "--session",
            dict.to_str().unwrap(),
            "--term",
            "dog",
        ],
    ));
    assert!(
        e.contains("lexical baseline") && e.contains("no embedding space"),
        "{e}"
    );
    let e = err(&rosetta(
        root.path(),
        &[
            "search",
            "--session",
            dict.to_str().unwrap(),
            "--query",
            "dog",
            "--fuse",
            "rrf",
        ],
    ));
    assert!(e.contains("BM25 baseline"), "{e}");
    // settings of another baseline are refused by name
    let bad = root.path().join("sessions/bad");
    let e = err(&rosetta(
        root.path(),
        &[
            "train",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            "bm25-mt",
            "--set",
            "keep_untranslated=true",
            "--session",
            bad.to_str().unwrap(),
        ],
    ));
    assert!(e.contains("keep_untranslated"), "{e}");
}

/// A lexical baseline runs on the CPU only: `--device cuda` is refused in
/// one line naming the model, before a session folder is written (it was
/// accepted and ran on the CPU where a GPU answered).
#[test]
fn a_lexical_baseline_refuses_a_gpu_before_writing_anything() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sessions/gpu");
    for device in ["cuda", "cuda:1"] {
        let e = err(&rosetta(
            root.path(),
            &[
                "train",
                "--workspace",
                wsf.to_str().unwrap(),
                "--model",
                "bm25",
                "--device",
                device,
                "--session",
                dir.to_str().unwrap(),
            ],
        ));
        assert!(
            e.contains("--device cuda:")
                && e.contains(": bm25 is a lexical baseline")
                && e.contains("CPU only"),
            "{e}"
        );
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(!dir.exists());
    }
}

#[test]
fn a_trained_model_fuses_with_bm25_in_search_and_eval() {
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
    let search = |fuse: &str| {
        json(&rosetta(
            root.path(),
            &[
                "search",
                "--session",
                s2.to_str().unwrap(),
                "--query",
                "dog drinks water",
                "--k",
                "8",
                "--fuse",
                fuse,
                "--json",
            ],
        ))
    };
    // λ = 1: BM25 over the dictionary translation decides alone
    let bm = search("bm25:1");
    assert_eq!(bm["fusion"], "bm25:1");
    assert_eq!(bm["hits"][0]["docno"], "d01", "{bm}");
    assert_eq!(bm["hits"][0]["score"], 1.0);
    let rrf = search("rrf:60");
    let top = rrf["hits"][0]["score"].as_f64().unwrap();
    assert!(top > 1.0 / 61.0 && top <= 2.0 / 61.0, "{rrf}");
    // the model alone lists every document with cosine scores
    let m = search("none");
    assert_eq!(m["hits"].as_array().unwrap().len(), 8);
    let e = err(&rosetta(
        root.path(),
        &[
            "search",
            "--session",
            s2.to_str().unwrap(),
            "--query",
            "dog",
            "--fuse",
            "bm25:1.5",
        ],
    ));
    assert!(e.contains("outside 0..1"), "{e}");

    // eval --fuse: λ chosen on half the judged queries, scored on the other
    let e = json(&rosetta(
        root.path(),
        &[
            "eval",
            "--session",
            s2.to_str().unwrap(),
            "--task",
            "adhoc",
            "--fuse",
            "bm25:auto",
            "--json",
        ],
    ));
    let f = &e["adhoc_fused"];
    let judged = e["adhoc"]["queries"].as_u64().unwrap();
    assert_eq!(
        f["queries"].as_u64().unwrap() + f["tuning"]["queries"].as_u64().unwrap(),
        judged,
        "{f}"
    );
    assert_eq!(f["tuning"]["tried"].as_array().unwrap().len(), 11);
    for k in ["model", "bm25", "fused"] {
        assert!(f[k]["MAP"].as_f64().is_some(), "{k}: {f}");
    }
    let e = err(&rosetta(
        root.path(),
        &[
            "eval",
            "--session",
            s2.to_str().unwrap(),
            "--task",
            "sentence",
            "--fuse",
            "rrf",
        ],
    ));
    assert!(e.contains("--fuse applies to the ad-hoc task"), "{e}");
}

#[test]
fn the_workbench_engine_reloads_a_session_whose_model_changed() {
    use rosetta::index::Fusion;
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    train(
        root.path(),
        &wsf,
        "s2net",
        &a,
        &["--dim", "4", "--epochs", "1"],
    );
    train(
        root.path(),
        &wsf,
        "s2net",
        &b,
        &["--dim", "4", "--epochs", "1", "--seed", "7"],
    );
    let engine = rosetta::session::Workbench::default();
    let scores = |e: &rosetta::session::Workbench| -> Vec<f64> {
        e.search(&a, "dog drinks water", 8, Fusion::Model)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.score)
            .collect()
    };
    let before = scores(&engine);
    assert_eq!(scores(&engine), before, "a cached session answers the same");
    // the job writes a new best model (here: another seed's), a second later
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let best = "checkpoints/best.safetensors";
    let bytes = std::fs::read(b.join(best)).unwrap();
    std::fs::write(a.join(best), bytes).unwrap();
    assert_ne!(scores(&engine), before, "the new model was not loaded");
}

/// The engine's table of settings per model (used by the workbench's form)
/// is what each model really reads: every model trains one short job on the
/// tiny workspace and its session records the settings it read.
#[test]
fn model_settings_table_matches_what_each_model_reads() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    for name in rosetta::models::registry::names() {
        let dir = root.path().join(name);
        let mut args: Vec<String> = [
            "train",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            name,
            "--session",
            dir.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec();
        for (key, value) in [("dim", "4"), ("epochs", "1")] {
            if rosetta::models::takes_setting(name, key) {
                args.extend(["--set".into(), format!("{key}={value}")]);
            }
        }
        let mut given_optional = Vec::new();
        if name == "encoder" {
            // a tiny pretrained encoder, written by the test
            let folder = root.path().join("tiny-encoder");
            common::encoder::tiny_encoder_folder(ws.path(), &folder, 1);
            args.extend(["--set".into(), format!("weights={}", folder.display())]);
            args.extend(["--set".into(), "train_max_len=32".into()]);
            given_optional.push("weights");
        }
        if name == "procrustes" {
            // the encoder session just trained gives it its vectors
            args.extend([
                "--set".into(),
                format!("vectors={}", root.path().join("encoder").display()),
            ]);
            given_optional.push("vectors");
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // bm25-mt may fail later without Apertium; its settings are recorded first
        let _ = rosetta(root.path(), &args);
        let cfg = rosetta::session::SessionConfig::read(&dir).unwrap();
        let mut read: Vec<&str> = cfg.params.keys().map(String::as_str).collect();
        let runner = rosetta::models::registry::RUNNER_SETTINGS;
        read.retain(|k| !runner.iter().any(|s| s.key == *k));
        let spec = rosetta::models::registry::spec(name).unwrap();
        let mut table: Vec<&str> = spec
            .settings
            .iter()
            .filter(|s| s.default.is_some()) // `init` is read only when given
            .map(|s| s.key)
            .chain(given_optional)
            .collect();
        read.sort_unstable();
        table.sort_unstable();
        assert_eq!(read, table, "{name}: settings read vs the registry");
        let trained = spec.trainer.is_some();
        for s in runner {
            let k = s.key;
            assert_eq!(
                cfg.params.contains_key(k),
                trained,
                "{name}: runner key {k}"
            );
        }
    }
}

/// `rosetta eval --test/--adhoc/--dictionary`: other data stands in for the
/// workspace's. Given the workspace's own files, the figures equal the
/// workspace evaluation; other files change them; flags for a task not run,
/// and missing files, are errors.
#[test]
fn eval_takes_other_test_data() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let s2 = root.path().join("s2net");
    let dict = root.path().join("dict");
    train(
        root.path(),
        &wsf,
        "s2net",
        &s2,
        &["--dim", "4", "--epochs", "2"],
    );
    train(root.path(), &wsf, "bm25-dict", &dict, &[]);
    let f = |name: &str| ws.path().join(name).to_str().unwrap().to_string();
    let eval = |session: &Path, more: &[&str]| {
        let mut args = vec!["eval", "--session", session.to_str().unwrap(), "--json"];
        args.extend_from_slice(more);
        rosetta(root.path(), &args)
    };
    for session in [&s2, &dict] {
        let own = json(&eval(session, &["--task", "sentence"]));
        let given = json(&eval(
            session,
            &["--task", "sentence", "--test", &f("test.en"), &f("test.es")],
        ));
        assert_eq!(
            own["sentence"]["MRR"], given["sentence"]["MRR"],
            "{session:?}"
        );
        assert_eq!(own["sentence"]["queries"], given["sentence"]["queries"]);
        let tsv = json(&eval(
            session,
            &["--task", "sentence", "--test", &f("pairs.tsv")],
        ));
        assert_ne!(
            tsv["sentence"]["queries"], own["sentence"]["queries"],
            "{tsv}"
        );
        let own = json(&eval(session, &["--task", "adhoc"]));
        let given = json(&eval(
            session,
            &[
                "--task",
                "adhoc",
                "--adhoc",
                &f("docs.es.tsv"),
                &f("queries.en.tsv"),
                &f("qrels.tsv"),
            ],
        ));
        assert_eq!(own["adhoc"]["MAP"], given["adhoc"]["MAP"], "{session:?}");
        assert_eq!(own["adhoc"]["queries"], given["adhoc"]["queries"]);
        // qrels naming queries the given topics lack: the file and query are named
        let e = err(&eval(
            session,
            &[
                "--task",
                "adhoc",
                "--adhoc",
                &f("docs.es.tsv"),
                &f("topics.en.txt"),
                &f("qrels.tsv"),
            ],
        ));
        assert!(e.contains("qrels.tsv") && e.contains("\"q3\""), "{e}");
    }
    let own = json(&eval(&s2, &["--task", "bli"]));
    let given = json(&eval(
        &s2,
        &["--task", "bli", "--dictionary", &f("eng-spa.tsv")],
    ));
    // the workspace's dictionary is scored on its test part (split recorded),
    // a file given is read whole: the two parts of the one together
    let split = &own["bli"]["split"];
    assert!(given["bli"].get("split").is_none(), "{given}");
    assert_eq!(
        split["train_words"].as_u64().unwrap() + split["test_words"].as_u64().unwrap(),
        given["bli"]["cosine"]["entries"].as_u64().unwrap(),
        "{own} {given}"
    );
    assert_eq!(
        own["bli"]["cosine"]["entries"], split["test_words"],
        "{own}"
    );
    // a data flag for a task not run does nothing: refused
    let e = err(&eval(&s2, &["--task", "adhoc", "--test", &f("pairs.tsv")]));
    assert!(e.contains("--test applies to --task sentence"), "{e}");
    let e = err(&eval(&dict, &["--dictionary", &f("eng-spa.tsv")]));
    assert!(e.contains("lexicon induction does not apply"), "{e}");
    // a missing file is named
    let e = err(&eval(
        &s2,
        &["--task", "sentence", "--test", &f("nope.en"), &f("test.es")],
    ));
    assert!(e.contains("nope.en"), "{e}");
}
