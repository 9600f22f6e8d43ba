//! Session folders and the job runner: reliability under SIGKILL, SIGTERM,
//! concurrent jobs, corrupt files, changed workspaces, diverging losses.
//!
//! The runner is driven by a tiny real trainable model defined here
//! (`TestTrainer`, a test double: a linear projection per language trained
//! by gradient descent with momentum). Jobs that must be killed run in a
//! child process: this test binary re-run with `--ignored --exact child_job`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::{Device, Tensor};
use ndarray::{Array2, Axis};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use rosetta::models::{Flow, Hooks, Phase, Resume, StepReport, TrainData, Trainer};
use rosetta::models::{Model, Params};
use rosetta::session::{
    list_sessions, read_status, Checkpoint, MetricRecord, MetricsTail, Session, SessionConfig,
    State, BEST_CHECKPOINT, LAST_CHECKPOINT, METRICS_FILE,
};
use rosetta::text::{CsrMatrix, Vocabulary};
use rosetta::text::{Side, Vocabs};
use rosetta::train::runner::{run_job, Outcome, Quiet, SessionLock};

const HASH: &str = "0123456789abcdef-test-workspace";

// ---------------------------------------------------------------- test model

struct LinearModel {
    w_src: Array2<f32>,
    w_tgt: Array2<f32>,
}

fn unit_rows(mut m: Array2<f32>) -> Array2<f32> {
    for mut r in m.axis_iter_mut(Axis(0)) {
        let n = r.dot(&r).sqrt();
        if n > 0.0 {
            r /= n;
        }
    }
    m
}

fn to_tensor(a: &Array2<f32>) -> Tensor {
    Tensor::from_vec(
        a.iter().copied().collect::<Vec<_>>(),
        (a.nrows(), a.ncols()),
        &Device::Cpu,
    )
    .unwrap()
}

fn from_tensor(t: &Tensor) -> Array2<f32> {
    let v = t.to_vec2::<f32>().unwrap();
    let (r, c) = (v.len(), v[0].len());
    Array2::from_shape_vec((r, c), v.into_iter().flatten().collect()).unwrap()
}

impl Model for LinearModel {
    fn kind(&self) -> &'static str {
        "test-linear"
    }
    fn dim(&self) -> usize {
        self.w_src.ncols()
    }
    fn encode(&self, side: Side, counts: &CsrMatrix) -> rosetta::Result<Array2<f32>> {
        let w = match side {
            Side::Source => &self.w_src,
            Side::Target => &self.w_tgt,
        };
        Ok(unit_rows(counts.to_dense().dot(w)))
    }
    fn term_vectors(&self, side: Side) -> rosetta::Result<Array2<f32>> {
        Ok(unit_rows(match side {
            Side::Source => self.w_src.clone(),
            Side::Target => self.w_tgt.clone(),
        }))
    }
    fn tensors(&self) -> rosetta::Result<Vec<(String, Tensor)>> {
        Ok(vec![
            ("w_src".into(), to_tensor(&self.w_src)),
            ("w_tgt".into(), to_tensor(&self.w_tgt)),
        ])
    }
}

/// Least squares `X_s W_s ≈ X_t W_t` (W_t fixed, random) by minibatch
/// gradient descent with momentum; the momentum is the resumable extra state.
struct TestTrainer;

impl Trainer for TestTrainer {
    /// Outside the registry: its settings are read where used (`get_or`).
    fn check(&self, _params: &Params) -> rosetta::Result<()> {
        Ok(())
    }

    /// A `mono` pre-training phase (`mono_epochs`, learns nothing), then `train`.
    fn plan(&self, data: &TrainData, params: &Params) -> rosetta::Result<Vec<Phase>> {
        let n = data.train_src.n_rows();
        let mut plan = Vec::new();
        let mono: usize = params.get_or("mono_epochs", 0)?;
        if mono > 0 {
            plan.push(Phase::pretraining("mono", mono, n));
        }
        plan.push(Phase::new("train", params.get_or("epochs", 3)?, n));
        Ok(plan)
    }

    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        _device: &Device,
        seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> rosetta::Result<Box<dyn Model>> {
        let dim: usize = params.get_or("dim", 4)?;
        let epochs: usize = params.get_or("epochs", 3)?;
        let batch: usize = params.get_or("batch", 4)?;
        let lr: f32 = params.get_or("lr", 0.05)?;
        let nan_at: usize = params.get_or("nan_at_step", 0)?;
        let mono_epochs: usize = params.get_or("mono_epochs", 0)?;
        params.check_unused()?;
        let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut model = LinearModel {
            w_src: Array2::from_shape_fn((vs, dim), |_| rng.random_range(-0.1..0.1)),
            w_tgt: Array2::from_shape_fn((vt, dim), |_| rng.random_range(-1.0..1.0)),
        };
        let mut vel = Array2::<f32>::zeros((vs, dim));
        let (mut first_epoch, mut step) = (1, 0);
        if let Some(r) = resume {
            model.w_src = from_tensor(&r.tensors["w_src"]);
            model.w_tgt = from_tensor(&r.tensors["w_tgt"]);
            vel = from_tensor(&r.tensors["opt.velocity"]);
            first_epoch = r.epoch + 1;
            step = r.step;
        }
        let n = data.train_src.n_rows();
        // a "mono" phase that learns nothing (phase handling of the runner)
        for epoch in 1..=mono_epochs {
            step += 1;
            hooks.step(&StepReport {
                phase: "mono".into(),
                epoch,
                step,
                loss: 1.0,
                examples: n,
                parts: Vec::new(),
            })?;
            if hooks.epoch_end("mono", epoch, &model, Vec::new())? == Flow::Stop {
                return Ok(Box::new(model));
            }
        }
        for epoch in first_epoch..=epochs {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed * 1000 + epoch as u64));
            for chunk in order.chunks(batch) {
                step += 1;
                let xs = data.train_src.select_rows(chunk).to_dense();
                let y = data
                    .train_tgt
                    .select_rows(chunk)
                    .to_dense()
                    .dot(&model.w_tgt);
                let diff = xs.dot(&model.w_src) - &y;
                let b = chunk.len() as f32;
                let mut loss = (diff.iter().map(|d| d * d).sum::<f32>() / b) as f64;
                if nan_at > 0 && step >= nan_at {
                    loss = f64::NAN;
                }
                let grad = xs.t().dot(&diff) * (2.0 / b);
                vel = vel * 0.9 + grad;
                model.w_src = &model.w_src - &(&vel * lr);
                let flow = hooks.step(&StepReport {
                    phase: "train".into(),
                    epoch,
                    step,
                    loss,
                    examples: chunk.len(),
                    parts: Vec::new(),
                })?;
                if flow == Flow::Stop {
                    return Ok(Box::new(model));
                }
            }
            let extra = vec![("opt.velocity".to_string(), to_tensor(&vel))];
            if hooks.epoch_end("train", epoch, &model, extra)? == Flow::Stop {
                break;
            }
        }
        Ok(Box::new(model))
    }

    fn load(
        &self,
        _vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        _params: &Params,
        _device: &Device,
    ) -> rosetta::Result<Box<dyn Model>> {
        let get = |k: &str| {
            tensors
                .get(k)
                .map(from_tensor)
                .ok_or_else(|| rosetta::Error::invalid(format!("missing tensor {k}")))
        };
        Ok(Box::new(LinearModel {
            w_src: get("w_src")?,
            w_tgt: get("w_tgt")?,
        }))
    }
}

// ---------------------------------------------------------------- data

/// Synthetic aligned pairs: target term `perm[i]` translates source term `i`.
fn data() -> TrainData {
    let v = 16;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut perm: Vec<u32> = (0..v as u32).collect();
    perm.shuffle(&mut rng);
    let mut mk = |n: usize| {
        let (mut s, mut t) = (CsrMatrix::new(v), CsrMatrix::new(v));
        for _ in 0..n {
            let terms: Vec<u32> = (0..3).map(|_| rng.random_range(0..v as u32)).collect();
            s.push_row(terms.iter().map(|&i| (i, 1.0)));
            t.push_row(terms.iter().map(|&i| (perm[i as usize], 1.0)));
        }
        (s, t)
    };
    let (train_src, train_tgt) = mk(40);
    let (valid_src, valid_tgt) = mk(20);
    let voc = |lang: &str| {
        Vocabulary::from_parts(
            lang,
            (0..v).map(|i| format!("{lang}{i}")).collect(),
            vec![5; v],
            40,
        )
    };
    TrainData {
        vocabs: Vocabs {
            source: voc("en"),
            target: voc("hi"),
        },
        mono: train_tgt.clone(),
        mono_positive: vec![None; 40],
        seqs: None,
        texts: None,
        pretrained: None,
        dictionary: None,
        init: None,
        train_src,
        train_tgt,
        valid_src,
        valid_tgt,
    }
}

fn config(params: &[(&str, &str)]) -> SessionConfig {
    SessionConfig {
        rosetta_version: env!("CARGO_PKG_VERSION").into(),
        model: "test-linear".into(),
        workspace: PathBuf::from("tests/fixtures/session/workspace.toml"),
        workspace_hash: HASH.into(),
        seed: 3,
        device_request: rosetta::models::DeviceSpec::Cpu,
        device: String::new(),
        given: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        params: BTreeMap::new(),
        created: "2026-01-01T00:00:00Z".into(),
        text: None,
    }
}

fn run_here(dir: &Path, resume: bool) -> rosetta::Result<Outcome> {
    let mut s = Session::open(dir)?;
    run_job(
        &mut s,
        &TestTrainer,
        &data(),
        HASH,
        resume,
        Arc::new(AtomicBool::new(false)),
        &mut Quiet,
    )
}

fn last_tensors(dir: &Path) -> HashMap<String, Tensor> {
    Checkpoint::read(&dir.join(LAST_CHECKPOINT), &Device::Cpu)
        .unwrap()
        .tensors
}

fn max_diff(a: &HashMap<String, Tensor>, b: &HashMap<String, Tensor>) -> f32 {
    assert_eq!(a.len(), b.len());
    let mut m = 0f32;
    for (k, t) in a {
        let x = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let y = b[k].flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (p, q) in x.iter().zip(&y) {
            m = m.max((p - q).abs());
        }
    }
    m
}

// ---------------------------------------------------------------- child jobs

/// Not a test: the body of a job run in a child process (see `spawn_job`).
#[test]
#[ignore = "helper run by other tests in a child process"]
fn child_job() {
    let dir = PathBuf::from(std::env::var("ROSETTA_TEST_CHILD_DIR").expect("child only"));
    let resume = std::env::var("ROSETTA_TEST_CHILD_RESUME").as_deref() == Ok("1");
    let cancel = rosetta::train::runner::cancel_on_signals().unwrap();
    let mut s = Session::open(&dir).unwrap();
    let o = run_job(
        &mut s,
        &TestTrainer,
        &data(),
        HASH,
        resume,
        cancel,
        &mut Quiet,
    )
    .unwrap();
    eprintln!("child outcome: {o:?}");
}

fn spawn_job(dir: &Path, resume: bool) -> Child {
    // the helper's full name in the suite binary (tests/suite/main.rs)
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "session::child_job",
            "--test-threads=1",
        ])
        .env("ROSETTA_TEST_CHILD_DIR", dir)
        .env("ROSETTA_TEST_CHILD_RESUME", if resume { "1" } else { "0" })
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Reads every session file the way a watcher does and fails on any partial
/// file: status.json and checkpoints must always parse, metrics lines too.
fn check_readable(dir: &Path, tail: &mut MetricsTail) {
    if dir.join("status.json").exists() {
        read_status(dir).expect("status.json always whole");
    }
    for ck in [LAST_CHECKPOINT, BEST_CHECKPOINT] {
        let p = dir.join(ck);
        if p.exists() {
            Checkpoint::read(&p, &Device::Cpu).expect("checkpoint always whole");
        }
    }
    let b = tail.poll().unwrap();
    assert!(b.errors.is_empty(), "{:?}", b.errors);
}

/// Polls (reading every file meanwhile) until `cond` holds on the metrics.
fn wait_until(
    dir: &Path,
    tail: &mut MetricsTail,
    seen: &mut Vec<MetricRecord>,
    what: &str,
    cond: impl Fn(&[MetricRecord]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        check_readable(dir, tail);
        // re-read all records (check_readable consumed the new ones)
        let mut t = MetricsTail::new(dir.join(METRICS_FILE));
        *seen = t.poll().unwrap().records;
        if cond(seen) {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn has_checkpoint(r: &[MetricRecord], epoch: usize) -> bool {
    r.iter().any(|m| {
        matches!(m, MetricRecord::Event { event, epoch: Some(e), .. } if event == "checkpoint" && *e == epoch)
    })
}

fn has_step_in_epoch(r: &[MetricRecord], ep: usize, after: usize) -> bool {
    r.iter().any(
        |m| matches!(m, MetricRecord::Step { epoch, step, .. } if *epoch == ep && *step > after),
    )
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "child did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------- tests

const SLOW: &[(&str, &str)] = &[
    ("epochs", "6"),
    ("batch", "4"),
    ("log_every", "1"),
    ("step_delay_ms", "40"),
];

#[test]
fn sigkill_mid_epoch_then_resume_matches_an_uninterrupted_run() {
    let root = tempfile::tempdir().unwrap();
    // reference: the same job, uninterrupted, in this process
    let reference = Session::create(&root.path().join("ref"), config(SLOW)).unwrap();
    let o = run_here(&reference.dir, false).unwrap();
    assert_eq!(o.state, State::Done);
    assert_eq!(o.epoch, 6);

    let s = Session::create(&root.path().join("killed"), config(SLOW)).unwrap();
    let mut tail = MetricsTail::new(s.dir.join(METRICS_FILE));
    let mut seen = Vec::new();

    // kill 1: mid-epoch 2, after the epoch-1 checkpoint
    let mut child = spawn_job(&s.dir, false);
    wait_until(&s.dir, &mut tail, &mut seen, "epoch 2 steps", |r| {
        has_checkpoint(r, 1) && has_step_in_epoch(r, 2, 12)
    });
    child.kill().unwrap(); // SIGKILL
    wait_exit(&mut child);
    check_readable(&s.dir, &mut tail);
    let st = read_status(&s.dir).unwrap();
    assert_eq!(
        st.state,
        State::Running,
        "a killed job cannot say otherwise"
    );
    assert_eq!(
        st.effective_state(),
        State::Failed,
        "but it shows as failed"
    );
    assert!(st.is_stale());
    let listed = list_sessions(root.path()).unwrap();
    let e = listed.iter().find(|e| e.dir == s.dir).unwrap();
    assert_eq!(e.state(), State::Failed);
    assert!(e.problem.as_deref().unwrap_or("").contains("stale"));
    let ck = Checkpoint::read(&s.dir.join(LAST_CHECKPOINT), &Device::Cpu).unwrap();
    // the last good checkpoint is an epoch boundary before the kill (epoch 1
    // unless this machine stalled for a whole epoch)
    assert!((1..6).contains(&ck.meta.epoch), "{:?}", ck.meta);

    // kill 2: a resumed job killed again, mid-epoch 3
    let mut child = spawn_job(&s.dir, true);
    wait_until(&s.dir, &mut tail, &mut seen, "epoch 3 steps", |r| {
        has_checkpoint(r, 2) && has_step_in_epoch(r, 3, 22)
    });
    child.kill().unwrap();
    wait_exit(&mut child);
    check_readable(&s.dir, &mut tail);

    // final resume, in this process, completes
    let o = run_here(&s.dir, true).unwrap();
    assert_eq!(o.state, State::Done, "{o:?}");
    assert_eq!(o.epoch, 6);
    let st = read_status(&s.dir).unwrap();
    assert_eq!(st.state, State::Done);
    assert_eq!(st.progress, 1.0);

    // the resumed run trained exactly what the uninterrupted one did:
    // momentum and epoch counters came back from the checkpoint
    let d = max_diff(&last_tensors(&s.dir), &last_tensors(&reference.dir));
    assert!(
        d < 1e-5,
        "resumed model differs from the uninterrupted one by {d}"
    );

    // the model loads from best.safetensors and encodes
    let best = Checkpoint::read(&s.dir.join(BEST_CHECKPOINT), &Device::Cpu).unwrap();
    let vocabs = Session::open(&s.dir).unwrap().vocabs().unwrap();
    let m = TestTrainer
        .load(
            &vocabs,
            best.model_tensors(),
            &Params::new(best.meta.params.clone()),
            &Device::Cpu,
        )
        .unwrap();
    let e = m.encode(Side::Source, &data().valid_src).unwrap();
    assert_eq!(e.dim(), (20, 4));

    // the history read back has two resumes and one step record per step
    let recs = Session::open(&s.dir).unwrap().metrics().unwrap().records;
    let resumes = recs
        .iter()
        .filter(|r| matches!(r, MetricRecord::Event { event, .. } if event == "resume"))
        .count();
    assert_eq!(resumes, 2);
    let hist = rosetta::session::effective_history(&recs);
    let steps: Vec<usize> = hist
        .iter()
        .filter_map(|r| match r {
            MetricRecord::Step { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    assert_eq!(steps, (1..=60).collect::<Vec<_>>());
    // the config lists every parameter with its value after defaults
    let cfg = SessionConfig::read(&s.dir).unwrap();
    assert_eq!(cfg.params.get("lr").map(String::as_str), Some("0.05"));
    assert_eq!(cfg.params.get("patience").map(String::as_str), Some("5"));
    assert_eq!(cfg.device, "cpu");
}

#[test]
fn sigterm_cancels_after_the_step_and_resume_finishes() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(&root.path().join("s"), config(SLOW)).unwrap();
    let mut tail = MetricsTail::new(s.dir.join(METRICS_FILE));
    let mut seen = Vec::new();
    let mut child = spawn_job(&s.dir, false);
    wait_until(&s.dir, &mut tail, &mut seen, "epoch 2 steps", |r| {
        has_checkpoint(r, 1) && has_step_in_epoch(r, 2, 11)
    });
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(wait_exit(&mut child).success());
    let st = read_status(&s.dir).unwrap();
    assert_eq!(st.state, State::Cancelled);
    assert!(st.error.as_deref().unwrap().contains("--resume"), "{st:?}");
    check_readable(&s.dir, &mut tail);
    let o = run_here(&s.dir, true).unwrap();
    assert_eq!(o.state, State::Done);
}

#[test]
fn two_jobs_on_one_workspace_both_complete() {
    let root = tempfile::tempdir().unwrap();
    let a = Session::create_in(
        root.path(),
        config(&[("epochs", "3"), ("step_delay_ms", "5")]),
    )
    .unwrap();
    let b = Session::create_in(
        root.path(),
        config(&[("epochs", "3"), ("step_delay_ms", "5")]),
    )
    .unwrap();
    assert_ne!(a.dir, b.dir, "same-second sessions get distinct folders");
    let mut ca = spawn_job(&a.dir, false);
    let mut cb = spawn_job(&b.dir, false);
    assert!(wait_exit(&mut ca).success());
    assert!(wait_exit(&mut cb).success());
    for s in [&a, &b] {
        assert_eq!(read_status(&s.dir).unwrap().state, State::Done);
        Checkpoint::read(&s.dir.join(BEST_CHECKPOINT), &Device::Cpu).unwrap();
    }
    let listed = list_sessions(root.path()).unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed
        .iter()
        .all(|e| e.state() == State::Done && e.problem.is_none()));
}

#[test]
fn one_session_cannot_run_twice_at_once() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(&root.path().join("s"), config(&[])).unwrap();
    let _held = SessionLock::acquire(&s.dir).unwrap();
    let e = run_here(&s.dir, false).unwrap_err().to_string();
    assert!(e.contains("in use"), "{e}");
}

#[test]
fn corrupt_metrics_line_and_checkpoint_are_reported_and_the_rest_loads() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(&root.path().join("s"), config(&[("epochs", "2")])).unwrap();
    run_here(&s.dir, false).unwrap();
    let path = s.dir.join(METRICS_FILE);
    let good = Session::open(&s.dir).unwrap().metrics().unwrap();
    assert!(good.errors.is_empty());
    let n = good.records.len();
    // corrupt line 3, and a truncated last line
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines[2] = "{\"kind\":\"step\",\"phase\":".into();
    let mut bad = lines.join("\n");
    bad.push_str("\n{\"kind\":\"event\",\"ev");
    std::fs::write(&path, bad).unwrap();
    let got = Session::open(&s.dir).unwrap().metrics().unwrap();
    assert_eq!(got.records.len(), n - 1);
    assert_eq!(got.errors.len(), 2);
    let e0 = got.errors[0].to_string();
    assert!(e0.contains(&format!("{}:3:", path.display())), "{e0}");
    let e1 = got.errors[1].to_string();
    assert!(e1.contains(&format!(":{}: truncated", n + 1)), "{e1}");

    // a truncated checkpoint names its file; the session still opens and lists
    let ck = s.dir.join(LAST_CHECKPOINT);
    let bytes = std::fs::read(&ck).unwrap();
    std::fs::write(&ck, &bytes[..bytes.len() / 2]).unwrap();
    let e = Checkpoint::read(&ck, &Device::Cpu).unwrap_err().to_string();
    assert!(
        e.contains("last.safetensors") && e.contains("not a valid checkpoint"),
        "{e}"
    );
    Checkpoint::read(&s.dir.join(BEST_CHECKPOINT), &Device::Cpu).unwrap();
    let mut st = read_status(&s.dir).unwrap();
    st.state = State::Cancelled;
    crate::common::write_status(&s.dir, &st);
    let e = run_here(&s.dir, true).unwrap_err().to_string();
    assert!(e.contains("last.safetensors"), "{e}");
    // a corrupt status.json is reported with its path, the session still listed
    std::fs::write(s.dir.join("status.json"), "{\"state\": \"runn").unwrap();
    let listed = list_sessions(root.path()).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].config.is_some());
    assert!(listed[0]
        .problem
        .as_deref()
        .unwrap()
        .contains("status.json"));
}

#[test]
fn changed_workspace_is_detected_by_its_hash() {
    let root = tempfile::tempdir().unwrap();
    // a queued session whose data changed fails
    let q = Session::create(&root.path().join("q"), config(&[("epochs", "1")])).unwrap();
    let mut q = Session::open(&q.dir).unwrap();
    let e = run_job(
        &mut q,
        &TestTrainer,
        &data(),
        "a-different-hash",
        false,
        Arc::new(AtomicBool::new(false)),
        &mut Quiet,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("changed since this session was made"), "{e}");
    let st = read_status(&q.dir).unwrap();
    assert_eq!(st.state, State::Failed);
    assert!(st.error.unwrap().contains("changed"));
    // a cancelled one is refused and keeps its state and checkpoints
    let s = Session::create(&root.path().join("s"), config(&[("epochs", "2")])).unwrap();
    run_here(&s.dir, false).unwrap();
    let mut st = read_status(&s.dir).unwrap();
    st.state = State::Cancelled;
    crate::common::write_status(&s.dir, &st);
    let mut s = Session::open(&s.dir).unwrap();
    let e = run_job(
        &mut s,
        &TestTrainer,
        &data(),
        "a-different-hash",
        true,
        Arc::new(AtomicBool::new(false)),
        &mut Quiet,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("changed since this session was made"), "{e}");
    assert!(e.contains("config.toml"), "{e}");
    assert_eq!(read_status(&s.dir).unwrap().state, State::Cancelled);
    // and a done session has nothing to resume
    let mut st = read_status(&s.dir).unwrap();
    st.state = State::Done;
    crate::common::write_status(&s.dir, &st);
    let e = run_here(&s.dir, true).unwrap_err().to_string();
    assert!(e.contains("nothing to resume"), "{e}");
}

#[test]
fn non_finite_loss_fails_and_keeps_the_best_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(
        &root.path().join("s"),
        config(&[("epochs", "5"), ("nan_at_step", "25")]),
    )
    .unwrap();
    let o = run_here(&s.dir, false).unwrap();
    assert_eq!(o.state, State::Failed);
    let err = o.error.unwrap();
    assert!(
        err.contains("loss is NaN") && err.contains("step 25"),
        "{err}"
    );
    let st = read_status(&s.dir).unwrap();
    assert_eq!(st.state, State::Failed);
    let best = Checkpoint::read(&s.dir.join(BEST_CHECKPOINT), &Device::Cpu).unwrap();
    assert!(best.meta.epoch <= 2);
    let kept = format!("best checkpoint (epoch {}) is kept", best.meta.epoch);
    assert!(err.contains(&kept), "{err}");
}

#[test]
fn early_stopping_on_validation_mrr() {
    let root = tempfile::tempdir().unwrap();
    // lr 0: the MRR never improves after epoch 1
    let s = Session::create(
        &root.path().join("s"),
        config(&[("epochs", "20"), ("lr", "0"), ("patience", "2")]),
    )
    .unwrap();
    let o = run_here(&s.dir, false).unwrap();
    assert_eq!(o.state, State::Done);
    assert!(o.early_stopped);
    assert_eq!(o.epoch, 3);
    assert_eq!(o.best_epoch, Some(1));
    let recs = Session::open(&s.dir).unwrap().metrics().unwrap().records;
    assert!(recs
        .iter()
        .any(|r| matches!(r, MetricRecord::Event { event, .. } if event == "early_stop")));
    // with learning, validation MRR rises above chance
    let s2 = Session::create(&root.path().join("s2"), config(&[("epochs", "8")])).unwrap();
    let o = run_here(&s2.dir, false).unwrap();
    assert!(o.best_mrr.unwrap() > 0.5, "{o:?}");
}

#[test]
fn unknown_setting_fails_the_job_with_its_name() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(&root.path().join("s"), config(&[("bacth", "3")])).unwrap();
    let o = run_here(&s.dir, false).unwrap();
    assert_eq!(o.state, State::Failed);
    assert!(o.error.unwrap().contains("bacth"));
}

#[test]
fn fixture_session_reads_with_its_corrupt_line_reported() {
    let dir = Path::new("tests/fixtures/session/sample");
    let s = Session::open(dir).unwrap();
    assert_eq!(s.status.state, State::Done);
    let m = s.metrics().unwrap();
    assert!(!m.records.is_empty());
    assert_eq!(m.errors.len(), 1);
    assert!(
        m.errors[0].to_string().contains("metrics.jsonl:4:"),
        "{}",
        m.errors[0]
    );
    let listed = list_sessions(Path::new("tests/fixtures/session")).unwrap();
    assert!(listed.iter().any(|e| e.dir.ends_with("sample")));
}

// ---------------------------------------------------------------- CLI

fn rosetta(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn cli_cancel_stops_a_running_job_and_jobs_tells_the_truth() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(&root.path().join("run"), config(SLOW)).unwrap();
    let mut tail = MetricsTail::new(s.dir.join(METRICS_FILE));
    let mut seen = Vec::new();
    let mut child = spawn_job(&s.dir, false);
    wait_until(&s.dir, &mut tail, &mut seen, "a few steps", |r| {
        has_step_in_epoch(r, 1, 2)
    });
    let dir = s.dir.to_str().unwrap();
    let r = root.path().to_str().unwrap();
    // while it runs, jobs shows it running
    let out = rosetta(&["jobs", "--root", r, "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sessions"][0]["state"], "running");
    let out = rosetta(&["cancel", dir]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("cancelled"));
    wait_exit(&mut child);
    assert_eq!(read_status(&s.dir).unwrap().state, State::Cancelled);
    // cancelling again says so
    let out = rosetta(&["cancel", dir]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("already cancelled"));

    // a killed job: jobs shows failed (stale), not running
    let k = Session::create(&root.path().join("killed"), config(SLOW)).unwrap();
    let mut tail = MetricsTail::new(k.dir.join(METRICS_FILE));
    let mut child = spawn_job(&k.dir, false);
    wait_until(&k.dir, &mut tail, &mut seen, "a step", |r| {
        has_step_in_epoch(r, 1, 1)
    });
    child.kill().unwrap();
    wait_exit(&mut child);
    let out = rosetta(&["jobs", "--root", r, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let killed = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["session"].as_str().unwrap().ends_with("killed"))
        .unwrap();
    assert_eq!(killed["state"], "failed");
    assert_eq!(killed["recorded_state"], "running");
    assert_eq!(killed["stale"], true);
    let table = String::from_utf8_lossy(&rosetta(&["jobs", "--root", r]).stdout).to_string();
    assert!(table.contains("failed (stale)"), "{table}");
    let out = rosetta(&["cancel", k.dir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("stale"));
}

#[test]
fn cli_plot_overlays_sessions_and_reports_bad_lines() {
    let root = tempfile::tempdir().unwrap();
    let a = Session::create(
        &root.path().join("a"),
        config(&[("epochs", "3"), ("log_every", "2")]),
    )
    .unwrap();
    let b = Session::create(
        &root.path().join("b"),
        config(&[("epochs", "2"), ("lr", "0.02")]),
    )
    .unwrap();
    run_here(&a.dir, false).unwrap();
    run_here(&b.dir, false).unwrap();
    let png = root.path().join("loss.png");
    let out = rosetta(&[
        "plot",
        a.dir.to_str().unwrap(),
        b.dir.to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let svg = root.path().join("mrr.svg");
    let out = rosetta(&[
        "plot",
        a.dir.to_str().unwrap(),
        "tests/fixtures/session/sample",
        "--out",
        svg.to_str().unwrap(),
        "--metric",
        "MRR",
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sample/metrics.jsonl:4:"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("\na\n</text>") && text.contains("\nsample\n</text>"),
        "the legend names both sessions"
    );
    let out = rosetta(&["plot", a.dir.to_str().unwrap(), "--out", "x.gif"]);
    assert!(!out.status.success());
}

#[test]
fn extra_validation_figures_are_recorded_per_epoch() {
    let root = tempfile::tempdir().unwrap();
    let mut s = Session::create(&root.path().join("s"), config(&[("epochs", "2")])).unwrap();
    let calls = std::cell::Cell::new(0usize);
    let extra = |m: &dyn Model| -> rosetta::Result<BTreeMap<String, f64>> {
        calls.set(calls.get() + 1);
        Ok([("adhoc_dim".to_string(), m.dim() as f64)].into())
    };
    let o = rosetta::train::runner::run_job_with_validation(
        &mut s,
        &TestTrainer,
        &data(),
        HASH,
        false,
        Arc::new(AtomicBool::new(false)),
        &mut Quiet,
        Some(&extra),
    )
    .unwrap();
    assert_eq!(o.state, State::Done);
    assert_eq!(calls.get(), 2);
    let recs = s.metrics().unwrap().records;
    let valid: Vec<_> = recs
        .iter()
        .filter_map(|r| match r {
            MetricRecord::Valid { scores, .. } => Some(scores.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(valid.len(), 2);
    assert_eq!(valid[1]["adhoc_dim"], 4.0);
    assert!(valid[1].contains_key("MRR"));
}

#[test]
fn loaded_session_finds_translations_as_neighbours() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(&root.path().join("s"), config(&[("epochs", "30")])).unwrap();
    run_here(&s.dir, false).unwrap();
    let mut s = Session::open(&s.dir).unwrap();
    // analysed with stop words removed (not the default), to see them refused
    s.config.text = Some(rosetta::text::TextConfig {
        stopwords: true,
        ..Default::default()
    });
    let best = s.checkpoint("best", &Device::Cpu).unwrap();
    let vocabs = s.vocabs().unwrap();
    let model = TestTrainer
        .load(
            &vocabs,
            best.model_tensors(),
            &Params::default(),
            &Device::Cpu,
        )
        .unwrap();
    let l = rosetta::session::Loaded::from_parts(s, model, vocabs).unwrap();
    // target term perm[i] translates source term i: the learnt space should
    // put most translations first
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut perm: Vec<u32> = (0..16).collect();
    perm.shuffle(&mut rng);
    let mut hits = [0, 0];
    for (i, p) in perm.iter().enumerate() {
        for (j, csls) in [false, true].into_iter().enumerate() {
            let n = l
                .neighbours(&format!("en{i}"), Side::Source, 3, csls)
                .unwrap();
            assert_eq!(n.cross.len(), 3);
            assert_eq!(n.same.len(), 3);
            assert!(n.same.iter().all(|x| x.term != format!("en{i}")));
            if n.cross[0].term == format!("hi{p}") {
                hits[j] += 1;
            }
        }
    }
    assert!(hits[0] >= 12 && hits[1] >= 12, "{hits:?}");
    let e = l
        .neighbours("xyz", Side::Source, 3, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not in the en vocabulary"), "{e}");
    assert!(l
        .neighbours("the", Side::Source, 3, false)
        .unwrap_err()
        .to_string()
        .contains("stop word"));
    let emb = l
        .encode_texts(Side::Target, &["hi1 hi2", "nothing known"])
        .unwrap();
    assert_eq!(emb.dim(), (2, 4));
    assert_eq!(emb.row(1).iter().map(|x| x.abs()).sum::<f32>(), 0.0);
}

#[test]
fn patience_counts_within_a_phase_and_mono_is_not_early_stopped() {
    let root = tempfile::tempdir().unwrap();
    let s = Session::create(
        &root.path().join("s"),
        config(&[("epochs", "3"), ("mono_epochs", "4"), ("patience", "2")]),
    )
    .unwrap();
    let mut progress = Vec::new();
    struct Rec<'a>(&'a mut Vec<(String, f64)>);
    impl rosetta::train::runner::Observer for Rec<'_> {
        fn status(&mut self, s: &rosetta::session::Status) {
            self.0.push((s.phase.clone(), s.progress));
        }
    }
    let mut sess = Session::open(&s.dir).unwrap();
    let o = run_job(
        &mut sess,
        &TestTrainer,
        &data(),
        HASH,
        false,
        Arc::new(AtomicBool::new(false)),
        &mut Rec(&mut progress),
    )
    .unwrap();
    assert_eq!(o.state, State::Done);
    assert!(!o.early_stopped, "{o:?}");
    assert_eq!(o.epoch, 3);
    // progress runs over mono_epochs + epochs, never backwards
    assert!(
        progress.windows(2).all(|w| w[1].1 >= w[0].1),
        "{progress:?}"
    );
    let mono_end = progress
        .iter()
        .filter(|p| p.0 == "mono")
        .map(|p| p.1)
        .fold(0.0, f64::max);
    assert!((mono_end - 4.0 / 7.0).abs() < 1e-9, "{progress:?}");
    assert_eq!(progress.last().unwrap().1, 1.0);
}

// ---------------------------------------------------------------- CLI on a real workspace

use crate::common;
use common::{rosetta_in, tiny_workspace};

fn wait_pid_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while rosetta::session::pid_alive(pid, None) {
        assert!(Instant::now() < deadline, "process {pid} did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cli_detached_job_killed_then_resumed_completes_with_a_loadable_model() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let sdir = root.path().join("s2");
    let wsf = ws.path().join("workspace.toml");
    let out = rosetta_in(
        root.path(),
        &[
            "train",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            "s2net",
            "--dim",
            "8",
            "--epochs",
            "6",
            "--batch",
            "4",
            "--set",
            "step_delay_ms=40",
            "--set",
            "log_every=1",
            "--session",
            sdir.to_str().unwrap(),
            "--detach",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(Path::new(&printed), sdir.canonicalize().unwrap());
    let mut tail = MetricsTail::new(sdir.join(METRICS_FILE));
    let mut seen = Vec::new();
    wait_until(
        &sdir,
        &mut tail,
        &mut seen,
        "epoch 2 of the detached job",
        |r| {
            has_checkpoint(r, 1)
                && r.iter()
                    .any(|m| matches!(m, MetricRecord::Step { epoch: 2, .. }))
        },
    );
    let st = read_status(&sdir).unwrap();
    assert_eq!(st.state, State::Running);
    // SAFETY: SIGKILL to the job this test started.
    unsafe { libc::kill(st.pid as i32, libc::SIGKILL) };
    wait_pid_gone(st.pid);
    check_readable(&sdir, &mut tail);
    let out = rosetta_in(
        root.path(),
        &["jobs", "--root", root.path().to_str().unwrap()],
    );
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(table.contains("failed (stale)"), "{table}");
    // resume in the foreground: it completes
    let out = rosetta_in(root.path(), &["train", "--resume", sdir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("done"));
    let st = read_status(&sdir).unwrap();
    assert_eq!((st.state, st.epoch), (State::Done, 6));
    // the model loads and evaluates
    let out = rosetta_in(
        root.path(),
        &["eval", "--session", sdir.to_str().unwrap(), "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["sentence"]["MRR"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["adhoc"]["MAP"].as_f64().is_some(), "{v}");
    let log = std::fs::read_to_string(sdir.join("log.txt")).unwrap();
    assert!(log.contains("resuming from"), "{log}");
}

#[test]
fn cli_two_jobs_on_one_fresh_workspace_both_complete() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let wsf = ws.path().join("workspace.toml");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_rosetta"))
            .current_dir(root.path())
            .args([
                "train",
                "--workspace",
                wsf.to_str().unwrap(),
                "--model",
                "s2net",
                "--dim",
                "8",
                "--epochs",
                "3",
                "--batch",
                "4",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // both build the workspace's prepared-data cache at the same time
    let (a, b) = (spawn(), spawn());
    for c in [a, b] {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let listed = list_sessions(&root.path().join("sessions")).unwrap();
    assert_eq!(listed.len(), 2);
    for e in &listed {
        assert_eq!(e.state(), State::Done, "{e:?}");
        assert!(e
            .dir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("s2net-"));
    }
}

#[test]
fn cli_changed_workspace_is_reported_by_eval_and_resume() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let sdir = root.path().join("lsi");
    let wsf = ws.path().join("workspace.toml");
    let out = rosetta_in(
        root.path(),
        &[
            "train",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            "s2net",
            "--dim",
            "4",
            "--epochs",
            "2",
            "--session",
            sdir.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ok = rosetta_in(
        root.path(),
        &[
            "eval",
            "--session",
            sdir.to_str().unwrap(),
            "--task",
            "sentence",
        ],
    );
    assert!(ok.status.success());
    // the data changes
    let train = ws.path().join("train.en");
    let mut text = std::fs::read_to_string(&train).unwrap();
    text = text.replacen("the", "a", 1);
    std::fs::write(&train, text).unwrap();
    let out = rosetta_in(root.path(), &["eval", "--session", sdir.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("changed since this session was made"), "{err}");
    assert!(err.contains("config.toml"), "{err}");
    // a resume of an interrupted session is refused for the same reason
    let mut st = read_status(&sdir).unwrap();
    st.state = State::Cancelled;
    crate::common::write_status(&sdir, &st);
    let out = rosetta_in(root.path(), &["train", "--resume", sdir.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("changed since"));
    assert_eq!(read_status(&sdir).unwrap().state, State::Cancelled);
}
