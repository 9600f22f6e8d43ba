//! The Compare screen: sessions × metrics with wins/ties/losses against the
//! baseline and what the figures are over, sorting, baseline, a per-query
//! drill-down (Enter) and export to a path asked for — state, key handling,
//! backend answers and drawing. The figures, tests and drill-down are the
//! engine's ([`rosetta::eval::compare`]), as `rosetta compare` prints them.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use rosetta::eval::compare::DrillDown;
use rosetta::eval::Metric;

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
    /// Share of the table built (0..=1) and what is under way.
    pub progress: Option<(f64, String)>,
    /// Last error.
    pub error: Option<String>,
    /// The open per-query drill-down (Enter on a row).
    pub drill: Option<Drill>,
    /// The export path being typed, if asked for.
    pub export: Option<ExportPrompt>,
    /// Ask again when the pending answer arrives (the baseline changed).
    again: bool,
}

/// The per-query list of one session against the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Drill {
    /// The engine's list (every paired query, largest difference first).
    pub view: DrillDown,
    /// First line shown.
    pub scroll: usize,
}

/// The export prompt: the path typed so far and the format asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportPrompt {
    /// Path (relative paths under the current directory).
    pub path: String,
    /// The format of the key pressed (a path's known extension wins).
    pub format: TableFormat,
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

    /// The metric of the selected column, else the table's first.
    pub fn selected_metric(&self) -> Option<Metric> {
        let t = self.table.as_ref()?;
        self.col
            .checked_sub(2)
            .and_then(|i| t.metrics.get(i))
            .or_else(|| t.metrics.first())
            .copied()
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
        if self.compare.drill.is_some() {
            return self.drill_action(a);
        }
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
            Action::Enter => {
                let Some(t) = self.compare.table.as_ref() else {
                    return;
                };
                let Some(row) = rows.get(self.compare.row).map(|&i| &t.rows[i]) else {
                    return;
                };
                let Some(m) = self.compare.selected_metric() else {
                    return;
                };
                match t.drill_down(&row.system, m, 0) {
                    Ok(view) => self.compare.drill = Some(Drill { view, scroll: 0 }),
                    Err(e) => self.error(e.to_string()),
                }
            }
            Action::ExportMarkdown | Action::ExportCsv => {
                let Some(t) = self.compare.table.as_ref() else {
                    return self.error("no table to export");
                };
                let format = if a == Action::ExportCsv {
                    TableFormat::Csv
                } else {
                    TableFormat::Markdown
                };
                // a file under the current directory, named after the baseline
                let name = t.baseline.as_deref().unwrap_or("sessions");
                let name: String = name
                    .chars()
                    .map(|c| {
                        if c.is_alphanumeric() || "-_.".contains(c) {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                self.compare.export = Some(ExportPrompt {
                    path: format!("compare-{name}.{}", format.extension()),
                    format,
                });
            }
            _ => {}
        }
    }

    /// Keys of the open drill-down: scroll, ←→ another metric, Enter or Esc closes.
    fn drill_action(&mut self, a: Action) {
        let page = 10;
        let Some(d) = self.compare.drill.as_mut() else {
            return;
        };
        let last = d.view.rows.len().saturating_sub(1);
        match a {
            Action::Up => d.scroll = d.scroll.saturating_sub(1),
            Action::Down => d.scroll = (d.scroll + 1).min(last),
            Action::PageUp => d.scroll = d.scroll.saturating_sub(page),
            Action::PageDown => d.scroll = (d.scroll + page).min(last),
            Action::Top => d.scroll = 0,
            Action::Bottom => d.scroll = last,
            Action::Left | Action::Right => {
                let Some(t) = self.compare.table.as_ref() else {
                    return;
                };
                let n = t.metrics.len();
                let Some(i) = t.metrics.iter().position(|m| *m == d.view.metric) else {
                    return;
                };
                let j = if a == Action::Left {
                    (i + n - 1) % n
                } else {
                    (i + 1) % n
                };
                if let Ok(view) = t.drill_down(&d.view.system, t.metrics[j], 0) {
                    *d = Drill { view, scroll: 0 };
                    self.compare.col = j + 2;
                }
            }
            Action::Enter | Action::Close => self.compare.drill = None,
            _ => {}
        }
    }

    /// A key while the export path is typed: Enter writes, Esc cancels.
    pub(crate) fn compare_edit_key(&mut self, k: KeyEvent) {
        let Some(p) = self.compare.export.as_mut() else {
            return;
        };
        match k.code {
            KeyCode::Esc => self.compare.export = None,
            KeyCode::Enter => {
                let Some(p) = self.compare.export.take() else {
                    return;
                };
                let path = std::path::PathBuf::from(p.path.trim());
                if path.as_os_str().is_empty() {
                    return self.error("no path to export to");
                }
                let Some(table) = self.compare.table.clone() else {
                    return self.error("no table to export");
                };
                let format = TableFormat::from_path(&path).unwrap_or(p.format);
                self.outbox.push(Request::Export {
                    table,
                    path,
                    format,
                });
            }
            KeyCode::Backspace => {
                p.path.pop();
            }
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => p.path.clear(),
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => p.path.push(c),
            _ => {}
        }
    }

    /// Applies this screen's answer (see [`App::on_reply`]); `false` when
    /// nothing shown changed.
    pub(crate) fn compare_reply(&mut self, r: Reply) -> bool {
        let mut changed = true;
        match r {
            Reply::CompareProgress { fraction, what } => {
                if self.compare.pending {
                    self.compare.progress = Some((fraction, what));
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
                        // an open drill-down follows the new table (another baseline)
                        if let Some(d) = &self.compare.drill {
                            self.compare.drill = t
                                .drill_down(&d.view.system, d.view.metric, 0)
                                .ok()
                                .map(|view| Drill {
                                    scroll: d.scroll.min(view.rows.len().saturating_sub(1)),
                                    view,
                                });
                        }
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
    let [sa, ta, fa] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let Some(t) = &c.table else {
        let msg = if let Some(e) = &c.error {
            Span::styled(format!(" {e}"), th.bad())
        } else if c.pending {
            Span::raw(match &c.progress {
                Some((fraction, what)) => {
                    format!(" building the table… {:.0}% {what}", fraction * 100.0)
                }
                None => " building the table…".to_string(),
            })
        } else {
            Span::styled(" no finished sessions to compare yet", th.dim())
        };
        f.render_widget(
            Paragraph::new(msg).block(block(th, " Compare ", true)),
            area,
        );
        return;
    };
    // what every figure is over
    let scope = t.scope_lines();
    let scope = if scope.is_empty() {
        " over: unknown task".to_string()
    } else {
        format!(
            " {}",
            scope
                .iter()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" · ")
        )
    };
    f.render_widget(Paragraph::new(Span::styled(scope, th.dim())), sa);
    if let Some(d) = &c.drill {
        return draw_drill(f, app, d, ta, fa);
    }
    let wtl_metric = c.selected_metric();
    let mut names = vec!["session".to_string(), "model".to_string()];
    names.extend(t.metrics.iter().map(|m| m.name().to_string()));
    let mut header: Vec<Cell> = names
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
        .collect();
    if t.baseline.is_some() {
        header.push(Cell::from(Span::styled(
            format!("W/T/L {}", wtl_metric.map_or("", |m| m.name())),
            th.accent(),
        )));
    }
    let order = c.order();
    // runs named alike keep what tells them apart when the column is narrow
    let labels = rosetta::session::runs::distinct_labels(
        &t.rows.iter().map(|r| r.system.clone()).collect::<Vec<_>>(),
    );
    let rows: Vec<Row> = order
        .iter()
        .map(|&i| {
            let r = &t.rows[i];
            let mut cells = vec![
                Cell::from(format!(
                    "{}{}",
                    if r.baseline { "◆ " } else { "" },
                    labels[i]
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
            if t.baseline.is_some() {
                let v = wtl_metric.and_then(|m| r.tests.get(&m));
                cells.push(Cell::from(match v {
                    Some(v) => format!("{}/{}/{}", v.wins, v.ties, v.losses),
                    None if r.baseline => "baseline".into(),
                    None => "—".into(),
                }));
            }
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![Constraint::Min(16), Constraint::Length(8)];
    widths.extend(t.metrics.iter().map(|_| Constraint::Length(9)));
    if t.baseline.is_some() {
        widths.push(Constraint::Length(14));
    }
    let mut st =
        TableState::default().with_selected(Some(c.row.min(order.len().saturating_sub(1))));
    f.render_stateful_widget(
        Table::new(rows, widths)
            .header(Row::new(header))
            .block(block(
                th,
                format!(" Compare ({} sessions) ", t.rows.len()),
                true,
            ))
            .row_highlight_style(th.selected()),
        ta,
        &mut st,
    );
    if let Some(p) = &c.export {
        return draw_prompt(f, app, p, fa);
    }
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

/// The drill-down in place of the table: one row per paired query, largest
/// difference first, from the scroll position.
fn draw_drill(f: &mut Frame, app: &App, d: &Drill, area: Rect, foot: Rect) {
    let th = &app.settings.theme;
    let v = &d.view;
    let header = Row::new(vec![
        Cell::from(Span::styled("query", th.accent())),
        Cell::from(Span::styled("baseline", th.accent())),
        Cell::from(Span::styled("session", th.accent())),
        Cell::from(Span::styled("difference", th.accent())),
        Cell::from(Span::styled("text", th.accent())),
    ]);
    let rows: Vec<Row> = v
        .rows
        .iter()
        .skip(d.scroll)
        .map(|r| {
            let st = if r.difference > rosetta::eval::compare::TIE {
                th.good()
            } else if r.difference < -rosetta::eval::compare::TIE {
                th.bad()
            } else {
                Style::default()
            };
            Row::new(vec![
                Cell::from(r.name().to_string()),
                Cell::from(format!("{:.4}", r.baseline)),
                Cell::from(format!("{:.4}", r.value)),
                Cell::from(Span::styled(format!("{:+.4}", r.difference), st)),
                Cell::from(r.text.clone().unwrap_or_default()),
            ])
        })
        .collect();
    let qw = v
        .rows
        .iter()
        .map(|r| r.name().chars().count())
        .max()
        .unwrap_or(0)
        .clamp(5, 18) as u16;
    let widths = [
        Constraint::Length(qw),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Min(10),
    ];
    // rows that fit between the borders under the header
    let fit = area.height.saturating_sub(3) as usize;
    let shown = if v.rows.is_empty() {
        "no paired query".to_string()
    } else {
        let end = (d.scroll + fit).min(v.rows.len());
        format!("{}–{end} of {}", d.scroll + 1, v.paired)
    };
    f.render_widget(
        Table::new(rows, widths).header(header).block(block(
            th,
            format!(
                " {} per query: {} against {} ({shown}) ",
                v.metric, v.system, v.baseline
            ),
            true,
        )),
        area,
    );
    let line = format!(
        " largest differences first · wins/ties/losses {}/{}/{} over {} paired quer{}",
        v.wins,
        v.ties,
        v.losses,
        v.paired,
        if v.paired == 1 { "y" } else { "ies" }
    );
    f.render_widget(Paragraph::new(Span::styled(line, th.dim())), foot);
}

/// The export prompt on the footer line.
fn draw_prompt(f: &mut Frame, app: &App, p: &ExportPrompt, area: Rect) {
    let th = &app.settings.theme;
    let line = Line::from(vec![
        Span::styled(" export to: ", th.accent()),
        Span::raw(p.path.clone()),
        Span::styled("▏", th.accent()),
        Span::styled(
            "  Enter write · Esc cancel · .md .csv .tsv .json .txt",
            th.dim(),
        ),
    ]);
    f.render_widget(Paragraph::new(line), area);
}

/// This screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if app.compare.drill.is_some() {
        return format!(
            "↑↓ scroll · ←→ metric · {}/{} back to the table",
            k(C::Compare, Action::Enter),
            k(C::Compare, Action::Close)
        );
    }
    format!(
        "←→ column · {} per query · {} sort · {} baseline · {} Markdown · {} CSV",
        k(C::Compare, Action::Enter),
        k(C::Compare, Action::SortColumn),
        k(C::Compare, Action::SetBaseline),
        k(C::Compare, Action::ExportMarkdown),
        k(C::Compare, Action::ExportCsv)
    )
}
