//! A pretrained encoder's folder in Hugging Face layout: `config.json`,
//! `model.safetensors` and `tokenizer.json`, found as a local path or as a
//! hub id (`intfloat/multilingual-e5-small`) through the Hugging Face cache
//! (`$HF_HOME/hub`, as `transformers` and `huggingface-cli` fill it),
//! downloaded by `hf-hub` only when the cache lacks a file and the network
//! allows (`HF_HUB_OFFLINE=1` forbids it).

use std::path::{Path, PathBuf};

use super::bert::Config;
use crate::{Error, Result};

/// The files an encoder folder must hold.
pub const FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];

/// A resolved encoder folder.
#[derive(Debug, Clone)]
pub struct Folder {
    /// The `weights=` value as given (a path or a hub id).
    pub given: String,
    /// Where each file is.
    pub config: PathBuf,
    /// The weights.
    pub weights: PathBuf,
    /// The tokenizer.
    pub tokenizer: PathBuf,
}

fn looks_like_hub_id(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && *p != "."
                && *p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
}

/// Resolves `weights` (a folder, or a hub id when no such folder exists).
pub fn resolve(weights: &str) -> Result<Folder> {
    let p = Path::new(weights);
    if p.is_dir() {
        let mut missing = Vec::new();
        for f in FILES {
            if !p.join(f).is_file() {
                missing.push(f);
            }
        }
        if !missing.is_empty() {
            return Err(Error::file(
                p,
                format!(
                    "not an encoder folder: {} missing (a Hugging Face layout folder holds {}; \
                     `rosetta encoder import e5-small-q4.bin --out DIR` writes one)",
                    missing.join(", "),
                    FILES.join(", ")
                ),
            ));
        }
        return Ok(Folder {
            given: weights.to_string(),
            config: p.join(FILES[0]),
            weights: p.join(FILES[1]),
            tokenizer: p.join(FILES[2]),
        });
    }
    if !looks_like_hub_id(weights) || looks_local(p) {
        return Err(no_such_folder(weights, p));
    }
    from_hub(weights)
}

/// Whether `p`, which is no folder, was meant as a local path rather than
/// a hub id: it starts with `.`, `/` or `~`, or its first part is a folder
/// here (`models/multilingual-e5-smal` with a `models/` folder: a typo, not
/// the hub's user `models`).
fn looks_local(p: &Path) -> bool {
    let s = p.to_string_lossy();
    s.starts_with(['.', '/', '~'])
        || p.components()
            .next()
            .is_some_and(|c| Path::new(c.as_os_str()).is_dir())
}

/// "No such folder", naming the nearest folder beside where `p` would be
/// when there is one (a typo's likely meaning).
fn no_such_folder(weights: &str, p: &Path) -> Error {
    let parent = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let hint = match crate::util::closest_entry(parent, name, true) {
        Some(near) => format!("; did you mean weights={}?", parent.join(&near).display()),
        None if parent.is_dir() => format!(
            "; {} holds no folder near `{name}` (`rosetta setup --encoder` fetches one)",
            parent.display()
        ),
        None => format!("; {} does not exist either", parent.display()),
    };
    let why = if looks_like_hub_id(weights) {
        "read as a local path, not a hub id: it starts with `.`, `/` or `~`, or its first part is a folder here"
    } else {
        "and not a hub id owner/name"
    };
    Error::invalid(format!("weights={weights}: no such folder ({why}){hint}"))
}

fn from_hub(id: &str) -> Result<Folder> {
    let cache = hf_hub::Cache::from_env();
    let repo = cache.model(id.to_string());
    let mut paths = Vec::new();
    let offline = std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| v == "1");
    for f in FILES {
        if let Some(p) = repo.get(f) {
            paths.push(p);
            continue;
        }
        if offline {
            return Err(Error::invalid(format!(
                "weights={id}: {f} is not in the Hugging Face cache ({}) and HF_HUB_OFFLINE=1",
                cache.path().display()
            )));
        }
        #[cfg(not(feature = "hub"))]
        return Err(Error::invalid(format!(
            "weights={id}: {f} is not in the Hugging Face cache ({}), and this build of \
             the engine has no hub client (feature `hub`); give a local folder instead",
            cache.path().display()
        )));
        #[cfg(feature = "hub")]
        paths.push(download(&cache, id, f)?);
    }
    Ok(Folder {
        given: id.to_string(),
        config: paths[0].clone(),
        weights: paths[1].clone(),
        tokenizer: paths[2].clone(),
    })
}

/// `file` of the hub model `id`, downloaded into `cache` (the `hub` feature).
#[cfg(feature = "hub")]
fn download(cache: &hf_hub::Cache, id: &str, f: &str) -> Result<std::path::PathBuf> {
    let api = hf_hub::api::sync::ApiBuilder::from_cache(cache.clone())
        .with_progress(false)
        .build()
        .map_err(|e| Error::invalid(format!("weights={id}: the hub client: {e}")))?;
    api.model(id.to_string()).get(f).map_err(|e| {
        Error::invalid(format!(
            "weights={id}: {f} is not in the Hugging Face cache ({}) and could not be \
         downloaded ({e}); give a local folder instead",
            cache.path().display()
        ))
    })
}

impl Folder {
    /// The parsed and checked `config.json`: a regular file of at most
    /// [`crate::util::SMALL_FILE_LIMIT`] bytes, its shape fields consistent
    /// ([`Config::check`]) and matched against the tensors
    /// `model.safetensors` declares ([`Folder::check_weights`]), so that
    /// sizes the weights do not hold (10¹⁵ layers) are refused before
    /// anything is allocated for them.
    pub fn config(&self) -> Result<Config> {
        use crate::util::{read_regular, Links, SMALL_FILE_LIMIT};
        let bytes = read_regular(&self.config, Links::Follow, SMALL_FILE_LIMIT)?;
        let c: Config = serde_json::from_slice(&bytes)
            .map_err(|e| Error::parse(&self.config, e.line(), e.to_string()))?;
        c.check().map_err(|e| Error::file(&self.config, e))?;
        self.check_weights(&c)?;
        Ok(c)
    }

    /// Error unless `model.safetensors` declares the tensors `c` says (read
    /// from its header alone): the word, position and token-type tables of
    /// `c`'s sizes, layers `encoder.layer.0` to `num_hidden_layers - 1` and
    /// no more, and layer 0's feed-forward of `intermediate_size`. The
    /// error names both files and the size that differs.
    pub fn check_weights(&self, c: &Config) -> Result<()> {
        use std::collections::{BTreeMap, BTreeSet};
        use std::io::Read;
        let w = &self.weights;
        let bad = |m: String| Error::file(w, m);
        let mut f = crate::util::open_regular(w, crate::util::Links::Follow)?;
        let mut n = [0u8; 8];
        f.read_exact(&mut n)
            .map_err(|_| bad("shorter than a safetensors header".into()))?;
        let n = u64::from_le_bytes(n);
        if n > 100 << 20 {
            return Err(bad(format!(
                "declares a header of {n} bytes: not a safetensors file"
            )));
        }
        let mut h = vec![0u8; n as usize];
        f.read_exact(&mut h)
            .map_err(|_| bad("shorter than its safetensors header says".into()))?;
        let h: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&h)
            .map_err(|e| bad(format!("not a safetensors header: {e}")))?;
        let shape = |suffix: &str| -> Option<Vec<u64>> {
            h.iter()
                .find(|(k, _)| k.as_str() == suffix || k.ends_with(&format!(".{suffix}")))
                .and_then(|(_, v)| v.get("shape"))
                .and_then(|s| s.as_array())
                .map(|s| s.iter().map(|d| d.as_u64().unwrap_or(u64::MAX)).collect())
        };
        let mismatch = |what: &str, keys: &str, want: Vec<u64>, got: Option<Vec<u64>>| {
            Error::file(
                &self.config,
                format!(
                    "declares {keys} {want:?} for {what}, but {} holds {}: the config and the \
                     weights do not belong together (use the config.json that came with them)",
                    w.display(),
                    match got {
                        Some(g) => format!("{g:?}"),
                        None => "no such tensor".into(),
                    }
                ),
            )
        };
        let (v, hd) = (c.vocab_size as u64, c.hidden_size as u64);
        let mut want = vec![
            (
                "embeddings.word_embeddings.weight",
                "vocab_size × hidden_size",
                vec![v, hd],
            ),
            (
                "embeddings.position_embeddings.weight",
                "max_position_embeddings × hidden_size",
                vec![c.max_position_embeddings as u64, hd],
            ),
            (
                "encoder.layer.0.intermediate.dense.weight",
                "intermediate_size × hidden_size",
                vec![c.intermediate_size as u64, hd],
            ),
        ];
        if c.type_vocab_size > 0 {
            want.push((
                "embeddings.token_type_embeddings.weight",
                "type_vocab_size × hidden_size",
                vec![c.type_vocab_size as u64, hd],
            ));
        }
        for (name, keys, dims) in want {
            let got = shape(name);
            if got.as_ref() != Some(&dims) {
                return Err(mismatch(name, keys, dims, got));
            }
        }
        let layers: BTreeSet<u64> = h
            .keys()
            .filter_map(|k| {
                let (_, rest) = k.split_once("encoder.layer.")?;
                rest.split('.').next()?.parse().ok()
            })
            .collect();
        let n = c.num_hidden_layers as u64;
        if layers.len() as u64 != n || layers.iter().next_back().is_some_and(|l| *l + 1 != n) {
            return Err(Error::file(
                &self.config,
                format!(
                    "declares num_hidden_layers {n}, but {} holds {} layer(s): the config and \
                     the weights do not belong together",
                    w.display(),
                    layers.len()
                ),
            ));
        }
        Ok(())
    }

    /// The tokenizer.
    /// The tokenizer; refused unless it has a text's first and last special
    /// tokens (`<s>`/`</s>` or `[CLS]`/`[SEP]`).
    pub fn tokenizer(&self) -> Result<tokenizers::Tokenizer> {
        let t = tokenizers::Tokenizer::from_file(&self.tokenizer)
            .map_err(|e| Error::file(&self.tokenizer, format!("not a tokenizer.json: {e}")))?;
        let has = |a: &str, b: &str| t.token_to_id(a).is_some() && t.token_to_id(b).is_some();
        if !has("<s>", "</s>") && !has("[CLS]", "[SEP]") {
            return Err(Error::file(
                &self.tokenizer,
                "has neither <s>/</s> nor [CLS]/[SEP]: an encoder's texts need both ends marked",
            ));
        }
        Ok(t)
    }

    /// BLAKE3 of the weights file (recorded in the session, checked on load).
    pub fn weights_hash(&self) -> Result<String> {
        crate::util::hash_file(&self.weights)
    }
}
