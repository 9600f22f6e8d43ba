//! A transformer layer's multi-head self-attention as one op with its
//! gradient ([`attention`]): `softmax(scale · Q Kᵀ + mask) V` for every text
//! and head, read from the packed product of the query, key and value layers
//! and written as the context the output layer reads.
//!
//! Built from candle's ops, the attention is four copies into and out of the
//! heads' layout, two batched products and the soft-max, and the backward
//! pass keeps the `batch × heads × tokens × tokens` scores and probabilities
//! (twice the size of the layer's own activations at 128 tokens). Here the
//! scores never leave the op: the forward pass keeps only its input and its
//! output, and the backward pass recomputes each row's probabilities (as
//! flash attention does). On CUDA: `kernels/attn.cu`, one kernel forward
//! and two backward, a warp per row; on the CPU: loops over (text, head) in
//! parallel (rayon), from the same calls.
//!
//! Contract: `qkv` is `[batch, tokens, 3 · hidden]`, the queries in its first
//! `hidden` columns, the keys in the next, the values in the last (one
//! product of the three layers' stacked weights), each head's `hidden /
//! heads` columns side by side; `mask` is `[batch, tokens]`, 1 a token and 0
//! padding (a padded key gets −10⁹, as [`super::fused::masked_softmax`]
//! adds). Storage `f32`, `f64` or bfloat16 (arithmetic `f32`, `f64` for
//! `f64`), the result in `qkv`'s dtype. Every query row is computed, a
//! padded one too, so the values are those of the composite attention.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Layout, Shape, Tensor};
use rayon::prelude::*;

use super::fused::{f32_of, store_f32, vals, Num, Vals, MASKED};
use crate::{Error, Result};

/// The most tokens a text may have in the op on a GPU (a warp's row of
/// scores lives in shared memory); [`fits`] says whether a batch may use it.
pub const MAX_TOKENS: usize = 512;

/// Whether a batch of `tokens` tokens a text runs through [`attention`]
/// (the composite attention otherwise).
pub fn fits(tokens: usize) -> bool {
    tokens <= MAX_TOKENS
}

/// The shape of one call.
#[derive(Debug, Clone, Copy)]
struct Geo {
    b: usize,
    t: usize,
    heads: usize,
    d: usize,
    scale: f64,
}

impl Geo {
    fn hidden(&self) -> usize {
        self.heads * self.d
    }
}

/// Multi-head attention of the packed `qkv` (`[batch, tokens, 3 · hidden]`)
/// under `mask` (`[batch, tokens]`) with `heads` heads and the scores scaled
/// by `scale`: the context `[batch, tokens, hidden]`, heads side by side, in
/// `qkv`'s dtype. Its gradient reaches `qkv` only.
pub fn attention(qkv: &Tensor, mask: &Tensor, heads: usize, scale: f64) -> Result<Tensor> {
    let (b, t, w) = qkv.dims3()?;
    if heads == 0 || !w.is_multiple_of(3 * heads) {
        return Err(Error::invalid(format!(
            "attention: {w} packed columns do not split into query, key and value of {heads} heads"
        )));
    }
    if mask.dims2()? != (b, t) {
        return Err(Error::invalid(format!(
            "attention: a mask of {:?} for {b} texts of {t} tokens",
            mask.dims()
        )));
    }
    if t > MAX_TOKENS && qkv.device().is_cuda() {
        return Err(Error::invalid(format!(
            "attention: {t} tokens a text, at most {MAX_TOKENS} on a GPU"
        )));
    }
    let geo = Geo {
        b,
        t,
        heads,
        d: w / (3 * heads),
        scale,
    };
    let mask = mask.to_dtype(DType::F32)?.contiguous()?.detach();
    Ok(qkv.contiguous()?.apply_op1(Attention { mask, geo })?)
}

struct Attention {
    mask: Tensor,
    geo: Geo,
}

/// The gradient: `(qkv, dout)` → `dqkv`, with the forward pass's output.
struct AttentionGrad {
    mask: Tensor,
    out: Tensor,
    geo: Geo,
}

/// A CPU tensor's contiguous `f32` values (its mask).
fn host_f32(t: &Tensor, op: &'static str) -> candle_core::Result<Vec<f32>> {
    let (s, l) = t.storage_and_layout();
    match &*s {
        candle_core::Storage::Cpu(c) => f32_of(c, l, op),
        _ => candle_core::bail!("{op}: the tensors are on different devices"),
    }
}

/// `(text, head)` blocks of `t × d` values scattered into `[b, t, cols]`
/// at column offset `at(head)`.
fn scatter<T: Copy + Send + Sync>(
    blocks: Vec<Vec<T>>,
    geo: Geo,
    cols: usize,
    at: impl Fn(usize) -> usize,
    out: &mut [T],
) {
    let Geo { t, heads, d, .. } = geo;
    for (bn, blk) in blocks.into_iter().enumerate() {
        let (bi, n) = (bn / heads, bn % heads);
        for i in 0..t {
            let row = (bi * t + i) * cols + at(n);
            out[row..row + d].copy_from_slice(&blk[i * d..(i + 1) * d]);
        }
    }
}

/// The keys' additive biases of text `bi`.
fn key_bias<T: Num>(mask: &[f32], bi: usize, t: usize) -> Vec<T> {
    mask[bi * t..(bi + 1) * t]
        .iter()
        .map(|&m| if m > 0.5 { T::ZERO } else { T::of(MASKED) })
        .collect()
}

fn dot<T: Num>(a: &[T], b: &[T]) -> T {
    a.iter().zip(b).fold(T::ZERO, |acc, (&x, &y)| acc + x * y)
}

/// Row `i`'s probabilities into `p` (length `t`).
fn probs<T: Num>(
    q: &[T],
    key: impl Fn(usize) -> usize,
    qkv: &[T],
    bias: &[T],
    geo: Geo,
    p: &mut [T],
) {
    let scale = T::of(geo.scale);
    let mut m = T::of(f64::NEG_INFINITY);
    for (j, pj) in p.iter_mut().enumerate() {
        let k = key(j);
        let s = scale * dot(q, &qkv[k..k + geo.d]) + bias[j];
        *pj = s;
        if s > m {
            m = s;
        }
    }
    let mut l = T::ZERO;
    for pj in p.iter_mut() {
        *pj = (*pj - m).exp();
        l = l + *pj;
    }
    let inv = T::of(1.0) / l;
    for pj in p.iter_mut() {
        *pj = *pj * inv;
    }
}

fn fwd_cpu<T: Num>(qkv: &[T], mask: &[f32], geo: Geo) -> Vec<T> {
    let Geo { b, t, heads, d, .. } = geo;
    let h = geo.hidden();
    let w = 3 * h;
    let blocks: Vec<Vec<T>> = (0..b * heads)
        .into_par_iter()
        .map(|bn| {
            let (bi, n) = (bn / heads, bn % heads);
            let bias = key_bias::<T>(mask, bi, t);
            let at = |i: usize, part: usize| (bi * t + i) * w + part * h + n * d;
            let mut out = vec![T::ZERO; t * d];
            let mut p = vec![T::ZERO; t];
            for i in 0..t {
                let q = &qkv[at(i, 0)..at(i, 0) + d];
                probs(q, |j| at(j, 1), qkv, &bias, geo, &mut p);
                let o = &mut out[i * d..(i + 1) * d];
                for (j, &pj) in p.iter().enumerate() {
                    let v = &qkv[at(j, 2)..at(j, 2) + d];
                    for (oe, &ve) in o.iter_mut().zip(v) {
                        *oe = *oe + pj * ve;
                    }
                }
            }
            out
        })
        .collect();
    let mut out = vec![T::ZERO; b * t * h];
    scatter(blocks, geo, h, |n| n * d, &mut out);
    out
}

fn bwd_cpu<T: Num>(qkv: &[T], out: &[T], dout: &[T], mask: &[f32], geo: Geo) -> Vec<T> {
    let Geo { b, t, heads, d, .. } = geo;
    let h = geo.hidden();
    let w = 3 * h;
    let scale = T::of(geo.scale);
    // per (text, head): dq, dk, dv as t × d blocks
    let blocks: Vec<[Vec<T>; 3]> = (0..b * heads)
        .into_par_iter()
        .map(|bn| {
            let (bi, n) = (bn / heads, bn % heads);
            let bias = key_bias::<T>(mask, bi, t);
            let at = |i: usize, part: usize| (bi * t + i) * w + part * h + n * d;
            let ctx = |i: usize| (bi * t + i) * h + n * d;
            let (mut dq, mut dk, mut dv) = (
                vec![T::ZERO; t * d],
                vec![T::ZERO; t * d],
                vec![T::ZERO; t * d],
            );
            let mut p = vec![T::ZERO; t];
            for i in 0..t {
                let q = &qkv[at(i, 0)..at(i, 0) + d];
                probs(q, |j| at(j, 1), qkv, &bias, geo, &mut p);
                let g = &dout[ctx(i)..ctx(i) + d];
                let di = dot(g, &out[ctx(i)..ctx(i) + d]);
                for (j, &pj) in p.iter().enumerate() {
                    let k = &qkv[at(j, 1)..at(j, 1) + d];
                    let v = &qkv[at(j, 2)..at(j, 2) + d];
                    let ds = scale * pj * (dot(g, v) - di);
                    for e in 0..d {
                        dv[j * d + e] = dv[j * d + e] + pj * g[e];
                        dq[i * d + e] = dq[i * d + e] + ds * k[e];
                        dk[j * d + e] = dk[j * d + e] + ds * q[e];
                    }
                }
            }
            [dq, dk, dv]
        })
        .collect();
    let mut grad = vec![T::ZERO; b * t * w];
    let mut parts: [Vec<Vec<T>>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for [q, k, v] in blocks {
        parts[0].push(q);
        parts[1].push(k);
        parts[2].push(v);
    }
    for (part, blocks) in parts.into_iter().enumerate() {
        scatter(blocks, geo, w, |n| part * h + n * d, &mut grad);
    }
    grad
}

impl CustomOp1 for Attention {
    fn name(&self) -> &'static str {
        "rosetta-attention"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let mask = host_f32(&self.mask, "attention")?;
        let geo = self.geo;
        let out = match vals(s, l, "attention")? {
            Vals::F32(x) => store_f32(s, fwd_cpu(&x, &mask, geo)),
            Vals::F64(x) => CpuStorage::F64(fwd_cpu(x, &mask, geo)),
        };
        Ok((out, Shape::from((geo.b, geo.t, geo.hidden()))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let (m, ml) = self.mask.storage_and_layout();
        let candle_core::Storage::Cuda(m) = &*m else {
            candle_core::bail!("attention: the mask is not on the GPU");
        };
        let out = gpu::forward((s, l), (m, ml), self.geo)?;
        let g = self.geo;
        Ok((out, Shape::from((g.b, g.t, g.hidden()))))
    }

    fn bwd(
        &self,
        qkv: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let g = qkv.apply_op2_no_bwd(
            &grad.to_dtype(qkv.dtype())?.contiguous()?,
            &AttentionGrad {
                mask: self.mask.clone(),
                out: res.detach(),
                geo: self.geo,
            },
        )?;
        Ok(Some(g))
    }
}

impl CustomOp2 for AttentionGrad {
    fn name(&self) -> &'static str {
        "rosetta-attention-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let op = "attention gradient";
        let mask = host_f32(&self.mask, op)?;
        let (os, ol) = self.out.storage_and_layout();
        let candle_core::Storage::Cpu(os) = &*os else {
            candle_core::bail!("{op}: the tensors are on different devices");
        };
        let geo = self.geo;
        let grad = match (vals(s1, l1, op)?, vals(os, ol, op)?, vals(s2, l2, op)?) {
            (Vals::F32(x), Vals::F32(o), Vals::F32(g)) => {
                store_f32(s1, bwd_cpu(&x, &o, &g, &mask, geo))
            }
            (Vals::F64(x), Vals::F64(o), Vals::F64(g)) => {
                CpuStorage::F64(bwd_cpu(x, o, g, &mask, geo))
            }
            _ => candle_core::bail!("{op}: the inputs differ in dtype"),
        };
        Ok((grad, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let op = "attention gradient";
        let (m, ml) = self.mask.storage_and_layout();
        let candle_core::Storage::Cuda(m) = &*m else {
            candle_core::bail!("{op}: the mask is not on the GPU");
        };
        let (o, ol) = self.out.storage_and_layout();
        let candle_core::Storage::Cuda(o) = &*o else {
            candle_core::bail!("{op}: the output is not on the GPU");
        };
        let grad = gpu::backward((s1, l1), (m, ml), (o, ol), (s2, l2), self.geo)?;
        Ok((grad, l1.shape().clone()))
    }
}

/// Launching `kernels/attn.cu` (built into PTX by build.rs).
#[cfg(feature = "cuda")]
mod gpu {
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
    use candle_core::{CudaStorage, Layout};
    use half::bf16;

    use super::Geo;
    use crate::models::kit::rows::gpu::range;

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/attn.ptx"));
    const MODULE: &str = "rosetta_attn";
    /// Warps (rows) per block.
    const WARPS: usize = 8;

    type Arg<'a> = (&'a CudaStorage, &'a Layout);

    /// A warp a row of one (text, head); `floats` per warp of shared memory.
    fn cfg(geo: Geo, floats: usize) -> LaunchConfig {
        let row_blocks = geo.t.div_ceil(WARPS);
        LaunchConfig {
            grid_dim: ((geo.b * row_blocks) as u32, geo.heads as u32, 1),
            block_dim: (32 * WARPS as u32, 1, 1),
            shared_mem_bytes: (WARPS * floats * 4) as u32,
        }
    }

    /// Pushes the kernels' last five arguments, `dims`' tuple: texts,
    /// tokens, heads, a head's columns and the scale.
    macro_rules! geo_args {
        ($bld:ident, $args:ident) => {{
            let (b, t, heads, d, scale) = &$args;
            $bld.arg(b);
            $bld.arg(t);
            $bld.arg(heads);
            $bld.arg(d);
            $bld.arg(scale);
        }};
    }

    fn dims(geo: Geo) -> (u32, u32, u32, u32, f32) {
        (
            geo.b as u32,
            geo.t as u32,
            geo.heads as u32,
            geo.d as u32,
            geo.scale as f32,
        )
    }

    pub fn forward(qkv: Arg, mask: Arg, geo: Geo) -> candle_core::Result<CudaStorage> {
        let op = "attention";
        let dev = qkv.0.device.clone();
        let n = geo.b * geo.t * geo.hidden();
        let mv = mask.0.as_cuda_slice::<f32>()?.slice(range(mask, op)?);
        let args = dims(geo);
        let qr = range(qkv, op)?;
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let xv = qkv.0.as_cuda_slice::<$t>()?.slice(qr.clone());
                // SAFETY: the kernel writes every one of the n values.
                let mut out = unsafe { dev.alloc::<$t>(n) }?;
                if n > 0 {
                    let f = dev.get_or_load_custom_func(concat!("attn_fwd_", $s), MODULE, PTX)?;
                    let mut bld = f.builder();
                    bld.arg(&xv);
                    bld.arg(&mv);
                    bld.arg(&mut out);
                    geo_args!(bld, args);
                    // SAFETY: qkv holds b·t·3·heads·d values, the mask b·t,
                    // out b·t·heads·d; a warp's t floats of shared memory.
                    unsafe { bld.launch(cfg(geo, geo.t)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &qkv.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::BF16(_) => run!(bf16, "bf16"),
            _ => candle_core::bail!("{op}: f32 or bf16 values expected on a GPU"),
        })
    }

    pub fn backward(
        qkv: Arg,
        mask: Arg,
        out: Arg,
        dout: Arg,
        geo: Geo,
    ) -> candle_core::Result<CudaStorage> {
        let op = "attention gradient";
        let dev = qkv.0.device.clone();
        let n = 3 * geo.b * geo.t * geo.hidden();
        let mv = mask.0.as_cuda_slice::<f32>()?.slice(range(mask, op)?);
        let args = dims(geo);
        let (qr, or, gr) = (range(qkv, op)?, range(out, op)?, range(dout, op)?);
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let xv = qkv.0.as_cuda_slice::<$t>()?.slice(qr.clone());
                let ov = out.0.as_cuda_slice::<$t>()?.slice(or.clone());
                let gv = dout.0.as_cuda_slice::<$t>()?.slice(gr.clone());
                // SAFETY: the two kernels write every one of the n values
                // (dq columns, then dk and dv), and both stat rows.
                let mut grad = unsafe { dev.alloc::<$t>(n) }?;
                let mut stats = unsafe { dev.alloc::<f32>(2 * geo.b * geo.heads * geo.t) }?;
                if n > 0 {
                    let f = dev.get_or_load_custom_func(concat!("attn_bwd_q_", $s), MODULE, PTX)?;
                    let mut bld = f.builder();
                    bld.arg(&xv);
                    bld.arg(&mv);
                    bld.arg(&ov);
                    bld.arg(&gv);
                    bld.arg(&mut grad);
                    bld.arg(&mut stats);
                    geo_args!(bld, args);
                    // SAFETY: sizes as in `forward`, grad b·t·3·heads·d,
                    // stats 2·b·heads·t; a warp's t floats of shared memory.
                    unsafe { bld.launch(cfg(geo, geo.t)) }.w()?;
                    let f =
                        dev.get_or_load_custom_func(concat!("attn_bwd_kv_", $s), MODULE, PTX)?;
                    let mut bld = f.builder();
                    bld.arg(&xv);
                    bld.arg(&mv);
                    bld.arg(&gv);
                    bld.arg(&stats);
                    bld.arg(&mut grad);
                    geo_args!(bld, args);
                    // SAFETY: as above; a warp's 2·t floats of shared memory;
                    // the same stream orders it after the first kernel.
                    unsafe { bld.launch(cfg(geo, 2 * geo.t)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(grad, dev.clone())
            }};
        }
        Ok(match &qkv.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::BF16(_) => run!(bf16, "bf16"),
            _ => candle_core::bail!("{op}: f32 or bf16 values expected on a GPU"),
        })
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor, Var};

    use super::*;
    use crate::models::kit::fused::masked_softmax;
    use crate::models::kit::fused::tests::close;

    /// The composite attention the op replaces: the heads split out, two
    /// batched products and the masked soft-max.
    pub(super) fn composite(qkv: &Tensor, mask: &Tensor, heads: usize, scale: f64) -> Tensor {
        let (b, t, w) = qkv.dims3().unwrap();
        let h = w / 3;
        let d = h / heads;
        let part = |i: usize| {
            qkv.narrow(2, i * h, h)
                .unwrap()
                .reshape((b, t, heads, d))
                .unwrap()
                .transpose(1, 2)
                .unwrap()
                .contiguous()
                .unwrap()
        };
        let (q, k, v) = (part(0), part(1), part(2));
        let s = q.matmul(&k.t().unwrap()).unwrap();
        let p = masked_softmax(&s, mask, scale).unwrap();
        p.matmul(&v)
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
            .reshape((b, t, h))
            .unwrap()
    }

    pub(super) fn inputs(dev: &Device, dtype: DType) -> (Tensor, Tensor) {
        let (b, t, heads, d) = (3usize, 37usize, 4usize, 8usize);
        let n = b * t * 3 * heads * d;
        let x: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.377).sin() * 1.5).collect();
        let x = Tensor::from_vec(x, (b, t, 3 * heads * d), dev)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        let mut m = vec![1f32; b * t];
        m[t + 30..2 * t].fill(0.0);
        m[2 * t + 5..3 * t].fill(0.0);
        (x, Tensor::from_vec(m, (b, t), dev).unwrap())
    }

    /// Values of `f(qkv)` and the gradient of `Σ f(qkv) · r` for a fixed
    /// pattern `r`.
    pub(super) fn value_and_grad(
        qkv: &Tensor,
        f: &dyn Fn(&Tensor) -> Tensor,
    ) -> (Vec<f64>, Vec<f64>) {
        let var = Var::from_tensor(qkv).unwrap();
        let y = f(var.as_tensor());
        let r: Vec<f32> = (0..y.elem_count())
            .map(|i| (i as f32 * 0.91).cos())
            .collect();
        let r = Tensor::from_vec(r, y.shape(), y.device())
            .unwrap()
            .to_dtype(y.dtype())
            .unwrap();
        let g = (&y * r).unwrap().sum_all().unwrap().backward().unwrap();
        let v = |t: &Tensor| -> Vec<f64> {
            t.to_dtype(DType::F64)
                .unwrap()
                .to_device(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        (v(&y), v(g.get(var.as_tensor()).unwrap()))
    }

    #[test]
    fn attention_matches_the_composite_and_its_gradient() {
        for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 1e-5)] {
            let (x, mask) = inputs(&Device::Cpu, dtype);
            let fused = value_and_grad(&x, &|x| attention(x, &mask, 4, 0.35).unwrap());
            let comp = value_and_grad(&x, &|x| composite(x, &mask, 4, 0.35));
            close(&fused.0, &comp.0, tol, &format!("values {dtype:?}"));
            close(&fused.1, &comp.1, tol, &format!("gradient {dtype:?}"));
            // the padded keys are ignored, the padded queries computed
            assert!(fused.1.iter().any(|g| *g != 0.0));
        }
        // bfloat16 storage, f32 arithmetic: the f32 figures rounded
        let (x, mask) = inputs(&Device::Cpu, DType::BF16);
        let half = value_and_grad(&x, &|x| attention(x, &mask, 4, 0.35).unwrap());
        let (x32, _) = (x.to_dtype(DType::F32).unwrap(), ());
        let full = value_and_grad(&x32, &|x| attention(x, &mask, 4, 0.35).unwrap());
        close(&half.0, &full.0, 1e-2, "bf16 values");
        close(&half.1, &full.1, 3e-2, "bf16 gradient");
    }

    #[test]
    fn attention_gradient_agrees_with_finite_differences() {
        let (x, mask) = inputs(&Device::Cpu, DType::F64);
        let (_, g) = value_and_grad(&x, &|x| attention(x, &mask, 4, 0.35).unwrap());
        let base: Vec<f64> = x.flatten_all().unwrap().to_vec1().unwrap();
        let loss = |v: Vec<f64>| -> f64 {
            let x = Tensor::from_vec(v, x.shape(), &Device::Cpu).unwrap();
            let (y, _) = value_and_grad(&x, &|x| attention(x, &mask, 4, 0.35).unwrap());
            let r: Vec<f64> = (0..y.len())
                .map(|i| (i as f32 * 0.91).cos() as f64)
                .collect();
            y.iter().zip(&r).map(|(a, b)| a * b).sum()
        };
        let eps = 1e-6;
        // a query, a key and a value entry of several texts and heads
        for &i in &[0usize, 5, 40, 97, 130, 300, 2000, 3500] {
            let mut up = base.clone();
            up[i] += eps;
            let mut down = base.clone();
            down[i] -= eps;
            let fd = (loss(up) - loss(down)) / (2.0 * eps);
            assert!(
                (fd - g[i]).abs() <= 1e-7 + 1e-5 * fd.abs(),
                "entry {i}: analytic {} numeric {fd}",
                g[i]
            );
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        let (x, mask) = inputs(&Device::Cpu, DType::F32);
        let e = attention(&x, &mask, 5, 1.0).unwrap_err().to_string();
        assert!(e.contains("do not split"), "{e}");
        let short = mask.narrow(1, 0, 10).unwrap();
        let e = attention(&x, &short, 4, 1.0).unwrap_err().to_string();
        assert!(e.contains("mask"), "{e}");
    }
}

/// Run where a GPU opens (`ROSETTA_REQUIRE_GPU=1` makes its absence a
/// failure): `kernels/attn.cu` against the CPU's loops, values and
/// gradients, in f32 and in bfloat16, and at the largest size it takes.
#[cfg(all(test, feature = "cuda"))]
mod gpu_tests {
    use candle_core::{DType, Device, Tensor};

    use super::tests::{composite, inputs, value_and_grad};
    use super::*;
    use crate::models::kit::fused::gpu_tests::gpu;
    use crate::models::kit::fused::tests::close;

    #[test]
    fn the_attention_kernels_match_the_cpu() {
        let Some(dev) = gpu() else { return };
        for (dtype, tol) in [(DType::F32, 1e-4), (DType::BF16, 3e-2)] {
            let (x, mask) = inputs(&Device::Cpu, dtype);
            let cpu = value_and_grad(&x, &|x| attention(x, &mask, 4, 0.35).unwrap());
            let (xg, mg) = (x.to_device(&dev).unwrap(), mask.to_device(&dev).unwrap());
            let gpu = value_and_grad(&xg, &|x| attention(x, &mg, 4, 0.35).unwrap());
            close(&gpu.0, &cpu.0, tol, &format!("values {dtype:?}"));
            close(&gpu.1, &cpu.1, tol, &format!("gradient {dtype:?}"));
        }
        // e5-small's heads (12 of 32) at the most tokens the op takes, against
        // the composite attention on the GPU
        let (b, t, heads, d) = (2usize, MAX_TOKENS, 12usize, 32usize);
        let n = b * t * 3 * heads * d;
        let x: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.0137).sin()).collect();
        let x = Tensor::from_vec(x, (b, t, 3 * heads * d), &dev).unwrap();
        let mut m = vec![1f32; b * t];
        m[t + 100..].fill(0.0);
        let mask = Tensor::from_vec(m, (b, t), &dev).unwrap();
        let fused = value_and_grad(&x, &|x| attention(x, &mask, heads, 0.177).unwrap());
        let comp = value_and_grad(&x, &|x| composite(x, &mask, heads, 0.177));
        close(&fused.0, &comp.0, 1e-4, "values at 512 tokens");
        close(&fused.1, &comp.1, 1e-4, "gradient at 512 tokens");
    }
}
