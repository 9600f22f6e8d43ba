//! BM25 runs on a workspace's ad-hoc task: target-language queries
//! (the monolingual ceiling), source-language queries untranslated, through
//! the dictionary (Pirkola structured queries) or through Apertium,
//! optionally expanded by pseudo-relevance feedback ([`super::expand`]) on
//! the target side, after translation.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::bm25::{Bm25Index, Bm25Params, Query};
use super::expand::{expand_many, AddedTerm, Expansion};
use super::translate::{apertium_translate, translate_dict_units, unit_dictionary};
use crate::corpus::{AdhocTask, Workspace};
use crate::eval::Run;
use crate::text::Side;
use crate::{Error, Result};

/// How source-language queries reach the documents' language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Translation {
    /// Not at all: query terms match only where both languages share them
    /// (names, numbers, loan words).
    #[default]
    None,
    /// Word by word through the workspace dictionary, as structured queries.
    Dict,
    /// Whole queries through Apertium, then analysed as target text.
    Mt,
}

impl Translation {
    /// The name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            Translation::None => "none",
            Translation::Dict => "dict",
            Translation::Mt => "mt",
        }
    }
}

/// Settings of a BM25 run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25RunConfig {
    /// BM25 parameters.
    pub params: Bm25Params,
    /// Which queries: the source-language ones or the target-language ones.
    pub queries: Side,
    /// Translation of source-language queries (must be `None` for target).
    pub translation: Translation,
    /// Documents kept per query (TREC runs usually keep 1000).
    pub depth: usize,
    /// With `Dict`: keep terms the dictionary lacks as they are instead of
    /// dropping them.
    pub keep_untranslated: bool,
    /// Pseudo-relevance feedback of the (translated) queries.
    #[serde(default)]
    pub expansion: Expansion,
}

impl Default for Bm25RunConfig {
    fn default() -> Self {
        Bm25RunConfig {
            params: Bm25Params::default(),
            queries: Side::Source,
            translation: Translation::None,
            depth: 1000,
            keep_untranslated: false,
            expansion: Expansion::None,
        }
    }
}

/// What a BM25 run did to its queries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryStats {
    /// Queries searched.
    pub queries: usize,
    /// Queries left with no term the index knows (no results).
    pub without_results: usize,
    /// Query tokens after analysis (before translation).
    pub tokens: usize,
    /// Tokens the dictionary translated (`dict` only).
    pub translated_tokens: usize,
    /// Tokens the dictionary lacks, dropped (`dict` only).
    pub dropped_tokens: usize,
    /// What pseudo-relevance feedback did (with an expansion only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expansion: Option<ExpansionStats>,
}

/// What pseudo-relevance feedback did to a run's queries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExpansionStats {
    /// `bo1` or `rm3`.
    pub method: String,
    /// Feedback documents asked for.
    pub fb_docs: usize,
    /// Expansion terms asked for.
    pub fb_terms: usize,
    /// RM3's weight of the original query (`rm3` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rm3_weight: Option<f64>,
    /// Queries that got at least one feedback term.
    pub expanded_queries: usize,
    /// Feedback terms over all queries (Bo1 counts re-weighted original
    /// terms too).
    pub terms: usize,
}

/// A BM25 run with its query statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bm25Run {
    /// The ranked lists (scores rounded to the 6 decimals a TREC run file
    /// keeps, so that evaluating it in memory equals trec_eval on the file).
    pub run: Run,
    /// What happened to the queries.
    pub stats: QueryStats,
    /// With an expansion: the terms the feedback chose for each query id
    /// (best first, with the weight each added); empty without.
    pub expansions: BTreeMap<String, Vec<AddedTerm>>,
}

/// The run's tag: `bm25`, `bm25-dict`, `bm25-dict-keep`, `bm25-mt`,
/// `bm25-target`, with `-bo1` or `-rm3` after it for an expansion.
pub fn run_tag(cfg: &Bm25RunConfig) -> String {
    let base = match (cfg.queries, cfg.translation) {
        (Side::Target, _) => "bm25-target".into(),
        (Side::Source, Translation::None) => "bm25".into(),
        (Side::Source, Translation::Dict) if cfg.keep_untranslated => "bm25-dict-keep".into(),
        (Side::Source, t) => format!("bm25-{}", t.name()),
    };
    if cfg.expansion.is_none() {
        base
    } else {
        format!("{base}-{}", cfg.expansion.name())
    }
}

/// Builds a BM25 index of the task's documents with the workspace's target
/// analyser (full terms, no vocabulary cap), ties broken by document id.
pub fn index_documents(ws: &Workspace, task: &AdhocTask, params: Bm25Params) -> Result<Bm25Index> {
    let (_, an) = crate::corpus::workspace_analyzers(ws)?;
    let toks: Vec<Vec<String>> = task.docs.texts.iter().map(|t| an.analyze(t)).collect();
    Bm25Index::build(&toks, params)?.with_docnos(&task.docs.ids)
}

/// The queries of a run as BM25 queries (ids alongside), translated as asked.
pub fn build_queries(
    ws: &Workspace,
    task: &AdhocTask,
    cfg: &Bm25RunConfig,
) -> Result<(Vec<String>, Vec<Query>, QueryStats)> {
    let (src, tgt) = crate::corpus::workspace_analyzers(ws)?;
    let mut stats = QueryStats::default();
    let (ids, queries) = match (cfg.queries, cfg.translation) {
        (Side::Target, Translation::None) => {
            let tq = task.target_queries.as_ref().ok_or_else(|| {
                Error::invalid(format!(
                    "workspace {} has no target-language queries ([adhoc] target_queries)",
                    ws.name
                ))
            })?;
            let qs = tq
                .texts
                .iter()
                .map(|t| {
                    let toks = tgt.analyze(t);
                    stats.tokens += toks.len();
                    Query::from_tokens(&toks)
                })
                .collect();
            (tq.ids.clone(), qs)
        }
        (Side::Target, t) => {
            return Err(Error::invalid(format!(
                "target-language queries need no translation (got --translate {})",
                t.name()
            )))
        }
        (Side::Source, Translation::None) => {
            let qs = task
                .queries
                .texts
                .iter()
                .map(|t| {
                    let toks = src.analyze(t);
                    stats.tokens += toks.len();
                    Query::from_tokens(&toks)
                })
                .collect();
            (task.queries.ids.clone(), qs)
        }
        (Side::Source, Translation::Dict) => {
            let dict = ws.read_dictionary()?.ok_or_else(|| {
                Error::invalid(format!(
                    "workspace {} names no dictionary ([dictionary] path)",
                    ws.name
                ))
            })?;
            // word by word (the dictionary's level), translations then cut into
            // the target's units (the identity for `units = "words"`)
            let analysed: HashMap<String, Vec<String>> =
                unit_dictionary(dict.analysed_words(&src, &tgt), &tgt);
            let qs = task
                .queries
                .texts
                .iter()
                .map(|t| {
                    let toks = src.analyze_words(t);
                    stats.tokens += toks.len();
                    let tr = translate_dict_units(&toks, &analysed, cfg.keep_untranslated, &tgt);
                    stats.translated_tokens += tr.translated;
                    stats.dropped_tokens += tr.dropped;
                    tr.query
                })
                .collect();
            (task.queries.ids.clone(), qs)
        }
        (Side::Source, Translation::Mt) => {
            let out = apertium_translate(&task.queries.texts, &ws.source_lang, &ws.target_lang)?;
            let qs = out
                .iter()
                .map(|t| {
                    let toks = tgt.analyze(t);
                    stats.tokens += toks.len();
                    Query::from_tokens(&toks)
                })
                .collect();
            (task.queries.ids.clone(), qs)
        }
    };
    stats.queries = ids.len();
    Ok((ids, queries, stats))
}

/// Source-language texts as target-language text, for a model to encode
/// on its target side: Apertium's output for `Mt`; for `Dict` every
/// dictionary translation of each word, as the dictionary writes it (one
/// form per target term of the word's `bm25-dict` synonym set, so the text
/// holds what the structured query searches for), words the dictionary
/// lacks left out. `ws` is read as given (its analysers and dictionary).
pub fn translate_texts<S: AsRef<str>>(
    ws: &Workspace,
    texts: &[S],
    translation: Translation,
) -> Result<Vec<String>> {
    match translation {
        Translation::None => Err(Error::invalid(
            "translating queries needs dict or mt, not none",
        )),
        Translation::Mt => apertium_translate(texts, &ws.source_lang, &ws.target_lang),
        Translation::Dict => {
            let dict = ws.read_dictionary()?.ok_or_else(|| {
                Error::invalid(format!(
                    "workspace {} names no dictionary ([dictionary] path)",
                    ws.name
                ))
            })?;
            let (src, tgt) = crate::corpus::workspace_analyzers(ws)?;
            let surface = dict.surface_words(&src, &tgt);
            Ok(texts
                .iter()
                .map(|t| {
                    let mut words: Vec<&str> = Vec::new();
                    for w in src.analyze_words(t.as_ref()) {
                        if let Some(tr) = surface.get(&w) {
                            words.extend(tr.iter().map(String::as_str));
                        }
                    }
                    words.join(" ")
                })
                .collect())
        }
    }
}

/// Runs BM25 on the workspace's ad-hoc task: every query (as `cfg` says,
/// expanded by `cfg.expansion` after translation) against the documents,
/// `cfg.depth` results each, in evaluator order.
pub fn bm25_run(ws: &Workspace, task: &AdhocTask, cfg: &Bm25RunConfig) -> Result<Bm25Run> {
    if cfg.keep_untranslated && cfg.translation != Translation::Dict {
        return Err(Error::invalid(
            "keeping untranslated terms applies to dictionary translation only",
        ));
    }
    if cfg.depth == 0 {
        return Err(Error::invalid("run depth must be at least 1"));
    }
    cfg.expansion.validate()?;
    let index = index_documents(ws, task, cfg.params)?;
    let (ids, mut queries, mut stats) = build_queries(ws, task, cfg)?;
    let mut expansions = BTreeMap::new();
    if !cfg.expansion.is_none() {
        let (fb_docs, fb_terms) = cfg.expansion.feedback();
        let mut es = ExpansionStats {
            method: cfg.expansion.name().into(),
            fb_docs,
            fb_terms,
            rm3_weight: match cfg.expansion {
                Expansion::Rm3 {
                    original_weight, ..
                } => Some(original_weight),
                _ => None,
            },
            ..Default::default()
        };
        let expanded = expand_many(&index, &queries, cfg.expansion);
        queries = Vec::with_capacity(expanded.len());
        for (qid, e) in ids.iter().zip(expanded) {
            if !e.terms.is_empty() {
                es.expanded_queries += 1;
                es.terms += e.terms.len();
                expansions.insert(qid.clone(), e.terms);
            }
            queries.push(e.query);
        }
        stats.expansion = Some(es);
    }
    let hits = index.search_many(&queries, cfg.depth);
    let mut results = BTreeMap::new();
    for (qid, hits) in ids.into_iter().zip(hits) {
        if hits.is_empty() {
            stats.without_results += 1;
            continue;
        }
        let docs: Vec<(String, f64)> = hits
            .iter()
            .map(|h| (task.docs.ids[h.doc as usize].clone(), round6(h.score)))
            .collect();
        results.insert(qid, docs);
    }
    Ok(Bm25Run {
        run: Run {
            results,
            tag: run_tag(cfg),
        },
        stats,
        expansions,
    })
}

/// A score as a TREC run file keeps it (`{:.6}`).
pub fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}
