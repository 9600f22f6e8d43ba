//! Prepared data: a workspace analysed, its vocabularies built and every text
//! counted, cached on disk so that jobs do not redo it.
//!
//! The cache lives under `<workspace dir>/.rosetta-cache/<content hash>/`. A
//! job builds it in a private temporary folder and renames the folder into
//! place, so concurrent jobs preparing the same workspace never see (or
//! leave) a half-written cache; the loser of the race reads the winner's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::collection::{derived_task, AdhocTask};
use super::parallel::{ParallelText, Splits};
use super::workspace::Workspace;
use crate::eval::Qrels;
use crate::text::io::read_lines;
use crate::text::units::{UNITS_SOURCE, UNITS_TARGET};
use crate::text::{Analyzer, CsrMatrix, Sequences, TextConfig, UnitModel, Vocabulary};
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

/// Bump when the cache layout or the analysis changes (6: a lone combining
/// mark after a space is no word, issue 55).
const CACHE_VERSION: u32 = 6;

/// The learnt subword models of a workspace's two languages (`[text] units =
/// "bpe"` or `"unigram"`), shared by every analyser made from them.
pub type UnitModels = (Arc<UnitModel>, Arc<UnitModel>);

/// The two analysers (source, target) of text settings `cfg`, with learnt
/// unit models where `cfg.units` needs them.
pub fn analyzers_with(
    source_lang: &str,
    target_lang: &str,
    cfg: &TextConfig,
    models: Option<&UnitModels>,
) -> Result<(Analyzer, Analyzer)> {
    Ok(match models {
        Some((s, t)) if cfg.units.learnt() => (
            Analyzer::with_model(source_lang, cfg, s.clone())?,
            Analyzer::with_model(target_lang, cfg, t.clone())?,
        ),
        _ => (
            Analyzer::new(source_lang, cfg)?,
            Analyzer::new(target_lang, cfg)?,
        ),
    })
}

/// The workspace's two analysers (source, target), as its training data was
/// analysed: for learnt units (`bpe`, `unigram`) the unit models come from
/// the prepared-data cache, which is built (and the models learnt) when it
/// is missing or stale. Every engine path that analyses a workspace's text
/// makes its analysers here.
pub fn workspace_analyzers(ws: &Workspace) -> Result<(Analyzer, Analyzer)> {
    if !ws.text.units.learnt() {
        return analyzers_with(&ws.source_lang, &ws.target_lang, &ws.text, None);
    }
    let dir = ws.cache_root().join(ws.content_hash()?);
    let models = match load_cached_units(&dir) {
        Ok(m) => m,
        Err(_) => match Prepared::load_or_build(ws)?.unit_models {
            Some(m) => m,
            None => return Err(Error::invalid("prepared data without its unit models")),
        },
    };
    analyzers_with(&ws.source_lang, &ws.target_lang, &ws.text, Some(&models))
}

/// The unit models of a cache folder alone (its metadata and the two model
/// files checked), without reading the rest.
fn load_cached_units(dir: &Path) -> Result<UnitModels> {
    let (mp, meta) = read_meta(dir)?;
    let mut out = Vec::new();
    for name in [UNITS_SOURCE, UNITS_TARGET] {
        let path = dir.join(name);
        let want = meta
            .files
            .get(name)
            .ok_or_else(|| Error::file(&mp, format!("no {name} in the cache")))?;
        if &crate::util::hash_file(&path)? != want {
            return Err(Error::file(&path, "checksum mismatch"));
        }
        out.push(Arc::new(UnitModel::load(&path)?));
    }
    let t = out.pop().expect("two");
    let s = out.pop().expect("two");
    Ok((s, t))
}

/// Token and out-of-vocabulary counts of a set of texts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SideStats {
    /// Texts.
    pub texts: usize,
    /// Index terms (after stop words and stemming).
    pub tokens: usize,
    /// Tokens not in the vocabulary.
    pub oov: usize,
    /// Texts with no in-vocabulary term.
    pub empty_rows: usize,
}

impl SideStats {
    /// Share of tokens in the vocabulary (1 when there are no tokens).
    pub fn coverage(&self) -> f64 {
        if self.tokens == 0 {
            1.0
        } else {
            1.0 - self.oov as f64 / self.tokens as f64
        }
    }
}

/// One split, analysed and counted; row i of every field is pair i of the
/// split, empty pairs included (their rows are empty), so alignment holds.
#[derive(Debug, Clone, Default)]
pub struct SplitData {
    /// Indices of pairs with an empty or whitespace-only side (not trained on).
    pub empty: Vec<usize>,
    /// Index terms of each source text.
    pub src_tokens: Vec<Vec<String>>,
    /// Index terms of each target text.
    pub tgt_tokens: Vec<Vec<String>>,
    /// Each source text as read (for models with their own tokenizer).
    pub src_text: Vec<String>,
    /// Each target text as read.
    pub tgt_text: Vec<String>,
    /// Raw counts over the source vocabulary.
    pub src: CsrMatrix,
    /// Raw counts over the target vocabulary.
    pub tgt: CsrMatrix,
    /// Source-side statistics (empty pairs excluded).
    pub src_stats: SideStats,
    /// Target-side statistics (empty pairs excluded).
    pub tgt_stats: SideStats,
}

impl SplitData {
    /// The known terms of every text of `side` in reading order (all pairs,
    /// empty ones included), over `vocabs`' side: what a sequence model reads.
    pub fn sequences(&self, side: Side, vocabs: &Vocabs) -> Sequences {
        match side {
            Side::Source => Sequences::of(&vocabs.source, &self.src_tokens),
            Side::Target => Sequences::of(&vocabs.target, &self.tgt_tokens),
        }
    }

    /// Number of pairs, empty ones included.
    pub fn pairs(&self) -> usize {
        self.src.n_rows()
    }

    /// Pairs whose raw text is non-blank on both sides: the candidates of a
    /// sentence-retrieval evaluation. A side with no in-vocabulary term stays
    /// in (it encodes to a zero vector and ranks last): leaving it out would
    /// flatter models with small vocabularies.
    pub fn nonblank(&self) -> Vec<usize> {
        let empty: std::collections::HashSet<usize> = self.empty.iter().copied().collect();
        (0..self.pairs()).filter(|i| !empty.contains(i)).collect()
    }

    /// Pairs fit for training and validation: no empty side and at least
    /// one in-vocabulary term on each side.
    pub fn trainable(&self) -> Vec<usize> {
        let empty: std::collections::HashSet<usize> = self.empty.iter().copied().collect();
        (0..self.pairs())
            .filter(|i| {
                !empty.contains(i) && !self.src.row_is_empty(*i) && !self.tgt.row_is_empty(*i)
            })
            .collect()
    }
}

/// The ad-hoc task, counted.
#[derive(Debug, Clone, Default)]
pub struct AdhocData {
    /// Document ids, row order of `docs`.
    pub doc_ids: Vec<String>,
    /// Query ids, row order of `queries` (and `target_queries`).
    pub query_ids: Vec<String>,
    /// The documents as read (rows of `docs`).
    pub doc_texts: Vec<String>,
    /// The queries as read (rows of `queries`).
    pub query_texts: Vec<String>,
    /// The target-language queries as read (rows of `target_queries`).
    pub target_query_texts: Option<Vec<String>>,
    /// Raw counts of the documents over the target vocabulary.
    pub docs: CsrMatrix,
    /// Raw counts of the queries over the source vocabulary.
    pub queries: CsrMatrix,
    /// Raw counts of the target-language queries over the target vocabulary,
    /// rows aligned with `queries` (a query without a target version gets an empty row).
    pub target_queries: Option<CsrMatrix>,
    /// The documents' known terms in reading order (rows of `docs`).
    pub doc_seqs: Sequences,
    /// The queries' known terms in reading order (rows of `queries`).
    pub query_seqs: Sequences,
    /// The target-language queries in reading order (rows of `target_queries`).
    pub target_query_seqs: Option<Sequences>,
    /// Relevance judgements.
    pub qrels: Qrels,
    /// Whether the task was derived from the parallel data.
    pub derived: bool,
    /// Judgements naming unknown documents.
    pub unknown_doc_judgements: usize,
    /// Document statistics.
    pub doc_stats: SideStats,
    /// Query statistics.
    pub query_stats: SideStats,
    /// Target-language query statistics.
    pub target_query_stats: Option<SideStats>,
}

/// A workspace, analysed and counted.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The workspace's content hash (cache key).
    pub hash: String,
    /// Query language.
    pub source_lang: String,
    /// Document language.
    pub target_lang: String,
    /// Text settings used.
    pub text: TextConfig,
    /// Vocabularies, built on the training split.
    pub vocabs: Vocabs,
    /// Training split.
    pub train: SplitData,
    /// Validation split.
    pub valid: SplitData,
    /// Test split.
    pub test: SplitData,
    /// Target-language monolingual texts (`[monolingual]`, else the target
    /// side of the non-empty training pairs), raw counts.
    pub mono: CsrMatrix,
    /// The monolingual texts' known terms in reading order (rows of `mono`).
    pub mono_seqs: Sequences,
    /// Statistics of `mono`.
    pub mono_stats: SideStats,
    /// The ad-hoc task (declared, or derived from the parallel data).
    pub adhoc: AdhocData,
    /// Where the cache is (None when built without caching).
    pub cache_dir: Option<PathBuf>,
    /// The learnt subword models (`[text] units = "bpe"` or `"unigram"`),
    /// learnt on the usable training pairs of each language.
    pub unit_models: Option<UnitModels>,
}

impl Prepared {
    /// Loads the cached preparation of `ws`, building and caching it first
    /// when the data or settings changed (or nothing is cached yet). When the
    /// cache cannot be written (read-only folder) the result is returned
    /// uncached (`cache_dir` is `None`).
    pub fn load_or_build(ws: &Workspace) -> Result<Prepared> {
        let hash = ws.content_hash()?;
        let root = ws.cache_root();
        let dir = root.join(&hash);
        if dir.join("meta.json").exists() {
            match Self::load(&dir) {
                Ok(p) => return Ok(p),
                Err(_) => {
                    // unreadable (damaged, or written by another version):
                    // move it aside atomically, then rebuild
                    let aside =
                        root.join(format!(".{hash}.stale.{}.{}", std::process::id(), unique()));
                    if std::fs::rename(&dir, &aside).is_ok() {
                        let _ = std::fs::remove_dir_all(&aside);
                    }
                }
            }
        }
        let mut p = Self::build_with_hash(ws, hash)?;
        let tmp = root.join(format!(
            ".{}.tmp.{}.{}",
            p.hash,
            std::process::id(),
            unique()
        ));
        let saved = p.save(&tmp).and_then(|_| {
            match std::fs::rename(&tmp, &dir) {
                Ok(()) => Ok(()),
                // someone else finished first: theirs is as good as ours
                Err(_) if dir.join("meta.json").exists() => {
                    let _ = std::fs::remove_dir_all(&tmp);
                    Ok(())
                }
                Err(e) => Err(Error::io(&dir, e)),
            }
        });
        match saved {
            Ok(()) => p.cache_dir = Some(dir),
            // a read-only workspace folder: the data is still good, only uncached
            Err(_) => {
                let _ = std::fs::remove_dir_all(&tmp);
            }
        }
        Ok(p)
    }

    /// Analyses and counts `ws` without touching the cache.
    pub fn build(ws: &Workspace) -> Result<Prepared> {
        let hash = ws.content_hash()?;
        Self::build_with_hash(ws, hash)
    }

    fn build_with_hash(ws: &Workspace, hash: String) -> Result<Prepared> {
        ws.text.check_units()?;
        // words first: learnt units are learnt on them
        let (src_words, tgt_words) = analyzers_with(
            &ws.source_lang,
            &ws.target_lang,
            &ws.text.words_only(),
            None,
        )?;
        let splits = Splits::read(ws)?;
        let analyse = |an: &Analyzer, texts: &[String]| -> Vec<Vec<String>> {
            texts.par_iter().map(|t| an.analyze(t)).collect()
        };
        let mut toks = Vec::new();
        for (_, s) in splits.iter() {
            toks.push((
                analyse(&src_words, &s.source),
                analyse(&tgt_words, &s.target),
            ));
        }
        let usable = splits.train.usable();
        if usable.is_empty() {
            return Err(Error::file(
                &ws.path,
                format!(
                    "the training split has no usable pairs ({} pairs, all with an empty side)",
                    splits.train.len()
                ),
            ));
        }
        // subword units: models learnt on the usable training pairs' words
        let unit_models = if ws.text.units.learnt() {
            let learn = |lang: &str, t: &Vec<Vec<String>>| {
                UnitModel::learn(
                    lang,
                    ws.text.units,
                    ws.text.subword_vocab,
                    usable.iter().map(|&i| t[i].as_slice()),
                )
                .map(Arc::new)
            };
            Some((
                learn(&ws.source_lang, &toks[0].0)?,
                learn(&ws.target_lang, &toks[0].1)?,
            ))
        } else {
            None
        };
        let (src_an, tgt_an) = analyzers_with(
            &ws.source_lang,
            &ws.target_lang,
            &ws.text,
            unit_models.as_ref(),
        )?;
        if ws.text.units.subword() {
            for (st, tt) in toks.iter_mut() {
                let seg = |an: &Analyzer, t: &mut Vec<Vec<String>>| {
                    t.par_iter_mut()
                        .for_each(|w| *w = an.segment(std::mem::take(w)));
                };
                seg(&src_an, st);
                seg(&tgt_an, tt);
            }
        }
        // vocabularies on the usable training pairs
        let cfg = &ws.text;
        let pick = |t: &Vec<Vec<String>>| -> Vec<Vec<String>> {
            usable.iter().map(|&i| t[i].clone()).collect()
        };
        let vocabs = Vocabs {
            source: Vocabulary::build(
                &ws.source_lang,
                &pick(&toks[0].0),
                cfg.vocab_per_language,
                cfg.min_df,
            ),
            target: Vocabulary::build(
                &ws.target_lang,
                &pick(&toks[0].1),
                cfg.vocab_per_language,
                cfg.min_df,
            ),
        };
        // character n-grams for the words the vocabularies lack
        let mut vocabs = vocabs;
        if cfg.oov_ngrams > 0 {
            let (lo, hi) = (cfg.ngram_min, cfg.ngram_max);
            vocabs
                .source
                .add_fallback(&pick(&toks[0].0), cfg.oov_ngrams, cfg.min_df, lo, hi);
            vocabs
                .target
                .add_fallback(&pick(&toks[0].1), cfg.oov_ngrams, cfg.min_df, lo, hi);
        }
        // the surface forms behind the terms, for display
        for (an, vocab, texts) in [
            (&src_an, &mut vocabs.source, &splits.train.source),
            (&tgt_an, &mut vocabs.target, &splits.train.target),
        ] {
            let pairs: Vec<Vec<(String, String)>> = usable
                .par_iter()
                .map(|&i| an.analyze_pairs(&texts[i]))
                .collect();
            vocab.set_surface(
                pairs
                    .iter()
                    .flatten()
                    .map(|(w, t)| (w.as_str(), t.as_str())),
            );
        }
        let mut split_data = Vec::new();
        for ((_, s), (st, tt)) in splits.iter().into_iter().zip(toks) {
            split_data.push(count_split(s, st, tt, &vocabs));
        }
        let [train, valid, test]: [SplitData; 3] = split_data
            .try_into()
            .map_err(|_| Error::invalid("three splits expected"))?;

        // monolingual texts
        let (mono, mono_seqs, mono_stats) = match &ws.monolingual {
            Some(files) => {
                let mut texts = Vec::new();
                for f in files {
                    texts.extend(read_lines(f)?.into_iter().filter(|l| !l.trim().is_empty()));
                }
                count(&vocabs.target, &analyse(&tgt_an, &texts))
            }
            None => {
                let rows = train_rows(&train);
                let m = train.tgt.select_rows(&rows);
                let toks: Vec<&Vec<String>> = rows.iter().map(|&i| &train.tgt_tokens[i]).collect();
                let stats = stats_of(&m, &toks, &vocabs.target);
                let seqs = train.sequences(Side::Target, &vocabs).select_rows(&rows);
                (m, seqs, stats)
            }
        };

        // the ad-hoc task
        let adhoc = if ws.adhoc.is_some() {
            let task = AdhocTask::load(ws)?;
            count_task(&task, &src_an, &tgt_an, &vocabs)
        } else {
            let task = derived_task(&splits);
            derived_counts(task, [&train, &valid, &test], &vocabs)
        };

        Ok(Prepared {
            hash,
            source_lang: ws.source_lang.clone(),
            target_lang: ws.target_lang.clone(),
            text: ws.text.clone(),
            vocabs,
            train,
            valid,
            test,
            mono,
            mono_seqs,
            mono_stats,
            adhoc,
            cache_dir: None,
            unit_models,
        })
    }

    /// The split called `train`, `valid` or `test`.
    pub fn split(&self, name: &str) -> Option<&SplitData> {
        match name {
            "train" => Some(&self.train),
            "valid" => Some(&self.valid),
            "test" => Some(&self.test),
            _ => None,
        }
    }

    /// Analysers of both languages with the workspace's text settings.
    pub fn analyzers(&self) -> Result<(Analyzer, Analyzer)> {
        analyzers_with(
            &self.source_lang,
            &self.target_lang,
            &self.text,
            self.unit_models.as_ref(),
        )
    }

    /// Raw counts of new texts of one language (typed queries, other
    /// collections), analysed the way the workspace's texts were.
    pub fn count_texts(&self, side: Side, texts: &[String]) -> Result<CsrMatrix> {
        let (src, tgt) = self.analyzers()?;
        let (an, vocab) = match side {
            Side::Source => (src, &self.vocabs.source),
            Side::Target => (tgt, &self.vocabs.target),
        };
        let toks: Vec<Vec<String>> = texts.par_iter().map(|t| an.analyze(t)).collect();
        Ok(vocab.count_matrix(&toks))
    }

    // ---- the cache ----

    fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        self.vocabs.source.save(&dir.join("vocab.source.json"))?;
        self.vocabs.target.save(&dir.join("vocab.target.json"))?;
        if let Some((s, t)) = &self.unit_models {
            s.save(&dir.join(UNITS_SOURCE))?;
            t.save(&dir.join(UNITS_TARGET))?;
        }
        let mut splits = Vec::new();
        for (name, s) in [
            ("train", &self.train),
            ("valid", &self.valid),
            ("test", &self.test),
        ] {
            write_csr(&dir.join(format!("{name}.src.csr")), &s.src)?;
            write_csr(&dir.join(format!("{name}.tgt.csr")), &s.tgt)?;
            write_tokens(&dir.join(format!("{name}.src.tok")), &s.src_tokens)?;
            write_tokens(&dir.join(format!("{name}.tgt.tok")), &s.tgt_tokens)?;
            write_texts(&dir.join(format!("{name}.src.text")), &s.src_text)?;
            write_texts(&dir.join(format!("{name}.tgt.text")), &s.tgt_text)?;
            splits.push(SplitMeta {
                empty: s.empty.clone(),
                src_stats: s.src_stats,
                tgt_stats: s.tgt_stats,
            });
        }
        write_csr(&dir.join("mono.csr"), &self.mono)?;
        write_csr(&dir.join("mono.seq"), self.mono_seqs.layout())?;
        let a = &self.adhoc;
        write_csr(&dir.join("docs.csr"), &a.docs)?;
        write_csr(&dir.join("queries.csr"), &a.queries)?;
        write_csr(&dir.join("docs.seq"), a.doc_seqs.layout())?;
        write_csr(&dir.join("queries.seq"), a.query_seqs.layout())?;
        if let Some(tq) = &a.target_queries {
            write_csr(&dir.join("target_queries.csr"), tq)?;
        }
        if let Some(tq) = &a.target_query_seqs {
            write_csr(&dir.join("target_queries.seq"), tq.layout())?;
        }
        write_texts(&dir.join("docs.text"), &a.doc_texts)?;
        write_texts(&dir.join("queries.text"), &a.query_texts)?;
        if let Some(tq) = &a.target_query_texts {
            write_texts(&dir.join("target_queries.text"), tq)?;
        }
        // a BLAKE3 checksum of every file, checked when the cache is read
        let mut files = std::collections::BTreeMap::new();
        let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        for e in rd {
            let e = e.map_err(|e| Error::io(dir, e))?;
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || name == "meta.json" {
                continue;
            }
            files.insert(name, crate::util::hash_file(&e.path())?);
        }
        let meta = Meta {
            version: CACHE_VERSION,
            files,
            hash: self.hash.clone(),
            source_lang: self.source_lang.clone(),
            target_lang: self.target_lang.clone(),
            text: self.text.clone(),
            splits,
            mono_stats: self.mono_stats,
            doc_ids: a.doc_ids.clone(),
            query_ids: a.query_ids.clone(),
            has_target_queries: a.target_queries.is_some(),
            qrels: a.qrels.judgements.clone(),
            derived: a.derived,
            unknown_doc_judgements: a.unknown_doc_judgements,
            doc_stats: a.doc_stats,
            query_stats: a.query_stats,
            target_query_stats: a.target_query_stats,
        };
        let json = serde_json::to_vec(&meta).map_err(|e| Error::file(dir, e.to_string()))?;
        // written last: its presence marks a complete cache
        crate::util::write_atomic(&dir.join("meta.json"), &json)
    }

    /// Reads a cache folder written by [`Prepared::load_or_build`].
    pub fn load(dir: &Path) -> Result<Prepared> {
        let (mp, meta) = read_meta(dir)?;
        for (name, want) in &meta.files {
            let path = dir.join(name);
            if &crate::util::hash_file(&path)? != want {
                return Err(Error::file(
                    &path,
                    "checksum mismatch: the cached file changed after it was written",
                ));
            }
        }
        let vocabs = Vocabs {
            source: Vocabulary::load(&dir.join("vocab.source.json"))?,
            target: Vocabulary::load(&dir.join("vocab.target.json"))?,
        };
        let unit_models = if meta.text.units.learnt() {
            Some((
                Arc::new(UnitModel::load(&dir.join(UNITS_SOURCE))?),
                Arc::new(UnitModel::load(&dir.join(UNITS_TARGET))?),
            ))
        } else {
            None
        };
        let mut splits = Vec::new();
        for (name, m) in ["train", "valid", "test"].iter().zip(meta.splits) {
            splits.push(SplitData {
                empty: m.empty,
                src_tokens: read_tokens(&dir.join(format!("{name}.src.tok")))?,
                tgt_tokens: read_tokens(&dir.join(format!("{name}.tgt.tok")))?,
                src_text: read_texts(&dir.join(format!("{name}.src.text")))?,
                tgt_text: read_texts(&dir.join(format!("{name}.tgt.text")))?,
                src: read_csr(&dir.join(format!("{name}.src.csr")))?,
                tgt: read_csr(&dir.join(format!("{name}.tgt.csr")))?,
                src_stats: m.src_stats,
                tgt_stats: m.tgt_stats,
            });
        }
        let [train, valid, test]: [SplitData; 3] = splits
            .try_into()
            .map_err(|_| Error::file(&mp, "want three splits"))?;
        for s in [&train, &valid, &test] {
            let n = s.src.n_rows();
            if s.tgt.n_rows() != n
                || s.src_tokens.len() != n
                || s.tgt_tokens.len() != n
                || s.src_text.len() != n
                || s.tgt_text.len() != n
                || s.src.n_cols != vocabs.source.len()
                || s.tgt.n_cols != vocabs.target.len()
            {
                return Err(Error::file(dir, "cached splits do not fit together"));
            }
        }
        let adhoc = AdhocData {
            docs: read_csr(&dir.join("docs.csr"))?,
            queries: read_csr(&dir.join("queries.csr"))?,
            target_queries: if meta.has_target_queries {
                Some(read_csr(&dir.join("target_queries.csr"))?)
            } else {
                None
            },
            doc_seqs: read_seq(&dir.join("docs.seq"))?,
            query_seqs: read_seq(&dir.join("queries.seq"))?,
            target_query_seqs: if meta.has_target_queries {
                Some(read_seq(&dir.join("target_queries.seq"))?)
            } else {
                None
            },
            doc_texts: read_texts(&dir.join("docs.text"))?,
            query_texts: read_texts(&dir.join("queries.text"))?,
            target_query_texts: if meta.has_target_queries {
                Some(read_texts(&dir.join("target_queries.text"))?)
            } else {
                None
            },
            doc_ids: meta.doc_ids,
            query_ids: meta.query_ids,
            qrels: Qrels {
                judgements: meta.qrels,
            },
            derived: meta.derived,
            unknown_doc_judgements: meta.unknown_doc_judgements,
            doc_stats: meta.doc_stats,
            query_stats: meta.query_stats,
            target_query_stats: meta.target_query_stats,
        };
        let mono = read_csr(&dir.join("mono.csr"))?;
        let mono_seqs = read_seq(&dir.join("mono.seq"))?;
        let a = &adhoc;
        let fits =
            |m: &CsrMatrix, q: &Sequences| m.n_rows() == q.n_rows() && m.n_cols == q.n_terms();
        if !fits(&mono, &mono_seqs)
            || !fits(&a.docs, &a.doc_seqs)
            || !fits(&a.queries, &a.query_seqs)
            || !match (&a.target_queries, &a.target_query_seqs) {
                (Some(m), Some(q)) => fits(m, q),
                (None, None) => true,
                _ => false,
            }
        {
            return Err(Error::file(dir, "cached sequences do not fit their counts"));
        }
        if a.doc_texts.len() != a.docs.n_rows()
            || a.query_texts.len() != a.queries.n_rows()
            || a.target_query_texts.as_ref().map(Vec::len)
                != a.target_queries.as_ref().map(|m| m.n_rows())
        {
            return Err(Error::file(dir, "cached texts do not fit their counts"));
        }
        Ok(Prepared {
            hash: meta.hash,
            source_lang: meta.source_lang,
            target_lang: meta.target_lang,
            text: meta.text,
            vocabs,
            train,
            valid,
            test,
            mono,
            mono_seqs,
            mono_stats: meta.mono_stats,
            adhoc,
            cache_dir: Some(dir.to_path_buf()),
            unit_models,
        })
    }
}

/// The `meta.json` of cache folder `dir` (its path and contents), checked:
/// this version's, its languages codes ([`crate::text::check_lang`]) and
/// its file names plain names inside the folder, as a cache writes them.
fn read_meta(dir: &Path) -> Result<(PathBuf, Meta)> {
    let mp = dir.join("meta.json");
    let bytes = crate::util::read_regular(&mp, crate::util::Links::Refuse, u64::MAX)?;
    let meta: Meta = serde_json::from_slice(&bytes)
        .map_err(|e| Error::parse(&mp, e.line(), format!("bad cache metadata: {e}")))?;
    if meta.version != CACHE_VERSION {
        return Err(Error::file(&mp, "cache written by another version"));
    }
    for lang in [&meta.source_lang, &meta.target_lang] {
        crate::text::check_lang(lang).map_err(|why| Error::file(&mp, why))?;
    }
    for name in meta.files.keys() {
        let plain = Path::new(name).file_name() == Some(std::ffi::OsStr::new(name));
        if !plain || name.starts_with('.') {
            return Err(Error::file(
                &mp,
                format!("cache file name {name:?} is not a plain name inside the cache"),
            ));
        }
    }
    Ok((mp, meta))
}

#[derive(Serialize, Deserialize)]
struct SplitMeta {
    empty: Vec<usize>,
    src_stats: SideStats,
    tgt_stats: SideStats,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    version: u32,
    /// BLAKE3 of every cache file by name.
    files: std::collections::BTreeMap<String, String>,
    hash: String,
    source_lang: String,
    target_lang: String,
    text: TextConfig,
    splits: Vec<SplitMeta>,
    mono_stats: SideStats,
    doc_ids: Vec<String>,
    query_ids: Vec<String>,
    has_target_queries: bool,
    qrels: std::collections::BTreeMap<String, std::collections::BTreeMap<String, i32>>,
    derived: bool,
    unknown_doc_judgements: usize,
    doc_stats: SideStats,
    query_stats: SideStats,
    target_query_stats: Option<SideStats>,
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{nanos}.{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Rows of the non-empty pairs of a split.
fn train_rows(s: &SplitData) -> Vec<usize> {
    let empty: std::collections::HashSet<usize> = s.empty.iter().copied().collect();
    (0..s.pairs()).filter(|i| !empty.contains(i)).collect()
}

/// Count matrix, sequences and statistics of token lists.
fn count(vocab: &Vocabulary, toks: &[Vec<String>]) -> (CsrMatrix, Sequences, SideStats) {
    let enc: Vec<_> = toks.par_iter().map(|t| vocab.encode(t)).collect();
    let mut m = CsrMatrix::new(vocab.len());
    let mut s = SideStats {
        texts: toks.len(),
        ..Default::default()
    };
    for e in enc {
        s.tokens += e.tokens;
        s.oov += e.oov;
        if e.counts.is_empty() {
            s.empty_rows += 1;
        }
        m.push_row(e.counts);
    }
    (m, Sequences::of(vocab, toks), s)
}

/// Statistics of already-counted rows and their tokens.
fn stats_of(m: &CsrMatrix, toks: &[&Vec<String>], vocab: &Vocabulary) -> SideStats {
    let mut s = SideStats {
        texts: toks.len(),
        ..Default::default()
    };
    for (i, t) in toks.iter().enumerate() {
        s.tokens += t.len();
        s.oov += t.iter().filter(|w| vocab.id(w).is_none()).count();
        if m.row_is_empty(i) {
            s.empty_rows += 1;
        }
    }
    s
}

fn count_split(
    s: &ParallelText,
    src_tokens: Vec<Vec<String>>,
    tgt_tokens: Vec<Vec<String>>,
    vocabs: &Vocabs,
) -> SplitData {
    let empty = s.empty_pairs();
    let (src, _, _) = count(&vocabs.source, &src_tokens);
    let (tgt, _, _) = count(&vocabs.target, &tgt_tokens);
    let mut d = SplitData {
        empty,
        src_text: s.source.clone(),
        tgt_text: s.target.clone(),
        src_tokens,
        tgt_tokens,
        src,
        tgt,
        ..Default::default()
    };
    let rows = train_rows(&d);
    let st: Vec<&Vec<String>> = rows.iter().map(|&i| &d.src_tokens[i]).collect();
    let tt: Vec<&Vec<String>> = rows.iter().map(|&i| &d.tgt_tokens[i]).collect();
    d.src_stats = stats_of(&d.src.select_rows(&rows), &st, &vocabs.source);
    d.tgt_stats = stats_of(&d.tgt.select_rows(&rows), &tt, &vocabs.target);
    d
}

fn count_task(task: &AdhocTask, src: &Analyzer, tgt: &Analyzer, vocabs: &Vocabs) -> AdhocData {
    let an = |a: &Analyzer, texts: &[String]| -> Vec<Vec<String>> {
        texts.par_iter().map(|t| a.analyze(t)).collect()
    };
    let (docs, doc_seqs, doc_stats) = count(&vocabs.target, &an(tgt, &task.docs.texts));
    let (queries, query_seqs, query_stats) = count(&vocabs.source, &an(src, &task.queries.texts));
    let (target_queries, target_query_seqs, target_query_stats, target_query_texts) =
        match &task.target_queries {
            Some(tq) => {
                // align with the source queries by id
                let pos = tq.index();
                let texts: Vec<String> = task
                    .queries
                    .ids
                    .iter()
                    .map(|id| {
                        pos.get(id.as_str())
                            .map(|&i| tq.texts[i].clone())
                            .unwrap_or_default()
                    })
                    .collect();
                let (m, q, s) = count(&vocabs.target, &an(tgt, &texts));
                (Some(m), Some(q), Some(s), Some(texts))
            }
            None => (None, None, None, None),
        };
    AdhocData {
        doc_texts: task.docs.texts.clone(),
        query_texts: task.queries.texts.clone(),
        target_query_texts,
        doc_ids: task.docs.ids.clone(),
        query_ids: task.queries.ids.clone(),
        docs,
        queries,
        target_queries,
        doc_seqs,
        query_seqs,
        target_query_seqs,
        qrels: task.qrels.clone(),
        derived: task.derived,
        unknown_doc_judgements: task.unknown_doc_judgements,
        doc_stats,
        query_stats,
        target_query_stats,
    }
}

/// The derived task's matrices, taken from the split matrices already counted.
fn derived_counts(task: AdhocTask, splits: [&SplitData; 3], vocabs: &Vocabs) -> AdhocData {
    let mut docs = CsrMatrix::new(vocabs.target.len());
    let mut doc_seqs = Sequences::new(vocabs.target.len());
    let mut doc_toks: Vec<&Vec<String>> = Vec::new();
    let mut doc_texts = Vec::new();
    for s in splits {
        let rows = train_rows(s);
        for &i in &rows {
            doc_texts.push(s.tgt_text[i].clone());
            let (c, v) = s.tgt.row(i);
            docs.push_row(c.iter().copied().zip(v.iter().copied()));
            doc_seqs.push_row(&vocabs.target.sequence(&s.tgt_tokens[i]));
            doc_toks.push(&s.tgt_tokens[i]);
        }
    }
    let test = splits[2];
    let rows = train_rows(test);
    let queries = test.src.select_rows(&rows);
    let tq = test.tgt.select_rows(&rows);
    let qt: Vec<&Vec<String>> = rows.iter().map(|&i| &test.src_tokens[i]).collect();
    let tqt: Vec<&Vec<String>> = rows.iter().map(|&i| &test.tgt_tokens[i]).collect();
    AdhocData {
        doc_texts,
        query_texts: rows.iter().map(|&i| test.src_text[i].clone()).collect(),
        target_query_texts: Some(rows.iter().map(|&i| test.tgt_text[i].clone()).collect()),
        doc_stats: stats_of(&docs, &doc_toks, &vocabs.target),
        query_stats: stats_of(&queries, &qt, &vocabs.source),
        target_query_stats: Some(stats_of(&tq, &tqt, &vocabs.target)),
        doc_ids: task.docs.ids,
        query_ids: task.queries.ids,
        docs,
        queries,
        target_queries: Some(tq),
        doc_seqs,
        query_seqs: test.sequences(Side::Source, vocabs).select_rows(&rows),
        target_query_seqs: Some(test.sequences(Side::Target, vocabs).select_rows(&rows)),
        qrels: task.qrels,
        derived: true,
        unknown_doc_judgements: 0,
    }
}

// ---- file formats ----

const CSR_MAGIC: &[u8; 8] = b"RCSR\x01\0\0\0";

/// Writes a CSR matrix in a small binary format: magic, `n_rows`, `n_cols`,
/// `nnz` (u64 LE), then `indptr` (u64), `indices` (u32) and `values` (f32),
/// all little-endian. Atomic.
pub fn write_csr(path: &Path, m: &CsrMatrix) -> Result<()> {
    let mut b = Vec::with_capacity(32 + m.indptr.len() * 8 + m.nnz() * 8);
    b.extend_from_slice(CSR_MAGIC);
    for v in [m.n_rows(), m.n_cols, m.nnz()] {
        b.extend_from_slice(&(v as u64).to_le_bytes());
    }
    for v in &m.indptr {
        b.extend_from_slice(&(*v as u64).to_le_bytes());
    }
    for v in &m.indices {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for v in &m.values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    crate::util::write_atomic(path, &b)
}

/// Reads a matrix written by [`write_csr`], checking its structure.
pub fn read_csr(path: &Path) -> Result<CsrMatrix> {
    let b = crate::util::read_regular(path, crate::util::Links::Refuse, u64::MAX)?;
    let bad = |m: &str| Error::file(path, format!("bad matrix file: {m}"));
    if b.len() < 32 || &b[..8] != CSR_MAGIC {
        return Err(bad("no RCSR header"));
    }
    let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8])) as usize;
    let (rows, cols, nnz) = (u(8), u(16), u(24));
    let want = rows
        .checked_add(1)
        .and_then(|r| r.checked_mul(8))
        .and_then(|x| x.checked_add(nnz.checked_mul(8)?))
        .and_then(|x| x.checked_add(32));
    if want != Some(b.len()) {
        return Err(bad("size does not match its header"));
    }
    let mut o = 32;
    let mut indptr = Vec::with_capacity(rows + 1);
    for _ in 0..=rows {
        indptr.push(u(o));
        o += 8;
    }
    let mut indices = Vec::with_capacity(nnz);
    for _ in 0..nnz {
        indices.push(u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]));
        o += 4;
    }
    let mut values = Vec::with_capacity(nnz);
    for _ in 0..nnz {
        values.push(f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]));
        o += 4;
    }
    if indptr[0] != 0 || indptr[rows] != nnz || indptr.windows(2).any(|w| w[0] > w[1]) {
        return Err(bad("row pointers out of order"));
    }
    if indices.iter().any(|&c| c as usize >= cols) {
        return Err(bad("column index out of range"));
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(bad(&format!("value {i} is not finite")));
    }
    Ok(CsrMatrix {
        n_cols: cols,
        indptr,
        indices,
        values,
    })
}

/// Reads sequences written by [`write_csr`] from [`Sequences::layout`].
fn read_seq(path: &Path) -> Result<Sequences> {
    Sequences::from_layout(read_csr(path)?)
        .map_err(|e| Error::file(path, format!("bad sequence file: {e}")))
}

fn write_tokens(path: &Path, toks: &[Vec<String>]) -> Result<()> {
    let mut s = String::new();
    for t in toks {
        s.push_str(&t.join(" "));
        s.push('\n');
    }
    crate::util::write_atomic(path, s.as_bytes())
}

/// Writes texts as one JSON array (texts may hold any character).
fn write_texts(path: &Path, texts: &[String]) -> Result<()> {
    let json = serde_json::to_vec(texts).map_err(|e| Error::file(path, e.to_string()))?;
    crate::util::write_atomic(path, &json)
}

fn read_texts(path: &Path) -> Result<Vec<String>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::parse(path, e.line(), format!("bad cached texts: {e}")))
}

fn read_tokens(path: &Path) -> Result<Vec<Vec<String>>> {
    Ok(read_lines(path)?
        .iter()
        .map(|l| {
            l.split(' ')
                .filter(|t| !t.is_empty())
                .map(String::from)
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.csr");
        let mut m = CsrMatrix::new(5);
        m.push_row([(1, 2.0), (4, 1.0)]);
        m.push_row([]);
        m.push_row([(0, 3.5)]);
        write_csr(&p, &m).unwrap();
        assert_eq!(read_csr(&p).unwrap(), m);
        let mut b = std::fs::read(&p).unwrap();
        b.pop();
        std::fs::write(&p, &b).unwrap();
        assert!(read_csr(&p).unwrap_err().to_string().contains("m.csr"));
    }
}
