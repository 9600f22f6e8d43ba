//! A run's details (settings, figures, checkpoints, the end of its log) and
//! the log readers behind them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::session::metrics::{Curves, MetricsTail};
use crate::session::{read_status, State, CHECKPOINT_DIR, CONFIG_FILE, LOG_FILE, METRICS_FILE};
use crate::{Error, Result};

use super::labels::best_figures;
use super::meta::{check_session_dir, folder_name, RunMeta};

/// A checkpoint file of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointFile {
    /// File name (`best.safetensors`).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Last modification, UTC.
    pub modified: String,
}

/// Everything the detail pane shows about one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunDetail {
    /// Folder name.
    pub id: String,
    /// The session folder.
    pub dir: PathBuf,
    /// Its meta.
    pub meta: RunMeta,
    /// `config.toml` as written (or why it cannot be read).
    pub config: String,
    /// The last lines of `log.txt` (empty when there is none).
    pub log_tail: Vec<String>,
    /// Checkpoints present.
    pub checkpoints: Vec<CheckpointFile>,
    /// Best figures per figure name: (value, epoch; for the loss, step),
    /// from the validation records of `metrics.jsonl`.
    pub best: BTreeMap<String, (f64, f64)>,
    /// State and, for a failed job, its error.
    pub state: String,
    /// Malformed lines of `metrics.jsonl` (path:line: message).
    pub problems: Vec<String>,
}

/// The details of session folder `dir`: config, the last `log_lines` lines
/// of its log, checkpoints, best figures and state.
pub fn detail(dir: &Path, log_lines: usize) -> Result<RunDetail> {
    check_session_dir(dir)?;
    let config = match crate::util::read_regular_text(
        &dir.join(CONFIG_FILE),
        crate::util::Links::Refuse,
        crate::util::SMALL_FILE_LIMIT,
    ) {
        Ok(t) => t,
        Err(e) => format!("(cannot read {CONFIG_FILE}: {e})"),
    };
    let log_tail = log_tail(dir, log_lines)?;
    let mut checkpoints = Vec::new();
    let ck_dir = dir.join(CHECKPOINT_DIR);
    let ck_link = std::fs::symlink_metadata(&ck_dir).is_ok_and(|m| m.file_type().is_symlink());
    let rd = if ck_link {
        None // never listed through a link (`check_no_links` names it)
    } else {
        std::fs::read_dir(&ck_dir).ok()
    };
    if let Some(rd) = rd {
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if !md.is_file() || name.starts_with('.') {
                continue;
            }
            let modified = md
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| crate::session::fmt_utc(d.as_secs_f64()))
                .unwrap_or_default();
            checkpoints.push(CheckpointFile {
                name,
                bytes: md.len(),
                modified,
            });
        }
    }
    checkpoints.sort_by(|a, b| a.name.cmp(&b.name));
    let mut tail = MetricsTail::new(dir.join(METRICS_FILE));
    let mut batch = tail.poll()?;
    let rest = tail.finish();
    batch.records.extend(rest.records);
    batch.errors.extend(rest.errors);
    let curves = Curves::from_records(&batch.records);
    let state = match read_status(dir) {
        Ok(st) => {
            let mut s = st.effective_state().as_str().to_string();
            if st.is_stale() {
                s.push_str(" (stale: its process is gone)");
            }
            if let (State::Failed | State::Cancelled, Some(e)) = (st.effective_state(), &st.error) {
                s.push_str(&format!(": {e}"));
            }
            s
        }
        Err(e) => format!("unknown ({e})"),
    };
    Ok(RunDetail {
        id: folder_name(dir),
        dir: dir.to_path_buf(),
        meta: RunMeta::read(dir)?,
        config,
        log_tail,
        checkpoints,
        best: best_figures(&curves),
        state,
        problems: crate::session::check_no_links(dir)
            .err()
            .into_iter()
            .chain(batch.errors)
            .map(|e| e.to_string())
            .collect(),
    })
}

/// The last `n` lines of session `dir`'s `log.txt` (none before the job
/// writes one); progress-bar frames are reduced to their last.
pub fn log_tail(dir: &Path, n: usize) -> Result<Vec<String>> {
    check_session_dir(dir)?;
    tail_lines(&dir.join(LOG_FILE), n)
}

/// The complete lines session `dir`'s `log.txt` holds from byte `offset`
/// on (invalid UTF-8 replaced, each progress-bar line reduced to its last
/// frame), and the offset after the last of them: a line still being
/// written is left for the next call, unless `to_end` (the job is over:
/// its unterminated last line is all there will be). A log shorter than
/// `offset` (started anew) is read from its start; a missing log has no
/// lines.
pub fn log_since(dir: &Path, offset: u64, to_end: bool) -> Result<(Vec<String>, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    check_session_dir(dir)?;
    let path = dir.join(LOG_FILE);
    let Some(mut f) = crate::util::open_regular_if_exists(&path, crate::util::Links::Refuse)?
    else {
        return Ok((Vec::new(), 0));
    };
    let len = f.metadata().map_err(|e| Error::io(&path, e))?.len();
    let from = if len < offset { 0 } else { offset };
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io(&path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| Error::io(&path, e))?;
    let end = match buf.iter().rposition(|&b| b == b'\n') {
        Some(nl) if !to_end || nl + 1 == buf.len() => nl,
        _ if to_end && !buf.is_empty() => buf.len(),
        _ => return Ok((Vec::new(), from)),
    };
    let text = String::from_utf8_lossy(&buf[..end]);
    let lines = text
        .split('\n')
        .map(|l| last_frame(l).to_string())
        .collect();
    Ok((lines, from + (end as u64 + 1).min(buf.len() as u64)))
}

/// A line as a terminal shows it: progress bars redraw with carriage
/// returns, the last frame stays.
fn last_frame(l: &str) -> &str {
    let l = l.strip_suffix('\r').unwrap_or(l);
    l.rsplit('\r').next().unwrap_or(l)
}

/// The last `n` lines of a text file (invalid UTF-8 replaced); a missing
/// file has none; a symbolic link or anything but a regular file is an
/// error.
pub fn tail_lines(path: &Path, n: usize) -> Result<Vec<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(mut f) = crate::util::open_regular_if_exists(path, crate::util::Links::Refuse)? else {
        return Ok(Vec::new());
    };
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    // enough bytes for n lines of a log, without reading a huge file whole
    let want = (n as u64 * 400).max(4096).min(len);
    f.seek(SeekFrom::Start(len - want))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<&str> = text.lines().collect();
    if want < len && !lines.is_empty() {
        lines.remove(0); // cut in the middle
    }
    let start = lines.len().saturating_sub(n);
    Ok(lines[start..]
        .iter()
        .map(|l| last_frame(l).to_string())
        .collect())
}
