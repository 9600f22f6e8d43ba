//! Texts as term ids in reading order: what a sequence model (a BiLSTM)
//! reads, where every other model reads the counts of a [`CsrMatrix`].

use super::{CsrMatrix, Vocabulary};

/// One row per text: the ids of its known terms in reading order (repeats
/// kept; unknown words dropped). Stored in a [`CsrMatrix`] layout whose
/// row entries are the ids in order (not ascending) with value 1, so that
/// the matrix file format carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sequences {
    layout: CsrMatrix,
}

impl Default for Sequences {
    fn default() -> Self {
        Sequences::new(0)
    }
}

impl Sequences {
    /// No texts yet, over a vocabulary of `n_terms` terms.
    pub fn new(n_terms: usize) -> Self {
        Sequences {
            layout: CsrMatrix::new(n_terms),
        }
    }

    /// The sequences of `docs` (token lists) over `vocab`
    /// ([`Vocabulary::sequence`]).
    pub fn of<S: AsRef<str>>(vocab: &Vocabulary, docs: &[Vec<S>]) -> Self {
        let mut s = Sequences::new(vocab.len());
        for d in docs {
            s.push_row(&vocab.sequence(d));
        }
        s
    }

    /// Appends one text's ids (each below the vocabulary size).
    pub fn push_row(&mut self, ids: &[u32]) {
        let m = &mut self.layout;
        debug_assert!(ids.iter().all(|&i| (i as usize) < m.n_cols));
        m.indices.extend_from_slice(ids);
        m.values.extend(std::iter::repeat_n(1.0f32, ids.len()));
        m.indptr.push(m.indices.len());
    }

    /// Number of texts.
    pub fn n_rows(&self) -> usize {
        self.layout.n_rows()
    }

    /// Vocabulary size the ids index.
    pub fn n_terms(&self) -> usize {
        self.layout.n_cols
    }

    /// Term ids of text `i`, in reading order.
    pub fn row(&self, i: usize) -> &[u32] {
        self.layout.row(i).0
    }

    /// Length (known terms) of every text.
    pub fn lengths(&self) -> Vec<usize> {
        self.layout.indptr.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// The given rows, in the given order.
    pub fn select_rows(&self, rows: &[usize]) -> Sequences {
        Sequences {
            layout: self.layout.select_rows(rows),
        }
    }

    /// Raw term counts of the texts.
    pub fn counts(&self) -> CsrMatrix {
        let mut m = CsrMatrix::new(self.n_terms());
        for i in 0..self.n_rows() {
            m.push_row(self.row(i).iter().map(|&t| (t, 1.0)));
        }
        m
    }

    /// The matrix layout, for writing with the matrix file format.
    pub fn layout(&self) -> &CsrMatrix {
        &self.layout
    }

    /// Sequences from a matrix written from [`Sequences::layout`]; an entry
    /// whose value is not 1 means the file holds counts, not sequences.
    pub fn from_layout(layout: CsrMatrix) -> Result<Self, String> {
        if let Some(i) = layout.values.iter().position(|&v| v != 1.0) {
            return Err(format!(
                "entry {i} has value {} (a sequence file holds ones)",
                layout.values[i]
            ));
        }
        Ok(Sequences { layout })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_repeats_are_kept_and_counts_agree() {
        let docs = [
            vec!["b", "a", "zz", "b"],
            vec!["zz"],
            vec!["a", "c", "a", "b"],
            vec!["a", "a", "b", "b", "c"],
        ];
        let v = Vocabulary::build("en", &docs[2..], 10, 1);
        let s = Sequences::of(&v, &docs[..3]);
        let id = |t: &str| v.id(t).unwrap();
        assert_eq!(s.row(0), &[id("b"), id("a"), id("b")]);
        assert!(s.row(1).is_empty());
        assert_eq!(s.lengths(), vec![3, 0, 4]);
        assert_eq!(s.counts(), v.count_matrix(&docs[..3]));
        let sel = s.select_rows(&[2, 0]);
        assert_eq!(sel.row(1), s.row(0));
        assert_eq!(Sequences::from_layout(s.layout().clone()).unwrap(), s);
        assert!(Sequences::from_layout(v.count_matrix(&docs[..3])).is_err());
    }
}
