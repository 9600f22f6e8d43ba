//! The jobs module: requests checked before anything is written, session
//! names that never collide, background launch, cancel and resume through
//! the real `rosetta` program on the tiny fixture workspace.

use std::path::Path;
use std::time::{Duration, Instant};

use rosetta::jobs::{self, Cancel, JobRequest};
use rosetta::session::{read_status, State};

use crate::common;
use common::{rosetta_in, tiny_workspace};

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_rosetta"))
}

fn request(ws: &Path, root: &Path, model: &str, settings: &[(&str, &str)]) -> JobRequest {
    let mut r = JobRequest::new(ws.join("workspace.toml"), model);
    r.root = root.to_path_buf();
    r.device = rosetta::models::DeviceSpec::Cpu;
    r.settings = settings
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    r
}

fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// Waits until `dir`'s status is `state`.
fn wait_state(dir: &Path, state: State) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if read_status(dir).is_ok_and(|s| s.state == state) {
            return;
        }
        assert!(Instant::now() < deadline, "{} never {state}", dir.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_jobs_of_one_model_in_one_second_get_distinct_folders() {
    let ws = tiny_workspace();
    // until two creations fall in the same second (the first pair nearly
    // always), each pair in a folder of its own: after a pair that straddles
    // a second, the next pair's first name would carry a suffix already
    let mut missed = Vec::new();
    let (root, req, a, b) = loop {
        let root = tempfile::tempdir().unwrap();
        let req = request(ws.path(), root.path(), "cl-lsi", &[("dim", "4")]);
        let a = jobs::create(&req).unwrap();
        let b = jobs::create(&req).unwrap();
        if name(&b.dir).starts_with(&name(&a.dir)) {
            break (root, req, a, b);
        }
        missed.push((a.dir, b.dir, root));
        assert!(missed.len() < 10, "never two in one second: {missed:?}");
    };
    let mut made = vec![a.dir.clone(), b.dir.clone()];
    assert!(name(&a.dir).starts_with("cl-lsi-"), "{}", a.dir.display());
    assert_eq!(name(&b.dir), format!("{}-2", name(&a.dir)));
    assert_eq!(b.status.state, State::Queued);
    // at once from several threads: every one gets its own folder
    let dirs: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|_| s.spawn(|| jobs::create(&req).unwrap().dir))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    made.extend(dirs);
    let mut unique = made.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), made.len(), "{made:?}");
    assert_eq!(
        rosetta::session::list_sessions(root.path()).unwrap().len(),
        made.len()
    );
}

#[test]
fn refused_requests_write_nothing() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    let cases: Vec<(JobRequest, &str)> = vec![
        (
            request(ws.path(), &sessions, "nonsense", &[]),
            "unknown model",
        ),
        (
            request(ws.path(), &sessions, "cl-lsi", &[("epochs", "3")]),
            "cl-lsi does not take epochs",
        ),
        (
            request(ws.path(), &sessions, "s2net", &[("no_such", "1")]),
            "no model reads it",
        ),
        // what was meant, and the model's own keys (issue 55)
        (
            request(ws.path(), &sessions, "s2nett", &[]),
            "unknown model `s2nett` (did you mean `s2net`?)",
        ),
        (
            request(ws.path(), &sessions, "s2net", &[("learning_rate", "0.01")]),
            "did you mean `lr`? (s2net's settings: batch, beta, dim",
        ),
        (
            request(ws.path(), &sessions, "s2net", &[("weight_decy", "0.1")]),
            "did you mean `weight_decay`?",
        ),
        (
            request(ws.path(), &sessions, "s2net", &[("dim", "0")]),
            "dim: 0 is out of range",
        ),
        (
            request(ws.path(), &sessions, "s2net", &[("init", "/nonexistent")]),
            "not a trained session",
        ),
        (
            JobRequest {
                device: rosetta::models::DeviceSpec::Cuda(0),
                ..request(ws.path(), &sessions, "cl-lsi", &[])
            },
            "cl-lsi computes in closed form or by CPU code, and runs on the CPU only",
        ),
        (
            JobRequest {
                workspace: ws.path().join("missing.toml"),
                ..request(ws.path(), &sessions, "s2net", &[])
            },
            "cannot open workspace",
        ),
        (
            JobRequest {
                session: Some(root.path().join("exact")),
                ..request(ws.path(), &sessions, "s2net", &[("lr", "-1")])
            },
            "lr: must be > 0",
        ),
    ];
    for (req, want) in cases {
        let e = jobs::create(&req).unwrap_err().to_string();
        assert!(e.contains(want), "{want:?} not in {e:?}");
        let e2 = jobs::start(&req, exe()).unwrap_err().to_string();
        assert_eq!(e, e2);
    }
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn settings_and_devices_are_checked_by_the_engine() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let m = jobs::parse_settings(&s(&["dim = 8", "patience=3"])).unwrap();
    assert_eq!(m["dim"], "8");
    assert_eq!(m["patience"], "3");
    for (bad, want) in [
        (s(&["dim=8", "dim=9"]), "given twice"),
        (s(&["dim"]), "expected KEY=VALUE"),
        (s(&["=3"]), "empty key"),
    ] {
        let e = jobs::parse_settings(&bad).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    assert_eq!(
        jobs::check_setting("xcnn", "negatives", " in-batch ").unwrap(),
        "in-batch"
    );
    assert!(jobs::check_setting("xcnn", "negatives", "random:0").is_err());
    let e = jobs::check_setting("s2net", "negatives", "random:4")
        .unwrap_err()
        .to_string();
    assert!(e.contains("read by hdlr, xcnn"), "{e}");
    assert!(jobs::check_setting("s2net", "patience", "3").is_ok());
    assert!(jobs::check_setting("bm25", "patience", "3").is_err());
    assert!(jobs::check_setting("bm25", "k1", "0.9").is_ok());
    let e = jobs::check_setting("s2net", "epochs", "zero")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("epochs: ") && e.contains("`zero`"), "{e}");
    assert!(jobs::check_setting("s2net", "lr", "inf").is_err());
    assert!(jobs::check_setting("nonsense", "dim", "8").is_err());
    for ok in ["auto", "cpu", "cuda", "cuda:1"] {
        jobs::check_device(ok).unwrap();
    }
    for bad in ["gpu", "cuda:", "cuda:x", ""] {
        assert!(jobs::check_device(bad).is_err(), "{bad}");
    }
}

#[test]
fn launched_job_runs_to_done_and_a_done_session_is_not_resumed() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let req = request(ws.path(), root.path(), "cl-lsi", &[("dim", "4")]);
    let l = jobs::start(&req, exe()).unwrap();
    assert!(l.dir.is_absolute());
    assert_eq!(l.dir.parent().unwrap(), root.path().canonicalize().unwrap());
    assert!(l.pid > 0);
    let st = jobs::wait_final(&l.dir, Duration::from_secs(120)).unwrap();
    assert_eq!(st.state, State::Done, "{st:?}");
    assert_eq!(st.pid, l.pid, "the launched process ran the job");
    assert!(l.dir.join(rosetta::session::BEST_CHECKPOINT).exists());
    let e = jobs::resume(&l.dir, exe()).unwrap_err().to_string();
    assert!(e.contains("done"), "{e}");
    assert_eq!(jobs::cancel(&l.dir).unwrap(), Cancel::Finished(State::Done));
    // a program that cannot be started: the error, and the session says so
    let e = jobs::start(&req, Path::new("/nonexistent/rosetta"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot start"), "{e}");
    let failed: Vec<_> = rosetta::session::list_sessions(root.path())
        .unwrap()
        .into_iter()
        .filter(|e| e.state() == State::Failed)
        .collect();
    assert_eq!(failed.len(), 1);
}

/// An s2net job slowed to `delay_ms` per step, started in the background
/// and running.
fn slowed_job(ws: &Path, root: &Path, delay_ms: &str) -> jobs::Launched {
    let req = request(
        ws,
        root,
        "s2net",
        &[
            ("dim", "8"),
            ("batch", "4"),
            ("epochs", "50"),
            ("step_delay_ms", delay_ms),
        ],
    );
    let l = jobs::start(&req, exe()).unwrap();
    wait_state(&l.dir, State::Running);
    l
}

#[test]
fn cancel_stops_a_slowed_job_which_resume_continues() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let l = slowed_job(ws.path(), root.path(), "100");
    let e = jobs::resume(&l.dir, exe()).unwrap_err().to_string();
    assert!(e.contains("already running"), "{e}");
    assert_eq!(
        jobs::cancel(&l.dir).unwrap(),
        Cancel::Signalled { pid: l.pid }
    );
    let st = jobs::wait_final(&l.dir, Duration::from_secs(60)).unwrap();
    assert_eq!(st.state, State::Cancelled, "{st:?}");
    assert_eq!(
        jobs::cancel(&l.dir).unwrap(),
        Cancel::Finished(State::Cancelled)
    );
    // resumed in the background, it runs again (and is cancelled again)
    let r = jobs::resume(&l.dir, exe()).unwrap();
    assert_eq!(r.dir, l.dir);
    assert_ne!(r.pid, l.pid);
    wait_state(&l.dir, State::Running);
    assert_eq!(
        jobs::cancel(&l.dir).unwrap(),
        Cancel::Signalled { pid: r.pid }
    );
    let st = jobs::wait_final(&l.dir, Duration::from_secs(60)).unwrap();
    assert_eq!(st.state, State::Cancelled, "{st:?}");
}

/// SIGTERM twice (timeout(1) signals the job and then its process group;
/// a user may press cancel twice): the job still finishes its step and ends
/// `cancelled` (the status a resume reads), rather than exiting at once.
#[test]
fn a_job_signalled_twice_still_ends_cancelled() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let l = slowed_job(ws.path(), root.path(), "300");
    for _ in 0..2 {
        assert_eq!(
            jobs::cancel(&l.dir).unwrap(),
            Cancel::Signalled { pid: l.pid }
        );
        // the first signal's handler has run before the second arrives
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = jobs::wait_final(&l.dir, Duration::from_secs(60)).unwrap();
    assert_eq!(st.state, State::Cancelled, "{st:?}");
}

#[test]
fn cli_detach_prints_each_new_session_folder() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let wsf = ws.path().join("workspace.toml");
    let args = [
        "train",
        "--workspace",
        wsf.to_str().unwrap(),
        "--model",
        "cl-lsi",
        "--dim",
        "4",
        "--device",
        "cpu",
        "--detach",
    ];
    let dirs: Vec<std::path::PathBuf> = (0..2)
        .map(|_| {
            let out = rosetta_in(root.path(), &args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().into()
        })
        .collect();
    assert_ne!(dirs[0], dirs[1]);
    for d in &dirs {
        assert_eq!(
            d.parent().unwrap(),
            root.path().join("sessions").canonicalize().unwrap()
        );
        let st = jobs::wait_final(d, Duration::from_secs(120)).unwrap();
        assert_eq!(st.state, State::Done, "{st:?}");
    }
    // refused before anything is written
    let out = rosetta_in(root.path(), &[&args[..9], &["--set", "epochs=2"]].concat());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not take epochs"));
    assert_eq!(
        std::fs::read_dir(root.path().join("sessions"))
            .unwrap()
            .count(),
        2
    );
}

#[test]
fn a_models_own_text_defaults_apply_where_the_workspace_is_silent() {
    let ws = tiny_workspace();
    let p = ws.path().join("workspace.toml");
    let orig = std::fs::read_to_string(&p).unwrap();
    let head = orig.split("[text]").next().unwrap().to_string();
    let sessions = ws.path().join("sessions");
    // silent on stop words: XCNN removes them (its registry default), CCA keeps them
    std::fs::write(&p, format!("{head}[text]\nvocab_per_language = 1000\n")).unwrap();
    let x = jobs::create(&request(ws.path(), &sessions, "xcnn", &[])).unwrap();
    let c = jobs::create(&request(ws.path(), &sessions, "cca", &[])).unwrap();
    assert!(x.config.text.as_ref().unwrap().stopwords);
    assert!(!c.config.text.as_ref().unwrap().stopwords);
    assert_ne!(x.config.workspace_hash, c.config.workspace_hash);
    // the workspace's own key wins
    std::fs::write(
        &p,
        format!("{head}[text]\nvocab_per_language = 1000\nstopwords = false\n"),
    )
    .unwrap();
    let x = jobs::create(&request(ws.path(), &sessions, "xcnn", &[])).unwrap();
    assert!(!x.config.text.as_ref().unwrap().stopwords);
    // every registry row's text defaults parse
    for m in rosetta::models::MODELS {
        rosetta::text::TextSettings::from_pairs(m.text).unwrap();
    }
}

/// Issue 39 item 10: settings within their ranges that cannot fit in
/// memory are refused before a session folder is written, with the
/// estimate; `--max-memory` is the user's limit, through the CLI too.
#[test]
fn jobs_that_cannot_fit_in_memory_are_refused_with_the_estimate() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let sessions = root.path().join("sessions");
    // 3 BiLSTMs of 65,536 units: terabytes, more than any machine
    let req = request(ws.path(), &sessions, "adv-bilstm", &[("hidden", "65536")]);
    let e = jobs::create(&req).unwrap_err().to_string();
    assert!(
        e.contains("need about") && e.contains("TiB") && e.contains("this machine's memory"),
        "{e}"
    );
    // a 65,536-wide discriminator: some 69 GB, more than 16 GiB
    let mut req = request(
        ws.path(),
        &sessions,
        "adv-bilstm",
        &[("disc_hidden", "65536")],
    );
    req.max_memory = Some(16 << 30);
    let e = jobs::create(&req).unwrap_err().to_string();
    assert!(e.contains("need about") && e.contains("GiB"), "{e}");
    // a small job under a smaller limit of the user's
    let mut req = request(ws.path(), &sessions, "s2net", &[("dim", "64")]);
    req.max_memory = Some(4096);
    let e = jobs::create(&req).unwrap_err().to_string();
    assert!(e.contains("--max-memory") && e.contains("KiB"), "{e}");
    assert!(!sessions.exists() || std::fs::read_dir(&sessions).unwrap().next().is_none());
    // the CLI's flag, and a job that fits
    let out = rosetta_in(
        root.path(),
        &[
            "train",
            "--workspace",
            ws.path().join("workspace.toml").to_str().unwrap(),
            "--model",
            "bae",
            "--device",
            "cpu",
            "--session",
            "s",
            "--max-memory",
            "1K",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("need about"), "{err}");
    assert!(!root.path().join("s").exists());
    req.max_memory = Some(1 << 30);
    jobs::create(&req).unwrap();
}

/// Issue 39 item 10: a job that passes its memory estimate but cannot
/// allocate under a smaller address-space limit (`ulimit -v`) aborts, and
/// its session records `failed` with the size that could not be allocated,
/// not `running`.
#[test]
fn an_allocation_failure_ends_the_job_failed_with_its_size() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let req = request(
        ws.path(),
        &root.path().join("sessions"),
        "adv-bilstm",
        &[
            ("hidden", "2048"),
            ("emb", "8"),
            ("nn_hidden", "8"),
            ("dim", "4"),
            ("disc_hidden", "4"),
            ("batch", "4"),
            ("epochs", "1"),
            ("max_query_len", "4"),
            ("max_doc_len", "4"),
        ],
    );
    let s = jobs::create(&req).unwrap();
    let dir = s.dir.to_str().unwrap().to_string();
    // about 1.6 GB of parameters and moments, 1 GB of address space
    let script = format!("ulimit -v 1000000 && exec \"$0\" train --resume '{dir}'",);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg(exe())
        .current_dir(root.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let st = read_status(&s.dir).unwrap();
    assert_eq!(st.state, State::Failed, "{st:?}\n{err}");
    let e = st.error.unwrap_or_default();
    assert!(
        e.contains("memory allocation of") && e.contains("bytes failed"),
        "{e}\n{err}"
    );
}
