//! Rosetta's engine: text, corpora, models, training, index, evaluation,
//! sessions and jobs: the `rosetta-engine` crate (`engine/`, imported as
//! `rosetta`). The CLI and the TUI are modules of the `rosetta` binary crate
//! (`src/main.rs`, `src/cli/`, `src/tui/`), thin layers over it. Nothing
//! here draws or reads the terminal, and the compiler keeps it so: this
//! crate's dependencies (`engine/Cargo.toml`) include no terminal, argument
//! parsing or progress-bar crate.

pub mod corpus;
pub mod error;
pub mod eval;
pub mod index;
pub mod jobs;
pub mod models;
pub mod plot;
pub mod session;
pub mod space;
pub mod text;
pub mod train;
pub mod util;

pub use error::{Error, Result};
