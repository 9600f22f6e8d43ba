//! Evaluation: TREC qrels and run files, trec_eval-exact metrics, significance tests.

pub mod sentence;
pub mod trec;

pub use trec::{Qrels, Run};
