//! The Neighbours screen: nearest terms across languages, in one or two panes —
//! state, key handling, backend answers and drawing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{List, ListItem, ListState, Paragraph, Wrap};
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

    pub(crate) fn neigh_action(&mut self, a: Action) {
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
                    selected: 0,
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
            "   [{} language · {}]",
            side_name(n.side),
            if n.csls {
                "CSLS"
            } else {
                // the focused pane's model's measure
                n.panes[n.pane]
                    .result
                    .as_ref()
                    .map_or("cosine", |r| r.similarity.label())
            }
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
        Some(s) => format!(" {s}{} ", if p.pending { " · looking up…" } else { "" }),
        None => " no session ".into(),
    };
    let outer = block(th, title, focused);
    let inner = outer.inner(area);
    f.render_widget(outer, area);
    let msg = if p.session.is_none() {
        Some(Span::styled(
            format!(
                " press {} to choose a session",
                app.settings
                    .keymap
                    .keys_for(Context::Neighbours, Action::PickSession)
            ),
            th.dim(),
        ))
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

/// This screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
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
