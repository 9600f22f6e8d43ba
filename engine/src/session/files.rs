//! The names of the files a session folder holds, and which names are a
//! session's own: what `rosetta jobs delete` may remove, and all it
//! removes. A leaf of `session/`: it imports nothing of the folder, so
//! every part of it can name a session file without importing the parts
//! that write it.

/// File names inside a session folder.
pub const CONFIG_FILE: &str = "config.toml";
/// Append-only metrics, one JSON object per line.
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The job's current state.
pub const STATUS_FILE: &str = "status.json";
/// Human-readable log.
pub const LOG_FILE: &str = "log.txt";
/// Folder of the checkpoints.
pub const CHECKPOINT_DIR: &str = "checkpoints";
/// Best checkpoint by validation MRR.
pub const BEST_CHECKPOINT: &str = "checkpoints/best.safetensors";
/// Checkpoint of the last completed epoch (with optimiser state), for `--resume`.
pub const LAST_CHECKPOINT: &str = "checkpoints/last.safetensors";
/// Source-language vocabulary the model was trained with.
pub const VOCAB_SOURCE: &str = "vocab.source.json";
/// Target-language vocabulary the model was trained with.
pub const VOCAB_TARGET: &str = "vocab.target.json";
/// Every file name a session folder may hold directly (besides
/// [`CHECKPOINT_DIR`] and the temporary files of [`write_atomic`](crate::util::write_atomic),
/// `.NAME.tmp.…`): what `rosetta jobs delete` removes, and all it removes.
/// A component that writes a new file into session folders adds its name
/// here.
pub const SESSION_FILES: &[&str] = &[
    CONFIG_FILE,
    STATUS_FILE,
    METRICS_FILE,
    LOG_FILE,
    VOCAB_SOURCE,
    VOCAB_TARGET,
    crate::text::units::UNITS_SOURCE,
    crate::text::units::UNITS_TARGET,
    META_FILE,
    SCORES_CACHE,
    HNSW_FILE,
    "hnsw.graph.json",
    // the usearch graph of earlier versions
    "hnsw.usearch",
    "hnsw.usearch.json",
    "hnsw.partial",
    // an encoder's term vectors (`loaded.rs`)
    "term-vectors.source.npy",
    "term-vectors.target.npy",
    "term-vectors.source.json",
    "term-vectors.target.json",
    // an encoder's embeddings of the searched collection (`loaded.rs`)
    "doc-embeddings.source.npy",
    "doc-embeddings.target.npy",
    "doc-embeddings.source.json",
    "doc-embeddings.target.json",
    // ... the lock a process encoding it holds, the estimate of encoding
    // it, and the BLAKE3 of the checkpoint it was encoded with
    // (`collection.rs`)
    "doc-embeddings.source.lock",
    "doc-embeddings.target.lock",
    "doc-embeddings.source.estimate.json",
    "doc-embeddings.target.estimate.json",
    "checkpoint.blake3.json",
    // the BLAKE3 of an encoder's weights file, kept while the file is
    // unchanged (`models::encoder`); each cached table's is
    // `TABLE.npy.blake3.json` beside it (`table_cache.rs`, [`is_own_file`])
    "weights.blake3.json",
    // a job's pretrained start (`models::pretrained`); an encoder's cached
    // vectors of another vocabulary (`term-vectors.HASH.SIDE.*`) are
    // recognised by `pretrained::is_cache_name`
    crate::models::pretrained::RECORD_FILE,
    // a Slurm job's record and batch script, a sweep member's record
    // (`jobs::slurm`, `jobs::sweep`)
    "slurm.json",
    "slurm.sh",
    "sweep.json",
    // the lock file of versions that locked a file, not the folder
    ".lock",
];

/// The folder of an index build (`rosetta index build`): its status and
/// log ([`INDEX_FILES`]) and a folder of chunks per side
/// ([`INDEX_CHUNK_DIRS`], each holding [`is_chunk_file`] names).
pub const INDEX_DIR: &str = "index";
/// Every file name [`INDEX_DIR`] may hold directly (besides temporary
/// files and the status of each shard of a sharded build,
/// [`is_shard_status`]): the status and log, a Slurm build's record and
/// batch scripts, and the locks under which shards make a chunk folder.
pub const INDEX_FILES: &[&str] = &[
    "status.json",
    "log.txt",
    "slurm.json",
    "slurm.sh",
    "slurm-merge.sh",
    "chunks-source.lock",
    "chunks-target.lock",
];

/// The status file of shard `i` of a sharded index build, under [`INDEX_DIR`].
pub fn shard_status_name(i: usize) -> String {
    format!("shard-{i:03}.json")
}

/// Whether `name` is a shard's status file ([`shard_status_name`]).
pub fn is_shard_status(name: &str) -> bool {
    name.strip_prefix("shard-")
        .and_then(|r| r.strip_suffix(".json"))
        .is_some_and(|i| i.len() >= 3 && i.bytes().all(|b| b.is_ascii_digit()))
}
/// The chunk folders [`INDEX_DIR`] may hold.
pub const INDEX_CHUNK_DIRS: &[&str] = &["chunks-source", "chunks-target"];

/// Whether `name` is a file an index build writes into a chunk folder:
/// `chunks.json`, `chunk-NNNNNN.npy` and its `chunk-NNNNNN.npy.blake3`, or
/// a temporary file of one.
pub fn is_chunk_file(name: &str) -> bool {
    let base = name
        .strip_prefix('.')
        .and_then(|r| r.split_once(".tmp.").map(|(n, _)| n))
        .unwrap_or(name);
    let chunk = |n: &str| {
        n.strip_prefix("chunk-")
            .and_then(|r| {
                r.strip_suffix(".npy.blake3")
                    .or_else(|| r.strip_suffix(".npy"))
            })
            .is_some_and(|i| i.len() == 6 && i.bytes().all(|b| b.is_ascii_digit()))
    };
    base == "chunks.json" || chunk(base)
}

/// Every file name [`CHECKPOINT_DIR`] may hold (besides temporary files).
pub const CHECKPOINT_FILES: &[&str] = &["best.safetensors", "last.safetensors"];

/// A session's own name, tags and note, kept in its folder.
pub const META_FILE: &str = "meta.json";

/// The file in a session folder that caches its ad-hoc scores
/// ([`Workbench::adhoc_scores`]); safe to delete.
pub const SCORES_CACHE: &str = "adhoc-scores.json";

/// The file in a session folder holding its HNSW graph over the document
/// embeddings, in Rosetta's graph format (with its description beside it,
/// `hnsw.graph.json`); safe to delete.
pub const HNSW_FILE: &str = "hnsw.graph";

/// Whether `name` is one of `known`, or a temporary file of one
/// (`.NAME.tmp.…`, [`crate::util::write_atomic`]).
pub(crate) fn is_own_file(name: &str, known: &[&str]) -> bool {
    // the kept BLAKE3 of one of its tables (`TABLE.npy.blake3.json`)
    if let Some(table) = name.strip_suffix(".blake3.json") {
        if table.ends_with(".npy") && is_own_file(table, known) {
            return true;
        }
    }
    let bli_split = |n: &str| {
        n.strip_prefix("bli-split-")
            .and_then(|r| r.strip_suffix(".json"))
            .is_some_and(|seed| !seed.is_empty() && seed.bytes().all(|b| b.is_ascii_digit()))
    };
    known.contains(&name)
        || (known == SESSION_FILES && (bli_split(name) || is_cache_name(name)))
        || (known == INDEX_FILES && is_shard_status(name))
        || name
            .strip_prefix('.')
            .and_then(|r| r.split_once(".tmp."))
            .is_some_and(|(n, _)| {
                known.contains(&n) || (known == INDEX_FILES && is_shard_status(n))
            })
}

/// Whether `name` is a cache file [`cache_name`](super::pretrained::cache_name) makes.
pub fn is_cache_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("term-vectors.") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('.').collect();
    matches!(parts.as_slice(),
        [h, s, e] if h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit())
            && matches!(*s, "source" | "target") && matches!(*e, "npy" | "json"))
}
