//! Tests of HDLR (ITML on `A = U₀ B U₀ᵀ`): the constraints hold after
//! training on hand-made vectors and `B` stays symmetric positive definite;
//! the low-rank update equals ITML's dense update of `A`; training through
//! the `Trainer` interface streams, stops and resumes exactly; a job trains
//! end to end from an OPCA session and on its own, searches and shows
//! neighbours; a bad `init` is refused before a session is written.

// the dense reference is written with indices, as the equations are
#![allow(clippy::needless_range_loop)]

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};
use faer::Mat;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosetta::models::hdlr::Itml;
use rosetta::models::registry::trainer;
use rosetta::models::{Flow, Hooks, Model, Params, Resume, StepReport, TrainData};
use rosetta::session::State;
use rosetta::text::{CsrMatrix, Side};

use common::synthetic::train_data;
use common::{assert_searchable, metrics_records, rosetta_in, tiny_workspace, train};

/// Everything a trainer reports, with each epoch's model and extra tensors.
#[derive(Default)]
struct Rec {
    steps: Vec<StepReport>,
    epochs: Vec<(String, usize)>,
    ckpts: Vec<HashMap<String, Tensor>>,
    logs: Vec<String>,
    stop_after_steps: Option<usize>,
}

impl Hooks for Rec {
    fn step(&mut self, r: &StepReport) -> rosetta::Result<Flow> {
        assert!(r.loss.is_finite());
        self.steps.push(r.clone());
        Ok(match self.stop_after_steps {
            Some(n) if self.steps.len() >= n => Flow::Stop,
            _ => Flow::Continue,
        })
    }
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        extra: Vec<(String, Tensor)>,
    ) -> rosetta::Result<Flow> {
        self.epochs.push((phase.to_string(), epoch));
        let mut t: HashMap<String, Tensor> = model.tensors()?.into_iter().collect();
        t.extend(extra);
        self.ckpts.push(t);
        Ok(Flow::Continue)
    }
    fn log(&mut self, msg: &str) {
        self.logs.push(msg.to_string());
    }
}

fn params(kv: &[(&str, &str)]) -> Params {
    Params::new(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn run(
    data: &TrainData,
    kv: &[(&str, &str)],
    resume: Option<Resume>,
    rec: &mut Rec,
) -> rosetta::Result<Box<dyn Model>> {
    trainer("hdlr")?.train(
        &*crate::common::with_init(data, kv)?,
        &params(kv),
        &Device::Cpu,
        7,
        resume,
        rec,
    )
}

fn mrr_of(model: &dyn Model, s: &CsrMatrix, t: &CsrMatrix) -> f64 {
    let es = model.encode(Side::Source, s).unwrap();
    let et = model.encode(Side::Target, t).unwrap();
    rosetta::eval::sentence::sentence_retrieval(&es, &et, model.similarity()).mrr
}

fn sub(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}

fn assert_spd(b: &Mat<f64>) {
    let k = b.nrows();
    for i in 0..k {
        for j in 0..k {
            assert_eq!(b[(i, j)], b[(j, i)], "B not symmetric at ({i}, {j})");
        }
    }
    let eig = b
        .self_adjoint_eigenvalues(faer::Side::Lower)
        .expect("eigenvalues");
    assert!(
        eig.iter().all(|e| *e > 0.0 && e.is_finite()),
        "B not positive definite: {eig:?}"
    );
}

/// Hand-made 3-d texts: a pair's two sides differ mostly along axis 0 (the
/// "translation noise"), different pairs along axes 1 and 2. Under the
/// identity metric the similar pairs are far apart and the dissimilar ones
/// close; ITML must shrink axis 0 and stretch the others until every
/// constraint holds.
#[test]
fn itml_constraints_hold_after_training_on_a_tiny_case() {
    let src: Vec<Vec<f64>> = vec![
        vec![0.0, 0.0, 0.0],
        vec![0.5, 1.0, 0.0],
        vec![-0.5, 0.0, 1.0],
        vec![0.2, 1.0, 1.0],
        vec![0.0, -1.0, 0.5],
    ];
    let noise = [3.0, -2.5, 2.8, -3.1, 2.2];
    let tgt: Vec<Vec<f64>> = src
        .iter()
        .zip(noise)
        .map(|(s, e)| vec![s[0] + e, s[1] + 0.05 * e, s[2] - 0.05 * e])
        .collect();
    let (u, l) = (0.5, 8.0);
    let mut cons: Vec<(Vec<f64>, bool)> = (0..5).map(|i| (sub(&src[i], &tgt[i]), true)).collect();
    for i in 0..5 {
        for j in 0..5 {
            if i != j {
                cons.push((sub(&src[i], &tgt[j]), false));
            }
        }
    }
    let bound = |sim: bool| if sim { u } else { l };
    for gamma in [1e4, 1.0] {
        let mut it = Itml::new(3, cons.iter().map(|c| bound(c.1)).collect(), gamma);
        let start_viol = cons
            .iter()
            .filter(|(z, sim)| {
                let d = it.distance(z);
                if *sim {
                    d > u
                } else {
                    d < l
                }
            })
            .count();
        assert!(
            start_viol >= 15,
            "the case must start violated ({start_viol})"
        );
        for _ in 0..2000 {
            for (c, (z, sim)) in cons.iter().enumerate() {
                it.project(c, z, *sim);
            }
        }
        it.symmetrize();
        assert_spd(&it.b);
        for (c, (z, sim)) in cons.iter().enumerate() {
            let d = it.distance(z);
            let xi = it.xi[c];
            // every constraint holds against its slack-adjusted bound
            if *sim {
                assert!(
                    d <= xi * (1.0 + 1e-6),
                    "γ {gamma}: similar {c}: {d} > ξ {xi}"
                );
            } else {
                assert!(
                    d >= xi * (1.0 - 1e-6),
                    "γ {gamma}: dissimilar {c}: {d} < ξ {xi}"
                );
            }
            if gamma > 1e3 {
                // nearly hard constraints: the original bounds hold
                if *sim {
                    assert!(d <= u * 1.001, "similar {c}: {d} > u {u}");
                } else {
                    assert!(d >= l * 0.999, "dissimilar {c}: {d} < l {l}");
                }
            }
        }
        assert!(it.lambda.iter().all(|x| *x >= 0.0));
        assert!(it.divergence() > 0.0);
    }
}

/// ITML's update of a dense `A` (Davis et al. 2007, Algorithm 1, with the
/// authors' code's α), written out independently of the crate.
#[allow(clippy::too_many_arguments)]
fn dense_itml_step(
    a: &mut [Vec<f64>],
    v: &[f64],
    similar: bool,
    lambda: &mut f64,
    xi: &mut f64,
    gamma: f64,
) {
    let d = v.len();
    let av: Vec<f64> = (0..d)
        .map(|i| (0..d).map(|j| a[i][j] * v[j]).sum())
        .collect();
    let p: f64 = (0..d).map(|i| v[i] * av[i]).sum();
    let delta = if similar { 1.0 } else { -1.0 };
    let alpha = lambda.min(delta * gamma / (gamma + 1.0) * (1.0 / p - 1.0 / *xi));
    let beta = delta * alpha / (1.0 - delta * alpha * p);
    *xi = gamma * *xi / (gamma + delta * alpha * *xi);
    *lambda -= alpha;
    for i in 0..d {
        for j in 0..d {
            a[i][j] += beta * av[i] * av[j];
        }
    }
}

/// The update on `B` with `z = U₀ᵀ v` equals the dense update of
/// `A = U₀ B U₀ᵀ` with `v`: for a full-rank `U₀`, and for a low-rank one
/// (ITML keeps the range of `A₀`, Davis & Dhillon 2008).
#[test]
fn low_rank_update_agrees_with_the_dense_itml_update() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for (d, k) in [(4, 4), (7, 3)] {
        let u0: Vec<Vec<f64>> = (0..d)
            .map(|_| (0..k).map(|_| rng.random_range(-1.0..1.0)).collect())
            .collect();
        let mut a: Vec<Vec<f64>> = (0..d)
            .map(|i| {
                (0..d)
                    .map(|j| (0..k).map(|r| u0[i][r] * u0[j][r]).sum())
                    .collect()
            })
            .collect();
        let vs: Vec<(Vec<f64>, bool)> = (0..12)
            .map(|c| {
                let v: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
                (v, c % 3 != 0)
            })
            .collect();
        let bounds: Vec<f64> = vs
            .iter()
            .map(|(_, s)| if *s { 0.05 } else { 3.0 })
            .collect();
        let gamma = 2.0;
        let mut it = Itml::new(k, bounds.clone(), gamma);
        let (mut lam, mut xi) = (vec![0.0; vs.len()], bounds);
        let mut moved = 0;
        for _ in 0..6 {
            for (c, (v, sim)) in vs.iter().enumerate() {
                let z: Vec<f64> = (0..k)
                    .map(|r| (0..d).map(|i| u0[i][r] * v[i]).sum())
                    .collect();
                moved += (it.project(c, &z, *sim).beta != 0.0) as usize;
                dense_itml_step(&mut a, v, *sim, &mut lam[c], &mut xi[c], gamma);
            }
        }
        assert!(moved > 20, "too few updates ({moved})");
        let mut worst: f64 = 0.0;
        let mut scale: f64 = 0.0;
        for i in 0..d {
            for j in 0..d {
                let lr: f64 = (0..k)
                    .map(|r| {
                        (0..k)
                            .map(|s| u0[i][r] * it.b[(r, s)] * u0[j][s])
                            .sum::<f64>()
                    })
                    .sum();
                worst = worst.max((lr - a[i][j]).abs());
                scale = scale.max(a[i][j].abs());
            }
        }
        assert!(
            worst < 1e-9 * scale.max(1.0),
            "d {d}, k {k}: U₀BU₀ᵀ differs from dense A by {worst}"
        );
        for c in 0..vs.len() {
            assert!((it.lambda[c] - lam[c]).abs() < 1e-9 * (1.0 + lam[c].abs()));
            assert!((it.xi[c] - xi[c]).abs() < 1e-9 * (1.0 + xi[c].abs()));
        }
    }
}

/// Streams per step with its parts, validates every pass, stops on request,
/// and a run resumed from a checkpoint of either phase equals the
/// uninterrupted one exactly.
#[test]
fn trains_streams_stops_and_resumes_exactly() {
    let data = train_data(300, 30, 30, 3);
    let kv = [
        ("dim", "8"),
        ("epochs", "4"),
        ("positives", "1500"),
        ("negatives", "1200"),
    ];
    let mut full = Rec::default();
    let model = run(&data, &kv, None, &mut full).unwrap();
    assert_eq!(model.kind(), "hdlr");
    assert_eq!(model.dim(), 8);
    let want: Vec<(String, usize)> = std::iter::once(("opca".to_string(), 1))
        .chain((1..=4).map(|e| ("itml".to_string(), e)))
        .collect();
    assert_eq!(full.epochs, want);
    // 2,700 constraints: 3 steps a pass
    assert_eq!(full.steps.len(), 12);
    assert_eq!(full.steps[0].examples, 1000);
    assert_eq!(full.steps[2].examples, 700);
    let names: Vec<&str> = full.steps[0].parts.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(
        names,
        ["similar_violated", "dissimilar_violated", "divergence"]
    );
    assert!(full.steps.iter().all(|s| (0.0..=1.0).contains(&s.loss)));
    assert!(full.steps[0].parts[2].1 > 0.0, "B moved from I");
    assert!(full.logs.iter().any(|l| l.contains("bounds u =")));
    // the learned metric still retrieves (random would be ~0.03)
    let mrr = mrr_of(model.as_ref(), &data.valid_src, &data.valid_tgt);
    assert!(mrr > 0.3, "MRR {mrr}");
    // encode: unit rows; a checkpoint round trip gives the same model
    let e = model.encode(Side::Source, &data.valid_src).unwrap();
    assert!((e.row(0).dot(&e.row(0)) - 1.0).abs() < 1e-4);
    let back = trainer("hdlr")
        .unwrap()
        .load(
            &data.vocabs,
            model.tensors().unwrap().into_iter().collect(),
            &Params::default(),
            &Device::Cpu,
        )
        .unwrap();
    assert_eq!(
        back.encode(Side::Target, &data.valid_tgt).unwrap(),
        model.encode(Side::Target, &data.valid_tgt).unwrap()
    );

    // resumed after the start phase, and after itml epoch 2
    for (at, phase, epoch, step) in [(0, "opca", 1, 0), (2, "itml", 2, 6)] {
        let mut second = Rec::default();
        let resumed = run(
            &data,
            &kv,
            Some(Resume {
                phase: phase.into(),
                epoch,
                step,
                tensors: full.ckpts[at].clone(),
            }),
            &mut second,
        )
        .unwrap();
        assert_eq!(second.epochs, full.epochs[at + 1..].to_vec());
        assert_eq!(second.steps.last().unwrap().step, 12);
        for side in [Side::Source, Side::Target] {
            let m = if side == Side::Source {
                &data.valid_src
            } else {
                &data.valid_tgt
            };
            assert_eq!(
                resumed.encode(side, m).unwrap(),
                model.encode(side, m).unwrap(),
                "resumed after {phase} {epoch} differs"
            );
        }
        for (a, b) in second.steps.iter().zip(&full.steps[step..]) {
            assert_eq!(a.loss, b.loss);
            assert_eq!(a.parts, b.parts);
        }
    }

    // a checkpoint of other settings is refused, naming the tensor
    let mut other = kv.to_vec();
    other[2] = ("positives", "1000");
    let e = run(
        &data,
        &other,
        Some(Resume {
            phase: "itml".into(),
            epoch: 2,
            step: 6,
            tensors: full.ckpts[2].clone(),
        }),
        &mut Rec::default(),
    )
    .err()
    .expect("mismatched resume accepted");
    assert!(e.to_string().contains("hdlr.xi"), "{e}");

    // stop after 4 steps: the second pass is interrupted
    let mut stop = Rec {
        stop_after_steps: Some(4),
        ..Default::default()
    };
    run(&data, &kv, None, &mut stop).unwrap();
    assert_eq!(stop.steps.len(), 4);
    assert_eq!(stop.epochs.len(), 2, "the start and the first pass");
}

/// `init=` a saved linear model: the start phase is `init`, its model is the
/// saved one; a session of another kind, of another dimension, or with
/// OPCA's settings is refused by `Trainer::check`.
#[test]
fn init_from_a_saved_projection_and_bad_init() {
    let data = train_data(200, 24, 24, 5);
    let mut r = Rec::default();
    let opca = trainer("opca")
        .unwrap()
        .train(
            &data,
            &params(&[("dim", "6")]),
            &Device::Cpu,
            7,
            None,
            &mut r,
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    let tensors: HashMap<String, Tensor> = opca.tensors().unwrap().into_iter().collect();
    candle_core::safetensors::save(&tensors, dir.path().join("checkpoints/best.safetensors"))
        .unwrap();
    let d = dir.path().to_str().unwrap();
    let kv = [
        ("dim", "6"),
        ("init", d),
        ("epochs", "2"),
        ("positives", "300"),
        ("negatives", "300"),
    ];
    let trainer = trainer("hdlr").unwrap();
    crate::common::check_with_init(trainer.as_ref(), &kv).unwrap();
    let mut rec = Rec::default();
    run(&data, &kv, None, &mut rec).unwrap();
    assert_eq!(rec.epochs[0], ("init".to_string(), 1));
    assert!(rec.logs.iter().any(|l| l.contains("starting from")));
    let start = &rec.ckpts[0];
    for name in ["proj.source", "proj.target"] {
        assert_eq!(
            start[name].flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            tensors[name]
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap(),
            "the init phase's model is the saved one"
        );
    }

    let refused = |kv: &[(&str, &str)]| {
        crate::common::check_with_init(trainer.as_ref(), kv)
            .unwrap_err()
            .to_string()
    };
    let e = refused(&[("dim", "5"), ("init", d)]);
    assert!(e.contains("dim 6") && e.contains("dim is 5"), "{e}");
    let e = refused(&[("dim", "6"), ("init", d), ("ridge", "0.5")]);
    assert!(e.contains("ridge") && e.contains("init"), "{e}");
    let e = refused(&[("dim", "6"), ("init", "/nonexistent/session")]);
    assert!(e.contains("best.safetensors"), "{e}");
    let e = refused(&[("positives", "0"), ("negatives", "0")]);
    assert!(e.contains("no constraint"), "{e}");
    let e = refused(&[("similar_pct", "60"), ("dissimilar_pct", "50")]);
    assert!(e.contains("similar_pct"), "{e}");
    // a checkpoint without projections
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(other.path().join("checkpoints")).unwrap();
    let t = HashMap::from([(
        "src.w1".to_string(),
        Tensor::zeros((24, 6), candle_core::DType::F32, &Device::Cpu).unwrap(),
    )]);
    candle_core::safetensors::save(&t, other.path().join("checkpoints/best.safetensors")).unwrap();
    let e = refused(&[("dim", "6"), ("init", other.path().to_str().unwrap())]);
    assert!(
        e.contains("proj.source") && e.contains("not a linear"),
        "{e}"
    );
    // the vocabulary is checked when the job reads the projections
    let e = run(&train_data(200, 20, 20, 5), &kv, None, &mut Rec::default())
        .err()
        .expect("other vocabulary accepted");
    assert!(e.to_string().contains("vocabulary"), "{e}");
}

fn session_refused(cwd: &Path, ws: &Path, dir: &Path, more: &[&str]) -> String {
    let mut args = vec![
        "train",
        "--workspace",
        ws.to_str().unwrap(),
        "--model",
        "hdlr",
        "--device",
        "cpu",
        "--session",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    let out = rosetta_in(cwd, &args);
    assert!(!out.status.success(), "accepted: {more:?}");
    assert!(!dir.exists(), "a refused job wrote its session ({more:?})");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// The CLI: an OPCA session, HDLR from it and HDLR on its own, both
/// searchable with neighbours and evaluated; a bad `init` (another model's
/// session, another dimension) is refused before the session is written.
#[test]
fn jobs_train_from_an_opca_session_and_alone_and_search() {
    let tmp = tempfile::tempdir().unwrap();
    let ws_dir = tiny_workspace();
    let ws = ws_dir.path().join("workspace.toml");
    let cwd = tmp.path();
    let opca = cwd.join("opca");
    train(cwd, &ws, "opca", &opca, &["--dim", "4"]);
    let small = ["--set", "positives=60", "--set", "negatives=120"];
    let from = cwd.join("hdlr-init");
    let init = format!("init={}", opca.display());
    let mut args = vec!["--dim", "4", "--set", &init, "--epochs", "2"];
    args.extend_from_slice(&small);
    train(cwd, &ws, "hdlr", &from, &args);
    let alone = cwd.join("hdlr-alone");
    let mut args = vec!["--dim", "4", "--epochs", "2"];
    args.extend_from_slice(&small);
    train(cwd, &ws, "hdlr", &alone, &args);
    for (dir, start) in [(&from, "init"), (&alone, "opca")] {
        let recs = metrics_records(dir);
        let valid: Vec<(&str, u64)> = recs
            .iter()
            .filter(|r| r["kind"] == "valid")
            .map(|r| (r["phase"].as_str().unwrap(), r["epoch"].as_u64().unwrap()))
            .collect();
        assert_eq!(
            valid,
            [(start, 1), ("itml", 1), ("itml", 2)],
            "{}",
            dir.display()
        );
        assert!(
            recs.iter()
                .any(|r| r["kind"] == "step" && r["parts"]["divergence"].is_number()),
            "no step with its parts"
        );
        assert_searchable(cwd, dir, "the dog", "dog");
    }
    // the same start (OPCA at dim 4, seed 1): the same start MRR
    let start_mrr = |dir: &Path| {
        metrics_records(dir)
            .into_iter()
            .find(|r| r["kind"] == "valid")
            .unwrap()["MRR"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(start_mrr(&from), start_mrr(&alone));

    let bad = cwd.join("bad");
    let e = session_refused(cwd, &ws, &bad, &["--dim", "5", "--set", &init]);
    assert!(e.contains("dim 4"), "{e}");
    let e = session_refused(
        cwd,
        &ws,
        &bad,
        &[
            "--dim",
            "4",
            "--set",
            &format!("init={}", from.join("nope").display()),
        ],
    );
    assert!(e.contains("no checkpoint"), "{e}");
    // a session that has not finished (running, failed, cancelled) is no
    // start, as the workbench's form says too; its checkpoint file named
    // directly is taken as it is
    let status = rosetta::session::read_status(&opca).unwrap();
    for state in [State::Running, State::Failed] {
        let mut st = status.clone();
        st.state = state;
        common::write_status(&opca, &st);
        let e = session_refused(cwd, &ws, &bad, &["--dim", "4", "--set", &init]);
        assert!(e.contains("not finished"), "{e}");
    }
    let file = opca.join("checkpoints/best.safetensors");
    let from_file = cwd.join("hdlr-file");
    let by_file = format!("init={}", file.display());
    let mut args = vec!["--dim", "4", "--set", &by_file, "--epochs", "1"];
    args.extend_from_slice(&small);
    train(cwd, &ws, "hdlr", &from_file, &args);
    common::write_status(&opca, &status);
    // a session of a model that is not linear
    let bm = cwd.join("xcnn");
    train(
        cwd,
        &ws,
        "xcnn",
        &bm,
        &["--dim", "4", "--epochs", "1", "--set", "mono_epochs=0"],
    );
    let e = session_refused(
        cwd,
        &ws,
        &bad,
        &["--dim", "4", "--set", &format!("init={}", bm.display())],
    );
    assert!(e.contains("`xcnn`") && e.contains("not of a linear"), "{e}");
}

/// Issue 39: HDLR (its OPCA start and every ITML pass) gives the same
/// checkpoints, bit for bit, with one thread or several.
#[test]
fn the_same_with_any_thread_count() {
    let data = train_data(1100, 1100, 1100, 9);
    let kv = [
        ("dim", "8"),
        ("epochs", "2"),
        ("positives", "1500"),
        ("negatives", "1200"),
    ];
    let fit = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut rec = Rec::default();
            run(&data, &kv, None, &mut rec).unwrap();
            let mut bits: Vec<(usize, String, Vec<u64>)> = Vec::new();
            for (i, ck) in rec.ckpts.iter().enumerate() {
                for (k, t) in ck {
                    bits.push((i, k.clone(), crate::common::tensor_bits(t)));
                }
            }
            bits.sort();
            (bits, rec.logs)
        })
    };
    let (one, logs) = fit(1);
    assert!(!one.is_empty());
    let (three, logs3) = fit(3);
    assert!(one == three, "1 and 3 threads differ:\n{logs:?}\n{logs3:?}");
}
