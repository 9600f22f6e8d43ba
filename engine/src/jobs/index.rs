//! Index builds: encoding a session's collection as a job
//! (`rosetta index build`), in the foreground or detached like a training
//! job, with its own status (`index/status.json`: texts done of total,
//! texts/s, ETA), log (`index/log.txt`), cancel (SIGTERM) and resume (the
//! chunks written are kept: [`crate::session::collection::build`]).
//!
//! The collection is the session's workspace's ad-hoc documents, encoded
//! on the target side with the session's best checkpoint into the cache a
//! search reads (`doc-embeddings.target.npy`).
//!
//! On Slurm ([`submit_slurm`]) a build is a job array of `K` shards, task
//! `i` encoding the chunks of [`Part::Shard`] `i` (a GPU task where the
//! partition has GPUs) with its progress in `index/shard-NNN.json`, then a
//! merge job (`--dependency=afterany` on the array) that joins the chunks
//! into the cache ([`Part::Merge`]; a chunk missing is its error). The
//! record is `index/slurm.json`; [`view`] combines it with Slurm's states.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use super::slurm::{self, SlurmId, SlurmOptions, SlurmState};
use crate::corpus::Workspace;
use crate::index::approx::{ApproxIndex, HnswParams};
use crate::models::DeviceSpec;
pub use crate::session::collection::Part;
use crate::session::collection::{self, BuildOptions, BuildProgress, Built, INDEX_DIR};
use crate::session::files::shard_status_name;
use crate::session::{fmt_utc, now_unix, Loaded, Session};
use crate::text::Side;
use crate::{Error, Result};

/// An index build's status file, under the session folder.
pub const INDEX_STATUS: &str = "index/status.json";
/// An index build's log, under the session folder (a detached build's
/// output goes there).
pub const INDEX_LOG: &str = "index/log.txt";
/// A Slurm index build's record ([`IndexSlurmRecord`]), under the session folder.
pub const INDEX_SLURM: &str = "index/slurm.json";
/// A Slurm index build's batch script of the shards, under the session folder.
const INDEX_SLURM_SCRIPT: &str = "index/slurm.sh";
/// A Slurm index build's batch script of the merge, under the session folder.
const INDEX_MERGE_SCRIPT: &str = "index/slurm-merge.sh";
/// The most shards a build takes (Slurm's default `MaxArraySize` is 1001).
pub const MAX_SHARDS: usize = 1000;
/// Texts from which a build also makes the collection's HNSW graph (the
/// session's `hnsw.graph`, which a search then walks), by default: below
/// it an exact search over the embeddings takes milliseconds.
pub const HNSW_ABOVE: usize = 100_000;

/// Where the status of `part` of a build is kept, under the session
/// folder: `index/status.json`, or `index/shard-NNN.json` for a shard.
fn status_rel(part: Part) -> String {
    match part {
        Part::Shard { index, .. } => format!("{INDEX_DIR}/{}", shard_status_name(index)),
        Part::Whole | Part::Merge => INDEX_STATUS.to_string(),
    }
}

/// What `index/status.json` says of a session's index build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct IndexStatus {
    /// `running`, `done`, `cancelled` or `failed`.
    pub state: String,
    /// Process id of the build.
    pub pid: u32,
    /// Its start time (`/proc`), so that a reused pid is not taken for it.
    pub pid_start: Option<u64>,
    /// Device it encodes on (`cpu`, `cuda:0`).
    pub device: String,
    /// Texts encoded (kept chunks of an earlier run included).
    pub texts_done: usize,
    /// Texts of the collection.
    pub texts_total: usize,
    /// Texts taken from an earlier run's chunks.
    pub texts_reused: usize,
    /// Texts per second of this run.
    pub texts_per_s: Option<f64>,
    /// Estimated seconds left.
    pub eta_s: Option<f64>,
    /// Chunk files written, of `chunks`.
    pub chunks_done: usize,
    /// Chunk files of the collection.
    pub chunks: usize,
    /// Why it failed, or a note on a cancel.
    pub error: Option<String>,
    /// What it does once the texts are encoded (`building the HNSW graph
    /// (250000 documents)`), while it does it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Last update, UTC.
    pub updated: String,
    /// A Slurm build's jobs as Slurm sees them (`array 12 (2 shards: 1
    /// running, 1 pending), merge 13 pending`); `None` for a local build.
    /// Set by [`view`], never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<String>,
}

impl IndexStatus {
    /// The status of session `dir`'s index build; `None` when it never had one.
    pub fn read(dir: &Path) -> Result<Option<IndexStatus>> {
        Self::read_part(dir, Part::Whole)
    }

    /// The status of `part` of session `dir`'s build (a shard's own file).
    pub fn read_part(dir: &Path, part: Part) -> Result<Option<IndexStatus>> {
        use crate::util::{read_regular_if_exists, Links, SMALL_FILE_LIMIT};
        let path = dir.join(status_rel(part));
        match read_regular_if_exists(&path, Links::Refuse, SMALL_FILE_LIMIT)? {
            None => Ok(None),
            Some(b) => {
                let mut st: IndexStatus = serde_json::from_slice(&b)
                    .map_err(|e| Error::file(&path, format!("not an index status: {e}")))?;
                // only [`view`] says a build is on Slurm: a file that claims
                // it is not believed (its process would go unchecked)
                st.slurm = None;
                Ok(Some(st))
            }
        }
    }

    fn write(&mut self, dir: &Path, part: Part) -> Result<()> {
        self.updated = fmt_utc(now_unix());
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::invalid(format!("index status: {e}")))?;
        crate::util::write_atomic(&dir.join(status_rel(part)), &bytes)
    }

    /// Whether the build's process is alive.
    pub fn process_alive(&self) -> bool {
        crate::util::pid_alive(self.pid, self.pid_start)
    }

    /// The state to show: a `running` build whose process is gone is
    /// `stale` (killed: building again resumes it). A Slurm build's state
    /// is Slurm's and the record's together ([`view`]).
    pub fn shown_state(&self) -> &str {
        if self.slurm.is_none() && self.state == "running" && !self.process_alive() {
            "stale"
        } else {
            &self.state
        }
    }

    /// One line for people: `12000/31084 texts (38.6%), 16.2 texts/s, ETA 19m37s`.
    pub fn describe(&self) -> String {
        let pct = if self.texts_total == 0 {
            100.0
        } else {
            100.0 * self.texts_done as f64 / self.texts_total as f64
        };
        let mut s = format!("{}/{} texts ({pct:.1}%)", self.texts_done, self.texts_total);
        if let Some(r) = self.texts_per_s {
            s.push_str(&format!(", {r:.1} texts/s"));
        }
        if self.state == "running" {
            if let Some(e) = self.eta_s {
                s.push_str(&format!(", ETA {}", crate::util::fmt_duration(e)));
            }
        }
        if self.texts_reused > 0 {
            s.push_str(&format!(", {} from an earlier run", self.texts_reused));
        }
        if let Some(g) = self.stage.as_ref().filter(|_| self.state == "running") {
            s.push_str(&format!("; {g}"));
        }
        if let Some(j) = &self.slurm {
            s.push_str(&format!("; Slurm {j}"));
        }
        s
    }
}

/// What a session's collection is: its workspace's ad-hoc documents.
fn collection_texts(session: &Session) -> Result<Vec<String>> {
    let cfg = &session.config;
    let ws = Workspace::load_with_text(&cfg.workspace, cfg.text.as_ref())?;
    cfg.check_workspace_hash(&session.dir, &ws.content_hash()?)?;
    Ok(ws.adhoc()?.docs.texts)
}

/// The documents of a collection named by its file (`--collection`: TSV
/// `id<TAB>text` or JSONL, read and checked as a workspace's `[adhoc]`
/// documents are: [`crate::corpus::Collection::read_docs`]); an empty one
/// is an error naming the file.
pub fn named_collection_texts(path: &Path) -> Result<Vec<String>> {
    let docs = crate::corpus::Collection::read_docs(path)?;
    if docs.is_empty() {
        return Err(Error::file(
            path,
            "no documents: give a collection with at least one (TSV `id<TAB>text` or JSONL)",
        ));
    }
    Ok(docs.texts)
}

/// Refuses what cannot be built: a lexical baseline, or a model that does
/// not read raw text (it encodes a collection in moments, with no index
/// to keep), or a build already running in the session (a local one, or
/// a Slurm one queued or running). A shard or the merge of a Slurm build
/// is that build: only the first check applies to them.
fn check_buildable(session: &Session, part: Part) -> Result<()> {
    if session.is_lexical() {
        return Err(Error::file(
            &session.dir,
            format!(
                "{} is a BM25 baseline: it has no embeddings to build",
                session.config.model
            ),
        ));
    }
    if part != Part::Whole {
        return Ok(());
    }
    check_not_active(&session.dir)?;
    if let Some(st) = IndexStatus::read(&session.dir)? {
        if st.state == "running" && st.process_alive() {
            return Err(Error::file(
                &session.dir,
                format!(
                    "an index build is already running in it (pid {}): {}",
                    st.pid,
                    st.describe()
                ),
            ));
        }
    }
    Ok(())
}

/// Builds session `dir`'s index in this process on `device`: loads the
/// model, encodes the collection in chunks (continuing from the chunks an
/// earlier, killed or cancelled run kept), recording progress in
/// `index/status.json` after every batch and calling `report` too. `cancel`
/// stops it after the batch under way (state `cancelled`; building again
/// resumes). Returns the final status.
///
/// `part` is [`Part::Whole`] for a build of its own; a task of a Slurm
/// build runs its [`Part::Shard`] (its status in `index/shard-NNN.json`)
/// or the [`Part::Merge`].
///
/// A collection of at least `hnsw_above` texts also gets its HNSW graph
/// (default settings, in the session's `hnsw.graph`, kept while it is the
/// graph of these embeddings) once whole, for a cosine model: a search
/// then walks it instead of scoring every document.
///
/// `collection` names a documents file to encode instead of the
/// workspace's collection ([`named_collection_texts`]; `rosetta eval
/// --adhoc` with the same documents then reads it): the session keeps one
/// encoded collection at a time.
#[allow(clippy::too_many_arguments)]
pub fn run(
    dir: &Path,
    device: DeviceSpec,
    opt: BuildOptions,
    part: Part,
    hnsw_above: usize,
    collection: Option<&Path>,
    cancel: &AtomicBool,
    report: &mut dyn FnMut(&IndexStatus),
) -> Result<IndexStatus> {
    let session = Session::open(dir)?;
    check_buildable(&session, part)?;
    // a bad file is refused before anything is written
    let mut named = collection.map(named_collection_texts).transpose()?;
    std::fs::create_dir_all(dir.join(INDEX_DIR)).map_err(|e| Error::io(dir, e))?;
    if part == Part::Whole {
        // a build of its own: an earlier Slurm build's record no longer applies
        remove_own(&dir.join(INDEX_SLURM))?;
    }
    let pid = std::process::id();
    let mut st = IndexStatus {
        state: "running".into(),
        pid,
        pid_start: crate::util::process_start_time(pid),
        ..Default::default()
    };
    st.write(dir, part)?;
    let result = (|| -> Result<Built> {
        let (dev, name) = crate::models::select_device(device)?;
        st.device = name;
        let m = Loaded::open(dir, &dev)?;
        if !m.model.reads_text() {
            return Err(Error::file(
                dir,
                format!(
                    "{} encodes a collection in moments: it keeps no index (search encodes at once)",
                    m.session.config.model
                ),
            ));
        }
        let texts = match named.take() {
            Some(t) => t,
            None => collection_texts(&m.session)?,
        };
        let mut last_write = std::time::Instant::now();
        let built = collection::build(
            &m,
            Side::Target,
            &texts,
            opt,
            part,
            &mut |p: &BuildProgress| {
                st.texts_done = p.done;
                st.texts_total = p.total;
                st.texts_reused = p.reused;
                st.texts_per_s = p.texts_per_s;
                st.eta_s = p.eta_s;
                st.chunks_done = p.chunks_done;
                st.chunks = p.chunks;
                // the file at most twice a second (and at every chunk)
                let chunk_end = p.done == p.total || p.done.is_multiple_of(opt.chunk);
                if chunk_end || last_write.elapsed().as_secs_f64() >= 0.5 {
                    let _ = st.write(dir, part);
                    last_write = std::time::Instant::now();
                }
                report(&st);
            },
            cancel,
        )?;
        let cosine = m.model.similarity() == crate::space::Similarity::Cosine;
        let whole = !matches!(part, Part::Shard { .. });
        match built {
            Built::Done(v) if whole && cosine && v.nrows() >= hnsw_above.max(1) => {
                let docs = std::sync::Arc::new(v);
                let path = dir.join(crate::session::files::HNSW_FILE);
                if ApproxIndex::load_for(&path, std::sync::Arc::clone(&docs))?.is_none() {
                    st.stage = Some(format!(
                        "building the HNSW graph ({} documents)",
                        docs.nrows()
                    ));
                    st.write(dir, part)?;
                    report(&st);
                    ApproxIndex::build(std::sync::Arc::clone(&docs), HnswParams::default())?
                        .save(&path)?;
                    st.stage = None;
                }
                Ok(Built::Done(std::sync::Arc::unwrap_or_clone(docs)))
            }
            other => Ok(other),
        }
    })();
    match result {
        Ok(Built::Done(_)) => {
            st.state = "done".into();
            st.eta_s = Some(0.0);
        }
        Ok(Built::Cancelled(_)) => {
            st.state = "cancelled".into();
            st.error = Some(format!(
                "cancelled; continue with `{}` (the chunks written are kept)",
                collection::build_command_for(dir, collection)
            ));
        }
        Err(e) => {
            st.state = "failed".into();
            st.error = Some(e.to_string());
            st.write(dir, part)?;
            return Err(e);
        }
    }
    st.write(dir, part)?;
    report(&st);
    Ok(st)
}

/// Removes `path` when it is there (a file of ours; a link is removed
/// itself, never followed).
fn remove_own(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
        _ => Ok(()),
    }
}

/// `index/slurm.json`: how a session's index build was submitted to Slurm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexSlurmRecord {
    /// The options the shards were submitted with (the merge takes them
    /// without the GPUs).
    pub options: SlurmOptions,
    /// The `rosetta` program the batch scripts run.
    pub exe: PathBuf,
    /// Shards of the build: tasks `0..shards` of the array.
    pub shards: usize,
    /// Texts of the collection.
    pub texts: usize,
    /// The job array of the shards.
    pub array_job: u64,
    /// The merge job, run once every shard has ended.
    pub merge_job: u64,
    /// When it was submitted, UTC.
    pub submitted: String,
}

impl IndexSlurmRecord {
    /// Reads `index/slurm.json` of session `dir`; `None` when its index was
    /// never built on Slurm (or was built locally since). Read as data
    /// (regular file, size-capped, no link).
    pub fn read(dir: &Path) -> Result<Option<IndexSlurmRecord>> {
        slurm::read_json_if_any(&dir.join(INDEX_SLURM))
    }

    /// The Slurm ids of the build: each shard's task, then the merge.
    fn ids(&self) -> Vec<SlurmId> {
        let mut ids: Vec<SlurmId> = (0..self.shards)
            .map(|t| SlurmId {
                job: self.array_job,
                task: Some(t as u32),
            })
            .collect();
        ids.push(SlurmId {
            job: self.merge_job,
            task: None,
        });
        ids
    }
}

/// How a Slurm index build is asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmBuild {
    /// The jobs' options (partition, time limit, account...).
    pub options: SlurmOptions,
    /// GPUs per shard task (`--gres=gpu:N`); `None`: one where the
    /// partition's nodes have GPUs, else none.
    pub gpus: Option<u32>,
    /// Shards: tasks of the array, each encoding a contiguous run of chunks.
    pub shards: usize,
    /// Texts from which the merge also makes the HNSW graph ([`HNSW_ABOVE`]).
    pub hnsw_above: usize,
}

/// The Slurm job name of session `dir`'s index build.
fn job_name(dir: &Path) -> String {
    format!(
        "rosetta-index:{}",
        dir.file_name().unwrap_or_default().to_string_lossy()
    )
}

/// Submits session `dir`'s index build to Slurm: a job array of
/// `req.shards` tasks, task `i` running `exe index build --session DIR
/// --shard i --shards K` on its node (its device: `device`, `auto` taking
/// the node's GPU), and a merge job after it (`--dependency=afterany`)
/// joining the chunks into the cache. Everything is checked first (the
/// session, the collection, the shards against its chunks, the options by
/// `sbatch --test-only`); nothing is written before. Writes the batch
/// scripts, `index/slurm.json` and a `queued` `index/status.json`.
pub fn submit_slurm(
    dir: &Path,
    exe: &Path,
    device: DeviceSpec,
    opt: BuildOptions,
    collection: Option<&Path>,
    req: &SlurmBuild,
) -> Result<IndexSlurmRecord> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    slurm::check_path(&dir)?;
    let session = Session::open(&dir)?;
    check_buildable(&session, Part::Whole)?;
    device.check_build()?;
    if opt.chunk == 0 || opt.batch == 0 {
        return Err(Error::invalid("--chunk and --batch must be at least 1"));
    }
    let collection = collection
        .map(|c| std::fs::canonicalize(c).map_err(|e| Error::io(c, e)))
        .transpose()?;
    let texts = match &collection {
        Some(c) => named_collection_texts(c)?.len(),
        None => collection_texts(&session)?.len(),
    };
    let chunks = texts.div_ceil(opt.chunk);
    if req.shards == 0 || req.shards > chunks.min(MAX_SHARDS) {
        return Err(Error::invalid(format!(
            "--shards {}: the collection is {texts} texts in {chunks} chunks of {} \
             (--chunk): give 1 to {} shards{}",
            req.shards,
            opt.chunk,
            chunks.clamp(1, MAX_SHARDS),
            if req.shards > chunks {
                ", or a smaller --chunk"
            } else {
                ""
            }
        )));
    }
    let mut shard_opts = req.options.clone();
    match (req.gpus, &shard_opts.gres) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid(
                "--gpus and --gres both ask for generic resources: give one",
            ))
        }
        (Some(0), None) => {}
        (Some(n), None) => shard_opts.gres = Some(format!("gpu:{n}")),
        (None, None) if slurm::partition_has_gpus(shard_opts.partition.as_deref()) => {
            shard_opts.gres = Some("gpu:1".into())
        }
        _ => {}
    }
    let merge_opts = SlurmOptions {
        gres: None,
        ..shard_opts.clone()
    };
    slurm::check(&shard_opts)?;
    // checked: now written
    let index = dir.join(INDEX_DIR);
    std::fs::create_dir_all(&index).map_err(|e| Error::io(&index, e))?;
    for e in std::fs::read_dir(&index).map_err(|e| Error::io(&index, e))? {
        let e = e.map_err(|e| Error::io(&index, e))?;
        if crate::session::files::is_shard_status(&e.file_name().to_string_lossy()) {
            remove_own(&e.path())?;
        }
    }
    let q = |p: &Path| -> Result<String> { Ok(slurm::sh_quote(slurm::utf8(p)?)) };
    let named = match &collection {
        Some(c) => format!(" --collection {}", q(c)?),
        None => String::new(),
    };
    let common = format!(
        "--session {} --chunk {} --batch {} --shards {} --background{named}",
        q(&dir)?,
        opt.chunk,
        opt.batch,
        req.shards
    );
    let shard_script = dir.join(INDEX_SLURM_SCRIPT);
    crate::util::write_atomic(
        &shard_script,
        format!(
            "#!/bin/sh\n# written by rosetta: array task i encodes shard i of this session's \
             collection\nexec {} index build {common} --device {device} --shard \
             \"$SLURM_ARRAY_TASK_ID\"\n",
            q(exe)?
        )
        .as_bytes(),
    )?;
    let merge_script = dir.join(INDEX_MERGE_SCRIPT);
    crate::util::write_atomic(
        &merge_script,
        format!(
            "#!/bin/sh\n# written by rosetta: joins the shards' chunks into this session's \
             index\nexec {} index build {common} --device cpu --merge --hnsw-above {}\n",
            q(exe)?,
            req.hnsw_above
        )
        .as_bytes(),
    )?;
    let log = slurm::utf8(&dir.join(INDEX_LOG))?.to_string();
    let head = |more: &[String]| -> Result<Vec<String>> {
        let mut h = vec![
            format!("--job-name={}", job_name(&dir)),
            format!("--output={log}"),
            "--open-mode=append".to_string(),
            format!("--chdir={}", slurm::utf8(&dir)?),
        ];
        h.extend_from_slice(more);
        Ok(h)
    };
    let array = slurm::sbatch(
        &shard_script,
        &shard_opts,
        &head(&[format!("--array=0-{}", req.shards - 1)])?,
    )?;
    let merge = slurm::sbatch(
        &merge_script,
        &merge_opts,
        &head(&[
            format!("--dependency=afterany:{}", array.job),
            "--kill-on-invalid-dep=yes".to_string(),
        ])?,
    );
    let merge = match merge {
        Ok(m) => m,
        Err(e) => {
            // no array without its merge
            let _ = slurm::tool("scancel", &[array.job.to_string()]);
            return Err(e);
        }
    };
    let rec = IndexSlurmRecord {
        options: shard_opts,
        exe: exe.to_path_buf(),
        shards: req.shards,
        texts,
        array_job: array.job,
        merge_job: merge.job,
        submitted: fmt_utc(now_unix()),
    };
    let path = dir.join(INDEX_SLURM);
    let bytes = serde_json::to_vec_pretty(&rec)
        .map_err(|e| Error::file(&path, format!("cannot serialise: {e}")))?;
    crate::util::write_atomic(&path, &bytes)?;
    IndexStatus {
        state: "queued".into(),
        device: "slurm".into(),
        texts_total: texts,
        chunks,
        ..Default::default()
    }
    .write(&dir, Part::Whole)?;
    Ok(rec)
}

/// What Slurm's states of a build's jobs come to: the state to show and
/// a description of the jobs.
fn slurm_state(
    rec: &IndexSlurmRecord,
    recorded: &str,
    known: &std::collections::BTreeMap<SlurmId, SlurmState>,
) -> (String, String) {
    let ids = rec.ids();
    let (tasks, merge) = ids.split_at(rec.shards);
    let count = |f: &dyn Fn(&SlurmState) -> bool| {
        tasks.iter().filter(|t| known.get(t).is_some_and(f)).count()
    };
    let running = count(&|s| s.is_active() && s.state != "PENDING");
    let pending = count(&|s| s.state == "PENDING");
    let ended = count(&|s| !s.is_active());
    let merge_state = known.get(&merge[0]);
    let mut jobs = format!("array {} ({} shard", rec.array_job, rec.shards);
    if rec.shards != 1 {
        jobs.push('s');
    }
    let parts: Vec<String> = [(running, "running"), (pending, "pending"), (ended, "ended")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect();
    if !parts.is_empty() {
        jobs.push_str(&format!(": {}", parts.join(", ")));
    }
    jobs.push_str(&format!("), merge {}", rec.merge_job));
    match merge_state {
        Some(m) => jobs.push_str(&format!(" {}", m.describe())),
        None => jobs.push_str(" unknown"),
    }
    let is_final = matches!(recorded, "done" | "failed" | "cancelled");
    let merge_active = merge_state.is_some_and(|m| m.is_active());
    let state = if is_final && !merge_active {
        recorded.to_string()
    } else if running > 0 || merge_state.is_some_and(|m| m.is_active() && m.state != "PENDING") {
        "running".to_string()
    } else if pending > 0 || merge_active {
        // queued, or the shards have ended and the merge is about to start
        "pending".to_string()
    } else {
        match merge_state {
            Some(m) => slurm::combine(crate::session::State::Queued, Some(m)).label,
            None => "lost (unknown to Slurm)".to_string(),
        }
    };
    (state, jobs)
}

/// Session `dir`'s index build as it stands: its status, and for a Slurm
/// build ([`submit_slurm`]) the state Slurm and the record say together
/// (`pending`, `running`, `done`, `failed`...; `shown_state` gives it) and
/// until the merge starts the shards' progress summed. `None` when the
/// session never had a build. One `squeue` (and at most one `sacct`).
pub fn view(dir: &Path) -> Result<Option<IndexStatus>> {
    let recorded = IndexStatus::read(dir)?;
    let Some(rec) = IndexSlurmRecord::read(dir)? else {
        return Ok(recorded);
    };
    let mut st = recorded.unwrap_or_default();
    let known = match slurm::query(&rec.ids()) {
        Ok(k) => k,
        Err(e) => {
            st.slurm = Some(format!("array {}: {e}", rec.array_job));
            if !matches!(st.state.as_str(), "done" | "failed" | "cancelled") {
                st.state = "unknown".into();
            }
            return Ok(Some(st));
        }
    };
    let (state, jobs) = slurm_state(&rec, &st.state, &known);
    if matches!(st.state.as_str(), "queued" | "") {
        // the merge has not started: the shards' progress, summed
        let mut sum = IndexStatus {
            texts_total: rec.texts,
            ..Default::default()
        };
        let mut rate = 0.0;
        for i in 0..rec.shards {
            if let Ok(Some(s)) = IndexStatus::read_part(
                dir,
                Part::Shard {
                    index: i,
                    of: rec.shards,
                },
            ) {
                sum.texts_done += s.texts_done;
                sum.texts_reused += s.texts_reused;
                sum.chunks_done += s.chunks_done;
                sum.chunks += s.chunks;
                if s.state == "running" {
                    rate += s.texts_per_s.unwrap_or(0.0);
                }
                if s.state == "failed" && sum.error.is_none() {
                    sum.error = Some(format!("shard {i}: {}", s.error.unwrap_or_default()));
                }
                if !s.device.is_empty() {
                    sum.device = s.device;
                }
            }
        }
        if rate > 0.0 {
            sum.texts_per_s = Some(rate);
            sum.eta_s = Some(rec.texts.saturating_sub(sum.texts_done) as f64 / rate);
        }
        sum.updated = st.updated.clone();
        if sum.device.is_empty() {
            sum.device = st.device.clone();
        }
        st = sum;
    }
    st.state = state;
    st.slurm = Some(jobs);
    Ok(Some(st))
}

/// Error when session `dir` has a Slurm index build still queued or
/// running (a second build, or deleting the session, would race it).
pub fn check_not_active(dir: &Path) -> Result<()> {
    let Some(rec) = IndexSlurmRecord::read(dir)? else {
        return Ok(());
    };
    // Slurm unreachable from here: its shards, if they run, hold the
    // cache's lock, which a build or a deletion also needs
    let Ok(known) = slurm::query(&rec.ids()) else {
        return Ok(());
    };
    if known.values().any(|s| s.is_active()) {
        let (_, jobs) = slurm_state(&rec, "", &known);
        return Err(Error::file(
            dir,
            format!(
                "its index build on Slurm is still queued or running ({jobs}): wait for it, or \
                 stop it with `rosetta index cancel --session {}`",
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// Starts session `dir`'s index build detached: `exe index build --session
/// DIR --device D --chunk N --batch B --hnsw-above H --background` in a session of its own, output
/// appended to `index/log.txt`. Refused as [`run`] refuses, before anything
/// is written. Returns the process id.
pub fn launch(
    dir: &Path,
    exe: &Path,
    device: DeviceSpec,
    opt: BuildOptions,
    hnsw_above: usize,
    collection: Option<&Path>,
) -> Result<u32> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let session = Session::open(&dir)?;
    check_buildable(&session, Part::Whole)?;
    // checked here, named absolutely for the detached process
    let collection = collection
        .map(|c| {
            named_collection_texts(c)?;
            std::fs::canonicalize(c).map_err(|e| Error::io(c, e))
        })
        .transpose()?;
    device.check_build()?;
    std::fs::create_dir_all(dir.join(INDEX_DIR)).map_err(|e| Error::io(&dir, e))?;
    let args: Vec<std::ffi::OsString> = vec![
        "index".into(),
        "build".into(),
        "--session".into(),
        dir.as_os_str().into(),
        "--device".into(),
        device.to_string().into(),
        "--chunk".into(),
        opt.chunk.to_string().into(),
        "--batch".into(),
        opt.batch.to_string().into(),
        "--hnsw-above".into(),
        hnsw_above.to_string().into(),
        "--background".into(),
    ];
    let mut args = args;
    if let Some(c) = &collection {
        args.push("--collection".into());
        args.push(c.as_os_str().into());
    }
    super::spawn_detached(exe, &args, &dir.join(INDEX_LOG))
}

/// Asks session `dir`'s running index build to stop: a local one by
/// SIGTERM (it stops after its batch and records `cancelled`), a Slurm one
/// by `scancel` of its shards and its merge (each shard keeps its chunks),
/// each job only when Slurm says it is this session's build (its name and
/// folder). Says what was done; an error when no build is running.
pub fn cancel(dir: &Path) -> Result<String> {
    if let Some(rec) = IndexSlurmRecord::read(dir)? {
        let known = slurm::query(&rec.ids())?;
        let canon = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
        let mut jobs = Vec::new();
        for (id, s) in known.iter().filter(|(_, s)| s.is_active()) {
            let same_dir = !s.workdir.is_empty()
                && std::fs::canonicalize(&s.workdir).is_ok_and(|p| p == canon);
            if s.name != job_name(&canon) || !same_dir {
                return Err(Error::file(
                    dir.join(INDEX_SLURM),
                    format!(
                        "records Slurm job {id}, but Slurm says that job is not this session's \
                         index build (its name {:?}, its folder {:?}): the record may have been \
                         edited; nothing cancelled",
                        crate::util::strip_controls(&s.name),
                        crate::util::strip_controls(&s.workdir),
                    ),
                ));
            }
            if !jobs.contains(&id.job) {
                jobs.push(id.job);
            }
        }
        if jobs.is_empty() {
            return Err(Error::file(
                dir,
                "no index build of it is queued or running on Slurm",
            ));
        }
        let ids: Vec<String> = jobs.iter().map(|j| j.to_string()).collect();
        slurm::tool("scancel", &ids)?;
        return Ok(format!(
            "cancelled Slurm job{} {} (the shards keep the chunks they wrote)",
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", ")
        ));
    }
    let st = IndexStatus::read(dir)?
        .ok_or_else(|| Error::file(dir, "the session has never had an index build"))?;
    if st.state != "running" || !st.process_alive() {
        return Err(Error::file(
            dir,
            format!("no index build is running (it is {})", st.shown_state()),
        ));
    }
    // SAFETY: kill(2) on the build's process, alive with its recorded start time.
    if unsafe { libc::kill(st.pid as libc::pid_t, libc::SIGTERM) } != 0 {
        return Err(Error::file(
            dir,
            format!(
                "cannot signal process {}: {}",
                st.pid,
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(format!(
        "sent SIGTERM to the index build (pid {}); it stops after its batch and keeps its chunks",
        st.pid
    ))
}

/// The index builds of the sessions under `root` (one level), with their
/// folders, newest update last, each as [`view`] gives it.
pub fn list(root: &Path) -> Result<Vec<(PathBuf, IndexStatus)>> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(root) else {
        return Ok(out);
    };
    for e in rd.flatten() {
        let p = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Ok(Some(st)) = view(&p) {
            out.push((p, st));
        }
    }
    out.sort_by(|a, b| a.1.updated.cmp(&b.1.updated).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status file claiming a Slurm build is read as a local one: its
    /// `running` with a dead process shows as `stale`, never as running.
    #[test]
    fn a_status_file_cannot_claim_to_be_a_slurm_build() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(INDEX_DIR)).unwrap();
        let forged = serde_json::json!({
            "state": "running", "pid": 999_999_999u32, "device": "cpu",
            "texts_done": 1, "texts_total": 2, "texts_reused": 0, "chunks_done": 0,
            "chunks": 1, "updated": "x", "slurm": "array 1 (1 shard), merge 2 RUNNING"
        });
        std::fs::write(tmp.path().join(INDEX_STATUS), forged.to_string()).unwrap();
        let st = IndexStatus::read(tmp.path()).unwrap().unwrap();
        assert_eq!(st.slurm, None);
        assert_eq!(st.shown_state(), "stale");
    }
}
