//! Small shared helpers: atomic writes and content hashes.

use std::io::Write;
use std::path::Path;

use crate::{Error, Result};

/// Writes `bytes` to `path` so that readers see the old file or the new one,
/// never a partial one: a temp file in the same folder, fsync, then rename.
/// The temp file (`.NAME.tmp.PID.RANDOM`) is created exclusively, never
/// through a symbolic link, and removed when the write fails;
/// [`sweep_temp_files`] removes those a killed process left.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(d) = dir {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let name = path
        .file_name()
        .ok_or_else(|| Error::file(path, "not a file path"))?
        .to_string_lossy();
    let (tmp, mut f) = loop {
        let tmp = path.with_file_name(format!(
            ".{name}.tmp.{}.{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        match create_new_nofollow(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::io(&tmp, e)),
        }
    };
    let written = f
        .write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(&tmp, e));
    drop(f);
    let done = written.and_then(|_| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e)));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done?;
    // the rename is durable only once the folder is synced: a file written
    // after this one (a status naming this checkpoint) never survives a
    // crash that this one does not
    sync_dir(dir.unwrap_or(Path::new(".")))
}

/// Bytes of memory this process may use at most: the machine's
/// (`MemTotal` of `/proc/meminfo`) or, when lower, its control group's limit
/// (`memory.max`, cgroup v2; `memory.limit_in_bytes`, v1). `None` when
/// neither can be read.
pub fn memory_limit() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|kb| kb.saturating_mul(1024))
    });
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .filter_map(|v| v.trim().parse::<u64>().ok())
    .min();
    match (total, cgroup) {
        (Some(t), Some(c)) => Some(t.min(c)),
        (t, c) => t.or(c),
    }
}

/// `3.2 GiB`, `512.0 MiB`.
pub fn fmt_bytes(b: f64) -> String {
    const K: f64 = 1024.0;
    match b {
        b if b >= K * K * K * K => format!("{:.1} TiB", b / (K * K * K * K)),
        b if b >= K * K * K => format!("{:.1} GiB", b / (K * K * K)),
        b if b >= K * K => format!("{:.1} MiB", b / (K * K)),
        b => format!("{:.0} KiB", b / K),
    }
}

/// Fsyncs a folder (its entries: names created or renamed in it). A file
/// system that cannot sync folders (`EINVAL`) is not an error.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let f = std::fs::File::open(dir).map_err(|e| Error::io(dir, e))?;
    match f.sync_all() {
        Err(e) if e.raw_os_error() != Some(libc::EINVAL) => Err(Error::io(dir, e)),
        _ => Ok(()),
    }
}

/// Creates `path` for writing: it must not exist (`O_EXCL`), and a symbolic
/// link there is never followed (`O_NOFOLLOW`).
pub fn create_new_nofollow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens `path` for appending (created when missing) without following a
/// symbolic link: a link planted in a session folder (`log.txt`,
/// `metrics.jsonl`) is an error, never a way to write elsewhere.
pub fn open_append_nofollow(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| nofollow_error(path, e))
}

/// Opens `path` for reading without following a symbolic link.
pub fn open_read_nofollow(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| nofollow_error(path, e))
}

fn nofollow_error(path: &Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        Error::file(
            path,
            "is a symbolic link: session files are never written or read through links",
        )
    } else {
        Error::io(path, e)
    }
}

/// Removes the temporary files (`.NAME.tmp.PID…`) that [`write_atomic`]
/// left in `dir` when its process died (the PID is gone, or is this
/// process, which has no write in flight when it calls this). Returns how
/// many were removed. Symbolic links are removed, never followed.
pub fn sweep_temp_files(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix('.') else {
            continue;
        };
        let Some((_, tail)) = rest.split_once(".tmp.") else {
            continue;
        };
        let pid: Option<u32> = tail.split('.').next().and_then(|p| p.parse().ok());
        let Some(pid) = pid else { continue };
        let is_file = e.file_type().is_ok_and(|t| t.is_file() || t.is_symlink());
        let dead = pid == me || !pid_alive(pid, None);
        if is_file && dead && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Hex BLAKE3 hash of a file's bytes.
pub fn hash_file(path: &Path) -> Result<String> {
    let mut h = blake3::Hasher::new();
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    h.update_reader(f).map_err(|e| Error::io(path, e))?;
    Ok(h.finalize().to_hex().to_string())
}

/// Whether process `pid` is alive (not a zombie) and, when `start` is given,
/// is the same process (same start time), not a later one with a reused pid.
pub fn pid_alive(pid: u32, start: Option<u64>) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid as i32, 0) };
    if r != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EPERM) {
            return false;
        }
    }
    match proc_stat(pid) {
        Some((state, st)) => state != 'Z' && state != 'X' && start.is_none_or(|s| s == st),
        None => true, // no /proc: trust kill()
    }
}

/// Start time (clock ticks since boot) of process `pid`, from `/proc`.
pub fn process_start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|(_, t)| t)
}

fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid ..."; comm may hold spaces and parentheses.
    let rest = &s[s.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // field 22 of the whole line is starttime; rest starts at field 3.
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// A duration for people: `12s`, `3m05s`, `1h02m`; `—` for a negative or
/// non-finite number of seconds.
pub fn fmt_duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "—".into();
    }
    let s = secs.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
