use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

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
}

impl Default for TextConfig {
    fn default() -> Self {
        TextConfig {
            vocab_per_language: 10_000,
            min_df: 2,
            stopwords: true,
            stem: true,
        }
    }
}

/// Turns raw text of one language into index terms.
pub struct Analyzer {
    lang: String,
    stop: HashSet<String>,
    stemmer: Option<frostem::Stemmer>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("lang", &self.lang)
            .field("stopwords", &self.stop.len())
            .field("stemmer", &self.stemmer.is_some())
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
    pub fn new(lang: &str, cfg: &TextConfig) -> Result<Self> {
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
        Ok(Analyzer {
            lang,
            stop,
            stemmer,
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

    /// Index terms of `text`, in order, repeats kept.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        normalize(text)
            .unicode_words()
            .filter_map(|w| self.term(w))
            .collect()
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
