//! A transformer layer's row operations as one op each way, with their
//! gradients: the attention's scaled, masked soft-max ([`masked_softmax`]),
//! the layer norm ([`layer_norm`]), the erf GELU ([`gelu_erf`]) and a dense
//! layer, product and bias ([`affine`]).
//!
//! Built from candle's element-wise ops, each of these is five to ten
//! passes over its tensor forward and as many backward, every one a kernel
//! launch and a full-size temporary on a GPU; the attention's soft-max runs
//! over `batch × heads × tokens × tokens` values, the largest tensors of a
//! fine-tuning step. Here each is one pass forward and one backward:
//! `kernels/tf.cu` on CUDA (a warp a row, warp-shuffle sums, no atomics: the
//! same figures at every launch), plain loops over rows in parallel on the
//! CPU (rayon), from the same calls.
//!
//! Storage: `f32` and `f64` everywhere, bfloat16 for the soft-max and the
//! GELU (arithmetic in `f32` on either device, as PyTorch's autocast runs
//! them); the layer norm takes `f32`/`f64` (autocast runs it in `f32`).
//! Contract: the values are contiguous in the shapes given (callers make
//! them so); a mask is `f32` or `f64`, 1 for a token and 0 for padding.

use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};
use half::bf16;
use rayon::prelude::*;

use crate::models::kit::rows::offsets;
use crate::{Error, Result};

/// The additive bias of a masked position, as the composite attention adds.
pub(super) const MASKED: f64 = -1e9;

/// `softmax(scale · scores + bias)` over the last axis of `scores`
/// (`[batch, heads, queries, keys]`), where `bias` is 0 at a key whose
/// `mask` (`[batch, keys]`) is 1 and −10⁹ where it is 0. The result has
/// `scores`' shape and dtype; its gradient reaches `scores` only.
pub fn masked_softmax(scores: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    let (b, h, q, k) = scores.dims4()?;
    let (mb, mk) = mask.dims2()?;
    if (mb, mk) != (b, k) {
        return Err(Error::invalid(format!(
            "masked soft-max: a mask of {mb} × {mk} for scores of {b} × {h} × {q} × {k}"
        )));
    }
    let mask = if mask.dtype() == DType::F32 {
        mask.contiguous()?
    } else {
        mask.to_dtype(DType::F32)?.contiguous()?
    };
    Ok(scores.contiguous()?.apply_op2(
        &mask.detach(),
        Softmax {
            scale,
            per_batch: h * q,
        },
    )?)
}

/// Layer norm over the last axis: `(x − mean) / √(var + eps) · weight + bias`
/// (the biased variance, as `torch.nn.LayerNorm`); gradients reach `x`,
/// `weight` and `bias`.
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
    let h = x.dim(candle_core::D::Minus1)?;
    if weight.dims1()? != h || bias.dims1()? != h {
        return Err(Error::invalid(format!(
            "layer norm: weight and bias of {} and {} for rows of {h}",
            weight.dims1()?,
            bias.dims1()?
        )));
    }
    Ok(x.contiguous()?.apply_op3(
        &weight.contiguous()?,
        &bias.contiguous()?,
        LayerNorm { eps },
    )?)
}

/// `x · wᵀ + b` over the rows of `x` (`x` `[rows, in]`, `w` `[out, in]`,
/// `b` `[out]`, one dtype): a dense layer as one op, the same values and
/// gradients as `x.matmul(&w.t())` then a broadcast add of `b`. The
/// difference is what the backward pass keeps: a bias op holds the product as
/// its input, so every dense layer's output was kept twice (the encoder's
/// peak heap fell by a quarter without it, docs/results.md); here only `x`
/// and `w` are held, and the bias is added into the product's own buffer on
/// the CPU (on a GPU, one bias kernel into a fresh buffer, the product freed
/// at once). The bias's gradient is one product with a row of ones (cuBLAS
/// on a GPU), where candle's broadcast add sums a strided column per block.
pub fn affine(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    let (_, k) = x.dims2()?;
    let (out, wk) = w.dims2()?;
    if wk != k || b.dims1()? != out || w.dtype() != x.dtype() || b.dtype() != x.dtype() {
        return Err(Error::invalid(format!(
            "affine: rows of {k} {:?} against a weight {out}×{wk} {:?} and {} bias values of {:?}",
            x.dtype(),
            w.dtype(),
            b.dims1()?,
            b.dtype()
        )));
    }
    Ok(x.contiguous()?
        .apply_op3(&w.contiguous()?, &b.contiguous()?, Affine)?)
}

/// GELU with the exact normal CDF: `x · Φ(x)` (`transformers`' `gelu`).
pub fn gelu_erf(x: &Tensor) -> Result<Tensor> {
    Ok(x.contiguous()?.apply_op1(Gelu)?)
}

struct Softmax {
    scale: f64,
    /// Rows of scores per row of the mask (`heads × queries`).
    per_batch: usize,
}
struct SoftmaxGrad {
    scale: f64,
}
struct LayerNorm {
    eps: f64,
}
/// Stacked `[2, rows, cols]`: the input's gradient, then the normalised
/// input (the weight's gradient is the column sums of `dy · x̂`).
struct LayerNormGrad {
    eps: f64,
}
struct Gelu;
struct GeluGrad;
struct Affine;

/// The working arithmetic of the CPU loops: `f64` for `f64` storage,
/// `f32` otherwise.
pub(super) trait Num:
    Copy
    + Send
    + Sync
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + 'static
{
    const ZERO: Self;
    fn of(v: f64) -> Self;
    fn exp(self) -> Self;
    fn sqrt(self) -> Self;
    fn erf(self) -> Self;
    /// The erf GELU of a block, `out[i] = x[i]·Φ(x[i])`.
    fn gelu_block(out: &mut [Self], x: &[Self]);
    /// Its gradient times `g`, `out[i] = g[i]·(Φ(x[i]) + x[i]·φ(x[i]))`.
    fn gelu_grad_block(out: &mut [Self], x: &[Self], g: &[Self]);
}

/// The erf GELU of a block, value by value with `T`'s own `erf` and `exp`.
fn gelu_exact<T: Num>(out: &mut [T], x: &[T]) {
    let (half, r2) = (T::of(0.5), T::of(std::f64::consts::FRAC_1_SQRT_2));
    for (o, &v) in out.iter_mut().zip(x) {
        *o = half * v * (T::of(1.0) + (v * r2).erf());
    }
}

/// The erf GELU's gradient of a block, value by value.
fn gelu_grad_exact<T: Num>(out: &mut [T], x: &[T], g: &[T]) {
    let (half, r2) = (T::of(0.5), T::of(std::f64::consts::FRAC_1_SQRT_2));
    let c = T::of(1.0 / (2.0 * std::f64::consts::PI).sqrt());
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(g) {
        let cdf = half * (T::of(1.0) + (v * r2).erf());
        let pdf = c * (T::ZERO - half * v * v).exp();
        *o = g * (cdf + v * pdf);
    }
}

impl Num for f32 {
    const ZERO: f32 = 0.0;
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn sqrt(self) -> f32 {
        f32::sqrt(self)
    }
    fn erf(self) -> f32 {
        candle_core::cpu::erf::erf_f32(self)
    }
    // vectorised, PyTorch's erf approximation ([`super::vmath`])
    fn gelu_block(out: &mut [f32], x: &[f32]) {
        super::vmath::gelu(out, x)
    }
    fn gelu_grad_block(out: &mut [f32], x: &[f32], g: &[f32]) {
        super::vmath::gelu_grad(out, x, g)
    }
}

impl Num for f64 {
    const ZERO: f64 = 0.0;
    fn of(v: f64) -> f64 {
        v
    }
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn erf(self) -> f64 {
        candle_core::cpu::erf::erf_f64(self)
    }
    fn gelu_block(out: &mut [f64], x: &[f64]) {
        gelu_exact(out, x)
    }
    fn gelu_grad_block(out: &mut [f64], x: &[f64], g: &[f64]) {
        gelu_grad_exact(out, x, g)
    }
}

/// A CPU storage's contiguous values as the working type's vector (a copy
/// for bfloat16), or the slice itself.
pub(super) enum Vals<'a> {
    F32(std::borrow::Cow<'a, [f32]>),
    F64(&'a [f64]),
}

pub(super) fn vals<'a>(
    s: &'a CpuStorage,
    l: &Layout,
    op: &'static str,
) -> candle_core::Result<Vals<'a>> {
    let (a, b) = offsets(l, op)?;
    Ok(match s {
        CpuStorage::F32(v) => Vals::F32(std::borrow::Cow::Borrowed(&v[a..b])),
        CpuStorage::BF16(v) => Vals::F32(std::borrow::Cow::Owned(
            v[a..b].iter().map(|x| x.to_f32()).collect(),
        )),
        CpuStorage::F64(v) => Vals::F64(&v[a..b]),
        _ => candle_core::bail!("{op}: f32, f64 or bf16 values expected"),
    })
}

pub(super) fn f32_of(
    s: &CpuStorage,
    l: &Layout,
    op: &'static str,
) -> candle_core::Result<Vec<f32>> {
    Ok(match vals(s, l, op)? {
        Vals::F32(v) => v.into_owned(),
        Vals::F64(v) => v.iter().map(|&x| x as f32).collect(),
    })
}

/// `out` (computed in `f32`) stored as `like`'s dtype (`f32` or bfloat16).
pub(super) fn store_f32(like: &CpuStorage, out: Vec<f32>) -> CpuStorage {
    match like {
        CpuStorage::BF16(_) => CpuStorage::BF16(out.into_iter().map(bf16::from_f32).collect()),
        _ => CpuStorage::F32(out),
    }
}

/// Two CPU inputs of one dtype, run through `f` in the working type.
macro_rules! cpu_pair {
    ($op:literal, $s1:expr, $l1:expr, $s2:expr, $l2:expr, $f:expr) => {{
        match (vals($s1, $l1, $op)?, vals($s2, $l2, $op)?) {
            (Vals::F32(a), Vals::F32(b)) => store_f32($s1, $f(&a[..], &b[..])),
            (Vals::F64(a), Vals::F64(b)) => CpuStorage::F64($f(a, b)),
            _ => candle_core::bail!("{}: the two inputs differ in dtype", $op),
        }
    }};
}

fn softmax_rows<T: Num>(
    x: &[T],
    mask: &[f32],
    cols: usize,
    per_batch: usize,
    scale: f64,
) -> Vec<T> {
    let mut y = vec![T::ZERO; x.len()];
    if cols == 0 {
        return y;
    }
    let (scale, masked) = (T::of(scale), T::of(MASKED));
    y.par_chunks_mut(cols).enumerate().for_each(|(r, yr)| {
        let xr = &x[r * cols..(r + 1) * cols];
        let mr = &mask[(r / per_batch) * cols..(r / per_batch + 1) * cols];
        let mut m = T::of(f64::NEG_INFINITY);
        for j in 0..cols {
            let v = scale * xr[j] + if mr[j] > 0.5 { T::ZERO } else { masked };
            yr[j] = v;
            if v > m {
                m = v;
            }
        }
        let mut s = T::ZERO;
        for v in yr.iter_mut() {
            *v = (*v - m).exp();
            s = s + *v;
        }
        for v in yr.iter_mut() {
            *v = *v / s;
        }
    });
    y
}

fn softmax_grad_rows<T: Num>(y: &[T], g: &[T], cols: usize, scale: f64) -> Vec<T> {
    let mut dx = vec![T::ZERO; y.len()];
    if cols == 0 {
        return dx;
    }
    let scale = T::of(scale);
    dx.par_chunks_mut(cols).enumerate().for_each(|(r, out)| {
        let (yr, gr) = (&y[r * cols..(r + 1) * cols], &g[r * cols..(r + 1) * cols]);
        let mut d = T::ZERO;
        for j in 0..cols {
            d = d + yr[j] * gr[j];
        }
        for j in 0..cols {
            out[j] = scale * yr[j] * (gr[j] - d);
        }
    });
    dx
}

/// A row's mean and `1 / √(var + eps)`.
fn row_stats<T: Num>(xr: &[T], eps: T) -> (T, T) {
    let n = T::of(xr.len() as f64);
    let mut s = T::ZERO;
    for &v in xr {
        s = s + v;
    }
    let mu = s / n;
    let mut q = T::ZERO;
    for &v in xr {
        q = q + (v - mu) * (v - mu);
    }
    (mu, T::of(1.0) / (q / n + eps).sqrt())
}

fn layer_norm_rows<T: Num>(x: &[T], w: &[T], b: &[T], eps: f64) -> Vec<T> {
    let cols = w.len();
    let mut y = vec![T::ZERO; x.len()];
    if cols == 0 {
        return y;
    }
    let eps = T::of(eps);
    y.par_chunks_mut(cols).enumerate().for_each(|(r, yr)| {
        let xr = &x[r * cols..(r + 1) * cols];
        let (mu, rs) = row_stats(xr, eps);
        for j in 0..cols {
            yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
        }
    });
    y
}

fn layer_norm_grad_rows<T: Num>(x: &[T], w: &[T], dy: &[T], eps: f64) -> Vec<T> {
    let cols = w.len();
    let n = x.len();
    let mut out = vec![T::ZERO; 2 * n];
    if cols == 0 {
        return out;
    }
    let eps = T::of(eps);
    let inv = T::of(1.0 / cols as f64);
    let (dx, xhat) = out.split_at_mut(n);
    dx.par_chunks_mut(cols)
        .zip(xhat.par_chunks_mut(cols))
        .enumerate()
        .for_each(|(r, (dxr, xhr))| {
            let xr = &x[r * cols..(r + 1) * cols];
            let gr = &dy[r * cols..(r + 1) * cols];
            let (mu, rs) = row_stats(xr, eps);
            let (mut sg, mut sgx) = (T::ZERO, T::ZERO);
            for j in 0..cols {
                let xh = (xr[j] - mu) * rs;
                xhr[j] = xh;
                let g = gr[j] * w[j];
                sg = sg + g;
                sgx = sgx + g * xh;
            }
            let (sg, sgx) = (sg * inv, sgx * inv);
            for j in 0..cols {
                dxr[j] = rs * (gr[j] * w[j] - sg - xhr[j] * sgx);
            }
        });
    out
}

/// Values per block of the element-wise loops run in parallel.
const BLOCK: usize = 1 << 13;

fn gelu_vals<T: Num>(x: &[T]) -> Vec<T> {
    let mut out = vec![T::ZERO; x.len()];
    out.par_chunks_mut(BLOCK)
        .zip(x.par_chunks(BLOCK))
        .for_each(|(o, x)| T::gelu_block(o, x));
    out
}

fn gelu_grad_vals<T: Num>(x: &[T], g: &[T]) -> Vec<T> {
    let mut out = vec![T::ZERO; x.len()];
    out.par_chunks_mut(BLOCK)
        .zip(x.par_chunks(BLOCK).zip(g.par_chunks(BLOCK)))
        .for_each(|(o, (x, g))| T::gelu_grad_block(o, x, g));
    out
}

fn same_count(l1: &Layout, l2: &Layout, op: &str) -> candle_core::Result<()> {
    if l1.shape().elem_count() != l2.shape().elem_count() {
        candle_core::bail!(
            "{op}: {} values and {} gradients",
            l1.shape().elem_count(),
            l2.shape().elem_count()
        );
    }
    Ok(())
}

impl CustomOp2 for Softmax {
    fn name(&self) -> &'static str {
        "rosetta-masked-softmax"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let cols = l2.dims()[1];
        let mask = f32_of(s2, l2, "masked soft-max")?;
        let (scale, per) = (self.scale, self.per_batch);
        let out = match vals(s1, l1, "masked soft-max")? {
            Vals::F32(x) => store_f32(s1, softmax_rows(&x, &mask, cols, per, scale)),
            Vals::F64(x) => CpuStorage::F64(softmax_rows(x, &mask, cols, per, scale)),
        };
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let out = gpu::softmax((s1, l1), (s2, l2), l2.dims()[1], self.per_batch, self.scale)?;
        Ok((out, l1.shape().clone()))
    }

    fn bwd(
        &self,
        _scores: &Tensor,
        _mask: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let g = res.apply_op2_no_bwd(
            &grad.to_dtype(res.dtype())?.contiguous()?,
            &SoftmaxGrad { scale: self.scale },
        )?;
        Ok((Some(g), None))
    }
}

impl CustomOp2 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        "rosetta-masked-softmax-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        same_count(l1, l2, "soft-max gradient")?;
        let cols = *l1.dims().last().unwrap_or(&0);
        let scale = self.scale;
        let out = cpu_pair!("soft-max gradient", s1, l1, s2, l2, |y, g| {
            softmax_grad_rows(y, g, cols, scale)
        });
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        same_count(l1, l2, "soft-max gradient")?;
        let cols = *l1.dims().last().unwrap_or(&0);
        let out = gpu::softmax_grad((s1, l1), (s2, l2), cols, self.scale)?;
        Ok((out, l1.shape().clone()))
    }
}

impl CustomOp3 for LayerNorm {
    fn name(&self) -> &'static str {
        "rosetta-layer-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let op = "layer norm";
        if matches!(s1, CpuStorage::BF16(_)) {
            candle_core::bail!("layer norm: f32 or f64 values expected");
        }
        let out = match (vals(s1, l1, op)?, vals(s2, l2, op)?, vals(s3, l3, op)?) {
            (Vals::F32(x), Vals::F32(w), Vals::F32(b)) => {
                CpuStorage::F32(layer_norm_rows(&x, &w, &b, self.eps))
            }
            (Vals::F64(x), Vals::F64(w), Vals::F64(b)) => {
                CpuStorage::F64(layer_norm_rows(x, w, b, self.eps))
            }
            _ => candle_core::bail!("layer norm: f32 or f64 values, weight and bias of one dtype"),
        };
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let out = gpu::layer_norm((s1, l1), (s2, l2), (s3, l3), self.eps)?;
        Ok((out, l1.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let h = w.dim(0)?;
        let rows = x.elem_count() / h.max(1);
        let grad = grad.to_dtype(x.dtype())?.contiguous()?;
        let both = x.apply_op3_no_bwd(w, &grad, &LayerNormGrad { eps: self.eps })?;
        let both = both.reshape((2, rows, h))?;
        let dx = both.get(0)?.reshape(x.shape())?;
        let xhat = both.get(1)?;
        let dy = grad.reshape((rows, h))?;
        // column sums as one product with a row of ones (cuBLAS on a GPU)
        let ones = Tensor::ones((1, rows), x.dtype(), x.device())?;
        let dw = ones.matmul(&(&dy * &xhat)?)?.reshape(h)?;
        let db = ones.matmul(&dy)?.reshape(h)?;
        Ok((Some(dx), Some(dw), Some(db)))
    }
}

impl CustomOp3 for LayerNormGrad {
    fn name(&self) -> &'static str {
        "rosetta-layer-norm-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let op = "layer norm gradient";
        same_count(l1, l3, op)?;
        let out = match (vals(s1, l1, op)?, vals(s2, l2, op)?, vals(s3, l3, op)?) {
            (Vals::F32(x), Vals::F32(w), Vals::F32(g)) => {
                CpuStorage::F32(layer_norm_grad_rows(&x, &w, &g, self.eps))
            }
            (Vals::F64(x), Vals::F64(w), Vals::F64(g)) => {
                CpuStorage::F64(layer_norm_grad_rows(x, w, g, self.eps))
            }
            _ => candle_core::bail!("{op}: f32 or f64 values of one dtype"),
        };
        Ok((out, Shape::from(vec![2 * l1.shape().elem_count()])))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        same_count(l1, l3, "layer norm gradient")?;
        let out = gpu::layer_norm_grad((s1, l1), (s2, l2), (s3, l3), self.eps)?;
        Ok((out, Shape::from(vec![2 * l1.shape().elem_count()])))
    }
}

impl CustomOp1 for Gelu {
    fn name(&self) -> &'static str {
        "rosetta-gelu-erf"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = match vals(s, l, "gelu")? {
            Vals::F32(x) => store_f32(s, gelu_vals(&x)),
            Vals::F64(x) => CpuStorage::F64(gelu_vals(x)),
        };
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        Ok((gpu::gelu((s, l), None)?, l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(x.apply_op2_no_bwd(
            &grad.to_dtype(x.dtype())?.contiguous()?,
            &GeluGrad,
        )?))
    }
}

impl CustomOp2 for GeluGrad {
    fn name(&self) -> &'static str {
        "rosetta-gelu-erf-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        same_count(l1, l2, "gelu gradient")?;
        let out = cpu_pair!("gelu gradient", s1, l1, s2, l2, gelu_grad_vals);
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        same_count(l1, l2, "gelu gradient")?;
        Ok((gpu::gelu((s1, l1), Some((s2, l2)))?, l1.shape().clone()))
    }
}

/// The product's `(1, rows, out, in)` and `w`'s layout read as `wᵀ`.
fn affine_dims(
    l1: &Layout,
    l2: &Layout,
) -> candle_core::Result<((usize, usize, usize, usize), Layout)> {
    let (rows, k) = l1.shape().dims2()?;
    let (out, _) = l2.shape().dims2()?;
    Ok(((1, rows, out, k), l2.transpose(0, 1)?))
}

/// `y[r] += b` for every row of a contiguous product `y`.
fn add_bias_in_place(y: &mut CpuStorage, b: &CpuStorage, lb: &Layout) -> candle_core::Result<()> {
    let op = "affine";
    let cols = lb.shape().elem_count();
    if cols == 0 {
        return Ok(());
    }
    match (y, vals(b, lb, op)?) {
        (CpuStorage::F32(y), Vals::F32(b)) => y.par_chunks_mut(cols).for_each(|r| {
            for (v, &c) in r.iter_mut().zip(b.iter()) {
                *v += c;
            }
        }),
        (CpuStorage::BF16(y), Vals::F32(b)) => y.par_chunks_mut(cols).for_each(|r| {
            for (v, &c) in r.iter_mut().zip(b.iter()) {
                *v = bf16::from_f32(v.to_f32() + c);
            }
        }),
        (CpuStorage::F64(y), Vals::F64(b)) => y.par_chunks_mut(cols).for_each(|r| {
            for (v, &c) in r.iter_mut().zip(b) {
                *v += c;
            }
        }),
        _ => candle_core::bail!("{op}: the product and the bias differ in dtype"),
    }
    Ok(())
}

impl CustomOp3 for Affine {
    fn name(&self) -> &'static str {
        "rosetta-affine"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        let (bmnk, wt) = affine_dims(l1, l2)?;
        let mut y = s1.matmul(s2, bmnk, l1, &wt)?;
        add_bias_in_place(&mut y, s3, l3)?;
        Ok((y, Shape::from((bmnk.1, bmnk.2))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        use candle_core::backend::BackendStorage;
        let (bmnk, wt) = affine_dims(l1, l2)?;
        let y = s1.matmul(s2, bmnk, l1, &wt)?;
        let shape = Shape::from((bmnk.1, bmnk.2));
        let yl = Layout::contiguous(shape.clone());
        Ok((gpu::add_bias((&y, &yl), (s3, l3))?, shape))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _b: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        // detached: a product with a tracked input is tracked, and the
        // weight's gradient (a variable's, never walked and detached by
        // candle) would hold `g` and its graph until the store is dropped
        let (x, w) = (x.detach(), w.detach());
        let g = grad.to_dtype(x.dtype())?.contiguous()?;
        let dx = g.matmul(&w)?;
        let dw = g.t()?.matmul(&x)?;
        Ok((Some(dx), Some(dw), Some(bias_grad(&g)?)))
    }
}

/// A bias's gradient: the column sums of `g` (`[rows, cols]`) as one
/// product with a row of ones.
fn bias_grad(g: &Tensor) -> candle_core::Result<Tensor> {
    let (rows, cols) = g.dims2()?;
    let ones = Tensor::ones((1, rows), g.dtype(), g.device())?;
    ones.matmul(&g.contiguous()?)?.reshape(cols)
}

/// Launching `kernels/tf.cu` (built into PTX by build.rs).
#[cfg(feature = "cuda")]
mod gpu {
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
    use candle_core::{CudaStorage, Layout};
    use half::bf16;

    use crate::models::kit::rows::gpu::{launch_cfg, range};

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/tf.ptx"));
    const MODULE: &str = "rosetta_tf";
    /// Warps (rows) per block of the row kernels.
    const WARPS: usize = 8;

    type Arg<'a> = (&'a CudaStorage, &'a Layout);

    /// One warp a row.
    fn rows_cfg(rows: usize) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (rows.div_ceil(WARPS).max(1) as u32, 1, 1),
            block_dim: (32 * WARPS as u32, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    pub fn softmax(
        x: Arg,
        mask: Arg,
        cols: usize,
        per_batch: usize,
        scale: f64,
    ) -> candle_core::Result<CudaStorage> {
        let op = "masked soft-max";
        let dev = x.0.device.clone();
        let xr = range(x, op)?;
        let n = xr.len();
        let rows = n.checked_div(cols).unwrap_or(0);
        let mv = mask.0.as_cuda_slice::<f32>()?.slice(range(mask, op)?);
        let (rows64, cols32, per64, sc) =
            (rows as u64, cols as u32, per_batch as u64, scale as f32);
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let xv = x.0.as_cuda_slice::<$t>()?.slice(xr.clone());
                // SAFETY: the kernel writes every one of the n values.
                let mut out = unsafe { dev.alloc::<$t>(n) }?;
                if rows > 0 {
                    let f =
                        dev.get_or_load_custom_func(concat!("softmax_fwd_", $s), MODULE, PTX)?;
                    let mut bld = f.builder();
                    bld.arg(&xv);
                    bld.arg(&mv);
                    bld.arg(&mut out);
                    bld.arg(&rows64);
                    bld.arg(&cols32);
                    bld.arg(&per64);
                    bld.arg(&sc);
                    // SAFETY: x and out hold rows·cols values, the mask
                    // (rows / per_batch)·cols.
                    unsafe { bld.launch(rows_cfg(rows)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &x.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::BF16(_) => run!(bf16, "bf16"),
            _ => candle_core::bail!("{op}: f32 or bf16 scores expected on a GPU"),
        })
    }

    pub fn softmax_grad(
        y: Arg,
        g: Arg,
        cols: usize,
        scale: f64,
    ) -> candle_core::Result<CudaStorage> {
        let op = "soft-max gradient";
        let dev = y.0.device.clone();
        let (yr, gr) = (range(y, op)?, range(g, op)?);
        let n = yr.len();
        let rows = n.checked_div(cols).unwrap_or(0);
        let (rows64, cols32, sc) = (rows as u64, cols as u32, scale as f32);
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let yv = y.0.as_cuda_slice::<$t>()?.slice(yr.clone());
                let gv = g.0.as_cuda_slice::<$t>()?.slice(gr.clone());
                // SAFETY: the kernel writes every one of the n values.
                let mut out = unsafe { dev.alloc::<$t>(n) }?;
                if rows > 0 {
                    let f =
                        dev.get_or_load_custom_func(concat!("softmax_bwd_", $s), MODULE, PTX)?;
                    let mut bld = f.builder();
                    bld.arg(&yv);
                    bld.arg(&gv);
                    bld.arg(&mut out);
                    bld.arg(&rows64);
                    bld.arg(&cols32);
                    bld.arg(&sc);
                    // SAFETY: y, g and out hold rows·cols values.
                    unsafe { bld.launch(rows_cfg(rows)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &y.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::BF16(_) => run!(bf16, "bf16"),
            _ => candle_core::bail!("{op}: f32 or bf16 values expected on a GPU"),
        })
    }

    /// The forward pass (`out` the size of `x`) or, with `grad`, the
    /// stacked gradient and normalised input (twice the size).
    fn norm(x: Arg, w: Arg, third: Arg, eps: f64, grad: bool) -> candle_core::Result<CudaStorage> {
        let op = "layer norm";
        let dev = x.0.device.clone();
        let xr = range(x, op)?;
        let n = xr.len();
        let cols = range(w, op)?.len();
        let rows = n.checked_div(cols).unwrap_or(0);
        let xv = x.0.as_cuda_slice::<f32>()?.slice(xr);
        let wv = w.0.as_cuda_slice::<f32>()?.slice(range(w, op)?);
        let tv = third.0.as_cuda_slice::<f32>()?.slice(range(third, op)?);
        // SAFETY: the kernel writes every value of `out`.
        let mut out = unsafe { dev.alloc::<f32>(if grad { 2 * n } else { n }) }?;
        if rows > 0 {
            let name = if grad {
                "layer_norm_bwd_f32"
            } else {
                "layer_norm_fwd_f32"
            };
            let f = dev.get_or_load_custom_func(name, MODULE, PTX)?;
            let (rows64, cols32, e) = (rows as u64, cols as u32, eps as f32);
            let mut bld = f.builder();
            bld.arg(&xv);
            bld.arg(&wv);
            if grad {
                // (x, w, dy, out)
                bld.arg(&tv);
                bld.arg(&mut out);
            } else {
                // (x, w, b, y)
                bld.arg(&tv);
                bld.arg(&mut out);
            }
            bld.arg(&rows64);
            bld.arg(&cols32);
            bld.arg(&e);
            // SAFETY: x (and dy) hold rows·cols values, w (and b) cols, out
            // rows·cols (twice that for the gradient).
            unsafe { bld.launch(rows_cfg(rows)) }.w()?;
        }
        Ok(CudaStorage::wrap_cuda_slice(out, dev))
    }

    pub fn layer_norm(x: Arg, w: Arg, b: Arg, eps: f64) -> candle_core::Result<CudaStorage> {
        if !matches!(x.0.slice, CudaStorageSlice::F32(_)) {
            candle_core::bail!("layer norm: f32 values expected on a GPU");
        }
        norm(x, w, b, eps, false)
    }

    pub fn layer_norm_grad(x: Arg, w: Arg, dy: Arg, eps: f64) -> candle_core::Result<CudaStorage> {
        if !matches!(x.0.slice, CudaStorageSlice::F32(_)) {
            candle_core::bail!("layer norm gradient: f32 values expected on a GPU");
        }
        norm(x, w, dy, eps, true)
    }

    /// `y + b` row by row.
    pub fn add_bias(y: Arg, b: Arg) -> candle_core::Result<CudaStorage> {
        let op = "bias";
        let dev = y.0.device.clone();
        let (yr, br) = (range(y, op)?, range(b, op)?);
        let (n, cols) = (yr.len(), br.len());
        let (n64, cols32) = (n as u64, cols as u32);
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let yv = y.0.as_cuda_slice::<$t>()?.slice(yr.clone());
                let bv = b.0.as_cuda_slice::<$t>()?.slice(br.clone());
                // SAFETY: the kernel writes every one of the n values.
                let mut out = unsafe { dev.alloc::<$t>(n) }?;
                if n > 0 && cols > 0 {
                    let f = dev.get_or_load_custom_func(concat!("bias_add_", $s), MODULE, PTX)?;
                    let mut bld = f.builder();
                    bld.arg(&yv);
                    bld.arg(&bv);
                    bld.arg(&mut out);
                    bld.arg(&n64);
                    bld.arg(&cols32);
                    // SAFETY: y and out hold n values, b cols (n a multiple of cols).
                    unsafe { bld.launch(launch_cfg(n)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &y.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::BF16(_) => run!(bf16, "bf16"),
            _ => candle_core::bail!("{op}: f32 or bf16 values expected on a GPU"),
        })
    }

    /// GELU of `x`, or with `g` its gradient times `g`.
    pub fn gelu(x: Arg, g: Option<Arg>) -> candle_core::Result<CudaStorage> {
        let op = "gelu";
        let dev = x.0.device.clone();
        let xr = range(x, op)?;
        let n = xr.len();
        let n64 = n as u64;
        let gr = match g {
            Some(g) => Some(range(g, op)?),
            None => None,
        };
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let xv = x.0.as_cuda_slice::<$t>()?.slice(xr.clone());
                // SAFETY: the kernel writes every one of the n values.
                let mut out = unsafe { dev.alloc::<$t>(n) }?;
                if n > 0 {
                    let name = if g.is_some() {
                        concat!("gelu_bwd_", $s)
                    } else {
                        concat!("gelu_fwd_", $s)
                    };
                    let f = dev.get_or_load_custom_func(name, MODULE, PTX)?;
                    let gv = match (g, &gr) {
                        (Some(g), Some(r)) => Some(g.0.as_cuda_slice::<$t>()?.slice(r.clone())),
                        _ => None,
                    };
                    let mut bld = f.builder();
                    bld.arg(&xv);
                    if let Some(gv) = &gv {
                        bld.arg(gv);
                    }
                    bld.arg(&mut out);
                    bld.arg(&n64);
                    // SAFETY: x, g and out hold n values each.
                    unsafe { bld.launch(launch_cfg(n)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &x.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::BF16(_) => run!(bf16, "bf16"),
            _ => candle_core::bail!("{op}: f32 or bf16 values expected on a GPU"),
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use candle_core::{DType, Device, Tensor, Var, D};

    use super::*;

    fn vals(n: usize, seed: f64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as f64 + seed) * 0.731).sin() * 2.0 + 0.1 * seed)
            .collect()
    }

    fn v(t: &Tensor) -> Vec<f64> {
        t.to_dtype(DType::F64)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    }

    /// Each of `a` within `tol` (relative, plus `tol` absolute) of `b`'s.
    pub(in crate::models::kit) fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "{what}[{i}]: {x} against {y}"
            );
        }
    }

    /// The attention's composite soft-max (the ops the encoder ran before).
    fn composite_softmax(s: &Tensor, mask: &Tensor, scale: f64) -> Tensor {
        let (b, _, _, k) = s.dims4().unwrap();
        let neg = ((mask.ones_like().unwrap() - mask).unwrap() * MASKED)
            .unwrap()
            .reshape((b, 1, 1, k))
            .unwrap()
            .to_dtype(s.dtype())
            .unwrap();
        let x = (s * scale).unwrap().broadcast_add(&neg).unwrap();
        candle_nn::ops::softmax(&x, D::Minus1).unwrap()
    }

    fn composite_layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Tensor {
        let h = x.dim(D::Minus1).unwrap() as f64;
        let mean = (x.sum_keepdim(D::Minus1).unwrap() / h).unwrap();
        let xc = x.broadcast_sub(&mean).unwrap();
        let var = (xc.sqr().unwrap().sum_keepdim(D::Minus1).unwrap() / h).unwrap();
        let xn = xc
            .broadcast_div(&(var + eps).unwrap().sqrt().unwrap())
            .unwrap();
        xn.broadcast_mul(w).unwrap().broadcast_add(b).unwrap()
    }

    /// Σ y ⊙ r for a fixed `r`: a scalar whose gradient tests every output.
    fn probe(y: &Tensor, seed: f64) -> Tensor {
        let r = Tensor::from_vec(vals(y.elem_count(), seed), y.shape(), y.device())
            .unwrap()
            .to_dtype(y.dtype())
            .unwrap();
        (y * r).unwrap().sum_all().unwrap()
    }

    /// Scores `[3, 2, 4, 5]` and a mask with padding; with `empty`, the
    /// third text is all padding (a uniform soft-max, as the composite
    /// gives; not for finite differences: −10⁹ + x rounds x to 10⁻⁷).
    fn softmax_inputs(dev: &Device, empty: bool) -> (Tensor, Tensor) {
        let (b, h, q, k) = (3, 2, 4, 5);
        let s = Tensor::from_vec(vals(b * h * q * k, 1.0), (b, h, q, k), dev).unwrap();
        let last = if empty { 0.0 } else { 1.0 };
        let m = [
            1., 1., 1., 0., 0., 1., 1., 1., 1., 1., last, last, 0., last, 0.,
        ];
        let mask = Tensor::from_vec(m.to_vec(), (b, k), dev)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        (s, mask)
    }

    #[test]
    fn masked_softmax_matches_the_composite_and_its_gradient() {
        let dev = Device::Cpu;
        let (s, mask) = softmax_inputs(&dev, true);
        let scale = 0.125;
        let x = Var::from_tensor(&s).unwrap();
        let fused = masked_softmax(x.as_tensor(), &mask, scale).unwrap();
        let want = composite_softmax(x.as_tensor(), &mask, scale);
        close(&v(&fused), &v(&want), 1e-12, "soft-max");
        let g1 = probe(&fused, 3.0).backward().unwrap();
        let g2 = probe(&want, 3.0).backward().unwrap();
        close(
            &v(g1.get(x.as_tensor()).unwrap()),
            &v(g2.get(x.as_tensor()).unwrap()),
            1e-12,
            "soft-max gradient",
        );
        // a masked key gets no weight where its row has a token
        let y = v(&fused);
        assert!(y[3] < 1e-12 && y[4] < 1e-12);
    }

    #[test]
    fn layer_norm_matches_the_composite_and_its_gradients() {
        let dev = Device::Cpu;
        let (r, h) = (6, 7);
        let x = Var::from_tensor(&Tensor::from_vec(vals(r * h, 2.0), (2, 3, h), &dev).unwrap())
            .unwrap();
        let w = Var::from_tensor(&Tensor::from_vec(vals(h, 5.0), h, &dev).unwrap()).unwrap();
        let b = Var::from_tensor(&Tensor::from_vec(vals(h, 9.0), h, &dev).unwrap()).unwrap();
        let eps = 1e-12;
        let fused = layer_norm(x.as_tensor(), w.as_tensor(), b.as_tensor(), eps).unwrap();
        let want = composite_layer_norm(x.as_tensor(), w.as_tensor(), b.as_tensor(), eps);
        close(&v(&fused), &v(&want), 1e-12, "layer norm");
        let g1 = probe(&fused, 4.0).backward().unwrap();
        let g2 = probe(&want, 4.0).backward().unwrap();
        for (t, what) in [(&x, "x"), (&w, "weight"), (&b, "bias")] {
            close(
                &v(g1.get(t.as_tensor()).unwrap()),
                &v(g2.get(t.as_tensor()).unwrap()),
                1e-10,
                what,
            );
        }
    }

    #[test]
    fn gelu_matches_candles_and_its_gradient() {
        let dev = Device::Cpu;
        let x = Var::from_tensor(&Tensor::from_vec(vals(40, 0.5), (5, 8), &dev).unwrap()).unwrap();
        let fused = gelu_erf(x.as_tensor()).unwrap();
        let want = x.as_tensor().gelu_erf().unwrap();
        close(&v(&fused), &v(&want), 1e-12, "gelu");
        let g1 = probe(&fused, 6.0).backward().unwrap();
        let g2 = probe(&want, 6.0).backward().unwrap();
        close(
            &v(g1.get(x.as_tensor()).unwrap()),
            &v(g2.get(x.as_tensor()).unwrap()),
            // candle's backward rounds its constants (2e-7); the finite
            // differences below hold the exact gradient
            1e-6,
            "gelu gradient",
        );
    }

    /// Each op's gradient against central finite differences of the probe
    /// (f64), entry by entry.
    #[test]
    fn gradients_agree_with_finite_differences() {
        let dev = Device::Cpu;
        let (s, mask) = softmax_inputs(&dev, false);
        let w = Tensor::from_vec(vals(5, 5.0), 5, &dev).unwrap();
        let b = Tensor::from_vec(vals(5, 9.0), 5, &dev).unwrap();
        type Op<'a> = (&'a str, Box<dyn Fn(&Tensor) -> Tensor + 'a>);
        let ops: Vec<Op> = vec![
            (
                "soft-max",
                Box::new(|t: &Tensor| masked_softmax(t, &mask, 0.3).unwrap()),
            ),
            (
                "layer norm",
                Box::new(|t: &Tensor| layer_norm(t, &w, &b, 1e-5).unwrap()),
            ),
            ("gelu", Box::new(|t: &Tensor| gelu_erf(t).unwrap())),
        ];
        for (what, f) in &ops {
            let x = Var::from_tensor(&s).unwrap();
            let grads = probe(&f(x.as_tensor()), 7.0).backward().unwrap();
            let analytic = v(grads.get(x.as_tensor()).unwrap());
            let base = v(&s);
            let h = 1e-6;
            for i in (0..base.len()).step_by(7) {
                let at = |d: f64| -> f64 {
                    let mut p = base.clone();
                    p[i] += d;
                    let t = Tensor::from_vec(p, s.shape(), &dev).unwrap();
                    v(&probe(&f(&t), 7.0))[0]
                };
                let numeric = (at(h) - at(-h)) / (2.0 * h);
                assert!(
                    (numeric - analytic[i]).abs() <= 1e-6 * (1.0 + numeric.abs()),
                    "{what}: entry {i}: finite difference {numeric}, gradient {}",
                    analytic[i]
                );
            }
        }
    }

    /// `affine` is `x · wᵀ` then candle's broadcast add of `b`: values and
    /// all three gradients, in f64, f32 and bfloat16 storage; the gradients
    /// carry no graph (a weight's would otherwise hold the layer's upstream
    /// gradient until the store is dropped); shapes that do not fit are
    /// refused.
    #[test]
    fn affine_matches_the_product_then_the_bias() {
        let dev = Device::Cpu;
        let var = |n: usize, seed: f64, shape: &[usize]| {
            Var::from_tensor(&Tensor::from_vec(vals(n, seed), shape, &dev).unwrap()).unwrap()
        };
        let (x, w, b) = (
            var(7 * 5, 0.5, &[7, 5]),
            var(3 * 5, 2.5, &[3, 5]),
            var(3, 8.0, &[3]),
        );
        for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 1e-5), (DType::BF16, 0.0)] {
            let [xd, wd, bd] = [&x, &w, &b].map(|t| t.as_tensor().to_dtype(dtype).unwrap());
            let fused = affine(&xd, &wd, &bd).unwrap();
            assert_eq!((fused.dims(), fused.dtype()), (&[7, 3][..], dtype));
            let want = xd
                .matmul(&wd.t().unwrap())
                .unwrap()
                .broadcast_add(&bd)
                .unwrap();
            // bfloat16: the same product and the same single rounding of y + b
            close(&v(&fused), &v(&want), tol, &format!("affine {dtype:?}"));
            let g1 = probe(&fused, 2.0).backward().unwrap();
            let g2 = probe(&want, 2.0).backward().unwrap();
            for (t, what) in [(&x, "x"), (&w, "weight"), (&b, "bias")] {
                let g = g1.get(t.as_tensor()).unwrap();
                assert!(!g.track_op(), "{what}'s gradient holds a graph ({dtype:?})");
                let tol = if dtype == DType::BF16 { 2e-2 } else { tol };
                close(
                    &v(g),
                    &v(g2.get(t.as_tensor()).unwrap()),
                    tol,
                    &format!("affine {what}'s gradient {dtype:?}"),
                );
            }
        }
        let short = Tensor::zeros(2, DType::F64, &dev).unwrap();
        let e = affine(x.as_tensor(), w.as_tensor(), &short)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 bias values"), "{e}");
        assert!(affine(x.as_tensor(), &x.as_tensor().t().unwrap(), b.as_tensor()).is_err());
    }

    /// bfloat16 storage (the encoder's `precision=bf16`): f32 arithmetic,
    /// results within bfloat16's rounding of the f32 op's, the dtype kept.
    #[test]
    fn bf16_storage_rounds_the_f32_result() {
        let dev = Device::Cpu;
        let (s, mask) = softmax_inputs(&dev, true);
        let s32 = s.to_dtype(DType::F32).unwrap();
        let sb = s32.to_dtype(DType::BF16).unwrap();
        let yb = masked_softmax(&sb, &mask, 0.5).unwrap();
        assert_eq!(yb.dtype(), DType::BF16);
        let y = masked_softmax(&sb.to_dtype(DType::F32).unwrap(), &mask, 0.5).unwrap();
        close(&v(&yb), &v(&y), 1e-2, "bf16 soft-max");
        let gb = gelu_erf(&sb).unwrap();
        assert_eq!(gb.dtype(), DType::BF16);
        close(
            &v(&gb),
            &v(&gelu_erf(&sb.to_dtype(DType::F32).unwrap()).unwrap()),
            1e-2,
            "bf16 gelu",
        );
        // the layer norm refuses bfloat16 values rather than widening them
        let w = Tensor::ones(5, DType::BF16, &dev).unwrap();
        assert!(layer_norm(&sb, &w, &w, 1e-5).is_err());
    }

    /// Shapes that do not fit are refused with what was given.
    #[test]
    fn a_mask_of_the_wrong_shape_is_refused() {
        let dev = Device::Cpu;
        let (s, _) = softmax_inputs(&dev, true);
        let bad = Tensor::ones((3, 4), DType::F32, &dev).unwrap();
        let e = masked_softmax(&s, &bad, 1.0).unwrap_err().to_string();
        assert!(e.contains("3 × 4"), "{e}");
        let w = Tensor::ones(4, DType::F64, &dev).unwrap();
        assert!(layer_norm(&s, &w, &w, 1e-5).is_err());
    }
}

/// On a GPU (a CUDA build run where one opens; `ROSETTA_REQUIRE_GPU=1`
/// makes its absence a failure): every kernel of `kernels/tf.cu` against the
/// CPU's loops, values and gradients, in f32 and in bfloat16.
#[cfg(all(test, feature = "cuda"))]
pub(super) mod gpu_tests {
    use candle_core::{DType, Device, Tensor, Var};

    use super::*;

    /// The first GPU, or none (a failure under `ROSETTA_REQUIRE_GPU=1`).
    pub(in crate::models::kit) fn gpu() -> Option<Device> {
        match Device::new_cuda(0) {
            Ok(d) => Some(d),
            Err(e) if std::env::var("ROSETTA_REQUIRE_GPU").as_deref() != Ok("1") => {
                eprintln!("no GPU ({e}): the kernels' GPU tests were not run");
                None
            }
            Err(e) => panic!("ROSETTA_REQUIRE_GPU=1 but no GPU opens: {e}"),
        }
    }

    fn host(t: &Tensor) -> Vec<f32> {
        t.to_dtype(DType::F32)
            .unwrap()
            .to_device(&Device::Cpu)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    }

    fn close(a: &[f32], b: &[f32], tol: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "{what}[{i}]: gpu {x}, cpu {y}"
            );
        }
    }

    /// Values and input gradients of `f` on both devices for inputs `xs`
    /// (the first is differentiated), at `dtype`.
    fn both(
        dev: &Device,
        dtype: DType,
        xs: &[Tensor],
        f: &dyn Fn(&[Tensor]) -> Tensor,
    ) -> [(Vec<f32>, Vec<f32>); 2] {
        [Device::Cpu, dev.clone()].map(|d| {
            let mut ins: Vec<Tensor> = xs.iter().map(|x| x.to_device(&d).unwrap()).collect();
            ins[0] = ins[0].to_dtype(dtype).unwrap();
            let var = Var::from_tensor(&ins[0]).unwrap();
            ins[0] = var.as_tensor().clone();
            let y = f(&ins);
            let r: Vec<f32> = (0..y.elem_count())
                .map(|i| (i as f32 * 0.91).sin())
                .collect();
            let r = Tensor::from_vec(r, y.shape(), &Device::Cpu).unwrap();
            let probe = (y.to_dtype(DType::F32).unwrap() * r.to_device(&d).unwrap())
                .unwrap()
                .sum_all()
                .unwrap();
            let g = probe.backward().unwrap();
            (host(&y), host(g.get(var.as_tensor()).unwrap()))
        })
    }

    #[test]
    fn the_gpu_kernels_match_the_cpu() {
        let Some(dev) = gpu() else { return };
        let (b, h, q, k) = (3usize, 4usize, 33usize, 45usize);
        let s: Vec<f32> = (0..b * h * q * k)
            .map(|i| ((i as f32) * 0.37).sin() * 3.0)
            .collect();
        let s = Tensor::from_vec(s, (b, h, q, k), &Device::Cpu).unwrap();
        let mut m = vec![1f32; b * k];
        m[k + 40..2 * k].fill(0.0);
        m[2 * k + 3..3 * k].fill(0.0);
        let mask = Tensor::from_vec(m, (b, k), &Device::Cpu).unwrap();
        for (dtype, tol) in [(DType::F32, 1e-5f32), (DType::BF16, 2e-2)] {
            let [cpu, gpu] = both(&dev, dtype, &[s.clone(), mask.clone()], &|t| {
                masked_softmax(&t[0], &t[1], 0.125).unwrap()
            });
            close(&gpu.0, &cpu.0, tol, &format!("soft-max {dtype:?}"));
            close(&gpu.1, &cpu.1, tol, &format!("soft-max gradient {dtype:?}"));
            let [cpu, gpu] = both(&dev, dtype, std::slice::from_ref(&s), &|t| {
                gelu_erf(&t[0]).unwrap()
            });
            close(&gpu.0, &cpu.0, tol, &format!("gelu {dtype:?}"));
            close(&gpu.1, &cpu.1, tol, &format!("gelu gradient {dtype:?}"));
        }
        let rows: Vec<f32> = (0..70 * 96).map(|i| ((i as f32) * 0.21).sin()).collect();
        let rows = Tensor::from_vec(rows, (70, 96), &Device::Cpu).unwrap();
        let bias = Tensor::from_vec(
            (0..96)
                .map(|i| (i as f32 * 0.3).cos())
                .collect::<Vec<f32>>(),
            96,
            &Device::Cpu,
        )
        .unwrap();
        let weight = Tensor::from_vec(
            (0..40 * 96)
                .map(|i| (i as f32 * 0.17).cos() * 0.5)
                .collect::<Vec<f32>>(),
            (40, 96),
            &Device::Cpu,
        )
        .unwrap();
        let small = bias.narrow(0, 0, 40).unwrap();
        for (dtype, tol) in [(DType::F32, 1e-4f32), (DType::BF16, 5e-2)] {
            let [cpu, gpu] = both(
                &dev,
                dtype,
                &[rows.clone(), weight.clone(), small.clone()],
                &|t| {
                    let d = t[0].dtype();
                    affine(
                        &t[0],
                        &t[1].to_dtype(d).unwrap(),
                        &t[2].to_dtype(d).unwrap(),
                    )
                    .unwrap()
                },
            );
            close(&gpu.0, &cpu.0, tol, &format!("affine {dtype:?}"));
            close(
                &gpu.1,
                &cpu.1,
                tol,
                &format!("affine x's gradient {dtype:?}"),
            );
        }
        let cols = 384;
        let x: Vec<f32> = (0..50 * cols)
            .map(|i| ((i as f32) * 0.11).cos() * 2.0 + 0.3)
            .collect();
        let x = Tensor::from_vec(x, (5, 10, cols), &Device::Cpu).unwrap();
        let w = Tensor::from_vec(
            (0..cols)
                .map(|i| 1.0 + (i as f32 * 0.05).sin())
                .collect::<Vec<f32>>(),
            cols,
            &Device::Cpu,
        )
        .unwrap();
        let bias = (w.clone() * 0.1).unwrap();
        let [cpu, gpu] = both(&dev, DType::F32, &[x, w, bias], &|t| {
            layer_norm(&t[0], &t[1], &t[2], 1e-12).unwrap()
        });
        close(&gpu.0, &cpu.0, 1e-5, "layer norm");
        close(&gpu.1, &cpu.1, 1e-4, "layer norm gradient");
    }
}
