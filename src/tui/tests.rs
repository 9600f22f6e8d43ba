//! Workbench tests: key handling drives `App` without a terminal, and every
//! screen is drawn on ratatui's `TestBackend` and compared with an insta
//! snapshot. A fake backend stands in for the engine.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::tui::app::{App, IndexState, Popup, Request, Tab};
use crate::tui::backend::*;
use crate::tui::config::{ConfigFile, Settings};
use crate::tui::keymap::{Key, Keymap};
use crate::tui::screens::jobs::JobsPopup;
use crate::tui::ui;
use crossterm::event::{
    Event, KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use rosetta::eval::compare::{CompareOptions, System, Task};
use rosetta::eval::{Metric, Metrics};
use rosetta::session::search::{Hit, Judged, MarkedNeighbour as Neighbour, RankedDoc};
use rosetta::session::workbench::SplitStats;
use rosetta::text::Side;
use rosetta::{Error, Result};

/// A backend answering from memory and recording what it was asked.
#[derive(Default)]
struct Fake {
    sessions: Mutex<Vec<SessionSummary>>,
    metrics: Mutex<HashMap<String, Vec<MetricRecord>>>,
    launched: Mutex<Vec<JobSpec>>,
    cancelled: Mutex<Vec<String>>,
    resumed: Mutex<Vec<String>>,
    searches: Mutex<Vec<(String, Fusion)>>,
    documents: Mutex<Vec<(String, Option<String>)>>,
    history: Mutex<Vec<String>>,
    exported: Mutex<Vec<(PathBuf, TableFormat)>>,
    associations: Mutex<Vec<(String, AssocOptions)>>,
    assoc_exported: Mutex<Vec<(PathBuf, String, usize)>>,
    spec: Option<JobSpec>,
    deleted: Mutex<Vec<String>>,
    meta: Mutex<Vec<(String, MetaField, String)>>,
    /// Query labels the compare table gives q0, q1, ... (default: John 1:1-3).
    query_labels: Vec<String>,
    /// Rankings asked for: (session, query).
    rankings: Mutex<Vec<(String, String)>>,
    /// The launcher remembered under the sessions root.
    launcher: Mutex<LauncherMemory>,
    /// Index builds started.
    builds: Mutex<Vec<String>>,
    /// The compare table's model column from the sessions' models (else
    /// `s2net` for the first, `cl-lsi` for the others).
    models_from_sessions: bool,
}

fn summary(id: &str, state: State) -> SessionSummary {
    SessionSummary {
        id: id.into(),
        dir: PathBuf::from("sessions").join(id),
        state,
        model: "s2net".into(),
        workspace: "tests/fixtures/corpus/tiny/workspace.toml".into(),
        device: "cpu".into(),
        ..Default::default()
    }
}

fn running() -> SessionSummary {
    SessionSummary {
        pid: Some(4242),
        alive: Some(true),
        progress: Some(0.4),
        epoch: Some(2),
        epochs: Some(5),
        eta_s: Some(125.0),
        pairs_per_s: Some(5230.0),
        best_mrr: Some(0.412),
        best_epoch: Some(1),
        ..summary("s2net-run", State::Running)
    }
}

fn done() -> SessionSummary {
    SessionSummary {
        progress: Some(1.0),
        epoch: Some(3),
        epochs: Some(3),
        pairs_per_s: Some(6100.0),
        best_mrr: Some(0.5731),
        best_epoch: Some(3),
        ..summary("s2net-done", State::Done)
    }
}

/// Two finished sessions to compare: `s2net-done` and `cl-lsi-done`.
fn two_finished() -> Vec<SessionSummary> {
    vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]
}

fn failed() -> SessionSummary {
    SessionSummary {
        error: Some("data/train.hi:17: invalid UTF-8 at byte 33".into()),
        model: "cl-lsi".into(),
        ..summary("cl-lsi-failed", State::Failed)
    }
}

/// Deterministic metrics: a decaying saw-tooth loss and rising MRR.
fn metrics(steps: usize, epochs: usize) -> Vec<MetricRecord> {
    let mut v = Vec::new();
    for i in 1..=steps {
        let loss = 2.0 * (-(i as f64) / 60.0).exp() + 0.3 + 0.1 * ((i % 7) as f64 / 7.0);
        v.push(MetricRecord::Step {
            phase: "train".into(),
            epoch: 1 + (i - 1) * epochs / steps,
            step: i,
            examples: 64,
            loss,
            parts: Default::default(),
            pairs_per_s: 5000.0,
            wall_s: 1.0,
        });
    }
    for e in 1..=epochs {
        let mut scores = BTreeMap::new();
        scores.insert("MRR".to_string(), 0.3 + 0.09 * e as f64);
        scores.insert("P@1".to_string(), 0.2 + 0.08 * e as f64);
        v.push(MetricRecord::Valid {
            phase: "train".into(),
            epoch: e,
            step: e * steps / epochs,
            scores,
        });
    }
    v.push(MetricRecord::event(
        "checkpoint",
        "epoch 2 saved",
        Some(2),
        None,
    ));
    v
}

impl Fake {
    fn with(sessions: Vec<SessionSummary>) -> Fake {
        let f = Fake::default();
        *f.sessions.lock().unwrap() = sessions;
        f
    }
    fn set_metrics(&self, id: &str, records: Vec<MetricRecord>) {
        self.metrics.lock().unwrap().insert(id.into(), records);
    }
}

impl Backend for Fake {
    fn list_sessions(&self) -> Result<Vec<SessionSummary>> {
        Ok(self.sessions.lock().unwrap().clone())
    }
    fn tail_metrics(&self, session: &str, offset: u64) -> Result<MetricsChunk> {
        // the cursor counts records here
        let all = self
            .metrics
            .lock()
            .unwrap()
            .get(session)
            .cloned()
            .unwrap_or_default();
        let reset = offset as usize > all.len();
        let from = if reset { 0 } else { offset as usize };
        Ok(MetricsChunk {
            records: all[from..].to_vec(),
            next_offset: all.len() as u64,
            reset,
            bad_lines: 0,
        })
    }
    fn session_spec(&self, session: &str) -> Result<JobSpec> {
        self.spec
            .clone()
            .ok_or_else(|| Error::invalid(format!("{session}: no config")))
    }
    fn launch(&self, spec: &JobSpec) -> Result<Launched> {
        self.launched.lock().unwrap().push(spec.clone());
        let id = format!("{}-new", spec.model);
        let mut s = summary(&id, State::Running);
        s.pid = Some(777);
        s.alive = Some(true);
        self.sessions.lock().unwrap().insert(0, s);
        Ok(Launched {
            session: id.clone(),
            pid: 777,
            ..Default::default()
        })
    }
    fn launcher_memory(&self) -> Result<LauncherMemory> {
        Ok(self.launcher.lock().unwrap().clone())
    }
    fn cancel(&self, session: &str) -> Result<()> {
        self.cancelled.lock().unwrap().push(session.into());
        Ok(())
    }
    fn resume(&self, session: &str) -> Result<Launched> {
        self.resumed.lock().unwrap().push(session.into());
        Ok(Launched {
            session: session.into(),
            pid: 778,
            ..Default::default()
        })
    }
    fn load_index(&self, session: &str, progress: ProgressFn) -> Result<IndexOpening> {
        // an encoder session is not encoded until its index build is done
        let built = self
            .sessions
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.id == session && s.index.as_ref().is_some_and(|i| i.state == "done"));
        if session.starts_with("encoder") && !built {
            return Ok(IndexOpening::NeedsBuild {
                estimate: Estimate {
                    texts: 31084,
                    sample: 16,
                    texts_per_s: 16.6,
                    seconds: 31084.0 / 16.6,
                    device: "cpu".into(),
                },
                command: format!("rosetta index build --session sessions/{session} --detach"),
            });
        }
        progress(0.5, "encoding documents");
        Ok(IndexOpening::Ready(IndexInfo {
            session: session.into(),
            docs: 1190,
            judged_queries: vec![("q7".into(), "where is the river".into())],
        }))
    }
    fn build_index(&self, session: &str) -> Result<u32> {
        self.builds.lock().unwrap().push(session.into());
        Ok(31337)
    }
    fn search(&self, _s: &str, query: &str, k: usize, fusion: Fusion) -> Result<SearchResult> {
        self.searches.lock().unwrap().push((query.into(), fusion));
        let text = "नदी के किनारे एक पुराना मंदिर है जहाँ लोग आते हैं";
        let river = text.find("नदी").unwrap();
        let hits = (1..=k.min(4))
            .map(|r| Hit {
                rank: r,
                docno: format!("doc{r:03}"),
                label: format!("Juan 1:{r}"),
                score: 1.0 / r as f64,
                text: text.into(),
                spans: vec![(river, river + "नदी".len())],
                contributions: vec![("river".into(), 0.41 / r as f64), ("where".into(), 0.02)],
                rest: Some(0.0),
                aligned: Vec::new(),
                maxsim: None,
                relevant: Some(r == 2),
            })
            .collect();
        Ok(SearchResult {
            hits,
            query: rosetta::text::QueryWords {
                words: vec![rosetta::text::QueryWord {
                    word: "zzyzx".into(),
                    term: Some("zzyzx".into()),
                    dropped: Some(rosetta::text::Dropped::Vocabulary(
                        rosetta::text::Unknown::NotInTraining,
                    )),
                    ngrams: Vec::new(),
                }],
            },
            unanswerable: None,
            judged: (query == "where is the river").then(|| Judged {
                qid: "q7".into(),
                label: "q7".into(),
                rr: 0.5,
                ap: 0.5,
                relevant: 1,
            }),
            // a session searching by its HNSW graph, in the engine's words
            approximate: query
                .starts_with("approx")
                .then(|| "rosetta-hnsw 1 HNSW (M 16, efSearch 100), the best 100 documents".into()),
        })
    }
    fn document(&self, _s: &str, docno: &str, query: Option<&str>) -> Result<Document> {
        self.documents
            .lock()
            .unwrap()
            .push((docno.into(), query.map(String::from)));
        let r: usize = docno
            .strip_prefix("doc")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| Error::invalid(format!("no document {docno:?}")))?;
        // long enough to need scrolling at 80×24; the last word shows that
        // nothing is cut
        let mut text = String::new();
        for i in 1..=40 {
            text.push_str(&format!("नदी के किनारे एक पुराना मंदिर है ({i}). "));
        }
        text.push_str("अंत");
        let river = text.find("नदी").unwrap();
        Ok(Document {
            docno: docno.into(),
            label: format!("Juan 1:{r}"),
            lang: "hi".into(),
            spans: vec![(river, river + "नदी".len())],
            text,
            source: Some(format!(
                "By the river there is an old temple ({r}), the end."
            )),
            source_lang: "en".into(),
            source_spans: vec![(7, 12)],
        })
    }
    fn load_history(&self) -> Result<Vec<String>> {
        Ok(self.history.lock().unwrap().clone())
    }
    fn save_history(&self, queries: &[String]) -> Result<()> {
        *self.history.lock().unwrap() = queries.to_vec();
        Ok(())
    }
    fn neighbours(
        &self,
        session: &str,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult> {
        if term == "unknownword" {
            return Ok(NeighbourResult {
                dropped: Some(rosetta::text::Dropped::Vocabulary(
                    rosetta::text::Unknown::NotInTraining,
                )),
                ..Default::default()
            });
        }
        let (cross, own): (&[&str], &[&str]) = match side {
            Side::Source => (&["नदी", "दरिया", "पानी"], &["stream", "lake", "bank"]),
            Side::Target => (&["river", "stream", "water"], &["दरिया", "पानी", "झील"]),
        };
        let base =
            if session.ends_with("done") { 0.8 } else { 0.6 } + if csls { 0.05 } else { 0.0 };
        let mk = |ts: &[&str], gold_first: bool| {
            ts.iter()
                .take(k)
                .enumerate()
                .map(|(i, t)| Neighbour {
                    term: t.to_string(),
                    surface: t.to_string(),
                    score: base - 0.1 * i as f64,
                    gold: gold_first && i == 0,
                    ..Default::default()
                })
                .collect()
        };
        // a translation the model's vocabulary lacks: the engine gives the
        // dictionary's word beside the analysed term
        let (translations, translation_words) = if term == "watercolour" {
            (Some(vec!["acuarel".into()]), Some(vec!["acuarela".into()]))
        } else {
            (None, None)
        };
        Ok(NeighbourResult {
            known: true,
            cross: mk(cross, true),
            own: mk(own, false),
            translations,
            translation_words,
            ..Default::default()
        })
    }
    fn associations(&self, session: &str, options: &AssocOptions) -> Result<Associations> {
        self.associations
            .lock()
            .unwrap()
            .push((session.into(), *options));
        if session.starts_with("bm25") {
            return Err(Error::invalid(format!(
                "{session}: the lexical baseline has no embedding space"
            )));
        }
        let row =
            |s: &str, t: &str, score: f64, df: u32, dict: &[&str]| rosetta::session::Association {
                source: s.into(),
                target: t.into(),
                source_term: s.into(),
                target_term: t.into(),
                score,
                similarity: score,
                rank: if options.kind == AssocKind::New {
                    1
                } else {
                    17
                },
                source_df: df,
                target_df: df / 2,
                mutual: score > 0.7,
                nearest: (options.kind == AssocKind::Missed).then(|| "पानी".into()),
                dictionary: dict.iter().map(|d| d.to_string()).collect(),
            };
        let rows = match options.kind {
            AssocKind::New => vec![
                row("river", "दरिया", 0.81, 120, &["नदी"]),
                row("lake", "झील", 0.74, 300, &[]),
                row("bank", "किनारा", 0.52, 80, &["तट"]),
            ],
            AssocKind::Missed => vec![
                row("stream", "धारा", 0.12, 40, &["धारा"]),
                row("water", "जल", 0.21, 900, &["जल", "पानी"]),
            ],
        };
        Ok(Associations {
            kind: options.kind,
            csls: options.csls,
            source_lang: "en".into(),
            target_lang: "hi".into(),
            looked_up: 1000,
            k: options.k,
            rows,
            ..Default::default()
        })
    }
    fn export_associations(&self, t: &Associations, filter: &str, path: &Path) -> Result<usize> {
        let n = t.matching(filter).len();
        self.assoc_exported
            .lock()
            .unwrap()
            .push((path.to_path_buf(), filter.into(), n));
        Ok(n)
    }
    fn compare(
        &self,
        sessions: &[(String, String)],
        baseline: Option<&str>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Comparison> {
        for (i, (_, s)) in sessions.iter().enumerate() {
            progress(
                i as f64 / sessions.len() as f64,
                &format!("{s} ({}/{})", i + 1, sessions.len()),
            );
        }
        // every later session 0.1 MRR below the one before on each query (a
        // significant loss), P@1 up and down, MAP the same
        let systems: Vec<System> = sessions
            .iter()
            .enumerate()
            .map(|(i, (id, s))| System {
                name: s.clone(),
                detail: match self.sessions.lock().unwrap().iter().find(|x| &x.id == id) {
                    Some(x) if self.models_from_sessions => x.model.clone(),
                    _ => if i == 0 { "s2net" } else { "cl-lsi" }.into(),
                },
                // a session on another workspace is scored on another task
                task: Task {
                    name: if id.contains("other-ws") {
                        "other: ad-hoc collection".into()
                    } else {
                        "fake: derived ad-hoc task".into()
                    },
                    split: Some("test".into()),
                    queries: 4,
                    judgements: String::new(),
                    collection: String::new(),
                },
                texts: (0..4)
                    .map(|q| (format!("q{q}"), format!("query text {q}")))
                    .collect(),
                // verse references for three of the four
                labels: if self.query_labels.is_empty() {
                    (0..3)
                        .map(|q| (format!("q{q}"), format!("John 1:{}", q + 1)))
                        .collect()
                } else {
                    self.query_labels
                        .iter()
                        .enumerate()
                        .map(|(q, l)| (format!("q{q}"), l.clone()))
                        .collect()
                },
                per_query: [-0.02, 0.02, -0.01, 0.01]
                    .iter()
                    .enumerate()
                    .map(|(q, off)| {
                        let swing = if (q + i) % 2 == 0 { 0.1 } else { -0.1 };
                        let m = Metrics {
                            mrr: 0.5 - 0.1 * i as f64 + off,
                            p1: 0.4 - 0.05 * i as f64 + swing,
                            map: 0.3,
                            ..Default::default()
                        };
                        (format!("q{q}"), m)
                    })
                    .collect(),
            })
            .collect();
        // as many metrics as the real backend shows
        let options = CompareOptions {
            metrics: vec![
                Metric::Mrr,
                Metric::P1,
                Metric::Map,
                Metric::P10,
                Metric::Ndcg10,
            ],
            ..Default::default()
        };
        Comparison::build(&systems, baseline, &options)
    }
    fn judged_ranking(&self, session: &str, qid: &str, k: usize) -> Result<JudgedRanking> {
        self.rankings
            .lock()
            .unwrap()
            .push((session.into(), qid.into()));
        // the baseline finds the relevant verse first, the other third
        let first = if session == "s2net-done" { 1 } else { 3 };
        let hits: Vec<RankedDoc> = (1..=k.min(6))
            .map(|r| RankedDoc {
                rank: r,
                docno: format!("d{r}"),
                label: if r == first {
                    "Revelation of John 22:21".into()
                } else {
                    format!("{session} {r}")
                },
                score: 1.0 - r as f64 / 10.0,
                relevant: r == first,
                text: String::new(),
            })
            .collect();
        Ok(JudgedRanking {
            qid: qid.into(),
            label: qid.into(),
            text: "query text".into(),
            hits,
            relevant: vec![("Revelation of John 22:21".into(), Some(first))],
            depth: 100,
        })
    }
    fn export_compare(&self, t: &Comparison, path: &Path, format: TableFormat) -> Result<()> {
        assert!(!t.rows.is_empty());
        self.exported
            .lock()
            .unwrap()
            .push((path.to_path_buf(), format));
        Ok(())
    }
    fn session_detail(&self, session: &str) -> Result<RunDetail> {
        let s = self
            .sessions
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.id == session)
            .cloned()
            .ok_or_else(|| Error::invalid(format!("{session}: no such session")))?;
        Ok(RunDetail {
            id: s.id.clone(),
            dir: s.dir.clone(),
            config: "model = \"s2net\"\nseed = 1\n\n[params]\ndim = \"128\"\nlr = \"0.01\"\n"
                .into(),
            log_tail: (1..=30)
                .map(|i| format!("epoch {i}: loss 0.{i:02}"))
                .collect(),
            checkpoints: vec![rosetta::session::runs::CheckpointFile {
                name: "best.safetensors".into(),
                bytes: 2_500_000,
                modified: "2026-11-22T19:03:00Z".into(),
            }],
            best: [("MRR".to_string(), (0.5731, 3.0))].into(),
            state: s.state.as_str().into(),
            ..Default::default()
        })
    }
    fn log_tail(&self, session: &str, lines: usize) -> Result<Vec<String>> {
        if !self
            .sessions
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.id == session)
        {
            return Err(Error::invalid(format!("{session}: no such session")));
        }
        let mut all: Vec<String> = (1..=40)
            .map(|i| format!("2026-11-26T10:48:{i:02}Z {session} line {i}"))
            .collect();
        all.push(format!(
            "done: sessions/{session} (a long last line that the pane wraps rather than cuts)"
        ));
        Ok(all[all.len().saturating_sub(lines)..].to_vec())
    }
    fn set_meta(&self, session: &str, field: MetaField, value: &str) -> Result<()> {
        self.meta
            .lock()
            .unwrap()
            .push((session.into(), field, value.into()));
        for s in self.sessions.lock().unwrap().iter_mut() {
            if s.id == session {
                match field {
                    MetaField::Name => s.name = value.into(),
                    MetaField::Tags => {
                        s.tags = value.split_whitespace().map(String::from).collect()
                    }
                    MetaField::Note => s.note = value.into(),
                }
            }
        }
        Ok(())
    }
    fn delete(&self, session: &str) -> Result<()> {
        self.deleted.lock().unwrap().push(session.into());
        self.sessions.lock().unwrap().retain(|s| s.id != session);
        Ok(())
    }
    fn workspace_stats(&self, workspace: &str) -> Result<WorkspaceStats> {
        Ok(WorkspaceStats {
            path: workspace.into(),
            source_lang: "en".into(),
            target_lang: "hi".into(),
            splits: vec![
                SplitStats {
                    name: "train".into(),
                    size: 10000,
                    source_oov: Some(0.031),
                    target_oov: Some(0.052),
                },
                SplitStats {
                    name: "valid".into(),
                    size: 5000,
                    source_oov: Some(0.04),
                    target_oov: Some(0.061),
                },
                SplitStats {
                    name: "docs".into(),
                    size: 1190,
                    source_oov: None,
                    target_oov: Some(0.07),
                },
            ],
            figures: vec![
                ("vocabulary en / hi".into(), "10000 / 10000".into()),
                ("dictionary entries".into(), "31452".into()),
                ("dictionary coverage en".into(), "62.1%".into()),
            ],
        })
    }
}

fn settings() -> Settings {
    Settings::resolve(&ConfigFile::default(), None, true).unwrap()
}

fn app_with(fake: &Fake) -> App {
    let mut app = App::new(settings());
    app.pump_sync(fake);
    app.poll_metrics();
    app.pump_sync(fake);
    app
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}
fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}
fn code(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}
fn press(app: &mut App, fake: &dyn Backend, keys: &str) {
    for c in keys.chars() {
        app.on_key(key(c));
        app.pump_sync(fake);
    }
}
fn press_code(app: &mut App, fake: &Fake, c: KeyCode) {
    app.on_key(code(c));
    app.pump_sync(fake);
}

fn render(app: &mut App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    t.backend().to_string()
}

// ---------------------------------------------------------------- snapshots

#[test]
fn snapshot_jobs_empty() {
    let fake = Fake::default();
    let mut app = app_with(&fake);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_jobs_running() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    fake.set_metrics("s2net-run", metrics(180, 2));
    let mut app = app_with(&fake);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_jobs_running_wide() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    fake.set_metrics("s2net-run", metrics(180, 2));
    let mut app = app_with(&fake);
    insta::assert_snapshot!(render(&mut app, 120, 30));
}

#[test]
fn snapshot_jobs_finished() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    fake.set_metrics("s2net-done", metrics(240, 3));
    let mut app = app_with(&fake);
    press(&mut app, &fake, "j");
    assert_eq!(app.jobs.selected.as_deref(), Some("s2net-done"));
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_jobs_failed() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "G");
    assert_eq!(app.jobs.selected.as_deref(), Some("cl-lsi-failed"));
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_jobs_overlay() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    fake.set_metrics("s2net-run", metrics(180, 2));
    fake.set_metrics("s2net-done", metrics(240, 3));
    let mut app = app_with(&fake);
    press(&mut app, &fake, " j w");
    assert_eq!(app.jobs.marked.len(), 2);
    assert!(app.jobs.full_history);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_form() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "n");
    // clear the epochs field and type a bad value
    press_code(&mut app, &fake, KeyCode::Tab);
    press_code(&mut app, &fake, KeyCode::Tab);
    press_code(&mut app, &fake, KeyCode::Tab);
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(&mut app, &fake, "zero");
    press_code(&mut app, &fake, KeyCode::Enter);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_search_results() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "2s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "/where is the river");
    press_code(&mut app, &fake, KeyCode::Enter);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn an_approximate_ranking_says_so_in_the_results_title() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "2s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "/where is the river");
    press_code(&mut app, &fake, KeyCode::Enter);
    let screen = render(&mut app, 80, 24);
    assert!(
        screen.contains("Results for “where is the river”"),
        "{screen}"
    );
    assert!(!screen.contains("HNSW"), "an exact ranking: {screen}");
    press_code(&mut app, &fake, KeyCode::Esc);
    press(&mut app, &fake, "/");
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(&mut app, &fake, "approx river");
    press_code(&mut app, &fake, KeyCode::Enter);
    let screen = render(&mut app, 80, 24);
    assert!(
        screen.contains("Results for “approx river” ≈ HNSW"),
        "{screen}"
    );
}

/// A session chosen and "where is the river" searched.
fn searched(fake: &Fake) -> App {
    let mut app = app_with(fake);
    press(&mut app, fake, "2s");
    press_code(&mut app, fake, KeyCode::Enter);
    press(&mut app, fake, "/where is the river");
    press_code(&mut app, fake, KeyCode::Enter);
    app
}

#[test]
fn snapshot_search_document() {
    let fake = Fake::with(vec![done()]);
    let mut app = searched(&fake);
    press(&mut app, &fake, "j");
    press_code(&mut app, &fake, KeyCode::Enter);
    insta::assert_snapshot!("search_document_80x24", render(&mut app, 80, 24));
    insta::assert_snapshot!("search_document_160x48", render(&mut app, 160, 48));
}

#[test]
fn enter_opens_the_document_and_j_scrolls() {
    let fake = Fake::with(vec![done()]);
    let mut app = searched(&fake);
    assert!(!app.search.editing);
    press(&mut app, &fake, "j");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(!app.search.editing, "Enter does not edit the query");
    let v = app.search.doc.as_ref().expect("the document view is open");
    assert_eq!((v.hit, v.docno.as_str()), (1, "doc002"));
    assert_eq!(
        fake.documents.lock().unwrap().last().cloned(),
        Some(("doc002".into(), Some("where is the river".into())))
    );
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("Juan 1:2"), "{screen}");
    assert!(
        screen.contains("aligned source") || screen.contains("lines 1–"),
        "{screen}"
    );
    // j scrolls the document; the query is untouched
    press(&mut app, &fake, "jj");
    assert_eq!(app.search.query, "where is the river");
    assert_eq!(app.search.doc.as_ref().unwrap().scroll, 2);
    press(&mut app, &fake, "k");
    assert_eq!(app.search.doc.as_ref().unwrap().scroll, 1);
    // the end is reachable: the whole text and the English side are there
    press(&mut app, &fake, "G");
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("अंत"), "the document's last word: {screen}");
    assert!(
        screen.contains("By the river there is an old temple (2)"),
        "{screen}"
    );
    let (lines, rows) = app.search.doc.as_ref().unwrap().extent.get();
    assert!(lines > rows, "the fixture needs scrolling");
    assert_eq!(app.search.doc.as_ref().unwrap().scroll, lines - rows);
    press(&mut app, &fake, "j");
    assert_eq!(
        app.search.doc.as_ref().unwrap().scroll,
        lines - rows,
        "no scrolling past the end"
    );
    // l: the next result's document
    press(&mut app, &fake, "l");
    assert_eq!(app.search.doc.as_ref().unwrap().docno, "doc003");
    assert_eq!(app.search.selected, 2);
    // Esc: back to the results, the selection kept
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(app.search.doc.is_none());
    assert_eq!(app.search.selected, 2);
    assert!(!app.search.editing);
    // / still edits the query
    press(&mut app, &fake, "/");
    assert!(app.search.editing);
}

#[test]
fn queries_are_recalled_and_recorded() {
    let fake = Fake::with(vec![done()]);
    fake.history.lock().unwrap().push("light of men".into());
    let mut app = searched(&fake);
    // the recorded history was read at start; the new query is the newest
    assert_eq!(
        app.search.history,
        vec!["light of men", "where is the river"]
    );
    assert_eq!(
        *fake.history.lock().unwrap(),
        vec!["light of men", "where is the river"],
        "recorded through the backend"
    );
    press(&mut app, &fake, "/");
    app.on_key(ctrl('u'));
    press(&mut app, &fake, "dra");
    press_code(&mut app, &fake, KeyCode::Up);
    assert_eq!(app.search.query, "where is the river");
    press_code(&mut app, &fake, KeyCode::Up);
    assert_eq!(app.search.query, "light of men");
    press_code(&mut app, &fake, KeyCode::Up);
    assert_eq!(app.search.query, "light of men", "the oldest stays");
    press_code(&mut app, &fake, KeyCode::Down);
    press_code(&mut app, &fake, KeyCode::Down);
    assert_eq!(app.search.query, "dra", "back to what was typed");
    press_code(&mut app, &fake, KeyCode::Up);
    press_code(&mut app, &fake, KeyCode::Up);
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(
        fake.searches.lock().unwrap().last().unwrap().0,
        "light of men"
    );
    assert_eq!(
        *fake.history.lock().unwrap(),
        vec!["where is the river", "light of men"],
        "a recalled query moves to the newest"
    );
}

#[test]
fn snapshot_search_empty() {
    let fake = Fake::default();
    let mut app = app_with(&fake);
    press(&mut app, &fake, "2");
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_neighbours_side_by_side() {
    let fake = Fake::with(vec![done(), running()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "3s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "S");
    press_code(&mut app, &fake, KeyCode::Down);
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "/river");
    press_code(&mut app, &fake, KeyCode::Enter);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_compare() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4b");
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

/// The footer gives the selected cell's test against the baseline.
#[test]
fn compare_footer_shows_the_selected_test() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4bllj"); // MRR column, the second row
    let screen = render(&mut app, 120, 24);
    assert!(
        screen.contains("p <.0001 · -0.100 [-0.100, -0.100] d=— · wins/ties/losses 0/0/4"),
        "the difference, its interval and d from the engine: {screen}"
    );
    press(&mut app, &fake, "k"); // the baseline: no test of its own
    assert!(!render(&mut app, 120, 24).contains("wins/ties/losses"));
}

#[test]
fn snapshot_data() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "5");
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

#[test]
fn snapshot_too_small() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    insta::assert_snapshot!(render(&mut app, 79, 20));
}

#[test]
fn snapshot_confirm_quit() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "n");
    for _ in 0..40 {
        app.on_key(code(KeyCode::Backspace));
    }
    press(&mut app, &fake, "ws.toml");
    press_code(&mut app, &fake, KeyCode::Enter);
    app.poll_sessions();
    app.pump_sync(&fake);
    press(&mut app, &fake, "q");
    assert!(!app.quit);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

// ------------------------------------------------------------ key handling

#[test]
fn tabs_by_number_tab_and_mouse() {
    let fake = Fake::default();
    let mut app = app_with(&fake);
    press(&mut app, &fake, "3");
    assert_eq!(app.tab, Tab::Neighbours);
    press_code(&mut app, &fake, KeyCode::Tab);
    assert_eq!(app.tab, Tab::Compare);
    press_code(&mut app, &fake, KeyCode::BackTab);
    press_code(&mut app, &fake, KeyCode::BackTab);
    assert_eq!(app.tab, Tab::Search);
    press(&mut app, &fake, "1");
    let _ = render(&mut app, 80, 24); // records where the tabs are
    let (x0, _) = app.tab_hits[4];
    app.on_event(Event::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: x0 + 1,
        row: 0,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(app.tab, Tab::Data);
}

#[test]
fn quit_without_jobs_is_immediate_and_ctrl_c_quits() {
    let fake = Fake::with(vec![running()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "q");
    assert!(app.quit, "jobs not started here do not hold quitting");
    let mut app = app_with(&fake);
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert!(app.quit);
}

fn launch_one(app: &mut App, fake: &Fake) {
    press(app, fake, "n");
    for _ in 0..40 {
        app.on_key(code(KeyCode::Backspace));
    }
    press(app, fake, "ws.toml");
    press_code(app, fake, KeyCode::Enter);
    app.poll_sessions();
    app.pump_sync(fake);
}

#[test]
fn quit_asks_when_started_jobs_run_then_cancels() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    launch_one(&mut app, &fake);
    assert!(app.started.contains("s2net-new"));
    press(&mut app, &fake, "q");
    assert!(matches!(app.popup, Some(Popup::ConfirmQuit(_))));
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(!app.popup_open() && !app.quit);
    press(&mut app, &fake, "q");
    app.on_key(key('c'));
    assert!(app.quit);
    assert_eq!(
        app.take_requests(),
        vec![Request::Jobs(crate::tui::screens::jobs::Request::Cancel(
            "s2net-new".into()
        ))]
    );
}

#[test]
fn quit_can_leave_jobs_running() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    launch_one(&mut app, &fake);
    press(&mut app, &fake, "ql");
    assert!(app.quit);
    assert!(fake.cancelled.lock().unwrap().is_empty());
}

#[test]
fn form_validates_then_launches_with_args() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "n");
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("no form")
    };
    assert_eq!(
        f.fields[0].value, "tests/fixtures/corpus/tiny/workspace.toml",
        "the newest session's workspace is the default"
    );
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    // empty workspace and a bad device are refused, nothing launched
    for _ in 0..6 {
        press_code(&mut app, &fake, KeyCode::Tab);
    }
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(&mut app, &fake, "gpu");
    press_code(&mut app, &fake, KeyCode::Enter);
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("form closed")
    };
    assert!(f.fields[0].error.is_some());
    assert!(f.fields[6].error.is_some());
    assert_eq!(f.focus, 0, "focus jumps to the first bad field");
    assert!(fake.launched.lock().unwrap().is_empty());
    // fix both, init from a session
    press(&mut app, &fake, "ws.toml");
    for _ in 0..6 {
        press_code(&mut app, &fake, KeyCode::Tab);
    }
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(&mut app, &fake, "cuda:1");
    press_code(&mut app, &fake, KeyCode::Tab);
    press(&mut app, &fake, "s2net-done");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(!app.popup_open(), "form closes after launch");
    let launched = fake.launched.lock().unwrap().clone();
    assert_eq!(launched.len(), 1);
    let spec = &launched[0];
    assert_eq!(spec.workspace, "ws.toml");
    assert_eq!(spec.device, rosetta::models::DeviceSpec::Cuda(1));
    assert_eq!(spec.init.as_deref(), Some("s2net-done"));
    assert_eq!((spec.dim, spec.epochs, spec.lr), (Some(128), None, None));
    let req = spec.request(std::path::Path::new("sessions"));
    assert_eq!(req.device, rosetta::models::DeviceSpec::Cuda(1));
    assert_eq!(
        req.settings.get("init").map(String::as_str),
        Some("sessions/s2net-done")
    );
    assert!(
        !req.settings.contains_key("epochs") && req.session.is_none(),
        "defaults are not passed"
    );
    assert_eq!(req.root, std::path::Path::new("sessions"));
    assert_eq!(app.jobs.selected.as_deref(), Some("s2net-new"));
}

#[test]
fn duplicate_prefills_from_session() {
    let mut fake = Fake::with(vec![done()]);
    fake.spec = Some(JobSpec {
        workspace: "w.toml".into(),
        model: "cl-lsi".into(),
        dim: Some(300),
        ..Default::default()
    });
    let mut app = app_with(&fake);
    press(&mut app, &fake, "d");
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("no form")
    };
    assert_eq!(f.fields[0].value, "w.toml");
    assert_eq!(f.fields[1].value, "cl-lsi");
    assert_eq!(f.fields[2].value, "300");
}

#[test]
fn detail_pane_opens_on_enter_scrolls_and_closes() {
    let fake = Fake::with(vec![done(), failed()]);
    let mut app = app_with(&fake);
    press_code(&mut app, &fake, KeyCode::Enter);
    let Some(JobsPopup::Detail {
        session, detail, ..
    }) = &app.jobs.popup
    else {
        panic!("Enter opens the detail pane: {:?}", app.jobs.popup);
    };
    assert_eq!(session, "s2net-done");
    assert!(matches!(detail, Some(Ok(_))));
    let screen = render(&mut app, 80, 24);
    assert!(
        screen.contains("Best figures") && screen.contains("0.5731"),
        "{screen}"
    );
    assert!(screen.contains("best.safetensors") && screen.contains("config.toml"));
    insta::assert_snapshot!(screen);
    // j scrolls (it is not typed anywhere), G goes to the log's end
    press(&mut app, &fake, "jjj");
    assert!(matches!(
        app.jobs.popup,
        Some(JobsPopup::Detail { scroll: 3, .. })
    ));
    press(&mut app, &fake, "G");
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("epoch 30: loss 0.30"), "{screen}");
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(!app.popup_open());
    assert_eq!(
        app.jobs.selected.as_deref(),
        Some("s2net-done"),
        "selection kept"
    );
}

#[test]
fn delete_asks_first_and_refuses_a_running_job() {
    let fake = Fake::with(vec![running(), done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "D");
    assert!(
        !app.popup_open(),
        "a running job is not offered for deletion"
    );
    assert!(
        matches!(&app.message, Some(crate::tui::app::Message::Error(m)) if m.contains("cancel"))
    );
    press(&mut app, &fake, "jD");
    assert_eq!(
        app.jobs.popup,
        Some(JobsPopup::ConfirmDelete("s2net-done".into()))
    );
    insta::assert_snapshot!(render(&mut app, 80, 24));
    press(&mut app, &fake, "n");
    assert!(!app.popup_open() && fake.deleted.lock().unwrap().is_empty());
    press(&mut app, &fake, " D");
    assert!(app.jobs.marked.contains("s2net-done"));
    press(&mut app, &fake, "y");
    assert_eq!(
        *fake.deleted.lock().unwrap(),
        vec!["s2net-done".to_string()]
    );
    assert!(app.jobs.sessions.iter().all(|s| s.id != "s2net-done"));
    assert!(app.jobs.marked.is_empty(), "its mark goes with it");
}

#[test]
fn rename_tag_and_note_go_to_the_engine_and_names_show() {
    let fake = Fake::with(vec![done(), failed()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "R");
    assert!(matches!(
        app.jobs.popup,
        Some(JobsPopup::EditMeta {
            field: MetaField::Name,
            ..
        })
    ));
    press(&mut app, &fake, "lr 0.01 run");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "#good");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(
        *fake.meta.lock().unwrap(),
        vec![
            (
                "s2net-done".to_string(),
                MetaField::Name,
                "lr 0.01 run".to_string()
            ),
            (
                "s2net-done".to_string(),
                MetaField::Tags,
                "good".to_string()
            )
        ]
    );
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("lr 0.01 run [good]"), "{screen}");
    // the filter finds it by tag, and by a figure threshold
    press(&mut app, &fake, "/tag=good");
    assert_eq!(app.jobs.visible().len(), 1);
    press_code(&mut app, &fake, KeyCode::Esc);
    app.jobs.filter = "mrr>0.5".into();
    assert_eq!(app.jobs.visible().len(), 1);
    app.jobs.filter = "mrr>".into();
    assert_eq!(
        app.jobs.visible().len(),
        2,
        "a half-typed filter hides nothing"
    );
}

#[test]
fn differing_settings_are_columns_and_labels_stay_distinct() {
    let mut a = done();
    a.id = "s2net-20261122-190301".into();
    a.settings = [
        ("lr".to_string(), "0.01".to_string()),
        ("dim".into(), "128".into()),
    ]
    .into();
    let mut b = done();
    b.id = "s2net-20261122-190455".into();
    b.settings = [
        ("lr".to_string(), "0.02".to_string()),
        ("dim".into(), "128".into()),
    ]
    .into();
    let fake = Fake::with(vec![a, b]);
    fake.set_metrics("s2net-20261122-190301", metrics(100, 2));
    fake.set_metrics("s2net-20261122-190455", metrics(120, 2));
    let mut app = app_with(&fake);
    press(&mut app, &fake, " j ");
    let screen = render(&mut app, 80, 24);
    assert!(
        screen.contains(" lr ") && screen.contains("0.02"),
        "{screen}"
    );
    assert!(
        !screen.contains(" dim "),
        "equal settings are no column: {screen}"
    );
    assert!(
        screen.contains("…190301") && screen.contains("…190455"),
        "{screen}"
    );
    insta::assert_snapshot!(screen);
    // log scale, epoch axis: titles say so
    press(&mut app, &fake, "Lx");
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("loss · epochs"), "{screen}");
    assert!(screen.contains("· log"), "{screen}");
}

/// Two S2Net and two CCA runs: a setting only one model has is no
/// difference; the names stay whole; `S` sorts the table by a column.
#[test]
fn jobs_with_mixed_models_show_differences_within_each_model() {
    let run = |id: &str, model: &str, name: &str, settings: &[(&str, &str)]| {
        let mut s = summary(id, State::Done);
        s.model = model.into();
        s.name = name.into();
        s.best_mrr = Some(0.5);
        s.settings = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([("model".to_string(), model.to_string())])
            .collect();
        s
    };
    let s2 = [
        ("batch", "100"),
        ("epochs", "10"),
        ("gamma", "10"),
        ("lr", "0.001"),
    ];
    let cca = [("dim", "128"), ("reg", "0.1")];
    let fake = Fake::with(vec![
        run("s2net-a", "s2net", "s2net gamma 10", &s2),
        run(
            "s2net-b",
            "s2net",
            "s2net gamma 20",
            &[
                ("batch", "100"),
                ("epochs", "10"),
                ("gamma", "20"),
                ("lr", "0.001"),
            ],
        ),
        run("cca-a", "cca", "cca reg 0.1", &cca),
        run(
            "cca-b",
            "cca",
            "cca reg 0.3",
            &[("dim", "128"), ("reg", "0.3")],
        ),
    ]);
    let mut app = app_with(&fake);
    let screen = render(&mut app, 100, 24);
    for col in [" gamma ", " reg "] {
        assert!(screen.contains(col), "{col}: {screen}");
    }
    for col in [" batch ", " epochs ", " dim ", " lr "] {
        assert!(!screen.contains(col), "{col} is no difference: {screen}");
    }
    for name in [
        "s2net gamma 10",
        "s2net gamma 20",
        "cca reg 0.1",
        "cca reg 0.3",
    ] {
        assert!(screen.contains(name), "{name}: {screen}");
    }
    // S: by name, ascending then descending, then by model...
    press(&mut app, &fake, "S");
    let order: Vec<String> = app.jobs.visible().iter().map(|s| s.name.clone()).collect();
    assert_eq!(
        order,
        [
            "cca reg 0.1",
            "cca reg 0.3",
            "s2net gamma 10",
            "s2net gamma 20"
        ]
    );
    assert!(render(&mut app, 100, 24).contains("by name ↑"));
    press(&mut app, &fake, "S");
    assert_eq!(app.jobs.visible()[0].name, "s2net gamma 20");
    // to the gamma column, descending: the run without it last
    while app.jobs.sort != Some(("gamma".into(), true)) {
        press(&mut app, &fake, "S");
    }
    let order: Vec<String> = app.jobs.visible().iter().map(|s| s.name.clone()).collect();
    assert_eq!(&order[..2], ["s2net gamma 20", "s2net gamma 10"]);
}

#[test]
fn log_pane_follows_the_selected_job_beside_the_curves() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    fake.set_metrics("s2net-run", metrics(180, 2));
    let mut app = app_with(&fake);
    let screen = render(&mut app, 80, 24);
    assert!(!screen.contains("log.txt"), "{screen}");
    press(&mut app, &fake, "o");
    // narrow: the loss chart, the log in the validation chart's place
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("log.txt · o hide"), "{screen}");
    // the stamp as a time of day, the long last line wrapped, not cut
    assert!(screen.contains("10:48:40 s2net-run line 40"), "{screen}");
    assert!(!screen.contains("2026-11-26T"), "{screen}");
    assert!(screen.contains("cuts)"), "{screen}");
    assert!(
        !screen.contains("s2net-run line 1 "),
        "only the end fits: {screen}"
    );
    assert!(screen.contains("loss ·"), "{screen}");
    assert!(!screen.contains(" MRR ·"), "{screen}");
    // wide: loss, validation and log side by side
    let screen = render(&mut app, 160, 48);
    assert!(screen.contains("log.txt · o hide"), "{screen}");
    assert!(screen.contains(" MRR ·"), "{screen}");
    assert!(screen.contains("Training loss"), "{screen}");
    // it follows the selection
    press(&mut app, &fake, "j");
    app.poll_metrics();
    app.pump_sync(&fake);
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("10:48:40 s2net-done line 40"), "{screen}");
    press(&mut app, &fake, "o");
    let screen = render(&mut app, 80, 24);
    assert!(!screen.contains("log.txt"), "{screen}");
    assert!(app.jobs.log.is_none());
}

#[test]
fn loss_title_fits_80_columns() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    fake.set_metrics("s2net-run", metrics(180, 2));
    let mut app = app_with(&fake);
    press(&mut app, &fake, "L");
    let screen = render(&mut app, 80, 24);
    // the title is whole: its closing space before the border corner
    let line = screen
        .lines()
        .find(|l| l.contains("loss ·"))
        .expect("loss chart title");
    assert!(
        line.contains("┌ loss · steps 1–180 · log · EMA 0.9 ─"),
        "{line}"
    );
}

#[test]
fn alerts_ring_when_a_job_ends_or_diverges() {
    let fake = Fake::with(vec![running()]);
    let mut app = app_with(&fake);
    assert!(!app.bell);
    let mut r = running();
    r.divergence = Some("loss is not finite (NaN or ∞) at step 40".into());
    *fake.sessions.lock().unwrap() = vec![r];
    app.poll_sessions();
    app.pump_sync(&fake);
    assert!(std::mem::take(&mut app.bell));
    assert!(
        matches!(&app.message, Some(crate::tui::app::Message::Error(m)) if m.contains("diverging"))
    );
    *fake.sessions.lock().unwrap() = vec![SessionSummary {
        state: State::Done,
        ..running()
    }];
    app.poll_sessions();
    app.pump_sync(&fake);
    assert!(std::mem::take(&mut app.bell));
    assert!(matches!(&app.message, Some(crate::tui::app::Message::Info(m)) if m.contains("done")));
    // the setting turns the bell off, the message stays
    app.settings.bell = false;
    *fake.sessions.lock().unwrap() = vec![running()];
    app.poll_sessions();
    app.pump_sync(&fake);
    *fake.sessions.lock().unwrap() = vec![SessionSummary {
        state: State::Failed,
        ..running()
    }];
    app.poll_sessions();
    app.pump_sync(&fake);
    assert!(!app.bell);
    assert!(
        matches!(&app.message, Some(crate::tui::app::Message::Error(m)) if m.contains("failed"))
    );
}

#[test]
fn marks_and_baseline_are_remembered_across_launches() {
    let dir = tempfile::tempdir().unwrap();
    let mut st = settings();
    st.state_file = Some(dir.path().join("workbench.json"));
    let fake = Fake::with(vec![running(), done()]);
    let mut app = App::new(st.clone());
    app.restore_ui_state();
    app.pump_sync(&fake);
    press(&mut app, &fake, "j ");
    app.compare.baseline = Some("s2net-run".into());
    app.persist_ui_state();
    app.pump_sync(&fake);
    let mut again = App::new(st);
    again.restore_ui_state();
    assert!(again.jobs.marked.contains("s2net-done"));
    assert_eq!(again.compare.baseline.as_deref(), Some("s2net-run"));
}

#[test]
fn cancel_asks_and_resume_only_stopped() {
    let fake = Fake::with(vec![running(), failed(), done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "c");
    assert!(matches!(app.jobs.popup, Some(JobsPopup::ConfirmCancel(_))));
    press(&mut app, &fake, "y");
    assert_eq!(
        *fake.cancelled.lock().unwrap(),
        vec!["s2net-run".to_string()]
    );
    press(&mut app, &fake, "r");
    assert!(
        fake.resumed.lock().unwrap().is_empty(),
        "a running job is not resumed"
    );
    press(&mut app, &fake, "jr");
    assert_eq!(
        *fake.resumed.lock().unwrap(),
        vec!["cl-lsi-failed".to_string()]
    );
    press(&mut app, &fake, "jc");
    assert!(!app.popup_open(), "a done job cannot be cancelled");
}

#[test]
fn filter_narrows_the_list_and_esc_clears() {
    let fake = Fake::with(vec![running(), failed(), done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "/cl-");
    assert_eq!(app.jobs.visible().len(), 1);
    assert_eq!(app.jobs.selected.as_deref(), Some("cl-lsi-failed"));
    // while typing, q is text, not quit
    press(&mut app, &fake, "q");
    assert!(!app.quit);
    assert_eq!(app.jobs.filter, "cl-q");
    press_code(&mut app, &fake, KeyCode::Esc);
    press_code(&mut app, &fake, KeyCode::Esc);
    assert_eq!(app.jobs.visible().len(), 3);
}

#[test]
fn metrics_are_tailed_incrementally() {
    let fake = Fake::with(vec![running()]);
    let all = metrics(10, 1);
    fake.set_metrics("s2net-run", all[..4].to_vec());
    let mut app = app_with(&fake);
    assert_eq!(app.jobs.series["s2net-run"].curves.loss.len(), 4);
    fake.set_metrics("s2net-run", all.clone());
    app.poll_metrics();
    app.pump_sync(&fake);
    let s = &app.jobs.series["s2net-run"];
    assert_eq!(s.curves.loss.len(), 10, "only the new records are added");
    assert_eq!(s.curves.valid.len(), 1);
    assert_eq!(s.offset, all.len() as u64);
    // replaced by a shorter history: start over
    fake.set_metrics("s2net-run", metrics(3, 1));
    app.poll_metrics();
    app.pump_sync(&fake);
    assert_eq!(app.jobs.series["s2net-run"].curves.loss.len(), 3);
}

#[test]
fn search_flow_fusion_and_lambda() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    // nothing selected on Jobs: Search starts with no session
    app.jobs.selected = None;
    press(&mut app, &fake, "2/river");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(fake.searches.lock().unwrap().is_empty(), "no session yet");
    press(&mut app, &fake, "s");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(matches!(app.search.index, IndexState::Ready(_)));
    // the query typed before the index was ready runs once it is
    assert_eq!(fake.searches.lock().unwrap().len(), 1);
    press(&mut app, &fake, "f");
    press(&mut app, &fake, "]");
    let last = fake.searches.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last.1, Fusion::Linear { lambda: 0.4 });
    press(&mut app, &fake, "f");
    assert_eq!(
        fake.searches.lock().unwrap().last().unwrap().1,
        Fusion::Rrf { k: 60.0 }
    );
    assert_eq!(app.search.result.as_ref().unwrap().hits.len(), 4);
    press(&mut app, &fake, "jj");
    assert_eq!(app.search.selected, 2);
    // e: the workspace's judged query, with RR and AP
    press(&mut app, &fake, "e");
    assert_eq!(app.search.query, "where is the river");
    assert_eq!(
        app.search
            .result
            .as_ref()
            .unwrap()
            .judged
            .as_ref()
            .unwrap()
            .qid,
        "q7"
    );
}

#[test]
fn neighbours_follow_and_history() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "3s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "/river");
    press_code(&mut app, &fake, KeyCode::Enter);
    let r = app.neigh.panes[0].result.clone().unwrap();
    assert_eq!(r.cross[0].term, "नदी");
    assert!(r.cross[0].gold);
    // follow the second cross-language neighbour: it becomes the query, in the other language
    press(&mut app, &fake, "j");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(app.neigh.query, "दरिया");
    assert_eq!(app.neigh.side, Side::Target);
    assert_eq!(
        app.neigh.panes[0].result.as_ref().unwrap().cross[0].term,
        "river"
    );
    // own-language list keeps the side
    press(&mut app, &fake, "o");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(app.neigh.query, "दरिया");
    assert_eq!(app.neigh.side, Side::Target);
    assert_eq!(app.neigh.history.len(), 2, "same term twice is one entry");
    press(&mut app, &fake, "b");
    assert_eq!(
        (app.neigh.query.as_str(), app.neigh.side),
        ("river", Side::Source)
    );
    press(&mut app, &fake, "f");
    assert_eq!(app.neigh.query, "दरिया");
    press(&mut app, &fake, "c");
    assert!(app.neigh.csls);
}

/// `a` switches the Neighbours screen between word lookup and the
/// association table of the chosen session; the table sorts, filters,
/// scrolls, switches kind and CSLS (asking again), exports what is shown,
/// and Enter looks a row's source word up.
#[test]
fn neighbours_association_mode() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "3s");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(fake.associations.lock().unwrap().is_empty());
    press(&mut app, &fake, "a");
    assert!(app.neigh.assoc.on);
    {
        let asked = fake.associations.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(asked[0].0, "s2net-done");
        assert_eq!(asked[0].1.kind, AssocKind::New);
        assert!(!asked[0].1.csls);
    }
    let shown = |app: &App| -> Vec<String> {
        app.neigh
            .assoc
            .shown()
            .iter()
            .map(|r| r.source.clone())
            .collect()
    };
    // by score, then by source frequency
    assert_eq!(shown(&app), ["river", "lake", "bank"]);
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("Associations"), "{screen}");
    assert!(
        screen.contains("दरिया") && screen.contains("(no entry)"),
        "{screen}"
    );
    press(&mut app, &fake, "O");
    assert_eq!(app.neigh.assoc.sort, AssocSort::Freq);
    assert_eq!(shown(&app), ["lake", "river", "bank"]);
    // scrolling stops at the last row
    press(&mut app, &fake, "jjjj");
    assert_eq!(app.neigh.assoc.selected, 2);
    // the filter keeps matching rows (dictionary entries too)
    press(&mut app, &fake, "/तट");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(shown(&app), ["bank"]);
    assert_eq!(app.neigh.assoc.selected, 0);
    // export what is shown to a typed path
    press(&mut app, &fake, "x");
    assert_eq!(app.neigh.assoc.path, "associations-new.tsv");
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press(&mut app, &fake, "out/bank.tsv");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(
        fake.assoc_exported.lock().unwrap().as_slice(),
        [(PathBuf::from("out/bank.tsv"), "तट".to_string(), 1)]
    );
    assert!(
        matches!(&app.message, Some(crate::tui::app::Message::Info(m)) if m.contains("wrote 1 rows")),
        "{:?}",
        app.message
    );
    // missed pairs, then CSLS: asked again each time
    press(&mut app, &fake, "m");
    press(&mut app, &fake, "c");
    {
        let asked = fake.associations.lock().unwrap();
        assert_eq!(asked.len(), 3);
        assert_eq!(asked[1].1.kind, AssocKind::Missed);
        assert!(!asked[1].1.csls);
        assert_eq!(asked[2].1.kind, AssocKind::Missed);
        assert!(asked[2].1.csls);
    }
    assert_eq!(
        app.neigh.assoc.table.as_ref().unwrap().kind,
        AssocKind::Missed
    );
    // the filter still applies: no missed row matches it
    assert!(shown(&app).is_empty());
    press(&mut app, &fake, "/");
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL));
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(shown(&app), ["water", "stream"], "freq order kept");
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("dictionary pairs missed"), "{screen}");
    // Enter looks the selected row's source word up, back in lookup mode
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(!app.neigh.assoc.on);
    assert_eq!(app.neigh.query, "water");
    assert!(app.neigh.panes[0].result.is_some());
    // back to the table: nothing is asked again
    press(&mut app, &fake, "a");
    assert_eq!(fake.associations.lock().unwrap().len(), 3);
    press(&mut app, &fake, "a");
    assert!(!app.neigh.assoc.on);
}

#[test]
fn snapshot_neighbours_associations() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "3s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "aj");
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

/// A lexical baseline's association table is an error shown in the screen.
#[test]
fn neighbours_associations_of_a_lexical_baseline() {
    let fake = Fake::with(vec![summary("bm25-done", State::Done)]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "3s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "a");
    assert!(app.neigh.assoc.table.is_none());
    let e = app.neigh.assoc.error.clone().unwrap();
    assert!(e.contains("no embedding space"), "{e}");
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("no embedding space"), "{screen}");
    press(&mut app, &fake, "x");
    assert!(app.neigh.assoc.input.is_none(), "nothing to export");
}

/// Answers `reqs` in order, then a session rescan and a metrics tail that
/// bring nothing new, all before the next frame (as the event loop takes a
/// batch of queued replies between two draws).
fn answer_then_quiet_replies(app: &mut App, fake: &Fake, reqs: Vec<Request>) {
    for r in reqs {
        app.on_reply(crate::tui::app::execute(fake, r, &|_| {}));
    }
    app.poll_sessions();
    app.poll_metrics();
    let quiet = app.take_requests();
    assert!(
        quiet.iter().any(|r| matches!(
            r,
            Request::Jobs(crate::tui::screens::jobs::Request::ListSessions)
        )),
        "{quiet:?}"
    );
    for r in quiet {
        app.on_reply(crate::tui::app::execute(fake, r, &|_| {}));
    }
}

/// Issue 6: an answer that arrived but was not drawn yet must survive quiet
/// replies (an unchanged session list, no new metrics) that follow it before
/// the next frame. They used to clear the redraw flag, so the workbench sat
/// at "looking up…" (or without its "N documents" line) with the answer in
/// hand until something else changed.
#[test]
fn quiet_replies_do_not_swallow_an_undrawn_answer() {
    let fake = Fake::with(vec![done()]);
    fake.set_metrics("s2net-done", metrics(4, 2));
    let mut app = app_with(&fake);
    // nothing selected on Jobs: the screens start with no session
    app.jobs.selected = None;

    // neighbours
    press(&mut app, &fake, "3s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "/river");
    app.on_key(code(KeyCode::Enter));
    let reqs = app.take_requests();
    assert!(matches!(reqs[..], [Request::Neighbours { .. }]), "{reqs:?}");
    assert!(render(&mut app, 100, 30).contains("looking up"));
    app.dirty = false; // the event loop drew that frame
    answer_then_quiet_replies(&mut app, &fake, reqs);
    assert!(app.dirty, "the neighbours answer was never drawn");
    let screen = render(&mut app, 100, 30);
    assert!(!screen.contains("looking up"), "{screen}");
    assert!(screen.contains("other language"), "{screen}");

    // the search index (again nothing selected on Jobs)
    app.jobs.selected = None;
    press(&mut app, &fake, "2s");
    app.on_key(code(KeyCode::Enter));
    let reqs = app.take_requests();
    assert!(
        matches!(
            reqs[..],
            [Request::Search(
                crate::tui::screens::search::Request::LoadIndex(_)
            )]
        ),
        "{reqs:?}"
    );
    render(&mut app, 100, 30);
    app.dirty = false;
    answer_then_quiet_replies(&mut app, &fake, reqs);
    assert!(matches!(app.search.index, IndexState::Ready(_)));
    assert!(app.dirty, "the loaded index was never drawn");
}

#[test]
fn compare_sort_baseline_export() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4");
    let t = app.compare.table.clone().unwrap();
    assert_eq!(t.rows.len(), 2);
    press(&mut app, &fake, "lls"); // sort by MRR, descending
    assert_eq!(app.compare.sort, Some((2, true)));
    let order = app.compare.order();
    assert_eq!(t.rows[order[0]].system, "s2net-done");
    press(&mut app, &fake, "s");
    assert_eq!(t.rows[app.compare.order()[0]].system, "cl-lsi-done");
    press(&mut app, &fake, "b");
    assert_eq!(app.compare.baseline.as_deref(), Some("cl-lsi-done"));
    // m asks for a path under the current directory, named after the baseline
    press(&mut app, &fake, "m");
    assert_eq!(
        app.compare.export.as_ref().map(|p| p.path.as_str()),
        Some("compare-cl-lsi-done.md")
    );
    assert!(render(&mut app, 80, 24).contains("export to: compare-cl-lsi-done.md"));
    press_code(&mut app, &fake, KeyCode::Enter);
    // x, then a path of one's own: its extension chooses the format
    press(&mut app, &fake, "x");
    assert!(
        fake.exported.lock().unwrap().len() == 1,
        "typing is not a key"
    );
    for _ in 0.."compare-cl-lsi-done.csv".len() {
        press_code(&mut app, &fake, KeyCode::Backspace);
    }
    press(&mut app, &fake, "out/t.tsv");
    press_code(&mut app, &fake, KeyCode::Enter);
    // Esc gives up
    press(&mut app, &fake, "m");
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(app.compare.export.is_none());
    let ex = fake.exported.lock().unwrap().clone();
    assert_eq!(
        ex,
        vec![
            (
                PathBuf::from("compare-cl-lsi-done.md"),
                TableFormat::Markdown
            ),
            (PathBuf::from("out/t.tsv"), TableFormat::Tsv)
        ]
    );
}

/// Enter on a row lists its queries against the baseline, largest
/// difference first, for the selected column's metric; ←→ change the
/// metric, j/k scroll, Esc goes back to the table.
#[test]
fn compare_drill_down_per_query() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4bllj"); // MRR column, the second row
                                     // every row gives its wins/ties/losses on the selected metric
    let screen = render(&mut app, 100, 24);
    assert!(screen.contains("W/T/L MRR"), "{screen}");
    assert!(screen.contains("0/0/4"), "{screen}");
    assert!(screen.contains("over: fake: derived ad-hoc task, test split, 4 judged queries"));
    press_code(&mut app, &fake, KeyCode::Enter);
    let d = app.compare.drill.as_ref().expect("a drill-down opens");
    assert_eq!(d.view.metric, Metric::Mrr);
    assert_eq!(d.view.system, "cl-lsi-done");
    let order: Vec<&str> = d.view.rows.iter().map(|r| r.query.as_str()).collect();
    // the same 0.1 loss on every query: by query id
    assert_eq!(order, ["q0", "q1", "q2", "q3"]);
    let screen = render(&mut app, 80, 24);
    assert!(
        screen.contains("MRR per query: cl-lsi-done against s2net-done"),
        "{screen}"
    );
    assert!(
        screen.contains("query text 0") && screen.contains("-0.1000"),
        "{screen}"
    );
    press(&mut app, &fake, "jj");
    assert_eq!(app.compare.drill.as_ref().unwrap().scroll, 2);
    let screen = render(&mut app, 80, 24);
    assert!(!screen.contains("query text 0"), "{screen}");
    assert!(screen.contains("(3–4 of 4)"), "{screen}");
    press(&mut app, &fake, "l"); // P@1
    let d = app.compare.drill.as_ref().unwrap();
    assert_eq!((d.view.metric, d.scroll), (Metric::P1, 0));
    assert_eq!(app.compare.col, 3);
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(app.compare.drill.is_none());
    // on the baseline: an error, no list
    press(&mut app, &fake, "k");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(app.compare.drill.is_none());
    assert!(render(&mut app, 80, 24).contains("is the baseline"));
}

/// Sessions on another workspace's task are shown with their own means,
/// never tested against the baseline (their query ids name other texts):
/// the footer says why, and their per-query list is refused with the reason.
#[test]
fn compare_never_pairs_sessions_of_other_tasks() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("other-ws-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4bj"); // baseline s2net-done, then the other row
    let t = app.compare.table.as_ref().unwrap();
    let other = t.rows.iter().find(|r| r.system == "other-ws-done").unwrap();
    assert!(other.tests.is_empty(), "{other:?}");
    let screen = render(&mut app, 160, 24);
    assert!(
        screen.contains(
            "other-ws-done: not tested: a paired test needs the same queries with the same judgements: scored on other"
        ),
        "{screen}"
    );
    assert!(!screen.contains("0/0/4"), "{screen}");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(app.compare.drill.is_none());
    let screen = render(&mut app, 160, 24);
    assert!(
        screen.contains("the same queries with the same judgements"),
        "{screen}"
    );
}

/// The drill-down's query column holds whole labels (Bible references
/// longer than 18 characters included) and, where the screen is too narrow,
/// cuts them only with a `…` that keeps them apart.
#[test]
fn drill_down_labels_are_never_cut_silently() {
    let long = [
        "I Corinthians 10:22",
        "I Corinthians 10:2",
        "Song of Solomon 7:13",
        "Revelation of John 22:21",
    ];
    let fake = Fake {
        query_labels: long.iter().map(|l| l.to_string()).collect(),
        ..Fake::with(two_finished())
    };
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4bj");
    press_code(&mut app, &fake, KeyCode::Enter);
    let screen = render(&mut app, 80, 24);
    for l in long {
        assert!(screen.contains(&format!("│{l} ")), "{l}: {screen}");
    }
    // narrow: cut in the middle, marked, still apart
    let (w, shown, lines) = crate::tui::screens::compare::query_column(&long, 58);
    assert!(lines == 1 && w < 24, "{w}");
    for (l, s) in long.iter().zip(&shown) {
        assert!(s == l || s.contains('…'), "{s}");
        assert!(s.chars().count() <= w);
    }
    let distinct: std::collections::BTreeSet<&String> = shown.iter().collect();
    assert_eq!(distinct.len(), long.len(), "{shown:?}");
    // labels a middle cut would make alike wrap onto two lines, whole
    let alike = [
        "The book of the prophet Amos, chapter 1:1",
        "The book of the prophet Joel, chapter 1:1",
    ];
    let (w, shown, lines) = crate::tui::screens::compare::query_column(&alike, 58);
    assert!(lines > 1, "{shown:?}");
    for (l, s) in alike.iter().zip(&shown) {
        assert_eq!(s.replace('\n', ""), *l);
        assert!(s.lines().all(|x| x.chars().count() <= w));
    }
}

/// At 80×24 the Compare table drops no significance mark and cuts no
/// W/T/L: metrics that do not fit beside the names go to another page,
/// reached by moving the column.
#[test]
fn compare_at_80_columns_keeps_marks_and_wins_ties_losses() {
    let fake = Fake::with(vec![
        SessionSummary {
            name: "s2net bible d128 baseline".into(),
            ..done()
        },
        SessionSummary {
            best_mrr: Some(0.3),
            name: "cl-lsi bible d128 second".into(),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4bj");
    let screen = render(&mut app, 80, 24);
    let row = screen
        .lines()
        .find(|l| l.contains("cl-lsi bible d128 second"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains("0.4000 ▼"), "the MRR mark: {screen}");
    assert!(row.contains("0/0/4"), "W/T/L whole: {screen}");
    assert!(screen.contains("of 5 (←→ for the others)"), "{screen}");
    // the last metric: its page shows, its header underlined
    press(&mut app, &fake, "llllll");
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("nDCG@10"), "{screen}");
    assert!(screen.contains("W/T/L nDCG@10"), "{screen}");
}

/// Enter on a per-query row opens both sessions' rankings of that query
/// side by side, relevant documents marked; Esc goes back.
#[test]
fn enter_on_a_query_opens_both_rankings() {
    let fake = Fake::with(two_finished());
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4bllj"); // P@1 column, the second row
    press_code(&mut app, &fake, KeyCode::Enter);
    let top = app.compare.drill.as_ref().unwrap().view.rows[0]
        .query
        .clone();
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(
        *fake.rankings.lock().unwrap(),
        [
            ("s2net-done".to_string(), top.clone()),
            ("cl-lsi-done".to_string(), top.clone())
        ]
    );
    let screen = render(&mut app, 80, 24);
    insta::assert_snapshot!("compare_rankings_80x24", screen);
    assert!(
        screen.contains("s2net-done · first relevant at 1")
            && screen.contains("cl-lsi-done · first relevant at 3"),
        "{screen}"
    );
    assert!(screen.contains("1 ✓ Revelation of John 22:21"), "{screen}");
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(app.compare.rankings.is_none() && app.compare.drill.is_some());
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(app.compare.drill.is_none());
}

/// A session's name is its label on the Compare tab (and so in its
/// exports) and in the Search and Neighbours pickers and pane titles.
#[test]
fn sessions_are_named_by_their_names_everywhere() {
    let fake = Fake::with(vec![
        SessionSummary {
            name: "my baseline".into(),
            ..done()
        },
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4b");
    let t = app.compare.table.as_ref().unwrap();
    assert_eq!(t.rows[0].system, "my baseline");
    assert_eq!(t.baseline.as_deref(), Some("my baseline"));
    assert!(t.to_markdown().contains("my baseline"));
    assert!(render(&mut app, 100, 24).contains("my baseline"));
    // the pickers
    press(&mut app, &fake, "2s");
    let screen = render(&mut app, 100, 24);
    assert!(screen.contains("my baseline"), "{screen}");
    assert!(!screen.contains("s2net-done"), "{screen}");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(render(&mut app, 100, 24).contains(" my baseline "));
    press(&mut app, &fake, "3");
    assert!(render(&mut app, 100, 24).contains(" my baseline "));
}

/// Search and Neighbours start on the session selected on Jobs, and their
/// pickers open on it.
#[test]
fn search_and_neighbours_start_on_the_jobs_selection() {
    let fake = Fake::with(two_finished());
    let mut app = app_with(&fake);
    let second = app.jobs.visible()[1].id.clone();
    press(&mut app, &fake, "j");
    assert_eq!(app.jobs.selected.as_deref(), Some(second.as_str()));
    press(&mut app, &fake, "2");
    assert_eq!(app.search.session.as_deref(), Some(second.as_str()));
    press(&mut app, &fake, "s");
    match &app.popup {
        Some(Popup::Picker { selected, .. }) => {
            assert_eq!(app.pickable()[*selected].id, second)
        }
        p => panic!("{p:?}"),
    }
    press_code(&mut app, &fake, KeyCode::Esc);
    press(&mut app, &fake, "3");
    assert_eq!(app.neigh.panes[0].session.as_deref(), Some(second.as_str()));
}

#[test]
fn snapshot_compare_drill_down() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4blllj"); // P@1: wins and losses
    press_code(&mut app, &fake, KeyCode::Enter);
    insta::assert_snapshot!(render(&mut app, 80, 24));
}

/// The compare table reports which session it is evaluating while it builds
/// (over real Bible sessions it takes tens of seconds).
#[test]
fn compare_shows_its_progress_while_building() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    app.on_key(key('4'));
    let reqs = app.take_requests();
    let compare = reqs
        .into_iter()
        .find(|r| matches!(r, Request::Compare { .. }))
        .expect("the compare tab asks for a table");
    let reports = std::sync::Mutex::new(Vec::new());
    let table = crate::tui::app::execute(&fake, compare, &|p| reports.lock().unwrap().push(p));
    let reports = reports.into_inner().unwrap();
    assert_eq!(reports.len(), 2, "one report per session");
    app.on_reply(reports.into_iter().nth(1).unwrap());
    assert_eq!(app.compare.progress.as_ref().map(|p| p.0), Some(0.5));
    let screen = render(&mut app, 100, 24);
    assert!(
        screen.contains("building the table… 50% cl-lsi-done (2/2)"),
        "{screen}"
    );
    app.on_reply(table);
    assert!(app.compare.progress.is_none() && app.compare.table.is_some());
}

#[test]
fn help_lists_every_binding_with_a_description() {
    let km = Keymap::default();
    let help = km.help();
    let n: usize = help.iter().map(|(_, r)| r.len()).sum();
    assert_eq!(n, km.bindings.len());
    for b in &km.bindings {
        assert!(!b.desc.is_empty(), "{} has no description", b.name);
        assert!(!b.keys.is_empty(), "{} has no key", b.name);
    }
    let fake = Fake::default();
    let mut app = app_with(&fake);
    press(&mut app, &fake, "?");
    let screen = render(&mut app, 80, 60);
    assert!(screen.contains("quit (asks if jobs you started still run)"));
    assert!(screen.contains("new training job (form)"));
    press_code(&mut app, &fake, KeyCode::Esc);
    assert!(!app.popup_open());
}

#[test]
fn keymap_overrides_rebind_and_reject_unknown() {
    let mut o = BTreeMap::new();
    o.insert("new_job".to_string(), vec!["ctrl-n".to_string()]);
    let km = Keymap::with_overrides(&o).unwrap();
    let fake = Fake::default();
    let mut s = settings();
    s.keymap = km;
    let mut app = App::new(s);
    app.pump_sync(&fake);
    app.on_key(key('n'));
    assert!(!app.popup_open());
    app.on_key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::CONTROL));
    assert!(matches!(app.jobs.popup, Some(JobsPopup::Form(_))));
    o.insert("no_such".into(), vec!["x".into()]);
    assert!(Keymap::with_overrides(&o).unwrap_err().contains("no_such"));
    let mut o = BTreeMap::new();
    o.insert("quit".to_string(), vec!["ctrl-".to_string() + "toolong"]);
    assert!(Keymap::with_overrides(&o).is_err());
    assert_eq!(Key::parse("shift-tab").unwrap().code, KeyCode::BackTab);
}

#[test]
fn config_file_theme_and_no_color() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("config.toml");
    std::fs::write(
        &p,
        "theme = \"light\"\n[colors]\naccent = \"magenta\"\n[keys]\nquit = [\"ctrl-q\"]\n",
    )
    .unwrap();
    let f = ConfigFile::load(&p).unwrap();
    let s = Settings::resolve(&f, None, false).unwrap();
    assert_eq!(s.theme.accent, ratatui::style::Color::Magenta);
    assert!(!s.theme.mono);
    assert!(Settings::resolve(&f, None, true).unwrap().theme.mono);
    assert!(Settings::resolve(&f, Some("purple"), false).is_err());
    std::fs::write(&p, "colour = 1\n").unwrap();
    let e = ConfigFile::load(&p).unwrap_err().to_string();
    assert!(e.contains("config.toml"), "{e}");
    assert!(ConfigFile::load(&dir.path().join("missing.toml")).is_ok());
}

// ------------------------------------------------------------- file parts

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn real_session_folders_through_the_session_module() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    copy_dir(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui/sessions"),
        &root,
    );
    std::fs::create_dir_all(root.join("not-a-session")).unwrap();
    let b = crate::tui::local::LocalBackend::new(&root, "/nonexistent/rosetta");
    let ws_file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/corpus/tiny/workspace.toml");
    let list = b.list_sessions().unwrap();
    let ids: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["xcnn-stale", "s2net-fixture"], "newest first");
    let done = &list[1];
    assert_eq!(done.state, State::Done);
    assert_eq!((done.best_mrr, done.best_epoch), (Some(0.66), Some(3)));
    assert_eq!(done.pairs_per_s, Some(950.5));
    let stale = &list[0];
    assert_eq!(
        stale.state,
        State::Failed,
        "running without a process is stale"
    );
    assert!(stale.error.as_ref().unwrap().contains("stale"));

    // metrics: all, then nothing new, then an appended partial line waits for its newline
    let c = b.tail_metrics("s2net-fixture", 0).unwrap();
    assert_eq!(c.bad_lines, 1);
    assert_eq!(c.records.len(), 12);
    let c2 = b.tail_metrics("s2net-fixture", c.next_offset).unwrap();
    assert!(c2.records.is_empty() && !c2.reset);
    let path = root.join("s2net-fixture/metrics.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"kind\":\"event\",\"event\":\"x\",");
    std::fs::write(&path, &text).unwrap();
    let c3 = b.tail_metrics("s2net-fixture", c2.next_offset).unwrap();
    assert!(c3.records.is_empty());
    text.push_str("\"message\":\"later\"}\n");
    std::fs::write(&path, &text).unwrap();
    let c4 = b.tail_metrics("s2net-fixture", c3.next_offset).unwrap();
    assert_eq!(c4.records.len(), 1);
    // a shrunk file starts over
    std::fs::write(&path, "").unwrap();
    let c5 = b.tail_metrics("s2net-fixture", c4.next_offset).unwrap();
    assert!(c5.reset);
    assert!(b.tail_metrics("../x", 0).is_err());

    // the resumed run's superseded records are dropped from the curves
    let fake = Fake::with(vec![done.clone()]);
    fake.set_metrics("s2net-fixture", c.records.clone());
    let app = app_with(&fake);
    let s = &app.jobs.series["s2net-fixture"];
    let steps: Vec<f64> = s.curves.loss.iter().map(|p| p.0).collect();
    assert_eq!(steps, [10.0, 20.0, 30.0, 40.0]);
    assert_eq!(
        s.curves.loss[2].1, 1.5,
        "the retrained step, not the interrupted one"
    );
    assert_eq!(s.curves.valid.len(), 4);

    // duplicate: the given settings, init by session name, the rest as --set
    let spec = b.session_spec("s2net-fixture").unwrap();
    assert_eq!((spec.dim, spec.epochs, spec.lr), (Some(32), Some(4), None));
    assert_eq!(spec.init.as_deref(), Some("cl-lsi-base"));
    assert_eq!(spec.extra, vec![("batch".to_string(), "50".to_string())]);
    assert_eq!(spec.device, rosetta::models::DeviceSpec::Cpu);

    assert!(b
        .cancel("s2net-fixture")
        .unwrap_err()
        .to_string()
        .contains("already done"));
    assert!(b
        .cancel("xcnn-stale")
        .unwrap_err()
        .to_string()
        .contains("gone"));
    // a job the engine refuses is not launched, and nothing is written
    let before = b.list_sessions().unwrap().len();
    let e = b.launch(&JobSpec::default()).unwrap_err().to_string();
    assert!(e.contains("cannot open workspace"), "{e}"); // none given
    let spec = JobSpec {
        workspace: ws_file.display().to_string(),
        model: "cl-lsi".into(),
        epochs: Some(3),
        ..Default::default()
    };
    let e = b.launch(&spec).unwrap_err().to_string();
    assert!(e.contains("cl-lsi does not take epochs"), "{e}");
    assert_eq!(b.list_sessions().unwrap().len(), before);
    // a program that cannot be started is reported, and the session says so
    let spec = JobSpec {
        epochs: None,
        dim: Some(4),
        ..spec
    };
    let e = b.launch(&spec).unwrap_err().to_string();
    assert!(e.contains("cannot start"), "{e}");
    let list = b.list_sessions().unwrap();
    assert_eq!(list.len(), before + 1);
    assert!(list
        .iter()
        .any(|s| s.model == "cl-lsi" && s.state == State::Failed));
    let t = Comparison::build(
        &[System {
            name: "s2net-fixture".into(),
            detail: "s2net".into(),
            task: Task::default(),
            texts: BTreeMap::new(),
            labels: BTreeMap::new(),
            per_query: BTreeMap::from([(
                "q1".to_string(),
                Metrics {
                    mrr: 0.5,
                    ..Default::default()
                },
            )]),
        }],
        None,
        &CompareOptions {
            metrics: vec![Metric::Mrr],
            ..Default::default()
        },
    )
    .unwrap();
    let p = root.join("s2net-fixture/compare.csv");
    b.export_compare(&t, &p, TableFormat::Csv).unwrap();
    assert_eq!(
        std::fs::read_to_string(p).unwrap(),
        "system,model,queries,baseline,task,split,task_queries,MRR,MRR_p,MRR_sig,MRR_wins,MRR_ties,MRR_losses,MRR_diff,MRR_ci_low,MRR_ci_high,MRR_d\n\
         s2net-fixture,s2net,1,false,,,,0.5000,,,,,,,,,\n"
    );
}

#[test]
fn downsample_keeps_extremes_and_ema_smooths() {
    let pts: Vec<(f64, f64)> = (0..1000)
        .map(|i| (i as f64, if i == 500 { 9.0 } else { 1.0 }))
        .collect();
    let d = crate::tui::widgets::downsample(&pts, 100);
    assert!(d.len() <= 100);
    assert!(d.iter().any(|p| p.1 == 9.0), "the spike survives");
    let e = rosetta::plot::ema(&[(0.0, 1.0), (1.0, 3.0)], 0.5);
    assert_eq!(e[0].1, 1.0, "debiased first value");
    assert!(e[1].1 > 1.0 && e[1].1 < 3.0);
    assert_eq!(crate::tui::widgets::fmt_duration(3725.0), "1h02m");
}

#[test]
fn form_checks_model_specific_settings() {
    use crate::tui::screens::jobs::JobForm;
    let sessions = vec![done(), running()];
    let mut f = JobForm::new("t", &JobSpec::default());
    f.fields[0].value = "ws.toml".into();
    f.fields[5].value = "random:4".into(); // negatives: s2net takes none
    f.fields[7].value = "s2net-run".into(); // not finished
    assert!(f.validate(&sessions).is_none());
    assert!(f.fields[5].error.as_ref().unwrap().contains("xcnn"));
    assert!(f.fields[7].error.as_ref().unwrap().contains("finished"));
    if rosetta::models::registry::spec("xcnn").is_err() {
        return; // the rest needs xcnn in this build's registry
    }
    f.fields[1].value = "xcnn".into();
    f.fields[7].value = "s2net-done".into();
    let spec = f.validate(&sessions).expect("valid");
    assert_eq!(spec.negatives.as_deref(), Some("random:4"));
    let req = spec.request(std::path::Path::new("/tmp/runs"));
    assert_eq!(req.settings["negatives"], "random:4");
    assert_eq!(req.settings["init"], "/tmp/runs/s2net-done");
    assert_eq!(req.root, std::path::Path::new("/tmp/runs"));
    f.fields[1].value = "cl-lsi".into();
    f.fields[5].value.clear();
    assert!(
        f.validate(&sessions).is_none(),
        "cl-lsi cannot start from a session"
    );
    f.fields[1].value = "nonsense".into();
    assert!(f.validate(&sessions).is_none());
    assert!(f.fields[1].error.as_ref().unwrap().contains("s2net"));
    assert!(f.fields[1].error.as_ref().unwrap().contains("bm25-dict"));
    // a lexical baseline launches from the form, with no training settings
    f.fields[1].value = "bm25-dict".into();
    f.fields[7].value.clear();
    f.fields[3].value = "5".into();
    assert!(f.validate(&sessions).is_none());
    assert!(f.fields[3]
        .error
        .as_ref()
        .unwrap()
        .contains("does not take epochs"));
    f.fields[2].value.clear();
    f.fields[3].value.clear();
    f.fields[8].value = "k1=0.9".into();
    let spec = f.validate(&sessions).unwrap_or_else(|| {
        panic!(
            "{:?}",
            f.fields.iter().map(|x| x.error.clone()).collect::<Vec<_>>()
        )
    });
    assert_eq!(spec.model, "bm25-dict");
}

/// Trains tiny models through the engine's jobs and drives the engine-backed calls.
#[test]
fn engine_search_neighbours_compare_and_data_on_a_trained_session() {
    let ws = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/corpus/tiny/workspace.toml");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    for (name, model, extra) in [
        ("a", "cl-lsi", vec![]),
        ("b", "s2net", vec![("epochs", "3")]),
    ] {
        let mut req = rosetta::jobs::JobRequest::new(&ws, model);
        req.device = rosetta::models::DeviceSpec::Cpu;
        req.session = Some(root.join(name));
        req.settings.insert("dim".into(), "8".into());
        for (k, v) in extra {
            req.settings.insert(k.into(), v.into());
        }
        let mut session = rosetta::jobs::create(&req).unwrap();
        let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let outcome =
            rosetta::jobs::run(&mut session, &mut rosetta::train::runner::Quiet, cancel).unwrap();
        assert_eq!(outcome.state, rosetta::session::State::Done, "{outcome:?}");
    }
    let b = crate::tui::local::LocalBackend::new(&root, "/bin/false");
    let seen = Mutex::new(Vec::new());
    let IndexOpening::Ready(info) = b
        .load_index("a", &|f, w| seen.lock().unwrap().push((f, w.to_string())))
        .unwrap()
    else {
        panic!("a CL-LSI session encodes at once")
    };
    assert_eq!(info.docs, 8);
    assert_eq!(info.judged_queries.len(), 5);
    assert!(seen.lock().unwrap().len() >= 3, "progress is reported");
    // a judged query: its relevant documents are marked, RR and AP given
    let (_, qtext) = info
        .judged_queries
        .iter()
        .find(|(q, _)| q == "q4")
        .unwrap()
        .clone();
    let r = b.search("a", &qtext, 5, Fusion::Model).unwrap();
    assert_eq!(r.hits.len(), 5);
    assert!(r.hits.windows(2).all(|w| w[0].score >= w[1].score));
    let j = r.judged.clone().expect("judged query");
    assert_eq!(j.qid, "q4");
    let first_rel = r
        .hits
        .iter()
        .position(|h| h.relevant == Some(true))
        .map(|i| i + 1);
    assert_eq!(
        first_rel.map(|p| 1.0 / p as f64),
        Some(j.rr).filter(|x| *x > 0.0)
    );
    assert!(r
        .hits
        .iter()
        .all(|h| h.contributions.len() <= 3 && h.text.len() <= 400 * 4));
    for h in &r.hits {
        for &(a, z) in &h.spans {
            assert!(h.text.is_char_boundary(a) && h.text.is_char_boundary(z) && a < z);
        }
    }
    // unknown words are reported; fusion modes rank every document
    let r2 = b
        .search("a", "river zzyzxq", 8, Fusion::Rrf { k: 60.0 })
        .unwrap();
    let dropped: Vec<&str> = r2.query.dropped().iter().map(|w| w.word.as_str()).collect();
    assert_eq!(dropped, vec!["zzyzxq"]);
    assert_eq!(r2.query.dropped_summary(), "zzyzxq (out of vocabulary)");
    // a query with no usable word has no ranking, and says why
    let none = b.search("a", "zzyzxq qqqqv", 8, Fusion::Model).unwrap();
    assert!(none.hits.is_empty());
    assert!(
        none.unanswerable
            .as_deref()
            .is_some_and(|w| w.contains("zzyzxq (out of vocabulary)")),
        "{none:?}"
    );
    assert_eq!(r2.hits.len(), 8);
    assert!(r2.judged.is_none());
    let r3 = b
        .search("a", "river", 8, Fusion::Linear { lambda: 1.0 })
        .unwrap();
    assert!(r3.hits[0].score <= 1.0 + 1e-9);
    // neighbours: the dictionary's translation of "river" is marked gold
    let n = b.neighbours("a", "river", Side::Source, 5, false).unwrap();
    assert!(n.known);
    assert_eq!(n.cross.len(), 5);
    assert!(
        n.own.iter().all(|x| x.term != "river"),
        "not its own neighbour"
    );
    let all = b
        .neighbours("a", "river", Side::Source, 100, false)
        .unwrap();
    assert!(all.cross.iter().any(|x| x.gold), "{:?}", all.cross);
    let c = b.neighbours("a", "river", Side::Source, 5, true).unwrap();
    assert_eq!(c.cross.len(), 5);
    let unknown = b.neighbours("a", "qqqq", Side::Source, 5, false).unwrap();
    assert!(!unknown.known);
    assert_eq!(
        unknown.dropped.as_ref().map(|d| d.code()),
        Some("out_of_vocabulary")
    );
    let back = b.neighbours("a", "río", Side::Target, 3, false).unwrap();
    assert!(back.known);
    // associations: through the kept searcher, written as TSV
    for kind in [AssocKind::New, AssocKind::Missed] {
        let opts = AssocOptions {
            kind,
            ..Default::default()
        };
        let t = b.associations("a", &opts).unwrap();
        assert_eq!(t.kind, kind);
        assert!(t.looked_up > 0);
        assert!(t.rows.iter().all(|r| r.score.is_finite()));
        let out = dir.path().join(format!("assoc-{}.tsv", kind.name()));
        let n = b.export_associations(&t, "", &out).unwrap();
        assert_eq!(n, t.rows.len());
        let text = std::fs::read_to_string(&out).unwrap();
        assert_eq!(text.lines().count(), n + 1, "{text}");
    }
    // compare: both sessions, significance against a baseline
    let t = b
        .compare(
            &[("a".into(), "a".into()), ("b".into(), "b".into())],
            Some("a"),
            &|_, _| {},
        )
        .unwrap();
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.metrics[0], Metric::Mrr);
    assert!(t
        .rows
        .iter()
        .all(|r| r.queries == 5 && r.means.values().all(|x| (0.0..=1.0).contains(x))));
    assert_eq!(t.baseline.as_deref(), Some("a"));
    assert_eq!(
        (t.rows[1].detail.as_str(), t.rows[1].tests.len()),
        ("s2net", t.metrics.len())
    );
    assert!(
        t.rows[0].baseline && t.rows[0].tests.is_empty(),
        "no test against itself"
    );
    // over the workspace's task, cached in the session folders
    let task = t.task().expect("one task");
    assert!(task.name.ends_with("ad-hoc collection"), "{task:?}");
    assert_eq!(task.queries, 5);
    assert!(root
        .join("a")
        .join(rosetta::session::workbench::SCORES_CACHE)
        .is_file());
    // one query's ranking, as its per-query scores were computed: the
    // reciprocal rank of the first relevant document is the table's
    for (name, row) in [("a", &t.rows[0]), ("b", &t.rows[1])] {
        for (qid, m) in &row.per_query {
            let r = b.judged_ranking(name, qid, 5).unwrap();
            assert_eq!(r.hits.len(), 5);
            let rr = r
                .relevant
                .first()
                .and_then(|x| x.1)
                .map_or(0.0, |p| 1.0 / p as f64);
            assert!((rr - m.mrr).abs() < 1e-9, "{name} {qid}: {rr} vs {}", m.mrr);
            for h in &r.hits {
                assert_eq!(h.relevant, r.relevant.iter().any(|x| x.1 == Some(h.rank)));
            }
        }
    }
    assert!(b.judged_ranking("a", "no-such-query", 5).is_err());
    // a session without a model is left out, not an error for the whole table
    std::fs::create_dir_all(root.join("c")).unwrap();
    let t2 = b
        .compare(
            &[("a".into(), "a".into()), ("c".into(), "c".into())],
            None,
            &|_, _| {},
        )
        .unwrap();
    assert_eq!(t2.rows.len(), 1);
    assert_eq!(t2.skipped.len(), 1);
    // data screen figures
    let s = b.workspace_stats(ws.to_str().unwrap()).unwrap();
    assert_eq!(
        (s.source_lang.as_str(), s.target_lang.as_str()),
        ("en", "es")
    );
    assert!(s.splits.iter().any(|x| x.name == "train" && x.size > 0));
    assert!(s.figures.iter().any(|(k, _)| k.contains("dictionary")));
}

/// A job of several phases (a DBN's layers) draws one phase's loss at a
/// time: the latest by default, `[` and `]` step through them, and past the
/// last the chart follows the job again.
#[test]
fn loss_chart_steps_through_a_jobs_phases() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    let mut recs = Vec::new();
    for (i, phase) in ["src.rsm", "src.rbm2", "finetune"].iter().enumerate() {
        for k in 1..=20 {
            recs.push(MetricRecord::Step {
                phase: phase.to_string(),
                epoch: 1,
                step: i * 20 + k,
                examples: 10,
                loss: 1.0 + i as f64,
                parts: Default::default(),
                pairs_per_s: 1.0,
                wall_s: 1.0,
            });
        }
    }
    fake.set_metrics("s2net-done", recs);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "j");
    assert_eq!(app.jobs.selected.as_deref(), Some("s2net-done"));
    let screen = render(&mut app, 120, 30);
    assert!(screen.contains("phase finetune (3/3"), "{screen}");
    press(&mut app, &fake, "[[");
    assert_eq!(app.jobs.loss_phase, Some(0));
    let screen = render(&mut app, 120, 30);
    assert!(screen.contains("phase src.rsm (1/3"), "{screen}");
    press(&mut app, &fake, "[");
    assert_eq!(app.jobs.loss_phase, Some(0), "no phase before the first");
    press(&mut app, &fake, "]]");
    assert_eq!(app.jobs.loss_phase, None, "the last phase follows the job");
}

/// An adversarial job's step records carry its loss terms and the
/// discriminator's loss and accuracy: `t` draws them (the game) in place of
/// the loss, and `t` again brings the loss back.
#[test]
fn loss_chart_shows_the_discriminators_game() {
    let fake = Fake::with(vec![running(), done(), failed()]);
    let recs: Vec<MetricRecord> = (1..=40)
        .map(|i| MetricRecord::Step {
            phase: "train".into(),
            epoch: 1,
            step: i,
            examples: 10,
            loss: 1.0,
            parts: [
                ("disc_acc".to_string(), 0.9 - i as f64 / 100.0),
                ("disc_loss".to_string(), 0.5 + i as f64 / 100.0),
                ("L_tra".to_string(), 2.0 / i as f64),
                ("grad_norm".to_string(), 40.0),
            ]
            .into(),
            pairs_per_s: 1.0,
            wall_s: 1.0,
        })
        .collect();
    fake.set_metrics("s2net-done", recs);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "j");
    assert_eq!(app.jobs.selected.as_deref(), Some("s2net-done"));
    let screen = render(&mut app, 120, 30);
    assert!(screen.contains("Training loss"), "{screen}");
    assert!(!screen.contains("disc_acc"), "{screen}");
    press(&mut app, &fake, "t");
    let screen = render(&mut app, 120, 30);
    assert!(screen.contains("Loss terms and discriminator"), "{screen}");
    for name in ["disc_acc", "disc_loss", "L_tra"] {
        assert!(screen.contains(name), "{name}: {screen}");
    }
    assert!(!screen.contains("grad_norm"), "{screen}");
    press(&mut app, &fake, "t");
    assert!(render(&mut app, 120, 30).contains("Training loss"));
}

#[test]
fn wrapping_keeps_every_character_within_the_width() {
    use crate::tui::widgets::width;
    use crate::tui::widgets::wrap_ranges;
    let text = "En el principio era el Verbo,  y el Verbo era con Dios.\n\nनदी के किनारे एक पुराना मंदिर है Donaudampfschifffahrtsgesellschaftskapitän";
    for w in [1, 7, 12, 30, 200] {
        let lines = wrap_ranges(text, w);
        let mut kept = String::new();
        for &(a, b) in &lines {
            assert!(width(&text[a..b]) <= w.max(2), "{w}: {:?}", &text[a..b]);
            kept.push_str(&text[a..b]);
        }
        let strip = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        assert_eq!(strip(&kept), strip(text), "nothing is dropped at width {w}");
    }
    // the empty line between the paragraphs stays
    assert_eq!(wrap_ranges(text, 200).len(), 3);
    // a path wider than the line breaks after a `/`, never inside a name
    let log = "wrote /work/sessions/s2net-d128/checkpoints/best.safetensors";
    let rows: Vec<&str> = wrap_ranges(log, 24)
        .into_iter()
        .map(|(a, b)| &log[a..b])
        .collect();
    assert_eq!(
        rows,
        [
            "wrote",
            "/work/sessions/",
            "s2net-d128/checkpoints/",
            "best.safetensors"
        ]
    );
}

// ------------------------------------------------- launcher, sweeps (issue 40)

/// Focuses form field `i` (from the first) and replaces its text.
fn set_field(app: &mut App, fake: &Fake, i: usize, text: &str) {
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("no form")
    };
    let n = f.fields.len();
    let from = f.focus;
    for _ in 0..(i + n - from) % n {
        press_code(app, fake, KeyCode::Tab);
    }
    app.on_key(ctrl('u'));
    press(app, fake, text);
}

/// The form starts from the launcher remembered under the sessions root,
/// offers Slurm's options and a sweep, and launches them as one spec (the
/// backend then calls the engine's `start_on` / `sweep::start_slurm`).
#[test]
fn form_launches_a_slurm_sweep_from_the_remembered_launcher() {
    let fake = Fake::with(vec![done()]);
    *fake.launcher.lock().unwrap() = LauncherMemory {
        slurm: true,
        options: SlurmOptions {
            partition: Some("gpu".into()),
            gres: Some("gpu:1".into()),
            time: Some("2:00:00".into()),
            ..Default::default()
        },
    };
    let mut app = app_with(&fake);
    press(&mut app, &fake, "n");
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("no form")
    };
    let value = |label: &str| {
        f.fields
            .iter()
            .find(|x| x.label == label)
            .unwrap()
            .value
            .clone()
    };
    assert_eq!(value("run on"), "slurm", "the remembered launcher");
    assert_eq!(value("partition"), "gpu");
    assert_eq!(value("gres (GPUs)"), "gpu:1");
    assert_eq!(value("time limit"), "2:00:00");
    // a grid on a dim the user typed needs that value cleared (a dim the
    // form filled in gives way: a_sweep_grid_replaces_the_value_the_form_filled_in);
    // bad seeds are refused
    set_field(&mut app, &fake, 2, "64");
    set_field(&mut app, &fake, 14, "dim=4,8 lr=0.1,0.01");
    set_field(&mut app, &fake, 15, "1,x");
    press_code(&mut app, &fake, KeyCode::Enter);
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("form closed")
    };
    assert!(f.fields[14].error.as_deref().unwrap().contains("dim"));
    assert!(f.fields[15]
        .error
        .as_deref()
        .unwrap()
        .contains("not a seed"));
    assert!(fake.launched.lock().unwrap().is_empty());
    set_field(&mut app, &fake, 2, "");
    set_field(&mut app, &fake, 15, "1,2");
    set_field(&mut app, &fake, 16, "3");
    set_field(&mut app, &fake, 12, "30:00");
    press_code(&mut app, &fake, KeyCode::Enter);
    let spec = fake.launched.lock().unwrap().pop().expect("launched");
    assert_eq!(spec.dim, None);
    assert!(spec.launcher.slurm);
    assert_eq!(spec.launcher.options.partition.as_deref(), Some("gpu"));
    assert_eq!(spec.launcher.options.time.as_deref(), Some("30:00"));
    let sw = spec.sweep.expect("a sweep");
    assert_eq!(
        sw.grid,
        vec![
            ("dim".to_string(), vec!["4".to_string(), "8".to_string()]),
            (
                "lr".to_string(),
                vec!["0.1".to_string(), "0.01".to_string()]
            ),
        ]
    );
    assert_eq!((sw.seeds, sw.parallel), (vec![1, 2], Some(3)));
}

/// ←/→ switch the launcher; a single local job carries no sweep, and
/// seeds without a grid are refused.
#[test]
fn form_launcher_toggles_and_seeds_need_a_grid() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "n");
    set_field(&mut app, &fake, 9, "");
    press_code(&mut app, &fake, KeyCode::Right);
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("no form")
    };
    assert_eq!(f.fields[9].value, "local");
    press_code(&mut app, &fake, KeyCode::Right);
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("no form")
    };
    assert_eq!(f.fields[9].value, "slurm");
    press_code(&mut app, &fake, KeyCode::Left);
    set_field(&mut app, &fake, 15, "1,2");
    press_code(&mut app, &fake, KeyCode::Enter);
    let Some(JobsPopup::Form(f)) = &app.jobs.popup else {
        panic!("form closed")
    };
    assert!(f.fields[15].error.as_deref().unwrap().contains("grid"));
    set_field(&mut app, &fake, 15, "");
    press_code(&mut app, &fake, KeyCode::Enter);
    let spec = fake.launched.lock().unwrap().pop().expect("launched");
    assert!(!spec.launcher.slurm && spec.sweep.is_none());
}

/// A session of sweep `sweep` at point `dim` with `seed` and best MRR `mrr`.
fn swept(id: &str, sweep: &str, index: usize, dim: &str, seed: u64, mrr: f64) -> SessionSummary {
    let mut s = SessionSummary {
        best_mrr: Some(mrr),
        ..summary(id, State::Done)
    };
    s.best.insert("MRR".into(), mrr);
    s.settings.insert("dim".into(), dim.into());
    s.settings.insert("seed".into(), seed.to_string());
    s.sweep = Some(SweepMember {
        id: sweep.into(),
        index,
        point: [("dim".to_string(), dim.to_string())].into(),
        seed,
    });
    s
}

/// The Jobs table shows a sweep as one row (its varying setting's values,
/// the best point's MRR as mean ± sd over the seeds); Enter opens it on its
/// points and their sessions, and closes it again.
#[test]
fn a_sweep_is_one_collapsible_row_with_mean_and_sd() {
    let sw = "s2net-sweep-x";
    let fake = Fake::with(vec![
        done(),
        swept("s2net-sweep-x-0", sw, 0, "4", 1, 0.40),
        swept("s2net-sweep-x-1", sw, 1, "4", 2, 0.50),
        swept("s2net-sweep-x-2", sw, 2, "8", 1, 0.60),
        swept("s2net-sweep-x-3", sw, 3, "8", 2, 0.80),
    ]);
    let mut app = app_with(&fake);
    assert_eq!(app.jobs.rows().len(), 2, "one session, one sweep");
    let screen = render(&mut app, 80, 24);
    assert!(screen.contains("▸ s2net-sweep-x (4)"), "{screen}");
    assert!(screen.contains("4 done"), "{screen}");
    // the best point (dim 8): mean 0.70, sd 0.1414
    assert!(screen.contains("0.700 ± 0.141"), "{screen}");
    assert!(!screen.contains("s2net-sweep-x-0"), "{screen}");
    press(&mut app, &fake, "j");
    assert_eq!(app.jobs.selected.as_deref(), Some(".sweep/s2net-sweep-x"));
    assert!(app.jobs.selected_session().is_none());
    press(&mut app, &fake, "c");
    assert!(render(&mut app, 120, 30).contains("a sweep's row: Enter opens it"));
    assert!(fake.cancelled.lock().unwrap().is_empty());
    press_code(&mut app, &fake, KeyCode::Enter);
    assert!(!app.popup_open(), "no detail popup for a sweep");
    assert_eq!(app.jobs.rows().len(), 2 + 2 + 4, "points and sessions");
    let screen = render(&mut app, 160, 48);
    assert!(screen.contains("▾ s2net-sweep-x (4)"), "{screen}");
    assert!(screen.contains("  dim=4"), "{screen}");
    assert!(screen.contains("0.450 ± 0.071"), "{screen}");
    // its sessions by their settings, not their folder names
    assert!(screen.contains("dim=8 seed=2"), "{screen}");
    assert!(!screen.contains("sweep-x-3"), "{screen}");
    // a member session is a session row: its curves are asked for
    press(&mut app, &fake, "jj");
    assert_eq!(app.jobs.selected.as_deref(), Some("s2net-sweep-x-0"));
    assert!(app.jobs.selected_session().is_some());
    press(&mut app, &fake, "kk");
    press_code(&mut app, &fake, KeyCode::Enter);
    assert_eq!(app.jobs.rows().len(), 2, "closed again");
}

/// The Compare table gives the selected metric's difference from the
/// baseline with its 95% bootstrap interval, and d, as columns.
#[test]
fn compare_table_shows_interval_and_effect_size_columns() {
    let fake = Fake::with(vec![
        done(),
        SessionSummary {
            best_mrr: Some(0.3),
            ..summary("cl-lsi-done", State::Done)
        },
    ]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4bll"); // MRR column
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = render(&mut app, w, h);
        let row = screen
            .lines()
            .find(|l| l.contains("cl-lsi-done") && l.contains("0/0/4"))
            .unwrap_or_else(|| panic!("{screen}"));
        assert!(row.contains("-0.100 [-0.100, -0.100]"), "{row}");
        let header = screen.lines().find(|l| l.contains("W/T/L")).unwrap();
        assert!(
            header.contains("Δ [95% CI]") && header.contains(" d "),
            "{header}"
        );
    }
}

/// The status line of a drawn screen (its last line).
fn status_line(screen: &str) -> String {
    screen
        .lines()
        .last()
        .unwrap_or_default()
        .trim_matches('"')
        .to_string()
}

/// A slow request — the Compare table asked again after `b`, its answer held
/// on a worker thread until the test lets it go — shows the busy mark on the
/// next frame; keys are handled meanwhile (a second `b` queues, Esc, moving);
/// the answer replaces the mark, and the queued request then goes out.
#[test]
fn a_slow_request_shows_the_busy_mark_until_its_answer_replaces_it() {
    let fake = Fake::with(two_finished());
    let mut app = app_with(&fake);
    press(&mut app, &fake, "4");
    assert!(!app.is_busy());
    let idle = render(&mut app, 80, 24);
    assert!(!status_line(&idle).contains('…'), "{idle}");
    press(&mut app, &fake, "j"); // the second row
    app.on_key(key('b'));
    let work = app.take_work();
    assert_eq!(work.len(), 1, "{work:?}");
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::scope(|sc| {
        let fake = &fake;
        sc.spawn(move || {
            for w in work {
                go_rx.recv().unwrap();
                let reply = crate::tui::app::execute(fake, w.request, &|_| {});
                done_tx.send((w.ticket, reply)).unwrap();
            }
        });
        // drawn before the answer: the mark says what runs
        let screen = render(&mut app, 80, 24);
        let status = status_line(&screen);
        assert!(
            status.contains("comparing 2 sessions against cl-lsi-done…"),
            "{screen}"
        );
        assert!(
            crate::tui::app::SPINNER.iter().any(|c| status.contains(*c)),
            "{status}"
        );
        // the spinner turns from frame to frame
        let again = status_line(&render(&mut app, 80, 24));
        assert_ne!(status, again);
        // keys meanwhile: a second `b` queues behind the first, Esc and
        // moving are handled, nothing waits
        app.on_key(key('b'));
        assert!(app.take_work().is_empty(), "queued, not sent twice");
        app.on_key(code(KeyCode::Esc));
        app.on_key(key('k'));
        assert_eq!(app.compare.row, 0);
        assert!(app.is_busy());
        go_tx.send(()).unwrap();
        let (ticket, reply) = done_rx.recv().unwrap();
        app.on_done(ticket, reply);
    });
    assert!(!app.is_busy());
    let screen = render(&mut app, 80, 24);
    assert!(!status_line(&screen).contains("comparing"), "{screen}");
    assert!(
        screen.contains("◆ cl-lsi-done"),
        "the new baseline: {screen}"
    );
    // the queued `b` went out once the first answer arrived
    let queued = app.take_work();
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert!(app.is_busy());
    // q still quits with work in flight
    app.on_key(key('q'));
    assert!(app.quit);
}

/// Opening a session on Search shows the busy mark with its name until the
/// index is loaded.
#[test]
fn opening_a_session_shows_the_busy_mark() {
    let fake = Fake::with(two_finished());
    let mut app = app_with(&fake);
    app.on_key(key('2'));
    app.on_key(key('s'));
    app.on_key(code(KeyCode::Enter));
    let work = app.take_work();
    let open = work
        .iter()
        .find(|w| matches!(w.request, Request::Search(_)))
        .expect("the index is asked for");
    let screen = render(&mut app, 80, 24);
    assert!(
        status_line(&screen).contains("opening session s2net-done…"),
        "{screen}"
    );
    for w in work.clone() {
        let reply = crate::tui::app::execute(&fake, w.request, &|_| {});
        app.on_done(w.ticket, reply);
    }
    assert!(!app.is_busy(), "{:?}", open);
    let screen = render(&mut app, 80, 24);
    assert!(!status_line(&screen).contains("opening"), "{screen}");
}

/// An encoder session as the Jobs screen lists it.
fn encoder_session(index: Option<IndexBuild>) -> SessionSummary {
    SessionSummary {
        model: "encoder".into(),
        best_mrr: Some(0.61),
        index,
        ..summary("encoder-zs", State::Done)
    }
}

/// An index build's status as `index/status.json` says it.
fn index_build(state: &str, done: usize, updated: &str) -> IndexBuild {
    IndexBuild {
        state: state.into(),
        status: IndexStatus {
            state: state.into(),
            pid: 31337,
            device: "cpu".into(),
            texts_done: done,
            texts_total: 31084,
            texts_per_s: Some(16.2),
            eta_s: Some((31084 - done) as f64 / 16.2),
            chunks_done: done / 1024,
            chunks: 31,
            updated: updated.into(),
            ..Default::default()
        },
    }
}

/// Search on an encoder session whose collection would take long to
/// encode: the estimate and the offer instead of an encoding; `B` launches
/// the build as a job, Search follows it and opens the session when it is
/// done; Jobs lists the build with its progress.
#[test]
fn search_offers_the_index_build_of_a_session_too_long_to_encode() {
    let fake = Fake::with(vec![encoder_session(None)]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "2");
    assert!(
        matches!(app.search.index, IndexState::NeedsBuild { .. }),
        "{:?}",
        app.search.index
    );
    insta::assert_snapshot!("search_needs_build_80x24", render(&mut app, 80, 24));
    insta::assert_snapshot!("search_needs_build_160x48", render(&mut app, 160, 48));
    press(&mut app, &fake, "B");
    assert_eq!(*fake.builds.lock().unwrap(), ["encoder-zs"]);
    assert!(matches!(
        app.search.index,
        IndexState::Building { pid: 31337, .. }
    ));
    let screen = render(&mut app, 80, 24);
    assert!(
        screen.contains("index build of encoder-zs started"),
        "{screen}"
    );
    // the build runs: Search and Jobs show its progress
    *fake.sessions.lock().unwrap() = vec![encoder_session(Some(index_build(
        "running",
        12000,
        "2026-11-28T23:40:00Z",
    )))];
    app.poll_sessions();
    app.pump_sync(&fake);
    let screen = render(&mut app, 80, 24);
    assert!(
        screen.contains("index build running: 12000/31084 texts (38.6%)"),
        "{screen}"
    );
    // a second B while it runs is refused, nothing launched
    press(&mut app, &fake, "B");
    assert_eq!(fake.builds.lock().unwrap().len(), 1);
    assert!(
        matches!(&app.message, Some(crate::tui::app::Message::Error(e)) if e.contains("already running"))
    );
    press(&mut app, &fake, "1");
    insta::assert_snapshot!("jobs_index_build_80x24", render(&mut app, 80, 24));
    // done: Search opens the session by itself
    *fake.sessions.lock().unwrap() = vec![encoder_session(Some(index_build(
        "done",
        31084,
        "2026-11-29T00:12:00Z",
    )))];
    app.poll_sessions();
    app.pump_sync(&fake);
    assert!(
        matches!(app.search.index, IndexState::Ready(_)),
        "{:?}",
        app.search.index
    );
    // a loaded session needs no build
    press(&mut app, &fake, "2B");
    assert!(
        matches!(&app.message, Some(crate::tui::app::Message::Error(e)) if e.contains("needs no index build"))
    );
}

#[path = "../../tests/suite/common/encoder.rs"]
mod tiny_encoder;

/// The real backend on the tiny encoder the suite writes, its limit on
/// encoding forced to 0 s: opening the zero-shot session encodes nothing
/// and answers with the estimate and the command; `B` launches
/// `rosetta index build --session DIR --device auto ... --background`
/// detached (here a script that records its arguments); the build (run
/// here as that process would) shows on Jobs, and Search then opens the
/// session from the index.
#[test]
fn the_real_backend_offers_the_build_instead_of_a_long_encoding() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus/tiny");
    let tmp = tempfile::tempdir().unwrap();
    let weights = tmp.path().join("tiny-encoder");
    tiny_encoder::tiny_encoder_folder(&fixture, &weights, 5);
    let root = tmp.path().join("sessions");
    let mut req = rosetta::jobs::JobRequest::new(fixture.join("workspace.toml"), "encoder");
    req.device = rosetta::models::DeviceSpec::Cpu;
    req.session = Some(root.join("enc"));
    req.settings
        .insert("weights".into(), weights.display().to_string());
    req.settings.insert("epochs".into(), "0".into());
    let mut session = rosetta::jobs::create(&req).unwrap();
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let outcome =
        rosetta::jobs::run(&mut session, &mut rosetta::train::runner::Quiet, cancel).unwrap();
    assert_eq!(outcome.state, State::Done, "{outcome:?}");
    let dir = root.join("enc");
    // the program the build is launched with: records its arguments
    let exe = tmp.path().join("rosetta-stand-in");
    std::fs::write(
        &exe,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/args.txt\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let b = crate::tui::local::LocalBackend::new(&root, &exe).with_encode_limit(0.0);
    let mut app = App::new(settings());
    app.pump_sync(&b);
    press(&mut app, &b, "2");
    let IndexState::NeedsBuild { estimate, command } = app.search.index.clone() else {
        panic!("{:?}", app.search.index)
    };
    assert_eq!(estimate.texts, 8, "the fixture's documents");
    assert!(estimate.texts_per_s > 0.0 && estimate.seconds > 0.0);
    assert!(
        command.starts_with("rosetta index build --session ") && command.ends_with(" --detach"),
        "{command}"
    );
    assert!(
        !dir.join("doc-embeddings.target.npy").exists(),
        "nothing encoded"
    );
    let screen = render(&mut app, 100, 30);
    assert!(screen.contains("enc is not indexed"), "{screen}");
    // asked again unchanged: refused at once, from what was measured
    assert_eq!(
        b.load_index("enc", &|_, _| panic!("no loading")).unwrap(),
        IndexOpening::NeedsBuild {
            estimate,
            command: command.clone()
        }
    );
    press(&mut app, &b, "B");
    assert!(
        matches!(app.search.index, IndexState::Building { .. }),
        "{:?} {:?}",
        app.search.index,
        app.message
    );
    let args_file = tmp.path().join("args.txt");
    for _ in 0..100 {
        if std::fs::read_to_string(&args_file).is_ok_and(|a| a.ends_with("--background\n")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let args = std::fs::read_to_string(&args_file).unwrap();
    let canonical = std::fs::canonicalize(&dir).unwrap();
    let want = format!(
        "index\nbuild\n--session\n{}\n--device\nauto\n",
        canonical.display()
    );
    assert!(args.starts_with(&want), "{args}");
    // the build, as the launched process runs it
    let st = rosetta::jobs::index::run(
        &dir,
        rosetta::models::DeviceSpec::Cpu,
        rosetta::session::collection::BuildOptions { chunk: 2, batch: 1 },
        rosetta::jobs::index::Part::Whole,
        rosetta::jobs::index::HNSW_ABOVE,
        None,
        &std::sync::atomic::AtomicBool::new(false),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(st.state, "done");
    app.poll_sessions();
    app.pump_sync(&b);
    let IndexState::Ready(info) = &app.search.index else {
        panic!("{:?}", app.search.index)
    };
    assert_eq!(info.docs, 8);
    press(&mut app, &b, "1");
    let screen = render(&mut app, 100, 30);
    assert!(screen.contains("Index builds (1)"), "{screen}");
    assert!(screen.contains("8/8 texts (100.0%)"), "{screen}");
}

// ------------------------------------------------- what tells runs apart

/// Runs of four models, two S2Net runs alike but for `dim` (the same MRR),
/// and a sweep over `dim` 16,32 × seeds 1,2: the tables' model columns are
/// never cut, a sweep's values never cut, differing settings beside the
/// model in the picker and in Compare, sweep sessions named by their
/// settings.
fn runs_told_apart() -> Fake {
    let run = |id: &str, model: &str, mrr: f64, settings: &[(&str, &str)]| {
        let mut s = summary(id, State::Done);
        s.model = model.into();
        s.name = id.into();
        s.best_mrr = Some(mrr);
        s.best_epoch = Some(3);
        s.progress = Some(1.0);
        s.settings = [
            ("model", model),
            ("workspace", "tiny"),
            ("seed", "1"),
            ("device", "cpu"),
        ]
        .iter()
        .chain(settings)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        s
    };
    let mut sessions = vec![
        run("bm25-dict-20261128-100000", "bm25-dict", 0.4112, &[]),
        run(
            "procrustes-20261128-100500",
            "procrustes",
            0.5208,
            &[("dim", "300")],
        ),
        run(
            "s2net-20261128-101000",
            "s2net",
            0.9641,
            &[("dim", "16"), ("lr", "0.01")],
        ),
        run(
            "s2net-20261128-102000",
            "s2net",
            0.9641,
            &[("dim", "32"), ("lr", "0.01")],
        ),
    ];
    let sweep = "s2net-sweep-20261128-170219";
    for (i, (dim, seed)) in [("16", 1u64), ("16", 2), ("32", 1), ("32", 2)]
        .into_iter()
        .enumerate()
    {
        let mut s = run(
            &format!("{sweep}-{i}"),
            "s2net",
            0.9 + 0.01 * i as f64,
            &[("dim", dim), ("lr", "0.01")],
        );
        s.settings.insert("seed".into(), seed.to_string());
        s.best.insert("MRR".into(), 0.9 + 0.01 * i as f64);
        s.sweep = Some(rosetta::jobs::sweep::SweepMember {
            id: sweep.into(),
            index: i,
            point: [("dim".to_string(), dim.to_string())].into(),
            seed,
        });
        sessions.push(s);
    }
    Fake {
        models_from_sessions: true,
        ..Fake::with(sessions)
    }
}

#[test]
fn tables_never_cut_what_tells_runs_apart() {
    let fake = runs_told_apart();
    let mut app = app_with(&fake);
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = render(&mut app, w, h);
        for model in ["bm25-dict", "procrustes"] {
            assert!(screen.contains(model), "{model} whole at {w}×{h}: {screen}");
        }
        // the sweep's dim values whole, not `1…3`
        assert!(
            screen.contains("16,32") && !screen.contains("1…3"),
            "the sweep's dim values at {w}×{h}: {screen}"
        );
        insta::assert_snapshot!(format!("jobs_told_apart_{w}x{h}"), screen);
    }
    // the sweep opened: its sessions by their settings, not their folders
    let sweep_row = app
        .jobs
        .rows()
        .iter()
        .position(|r| r.key().starts_with(".sweep/"))
        .unwrap();
    for _ in 0..sweep_row {
        press(&mut app, &fake, "j");
    }
    press_code(&mut app, &fake, KeyCode::Enter);
    let screen = render(&mut app, 160, 48);
    for name in ["dim=16 seed=1", "dim=16 seed=2", "dim=32 seed=2"] {
        assert!(screen.contains(name), "{name}: {screen}");
    }
    assert!(!screen.contains("170219-"), "{screen}");
}

#[test]
fn picker_and_compare_show_the_settings_that_differ() {
    let fake = runs_told_apart();
    let mut app = app_with(&fake);
    press(&mut app, &fake, "2s");
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = render(&mut app, w, h);
        for cell in ["s2net dim=16", "s2net dim=32", "bm25-dict", "procrustes"] {
            assert!(screen.contains(cell), "{cell} at {w}×{h}: {screen}");
        }
        // sweep sessions by their settings; those beside the model
        assert!(
            screen.contains("dim=16 seed=2") && screen.contains("s2net dim=16 seed=2"),
            "{screen}"
        );
        insta::assert_snapshot!(format!("picker_told_apart_{w}x{h}"), screen);
    }
    press_code(&mut app, &fake, KeyCode::Esc);
    press(&mut app, &fake, "4");
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = render(&mut app, w, h);
        for cell in ["s2net dim=16", "s2net dim=32", "bm25-dict", "procrustes"] {
            assert!(screen.contains(cell), "{cell} at {w}×{h}: {screen}");
        }
        insta::assert_snapshot!(format!("compare_told_apart_{w}x{h}"), screen);
    }
}

#[test]
fn a_sweep_grid_replaces_the_value_the_form_filled_in() {
    use crate::tui::screens::jobs::JobForm;
    // the new-job form fills in dim 128; a grid over dim sweeps it
    let mut f = JobForm::new("t", &JobSpec::default());
    let set = |f: &mut JobForm, field: &str, v: &str| {
        let i = f.fields.iter().position(|x| x.label == field).unwrap();
        f.fields[i].value = v.into();
    };
    set(&mut f, "workspace", "ws.toml");
    assert_eq!(f.fields[2].value, "128", "dim is filled in");
    set(&mut f, "sweep grid", "dim=16,32");
    assert!(f.swept(2));
    let spec = f.validate(&[]).expect("the grid replaces dim 128");
    assert_eq!(spec.dim, None);
    let sweep = spec.sweep.unwrap();
    assert_eq!(
        sweep.grid,
        vec![("dim".to_string(), vec!["16".into(), "32".into()])]
    );
    // a value the user typed is theirs: the grid conflicts with it
    set(&mut f, "dim", "64");
    assert!(!f.swept(2));
    assert!(f.validate(&[]).is_none());
    assert!(f.fields[2]
        .error
        .as_deref()
        .or(f
            .fields
            .iter()
            .find(|x| x.label == "sweep grid")
            .unwrap()
            .error
            .as_deref())
        .is_some_and(|e| e.contains("clear its fixed value")));
    // a duplicated session's other settings give way the same way
    let mut f = JobForm::new(
        "t",
        &JobSpec {
            workspace: "ws.toml".into(),
            extra: vec![("batch".into(), "50".into())],
            ..Default::default()
        },
    );
    set(&mut f, "sweep grid", "batch=20,50");
    let spec = f.validate(&[]).expect("the grid replaces batch=50");
    assert!(spec.extra.is_empty());
}

/// A run evaluated once (a lexical baseline, a zero-shot encoder): its
/// chart is titled by that one step, its axis labelled by it alone.
#[test]
fn a_single_evaluation_is_charted_at_its_step() {
    let fake = Fake::with(vec![done()]);
    fake.set_metrics(
        "s2net-done",
        vec![MetricRecord::Valid {
            phase: "eval".into(),
            epoch: 0,
            step: 0,
            scores: [("MRR".to_string(), 0.9641)].into(),
        }],
    );
    let mut app = app_with(&fake);
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = render(&mut app, w, h);
        assert!(screen.contains("MRR · step 0"), "{screen}");
        assert!(!screen.contains("-1"), "no step -1: {screen}");
    }
}

/// The dictionary's translations of the word looked up show as words, as
/// the engine gives them (`acuarela`), never as their analysed terms.
#[test]
fn neighbours_list_the_dictionarys_words_not_stems() {
    let fake = Fake::with(vec![done()]);
    let mut app = app_with(&fake);
    press(&mut app, &fake, "3s");
    press_code(&mut app, &fake, KeyCode::Enter);
    press(&mut app, &fake, "/watercolour");
    press_code(&mut app, &fake, KeyCode::Enter);
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = render(&mut app, w, h);
        assert!(
            screen.contains("✓ the dictionary lists: acuarela "),
            "{screen}"
        );
    }
}
