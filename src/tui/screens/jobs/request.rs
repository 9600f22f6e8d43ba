//! The work the Jobs screen asks of the backend and the backend's answers.

use crate::tui::backend::*;

/// Work the Jobs screen asks of the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Rescan the sessions root.
    ListSessions,
    /// Read new metrics records.
    TailMetrics { session: String, offset: u64 },
    /// Read a session's settings (duplicate-with-changes).
    SessionSpec { session: String },
    /// Start a job.
    Launch(Box<JobSpec>),
    /// Read the launcher last used under the sessions root.
    LauncherMemory,
    /// Stop a job.
    Cancel(String),
    /// Restart a job from its checkpoint.
    Resume(String),
    /// A session's details (the details popup).
    SessionDetail(String),
    /// The last `lines` lines of a session's log (the log pane).
    LogTail { session: String, lines: usize },
    /// Set a session's name, tags or note.
    SetMeta {
        session: String,
        field: MetaField,
        value: String,
    },
    /// Delete a session.
    Delete(String),
}

/// The backend's answers to [`Request`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Sessions(Result<Vec<SessionSummary>, String>),
    Metrics {
        session: String,
        offset: u64,
        chunk: Result<MetricsChunk, String>,
    },
    Spec {
        session: String,
        spec: Result<Box<JobSpec>, String>,
    },
    Launched(Result<Launched, String>),
    LauncherMemory(Result<LauncherMemory, String>),
    Cancelled {
        session: String,
        result: Result<(), String>,
    },
    Resumed {
        session: String,
        result: Result<Launched, String>,
    },
    Detail {
        session: String,
        result: Result<Box<RunDetail>, String>,
    },
    LogTail {
        session: String,
        result: Result<Vec<String>, String>,
    },
    MetaSet {
        session: String,
        field: MetaField,
        result: Result<(), String>,
    },
    Deleted {
        session: String,
        result: Result<(), String>,
    },
}
