//! Subword units: what an analysed word becomes before it is counted.
//!
//! `[text] units` chooses the index units of a workspace:
//! - `words` (the default): one term per word, as the analyser gives it;
//! - `char-ngrams`: fastText-style character n-grams of the word wrapped in
//!   boundary marks, `<word>`, for n in `ngram_min..=ngram_max` (3..5), plus
//!   the whole `<word>` itself; no learning;
//! - `bpe` / `unigram`: pieces of a byte-pair-encoding or Unigram (SentencePiece)
//!   model learnt per language on the workspace's training text with the
//!   HuggingFace `tokenizers` trainers, `subword_vocab` pieces each.
//!
//! Units are applied to each word after normalisation, stop-word removal and
//! (when `stem = true`) stemming; subword workspaces normally set
//! `stem = false` and let the units share the stems.
//!
//! Every subword unit carries the fastText boundary marks: `<` where it starts
//! a word and `>` where it ends one (BPE and Unigram learn on `<word>` too, so
//! their pieces carry the marks the same way). Neither mark can occur inside
//! an analysed word (UAX #29 words hold no `<` or `>`), so a unit is a plain
//! string term like any word. [`display_unit`] turns a unit into what a person
//! reads: `<light` → `light…`, `ing>` → `…ing`, `igh` → `…igh…`, `<light>` → `light`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokenizers::models::bpe::{BpeTrainer, BPE};
use tokenizers::models::unigram::{Unigram, UnigramTrainer};
use tokenizers::{Model, Trainer};

use crate::{Error, Result};

/// What a word becomes (`[text] units`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Units {
    /// One term per word.
    #[default]
    Words,
    /// Byte-pair-encoding pieces learnt on the training text.
    Bpe,
    /// Unigram-language-model (SentencePiece) pieces learnt on the training text.
    Unigram,
    /// Character n-grams of `<word>` plus the whole word.
    CharNgrams,
}

impl Units {
    /// The name used in the workspace TOML.
    pub fn name(self) -> &'static str {
        match self {
            Units::Words => "words",
            Units::Bpe => "bpe",
            Units::Unigram => "unigram",
            Units::CharNgrams => "char-ngrams",
        }
    }

    /// Whether the units are learnt from the training text (BPE, Unigram).
    pub fn learnt(self) -> bool {
        matches!(self, Units::Bpe | Units::Unigram)
    }

    /// Whether a word may become several units.
    pub fn subword(self) -> bool {
        self != Units::Words
    }

    pub(crate) fn is_words(&self) -> bool {
        *self == Units::Words
    }
}

impl std::fmt::Display for Units {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// File of a learnt source-language unit model, in a session folder and in
/// the prepared-data cache (next to `vocab.source.json`).
pub const UNITS_SOURCE: &str = "units.source.json";
/// File of a learnt target-language unit model.
pub const UNITS_TARGET: &str = "units.target.json";

/// Default size of a learnt subword vocabulary (`subword_vocab`).
pub const DEFAULT_SUBWORD_VOCAB: usize = 8000;
/// Default smallest character n-gram (`ngram_min`).
pub const DEFAULT_NGRAM_MIN: usize = 3;
/// Default largest character n-gram (`ngram_max`).
pub const DEFAULT_NGRAM_MAX: usize = 5;

pub(crate) fn default_subword_vocab() -> usize {
    DEFAULT_SUBWORD_VOCAB
}
pub(crate) fn default_ngram_min() -> usize {
    DEFAULT_NGRAM_MIN
}
pub(crate) fn default_ngram_max() -> usize {
    DEFAULT_NGRAM_MAX
}
pub(crate) fn is_default_subword_vocab(v: &usize) -> bool {
    *v == DEFAULT_SUBWORD_VOCAB
}
pub(crate) fn is_default_ngram_min(v: &usize) -> bool {
    *v == DEFAULT_NGRAM_MIN
}
pub(crate) fn is_default_ngram_max(v: &usize) -> bool {
    *v == DEFAULT_NGRAM_MAX
}

/// Character n-grams of `word` in fastText's way: `<word>` cut into every
/// run of `min..=max` characters, then the whole `<word>` (once, even when it
/// is itself one of the n-grams).
pub fn char_ngrams(word: &str, min: usize, max: usize, out: &mut Vec<String>) {
    if word.is_empty() {
        return;
    }
    let chars: Vec<char> = std::iter::once('<')
        .chain(word.chars())
        .chain(std::iter::once('>'))
        .collect();
    let len = chars.len();
    for n in min.max(1)..=max {
        if n >= len {
            break;
        }
        for w in chars.windows(n) {
            out.push(w.iter().collect());
        }
    }
    out.push(chars.iter().collect());
}

/// What a person reads for a unit: boundary marks turned into ellipses where
/// the unit does not reach the word's edge (`<light` → `light…`, `ing>` →
/// `…ing`, `igh` → `…igh…`, `<light>` → `light`). For subword units only:
/// a plain word would read as an inner piece ([`crate::text::Analyzer::display`]
/// leaves words alone).
pub fn display_unit(unit: &str) -> String {
    let starts = unit.starts_with('<');
    let ends = unit.ends_with('>') && unit.len() > usize::from(starts);
    let mut core = unit;
    if starts {
        core = &core[1..];
    }
    if ends {
        core = &core[..core.len() - 1];
    }
    let mut s = String::with_capacity(core.len() + 6);
    if !starts {
        s.push('…');
    }
    s.push_str(core);
    if !ends {
        s.push('…');
    }
    s
}

/// The unknown-character piece of a learnt Unigram model (dropped from output).
const UNK: &str = "\u{FFFD}";

#[derive(Serialize, Deserialize)]
enum Learnt {
    Bpe(BPE),
    Unigram(Unigram),
}

/// A subword model learnt on one language's training words.
#[derive(Serialize, Deserialize)]
pub struct UnitModel {
    /// Language code.
    lang: String,
    /// `bpe` or `unigram`.
    units: Units,
    /// Pieces asked for.
    vocab_size: usize,
    model: Learnt,
}

impl std::fmt::Debug for UnitModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitModel")
            .field("lang", &self.lang)
            .field("units", &self.units)
            .field("pieces", &self.pieces())
            .finish()
    }
}

impl UnitModel {
    /// Learns a `units` (BPE or Unigram) model of `vocab_size` pieces on the
    /// analysed words of `texts` (each a list of words, repeats counted).
    pub fn learn<'a>(
        lang: &str,
        units: Units,
        vocab_size: usize,
        texts: impl Iterator<Item = &'a [String]>,
    ) -> Result<UnitModel> {
        let mut counts: HashMap<&str, u64> = HashMap::new();
        for t in texts {
            for w in t {
                if !w.is_empty() {
                    *counts.entry(w.as_str()).or_default() += 1;
                }
            }
        }
        if counts.is_empty() {
            return Err(Error::invalid(format!(
                "no training words in language {lang} to learn {units} units from"
            )));
        }
        // sorted, so that the learnt model does not depend on hash order
        let mut sorted: Vec<(&str, u64)> = counts.into_iter().collect();
        sorted.sort_unstable();
        let fail = |e: tokenizers::Error| Error::invalid(format!("learning {units} units: {e}"));
        let model = match units {
            Units::Bpe => {
                let mut trainer = BpeTrainer::builder()
                    .vocab_size(vocab_size)
                    .min_frequency(1)
                    .show_progress(false)
                    .build();
                feed_counts(&mut trainer, &sorted).map_err(fail)?;
                let mut m = BPE::default();
                trainer.train(&mut m).map_err(fail)?;
                Learnt::Bpe(m)
            }
            Units::Unigram => {
                let mut trainer = UnigramTrainer::builder()
                    .vocab_size(vocab_size.min(u32::MAX as usize) as u32)
                    .unk_token(Some(UNK.to_string()))
                    .show_progress(false)
                    .build()
                    .map_err(|e| Error::invalid(format!("unigram trainer: {e}")))?;
                feed_counts(&mut trainer, &sorted).map_err(fail)?;
                let mut m = Unigram::default();
                trainer.train(&mut m).map_err(fail)?;
                Learnt::Unigram(m)
            }
            u => {
                return Err(Error::invalid(format!(
                    "units = \"{u}\" are not learnt (only bpe and unigram are)"
                )))
            }
        };
        Ok(UnitModel {
            lang: lang.to_string(),
            units,
            vocab_size,
            model,
        })
    }

    /// Language code.
    pub fn lang(&self) -> &str {
        &self.lang
    }

    /// `bpe` or `unigram`.
    pub fn units(&self) -> Units {
        self.units
    }

    /// Number of pieces of the model.
    pub fn pieces(&self) -> usize {
        match &self.model {
            Learnt::Bpe(m) => m.get_vocab_size(),
            Learnt::Unigram(m) => m.get_vocab_size(),
        }
    }

    /// Pieces of one analysed word, boundary marks attached (a lone `<` or
    /// `>` piece joins its neighbour; unknown characters are dropped).
    pub fn segment(&self, word: &str, out: &mut Vec<String>) {
        if word.is_empty() {
            return;
        }
        let marked = format!("<{word}>");
        let (toks, unk) = match &self.model {
            Learnt::Bpe(m) => (m.tokenize(&marked), None),
            Learnt::Unigram(m) => (m.tokenize(&marked), m.token_to_id(UNK)),
        };
        let mut pieces: Vec<String> = match toks {
            // unknown characters come back as their own text with the unk id
            Ok(t) => t
                .into_iter()
                .filter(|t| Some(t.id) != unk && !t.value.is_empty())
                .map(|t| t.value)
                .collect(),
            // a model that cannot segment the word: the word stays whole
            Err(_) => vec![marked],
        };
        if pieces.len() > 1 && pieces[0] == "<" {
            pieces.remove(0);
            pieces[0].insert(0, '<');
        }
        let n = pieces.len();
        if n > 1 && pieces[n - 1] == ">" {
            pieces.pop();
            pieces[n - 2].push('>');
        }
        out.extend(
            pieces
                .into_iter()
                .filter(|p| p != "<" && p != ">" && p != "<>"),
        );
    }

    /// Writes the model as JSON (atomically).
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_vec(self).map_err(|e| Error::file(path, e.to_string()))?;
        crate::util::write_atomic(path, &json)
    }

    /// Reads a model written by [`UnitModel::save`].
    pub fn load(path: &Path) -> Result<UnitModel> {
        let bytes = crate::util::read_regular(path, crate::util::Links::Refuse, u64::MAX)?;
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::parse(path, e.line(), format!("bad unit model: {e}")))
    }
}

/// Feeds word counts to a trainer: each distinct word is one sequence whose
/// `process` repeats it `count` times (the trainers count what `process`
/// returns), wrapped in the `<`…`>` boundary marks.
fn feed_counts<T: Trainer>(trainer: &mut T, counts: &[(&str, u64)]) -> tokenizers::Result<()> {
    let lookup: HashMap<&str, u64> = counts.iter().copied().collect();
    trainer.feed(counts.iter().map(|(w, _)| *w), |w| {
        let n = lookup.get(w).copied().unwrap_or(1) as usize;
        Ok(vec![format!("<{w}>"); n])
    })
}

/// How an [`crate::text::Analyzer`] turns a word-level term into units.
#[derive(Debug, Default)]
pub(crate) enum Segmenter {
    /// The term itself.
    #[default]
    Words,
    /// Character n-grams, `min..=max`.
    CharNgrams(usize, usize),
    /// A learnt model.
    Learnt(Arc<UnitModel>),
}

impl Segmenter {
    /// The segmenter of `units` (character n-grams of `ngram` = (min, max)
    /// characters) for language `lang`; a learnt kind needs its model. The
    /// sizes are checked by `TextConfig::check_units`.
    pub(crate) fn new(
        lang: &str,
        units: Units,
        ngram: (usize, usize),
        model: Option<Arc<UnitModel>>,
    ) -> Result<Self> {
        match (units, model) {
            (Units::Words, None) => Ok(Segmenter::Words),
            (Units::CharNgrams, None) => Ok(Segmenter::CharNgrams(ngram.0, ngram.1)),
            (u, None) => Err(Error::invalid(format!(
                "units = \"{u}\" need the unit model learnt on the workspace's training text \
                 (language {lang}); make the analysers with corpus::workspace_analyzers \
                 or Analyzer::with_model"
            ))),
            (u, Some(m)) if m.units != u => Err(Error::invalid(format!(
                "the unit model is {} but the text settings ask for units = \"{u}\"",
                m.units
            ))),
            (_, Some(m)) if m.lang != lang => Err(Error::invalid(format!(
                "the unit model is for language {} but the analyser for {lang}",
                m.lang
            ))),
            (_, Some(m)) => Ok(Segmenter::Learnt(m)),
        }
    }

    pub(crate) fn units(&self) -> Units {
        match self {
            Segmenter::Words => Units::Words,
            Segmenter::CharNgrams(..) => Units::CharNgrams,
            Segmenter::Learnt(m) => m.units,
        }
    }

    /// Units of one word-level term, appended to `out`.
    pub(crate) fn push(&self, term: String, out: &mut Vec<String>) {
        match self {
            Segmenter::Words => out.push(term),
            Segmenter::CharNgrams(a, b) => char_ngrams(&term, *a, *b, out),
            Segmenter::Learnt(m) => m.segment(&term, out),
        }
    }

    /// Units of word-level terms, in order.
    pub(crate) fn apply(&self, terms: Vec<String>) -> Vec<String> {
        if let Segmenter::Words = self {
            return terms;
        }
        let mut out = Vec::with_capacity(terms.len() * 3);
        for t in terms {
            self.push(t, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::analyzer::TextConfig;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn char_ngrams_fasttext_style() {
        let mut out = Vec::new();
        char_ngrams("where", 3, 5, &mut out);
        assert_eq!(
            out,
            s(&[
                "<wh", "whe", "her", "ere", "re>", "<whe", "wher", "here", "ere>", "<wher",
                "where", "here>", "<where>"
            ])
        );
        // a short word: n-grams up to its marked length, whole word once
        let mut out = Vec::new();
        char_ngrams("a", 3, 5, &mut out);
        assert_eq!(out, s(&["<a>"]));
        let mut out = Vec::new();
        char_ngrams("ab", 3, 5, &mut out);
        assert_eq!(out, s(&["<ab", "ab>", "<ab>"]));
        // Devanagari: characters, not bytes
        let mut out = Vec::new();
        char_ngrams("भाषा", 3, 3, &mut out);
        assert_eq!(out, s(&["<भा", "भाष", "ाषा", "षा>", "<भाषा>"]));
    }

    #[test]
    fn display_marks() {
        assert_eq!(display_unit("<light"), "light…");
        assert_eq!(display_unit("ing>"), "…ing");
        assert_eq!(display_unit("igh"), "…igh…");
        assert_eq!(display_unit("<light>"), "light");
    }

    fn corpus() -> Vec<Vec<String>> {
        let line = "lighting lighter lightly lights light sighting sights night nights nightly \
                    fighting fights fighter right rights rightly";
        (0..20)
            .map(|_| line.split(' ').map(String::from).collect())
            .collect()
    }

    #[test]
    fn bpe_learns_marked_pieces_and_round_trips() {
        let texts = corpus();
        let m = UnitModel::learn("en", Units::Bpe, 25, texts.iter().map(|t| t.as_slice())).unwrap();
        let mut out = Vec::new();
        m.segment("lighting", &mut out);
        // pieces reassemble the marked word, first marked `<`, last `>`
        assert!(out.len() > 1, "{out:?}");
        assert_eq!(out.concat(), "<lighting>");
        assert!(out[0].starts_with('<') && out.last().unwrap().ends_with('>'));
        // an unseen word made of seen pieces
        let mut out2 = Vec::new();
        m.segment("nighting", &mut out2);
        assert_eq!(out2.concat(), "<nighting>");
        // saved and loaded, the same segmentation
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("units.json");
        m.save(&p).unwrap();
        let back = UnitModel::load(&p).unwrap();
        let mut out3 = Vec::new();
        back.segment("lighting", &mut out3);
        assert_eq!(out3, out);
        assert_eq!(back.units(), Units::Bpe);
    }

    #[test]
    fn unigram_learns_and_segments() {
        let texts = corpus();
        let m =
            UnitModel::learn("en", Units::Unigram, 80, texts.iter().map(|t| t.as_slice())).unwrap();
        assert!(m.pieces() <= 80);
        let mut out = Vec::new();
        m.segment("fighting", &mut out);
        assert!(!out.is_empty());
        assert_eq!(out.concat(), "<fighting>");
        assert!(out.iter().all(|p| p != "<" && p != ">"), "{out:?}");
        // an unknown character is dropped, the rest kept
        let mut out = Vec::new();
        m.segment("lightq", &mut out);
        assert_eq!(out.concat(), "<light>");
    }

    #[test]
    fn segmenter_refuses_missing_or_wrong_model() {
        let cfg = TextConfig {
            units: Units::Bpe,
            ..Default::default()
        };
        let new = |lang: &str, cfg: &TextConfig, m: Option<Arc<UnitModel>>| {
            cfg.check_units()?;
            Segmenter::new(lang, cfg.units, (cfg.ngram_min, cfg.ngram_max), m)
        };
        let err = new("en", &cfg, None).unwrap_err().to_string();
        assert!(err.contains("bpe"), "{err}");
        let texts = corpus();
        let m = UnitModel::learn("en", Units::Bpe, 60, texts.iter().map(|t| t.as_slice())).unwrap();
        assert!(new("hi", &cfg, Some(Arc::new(m))).is_err());
        let bad = TextConfig {
            units: Units::CharNgrams,
            ngram_min: 4,
            ngram_max: 3,
            ..Default::default()
        };
        assert!(new("en", &bad, None).is_err());
    }

    #[test]
    fn analyzer_applies_units_after_stop_words_and_stems() {
        use crate::text::Analyzer;
        let cfg = TextConfig {
            units: Units::CharNgrams,
            ngram_min: 3,
            ngram_max: 3,
            stem: false,
            stopwords: true,
            ..Default::default()
        };
        let a = Analyzer::new("en", &cfg).unwrap();
        // "the" is a stop word: no units from it
        assert_eq!(
            a.analyze("The Dogs"),
            s(&["<do", "dog", "ogs", "gs>", "<dogs>"])
        );
        assert_eq!(a.analyze_words("The Dogs"), s(&["dogs"]));
        assert_eq!(a.terms("the"), Vec::<String>::new());
        assert_eq!(a.display("<do"), "do…");
        // stemming first when asked
        let stemmed = Analyzer::new(
            "en",
            &TextConfig {
                stem: true,
                ..cfg.clone()
            },
        )
        .unwrap();
        assert_eq!(stemmed.analyze("dogs"), s(&["<do", "dog", "og>", "<dog>"]));
        // learnt units need their model
        let bpe = TextConfig {
            units: Units::Bpe,
            ..Default::default()
        };
        assert!(Analyzer::new("en", &bpe).is_err());
        let texts = corpus();
        let m = UnitModel::learn("en", Units::Bpe, 60, texts.iter().map(|t| t.as_slice())).unwrap();
        let a = Analyzer::with_model("en", &bpe.words_only(), Arc::new(m));
        assert!(a.is_err(), "a model for words-only settings is refused");
    }

    #[test]
    fn settings_default_to_words_and_keep_old_hashes() {
        // the old defaults serialise as before (so workspace hashes and saved
        // configs do not change), and the new keys parse
        let json = serde_json::to_string(&TextConfig::legacy()).unwrap();
        assert_eq!(
            json,
            r#"{"vocab_per_language":10000,"min_df":2,"stopwords":true,"stem":true}"#
        );
        let c: TextConfig =
            toml::from_str("units = \"char-ngrams\"\nngram_min = 2\nstem = false").unwrap();
        assert_eq!(c.units, Units::CharNgrams);
        assert_eq!((c.ngram_min, c.ngram_max), (2, 5));
        let c: TextConfig = toml::from_str("units = \"unigram\"\nsubword_vocab = 500").unwrap();
        assert_eq!((c.units, c.subword_vocab), (Units::Unigram, 500));
        assert!(toml::from_str::<TextConfig>("units = \"morfessor\"").is_err());
        let old: TextConfig = toml::from_str("min_df = 1").unwrap();
        assert_eq!(old.units, Units::Words);
    }
}
