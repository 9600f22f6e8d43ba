//! Jobs and sweeps on a real Slurm: the one-node cluster of
//! `scripts/slurm-test-cluster.sh` (started by `.ci/run`; partition
//! `debug`). Each test drives the `rosetta` program as a user would:
//! `train --on slurm`, `jobs`, `cancel`, `train --resume`, `sweep`.
//!
//! Skipped, saying why, only where Slurm's tools are not installed
//! (`sinfo` not on PATH); with the tools but no cluster answering, the
//! tests fail. `SLURM_CONF` is passed on as set, else the test cluster's
//! `/tmp/rosetta-slurm/slurm.conf` when it exists.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rosetta::session::{read_status, State, BEST_CHECKPOINT, LAST_CHECKPOINT};

use crate::common;
use common::{bits_of, metrics_records, ok, tiny_workspace};

/// The Slurm configuration the tools should read, or `None` (with the
/// reason printed) where Slurm's tools are absent.
fn slurm() -> Option<Option<String>> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("sinfo").is_file()))
        .unwrap_or(false);
    if !found {
        eprintln!(
            "skipped: Slurm's tools are not installed (no sinfo on PATH); \
             scripts/slurm-test-cluster.sh start installs and starts a one-node cluster"
        );
        return None;
    }
    let conf = std::env::var("SLURM_CONF").ok().or_else(|| {
        let p = Path::new("/tmp/rosetta-slurm/slurm.conf");
        p.exists().then(|| p.display().to_string())
    });
    Some(conf)
}

/// `rosetta ARGS` in `cwd` with the Slurm configuration.
fn rosetta(conf: &Option<String>, cwd: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rosetta"));
    c.current_dir(cwd).args(args).stdin(Stdio::null());
    if let Some(conf) = conf {
        c.env("SLURM_CONF", conf);
    }
    c.output().unwrap()
}

/// `train --on slurm` of s2net on the tiny workspace with `more`
/// settings; the session folder it prints.
fn submit(conf: &Option<String>, ws: &Path, root: &Path, more: &[&str]) -> PathBuf {
    let wsf = ws.join("workspace.toml");
    let mut args = vec![
        "train",
        "--workspace",
        wsf.to_str().unwrap(),
        "--model",
        "s2net",
        "--device",
        "cpu",
        "--on",
        "slurm",
        "--partition",
        "debug",
    ];
    args.extend_from_slice(more);
    let out = rosetta(conf, root, &args);
    let dir = PathBuf::from(ok(&out).trim());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("submitted Slurm job"), "{err}");
    dir
}

/// `rosetta jobs --json` row of session `dir` (under `root/sessions`).
fn job_row(conf: &Option<String>, root: &Path, dir: &Path) -> serde_json::Value {
    let out = rosetta(conf, root, &["jobs", "--json"]);
    let v: serde_json::Value = serde_json::from_str(ok(&out).trim()).unwrap();
    let canon = dir.canonicalize().unwrap();
    v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            root.join(r["session"].as_str().unwrap())
                .canonicalize()
                .is_ok_and(|p| p == canon)
        })
        .cloned()
        .unwrap_or_else(|| panic!("{} not listed: {v}", dir.display()))
}

/// Polls `jobs --json` until `done(row)`; panics after `secs`.
fn wait_row(
    conf: &Option<String>,
    root: &Path,
    dir: &Path,
    secs: u64,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let row = job_row(conf, root, dir);
        if done(&row) {
            return row;
        }
        assert!(
            Instant::now() < deadline,
            "{}: still {row} after {secs} s\nlog: {}",
            dir.display(),
            std::fs::read_to_string(dir.join("log.txt")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn label(row: &serde_json::Value) -> String {
    row["slurm"]["label"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_slurm_job_is_followed_to_done_with_its_curves() {
    let Some(conf) = slurm() else { return };
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let dir = submit(
        &conf,
        ws.path(),
        root.path(),
        &["--set", "dim=8", "--set", "epochs=2", "--set", "batch=10"],
    );
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("slurm.json")).unwrap()).unwrap();
    let job = rec["job_id"].as_str().unwrap().to_string();
    assert!(job.parse::<u64>().is_ok(), "{rec}");
    assert_eq!(rec["options"]["partition"], "debug");
    let row = wait_row(&conf, root.path(), &dir, 90, |r| r["state"] == "done");
    assert_eq!(row["slurm"]["job_id"], job.as_str());
    assert_eq!(label(&row), "done");
    // the job ran from the session, on the node, and wrote its curves there
    let recs = metrics_records(&dir);
    assert!(recs.iter().any(|r| r["loss"].is_number()), "{recs:?}");
    assert!(dir.join(BEST_CHECKPOINT).is_file());
    // Slurm's own state beside the recorded one, in the table and the detail
    let table = ok(&rosetta(&conf, root.path(), &["jobs"]));
    assert!(table.contains("SLURM"), "{table}");
    assert!(table.contains(&format!("{job} COMPLETED")), "{table}");
    let show = ok(&rosetta(
        &conf,
        root.path(),
        &["jobs", "show", dir.to_str().unwrap()],
    ));
    assert!(
        show.contains(&format!("slurm    job {job} COMPLETED")),
        "{show}"
    );
    // Slurm has it as ended: the session's record keeps that for later
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("slurm.json")).unwrap()).unwrap();
    assert_eq!(rec["last_seen"]["state"], "COMPLETED", "{rec}");
}

#[test]
fn a_cancelled_slurm_job_keeps_its_checkpoints_and_resumes_bit_exact() {
    let Some(conf) = slurm() else { return };
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let settings = [
        "--seed",
        "3",
        "--set",
        "dim=8",
        "--set",
        "epochs=2",
        "--set",
        "batch=4",
        "--set",
        "log_every=1",
        "--set",
        "step_delay_ms=150",
    ];
    // the uninterrupted run, on this machine
    let full = root.path().join("full");
    let wsf = ws.path().join("workspace.toml");
    let mut args = vec![
        "train",
        "--workspace",
        wsf.to_str().unwrap(),
        "--model",
        "s2net",
        "--device",
        "cpu",
        "--session",
        full.to_str().unwrap(),
    ];
    args.extend_from_slice(&settings);
    let local = std::thread::scope(|s| {
        let h = s.spawn(|| rosetta(&conf, root.path(), &args));
        // meanwhile on Slurm: cancelled inside its second epoch
        let dir = submit(&conf, ws.path(), root.path(), &settings);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let st = read_status(&dir).unwrap();
            if st.state == State::Running && st.epoch == 2 && st.step > 0 {
                break;
            }
            assert!(!st.state.is_final(), "{st:?}");
            assert!(Instant::now() < deadline, "never in epoch 2: {st:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = rosetta(&conf, root.path(), &["cancel", dir.to_str().unwrap()]);
        let said = ok(&out);
        assert!(said.contains("cancelled"), "{said}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("scancel"),
            "{out:?}"
        );
        let st = read_status(&dir).unwrap();
        assert_eq!(st.state, State::Cancelled, "{st:?}");
        assert!(dir.join(LAST_CHECKPOINT).is_file());
        let row = job_row(&conf, root.path(), &dir);
        assert_eq!(row["state"], "cancelled", "{row}");
        let first_job = row["slurm"]["job_id"].as_str().unwrap().to_string();
        // resumed: resubmitted to Slurm, to the end
        let out = rosetta(
            &conf,
            root.path(),
            &["train", "--resume", dir.to_str().unwrap()],
        );
        ok(&out);
        assert!(String::from_utf8_lossy(&out.stderr).contains("submitted Slurm job"));
        let row = wait_row(&conf, root.path(), &dir, 90, |r| r["state"] == "done");
        assert_ne!(row["slurm"]["job_id"].as_str().unwrap(), first_job);
        assert_eq!(row["slurm"]["previous"][0].as_str().unwrap(), first_job);
        (h.join().unwrap(), dir)
    });
    let (out, dir) = local;
    ok(&out);
    for ck in [LAST_CHECKPOINT, BEST_CHECKPOINT] {
        assert_eq!(
            bits_of(&full.join(ck)),
            bits_of(&dir.join(ck)),
            "{ck}: the cancelled and resumed Slurm run differs from the uninterrupted one"
        );
    }
}

#[test]
fn a_job_killed_by_its_time_limit_says_so() {
    let Some(conf) = slurm() else { return };
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    // far longer than the one-minute limit
    let dir = submit(
        &conf,
        ws.path(),
        root.path(),
        &[
            "--time",
            "1",
            "--set",
            "dim=8",
            "--set",
            "batch=4",
            "--set",
            "epochs=100",
            "--set",
            "patience=1000",
            "--set",
            "step_delay_ms=200",
        ],
    );
    let row = wait_row(&conf, root.path(), &dir, 100, |r| label(r) == "running");
    assert_eq!(row["state"], "running");
    assert!(!row["slurm"]["node"].as_str().unwrap().is_empty(), "{row}");
    // killed at the limit (Slurm checks limits every 30 s or so), ended
    let row = wait_row(&conf, root.path(), &dir, 150, |r| {
        r["slurm"]["state"] != "RUNNING" && r["slurm"]["state"] != "COMPLETING"
    });
    assert_eq!(label(&row), "timeout", "{row}");
    assert_eq!(row["slurm"]["state"], "TIMEOUT", "{row}");
    assert_eq!(row["state"], "failed", "{row}");
    let table = ok(&rosetta(&conf, root.path(), &["jobs"]));
    assert!(table.contains("timeout"), "{table}");
    // the job got SIGTERM first: it kept its checkpoint to resume from
    assert!(dir.join(LAST_CHECKPOINT).is_file());
}

#[test]
fn a_sweep_runs_as_one_job_array_with_mean_and_sd_over_seeds() {
    let Some(conf) = slurm() else { return };
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let wsf = ws.path().join("workspace.toml");
    let out = rosetta(
        &conf,
        root.path(),
        &[
            "sweep",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            "s2net",
            "--device",
            "cpu",
            "--grid",
            "lr=0.01,0.02",
            "--grid",
            "dim=4,8",
            "--seeds",
            "1,2",
            "--set",
            "epochs=1",
            "--set",
            "batch=10",
            "--on",
            "slurm",
            "--partition",
            "debug",
        ],
    );
    let id = ok(&out).trim().to_string();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("8 sessions as Slurm job array"),
        "{out:?}"
    );
    let sessions = root.path().join("sessions");
    let dirs: Vec<PathBuf> = (0..8).map(|i| sessions.join(format!("{id}-{i}"))).collect();
    // one array: task i runs session i
    let mut array = None;
    for (i, d) in dirs.iter().enumerate() {
        let rec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("slurm.json")).unwrap()).unwrap();
        let (job, task) = rec["job_id"].as_str().unwrap().split_once('_').unwrap();
        assert_eq!(task, i.to_string());
        assert_eq!(*array.get_or_insert(job.to_string()), job);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let v = loop {
        let out = rosetta(&conf, root.path(), &["jobs", "--json"]);
        let v: serde_json::Value = serde_json::from_str(ok(&out).trim()).unwrap();
        let states: Vec<&str> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["state"].as_str().unwrap())
            .collect();
        if states.len() == 8 && states.iter().all(|s| *s == "done") {
            break v;
        }
        assert!(Instant::now() < deadline, "{states:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let sw = &v["sweeps"][0];
    assert_eq!(sw["id"], id.as_str());
    assert_eq!(sw["varying"], serde_json::json!(["dim", "lr"]));
    let points = sw["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    // each point's MRR: mean and sample sd of its two seeds' best MRR
    for p in points {
        assert_eq!(p["seeds"], serde_json::json!([1, 2]));
        let mrrs: Vec<f64> = p["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                read_status(&root.path().join(d.as_str().unwrap()))
                    .unwrap()
                    .best_mrr
                    .unwrap()
            })
            .collect();
        let mean = (mrrs[0] + mrrs[1]) / 2.0;
        let sd = (mrrs[0] - mrrs[1]).abs() / 2f64.sqrt();
        let f = &p["figures"]["MRR"];
        assert_eq!(f["n"], 2, "{p}");
        assert!((f["mean"].as_f64().unwrap() - mean).abs() < 1e-12, "{p}");
        assert!((f["sd"].as_f64().unwrap() - sd).abs() < 1e-12, "{p}");
    }
    // the table: one group, the varying settings as columns, mean ± sd
    let table = ok(&rosetta(&conf, root.path(), &["jobs"]));
    eprintln!("{table}");
    assert!(
        table.contains(&format!("sweep {id} (s2net, 8 sessions: 8 done")),
        "{table}"
    );
    assert!(
        table.contains("DIM") && table.contains("LR") && table.contains("±"),
        "{table}"
    );
    assert!(
        !table.contains(&format!("{id}-0 ")),
        "members are grouped: {table}"
    );
    let members = ok(&rosetta(&conf, root.path(), &["jobs", "--sweep", &id]));
    let rows = members.lines().filter(|l| l.starts_with(&format!("{id}-")));
    assert_eq!(rows.count(), 8, "{members}");
}

#[test]
fn a_missing_partition_is_refused_in_one_line_before_anything_is_written() {
    let Some(conf) = slurm() else { return };
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let wsf = ws.path().join("workspace.toml");
    let train = [
        "train",
        "--workspace",
        wsf.to_str().unwrap(),
        "--model",
        "s2net",
        "--on",
        "slurm",
        "--partition",
        "no-such-partition",
    ];
    let sweep = [
        "sweep",
        "--workspace",
        wsf.to_str().unwrap(),
        "--model",
        "s2net",
        "--grid",
        "dim=4,8",
        "--on",
        "slurm",
        "--partition",
        "no-such-partition",
    ];
    for args in [&train[..], &sweep[..]] {
        let out = rosetta(&conf, root.path(), args);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("Slurm refuses the job") && err.contains("invalid partition"),
            "{err}"
        );
    }
    // without Slurm's tools on PATH: one line saying so
    let out = Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .current_dir(root.path())
        .args(&train[..8])
        .arg("debug")
        .env("PATH", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("sbatch not found"), "{err}");
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Not Slurm: the same sweep on this machine, at most N processes at a
/// time; the command waits and prints the grouped sweep.
#[test]
fn a_local_sweep_runs_every_point_and_prints_the_group() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let wsf = ws.path().join("workspace.toml");
    let sweep = |more: &[&str]| {
        let mut a = vec![
            "sweep",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            "cl-lsi",
            "--device",
            "cpu",
        ];
        a.extend_from_slice(more);
        common::rosetta_in(root.path(), &a)
    };
    // refused before anything is written
    for (bad, want) in [
        (&["--grid", "seed=1,2"][..], "--seeds"),
        (&["--grid", "dim=2,2"][..], "given twice"),
        (&["--grid", "dim=2", "--set", "dim=4"][..], "fixed setting"),
        (&["--grid", "epochs=2,3"][..], "does not take epochs"),
        (
            &["--grid", "dim=2", "--partition", "debug"][..],
            "need --on slurm",
        ),
    ] {
        let out = sweep(bad);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{want:?} not in {err}");
    }
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
    let out = sweep(&["--grid", "dim=2,4", "--seeds", "1,2", "--parallel", "2"]);
    let said = ok(&out);
    let id = said.lines().last().unwrap().to_string();
    assert!(
        said.contains(&format!("sweep {id} (cl-lsi, 4 sessions: 4 done")),
        "{said}"
    );
    assert!(said.contains("DIM") && said.contains("±"), "{said}");
    for i in 0..4 {
        let d = root.path().join("sessions").join(format!("{id}-{i}"));
        assert_eq!(read_status(&d).unwrap().state, State::Done);
        let m: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("sweep.json")).unwrap()).unwrap();
        assert_eq!(m["id"], id.as_str());
        assert_eq!(m["seed"], [1, 2][i % 2]);
        assert!(!d.join("slurm.json").exists());
    }
    // `compare --sweep`: the sweep's sessions, each named by its point and
    // seed, tested against the first (the same task: paired tests)
    let out = common::rosetta_in(
        root.path(),
        &["compare", "--sweep", &id, "--metrics", "MRR", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(ok(&out).trim()).unwrap();
    let rows = v["systems"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["system"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "dim=2 seed=1",
            "dim=2 seed=2",
            "dim=4 seed=1",
            "dim=4 seed=2"
        ]
    );
    assert_eq!(rows[0]["baseline"], true);
    assert!(
        rows[1..].iter().all(|r| r["tests"]["MRR"].is_object()),
        "{v}"
    );
    // a baseline among its folders, given by another spelling, keeps its label
    let last = root.path().join("sessions").join(format!("{id}-3"));
    let out = common::rosetta_in(
        root.path(),
        &[
            "compare",
            "--sweep",
            &id,
            "--baseline",
            last.to_str().unwrap(),
            "--metrics",
            "MRR",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(ok(&out).trim()).unwrap();
    let names: Vec<&str> = v["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["system"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "dim=4 seed=2",
            "dim=2 seed=1",
            "dim=2 seed=2",
            "dim=4 seed=1"
        ]
    );
    let out = common::rosetta_in(root.path(), &["compare", "--sweep", "no-such-sweep"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no sweep \"no-such-sweep\""), "{err}");
}

/// The workbench with Slurm jobs in a real terminal (`tests/e2e_slurm_jobs.sh`
/// under tmux): a held job shown pending with its reason, a running one, a
/// sweep launched on Slurm from the new-job form and shown as one row with
/// mean ± sd, opened on its points, and the launcher remembered.
#[test]
fn the_workbench_launches_and_follows_slurm_jobs_and_a_sweep() {
    let Some(conf) = slurm() else { return };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e_slurm_jobs.sh");
    let mut c = Command::new("bash");
    c.arg(script).arg(env!("CARGO_BIN_EXE_rosetta"));
    if let Some(conf) = &conf {
        c.env("SLURM_CONF", conf);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "e2e_slurm_jobs.sh failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ------------------------------------------------------------ issue 54: a tampered record

/// Fake `sbatch`, `squeue`, `sacct` and `scancel` in a folder of their own:
/// each records its arguments (one a line, `--` after each call) under
/// `log/`, `sbatch` answers job 4242, `squeue` prints `log/squeue.out`.
/// They stand in for Slurm where what is checked is what Rosetta asks of
/// it, not what Slurm does.
fn fake_slurm(root: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let bin = root.join("bin");
    let log = root.join("log");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&log).unwrap();
    let rec = |name: &str| {
        format!(
            "printf '%s\\n' \"$@\" -- >> '{}/{name}.args'\n",
            log.display()
        )
    };
    for (name, body) in [
        ("sbatch", format!("{}echo 4242\n", rec("sbatch"))),
        (
            "squeue",
            format!(
                "{}cat '{}/squeue.out' 2>/dev/null\nexit 0\n",
                rec("squeue"),
                log.display()
            ),
        ),
        ("sacct", "exit 0\n".to_string()),
        ("scancel", rec("scancel")),
    ] {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (bin, log)
}

/// `rosetta ARGS` in `cwd` with the fake Slurm tools first on PATH.
fn rosetta_faked(bin: &Path, cwd: &Path, args: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .current_dir(cwd)
        .args(args)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A queued session `name` under `root` (not a registered model: nothing
/// trains) with `slurm.json` recording `record`.
fn queued_slurm_session(root: &Path, name: &str, record: serde_json::Value) -> PathBuf {
    use rosetta::session::{Session, SessionConfig};
    let cfg = SessionConfig {
        rosetta_version: "0".into(),
        model: "test".into(),
        workspace: PathBuf::from("/w/workspace.toml"),
        workspace_hash: "h".into(),
        seed: 1,
        device_request: rosetta::models::DeviceSpec::Cpu,
        device: "cpu".into(),
        given: Default::default(),
        params: Default::default(),
        created: "2026-11-28T18:00:00Z".into(),
        text: None,
    };
    let dir = root.join(name);
    Session::create(&dir, cfg).unwrap();
    std::fs::write(dir.join("slurm.json"), record.to_string()).unwrap();
    dir.canonicalize().unwrap()
}

fn text_of(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Issue 54, finding 2: `train --resume` of a Slurm session whose
/// `slurm.json` was edited to add `--export=…LD_PRELOAD=…` and its own
/// `--output` resubmits with neither (the record's extra arguments are
/// never replayed, and Rosetta's own `--output`/`--chdir` come last); the
/// same options given on the command line are refused.
#[test]
fn a_tampered_slurm_record_adds_nothing_to_the_resubmission() {
    let root = tempfile::tempdir().unwrap();
    let (bin, log) = fake_slurm(root.path());
    let dir = queued_slurm_session(
        root.path(),
        "s",
        serde_json::json!({
            "options": {"partition": "debug", "extra": [
                "--export=ALL,LD_PRELOAD=/tmp/evil.so", "--output=/tmp/elsewhere.log", "--mem=1G"]},
            "exe": "/tmp/evil", "job_id": "77", "submitted": "2026-11-28T18:00:00Z",
            "previous": []
        }),
    );
    // `jobs show` shows what the record holds, extra arguments included
    let o = rosetta_faked(&bin, root.path(), &["jobs", "show", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text_of(&o));
    assert!(
        text_of(&o).contains("sbatch options --partition=debug --export=ALL,LD_PRELOAD"),
        "{}",
        text_of(&o)
    );
    let o = rosetta_faked(
        &bin,
        root.path(),
        &["train", "--resume", dir.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text_of(&o));
    assert!(text_of(&o).contains("not replaying"), "{}", text_of(&o));
    let args = std::fs::read_to_string(log.join("sbatch.args")).unwrap();
    let submit: Vec<&str> = args
        .split("--\n")
        .find(|c| c.lines().any(|l| l == "--parsable"))
        .unwrap_or_else(|| panic!("no submission: {args}"))
        .lines()
        .collect();
    assert!(
        !args.contains("LD_PRELOAD") && !args.contains("elsewhere"),
        "{args}"
    );
    assert!(
        !args.contains("/tmp/evil") && !args.contains("--mem"),
        "{args}"
    );
    assert!(submit.contains(&"--partition=debug"), "{submit:?}");
    let out = format!("--output={}", dir.join("log.txt").display());
    let pos = |a: &str| submit.iter().position(|l| *l == a);
    assert!(pos(&out).is_some(), "{submit:?}");
    assert!(pos(&out) > pos("--partition=debug"), "{submit:?}");
    assert!(
        submit.contains(&format!("--chdir={}", dir.display()).as_str()),
        "{submit:?}"
    );
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("slurm.json")).unwrap()).unwrap();
    assert_eq!(rec["job_id"], "4242");
    assert!(
        rec["options"]["extra"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "{rec}"
    );
    // the same, given by hand: refused before Slurm is asked
    std::fs::remove_file(log.join("sbatch.args")).unwrap();
    for bad in [
        "--export=ALL,LD_PRELOAD=/tmp/evil.so",
        "--output=/tmp/x",
        "-D/tmp",
        "--chdir=/tmp",
    ] {
        let arg = format!("--sbatch-arg={bad}");
        let o = rosetta_faked(
            &bin,
            root.path(),
            &["train", "--resume", dir.to_str().unwrap(), &arg],
        );
        assert!(!o.status.success(), "{bad}: {}", text_of(&o));
        assert!(
            text_of(&o).contains("not an extra option"),
            "{bad}: {}",
            text_of(&o)
        );
    }
    assert!(!log.join("sbatch.args").exists());
}

/// Issue 54, finding 2: `cancel` of a session whose `slurm.json` names
/// another session's job does not `scancel` it (Slurm says that job's name
/// and folder are the other session's); the other session's own cancel
/// does.
#[test]
fn cancel_scancels_only_the_sessions_own_job() {
    let root = tempfile::tempdir().unwrap();
    let (bin, log) = fake_slurm(root.path());
    let rec = serde_json::json!({
        "options": {}, "exe": "/x", "job_id": "555",
        "submitted": "2026-11-28T18:00:00Z", "previous": [],
        // a state the record claims: never what cancel goes by
        "last_seen": {"state": "RUNNING", "reason": "", "node": "n1",
                      "name": "rosetta:decoy", "workdir": "/nowhere"}
    });
    let victim = queued_slurm_session(root.path(), "victim", rec.clone());
    let decoy = queued_slurm_session(root.path(), "decoy", rec);
    std::fs::write(
        log.join("squeue.out"),
        format!(
            "555|RUNNING|None|n1|rosetta:victim|{}/slurm.sh|{}\n",
            victim.display(),
            victim.display()
        ),
    )
    .unwrap();
    let o = rosetta_faked(&bin, root.path(), &["cancel", decoy.to_str().unwrap()]);
    assert!(!o.status.success(), "{}", text_of(&o));
    assert!(
        text_of(&o).contains("not this session's"),
        "{}",
        text_of(&o)
    );
    assert!(
        !log.join("scancel.args").exists(),
        "scancel ran for the decoy"
    );
    // the job's own session cancels it (the fake job never ends: waited 1 s)
    let o = rosetta_faked(
        &bin,
        root.path(),
        &["cancel", victim.to_str().unwrap(), "--timeout", "1"],
    );
    let sc = std::fs::read_to_string(log.join("scancel.args")).unwrap_or_default();
    assert_eq!(sc.lines().next(), Some("555"), "{}", text_of(&o));
}

/// The index status of session `dir` once its build has ended (`done`,
/// `failed` or `cancelled` in `index/status.json`); panics after `secs`.
fn wait_index(dir: &Path, secs: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Ok(b) = std::fs::read(dir.join("index/status.json")) {
            let st: serde_json::Value = serde_json::from_slice(&b).unwrap();
            if matches!(st["state"].as_str(), Some("done" | "failed" | "cancelled")) {
                return st;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{}: no end after {secs} s\nlog: {}",
            dir.display(),
            std::fs::read_to_string(dir.join("index/log.txt")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A 2-shard index build on Slurm (a job array and a merge job) gives the
/// embeddings and the rankings of the same build as one local process.
#[test]
fn a_sharded_index_build_on_slurm_answers_as_the_unsharded_one() {
    let Some(conf) = slurm() else { return };
    let ws = tiny_workspace();
    crate::encoder::zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    let sd = s.to_str().unwrap();
    let build = |more: &[&str]| {
        let mut args = vec![
            "index",
            "build",
            "--session",
            sd,
            "--device",
            "cpu",
            "--chunk",
            "2",
        ];
        args.extend_from_slice(more);
        rosetta(&conf, ws.path(), &args)
    };
    let search = || -> Vec<(String, f64)> {
        let out = rosetta(
            &conf,
            ws.path(),
            &[
                "search",
                "--session",
                sd,
                "--query",
                "dog",
                "--k",
                "50",
                "--json",
            ],
        );
        let v: serde_json::Value = serde_json::from_str(ok(&out).trim()).unwrap();
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["docno"].as_str().unwrap().to_string(),
                    h["score"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    // the unsharded build, in this process
    ok(&build(&[]));
    let npy = s.join("doc-embeddings.target.npy");
    let whole: ndarray::Array2<f32> = ndarray_npy::read_npy(&npy).unwrap();
    let whole_hits = search();
    assert!(whole_hits.len() > 2, "{whole_hits:?}");
    std::fs::remove_file(&npy).unwrap();
    std::fs::remove_file(s.join("doc-embeddings.target.json")).unwrap();
    // more shards than chunks: refused, nothing written
    let out = build(&["--on", "slurm", "--partition", "debug", "--shards", "999"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--shards 999") && err.contains("chunks"),
        "{err}"
    );
    assert!(!s.join("index/slurm.json").exists());
    // held by Slurm, it shows as pending, and cancelling it ends it
    let index_line = || -> String {
        let jobs = ok(&rosetta(&conf, ws.path(), &["jobs", "--root", "."]));
        let (_, builds) = jobs
            .split_once("index builds")
            .unwrap_or_else(|| panic!("{jobs}"));
        builds
            .lines()
            .find(|l| l.starts_with("s0"))
            .unwrap_or_else(|| panic!("{jobs}"))
            .to_string()
    };
    ok(&build(&[
        "--on",
        "slurm",
        "--partition",
        "debug",
        "--shards",
        "2",
        "--sbatch-arg=--hold",
    ]));
    let line = index_line();
    assert!(
        line.contains(" pending ") && line.contains("2 pending"),
        "{line}"
    );
    let out = build(&[]);
    assert!(!out.status.success(), "a local build while it is queued");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("still queued or running"), "{err}");
    let said = ok(&rosetta(
        &conf,
        ws.path(),
        &["index", "cancel", "--session", sd],
    ));
    assert!(said.contains("cancelled Slurm jobs"), "{said}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !index_line().contains(" cancelled ") {
        assert!(Instant::now() < deadline, "{}", index_line());
        std::thread::sleep(Duration::from_millis(300));
    }
    // two shards on Slurm
    let out = build(&["--on", "slurm", "--partition", "debug", "--shards", "2"]);
    let said = ok(&out);
    assert!(said.contains("submitted Slurm job array"), "{said}");
    let rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.join("index/slurm.json")).unwrap()).unwrap();
    assert_eq!(rec["shards"], 2);
    let st = wait_index(&s, 120);
    assert_eq!(
        st["state"],
        "done",
        "{st}\nlog: {}",
        std::fs::read_to_string(s.join("index/log.txt")).unwrap_or_default()
    );
    // each shard encoded its own half, and the merge encoded nothing
    let shard = |i: usize| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(s.join(format!("index/shard-{i:03}.json"))).unwrap())
            .unwrap()
    };
    let (a, b) = (shard(0), shard(1));
    assert_eq!(a["state"], "done", "{a}");
    assert_eq!(b["state"], "done", "{b}");
    let total = whole.nrows() as u64;
    assert_eq!(
        a["texts_done"].as_u64().unwrap() + b["texts_done"].as_u64().unwrap(),
        total
    );
    assert!(a["texts_reused"] == 0 && b["texts_reused"] == 0, "{a} {b}");
    assert_eq!(st["texts_reused"].as_u64().unwrap(), total, "{st}");
    assert!(
        !s.join("index/chunks-target").exists(),
        "merged into the cache"
    );
    let merged: ndarray::Array2<f32> = ndarray_npy::read_npy(&npy).unwrap();
    assert_eq!(merged.dim(), whole.dim());
    let diff = (&merged - &whole).iter().fold(0f32, |m, x| m.max(x.abs()));
    assert!(
        diff <= 1e-6,
        "sharded and unsharded embeddings differ by {diff}"
    );
    let hits = search();
    assert_eq!(hits.len(), whole_hits.len());
    for (x, y) in hits.iter().zip(&whole_hits) {
        assert_eq!(x.0, y.0, "{hits:?}\n{whole_hits:?}");
        assert!((x.1 - y.1).abs() <= 1e-6, "{x:?} {y:?}");
    }
    // `rosetta jobs` shows the Slurm build done, with its jobs
    let jobs = ok(&rosetta(&conf, ws.path(), &["jobs", "--root", "."]));
    let (_, builds) = jobs
        .split_once("index builds")
        .unwrap_or_else(|| panic!("{jobs}"));
    let line = builds
        .lines()
        .find(|l| l.starts_with("s0"))
        .unwrap_or_else(|| panic!("{jobs}"));
    assert!(
        line.contains("done") && line.contains("Slurm array"),
        "{line}"
    );
    // and `jobs --json` too
    let v: serde_json::Value = serde_json::from_str(
        ok(&rosetta(
            &conf,
            ws.path(),
            &["jobs", "--root", ".", "--json"],
        ))
        .trim(),
    )
    .unwrap();
    let b = &v["index_builds"][0];
    assert_eq!(b["shown_state"], "done", "{v}");
    assert_eq!(b["texts_done"].as_u64(), Some(total), "{v}");
    assert!(b["slurm"].as_str().unwrap().contains("merge"), "{v}");
    // nothing left to cancel
    let out = rosetta(&conf, ws.path(), &["index", "cancel", "--session", sd]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no index build of it is queued"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
