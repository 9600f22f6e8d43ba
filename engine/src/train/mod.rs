//! Training jobs: the runner that drives a model's [`Trainer`](crate::models::Trainer)
//! inside a session folder (metrics, status, checkpoints, validation, early
//! stopping, cancellation), and the lexical baselines' one-shot job. The
//! runner composes small policies: [`early_stopping::EarlyStopping`] and
//! [`checkpoints::CheckpointPolicy`]; the job's state goes through a
//! [`crate::session::JobLife`].

pub mod checkpoints;
pub mod early_stopping;
pub mod lexical;
pub mod runner;
