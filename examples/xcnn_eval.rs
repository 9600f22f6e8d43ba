//! Hand-run harness (not a test): trains XCNN or BAE on a parallel corpus
//! directory (`train|val|test.{SRC,TGT}`, e.g. `enhi-nmt-sample-18k`) with the
//! engine's text pipeline and reports test sentence-retrieval MRR over all test
//! pairs and training throughput, as one JSON line at the end.
//!
//! ```text
//! cargo run --example xcnn_eval -- --data /work/shared/data/enhi-nmt-sample-18k \
//!     --model xcnn --set mono_epochs=3 --set epochs=10 --set lr=0.01
//! ```
//!
//! Pseudo-relevant positives for XCNN's mono phase: each training target text's
//! best log-tf·idf cosine match other than itself
//! (`models::xcnn::tfidf_positives`, the index miner with TF-IDF scoring).
//!
//! Throughput (`pairs_per_s`) counts training examples (mono triples and
//! cross pairs) over the time spent in the training loops, as
//! `torch_ref.py` does: the time from the end of one epoch's hooks to the
//! last step of the next epoch, so the trainer's own per-epoch validation is
//! left out while batch building, forward, backward and updates count.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Device, Tensor};
use clap::Parser;
use rosetta::eval::sentence::sentence_retrieval;
use rosetta::models::{Flow, Hooks, StepReport, TrainData, Trainer};
use rosetta::models::{Model, Params};
use rosetta::text::io::read_lines;
use rosetta::text::{Analyzer, CsrMatrix, TextConfig, Vocabulary};
use rosetta::text::{Side, Vocabs};

#[derive(Parser)]
#[command(about = "Train XCNN/BAE on a parallel corpus and report test MRR and pairs/s")]
struct Args {
    /// Corpus directory with train/val/test.{src,tgt}.
    #[arg(long)]
    data: PathBuf,
    /// Model: xcnn or bae.
    #[arg(long, default_value = "xcnn")]
    model: String,
    /// Source language code (file suffix).
    #[arg(long, default_value = "en")]
    src: String,
    /// Target language code (file suffix).
    #[arg(long, default_value = "hi")]
    tgt: String,
    /// Model settings key=value (repeatable).
    #[arg(long = "set")]
    set: Vec<String>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Epochs without a better validation MRR before stopping (0 = never).
    #[arg(long, default_value_t = 5)]
    patience: usize,
    /// Terms seen in fewer training texts than this are left out of the
    /// vocabulary (the engine's default is 2; torch_ref.py keeps every term).
    #[arg(long, default_value_t = 2)]
    min_df: usize,
    /// Keep stop words (the engine's default drops them; torch_ref.py keeps them).
    #[arg(long)]
    keep_stopwords: bool,
    /// Do not stem.
    #[arg(long)]
    no_stem: bool,
    /// Use CUDA device 0.
    #[arg(long)]
    cuda: bool,
    /// External target-language texts (one per line, repeatable) for XCNN's
    /// mono phase instead of the training pairs' target side, as the paper's
    /// Hindi news titles.
    #[arg(long)]
    mono: Vec<PathBuf>,
    /// Use only the first N training pairs (0 = all).
    #[arg(long, default_value_t = 0)]
    train_limit: usize,
    /// Name of the test split's files (`NAME.{src,tgt}`).
    #[arg(long, default_value = "test")]
    test_split: String,
    /// Pre-initialise XCNN's target network from monolingual LSI of the mono
    /// texts (the paper: "any monolingual latent semantic model") instead of
    /// the pseudo-relevance phase: term row i = c·idf_i·v_i, v the top right
    /// singular vectors of the log-tf·idf mono matrix, c giving RMS 0.1.
    /// The checkpoint is written to this path and passed as `init`.
    #[arg(long)]
    lsi_init: Option<PathBuf>,
    /// Feed the model log-tf·idf weights instead of raw counts (experiment).
    #[arg(long)]
    tfidf: bool,
}

fn analyze(path: &Path, a: &Analyzer) -> anyhow::Result<Vec<Vec<String>>> {
    Ok(read_lines(path)?.iter().map(|l| a.analyze(l)).collect())
}

struct Harness {
    examples: usize,
    train_s: f64,
    mark: Instant,
    best: f64,
    since_best: usize,
    patience: usize,
    valid: (CsrMatrix, CsrMatrix),
    started: Instant,
}

impl Hooks for Harness {
    fn step(&mut self, r: &StepReport) -> rosetta::Result<Flow> {
        self.examples += r.examples;
        if r.step.is_multiple_of(50) {
            eprintln!(
                "{} epoch {} step {} loss {:.4}",
                r.phase, r.epoch, r.step, r.loss
            );
        }
        self.train_s += self.mark.elapsed().as_secs_f64();
        self.mark = Instant::now();
        Ok(Flow::Continue)
    }
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        _extra: Vec<(String, Tensor)>,
    ) -> rosetta::Result<Flow> {
        let mut flow = Flow::Continue;
        if phase != "mono" {
            let s = sentence_retrieval(
                &model.encode(Side::Source, &self.valid.0)?,
                &model.encode(Side::Target, &self.valid.1)?,
                model.similarity(),
            );
            eprintln!(
                "[{:.0}s] {phase} epoch {epoch}: valid MRR {:.4} (train {:.1}s, {} examples)",
                self.started.elapsed().as_secs_f64(),
                s.mrr,
                self.train_s,
                self.examples
            );
            if s.mrr > self.best {
                self.best = s.mrr;
                self.since_best = 0;
            } else {
                self.since_best += 1;
                if self.patience > 0 && self.since_best >= self.patience {
                    eprintln!("early stop: best valid MRR {:.4}", self.best);
                    flow = Flow::Stop;
                }
            }
        }
        self.mark = Instant::now();
        Ok(flow)
    }
    fn log(&mut self, msg: &str) {
        eprintln!("[{:.0}s] {msg}", self.started.elapsed().as_secs_f64());
    }
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let device = if a.cuda {
        Device::new_cuda(0)?
    } else {
        Device::Cpu
    };
    let t0 = Instant::now();
    let cfg = TextConfig {
        min_df: a.min_df,
        stopwords: !a.keep_stopwords,
        stem: !a.no_stem,
        ..TextConfig::default()
    };
    let (sa, ta) = (Analyzer::new(&a.src, &cfg)?, Analyzer::new(&a.tgt, &cfg)?);
    let file = |split: &str, lang: &str| a.data.join(format!("{split}.{lang}"));
    let (mut tr_s, mut tr_t) = (
        analyze(&file("train", &a.src), &sa)?,
        analyze(&file("train", &a.tgt), &ta)?,
    );
    if a.train_limit > 0 {
        tr_s.truncate(a.train_limit);
        tr_t.truncate(a.train_limit);
    }
    let (va_s, va_t) = (
        analyze(&file("val", &a.src), &sa)?,
        analyze(&file("val", &a.tgt), &ta)?,
    );
    let (te_s, te_t) = (
        analyze(&file(&a.test_split, &a.src), &sa)?,
        analyze(&file(&a.test_split, &a.tgt), &ta)?,
    );
    let vs = Vocabulary::build(&a.src, &tr_s, cfg.vocab_per_language, cfg.min_df);
    let vt = Vocabulary::build(&a.tgt, &tr_t, cfg.vocab_per_language, cfg.min_df);
    // Pairs with an empty side are dropped from training and validation.
    let keep = |s: &CsrMatrix, t: &CsrMatrix| -> (CsrMatrix, CsrMatrix) {
        let rows: Vec<usize> = (0..s.n_rows())
            .filter(|&i| !s.row_is_empty(i) && !t.row_is_empty(i))
            .collect();
        (s.select_rows(&rows), t.select_rows(&rows))
    };
    let (train_src, train_tgt) = keep(&vs.count_matrix(&tr_s), &vt.count_matrix(&tr_t));
    let (valid_src, valid_tgt) = keep(&vs.count_matrix(&va_s), &vt.count_matrix(&va_t));
    let (test_src, test_tgt) = (vs.count_matrix(&te_s), vt.count_matrix(&te_t));
    let mono_counts = if a.mono.is_empty() {
        train_tgt.clone()
    } else {
        let mut texts = Vec::new();
        for p in &a.mono {
            texts.extend(analyze(p, &ta)?);
        }
        let m = vt.count_matrix(&texts);
        let rows: Vec<usize> = (0..m.n_rows()).filter(|&i| !m.row_is_empty(i)).collect();
        m.select_rows(&rows)
    };
    let mono_positive = rosetta::models::xcnn::tfidf_positives(&mono_counts, &vt)?;
    let w = |m: CsrMatrix, v: &Vocabulary| {
        if a.tfidf {
            rosetta::text::weight::weigh(&m, v, rosetta::text::weight::Weighting::LogTfIdf, false)
        } else {
            m
        }
    };
    let (train_src, train_tgt) = (w(train_src, &vs), w(train_tgt, &vt));
    let (valid_src, valid_tgt) = (w(valid_src, &vs), w(valid_tgt, &vt));
    let (test_src, test_tgt) = (w(test_src, &vs), w(test_tgt, &vt));
    let mono_counts_for_lsi = mono_counts.clone();
    let mono_w = w(mono_counts, &vt);
    let data = TrainData {
        vocabs: Vocabs {
            source: vs,
            target: vt,
        },
        mono: mono_w,
        mono_positive,
        train_src,
        train_tgt,
        valid_src: valid_src.clone(),
        valid_tgt: valid_tgt.clone(),
        seqs: None,
        texts: None,
        pretrained: None,
        dictionary: None,
        init: None,
    };
    let prep_s = t0.elapsed().as_secs_f64();
    eprintln!(
        "prep {prep_s:.1}s: {} train pairs, {} valid, {} test, {} mono; vocab {} / {}",
        data.train_src.n_rows(),
        data.valid_src.n_rows(),
        test_src.n_rows(),
        data.mono.n_rows(),
        data.vocabs.source.len(),
        data.vocabs.target.len()
    );
    let mut given = BTreeMap::new();
    for s in &a.set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set {s}: expected key=value"))?;
        given.insert(k.to_string(), v.to_string());
    }
    if let Some(path) = &a.lsi_init {
        use rosetta::models::linear::{randomized_svd, CsrOp};
        use rosetta::text::weight::{weigh, Weighting};
        let dim: usize = given
            .get("dim")
            .map(|d| d.parse())
            .transpose()?
            .unwrap_or(128);
        let vt = &data.vocabs.target;
        let xm = weigh(&mono_counts_for_lsi, vt, Weighting::LogTfIdf, true);
        let svd = randomized_svd(&CsrOp(&xm), dim, 10, 4, a.seed)?;
        let nv = vt.len();
        let mut w: Vec<f32> = Vec::with_capacity(nv * dim);
        for i in 0..nv {
            let idf = vt.idf(i as u32) as f64;
            for j in 0..dim {
                w.push((idf * svd.v[(i, j)]) as f32);
            }
        }
        let rms = (w.iter().map(|x| (*x as f64).powi(2)).sum::<f64>() / w.len() as f64).sqrt();
        let c = 0.1 / rms.max(1e-12);
        let w: Vec<f32> = w.iter().map(|x| (*x as f64 * c) as f32).collect();
        let mut t = std::collections::HashMap::new();
        t.insert(
            "tgt.w1".to_string(),
            Tensor::from_vec(w, (nv, dim), &Device::Cpu)?,
        );
        t.insert(
            "tgt.b1".to_string(),
            Tensor::zeros(dim, candle_core::DType::F32, &Device::Cpu)?,
        );
        candle_core::safetensors::save(&t, path)?;
        eprintln!(
            "lsi init: singular values {:.3} .. {:.3}, scale {c:.3}",
            svd.s[0],
            svd.s[dim - 1]
        );
        given.insert("init".into(), path.display().to_string());
    }
    let params = Params::new(given);
    let trainer: Box<dyn Trainer> = match a.model.as_str() {
        "xcnn" => rosetta::models::xcnn::xcnn_trainer(),
        "bae" => rosetta::models::bae::bae_trainer(),
        m => anyhow::bail!("unknown model {m}"),
    };
    let mut h = Harness {
        examples: 0,
        train_s: 0.0,
        mark: Instant::now(),
        best: f64::NEG_INFINITY,
        since_best: 0,
        patience: a.patience,
        valid: (valid_src, valid_tgt),
        started: Instant::now(),
    };
    let model = trainer.train(&data, &params, &device, a.seed, None, &mut h)?;
    let total_s = h.started.elapsed().as_secs_f64();
    let s = sentence_retrieval(
        &model.encode(Side::Source, &test_src)?,
        &model.encode(Side::Target, &test_tgt)?,
        model.similarity(),
    );
    // The same figure over the test pairs with known terms on both sides
    // (an empty text has a zero vector and ranks last).
    let (ns, nt) = keep(&test_src, &test_tgt);
    let sn = sentence_retrieval(
        &model.encode(Side::Source, &ns)?,
        &model.encode(Side::Target, &nt)?,
        model.similarity(),
    );
    let out = serde_json::json!({
        "model": a.model,
        "settings": params.resolved(),
        "threads": std::env::var("RAYON_NUM_THREADS").ok(),
        "device": format!("{device:?}"),
        "train_pairs": data.train_src.n_rows(),
        "mono_texts": data.mono.n_rows(),
        "test_pairs": test_src.n_rows(),
        "test_empty": (0..test_src.n_rows()).filter(|&i| test_src.row_is_empty(i) || test_tgt.row_is_empty(i)).count(),
        "vocab": [data.vocabs.source.len(), data.vocabs.target.len()],
        "prep_s": (prep_s * 100.0).round() / 100.0,
        "train_s": (h.train_s * 100.0).round() / 100.0,
        "total_s": (total_s * 100.0).round() / 100.0,
        "examples": h.examples,
        "pairs_per_s": ((h.examples as f64 / h.train_s) * 10.0).round() / 10.0,
        "test_mrr": (s.mrr * 10000.0).round() / 10000.0,
        "test_p1": (s.p1 * 10000.0).round() / 10000.0,
        "test_nonempty_pairs": sn.queries,
        "test_nonempty_mrr": (sn.mrr * 10000.0).round() / 10000.0,
    });
    println!("{out}");
    Ok(())
}
