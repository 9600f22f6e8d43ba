//! The Search screen: ranked retrieval with a session's index —
//! state, key handling, backend answers and drawing.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use crate::tui::app::{App, PickFor, Popup, Reply, Request};
use crate::tui::backend::*;
use crate::tui::config::Theme;
use crate::tui::keymap::{Action, Context};
use crate::tui::ui::*;

/// Search index state.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum IndexState {
    /// No session chosen.
    #[default]
    None,
    /// Loading, with progress.
    Loading { fraction: f64, what: String },
    /// Ready.
    Ready(IndexInfo),
    /// Failed to load.
    Failed(String),
}

/// Search screen state.
#[derive(Debug, Clone)]
pub struct SearchScreen {
    /// Session whose index is used.
    pub session: Option<String>,
    /// Its index.
    pub index: IndexState,
    /// Query text.
    pub query: String,
    /// Typing into the query.
    pub editing: bool,
    /// Fusion mode.
    pub fusion: Fusion,
    /// λ kept across fusion modes.
    pub lambda: f64,
    /// Last results.
    pub result: Option<SearchResult>,
    /// Query the results are for.
    pub result_query: String,
    /// Last error.
    pub error: Option<String>,
    /// Selected hit.
    pub selected: usize,
    /// Results to ask for.
    pub k: usize,
    /// Next judged query to offer (`e`).
    pub judged_pos: usize,
    seq: u64,
    /// A search is running.
    pub pending: bool,
}

impl Default for SearchScreen {
    fn default() -> Self {
        SearchScreen {
            session: None,
            index: IndexState::None,
            query: String::new(),
            editing: false,
            fusion: Fusion::Model,
            lambda: 0.3,
            result: None,
            result_query: String::new(),
            error: None,
            selected: 0,
            k: 20,
            judged_pos: 0,
            seq: 0,
            pending: false,
        }
    }
}

impl App {
    pub(crate) fn run_search(&mut self) {
        let q = self.search.query.trim().to_string();
        if q.is_empty() {
            return;
        }
        let Some(session) = self.search.session.clone() else {
            self.error("choose a session first (s)");
            return;
        };
        if !matches!(self.search.index, IndexState::Ready(_)) {
            self.error("the index is not loaded yet");
            return;
        }
        self.search.seq += 1;
        self.search.pending = true;
        self.outbox.push(Request::Search {
            seq: self.search.seq,
            session,
            query: q,
            k: self.search.k,
            fusion: self.search.fusion,
        });
    }

    pub(crate) fn search_action(&mut self, a: Action) {
        let n = self.search.result.as_ref().map_or(0, |r| r.hits.len());
        let sel = &mut self.search.selected;
        match a {
            Action::Filter | Action::Enter => self.search.editing = true,
            Action::Up => *sel = sel.saturating_sub(1),
            Action::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
            Action::PageUp => *sel = sel.saturating_sub(5),
            Action::PageDown => *sel = (*sel + 5).min(n.saturating_sub(1)),
            Action::Top => *sel = 0,
            Action::Bottom => *sel = n.saturating_sub(1),
            Action::PickSession => {
                self.popup = Some(Popup::Picker {
                    purpose: PickFor::Search,
                    selected: 0,
                })
            }
            Action::NextJudged => {
                let IndexState::Ready(info) = &self.search.index else {
                    return self.error("load a session's index first (s)");
                };
                if info.judged_queries.is_empty() {
                    return self.error("this workspace has no judged queries");
                }
                let i = self.search.judged_pos % info.judged_queries.len();
                self.search.query = info.judged_queries[i].1.clone();
                self.search.judged_pos = i + 1;
                self.run_search();
            }
            Action::CycleFusion => {
                self.search.fusion = match self.search.fusion {
                    Fusion::Model => Fusion::Linear {
                        lambda: self.search.lambda,
                    },
                    Fusion::Linear { .. } => Fusion::Rrf { k: 60.0 },
                    Fusion::Rrf { .. } => Fusion::Model,
                };
                self.rerun_search();
            }
            Action::LambdaUp | Action::LambdaDown => {
                let d = if a == Action::LambdaUp { 0.1 } else { -0.1 };
                self.search.lambda =
                    ((self.search.lambda + d) * 10.0).round().clamp(0.0, 10.0) / 10.0;
                if let Fusion::Linear { .. } = self.search.fusion {
                    self.search.fusion = Fusion::Linear {
                        lambda: self.search.lambda,
                    };
                    self.rerun_search();
                }
            }
            _ => {}
        }
    }

    pub(crate) fn rerun_search(&mut self) {
        if !self.search.query.trim().is_empty() && matches!(self.search.index, IndexState::Ready(_))
        {
            self.run_search();
        }
    }

    /// Applies this screen's answer (see [`App::on_reply`]); `false` when
    /// nothing shown changed.
    pub(crate) fn search_reply(&mut self, r: Reply) -> bool {
        match r {
            Reply::IndexProgress {
                session,
                fraction,
                what,
            } => {
                if self.search.session.as_deref() == Some(session.as_str())
                    && matches!(self.search.index, IndexState::Loading { .. })
                {
                    self.search.index = IndexState::Loading { fraction, what };
                }
            }
            Reply::IndexLoaded { session, result } => {
                if self.search.session.as_deref() == Some(session.as_str()) {
                    self.search.index = match result {
                        Ok(i) => IndexState::Ready(i),
                        Err(e) => IndexState::Failed(e),
                    };
                    self.rerun_search();
                }
            }
            Reply::Searched { seq, result } => {
                if seq != self.search.seq {
                    return false;
                }
                self.full_redraw = true;
                self.search.pending = false;
                match result {
                    Ok(r) => {
                        self.search.result = Some(r);
                        self.search.result_query = self.search.query.trim().to_string();
                        self.search.error = None;
                        self.search.selected = 0;
                    }
                    Err(e) => self.search.error = Some(e),
                }
            }
            _ => return false,
        }
        true
    }
}

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let s = &app.search;
    let [sa, qa, ia, ra] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Min(3),
    ])
    .areas(area);
    let status = match (&s.session, &s.index) {
        (None, _) | (_, IndexState::None) => Line::from(Span::styled(
            format!(
                " no session chosen — press {} to pick one",
                app.settings
                    .keymap
                    .keys_for(Context::Search, Action::PickSession)
            ),
            th.dim(),
        )),
        (Some(id), IndexState::Loading { fraction, what }) => Line::from(vec![
            Span::styled(format!(" {id} "), th.accent()),
            Span::styled(
                format!("loading index {} {what}", bar(*fraction, 20)),
                th.warn(),
            ),
        ]),
        (Some(id), IndexState::Ready(info)) => Line::from(vec![
            Span::styled(format!(" {id} "), th.accent()),
            Span::raw(format!(
                "· {} documents · {} judged queries",
                info.docs,
                info.judged_queries.len()
            )),
        ]),
        (Some(id), IndexState::Failed(e)) => Line::from(vec![
            Span::styled(format!(" {id} "), th.accent()),
            Span::styled(format!("cannot load: {e}"), th.bad()),
        ]),
    };
    f.render_widget(Paragraph::new(status), sa);
    f.render_widget(
        Paragraph::new(input_line(th, "query:", &s.query, s.editing))
            .block(block(th, " Query ", s.editing)),
        qa,
    );
    let mut info = vec![Span::styled(
        format!(" fusion: {}", s.fusion.label()),
        th.dim(),
    )];
    if let Some(r) = &s.result {
        let dropped = r.query.dropped_short();
        if let Some(why) = &r.unanswerable {
            info.push(Span::styled(format!(" · no ranking: {why}"), th.bad()));
        } else if !dropped.is_empty() {
            info.push(Span::styled(format!(" · dropped: {dropped}"), th.warn()));
        }
        if let Some(j) = &r.judged {
            info.push(Span::styled(
                format!(
                    " · RR {:.4} · AP {:.4} · {} relevant (query {})",
                    j.rr, j.ap, j.relevant, j.qid
                ),
                th.good(),
            ));
        }
    }
    if s.pending {
        info.push(Span::styled(" · searching…", th.warn()));
    }
    f.render_widget(Paragraph::new(Line::from(info)), ia);

    let title = if s.result.is_some() {
        format!(" Results for “{}” ", trunc(&s.result_query, 40))
    } else {
        " Results ".to_string()
    };
    if let Some(e) = &s.error {
        f.render_widget(
            Paragraph::new(Span::styled(format!(" {e}"), th.bad()))
                .wrap(Wrap { trim: true })
                .block(block(th, title, false)),
            ra,
        );
        return;
    }
    let Some(r) = &s.result else {
        f.render_widget(
            Paragraph::new(Span::styled(" type a query and press Enter", th.dim()))
                .block(block(th, title, false)),
            ra,
        );
        return;
    };
    if r.hits.is_empty() {
        f.render_widget(
            Paragraph::new(" no document matches").block(block(th, title, false)),
            ra,
        );
        return;
    }
    let text_w = (ra.width as usize).saturating_sub(8);
    let items: Vec<ListItem> = r
        .hits
        .iter()
        .map(|h| {
            let rel = match h.relevant {
                Some(true) => Span::styled("✓ ", th.good()),
                Some(false) => Span::raw("· "),
                None => Span::raw("  "),
            };
            let contrib = h
                .contributions
                .iter()
                .take(4)
                .map(|(t, c)| format!("{t} {c:.2}"))
                .collect::<Vec<_>>()
                .join(", ");
            let l1 = Line::from(vec![
                Span::raw(format!("{:>3} ", h.rank)),
                rel,
                Span::styled(format!("{} ", fit(&h.docno, 12)), th.accent()),
                Span::raw(format!("{:>8.4}  ", h.score)),
                Span::styled(trunc(&contrib, text_w.saturating_sub(24)), th.dim()),
            ]);
            let mut l2 = vec![Span::raw("      ")];
            l2.extend(highlight_text(th, &h.text, &h.spans, text_w));
            ListItem::new(Text::from(vec![l1, Line::from(l2)]))
        })
        .collect();
    let mut st = ListState::default().with_selected(Some(s.selected.min(r.hits.len() - 1)));
    f.render_stateful_widget(
        List::new(items)
            .block(block(th, title, !s.editing))
            .highlight_style(Style::default().add_modifier(Modifier::BOLD))
            .highlight_symbol("▶"),
        ra,
        &mut st,
    );
}

pub(crate) fn highlight_text<'a>(
    th: &Theme,
    text: &str,
    spans: &[(usize, usize)],
    max_chars: usize,
) -> Vec<Span<'a>> {
    let mut out = Vec::new();
    let mut pos = 0;
    let mut sorted: Vec<(usize, usize)> = spans
        .iter()
        .copied()
        .filter(|&(a, b)| {
            a < b && b <= text.len() && text.is_char_boundary(a) && text.is_char_boundary(b)
        })
        .collect();
    sorted.sort();
    let mut budget = max_chars;
    let mut push = |s: &str, style: Style, out: &mut Vec<Span<'a>>| {
        if budget == 0 {
            return;
        }
        let t: String = s.chars().take(budget).collect();
        budget -= t.chars().count();
        out.push(Span::styled(t, style));
    };
    for (a, b) in sorted {
        if a < pos {
            continue;
        }
        push(&text[pos..a], Style::default(), &mut out);
        push(&text[a..b], th.highlight(), &mut out);
        pos = b;
    }
    push(&text[pos..], Style::default(), &mut out);
    out
}

/// This screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if app.search.editing {
        return "type the query · Enter search · Esc done".into();
    }
    format!(
        "{} session · {} query · {} judged query · {} fusion · {} λ",
        k(C::Search, Action::PickSession),
        k(C::Global, Action::Filter),
        k(C::Search, Action::NextJudged),
        k(C::Search, Action::CycleFusion),
        km.bindings
            .iter()
            .filter(|b| matches!(b.action, Action::LambdaDown | Action::LambdaUp))
            .filter_map(|b| b.keys.first().map(|k| k.label()))
            .collect::<Vec<_>>()
            .join("/")
    )
}
