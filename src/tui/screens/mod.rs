//! One module per screen. Each screen is a type implementing [`Screen`]
//! (gitui's tabs, helix's `Component`): it owns its state, names the work it
//! asks of the backend in its own `Request` and `Reply` types (run by its
//! [`Screen::execute`]), handles its actions and answers through a [`Ctx`],
//! and draws itself from a [`View`]. The App shell (`app.rs`) routes keys,
//! answers and frames to them, wrapping each screen's requests and replies in
//! one variant of its routing enums; `ui.rs` draws the frame around them.
//!
//! Nothing here or in a screen imports the shell or the frame: a screen
//! reaches outside itself only through its [`Ctx`] (typed by its own
//! requests) and reads the sessions the Jobs screen scanned as a plain
//! [`Sessions`] list. A screen's own popups are its own [`Modal`]s; the
//! shell's (help, quit, the session picker) are [`Popup`]s.
//!
//! Adding a backend call to a screen touches the screen's file (a request
//! variant, its reply, `execute`, `failed` and `on_reply`) and the backend.

pub mod compare;
pub mod data;
pub mod jobs;
pub mod neighbours;
pub mod search;

use std::collections::BTreeSet;
use std::fmt::Debug;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::Frame;

use super::backend::{Backend, SessionSummary, State};
use super::config::Settings;
use super::keymap::{Action, Keymap};

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

/// The shell's popups over the current screen (a screen's own popups are
/// its [`Modal`]s).
#[derive(Debug, Clone, PartialEq)]
pub enum Popup {
    /// Key help, scrolled by `scroll` lines.
    Help { scroll: u16 },
    /// Jobs started here still run: leave or cancel them?
    ConfirmQuit(Vec<String>),
    /// Choose a session.
    Picker { purpose: PickFor, selected: usize },
}

/// A screen's popup (helix's compositor layer): while open it takes every
/// key and draws over the frame.
pub trait Modal: Sized {
    /// The requests its keys may send (its screen's).
    type Request;
    /// A key, with the global action it is bound to: the popup as it stays
    /// open, or `None` when the key closes it.
    fn key(
        self,
        k: KeyEvent,
        action: Option<Action>,
        cx: &mut Ctx<'_, Self::Request>,
    ) -> Option<Self>;
    /// Draws the popup over the frame.
    fn draw(&self, f: &mut Frame, v: &View<'_>);
}

/// The contract of a screen: state, messages, keys and drawing in one type.
pub trait Screen {
    /// Work this screen asks of the backend (the shell wraps it in its own
    /// routing enum).
    type Request: Debug + Clone + PartialEq;
    /// The backend's answers to [`Screen::Request`].
    type Reply: Debug + Clone + PartialEq;

    /// Runs one request against `backend` (blocking, on a worker thread);
    /// `progress` receives intermediate answers.
    fn execute(
        backend: &dyn Backend,
        req: Self::Request,
        progress: &(dyn Fn(Self::Reply) + Send + Sync),
    ) -> Self::Reply;

    /// The error answer to `req` (when running it panicked).
    fn failed(req: &Self::Request, msg: String) -> Self::Reply;

    /// What the status line's busy mark says while `req` runs (`opening
    /// session s0`), or `None` for background work that shows no mark
    /// (rescans, metric tails, remembering state). Every request a key
    /// sends that may take longer than a frame has a label: the mark is
    /// drawn on the next frame and stays until its answer arrives.
    fn busy_label(req: &Self::Request) -> Option<String>;

    /// Applies an answer; `false` when nothing shown changed (a stale or
    /// empty answer), so the shell need not redraw.
    fn on_reply(&mut self, r: Self::Reply, cx: &mut Ctx<'_, Self::Request>) -> bool;

    /// Runs an action of this screen's key context (global actions are the
    /// shell's).
    fn on_action(&mut self, a: Action, cx: &mut Ctx<'_, Self::Request>);

    /// The screen became the current one: ask for what it shows.
    fn on_show(&mut self, _cx: &mut Ctx<'_, Self::Request>) {}

    /// `Esc` on the screen: close one level of what is open, else clear
    /// the status line.
    fn on_close(&mut self, cx: &mut Ctx<'_, Self::Request>) {
        *cx.message = None;
    }

    /// Whether a text field of the screen takes the keys.
    fn editing(&self) -> bool {
        false
    }

    /// A key while [`Screen::editing`].
    fn edit_key(&mut self, _k: KeyEvent, _cx: &mut Ctx<'_, Self::Request>) {}

    /// Leaves any text field (the screen is left or a popup opens).
    fn stop_editing(&mut self) {}

    /// `Y`: what the screen has selected, for the clipboard.
    fn copy_text(&self) -> Option<String> {
        None
    }

    /// Draws the screen into `area`.
    fn draw(&self, f: &mut Frame, area: Rect, v: &View<'_>);

    /// This screen's key hints on the status line.
    fn hints(&self, km: &Keymap) -> String;
}

/// What a screen may touch outside itself while it handles an action or an
/// answer: the settings, the sessions Jobs scanned, the shell's popup, the
/// status line and the requests (`R`, the screen's own) for the backend.
pub struct Ctx<'a, R> {
    /// Theme, keymap and defaults.
    pub settings: &'a Settings,
    /// The sessions the Jobs screen scanned and its selection (empty while
    /// the Jobs screen itself is handled: it has its own).
    pub sessions: Sessions<'a>,
    /// The shell's open popup.
    pub popup: &'a mut Option<Popup>,
    /// The status line.
    pub message: &'a mut Option<Message>,
    /// Sessions launched from this workbench.
    pub started: &'a mut BTreeSet<String>,
    /// Repaint every cell next frame.
    pub full_redraw: &'a mut bool,
    /// Ring the terminal bell.
    pub bell: &'a mut bool,
    /// Requests for the event loop to run.
    pub outbox: &'a mut Vec<R>,
}

impl<R> Ctx<'_, R> {
    /// Queues a request for the backend.
    pub fn send(&mut self, r: R) {
        self.outbox.push(r);
    }
    /// Shows `s` on the status line.
    pub fn info(&mut self, s: impl Into<String>) {
        *self.message = Some(Message::Info(s.into()));
    }
    /// Shows `s` on the status line as an error (and logs it).
    pub fn error(&mut self, s: impl Into<String>) {
        let s = s.into();
        super::log::info(&format!("error: {s}"));
        *self.message = Some(Message::Error(s));
    }
    /// The session selected on Jobs.
    pub fn selected_session(&self) -> Option<&SessionSummary> {
        self.sessions.shown
    }
    /// Where a session picker opens (see [`Sessions::picker_start`]).
    pub fn picker_start(&self) -> usize {
        self.sessions.picker_start()
    }
    /// See [`Sessions::jobs_choice`].
    pub fn jobs_choice(&self) -> Option<String> {
        self.sessions.jobs_choice()
    }
}

/// What a screen reads while it draws itself.
pub struct View<'a> {
    /// Theme, keymap and defaults.
    pub settings: &'a Settings,
    /// The sessions the Jobs screen scanned and its selection.
    pub sessions: Sessions<'a>,
}

impl View<'_> {
    /// The name a session is shown by (its display name, a name several
    /// share with its folder name added), for session `id`.
    pub fn session_name(&self, id: &str) -> String {
        self.sessions
            .names(&[id.to_string()])
            .pop()
            .unwrap_or_else(|| id.to_string())
    }
}

/// The sessions as the Jobs screen scanned them, with its selection: what
/// the other screens and the pickers read of it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sessions<'a> {
    /// The sessions, as scanned.
    pub list: &'a [SessionSummary],
    /// The key of the row selected on Jobs (a session id or a sweep's key).
    pub selected: Option<&'a str>,
    /// The selected session, when its row shows on Jobs.
    pub shown: Option<&'a SessionSummary>,
}

impl<'a> Sessions<'a> {
    /// Names of `ids` that tell them apart, whole: display names (a
    /// sweep's session without a name of its own by its settings, `dim=16
    /// seed=2`, as the engine's `SweepSummary::labelled` names it), a name
    /// two sessions share with its folder name added (the engine's
    /// `unique_names`). The Compare table's systems are named so.
    pub fn names(&self, ids: &[String]) -> Vec<String> {
        let swept = sweep_labels(self.list);
        let names: Vec<String> = ids
            .iter()
            .map(|id| match self.list.iter().find(|s| &s.id == id) {
                Some(s) if s.name.is_empty() || s.name == s.id => swept
                    .get(&s.dir)
                    .cloned()
                    .unwrap_or_else(|| s.label().to_string()),
                Some(s) => s.label().to_string(),
                None => id.clone(),
            })
            .collect();
        rosetta::session::runs::unique_names(&names, ids)
    }

    /// Sessions a picker offers: done first, then the rest, as scanned.
    pub fn pickable(&self) -> Vec<&'a SessionSummary> {
        let mut v: Vec<&SessionSummary> = self
            .list
            .iter()
            .filter(|s| s.state == State::Done)
            .collect();
        v.extend(self.list.iter().filter(|s| s.state != State::Done));
        v
    }

    /// Where a session picker opens: on the session selected on Jobs, else
    /// the first.
    pub fn picker_start(&self) -> usize {
        self.pickable()
            .iter()
            .position(|s| Some(s.id.as_str()) == self.selected)
            .unwrap_or(0)
    }

    /// The session selected on Jobs, when it can be searched (finished, or
    /// with a checkpoint): where Search and Neighbours start.
    pub fn jobs_choice(&self) -> Option<String> {
        self.list
            .iter()
            .find(|s| Some(s.id.as_str()) == self.selected)
            .filter(|s| s.state == State::Done || s.best_mrr.is_some())
            .map(|s| s.id.clone())
    }
}

/// The sessions of each sweep among `list` by their settings (`dim=16`,
/// `dim=16 seed=2` where a point has several seeds: the engine's
/// `SweepSummary::labelled`), by session folder.
fn sweep_labels(list: &[SessionSummary]) -> std::collections::HashMap<std::path::PathBuf, String> {
    let members = list
        .iter()
        .filter_map(|s| {
            Some((
                s.sweep.clone()?,
                rosetta::jobs::sweep::MemberFigures {
                    dir: s.dir.clone(),
                    model: s.model.clone(),
                    state: s.state,
                    best: Default::default(),
                },
            ))
        })
        .collect();
    rosetta::jobs::sweep::group(members)
        .iter()
        .flat_map(|sw| sw.labelled())
        .map(|(label, dir)| (dir, label))
        .collect()
}

/// Applies a key to a text field being typed: Backspace, Ctrl-U (clear) and
/// characters; `false` for any other key (the field is unchanged).
pub fn edit_text(buf: &mut String, k: &KeyEvent) -> bool {
    match k.code {
        KeyCode::Backspace => {
            buf.pop();
        }
        KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => buf.clear(),
        KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => buf.push(c),
        _ => return false,
    }
    true
}
