//! Small shared helpers: atomic writes, reads of regular files only,
//! content hashes, and text made safe to print on a terminal.

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
    let tmp = temp_written_beside(path, bytes)?;
    let done = std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done?;
    // the rename is durable only once the folder is synced: a file written
    // after this one (a status naming this checkpoint) never survives a
    // crash that this one does not
    sync_dir(dir.unwrap_or(Path::new(".")))
}

/// A temp file beside `path` (`.NAME.tmp.PID.RANDOM`, created exclusively,
/// never through a link) holding `bytes`, synced; removed again when the
/// write fails.
fn temp_written_beside(path: &Path, bytes: &[u8]) -> Result<std::path::PathBuf> {
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
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Writes `bytes` to `path` only when nothing is there yet, all at once:
/// a temp file as in [`write_atomic`], then a hard link to it at `path`,
/// which the system makes only when the name is free. Of several
/// processes writing the same new `path`, exactly one succeeds; the others
/// get an error saying the file exists (`AlreadyExists`), and nothing of
/// theirs is left behind.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    let tmp = temp_written_beside(path, bytes)?;
    let done = std::fs::hard_link(&tmp, path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Error::file(
                path,
                "exists already: another process made it first (nothing written)",
            )
        } else {
            Error::io(path, e)
        }
    });
    let _ = std::fs::remove_file(&tmp);
    done?;
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
/// [`open_append_own`] without reading.
pub fn open_append_nofollow(path: &Path) -> Result<std::fs::File> {
    open_append_own(path, false)
}

/// Opens `path` for appending (and reading, with `read`), created when
/// missing, so that what is appended lands in this file alone: a symbolic
/// link there is an error, so is anything but a regular file (a FIFO is
/// an error at once, never an open that waits for a reader), and a file
/// with other hard links (a session copied with `cp -al`) is first
/// replaced by a copy of itself ([`write_atomic`]), so the other names
/// keep their content.
pub fn open_append_own(path: &Path, read: bool) -> Result<std::fs::File> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::os::unix::io::AsRawFd;
    for first in [true, false] {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(read)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| nofollow_error(path, e))?;
        let m = f.metadata().map_err(|e| Error::io(path, e))?;
        if !m.is_file() {
            return Err(Error::file(
                path,
                "is not a regular file: session files are only written as regular files \
                 (remove it)",
            ));
        }
        if m.nlink() <= 1 {
            // back to blocking writes (a regular file's are anyway), so a
            // child given this file as its output sees an ordinary one
            // SAFETY: fcntl on a descriptor this function owns.
            unsafe {
                let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
                if fl >= 0 {
                    libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
            }
            return Ok(f);
        }
        if first {
            drop(f);
            let bytes = read_regular(path, Links::Refuse, u64::MAX)?;
            write_atomic(path, &bytes)?;
        }
    }
    Err(Error::file(
        path,
        "still has other hard links after it was replaced by a copy of itself: not appended to",
    ))
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

/// Whether a read may go through a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// A link is an error (a file inside a session folder or cache).
    Refuse,
    /// A link is followed (a data file the user named).
    Follow,
}

/// Opens `path` for reading when it is a regular file: a FIFO, a device
/// (`/dev/zero`), a socket or a folder is an error naming the file and its
/// kind, never a read that blocks or never ends. The open itself never
/// blocks (`O_NONBLOCK`, which does not change how a regular file reads).
/// With [`Links::Refuse`] a symbolic link is an error too.
pub fn open_regular(path: &Path, links: Links) -> Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| nofollow_error(path, e))?;
    let t = f.metadata().map_err(|e| Error::io(path, e))?.file_type();
    let kind = if t.is_file() {
        return Ok(f);
    } else if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    };
    Err(Error::file(
        path,
        format!("is {kind}, not a regular file: only regular files are read"),
    ))
}

/// [`open_regular`], with `None` when nothing is at `path` (a dangling
/// link is a link, not a missing file).
pub fn open_regular_if_exists(path: &Path, links: Links) -> Result<Option<std::fs::File>> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => open_regular(path, links).map(Some),
    }
}

/// The bytes of the regular file `path` ([`open_regular`]), at most `limit`
/// of them: a larger file is an error saying the limit, so a file whose
/// kind bounds its size (a status, a config) cannot exhaust memory
/// (`u64::MAX`: a file of any size).
pub fn read_regular(path: &Path, links: Links, limit: u64) -> Result<Vec<u8>> {
    read_limited(open_regular(path, links)?, path, limit)
}

/// [`read_regular`], with `None` when nothing is at `path`.
pub fn read_regular_if_exists(path: &Path, links: Links, limit: u64) -> Result<Option<Vec<u8>>> {
    match open_regular_if_exists(path, links)? {
        Some(f) => read_limited(f, path, limit).map(Some),
        None => Ok(None),
    }
}

fn read_limited(f: std::fs::File, path: &Path, limit: u64) -> Result<Vec<u8>> {
    use std::io::Read;
    let too_big = || {
        Error::file(
            path,
            format!("is larger than {limit} bytes, more than a file of its kind can hold"),
        )
    };
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    if len > limit {
        return Err(too_big());
    }
    let mut buf = Vec::with_capacity(len as usize);
    // a file growing while it is read stops at the limit too
    f.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    if buf.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(buf)
}

/// [`read_regular`] as UTF-8 text; invalid UTF-8 is an error naming the file.
pub fn read_regular_text(path: &Path, links: Links, limit: u64) -> Result<String> {
    String::from_utf8(read_regular(path, links, limit)?)
        .map_err(|e| Error::file(path, format!("not UTF-8 text: {e}")))
}

/// Size limit of a small file whose kind bounds its size: a session's
/// `status.json`, `config.toml`, `meta.json`, a `workspace.toml`.
pub const SMALL_FILE_LIMIT: u64 = 4 << 20;

/// `s` with terminal control sequences removed, so stored text (a run's
/// name, a note, an error recorded in `status.json`, a log line) printed
/// to a terminal cannot move the cursor, retitle the window or write the
/// clipboard (OSC 52): escape sequences (CSI `ESC [ … final`, OSC/DCS/APC/PM
/// `ESC ] … BEL` or `ESC \`, two-byte `ESC x`), their 8-bit forms (C1
/// controls) and every other control character are dropped; newlines and
/// tabs are kept. Plain text comes back borrowed.
pub fn strip_controls(s: &str) -> std::borrow::Cow<'_, str> {
    let keep = |c: char| c == '\n' || c == '\t' || !c.is_control();
    if s.chars().all(keep) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        // the introducer of a sequence, 7-bit (ESC x) or 8-bit (C1)
        let intro = match c {
            '\u{1b}' => it.next(),
            '\u{80}'..='\u{9f}' => Some(char::from_u32(c as u32 - 0x40).unwrap_or('@')),
            c if keep(c) => {
                out.push(c);
                continue;
            }
            _ => continue,
        };
        match intro {
            // CSI: parameters and intermediates up to a final byte
            Some('[') => {
                for c in it.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // strings: OSC, DCS, SOS, PM, APC, ended by BEL, ST or ESC \
            Some(']' | 'P' | 'X' | '^' | '_') => {
                while let Some(c) = it.next() {
                    if c == '\u{7}' || c == '\u{9c}' {
                        break;
                    }
                    if c == '\u{1b}' {
                        if it.peek() == Some(&'\\') {
                            it.next();
                        }
                        break;
                    }
                }
            }
            // a two-byte sequence (ESC 7, ESC c...) or a lone ESC at the end
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
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
    let f = open_regular(path, Links::Refuse)?;
    h.update_reader(f).map_err(|e| Error::io(path, e))?;
    Ok(h.finalize().to_hex().to_string())
}

/// What identifies a regular file's bytes without reading them (never
/// through a link): its name, size, device and inode, modification and
/// change times (the change time cannot be set back; a file rewritten by
/// temp file + rename is a new inode). `None` when `path` is not a regular
/// file.
pub fn file_stamp(path: &Path) -> Option<serde_json::Value> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    m.is_file().then(|| {
        serde_json::json!({
            "file": path.file_name().map(|f| f.to_string_lossy().into_owned()),
            "len": m.len(),
            "dev": m.dev(),
            "ino": m.ino(),
            "mtime": [m.mtime(), m.mtime_nsec()],
            "ctime": [m.ctime(), m.ctime_nsec()],
        })
    })
}

/// [`hash_file`] of `path`, read from the small JSON file `record` while
/// that names the same file unchanged ([`file_stamp`]), else computed and
/// recorded there (temp file + rename; a record that cannot be written, as
/// in a read-only folder, is no error: the file is hashed again next
/// time). The stamp is taken before hashing, so a file changed meanwhile is
/// hashed again next time. A record is believed only for the exact stamp:
/// any write to the file changes its change time, and a replaced file is
/// another inode.
pub fn hash_file_recorded(path: &Path, record: &Path) -> Result<String> {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Recorded {
        stamp: serde_json::Value,
        blake3: String,
    }
    let stamp = file_stamp(path);
    let kept = read_regular(record, Links::Refuse, SMALL_FILE_LIMIT)
        .ok()
        .and_then(|b| serde_json::from_slice::<Recorded>(&b).ok());
    if let (Some(stamp), Some(r)) = (&stamp, kept) {
        let hex = r.blake3.len() == 64 && r.blake3.bytes().all(|b| b.is_ascii_hexdigit());
        if r.stamp == *stamp && hex {
            return Ok(r.blake3);
        }
    }
    let blake3 = hash_file(path)?;
    if let Some(stamp) = stamp.filter(|s| file_stamp(path).as_ref() == Some(s)) {
        if let Ok(b) = serde_json::to_vec(&Recorded {
            stamp,
            blake3: blake3.clone(),
        }) {
            let _ = write_atomic(record, &b);
        }
    }
    Ok(blake3)
}

/// Hands the whole pages of bytes `bytes` of the read-only file map `map`
/// back to the kernel (`MADV_DONTNEED`): they leave the process's resident
/// memory and are read again, with the same bytes, from the page cache or
/// the file when next touched. Pages only partly inside `bytes` are kept.
pub fn release_mapped(map: &memmap2::Mmap, bytes: std::ops::Range<usize>) {
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => 4096,
    };
    let base = map.as_ptr() as usize;
    let first = (base + bytes.start.min(map.len())).div_ceil(page) * page;
    let last = (base + bytes.end.min(map.len())) / page * page;
    if last > first {
        // SAFETY: the range lies inside a read-only map of a file; its
        // pages dropped are faulted in again from the file, unchanged.
        let _ = unsafe {
            map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                first - base,
                last - first,
            )
        };
    }
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

/// `WHAT 1200/31084 (3.9%), 16.2 texts/s, ETA 30m41s` (the rate and ETA
/// once known): how an encoding of texts goes, as every front-end says it.
pub fn progress_line(
    what: &str,
    done: usize,
    total: usize,
    texts_per_s: Option<f64>,
    eta_s: Option<f64>,
) -> String {
    let pct = 100.0 * done as f64 / total.max(1) as f64;
    let mut s = format!("{what} {done}/{total} ({pct:.1}%)");
    if let (Some(r), Some(e)) = (texts_per_s, eta_s) {
        s.push_str(&format!(", {r:.1} texts/s, ETA {}", fmt_duration(e)));
    }
    s
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_stripped_and_plain_text_kept() {
        let osc52 = "x\u{1b}]52;c;ZWNobyBoaQ==\u{7}y";
        assert_eq!(strip_controls(osc52), "xy");
        assert_eq!(strip_controls("a\u{1b}]0;title\u{1b}\\b"), "ab");
        assert_eq!(strip_controls("\u{1b}[31mred\u{1b}[0m"), "red");
        assert_eq!(strip_controls("\u{9b}2Jc\u{9d}8;;x\u{9c}d"), "cd");
        assert_eq!(
            strip_controls("bell\u{7} cr\r bs\u{8} esc\u{1b}"),
            "bell cr bs esc"
        );
        assert_eq!(strip_controls("\u{1b}7saved"), "saved");
        let plain = "línea uno\n\tdos – ✓";
        assert!(matches!(strip_controls(plain), std::borrow::Cow::Borrowed(s) if s == plain));
    }

    #[test]
    fn only_regular_files_are_read_within_their_limit() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("status.json");
        std::fs::write(&f, b"12345").unwrap();
        assert_eq!(read_regular(&f, Links::Refuse, 5).unwrap(), b"12345");
        let e = read_regular(&f, Links::Refuse, 4).unwrap_err().to_string();
        assert!(
            e.contains("status.json") && e.contains("larger than 4"),
            "{e}"
        );
        // a FIFO: an error at once, not a read that waits for a writer
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = read_regular(&fifo, Links::Follow, 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("FIFO") && e.contains("fifo"), "{e}");
        // a device, directly or through a link
        let e = read_regular(Path::new("/dev/zero"), Links::Follow, u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(e.contains("device"), "{e}");
        let link = dir.path().join("config.toml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_regular(&link, Links::Follow, u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(e.contains("device"), "{e}");
        let e = read_regular(&link, Links::Refuse, u64::MAX)
            .unwrap_err()
            .to_string();
        assert!(e.contains("symbolic link"), "{e}");
        let e = read_regular(dir.path(), Links::Follow, 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("folder"), "{e}");
        assert!(
            read_regular_if_exists(&dir.path().join("nope"), Links::Refuse, 1)
                .unwrap()
                .is_none()
        );
    }
}

/// The candidate `word` was most likely meant as: a known alias of a
/// common spelling (`learning_rate` for `lr`, `batch_size` for `batch`…)
/// when that candidate exists, otherwise the nearest candidate by edit
/// distance within a third of the word's length (at least 1). `None` when
/// nothing is near. For "did you mean" in errors.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    const ALIASES: &[(&str, &str)] = &[
        ("learning_rate", "lr"),
        ("learning-rate", "lr"),
        ("learningrate", "lr"),
        ("batch_size", "batch"),
        ("batchsize", "batch"),
        ("epoch", "epochs"),
        ("num_epochs", "epochs"),
        ("n_epochs", "epochs"),
        ("dimension", "dim"),
        ("dimensions", "dim"),
        ("dims", "dim"),
        ("embedding_dim", "dim"),
        ("hidden_size", "dim"),
        ("temp", "temperature"),
        ("tau", "temperature"),
        ("wd", "weight_decay"),
        ("max_length", "max_len"),
        ("max_seq_length", "max_len"),
        ("optimizer", "optim"),
        ("optimiser", "optim"),
    ];
    let w = word.trim().to_lowercase();
    if let Some(hit) = ALIASES
        .iter()
        .filter(|(a, _)| *a == w)
        .find_map(|(_, k)| candidates.iter().find(|c| *c == k))
    {
        return Some(hit);
    }
    let limit = (w.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(&w, &c.to_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The entry of `folder` nearest to `name` ([`closest`]), folders only when
/// `dirs_only`; `None` when nothing is near or the folder cannot be read.
/// For "did you mean" after a mistyped path.
pub fn closest_entry(folder: &Path, name: &str, dirs_only: bool) -> Option<String> {
    let entries: Vec<String> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| !dirs_only || e.path().is_dir())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    let names: Vec<&str> = entries.iter().map(String::as_str).collect();
    closest(name, &names).map(str::to_string)
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod closest_tests {
    use super::closest;

    #[test]
    fn typos_and_common_spellings_find_their_key() {
        let models = ["cl-lsi", "s2net", "xcnn", "bae", "encoder"];
        assert_eq!(closest("s2nett", &models), Some("s2net"));
        assert_eq!(closest("encodr", &models), Some("encoder"));
        assert_eq!(closest("xyzzy", &models), None);
        let keys = ["batch", "dim", "epochs", "lr", "weight_decay"];
        assert_eq!(closest("learning_rate", &keys), Some("lr"));
        assert_eq!(closest("batch_size", &keys), Some("batch"));
        assert_eq!(closest("epoch", &keys), Some("epochs"));
        assert_eq!(closest("weight_decy", &keys), Some("weight_decay"));
        // an alias whose key the model lacks suggests nothing
        assert_eq!(closest("temp", &keys), None);
    }
}
