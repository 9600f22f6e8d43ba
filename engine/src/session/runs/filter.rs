//! The filter language over runs (by setting or figure) and the index of
//! runs it filters.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::session::metrics::{Curves, MetricsTail};
use crate::session::{list_sessions, SessionEntry, METRICS_FILE};
use crate::{Error, Result};

use super::labels::{best_figures, setting};
use super::meta::{folder_name, RunMeta};

/// One run as the run table shows it: the session entry, its meta and its
/// figures.
#[derive(Debug, Clone)]
pub struct Run {
    /// Folder, config and status as listed.
    pub entry: SessionEntry,
    /// Its `meta.json`.
    pub meta: RunMeta,
    /// What could not be read in `meta.json`, if anything.
    pub meta_problem: Option<String>,
    /// Best figures ([`best_figures`]).
    pub best: BTreeMap<String, (f64, f64)>,
    /// Why the training looks diverged ([`Curves::divergence`]), if it does.
    pub divergence: Option<String>,
}

impl Run {
    /// Folder name.
    pub fn id(&self) -> String {
        folder_name(&self.entry.dir)
    }
    /// Display name ([`RunMeta::display_name`]).
    pub fn name(&self) -> String {
        self.meta.display_name(&self.entry.dir)
    }
    /// Value of a setting ([`setting`]).
    pub fn setting(&self, key: &str) -> Option<String> {
        self.entry.config.as_ref().and_then(|c| setting(c, key))
    }
}

/// The runs under a sessions root, kept between scans: each session's
/// metrics are read incrementally, so rescanning every few seconds reads
/// only what jobs appended.
#[derive(Debug, Default)]
pub struct RunIndex {
    tails: BTreeMap<PathBuf, (MetricsTail, Curves)>,
}

impl RunIndex {
    /// Every session under `root` ([`list_sessions`]) with its meta, best
    /// figures and divergence, in folder-name order.
    pub fn scan(&mut self, root: &Path) -> Result<Vec<Run>> {
        let entries = list_sessions(root)?;
        self.tails
            .retain(|d, _| entries.iter().any(|e| &e.dir == d));
        Ok(entries
            .into_iter()
            .map(|entry| {
                let (meta, meta_problem) = match RunMeta::read(&entry.dir) {
                    Ok(m) => (m, None),
                    Err(e) => (RunMeta::default(), Some(e.to_string())),
                };
                let (tail, curves) = self.tails.entry(entry.dir.clone()).or_insert_with(|| {
                    (
                        MetricsTail::new(entry.dir.join(METRICS_FILE)),
                        Curves::default(),
                    )
                });
                if let Ok(b) = tail.poll() {
                    if b.restarted {
                        *curves = Curves::default();
                    }
                    for r in &b.records {
                        curves.push(r);
                    }
                }
                Run {
                    best: best_figures(curves),
                    divergence: curves.divergence(),
                    entry,
                    meta,
                    meta_problem,
                }
            })
            .collect())
    }
}

/// A comparison in a [`RunFilter`] term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

/// One term of a [`RunFilter`].
#[derive(Debug, Clone, PartialEq)]
enum Term {
    /// Plain text: a substring of the name, folder, model, workspace,
    /// state, tags or note.
    Text(String),
    /// `key OP value`.
    Cmp(String, Op, String),
}

/// A run filter as typed in the filter box or given to `rosetta jobs
/// --filter`: words that must all match. A plain word matches a run whose
/// name, folder, model, workspace, state, tags or note contain it (case
/// ignored); `KEY=VALUE`, `KEY!=VALUE` compare a setting (`lr=0.01`,
/// `model=s2net`), `tag=T` a tag, `state=done` the state; `KEY>X`,
/// `KEY>=X`, `KEY<X`, `KEY<=X` compare a number: a best figure (`mrr>0.5`,
/// `p@1>=0.3`, `loss<0.4`, names case-insensitive) or a numeric setting
/// (`dim>=256`). A run without the key does not match a comparison.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    terms: Vec<Term>,
}

impl std::str::FromStr for RunFilter {
    type Err = Error;
    fn from_str(s: &str) -> Result<RunFilter> {
        let mut terms = Vec::new();
        for w in s.split_whitespace() {
            let ops = [
                ("!=", Op::Ne),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("=", Op::Eq),
                (">", Op::Gt),
                ("<", Op::Lt),
            ];
            let found = ops
                .iter()
                .filter_map(|(t, op)| w.find(t).map(|i| (i, *t, *op)))
                .min_by_key(|(i, t, _)| (*i, std::cmp::Reverse(t.len())));
            let Some((i, t, op)) = found else {
                terms.push(Term::Text(w.to_lowercase()));
                continue;
            };
            let (k, v) = (&w[..i], &w[i + t.len()..]);
            if k.is_empty() || v.is_empty() {
                return Err(Error::invalid(format!(
                    "filter `{w}`: expected KEY{t}VALUE (e.g. lr=0.01, mrr>0.5)"
                )));
            }
            if matches!(op, Op::Gt | Op::Ge | Op::Lt | Op::Le) && v.parse::<f64>().is_err() {
                return Err(Error::invalid(format!(
                    "filter `{w}`: `{v}` is not a number"
                )));
            }
            terms.push(Term::Cmp(k.to_lowercase(), op, v.to_string()));
        }
        Ok(RunFilter { terms })
    }
}

/// What a [`RunFilter`] looks at in a run; the engine's [`Run`] and the
/// workbench's rows both provide it.
pub trait Filterable {
    /// Text a plain word is searched in (lower-cased by the filter).
    fn haystack(&self) -> String;
    /// The value of setting `key` (lower-case), if the run has it.
    fn setting(&self, key: &str) -> Option<String>;
    /// Tags.
    fn tags(&self) -> Vec<String>;
    /// The state's name.
    fn state(&self) -> String;
    /// The best value of figure `name` (case-insensitive), if recorded.
    fn figure(&self, name: &str) -> Option<f64>;
}

impl RunFilter {
    /// Whether the filter has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether `run` passes every term.
    pub fn matches(&self, run: &dyn Filterable) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Text(w) => run.haystack().to_lowercase().contains(w),
            Term::Cmp(k, op, v) => cmp_term(run, k, *op, v),
        })
    }
}

fn cmp_term(run: &dyn Filterable, key: &str, op: Op, v: &str) -> bool {
    if matches!(op, Op::Eq | Op::Ne) {
        let eq = match key {
            "tag" | "tags" => run.tags().iter().any(|t| t.eq_ignore_ascii_case(v)),
            "state" => run.state().eq_ignore_ascii_case(v),
            k => match run.setting(k) {
                Some(s) => {
                    s.eq_ignore_ascii_case(v)
                        || matches!((s.parse::<f64>(), v.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
                }
                None => match (run.figure(k), v.parse::<f64>()) {
                    (Some(a), Ok(b)) => a == b,
                    _ => return op == Op::Ne,
                },
            },
        };
        return eq == (op == Op::Eq);
    }
    let Ok(x) = v.parse::<f64>() else {
        return false;
    };
    let val = run
        .figure(key)
        .or_else(|| run.setting(key).and_then(|s| s.parse().ok()));
    match val {
        None => false,
        Some(a) => match op {
            Op::Gt => a > x,
            Op::Ge => a >= x,
            Op::Lt => a < x,
            Op::Le => a <= x,
            Op::Eq | Op::Ne => unreachable!("handled above"),
        },
    }
}

impl Filterable for Run {
    fn haystack(&self) -> String {
        let mut s = format!(
            "{} {} {}",
            self.name(),
            self.id(),
            self.entry.state().as_str()
        );
        if let Some(c) = &self.entry.config {
            s.push_str(&format!(" {} {}", c.model, c.workspace.display()));
        }
        for t in &self.meta.tags {
            s.push(' ');
            s.push_str(t);
        }
        s.push(' ');
        s.push_str(&self.meta.note);
        s
    }
    fn setting(&self, key: &str) -> Option<String> {
        let c = self.entry.config.as_ref()?;
        setting(c, key).or_else(|| {
            c.params
                .iter()
                .chain(&c.given)
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        })
    }
    fn tags(&self) -> Vec<String> {
        self.meta.tags.clone()
    }
    fn state(&self) -> String {
        self.entry.state().as_str().to_string()
    }
    fn figure(&self, name: &str) -> Option<f64> {
        self.best
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.0)
            .or_else(|| {
                (name.eq_ignore_ascii_case("mrr"))
                    .then(|| self.entry.status.as_ref()?.best_mrr)
                    .flatten()
            })
    }
}
