use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::CsrMatrix;
use crate::{Error, Result};

/// The terms of one language that a model knows: the top-k by document
/// frequency on the training texts. Saved with every model (`vocab.<lang>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Vocabulary {
    /// Language code.
    pub lang: String,
    /// Terms by id.
    pub terms: Vec<String>,
    /// Document frequency of each term on the training texts.
    pub df: Vec<u32>,
    /// Number of training texts the frequencies were counted on.
    pub n_docs: usize,
    #[serde(skip)]
    index: HashMap<String, u32>,
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
    /// leaving out terms in fewer than `min_df` texts. Ties go to the term that
    /// sorts first, so the result does not depend on hash order.
    pub fn build<S: AsRef<str>>(lang: &str, docs: &[Vec<S>], k: usize, min_df: usize) -> Self {
        let mut df: HashMap<&str, u32> = HashMap::new();
        for d in docs {
            let mut seen: Vec<&str> = d.iter().map(|t| t.as_ref()).collect();
            seen.sort_unstable();
            seen.dedup();
            for t in seen {
                *df.entry(t).or_insert(0) += 1;
            }
        }
        let mut all: Vec<(&str, u32)> = df
            .into_iter()
            .filter(|(_, n)| *n as usize >= min_df.max(1))
            .collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        all.truncate(k);
        Self::from_parts(
            lang,
            all.iter().map(|t| t.0.to_string()).collect(),
            all.iter().map(|t| t.1).collect(),
            docs.len(),
        )
    }

    /// A vocabulary from its saved parts.
    pub fn from_parts(lang: &str, terms: Vec<String>, df: Vec<u32>, n_docs: usize) -> Self {
        let mut v = Vocabulary {
            lang: lang.to_string(),
            terms,
            df,
            n_docs,
            index: HashMap::new(),
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
        let mut counts: Vec<(u32, f32)> = counts.into_iter().collect();
        counts.sort_unstable_by_key(|c| c.0);
        Encoded {
            counts,
            tokens: tokens.len(),
            oov,
        }
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

    /// Reads a vocabulary written by [`Vocabulary::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let mut v: Vocabulary = serde_json::from_slice(&bytes)
            .map_err(|e| Error::parse(path, e.line(), format!("bad vocabulary: {e}")))?;
        if v.df.len() != v.terms.len() {
            return Err(Error::file(path, "terms and df differ in length"));
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
    }
}
