//! The Jobs screen: training sessions, their curves and the new-job form —
//! key handling, backend answers and drawing, as a [`Screen`]. Its state
//! (`model.rs`), requests and replies (`request.rs`), popups (`popup.rs`, a
//! [`Modal`](crate::tui::screens::Modal) it owns), the table, the new-job
//! form, the charts, the log pane and the details popup each have their own
//! file; none of them imports this one.

mod charts;
mod detail;
mod form;
mod index;
mod log;
mod model;
mod popup;
mod request;
mod table;

use std::collections::BTreeSet;

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

#[cfg(test)]
pub use form::draw_form;
pub use form::JobForm;
pub use model::{sweep_key, JobRow, JobsScreen, SMOOTHING};
pub use popup::JobsPopup;
pub use request::{Reply, Request};

use super::{edit_text, Ctx, Screen, View};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context, Keymap};
use crate::tui::widgets::*;
use charts::{draw_loss_chart, draw_valid_chart};
use log::draw_log_pane;
use table::{counts_text, draw_table, k_sweep};

/// Lines of `log.txt` the log pane asks for (more than any pane is high).
const LOG_PANE_LINES: usize = 200;

impl JobsScreen {
    /// Queues a rescan of the sessions root (unless one is in flight).
    pub fn poll_sessions(&mut self, cx: &mut Ctx<'_, Request>) {
        if !self.pending_scan {
            self.pending_scan = true;
            cx.send(Request::ListSessions);
        }
    }

    /// Queues metrics tails for the selected and marked sessions, and the
    /// selected session's log when the log pane shows.
    pub fn poll_metrics(&mut self, cx: &mut Ctx<'_, Request>) {
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

    fn action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
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
                self.popup = Some(JobsPopup::Form(JobForm::new("New training job", &spec)));
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
                    self.popup = Some(JobsPopup::ConfirmCancel(s.id.clone()));
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
                    self.popup = Some(JobsPopup::Detail {
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
                Some(s) => self.popup = Some(JobsPopup::ConfirmDelete(s.id.clone())),
                None => self.no_job_selected(cx),
            },
            Action::RenameJob | Action::TagJob | Action::NoteJob => match self.selected_session() {
                Some(s) => {
                    let (field, value) = match a {
                        Action::RenameJob => (MetaField::Name, s.name.clone()),
                        Action::TagJob => (MetaField::Tags, s.tags.join(" ")),
                        _ => (MetaField::Note, s.note.clone()),
                    };
                    self.popup = Some(JobsPopup::EditMeta {
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

    /// The error of an action on one job with none selected (a sweep's
    /// row is no job: its sessions are, once it is open).
    fn no_job_selected(&self, cx: &mut Ctx<'_, Request>) {
        if self.selected_sweep().is_some() {
            cx.error("a sweep's row: Enter opens it, then select one of its sessions");
        } else {
            cx.error("no job selected");
        }
    }

    /// A job alert on the status line, with the terminal bell when the
    /// settings ask for it.
    fn alert(&self, msg: String, bad: bool, cx: &mut Ctx<'_, Request>) {
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
    fn job_alerts(&self, old: &[SessionSummary], cx: &mut Ctx<'_, Request>) {
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

    fn reply(&mut self, r: Reply, cx: &mut Ctx<'_, Request>) -> bool {
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
                    self.popup = Some(JobsPopup::Form(JobForm::new(
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
                let form_open = matches!(self.popup, Some(JobsPopup::Form(_)));
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
                        if let Some(JobsPopup::Form(f)) = &mut self.popup {
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
            Reply::Detail { session, result } => match &mut self.popup {
                Some(JobsPopup::Detail {
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

    fn busy_label(req: &Request) -> Option<String> {
        Some(match req {
            // background: the rescans, tails and the form's memory
            Request::ListSessions
            | Request::TailMetrics { .. }
            | Request::LogTail { .. }
            | Request::LauncherMemory => return None,
            Request::SessionSpec { session } => format!("reading {session}'s settings"),
            Request::Launch(spec) if spec.sweep.is_some() => "starting the sweep".into(),
            Request::Launch(_) => "starting the job".into(),
            Request::Cancel(s) => format!("cancelling {s}"),
            Request::Resume(s) => format!("resuming {s}"),
            Request::SessionDetail(s) => format!("reading {s}'s details"),
            Request::SetMeta { session, field, .. } => {
                format!("saving {session}'s {}", field.as_str())
            }
            Request::Delete(s) => format!("deleting {s}"),
        })
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

    fn on_reply(&mut self, r: Reply, cx: &mut Ctx<'_, Request>) -> bool {
        self.reply(r, cx)
    }

    fn on_action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        self.action(a, cx)
    }

    fn on_close(&mut self, cx: &mut Ctx<'_, Request>) {
        *cx.message = None;
        self.filter.clear();
    }

    fn editing(&self) -> bool {
        self.editing_filter
    }

    fn edit_key(&mut self, k: KeyEvent, _cx: &mut Ctx<'_, Request>) {
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
        draw(f, self, view, area)
    }

    fn hints(&self, km: &Keymap) -> String {
        hints(self, km)
    }
}

/// Draws the Jobs screen: the sessions table, the selection's details and
/// the curves.
fn draw(f: &mut Frame, j: &JobsScreen, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
    let visible = j.visible();
    let rows = j.rows();
    let table_h = ((rows.len().max(1) + 3) as u16).clamp(5, (area.height * 2 / 5).max(5));
    let builds = index::builds(j);
    let [ta, ia, da, ca] = Layout::vertical([
        Constraint::Length(table_h),
        Constraint::Length(index::height(builds.len())),
        Constraint::Length(2),
        Constraint::Min(6),
    ])
    .areas(area);
    draw_table(f, j, view, ta, &visible, &rows);
    if !builds.is_empty() {
        index::draw_index_builds(f, j, view, ia, &builds);
    }
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
        draw_loss_chart(f, j, view, lc);
        draw_valid_chart(f, j, view, vc);
    } else if area.width >= 140 {
        let [lc, vc, gc] = Layout::horizontal([
            Constraint::Percentage(40),
            Constraint::Percentage(28),
            Constraint::Percentage(32),
        ])
        .areas(ca);
        draw_loss_chart(f, j, view, lc);
        draw_valid_chart(f, j, view, vc);
        draw_log_pane(f, j, view, gc);
    } else {
        // narrow: the log takes the validation chart's place
        let [lc, gc] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(ca);
        draw_loss_chart(f, j, view, lc);
        draw_log_pane(f, j, view, gc);
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
