//! Session folders: everything one training job writes, and the types and
//! functions that read it back (for `rosetta jobs`, `plot`, `eval` and the TUI),
//! and the [`Workbench`] that keeps sessions loaded for search and comparison.
//!
//! A session folder holds
//! - `config.toml` ([`SessionConfig`]): workspace and its content hash, model,
//!   every hyper-parameter after defaults, seed, device, Rosetta version;
//! - `metrics.jsonl` ([`MetricRecord`] per line, append-only; read with
//!   [`MetricsTail`]);
//! - `status.json` ([`Status`], replaced atomically, only through a
//!   [`JobLife`], which owns the job's state transitions);
//! - `checkpoints/{best,last}.safetensors` ([`checkpoint`]) and
//!   `vocab.source.json` / `vocab.target.json` (and, for learnt subword
//!   units, `units.source.json` / `units.target.json`);
//! - `log.txt`, human-readable.
//!
//! A running job holds a `flock` on the session folder itself (see
//! [`job_process`]). No file of a session is read or written through a
//! symbolic link ([`check_no_links`]), and its small files are read only
//! when they are regular files of a bounded size.
//!
//! Every file that is replaced is written with [`crate::util::write_atomic`],
//! so a reader (or a job killed at any moment) sees the old file or the new
//! one, never a partial one.

pub mod associations;
pub mod checkpoint;
pub mod collection;
pub mod evaluate;
pub mod files;
pub mod init;
pub mod life;
pub mod loaded;
pub mod metrics;
pub mod pretrained;
pub mod rerank;
pub mod retrieval;
pub mod runs;
pub mod search;
mod table_cache;
pub mod workbench;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::text::Vocabs;
use crate::text::Vocabulary;
use crate::util::{read_regular, read_regular_text, write_atomic, Links, SMALL_FILE_LIMIT};
use crate::{Error, Result};

pub use crate::util::{pid_alive, process_start_time};
pub use associations::{
    associations, AssocKind, AssocOptions, AssocSort, Association, Associations,
};
pub use checkpoint::{Checkpoint, CheckpointMeta};
pub use files::{
    BEST_CHECKPOINT, CHECKPOINT_DIR, CHECKPOINT_FILES, CONFIG_FILE, LAST_CHECKPOINT, LOG_FILE,
    METRICS_FILE, SESSION_FILES, STATUS_FILE, VOCAB_SOURCE, VOCAB_TARGET,
};
pub use life::{Figures, JobLife};
pub use loaded::{Loaded, Neighbour, Neighbours};
pub use metrics::{
    effective_history, Curves, MetricRecord, MetricsTail, StepPoint, TailBatch, ValidPoint, XAxis,
};
pub use workbench::Workbench;

/// Whether `dir` holds a symbolic link where a session keeps its files:
/// any entry of the folder or of its `checkpoints/` (itself included). A
/// session's files are never read or written through a link (a planted
/// `checkpoints -> elsewhere` would put the checkpoints outside the
/// session); the error names the link.
pub fn check_no_links(dir: &Path) -> Result<()> {
    let refuse = |p: &Path| {
        Err(Error::file(
            p,
            "is a symbolic link: session files are never written or read through links",
        ))
    };
    for folder in [dir.to_path_buf(), dir.join(CHECKPOINT_DIR)] {
        let rd = match std::fs::read_dir(&folder) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && folder != dir => continue,
            Err(e) => return Err(Error::io(&folder, e)),
        };
        for e in rd {
            let e = e.map_err(|e| Error::io(&folder, e))?;
            if e.file_type()
                .map_err(|x| Error::io(e.path(), x))?
                .is_symlink()
            {
                return refuse(&e.path());
            }
        }
    }
    Ok(())
}

/// `config.toml`: what the job was asked to do, with every default filled in.
/// Rerunning `rosetta train` with these values reproduces the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionConfig {
    /// Rosetta version that wrote the session.
    pub rosetta_version: String,
    /// Model registry name.
    pub model: String,
    /// Path of the workspace file (`workspace.toml`) as given.
    pub workspace: PathBuf,
    /// Content hash of the workspace (its file and the data it names) when the
    /// session was made; a resume or evaluation on changed data is refused.
    pub workspace_hash: String,
    /// Random seed.
    pub seed: u64,
    /// Device asked for (`auto`, `cpu`, `cuda:0`; written as that string).
    pub device_request: crate::models::DeviceSpec,
    /// Device actually used (`cpu`, `cuda:0`), once the job has started.
    #[serde(default)]
    pub device: String,
    /// Every hyper-parameter as given by `--set` and the common flags.
    pub given: BTreeMap<String, String>,
    /// Every hyper-parameter the model and runner read, defaults included
    /// (filled in once training has started).
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Creation time, UTC (`2026-11-21T20:03:00Z`).
    pub created: String,
    /// Text settings of the workspace (analyser and vocabulary), so new text
    /// is analysed as the training data was without the workspace.
    #[serde(default)]
    pub text: Option<crate::text::TextConfig>,
}

impl SessionConfig {
    /// Reads `config.toml` of a session folder.
    /// A regular file only, never through a link, at most
    /// [`crate::util::SMALL_FILE_LIMIT`] bytes.
    pub fn read(dir: &Path) -> Result<SessionConfig> {
        let path = dir.join(CONFIG_FILE);
        let text = read_regular_text(&path, Links::Refuse, SMALL_FILE_LIMIT)?;
        toml::from_str(&text).map_err(|e| toml_error(&path, &text, e))
    }

    /// Writes `config.toml` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(CONFIG_FILE);
        let text = toml::to_string_pretty(self)
            .map_err(|e| Error::file(&path, format!("cannot serialise config: {e}")))?;
        write_atomic(&path, text.as_bytes())
    }

    /// Writes the `config.toml` of a new session: only when the folder has
    /// none yet ([`crate::util::write_new`]), so that of several jobs
    /// started into one empty folder at once exactly one makes the session
    /// and the others are refused.
    fn write_first(&self, dir: &Path) -> Result<()> {
        let path = dir.join(CONFIG_FILE);
        let text = toml::to_string_pretty(self)
            .map_err(|e| Error::file(&path, format!("cannot serialise config: {e}")))?;
        crate::util::write_new(&path, text.as_bytes()).map_err(|e| {
            Error::file(
                dir,
                format!(
                    "another job made a session in this folder at the same time ({e}); \
                     nothing written: give another folder"
                ),
            )
        })
    }

    /// Checks the config before a session folder is made, and resolves its
    /// settings: for a registered model every `--set` key and value is
    /// checked by the model registry and `params` gets every setting the
    /// job reads (given values and defaults), so `config.toml` is complete
    /// from its first write and a resume at any moment runs with the same
    /// values. A seed that `config.toml` cannot hold is refused here, not
    /// when the job writes its config.
    pub fn resolve(&mut self) -> Result<()> {
        if self.seed > i64::MAX as u64 {
            return Err(Error::invalid(format!(
                "--seed {}: must be below 2^63 ({})",
                self.seed,
                i64::MAX
            )));
        }
        if crate::models::registry::spec(&self.model).is_ok() {
            let mut resolved = crate::models::registry::resolve_settings(&self.model, &self.given)?;
            // values already recorded (a config made elsewhere) are kept
            for (k, v) in &self.params {
                resolved.entry(k.clone()).or_insert_with(|| v.clone());
            }
            self.params = resolved;
        }
        toml::to_string_pretty(self)
            .map_err(|e| Error::invalid(format!("cannot record the session's config: {e}")))?;
        Ok(())
    }

    /// The settings a job runs (or resumes) with: the given values, then
    /// the values resolved when the session was made, then registry
    /// defaults. A partial `[params]` table (a job killed early by an older
    /// version) never overrides what the user gave.
    pub fn run_settings(&self) -> crate::models::Params {
        crate::models::Params::with_recorded(self.given.clone(), self.params.clone())
    }

    /// How the session's model reranks its rankings by late interaction
    /// (the encoder's `rerank` and `rerank_depth`, as recorded): `None`
    /// for no reranking and for a model without those settings. Every
    /// figure of the session (eval, search, compare, the workbench, the
    /// job's validation) is of its rankings so reranked. A session reads
    /// it through [`Session::rerank`], whose error names its `config.toml`.
    pub fn rerank(&self) -> Result<Option<crate::models::kit::late::LateRerank>> {
        match crate::models::registry::spec(&self.model) {
            Ok(def) if def.setting("rerank").is_some() => {
                def.config(&self.run_settings())?.rerank()
            }
            _ => Ok(None),
        }
    }

    /// The parameters to rerun or resume with: the resolved values when the
    /// job started, otherwise the given ones.
    pub fn run_params(&self) -> BTreeMap<String, String> {
        if self.params.is_empty() {
            self.given.clone()
        } else {
            self.params.clone()
        }
    }

    /// Error when the workspace's current content hash differs from the one
    /// recorded: the data changed since the session was made.
    pub fn check_workspace_hash(&self, dir: &Path, current: &str) -> Result<()> {
        if self.workspace_hash == current {
            Ok(())
        } else {
            Err(Error::file(
                dir.join(CONFIG_FILE),
                format!(
                    "workspace {} changed since this session was made (hash {} recorded, {} now); \
                     its checkpoints do not match the data any more: train a new session",
                    self.workspace.display(),
                    short(&self.workspace_hash),
                    short(current)
                ),
            ))
        }
    }
}

/// Error when the vocabularies a session was trained with (`saved`) hold
/// other terms, or terms in another order, than the workspace's prepared
/// data (`prepared`): its term ids would then count other words, and every
/// figure would be silently wrong. The workspace hash cannot see this: it
/// covers the data and settings, not the analysis, which a newer Rosetta may
/// do differently (a lone vowel sign after a space was a term of its own
/// before issue 55).
pub fn check_same_terms(dir: &Path, saved: &Vocabs, prepared: &Vocabs) -> Result<()> {
    for (side, file, a, b) in [
        ("source", VOCAB_SOURCE, &saved.source, &prepared.source),
        ("target", VOCAB_TARGET, &saved.target, &prepared.target),
    ] {
        if a.terms == b.terms {
            continue;
        }
        let first = a
            .terms
            .iter()
            .zip(&b.terms)
            .position(|(x, y)| x != y)
            .unwrap_or(a.terms.len().min(b.terms.len()));
        let at = |v: &Vocabulary| {
            v.terms
                .get(first)
                .map_or("(none)".to_string(), |t| format!("{t:?}"))
        };
        return Err(Error::file(
            dir.join(file),
            format!(
                "the {side} ({}) vocabulary this session was trained with ({} terms) differs from \
                 the workspace's as this Rosetta analyses it ({} terms; first at term {first}: \
                 {} saved, {} now): the text analysis changed since the session was made, and \
                 its term ids no longer match the data; train a new session (or evaluate it with \
                 the Rosetta that made it)",
                a.lang,
                a.terms.len(),
                b.terms.len(),
                at(a),
                at(b)
            ),
        ));
    }
    Ok(())
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

fn toml_error(path: &Path, text: &str, e: toml::de::Error) -> Error {
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            Error::parse(path, line, e.message().to_string())
        }
        None => Error::file(path, e.to_string()),
    }
}

/// Life-cycle state of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Made, process not started yet.
    #[default]
    Queued,
    /// Training.
    Running,
    /// Finished (all epochs or early stop).
    Done,
    /// Stopped by an error (see `error`), or a `running` job whose process died.
    Failed,
    /// Stopped on request (SIGTERM / `rosetta cancel`).
    Cancelled,
}

impl State {
    /// Lower-case name as in `status.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
        }
    }

    /// Whether the job will not change any more.
    pub fn is_final(self) -> bool {
        matches!(self, State::Done | State::Failed | State::Cancelled)
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `status.json`: the job's state now, replaced atomically as it runs (by
/// a [`JobLife`], the only writer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Life-cycle state.
    pub state: State,
    /// Process id of the job (0 before it started).
    pub pid: u32,
    /// Start time of that process (Linux clock ticks since boot, from
    /// `/proc/<pid>/stat`), so that a reused pid is not taken for the job.
    #[serde(default)]
    pub pid_start: Option<u64>,
    /// Model registry name.
    pub model: String,
    /// Workspace path.
    pub workspace: PathBuf,
    /// Device in use (`cpu`, `cuda:0`), empty before start.
    pub device: String,
    /// Share of the planned training done, 0..1.
    pub progress: f64,
    /// Current training phase.
    #[serde(default)]
    pub phase: String,
    /// Current epoch (from 1; 0 before the first step).
    pub epoch: usize,
    /// Planned epochs (0 while unknown).
    pub epochs: usize,
    /// Optimiser steps so far.
    #[serde(default)]
    pub step: usize,
    /// Estimated seconds left.
    pub eta_s: Option<f64>,
    /// Training pairs per second recently.
    pub pairs_per_s: Option<f64>,
    /// Best validation MRR so far.
    pub best_mrr: Option<f64>,
    /// Epoch of the best validation MRR.
    pub best_epoch: Option<usize>,
    /// The validation under way, while it runs (a model that reads raw
    /// text: an encoder, whose validation can take minutes on a CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationProgress>,
    /// Last error message (state `failed`), or a note on a cancel.
    pub error: Option<String>,
    /// Last update, UTC.
    pub updated: String,
    /// Last update, seconds since the Unix epoch.
    #[serde(default)]
    pub updated_unix: f64,
}

/// How far a validation has come: texts encoded of the validation pairs'
/// texts (both sides), their rate and the time left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationProgress {
    /// Texts encoded.
    pub done: usize,
    /// Texts to encode.
    pub total: usize,
    /// Texts per second so far.
    pub texts_per_s: Option<f64>,
    /// Estimated seconds left of the validation.
    pub eta_s: Option<f64>,
}

impl ValidationProgress {
    /// `validating: 640/2400 (26.7%), 12.3 texts/s, ETA 2m23s`.
    pub fn describe(&self) -> String {
        crate::util::progress_line(
            "validating:",
            self.done,
            self.total,
            self.texts_per_s,
            self.eta_s,
        )
    }
}

impl Status {
    /// A fresh `queued` status for a session.
    pub fn queued(cfg: &SessionConfig) -> Status {
        let now = now_unix();
        Status {
            state: State::Queued,
            pid: 0,
            pid_start: None,
            model: cfg.model.clone(),
            workspace: cfg.workspace.clone(),
            device: cfg.device.clone(),
            progress: 0.0,
            phase: String::new(),
            epoch: 0,
            epochs: 0,
            step: 0,
            eta_s: None,
            pairs_per_s: None,
            best_mrr: None,
            best_epoch: None,
            validation: None,
            error: None,
            updated: fmt_utc(now),
            updated_unix: now,
        }
    }

    /// Why these figures cannot be what a job wrote, if they cannot: a
    /// progress outside 0..1, a best MRR outside 0..1, a negative or
    /// non-finite ETA or speed. [`read_status`] refuses such a file.
    pub fn impossible(&self) -> Option<String> {
        let bad = |x: f64| x.is_nan() || x < 0.0;
        if !(0.0..=1.0).contains(&self.progress) {
            return Some(format!("progress {} is not in 0..1", self.progress));
        }
        if let Some(m) = self.best_mrr.filter(|m| !(0.0..=1.0).contains(m)) {
            return Some(format!("best_mrr {m} is not in 0..1"));
        }
        if let Some(e) = self.eta_s.filter(|e| bad(*e) || e.is_infinite()) {
            return Some(format!("eta_s {e} is not a duration"));
        }
        if let Some(p) = self.pairs_per_s.filter(|p| bad(*p) || p.is_infinite()) {
            return Some(format!("pairs_per_s {p} is not a speed"));
        }
        if let Some(v) = &self.validation {
            if v.done > v.total {
                return Some(format!(
                    "validation done {} exceeds its total {}",
                    v.done, v.total
                ));
            }
            let odd = |x: &Option<f64>| x.is_some_and(|x| bad(x) || x.is_infinite());
            if odd(&v.texts_per_s) || odd(&v.eta_s) {
                return Some("validation texts_per_s or eta_s is not a figure".into());
            }
        }
        None
    }

    /// The epoch as people read it: `3/10`, `3` while the plan is
    /// unknown, and `zero-shot` for a session that trains nothing (never
    /// `1/1`).
    pub fn epoch_label(&self) -> String {
        if self.phase == crate::models::ZERO_SHOT_PHASE {
            self.phase.clone()
        } else if self.epochs > 0 {
            format!("{}/{}", self.epoch, self.epochs)
        } else {
            self.epoch.to_string()
        }
    }

    /// Whether the job's process is alive: a `running` or `queued` status
    /// whose process is gone is stale (see [`Status::effective_state`]).
    pub fn process_alive(&self) -> bool {
        self.pid != 0 && pid_alive(self.pid, self.pid_start)
    }

    /// The state to show: a `running` job whose process is gone is `failed`
    /// (stale), never `running`.
    pub fn effective_state(&self) -> State {
        if self.is_stale() {
            State::Failed
        } else {
            self.state
        }
    }

    /// Whether the recorded state is `running` (or `queued` by a process
    /// that took the job) but the process is gone.
    pub fn is_stale(&self) -> bool {
        match self.state {
            State::Running => !self.process_alive(),
            State::Queued => self.pid != 0 && !self.process_alive(),
            _ => false,
        }
    }
}

/// Reads `status.json` of a session folder: a regular file only, never
/// through a link, at most [`crate::util::SMALL_FILE_LIMIT`] bytes (a FIFO
/// or `/dev/zero` is an error, never a read without end).
pub fn read_status(dir: &Path) -> Result<Status> {
    let path = dir.join(STATUS_FILE);
    let bytes = read_regular(&path, Links::Refuse, SMALL_FILE_LIMIT)?;
    let st: Status = serde_json::from_slice(&bytes).map_err(|e| json_error(&path, e))?;
    if let Some(why) = st.impossible() {
        return Err(Error::file(
            &path,
            format!("impossible figure ({why}): not what a job wrote"),
        ));
    }
    Ok(st)
}

pub(crate) fn json_error(path: &Path, e: serde_json::Error) -> Error {
    if e.line() > 0 {
        Error::parse(path, e.line(), e.to_string())
    } else {
        Error::file(path, e.to_string())
    }
}

/// An open session folder.
#[derive(Debug, Clone)]
pub struct Session {
    /// The folder.
    pub dir: PathBuf,
    /// Its `config.toml`.
    pub config: SessionConfig,
    /// Its `status.json` (a session made but never started may lack one:
    /// then a `queued` status).
    pub status: Status,
}

impl Session {
    /// [`SessionConfig::rerank`]; a recorded value that does not parse is
    /// an error naming the session's `config.toml` and the settings.
    pub fn rerank(&self) -> Result<Option<crate::models::kit::late::LateRerank>> {
        self.config.rerank().map_err(|e| {
            let path = self.dir.join(CONFIG_FILE);
            // the line of the first recorded rerank setting, for the reader
            let line = crate::util::read_regular(&path, crate::util::Links::Refuse, 1 << 20)
                .ok()
                .and_then(|b| {
                    String::from_utf8_lossy(&b)
                        .lines()
                        .position(|l| l.trim_start().starts_with("rerank"))
                })
                .map(|i| format!("line {}: ", i + 1))
                .unwrap_or_default();
            Error::file(
                &path,
                format!(
                    "{line}[params] rerank / rerank_depth: {e} (set rerank = \"none\" or \
                     \"maxsim:W\" with W from 0 to 1, rerank_depth a whole number ≥ 1, or remake \
                     the session)"
                ),
            )
        })
    }

    /// Opens an existing session folder (config and status); a folder
    /// holding a symbolic link ([`check_no_links`]) is refused.
    pub fn open(dir: &Path) -> Result<Session> {
        if !dir.is_dir() {
            return Err(Error::file(dir, "no such session folder"));
        }
        check_no_links(dir)?;
        let config = SessionConfig::read(dir)?;
        let status = if std::fs::symlink_metadata(dir.join(STATUS_FILE)).is_ok() {
            read_status(dir)?
        } else {
            Status::queued(&config)
        };
        Ok(Session {
            dir: dir.to_path_buf(),
            config,
            status,
        })
    }

    /// Re-reads `status.json`.
    pub fn refresh(&mut self) -> Result<&Status> {
        self.status = read_status(&self.dir)?;
        Ok(&self.status)
    }

    /// Path of a file inside the session.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Reads every metrics record; corrupt or truncated lines are returned
    /// as errors (with path and line) next to the records that did load.
    pub fn metrics(&self) -> Result<TailBatch> {
        let mut t = MetricsTail::new(self.dir.join(METRICS_FILE));
        let mut b = t.poll()?;
        let rest = t.finish();
        b.errors.extend(rest.errors);
        Ok(b)
    }

    /// The vocabularies saved with the session.
    pub fn vocabs(&self) -> Result<Vocabs> {
        Ok(Vocabs {
            source: Vocabulary::load(&self.dir.join(VOCAB_SOURCE))?,
            target: Vocabulary::load(&self.dir.join(VOCAB_TARGET))?,
        })
    }

    /// Reads a checkpoint (`best` or `last`) of the session.
    pub fn checkpoint(&self, which: &str, device: &candle_core::Device) -> Result<Checkpoint> {
        let rel = match which {
            "best" => BEST_CHECKPOINT,
            "last" => LAST_CHECKPOINT,
            other => {
                return Err(Error::invalid(format!(
                    "unknown checkpoint `{other}` (best or last)"
                )))
            }
        };
        Checkpoint::read(&self.dir.join(rel), device)
    }

    /// Whether the session is a lexical baseline (`bm25`, `bm25-dict`,
    /// `bm25-mt`): no checkpoints, its index rebuilt from the workspace.
    pub fn is_lexical(&self) -> bool {
        crate::models::is_lexical(&self.config.model)
    }

    /// Loads the trained model: the best checkpoint (or the last one when
    /// no best exists), rebuilt by the model's trainer from the registry.
    /// The config's workspace is not read (the session has its vocabularies).
    pub fn load_model(
        &self,
        device: &candle_core::Device,
    ) -> Result<(Box<dyn crate::models::Model>, Vocabs)> {
        self.load_model_from(device).map(|(m, v, _)| (m, v))
    }

    /// Error unless checkpoint `ck` (read from `path`) is one this
    /// session's job wrote: its model is the session's, and every setting
    /// it records has the value `config.toml` records (a checkpoint copied
    /// in from a session of another `dim` would otherwise be loaded, and
    /// evaluated, as this one's), except the settings that say how a model
    /// computes rather than what it holds ([`Setting::compute_only`](crate::models::Setting::compute_only)). The
    /// error names the checkpoint and the settings that differ.
    fn check_checkpoint_is_ours(&self, ck: &Checkpoint, path: &Path) -> Result<()> {
        if !ck.meta.kind.is_empty() && ck.meta.kind != self.config.model {
            return Err(Error::file(
                path,
                format!(
                    "holds a {} model, but the session trains {} ({CONFIG_FILE}): not this \
                     session's checkpoint (remove it, or resume the session to write its own)",
                    ck.meta.kind, self.config.model
                ),
            ));
        }
        let recorded = self.config.run_params();
        let def = crate::models::registry::spec(&self.config.model).ok();
        let compute_only = |k: &str| {
            def.and_then(|d| d.setting(k))
                .is_some_and(|s| s.compute_only)
        };
        let differ: Vec<String> = ck
            .meta
            .params
            .iter()
            .filter(|(k, _)| !compute_only(k))
            .filter_map(|(k, v)| {
                recorded
                    .get(k)
                    .filter(|r| *r != v)
                    .map(|r| format!("{k}={v} (config: {k}={r})"))
            })
            .collect();
        if !differ.is_empty() {
            return Err(Error::file(
                path,
                format!(
                    "was trained with {}, not this session's settings ({CONFIG_FILE}): not this \
                     session's checkpoint (remove it, or resume the session to write its own)",
                    differ.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// [`Session::load_model`], saying which checkpoint the model came
    /// from and, when it is not the best one the status names, why.
    pub fn load_model_from(
        &self,
        device: &candle_core::Device,
    ) -> Result<(Box<dyn crate::models::Model>, Vocabs, ModelSource)> {
        if self.is_lexical() {
            return Err(Error::file(
                &self.dir,
                format!(
                    "the session is the lexical baseline `{}`: it has no embedding space \
                     (term neighbours, lexicon induction and embedding export need a trained model)",
                    self.config.model
                ),
            ));
        }
        let best = self.dir.join(BEST_CHECKPOINT);
        let last = self.dir.join(LAST_CHECKPOINT);
        let (ck, which) = if best.exists() {
            (Checkpoint::read(&best, device)?, "best")
        } else if last.exists() {
            (Checkpoint::read(&last, device)?, "last")
        } else {
            return Err(Error::file(
                &self.dir,
                format!(
                    "the session has no trained model yet (state {}: no checkpoint was written; \
                     {})",
                    self.status.effective_state(),
                    match self.status.effective_state() {
                        State::Queued | State::Running =>
                            "wait for its first epoch to end, or follow it with `rosetta jobs`",
                        _ => "continue it with `rosetta train --resume` or train a new session",
                    }
                ),
            ));
        };
        self.check_checkpoint_is_ours(&ck, if which == "best" { &best } else { &last })?;
        let vocabs = self.vocabs()?;
        let trainer = crate::models::registry::trainer(&self.config.model)?;
        let params = crate::models::Params::new(ck.meta.params.clone());
        let model = trainer.load_in(&self.dir, &vocabs, ck.model_tensors(), &params, device)?;
        let mut warning = None;
        if which == "last" {
            warning = Some(format!(
                "{} is missing: using {} ({} epoch {}{}){}",
                best.display(),
                last.display(),
                ck.meta.phase,
                ck.meta.epoch,
                ck.meta
                    .valid_mrr
                    .map(|m| format!(", valid MRR {m:.4}"))
                    .unwrap_or_default(),
                match self.status.best_epoch {
                    Some(b) if b != ck.meta.epoch =>
                        format!(", not the best epoch {b} that {STATUS_FILE} names"),
                    _ => String::new(),
                }
            ));
        } else if let Some(b) = self.status.best_epoch.filter(|b| *b != ck.meta.epoch) {
            warning = Some(format!(
                "{STATUS_FILE} names best epoch {b}, but {} holds epoch {}: using what the \
                 checkpoint holds",
                best.display(),
                ck.meta.epoch
            ));
        }
        let source = ModelSource {
            checkpoint: which.to_string(),
            phase: ck.meta.phase.clone(),
            epoch: ck.meta.epoch,
            valid_mrr: ck.meta.valid_mrr,
            warning,
        };
        Ok((model, vocabs, source))
    }
}

/// Which checkpoint a loaded model came from ([`Session::load_model_from`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSource {
    /// `best`, or `last` when the session has no best checkpoint.
    pub checkpoint: String,
    /// Its training phase.
    pub phase: String,
    /// Its epoch.
    pub epoch: usize,
    /// Its validation MRR, if it was validated.
    pub valid_mrr: Option<f64>,
    /// Set when the model is not the best checkpoint the status names (the
    /// best file is missing, or holds another epoch): what was used instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// One row of [`list_sessions`].
#[derive(Debug, Clone)]
pub struct SessionEntry {
    /// The session folder.
    pub dir: PathBuf,
    /// Its config, when readable.
    pub config: Option<SessionConfig>,
    /// Its status, when readable.
    pub status: Option<Status>,
    /// What could not be read (with path and line), if anything.
    pub problem: Option<String>,
}

impl SessionEntry {
    /// The state to show (stale `running` jobs show as failed; unreadable
    /// sessions as failed).
    pub fn state(&self) -> State {
        match &self.status {
            Some(s) => s.effective_state(),
            None => State::Failed,
        }
    }
}

/// Every session folder directly under `root` (folders with a `config.toml`
/// or `status.json`), sorted by name. Unreadable files (a FIFO, a device,
/// a link, a file too large for its kind) do not hide a session or stop
/// the listing: the entry says what is wrong.
pub fn list_sessions(root: &Path) -> Result<Vec<SessionEntry>> {
    if !root.exists() {
        return Ok(Vec::new());
    }
    let rd = std::fs::read_dir(root).map_err(|e| Error::io(root, e))?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    for e in rd {
        let e = e.map_err(|e| Error::io(root, e))?;
        let p = e.path();
        let has = |name: &str| std::fs::symlink_metadata(p.join(name)).is_ok();
        if p.is_dir() && (has(CONFIG_FILE) || has(STATUS_FILE)) {
            dirs.push(p);
        }
    }
    dirs.sort();
    Ok(dirs
        .into_iter()
        .map(|dir| {
            let mut problems = Vec::new();
            if let Err(e) = check_no_links(&dir) {
                problems.push(e.to_string());
            }
            let config = SessionConfig::read(&dir)
                .map_err(|e| problems.push(e.to_string()))
                .ok();
            let status = read_status(&dir)
                .map_err(|e| problems.push(e.to_string()))
                .ok();
            if let Some(s) = &status {
                if s.is_stale() {
                    problems.push(format!(
                        "stale: status says {} but process {} is gone",
                        s.state, s.pid
                    ));
                }
            }
            SessionEntry {
                dir,
                config,
                status,
                problem: if problems.is_empty() {
                    None
                } else {
                    Some(problems.join("; "))
                },
            }
        })
        .collect())
}

/// The process running the job of session `dir`, proven before anyone
/// signals it: `status.json` must name a pid with its start time, that
/// process must be alive with the same start time (not a reused pid), and
/// it must hold the lock on the session folder itself (read from
/// `/proc/locks`; without `/proc`, the lock must at least be held by
/// someone). The lock is on the folder, which cannot be hard-linked, so a
/// second folder copying another's status (or a hard link to a lock file)
/// never passes for that folder's job. A crafted or
/// copied session folder naming an unrelated process is refused with the
/// reason, so `rosetta cancel` and the workbench never signal it.
pub fn job_process(dir: &Path) -> Result<u32> {
    let st = read_status(dir)?;
    let path = dir.join(STATUS_FILE);
    let refuse = |why: String| Err(Error::file(&path, format!("{why}; no process signalled")));
    if st.pid == 0 {
        return refuse("no job process recorded (the job has not started)".into());
    }
    let Some(start) = st.pid_start else {
        return refuse(format!(
            "pid {} is recorded without its start time: it cannot be proven to be the job",
            st.pid
        ));
    };
    if !pid_alive(st.pid, Some(start)) {
        return refuse(format!("process {} is not running (stale status)", st.pid));
    }
    match lock_holders(dir) {
        Some(holders) if holders.contains(&st.pid) => Ok(st.pid),
        Some(_) => refuse(format!(
            "process {} does not hold the lock on the session folder {}: it is not this session's job",
            st.pid,
            dir.display()
        )),
        None => {
            if lock_is_held(dir) {
                Ok(st.pid)
            } else {
                refuse(format!(
                    "no process holds the lock on the session folder {}: process {} is not its job",
                    dir.display(),
                    st.pid
                ))
            }
        }
    }
}

/// Opens session folder `dir` itself, for its lock (`flock` on the folder:
/// a job holds it while it runs).
pub(crate) fn open_folder(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
}

/// The pids holding a `flock` on session folder `dir` per `/proc/locks`,
/// or `None` when that cannot be read (no `/proc`); empty when the folder
/// is missing.
fn lock_holders(dir: &Path) -> Option<Vec<u32>> {
    use std::os::unix::fs::MetadataExt;
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    let Ok(md) = std::fs::metadata(dir) else {
        return Some(Vec::new());
    };
    if !md.is_dir() {
        return Some(Vec::new());
    }
    let (ino, dev) = (md.ino(), md.dev());
    // glibc's gnu_dev_major / gnu_dev_minor
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let mut out = Vec::new();
    for line in table.lines() {
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; "->" marks a waiter
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[1] == "->" || f[1] != "FLOCK" {
            continue;
        }
        let id: Vec<&str> = f[5].split(':').collect();
        let &[ma, mi, i] = id.as_slice() else {
            continue;
        };
        let same = u64::from_str_radix(ma, 16).ok() == Some(major)
            && u64::from_str_radix(mi, 16).ok() == Some(minor)
            && i.parse::<u64>().ok() == Some(ino);
        if same {
            if let Ok(pid) = f[4].parse() {
                out.push(pid);
            }
        }
    }
    Some(out)
}

/// Whether some process holds the flock on session folder `dir` (tried
/// without waiting, released at once).
fn lock_is_held(dir: &Path) -> bool {
    use std::os::unix::io::AsRawFd;
    let Ok(f) = open_folder(dir) else {
        return false;
    };
    // SAFETY: flock on a valid open descriptor.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    r != 0
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        m,
        d,
        (rem / 3600) as u32,
        ((rem % 3600) / 60) as u32,
        (rem % 60) as u32,
    )
}

/// `2026-11-21T20:03:00Z` for a Unix time.
pub fn fmt_utc(unix: f64) -> String {
    let (y, mo, d, h, mi, s) = civil(unix.floor() as i64);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `20261121-200300` for a Unix time (session folder names).
pub fn fmt_stamp(unix: f64) -> String {
    let (y, mo, d, h, mi, s) = civil(unix.floor() as i64);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_format() {
        assert_eq!(fmt_utc(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(fmt_utc(1_700_000_000.5), "2023-11-14T22:13:20Z");
        assert_eq!(fmt_stamp(951_782_400.0), "20000229-000000");
    }

    #[test]
    fn own_process_is_alive_and_pid_reuse_is_detected() {
        let me = std::process::id();
        let start = process_start_time(me);
        assert!(pid_alive(me, start));
        if let Some(s) = start {
            assert!(!pid_alive(me, Some(s + 1)));
        }
        assert!(!pid_alive(0, None));
    }

    /// Issue 39: a status with figures no job writes (progress −350%, a
    /// best MRR of 7.5) is refused, naming the file.
    #[test]
    fn impossible_status_figures_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let good = r#"{"state":"done","pid":0,"model":"s2net","workspace":"w","device":"cpu",
            "progress":1.0,"epoch":2,"epochs":2,"eta_s":0.0,"pairs_per_s":10.0,
            "best_mrr":0.5,"best_epoch":2,"error":null,"updated":"x"}"#;
        std::fs::write(dir.path().join(STATUS_FILE), good).unwrap();
        assert_eq!(read_status(dir.path()).unwrap().best_mrr, Some(0.5));
        for (from, to, what) in [
            ("\"progress\":1.0", "\"progress\":-3.5", "progress -3.5"),
            ("\"best_mrr\":0.5", "\"best_mrr\":7.5", "best_mrr 7.5"),
            ("\"eta_s\":0.0", "\"eta_s\":-1.0", "eta_s -1"),
        ] {
            std::fs::write(dir.path().join(STATUS_FILE), good.replace(from, to)).unwrap();
            let e = read_status(dir.path()).unwrap_err().to_string();
            assert!(e.contains("status.json") && e.contains(what), "{e}");
        }
    }
}
