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
pub use super::screens::compare::CompareScreen;
pub use super::screens::data::DataScreen;
pub use super::screens::jobs::{JobForm, JobsScreen};
pub use super::screens::neighbours::{NeighPane, NeighScreen};
pub use super::screens::search::{IndexState, SearchScreen};
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
    /// Read the launcher last used under the sessions root.
    LauncherMemory,
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
    /// Fetch one whole document for the Search screen's document view.
    Document {
        seq: u64,
        session: String,
        docno: String,
        query: Option<String>,
    },
    /// Read the recorded search queries.
    LoadHistory,
    /// Record the search queries.
    SaveHistory(Vec<String>),
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
    /// List a session's term associations (Neighbours screen's table).
    Associations {
        seq: u64,
        session: String,
        options: AssocOptions,
    },
    /// Write the rows of an association table matching `filter` as TSV.
    ExportAssociations {
        table: Box<Associations>,
        filter: String,
        path: std::path::PathBuf,
    },
    /// Build the compare table.
    Compare {
        /// `(id, label)`: folder name and the name the table shows.
        sessions: Vec<(String, String)>,
        baseline: Option<String>,
    },
    /// Two sessions' rankings of one judged query (the Compare rankings view).
    Rankings {
        /// Session ids, baseline first.
        sessions: Vec<String>,
        qid: String,
    },
    /// Write the compare table to a file.
    Export {
        table: Comparison,
        path: std::path::PathBuf,
        format: TableFormat,
    },
    /// Figures of a workspace.
    WorkspaceStats(String),
    /// A session's details (the Jobs detail pane).
    SessionDetail(String),
    /// The last `lines` lines of a session's log (the Jobs log pane).
    LogTail { session: String, lines: usize },
    /// Set a session's name, tags or note.
    SetMeta {
        session: String,
        field: MetaField,
        value: String,
    },
    /// Delete a session.
    Delete(String),
    /// Remember marks and baseline (`root`: the sessions root's key).
    SaveUiState {
        path: std::path::PathBuf,
        root: String,
        state: super::state::UiState,
    },
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
    Document {
        seq: u64,
        result: Result<Document, String>,
    },
    History(Result<Vec<String>, String>),
    HistorySaved(Result<(), String>),
    Neighbours {
        pane: usize,
        seq: u64,
        result: Result<NeighbourResult, String>,
    },
    Associations {
        seq: u64,
        result: Result<Associations, String>,
    },
    /// Rows written and where.
    AssociationsExported(Result<(std::path::PathBuf, usize), String>),
    CompareProgress {
        fraction: f64,
        what: String,
    },
    Compared(Result<Comparison, String>),
    Exported(Result<std::path::PathBuf, String>),
    Stats {
        workspace: String,
        result: Result<WorkspaceStats, String>,
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
    /// The rankings of one judged query, one per session asked for.
    Rankings {
        qid: String,
        result: Result<Vec<JudgedRanking>, String>,
    },
    Deleted {
        session: String,
        result: Result<(), String>,
    },
    UiStateSaved(Result<(), String>),
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
            spec: e.map(|_: ()| Box::default()),
        },
        Request::Launch(_) => Reply::Launched(e.map(|_: ()| unreachable_launch())),
        Request::LauncherMemory => Reply::LauncherMemory(e.map(|_: ()| LauncherMemory::default())),
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
        Request::Document { seq, .. } => Reply::Document {
            seq,
            result: e.map(|_: ()| Document::default()),
        },
        Request::LoadHistory => Reply::History(e.map(|_: ()| Vec::new())),
        Request::SaveHistory(_) => Reply::HistorySaved(e),
        Request::Neighbours { pane, seq, .. } => Reply::Neighbours {
            pane,
            seq,
            result: e.map(|_: ()| NeighbourResult::default()),
        },
        Request::Associations { seq, .. } => Reply::Associations {
            seq,
            result: e.map(|_: ()| Associations::default()),
        },
        Request::ExportAssociations { .. } => {
            Reply::AssociationsExported(e.map(|_: ()| (std::path::PathBuf::new(), 0)))
        }
        Request::Compare { .. } => Reply::Compared(e.map(|_: ()| Comparison::default())),
        Request::Export { .. } => Reply::Exported(e.map(|_: ()| std::path::PathBuf::new())),
        Request::Rankings { qid, .. } => Reply::Rankings {
            qid,
            result: e.map(|_: ()| Vec::new()),
        },
        Request::WorkspaceStats(workspace) => Reply::Stats {
            workspace,
            result: e.map(|_: ()| WorkspaceStats::default()),
        },
        Request::SessionDetail(session) => Reply::Detail {
            session,
            result: e.map(|_: ()| Box::default()),
        },
        Request::LogTail { session, .. } => Reply::LogTail {
            session,
            result: e.map(|_: ()| Vec::new()),
        },
        Request::SetMeta { session, field, .. } => Reply::MetaSet {
            session,
            field,
            result: e,
        },
        Request::Delete(session) => Reply::Deleted { session, result: e },
        Request::SaveUiState { .. } => Reply::UiStateSaved(e),
    }
}

fn unreachable_launch() -> Launched {
    Launched::default()
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
        Request::Document {
            seq,
            session,
            docno,
            query,
        } => Reply::Document {
            seq,
            result: backend
                .document(&session, &docno, query.as_deref())
                .map_err(s),
        },
        Request::LoadHistory => Reply::History(backend.load_history().map_err(s)),
        Request::SaveHistory(queries) => {
            Reply::HistorySaved(backend.save_history(&queries).map_err(s))
        }
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
        Request::Associations {
            seq,
            session,
            options,
        } => Reply::Associations {
            seq,
            result: backend.associations(&session, &options).map_err(s),
        },
        Request::ExportAssociations {
            table,
            filter,
            path,
        } => Reply::AssociationsExported(
            backend
                .export_associations(&table, &filter, &path)
                .map(|n| (path, n))
                .map_err(s),
        ),
        Request::Compare { sessions, baseline } => {
            let cb = |fraction: f64, what: &str| {
                progress(Reply::CompareProgress {
                    fraction,
                    what: what.to_string(),
                })
            };
            Reply::Compared(
                backend
                    .compare(&sessions, baseline.as_deref(), &cb)
                    .map_err(s),
            )
        }
        Request::Rankings { sessions, qid } => Reply::Rankings {
            result: sessions
                .iter()
                .map(|id| backend.judged_ranking(id, &qid, super::screens::compare::RANKING_K))
                .collect::<rosetta::Result<Vec<_>>>()
                .map_err(s),
            qid,
        },
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
        Request::SaveUiState { path, root, state } => {
            Reply::UiStateSaved(super::state::save(&path, &root, &state).map_err(s))
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
    /// A session's details, scrolled by `scroll` lines (`None` while loading).
    Detail {
        session: String,
        scroll: u16,
        detail: Option<Result<Box<RunDetail>, String>>,
    },
    /// Really delete this session?
    ConfirmDelete(String),
    /// Editing a session's name, tags or note.
    EditMeta {
        session: String,
        field: MetaField,
        value: String,
    },
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
    /// Text for the terminal's clipboard: the event loop sends it as an
    /// OSC 52 sequence (terminals and tmux with clipboard access honour it).
    pub clipboard: Option<String>,
    /// Ctrl-Z: the event loop hands the terminal back and stops the process
    /// (SIGTSTP), as shells expect; `fg` resumes with a full redraw.
    pub suspend: bool,
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
    /// Ring the terminal bell (a job finished, failed or diverged); the
    /// event loop rings it and clears the flag.
    pub bell: bool,
}

impl App {
    /// A fresh workbench; asks for the first session scan.
    pub fn new(settings: Settings) -> App {
        let mut app = App {
            settings,
            tab: Tab::Jobs,
            popup: None,
            quit: false,
            suspend: false,
            clipboard: None,
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
            bell: false,
        };
        app.poll_sessions();
        app.outbox.push(Request::LoadHistory);
        app.outbox.push(Request::LauncherMemory);
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
        if k.code == KeyCode::Char('z') && k.modifiers.contains(KeyModifiers::CONTROL) {
            self.suspend = true;
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
            Tab::Neighbours => self.neigh.editing || self.neigh.assoc.input.is_some(),
            Tab::Compare => self.compare.export.is_some(),
            _ => false,
        }
    }

    fn edit_buffer(&mut self) -> Option<&mut String> {
        match self.tab {
            Tab::Jobs => Some(&mut self.jobs.filter),
            Tab::Search => Some(&mut self.search.query),
            Tab::Neighbours => Some(self.neigh.edit_buffer()),
            _ => None,
        }
    }

    fn stop_editing(&mut self) {
        self.jobs.editing_filter = false;
        self.search.editing = false;
        self.neigh.editing = false;
        self.compare.export = None;
        self.neigh.assoc.input = None;
    }

    fn edit_key(&mut self, k: KeyEvent) {
        if self.tab == Tab::Compare {
            return self.compare_edit_key(k);
        }
        match k.code {
            KeyCode::Esc => self.stop_editing(),
            KeyCode::Enter => {
                let assoc_input = self.neigh.assoc.input;
                self.stop_editing();
                match self.tab {
                    Tab::Search => self.run_search(),
                    Tab::Neighbours => self.neigh_submit(assoc_input),
                    _ => {}
                }
            }
            KeyCode::Up | KeyCode::Down if self.tab == Tab::Search => {
                self.recall_query(k.code == KeyCode::Up)
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
        if self.tab == Tab::Jobs {
            self.jobs.keep_selection_shown();
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
            // with none chosen yet, start on the session selected on Jobs
            Tab::Search if self.search.session.is_none() => {
                if let Some(id) = self.jobs_choice() {
                    self.picked(PickFor::Search, id);
                }
            }
            Tab::Neighbours if self.neigh.panes[0].session.is_none() => {
                if let Some(id) = self.jobs_choice() {
                    self.picked(PickFor::Neighbours(0), id);
                }
            }
            _ => {}
        }
    }

    /// The session selected on Jobs, when it can be searched (finished, or
    /// with a checkpoint): where Search and Neighbours start.
    fn jobs_choice(&self) -> Option<String> {
        self.jobs
            .sessions
            .iter()
            .find(|s| Some(&s.id) == self.jobs.selected.as_ref())
            .filter(|s| s.state == State::Done || s.best_mrr.is_some())
            .map(|s| s.id.clone())
    }

    /// Where a session picker opens: on the session selected on Jobs, else
    /// the first.
    pub(crate) fn picker_start(&self) -> usize {
        self.pickable()
            .iter()
            .position(|s| Some(&s.id) == self.jobs.selected.as_ref())
            .unwrap_or(0)
    }

    /// The name a session is shown by (its display name, a name several
    /// share with its folder name added), for session `id`.
    pub fn session_name(&self, id: &str) -> String {
        self.jobs
            .names(&[id.to_string()])
            .pop()
            .unwrap_or_else(|| id.to_string())
    }

    /// `Y`: what the screen has selected, for the clipboard.
    fn copy_selection(&mut self) {
        let text = match self.tab {
            Tab::Jobs => self
                .jobs
                .selected_session()
                .map(|s| s.dir.display().to_string()),
            Tab::Search => match &self.search.doc {
                Some(d) if !d.label.is_empty() => Some(d.label.clone()),
                Some(d) => Some(d.docno.clone()),
                None => Some(self.search.query.trim().to_string()),
            },
            Tab::Neighbours => Some(self.neigh.query.trim().to_string()),
            Tab::Compare | Tab::Data => None,
        }
        .filter(|t| !t.is_empty());
        match text {
            Some(t) => {
                self.info(format!("copied {t:?} (terminal clipboard)"));
                self.clipboard = Some(t);
            }
            None => self.error(
                "nothing to copy here (Y copies a session folder, query, document id or term)",
            ),
        }
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
            Action::Copy => return self.copy_selection(),
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
            Action::Close if self.tab == Tab::Search && self.search.doc.is_some() => {
                self.search.doc = None;
                return;
            }
            Action::Close => {
                self.message = None;
                if self.tab == Tab::Jobs {
                    self.jobs.filter.clear();
                }
                if self.tab == Tab::Compare {
                    // one level back: rankings to queries, queries to the table
                    if self.compare.rankings.take().is_none() {
                        self.compare.drill = None;
                    }
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
            Tab::Data => self.data_action(a),
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
            p @ (Popup::Detail { .. } | Popup::ConfirmDelete(_) | Popup::EditMeta { .. }) => {
                self.jobs_popup_key(p, k, action)
            }
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
                self.neigh.panes[p] = NeighPane::new(id);
                let q = self.neigh.query.trim().to_string();
                if !q.is_empty() {
                    let side = self.neigh.side;
                    self.lookup(q, side, false);
                }
                if self.neigh.assoc.on {
                    self.request_associations();
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
        match r {
            Reply::Sessions(_)
            | Reply::Metrics { .. }
            | Reply::Spec { .. }
            | Reply::Launched(_)
            | Reply::LauncherMemory(_)
            | Reply::Cancelled { .. }
            | Reply::Resumed { .. }
            | Reply::Detail { .. }
            | Reply::LogTail { .. }
            | Reply::MetaSet { .. }
            | Reply::Deleted { .. }
            | Reply::UiStateSaved(_) => self.jobs_reply(r),
            Reply::IndexProgress { .. }
            | Reply::IndexLoaded { .. }
            | Reply::Searched { .. }
            | Reply::Document { .. }
            | Reply::History(_)
            | Reply::HistorySaved(_) => self.search_reply(r),
            Reply::Neighbours { .. }
            | Reply::Associations { .. }
            | Reply::AssociationsExported(_) => self.neighbours_reply(r),
            Reply::CompareProgress { .. }
            | Reply::Compared(_)
            | Reply::Exported(_)
            | Reply::Rankings { .. } => self.compare_reply(r),
            Reply::Stats { .. } => self.data_reply(r),
        }
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
