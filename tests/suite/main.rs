//! The integration tests, one binary (as ripgrep's `tests/tests.rs`): one
//! module a former test file, `common` their helpers. Each test's name is its
//! module path, e.g. `cargo test --test suite faults::` runs the former
//! `tests/faults.rs`, `cargo test --test suite jobs::a_job_signalled_twice`
//! one test. Most tests run the `rosetta` binary in a process of its own and
//! share no state in this one; `tests/e2e_tui.rs` (the workbench under tmux,
//! timed keystrokes) is a binary of its own so that it runs alone, not beside
//! the suite's training jobs.

mod common;

mod adv_bilstm;
mod approx;
mod associations;
mod baselines;
mod bench;
mod compare;
mod corpus;
mod dbn;
mod encoder;
mod eval;
mod eval_export;
mod expansion;
mod faults;
mod fusion;
mod hdlr;
mod hindi;
mod index;
mod jobs;
mod layers;
mod linear;
mod plsa;
mod precision;
mod queries;
mod registry;
mod runs_cli;
mod search_docs;
mod session;
mod slurm;
mod subwords;
mod ux;
mod xcnn;
