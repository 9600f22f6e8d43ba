//! JPLSA and CPLSA (seed 001's bilingual topic models) on the tiny fixture
//! workspace: EM's objective never decreases, CPLSA's projection closes the
//! gap between a pair's topic fractions as its strength grows, folding in a
//! training pair recovers its training θ, encodings are distributions, and
//! both train end to end as jobs (metrics stream, resume is the same run,
//! search, neighbours and evaluation work).

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use serde_json::Value;

use rosetta::corpus::{Prepared, Workspace};
use rosetta::models::plsa::{Em, PlsaConfig, PrConfig, CPLSA, EM_THETA, JPLSA};
use rosetta::models::{Model, TrainData};
use rosetta::session::{
    MetricRecord, MetricsTail, Session, SessionConfig, State, BEST_CHECKPOINT, LAST_CHECKPOINT,
    METRICS_FILE,
};
use rosetta::space::Similarity;
use rosetta::text::Side;
use rosetta::train::runner::{run_job, Observer, Outcome, Quiet};

use common::{assert_searchable, bits_of, metrics_records, rosetta_in, tiny_workspace, train};

/// The tiny workspace's prepared training data (cached beside it).
fn tiny_data(ws_dir: &Path) -> (TrainData, String) {
    let ws = Workspace::load(&ws_dir.join("workspace.toml")).unwrap();
    let prepared = Prepared::load_or_build(&ws).unwrap();
    let hash = prepared.hash.clone();
    (TrainData::from_prepared(&prepared, Vec::new()), hash)
}

fn cfg(k: usize, pr: Option<PrConfig>) -> PlsaConfig {
    PlsaConfig {
        topics: k,
        alpha: 1.1,
        beta: 1.01,
        epochs: 0,
        fold_in: 10,
        // the training prior, so that folding in a training pair finds its θ
        fold_in_alpha: 1.1,
        pr,
    }
}

#[test]
fn jplsa_objective_never_decreases_on_the_fixture() {
    let ws = tiny_workspace();
    let (d, _) = tiny_data(ws.path());
    for (k, seed) in [(4, 1), (8, 2), (20, 3)] {
        let mut em = Em::new(JPLSA, &d.train_src, &d.train_tgt, cfg(k, None), seed, None).unwrap();
        let first = em.report().objective();
        let mut last = first;
        for i in 1..=100 {
            let o = em.iterate().objective();
            assert!(o.is_finite());
            // f64 sums: a tie may differ in the last bits
            assert!(
                o >= last - 1e-12 * last.abs(),
                "K={k} iteration {i}: {last} -> {o}"
            );
            last = o;
        }
        assert!(
            last > first + 0.1,
            "K={k}: EM did not move ({first} -> {last})"
        );
    }
}

/// At the same EM state, CPLSA's E-step (the pairs' posteriors projected by
/// `pr_steps` dual steps) leaves a smaller constraint violation the more
/// steps it takes, and almost none (< 1e-3) once ε is half JPLSA's mean
/// largest gap.
#[test]
fn cplsa_violation_shrinks_with_strength() {
    let ws = tiny_workspace();
    let (d, _) = tiny_data(ws.path());
    let mut em = Em::new(JPLSA, &d.train_src, &d.train_tgt, cfg(6, None), 5, None).unwrap();
    for _ in 0..10 {
        em.iterate();
    }
    let state: HashMap<String, Tensor> = state_tensors(&em);
    let at = |steps: usize, epsilon: f64| {
        let pr = PrConfig { epsilon, steps };
        let e = Em::new(
            CPLSA,
            &d.train_src,
            &d.train_tgt,
            cfg(6, Some(pr)),
            5,
            Some((10, &state)),
        )
        .unwrap();
        e.report()
    };
    let none = at(0, 0.0);
    assert!(none.violation > 0.005, "{none:?}");
    assert_eq!(none.kl, 0.0);
    let mut last = none.violation;
    for steps in [2, 8, 32, 128] {
        let r = at(steps, 0.0);
        assert!(r.violation < last, "{steps} steps: {r:?}, before {last}");
        assert!(r.topic_tv < none.topic_tv, "{r:?}");
        assert!(r.kl > 0.0, "{r:?}");
        last = r.violation;
    }
    assert!(last < 0.1 * none.violation, "{last} vs {}", none.violation);
    let loose = at(128, none.violation / 2.0);
    assert!(loose.violation < 1e-3, "{loose:?}");
    // the data's log-likelihood is the state's, whatever the projection
    assert_eq!(loose.loglik.to_bits(), none.loglik.to_bits());
}

/// The EM state as the extra tensors a checkpoint holds.
fn state_tensors(em: &Em<'_>) -> HashMap<String, Tensor> {
    let st = em.state();
    let t = |v: &Vec<f64>| Tensor::from_vec(v.clone(), (v.len() / st.k, st.k), &Device::Cpu);
    HashMap::from([
        (EM_THETA.to_string(), t(&st.theta).unwrap()),
        ("em.phi.source".to_string(), t(&st.phi[0]).unwrap()),
        ("em.phi.target".to_string(), t(&st.phi[1]).unwrap()),
    ])
}

/// Folding in a training pair (both sides, φ fixed) with enough iterations
/// recovers the θ EM gave it: after 2000 EM iterations (converged on the
/// fixture), 2000 folding-in iterations put every entry within 1e-6 of the
/// training θ (measured: 3e-9 at K = 4 and 12), and the seed's 10
/// iterations within 1e-3 on average (measured: 1.2e-4 and 6e-5). One side alone gives another
/// θ (the pair's is fitted to both sides), still a distribution.
#[test]
fn folding_in_a_training_pair_recovers_its_theta() {
    let ws = tiny_workspace();
    let (d, _) = tiny_data(ws.path());
    for k in [4, 12] {
        let mut em = Em::new(JPLSA, &d.train_src, &d.train_tgt, cfg(k, None), 7, None).unwrap();
        for _ in 0..2000 {
            em.iterate();
        }
        let theta = em.state().theta.clone();
        let model = em.model().unwrap();
        let pair = [(Side::Source, &d.train_src), (Side::Target, &d.train_tgt)];
        let folded = model.fold_in(&pair, 2000).unwrap();
        let worst = folded
            .iter()
            .zip(&theta)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f64, f64::max);
        assert!(worst < 1e-6, "K={k}: largest |θ_fold − θ_train| = {worst}");
        let ten = model.fold_in(&pair, 10).unwrap();
        let mean: f64 = ten
            .iter()
            .zip(&theta)
            .map(|(a, b)| (a - b).abs())
            .sum::<f64>()
            / theta.len() as f64;
        assert!(mean < 1e-3, "K={k}: mean |θ_fold10 − θ_train| = {mean}");
        let one = model.encode(Side::Source, &d.train_src).unwrap();
        Similarity::JensenShannon
            .check_rows(one.view(), "source encodings")
            .unwrap();
    }
}

// ------------------------------------------------------------ jobs

fn run_cli_train(root: &Path, model: &str, dir: &Path, more: &[&str]) {
    train(root, &root.join("workspace.toml"), model, dir, more);
}

const QUICK: [&str; 6] = ["--dim", "4", "--epochs", "5", "--set", "patience=100"];

/// Both models as CLI jobs: a step record per EM iteration with its parts,
/// a validation per iteration, JPLSA's loss never rising; the session
/// searches, has neighbours, evaluates, and its model encodes texts as
/// distributions compared by Jensen–Shannon.
#[test]
fn both_models_train_as_jobs_and_search() {
    let ws = tiny_workspace();
    let root = ws.path();
    for model in [JPLSA, CPLSA] {
        let dir = root.join(model);
        run_cli_train(root, model, &dir, &QUICK);
        let recs = metrics_records(&dir);
        let steps: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "step").collect();
        assert_eq!(steps.len(), 5, "{model}: {recs:?}");
        let mut last = f64::INFINITY;
        for (i, s) in steps.iter().enumerate() {
            assert_eq!(s["phase"], "em");
            assert_eq!(s["epoch"].as_u64(), Some(i as u64 + 1));
            let loss = s["loss"].as_f64().unwrap();
            assert!(loss.is_finite() && loss > 0.0, "{s}");
            let p = &s["parts"];
            let keys: &[&str] = if model == CPLSA {
                &[
                    "loglik",
                    "log_prior",
                    "perplexity",
                    "topic_tv",
                    "kl_pr",
                    "violation",
                ]
            } else {
                &["loglik", "log_prior", "perplexity", "topic_tv"]
            };
            for k in keys {
                assert!(
                    p[k].as_f64().is_some_and(f64::is_finite),
                    "{model} {k}: {s}"
                );
            }
            let sum = p["loglik"].as_f64().unwrap() + p["log_prior"].as_f64().unwrap()
                - p["kl_pr"].as_f64().unwrap_or(0.0);
            assert!((loss + sum).abs() < 1e-9 * loss.abs(), "{s}");
            if model == JPLSA {
                assert!(loss <= last + 1e-12 * last.abs(), "{model}: loss rose: {s}");
            }
            last = loss;
        }
        let valid: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "valid").collect();
        assert_eq!(valid.len(), 5, "{model}");
        for v in &valid {
            let m = v["MRR"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&m), "{v}");
        }
        assert_searchable(root, &dir, "the dog drinks water", "water");
        // the trained model, as every command loads it
        let s = Session::open(&dir).unwrap();
        let (m, _) = s.load_model(&Device::Cpu).unwrap();
        assert_eq!(m.kind(), model);
        assert_eq!(m.dim(), 4);
        assert_eq!(m.similarity(), Similarity::JensenShannon);
        let (d, _) = tiny_data(root);
        let mut texts = d.valid_src.clone();
        texts.push_row([]);
        let e = m.encode(Side::Source, &texts).unwrap();
        Similarity::JensenShannon
            .check_rows(e.view(), "encodings")
            .unwrap();
        for r in e.rows().into_iter().take(texts.n_rows() - 1) {
            assert!((r.sum() - 1.0).abs() < 1e-4 && r.iter().all(|&x| x >= 0.0));
        }
        assert!(e.row(texts.n_rows() - 1).iter().all(|&x| x == 0.0));
        let tv = m.term_vectors(Side::Target).unwrap();
        Similarity::JensenShannon
            .check_rows(tv.view(), "term vectors")
            .unwrap();
    }
}

#[test]
fn bad_settings_are_refused() {
    let ws = tiny_workspace();
    let root = ws.path();
    let wsf = root.join("workspace.toml");
    let go = |model: &str, set: &str, dir: &str| {
        rosetta_in(
            root,
            &[
                "train",
                "--workspace",
                wsf.to_str().unwrap(),
                "--model",
                model,
                "--device",
                "cpu",
                "--session",
                root.join(dir).to_str().unwrap(),
                "--set",
                set,
            ],
        )
    };
    for (model, set, want) in [
        (JPLSA, "alpha=0.5", "alpha"),
        (JPLSA, "beta=NaN", "beta"),
        (CPLSA, "pr_epsilon=2", "pr_epsilon"),
        (JPLSA, "pr_steps=3", "pr_steps"),
        (CPLSA, "fold_in=0", "fold_in"),
    ] {
        let out = go(model, set, "refused");
        assert!(!out.status.success(), "{model} {set} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{model} {set}: {err}");
        assert!(
            !root.join("refused").exists(),
            "{set}: a session was written"
        );
    }
    // more topics than the tiny vocabulary or its pairs: the job fails saying so
    let out = go(JPLSA, "dim=4000", "big");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success() && text.contains("dim 4000"), "{text}");
}

// ------------------------------------------------------------ resume

fn config(ws_dir: &Path, hash: &str, model: &str, kv: &[(&str, &str)]) -> SessionConfig {
    SessionConfig {
        rosetta_version: env!("CARGO_PKG_VERSION").into(),
        model: model.into(),
        workspace: ws_dir.join("workspace.toml"),
        workspace_hash: hash.into(),
        seed: 7,
        device_request: rosetta::models::DeviceSpec::Cpu,
        device: String::new(),
        given: kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        params: BTreeMap::new(),
        created: "2026-01-01T00:00:00Z".into(),
        text: None,
    }
}

fn run(dir: &Path, data: &TrainData, hash: &str, resume: bool, obs: &mut dyn Observer) -> Outcome {
    let mut s = Session::open(dir).unwrap();
    let trainer = rosetta::models::registry::trainer(&s.config.model).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    run_job(&mut s, trainer.as_ref(), data, hash, resume, cancel, obs).unwrap()
}

/// Cancels the job once `left` epoch-end lines were seen.
struct StopAfter {
    left: usize,
    cancel: Arc<AtomicBool>,
}

impl Observer for StopAfter {
    fn line(&mut self, line: &str) {
        if line.contains(" epoch ") && line.contains("(best ") {
            self.left = self.left.saturating_sub(1);
            if self.left == 0 {
                self.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
}

/// A job cancelled after each of its EM iterations and resumed ends with
/// the uninterrupted run's last and best checkpoints, bit for bit (the EM
/// state travels in the checkpoint's extra tensors).
#[test]
fn resume_after_any_iteration_is_the_same_run() {
    let ws = tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    for model in [JPLSA, CPLSA] {
        let kv = [("dim", "4"), ("epochs", "4"), ("patience", "100")];
        let root = tempfile::tempdir().unwrap();
        let full = root.path().join("full");
        Session::create(&full, config(ws.path(), &hash, model, &kv)).unwrap();
        assert_eq!(
            run(&full, &data, &hash, false, &mut Quiet).state,
            State::Done
        );
        let want_last = bits_of(&full.join(LAST_CHECKPOINT));
        let want_best = bits_of(&full.join(BEST_CHECKPOINT));
        assert!(
            want_last.contains_key(EM_THETA),
            "{model}: no EM state in last"
        );
        let mut tail = MetricsTail::new(full.join(METRICS_FILE));
        let epochs = tail
            .poll()
            .unwrap()
            .records
            .iter()
            .filter(|r| matches!(r, MetricRecord::Valid { .. }))
            .count();
        assert_eq!(epochs, 4, "{model}");
        for stop_after in 1..epochs {
            let part = root.path().join(format!("part{stop_after}"));
            Session::create(&part, config(ws.path(), &hash, model, &kv)).unwrap();
            let mut s = Session::open(&part).unwrap();
            let trainer = rosetta::models::registry::trainer(model).unwrap();
            let cancel = Arc::new(AtomicBool::new(false));
            let mut obs = StopAfter {
                left: stop_after,
                cancel: cancel.clone(),
            };
            let o = run_job(
                &mut s,
                trainer.as_ref(),
                &data,
                &hash,
                false,
                cancel,
                &mut obs,
            )
            .unwrap();
            assert_eq!(o.state, State::Cancelled, "{model} {stop_after}: {o:?}");
            assert_eq!(o.epoch, stop_after, "{model}");
            let o = run(&part, &data, &hash, true, &mut Quiet);
            assert_eq!(o.state, State::Done, "{model} {stop_after}: {o:?}");
            assert_eq!(
                bits_of(&part.join(LAST_CHECKPOINT)),
                want_last,
                "{model}: last differs after a resume at iteration {stop_after}"
            );
            assert_eq!(
                bits_of(&part.join(BEST_CHECKPOINT)),
                want_best,
                "{model}: best differs after a resume at iteration {stop_after}"
            );
        }
    }
}

/// The model is the one a session loads: the same encodings from the
/// trainer's last model and from the checkpoint.
#[test]
fn a_loaded_session_encodes_as_the_trained_model() {
    let ws = tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let kv = [
        ("dim", "5"),
        ("epochs", "3"),
        ("patience", "100"),
        ("pr_epsilon", "0.01"),
        ("pr_steps", "3"),
        ("fold_in_alpha", "1.1"),
    ];
    Session::create(&dir, config(ws.path(), &hash, CPLSA, &kv)).unwrap();
    assert_eq!(
        run(&dir, &data, &hash, false, &mut Quiet).state,
        State::Done
    );
    let (loaded, _) = Session::open(&dir)
        .unwrap()
        .load_model(&Device::Cpu)
        .unwrap();
    let mut em = Em::new(
        CPLSA,
        &data.train_src,
        &data.train_tgt,
        PlsaConfig {
            pr: Some(PrConfig {
                epsilon: 0.01,
                steps: 3,
            }),
            ..cfg(5, None)
        },
        7,
        None,
    )
    .unwrap();
    // the best checkpoint is some iteration's model: find it
    let want = loaded.encode(Side::Target, &data.valid_tgt).unwrap();
    let mut found = false;
    for _ in 0..3 {
        em.iterate();
        let m = em.model().unwrap();
        if m.encode(Side::Target, &data.valid_tgt).unwrap() == want {
            found = true;
        }
    }
    assert!(found, "no iteration's model encodes as the loaded one");
}
