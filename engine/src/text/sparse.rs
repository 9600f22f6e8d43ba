//! Compressed sparse rows: the one sparse matrix type of the engine.

use serde::{Deserialize, Serialize};

/// A row-major sparse matrix of `f32` (CSR). Rows are texts, columns terms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CsrMatrix {
    /// Number of columns (vocabulary size).
    pub n_cols: usize,
    /// Row `i` holds entries `indptr[i]..indptr[i+1]`; `indptr[0] == 0`.
    pub indptr: Vec<usize>,
    /// Column of each entry, ascending within a row.
    pub indices: Vec<u32>,
    /// Value of each entry.
    pub values: Vec<f32>,
}

impl CsrMatrix {
    /// An empty matrix with `n_cols` columns and no rows.
    pub fn new(n_cols: usize) -> Self {
        CsrMatrix {
            n_cols,
            indptr: vec![0],
            indices: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Appends a row from `(column, value)` pairs; columns may repeat and come
    /// in any order: repeats are summed.
    pub fn push_row(&mut self, entries: impl IntoIterator<Item = (u32, f32)>) {
        let mut row: Vec<(u32, f32)> = entries.into_iter().collect();
        row.sort_unstable_by_key(|e| e.0);
        let start = self.indices.len();
        for (c, v) in row {
            debug_assert!((c as usize) < self.n_cols);
            if self.indices.len() > start && *self.indices.last().unwrap() == c {
                *self.values.last_mut().unwrap() += v;
            } else {
                self.indices.push(c);
                self.values.push(v);
            }
        }
        self.indptr.push(self.indices.len());
    }

    /// Number of rows.
    pub fn n_rows(&self) -> usize {
        self.indptr.len() - 1
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }

    /// Columns and values of row `i`.
    pub fn row(&self, i: usize) -> (&[u32], &[f32]) {
        let (a, b) = (self.indptr[i], self.indptr[i + 1]);
        (&self.indices[a..b], &self.values[a..b])
    }

    /// Whether row `i` has no entries.
    pub fn row_is_empty(&self, i: usize) -> bool {
        self.indptr[i] == self.indptr[i + 1]
    }

    /// A new matrix of the given rows, in the given order.
    pub fn select_rows(&self, rows: &[usize]) -> CsrMatrix {
        let mut m = CsrMatrix::new(self.n_cols);
        for &r in rows {
            let (c, v) = self.row(r);
            m.indices.extend_from_slice(c);
            m.values.extend_from_slice(v);
            m.indptr.push(m.indices.len());
        }
        m
    }

    /// Applies `f(column, value)` to every entry.
    pub fn map_values(&mut self, f: impl Fn(u32, f32) -> f32) {
        for (c, v) in self.indices.iter().zip(self.values.iter_mut()) {
            *v = f(*c, *v);
        }
    }

    /// Scales every row to unit L2 norm (empty and zero rows stay zero).
    pub fn l2_normalize_rows(&mut self) {
        for i in 0..self.n_rows() {
            let (a, b) = (self.indptr[i], self.indptr[i + 1]);
            let n: f32 = self.values[a..b].iter().map(|v| v * v).sum::<f32>().sqrt();
            if n > 0.0 {
                self.values[a..b].iter_mut().for_each(|v| *v /= n);
            }
        }
    }

    /// Dense copy (for small matrices and tests).
    pub fn to_dense(&self) -> ndarray::Array2<f32> {
        let mut d = ndarray::Array2::zeros((self.n_rows(), self.n_cols));
        for i in 0..self.n_rows() {
            let (c, v) = self.row(i);
            for (c, v) in c.iter().zip(v) {
                d[[i, *c as usize]] += v;
            }
        }
        d
    }

    /// `self · dense` for a dense `n_cols × k` matrix: `n_rows × k`.
    pub fn matmul_dense(&self, dense: &ndarray::Array2<f32>) -> ndarray::Array2<f32> {
        use ndarray::parallel::prelude::*;
        assert_eq!(dense.nrows(), self.n_cols, "csr × dense shape mismatch");
        let k = dense.ncols();
        let mut out = ndarray::Array2::<f32>::zeros((self.n_rows(), k));
        out.axis_iter_mut(ndarray::Axis(0))
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut o)| {
                let (c, v) = self.row(i);
                for (c, v) in c.iter().zip(v) {
                    o.scaled_add(*v, &dense.row(*c as usize));
                }
            });
        out
    }

    /// `selfᵀ · dense` for a dense `n_rows × k` matrix: `n_cols × k`.
    pub fn t_matmul_dense(&self, dense: &ndarray::Array2<f32>) -> ndarray::Array2<f32> {
        assert_eq!(dense.nrows(), self.n_rows(), "csrᵀ × dense shape mismatch");
        let mut out = ndarray::Array2::<f32>::zeros((self.n_cols, dense.ncols()));
        for i in 0..self.n_rows() {
            let (c, v) = self.row(i);
            for (c, v) in c.iter().zip(v) {
                out.row_mut(*c as usize).scaled_add(*v, &dense.row(i));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn rows_products_and_norms() {
        let mut m = CsrMatrix::new(3);
        m.push_row([(2, 1.0), (0, 2.0), (2, 1.0)]);
        m.push_row([]);
        assert_eq!(m.row(0), (&[0u32, 2][..], &[2.0f32, 2.0][..]));
        assert!(m.row_is_empty(1));
        let d = array![[1.0f32, 0.0], [0.0, 1.0], [1.0, 1.0]];
        assert_eq!(m.matmul_dense(&d), array![[4.0f32, 2.0], [0.0, 0.0]]);
        let t = m.t_matmul_dense(&array![[1.0f32], [5.0]]);
        assert_eq!(t, array![[2.0f32], [0.0], [2.0]]);
        m.l2_normalize_rows();
        assert!((m.values[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
    }
}
