//! One comparison of retrieval systems, for `rosetta compare` (TREC runs or
//! sessions) and the workbench's Compare tab: per system the mean of each
//! metric over its scored queries, and against a baseline, per metric, a
//! paired test on the queries both were scored on, p-values corrected over
//! the systems tested (one family per metric), a significance mark and
//! per-query win/tie/loss counts, with each mean difference's 95% interval
//! (paired bootstrap over the queries, seeded) and effect size (Cohen's
//! d_z). Every system says what its figures are over
//! ([`Task`]: the task, its split and its number of judged queries). Rendered
//! as a plain-text table, Markdown, CSV, TSV or JSON; the per-query
//! drill-down ([`Comparison::drill_down`]) lists the queries on which a
//! system differs most from the baseline. The figures are computed here;
//! `render.rs` writes them out.
//!
//! Marks: `▲` the system is significantly better than the baseline on that
//! metric (corrected p < alpha and a positive mean difference), `▼`
//! significantly worse; no mark otherwise (and never on the baseline). The
//! CLI and the workbench use the same marks.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

mod render;

pub use render::{fmt_p, render_drill_downs, TableFormat};

use super::significance::{self, Bootstrap};
use super::{Correction, Metric, Metrics, PairedTest};
use crate::{Error, Result};

/// Why `s` cannot be paired with the baseline `b`, if it cannot: scored on
/// another task (another workspace, split or judgements), its query ids
/// name other texts.
fn unpaired(s: &System, b: &System) -> Option<String> {
    (s.task != b.task).then(|| format!("not tested: {}", different_tasks(&s.task, &b.task)))
}

/// The reason two tasks cannot be paired, for notes and errors.
fn different_tasks(t: &Task, base: &Task) -> String {
    let what = |t: &Task| {
        let d = t.describe();
        if d.is_empty() {
            "an unknown task".to_string()
        } else {
            d
        }
    };
    let (a, z) = (what(t), what(base));
    let (a, z) = if a == z && t.judgements == base.judgements {
        // same name, size and judgements: the documents differ
        (
            format!("{a} (collection {})", t.collection),
            format!("{z} (collection {})", base.collection),
        )
    } else if a == z {
        // same name and size: the judgements (or the texts) differ
        (
            format!("{a} (judgements {})", t.judgements),
            format!("{z} (judgements {})", base.judgements),
        )
    } else {
        (a, z)
    };
    format!(
        "a paired test needs the same queries with the same judgements: scored on {a}, the baseline on {z}"
    )
}

/// Per-query values that differ by at most this count as a tie in
/// win/tie/loss counts.
pub const TIE: f64 = 1e-9;

/// The metrics the workbench's Compare tab shows.
pub const DEFAULT_METRICS: [Metric; 5] = [
    Metric::Mrr,
    Metric::Map,
    Metric::P1,
    Metric::P10,
    Metric::Ndcg10,
];

/// What a system's figures are over: a task, the split its queries come
/// from, and its number of judged queries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub struct Task {
    /// The task: `qrels FILE` for runs; for a session, its workspace's
    /// ad-hoc task (`bible-en-es: derived ad-hoc task`, `enhi: ad-hoc
    /// collection`). Empty when unknown.
    pub name: String,
    /// The split the queries are drawn from (a derived task's `test`);
    /// `None` for a collection with queries of its own.
    pub split: Option<String>,
    /// Queries the task judges (with a text, for a workspace's task).
    pub queries: usize,
    /// A fingerprint of the judged queries and their judgements (see
    /// [`judgements_fingerprint`]); empty when unknown. Two tasks with the
    /// same name but different fingerprints are different tasks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub judgements: String,
    /// A fingerprint of the collection the queries were run against (its
    /// documents' ids and texts, [`collection_fingerprint`]); empty when
    /// unknown (runs read from files). Two workspaces of one name, queries
    /// and judgements over other documents are different tasks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub collection: String,
}

/// A short fingerprint (16 hex digits of BLAKE3) of a collection: its
/// documents' ids and texts, in order.
pub fn collection_fingerprint<S: AsRef<str>>(ids: &[S], texts: &[S]) -> String {
    let mut h = blake3::Hasher::new();
    for (i, t) in ids.iter().zip(texts) {
        h.update(i.as_ref().as_bytes());
        h.update(&[0]);
        h.update(t.as_ref().as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex()[..16].to_string()
}

/// A short fingerprint (16 hex digits of BLAKE3) of judged queries, their
/// texts where given, and their judgements: what decides whether two
/// systems were scored on the same task.
pub fn judgements_fingerprint(
    judgements: &BTreeMap<String, BTreeMap<String, i32>>,
    texts: &BTreeMap<String, String>,
) -> String {
    let mut h = blake3::Hasher::new();
    for (q, docs) in judgements {
        h.update(q.as_bytes());
        h.update(b"\0");
        if let Some(t) = texts.get(q) {
            h.update(t.as_bytes());
        }
        h.update(b"\0");
        for (d, g) in docs {
            h.update(d.as_bytes());
            h.update(b"\0");
            h.update(&g.to_le_bytes());
        }
        h.update(b"\n");
    }
    h.finalize().to_hex()[..16].to_string()
}

impl Task {
    /// One phrase: `bible-en-es: derived ad-hoc task, test split, 3108
    /// judged queries` (the empty string for an unknown task).
    pub fn describe(&self) -> String {
        if self.name.is_empty() {
            return String::new();
        }
        let mut s = self.name.clone();
        if let Some(sp) = &self.split {
            let _ = write!(s, ", {sp} split");
        }
        let _ = write!(
            s,
            ", {} judged quer{}",
            self.queries,
            if self.queries == 1 { "y" } else { "ies" }
        );
        s
    }
}

/// One system to compare: a name (unique in the comparison), what it is
/// (a session's model; may be empty), what it was scored on, its scores per
/// query id, and the queries' texts where known.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct System {
    /// Label in the table.
    pub name: String,
    /// What the system is (a session's model), shown beside the name; may be empty.
    pub detail: String,
    /// The task it was scored on.
    pub task: Task,
    /// Scores per query id.
    pub per_query: BTreeMap<String, Metrics>,
    /// Query texts by id (may be empty or partial), for the drill-down.
    pub texts: BTreeMap<String, String>,
    /// Query labels by id in the collection's own terms (a verse
    /// reference), where it has them; for the drill-down.
    pub labels: BTreeMap<String, String>,
}

/// How systems are tested against the baseline, and what is shown.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareOptions {
    /// The paired test.
    pub test: PairedTest,
    /// Correction over the systems tested against the baseline, per metric.
    pub correction: Correction,
    /// Significance level, applied to the corrected p-values; in (0, 1).
    pub alpha: f64,
    /// Metrics shown, in order (at least one).
    pub metrics: Vec<Metric>,
    /// The paired bootstrap giving each difference its 95% interval.
    pub bootstrap: Bootstrap,
}

impl Default for CompareOptions {
    /// Paired t-test, Holm correction, alpha 0.05, [`DEFAULT_METRICS`],
    /// bootstrap of 10,000 resamples with seed 42.
    fn default() -> Self {
        CompareOptions {
            test: PairedTest::T,
            correction: Correction::Holm,
            alpha: 0.05,
            metrics: DEFAULT_METRICS.to_vec(),
            bootstrap: Bootstrap::default(),
        }
    }
}

/// Whether a figure differs significantly from the baseline's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mark {
    /// Not tested, or not significant.
    #[default]
    None,
    /// Significantly better than the baseline (`▲`).
    Better,
    /// Significantly worse than the baseline (`▼`).
    Worse,
}

impl Mark {
    /// `▲`, `▼` or the empty string.
    pub fn symbol(self) -> &'static str {
        match self {
            Mark::None => "",
            Mark::Better => "▲",
            Mark::Worse => "▼",
        }
    }

    /// `better`, `worse` or the empty string (CSV).
    pub fn word(self) -> &'static str {
        match self {
            Mark::None => "",
            Mark::Better => "better",
            Mark::Worse => "worse",
        }
    }
}

/// One system against the baseline on one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Versus {
    /// Queries paired (scored for both).
    pub queries: usize,
    /// Mean over the paired queries of system minus baseline.
    pub mean_difference: f64,
    /// The test statistic (see [`crate::eval::TestResult`]); JSON `null` when infinite.
    pub statistic: f64,
    /// Two-sided p-value before correction.
    pub p_value: f64,
    /// The p-value after correction.
    pub p_adjusted: f64,
    /// `p_adjusted < alpha` and the mean difference is not zero.
    pub significant: bool,
    /// The mark this gives.
    pub mark: Mark,
    /// Paired queries where the system scores higher than the baseline.
    pub wins: usize,
    /// Paired queries where both score the same (within [`TIE`]).
    pub ties: usize,
    /// Paired queries where the system scores lower.
    pub losses: usize,
    /// Lower end of the 95% paired-bootstrap interval of `mean_difference`.
    pub ci_low: f64,
    /// Upper end of that interval.
    pub ci_high: f64,
    /// Cohen's d_z: `mean_difference` over the standard deviation of the
    /// per-query differences; `None` (JSON `null`) where every difference
    /// is the same, identical systems included.
    pub effect_size: Option<f64>,
}

impl Versus {
    /// The difference with its interval and effect size, compactly:
    /// `+0.031 [+0.012, +0.049] d=0.41` (`d=—` where undefined).
    pub fn effect(&self) -> String {
        format!("{} d={}", self.interval(), self.d())
    }

    /// The difference with its interval: `+0.031 [+0.012, +0.049]`.
    pub fn interval(&self) -> String {
        format!(
            "{:+.3} [{:+.3}, {:+.3}]",
            self.mean_difference, self.ci_low, self.ci_high
        )
    }

    /// The effect size to two decimals, `—` where undefined.
    pub fn d(&self) -> String {
        self.effect_size.map_or("—".into(), |d| format!("{d:.2}"))
    }
}

/// One system's row.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Row {
    /// The system's name.
    pub system: String,
    /// What it is (a session's model); may be empty.
    pub detail: String,
    /// The task its figures are over.
    pub task: Task,
    /// Number of queries it was scored on (the means' denominator).
    pub queries: usize,
    /// Whether it is the baseline.
    pub baseline: bool,
    /// Mean of each shown metric over its queries.
    pub means: BTreeMap<Metric, f64>,
    /// Its test against the baseline per metric (empty for the baseline, with
    /// no baseline, or when it shares fewer than 2 queries with it).
    pub tests: BTreeMap<Metric, Versus>,
    /// Why it was not tested, if it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its scores per query id (for the drill-down; not in the JSON).
    #[serde(skip)]
    pub per_query: BTreeMap<String, Metrics>,
}

impl Row {
    /// The mean of `m` (NaN for a metric not shown).
    pub fn mean(&self, m: Metric) -> f64 {
        self.means.get(&m).copied().unwrap_or(f64::NAN)
    }

    /// The significance mark on `m`.
    pub fn mark(&self, m: Metric) -> Mark {
        self.tests.get(&m).map_or(Mark::None, |v| v.mark)
    }
}

/// A system left out of the table, with the reason.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Skipped {
    /// The system's name.
    pub system: String,
    /// Why it is not in the table.
    pub reason: String,
}

/// Systems × metrics, with tests against a baseline (see the module notes).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Metrics shown (columns), in order.
    pub metrics: Vec<Metric>,
    /// One row per system, in the order given.
    pub rows: Vec<Row>,
    /// The baseline's name, if there is one.
    pub baseline: Option<String>,
    /// The paired test.
    pub test: PairedTest,
    /// The correction.
    pub correction: Correction,
    /// The significance level.
    pub alpha: f64,
    /// The bootstrap giving the intervals.
    pub bootstrap: Bootstrap,
    /// Remarks for the reader (queries that did not match, ...), shown under the table.
    pub notes: Vec<String>,
    /// Systems left out (set by callers that skip what they cannot score).
    pub skipped: Vec<Skipped>,
    /// Query texts by id, where the systems gave them (the first text given wins).
    pub texts: BTreeMap<String, String>,
    /// Query labels by id (verse references), where the systems gave them.
    pub labels: BTreeMap<String, String>,
}

impl Default for Comparison {
    fn default() -> Self {
        let o = CompareOptions::default();
        Comparison {
            metrics: o.metrics,
            rows: Vec::new(),
            baseline: None,
            test: o.test,
            correction: o.correction,
            alpha: o.alpha,
            bootstrap: o.bootstrap,
            notes: Vec::new(),
            skipped: Vec::new(),
            texts: BTreeMap::new(),
            labels: BTreeMap::new(),
        }
    }
}

impl CompareOptions {
    /// Error unless alpha lies in (0, 1), there is a metric and the test is usable.
    pub fn validate(&self) -> Result<()> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(Error::invalid(format!(
                "alpha must lie in (0, 1), got {}",
                self.alpha
            )));
        }
        if self.metrics.is_empty() {
            return Err(Error::invalid("no metric to compare on"));
        }
        if let PairedTest::Randomization {
            permutations: 0, ..
        } = self.test
        {
            return Err(Error::invalid(
                "the randomisation test needs permutations > 0",
            ));
        }
        if self.bootstrap.resamples == 0 {
            return Err(Error::invalid("the bootstrap needs resamples > 0"));
        }
        Ok(())
    }
}

impl Comparison {
    /// Compares `systems` (names unique, each scored on at least one query,
    /// every shown metric finite on every query) against the one named
    /// `baseline`, if any. Each other system is tested on the queries it
    /// shares with the baseline; one sharing fewer than 2 is shown untested
    /// with a note. Errors name the system at fault.
    pub fn build(
        systems: &[System],
        baseline: Option<&str>,
        options: &CompareOptions,
    ) -> Result<Comparison> {
        options.validate()?;
        for (i, s) in systems.iter().enumerate() {
            if systems[..i].iter().any(|o| o.name == s.name) {
                return Err(Error::invalid(format!("{}: system given twice", s.name)));
            }
            if s.per_query.is_empty() {
                return Err(Error::invalid(format!(
                    "{}: no scored query to compare on",
                    s.name
                )));
            }
            for (q, m) in &s.per_query {
                for &k in &options.metrics {
                    let v = m.get(k);
                    if !v.is_finite() {
                        return Err(Error::invalid(format!(
                            "{}: {k} of query {q} is {v}, not a score",
                            s.name
                        )));
                    }
                }
            }
        }
        let base = match baseline {
            None => None,
            Some(b) => Some(systems.iter().position(|s| s.name == b).ok_or_else(|| {
                Error::invalid(format!(
                    "the baseline {b} is not among the systems compared"
                ))
            })?),
        };
        let mut rows: Vec<Row> = systems
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mean = Metrics::mean(s.per_query.values());
                Row {
                    system: s.name.clone(),
                    detail: s.detail.clone(),
                    task: s.task.clone(),
                    queries: s.per_query.len(),
                    baseline: Some(i) == base,
                    means: options.metrics.iter().map(|&m| (m, mean.get(m))).collect(),
                    tests: BTreeMap::new(),
                    note: None,
                    per_query: s.per_query.clone(),
                }
            })
            .collect();
        if let Some(bi) = base {
            let b = &systems[bi];
            // paired query ids of every tested system
            let mut tested: Vec<(usize, Vec<&String>)> = Vec::new();
            for (i, s) in systems.iter().enumerate() {
                if i == bi {
                    continue;
                }
                if let Some(why) = unpaired(s, b) {
                    rows[i].note = Some(why);
                    continue;
                }
                let qs: Vec<&String> = s
                    .per_query
                    .keys()
                    .filter(|q| b.per_query.contains_key(*q))
                    .collect();
                if qs.len() < 2 {
                    rows[i].note = Some(format!(
                        "not tested: it shares {} scored quer{} with the baseline, a paired test needs 2",
                        qs.len(),
                        if qs.len() == 1 { "y" } else { "ies" }
                    ));
                } else {
                    tested.push((i, qs));
                }
            }
            // each tested system's intervals, one per metric, from one
            // set of resampled queries
            let mut intervals: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
            for (i, qs) in &tested {
                let cols: Vec<(Vec<f64>, Vec<f64>)> = options
                    .metrics
                    .iter()
                    .map(|&m| {
                        qs.iter()
                            .map(|q| (systems[*i].per_query[*q].get(m), b.per_query[*q].get(m)))
                            .unzip()
                    })
                    .collect();
                let cols: Vec<(&[f64], &[f64])> =
                    cols.iter().map(|(a, z)| (&a[..], &z[..])).collect();
                let iv = options.bootstrap.intervals(&cols).map_err(|e| {
                    Error::invalid(format!(
                        "bootstrapping {} against {}: {e}",
                        systems[*i].name, b.name
                    ))
                })?;
                intervals.insert(*i, iv);
            }
            for (k, &m) in options.metrics.iter().enumerate() {
                let mut results = Vec::with_capacity(tested.len());
                for (i, qs) in &tested {
                    let a: Vec<f64> = qs
                        .iter()
                        .map(|q| systems[*i].per_query[*q].get(m))
                        .collect();
                    let z: Vec<f64> = qs.iter().map(|q| b.per_query[*q].get(m)).collect();
                    let r = options.test.run(&a, &z).map_err(|e| {
                        Error::invalid(format!(
                            "testing {} against {} on {m}: {e}",
                            systems[*i].name, b.name
                        ))
                    })?;
                    let (wins, ties, losses) = win_tie_loss(&a, &z);
                    let d = significance::effect_size(&a, &z)?;
                    results.push((*i, r, (wins, ties, losses), d));
                }
                let raw: Vec<f64> = results.iter().map(|r| r.1.p_value).collect();
                let adjusted = options.correction.adjust(&raw);
                for ((i, r, (wins, ties, losses), effect_size), p_adjusted) in
                    results.into_iter().zip(adjusted)
                {
                    let (ci_low, ci_high) = intervals[&i][k];
                    let significant = p_adjusted < options.alpha && r.mean_difference != 0.0;
                    let mark = match (significant, r.mean_difference > 0.0) {
                        (false, _) => Mark::None,
                        (true, true) => Mark::Better,
                        (true, false) => Mark::Worse,
                    };
                    rows[i].tests.insert(
                        m,
                        Versus {
                            queries: r.n,
                            mean_difference: r.mean_difference,
                            statistic: r.statistic,
                            p_value: r.p_value,
                            p_adjusted,
                            significant,
                            mark,
                            wins,
                            ties,
                            losses,
                            ci_low,
                            ci_high,
                            effect_size,
                        },
                    );
                }
            }
        }
        Ok(Comparison {
            metrics: options.metrics.clone(),
            rows,
            baseline: base.map(|i| systems[i].name.clone()),
            test: options.test,
            correction: options.correction,
            alpha: options.alpha,
            bootstrap: options.bootstrap,
            notes: Vec::new(),
            skipped: Vec::new(),
            texts: first_given(systems.iter().map(|s| &s.texts)),
            labels: first_given(systems.iter().map(|s| &s.labels)),
        })
    }

    /// The task every system's figures are over, when they share one.
    pub fn task(&self) -> Option<&Task> {
        let first = &self.rows.first()?.task;
        self.rows
            .iter()
            .all(|r| r.task == *first)
            .then_some(first)
            .filter(|t| !t.name.is_empty())
    }

    /// Lines saying what the figures are over: `over: TASK` when the systems
    /// share a task, else `over:` and one `  SYSTEM: TASK` line each; none
    /// when no task is known.
    pub fn scope_lines(&self) -> Vec<String> {
        if let Some(t) = self.task() {
            return vec![format!("over: {}", t.describe())];
        }
        if self.rows.iter().all(|r| r.task.name.is_empty()) {
            return Vec::new();
        }
        let mut out = vec!["over: each system's own task".to_string()];
        for r in &self.rows {
            let d = r.task.describe();
            out.push(format!(
                "  {}: {}",
                r.system,
                if d.is_empty() { "unknown" } else { &d }
            ));
        }
        out
    }

    /// The queries on which `system` differs most from the baseline on
    /// `metric`: the queries both were scored on, largest absolute
    /// difference first (ties by query id), at most `n` of them (0: all).
    /// Errors without a baseline, for an unknown system or the baseline itself.
    pub fn drill_down(&self, system: &str, metric: Metric, n: usize) -> Result<DrillDown> {
        let Some(b) = &self.baseline else {
            return Err(Error::invalid(
                "no baseline: a per-query comparison needs one",
            ));
        };
        let base = self
            .rows
            .iter()
            .find(|r| &r.system == b)
            .ok_or_else(|| Error::invalid(format!("the baseline {b} has no row")))?;
        let row = self
            .rows
            .iter()
            .find(|r| r.system == system)
            .ok_or_else(|| Error::invalid(format!("{system} is not in the comparison")))?;
        if row.baseline {
            return Err(Error::invalid(format!(
                "{system} is the baseline: choose another system to compare with it"
            )));
        }
        if row.task != base.task {
            return Err(Error::invalid(format!(
                "{system}: {}",
                different_tasks(&row.task, &base.task)
            )));
        }
        let mut rows: Vec<QueryDiff> = row
            .per_query
            .iter()
            .filter_map(|(q, m)| {
                let bm = base.per_query.get(q)?;
                let (value, baseline) = (m.get(metric), bm.get(metric));
                Some(QueryDiff {
                    query: q.clone(),
                    label: self.labels.get(q).cloned(),
                    text: self.texts.get(q).cloned(),
                    baseline,
                    value,
                    difference: value - baseline,
                })
            })
            .collect();
        let paired = rows.len();
        let (a, z): (Vec<f64>, Vec<f64>) = rows.iter().map(|r| (r.value, r.baseline)).unzip();
        let (wins, ties, losses) = win_tie_loss(&a, &z);
        rows.sort_by(|x, y| {
            y.difference
                .abs()
                .total_cmp(&x.difference.abs())
                .then_with(|| x.query.cmp(&y.query))
        });
        if n > 0 {
            rows.truncate(n);
        }
        Ok(DrillDown {
            system: row.system.clone(),
            baseline: b.clone(),
            metric,
            paired,
            wins,
            ties,
            losses,
            rows,
        })
    }

    /// [`Comparison::drill_down`] of every system paired with the baseline
    /// on at least one query, in table order (empty without a baseline).
    pub fn drill_downs(&self, metric: Metric, n: usize) -> Vec<DrillDown> {
        self.rows
            .iter()
            .filter(|r| !r.baseline)
            .filter_map(|r| self.drill_down(&r.system, metric, n).ok())
            .filter(|d| d.paired > 0)
            .collect()
    }

    /// Systems tested against the baseline (the size of each metric's family).
    pub fn tested(&self) -> usize {
        self.rows.iter().filter(|r| !r.tests.is_empty()).count()
    }
}

/// Labels for files or folders: their file names, or the paths as given when
/// two file names clash.
pub fn labels(paths: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string())
        })
        .collect();
    let clash = names
        .iter()
        .enumerate()
        .any(|(i, n)| names[..i].contains(n));
    if clash {
        paths.iter().map(|p| p.display().to_string()).collect()
    } else {
        names
    }
}

/// Wins, ties and losses of `a` against `b`, pairwise (ties within [`TIE`]).
pub fn win_tie_loss(a: &[f64], b: &[f64]) -> (usize, usize, usize) {
    let (mut wins, mut ties, mut losses) = (0, 0, 0);
    for (x, y) in a.iter().zip(b) {
        if (x - y).abs() <= TIE {
            ties += 1;
        } else if x > y {
            wins += 1;
        } else {
            losses += 1;
        }
    }
    (wins, ties, losses)
}

/// Per query id, the first value any of `maps` gives.
fn first_given<'a>(
    maps: impl Iterator<Item = &'a BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for m in maps {
        for (q, v) in m {
            out.entry(q.clone()).or_insert_with(|| v.clone());
        }
    }
    out
}

/// One query of a drill-down: the system's and the baseline's value on the metric.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryDiff {
    /// Query id.
    pub query: String,
    /// Its label in the collection's own terms (a verse reference), where
    /// it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its text, where known.
    pub text: Option<String>,
    /// The baseline's value.
    pub baseline: f64,
    /// The system's value.
    pub value: f64,
    /// `value - baseline`.
    pub difference: f64,
}

impl QueryDiff {
    /// How the query is shown: its label where it has one, else its id.
    pub fn name(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.query)
    }
}

/// The queries on which one system differs most from the baseline on one
/// metric ([`Comparison::drill_down`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DrillDown {
    /// The system.
    pub system: String,
    /// The baseline.
    pub baseline: String,
    /// The metric.
    pub metric: Metric,
    /// Queries both were scored on (all of them, not only those listed).
    pub paired: usize,
    /// Of those, where the system scores higher (within [`TIE`]: a tie).
    pub wins: usize,
    /// Where both score the same.
    pub ties: usize,
    /// Where the system scores lower.
    pub losses: usize,
    /// The queries listed, largest absolute difference first.
    pub rows: Vec<QueryDiff>,
}

impl DrillDown {
    /// One line: `MAP per query, dict against the baseline lsi: 3 of 5 paired
    /// queries, largest differences first (wins/ties/losses 2/1/2)`.
    pub fn title(&self) -> String {
        format!(
            "{} per query, {} against the baseline {}: {} of {} paired quer{}, largest differences first (wins/ties/losses {}/{}/{})",
            self.metric,
            self.system,
            self.baseline,
            self.rows.len(),
            self.paired,
            if self.paired == 1 { "y" } else { "ies" },
            self.wins,
            self.ties,
            self.losses
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::trec::{Qrels, Run};
    use std::path::Path;

    /// A run of one ranking per query, documents in order.
    fn run(rankings: &[(&str, &[&str])]) -> Run {
        Run {
            results: rankings
                .iter()
                .map(|(q, docs)| {
                    let n = docs.len() as f64;
                    let list = docs
                        .iter()
                        .enumerate()
                        .map(|(i, d)| (d.to_string(), n - i as f64))
                        .collect();
                    (q.to_string(), list)
                })
                .collect(),
            tag: "t".into(),
        }
    }

    /// Four queries with one relevant document each; the baseline's
    /// reciprocal ranks 1, 1/2, 1/3, 1 and the system's 1/2, 1, 1/4, 1.
    fn fixture() -> Comparison {
        let qrels = Qrels::from_pairs([("q1", "d1"), ("q2", "d2"), ("q3", "d3"), ("q4", "d4")]);
        let base = run(&[
            ("q1", &["d1"]),
            ("q2", &["x", "d2"]),
            ("q3", &["x", "y", "d3"]),
            ("q4", &["d4"]),
        ]);
        let sys = run(&[
            ("q1", &["x", "d1"]),
            ("q2", &["d2"]),
            ("q3", &["x", "y", "z", "d3"]),
            ("q4", &["d4"]),
        ]);
        let task = Task {
            name: "qrels q.txt".into(),
            split: None,
            queries: 4,
            collection: String::new(),
            judgements: String::new(),
        };
        let systems = [("base", base), ("sys", sys)].map(|(name, r)| System {
            name: name.into(),
            task: task.clone(),
            per_query: crate::eval::evaluate(&r, &qrels).per_query,
            texts: [("q2", "two"), ("q3", "three")]
                .iter()
                .map(|(q, t)| (q.to_string(), t.to_string()))
                .collect(),
            labels: [("q2", "John 1:2")]
                .iter()
                .map(|(q, l)| (q.to_string(), l.to_string()))
                .collect(),
            ..Default::default()
        });
        let options = CompareOptions {
            metrics: vec![Metric::Mrr, Metric::P1],
            ..Default::default()
        };
        Comparison::build(&systems, Some("base"), &options).unwrap()
    }

    #[test]
    fn wins_ties_losses_on_a_run_fixture() {
        let t = fixture();
        let v = t.rows[1].tests[&Metric::Mrr];
        assert_eq!((v.wins, v.ties, v.losses), (1, 1, 2));
        assert_eq!(v.queries, 4);
        // P@1: q1 lost, q2 won, q3 both 0, q4 both 1
        let p = t.rows[1].tests[&Metric::P1];
        assert_eq!((p.wins, p.ties, p.losses), (1, 2, 1));
    }

    #[test]
    fn ties_are_values_within_1e_9() {
        assert_eq!(win_tie_loss(&[0.5 + 5e-10], &[0.5]), (0, 1, 0));
        assert_eq!(win_tie_loss(&[0.5 - 5e-10], &[0.5]), (0, 1, 0));
        assert_eq!(win_tie_loss(&[0.5 + 1e-6], &[0.5]), (1, 0, 0));
        assert_eq!(win_tie_loss(&[0.5 - 1e-6], &[0.5]), (0, 0, 1));
    }

    #[test]
    fn drill_down_lists_the_largest_differences_first() {
        let t = fixture();
        let d = t.drill_down("sys", Metric::Mrr, 0).unwrap();
        let order: Vec<&str> = d.rows.iter().map(|r| r.query.as_str()).collect();
        // |−0.5| and |+0.5| tie: by query id; then q3 (−1/12), then q4 (0)
        assert_eq!(order, ["q1", "q2", "q3", "q4"]);
        assert_eq!((d.paired, d.wins, d.ties, d.losses), (4, 1, 1, 2));
        let q1 = &d.rows[0];
        assert_eq!((q1.baseline, q1.value, q1.difference), (1.0, 0.5, -0.5));
        assert_eq!(q1.text, None);
        assert_eq!(d.rows[1].text.as_deref(), Some("two"));
        assert!((d.rows[2].difference - (0.25 - 1.0 / 3.0)).abs() < 1e-12);
        // at most n, the counts still over every paired query
        let top = t.drill_down("sys", Metric::Mrr, 2).unwrap();
        assert_eq!(top.rows.len(), 2);
        assert_eq!(top.paired, 4);
        assert!(
            top.title().contains("2 of 4 paired queries"),
            "{}",
            top.title()
        );
        // not for the baseline, an unknown system, or without a baseline
        assert!(t.drill_down("base", Metric::Mrr, 0).is_err());
        assert!(t.drill_down("nope", Metric::Mrr, 0).is_err());
        let mut none = t.clone();
        none.baseline = None;
        assert!(none.drill_down("sys", Metric::Mrr, 0).is_err());
        assert!(none.drill_downs(Metric::Mrr, 0).is_empty());
        assert_eq!(t.drill_downs(Metric::Mrr, 1).len(), 1);
    }

    /// Systems scored on different tasks (another workspace, or the same
    /// task name with other judgements: runs against different qrels)
    /// are never paired: shown untested with the reason, no per-query list.
    #[test]
    fn systems_on_other_tasks_are_never_paired() {
        let t = fixture();
        let mut systems: Vec<System> = t
            .rows
            .iter()
            .map(|r| System {
                name: r.system.clone(),
                task: r.task.clone(),
                per_query: r.per_query.clone(),
                ..Default::default()
            })
            .collect();
        let mut other = systems[1].clone();
        other.name = "bible".into();
        other.task = Task {
            name: "bible-en-es: derived ad-hoc task".into(),
            split: Some("test".into()),
            queries: 4,
            judgements: "b1".into(),
            collection: String::new(),
        };
        let mut qrels2 = systems[1].clone();
        qrels2.name = "other-qrels".into();
        qrels2.task.judgements = "f00d".into();
        systems.push(other);
        systems.push(qrels2);
        let c = Comparison::build(&systems, Some("base"), &CompareOptions::default()).unwrap();
        assert!(!c.rows[1].tests.is_empty(), "the same task is tested");
        for r in &c.rows[2..] {
            assert!(r.tests.is_empty(), "{}", r.system);
            let note = r.note.as_deref().unwrap();
            assert!(
                note.starts_with(
                    "not tested: a paired test needs the same queries with the same judgements: scored on "
                ),
                "{note}"
            );
        }
        assert!(c.rows[2].note.as_deref().unwrap().contains(
            "scored on bible-en-es: derived ad-hoc task, test split, 4 judged queries, the baseline on qrels q.txt, 4 judged queries"
        ));
        assert!(c.rows[3]
            .note
            .as_deref()
            .unwrap()
            .contains("(judgements f00d)"));
        let e = c
            .drill_down("bible", Metric::Mrr, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("same judgements"), "{e}");
        assert_eq!(c.drill_downs(Metric::Mrr, 0).len(), 1);
        // the family corrected over holds only the tested system
        assert_eq!(c.tested(), 1);
        assert!(c.to_text().contains("bible: not tested"));
    }

    #[test]
    fn drill_downs_render_in_every_format() {
        let t = fixture();
        let d = t.drill_downs(Metric::Mrr, 2);
        let text = render_drill_downs(&d, TableFormat::Text);
        assert!(text.starts_with("MRR per query, sys against the baseline base"));
        // a query with a label is shown by it (a verse reference), else by its id
        assert!(
            text.contains("\n  q1 ") && text.contains("\n  John 1:2 "),
            "{text}"
        );
        assert!(!text.contains("q2") && text.contains("+0.5000") && text.contains("two"));
        let md = render_drill_downs(&d, TableFormat::Markdown);
        assert!(md.contains("| John 1:2 | 0.5000 |"), "{md}");
        let tsv = render_drill_downs(&d, TableFormat::Tsv);
        let lines: Vec<&str> = tsv.lines().collect();
        assert_eq!(
            lines[0],
            "system\tbaseline\tmetric\tquery\tlabel\tbaseline_value\tvalue\tdifference\ttext"
        );
        assert_eq!(lines[1], "sys\tbase\tMRR\tq1\t\t1\t0.5\t-0.5\t");
        assert_eq!(lines[2], "sys\tbase\tMRR\tq2\tJohn 1:2\t0.5\t1\t0.5\ttwo");
        let j: serde_json::Value =
            serde_json::from_str(&render_drill_downs(&d, TableFormat::Json)).unwrap();
        assert_eq!(j[0]["rows"][1]["query"], "q2");
        assert_eq!(j[0]["rows"][1]["label"], "John 1:2");
        assert!(j[0]["rows"][0].get("label").is_none());
        assert_eq!(j[0]["metric"], "MRR");
    }

    #[test]
    fn every_rendering_says_what_the_figures_are_over() {
        let t = fixture();
        let over = "over: qrels q.txt, 4 judged queries";
        assert_eq!(t.scope_lines(), [over]);
        assert!(t.to_text().starts_with(&format!("{over}\n\nsystem")));
        assert!(t.to_markdown().starts_with(over));
        let csv = t.to_csv();
        assert!(csv.starts_with("system,model,queries,baseline,task,split,task_queries,MRR,"));
        assert!(csv.contains("\nsys,,4,false,qrels q.txt,,4,"), "{csv}");
        assert!(t
            .to_tsv()
            .starts_with("system\tmodel\tqueries\tbaseline\ttask\t"));
        let j: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
        assert_eq!(j["task"]["name"], "qrels q.txt");
        assert_eq!(j["task"]["queries"], 4);
        assert_eq!(j["systems"][1]["task"]["split"], serde_json::Value::Null);
        // systems over different tasks: one line each, no shared task
        let mut two = t.clone();
        two.rows[1].task = Task {
            name: "ws: derived ad-hoc task".into(),
            split: Some("test".into()),
            queries: 3,
            collection: String::new(),
            judgements: String::new(),
        };
        assert!(two.task().is_none());
        assert_eq!(
            two.scope_lines(),
            [
                "over: each system's own task",
                "  base: qrels q.txt, 4 judged queries",
                "  sys: ws: derived ad-hoc task, test split, 3 judged queries"
            ]
        );
        let j: serde_json::Value = serde_json::from_str(&two.to_json()).unwrap();
        assert!(j["task"].is_null());
    }

    #[test]
    fn formats_follow_file_extensions() {
        let f = |p: &str| TableFormat::from_path(Path::new(p));
        assert_eq!(f("a/b.TSV"), Some(TableFormat::Tsv));
        assert_eq!(f("b.json"), Some(TableFormat::Json));
        assert_eq!(f("b.md"), Some(TableFormat::Markdown));
        assert_eq!(f("b.csv"), Some(TableFormat::Csv));
        assert_eq!(f("b.txt"), Some(TableFormat::Text));
        assert_eq!(f("b.xlsx"), None);
        assert_eq!(f("b"), None);
    }
}
