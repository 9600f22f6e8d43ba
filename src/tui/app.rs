//! The workbench's shell, with no terminal: tabs, global keys, popups and
//! their confirmations, and the routing of keys, backend replies and frames
//! to the screens ([`super::screens::Screen`]). Keys and replies go in,
//! [`Request`]s for the backend come out (the `outbox`), so tests drive it
//! directly.

use std::collections::BTreeSet;

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

use super::backend::*;
use super::config::Settings;
use super::keymap::{Action, Context};
pub use super::screens::compare::CompareScreen;
pub use super::screens::data::DataScreen;
pub use super::screens::jobs::JobsScreen;
pub use super::screens::neighbours::NeighScreen;
#[cfg(test)]
pub use super::screens::search::IndexState;
pub use super::screens::search::SearchScreen;
use super::screens::{compare, data, jobs, neighbours, search, Ctx, Modal, Screen, Sessions};
pub use super::screens::{Message, PickFor, Popup};
use super::state::{self, UiState};

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

/// Runs `$body` with `$cx` a [`Ctx`] made of the app's fields (borrowed
/// one by one, so that a screen can be borrowed mutably beside it), with
/// `$sessions` the sessions as the handled screen sees them; the requests
/// the body queues are wrapped into the app's [`Request`].
macro_rules! with_cx {
    ($app:ident, $sessions:expr, |$cx:ident| $body:expr) => {{
        let mut outbox = Vec::new();
        let out = {
            let $cx = &mut Ctx {
                settings: &$app.settings,
                sessions: $sessions,
                popup: &mut $app.popup,
                message: &mut $app.message,
                started: &mut $app.started,
                full_redraw: &mut $app.full_redraw,
                bell: &mut $app.bell,
                outbox: &mut outbox,
            };
            $body
        };
        $app.outbox.extend(outbox.into_iter().map(Request::from));
        out
    }};
}

/// The sessions the Jobs screen `j` scanned and its selection, as the other
/// screens see them.
fn sessions_of(j: &JobsScreen) -> Sessions<'_> {
    Sessions {
        list: &j.sessions,
        selected: j.selected.as_deref(),
        shown: j.selected_session(),
    }
}

/// Runs `$body` with `$s` the current screen (a [`Screen`]) and `$cx` its
/// [`Ctx`]: the shell's one place that names every screen.
macro_rules! with_screen {
    ($app:ident, |$s:ident, $cx:ident| $body:expr) => {
        match $app.tab {
            Tab::Jobs => {
                let $s = &mut $app.jobs;
                with_cx!($app, Sessions::default(), |$cx| $body)
            }
            Tab::Search => {
                let $s = &mut $app.search;
                with_cx!($app, sessions_of(&$app.jobs), |$cx| $body)
            }
            Tab::Neighbours => {
                let $s = &mut $app.neigh;
                with_cx!($app, sessions_of(&$app.jobs), |$cx| $body)
            }
            Tab::Compare => {
                let $s = &mut $app.compare;
                with_cx!($app, sessions_of(&$app.jobs), |$cx| $body)
            }
            Tab::Data => {
                let $s = &mut $app.data;
                with_cx!($app, sessions_of(&$app.jobs), |$cx| $body)
            }
        }
    };
}

/// `From<screen::Request> for Request`, one variant per screen.
macro_rules! wrap {
    ($($screen:ident => $variant:ident),*) => {$(
        impl From<$screen::Request> for Request {
            fn from(r: $screen::Request) -> Request {
                Request::$variant(r)
            }
        }
    )*};
}
wrap!(
    jobs => Jobs,
    data => Data,
    compare => Compare,
    search => Search,
    neighbours => Neighbours
);

/// Work for the backend, one variant per screen (each screen's own
/// requests) and the shell's own; the event loop runs each on a worker
/// thread.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// The Jobs screen's work.
    Jobs(jobs::Request),
    /// The Search screen's work.
    Search(search::Request),
    /// The Neighbours screen's work.
    Neighbours(neighbours::Request),
    /// The Compare screen's work.
    Compare(compare::Request),
    /// The Data screen's work.
    Data(data::Request),
    /// Remember marks and baseline (`root`: the sessions root's key).
    SaveUiState {
        path: std::path::PathBuf,
        root: String,
        state: super::state::UiState,
    },
}

/// A backend answer (errors as display strings), routed to the screen that
/// asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The Jobs screen's answers.
    Jobs(jobs::Reply),
    /// The Search screen's answers.
    Search(search::Reply),
    /// The Neighbours screen's answers.
    Neighbours(neighbours::Reply),
    /// The Compare screen's answers.
    Compare(compare::Reply),
    /// The Data screen's answers.
    Data(data::Reply),
    /// Marks and baseline remembered.
    UiStateSaved(Result<(), String>),
}

impl Request {
    /// What the busy mark says while this request runs (the screen's
    /// [`Screen::busy_label`]); `None` for background work.
    pub fn busy_label(&self) -> Option<String> {
        match self {
            Request::Jobs(r) => JobsScreen::busy_label(r),
            Request::Search(r) => SearchScreen::busy_label(r),
            Request::Neighbours(r) => NeighScreen::busy_label(r),
            Request::Compare(r) => CompareScreen::busy_label(r),
            Request::Data(r) => DataScreen::busy_label(r),
            Request::SaveUiState { .. } => None,
        }
    }
}

/// A request handed to the event loop with the ticket its final answer
/// comes back with ([`App::on_done`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    /// Names this request among those in flight.
    pub ticket: u64,
    /// What to run.
    pub request: Request,
}

/// Work in flight that shows the busy mark on the status line.
#[derive(Debug, Clone, PartialEq)]
pub struct Busy {
    /// The request's ticket.
    pub ticket: u64,
    /// What the mark says (`opening session s0`).
    pub label: String,
    /// When it was handed out.
    pub since: std::time::Instant,
}

/// Frames of the busy mark's spinner, one per drawn frame.
pub const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// The error reply to `req` (when running it panicked).
pub fn failed(req: &Request, msg: String) -> Reply {
    match req {
        Request::Jobs(r) => Reply::Jobs(JobsScreen::failed(r, msg)),
        Request::Search(r) => Reply::Search(SearchScreen::failed(r, msg)),
        Request::Neighbours(r) => Reply::Neighbours(NeighScreen::failed(r, msg)),
        Request::Compare(r) => Reply::Compare(CompareScreen::failed(r, msg)),
        Request::Data(r) => Reply::Data(DataScreen::failed(r, msg)),
        Request::SaveUiState { .. } => Reply::UiStateSaved(Err(msg)),
    }
}

/// Runs one request against a backend (blocking); `progress` receives
/// intermediate replies (index loading, the compare table).
pub fn execute(
    backend: &dyn Backend,
    req: Request,
    progress: &(dyn Fn(Reply) + Send + Sync),
) -> Reply {
    match req {
        Request::Jobs(r) => Reply::Jobs(JobsScreen::execute(backend, r, &|p| {
            progress(Reply::Jobs(p))
        })),
        Request::Search(r) => Reply::Search(SearchScreen::execute(backend, r, &|p| {
            progress(Reply::Search(p))
        })),
        Request::Neighbours(r) => Reply::Neighbours(NeighScreen::execute(backend, r, &|p| {
            progress(Reply::Neighbours(p))
        })),
        Request::Compare(r) => Reply::Compare(CompareScreen::execute(backend, r, &|p| {
            progress(Reply::Compare(p))
        })),
        Request::Data(r) => Reply::Data(DataScreen::execute(backend, r, &|p| {
            progress(Reply::Data(p))
        })),
        Request::SaveUiState { path, root, state } => {
            Reply::UiStateSaved(super::state::save(&path, &root, &state).map_err(|e| e.to_string()))
        }
    }
}

/// The whole workbench state.
pub struct App {
    /// Theme, keymap and defaults.
    pub settings: Settings,
    /// Current screen.
    pub tab: Tab,
    /// The shell's open popup (the Jobs screen's own are
    /// [`JobsScreen::popup`]).
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
    /// Requests in flight that show the busy mark, oldest first.
    pub busy: Vec<Busy>,
    /// The last ticket handed out ([`App::take_work`]).
    next_ticket: u64,
    /// Frames drawn (the spinner's step).
    pub frames: u64,
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
            busy: Vec::new(),
            next_ticket: 0,
            frames: 0,
        };
        app.poll_sessions();
        app.outbox.push(search::Request::LoadHistory.into());
        app.outbox.push(jobs::Request::LauncherMemory.into());
        app
    }

    /// Takes the requests queued since the last call.
    pub fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.outbox)
    }

    /// Takes the requests queued since the last call, each with a ticket,
    /// for the event loop to run off the UI thread; those with a
    /// [`Request::busy_label`] show the busy mark from the next frame until
    /// [`App::on_done`] gets their ticket back.
    pub fn take_work(&mut self) -> Vec<Work> {
        let reqs = self.take_requests();
        reqs.into_iter()
            .map(|request| {
                self.next_ticket += 1;
                let ticket = self.next_ticket;
                if let Some(label) = request.busy_label() {
                    self.busy.push(Busy {
                        ticket,
                        label,
                        since: std::time::Instant::now(),
                    });
                    self.dirty = true;
                }
                Work { ticket, request }
            })
            .collect()
    }

    /// The final answer to the work of `ticket`: its busy mark goes and
    /// the answer is applied ([`App::on_reply`]).
    pub fn on_done(&mut self, ticket: u64, r: Reply) {
        let n = self.busy.len();
        self.busy.retain(|b| b.ticket != ticket);
        if self.busy.len() != n {
            self.dirty = true;
        }
        self.on_reply(r);
    }

    /// Whether work that shows the busy mark is in flight.
    pub fn is_busy(&self) -> bool {
        !self.busy.is_empty()
    }

    /// The busy mark: the spinner's current frame, the oldest request's
    /// label, its seconds once past one, and how many more are in flight
    /// (`⠙ opening session s0… 7 s · 1 more`); `None` when idle.
    pub fn busy_mark(&self) -> Option<String> {
        let first = self.busy.first()?;
        let spin = SPINNER[(self.frames % SPINNER.len() as u64) as usize];
        let mut s = format!("{spin} {}…", first.label);
        let secs = first.since.elapsed().as_secs();
        if secs >= 1 {
            s.push_str(&format!(" {secs} s"));
        }
        if self.busy.len() > 1 {
            s.push_str(&format!(" · {} more", self.busy.len() - 1));
        }
        Some(s)
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
            // the question replaces any popup open
            self.jobs.popup = None;
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
            MouseEventKind::Down(MouseButton::Left) if m.row == 0 && !self.popup_open() => {
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
        if self.popup_open() {
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

    /// Whether a popup is open: the shell's, or one of the Jobs screen's.
    pub fn popup_open(&self) -> bool {
        self.popup.is_some() || self.jobs.popup.is_some()
    }

    fn editing(&self) -> bool {
        match self.tab {
            Tab::Jobs => self.jobs.editing(),
            Tab::Search => self.search.editing(),
            Tab::Neighbours => self.neigh.editing(),
            Tab::Compare => self.compare.editing(),
            Tab::Data => self.data.editing(),
        }
    }

    fn stop_editing(&mut self) {
        self.jobs.stop_editing();
        self.search.stop_editing();
        self.neigh.stop_editing();
        self.compare.stop_editing();
        self.data.stop_editing();
    }

    fn edit_key(&mut self, k: KeyEvent) {
        with_screen!(self, |s, cx| s.edit_key(k, cx))
    }

    /// Switches screen, asking for what the new screen shows.
    pub fn switch_tab(&mut self, t: Tab) {
        self.stop_editing();
        self.full_redraw |= t != self.tab;
        self.tab = t;
        with_screen!(self, |s, cx| s.on_show(cx))
    }

    /// `Y`: what the screen has selected, for the clipboard.
    fn copy_selection(&mut self) {
        let text = match self.tab {
            Tab::Jobs => self.jobs.copy_text(),
            Tab::Search => self.search.copy_text(),
            Tab::Neighbours => self.neigh.copy_text(),
            Tab::Compare => self.compare.copy_text(),
            Tab::Data => self.data.copy_text(),
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
            Action::Quit => self.request_quit(),
            Action::Help => self.popup = Some(Popup::Help { scroll: 0 }),
            Action::Copy => self.copy_selection(),
            Action::Tab(n) => self.switch_tab(Tab::ALL[(n as usize).clamp(1, 5) - 1]),
            Action::NextTab => self.switch_tab(Tab::ALL[(self.tab.index() + 1) % 5]),
            Action::PrevTab => self.switch_tab(Tab::ALL[(self.tab.index() + 4) % 5]),
            Action::Refresh if self.tab != Tab::Data => {
                self.poll_sessions();
                self.poll_metrics();
                if self.tab == Tab::Compare {
                    with_cx!(self, sessions_of(&self.jobs), |cx| self.compare.on_show(cx));
                }
            }
            Action::Close => with_screen!(self, |s, cx| s.on_close(cx)),
            _ => with_screen!(self, |s, cx| s.on_action(a, cx)),
        }
    }

    /// Queues a rescan of the sessions root (unless one is in flight).
    pub fn poll_sessions(&mut self) {
        with_cx!(self, Sessions::default(), |cx| self.jobs.poll_sessions(cx));
    }

    /// Queues metrics tails for the sessions Jobs shows, and the selected
    /// session's log when the log pane shows.
    pub fn poll_metrics(&mut self) {
        with_cx!(self, Sessions::default(), |cx| self.jobs.poll_metrics(cx));
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

    /// The sessions Jobs scanned and its selection, as the other screens
    /// see them.
    pub fn sessions(&self) -> Sessions<'_> {
        sessions_of(&self.jobs)
    }

    /// Sessions a picker offers: done first, then the rest, as scanned.
    pub fn pickable(&self) -> Vec<&SessionSummary> {
        sessions_of(&self.jobs).pickable()
    }

    fn popup_key(&mut self, k: KeyEvent) {
        let action = self.settings.keymap.lookup(Context::Global, &k);
        let Some(popup) = self.popup.take() else {
            // a Jobs popup: it checks names against the sessions Jobs shows
            if let Some(p) = self.jobs.popup.take() {
                let list = Sessions {
                    list: &self.jobs.sessions,
                    ..Sessions::default()
                };
                self.jobs.popup = with_cx!(self, list, |cx| p.key(k, action, cx));
            }
            return;
        };
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
                        self.outbox.push(jobs::Request::Cancel(s.clone()).into());
                    }
                    self.quit = true;
                    None
                }
                KeyCode::Esc => None,
                _ => Some(Popup::ConfirmQuit(running)),
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
        };
    }

    fn picked(&mut self, purpose: PickFor, id: String) {
        match purpose {
            PickFor::Search => {
                with_cx!(self, sessions_of(&self.jobs), |cx| self.search.pick(id, cx))
            }
            PickFor::Neighbours(p) => {
                with_cx!(self, sessions_of(&self.jobs), |cx| self
                    .neigh
                    .pick(p, id, cx))
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
            Reply::Jobs(r) => {
                let had = self.jobs.popup.is_some();
                let rescan = matches!(r, jobs::Reply::Sessions(Ok(_)));
                let changed = with_cx!(self, Sessions::default(), |cx| self.jobs.on_reply(r, cx));
                if rescan {
                    // Search opens a session whose index build it launched
                    with_cx!(self, sessions_of(&self.jobs), |cx| self
                        .search
                        .on_sessions(cx));
                }
                if !had && self.jobs.popup.is_some() {
                    // a popup the answer opened (the form to duplicate a
                    // job) replaces the shell's
                    self.popup = None;
                }
                changed
            }
            Reply::Search(r) => {
                with_cx!(self, sessions_of(&self.jobs), |cx| self
                    .search
                    .on_reply(r, cx))
            }
            Reply::Neighbours(r) => {
                with_cx!(self, sessions_of(&self.jobs), |cx| self
                    .neigh
                    .on_reply(r, cx))
            }
            Reply::Compare(r) => {
                with_cx!(self, sessions_of(&self.jobs), |cx| self
                    .compare
                    .on_reply(r, cx))
            }
            Reply::Data(r) => {
                with_cx!(self, sessions_of(&self.jobs), |cx| self
                    .data
                    .on_reply(r, cx))
            }
            Reply::UiStateSaved(Ok(())) => false,
            Reply::UiStateSaved(Err(e)) => {
                self.error(format!("marks not remembered: {e}"));
                true
            }
        }
    }

    /// Runs every queued request against `backend` right away (tests);
    /// replies are applied in order.
    #[cfg(test)]
    pub fn pump_sync(&mut self, backend: &dyn Backend) {
        for _ in 0..16 {
            let work = self.take_work();
            if work.is_empty() {
                break;
            }
            for Work { ticket, request } in work {
                let progress = std::sync::Mutex::new(Vec::new());
                let reply = execute(backend, request, &|p| {
                    progress.lock().expect("progress").push(p)
                });
                for p in progress.into_inner().expect("progress") {
                    self.on_reply(p);
                }
                self.on_done(ticket, reply);
            }
        }
    }
}
