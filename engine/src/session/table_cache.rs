//! A table a session computed and keeps beside its files (an encoder's
//! term vectors, a collection's embeddings): `NAME.npy` with a meta file
//! saying what it was computed from. A leaf of `session/`.

use std::path::PathBuf;

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
    /// session without its meta is no cache either.
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
        use crate::util::{read_regular, Links, SMALL_FILE_LIMIT};
        let meta = read_regular(&self.meta, Links::Refuse, SMALL_FILE_LIMIT).ok()?;
        let mut meta: serde_json::Value = serde_json::from_slice(&meta).ok()?;
        let npy_hash = meta.as_object_mut()?.remove("npy_blake3")?;
        (meta == self.want && npy_hash.as_str()? == crate::util::hash_file(&self.npy).ok()?)
            .then_some(())
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
