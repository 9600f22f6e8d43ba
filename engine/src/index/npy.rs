//! `.npy` files of 2-D `float32` matrices: their header read and checked
//! before anything is allocated, reading, writing. A leaf of `index/`: the
//! dense index ([`super::dense`]) and the mapped tables ([`super::mapped`])
//! both read headers here, without importing each other.

use std::path::Path;

use ndarray::Array2;

use crate::{Error, Result};

/// Reads a 2-D `float32` `.npy` file (C or Fortran order), following a
/// symbolic link: [`read_npy_checked`] with no shape expected.
pub fn read_npy(path: &Path) -> Result<Array2<f32>> {
    read_npy_checked(path, crate::util::Links::Follow, None)
}

/// The shape a 2-D `.npy` header declares and the bytes its header takes,
/// read from `r` (at its start); the header must declare `float32`
/// (`<f4`, `>f4`) and two dimensions.
pub(crate) fn npy_header(r: &mut impl std::io::Read, path: &Path) -> Result<((usize, usize), u64)> {
    let bad = |m: String| Error::file(path, format!("not a 2-D float32 .npy matrix: {m}"));
    let mut pre = [0u8; 10];
    r.read_exact(&mut pre)
        .map_err(|_| bad("shorter than an .npy header".into()))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(bad("no .npy magic number".into()));
    }
    let (len, pre_len) = match pre[6] {
        1 => (u16::from_le_bytes([pre[8], pre[9]]) as u64, 10u64),
        2 | 3 => {
            let mut two = [0u8; 2];
            r.read_exact(&mut two)
                .map_err(|_| bad("shorter than an .npy header".into()))?;
            (
                u32::from_le_bytes([pre[8], pre[9], two[0], two[1]]) as u64,
                12,
            )
        }
        v => return Err(bad(format!("unknown .npy version {v}"))),
    };
    if len > 1 << 20 {
        return Err(bad(format!("a header of {len} bytes")));
    }
    let mut h = vec![0u8; len as usize];
    r.read_exact(&mut h)
        .map_err(|_| bad("shorter than its header says".into()))?;
    let h = String::from_utf8_lossy(&h);
    let descr = h
        .split("'descr':")
        .nth(1)
        .and_then(|d| d.split('\'').nth(1))
        .unwrap_or("");
    if !matches!(descr, "<f4" | ">f4" | "=f4") {
        return Err(bad(format!("element type {descr:?}, not float32")));
    }
    let dims: Vec<&str> = h
        .split("'shape':")
        .nth(1)
        .and_then(|t| t.split_once('('))
        .and_then(|(_, t)| t.split_once(')'))
        .map(|(d, _)| {
            d.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let dims: Vec<usize> = dims
        .iter()
        .map(|d| d.parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| bad(format!("shape {dims:?} is not a list of sizes")))?;
    match dims[..] {
        [r, c] => Ok(((r, c), pre_len + len)),
        _ => Err(bad(format!("{} dimensions, not 2", dims.len()))),
    }
}

/// Reads a 2-D `float32` `.npy` file (C or Fortran order) that is a
/// regular file ([`crate::util::open_regular`]; with [`Links::Refuse`], a
/// link is an error), checking before anything is allocated that the shape
/// its header declares is the one `expect`ed (when given) and that the
/// file holds exactly that many values: a header claiming (2⁴⁰, 384) is an
/// error naming the file, never a petabyte allocation.
///
/// [`Links::Refuse`]: crate::util::Links::Refuse
pub fn read_npy_checked(
    path: &Path,
    links: crate::util::Links,
    expect: Option<(usize, usize)>,
) -> Result<Array2<f32>> {
    use ndarray_npy::ReadNpyExt;
    use std::io::{Seek, SeekFrom};
    let mut f = crate::util::open_regular(path, links)?;
    let file_len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    let (shape, header) = npy_header(&mut std::io::BufReader::new(&mut f), path)?;
    if let Some(want) = expect.filter(|w| *w != shape) {
        return Err(Error::file(
            path,
            format!(
                "declares shape {shape:?}, not the {want:?} expected (a stale or foreign cache: \
                 delete it to rebuild it)"
            ),
        ));
    }
    let data = (shape.0 as u64)
        .checked_mul(shape.1 as u64)
        .and_then(|n| n.checked_mul(4));
    if data.and_then(|d| d.checked_add(header)) != Some(file_len) {
        return Err(Error::file(
            path,
            format!(
                "its header declares shape {shape:?} of float32 but the file holds {file_len} \
                 bytes (truncated or forged: delete it, it is rebuilt or must be written again)"
            ),
        ));
    }
    f.seek(SeekFrom::Start(0)).map_err(|e| Error::io(path, e))?;
    let a = Array2::<f32>::read_npy(std::io::BufReader::new(f))
        .map_err(|e| Error::file(path, format!("not a 2-D float32 .npy matrix: {e}")))?;
    Ok(if a.is_standard_layout() {
        a
    } else {
        a.as_standard_layout().into_owned()
    })
}

/// Writes a matrix as a `float32` `.npy` file (parent folders created) by
/// replacing it ([`crate::util::write_atomic`]): a file at `path` that is
/// a link or has other hard links is replaced, never written through.
pub fn write_npy(path: &Path, a: &Array2<f32>) -> Result<()> {
    let bytes = npy_bytes(a).map_err(|e| Error::file(path, e.to_string()))?;
    crate::util::write_atomic(path, &bytes)
}

/// The bytes of `a` as a `float32` `.npy` file.
pub fn npy_bytes(a: &Array2<f32>) -> Result<Vec<u8>> {
    use ndarray_npy::WriteNpyExt;
    let mut bytes = Vec::with_capacity(a.len() * 4 + 128);
    a.write_npy(&mut bytes)
        .map_err(|e| Error::invalid(format!("writing .npy: {e}")))?;
    Ok(bytes)
}
