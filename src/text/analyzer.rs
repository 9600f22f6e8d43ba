use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use super::units::{self, Segmenter, UnitModel, Units};
use crate::{Error, Result};

/// Text settings of a workspace (`[text]` in its TOML); saved with every model
/// so that new text is analysed the way the training data was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TextConfig {
    /// Vocabulary size per language: the top-k terms by document frequency.
    pub vocab_per_language: usize,
    /// Terms seen in fewer training texts than this are left out.
    pub min_df: usize,
    /// Drop stop words (lists of the `stop-words` crate).
    pub stopwords: bool,
    /// Snowball stemming, where the language has a stemmer.
    pub stem: bool,
    /// Index units: `words`, `bpe`, `unigram` or `char-ngrams` (see
    /// [`crate::text::units`]); subword workspaces normally set `stem = false`.
    #[serde(skip_serializing_if = "Units::is_words")]
    pub units: Units,
    /// Pieces of a learnt (`bpe`, `unigram`) unit model per language.
    #[serde(skip_serializing_if = "units::is_default_subword_vocab")]
    pub subword_vocab: usize,
    /// Shortest character n-gram (`char-ngrams`), boundary marks counted.
    #[serde(skip_serializing_if = "units::is_default_ngram_min")]
    pub ngram_min: usize,
    /// Longest character n-gram (`char-ngrams`), boundary marks counted.
    #[serde(skip_serializing_if = "units::is_default_ngram_max")]
    pub ngram_max: usize,
}

impl Default for TextConfig {
    fn default() -> Self {
        TextConfig {
            vocab_per_language: 10_000,
            min_df: 2,
            stopwords: true,
            stem: true,
            units: Units::Words,
            subword_vocab: units::default_subword_vocab(),
            ngram_min: units::default_ngram_min(),
            ngram_max: units::default_ngram_max(),
        }
    }
}

/// Turns raw text of one language into index terms.
pub struct Analyzer {
    lang: String,
    stop: HashSet<String>,
    stemmer: Option<frostem::Stemmer>,
    units: Segmenter,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("lang", &self.lang)
            .field("stopwords", &self.stop.len())
            .field("stemmer", &self.stemmer.is_some())
            .field("units", &self.units.units())
            .finish()
    }
}

/// Characters that carry no meaning for retrieval and break word matching.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{FEFF}' | '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{00AD}'
    )
}

/// NFKC, lower case, BOM and zero-width characters removed.
pub fn normalize(text: &str) -> String {
    let cleaned: String = text.chars().filter(|c| !is_invisible(*c)).collect();
    cleaned.nfkc().collect::<String>().to_lowercase()
}

impl Analyzer {
    /// An analyser for ISO 639-1 language `lang` (`en`, `hi`, `es`, `de`, ...).
    /// Languages without a stop list or stemmer are analysed without them.
    /// Learnt units (`bpe`, `unigram`) need their model: an error here, use
    /// [`Analyzer::with_model`].
    pub fn new(lang: &str, cfg: &TextConfig) -> Result<Self> {
        Self::build(lang, cfg, None)
    }

    /// An analyser whose units are segmented by a learnt `model` (of the
    /// kind `cfg.units` names, for language `lang`).
    pub fn with_model(lang: &str, cfg: &TextConfig, model: Arc<UnitModel>) -> Result<Self> {
        Self::build(lang, cfg, Some(model))
    }

    fn build(lang: &str, cfg: &TextConfig, model: Option<Arc<UnitModel>>) -> Result<Self> {
        let lang = lang.trim().to_lowercase();
        if lang.is_empty() {
            return Err(Error::invalid("empty language code"));
        }
        let stemmer = if cfg.stem {
            frostem::Stemmer::try_from_name(&lang).ok()
        } else {
            None
        };
        let mut stop = HashSet::new();
        if cfg.stopwords {
            if let Some(words) = stop_words::lookup(&lang) {
                for w in words {
                    stop.insert(normalize(w));
                }
            }
        }
        let units = Segmenter::new(&lang, cfg, model)?;
        Ok(Analyzer {
            lang,
            stop,
            stemmer,
            units,
        })
    }

    /// The language code.
    pub fn lang(&self) -> &str {
        &self.lang
    }

    /// Whether this analyser stems.
    pub fn stems(&self) -> bool {
        self.stemmer.is_some()
    }

    /// Normalised words of `text` before stop words and stemming, with their
    /// byte spans in the normalised text (for highlighting).
    pub fn words(text: &str) -> Vec<String> {
        normalize(text)
            .unicode_words()
            .map(|w| w.to_string())
            .collect()
    }

    /// The index term of one normalised word, or `None` for a stop word.
    pub fn term(&self, word: &str) -> Option<String> {
        if self.stop.contains(word) {
            return None;
        }
        Some(match &self.stemmer {
            Some(s) => s.stem(word).into_owned(),
            None => word.to_string(),
        })
    }

    /// Index terms of `text`, in order, repeats kept (subword units when
    /// the analyser has them: see [`Analyzer::segment`]).
    pub fn analyze(&self, text: &str) -> Vec<String> {
        self.units.apply(self.analyze_words(text))
    }

    /// Word-level terms of `text` (stop words dropped, stems taken), before
    /// any subword units.
    pub fn analyze_words(&self, text: &str) -> Vec<String> {
        normalize(text)
            .unicode_words()
            .filter_map(|w| self.term(w))
            .collect()
    }

    /// The index units of word-level terms (as [`Analyzer::term`] and
    /// [`Analyzer::analyze_words`] give them): the terms themselves for
    /// `units = "words"`.
    pub fn segment(&self, terms: Vec<String>) -> Vec<String> {
        self.units.apply(terms)
    }

    /// The index units of one normalised word: empty for a stop word, one
    /// term for `units = "words"`, its pieces otherwise.
    pub fn terms(&self, word: &str) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(t) = self.term(word) {
            self.units.push(t, &mut out);
        }
        out
    }

    /// The index units this analyser produces.
    pub fn units(&self) -> Units {
        self.units.units()
    }

    /// What a person reads for an index term (subword boundary marks turned
    /// into ellipses: `<light` → `light…`); a word is shown as it is.
    pub fn display(&self, term: &str) -> String {
        if self.units().subword() {
            units::display_unit(term)
        } else {
            term.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_pipeline() {
        let a = Analyzer::new("en", &TextConfig::default()).unwrap();
        assert_eq!(
            a.analyze("\u{FEFF}The Running DOGS barked!"),
            vec!["run", "dog", "bark"]
        );
    }

    #[test]
    fn devanagari_signs_stay_in_words() {
        let cfg = TextConfig {
            stem: false,
            stopwords: false,
            ..Default::default()
        };
        let a = Analyzer::new("hi", &cfg).unwrap();
        // vowel signs (ि, ी) and virama (्) must not split words; ZWJ is dropped
        assert_eq!(
            a.analyze("हिन्दी भाषा\u{200D}।"),
            vec!["हिन्दी".to_string(), "भाषा".to_string()]
        );
    }

    #[test]
    fn nfkc_and_case() {
        let a = Analyzer::new("xx", &TextConfig::default()).unwrap();
        assert_eq!(a.analyze("ﬁle Ｆｏｏ"), vec!["file", "foo"]);
    }
}
