//! Why an encoder ranked a document where it did: the token alignment of
//! late interaction ([`crate::models::kit::late`]). Each query token is
//! matched to its most similar document token; a query word's share is
//! its tokens' best cosines over the query's token count, so the shares
//! (with the tokens outside any word) add up to the document's MaxSim.

use unicode_segmentation::UnicodeSegmentation;

use crate::models::kit::late::{best_matches, TokenStates};

/// One query word and the document word its tokens matched best.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AlignedWord {
    /// The query word as typed.
    pub query: String,
    /// The document word holding the best-matched token of the word's
    /// best-matched token.
    pub document: String,
    /// The mean of the word's tokens' best cosines.
    pub similarity: f64,
    /// The word's share of MaxSim: its tokens' best cosines summed over
    /// the query's token count.
    pub share: f64,
}

/// A document's alignment with the query.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Alignment {
    /// MaxSim of the query with the document.
    pub(super) maxsim: f64,
    /// Per query word, in the query's order.
    pub(super) words: Vec<AlignedWord>,
    /// Byte ranges of the document words matched, in the document text.
    pub(super) spans: Vec<(usize, usize)>,
}

/// The word of `text` (by Unicode's word boundaries) that the byte range
/// `span` starts in: its byte range.
fn word_at(words: &[(usize, &str)], span: (usize, usize)) -> Option<(usize, usize)> {
    words
        .iter()
        .map(|(o, w)| (*o, o + w.len()))
        .find(|&(a, b)| span.0 < b && span.1.max(span.0 + 1) > a)
}

/// The alignment of the query `qtext` (token states `q`) with the document
/// `dtext` (token states `d`). `None` when either has no token.
pub(super) fn align(
    qtext: &str,
    q: &TokenStates,
    dtext: &str,
    d: &TokenStates,
) -> Option<Alignment> {
    if q.is_empty() || d.is_empty() {
        return None;
    }
    let best = best_matches(q, d);
    let m = q.len() as f64;
    let qwords: Vec<(usize, &str)> = qtext.unicode_word_indices().collect();
    let dwords: Vec<(usize, &str)> = dtext.unicode_word_indices().collect();
    // query word (its range) → its tokens
    let mut groups: Vec<((usize, usize), Vec<usize>)> = Vec::new();
    for (i, span) in q.spans.iter().enumerate() {
        if let Some(w) = word_at(&qwords, *span) {
            match groups.iter_mut().find(|(r, _)| *r == w) {
                Some((_, ts)) => ts.push(i),
                None => groups.push((w, vec![i])),
            }
        }
    }
    let maxsim = best.iter().flatten().map(|(_, s)| *s as f64).sum::<f64>() / m;
    let mut words = Vec::new();
    let mut spans = Vec::new();
    for ((a, b), ts) in &groups {
        let sims: Vec<(usize, f32)> = ts.iter().filter_map(|&i| best[i]).collect();
        let Some(&(j, _)) = sims.iter().max_by(|x, y| x.1.total_cmp(&y.1)) else {
            continue;
        };
        let Some(dw) = word_at(&dwords, d.spans[j]) else {
            continue;
        };
        let sum: f64 = sims.iter().map(|(_, s)| *s as f64).sum();
        words.push(AlignedWord {
            query: qtext[*a..*b].to_string(),
            document: dtext[dw.0..dw.1].to_string(),
            similarity: sum / sims.len() as f64,
            share: sum / m,
        });
        if !spans.contains(&dw) {
            spans.push(dw);
        }
    }
    spans.sort_unstable();
    Some(Alignment {
        maxsim,
        words,
        spans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::kit::late::unit_rows;
    use ndarray::array;

    #[test]
    fn words_take_their_tokens_best_matches_and_the_shares_add_up() {
        // query "red cats": tokens "red", "ca", "ts"; document "billi lal": tokens "billi", "lal"
        let q = TokenStates {
            rows: unit_rows(array![[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.6, 0.8]]),
            spans: vec![(0, 3), (4, 6), (6, 8)],
        };
        let d = TokenStates {
            rows: unit_rows(array![[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]),
            spans: vec![(0, 5), (6, 9)],
        };
        let a = align("red cats", &q, "billi lal", &d).unwrap();
        assert!((a.maxsim - (1.0 + 1.0 + 0.6) / 3.0).abs() < 1e-6);
        assert_eq!(a.words.len(), 2);
        assert_eq!(
            (a.words[0].query.as_str(), a.words[0].document.as_str()),
            ("red", "lal")
        );
        assert_eq!(
            (a.words[1].query.as_str(), a.words[1].document.as_str()),
            ("cats", "billi")
        );
        assert!((a.words[1].similarity - 0.8).abs() < 1e-6);
        let total: f64 = a.words.iter().map(|w| w.share).sum();
        assert!((total - a.maxsim).abs() < 1e-6);
        assert_eq!(a.spans, [(0, 5), (6, 9)]);
    }
}
