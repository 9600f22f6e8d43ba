//! The Jobs screen: training sessions, their curves and the new-job form —
//! state, key handling, backend answers and drawing, as a [`Screen`]. The
//! table, the new-job form, the charts and the detail panes (selection,
//! log, details popup) each have their own file.

mod charts;
mod detail;
mod form;
mod table;

use std::collections::{BTreeSet, HashMap};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

pub use detail::{draw_detail, draw_edit_meta};
pub use form::{draw_form, JobForm};

use super::{edit_text, Ctx, Screen, View};
use crate::tui::app::Popup;
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context, Keymap};
use crate::tui::state::UiState;
use crate::tui::ui::*;
use charts::{draw_loss_chart, draw_valid_chart};
use detail::{detail_lines_len, draw_log_pane};
use rosetta::jobs;
use rosetta::plot::XAxis;
use rosetta::session::runs::{distinct_labels, RunFilter};
use rosetta::session::Curves;
use table::{counts_text, draw_table, k_sweep};

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
    fn apply(&mut self, chunk: MetricsChunk) {
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
    /// Requests in flight.
    pending_scan: bool,
    pending_tail: BTreeSet<String>,
    pending_log: bool,
}

/// Lines of `log.txt` the log pane asks for (more than any pane is high).
const LOG_PANE_LINES: usize = 200;

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
        let names: Vec<String> = ids
            .iter()
            .map(|id| {
                self.sessions
                    .iter()
                    .find(|s| &s.id == id)
                    .map_or(id.clone(), |s| s.label().to_string())
            })
            .collect();
        rosetta::session::runs::unique_names(&names, ids)
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
    fn move_sel(&mut self, delta: isize) {
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
    fn sweep_id(&self) -> &str {
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

/// Work the Jobs screen asks of the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Rescan the sessions root.
    ListSessions,
    /// Read new metrics records.
    TailMetrics { session: String, offset: u64 },
    /// Read a session's settings (duplicate-with-changes).
    SessionSpec { session: String },
    /// Start a job.
    Launch(Box<JobSpec>),
    /// Read the launcher last used under the sessions root.
    LauncherMemory,
    /// Stop a job.
    Cancel(String),
    /// Restart a job from its checkpoint.
    Resume(String),
    /// A session's details (the details popup).
    SessionDetail(String),
    /// The last `lines` lines of a session's log (the log pane).
    LogTail { session: String, lines: usize },
    /// Set a session's name, tags or note.
    SetMeta {
        session: String,
        field: MetaField,
        value: String,
    },
    /// Delete a session.
    Delete(String),
}

/// The backend's answers to [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Sessions(Result<Vec<SessionSummary>, String>),
    Metrics {
        session: String,
        offset: u64,
        chunk: Result<MetricsChunk, String>,
    },
    Spec {
        session: String,
        spec: Result<Box<JobSpec>, String>,
    },
    Launched(Result<Launched, String>),
    LauncherMemory(Result<LauncherMemory, String>),
    Cancelled {
        session: String,
        result: Result<(), String>,
    },
    Resumed {
        session: String,
        result: Result<Launched, String>,
    },
    Detail {
        session: String,
        result: Result<Box<RunDetail>, String>,
    },
    LogTail {
        session: String,
        result: Result<Vec<String>, String>,
    },
    MetaSet {
        session: String,
        field: MetaField,
        result: Result<(), String>,
    },
    Deleted {
        session: String,
        result: Result<(), String>,
    },
}

impl JobsScreen {
    /// Queues a rescan of the sessions root (unless one is in flight).
    pub fn poll_sessions(&mut self, cx: &mut Ctx<'_>) {
        if !self.pending_scan {
            self.pending_scan = true;
            cx.send(Request::ListSessions);
        }
    }

    /// Queues metrics tails for the selected and marked sessions, and the
    /// selected session's log when the log pane shows.
    pub fn poll_metrics(&mut self, cx: &mut Ctx<'_>) {
        // a sweep's row has no curves nor log of its own
        let session = self.selected_session().map(|s| s.id.clone());
        if let (true, false, Some(s)) = (self.show_log, self.pending_log, session.clone()) {
            self.pending_log = true;
            cx.send(Request::LogTail {
                session: s,
                lines: LOG_PANE_LINES,
            });
        }
        let mut want: BTreeSet<String> = self.marked.clone();
        if let Some(s) = session {
            want.insert(s);
        }
        for id in want {
            if self.pending_tail.contains(&id) {
                continue;
            }
            let offset = self.series.get(&id).map_or(0, |s| s.offset);
            self.pending_tail.insert(id.clone());
            cx.send(Request::TailMetrics {
                session: id,
                offset,
            });
        }
    }

    fn action(&mut self, a: Action, cx: &mut Ctx<'_>) {
        match a {
            Action::Up => self.move_sel(-1),
            Action::Down => self.move_sel(1),
            Action::PageUp => self.move_sel(-10),
            Action::PageDown => self.move_sel(10),
            Action::Top => self.move_sel(-100000),
            Action::Bottom => self.move_sel(100000),
            Action::Filter => self.editing_filter = true,
            Action::NewJob => {
                // the configured workspace, else the newest session's
                let workspace = Some(cx.settings.workspace.clone())
                    .filter(|w| !w.is_empty())
                    .or_else(|| {
                        self.sessions
                            .iter()
                            .map(|s| s.workspace.clone())
                            .find(|w| !w.is_empty())
                    })
                    .unwrap_or_default();
                let spec = JobSpec {
                    workspace,
                    launcher: self.launcher.clone(),
                    ..Default::default()
                };
                *cx.popup = Some(Popup::Form(JobForm::new("New training job", &spec)));
            }
            Action::DuplicateJob => {
                if let Some(s) = self.selected_session() {
                    let session = s.id.clone();
                    cx.send(Request::SessionSpec { session });
                } else {
                    self.no_job_selected(cx);
                }
            }
            Action::CancelJob => match self.selected_session() {
                Some(s) if !s.state.is_final() => {
                    *cx.popup = Some(Popup::ConfirmCancel(s.id.clone()));
                }
                Some(s) => {
                    let m = format!("{} is {}: nothing to cancel", s.id, s.state.as_str());
                    cx.error(m)
                }
                None => self.no_job_selected(cx),
            },
            Action::ResumeJob => match self.selected_session() {
                Some(s) if s.state.is_final() && s.state != State::Done => {
                    let id = s.id.clone();
                    cx.info(format!("resuming {id}…"));
                    cx.send(Request::Resume(id));
                }
                Some(s) if !s.state.is_final() && s.alive == Some(false) => {
                    let id = s.id.clone();
                    cx.info(format!("resuming {id} (its process is gone)…"));
                    cx.send(Request::Resume(id));
                }
                Some(s) => {
                    let m = format!("{} is {}: nothing to resume", s.id, s.state.as_str());
                    cx.error(m)
                }
                None => self.no_job_selected(cx),
            },
            Action::MarkJob => {
                if let Some(id) = self.selected_session().map(|s| s.id.clone()) {
                    if !self.marked.remove(&id) {
                        self.marked.insert(id);
                    }
                    self.poll_metrics(cx);
                }
            }
            Action::ToggleHistory => self.full_history = !self.full_history,
            Action::ToggleParts => self.show_parts = !self.show_parts,
            Action::ToggleLogScale => self.log_loss = !self.log_loss,
            Action::ToggleLogPane => {
                self.show_log = !self.show_log;
                if self.show_log {
                    self.poll_metrics(cx);
                } else {
                    self.log = None;
                }
            }
            Action::CycleXAxis => self.x_axis = self.x_axis.next(),
            Action::CycleSmoothing => {
                self.smoothing = (self.smoothing + 1) % SMOOTHING.len();
                let a = self.smooth();
                cx.info(if a > 0.0 {
                    format!("smoothing: EMA {a} (raw curve faint beneath)")
                } else {
                    "smoothing off".to_string()
                });
            }
            Action::SortJobs => {
                // each column ascending, then descending, then the next; off after the last
                let keys = self.sort_keys();
                self.sort = match self.sort.take() {
                    None => keys.first().map(|k| (k.clone(), false)),
                    Some((k, false)) => Some((k, true)),
                    Some((k, true)) => keys
                        .iter()
                        .position(|x| *x == k)
                        .and_then(|i| keys.get(i + 1))
                        .map(|k| (k.clone(), false)),
                };
                match &self.sort {
                    Some((k, d)) => {
                        cx.info(format!("sorted by {k}{}", if *d { " ↓" } else { " ↑" }))
                    }
                    None => cx.info("folder order"),
                }
            }
            Action::CycleMetric => {
                // the figures the selected session records, loss first
                let names = self
                    .selected
                    .as_ref()
                    .and_then(|id| self.series.get(id))
                    .map(|s| s.curves.metric_names())
                    .unwrap_or_default();
                if names.is_empty() {
                    cx.error("no figures recorded yet");
                } else {
                    let cur = self.chart_metric.clone().unwrap_or_else(|| "MRR".into());
                    let i = names.iter().position(|n| *n == cur).map_or(0, |i| i + 1);
                    let next = names[i % names.len()].clone();
                    cx.info(format!("right chart: {next}"));
                    self.chart_metric = Some(next);
                }
            }
            Action::Enter => match self.selected_session() {
                // a sweep's row (or point) opens and closes the group
                None if self.selected_sweep().is_some() => {
                    let id = self.selected_sweep().unwrap_or_default();
                    if !self.expanded.remove(&id) {
                        self.expanded.insert(id.clone());
                    }
                    self.selected = Some(sweep_key(&id));
                }
                Some(s) => {
                    let session = s.id.clone();
                    *cx.popup = Some(Popup::Detail {
                        session: session.clone(),
                        scroll: 0,
                        detail: None,
                    });
                    cx.send(Request::SessionDetail(session));
                }
                None => self.no_job_selected(cx),
            },
            Action::DeleteJob => match self.selected_session() {
                Some(s) if !s.state.is_final() && s.alive != Some(false) => {
                    let m = format!(
                        "{} is {}: cancel it (c) before deleting",
                        s.id,
                        s.state.as_str()
                    );
                    cx.error(m)
                }
                Some(s) => *cx.popup = Some(Popup::ConfirmDelete(s.id.clone())),
                None => self.no_job_selected(cx),
            },
            Action::RenameJob | Action::TagJob | Action::NoteJob => match self.selected_session() {
                Some(s) => {
                    let (field, value) = match a {
                        Action::RenameJob => (MetaField::Name, s.name.clone()),
                        Action::TagJob => (MetaField::Tags, s.tags.join(" ")),
                        _ => (MetaField::Note, s.note.clone()),
                    };
                    *cx.popup = Some(Popup::EditMeta {
                        session: s.id.clone(),
                        field,
                        value,
                    });
                }
                None => self.no_job_selected(cx),
            },
            Action::PhasePrev | Action::PhaseNext => {
                let n = self
                    .selected
                    .as_ref()
                    .and_then(|id| self.series.get(id))
                    .map_or(0, |s| s.curves.loss_phases.len());
                if n > 1 {
                    let cur = self.loss_phase.unwrap_or(n - 1).min(n - 1);
                    let next = if a == Action::PhasePrev {
                        cur.saturating_sub(1)
                    } else {
                        cur + 1
                    };
                    // past the last phase: follow the job again
                    self.loss_phase = (next < n - 1).then_some(next);
                }
            }
            _ => {}
        }
        if matches!(
            a,
            Action::Up
                | Action::Down
                | Action::PageUp
                | Action::PageDown
                | Action::Top
                | Action::Bottom
        ) {
            self.poll_metrics(cx);
        }
    }

    /// A key in a Jobs popup (details, delete confirmation, name/tags/note
    /// editor): the popup as it stays open, or `None` when it closes.
    pub(crate) fn popup_key(
        &mut self,
        p: Popup,
        k: KeyEvent,
        action: Option<Action>,
        cx: &mut Ctx<'_>,
    ) -> Option<Popup> {
        match p {
            Popup::Detail {
                session,
                scroll,
                detail,
            } => {
                let scroll = match (k.code, action) {
                    (KeyCode::Esc, _) | (_, Some(Action::Quit)) => return None,
                    (_, Some(Action::Down)) => scroll.saturating_add(1),
                    (_, Some(Action::Up)) => scroll.saturating_sub(1),
                    (_, Some(Action::PageDown)) => scroll.saturating_add(10),
                    (_, Some(Action::PageUp)) => scroll.saturating_sub(10),
                    (_, Some(Action::Top)) => 0,
                    (_, Some(Action::Bottom)) => detail_lines_len(&detail) as u16,
                    _ => scroll,
                };
                Some(Popup::Detail {
                    session,
                    scroll,
                    detail,
                })
            }
            Popup::ConfirmDelete(id) => match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    cx.info(format!("deleting {id}…"));
                    cx.send(Request::Delete(id));
                    None
                }
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('N') => None,
                _ => Some(Popup::ConfirmDelete(id)),
            },
            Popup::EditMeta {
                session,
                field,
                mut value,
            } => {
                match k.code {
                    KeyCode::Esc => return None,
                    KeyCode::Enter => {
                        cx.send(Request::SetMeta {
                            session,
                            field,
                            value,
                        });
                        return None;
                    }
                    KeyCode::Backspace => {
                        value.pop();
                    }
                    KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        value.clear()
                    }
                    KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                        value.push(c)
                    }
                    _ => {}
                }
                Some(Popup::EditMeta {
                    session,
                    field,
                    value,
                })
            }
            other => Some(other),
        }
    }

    /// The error of an action on one job with none selected (a sweep's
    /// row is no job: its sessions are, once it is open).
    fn no_job_selected(&self, cx: &mut Ctx<'_>) {
        if self.selected_sweep().is_some() {
            cx.error("a sweep's row: Enter opens it, then select one of its sessions");
        } else {
            cx.error("no job selected");
        }
    }

    /// A job alert on the status line, with the terminal bell when the
    /// settings ask for it.
    fn alert(&self, msg: String, bad: bool, cx: &mut Ctx<'_>) {
        crate::tui::log::info(&format!("alert: {msg}"));
        if bad {
            cx.error(msg);
        } else {
            cx.info(msg);
        }
        *cx.bell |= cx.settings.bell;
    }

    /// Alerts for the jobs whose state changed between two scans: finished,
    /// failed, cancelled, their process gone, or their loss diverging.
    fn job_alerts(&self, old: &[SessionSummary], cx: &mut Ctx<'_>) {
        let mut alerts = Vec::new();
        for s in &self.sessions {
            let Some(o) = old.iter().find(|o| o.id == s.id) else {
                continue;
            };
            let name = s.label().to_string();
            if !o.state.is_final() && s.state.is_final() {
                let bad = s.state != State::Done;
                let mut m = format!("job {name} {}", s.state.as_str());
                if let (true, Some(e)) = (bad, &s.error) {
                    m.push_str(&format!(": {e}"));
                } else if let Some(b) = s.best_mrr {
                    m.push_str(&format!(" (best MRR {b:.4})"));
                }
                alerts.push((m, bad));
            } else if o.alive == Some(true) && s.alive == Some(false) {
                alerts.push((format!("job {name}: its process is gone (crashed?)"), true));
            }
            if o.divergence.is_none() && !s.state.is_final() {
                if let Some(d) = &s.divergence {
                    alerts.push((format!("job {name} diverging: {d}"), true));
                }
            }
        }
        for (m, bad) in alerts {
            self.alert(m, bad, cx);
        }
    }

    fn reply(&mut self, r: Reply, cx: &mut Ctx<'_>) -> bool {
        let mut changed = true;
        match r {
            Reply::Sessions(res) => {
                self.pending_scan = false;
                match res {
                    Ok(list) => {
                        if self.sessions == list && self.scanned {
                            changed = false;
                        }
                        let old = std::mem::replace(&mut self.sessions, list);
                        if self.scanned {
                            self.job_alerts(&old, cx);
                        }
                        self.scanned = true;
                        self.error = None;
                        self.keep_selection_shown();
                        let known: BTreeSet<String> =
                            self.sessions.iter().map(|s| s.id.clone()).collect();
                        self.marked.retain(|m| known.contains(m));
                        self.series.retain(|k, _| known.contains(k));
                    }
                    Err(e) => self.error = Some(e),
                }
            }
            Reply::Metrics {
                session,
                offset,
                chunk,
            } => {
                self.pending_tail.remove(&session);
                match chunk {
                    Ok(c) => {
                        let s = self.series.entry(session).or_default();
                        if s.offset != offset {
                            return false; // stale answer
                        }
                        if c.records.is_empty() && !c.reset && c.next_offset == offset {
                            changed = false;
                        }
                        s.apply(c);
                    }
                    Err(e) => cx.error(e),
                }
            }
            Reply::Spec { session, spec } => match spec {
                Ok(spec) => {
                    let spec = JobSpec {
                        launcher: self.launcher.clone(),
                        ..*spec
                    };
                    *cx.popup = Some(Popup::Form(JobForm::new(
                        format!("New job from {session}"),
                        &spec,
                    )))
                }
                Err(e) => cx.error(e),
            },
            Reply::LauncherMemory(res) => match res {
                Ok(m) => {
                    self.launcher = m;
                    return false;
                }
                Err(e) => cx.error(format!("launcher not recalled: {e}")),
            },
            Reply::Launched(res) => {
                let form_open = matches!(cx.popup, Some(Popup::Form(_)));
                match res {
                    Ok(l) => {
                        if form_open {
                            *cx.popup = None;
                        }
                        let on = l
                            .slurm_job
                            .as_ref()
                            .map(|j| format!(" on Slurm (job {j})"))
                            .unwrap_or_default();
                        match l.sweep {
                            Some((sweep, sessions)) => {
                                cx.info(format!(
                                    "started sweep {sweep}: {} sessions{on}",
                                    sessions.len()
                                ));
                                cx.started.extend(sessions);
                                self.selected = Some(sweep_key(&sweep));
                            }
                            None => {
                                let id = l.session;
                                cx.started.insert(id.clone());
                                self.selected = Some(id.clone());
                                cx.info(format!("started {id}{on}"));
                            }
                        }
                        cx.send(Request::LauncherMemory);
                        self.poll_sessions(cx);
                    }
                    Err(e) => {
                        if let Some(Popup::Form(f)) = cx.popup {
                            f.submitting = false;
                            f.error = Some(e.clone());
                        }
                        cx.error(e);
                    }
                }
            }
            Reply::Cancelled { session, result } => match result {
                Ok(()) => {
                    cx.info(format!("asked {session} to stop"));
                    self.poll_sessions(cx);
                }
                Err(e) => cx.error(e),
            },
            Reply::Detail { session, result } => match cx.popup {
                Some(Popup::Detail {
                    session: open,
                    detail,
                    ..
                }) if *open == session => *detail = Some(result),
                _ => return false,
            },
            Reply::MetaSet {
                session,
                field,
                result,
            } => match result {
                Ok(()) => {
                    cx.info(format!("{session}: {} saved", field.as_str()));
                    self.poll_sessions(cx);
                }
                Err(e) => cx.error(e),
            },
            Reply::LogTail { session, result } => {
                self.pending_log = false;
                let new = Some((session, result));
                if !self.show_log || self.log == new {
                    return false;
                }
                self.log = new;
            }
            Reply::Deleted { session, result } => match result {
                Ok(()) => {
                    cx.info(format!("deleted {session}"));
                    self.marked.remove(&session);
                    self.series.remove(&session);
                    if self.selected.as_deref() == Some(session.as_str()) {
                        self.selected = None;
                    }
                    self.poll_sessions(cx);
                }
                Err(e) => cx.error(e),
            },
            Reply::Resumed { result, .. } => match result {
                Ok(l) => {
                    let id = l.session;
                    cx.started.insert(id.clone());
                    cx.info(format!("resumed {id}"));
                    self.poll_sessions(cx);
                }
                Err(e) => cx.error(e),
            },
        }
        changed
    }
}

impl Screen for JobsScreen {
    type Request = Request;
    type Reply = Reply;

    fn execute(
        backend: &dyn Backend,
        req: Request,
        _progress: &(dyn Fn(Reply) + Send + Sync),
    ) -> Reply {
        let s = |e: rosetta::Error| e.to_string();
        match req {
            Request::ListSessions => Reply::Sessions(backend.list_sessions().map_err(s)),
            Request::TailMetrics { session, offset } => {
                let chunk = backend.tail_metrics(&session, offset).map_err(s);
                Reply::Metrics {
                    session,
                    offset,
                    chunk,
                }
            }
            Request::SessionSpec { session } => {
                let spec = backend.session_spec(&session).map(Box::new).map_err(s);
                Reply::Spec { session, spec }
            }
            Request::Launch(spec) => Reply::Launched(backend.launch(&spec).map_err(s)),
            Request::LauncherMemory => Reply::LauncherMemory(backend.launcher_memory().map_err(s)),
            Request::Cancel(session) => {
                let result = backend.cancel(&session).map_err(s);
                Reply::Cancelled { session, result }
            }
            Request::Resume(session) => {
                let result = backend.resume(&session).map_err(s);
                Reply::Resumed { session, result }
            }
            Request::SessionDetail(session) => {
                let result = backend.session_detail(&session).map(Box::new).map_err(s);
                Reply::Detail { session, result }
            }
            Request::LogTail { session, lines } => {
                let result = backend.log_tail(&session, lines).map_err(s);
                Reply::LogTail { session, result }
            }
            Request::SetMeta {
                session,
                field,
                value,
            } => {
                let result = backend.set_meta(&session, field, &value).map_err(s);
                Reply::MetaSet {
                    session,
                    field,
                    result,
                }
            }
            Request::Delete(session) => {
                let result = backend.delete(&session).map_err(s);
                Reply::Deleted { session, result }
            }
        }
    }

    fn failed(req: &Request, msg: String) -> Reply {
        match req.clone() {
            Request::ListSessions => Reply::Sessions(Err(msg)),
            Request::TailMetrics { session, offset } => Reply::Metrics {
                session,
                offset,
                chunk: Err(msg),
            },
            Request::SessionSpec { session } => Reply::Spec {
                session,
                spec: Err(msg),
            },
            Request::Launch(_) => Reply::Launched(Err(msg)),
            Request::LauncherMemory => Reply::LauncherMemory(Err(msg)),
            Request::Cancel(session) => Reply::Cancelled {
                session,
                result: Err(msg),
            },
            Request::Resume(session) => Reply::Resumed {
                session,
                result: Err(msg),
            },
            Request::SessionDetail(session) => Reply::Detail {
                session,
                result: Err(msg),
            },
            Request::LogTail { session, .. } => Reply::LogTail {
                session,
                result: Err(msg),
            },
            Request::SetMeta { session, field, .. } => Reply::MetaSet {
                session,
                field,
                result: Err(msg),
            },
            Request::Delete(session) => Reply::Deleted {
                session,
                result: Err(msg),
            },
        }
    }

    fn on_reply(&mut self, r: Reply, cx: &mut Ctx<'_>) -> bool {
        self.reply(r, cx)
    }

    fn on_action(&mut self, a: Action, cx: &mut Ctx<'_>) {
        self.action(a, cx)
    }

    fn on_close(&mut self, cx: &mut Ctx<'_>) {
        *cx.message = None;
        self.filter.clear();
    }

    fn editing(&self) -> bool {
        self.editing_filter
    }

    fn edit_key(&mut self, k: KeyEvent, _cx: &mut Ctx<'_>) {
        match k.code {
            KeyCode::Esc | KeyCode::Enter => self.editing_filter = false,
            _ => {
                if edit_text(&mut self.filter, &k) {
                    self.keep_selection_shown();
                }
            }
        }
    }

    fn stop_editing(&mut self) {
        self.editing_filter = false;
    }

    fn copy_text(&self) -> Option<String> {
        self.selected_session().map(|s| s.dir.display().to_string())
    }

    fn draw(&self, f: &mut Frame, area: Rect, view: &View<'_>) {
        // `view.jobs` is this screen
        draw(f, view, area)
    }

    fn hints(&self, km: &Keymap) -> String {
        hints(self, km)
    }
}

/// Draws the Jobs screen: the sessions table, the selection's details and
/// the curves.
fn draw(f: &mut Frame, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
    let j = view.jobs;
    let visible = j.visible();
    let rows = j.rows();
    let table_h = ((rows.len().max(1) + 3) as u16).clamp(5, (area.height * 2 / 5).max(5));
    let [ta, da, ca] = Layout::vertical([
        Constraint::Length(table_h),
        Constraint::Length(2),
        Constraint::Min(6),
    ])
    .areas(area);
    draw_table(f, view, ta, &visible, &rows);
    let wide = area.width >= 110;
    let sel = j.selected_session();
    let series = sel.and_then(|s| j.series.get(&s.id));
    // detail lines
    let mut lines = Vec::new();
    if let Some(s) = sel {
        let mut l1 = vec![
            Span::styled(format!(" {} ", s.id), th.accent()),
            Span::styled(state_label(s), state_style(th, s)),
        ];
        if let (Some(e), Some(n)) = (s.epoch, s.epochs) {
            l1.push(Span::raw(format!(" · epoch {e}/{n}")));
        }
        if let Some((phase, _, step)) = series.and_then(|x| x.curves.last_step.as_ref()) {
            l1.push(Span::raw(format!(" · {phase} step {step}")));
        }
        if let Some((_, loss)) = series.and_then(|x| x.curves.loss.last()) {
            l1.push(Span::raw(format!(" · loss {loss:.4}")));
        }
        if let Some(m) = s.best_mrr {
            l1.push(Span::styled(format!(" · best MRR {m:.4}"), th.good()));
        }
        if let Some(d) = &s.slurm_job {
            l1.push(Span::raw(format!(" · Slurm job {d}")));
        }
        if !wide {
            l1.push(Span::styled(
                format!(" · {} · {}", s.device, s.workspace),
                th.dim(),
            ));
        }
        lines.push(Line::from(l1));
        let l2 = if let (State::Cancelled, Some(e)) = (s.state, &s.error) {
            // a cancel is the user's choice, not a failure
            Span::styled(format!(" {e}"), th.dim())
        } else if let Some(e) = &s.error {
            Span::styled(format!(" error: {e}"), th.bad())
        } else if !s.state.is_final() && s.alive == Some(false) {
            Span::styled(
                format!(
                    " process {} is gone without a final state (crashed?)",
                    s.pid.unwrap_or(0)
                ),
                th.bad(),
            )
        } else if let Some(ev) = series.and_then(|x| x.curves.last_event.as_ref()) {
            Span::styled(format!(" {ev}"), th.dim())
        } else {
            Span::raw("")
        };
        lines.push(Line::from(l2));
    } else if let Some(JobRow::Sweep(sw)) = rows
        .iter()
        .find(|r| Some(r.key()) == j.selected.as_ref().map(|k| sweep_key(k_sweep(k))))
    {
        lines.push(Line::from(vec![
            Span::styled(format!(" sweep {} ", sw.id), th.accent()),
            Span::raw(format!(
                "· {} · {} sessions: {}",
                sw.model,
                sw.sessions(),
                counts_text(&sw.state_counts())
            )),
        ]));
        lines.push(Line::from(Span::styled(
            format!(
                " varying: {} · MRR: mean ± sd over the seeds done · Enter opens/closes",
                if sw.varying.is_empty() {
                    "—".to_string()
                } else {
                    sw.varying.join(", ")
                }
            ),
            th.dim(),
        )));
    }
    f.render_widget(Paragraph::new(lines), da);

    if !j.show_log {
        let [lc, vc] =
            Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(ca);
        draw_loss_chart(f, view, lc);
        draw_valid_chart(f, view, vc);
    } else if area.width >= 140 {
        let [lc, vc, gc] = Layout::horizontal([
            Constraint::Percentage(40),
            Constraint::Percentage(28),
            Constraint::Percentage(32),
        ])
        .areas(ca);
        draw_loss_chart(f, view, lc);
        draw_valid_chart(f, view, vc);
        draw_log_pane(f, view, gc);
    } else {
        // narrow: the log takes the validation chart's place
        let [lc, gc] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(ca);
        draw_loss_chart(f, view, lc);
        draw_log_pane(f, view, gc);
    }
}

/// The Jobs screen's key hints on the status line (fits 80 columns; `?`
/// lists the rest).
fn hints(j: &JobsScreen, km: &Keymap) -> String {
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if j.editing_filter {
        return "type: words, lr=0.01, mrr>0.5, tag=x · Enter/Esc done".into();
    }
    format!(
        "{} details · {} new · {} mark · {} log-y · {} log · {} filter · {} more",
        k(C::Jobs, Action::Enter),
        k(C::Jobs, Action::NewJob),
        k(C::Jobs, Action::MarkJob),
        k(C::Jobs, Action::ToggleLogScale),
        k(C::Jobs, Action::ToggleLogPane),
        k(C::Global, Action::Filter),
        k(C::Global, Action::Help)
    )
}
