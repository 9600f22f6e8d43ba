//! Term weighting of raw count matrices.

use serde::{Deserialize, Serialize};

use super::{CsrMatrix, Vocabulary};

/// How a count becomes a weight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "scheme")]
pub enum Weighting {
    /// Raw term counts.
    Raw,
    /// `(1 + ln tf) · ln(N / df)`.
    LogTfIdf,
    /// BM25's saturated weight `tf (k1 + 1) / (tf + k1 (1 − b + b·dl/avgdl)) · idf`,
    /// with Lucene's `idf = ln(1 + (N − df + 0.5) / (df + 0.5))`.
    Bm25 { k1: f32, b: f32 },
}

/// Lucene's BM25 idf, never negative.
pub fn bm25_idf(n_docs: usize, df: u32) -> f32 {
    let (n, df) = (n_docs as f32, df as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Weighted copy of a count matrix whose columns are `vocab`'s terms;
/// rows scaled to unit length when `l2` is set.
pub fn weigh(counts: &CsrMatrix, vocab: &Vocabulary, scheme: Weighting, l2: bool) -> CsrMatrix {
    let mut m = counts.clone();
    match scheme {
        Weighting::Raw => {}
        Weighting::LogTfIdf => m.map_values(|c, tf| (1.0 + tf.ln()) * vocab.idf(c)),
        Weighting::Bm25 { k1, b } => {
            let lens: Vec<f32> = (0..m.n_rows())
                .map(|i| m.row(i).1.iter().sum::<f32>())
                .collect();
            let avg = (lens.iter().sum::<f32>() / lens.len().max(1) as f32).max(1e-9);
            for (i, len) in lens.iter().enumerate() {
                let (a, e) = (m.indptr[i], m.indptr[i + 1]);
                let norm = k1 * (1.0 - b + b * len / avg);
                for j in a..e {
                    let tf = m.values[j];
                    let idf = bm25_idf(vocab.n_docs, vocab.df[m.indices[j] as usize]);
                    m.values[j] = tf * (k1 + 1.0) / (tf + norm) * idf;
                }
            }
        }
    }
    if l2 {
        m.l2_normalize_rows();
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_tf_idf() {
        let v = Vocabulary::from_parts("xx", vec!["a".into(), "b".into()], vec![1, 4], 4);
        let mut c = CsrMatrix::new(2);
        c.push_row([(0, 2.0), (1, 1.0)]);
        let w = weigh(&c, &v, Weighting::LogTfIdf, false);
        assert!((w.values[0] - (1.0 + 2f32.ln()) * 4f32.ln()).abs() < 1e-6);
        assert_eq!(w.values[1], 0.0);
    }
}
