//! Evaluation: TREC qrels and run files, trec_eval-exact metrics, significance
//! tests, and comparison tables of systems against a baseline.

pub mod compare;
pub mod metrics;
pub mod sentence;
pub mod significance;
pub mod trec;

pub use compare::{CompareOptions, Comparison, Mark, System, TableFormat};
pub use metrics::{evaluate, evaluate_rankings, Evaluation, Metric, Metrics};
pub use significance::{Bootstrap, Correction, PairedTest, TestResult};
pub use trec::{Qrels, Run};
