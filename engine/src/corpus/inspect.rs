//! A workspace at a glance: sizes, vocabularies, coverage, OOV rates and
//! dictionary coverage (`rosetta data inspect`).

use serde::Serialize;

use super::prepare::{Prepared, SideStats};
use super::workspace::Workspace;
use crate::Result;

/// Figures of one side of a split or collection.
#[derive(Debug, Clone, Serialize)]
pub struct SideReport {
    /// Texts counted.
    pub texts: usize,
    /// Index terms.
    pub tokens: usize,
    /// Share of tokens in the vocabulary.
    pub coverage: f64,
    /// Share of tokens not in the vocabulary.
    pub oov_rate: f64,
    /// Texts without any in-vocabulary term.
    pub empty_texts: usize,
}

impl From<SideStats> for SideReport {
    fn from(s: SideStats) -> Self {
        SideReport {
            texts: s.texts,
            tokens: s.tokens,
            coverage: s.coverage(),
            oov_rate: 1.0 - s.coverage(),
            empty_texts: s.empty_rows,
        }
    }
}

/// Figures of one parallel split.
#[derive(Debug, Clone, Serialize)]
pub struct SplitReport {
    /// Split name.
    pub name: String,
    /// Pairs, empty ones included.
    pub pairs: usize,
    /// Pairs with an empty side (kept for alignment, skipped in training).
    pub empty_pairs: usize,
    /// Pairs a trainer gets (non-empty, an in-vocabulary term on each side).
    pub trainable_pairs: usize,
    /// Source side (non-empty pairs).
    pub source: SideReport,
    /// Target side (non-empty pairs).
    pub target: SideReport,
}

/// Figures of the ad-hoc task.
#[derive(Debug, Clone, Serialize)]
pub struct AdhocReport {
    /// Whether it was derived from the parallel data.
    pub derived: bool,
    /// Documents.
    pub docs: SideReport,
    /// Source-language queries (their `oov_rate` is the query OOV rate).
    pub queries: SideReport,
    /// Target-language queries, when given.
    pub target_queries: Option<SideReport>,
    /// Judged queries.
    pub qrels_queries: usize,
    /// Judgements.
    pub qrels_judgements: usize,
    /// Judgements with grade > 0.
    pub qrels_relevant: usize,
    /// Judgements naming documents not in the collection.
    pub unknown_doc_judgements: usize,
}

/// Dictionary figures.
#[derive(Debug, Clone, Serialize)]
pub struct DictionaryReport {
    /// The dictionary file.
    pub path: String,
    /// Whether it was read swapped (`[dictionary] reverse = true`).
    pub reversed: bool,
    /// Headwords as read.
    pub headwords: usize,
    /// dictd entries dropped as mangled multi-word headwords.
    pub dropped_entries: usize,
    /// Single-term source entries after analysis.
    pub analysed_entries: usize,
    /// Share of source vocabulary terms with a translation.
    pub source_vocab_coverage: f64,
    /// Share of those translations' targets that are in the target vocabulary.
    pub target_in_vocab: f64,
    /// Share of target vocabulary terms that are some entry's translation.
    pub target_vocab_coverage: f64,
    /// Share of training source tokens whose term has a translation.
    pub source_token_coverage: f64,
}

/// Everything `rosetta data inspect` shows.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// Workspace name.
    pub name: String,
    /// The workspace file.
    pub workspace: String,
    /// Content hash (cache key).
    pub content_hash: String,
    /// Query language.
    pub source_lang: String,
    /// Document language.
    pub target_lang: String,
    /// Source vocabulary size: index terms, words and n-gram units together.
    pub source_vocab: usize,
    /// Target vocabulary size: index terms, words and n-gram units together.
    pub target_vocab: usize,
    /// Source index terms that are words (stems, or subword units), the
    /// character n-gram fallback's units left out: what `associations`
    /// looks up and `export` writes.
    pub source_words: usize,
    /// Target index terms that are words ([`Inspection::source_words`]).
    pub target_words: usize,
    /// The splits.
    pub splits: Vec<SplitReport>,
    /// Monolingual target texts.
    pub monolingual: SideReport,
    /// The ad-hoc task.
    pub adhoc: AdhocReport,
    /// The dictionary, if any.
    pub dictionary: Option<DictionaryReport>,
}

impl Inspection {
    /// Prepares (or loads the cache of) `ws` and measures it.
    pub fn of(ws: &Workspace) -> Result<Inspection> {
        let p = Prepared::load_or_build(ws)?;
        let splits = ["train", "valid", "test"]
            .iter()
            .filter_map(|n| p.split(n).map(|s| (n, s)))
            .map(|(n, s)| SplitReport {
                name: n.to_string(),
                pairs: s.pairs(),
                empty_pairs: s.empty.len(),
                trainable_pairs: s.trainable().len(),
                source: s.src_stats.into(),
                target: s.tgt_stats.into(),
            })
            .collect();
        let a = &p.adhoc;
        let adhoc = AdhocReport {
            derived: a.derived,
            docs: a.doc_stats.into(),
            queries: a.query_stats.into(),
            target_queries: a.target_query_stats.map(Into::into),
            qrels_queries: a.qrels.len(),
            qrels_judgements: a.qrels.judgements.values().map(|d| d.len()).sum(),
            qrels_relevant: a
                .qrels
                .judgements
                .values()
                .map(|d| d.values().filter(|r| **r > 0).count())
                .sum(),
            unknown_doc_judgements: a.unknown_doc_judgements,
        };
        let dictionary = match &ws.dictionary {
            Some(path) => Some(dictionary_report(path, ws, &p)?),
            None => None,
        };
        Ok(Inspection {
            name: ws.name.clone(),
            workspace: ws.path.display().to_string(),
            content_hash: p.hash.clone(),
            source_lang: p.source_lang.clone(),
            target_lang: p.target_lang.clone(),
            source_vocab: p.vocabs.source.len(),
            target_vocab: p.vocabs.target.len(),
            source_words: p.vocabs.source.words(),
            target_words: p.vocabs.target.words(),
            splits,
            monolingual: p.mono_stats.into(),
            adhoc,
            dictionary,
        })
    }

    /// A plain-text table for the terminal.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let pct = |x: f64| format!("{:.1}%", 100.0 * x);
        let _ = writeln!(
            s,
            "workspace {} ({} → {})  {}",
            self.name, self.source_lang, self.target_lang, self.workspace
        );
        let _ = writeln!(
            s,
            "content hash {}",
            &self.content_hash[..16.min(self.content_hash.len())]
        );
        let terms = |all: usize, words: usize| {
            if all == words {
                format!("{all} terms")
            } else {
                format!(
                    "{all} terms ({words} words + {} character n-gram units)",
                    all - words
                )
            }
        };
        let _ = writeln!(
            s,
            "vocabulary: {} {}, {} {} (built on train)",
            self.source_lang,
            terms(self.source_vocab, self.source_words),
            self.target_lang,
            terms(self.target_vocab, self.target_words)
        );
        let _ = writeln!(
            s,
            "\n{:<6} {:>8} {:>6} {:>9} {:>10} {:>8} {:>10} {:>8}",
            "split",
            "pairs",
            "empty",
            "trainable",
            format!("{} tok", self.source_lang),
            "cover",
            format!("{} tok", self.target_lang),
            "cover"
        );
        for r in &self.splits {
            let _ = writeln!(
                s,
                "{:<6} {:>8} {:>6} {:>9} {:>10} {:>8} {:>10} {:>8}",
                r.name,
                r.pairs,
                r.empty_pairs,
                r.trainable_pairs,
                r.source.tokens,
                pct(r.source.coverage),
                r.target.tokens,
                pct(r.target.coverage)
            );
        }
        let m = &self.monolingual;
        let _ = writeln!(
            s,
            "\nmonolingual {}: {} texts, {} tokens, coverage {}",
            self.target_lang,
            m.texts,
            m.tokens,
            pct(m.coverage)
        );
        let a = &self.adhoc;
        let _ = writeln!(
            s,
            "\nad-hoc task ({}):",
            if a.derived {
                "derived: target side of all pairs searched, test source sides as queries"
            } else {
                "declared in [adhoc]"
            }
        );
        let _ = writeln!(
            s,
            "  docs     {:>7}  {} tokens, coverage {}, {} without a known term",
            a.docs.texts,
            a.docs.tokens,
            pct(a.docs.coverage),
            a.docs.empty_texts
        );
        let _ = writeln!(
            s,
            "  queries  {:>7}  {} tokens, OOV rate {}, {} without a known term",
            a.queries.texts,
            a.queries.tokens,
            pct(a.queries.oov_rate),
            a.queries.empty_texts
        );
        if let Some(t) = &a.target_queries {
            let _ = writeln!(
                s,
                "  {}-queries {:>5}  {} tokens, OOV rate {}",
                self.target_lang,
                t.texts,
                t.tokens,
                pct(t.oov_rate)
            );
        }
        let _ = writeln!(
            s,
            "  qrels    {:>7} queries, {} judgements ({} relevant), {} naming unknown docs",
            a.qrels_queries, a.qrels_judgements, a.qrels_relevant, a.unknown_doc_judgements
        );
        match &self.dictionary {
            Some(d) => {
                let _ = writeln!(
                    s,
                    "\ndictionary {}{}: {} headwords ({} mangled dropped), {} single-term entries after analysis",
                    d.path,
                    if d.reversed { " (read reversed)" } else { "" },
                    d.headwords,
                    d.dropped_entries,
                    d.analysed_entries
                );
                let _ = writeln!(
                    s,
                    "  {} vocabulary with a translation: {} of terms, {} of train tokens; translations in {} vocabulary: {}; {} vocabulary covered: {}",
                    self.source_lang,
                    pct(d.source_vocab_coverage),
                    pct(d.source_token_coverage),
                    self.target_lang,
                    pct(d.target_in_vocab),
                    self.target_lang,
                    pct(d.target_vocab_coverage)
                );
            }
            None => {
                let _ = writeln!(s, "\nno dictionary");
            }
        }
        s
    }
}

fn dictionary_report(
    path: &std::path::Path,
    ws: &Workspace,
    p: &Prepared,
) -> Result<DictionaryReport> {
    let d = ws.read_dictionary()?.unwrap_or_default();
    let (src, tgt) = p.analyzers()?;
    let a = d.analysed(&src, &tgt);
    let sv = &p.vocabs.source;
    let tv = &p.vocabs.target;
    let covered: Vec<bool> = sv.terms.iter().map(|t| a.contains_key(t)).collect();
    let n_cov = covered.iter().filter(|c| **c).count();
    let mut targets: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for ts in a.values() {
        targets.extend(ts.iter().map(|t| t.as_str()));
    }
    let tgt_in = targets.iter().filter(|t| tv.id(t).is_some()).count();
    let tv_cov = tv
        .terms
        .iter()
        .filter(|t| targets.contains(t.as_str()))
        .count();
    let (mut tok, mut tok_cov) = (0usize, 0usize);
    for toks in &p.train.src_tokens {
        for t in toks {
            tok += 1;
            if a.contains_key(t) {
                tok_cov += 1;
            }
        }
    }
    let share = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    Ok(DictionaryReport {
        path: path.display().to_string(),
        reversed: ws.dictionary_reverse,
        headwords: d.len(),
        dropped_entries: d.dropped,
        analysed_entries: a.len(),
        source_vocab_coverage: share(n_cov, sv.len()),
        target_in_vocab: share(tgt_in, targets.len()),
        target_vocab_coverage: share(tv_cov, tv.len()),
        source_token_coverage: share(tok_cov, tok),
    })
}
