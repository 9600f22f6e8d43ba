//! A session's encoded collection: the document embeddings an encoder
//! (a model that reads raw text) computes once and keeps in the session
//! (`doc-embeddings.SIDE.npy`, tied by `doc-embeddings.SIDE.json` to the
//! checkpoint's and the texts' BLAKE3), built in chunks that survive a
//! kill, timed on a sample before anything long starts, and locked so that
//! two processes never encode the same collection at once.
//!
//! `rosetta index build` ([`crate::jobs::index`]), the searcher
//! ([`super::search::Searcher`]) and `rosetta eval` all build through
//! [`build`]; the searcher and `eval` check first with [`encode_within`]
//! (one refusal, [`too_long`], for every front-end). An estimate is kept in
//! the session (`doc-embeddings.SIDE.estimate.json`) so that the next
//! refusal comes without loading the model ([`refuse_recorded`]).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use ndarray::{concatenate, Array2, Axis};
use serde::{Deserialize, Serialize};

use super::table_cache::TableCache;
use super::Loaded;
use crate::text::Side;
use crate::{Error, Result};

/// Folder of a session holding an index build's chunks (and its status,
/// [`crate::jobs::index`]).
pub use super::files::INDEX_DIR;
/// Texts a chunk file holds by default: what a killed build loses at most.
pub const DEFAULT_CHUNK: usize = 1024;
/// Texts encoded between two progress reports by default.
pub const DEFAULT_BATCH: usize = 32;
/// Seconds of encoding a front-end starts without asking ([`Estimate`]).
pub const SILENT_LIMIT_S: f64 = 10.0;
/// Texts a sample for [`estimate`] encodes at most.
const SAMPLE: usize = 16;
use super::table_cache::read_small_json;
pub use super::table_cache::{checkpoint_blake3, CHECKPOINT_HASH_FILE};

/// The name of `side` in cache file names.
fn side_name(side: Side) -> &'static str {
    match side {
        Side::Source => "source",
        Side::Target => "target",
    }
}

/// BLAKE3 of a list of texts (each followed by a NUL).
pub fn texts_hash<S: AsRef<str>>(texts: &[S]) -> String {
    let mut h = blake3::Hasher::new();
    for t in texts {
        h.update(t.as_ref().as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex().to_string()
}

/// The meta file of session `dir`'s cache of its collection's embeddings
/// on `side` (`doc-embeddings.SIDE.json`; an index build writes it last).
pub fn cache_meta_path(dir: &Path, side: Side) -> PathBuf {
    dir.join(format!("doc-embeddings.{}.json", side_name(side)))
}

impl Loaded {
    /// The session's cache of the embeddings of collection `texts` of
    /// `side`: `doc-embeddings.SIDE.npy`, used while `doc-embeddings.SIDE.json`
    /// names the current checkpoint's BLAKE3, the texts' BLAKE3 and the shape.
    pub(crate) fn collection_cache<S: AsRef<str>>(
        &self,
        side: Side,
        texts: &[S],
    ) -> Result<TableCache> {
        let name = side_name(side);
        let shape = (texts.len(), self.model.dim());
        Ok(TableCache {
            npy: self.session.dir.join(format!("doc-embeddings.{name}.npy")),
            meta: cache_meta_path(&self.session.dir, side),
            want: serde_json::json!({
                "checkpoint_blake3": self.checkpoint_hash()?,
                "texts_blake3": texts_hash(texts),
                "rows": shape.0,
                "dim": shape.1,
            }),
            shape,
        })
    }

    /// Whether `texts` of `side` need encoding before a search: the model
    /// reads raw text (an encoder) and the session holds no valid cache of
    /// them. Other models encode a collection in moments.
    pub fn collection_needs_encoding<S: AsRef<str>>(
        &self,
        side: Side,
        texts: &[S],
    ) -> Result<bool> {
        if !self.model.reads_text() {
            return Ok(false);
        }
        Ok(self.collection_cache(side, texts)?.valid().is_none())
    }
}

/// How long encoding a collection would take, measured on a sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Texts of the collection.
    pub texts: usize,
    /// Texts the sample encoded.
    pub sample: usize,
    /// Texts per second on the sample.
    pub texts_per_s: f64,
    /// Estimated seconds for the whole collection.
    pub seconds: f64,
    /// The device measured on (`cpu`, `cuda:0`).
    #[serde(default)]
    pub device: String,
}

/// Times the encoding of up to 16 texts spread evenly over `texts` with
/// `m`, loaded on `device` (its name, as the estimate reports it), and
/// extrapolates to all of them (the sample's first batch pays any warm-up,
/// so the estimate errs long).
pub fn estimate<S: AsRef<str>>(
    m: &Loaded,
    device: &str,
    side: Side,
    texts: &[S],
) -> Result<Estimate> {
    let n = texts.len();
    let k = n.min(SAMPLE);
    let device = device.to_string();
    if k == 0 {
        return Ok(Estimate {
            texts: 0,
            sample: 0,
            texts_per_s: 0.0,
            seconds: 0.0,
            device,
        });
    }
    let sample: Vec<&str> = (0..k).map(|i| texts[i * n / k].as_ref()).collect();
    let t = Instant::now();
    m.encode_texts(side, &sample)?;
    let secs = t.elapsed().as_secs_f64().max(1e-6);
    let rate = k as f64 / secs;
    Ok(Estimate {
        texts: n,
        sample: k,
        texts_per_s: rate,
        seconds: n as f64 / rate,
        device,
    })
}

/// Where a build stands, as [`build`] reports it after every batch.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BuildProgress {
    /// Texts encoded (those of chunks kept from an earlier run included).
    pub done: usize,
    /// Texts of the collection.
    pub total: usize,
    /// Texts taken from chunks an earlier, interrupted run wrote.
    pub reused: usize,
    /// Texts per second encoded by this run (`None` before its first batch).
    pub texts_per_s: Option<f64>,
    /// Estimated seconds left.
    pub eta_s: Option<f64>,
    /// Chunk files written (kept ones included) of `chunks`.
    pub chunks_done: usize,
    /// Chunk files of the whole collection.
    pub chunks: usize,
}

impl BuildProgress {
    /// One line for people: `WHAT 1200/31084 (3.9%), 16.2 texts/s, ETA 30m41s`.
    pub fn describe(&self, what: &str) -> String {
        crate::util::progress_line(what, self.done, self.total, self.texts_per_s, self.eta_s)
    }
}

/// A path as one shell word.
fn shell_word(p: &Path) -> String {
    let d = p.display().to_string();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:@%=,".contains(c);
    if !d.is_empty() && d.chars().all(safe) {
        d
    } else {
        format!("'{}'", d.replace('\'', "'\\''"))
    }
}

/// The command that builds session `dir`'s index in the background, as a
/// person types it.
pub fn build_command(dir: &Path) -> String {
    build_command_for(dir, None)
}

/// [`build_command`] for the documents file `collection` when given
/// (`--collection FILE`).
pub fn build_command_for(dir: &Path, collection: Option<&Path>) -> String {
    let named = collection
        .map(|c| format!(" --collection {}", shell_word(c)))
        .unwrap_or_default();
    format!(
        "rosetta index build --session {}{named} --detach",
        shell_word(dir)
    )
}

/// The refusal of an encoding estimated at `e`: the estimate and the
/// command that builds the index as a job. `search`, `eval` and `compare`
/// all refuse with it.
///
/// `other` names the documents file of a collection that is not the
/// session's workspace's (`rosetta eval --adhoc`): the command then builds
/// that file (`--collection`).
pub fn too_long(dir: &Path, e: &Estimate, other: Option<&Path>) -> Error {
    let what = match other {
        None => "the session's collection is not encoded yet".to_string(),
        Some(p) => format!("the collection of {} is not encoded yet", p.display()),
    };
    let how = format!(
        "Build its index as a job: `{}` (`rosetta jobs` shows its progress; a search, \
         evaluation or comparison afterwards reads it), or encode in the foreground with --build",
        build_command_for(dir, other)
    );
    Error::file(
        dir,
        format!(
            "{what}: {} documents, about {} on this {} ({:.1} texts/s measured on {} of them). \
             {how}",
            e.texts,
            crate::util::fmt_duration(e.seconds),
            if e.device.is_empty() {
                "device"
            } else {
                &e.device
            },
            e.texts_per_s,
            e.sample,
        ),
    )
}

/// An estimate as a session keeps it: what it was measured for.
#[derive(Debug, Serialize, Deserialize)]
struct RecordedEstimate {
    checkpoint_blake3: String,
    texts_blake3: String,
    threads: usize,
    estimate: Estimate,
}

/// Where session `dir` keeps the last estimate of encoding its collection of `side`.
fn estimate_path(dir: &Path, side: Side) -> PathBuf {
    dir.join(format!("doc-embeddings.{}.estimate.json", side_name(side)))
}

/// Before encoding collection `texts` of `side` with `m` (loaded on
/// `device`, by name; `other` as for [`too_long`]): nothing to do
/// when it needs no encoding ([`Loaded::collection_needs_encoding`]) or
/// `max_s` is `None`; else the encoding is timed on a sample
/// ([`estimate`], `progress` told), the estimate kept in the session for
/// [`refuse_recorded`], and refused ([`too_long`]) when above `max_s`
/// seconds.
pub fn encode_within<S: AsRef<str>>(
    m: &Loaded,
    device: &str,
    side: Side,
    texts: &[S],
    other: Option<&Path>,
    max_s: Option<f64>,
    progress: &dyn Fn(&str),
) -> Result<()> {
    match check_within(m, device, side, texts, max_s, progress)? {
        Some(e) => Err(too_long(&m.session.dir, &e, other)),
        None => Ok(()),
    }
}

/// [`encode_within`] answering an encoding above `max_s` seconds with its
/// estimate (`Some`) rather than an error, for a front-end that offers to
/// build the index as a job (the workbench); `None`: go ahead.
pub fn check_within<S: AsRef<str>>(
    m: &Loaded,
    device: &str,
    side: Side,
    texts: &[S],
    max_s: Option<f64>,
    progress: &dyn Fn(&str),
) -> Result<Option<Estimate>> {
    let Some(limit) = max_s else {
        return Ok(None);
    };
    if !m.collection_needs_encoding(side, texts)? {
        return Ok(None);
    }
    progress("timing the encoder on a sample of the documents");
    let e = estimate(m, device, side, texts)?;
    keep(m, side, texts, &e)?;
    Ok((e.seconds > limit).then_some(e))
}

/// Keeps estimate `e` of encoding `texts` of `side` with `m` in the
/// session, for [`refuse_recorded`]; a session that cannot be written only
/// loses the shortcut.
fn keep<S: AsRef<str>>(m: &Loaded, side: Side, texts: &[S], e: &Estimate) -> Result<()> {
    let record = RecordedEstimate {
        checkpoint_blake3: m.checkpoint_hash()?,
        texts_blake3: texts_hash(texts),
        threads: candle_core::utils::get_num_threads(),
        estimate: e.clone(),
    };
    if let Ok(b) = serde_json::to_vec(&record) {
        let _ = crate::util::write_atomic(&estimate_path(&m.session.dir, side), &b);
    }
    Ok(())
}

/// After `rosetta train`: times an encoder session's model on a sample of
/// its workspace's collection on the CPU (where `search` encodes) and
/// keeps the estimate, so that the first `search`, `eval` or `compare`
/// refusing a long encoding answers at once ([`refuse_recorded`]) instead
/// of loading the model. Nothing (`None`) for any other model, or a
/// collection already encoded. Costs one load of the model and the
/// sample's encoding.
pub fn keep_estimate(dir: &Path) -> Result<Option<Estimate>> {
    let session = super::Session::open(dir)?;
    if session.config.model != crate::models::encoder::KIND {
        return Ok(None);
    }
    let m = Loaded::open(dir, &candle_core::Device::Cpu)?;
    let cfg = &m.session.config;
    let ws = crate::corpus::Workspace::load_with_text(&cfg.workspace, cfg.text.as_ref())?;
    cfg.check_workspace_hash(dir, &ws.content_hash()?)?;
    let texts = ws.adhoc()?.docs.texts;
    if !m.collection_needs_encoding(Side::Target, &texts)? {
        return Ok(None);
    }
    let e = estimate(&m, "cpu", Side::Target, &texts)?;
    keep(&m, Side::Target, &texts, &e)?;
    Ok(Some(e))
}

/// The refusal [`encode_within`] would give for session `dir`'s
/// workspace collection (target side) on `device` (by name), answered from the
/// estimate it kept, without loading the model or indexing the collection:
/// the session's checkpoint ([`checkpoint_blake3`]), its workspace's
/// documents and the thread count must be those measured, and the session
/// must hold no cache naming them. `Ok` whenever that cannot be told
/// (nothing kept, anything changed, unreadable): the caller then opens the
/// session as usual, which measures again.
pub fn refuse_recorded(dir: &Path, device: &str, max_s: f64) -> Result<()> {
    match recorded_too_long(dir, device, max_s) {
        Some(e) => Err(too_long(dir, &e, None)),
        None => Ok(()),
    }
}

/// The estimate kept in session `dir` when it says the encoding takes more
/// than `max_s` seconds ([`refuse_recorded`]'s answer, for a front-end
/// that offers to build the index instead of refusing).
pub fn recorded_too_long(dir: &Path, device: &str, max_s: f64) -> Option<Estimate> {
    recorded_estimate(dir, device).filter(|e| e.seconds > max_s)
}

fn recorded_estimate(dir: &Path, device: &str) -> Option<Estimate> {
    let side = Side::Target;
    let r: RecordedEstimate = read_small_json(&estimate_path(dir, side))?;
    if r.estimate.device != device || r.threads != candle_core::utils::get_num_threads() {
        return None;
    }
    let session = super::Session::open(dir).ok()?;
    let ws = crate::corpus::Workspace::load_with_text(
        &session.config.workspace,
        session.config.text.as_ref(),
    )
    .ok()?;
    session
        .config
        .check_workspace_hash(dir, &ws.content_hash().ok()?)
        .ok()?;
    let texts = ws.adhoc().ok()?.docs.texts;
    if texts_hash(&texts) != r.texts_blake3 || texts.len() != r.estimate.texts {
        return None;
    }
    if checkpoint_blake3(dir).ok()? != r.checkpoint_blake3 {
        return None;
    }
    // a cache naming this checkpoint and these texts: the searcher checks it
    let meta: Option<serde_json::Value> =
        read_small_json(&dir.join(format!("doc-embeddings.{}.json", side_name(side))));
    if meta.is_some_and(|m| {
        m["checkpoint_blake3"] == r.checkpoint_blake3.as_str()
            && m["texts_blake3"] == r.texts_blake3.as_str()
    }) {
        return None;
    }
    Some(r.estimate)
}

/// How [`build`] cuts its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildOptions {
    /// Texts per chunk file (what a kill loses at most).
    pub chunk: usize,
    /// Texts per encoding call (one progress report each).
    pub batch: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            chunk: DEFAULT_CHUNK,
            batch: DEFAULT_BATCH,
        }
    }
}

/// How a [`build`] ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Built {
    /// Every chunk encoded and the cache written.
    Done(Array2<f32>),
    /// Stopped by the cancel flag after its last whole chunk (kept).
    Cancelled(BuildProgress),
}

/// The file naming what the chunks under a chunk folder were encoded for.
const CHUNKS_META: &str = "chunks.json";

/// Chunk file `i` of a chunk folder.
fn chunk_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("chunk-{i:06}.npy"))
}

/// The BLAKE3 (hex) of chunk `i`'s bytes as written, beside it: a chunk
/// whose bytes no longer hash to it (edited, truncated, copied in) is
/// encoded again, never reused.
fn chunk_hash_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("chunk-{i:06}.npy.blake3"))
}

/// Chunk `i` of `rows` texts of width `dim`, when it and its checksum are
/// regular files (never through a link), the checksum is its bytes' and
/// the header declares that shape; `None` otherwise.
fn read_chunk(dir: &Path, i: usize, rows: usize, dim: usize) -> Option<Array2<f32>> {
    use crate::util::{read_regular, Links, SMALL_FILE_LIMIT};
    let recorded = read_regular(&chunk_hash_path(dir, i), Links::Refuse, SMALL_FILE_LIMIT).ok()?;
    let path = chunk_path(dir, i);
    if recorded != crate::util::hash_file(&path).ok()?.as_bytes() {
        return None;
    }
    crate::index::dense::read_npy_checked(&path, Links::Refuse, Some((rows, dim))).ok()
}

/// Writes chunk `i` and then its checksum (each by temp file + rename).
fn write_chunk(dir: &Path, i: usize, chunk: &Array2<f32>) -> Result<()> {
    let bytes = crate::index::dense::npy_bytes(chunk)?;
    crate::util::write_atomic(&chunk_path(dir, i), &bytes)?;
    let hash = blake3::hash(&bytes).to_hex().to_string();
    crate::util::write_atomic(&chunk_hash_path(dir, i), hash.as_bytes())
}

/// Which chunks of a collection a build encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Part {
    /// Every chunk: the session's whole collection (the cache is written).
    #[default]
    Whole,
    /// The chunks of shard `index` of `of` ([`Part::chunks`]): one task of
    /// a sharded build, run beside the others; the chunks are kept for the
    /// merge.
    Shard {
        /// This shard, from 0.
        index: usize,
        /// Shards of the build.
        of: usize,
    },
    /// No chunk: the shards' chunks read back and joined into the cache; a
    /// chunk missing (a shard that did not finish) is an error naming it.
    Merge,
}

impl Part {
    /// The chunk indices this part covers, of `chunks`: shard `i` of `k`
    /// takes the contiguous run `i*chunks/k .. (i+1)*chunks/k`, so that the
    /// shards cover every chunk once and differ by at most one chunk.
    pub fn chunks(self, chunks: usize) -> Range<usize> {
        match self {
            Part::Whole | Part::Merge => 0..chunks,
            Part::Shard { index, of } => {
                let of = of.max(1);
                (index * chunks / of)..((index + 1) * chunks / of)
            }
        }
    }
}

/// Encodes `n` texts of width `dim` in chunks of `opt.chunk` under `dir`
/// (the chunks of `part` only), calling `encode` on ranges of at most
/// `opt.batch` texts and `report` after each; each chunk a previous run (or
/// another shard) wrote for the same `want` (checkpoint, texts, shape,
/// chunk size: `chunks.json`) is read back, not encoded again. A chunk file
/// of the wrong shape, whose bytes do not hash to its recorded BLAKE3, a
/// link or unreadable, is encoded again ([`Part::Merge`]: an error naming
/// the chunks missing). With `cancel` set the build stops after the batch
/// under way, keeping the whole chunks written. The concatenated rows of
/// the part's chunks are returned once complete; the caller writes the
/// cache and removes `dir`.
///
/// Shards run at once on one folder: the folder is made (or, holding
/// another `want`, emptied) under a lock (`dir` + `.lock`, a blocking
/// `flock`), and a merge never empties it.
#[allow(clippy::too_many_arguments)]
pub fn build_chunks(
    dir: &Path,
    want: &serde_json::Value,
    (n, dim): (usize, usize),
    opt: BuildOptions,
    part: Part,
    encode: &mut dyn FnMut(Range<usize>) -> Result<Array2<f32>>,
    report: &mut dyn FnMut(&BuildProgress),
    cancel: &AtomicBool,
) -> Result<Option<Array2<f32>>> {
    if opt.chunk == 0 || opt.batch == 0 {
        return Err(Error::invalid("chunk and batch sizes must be at least 1"));
    }
    let mut want = want.clone();
    if let Some(o) = want.as_object_mut() {
        o.insert("chunk".into(), opt.chunk.into());
    }
    prepare_chunk_dir(dir, &want, part)?;
    let chunks = n.div_ceil(opt.chunk);
    let range = part.chunks(chunks);
    let rows_of = |i: usize| (i * opt.chunk)..((i + 1) * opt.chunk).min(n);
    let mut parts: Vec<Option<Array2<f32>>> = range
        .clone()
        .map(|i| read_chunk(dir, i, rows_of(i).len(), dim))
        .collect();
    let missing: Vec<usize> = range
        .clone()
        .zip(&parts)
        .filter(|(_, c)| c.is_none())
        .map(|(i, _)| i)
        .collect();
    if part == Part::Merge && !missing.is_empty() {
        return Err(Error::file(
            dir,
            format!(
                "{} of the {chunks} chunks are missing or damaged ({}): a shard did not finish \
                 (its log says why); submit the sharded build again, which keeps the chunks \
                 written and encodes only these",
                missing.len(),
                list_chunks(&missing)
            ),
        ));
    }
    let total: usize = range.clone().map(|i| rows_of(i).len()).sum();
    let reused: usize = parts.iter().flatten().map(|p| p.nrows()).sum();
    let mut p = BuildProgress {
        done: reused,
        total,
        reused,
        chunks_done: range.len() - missing.len(),
        chunks: range.len(),
        ..Default::default()
    };
    report(&p);
    let t0 = Instant::now();
    for i in missing {
        if cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let r = rows_of(i);
        let mut batches = Vec::new();
        let mut at = r.start;
        while at < r.end {
            let b = at..(at + opt.batch).min(r.end);
            let e = encode(b.clone())?;
            if e.dim() != (b.len(), dim) {
                return Err(Error::invalid(format!(
                    "encoding texts {}..{} gave shape {:?}, not ({}, {dim})",
                    b.start,
                    b.end,
                    e.dim(),
                    b.len()
                )));
            }
            batches.push(e);
            at = b.end;
            p.done += b.len();
            let secs = t0.elapsed().as_secs_f64().max(1e-9);
            let rate = (p.done - reused) as f64 / secs;
            p.texts_per_s = Some(rate);
            p.eta_s = Some((total - p.done) as f64 / rate);
            report(&p);
            if cancel.load(Ordering::Relaxed) && at < r.end {
                // the partial chunk is dropped: the next run starts it again
                return Ok(None);
            }
        }
        let views: Vec<_> = batches.iter().map(|b| b.view()).collect();
        let chunk = concatenate(Axis(0), &views)
            .map_err(|e| Error::invalid(format!("joining a chunk: {e}")))?;
        write_chunk(dir, i, &chunk)?;
        parts[i - range.start] = Some(chunk);
        p.chunks_done += 1;
        report(&p);
    }
    let parts: Vec<Array2<f32>> = parts.into_iter().flatten().collect();
    if parts.is_empty() {
        return Ok(Some(Array2::zeros((0, dim))));
    }
    let views: Vec<_> = parts.iter().map(|b| b.view()).collect();
    Ok(Some(concatenate(Axis(0), &views).map_err(|e| {
        Error::invalid(format!("joining the chunks: {e}"))
    })?))
}

/// `0, 3, 5..9`: chunk indices, runs shortened, at most 8 runs named.
fn list_chunks(ids: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &i in ids {
        match runs.last_mut() {
            Some((_, e)) if *e + 1 == i => *e = i,
            _ => runs.push((i, i)),
        }
    }
    let mut s: Vec<String> = runs
        .iter()
        .take(8)
        .map(|&(a, b)| {
            if a == b {
                format!("chunk {a}")
            } else {
                format!("chunks {a}..={b}")
            }
        })
        .collect();
    if runs.len() > 8 {
        s.push("…".into());
    }
    s.join(", ")
}

/// Makes chunk folder `dir` hold chunks of `want` (its `chunks.json`):
/// kept when it names the same, else emptied and made anew (a link planted
/// in its place is removed, never followed); a merge refuses a folder of
/// another `want` instead. Runs under a blocking `flock` on `dir` +
/// `.lock`, so that shards starting together make the folder once.
fn prepare_chunk_dir(dir: &Path, want: &serde_json::Value, part: Part) -> Result<()> {
    use crate::util::{read_regular, Links, SMALL_FILE_LIMIT};
    use std::os::unix::io::AsRawFd;
    let parent = dir
        .parent()
        .ok_or_else(|| Error::file(dir, "a chunk folder needs a parent folder"))?;
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let mut lock_name = dir.file_name().unwrap_or_default().to_os_string();
    lock_name.push(".lock");
    let lock_path = parent.join(lock_name);
    let lock = open_lock_file(&lock_path)?;
    // SAFETY: flock on a valid open descriptor; released when `lock` closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(Error::io(&lock_path, std::io::Error::last_os_error()));
    }
    let meta_path = dir.join(CHUNKS_META);
    let same = read_regular(&meta_path, Links::Refuse, SMALL_FILE_LIMIT)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|m| &m == want);
    if same {
        return Ok(());
    }
    if part == Part::Merge {
        return Err(Error::file(
            dir,
            "holds no chunks of this checkpoint and collection (the shards wrote none, or \
             wrote them for another checkpoint or collection): submit the sharded build again",
        ));
    }
    // chunks of another checkpoint or collection are of no use
    if dir.symlink_metadata().is_ok() {
        let r = if dir.is_symlink() {
            std::fs::remove_file(dir)
        } else {
            std::fs::remove_dir_all(dir)
        };
        r.map_err(|e| Error::io(dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    crate::util::write_atomic(&meta_path, want.to_string().as_bytes())
}

/// Opens (creating) lock file `path` for `flock`, never through a link.
fn open_lock_file(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

/// An exclusive lock on a session's collection cache of one side
/// (`doc-embeddings.SIDE.lock`, a `flock`), held while a process encodes
/// it: a second front-end is told, not left to encode the same texts.
#[derive(Debug)]
pub struct CacheLock {
    _file: std::fs::File,
}

impl CacheLock {
    /// Takes the lock of `side`'s collection cache of session `dir`, or
    /// fails saying another process is encoding it.
    pub fn acquire(dir: &Path, side: Side) -> Result<CacheLock> {
        Self::take(dir, side, libc::LOCK_EX)
    }

    /// Takes the lock of `side`'s collection cache of session `dir` shared,
    /// as the shards of one build do (they encode different chunks); fails
    /// while a whole build or a search holds it alone.
    pub fn acquire_shared(dir: &Path, side: Side) -> Result<CacheLock> {
        Self::take(dir, side, libc::LOCK_SH)
    }

    fn take(dir: &Path, side: Side, how: libc::c_int) -> Result<CacheLock> {
        use std::os::unix::io::AsRawFd;
        let path = dir.join(format!("doc-embeddings.{}.lock", side_name(side)));
        let file = open_lock_file(&path)?;
        // SAFETY: flock on a valid open descriptor.
        let r = unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) };
        if r != 0 {
            return Err(Error::file(
                dir,
                "another process is encoding this session's collection (an `rosetta index build`, \
                 or a search or comparison opening it): wait for it (see `rosetta jobs`), then try \
                 again; its embeddings are kept in the session",
            ));
        }
        Ok(CacheLock { _file: file })
    }
}

/// Encodes collection `texts` of `side` with `m` into the session's cache
/// ([`Loaded::collection_cache`]) in chunks under `index/chunks-SIDE`
/// ([`build_chunks`]), holding the cache's lock ([`CacheLock`]); a cache
/// already valid is read and returned at once. A model that does not read
/// raw text encodes at once and keeps nothing.
///
/// `part` [`Part::Whole`] encodes every chunk and writes the cache; a
/// [`Part::Shard`] encodes its own chunks only, holding the lock shared with
/// the other shards, and returns their rows (none when the cache was
/// complete already); [`Part::Merge`] encodes nothing and joins the chunks
/// the shards wrote into the cache.
pub fn build<S: AsRef<str>>(
    m: &Loaded,
    side: Side,
    texts: &[S],
    opt: BuildOptions,
    part: Part,
    report: &mut dyn FnMut(&BuildProgress),
    cancel: &AtomicBool,
) -> Result<Built> {
    if !m.model.reads_text() {
        return Ok(Built::Done(m.encode_texts(side, texts)?));
    }
    let cache = m.collection_cache(side, texts)?;
    let _lock = match part {
        Part::Shard { .. } => CacheLock::acquire_shared(&m.session.dir, side)?,
        Part::Whole | Part::Merge => CacheLock::acquire(&m.session.dir, side)?,
    };
    let n = texts.len();
    let chunks = n.div_ceil(opt.chunk.max(1));
    let mine = part.chunks(chunks);
    let complete = |v: Array2<f32>, report: &mut dyn FnMut(&BuildProgress)| {
        let rows = (mine.start * opt.chunk).min(n)..(mine.end * opt.chunk).min(n);
        report(&BuildProgress {
            done: rows.len(),
            total: rows.len(),
            reused: rows.len(),
            chunks_done: mine.len(),
            chunks: mine.len(),
            ..Default::default()
        });
        Built::Done(v)
    };
    if matches!(part, Part::Shard { .. }) {
        if cache.valid().is_some() {
            return Ok(complete(Array2::zeros((0, cache.shape.1)), report));
        }
    } else if let Some(v) = cache.read() {
        return Ok(complete(v, report));
    }
    let dir = m
        .session
        .dir
        .join(INDEX_DIR)
        .join(format!("chunks-{}", side_name(side)));
    let mut last = BuildProgress::default();
    let out = build_chunks(
        &dir,
        &cache.want,
        cache.shape,
        opt,
        part,
        &mut |r| m.encode_texts(side, &texts[r]),
        &mut |p| {
            last = *p;
            report(p)
        },
        cancel,
    )?;
    match out {
        None => Ok(Built::Cancelled(last)),
        Some(v) if matches!(part, Part::Shard { .. }) => Ok(Built::Done(v)),
        Some(v) => {
            cache.try_write(&v)?;
            // the chunks are in the cache now
            let _ = std::fs::remove_dir_all(&dir);
            Ok(Built::Done(v))
        }
    }
}

/// [`build`] in the foreground for a front-end (`search --build`, `eval`,
/// `compare`): the collection's embeddings, `progress(fraction, line)`
/// told after every batch (`encoding documents 1200/31084 (3.9%), 16.2
/// texts/s, ETA 30m41s`).
pub fn encode_reporting<S: AsRef<str>>(
    m: &Loaded,
    side: Side,
    texts: &[S],
    progress: &dyn Fn(f64, &str),
) -> Result<Array2<f32>> {
    let built = build(
        m,
        side,
        texts,
        BuildOptions::default(),
        Part::Whole,
        &mut |p: &BuildProgress| {
            let frac = p.done as f64 / p.total.max(1) as f64;
            progress(frac, &p.describe("encoding documents"))
        },
        &AtomicBool::new(false),
    )?;
    match built {
        Built::Done(v) => Ok(v),
        Built::Cancelled(_) => Err(Error::invalid("encoding the documents was cancelled")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn rows(r: Range<usize>) -> Array2<f32> {
        Array2::from_shape_fn((r.len(), 3), |(i, j)| ((r.start + i) * 10 + j) as f32)
    }

    #[test]
    fn a_cancelled_build_resumes_from_its_last_chunk_without_encoding_it_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("chunks");
        let want = serde_json::json!({"texts_blake3": "t", "rows": 10, "dim": 3});
        let opt = BuildOptions { chunk: 4, batch: 2 };
        let encoded = RefCell::new(Vec::new());
        let cancel = AtomicBool::new(false);
        // first run: cancelled during chunk 1 (texts 4..8), after its first batch
        let first = build_chunks(
            &dir,
            &want,
            (10, 3),
            opt,
            Part::Whole,
            &mut |r| {
                encoded.borrow_mut().push(r.clone());
                if r.start == 4 {
                    cancel.store(true, Ordering::Relaxed);
                }
                Ok(rows(r))
            },
            &mut |_| {},
            &cancel,
        )
        .unwrap();
        assert!(first.is_none(), "cancelled");
        assert_eq!(*encoded.borrow(), vec![0..2, 2..4, 4..6]);
        assert!(chunk_path(&dir, 0).is_file());
        assert!(
            !chunk_path(&dir, 1).exists(),
            "a partial chunk is never written"
        );
        // second run: chunk 0 read back, the rest encoded
        encoded.borrow_mut().clear();
        let cancel = AtomicBool::new(false);
        let mut reports = Vec::new();
        let out = build_chunks(
            &dir,
            &want,
            (10, 3),
            opt,
            Part::Whole,
            &mut |r| {
                encoded.borrow_mut().push(r.clone());
                Ok(rows(r))
            },
            &mut |p| reports.push(*p),
            &cancel,
        )
        .unwrap()
        .unwrap();
        assert_eq!(*encoded.borrow(), vec![4..6, 6..8, 8..10]);
        assert_eq!(out, rows(0..10));
        assert_eq!(reports[0].reused, 4);
        assert_eq!(reports[0].done, 4);
        let last = reports.last().unwrap();
        assert_eq!(
            (last.done, last.total, last.chunks_done, last.chunks),
            (10, 10, 3, 3)
        );
        assert!(last.texts_per_s.unwrap() > 0.0);
        // another collection: nothing is reused
        encoded.borrow_mut().clear();
        let other = serde_json::json!({"texts_blake3": "u", "rows": 10, "dim": 3});
        build_chunks(
            &dir,
            &other,
            (10, 3),
            opt,
            Part::Whole,
            &mut |r| {
                encoded.borrow_mut().push(r.clone());
                Ok(rows(r))
            },
            &mut |_| {},
            &cancel,
        )
        .unwrap()
        .unwrap();
        assert_eq!(encoded.borrow().len(), 5, "every batch encoded again");
    }

    #[test]
    fn a_wrong_shaped_chunk_is_encoded_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("chunks");
        let want = serde_json::json!({"rows": 6});
        let opt = BuildOptions { chunk: 3, batch: 3 };
        let cancel = AtomicBool::new(false);
        build_chunks(
            &dir,
            &want,
            (6, 3),
            opt,
            Part::Whole,
            &mut |r| Ok(rows(r)),
            &mut |_| {},
            &cancel,
        )
        .unwrap()
        .unwrap();
        write_chunk(&dir, 1, &rows(0..2)).unwrap();
        let mut encoded = Vec::new();
        let out = build_chunks(
            &dir,
            &want,
            (6, 3),
            opt,
            Part::Whole,
            &mut |r| {
                encoded.push(r.clone());
                Ok(rows(r))
            },
            &mut |_| {},
            &cancel,
        )
        .unwrap()
        .unwrap();
        assert_eq!(encoded, vec![3..6]);
        assert_eq!(out, rows(0..6));
    }

    /// A chunk of the right shape whose bytes are not the ones written (its
    /// checksum differs) is encoded again, alone: the chunks after it are
    /// kept.
    #[test]
    fn an_altered_chunk_is_encoded_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("chunks");
        let want = serde_json::json!({"rows": 9});
        let opt = BuildOptions { chunk: 3, batch: 3 };
        let cancel = AtomicBool::new(false);
        let build = |encoded: &mut Vec<std::ops::Range<usize>>| {
            build_chunks(
                &dir,
                &want,
                (9, 3),
                opt,
                Part::Whole,
                &mut |r| {
                    encoded.push(r.clone());
                    Ok(rows(r))
                },
                &mut |_| {},
                &cancel,
            )
            .unwrap()
            .unwrap()
        };
        build(&mut Vec::new());
        // the same shape, other values, written without its checksum
        let mut other = rows(3..6);
        other[[0, 0]] += 1.0;
        crate::index::dense::write_npy(&chunk_path(&dir, 1), &other).unwrap();
        let mut encoded = Vec::new();
        let out = build(&mut encoded);
        assert_eq!(encoded, vec![3..6]);
        assert_eq!(out, rows(0..9));
        // untouched, everything is reused
        let mut encoded = Vec::new();
        build(&mut encoded);
        assert!(encoded.is_empty(), "{encoded:?}");
    }

    /// The checkpoint's BLAKE3 is read from its record while the file is
    /// unchanged (a record naming another hash for the same stamp is
    /// believed: no hashing), and computed again once the file is
    /// rewritten.
    #[test]
    fn the_checkpoint_hash_is_kept_while_the_file_is_unchanged() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("checkpoints")).unwrap();
        let ck = dir.join(crate::session::BEST_CHECKPOINT);
        crate::util::write_atomic(&ck, b"first").unwrap();
        let h = checkpoint_blake3(dir).unwrap();
        assert_eq!(h, blake3::hash(b"first").to_hex().to_string());
        let record = dir.join(CHECKPOINT_HASH_FILE);
        let mut r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
        let planted = "0".repeat(64);
        r["blake3"] = planted.clone().into();
        std::fs::write(&record, r.to_string()).unwrap();
        assert_eq!(checkpoint_blake3(dir).unwrap(), planted, "not hashed again");
        crate::util::write_atomic(&ck, b"second").unwrap();
        assert_eq!(
            checkpoint_blake3(dir).unwrap(),
            blake3::hash(b"second").to_hex().to_string()
        );
    }

    /// Shards cover every chunk once, in order, and differ by at most one.
    #[test]
    fn shards_cover_every_chunk_once() {
        for chunks in 0..12 {
            for of in 1..6 {
                let all: Vec<usize> = (0..of)
                    .flat_map(|index| Part::Shard { index, of }.chunks(chunks))
                    .collect();
                assert_eq!(all, (0..chunks).collect::<Vec<_>>(), "{chunks} {of}");
                let lens: Vec<usize> = (0..of)
                    .map(|index| Part::Shard { index, of }.chunks(chunks).len())
                    .collect();
                let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(hi - lo <= 1, "{lens:?}");
            }
        }
    }

    /// Two shards encode disjoint chunks into one folder; the merge encodes
    /// nothing and gives the rows of a whole build. A merge with a chunk
    /// missing names it and encodes nothing.
    #[test]
    fn shards_and_their_merge_give_the_whole_build() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("chunks");
        let want = serde_json::json!({"texts_blake3": "t", "rows": 11, "dim": 3});
        let opt = BuildOptions { chunk: 2, batch: 2 };
        let cancel = AtomicBool::new(false);
        let run = |part: Part, encoded: &mut Vec<Range<usize>>| {
            build_chunks(
                &dir,
                &want,
                (11, 3),
                opt,
                part,
                &mut |r| {
                    encoded.push(r.clone());
                    Ok(rows(r))
                },
                &mut |_| {},
                &cancel,
            )
        };
        let mut e0 = Vec::new();
        let s0 = run(Part::Shard { index: 0, of: 2 }, &mut e0)
            .unwrap()
            .unwrap();
        assert_eq!(e0, vec![0..2, 2..4, 4..6]);
        assert_eq!(s0, rows(0..6));
        let e = run(Part::Merge, &mut Vec::new()).unwrap_err().to_string();
        assert!(
            e.contains("3 of the 6 chunks are missing") && e.contains("chunks 3..=5"),
            "{e}"
        );
        let mut e1 = Vec::new();
        let s1 = run(Part::Shard { index: 1, of: 2 }, &mut e1)
            .unwrap()
            .unwrap();
        assert_eq!(e1, vec![6..8, 8..10, 10..11]);
        assert_eq!(s1, rows(6..11));
        let mut none = Vec::new();
        let merged = run(Part::Merge, &mut none).unwrap().unwrap();
        assert!(none.is_empty(), "a merge encodes nothing: {none:?}");
        assert_eq!(merged, rows(0..11));
        // a merge never empties a folder of another checkpoint or collection
        let other = serde_json::json!({"texts_blake3": "u", "rows": 11, "dim": 3});
        let e = build_chunks(
            &dir,
            &other,
            (11, 3),
            opt,
            Part::Merge,
            &mut |r| Ok(rows(r)),
            &mut |_| {},
            &cancel,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("holds no chunks of this checkpoint"),
            "{e}"
        );
        assert!(chunk_path(&dir, 0).is_file(), "the shards' chunks are kept");
    }

    #[test]
    fn shards_share_the_cache_lock_that_a_whole_build_holds_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let a = CacheLock::acquire_shared(tmp.path(), Side::Target).unwrap();
        let b = CacheLock::acquire_shared(tmp.path(), Side::Target).unwrap();
        assert!(CacheLock::acquire(tmp.path(), Side::Target).is_err());
        drop((a, b));
        let w = CacheLock::acquire(tmp.path(), Side::Target).unwrap();
        assert!(CacheLock::acquire_shared(tmp.path(), Side::Target).is_err());
        drop(w);
    }

    #[test]
    fn a_second_lock_on_the_same_cache_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let a = CacheLock::acquire(tmp.path(), Side::Target).unwrap();
        let e = CacheLock::acquire(tmp.path(), Side::Target).unwrap_err();
        assert!(e.to_string().contains("another process is encoding"), "{e}");
        let _b = CacheLock::acquire(tmp.path(), Side::Source).unwrap();
        drop(a);
        CacheLock::acquire(tmp.path(), Side::Target).unwrap();
    }
}
