//! Rosetta's engine: text, corpora, models, training, index, evaluation and
//! sessions. The CLI (`src/main.rs`) and the TUI (`tui`) are thin layers over
//! it; nothing here draws or reads the terminal.

pub mod corpus;
pub mod error;
pub mod eval;
pub mod index;
pub mod jobs;
pub mod models;
pub mod plot;
pub mod session;
pub mod text;
pub mod train;
pub mod tui;
pub mod util;

pub use error::{Error, Result};
