use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{units, CsrMatrix, Side};
use crate::{Error, Result};

/// Vocabularies of both sides, as a model was trained with them.
#[derive(Debug, Clone)]
pub struct Vocabs {
    /// Query-language vocabulary.
    pub source: Vocabulary,
    /// Document-language vocabulary.
    pub target: Vocabulary,
}

impl Vocabs {
    /// The vocabulary of `side`.
    pub fn side(&self, side: Side) -> &Vocabulary {
        match side {
            Side::Source => &self.source,
            Side::Target => &self.target,
        }
    }
}

/// The terms of one language that a model knows: the top-k by document
/// frequency on the training texts. Saved with every model (`vocab.<lang>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vocabulary {
    /// Language code.
    pub lang: String,
    /// Terms by id.
    pub terms: Vec<String>,
    /// Document frequency of each term on the training texts.
    pub df: Vec<u32>,
    /// Number of training texts the frequencies were counted on.
    pub n_docs: usize,
    /// The most frequent word behind each term (a stem's commonest form),
    /// for display; empty for vocabularies saved before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub surface: Vec<String>,
    /// Why training terms were left out: the `min_df` and size the
    /// vocabulary was built with and the terms it left out with their
    /// document frequency (absent from vocabularies saved before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<LeftOut>,
    /// Character n-gram units that stand in for words outside the
    /// vocabulary ([`Vocabulary::add_fallback`]); `None`: words only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    #[serde(skip)]
    index: HashMap<String, u32>,
    #[serde(skip)]
    left_index: HashMap<String, u32>,
}

/// Character n-grams (fastText-style, of `<word>`) as units for texts none
/// of whose words the vocabulary holds: such a text counts each word as
/// the n-grams of it that the vocabulary holds, each `1/found`, so a word
/// still weighs one token. A text with a known word is encoded by its
/// words alone (n-grams of unknown words beside known ones cost accuracy:
/// `docs/results.md`, "Text defaults"). The units follow the words: ids
/// from `words` on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
    /// Number of word units (ids below it are words).
    pub words: usize,
    /// Shortest n-gram.
    pub min_n: usize,
    /// Longest n-gram.
    pub max_n: usize,
}

/// The prefix of n-gram units in a vocabulary: no word has it (UAX #29
/// words hold no `#`), so a unit never stands for a word of the same letters.
const NGRAM_MARK: char = '#';

/// The character n-grams of `<word>` ([`units::char_ngrams`]), as a list.
fn char_ngrams(word: &str, min_n: usize, max_n: usize) -> Vec<String> {
    let mut out = Vec::new();
    units::char_ngrams(word, min_n, max_n, &mut out);
    out
}

/// A fallback unit as people read it ([`units::display_unit`] without
/// the mark: `#<wat` is `wat…`, `#ing>` is `…ing`).
fn show_ngram(g: &str) -> String {
    units::display_unit(g.strip_prefix(NGRAM_MARK).unwrap_or(g))
}

/// The terms of the training texts a [`Vocabulary`] does not hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The `min_df` the vocabulary was built with.
    pub min_df: usize,
    /// The size asked for.
    pub size: usize,
    /// Terms left out, by descending document frequency.
    pub terms: Vec<String>,
    /// Their document frequencies.
    pub df: Vec<u32>,
}

/// Why a term is not in a vocabulary (see [`Vocabulary::why_unknown`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Unknown {
    /// Seen in fewer training texts than the vocabulary's `min_df`.
    BelowMinDf {
        /// Training texts it occurs in.
        df: u32,
        /// The threshold.
        min_df: usize,
    },
    /// Frequent enough, but not among the `size` most frequent terms.
    BeyondSize {
        /// Training texts it occurs in.
        df: u32,
        /// The vocabulary size.
        size: usize,
    },
    /// In no training text (or the vocabulary predates the record of why).
    NotInTraining,
}

impl std::fmt::Display for Unknown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unknown::BelowMinDf { df, min_df } => {
                write!(f, "in {df} training text(s), below min_df {min_df}")
            }
            Unknown::BeyondSize { df, size } => write!(
                f,
                "in {df} training texts, not among the {size} most frequent terms"
            ),
            Unknown::NotInTraining => write!(f, "out of vocabulary"),
        }
    }
}

/// A text mapped onto a vocabulary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Encoded {
    /// `(term id, count)`, ascending by id.
    pub counts: Vec<(u32, f32)>,
    /// Tokens of the text.
    pub tokens: usize,
    /// Tokens not in the vocabulary.
    pub oov: usize,
}

impl Vocabulary {
    /// The `k` terms of highest document frequency among `docs` (token lists),
    /// leaving out terms in fewer than `min_df` texts, and empty terms or
    /// terms with white space, which no export format can carry. Ties go to
    /// the term that sorts first, so the result does not depend on hash
    /// order. The terms left out are recorded ([`Vocabulary::why_unknown`]).
    pub fn build<S: AsRef<str>>(lang: &str, docs: &[Vec<S>], k: usize, min_df: usize) -> Self {
        let mut df: HashMap<&str, u32> = HashMap::new();
        for d in docs {
            let mut seen: Vec<&str> = d
                .iter()
                .map(|t| t.as_ref())
                .filter(|t| !t.is_empty() && !t.contains(char::is_whitespace))
                .collect();
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                *df.entry(t).or_insert(0) += 1;
            }
        }
        let mut all: Vec<(&str, u32)> = df.into_iter().collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let min_df = min_df.max(1);
        let (kept, left): (Vec<_>, Vec<_>) = all
            .into_iter()
            .enumerate()
            .partition(|(i, (_, n))| *n as usize >= min_df && *i < k);
        let mut v = Self::from_parts(
            lang,
            kept.iter().map(|(_, t)| t.0.to_string()).collect(),
            kept.iter().map(|(_, t)| t.1).collect(),
            docs.len(),
        );
        v.left_out = Some(LeftOut {
            min_df,
            size: k,
            terms: left.iter().map(|(_, t)| t.0.to_string()).collect(),
            df: left.iter().map(|(_, t)| t.1).collect(),
        });
        v.reindex();
        v
    }

    /// Adds up to `units` character n-gram units (`min_n..=max_n`
    /// characters) for the words of `docs` that the vocabulary lacks: the
    /// n-grams of those words in most texts (at least `min_df`). Texts
    /// whose every word is unknown then still encode to something.
    pub fn add_fallback<S: AsRef<str>>(
        &mut self,
        docs: &[Vec<S>],
        units: usize,
        min_df: usize,
        min_n: usize,
        max_n: usize,
    ) {
        let words = self.len();
        let mut df: HashMap<String, u32> = HashMap::new();
        for d in docs {
            let mut grams: Vec<String> = d
                .iter()
                .map(|t| t.as_ref())
                .filter(|t| self.id(t).is_none() && !t.is_empty())
                .flat_map(|t| char_ngrams(t, min_n, max_n))
                .filter(|g| !g.contains(char::is_whitespace))
                .map(|g| format!("{NGRAM_MARK}{g}"))
                .collect();
            grams.sort_unstable();
            grams.dedup();
            for g in grams {
                *df.entry(g).or_insert(0) += 1;
            }
        }
        let mut all: Vec<(String, u32)> = df
            .into_iter()
            .filter(|(g, n)| *n as usize >= min_df.max(1) && self.id(g).is_none())
            .collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(units);
        for (g, n) in all {
            self.terms.push(g);
            self.df.push(n);
        }
        if !self.surface.is_empty() {
            self.surface.resize(self.terms.len(), String::new());
        }
        self.fallback = Some(Fallback {
            words,
            min_n,
            max_n,
        });
        self.reindex();
    }

    /// Number of word units: every unit but the n-gram fallback's.
    pub fn words(&self) -> usize {
        self.fallback.as_ref().map_or(self.len(), |f| f.words)
    }

    /// The fallback units that stand for `term` when it is not in the
    /// vocabulary: none when it is, or without a fallback.
    pub fn fallback_units(&self, term: &str) -> Vec<u32> {
        let Some(f) = &self.fallback else {
            return Vec::new();
        };
        if self.id(term).is_some() {
            return Vec::new();
        }
        let mut ids: Vec<u32> = char_ngrams(term, f.min_n, f.max_n)
            .iter()
            .filter_map(|g| self.id(&format!("{NGRAM_MARK}{g}")))
            .filter(|&i| i as usize >= f.words)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Records the most frequent word behind each term from `(word, term)`
    /// pairs of the training texts ([`Analyzer::analyze_pairs`]); a term
    /// never seen keeps itself as its surface form. A surface form is never
    /// empty and never holds white space: such a word is not counted.
    ///
    /// [`Analyzer::analyze_pairs`]: super::Analyzer::analyze_pairs
    pub fn set_surface<'a>(&mut self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let mut counts: HashMap<u32, HashMap<&'a str, u32>> = HashMap::new();
        for (w, t) in pairs {
            if w.is_empty() || w.contains(char::is_whitespace) {
                continue;
            }
            if let Some(id) = self.id(t) {
                *counts.entry(id).or_default().entry(w).or_insert(0) += 1;
            }
        }
        self.surface = (0..self.len() as u32)
            .map(|id| {
                counts
                    .get(&id)
                    .and_then(|c| {
                        c.iter()
                            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                            .map(|(w, _)| w.to_string())
                    })
                    .unwrap_or_else(|| self.term(id).to_string())
            })
            .collect();
    }

    /// The word to show for term `id`: its commonest surface form when
    /// recorded, else the term.
    pub fn display(&self, id: u32) -> std::borrow::Cow<'_, str> {
        if id as usize >= self.words() {
            return show_ngram(self.term(id)).into();
        }
        self.surface
            .get(id as usize)
            .filter(|s| !s.is_empty())
            .map(String::as_str)
            .unwrap_or_else(|| self.term(id))
            .into()
    }

    /// The word terms as their commonest training word, for tools that read
    /// words (word2vec text files for MUSE, VecMap, gensim): `(id, word)` in
    /// id order, the n-gram fallback units left out; a word two terms share
    /// is kept for the first (the more frequent) only. `None` when the
    /// vocabulary recorded no surface forms (saved before they were).
    pub fn surface_words(&self) -> Option<Vec<(u32, &str)>> {
        if self.surface.is_empty() {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        Some(
            (0..self.words() as u32)
                .map(|id| {
                    let s = self.surface[id as usize].as_str();
                    (id, if s.is_empty() { self.term(id) } else { s })
                })
                .filter(|(_, w)| seen.insert(*w))
                .collect(),
        )
    }

    /// Why `term` is not in the vocabulary; `None` when it is.
    pub fn why_unknown(&self, term: &str) -> Option<Unknown> {
        if self.id(term).is_some() {
            return None;
        }
        let (Some(lo), Some(&i)) = (&self.left_out, self.left_index.get(term)) else {
            return Some(Unknown::NotInTraining);
        };
        let df = lo.df[i as usize];
        Some(if (df as usize) < lo.min_df {
            Unknown::BelowMinDf {
                df,
                min_df: lo.min_df,
            }
        } else {
            Unknown::BeyondSize { df, size: lo.size }
        })
    }

    /// A vocabulary from its saved parts.
    pub fn from_parts(lang: &str, terms: Vec<String>, df: Vec<u32>, n_docs: usize) -> Self {
        let mut v = Vocabulary {
            lang: lang.to_string(),
            terms,
            df,
            n_docs,
            surface: Vec::new(),
            left_out: None,
            fallback: None,
            index: HashMap::new(),
            left_index: HashMap::new(),
        };
        v.reindex();
        v
    }

    fn reindex(&mut self) {
        self.index = self
            .terms
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        self.left_index = self
            .left_out
            .iter()
            .flat_map(|l| l.terms.iter().enumerate())
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
    }

    /// Number of terms.
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// Whether the vocabulary has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Id of `term`, if known.
    pub fn id(&self, term: &str) -> Option<u32> {
        self.index.get(term).copied()
    }

    /// The term with id `id`.
    pub fn term(&self, id: u32) -> &str {
        &self.terms[id as usize]
    }

    /// Inverse document frequency `ln(N / df)` of term `id`.
    pub fn idf(&self, id: u32) -> f32 {
        let df = self.df[id as usize].max(1) as f32;
        ((self.n_docs.max(1) as f32) / df).ln()
    }

    /// Counts of the known terms of a token list.
    pub fn encode<S: AsRef<str>>(&self, tokens: &[S]) -> Encoded {
        let mut counts: HashMap<u32, f32> = HashMap::new();
        let mut oov = 0;
        for t in tokens {
            match self.id(t.as_ref()) {
                Some(i) => *counts.entry(i).or_insert(0.0) += 1.0,
                None => oov += 1,
            }
        }
        // a text with no known word backs off to its words' n-grams
        if counts.is_empty() && self.fallback.is_some() {
            oov = 0;
            for t in tokens {
                let units = self.fallback_units(t.as_ref());
                if units.is_empty() {
                    oov += 1;
                }
                let w = 1.0 / units.len().max(1) as f32;
                for u in units {
                    *counts.entry(u).or_insert(0.0) += w;
                }
            }
        }
        let mut counts: Vec<(u32, f32)> = counts.into_iter().collect();
        counts.sort_unstable_by_key(|c| c.0);
        Encoded {
            counts,
            tokens: tokens.len(),
            oov,
        }
    }

    /// The ids of a token list's known terms in reading order (repeats
    /// kept). A text with no known word backs off, as [`Vocabulary::encode`]
    /// does, to its words' n-gram units, word by word in order.
    pub fn sequence<S: AsRef<str>>(&self, tokens: &[S]) -> Vec<u32> {
        let ids: Vec<u32> = tokens.iter().filter_map(|t| self.id(t.as_ref())).collect();
        if ids.is_empty() && self.fallback.is_some() {
            return tokens
                .iter()
                .flat_map(|t| self.fallback_units(t.as_ref()))
                .collect();
        }
        ids
    }

    /// Raw term counts of many token lists, one row each.
    pub fn count_matrix<S: AsRef<str>>(&self, docs: &[Vec<S>]) -> CsrMatrix {
        let mut m = CsrMatrix::new(self.len());
        for d in docs {
            m.push_row(self.encode(d).counts);
        }
        m
    }

    /// Writes the vocabulary as JSON, atomically (temp file, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_vec(self).map_err(|e| Error::file(path, e.to_string()))?;
        crate::util::write_atomic(path, &json)
    }

    /// Reads a vocabulary written by [`Vocabulary::save`]: a regular file,
    /// never through a symbolic link; its language must be a code
    /// ([`crate::text::check_lang`]), since file names are made of it.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = crate::util::read_regular(path, crate::util::Links::Refuse, u64::MAX)?;
        let mut v: Vocabulary = serde_json::from_slice(&bytes)
            .map_err(|e| Error::parse(path, e.line(), format!("bad vocabulary: {e}")))?;
        crate::text::check_lang(&v.lang).map_err(|why| Error::file(path, why))?;
        if v.df.len() != v.terms.len() {
            return Err(Error::file(path, "terms and df differ in length"));
        }
        if !v.surface.is_empty() && v.surface.len() != v.terms.len() {
            return Err(Error::file(
                path,
                "terms and surface forms differ in length",
            ));
        }
        if let Some(f) = &v.fallback {
            if f.words > v.terms.len() || f.min_n == 0 || f.min_n > f.max_n {
                return Err(Error::file(path, "bad n-gram fallback record"));
            }
        }
        if let Some(lo) = &v.left_out {
            if lo.df.len() != lo.terms.len() {
                return Err(Error::file(path, "left-out terms and df differ in length"));
            }
        }
        if let Some(i) = v
            .terms
            .iter()
            .position(|t| t.is_empty() || t.contains(char::is_whitespace))
        {
            return Err(Error::file(
                path,
                format!(
                    "term {i} is empty or contains white space: {:?}",
                    v.terms[i]
                ),
            ));
        }
        v.reindex();
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_by_df_with_ties_by_term() {
        let docs = vec![
            vec!["b", "a", "a"],
            vec!["a", "c"],
            vec!["c", "b"],
            vec!["d"],
        ];
        let v = Vocabulary::build("xx", &docs, 2, 1);
        assert_eq!(v.terms, vec!["a", "b"]);
        let e = v.encode(&["a", "a", "z"]);
        assert_eq!(e.counts, vec![(0, 2.0)]);
        assert_eq!(e.oov, 1);
        let v = Vocabulary::build("xx", &docs, 10, 2);
        assert_eq!(v.terms, vec!["a", "b", "c"]);
        assert_eq!(v.why_unknown("a"), None);
        assert_eq!(
            v.why_unknown("d"),
            Some(Unknown::BelowMinDf { df: 1, min_df: 2 })
        );
        assert_eq!(v.why_unknown("zz"), Some(Unknown::NotInTraining));
        let v = Vocabulary::build("xx", &docs, 1, 1);
        assert_eq!(
            v.why_unknown("c"),
            Some(Unknown::BeyondSize { df: 2, size: 1 })
        );
    }

    #[test]
    fn ngram_fallback_stands_in_for_unknown_words() {
        assert_eq!(char_ngrams("ab", 3, 4), vec!["<ab", "ab>", "<ab>"]);
        let docs = vec![
            vec!["the", "walking"],
            vec!["the", "talking"],
            vec!["the", "walked"],
        ];
        let mut v = Vocabulary::build("xx", &docs, 1, 1);
        assert_eq!(v.terms, vec!["the"]);
        v.add_fallback(&docs, 3, 2, 3, 5);
        // n-grams of the unknown words in two texts or more: `alk`, `king`, ...
        assert_eq!(v.words(), 1);
        assert_eq!(v.len(), 4);
        for g in &v.terms[1..] {
            let g = g.strip_prefix('#').expect("marked unit").to_string();
            let df = docs
                .iter()
                .filter(|d| d.iter().any(|w| char_ngrams(w, 3, 5).contains(&g)))
                .count();
            assert!(df >= 2, "{g}");
        }
        // a unit never stands for a word of the same letters
        assert_eq!(v.id("alk"), None);
        // a text of unknown words encodes to their known n-grams, each word
        // weighing one token; beside a known word, unknown words are left out
        let e = v.encode(&["stalking", "walker", "zzz"]);
        let total: f32 = e.counts.iter().map(|c| c.1).sum();
        assert!((total - 2.0).abs() < 1e-6, "{e:?}");
        assert_eq!(e.oov, 1, "zzz shares no unit");
        let e = v.encode(&["stalking", "the"]);
        assert_eq!((e.counts.clone(), e.oov), (vec![(0, 1.0)], 1));
        assert!(!v.fallback_units("stalking").is_empty());
        assert!(v.fallback_units("the").is_empty());
        assert!(v.display(1).starts_with('…') || v.display(1).ends_with('…'));
        assert_eq!(show_ngram("#<wat"), "wat…");
        assert_eq!(show_ngram("#ing>"), "…ing");
        assert_eq!(show_ngram("#<a>"), "a");
    }

    #[test]
    fn no_empty_or_spaced_terms_and_surface_forms() {
        let docs = vec![vec!["", "a b", "run"], vec!["run", " "]];
        let mut v = Vocabulary::build("xx", &docs, 10, 1);
        assert_eq!(v.terms, vec!["run"]);
        v.set_surface([
            ("running", "run"),
            ("runs", "run"),
            ("running", "run"),
            (" run", "run"),
            (" run", "run"),
            (" run", "run"),
        ]);
        assert_eq!(v.display(0), "running");
        // saved and read back: surface forms and reasons survive
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.json");
        v.save(&p).unwrap();
        let back = Vocabulary::load(&p).unwrap();
        assert_eq!(back.display(0), "running");
        assert_eq!(back, v);
        assert_eq!(back.why_unknown("zz"), Some(Unknown::NotInTraining));
        // a file with an empty term is refused, naming it
        std::fs::write(
            &p,
            r#"{"lang":"xx","terms":["a",""],"df":[1,1],"n_docs":1}"#,
        )
        .unwrap();
        let e = Vocabulary::load(&p).unwrap_err().to_string();
        assert!(e.contains("term 1 is empty"), "{e}");
    }
}
