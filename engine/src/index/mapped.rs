//! Document embeddings that stay on disk: a 2-D `float32` `.npy` table read
//! through a read-only memory map ([`MappedNpy`]), and [`Embeddings`], the
//! rows an index searches, either in memory or mapped.
//!
//! A search scans a mapped table in blocks of rows and hands each block's
//! pages back to the kernel once scored ([`Embeddings::release`],
//! `MADV_DONTNEED`): the file stays in the page cache, shared and
//! reclaimable, but the searching process's resident memory does not grow
//! with the collection. An HNSW walk touches the rows it visits only.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndarray::{Array2, ArrayView2};

use crate::{Error, Result};

/// Rows per block of a pass over a whole table ([`Embeddings::for_blocks`]).
const BLOCK_ROWS: usize = 4096;

/// A 2-D little-endian `float32` `.npy` file in C order, memory-mapped
/// read-only and checked before use ([`MappedNpy::open`]).
pub struct MappedNpy {
    map: memmap2::Mmap,
    /// Byte offset of the first value (the header's length).
    offset: usize,
    rows: usize,
    cols: usize,
    path: PathBuf,
}

impl std::fmt::Debug for MappedNpy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedNpy")
            .field("path", &self.path)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .finish_non_exhaustive()
    }
}

impl MappedNpy {
    /// Maps `path`, which must be a regular file (opened with `O_NOFOLLOW`:
    /// a symbolic link, a FIFO or a device is an error naming it), whose
    /// `.npy` header declares little-endian `float32` values in C order of
    /// exactly the shape `expect`, and whose size is exactly that header
    /// and those values (a truncated or padded file is an error naming it,
    /// never a short read or a fault). Nothing is read beyond the header.
    ///
    /// The map is the file as it is on disk: a file rewritten by temp file
    /// and rename (as Rosetta writes its tables) leaves the map on the old
    /// one; a file truncated in place by another process while mapped would
    /// fault its reader, the risk of any mapped read.
    pub fn open(path: &Path, expect: (usize, usize)) -> Result<MappedNpy> {
        let file = crate::util::open_regular(path, crate::util::Links::Refuse)?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        let bad = |m: String| Error::file(path, m);
        let fix = "write it again (`rosetta index build` replaces a session's table)";
        if len == 0 {
            return Err(bad(format!(
                "is empty, not a 2-D float32 .npy matrix: {fix}"
            )));
        }
        // SAFETY: a read-only map of a regular file; see the contract above
        // for a file changed in place while mapped.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        let (shape, header) = super::npy::npy_header(&mut &map[..], path)?;
        let text = String::from_utf8_lossy(&map[..header as usize]);
        let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if !squeezed.contains("'fortran_order':False") {
            return Err(bad(format!(
                "its values are not in C (row-major) order, which a mapped table needs: {fix}"
            )));
        }
        let little = squeezed.contains("'descr':'<f4'")
            || (cfg!(target_endian = "little") && squeezed.contains("'descr':'=f4'"));
        if !little || cfg!(target_endian = "big") {
            return Err(bad(format!(
                "its values are not little-endian float32, which a mapped table needs: {fix}"
            )));
        }
        if shape != expect {
            return Err(bad(format!(
                "declares shape {shape:?}, not the {expect:?} its description names (a stale, \
                 damaged or foreign table): {fix}"
            )));
        }
        let data = (shape.0 as u64)
            .checked_mul(shape.1 as u64)
            .and_then(|n| n.checked_mul(4));
        if data.and_then(|d| d.checked_add(header)) != Some(len) {
            return Err(bad(format!(
                "its header declares shape {shape:?} of float32 but the file holds {len} bytes \
                 (truncated or forged): {fix}"
            )));
        }
        let offset = header as usize;
        if !(map.as_ptr() as usize + offset).is_multiple_of(std::mem::align_of::<f32>()) {
            return Err(bad(format!(
                "its values start at byte {offset}, not on a float32 boundary: {fix}"
            )));
        }
        Ok(MappedNpy {
            map,
            offset,
            rows: shape.0,
            cols: shape.1,
            path: path.to_path_buf(),
        })
    }

    /// The mapped file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The values, row-major.
    pub fn as_slice(&self) -> &[f32] {
        let n = self.rows * self.cols;
        // SAFETY: `open` checked that the file holds exactly `n` float32
        // values after the header, that they start on a float32 boundary
        // and are little-endian on a little-endian machine; every bit
        // pattern is a valid f32, and the map lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.offset) as *const f32, n) }
    }

    /// Hands the whole pages holding rows `rows` back to the kernel
    /// (`MADV_DONTNEED`): they leave this process's resident memory and are
    /// read again from the page cache (or the file) when next touched, with
    /// the same bytes. Pages shared with a row outside `rows` are kept.
    pub fn release(&self, rows: Range<usize>) {
        let row = self.cols * 4;
        let at = |r: usize| self.offset + r.min(self.rows) * row;
        crate::util::release_mapped(&self.map, at(rows.start)..at(rows.end));
    }
}

#[derive(Debug)]
enum Table {
    /// Row-major rows, shared with whoever made them.
    Owned(Arc<Array2<f32>>),
    Mapped(MappedNpy),
}

/// Document embeddings, one row per document, in row-major layout: held in
/// memory, or mapped from a session's `.npy` table ([`MappedNpy`]). Cheap to
/// clone (shared).
#[derive(Debug, Clone)]
pub struct Embeddings(Arc<Table>);

/// The rows of `a` in memory (copied only when not in row-major layout).
impl From<Array2<f32>> for Embeddings {
    fn from(a: Array2<f32>) -> Self {
        Embeddings::from(Arc::new(a))
    }
}

/// The rows of `a`, shared with the caller (copied only when not in
/// row-major layout).
impl From<Arc<Array2<f32>>> for Embeddings {
    fn from(a: Arc<Array2<f32>>) -> Self {
        let a = if a.is_standard_layout() {
            a
        } else {
            Arc::new(a.as_standard_layout().into_owned())
        };
        Embeddings(Arc::new(Table::Owned(a)))
    }
}

impl From<MappedNpy> for Embeddings {
    fn from(m: MappedNpy) -> Self {
        Embeddings(Arc::new(Table::Mapped(m)))
    }
}

impl Embeddings {
    /// The rows.
    pub fn view(&self) -> ArrayView2<'_, f32> {
        let (r, c) = self.dim();
        ArrayView2::from_shape((r, c), self.as_slice()).expect("rows × cols values")
    }

    /// The values, row-major.
    pub fn as_slice(&self) -> &[f32] {
        match &*self.0 {
            Table::Owned(a) => a.as_slice().expect("standard layout"),
            Table::Mapped(m) => m.as_slice(),
        }
    }

    /// (rows, columns).
    pub fn dim(&self) -> (usize, usize) {
        match &*self.0 {
            Table::Owned(a) => a.dim(),
            Table::Mapped(m) => (m.rows, m.cols),
        }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.dim().0
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.dim().1
    }

    /// The mapped file, when the rows are mapped.
    pub fn mapped_from(&self) -> Option<&Path> {
        match &*self.0 {
            Table::Owned(_) => None,
            Table::Mapped(m) => Some(m.path()),
        }
    }

    /// Lets the pages of rows `rows` of a mapped table leave resident
    /// memory ([`MappedNpy::release`]); nothing for rows in memory.
    pub fn release(&self, rows: Range<usize>) {
        if let Table::Mapped(m) = &*self.0 {
            m.release(rows)
        }
    }

    /// Calls `f(first row, block)` on consecutive blocks of rows, in order,
    /// each block's pages released after it ([`Embeddings::release`]): a
    /// pass over a mapped table whose resident memory stays at one block.
    pub fn for_blocks<E>(
        &self,
        mut f: impl FnMut(usize, ArrayView2<'_, f32>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let v = self.view();
        let n = v.nrows();
        let mut at = 0;
        while at < n {
            let end = (at + BLOCK_ROWS).min(n);
            let r = f(at, v.slice(ndarray::s![at..end, ..]));
            self.release(at..end);
            r?;
            at = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(n: usize, d: usize) -> Array2<f32> {
        Array2::from_shape_fn((n, d), |(i, j)| (i * d + j) as f32 * 0.5 - 3.0)
    }

    #[test]
    fn a_mapped_table_reads_what_was_written() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("t.npy");
        let a = table(5000, 7);
        crate::index::npy::write_npy(&p, &a).unwrap();
        let m = Embeddings::from(MappedNpy::open(&p, (5000, 7)).unwrap());
        assert_eq!(m.view(), a.view());
        let mut seen = 0;
        m.for_blocks(|first, b| {
            assert_eq!(b, a.slice(ndarray::s![first..first + b.nrows(), ..]));
            seen += b.nrows();
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(seen, 5000);
        // released pages read back the same bytes
        m.release(0..5000);
        assert_eq!(m.view(), a.view());
        assert_eq!(m.mapped_from(), Some(p.as_path()));
    }

    /// Resident kilobytes of this process's mapping holding `addr`
    /// (`/proc/self/smaps`).
    fn mapping_rss_kb(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = head.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
            if inside && line.starts_with("Rss:") {
                return line.split_whitespace().nth(1).unwrap().parse().unwrap();
            }
        }
        panic!("no mapping holds {addr:#x}")
    }

    /// An exact search over a mapped table leaves almost none of it
    /// resident in the process: each block's pages go once scored.
    #[test]
    fn a_search_of_a_mapped_table_does_not_keep_it_resident() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("t.npy");
        let (n, d) = (20_000, 256);
        let mut a = Array2::from_shape_fn((n, d), |(i, j)| ((i * 31 + j * 7) % 97) as f32 - 48.0);
        for mut r in a.rows_mut() {
            let norm = r.dot(&r).sqrt().max(1e-6);
            r.mapv_inplace(|x| x / norm);
        }
        crate::index::npy::write_npy(&p, &a).unwrap();
        let m = MappedNpy::open(&p, (n, d)).unwrap();
        let addr = m.map.as_ptr() as usize;
        let e = Embeddings::from(m);
        let index = crate::index::DenseIndex::new(e.clone()).unwrap();
        let q = a.slice(ndarray::s![..3, ..]).to_owned();
        let hits = index.search(q.view(), 5).unwrap();
        assert!((hits[0][0].score - 1.0).abs() < 1e-5, "{:?}", hits[0][0]);
        let table_kb = (n * d * 4 / 1024) as u64;
        let rss = mapping_rss_kb(addr);
        assert!(
            rss < table_kb / 8,
            "{rss} kB of a {table_kb} kB table resident"
        );
        // touched without release, the table is resident: the measure sees it
        let sum: f32 = e.view().iter().sum();
        assert!(sum.is_finite());
        assert!(mapping_rss_kb(addr) > table_kb / 2);
    }

    #[test]
    fn a_link_a_short_file_or_another_shape_is_refused_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("t.npy");
        crate::index::npy::write_npy(&p, &table(10, 4)).unwrap();
        let e = MappedNpy::open(&p, (10, 5)).unwrap_err().to_string();
        assert!(e.contains("t.npy") && e.contains("shape"), "{e}");
        let link = tmp.path().join("link.npy");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = MappedNpy::open(&link, (10, 4)).unwrap_err().to_string();
        assert!(e.contains("link.npy"), "{e}");
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        let e = MappedNpy::open(&p, (10, 4)).unwrap_err().to_string();
        assert!(e.contains("t.npy") && e.contains("truncated"), "{e}");
        std::fs::write(&p, b"").unwrap();
        let e = MappedNpy::open(&p, (10, 4)).unwrap_err().to_string();
        assert!(e.contains("t.npy") && e.contains("empty"), "{e}");
    }
}
