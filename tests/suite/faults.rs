//! Trustworthy results under faults (issue 14): every parser survives
//! generated and mutated input with an error naming its file; a diverged
//! model is never "best" and never scored as perfect; a resume is the same
//! run; a planted symbolic link or foreign PID is never written through or
//! signalled; a corrupt checkpoint or cache is reported or rebuilt.
//!
//! The property test runs a few dozen cases per parser in `cargo test`; a
//! long run: `PROPTEST_CASES=20000 cargo test --release --test suite faults::parsers`.

use crate::common;
use common::bits_of;

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use proptest::prelude::*;

use rosetta::corpus::{Collection, Dictionary, ParallelText, Prepared, Workspace};
use rosetta::eval::sentence::{aligned_ranks, sentence_retrieval};
use rosetta::eval::trec::{Qrels, Run};
use rosetta::models::TrainData;
use rosetta::session::{
    read_status, Checkpoint, CheckpointMeta, MetricsTail, Session, SessionConfig, State,
    BEST_CHECKPOINT, LAST_CHECKPOINT, LOG_FILE, METRICS_FILE,
};
use rosetta::train::runner::{run_job, Quiet};

// ------------------------------------------------------------ the parsers

/// One parser: the file name it reads and how to call it on that file.
/// `Ok(messages)` are located problems reported without failing (a metrics
/// file's bad lines), each of which must name the file too.
type Parse = fn(&Path) -> Result<Vec<String>, String>;

fn e2s<T>(r: rosetta::Result<T>) -> Result<Vec<String>, String> {
    r.map(|_| Vec::new()).map_err(|e| e.to_string())
}

fn parsers() -> Vec<(&'static str, &'static str, Parse)> {
    vec![
        ("workspace", "workspace.toml", |p| e2s(Workspace::load(p))),
        ("docs tsv", "docs.tsv", |p| e2s(Collection::read_docs(p))),
        ("docs jsonl", "docs.jsonl", |p| {
            e2s(Collection::read_docs(p))
        }),
        ("topics", "topics.txt", |p| e2s(Collection::read_queries(p))),
        ("queries tsv", "queries.tsv", |p| {
            e2s(Collection::read_queries(p))
        }),
        ("qrels", "qrels.txt", |p| {
            Qrels::read_checked(p, false)
                .map(|(_, w)| w)
                .map_err(|e| e.to_string())
        }),
        ("qrels strict", "qrels.strict", |p| {
            e2s(Qrels::read_checked(p, true))
        }),
        ("run", "run.txt", |p| e2s(Run::read(p))),
        ("dictionary", "dict.tsv", |p| e2s(Dictionary::read(p))),
        ("parallel tsv", "pairs.tsv", |p| {
            e2s(ParallelText::read_tsv(p))
        }),
        ("config.toml", "config.toml", |p| {
            e2s(SessionConfig::read(p.parent().unwrap()))
        }),
        ("status.json", "status.json", |p| {
            e2s(read_status(p.parent().unwrap()))
        }),
        ("metrics.jsonl", "metrics.jsonl", |p| {
            let mut t = MetricsTail::new(p);
            let mut b = t.poll().map_err(|e| e.to_string())?;
            b.errors.extend(t.finish().errors);
            Ok(b.errors.iter().map(|e| e.to_string()).collect())
        }),
        ("checkpoint", "c.safetensors", |p| {
            let ck = Checkpoint::read(p, &Device::Cpu).map_err(|e| e.to_string())?;
            // a readable checkpoint loaded by each model: a clear error, no panic
            let vocabs = rosetta::text::Vocabs {
                source: vocab("en", 6),
                target: vocab("es", 6),
            };
            let params = rosetta::models::Params::new(ck.meta.params.clone());
            let mut msgs = Vec::new();
            for model in ["xcnn", "bae", "s2net", "cl-lsi"] {
                if let Err(e) = rosetta::models::registry::trainer(model).unwrap().load(
                    &vocabs,
                    ck.model_tensors(),
                    &params,
                    &Device::Cpu,
                ) {
                    // not about the file's bytes: the tensors' fit, named
                    msgs.push(format!("{}: {e}", p.display()));
                }
            }
            Ok(msgs)
        }),
        ("vocabulary", "vocab.json", |p| {
            e2s(rosetta::text::Vocabulary::load(p))
        }),
        ("cached matrix", "m.csr", |p| {
            e2s(rosetta::corpus::prepare::read_csr(p))
        }),
        ("word vectors", "w.vec", |p| {
            e2s(rosetta::text::read_vec(p, &vocab("en", 5)))
        }),
    ]
}

fn vocab(lang: &str, n: usize) -> rosetta::text::Vocabulary {
    rosetta::text::Vocabulary::from_parts(
        lang,
        (0..n).map(|i| format!("{lang}{i}")).collect(),
        vec![1; n],
        10,
    )
}

/// A valid example of each parser's input, to mutate.
fn seeds() -> HashMap<&'static str, Vec<u8>> {
    let tiny = Path::new("tests/fixtures/corpus/tiny");
    let read = |p: PathBuf| std::fs::read(p).unwrap();
    let mut m = HashMap::new();
    m.insert("workspace", read(tiny.join("workspace.toml")));
    m.insert("docs tsv", read(tiny.join("docs.es.tsv")));
    m.insert("docs jsonl", read(tiny.join("docs.es.jsonl")));
    m.insert("topics", read(tiny.join("topics.en.txt")));
    m.insert("queries tsv", read(tiny.join("queries.en.tsv")));
    m.insert(
        "qrels",
        read(PathBuf::from("tests/fixtures/eval/graded.qrels")),
    );
    m.insert(
        "qrels strict",
        read(PathBuf::from("tests/fixtures/eval/graded.qrels")),
    );
    m.insert("run", read(PathBuf::from("tests/fixtures/eval/graded.run")));
    m.insert("dictionary", read(tiny.join("eng-spa.tsv")));
    m.insert("parallel tsv", read(tiny.join("pairs.tsv")));
    let sample = Path::new("tests/fixtures/session/sample");
    m.insert("config.toml", read(sample.join("config.toml")));
    m.insert("status.json", read(sample.join("status.json")));
    m.insert("metrics.jsonl", read(sample.join("metrics.jsonl")));
    m.insert("checkpoint", checkpoint_bytes());
    let dir = tempfile::tempdir().unwrap();
    let v = dir.path().join("v.json");
    vocab("en", 5).save(&v).unwrap();
    m.insert("vocabulary", read(v));
    let mut csr = rosetta::text::CsrMatrix::new(4);
    csr.push_row([(1, 2.0), (3, 1.0)]);
    csr.push_row([]);
    let c = dir.path().join("m.csr");
    rosetta::corpus::prepare::write_csr(&c, &csr).unwrap();
    m.insert("cached matrix", read(c));
    m.insert(
        "word vectors",
        b"4 3\nen0 0.1 -0.2 3e-2 \nEN1 1 2 3 \nzz -1 0 1e-3 \nen4 5 6 7 \n".to_vec(),
    );
    m
}

/// A small XCNN checkpoint (6 terms each side, dim 3).
fn checkpoint_bytes() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.safetensors");
    let t = |r: usize, c: usize| Tensor::ones((r, c), DType::F32, &Device::Cpu).unwrap();
    let b = || Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap();
    let meta = CheckpointMeta {
        kind: "xcnn".into(),
        phase: "cross".into(),
        epoch: 1,
        step: 2,
        params: [("dim".to_string(), "3".to_string())].into(),
        valid_mrr: Some(0.5),
        best_mrr: Some(0.5),
        best_epoch: Some(1),
        bad_epochs: 0,
        extra: vec![],
        rosetta_version: "0".into(),
    };
    Checkpoint::write(
        &p,
        &meta,
        &[
            ("src.w1".into(), t(6, 3)),
            ("src.b1".into(), b()),
            ("tgt.w1".into(), t(6, 3)),
            ("tgt.b1".into(), b()),
        ],
        &[],
    )
    .unwrap();
    std::fs::read(p).unwrap()
}

/// Tokens that mean something to some parser, spliced into inputs.
const TOKENS: &[&str] = &[
    "\t",
    "\n",
    " ",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "=",
    ":",
    ",",
    "<top>",
    "</top>",
    "<num>",
    "<title>",
    "NaN",
    "inf",
    "-1",
    "1e400",
    "18446744073709551616",
    "\u{0}",
    "\u{feff}",
    "Q0",
    "#",
    "[params]",
    "state",
    "\"running\"",
    "pid",
    "dtype",
    "F32",
    "shape",
    "data_offsets",
    "\u{fffd}",
    "é",
];

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, usize),
    Delete(usize, usize),
    Duplicate(usize, usize),
}

fn apply(mut b: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = b.len().max(1);
        match *e {
            Edit::Flip(i, x) => {
                if !b.is_empty() {
                    b[i % n] ^= x.max(1);
                }
            }
            Edit::Truncate(i) => b.truncate(i % (n + 1)),
            Edit::Insert(i, t) => {
                let at = i % (b.len() + 1);
                let tok = TOKENS[t % TOKENS.len()].as_bytes();
                b.splice(at..at, tok.iter().copied());
            }
            Edit::Delete(i, len) => {
                let at = i % n;
                let end = (at + len % 16).min(b.len());
                if at < end {
                    b.drain(at..end);
                }
            }
            Edit::Duplicate(i, len) => {
                let at = i % n;
                let end = (at + len % 64).min(b.len());
                if at < end {
                    let piece: Vec<u8> = b[at..end].to_vec();
                    b.splice(end..end, piece);
                }
            }
        }
    }
    b
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, x)| Edit::Flip(i, x)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), any::<usize>()).prop_map(|(i, t)| Edit::Insert(i, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, l)| Edit::Delete(i, l)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, l)| Edit::Duplicate(i, l)),
    ]
}

/// An input: a mutated seed, or (one case in four) raw bytes.
fn input() -> impl Strategy<Value = (usize, Option<Vec<u8>>, Vec<Edit>)> {
    (
        any::<usize>(),
        prop_oneof![
            3 => Just(None),
            1 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Some),
        ],
        proptest::collection::vec(edit(), 0..6),
    )
}

thread_local! {
    static SEEDS: HashMap<&'static str, Vec<u8>> = seeds();
}

proptest! {
    #![proptest_config(ProptestConfig {
        // 48 in the suite; PROPTEST_CASES=N runs N (a long run)
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(48),
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    /// Every parser, on every generated input: no panic, and an error (or a
    /// reported bad line) names the file it is about.
    #[test]
    fn parsers_never_panic_and_name_the_file((which, raw, edits) in input()) {
        let all = parsers();
        let dir = tempfile::tempdir().unwrap();
        // each case tries every parser, so that all of them see as many inputs
        for (i, (name, file, parse)) in all.iter().enumerate() {
            let base = raw.clone().unwrap_or_else(|| SEEDS.with(|s| s[name].clone()));
            let bytes = apply(base, &edits[..edits.len().min(1 + (which + i) % 6)]);
            let path = dir.path().join(file);
            std::fs::write(&path, &bytes).unwrap();
            let r = catch_unwind(AssertUnwindSafe(|| parse(&path)));
            let r = match r {
                Ok(r) => r,
                Err(p) => {
                    let what = p.downcast_ref::<String>().cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    return Err(TestCaseError::fail(format!(
                        "{name} panicked ({what}) on {:?}", String::from_utf8_lossy(&bytes)
                    )));
                }
            };
            let msgs = match r {
                Ok(m) => m,
                Err(e) => vec![e],
            };
            let here = dir.path().display().to_string();
            for m in msgs {
                prop_assert!(m.contains(&here), "{name}: error names no file: {m}");
            }
        }
    }
}

#[test]
fn malformed_checkpoint_shapes_are_named_not_panics() {
    let vocabs = rosetta::text::Vocabs {
        source: vocab("en", 6),
        target: vocab("es", 6),
    };
    let t = |d: &[usize]| Tensor::ones(d, DType::F32, &Device::Cpu).unwrap();
    let params = rosetta::models::Params::new(BTreeMap::new());
    // (tensors, the name the error must give)
    let cases: Vec<(Vec<(&str, Tensor)>, &str)> = vec![
        (
            vec![
                ("src.w1", t(&[6])),
                ("src.b1", t(&[3])),
                ("tgt.w1", t(&[6, 3])),
                ("tgt.b1", t(&[3])),
            ],
            "src.w1",
        ),
        (
            vec![
                ("src.w1", t(&[6, 3])),
                ("src.b1", t(&[4])),
                ("tgt.w1", t(&[6, 3])),
                ("tgt.b1", t(&[3])),
            ],
            "src.b1",
        ),
        (
            vec![
                ("src.w1", t(&[6, 3])),
                ("src.b1", t(&[3])),
                ("src.w2", t(&[2, 3])),
                ("src.b2", t(&[3])),
                ("tgt.w1", t(&[6, 3])),
                ("tgt.b1", t(&[3])),
            ],
            "src.w2",
        ),
    ];
    for (tensors, name) in cases {
        let map: HashMap<String, Tensor> = tensors
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect();
        let e = rosetta::models::registry::trainer("xcnn")
            .unwrap()
            .load(&vocabs, map, &params, &Device::Cpu)
            .err()
            .expect("must fail")
            .to_string();
        assert!(e.contains(name), "{name}: {e}");
    }
    // BAE with a rank-0 bias: named, no panic
    let e = rosetta::models::registry::trainer("bae")
        .unwrap()
        .load(
            &vocabs,
            [
                ("enc.src.w", t(&[6, 3])),
                ("enc.tgt.w", t(&[6, 3])),
                ("enc.b", Tensor::new(1f32, &Device::Cpu).unwrap()),
                ("dec.src.w", t(&[6, 3])),
                ("dec.src.c", t(&[6])),
                ("dec.tgt.w", t(&[6, 3])),
                ("dec.tgt.c", t(&[6])),
                ("mean.src", t(&[3])),
                ("mean.tgt", t(&[3])),
                ("cfg.binary", t(&[1])),
            ]
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
            &params,
            &Device::Cpu,
        )
        .err()
        .expect("must fail")
        .to_string();
    assert!(e.contains("enc.b"), "{e}");
}

// ------------------------------------------------------------ non-finite scores

#[test]
fn non_finite_scores_are_the_worst_everywhere() {
    // sentence retrieval: NaN embeddings score nothing, never 1.0
    let nan = ndarray::Array2::<f32>::from_elem((5, 3), f32::NAN);
    let s = sentence_retrieval(&nan, &nan, rosetta::space::Similarity::Cosine);
    assert!(s.mrr < 0.25 && s.p1 == 0.0, "{s:?}");
    assert_eq!(aligned_ranks(&nan, &nan), vec![5; 5]);
    // trec metrics: a NaN-scored document ranks last
    let qrels = Qrels::from_pairs([("q", "good")]);
    let mut run = Run::default();
    run.results.insert(
        "q".into(),
        vec![
            ("bad".into(), f64::NAN),
            ("worse".into(), f64::INFINITY),
            ("good".into(), 0.1),
        ],
    );
    let e = rosetta::eval::evaluate(&run, &qrels);
    let mrr = e.mean.get(rosetta::eval::Metric::Mrr);
    assert_eq!(mrr, 1.0, "the finite relevant document ranks first");
    // fusion: a NaN model score is not the best of the fused list
    let fused = rosetta::index::fusion::fuse(
        &[("bad".into(), f64::NAN), ("good".into(), 0.5)],
        &[("good".into(), 3.0), ("bad".into(), 1.0)],
        rosetta::index::fusion::Fusion::Linear { lambda: 0.5 },
    );
    assert_eq!(fused[0].0, "good", "{fused:?}");
    // dense top-k: a query of NaN retrieves nothing rather than everything first
    let docs = ndarray::array![[1.0f32, 0.0], [0.0, 1.0]];
    let q = ndarray::array![[f32::NAN, 0.0], [1.0, 0.0]];
    let hits = rosetta::index::dense::top_k(
        docs.view(),
        q.view(),
        2,
        &rosetta::index::TieOrder::default(),
        rosetta::index::dense::Matmul::default(),
    )
    .unwrap();
    assert!(hits[0].is_empty(), "{:?}", hits[0]);
    assert_eq!(hits[1][0].doc, 0);
}

// ------------------------------------------------------------ real models, real sessions

/// The tiny workspace's prepared training data (cached beside it).
fn tiny_data(ws_dir: &Path) -> (TrainData, String) {
    let ws = Workspace::load(&ws_dir.join("workspace.toml")).unwrap();
    let prepared = Prepared::load_or_build(&ws).unwrap();
    let hash = prepared.hash.clone();
    (TrainData::from_prepared(&prepared, Vec::new()), hash)
}

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

fn run(dir: &Path, data: &TrainData, hash: &str, resume: bool) -> rosetta::train::runner::Outcome {
    let mut s = Session::open(dir).unwrap();
    let trainer = rosetta::models::registry::trainer(&s.config.model).unwrap();
    run_job(
        &mut s,
        trainer.as_ref(),
        data,
        hash,
        resume,
        Arc::new(AtomicBool::new(false)),
        &mut Quiet,
    )
    .unwrap()
}

/// Runs the job of session `dir` from its start, cancelled once `epochs`
/// epoch ends were logged.
fn run_cancelled_after(
    dir: &Path,
    data: &TrainData,
    hash: &str,
    epochs: usize,
) -> rosetta::train::runner::Outcome {
    let mut s = Session::open(dir).unwrap();
    let trainer = rosetta::models::registry::trainer(&s.config.model).unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let mut obs = StopAfter {
        left: epochs,
        cancel: cancel.clone(),
    };
    run_job(
        &mut s,
        trainer.as_ref(),
        data,
        hash,
        false,
        cancel,
        &mut obs,
    )
    .unwrap()
}

/// Small, quick settings of each trainable neural model.
fn quick(model: &str) -> Vec<(&'static str, &'static str)> {
    match model {
        "s2net" => vec![("dim", "8"), ("epochs", "3"), ("batch", "10")],
        "xcnn" => vec![
            ("dim", "8"),
            ("epochs", "2"),
            ("mono_epochs", "2"),
            ("mono_patience", "2"),
            ("batch", "10"),
        ],
        "bae" => vec![("dim", "8"), ("epochs", "3"), ("batch", "10")],
        "dbn-cca" => vec![
            ("layers", "12,6"),
            ("input_terms", "60"),
            ("epochs", "2"),
            ("finetune_epochs", "2"),
            ("batch", "10"),
            ("dim", "4"),
            ("lr_rsm", "0.01"),
        ],
        "adv-bilstm" => vec![
            ("emb", "8"),
            ("hidden", "6"),
            ("nn_hidden", "8"),
            ("dim", "4"),
            ("disc_hidden", "5"),
            ("epochs", "3"),
            ("batch", "8"),
            ("lr", "0.01"),
        ],
        "cl-lsi" | "opca" | "cca" => vec![("dim", "4")],
        _ => unreachable!(),
    }
}

/// Per trainable model: one good epoch, then the learning rate turns absurd
/// (the session's settings edited before a resume, as a diverging run
/// would): the job fails saying so, the best checkpoint is still the good
/// epoch's, bit for bit, every tensor in it is finite, and the status never
/// shows the diverged model's figures.
#[test]
fn divergence_fails_the_job_and_keeps_the_last_finite_best() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    for model in ["s2net", "xcnn", "bae"] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(model);
        let mut kv = quick(model);
        kv.retain(|(k, _)| *k != "epochs");
        kv.push(("epochs", "1"));
        Session::create(&dir, config(ws.path(), &hash, model, &kv)).unwrap();
        let o = run(&dir, &data, &hash, false);
        assert_eq!(o.state, State::Done, "{model}: {o:?}");
        let best_before = bits_of(&dir.join(BEST_CHECKPOINT));
        let mrr_before = o.best_mrr;
        // the same session, resumed for more epochs at lr 1e30
        let mut cfg = SessionConfig::read(&dir).unwrap();
        cfg.given.insert("lr".into(), "1e30".into());
        cfg.given.insert("epochs".into(), "3".into());
        cfg.write(&dir).unwrap();
        let mut st = read_status(&dir).unwrap();
        st.state = State::Cancelled;
        crate::common::write_status(&dir, &st);
        let o = run(&dir, &data, &hash, true);
        assert_eq!(o.state, State::Failed, "{model}: {o:?}");
        let err = o.error.clone().unwrap_or_default();
        assert!(err.contains("diverged"), "{model}: {err}");
        assert_eq!(o.best_mrr, mrr_before, "{model}: best MRR changed");
        assert_eq!(
            bits_of(&dir.join(BEST_CHECKPOINT)),
            best_before,
            "{model}: the best checkpoint was replaced"
        );
        for (k, v) in bits_of(&dir.join(LAST_CHECKPOINT)) {
            assert!(
                v.iter().all(|b| f64::from_bits(*b).is_finite())
                    || k.ends_with("valid_accuracy")
                    || k.ends_with("score"),
                "{model}: {k} not finite in last"
            );
        }
        let st = read_status(&dir).unwrap();
        assert_eq!(st.state, State::Failed);
        assert!(st.best_mrr.is_none_or(|m| m < 1.0), "{model}: {st:?}");
    }
}

/// A fresh session at lr 1e30 ends failed (never done with meaningless
/// cosines), and a search on what is left never reports the diverged model.
#[test]
fn absurd_learning_rate_from_the_start_fails() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    for model in ["s2net", "xcnn", "bae"] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(model);
        let mut kv = quick(model);
        kv.push(("lr", "1e30"));
        Session::create(&dir, config(ws.path(), &hash, model, &kv)).unwrap();
        let o = run(&dir, &data, &hash, false);
        assert_eq!(o.state, State::Failed, "{model}: {o:?}");
        assert!(!dir.join(BEST_CHECKPOINT).exists() || o.best_mrr.is_some_and(|m| m < 1.0));
    }
}

/// Resuming at every epoch end of every phase gives the uninterrupted run's
/// checkpoints bit for bit (XCNN's mono best snapshot and patience, BAE's
/// and XCNN's best-epoch choice included).
#[test]
fn resume_at_every_epoch_end_is_the_same_run() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    for model in ["s2net", "xcnn", "bae", "dbn-cca", "adv-bilstm"] {
        let root = tempfile::tempdir().unwrap();
        let full = root.path().join("full");
        Session::create(&full, config(ws.path(), &hash, model, &quick(model))).unwrap();
        assert_eq!(run(&full, &data, &hash, false).state, State::Done);
        let want_last = bits_of(&full.join(LAST_CHECKPOINT));
        let want_best = bits_of(&full.join(BEST_CHECKPOINT));
        // every checkpoint the run wrote, by (phase, epoch), from its metrics
        let mut tail = MetricsTail::new(full.join(METRICS_FILE));
        let epochs: Vec<(String, usize)> = tail
            .poll()
            .unwrap()
            .records
            .iter()
            .filter_map(|r| match r {
                rosetta::session::MetricRecord::Valid { phase, epoch, .. } => {
                    Some((phase.clone(), *epoch))
                }
                _ => None,
            })
            .collect();
        assert!(epochs.len() >= 2, "{model}: {epochs:?}");
        for stop_after in 1..epochs.len() {
            // a run stopped after `stop_after` epoch ends: the same session
            // replayed up to there by killing nothing, only cutting the plan
            let part = root.path().join(format!("part{stop_after}"));
            Session::create(&part, config(ws.path(), &hash, model, &quick(model))).unwrap();
            let o = run_cancelled_after(&part, &data, &hash, stop_after);
            assert_eq!(o.state, State::Cancelled, "{model} {stop_after}: {o:?}");
            let o = run(&part, &data, &hash, true);
            assert_eq!(o.state, State::Done, "{model} {stop_after}: {o:?}");
            assert_eq!(
                bits_of(&part.join(LAST_CHECKPOINT)),
                want_last,
                "{model}: last differs after a resume at epoch end {stop_after} ({:?})",
                epochs[stop_after - 1]
            );
            assert_eq!(
                bits_of(&part.join(BEST_CHECKPOINT)),
                want_best,
                "{model}: best differs after a resume at epoch end {stop_after}"
            );
        }
    }
}

/// Cancels the job once `left` epoch-end lines were seen.
struct StopAfter {
    left: usize,
    cancel: Arc<AtomicBool>,
}

impl rosetta::train::runner::Observer for StopAfter {
    fn line(&mut self, line: &str) {
        if line.contains(" epoch ") && line.contains("(best ") {
            self.left = self.left.saturating_sub(1);
            if self.left == 0 {
                self.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
}

/// A SIGKILL before the first step: the resume runs with the user's
/// settings (the config is complete before anything else is written), and
/// ends as the uninterrupted run did.
#[test]
fn kill_before_the_first_step_then_resume_keeps_the_settings() {
    let ws = common::tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let args = |s: &str| {
        vec![
            "train".to_string(),
            "--workspace".into(),
            wsf.display().to_string(),
            "--model".into(),
            "s2net".into(),
            "--dim".into(),
            "12".into(),
            "--epochs".into(),
            "2".into(),
            "--lr".into(),
            "0.005".into(),
            "--set".into(),
            "batch=10".into(),
            "--device".into(),
            "cpu".into(),
            "--session".into(),
            s.into(),
        ]
    };
    let run_cli = |a: &[String]| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        common::rosetta_in(root.path(), &a)
    };
    let full = run_cli(&args("full"));
    assert!(full.status.success(), "{full:?}");
    // killed at once: at most the config and a queued status exist
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .current_dir(root.path())
        .args(args("killed"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let killed = root.path().join("killed");
    let t0 = std::time::Instant::now();
    while !killed.join("status.json").exists() && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let cfg = SessionConfig::read(&killed).unwrap();
    assert_eq!(cfg.params.get("dim").map(String::as_str), Some("12"));
    assert_eq!(cfg.params.get("epochs").map(String::as_str), Some("2"));
    assert_eq!(cfg.params.get("lr").map(String::as_str), Some("0.005"));
    let resumed = run_cli(&[
        "train".into(),
        "--resume".into(),
        killed.display().to_string(),
    ]);
    assert!(resumed.status.success(), "{resumed:?}");
    let a = SessionConfig::read(&root.path().join("full")).unwrap();
    let b = SessionConfig::read(&killed).unwrap();
    assert_eq!(a.params, b.params);
    assert_eq!(
        bits_of(&root.path().join("full").join(LAST_CHECKPOINT)),
        bits_of(&killed.join(LAST_CHECKPOINT))
    );
}

/// The highest step recorded so far in a session's metrics (in `phase`
/// only, when given).
fn steps_recorded_in(dir: &Path, phase: Option<&str>) -> usize {
    let mut tail = MetricsTail::new(dir.join(METRICS_FILE));
    tail.poll()
        .map(|b| {
            b.records
                .iter()
                .filter_map(|r| match r {
                    rosetta::session::MetricRecord::Step { step, phase: p, .. }
                        if phase.is_none_or(|want| want == p) =>
                    {
                        Some(*step)
                    }
                    _ => None,
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Every file under `dir`, recursively.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The step of a session's first validation (its first checkpoint).
fn first_valid_step(dir: &Path) -> usize {
    let mut tail = MetricsTail::new(dir.join(METRICS_FILE));
    tail.poll()
        .unwrap()
        .records
        .iter()
        .find_map(|r| match r {
            rosetta::session::MetricRecord::Valid { step, .. } => Some(*step),
            _ => None,
        })
        .unwrap_or(0)
}

fn steps_recorded(dir: &Path) -> usize {
    steps_recorded_in(dir, None)
}

/// Per trainable model: a CLI job SIGKILLed at seeded random steps (before
/// the first step too, and inside XCNN's mono phase; a closed-form fit as
/// soon as it has started), then resumed
/// with `rosetta train --resume`, ends with the uninterrupted run's last
/// and best checkpoints bit for bit. A long run: `for s in $(seq 100); do
/// KILL_SEED=$s cargo test --test suite faults::sigkill_at_random || break; done`.
#[test]
fn sigkill_at_random_steps_then_resume_is_the_same_run() {
    use rand::{Rng, SeedableRng};
    let ws = common::tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    // KILL_SEED=N draws other kill points (a long run loops over seeds)
    let seed = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(14);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for model in ["s2net", "xcnn", "bae", "cl-lsi", "opca", "cca"] {
        let closed_form = ["cl-lsi", "opca", "cca"].contains(&model);
        let args = |session: &Path| {
            let mut a = vec![
                "train".to_string(),
                "--workspace".into(),
                wsf.display().to_string(),
                "--model".into(),
                model.into(),
                "--device".into(),
                "cpu".into(),
                "--seed".into(),
                "3".into(),
                "--session".into(),
                session.display().to_string(),
            ];
            for (k, v) in quick(model)
                .into_iter()
                .chain([("log_every", "1"), ("step_delay_ms", "15")])
                .filter(|(k, _)| !closed_form || *k == "dim")
            {
                a.extend(["--set".into(), format!("{k}={v}")]);
            }
            a
        };
        let full = root.path().join(format!("{model}-full"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
            .args(args(&full))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{model}: {out:?}");
        let total = steps_recorded(&full);
        assert!(closed_form || total >= 4, "{model}: {total} steps");
        // before the first step; inside the first epoch (no checkpoint yet);
        // past the first checkpoint inside the first phase (XCNN's mono
        // phase); past the first checkpoint anywhere (the resume restores a
        // checkpoint and its optimiser state)
        let first_epoch = first_valid_step(&full);
        let first_phase = match steps_recorded_in(&full, Some("mono")) {
            0 => total,
            n => n,
        };
        let targets = if closed_form {
            // one fit, no steps: killed as soon as the job has started
            vec![0]
        } else {
            assert!(
                first_epoch < first_phase,
                "{model}: one epoch per phase ({first_epoch}, {first_phase}, {total})"
            );
            vec![
                0,
                rng.random_range(1..=first_epoch),
                rng.random_range(first_epoch + 1..=first_phase),
                rng.random_range(first_epoch + 1..total),
            ]
        };
        // killed after writing its last epoch's checkpoints, before recording
        // `done` (a copy of the finished session whose status still says
        // running): the resume trains nothing and rewrites nothing
        if !closed_form {
            let late = root.path().join(format!("{model}-killed-late"));
            std::fs::create_dir_all(late.join("checkpoints")).unwrap();
            for e in walk(&full) {
                let rel = e.strip_prefix(&full).unwrap();
                if !rel.starts_with(".lock") {
                    std::fs::copy(&e, late.join(rel)).unwrap();
                }
            }
            let mut st = read_status(&late).unwrap();
            st.state = State::Running;
            st.pid = 0;
            st.pid_start = None;
            crate::common::write_status(&late, &st);
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
                .args(["train", "--resume", &late.display().to_string()])
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "{model} killed late: {out:?}");
            for ck in [LAST_CHECKPOINT, BEST_CHECKPOINT] {
                assert_eq!(
                    bits_of(&full.join(ck)),
                    bits_of(&late.join(ck)),
                    "{model} killed after its last checkpoint: {ck} differs"
                );
            }
        }
        for (i, target) in targets.into_iter().enumerate() {
            let killed = root.path().join(format!("{model}-killed-{i}"));
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
                .args(args(&killed))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let t0 = std::time::Instant::now();
            loop {
                let started = killed.join("status.json").exists();
                if (target == 0 && started) || (target > 0 && steps_recorded(&killed) >= target) {
                    break;
                }
                assert!(
                    t0.elapsed().as_secs() < 60,
                    "{model}: step {target} never came"
                );
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            child.kill().unwrap();
            child.wait().unwrap();
            // a tiny closed-form fit may have finished before the kill landed
            if !read_status(&killed).is_ok_and(|s| s.state == State::Done) {
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
                    .args(["train", "--resume", &killed.display().to_string()])
                    .stdin(std::process::Stdio::null())
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{model} killed at {target}: {out:?}");
            }
            for ck in [LAST_CHECKPOINT, BEST_CHECKPOINT] {
                assert_eq!(
                    bits_of(&full.join(ck)),
                    bits_of(&killed.join(ck)),
                    "{model} killed at step {target}: {ck} differs"
                );
            }
        }
    }
}

// ------------------------------------------------------------ hostile session folders

/// A symbolic link planted as `log.txt` or `metrics.jsonl` is never written
/// through: the job refuses the file, and the link's target is unchanged.
#[test]
fn planted_symlinks_are_not_written_through() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    for name in [LOG_FILE, METRICS_FILE] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s");
        Session::create(&dir, config(ws.path(), &hash, "s2net", &quick("s2net"))).unwrap();
        let victim = root.path().join("victim.txt");
        std::fs::write(&victim, "precious\n").unwrap();
        // opened before the link is planted: the job itself refuses it
        let mut s = Session::open(&dir).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
        let trainer = rosetta::models::registry::trainer("s2net").unwrap();
        let r = run_job(
            &mut s,
            trainer.as_ref(),
            &data,
            &hash,
            false,
            Arc::new(AtomicBool::new(false)),
            &mut Quiet,
        );
        let e = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("symbolic link"), "{name}: {e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    }
    // an atomic write replaces a planted link, never writes through it
    let root = tempfile::tempdir().unwrap();
    let victim = root.path().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = root.path().join("status.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    rosetta::util::write_atomic(&link, b"new").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
}

/// A symbolic link planted as `checkpoints/` (issue 39): the job refuses
/// the session and writes nothing where the link points; opening the
/// session and reading a checkpoint through the link are refused too, as
/// are `status.json`, `config.toml` and `meta.json` planted as links.
#[test]
fn a_linked_checkpoints_folder_or_session_file_is_refused() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    Session::create(&dir, config(ws.path(), &hash, "s2net", &quick("s2net"))).unwrap();
    let mut s = Session::open(&dir).unwrap();
    let elsewhere = root.path().join("elsewhere");
    std::fs::rename(dir.join("checkpoints"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("checkpoints")).unwrap();
    let trainer = rosetta::models::registry::trainer("s2net").unwrap();
    let r = run_job(
        &mut s,
        trainer.as_ref(),
        &data,
        &hash,
        false,
        Arc::new(AtomicBool::new(false)),
        &mut Quiet,
    );
    let e = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        e.contains("symbolic link") && e.contains("checkpoints"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    let e = Session::open(&dir).unwrap_err().to_string();
    assert!(e.contains("symbolic link"), "{e}");
    std::fs::write(elsewhere.join("best.safetensors"), checkpoint_bytes()).unwrap();
    let e = Checkpoint::read(&dir.join(BEST_CHECKPOINT), &Device::Cpu)
        .unwrap_err()
        .to_string();
    assert!(e.contains("symbolic link"), "{e}");
    // the session's small files are never read through a link either
    for name in ["status.json", "config.toml", "meta.json"] {
        let victim = root.path().join(format!("victim.{name}"));
        let at = dir.join(name);
        if at.exists() {
            std::fs::rename(&at, &victim).unwrap();
        } else {
            std::fs::write(&victim, "{}").unwrap();
        }
        std::os::unix::fs::symlink(&victim, &at).unwrap();
        let e = match name {
            "status.json" => read_status(&dir).map(|_| ()),
            "config.toml" => SessionConfig::read(&dir).map(|_| ()),
            _ => rosetta::session::runs::RunMeta::read(&dir).map(|_| ()),
        }
        .unwrap_err()
        .to_string();
        assert!(e.contains("symbolic link") && e.contains(name), "{e}");
        std::fs::remove_file(&at).unwrap();
        std::fs::rename(&victim, &at).unwrap();
    }
}

/// A session B whose `status.json` is job A's and whose `.lock` is a hard
/// link to A's lock file (issue 39): B's job is never "proven" to be A's
/// process, so `rosetta cancel B` signals nothing; A's own job still is.
#[test]
fn a_hard_linked_lock_never_proves_another_sessions_job() {
    let root = tempfile::tempdir().unwrap();
    let ws = common::tiny_workspace();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    Session::create(&a, config(ws.path(), "h", "s2net", &[])).unwrap();
    Session::create(&b, config(ws.path(), "h", "s2net", &[])).unwrap();
    // this test process plays job A
    let me = std::process::id();
    let lock = rosetta::train::runner::SessionLock::acquire(&a).unwrap();
    let mut st = read_status(&a).unwrap();
    st.state = State::Running;
    st.pid = me;
    st.pid_start = rosetta::session::process_start_time(me);
    crate::common::write_status(&a, &st);
    assert_eq!(rosetta::session::job_process(&a).unwrap(), me);
    std::fs::copy(a.join("status.json"), b.join("status.json")).unwrap();
    let lock_a = a.join(".lock");
    if !lock_a.exists() {
        std::fs::write(&lock_a, "").unwrap();
    }
    let _ = std::fs::remove_file(b.join(".lock"));
    std::fs::hard_link(&lock_a, b.join(".lock")).unwrap();
    let e = rosetta::session::job_process(&b).unwrap_err().to_string();
    assert!(e.contains("no process signalled"), "{e}");
    drop(lock);
}

/// A `status.json` that is a FIFO, a `config.toml` linked to `/dev/zero`,
/// a `metrics.jsonl` FIFO and an oversized status (issue 39): listing the
/// sessions ends at once, lists every session and marks the bad ones.
#[test]
fn unreadable_session_files_are_marked_never_read_forever() {
    let root = tempfile::tempdir().unwrap();
    let ws = common::tiny_workspace();
    let mk = |name: &str| {
        let d = root.path().join(name);
        Session::create(&d, config(ws.path(), "h", "s2net", &[])).unwrap();
        d
    };
    let fifo = |p: &Path| {
        std::fs::remove_file(p).ok();
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    };
    fifo(&mk("a-fifo-status").join("status.json"));
    let z = mk("b-zero-config").join("config.toml");
    std::fs::remove_file(&z).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &z).unwrap();
    fifo(&mk("c-fifo-metrics").join("metrics.jsonl"));
    let big = mk("d-big-status").join("status.json");
    std::fs::write(
        &big,
        vec![b' '; (rosetta::util::SMALL_FILE_LIMIT + 1) as usize],
    )
    .unwrap();
    mk("e-good");
    let root_path = root.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runs = rosetta::session::runs::RunIndex::default().scan(&root_path);
        let _ = tx.send(runs.map(|v| {
            v.into_iter()
                .map(|r| (r.id(), r.entry.problem.clone()))
                .collect::<Vec<_>>()
        }));
    });
    let runs = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("listing the sessions never ended")
        .unwrap();
    let names: Vec<&str> = runs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "a-fifo-status",
            "b-zero-config",
            "c-fifo-metrics",
            "d-big-status",
            "e-good"
        ]
    );
    let problem = |i: usize| runs[i].1.clone().unwrap_or_default();
    assert!(problem(0).contains("FIFO"), "{}", problem(0));
    assert!(problem(1).contains("symbolic link"), "{}", problem(1));
    assert!(problem(3).contains("larger than"), "{}", problem(3));
    assert_eq!(runs[4].1, None);
    let e = MetricsTail::new(root.path().join("c-fifo-metrics/metrics.jsonl"))
        .poll()
        .unwrap_err()
        .to_string();
    assert!(e.contains("FIFO"), "{e}");
}

/// A checkpoint's bytes depend on its contents only (issue 39): the same
/// checkpoint written again is byte for byte the same file, and reads back.
#[test]
fn identical_checkpoints_are_identical_bytes() {
    let first = checkpoint_bytes();
    for _ in 0..4 {
        assert!(checkpoint_bytes() == first, "checkpoint bytes differ");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.safetensors");
    std::fs::write(&p, &first).unwrap();
    let c = Checkpoint::read(&p, &Device::Cpu).unwrap();
    assert_eq!(c.meta.kind, "xcnn");
    assert_eq!(c.tensors.len(), 4);
}

/// A session's vocabulary whose language is not a code (issue 39: it
/// would name export files outside `--out`) is refused where it is read.
#[test]
fn a_vocabulary_language_that_is_a_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("vocab.target.json");
    let mut v = vocab("es", 3);
    v.lang = "x/../../../tmp/PWNED".into();
    v.save(&p).unwrap();
    let e = rosetta::text::Vocabulary::load(&p).unwrap_err().to_string();
    assert!(
        e.contains("vocab.target.json") && e.contains("language code"),
        "{e}"
    );
}

/// A status naming a live process that is not the session's job (this test
/// process, a `sleep`): `job_process` refuses it, with or without its start
/// time; a real job holding the lock is found.
#[test]
fn foreign_pid_in_a_session_is_never_proven_a_job() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    let ws = common::tiny_workspace();
    Session::create(&dir, config(ws.path(), "h", "s2net", &[])).unwrap();
    let mut victim = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = victim.id();
    let mut st = read_status(&dir).unwrap();
    st.state = State::Running;
    st.pid = pid;
    st.pid_start = None;
    crate::common::write_status(&dir, &st);
    let e = rosetta::session::job_process(&dir).unwrap_err().to_string();
    assert!(e.contains("start time"), "{e}");
    st.pid_start = rosetta::session::process_start_time(pid);
    crate::common::write_status(&dir, &st);
    let e = rosetta::session::job_process(&dir).unwrap_err().to_string();
    assert!(
        e.contains("lock") && e.contains("no process signalled"),
        "{e}"
    );
    // the lock held by another process than the one named: still refused
    let me = std::process::id();
    let lock = rosetta::train::runner::SessionLock::acquire(&dir).unwrap();
    let e = rosetta::session::job_process(&dir).unwrap_err().to_string();
    assert!(e.contains("does not hold") || e.contains("lock"), "{e}");
    // named and holding the lock: proven
    st.pid = me;
    st.pid_start = rosetta::session::process_start_time(me);
    crate::common::write_status(&dir, &st);
    assert_eq!(rosetta::session::job_process(&dir).unwrap(), me);
    drop(lock);
    assert!(rosetta::session::job_process(&dir).is_err());
    assert!(rosetta::session::pid_alive(pid, None), "the victim lives");
    victim.kill().unwrap();
    victim.wait().unwrap();
}

/// Temporary files of dead processes are swept when a job starts or a
/// session is made again; a folder holding only those does not block the name.
#[test]
fn leftover_temp_files_are_swept() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    // a pid that cannot be alive
    std::fs::write(dir.join(".config.toml.tmp.4194304999.abc"), "x").unwrap();
    let ws = common::tiny_workspace();
    Session::create(&dir, config(ws.path(), "h", "s2net", &[])).unwrap();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(!names.iter().any(|n| n.contains(".tmp.")), "{names:?}");
}

/// Bad requests are refused before a session folder exists.
#[test]
fn invalid_requests_make_no_session_folder() {
    let root = tempfile::tempdir().unwrap();
    let ws = common::tiny_workspace();
    for (kv, seed, what) in [
        (vec![("lr", "NaN")], 1u64, "lr"),
        (vec![("nope", "1")], 1, "nope"),
        (vec![("negatives", "random:100000")], 1, "random:100000"),
        (vec![("weight_decay", "-1")], 1, "weight_decay"),
        (vec![], u64::MAX, "2^63"),
    ] {
        let model = if kv.iter().any(|(k, _)| *k == "negatives") {
            "xcnn"
        } else {
            "bae"
        };
        let mut cfg = config(ws.path(), "h", model, &kv);
        cfg.seed = seed;
        let dir = root.path().join("s");
        let e = Session::create(&dir, cfg).unwrap_err().to_string();
        assert!(e.contains(what), "{what}: {e}");
        assert!(!dir.exists(), "{what}: a folder was made");
    }
    // a good request records every setting, defaults included, at once
    let dir = root.path().join("ok");
    let s = Session::create(&dir, config(ws.path(), "h", "bae", &[("dim", "9")])).unwrap();
    let cfg = SessionConfig::read(&s.dir).unwrap();
    assert_eq!(cfg.params["dim"], "9");
    assert_eq!(cfg.params["lr"], "0.01");
    assert_eq!(cfg.params["patience"], "5");
    assert_eq!(cfg.given.len(), 1);
}

/// A byte flipped in a cached matrix, or a NaN written into it: the cache
/// is rebuilt, never used.
#[test]
fn corrupt_cache_is_rebuilt() {
    let ws = common::tiny_workspace();
    let w = Workspace::load(&ws.path().join("workspace.toml")).unwrap();
    let p = Prepared::load_or_build(&w).unwrap();
    let dir = p.cache_dir.clone().expect("cached");
    let m = dir.join("train.src.csr");
    let mut b = std::fs::read(&m).unwrap();
    let n = b.len();
    b[n - 2..].copy_from_slice(&[0xc0, 0x7f]); // the last value becomes NaN
    std::fs::write(&m, &b).unwrap();
    let e = Prepared::load(&dir).unwrap_err().to_string();
    assert!(e.contains("train.src.csr"), "{e}");
    let again = Prepared::load_or_build(&w).unwrap();
    assert!(again.train.src.values.iter().all(|v| v.is_finite()));
    assert_eq!(again.train.src, p.train.src);
}

/// Duplicate and contradictory qrels lines are reported with file and line;
/// strict reading makes them errors.
#[test]
fn duplicate_qrels_lines_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("q.qrels");
    std::fs::write(&q, "q1 0 d1 1\nq1 0 d2 0\nq1 0 d1 1\nq1 0 d2 2\n").unwrap();
    let (qrels, w) = Qrels::read_checked(&q, false).unwrap();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("q.qrels") && w[0].contains(":3") && w[0].contains("same grade"));
    assert!(
        w[1].contains(":4") && w[1].contains("contradicting"),
        "{w:?}"
    );
    assert_eq!(qrels.judgements["q1"]["d2"], 2);
    let e = Qrels::read_checked(&q, true).unwrap_err().to_string();
    assert!(e.contains("q.qrels") && e.contains('3'), "{e}");
}

// ------------------------------------------------------------ issue 39: only what is on disk

/// Issue 39 item 6: a best checkpoint that cannot be written (a full disk;
/// here a folder in its place) fails the job, and neither the status nor
/// the outcome names a best epoch or MRR that no best file holds.
#[test]
fn a_failed_checkpoint_write_is_never_named_best() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    Session::create(&dir, config(ws.path(), &hash, "s2net", &quick("s2net"))).unwrap();
    let blocker = dir.join(BEST_CHECKPOINT);
    std::fs::create_dir_all(blocker.join("in-the-way")).unwrap();
    let o = run(&dir, &data, &hash, false);
    assert_eq!(o.state, State::Failed, "{o:?}");
    let err = o.error.clone().unwrap_or_default();
    assert!(err.contains("best.safetensors"), "{err}");
    assert!(!err.contains("is kept"), "{err}");
    assert_eq!((o.best_mrr, o.best_epoch), (None, None), "{o:?}");
    let st = read_status(&dir).unwrap();
    assert_eq!(st.state, State::Failed);
    assert_eq!((st.best_mrr, st.best_epoch), (None, None), "{st:?}");
    // nothing written is read as a checkpoint either
    assert!(!dir.join(LAST_CHECKPOINT).exists());
}

fn events(dir: &Path, name: &str) -> usize {
    let mut tail = MetricsTail::new(dir.join(METRICS_FILE));
    tail.poll()
        .unwrap()
        .records
        .iter()
        .filter(
            |r| matches!(r, rosetta::session::MetricRecord::Event { event, .. } if event == name),
        )
        .count()
}

/// Issue 39 item 7: a finished session whose `status.json` is lost is not
/// trained again from epoch 1 over its checkpoints: the job continues from
/// them (nothing left to train), the checkpoints stay as they were.
#[test]
fn a_lost_status_resumes_from_the_checkpoints() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    Session::create(&dir, config(ws.path(), &hash, "s2net", &quick("s2net"))).unwrap();
    let o = run(&dir, &data, &hash, false);
    assert_eq!(o.state, State::Done);
    let (last, best) = (
        bits_of(&dir.join(LAST_CHECKPOINT)),
        bits_of(&dir.join(BEST_CHECKPOINT)),
    );
    std::fs::remove_file(dir.join("status.json")).unwrap();
    // what `jobs::run` does with a session whose status reads `queued`
    let o2 = run(&dir, &data, &hash, false);
    assert_eq!(o2.state, State::Done, "{o2:?}");
    assert_eq!(o2.epoch, o.epoch);
    assert_eq!(o2.best_mrr, o.best_mrr);
    assert_eq!(events(&dir, "start"), 1, "trained again from the start");
    assert_eq!(events(&dir, "resume"), 1);
    assert_eq!(bits_of(&dir.join(LAST_CHECKPOINT)), last);
    assert_eq!(bits_of(&dir.join(BEST_CHECKPOINT)), best);
    let st = read_status(&dir).unwrap();
    assert_eq!((st.state, st.epoch), (State::Done, o.epoch));
}

/// Issue 39 item 7: a job killed after the checkpoint of the epoch whose
/// patience ran out (before it recorded `done`) ends there on resume, as
/// the uninterrupted run did, and trains no further epoch.
#[test]
fn an_early_stopped_checkpoint_is_not_trained_further() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    // a learning rate too small to move the MRR: epoch 2 is no better
    let kv = [
        ("dim", "8"),
        ("epochs", "5"),
        ("batch", "10"),
        ("lr", "1e-12"),
        ("patience", "1"),
    ];
    Session::create(&dir, config(ws.path(), &hash, "s2net", &kv)).unwrap();
    let o = run(&dir, &data, &hash, false);
    assert_eq!(
        (o.state, o.early_stopped, o.epoch),
        (State::Done, true, 2),
        "{o:?}"
    );
    // the kill: the status still says running, by a process that is gone
    let mut st = read_status(&dir).unwrap();
    st.state = State::Running;
    st.pid = u32::MAX - 7;
    st.pid_start = None;
    crate::common::write_status(&dir, &st);
    let o2 = run(&dir, &data, &hash, true);
    assert_eq!(
        (o2.state, o2.early_stopped, o2.epoch),
        (State::Done, true, 2),
        "{o2:?}"
    );
    let ck = Checkpoint::read(&dir.join(LAST_CHECKPOINT), &Device::Cpu).unwrap();
    assert_eq!(ck.meta.epoch, 2, "trained past the early stop");
}

/// Issue 39 item 8: Adam moments of the wrong shape in a checkpoint (with a
/// valid checksum) are refused on resume, never a silently restarted
/// optimiser.
#[test]
fn wrong_optimiser_moments_are_refused_on_resume() {
    let ws = common::tiny_workspace();
    let (data, hash) = tiny_data(ws.path());
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("s");
    Session::create(&dir, config(ws.path(), &hash, "s2net", &quick("s2net"))).unwrap();
    let o = run_cancelled_after(&dir, &data, &hash, 1);
    assert_eq!(o.state, State::Cancelled);
    let path = dir.join(LAST_CHECKPOINT);
    let ck = Checkpoint::read(&path, &Device::Cpu).unwrap();
    let model: Vec<(String, Tensor)> = ck.model_tensors().into_iter().collect();
    let mut extra: Vec<(String, Tensor)> = Vec::new();
    for name in &ck.meta.extra {
        let t = ck.tensors[name].clone();
        let t = if name == "adam.m.source" {
            Tensor::zeros((3, 2), t.dtype(), &Device::Cpu).unwrap()
        } else {
            t
        };
        extra.push((name.clone(), t));
    }
    assert!(
        extra.iter().any(|(n, _)| n == "adam.m.source"),
        "{:?}",
        ck.meta.extra
    );
    Checkpoint::write(&path, &ck.meta, &model, &extra).unwrap();
    let o = run(&dir, &data, &hash, true);
    assert_eq!(o.state, State::Failed, "{o:?}");
    let err = o.error.unwrap_or_default();
    assert!(
        err.contains("adam.m.source") && err.contains("shape"),
        "{err}"
    );
}

// ------------------------------------------------------------ issue 54: session files are data

/// `rosetta ARGS` in `cwd`, which must end within `secs` seconds (else it
/// is killed and the test fails: a read that waits on a FIFO, or never
/// ends on a device, hangs).
fn rosetta_within(cwd: &Path, args: &[&str], secs: u64) -> std::process::Output {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "rosetta {args:?} still running after {secs} s (a hang)\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn both(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Replaces `p` with a FIFO (nobody writes it: a read of it waits forever).
fn plant_fifo(p: &Path) {
    let _ = std::fs::remove_file(p);
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a valid C string.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "{}",
        p.display()
    );
}

/// An `.npy` whose header declares `shape` of float32, followed by `data`
/// bytes (whatever the shape says).
fn forged_npy(shape: (u64, u64), data: usize) -> Vec<u8> {
    let mut h = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        shape.0, shape.1
    );
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((h.len() as u16).to_le_bytes());
    b.extend(h.as_bytes());
    b.extend(std::iter::repeat_n(0u8, data));
    b
}

/// Issue 54, findings 3, 4 and 6 on an encoder session: cached tables whose
/// `.npy` header declares (2⁴⁰, dim) rows, or that are cut short, are
/// rebuilt (never a petabyte allocation); the caches' descriptions, the
/// HNSW graph's and the ad-hoc scores as FIFOs end every command; a cache
/// hard-linked outside the session is replaced, the file outside kept.
#[test]
fn forged_linked_and_fifo_caches_neither_crash_hang_nor_write_outside() {
    let ws = common::tiny_workspace();
    let cwd = ws.path();
    let enc = cwd.join("enc");
    common::encoder::tiny_encoder_folder(cwd, &enc, 5);
    let wsf = cwd.join("workspace.toml");
    let weights = format!("weights={}", enc.display());
    common::train(
        cwd,
        &wsf,
        "encoder",
        "s",
        &["--set", &weights, "--epochs", "0"],
    );
    common::train(cwd, &wsf, "bm25", "b", &[]);
    let s = cwd.join("s");
    let search = [
        "search",
        "--session",
        "s",
        "--query",
        "dog water",
        "--k",
        "3",
        "--json",
    ];
    let neighbours = ["neighbours", "--session", "s", "--term", "dog", "--json"];
    let hits = |o: &std::process::Output| {
        assert!(o.status.success(), "{}", both(o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["docno"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let near = |o: &std::process::Output| {
        assert!(o.status.success(), "{}", both(o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["cross"].to_string()
    };
    let want_hits = hits(&rosetta_within(cwd, &search, 120));
    let want_near = near(&rosetta_within(cwd, &neighbours, 120));
    let tables = [
        "doc-embeddings.target.npy",
        "term-vectors.source.npy",
        "term-vectors.target.npy",
    ];
    for t in tables {
        assert!(s.join(t).is_file(), "{t} not cached");
    }
    // finding 3: a header declaring 2^40 rows, then one declaring the right
    // shape over a file cut short
    let dim = {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(s.join("doc-embeddings.target.json")).unwrap())
                .unwrap();
        m["dim"].as_u64().unwrap()
    };
    let rows = |t: &str| {
        let m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(s.join(t.replace(".npy", ".json"))).unwrap())
                .unwrap();
        m["rows"].as_u64().unwrap()
    };
    for forged in [
        |_: u64, d: u64| forged_npy((1 << 40, d), 64),
        |r: u64, d: u64| forged_npy((r, d), 8),
    ] {
        for t in tables {
            std::fs::write(s.join(t), forged(rows(t), dim)).unwrap();
        }
        let o = rosetta_within(cwd, &search, 120);
        assert_eq!(hits(&o), want_hits);
        let o = rosetta_within(cwd, &neighbours, 120);
        assert_eq!(near(&o), want_near);
    }
    // finding 4: the caches' descriptions as FIFOs
    for f in [
        "doc-embeddings.target.json",
        "term-vectors.source.json",
        "term-vectors.target.json",
    ] {
        plant_fifo(&s.join(f));
    }
    assert_eq!(hits(&rosetta_within(cwd, &search, 120)), want_hits);
    assert_eq!(near(&rosetta_within(cwd, &neighbours, 120)), want_near);
    // the HNSW graph's description, once the graph is saved
    let mut approx = search.to_vec();
    approx.push("--approx");
    assert!(rosetta_within(cwd, &approx, 120).status.success());
    assert!(s.join("hnsw.graph.json").is_file());
    plant_fifo(&s.join("hnsw.graph.json"));
    let o = rosetta_within(cwd, &search, 120);
    assert!(
        o.status.success() || both(&o).contains("hnsw.graph.json"),
        "{}",
        both(&o)
    );
    std::fs::remove_file(s.join("hnsw.graph.json")).unwrap();
    // the ad-hoc scores `compare` caches
    let compare = ["compare", "--sessions", "s", "b", "--json"];
    let first = rosetta_within(cwd, &compare, 300);
    assert!(first.status.success(), "{}", both(&first));
    assert!(s.join("adhoc-scores.json").is_file());
    plant_fifo(&s.join("adhoc-scores.json"));
    let o = rosetta_within(cwd, &compare, 300);
    assert!(o.status.success(), "{}", both(&o));

    // finding 6: a cache hard-linked outside the session is replaced when
    // rewritten, never written in place
    let victim = cwd.join("victim.npy");
    let cache = s.join("doc-embeddings.target.npy");
    std::fs::hard_link(&cache, &victim).unwrap();
    std::fs::write(&victim, b"someone else's bytes").unwrap();
    assert_eq!(std::fs::read(&cache).unwrap(), b"someone else's bytes");
    assert_eq!(hits(&rosetta_within(cwd, &search, 120)), want_hits);
    assert_eq!(std::fs::read(&victim).unwrap(), b"someone else's bytes");
    assert_ne!(std::fs::read(&cache).unwrap(), b"someone else's bytes");
}

/// Issue 54, finding 4: `slurm.json` and `sweep.json` as FIFOs, and
/// `slurm.json` linked to /dev/zero, end `jobs`, `jobs show` and `cancel`
/// at once: listed or refused, the refusal naming the file.
#[test]
fn fifo_and_device_session_records_end_every_jobs_command() {
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    let ws = common::tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    common::train(cwd, &wsf, "bm25", "sessions/b", &[]);
    let b = cwd.join("sessions/b");
    for (file, kind) in [
        ("slurm.json", "fifo"),
        ("sweep.json", "fifo"),
        ("slurm.json", "zero"),
    ] {
        let p = b.join(file);
        if kind == "fifo" {
            plant_fifo(&p);
        } else {
            std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        }
        for args in [
            vec!["jobs"],
            vec!["jobs", "--json"],
            vec!["jobs", "show", "sessions/b"],
            vec!["cancel", "sessions/b", "--timeout", "1"],
        ] {
            let o = rosetta_within(cwd, &args, 30);
            if !o.status.success() {
                assert!(
                    both(&o).contains(file),
                    "{args:?} {file} {kind}: {}",
                    both(&o)
                );
            }
        }
        std::fs::remove_file(&p).unwrap();
    }
}

/// Issue 54, finding 6: appending to a session's `metrics.jsonl` or
/// `log.txt` that has another hard link (a session copied with `cp -al`)
/// writes into the session's own copy; the other name keeps its bytes.
#[test]
fn appends_never_reach_another_hard_link() {
    let dir = tempfile::tempdir().unwrap();
    let orig = dir.path().join("orig");
    let copy = dir.path().join("copy");
    std::fs::create_dir_all(&orig).unwrap();
    std::fs::create_dir_all(&copy).unwrap();
    for name in [METRICS_FILE, LOG_FILE] {
        std::fs::write(orig.join(name), "{\"old\":1}\n").unwrap();
        std::fs::hard_link(orig.join(name), copy.join(name)).unwrap();
    }
    let mut w = rosetta::session::metrics::MetricsWriter::open(&copy.join(METRICS_FILE)).unwrap();
    w.append(&rosetta::session::MetricRecord::event(
        "resume",
        "resumed",
        Some(1),
        Some(1),
    ))
    .unwrap();
    drop(w);
    {
        use std::io::Write;
        let mut f = rosetta::util::open_append_nofollow(&copy.join(LOG_FILE)).unwrap();
        writeln!(f, "resumed").unwrap();
    }
    for name in [METRICS_FILE, LOG_FILE] {
        assert_eq!(
            std::fs::read_to_string(orig.join(name)).unwrap(),
            "{\"old\":1}\n",
            "{name} of the original changed"
        );
        let mine = std::fs::read_to_string(copy.join(name)).unwrap();
        assert!(
            mine.starts_with("{\"old\":1}\n") && mine.len() > 10,
            "{mine}"
        );
    }
}

/// Issue 54, finding 3: an encoder folder's `config.json` that is not a
/// JSON object makes `encoder trim` refuse it by name (never a panic, nor
/// a trimmed folder missing its fields), and one declaring sizes its
/// weights do not hold (10¹⁵ or 10¹⁸ layers, another vocabulary size) is
/// refused by `train` before a session is made (never an allocation of
/// petabytes).
#[test]
fn encoder_configs_that_are_not_their_weights_are_refused() {
    let ws = common::tiny_workspace();
    let cwd = ws.path();
    let enc = cwd.join("enc");
    common::encoder::tiny_encoder_folder(cwd, &enc, 5);
    let cfg = enc.join("config.json");
    let good = std::fs::read_to_string(&cfg).unwrap();
    let out = cwd.join("trimmed");
    let trim = || {
        rosetta_within(
            cwd,
            &[
                "encoder",
                "trim",
                "--weights",
                enc.to_str().unwrap(),
                "--workspace",
                "workspace.toml",
                "--out",
                out.to_str().unwrap(),
            ],
            300,
        )
    };
    for bad in ["[1,2]", "\"x\"", "42", "true", "null"] {
        std::fs::write(&cfg, bad).unwrap();
        let o = trim();
        assert!(!o.status.success(), "{bad}: {}", both(&o));
        assert_ne!(o.status.code(), Some(101), "{bad}: a panic: {}", both(&o));
        assert!(
            both(&o).contains("config.json") && both(&o).contains("not a JSON object"),
            "{bad}: {}",
            both(&o)
        );
        assert!(
            !out.join("config.json").exists(),
            "{bad}: a config was written"
        );
    }
    let weights = format!("weights={}", enc.display());
    let edited = |key: &str, v: u64| {
        let mut c: serde_json::Value = serde_json::from_str(&good).unwrap();
        c[key] = serde_json::json!(v);
        std::fs::write(&cfg, c.to_string()).unwrap();
    };
    let vocab = serde_json::from_str::<serde_json::Value>(&good).unwrap()["vocab_size"]
        .as_u64()
        .unwrap();
    for (key, v) in [
        ("num_hidden_layers", 1_000_000_000_000_000u64),
        ("num_hidden_layers", 1_000_000_000_000_000_000),
        ("vocab_size", vocab + 1),
    ] {
        edited(key, v);
        let o = rosetta_within(
            cwd,
            &[
                "train",
                "--workspace",
                "workspace.toml",
                "--model",
                "encoder",
                "--device",
                "cpu",
                "--session",
                "sx",
                "--set",
                &weights,
                "--epochs",
                "0",
            ],
            300,
        );
        assert!(!o.status.success(), "{key}={v}: {}", both(&o));
        assert_eq!(o.status.code(), Some(1), "{key}={v}: {}", both(&o));
        let t = both(&o);
        assert!(
            t.contains("config.json") && t.contains(key) && t.contains("model.safetensors"),
            "{key}={v}: {t}"
        );
        assert!(!cwd.join("sx").exists(), "{key}={v}: a session was made");
    }
    // the folder's own config trims
    std::fs::write(&cfg, &good).unwrap();
    let o = trim();
    assert!(o.status.success(), "{}", both(&o));
    assert!(out.join("config.json").is_file());
}

/// Issue 54, finding 8: a workspace's name, its documents' and queries'
/// texts holding terminal sequences (OSC 52 writing the clipboard, CSI 2J
/// clearing the screen) are shown without them by `compare` (its header
/// and `--per-query`), `search` (default, `--full`, `--show`); the text
/// around them still shows.
#[test]
fn workspace_text_never_reaches_the_terminal_as_escapes() {
    let ws = common::tiny_workspace();
    let cwd = ws.path();
    let wsf = cwd.join("workspace.toml");
    let osc = "\u{1b}]52;c;ZXZpbA==\u{7}";
    let cls = "\u{1b}[2J";
    let toml = std::fs::read_to_string(&wsf).unwrap().replace(
        "name = \"tiny-en-es\"",
        "name = \"tiny\\u001b]52;c;ZXZpbA==\\u0007\\u001b[2Jnamed\"",
    );
    std::fs::write(&wsf, toml).unwrap();
    let edit = |file: &str, from: &str, to: &str| {
        let p = cwd.join(file);
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(t.contains(from), "{file}");
        std::fs::write(&p, t.replacen(from, to, 1)).unwrap();
    };
    edit(
        "docs.es.tsv",
        "El perro y el gato",
        &format!("El perro{osc}{cls}marcado y el gato"),
    );
    edit(
        "queries.en.tsv",
        "dog drinks water",
        &format!("dog{cls}{osc}flagged drinks water"),
    );
    common::train(cwd, &wsf, "bm25", "a", &[]);
    common::train(cwd, &wsf, "bm25-dict", "b", &[]);
    let runs: Vec<(Vec<&str>, &str)> = vec![
        (vec!["compare", "--sessions", "a", "b"], "tinynamed"),
        (
            vec!["compare", "--sessions", "a", "b", "--per-query", "5"],
            "dogflagged",
        ),
        (
            vec!["search", "--session", "b", "--query", "dog cat"],
            "perromarcado",
        ),
        (
            vec!["search", "--session", "b", "--query", "dog cat", "--full"],
            "perromarcado",
        ),
        (
            vec!["search", "--session", "b", "--show", "d01"],
            "perromarcado",
        ),
    ];
    for (args, shown) in runs {
        let o = rosetta_within(cwd, &args, 300);
        assert!(o.status.success(), "{args:?}: {}", both(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}'),
            "{args:?}: {out:?}"
        );
        assert!(out.contains(shown), "{args:?}: {shown} not shown: {out}");
    }
}

/// Issue 54, finding 7: jobs started at once into one empty folder (eight
/// threads making the session, fifty times): exactly one makes it, its
/// config is the one recorded, the others are refused.
#[test]
fn jobs_started_at_once_into_one_empty_folder_make_one_session() {
    let root = tempfile::tempdir().unwrap();
    for round in 0..50 {
        let dir = root.path().join(format!("s{round}"));
        std::fs::create_dir(&dir).unwrap();
        let barrier = Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (1..=8u64)
            .map(|seed| {
                let (dir, barrier) = (dir.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut cfg = config(Path::new("/w"), "h", "test", &[]);
                    cfg.seed = seed;
                    barrier.wait();
                    Session::create(&dir, cfg).map(|s| s.config.seed)
                })
            })
            .collect();
        let made: Vec<u64> = handles
            .into_iter()
            .filter_map(|h| h.join().unwrap().ok())
            .collect();
        assert_eq!(
            made.len(),
            1,
            "round {round}: sessions made with seeds {made:?}"
        );
        let on_disk = SessionConfig::read(&dir).unwrap();
        assert_eq!(on_disk.seed, made[0], "round {round}");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
    }
}

/// Issue 54, finding 5 (the caches): a session's cached table whose rows
/// were reordered, or that was copied from another session's folder,
/// without its meta naming it, is encoded again (the same ranking and
/// neighbours as before); an `adhoc-scores.json` claiming figures no
/// evaluation gives (an MRR of 2.3) is scored again.
#[test]
fn caches_edited_behind_their_meta_are_not_used() {
    let ws = common::tiny_workspace();
    let cwd = ws.path();
    let wsf = cwd.join("workspace.toml");
    for (name, seed) in [("s", 5), ("t", 6)] {
        let enc = cwd.join(format!("enc-{name}"));
        common::encoder::tiny_encoder_folder(cwd, &enc, seed);
        let weights = format!("weights={}", enc.display());
        common::train(
            cwd,
            &wsf,
            "encoder",
            name,
            &["--set", &weights, "--epochs", "0"],
        );
    }
    common::train(cwd, &wsf, "bm25", "b", &[]);
    let (s, t) = (cwd.join("s"), cwd.join("t"));
    let run = |args: &[&str]| {
        let o = rosetta_within(cwd, args, 300);
        assert!(o.status.success(), "{args:?}: {}", both(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let search = |who: &str| {
        let v = run(&[
            "search",
            "--session",
            who,
            "--query",
            "dog water",
            "--k",
            "8",
            "--json",
        ]);
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["docno"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let neighbours = |who: &str| {
        run(&["neighbours", "--session", who, "--term", "dog", "--json"])["cross"].to_string()
    };
    let (hits, near) = (search("s"), neighbours("s"));
    assert_ne!(near, neighbours("t"), "the two encoders agree: no test");
    // the collection's embeddings, rows reversed
    let docs = s.join("doc-embeddings.target.npy");
    let a: ndarray::Array2<f32> = ndarray_npy::read_npy(&docs).unwrap();
    let reversed = a.slice(ndarray::s![..;-1, ..]).to_owned();
    assert_ne!(a, reversed);
    ndarray_npy::write_npy(&docs, &reversed).unwrap();
    assert_eq!(search("s"), hits);
    // the other session's term vectors, copied over this one's
    for side in ["source", "target"] {
        let f = format!("term-vectors.{side}.npy");
        std::fs::copy(t.join(&f), s.join(&f)).unwrap();
    }
    assert_eq!(neighbours("s"), near);
    // ad-hoc scores edited to an MRR of 2.3
    let compare = ["compare", "--sessions", "s", "b", "--json"];
    let first = run(&compare).to_string();
    let cache = s.join("adhoc-scores.json");
    let mut c: serde_json::Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    for q in c["scores"]["per_query"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        q["MRR"] = serde_json::json!(2.3);
    }
    std::fs::write(&cache, c.to_string()).unwrap();
    let again = run(&compare).to_string();
    assert_eq!(again, first);
}

/// Issue 54, finding 5 (the checkpoints): `best` and `last` copied from a
/// session of another `dim` into this one are refused by `eval`, naming
/// the checkpoint and the setting, instead of reporting the other
/// session's figures as this one's.
#[test]
fn checkpoints_of_another_session_are_not_evaluated_as_this_ones() {
    let ws = common::tiny_workspace();
    let cwd = ws.path();
    let wsf = cwd.join("workspace.toml");
    for (name, dim) in [("d4", "4"), ("d8", "8")] {
        common::train(
            cwd,
            &wsf,
            "s2net",
            name,
            &[
                "--set",
                &format!("dim={dim}"),
                "--set",
                "epochs=1",
                "--set",
                "batch=10",
            ],
        );
    }
    let eval = |who: &str| {
        rosetta_within(
            cwd,
            &["eval", "--session", who, "--task", "sentence", "--json"],
            300,
        )
    };
    assert!(eval("d8").status.success());
    for f in [BEST_CHECKPOINT, LAST_CHECKPOINT] {
        if cwd.join("d4").join(f).exists() {
            std::fs::copy(cwd.join("d4").join(f), cwd.join("d8").join(f)).unwrap();
        }
    }
    let o = eval("d8");
    assert!(!o.status.success(), "{}", both(&o));
    let t = both(&o);
    assert!(
        t.contains("checkpoints/") && t.contains("dim=4") && t.contains("dim=8"),
        "{t}"
    );
}

/// Issue 54, finding 5 (pairing): sessions on two workspaces of one name,
/// with the same queries and judgements but the documents' texts moved
/// between ids, are not paired in `compare`: their collections differ.
#[test]
fn compare_never_pairs_workspaces_whose_documents_differ() {
    let (one, two) = (common::tiny_workspace(), common::tiny_workspace());
    let docs = two.path().join("docs.es.tsv");
    let text = std::fs::read_to_string(&docs).unwrap();
    let rows: Vec<(&str, &str)> = text.lines().map(|l| l.split_once('\t').unwrap()).collect();
    let moved: String = rows
        .iter()
        .enumerate()
        .map(|(i, (id, _))| format!("{id}\t{}\n", rows[(i + 1) % rows.len()].1))
        .collect();
    std::fs::write(&docs, moved).unwrap();
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    common::train(cwd, &one.path().join("workspace.toml"), "bm25", "a", &[]);
    common::train(
        cwd,
        &one.path().join("workspace.toml"),
        "bm25-dict",
        "same",
        &[],
    );
    common::train(
        cwd,
        &two.path().join("workspace.toml"),
        "bm25-dict",
        "moved",
        &[],
    );
    let o = rosetta_within(
        cwd,
        &[
            "compare",
            "--sessions",
            "a",
            "same",
            "moved",
            "--metrics",
            "MRR",
            "--json",
        ],
        300,
    );
    assert!(o.status.success(), "{}", both(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sys = j["systems"].as_array().unwrap();
    assert!(sys[1]["tests"]["MRR"]["p_value"].is_number(), "{j}");
    assert_eq!(sys[2]["tests"], serde_json::json!({}), "paired: {j}");
    let note = sys[2]["note"].as_str().unwrap_or("");
    assert!(
        note.contains("not tested") && note.contains("collection"),
        "{note}"
    );
}
