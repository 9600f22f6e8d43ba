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
use crate::tui::ui::*;
use rosetta::jobs;
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
    /// Requests in flight.
    pending_scan: bool,
    pending_tail: BTreeSet<String>,
}

impl JobsScreen {
    /// Sessions passing the filter, in table order.
    pub fn visible(&self) -> Vec<&SessionSummary> {
        let f = self.filter.to_lowercase();
        self.sessions
            .iter()
            .filter(|s| {
                f.is_empty()
                    || s.id.to_lowercase().contains(&f)
                    || s.model.to_lowercase().contains(&f)
                    || s.workspace.to_lowercase().contains(&f)
                    || s.state.as_str().contains(&f)
            })
            .collect()
    }
    /// The selected session (if visible).
    pub fn selected_session(&self) -> Option<&SessionSummary> {
        let v = self.visible();
        let id = self.selected.as_ref()?;
        v.into_iter().find(|s| &s.id == id)
    }
    /// Index of the selection among the visible rows.
    pub fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_ref()?;
        self.visible().iter().position(|s| &s.id == id)
    }
    fn move_sel(&mut self, delta: isize) {
        let v = self.visible();
        if v.is_empty() {
            return;
        }
        let cur = self.selected_index().map(|i| i as isize).unwrap_or(-1);
        let n = v.len() as isize;
        let i = (cur + delta).clamp(0, n - 1) as usize;
        self.selected = Some(v[i].id.clone());
    }
}

/// Recent-window length of the loss chart, in steps.
pub const RECENT_STEPS: usize = 500;

/// Index of the model field in [`JobForm::fields`].
const MODEL_FIELD: usize = 1;

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
    /// init, other settings.
    pub fields: Vec<FormField>,
    /// Focused field.
    pub focus: usize,
    /// Waiting for the launch answer.
    pub submitting: bool,
    /// Error of the last launch.
    pub error: Option<String>,
}

impl JobForm {
    /// A form filled from `spec`.
    pub fn new(title: impl Into<String>, spec: &JobSpec) -> JobForm {
        fn opt<T: ToString>(v: Option<T>) -> String {
            v.map(|x| x.to_string()).unwrap_or_default()
        }
        let f = |label, value: String| FormField {
            label,
            value,
            error: None,
        };
        JobForm {
            title: title.into(),
            fields: vec![
                f("workspace", spec.workspace.clone()),
                f("model", spec.model.clone()),
                f("dim", opt(spec.dim)),
                f("epochs", opt(spec.epochs)),
                f("lr", opt(spec.lr)),
                f("negatives", spec.negatives.clone().unwrap_or_default()),
                f("device", spec.device.clone()),
                f("init session", spec.init.clone().unwrap_or_default()),
                f(
                    "other --set",
                    spec.extra
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
            ],
            focus: 0,
            submitting: false,
            error: None,
        }
    }

    /// Checks every field; on success the job to launch, else the errors
    /// are stored on the fields. Empty optional fields mean the model's default.
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
        if let Err(e) = jobs::check_device(&v[6]) {
            errs.push((6, e.to_string()));
        }
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
        if errs.is_empty() {
            Some(JobSpec {
                extra,
                workspace: v[0].clone(),
                model: v[1].clone(),
                dim,
                epochs,
                lr,
                negatives,
                device: v[6].clone(),
                init,
            })
        } else {
            for (i, e) in errs {
                self.fields[i].error = Some(e);
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

    /// Queues metrics tails for the selected and marked sessions.
    pub fn poll_metrics(&mut self) {
        let mut want: BTreeSet<String> = self.jobs.marked.clone();
        if let Some(s) = &self.jobs.selected {
            want.insert(s.clone());
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
                    ..Default::default()
                };
                self.popup = Some(Popup::Form(JobForm::new("New training job", &spec)));
            }
            Action::DuplicateJob => {
                if let Some(s) = self.jobs.selected_session() {
                    let session = s.id.clone();
                    self.outbox.push(Request::SessionSpec { session });
                } else {
                    self.error("no job selected");
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
                None => self.error("no job selected"),
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
                None => self.error("no job selected"),
            },
            Action::MarkJob => {
                if let Some(id) = self.jobs.selected.clone() {
                    if !self.jobs.marked.remove(&id) {
                        self.jobs.marked.insert(id);
                    }
                    self.poll_metrics();
                }
            }
            Action::ToggleHistory => self.jobs.full_history = !self.jobs.full_history,
            Action::ToggleParts => self.jobs.show_parts = !self.jobs.show_parts,
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
                        self.jobs.sessions = list;
                        self.jobs.scanned = true;
                        self.jobs.error = None;
                        if self.jobs.selected_session().is_none() {
                            self.jobs.selected = self.jobs.visible().first().map(|s| s.id.clone());
                        }
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
                    self.popup = Some(Popup::Form(JobForm::new(
                        format!("New job from {session}"),
                        &spec,
                    )))
                }
                Err(e) => self.error(e),
            },
            Reply::Launched(res) => {
                let form_open = matches!(self.popup, Some(Popup::Form(_)));
                match res {
                    Ok(l) => {
                        if form_open {
                            self.popup = None;
                        }
                        let id = l.session;
                        self.started.insert(id.clone());
                        self.jobs.selected = Some(id.clone());
                        self.info(format!("started {id}"));
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
    let table_h = ((visible.len().max(1) + 3) as u16).clamp(5, (area.height * 2 / 5).max(5));
    let [ta, da, ca] = Layout::vertical([
        Constraint::Length(table_h),
        Constraint::Length(2),
        Constraint::Min(6),
    ])
    .areas(area);

    let wide = area.width >= 110;
    let mut header = vec!["", "session", "state", "model"];
    if wide {
        header.extend(["workspace", "device"]);
    }
    header.extend(["progress", "ETA", "pairs/s", "best MRR"]);
    let rows: Vec<Row> = visible
        .iter()
        .map(|s| {
            let mark = if j.marked.contains(&s.id) { "●" } else { " " };
            let mut cells = vec![
                Cell::from(mark),
                Cell::from(s.id.clone()),
                Cell::from(Span::styled(state_label(s), state_style(th, s))),
                Cell::from(s.model.clone()),
            ];
            if wide {
                cells.push(Cell::from(trunc(&workspace_label(&s.workspace), 16)));
                cells.push(Cell::from(s.device.clone()));
            }
            let prog = match (s.state, s.progress) {
                (State::Done, _) => bar(1.0, 5),
                (_, Some(p)) => bar(p, 5),
                _ => String::new(),
            };
            cells.push(Cell::from(prog));
            cells.push(Cell::from(if !s.state.is_final() {
                s.eta_s.map(fmt_duration).unwrap_or_default()
            } else {
                String::new()
            }));
            cells.push(Cell::from(
                s.pairs_per_s.map(|p| format!("{p:.0}")).unwrap_or_default(),
            ));
            cells.push(Cell::from(
                s.best_mrr
                    .map(|m| match s.best_epoch {
                        Some(e) => format!("{m:.4} @{e}"),
                        None => format!("{m:.4}"),
                    })
                    .unwrap_or_default(),
            ));
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![
        Constraint::Length(1),
        Constraint::Min(21),
        Constraint::Length(9),
        Constraint::Length(7),
    ];
    if wide {
        widths.extend([Constraint::Length(16), Constraint::Length(7)]);
    }
    widths.extend([
        Constraint::Length(10),
        Constraint::Length(5),
        Constraint::Length(7),
        Constraint::Length(10),
    ]);
    let mut title = format!(" Sessions ({}) ", visible.len());
    if !j.filter.is_empty() || j.editing_filter {
        title.push_str(&format!(
            "/{}{} ",
            j.filter,
            if j.editing_filter { "▏" } else { "" }
        ));
    }
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(th.accent()))
        .block(block(th, title, true))
        .row_highlight_style(th.selected());
    let mut state = TableState::default().with_selected(j.selected_index());
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
            Span::raw("no session matches the filter")
        };
        f.render_widget(
            Paragraph::new(msg).block(block(th, title_owned(&j.filter), true)),
            ta,
        );
    } else {
        f.render_stateful_widget(table, ta, &mut state);
    }

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
    }
    f.render_widget(Paragraph::new(lines), da);

    let [lc, vc] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(ca);
    draw_loss_chart(f, app, lc);
    draw_valid_chart(f, app, vc);
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

fn draw_loss_chart(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let j = &app.jobs;
    let max_pts = (area.width as usize).saturating_sub(10).max(8) * 2;
    let window = |pts: &[(f64, f64)]| -> Vec<(f64, f64)> {
        if j.full_history || pts.len() <= RECENT_STEPS {
            pts.to_vec()
        } else {
            pts[pts.len() - RECENT_STEPS..].to_vec()
        }
    };
    let ids = chart_sessions(app);
    let overlay = !j.marked.is_empty();
    if j.show_parts && !overlay {
        if let Some(s) = ids.first().and_then(|id| j.series.get(id)) {
            return draw_parts_chart(f, app, area, &s.curves, &window, max_pts);
        }
    }
    let mut data: Vec<Curve> = Vec::new();
    let mut phase_title = String::new();
    for (i, id) in ids.iter().enumerate() {
        let Some(s) = j.series.get(id) else { continue };
        if s.curves.loss.is_empty() {
            continue;
        }
        // a job of several phases (layers): one phase at a time, their
        // losses differ in scale
        let phases = &s.curves.loss_phases;
        let all = if !overlay && phases.len() > 1 {
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
            s.curves.phase_loss(k)
        } else {
            &s.curves.loss
        };
        let pts = window(all);
        let smooth = downsample(&ema(&pts, 0.9), max_pts);
        if overlay {
            data.push((trunc(id, 18), th.series(i), smooth));
        } else {
            data.push(("raw".into(), th.dim(), downsample(&pts, max_pts)));
            data.push(("EMA".into(), th.accent(), smooth));
        }
    }
    let title = format!(
        " Training loss · {phase_title}{} ",
        if j.full_history {
            "full history".to_string()
        } else {
            format!("last {RECENT_STEPS} steps")
        }
    );
    draw_chart(
        f,
        th,
        area,
        ChartSpec {
            title,
            x_title: "step",
            empty: " no training steps yet",
            legend: LegendPosition::TopRight,
            probability: false,
        },
        &data,
    );
}

/// The recent-steps window of the loss chart.
type Window<'a> = dyn Fn(&[(f64, f64)]) -> Vec<(f64, f64)> + 'a;

/// The step records' named parts of one session, smoothed: an adversarial
/// job's loss terms next to its discriminator's loss and accuracy (the
/// game). The gradient norm and the regulariser, of other scales, are left
/// to `metrics.jsonl`.
fn draw_parts_chart(
    f: &mut Frame,
    app: &App,
    area: Rect,
    curves: &rosetta::session::Curves,
    window: &Window<'_>,
    max_pts: usize,
) {
    let th = &app.settings.theme;
    let data: Vec<Curve> = curves
        .parts
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "grad_norm" | "L_reg"))
        .enumerate()
        .map(|(i, (name, pts))| {
            let smooth = downsample(&ema(&window(pts), 0.9), max_pts);
            (name.clone(), th.series(i), smooth)
        })
        .collect();
    draw_chart(
        f,
        th,
        area,
        ChartSpec {
            title: " Loss terms and discriminator (EMA) · t: the loss ".to_string(),
            x_title: "step",
            empty: " this job logs no loss terms (t: the loss)",
            legend: LegendPosition::TopRight,
            probability: false,
        },
        &data,
    );
}

fn draw_valid_chart(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let j = &app.jobs;
    let ids = chart_sessions(app);
    let overlay = !j.marked.is_empty();
    let mut data: Vec<Curve> = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let Some(s) = j.series.get(id) else { continue };
        let mrr = s.curves.valid_points("MRR");
        let p1 = s.curves.valid_points("P@1");
        if overlay {
            if !mrr.is_empty() {
                data.push((trunc(id, 18), th.series(i), mrr));
            }
        } else {
            if !mrr.is_empty() {
                data.push(("MRR".into(), th.accent(), mrr));
            }
            if !p1.is_empty() {
                data.push(("P@1".into(), th.warn(), p1));
            }
        }
    }
    let title = if overlay {
        " Validation MRR "
    } else {
        " Validation MRR / P@1 "
    };
    draw_chart(
        f,
        th,
        area,
        ChartSpec {
            title: title.to_string(),
            x_title: "epoch",
            empty: " no validation yet",
            legend: LegendPosition::BottomRight,
            probability: true,
        },
        &data,
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
                _ => String::new(),
            };
            spans.push(Span::styled(hint, th.dim()));
        } else if i == MODEL_FIELD && focus {
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

/// The Jobs screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if app.jobs.editing_filter {
        return "type to filter · Enter/Esc done".into();
    }
    format!(
        "{} new · {} cancel · {} resume · {} duplicate · {} mark · {} history · {} filter",
        k(C::Jobs, Action::NewJob),
        k(C::Jobs, Action::CancelJob),
        k(C::Jobs, Action::ResumeJob),
        k(C::Jobs, Action::DuplicateJob),
        k(C::Jobs, Action::MarkJob),
        k(C::Jobs, Action::ToggleHistory),
        k(C::Global, Action::Filter)
    )
}
