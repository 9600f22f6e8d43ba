//! Issue 55: errors that say what to fix and commands that leave nothing
//! behind — a data file missing from a workspace, a mistyped local weights
//! folder, `setup --encoder`'s download folder, the qrels of a derived
//! ad-hoc task, a baseline session's run exported, `bm25 --run`'s default place.

use crate::common::{rosetta_in as rosetta, tiny_workspace};

fn fails(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

/// A data file the workspace names that does not exist: the error names
/// the workspace file and the line naming it, the nearest file there and
/// the fix, before any job starts.
#[test]
fn a_missing_data_file_names_the_workspace_line() {
    let ws = tiny_workspace();
    let toml = ws.path().join("workspace.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let line = text.lines().position(|l| l.starts_with("valid =")).unwrap() + 1;
    std::fs::write(&toml, text.replace("\"valid.es\"", "\"./vaild.es\"")).unwrap();
    let root = tempfile::tempdir().unwrap();
    let session = root.path().join("s");
    let err = fails(&rosetta(
        root.path(),
        &[
            "train",
            "--workspace",
            toml.to_str().unwrap(),
            "--model",
            "cca",
            "--session",
            session.to_str().unwrap(),
        ],
    ));
    assert!(
        err.contains(&format!("{}:{line}:", toml.display())),
        "no workspace line {line}: {err}"
    );
    assert!(
        err.contains("vaild.es does not exist")
            && err.contains("did you mean")
            && err.contains("valid.es?")
            && err.contains("correct the path"),
        "{err}"
    );
    assert!(!session.join("checkpoints").exists());
}

/// A mistyped local weights folder (`models/multilingual-e5-smal` beside a
/// `models/` folder, or `./e5`) is "no such folder" with the nearest folder,
/// never a hub id looked up on the network.
#[test]
fn a_mistyped_weights_folder_is_no_such_folder() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("models/multilingual-e5-small")).unwrap();
    for (weights, near) in [
        (
            "models/multilingual-e5-smal",
            Some("did you mean weights=models/multilingual-e5-small?"),
        ),
        ("./e5-enhi", None),
    ] {
        let set = format!("weights={weights}");
        let err = fails(&rosetta(
            root.path(),
            &[
                "train",
                "--workspace",
                ws.path().join("workspace.toml").to_str().unwrap(),
                "--model",
                "encoder",
                "--device",
                "cpu",
                "--set",
                &set,
                "--session",
                root.path().join("s").to_str().unwrap(),
            ],
        ));
        assert!(
            err.contains(&format!("{set}: no such folder")) && !err.contains("download"),
            "{err}"
        );
        if let Some(near) = near {
            assert!(err.contains(near), "{err}");
        }
    }
}

/// `setup --encoder` whose download fails (a `python3` that fails, on a
/// PATH of its own: no network) leaves no `models/<name>.download/` behind,
/// and keeps a download folder that was there before with its files.
#[test]
fn setup_encoder_leaves_no_download_folder() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    // a Bible workspace already set up: `setup` goes straight to the encoder
    let ws = root.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    for f in ["kjv.en", "sparv.es", "verses.txt"] {
        std::fs::write(ws.join(f), "x\n").unwrap();
    }
    std::fs::write(ws.join("workspace.toml"), "name = \"bible\"\n").unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let python = bin.join("python3");
    std::fs::write(&python, "#!/bin/sh\necho 'no network here' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let setup = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
            .current_dir(root.path())
            .args(["setup", "--dir", "ws", "--encoder"])
            .env("PATH", &bin)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let err = fails(&setup());
    assert!(err.contains("no network here"), "{err}");
    let models = root.path().join("models");
    let left: Vec<_> = std::fs::read_dir(&models)
        .map(|rd| rd.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind in models/: {left:?}");
    // a download folder of the user's is kept, with what it held
    let cache = models.join("multilingual-e5-small.download");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("mine.txt"), "keep").unwrap();
    fails(&setup());
    assert_eq!(
        std::fs::read_to_string(cache.join("mine.txt")).unwrap(),
        "keep"
    );
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1);
}

/// `export --write run` on a workspace whose ad-hoc task is derived from the
/// parallel test split writes the task's qrels beside the run, judging
/// exactly the run's queries.
#[test]
fn export_writes_the_qrels_of_a_derived_task() {
    let ws = tiny_workspace();
    let toml = ws.path().join("workspace.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let start = text.find("[adhoc]").unwrap();
    let end = text.find("[dictionary]").unwrap();
    std::fs::write(&toml, format!("{}{}", &text[..start], &text[end..])).unwrap();
    let root = tempfile::tempdir().unwrap();
    let session = root.path().join("cca");
    crate::common::train(root.path(), &toml, "cca", &session, &["--dim", "4"]);
    let out = root.path().join("out");
    let printed = crate::common::ok(&crate::common::export(root.path(), &session, &out, "run"));
    let qrels = out.join("adhoc.run.qrels");
    assert!(printed.contains(qrels.to_str().unwrap()), "{printed}");
    let qids = |p: &std::path::Path| -> std::collections::BTreeSet<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| l.split_whitespace().next().unwrap().to_string())
            .collect()
    };
    let judged = qids(&qrels);
    assert_eq!(judged.len(), 6, "one query per test pair: {judged:?}");
    assert_eq!(judged, qids(&out.join("adhoc.run")));
    // a declared task's qrels are a file of the workspace: none written
    let declared = tempfile::tempdir().unwrap();
    let s2 = declared.path().join("cca");
    let tiny = tiny_workspace();
    crate::common::train(
        declared.path(),
        &tiny.path().join("workspace.toml"),
        "cca",
        &s2,
        &["--dim", "4"],
    );
    let out2 = declared.path().join("out");
    crate::common::ok(&crate::common::export(declared.path(), &s2, &out2, "run"));
    assert!(out2.join("adhoc.run").is_file() && !out2.join("adhoc.run.qrels").exists());
}

/// A lexical baseline's session exports its ad-hoc run (`--write run`, the
/// run `eval --run` writes, with a derived task's qrels beside it); asked
/// for vectors or embeddings (the default) it is refused, naming `--write
/// run`, with nothing written.
#[test]
fn a_baseline_session_exports_its_run_and_refuses_vectors() {
    let ws = tiny_workspace();
    let toml = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let session = root.path().join("bm25");
    crate::common::train(root.path(), &toml, "bm25-dict", &session, &[]);
    let out = root.path().join("out");
    let printed = crate::common::ok(&crate::common::export(root.path(), &session, &out, "run"));
    let run = out.join("adhoc.run");
    assert!(printed.contains(run.to_str().unwrap()), "{printed}");
    let evald = root.path().join("eval.run");
    crate::common::ok(&rosetta(
        root.path(),
        &[
            "eval",
            "--session",
            session.to_str().unwrap(),
            "--task",
            "adhoc",
            "--run",
            evald.to_str().unwrap(),
        ],
    ));
    let body = std::fs::read_to_string(&run).unwrap();
    assert!(!body.is_empty());
    assert_eq!(body, std::fs::read_to_string(&evald).unwrap());
    let other = root.path().join("vectors");
    let e = fails(&crate::common::export(
        root.path(),
        &session,
        &other,
        "vectors,embeddings",
    ));
    assert!(
        e.contains("lexical baseline") && e.contains("--write run"),
        "{e}"
    );
    assert!(!other.exists());
}

/// `bm25 --run` alone writes its run under `sessions/runs/`, never into
/// the current folder; `--run FILE` writes FILE; no `--run`, no file.
#[test]
fn bm25_run_goes_to_the_sessions_folder_by_default() {
    let ws = tiny_workspace();
    let toml = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let bm25 = |more: &[&str]| {
        let mut args = vec!["bm25", "--workspace", toml.to_str().unwrap(), "--json"];
        args.extend_from_slice(more);
        let v: serde_json::Value =
            serde_json::from_str(crate::common::ok(&rosetta(root.path(), &args)).trim()).unwrap();
        v
    };
    let v = bm25(&[]);
    assert!(v["run"].is_null(), "{v}");
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    let v = bm25(&["--translate", "dict", "--run"]);
    let want = std::path::Path::new("sessions/runs/tiny-en-es.bm25-dict.run");
    assert_eq!(v["run"].as_str(), Some(want.to_str().unwrap()), "{v}");
    assert!(root.path().join(want).is_file());
    let names: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("sessions")]);
    bm25(&["--run", "here.run"]);
    assert!(root.path().join("here.run").is_file());
}
