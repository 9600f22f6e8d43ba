//! Another session's term vectors for a job's vocabularies (`vectors=SESSION`,
//! [`crate::models::pretrained`]).
//!
//! - An **encoder** session (a model that reads raw text) gives every term
//!   the encoder's vector of its surface word (its commonest training form),
//!   so it covers any vocabulary. The vectors are computed once and cached in
//!   the encoder's session: `term-vectors.{source,target}.npy` when the job's
//!   vocabulary is the session's own, else
//!   `term-vectors.HASH.{source,target}.npy` keyed by the words (with a
//!   `.json` naming the checkpoint they came from; recomputed when it changes).
//! - Any other session with a space gives its own terms' vectors; a job's
//!   term takes the vector of the same term there (same text settings), and
//!   terms it lacks are reported as not found.

use std::path::Path;

use candle_core::Device;
use ndarray::Array2;

use super::Loaded;
use crate::models::{PretrainedVectors, TextRole};
use crate::text::{Side, Vocabs, Vocabulary};
use crate::{Error, Result};

/// Resolves `vectors=dir` for a job with vocabularies `vocabs`.
pub fn term_vectors_for(dir: &Path, vocabs: &Vocabs) -> Result<PretrainedVectors> {
    if !dir.join(super::CONFIG_FILE).is_file() {
        return Err(Error::file(
            dir,
            "vectors=: not a session folder (no config.toml)",
        ));
    }
    let loaded = Loaded::open(dir, &Device::Cpu)?;
    let ck = match loaded.checkpoint.as_ref().map(|c| c.checkpoint.as_str()) {
        Some("last") => dir.join(super::LAST_CHECKPOINT),
        _ => dir.join(super::BEST_CHECKPOINT),
    };
    let hash = crate::util::hash_file(&ck)?;
    let mut out = [None, None];
    for (i, side) in [Side::Source, Side::Target].into_iter().enumerate() {
        let mine = vocabs.side(side);
        let theirs = loaded.vocabs.side(side);
        if mine.lang != theirs.lang {
            return Err(Error::file(
                dir,
                format!(
                    "vectors=: the session's {} language is `{}`, this job's `{}`",
                    side_name(side),
                    theirs.lang,
                    mine.lang
                ),
            ));
        }
        out[i] = Some(if loaded.model.reads_text() {
            let rows = if words(mine) == words(theirs) {
                loaded.term_vectors(side)?.clone()
            } else {
                encoded_words(&loaded, dir, side, &words(mine), &hash)?
            };
            let n = rows.nrows();
            (rows, vec![true; n])
        } else {
            by_term(loaded.term_vectors(side)?, theirs, mine)
        });
    }
    let [Some((source, found_source)), Some((target, found_target))] = out else {
        unreachable!("both sides resolved above")
    };
    Ok(PretrainedVectors {
        session: dir.to_path_buf(),
        checkpoint_blake3: hash,
        source,
        target,
        found_source,
        found_target,
    })
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::Source => "source",
        Side::Target => "target",
    }
}

/// The words an encoder reads for `v`'s terms (as its own term vectors).
fn words(v: &Vocabulary) -> Vec<String> {
    (0..v.len())
        .map(|i| v.display(i as u32).into_owned())
        .collect()
}

/// `mine`'s rows from a space model's table over `theirs` (same term).
fn by_term(
    table: &Array2<f32>,
    theirs: &Vocabulary,
    mine: &Vocabulary,
) -> (Array2<f32>, Vec<bool>) {
    let mut rows = Array2::<f32>::zeros((mine.len(), table.ncols()));
    let mut found = vec![false; mine.len()];
    for (i, f) in found.iter_mut().enumerate() {
        if let Some(j) = theirs.id(mine.term(i as u32)) {
            if (j as usize) < table.nrows() {
                rows.row_mut(i).assign(&table.row(j as usize));
                *f = true;
            }
        }
    }
    (rows, found)
}

/// Name of the cache of an encoder's vectors of `words`.
pub fn cache_name(words: &[String], side: Side, ext: &str) -> String {
    let mut h = blake3::Hasher::new();
    for w in words {
        h.update(w.as_bytes());
        h.update(&[0]);
    }
    let hex = h.finalize().to_hex();
    format!("term-vectors.{}.{}.{ext}", &hex[..16], side_name(side))
}

pub use super::files::is_cache_name;

/// An encoder's vectors of `words` (cached in its session folder).
fn encoded_words(
    loaded: &Loaded,
    dir: &Path,
    side: Side,
    words: &[String],
    hash: &str,
) -> Result<Array2<f32>> {
    let npy = dir.join(cache_name(words, side, "npy"));
    let meta = dir.join(cache_name(words, side, "json"));
    let want = serde_json::json!({
        "checkpoint_blake3": hash, "rows": words.len(), "dim": loaded.model.dim()
    });
    let fresh = crate::util::read_regular(&meta, crate::util::Links::Refuse, 1 << 16)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|m| m == want);
    if fresh {
        let shape = (words.len(), loaded.model.dim());
        if let Ok(v) =
            crate::index::dense::read_npy_checked(&npy, crate::util::Links::Refuse, Some(shape))
        {
            return Ok(v);
        }
    }
    let v = loaded.model.encode_raw(side, TextRole::Query, words)?;
    // a cache that cannot be written (a read-only session) is no error
    if crate::index::dense::write_npy(&npy, &v).is_ok() {
        let _ = crate::util::write_atomic(&meta, want.to_string().as_bytes());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_names_are_recognised_and_nothing_else() {
        let w = vec!["a".to_string(), "b".to_string()];
        for (side, ext) in [(Side::Source, "npy"), (Side::Target, "json")] {
            assert!(is_cache_name(&cache_name(&w, side, ext)));
        }
        for bad in [
            "term-vectors.source.npy",
            "term-vectors.0123456789abcdef.source.txt",
            "term-vectors.0123456789abcdeg.source.npy",
            "term-vectors.0123456789abcdef.x.npy",
            "term-vectors.0123456789abcdef.source.npy.x",
            "config.toml",
        ] {
            assert!(!is_cache_name(bad), "{bad}");
        }
    }
}
