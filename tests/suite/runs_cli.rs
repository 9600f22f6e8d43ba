//! `rosetta jobs` telling runs apart (`--diff`, `--filter`, rename, tag,
//! note, show, delete) and `rosetta plot`'s series options, through the
//! real program on session folders made here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rosetta::session::{MetricRecord, Session, SessionConfig, State};

fn rosetta(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A finished session `name` under `root` with settings `params` and a
/// rising validation MRR ending at `mrr`.
fn session(root: &Path, name: &str, params: &[(&str, &str)], mrr: f64) -> PathBuf {
    let cfg = SessionConfig {
        rosetta_version: "0".into(),
        // not a registered model: the settings stay as written here
        model: "test".into(),
        workspace: PathBuf::from("/w/bible-en-es/workspace.toml"),
        workspace_hash: "h".into(),
        seed: 1,
        device_request: rosetta::models::DeviceSpec::Cpu,
        device: "cpu".into(),
        given: BTreeMap::new(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        created: "2026-11-22T19:03:01Z".into(),
        text: None,
    };
    let dir = root.join(name);
    let mut s = Session::create(&dir, cfg).unwrap();
    let mut lines = String::new();
    for step in 1..=30 {
        let r = MetricRecord::Step {
            phase: "train".into(),
            epoch: 1 + (step - 1) / 10,
            step,
            examples: 10,
            loss: 2.0 / step as f64,
            parts: Default::default(),
            pairs_per_s: 100.0,
            wall_s: step as f64 * 2.0,
        };
        lines.push_str(&serde_json::to_string(&r).unwrap());
        lines.push('\n');
        if step % 10 == 0 {
            let v = MetricRecord::Valid {
                phase: "train".into(),
                epoch: step / 10,
                step,
                scores: [("MRR".to_string(), mrr - 0.1 + step as f64 / 300.0)].into(),
            };
            lines.push_str(&serde_json::to_string(&v).unwrap());
            lines.push('\n');
        }
    }
    std::fs::write(dir.join("metrics.jsonl"), lines).unwrap();
    s.status.state = State::Done;
    s.status.best_mrr = Some(mrr);
    crate::common::write_status(&dir, &s.status);
    dir
}

#[test]
fn jobs_diff_filter_rename_tag_note_show_delete() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().to_str().unwrap();
    let a = session(
        root.path(),
        "s2net-20261122-190301",
        &[("dim", "128"), ("lr", "0.01")],
        0.91,
    );
    let b = session(
        root.path(),
        "s2net-20261122-190455",
        &[("dim", "128"), ("lr", "0.02")],
        0.88,
    );
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());

    // `rosetta jobs` alone is the table as before; --diff adds the differing settings
    let plain = text(&rosetta(&["jobs", "--root", r]));
    assert!(
        plain.starts_with("SESSION") && !plain.contains("LR"),
        "{plain}"
    );
    let o = rosetta(&["jobs", "--root", r, "--diff"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let head = t.lines().next().unwrap();
    assert!(head.ends_with("LR") && !head.contains("DIM"), "{t}");
    assert!(t.contains("0.02"), "{t}");

    // filters by setting and by figure
    let t = text(&rosetta(&["jobs", "--root", r, "--filter", "lr=0.01"]));
    assert!(t.contains("190301") && !t.contains("190455"), "{t}");
    let t = text(&rosetta(&["jobs", "--root", r, "--filter", "mrr>0.9"]));
    assert!(t.contains("190301") && !t.contains("190455"), "{t}");
    let o = rosetta(&["jobs", "--root", r, "--filter", "mrr>high"]);
    assert!(!o.status.success() && text(&o).contains("not a number"));

    // sorted by a setting or a figure, either way (folder order: 190301 first)
    let order = |args: &[&str]| -> bool {
        let mut a = vec!["jobs", "--root", r];
        a.extend_from_slice(args);
        let t = text(&rosetta(&a));
        t.find("190301").unwrap() < t.find("190455").unwrap()
    };
    assert!(order(&[]));
    assert!(!order(&["--sort", "lr:desc"]));
    assert!(order(&["--sort", "lr"]));
    assert!(!order(&["--sort", "mrr"]));
    assert!(order(&["--sort", "mrr:desc"]));

    // rename, tag, note: kept in meta.json, shown in the table and in JSON
    assert!(rosetta(&["jobs", "rename", sa, "lr 0.01"]).status.success());
    assert!(rosetta(&["jobs", "tag", sa, "baseline", "good"])
        .status
        .success());
    assert!(rosetta(&["jobs", "tag", sa, "good", "--remove"])
        .status
        .success());
    assert!(rosetta(&["jobs", "note", sa, "first try"]).status.success());
    let t = text(&rosetta(&["jobs", "--root", r]));
    assert!(t.contains("lr 0.01 [baseline]"), "{t}");
    let v: serde_json::Value =
        serde_json::from_slice(&rosetta(&["jobs", "--root", r, "--json", "--diff"]).stdout)
            .unwrap();
    let first = &v["sessions"][0];
    assert_eq!(first["name"], "lr 0.01");
    assert_eq!(first["tags"], serde_json::json!(["baseline"]));
    assert_eq!(first["note"], "first try");
    // typed: numbers as numbers
    assert_eq!(first["settings"]["lr"], 0.01);
    // plain --json holds every setting too
    let v: serde_json::Value =
        serde_json::from_slice(&rosetta(&["jobs", "--root", r, "--json"]).stdout).unwrap();
    let s = &v["sessions"][0]["settings"];
    assert_eq!(s["lr"], 0.01, "{v}");
    assert!(s["seed"].is_u64() && s["model"].is_string(), "{v}");
    let t = text(&rosetta(&["jobs", "--root", r, "--filter", "tag=baseline"]));
    assert!(t.contains("190301") && !t.contains("190455"), "{t}");

    // show: config, best figures, checkpoints, log
    std::fs::write(a.join("log.txt"), "epoch 1 done\nepoch 2 done\n").unwrap();
    let o = rosetta(&["jobs", "show", sa]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for want in [
        "name     lr 0.01",
        "MRR",
        "config.toml",
        "lr = \"0.01\"",
        "epoch 2 done",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }

    // plot: the same series options as the workbench; distinct labels
    let svg = root.path().join("mrr.svg");
    let o = rosetta(&[
        "plot",
        sa,
        sb,
        "--out",
        svg.to_str().unwrap(),
        "--metric",
        "mrr",
        "--x",
        "epoch",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(
        s.contains("lr 0.01") && s.contains("s2net-20261122-190455"),
        "labels"
    );
    let png = root.path().join("loss.png");
    let o = rosetta(&[
        "plot",
        sa,
        sb,
        "--out",
        png.to_str().unwrap(),
        "--log-y",
        "--x",
        "time",
        "--smooth",
        "0.5",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = rosetta(&["plot", sa, "--out", "x.svg", "--smooth", "1.5"]);
    assert!(!o.status.success() && text(&o).contains("below 1"));
    let o = rosetta(&["plot", sa, "--out", "x.svg", "--x", "hours"]);
    assert!(!o.status.success() && text(&o).contains("step, epoch or time"));

    // delete: asks on a terminal (refused without one unless --yes)
    let o = rosetta(&["jobs", "delete", sb]);
    assert!(
        !o.status.success() && text(&o).contains("--yes"),
        "{}",
        text(&o)
    );
    assert!(b.exists());
    let o = rosetta(&["jobs", "delete", sb, "--yes"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!b.exists() && a.exists());
    // not a session folder: refused
    let o = rosetta(&["jobs", "delete", r, "--yes"]);
    assert!(!o.status.success() && text(&o).contains("not a session folder"));
}

#[test]
fn jobs_log_prints_the_end_and_follows_until_the_job_ends() {
    use std::io::{BufRead, BufReader, Write};
    let root = tempfile::tempdir().unwrap();
    let a = session(root.path(), "s2net-20261122-190301", &[("lr", "0.01")], 0.9);
    let sa = a.to_str().unwrap();
    std::fs::write(a.join("log.txt"), "epoch 1 done\nepoch 2 done\n").unwrap();
    let o = rosetta(&["jobs", "log", sa, "--lines", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "epoch 2 done\n");
    // a finished job: --follow prints the end and returns
    let o = rosetta(&["jobs", "log", sa, "-f"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "epoch 1 done\nepoch 2 done\n"
    );
    // a running job (this test's process stands in for it): what it appends
    // is printed as it comes, and following ends with the job
    let mut st = rosetta::session::read_status(&a).unwrap();
    st.state = State::Running;
    st.pid = std::process::id();
    st.pid_start = None;
    crate::common::write_status(&a, &st);
    let mut child = Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(["jobs", "log", sa, "--follow", "--lines", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(a.join("log.txt"))
        .unwrap();
    log.write_all(b"epoch 3 done\n").unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "epoch 3 done\n");
    assert!(child.try_wait().unwrap().is_none(), "still following");
    log.write_all(b"finished\nno newline").unwrap();
    st.state = State::Done;
    crate::common::write_status(&a, &st);
    let status = child.wait().unwrap();
    assert!(status.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(
        rest, "finished\nno newline\n",
        "the last line, unterminated, too"
    );
    // not a session folder: a clear error, no panic
    let o = rosetta(&["jobs", "log", root.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("not a session folder"), "{}", text(&o));
}

/// Stored text holding terminal escapes (a name with an OSC 52 clipboard
/// write, a note, a status error, a log line; issue 39) is printed without
/// them by `jobs`, `jobs show`, `jobs log` and `cancel`.
#[test]
fn stored_text_reaches_the_terminal_without_escape_sequences() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().to_str().unwrap();
    let a = session(root.path(), "s2net-20261122-190301", &[("lr", "0.01")], 0.9);
    let sa = a.to_str().unwrap();
    let osc52 = "x\u{1b}]52;c;ZWNobyBoaQ==\u{7}y";
    assert!(rosetta(&["jobs", "rename", sa, osc52]).status.success());
    assert!(rosetta(&["jobs", "note", sa, "see \u{1b}[2J\u{9b}31mhere"])
        .status
        .success());
    let mut st = rosetta::session::read_status(&a).unwrap();
    st.state = State::Failed;
    st.error = Some("boom \u{1b}]0;pwned\u{7}".into());
    crate::common::write_status(&a, &st);
    std::fs::write(a.join("log.txt"), "epoch 1 \u{1b}[31mred\u{1b}[0m\n").unwrap();
    for args in [
        vec!["jobs", "--root", r],
        vec!["jobs", "show", sa],
        vec!["jobs", "log", sa],
        vec!["cancel", sa],
    ] {
        let o = rosetta(&args);
        let t = text(&o);
        assert!(
            !t.contains('\u{1b}') && !t.contains('\u{7}') && !t.contains('\u{9b}'),
            "{args:?}: {t:?}"
        );
        if args[1] == "show" {
            assert!(
                t.contains("xy") && t.contains("boom") && t.contains("red"),
                "{t}"
            );
        }
    }
}

/// `jobs delete` removes only a session written by Rosetta, and only its
/// own files (issue 39): a project folder with a `config.toml`, a folder
/// holding a status that is not a session's, and a session with a file
/// it does not write are refused with nothing deleted.
#[test]
fn delete_removes_only_rosetta_sessions_and_their_own_files() {
    let root = tempfile::tempdir().unwrap();
    let proj = root.path().join("proj");
    std::fs::create_dir_all(proj.join("src")).unwrap();
    std::fs::write(proj.join("config.toml"), "[package]\nname = \"x\"\n").unwrap();
    std::fs::write(proj.join("README.md"), "mine\n").unwrap();
    std::fs::write(proj.join("src/main.rs"), "fn main() {}\n").unwrap();
    let o = rosetta(&["jobs", "delete", proj.to_str().unwrap(), "--yes"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("not a Rosetta session"), "{}", text(&o));
    assert!(proj.join("README.md").exists() && proj.join("src/main.rs").exists());
    let only = root.path().join("only-status");
    std::fs::create_dir(&only).unwrap();
    std::fs::write(only.join("status.json"), "{\"a\":1}").unwrap();
    let o = rosetta(&["jobs", "delete", only.to_str().unwrap(), "--yes"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(only.join("status.json").exists());
    // a real session holding a file of someone else's: nothing deleted
    let a = session(root.path(), "s2net-20261122-190301", &[], 0.9);
    std::fs::write(a.join("checkpoints/best.safetensors"), "x").unwrap();
    std::fs::write(a.join("notes.md"), "mine\n").unwrap();
    let o = rosetta(&["jobs", "delete", a.to_str().unwrap(), "--yes"]);
    assert!(
        !o.status.success() && text(&o).contains("notes.md"),
        "{}",
        text(&o)
    );
    assert!(a.join("notes.md").exists() && a.join("config.toml").exists());
    // without it: the session and its checkpoints go
    std::fs::remove_file(a.join("notes.md")).unwrap();
    let o = rosetta(&["jobs", "delete", a.to_str().unwrap(), "--yes"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!a.exists());
}

/// Issue 54, finding 1: a path that reaches a session through a link
/// (`link/`, whose trailing slash makes the system follow it) or ends in
/// `.` deletes nothing, and `train --session` into an existing folder that
/// is not a session touches nothing in it before refusing.
#[test]
fn deletes_never_go_through_a_link_or_a_dot_and_train_touches_no_foreign_folder() {
    let root = tempfile::tempdir().unwrap();
    let real = session(root.path(), "real", &[], 0.9);
    std::os::unix::fs::symlink("real", root.path().join("link")).unwrap();
    let files = |d: &Path| std::fs::read_dir(d).unwrap().count();
    let before = files(&real);
    assert!(before >= 3 && real.join("config.toml").exists());
    let link = format!("{}/link", root.path().display());
    for p in [
        format!("{link}/"),
        link.clone(),
        format!("{link}//"),
        format!("{}/./", real.display()),
        format!("{}/.", real.display()),
        format!("{}/checkpoints/..", real.display()),
    ] {
        let o = rosetta(&["jobs", "delete", &p, "--yes"]);
        assert!(!o.status.success(), "{p}: {}", text(&o));
        assert!(text(&o).contains("nothing deleted"), "{p}: {}", text(&o));
        assert_eq!(files(&real), before, "{p}: files of the real session went");
        assert!(real.join("config.toml").exists() && real.join("checkpoints").is_dir());
    }
    // the folder itself is still deletable
    let o = rosetta(&["jobs", "delete", real.to_str().unwrap(), "--yes"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!real.exists());

    // train into a folder that is not a session: refused, nothing removed
    let ws = crate::common::tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let mine = root.path().join("mine");
    std::fs::create_dir_all(mine.join("checkpoints")).unwrap();
    std::fs::write(mine.join(".x.tmp.999999999.y"), "keep").unwrap();
    std::fs::write(mine.join(".config.toml.tmp.999999999.y"), "keep").unwrap();
    let o = rosetta(&[
        "train",
        "--workspace",
        wsf.to_str().unwrap(),
        "--model",
        "s2net",
        "--device",
        "cpu",
        "--session",
        mine.to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("not empty"), "{}", text(&o));
    assert!(mine.join(".x.tmp.999999999.y").exists());
    assert!(mine.join(".config.toml.tmp.999999999.y").exists());
    assert!(mine.join("checkpoints").is_dir());
    // a link to an empty folder is no session folder either
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::os::unix::fs::symlink("empty", root.path().join("to-empty")).unwrap();
    let to_empty = root.path().join("to-empty");
    let o = rosetta(&[
        "train",
        "--workspace",
        wsf.to_str().unwrap(),
        "--model",
        "s2net",
        "--device",
        "cpu",
        "--session",
        to_empty.to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));
    assert_eq!(files(&empty), 0);
}
