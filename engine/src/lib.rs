//! Rosetta's engine: text, corpora, models, training, index, evaluation,
//! sessions and jobs. The CLI and the TUI are modules of the `rosetta`
//! binary (`src/main.rs`, `src/cli/`, `src/tui/`), thin layers over it;
//! nothing here draws or reads the terminal, and the compiler keeps it so.

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
