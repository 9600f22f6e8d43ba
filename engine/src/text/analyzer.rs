use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use super::units::{self, Segmenter, UnitModel, Units};
use crate::{Error, Result};

/// Text settings of a workspace (`[text]` in its TOML); saved with every model
/// so that new text is analysed the way the training data was.
///
/// A workspace's `[text]` keys left out take [`TextConfig::default`] (see
/// [`TextSettings::resolve`]); a setting added after a session was made and
/// missing from its record reads as the value Rosetta used before the setting
/// existed (`oov_ngrams = 0`), so the session keeps its meaning.
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
    /// Character n-gram units (`ngram_min` to `ngram_max` characters of
    /// `<word>`) added per language, beyond `vocab_per_language`, for texts none of whose words
    /// is in the vocabulary: such a text counts as its words' n-grams that
    /// the vocabulary holds ([`super::Fallback`]). 0: none (such a text
    /// encodes to nothing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub oov_ngrams: usize,
    /// Index units: `words`, `bpe`, `unigram` or `char-ngrams` (see
    /// [`crate::text::units`]); subword workspaces normally set `stem = false`.
    #[serde(skip_serializing_if = "Units::is_words")]
    pub units: Units,
    /// Pieces of a learnt (`bpe`, `unigram`) unit model per language.
    #[serde(skip_serializing_if = "units::is_default_subword_vocab")]
    pub subword_vocab: usize,
    /// Shortest character n-gram (`char-ngrams` units and the
    /// `oov_ngrams` fallback), boundary marks counted.
    #[serde(skip_serializing_if = "units::is_default_ngram_min")]
    pub ngram_min: usize,
    /// Longest character n-gram (`char-ngrams` units and the `oov_ngrams`
    /// fallback), boundary marks counted.
    #[serde(skip_serializing_if = "units::is_default_ngram_max")]
    pub ngram_max: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl TextConfig {
    /// The defaults before they were chosen by measurement (stop words removed,
    /// `min_df` 2, no n-gram units): how a session that recorded no text
    /// settings was analysed.
    pub fn legacy() -> TextConfig {
        TextConfig {
            vocab_per_language: 10_000,
            min_df: 2,
            stopwords: true,
            stem: true,
            oov_ngrams: 0,
            ..TextConfig::default()
        }
    }
}

/// A workspace's `[text]` table as written: keys left out take
/// [`TextConfig::default`] ([`TextSettings::resolve`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextSettings {
    vocab_per_language: Option<usize>,
    min_df: Option<usize>,
    stopwords: Option<bool>,
    stem: Option<bool>,
    oov_ngrams: Option<usize>,
    units: Option<Units>,
    subword_vocab: Option<usize>,
    ngram_min: Option<usize>,
    ngram_max: Option<usize>,
}

impl TextSettings {
    /// Settings from `(key, value)` pairs in the TOML syntax of `[text]`
    /// (`("stopwords", "true")`); an unknown key or bad value is an error.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> crate::Result<TextSettings> {
        let src: String = pairs.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
        toml::from_str(&src).map_err(|e| crate::Error::invalid(format!("[text] {src}: {e}")))
    }

    /// These settings, with `fallback`'s where these leave a key unset.
    pub fn or(self, fallback: TextSettings) -> TextSettings {
        TextSettings {
            vocab_per_language: self.vocab_per_language.or(fallback.vocab_per_language),
            min_df: self.min_df.or(fallback.min_df),
            stopwords: self.stopwords.or(fallback.stopwords),
            stem: self.stem.or(fallback.stem),
            oov_ngrams: self.oov_ngrams.or(fallback.oov_ngrams),
            units: self.units.or(fallback.units),
            subword_vocab: self.subword_vocab.or(fallback.subword_vocab),
            ngram_min: self.ngram_min.or(fallback.ngram_min),
            ngram_max: self.ngram_max.or(fallback.ngram_max),
        }
    }

    /// The settings given, the defaults for the rest.
    pub fn resolve(self) -> TextConfig {
        let d = TextConfig::default();
        TextConfig {
            vocab_per_language: self.vocab_per_language.unwrap_or(d.vocab_per_language),
            min_df: self.min_df.unwrap_or(d.min_df),
            stopwords: self.stopwords.unwrap_or(d.stopwords),
            stem: self.stem.unwrap_or(d.stem),
            oov_ngrams: self.oov_ngrams.unwrap_or(d.oov_ngrams),
            units: self.units.unwrap_or(d.units),
            subword_vocab: self.subword_vocab.unwrap_or(d.subword_vocab),
            ngram_min: self.ngram_min.unwrap_or(d.ngram_min),
            ngram_max: self.ngram_max.unwrap_or(d.ngram_max),
        }
    }
}

impl Default for TextConfig {
    fn default() -> Self {
        TextConfig {
            vocab_per_language: 10_000,
            min_df: 2,
            stopwords: false,
            stem: true,
            oov_ngrams: 3_000,
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

/// Typographic apostrophes and quotation marks, folded to their ASCII forms
/// so that `king’s` and `king's` are one word and `“light”` is `light`.
fn fold_quote(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201B}' | '\u{2032}' | '\u{02BC}' | '\u{FF07}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}'
        | '\u{00BB}' => '"',
        c => c,
    }
}

/// NFKC, lower case, BOM and zero-width characters removed, typographic
/// apostrophes and quotes folded to ASCII.
pub fn normalize(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .filter(|c| !is_invisible(*c))
        .map(fold_quote)
        .collect();
    cleaned.nfkc().collect::<String>().to_lowercase()
}

/// A word as UAX #29 gives it, without apostrophes at either end (`gods'`
/// is `gods`) and without the white space and combining marks that lead it;
/// `None` when nothing is left.
///
/// UAX #29 keeps a combining mark with the character before it, so a vowel
/// sign or visarga after a space (`"राम ा"`, `" ः"`) is a "word" of its own
/// made of the space and the mark: such a sign carries no letter to be read
/// and is not a word, and no word ever holds white space.
fn trim_word(w: &str) -> Option<&str> {
    let w = w
        .trim_start_matches(|c: char| {
            c == '\'' || c.is_whitespace() || unicode_normalization::char::is_combining_mark(c)
        })
        .trim_end_matches('\'');
    (!w.is_empty() && !w.contains(char::is_whitespace)).then_some(w)
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
        cfg.check_units()?;
        let units = Segmenter::new(&lang, cfg.units, (cfg.ngram_min, cfg.ngram_max), model)?;
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
            .filter_map(trim_word)
            .map(|w| w.to_string())
            .collect()
    }

    /// The index term of one normalised word, or `None` for a stop word.
    /// Never empty and never containing white space: a stem that would be
    /// empty is the word itself.
    pub fn term(&self, word: &str) -> Option<String> {
        let word = trim_word(word)?;
        if self.stop.contains(word) {
            return None;
        }
        let t = match &self.stemmer {
            Some(s) => s.stem(word).into_owned(),
            None => word.to_string(),
        };
        let t = if t.trim().is_empty() {
            word.to_string()
        } else {
            t
        };
        Some(t.split_whitespace().collect::<Vec<_>>().join("_"))
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

    /// `(word, term)` for every word of `text` that has a term, in order:
    /// the surface forms behind the terms (see [`Vocabulary::set_surface`]).
    ///
    /// [`Vocabulary::set_surface`]: super::Vocabulary::set_surface
    pub fn analyze_pairs(&self, text: &str) -> Vec<(String, String)> {
        normalize(text)
            .unicode_words()
            .filter_map(|w| {
                let t = self.term(w)?;
                Some((trim_word(w)?.to_string(), t))
            })
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

impl TextConfig {
    /// The same settings with `units = "words"`: the word-level analysis that
    /// units are learnt from and dictionaries are looked up in.
    pub fn words_only(&self) -> TextConfig {
        TextConfig {
            units: Units::Words,
            ..self.clone()
        }
    }

    /// Checks the unit settings (sizes and n range).
    pub fn check_units(&self) -> Result<()> {
        if self.units.learnt() && self.subword_vocab < 2 {
            return Err(Error::invalid(format!(
                "[text] subword_vocab = {} is too small for units = \"{}\" (at least 2)",
                self.subword_vocab, self.units
            )));
        }
        if self.units == Units::CharNgrams
            && (self.ngram_min == 0 || self.ngram_min > self.ngram_max || self.ngram_max > 32)
        {
            return Err(Error::invalid(format!(
                "[text] ngram_min = {} and ngram_max = {} must satisfy 1 <= ngram_min <= ngram_max <= 32",
                self.ngram_min, self.ngram_max
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stop words removed, stemmed.
    fn stop_stem() -> TextConfig {
        TextConfig {
            stopwords: true,
            ..TextConfig::legacy()
        }
    }

    #[test]
    fn english_pipeline() {
        let a = Analyzer::new("en", &stop_stem()).unwrap();
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
    fn typographic_apostrophes_and_quotes_fold() {
        let a = Analyzer::new("en", &stop_stem()).unwrap();
        // the KJV's `king’s` is `king's`, stemmed to `king`; no term keeps a quote
        assert_eq!(
            a.analyze("the king’s “light” gods’"),
            vec!["king", "light", "god"]
        );
        let plain = Analyzer::new(
            "en",
            &TextConfig {
                stem: false,
                stopwords: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(plain.analyze("‘gods’ king’s"), vec!["gods", "king's"]);
        assert_eq!(Analyzer::words("’’ ’"), Vec::<String>::new());
    }

    #[test]
    fn no_empty_or_spaced_term() {
        // a vowel sign, anusvara or visarga after a space (as
        // enhi-nmt-sample-18k has: "... ा", " ः") is a UAX #29 "word" of its
        // own, " ा": it is no word, and neither term nor surface form
        let text = "राम ा सीता \u{947} के \u{903} \u{902}\u{93E} 'ा दुःख";
        let unstemmed = TextConfig {
            stem: false,
            ..TextConfig::default()
        };
        for cfg in [TextConfig::default(), unstemmed] {
            let a = Analyzer::new("hi", &cfg).unwrap();
            let pairs = a.analyze_pairs(text);
            assert_eq!(pairs.len(), 4, "{pairs:?}");
            for (w, t) in &pairs {
                for s in [w, t] {
                    assert!(
                        !s.is_empty()
                            && !s.contains(char::is_whitespace)
                            && !s.starts_with(unicode_normalization::char::is_combining_mark),
                        "{pairs:?}"
                    );
                }
            }
            assert_eq!(a.analyze(text).len(), 4);
        }
        let a = Analyzer::new("hi", &TextConfig::default()).unwrap();
        assert_eq!(a.term("'"), None);
        assert_eq!(a.term(" \u{903}"), None);
        // a sign inside a word stays in it (दुःख: visarga after a letter)
        assert_eq!(Analyzer::words("दुःख ः"), vec!["दुःख".to_string()]);
    }

    #[test]
    fn nfkc_and_case() {
        let a = Analyzer::new("xx", &TextConfig::default()).unwrap();
        assert_eq!(a.analyze("ﬁle Ｆｏｏ"), vec!["file", "foo"]);
    }
}
