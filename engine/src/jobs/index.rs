//! Index builds: encoding a session's collection as a job
//! (`rosetta index build`), in the foreground or detached like a training
//! job, with its own status (`index/status.json`: texts done of total,
//! texts/s, ETA), log (`index/log.txt`), cancel (SIGTERM) and resume (the
//! chunks written are kept: [`crate::session::collection::build`]).
//!
//! The collection is the session's workspace's ad-hoc documents, encoded
//! on the target side with the session's best checkpoint into the cache a
//! search reads (`doc-embeddings.target.npy`).

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use crate::corpus::Workspace;
use crate::models::DeviceSpec;
use crate::session::collection::{self, BuildOptions, BuildProgress, Built, INDEX_DIR};
use crate::session::{fmt_utc, now_unix, Loaded, Session};
use crate::text::Side;
use crate::{Error, Result};

/// An index build's status file, under the session folder.
pub const INDEX_STATUS: &str = "index/status.json";
/// An index build's log, under the session folder (a detached build's
/// output goes there).
pub const INDEX_LOG: &str = "index/log.txt";

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
    /// Last update, UTC.
    pub updated: String,
}

impl IndexStatus {
    /// The status of session `dir`'s index build; `None` when it never had one.
    pub fn read(dir: &Path) -> Result<Option<IndexStatus>> {
        use crate::util::{read_regular_if_exists, Links, SMALL_FILE_LIMIT};
        let path = dir.join(INDEX_STATUS);
        match read_regular_if_exists(&path, Links::Refuse, SMALL_FILE_LIMIT)? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| Error::file(&path, format!("not an index status: {e}"))),
        }
    }

    fn write(&mut self, dir: &Path) -> Result<()> {
        self.updated = fmt_utc(now_unix());
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::invalid(format!("index status: {e}")))?;
        crate::util::write_atomic(&dir.join(INDEX_STATUS), &bytes)
    }

    /// Whether the build's process is alive.
    pub fn process_alive(&self) -> bool {
        crate::util::pid_alive(self.pid, self.pid_start)
    }

    /// The state to show: a `running` build whose process is gone is
    /// `stale` (killed: building again resumes it).
    pub fn shown_state(&self) -> &str {
        if self.state == "running" && !self.process_alive() {
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
        s
    }
}

/// What a session's collection is: its workspace's ad-hoc documents.
fn collection_texts(m: &Loaded) -> Result<Vec<String>> {
    let cfg = &m.session.config;
    let ws = Workspace::load_with_text(&cfg.workspace, cfg.text.as_ref())?;
    cfg.check_workspace_hash(&m.session.dir, &ws.content_hash()?)?;
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
/// to keep), or a build already running in the session.
fn check_buildable(session: &Session) -> Result<()> {
    if session.is_lexical() {
        return Err(Error::file(
            &session.dir,
            format!(
                "{} is a BM25 baseline: it has no embeddings to build",
                session.config.model
            ),
        ));
    }
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
/// `collection` names a documents file to encode instead of the
/// workspace's collection ([`named_collection_texts`]; `rosetta eval
/// --adhoc` with the same documents then reads it): the session keeps one
/// encoded collection at a time.
pub fn run(
    dir: &Path,
    device: DeviceSpec,
    opt: BuildOptions,
    collection: Option<&Path>,
    cancel: &AtomicBool,
    report: &mut dyn FnMut(&IndexStatus),
) -> Result<IndexStatus> {
    let session = Session::open(dir)?;
    check_buildable(&session)?;
    // a bad file is refused before anything is written
    let mut named = collection.map(named_collection_texts).transpose()?;
    std::fs::create_dir_all(dir.join(INDEX_DIR)).map_err(|e| Error::io(dir, e))?;
    let pid = std::process::id();
    let mut st = IndexStatus {
        state: "running".into(),
        pid,
        pid_start: crate::util::process_start_time(pid),
        ..Default::default()
    };
    st.write(dir)?;
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
            None => collection_texts(&m)?,
        };
        let mut last_write = std::time::Instant::now();
        collection::build(
            &m,
            Side::Target,
            &texts,
            opt,
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
                    let _ = st.write(dir);
                    last_write = std::time::Instant::now();
                }
                report(&st);
            },
            cancel,
        )
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
            st.write(dir)?;
            return Err(e);
        }
    }
    st.write(dir)?;
    report(&st);
    Ok(st)
}

/// Starts session `dir`'s index build detached: `exe index build --session
/// DIR --device D --chunk N --background` in a session of its own, output
/// appended to `index/log.txt`. Refused as [`run`] refuses, before anything
/// is written. Returns the process id.
pub fn launch(
    dir: &Path,
    exe: &Path,
    device: DeviceSpec,
    opt: BuildOptions,
    collection: Option<&Path>,
) -> Result<u32> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let session = Session::open(&dir)?;
    check_buildable(&session)?;
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
        "--background".into(),
    ];
    let mut args = args;
    if let Some(c) = &collection {
        args.push("--collection".into());
        args.push(c.as_os_str().into());
    }
    super::spawn_detached(exe, &args, &dir.join(INDEX_LOG))
}

/// Asks session `dir`'s running index build to stop (SIGTERM: it stops
/// after its batch and records `cancelled`). Returns its pid; an error
/// when no build is running.
pub fn cancel(dir: &Path) -> Result<u32> {
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
    Ok(st.pid)
}

/// The index builds of the sessions under `root` (one level), with their
/// folders, newest update last.
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
        if let Ok(Some(st)) = IndexStatus::read(&p) {
            out.push((p, st));
        }
    }
    out.sort_by(|a, b| a.1.updated.cmp(&b.1.updated).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}
