//! Parallel sentence retrieval: every source text ranks all target texts by
//! the space's [`Similarity`] (the cosine for most models); its own
//! translation is the one relevant answer.

use ndarray::{s, Array2, Axis};
use serde::Serialize;

use crate::space::Similarity;

/// Mean figures of a sentence-retrieval evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SentenceScores {
    /// Mean reciprocal rank of the aligned target.
    #[serde(rename = "MRR")]
    pub mrr: f64,
    /// Share of sources whose aligned target ranks first.
    #[serde(rename = "P@1")]
    pub p1: f64,
    /// Mean reciprocal rank with ties counted for the aligned target (rank =
    /// 1 + the number of other targets scoring strictly higher), as
    /// `../shared/peers/torch_ref.py` counts: a model mapping everything to
    /// one point scores 1 here and near 0 in [`SentenceScores::mrr`].
    #[serde(rename = "MRR_ties_for")]
    pub mrr_ties_for: f64,
    /// Share of sources whose aligned target ranks first, ties counted for it.
    #[serde(rename = "P@1_ties_for")]
    pub p1_ties_for: f64,
    /// Number of source texts (= candidates).
    pub queries: usize,
}

/// Rank (from 1) of target `i` for every source row `i`, given unit-length
/// rows compared by the cosine. Ties count against the true answer (a target scoring the same as the
/// true one ranks above it), so a model that maps everything to one point
/// scores near zero, never one. A score that is not finite (NaN, ±inf: a
/// diverged model) is the worst there is: a non-finite true score ranks
/// last, a non-finite other score never ranks above the true one.
pub fn aligned_ranks(src: &Array2<f32>, tgt: &Array2<f32>) -> Vec<usize> {
    aligned_ranks_both(src, tgt, Similarity::Cosine)
        .into_iter()
        .map(|r| r.against)
        .collect()
}

/// The rank of one aligned target under both tie conventions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TiedRank {
    /// 1 + the other targets scoring at least as high (ties against the
    /// answer; [`aligned_ranks`]).
    pub against: usize,
    /// 1 + the other targets scoring strictly higher (ties for the answer,
    /// `torch_ref.py`'s `(s > own).sum() + 1`).
    pub for_: usize,
}

/// [`aligned_ranks`] under both tie conventions, in one pass, with rows
/// compared by `sim`. Non-finite
/// scores follow [`aligned_ranks`]'s rule in both: a non-finite other score
/// never ranks above the true one (as in torch_ref, where `NaN > own` is
/// false), and a non-finite true score ranks last. The latter deliberately
/// departs from torch_ref, whose comparisons with a NaN true score are all
/// false and would rank it first: a diverged model must never score well.
pub fn aligned_ranks_both(src: &Array2<f32>, tgt: &Array2<f32>, sim: Similarity) -> Vec<TiedRank> {
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
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let sims = sim.scores(src.slice(s![start..end, ..]), tgt.view());
        for (r, row) in sims.axis_iter(Axis(0)).enumerate() {
            let i = start + r;
            let own = row[i];
            if !own.is_finite() {
                ranks.push(TiedRank {
                    against: row.len(),
                    for_: row.len(),
                });
                continue;
            }
            let (mut above, mut tied) = (0usize, 0usize);
            for (j, s) in row.iter().enumerate() {
                if j == i || !s.is_finite() {
                    continue;
                }
                if *s > own {
                    above += 1;
                } else if *s == own {
                    tied += 1;
                }
            }
            ranks.push(TiedRank {
                against: above + tied + 1,
                for_: above + 1,
            });
        }
        start = end;
    }
    ranks
}

impl SentenceScores {
    /// Mean figures of ranks under both tie conventions.
    pub fn from_ranks(ranks: &[TiedRank]) -> SentenceScores {
        let n = ranks.len().max(1) as f64;
        let mean = |f: &dyn Fn(&TiedRank) -> f64| ranks.iter().map(f).sum::<f64>() / n;
        SentenceScores {
            mrr: mean(&|r| 1.0 / r.against as f64),
            p1: mean(&|r| f64::from(u8::from(r.against == 1))),
            mrr_ties_for: mean(&|r| 1.0 / r.for_ as f64),
            p1_ties_for: mean(&|r| f64::from(u8::from(r.for_ == 1))),
            queries: ranks.len(),
        }
    }
}

/// MRR and P@1 of parallel sentence retrieval over aligned embeddings
/// compared by `sim`, ties counted against the answer (`mrr`, `p1`: the
/// headline and the validation metric) and for it (`mrr_ties_for`,
/// `p1_ties_for`).
pub fn sentence_retrieval(src: &Array2<f32>, tgt: &Array2<f32>, sim: Similarity) -> SentenceScores {
    SentenceScores::from_ranks(&aligned_ranks_both(src, tgt, sim))
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
        let s = sentence_retrieval(&src, &tgt, Similarity::Cosine);
        assert!((s.mrr - (1.0 + 0.5 + 1.0 / 3.0) / 3.0).abs() < 1e-12);
        assert!((s.p1 - 1.0 / 3.0).abs() < 1e-12);
        let zeros = Array2::<f32>::zeros((4, 2));
        assert_eq!(aligned_ranks(&zeros, &zeros), vec![4, 4, 4, 4]);
        // ties for the answer: everything on one point ranks every answer first
        let z = sentence_retrieval(&zeros, &zeros, Similarity::Cosine);
        assert_eq!((z.mrr_ties_for, z.p1_ties_for), (1.0, 1.0), "{z:?}");
        assert!((z.mrr - 0.25).abs() < 1e-12 && z.p1 == 0.0, "{z:?}");
    }

    #[test]
    fn both_tie_conventions_as_torch_ref() {
        // row 0: own .6, one other above (1), two tied; rows 1 and 3: own .8,
        // two tied; row 2: own 1, alone at the top
        let src = array![[1.0f32, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]];
        let tgt = array![[0.6f32, 0.8], [0.6, 0.8], [1.0, 0.0], [0.6, 0.8]];
        let r = aligned_ranks_both(&src, &tgt, Similarity::Cosine);
        let against: Vec<usize> = r.iter().map(|r| r.against).collect();
        let for_: Vec<usize> = r.iter().map(|r| r.for_).collect();
        // torch_ref: rank_for = (s > own).sum(1) + 1, rank_against = (s >= own).sum(1)
        assert_eq!(against, vec![4, 3, 1, 3]);
        assert_eq!(for_, vec![2, 1, 1, 1]);
        assert_eq!(against, aligned_ranks(&src, &tgt));
        let s = sentence_retrieval(&src, &tgt, Similarity::Cosine);
        let want = (0.25 + 1.0 / 3.0 + 1.0 + 1.0 / 3.0) / 4.0;
        assert!((s.mrr - want).abs() < 1e-12, "{s:?}");
        assert!((s.mrr_ties_for - 0.875).abs() < 1e-12, "{s:?}");
        assert_eq!((s.p1, s.p1_ties_for, s.queries), (0.25, 0.75, 4));
        let v = serde_json::to_value(s).unwrap();
        assert_eq!(v["MRR_ties_for"], s.mrr_ties_for);
        assert_eq!(v["P@1_ties_for"], s.p1_ties_for);
        assert_eq!(v["MRR"], s.mrr);
    }

    #[test]
    fn non_finite_scores_rank_last() {
        let nan = Array2::<f32>::from_elem((3, 2), f32::NAN);
        assert_eq!(aligned_ranks(&nan, &nan), vec![3, 3, 3]);
        let s = sentence_retrieval(&nan, &nan, Similarity::Cosine);
        assert!(s.mrr < 0.34 && s.p1 == 0.0, "{s:?}");
        // also with ties for the answer: a NaN true score is never first
        assert!(s.mrr_ties_for < 0.34 && s.p1_ties_for == 0.0, "{s:?}");
        // one diverged target never outranks a true answer
        let src = array![[1.0f32, 0.0], [0.0, 1.0]];
        let tgt = array![[0.6f32, 0.8], [f32::INFINITY, 1.0]];
        assert_eq!(aligned_ranks(&src, &tgt), vec![1, 2]);
    }

    #[test]
    fn topic_distributions_rank_by_jensen_shannon() {
        // Against (½,½) every distribution has the same dot product, so a
        // dot product ties; JS ranks the nearer one first.
        let src = array![[0.9f32, 0.1], [0.5, 0.5]];
        let tgt = array![[0.8f32, 0.2], [0.45, 0.55]];
        let js = aligned_ranks_both(&src, &tgt, Similarity::JensenShannon);
        assert_eq!(js.iter().map(|r| r.against).collect::<Vec<_>>(), vec![1, 1]);
        let dot = aligned_ranks_both(&src, &tgt, Similarity::Cosine);
        assert_eq!(dot[1].against, 2);
    }
}
