//! The engine's one error type. Every message names what went wrong and,
//! where a file is involved, the file and line, so the CLI and the TUI can
//! show it as is.

use std::path::{Path, PathBuf};

/// Errors raised anywhere in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O failure on a named file. (The OS message is part of the text and
    /// deliberately not a `source`, so `{:#}` does not print it twice.)
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Malformed content at a known line (1-based) of a file.
    #[error("{}:{line}: {msg}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    /// A problem with a file as a whole (no single line to blame).
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    /// Invalid arguments, settings or state.
    #[error("{0}")]
    Invalid(String),
    /// A failure inside candle (tensor shapes, devices, safetensors).
    #[error("tensor error: {0}")]
    Candle(#[from] candle_core::Error),
    /// The job was cancelled on request.
    #[error("cancelled")]
    Cancelled,
}

/// Result with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl AsRef<Path>, error: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            error,
        }
    }
    /// A parse error at `line` (1-based) of `path`.
    pub fn parse(path: impl AsRef<Path>, line: usize, msg: impl Into<String>) -> Self {
        Error::Parse {
            path: path.as_ref().to_path_buf(),
            line,
            msg: msg.into(),
        }
    }
    /// A whole-file problem with `path`.
    pub fn file(path: impl AsRef<Path>, msg: impl Into<String>) -> Self {
        Error::File {
            path: path.as_ref().to_path_buf(),
            msg: msg.into(),
        }
    }
    /// An invalid-argument error.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }
}
