//! The engine-backed half of the workbench's backend: a finished session's
//! model over its workspace's ad-hoc task (search with fusion, per-query
//! evaluation for the compare table), its term vectors (neighbours), and
//! workspace figures. Everything here is slow and runs on worker threads;
//! loaded sessions and workspaces are kept for later calls.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ndarray::{Array1, Array2};
use unicode_segmentation::UnicodeSegmentation;

use super::backend::{
    CompareRow, CompareTable, Fusion, Hit, IndexInfo, Judged, Neighbour, NeighbourResult,
    SearchResult, Significance, SplitStats, WorkspaceStats,
};
use crate::corpus::{Dictionary, Workspace};
use crate::eval::{evaluate_rankings, Correction, Metric, Metrics, PairedTest, Qrels};
use crate::index::{translate_dict, Bm25Index, Bm25Params, DenseIndex};
use crate::models::Side;
use crate::session::{Loaded as Model, Session};
use crate::text::Analyzer;
use crate::{Error, Result};

/// Longest document text kept for display, in characters.
const TEXT_CHARS: usize = 400;
/// Metrics the compare table shows.
const COMPARE_METRICS: [Metric; 5] = [
    Metric::Mrr,
    Metric::Map,
    Metric::P1,
    Metric::P10,
    Metric::Ndcg10,
];
/// Significance level of the compare table's marks (after Holm correction).
const ALPHA: f64 = 0.05;

/// A workspace's ad-hoc task, analysed once and shared by its sessions.
struct WsData {
    doc_ids: Vec<String>,
    /// Document texts as stored (encoded by each session's analyser).
    doc_full: Vec<String>,
    /// Document texts shortened for display.
    doc_texts: Vec<String>,
    queries: Vec<(String, String)>,
    qrels: Qrels,
    /// Analysed source term → analysed target terms.
    dict: HashMap<String, Vec<String>>,
    /// Analysed target term → analysed source terms.
    dict_rev: HashMap<String, Vec<String>>,
    bm25: Bm25Index,
}

/// A session's model (the session module's [`Model`]) with its workspace's
/// documents encoded.
struct Loaded {
    ws: Arc<WsData>,
    m: Model,
    dense: DenseIndex,
    doc_emb: Array2<f32>,
    /// Per-query metrics of the model alone on the ad-hoc task.
    evaluation: OnceLock<BTreeMap<String, Metrics>>,
}

/// Loaded sessions and workspaces.
#[derive(Default)]
pub struct Engine {
    sessions: Mutex<HashMap<PathBuf, Arc<Loaded>>>,
    workspaces: Mutex<HashMap<PathBuf, Arc<WsData>>>,
}

fn words_with_spans(text: &str) -> Vec<(usize, &str)> {
    // The analyser's own segmentation (`Analyzer::words`), with offsets.
    text.unicode_word_indices().collect()
}

impl Engine {
    fn workspace(&self, path: &Path, progress: &dyn Fn(f64, &str)) -> Result<Arc<WsData>> {
        let key = path.to_path_buf();
        if let Some(w) = self.workspaces.lock().expect("engine lock").get(&key) {
            return Ok(w.clone());
        }
        progress(0.05, "reading the workspace");
        let ws = Workspace::load(path)?;
        let src_an = Analyzer::new(&ws.source_lang, &ws.text)?;
        let tgt_an = Analyzer::new(&ws.target_lang, &ws.text)?;
        progress(0.1, "reading documents and queries");
        let task = ws.adhoc()?;
        let doc_tokens: Vec<Vec<String>> =
            task.docs.texts.iter().map(|t| tgt_an.analyze(t)).collect();
        progress(0.3, "building the BM25 index");
        let bm25 =
            Bm25Index::build(&doc_tokens, Bm25Params::default())?.with_docnos(&task.docs.ids)?;
        let (dict, dict_rev) = match &ws.dictionary {
            Some(p) => {
                progress(0.35, "reading the dictionary");
                let d = Dictionary::read(p)?.analysed(&src_an, &tgt_an);
                let mut rev: HashMap<String, Vec<String>> = HashMap::new();
                for (s, ts) in &d {
                    for t in ts {
                        let e = rev.entry(t.clone()).or_default();
                        if !e.contains(s) {
                            e.push(s.clone());
                        }
                    }
                }
                (d, rev)
            }
            None => Default::default(),
        };
        let data = Arc::new(WsData {
            doc_ids: task.docs.ids.clone(),
            doc_full: task.docs.texts.clone(),
            doc_texts: task
                .docs
                .texts
                .iter()
                .map(|t| t.chars().take(TEXT_CHARS).collect())
                .collect(),
            queries: task
                .queries
                .ids
                .iter()
                .cloned()
                .zip(task.queries.texts.iter().cloned())
                .collect(),
            qrels: task.qrels.clone(),
            dict,
            dict_rev,
            bm25,
        });
        self.workspaces
            .lock()
            .expect("engine lock")
            .insert(key, data.clone());
        Ok(data)
    }

    fn session(&self, dir: &Path, progress: &dyn Fn(f64, &str)) -> Result<Arc<Loaded>> {
        if let Some(l) = self.sessions.lock().expect("engine lock").get(dir) {
            return Ok(l.clone());
        }
        let session = Session::open(dir)?;
        let ws = self.workspace(&session.config.workspace, progress)?;
        progress(0.45, "loading the model");
        let m = Model::open(dir, &candle_core::Device::Cpu)?;
        progress(0.6, "encoding documents");
        let doc_emb = m.encode_texts(Side::Target, &ws.doc_full)?;
        let dense = DenseIndex::new(doc_emb.clone())?.with_docnos(&ws.doc_ids)?;
        progress(1.0, "ready");
        let loaded = Arc::new(Loaded {
            ws,
            m,
            dense,
            doc_emb,
            evaluation: OnceLock::new(),
        });
        self.sessions
            .lock()
            .expect("engine lock")
            .insert(dir.to_path_buf(), loaded.clone());
        Ok(loaded)
    }

    /// Loads a session's model and encodes its workspace's documents.
    pub fn load_index(
        &self,
        id: &str,
        dir: &Path,
        progress: &dyn Fn(f64, &str),
    ) -> Result<IndexInfo> {
        let l = self.session(dir, progress)?;
        let judged =
            l.ws.queries
                .iter()
                .filter(|(q, _)| l.ws.qrels.judgements.contains_key(q))
                .cloned()
                .collect();
        Ok(IndexInfo {
            session: id.to_string(),
            docs: l.ws.doc_ids.len(),
            judged_queries: judged,
        })
    }

    /// Ranks the documents for `query` (see [`Fusion`]).
    pub fn search(
        &self,
        dir: &Path,
        query: &str,
        k: usize,
        fusion: Fusion,
    ) -> Result<SearchResult> {
        let l = self.session(dir, &|_, _| {})?;
        let ws = &l.ws;
        let n = ws.doc_ids.len();
        let src_an = l.m.analyzer(Side::Source);
        let tokens = src_an.analyze(query);
        let mut oov = Vec::new();
        for w in Analyzer::words(query) {
            if let Some(t) = src_an.term(&w) {
                if l.m.vocabs.source.id(&t).is_none() && !oov.contains(&w) {
                    oov.push(w);
                }
            }
        }
        let q = l.m.encode_texts(Side::Source, &[query])?;
        let dense = l.dense.search(q.view(), n)?.pop().unwrap_or_default();
        let dense_docs: Vec<(u32, f64)> = dense.iter().map(|h| (h.doc, h.score)).collect();
        let fused: Vec<(u32, f64)> = match fusion {
            Fusion::Model => dense_docs.clone(),
            Fusion::Linear { lambda } => {
                let bm = self.bm25_hits(ws, &tokens, n);
                let norm = |v: &[(u32, f64)]| -> HashMap<u32, f64> {
                    let lo = v.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
                    let hi = v.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
                    let span = if hi > lo { hi - lo } else { 1.0 };
                    v.iter().map(|&(d, s)| (d, (s - lo) / span)).collect()
                };
                let (bn, dn) = (norm(&bm), norm(&dense_docs));
                let mut all: Vec<(u32, f64)> = (0..n as u32)
                    .map(|d| {
                        let b = bn.get(&d).copied().unwrap_or(0.0);
                        let c = dn.get(&d).copied().unwrap_or(0.0);
                        (d, lambda * b + (1.0 - lambda) * c)
                    })
                    .collect();
                self.sort(ws, &mut all);
                all
            }
            Fusion::Rrf { k: c } => {
                let bm = self.bm25_hits(ws, &tokens, n);
                let mut score: HashMap<u32, f64> = HashMap::new();
                for list in [&bm, &dense_docs] {
                    for (r, (d, _)) in list.iter().enumerate() {
                        *score.entry(*d).or_default() += 1.0 / (c + (r + 1) as f64);
                    }
                }
                let mut all: Vec<(u32, f64)> = score.into_iter().collect();
                self.sort(ws, &mut all);
                all
            }
        };
        // judged query: the first workspace query with this text
        let norm_q = Analyzer::words(query);
        let qid = ws
            .queries
            .iter()
            .find(|(id, t)| Analyzer::words(t) == norm_q && ws.qrels.judgements.contains_key(id))
            .map(|(id, _)| id.clone());
        let judged_map = qid.as_ref().and_then(|q| ws.qrels.judgements.get(q));
        let judged = match (&qid, judged_map) {
            (Some(q), Some(j)) => {
                let ranking: Vec<(String, f64)> = fused
                    .iter()
                    .map(|&(d, s)| (ws.doc_ids[d as usize].clone(), s))
                    .collect();
                let m = crate::eval::metrics::query_metrics(&ranking, j);
                Some(Judged {
                    qid: q.clone(),
                    rr: m.mrr,
                    ap: m.map,
                    relevant: j.values().filter(|g| **g > 0).count(),
                })
            }
            _ => None,
        };
        // per-term contributions and highlights
        let tv_src = l.m.term_vectors(Side::Source)?;
        let tv_tgt = l.m.term_vectors(Side::Target)?;
        let q_terms: Vec<(String, u32)> = {
            let mut seen = HashSet::new();
            tokens
                .iter()
                .filter_map(|t| Some((t.clone(), l.m.vocabs.source.id(t)?)))
                .filter(|(t, _)| seen.insert(t.clone()))
                .collect()
        };
        let translations: HashSet<&str> = tokens
            .iter()
            .filter_map(|t| ws.dict.get(t))
            .flatten()
            .map(String::as_str)
            .collect();
        let qv: Array1<f32> = q.row(0).to_owned();
        let hits = fused
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, &(d, score))| {
                let de = l.doc_emb.row(d as usize);
                let mut contributions: Vec<(String, f64)> = q_terms
                    .iter()
                    .map(|(t, id)| (t.clone(), tv_src.row(*id as usize).dot(&de) as f64))
                    .collect();
                contributions.sort_by(|a, b| b.1.total_cmp(&a.1));
                contributions.truncate(3);
                let text = &ws.doc_texts[d as usize];
                let mut spans = Vec::new();
                for (off, w) in words_with_spans(text) {
                    let Some(t) = l.m.analyzer(Side::Target).analyze(w).into_iter().next() else {
                        continue;
                    };
                    let related = translations.contains(t.as_str())
                        || l.m
                            .vocabs
                            .target
                            .id(&t)
                            .is_some_and(|id| tv_tgt.row(id as usize).dot(&qv) >= 0.5);
                    if related {
                        spans.push((off, off + w.len()));
                    }
                }
                let docno = ws.doc_ids[d as usize].clone();
                Hit {
                    rank: i + 1,
                    relevant: judged_map.map(|j| j.get(&docno).is_some_and(|g| *g > 0)),
                    docno,
                    score,
                    text: text.clone(),
                    spans,
                    contributions,
                }
            })
            .collect();
        Ok(SearchResult { hits, oov, judged })
    }

    fn bm25_hits(&self, ws: &WsData, tokens: &[String], n: usize) -> Vec<(u32, f64)> {
        let tr = translate_dict(tokens, &ws.dict);
        if tr.query.is_empty() {
            return Vec::new();
        }
        ws.bm25
            .search(&tr.query, n)
            .into_iter()
            .map(|h| (h.doc, h.score))
            .collect()
    }

    fn sort(&self, ws: &WsData, v: &mut [(u32, f64)]) {
        v.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| ws.doc_ids[b.0 as usize].cmp(&ws.doc_ids[a.0 as usize]))
        });
    }

    /// Nearest terms of `term` in both languages (the session module's
    /// neighbours), with the dictionary's translations marked.
    pub fn neighbours(
        &self,
        dir: &Path,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult> {
        let l = self.session(dir, &|_, _| {})?;
        let an = l.m.analyzer(side);
        let known = match Analyzer::words(term).as_slice() {
            [w] => an
                .term(w)
                .is_some_and(|t| l.m.vocabs.side(side).id(&t).is_some()),
            _ => true, // let the session module say what is wrong
        };
        if !known {
            return Ok(NeighbourResult::default());
        }
        let n = l.m.neighbours(term, side, k, csls)?;
        let gold: HashSet<&str> = match side {
            Side::Source => l.ws.dict.get(n.term.as_str()),
            Side::Target => l.ws.dict_rev.get(n.term.as_str()),
        }
        .map(|v| v.iter().map(String::as_str).collect())
        .unwrap_or_default();
        let conv = |v: Vec<crate::session::loaded::Neighbour>, gold: &HashSet<&str>| {
            v.into_iter()
                .map(|x| Neighbour {
                    gold: gold.contains(x.term.as_str()),
                    term: x.term,
                    score: x.score as f64,
                })
                .collect()
        };
        Ok(NeighbourResult {
            known: true,
            cross: conv(n.cross, &gold),
            own: conv(n.same, &HashSet::new()),
        })
    }

    fn evaluation<'a>(&self, l: &'a Loaded) -> Result<&'a BTreeMap<String, Metrics>> {
        if l.evaluation.get().is_none() {
            let ws = &l.ws;
            let judged: Vec<&(String, String)> = ws
                .queries
                .iter()
                .filter(|(q, _)| ws.qrels.judgements.contains_key(q))
                .collect();
            let texts: Vec<&str> = judged.iter().map(|(_, t)| t.as_str()).collect();
            let q = l.m.encode_texts(Side::Source, &texts)?;
            let hits = l.dense.search(q.view(), 1000.min(ws.doc_ids.len()))?;
            let rankings: BTreeMap<String, Vec<(String, f64)>> = judged
                .iter()
                .zip(hits)
                .map(|((qid, _), hs)| {
                    (
                        qid.clone(),
                        hs.into_iter()
                            .map(|h| (ws.doc_ids[h.doc as usize].clone(), h.score))
                            .collect(),
                    )
                })
                .collect();
            let _ = l
                .evaluation
                .set(evaluate_rankings(&rankings, &ws.qrels).per_query);
        }
        Ok(l.evaluation.get().expect("set above"))
    }

    /// Sessions × metrics on each session's ad-hoc task (model alone), with
    /// paired t-tests against the baseline (Holm-corrected per metric).
    /// `sessions` are (id, folder, model) triples.
    pub fn compare(
        &self,
        sessions: &[(String, PathBuf, String)],
        baseline: Option<&str>,
    ) -> Result<CompareTable> {
        let mut evals = Vec::new();
        let mut skipped = Vec::new();
        for (id, dir, model) in sessions {
            match self
                .session(dir, &|_, _| {})
                .and_then(|l| Ok(self.evaluation(&l)?.clone()))
            {
                Ok(e) => evals.push((id.clone(), model.clone(), e)),
                Err(e) => skipped.push((id.clone(), e.to_string())),
            }
        }
        let base = baseline
            .and_then(|b| evals.iter().find(|e| e.0 == b))
            .cloned();
        let mut marks: Vec<Vec<Significance>> =
            vec![vec![Significance::None; COMPARE_METRICS.len()]; evals.len()];
        let mut test = None;
        if let Some((bid, _, be)) = &base {
            for (mi, m) in COMPARE_METRICS.iter().enumerate() {
                let mut ps = Vec::new();
                let mut who = Vec::new();
                for (ri, (id, _, e)) in evals.iter().enumerate() {
                    if id == bid {
                        continue;
                    }
                    // pair on the queries both were scored on
                    let qs: Vec<&String> = e.keys().filter(|q| be.contains_key(*q)).collect();
                    let a: Vec<f64> = qs.iter().map(|q| e[*q].get(*m)).collect();
                    let b: Vec<f64> = qs.iter().map(|q| be[*q].get(*m)).collect();
                    if let Ok(r) = PairedTest::T.run(&a, &b) {
                        ps.push(r.p_value);
                        who.push((ri, r.mean_difference));
                    }
                }
                for (p, (ri, diff)) in Correction::Holm.adjust(&ps).into_iter().zip(who) {
                    if p < ALPHA && diff != 0.0 {
                        marks[ri][mi] = if diff > 0.0 {
                            Significance::Better
                        } else {
                            Significance::Worse
                        };
                    }
                }
            }
            test = Some(format!("paired t-test, Holm-corrected, p<{ALPHA}"));
        }
        let rows = evals
            .iter()
            .zip(marks)
            .map(|((id, model, e), marks)| {
                let mean = Metrics::mean(e.values());
                CompareRow {
                    session: id.clone(),
                    model: model.clone(),
                    values: COMPARE_METRICS
                        .iter()
                        .map(|m| (!e.is_empty()).then(|| mean.get(*m)))
                        .collect(),
                    marks,
                }
            })
            .collect();
        Ok(CompareTable {
            metrics: COMPARE_METRICS
                .iter()
                .map(|m| m.name().to_string())
                .collect(),
            rows,
            baseline: base.map(|b| b.0),
            test,
            skipped,
        })
    }
}

/// Figures of a workspace for the Data screen (`rosetta data inspect`'s).
pub fn workspace_stats(path: &str) -> Result<WorkspaceStats> {
    let ws = Workspace::load(Path::new(path))?;
    let ins = crate::corpus::inspect::Inspection::of(&ws)?;
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let mut splits: Vec<SplitStats> = ins
        .splits
        .iter()
        .map(|s| SplitStats {
            name: s.name.clone(),
            size: s.pairs,
            source_oov: Some(s.source.oov_rate),
            target_oov: Some(s.target.oov_rate),
        })
        .collect();
    splits.push(SplitStats {
        name: "docs".into(),
        size: ins.adhoc.docs.texts,
        source_oov: None,
        target_oov: Some(ins.adhoc.docs.oov_rate),
    });
    splits.push(SplitStats {
        name: "queries".into(),
        size: ins.adhoc.queries.texts,
        source_oov: Some(ins.adhoc.queries.oov_rate),
        target_oov: None,
    });
    let mut figures = vec![
        ("name".to_string(), ins.name.clone()),
        (
            format!("vocabulary {} / {}", ins.source_lang, ins.target_lang),
            format!("{} / {}", ins.source_vocab, ins.target_vocab),
        ),
        (
            "ad-hoc task".into(),
            format!(
                "{}{} judged queries, {} judgements ({} relevant)",
                if ins.adhoc.derived { "derived: " } else { "" },
                ins.adhoc.qrels_queries,
                ins.adhoc.qrels_judgements,
                ins.adhoc.qrels_relevant
            ),
        ),
        (
            "monolingual texts".into(),
            format!(
                "{} (OOV {})",
                ins.monolingual.texts,
                pct(ins.monolingual.oov_rate)
            ),
        ),
    ];
    for s in &ins.splits {
        figures.push((
            format!(
                "{} coverage {} / {}",
                s.name, ins.source_lang, ins.target_lang
            ),
            format!("{} / {}", pct(s.source.coverage), pct(s.target.coverage)),
        ));
    }
    match &ins.dictionary {
        Some(d) => {
            figures.push((
                "dictionary".into(),
                format!("{} ({} headwords)", d.path, d.headwords),
            ));
            figures.push((
                "dictionary covers vocabulary".into(),
                format!(
                    "{} {} / {} {}",
                    ins.source_lang,
                    pct(d.source_vocab_coverage),
                    ins.target_lang,
                    pct(d.target_vocab_coverage)
                ),
            ));
            figures.push((
                "dictionary covers source tokens".into(),
                pct(d.source_token_coverage),
            ));
        }
        None => figures.push(("dictionary".into(), "none".into())),
    }
    Ok(WorkspaceStats {
        path: path.to_string(),
        source_lang: ins.source_lang.clone(),
        target_lang: ins.target_lang.clone(),
        splits,
        figures,
    })
}

/// The error for a session that cannot be searched yet.
pub fn not_finished(id: &str) -> Error {
    Error::invalid(format!(
        "{id} has no checkpoint yet: wait until it has trained an epoch"
    ))
}
