//! Tests of the linear projection models (CL-LSI, OPCA, CCA, S2Net) on small
//! synthetic data: factorisations against dense references, eigen-equations,
//! S2Net's autograd gradient against central differences, training through
//! the `Trainer` interface, and clear errors on bad input.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use faer::Mat;
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosetta::models::implicit::{Solver, SubspaceOpts};
use rosetta::models::linear::{hconcat, to_faer, vstack_joint, weighted};
use rosetta::models::registry::trainer;
use rosetta::models::s2net::{batch_objective, SparseBatch};
use rosetta::models::{cca, cl_lsi, opca, Model, Params};
use rosetta::models::{Flow, Hooks, Resume, StepReport, TrainData};
use rosetta::text::CsrMatrix;
use rosetta::text::Side;

use crate::common::synthetic::{parallel, train_data};

/// Records everything a trainer reports.
#[derive(Default)]
struct TestHooks {
    steps: Vec<f64>,
    epochs: Vec<usize>,
    logs: Vec<String>,
    stop_after_steps: Option<usize>,
    last_extra: Vec<(String, Tensor)>,
}

impl Hooks for TestHooks {
    fn step(&mut self, r: &StepReport) -> rosetta::Result<Flow> {
        assert!(r.loss.is_finite(), "non-finite loss");
        self.steps.push(r.loss);
        Ok(match self.stop_after_steps {
            Some(n) if self.steps.len() >= n => Flow::Stop,
            _ => Flow::Continue,
        })
    }
    fn epoch_end(
        &mut self,
        _phase: &str,
        epoch: usize,
        model: &dyn Model,
        extra: Vec<(String, Tensor)>,
    ) -> rosetta::Result<Flow> {
        assert!(model.dim() > 0);
        self.epochs.push(epoch);
        self.last_extra = extra;
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

fn train(
    name: &str,
    data: &TrainData,
    kv: &[(&str, &str)],
    hooks: &mut TestHooks,
) -> rosetta::Result<Box<dyn Model>> {
    trainer(name)?.train(
        &*crate::common::with_init(data, kv)?,
        &params(kv),
        &Device::Cpu,
        7,
        None,
        hooks,
    )
}

fn dense(m: &CsrMatrix) -> Mat<f64> {
    to_faer(&m.to_dense())
}

fn max_abs(m: &Mat<f64>) -> f64 {
    let mut x: f64 = 0.0;
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            x = x.max(m[(i, j)].abs());
        }
    }
    x
}

fn col(m: &Mat<f64>, j: usize) -> Mat<f64> {
    Mat::from_fn(m.nrows(), 1, |i, _| m[(i, j)])
}

fn mrr_of(model: &dyn Model, s: &CsrMatrix, t: &CsrMatrix) -> f64 {
    let es = model.encode(Side::Source, s).unwrap();
    let et = model.encode(Side::Target, t).unwrap();
    rosetta::eval::sentence::sentence_retrieval(&es, &et, rosetta::space::Similarity::Cosine).mrr
}

#[test]
fn cl_lsi_matches_dense_svd() {
    let data = train_data(60, 25, 20, 1);
    let xs = weighted(&data.train_src, &data.vocabs, Side::Source);
    let xt = weighted(&data.train_tgt, &data.vocabs, Side::Target);
    let k = 5;
    let fit = cl_lsi::fit(&xs, &xt, k, 10, 12, 3).unwrap();
    let d = dense(&hconcat(&xs, &xt));
    let svd = d.thin_svd().unwrap();
    for j in 0..k {
        let (a, b) = (fit.singular_values[j], svd.S()[j]);
        assert!((a - b).abs() < 1e-4 * b, "σ{j}: {a} vs dense {b}");
        // same direction up to sign
        let v = col(&fit.joint, j);
        let r = Mat::from_fn(d.ncols(), 1, |i, _| svd.V()[(i, j)]);
        let cos = (v.transpose() * &r)[(0, 0)].abs();
        assert!(cos > 0.999, "right singular vector {j}: |cos| = {cos}");
    }
}

fn opts(solver: Solver, oversample: usize, power_iters: usize) -> SubspaceOpts {
    SubspaceOpts {
        solver,
        oversample,
        power_iters,
        seed: 5,
        tol: 1e-12,
        max_cg_iters: 1000,
    }
}

#[test]
fn opca_directions_solve_the_generalised_eigenproblem() {
    for solver in [Solver::Implicit, Solver::Dense] {
        opca_case(solver);
    }
}

fn opca_case(solver: Solver) {
    let data = train_data(80, 14, 12, 2);
    let xs = weighted(&data.train_src, &data.vocabs, Side::Source);
    let xt = weighted(&data.train_tgt, &data.vocabs, Side::Target);
    let k = 4;
    let mut warnings = Vec::new();
    let fit = opca::fit(&xs, &xt, k, 0.05, &opts(solver, 30, 30), &mut |m: &str| {
        warnings.push(m.to_string())
    })
    .unwrap();
    // S and N from their definitions, densely
    let x = dense(&vstack_joint(&xs, &xt));
    let m = x.nrows() as f64;
    let mu = Mat::from_fn(x.ncols(), 1, |j, _| {
        (0..x.nrows()).map(|i| x[(i, j)]).sum::<f64>() / m
    });
    let s = (x.transpose() * &x) * faer::Scale(1.0 / m) - &mu * mu.transpose();
    let mut neg = xt.clone();
    neg.values.iter_mut().for_each(|v| *v = -*v);
    let d = dense(&hconcat(&xs, &neg));
    let mut n = (d.transpose() * &d) * faer::Scale(1.0 / xs.n_rows() as f64);
    for i in 0..n.nrows() {
        n[(i, i)] += fit.ridge;
    }
    for j in 0..k {
        let v = col(&fit.joint, j);
        let lam = fit.eigenvalues[j];
        let lhs = &s * &v;
        let res = &lhs - (&n * &v) * faer::Scale(lam);
        assert!(
            max_abs(&res) < 1e-4 * max_abs(&lhs),
            "{solver:?} direction {j}: residual {} vs {}",
            max_abs(&res),
            max_abs(&lhs)
        );
        let vnv = (v.transpose() * &n * &v)[(0, 0)];
        assert!((vnv - 1.0).abs() < 1e-6, "vᵀNv = {vnv}");
    }
    assert!(fit.eigenvalues.windows(2).all(|w| w[0] >= w[1] - 1e-9));
}

#[test]
fn cca_directions_satisfy_canonical_equations() {
    for solver in [Solver::Implicit, Solver::Dense] {
        cca_case(solver);
    }
}

fn cca_case(solver: Solver) {
    let data = train_data(90, 12, 10, 3);
    let xs = weighted(&data.train_src, &data.vocabs, Side::Source);
    let xt = weighted(&data.train_tgt, &data.vocabs, Side::Target);
    let k = 3;
    let fit = cca::fit(&xs, &xt, k, 0.1, &opts(solver, 20, 30), &mut |_| {}).unwrap();
    let (x, y) = (dense(&xs), dense(&xt));
    let n = x.nrows() as f64;
    let center = |a: &Mat<f64>| {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| {
            a[(i, j)] - (0..a.nrows()).map(|r| a[(r, j)]).sum::<f64>() / a.nrows() as f64
        })
    };
    let (xc, yc) = (center(&x), center(&y));
    let mut cxx = (xc.transpose() * &xc) * faer::Scale(1.0 / n);
    let mut cyy = (yc.transpose() * &yc) * faer::Scale(1.0 / n);
    let cxy = (xc.transpose() * &yc) * faer::Scale(1.0 / n);
    for i in 0..cxx.nrows() {
        cxx[(i, i)] += fit.ridges.0;
    }
    for i in 0..cyy.nrows() {
        cyy[(i, i)] += fit.ridges.1;
    }
    let (a, b) = (to_faer(&fit.source), to_faer(&fit.target));
    for j in 0..k {
        let (aj, bj, rho) = (col(&a, j), col(&b, j), fit.correlations[j]);
        assert!(rho > 0.0 && rho < 1.0, "correlation {rho}");
        let l1 = &cxy * &bj;
        let r1 = &l1 - (&cxx * &aj) * faer::Scale(rho);
        assert!(
            max_abs(&r1) < 1e-4 * max_abs(&l1),
            "{solver:?}: Cxy b = ρ Cxx a fails for {j}"
        );
        let l2 = cxy.transpose() * &aj;
        let r2 = &l2 - (&cyy * &bj) * faer::Scale(rho);
        assert!(
            max_abs(&r2) < 1e-4 * max_abs(&l2),
            "{solver:?}: Cyx a = ρ Cyy b fails for {j}"
        );
        let aca = (aj.transpose() * &cxx * &aj)[(0, 0)];
        assert!((aca - 1.0).abs() < 1e-6, "aᵀCxx a = {aca}");
    }
}

#[test]
fn s2net_gradient_matches_central_differences() {
    let dev = Device::Cpu;
    let (vs, vt, k) = (6, 5, 3);
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut rnd = |r: usize, c: usize| -> Vec<f64> {
        (0..r * c).map(|_| rng.random_range(-1.0..1.0)).collect()
    };
    let a_s0 = rnd(vs, k);
    let a_t0 = rnd(vt, k);
    let anchor_s = Tensor::from_vec(rnd(vs, k), (vs, k), &dev).unwrap();
    let anchor_t = Tensor::from_vec(rnd(vt, k), (vt, k), &dev).unwrap();
    let (s, t) = parallel(4, vs, vt, 9);
    let rows: Vec<usize> = (0..4).collect();
    let bs = SparseBatch::new(&s, &rows, false, DType::F64, &dev).unwrap();
    let bt = SparseBatch::new(&t, &rows, false, DType::F64, &dev).unwrap();
    let beta = 0.3;
    let loss = |a: &[f64], b: &[f64]| -> f64 {
        let ta = Tensor::from_vec(a.to_vec(), (vs, k), &dev).unwrap();
        let tb = Tensor::from_vec(b.to_vec(), (vt, k), &dev).unwrap();
        batch_objective(&ta, &tb, &bs, &bt, 10.0, Some((&anchor_s, &anchor_t, beta)))
            .unwrap()
            .to_scalar::<f64>()
            .unwrap()
    };
    let va = Var::from_vec(a_s0.clone(), (vs, k), &dev).unwrap();
    let vb = Var::from_vec(a_t0.clone(), (vt, k), &dev).unwrap();
    let l = batch_objective(
        va.as_tensor(),
        vb.as_tensor(),
        &bs,
        &bt,
        10.0,
        Some((&anchor_s, &anchor_t, beta)),
    )
    .unwrap();
    assert!((l.to_scalar::<f64>().unwrap() - loss(&a_s0, &a_t0)).abs() < 1e-12);
    let g = l.backward().unwrap();
    let ga: Vec<f64> = g
        .get(va.as_tensor())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let gb: Vec<f64> = g
        .get(vb.as_tensor())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1()
        .unwrap();
    let h = 1e-6;
    let mut checked = 0;
    for i in 0..a_s0.len() {
        let (mut p, mut m) = (a_s0.clone(), a_s0.clone());
        p[i] += h;
        m[i] -= h;
        let fd = (loss(&p, &a_t0) - loss(&m, &a_t0)) / (2.0 * h);
        assert!(
            (fd - ga[i]).abs() < 1e-6 * (1.0 + fd.abs()),
            "A_s[{i}]: {fd} vs {}",
            ga[i]
        );
        checked += (fd.abs() > 1e-4) as usize;
    }
    for i in 0..a_t0.len() {
        let (mut p, mut m) = (a_t0.clone(), a_t0.clone());
        p[i] += h;
        m[i] -= h;
        let fd = (loss(&a_s0, &p) - loss(&a_s0, &m)) / (2.0 * h);
        assert!(
            (fd - gb[i]).abs() < 1e-6 * (1.0 + fd.abs()),
            "A_t[{i}]: {fd} vs {}",
            gb[i]
        );
        checked += (fd.abs() > 1e-4) as usize;
    }
    assert!(
        checked > 10,
        "too few non-trivial gradient entries ({checked})"
    );
}

#[test]
fn every_model_trains_and_retrieves() {
    let data = train_data(400, 30, 30, 4);
    for (name, kv) in [
        ("cl-lsi", vec![("dim", "12")]),
        ("opca", vec![("dim", "12")]),
        ("cca", vec![("dim", "12")]),
        (
            "s2net",
            vec![
                ("dim", "12"),
                ("epochs", "15"),
                ("lr", "0.05"),
                ("batch", "20"),
            ],
        ),
    ] {
        let mut hooks = TestHooks::default();
        let model = train(name, &data, &kv, &mut hooks).unwrap();
        assert_eq!(model.kind(), name);
        assert_eq!(model.dim(), 12);
        assert!(!hooks.epochs.is_empty(), "{name}: epoch_end never called");
        let mrr = mrr_of(model.as_ref(), &data.valid_src, &data.valid_tgt);
        assert!(mrr > 0.3, "{name}: validation MRR {mrr} (random is ~0.02)");
        // encode: unit rows, an empty text gives a zero row
        let mut texts = data.valid_src.select_rows(&[0, 1]);
        texts.push_row([]);
        let e = model.encode(Side::Source, &texts).unwrap();
        for i in 0..2 {
            let n: f32 = e.row(i).dot(&e.row(i));
            assert!((n - 1.0).abs() < 1e-4);
        }
        assert!(e.row(2).iter().all(|v| *v == 0.0));
        let tv = model.term_vectors(Side::Target).unwrap();
        assert_eq!(tv.dim(), (30, 12));
        // checkpoint round trip
        let tensors: HashMap<String, Tensor> = model.tensors().unwrap().into_iter().collect();
        let back = trainer(name)
            .unwrap()
            .load(&data.vocabs, tensors, &Params::default(), &Device::Cpu)
            .unwrap();
        assert_eq!(
            back.encode(Side::Target, &data.valid_tgt).unwrap(),
            model.encode(Side::Target, &data.valid_tgt).unwrap()
        );
    }
}

#[test]
fn s2net_learns_stops_and_resumes_with_optimiser_state() {
    s2net_case("adam");
    s2net_case("lazy-adam");
    // row-sparse updates cannot honour the anchor term, which ties every row
    let e = train(
        "s2net",
        &train_data(60, 25, 25, 5),
        &[("dim", "8"), ("optim", "lazy-adam"), ("beta", "0.5")],
        &mut TestHooks::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("lazy-adam") && e.contains("beta"), "{e}");
}

/// Learning, stopping and an exact resume, with dense or row-sparse Adam.
fn s2net_case(optim: &str) {
    let data = train_data(300, 25, 25, 5);
    let kv = [
        ("dim", "8"),
        ("epochs", "4"),
        ("lr", "0.05"),
        ("batch", "30"),
        ("optim", optim),
    ];
    let mut hooks = TestHooks::default();
    let full = train("s2net", &data, &kv, &mut hooks).unwrap();
    assert_eq!(hooks.epochs, vec![1, 2, 3, 4]);
    assert_eq!(hooks.steps.len(), 40);
    let first: f64 = hooks.steps[..10].iter().sum();
    let last: f64 = hooks.steps[30..].iter().sum();
    assert!(
        last < first * 0.7,
        "{optim}: loss did not fall: {first} → {last}"
    );

    // stop after 5 steps
    let mut stop = TestHooks {
        stop_after_steps: Some(5),
        ..Default::default()
    };
    train("s2net", &data, &kv, &mut stop).unwrap();
    assert_eq!(stop.steps.len(), 5);
    assert!(stop.epochs.is_empty());

    // two epochs, then resume for the other two: same model as one run
    let mut first_half = TestHooks::default();
    let two = train(
        "s2net",
        &data,
        &[
            ("dim", "8"),
            ("epochs", "2"),
            ("lr", "0.05"),
            ("batch", "30"),
            ("optim", optim),
        ],
        &mut first_half,
    )
    .unwrap();
    let names: Vec<&str> = first_half
        .last_extra
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert!(names.contains(&"adam.m.source") && names.contains(&"adam.v.target"));
    let mut tensors: HashMap<String, Tensor> = two.tensors().unwrap().into_iter().collect();
    tensors.extend(first_half.last_extra.clone());
    let mut second = TestHooks::default();
    let resumed = trainer("s2net")
        .unwrap()
        .train(
            &data,
            &params(&kv),
            &Device::Cpu,
            7,
            Some(Resume {
                phase: "train".into(),
                epoch: 2,
                step: 20,
                tensors,
            }),
            &mut second,
        )
        .unwrap();
    assert_eq!(second.epochs, vec![3, 4]);
    let (a, b) = (
        full.encode(Side::Source, &data.valid_src).unwrap(),
        resumed.encode(Side::Source, &data.valid_src).unwrap(),
    );
    let diff = (&a - &b).iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(
        diff < 1e-4,
        "{optim}: resumed run differs from the uninterrupted one by {diff}"
    );
}

/// `init=` reaches a trainer as tensors the job layer read
/// (`TrainData::init`): a trainer called with the setting but no start
/// refuses, saying so, and reads no folder.
#[test]
fn init_without_the_start_the_job_layer_reads_is_refused() {
    let data = train_data(60, 12, 12, 3);
    for name in ["s2net", "hdlr"] {
        let e = trainer(name)
            .unwrap()
            .train(
                &data,
                &params(&[("dim", "4"), ("init", "/no/such/session")]),
                &Device::Cpu,
                7,
                None,
                &mut TestHooks::default(),
            )
            .err()
            .expect("a start that was not read")
            .to_string();
        assert!(
            e.contains(name) && e.contains("TrainData::init") && !e.contains("/no/such"),
            "{e}"
        );
    }
}

#[test]
fn s2net_init_from_a_session_and_bad_init() {
    let data = train_data(200, 20, 20, 6);
    let mut hooks = TestHooks::default();
    let opca = train("opca", &data, &[("dim", "6")], &mut hooks).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    let tensors: HashMap<String, Tensor> = opca.tensors().unwrap().into_iter().collect();
    candle_core::safetensors::save(&tensors, dir.path().join("checkpoints/best.safetensors"))
        .unwrap();
    let d = dir.path().to_str().unwrap();
    let before = mrr_of(opca.as_ref(), &data.valid_src, &data.valid_tgt);
    let mut h = TestHooks::default();
    let m = train(
        "s2net",
        &data,
        &[
            ("dim", "6"),
            ("init", d),
            ("epochs", "3"),
            ("lr", "0.01"),
            ("beta", "0.1"),
            ("batch", "20"),
        ],
        &mut h,
    )
    .unwrap();
    assert!(h.logs.iter().any(|l| l.contains("starting from")));
    let after = mrr_of(m.as_ref(), &data.valid_src, &data.valid_tgt);
    assert!(
        after > 0.5 * before,
        "init lost the OPCA start: {before} → {after}"
    );

    // other dim
    let e = train(
        "s2net",
        &data,
        &[("dim", "5"), ("init", d)],
        &mut TestHooks::default(),
    )
    .err()
    .expect("dim mismatch must fail");
    assert!(e.to_string().contains("proj.source"), "{e}");
    // other vocabulary
    let other = train_data(200, 22, 20, 6);
    let e = train(
        "s2net",
        &other,
        &[("dim", "6"), ("init", d)],
        &mut TestHooks::default(),
    )
    .err()
    .expect("vocabulary mismatch must fail");
    assert!(e.to_string().contains("vocabulary"), "{e}");
    // a saved vocabulary with other terms
    let mut v = data.vocabs.source.clone();
    v.terms.swap(0, 1);
    for name in ["vocab.source.json", "vocab.en.json"] {
        v.save(&dir.path().join(name)).unwrap();
        let e = train(
            "s2net",
            &data,
            &[("dim", "6"), ("init", d)],
            &mut TestHooks::default(),
        )
        .err()
        .expect("other terms must fail");
        assert!(e.to_string().contains("source vocabulary differs"), "{e}");
        assert!(e.to_string().contains(name), "{e}");
        std::fs::remove_file(dir.path().join(name)).unwrap();
    }
    // the same terms saved: accepted
    data.vocabs
        .target
        .save(&dir.path().join("vocab.target.json"))
        .unwrap();
    train(
        "s2net",
        &data,
        &[("dim", "6"), ("init", d), ("epochs", "1")],
        &mut TestHooks::default(),
    )
    .unwrap();
    // no session there
    let e = train(
        "s2net",
        &data,
        &[("dim", "6"), ("init", "/nonexistent/session")],
        &mut TestHooks::default(),
    )
    .err()
    .expect("missing session must fail");
    assert!(e.to_string().contains("best.safetensors"), "{e}");
}

#[test]
fn bad_input_gives_clear_errors_not_panics() {
    for name in ["cl-lsi", "opca", "cca", "s2net"] {
        // vocabulary smaller than k
        let data = train_data(50, 8, 20, 7);
        let e = train(name, &data, &[("dim", "10")], &mut TestHooks::default())
            .err()
            .unwrap_or_else(|| panic!("{name}: small vocabulary accepted"));
        assert!(e.to_string().contains("vocabulary"), "{name}: {e}");
        // fewer pairs than k
        let data = train_data(6, 30, 30, 7);
        let e = train(name, &data, &[("dim", "10")], &mut TestHooks::default())
            .err()
            .unwrap_or_else(|| panic!("{name}: too few pairs accepted"));
        assert!(e.to_string().contains("training pairs"), "{name}: {e}");
        // a misspelt setting
        let data = train_data(50, 20, 20, 7);
        let e = train(
            name,
            &data,
            &[("dim", "4"), ("ridgee", "1")],
            &mut TestHooks::default(),
        )
        .err()
        .unwrap_or_else(|| panic!("{name}: unknown setting accepted"));
        assert!(e.to_string().contains("ridgee"), "{name}: {e}");
    }
}

#[test]
fn rank_deficient_data_is_an_error() {
    // every pair is the same two texts: rank 1 (CL-LSI) / no variance
    let mut data = train_data(40, 20, 20, 8);
    let mut s = CsrMatrix::new(20);
    let mut t = CsrMatrix::new(20);
    for _ in 0..40 {
        s.push_row([(1, 1.0), (2, 2.0)]);
        t.push_row([(3, 1.0)]);
    }
    data.train_src = s;
    data.train_tgt = t;
    for name in ["cl-lsi", "opca", "cca"] {
        let e = train(name, &data, &[("dim", "4")], &mut TestHooks::default())
            .err()
            .unwrap_or_else(|| panic!("{name}: rank-deficient data accepted"));
        let msg = e.to_string();
        assert!(
            msg.contains("rank-deficient")
                || msg.contains("variance")
                || msg.contains("directions"),
            "{name}: {msg}"
        );
    }
}

#[test]
fn near_singular_noise_covariance_gets_ridge_and_warning() {
    // 12 pairs over 60 terms: N has rank ≤ 12, far below 60
    let data = train_data(12, 30, 30, 9);
    for ridge in ["0.1", "0"] {
        let mut hooks = TestHooks::default();
        let model = train("opca", &data, &[("dim", "4"), ("ridge", ridge)], &mut hooks).unwrap();
        assert!(
            hooks
                .logs
                .iter()
                .any(|l| l.starts_with("warning:") && l.contains("singular")),
            "no warning with ridge={ridge}: {:?}",
            hooks.logs
        );
        let e = model.encode(Side::Source, &data.valid_src).unwrap();
        assert!(
            e.iter().all(|v| v.is_finite()),
            "NaN in model with ridge={ridge}"
        );
        let tv: Array2<f32> = model.term_vectors(Side::Target).unwrap();
        assert!(tv.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn every_linear_model_has_a_trainer_in_the_registry() {
    assert!(trainer("no-such-model").is_err());
    for n in ["cl-lsi", "opca", "cca", "s2net", "hdlr", "procrustes"] {
        assert!(trainer(n).is_ok(), "{n}");
    }
}

/// The matrix-free solver (the default) and the dense one find the same
/// canonical correlations and OPCA eigenvalues once converged, and spaces
/// that retrieve alike at the default settings.
#[test]
fn implicit_and_dense_solvers_agree() {
    let data = train_data(600, 150, 140, 11);
    let xs = weighted(&data.train_src, &data.vocabs, Side::Source);
    let xt = weighted(&data.train_tgt, &data.vocabs, Side::Target);
    let k = 8;
    let mut quiet = |_: &str| {};
    let converged = |s| SubspaceOpts {
        tol: 1e-10,
        ..opts(s, 10, 20)
    };
    let ci = cca::fit(&xs, &xt, k, 0.3, &converged(Solver::Implicit), &mut quiet).unwrap();
    let cd = cca::fit(&xs, &xt, k, 0.3, &converged(Solver::Dense), &mut quiet).unwrap();
    for (a, b) in ci.correlations.iter().zip(&cd.correlations) {
        // the dense solver's sparse products round through f32
        assert!((a - b).abs() < 1e-4 * b, "cca: {a} vs dense {b}");
    }
    assert!((ci.ridges.0 - cd.ridges.0).abs() < 1e-12 * cd.ridges.0);
    assert!((ci.ridges.1 - cd.ridges.1).abs() < 1e-12 * cd.ridges.1);
    let oi = opca::fit(&xs, &xt, k, 0.1, &converged(Solver::Implicit), &mut quiet).unwrap();
    let od = opca::fit(&xs, &xt, k, 0.1, &converged(Solver::Dense), &mut quiet).unwrap();
    for (a, b) in oi.eigenvalues.iter().zip(&od.eigenvalues) {
        assert!((a - b).abs() < 1e-4 * b, "opca: {a} vs dense {b}");
    }
    assert!((oi.ridge - od.ridge).abs() < 1e-12 * od.ridge);
    // at the registry's defaults, through the trainers
    for name in ["cca", "opca"] {
        let trainer = trainer(name).unwrap();
        let mrr = |solver: &str| {
            let dim = k.to_string();
            let p = params(&[("dim", dim.as_str()), ("solver", solver)]);
            let mut h = TestHooks::default();
            let m = trainer
                .train(&data, &p, &Device::Cpu, 3, None, &mut h)
                .unwrap();
            assert!(
                h.logs
                    .iter()
                    .any(|l| l.contains(&format!("{solver} solver"))),
                "{name}: {:?}",
                h.logs
            );
            mrr_of(m.as_ref(), &data.valid_src, &data.valid_tgt)
        };
        let (i, d) = (mrr("implicit"), mrr("dense"));
        assert!((i - d).abs() < 0.01, "{name}: implicit MRR {i}, dense {d}");
    }
}

/// Issue 39: a closed-form fit gives the same model, bit for bit, with one
/// thread or several (its parallel reductions add in a fixed order).
#[test]
fn closed_form_fits_are_the_same_with_any_thread_count() {
    // enough terms and rows that the implicit solver's reductions split
    // over many workers; the dense route (V × V) on fewer terms
    let big = train_data(1200, 1100, 1050, 11);
    let small = train_data(600, 300, 280, 12);
    for (name, solver, data) in [
        ("opca", "implicit", &big),
        ("cca", "implicit", &big),
        ("cl-lsi", "implicit", &big),
        ("opca", "dense", &small),
        ("cca", "dense", &small),
    ] {
        let kv: Vec<(&str, &str)> = if name == "cl-lsi" {
            vec![("dim", "8")]
        } else {
            vec![("dim", "8"), ("solver", solver)]
        };
        let fit = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut hooks = TestHooks::default();
                crate::common::model_bits(train(name, data, &kv, &mut hooks).unwrap().as_ref())
            })
        };
        let one = fit(1);
        assert!(one == fit(3), "{name} ({solver}): 1 and 3 threads differ");
        assert!(one == fit(4), "{name} ({solver}): 1 and 4 threads differ");
    }
}
