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
    if !looks_like_hub_id(weights) {
        return Err(Error::invalid(format!(
            "weights={weights}: no such folder, and not a hub id (owner/name)"
        )));
    }
    from_hub(weights)
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
    /// The parsed and checked `config.json`.
    pub fn config(&self) -> Result<Config> {
        let bytes = std::fs::read(&self.config).map_err(|e| Error::io(&self.config, e))?;
        let c: Config = serde_json::from_slice(&bytes)
            .map_err(|e| Error::parse(&self.config, e.line(), e.to_string()))?;
        c.check().map_err(|e| Error::file(&self.config, e))?;
        Ok(c)
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
