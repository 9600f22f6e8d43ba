//! Small shared helpers: atomic writes and content hashes.

use std::io::Write;
use std::path::Path;

use crate::{Error, Result};

/// Writes `bytes` to `path` so that readers see the old file or the new one,
/// never a partial one: a temp file in the same folder, fsync, then rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(d) = dir {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    let name = path
        .file_name()
        .ok_or_else(|| Error::file(path, "not a file path"))?
        .to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.tmp.{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(bytes).map_err(|e| Error::io(&tmp, e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    Ok(())
}

/// Hex BLAKE3 hash of a file's bytes.
pub fn hash_file(path: &Path) -> Result<String> {
    let mut h = blake3::Hasher::new();
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    h.update_reader(f).map_err(|e| Error::io(path, e))?;
    Ok(h.finalize().to_hex().to_string())
}
