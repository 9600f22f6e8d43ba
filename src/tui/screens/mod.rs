//! One module per screen. Each screen is a type implementing [`Screen`]
//! (gitui's tabs, helix's `Component`): it owns its state, names the work it
//! asks of the backend in its own `Request` and `Reply` types (run by its
//! [`Screen::execute`]), handles its actions and answers through a [`Ctx`],
//! and draws itself from a [`View`]. The App shell (`app.rs`) routes keys,
//! answers and frames to them, wrapping each screen's requests and replies in
//! one variant of its routing enums; `ui.rs` draws the frame around them.
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

use super::app::{Message, Popup, Request};
use super::backend::{Backend, SessionSummary, State};
use super::config::Settings;
use super::keymap::{Action, Keymap};
use jobs::JobsScreen;

/// The contract of a screen: state, messages, keys and drawing in one type.
pub trait Screen {
    /// Work this screen asks of the backend (wrapped by the app's
    /// [`Request`]).
    type Request: Debug + Clone + PartialEq + Into<Request>;
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

    /// Applies an answer; `false` when nothing shown changed (a stale or
    /// empty answer), so the shell need not redraw.
    fn on_reply(&mut self, r: Self::Reply, cx: &mut Ctx<'_>) -> bool;

    /// Runs an action of this screen's key context (global actions are the
    /// shell's).
    fn on_action(&mut self, a: Action, cx: &mut Ctx<'_>);

    /// The screen became the current one: ask for what it shows.
    fn on_show(&mut self, _cx: &mut Ctx<'_>) {}

    /// `Esc` on the screen: close one level of what is open, else clear
    /// the status line.
    fn on_close(&mut self, cx: &mut Ctx<'_>) {
        *cx.message = None;
    }

    /// Whether a text field of the screen takes the keys.
    fn editing(&self) -> bool {
        false
    }

    /// A key while [`Screen::editing`].
    fn edit_key(&mut self, _k: KeyEvent, _cx: &mut Ctx<'_>) {}

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
/// answer: the settings, the Jobs screen's sessions, the popup, the status
/// line and the requests for the backend.
pub struct Ctx<'a> {
    /// Theme, keymap and defaults.
    pub settings: &'a Settings,
    /// The Jobs screen (its sessions and selection); `None` while the Jobs
    /// screen itself is handled.
    pub jobs: Option<&'a JobsScreen>,
    /// The open popup.
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
    pub outbox: &'a mut Vec<Request>,
}

impl Ctx<'_> {
    /// Queues a request for the backend.
    pub fn send(&mut self, r: impl Into<Request>) {
        self.outbox.push(r.into());
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
        self.jobs.and_then(|j| j.selected_session())
    }
    /// Where a session picker opens (see [`pickable`]).
    pub fn picker_start(&self) -> usize {
        self.jobs.map(picker_start).unwrap_or(0)
    }
    /// See [`jobs_choice`].
    pub fn jobs_choice(&self) -> Option<String> {
        self.jobs.and_then(jobs_choice)
    }
}

/// What a screen reads while it draws itself.
pub struct View<'a> {
    /// Theme, keymap and defaults.
    pub settings: &'a Settings,
    /// The Jobs screen (its sessions and their names).
    pub jobs: &'a JobsScreen,
}

impl View<'_> {
    /// The name a session is shown by (its display name, a name several
    /// share with its folder name added), for session `id`.
    pub fn session_name(&self, id: &str) -> String {
        session_name(self.jobs, id)
    }
}

/// See [`View::session_name`].
pub fn session_name(jobs: &JobsScreen, id: &str) -> String {
    jobs.names(&[id.to_string()])
        .pop()
        .unwrap_or_else(|| id.to_string())
}

/// Sessions a picker offers: done first, then the rest, as scanned.
pub fn pickable(jobs: &JobsScreen) -> Vec<&SessionSummary> {
    let mut v: Vec<&SessionSummary> = jobs
        .sessions
        .iter()
        .filter(|s| s.state == State::Done)
        .collect();
    v.extend(jobs.sessions.iter().filter(|s| s.state != State::Done));
    v
}

/// Where a session picker opens: on the session selected on Jobs, else the
/// first.
pub fn picker_start(jobs: &JobsScreen) -> usize {
    pickable(jobs)
        .iter()
        .position(|s| Some(&s.id) == jobs.selected.as_ref())
        .unwrap_or(0)
}

/// The session selected on Jobs, when it can be searched (finished, or with
/// a checkpoint): where Search and Neighbours start.
pub fn jobs_choice(jobs: &JobsScreen) -> Option<String> {
    jobs.sessions
        .iter()
        .find(|s| Some(&s.id) == jobs.selected.as_ref())
        .filter(|s| s.state == State::Done || s.best_mrr.is_some())
        .map(|s| s.id.clone())
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
