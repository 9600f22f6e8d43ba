//! A table a session computed and keeps beside its files (an encoder's
//! term vectors, a collection's embeddings): `NAME.npy` with a meta file
//! saying what it was computed from; and the BLAKE3 of the checkpoint such
//! tables are tied to, kept while the checkpoint file is unchanged. A leaf
//! of `session/` (it names only [`super::files`]).

use std::path::{Path, PathBuf};

use ndarray::Array2;

use crate::Result;

/// Where a session keeps a table it computed (term vectors, a collection's
/// embeddings), and what its meta file must say for the table to be used.
pub(crate) struct TableCache {
    pub(crate) npy: PathBuf,
    pub(crate) meta: PathBuf,
    pub(crate) want: serde_json::Value,
    pub(crate) shape: (usize, usize),
}

impl TableCache {
    /// The cached table, when its meta file says what is wanted and its
    /// shape is right. Both files are read as regular files only, never
    /// through a link (a FIFO or device is no cache), the meta within a
    /// small file's limit, and the table's header is checked against the
    /// shape wanted and the file's size before anything is allocated
    /// ([`crate::index::dense::read_npy_checked`]); anything else is no
    /// cache, and the table is computed again.
    ///
    /// The meta file also names the BLAKE3 of the `.npy` it was written
    /// with (`npy_blake3`): a table edited, reordered or copied from another
    /// session without its meta is no cache either. That BLAKE3 is kept
    /// beside the table while the file is unchanged ([`TableCache::npy_blake3`]).
    pub(crate) fn read(&self) -> Option<Array2<f32>> {
        self.valid()?;
        crate::index::dense::read_npy_checked(
            &self.npy,
            crate::util::Links::Refuse,
            Some(self.shape),
        )
        .ok()
    }

    /// Whether the meta file names what is wanted and the table's BLAKE3
    /// (the table is not read into memory).
    pub(crate) fn valid(&self) -> Option<()> {
        let npy_hash = self.wanted_npy_hash()?;
        (npy_hash == self.npy_blake3().ok()?).then_some(())
    }

    /// The table's BLAKE3 the meta file names, when it names what is
    /// wanted; `None` when it is absent, unreadable or names anything else.
    fn wanted_npy_hash(&self) -> Option<String> {
        use crate::util::{read_regular, Links, SMALL_FILE_LIMIT};
        let meta = read_regular(&self.meta, Links::Refuse, SMALL_FILE_LIMIT).ok()?;
        let mut meta: serde_json::Value = serde_json::from_slice(&meta).ok()?;
        let npy_hash = meta.as_object_mut()?.remove("npy_blake3")?;
        (meta == self.want).then(|| npy_hash.as_str().map(str::to_string))?
    }

    /// The BLAKE3 of the `.npy` table, kept in `NAME.npy.blake3.json` while
    /// the file is unchanged (its size, inode and times:
    /// [`crate::util::hash_file_recorded`]): a collection's embeddings are
    /// hashed once after they are written, not at every search.
    fn npy_blake3(&self) -> Result<String> {
        let mut record = self.npy.clone().into_os_string();
        record.push(".blake3.json");
        crate::util::hash_file_recorded(&self.npy, Path::new(&record))
    }

    /// The cached table memory-mapped ([`crate::index::MappedNpy`]): `None`
    /// when the meta file is absent or does not name what is wanted (not
    /// built, or built for another checkpoint or collection), or when the
    /// table's BLAKE3 is not the one the meta names (edited, reordered or
    /// copied from another session: not used, as by [`TableCache::read`]),
    /// and likewise when the table is a link or not a regular file, its
    /// header is not that of a little-endian float32 C-order matrix of the
    /// wanted shape, or its size is not what that header declares
    /// ([`crate::index::MappedNpy::open`]'s refusals): such a table is
    /// encoded again and replaced (by rename: a link is replaced, never
    /// followed), never mapped (issue 54: never a petabyte allocation, never
    /// a panic). Nothing but the header is read (the BLAKE3 too, while its
    /// record says the file is unchanged).
    pub(crate) fn map(&self) -> Result<Option<crate::index::Embeddings>> {
        let Some(want_hash) = self.wanted_npy_hash() else {
            return Ok(None);
        };
        let Ok(mapped) = crate::index::MappedNpy::open(&self.npy, self.shape) else {
            return Ok(None);
        };
        if self.npy_blake3()? != want_hash {
            return Ok(None);
        }
        Ok(Some(mapped.into()))
    }

    /// Keeps `v` for next time, its meta naming the table's BLAKE3; a cache
    /// that cannot be written (a read-only session) is no error.
    pub(crate) fn write(&self, v: &Array2<f32>) {
        let _ = self.try_write(v);
    }

    /// [`TableCache::write`], saying why it failed.
    pub(crate) fn try_write(&self, v: &Array2<f32>) -> Result<()> {
        let bytes = crate::index::dense::npy_bytes(v)?;
        let mut meta = self.want.clone();
        if let Some(o) = meta.as_object_mut() {
            o.insert(
                "npy_blake3".into(),
                blake3::hash(&bytes).to_hex().to_string().into(),
            );
        }
        crate::util::write_atomic(&self.npy, &bytes)?;
        crate::util::write_atomic(&self.meta, meta.to_string().as_bytes())
    }
}

/// The file of a session caching the BLAKE3 of the checkpoint its model
/// loads ([`checkpoint_blake3`]).
pub const CHECKPOINT_HASH_FILE: &str = "checkpoint.blake3.json";

/// The checkpoint a session's model loads: the best, else the last.
fn checkpoint_file(dir: &Path) -> PathBuf {
    let best = dir.join(super::files::BEST_CHECKPOINT);
    if best.is_file() {
        best
    } else {
        dir.join(super::files::LAST_CHECKPOINT)
    }
}

/// A small JSON file of the session, read as a regular file only (never
/// through a link) within the small-file limit; `None` when absent or not
/// that JSON.
pub(crate) fn read_small_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    use crate::util::{read_regular, Links, SMALL_FILE_LIMIT};
    let bytes = read_regular(path, Links::Refuse, SMALL_FILE_LIMIT).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// BLAKE3 of the checkpoint session `dir`'s model loads
/// ([`checkpoint_file`]), read from [`CHECKPOINT_HASH_FILE`] while that
/// names the same file unchanged (size, inode, times:
/// [`crate::util::hash_file_recorded`]), else
/// computed and recorded there (a session that cannot be written is no
/// error). A fine-tuned encoder's checkpoint is hundreds of megabytes: it
/// is hashed once, not at every search, evaluation or comparison.
pub fn checkpoint_blake3(dir: &Path) -> Result<String> {
    crate::util::hash_file_recorded(&checkpoint_file(dir), &dir.join(CHECKPOINT_HASH_FILE))
}
