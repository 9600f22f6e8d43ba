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

use super::{Ctx, Screen, View};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context, Keymap};
use crate::tui::widgets::*;

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
    /// The two rankings of one query (Enter on a drill-down row).
    pub rankings: Option<Rankings>,
    /// `(id, label)` of the sessions the table was asked for: a row's
    /// label names its session folder.
    pub sessions: Vec<(String, String)>,
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

/// Documents each ranking shows in the rankings view.
pub const RANKING_K: usize = 20;

/// The rankings view: one judged query as the baseline and the drilled
/// session each ranked it, side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct Rankings {
    /// Query id.
    pub qid: String,
    /// Its name (label, else id).
    pub name: String,
    /// The systems' labels, baseline first.
    pub systems: Vec<String>,
    /// The rankings, in the systems' order, once they arrive.
    pub result: Option<Result<Vec<JudgedRanking>, String>>,
    /// First rank shown.
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

/// Work the Compare screen asks of the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Build the compare table.
    Table {
        /// `(id, label)`: folder name and the name the table shows.
        sessions: Vec<(String, String)>,
        baseline: Option<String>,
    },
    /// Two sessions' rankings of one judged query (the rankings view).
    Rankings {
        /// Session ids, baseline first.
        sessions: Vec<String>,
        qid: String,
    },
    /// Write the compare table to a file.
    Export {
        table: Box<Comparison>,
        path: std::path::PathBuf,
        format: TableFormat,
    },
}

/// The backend's answers to [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Share of the table built and what is under way.
    Progress { fraction: f64, what: String },
    /// The table.
    Table(Result<Comparison, String>),
    /// Where the table was written.
    Exported(Result<std::path::PathBuf, String>),
    /// The rankings of one judged query, one per session asked for.
    Rankings {
        qid: String,
        result: Result<Vec<JudgedRanking>, String>,
    },
}

impl CompareScreen {
    fn request(&mut self, cx: &mut Ctx<'_, Request>) {
        let ids: Vec<String> = cx
            .sessions
            .list
            .iter()
            .filter(|s| s.state == State::Done || s.best_mrr.is_some())
            .map(|s| s.id.clone())
            .collect();
        if ids.is_empty() {
            return;
        }
        // rows named as everywhere else: by the session's name
        let sessions: Vec<(String, String)> =
            ids.iter().cloned().zip(cx.sessions.names(&ids)).collect();
        if self.pending {
            self.again = true;
            return;
        }
        self.pending = true;
        self.sessions = sessions.clone();
        cx.send(Request::Table {
            sessions,
            baseline: self.baseline.clone(),
        });
    }

    fn action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        if self.rankings.is_some() {
            return self.rankings_action(a);
        }
        if self.drill.is_some() {
            return self.drill_action(a, cx);
        }
        let rows = self.order();
        let ncols = self.table.as_ref().map_or(2, |t| t.metrics.len() + 2);
        match a {
            Action::Up => self.row = self.row.saturating_sub(1),
            Action::Down => self.row = (self.row + 1).min(rows.len().saturating_sub(1)),
            Action::Left => self.col = self.col.saturating_sub(1),
            Action::Right => self.col = (self.col + 1).min(ncols - 1),
            Action::Top => self.row = 0,
            Action::Bottom => self.row = rows.len().saturating_sub(1),
            Action::SortColumn => {
                let c = self.col;
                self.sort = match self.sort {
                    Some((sc, desc)) if sc == c => Some((c, !desc)),
                    _ => Some((c, c >= 2)),
                };
            }
            Action::SetBaseline => {
                let t = self.table.as_ref();
                if let Some(row) = rows.get(self.row).and_then(|&i| t?.rows.get(i)) {
                    self.baseline = Some(row.system.clone());
                    self.request(cx);
                }
            }
            Action::Enter => {
                let Some(t) = self.table.as_ref() else {
                    return;
                };
                let Some(row) = rows.get(self.row).map(|&i| &t.rows[i]) else {
                    return;
                };
                let Some(m) = self.selected_metric() else {
                    return;
                };
                match t.drill_down(&row.system, m, 0) {
                    Ok(view) => self.drill = Some(Drill { view, scroll: 0 }),
                    Err(e) => cx.error(e.to_string()),
                }
            }
            Action::ExportMarkdown | Action::ExportCsv => {
                let Some(t) = self.table.as_ref() else {
                    return cx.error("no table to export");
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
                self.export = Some(ExportPrompt {
                    path: format!("compare-{name}.{}", format.extension()),
                    format,
                });
            }
            _ => {}
        }
    }

    /// Keys of the open drill-down: scroll, ←→ another metric, Enter or Esc closes.
    fn drill_action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        let page = 10;
        let Some(d) = self.drill.as_mut() else {
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
                let Some(t) = self.table.as_ref() else {
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
                    self.col = j + 2;
                }
            }
            Action::Enter => self.open_rankings(cx),
            Action::Close => self.drill = None,
            _ => {}
        }
    }

    /// Enter on the drill-down's first row: both sessions' rankings of
    /// that query, asked of the backend.
    fn open_rankings(&mut self, cx: &mut Ctx<'_, Request>) {
        let Some(d) = self.drill.as_ref() else {
            return;
        };
        let Some(row) = d.view.rows.get(d.scroll) else {
            return;
        };
        let systems = vec![d.view.baseline.clone(), d.view.system.clone()];
        let ids: Option<Vec<String>> = systems
            .iter()
            .map(|l| {
                self.sessions
                    .iter()
                    .find(|(_, label)| label == l)
                    .map(|(id, _)| id.clone())
            })
            .collect();
        let Some(ids) = ids else {
            return cx.error("the table changed: press Esc and open the query again");
        };
        self.rankings = Some(Rankings {
            qid: row.query.clone(),
            name: row.name().to_string(),
            systems,
            result: None,
            scroll: 0,
        });
        cx.send(Request::Rankings {
            sessions: ids,
            qid: row.query.clone(),
        });
    }

    /// Keys of the rankings view: scroll both lists; Enter or Esc goes back
    /// to the per-query list.
    fn rankings_action(&mut self, a: Action) {
        let Some(r) = self.rankings.as_mut() else {
            return;
        };
        let last = RANKING_K.saturating_sub(1);
        match a {
            Action::Up => r.scroll = r.scroll.saturating_sub(1),
            Action::Down => r.scroll = (r.scroll + 1).min(last),
            Action::Top => r.scroll = 0,
            Action::Enter | Action::Close => self.rankings = None,
            _ => {}
        }
    }

    /// A key while the export path is typed: Enter writes, Esc cancels.
    fn export_key(&mut self, k: KeyEvent, cx: &mut Ctx<'_, Request>) {
        let Some(p) = self.export.as_mut() else {
            return;
        };
        match k.code {
            KeyCode::Esc => self.export = None,
            KeyCode::Enter => {
                let Some(p) = self.export.take() else {
                    return;
                };
                let path = std::path::PathBuf::from(p.path.trim());
                if path.as_os_str().is_empty() {
                    return cx.error("no path to export to");
                }
                let Some(table) = self.table.clone() else {
                    return cx.error("no table to export");
                };
                let format = TableFormat::from_path(&path).unwrap_or(p.format);
                cx.send(Request::Export {
                    table: Box::new(table),
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

    fn reply(&mut self, r: Reply, cx: &mut Ctx<'_, Request>) -> bool {
        let mut changed = true;
        match r {
            Reply::Progress { fraction, what } => {
                if self.pending {
                    self.progress = Some((fraction, what));
                } else {
                    changed = false; // a late report of a finished table
                }
            }
            Reply::Table(res) => {
                self.pending = false;
                self.progress = None;
                if std::mem::take(&mut self.again) {
                    self.request(cx);
                }
                match res {
                    Ok(t) => {
                        // an open drill-down follows the new table (another baseline)
                        if let Some(d) = &self.drill {
                            self.drill =
                                t.drill_down(&d.view.system, d.view.metric, 0)
                                    .ok()
                                    .map(|view| Drill {
                                        scroll: d.scroll.min(view.rows.len().saturating_sub(1)),
                                        view,
                                    });
                        }
                        self.table = Some(t);
                        self.error = None;
                    }
                    Err(e) => self.error = Some(e),
                }
            }
            Reply::Rankings { qid, result } => match self.rankings.as_mut() {
                Some(r) if r.qid == qid => r.result = Some(result),
                _ => changed = false, // a view closed meanwhile
            },
            Reply::Exported(res) => match res {
                Ok(p) => cx.info(format!("wrote {}", p.display())),
                Err(e) => cx.error(e),
            },
        }
        changed
    }
}

impl Screen for CompareScreen {
    type Request = Request;
    type Reply = Reply;

    fn execute(
        backend: &dyn Backend,
        req: Request,
        progress: &(dyn Fn(Reply) + Send + Sync),
    ) -> Reply {
        let s = |e: rosetta::Error| e.to_string();
        match req {
            Request::Table { sessions, baseline } => {
                let cb = |fraction: f64, what: &str| {
                    progress(Reply::Progress {
                        fraction,
                        what: what.to_string(),
                    })
                };
                Reply::Table(
                    backend
                        .compare(&sessions, baseline.as_deref(), &cb)
                        .map_err(s),
                )
            }
            Request::Rankings { sessions, qid } => Reply::Rankings {
                result: sessions
                    .iter()
                    .map(|id| backend.judged_ranking(id, &qid, RANKING_K))
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
        }
    }

    fn busy_label(req: &Request) -> Option<String> {
        Some(match req {
            Request::Table {
                sessions,
                baseline: Some(b),
            } => {
                let name = sessions
                    .iter()
                    .find(|(id, label)| id == b || label == b)
                    .map_or(b.as_str(), |(_, label)| label.as_str());
                format!("comparing {} sessions against {name}", sessions.len())
            }
            Request::Table { sessions, .. } => {
                format!("comparing {} sessions", sessions.len())
            }
            Request::Rankings { qid, .. } => format!("ranking query {qid}"),
            Request::Export { path, .. } => format!("writing {}", path.display()),
        })
    }

    fn failed(req: &Request, msg: String) -> Reply {
        match req {
            Request::Table { .. } => Reply::Table(Err(msg)),
            Request::Rankings { qid, .. } => Reply::Rankings {
                qid: qid.clone(),
                result: Err(msg),
            },
            Request::Export { .. } => Reply::Exported(Err(msg)),
        }
    }

    fn on_reply(&mut self, r: Reply, cx: &mut Ctx<'_, Request>) -> bool {
        self.reply(r, cx)
    }

    fn on_action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        self.action(a, cx)
    }

    fn on_show(&mut self, cx: &mut Ctx<'_, Request>) {
        self.request(cx)
    }

    fn on_close(&mut self, cx: &mut Ctx<'_, Request>) {
        *cx.message = None;
        // one level back: rankings to queries, queries to the table
        if self.rankings.take().is_none() {
            self.drill = None;
        }
    }

    fn editing(&self) -> bool {
        self.export.is_some()
    }

    fn edit_key(&mut self, k: KeyEvent, cx: &mut Ctx<'_, Request>) {
        self.export_key(k, cx)
    }

    fn stop_editing(&mut self) {
        self.export = None;
    }

    fn draw(&self, f: &mut Frame, area: Rect, v: &View<'_>) {
        draw(f, self, v, area)
    }

    fn hints(&self, km: &Keymap) -> String {
        hints(self, km)
    }
}

fn draw(f: &mut Frame, c: &CompareScreen, v: &View<'_>, area: Rect) {
    let th = &v.settings.theme;
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
    if let Some(r) = &c.rankings {
        return draw_rankings(f, v, r, ta, fa);
    }
    if let Some(d) = &c.drill {
        return draw_drill(f, v, d, ta, fa);
    }
    let wtl_metric = c.selected_metric();
    let order = c.order();
    // runs named alike keep what tells them apart when the column is narrow
    let labels: Vec<String> = rosetta::session::runs::distinct_labels(
        &t.rows.iter().map(|r| r.system.clone()).collect::<Vec<_>>(),
    )
    .into_iter()
    .zip(&t.rows)
    .map(|(l, r)| format!("{}{l}", if r.baseline { "◆ " } else { "" }))
    .collect();
    let wtl_cell = |r: &rosetta::eval::compare::Row| match wtl_metric.and_then(|m| r.tests.get(&m))
    {
        Some(v) => format!("{}/{}/{}", v.wins, v.ties, v.losses),
        None if r.baseline => "baseline".into(),
        None => "—".into(),
    };
    let models = model_cells(c, v, t);
    let wtl_header = format!("W/T/L {}", wtl_metric.map_or("", |m| m.name()));
    // the selected metric's difference from the baseline with its 95%
    // paired-bootstrap interval, and the effect size d (the engine's
    // `Versus`, as `rosetta compare` prints them)
    let ci_cell = |r: &rosetta::eval::compare::Row| match wtl_metric.and_then(|m| r.tests.get(&m)) {
        Some(v) => v.interval(),
        None => "—".into(),
    };
    let d_cell = |r: &rosetta::eval::compare::Row| match wtl_metric.and_then(|m| r.tests.get(&m)) {
        Some(v) => v.d(),
        None => "—".into(),
    };
    let ci_header = "Δ [95% CI]".to_string();
    let d_header = "d".to_string();
    let col_w = |cell: &dyn Fn(&rosetta::eval::compare::Row) -> String, h: &str| {
        t.rows
            .iter()
            .map(|r| width(&cell(r)))
            .chain([width(h)])
            .max()
            .unwrap_or(0)
    };
    let trailing: Option<[usize; 3]> = t.baseline.is_some().then(|| {
        [
            col_w(&wtl_cell, &wtl_header),
            col_w(&ci_cell, &ci_header),
            col_w(&d_cell, &d_header),
        ]
    });
    let layout = table_layout(
        area.width.saturating_sub(2) as usize,
        labels.iter().map(|l| width(l)).max().unwrap_or(0),
        models.iter().map(|m| width(m)).max().unwrap_or(0),
        trailing.map(|w| w[0] + 1 + w[1] + 1 + w[2]),
        t.metrics.len(),
        c.col.checked_sub(2),
    );
    let shown: Vec<usize> = (layout.first..layout.first + layout.metrics).collect();
    // column indices as the sort and selection count them (0 session, 1 model, 2.. metrics)
    let mut cols: Vec<(usize, String)> = vec![(0, "session".into()), (1, "model".into())];
    cols.extend(
        shown
            .iter()
            .map(|&m| (m + 2, t.metrics[m].name().to_string())),
    );
    let mut header: Vec<Cell> = cols
        .iter()
        .map(|(i, h)| {
            let arrow = match c.sort {
                Some((col, true)) if col == *i => " ↓",
                Some((col, false)) if col == *i => " ↑",
                _ => "",
            };
            let st = if *i == c.col {
                th.accent().add_modifier(Modifier::UNDERLINED)
            } else {
                th.accent()
            };
            Cell::from(Span::styled(format!("{h}{arrow}"), st))
        })
        .collect();
    if t.baseline.is_some() {
        for h in [&wtl_header, &ci_header, &d_header] {
            header.push(Cell::from(Span::styled(h.clone(), th.accent())));
        }
    }
    let rows: Vec<Row> = order
        .iter()
        .map(|&i| {
            let r = &t.rows[i];
            let mut cells = vec![
                Cell::from(rosetta::session::runs::elide_middle(
                    &labels[i],
                    layout.session,
                )),
                Cell::from(models[i].clone()),
            ];
            for &m in shown.iter().map(|j| &t.metrics[*j]) {
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
                cells.push(Cell::from(wtl_cell(r)));
                cells.push(Cell::from(ci_cell(r)));
                cells.push(Cell::from(d_cell(r)));
            }
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![
        Constraint::Length(layout.session as u16),
        Constraint::Length(layout.model as u16),
    ];
    widths.extend(shown.iter().map(|_| Constraint::Length(METRIC_W as u16)));
    if let (Some(_), Some(w)) = (layout.wtl, trailing) {
        widths.extend(w.map(|w| Constraint::Length(w as u16)));
    }
    let more = if layout.metrics < t.metrics.len() {
        format!(
            " · metrics {}–{} of {} (←→ for the others)",
            layout.first + 1,
            layout.first + layout.metrics,
            t.metrics.len()
        )
    } else {
        String::new()
    };
    let mut st =
        TableState::default().with_selected(Some(c.row.min(order.len().saturating_sub(1))));
    f.render_stateful_widget(
        Table::new(rows, widths)
            .header(Row::new(header))
            .block(block(
                th,
                format!(" Compare ({} sessions){more} ", t.rows.len()),
                true,
            ))
            .row_highlight_style(th.selected()),
        ta,
        &mut st,
    );
    if let Some(p) = &c.export {
        return draw_prompt(f, v, p, fa);
    }
    // the selected cell's figures first: what a narrow footer keeps
    let sel_row = order.get(c.row).map(|&i| &t.rows[i]);
    let mut parts: Vec<String> = Vec::new();
    if let Some((r, v)) = sel_row
        .zip(c.col.checked_sub(2).and_then(|m| t.metrics.get(m)))
        .and_then(|(r, m)| Some((r, r.tests.get(m)?)))
    {
        parts.push(format!(
            "{} p {} · {} · wins/ties/losses {}/{}/{}",
            r.system,
            rosetta::eval::compare::fmt_p(v.p_adjusted),
            v.effect(),
            v.wins,
            v.ties,
            v.losses
        ));
    }
    if let Some(n) = sel_row.and_then(|r| r.note.as_ref().map(|n| (r, n))) {
        parts.push(format!("{}: {}", n.0.system, n.1));
    }
    parts.push(match &t.baseline {
        Some(b) => format!("baseline ◆ {b} · ▲/▼ better/worse ({})", t.method()),
        None => "no baseline: press b on a row to choose one".into(),
    });
    let untested: Vec<&str> = t
        .rows
        .iter()
        .filter(|r| r.note.is_some())
        .map(|r| r.system.as_str())
        .collect();
    if !untested.is_empty() {
        parts.push(format!("not tested: {}", untested.join(", ")));
    }
    if !t.skipped.is_empty() {
        let names: Vec<&str> = t.skipped.iter().map(|s| s.system.as_str()).collect();
        parts.push(format!("left out (no model): {}", names.join(", ")));
    }
    let foot = trunc(&format!(" {}", parts.join(" · ")), fa.width as usize);
    f.render_widget(Paragraph::new(Span::styled(foot, th.dim())), fa);
}

/// The model column's cells, one per row of `t`: the model and, for runs
/// the listed settings set apart, those settings (`s2net dim=16` beside
/// `s2net dim=32`; the engine's `differing_labels` over the rows'
/// sessions, the model left out as it shows already).
fn model_cells(c: &CompareScreen, v: &View<'_>, t: &Comparison) -> Vec<String> {
    let empty = std::collections::BTreeMap::new();
    let settings: Vec<&std::collections::BTreeMap<String, String>> = t
        .rows
        .iter()
        .map(|r| {
            c.sessions
                .iter()
                .find(|(_, label)| *label == r.system)
                .and_then(|(id, _)| v.sessions.list.iter().find(|s| &s.id == id))
                .map_or(&empty, |s| &s.settings)
        })
        .collect();
    let known: Vec<&std::collections::BTreeMap<String, String>> =
        settings.iter().copied().filter(|m| !m.is_empty()).collect();
    let mut diffs = rosetta::session::runs::differing_labels(&known, &["model"]).into_iter();
    t.rows
        .iter()
        .zip(&settings)
        .map(|(r, m)| {
            let d = if m.is_empty() {
                String::new()
            } else {
                diffs.next().unwrap_or_default()
            };
            if d.is_empty() {
                r.detail.clone()
            } else {
                format!("{} {d}", r.detail)
            }
        })
        .collect()
}

/// Width of a metric column: `0.1234 ▲` and a header with its sort arrow.
const METRIC_W: usize = 9;

/// How the Compare table fits its width: the session and model columns'
/// widths, the W/T/L column's (with a baseline) and which metrics show
/// (`metrics` of them from index `first`). Metric columns are never
/// narrowed (their marks would go) nor W/T/L cut: metrics that do not fit
/// go to another page, reached by moving the selected column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TableLayout {
    session: usize,
    model: usize,
    wtl: Option<usize>,
    first: usize,
    metrics: usize,
}

/// [`TableLayout`] for `inner` cells: labels `label_w` wide (cut in the
/// middle, `…`, only when not even one metric fits beside them whole, never
/// below 12), models `model_w`, a W/T/L column `wtl_w`, `n` metrics, the
/// `selected` metric kept in view.
fn table_layout(
    inner: usize,
    label_w: usize,
    model_w: usize,
    wtl_w: Option<usize>,
    n: usize,
    selected: Option<usize>,
) -> TableLayout {
    let model = model_w.max(5);
    let session_want = label_w.max(7);
    // every column but the last has one cell of spacing after it
    let fixed = model + 1 + wtl_w.map_or(0, |w| w + 1);
    let fit = |session: usize| inner.saturating_sub(session + 1 + fixed) / (METRIC_W + 1);
    let (session, k) = if fit(session_want) >= 1 || n == 0 {
        (session_want, fit(session_want).min(n))
    } else {
        // narrow the labels (never below 12) so that one metric shows:
        // the model column tells runs apart, it keeps its width
        let room = inner.saturating_sub(3 + wtl_w.map_or(0, |w| w + 1) + METRIC_W);
        let session = fit_widths(
            &[
                ColWidth::new(session_want, 12),
                ColWidth::keep(model, model),
            ],
            room,
        )[0];
        (session, fit(session).clamp(1, n.max(1)).min(n))
    };
    let sel = selected.unwrap_or(0).min(n.saturating_sub(1));
    let first = if k == 0 || sel < k { 0 } else { sel + 1 - k };
    TableLayout {
        session,
        model,
        wtl: wtl_w,
        first,
        metrics: k,
    }
}

/// The drill-down in place of the table: one row per paired query, largest
/// difference first, from the scroll position.
fn draw_drill(f: &mut Frame, v: &View<'_>, d: &Drill, area: Rect, foot: Rect) {
    let th = &v.settings.theme;
    let v = &d.view;
    let header = Row::new(vec![
        Cell::from(Span::styled("query", th.accent())),
        Cell::from(Span::styled("baseline", th.accent())),
        Cell::from(Span::styled("session", th.accent())),
        Cell::from(Span::styled("difference", th.accent())),
        Cell::from(Span::styled("text", th.accent())),
    ]);
    // the query column as wide as its widest label; where the screen is
    // too narrow, labels are cut in the middle (`…`) while that keeps them
    // apart, else wrapped onto a second line: never cut silently
    let names: Vec<&str> = v.rows.iter().map(|r| r.name()).collect();
    let (qw, shown_names, lines) = query_column(&names, area.width.saturating_sub(2) as usize);
    let rows: Vec<Row> = v
        .rows
        .iter()
        .zip(shown_names)
        .skip(d.scroll)
        .map(|(r, name)| {
            let st = if r.difference > rosetta::eval::compare::TIE {
                th.good()
            } else if r.difference < -rosetta::eval::compare::TIE {
                th.bad()
            } else {
                Style::default()
            };
            let lines = lines as u16;
            Row::new(vec![
                Cell::from(name),
                Cell::from(format!("{:.4}", r.baseline)),
                Cell::from(format!("{:.4}", r.value)),
                Cell::from(Span::styled(format!("{:+.4}", r.difference), st)),
                Cell::from(r.text.clone().unwrap_or_default()),
            ])
            .height(lines)
        })
        .collect();
    let widths = [
        Constraint::Length(qw as u16),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Min(0),
    ];
    // rows that fit between the borders under the header
    let fit = area.height.saturating_sub(3) as usize / lines;
    let shown = if v.rows.is_empty() {
        "no paired query".to_string()
    } else {
        let end = (d.scroll + fit).min(v.rows.len());
        format!("{}–{end} of {}", d.scroll + 1, v.paired)
    };
    // the top row is the one Enter opens
    let mut st = TableState::default().with_selected((!v.rows.is_empty()).then_some(0));
    f.render_stateful_widget(
        Table::new(rows, widths)
            .header(header)
            .block(block(
                th,
                format!(
                    " {} per query: {} against {} ({shown}) ",
                    v.metric, v.system, v.baseline
                ),
                true,
            ))
            .row_highlight_style(th.selected()),
        area,
        &mut st,
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

/// The drill-down's query column for `names` in `inner` cells: its width,
/// each name as shown, and whether rows take two lines. The column is as
/// wide as the widest name when that leaves room for the three figures
/// (and some text); else names are cut in the middle (`…`) to the room
/// left, unless two would then read alike: then they wrap, whole, onto as
/// many lines (the third value) as the longest needs.
pub(crate) fn query_column(names: &[&str], inner: usize) -> (usize, Vec<String>, usize) {
    const FIGURES: usize = 3 * 11 + 1; // three figure columns, spacing, the text's
    const TEXT_MIN: usize = 10;
    let widest = names.iter().map(|n| width(n)).max().unwrap_or(0).max(5);
    let room = inner.saturating_sub(FIGURES + TEXT_MIN).max(12);
    if widest <= room {
        return (widest, names.iter().map(|n| n.to_string()).collect(), 1);
    }
    let cut: Vec<String> = names
        .iter()
        .map(|n| rosetta::session::runs::elide_middle(n, room))
        .collect();
    let mut seen = std::collections::HashMap::new();
    let clash = names
        .iter()
        .zip(&cut)
        .any(|(n, c)| *seen.entry(c.clone()).or_insert(*n) != *n);
    if !clash {
        return (room, cut, 1);
    }
    // as many lines of `room` cells as the longest needs
    let wrapped: Vec<String> = names
        .iter()
        .map(|n| {
            let chars: Vec<char> = n.chars().collect();
            chars
                .chunks(room)
                .map(|c| c.iter().collect::<String>())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    let lines = wrapped.iter().map(|w| w.lines().count()).max().unwrap_or(1);
    (room, wrapped, lines)
}

/// The rankings view: the baseline's ranking and the drilled session's of
/// one query side by side, ✓ on relevant documents, and where each
/// relevant document came.
fn draw_rankings(f: &mut Frame, v: &View<'_>, r: &Rankings, area: Rect, foot: Rect) {
    let th = &v.settings.theme;
    let lists = match &r.result {
        None => {
            f.render_widget(
                Paragraph::new(Span::raw(format!(" ranking {}…", r.name))).block(block(
                    th,
                    format!(" {} ", r.name),
                    true,
                )),
                area,
            );
            return;
        }
        Some(Err(e)) => {
            f.render_widget(
                Paragraph::new(Span::styled(format!(" {e}"), th.bad())).block(block(
                    th,
                    format!(" {} ", r.name),
                    true,
                )),
                area,
            );
            return;
        }
        Some(Ok(l)) => l,
    };
    let panes = Layout::horizontal(vec![Constraint::Ratio(1, 2); lists.len().max(1)]).split(area);
    // names that tell the two apart (a shared prefix elided)
    let names = rosetta::session::runs::distinct_labels(&r.systems);
    for (((list, system), name), pane) in lists.iter().zip(&r.systems).zip(&names).zip(panes.iter())
    {
        let inner = pane.width.saturating_sub(2) as usize;
        // rank, mark, label, score: the label gets what is left, cut in the middle
        let label_w = inner.saturating_sub(3 + 1 + 2 + 1 + 7).max(6);
        let lines: Vec<Line> = list
            .hits
            .iter()
            .skip(r.scroll)
            .map(|h| {
                let mark = if h.relevant {
                    Span::styled("✓ ", th.good())
                } else {
                    Span::raw("· ")
                };
                Line::from(vec![
                    Span::raw(format!("{:>3} ", h.rank)),
                    mark,
                    Span::raw(format!(
                        "{} ",
                        fit(
                            &rosetta::session::runs::elide_middle(&h.label, label_w),
                            label_w
                        )
                    )),
                    Span::raw(format!("{:>7.4}", h.score)),
                ])
            })
            .collect();
        let first_rel = list
            .relevant
            .first()
            .and_then(|(_, r)| *r)
            .map_or("none relevant ranked".to_string(), |p| {
                format!("first relevant at {p}")
            });
        // the figure whole; the name cut in the middle to what is left
        let room = (pane.width as usize).saturating_sub(2 + 2 + 3 + width(&first_rel));
        let title = format!(
            " {} · {first_rel} ",
            rosetta::session::runs::elide_middle(name, room.max(3))
        );
        f.render_widget(
            Paragraph::new(lines).block(block(th, title, system == &r.systems[0])),
            *pane,
        );
    }
    let relevant = lists.first().map_or(0, |l| l.relevant.len());
    let line = format!(
        " {} · {relevant} relevant · ✓ judged relevant · the model alone, best {}",
        r.name,
        lists.first().map_or(0, |l| l.hits.len())
    );
    f.render_widget(
        Paragraph::new(Span::styled(trunc(&line, foot.width as usize), th.dim())),
        foot,
    );
}

/// The export prompt on the footer line.
fn draw_prompt(f: &mut Frame, v: &View<'_>, p: &ExportPrompt, area: Rect) {
    let th = &v.settings.theme;
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
fn hints(c: &CompareScreen, km: &Keymap) -> String {
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if c.rankings.is_some() {
        return format!(
            "↑↓ scroll · {}/{} back to the queries",
            k(C::Compare, Action::Enter),
            k(C::Compare, Action::Close)
        );
    }
    if c.drill.is_some() {
        return format!(
            "↑↓ scroll · ←→ metric · {} the top query's rankings · {} back to the table",
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
