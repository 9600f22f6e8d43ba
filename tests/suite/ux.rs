//! Issue 55: errors that say what to fix and commands that leave nothing
//! behind — a data file missing from a workspace, a mistyped local weights
//! folder, `setup --encoder`'s download folder, the qrels of a derived
//! ad-hoc task, `bm25 --run`'s default place.

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
