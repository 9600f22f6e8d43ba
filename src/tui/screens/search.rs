//! The Search screen: ranked retrieval with a session's index —
//! state, key handling, backend answers and drawing.

use std::cell::Cell;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use crossterm::event::{KeyCode, KeyEvent};

use super::{edit_text, Ctx, Screen, View};
use super::{PickFor, Popup};
use crate::tui::backend::*;
use crate::tui::config::Theme;
use crate::tui::keymap::{Action, Context, Keymap};
use crate::tui::widgets::*;
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
    /// Not loaded: its collection is not encoded and encoding it would take
    /// longer than the workbench starts without asking; `B` launches the
    /// index build as a job.
    NeedsBuild {
        /// The engine's estimate, measured on a sample.
        estimate: Estimate,
        /// The command that builds it (`rosetta index build ... --detach`).
        command: String,
    },
    /// Its index build was launched from here: the session is loaded when
    /// the build's status says `done` (Jobs shows its progress).
    Building {
        /// The build's process id.
        pid: u32,
        /// The `updated` stamp of the status an earlier build left, if
        /// any: that `done` is not this build's.
        before: Option<String>,
    },
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

/// Work the Search screen asks of the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Load a session's search index.
    LoadIndex(String),
    /// Run a query.
    Search {
        seq: u64,
        session: String,
        query: String,
        k: usize,
        fusion: Fusion,
    },
    /// Fetch one whole document for the document view.
    Document {
        seq: u64,
        session: String,
        docno: String,
        query: Option<String>,
    },
    /// Read the recorded search queries.
    LoadHistory,
    /// Record the search queries.
    SaveHistory(Vec<String>),
    /// Launch a session's index build as a detached job.
    BuildIndex(String),
}

/// The backend's answers to [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    IndexProgress {
        session: String,
        fraction: f64,
        what: String,
    },
    IndexLoaded {
        session: String,
        result: Result<IndexOpening, String>,
    },
    /// An index build launched: its process id.
    BuildStarted {
        session: String,
        result: Result<u32, String>,
    },
    Searched {
        seq: u64,
        result: Result<SearchResult, String>,
    },
    Document {
        seq: u64,
        result: Result<Document, String>,
    },
    History(Result<Vec<String>, String>),
    HistorySaved(Result<(), String>),
}

impl SearchScreen {
    fn run(&mut self, cx: &mut Ctx<'_, Request>) {
        let q = self.query.trim().to_string();
        if q.is_empty() {
            return;
        }
        let Some(session) = self.session.clone() else {
            cx.error("choose a session first (s)");
            return;
        };
        if !matches!(self.index, IndexState::Ready(_)) {
            cx.error("the index is not loaded yet");
            return;
        }
        self.history_pos = None;
        let mut h = QueryHistory {
            queries: std::mem::take(&mut self.history),
        };
        let changed = h.push(&q);
        self.history = h.queries;
        if changed {
            cx.send(Request::SaveHistory(self.history.clone()));
        }
        self.seq += 1;
        self.pending = true;
        cx.send(Request::Search {
            seq: self.seq,
            session,
            query: q,
            k: self.k,
            fusion: self.fusion,
        });
    }

    /// Steps through the recorded queries while editing: `older` (↑) or
    /// newer (↓, back to what was typed after the newest).
    fn recall_query(&mut self, older: bool) {
        let s = self;
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
    fn open_document(&mut self, cx: &mut Ctx<'_, Request>, i: usize) {
        let Some(h) = self.result.as_ref().and_then(|r| r.hits.get(i)) else {
            return;
        };
        let Some(session) = self.session.clone() else {
            return;
        };
        let (docno, label) = (h.docno.clone(), h.label.clone());
        self.selected = i;
        self.doc_seq += 1;
        self.doc = Some(DocView {
            hit: i,
            docno: docno.clone(),
            label,
            ..Default::default()
        });
        let q = self.result_query.trim();
        cx.send(Request::Document {
            seq: self.doc_seq,
            session,
            docno,
            query: (!q.is_empty()).then(|| q.to_string()),
        });
    }

    /// Keys in the document view; `false` when the key is not the view's
    /// (the view is closed and the key applies to the results).
    fn doc_action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) -> bool {
        let n = self.result.as_ref().map_or(0, |r| r.hits.len());
        let Some(v) = self.doc.as_mut() else {
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
                    self.open_document(cx, i);
                }
            }
            Action::Enter => {}
            _ => {
                self.doc = None;
                return false;
            }
        }
        true
    }

    fn action(&mut self, a: Action, cx: &mut Ctx<'_, Request>) {
        if self.doc_action(a, cx) {
            return;
        }
        let n = self.result.as_ref().map_or(0, |r| r.hits.len());
        let sel = &mut self.selected;
        match a {
            Action::Enter if n > 0 => self.open_document(cx, self.selected.min(n - 1)),
            Action::Filter | Action::Enter => {
                self.editing = true;
                self.history_pos = None;
            }
            Action::Up => *sel = sel.saturating_sub(1),
            Action::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
            Action::PageUp => *sel = sel.saturating_sub(5),
            Action::PageDown => *sel = (*sel + 5).min(n.saturating_sub(1)),
            Action::Top => *sel = 0,
            Action::Bottom => *sel = n.saturating_sub(1),
            Action::PickSession => {
                *cx.popup = Some(Popup::Picker {
                    purpose: PickFor::Search,
                    selected: cx.picker_start(),
                })
            }
            Action::BuildIndex => self.build_index(cx),
            Action::NextJudged => {
                let IndexState::Ready(info) = &self.index else {
                    return cx.error("load a session's index first (s)");
                };
                if info.judged_queries.is_empty() {
                    return cx.error("this workspace has no judged queries");
                }
                let i = self.judged_pos % info.judged_queries.len();
                self.query = info.judged_queries[i].1.clone();
                self.judged_pos = i + 1;
                self.run(cx);
            }
            Action::CycleFusion => {
                self.fusion = match self.fusion {
                    Fusion::Model => Fusion::Linear {
                        lambda: self.lambda,
                    },
                    Fusion::Linear { .. } => Fusion::Rrf { k: 60.0 },
                    Fusion::Rrf { .. } => Fusion::Model,
                };
                self.rerun(cx);
            }
            Action::LambdaUp | Action::LambdaDown => {
                let d = if a == Action::LambdaUp { 0.1 } else { -0.1 };
                self.lambda = ((self.lambda + d) * 10.0).round().clamp(0.0, 10.0) / 10.0;
                if let Fusion::Linear { .. } = self.fusion {
                    self.fusion = Fusion::Linear {
                        lambda: self.lambda,
                    };
                    self.rerun(cx);
                }
            }
            _ => {}
        }
    }

    fn rerun(&mut self, cx: &mut Ctx<'_, Request>) {
        if !self.query.trim().is_empty() && matches!(self.index, IndexState::Ready(_)) {
            self.run(cx);
        }
    }

    fn reply(&mut self, r: Reply, cx: &mut Ctx<'_, Request>) -> bool {
        match r {
            Reply::IndexProgress {
                session,
                fraction,
                what,
            } => {
                if self.session.as_deref() == Some(session.as_str())
                    && matches!(self.index, IndexState::Loading { .. })
                {
                    self.index = IndexState::Loading { fraction, what };
                }
            }
            Reply::IndexLoaded { session, result } => {
                if self.session.as_deref() == Some(session.as_str()) {
                    self.index = match result {
                        Ok(IndexOpening::Ready(i)) => IndexState::Ready(i),
                        Ok(IndexOpening::NeedsBuild { estimate, command }) => {
                            IndexState::NeedsBuild { estimate, command }
                        }
                        Err(e) => IndexState::Failed(e),
                    };
                    self.rerun(cx);
                }
            }
            Reply::BuildStarted { session, result } => match result {
                Ok(pid) => {
                    cx.info(format!(
                        "index build of {session} started (pid {pid}): Jobs shows its progress; \
                         the session opens here when it is done"
                    ));
                    if self.session.as_deref() == Some(session.as_str()) {
                        self.index = IndexState::Building {
                            pid,
                            before: index_build(cx.sessions.list, &session)
                                .map(|b| b.status.updated.clone()),
                        };
                    }
                }
                Err(e) => cx.error(format!("index build of {session}: {e}")),
            },
            Reply::Document { seq, result } => {
                let Some(v) = self.doc.as_mut().filter(|_| seq == self.doc_seq) else {
                    return false;
                };
                // new text, maybe non-Latin: repaint every cell
                *cx.full_redraw = true;
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
                for q in &self.history {
                    h.push(q);
                }
                self.history = h.queries;
                return false;
            }
            Reply::History(Err(e)) => cx.error(format!("search history: {e}")),
            Reply::HistorySaved(Ok(())) => return false,
            Reply::HistorySaved(Err(e)) => cx.error(format!("search history: {e}")),
            Reply::Searched { seq, result } => {
                if seq != self.seq {
                    return false;
                }
                *cx.full_redraw = true;
                self.pending = false;
                match result {
                    Ok(r) => {
                        self.doc = None;
                        self.result = Some(r);
                        self.result_query = self.query.trim().to_string();
                        self.error = None;
                        self.selected = 0;
                    }
                    Err(e) => self.error = Some(e),
                }
            }
        }
        true
    }

    /// `B`: launches the index build of the session whose collection is
    /// too long to encode here; refused (with why) otherwise, and while a
    /// build of it runs.
    fn build_index(&mut self, cx: &mut Ctx<'_, Request>) {
        let Some(session) = self.session.clone() else {
            return cx.error("choose a session first (s)");
        };
        if let Some(b) = index_build(cx.sessions.list, &session).filter(|b| b.running()) {
            return cx.error(format!(
                "an index build of {session} is already running: {}",
                b.status.describe()
            ));
        }
        match &self.index {
            IndexState::NeedsBuild { .. } | IndexState::Building { .. } => {
                cx.send(Request::BuildIndex(session))
            }
            _ => cx.error(format!(
                "{session} needs no index build here (B builds one when opening a session \
                 would encode its collection for more than {} s)",
                cx.settings.encode_limit_s
            )),
        }
    }

    /// The sessions were scanned again: a session whose index build was
    /// launched from here is opened once the build says `done`.
    pub(crate) fn on_sessions(&mut self, cx: &mut Ctx<'_, Request>) {
        let (Some(session), IndexState::Building { before, .. }) = (&self.session, &self.index)
        else {
            return;
        };
        let done = index_build(cx.sessions.list, session)
            .is_some_and(|b| b.state == "done" && Some(&b.status.updated) != before.as_ref());
        if done {
            let id = session.clone();
            self.index = IndexState::Loading {
                fraction: 0.0,
                what: "starting".into(),
            };
            cx.send(Request::LoadIndex(id));
        }
    }

    /// The session chosen in the picker (or on Jobs): load its index.
    pub(crate) fn pick(&mut self, id: String, cx: &mut Ctx<'_, Request>) {
        if self.session.as_deref() == Some(id.as_str())
            && matches!(
                self.index,
                IndexState::Ready(_) | IndexState::Loading { .. } | IndexState::Building { .. }
            )
        {
            return;
        }
        self.session = Some(id.clone());
        self.index = IndexState::Loading {
            fraction: 0.0,
            what: "starting".into(),
        };
        self.result = None;
        cx.send(Request::LoadIndex(id));
    }
}

impl Screen for SearchScreen {
    type Request = Request;
    type Reply = Reply;

    fn execute(
        backend: &dyn Backend,
        req: Request,
        progress: &(dyn Fn(Reply) + Send + Sync),
    ) -> Reply {
        let s = |e: rosetta::Error| e.to_string();
        match req {
            Request::LoadIndex(session) => {
                let sess = session.clone();
                let cb = move |fraction: f64, what: &str| {
                    progress(Reply::IndexProgress {
                        session: sess.clone(),
                        fraction,
                        what: what.to_string(),
                    })
                };
                let result = backend.load_index(&session, &cb).map_err(s);
                Reply::IndexLoaded { session, result }
            }
            Request::Search {
                seq,
                session,
                query,
                k,
                fusion,
            } => Reply::Searched {
                seq,
                result: backend.search(&session, &query, k, fusion).map_err(s),
            },
            Request::Document {
                seq,
                session,
                docno,
                query,
            } => Reply::Document {
                seq,
                result: backend
                    .document(&session, &docno, query.as_deref())
                    .map_err(s),
            },
            Request::LoadHistory => Reply::History(backend.load_history().map_err(s)),
            Request::SaveHistory(queries) => {
                Reply::HistorySaved(backend.save_history(&queries).map_err(s))
            }
            Request::BuildIndex(session) => Reply::BuildStarted {
                result: backend.build_index(&session).map_err(s),
                session,
            },
        }
    }

    fn busy_label(req: &Request) -> Option<String> {
        Some(match req {
            Request::LoadIndex(s) => format!("opening session {s}"),
            Request::Search { query, .. } => format!("searching “{}”", trunc(query, 30)),
            Request::Document { docno, .. } => format!("fetching document {docno}"),
            Request::LoadHistory | Request::SaveHistory(_) => return None,
            Request::BuildIndex(s) => format!("starting the index build of {s}"),
        })
    }

    fn failed(req: &Request, msg: String) -> Reply {
        match req.clone() {
            Request::LoadIndex(session) => Reply::IndexLoaded {
                session,
                result: Err(msg),
            },
            Request::Search { seq, .. } => Reply::Searched {
                seq,
                result: Err(msg),
            },
            Request::Document { seq, .. } => Reply::Document {
                seq,
                result: Err(msg),
            },
            Request::LoadHistory => Reply::History(Err(msg)),
            Request::SaveHistory(_) => Reply::HistorySaved(Err(msg)),
            Request::BuildIndex(session) => Reply::BuildStarted {
                session,
                result: Err(msg),
            },
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
        if self.session.is_none() {
            if let Some(id) = cx.jobs_choice() {
                self.pick(id, cx);
            }
        }
    }

    fn on_close(&mut self, cx: &mut Ctx<'_, Request>) {
        if self.doc.take().is_none() {
            *cx.message = None;
        }
    }

    fn editing(&self) -> bool {
        self.editing
    }

    fn edit_key(&mut self, k: KeyEvent, cx: &mut Ctx<'_, Request>) {
        match k.code {
            KeyCode::Esc => self.editing = false,
            KeyCode::Enter => {
                self.editing = false;
                self.run(cx);
            }
            KeyCode::Up | KeyCode::Down => self.recall_query(k.code == KeyCode::Up),
            _ => {
                edit_text(&mut self.query, &k);
            }
        }
    }

    fn stop_editing(&mut self) {
        self.editing = false;
    }

    fn copy_text(&self) -> Option<String> {
        Some(match &self.doc {
            Some(d) if !d.label.is_empty() => d.label.clone(),
            Some(d) => d.docno.clone(),
            None => self.query.trim().to_string(),
        })
    }

    fn draw(&self, f: &mut Frame, area: Rect, view: &View<'_>) {
        draw(f, self, view, area)
    }

    fn hints(&self, km: &Keymap) -> String {
        hints(self, km)
    }
}

fn draw(f: &mut Frame, s: &SearchScreen, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
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
                view.settings
                    .keymap
                    .keys_for(Context::Search, Action::PickSession)
            ),
            th.dim(),
        )),
        (Some(id), IndexState::Loading { fraction, what }) => Line::from(vec![
            Span::styled(format!(" {} ", view.session_name(id)), th.accent()),
            Span::styled(
                format!("loading index {} {what}", bar(*fraction, 20)),
                th.warn(),
            ),
        ]),
        (Some(id), IndexState::Ready(info)) => Line::from(vec![
            Span::styled(format!(" {} ", view.session_name(id)), th.accent()),
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
        (Some(id), IndexState::NeedsBuild { estimate, .. }) => Line::from(vec![
            Span::styled(format!(" {} ", view.session_name(id)), th.accent()),
            Span::styled(
                format!(
                    "not indexed: {} documents ≈ {} to encode · {} builds its index",
                    estimate.texts,
                    rosetta::util::fmt_duration(estimate.seconds),
                    build_key(view)
                ),
                th.warn(),
            ),
        ]),
        (Some(id), IndexState::Building { pid, .. }) => Line::from(vec![
            Span::styled(format!(" {} ", view.session_name(id)), th.accent()),
            Span::styled(build_line(view, id, *pid), th.warn()),
        ]),
    };
    f.render_widget(Paragraph::new(status), sa);
    if let Some(v) = &s.doc {
        let [_, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(3)]).areas(area);
        return draw_document(f, s, view, v, rest);
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
    if let (Some(id), IndexState::NeedsBuild { estimate, command }) = (&s.session, &s.index) {
        return draw_needs_build(f, view, id, estimate, command, title, ra);
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
            let contrib = if h.aligned.is_empty() {
                h.contributions
                    .iter()
                    .take(4)
                    .map(|(t, c)| format!("{t} {c:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                // an encoder's token alignment, as `rosetta search` prints it
                h.aligned
                    .iter()
                    .take(4)
                    .map(|w| format!("{}→{} {:.2}", w.query, w.document, w.similarity))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
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

/// The index build of session `id`, as the sessions were last scanned.
fn index_build<'a>(list: &'a [SessionSummary], id: &str) -> Option<&'a IndexBuild> {
    list.iter().find(|s| s.id == id)?.index.as_ref()
}

/// The keys of the build action.
fn build_key(view: &View<'_>) -> String {
    view.settings
        .keymap
        .keys_for(Context::Search, Action::BuildIndex)
}

/// The status line of a session whose index build was launched from here:
/// the build's progress as the sessions were last scanned.
fn build_line(view: &View<'_>, id: &str, pid: u32) -> String {
    match index_build(view.sessions.list, id) {
        Some(b) if b.running() => format!("index build running: {}", b.status.describe()),
        Some(b) if b.state == "done" => "index built: opening…".into(),
        Some(b) if b.state != "running" && b.status.pid == pid => format!(
            "index build {}: {} · {} builds again",
            b.state,
            b.status.error.as_deref().unwrap_or("see index/log.txt"),
            build_key(view)
        ),
        _ => format!("index build starting (pid {pid})…"),
    }
}

/// The results pane of a session whose collection is not encoded: the
/// estimate, and the offer to build its index as a job.
fn draw_needs_build(
    f: &mut Frame,
    view: &View<'_>,
    id: &str,
    e: &Estimate,
    command: &str,
    title: String,
    area: Rect,
) {
    let th = &view.settings.theme;
    let lines = vec![
        Line::from(Span::styled(
            format!(
                " {} is not indexed: encoding its {} documents would take about {} on this \
                 machine ({:.1} texts/s measured on {} of them), more than the {} s the \
                 workbench encodes without asking (encode_limit_s in the config).",
                view.session_name(id),
                e.texts,
                rosetta::util::fmt_duration(e.seconds),
                e.texts_per_s,
                e.sample,
                view.settings.encode_limit_s
            ),
            th.warn(),
        )),
        Line::default(),
        Line::from(vec![
            Span::styled(format!(" {} ", build_key(view)), th.accent()),
            Span::raw(
                "build the index as a background job: Jobs shows its progress (texts done, \
                 texts/s, ETA), and the session opens here when it is done. The same from a shell:",
            ),
        ]),
        Line::from(Span::styled(format!("   {command}"), th.dim())),
    ];
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(th, title, false)),
        area,
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
fn draw_document(f: &mut Frame, s: &SearchScreen, view: &View<'_>, v: &DocView, area: Rect) {
    let th = &view.settings.theme;
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
fn hints(s: &SearchScreen, km: &Keymap) -> String {
    let k = |c, a| km.keys_for(c, a);
    use Context as C;
    if s.editing {
        return "type the query · ↑/↓ earlier queries · Enter search · Esc done".into();
    }
    if s.doc.is_some() {
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
    if matches!(s.index, IndexState::NeedsBuild { .. }) {
        return format!(
            "{} build the index as a job · {} another session · {} Jobs",
            k(C::Search, Action::BuildIndex),
            k(C::Search, Action::PickSession),
            k(C::Global, Action::Tab(1)),
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
