//! What became of each word of a query: the unit a model searches with, or
//! why the word contributes nothing. One function for every front-end, so the
//! command line and the workbench give the same account.

use serde::Serialize;

use super::{Analyzer, Unknown, Vocabulary};

/// Why a query word gives a ranker nothing to search with. Serialised as
/// `{"reason": code, "why": text}`, codes `stop_word`, `below_min_df`,
/// `beyond_vocabulary_size`, `out_of_vocabulary`, `not_in_collection`,
/// `no_translation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    /// A stop word of the language, removed by the `[text]` settings.
    StopWord,
    /// Its term is not in the model's vocabulary, for this reason.
    Vocabulary(Unknown),
    /// No document of the collection holds its term (lexical baselines).
    NotInCollection,
    /// The workspace's dictionary has no translation of its term.
    NoTranslation,
}

impl Dropped {
    /// The reason's code (see the type's documentation).
    pub fn code(&self) -> &'static str {
        match self {
            Dropped::StopWord => "stop_word",
            Dropped::Vocabulary(Unknown::BelowMinDf { .. }) => "below_min_df",
            Dropped::Vocabulary(Unknown::BeyondSize { .. }) => "beyond_vocabulary_size",
            Dropped::Vocabulary(Unknown::NotInTraining) => "out_of_vocabulary",
            Dropped::NotInCollection => "not_in_collection",
            Dropped::NoTranslation => "no_translation",
        }
    }
}

impl Dropped {
    /// A few characters for narrow displays: `stop`, `OOV`, `df 1<2`,
    /// `beyond top-k`, `not in index`, `untranslated`.
    pub fn short(&self) -> String {
        match self {
            Dropped::StopWord => "stop".into(),
            Dropped::Vocabulary(Unknown::NotInTraining) => "OOV".into(),
            Dropped::Vocabulary(Unknown::BelowMinDf { df, min_df }) => format!("df {df}<{min_df}"),
            Dropped::Vocabulary(Unknown::BeyondSize { .. }) => "beyond top-k".into(),
            Dropped::NotInCollection => "not in index".into(),
            Dropped::NoTranslation => "untranslated".into(),
        }
    }
}

impl Serialize for Dropped {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Dropped", 2)?;
        st.serialize_field("reason", self.code())?;
        st.serialize_field("why", &self.to_string())?;
        st.end()
    }
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dropped::StopWord => write!(f, "stop word"),
            Dropped::Vocabulary(u) => write!(f, "{u}"),
            Dropped::NotInCollection => write!(f, "in no document of the collection"),
            Dropped::NoTranslation => write!(f, "no dictionary translation"),
        }
    }
}

/// One word of a query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueryWord {
    /// The word, normalised (lower case, NFKC).
    pub word: String,
    /// Its index term (its stem when stemming); `None` for a stop word.
    pub term: Option<String>,
    /// Why it is not used; `None` when it is.
    #[serde(skip_serializing_if = "Option::is_none", flatten)]
    pub dropped: Option<Dropped>,
    /// The character n-gram units it is searched with, when the query has
    /// no known word and the vocabulary backs off to n-grams.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ngrams: Vec<String>,
}

/// Every word of a query and what became of it, in query order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct QueryWords {
    /// The words.
    pub words: Vec<QueryWord>,
}

impl QueryWords {
    /// Accounts for each word of `text` analysed by `an`: a stop word is
    /// dropped as such; any other word is asked of `unknown`, which says why
    /// the ranker cannot use it (`None`: it can). `unknown` is asked about
    /// the word's index units when `by_units` (a word is used when one of
    /// its units is: subword units), else about its word-level term (a
    /// dictionary keyed by words).
    pub fn explain(
        an: &Analyzer,
        text: &str,
        by_units: bool,
        unknown: impl Fn(&str) -> Option<Dropped>,
    ) -> Self {
        let words = Analyzer::words(text)
            .into_iter()
            .map(|word| match an.term(&word) {
                None => QueryWord {
                    word,
                    term: None,
                    dropped: Some(Dropped::StopWord),
                    ngrams: Vec::new(),
                },
                Some(t) => {
                    // with subword units the word is used when one of its
                    // units is; the first unit's reason speaks for it
                    let units = if by_units {
                        an.terms(&word)
                    } else {
                        vec![t.clone()]
                    };
                    let reasons: Vec<Option<Dropped>> = units.iter().map(|u| unknown(u)).collect();
                    let dropped = if reasons.iter().any(Option::is_none) {
                        None
                    } else {
                        reasons.into_iter().next().flatten()
                    };
                    QueryWord {
                        dropped,
                        word,
                        term: Some(t),
                        ngrams: Vec::new(),
                    }
                }
            })
            .collect();
        QueryWords { words }
    }

    /// As [`QueryWords::explain`] against a model's vocabulary; when no word
    /// is known and the vocabulary backs off to character n-grams, the
    /// words with n-grams in it are used through them.
    pub fn against(an: &Analyzer, text: &str, vocab: &Vocabulary) -> Self {
        let mut q = Self::explain(an, text, true, |t| {
            vocab.why_unknown(t).map(Dropped::Vocabulary)
        });
        if !q.any_used() {
            for w in &mut q.words {
                let Some(t) = &w.term else { continue };
                let units = vocab.fallback_units(t);
                if !units.is_empty() {
                    w.ngrams = units
                        .iter()
                        .map(|&u| vocab.display(u).into_owned())
                        .collect();
                    w.dropped = None;
                }
            }
        }
        q
    }

    /// Whether some word is used.
    pub fn any_used(&self) -> bool {
        self.words.iter().any(|w| w.dropped.is_none())
    }

    /// The words dropped, each once, in query order.
    pub fn dropped(&self) -> Vec<&QueryWord> {
        let mut seen = std::collections::HashSet::new();
        self.words
            .iter()
            .filter(|w| w.dropped.is_some() && seen.insert(&w.word))
            .collect()
    }

    /// One line for people: `dropped: the (stop word), zzyzx (out of vocabulary)`;
    /// empty when nothing was dropped.
    pub fn dropped_summary(&self) -> String {
        self.list_dropped(|d| d.to_string())
    }

    /// As [`QueryWords::dropped_summary`] with [`Dropped::short`] reasons.
    pub fn dropped_short(&self) -> String {
        self.list_dropped(Dropped::short)
    }

    fn list_dropped(&self, why: impl Fn(&Dropped) -> String) -> String {
        self.dropped()
            .iter()
            .filter_map(|w| Some(format!("{} ({})", w.word, why(w.dropped.as_ref()?))))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Why the query cannot be answered: `None` when some word is used.
    pub fn unanswerable(&self) -> Option<String> {
        if self.any_used() {
            return None;
        }
        Some(if self.words.is_empty() {
            "the query has no words".to_string()
        } else {
            format!(
                "no word of the query can be searched with: {}",
                self.dropped_summary()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::TextConfig;

    #[test]
    fn every_word_accounted_for() {
        let cfg = TextConfig {
            stopwords: true,
            oov_ngrams: 0,
            ..TextConfig::default()
        };
        let an = Analyzer::new("en", &cfg).unwrap();
        let docs = vec![
            vec!["light".to_string()],
            vec!["light".into(), "dark".into()],
        ];
        let v = Vocabulary::build("en", &docs, 10, 2);
        let q = QueryWords::against(&an, "The light of the earth, dark", &v);
        let got: Vec<(&str, Option<String>)> = q
            .words
            .iter()
            .map(|w| (w.word.as_str(), w.dropped.as_ref().map(|d| d.to_string())))
            .collect();
        assert_eq!(
            got,
            vec![
                ("the", Some("stop word".into())),
                ("light", None),
                ("of", Some("stop word".into())),
                ("the", Some("stop word".into())),
                ("earth", Some("out of vocabulary".into())),
                ("dark", Some("in 1 training text(s), below min_df 2".into())),
            ]
        );
        assert!(q.any_used());
        assert_eq!(q.dropped().len(), 4, "each dropped word once");
        assert_eq!(q.unanswerable(), None);
        let none = QueryWords::against(&an, "earth of the", &v);
        let why = none.unanswerable().unwrap();
        assert!(
            why.contains("earth (out of vocabulary)") && why.contains("of (stop word)"),
            "{why}"
        );
        assert!(QueryWords::against(&an, " ,. ", &v)
            .unanswerable()
            .unwrap()
            .contains("no words"));
        let json = serde_json::to_value(&q.words[5]).unwrap();
        assert_eq!(json["reason"], "below_min_df");
        assert_eq!(json["word"], "dark");
        assert!(serde_json::to_value(&q.words[1])
            .unwrap()
            .get("reason")
            .is_none());
        // with n-gram units, a query of unknown words is searched through them
        let mut v = v;
        let more = [vec!["earthly".to_string()], vec!["earthen".into()]];
        v.add_fallback(&more, 10, 2, 3, 5);
        let q = QueryWords::against(&an, "earth, the", &v);
        assert!(q.any_used());
        assert!(q.words[0].ngrams.contains(&"eart…".to_string()), "{q:?}");
        let q = QueryWords::against(&an, "earth light", &v);
        assert!(q.words[0].ngrams.is_empty() && q.words[0].dropped.is_some());
    }
}
