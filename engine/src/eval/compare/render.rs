//! Rendering a [`Comparison`]: the plain-text table, Markdown, CSV, TSV and
//! JSON, the legend and footer under them, and the per-query drill-downs in
//! each format. The figures are [`super`]'s; nothing here computes one.

use std::fmt::Write as _;
use std::path::Path;
use std::str::FromStr;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::{Comparison, DrillDown, Versus};
use crate::eval::significance::CONFIDENCE;
use crate::eval::PairedTest;
use crate::{Error, Result};

/// Output formats of a [`Comparison`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Aligned plain text ([`Comparison::to_text`]).
    Text,
    /// GitHub Markdown ([`Comparison::to_markdown`]).
    Markdown,
    /// Comma-separated values ([`Comparison::to_csv`]).
    Csv,
    /// Tab-separated values: the CSV's columns ([`Comparison::to_tsv`]).
    Tsv,
    /// One JSON object ([`Comparison::to_json`]).
    Json,
}

impl TableFormat {
    /// The usual file extension: `txt`, `md`, `csv`, `tsv`, `json`.
    pub fn extension(self) -> &'static str {
        match self {
            TableFormat::Text => "txt",
            TableFormat::Markdown => "md",
            TableFormat::Csv => "csv",
            TableFormat::Tsv => "tsv",
            TableFormat::Json => "json",
        }
    }

    /// The format a file name's extension asks for (`.txt`, `.md`, `.csv`,
    /// `.tsv`, `.json`, any case), if it names one.
    pub fn from_path(path: &Path) -> Option<TableFormat> {
        let ext = path.extension()?.to_str()?;
        match ext.to_ascii_lowercase().as_str() {
            "txt" | "text" => Some(TableFormat::Text),
            "md" | "markdown" => Some(TableFormat::Markdown),
            "csv" => Some(TableFormat::Csv),
            "tsv" | "tab" => Some(TableFormat::Tsv),
            "json" => Some(TableFormat::Json),
            _ => None,
        }
    }
}

impl FromStr for TableFormat {
    type Err = Error;
    /// `text`, `md` (`markdown`), `csv`, `tsv` or `json`.
    fn from_str(s: &str) -> Result<TableFormat> {
        match s.to_ascii_lowercase().as_str() {
            "text" | "txt" => Ok(TableFormat::Text),
            "md" | "markdown" => Ok(TableFormat::Markdown),
            "csv" => Ok(TableFormat::Csv),
            "tsv" => Ok(TableFormat::Tsv),
            "json" => Ok(TableFormat::Json),
            _ => Err(Error::invalid(format!(
                "unknown table format {s:?}; known: text, md, csv, tsv, json"
            ))),
        }
    }
}

impl Comparison {
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
            "▲/▼ significantly better/worse than the baseline {b} ({}, {} correction over {n} comparison{} per metric, p < {}); wins/ties/losses count the queries both were scored on; {}",
            self.test.describe(),
            self.correction,
            if n == 1 { "" } else { "s" },
            self.alpha,
            self.effect_legend()
        ))
    }

    /// What the intervals and effect sizes are: `difference [95% CI] ...`.
    pub fn effect_legend(&self) -> String {
        format!(
            "difference [{:.0}% CI]: mean difference from the baseline with its paired bootstrap interval over the queries ({} resamples, seed {}); d: Cohen's d_z, the mean difference over the standard deviation of the per-query differences (— where they are all equal)",
            CONFIDENCE * 100.0,
            self.bootstrap.resamples,
            self.bootstrap.seed
        )
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
            .max("  difference [95% CI]".len());
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
                    .map(|v| wtl(v).len().max(v.interval().chars().count()))
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
        let scope = self.scope_lines();
        if !scope.is_empty() {
            for l in &scope {
                push_line(&mut out, l);
            }
            out.push('\n');
        }
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
                ("  difference [95% CI]", |v: &Versus| v.interval()),
                ("  d", |v: &Versus| v.d()),
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

    /// GitHub Markdown: what the figures are over, the means with marks (the
    /// baseline marked ◆), then, with a baseline, a second table of
    /// corrected p-values and win/tie/loss counts, then the footer lines.
    pub fn to_markdown(&self) -> String {
        let detail = self.has_detail();
        let mut s = String::new();
        let scope = self.scope_lines();
        if !scope.is_empty() {
            for l in &scope {
                let _ = writeln!(s, "{}  ", md_cell(l.trim_start()));
            }
            s.push('\n');
        }
        s.push_str("| system |");
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
                    "\nAgainst the baseline {} ({}-corrected p; wins/ties/losses; difference [95% CI] d):\n\n| system |",
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
                                let _ = write!(
                                    s,
                                    " {}; {}; {} |",
                                    fmt_p(v.p_adjusted),
                                    wtl(v),
                                    v.effect()
                                );
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

    /// CSV: `system,model,queries,baseline,task,split,task_queries` (what
    /// the row is over), then per metric `<m>` (mean), `<m>_p` (corrected
    /// p-value), `<m>_sig` (`better`, `worse` or empty), `<m>_wins`,
    /// `<m>_ties`, `<m>_losses`, `<m>_diff` (mean difference from the
    /// baseline), `<m>_ci_low`, `<m>_ci_high` (its 95% bootstrap interval),
    /// `<m>_d` (Cohen's d_z, empty where undefined) (all empty where not
    /// tested).
    pub fn to_csv(&self) -> String {
        self.delimited(',')
    }

    /// TSV: the columns of [`Comparison::to_csv`], tab-separated (tabs and
    /// line breaks inside a field become spaces).
    pub fn to_tsv(&self) -> String {
        self.delimited('\t')
    }

    fn delimited(&self, sep: char) -> String {
        let f = |x: &str| field(x, sep);
        let mut head = vec![
            "system".to_string(),
            "model".into(),
            "queries".into(),
            "baseline".into(),
            "task".into(),
            "split".into(),
            "task_queries".into(),
        ];
        for m in &self.metrics {
            let n = f(m.name());
            for suffix in [
                "", "_p", "_sig", "_wins", "_ties", "_losses", "_diff", "_ci_low", "_ci_high", "_d",
            ] {
                head.push(format!("{n}{suffix}"));
            }
        }
        let mut s = head.join(&sep.to_string());
        s.push('\n');
        for r in &self.rows {
            let mut cells = vec![
                f(&r.system),
                f(&r.detail),
                r.queries.to_string(),
                r.baseline.to_string(),
                f(&r.task.name),
                f(r.task.split.as_deref().unwrap_or("")),
                if r.task.name.is_empty() {
                    String::new()
                } else {
                    r.task.queries.to_string()
                },
            ];
            for m in &self.metrics {
                cells.push(fmt4(r.mean(*m)));
                match r.tests.get(m) {
                    Some(v) => cells.extend([
                        v.p_adjusted.to_string(),
                        v.mark.word().to_string(),
                        v.wins.to_string(),
                        v.ties.to_string(),
                        v.losses.to_string(),
                        v.mean_difference.to_string(),
                        v.ci_low.to_string(),
                        v.ci_high.to_string(),
                        v.effect_size.map_or(String::new(), |d| d.to_string()),
                    ]),
                    None => cells.extend(std::iter::repeat_n(String::new(), 9)),
                }
            }
            s.push_str(&cells.join(&sep.to_string()));
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
            TableFormat::Tsv => self.to_tsv(),
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

/// JSON: `metrics` (names), `baseline`, `task` (the shared [`Task`]:
/// `name`, `split`, `queries`; `null` when the systems' tasks differ),
/// `test` (`t` or `randomization`, with `permutations` and `seed` for the
/// latter), `correction`, `alpha`, `bootstrap` (`resamples`, `seed`),
/// `confidence` (0.95), `systems` (each a [`Row`]: `system`, `detail`,
/// `task`, `queries`, `baseline`, `means` and `tests` keyed by metric name,
/// each test a [`Versus`] with `ci_low`, `ci_high`, `effect_size`),
/// `notes`, `skipped`.
impl Serialize for Comparison {
    fn serialize<S: Serializer>(&self, ser: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("metrics", &self.metrics)?;
        m.serialize_entry("baseline", &self.baseline)?;
        m.serialize_entry("task", &self.task())?;
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
        m.serialize_entry("bootstrap", &self.bootstrap)?;
        m.serialize_entry("confidence", &CONFIDENCE)?;
        m.serialize_entry("systems", &self.rows)?;
        m.serialize_entry("notes", &self.notes)?;
        m.serialize_entry("skipped", &self.skipped)?;
        m.end()
    }
}

/// Drill-downs in `format`: text and Markdown give a titled table each
/// (query — its label where it has one, else its id —, baseline, system,
/// difference, text); CSV and TSV one long table
/// `system,baseline,metric,query,label,baseline_value,value,difference,text`;
/// JSON an array of [`DrillDown`]s.
pub fn render_drill_downs(list: &[DrillDown], format: TableFormat) -> String {
    let mut s = String::new();
    match format {
        TableFormat::Text => {
            for d in list {
                push_line(&mut s, &d.title());
                let qw = d
                    .rows
                    .iter()
                    .map(|r| r.name().chars().count())
                    .max()
                    .unwrap_or(0)
                    .max("query".len());
                let sw = d.system.chars().count().max(8);
                let bw = d.baseline.chars().count().max(8);
                push_line(
                    &mut s,
                    &format!(
                        "  {}  {:>bw$}  {:>sw$}  {:>10}  text",
                        pad("query", qw),
                        d.baseline,
                        d.system,
                        "difference"
                    ),
                );
                for r in &d.rows {
                    push_line(
                        &mut s,
                        &format!(
                            "  {}  {:>bw$}  {:>sw$}  {:>+10.4}  {}",
                            pad(r.name(), qw),
                            fmt4(r.baseline),
                            fmt4(r.value),
                            r.difference,
                            r.text.as_deref().unwrap_or("").replace(['\n', '\r'], " ")
                        ),
                    );
                }
                s.push('\n');
            }
        }
        TableFormat::Markdown => {
            for d in list {
                let _ = writeln!(s, "{}\n", md_cell(&d.title()));
                let _ = writeln!(
                    s,
                    "| query | {} | {} | difference | text |\n|---|---:|---:|---:|---|",
                    md_cell(&d.baseline),
                    md_cell(&d.system)
                );
                for r in &d.rows {
                    let _ = writeln!(
                        s,
                        "| {} | {} | {} | {:+.4} | {} |",
                        md_cell(r.name()),
                        fmt4(r.baseline),
                        fmt4(r.value),
                        r.difference,
                        md_cell(r.text.as_deref().unwrap_or(""))
                    );
                }
                s.push('\n');
            }
        }
        TableFormat::Csv | TableFormat::Tsv => {
            let sep = if format == TableFormat::Csv {
                ','
            } else {
                '\t'
            };
            let j = sep.to_string();
            s.push_str(
                &[
                    "system",
                    "baseline",
                    "metric",
                    "query",
                    "label",
                    "baseline_value",
                    "value",
                    "difference",
                    "text",
                ]
                .join(&j),
            );
            s.push('\n');
            for d in list {
                for r in &d.rows {
                    s.push_str(
                        &[
                            field(&d.system, sep),
                            field(&d.baseline, sep),
                            field(d.metric.name(), sep),
                            field(&r.query, sep),
                            field(r.label.as_deref().unwrap_or(""), sep),
                            r.baseline.to_string(),
                            r.value.to_string(),
                            r.difference.to_string(),
                            field(r.text.as_deref().unwrap_or(""), sep),
                        ]
                        .join(&j),
                    );
                    s.push('\n');
                }
            }
        }
        TableFormat::Json => {
            s = serde_json::to_string(list).expect("drill-downs serialise");
            s.push('\n');
        }
    }
    s
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

/// A CSV field (quoted when needed), or a TSV one (tabs and line breaks as spaces).
fn field(s: &str, sep: char) -> String {
    if sep == '\t' {
        s.replace(['\t', '\n', '\r'], " ")
    } else if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
