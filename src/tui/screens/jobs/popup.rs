//! The Jobs screen's popups, one [`Modal`] it owns: the new-job form, the
//! cancel and delete confirmations, a session's details and its
//! name/tags/note editor.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Frame;

use super::detail::{detail_lines_len, draw_detail, draw_edit_meta};
use super::form::{draw_form, JobForm};
use super::request::Request;
use crate::tui::backend::*;
use crate::tui::keymap::Action;
use crate::tui::screens::{Ctx, Modal, View};
use crate::tui::widgets::draw_dialog;

/// A popup of the Jobs screen.
#[derive(Debug, Clone, PartialEq)]
pub enum JobsPopup {
    /// The new-job form.
    Form(JobForm),
    /// Really cancel this job?
    ConfirmCancel(String),
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

impl Modal for JobsPopup {
    type Request = Request;

    fn key(
        self,
        k: KeyEvent,
        action: Option<Action>,
        cx: &mut Ctx<'_, Request>,
    ) -> Option<JobsPopup> {
        match self {
            JobsPopup::Form(form) => form.key(k, cx).map(JobsPopup::Form),
            JobsPopup::ConfirmCancel(id) => match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    cx.info(format!("cancelling {id}…"));
                    cx.send(Request::Cancel(id));
                    None
                }
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('N') => None,
                _ => Some(JobsPopup::ConfirmCancel(id)),
            },
            JobsPopup::Detail {
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
                Some(JobsPopup::Detail {
                    session,
                    scroll,
                    detail,
                })
            }
            JobsPopup::ConfirmDelete(id) => match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') => {
                    cx.info(format!("deleting {id}…"));
                    cx.send(Request::Delete(id));
                    None
                }
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('N') => None,
                _ => Some(JobsPopup::ConfirmDelete(id)),
            },
            JobsPopup::EditMeta {
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
                Some(JobsPopup::EditMeta {
                    session,
                    field,
                    value,
                })
            }
        }
    }

    fn draw(&self, f: &mut Frame, v: &View<'_>) {
        let th = &v.settings.theme;
        match self {
            JobsPopup::Form(form) => draw_form(f, th, form),
            JobsPopup::ConfirmCancel(id) => {
                let text = format!("Cancel job {id}?\n\n[y] cancel it   [n/Esc] keep it running");
                draw_dialog(f, th, "Cancel job", &text);
            }
            JobsPopup::Detail {
                session,
                scroll,
                detail,
            } => draw_detail(f, th, session, *scroll, detail),
            JobsPopup::ConfirmDelete(id) => {
                let text = format!(
                    "Delete session {id} and all its files\n(checkpoints, metrics, log)?\n\n[y] delete it   [n/Esc] keep it"
                );
                draw_dialog(f, th, "Delete session", &text);
            }
            JobsPopup::EditMeta {
                session,
                field,
                value,
            } => draw_edit_meta(f, th, session, *field, value),
        }
    }
}
