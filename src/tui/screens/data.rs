//! The Data screen: a workspace's figures — state, key handling, backend
//! answers and drawing, as a [`Screen`].

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::{Ctx, Screen, View};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context, Keymap};
use crate::tui::widgets::*;

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

/// Work the Data screen asks of the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Figures of a workspace.
    WorkspaceStats(String),
}

/// The backend's answers to [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A workspace's figures.
    Stats {
        workspace: String,
        result: Result<WorkspaceStats, String>,
    },
}

impl DataScreen {
    fn request(&mut self, cx: &mut Ctx<'_, Request>) {
        let ws = cx
            .selected_session()
            .map(|s| s.workspace.clone())
            .filter(|w| !w.is_empty())
            .unwrap_or_else(|| cx.settings.workspace.clone());
        if ws.is_empty() || self.pending {
            return;
        }
        if self.workspace.as_deref() == Some(ws.as_str()) && self.stats.is_some() {
            return;
        }
        self.workspace = Some(ws.clone());
        self.pending = true;
        cx.send(Request::WorkspaceStats(ws));
    }
}

impl Screen for DataScreen {
    type Request = Request;
    type Reply = Reply;

    fn execute(
        backend: &dyn Backend,
        req: Request,
        _progress: &(dyn Fn(Reply) + Send + Sync),
    ) -> Reply {
        match req {
            Request::WorkspaceStats(workspace) => {
                let result = backend
                    .workspace_stats(&workspace)
                    .map_err(|e| e.to_string());
                Reply::Stats { workspace, result }
            }
        }
    }

    fn busy_label(req: &Request) -> Option<String> {
        let Request::WorkspaceStats(ws) = req;
        Some(format!("reading the workspace {ws}"))
    }

    fn failed(req: &Request, msg: String) -> Reply {
        match req.clone() {
            Request::WorkspaceStats(workspace) => Reply::Stats {
                workspace,
                result: Err(msg),
            },
        }
    }

    fn on_reply(&mut self, r: Reply, _cx: &mut Ctx<'_, Request>) -> bool {
        let Reply::Stats { workspace, result } = r;
        if self.workspace.as_deref() == Some(workspace.as_str()) {
            self.pending = false;
            match result {
                Ok(s) => {
                    self.stats = Some(s);
                    self.error = None;
                }
                Err(e) => self.error = Some(e),
            }
        }
        true
    }

    fn on_action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        if a == Action::Refresh {
            self.stats = None;
            self.request(cx);
        }
    }

    fn on_show(&mut self, cx: &mut Ctx<'_, Request>) {
        self.request(cx);
    }

    fn draw(&self, f: &mut Frame, area: Rect, v: &View<'_>) {
        draw(f, self, v, area)
    }

    fn hints(&self, km: &Keymap) -> String {
        format!("{} reload", km.keys_for(Context::Data, Action::Refresh))
    }
}

fn draw(f: &mut Frame, d: &DataScreen, v: &View<'_>, area: Rect) {
    let th = &v.settings.theme;
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
