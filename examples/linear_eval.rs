//! Hand-run harness (not a test): trains one linear model (`cl-lsi`, `opca`,
//! `cca`, `s2net`) on the parallel sentences of a data folder holding
//! `train.{en,hi}`, `val.{en,hi}` and `test.{en,hi}` (e.g.
//! /work/shared/data/enhi-nmt-sample-18k), through the shared text pipeline
//! (Analyzer, Vocabulary::build top-10k per language on train, count_matrix),
//! and prints ONE JSON line: test sentence-retrieval MRR / P@1 over all test
//! pairs as candidates, validation MRR per epoch, fit time, S2Net training
//! throughput (pairs/s, training loop only, validation excluded) and the
//! process's peak resident memory (VmHWM; reset after data preparation).
//!
//! Run by hand, e.g.:
//!
//! ```text
//! RAYON_NUM_THREADS=2 cargo run --example linear_eval -- \
//!     --data /work/shared/data/enhi-nmt-sample-18k --model s2net --set epochs=3
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Device, Tensor};
use clap::Parser;
use rosetta::eval::sentence::sentence_retrieval;
use rosetta::models::{Flow, Hooks, StepReport, TrainData};
use rosetta::models::{Model, Params};
use rosetta::text::io::read_lines;
use rosetta::text::{Analyzer, CsrMatrix, TextConfig, Vocabulary};
use rosetta::text::{Side, Vocabs};

/// Trains one linear CLIR model on parallel data and reports test MRR, time and memory.
#[derive(Parser, Debug)]
struct Args {
    /// Folder with train/val/test .en and .{tgt} files.
    #[arg(long)]
    data: PathBuf,
    /// Model: cl-lsi, opca, cca or s2net.
    #[arg(long)]
    model: String,
    /// Model settings as key=value (dim, ridge, reg, epochs, lr, batch, ...).
    #[arg(long = "set")]
    set: Vec<String>,
    /// Terms per language.
    #[arg(long, default_value_t = 10_000)]
    vocab: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Minimum document frequency of a vocabulary term.
    #[arg(long, default_value_t = 2)]
    min_df: usize,
    /// Keep stop words.
    #[arg(long)]
    keep_stopwords: bool,
    /// No stemming.
    #[arg(long)]
    no_stem: bool,
    /// Save the model as a minimal session directory (DIR/checkpoints/best.safetensors,
    /// DIR/vocab.source.json, DIR/vocab.target.json, as a session lays them out) that `--set init=DIR` of s2net can start from.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Target language code (file suffix and analyser).
    #[arg(long, default_value = "hi")]
    tgt: String,
    /// Skip validation at epoch ends (faster S2Net throughput runs).
    #[arg(long)]
    no_valid: bool,
}

fn vm_hwm_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// MRR with ties counted in favour of the true answer (rank = 1 + number of
/// targets scoring strictly higher), the convention of torch_ref.py's `mrr`:
/// there an empty query (zero vector, all scores 0) ranks its answer first.
fn mrr_ties_favourable(s: &ndarray::Array2<f32>, t: &ndarray::Array2<f32>) -> f64 {
    let sims = s.dot(&t.t());
    let n = sims.nrows();
    (0..n)
        .map(|i| {
            let own = sims[[i, i]];
            1.0 / (1 + sims.row(i).iter().filter(|x| **x > own).count()) as f64
        })
        .sum::<f64>()
        / n.max(1) as f64
}

/// User + system CPU seconds of this process so far (all threads): on a
/// shared machine wall time includes waiting, this does not.
fn cpu_s() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Token lists of a file's lines.
type Docs = Vec<Vec<String>>;

fn analyse(path: &Path, an: &Analyzer) -> anyhow::Result<Vec<Vec<String>>> {
    Ok(read_lines(path)?.iter().map(|l| an.analyze(l)).collect())
}

struct EvalHooks<'a> {
    valid: (&'a CsrMatrix, &'a CsrMatrix),
    no_valid: bool,
    in_hooks_s: f64,
    pairs: usize,
    curve: Vec<f64>,
    last_loss: f64,
}

impl Hooks for EvalHooks<'_> {
    fn step(&mut self, r: &StepReport) -> rosetta::Result<Flow> {
        self.pairs += r.examples;
        self.last_loss = r.loss;
        Ok(Flow::Continue)
    }
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        _extra: Vec<(String, Tensor)>,
    ) -> rosetta::Result<Flow> {
        let t = Instant::now();
        if !self.no_valid {
            let s = model.encode(Side::Source, self.valid.0)?;
            let g = model.encode(Side::Target, self.valid.1)?;
            let m = sentence_retrieval(&s, &g, model.similarity()).mrr;
            self.curve.push((m * 10000.0).round() / 10000.0);
            eprintln!(
                "{phase} epoch {epoch}: loss {:.4} valid MRR {m:.4}",
                self.last_loss
            );
        }
        self.in_hooks_s += t.elapsed().as_secs_f64();
        Ok(Flow::Continue)
    }
    fn log(&mut self, msg: &str) {
        eprintln!("{msg}");
    }
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let t0 = Instant::now();
    let cfg = TextConfig {
        vocab_per_language: a.vocab,
        min_df: a.min_df,
        stopwords: !a.keep_stopwords,
        stem: !a.no_stem,
        oov_ngrams: 0, // the harness builds word vocabularies only
        ..Default::default()
    };
    let (en, hi) = (Analyzer::new("en", &cfg)?, Analyzer::new(&a.tgt, &cfg)?);
    let load = |split: &str| -> anyhow::Result<(Docs, Docs)> {
        Ok((
            analyse(&a.data.join(format!("{split}.en")), &en)?,
            analyse(&a.data.join(format!("{split}.{}", a.tgt)), &hi)?,
        ))
    };
    let (tr_en, tr_hi) = load("train")?;
    let (va_en, va_hi) = load("val")?;
    let (te_en, te_hi) = load("test")?;
    let vocabs = Vocabs {
        source: Vocabulary::build("en", &tr_en, cfg.vocab_per_language, cfg.min_df),
        target: Vocabulary::build(&a.tgt, &tr_hi, cfg.vocab_per_language, cfg.min_df),
    };
    let (cs, ct) = (
        vocabs.source.count_matrix(&tr_en),
        vocabs.target.count_matrix(&tr_hi),
    );
    // pairs with an empty side are dropped for training (TrainData's convention)
    let keep: Vec<usize> = (0..cs.n_rows())
        .filter(|i| !cs.row_is_empty(*i) && !ct.row_is_empty(*i))
        .collect();
    let data = TrainData {
        train_src: cs.select_rows(&keep),
        train_tgt: ct.select_rows(&keep),
        valid_src: vocabs.source.count_matrix(&va_en),
        valid_tgt: vocabs.target.count_matrix(&va_hi),
        mono: CsrMatrix::new(vocabs.target.len()),
        mono_positive: Vec::new(),
        seqs: None,
        texts: None,
        pretrained: None,
        dictionary: None,
        init: None,
        vocabs: vocabs.clone(),
    };
    let (test_s, test_t) = (
        vocabs.source.count_matrix(&te_en),
        vocabs.target.count_matrix(&te_hi),
    );
    let prep_s = t0.elapsed().as_secs_f64();
    let prep_mb = vm_hwm_mb();
    reset_hwm();

    let mut given = std::collections::BTreeMap::new();
    for kv in &a.set {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set {kv}: expected key=value"))?;
        given.insert(k.to_string(), v.to_string());
    }
    let params = Params::new(given);
    let trainer = rosetta::models::registry::trainer(&a.model)?;
    let mut hooks = EvalHooks {
        valid: (&data.valid_src, &data.valid_tgt),
        no_valid: a.no_valid,
        in_hooks_s: 0.0,
        pairs: 0,
        curve: Vec::new(),
        last_loss: f64::NAN,
    };
    let t1 = Instant::now();
    let c1 = cpu_s();
    let model = trainer.train(&data, &params, &Device::Cpu, a.seed, None, &mut hooks)?;
    let fit_s = t1.elapsed().as_secs_f64();
    let fit_cpu_s = cpu_s() - c1;
    let peak_mb = vm_hwm_mb();
    let train_s = fit_s - hooks.in_hooks_s;
    let es = model.encode(Side::Source, &test_s)?;
    let et = model.encode(Side::Target, &test_t)?;
    let sc = sentence_retrieval(&es, &et, model.similarity());
    let out = serde_json::json!({
        "model": a.model,
        "settings": params.resolved(),
        "train_pairs": data.train_src.n_rows(),
        "vocab": [vocabs.source.len(), vocabs.target.len()],
        "threads": std::env::var("RAYON_NUM_THREADS").unwrap_or_default(),
        "prep_s": (prep_s * 100.0).round() / 100.0,
        "prep_peak_mb": prep_mb.round(),
        "fit_s": (fit_s * 100.0).round() / 100.0,
        "fit_cpu_s": (fit_cpu_s * 100.0).round() / 100.0,
        "train_loop_s": (train_s * 100.0).round() / 100.0,
        "pairs_per_s": if hooks.pairs > 0 { ((hooks.pairs as f64 / train_s) * 10.0).round() / 10.0 } else { f64::NAN },
        "fit_peak_mb": peak_mb.round(),
        "valid_mrr_per_epoch": hooks.curve,
        "test_candidates": sc.queries,
        "test_pairs_with_empty_side": (0..test_s.n_rows()).filter(|i| test_s.row_is_empty(*i) || test_t.row_is_empty(*i)).count(),
        "text": serde_json::json!({"min_df": cfg.min_df, "stopwords": cfg.stopwords, "stem": cfg.stem}),
        "test_mrr": (sc.mrr * 10000.0).round() / 10000.0,
        "test_p1": (sc.p1 * 10000.0).round() / 10000.0,
        "test_mrr_ties_favourable": (mrr_ties_favourable(&es, &et) * 10000.0).round() / 10000.0,
    });
    if let Some(dir) = &a.save {
        std::fs::create_dir_all(dir.join("checkpoints"))?;
        let tensors: std::collections::HashMap<String, Tensor> =
            model.tensors()?.into_iter().collect();
        candle_core::safetensors::save(&tensors, dir.join("checkpoints/best.safetensors"))?;
        vocabs.source.save(&dir.join("vocab.source.json"))?;
        vocabs.target.save(&dir.join("vocab.target.json"))?;
    }
    println!("{out}");
    Ok(())
}
