//! The Data screen: a workspace's figures —
//! state, key handling, backend answers and drawing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use crate::tui::app::{App, Reply, Request};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context};
use crate::tui::ui::*;

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

impl App {
    pub(crate) fn request_data(&mut self) {
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

    pub(crate) fn data_action(&mut self, a: Action) {
        if a == Action::Refresh {
            self.data.stats = None;
            self.request_data();
        }
    }

    /// Applies this screen's answer (see [`App::on_reply`]); `false` when
    /// nothing shown changed.
    pub(crate) fn data_reply(&mut self, r: Reply) -> bool {
        match r {
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
            _ => return false,
        }
        true
    }
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let d = &app.data;
    let title = format!(" Workspace {} ", d.workspace.as_deref().unwrap_or(""));
    let Some(s) = &d.stats else {
        let msg = if let Some(e) = &d.error {
            Span::styled(format!(" {e}"), th.bad())
        } else if d.pending {
            Span::raw(" reading the workspace…")
        } else {
            Span::styled(
                " no workspace: select a job on the Jobs screen, or set `workspace` in the config file",
                th.dim(),
            )
        };
        f.render_widget(
            Paragraph::new(msg)
                .wrap(Wrap { trim: true })
                .block(block(th, title, true)),
            area,
        );
        return;
    };
    let [la, sa, fa] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length((s.splits.len() as u16 + 3).min(area.height / 2)),
        Constraint::Min(3),
    ])
    .areas(area);
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(format!(" {} ", s.path), th.accent()),
            Span::raw(format!(
                "· queries in {} · documents in {}",
                s.source_lang, s.target_lang
            )),
        ])),
        la,
    );
    let pct = |v: Option<f64>| {
        v.map(|x| format!("{:.2}%", x * 100.0))
            .unwrap_or_else(|| "—".into())
    };
    let rows: Vec<Row> = s
        .splits
        .iter()
        .map(|sp| {
            Row::new(vec![
                sp.name.clone(),
                sp.size.to_string(),
                pct(sp.source_oov),
                pct(sp.target_oov),
            ])
        })
        .collect();
    f.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(12),
                Constraint::Length(10),
                Constraint::Length(14),
                Constraint::Length(14),
            ],
        )
        .header(
            Row::new(vec![
                "split".to_string(),
                "size".into(),
                format!("{} OOV", s.source_lang),
                format!("{} OOV", s.target_lang),
            ])
            .style(th.accent()),
        )
        .block(block(th, " Splits ", true)),
        sa,
    );
    let kw = s
        .figures
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<Line> = s
        .figures
        .iter()
        .map(|(k, v)| {
            Line::from(vec![
                Span::styled(format!(" {k:<kw$}  "), th.dim()),
                Span::raw(v.clone()),
            ])
        })
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(block(th, " Vocabulary, coverage, dictionary ", false)),
        fa,
    );
}

/// This screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    format!("{} reload", k(C::Data, Action::Refresh))
}
