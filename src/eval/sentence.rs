//! Parallel sentence retrieval: every source text ranks all target texts by
//! cosine; its own translation is the one relevant answer.

use ndarray::{s, Array2, Axis};
use serde::Serialize;

/// Mean figures of a sentence-retrieval evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SentenceScores {
    /// Mean reciprocal rank of the aligned target.
    #[serde(rename = "MRR")]
    pub mrr: f64,
    /// Share of sources whose aligned target ranks first.
    #[serde(rename = "P@1")]
    pub p1: f64,
    /// Number of source texts (= candidates).
    pub queries: usize,
}

/// Rank (from 1) of target `i` for every source row `i`, given unit-length
/// rows. Ties count against the true answer (a target scoring the same as the
/// true one ranks above it), so a model that maps everything to one point
/// scores near zero, never one. A score that is not finite (NaN, ±inf: a
/// diverged model) is the worst there is: a non-finite true score ranks
/// last, a non-finite other score never ranks above the true one.
pub fn aligned_ranks(src: &Array2<f32>, tgt: &Array2<f32>) -> Vec<usize> {
    assert_eq!(
        src.nrows(),
        tgt.nrows(),
        "sentence retrieval needs aligned rows"
    );
    assert_eq!(
        src.ncols(),
        tgt.ncols(),
        "embeddings of different dimension"
    );
    let n = src.nrows();
    let mut ranks = Vec::with_capacity(n);
    const BLOCK: usize = 512;
    let tgt_t = tgt.t();
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let sims = src.slice(s![start..end, ..]).dot(&tgt_t);
        for (r, row) in sims.axis_iter(Axis(0)).enumerate() {
            let i = start + r;
            let own = row[i];
            if !own.is_finite() {
                ranks.push(row.len());
                continue;
            }
            let above = row
                .iter()
                .enumerate()
                .filter(|(j, s)| *j != i && s.is_finite() && **s >= own)
                .count();
            ranks.push(above + 1);
        }
        start = end;
    }
    ranks
}

/// MRR and P@1 of parallel sentence retrieval over aligned embeddings.
pub fn sentence_retrieval(src: &Array2<f32>, tgt: &Array2<f32>) -> SentenceScores {
    let ranks = aligned_ranks(src, tgt);
    let n = ranks.len().max(1) as f64;
    SentenceScores {
        mrr: ranks.iter().map(|r| 1.0 / *r as f64).sum::<f64>() / n,
        p1: ranks.iter().filter(|r| **r == 1).count() as f64 / n,
        queries: ranks.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn ranks_and_ties() {
        let src = array![[1.0f32, 0.0], [0.0, 1.0], [1.0, 0.0]];
        let tgt = array![[1.0f32, 0.0], [0.6, 0.8], [0.0, 1.0]];
        // row 0: own 1.0, best; row 1: own .8, row 2 scores 1.0 above; row 2: own 0, two above
        assert_eq!(aligned_ranks(&src, &tgt), vec![1, 2, 3]);
        let s = sentence_retrieval(&src, &tgt);
        assert!((s.mrr - (1.0 + 0.5 + 1.0 / 3.0) / 3.0).abs() < 1e-12);
        assert!((s.p1 - 1.0 / 3.0).abs() < 1e-12);
        let zeros = Array2::<f32>::zeros((4, 2));
        assert_eq!(aligned_ranks(&zeros, &zeros), vec![4, 4, 4, 4]);
    }

    #[test]
    fn non_finite_scores_rank_last() {
        let nan = Array2::<f32>::from_elem((3, 2), f32::NAN);
        assert_eq!(aligned_ranks(&nan, &nan), vec![3, 3, 3]);
        let s = sentence_retrieval(&nan, &nan);
        assert!(s.mrr < 0.34 && s.p1 == 0.0, "{s:?}");
        // one diverged target never outranks a true answer
        let src = array![[1.0f32, 0.0], [0.0, 1.0]];
        let tgt = array![[0.6f32, 0.8], [f32::INFINITY, 1.0]];
        assert_eq!(aligned_ranks(&src, &tgt), vec![1, 2]);
    }
}
