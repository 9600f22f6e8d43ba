//! Fusing a model's ranking with a lexical one (BM25 over translated
//! queries): normalised linear fusion (CombSUM with weight λ on the lexical
//! side) and reciprocal rank fusion (Cormack et al. 2009, k = 60).
//!
//! Seed 004 (Kim, Nam and Gurevych, COLING 2012) fuses in two steps: the
//! model's score is itself a mix of the source query's ranking and its
//! translation's, both by the model (Eq. 1: `β · n(model(q_src)) + (1 − β) ·
//! n(model(q_tgt))`, [`combine_model`]), and that is mixed with BM25 over the
//! translated query (Eq. 2: `λ · n(BM25) + (1 − λ) · n(model)`), λ on a 0.05
//! grid and β on a 0.1 grid chosen together on development queries
//! ([`tune_beta_lambda`]). The paper's `n` divides by the list's largest score
//! ([`Norm::Max`]); this crate's default is min-max ([`Norm::MinMax`]), under
//! which β = 1 is the model alone and the fusion of earlier figures.
//!
//! One code path for the workbench's search screen, `rosetta search --fuse`
//! and `rosetta eval --fuse`. Lists are `(document id, score)` pairs; fused
//! lists come out in the evaluator's order (score descending, ties by
//! document id descending), so a fused run scores exactly as trec_eval
//! would score it.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::eval::metrics::{evaluate_rankings, Metric, Metrics};
use crate::eval::trec::{sorted_for_eval, Qrels, Run};
use crate::Error;

/// RRF's rank constant (Cormack, Clarke and Büttcher 2009).
pub const RRF_K: f64 = 60.0;

/// λ values tried when λ is chosen on validation queries.
pub const LAMBDA_GRID: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// λ values tried when β takes part (seed 004: 0 to 1 in steps of 0.05).
pub const LAMBDA_GRID_FINE: [f64; 21] = [
    0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8,
    0.85, 0.9, 0.95, 1.0,
];

/// β values tried (seed 004: 0 to 1 in steps of 0.1).
pub const BETA_GRID: [f64; 11] = LAMBDA_GRID;

/// How a list's scores are put on one scale before lists are mixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Norm {
    /// `(s − min) / (max − min)`: the list's best is 1, its worst 0 (all 1
    /// when every score is equal).
    #[default]
    MinMax,
    /// `s / max` (seed 004's "normalized with the maximum"): the best is 1.
    /// A list whose best score is 0 or below is divided by `|max|` (1 when
    /// the max is 0), which keeps its order.
    Max,
}

impl Norm {
    /// `minmax` or `max`.
    pub fn name(self) -> &'static str {
        match self {
            Norm::MinMax => "minmax",
            Norm::Max => "max",
        }
    }
}

impl FromStr for Norm {
    type Err = Error;

    /// `minmax` or `max`.
    fn from_str(s: &str) -> crate::Result<Norm> {
        match s.trim() {
            "minmax" => Ok(Norm::MinMax),
            "max" => Ok(Norm::Max),
            other => Err(Error::invalid(format!(
                "unknown score normalisation `{other}` (expected minmax or max)"
            ))),
        }
    }
}

/// How a model's ranking is combined with BM25's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// The model alone.
    Model,
    /// `λ · minmax(bm25) + (1 − λ) · minmax(model)`; a document missing from
    /// one list counts as that list's minimum.
    Linear {
        /// Weight of the BM25 side, 0 to 1.
        lambda: f64,
    },
    /// Reciprocal rank fusion, `Σ 1/(k + rank)` over the lists holding the document.
    Rrf {
        /// Rank constant.
        k: f64,
    },
}

impl Fusion {
    /// A short human label (`model only`, `BM25+dict λ=0.30`, `RRF k=60`).
    pub fn label(&self) -> String {
        match self {
            Fusion::Model => "model only".into(),
            Fusion::Linear { lambda } => format!("BM25+dict λ={lambda:.2}"),
            Fusion::Rrf { k } => format!("RRF k={k:.0}"),
        }
    }

    /// Whether BM25 takes part.
    pub fn uses_bm25(&self) -> bool {
        !matches!(self, Fusion::Model)
    }

    /// Checks the parameters (λ in [0, 1], k > 0).
    pub fn validate(&self) -> crate::Result<()> {
        match *self {
            Fusion::Linear { lambda } if !(0.0..=1.0).contains(&lambda) => Err(Error::invalid(
                format!("fusion weight λ={lambda} is outside 0..1"),
            )),
            Fusion::Rrf { k } if !(k > 0.0 && k.is_finite()) => Err(Error::invalid(format!(
                "RRF constant k={k} must be a positive number"
            ))),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Fusion {
    /// The spelling [`Fusion::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fusion::Model => write!(f, "none"),
            Fusion::Linear { lambda } => write!(f, "bm25:{lambda}"),
            Fusion::Rrf { k } => write!(f, "rrf:{k}"),
        }
    }
}

impl FromStr for Fusion {
    type Err = Error;

    /// `none`, `bm25:λ` (λ from 0 to 1), `rrf` or `rrf:K`.
    fn from_str(s: &str) -> crate::Result<Fusion> {
        let bad = |why: &str| {
            Error::invalid(format!(
                "fusion `{s}`: {why} (expected none, bm25:λ with λ in 0..1, rrf or rrf:K)"
            ))
        };
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (s.trim(), None),
        };
        let f = match (name, arg) {
            ("none" | "model", None) => Fusion::Model,
            ("bm25", Some(a)) => Fusion::Linear {
                lambda: a.parse().map_err(|_| bad("λ is not a number"))?,
            },
            ("bm25", None) => return Err(bad("bm25 needs a weight")),
            ("rrf", None) => Fusion::Rrf { k: RRF_K },
            ("rrf", Some(a)) => Fusion::Rrf {
                k: a.parse().map_err(|_| bad("k is not a number"))?,
            },
            _ => return Err(bad("unknown fusion")),
        };
        f.validate().map_err(|e| bad(&e.to_string()))?;
        Ok(f)
    }
}

/// Normalised scores of a list, and the value of a document it misses (and
/// of a non-finite score: a diverged model's): `min(0, lowest normalised
/// score)`, so such a document ranks at or below every listed one.
///
/// Min-max: when every score is equal (one document, say) all are the
/// list's best, 1, above the documents it misses; the floor is 0.
fn normalised(list: &[(String, f64)], norm: Norm) -> (HashMap<&str, f64>, f64) {
    let finite = || list.iter().map(|x| x.1).filter(|s| s.is_finite());
    let lo = finite().fold(f64::INFINITY, f64::min);
    let hi = finite().fold(f64::NEG_INFINITY, f64::max);
    let f = |s: f64| -> f64 {
        match norm {
            Norm::MinMax => {
                let span = hi - lo;
                if span > 0.0 {
                    (s - lo) / span
                } else {
                    1.0
                }
            }
            Norm::Max => {
                if hi != 0.0 {
                    s / hi.abs()
                } else {
                    s
                }
            }
        }
    };
    let floor = if lo.is_finite() { f(lo).min(0.0) } else { 0.0 };
    let map = list
        .iter()
        .map(|(d, s)| (d.as_str(), if s.is_finite() { f(*s) } else { floor }))
        .collect();
    (map, floor)
}

/// Seed 004's Eq. 1 for one query: `β · n(source) + (1 − β) · n(translated)`
/// over the documents of either list (one a list misses counts as its
/// floor, see [`Norm`]), in the evaluator's order. β = 1 returns `source`
/// as it is (the mix then is the model alone, whatever the normalisation).
pub fn combine_model(
    source: &[(String, f64)],
    translated: &[(String, f64)],
    beta: f64,
    norm: Norm,
) -> Vec<(String, f64)> {
    if beta == 1.0 {
        return source.to_vec();
    }
    let ((a, fa), (b, fb)) = (normalised(source, norm), normalised(translated, norm));
    let mut docs: Vec<&str> = a.keys().chain(b.keys()).copied().collect();
    docs.sort_unstable();
    docs.dedup();
    let mixed: Vec<(String, f64)> = docs
        .into_iter()
        .map(|d| {
            let s = beta * a.get(d).copied().unwrap_or(fa)
                + (1.0 - beta) * b.get(d).copied().unwrap_or(fb);
            (d.to_string(), s)
        })
        .collect();
    sorted_for_eval(&mixed)
}

/// [`combine_model`] query by query (queries of either run).
pub fn combine_model_runs(source: &Run, translated: &Run, beta: f64, norm: Norm) -> Run {
    let queries: BTreeSet<&String> = source
        .results
        .keys()
        .chain(translated.results.keys())
        .collect();
    let empty = Vec::new();
    let results = queries
        .into_iter()
        .map(|q| {
            let a = source.results.get(q).unwrap_or(&empty);
            let b = translated.results.get(q).unwrap_or(&empty);
            (q.clone(), combine_model(a, b, beta, norm))
        })
        .collect();
    Run {
        results,
        tag: source.tag.clone(),
    }
}

/// Fuses one query's model list with its BM25 list, in the evaluator's order.
/// The lists may hold different documents and be in any order; every document
/// of either list is in the result. Linear fusion normalises min-max.
pub fn fuse(model: &[(String, f64)], bm25: &[(String, f64)], fusion: Fusion) -> Vec<(String, f64)> {
    fuse_with(model, bm25, fusion, Norm::MinMax)
}

/// [`fuse`] with linear fusion normalising by `norm` (a document a list
/// misses counts as the list's floor, see [`Norm`]).
pub fn fuse_with(
    model: &[(String, f64)],
    bm25: &[(String, f64)],
    fusion: Fusion,
    norm: Norm,
) -> Vec<(String, f64)> {
    let mut fused: Vec<(String, f64)> = match fusion {
        Fusion::Model => model.to_vec(),
        Fusion::Linear { lambda } => {
            let ((m, fm), (b, fb)) = (normalised(model, norm), normalised(bm25, norm));
            let mut docs: Vec<&str> = m.keys().chain(b.keys()).copied().collect();
            docs.sort_unstable();
            docs.dedup();
            docs.into_iter()
                .map(|d| {
                    let s = lambda * b.get(d).copied().unwrap_or(fb)
                        + (1.0 - lambda) * m.get(d).copied().unwrap_or(fm);
                    (d.to_string(), s)
                })
                .collect()
        }
        Fusion::Rrf { k } => {
            let mut score: HashMap<&str, f64> = HashMap::new();
            for list in [model, bm25] {
                let mut order: Vec<&(String, f64)> = list.iter().collect();
                order.sort_by(|a, b| {
                    crate::eval::trec::rank_key(b.1)
                        .total_cmp(&crate::eval::trec::rank_key(a.1))
                        .then_with(|| b.0.cmp(&a.0))
                });
                for (r, (d, _)) in order.into_iter().enumerate() {
                    *score.entry(d.as_str()).or_default() += 1.0 / (k + (r + 1) as f64);
                }
            }
            score.into_iter().map(|(d, s)| (d.to_string(), s)).collect()
        }
    };
    fused = sorted_for_eval(&fused);
    fused
}

/// Fuses two runs query by query (queries of either run), `depth` documents
/// per query (min-max normalised).
pub fn fuse_runs(model: &Run, bm25: &Run, fusion: Fusion, depth: usize, tag: &str) -> Run {
    fuse_runs_with(model, bm25, fusion, Norm::MinMax, depth, tag)
}

/// [`fuse_runs`] normalising by `norm`.
pub fn fuse_runs_with(
    model: &Run,
    bm25: &Run,
    fusion: Fusion,
    norm: Norm,
    depth: usize,
    tag: &str,
) -> Run {
    let queries: BTreeSet<&String> = model.results.keys().chain(bm25.results.keys()).collect();
    let empty = Vec::new();
    let results = queries
        .into_iter()
        .map(|q| {
            let m = model.results.get(q).unwrap_or(&empty);
            let b = bm25.results.get(q).unwrap_or(&empty);
            let mut f = fuse_with(m, b, fusion, norm);
            f.truncate(depth);
            (q.clone(), f)
        })
        .collect();
    Run {
        results,
        tag: tag.to_string(),
    }
}

/// The λ (and β) a validation set prefers, with the score of every value tried.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LambdaChoice {
    /// The chosen λ (the smallest of the best, so ties favour the model).
    pub lambda: f64,
    /// The β chosen with it ([`tune_beta_lambda`]; the largest of the best,
    /// so ties favour the source query alone); absent when β was not tuned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// Its mean metric on the validation queries.
    pub score: f64,
    /// `(λ, mean metric)` for every λ tried (at the chosen β).
    pub tried: Vec<(f64, f64)>,
    /// `(β, λ, mean metric)` for every pair tried (β tuned only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tried_pairs: Vec<(f64, f64, f64)>,
    /// Metric optimised.
    pub metric: &'static str,
    /// Number of validation queries.
    pub queries: usize,
}

/// Chooses λ for [`Fusion::Linear`] on the judged queries in `valid`,
/// maximising `metric` over `grid` (min-max normalised).
pub fn tune_lambda(
    model: &Run,
    bm25: &Run,
    qrels: &Qrels,
    valid: &BTreeSet<String>,
    metric: Metric,
    grid: &[f64],
) -> LambdaChoice {
    tune_beta_lambda(
        model,
        None,
        bm25,
        qrels,
        valid,
        metric,
        &[1.0],
        grid,
        Norm::MinMax,
    )
}

/// Chooses β (Eq. 1, [`combine_model`] of the source run and the
/// `translated` one) and λ (Eq. 2) together on the judged queries in
/// `valid`, maximising `metric` over every pair of `betas` × `lambdas`.
/// Ties go to the larger β (the source query alone), then the smaller λ
/// (the model). Without a translated run β is 1 (`betas` must be `[1]`);
/// the choice records β and every pair only when more than one β was tried.
#[allow(clippy::too_many_arguments)]
pub fn tune_beta_lambda(
    source: &Run,
    translated: Option<&Run>,
    bm25: &Run,
    qrels: &Qrels,
    valid: &BTreeSet<String>,
    metric: Metric,
    betas: &[f64],
    lambdas: &[f64],
    norm: Norm,
) -> LambdaChoice {
    let sub = qrels.restricted_to(valid);
    let (src, bm) = (restrict(source, valid), restrict(bm25, valid));
    let tr = translated.map(|t| restrict(t, valid));
    let mut order: Vec<f64> = betas.to_vec();
    order.sort_by(|a, b| b.total_cmp(a));
    let mut pairs = Vec::with_capacity(order.len() * lambdas.len());
    let mut best = (f64::NAN, f64::NAN, f64::NEG_INFINITY);
    for &beta in &order {
        let model = match &tr {
            Some(t) => combine_model_runs(&src, t, beta, norm),
            None => src.clone(),
        };
        for &lambda in lambdas {
            let run = fuse_runs_with(
                &model,
                &bm,
                Fusion::Linear { lambda },
                norm,
                usize::MAX,
                "tune",
            );
            let s = evaluate_rankings(&run.results, &sub).mean.get(metric);
            pairs.push((beta, lambda, s));
            if s > best.2 {
                best = (beta, lambda, s);
            }
        }
    }
    let tried = pairs
        .iter()
        .filter(|p| p.0 == best.0)
        .map(|p| (p.1, p.2))
        .collect();
    let beta_tuned = translated.is_some() && order.len() > 1;
    LambdaChoice {
        lambda: best.1,
        beta: beta_tuned.then_some(best.0),
        score: best.2,
        tried,
        tried_pairs: if beta_tuned { pairs } else { Vec::new() },
        metric: metric.name(),
        queries: sub.judgements.len(),
    }
}

/// Splits query ids into a validation and a test half, reproducibly: the ids
/// are sorted, shuffled with `seed` and cut in two (validation gets the
/// smaller half when the count is odd).
pub fn split_queries<S: AsRef<str>>(ids: &[S], seed: u64) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut v: Vec<String> = ids.iter().map(|s| s.as_ref().to_string()).collect();
    v.sort_unstable();
    v.dedup();
    v.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    let cut = v.len() / 2;
    let test = v.split_off(cut);
    (v.into_iter().collect(), test.into_iter().collect())
}

/// A fusion as `rosetta eval --fuse` takes it: a fixed one, or linear
/// fusion with λ chosen on validation queries (`bm25:auto`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FusionSpec {
    /// Fixed settings.
    Fixed(Fusion),
    /// [`Fusion::Linear`] with λ from [`tune_lambda`] over [`LAMBDA_GRID`] (MAP).
    TunedLinear,
    /// `auto`: [`FusionSpec::TunedLinear`] over each of several signal
    /// sets (BM25's query expansion, the model's translated-query run with
    /// β), the set chosen by the fused MAP on the tuning half; the caller
    /// enumerates the sets ([`AutoCandidate`]). Evaluated alone it is
    /// [`FusionSpec::TunedLinear`].
    Auto,
}

/// One signal set `--fuse auto` tried, with its fused MAP on the tuning
/// half of the queries (the figure it is chosen by).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AutoCandidate {
    /// The BM25 run's tag (`bm25-dict`, `bm25-dict-rm3`, ...).
    pub bm25_run: String,
    /// Whether the model's run on the translated queries took part (β tuned).
    pub beta: bool,
    /// The fused MAP on the tuning half with λ (and β) chosen there.
    pub tuning_map: f64,
    /// The one chosen (the best tuning MAP; the first such in the order
    /// tried on a tie).
    pub chosen: bool,
}

impl FromStr for FusionSpec {
    type Err = Error;

    /// `auto`, `bm25:auto`, or anything [`Fusion::from_str`] reads.
    fn from_str(s: &str) -> crate::Result<FusionSpec> {
        if s.trim() == "auto" {
            Ok(FusionSpec::Auto)
        } else if s.trim() == "bm25:auto" {
            Ok(FusionSpec::TunedLinear)
        } else {
            Ok(FusionSpec::Fixed(s.parse()?))
        }
    }
}

/// Which β of seed 004's Eq. 1 a fused evaluation uses.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum BetaSpec {
    /// None asked: the source query's run alone (β = 1), λ on
    /// [`LAMBDA_GRID`] — the fusion of earlier figures.
    #[default]
    Source,
    /// This β (0 to 1), λ (when tuned) on [`LAMBDA_GRID_FINE`].
    Fixed(f64),
    /// β on [`BETA_GRID`] chosen with λ (when tuned; on
    /// [`LAMBDA_GRID_FINE`]).
    Tuned,
}

impl FromStr for BetaSpec {
    type Err = Error;

    /// `auto` or a number from 0 to 1.
    fn from_str(s: &str) -> crate::Result<BetaSpec> {
        let s = s.trim();
        if s == "auto" {
            return Ok(BetaSpec::Tuned);
        }
        match s.parse::<f64>() {
            Ok(b) if (0.0..=1.0).contains(&b) => Ok(BetaSpec::Fixed(b)),
            _ => Err(Error::invalid(format!(
                "β `{s}`: expected auto or a number from 0 to 1"
            ))),
        }
    }
}

/// A fused run scored against the model and BM25 alone on the same held-out
/// queries.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FusedEvaluation {
    /// The fusion used (`bm25:0.3`, `rrf:60`).
    pub fusion: String,
    /// β of Eq. 1 (the source query's weight against its translation's);
    /// absent when the source query's run alone took part.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// Score normalisation of linear fusion (`minmax` or `max`).
    pub norm: &'static str,
    /// The BM25 run's tag (`bm25-dict`, `bm25-mt-bo1`, ...).
    pub bm25_run: String,
    /// How the query reached the model's target side for Eq. 1 (`dict`,
    /// `mt`); set by the caller, absent without β.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_translation: Option<String>,
    /// λ's (and β's) choice on the validation queries (`bm25:auto`, or `--beta auto`).
    pub tuning: Option<LambdaChoice>,
    /// The fused run's figures on the tuning half (tuned fusions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fused_tuning: Option<Metrics>,
    /// Seed of the validation/test split of the queries.
    pub split_seed: u64,
    /// Judged queries scored (the test half).
    pub queries: usize,
    /// The model alone (source queries) on those queries.
    pub model: Metrics,
    /// The model's Eq. 1 mix at the β used on those queries (with β only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_mixed: Option<Metrics>,
    /// BM25 alone on those queries.
    pub bm25: Metrics,
    /// The fused run on those queries.
    pub fused: Metrics,
    /// `--fuse auto`: every signal set tried, in order, the chosen one marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto: Option<Vec<AutoCandidate>>,
    /// The BM25 run and the fused run restricted to the held-out queries,
    /// and those queries' qrels (for writing out and significance tests),
    /// not serialised.
    #[serde(skip)]
    pub held_out_runs: (Run, Run, Qrels),
}

/// Scores `spec` on the test half of the judged queries (the split of
/// [`split_queries`] with `seed`; λ of `bm25:auto` is chosen on the other
/// half), next to the model and BM25 alone on the same queries. Min-max
/// normalised, source queries only: [`evaluate_fusion_with`] with
/// [`BetaSpec::Source`].
pub fn evaluate_fusion(
    model: &Run,
    bm25: &Run,
    qrels: &Qrels,
    spec: FusionSpec,
    seed: u64,
) -> FusedEvaluation {
    evaluate_fusion_with(
        model,
        None,
        bm25,
        qrels,
        spec,
        BetaSpec::Source,
        Norm::MinMax,
        seed,
    )
    .expect("source-only fusion has nothing to refuse")
}

/// Seed 004's fusion scored on held-out queries: the model's score mixes
/// the `source` queries' run and the `translated` queries' run (Eq. 1, β as
/// `beta` says), and that mix is fused with `bm25` (Eq. 2, `spec`). λ (with
/// `bm25:auto`) and β (with [`BetaSpec::Tuned`]) are chosen for MAP on one
/// half of the judged queries ([`tune_beta_lambda`]); every figure is on the
/// other half. β needs a translated run and linear fusion.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_fusion_with(
    source: &Run,
    translated: Option<&Run>,
    bm25: &Run,
    qrels: &Qrels,
    spec: FusionSpec,
    beta: BetaSpec,
    norm: Norm,
    seed: u64,
) -> crate::Result<FusedEvaluation> {
    let ids: Vec<&String> = qrels.judgements.keys().collect();
    let (valid, test) = split_queries(&ids, seed);
    let tr =
        match (beta, translated) {
            (BetaSpec::Source, _) => None,
            (_, Some(t)) => Some(t),
            (_, None) => return Err(Error::invalid(
                "β mixes the source query's run with its translation's: no translated run given",
            )),
        };
    if tr.is_some() && matches!(spec, FusionSpec::Fixed(Fusion::Model | Fusion::Rrf { .. })) {
        return Err(Error::invalid(
            "β (seed 004's Eq. 1) goes with linear fusion: --fuse bm25:λ or bm25:auto",
        ));
    }
    if let BetaSpec::Fixed(b) = beta {
        if !(0.0..=1.0).contains(&b) {
            return Err(Error::invalid(format!("β={b} is outside 0..1")));
        }
    }
    let lambdas: Vec<f64> = match spec {
        FusionSpec::TunedLinear | FusionSpec::Auto if tr.is_some() => LAMBDA_GRID_FINE.to_vec(),
        FusionSpec::TunedLinear | FusionSpec::Auto => LAMBDA_GRID.to_vec(),
        FusionSpec::Fixed(Fusion::Linear { lambda }) => vec![lambda],
        FusionSpec::Fixed(_) => Vec::new(),
    };
    let betas: Vec<f64> = match beta {
        BetaSpec::Source => vec![1.0],
        BetaSpec::Fixed(b) => vec![b],
        BetaSpec::Tuned => BETA_GRID.to_vec(),
    };
    let tuned = matches!(spec, FusionSpec::TunedLinear | FusionSpec::Auto)
        || matches!(beta, BetaSpec::Tuned);
    let (fusion, beta_used, tuning) = match spec {
        FusionSpec::Fixed(f) if !tuned => {
            (f, betas.first().copied().filter(|_| tr.is_some()), None)
        }
        _ => {
            let c = tune_beta_lambda(
                source,
                tr,
                bm25,
                qrels,
                &valid,
                Metric::Map,
                &betas,
                &lambdas,
                norm,
            );
            let b = tr.map(|_| c.beta.unwrap_or(betas[0]));
            (Fusion::Linear { lambda: c.lambda }, b, Some(c))
        }
    };
    let mixed = match (tr, beta_used) {
        (Some(t), Some(b)) => Some(combine_model_runs(source, t, b, norm)),
        _ => None,
    };
    let model = mixed.as_ref().unwrap_or(source);
    let fused = fuse_runs_with(model, bm25, fusion, norm, usize::MAX, "fused");
    let held_out = qrels.restricted_to(&test);
    let score = |r: &Run| evaluate_rankings(&r.results, &held_out).mean;
    Ok(FusedEvaluation {
        fusion: fusion.to_string(),
        beta: beta_used,
        norm: norm.name(),
        bm25_run: bm25.tag.clone(),
        query_translation: None,
        fused_tuning: tuning
            .as_ref()
            .map(|_| evaluate_rankings(&fused.results, &qrels.restricted_to(&valid)).mean),
        tuning,
        auto: None,
        split_seed: seed,
        queries: held_out.judgements.len(),
        model: score(source),
        model_mixed: mixed.as_ref().map(score),
        bm25: score(bm25),
        fused: score(&fused),
        held_out_runs: (
            restrict(bm25, &test),
            restrict(&fused, &test),
            held_out.clone(),
        ),
    })
}

/// `run` with each query's `depth` best documents, in the evaluator's order.
pub fn truncated(run: &Run, depth: usize) -> Run {
    Run {
        results: run
            .results
            .iter()
            .map(|(q, d)| {
                let mut v = sorted_for_eval(d);
                v.truncate(depth);
                (q.clone(), v)
            })
            .collect(),
        tag: run.tag.clone(),
    }
}

/// The queries `keep` of `run`.
pub fn restrict(run: &Run, keep: &BTreeSet<String>) -> Run {
    Run {
        results: run
            .results
            .iter()
            .filter(|(q, _)| keep.contains(*q))
            .map(|(q, d)| (q.clone(), d.clone()))
            .collect(),
        tag: run.tag.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &[(&str, f64)]) -> Vec<(String, f64)> {
        v.iter().map(|(d, s)| (d.to_string(), *s)).collect()
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!("none".parse::<Fusion>().unwrap(), Fusion::Model);
        assert_eq!(
            "bm25:0.3".parse::<Fusion>().unwrap(),
            Fusion::Linear { lambda: 0.3 }
        );
        assert_eq!("rrf".parse::<Fusion>().unwrap(), Fusion::Rrf { k: 60.0 });
        assert_eq!("rrf:10".parse::<Fusion>().unwrap(), Fusion::Rrf { k: 10.0 });
        for bad in ["bm25", "bm25:1.5", "bm25:x", "rrf:0", "rrf:-1", "cos", ""] {
            let e = bad.parse::<Fusion>().unwrap_err().to_string();
            assert!(e.contains("fusion"), "{bad}: {e}");
        }
        for f in [
            Fusion::Model,
            Fusion::Linear { lambda: 0.25 },
            Fusion::Rrf { k: 60.0 },
        ] {
            assert_eq!(f.to_string().parse::<Fusion>().unwrap(), f);
        }
    }

    #[test]
    fn linear_is_minmax_combsum() {
        // model: a 1.0, b 0.5, c 0.0 → 1, .5, 0 ; bm25: b 4, d 2 → b 1, d 0
        let m = l(&[("a", 1.0), ("b", 0.5), ("c", 0.0)]);
        let b = l(&[("d", 2.0), ("b", 4.0)]);
        let f = fuse(&m, &b, Fusion::Linear { lambda: 0.5 });
        assert_eq!(f, l(&[("b", 0.75), ("a", 0.5), ("d", 0.0), ("c", 0.0)]));
        // λ = 0 is the model's ranking; λ = 1 is BM25's (others tie at 0)
        let m0 = fuse(&m, &b, Fusion::Linear { lambda: 0.0 });
        assert_eq!(
            m0.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
            ["a", "b", "d", "c"]
        );
        let b1 = fuse(&m, &b, Fusion::Linear { lambda: 1.0 });
        assert_eq!(b1[0].0, "b");
    }

    #[test]
    fn rrf_sums_reciprocal_ranks() {
        let m = l(&[("a", 0.9), ("b", 0.8)]);
        let b = l(&[("b", 7.0), ("c", 3.0)]);
        let f = fuse(&m, &b, Fusion::Rrf { k: 60.0 });
        let get = |d: &str| f.iter().find(|x| x.0 == d).unwrap().1;
        assert!((get("b") - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert!((get("a") - 1.0 / 61.0).abs() < 1e-12);
        assert!((get("c") - 1.0 / 62.0).abs() < 1e-12);
        assert_eq!(f[0].0, "b");
        // ties (a and c would tie at equal ranks) follow the evaluator: id descending
        let f2 = fuse(
            &l(&[("a", 1.0)]),
            &l(&[("c", 1.0)]),
            Fusion::Rrf { k: 60.0 },
        );
        assert_eq!(f2[0].0, "c");
    }

    #[test]
    fn lambda_is_tuned_on_validation_queries_only() {
        // q1: BM25 finds the relevant doc, the model does not; q2 the reverse
        let mut model = Run::default();
        let mut bm = Run::default();
        model
            .results
            .insert("q1".into(), l(&[("x", 0.9), ("r1", 0.1)]));
        bm.results
            .insert("q1".into(), l(&[("r1", 5.0), ("x", 1.0)]));
        model
            .results
            .insert("q2".into(), l(&[("r2", 0.9), ("y", 0.1)]));
        bm.results
            .insert("q2".into(), l(&[("y", 5.0), ("r2", 1.0)]));
        let qrels = Qrels::from_pairs([("q1", "r1"), ("q2", "r2")]);
        let only = |q: &str| [q.to_string()].into_iter().collect::<BTreeSet<_>>();
        let c1 = tune_lambda(&model, &bm, &qrels, &only("q1"), Metric::Mrr, &LAMBDA_GRID);
        assert_eq!(c1.queries, 1);
        assert!(c1.lambda > 0.5 && c1.score == 1.0, "{c1:?}");
        let c2 = tune_lambda(&model, &bm, &qrels, &only("q2"), Metric::Mrr, &LAMBDA_GRID);
        assert_eq!((c2.lambda, c2.score), (0.0, 1.0));
    }

    #[test]
    fn fusion_is_scored_on_held_out_queries() {
        let mut model = Run::default();
        let mut bm = Run::default();
        let mut pairs = Vec::new();
        for i in 0..20 {
            let (q, r) = (format!("q{i}"), format!("r{i}"));
            // BM25 always right, the model always second
            model
                .results
                .insert(q.clone(), l(&[("x", 0.9), (r.as_str(), 0.5)]));
            bm.results.insert(q.clone(), l(&[(r.as_str(), 3.0)]));
            pairs.push((q, r));
        }
        let qrels = Qrels::from_pairs(pairs.iter().map(|(q, r)| (q.as_str(), r.as_str())));
        let e = evaluate_fusion(&model, &bm, &qrels, "bm25:auto".parse().unwrap(), 1);
        assert_eq!(e.queries, 10);
        assert_eq!((e.model.mrr, e.bm25.mrr, e.fused.mrr), (0.5, 1.0, 1.0));
        let t = e.tuning.unwrap();
        assert_eq!((t.queries, t.tried.len()), (10, LAMBDA_GRID.len()));
        assert!(t.lambda > 0.0);
        let fixed = evaluate_fusion(&model, &bm, &qrels, "bm25:0".parse().unwrap(), 1);
        assert_eq!((fixed.fused.mrr, fixed.tuning), (0.5, None));
    }

    #[test]
    fn eq1_mixes_the_normalised_source_and_translated_lists() {
        // source: a 0.8, b 0.4, c 0.0 → 1, .5, 0; translated: b 0.9, d 0.3 → 1, 0
        let src = l(&[("a", 0.8), ("b", 0.4), ("c", 0.0)]);
        let tr = l(&[("b", 0.9), ("d", 0.3)]);
        let m = combine_model(&src, &tr, 0.7, Norm::MinMax);
        let get = |v: &[(String, f64)], d: &str| v.iter().find(|x| x.0 == d).unwrap().1;
        assert!((get(&m, "a") - 0.7).abs() < 1e-12);
        assert!((get(&m, "b") - (0.7 * 0.5 + 0.3)).abs() < 1e-12);
        assert!((get(&m, "c") - 0.0).abs() < 1e-12);
        assert!((get(&m, "d") - 0.0).abs() < 1e-12);
        assert_eq!(m[0].0, "a");
        // β = 1: the source list itself; β = 0: the translated one's order
        assert_eq!(combine_model(&src, &tr, 1.0, Norm::MinMax), src);
        assert_eq!(combine_model(&src, &tr, 0.0, Norm::MinMax)[0].0, "b");
        // seed 004's max normalisation: s / max, a missing document at 0
        let x = combine_model(&src, &tr, 0.5, Norm::Max);
        assert!((get(&x, "b") - (0.5 * 0.5 + 0.5)).abs() < 1e-12);
        assert!((get(&x, "d") - 0.5 / 3.0).abs() < 1e-12);
        assert!((get(&x, "a") - 0.5).abs() < 1e-12);
        // negative cosines: a missing document counts as the lowest score
        let neg = l(&[("a", 0.5), ("b", -0.25)]);
        let (n, floor) = normalised(&neg, Norm::Max);
        assert_eq!((n["a"], n["b"], floor), (1.0, -0.5, -0.5));
        let (_, floor) = normalised(&neg, Norm::MinMax);
        assert_eq!(floor, 0.0);
        assert_eq!("max".parse::<Norm>().unwrap(), Norm::Max);
        assert!("l2".parse::<Norm>().is_err());
    }

    #[test]
    fn beta_and_lambda_are_tuned_on_their_grids() {
        assert_eq!("auto".parse::<BetaSpec>().unwrap(), BetaSpec::Tuned);
        assert_eq!("0.7".parse::<BetaSpec>().unwrap(), BetaSpec::Fixed(0.7));
        assert!("1.2".parse::<BetaSpec>().is_err());
        // the model ranks the answer second from the source query and first
        // from its translation; BM25 finds nothing
        let (mut src, mut tr, bm) = (Run::default(), Run::default(), Run::default());
        let mut pairs = Vec::new();
        for i in 0..10 {
            let (q, r) = (format!("q{i}"), format!("r{i}"));
            src.results
                .insert(q.clone(), l(&[("x", 0.9), (r.as_str(), 0.5), ("y", 0.1)]));
            tr.results
                .insert(q.clone(), l(&[(r.as_str(), 0.8), ("x", 0.2), ("y", 0.1)]));
            pairs.push((q, r));
        }
        let qrels = Qrels::from_pairs(pairs.iter().map(|(q, r)| (q.as_str(), r.as_str())));
        let e = evaluate_fusion_with(
            &src,
            Some(&tr),
            &bm,
            &qrels,
            "bm25:auto".parse().unwrap(),
            BetaSpec::Tuned,
            Norm::MinMax,
            1,
        )
        .unwrap();
        let t = e.tuning.as_ref().unwrap();
        assert_eq!(t.tried_pairs.len(), 11 * 21);
        assert_eq!(t.tried.len(), 21);
        // answer first from the mix when (1 − β) > β · 0.5... β < 2/3: 0.6
        // is the largest such β; λ = 0 the smallest of the ties
        assert_eq!((t.beta, t.lambda, t.score), (Some(0.6), 0.0, 1.0));
        assert_eq!(e.beta, Some(0.6));
        assert_eq!(e.fused.mrr, 1.0);
        assert_eq!(e.model.mrr, 0.5);
        assert_eq!(e.model_mixed.unwrap().mrr, 1.0);
        assert_eq!(e.fused_tuning.unwrap().mrr, 1.0);
        // β = 1 is the source-only fusion
        let fixed = |beta| {
            evaluate_fusion_with(
                &src,
                Some(&tr),
                &bm,
                &qrels,
                "bm25:0.3".parse().unwrap(),
                beta,
                Norm::MinMax,
                1,
            )
            .unwrap()
        };
        let old = evaluate_fusion(&src, &bm, &qrels, "bm25:0.3".parse().unwrap(), 1);
        assert_eq!(fixed(BetaSpec::Fixed(1.0)).fused, old.fused);
        assert_eq!(fixed(BetaSpec::Source).fused, old.fused);
        assert_eq!(fixed(BetaSpec::Fixed(0.0)).fused.mrr, 1.0);
        // β needs the translated run and linear fusion
        let rrf = "rrf".parse().unwrap();
        let e = evaluate_fusion_with(
            &src,
            Some(&tr),
            &bm,
            &qrels,
            rrf,
            BetaSpec::Tuned,
            Norm::MinMax,
            1,
        );
        assert!(e.unwrap_err().to_string().contains("linear fusion"));
        let auto = "bm25:auto".parse().unwrap();
        let e = evaluate_fusion_with(
            &src,
            None,
            &bm,
            &qrels,
            auto,
            BetaSpec::Tuned,
            Norm::MinMax,
            1,
        );
        assert!(e.unwrap_err().to_string().contains("no translated run"));
    }

    #[test]
    fn query_split_is_reproducible_and_disjoint() {
        let ids: Vec<String> = (0..11).map(|i| format!("q{i}")).collect();
        let (v, t) = split_queries(&ids, 1);
        assert_eq!((v.len(), t.len()), (5, 6));
        assert!(v.is_disjoint(&t));
        let mut rev = ids.clone();
        rev.reverse();
        assert_eq!(split_queries(&rev, 1), (v.clone(), t));
        assert_ne!(split_queries(&ids, 2).0, v);
    }
}
