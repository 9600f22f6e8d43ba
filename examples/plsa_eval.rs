//! Hand-run harness (not a test) for a trained `jplsa` or `cplsa` session:
//! the sentence-retrieval MRR of its validation pairs (the first `--pairs`)
//! under Jensen–Shannon and, for comparison, cosine, with the best
//! checkpoint's φ folded in at each `--fold ALPHA:ITERATIONS` given; and,
//! with `--time`, seconds per EM iteration of both models on the session's
//! training pairs (5 iterations from the seeded start, per `--topics`) and of
//! folding in every validation pair's two sides.
//!
//! ```text
//! cargo run --example plsa_eval -- --session S --pairs 1000 --fold 1.001:10 --fold 1.1:10
//! cargo run --example plsa_eval -- --session S --time --topics 100 --topics 200
//! ```

use std::path::PathBuf;
use std::time::Instant;

use candle_core::Device;
use clap::Parser;
use ndarray::Array2;
use rosetta::corpus::{Prepared, Workspace};
use rosetta::models::plsa::{Em, PlsaConfig, PlsaModel, PrConfig, CPLSA, JPLSA};
use rosetta::models::{Model, TrainData};
use rosetta::session::Session;
use rosetta::space::Similarity;
use rosetta::text::Side;

/// Validation MRR of a PLSA session under JS and cosine, and EM timings.
#[derive(Parser, Debug)]
struct Args {
    /// A finished jplsa or cplsa session folder.
    #[arg(long)]
    session: PathBuf,
    /// Validation pairs scored (the first N; 0: all).
    #[arg(long, default_value_t = 0)]
    pairs: usize,
    /// Folding-in prior and iterations, ALPHA:ITERATIONS (repeatable).
    #[arg(long = "fold")]
    fold: Vec<String>,
    /// Time EM iterations and folding in instead.
    #[arg(long)]
    time: bool,
    /// Topics to time (repeatable).
    #[arg(long = "topics", default_values_t = [100usize])]
    topics: Vec<usize>,
}

/// MRR of row i of `s` finding row i of `t`, ties counted against it.
fn mrr(sim: Similarity, s: &Array2<f32>, t: &Array2<f32>) -> f64 {
    rosetta::eval::sentence::sentence_retrieval(s, t, sim).mrr
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let s = Session::open(&a.session)?;
    let kind = match s.config.model.as_str() {
        "jplsa" => JPLSA,
        "cplsa" => CPLSA,
        m => anyhow::bail!("{m}: not a topic-model session"),
    };
    let ws = Workspace::load_with_text(&s.config.workspace, s.config.text.as_ref())?;
    let p = Prepared::load_or_build(&ws)?;
    let data = TrainData::from_prepared(&p, Vec::new());
    if a.time {
        for (kind, pr) in [
            (JPLSA, None),
            (
                CPLSA,
                Some(PrConfig {
                    epsilon: 0.0,
                    steps: 5,
                }),
            ),
        ] {
            for &k in &a.topics {
                let cfg = PlsaConfig {
                    topics: k,
                    alpha: 1.1,
                    beta: 1.01,
                    epochs: 5,
                    fold_in: 10,
                    fold_in_alpha: 1.001,
                    pr,
                };
                let mut em = Em::new(kind, &data.train_src, &data.train_tgt, cfg, 1, None)?;
                let t0 = Instant::now();
                for _ in 0..5 {
                    em.iterate();
                }
                let per = t0.elapsed().as_secs_f64() / 5.0;
                let m = em.model()?;
                let t1 = Instant::now();
                m.encode(Side::Source, &data.valid_src)?;
                m.encode(Side::Target, &data.valid_tgt)?;
                println!(
                    "{kind} K={k}: {per:.3} s per EM iteration; folding in {} validation pairs \
                     (both sides, 10 iterations) {:.3} s; {} threads",
                    data.valid_src.n_rows(),
                    t1.elapsed().as_secs_f64(),
                    rayon::current_num_threads()
                );
            }
        }
        return Ok(());
    }
    let n = match a.pairs {
        0 => data.valid_src.n_rows(),
        n => n.min(data.valid_src.n_rows()),
    };
    let rows: Vec<usize> = (0..n).collect();
    let (vs, vt) = (
        data.valid_src.select_rows(&rows),
        data.valid_tgt.select_rows(&rows),
    );
    let ck = s.checkpoint("best", &Device::Cpu)?;
    let vocabs = s.vocabs()?;
    for f in &a.fold {
        let (alpha, iters) = f
            .split_once(':')
            .ok_or_else(|| anyhow::anyhow!("--fold {f}: expected ALPHA:ITERATIONS"))?;
        let m = PlsaModel::from_tensors(
            kind,
            &vocabs,
            &ck.model_tensors(),
            alpha.parse()?,
            iters.parse()?,
        )?;
        let (es, et) = (m.encode(Side::Source, &vs)?, m.encode(Side::Target, &vt)?);
        println!(
            "{} (epoch {}), {n} validation pairs, fold_in_alpha {alpha}, fold_in {iters}: \
             MRR Jensen-Shannon {:.4}, cosine {:.4}",
            a.session.display(),
            ck.meta.epoch,
            mrr(Similarity::JensenShannon, &es, &et),
            mrr(Similarity::Cosine, &es, &et)
        );
    }
    Ok(())
}
