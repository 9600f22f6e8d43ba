//! The Neighbours screen: nearest terms across languages, in one or two panes,
//! and (a mode, `a`) the table of term associations of the focused pane's
//! model against the dictionary — state, key handling, backend answers and
//! drawing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, List, ListItem, ListState, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

use crate::tui::app::{App, PickFor, Popup, Reply, Request};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context};
use crate::tui::ui::*;
use rosetta::text::Side;

/// One Neighbours pane.
#[derive(Debug, Clone, Default)]
pub struct NeighPane {
    /// Session whose model is asked.
    pub session: Option<String>,
    /// Last answer.
    pub result: Option<NeighbourResult>,
    /// Last error.
    pub error: Option<String>,
    /// A lookup is running.
    pub pending: bool,
    seq: u64,
}

/// Neighbours screen state.
#[derive(Debug, Clone)]
pub struct NeighScreen {
    /// Left and right panes.
    pub panes: [NeighPane; 2],
    /// Term typed.
    pub query: String,
    /// Typing the term.
    pub editing: bool,
    /// Language of the term.
    pub side: Side,
    /// CSLS instead of the model's plain similarity.
    pub csls: bool,
    /// Focused list: 0 other language, 1 own language.
    pub list: usize,
    /// Focused pane (0 left, 1 right).
    pub pane: usize,
    /// Selected row in the focused list.
    pub selected: usize,
    /// Terms looked up, for back/forward.
    pub history: Vec<(String, Side)>,
    /// Position in `history`.
    pub hist_pos: usize,
    /// Neighbours to ask for.
    pub k: usize,
    /// The association table (shown instead of the lookup when `on`).
    pub assoc: AssocView,
}

/// What the association table's input line edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssocInput {
    /// The text rows must contain.
    Filter,
    /// The file to export to.
    Path,
}

/// The Neighbours screen's association mode: pairs of the focused pane's
/// model new to the dictionary, or dictionary pairs it misses.
#[derive(Debug, Clone, Default)]
pub struct AssocView {
    /// Shown instead of the word lookup.
    pub on: bool,
    /// New or missed pairs.
    pub kind: AssocKind,
    /// Row order.
    pub sort: AssocSort,
    /// Rows shown: those containing this text.
    pub filter: String,
    /// Export file typed.
    pub path: String,
    /// What is being typed, if anything.
    pub input: Option<AssocInput>,
    /// Session and options of the table asked for last.
    pub asked: Option<(String, AssocOptions)>,
    /// The last table.
    pub table: Option<Associations>,
    /// The last error.
    pub error: Option<String>,
    /// A table is being computed.
    pub pending: bool,
    /// Selected row among those shown.
    pub selected: usize,
    seq: u64,
}

impl AssocView {
    /// Rows shown: the table's rows matching the filter, in order.
    pub fn shown(&self) -> Vec<&rosetta::session::Association> {
        self.table
            .as_ref()
            .map(|t| t.matching(&self.filter))
            .unwrap_or_default()
    }
}

impl NeighScreen {
    /// The text being typed: the association filter or export path, else the term.
    pub fn edit_buffer(&mut self) -> &mut String {
        match self.assoc.input {
            Some(AssocInput::Filter) => &mut self.assoc.filter,
            Some(AssocInput::Path) => &mut self.assoc.path,
            None => &mut self.query,
        }
    }
}

impl NeighPane {
    /// A fresh pane asking `session`'s model.
    pub fn new(session: String) -> NeighPane {
        NeighPane {
            session: Some(session),
            ..Default::default()
        }
    }
}

impl Default for NeighScreen {
    fn default() -> Self {
        NeighScreen {
            panes: Default::default(),
            query: String::new(),
            editing: false,
            side: Side::Source,
            csls: false,
            list: 0,
            pane: 0,
            selected: 0,
            history: Vec::new(),
            hist_pos: 0,
            k: 10,
            assoc: AssocView::default(),
        }
    }
}

impl App {
    /// Looks `term` up in both panes; `record` adds it to the history.
    pub(crate) fn lookup(&mut self, term: String, side: Side, record: bool) {
        if term.is_empty() {
            return;
        }
        self.neigh.query = term.clone();
        self.neigh.side = side;
        self.neigh.selected = 0;
        if record {
            self.neigh
                .history
                .truncate(self.neigh.hist_pos + usize::from(!self.neigh.history.is_empty()));
            if self.neigh.history.last() != Some(&(term.clone(), side)) {
                self.neigh.history.push((term.clone(), side));
            }
            self.neigh.hist_pos = self.neigh.history.len() - 1;
        }
        let mut any = false;
        for pane in 0..2 {
            let Some(session) = self.neigh.panes[pane].session.clone() else {
                continue;
            };
            any = true;
            let p = &mut self.neigh.panes[pane];
            p.seq += 1;
            p.pending = true;
            self.outbox.push(Request::Neighbours {
                pane,
                seq: p.seq,
                session,
                term: term.clone(),
                side,
                k: self.neigh.k,
                csls: self.neigh.csls,
            });
        }
        if !any {
            self.error("choose a session first (s)");
        }
    }

    /// Enter while typing: runs the lookup, or (association mode) keeps
    /// the filter or writes the export file.
    pub(crate) fn neigh_submit(&mut self, input: Option<AssocInput>) {
        match input {
            Some(AssocInput::Filter) => self.neigh.assoc.selected = 0,
            Some(AssocInput::Path) => self.export_associations(),
            None => {
                let q = self.neigh.query.trim().to_string();
                let side = self.neigh.side;
                self.lookup(q, side, true);
            }
        }
    }

    /// Asks for the association table of the focused pane's session with
    /// the current kind and CSLS setting, unless it is already shown or asked.
    pub(crate) fn request_associations(&mut self) {
        let Some(session) = self.neigh.panes[self.neigh.pane].session.clone() else {
            self.error("choose a session first (s)");
            return;
        };
        let options = AssocOptions {
            kind: self.neigh.assoc.kind,
            csls: self.neigh.csls,
            ..Default::default()
        };
        let a = &mut self.neigh.assoc;
        let wanted = Some((session.clone(), options));
        if a.asked == wanted && (a.table.is_some() || a.pending) {
            return;
        }
        a.asked = wanted;
        a.seq += 1;
        a.pending = true;
        a.error = None;
        self.outbox.push(Request::Associations {
            seq: a.seq,
            session,
            options,
        });
    }

    fn export_associations(&mut self) {
        let path = self.neigh.assoc.path.trim().to_string();
        if path.is_empty() {
            self.error("no file given: nothing exported");
            return;
        }
        let Some(t) = &self.neigh.assoc.table else {
            self.error("no association table to export yet");
            return;
        };
        self.outbox.push(Request::ExportAssociations {
            table: Box::new(t.clone()),
            filter: self.neigh.assoc.filter.clone(),
            path: path.into(),
        });
    }

    fn assoc_action(&mut self, a: Action) {
        let n = self.neigh.assoc.shown().len();
        let last = n.saturating_sub(1);
        let av = &mut self.neigh.assoc;
        match a {
            Action::ToggleAssoc => av.on = false,
            Action::Filter => av.input = Some(AssocInput::Filter),
            Action::Up => av.selected = av.selected.min(last).saturating_sub(1),
            Action::Down => av.selected = (av.selected + 1).min(last),
            Action::PageUp => av.selected = av.selected.min(last).saturating_sub(10),
            Action::PageDown => av.selected = (av.selected + 10).min(last),
            Action::Top => av.selected = 0,
            Action::Bottom => av.selected = last,
            Action::AssocSort => {
                av.sort = av.sort.other();
                let by = av.sort;
                if let Some(t) = &mut av.table {
                    t.sort(by);
                }
                av.selected = 0;
            }
            Action::AssocKind => {
                av.kind = av.kind.other();
                av.selected = 0;
                self.request_associations();
            }
            Action::ToggleCsls => {
                self.neigh.csls = !self.neigh.csls;
                self.neigh.assoc.selected = 0;
                self.request_associations();
            }
            Action::AssocExport => {
                if av.table.is_none() {
                    self.error("no association table to export yet");
                    return;
                }
                if av.path.is_empty() {
                    av.path = format!("associations-{}.tsv", av.kind.name());
                }
                av.input = Some(AssocInput::Path);
            }
            Action::Left | Action::Right if self.neigh.panes[1].session.is_some() => {
                self.neigh.pane = usize::from(a == Action::Right);
                self.neigh.assoc.selected = 0;
                self.request_associations();
            }
            Action::PickSession | Action::PickSession2 => {
                self.popup = Some(Popup::Picker {
                    purpose: PickFor::Neighbours(usize::from(a == Action::PickSession2)),
                    selected: self.picker_start(),
                })
            }
            Action::Enter => {
                // look the selected row's source word up
                let word = self
                    .neigh
                    .assoc
                    .shown()
                    .get(self.neigh.assoc.selected)
                    .map(|r| r.source.clone());
                if let Some(w) = word {
                    self.neigh.assoc.on = false;
                    self.lookup(w, Side::Source, true);
                }
            }
            _ => {}
        }
    }

    pub(crate) fn neigh_action(&mut self, a: Action) {
        if self.neigh.assoc.on {
            return self.assoc_action(a);
        }
        if a == Action::ToggleAssoc {
            self.neigh.assoc.on = true;
            self.full_redraw = true;
            return self.request_associations();
        }
        let pane = &self.neigh.panes[self.neigh.pane];
        let n = pane.result.as_ref().map_or(0, |r| {
            if self.neigh.list == 0 {
                r.cross.len()
            } else {
                r.own.len()
            }
        });
        match a {
            Action::Filter => self.neigh.editing = true,
            Action::Up => self.neigh.selected = self.neigh.selected.saturating_sub(1),
            Action::Down => {
                self.neigh.selected = (self.neigh.selected + 1).min(n.saturating_sub(1))
            }
            Action::Top => self.neigh.selected = 0,
            Action::Bottom => self.neigh.selected = n.saturating_sub(1),
            Action::Left | Action::Right if self.neigh.panes[1].session.is_some() => {
                self.neigh.pane = usize::from(a == Action::Right);
                self.neigh.selected = 0;
            }
            Action::SwitchPane => {
                self.neigh.list = 1 - self.neigh.list;
                self.neigh.selected = 0;
            }
            Action::PickSession | Action::PickSession2 => {
                self.popup = Some(Popup::Picker {
                    purpose: PickFor::Neighbours(usize::from(a == Action::PickSession2)),
                    selected: self.picker_start(),
                })
            }
            Action::ToggleSide => {
                self.neigh.side = self.neigh.side.other();
                let q = self.neigh.query.trim().to_string();
                let side = self.neigh.side;
                if !q.is_empty() {
                    self.lookup(q, side, true);
                }
            }
            Action::ToggleCsls => {
                self.neigh.csls = !self.neigh.csls;
                let q = self.neigh.query.trim().to_string();
                let side = self.neigh.side;
                if !q.is_empty() {
                    self.lookup(q, side, false);
                }
            }
            Action::Enter => {
                let Some(r) = &self.neigh.panes[self.neigh.pane].result else {
                    self.neigh.editing = true;
                    return;
                };
                let list = if self.neigh.list == 0 {
                    &r.cross
                } else {
                    &r.own
                };
                if let Some(nb) = list.get(self.neigh.selected) {
                    let side = if self.neigh.list == 0 {
                        self.neigh.side.other()
                    } else {
                        self.neigh.side
                    };
                    // the surface word analyses to the term again
                    let t = nb.surface.clone();
                    self.lookup(t, side, true);
                }
            }
            Action::Back | Action::Forward => {
                let pos = self.neigh.hist_pos;
                let new = if a == Action::Back {
                    pos.checked_sub(1)
                } else {
                    (pos + 1 < self.neigh.history.len()).then_some(pos + 1)
                };
                if let Some(p) = new {
                    self.neigh.hist_pos = p;
                    let (t, s) = self.neigh.history[p].clone();
                    self.lookup(t, s, false);
                }
            }
            _ => {}
        }
    }

    /// Applies this screen's answer (see [`App::on_reply`]); `false` when
    /// nothing shown changed.
    pub(crate) fn neighbours_reply(&mut self, r: Reply) -> bool {
        match r {
            Reply::Associations { seq, result } => {
                let a = &mut self.neigh.assoc;
                if seq != a.seq {
                    return false;
                }
                self.full_redraw = true;
                a.pending = false;
                a.selected = 0;
                match result {
                    Ok(mut t) => {
                        t.sort(a.sort);
                        a.table = Some(t);
                        a.error = None;
                    }
                    Err(e) => {
                        a.table = None;
                        a.error = Some(e);
                    }
                }
            }
            Reply::AssociationsExported(r) => match r {
                Ok((path, n)) => self.info(format!("wrote {n} rows to {}", path.display())),
                Err(e) => self.error(format!("export failed: {e}")),
            },
            Reply::Neighbours { pane, seq, result } => {
                let p = &mut self.neigh.panes[pane.min(1)];
                if seq != p.seq {
                    return false;
                }
                self.full_redraw = true;
                p.pending = false;
                match result {
                    Ok(r) => {
                        p.result = Some(r);
                        p.error = None;
                    }
                    Err(e) => {
                        p.result = None;
                        p.error = Some(e)
                    }
                }
            }
            _ => return false,
        }
        true
    }
}

pub(crate) fn side_name(s: Side) -> &'static str {
    match s {
        Side::Source => "source",
        Side::Target => "target",
    }
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    if app.neigh.assoc.on {
        return draw_associations(f, app, area);
    }
    let th = &app.settings.theme;
    let n = &app.neigh;
    let [qa, ha, pa] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Min(4),
    ])
    .areas(area);
    let mut q = input_line(th, "term:", &n.query, n.editing);
    q.spans.push(Span::styled(
        format!(
            "   [{} language · {}] · {} associations",
            side_name(n.side),
            if n.csls {
                "CSLS"
            } else {
                // the focused pane's model's measure
                n.panes[n.pane]
                    .result
                    .as_ref()
                    .map_or("cosine", |r| r.similarity.label())
            },
            app.settings
                .keymap
                .keys_for(Context::Neighbours, Action::ToggleAssoc)
        ),
        th.dim(),
    ));
    f.render_widget(Paragraph::new(q).block(block(th, " Term ", n.editing)), qa);
    let hist: Vec<Span> = n
        .history
        .iter()
        .enumerate()
        .map(|(i, (t, _))| {
            if i == n.hist_pos {
                Span::styled(format!(" [{t}]"), th.accent())
            } else {
                Span::styled(format!(" {t}"), th.dim())
            }
        })
        .collect();
    let mut hl = vec![Span::styled(" history:", th.dim())];
    hl.extend(hist);
    f.render_widget(Paragraph::new(Line::from(hl)), ha);

    let two = n.panes[1].session.is_some();
    let panes: Vec<Rect> = if two {
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(pa)
            .to_vec()
    } else {
        vec![pa]
    };
    for (i, r) in panes.iter().enumerate() {
        draw_neigh_pane(f, app, i, *r, !two);
    }
}

fn draw_neigh_pane(f: &mut Frame, app: &App, i: usize, area: Rect, wide: bool) {
    let th = &app.settings.theme;
    let n = &app.neigh;
    let p = &n.panes[i];
    let focused = n.pane == i;
    let title = match &p.session {
        Some(s) => format!(
            " {}{} ",
            app.session_name(s),
            if p.pending { " · looking up…" } else { "" }
        ),
        None => " no session ".into(),
    };
    let outer = block(th, title, focused);
    let inner = outer.inner(area);
    f.render_widget(outer, area);
    let msg = if p.session.is_none() {
        Some(choose_session_hint(app, th))
    } else if let Some(e) = &p.error {
        Some(Span::styled(format!(" {e}"), th.bad()))
    } else if let Some(r) = &p.result {
        (!r.known).then(|| {
            let why = r
                .dropped
                .as_ref()
                .map(|d| d.to_string())
                .unwrap_or_else(|| "out of vocabulary".into());
            Span::styled(format!(" “{}”: {why}", n.query), th.warn())
        })
    } else {
        Some(Span::styled(" type a term (/) and press Enter", th.dim()))
    };
    if let Some(m) = msg {
        f.render_widget(Paragraph::new(m).wrap(Wrap { trim: true }), inner);
        return;
    }
    let Some(r) = &p.result else { return };
    let lists: Vec<Rect> = if wide {
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(inner)
            .to_vec()
    } else {
        Layout::vertical([Constraint::Percentage(50), Constraint::Percentage(50)])
            .split(inner)
            .to_vec()
    };
    let other = side_name(n.side.other());
    let own = side_name(n.side);
    for (li, (title, items)) in [
        (format!(" other language ({other}) "), &r.cross),
        (format!(" own language ({own}) "), &r.own),
    ]
    .into_iter()
    .enumerate()
    {
        let w = lists[li].width.saturating_sub(16) as usize;
        let rows: Vec<ListItem> = items
            .iter()
            .map(|nb| {
                ListItem::new(Line::from(vec![
                    Span::raw(format!("{} ", fit(&nb.surface, w))),
                    Span::raw(format!("{:>6.3}", nb.score)),
                    if nb.gold {
                        Span::styled(" ✓gold", th.good())
                    } else {
                        Span::raw("")
                    },
                ]))
            })
            .collect();
        let active = focused && n.list == li;
        let mut st = ListState::default().with_selected(active.then_some(n.selected));
        f.render_stateful_widget(
            List::new(rows)
                .block(block(th, title, active))
                .highlight_style(th.selected()),
            lists[li],
            &mut st,
        );
    }
}

/// The association table: an input line (filter or export path), what the
/// table holds, and the rows.
fn draw_associations(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let a = &app.neigh.assoc;
    let [qa, sa, ta] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Min(4),
    ])
    .areas(area);
    let mut q = match a.input {
        Some(AssocInput::Path) => input_line(th, "export TSV to:", &a.path, true),
        _ => input_line(th, "filter:", &a.filter, a.input.is_some()),
    };
    q.spans.push(Span::styled(
        format!(
            "   [{} · {} · sort {}]",
            match a.kind {
                AssocKind::New => "new to the dictionary",
                AssocKind::Missed => "dictionary pairs missed",
            },
            if app.neigh.csls {
                "CSLS"
            } else {
                a.table.as_ref().map_or("cosine", |t| t.similarity.label())
            },
            a.sort.name()
        ),
        th.dim(),
    ));
    f.render_widget(
        Paragraph::new(q).block(block(th, " Associations ", a.input.is_some())),
        qa,
    );
    let session = a.asked.as_ref().map(|(s, _)| s.as_str());
    let title = match session {
        Some(s) => format!(" {s}{} ", if a.pending { " · computing…" } else { "" }),
        None => " no session ".into(),
    };
    let msg = if session.is_none() {
        Some(choose_session_hint(app, th))
    } else if let Some(e) = &a.error {
        Some(Span::styled(format!(" {e}"), th.bad()))
    } else if a.table.is_none() {
        Some(Span::styled(" computing the association table…", th.dim()))
    } else {
        None
    };
    let outer = block(th, title, a.input.is_none());
    if let Some(m) = msg {
        f.render_widget(Paragraph::new(m).wrap(Wrap { trim: true }).block(outer), ta);
        return;
    }
    let Some(t) = &a.table else { return };
    let rows = a.shown();
    let summary = match t.kind {
        AssocKind::New => format!(
            " {} of the {} most frequent {} words: nearest {} word not in the dictionary{}",
            t.rows.len(),
            t.looked_up,
            t.source_lang,
            t.target_lang,
            if a.filter.trim().is_empty() {
                String::new()
            } else {
                format!(" · {} match", rows.len())
            }
        ),
        AssocKind::Missed => format!(
            " {} of {} dictionary headwords: no translation among the {} nearest{}",
            t.rows.len(),
            t.looked_up,
            t.k,
            if a.filter.trim().is_empty() {
                String::new()
            } else {
                format!(" · {} match", rows.len())
            }
        ),
    };
    f.render_widget(Paragraph::new(Span::styled(summary, th.dim())), sa);
    let (names, widths): (Vec<&str>, Vec<Constraint>) = match t.kind {
        AssocKind::New => (
            vec![
                "source",
                "target",
                "score",
                "df",
                "mutual",
                "dictionary has",
            ],
            vec![
                Constraint::Min(10),
                Constraint::Min(10),
                Constraint::Length(7),
                Constraint::Length(6),
                Constraint::Length(6),
                Constraint::Min(12),
            ],
        ),
        AssocKind::Missed => (
            vec!["source", "translation", "score", "rank", "nearest", "df"],
            vec![
                Constraint::Min(10),
                Constraint::Min(10),
                Constraint::Length(7),
                Constraint::Length(6),
                Constraint::Min(10),
                Constraint::Length(6),
            ],
        ),
    };
    let header = Row::new(
        names
            .iter()
            .map(|h| Cell::from(Span::styled(h.to_string(), th.accent())))
            .collect::<Vec<_>>(),
    );
    let body: Vec<Row> = rows
        .iter()
        .map(|r| {
            let cells: Vec<Cell> = match t.kind {
                AssocKind::New => vec![
                    Cell::from(r.source.clone()),
                    Cell::from(r.target.clone()),
                    Cell::from(format!("{:>7.3}", r.score)),
                    Cell::from(format!("{:>6}", r.source_df)),
                    Cell::from(if r.mutual { "  ↔" } else { "" }),
                    Cell::from(if r.dictionary.is_empty() {
                        Span::styled("(no entry)", th.dim())
                    } else {
                        Span::raw(r.dictionary.join(", "))
                    }),
                ],
                AssocKind::Missed => vec![
                    Cell::from(r.source.clone()),
                    Cell::from(r.target.clone()),
                    Cell::from(format!("{:>7.3}", r.score)),
                    Cell::from(format!("{:>6}", r.rank)),
                    Cell::from(r.nearest.clone().unwrap_or_default()),
                    Cell::from(format!("{:>6}", r.source_df)),
                ],
            };
            Row::new(cells)
        })
        .collect();
    let mut st = TableState::default()
        .with_selected((!rows.is_empty()).then(|| a.selected.min(rows.len() - 1)));
    f.render_stateful_widget(
        Table::new(body, widths)
            .header(header)
            .block(outer)
            .row_highlight_style(th.selected()),
        ta,
        &mut st,
    );
}

/// This screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    match app.neigh.assoc.input {
        Some(AssocInput::Filter) => return "type to filter rows · Enter/Esc done".into(),
        Some(AssocInput::Path) => return "type a file · Enter export · Esc cancel".into(),
        None => {}
    }
    if app.neigh.assoc.on {
        return format!(
            "{} lookup · {} new/missed · {} CSLS · {} sort · {} filter · {} export · Enter look up",
            k(C::Neighbours, Action::ToggleAssoc),
            k(C::Neighbours, Action::AssocKind),
            k(C::Neighbours, Action::ToggleCsls),
            k(C::Neighbours, Action::AssocSort),
            k(C::Global, Action::Filter),
            k(C::Neighbours, Action::AssocExport),
        );
    }
    if app.neigh.editing {
        return "type a term · Enter look up · Esc done".into();
    }
    format!(
            "{} session · {} right session · {} term · {} language · {} CSLS · {} list · Enter follow · {}/{} history",
            k(C::Neighbours, Action::PickSession),
            k(C::Neighbours, Action::PickSession2),
            k(C::Global, Action::Filter),
            k(C::Neighbours, Action::ToggleSide),
            k(C::Neighbours, Action::ToggleCsls),
            k(C::Neighbours, Action::SwitchPane),
            k(C::Neighbours, Action::Back),
            k(C::Neighbours, Action::Forward),
        )
}

/// " press s to choose a session", for a pane or table with none.
fn choose_session_hint(app: &App, th: &crate::tui::config::Theme) -> Span<'static> {
    Span::styled(
        format!(
            " press {} to choose a session",
            app.settings
                .keymap
                .keys_for(Context::Neighbours, Action::PickSession)
        ),
        th.dim(),
    )
}
