//! `rosetta bench train`: training throughput on a workspace, alone and
//! against a torch_ref-like peer (a shell stand-in here: no Python in tests).

use crate::common;

use common::{rosetta_in, tiny_workspace};

/// `rosetta bench train ARGS` in `dir`, ARGS split at spaces.
fn bench_train(dir: &std::path::Path, args: &str) -> std::process::Output {
    let mut all = vec!["bench", "train"];
    all.extend(args.split_whitespace());
    rosetta_in(dir, &all)
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn bench_train_times_the_training_loop() {
    let ws = tiny_workspace();
    let out = bench_train(
        ws.path(),
        "--workspace workspace.toml --model xcnn --set dim=8 --set mono_epochs=1 --set epochs=2 \
         --threads 1",
    );
    let j = json(&out);
    assert_eq!(j["model"], "xcnn");
    assert_eq!(j["settings"]["epochs"], "2");
    assert_eq!(j["settings"]["positives"], "tfidf");
    let pairs = j["train_pairs"].as_u64().unwrap();
    let epochs = j["epochs"].as_array().unwrap();
    // one mono epoch and two cross epochs, each reported
    assert_eq!(epochs.len(), 3, "{epochs:?}");
    assert_eq!(epochs[2]["phase"], "cross");
    // the cross epochs saw every training pair
    let cross = epochs[2]["examples"].as_u64().unwrap() - epochs[0]["examples"].as_u64().unwrap();
    assert_eq!(cross, 2 * pairs);
    assert!(j["pairs_per_s"].as_f64().unwrap() > 0.0);
    assert!(j["test_mrr"].as_f64().unwrap() > 0.0);
    // ties for the answer never rank it lower
    assert!(j["test_mrr_ties_for"].as_f64().unwrap() >= j["test_mrr"].as_f64().unwrap());
    assert!(j.get("torch_ref").is_none());
    // the heap's peak was counted, and the resident size holds it
    let heap = j["peak_heap_mb"].as_f64().unwrap();
    assert!(heap > 0.0, "{j}");
    if let Some(rss) = j["peak_rss_mb"].as_f64() {
        assert!(heap <= rss, "heap {heap} MB above the resident {rss} MB");
    }
}

#[test]
fn bench_train_hands_the_same_settings_to_the_peer() {
    let ws = tiny_workspace();
    let script = std::env::current_dir()
        .unwrap()
        .join("tests/fixtures/bench/fake_torch_ref.sh");
    let out = bench_train(
        ws.path(),
        &format!(
            "--workspace workspace.toml --model xcnn --set dim=8 --set mono_epochs=1 \
             --set epochs=1 --set lr=0.02 --threads 1 --torch-ref {} --python sh",
            script.display()
        ),
    );
    let j = json(&out);
    let args = j["torch_ref"]["args"].as_str().unwrap();
    for want in [
        "--model xcnn",
        "--dim 8",
        "--batch 100",
        "--epochs 1",
        "--mono-epochs 1",
        "--lr 0.02",
        "--threads 1",
        "--vocab 1000",
    ] {
        assert!(args.contains(want), "{want} missing from {args}");
    }
    assert!(
        args.contains("train.en") && args.contains("test.es"),
        "{args}"
    );
    let ratio = j["pairs_per_s_over_torch_ref"].as_f64().unwrap();
    let ours = j["pairs_per_s"].as_f64().unwrap();
    assert!((ratio - ours / 1000.0).abs() < 1e-3, "{ratio} vs {ours}");
}

/// `--model encoder --encoder-ref`: the peer fine-tunes the same folder on
/// the same first pairs with the same batch, epochs, lr, temperature, token
/// cut and seed; `--amp bf16` exactly under `precision=bf16`,
/// `--group-by-length` exactly under `group_by_length=true`.
#[test]
fn bench_train_hands_the_encoder_ref_the_same_fine_tuning() {
    let ws = tiny_workspace();
    let folder = ws.path().join("tiny-encoder");
    common::encoder::tiny_encoder_folder(ws.path(), &folder, 1);
    let script = std::env::current_dir()
        .unwrap()
        .join("tests/fixtures/bench/fake_encoder_ref.sh");
    let run = |extra: &str| {
        let j = json(&bench_train(
            ws.path(),
            &format!(
                "--workspace workspace.toml --model encoder --set weights={} --set epochs=1 \
                 --set batch=4 --set max_pairs=8 --set lr=0.001 --set temperature=0.1 \
                 --set train_max_len=16 --threads 1 --seed 3 --encoder-ref {} --python sh {extra}",
                folder.display(),
                script.display()
            ),
        ));
        assert_eq!(j["examples"], 8, "{j}");
        let ratio = j["pairs_per_s_over_encoder_ref"].as_f64().unwrap();
        let ours = j["pairs_per_s"].as_f64().unwrap();
        assert!((ratio - ours / 500.0).abs() < 1e-3, "{ratio} vs {ours}");
        j["encoder_ref"]["args"].as_str().unwrap().to_string()
    };
    let args = run("");
    for want in [
        &format!("--model {}", folder.display()) as &str,
        "--device cpu",
        "--threads 1",
        "--max-len 16 finetune",
        "--epochs 1",
        "--batch 4",
        "--lr 0.001",
        "--temperature 0.1",
        "--max-pairs 8",
        "--seed 3",
    ] {
        assert!(args.contains(want), "{want} missing from {args}");
    }
    assert!(
        args.contains("train.en") && args.contains("test.es"),
        "{args}"
    );
    assert!(
        !args.contains("--amp") && !args.contains("--group-by-length"),
        "{args}"
    );
    let args = run("--set precision=bf16 --set group_by_length=true");
    assert!(
        args.contains("--amp bf16") && args.contains("--group-by-length"),
        "{args}"
    );
}

#[test]
fn bench_train_refuses_what_it_cannot_do() {
    let ws = tiny_workspace();
    let run = |args: &str| {
        let out = bench_train(ws.path(), args);
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = run("--workspace workspace.toml --model bae --torch-ref x.py");
    assert!(e.contains("--torch-ref x.py: no such file"), "{e}");
    let e = run("--workspace workspace.toml --model s2net --device tpu");
    assert!(e.contains("tpu"), "{e}");
    let e = run("--workspace workspace.toml --model xcnn --set positives=random");
    assert!(e.contains("positives"), "{e}");
    // torch_ref reads file pairs only: refused before any training
    let e = run("--workspace split.toml --model s2net --torch-ref x.py");
    assert!(e.contains("--torch-ref needs"), "{e}");
    let e = run("--workspace missing.toml --model s2net");
    assert!(e.contains("missing.toml"), "{e}");
    // each peer times its own models
    let e = run("--workspace workspace.toml --model s2net --encoder-ref x.py");
    assert!(
        e.contains("--encoder-ref times an encoder's fine-tuning"),
        "{e}"
    );
    let e = run("--workspace workspace.toml --model encoder --torch-ref x.py");
    assert!(e.contains("--torch-ref has no encoder"), "{e}");
    let e = run("--workspace workspace.toml --model encoder --encoder-ref x.py");
    assert!(e.contains("--encoder-ref x.py: no such file"), "{e}");
}

/// The bench reads the workspace as `rosetta train` does: a model's own
/// `[text]` defaults (XCNN's `oov_ngrams = 0`) apply where the workspace is
/// silent, so it measures the vocabulary training builds.
#[test]
fn bench_train_reads_the_models_own_text_defaults() {
    let ws = tiny_workspace();
    // words seen once are unknown: texts made only of them get n-gram units
    let path = ws.path().join("workspace.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("min_df = 1", "min_df = 2")).unwrap();
    let vocab = |dir: &std::path::Path, model: &str| {
        let mono = if model == "xcnn" {
            "--set mono_epochs=1"
        } else {
            ""
        };
        let j = json(&bench_train(
            dir,
            &format!(
                "--workspace workspace.toml --model {model} --set dim=8 --set epochs=1 {mono} \
                 --threads 1"
            ),
        ));
        j["vocab"].clone()
    };
    // s2net has no text defaults of its own: the n-gram units are there
    let with_units = vocab(ws.path(), "s2net");
    let xcnn = vocab(ws.path(), "xcnn");
    assert_ne!(xcnn, with_units, "xcnn benched with s2net's n-gram units");
    // the same workspace with XCNN's default written into it
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}oov_ngrams = 0\n")).unwrap();
    assert_eq!(vocab(ws.path(), "s2net"), xcnn);
}
