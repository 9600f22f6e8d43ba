//! Deleting a session: its own files and nothing else.

use std::path::{Path, PathBuf};

use crate::session::files::{is_chunk_file, is_own_file, INDEX_CHUNK_DIRS, INDEX_DIR, INDEX_FILES};
use crate::session::{read_status, SessionConfig, CHECKPOINT_DIR};
use crate::{Error, Result};

use super::meta::check_session_dir;

/// Deletes session folder `dir`: its own files ([`crate::session::SESSION_FILES`],
/// the checkpoints, an index build's folder ([`INDEX_DIR`]: its status, log
/// and chunks), temporary files of its writes) and then the folder.
/// Refused, with nothing deleted, for a folder that is not a session
/// written by Rosetta (its `config.toml` and `status.json` must parse as a
/// session's), for a folder holding anything else (a file or folder a
/// session does not write: it is not ours to delete), and for a job that
/// may be running: its status is not final and its process is alive, or
/// someone holds its lock or the lock of its collection's cache (an index
/// build: cancel it first). Refused too, before anything
/// is looked at, for a path [`session_folder_path`] refuses (a link to a
/// folder, with or without a trailing slash, or a path ending in `.` or
/// `..`). Links inside the folder are removed, never followed.
pub fn delete(dir: &Path) -> Result<()> {
    let dir: &Path = &session_folder_path(dir, "deleted")?;
    let not_session = |e: Error| {
        Error::file(
            dir,
            format!("not a Rosetta session folder ({e}); nothing deleted"),
        )
    };
    check_session_dir(dir)?;
    SessionConfig::read(dir).map_err(not_session)?;
    let st = read_status(dir).map_err(not_session)?;
    if !st.state.is_final() && st.process_alive() {
        return Err(Error::file(
            dir,
            format!(
                "the job is {} (pid {}): cancel it before deleting the session",
                st.state, st.pid
            ),
        ));
    }
    if crate::session::lock_is_held(dir) {
        return Err(Error::file(
            dir,
            "a process holds the session's lock (its job is running): cancel it before deleting",
        ));
    }
    if let Some(lock) = held_cache_lock(dir) {
        return Err(Error::file(
            &lock,
            "a process is encoding the session's collection (an `rosetta index build`, or a \
             search opening it) and holds this lock: cancel it (`rosetta index cancel`) or let \
             it end before deleting; nothing deleted",
        ));
    }
    // everything to remove, listed before anything is removed
    let ck_dir = dir.join(CHECKPOINT_DIR);
    let mut files = Vec::new();
    let mut foreign = Vec::new();
    let mut ck_is_dir = false;
    for (folder, known) in [
        (dir, crate::session::SESSION_FILES),
        (ck_dir.as_path(), crate::session::CHECKPOINT_FILES),
    ] {
        if folder == ck_dir && !ck_is_dir {
            break;
        }
        for e in std::fs::read_dir(folder).map_err(|e| Error::io(folder, e))? {
            let e = e.map_err(|e| Error::io(folder, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let t = e.file_type().map_err(|x| Error::io(e.path(), x))?;
            if folder == dir && name == CHECKPOINT_DIR && t.is_dir() {
                ck_is_dir = true;
            } else if (t.is_file() || t.is_symlink()) && is_own_file(&name, known) {
                files.push(e.path());
            } else {
                foreign.push(e.path());
            }
        }
    }
    // an index build's folder: its status, log and chunk folders
    let mut folders = Vec::new();
    if let Some(index) = foreign
        .iter()
        .position(|p| p == &dir.join(INDEX_DIR) && p.is_dir() && !p.is_symlink())
    {
        let index = foreign.remove(index);
        for e in std::fs::read_dir(&index).map_err(|e| Error::io(&index, e))? {
            let e = e.map_err(|e| Error::io(&index, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let t = e.file_type().map_err(|x| Error::io(e.path(), x))?;
            if t.is_dir() && INDEX_CHUNK_DIRS.contains(&name.as_str()) {
                let chunks = e.path();
                for c in std::fs::read_dir(&chunks).map_err(|e| Error::io(&chunks, e))? {
                    let c = c.map_err(|e| Error::io(&chunks, e))?;
                    let n = c.file_name().to_string_lossy().into_owned();
                    let t = c.file_type().map_err(|x| Error::io(c.path(), x))?;
                    if (t.is_file() || t.is_symlink()) && is_chunk_file(&n) {
                        files.push(c.path());
                    } else {
                        foreign.push(c.path());
                    }
                }
                folders.push(chunks);
            } else if (t.is_file() || t.is_symlink()) && is_own_file(&name, INDEX_FILES) {
                files.push(e.path());
            } else {
                foreign.push(e.path());
            }
        }
        folders.push(index);
    }
    if !foreign.is_empty() {
        foreign.sort();
        let shown: Vec<String> = foreign
            .iter()
            .take(5)
            .map(|p| p.display().to_string())
            .collect();
        return Err(Error::file(
            dir,
            format!(
                "holds {} entr{} a session does not write ({}{}): not deleting what is not ours; \
                 nothing deleted",
                foreign.len(),
                if foreign.len() == 1 { "y" } else { "ies" },
                shown.join(", "),
                if foreign.len() > 5 { ", …" } else { "" }
            ),
        ));
    }
    for f in &files {
        std::fs::remove_file(f).map_err(|e| Error::io(f, e))?;
    }
    // the chunk folders before the index folder holding them
    for f in &folders {
        std::fs::remove_dir(f).map_err(|e| Error::io(f, e))?;
    }
    if ck_is_dir {
        std::fs::remove_dir(&ck_dir).map_err(|e| Error::io(&ck_dir, e))?;
    }
    std::fs::remove_dir(dir).map_err(|e| Error::io(dir, e))
}

/// The session folder `dir` names, as a path with no symbolic link in it:
/// its parent canonicalised (links above the session folder, a sessions
/// root on another disk, are the user's choice and are resolved) and its
/// own name, which must be a plain name of a folder that is not a symbolic
/// link. A path whose last component is `.` or `..` (`rep/real/.`), that
/// holds `..` anywhere, or whose last component is a link (`rep/link`,
/// `rep/link/`: a trailing slash would make the system follow it) is an
/// error naming the path and saying what to give instead, with `what`
/// (`deleted`, `touched`) said as not done.
pub fn session_folder_path(dir: &Path, what: &str) -> Result<PathBuf> {
    use std::path::Component;
    let raw = dir.as_os_str().as_encoded_bytes();
    let trimmed = {
        let mut t = raw;
        while t.len() > 1 && t.ends_with(b"/") {
            t = &t[..t.len() - 1];
        }
        t
    };
    let ends_dot = trimmed == b"." || trimmed.ends_with(b"/.");
    if ends_dot || dir.components().any(|c| c == Component::ParentDir) {
        return Err(Error::file(
            dir,
            format!(
                "a session folder is named by a path without `.` or `..` at its end or `..`                  inside (give the folder's own path, e.g. sessions/NAME); nothing {what}"
            ),
        ));
    }
    let name = match dir.components().next_back() {
        Some(Component::Normal(n)) => n.to_os_string(),
        _ => {
            return Err(Error::file(
                dir,
                format!("does not name a session folder; nothing {what}"),
            ))
        }
    };
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let parent = std::fs::canonicalize(parent).map_err(|e| Error::io(parent, e))?;
    let path = parent.join(&name);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::file(
                dir,
                format!("not a session folder (nothing is there); nothing {what}"),
            )
        } else {
            Error::io(dir, e)
        }
    })?;
    if meta.file_type().is_symlink() {
        return Err(Error::file(
            dir,
            format!(
                "is a symbolic link (to {}): give the session folder itself, not a link to it;                  nothing {what}",
                std::fs::read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into())
            ),
        ));
    }
    if !meta.is_dir() {
        return Err(Error::file(dir, format!("is not a folder; nothing {what}")));
    }
    Ok(path)
}

/// The lock file of a collection cache of session `dir`
/// (`doc-embeddings.SIDE.lock`) that a live process holds (a `flock`): an
/// index build or a search encoding the collection. A lock file that is
/// not a regular file is not looked into (it is foreign to the session).
fn held_cache_lock(dir: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    ["doc-embeddings.source.lock", "doc-embeddings.target.lock"]
        .into_iter()
        .map(|n| dir.join(n))
        .find(|p| {
            let Ok(f) = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(p)
            else {
                return false;
            };
            if !f.metadata().is_ok_and(|m| m.is_file()) {
                return false;
            }
            // SAFETY: flock on a valid open descriptor (released when `f` drops).
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            r != 0
        })
}
