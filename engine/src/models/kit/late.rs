//! Late interaction over a model's token states (ColBERT's MaxSim, Khattab
//! & Zaharia, SIGIR 2020): a query token is matched to its most similar
//! document token, and the query–document score is the mean of those
//! best similarities. The same matching is the token alignment that
//! explains an encoder's hit.

use ndarray::{Array2, ArrayView1};

/// A text's token states: one unit-length row per token the model read
/// from the text itself (no special tokens, no role prefix), with each
/// token's byte span in the text (empty for a token with no characters
/// of its own, as a bare word-start marker).
#[derive(Debug, Clone)]
pub struct TokenStates {
    /// `[tokens, dim]`, each row of unit length (a zero row stays zero).
    pub rows: Array2<f32>,
    /// Byte range of each row's token in the text.
    pub spans: Vec<(usize, usize)>,
}

impl TokenStates {
    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.rows.nrows()
    }
    /// Whether the text gave no token.
    pub fn is_empty(&self) -> bool {
        self.rows.nrows() == 0
    }
}

/// How a model with token states retrieves: the head of each ranking (its
/// `depth` best by the pooled vectors' cosine) rescored as
/// `(1 − weight)·cosine + weight·MaxSim`, the rest kept below in order.
/// The encoder's `rerank` and `rerank_depth` settings; `rosetta eval` and
/// `search --rerank` give one for a call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LateRerank {
    /// MaxSim's weight, 0..=1.
    pub weight: f64,
    /// Documents (or target sentences) reranked per query, ≥ 1.
    pub depth: usize,
}

/// The weight of a `rerank` setting: `None` for `none`, `Some(w)` for
/// `maxsim:W` with W in 0..=1; anything else is an error saying what is
/// expected.
pub fn rerank_weight(v: &str) -> std::result::Result<Option<f64>, String> {
    let bad = || format!("expected none or maxsim:W with W from 0 to 1, got `{v}`");
    match v.trim() {
        "none" => Ok(None),
        t => match t.strip_prefix("maxsim:").map(str::parse::<f64>) {
            Some(Ok(w)) if (0.0..=1.0).contains(&w) => Ok(Some(w)),
            _ => Err(bad()),
        },
    }
}

/// Checks a `rerank` setting ([`rerank_weight`]).
pub fn check_rerank(v: &str) -> std::result::Result<(), String> {
    rerank_weight(v).map(|_| ())
}

fn dot(a: ArrayView1<f32>, b: ArrayView1<f32>) -> f32 {
    a.iter().zip(b.iter()).map(|(x, y)| x * y).sum()
}

/// For each query token, the document token it is most similar to and
/// that similarity (a cosine, rows being unit length); `None` where the
/// document has no token. Ties go to the earlier document token.
pub fn best_matches(q: &TokenStates, d: &TokenStates) -> Vec<Option<(usize, f32)>> {
    q.rows
        .rows()
        .into_iter()
        .map(|qi| {
            let mut best: Option<(usize, f32)> = None;
            for (j, dj) in d.rows.rows().into_iter().enumerate() {
                let s = dot(qi, dj);
                if best.is_none_or(|(_, b)| s > b) {
                    best = Some((j, s));
                }
            }
            best
        })
        .collect()
}

/// MaxSim: the mean over the query's tokens of each one's best cosine with
/// a document token, in [−1, 1]. `None` when either text has no token (no
/// score, rather than a made-up 0).
pub fn maxsim(q: &TokenStates, d: &TokenStates) -> Option<f64> {
    if q.is_empty() || d.is_empty() {
        return None;
    }
    let m = best_matches(q, d);
    let sum: f64 = m.iter().map(|b| b.map_or(0.0, |(_, s)| s as f64)).sum();
    Some(sum / q.len() as f64)
}

/// Rows scaled to unit length (a zero row is left zero).
pub fn unit_rows(mut a: Array2<f32>) -> Array2<f32> {
    for mut r in a.rows_mut() {
        let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            r.mapv_inplace(|x| x / n);
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn states(rows: Array2<f32>) -> TokenStates {
        let n = rows.nrows();
        TokenStates {
            rows: unit_rows(rows),
            spans: (0..n).map(|i| (i, i + 1)).collect(),
        }
    }

    #[test]
    fn maxsim_is_the_mean_of_each_query_tokens_best_cosine() {
        let q = states(array![[1.0, 0.0], [0.0, 2.0]]);
        let d = states(array![[3.0, 4.0], [1.0, 0.0], [-1.0, 0.0]]);
        // token 0 best with d1 (1.0); token 1 best with d0 (0.8)
        let m = best_matches(&q, &d);
        assert_eq!(m[0].unwrap().0, 1);
        assert_eq!(m[1].unwrap().0, 0);
        assert!((m[1].unwrap().1 - 0.8).abs() < 1e-6);
        assert!((maxsim(&q, &d).unwrap() - 0.9).abs() < 1e-6);
        let none = states(Array2::zeros((0, 2)));
        assert_eq!(maxsim(&q, &none), None);
        assert_eq!(maxsim(&none, &d), None);
    }
}
