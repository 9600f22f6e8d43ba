//! The `precision` setting (issue 41): `f32` is the arithmetic of a job
//! without it, bit for bit; `bf16` changes every candle model's training
//! (its weights differ from f32's) while its final validation MRR stays
//! within a stated tolerance of f32's; `tf32` on the CPU, and the key on a
//! model that does not compute on candle, are refused before a session
//! folder is written.

use candle_core::Device;
use rosetta::models::{
    self, precision, Flow, Hooks, Model, Params, StepReport, TextRole, TextRows, TrainData,
    TrainSequences,
};
use rosetta::text::{CsrMatrix, Sequences, Side};

use crate::common;

/// What a training left: its losses, its final model's validation MRR and
/// the bits of its parameters.
struct Run {
    losses: Vec<f64>,
    mrr: f64,
    bits: Vec<(String, Vec<u64>)>,
}

struct Losses(Vec<f64>);

impl Hooks for Losses {
    fn step(&mut self, r: &StepReport) -> rosetta::Result<Flow> {
        self.0.push(r.loss);
        Ok(Flow::Continue)
    }
    fn epoch_end(
        &mut self,
        _phase: &str,
        _epoch: usize,
        _model: &dyn Model,
        _extra: Vec<(String, candle_core::Tensor)>,
    ) -> rosetta::Result<Flow> {
        Ok(Flow::Continue)
    }
    fn log(&mut self, _msg: &str) {}
}

/// Sentence-retrieval MRR of `model` on `data`'s validation pairs, each
/// side as the model reads it (counts, sequences or raw text).
fn valid_mrr(model: &dyn Model, data: &TrainData) -> f64 {
    let enc = |side: Side, counts: &CsrMatrix| {
        let (seqs, raw) = match side {
            Side::Source => (
                data.seqs.as_ref().map(|s| &s.valid_src),
                data.texts.as_ref().map(|t| t.valid_src.as_slice()),
            ),
            Side::Target => (
                data.seqs.as_ref().map(|s| &s.valid_tgt),
                data.texts.as_ref().map(|t| t.valid_tgt.as_slice()),
            ),
        };
        models::encode_texts(model, side, TextRole::Query, TextRows { counts, seqs, raw }).unwrap()
    };
    let s = enc(Side::Source, &data.valid_src);
    let t = enc(Side::Target, &data.valid_tgt);
    rosetta::eval::sentence::sentence_retrieval(&s, &t, model.similarity()).mrr
}

fn train(model: &str, data: &TrainData, kv: &[(&str, &str)]) -> Run {
    let params = Params::new(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let mut hooks = Losses(Vec::new());
    let m = models::registry::trainer(model)
        .unwrap()
        .train(data, &params, &Device::Cpu, 7, None, &mut hooks)
        .unwrap_or_else(|e| panic!("{model} {kv:?}: {e}"));
    let bits = common::model_bits(m.as_ref());
    Run {
        losses: hooks.0,
        mrr: valid_mrr(m.as_ref(), data),
        bits,
    }
}

/// Synthetic parallel data (200 training, 100 validation pairs over 80
/// terms a side), with the texts as term sequences too (the BiLSTM's input).
fn data() -> TrainData {
    let mut d = common::synthetic::train_data(200, 80, 80, 3);
    let seqs = |m: &CsrMatrix| {
        let mut s = Sequences::new(m.n_cols);
        for i in 0..m.n_rows() {
            s.push_row(m.row(i).0);
        }
        s
    };
    d.seqs = Some(TrainSequences {
        train_src: seqs(&d.train_src),
        train_tgt: seqs(&d.train_tgt),
        valid_src: seqs(&d.valid_src),
        valid_tgt: seqs(&d.valid_tgt),
        mono: seqs(&d.mono),
    });
    d
}

/// Trains `model` with `kv` at f32 and at bf16 on the CPU: the bf16 run
/// computes its products in bfloat16 (`bf16_products` rises during it and
/// not during the f32 run: a model whose products bypass `kit::precision`
/// fails here), its parameters and losses differ from f32's, and its final
/// validation MRR lies within `tol` of f32's, which itself must show
/// learning (`> floor`). Called from one test only, so that no other
/// training of this process computes in bf16 meanwhile.
fn bf16_agrees(model: &str, data: &TrainData, kv: &[(&str, &str)], floor: f64, tol: f64) {
    let c0 = precision::bf16_products();
    let f = train(model, data, kv);
    let c1 = precision::bf16_products();
    let mut kv16 = kv.to_vec();
    kv16.push(("precision", "bf16"));
    let b = train(model, data, &kv16);
    let c2 = precision::bf16_products();
    assert_eq!(c0, c1, "{model}: the f32 run computed in bf16");
    assert!(c2 > c1, "{model}: the bf16 run computed no product in bf16");
    eprintln!(
        "{model}: valid MRR f32 {:.4} bf16 {:.4} ({} bf16 products; last loss {:?} / {:?})",
        f.mrr,
        b.mrr,
        c2 - c1,
        f.losses.last(),
        b.losses.last()
    );
    assert!(f.mrr > floor, "{model}: f32 learnt nothing (MRR {})", f.mrr);
    assert!(
        b.losses.iter().all(|l| l.is_finite()) && b.mrr.is_finite(),
        "{model}"
    );
    assert_ne!(f.bits, b.bits, "{model}: bf16 trained bit for bit as f32");
    assert_ne!(f.losses, b.losses, "{model}: bf16 losses are f32's");
    assert!(
        (f.mrr - b.mrr).abs() <= tol,
        "{model}: bf16 valid MRR {} vs f32 {} (tolerance {tol})",
        b.mrr,
        f.mrr
    );
}

/// `precision=f32` is the arithmetic of a job without the setting, bit for bit.
#[test]
fn f32_is_bit_identical_to_no_setting() {
    let d = data();
    let kv = [("dim", "16"), ("epochs", "2"), ("batch", "20")];
    let plain = train("s2net", &d, &kv);
    let mut with = kv.to_vec();
    with.push(("precision", "f32"));
    let f32_ = train("s2net", &d, &with);
    assert_eq!(plain.bits, f32_.bits);
    assert_eq!(plain.losses, f32_.losses);
}

fn s2net_bf16_agrees_with_f32() {
    let kv = [
        ("dim", "16"),
        ("epochs", "3"),
        ("batch", "20"),
        ("lr", "0.01"),
    ];
    bf16_agrees("s2net", &data(), &kv, 0.3, 0.03);
}

fn xcnn_bf16_agrees_with_f32() {
    let kv = [
        ("dim", "16"),
        ("layers", "2"),
        ("mono_epochs", "0"),
        ("epochs", "3"),
        ("batch", "20"),
        ("negatives", "in-batch"),
    ];
    bf16_agrees("xcnn", &data(), &kv, 0.1, 0.03);
}

fn bae_bf16_agrees_with_f32() {
    let kv = [("dim", "16"), ("epochs", "3"), ("batch", "20")];
    bf16_agrees("bae", &data(), &kv, 0.3, 0.03);
}

fn dbn_cca_bf16_agrees_with_f32() {
    let kv = [
        ("dim", "8"),
        ("layers", "24,12"),
        ("input_terms", "80"),
        ("epochs", "2"),
        ("finetune_epochs", "2"),
        ("batch", "20"),
    ];
    bf16_agrees("dbn-cca", &data(), &kv, 0.1, 0.03);
}

fn adv_bilstm_bf16_agrees_with_f32() {
    let kv = [
        ("dim", "16"),
        ("emb", "16"),
        ("hidden", "16"),
        ("nn_hidden", "16"),
        ("disc_hidden", "8"),
        ("epochs", "6"),
        ("batch", "20"),
        ("lr", "0.01"),
        ("share_target", "true"),
        ("adversarial", "false"),
        ("gamma_tra", "0"),
        ("gamma_matc", "0"),
        ("gamma_matm", "0"),
        ("gamma_inbatch", "1"),
        ("reg", "0"),
    ];
    bf16_agrees("adv-bilstm", &data(), &kv, 0.1, 0.03);
}

/// Every candle model trains at bf16 on the CPU close to f32 (one test:
/// see [`bf16_agrees`]). Tolerances on the final validation MRR: 0.03 over
/// the synthetic data's 100 validation pairs, 0.1 over the tiny
/// workspace's 6 (the encoder).
#[test]
fn bf16_trains_every_candle_model_close_to_f32() {
    s2net_bf16_agrees_with_f32();
    xcnn_bf16_agrees_with_f32();
    bae_bf16_agrees_with_f32();
    dbn_cca_bf16_agrees_with_f32();
    adv_bilstm_bf16_agrees_with_f32();
    encoder_bf16_agrees_with_f32();
}

/// The encoder on the tiny workspace (6 validation pairs: a coarse MRR,
/// hence the wider tolerance) with a tiny pretrained encoder.
fn encoder_bf16_agrees_with_f32() {
    let ws = common::tiny_workspace();
    let folder = ws.path().join("tiny-encoder");
    common::encoder::tiny_encoder_folder(ws.path(), &folder, 1);
    let (_, d, _) = rosetta::jobs::load_workspace(&ws.path().join("workspace.toml"), None).unwrap();
    let w = folder.to_string_lossy().to_string();
    // zero-shot trains nothing: bf16 there would be a setting that does nothing
    let zero = Params::new(
        [("weights", w.as_str()), ("precision", "bf16")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    let e = models::registry::trainer("encoder")
        .unwrap()
        .check(&zero)
        .unwrap_err()
        .to_string();
    assert!(e.contains("epochs=0 trains nothing"), "{e}");
    let kv = [
        ("weights", w.as_str()),
        ("epochs", "2"),
        ("batch", "8"),
        ("train_max_len", "32"),
        ("lr", "0.001"),
    ];
    bf16_agrees("encoder", &d, &kv, 0.0, 0.1);
}

/// `rosetta train` with `args`; it must fail before `sessions/` exists,
/// its message containing every one of `want`.
fn refused(args: &[&str], want: &[&str]) {
    let ws = common::tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("sessions/p");
    let file = ws.path().join("workspace.toml");
    let mut all = vec![
        "train",
        "--workspace",
        file.to_str().unwrap(),
        "--session",
        dir.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = common::rosetta_in(root.path(), &all);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?}: {e}");
    for w in want {
        assert!(e.contains(w), "{args:?}: no {w:?} in {e}");
    }
    assert!(
        !root.path().join("sessions").exists(),
        "{args:?}: a session was written"
    );
}

/// `tf32` on the CPU (`--device cpu`, and `auto` in a build without
/// CUDA), `precision` on a model that does not compute on candle, and
/// `bf16` where it would change nothing are refused before a session
/// folder is written.
#[test]
fn tf32_on_the_cpu_and_precision_off_candle_are_refused_before_writing() {
    refused(
        &[
            "--model",
            "s2net",
            "--device",
            "cpu",
            "--set",
            "precision=tf32",
        ],
        &["precision=tf32 needs a CUDA GPU", "--device cpu"],
    );
    if !cfg!(feature = "cuda") {
        refused(
            &[
                "--model",
                "bae",
                "--device",
                "auto",
                "--set",
                "precision=tf32",
            ],
            &["precision=tf32", "--device auto", "no CUDA"],
        );
    }
    for m in ["cca", "hdlr", "jplsa", "bm25"] {
        refused(
            &["--model", m, "--device", "cpu", "--set", "precision=bf16"],
            &["does not take precision", "read by s2net, xcnn, bae"],
        );
    }
    refused(
        &[
            "--model",
            "s2net",
            "--device",
            "cpu",
            "--set",
            "precision=fp16",
        ],
        &["precision", "fp16"],
    );
    refused(
        &[
            "--model",
            "xcnn",
            "--device",
            "cpu",
            "--set",
            "precision=bf16",
        ],
        &["would change nothing", "layers=1"],
    );
}

/// The setting is a row of exactly the models that compute on candle (the
/// registry's `gpu` rows), declared once.
#[test]
fn precision_is_a_row_of_exactly_the_candle_models() {
    for m in models::MODELS {
        assert_eq!(
            m.setting("precision").is_some(),
            m.gpu,
            "{}: precision row vs gpu",
            m.name
        );
        if let Some(s) = m.setting("precision") {
            assert_eq!(s.default, Some("f32"), "{}", m.name);
        }
    }
}
