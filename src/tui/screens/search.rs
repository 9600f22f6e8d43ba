//! The Search screen: ranked retrieval with a session's index —
//! state, key handling, backend answers and drawing.

use std::cell::Cell;

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
use rosetta::session::search::QueryHistory;

/// The document view: one result's whole document, scrolled.
#[derive(Debug, Clone, Default)]
pub struct DocView {
    /// Position of the result in the list.
    pub hit: usize,
    /// Its document id.
    pub docno: String,
    /// Its display label (verse reference), shown while the document loads.
    pub label: String,
    /// The document, once fetched.
    pub doc: Option<Document>,
    /// Why it could not be fetched.
    pub error: Option<String>,
    /// First line shown.
    pub scroll: usize,
    /// Lines of content and rows to show them in, as last drawn (the
    /// scrolling limits).
    pub extent: Cell<(usize, usize)>,
}

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
    /// The open document view, over the results.
    pub doc: Option<DocView>,
    doc_seq: u64,
    /// Queries asked before, oldest first (recorded across restarts).
    pub history: Vec<String>,
    /// Position in `history` while recalling with ↑/↓.
    pub history_pos: Option<usize>,
    /// The query being typed when recalling started.
    history_draft: String,
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
            doc: None,
            doc_seq: 0,
            history: Vec::new(),
            history_pos: None,
            history_draft: String::new(),
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
        self.search.history_pos = None;
        let mut h = QueryHistory {
            queries: std::mem::take(&mut self.search.history),
        };
        let changed = h.push(&q);
        self.search.history = h.queries;
        if changed {
            self.outbox
                .push(Request::SaveHistory(self.search.history.clone()));
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

    /// Steps through the recorded queries while editing: `older` (↑) or
    /// newer (↓, back to what was typed after the newest).
    pub(crate) fn recall_query(&mut self, older: bool) {
        let s = &mut self.search;
        let n = s.history.len();
        if n == 0 {
            return;
        }
        let pos = match (s.history_pos, older) {
            (None, true) => {
                s.history_draft = s.query.clone();
                Some(n - 1)
            }
            (None, false) => return,
            (Some(p), true) => Some(p.saturating_sub(1)),
            (Some(p), false) => (p + 1 < n).then_some(p + 1),
        };
        s.history_pos = pos;
        s.query = match pos {
            Some(p) => s.history[p].clone(),
            None => s.history_draft.clone(),
        };
    }

    /// Opens the document view on result `i` and asks for its document.
    fn open_document(&mut self, i: usize) {
        let Some(h) = self.search.result.as_ref().and_then(|r| r.hits.get(i)) else {
            return;
        };
        let Some(session) = self.search.session.clone() else {
            return;
        };
        let (docno, label) = (h.docno.clone(), h.label.clone());
        self.search.selected = i;
        self.search.doc_seq += 1;
        self.search.doc = Some(DocView {
            hit: i,
            docno: docno.clone(),
            label,
            ..Default::default()
        });
        let q = self.search.result_query.trim();
        self.outbox.push(Request::Document {
            seq: self.search.doc_seq,
            session,
            docno,
            query: (!q.is_empty()).then(|| q.to_string()),
        });
    }

    /// Keys in the document view; `false` when the key is not the view's
    /// (the view is closed and the key applies to the results).
    fn doc_action(&mut self, a: Action) -> bool {
        let n = self.search.result.as_ref().map_or(0, |r| r.hits.len());
        let Some(v) = self.search.doc.as_mut() else {
            return false;
        };
        let (lines, rows) = v.extent.get();
        let max = lines.saturating_sub(rows);
        let page = rows.saturating_sub(1).max(1);
        match a {
            Action::Up => v.scroll = v.scroll.saturating_sub(1),
            Action::Down => v.scroll = (v.scroll + 1).min(max),
            Action::PageUp => v.scroll = v.scroll.saturating_sub(page),
            Action::PageDown => v.scroll = (v.scroll + page).min(max),
            Action::Top => v.scroll = 0,
            Action::Bottom => v.scroll = max,
            Action::Left | Action::Right => {
                let i = if a == Action::Left {
                    v.hit.checked_sub(1)
                } else {
                    (v.hit + 1 < n).then_some(v.hit + 1)
                };
                if let Some(i) = i {
                    self.open_document(i);
                }
            }
            Action::Enter => {}
            _ => {
                self.search.doc = None;
                return false;
            }
        }
        true
    }

    pub(crate) fn search_action(&mut self, a: Action) {
        if self.doc_action(a) {
            return;
        }
        let n = self.search.result.as_ref().map_or(0, |r| r.hits.len());
        let sel = &mut self.search.selected;
        match a {
            Action::Enter if n > 0 => self.open_document(self.search.selected.min(n - 1)),
            Action::Filter | Action::Enter => {
                self.search.editing = true;
                self.search.history_pos = None;
            }
            Action::Up => *sel = sel.saturating_sub(1),
            Action::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
            Action::PageUp => *sel = sel.saturating_sub(5),
            Action::PageDown => *sel = (*sel + 5).min(n.saturating_sub(1)),
            Action::Top => *sel = 0,
            Action::Bottom => *sel = n.saturating_sub(1),
            Action::PickSession => {
                self.popup = Some(Popup::Picker {
                    purpose: PickFor::Search,
                    selected: self.picker_start(),
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
            Reply::Document { seq, result } => {
                let Some(v) = self
                    .search
                    .doc
                    .as_mut()
                    .filter(|_| seq == self.search.doc_seq)
                else {
                    return false;
                };
                // new text, maybe non-Latin: repaint every cell
                self.full_redraw = true;
                match result {
                    Ok(d) => {
                        v.doc = Some(d);
                        v.error = None;
                    }
                    Err(e) => v.error = Some(e),
                }
            }
            Reply::History(Ok(loaded)) => {
                // queries asked before the record was read stay the newest
                let mut h = QueryHistory { queries: loaded };
                for q in &self.search.history {
                    h.push(q);
                }
                self.search.history = h.queries;
                return false;
            }
            Reply::History(Err(e)) => self.error(format!("search history: {e}")),
            Reply::HistorySaved(Ok(())) => return false,
            Reply::HistorySaved(Err(e)) => self.error(format!("search history: {e}")),
            Reply::Searched { seq, result } => {
                if seq != self.search.seq {
                    return false;
                }
                self.full_redraw = true;
                self.search.pending = false;
                match result {
                    Ok(r) => {
                        self.search.doc = None;
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
            Span::styled(format!(" {} ", app.session_name(id)), th.accent()),
            Span::styled(
                format!("loading index {} {what}", bar(*fraction, 20)),
                th.warn(),
            ),
        ]),
        (Some(id), IndexState::Ready(info)) => Line::from(vec![
            Span::styled(format!(" {} ", app.session_name(id)), th.accent()),
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
    if let Some(v) = &s.doc {
        let [_, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(3)]).areas(area);
        return draw_document(f, app, v, rest);
    }
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
                    j.rr, j.ap, j.relevant, j.label
                ),
                th.good(),
            ));
        }
    }
    if s.pending {
        info.push(Span::styled(" · searching…", th.warn()));
    }
    f.render_widget(Paragraph::new(Line::from(info)), ia);

    let title = if let Some(r) = &s.result {
        // an HNSW graph's ranking: the full description is in the CLI's output
        let approx = if r.approximate.is_some() {
            "≈ HNSW "
        } else {
            ""
        };
        format!(" Results for “{}” {approx}", trunc(&s.result_query, 40))
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
    // borders, the highlight symbol's column and the text's indent
    let text_w = (ra.width as usize).saturating_sub(9);
    // labels (verse references) in one column as wide as the widest, up to 24
    let label_w = r
        .hits
        .iter()
        .map(|h| width(&h.label))
        .max()
        .unwrap_or(0)
        .clamp(8, 24);
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
                Span::styled(format!("{} ", fit(&h.label, label_w)), th.accent()),
                Span::raw(format!("{:>8.4}  ", h.score)),
                Span::styled(
                    trunc(&contrib, text_w.saturating_sub(label_w + 12)),
                    th.dim(),
                ),
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
    // a text longer than the room ends in `…` (never cut silently)
    let cut = text.chars().count() > max_chars;
    let mut budget = if cut {
        max_chars.saturating_sub(1)
    } else {
        max_chars
    };
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
    if cut && max_chars > 0 {
        out.push(Span::styled("…", th.dim()));
    }
    out
}

/// `text` wrapped at `width_cells` ([`wrap_ranges`]), the byte ranges
/// `spans` highlighted, each line indented by `indent`.
fn wrapped_lines<'a>(
    th: &Theme,
    text: &str,
    spans: &[(usize, usize)],
    width_cells: usize,
    indent: &'a str,
) -> Vec<Line<'a>> {
    wrap_ranges(text, width_cells)
        .into_iter()
        .map(|(a, b)| {
            let mut out = vec![Span::raw(indent)];
            let mut pos = a;
            let mut sorted: Vec<(usize, usize)> = spans
                .iter()
                .map(|&(x, y)| (x.max(a), y.min(b)))
                .filter(|&(x, y)| x < y && text.is_char_boundary(x) && text.is_char_boundary(y))
                .collect();
            sorted.sort();
            for (x, y) in sorted {
                if x < pos {
                    continue;
                }
                out.push(Span::raw(text[pos..x].to_string()));
                out.push(Span::styled(text[x..y].to_string(), th.highlight()));
                pos = y;
            }
            out.push(Span::raw(text[pos..b].to_string()));
            Line::from(out)
        })
        .collect()
}

/// The document view: the whole document wrapped, then its aligned source
/// text, scrolled; the title says which lines show, so nothing is cut
/// silently.
fn draw_document(f: &mut Frame, app: &App, v: &DocView, area: Rect) {
    let th = &app.settings.theme;
    let s = &app.search;
    let n = s.result.as_ref().map_or(0, |r| r.hits.len());
    let hit = s.result.as_ref().and_then(|r| r.hits.get(v.hit));
    let inner_w = (area.width as usize).saturating_sub(2);
    let rows = (area.height as usize).saturating_sub(2);
    let text_w = inner_w.saturating_sub(2).max(1);
    let mut lines: Vec<Line> = Vec::new();
    let mut head = vec![Span::styled(
        format!(" result {} of {n}", v.hit + 1),
        th.dim(),
    )];
    if let Some(h) = hit {
        head.push(Span::styled(format!(" · score {:.4}", h.score), th.dim()));
        if h.relevant == Some(true) {
            head.push(Span::styled(" · ✓ judged relevant", th.good()));
        }
    }
    if v.label != v.docno {
        head.push(Span::styled(format!(" · id {}", v.docno), th.dim()));
    }
    lines.push(Line::from(head));
    lines.push(Line::default());
    match (&v.doc, &v.error) {
        (_, Some(e)) => {
            for l in wrap_ranges(e, text_w) {
                lines.push(Line::from(Span::styled(
                    format!(" {}", &e[l.0..l.1]),
                    th.bad(),
                )));
            }
        }
        (None, None) => lines.push(Line::from(Span::styled(" loading…", th.warn()))),
        (Some(d), None) => {
            lines.push(Line::from(Span::styled(
                format!(" document ({})", d.lang),
                th.accent(),
            )));
            lines.extend(wrapped_lines(th, &d.text, &d.spans, text_w, "  "));
            lines.push(Line::default());
            match &d.source {
                Some(src) => {
                    lines.push(Line::from(Span::styled(
                        format!(" aligned source text ({})", d.source_lang),
                        th.accent(),
                    )));
                    lines.extend(wrapped_lines(th, src, &d.source_spans, text_w, "  "));
                }
                None => lines.push(Line::from(Span::styled(
                    " (this collection has no aligned source-language text)",
                    th.dim(),
                ))),
            }
        }
    }
    let total = lines.len();
    v.extent.set((total, rows));
    let scroll = v.scroll.min(total.saturating_sub(rows));
    let shown = if total > rows {
        format!(
            " lines {}–{} of {total} ",
            scroll + 1,
            (scroll + rows).min(total)
        )
    } else {
        String::new()
    };
    let title = Line::from(vec![
        Span::styled(format!(" {} ", trunc(&v.label, inner_w / 2)), th.accent()),
        Span::styled(shown, th.dim()),
    ]);
    f.render_widget(
        Paragraph::new(lines)
            .scroll((scroll.min(u16::MAX as usize) as u16, 0))
            .block(block(th, title, true)),
        area,
    );
}

/// This screen's key hints on the status line.
pub fn hints(app: &App) -> String {
    let km = &app.settings.keymap;
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if app.search.editing {
        return "type the query · ↑/↓ earlier queries · Enter search · Esc done".into();
    }
    if app.search.doc.is_some() {
        // the last key of each (j, k, h, l rather than the arrows): short
        let last = |a| {
            km.bindings
                .iter()
                .find(|b| b.action == a && b.context == C::Global)
                .and_then(|b| b.keys.last().map(|k| k.label()))
                .unwrap_or_default()
        };
        return format!(
            "{}/{} scroll · {}/{} page · {}/{} previous/next result · {} back",
            last(Action::Down),
            last(Action::Up),
            k(C::Global, Action::PageUp).split('/').next().unwrap_or(""),
            k(C::Global, Action::PageDown)
                .split('/')
                .next()
                .unwrap_or(""),
            last(Action::Left),
            last(Action::Right),
            k(C::Global, Action::Close),
        );
    }
    format!(
        "{} open · {} session · {} query · {} judged query · {} fusion · {} λ",
        k(C::Global, Action::Enter),
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
