//! The Neighbours screen: nearest terms across languages, in one or two panes,
//! and (a mode, `a`) the table of term associations of the focused pane's
//! model against the dictionary — state, key handling, backend answers and
//! drawing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, List, ListItem, ListState, Paragraph, Row, Table, TableState, Wrap};
use ratatui::Frame;

use crossterm::event::{KeyCode, KeyEvent};

use super::{edit_text, Ctx, Screen, View};
use super::{PickFor, Popup};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context, Keymap};
use crate::tui::widgets::*;
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

/// Work the Neighbours screen asks of the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Look up a term's neighbours for one pane.
    Neighbours {
        pane: usize,
        seq: u64,
        session: String,
        term: String,
        side: Side,
        k: usize,
        csls: bool,
    },
    /// List a session's term associations (the association table).
    Associations {
        seq: u64,
        session: String,
        options: AssocOptions,
    },
    /// Write the rows of an association table matching `filter` as TSV.
    Export {
        table: Box<Associations>,
        filter: String,
        path: std::path::PathBuf,
    },
}

/// The backend's answers to [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Neighbours {
        pane: usize,
        seq: u64,
        result: Result<NeighbourResult, String>,
    },
    Associations {
        seq: u64,
        result: Result<Associations, String>,
    },
    /// Rows written and where.
    Exported(Result<(std::path::PathBuf, usize), String>),
}

impl NeighScreen {
    /// Looks `term` up in both panes; `record` adds it to the history.
    fn lookup(&mut self, cx: &mut Ctx<'_, Request>, term: String, side: Side, record: bool) {
        if term.is_empty() {
            return;
        }
        self.query = term.clone();
        self.side = side;
        self.selected = 0;
        if record {
            self.history
                .truncate(self.hist_pos + usize::from(!self.history.is_empty()));
            if self.history.last() != Some(&(term.clone(), side)) {
                self.history.push((term.clone(), side));
            }
            self.hist_pos = self.history.len() - 1;
        }
        let mut any = false;
        for pane in 0..2 {
            let Some(session) = self.panes[pane].session.clone() else {
                continue;
            };
            any = true;
            let p = &mut self.panes[pane];
            p.seq += 1;
            p.pending = true;
            cx.send(Request::Neighbours {
                pane,
                seq: p.seq,
                session,
                term: term.clone(),
                side,
                k: self.k,
                csls: self.csls,
            });
        }
        if !any {
            cx.error("choose a session first (s)");
        }
    }

    /// Enter while typing: runs the lookup, or (association mode) keeps
    /// the filter or writes the export file.
    fn submit(&mut self, input: Option<AssocInput>, cx: &mut Ctx<'_, Request>) {
        match input {
            Some(AssocInput::Filter) => self.assoc.selected = 0,
            Some(AssocInput::Path) => self.export_associations(cx),
            None => {
                let q = self.query.trim().to_string();
                let side = self.side;
                self.lookup(cx, q, side, true);
            }
        }
    }

    /// Asks for the association table of the focused pane's session with
    /// the current kind and CSLS setting, unless it is already shown or asked.
    fn request_associations(&mut self, cx: &mut Ctx<'_, Request>) {
        let Some(session) = self.panes[self.pane].session.clone() else {
            cx.error("choose a session first (s)");
            return;
        };
        let options = AssocOptions {
            kind: self.assoc.kind,
            csls: self.csls,
            ..Default::default()
        };
        let a = &mut self.assoc;
        let wanted = Some((session.clone(), options));
        if a.asked == wanted && (a.table.is_some() || a.pending) {
            return;
        }
        a.asked = wanted;
        a.seq += 1;
        a.pending = true;
        a.error = None;
        cx.send(Request::Associations {
            seq: a.seq,
            session,
            options,
        });
    }

    fn export_associations(&mut self, cx: &mut Ctx<'_, Request>) {
        let path = self.assoc.path.trim().to_string();
        if path.is_empty() {
            cx.error("no file given: nothing exported");
            return;
        }
        let Some(t) = &self.assoc.table else {
            cx.error("no association table to export yet");
            return;
        };
        cx.send(Request::Export {
            table: Box::new(t.clone()),
            filter: self.assoc.filter.clone(),
            path: path.into(),
        });
    }

    fn assoc_action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        let n = self.assoc.shown().len();
        let last = n.saturating_sub(1);
        let av = &mut self.assoc;
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
                self.request_associations(cx);
            }
            Action::ToggleCsls => {
                self.csls = !self.csls;
                self.assoc.selected = 0;
                self.request_associations(cx);
            }
            Action::AssocExport => {
                if av.table.is_none() {
                    cx.error("no association table to export yet");
                    return;
                }
                if av.path.is_empty() {
                    av.path = format!("associations-{}.tsv", av.kind.name());
                }
                av.input = Some(AssocInput::Path);
            }
            Action::Left | Action::Right if self.panes[1].session.is_some() => {
                self.pane = usize::from(a == Action::Right);
                self.assoc.selected = 0;
                self.request_associations(cx);
            }
            Action::PickSession | Action::PickSession2 => {
                *cx.popup = Some(Popup::Picker {
                    purpose: PickFor::Neighbours(usize::from(a == Action::PickSession2)),
                    selected: cx.picker_start(),
                })
            }
            Action::Enter => {
                // look the selected row's source word up
                let word = self
                    .assoc
                    .shown()
                    .get(self.assoc.selected)
                    .map(|r| r.source.clone());
                if let Some(w) = word {
                    self.assoc.on = false;
                    self.lookup(cx, w, Side::Source, true);
                }
            }
            _ => {}
        }
    }

    fn action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        if self.assoc.on {
            return self.assoc_action(a, cx);
        }
        if a == Action::ToggleAssoc {
            self.assoc.on = true;
            *cx.full_redraw = true;
            return self.request_associations(cx);
        }
        let pane = &self.panes[self.pane];
        let n = pane.result.as_ref().map_or(0, |r| {
            if self.list == 0 {
                r.cross.len()
            } else {
                r.own.len()
            }
        });
        match a {
            Action::Filter => self.editing = true,
            Action::Up => self.selected = self.selected.saturating_sub(1),
            Action::Down => self.selected = (self.selected + 1).min(n.saturating_sub(1)),
            Action::Top => self.selected = 0,
            Action::Bottom => self.selected = n.saturating_sub(1),
            Action::Left | Action::Right if self.panes[1].session.is_some() => {
                self.pane = usize::from(a == Action::Right);
                self.selected = 0;
            }
            Action::SwitchPane => {
                self.list = 1 - self.list;
                self.selected = 0;
            }
            Action::PickSession | Action::PickSession2 => {
                *cx.popup = Some(Popup::Picker {
                    purpose: PickFor::Neighbours(usize::from(a == Action::PickSession2)),
                    selected: cx.picker_start(),
                })
            }
            Action::ToggleSide => {
                self.side = self.side.other();
                let q = self.query.trim().to_string();
                let side = self.side;
                if !q.is_empty() {
                    self.lookup(cx, q, side, true);
                }
            }
            Action::ToggleCsls => {
                self.csls = !self.csls;
                let q = self.query.trim().to_string();
                let side = self.side;
                if !q.is_empty() {
                    self.lookup(cx, q, side, false);
                }
            }
            Action::Enter => {
                let Some(r) = &self.panes[self.pane].result else {
                    self.editing = true;
                    return;
                };
                let list = if self.list == 0 { &r.cross } else { &r.own };
                if let Some(nb) = list.get(self.selected) {
                    let side = if self.list == 0 {
                        self.side.other()
                    } else {
                        self.side
                    };
                    // the surface word analyses to the term again
                    let t = nb.surface.clone();
                    self.lookup(cx, t, side, true);
                }
            }
            Action::Back | Action::Forward => {
                let pos = self.hist_pos;
                let new = if a == Action::Back {
                    pos.checked_sub(1)
                } else {
                    (pos + 1 < self.history.len()).then_some(pos + 1)
                };
                if let Some(p) = new {
                    self.hist_pos = p;
                    let (t, s) = self.history[p].clone();
                    self.lookup(cx, t, s, false);
                }
            }
            _ => {}
        }
    }

    fn reply(&mut self, r: Reply, cx: &mut Ctx<'_, Request>) -> bool {
        match r {
            Reply::Associations { seq, result } => {
                let a = &mut self.assoc;
                if seq != a.seq {
                    return false;
                }
                *cx.full_redraw = true;
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
            Reply::Exported(r) => match r {
                Ok((path, n)) => cx.info(format!("wrote {n} rows to {}", path.display())),
                Err(e) => cx.error(format!("export failed: {e}")),
            },
            Reply::Neighbours { pane, seq, result } => {
                let p = &mut self.panes[pane.min(1)];
                if seq != p.seq {
                    return false;
                }
                *cx.full_redraw = true;
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
        }
        true
    }

    /// The session chosen for pane `p` in the picker (or on Jobs): look the
    /// term up there.
    pub(crate) fn pick(&mut self, p: usize, id: String, cx: &mut Ctx<'_, Request>) {
        self.panes[p] = NeighPane::new(id);
        let q = self.query.trim().to_string();
        if !q.is_empty() {
            let side = self.side;
            self.lookup(cx, q, side, false);
        }
        if self.assoc.on {
            self.request_associations(cx);
        }
    }
}

impl Screen for NeighScreen {
    type Request = Request;
    type Reply = Reply;

    fn execute(
        backend: &dyn Backend,
        req: Request,
        _progress: &(dyn Fn(Reply) + Send + Sync),
    ) -> Reply {
        let s = |e: rosetta::Error| e.to_string();
        match req {
            Request::Neighbours {
                pane,
                seq,
                session,
                term,
                side,
                k,
                csls,
            } => Reply::Neighbours {
                pane,
                seq,
                result: backend
                    .neighbours(&session, &term, side, k, csls)
                    .map_err(s),
            },
            Request::Associations {
                seq,
                session,
                options,
            } => Reply::Associations {
                seq,
                result: backend.associations(&session, &options).map_err(s),
            },
            Request::Export {
                table,
                filter,
                path,
            } => Reply::Exported(
                backend
                    .export_associations(&table, &filter, &path)
                    .map(|n| (path, n))
                    .map_err(s),
            ),
        }
    }

    fn busy_label(req: &Request) -> Option<String> {
        Some(match req {
            Request::Neighbours { session, term, .. } => {
                format!("looking up “{term}” in {session}")
            }
            Request::Associations { session, .. } => {
                format!("listing the term associations of {session}")
            }
            Request::Export { path, .. } => format!("writing {}", path.display()),
        })
    }

    fn failed(req: &Request, msg: String) -> Reply {
        match *req {
            Request::Neighbours { pane, seq, .. } => Reply::Neighbours {
                pane,
                seq,
                result: Err(msg),
            },
            Request::Associations { seq, .. } => Reply::Associations {
                seq,
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
        // with none chosen yet, start on the session selected on Jobs
        if self.panes[0].session.is_none() {
            if let Some(id) = cx.jobs_choice() {
                self.pick(0, id, cx);
            }
        }
    }

    fn editing(&self) -> bool {
        self.editing || self.assoc.input.is_some()
    }

    fn edit_key(&mut self, k: KeyEvent, cx: &mut Ctx<'_, Request>) {
        match k.code {
            KeyCode::Esc => self.stop_editing(),
            KeyCode::Enter => {
                let input = self.assoc.input;
                self.stop_editing();
                self.submit(input, cx);
            }
            _ => {
                edit_text(self.edit_buffer(), &k);
            }
        }
    }

    fn stop_editing(&mut self) {
        self.editing = false;
        self.assoc.input = None;
    }

    fn copy_text(&self) -> Option<String> {
        Some(self.query.trim().to_string())
    }

    fn draw(&self, f: &mut Frame, area: Rect, view: &View<'_>) {
        draw(f, self, view, area)
    }

    fn hints(&self, km: &Keymap) -> String {
        hints(self, km)
    }
}

pub(crate) fn side_name(s: Side) -> &'static str {
    match s {
        Side::Source => "source",
        Side::Target => "target",
    }
}

fn draw(f: &mut Frame, ns: &NeighScreen, view: &View<'_>, area: Rect) {
    if ns.assoc.on {
        return draw_associations(f, ns, view, area);
    }
    let th = &view.settings.theme;
    let n = &ns;
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
            view.settings
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
    // the focused pane's dictionary translations, as words (never stems)
    if let Some(ws) = n.panes[n.pane]
        .result
        .as_ref()
        .and_then(|r| r.translation_words.as_deref())
    {
        let listed = if ws.is_empty() {
            "none".to_string()
        } else {
            ws.join(", ")
        };
        hl.push(Span::styled(
            format!(" · ✓ the dictionary lists: {listed}"),
            th.good(),
        ));
    }
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
        draw_neigh_pane(f, ns, view, i, *r, !two);
    }
}

fn draw_neigh_pane(
    f: &mut Frame,
    ns: &NeighScreen,
    view: &View<'_>,
    i: usize,
    area: Rect,
    wide: bool,
) {
    let th = &view.settings.theme;
    let n = &ns;
    let p = &n.panes[i];
    let focused = n.pane == i;
    let title = match &p.session {
        Some(s) => format!(
            " {}{} ",
            view.session_name(s),
            if p.pending { " · looking up…" } else { "" }
        ),
        None => " no session ".into(),
    };
    let outer = block(th, title, focused);
    let inner = outer.inner(area);
    f.render_widget(outer, area);
    let msg = if p.session.is_none() {
        Some(choose_session_hint(view, th))
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
fn draw_associations(f: &mut Frame, ns: &NeighScreen, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
    let a = &ns.assoc;
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
            if ns.csls {
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
        Some(choose_session_hint(view, th))
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
fn hints(ns: &NeighScreen, km: &Keymap) -> String {
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    match ns.assoc.input {
        Some(AssocInput::Filter) => return "type to filter rows · Enter/Esc done".into(),
        Some(AssocInput::Path) => return "type a file · Enter export · Esc cancel".into(),
        None => {}
    }
    if ns.assoc.on {
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
    if ns.editing {
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
fn choose_session_hint(view: &View<'_>, th: &crate::tui::config::Theme) -> Span<'static> {
    Span::styled(
        format!(
            " press {} to choose a session",
            view.settings
                .keymap
                .keys_for(Context::Neighbours, Action::PickSession)
        ),
        th.dim(),
    )
}
