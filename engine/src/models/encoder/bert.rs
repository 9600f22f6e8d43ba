//! A BERT-style transformer encoder on candle (BERT, and XLM-RoBERTa's
//! position offset), loaded from Hugging Face weight names, for inference
//! and for fine-tuning.
//!
//! Written here rather than taken from `candle-transformers`' `bert`: its
//! layer norm is candle-nn's fused `ops::layer_norm` and its attention
//! uses no padding-aware positions for XLM-R, and the fused layer norm has no
//! backward pass in candle-nn 0.11, so a model built from it cannot be
//! fine-tuned. This file keeps candle's fused kernels (layer norm, soft-max
//! over the last axis) for inference and trains through Rosetta's fused ops
//! with their gradients (`kit/fused.rs`: the masked soft-max, layer norm and
//! GELU one kernel each way on a GPU), with `precision=bf16` as autocast
//! runs it; the weight names and the arithmetic are `transformers`' own
//! (`modeling_bert.py`), so any BERT or XLM-R folder loads.

use candle_core::backprop::GradStore;
use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{Embedding, Linear, VarBuilder};
use serde::Deserialize;

use crate::models::kit::{attention, fused, precision, rows};
use crate::{Error, Result};

/// The subset of a Hugging Face `config.json` the encoder reads.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Config {
    /// Rows of the word-embedding table.
    pub vocab_size: usize,
    /// Hidden size (the embedding dimension).
    pub hidden_size: usize,
    /// Transformer layers.
    pub num_hidden_layers: usize,
    /// Attention heads.
    pub num_attention_heads: usize,
    /// Feed-forward size.
    pub intermediate_size: usize,
    /// Activation of the feed-forward layer (`gelu`, `gelu_new`, `relu`).
    #[serde(default = "gelu")]
    pub hidden_act: String,
    /// Position embeddings.
    pub max_position_embeddings: usize,
    /// Token-type embeddings (0: none).
    #[serde(default)]
    pub type_vocab_size: usize,
    /// Layer-norm epsilon.
    #[serde(default = "eps")]
    pub layer_norm_eps: f64,
    /// Padding id (XLM-R's positions start after it).
    #[serde(default)]
    pub pad_token_id: u32,
    /// `bert` (positions from 0) or `xlm-roberta` / `roberta` (positions
    /// from `pad_token_id + 1`).
    #[serde(default)]
    pub model_type: Option<String>,
}

fn gelu() -> String {
    "gelu".into()
}
fn eps() -> f64 {
    1e-12
}

impl Config {
    /// Checks the shape fields against each other.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.hidden_size == 0 || self.num_attention_heads == 0 || self.num_hidden_layers == 0 {
            return Err(
                "hidden_size, num_attention_heads and num_hidden_layers must be > 0".into(),
            );
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} does not divide by num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if !matches!(self.hidden_act.as_str(), "gelu" | "gelu_new" | "relu") {
            return Err(format!(
                "hidden_act `{}`: gelu, gelu_new and relu are supported",
                self.hidden_act
            ));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(format!("layer_norm_eps {}", self.layer_norm_eps));
        }
        Ok(())
    }

    /// The position id of a text's first token.
    pub fn position_offset(&self) -> usize {
        match self.model_type.as_deref() {
            Some("xlm-roberta") | Some("roberta") | Some("camembert") => {
                self.pad_token_id as usize + 1
            }
            _ => 0,
        }
    }

    /// Tokens a text may have (positions left after the offset).
    pub fn max_tokens(&self) -> usize {
        self.max_position_embeddings
            .saturating_sub(self.position_offset())
    }
}

/// A layer norm with weight and bias: candle-nn's fused kernel for
/// inference, Rosetta's fused op with its gradient ([`fused::layer_norm`])
/// while training.
#[derive(Debug, Clone)]
struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    fn load(size: usize, eps: f64, vb: VarBuilder) -> Result<Self> {
        Ok(LayerNorm {
            weight: vb.get(size, "weight")?,
            bias: vb.get(size, "bias")?,
            eps,
        })
    }

    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        if train {
            return fused::layer_norm(x, &self.weight, &self.bias, self.eps);
        }
        if x.is_contiguous() {
            return Ok(candle_nn::ops::layer_norm(
                x,
                &self.weight,
                &self.bias,
                self.eps as f32,
            )?);
        }
        let h = x.dim(D::Minus1)? as f64;
        let mean = (x.sum_keepdim(D::Minus1)? / h)?;
        let xc = x.broadcast_sub(&mean)?;
        let var = (xc.sqr()?.sum_keepdim(D::Minus1)? / h)?;
        let xn = xc.broadcast_div(&(var + self.eps)?.sqrt()?)?;
        Ok(xn.broadcast_mul(&self.weight)?.broadcast_add(&self.bias)?)
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    inter: Linear,
    out: Linear,
    out_norm: LayerNorm,
}

/// What [`Bert::forward_checkpointed`] keeps for its backward pass.
pub struct Tape {
    ids: Tensor,
    mask: Tensor,
    table: Tensor,
    /// Each layer's input (the embeddings' output first), detached.
    inputs: Vec<Tensor>,
    /// The last layer's output, a leaf of the loss's graph.
    out: candle_core::Var,
}

/// The encoder: embeddings and transformer layers (no pooler).
pub struct Bert {
    word: Embedding,
    position: Embedding,
    token_type: Option<Tensor>,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
    /// Its configuration.
    pub config: Config,
    device: Device,
    /// Training runs each layer's attention as one op with its gradient
    /// ([`attention::attention`], the query, key and value layers one
    /// product) rather than the heads' products and soft-max.
    fused_attention: bool,
}

fn linear(inp: usize, out: usize, vb: VarBuilder) -> Result<Linear> {
    Ok(candle_nn::linear(inp, out, vb)?)
}

impl Bert {
    /// Loads the encoder's weights from `vb` under Hugging Face names (a
    /// `bert.` or `roberta.` prefix is accepted).
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Bert> {
        config
            .check()
            .map_err(|e| Error::invalid(format!("config.json: {e}")))?;
        let vb = ["bert", "roberta", "model"]
            .into_iter()
            .find(|p| vb.contains_tensor(&format!("{p}.embeddings.word_embeddings.weight")))
            .map(|p| vb.pp(p))
            .unwrap_or(vb);
        let h = config.hidden_size;
        let e = vb.pp("embeddings");
        let word = candle_nn::embedding(config.vocab_size, h, e.pp("word_embeddings"))?;
        let position = candle_nn::embedding(
            config.max_position_embeddings,
            h,
            e.pp("position_embeddings"),
        )?;
        let token_type = if config.type_vocab_size > 0 {
            Some(
                e.pp("token_type_embeddings")
                    .get((config.type_vocab_size, h), "weight")?,
            )
        } else {
            None
        };
        let emb_norm = LayerNorm::load(h, config.layer_norm_eps, e.pp("LayerNorm"))?;
        // grown layer by layer: a size no weights hold is never allocated
        let mut layers = Vec::new();
        for l in 0..config.num_hidden_layers {
            let v = vb.pp(format!("encoder.layer.{l}"));
            let a = v.pp("attention");
            let f = config.intermediate_size;
            layers.push(Layer {
                query: linear(h, h, a.pp("self").pp("query"))?,
                key: linear(h, h, a.pp("self").pp("key"))?,
                value: linear(h, h, a.pp("self").pp("value"))?,
                attn_out: linear(h, h, a.pp("output").pp("dense"))?,
                attn_norm: LayerNorm::load(
                    h,
                    config.layer_norm_eps,
                    a.pp("output").pp("LayerNorm"),
                )?,
                inter: linear(h, f, v.pp("intermediate").pp("dense"))?,
                out: linear(f, h, v.pp("output").pp("dense"))?,
                out_norm: LayerNorm::load(
                    h,
                    config.layer_norm_eps,
                    v.pp("output").pp("LayerNorm"),
                )?,
            });
        }
        Ok(Bert {
            word,
            position,
            token_type,
            emb_norm,
            layers,
            config: config.clone(),
            device: vb.device().clone(),
            // `attention=auto`: see [`Bert::set_fused_attention`]
            fused_attention: vb.device().is_cpu(),
        })
    }

    /// Whether training runs the fused attention or the composite one (the
    /// heads' batched products and the masked soft-max); the values and
    /// gradients agree to float rounding. A loaded encoder starts as
    /// `attention=auto` has it: fused on the CPU, composite on a GPU (the
    /// fused kernels have not yet run on one).
    pub fn set_fused_attention(&mut self, fused: bool) {
        self.fused_attention = fused;
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The word-embedding table (`[vocab, hidden]`).
    pub fn word_embeddings(&self) -> &Tensor {
        self.word.embeddings()
    }

    /// Hidden states `[batch, tokens, hidden]` of `ids` (`[batch, tokens]`,
    /// u32) with `mask` (`[batch, tokens]`, f32: 1 a token, 0 padding).
    /// `train` selects differentiable kernels (no dropout either way).
    pub fn forward(&self, ids: &Tensor, mask: &Tensor, train: bool) -> Result<Tensor> {
        self.forward_with(ids, mask, self.word.embeddings(), train)
    }

    /// [`Bert::forward`] while training, with the word-embedding rows taken
    /// from `table` (the rows a batch uses) and `ids` local to it.
    pub fn forward_rows(&self, ids: &Tensor, mask: &Tensor, table: &Tensor) -> Result<Tensor> {
        self.forward_with(ids, mask, table, true)
    }

    /// The embedding layer's output `[batch, tokens, hidden]`: the word
    /// rows of `ids` in `table`, the positions and the first token type,
    /// layer-normed.
    fn embed(&self, ids: &Tensor, table: &Tensor, train: bool) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let off = self.config.position_offset();
        if off + t > self.config.max_position_embeddings {
            return Err(Error::invalid(format!(
                "{t} tokens exceed the model's {} positions",
                self.config.max_tokens()
            )));
        }
        let pos: Vec<u32> = (off as u32..(off + t) as u32).collect();
        let pos = Tensor::new(pos.as_slice(), &self.device)?;
        let h = self.config.hidden_size;
        // the gather whose gradient scatters in parallel on a GPU
        let mut x = rows::gather_rows(table, &ids.flatten_all()?)?.reshape((b, t, h))?;
        x = x.broadcast_add(&self.position.forward(&pos)?)?;
        if let Some(tt) = &self.token_type {
            x = x.broadcast_add(&tt.narrow(0, 0, 1)?)?;
        }
        self.emb_norm.forward(&x, train)
    }

    /// [`Bert::forward_rows`] with activation checkpointing (gradient
    /// checkpointing, as `transformers`' `gradient_checkpointing_enable`):
    /// the layers run without keeping their intermediate values; only each
    /// layer's input is kept, in the returned [`Tape`]. The hidden states
    /// returned are a leaf of the graph: after the loss's backward pass,
    /// [`Bert::backward_tape`] carries their gradient down through the
    /// layers (each recomputed from its input, one at a time) into the
    /// weights' and `table`'s gradients. The values and gradients are those
    /// of [`Bert::forward_rows`] (the same arithmetic; only the order in
    /// which a weight's gradient sums its parts differs); the memory held is
    /// one `[batch, tokens, hidden]` tensor per layer and one layer's
    /// intermediates at a time, for about a third more arithmetic.
    pub fn forward_checkpointed(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        table: &Tensor,
    ) -> Result<(Tensor, Tape)> {
        let half = precision::current() == precision::Precision::Bf16;
        let mut x = self.embed(ids, table, true)?.detach();
        let mut inputs = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let next = self.train_layer(layer, &x, mask, half)?.detach();
            inputs.push(x);
            x = next;
        }
        let out = candle_core::Var::from_tensor(&x)?;
        let hidden = out.as_tensor().clone();
        Ok((
            hidden,
            Tape {
                ids: ids.clone(),
                mask: mask.clone(),
                table: table.clone(),
                inputs,
                out,
            },
        ))
    }

    /// The backward pass of a [`Bert::forward_checkpointed`] call: takes the
    /// gradient of its hidden states out of `grads` (nothing to do when the
    /// loss did not reach them) and adds the gradients of the weights and of
    /// the tape's word table to `grads`, layer by layer from the top, each
    /// layer recomputed from its kept input.
    pub fn backward_tape(&self, tape: Tape, grads: &mut GradStore) -> Result<()> {
        let Some(mut g) = grads.remove(tape.out.as_tensor()) else {
            return Ok(());
        };
        let half = precision::current() == precision::Precision::Bf16;
        for (layer, input) in self.layers.iter().zip(&tape.inputs).rev() {
            let xin = candle_core::Var::from_tensor(input)?;
            let y = self.train_layer(layer, xin.as_tensor(), &tape.mask, half)?;
            let mut part = (y * &g)?.sum_all()?.backward()?;
            // candle's product gives its untracked factor `g` a gradient
            // too, `ones · y`, which holds the recomputed layer's graph
            // alive: dropped, or the layers' graphs would pile up
            part.remove(&g);
            g = part.remove(xin.as_tensor()).ok_or_else(|| {
                Error::invalid("gradient checkpointing: a layer's input got no gradient")
            })?;
            grads.extend(part)?;
        }
        let x0 = self.embed(&tape.ids, &tape.table, true)?;
        let mut part = (x0 * &g)?.sum_all()?.backward()?;
        part.remove(&g);
        grads.extend(part)?;
        Ok(())
    }

    fn forward_with(
        &self,
        ids: &Tensor,
        mask: &Tensor,
        table: &Tensor,
        train: bool,
    ) -> Result<Tensor> {
        let (b, t) = ids.dims2()?;
        let h = self.config.hidden_size;
        let mut x = self.embed(ids, table, train)?;
        if train {
            let half = precision::current() == precision::Precision::Bf16;
            for layer in &self.layers {
                x = self.train_layer(layer, &x, mask, half)?;
            }
            return Ok(x);
        }
        let nh = self.config.num_attention_heads;
        let hd = h / nh;
        // additive mask: 0 for tokens, a large negative for padding
        let neg = ((mask.ones_like()? - mask)? * -1e9f64)?
            .reshape((b, 1, 1, t))?
            .to_dtype(x.dtype())?;
        let scale = 1.0 / (hd as f64).sqrt();
        for layer in &self.layers {
            let heads = |lin: &Linear| -> Result<Tensor> {
                Ok(dense(lin, &x)?
                    .reshape((b, t, nh, hd))?
                    .transpose(1, 2)?
                    .contiguous()?)
            };
            let q = (heads(&layer.query)? * scale)?;
            let k = heads(&layer.key)?;
            let v = heads(&layer.value)?;
            let scores = precision::matmul(&q, &k.t()?)?.broadcast_add(&neg)?;
            let p = candle_nn::ops::softmax_last_dim(&scores)?;
            let ctx = precision::matmul(&p, &v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((b, t, h))?;
            let a = dense(&layer.attn_out, &ctx)?;
            x = layer.attn_norm.forward(&(a + &x)?, false)?;
            let mid = dense(&layer.inter, &x)?;
            let mid = match self.config.hidden_act.as_str() {
                "relu" => mid.relu()?,
                "gelu_new" => mid.gelu()?,
                // f32 on the CPU: the vectorised loop training uses
                // (`kit::vmath`, PyTorch's erf approximation), where
                // candle's evaluates libm's erf value by value
                _ if mid.device().is_cpu() && mid.dtype() == DType::F32 => fused::gelu_erf(&mid)?,
                _ => mid.gelu_erf()?,
            };
            let o = dense(&layer.out, &mid)?;
            x = layer.out_norm.forward(&(o + &x)?, false)?;
        }
        Ok(x)
    }

    /// One transformer layer as training runs it (`x`: `[batch, tokens,
    /// hidden]`, `f32`): every dense product one 2-D matrix product of the
    /// batch's token rows (its weight's gradient one product too, not one
    /// per text summed), the attention's scaled, masked soft-max, the layer
    /// norms and the GELU each one fused op with its gradient
    /// ([`fused`]). With `half` (`precision=bf16`) the products, the
    /// attention and the GELU run on bfloat16 activations (cast from the
    /// `f32` weights, which keep their `f32` gradients) and the residual
    /// stream and layer norms stay `f32`: PyTorch's autocast.
    fn train_layer(&self, layer: &Layer, x: &Tensor, mask: &Tensor, half: bool) -> Result<Tensor> {
        let (b, t, h) = x.dims3()?;
        let nh = self.config.num_attention_heads;
        let hd = h / nh;
        let inner = if half { DType::BF16 } else { x.dtype() };
        let xi = x.to_dtype(inner)?;
        let heads = |lin: &Linear| -> Result<Tensor> {
            Ok(rows_dense(lin, &xi, half)?
                .reshape((b, t, nh, hd))?
                .transpose(1, 2)?
                .contiguous()?)
        };
        let mm = |a: &Tensor, b: &Tensor| -> Result<Tensor> {
            if half {
                precision::bf16_matmul(a, b)
            } else {
                Ok(a.matmul(b)?)
            }
        };
        let scale = 1.0 / (hd as f64).sqrt();
        let ctx = if self.fused_attention && attention::fits(t) {
            // the three layers as one product of their stacked weights
            let (l0, l1, l2) = (&layer.query, &layer.key, &layer.value);
            let w = Tensor::cat(&[l0.weight(), l1.weight(), l2.weight()], 0)?;
            let bias = match (l0.bias(), l1.bias(), l2.bias()) {
                (Some(a), Some(b), Some(c)) => Some(Tensor::cat(&[a, b, c], 0)?),
                _ => None,
            };
            let qkv = rows_affine(&xi, &w, bias.as_ref(), half)?;
            attention::attention(&qkv, mask, nh, scale)?
        } else {
            let (q, k, v) = (
                heads(&layer.query)?,
                heads(&layer.key)?,
                heads(&layer.value)?,
            );
            let scores = mm(&q, &k.t()?)?;
            let p = fused::masked_softmax(&scores, mask, scale)?;
            mm(&p, &v)?
                .transpose(1, 2)?
                .contiguous()?
                .reshape((b, t, h))?
        };
        let a = rows_dense(&layer.attn_out, &ctx, half)?.to_dtype(x.dtype())?;
        let n = &layer.attn_norm;
        let x = fused::layer_norm(&(a + x)?, &n.weight, &n.bias, n.eps)?;
        let mid = rows_dense(&layer.inter, &x.to_dtype(inner)?, half)?;
        let mid = match self.config.hidden_act.as_str() {
            "relu" => mid.relu()?,
            "gelu_new" => mid.gelu()?,
            _ => fused::gelu_erf(&mid)?,
        };
        let o = rows_dense(&layer.out, &mid, half)?.to_dtype(x.dtype())?;
        let n = &layer.out_norm;
        fused::layer_norm(&(o + &x)?, &n.weight, &n.bias, n.eps)
    }
}

/// `lin`'s `x · Wᵀ + b` over the rows of `x` (`[.., in]`) as one 2-D
/// product, in bfloat16 with `half` (the weight and bias cast, the result
/// bfloat16), in `x`'s dtype otherwise.
fn rows_dense(lin: &Linear, x: &Tensor, half: bool) -> Result<Tensor> {
    rows_affine(x, lin.weight(), lin.bias(), half)
}

/// [`rows_dense`] of a weight `[out, in]` and a bias `[out]`: with a bias,
/// one [`fused::affine`] op, which keeps only its input for the backward pass.
fn rows_affine(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>, half: bool) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let inner = *dims.last().unwrap_or(&1);
    let rows = x.elem_count() / inner.max(1);
    let x2 = x.reshape((rows, inner))?;
    let y = match (bias, half) {
        (Some(b), true) => precision::bf16_affine(&x2, weight, b)?,
        (Some(b), false) => fused::affine(&x2, weight, b)?,
        (None, true) => precision::bf16_matmul(&x2, &weight.t()?)?,
        (None, false) => x2.matmul(&weight.t()?)?,
    };
    let mut shape = dims;
    if let Some(last) = shape.last_mut() {
        *last = y.dim(1)?;
    }
    Ok(y.reshape(shape)?)
}

/// `lin`'s `x · Wᵀ + b` at the thread's precision ([`precision::matmul`]):
/// candle's `Linear` itself under f32 and tf32 (the same ops, bit for bit);
/// under bf16 one 2-D product of the rows of `x` (a broadcast weight would
/// be copied per batch row by the conversion).
fn dense(lin: &Linear, x: &Tensor) -> Result<Tensor> {
    if precision::current() != precision::Precision::Bf16 {
        return Ok(lin.forward(x)?);
    }
    let dims = x.dims().to_vec();
    let inner = *dims.last().unwrap_or(&1);
    let rows = x.elem_count() / inner.max(1);
    let y = precision::matmul(&x.reshape((rows, inner))?, &lin.weight().t()?)?;
    let mut shape = dims;
    if let Some(last) = shape.last_mut() {
        *last = y.dim(1)?;
    }
    let y = y.reshape(shape)?;
    Ok(match lin.bias() {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    })
}

/// Masked mean of hidden states (`[batch, tokens, hidden]`) over `mask`
/// (`[batch, tokens]`): `[batch, hidden]` (not normalised).
pub fn mean_pool(hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let m = mask.unsqueeze(2)?.to_dtype(hidden.dtype())?;
    let sum = hidden.broadcast_mul(&m)?.sum(1)?;
    let n = m.sum(1)?.clamp(1e-9, f64::MAX)?;
    Ok(sum.broadcast_div(&n)?)
}

/// The first token's hidden state (`[CLS]` / `<s>`): `[batch, hidden]`.
pub fn cls_pool(hidden: &Tensor) -> Result<Tensor> {
    Ok(hidden.narrow(1, 0, 1)?.squeeze(1)?)
}

/// Rows scaled to unit length (a zero row stays zero).
pub fn l2_normalise(x: &Tensor) -> Result<Tensor> {
    let n = x
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12, f64::MAX)?;
    Ok(x.broadcast_div(&n)?)
}

/// The dtype the encoder computes in.
pub const DTYPE: DType = DType::F32;
