//! Reading text files line by line with errors that name file, line and byte.

use std::io::Read;
use std::path::Path;

use crate::{Error, Result};

/// The bytes of a data file as they are on disk (never gunzipped), read
/// only when it is a regular file (links followed): a FIFO or a device
/// such as `/dev/zero` is an error naming it, never a read without end.
pub fn read_plain_bytes(path: &Path) -> Result<Vec<u8>> {
    let mut raw = Vec::new();
    crate::util::open_regular(path, crate::util::Links::Follow)?
        .read_to_end(&mut raw)
        .map_err(|e| Error::io(path, e))?;
    Ok(raw)
}

/// Reads a whole file (gunzipped when it ends in `.gz`); only a regular
/// file is read (a FIFO or a device such as `/dev/zero` is an error, never
/// a read without end).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let raw = read_plain_bytes(path)?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| Error::file(path, format!("bad gzip data: {e}")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// The lines of a UTF-8 text file, without line endings (`\n` or `\r\n`), a
/// leading BOM removed. Invalid UTF-8 is an error naming the line and the byte
/// offset in the file.
pub fn read_lines(path: &Path) -> Result<Vec<String>> {
    let bytes = read_bytes(path)?;
    let mut lines = Vec::new();
    let mut offset = 0usize;
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    let bom = bytes.len() - body.len();
    for (n, raw) in body.split(|b| *b == b'\n').enumerate() {
        let start = offset;
        offset += raw.len() + 1;
        if n > 0 && start == body.len() && raw.is_empty() {
            break; // the final newline
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        match std::str::from_utf8(raw) {
            Ok(s) => lines.push(s.to_string()),
            Err(e) => {
                return Err(Error::parse(
                    path,
                    n + 1,
                    format!(
                        "invalid UTF-8 at byte offset {} of the file",
                        bom + start + e.valid_up_to()
                    ),
                ))
            }
        }
    }
    if body.is_empty() {
        lines.clear();
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_bad_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        std::fs::write(&p, b"\xEF\xBB\xBFone\r\ntwo\n").unwrap();
        assert_eq!(read_lines(&p).unwrap(), vec!["one", "two"]);
        std::fs::write(&p, b"ok\nab\xFFc\n").unwrap();
        let e = read_lines(&p).unwrap_err().to_string();
        assert!(e.contains(":2:") && e.contains("byte offset 5"), "{e}");
        std::fs::write(&p, b"").unwrap();
        assert!(read_lines(&p).unwrap().is_empty());
        std::fs::write(&p, b"a\n\nb").unwrap();
        assert_eq!(read_lines(&p).unwrap(), vec!["a", "", "b"]);
    }
}
