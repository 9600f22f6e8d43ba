//! The workbench's log file: the screen belongs to the UI, so messages go to
//! `$XDG_STATE_HOME/rosetta/tui.log` (or `~/.local/state/rosetta/tui.log`).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

static LOG: Mutex<Option<(PathBuf, std::fs::File)>> = Mutex::new(None);

/// The default log path.
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("rosetta").join("tui.log")
}

/// Opens (appends to) the log at `path`; later calls to [`info`] write there.
pub fn open(path: PathBuf) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    *LOG.lock().unwrap_or_else(|e| e.into_inner()) = Some((path, f));
    Ok(())
}

/// The path of the open log, if any.
pub fn path() -> Option<PathBuf> {
    LOG.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|(p, _)| p.clone())
}

/// Appends one timestamped line (no-op when no log is open).
pub fn info(msg: &str) {
    let mut g = LOG.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, f)) = g.as_mut() {
        let t = rosetta::session::now_unix();
        let ms = (t.fract() * 1000.0) as u32;
        let stamp = rosetta::session::fmt_utc(t);
        // 2026-11-26T04:03:02.123Z: readable, and sortable as text
        let stamp = stamp.strip_suffix('Z').unwrap_or(&stamp);
        let _ = writeln!(f, "{stamp}.{ms:03}Z {msg}");
    }
}
