//! The workbench's narrow view of the engine: everything the screens need,
//! behind one [`Backend`] trait, so that the UI can be driven by a test double
//! and so that the UI thread never calls the engine directly.
//!
//! Every method may block (disk, compute); the event loop calls them on
//! worker threads and feeds the answers back through a channel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use rosetta::jobs::slurm::SlurmOptions;
pub use rosetta::jobs::sweep::{SweepMember, SweepSummary};
use rosetta::jobs::JobRequest;
pub use rosetta::jobs::LauncherMemory;
use rosetta::text::Side;
use rosetta::Result;

/// A session's lifecycle state (the session module's, as in its `status.json`).
pub use rosetta::session::State;

/// One session folder as the jobs table shows it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionSummary {
    /// Folder name under the sessions root.
    pub id: String,
    /// The session folder.
    pub dir: PathBuf,
    /// Lifecycle state.
    pub state: State,
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
    /// Display name (the session's `meta.json` name, else the folder name).
    pub name: String,
    /// Tags (`meta.json`).
    pub tags: Vec<String>,
    /// Note (`meta.json`).
    pub note: String,
    /// Every setting of its config: model, workspace, seed, device and each
    /// hyper-parameter (the engine's `runs::settings_map`).
    pub settings: BTreeMap<String, String>,
    /// Best value of each recorded figure (`MRR`, `P@1`, `loss`...).
    pub best: BTreeMap<String, f64>,
    /// Why its training looks diverged, if it does.
    pub divergence: Option<String>,
    /// For a Slurm job: its state with Slurm's view (`pending (Priority)`,
    /// `running`, `timeout`...), shown instead of `state`'s word.
    pub slurm: Option<String>,
    /// For a Slurm job: its job id and Slurm's own state (`123 RUNNING on
    /// node1`, `124 PENDING (Priority)`).
    pub slurm_job: Option<String>,
    /// For a session of a sweep: the sweep, its point and seed
    /// (`sweep.json`); the Jobs table groups a sweep's sessions.
    pub sweep: Option<SweepMember>,
    /// The session's index build (`rosetta index build`), if it has had one.
    pub index: Option<IndexBuild>,
}

/// A session's index build as the Jobs screen shows it: the engine's
/// `index/status.json` and the state to show (`stale` for a running build
/// whose process is gone).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IndexBuild {
    /// `running`, `done`, `cancelled`, `failed` or `stale`.
    pub state: String,
    /// The build's status file.
    pub status: IndexStatus,
}

impl IndexBuild {
    /// Whether the build's process still runs.
    pub fn running(&self) -> bool {
        self.state == "running"
    }
}

impl SessionSummary {
    /// The name shown: the display name, else the folder name.
    pub fn label(&self) -> &str {
        if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

impl rosetta::session::runs::Filterable for SessionSummary {
    fn haystack(&self) -> String {
        format!(
            "{} {} {} {} {} {} {}",
            self.label(),
            self.id,
            self.model,
            self.workspace,
            self.state.as_str(),
            self.tags.join(" "),
            self.note
        )
    }
    fn setting(&self, key: &str) -> Option<String> {
        self.settings.get(key).cloned().or_else(|| {
            self.settings
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        })
    }
    fn tags(&self) -> Vec<String> {
        self.tags.clone()
    }
    fn state(&self) -> String {
        self.state.as_str().to_string()
    }
    fn figure(&self, name: &str) -> Option<f64> {
        self.best
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
            .or_else(|| {
                name.eq_ignore_ascii_case("mrr")
                    .then_some(self.best_mrr)
                    .flatten()
            })
    }
}

/// A session's details for the detail pane (the engine's).
pub use rosetta::session::runs::RunDetail;

/// Which `meta.json` field an edit sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaField {
    /// Display name.
    Name,
    /// Tags (words separated by spaces or commas).
    Tags,
    /// Note.
    Note,
}

impl MetaField {
    /// Lower-case name for prompts.
    pub fn as_str(self) -> &'static str {
        match self {
            MetaField::Name => "name",
            MetaField::Tags => "tags",
            MetaField::Note => "note",
        }
    }
}

/// One record of a session's `metrics.jsonl` (the session module's type).
pub use rosetta::session::MetricRecord;

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
    /// Device (`auto`, `cpu`, `cuda`, `cuda:N`), parsed by the form.
    pub device: rosetta::models::DeviceSpec,
    /// Session folder to initialise from (`--set init=DIR`), if any.
    pub init: Option<String>,
    /// Any other `--set KEY=VALUE` settings (batch, patience, log_every, ...).
    pub extra: Vec<(String, String)>,
    /// Where it runs: this machine or Slurm with its options (remembered
    /// under the sessions root once a launch succeeds).
    pub launcher: LauncherMemory,
    /// A sweep instead of one job: one session per point of the grid and
    /// seed (`rosetta sweep`).
    pub sweep: Option<SweepSpec>,
}

/// A sweep as the form asks for it (`rosetta sweep --grid ... --seeds ...
/// --parallel N`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SweepSpec {
    /// Each setting with its values, in the order given.
    pub grid: Vec<(String, Vec<String>)>,
    /// Seeds; each point is trained once per seed.
    pub seeds: Vec<u64>,
    /// At most this many sessions at once (locally: processes, default 1;
    /// on Slurm: the array's `%N`).
    pub parallel: Option<usize>,
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
            device: rosetta::models::DeviceSpec::Auto,
            init: None,
            extra: Vec::new(),
            launcher: LauncherMemory::default(),
            sweep: None,
        }
    }
}

impl JobSpec {
    /// The engine's request for this job, its session named under
    /// `session_root` (the init session, given by name, is a folder there).
    pub fn request(&self, session_root: &Path) -> JobRequest {
        let mut settings = BTreeMap::new();
        let mut set = |k: &str, v: String| {
            settings.insert(k.to_string(), v);
        };
        if let Some(d) = self.dim {
            set("dim", d.to_string());
        }
        if let Some(e) = self.epochs {
            set("epochs", e.to_string());
        }
        if let Some(lr) = self.lr {
            set("lr", lr.to_string());
        }
        if let Some(n) = &self.negatives {
            set("negatives", n.clone());
        }
        if let Some(init) = &self.init {
            set("init", session_root.join(init).display().to_string());
        }
        for (k, v) in &self.extra {
            set(k, v.clone());
        }
        JobRequest {
            settings,
            device: self.device,
            session: None,
            root: session_root.to_path_buf(),
            ..JobRequest::new(&self.workspace, &self.model)
        }
    }
}

/// A job started (or resumed) in the background.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Launched {
    /// The session (folder name under the sessions root); a sweep's first.
    pub session: String,
    /// Process id of the job (0 for a Slurm job or a sweep).
    pub pid: u32,
    /// The Slurm job (or job array) it was submitted as.
    pub slurm_job: Option<String>,
    /// A sweep: its id and its sessions.
    pub sweep: Option<(String, Vec<String>)>,
}

/// How a query's ranking mixes the model with BM25 (the engine's).
pub use rosetta::index::fusion::Fusion;

/// A loaded search index, workspace figures (the engine's).
pub use rosetta::session::workbench::{IndexInfo, IndexOpening, WorkspaceStats};

/// An index build's status (the engine's `index/status.json`) and the
/// estimate of an encoding (the engine's).
pub use rosetta::jobs::index::IndexStatus;
pub use rosetta::session::collection::Estimate;

/// The compare table, its rows, marks and output formats (the engine's).
pub use rosetta::eval::compare::{Comparison, Mark, TableFormat};
/// A judged query's ranking (the Compare screen's rankings view).
pub use rosetta::session::search::JudgedRanking;

pub use rosetta::session::search::{Document, NeighbourResult, SearchResult};

/// Term associations of a model against its dictionary (the engine's).
pub use rosetta::session::associations::{AssocKind, AssocOptions, AssocSort, Associations};

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
    /// Starts a detached training job (or a sweep), locally or on Slurm as
    /// the spec's launcher says, and remembers that launcher.
    fn launch(&self, spec: &JobSpec) -> Result<Launched>;
    /// The launcher last used under the sessions root (the engine's
    /// [`LauncherMemory`]).
    fn launcher_memory(&self) -> Result<LauncherMemory>;
    /// Asks a running job to stop.
    fn cancel(&self, session: &str) -> Result<()>;
    /// Restarts a stopped job from its last checkpoint.
    fn resume(&self, session: &str) -> Result<Launched>;
    /// Loads (and keeps) `session`'s search index; slow, reports progress.
    /// A collection whose encoding is estimated to take longer than the
    /// backend allows is not encoded: the answer is
    /// [`IndexOpening::NeedsBuild`] with the estimate.
    fn load_index(&self, session: &str, progress: ProgressFn) -> Result<IndexOpening>;
    /// Starts `session`'s index build as a detached job (`rosetta index
    /// build --session DIR --detach`, the engine's launcher); returns its
    /// process id. Its progress shows in the session's [`IndexBuild`].
    fn build_index(&self, session: &str) -> Result<u32>;
    /// Ranks documents for `query` with a loaded index.
    fn search(&self, session: &str, query: &str, k: usize, fusion: Fusion) -> Result<SearchResult>;
    /// One whole document (by id or label) of a loaded index, the words
    /// related to `query` marked.
    fn document(&self, session: &str, docno: &str, query: Option<&str>) -> Result<Document>;
    /// The recorded search queries, oldest first.
    fn load_history(&self) -> Result<Vec<String>>;
    /// Records the search queries (oldest first), replacing the record.
    fn save_history(&self, queries: &[String]) -> Result<()>;
    /// Nearest terms of `term` (in `side`'s language) in both languages.
    fn neighbours(
        &self,
        session: &str,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult>;
    /// Term pairs `session`'s model links that its dictionary lacks, or
    /// dictionary pairs it fails to link (an error for a lexical baseline).
    fn associations(&self, session: &str, options: &AssocOptions) -> Result<Associations>;
    /// Writes the rows of `table` matching `filter`, in order, to `path` as
    /// TSV; returns how many.
    fn export_associations(&self, table: &Associations, filter: &str, path: &Path)
        -> Result<usize>;
    /// Sessions `(id, label)` × metrics with significance marks and
    /// wins/ties/losses against the session labelled `baseline` (sessions
    /// that cannot be scored are listed as skipped), each row named by its
    /// label (the session's name); `progress(fraction, what)` reports the
    /// whole table, 0 to 1.
    fn compare(
        &self,
        sessions: &[(String, String)],
        baseline: Option<&str>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Comparison>;
    /// Judged query `qid`'s ranking by session `session`'s model alone:
    /// its best `k` documents with their relevance (the engine's
    /// `Workbench::judged_ranking`).
    fn judged_ranking(&self, session: &str, qid: &str, k: usize) -> Result<JudgedRanking>;
    /// Writes the table to `path` in `format`.
    fn export_compare(&self, table: &Comparison, path: &Path, format: TableFormat) -> Result<()>;
    /// Figures about a workspace.
    fn workspace_stats(&self, workspace: &str) -> Result<WorkspaceStats>;
    /// Config, log tail, checkpoints and best figures of `session`.
    fn session_detail(&self, session: &str) -> Result<RunDetail>;
    /// The last `lines` lines of `session`'s log.
    fn log_tail(&self, session: &str, lines: usize) -> Result<Vec<String>>;
    /// Sets the name, tags or note of `session` (`meta.json`).
    fn set_meta(&self, session: &str, field: MetaField, value: &str) -> Result<()>;
    /// Deletes `session` (refused while its job runs).
    fn delete(&self, session: &str) -> Result<()>;
}

/// The form settings of a session's config: model, workspace, the device
/// asked for, and the settings that were given (`--dim`, `--set init=`, ...).
pub fn spec_from_config(cfg: &rosetta::session::SessionConfig) -> JobSpec {
    let g = |k: &str| cfg.given.get(k).cloned();
    JobSpec {
        workspace: cfg.workspace.display().to_string(),
        model: cfg.model.clone(),
        dim: g("dim").and_then(|x| x.parse().ok()),
        epochs: g("epochs").and_then(|x| x.parse().ok()),
        lr: g("lr").and_then(|x| x.parse().ok()),
        negatives: g("negatives"),
        device: cfg.device_request,
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
        launcher: LauncherMemory::default(),
        sweep: None,
    }
}
