//! Vocabulary trimming: a copy of an encoder folder that keeps only the
//! pieces a workspace's texts are cut into (with both prefixes), the special
//! tokens, and every single-character piece of the characters those texts
//! use (so that new words of the same languages still split into known
//! pieces rather than `<unk>`).
//!
//! Why the kept texts' embeddings do not change: a Unigram tokenizer cuts a
//! word by the highest-scoring path through its pieces. Every piece of each
//! kept text's best path is kept, and removing pieces cannot create a better
//! path, so the same path wins; its pieces get new ids whose rows are the
//! old rows, so the encoder sees the same vectors. (A tie between two paths
//! of equal score could in principle be broken differently; the test checks
//! equality on the texts themselves.)

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use super::folder;
use crate::corpus::{Prepared, Workspace};
use crate::{Error, Result};

/// What [`trim`] did.
#[derive(Debug, Clone, Serialize)]
pub struct TrimReport {
    /// The folder written.
    pub out: PathBuf,
    /// Pieces before.
    pub pieces: usize,
    /// Pieces kept.
    pub kept: usize,
    /// Texts tokenised to find them.
    pub texts: usize,
    /// Size of `model.safetensors` before and after.
    pub bytes_before: u64,
    /// After.
    pub bytes_after: u64,
}

/// A JSON object read from `path` (a regular file; links followed, as the
/// folder is one the user names): anything else (`null`, a list, a
/// string, a number) is an error naming the file, never a panic on
/// editing it or a file written without its fields.
fn read_json(path: &Path) -> Result<Value> {
    use crate::util::{read_regular, Links};
    let bytes = read_regular(path, Links::Follow, u64::MAX)?;
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| Error::parse(path, e.line(), e.to_string()))?;
    if !v.is_object() {
        let kind = match &v {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "a list",
            Value::Object(_) => "an object",
        };
        return Err(Error::file(
            path,
            format!(
                "is {kind}, not a JSON object: an encoder folder's JSON files are objects \
                 (use the file that came with the weights)"
            ),
        ));
    }
    Ok(v)
}

/// Every text of the workspaces: pairs of every split, documents, queries.
fn workspace_texts(workspaces: &[PathBuf]) -> Result<Vec<String>> {
    let mut texts = Vec::new();
    for w in workspaces {
        let ws = Workspace::load(w)?;
        let p = Prepared::load_or_build(&ws)?;
        for s in [&p.train, &p.valid, &p.test] {
            texts.extend(s.src_text.iter().cloned());
            texts.extend(s.tgt_text.iter().cloned());
        }
        texts.extend(p.adhoc.doc_texts.iter().cloned());
        texts.extend(p.adhoc.query_texts.iter().cloned());
        if let Some(t) = &p.adhoc.target_query_texts {
            texts.extend(t.iter().cloned());
        }
    }
    Ok(texts)
}

/// Writes to `out` a copy of the encoder folder `weights` keeping the pieces
/// the texts of `workspaces` use (see the module docs).
/// With `half`, the weights are stored as f16 (half the bytes; read back
/// as f32, each weight rounded to f16's 11-bit mantissa).
pub fn trim(weights: &Path, workspaces: &[PathBuf], out: &Path, half: bool) -> Result<TrimReport> {
    let f = folder::resolve(&weights.to_string_lossy())?;
    let texts = workspace_texts(workspaces)?;
    trim_for_texts(&f, &texts, out, half)
}

/// [`trim`] for the given texts.
pub fn trim_for_texts(
    f: &folder::Folder,
    texts: &[String],
    out: &Path,
    half: bool,
) -> Result<TrimReport> {
    if out.join("model.safetensors").exists() {
        return Err(Error::file(
            out,
            "already holds a model.safetensors; choose an empty or new folder",
        ));
    }
    let mut config = read_json(&f.config)?;
    // its fields, and that the weights hold what it says
    f.config()?;
    let tok = f.tokenizer()?;
    let mut tj = read_json(&f.tokenizer)?;
    let model = tj
        .get("model")
        .filter(|m| m.get("type").and_then(Value::as_str) == Some("Unigram"))
        .ok_or_else(|| Error::file(&f.tokenizer, "only a Unigram tokenizer can be trimmed"))?;
    let vocab = model
        .get("vocab")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::file(&f.tokenizer, "model.vocab is not a list"))?
        .clone();
    let n = vocab.len();
    let piece = |i: usize| -> &str { vocab[i].get(0).and_then(Value::as_str).unwrap_or("") };
    // the ids the texts use, with both prefixes as the encoder reads them
    let mut keep: BTreeSet<u32> = BTreeSet::new();
    let mut chars: BTreeSet<char> = BTreeSet::new();
    let mut inputs = Vec::with_capacity(texts.len() * 2 + 2);
    for t in texts {
        chars.extend(t.chars());
        for p in ["query: ", "passage: ", ""] {
            inputs.push(format!("{p}{t}"));
        }
    }
    for chunk in inputs.chunks(4096) {
        let enc = tok
            .encode_batch(chunk.to_vec(), true)
            .map_err(|e| Error::file(&f.tokenizer, format!("tokenizer: {e}")))?;
        for e in enc {
            keep.extend(e.get_ids().iter().copied());
        }
    }
    // specials, and single-character pieces of the characters seen
    if let Some(added) = tj.get("added_tokens").and_then(Value::as_array) {
        for a in added {
            if let Some(id) = a.get("id").and_then(Value::as_u64) {
                keep.insert(id as u32);
            }
        }
    }
    for (i, v) in vocab.iter().enumerate() {
        let p = v.get(0).and_then(Value::as_str).unwrap_or("");
        let mut it = p.chars();
        let single = match (it.next(), it.next(), it.next()) {
            (Some(c), None, _) => chars.contains(&c) || c == '\u{2581}',
            (Some('\u{2581}'), Some(c), None) => chars.contains(&c),
            _ => false,
        };
        if single {
            keep.insert(i as u32);
        }
    }
    if let Some(&bad) = keep.iter().find(|&&i| i as usize >= n) {
        return Err(Error::file(
            &f.tokenizer,
            format!("the tokenizer produced id {bad} beyond its {n} pieces"),
        ));
    }
    let kept: Vec<u32> = keep.into_iter().collect();
    let remap: HashMap<u32, u32> = kept
        .iter()
        .enumerate()
        .map(|(j, &i)| (i, j as u32))
        .collect();
    // tokenizer.json with the kept pieces and remapped ids
    let new_vocab: Vec<Value> = kept.iter().map(|&i| vocab[i as usize].clone()).collect();
    let m = tj["model"].as_object_mut().expect("checked above");
    m.insert("vocab".into(), Value::Array(new_vocab));
    if let Some(u) = m.get("unk_id").and_then(Value::as_u64) {
        let nu = remap.get(&(u as u32)).copied().ok_or_else(|| {
            Error::file(
                &f.tokenizer,
                format!("unk_id {u} ({}) was not kept", piece(u as usize)),
            )
        })?;
        m.insert("unk_id".into(), nu.into());
    }
    remap_ids(&mut tj, &remap);
    // weights: the kept rows of the word-embedding table
    let device = candle_core::Device::Cpu;
    let tensors = candle_core::safetensors::load(&f.weights, &device)
        .map_err(|e| Error::file(&f.weights, e.to_string()))?;
    let ids = candle_core::Tensor::from_vec(kept.clone(), kept.len(), &device)?;
    let mut out_t: BTreeMap<String, (Vec<usize>, Vec<f32>)> = BTreeMap::new();
    let mut found = false;
    for (name, t) in tensors {
        let t = t.to_dtype(candle_core::DType::F32)?;
        let t = if name.ends_with("word_embeddings.weight") {
            found = true;
            if t.dim(0)? < n {
                return Err(Error::file(
                    &f.weights,
                    format!("{name} has {} rows for {n} pieces", t.dim(0)?),
                ));
            }
            t.index_select(&ids, 0)?
        } else {
            t
        };
        let shape = t.dims().to_vec();
        out_t.insert(name, (shape, t.flatten_all()?.to_vec1::<f32>()?));
    }
    if !found {
        return Err(Error::file(&f.weights, "no word-embedding table"));
    }
    config["vocab_size"] = kept.len().into();
    if let Some(p) = config.get("pad_token_id").and_then(Value::as_u64) {
        if let Some(&np) = remap.get(&(p as u32)) {
            config["pad_token_id"] = np.into();
        }
    }
    config["rosetta_trimmed_from"] = Value::String(f.given.clone());
    super::pack::write_folder(out, &config, &tj, &out_t)?;
    if half {
        let path = out.join("model.safetensors");
        let t = candle_core::safetensors::load(&path, &device)
            .map_err(|e| Error::file(&path, e.to_string()))?;
        let t = t
            .into_iter()
            .map(|(k, v)| Ok((k, v.to_dtype(candle_core::DType::F16)?)))
            .collect::<Result<HashMap<_, _>>>()?;
        let tmp = out.join(".model.safetensors.f16");
        candle_core::safetensors::save(&t, &tmp).map_err(|e| Error::file(&tmp, e.to_string()))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
    }
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    Ok(TrimReport {
        out: out.to_path_buf(),
        pieces: n,
        kept: kept.len(),
        texts: texts.len(),
        bytes_before: size(&f.weights),
        bytes_after: size(&out.join("model.safetensors")),
    })
}

/// Remaps the ids of added tokens and of the post-processor's special tokens.
fn remap_ids(tj: &mut Value, remap: &HashMap<u32, u32>) {
    let map = |v: &mut Value| {
        if let Some(i) = v.as_u64() {
            if let Some(&j) = remap.get(&(i as u32)) {
                *v = j.into();
            }
        }
    };
    if let Some(added) = tj.get_mut("added_tokens").and_then(Value::as_array_mut) {
        for a in added {
            if let Some(id) = a.get_mut("id") {
                map(id);
            }
        }
    }
    if let Some(sp) = tj
        .pointer_mut("/post_processor/special_tokens")
        .and_then(Value::as_object_mut)
    {
        for (_, v) in sp.iter_mut() {
            if let Some(ids) = v.get_mut("ids").and_then(Value::as_array_mut) {
                ids.iter_mut().for_each(map);
            }
        }
    }
}
