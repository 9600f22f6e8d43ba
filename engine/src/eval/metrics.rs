//! Ranking metrics with trec_eval's exact conventions, per query and averaged.
//!
//! Conventions (those of `trec_eval -c` at relevance level 1, which
//! `/work/shared/peers/trec_eval.py` reproduces through pytrec_eval):
//! - a document is relevant when its judged grade is `> 0`; unjudged
//!   documents are non-relevant;
//! - each query's documents are ranked by [`sorted_for_eval`] (score
//!   descending, ties by document id descending); a run's rank column plays
//!   no part;
//! - the mean is taken over the judged queries (those in the qrels, including
//!   queries with no relevant document); a judged query with no results scores
//!   zero on every metric, and queries that only the run has are ignored;
//! - nDCG@k (`ndcg_cut`) uses the judged grade as gain and `log2(rank + 1)` as
//!   discount, divided by the DCG of the qrels' grades sorted descending.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::trec::{sorted_for_eval, Qrels, Run};
use crate::{Error, Result};

/// One query's (or the mean) scores on every metric Rosetta reports.
/// Serialized with the names shown in tables: `MRR`, `MAP`, `P@1`, ...
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Reciprocal rank of the first relevant document (trec_eval `recip_rank`).
    #[serde(rename = "MRR")]
    pub mrr: f64,
    /// Average precision (trec_eval `map`).
    #[serde(rename = "MAP")]
    pub map: f64,
    /// Precision at 1 (`P_1`).
    #[serde(rename = "P@1")]
    pub p1: f64,
    /// Precision at 5 (`P_5`).
    #[serde(rename = "P@5")]
    pub p5: f64,
    /// Precision at 10 (`P_10`).
    #[serde(rename = "P@10")]
    pub p10: f64,
    /// Recall at 100 (`recall_100`).
    #[serde(rename = "R@100")]
    pub r100: f64,
    /// nDCG at 1 (`ndcg_cut_1`).
    #[serde(rename = "nDCG@1")]
    pub ndcg1: f64,
    /// nDCG at 5 (`ndcg_cut_5`).
    #[serde(rename = "nDCG@5")]
    pub ndcg5: f64,
    /// nDCG at 10 (`ndcg_cut_10`).
    #[serde(rename = "nDCG@10")]
    pub ndcg10: f64,
    /// Top-1 accuracy: 1 when the first-ranked document is relevant. Per
    /// query it equals P@1; it is kept under its own name because CLIR papers
    /// report it as such.
    #[serde(rename = "Top1")]
    pub top1: f64,
}

/// One metric, to pick a column of [`Metrics`] by name (tables, tests, plots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// [`Metrics::mrr`]
    Mrr,
    /// [`Metrics::map`]
    Map,
    /// [`Metrics::p1`]
    P1,
    /// [`Metrics::p5`]
    P5,
    /// [`Metrics::p10`]
    P10,
    /// [`Metrics::r100`]
    R100,
    /// [`Metrics::ndcg1`]
    Ndcg1,
    /// [`Metrics::ndcg5`]
    Ndcg5,
    /// [`Metrics::ndcg10`]
    Ndcg10,
    /// [`Metrics::top1`]
    Top1,
}

impl Metric {
    /// Every metric, in the order tables show them.
    pub const ALL: [Metric; 10] = [
        Metric::Mrr,
        Metric::Map,
        Metric::P1,
        Metric::P5,
        Metric::P10,
        Metric::R100,
        Metric::Ndcg1,
        Metric::Ndcg5,
        Metric::Ndcg10,
        Metric::Top1,
    ];

    /// The display (and JSON) name, e.g. `nDCG@10`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Mrr => "MRR",
            Metric::Map => "MAP",
            Metric::P1 => "P@1",
            Metric::P5 => "P@5",
            Metric::P10 => "P@10",
            Metric::R100 => "R@100",
            Metric::Ndcg1 => "nDCG@1",
            Metric::Ndcg5 => "nDCG@5",
            Metric::Ndcg10 => "nDCG@10",
            Metric::Top1 => "Top1",
        }
    }

    /// trec_eval's name for the measure, or `None` for Top-1 accuracy (which
    /// trec_eval reports as `P_1`).
    pub fn trec_name(self) -> Option<&'static str> {
        Some(match self {
            Metric::Mrr => "recip_rank",
            Metric::Map => "map",
            Metric::P1 => "P_1",
            Metric::P5 => "P_5",
            Metric::P10 => "P_10",
            Metric::R100 => "recall_100",
            Metric::Ndcg1 => "ndcg_cut_1",
            Metric::Ndcg5 => "ndcg_cut_5",
            Metric::Ndcg10 => "ndcg_cut_10",
            Metric::Top1 => return None,
        })
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Serialised by its display name (`nDCG@10`), also as a map key.
impl Serialize for Metric {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = Error;
    /// Parses a display name or a trec_eval name, case-insensitively
    /// (`map`, `MAP`, `ndcg@10`, `ndcg_cut_10`, `recip_rank`, ...).
    fn from_str(s: &str) -> Result<Metric> {
        Metric::ALL
            .into_iter()
            .find(|m| {
                m.name().eq_ignore_ascii_case(s)
                    || m.trec_name().is_some_and(|t| t.eq_ignore_ascii_case(s))
            })
            .ok_or_else(|| {
                let names: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
                Error::invalid(format!("unknown metric {s:?}; known: {}", names.join(", ")))
            })
    }
}

impl Metrics {
    /// The value of one metric.
    pub fn get(&self, m: Metric) -> f64 {
        match m {
            Metric::Mrr => self.mrr,
            Metric::Map => self.map,
            Metric::P1 => self.p1,
            Metric::P5 => self.p5,
            Metric::P10 => self.p10,
            Metric::R100 => self.r100,
            Metric::Ndcg1 => self.ndcg1,
            Metric::Ndcg5 => self.ndcg5,
            Metric::Ndcg10 => self.ndcg10,
            Metric::Top1 => self.top1,
        }
    }

    /// A mutable reference to one metric's value.
    fn get_mut(&mut self, m: Metric) -> &mut f64 {
        match m {
            Metric::Mrr => &mut self.mrr,
            Metric::Map => &mut self.map,
            Metric::P1 => &mut self.p1,
            Metric::P5 => &mut self.p5,
            Metric::P10 => &mut self.p10,
            Metric::R100 => &mut self.r100,
            Metric::Ndcg1 => &mut self.ndcg1,
            Metric::Ndcg5 => &mut self.ndcg5,
            Metric::Ndcg10 => &mut self.ndcg10,
            Metric::Top1 => &mut self.top1,
        }
    }

    /// The arithmetic mean of each metric over `items` (all zero when empty).
    pub fn mean<'a>(items: impl IntoIterator<Item = &'a Metrics>) -> Metrics {
        let mut sum = Metrics::default();
        let mut n = 0usize;
        for m in items {
            for k in Metric::ALL {
                *sum.get_mut(k) += m.get(k);
            }
            n += 1;
        }
        if n > 0 {
            for k in Metric::ALL {
                *sum.get_mut(k) /= n as f64;
            }
        }
        sum
    }
}

/// Scores of a run against qrels: per judged query and their mean.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Every judged query's scores (zeros for judged queries without results).
    pub per_query: BTreeMap<String, Metrics>,
    /// The mean over `per_query`.
    pub mean: Metrics,
    /// Number of queries averaged (the judged queries).
    pub queries: usize,
}

/// Scores one query: `docs` are its retrieved `(document id, score)` pairs in
/// any order, `judged` its qrels (document id → grade). A document listed more
/// than once counts only at its best rank.
pub fn query_metrics(docs: &[(String, f64)], judged: &BTreeMap<String, i32>) -> Metrics {
    let ranked = sorted_for_eval(docs);
    let mut seen = HashSet::with_capacity(ranked.len());
    // grade of each retrieved document in rank order (unjudged: 0)
    let grades: Vec<i32> = ranked
        .iter()
        .filter(|(d, _)| seen.insert(d.as_str()))
        .map(|(d, _)| judged.get(d).copied().unwrap_or(0))
        .collect();
    let num_rel = judged.values().filter(|&&g| g > 0).count();
    let relevant = |g: i32| g > 0;

    let mut m = Metrics::default();
    if let Some(i) = grades.iter().position(|&g| relevant(g)) {
        m.mrr = 1.0 / (i + 1) as f64;
    }
    if num_rel > 0 {
        let mut found = 0usize;
        let mut sum_prec = 0.0;
        for (i, &g) in grades.iter().enumerate() {
            if relevant(g) {
                found += 1;
                sum_prec += found as f64 / (i + 1) as f64;
            }
        }
        m.map = sum_prec / num_rel as f64;
        let in100 = grades.iter().take(100).filter(|&&g| relevant(g)).count();
        m.r100 = in100 as f64 / num_rel as f64;
    }
    let precision =
        |k: usize| grades.iter().take(k).filter(|&&g| relevant(g)).count() as f64 / k as f64;
    m.p1 = precision(1);
    m.p5 = precision(5);
    m.p10 = precision(10);
    m.top1 = if grades.first().is_some_and(|&g| relevant(g)) {
        1.0
    } else {
        0.0
    };

    let mut ideal: Vec<i32> = judged.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let ndcg = |k: usize| {
        let idcg = dcg(ideal.iter().take(k));
        if idcg > 0.0 {
            dcg(grades.iter().take(k)) / idcg
        } else {
            0.0
        }
    };
    m.ndcg1 = ndcg(1);
    m.ndcg5 = ndcg(5);
    m.ndcg10 = ndcg(10);
    m
}

/// Discounted cumulative gain of grades in rank order: `sum g / log2(i + 2)`
/// over positive grades (trec_eval's `ndcg_cut`).
fn dcg<'a>(grades: impl Iterator<Item = &'a i32>) -> f64 {
    grades
        .enumerate()
        .filter(|(_, &g)| g > 0)
        .fold(0.0, |acc, (i, &g)| acc + g as f64 / ((i + 2) as f64).log2())
}

/// Scores in-memory rankings (query id → retrieved `(document id, score)`,
/// any order), as produced by models and the index, against `qrels`.
pub fn evaluate_rankings(
    rankings: &BTreeMap<String, Vec<(String, f64)>>,
    qrels: &Qrels,
) -> Evaluation {
    let per_query: BTreeMap<String, Metrics> = qrels
        .judgements
        .iter()
        .map(|(qid, judged)| {
            let docs = rankings.get(qid).map(Vec::as_slice).unwrap_or(&[]);
            (qid.clone(), query_metrics(docs, judged))
        })
        .collect();
    Evaluation {
        mean: Metrics::mean(per_query.values()),
        queries: per_query.len(),
        per_query,
    }
}

/// Scores a run against qrels (see the module notes for the conventions).
pub fn evaluate(run: &Run, qrels: &Qrels) -> Evaluation {
    evaluate_rankings(&run.results, qrels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(v: &[(&str, f64)]) -> Vec<(String, f64)> {
        v.iter().map(|(d, s)| (d.to_string(), *s)).collect()
    }

    fn judged(v: &[(&str, i32)]) -> BTreeMap<String, i32> {
        v.iter().map(|(d, g)| (d.to_string(), *g)).collect()
    }

    #[test]
    fn hand_computed_query() {
        // ranking: x(rel 2) y(unjudged) z(rel 0) w(rel 1); v(rel 1) not retrieved
        let m = query_metrics(
            &docs(&[("w", 1.0), ("x", 4.0), ("z", 2.0), ("y", 3.0)]),
            &judged(&[("x", 2), ("z", 0), ("w", 1), ("v", 1)]),
        );
        assert_eq!(m.mrr, 1.0);
        assert!((m.map - (1.0 + 2.0 / 4.0) / 3.0).abs() < 1e-12);
        assert_eq!(m.p1, 1.0);
        assert!((m.p5 - 0.4).abs() < 1e-12);
        assert!((m.p10 - 0.2).abs() < 1e-12);
        assert!((m.r100 - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(m.ndcg1, 1.0);
        let dcg5 = 2.0 + 1.0 / 5f64.log2();
        let idcg5 = 2.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        assert!((m.ndcg5 - dcg5 / idcg5).abs() < 1e-12);
        assert_eq!(m.top1, 1.0);
    }

    #[test]
    fn ties_break_by_docno_descending() {
        // b ranks before a at equal score, so the relevant a is second
        let m = query_metrics(&docs(&[("a", 1.0), ("b", 1.0)]), &judged(&[("a", 1)]));
        assert_eq!(m.mrr, 0.5);
        assert_eq!(m.top1, 0.0);
    }

    #[test]
    fn duplicates_count_once_at_best_rank() {
        let m = query_metrics(
            &docs(&[("a", 3.0), ("a", 2.0), ("b", 1.0)]),
            &judged(&[("b", 1)]),
        );
        assert_eq!(m.mrr, 0.5);
    }

    #[test]
    fn missing_and_unjudged_queries() {
        let qrels = Qrels::from_pairs([("q1", "a"), ("q2", "b")]);
        let mut rankings = BTreeMap::new();
        rankings.insert("q1".to_string(), docs(&[("a", 1.0)]));
        rankings.insert("q9".to_string(), docs(&[("a", 1.0)]));
        let e = evaluate_rankings(&rankings, &qrels);
        assert_eq!(e.queries, 2);
        assert_eq!(e.per_query["q2"], Metrics::default());
        assert!(!e.per_query.contains_key("q9"));
        assert_eq!(e.mean.mrr, 0.5);
    }

    #[test]
    fn serializes_with_display_names() {
        let v = serde_json::to_value(Metrics::default()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        let mut want: Vec<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
        want.sort();
        let mut keys = keys;
        keys.sort();
        assert_eq!(keys, want);
    }

    #[test]
    fn metric_names_parse() {
        assert_eq!("ndcg_cut_10".parse::<Metric>().unwrap(), Metric::Ndcg10);
        assert_eq!("map".parse::<Metric>().unwrap(), Metric::Map);
        assert_eq!("top1".parse::<Metric>().unwrap(), Metric::Top1);
        assert!("P@7".parse::<Metric>().is_err());
    }
}
