//! The workbench's state and key handling, with no terminal: keys and
//! backend replies go in, [`Request`]s for the backend come out (the
//! `outbox`), so tests drive it directly.

use std::collections::BTreeSet;

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

use super::backend::*;
use super::config::Settings;
use super::keymap::{Action, Context};
pub use super::screens::jobs::{JobForm, JobsScreen};
use rosetta::text::Side;

/// The five screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// Training jobs and their curves.
    Jobs,
    /// Ranked retrieval with a session's model.
    Search,
    /// Nearest terms across languages.
    Neighbours,
    /// Sessions × metrics.
    Compare,
    /// Workspace figures.
    Data,
}

impl Tab {
    /// All tabs in order.
    pub const ALL: [Tab; 5] = [
        Tab::Jobs,
        Tab::Search,
        Tab::Neighbours,
        Tab::Compare,
        Tab::Data,
    ];
    /// Title on the tab bar.
    pub fn title(self) -> &'static str {
        match self {
            Tab::Jobs => "Jobs",
            Tab::Search => "Search",
            Tab::Neighbours => "Neighbours",
            Tab::Compare => "Compare",
            Tab::Data => "Data",
        }
    }
    /// Position, 0-based.
    pub fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }
    fn context(self) -> Context {
        match self {
            Tab::Jobs => Context::Jobs,
            Tab::Search => Context::Search,
            Tab::Neighbours => Context::Neighbours,
            Tab::Compare => Context::Compare,
            Tab::Data => Context::Data,
        }
    }
}

/// Work for the backend; the event loop runs each on a worker thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Rescan the sessions root.
    ListSessions,
    /// Read new metrics records.
    TailMetrics { session: String, offset: u64 },
    /// Read a session's settings (duplicate-with-changes).
    SessionSpec { session: String },
    /// Start a job.
    Launch(JobSpec),
    /// Stop a job.
    Cancel(String),
    /// Restart a job from its checkpoint.
    Resume(String),
    /// Load a session's search index.
    LoadIndex(String),
    /// Run a query.
    Search {
        seq: u64,
        session: String,
        query: String,
        k: usize,
        fusion: Fusion,
    },
    /// Look up a term's neighbours for one pane.
    Neighbours {
        pane: usize,
        seq: u64,
        session: String,
        term: String,
        side: Side,
        k: usize,
        csls: bool,
    },
    /// Build the compare table.
    Compare {
        sessions: Vec<String>,
        baseline: Option<String>,
    },
    /// Write the compare table to a file.
    Export {
        table: Comparison,
        path: std::path::PathBuf,
        format: TableFormat,
    },
    /// Figures of a workspace.
    WorkspaceStats(String),
}

/// A backend answer (errors as display strings).
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
        spec: Result<JobSpec, String>,
    },
    Launched(Result<Launched, String>),
    Cancelled {
        session: String,
        result: Result<(), String>,
    },
    Resumed {
        session: String,
        result: Result<Launched, String>,
    },
    IndexProgress {
        session: String,
        fraction: f64,
        what: String,
    },
    IndexLoaded {
        session: String,
        result: Result<IndexInfo, String>,
    },
    Searched {
        seq: u64,
        result: Result<SearchResult, String>,
    },
    Neighbours {
        pane: usize,
        seq: u64,
        result: Result<NeighbourResult, String>,
    },
    CompareProgress {
        done: usize,
        total: usize,
        session: String,
    },
    Compared(Result<Comparison, String>),
    Exported(Result<std::path::PathBuf, String>),
    Stats {
        workspace: String,
        result: Result<WorkspaceStats, String>,
    },
}

/// The error reply to `req` (when running it panicked).
pub fn failed(req: &Request, msg: String) -> Reply {
    let e = Err(msg);
    match req.clone() {
        Request::ListSessions => Reply::Sessions(e.map(|_: ()| Vec::new())),
        Request::TailMetrics { session, offset } => Reply::Metrics {
            session,
            offset,
            chunk: e.map(|_: ()| MetricsChunk::default()),
        },
        Request::SessionSpec { session } => Reply::Spec {
            session,
            spec: e.map(|_: ()| JobSpec::default()),
        },
        Request::Launch(_) => Reply::Launched(e.map(|_: ()| unreachable_launch())),
        Request::Cancel(session) => Reply::Cancelled { session, result: e },
        Request::Resume(session) => Reply::Resumed {
            session,
            result: e.map(|_: ()| unreachable_launch()),
        },
        Request::LoadIndex(session) => Reply::IndexLoaded {
            session,
            result: e.map(|_: ()| IndexInfo::default()),
        },
        Request::Search { seq, .. } => Reply::Searched {
            seq,
            result: e.map(|_: ()| SearchResult::default()),
        },
        Request::Neighbours { pane, seq, .. } => Reply::Neighbours {
            pane,
            seq,
            result: e.map(|_: ()| NeighbourResult::default()),
        },
        Request::Compare { .. } => Reply::Compared(e.map(|_: ()| Comparison::default())),
        Request::Export { .. } => Reply::Exported(e.map(|_: ()| std::path::PathBuf::new())),
        Request::WorkspaceStats(workspace) => Reply::Stats {
            workspace,
            result: e.map(|_: ()| WorkspaceStats::default()),
        },
    }
}

fn unreachable_launch() -> Launched {
    Launched {
        session: String::new(),
        pid: 0,
    }
}

/// Runs one request against a backend (blocking); `progress` receives
/// intermediate replies (index loading).
pub fn execute(
    backend: &dyn Backend,
    req: Request,
    progress: &(dyn Fn(Reply) + Send + Sync),
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
            let spec = backend.session_spec(&session).map_err(s);
            Reply::Spec { session, spec }
        }
        Request::Launch(spec) => Reply::Launched(backend.launch(&spec).map_err(s)),
        Request::Cancel(session) => {
            let result = backend.cancel(&session).map_err(s);
            Reply::Cancelled { session, result }
        }
        Request::Resume(session) => {
            let result = backend.resume(&session).map_err(s);
            Reply::Resumed { session, result }
        }
        Request::LoadIndex(session) => {
            let sess = session.clone();
            let cb = move |fraction: f64, what: &str| {
                progress(Reply::IndexProgress {
                    session: sess.clone(),
                    fraction,
                    what: what.to_string(),
                })
            };
            let result = backend.load_index(&session, &cb).map_err(s);
            Reply::IndexLoaded { session, result }
        }
        Request::Search {
            seq,
            session,
            query,
            k,
            fusion,
        } => Reply::Searched {
            seq,
            result: backend.search(&session, &query, k, fusion).map_err(s),
        },
        Request::Neighbours {
            pane,
            seq,
            session,
            term,
            side,
            k,
            csls,
        } => Reply::Neighbours {
            pane,
            seq,
            result: backend
                .neighbours(&session, &term, side, k, csls)
                .map_err(s),
        },
        Request::Compare { sessions, baseline } => {
            let cb = |done: usize, total: usize, session: &str| {
                progress(Reply::CompareProgress {
                    done,
                    total,
                    session: session.to_string(),
                })
            };
            Reply::Compared(
                backend
                    .compare(&sessions, baseline.as_deref(), &cb)
                    .map_err(s),
            )
        }
        Request::Export {
            table,
            path,
            format,
        } => Reply::Exported(
            backend
                .export_compare(&table, &path, format)
                .map(|()| path)
                .map_err(s),
        ),
        Request::WorkspaceStats(w) => {
            let result = backend.workspace_stats(&w).map_err(s);
            Reply::Stats {
                workspace: w,
                result,
            }
        }
    }
}

/// A line of feedback at the bottom of the screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// Something happened.
    Info(String),
    /// Something failed.
    Error(String),
}

/// What a session picker chooses for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickFor {
    /// The Search screen's session.
    Search,
    /// A Neighbours pane (0 left, 1 right).
    Neighbours(usize),
}

/// Popups over the current screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Popup {
    /// Key help, scrolled by `scroll` lines.
    Help { scroll: u16 },
    /// The new-job form.
    Form(JobForm),
    /// Jobs started here still run: leave or cancel them?
    ConfirmQuit(Vec<String>),
    /// Really cancel this job?
    ConfirmCancel(String),
    /// Choose a session.
    Picker { purpose: PickFor, selected: usize },
}

/// Search index state.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum IndexState {
    /// No session chosen.
    #[default]
    None,
    /// Loading, with progress.
    Loading { fraction: f64, what: String },
    /// Ready.
    Ready(IndexInfo),
    /// Failed to load.
    Failed(String),
}

/// Search screen state.
#[derive(Debug, Clone)]
pub struct SearchScreen {
    /// Session whose index is used.
    pub session: Option<String>,
    /// Its index.
    pub index: IndexState,
    /// Query text.
    pub query: String,
    /// Typing into the query.
    pub editing: bool,
    /// Fusion mode.
    pub fusion: Fusion,
    /// λ kept across fusion modes.
    pub lambda: f64,
    /// Last results.
    pub result: Option<SearchResult>,
    /// Query the results are for.
    pub result_query: String,
    /// Last error.
    pub error: Option<String>,
    /// Selected hit.
    pub selected: usize,
    /// Results to ask for.
    pub k: usize,
    /// Next judged query to offer (`e`).
    pub judged_pos: usize,
    seq: u64,
    /// A search is running.
    pub pending: bool,
}

impl Default for SearchScreen {
    fn default() -> Self {
        SearchScreen {
            session: None,
            index: IndexState::None,
            query: String::new(),
            editing: false,
            fusion: Fusion::Model,
            lambda: 0.3,
            result: None,
            result_query: String::new(),
            error: None,
            selected: 0,
            k: 20,
            judged_pos: 0,
            seq: 0,
            pending: false,
        }
    }
}

/// One Neighbours pane.
#[derive(Debug, Clone, Default)]
pub struct NeighPane {
    /// Session whose model is asked.
    pub session: Option<String>,
    /// Last answer.
    pub result: Option<NeighbourResult>,
    /// Last error.
    pub error: Option<String>,
    /// A lookup is running.
    pub pending: bool,
    seq: u64,
}

/// Neighbours screen state.
#[derive(Debug, Clone)]
pub struct NeighScreen {
    /// Left and right panes.
    pub panes: [NeighPane; 2],
    /// Term typed.
    pub query: String,
    /// Typing the term.
    pub editing: bool,
    /// Language of the term.
    pub side: Side,
    /// CSLS instead of cosine.
    pub csls: bool,
    /// Focused list: 0 other language, 1 own language.
    pub list: usize,
    /// Focused pane (0 left, 1 right).
    pub pane: usize,
    /// Selected row in the focused list.
    pub selected: usize,
    /// Terms looked up, for back/forward.
    pub history: Vec<(String, Side)>,
    /// Position in `history`.
    pub hist_pos: usize,
    /// Neighbours to ask for.
    pub k: usize,
}

impl Default for NeighScreen {
    fn default() -> Self {
        NeighScreen {
            panes: Default::default(),
            query: String::new(),
            editing: false,
            side: Side::Source,
            csls: false,
            list: 0,
            pane: 0,
            selected: 0,
            history: Vec::new(),
            hist_pos: 0,
            k: 10,
        }
    }
}

/// Compare screen state.
#[derive(Debug, Clone, Default)]
pub struct CompareScreen {
    /// Last table.
    pub table: Option<Comparison>,
    /// Chosen baseline.
    pub baseline: Option<String>,
    /// Sort column (0 session, 1 model, 2.. metrics) and descending.
    pub sort: Option<(usize, bool)>,
    /// Selected row (in display order).
    pub row: usize,
    /// Selected column.
    pub col: usize,
    /// Waiting for the table.
    pub pending: bool,
    /// Sessions evaluated so far, of how many, and the one under way.
    pub progress: Option<(usize, usize, String)>,
    /// Last error.
    pub error: Option<String>,
    /// Ask again when the pending answer arrives (the baseline changed).
    again: bool,
}

impl CompareScreen {
    /// Row indices of the table in display (sorted) order.
    pub fn order(&self) -> Vec<usize> {
        let Some(t) = &self.table else {
            return Vec::new();
        };
        let mut idx: Vec<usize> = (0..t.rows.len()).collect();
        if let Some((col, desc)) = self.sort {
            idx.sort_by(|&a, &b| {
                let (ra, rb) = (&t.rows[a], &t.rows[b]);
                let o = match col {
                    0 => ra.system.cmp(&rb.system),
                    1 => ra.detail.cmp(&rb.detail),
                    c => match t.metrics.get(c - 2) {
                        Some(&m) => ra.mean(m).total_cmp(&rb.mean(m)),
                        None => std::cmp::Ordering::Equal,
                    },
                };
                if desc {
                    o.reverse()
                } else {
                    o
                }
            });
        }
        idx
    }
}

/// Data screen state.
#[derive(Debug, Clone, Default)]
pub struct DataScreen {
    /// Workspace shown.
    pub workspace: Option<String>,
    /// Its figures.
    pub stats: Option<WorkspaceStats>,
    /// Waiting for figures.
    pub pending: bool,
    /// Last error.
    pub error: Option<String>,
}

/// The whole workbench state.
pub struct App {
    /// Theme, keymap and defaults.
    pub settings: Settings,
    /// Current screen.
    pub tab: Tab,
    /// Open popup.
    pub popup: Option<Popup>,
    /// Set when the app should exit.
    pub quit: bool,
    /// Jobs screen.
    pub jobs: JobsScreen,
    /// Search screen.
    pub search: SearchScreen,
    /// Neighbours screen.
    pub neigh: NeighScreen,
    /// Compare screen.
    pub compare: CompareScreen,
    /// Data screen.
    pub data: DataScreen,
    /// Bottom line.
    pub message: Option<Message>,
    /// Sessions launched from this workbench.
    pub started: BTreeSet<String>,
    /// Requests for the event loop to run.
    pub outbox: Vec<Request>,
    /// Column ranges of the tab titles on the top line (set when drawn).
    pub tab_hits: Vec<(u16, u16)>,
    /// Something changed since the last draw.
    pub dirty: bool,
    /// Repaint every cell next frame (after a screen change or new
    /// non-Latin text, where terminals and ratatui may disagree on widths).
    pub full_redraw: bool,
}

impl App {
    /// A fresh workbench; asks for the first session scan.
    pub fn new(settings: Settings) -> App {
        let mut app = App {
            settings,
            tab: Tab::Jobs,
            popup: None,
            quit: false,
            jobs: JobsScreen::default(),
            search: SearchScreen::default(),
            neigh: NeighScreen::default(),
            compare: CompareScreen::default(),
            data: DataScreen::default(),
            message: None,
            started: BTreeSet::new(),
            outbox: Vec::new(),
            tab_hits: Vec::new(),
            dirty: true,
            full_redraw: false,
        };
        app.poll_sessions();
        app
    }

    /// Takes the requests queued since the last call.
    pub fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.outbox)
    }

    pub(crate) fn info(&mut self, s: impl Into<String>) {
        self.message = Some(Message::Info(s.into()));
    }
    pub(crate) fn error(&mut self, s: impl Into<String>) {
        let s = s.into();
        super::log::info(&format!("error: {s}"));
        self.message = Some(Message::Error(s));
    }

    /// Sessions launched here that still run.
    pub fn started_running(&self) -> Vec<String> {
        self.jobs
            .sessions
            .iter()
            .filter(|s| {
                self.started.contains(&s.id) && !s.state.is_final() && s.alive != Some(false)
            })
            .map(|s| s.id.clone())
            .collect()
    }

    /// `q` / Ctrl-C: quit, or ask first when jobs started here still run.
    pub fn request_quit(&mut self) {
        let running = self.started_running();
        if running.is_empty() || matches!(self.popup, Some(Popup::ConfirmQuit(_))) {
            self.quit = true;
        } else {
            self.popup = Some(Popup::ConfirmQuit(running));
        }
    }

    /// Handles a terminal event.
    pub fn on_event(&mut self, ev: crossterm::event::Event) {
        match ev {
            crossterm::event::Event::Key(k) if k.kind != KeyEventKind::Release => self.on_key(k),
            crossterm::event::Event::Mouse(m) => self.on_mouse(m),
            crossterm::event::Event::Resize(..) => self.dirty = true,
            _ => {}
        }
    }

    /// Handles a mouse event: tab clicks and the wheel.
    pub fn on_mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) if m.row == 0 && self.popup.is_none() => {
                if let Some(i) = self
                    .tab_hits
                    .iter()
                    .position(|(a, b)| m.column >= *a && m.column < *b)
                {
                    self.switch_tab(Tab::ALL[i]);
                }
            }
            MouseEventKind::ScrollDown => self.on_action(Action::Down),
            MouseEventKind::ScrollUp => self.on_action(Action::Up),
            _ => return,
        }
        self.dirty = true;
    }

    /// Handles a key.
    pub fn on_key(&mut self, k: KeyEvent) {
        self.dirty = true;
        if k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL) {
            self.request_quit();
            return;
        }
        if self.popup.is_some() {
            self.popup_key(k);
            return;
        }
        if self.editing() {
            self.edit_key(k);
            return;
        }
        if let Some(a) = self.settings.keymap.lookup(self.tab.context(), &k) {
            self.on_action(a);
        }
    }

    fn editing(&self) -> bool {
        match self.tab {
            Tab::Jobs => self.jobs.editing_filter,
            Tab::Search => self.search.editing,
            Tab::Neighbours => self.neigh.editing,
            _ => false,
        }
    }

    fn edit_buffer(&mut self) -> Option<&mut String> {
        match self.tab {
            Tab::Jobs => Some(&mut self.jobs.filter),
            Tab::Search => Some(&mut self.search.query),
            Tab::Neighbours => Some(&mut self.neigh.query),
            _ => None,
        }
    }

    fn stop_editing(&mut self) {
        self.jobs.editing_filter = false;
        self.search.editing = false;
        self.neigh.editing = false;
    }

    fn edit_key(&mut self, k: KeyEvent) {
        match k.code {
            KeyCode::Esc => self.stop_editing(),
            KeyCode::Enter => {
                self.stop_editing();
                match self.tab {
                    Tab::Search => self.run_search(),
                    Tab::Neighbours => {
                        let q = self.neigh.query.trim().to_string();
                        let side = self.neigh.side;
                        self.lookup(q, side, true);
                    }
                    _ => {}
                }
            }
            KeyCode::Backspace => {
                if let Some(b) = self.edit_buffer() {
                    b.pop();
                }
                self.after_filter_edit();
            }
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                if let Some(b) = self.edit_buffer() {
                    b.clear();
                }
                self.after_filter_edit();
            }
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                if let Some(b) = self.edit_buffer() {
                    b.push(c);
                }
                self.after_filter_edit();
            }
            _ => {}
        }
    }

    fn after_filter_edit(&mut self) {
        if self.tab == Tab::Jobs && self.jobs.selected_session().is_none() {
            let first = self.jobs.visible().first().map(|s| s.id.clone());
            if first.is_some() {
                self.jobs.selected = first;
            }
        }
    }

    /// Switches screen, asking for what the new screen shows.
    pub fn switch_tab(&mut self, t: Tab) {
        self.stop_editing();
        self.full_redraw |= t != self.tab;
        self.tab = t;
        match t {
            Tab::Compare => self.request_compare(),
            Tab::Data => self.request_data(),
            _ => {}
        }
    }

    fn request_compare(&mut self) {
        let sessions: Vec<String> = self
            .jobs
            .sessions
            .iter()
            .filter(|s| s.state == State::Done || s.best_mrr.is_some())
            .map(|s| s.id.clone())
            .collect();
        if sessions.is_empty() {
            return;
        }
        if self.compare.pending {
            self.compare.again = true;
            return;
        }
        self.compare.pending = true;
        self.outbox.push(Request::Compare {
            sessions,
            baseline: self.compare.baseline.clone(),
        });
    }

    fn request_data(&mut self) {
        let ws = self
            .jobs
            .selected_session()
            .map(|s| s.workspace.clone())
            .filter(|w| !w.is_empty())
            .unwrap_or_else(|| self.settings.workspace.clone());
        if ws.is_empty() || self.data.pending {
            return;
        }
        if self.data.workspace.as_deref() == Some(ws.as_str()) && self.data.stats.is_some() {
            return;
        }
        self.data.workspace = Some(ws.clone());
        self.data.pending = true;
        self.outbox.push(Request::WorkspaceStats(ws));
    }

    /// Runs an action on the current screen.
    pub fn on_action(&mut self, a: Action) {
        self.dirty = true;
        match a {
            Action::Quit => return self.request_quit(),
            Action::Help => {
                self.popup = Some(Popup::Help { scroll: 0 });
                return;
            }
            Action::Tab(n) => return self.switch_tab(Tab::ALL[(n as usize).clamp(1, 5) - 1]),
            Action::NextTab => return self.switch_tab(Tab::ALL[(self.tab.index() + 1) % 5]),
            Action::PrevTab => return self.switch_tab(Tab::ALL[(self.tab.index() + 4) % 5]),
            Action::Refresh if self.tab != Tab::Data => {
                self.poll_sessions();
                self.poll_metrics();
                if self.tab == Tab::Compare {
                    self.request_compare();
                }
                return;
            }
            Action::Close => {
                self.message = None;
                if self.tab == Tab::Jobs {
                    self.jobs.filter.clear();
                }
                return;
            }
            _ => {}
        }
        match self.tab {
            Tab::Jobs => self.jobs_action(a),
            Tab::Search => self.search_action(a),
            Tab::Neighbours => self.neigh_action(a),
            Tab::Compare => self.compare_action(a),
            Tab::Data => {
                if a == Action::Refresh {
                    self.data.stats = None;
                    self.request_data();
                }
            }
        }
    }

    fn run_search(&mut self) {
        let q = self.search.query.trim().to_string();
        if q.is_empty() {
            return;
        }
        let Some(session) = self.search.session.clone() else {
            self.error("choose a session first (s)");
            return;
        };
        if !matches!(self.search.index, IndexState::Ready(_)) {
            self.error("the index is not loaded yet");
            return;
        }
        self.search.seq += 1;
        self.search.pending = true;
        self.outbox.push(Request::Search {
            seq: self.search.seq,
            session,
            query: q,
            k: self.search.k,
            fusion: self.search.fusion,
        });
    }

    fn search_action(&mut self, a: Action) {
        let n = self.search.result.as_ref().map_or(0, |r| r.hits.len());
        let sel = &mut self.search.selected;
        match a {
            Action::Filter | Action::Enter => self.search.editing = true,
            Action::Up => *sel = sel.saturating_sub(1),
            Action::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
            Action::PageUp => *sel = sel.saturating_sub(5),
            Action::PageDown => *sel = (*sel + 5).min(n.saturating_sub(1)),
            Action::Top => *sel = 0,
            Action::Bottom => *sel = n.saturating_sub(1),
            Action::PickSession => {
                self.popup = Some(Popup::Picker {
                    purpose: PickFor::Search,
                    selected: 0,
                })
            }
            Action::NextJudged => {
                let IndexState::Ready(info) = &self.search.index else {
                    return self.error("load a session's index first (s)");
                };
                if info.judged_queries.is_empty() {
                    return self.error("this workspace has no judged queries");
                }
                let i = self.search.judged_pos % info.judged_queries.len();
                self.search.query = info.judged_queries[i].1.clone();
                self.search.judged_pos = i + 1;
                self.run_search();
            }
            Action::CycleFusion => {
                self.search.fusion = match self.search.fusion {
                    Fusion::Model => Fusion::Linear {
                        lambda: self.search.lambda,
                    },
                    Fusion::Linear { .. } => Fusion::Rrf { k: 60.0 },
                    Fusion::Rrf { .. } => Fusion::Model,
                };
                self.rerun_search();
            }
            Action::LambdaUp | Action::LambdaDown => {
                let d = if a == Action::LambdaUp { 0.1 } else { -0.1 };
                self.search.lambda =
                    ((self.search.lambda + d) * 10.0).round().clamp(0.0, 10.0) / 10.0;
                if let Fusion::Linear { .. } = self.search.fusion {
                    self.search.fusion = Fusion::Linear {
                        lambda: self.search.lambda,
                    };
                    self.rerun_search();
                }
            }
            _ => {}
        }
    }

    fn rerun_search(&mut self) {
        if !self.search.query.trim().is_empty() && matches!(self.search.index, IndexState::Ready(_))
        {
            self.run_search();
        }
    }

    /// Looks `term` up in both panes; `record` adds it to the history.
    fn lookup(&mut self, term: String, side: Side, record: bool) {
        if term.is_empty() {
            return;
        }
        self.neigh.query = term.clone();
        self.neigh.side = side;
        self.neigh.selected = 0;
        if record {
            self.neigh
                .history
                .truncate(self.neigh.hist_pos + usize::from(!self.neigh.history.is_empty()));
            if self.neigh.history.last() != Some(&(term.clone(), side)) {
                self.neigh.history.push((term.clone(), side));
            }
            self.neigh.hist_pos = self.neigh.history.len() - 1;
        }
        let mut any = false;
        for pane in 0..2 {
            let Some(session) = self.neigh.panes[pane].session.clone() else {
                continue;
            };
            any = true;
            let p = &mut self.neigh.panes[pane];
            p.seq += 1;
            p.pending = true;
            self.outbox.push(Request::Neighbours {
                pane,
                seq: p.seq,
                session,
                term: term.clone(),
                side,
                k: self.neigh.k,
                csls: self.neigh.csls,
            });
        }
        if !any {
            self.error("choose a session first (s)");
        }
    }

    fn neigh_action(&mut self, a: Action) {
        let pane = &self.neigh.panes[self.neigh.pane];
        let n = pane.result.as_ref().map_or(0, |r| {
            if self.neigh.list == 0 {
                r.cross.len()
            } else {
                r.own.len()
            }
        });
        match a {
            Action::Filter => self.neigh.editing = true,
            Action::Up => self.neigh.selected = self.neigh.selected.saturating_sub(1),
            Action::Down => {
                self.neigh.selected = (self.neigh.selected + 1).min(n.saturating_sub(1))
            }
            Action::Top => self.neigh.selected = 0,
            Action::Bottom => self.neigh.selected = n.saturating_sub(1),
            Action::Left | Action::Right if self.neigh.panes[1].session.is_some() => {
                self.neigh.pane = usize::from(a == Action::Right);
                self.neigh.selected = 0;
            }
            Action::SwitchPane => {
                self.neigh.list = 1 - self.neigh.list;
                self.neigh.selected = 0;
            }
            Action::PickSession | Action::PickSession2 => {
                self.popup = Some(Popup::Picker {
                    purpose: PickFor::Neighbours(usize::from(a == Action::PickSession2)),
                    selected: 0,
                })
            }
            Action::ToggleSide => {
                self.neigh.side = self.neigh.side.other();
                let q = self.neigh.query.trim().to_string();
                let side = self.neigh.side;
                if !q.is_empty() {
                    self.lookup(q, side, true);
                }
            }
            Action::ToggleCsls => {
                self.neigh.csls = !self.neigh.csls;
                let q = self.neigh.query.trim().to_string();
                let side = self.neigh.side;
                if !q.is_empty() {
                    self.lookup(q, side, false);
                }
            }
            Action::Enter => {
                let Some(r) = &self.neigh.panes[self.neigh.pane].result else {
                    self.neigh.editing = true;
                    return;
                };
                let list = if self.neigh.list == 0 {
                    &r.cross
                } else {
                    &r.own
                };
                if let Some(nb) = list.get(self.neigh.selected) {
                    let side = if self.neigh.list == 0 {
                        self.neigh.side.other()
                    } else {
                        self.neigh.side
                    };
                    let t = nb.term.clone();
                    self.lookup(t, side, true);
                }
            }
            Action::Back | Action::Forward => {
                let pos = self.neigh.hist_pos;
                let new = if a == Action::Back {
                    pos.checked_sub(1)
                } else {
                    (pos + 1 < self.neigh.history.len()).then_some(pos + 1)
                };
                if let Some(p) = new {
                    self.neigh.hist_pos = p;
                    let (t, s) = self.neigh.history[p].clone();
                    self.lookup(t, s, false);
                }
            }
            _ => {}
        }
    }

    fn compare_action(&mut self, a: Action) {
        let rows = self.compare.order();
        let ncols = self
            .compare
            .table
            .as_ref()
            .map_or(2, |t| t.metrics.len() + 2);
        match a {
            Action::Up => self.compare.row = self.compare.row.saturating_sub(1),
            Action::Down => {
                self.compare.row = (self.compare.row + 1).min(rows.len().saturating_sub(1))
            }
            Action::Left => self.compare.col = self.compare.col.saturating_sub(1),
            Action::Right => self.compare.col = (self.compare.col + 1).min(ncols - 1),
            Action::Top => self.compare.row = 0,
            Action::Bottom => self.compare.row = rows.len().saturating_sub(1),
            Action::SortColumn => {
                let c = self.compare.col;
                self.compare.sort = match self.compare.sort {
                    Some((sc, desc)) if sc == c => Some((c, !desc)),
                    _ => Some((c, c >= 2)),
                };
            }
            Action::SetBaseline => {
                let t = self.compare.table.as_ref();
                if let Some(row) = rows.get(self.compare.row).and_then(|&i| t?.rows.get(i)) {
                    self.compare.baseline = Some(row.system.clone());
                    self.request_compare();
                }
            }
            Action::ExportMarkdown | Action::ExportCsv => {
                let Some(t) = self.compare.table.clone() else {
                    return self.error("no table to export");
                };
                // into the baseline's folder (else the selected row's)
                let session = self.compare.baseline.clone().or_else(|| {
                    rows.get(self.compare.row)
                        .map(|&i| t.rows[i].system.clone())
                });
                let dir = session.and_then(|id| {
                    self.jobs
                        .sessions
                        .iter()
                        .find(|s| s.id == id)
                        .map(|s| s.dir.clone())
                });
                let Some(dir) = dir else {
                    return self.error("no session to export into");
                };
                let format = if a == Action::ExportCsv {
                    TableFormat::Csv
                } else {
                    TableFormat::Markdown
                };
                self.outbox.push(Request::Export {
                    table: t,
                    path: dir.join(format!("compare.{}", format.extension())),
                    format,
                });
            }
            _ => {}
        }
    }

    /// Sessions a picker offers: done first, then the rest, as scanned.
    pub fn pickable(&self) -> Vec<&SessionSummary> {
        let mut v: Vec<&SessionSummary> = self
            .jobs
            .sessions
            .iter()
            .filter(|s| s.state == State::Done)
            .collect();
        v.extend(self.jobs.sessions.iter().filter(|s| s.state != State::Done));
        v
    }

    fn popup_key(&mut self, k: KeyEvent) {
        let Some(popup) = self.popup.take() else {
            return;
        };
        let km = &self.settings.keymap;
        let action = km.lookup(Context::Global, &k);
        self.popup = match popup {
            Popup::Help { scroll } => match (k.code, action) {
                (KeyCode::Esc, _) | (_, Some(Action::Help)) | (_, Some(Action::Quit)) => None,
                (_, Some(Action::Down)) => Some(Popup::Help { scroll: scroll + 1 }),
                (_, Some(Action::Up)) => Some(Popup::Help {
                    scroll: scroll.saturating_sub(1),
                }),
                (_, Some(Action::PageDown)) => Some(Popup::Help {
                    scroll: scroll + 10,
                }),
                (_, Some(Action::PageUp)) => Some(Popup::Help {
                    scroll: scroll.saturating_sub(10),
                }),
                _ => Some(Popup::Help { scroll }),
            },
            Popup::ConfirmQuit(running) => match k.code {
                KeyCode::Char('l') | KeyCode::Char('L') => {
                    self.quit = true;
                    None
                }
                KeyCode::Char('c') | KeyCode::Char('C') => {
                    for s in &running {
                        self.outbox.push(Request::Cancel(s.clone()));
                    }
                    self.quit = true;
                    None
                }
                KeyCode::Esc => None,
                _ => Some(Popup::ConfirmQuit(running)),
            },
            Popup::ConfirmCancel(id) => match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    self.info(format!("cancelling {id}…"));
                    self.outbox.push(Request::Cancel(id));
                    None
                }
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('N') => None,
                _ => Some(Popup::ConfirmCancel(id)),
            },
            Popup::Picker { purpose, selected } => {
                let n = self.pickable().len();
                match (k.code, action) {
                    (KeyCode::Esc, _) => None,
                    (KeyCode::Enter, _) => {
                        if let Some(s) = self.pickable().get(selected) {
                            let id = s.id.clone();
                            self.picked(purpose, id);
                        }
                        None
                    }
                    (_, Some(Action::Down)) => Some(Popup::Picker {
                        purpose,
                        selected: (selected + 1).min(n.saturating_sub(1)),
                    }),
                    (_, Some(Action::Up)) => Some(Popup::Picker {
                        purpose,
                        selected: selected.saturating_sub(1),
                    }),
                    _ => Some(Popup::Picker { purpose, selected }),
                }
            }
            Popup::Form(form) => self.form_key(form, k),
        };
    }

    fn picked(&mut self, purpose: PickFor, id: String) {
        match purpose {
            PickFor::Search => {
                if self.search.session.as_deref() == Some(id.as_str())
                    && matches!(
                        self.search.index,
                        IndexState::Ready(_) | IndexState::Loading { .. }
                    )
                {
                    return;
                }
                self.search.session = Some(id.clone());
                self.search.index = IndexState::Loading {
                    fraction: 0.0,
                    what: "starting".into(),
                };
                self.search.result = None;
                self.outbox.push(Request::LoadIndex(id));
            }
            PickFor::Neighbours(p) => {
                self.neigh.panes[p] = NeighPane {
                    session: Some(id),
                    ..Default::default()
                };
                let q = self.neigh.query.trim().to_string();
                if !q.is_empty() {
                    let side = self.neigh.side;
                    self.lookup(q, side, false);
                }
            }
        }
    }

    /// Applies a backend answer; marks the screen for redrawing when the
    /// answer changed what is shown.
    ///
    /// A quiet answer (an unchanged session list, no new metrics) never
    /// *clears* `dirty`: replies arrive in batches and between frames, so an
    /// earlier answer (an index loaded, neighbours found) may still be
    /// waiting to be drawn, and clearing the flag lost it until some later
    /// change — the workbench then sat at "looking up…" although the
    /// answer had arrived.
    pub fn on_reply(&mut self, r: Reply) {
        if self.apply_reply(r) {
            self.dirty = true;
        }
    }

    /// [`App::on_reply`] without the redraw mark; `false` when nothing
    /// shown changed (stale or empty answers).
    fn apply_reply(&mut self, r: Reply) -> bool {
        let mut changed = true;
        match r {
            Reply::Sessions(_)
            | Reply::Metrics { .. }
            | Reply::Spec { .. }
            | Reply::Launched(_)
            | Reply::Cancelled { .. }
            | Reply::Resumed { .. } => return self.jobs_reply(r),
            Reply::IndexProgress {
                session,
                fraction,
                what,
            } => {
                if self.search.session.as_deref() == Some(session.as_str())
                    && matches!(self.search.index, IndexState::Loading { .. })
                {
                    self.search.index = IndexState::Loading { fraction, what };
                }
            }
            Reply::IndexLoaded { session, result } => {
                if self.search.session.as_deref() == Some(session.as_str()) {
                    self.search.index = match result {
                        Ok(i) => IndexState::Ready(i),
                        Err(e) => IndexState::Failed(e),
                    };
                    self.rerun_search();
                }
            }
            Reply::Searched { seq, result } => {
                if seq != self.search.seq {
                    return false;
                }
                self.full_redraw = true;
                self.search.pending = false;
                match result {
                    Ok(r) => {
                        self.search.result = Some(r);
                        self.search.result_query = self.search.query.trim().to_string();
                        self.search.error = None;
                        self.search.selected = 0;
                    }
                    Err(e) => self.search.error = Some(e),
                }
            }
            Reply::Neighbours { pane, seq, result } => {
                let p = &mut self.neigh.panes[pane.min(1)];
                if seq != p.seq {
                    return false;
                }
                self.full_redraw = true;
                p.pending = false;
                match result {
                    Ok(r) => {
                        p.result = Some(r);
                        p.error = None;
                    }
                    Err(e) => {
                        p.result = None;
                        p.error = Some(e)
                    }
                }
            }
            Reply::CompareProgress {
                done,
                total,
                session,
            } => {
                if self.compare.pending {
                    self.compare.progress = Some((done, total, session));
                } else {
                    changed = false; // a late report of a finished table
                }
            }
            Reply::Compared(res) => {
                self.compare.pending = false;
                self.compare.progress = None;
                if std::mem::take(&mut self.compare.again) {
                    self.request_compare();
                }
                match res {
                    Ok(t) => {
                        self.compare.table = Some(t);
                        self.compare.error = None;
                    }
                    Err(e) => self.compare.error = Some(e),
                }
            }
            Reply::Exported(res) => match res {
                Ok(p) => self.info(format!("wrote {}", p.display())),
                Err(e) => self.error(e),
            },
            Reply::Stats { workspace, result } => {
                if self.data.workspace.as_deref() == Some(workspace.as_str()) {
                    self.data.pending = false;
                    match result {
                        Ok(s) => {
                            self.data.stats = Some(s);
                            self.data.error = None;
                        }
                        Err(e) => self.data.error = Some(e),
                    }
                }
            }
        }
        changed
    }

    /// Runs every queued request against `backend` right away (tests);
    /// replies are applied in order.
    #[cfg(test)]
    pub fn pump_sync(&mut self, backend: &dyn Backend) {
        for _ in 0..16 {
            let reqs = self.take_requests();
            if reqs.is_empty() {
                break;
            }
            for r in reqs {
                let progress = std::sync::Mutex::new(Vec::new());
                let reply = execute(backend, r, &|p| progress.lock().expect("progress").push(p));
                for p in progress.into_inner().expect("progress") {
                    self.on_reply(p);
                }
                self.on_reply(reply);
            }
        }
    }
}
