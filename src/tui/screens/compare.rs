//! The Compare screen: sessions × metrics, sorting, baseline and export —
//! state, key handling, backend answers and drawing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use crate::tui::app::{App, Reply, Request};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context};
use crate::tui::ui::*;

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

impl App {
    pub(crate) fn request_compare(&mut self) {
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

    pub(crate) fn compare_action(&mut self, a: Action) {
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

    /// Applies this screen's answer (see [`App::on_reply`]); `false` when
    /// nothing shown changed.
    pub(crate) fn compare_reply(&mut self, r: Reply) -> bool {
        let mut changed = true;
        match r {
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
            _ => return false,
        }
        changed
    }
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let c = &app.compare;
    let [ta, fa] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let Some(t) = &c.table else {
        let msg = if let Some(e) = &c.error {
            Span::styled(format!(" {e}"), th.bad())
        } else if c.pending {
            Span::raw(match &c.progress {
                Some((done, total, s)) => {
                    format!(" building the table… {done}/{total} sessions evaluated ({s})")
                }
                None => " building the table…".to_string(),
            })
        } else {
            Span::styled(" no finished sessions to compare yet", th.dim())
        };
        f.render_widget(Paragraph::new(msg).block(block(th, " Compare ", true)), ta);
        return;
    };
    let mut names = vec!["session".to_string(), "model".to_string()];
    names.extend(t.metrics.iter().map(|m| m.name().to_string()));
    let header = Row::new(
        names
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let arrow = match c.sort {
                    Some((col, true)) if col == i => " ↓",
                    Some((col, false)) if col == i => " ↑",
                    _ => "",
                };
                let st = if i == c.col {
                    th.accent().add_modifier(Modifier::UNDERLINED)
                } else {
                    th.accent()
                };
                Cell::from(Span::styled(format!("{h}{arrow}"), st))
            })
            .collect::<Vec<_>>(),
    );
    let order = c.order();
    let rows: Vec<Row> = order
        .iter()
        .map(|&i| {
            let r = &t.rows[i];
            let mut cells = vec![
                Cell::from(format!(
                    "{}{}",
                    if r.baseline { "◆ " } else { "" },
                    r.system
                )),
                Cell::from(r.detail.clone()),
            ];
            for &m in &t.metrics {
                let mark = r.mark(m);
                let st = match mark {
                    Mark::Better => th.good(),
                    Mark::Worse => th.bad(),
                    Mark::None => Style::default(),
                };
                let sym = mark.symbol();
                cells.push(Cell::from(Span::styled(
                    format!(
                        "{:.4}{}{sym}",
                        r.mean(m),
                        if sym.is_empty() { "" } else { " " }
                    ),
                    st,
                )));
            }
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![Constraint::Min(16), Constraint::Length(8)];
    widths.extend(t.metrics.iter().map(|_| Constraint::Length(10)));
    let mut st =
        TableState::default().with_selected(Some(c.row.min(order.len().saturating_sub(1))));
    f.render_stateful_widget(
        Table::new(rows, widths)
            .header(header)
            .block(block(
                th,
                format!(" Compare ({} sessions) ", t.rows.len()),
                true,
            ))
            .row_highlight_style(th.selected()),
        ta,
        &mut st,
    );
    let mut foot = match &t.baseline {
        Some(b) => {
            format!(" baseline ◆ {b} · ▲/▼ better/worse ({})", t.method())
        }
        None => " no baseline: press b on a row to choose one".into(),
    };
    // the selected cell's test against the baseline
    let selected = order
        .get(c.row)
        .map(|&i| &t.rows[i])
        .zip(c.col.checked_sub(2).and_then(|m| t.metrics.get(m)));
    if let Some(v) = selected.and_then(|(r, m)| r.tests.get(m)) {
        foot.push_str(&format!(
            " · p {} · wins/ties/losses {}/{}/{}",
            rosetta::eval::compare::fmt_p(v.p_adjusted),
            v.wins,
            v.ties,
            v.losses
        ));
    }
    for r in t.rows.iter().filter(|r| r.note.is_some()) {
        foot.push_str(&format!(" · {} not tested", r.system));
    }
    if !t.skipped.is_empty() {
        let names: Vec<&str> = t.skipped.iter().map(|s| s.system.as_str()).collect();
        foot.push_str(&format!(" · left out (no model): {}", names.join(", ")));
    }
    f.render_widget(Paragraph::new(Span::styled(foot, th.dim())), fa);
}

/// This screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    format!(
        "←→ column · {} sort · {} baseline · {} Markdown · {} CSV",
        k(C::Compare, Action::SortColumn),
        k(C::Compare, Action::SetBaseline),
        k(C::Compare, Action::ExportMarkdown),
        k(C::Compare, Action::ExportCsv)
    )
}
