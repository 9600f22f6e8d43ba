//! JPLSA and CPLSA, bilingual topic models (Platt, Toutanova & Yih 2010, as
//! changed by seed 001 §4.1): every aligned pair shares one topic
//! distribution θ over `K` topics, each language has its own word-topic
//! distributions φ over its own vocabulary, and both are MAP estimates by EM
//! under symmetric Dirichlet priors (α on θ, β on φ). CPLSA adds the
//! posterior-regularisation constraint (Ganchev et al. 2009) that a pair's
//! two texts give each topic similar expected fractions of their tokens,
//! enforced by projecting each pair's posteriors in the E-step.
//!
//! A text's embedding is its θ folded in (EM on θ alone, its side's φ fixed,
//! `fold_in` iterations from uniform, under a Dirichlet prior of its own,
//! `fold_in_alpha`: short texts want a weaker one); texts are compared by
//! Jensen–Shannon ([`Similarity::JensenShannon`]). A term's vector is its
//! topic profile `p(z|w) ∝ φ_zw·p(z)`.
//!
//! EM is sparse and deterministic: per iteration one pass over the pairs
//! (parallel) and one over each language's terms (parallel, through a
//! column index of the counts), `O(nnz·K)` work for JPLSA and
//! `O(nnz·K·(pr_steps + 2))` for CPLSA, memory linear in the non-zeros and
//! in `K × (pairs + V_s + V_t)`. Every sum runs in a fixed order, so a run
//! is the same whatever the number of threads, and a resume is bit for bit
//! the uninterrupted run. Equations, choices and measured notes:
//! `docs/models.md`.
//!
//! Checkpoint tensors: `phi.source` (`K × V_s`), `phi.target` (`K × V_t`),
//! `topic.prior` (`K`), f32, rows summing to 1; the EM state for a resume
//! as extra tensors `em.theta` (`pairs × K`), `em.phi.source` and
//! `em.phi.target` (`V × K`), f64.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::models::kit::linear::check_fit_sizes;
use crate::models::settings::ModelDef;
use crate::models::settings::{
    boxed, model_config, s, Check, ModelConfig, Settings, Spec, DIM, EPOCHS,
};
use crate::models::{Flow, Hooks, Model, Params, Phase, Resume, StepReport, TrainData, Trainer};
use crate::space::Similarity;
use crate::text::{CsrMatrix, Side, Vocabs};
use crate::{Error, Result};

/// Registry name of joint PLSA.
pub const JPLSA: &str = "jplsa";
/// Registry name of coupled PLSA.
pub const CPLSA: &str = "cplsa";
/// The phase EM runs in (one epoch = one EM iteration).
pub const PHASE: &str = "em";
/// Checkpoint tensor: source word-topic distributions, `K × V_s`.
pub const PHI_SOURCE: &str = "phi.source";
/// Checkpoint tensor: target word-topic distributions, `K × V_t`.
pub const PHI_TARGET: &str = "phi.target";
/// Checkpoint tensor: the topics' shares of the training tokens, `K`.
pub const TOPIC_PRIOR: &str = "topic.prior";
/// Extra (resume) tensor: θ of the training pairs, `pairs × K`, f64.
pub const EM_THETA: &str = "em.theta";
/// Extra (resume) tensor: source φ, term-major `V_s × K`, f64.
pub const EM_PHI_SOURCE: &str = "em.phi.source";
/// Extra (resume) tensor: target φ, term-major `V_t × K`, f64.
pub const EM_PHI_TARGET: &str = "em.phi.target";

/// CPLSA's posterior-regularisation settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrConfig {
    /// Largest allowed gap `|E_q[frac_src(z)] − E_q[frac_tgt(z)]|` per topic.
    pub epsilon: f64,
    /// Proximal-gradient steps on each pair's dual per E-step (0: none, JPLSA's E-step).
    pub steps: usize,
}

/// Settings of a JPLSA or CPLSA job.
#[derive(Debug, Clone, PartialEq)]
pub struct PlsaConfig {
    /// Number of topics `K` (the `dim` setting).
    pub topics: usize,
    /// Dirichlet parameter on θ (≥ 1).
    pub alpha: f64,
    /// Dirichlet parameter on φ (≥ 1).
    pub beta: f64,
    /// EM iterations.
    pub epochs: usize,
    /// Folding-in iterations of [`Model::encode`].
    pub fold_in: usize,
    /// Dirichlet parameter on a folded-in text's θ (≥ 1).
    pub fold_in_alpha: f64,
    /// CPLSA's constraint; `None` for JPLSA.
    pub pr: Option<PrConfig>,
}

const PRIOR: Check = Check::Range {
    min: 1.0,
    max: 1e6,
    open: false,
};
const ALPHA: Spec = s(
    "1.1",
    PRIOR,
    "Dirichlet prior on each pair's topic distribution θ (MAP: α − 1 pseudo-counts)",
);
const BETA: Spec = s(
    "1.01",
    PRIOR,
    "Dirichlet prior on each topic's word distribution φ (MAP: β − 1 pseudo-counts)",
);
const TOPICS: Spec = DIM.help("number of topics K (--dim)");
const EM_EPOCHS: Spec = s("50", EPOCHS, "EM iterations (one epoch each)");
const FOLD_IN: Spec = s(
    "10",
    Check::Int {
        min: 1,
        max: 10_000,
    },
    "EM iterations folding in a text's θ (the seed's 10)",
);
const FOLD_IN_ALPHA: Spec = s(
    "1.001",
    PRIOR,
    "Dirichlet prior on a folded-in text's θ (short texts want it near 1)",
);
/// The topic models' `[text]` defaults: PLSA models every token, so stop
/// words (which would fill the topics) are removed, and a text is its
/// known words (no n-gram units).
const PLSA_TEXT: &[(&str, &str)] = &[("stopwords", "true"), ("oov_ngrams", "0")];

model_config! {
    /// JPLSA's settings, as given (`--set`) and recorded (`config.toml`).
    pub struct JplsaSettings {
        alpha: f64 = ALPHA,
        beta: f64 = BETA,
        dim: usize = TOPICS,
        epochs: usize = EM_EPOCHS,
        fold_in: usize = FOLD_IN,
        fold_in_alpha: f64 = FOLD_IN_ALPHA,
    }
}

model_config! {
    /// CPLSA's settings: JPLSA's and its constraint's.
    pub struct CplsaSettings {
        alpha: f64 = ALPHA,
        beta: f64 = BETA,
        dim: usize = TOPICS,
        epochs: usize = EM_EPOCHS,
        fold_in: usize = FOLD_IN,
        fold_in_alpha: f64 = FOLD_IN_ALPHA,
        pr_epsilon: f64 = s(
            "0",
            Check::Range { min: 0.0, max: 1.0, open: false },
            "largest allowed gap between a pair's sides' expected fractions of a topic",
        ),
        pr_steps: usize = s(
            "5",
            Check::Int { min: 0, max: 1000 },
            "proximal-gradient steps on each pair's dual per E-step (0: JPLSA's E-step)",
        ),
    }
}

impl ModelConfig for JplsaSettings {}
impl ModelConfig for CplsaSettings {}

/// JPLSA in the registry.
pub static JPLSA_DEF: ModelDef = ModelDef {
    name: JPLSA,
    summary: "joint PLSA: bilingual topic model, one θ per pair, φ per language, MAP by EM (Yih et al., CoNLL 2011)",
    space: true,
    runner: true,
    gpu: false,
    word2vec: false,
    settings: JplsaSettings::SETTINGS,
    read: boxed::<JplsaSettings>,
    trainer: Some(jplsa_trainer),
    text: PLSA_TEXT,
    presets: &[],
};

/// CPLSA in the registry.
pub static CPLSA_DEF: ModelDef = ModelDef {
    name: CPLSA,
    summary: "coupled PLSA: JPLSA with posterior regularisation of the pair's topic fractions (Yih et al., CoNLL 2011)",
    space: true,
    runner: true,
    gpu: false,
    word2vec: false,
    settings: CplsaSettings::SETTINGS,
    read: boxed::<CplsaSettings>,
    trainer: Some(cplsa_trainer),
    text: PLSA_TEXT,
    presets: &[],
};

impl PlsaConfig {
    /// Reads (and records) the settings of `kind` (`jplsa` or `cplsa`).
    pub fn from_params(kind: &str, params: &Params) -> Result<Self> {
        let c = if kind == CPLSA {
            let p = CplsaSettings::from_params(params, kind)?;
            PlsaConfig {
                topics: p.dim,
                alpha: p.alpha,
                beta: p.beta,
                epochs: p.epochs,
                fold_in: p.fold_in,
                fold_in_alpha: p.fold_in_alpha,
                pr: Some(PrConfig {
                    epsilon: p.pr_epsilon,
                    steps: p.pr_steps,
                }),
            }
        } else {
            let p = JplsaSettings::from_params(params, kind)?;
            PlsaConfig {
                topics: p.dim,
                alpha: p.alpha,
                beta: p.beta,
                epochs: p.epochs,
                fold_in: p.fold_in,
                fold_in_alpha: p.fold_in_alpha,
                pr: None,
            }
        };
        c.check(kind)?;
        Ok(c)
    }

    /// Checks the values (the registry checks given ones; this guards
    /// configurations built in code).
    pub fn check(&self, kind: &str) -> Result<()> {
        let bad = |what: String| Err(Error::invalid(format!("{kind}: {what}")));
        if self.topics == 0 {
            return bad("dim (the number of topics) must be at least 1".into());
        }
        for (name, v) in [
            ("alpha", self.alpha),
            ("beta", self.beta),
            ("fold_in_alpha", self.fold_in_alpha),
        ] {
            if !(v.is_finite() && v >= 1.0) {
                return bad(format!(
                    "{name} = {v}: a Dirichlet parameter below 1 (or not finite) has no MAP \
                     estimate (a zero share would score +∞); use a value ≥ 1"
                ));
            }
        }
        if self.fold_in == 0 {
            return bad("fold_in must be at least 1 iteration".into());
        }
        if let Some(pr) = self.pr {
            if !(pr.epsilon.is_finite() && (0.0..=1.0).contains(&pr.epsilon)) {
                return bad(format!("pr_epsilon = {} must lie in [0, 1]", pr.epsilon));
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------------ corpus

/// One language's training counts by pair (rows) and by term (columns).
struct SideCounts<'a> {
    rows: &'a CsrMatrix,
    /// Column `w`'s entries are `col_ptr[w]..col_ptr[w + 1]` of `col_row`
    /// (the pair) and `col_pos` (the entry's position in `rows`), rows ascending.
    col_ptr: Vec<usize>,
    col_row: Vec<u32>,
    col_pos: Vec<usize>,
    /// Tokens per pair.
    len: Vec<f64>,
    /// Tokens per term.
    term_count: Vec<f64>,
}

impl<'a> SideCounts<'a> {
    fn new(kind: &str, what: &str, rows: &'a CsrMatrix) -> Result<Self> {
        let v = rows.n_cols;
        let n = rows.n_rows();
        let mut len = vec![0.0; n];
        let mut term_count = vec![0.0; v];
        let mut col_ptr = vec![0usize; v + 1];
        for (d, len_d) in len.iter_mut().enumerate() {
            let (idx, val) = rows.row(d);
            for (&w, &c) in idx.iter().zip(val) {
                if !(c.is_finite() && c >= 0.0) {
                    return Err(Error::invalid(format!(
                        "{kind}: {what} counts: pair {d} holds {c} for term {w} \
                         (counts must be finite and ≥ 0)"
                    )));
                }
                if w as usize >= v {
                    return Err(Error::invalid(format!(
                        "{kind}: {what} counts: pair {d} names term {w} of a {v}-term vocabulary"
                    )));
                }
                *len_d += f64::from(c);
                term_count[w as usize] += f64::from(c);
                col_ptr[w as usize + 1] += 1;
            }
        }
        for w in 0..v {
            col_ptr[w + 1] += col_ptr[w];
        }
        let nnz = rows.nnz();
        let mut next = col_ptr.clone();
        let mut col_row = vec![0u32; nnz];
        let mut col_pos = vec![0usize; nnz];
        for d in 0..n {
            let start = rows.indptr[d];
            for (j, &w) in rows.row(d).0.iter().enumerate() {
                let slot = &mut next[w as usize];
                col_row[*slot] = d as u32;
                col_pos[*slot] = start + j;
                *slot += 1;
            }
        }
        Ok(SideCounts {
            rows,
            col_ptr,
            col_row,
            col_pos,
            len,
            term_count,
        })
    }

    fn vocab(&self) -> usize {
        self.rows.n_cols
    }
}

/// The training pairs as EM reads them.
struct Corpus<'a> {
    sides: [SideCounts<'a>; 2],
    pairs: usize,
    tokens: f64,
}

impl<'a> Corpus<'a> {
    fn new(kind: &str, src: &'a CsrMatrix, tgt: &'a CsrMatrix) -> Result<Self> {
        if src.n_rows() != tgt.n_rows() {
            return Err(Error::invalid(format!(
                "{kind}: {} source but {} target training texts",
                src.n_rows(),
                tgt.n_rows()
            )));
        }
        let sides = [
            SideCounts::new(kind, "source", src)?,
            SideCounts::new(kind, "target", tgt)?,
        ];
        for (s, name) in sides.iter().zip(["source", "target"]) {
            if s.len.iter().sum::<f64>() <= 0.0 {
                return Err(Error::invalid(format!(
                    "{kind}: the {name} side of the training pairs has no token"
                )));
            }
        }
        if !(0..src.n_rows()).any(|d| sides[0].len[d] > 0.0 && sides[1].len[d] > 0.0) {
            return Err(Error::invalid(format!(
                "{kind}: no training pair has tokens on both sides"
            )));
        }
        let tokens = sides.iter().map(|s| s.len.iter().sum::<f64>()).sum();
        Ok(Corpus {
            pairs: src.n_rows(),
            sides,
            tokens,
        })
    }
}

// ------------------------------------------------------------------ EM

/// The EM state between iterations: θ of every training pair and each
/// language's φ, as f64.
#[derive(Debug, Clone, PartialEq)]
pub struct EmState {
    /// Topics.
    pub k: usize,
    /// θ, `pairs × K` row-major; rows sum to 1.
    pub theta: Vec<f64>,
    /// φ of the source (index 0) and target (1) language, term-major
    /// `V × K` (entry `w·K + z` is `φ_zw`); each topic's column sums to 1.
    pub phi: [Vec<f64>; 2],
}

impl EmState {
    /// The seeded start: θ uniform, and topic `z` begins as one training
    /// pair: `φ^L_z = ½·(pair d_z's L side as a distribution) + ½·(L's
    /// add-one unigram distribution, each term's share scaled by a factor
    /// 0.5 + u, u uniform in [0, 1), then renormalised)`, the `K` pairs
    /// `d_z` drawn without repeats among the pairs with tokens on both
    /// sides (cycling when there are fewer). Measured on enhi: EM from this
    /// start is ahead after 10 iterations of where near-uniform random φ is
    /// after 20 (`docs/models.md`).
    fn init(corpus: &Corpus<'_>, k: usize, seed: u64) -> EmState {
        use rand::seq::SliceRandom;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let theta = vec![1.0 / k as f64; corpus.pairs * k];
        let mut seeds: Vec<usize> = (0..corpus.pairs)
            .filter(|&d| corpus.sides[0].len[d] > 0.0 && corpus.sides[1].len[d] > 0.0)
            .collect();
        seeds.shuffle(&mut rng);
        let phi = [0, 1].map(|l| {
            let s = &corpus.sides[l];
            let v = s.vocab();
            let total: f64 = s.term_count.iter().sum::<f64>() + v as f64;
            let mut phi = vec![0.0; v * k];
            for (w, row) in phi.chunks_mut(k).enumerate() {
                for x in row.iter_mut() {
                    *x = (s.term_count[w] + 1.0) / total * (0.5 + rng.random::<f64>());
                }
            }
            let mut col = vec![0.0; k];
            for row in phi.chunks(k) {
                for (c, x) in col.iter_mut().zip(row) {
                    *c += x;
                }
            }
            for row in phi.chunks_mut(k) {
                for (x, c) in row.iter_mut().zip(&col) {
                    *x *= 0.5 / c;
                }
            }
            for z in 0..k {
                let d = seeds[z % seeds.len()];
                let (idx, val) = s.rows.row(d);
                for (&w, &c) in idx.iter().zip(val) {
                    phi[w as usize * k + z] += 0.5 * f64::from(c) / s.len[d];
                }
            }
            phi
        });
        EmState { k, theta, phi }
    }

    /// The state as extra checkpoint tensors (f64).
    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let k = self.k;
        let t = |v: &Vec<f64>| Tensor::from_vec(v.clone(), (v.len() / k, k), &Device::Cpu);
        Ok(vec![
            (EM_THETA.to_string(), t(&self.theta)?),
            (EM_PHI_SOURCE.to_string(), t(&self.phi[0])?),
            (EM_PHI_TARGET.to_string(), t(&self.phi[1])?),
        ])
    }

    /// The state from a checkpoint's extra tensors, checked against the
    /// job's corpus and `k`.
    fn from_tensors(
        kind: &str,
        tensors: &HashMap<String, Tensor>,
        corpus: &Corpus<'_>,
        k: usize,
    ) -> Result<EmState> {
        let get = |name: &str, rows: usize| -> Result<Vec<f64>> {
            let (shape, v) = tensor_f64(kind, tensors, name)?;
            if shape != [rows, k] {
                return Err(Error::invalid(format!(
                    "{kind}: checkpoint tensor `{name}` has shape {shape:?}, this job needs \
                     [{rows}, {k}] (another workspace, vocabulary or dim?)"
                )));
            }
            if let Some(x) = v.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                return Err(Error::invalid(format!(
                    "{kind}: checkpoint tensor `{name}` holds {x}, not a probability"
                )));
            }
            Ok(v)
        };
        Ok(EmState {
            k,
            theta: get(EM_THETA, corpus.pairs)?,
            phi: [
                get(EM_PHI_SOURCE, corpus.sides[0].vocab())?,
                get(EM_PHI_TARGET, corpus.sides[1].vocab())?,
            ],
        })
    }
}

/// What one E-step found.
struct EStats {
    /// Expected topic counts of every pair (both sides), `pairs × K`.
    theta_acc: Vec<f64>,
    /// Expected counts of every (term, topic), term-major, per language.
    phi_acc: [Vec<f64>; 2],
    /// `Σ n log Σ_z θ_dz φ_zw` over every training token.
    loglik: f64,
    /// `Σ_d KL(q_d ‖ p_d)` of the projected posteriors (0 for JPLSA).
    kl: f64,
    /// Sum over pairs with both sides of the total-variation distance
    /// between the two sides' expected topic fractions.
    tv: f64,
    /// Sum over those pairs of `max(0, max_z |gap_z| − ε)`.
    violation: f64,
    /// Pairs with tokens on both sides.
    both: usize,
}

/// Figures of one pair's E-step.
#[derive(Default, Clone, Copy)]
struct PairStats {
    loglik: f64,
    kl: f64,
    tv: f64,
    violation: f64,
    both: bool,
}

/// One pair's outputs of the E-step's first pass.
struct PairOut<'a> {
    acc: &'a mut [f64],
    r: [&'a mut [f64]; 2],
    eff: Option<[&'a mut [f64]; 2]>,
}

/// Per-thread buffers of the first pass.
#[derive(Default)]
struct Scratch {
    p: [Vec<f64>; 2],
    s: [Vec<f64>; 2],
    m: [Vec<f64>; 2],
    lam: Vec<f64>,
    ln_e: [Vec<f64>; 2],
    e: [Vec<f64>; 2],
}

/// Splits `v` into consecutive slices of the lengths given by `indptr`'s steps.
fn split_by<'a>(mut v: &'a mut [f64], indptr: &[usize]) -> Vec<&'a mut [f64]> {
    let mut out = Vec::with_capacity(indptr.len().saturating_sub(1));
    for w in indptr.windows(2) {
        let (a, b) = std::mem::take(&mut v).split_at_mut(w[1] - w[0]);
        out.push(a);
        v = b;
    }
    out
}

/// Σ_i n_i q_i over one side's tokens into `m`, where `q_i ∝ P_i ⊙ e`
/// (`P_i = θ ⊙ φ_{w_i}`, `s_i = Σ_z P_iz`; `e = None`: all ones). With `r`,
/// writes `r_i = n_i / (P_i · e)`. Returns `Σ_i n_i ln(s_i / (P_i · e))`.
fn expected(
    p: &[f64],
    s: &[f64],
    counts: &[f32],
    e: Option<&[f64]>,
    k: usize,
    m: &mut [f64],
    mut r: Option<&mut [f64]>,
) -> f64 {
    m.fill(0.0);
    let mut log_ratio = 0.0;
    for (i, (pi, &c)) in p.chunks(k).zip(counts).enumerate() {
        let c = f64::from(c);
        let sp = match e {
            None => s[i],
            Some(e) => pi.iter().zip(e).map(|(a, b)| a * b).sum(),
        };
        let ri = if sp > 0.0 { c / sp } else { 0.0 };
        if let Some(r) = r.as_deref_mut() {
            r[i] = ri;
        }
        match e {
            None => {
                for (mz, pz) in m.iter_mut().zip(pi) {
                    *mz += ri * pz;
                }
            }
            Some(e) => {
                for ((mz, pz), ez) in m.iter_mut().zip(pi).zip(e) {
                    *mz += ri * (pz * ez);
                }
                if sp > 0.0 && s[i] > 0.0 {
                    log_ratio += c * (s[i] / sp).ln();
                }
            }
        }
    }
    log_ratio
}

fn soft_threshold(v: f64, t: f64) -> f64 {
    if v > t {
        v - t
    } else if v < -t {
        v + t
    } else {
        0.0
    }
}

/// `ln e_z = sign·λ_z/len − max_z(sign·λ_z/len)` and `e = exp(ln e)`: the
/// side's posterior weights, scaled so the largest is 1 (no overflow).
fn weights(lam: &[f64], sign: f64, len: f64, ln_e: &mut Vec<f64>, e: &mut Vec<f64>) {
    ln_e.clear();
    ln_e.extend(lam.iter().map(|l| sign * l / len));
    let top = ln_e.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
    for x in ln_e.iter_mut() {
        *x -= top;
    }
    e.clear();
    e.extend(ln_e.iter().map(|x| x.exp()));
}

/// The first pass of the E-step for pair `d`: the posteriors of its tokens
/// (projected for CPLSA), its expected topic counts, `r = n / Σ_z q̃` per
/// token for the second pass, and its figures.
fn pair_e_step(
    d: usize,
    out: PairOut<'_>,
    corpus: &Corpus<'_>,
    st: &EmState,
    pr: Option<PrConfig>,
    sc: &mut Scratch,
) -> PairStats {
    let k = st.k;
    let th = &st.theta[d * k..(d + 1) * k];
    let mut ps = PairStats::default();
    let len = [0, 1].map(|l| corpus.sides[l].len[d]);
    for l in 0..2 {
        let (idx, val) = corpus.sides[l].rows.row(d);
        let p = &mut sc.p[l];
        p.clear();
        p.resize(idx.len() * k, 0.0);
        let s = &mut sc.s[l];
        s.clear();
        for ((&w, &c), pi) in idx.iter().zip(val).zip(p.chunks_mut(k)) {
            let phi_w = &st.phi[l][w as usize * k..(w as usize + 1) * k];
            let mut sum = 0.0;
            for ((pz, t), f) in pi.iter_mut().zip(th).zip(phi_w) {
                *pz = t * f;
                sum += *pz;
            }
            s.push(sum);
            if c > 0.0 {
                // a token the model gives no probability: −∞, reported as a
                // non-finite loss (the runner fails the job)
                ps.loglik += f64::from(c) * sum.ln();
            }
        }
        sc.m[l].resize(k, 0.0);
    }
    ps.both = len[0] > 0.0 && len[1] > 0.0;
    // CPLSA: proximal gradient ascent on the dual of
    //   min KL(q ‖ p)  s.t. |E_q[frac_src(z)] − E_q[frac_tgt(z)]| ≤ ε ∀z,
    // q_src ∝ p·exp(−λ/N_src), q_tgt ∝ p·exp(+λ/N_tgt), step 1/L with
    // L = (1/N_src + 1/N_tgt)/2 bounding the dual's curvature.
    let project = pr.filter(|c| c.steps > 0 && ps.both);
    if let Some(c) = project {
        sc.lam.clear();
        sc.lam.resize(k, 0.0);
        let eta = 2.0 * len[0] * len[1] / (len[0] + len[1]);
        for _ in 0..c.steps {
            for (l, sign) in [(0, -1.0), (1, 1.0)] {
                weights(&sc.lam, sign, len[l], &mut sc.ln_e[l], &mut sc.e[l]);
                let val = corpus.sides[l].rows.row(d).1;
                expected(
                    &sc.p[l],
                    &sc.s[l],
                    val,
                    Some(&sc.e[l]),
                    k,
                    &mut sc.m[l],
                    None,
                );
            }
            for z in 0..k {
                let g = sc.m[0][z] / len[0] - sc.m[1][z] / len[1];
                sc.lam[z] = soft_threshold(sc.lam[z] + eta * g, eta * c.epsilon);
            }
        }
        for (l, sign) in [(0, -1.0), (1, 1.0)] {
            weights(&sc.lam, sign, len[l], &mut sc.ln_e[l], &mut sc.e[l]);
        }
    }
    let PairOut { acc, r, eff } = out;
    let [r0, r1] = r;
    for (l, rl) in [(0, r0), (1, r1)] {
        let val = corpus.sides[l].rows.row(d).1;
        let e = project.map(|_| sc.e[l].as_slice());
        ps.kl += expected(&sc.p[l], &sc.s[l], val, e, k, &mut sc.m[l], Some(rl));
        if project.is_some() {
            // Σ_z m_z ln e_z: with the ratio above, Σ_i n_i KL(q_i ‖ p_i)
            ps.kl += sc.m[l]
                .iter()
                .zip(&sc.ln_e[l])
                .map(|(m, le)| if *m > 0.0 { m * le } else { 0.0 })
                .sum::<f64>();
        }
    }
    for (a, (m0, m1)) in acc.iter_mut().zip(sc.m[0].iter().zip(&sc.m[1])) {
        *a = m0 + m1;
    }
    if let Some([e0, e1]) = eff {
        for (l, el) in [(0, e0), (1, e1)] {
            match project {
                Some(_) => {
                    for ((x, t), e) in el.iter_mut().zip(th).zip(&sc.e[l]) {
                        *x = t * e;
                    }
                }
                None => el.copy_from_slice(th),
            }
        }
    }
    if ps.both {
        let mut tv = 0.0;
        let mut top = 0.0f64;
        for z in 0..k {
            let g = (sc.m[0][z] / len[0] - sc.m[1][z] / len[1]).abs();
            tv += g;
            top = top.max(g);
        }
        ps.tv = 0.5 * tv;
        ps.violation = (top - pr.map_or(0.0, |c| c.epsilon)).max(0.0);
    }
    ps
}

/// The E-step at `st`: posteriors of every token (projected onto CPLSA's
/// constraint when `pr` is given), as expected counts per pair and per
/// (term, topic), and the log-likelihood of `st`.
fn e_step(corpus: &Corpus<'_>, st: &EmState, pr: Option<PrConfig>) -> EStats {
    let (k, n) = (st.k, corpus.pairs);
    let mut theta_acc = vec![0.0; n * k];
    let mut r = [0, 1].map(|l| vec![0.0; corpus.sides[l].rows.nnz()]);
    let mut eff: Option<[Vec<f64>; 2]> = pr.map(|_| [vec![0.0; n * k], vec![0.0; n * k]]);
    let per_pair: Vec<PairStats> = {
        let [r0, r1] = &mut r;
        let r0 = split_by(r0, &corpus.sides[0].rows.indptr);
        let r1 = split_by(r1, &corpus.sides[1].rows.indptr);
        let mut eff_rows: Vec<Option<[&mut [f64]; 2]>> = match eff.as_mut() {
            Some([e0, e1]) => e0
                .chunks_mut(k)
                .zip(e1.chunks_mut(k))
                .map(|(a, b)| Some([a, b]))
                .collect(),
            None => (0..n).map(|_| None).collect(),
        };
        let outs: Vec<PairOut<'_>> = theta_acc
            .chunks_mut(k)
            .zip(r0.into_iter().zip(r1))
            .zip(eff_rows.drain(..))
            .map(|((acc, (a, b)), eff)| PairOut {
                acc,
                r: [a, b],
                eff,
            })
            .collect();
        outs.into_par_iter()
            .enumerate()
            .map_init(Scratch::default, |sc, (d, out)| {
                pair_e_step(d, out, corpus, st, pr, sc)
            })
            .collect()
    };
    // second pass, per language and term: φ_acc[w] = φ_w ⊙ Σ_d r_dw θ̃_d
    let phi_acc = [0, 1].map(|l| {
        let side = &corpus.sides[l];
        let th: &[f64] = match &eff {
            Some(e) => &e[l],
            None => &st.theta,
        };
        let mut acc = vec![0.0; side.vocab() * k];
        acc.par_chunks_mut(k).enumerate().for_each(|(w, a)| {
            for j in side.col_ptr[w]..side.col_ptr[w + 1] {
                let d = side.col_row[j] as usize;
                let rv = r[l][side.col_pos[j]];
                for (x, t) in a.iter_mut().zip(&th[d * k..(d + 1) * k]) {
                    *x += rv * t;
                }
            }
            for (x, f) in a.iter_mut().zip(&st.phi[l][w * k..(w + 1) * k]) {
                *x *= f;
            }
        });
        acc
    });
    let mut s = EStats {
        theta_acc,
        phi_acc,
        loglik: 0.0,
        kl: 0.0,
        tv: 0.0,
        violation: 0.0,
        both: 0,
    };
    for p in &per_pair {
        s.loglik += p.loglik;
        s.kl += p.kl;
        s.tv += p.tv;
        s.violation += p.violation;
        s.both += usize::from(p.both);
    }
    s
}

/// The M-step: MAP θ and φ from the expected counts,
/// `θ_dz ∝ n_dz + α − 1` and `φ_zw ∝ n_zw + β − 1` (α, β ≥ 1, so no
/// pseudo-count is negative). A pair with no token keeps a uniform θ; a
/// topic with no expected token (possible only with β = 1) keeps its φ.
fn m_step(stats: &EStats, prev: &EmState, alpha: f64, beta: f64) -> EmState {
    let k = prev.k;
    let mut theta = stats.theta_acc.clone();
    theta.par_chunks_mut(k).for_each(|row| {
        let denom: f64 = row.iter().sum::<f64>() + k as f64 * (alpha - 1.0);
        if denom > 0.0 {
            for x in row.iter_mut() {
                *x = (*x + alpha - 1.0) / denom;
            }
        } else {
            row.fill(1.0 / k as f64);
        }
    });
    let phi = [0, 1].map(|l| {
        let acc = &stats.phi_acc[l];
        let v = acc.len() / k;
        let mut col = vec![0.0; k];
        for row in acc.chunks(k) {
            for (c, x) in col.iter_mut().zip(row) {
                *c += x;
            }
        }
        let denom: Vec<f64> = col.iter().map(|c| c + v as f64 * (beta - 1.0)).collect();
        let mut phi = acc.clone();
        phi.par_chunks_mut(k)
            .zip(prev.phi[l].par_chunks(k))
            .for_each(|(row, old)| {
                for ((x, dz), o) in row.iter_mut().zip(&denom).zip(old) {
                    *x = if *dz > 0.0 {
                        (*x + beta - 1.0) / dz
                    } else {
                        *o
                    };
                }
            });
        phi
    });
    EmState { k, theta, phi }
}

/// `Σ ln x` of every entry, row by row in parallel, summed in row order.
fn sum_ln(v: &[f64], k: usize) -> f64 {
    let rows: Vec<f64> = v
        .par_chunks(k)
        .map(|r| r.iter().map(|x| x.ln()).sum::<f64>())
        .collect();
    rows.iter().sum()
}

/// The log prior of `st` (Dirichlet normalisers dropped):
/// `(α−1) Σ_d Σ_z ln θ_dz + (β−1) Σ_L Σ_z Σ_w ln φ^L_zw`; a factor of 0
/// (α or β = 1) drops its sum.
fn log_prior(st: &EmState, alpha: f64, beta: f64) -> f64 {
    let mut lp = 0.0;
    if alpha > 1.0 {
        lp += (alpha - 1.0) * sum_ln(&st.theta, st.k);
    }
    if beta > 1.0 {
        lp += (beta - 1.0) * (sum_ln(&st.phi[0], st.k) + sum_ln(&st.phi[1], st.k));
    }
    lp
}

/// The figures of one EM iteration, for the step record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IterationReport {
    /// `Σ n log p(w | d)` per training token.
    pub loglik: f64,
    /// The log prior per token.
    pub log_prior: f64,
    /// `Σ_d KL(q_d ‖ p_d)` per token of CPLSA's projected posteriors (0 for JPLSA).
    pub kl: f64,
    /// Mean over pairs of the total-variation distance between the two
    /// sides' expected topic fractions.
    pub topic_tv: f64,
    /// Mean over pairs of `max(0, max_z |frac_src(z) − frac_tgt(z)| − ε)`
    /// (ε = 0 for JPLSA).
    pub violation: f64,
}

impl IterationReport {
    fn new(stats: &EStats, st: &EmState, cfg: &PlsaConfig, tokens: f64) -> Self {
        let both = stats.both.max(1) as f64;
        IterationReport {
            loglik: stats.loglik / tokens,
            log_prior: log_prior(st, cfg.alpha, cfg.beta) / tokens,
            kl: stats.kl / tokens,
            topic_tv: stats.tv / both,
            violation: stats.violation / both,
        }
    }

    /// The objective per token EM maximises: the log posterior
    /// `loglik + log_prior`, less `kl` for CPLSA (the posterior-regularised
    /// objective at the projected posteriors).
    pub fn objective(&self) -> f64 {
        self.loglik + self.log_prior - self.kl
    }

    fn parts(&self, cplsa: bool) -> Vec<(String, f64)> {
        let mut v = vec![
            ("loglik".to_string(), self.loglik),
            ("log_prior".to_string(), self.log_prior),
            ("perplexity".to_string(), (-self.loglik).exp()),
            ("topic_tv".to_string(), self.topic_tv),
        ];
        if cplsa {
            v.push(("kl_pr".to_string(), self.kl));
            v.push(("violation".to_string(), self.violation));
        }
        v
    }
}

/// EM on a bilingual corpus, one iteration at a time: the state after an
/// iteration and the E-step at that state (whose figures are the
/// iteration's). What the trainer drives; public for tests and tools.
pub struct Em<'a> {
    kind: &'static str,
    corpus: Corpus<'a>,
    cfg: PlsaConfig,
    state: EmState,
    stats: EStats,
    /// Iterations done.
    pub iteration: usize,
}

impl<'a> Em<'a> {
    /// EM of `kind` (`jplsa`, `cplsa`) on aligned count matrices, from the
    /// seeded start (`resume = None`) or from a checkpoint's extra tensors
    /// after `iteration` iterations; runs the E-step of that state.
    pub fn new(
        kind: &'static str,
        src: &'a CsrMatrix,
        tgt: &'a CsrMatrix,
        cfg: PlsaConfig,
        seed: u64,
        resume: Option<(usize, &HashMap<String, Tensor>)>,
    ) -> Result<Self> {
        cfg.check(kind)?;
        let corpus = Corpus::new(kind, src, tgt)?;
        let (state, iteration) = match resume {
            Some((it, t)) => (EmState::from_tensors(kind, t, &corpus, cfg.topics)?, it),
            None => (EmState::init(&corpus, cfg.topics, seed), 0),
        };
        let stats = e_step(&corpus, &state, cfg.pr);
        Ok(Em {
            kind,
            corpus,
            cfg,
            state,
            stats,
            iteration,
        })
    }

    /// One iteration: M-step from the last E-step, then the E-step at the
    /// new state. Returns the new state's figures.
    pub fn iterate(&mut self) -> IterationReport {
        self.state = m_step(&self.stats, &self.state, self.cfg.alpha, self.cfg.beta);
        self.stats = e_step(&self.corpus, &self.state, self.cfg.pr);
        self.iteration += 1;
        self.report()
    }

    /// The figures of the current state.
    pub fn report(&self) -> IterationReport {
        IterationReport::new(&self.stats, &self.state, &self.cfg, self.corpus.tokens)
    }

    /// The current state.
    pub fn state(&self) -> &EmState {
        &self.state
    }

    /// Training tokens (both languages).
    pub fn tokens(&self) -> f64 {
        self.corpus.tokens
    }

    /// The model of the current state: its φ (f32), and the topics' shares
    /// of the training tokens under the current E-step as `p(z)`.
    pub fn model(&self) -> Result<PlsaModel> {
        let k = self.state.k;
        let mut nz = vec![0.0f64; k];
        for acc in &self.stats.phi_acc {
            for row in acc.chunks(k) {
                for (a, x) in nz.iter_mut().zip(row) {
                    *a += x;
                }
            }
        }
        let total: f64 = nz.iter().sum();
        let prior: Vec<f32> = nz.iter().map(|x| (x / total) as f32).collect();
        let to32 = |v: &Vec<f64>| {
            Array2::from_shape_vec((v.len() / k, k), v.iter().map(|&x| x as f32).collect())
                .map_err(|e| Error::invalid(e.to_string()))
        };
        PlsaModel::new(
            self.kind,
            to32(&self.state.phi[0])?,
            to32(&self.state.phi[1])?,
            prior,
            self.cfg.fold_in_alpha,
            self.cfg.fold_in,
        )
    }
}

// ------------------------------------------------------------------ model

/// A trained JPLSA or CPLSA model: each language's φ and the topic shares.
#[derive(Debug, Clone)]
pub struct PlsaModel {
    kind: &'static str,
    /// Source φ, term-major `V_s × K`.
    phi_src: Array2<f32>,
    /// Target φ, term-major `V_t × K`.
    phi_tgt: Array2<f32>,
    /// `p(z)`, the topics' shares of the training tokens.
    prior: Vec<f32>,
    alpha: f64,
    fold_in: usize,
}

impl PlsaModel {
    /// A model from term-major φ (`V × K` per language, each column a
    /// distribution over the vocabulary) and `p(z)`; errors on shapes that
    /// do not agree, values that are not probabilities, or columns or a
    /// prior that do not sum to 1 (within 1e-3).
    pub fn new(
        kind: &'static str,
        phi_src: Array2<f32>,
        phi_tgt: Array2<f32>,
        prior: Vec<f32>,
        alpha: f64,
        fold_in: usize,
    ) -> Result<Self> {
        let k = prior.len();
        if k == 0 || phi_src.ncols() != k || phi_tgt.ncols() != k {
            return Err(Error::invalid(format!(
                "{kind}: φ has {} (source) and {} (target) topics, the topic prior {k}; \
                 all must agree and be > 0",
                phi_src.ncols(),
                phi_tgt.ncols()
            )));
        }
        for (name, phi) in [(PHI_SOURCE, &phi_src), (PHI_TARGET, &phi_tgt)] {
            if let Some(x) = phi.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                return Err(Error::invalid(format!(
                    "{kind}: `{name}` holds {x}, not a probability"
                )));
            }
            for (z, col) in phi.columns().into_iter().enumerate() {
                let s: f64 = col.iter().map(|&x| f64::from(x)).sum();
                if (s - 1.0).abs() > 1e-3 {
                    return Err(Error::invalid(format!(
                        "{kind}: `{name}` topic {z} sums to {s}, not to 1"
                    )));
                }
            }
        }
        let s: f64 = prior.iter().map(|&x| f64::from(x)).sum();
        if prior.iter().any(|x| !(x.is_finite() && *x >= 0.0)) || (s - 1.0).abs() > 1e-3 {
            return Err(Error::invalid(format!(
                "{kind}: `{TOPIC_PRIOR}` is not a distribution (sum {s})"
            )));
        }
        if !(alpha.is_finite() && alpha >= 1.0) || fold_in == 0 {
            return Err(Error::invalid(format!(
                "{kind}: folding in needs alpha ≥ 1 and fold_in ≥ 1 (got {alpha}, {fold_in})"
            )));
        }
        Ok(PlsaModel {
            kind,
            phi_src,
            phi_tgt,
            prior,
            alpha,
            fold_in,
        })
    }

    /// Rebuilds a model from checkpoint tensors (`phi.source` `K × V_s`,
    /// `phi.target` `K × V_t`, `topic.prior` `K`), checked against `vocabs`.
    pub fn from_tensors(
        kind: &'static str,
        vocabs: &Vocabs,
        tensors: &HashMap<String, Tensor>,
        alpha: f64,
        fold_in: usize,
    ) -> Result<Self> {
        let phi = |name: &str, v: usize| -> Result<Array2<f32>> {
            let (shape, data) = tensor_f64(kind, tensors, name)?;
            if shape.len() != 2 || shape[1] != v {
                return Err(Error::invalid(format!(
                    "{kind}: checkpoint tensor `{name}` has shape {shape:?}, expected \
                     [topics, {v}] for this vocabulary (a checkpoint from another workspace?)"
                )));
            }
            let a = Array2::from_shape_vec(
                (shape[0], shape[1]),
                data.iter().map(|&x| x as f32).collect(),
            )
            .map_err(|e| Error::invalid(e.to_string()))?;
            Ok(a.t().as_standard_layout().into_owned())
        };
        let ps = phi(PHI_SOURCE, vocabs.source.len())?;
        let pt = phi(PHI_TARGET, vocabs.target.len())?;
        let (shape, prior) = tensor_f64(kind, tensors, TOPIC_PRIOR)?;
        if shape.len() != 1 {
            return Err(Error::invalid(format!(
                "{kind}: checkpoint tensor `{TOPIC_PRIOR}` has shape {shape:?}, expected [topics]"
            )));
        }
        let prior = prior.iter().map(|&x| x as f32).collect();
        PlsaModel::new(kind, ps, pt, prior, alpha, fold_in)
    }

    fn phi(&self, side: Side) -> &Array2<f32> {
        match side {
            Side::Source => &self.phi_src,
            Side::Target => &self.phi_tgt,
        }
    }

    /// `p(z)`.
    pub fn prior(&self) -> &[f32] {
        &self.prior
    }

    /// θ of texts by folding in: EM on θ alone with φ fixed, `iterations`
    /// times from uniform, `θ_z ∝ θ_z Σ_w n_w φ_zw / Σ_z' θ_z' φ_z'w + α − 1`.
    /// Row `i` of every matrix given is one text (a pair gives both of its
    /// sides). A text with no token the model knows (every φ of its terms
    /// zero) gets a zero row. Errors on counts over another vocabulary,
    /// unequal row counts, or counts that are not finite and ≥ 0.
    pub fn fold_in(&self, texts: &[(Side, &CsrMatrix)], iterations: usize) -> Result<Array2<f64>> {
        let k = self.prior.len();
        let n = texts.first().map_or(0, |(_, c)| c.n_rows());
        for (side, c) in texts {
            let v = self.phi(*side).nrows();
            if c.n_cols != v {
                return Err(Error::invalid(format!(
                    "{}: texts counted over {} terms, the model's {side:?} vocabulary has {v}",
                    self.kind, c.n_cols
                )));
            }
            if c.n_rows() != n {
                return Err(Error::invalid(format!(
                    "{}: {n} and {} texts given to fold in together",
                    self.kind,
                    c.n_rows()
                )));
            }
            if let Some(x) = c.values.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                return Err(Error::invalid(format!(
                    "{}: a text's count is {x} (counts must be finite and ≥ 0)",
                    self.kind
                )));
            }
        }
        let mut out = Array2::<f64>::zeros((n, k));
        let a1 = self.alpha - 1.0;
        out.as_slice_mut()
            .expect("standard layout")
            .par_chunks_mut(k)
            .enumerate()
            .for_each_init(
                || (vec![0.0f64; k], Vec::<(&[f32], f64)>::new()),
                |(t, toks), (i, theta)| {
                    toks.clear();
                    for (side, c) in texts {
                        let phi = self.phi(*side);
                        let (idx, val) = c.row(i);
                        for (&w, &x) in idx.iter().zip(val) {
                            let row = phi.row(w as usize).to_slice().expect("standard layout");
                            if x > 0.0 && row.iter().any(|&f| f > 0.0) {
                                toks.push((row, f64::from(x)));
                            }
                        }
                    }
                    if toks.is_empty() {
                        return;
                    }
                    theta.fill(1.0 / k as f64);
                    for _ in 0..iterations {
                        t.fill(0.0);
                        for (row, c) in toks.iter() {
                            let s: f64 =
                                theta.iter().zip(*row).map(|(a, &b)| a * f64::from(b)).sum();
                            if s > 0.0 {
                                let r = c / s;
                                for (tz, &f) in t.iter_mut().zip(*row) {
                                    *tz += r * f64::from(f);
                                }
                            }
                        }
                        let mut sum = 0.0;
                        for (x, tz) in theta.iter_mut().zip(t.iter()) {
                            *x = *x * tz + a1;
                            sum += *x;
                        }
                        for x in theta.iter_mut() {
                            *x /= sum;
                        }
                    }
                },
            );
        Ok(out)
    }
}

impl Model for PlsaModel {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn dim(&self) -> usize {
        self.prior.len()
    }

    /// θ folded in over `fold_in` iterations: rows sum to 1; a text with no
    /// known term is a zero row.
    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>> {
        Ok(self
            .fold_in(&[(side, counts)], self.fold_in)?
            .mapv(|x| x as f32))
    }

    /// `p(z | w) ∝ φ_zw · p(z)` for every term; a term no topic generates is
    /// a zero row.
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        let mut out = self.phi(side).to_owned();
        for mut row in out.rows_mut() {
            let mut s = 0.0f64;
            for (x, p) in row.iter_mut().zip(&self.prior) {
                *x *= p;
                s += f64::from(*x);
            }
            if s > 0.0 {
                row.mapv_inplace(|x| (f64::from(x) / s) as f32);
            }
        }
        Ok(out)
    }

    fn similarity(&self) -> Similarity {
        Similarity::JensenShannon
    }

    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let t = |a: &Array2<f32>| -> Result<Tensor> {
            let kv = a.t().as_standard_layout().into_owned();
            let dims = kv.dim();
            Ok(Tensor::from_vec(
                kv.into_raw_vec_and_offset().0,
                dims,
                &Device::Cpu,
            )?)
        };
        Ok(vec![
            (PHI_SOURCE.to_string(), t(&self.phi_src)?),
            (PHI_TARGET.to_string(), t(&self.phi_tgt)?),
            (
                TOPIC_PRIOR.to_string(),
                Tensor::from_vec(self.prior.clone(), self.prior.len(), &Device::Cpu)?,
            ),
        ])
    }
}

/// A checkpoint tensor's shape and values as f64.
fn tensor_f64(
    kind: &str,
    tensors: &HashMap<String, Tensor>,
    name: &str,
) -> Result<(Vec<usize>, Vec<f64>)> {
    let t = tensors
        .get(name)
        .ok_or_else(|| Error::invalid(format!("{kind} checkpoint has no tensor `{name}`")))?;
    let v = t
        .to_device(&Device::Cpu)?
        .to_dtype(DType::F64)?
        .flatten_all()?
        .to_vec1::<f64>()?;
    Ok((t.dims().to_vec(), v))
}

// ------------------------------------------------------------------ trainer

/// Trains and reloads JPLSA or CPLSA models.
#[derive(Debug, Clone, Copy)]
pub struct PlsaTrainer {
    kind: &'static str,
}

/// The JPLSA trainer, boxed for the model registry.
pub fn jplsa_trainer() -> Box<dyn Trainer> {
    Box::new(PlsaTrainer { kind: JPLSA })
}

/// The CPLSA trainer, boxed for the model registry.
pub fn cplsa_trainer() -> Box<dyn Trainer> {
    Box::new(PlsaTrainer { kind: CPLSA })
}

impl Trainer for PlsaTrainer {
    /// Reads and checks the settings before the session is written.
    fn check(&self, params: &Params) -> Result<()> {
        PlsaConfig::from_params(self.kind, params).map(|_| ())
    }

    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let epochs = PlsaConfig::from_params(self.kind, params)?.epochs;
        Ok(vec![Phase::new(PHASE, epochs, data.train_src.n_rows())])
    }

    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        _device: &Device,
        seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> Result<Box<dyn Model>> {
        let kind = self.kind;
        let cfg = PlsaConfig::from_params(kind, params)?;
        params.check_unused()?;
        data.check_shapes(kind)?;
        check_fit_sizes(kind, data, cfg.topics)?;
        if let Some(r) = &resume {
            if r.phase != PHASE {
                return Err(Error::invalid(format!(
                    "{kind}: cannot resume from phase {:?} (expected {PHASE})",
                    r.phase
                )));
            }
        }
        let t0 = std::time::Instant::now();
        let mut em = Em::new(
            kind,
            &data.train_src,
            &data.train_tgt,
            cfg.clone(),
            seed,
            resume.as_ref().map(|r| (r.epoch, &r.tensors)),
        )?;
        let (k, n) = (cfg.topics, data.train_src.n_rows());
        let (vs, vt) = (data.vocabs.source.len(), data.vocabs.target.len());
        let nnz = data.train_src.nnz() + data.train_tgt.nnz();
        let state_mb = ((n + vs + vt) * k * 8) as f64 / 1e6;
        let start = em.report();
        hooks.log(&format!(
            "{kind}: {k} topics, {n} pairs, {} tokens, vocab {vs}/{vt}, {nnz} non-zeros; \
             EM state {state_mb:.1} MB (f64); E-step of the {} state in {:.1}s: \
             objective {:.4}/token, perplexity {:.1}",
            em.tokens(),
            if resume.is_some() {
                "resumed"
            } else {
                "seeded start"
            },
            t0.elapsed().as_secs_f64(),
            start.objective(),
            (-start.loglik).exp()
        ));
        let mut model = em.model()?;
        while em.iteration < cfg.epochs {
            hooks.epoch_start(PHASE, em.iteration + 1);
            let rep = em.iterate();
            let epoch = em.iteration;
            model = em.model()?;
            let flow = hooks.step(&StepReport {
                phase: PHASE.to_string(),
                epoch,
                step: epoch,
                loss: -rep.objective(),
                examples: n,
                parts: rep.parts(cfg.pr.is_some()),
            })?;
            // the iteration is complete: checkpoint it even when a cancel
            // came with its step
            let end = hooks.epoch_end(PHASE, epoch, &model, em.state().tensors()?)?;
            if flow == Flow::Stop || end == Flow::Stop {
                break;
            }
        }
        Ok(Box::new(model))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        params: &Params,
        _device: &Device,
    ) -> Result<Box<dyn Model>> {
        let PlsaConfig {
            fold_in_alpha: alpha,
            fold_in,
            ..
        } = PlsaConfig::from_params(self.kind, params)?;
        Ok(Box::new(PlsaModel::from_tensors(
            self.kind, vocabs, &tensors, alpha, fold_in,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` pairs over `v` terms per language in `topics` blocks: a pair picks
    /// one block and draws 3–8 tokens from it on each side (target term
    /// `w` translates source term `w`).
    fn corpus(n: usize, v: usize, topics: usize, seed: u64) -> (CsrMatrix, CsrMatrix) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let block = v / topics;
        let (mut s, mut t) = (CsrMatrix::new(v), CsrMatrix::new(v));
        for _ in 0..n {
            let b = rng.random_range(0..topics);
            for m in [&mut s, &mut t] {
                let len = rng.random_range(3..=8);
                let row: Vec<(u32, f32)> = (0..len)
                    .map(|_| ((b * block + rng.random_range(0..block)) as u32, 1.0))
                    .collect();
                m.push_row(row);
            }
        }
        (s, t)
    }

    fn cfg(k: usize, pr: Option<PrConfig>) -> PlsaConfig {
        PlsaConfig {
            topics: k,
            alpha: 1.1,
            beta: 1.01,
            epochs: 30,
            fold_in: 10,
            fold_in_alpha: 1.001,
            pr,
        }
    }

    #[test]
    fn em_objective_never_decreases_and_state_stays_distributions() {
        let (s, t) = corpus(80, 40, 4, 1);
        let mut em = Em::new(JPLSA, &s, &t, cfg(6, None), 3, None).unwrap();
        let mut last = em.report().objective();
        for _ in 0..40 {
            let o = em.iterate().objective();
            assert!(o >= last - 1e-12 * last.abs(), "{last} -> {o}");
            last = o;
        }
        let st = em.state();
        for row in st.theta.chunks(6) {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
        for phi in &st.phi {
            let mut col = [0.0; 6];
            for row in phi.chunks(6) {
                for (c, x) in col.iter_mut().zip(row) {
                    *c += x;
                }
            }
            assert!(col.iter().all(|c| (c - 1.0).abs() < 1e-9), "{col:?}");
        }
    }

    #[test]
    fn the_e_step_counts_every_token_once() {
        let (s, t) = corpus(30, 20, 2, 2);
        for pr in [
            None,
            Some(PrConfig {
                epsilon: 0.0,
                steps: 5,
            }),
        ] {
            let em = Em::new(CPLSA, &s, &t, cfg(3, pr), 1, None).unwrap();
            let a: f64 = em.stats.theta_acc.iter().sum();
            let b: f64 = em.stats.phi_acc.iter().flatten().sum();
            assert!((a - em.tokens()).abs() < 1e-9 * a, "{a} {}", em.tokens());
            assert!((b - em.tokens()).abs() < 1e-9 * b, "{b}");
            // per pair: the pair's tokens
            for (d, row) in em.stats.theta_acc.chunks(3).enumerate() {
                let want = em.corpus.sides[0].len[d] + em.corpus.sides[1].len[d];
                assert!((row.iter().sum::<f64>() - want).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn cplsa_without_dual_steps_is_jplsa_bit_for_bit() {
        let (s, t) = corpus(50, 30, 3, 4);
        let mut a = Em::new(JPLSA, &s, &t, cfg(4, None), 9, None).unwrap();
        let pr = PrConfig {
            epsilon: 0.05,
            steps: 0,
        };
        let mut b = Em::new(CPLSA, &s, &t, cfg(4, Some(pr)), 9, None).unwrap();
        for _ in 0..5 {
            let (ra, rb) = (a.iterate(), b.iterate());
            assert_eq!(ra.loglik.to_bits(), rb.loglik.to_bits());
        }
        assert_eq!(a.state(), b.state());
    }

    /// The projection of one pair: the dual ascent brings the two sides'
    /// expected topic fractions within ε as the steps grow, and the gap
    /// shrinks with more steps.
    #[test]
    fn the_projection_closes_the_gap() {
        let (s, t) = corpus(40, 30, 3, 5);
        let mut em = Em::new(JPLSA, &s, &t, cfg(5, None), 2, None).unwrap();
        for _ in 0..5 {
            em.iterate();
        }
        let state = em.state().clone();
        let corpus = Corpus::new(CPLSA, &s, &t).unwrap();
        let gap = |steps: usize, eps: f64| {
            let st = e_step(
                &corpus,
                &state,
                Some(PrConfig {
                    epsilon: eps,
                    steps,
                }),
            );
            (st.violation / st.both as f64, st.kl)
        };
        let (g0, kl0) = gap(0, 0.0);
        assert!(g0 > 0.01, "JPLSA's posteriors already agree ({g0})");
        assert_eq!(kl0, 0.0);
        let mut last = g0;
        for steps in [1, 4, 16, 64, 256] {
            let (g, kl) = gap(steps, 0.0);
            assert!(g < last, "{steps} steps: {g} not below {last}");
            assert!(kl > 0.0);
            last = g;
        }
        assert!(last < 0.02 * g0, "{last} vs {g0}");
        // a loose ε is met at once
        let (g, _) = gap(256, 0.2);
        assert!(g < 1e-3, "{g}");
    }

    #[test]
    fn fold_in_and_term_vectors_are_distributions() {
        let (s, t) = corpus(60, 30, 3, 6);
        let mut em = Em::new(JPLSA, &s, &t, cfg(3, None), 2, None).unwrap();
        for _ in 0..10 {
            em.iterate();
        }
        let m = em.model().unwrap();
        let mut q = CsrMatrix::new(30);
        q.push_row([(0, 2.0), (1, 1.0)]);
        q.push_row([]);
        let e = m.encode(Side::Source, &q).unwrap();
        assert!((e.row(0).sum() - 1.0).abs() < 1e-5);
        assert!(e.row(0).iter().all(|&x| x >= 0.0));
        assert!(e.row(1).iter().all(|&x| x == 0.0));
        let tv = m.term_vectors(Side::Target).unwrap();
        for r in tv.rows() {
            assert!((r.sum() - 1.0).abs() < 1e-5);
        }
        // bad input
        let mut bad = CsrMatrix::new(31);
        bad.push_row([(0, 1.0)]);
        assert!(m.encode(Side::Source, &bad).is_err());
        let mut nan = CsrMatrix::new(30);
        nan.push_row([(0, f32::NAN)]);
        assert!(m
            .encode(Side::Source, &nan)
            .unwrap_err()
            .to_string()
            .contains("NaN"));
        // the checkpoint round trip
        let map: HashMap<String, Tensor> = m.tensors().unwrap().into_iter().collect();
        assert_eq!(map[PHI_SOURCE].dims(), &[3, 30]);
        let vocabs = Vocabs {
            source: crate::text::Vocabulary::from_parts(
                "en",
                (0..30).map(|i| format!("s{i}")).collect(),
                vec![1; 30],
                1,
            ),
            target: crate::text::Vocabulary::from_parts(
                "es",
                (0..30).map(|i| format!("t{i}")).collect(),
                vec![1; 30],
                1,
            ),
        };
        let back = PlsaModel::from_tensors(JPLSA, &vocabs, &map, 1.001, 10).unwrap();
        assert_eq!(back.encode(Side::Source, &q).unwrap(), e);
        let mut short = map.clone();
        short.insert(
            PHI_TARGET.into(),
            Tensor::zeros((3, 29), DType::F32, &Device::Cpu).unwrap(),
        );
        let err = PlsaModel::from_tensors(JPLSA, &vocabs, &short, 1.1, 10).unwrap_err();
        assert!(err.to_string().contains("phi.target"), "{err}");
    }

    #[test]
    fn bad_training_input_is_an_error() {
        let (s, mut t) = corpus(10, 10, 2, 7);
        t.values[0] = f32::INFINITY;
        let e = Em::new(JPLSA, &s, &t, cfg(2, None), 1, None).err().unwrap();
        assert!(e.to_string().contains("inf"), "{e}");
        let empty = CsrMatrix {
            n_cols: 10,
            indptr: vec![0; 11],
            indices: vec![],
            values: vec![],
        };
        let e = Em::new(JPLSA, &s, &empty, cfg(2, None), 1, None)
            .err()
            .unwrap();
        assert!(e.to_string().contains("no token"), "{e}");
        let mut c = cfg(2, None);
        c.alpha = 0.5;
        let e = Em::new(JPLSA, &s, &s, c, 1, None).err().unwrap();
        assert!(e.to_string().contains("alpha"), "{e}");
    }
}
