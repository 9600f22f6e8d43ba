//! The BM25 baselines as session models (`bm25`, `bm25-dict`, `bm25-mt`):
//! BM25 over the target language with the source query untranslated,
//! translated word by word through the workspace dictionary (structured
//! queries), or translated by Apertium, each optionally expanded by
//! pseudo-relevance feedback (`--set expand=bo1|rm3`, on the translated
//! query). Nothing is learnt: "training" one
//! records its settings and validation figures (see
//! [`crate::train::lexical`]); it has no shared space, so lexicon induction,
//! neighbours and export do not apply.

use std::collections::HashMap;

use crate::corpus::parallel::ParallelText;
use crate::corpus::{AdhocTask, Collection, Workspace};
use crate::eval::sentence::{SentenceScores, TiedRank};
use crate::eval::Qrels;
use crate::index::adhoc::{bm25_run, build_queries, Bm25Run, Bm25RunConfig, Translation};
use crate::index::expand::{expand_many, Expansion, RM3_ORIGINAL_WEIGHT};
use crate::index::{Bm25Index, Bm25Params, Query};
use crate::models::settings::ModelDef;
use crate::models::settings::{
    boxed, model_config, s, Check, ModelConfig, Settings, Spec, BM25_B, BM25_K1,
};
use crate::models::Params;
use crate::text::Analyzer;
use crate::text::Side;
use crate::{Error, Result};

const EXPAND: Spec = s(
    "none",
    Check::Choice(&["none", "bo1", "rm3"]),
    "pseudo-relevance feedback: Terrier's Bo1 or Anserini's RM3",
);
const FB_DOCS: Spec = s(
    "auto",
    Check::Parse(auto_count),
    "feedback documents (auto: 3 for bo1, 10 for rm3)",
);
const FB_TERMS: Spec = s(
    "auto",
    Check::Parse(auto_count),
    "expansion terms (auto: 10)",
);
const RM3_WEIGHT: Spec = s(
    "0.5",
    Check::Range {
        min: 0.0,
        max: 1.0,
        open: false,
    },
    "RM3: weight of the original query",
);

fn auto_count(v: &str) -> std::result::Result<(), String> {
    match v.parse::<u64>() {
        _ if v == "auto" => Ok(()),
        Ok(n) if (1..=100_000).contains(&n) => Ok(()),
        _ => Err(format!(
            "expected auto or a whole number in 1..=100000, got `{v}`"
        )),
    }
}

model_config! {
    /// The settings of `bm25` and `bm25-mt`.
    pub struct Bm25Settings {
        b: f64 = BM25_B,
        expand: String = EXPAND,
        fb_docs: String = FB_DOCS,
        fb_terms: String = FB_TERMS,
        k1: f64 = BM25_K1,
        rm3_weight: f64 = RM3_WEIGHT,
    }
}

model_config! {
    /// The settings of `bm25-dict`: `bm25`'s and what to do with words the
    /// dictionary lacks.
    pub struct Bm25DictSettings {
        b: f64 = BM25_B,
        expand: String = EXPAND,
        fb_docs: String = FB_DOCS,
        fb_terms: String = FB_TERMS,
        k1: f64 = BM25_K1,
        keep_untranslated: bool = s("false", Check::Bool, "keep words the dictionary lacks"),
        rm3_weight: f64 = RM3_WEIGHT,
    }
}

impl ModelConfig for Bm25Settings {}
impl ModelConfig for Bm25DictSettings {}

/// The lexical baselines' own `[text]` defaults: the settings they were
/// compared under. Measured on enhi (docs/results.md, "Text defaults"):
/// stop words kept cost `bm25-dict` XQuAD MAP 0.4354 -> 0.3603 (English
/// stop words translate to Hindi words in every paragraph), though on the
/// Bible it gains (0.2931 -> 0.5175); `stopwords = false` in a workspace
/// gives that.
const LEXICAL_TEXT: &[(&str, &str)] = &[("stopwords", "true"), ("oov_ngrams", "0")];

/// `bm25` in the registry.
pub static BM25: ModelDef = ModelDef {
    name: "bm25",
    summary: "BM25 with untranslated queries (lexical baseline)",
    space: false,
    runner: false,
    gpu: false,
    word2vec: false,
    settings: Bm25Settings::SETTINGS,
    read: boxed::<Bm25Settings>,
    trainer: None,
    text: LEXICAL_TEXT,
    presets: &[],
};

/// `bm25-dict` in the registry.
pub static BM25_DICT: ModelDef = ModelDef {
    name: "bm25-dict",
    summary: "BM25 over dictionary-translated queries (lexical baseline)",
    space: false,
    runner: false,
    gpu: false,
    word2vec: false,
    settings: Bm25DictSettings::SETTINGS,
    read: boxed::<Bm25DictSettings>,
    trainer: None,
    text: LEXICAL_TEXT,
    presets: &[],
};

/// `bm25-mt` in the registry.
pub static BM25_MT: ModelDef = ModelDef {
    name: "bm25-mt",
    summary: "BM25 over machine-translated queries (Apertium; lexical baseline)",
    space: false,
    runner: false,
    gpu: false,
    word2vec: false,
    settings: Bm25Settings::SETTINGS,
    read: boxed::<Bm25Settings>,
    trainer: None,
    text: LEXICAL_TEXT,
    presets: &[],
};

/// A BM25 baseline: how queries are translated and BM25's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Baseline {
    /// BM25 parameters (`--set k1=`, `--set b=`).
    pub params: Bm25Params,
    /// Translation of source-language queries, from the model name.
    pub translation: Translation,
    /// `bm25-dict` only: keep terms the dictionary lacks (`--set keep_untranslated=true`).
    pub keep_untranslated: bool,
    /// Pseudo-relevance feedback (`--set expand=`, `fb_docs=`, `fb_terms=`,
    /// `rm3_weight=`).
    pub expansion: Expansion,
}

impl Bm25Baseline {
    /// The baseline `name` with its settings from `params` (each recorded,
    /// defaults included, like a trained model's).
    pub fn new(name: &str, params: &Params) -> Result<Bm25Baseline> {
        let translation = match name {
            "bm25" => Translation::None,
            "bm25-dict" => Translation::Dict,
            "bm25-mt" => Translation::Mt,
            other => {
                return Err(Error::invalid(format!(
                    "`{other}` is not a lexical baseline (bm25, bm25-dict, bm25-mt)"
                )))
            }
        };
        let (p, keep_untranslated) = if translation == Translation::Dict {
            let d = Bm25DictSettings::from_params(params, name)?;
            let shared = Bm25Settings {
                b: d.b,
                expand: d.expand,
                fb_docs: d.fb_docs,
                fb_terms: d.fb_terms,
                k1: d.k1,
                rm3_weight: d.rm3_weight,
            };
            (shared, d.keep_untranslated)
        } else {
            (Bm25Settings::from_params(params, name)?, false)
        };
        let bm = Bm25Params { k1: p.k1, b: p.b };
        bm.validate()?;
        let method = p.expand;
        let count = |what: &str, v: &str| -> Result<Option<usize>> {
            if v == "auto" {
                return Ok(None);
            }
            v.parse().map(Some).map_err(|_| {
                Error::invalid(format!("{name}: {what}={v}: expected auto or a number"))
            })
        };
        let (fb_docs, fb_terms) = (
            count("fb_docs", &p.fb_docs)?,
            count("fb_terms", &p.fb_terms)?,
        );
        let w = p.rm3_weight;
        // the default weight is recorded for every baseline; another one
        // applies to rm3 only
        let rm3_weight = (method == "rm3" || w != RM3_ORIGINAL_WEIGHT).then_some(w);
        let expansion = Expansion::from_parts(&method, fb_docs, fb_terms, rm3_weight)
            .map_err(|e| Error::invalid(format!("{name}: {e}")))?;
        Ok(Bm25Baseline {
            params: bm,
            translation,
            keep_untranslated,
            expansion,
        })
    }

    /// The run settings for the workspace's ad-hoc task.
    pub fn run_config(&self, depth: usize) -> Bm25RunConfig {
        Bm25RunConfig {
            params: self.params,
            queries: Side::Source,
            translation: self.translation,
            depth,
            keep_untranslated: self.keep_untranslated,
            expansion: self.expansion,
        }
    }

    /// The ranked run on the workspace's ad-hoc task.
    pub fn adhoc_run(&self, ws: &Workspace, task: &AdhocTask, depth: usize) -> Result<Bm25Run> {
        bm25_run(ws, task, &self.run_config(depth))
    }

    /// Source texts as BM25 queries over the target language (translated,
    /// not yet expanded: expansion needs the index searched).
    pub fn queries<S: AsRef<str>>(&self, ws: &Workspace, texts: &[S]) -> Result<Vec<Query>> {
        let task = AdhocTask {
            docs: Collection::default(),
            queries: Collection {
                ids: (0..texts.len()).map(|i| i.to_string()).collect(),
                texts: texts.iter().map(|t| t.as_ref().to_string()).collect(),
            },
            target_queries: None,
            qrels: Qrels::default(),
            unknown_doc_judgements: 0,
            derived: false,
            doc_labels: None,
            query_labels: None,
            doc_sources: None,
        };
        Ok(build_queries(ws, &task, &self.run_config(1))?.1)
    }

    /// Parallel sentence retrieval on a split: every source sentence (as a
    /// query, expanded as the baseline says over the target sentences)
    /// ranks all target sentences of the usable pairs; ties count
    /// against the true translation as in
    /// [`crate::eval::sentence::aligned_ranks`], so a query with no match
    /// ranks its translation last (and, in the `_ties_for` figures, for it:
    /// a query with no match ranks it first).
    pub fn sentence_retrieval(
        &self,
        ws: &Workspace,
        split: &ParallelText,
    ) -> Result<SentenceScores> {
        Ok(SentenceScores::from_ranks(
            &self.sentence_ranks(ws, split)?.1,
        ))
    }

    /// The ranks behind [`Bm25Baseline::sentence_retrieval`], one per usable
    /// pair: the usable pairs' indices in the split and each source
    /// sentence's rank of its translation (both tie conventions).
    pub fn sentence_ranks(
        &self,
        ws: &Workspace,
        split: &ParallelText,
    ) -> Result<(Vec<usize>, Vec<TiedRank>)> {
        let rows = split.usable();
        let (_, tgt) = crate::corpus::workspace_analyzers(ws)?;
        let docs: Vec<Vec<String>> = rows
            .iter()
            .map(|&i| tgt.analyze(&split.target[i]))
            .collect();
        let index = Bm25Index::build(&docs, self.params)?;
        let src: Vec<&str> = rows.iter().map(|&i| split.source[i].as_str()).collect();
        let queries: Vec<Query> = expand_many(&index, &self.queries(ws, &src)?, self.expansion)
            .into_iter()
            .map(|e| e.query)
            .collect();
        let n = rows.len();
        let hits = index.search_many(&queries, n);
        let mut ranks = Vec::with_capacity(n);
        for (i, hs) in hits.iter().enumerate() {
            let own = hs
                .iter()
                .find(|h| h.doc as usize == i)
                .map_or(0.0, |h| h.score);
            let above = hs
                .iter()
                .filter(|h| h.doc as usize != i && h.score > own)
                .count();
            let against = if own > 0.0 {
                1 + hs
                    .iter()
                    .filter(|h| h.doc as usize != i && h.score >= own)
                    .count()
            } else {
                // every other document scores at least 0: all rank above it
                n
            };
            // ties for the answer: only documents scoring strictly higher
            // (the hits hold every document scoring above 0)
            ranks.push(TiedRank {
                against,
                for_: 1 + above,
            });
        }
        Ok((rows, ranks))
    }
}

/// The analysed dictionary of a workspace in both directions (source term →
/// target terms, target term → source terms), empty without a dictionary.
/// Source terms are words (before subword units), target terms the target
/// analyser's units (the words themselves for `units = "words"`).
pub type DictPair = (HashMap<String, Vec<String>>, HashMap<String, Vec<String>>);

/// `ws` as the BM25 baselines read it: the file's `[text]` keys, then the
/// baselines' own defaults (the registry's), then the global ones. The BM25
/// partner of a fusion uses it whatever text settings the fused model has.
pub fn lexical_workspace(ws: &Workspace) -> Result<Workspace> {
    ws.clone().with_model_text(BM25_DICT.text)
}

/// Reads and analyses the workspace dictionary in both directions.
pub fn analysed_dictionary(ws: &Workspace, src: &Analyzer, tgt: &Analyzer) -> Result<DictPair> {
    let Some(d) = ws.read_dictionary()? else {
        return Ok(Default::default());
    };
    // word by word, translations cut into the target's units
    let fwd = crate::index::translate::unit_dictionary(d.analysed_words(src, tgt), tgt);
    let mut rev: HashMap<String, Vec<String>> = HashMap::new();
    for (s, ts) in &fwd {
        for t in ts {
            let e = rev.entry(t.clone()).or_default();
            if !e.contains(s) {
                e.push(s.clone());
            }
        }
    }
    Ok((fwd, rev))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn names_and_settings() {
        assert!(crate::models::is_lexical("bm25-dict") && !crate::models::is_lexical("cca"));
        let p = Params::new(BTreeMap::from([("k1".into(), "0.9".into())]));
        let b = Bm25Baseline::new("bm25-dict", &p).unwrap();
        assert_eq!(b.translation, Translation::Dict);
        assert_eq!(b.params.k1, 0.9);
        let r = p.resolved();
        assert_eq!(r["b"], "0.75");
        assert_eq!(r["keep_untranslated"], "false");
        assert!(Bm25Baseline::new("cca", &p).is_err());
        let bad = Params::new(BTreeMap::from([("b".into(), "2".into())]));
        assert!(Bm25Baseline::new("bm25", &bad).is_err());
        // keep_untranslated is not a setting of bm25-mt
        let keep = Params::new(BTreeMap::from([(
            "keep_untranslated".into(),
            "true".into(),
        )]));
        Bm25Baseline::new("bm25-mt", &keep).unwrap();
        assert!(keep.check_unused().is_err());
    }
}
