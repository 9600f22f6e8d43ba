//! The Jobs screen: training sessions, their curves and the new-job form —
//! state, key handling, backend answers and drawing.

use std::collections::{BTreeSet, HashMap};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Clear, LegendPosition, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

use crate::tui::app::{App, Popup, Reply, Request};
use crate::tui::backend::*;
use crate::tui::config::Theme;
use crate::tui::keymap::{Action, Context};
use crate::tui::state::{self, UiState};
use crate::tui::ui::*;
use ratatui::symbols::Marker;
use ratatui::widgets::{Axis, Chart, Dataset, GraphType};
use rosetta::jobs;
use rosetta::plot::{self, PlotOptions, XAxis};
use rosetta::session::runs::{distinct_labels, elide_middle, RunFilter};
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

/// Recent window of the charts, in records (the title says which steps,
/// epochs or times they span).
pub const RECENT_POINTS: usize = 500;

/// Index of the model field in [`JobForm::fields`].
const MODEL_FIELD: usize = 1;
/// Index of the launcher field (`local` or `slurm`).
const LAUNCHER_FIELD: usize = 9;
/// Index of the first Slurm option field (partition, gres, time, account).
const SLURM_FIELDS: usize = 10;
/// Index of the sweep's grid field (then seeds, parallel).
const GRID_FIELD: usize = 14;

/// One field of the new-job form.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// Label.
    pub label: &'static str,
    /// Text as typed.
    pub value: String,
    /// Validation error of the last attempt.
    pub error: Option<String>,
}

/// The new-job form.
#[derive(Debug, Clone, PartialEq)]
pub struct JobForm {
    /// Popup title.
    pub title: String,
    /// Fields in order: workspace, model, dim, epochs, lr, negatives, device,
    /// init, other settings; the launcher (local or slurm) and Slurm's
    /// partition, gres, time and account; a sweep's grid, seeds and
    /// parallel.
    pub fields: Vec<FormField>,
    /// Focused field.
    pub focus: usize,
    /// Waiting for the launch answer.
    pub submitting: bool,
    /// Error of the last launch.
    pub error: Option<String>,
}

impl JobForm {
    /// A form filled from `spec` (its launcher: the one remembered).
    pub fn new(title: impl Into<String>, spec: &JobSpec) -> JobForm {
        fn opt<T: ToString>(v: Option<T>) -> String {
            v.map(|x| x.to_string()).unwrap_or_default()
        }
        let f = |label, value: String| FormField {
            label,
            value,
            error: None,
        };
        let o = &spec.launcher.options;
        let sw = spec.sweep.clone().unwrap_or_default();
        JobForm {
            title: title.into(),
            fields: vec![
                f("workspace", spec.workspace.clone()),
                f("model", spec.model.clone()),
                f("dim", opt(spec.dim)),
                f("epochs", opt(spec.epochs)),
                f("lr", opt(spec.lr)),
                f("negatives", spec.negatives.clone().unwrap_or_default()),
                f("device", spec.device.to_string()),
                f("init session", spec.init.clone().unwrap_or_default()),
                f(
                    "other --set",
                    spec.extra
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                f(
                    "run on",
                    if spec.launcher.slurm {
                        "slurm"
                    } else {
                        "local"
                    }
                    .into(),
                ),
                f("partition", o.partition.clone().unwrap_or_default()),
                f("gres (GPUs)", o.gres.clone().unwrap_or_default()),
                f("time limit", o.time.clone().unwrap_or_default()),
                f("account", o.account.clone().unwrap_or_default()),
                f(
                    "sweep grid",
                    sw.grid
                        .iter()
                        .map(|(k, vs)| format!("{k}={}", vs.join(",")))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                f(
                    "seeds",
                    sw.seeds
                        .iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                f("parallel", opt(sw.parallel)),
            ],
            focus: 0,
            submitting: false,
            error: None,
        }
    }

    /// Checks every field; on success the job to launch, else the errors
    /// are stored on the fields. Empty optional fields mean the model's
    /// default (Slurm's default for the Slurm options). The checks are the
    /// engine's, as `rosetta train` and `rosetta sweep` make them.
    pub fn validate(&mut self, sessions: &[SessionSummary]) -> Option<JobSpec> {
        for f in &mut self.fields {
            f.error = None;
        }
        let v: Vec<String> = self
            .fields
            .iter()
            .map(|f| f.value.trim().to_string())
            .collect();
        let mut errs: Vec<(usize, String)> = Vec::new();
        if v[0].is_empty() {
            errs.push((0, "required: path of a workspace.toml".into()));
        }
        let model = v[1].as_str();
        let model_ok = match jobs::check_model(model) {
            Ok(()) => true,
            Err(e) => {
                errs.push((1, e.to_string()));
                false
            }
        };
        // the engine's checks (the model registry's): whether the model
        // reads the setting at all (CL-LSI has no epochs, BM25 learns
        // nothing) and the value's form; none without a known model
        let check = |i: usize, key: &str, value: &str, errs: &mut Vec<(usize, String)>| {
            if !model_ok {
                return None;
            }
            jobs::check_setting(model, key, value)
                .map_err(|e| errs.push((i, e.to_string())))
                .ok()
        };
        let field = |i: usize, key: &str, errs: &mut Vec<(usize, String)>| {
            (!v[i].is_empty())
                .then(|| check(i, key, &v[i], errs))
                .flatten()
        };
        let dim = field(2, "dim", &mut errs).and_then(|x| x.parse().ok());
        let epochs = field(3, "epochs", &mut errs).and_then(|x| x.parse().ok());
        let lr = field(4, "lr", &mut errs).and_then(|x| x.parse().ok());
        let negatives = field(5, "negatives", &mut errs);
        let device = jobs::check_device(&v[6])
            .map_err(|e| errs.push((6, e.to_string())))
            .unwrap_or_default();
        let init = field(7, "init", &mut errs);
        if let Some(i) = &init {
            if !sessions
                .iter()
                .any(|s| &s.id == i && s.state == State::Done)
            {
                errs.push((7, "not a finished session".into()));
            }
        }
        let words: Vec<String> = v[8].split_whitespace().map(str::to_string).collect();
        let mut extra = Vec::new();
        match jobs::parse_settings(&words) {
            Ok(given) => {
                for (k, val) in given {
                    if FORM_KEYS.contains(&k.as_str()) {
                        errs.push((8, format!("{k}: use its own field")));
                    } else if let Some(val) = check(8, &k, &val, &mut errs) {
                        extra.push((k, val));
                    }
                }
            }
            Err(e) => errs.push((8, e.to_string())),
        }
        // the launcher: Slurm's options each checked as sbatch takes them
        let slurm = match v[LAUNCHER_FIELD].as_str() {
            "local" => false,
            "slurm" => true,
            _ => {
                errs.push((LAUNCHER_FIELD, "local or slurm (←/→ choose)".into()));
                false
            }
        };
        let mut options = SlurmOptions::default();
        for (i, slot) in [
            &mut options.partition,
            &mut options.gres,
            &mut options.time,
            &mut options.account,
        ]
        .into_iter()
        .enumerate()
        {
            let i = SLURM_FIELDS + i;
            if v[i].is_empty() {
                continue;
            }
            *slot = Some(v[i].clone());
            let mut one = SlurmOptions::default();
            match i - SLURM_FIELDS {
                0 => one.partition = slot.clone(),
                1 => one.gres = slot.clone(),
                2 => one.time = slot.clone(),
                _ => one.account = slot.clone(),
            }
            if let Err(e) = one.sbatch_args() {
                errs.push((i, e.to_string()));
            }
        }
        // a sweep: the grid's axes (`rosetta sweep --grid`), each value
        // checked against the model; seeds and parallel only with a grid
        let mut grid = Vec::new();
        for w in v[GRID_FIELD].split_whitespace() {
            match jobs::sweep::parse_axis(w) {
                Ok((k, vals)) => {
                    // the grid gives the value: the fixed field must be empty
                    let free = match k.as_str() {
                        "dim" => v[2].is_empty(),
                        "epochs" => v[3].is_empty(),
                        "lr" => v[4].is_empty(),
                        "negatives" => v[5].is_empty(),
                        "init" => v[7].is_empty(),
                        _ => !extra.iter().any(|(e, _)| *e == k),
                    };
                    if !free {
                        errs.push((GRID_FIELD, format!("{k}: clear its fixed value first")));
                    }
                    for val in &vals {
                        check(GRID_FIELD, &k, val, &mut errs);
                    }
                    grid.push((k, vals));
                }
                Err(e) => errs.push((GRID_FIELD, e.to_string())),
            }
        }
        let seeds = if v[GRID_FIELD + 1].is_empty() {
            vec![1]
        } else {
            jobs::sweep::parse_seeds(&v[GRID_FIELD + 1])
                .map_err(|e| errs.push((GRID_FIELD + 1, e.to_string())))
                .unwrap_or_default()
        };
        let parallel = if v[GRID_FIELD + 2].is_empty() {
            None
        } else {
            match v[GRID_FIELD + 2].parse::<usize>() {
                Ok(n) => {
                    if let Err(e) = jobs::sweep::check_parallel(Some(n)) {
                        errs.push((GRID_FIELD + 2, e.to_string()));
                    }
                    Some(n)
                }
                Err(_) => {
                    errs.push((GRID_FIELD + 2, "a number of sessions at once".into()));
                    None
                }
            }
        };
        if v[GRID_FIELD].is_empty() {
            for i in [GRID_FIELD + 1, GRID_FIELD + 2] {
                if !v[i].is_empty() {
                    errs.push((i, "for a sweep: give a grid".into()));
                }
            }
        }
        if errs.is_empty() {
            Some(JobSpec {
                extra,
                workspace: v[0].clone(),
                model: v[1].clone(),
                dim,
                epochs,
                lr,
                negatives,
                device,
                init,
                launcher: LauncherMemory { slurm, options },
                sweep: (!grid.is_empty()).then_some(SweepSpec {
                    grid,
                    seeds,
                    parallel,
                }),
            })
        } else {
            for (i, e) in errs {
                self.fields[i].error.get_or_insert(e);
            }
            None
        }
    }
}

impl App {
    /// Queues a rescan of the sessions root (unless one is in flight).
    pub fn poll_sessions(&mut self) {
        if !self.jobs.pending_scan {
            self.jobs.pending_scan = true;
            self.outbox.push(Request::ListSessions);
        }
    }

    /// Queues metrics tails for the selected and marked sessions, and the
    /// selected session's log when the log pane shows.
    pub fn poll_metrics(&mut self) {
        // a sweep's row has no curves nor log of its own
        let session = self.jobs.selected_session().map(|s| s.id.clone());
        if let (true, false, Some(s)) = (self.jobs.show_log, self.jobs.pending_log, session.clone())
        {
            self.jobs.pending_log = true;
            self.outbox.push(Request::LogTail {
                session: s,
                lines: LOG_PANE_LINES,
            });
        }
        let mut want: BTreeSet<String> = self.jobs.marked.clone();
        if let Some(s) = session {
            want.insert(s);
        }
        for id in want {
            if self.jobs.pending_tail.contains(&id) {
                continue;
            }
            let offset = self.jobs.series.get(&id).map_or(0, |s| s.offset);
            self.jobs.pending_tail.insert(id.clone());
            self.outbox.push(Request::TailMetrics {
                session: id,
                offset,
            });
        }
    }

    pub(crate) fn jobs_action(&mut self, a: Action) {
        match a {
            Action::Up => self.jobs.move_sel(-1),
            Action::Down => self.jobs.move_sel(1),
            Action::PageUp => self.jobs.move_sel(-10),
            Action::PageDown => self.jobs.move_sel(10),
            Action::Top => self.jobs.move_sel(-100000),
            Action::Bottom => self.jobs.move_sel(100000),
            Action::Filter => self.jobs.editing_filter = true,
            Action::NewJob => {
                // the configured workspace, else the newest session's
                let workspace = Some(self.settings.workspace.clone())
                    .filter(|w| !w.is_empty())
                    .or_else(|| {
                        self.jobs
                            .sessions
                            .iter()
                            .map(|s| s.workspace.clone())
                            .find(|w| !w.is_empty())
                    })
                    .unwrap_or_default();
                let spec = JobSpec {
                    workspace,
                    launcher: self.jobs.launcher.clone(),
                    ..Default::default()
                };
                self.popup = Some(Popup::Form(JobForm::new("New training job", &spec)));
            }
            Action::DuplicateJob => {
                if let Some(s) = self.jobs.selected_session() {
                    let session = s.id.clone();
                    self.outbox.push(Request::SessionSpec { session });
                } else {
                    self.no_job_selected();
                }
            }
            Action::CancelJob => match self.jobs.selected_session() {
                Some(s) if !s.state.is_final() => {
                    self.popup = Some(Popup::ConfirmCancel(s.id.clone()));
                }
                Some(s) => {
                    let m = format!("{} is {}: nothing to cancel", s.id, s.state.as_str());
                    self.error(m)
                }
                None => self.no_job_selected(),
            },
            Action::ResumeJob => match self.jobs.selected_session() {
                Some(s) if s.state.is_final() && s.state != State::Done => {
                    let id = s.id.clone();
                    self.info(format!("resuming {id}…"));
                    self.outbox.push(Request::Resume(id));
                }
                Some(s) if !s.state.is_final() && s.alive == Some(false) => {
                    let id = s.id.clone();
                    self.info(format!("resuming {id} (its process is gone)…"));
                    self.outbox.push(Request::Resume(id));
                }
                Some(s) => {
                    let m = format!("{} is {}: nothing to resume", s.id, s.state.as_str());
                    self.error(m)
                }
                None => self.no_job_selected(),
            },
            Action::MarkJob => {
                if let Some(id) = self.jobs.selected_session().map(|s| s.id.clone()) {
                    if !self.jobs.marked.remove(&id) {
                        self.jobs.marked.insert(id);
                    }
                    self.poll_metrics();
                }
            }
            Action::ToggleHistory => self.jobs.full_history = !self.jobs.full_history,
            Action::ToggleParts => self.jobs.show_parts = !self.jobs.show_parts,
            Action::ToggleLogScale => self.jobs.log_loss = !self.jobs.log_loss,
            Action::ToggleLogPane => {
                self.jobs.show_log = !self.jobs.show_log;
                if self.jobs.show_log {
                    self.poll_metrics();
                } else {
                    self.jobs.log = None;
                }
            }
            Action::CycleXAxis => self.jobs.x_axis = self.jobs.x_axis.next(),
            Action::CycleSmoothing => {
                self.jobs.smoothing = (self.jobs.smoothing + 1) % SMOOTHING.len();
                let a = self.jobs.smooth();
                self.info(if a > 0.0 {
                    format!("smoothing: EMA {a} (raw curve faint beneath)")
                } else {
                    "smoothing off".to_string()
                });
            }
            Action::SortJobs => {
                // each column ascending, then descending, then the next; off after the last
                let keys = self.jobs.sort_keys();
                self.jobs.sort = match self.jobs.sort.take() {
                    None => keys.first().map(|k| (k.clone(), false)),
                    Some((k, false)) => Some((k, true)),
                    Some((k, true)) => keys
                        .iter()
                        .position(|x| *x == k)
                        .and_then(|i| keys.get(i + 1))
                        .map(|k| (k.clone(), false)),
                };
                match &self.jobs.sort {
                    Some((k, d)) => {
                        self.info(format!("sorted by {k}{}", if *d { " ↓" } else { " ↑" }))
                    }
                    None => self.info("folder order"),
                }
            }
            Action::CycleMetric => {
                // the figures the selected session records, loss first
                let names = self
                    .jobs
                    .selected
                    .as_ref()
                    .and_then(|id| self.jobs.series.get(id))
                    .map(|s| s.curves.metric_names())
                    .unwrap_or_default();
                if names.is_empty() {
                    self.error("no figures recorded yet");
                } else {
                    let cur = self
                        .jobs
                        .chart_metric
                        .clone()
                        .unwrap_or_else(|| "MRR".into());
                    let i = names.iter().position(|n| *n == cur).map_or(0, |i| i + 1);
                    let next = names[i % names.len()].clone();
                    self.info(format!("right chart: {next}"));
                    self.jobs.chart_metric = Some(next);
                }
            }
            Action::Enter => match self.jobs.selected_session() {
                // a sweep's row (or point) opens and closes the group
                None if self.jobs.selected_sweep().is_some() => {
                    let id = self.jobs.selected_sweep().unwrap_or_default();
                    if !self.jobs.expanded.remove(&id) {
                        self.jobs.expanded.insert(id.clone());
                    }
                    self.jobs.selected = Some(sweep_key(&id));
                }
                Some(s) => {
                    let session = s.id.clone();
                    self.popup = Some(Popup::Detail {
                        session: session.clone(),
                        scroll: 0,
                        detail: None,
                    });
                    self.outbox.push(Request::SessionDetail(session));
                }
                None => self.no_job_selected(),
            },
            Action::DeleteJob => match self.jobs.selected_session() {
                Some(s) if !s.state.is_final() && s.alive != Some(false) => {
                    let m = format!(
                        "{} is {}: cancel it (c) before deleting",
                        s.id,
                        s.state.as_str()
                    );
                    self.error(m)
                }
                Some(s) => self.popup = Some(Popup::ConfirmDelete(s.id.clone())),
                None => self.no_job_selected(),
            },
            Action::RenameJob | Action::TagJob | Action::NoteJob => {
                match self.jobs.selected_session() {
                    Some(s) => {
                        let (field, value) = match a {
                            Action::RenameJob => (MetaField::Name, s.name.clone()),
                            Action::TagJob => (MetaField::Tags, s.tags.join(" ")),
                            _ => (MetaField::Note, s.note.clone()),
                        };
                        self.popup = Some(Popup::EditMeta {
                            session: s.id.clone(),
                            field,
                            value,
                        });
                    }
                    None => self.no_job_selected(),
                }
            }
            Action::PhasePrev | Action::PhaseNext => {
                let n = self
                    .jobs
                    .selected
                    .as_ref()
                    .and_then(|id| self.jobs.series.get(id))
                    .map_or(0, |s| s.curves.loss_phases.len());
                if n > 1 {
                    let cur = self.jobs.loss_phase.unwrap_or(n - 1).min(n - 1);
                    let next = if a == Action::PhasePrev {
                        cur.saturating_sub(1)
                    } else {
                        cur + 1
                    };
                    // past the last phase: follow the job again
                    self.jobs.loss_phase = (next < n - 1).then_some(next);
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
            self.poll_metrics();
        }
    }

    /// A key in a Jobs popup (details, delete confirmation, name/tags/note
    /// editor): the popup as it stays open, or `None` when it closes.
    pub(crate) fn jobs_popup_key(
        &mut self,
        p: Popup,
        k: KeyEvent,
        action: Option<Action>,
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
                    self.info(format!("deleting {id}…"));
                    self.outbox.push(Request::Delete(id));
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
                        self.outbox.push(Request::SetMeta {
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

    /// Restores the marks and the Compare baseline remembered for this
    /// sessions root (when the settings name a state file).
    pub fn restore_ui_state(&mut self) {
        let Some(path) = self.settings.state_file.clone() else {
            return;
        };
        match state::load(&path) {
            Ok(f) => {
                let key = state::root_key(&self.settings.sessions_dir);
                let st = f.roots.get(&key).cloned().unwrap_or_default();
                self.jobs.marked = st.marked.iter().cloned().collect();
                self.compare.baseline = st.baseline.clone();
                self.jobs.persisted = Some(st);
                self.poll_metrics();
            }
            Err(e) => self.error(format!("marks not restored: {e}")),
        }
    }

    /// Queues a save of the marks and the baseline when they changed since
    /// the last one (when the settings name a state file).
    pub fn persist_ui_state(&mut self) {
        let Some(path) = self.settings.state_file.clone() else {
            return;
        };
        let now = UiState {
            marked: self.jobs.marked.iter().cloned().collect(),
            baseline: self.compare.baseline.clone(),
        };
        if self.jobs.persisted.as_ref() != Some(&now) {
            self.jobs.persisted = Some(now.clone());
            self.outbox.push(Request::SaveUiState {
                path,
                root: state::root_key(&self.settings.sessions_dir),
                state: now,
            });
        }
    }

    /// The error of an action on one job with none selected (a sweep's
    /// row is no job: its sessions are, once it is open).
    fn no_job_selected(&mut self) {
        if self.jobs.selected_sweep().is_some() {
            self.error("a sweep's row: Enter opens it, then select one of its sessions");
        } else {
            self.error("no job selected");
        }
    }

    /// A job alert on the status line, with the terminal bell when the
    /// settings ask for it.
    fn alert(&mut self, msg: String, bad: bool) {
        crate::tui::log::info(&format!("alert: {msg}"));
        if bad {
            self.error(msg);
        } else {
            self.info(msg);
        }
        self.bell |= self.settings.bell;
    }

    /// Alerts for the jobs whose state changed between two scans: finished,
    /// failed, cancelled, their process gone, or their loss diverging.
    fn job_alerts(&mut self, old: &[SessionSummary]) {
        let mut alerts = Vec::new();
        for s in &self.jobs.sessions {
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
            self.alert(m, bad);
        }
    }

    /// A key in the new-job form: the form as it stays open, or `None`
    /// when it closes.
    pub(crate) fn form_key(&mut self, mut form: JobForm, k: KeyEvent) -> Option<Popup> {
        if form.submitting {
            // Only Esc (close, the launch still completes) while waiting.
            return if k.code == KeyCode::Esc {
                None
            } else {
                Some(Popup::Form(form))
            };
        }
        let nf = form.fields.len();
        match k.code {
            KeyCode::Esc => return None,
            KeyCode::Tab | KeyCode::Down => form.focus = (form.focus + 1) % nf,
            KeyCode::BackTab | KeyCode::Up => form.focus = (form.focus + nf - 1) % nf,
            KeyCode::Backspace => {
                form.fields[form.focus].value.pop();
            }
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                form.fields[form.focus].value.clear()
            }
            // the launcher field is a choice: ←/→ toggle local and slurm
            KeyCode::Left | KeyCode::Right if form.focus == LAUNCHER_FIELD => {
                let f = &mut form.fields[LAUNCHER_FIELD].value;
                *f = if f.trim() == "local" {
                    "slurm"
                } else {
                    "local"
                }
                .into();
            }
            // the model field is a choice: ←/→ step through the registry
            KeyCode::Left | KeyCode::Right if form.focus == MODEL_FIELD => {
                let names = jobs::model_names();
                let cur = names
                    .iter()
                    .position(|n| *n == form.fields[MODEL_FIELD].value.trim());
                let n = names.len();
                let i = match (cur, k.code) {
                    (Some(i), KeyCode::Right) => (i + 1) % n,
                    (Some(i), _) => (i + n - 1) % n,
                    (None, _) => 0,
                };
                form.fields[MODEL_FIELD].value = names[i].to_string();
            }
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                form.fields[form.focus].value.push(c)
            }
            KeyCode::Enter => {
                if let Some(spec) = form.validate(&self.jobs.sessions) {
                    form.submitting = true;
                    form.error = None;
                    self.outbox.push(Request::Launch(spec));
                } else if let Some(i) = form.fields.iter().position(|f| f.error.is_some()) {
                    form.focus = i;
                }
            }
            _ => {}
        }
        // after a refused launch, check again as the user edits: a fixed
        // field loses its ✗ at once
        let edited = !matches!(
            k.code,
            KeyCode::Enter | KeyCode::Tab | KeyCode::BackTab | KeyCode::Up | KeyCode::Down
        );
        if edited && (form.error.is_some() || form.fields.iter().any(|f| f.error.is_some())) {
            form.error = None;
            form.validate(&self.jobs.sessions);
        }
        Some(Popup::Form(form))
    }

    /// Applies a Jobs answer (see [`App::on_reply`]); `false` when nothing
    /// shown changed.
    pub(crate) fn jobs_reply(&mut self, r: Reply) -> bool {
        let mut changed = true;
        match r {
            Reply::Sessions(res) => {
                self.jobs.pending_scan = false;
                match res {
                    Ok(list) => {
                        if self.jobs.sessions == list && self.jobs.scanned {
                            changed = false;
                        }
                        let old = std::mem::replace(&mut self.jobs.sessions, list);
                        if self.jobs.scanned {
                            self.job_alerts(&old);
                        }
                        self.jobs.scanned = true;
                        self.jobs.error = None;
                        self.jobs.keep_selection_shown();
                        let known: BTreeSet<String> =
                            self.jobs.sessions.iter().map(|s| s.id.clone()).collect();
                        self.jobs.marked.retain(|m| known.contains(m));
                        self.jobs.series.retain(|k, _| known.contains(k));
                    }
                    Err(e) => self.jobs.error = Some(e),
                }
            }
            Reply::Metrics {
                session,
                offset,
                chunk,
            } => {
                self.jobs.pending_tail.remove(&session);
                match chunk {
                    Ok(c) => {
                        let s = self.jobs.series.entry(session).or_default();
                        if s.offset != offset {
                            return false; // stale answer
                        }
                        if c.records.is_empty() && !c.reset && c.next_offset == offset {
                            changed = false;
                        }
                        s.apply(c);
                    }
                    Err(e) => self.error(e),
                }
            }
            Reply::Spec { session, spec } => match spec {
                Ok(spec) => {
                    let spec = JobSpec {
                        launcher: self.jobs.launcher.clone(),
                        ..*spec
                    };
                    self.popup = Some(Popup::Form(JobForm::new(
                        format!("New job from {session}"),
                        &spec,
                    )))
                }
                Err(e) => self.error(e),
            },
            Reply::LauncherMemory(res) => match res {
                Ok(m) => {
                    self.jobs.launcher = m;
                    return false;
                }
                Err(e) => self.error(format!("launcher not recalled: {e}")),
            },
            Reply::Launched(res) => {
                let form_open = matches!(self.popup, Some(Popup::Form(_)));
                match res {
                    Ok(l) => {
                        if form_open {
                            self.popup = None;
                        }
                        let on = l
                            .slurm_job
                            .as_ref()
                            .map(|j| format!(" on Slurm (job {j})"))
                            .unwrap_or_default();
                        match l.sweep {
                            Some((sweep, sessions)) => {
                                self.info(format!(
                                    "started sweep {sweep}: {} sessions{on}",
                                    sessions.len()
                                ));
                                self.started.extend(sessions);
                                self.jobs.selected = Some(sweep_key(&sweep));
                            }
                            None => {
                                let id = l.session;
                                self.started.insert(id.clone());
                                self.jobs.selected = Some(id.clone());
                                self.info(format!("started {id}{on}"));
                            }
                        }
                        self.outbox.push(Request::LauncherMemory);
                        self.poll_sessions();
                    }
                    Err(e) => {
                        if let Some(Popup::Form(f)) = &mut self.popup {
                            f.submitting = false;
                            f.error = Some(e.clone());
                        }
                        self.error(e);
                    }
                }
            }
            Reply::Cancelled { session, result } => match result {
                Ok(()) => {
                    self.info(format!("asked {session} to stop"));
                    self.poll_sessions();
                }
                Err(e) => self.error(e),
            },
            Reply::Detail { session, result } => match &mut self.popup {
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
                    self.info(format!("{session}: {} saved", field.as_str()));
                    self.poll_sessions();
                }
                Err(e) => self.error(e),
            },
            Reply::LogTail { session, result } => {
                self.jobs.pending_log = false;
                let new = Some((session, result));
                if !self.jobs.show_log || self.jobs.log == new {
                    return false;
                }
                self.jobs.log = new;
            }
            Reply::Deleted { session, result } => match result {
                Ok(()) => {
                    self.info(format!("deleted {session}"));
                    self.jobs.marked.remove(&session);
                    self.jobs.series.remove(&session);
                    if self.jobs.selected.as_deref() == Some(session.as_str()) {
                        self.jobs.selected = None;
                    }
                    self.poll_sessions();
                }
                Err(e) => self.error(e),
            },
            Reply::UiStateSaved(result) => match result {
                Ok(()) => return false,
                Err(e) => self.error(format!("marks not remembered: {e}")),
            },
            Reply::Resumed { result, .. } => match result {
                Ok(l) => {
                    let id = l.session;
                    self.started.insert(id.clone());
                    self.info(format!("resumed {id}"));
                    self.poll_sessions();
                }
                Err(e) => self.error(e),
            },
            _ => return false,
        }
        changed
    }
}

/// Draws the Jobs screen: the sessions table, the selection's details and
/// the curves.
pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let j = &app.jobs;
    let visible = j.visible();
    let rows = j.rows();
    let table_h = ((rows.len().max(1) + 3) as u16).clamp(5, (area.height * 2 / 5).max(5));
    let [ta, da, ca] = Layout::vertical([
        Constraint::Length(table_h),
        Constraint::Length(2),
        Constraint::Min(6),
    ])
    .areas(area);
    draw_table(f, app, ta, &visible, &rows);
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
        draw_loss_chart(f, app, lc);
        draw_valid_chart(f, app, vc);
    } else if area.width >= 140 {
        let [lc, vc, gc] = Layout::horizontal([
            Constraint::Percentage(40),
            Constraint::Percentage(28),
            Constraint::Percentage(32),
        ])
        .areas(ca);
        draw_loss_chart(f, app, lc);
        draw_valid_chart(f, app, vc);
        draw_log_pane(f, app, gc);
    } else {
        // narrow: the log takes the validation chart's place
        let [lc, gc] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(ca);
        draw_loss_chart(f, app, lc);
        draw_log_pane(f, app, gc);
    }
}

/// The log pane: the selected session's `log.txt`, its last lines as many
/// as fit (the end followed as the job writes).
fn draw_log_pane(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let j = &app.jobs;
    let hide = app
        .settings
        .keymap
        .keys_for(Context::Jobs, Action::ToggleLogPane);
    let title = format!(" log.txt · {hide} hide ");
    let sel = j.selected.as_deref();
    let lines: Vec<Line> = match (&j.log, sel) {
        (_, None) => vec![Line::styled(" no session selected", th.dim())],
        (Some((s, Ok(lines))), Some(id)) if s == id => {
            if lines.is_empty() {
                vec![Line::styled(" the job has written no log yet", th.dim())]
            } else {
                log_rows(
                    lines,
                    area.width.saturating_sub(2) as usize,
                    area.height.saturating_sub(2) as usize,
                )
                .into_iter()
                .map(|(time, text)| Line::from(vec![Span::styled(time, th.dim()), Span::raw(text)]))
                .collect()
            }
        }
        (Some((s, Err(e))), Some(id)) if s == id => {
            vec![Line::styled(format!(" ✗ {e}"), th.bad())]
        }
        _ => vec![Line::styled(" reading…", th.dim())],
    };
    f.render_widget(Paragraph::new(lines).block(block(th, title, false)), area);
}

/// The last `height` rows of `lines` wrapped at `width` cells, as
/// (time, text): a line's leading UTC stamp (`2026-11-26T10:48:04Z`) is
/// shown as its time of day (`10:48:04`), continuation rows are indented.
fn log_rows(lines: &[String], width: usize, height: usize) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    for l in lines.iter().rev() {
        let (time, text) = match l.split_once(' ') {
            Some((stamp, rest))
                if stamp.len() == 20
                    && stamp.ends_with('Z')
                    && stamp.as_bytes().get(10) == Some(&b'T') =>
            {
                (format!("{} ", &stamp[11..19]), rest)
            }
            _ => (String::new(), l.as_str()),
        };
        let indent = time.chars().count();
        let mut part: Vec<(String, String)> =
            wrap_ranges(text, width.saturating_sub(indent).max(8))
                .into_iter()
                .enumerate()
                .map(|(i, (a, b))| {
                    let lead = if i == 0 {
                        time.clone()
                    } else {
                        " ".repeat(indent)
                    };
                    (lead, text[a..b].to_string())
                })
                .collect();
        while let Some(r) = part.pop() {
            rows.push(r);
            if rows.len() == height {
                rows.reverse();
                return rows;
            }
        }
    }
    rows.reverse();
    rows
}

/// One column of the sessions table: header, width and a cell per row.
struct Column<'a> {
    header: String,
    width: u16,
    kind: ColKind,
    cell: Box<dyn Fn(&SessionSummary) -> Cell<'static> + 'a>,
}

/// What a column shows, for the rows of a sweep and its points.
#[derive(Debug, Clone, PartialEq)]
enum ColKind {
    State,
    Model,
    Setting(String),
    Mrr,
    Other,
}

/// The sweep id of a sweep row's key (or a point row's).
fn k_sweep(key: &str) -> &str {
    let id = key.strip_prefix(".sweep/").unwrap_or(key);
    match id.rsplit_once('/') {
        Some((s, i)) if i.parse::<usize>().is_ok() => s,
        _ => id,
    }
}

/// State counts, compactly: `2 running, 6 queued`.
fn counts_text(c: &std::collections::BTreeMap<&'static str, usize>) -> String {
    c.iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A group's states in a state cell: `4 done`, or `3/8 done` when mixed.
fn states_cell(states: &[State]) -> String {
    let n = states.len();
    match states.first() {
        Some(s0) if states.iter().all(|s| s == s0) => format!("{n} {}", s0.as_str()),
        _ => format!(
            "{}/{n} done",
            states.iter().filter(|s| **s == State::Done).count()
        ),
    }
}

/// The sessions table: fixed columns, then one column per setting that
/// differs between the listed sessions (the engine's "diff only"), as many
/// as fit; session labels elide the prefix the names share, never their end.
/// A sweep is one row (its varying settings' values, the best point's MRR
/// as mean ± sd); open, its points follow with their sessions.
fn draw_table(
    f: &mut Frame,
    app: &App,
    area: Rect,
    visible: &[&SessionSummary],
    table_rows: &[JobRow],
) {
    let th = &app.settings.theme;
    let j = &app.jobs;
    let wide = area.width >= 110;
    let maps: Vec<&std::collections::BTreeMap<String, String>> =
        visible.iter().map(|s| &s.settings).collect();
    let mut diff: Vec<String> = rosetta::session::runs::differing_keys(&maps)
        .into_iter()
        .filter(|k| k != "model" && !(wide && k == "workspace"))
        .collect();
    // the settings a sweep varies come first: they tell its points apart
    let varied: BTreeSet<&String> = table_rows
        .iter()
        .filter_map(|r| match r {
            JobRow::Sweep(sw) => Some(&sw.varying),
            _ => None,
        })
        .flatten()
        .collect();
    diff.sort_by_key(|k| !varied.contains(k));
    let ids: Vec<String> = visible.iter().map(|s| s.id.clone()).collect();
    let labels: HashMap<String, String> = ids.iter().cloned().zip(j.labels(&ids)).collect();
    let groups = table_rows.iter().any(|r| !matches!(r, JobRow::Session(..)));
    let mut cols: Vec<Column> = vec![
        Column {
            header: "state".into(),
            // Slurm's states are longer: `pending (JobHeldUser)`
            width: visible
                .iter()
                .map(|s| width(&state_label(s)))
                .max()
                .unwrap_or(0)
                .clamp(9, 21) as u16,
            kind: ColKind::State,
            cell: Box::new(move |s| Cell::from(Span::styled(state_label(s), state_style(th, s)))),
        },
        Column {
            header: "model".into(),
            width: 7,
            kind: ColKind::Model,
            cell: Box::new(|s| Cell::from(s.model.clone())),
        },
    ];
    if wide {
        cols.push(Column {
            header: "workspace".into(),
            width: 16,
            kind: ColKind::Other,
            cell: Box::new(|s| Cell::from(trunc(&workspace_label(&s.workspace), 16))),
        });
        cols.push(Column {
            header: "device".into(),
            width: 7,
            kind: ColKind::Other,
            cell: Box::new(|s| Cell::from(s.device.clone())),
        });
    }
    cols.push(Column {
        header: "progress".into(),
        width: 10,
        kind: ColKind::Other,
        cell: Box::new(|s| {
            Cell::from(match (s.state, s.progress) {
                (State::Done, _) => bar(1.0, 5),
                (_, Some(p)) => bar(p, 5),
                _ => String::new(),
            })
        }),
    });
    // ETA and throughput give way to the differing settings on a narrow screen
    if wide || diff.is_empty() {
        cols.push(Column {
            header: "ETA".into(),
            width: 5,
            kind: ColKind::Other,
            cell: Box::new(|s| {
                Cell::from(if !s.state.is_final() {
                    s.eta_s.map(fmt_duration).unwrap_or_default()
                } else {
                    String::new()
                })
            }),
        });
        cols.push(Column {
            header: "pairs/s".into(),
            width: 7,
            kind: ColKind::Other,
            cell: Box::new(|s| {
                Cell::from(s.pairs_per_s.map(|p| format!("{p:.0}")).unwrap_or_default())
            }),
        });
    }
    cols.push(Column {
        header: "best MRR".into(),
        // a sweep's mean ± sd: `0.412 ± 0.013`
        width: if groups { 13 } else { 10 },
        kind: ColKind::Mrr,
        cell: Box::new(|s| {
            Cell::from(
                s.best_mrr
                    .map(|m| match s.best_epoch {
                        Some(e) => format!("{m:.4} @{e}"),
                        None => format!("{m:.4}"),
                    })
                    .unwrap_or_default(),
            )
        }),
    });
    let group_label = |r: &JobRow| -> String {
        match r {
            JobRow::Sweep(sw) => format!(
                "{} {} ({})",
                if j.expanded.contains(&sw.id) {
                    "▾"
                } else {
                    "▸"
                },
                sw.id,
                sw.sessions()
            ),
            JobRow::Point { label, .. } => format!("  {label}"),
            JobRow::Session(..) => String::new(),
        }
    };
    // room left for the session column and the diff columns: the names
    // first (whole up to 32 cells, at least 14), the settings after
    let used: u16 = cols.iter().map(|c| c.width + 1).sum::<u16>() + 2 + 2;
    let name_w = table_rows
        .iter()
        .map(|r| match r {
            JobRow::Session(s, depth) => {
                let l = labels.get(&s.id).map_or(s.id.len(), |l| width(l));
                depth
                    + l
                    + if s.tags.is_empty() {
                        0
                    } else {
                        3 + s.tags.iter().map(|t| t.len() + 1).sum::<usize>()
                    }
            }
            // a sweep's id elides in the middle before its settings go
            other => width(&group_label(other)).min(20),
        })
        .max()
        .unwrap_or(0)
        .clamp(14, 32) as u16;
    // the sessions of a sweep's point (their settings, for the settings
    // the point does not set)
    let member = |dir: &std::path::Path| visible.iter().find(|s| s.dir == dir);
    let mut room = area.width.saturating_sub(used + name_w);
    // a sweep's varying settings may narrow the names to 14 cells
    let mut room_varied = area.width.saturating_sub(used + 14);
    for k in &diff {
        let w = visible
            .iter()
            .map(|s| s.settings.get(k).map_or(1, |v| v.chars().count()))
            .max()
            .unwrap_or(1)
            .max(k.chars().count())
            .min(12) as u16;
        let have = if varied.contains(k) {
            room_varied
        } else {
            room
        };
        if w + 1 > have {
            break;
        }
        room = room.saturating_sub(w + 1);
        room_varied = room_varied.saturating_sub(w + 1);
        let key = k.clone();
        cols.push(Column {
            header: k.clone(),
            width: w,
            kind: ColKind::Setting(k.clone()),
            cell: Box::new(move |s| {
                Cell::from(elide_middle(
                    s.settings.get(&key).map_or("—", String::as_str),
                    w as usize,
                ))
            }),
        });
    }
    // a group row's cell in column `c`
    let group_cell = |c: &Column, r: &JobRow| -> String {
        let (sw_points, states): (Vec<&jobs::sweep::PointSummary>, Vec<State>) = match r {
            JobRow::Sweep(sw) => (
                sw.points.iter().collect(),
                sw.points.iter().flat_map(|p| p.states.clone()).collect(),
            ),
            JobRow::Point { point, .. } => (vec![point], point.states.clone()),
            JobRow::Session(..) => (Vec::new(), Vec::new()),
        };
        let text = match &c.kind {
            ColKind::State => states_cell(&states),
            ColKind::Model => match r {
                JobRow::Sweep(sw) => sw.model.clone(),
                _ => String::new(),
            },
            ColKind::Mrr => sw_points
                .iter()
                .filter_map(|p| p.figures.get("MRR"))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(m, sd, _)| jobs::sweep::fmt_mean_sd(*m, *sd, 3))
                .unwrap_or_default(),
            ColKind::Setting(k) => {
                let mut vals: Vec<String> = Vec::new();
                for p in &sw_points {
                    let vs: Vec<String> = if k == "seed" {
                        p.seeds.iter().map(u64::to_string).collect()
                    } else if let Some(v) = p.point.get(k) {
                        vec![v.clone()]
                    } else {
                        p.dirs
                            .iter()
                            .filter_map(|d| member(d)?.settings.get(k).cloned())
                            .collect()
                    };
                    for v in vs {
                        if !vals.contains(&v) {
                            vals.push(v);
                        }
                    }
                }
                vals.join(",")
            }
            ColKind::Other => String::new(),
        };
        elide_middle(&text, c.width as usize)
    };
    let session_w = area
        .width
        .saturating_sub(cols.iter().map(|c| c.width + 1).sum::<u16>() + 2 + 2)
        .max(14);
    let mut header = vec![Cell::from(""), Cell::from("session")];
    header.extend(cols.iter().map(|c| Cell::from(c.header.clone())));
    let rows: Vec<Row> = table_rows
        .iter()
        .map(|r| match r {
            JobRow::Session(s, depth) => {
                let mark = if j.marked.contains(&s.id) { "●" } else { " " };
                let mut label = labels.get(&s.id).cloned().unwrap_or_else(|| s.id.clone());
                if !s.tags.is_empty() {
                    label.push_str(&format!(" [{}]", s.tags.join(",")));
                }
                let mut cells = vec![
                    Cell::from(mark),
                    Cell::from(format!(
                        "{:depth$}{}",
                        "",
                        elide_middle(&label, (session_w as usize).saturating_sub(*depth))
                    )),
                ];
                cells.extend(cols.iter().map(|c| (c.cell)(s)));
                Row::new(cells)
            }
            group => {
                let mut cells = vec![
                    Cell::from(" "),
                    Cell::from(Span::styled(
                        elide_middle(&group_label(group), session_w as usize),
                        th.accent(),
                    )),
                ];
                cells.extend(cols.iter().map(|c| Cell::from(group_cell(c, group))));
                Row::new(cells)
            }
        })
        .collect();
    let mut widths = vec![Constraint::Length(1), Constraint::Length(session_w)];
    widths.extend(cols.iter().map(|c| Constraint::Length(c.width)));
    let mut title = format!(" Sessions ({}) ", visible.len());
    if let Some((k, desc)) = &j.sort {
        title.push_str(&format!("· by {k} {} ", if *desc { "↓" } else { "↑" }));
    }
    if !j.filter.is_empty() || j.editing_filter {
        title.push_str(&format!(
            "/{}{} ",
            j.filter,
            if j.editing_filter { "▏" } else { "" }
        ));
        if let Err(e) = j.run_filter() {
            title.push_str(&format!("✗ {e} "));
        }
    }
    if !j.scanned || visible.is_empty() {
        let msg = if let Some(e) = &j.error {
            Span::styled(format!("cannot read sessions: {e}"), th.bad())
        } else if !j.scanned {
            Span::raw("scanning sessions…")
        } else if j.sessions.is_empty() {
            Span::raw(format!(
                "no sessions yet — press {} to start a training job",
                app.settings.keymap.keys_for(Context::Jobs, Action::NewJob)
            ))
        } else {
            Span::raw("no session matches the filter (lr=0.01, mrr>0.5, tag=x or words)")
        };
        f.render_widget(
            Paragraph::new(msg).block(block(th, title_owned(&j.filter), true)),
            area,
        );
        return;
    }
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(th.accent()))
        .block(block(th, title, true))
        .row_highlight_style(th.selected());
    let mut state = TableState::default().with_selected(j.selected_index());
    f.render_stateful_widget(table, area, &mut state);
}

fn title_owned(filter: &str) -> String {
    if filter.is_empty() {
        " Sessions ".into()
    } else {
        format!(" Sessions /{filter} ")
    }
}

fn chart_sessions(app: &App) -> Vec<String> {
    let j = &app.jobs;
    let mut v: Vec<String> = j.marked.iter().cloned().collect();
    if let Some(s) = &j.selected {
        if !v.contains(s) && j.selected_session().is_some() {
            v.insert(0, s.clone());
        }
    }
    v
}

/// Line marker of overlaid curve `i`: without colour (NO_COLOR) each curve
/// gets its own kind of dot, shown in front of its legend name.
fn series_marker(th: &Theme, i: usize) -> (Marker, &'static str) {
    const KINDS: [(Marker, &str); 4] = [
        (Marker::Braille, "⠶"),
        (Marker::Dot, "•"),
        (Marker::Block, "█"),
        (Marker::HalfBlock, "▀"),
    ];
    if th.mono {
        KINDS[i % KINDS.len()]
    } else {
        KINDS[0]
    }
}

/// One drawn curve: legend name (empty: none), style, marker, points and
/// whether its points stand alone (a best-value marker).
struct Drawn {
    name: String,
    style: Style,
    marker: Marker,
    points: Vec<(f64, f64)>,
    scatter: bool,
}

/// How one chart is drawn.
struct View {
    title: String,
    x: XAxis,
    log_y: bool,
    empty: &'static str,
    legend: LegendPosition,
}

/// The curves of `lines` (the engine's series, in display coordinates) as
/// drawn: in an overlay one curve per run with its own colour and (without
/// colour) marker, else the raw curve faint beneath the smoothed one; each
/// with its best value marked `█`.
fn drawn(th: &Theme, lines: &[plot::Line], overlay: bool, max_pts: usize) -> Vec<Drawn> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.raw.is_empty() {
            continue;
        }
        let (marker, glyph) = series_marker(th, i);
        let style = if overlay || lines.len() > 1 {
            th.series(i)
        } else {
            th.accent()
        };
        let name = if th.mono && (overlay || lines.len() > 1) {
            format!("{glyph} {}", l.label)
        } else {
            l.label.clone()
        };
        if let Some(sm) = &l.smooth {
            if !overlay {
                out.push(Drawn {
                    name: if lines.len() > 1 {
                        String::new()
                    } else {
                        "raw".into()
                    },
                    style: th.dim(),
                    marker: Marker::Braille,
                    points: downsample(&l.raw, max_pts),
                    scatter: false,
                });
            }
            out.push(Drawn {
                name,
                style,
                marker,
                points: downsample(sm, max_pts),
                scatter: false,
            });
        } else {
            out.push(Drawn {
                name,
                style,
                marker,
                points: downsample(&l.raw, max_pts),
                scatter: false,
            });
        }
        if let Some(b) = l.best {
            out.push(Drawn {
                name: String::new(),
                style: style.add_modifier(ratatui::style::Modifier::BOLD),
                marker: Marker::Block,
                points: vec![b],
                scatter: true,
            });
        }
    }
    out
}

/// Draws one chart of the Jobs screen: axes ranged on the data (the
/// engine's `x_range` / `y_range`: never forced to 0), labelled in steps,
/// epochs or times and, on a log axis, in the values themselves.
fn draw_lines(
    f: &mut Frame,
    th: &Theme,
    area: Rect,
    view: View,
    lines: &[plot::Line],
    curves: &[Drawn],
) {
    let (Some(xb), Some(yb)) = (plot::x_range(lines), plot::y_range(lines)) else {
        f.render_widget(
            Paragraph::new(Span::styled(view.empty, th.dim())).block(block(th, view.title, false)),
            area,
        );
        return;
    };
    let datasets = curves
        .iter()
        .map(|d| {
            let mut ds = Dataset::default()
                .marker(d.marker)
                .graph_type(if d.scatter {
                    GraphType::Scatter
                } else {
                    GraphType::Line
                })
                .style(d.style)
                .data(&d.points);
            if !d.name.is_empty() {
                ds = ds.name(d.name.clone());
            }
            ds
        })
        .collect();
    let x_labels: Vec<Span> = label_ticks(xb)
        .into_iter()
        .map(|v| Span::raw(plot::fmt_x(view.x, v)))
        .collect();
    let y_labels: Vec<Span> = label_ticks(yb)
        .into_iter()
        .map(|v| Span::raw(plot::fmt_y(view.log_y, v)))
        .collect();
    let chart = Chart::new(datasets)
        .block(block(th, view.title, false))
        .x_axis(
            Axis::default()
                .title(view.x.as_str())
                .bounds(xb)
                .labels(x_labels),
        )
        .y_axis(Axis::default().bounds(yb).labels(y_labels))
        .legend_position(Some(view.legend))
        .hidden_legend_constraints((Constraint::Percentage(60), Constraint::Percentage(60)));
    f.render_widget(chart, area);
}

/// Axis ends and middle.
fn label_ticks(b: [f64; 2]) -> Vec<f64> {
    vec![b[0], (b[0] + b[1]) / 2.0, b[1]]
}

/// Overlay labels of `ids`: display names, shared prefix elided, then cut
/// in the middle to `n` characters.
fn overlay_labels(app: &App, ids: &[String], n: usize) -> Vec<String> {
    app.jobs
        .labels(ids)
        .into_iter()
        .map(|l| elide_middle(&l, n))
        .collect()
}

fn draw_loss_chart(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let j = &app.jobs;
    let max_pts = (area.width as usize).saturating_sub(10).max(8) * 2;
    let ids = chart_sessions(app);
    let overlay = !j.marked.is_empty();
    let opts = PlotOptions {
        metric: "loss".into(),
        x: j.x_axis,
        log_y: j.log_loss,
        smooth: Some(j.smooth()),
        last: (!j.full_history).then_some(RECENT_POINTS),
    };
    if j.show_parts && !overlay {
        if let Some(s) = ids.first().and_then(|id| j.series.get(id)) {
            return draw_parts_chart(f, app, area, &s.curves, &opts, max_pts);
        }
    }
    let labels = overlay_labels(app, &ids, 18);
    let mut lines: Vec<plot::Line> = Vec::new();
    let mut phase_title = String::new();
    let mut phase_short = String::new();
    for (id, label) in ids.iter().zip(labels) {
        let Some(s) = j.series.get(id) else { continue };
        if s.curves.loss.is_empty() {
            continue;
        }
        let mut pts = s.curves.points("loss", j.x_axis);
        // a job of several phases (layers): one phase at a time, their
        // losses differ in scale
        let phases = &s.curves.loss_phases;
        if !overlay && phases.len() > 1 {
            let k = j
                .loss_phase
                .unwrap_or(phases.len() - 1)
                .min(phases.len() - 1);
            phase_title = format!(
                "phase {} ({}/{}, [ ] other phases{}) · ",
                phases[k].0,
                k + 1,
                phases.len(),
                if j.loss_phase.is_none() {
                    ", following"
                } else {
                    ""
                }
            );
            phase_short = format!("phase {} ({}/{}) · ", phases[k].0, k + 1, phases.len());
            let start = phases[k].1;
            let end = phases.get(k + 1).map_or(pts.len(), |p| p.1);
            pts = pts[start..end.min(pts.len())].to_vec();
        }
        lines.push(plot::line_from_points(
            if overlay { label } else { "EMA".into() },
            pts,
            true,
            &opts,
        ));
    }
    let mut t = plot::title(&opts, &lines);
    if !j.full_history && lines.iter().any(|l| l.raw.len() >= RECENT_POINTS) {
        t.push_str(" (recent)");
    }
    let curves = drawn(th, &lines, overlay, max_pts);
    // the longest title that fits the border: "Training " goes first, then
    // the phase keys' hint, then the smoothing factor (the legend says EMA)
    let short = t.split(" · EMA").next().unwrap_or(&t).to_string();
    let title = [
        format!(" Training {phase_title}{t} "),
        format!(" {phase_title}{t} "),
        format!(" {phase_short}{t} "),
        format!(" {phase_short}{short} "),
        format!(" {short} "),
    ]
    .into_iter()
    .find(|c| c.chars().count() + 2 <= area.width as usize)
    .unwrap_or_else(|| format!(" {short} "));
    draw_lines(
        f,
        th,
        area,
        View {
            title,
            x: j.x_axis,
            log_y: j.log_loss,
            empty: " no training steps yet",
            legend: LegendPosition::TopRight,
        },
        &lines,
        &curves,
    );
}

/// The step records' named parts of one session, smoothed: an adversarial
/// job's loss terms next to its discriminator's loss and accuracy (the
/// game). The gradient norm and the regulariser, of other scales, are left
/// to `metrics.jsonl`.
fn draw_parts_chart(
    f: &mut Frame,
    app: &App,
    area: Rect,
    curves: &rosetta::session::Curves,
    opts: &PlotOptions,
    max_pts: usize,
) {
    let th = &app.settings.theme;
    let opts = PlotOptions {
        log_y: false,
        ..opts.clone()
    };
    let lines: Vec<plot::Line> = curves
        .parts
        .keys()
        .filter(|name| !matches!(name.as_str(), "grad_norm" | "L_reg"))
        .map(|name| {
            let o = PlotOptions {
                metric: name.clone(),
                ..opts.clone()
            };
            plot::line(curves, name.clone(), &o)
        })
        .collect();
    // one curve per part, smoothed, no raw curves beneath
    let lines: Vec<plot::Line> = lines
        .into_iter()
        .map(|mut l| {
            if let Some(s) = l.smooth.take() {
                l.raw = s;
            }
            l
        })
        .collect();
    let curves = drawn(th, &lines, true, max_pts);
    let range = plot::x_range(&lines)
        .map(|r| format!(" · {}", plot::range_label(opts.x, r)))
        .unwrap_or_default();
    draw_lines(
        f,
        th,
        area,
        View {
            title: format!(" Loss terms and discriminator (EMA){range} · t: the loss "),
            x: opts.x,
            log_y: false,
            empty: " this job logs no loss terms (t: the loss)",
            legend: LegendPosition::TopRight,
        },
        &lines,
        &curves,
    );
}

fn draw_valid_chart(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let j = &app.jobs;
    let ids = chart_sessions(app);
    let overlay = !j.marked.is_empty();
    let metric = j.chart_metric.clone().unwrap_or_else(|| "MRR".into());
    let labels = overlay_labels(app, &ids, 18);
    let mut lines = Vec::new();
    for (id, label) in ids.iter().zip(labels) {
        let Some(s) = j.series.get(id) else { continue };
        let step_metric = plot::is_step_metric(&s.curves, &metric);
        let opts = PlotOptions {
            metric: metric.clone(),
            x: j.x_axis,
            log_y: false,
            smooth: Some(if step_metric { j.smooth() } else { 0.0 }),
            last: (!j.full_history && step_metric).then_some(RECENT_POINTS),
        };
        let l = plot::line(
            &s.curves,
            if overlay { label } else { metric.clone() },
            &opts,
        );
        if !l.raw.is_empty() {
            lines.push(l);
        }
    }
    let opts = PlotOptions {
        metric: metric.clone(),
        x: j.x_axis,
        smooth: Some(0.0),
        ..Default::default()
    };
    let mut t = plot::title(&opts, &lines);
    if let Some(b) = lines
        .first()
        .and_then(|l| l.best_value)
        .filter(|_| !overlay)
    {
        t.push_str(&format!(" · best {}", plot::fmt_y(false, b)));
    }
    let curves = drawn(th, &lines, overlay, (area.width as usize).max(8) * 2);
    draw_lines(
        f,
        th,
        area,
        View {
            title: format!(" {t} "),
            x: j.x_axis,
            log_y: false,
            empty: " no validation yet (m: another figure)",
            legend: LegendPosition::BottomRight,
        },
        &lines,
        &curves,
    );
}

/// Lines of the detail pane (for scrolling to the end).
fn detail_lines_len(d: &Option<Result<Box<RunDetail>, String>>) -> usize {
    match d {
        Some(Ok(d)) => detail_text(d).len(),
        _ => 0,
    }
}

/// The detail pane's text: state, meta, best figures, checkpoints, config
/// and the end of the log.
fn detail_text(d: &RunDetail) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = vec![(format!("{} · {}", d.id, d.state), true)];
    let mut line = |s: String, head: bool| v.push((s, head));
    line(format!("folder      {}", d.dir.display()), false);
    if !d.meta.name.is_empty() {
        line(format!("name        {}", d.meta.name), false);
    }
    if !d.meta.tags.is_empty() {
        line(format!("tags        {}", d.meta.tags.join(", ")), false);
    }
    for (i, n) in d.meta.note.lines().enumerate() {
        let lead = if i == 0 {
            "note        "
        } else {
            "            "
        };
        line(format!("{lead}{n}"), false);
    }
    line(String::new(), false);
    line("Best figures (validation; loss: lowest step)".into(), true);
    if d.best.is_empty() {
        line("  none recorded yet".into(), false);
    }
    for (k, (val, at)) in &d.best {
        let at = if k == "loss" {
            format!("step {at}")
        } else {
            format!("epoch {at}")
        };
        line(format!("  {k:<12} {val:.4}  ({at})"), false);
    }
    line(String::new(), false);
    line("Checkpoints".into(), true);
    if d.checkpoints.is_empty() {
        line("  none".into(), false);
    }
    for c in &d.checkpoints {
        line(
            format!(
                "  {:<22} {:>9.1} MB  {}",
                c.name,
                c.bytes as f64 / 1e6,
                c.modified
            ),
            false,
        );
    }
    line(String::new(), false);
    line("config.toml".into(), true);
    for l in d.config.lines() {
        line(format!("  {l}"), false);
    }
    line(String::new(), false);
    line(format!("log.txt (last {} lines)", d.log_tail.len()), true);
    for l in &d.log_tail {
        line(format!("  {l}"), false);
    }
    for p in &d.problems {
        line(format!("  ✗ {p}"), false);
    }
    v
}

/// Draws the detail pane of a session (a popup of the Jobs screen).
pub fn draw_detail(
    f: &mut Frame,
    th: &Theme,
    session: &str,
    scroll: u16,
    detail: &Option<Result<Box<RunDetail>, String>>,
) {
    let area = centered(
        f.area(),
        f.area().width.saturating_sub(4).min(110),
        f.area().height.saturating_sub(2),
    );
    f.render_widget(Clear, area);
    // G scrolls to the end: at most so far that the last line shows
    let inner = area.height.saturating_sub(2);
    let scroll = scroll.min((detail_lines_len(detail) as u16).saturating_sub(inner));
    let lines: Vec<Line> = match detail {
        None => vec![Line::raw(format!(" loading {session}…"))],
        Some(Err(e)) => vec![Line::from(Span::styled(format!(" ✗ {e}"), th.bad()))],
        Some(Ok(d)) => detail_text(d)
            .into_iter()
            .map(|(t, head)| {
                if head {
                    Line::from(Span::styled(t, th.accent()))
                } else {
                    Line::raw(t)
                }
            })
            .collect(),
    };
    f.render_widget(
        Paragraph::new(lines).scroll((scroll, 0)).block(block(
            th,
            format!(" {session} · ↑↓ PgUp/PgDn scroll · Esc close "),
            true,
        )),
        area,
    );
}

/// Draws the name / tags / note editor (a popup of the Jobs screen).
pub fn draw_edit_meta(f: &mut Frame, th: &Theme, session: &str, field: MetaField, value: &str) {
    let area = centered(f.area(), 70, 6);
    f.render_widget(Clear, area);
    let hint = match field {
        MetaField::Name => "empty: back to the folder name",
        MetaField::Tags => "words separated by spaces or commas",
        MetaField::Note => "free text; empty removes it",
    };
    let lines = vec![
        input_line(th, &format!(" {}:", field.as_str()), value, true),
        Line::raw(""),
        Line::from(Span::styled(
            format!(" {hint} · Enter save · Ctrl-U clear · Esc cancel"),
            th.dim(),
        )),
    ];
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(
                th,
                format!(" {} of {session} ", field.as_str()),
                true,
            )),
        area,
    );
}

/// Draws the new-job form (a popup of the Jobs screen).
pub fn draw_form(f: &mut Frame, th: &Theme, form: &JobForm) {
    let h = form.fields.len() as u16 + 6;
    let area = centered(f.area(), 76, h);
    f.render_widget(Clear, area);
    let mut lines = Vec::new();
    for (i, fl) in form.fields.iter().enumerate() {
        let focus = i == form.focus;
        let mut spans = vec![
            Span::styled(if focus { "▶ " } else { "  " }, th.accent()),
            Span::styled(format!("{:<13}", fl.label), th.dim()),
            Span::styled(
                fl.value.clone(),
                if focus { th.accent() } else { Style::default() },
            ),
            Span::raw(if focus { "▏" } else { "" }),
        ];
        if fl.value.is_empty() && fl.error.is_none() {
            let model = form.fields[MODEL_FIELD].value.trim();
            let hint = match i {
                2..=5 => match jobs::setting_default(model, fl.label) {
                    Some(d) => format!("(default {d})"),
                    None if jobs::check_model(model).is_ok() => format!("(not read by {model})"),
                    None => "(model default)".into(),
                },
                7 => "(none: fresh start)".into(),
                8 => "(KEY=VALUE ..., e.g. batch=50 patience=3)".into(),
                10..=13 => "(Slurm's default)".into(),
                GRID_FIELD => "(none: one job; KEY=V1,V2 ...: a sweep)".into(),
                15 => "(1; a sweep's seeds, e.g. 1,2,3)".into(),
                16 => "(a sweep's sessions at once; local default 1)".into(),
                _ => String::new(),
            };
            spans.push(Span::styled(hint, th.dim()));
        } else if (i == MODEL_FIELD || i == LAUNCHER_FIELD) && focus {
            spans.push(Span::styled("  ←/→ choose", th.dim()));
        }
        if let Some(e) = &fl.error {
            spans.push(Span::styled(format!("  ✗ {e}"), th.bad()));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::raw(""));
    if form.submitting {
        lines.push(Line::from(Span::styled("  launching…", th.warn())));
    } else if let Some(e) = &form.error {
        lines.push(Line::from(Span::styled(format!("  ✗ {e}"), th.bad())));
    } else {
        lines.push(Line::raw(""));
    }
    lines.push(Line::from(Span::styled(
        "  Enter launch · Tab/↓ next · ↑ previous · Ctrl-U clear · Esc cancel",
        th.dim(),
    )));
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(th, format!(" {} ", form.title), true)),
        area,
    );
}

/// The Jobs screen's key hints on the status line (fits 80 columns; `?`
/// lists the rest).
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if app.jobs.editing_filter {
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
