//! Fusing a model's ranking with a lexical one (BM25 over dictionary-translated
//! queries): min-max normalised linear fusion (CombSUM with weight λ on the
//! lexical side) and reciprocal rank fusion (Cormack et al. 2009, k = 60).
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

/// Min-max normalised scores of a list. When every score is equal (one
/// document, say) all are the list's best: 1, above the documents it misses.
/// A non-finite score (a diverged model) normalises to 0, the worst.
fn minmax(list: &[(String, f64)]) -> HashMap<&str, f64> {
    let finite = || list.iter().map(|x| x.1).filter(|s| s.is_finite());
    let lo = finite().fold(f64::INFINITY, f64::min);
    let hi = finite().fold(f64::NEG_INFINITY, f64::max);
    let span = hi - lo;
    list.iter()
        .map(|(d, s)| {
            let v = if !s.is_finite() {
                0.0
            } else if span > 0.0 {
                (s - lo) / span
            } else {
                1.0
            };
            (d.as_str(), v)
        })
        .collect()
}

/// Fuses one query's model list with its BM25 list, in the evaluator's order.
/// The lists may hold different documents and be in any order; every document
/// of either list is in the result.
pub fn fuse(model: &[(String, f64)], bm25: &[(String, f64)], fusion: Fusion) -> Vec<(String, f64)> {
    let mut fused: Vec<(String, f64)> = match fusion {
        Fusion::Model => model.to_vec(),
        Fusion::Linear { lambda } => {
            let (m, b) = (minmax(model), minmax(bm25));
            let mut docs: Vec<&str> = m.keys().chain(b.keys()).copied().collect();
            docs.sort_unstable();
            docs.dedup();
            docs.into_iter()
                .map(|d| {
                    let s = lambda * b.get(d).copied().unwrap_or(0.0)
                        + (1.0 - lambda) * m.get(d).copied().unwrap_or(0.0);
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
/// per query.
pub fn fuse_runs(model: &Run, bm25: &Run, fusion: Fusion, depth: usize, tag: &str) -> Run {
    let queries: BTreeSet<&String> = model.results.keys().chain(bm25.results.keys()).collect();
    let empty = Vec::new();
    let results = queries
        .into_iter()
        .map(|q| {
            let m = model.results.get(q).unwrap_or(&empty);
            let b = bm25.results.get(q).unwrap_or(&empty);
            let mut f = fuse(m, b, fusion);
            f.truncate(depth);
            (q.clone(), f)
        })
        .collect();
    Run {
        results,
        tag: tag.to_string(),
    }
}

/// The λ a validation set prefers, with the score of every λ tried.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LambdaChoice {
    /// The chosen λ (the smallest of the best, so ties favour the model).
    pub lambda: f64,
    /// Its mean metric on the validation queries.
    pub score: f64,
    /// `(λ, mean metric)` for every λ tried.
    pub tried: Vec<(f64, f64)>,
    /// Metric optimised.
    pub metric: &'static str,
    /// Number of validation queries.
    pub queries: usize,
}

/// Chooses λ for [`Fusion::Linear`] on the judged queries in `valid`,
/// maximising `metric` over `grid`.
pub fn tune_lambda(
    model: &Run,
    bm25: &Run,
    qrels: &Qrels,
    valid: &BTreeSet<String>,
    metric: Metric,
    grid: &[f64],
) -> LambdaChoice {
    let sub = qrels.restricted_to(valid);
    let mut tried = Vec::with_capacity(grid.len());
    let mut best = (f64::NAN, f64::NEG_INFINITY);
    for &lambda in grid {
        let run = fuse_runs(model, bm25, Fusion::Linear { lambda }, usize::MAX, "tune");
        let s = evaluate_rankings(&run.results, &sub).mean.get(metric);
        tried.push((lambda, s));
        if s > best.1 {
            best = (lambda, s);
        }
    }
    LambdaChoice {
        lambda: best.0,
        score: best.1,
        tried,
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
}

impl FromStr for FusionSpec {
    type Err = Error;

    /// `bm25:auto`, or anything [`Fusion::from_str`] reads.
    fn from_str(s: &str) -> crate::Result<FusionSpec> {
        if s.trim() == "bm25:auto" {
            Ok(FusionSpec::TunedLinear)
        } else {
            Ok(FusionSpec::Fixed(s.parse()?))
        }
    }
}

/// A fused run scored against the model and BM25 alone on the same held-out
/// queries.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FusedEvaluation {
    /// The fusion used (`bm25:0.3`, `rrf:60`).
    pub fusion: String,
    /// λ's choice on the validation queries (`bm25:auto` only).
    pub tuning: Option<LambdaChoice>,
    /// Seed of the validation/test split of the queries.
    pub split_seed: u64,
    /// Judged queries scored (the test half).
    pub queries: usize,
    /// The model alone on those queries.
    pub model: Metrics,
    /// BM25 alone on those queries.
    pub bm25: Metrics,
    /// The fused run on those queries.
    pub fused: Metrics,
}

/// Scores `spec` on the test half of the judged queries (the split of
/// [`split_queries`] with `seed`; λ of `bm25:auto` is chosen on the other
/// half), next to the model and BM25 alone on the same queries.
pub fn evaluate_fusion(
    model: &Run,
    bm25: &Run,
    qrels: &Qrels,
    spec: FusionSpec,
    seed: u64,
) -> FusedEvaluation {
    let ids: Vec<&String> = qrels.judgements.keys().collect();
    let (valid, test) = split_queries(&ids, seed);
    let (fusion, tuning) = match spec {
        FusionSpec::Fixed(f) => (f, None),
        FusionSpec::TunedLinear => {
            let c = tune_lambda(model, bm25, qrels, &valid, Metric::Map, &LAMBDA_GRID);
            (Fusion::Linear { lambda: c.lambda }, Some(c))
        }
    };
    let held_out = qrels.restricted_to(&test);
    let fused = fuse_runs(model, bm25, fusion, usize::MAX, "fused");
    let score = |r: &Run| evaluate_rankings(&r.results, &held_out).mean;
    FusedEvaluation {
        fusion: fusion.to_string(),
        tuning,
        split_seed: seed,
        queries: held_out.judgements.len(),
        model: score(model),
        bm25: score(bm25),
        fused: score(&fused),
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
