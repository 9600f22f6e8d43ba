//! Retrieval indexes: exact BM25 over analysed terms ([`bm25`]), query
//! translation for it ([`translate`]), pseudo-relevance feedback for it
//! ([`expand`]: Bo1, RM3), BM25 runs on a workspace's ad-hoc
//! task ([`adhoc`]), pseudo-relevance mining for XCNN pre-initialisation
//! ([`mining`]), exact dense top-k over embeddings ([`dense`]) and approximate
//! top-k over Rosetta's own HNSW graph ([`approx`], [`hnsw`]), over rows in
//! memory or memory-mapped from disk ([`mapped`]).
//!
//! Every ranked list here orders documents the way the evaluator does
//! ([`crate::eval::trec::sorted_for_eval`]): score descending, ties by
//! document id descending. Indexes know documents by row; a [`TieOrder`]
//! made from the document ids tells them which row wins a tie.

pub mod adhoc;
pub mod approx;
pub mod bm25;
pub mod dense;
pub mod expand;
pub mod fusion;
pub mod hnsw;
pub mod mapped;
pub mod mining;
pub mod npy;
pub mod translate;

pub use approx::{ApproxIndex, HnswParams};
pub use bm25::{Bm25Index, Bm25Params, Clause, Query};
pub use dense::{DenseIndex, Matmul};
pub use expand::Expansion;
pub use fusion::Fusion;
pub use mapped::{Embeddings, MappedNpy};
pub use mining::{mine_positives, MineConfig, MineScoring};
pub use translate::{apertium_translate, translate_dict, translate_dict_with, DictTranslation};

use std::cmp::Ordering;

/// One retrieved document: its row in the collection and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Row of the document in the indexed collection.
    pub doc: u32,
    /// Retrieval score (higher is better).
    pub score: f64,
}

/// Which of two equally scored rows ranks first. The evaluator breaks ties by
/// document id descending, so an index that knows the ids must rank the row
/// with the greater id first; without ids, the greater row ranks first (the
/// same rule with ids `0, 1, 2, ...` compared as numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TieOrder {
    /// `rank[row]`: position of the row's id in ascending id order; empty
    /// means "by row".
    rank: Vec<u32>,
}

impl TieOrder {
    /// Ties by row number (greater row first).
    pub fn by_row() -> Self {
        TieOrder { rank: Vec::new() }
    }

    /// Ties by document id, compared as byte strings like trec_eval does
    /// (greater id first).
    pub fn from_docnos<S: AsRef<str>>(docnos: &[S]) -> Self {
        let mut rows: Vec<u32> = (0..docnos.len() as u32).collect();
        rows.sort_by(|&a, &b| docnos[a as usize].as_ref().cmp(docnos[b as usize].as_ref()));
        let mut rank = vec![0u32; docnos.len()];
        for (pos, &r) in rows.iter().enumerate() {
            rank[r as usize] = pos as u32;
        }
        TieOrder { rank }
    }

    /// Number of rows the order covers (0 for [`TieOrder::by_row`]).
    pub fn len(&self) -> usize {
        self.rank.len()
    }

    /// Whether the order is "by row".
    pub fn is_empty(&self) -> bool {
        self.rank.is_empty()
    }

    /// The tie key of `row`: the greater key ranks first.
    #[inline]
    pub fn key(&self, row: u32) -> u32 {
        if self.rank.is_empty() {
            row
        } else {
            self.rank[row as usize]
        }
    }

    /// Evaluator order of two hits: `Less` means `a` ranks before `b`. A
    /// non-finite score ranks below every finite one.
    #[inline]
    pub fn cmp_hits(&self, a: &Hit, b: &Hit) -> Ordering {
        crate::eval::trec::rank_key(b.score)
            .total_cmp(&crate::eval::trec::rank_key(a.score))
            .then_with(|| self.key(b.doc).cmp(&self.key(a.doc)))
    }

    /// Sorts hits into evaluator order.
    pub fn sort(&self, hits: &mut [Hit]) {
        hits.sort_unstable_by(|a, b| self.cmp_hits(a, b));
    }
}

/// Peak resident memory of this process in bytes (`VmHWM` of
/// `/proc/self/status`), where the system reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The score a ranking sorts by: itself when finite, else below every finite
/// score (a diverged model's NaN is the worst, never the best).
#[inline]
pub fn rank_key32(s: f32) -> f32 {
    if s.is_finite() {
        s
    } else {
        f32::NEG_INFINITY
    }
}
