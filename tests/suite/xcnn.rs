//! XCNN: gradients against finite differences, the frozen target network,
//! encoding conventions, bad input, learning and exact resume, on small
//! synthetic bilingual corpora built here (no files needed).

use std::collections::{BTreeMap, HashMap};

use candle_core::{DType, Device, Tensor, Var};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosetta::eval::sentence::sentence_retrieval;
use rosetta::models::nn::SparseBatch;
use rosetta::models::xcnn::{batch_loss, objective, xcnn_trainer, Composer, Loss};
use rosetta::models::{Flow, Hooks, Resume, StepReport, TrainData};
use rosetta::models::{Model, Params};
use rosetta::text::{CsrMatrix, Vocabulary};
use rosetta::text::{Side, Vocabs};

fn vocab(lang: &str, n: usize) -> Vocabulary {
    Vocabulary::from_parts(
        lang,
        (0..n).map(|i| format!("{lang}{i}")).collect(),
        vec![1; n],
        10,
    )
}

/// A parallel corpus where target term `perm[i]` translates source term `i`;
/// texts are 2-5 terms of one of a few topics (so pseudo-relevant positives
/// exist), with counts 1-2.
fn corpus(n_pairs: usize, n_terms: usize, seed: u64) -> (CsrMatrix, CsrMatrix, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let perm: Vec<usize> = (0..n_terms).map(|i| (i * 7 + 3) % n_terms).collect();
    let (mut s, mut t) = (CsrMatrix::new(n_terms), CsrMatrix::new(n_terms));
    let mut topics = Vec::new();
    let topic_size = 8;
    for _ in 0..n_pairs {
        let topic = rng.random_range(0..n_terms / topic_size);
        let len = rng.random_range(2..=5);
        let terms: Vec<(u32, f32)> = (0..len)
            .map(|_| {
                let id = topic * topic_size + rng.random_range(0..topic_size);
                (id as u32, rng.random_range(1..=2) as f32)
            })
            .collect();
        s.push_row(terms.clone());
        t.push_row(terms.iter().map(|(i, c)| (perm[*i as usize] as u32, *c)));
        topics.push(topic);
    }
    (s, t, topics)
}

/// Best overlap match of each row other than itself.
fn positives(m: &CsrMatrix) -> Vec<Option<u32>> {
    let d = m.to_dense();
    (0..m.n_rows())
        .map(|i| {
            let mut best = None;
            let mut bs = 0.0f32;
            for j in 0..m.n_rows() {
                if j != i {
                    let s = d.row(i).dot(&d.row(j));
                    if s > bs {
                        bs = s;
                        best = Some(j as u32);
                    }
                }
            }
            best
        })
        .collect()
}

fn data(n_pairs: usize, n_terms: usize) -> TrainData {
    let (s, t, _) = corpus(n_pairs, n_terms, 11);
    let (vs, vt, _) = corpus(60, n_terms, 12);
    let mono_positive = positives(&t);
    TrainData {
        vocabs: Vocabs {
            source: vocab("en", n_terms),
            target: vocab("hi", n_terms),
        },
        mono: t.clone(),
        mono_positive,
        seqs: None,
        texts: None,
        pretrained: None,
        dictionary: None,
        init: None,
        train_src: s,
        train_tgt: t,
        valid_src: vs,
        valid_tgt: vt,
    }
}

fn params(kv: &[(&str, &str)]) -> Params {
    Params::new(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// Hooks that record the target network after every epoch, and full
/// checkpoints (model + extra tensors) by (phase, epoch).
#[derive(Default)]
struct Recorder {
    tgt: Vec<(String, usize, Vec<Vec<u64>>)>,
    checkpoints: HashMap<(String, usize), (usize, HashMap<String, Tensor>)>,
    steps: usize,
    losses: Vec<f64>,
    logs: Vec<String>,
}

/// Exact bit patterns (f32 and i64 convert to f64 exactly).
fn bits(t: &Tensor) -> Vec<u64> {
    t.flatten_all()
        .unwrap()
        .to_dtype(DType::F64)
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

fn tgt_bits(model: &dyn Model) -> Vec<Vec<u64>> {
    let mut v: Vec<(String, Tensor)> = model
        .tensors()
        .unwrap()
        .into_iter()
        .filter(|(n, _)| n.starts_with("tgt."))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.iter().map(|(_, t)| bits(t)).collect()
}

impl Hooks for Recorder {
    fn step(&mut self, r: &StepReport) -> rosetta::Result<Flow> {
        self.steps = r.step;
        self.losses.push(r.loss);
        Ok(Flow::Continue)
    }
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        extra: Vec<(String, Tensor)>,
    ) -> rosetta::Result<Flow> {
        self.tgt.push((phase.to_string(), epoch, tgt_bits(model)));
        let mut all: HashMap<String, Tensor> = model.tensors()?.into_iter().collect();
        all.extend(extra);
        self.checkpoints
            .insert((phase.to_string(), epoch), (self.steps, all));
        Ok(Flow::Continue)
    }
    fn log(&mut self, msg: &str) {
        self.logs.push(msg.to_string());
    }
}

fn set_elem(v: &Var, i: usize, x: f64) {
    let shape = v.shape().clone();
    let mut all = v
        .as_tensor()
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap();
    all[i] = x;
    v.set(&Tensor::from_vec(all, shape, &Device::Cpu).unwrap())
        .unwrap();
}

fn get_all(v: &Var) -> Vec<f64> {
    v.as_tensor()
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
}

/// Autograd gradient of `f` against central differences, every parameter.
fn check_grad(vars: &[Var], f: &dyn Fn() -> Tensor) {
    let j = f();
    let grads = j.backward().unwrap();
    let h = 1e-6;
    let mut checked = 0;
    for v in vars {
        let g = grads
            .get(v.as_tensor())
            .map(|g| g.flatten_all().unwrap().to_vec1::<f64>().unwrap())
            .unwrap_or_else(|| vec![0.0; v.elem_count()]);
        let base = get_all(v);
        for i in 0..base.len() {
            set_elem(v, i, base[i] + h);
            let jp = f().to_scalar::<f64>().unwrap();
            set_elem(v, i, base[i] - h);
            let jm = f().to_scalar::<f64>().unwrap();
            set_elem(v, i, base[i]);
            let num = (jp - jm) / (2.0 * h);
            assert!(
                (num - g[i]).abs() <= 1e-6 + 1e-5 * num.abs(),
                "element {i}: autograd {} vs numeric {num}",
                g[i]
            );
            checked += 1;
        }
    }
    assert!(checked > 20);
}

#[test]
fn gradient_of_j_matches_finite_differences() {
    let dev = Device::Cpu;
    let (s, t, _) = corpus(12, 16, 3);
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    // Two layers, so the chain through the deeper layer is checked too.
    let net = Composer::random(16, 3, 2, 0.5, None, &mut rng, DType::F64, &dev).unwrap();
    let vars: Vec<Var> = net.named_vars("n").into_iter().map(|v| v.1).collect();
    // Mono (Eq. 7): q, d+, d− through the same network.
    let q = SparseBatch::new(&t, &[0, 1, 2, 3], false, DType::F64, &dev).unwrap();
    let p = SparseBatch::new(&t, &[4, 5, 6, 7], false, DType::F64, &dev).unwrap();
    let n = SparseBatch::new(&t, &[8, 9, 10, 11], false, DType::F64, &dev).unwrap();
    check_grad(&vars, &|| {
        objective(
            &net.compose(&q).unwrap(),
            &net.compose(&p).unwrap(),
            Some(&net.compose(&n).unwrap()),
        )
        .unwrap()
    });
    // Cross (Eq. 9) with a fixed target network, two random negatives each
    // and in-batch negatives.
    let tgt = Composer::random(16, 3, 2, 0.5, None, &mut rng, DType::F64, &dev).unwrap();
    let src = SparseBatch::new(&s, &[0, 1, 2], false, DType::F64, &dev).unwrap();
    let pos = tgt
        .compose(&SparseBatch::new(&t, &[0, 1, 2], false, DType::F64, &dev).unwrap())
        .unwrap()
        .detach();
    let neg = tgt
        .compose(&SparseBatch::new(&t, &[5, 6, 7, 8, 9, 3], false, DType::F64, &dev).unwrap())
        .unwrap()
        .detach();
    check_grad(&vars, &|| {
        objective(&net.compose(&src).unwrap(), &pos, Some(&neg)).unwrap()
    });
    check_grad(&vars, &|| {
        objective(&net.compose(&src).unwrap(), &pos, None).unwrap()
    });
}

#[test]
fn objective_values_by_hand() {
    let dev = Device::Cpu;
    let q = Tensor::new(&[[1.0f64, 0.0], [0.0, 2.0]], &dev).unwrap();
    let p = Tensor::new(&[[1.0f64, 1.0], [0.0, 1.0]], &dev).unwrap();
    let n = Tensor::new(&[[0.0f64, 1.0], [1.0, 0.0]], &dev).unwrap();
    // pair 0: cos+ = 1/√2, cos− = 0; pair 1: cos+ = 1, cos− = 0
    let j = objective(&q, &p, Some(&n))
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    assert!((j - (0.5f64.sqrt() + 1.0) / 2.0).abs() < 1e-9, "{j}");
    // in-batch: pair 0 negative is p1 (cos 0), pair 1 negative is p0 (cos 1/√2)
    let j = objective(&q, &p, None).unwrap().to_scalar::<f64>().unwrap();
    let want = ((0.5f64.sqrt() - 0.0) + (1.0 - 0.5f64.sqrt())) / 2.0;
    assert!((j - want).abs() < 1e-9, "{j}");
}

#[test]
fn logistic_loss_by_hand_and_its_gradient() {
    let dev = Device::Cpu;
    let q = Tensor::new(&[[1.0f64, 0.0], [0.0, 2.0]], &dev).unwrap();
    let p = Tensor::new(&[[1.0f64, 1.0], [0.0, 1.0]], &dev).unwrap();
    let n = Tensor::new(&[[0.0f64, 1.0], [1.0, 0.0]], &dev).unwrap();
    let sp = |x: f64| (1.0 + x.exp()).ln();
    let g = 10.0;
    let r = 0.5f64.sqrt();
    // random negatives: pair 0 delta = 1/√2 − 0, pair 1 delta = 1 − 0
    let l = batch_loss(&q, &p, Some(&n), Loss::Logistic(g))
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    let want = (sp(-g * r) + sp(-g)) / 2.0;
    assert!((l - want).abs() < 1e-9, "{l} vs {want}");
    // in-batch: pair 0 against p1 (cos 0), pair 1 against p0 (cos 1/√2)
    let l = batch_loss(&q, &p, None, Loss::Logistic(g))
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    let want = (sp(-g * r) + sp(-g * (1.0 - r))) / 2.0;
    assert!((l - want).abs() < 1e-9, "{l} vs {want}");
    // the paper's loss is −J
    let l = batch_loss(&q, &p, Some(&n), Loss::CosDiff)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    let j = objective(&q, &p, Some(&n))
        .unwrap()
        .to_scalar::<f64>()
        .unwrap();
    assert!((l + j).abs() < 1e-12);
    // gradients against finite differences, both negative kinds
    let (s, t, _) = corpus(12, 16, 3);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let net = Composer::random(16, 3, 1, 0.5, None, &mut rng, DType::F64, &dev).unwrap();
    let vars: Vec<Var> = net.named_vars("n").into_iter().map(|v| v.1).collect();
    let tgt = Composer::random(16, 3, 1, 0.5, None, &mut rng, DType::F64, &dev).unwrap();
    let src = SparseBatch::new(&s, &[0, 1, 2], false, DType::F64, &dev).unwrap();
    let pos = tgt
        .compose(&SparseBatch::new(&t, &[0, 1, 2], false, DType::F64, &dev).unwrap())
        .unwrap()
        .detach();
    let neg = tgt
        .compose(&SparseBatch::new(&t, &[5, 6, 7, 8, 9, 3], false, DType::F64, &dev).unwrap())
        .unwrap()
        .detach();
    check_grad(&vars, &|| {
        batch_loss(
            &net.compose(&src).unwrap(),
            &pos,
            Some(&neg),
            Loss::Logistic(3.0),
        )
        .unwrap()
    });
    check_grad(&vars, &|| {
        batch_loss(&net.compose(&src).unwrap(), &pos, None, Loss::Logistic(3.0)).unwrap()
    });
}

#[test]
fn cross_phase_leaves_the_target_network_bit_identical() {
    let d = data(300, 40);
    let (model, rec) = trained(
        xcnn_trainer(),
        &d,
        &[
            ("dim", "8"),
            ("mono_epochs", "1"),
            ("epochs", "3"),
            ("batch", "20"),
        ],
        1,
    );
    let mono: Vec<_> = rec.tgt.iter().filter(|r| r.0 == "mono").collect();
    let cross: Vec<_> = rec.tgt.iter().filter(|r| r.0 == "cross").collect();
    assert_eq!(mono.len(), 1);
    assert_eq!(cross.len(), 3);
    // mono training did change the target network away from a fresh init...
    let fresh = xcnn_trainer()
        .train(
            &d,
            &params(&[
                ("dim", "8"),
                ("mono_epochs", "0"),
                ("epochs", "1"),
                ("batch", "20"),
            ]),
            &Device::Cpu,
            1,
            None,
            &mut Recorder::default(),
        )
        .unwrap();
    assert_ne!(tgt_bits(fresh.as_ref()), mono[0].2);
    // ...and the cross phase never did.
    for c in &cross {
        assert_eq!(c.2, mono[0].2, "target changed in cross epoch {}", c.1);
    }
    assert_eq!(tgt_bits(model.as_ref()), mono[0].2);
    // while the source network did move
    let src_of = |m: &dyn Model| -> Vec<u64> {
        bits(
            &m.tensors()
                .unwrap()
                .into_iter()
                .find(|(n, _)| n == "src.w1")
                .unwrap()
                .1,
        )
    };
    let c1 = &rec.checkpoints[&("cross".to_string(), 1)].1["src.w1"];
    let c3 = &rec.checkpoints[&("cross".to_string(), 3)].1["src.w1"];
    assert_ne!(bits(c1), bits(c3));
    assert!(!src_of(model.as_ref()).is_empty());
    assert!(rec
        .logs
        .iter()
        .any(|l| l.contains("held-out pairwise accuracy")));
}

#[test]
fn lazy_adam_learns_too_and_touches_only_batch_rows() {
    let d = data(600, 40);
    let (model, _) = trained(
        xcnn_trainer(),
        &d,
        &[
            ("dim", "16"),
            ("mono_epochs", "2"),
            ("epochs", "15"),
            ("batch", "20"),
            ("lr", "0.05"),
            ("optim", "lazy-adam"),
        ],
        7,
    );
    let s = model.encode(Side::Source, &d.valid_src).unwrap();
    let t = model.encode(Side::Target, &d.valid_tgt).unwrap();
    let mrr = sentence_retrieval(&s, &t, rosetta::space::Similarity::Cosine).mrr;
    assert!(mrr > 0.35, "valid MRR {mrr}");
    // one lazy step changes exactly the rows of the batch's terms
    let dev = Device::Cpu;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let net = Composer::random(40, 4, 1, 0.1, None, &mut rng, DType::F32, &dev).unwrap();
    let mut opt = rosetta::models::optim::Adam::new(net.named_vars("n"), 0.1, 0.0).unwrap();
    let before = net.layers[0].0.as_tensor().to_vec2::<f32>().unwrap();
    let b = SparseBatch::new(&d.train_src, &[0, 1], false, DType::F32, &dev).unwrap();
    let (y, leaf) = net.compose_rows(&b).unwrap();
    let other = net
        .compose(&SparseBatch::new(&d.train_src, &[2, 3], false, DType::F32, &dev).unwrap())
        .unwrap()
        .detach();
    let loss = objective(&y, &other, None).unwrap().neg().unwrap();
    opt.backward_step_rows(&loss, &[("n.w1", &b.uniq, &leaf)])
        .unwrap();
    let after = net.layers[0].0.as_tensor().to_vec2::<f32>().unwrap();
    let used: Vec<u32> = b.uniq.to_vec1::<u32>().unwrap();
    for i in 0..40 {
        assert_eq!(before[i] != after[i], used.contains(&(i as u32)), "row {i}");
    }
}

#[test]
fn training_learns_the_translation_and_encodes_unit_rows() {
    let d = data(600, 40);
    let (model, rec) = trained(
        xcnn_trainer(),
        &d,
        &[
            ("dim", "16"),
            ("mono_epochs", "3"),
            ("epochs", "15"),
            ("batch", "20"),
            ("lr", "0.05"),
        ],
        7,
    );
    assert!(rec.losses.iter().all(|l| l.is_finite()));
    let s = model.encode(Side::Source, &d.valid_src).unwrap();
    let t = model.encode(Side::Target, &d.valid_tgt).unwrap();
    let mrr = sentence_retrieval(&s, &t, rosetta::space::Similarity::Cosine).mrr;
    // chance over 60 candidates is about 0.08; same-topic texts are hard to tell apart
    assert!(mrr > 0.35, "valid MRR {mrr}");
    // unit rows, and a zero row (not NaN) for an empty text
    let mut texts = CsrMatrix::new(40);
    texts.push_row([(1, 2.0), (5, 1.0)]);
    texts.push_row([]);
    let e = model.encode(Side::Target, &texts).unwrap();
    let n0: f32 = e.row(0).iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((n0 - 1.0).abs() < 1e-5);
    assert!(e.row(1).iter().all(|v| *v == 0.0));
    let tv = model.term_vectors(Side::Source).unwrap();
    assert_eq!(tv.dim(), (40, 16));
    for r in tv.rows() {
        assert!((r.dot(&r).sqrt() - 1.0).abs() < 1e-5);
    }
    // the checkpoint reloads to the same encodings
    let tensors: HashMap<String, Tensor> = model.tensors().unwrap().into_iter().collect();
    let again = xcnn_trainer()
        .load(&d.vocabs, tensors, &params(&[("dim", "16")]), &Device::Cpu)
        .unwrap();
    assert_eq!(again.encode(Side::Source, &d.valid_src).unwrap(), s);
}

#[test]
fn resume_continues_exactly() {
    for optim in ["adam", "lazy-adam"] {
        resume_case(optim);
    }
}

fn resume_case(optim: &str) {
    let d = data(200, 40);
    let kv = [
        ("dim", "8"),
        ("mono_epochs", "2"),
        ("epochs", "3"),
        ("batch", "25"),
        ("negatives", "random:2"),
        ("optim", optim),
    ];
    let mut full = Recorder::default();
    xcnn_trainer()
        .train(&d, &params(&kv), &Device::Cpu, 3, None, &mut full)
        .unwrap();
    for (phase, epoch) in [("mono", 1), ("cross", 1)] {
        let (step, tensors) = full.checkpoints[&(phase.to_string(), epoch)].clone();
        let mut rest = Recorder::default();
        let resume = Resume {
            phase: phase.to_string(),
            epoch,
            step,
            tensors,
        };
        xcnn_trainer()
            .train(&d, &params(&kv), &Device::Cpu, 3, Some(resume), &mut rest)
            .unwrap();
        let a = &full.checkpoints[&("cross".to_string(), 3)];
        let b = &rest.checkpoints[&("cross".to_string(), 3)];
        assert_eq!(
            a.0, b.0,
            "step counts differ after resuming {phase} {epoch}"
        );
        for (k, t) in &a.1 {
            assert_eq!(
                bits(t),
                bits(&b.1[k]),
                "{k} differs after resuming {phase} {epoch}"
            );
        }
    }
}

#[test]
fn logistic_loss_with_in_batch_negatives_learns() {
    let d = data(600, 40);
    let (model, rec) = trained(
        xcnn_trainer(),
        &d,
        &[
            ("dim", "16"),
            ("mono_epochs", "3"),
            ("epochs", "15"),
            ("batch", "20"),
            ("lr", "0.05"),
            ("negatives", "in-batch"),
            ("loss", "logistic:10"),
        ],
        7,
    );
    assert!(rec.losses.iter().all(|l| l.is_finite() && *l > 0.0));
    let s = model.encode(Side::Source, &d.valid_src).unwrap();
    let t = model.encode(Side::Target, &d.valid_tgt).unwrap();
    let mrr = sentence_retrieval(&s, &t, rosetta::space::Similarity::Cosine).mrr;
    assert!(mrr > 0.35, "valid MRR {mrr}");
}

#[test]
fn train_target_moves_the_target_network_in_the_cross_phase() {
    let d = data(300, 40);
    for optim in ["adam", "lazy-adam"] {
        let p = params(&[
            ("dim", "8"),
            ("mono_epochs", "1"),
            ("epochs", "2"),
            ("batch", "20"),
            ("negatives", "in-batch"),
            ("train_target", "true"),
            ("optim", optim),
        ]);
        let mut rec = Recorder::default();
        xcnn_trainer()
            .train(&d, &p, &Device::Cpu, 1, None, &mut rec)
            .unwrap();
        let mono: Vec<_> = rec.tgt.iter().filter(|r| r.0 == "mono").collect();
        let cross: Vec<_> = rec.tgt.iter().filter(|r| r.0 == "cross").collect();
        assert_eq!((mono.len(), cross.len()), (1, 2));
        assert_ne!(cross[0].2, mono[0].2, "{optim}: target frozen");
        assert_ne!(cross[1].2, cross[0].2, "{optim}: target frozen");
        assert!(rec.losses.iter().all(|l| l.is_finite()));
    }
}

#[test]
fn in_batch_negatives_and_depth_train_without_nan() {
    let d = data(200, 40);
    let (m, rec) = trained(
        xcnn_trainer(),
        &d,
        &[
            ("dim", "8"),
            ("layers", "2"),
            ("mono_epochs", "1"),
            ("epochs", "2"),
            ("negatives", "in-batch"),
        ],
        1,
    );
    assert!(!rec.losses.is_empty() && rec.losses.iter().all(|l| l.is_finite()));
    assert!(m
        .encode(Side::Source, &d.valid_src)
        .unwrap()
        .iter()
        .all(|v| v.is_finite()));
}

#[test]
fn positives_are_computed_when_none_are_given() {
    let mut m = CsrMatrix::new(5);
    m.push_row([(0, 1.0), (1, 1.0)]);
    m.push_row([(1, 1.0), (2, 1.0)]);
    m.push_row([(0, 1.0), (1, 1.0), (4, 1.0)]);
    m.push_row([(3, 1.0)]);
    let v = Vocabulary::from_parts(
        "hi",
        (0..5).map(|i| i.to_string()).collect(),
        vec![2, 3, 1, 1, 1],
        4,
    );
    let p = rosetta::models::xcnn::tfidf_positives(&m, &v).unwrap();
    assert_eq!(p, vec![Some(2), Some(0), Some(0), None]);
    // training with no positives given uses them (and says so)
    let mut d = data(100, 40);
    d.mono_positive = Vec::new();
    let kv = [("dim", "4"), ("mono_epochs", "1"), ("epochs", "1")];
    let (_, rec) = trained(xcnn_trainer(), &d, &kv, 1);
    assert!(
        rec.logs
            .iter()
            .any(|l| l.contains("best tfidf match mined")),
        "{:?}",
        rec.logs
    );
    assert!(rec.tgt.iter().any(|r| r.0 == "mono"));
    // or the best BM25 match, when asked
    let (_, rec) = trained(
        xcnn_trainer(),
        &d,
        &[kv[0], kv[1], kv[2], ("positives", "bm25")],
        1,
    );
    assert!(
        rec.logs.iter().any(|l| l.contains("best bm25 match mined")),
        "{:?}",
        rec.logs
    );
    // positives that come with the data are used as they are
    let (_, rec) = trained(xcnn_trainer(), &data(100, 40), &kv, 1);
    assert!(rec
        .logs
        .iter()
        .any(|l| l.contains("given with the training data")));
}

#[test]
fn bad_input_is_a_clear_error() {
    let d = data(50, 40);
    let run = |kv: &[(&str, &str)], d: &TrainData| {
        crate::common::with_init(d, kv)
            .and_then(|d| {
                xcnn_trainer().train(
                    &d,
                    &params(kv),
                    &Device::Cpu,
                    1,
                    None,
                    &mut Recorder::default(),
                )
            })
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(run(&[("dim", "1000000")], &d).contains("dim=1000000"));
    assert!(run(&[("dim", "0")], &d).contains("dim=0"));
    assert!(run(&[("negatives", "some")], &d).contains("negatives"));
    assert!(run(&[("loss", "logistic:-1")], &d).contains("loss"));
    assert!(run(&[("loss", "hinge")], &d).contains("loss"));
    assert!(run(&[("lr", "-1")], &d).contains("lr"));
    assert!(run(&[("dimm", "8")], &d).contains("dimm"));
    assert!(run(&[("init_bias", "low")], &d).contains("init_bias=low"));
    assert!(run(&[("positives", "random")], &d).contains("positives"));
    assert!(run(&[("init_bias", "NaN")], &d).contains("init_bias=NaN"));
    // no usable pseudo-relevance positives with a mono phase asked for: none
    // given and none to compute (no two texts share a term)
    let mut none = d.clone();
    let mut mono = CsrMatrix::new(40);
    for i in 0..10 {
        mono.push_row([(i, 1.0)]);
    }
    none.mono = mono;
    none.mono_positive = vec![None; 10];
    assert!(run(&[("dim", "4")], &none).contains("mono_epochs=0"));
    // a positive past the texts
    let mut bad = d.clone();
    bad.mono_positive[0] = Some(100_000);
    assert!(run(&[("dim", "4")], &bad).contains("100000"));
    // no training pairs
    let mut empty = d.clone();
    empty.train_src = CsrMatrix::new(40);
    empty.train_tgt = CsrMatrix::new(40);
    assert!(run(&[("dim", "4"), ("mono_epochs", "0")], &empty).contains("no training pair"));
    // a pre-initialised session that is not there
    let e = run(&[("init", "/nonexistent/session")], &d);
    assert!(e.contains("best.safetensors"), "{e}");
}

// ---------------------------------------------------------------------------
// BAE
// ---------------------------------------------------------------------------

use rosetta::models::bae::{bae_trainer, bce_sparse, bce_with_logits, correlation};

#[test]
fn bae_losses_by_hand() {
    let dev = Device::Cpu;
    let z = Tensor::new(&[[0.0f64, 2.0], [-1.0, 30.0]], &dev).unwrap();
    let t = Tensor::new(&[[1.0f64, 0.0], [0.0, 1.0]], &dev).unwrap();
    let l = bce_with_logits(&z, &t).unwrap().to_scalar::<f64>().unwrap();
    let sp = |x: f64| (1.0 + x.exp()).ln();
    // row sums of softplus(z) − t·z, averaged over the 2 rows
    let want = ((sp(0.0) + sp(2.0)) + (sp(-1.0) + sp(30.0) - 30.0)) / 2.0;
    assert!((l - want).abs() < 1e-9, "{l} vs {want}");
    // the same from the positions of the ones (row · vocab + term)
    let ones = Tensor::new(&[0u32, 3], &dev).unwrap();
    let ls = bce_sparse(&z, &ones).unwrap().to_scalar::<f64>().unwrap();
    assert!((ls - want).abs() < 1e-9, "{ls} vs {want}");
    let a = Tensor::new(&[[1.0f64, 0.0], [2.0, 1.0], [3.0, 0.0]], &dev).unwrap();
    let b = Tensor::new(&[[2.0f64, 5.0], [4.0, 5.0], [6.0, 5.0]], &dev).unwrap();
    // first columns perfectly correlated, second column of b constant (0)
    let c = correlation(&a, &b).unwrap().to_scalar::<f64>().unwrap();
    assert!((c - 1.0).abs() < 1e-6, "{c}");
}

#[test]
fn bae_learns_unit_codes_and_reloads() {
    let d = data(600, 40);
    for (corr, input, optim, recon) in [
        ("0", "binary", "adam", "full"),
        ("0.5", "tf", "lazy-adam", "sampled:10"),
        ("0", "binary", "adam", "sampled:10"),
    ] {
        let p = params(&[
            ("optim", optim),
            ("recon", recon),
            ("dim", "16"),
            ("epochs", "20"),
            ("batch", "20"),
            ("lr", "0.01"),
            ("corr", corr),
            ("input", input),
        ]);
        let mut rec = Recorder::default();
        let model = bae_trainer()
            .train(&d, &p, &Device::Cpu, 5, None, &mut rec)
            .unwrap();
        assert!(rec.losses.iter().all(|l| l.is_finite()));
        // reconstruction loss falls
        let (first, last) = (rec.losses[0], *rec.losses.last().unwrap());
        assert!(last < first * 0.8, "loss {first} -> {last}");
        let s = model.encode(Side::Source, &d.valid_src).unwrap();
        let t = model.encode(Side::Target, &d.valid_tgt).unwrap();
        let mrr = sentence_retrieval(&s, &t, rosetta::space::Similarity::Cosine).mrr;
        assert!(mrr > 0.25, "corr {corr}: valid MRR {mrr}");
        let mut texts = CsrMatrix::new(40);
        texts.push_row([(3, 1.0)]);
        texts.push_row([]);
        let e = model.encode(Side::Source, &texts).unwrap();
        assert!((e.row(0).dot(&e.row(0)) - 1.0).abs() < 1e-5);
        assert!(e.row(1).iter().all(|v| *v == 0.0));
        // term vectors are codes of one-term documents (binary input)
        let tv = model.term_vectors(Side::Source).unwrap();
        if input == "binary" {
            let diff: f32 = (&tv.row(3) - &e.row(0)).iter().map(|x| x.abs()).sum();
            assert!(diff < 1e-5, "{diff}");
        }
        let tensors: HashMap<String, Tensor> = model.tensors().unwrap().into_iter().collect();
        let again = bae_trainer()
            .load(&d.vocabs, tensors, &p, &Device::Cpu)
            .unwrap();
        assert_eq!(again.encode(Side::Source, &d.valid_src).unwrap(), s);
    }
}

#[test]
fn bae_resume_and_bad_input() {
    let d = data(100, 40);
    let kv = [
        ("dim", "8"),
        ("epochs", "3"),
        ("batch", "25"),
        ("corr", "0.1"),
    ];
    let mut full = Recorder::default();
    bae_trainer()
        .train(&d, &params(&kv), &Device::Cpu, 3, None, &mut full)
        .unwrap();
    let (step, tensors) = full.checkpoints[&("train".to_string(), 1)].clone();
    let mut rest = Recorder::default();
    let resume = Resume {
        phase: "train".into(),
        epoch: 1,
        step,
        tensors,
    };
    bae_trainer()
        .train(&d, &params(&kv), &Device::Cpu, 3, Some(resume), &mut rest)
        .unwrap();
    let a = &full.checkpoints[&("train".to_string(), 3)].1;
    let b = &rest.checkpoints[&("train".to_string(), 3)].1;
    for (k, t) in a {
        assert_eq!(bits(t), bits(&b[k]), "{k} differs after resuming");
    }
    let run = |kv: &[(&str, &str)], d: &TrainData| {
        bae_trainer()
            .train(
                d,
                &params(kv),
                &Device::Cpu,
                1,
                None,
                &mut Recorder::default(),
            )
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(run(&[("dim", "99999")], &d).contains("dim=99999"));
    assert!(run(&[("input", "idf")], &d).contains("input=idf"));
    assert!(run(&[("corr", "-1")], &d).contains("corr"));
    assert!(run(&[("recon", "sampled:0")], &d).contains("recon=sampled:0"));
    let mut empty = d.clone();
    empty.train_src = CsrMatrix::new(40);
    empty.train_tgt = CsrMatrix::new(40);
    assert!(run(&[("dim", "4")], &empty).contains("no training pair"));
}

/// A minimal session folder for `init=`: `model` as its best checkpoint,
/// next to both vocabularies, as a session lays them out.
fn session_dir(model: &dyn Model, vocabs: &Vocabs) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("checkpoints")).unwrap();
    let tensors: HashMap<String, Tensor> = model.tensors().unwrap().into_iter().collect();
    candle_core::safetensors::save(&tensors, dir.path().join("checkpoints/best.safetensors"))
        .unwrap();
    vocabs
        .source
        .save(&dir.path().join("vocab.source.json"))
        .unwrap();
    vocabs
        .target
        .save(&dir.path().join("vocab.target.json"))
        .unwrap();
    dir
}

/// A model trained by `trainer` with settings `kv`, and what its hooks saw.
fn trained(
    trainer: Box<dyn rosetta::models::Trainer>,
    d: &TrainData,
    kv: &[(&str, &str)],
    seed: u64,
) -> (Box<dyn Model>, Recorder) {
    let mut rec = Recorder::default();
    let d = crate::common::with_init(d, kv).unwrap();
    let m = trainer
        .train(&d, &params(kv), &Device::Cpu, seed, None, &mut rec)
        .unwrap();
    (m, rec)
}

/// The error message of an XCNN training that must fail.
fn xcnn_error(d: &TrainData, kv: &[(&str, &str)]) -> String {
    crate::common::with_init(d, kv)
        .and_then(|d| {
            xcnn_trainer().train(
                &d,
                &params(kv),
                &Device::Cpu,
                9,
                None,
                &mut Recorder::default(),
            )
        })
        .err()
        .expect("training should fail")
        .to_string()
}

#[test]
fn init_takes_a_pre_initialised_target_network() {
    let d = data(200, 40);
    let kv = [("dim", "8"), ("mono_epochs", "2"), ("epochs", "1")];
    let (first, _) = trained(xcnn_trainer(), &d, &kv, 1);
    let dir = session_dir(first.as_ref(), &d.vocabs);
    let init = dir.path().to_str().unwrap();
    let (second, rec) = trained(
        xcnn_trainer(),
        &d,
        &[("dim", "8"), ("epochs", "2"), ("init", init)],
        9,
    );
    assert!(rec.tgt.iter().all(|r| r.0 == "cross"), "no mono phase");
    assert_eq!(tgt_bits(second.as_ref()), tgt_bits(first.as_ref()));
    // the checkpoint file itself works too
    let file = dir.path().join("checkpoints/best.safetensors");
    let (third, _) = trained(
        xcnn_trainer(),
        &d,
        &[
            ("dim", "8"),
            ("epochs", "1"),
            ("init", file.to_str().unwrap()),
        ],
        9,
    );
    assert_eq!(tgt_bits(third.as_ref()), tgt_bits(first.as_ref()));
    // another vocabulary is refused, naming the file
    let mut other = d.vocabs.target.clone();
    other.terms.swap(0, 1);
    let other = Vocabulary::from_parts("hi", other.terms, other.df, other.n_docs);
    other.save(&dir.path().join("vocab.target.json")).unwrap();
    let e = xcnn_error(&d, &[("dim", "8"), ("init", init)]);
    assert!(
        e.contains("vocab.target.json") && e.contains("vocabulary differs"),
        "{e}"
    );
    // and so is another dimension
    d.vocabs
        .target
        .save(&dir.path().join("vocab.target.json"))
        .unwrap();
    let e = xcnn_error(&d, &[("dim", "16"), ("init", file.to_str().unwrap())]);
    assert!(e.contains("16"), "{e}");
}

#[test]
fn both_models_train_on_the_tiny_workspace() {
    let ws = rosetta::corpus::workspace::Workspace::load(std::path::Path::new(
        "tests/fixtures/corpus/tiny/workspace.toml",
    ))
    .unwrap();
    let prepared = rosetta::corpus::prepare::Prepared::build(&ws).unwrap();
    // no miner: the XCNN trainer finds its own pseudo-relevant positives
    let d = rosetta::models::TrainData::from_prepared(&prepared, Vec::new());
    for (name, kv) in [
        ("xcnn", vec![("mono_epochs", "2"), ("epochs", "3")]),
        ("bae", vec![("epochs", "3")]),
    ] {
        let trainer = match name {
            "xcnn" => xcnn_trainer(),
            _ => bae_trainer(),
        };
        let mut rec = Recorder::default();
        let m = trainer
            .train(&d, &params(&kv), &Device::Cpu, 1, None, &mut rec)
            .unwrap();
        assert_eq!(m.kind(), name);
        assert_eq!(m.dim(), 128);
        assert!(!rec.losses.is_empty() && rec.losses.iter().all(|l| l.is_finite()));
        let s = m.encode(Side::Source, &d.valid_src).unwrap();
        let t = m.encode(Side::Target, &d.valid_tgt).unwrap();
        assert!(
            sentence_retrieval(&s, &t, rosetta::space::Similarity::Cosine)
                .mrr
                .is_finite()
        );
        let tv = m.term_vectors(Side::Target).unwrap();
        assert_eq!(tv.nrows(), d.vocabs.target.len());
    }
}

/// `init=` a linear model's session starts both networks at its projection
/// (term rows `idf · P`, tanh near linear): before any training the XCNN
/// vectors point where the linear model's do, and there is no mono phase.
#[test]
fn init_from_a_linear_session_starts_both_networks_at_its_projection() {
    let mut d = data(200, 40);
    // document frequencies that differ, so idf weighting matters
    let spread = |lang: &str| {
        Vocabulary::from_parts(
            lang,
            (0..40).map(|i| format!("{lang}{i}")).collect(),
            (0..40).map(|i| 1 + (i * 7 % 40) as u32).collect(),
            40,
        )
    };
    d.vocabs = Vocabs {
        source: spread("en"),
        target: spread("hi"),
    };
    let (linear, _) = trained(
        rosetta::models::registry::trainer("opca").unwrap(),
        &d,
        &[("dim", "8")],
        1,
    );
    let dir = session_dir(linear.as_ref(), &d.vocabs);
    let init = dir.path().to_str().unwrap();
    let (xcnn, rec) = trained(
        xcnn_trainer(),
        &d,
        &[("dim", "8"), ("epochs", "0"), ("init", init)],
        3,
    );
    assert!(rec.tgt.iter().all(|r| r.0 == "cross"), "no mono phase");
    assert!(
        rec.logs.iter().any(|l| l.contains("linear model")),
        "{:?}",
        rec.logs
    );
    for (side, m) in [(Side::Source, &d.valid_src), (Side::Target, &d.valid_tgt)] {
        let (a, b) = (
            xcnn.encode(side, m).unwrap(),
            linear.encode(side, m).unwrap(),
        );
        // raw counts against the linear model's log-tf: close, not equal
        let mut sum = 0.0;
        for i in 0..m.n_rows() {
            let cos = a.row(i).dot(&b.row(i));
            assert!(cos > 0.9, "{side:?} row {i}: cosine {cos}");
            sum += cos;
        }
        let mean = sum / m.n_rows() as f32;
        assert!(mean > 0.98, "{side:?}: mean cosine {mean}");
    }
    let mrr = |m: &dyn Model| {
        sentence_retrieval(
            &m.encode(Side::Source, &d.valid_src).unwrap(),
            &m.encode(Side::Target, &d.valid_tgt).unwrap(),
            m.similarity(),
        )
        .mrr
    };
    let (mx, ml) = (mrr(xcnn.as_ref()), mrr(linear.as_ref()));
    assert!((mx - ml).abs() < 0.05, "xcnn {mx} vs opca {ml}");
    // and it trains on from there
    let (further, _) = trained(
        xcnn_trainer(),
        &d,
        &[
            ("dim", "8"),
            ("epochs", "3"),
            ("init", init),
            ("train_target", "true"),
        ],
        3,
    );
    assert!(mrr(further.as_ref()) >= mx - 1e-9);
    // a deeper network cannot start from a projection
    let e = xcnn_error(&d, &[("dim", "8"), ("layers", "2"), ("init", init)]);
    assert!(e.contains("layers=1"), "{e}");
}

/// `init_bias=V` starts every bias of both networks at V (the authors' jDNN
/// code uses −1.5); by default biases are `N(0,1)·init_scale` like weights.
#[test]
fn init_bias_sets_every_bias() {
    let d = data(50, 40);
    let kv = [("dim", "4"), ("mono_epochs", "0"), ("epochs", "0")];
    let biases = |m: &dyn Model| -> Vec<f32> {
        m.tensors()
            .unwrap()
            .into_iter()
            .filter(|(n, _)| n.ends_with(".b1"))
            .flat_map(|(_, t)| t.flatten_all().unwrap().to_vec1::<f32>().unwrap())
            .collect()
    };
    let (m, _) = trained(
        xcnn_trainer(),
        &d,
        &[kv[0], kv[1], kv[2], ("init_bias", "-1.5")],
        1,
    );
    let b = biases(m.as_ref());
    assert_eq!(b.len(), 8, "src.b1 and tgt.b1");
    assert!(b.iter().all(|v| *v == -1.5), "{b:?}");
    let (m, _) = trained(xcnn_trainer(), &d, &kv, 1);
    let b = biases(m.as_ref());
    assert!(b.iter().any(|v| *v != b[0]), "random biases differ: {b:?}");
}
