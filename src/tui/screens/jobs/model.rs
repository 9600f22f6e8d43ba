//! The Jobs screen's state: the sessions as scanned, the selection, marks,
//! curves and chart settings, its popup, and what the table derives from
//! them (the rows in order, the selected session or sweep, labels).

use std::collections::{BTreeSet, HashMap};

use super::popup::JobsPopup;
use crate::tui::backend::*;
use crate::tui::screens::Sessions;
use crate::tui::state::UiState;
use rosetta::jobs;
use rosetta::plot::XAxis;
use rosetta::session::runs::{distinct_labels, RunFilter};
use rosetta::session::Curves;

/// A session's curves as tailed so far (the engine's [`Curves`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// Bytes of `metrics.jsonl` read so far.
    pub offset: u64,
    /// Malformed lines seen.
    pub bad_lines: usize,
    /// The curves.
    pub curves: Curves,
}

impl Series {
    pub(super) fn apply(&mut self, chunk: MetricsChunk) {
        if chunk.reset {
            *self = Series::default();
        }
        self.offset = chunk.next_offset;
        self.bad_lines += chunk.bad_lines;
        for r in &chunk.records {
            self.curves.push(r);
        }
    }
}

/// Jobs screen state.
#[derive(Debug, Clone, Default)]
pub struct JobsScreen {
    /// Sessions as last scanned.
    pub sessions: Vec<SessionSummary>,
    /// At least one scan came back.
    pub scanned: bool,
    /// Scan error, if the last one failed.
    pub error: Option<String>,
    /// Selected session id.
    pub selected: Option<String>,
    /// List filter text.
    pub filter: String,
    /// Typing into the filter.
    pub editing_filter: bool,
    /// Sessions marked for overlaid charts.
    pub marked: BTreeSet<String>,
    /// Curves per session.
    pub series: HashMap<String, Series>,
    /// Charts show all steps (else the recent window).
    pub full_history: bool,
    /// The training phase the loss chart shows (index into the selected
    /// session's phases); `None` follows the latest.
    pub loss_phase: Option<usize>,
    /// The loss chart shows the step records' named parts (loss terms, a
    /// discriminator's loss and accuracy) instead of the loss.
    pub show_parts: bool,
    /// The loss chart's y axis is logarithmic.
    pub log_loss: bool,
    /// The charts' x axis.
    pub x_axis: XAxis,
    /// Index into [`SMOOTHING`] of the charts' EMA factor.
    pub smoothing: usize,
    /// The right chart's figure (`None`: validation MRR).
    pub chart_metric: Option<String>,
    /// Marks and baseline as last remembered (`None`: not remembered).
    pub persisted: Option<UiState>,
    /// The log pane beside the curves is shown.
    pub show_log: bool,
    /// The log pane's session and its last lines (or why they cannot be
    /// read).
    pub log: Option<(String, Result<Vec<String>, String>)>,
    /// The table's sort: a column (`name`, `model`, `state`, `best MRR`
    /// or a setting) and whether descending; `None`: folder order.
    pub sort: Option<(String, bool)>,
    /// The launcher last used under the sessions root: where the new-job
    /// form starts.
    pub launcher: LauncherMemory,
    /// Sweeps shown open (their points and sessions under their row).
    pub expanded: BTreeSet<String>,
    /// The screen's open popup (the new-job form, a confirmation, a
    /// session's details or its name/tags/note editor).
    pub popup: Option<JobsPopup>,
    /// Requests in flight.
    pub(super) pending_scan: bool,
    pub(super) pending_tail: BTreeSet<String>,
    pub(super) pending_log: bool,
}

/// The EMA factors `s` steps through (0: no smoothing).
pub const SMOOTHING: [f64; 5] = [0.9, 0.95, 0.99, 0.0, 0.6];

impl JobsScreen {
    /// The filter as the engine parses it, or why it does not parse (then
    /// nothing is filtered out).
    pub fn run_filter(&self) -> Result<RunFilter, String> {
        self.filter.parse::<RunFilter>().map_err(|e| e.to_string())
    }
    /// Sessions passing the filter (the engine's [`RunFilter`]: words,
    /// `lr=0.01`, `mrr>0.5`, `tag=x`), in table order.
    pub fn visible(&self) -> Vec<&SessionSummary> {
        let f = self.run_filter().unwrap_or_default();
        let mut v: Vec<&SessionSummary> = self.sessions.iter().filter(|s| f.matches(*s)).collect();
        if let Some((key, desc)) = &self.sort {
            // numbers as numbers, missing values last whatever the direction
            let value = |s: &SessionSummary| -> Option<String> {
                match key.as_str() {
                    "name" => Some(s.label().to_string()),
                    "model" => Some(s.model.clone()),
                    "state" => Some(s.state.as_str().to_string()),
                    "best MRR" => s.best_mrr.map(|m| m.to_string()),
                    k => s.settings.get(k).cloned(),
                }
            };
            rosetta::session::runs::sort_by_column(&mut v, *desc, |s| value(s));
        }
        v
    }
    /// The columns `S` steps through: name, model, state, best MRR, then
    /// each setting that differs between the listed sessions.
    pub fn sort_keys(&self) -> Vec<String> {
        let f = self.run_filter().unwrap_or_default();
        let maps: Vec<&std::collections::BTreeMap<String, String>> = self
            .sessions
            .iter()
            .filter(|s| f.matches(*s))
            .map(|s| &s.settings)
            .collect();
        let mut keys: Vec<String> = ["name", "model", "state", "best MRR"]
            .map(String::from)
            .to_vec();
        keys.extend(
            rosetta::session::runs::differing_keys(&maps)
                .into_iter()
                .filter(|k| k != "model"),
        );
        keys
    }
    /// The EMA factor of the charts.
    pub fn smooth(&self) -> f64 {
        SMOOTHING[self.smoothing % SMOOTHING.len()]
    }
    /// Labels of `ids` that tell them apart: display names (a name two
    /// sessions share gets its folder name added) with their shared prefix
    /// elided (the engine's `distinct_labels`).
    pub fn labels(&self, ids: &[String]) -> Vec<String> {
        distinct_labels(&self.names(ids))
    }
    /// Names of `ids` that tell them apart, whole: display names, a name
    /// two sessions share with its folder name added (the engine's
    /// `unique_names`). The Compare table's systems are named so.
    pub fn names(&self, ids: &[String]) -> Vec<String> {
        Sessions {
            list: &self.sessions,
            ..Sessions::default()
        }
        .names(ids)
    }
    /// The table's rows in order: sessions, and each sweep as one row
    /// where its first session would be (the engine's grouping,
    /// [`jobs::sweep::group`]), with its points and their sessions under it
    /// when it is open.
    pub fn rows(&self) -> Vec<JobRow<'_>> {
        let visible = self.visible();
        let members = visible
            .iter()
            .filter_map(|s| {
                Some((
                    s.sweep.clone()?,
                    jobs::sweep::MemberFigures {
                        dir: s.dir.clone(),
                        model: s.model.clone(),
                        state: s.state,
                        best: s.best.clone(),
                    },
                ))
            })
            .collect();
        let sweeps = jobs::sweep::group(members);
        let mut out = Vec::new();
        let mut shown = BTreeSet::new();
        for s in &visible {
            let Some(m) = &s.sweep else {
                out.push(JobRow::Session(s, 0));
                continue;
            };
            if !shown.insert(m.id.clone()) {
                continue;
            }
            let Some(sw) = sweeps.iter().find(|x| x.id == m.id) else {
                continue;
            };
            out.push(JobRow::Sweep(sw.clone()));
            if self.expanded.contains(&sw.id) {
                for (i, p) in sw.points.iter().enumerate() {
                    out.push(JobRow::Point {
                        sweep: sw.id.clone(),
                        index: i,
                        label: sw.point_label(i),
                        point: p.clone(),
                    });
                    for d in &p.dirs {
                        if let Some(x) = visible.iter().find(|v| &v.dir == d) {
                            out.push(JobRow::Session(x, 2));
                        }
                    }
                }
            }
        }
        out
    }
    /// The selected session, when its row shows.
    pub fn selected_session(&self) -> Option<&SessionSummary> {
        let id = self.selected.as_ref()?;
        self.rows().into_iter().find_map(|r| match r {
            JobRow::Session(s, _) if &s.id == id => Some(s),
            _ => None,
        })
    }
    /// The sweep whose row (or point row) is selected.
    pub fn selected_sweep(&self) -> Option<String> {
        let key = self.selected.as_ref()?;
        self.rows().into_iter().find_map(|r| match &r {
            JobRow::Sweep(_) | JobRow::Point { .. } if r.key() == *key => {
                Some(r.sweep_id().to_string())
            }
            _ => None,
        })
    }
    /// Index of the selection among the rows.
    pub fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_ref()?;
        self.rows().iter().position(|r| &r.key() == id)
    }
    /// Selects the first row when the selection is not shown.
    pub fn keep_selection_shown(&mut self) {
        if self.selected_index().is_none() {
            if let Some(k) = self.rows().first().map(JobRow::key) {
                self.selected = Some(k);
            }
        }
    }
    pub(super) fn move_sel(&mut self, delta: isize) {
        let v: Vec<String> = self.rows().iter().map(JobRow::key).collect();
        if v.is_empty() {
            return;
        }
        let cur = self.selected_index().map(|i| i as isize).unwrap_or(-1);
        let n = v.len() as isize;
        let i = (cur + delta).clamp(0, n - 1) as usize;
        self.selected = Some(v[i].clone());
    }
}

/// One row of the Jobs table.
#[derive(Debug, Clone)]
pub enum JobRow<'a> {
    /// A session; indented by `depth` under its sweep's point.
    Session(&'a SessionSummary, usize),
    /// A sweep: its sessions as one group (mean ± sd over seeds).
    Sweep(SweepSummary),
    /// One point of an open sweep.
    Point {
        /// The sweep id.
        sweep: String,
        /// The point's index in the sweep.
        index: usize,
        /// Its varying settings (`dim=64 lr=0.01`).
        label: String,
        /// Its sessions and figures.
        point: jobs::sweep::PointSummary,
    },
}

impl JobRow<'_> {
    /// The row's selection key: a session's id; a sweep's (or its
    /// point's) starts with `.`, which no session name does.
    pub fn key(&self) -> String {
        match self {
            JobRow::Session(s, _) => s.id.clone(),
            JobRow::Sweep(sw) => sweep_key(&sw.id),
            JobRow::Point { sweep, index, .. } => format!("{}/{index}", sweep_key(sweep)),
        }
    }
    pub(super) fn sweep_id(&self) -> &str {
        match self {
            JobRow::Session(s, _) => s.sweep.as_ref().map_or("", |m| m.id.as_str()),
            JobRow::Sweep(sw) => &sw.id,
            JobRow::Point { sweep, .. } => sweep,
        }
    }
}

/// The selection key of sweep `id`'s row.
pub fn sweep_key(id: &str) -> String {
    format!(".sweep/{id}")
}
