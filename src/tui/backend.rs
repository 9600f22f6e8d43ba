//! The workbench's narrow view of the engine: everything the screens need,
//! behind one [`Backend`] trait, so that the UI can be driven by a test double
//! and so that the UI thread never calls the engine directly.
//!
//! Every method may block (disk, compute); the event loop calls them on
//! worker threads and feeds the answers back through a channel.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::text::Side;
use crate::Result;

/// A session's lifecycle state, as in its `status.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting to start.
    #[default]
    Queued,
    /// Training now.
    Running,
    /// Finished normally.
    Done,
    /// Stopped by an error (see the summary's `error`).
    Failed,
    /// Stopped on request.
    Cancelled,
}

impl JobState {
    /// Lower-case name as shown in the jobs table.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
    /// Whether the job can still change (queued or running).
    pub fn is_active(self) -> bool {
        matches!(self, JobState::Queued | JobState::Running)
    }
}

/// One session folder as the jobs table shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionSummary {
    /// Folder name under the sessions root.
    pub id: String,
    /// The session folder.
    pub dir: PathBuf,
    /// Lifecycle state.
    pub state: JobState,
    /// Process id of the job runner, when known.
    pub pid: Option<u32>,
    /// `false` when the state says running but the process is gone.
    pub alive: Option<bool>,
    /// Model kind (`s2net`, `cl-lsi`, ...).
    pub model: String,
    /// Workspace file the session trains on.
    pub workspace: String,
    /// Device (`cpu`, `cuda:0`).
    pub device: String,
    /// Fraction done, 0..=1.
    pub progress: Option<f64>,
    /// Current epoch (from 1).
    pub epoch: Option<usize>,
    /// Planned epochs.
    pub epochs: Option<usize>,
    /// Estimated seconds left.
    pub eta_s: Option<f64>,
    /// Recent training throughput.
    pub pairs_per_s: Option<f64>,
    /// Best validation MRR so far.
    pub best_mrr: Option<f64>,
    /// Epoch of the best validation MRR.
    pub best_epoch: Option<usize>,
    /// Error message of a failed job.
    pub error: Option<String>,
}

/// One record of a session's `metrics.jsonl` (the session module's type).
pub use crate::session::MetricRecord;

/// New metrics records read from an offset.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetricsChunk {
    /// Parsed records, in file order.
    pub records: Vec<MetricRecord>,
    /// Cursor to ask from next time (bytes of `metrics.jsonl` consumed, for
    /// the real backend; any increasing number for others).
    pub next_offset: u64,
    /// The file was shorter than the offset (replaced): start over.
    pub reset: bool,
    /// Complete lines that were not valid records.
    pub bad_lines: usize,
}

/// The settings of a new training job, as the form edits them. `None`
/// means "the model's default" (the flag is not passed), since models differ
/// in what they read (`rosetta train` refuses settings a model ignores).
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Workspace file (`workspace.toml`).
    pub workspace: String,
    /// Model registry name.
    pub model: String,
    /// Dimension of the shared space.
    pub dim: Option<usize>,
    /// Number of epochs.
    pub epochs: Option<usize>,
    /// Learning rate.
    pub lr: Option<f64>,
    /// Negatives (`random:K` or `in-batch`; models that sample them only).
    pub negatives: Option<String>,
    /// Device (`auto`, `cpu`, `cuda`, `cuda:N`).
    pub device: String,
    /// Session folder to initialise from (`--set init=DIR`), if any.
    pub init: Option<String>,
    /// Any other `--set KEY=VALUE` settings (batch, patience, log_every, ...).
    pub extra: Vec<(String, String)>,
}

/// Settings the form has a field for (not repeated under "other settings").
pub const FORM_KEYS: &[&str] = &["dim", "epochs", "lr", "negatives", "init"];

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            workspace: String::new(),
            model: "s2net".into(),
            dim: Some(128),
            epochs: None,
            lr: None,
            negatives: None,
            device: "auto".into(),
            init: None,
            extra: Vec::new(),
        }
    }
}

impl JobSpec {
    /// The `rosetta train` arguments (without the program name) that start
    /// this job detached; `session_root` is where the session folder goes
    /// (`sessions` is the CLI's default and is not passed).
    pub fn train_args(&self, session_root: &Path) -> Vec<String> {
        let mut a = vec![
            "train".to_string(),
            "--workspace".into(),
            self.workspace.clone(),
            "--model".into(),
            self.model.clone(),
            "--device".into(),
            self.device.clone(),
        ];
        if let Some(d) = self.dim {
            a.extend(["--dim".into(), d.to_string()]);
        }
        if let Some(e) = self.epochs {
            a.extend(["--epochs".into(), e.to_string()]);
        }
        if let Some(lr) = self.lr {
            a.extend(["--lr".into(), lr.to_string()]);
        }
        if let Some(n) = &self.negatives {
            a.extend(["--set".into(), format!("negatives={n}")]);
        }
        if let Some(init) = &self.init {
            a.extend([
                "--set".into(),
                format!("init={}", session_root.join(init).display()),
            ]);
        }
        for (k, v) in &self.extra {
            a.extend(["--set".into(), format!("{k}={v}")]);
        }
        if session_root != Path::new("sessions") {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            a.extend([
                "--session".into(),
                session_root
                    .join(format!("{}-{stamp}", self.model))
                    .display()
                    .to_string(),
            ]);
        }
        a.push("--detach".into());
        a
    }
}

/// What launching or resuming a job answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Launched {
    /// The new (or resumed) session, when the runner named it.
    pub session: Option<String>,
    /// The runner's message (its stdout, trimmed).
    pub message: String,
}

/// How a query's ranking mixes the model with BM25 (the engine's).
pub use crate::index::fusion::Fusion;

/// A loaded search index, workspace figures (the engine's).
pub use crate::session::workbench::{IndexInfo, SplitStats, WorkspaceStats};

/// The compare table, its rows, marks and output formats (the engine's).
pub use crate::eval::compare::{Comparison, Mark, Row as CompareRow, TableFormat};

pub use crate::session::search::{
    Hit, Judged, MarkedNeighbour as Neighbour, NeighbourResult, SearchResult,
};

/// Progress of a slow call: fraction 0..=1 and what is being done.
pub type ProgressFn<'a> = &'a (dyn Fn(f64, &str) + Send + Sync);

/// What the workbench needs from the engine.
pub trait Backend: Send + Sync {
    /// Every session under the sessions root, newest first.
    fn list_sessions(&self) -> Result<Vec<SessionSummary>>;
    /// Complete metrics records of `session` from byte `offset` on.
    fn tail_metrics(&self, session: &str, offset: u64) -> Result<MetricsChunk>;
    /// The settings `session` was started with (for duplicate-with-changes).
    fn session_spec(&self, session: &str) -> Result<JobSpec>;
    /// Starts a detached training job.
    fn launch(&self, spec: &JobSpec) -> Result<Launched>;
    /// Asks a running job to stop.
    fn cancel(&self, session: &str) -> Result<()>;
    /// Restarts a stopped job from its last checkpoint.
    fn resume(&self, session: &str) -> Result<Launched>;
    /// Loads (and keeps) `session`'s search index; slow, reports progress.
    fn load_index(&self, session: &str, progress: ProgressFn) -> Result<IndexInfo>;
    /// Ranks documents for `query` with a loaded index.
    fn search(&self, session: &str, query: &str, k: usize, fusion: Fusion) -> Result<SearchResult>;
    /// Nearest terms of `term` (in `side`'s language) in both languages.
    fn neighbours(
        &self,
        session: &str,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult>;
    /// Sessions × metrics with significance marks against `baseline`
    /// (sessions that cannot be scored are listed as skipped);
    /// `progress(done, total, session)` before each session is evaluated.
    fn compare(
        &self,
        sessions: &[String],
        baseline: Option<&str>,
        progress: &dyn Fn(usize, usize, &str),
    ) -> Result<Comparison>;
    /// Writes the table to `path` in `format`.
    fn export_compare(&self, table: &Comparison, path: &Path, format: TableFormat) -> Result<()>;
    /// Figures about a workspace.
    fn workspace_stats(&self, workspace: &str) -> Result<WorkspaceStats>;
}

/// The form settings of a session's config: model, workspace, the device
/// asked for, and the settings that were given (`--dim`, `--set init=`, ...).
pub fn spec_from_config(cfg: &crate::session::SessionConfig) -> JobSpec {
    let g = |k: &str| cfg.given.get(k).cloned();
    JobSpec {
        workspace: cfg.workspace.display().to_string(),
        model: cfg.model.clone(),
        dim: g("dim").and_then(|x| x.parse().ok()),
        epochs: g("epochs").and_then(|x| x.parse().ok()),
        lr: g("lr").and_then(|x| x.parse().ok()),
        negatives: g("negatives"),
        device: if cfg.device_request.is_empty() {
            "auto".into()
        } else {
            cfg.device_request.clone()
        },
        init: g("init").filter(|x| !x.is_empty()).map(|x| {
            Path::new(&x)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(x)
        }),
        extra: cfg
            .given
            .iter()
            .filter(|(k, _)| !FORM_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// The session id a `rosetta train --detach` printed: the `session` field of
/// a JSON object, or a `sessions/<id>` path on any line.
pub fn session_from_output(out: &str) -> Option<String> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(out.trim()) {
        if let Some(s) = v
            .get("session")
            .and_then(|x| x.as_str())
            .map(str::to_string)
        {
            return Some(
                Path::new(&s)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or(s),
            );
        }
    }
    let t = out.trim();
    if !t.is_empty() && !t.contains(char::is_whitespace) && t.contains('/') {
        // `--detach` prints the session folder
        return Path::new(t.trim_end_matches('/'))
            .file_name()
            .map(|f| f.to_string_lossy().into_owned());
    }
    out.split_whitespace().find_map(|w| {
        let w = w.trim_matches(|c: char| c == '"' || c == '\'' || c == ',' || c == '.');
        let i = w.find("sessions/")?;
        let rest = &w[i + "sessions/".len()..];
        let id = rest.split('/').next()?;
        (!id.is_empty()).then(|| id.to_string())
    })
}
