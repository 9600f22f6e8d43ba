//! Training jobs: the runner that drives a model's [`Trainer`](crate::models::Trainer)
//! inside a session folder (metrics, status, checkpoints, validation, early
//! stopping, cancellation), and the lexical baselines' one-shot job.

pub mod lexical;
pub mod runner;
