//! One comparison of retrieval systems, for `rosetta compare` (TREC runs or
//! sessions) and the workbench's Compare tab: per system the mean of each
//! metric over its scored queries, and against a baseline, per metric, a
//! paired test on the queries both were scored on, p-values corrected over
//! the systems tested (one family per metric), a significance mark and
//! per-query win/tie/loss counts. Rendered as a plain-text table, Markdown,
//! CSV or JSON.
//!
//! Marks: `▲` the system is significantly better than the baseline on that
//! metric (corrected p < alpha and a positive mean difference), `▼`
//! significantly worse; no mark otherwise (and never on the baseline).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::{Correction, Metric, Metrics, PairedTest};
use crate::{Error, Result};

/// Per-query values closer than this count as a tie in win/tie/loss counts.
pub const TIE: f64 = 1e-12;

/// The metrics the workbench's Compare tab shows.
pub const DEFAULT_METRICS: [Metric; 5] = [
    Metric::Mrr,
    Metric::Map,
    Metric::P1,
    Metric::P10,
    Metric::Ndcg10,
];

/// One system to compare: a name (unique in the comparison), what it is
/// (a session's model; may be empty) and its scores per query id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct System {
    /// Label in the table.
    pub name: String,
    /// What the system is (a session's model), shown beside the name; may be empty.
    pub detail: String,
    /// Scores per query id.
    pub per_query: BTreeMap<String, Metrics>,
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
}

impl Default for CompareOptions {
    /// Paired t-test, Holm correction, alpha 0.05, [`DEFAULT_METRICS`].
    fn default() -> Self {
        CompareOptions {
            test: PairedTest::T,
            correction: Correction::Holm,
            alpha: 0.05,
            metrics: DEFAULT_METRICS.to_vec(),
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
}

/// One system's row.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Row {
    /// The system's name.
    pub system: String,
    /// What it is (a session's model); may be empty.
    pub detail: String,
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
    /// Remarks for the reader (queries that did not match, ...), shown under the table.
    pub notes: Vec<String>,
    /// Systems left out (set by callers that skip what they cannot score).
    pub skipped: Vec<Skipped>,
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
            notes: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

/// Output formats of a [`Comparison`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Aligned plain text ([`Comparison::to_text`]).
    Text,
    /// GitHub Markdown ([`Comparison::to_markdown`]).
    Markdown,
    /// Comma-separated values ([`Comparison::to_csv`]).
    Csv,
    /// One JSON object ([`Comparison::to_json`]).
    Json,
}

impl TableFormat {
    /// The usual file extension: `txt`, `md`, `csv`, `json`.
    pub fn extension(self) -> &'static str {
        match self {
            TableFormat::Text => "txt",
            TableFormat::Markdown => "md",
            TableFormat::Csv => "csv",
            TableFormat::Json => "json",
        }
    }
}

impl FromStr for TableFormat {
    type Err = Error;
    /// `text`, `md` (`markdown`), `csv` or `json`.
    fn from_str(s: &str) -> Result<TableFormat> {
        match s.to_ascii_lowercase().as_str() {
            "text" | "txt" => Ok(TableFormat::Text),
            "md" | "markdown" => Ok(TableFormat::Markdown),
            "csv" => Ok(TableFormat::Csv),
            "json" => Ok(TableFormat::Json),
            _ => Err(Error::invalid(format!(
                "unknown table format {s:?}; known: text, md, csv, json"
            ))),
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
                    queries: s.per_query.len(),
                    baseline: Some(i) == base,
                    means: options.metrics.iter().map(|&m| (m, mean.get(m))).collect(),
                    tests: BTreeMap::new(),
                    note: None,
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
            for &m in &options.metrics {
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
                    let (mut wins, mut ties, mut losses) = (0, 0, 0);
                    for (x, y) in a.iter().zip(&z) {
                        if (x - y).abs() <= TIE {
                            ties += 1;
                        } else if x > y {
                            wins += 1;
                        } else {
                            losses += 1;
                        }
                    }
                    results.push((*i, r, wins, ties, losses));
                }
                let raw: Vec<f64> = results.iter().map(|r| r.1.p_value).collect();
                let adjusted = options.correction.adjust(&raw);
                for ((i, r, wins, ties, losses), p_adjusted) in results.into_iter().zip(adjusted) {
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
            notes: Vec::new(),
            skipped: Vec::new(),
        })
    }

    /// Systems tested against the baseline (the size of each metric's family).
    pub fn tested(&self) -> usize {
        self.rows.iter().filter(|r| !r.tests.is_empty()).count()
    }

    /// How significance was decided, briefly: `paired t-test, holm, p<0.05`.
    pub fn method(&self) -> String {
        format!(
            "{}, {}, p<{}",
            self.test.describe(),
            self.correction,
            self.alpha
        )
    }

    /// The sentence explaining the marks, or `None` without a baseline.
    pub fn legend(&self) -> Option<String> {
        let b = self.baseline.as_ref()?;
        let n = self.tested();
        Some(format!(
            "▲/▼ significantly better/worse than the baseline {b} ({}, {} correction over {n} comparison{} per metric, p < {}); wins/ties/losses count the queries both were scored on",
            self.test.describe(),
            self.correction,
            if n == 1 { "" } else { "s" },
            self.alpha
        ))
    }

    /// Lines under a table: legend, notes on rows, notes, systems left out.
    fn footer(&self) -> Vec<String> {
        let mut out: Vec<String> = self.legend().into_iter().collect();
        if self.baseline.is_none() && self.rows.len() > 1 {
            out.push("no baseline: nothing tested".into());
        }
        for r in &self.rows {
            if let Some(n) = &r.note {
                out.push(format!("{}: {n}", r.system));
            }
        }
        out.extend(self.notes.iter().cloned());
        for s in &self.skipped {
            out.push(format!("left out {}: {}", s.system, s.reason));
        }
        out
    }

    fn has_detail(&self) -> bool {
        self.rows.iter().any(|r| !r.detail.is_empty())
    }

    /// Aligned plain text: a row of means (with marks) per system and, under
    /// each tested system, its corrected p-values and win/tie/loss counts.
    pub fn to_text(&self) -> String {
        let detail = self.has_detail();
        let mut label_w = self
            .rows
            .iter()
            .map(|r| r.system.chars().count())
            .max()
            .unwrap_or(0)
            .max("system".len())
            .max("  win/tie/loss".len());
        let p_label = format!("  p ({})", self.correction);
        label_w = label_w.max(p_label.chars().count());
        let detail_w = self
            .rows
            .iter()
            .map(|r| r.detail.chars().count())
            .max()
            .unwrap_or(0)
            .max("model".len());
        let widths: Vec<usize> = self
            .metrics
            .iter()
            .map(|m| {
                let wtl = self
                    .rows
                    .iter()
                    .filter_map(|r| r.tests.get(m))
                    .map(|v| wtl(v).len())
                    .max()
                    .unwrap_or(0);
                m.name().chars().count().max(7).max(wtl)
            })
            .collect();
        let head = |label: &str, detail_cell: &str, queries: &str| {
            let mut s = pad(label, label_w);
            if detail {
                s.push_str("  ");
                s.push_str(&pad(detail_cell, detail_w));
            }
            s.push_str(&format!("  {queries:>7}"));
            s
        };
        let mut out = String::new();
        let mut line = head("system", "model", "queries");
        for (m, w) in self.metrics.iter().zip(&widths) {
            line.push_str(&format!("  {:>w$}  ", m.name()));
        }
        push_line(&mut out, &line);
        for r in &self.rows {
            let mut line = head(&r.system, &r.detail, &r.queries.to_string());
            for (m, w) in self.metrics.iter().zip(&widths) {
                let mark = r.mark(*m).symbol();
                line.push_str(&format!("  {:>w$} {}", fmt4(r.mean(*m)), pad(mark, 1)));
            }
            push_line(&mut out, &line);
            if r.tests.is_empty() {
                continue;
            }
            for (label, cell) in [
                (
                    p_label.as_str(),
                    (|v: &Versus| fmt_p(v.p_adjusted)) as fn(&Versus) -> String,
                ),
                ("  win/tie/loss", wtl),
            ] {
                let mut line = head(label, "", "");
                for (m, w) in self.metrics.iter().zip(&widths) {
                    let c = r.tests.get(m).map(cell).unwrap_or_else(|| "—".into());
                    line.push_str(&format!("  {c:>w$}  "));
                }
                push_line(&mut out, &line);
            }
        }
        let foot = self.footer();
        if !foot.is_empty() {
            out.push('\n');
            for f in foot {
                push_line(&mut out, &f);
            }
        }
        out
    }

    /// GitHub Markdown: the means with marks (the baseline marked ◆), then,
    /// with a baseline, a second table of corrected p-values and
    /// win/tie/loss counts, then the footer lines.
    pub fn to_markdown(&self) -> String {
        let detail = self.has_detail();
        let mut s = String::from("| system |");
        if detail {
            s.push_str(" model |");
        }
        s.push_str(" queries |");
        for m in &self.metrics {
            let _ = write!(s, " {m} |");
        }
        s.push_str("\n|---|");
        if detail {
            s.push_str("---|");
        }
        s.push_str("---:|");
        for _ in &self.metrics {
            s.push_str("---:|");
        }
        s.push('\n');
        for r in &self.rows {
            let _ = write!(
                s,
                "| {}{} |",
                md_cell(&r.system),
                if r.baseline { " ◆" } else { "" }
            );
            if detail {
                let _ = write!(s, " {} |", md_cell(&r.detail));
            }
            let _ = write!(s, " {} |", r.queries);
            for m in &self.metrics {
                let mark = r.mark(*m).symbol();
                let _ = write!(
                    s,
                    " {}{}{mark} |",
                    fmt4(r.mean(*m)),
                    if mark.is_empty() { "" } else { " " }
                );
            }
            s.push('\n');
        }
        if let Some(b) = &self.baseline {
            if self.tested() > 0 {
                let _ = write!(
                    s,
                    "\nAgainst the baseline {} ({}-corrected p; wins/ties/losses):\n\n| system |",
                    md_cell(b),
                    self.correction
                );
                for m in &self.metrics {
                    let _ = write!(s, " {m} |");
                }
                s.push_str("\n|---|");
                for _ in &self.metrics {
                    s.push_str("---:|");
                }
                s.push('\n');
                for r in self.rows.iter().filter(|r| !r.tests.is_empty()) {
                    let _ = write!(s, "| {} |", md_cell(&r.system));
                    for m in &self.metrics {
                        match r.tests.get(m) {
                            Some(v) => {
                                let _ = write!(s, " {}; {} |", fmt_p(v.p_adjusted), wtl(v));
                            }
                            None => s.push_str(" — |"),
                        }
                    }
                    s.push('\n');
                }
            }
        }
        let foot = self.footer();
        if !foot.is_empty() {
            s.push('\n');
            for f in foot {
                let _ = writeln!(s, "{}  ", md_cell(&f));
            }
        }
        s
    }

    /// CSV: `system,model,queries,baseline`, then per metric `<m>` (mean),
    /// `<m>_p` (corrected p-value), `<m>_sig` (`better`, `worse` or empty),
    /// `<m>_wins`, `<m>_ties`, `<m>_losses` (empty where not tested).
    pub fn to_csv(&self) -> String {
        let mut s = String::from("system,model,queries,baseline");
        for m in &self.metrics {
            let n = csv_field(m.name());
            let _ = write!(s, ",{n},{n}_p,{n}_sig,{n}_wins,{n}_ties,{n}_losses");
        }
        s.push('\n');
        for r in &self.rows {
            let _ = write!(
                s,
                "{},{},{},{}",
                csv_field(&r.system),
                csv_field(&r.detail),
                r.queries,
                r.baseline
            );
            for m in &self.metrics {
                let _ = write!(s, ",{}", fmt4(r.mean(*m)));
                match r.tests.get(m) {
                    Some(v) => {
                        let _ = write!(
                            s,
                            ",{},{},{},{},{}",
                            v.p_adjusted,
                            v.mark.word(),
                            v.wins,
                            v.ties,
                            v.losses
                        );
                    }
                    None => s.push_str(",,,,,"),
                }
            }
            s.push('\n');
        }
        s
    }

    /// One line of JSON (see the `Serialize` implementation).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a comparison serialises")
    }

    /// The table in `format`.
    pub fn render(&self, format: TableFormat) -> String {
        match format {
            TableFormat::Text => self.to_text(),
            TableFormat::Markdown => self.to_markdown(),
            TableFormat::Csv => self.to_csv(),
            TableFormat::Json => {
                let mut j = self.to_json();
                j.push('\n');
                j
            }
        }
    }

    /// Writes the table in `format` to `path` (atomically).
    pub fn write(&self, path: &Path, format: TableFormat) -> Result<()> {
        crate::util::write_atomic(path, self.render(format).as_bytes())
    }
}

/// JSON: `metrics` (names), `baseline`, `test` (`t` or `randomization`, with
/// `permutations` and `seed` for the latter), `correction`, `alpha`,
/// `systems` (each a [`Row`]: `system`, `detail`, `queries`, `baseline`,
/// `means` and `tests` keyed by metric name), `notes`, `skipped`.
impl Serialize for Comparison {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("metrics", &self.metrics)?;
        m.serialize_entry("baseline", &self.baseline)?;
        match self.test {
            PairedTest::T => m.serialize_entry("test", "t")?,
            PairedTest::Randomization { permutations, seed } => {
                m.serialize_entry("test", "randomization")?;
                m.serialize_entry("permutations", &permutations)?;
                m.serialize_entry("seed", &seed)?;
            }
        }
        m.serialize_entry("correction", &self.correction)?;
        m.serialize_entry("alpha", &self.alpha)?;
        m.serialize_entry("systems", &self.rows)?;
        m.serialize_entry("notes", &self.notes)?;
        m.serialize_entry("skipped", &self.skipped)?;
        m.end()
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

fn wtl(v: &Versus) -> String {
    format!("{}/{}/{}", v.wins, v.ties, v.losses)
}

fn fmt4(x: f64) -> String {
    format!("{x:.4}")
}

/// A p-value for a table: four decimals, or `<.0001` below that.
pub fn fmt_p(p: f64) -> String {
    if p < 1e-4 {
        "<.0001".to_string()
    } else {
        format!("{p:.4}")
    }
}

fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    format!("{s}{}", " ".repeat(w.saturating_sub(n)))
}

fn push_line(out: &mut String, line: &str) {
    out.push_str(line.trim_end());
    out.push('\n');
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
