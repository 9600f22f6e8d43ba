//! Sequence-encoder building blocks (seed 003's adversarial BiLSTM, issue
//! 17): a bidirectional LSTM layer written in candle tensor ops, so the same
//! code runs on the CPU and on CUDA and candle's autograd differentiates it;
//! masked max pooling over time; right-padded id batches; length bucketing.
//!
//! The layer computes every step's input projection of both directions in
//! one matmul, then runs the two directions as one batched recurrence (states
//! stacked as `(2, B, H)`, a batched matmul with `w_hh` of shape `(2, H, 4H)`).
//! Padding is handled by blending each new state with the previous one by
//! the mask, so a padded step leaves the state unchanged, the backward
//! direction starts at each sequence's own last real token with zero state,
//! and a padded input neither changes an encoding nor receives gradient.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor, Var};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::nn::check_shape;
use super::rows::gather_rows;
use crate::{Error, Result};

/// A bidirectional single-layer LSTM (torch's gate order `i, f, g, o`;
/// `c' = f⊙c + i⊙g`, `h' = o⊙tanh(c')`, `i, f, o` sigmoid, `g` tanh).
/// Outputs are the forward and backward hidden states side by side.
pub struct BiLstm {
    /// Input weights of both directions, `(input, 8H)`: the forward
    /// direction's gates `i, f, g, o` (each `H` columns), then the backward's.
    pub w_ih: Var,
    /// Gate biases, `(8H)`, laid out as the columns of `w_ih` (one bias per
    /// gate: torch's `b_ih + b_hh`).
    pub b: Var,
    /// Recurrent weights, `(2, H, 4H)`: `[0]` forward, `[1]` backward, gates
    /// `i, f, g, o` along the last axis.
    pub w_hh: Var,
}

impl BiLstm {
    /// A layer with every weight and bias drawn uniform in `(−1/√H, 1/√H)`
    /// as torch does (the forget-gate bias starts there too, not at 1), from
    /// the host generator `rng` in the order `w_ih`, `b`, `w_hh` (row-major),
    /// so CPU and CUDA start from identical values.
    pub fn new(
        input: usize,
        hidden: usize,
        rng: &mut ChaCha8Rng,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        if input == 0 || hidden == 0 {
            return Err(Error::invalid(format!(
                "BiLSTM needs input and hidden sizes of at least 1, got {input} and {hidden}"
            )));
        }
        let k = 1.0 / (hidden as f64).sqrt();
        let mut draw = |shape: &[usize]| -> Result<Var> {
            let n = shape.iter().product();
            let v: Vec<f64> = (0..n)
                .map(|_| (2.0 * rng.random::<f64>() - 1.0) * k)
                .collect();
            let t = Tensor::from_vec(v, shape, device)?.to_dtype(dtype)?;
            Ok(Var::from_tensor(&t)?)
        };
        Ok(BiLstm {
            w_ih: draw(&[input, 8 * hidden])?,
            b: draw(&[8 * hidden])?,
            w_hh: draw(&[2, hidden, 4 * hidden])?,
        })
    }

    /// Hidden size `H` of one direction (the output has `2H` columns).
    pub fn hidden(&self) -> usize {
        self.w_hh.dims()[1]
    }

    /// Input size.
    pub fn input(&self) -> usize {
        self.w_ih.dims()[0]
    }

    /// The variables, named `PREFIX.w_ih`, `PREFIX.b`, `PREFIX.w_hh`.
    pub fn named_vars(&self, prefix: &str) -> Vec<(String, Var)> {
        vec![
            (format!("{prefix}.w_ih"), self.w_ih.clone()),
            (format!("{prefix}.b"), self.b.clone()),
            (format!("{prefix}.w_hh"), self.w_hh.clone()),
        ]
    }

    /// Deep copies of the parameters, named as in [`BiLstm::named_vars`].
    pub fn snapshot(&self, prefix: &str) -> Result<Vec<(String, Tensor)>> {
        super::nn::copy_vars(self.named_vars(prefix))
    }

    /// Sets the parameters from a snapshot taken with the same prefix (an
    /// error naming a missing tensor or a shape that differs).
    pub fn set_from(&self, prefix: &str, snap: &[(String, Tensor)]) -> Result<()> {
        super::nn::set_vars(self.named_vars(prefix), snap)
    }

    /// A layer from named tensors `PREFIX.w_ih` `(input, 8H)`, `PREFIX.b`
    /// `(8H)` and `PREFIX.w_hh` `(2, H, 4H)`, as `dtype` on `device`; a
    /// missing tensor or a wrong shape is an error naming the tensor.
    pub fn from_tensors(
        prefix: &str,
        tensors: &HashMap<String, Tensor>,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let get = |name: &str| -> Result<(String, &Tensor)> {
            let key = format!("{prefix}.{name}");
            match tensors.get(&key) {
                Some(t) => Ok((key, t)),
                None => Err(Error::invalid(format!("checkpoint has no tensor `{key}`"))),
            }
        };
        let (k_hh, w_hh) = get("w_hh")?;
        check_shape(&k_hh, w_hh, &[Some(2), None, None])?;
        let h = w_hh.dims()[1];
        if h == 0 {
            return Err(Error::invalid(format!(
                "checkpoint tensor `{k_hh}` has hidden size 0"
            )));
        }
        check_shape(&k_hh, w_hh, &[Some(2), Some(h), Some(4 * h)])?;
        let (k_ih, w_ih) = get("w_ih")?;
        check_shape(&k_ih, w_ih, &[None, Some(8 * h)])?;
        if w_ih.dims()[0] == 0 {
            return Err(Error::invalid(format!(
                "checkpoint tensor `{k_ih}` has input size 0"
            )));
        }
        let (k_b, b) = get("b")?;
        check_shape(&k_b, b, &[Some(8 * h)])?;
        let var = |t: &Tensor| -> Result<Var> {
            Ok(Var::from_tensor(&t.to_dtype(dtype)?.to_device(device)?)?)
        };
        Ok(BiLstm {
            w_ih: var(w_ih)?,
            b: var(b)?,
            w_hh: var(w_hh)?,
        })
    }

    /// Hidden states `(B, T, 2H)` (forward then backward direction) of the
    /// inputs `x` `(B, T, input)` under `mask` `(B, T)` (1 for a real step, 0
    /// for padding; any float dtype, no gradient flows into it). A padded
    /// step keeps each direction's state unchanged, so with right-padded
    /// sequences the backward direction starts at each sequence's last real
    /// step from zero state. Padded steps output zero rows and their inputs
    /// get zero gradient. All work stays on the tensors' device (one small
    /// index upload, no read-back).
    pub fn forward(&self, x: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (b, t, d) = x.dims3()?;
        let proj = self.project(&x.reshape((b * t, d))?)?;
        self.recur(&proj.reshape((b, t, 8 * self.hidden()))?, mask)
    }

    /// [`BiLstm::forward`] through cuDNN's RNN (`recurrence=cudnn`,
    /// `models/kit/cudnn_lstm.rs`): `x` `(B, T, input)` f32 on CUDA, `mask`
    /// `(B, T)` right-padded with the rows' real `lengths`. Under
    /// `precision=tf32` cuDNN may use TF32 tensor cores. An error in a
    /// build without the `cudnn` feature, or off CUDA.
    pub fn forward_cudnn(&self, x: &Tensor, mask: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        #[cfg(feature = "cudnn")]
        {
            let tf32 = super::precision::current() == super::precision::Precision::Tf32;
            let w = super::cudnn_lstm::Weights {
                w_ih: self.w_ih.as_tensor(),
                b: self.b.as_tensor(),
                w_hh: self.w_hh.as_tensor(),
            };
            let y = super::cudnn_lstm::forward(&w, x, lengths, tf32)?;
            let m = mask.detach().to_dtype(y.dtype())?.unsqueeze(2)?;
            Ok(y.broadcast_mul(&m)?)
        }
        #[cfg(not(feature = "cudnn"))]
        {
            let _ = (x, mask, lengths);
            Err(Error::invalid(NO_CUDNN))
        }
    }

    /// The input projection `x·W_ih + b` (`(N, 8H)`, both directions' gates)
    /// of inputs `x` `(N, input)`: what [`BiLstm::recur`] reads per step. A
    /// caller whose steps repeat inputs (the same word many times in a batch)
    /// projects each distinct input once and gathers the rows.
    pub fn project(&self, x: &Tensor) -> Result<Tensor> {
        let d = x.dim(1)?;
        if d != self.input() {
            return Err(Error::invalid(format!(
                "BiLSTM input has {d} features per step, the layer expects {}",
                self.input()
            )));
        }
        Ok(
            super::precision::matmul(x, self.w_ih.as_tensor())?
                .broadcast_add(self.b.as_tensor())?,
        )
    }

    /// [`BiLstm::forward`] from the steps' input projections `proj`
    /// `(B, T, 8H)` ([`BiLstm::project`]). On the CPU the whole recurrence
    /// is one op with its own backward pass (`seq`: per step two small
    /// products and the cell in place, the recurrent weights' gradient one
    /// product over all steps); off the CPU each step is one fused cell op
    /// (`kernels/lstm.cu`). Other dtypes take candle's ops. Under
    /// `precision=bf16` the CPU takes the fused cell too, whose recurrent
    /// product is [`super::precision::matmul`]'s (the `seq` op multiplies in
    /// f32 itself).
    pub fn recur(&self, proj: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let bf16 = super::precision::current() == super::precision::Precision::Bf16;
        let path = match (proj.device().is_cpu(), proj.dtype()) {
            (true, DType::F32 | DType::F64) if !bf16 => Path::Sequence,
            (_, DType::F32 | DType::F64) => Path::Cell,
            _ => Path::Ops,
        };
        self.recur_with(proj, mask, path)
    }

    /// [`BiLstm::recur`] by the given path (any path runs on the CPU).
    pub(crate) fn recur_with(&self, proj: &Tensor, mask: &Tensor, path: Path) -> Result<Tensor> {
        let (b, t, p) = proj.dims3()?;
        let h = self.hidden();
        if p != 8 * h {
            return Err(Error::invalid(format!(
                "BiLSTM projections have {p} values per step, the layer expects {}",
                8 * h
            )));
        }
        let x = proj;
        if mask.dims() != [b, t] {
            return Err(Error::invalid(format!(
                "BiLSTM mask has shape {:?}, expected [{b}, {t}] (batch, steps)",
                mask.dims()
            )));
        }
        let dev = x.device();
        if b == 0 || t == 0 {
            return Ok(Tensor::zeros((b, t, 2 * h), x.dtype(), dev)?);
        }
        let mask = mask.detach().to_dtype(x.dtype())?;
        // Row `2s + d` of a `(T·2, …)` stack is direction `d` at recurrence
        // step `s`; the backward direction's step `s` is time `T−1−s`. This
        // permutation (an involution) takes time order to step order and back.
        let order: Vec<u32> = (0..t)
            .flat_map(|s| [2 * s as u32, 2 * (t - 1 - s) as u32 + 1])
            .collect();
        let order = Tensor::from_vec(order, 2 * t, dev)?;

        let steps = proj
            .reshape((b, t, 2, 4 * h))?
            .permute((1, 2, 0, 3))? // (T, 2, B, 4H)
            .reshape((2 * t, b, 4 * h))?;
        let steps = gather_rows(&steps, &order)?.reshape((t, 2, b, 4 * h))?;

        let m = mask.t()?.contiguous()?; // (T, B)
        let m = Tensor::stack(&[&m, &m], 1)?.reshape((2 * t, b))?; // (T, 2, B)
        let m = gather_rows(&m, &order)?.reshape((t, 2, b, 1))?;

        let w_hh = self.w_hh.as_tensor();
        let out = if path == Path::Sequence {
            seq::recurrence(&steps, w_hh, &m)?.reshape((2 * t, b, h))?
        } else {
            let steps = split_first(&steps)?; // T × (2, B, 4H)
            let mut hs: Vec<Tensor> = Vec::with_capacity(t);
            if path == Path::Cell {
                // [h | c] of both directions, (2, B, 2H), from zero
                let mut st = Tensor::zeros((2, b, 2 * h), x.dtype(), dev)?;
                for (s, x_s) in steps.iter().enumerate() {
                    let gates = if s == 0 {
                        x_s.clone()
                    } else {
                        (x_s + super::precision::matmul(&st.narrow(2, 0, h)?.contiguous()?, w_hh)?)?
                    };
                    st = cell::step(&gates, &st, &m.get(s)?)?;
                    hs.push(st.narrow(2, 0, h)?);
                }
            } else {
                self.steps_by_ops(&steps, &m, &mut hs)?;
            }
            Tensor::stack(&hs, 0)?.reshape((2 * t, b, h))? // (T, 2, B, H) in step order
        };
        let out = gather_rows(&out, &order)? // time order
            .reshape((t, 2, b, h))?
            .permute((2, 0, 1, 3))? // (B, T, 2, H)
            .reshape((b, t, 2 * h))?;
        Ok(out.broadcast_mul(&mask.unsqueeze(2)?)?)
    }

    /// The recurrence as candle ops, one step at a time (the CPU's path):
    /// pushes each step's `h` `(2, B, H)` on `hs`. `m` `(T, 2, B, 1)` holds
    /// the steps' masks.
    fn steps_by_ops(&self, steps: &[Tensor], m: &Tensor, hs: &mut Vec<Tensor>) -> Result<()> {
        let h = self.hidden();
        let w_hh = self.w_hh.as_tensor();
        let keep = m.affine(-1.0, 1.0)?; // 1 − m
        let mut state: Option<(Tensor, Tensor)> = None; // (h, c), each (2, B, H)
        for (s, x_s) in steps.iter().enumerate() {
            let gates = match &state {
                Some((hp, _)) => (x_s + super::precision::matmul(hp, w_hh)?)?,
                None => x_s.clone(),
            };
            let sig = candle_nn::ops::sigmoid(&gates)?;
            let i = sig.narrow(2, 0, h)?;
            let g = gates.narrow(2, 2 * h, h)?.tanh()?;
            let o = sig.narrow(2, 3 * h, h)?;
            let c_new = match &state {
                Some((_, cp)) => ((sig.narrow(2, h, h)? * cp)? + (i * g)?)?,
                None => (i * g)?,
            };
            let h_new = (o * c_new.tanh()?)?;
            let m_s = m.get(s)?;
            let (h_s, c_s) = match &state {
                Some((hp, cp)) => {
                    let k_s = keep.get(s)?;
                    (
                        (h_new.broadcast_mul(&m_s)? + hp.broadcast_mul(&k_s)?)?,
                        (c_new.broadcast_mul(&m_s)? + cp.broadcast_mul(&k_s)?)?,
                    )
                }
                None => (h_new.broadcast_mul(&m_s)?, c_new.broadcast_mul(&m_s)?),
            };
            hs.push(h_s.clone());
            state = Some((h_s, c_s));
        }
        Ok(())
    }
}

/// How a model's BiLSTM runs its recurrence (the `recurrence` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recurrence {
    /// Rosetta's own ([`BiLstm::forward`] / [`BiLstm::recur`]).
    #[default]
    Steps,
    /// cuDNN's RNN on CUDA ([`BiLstm::forward_cudnn`]).
    Cudnn,
}

impl std::str::FromStr for Recurrence {
    type Err = Error;
    /// `steps` or `cudnn`, in every build: a session trained with cuDNN
    /// loads anywhere (it encodes with Rosetta's own steps where cuDNN is
    /// not there); training with it is refused by [`Recurrence::check_build`].
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "steps" => Ok(Recurrence::Steps),
            "cudnn" => Ok(Recurrence::Cudnn),
            other => Err(Error::invalid(format!(
                "recurrence: expected steps or cudnn, got `{other}`"
            ))),
        }
    }
}

impl Recurrence {
    /// Refuses to train with `cudnn` in a build without the `cudnn` feature.
    pub fn check_build(self) -> Result<()> {
        if self == Recurrence::Cudnn && !cfg!(feature = "cudnn") {
            return Err(Error::invalid(NO_CUDNN));
        }
        Ok(())
    }

    /// What a loaded model runs on `device`: `cudnn` only on CUDA in a
    /// build with cuDNN, Rosetta's own steps elsewhere (the same function).
    pub fn on(self, device: &Device) -> Recurrence {
        if self == Recurrence::Cudnn && device.is_cuda() && cfg!(feature = "cudnn") {
            Recurrence::Cudnn
        } else {
            Recurrence::Steps
        }
    }
}

/// Why `recurrence=cudnn` is refused in a build without cuDNN.
const NO_CUDNN: &str = "recurrence=cudnn: this build has no cuDNN (build with `--features cudnn`, scripts/build-cuda.sh)";

/// How [`BiLstm::recur_with`] runs the recurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// candle's ops, one step at a time.
    Ops,
    /// One fused cell op per step (`kernels/lstm.cu` off the CPU).
    Cell,
    /// The whole recurrence as one CPU op with its own backward (`seq`).
    Sequence,
}

/// The slices `x[0], x[1], …` along the first axis. Split in halves
/// recursively rather than by one `narrow` per slice: candle's gradient of a
/// `narrow` is a zero-padded tensor of its argument's full size, so `T`
/// direct slices would cost `T` full-size passes in the backward pass, the
/// halving `2·log₂T`.
fn split_first(x: &Tensor) -> Result<Vec<Tensor>> {
    fn rec(x: &Tensor, out: &mut Vec<Tensor>) -> Result<()> {
        let n = x.dim(0)?;
        if n == 1 {
            out.push(x.squeeze(0)?);
        } else {
            let half = n / 2;
            rec(&x.narrow(0, 0, half)?, out)?;
            rec(&x.narrow(0, half, n - half)?, out)?;
        }
        Ok(())
    }
    let mut out = Vec::with_capacity(x.dim(0)?);
    if x.dim(0)? > 0 {
        rec(x, &mut out)?;
    }
    Ok(out)
}

/// Max over the real steps of `h` `(B, T, D)` under `mask` `(B, T)` (1 real,
/// 0 padding): `(B, D)`. A row with no real step gives zeros; padded steps
/// get no gradient (tied maxima each get the full gradient, as candle's max).
pub fn max_pool(h: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let (b, t, d) = h.dims3()?;
    if mask.dims() != [b, t] {
        return Err(Error::invalid(format!(
            "max_pool mask has shape {:?}, expected [{b}, {t}] (batch, steps)",
            mask.dims()
        )));
    }
    let zeros = Tensor::zeros((b, d), h.dtype(), h.device())?;
    if t == 0 {
        return Ok(zeros);
    }
    let mask = mask.detach().to_dtype(DType::F32)?;
    let real = mask.ne(0f32)?.unsqueeze(2)?.broadcast_as((b, t, d))?;
    let lowest = Tensor::new(f32::NEG_INFINITY, h.device())?
        .to_dtype(h.dtype())?
        .broadcast_as((b, t, d))?;
    let top = real.where_cond(h, &lowest)?.max(1)?;
    let any = mask.sum(1)?.gt(0f32)?.unsqueeze(1)?.broadcast_as((b, d))?;
    Ok(any.where_cond(&top, &zeros)?)
}

/// A batch of id sequences, right-padded to a common length on a device.
#[derive(Debug, Clone)]
pub struct PaddedBatch {
    /// Ids `(B, T)` as `u32`, 0 at padded steps.
    pub ids: Tensor,
    /// `(B, T)` of the batch's float dtype: 1 at real steps, 0 at padding.
    pub mask: Tensor,
    /// Each sequence's kept length (after truncation).
    pub lengths: Vec<usize>,
    /// `T`: the longest kept length, at least 1.
    pub steps: usize,
}

impl PaddedBatch {
    /// The sequences `seqs`, each cut to its first `max_len` ids, padded on
    /// the right with id 0 to the longest kept length (at least 1 step, so an
    /// all-empty batch still has a shape); the mask as `dtype`. One upload of
    /// the ids and one of the mask.
    pub fn new(seqs: &[&[u32]], max_len: usize, dtype: DType, device: &Device) -> Result<Self> {
        let lengths: Vec<usize> = seqs.iter().map(|s| s.len().min(max_len)).collect();
        let steps = lengths.iter().copied().max().unwrap_or(0).max(1);
        let mut ids = vec![0u32; seqs.len() * steps];
        let mut mask = vec![0f32; seqs.len() * steps];
        for (r, (s, &n)) in seqs.iter().zip(&lengths).enumerate() {
            ids[r * steps..r * steps + n].copy_from_slice(&s[..n]);
            mask[r * steps..r * steps + n].fill(1.0);
        }
        let shape = (seqs.len(), steps);
        Ok(PaddedBatch {
            ids: Tensor::from_vec(ids, shape, device)?,
            mask: Tensor::from_vec(mask, shape, device)?.to_dtype(dtype)?,
            lengths,
            steps,
        })
    }
}

/// Batches of similar lengths, so little of a batch is padding: the indices
/// `0..lengths.len()` shuffled, cut into chunks of 50 batches, each chunk
/// sorted by length (stably), cut into batches of `batch` (at least 1), and
/// the batch order shuffled. Every index appears exactly once; the result
/// depends only on `lengths`, `batch` and the generator's state.
pub fn length_batches(lengths: &[usize], batch: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<usize>> {
    const CHUNK_BATCHES: usize = 50;
    let batch = batch.max(1);
    let mut idx: Vec<usize> = (0..lengths.len()).collect();
    idx.shuffle(rng);
    let mut out = Vec::with_capacity(lengths.len().div_ceil(batch));
    for chunk in idx.chunks_mut(batch * CHUNK_BATCHES) {
        chunk.sort_by_key(|&i| lengths[i]);
        out.extend(chunk.chunks(batch).map(<[usize]>::to_vec));
    }
    out.shuffle(rng);
    out
}

/// The whole recurrence of [`BiLstm::recur`] as one CPU op with its own
/// backward pass, the CPU's path: candle's per-step ops cost some twenty
/// kernels and graph nodes a step, and the gradient of every per-step slice
/// is a zero-padded full-size tensor. Forward, per step, one product
/// `h·W_hh` per direction and the cell in place; backward, per step, one
/// product `∂pre·W_hhᵀ` per direction, and `∂W_hh = Σₛ hₛ₋₁ᵀ ∂preₛ`. Products
/// go through ndarray (matrixmultiply); the gate activations and cells of
/// the forward pass are kept for the backward one.
mod seq {
    use std::any::Any;
    use std::sync::Mutex;

    use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};
    use ndarray::linalg::general_mat_mul;
    use ndarray::{ArrayView2, ArrayViewMut2};

    use crate::{Error, Result};

    /// `h` of every step `(T, 2, B, H)` from the steps' input projections
    /// `x` `(T, 2, B, 4H)` (step order: direction 1's step `s` is time
    /// `T−1−s`), the recurrent weights `w` `(2, H, 4H)` and the steps' masks
    /// `m` `(T, 2, B, 1)` (no gradient): a masked step keeps the state.
    pub fn recurrence(x: &Tensor, w: &Tensor, m: &Tensor) -> Result<Tensor> {
        let (t, two, b, g) = x.dims4()?;
        let h = g / 4;
        if two != 2 || g != 4 * h || w.dims() != [2, h, g] || m.elem_count() != t * 2 * b {
            return Err(Error::invalid(format!(
                "lstm recurrence: steps {:?}, weights {:?} and mask {:?} do not match",
                x.dims(),
                w.dims(),
                m.dims()
            )));
        }
        let op = Recurrence {
            t,
            b,
            h,
            saved: Mutex::new(None),
        };
        let m = m.detach().to_dtype(x.dtype())?.contiguous()?;
        Ok(x.contiguous()?
            .apply_op3(&w.to_dtype(x.dtype())?.contiguous()?, &m, op)?)
    }

    struct Recurrence {
        t: usize,
        b: usize,
        h: usize,
        /// The forward pass's [`Kept`], for the backward pass.
        saved: Mutex<Option<Box<dyn Any + Send>>>,
    }

    /// What the backward pass reads of the forward one: the gates'
    /// activations `i, f, g, o` `(T, 2B, 4H)`, `tanh` of each new cell and the
    /// cells after masking, `(T, 2B, H)` each.
    struct Kept<T> {
        acts: Vec<T>,
        tanh_c: Vec<T>,
        cells: Vec<T>,
    }

    /// The float types the op runs in.
    trait Real: ndarray::LinalgScalar + candle_core::WithDType + Send + Sync + std::fmt::Debug {
        const ZERO: Self;
        const ONE: Self;
        fn exp(self) -> Self;
        fn tanh(self) -> Self;
        fn slice<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [Self]>;
        fn storage(v: Vec<Self>) -> CpuStorage;
        fn host(t: &Tensor) -> candle_core::Result<Vec<Self>>;
        fn sig(self) -> Self {
            Self::ONE / (Self::ONE + (Self::ZERO - self).exp())
        }
    }

    fn window<'a, T>(v: &'a [T], l: &Layout) -> candle_core::Result<&'a [T]> {
        match l.contiguous_offsets() {
            Some((a, b)) => Ok(&v[a..b]),
            None => candle_core::bail!("lstm recurrence: a strided input"),
        }
    }

    macro_rules! real {
        ($t:ty, $v:ident) => {
            impl Real for $t {
                const ZERO: Self = 0.0;
                const ONE: Self = 1.0;
                fn exp(self) -> Self {
                    <$t>::exp(self)
                }
                fn tanh(self) -> Self {
                    <$t>::tanh(self)
                }
                fn slice<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [Self]> {
                    match s {
                        CpuStorage::$v(v) => window(v, l),
                        _ => candle_core::bail!("lstm recurrence: mixed float types"),
                    }
                }
                fn storage(v: Vec<Self>) -> CpuStorage {
                    CpuStorage::$v(v)
                }
                fn host(t: &Tensor) -> candle_core::Result<Vec<Self>> {
                    t.flatten_all()?.to_vec1::<$t>()
                }
            }
        };
    }
    real!(f32, F32);
    real!(f64, F64);

    /// `c += a·b` (`a` `(r, k)`, `b` `(k, n)`, row-major slices; `bt`: `b` is
    /// given as `(n, k)` and transposed).
    fn gemm_acc<T: Real>(
        c: &mut [T],
        a: &[T],
        b: &[T],
        (r, k, n): (usize, usize, usize),
        bt: bool,
    ) {
        let a = ArrayView2::from_shape((r, k), a).expect("sizes checked by the caller");
        let mut c = ArrayViewMut2::from_shape((r, n), c).expect("sizes checked by the caller");
        if bt {
            let b = ArrayView2::from_shape((n, k), b).expect("sizes checked by the caller");
            general_mat_mul(T::ONE, &a, &b.t(), T::ONE, &mut c);
        } else {
            let b = ArrayView2::from_shape((k, n), b).expect("sizes checked by the caller");
            general_mat_mul(T::ONE, &a, &b, T::ONE, &mut c);
        }
    }

    impl Recurrence {
        fn forward<T: Real>(&self, x: &[T], w: &[T], m: &[T]) -> (Vec<T>, Kept<T>) {
            let (t, b, h) = (self.t, self.b, self.h);
            let (g, rows) = (4 * h, 2 * b);
            let mut out = vec![T::ZERO; t * rows * h];
            let mut kept = Kept {
                acts: vec![T::ZERO; t * rows * g],
                tanh_c: vec![T::ZERO; t * rows * h],
                cells: vec![T::ZERO; t * rows * h],
            };
            let mut pre = vec![T::ZERO; rows * g];
            for s in 0..t {
                pre.copy_from_slice(&x[s * rows * g..(s + 1) * rows * g]);
                if s > 0 {
                    let hp = &out[(s - 1) * rows * h..s * rows * h];
                    for d in 0..2 {
                        gemm_acc(
                            &mut pre[d * b * g..(d + 1) * b * g],
                            &hp[d * b * h..(d + 1) * b * h],
                            &w[d * h * g..(d + 1) * h * g],
                            (b, h, g),
                            false,
                        );
                    }
                }
                for r in 0..rows {
                    let mm = m[s * rows + r];
                    let a = &pre[r * g..(r + 1) * g];
                    let at = s * rows * g + r * g;
                    let o0 = s * rows * h + r * h;
                    for j in 0..h {
                        let (i, f) = (a[j].sig(), a[h + j].sig());
                        let (gg, o) = (a[2 * h + j].tanh(), a[3 * h + j].sig());
                        let (hp, cp) = if s > 0 {
                            (out[o0 - rows * h + j], kept.cells[o0 - rows * h + j])
                        } else {
                            (T::ZERO, T::ZERO)
                        };
                        let cn = f * cp + i * gg;
                        let tc = cn.tanh();
                        kept.acts[at + j] = i;
                        kept.acts[at + h + j] = f;
                        kept.acts[at + 2 * h + j] = gg;
                        kept.acts[at + 3 * h + j] = o;
                        kept.tanh_c[o0 + j] = tc;
                        out[o0 + j] = mm * (o * tc) + (T::ONE - mm) * hp;
                        kept.cells[o0 + j] = mm * cn + (T::ONE - mm) * cp;
                    }
                }
            }
            (out, kept)
        }

        /// `(∂x, ∂w)` from the gradient `gout` of the output `out`.
        fn backward<T: Real>(
            &self,
            gout: &[T],
            out: &[T],
            w: &[T],
            m: &[T],
            kept: &Kept<T>,
        ) -> (Vec<T>, Vec<T>) {
            let (t, b, h) = (self.t, self.b, self.h);
            let (g, rows) = (4 * h, 2 * b);
            let mut dx = vec![T::ZERO; t * rows * g];
            let mut dw = vec![T::ZERO; 2 * h * g];
            let (mut dh, mut dc) = (vec![T::ZERO; rows * h], vec![T::ZERO; rows * h]);
            for s in (0..t).rev() {
                for r in 0..rows {
                    let mm = m[s * rows + r];
                    let at = s * rows * g + r * g;
                    let o0 = s * rows * h + r * h;
                    let dp = &mut dx[at..at + g];
                    for j in 0..h {
                        let a = &kept.acts[at..at + g];
                        let (i, f, gg, o) = (a[j], a[h + j], a[2 * h + j], a[3 * h + j]);
                        let tc = kept.tanh_c[o0 + j];
                        let cp = if s > 0 {
                            kept.cells[o0 - rows * h + j]
                        } else {
                            T::ZERO
                        };
                        let dh_all = gout[o0 + j] + dh[r * h + j];
                        let dhn = mm * dh_all;
                        let dcn = mm * dc[r * h + j] + dhn * o * (T::ONE - tc * tc);
                        dp[j] = dcn * gg * i * (T::ONE - i);
                        dp[h + j] = dcn * cp * f * (T::ONE - f);
                        dp[2 * h + j] = dcn * i * (T::ONE - gg * gg);
                        dp[3 * h + j] = dhn * tc * o * (T::ONE - o);
                        dh[r * h + j] = (T::ONE - mm) * dh_all;
                        dc[r * h + j] = (T::ONE - mm) * dc[r * h + j] + dcn * f;
                    }
                }
                if s > 0 {
                    let hp = &out[(s - 1) * rows * h..s * rows * h];
                    for d in 0..2 {
                        let dp = &dx[s * rows * g + d * b * g..s * rows * g + (d + 1) * b * g];
                        let wd = &w[d * h * g..(d + 1) * h * g];
                        // ∂h_{s−1} += ∂pre · W_hhᵀ
                        gemm_acc(&mut dh[d * b * h..(d + 1) * b * h], dp, wd, (b, g, h), true);
                        // ∂W_hh += h_{s−1}ᵀ · ∂pre
                        let hpd = ArrayView2::from_shape((b, h), &hp[d * b * h..(d + 1) * b * h])
                            .expect("sizes checked");
                        let dpv = ArrayView2::from_shape((b, g), dp).expect("sizes checked");
                        let mut dwd =
                            ArrayViewMut2::from_shape((h, g), &mut dw[d * h * g..(d + 1) * h * g])
                                .expect("sizes checked");
                        general_mat_mul(T::ONE, &hpd.t(), &dpv, T::ONE, &mut dwd);
                    }
                }
            }
            (dx, dw)
        }

        fn cpu<T: Real>(
            &self,
            (s1, l1): (&CpuStorage, &Layout),
            (s2, l2): (&CpuStorage, &Layout),
            (s3, l3): (&CpuStorage, &Layout),
        ) -> candle_core::Result<(CpuStorage, Shape)> {
            let (x, w, m) = (T::slice(s1, l1)?, T::slice(s2, l2)?, T::slice(s3, l3)?);
            let (out, kept) = self.forward(x, w, m);
            *self.saved.lock().expect("not poisoned") = Some(Box::new(kept));
            Ok((T::storage(out), Shape::from((self.t, 2, self.b, self.h))))
        }

        fn grads<T: Real>(
            &self,
            x: &Tensor,
            w: &Tensor,
            m: &Tensor,
            res: &Tensor,
            grad: &Tensor,
        ) -> candle_core::Result<(Tensor, Tensor)> {
            let (wv, mv) = (T::host(w)?, T::host(m)?);
            let kept = match self.saved.lock().expect("not poisoned").take() {
                Some(k) => k.downcast::<Kept<T>>().ok().map(|k| *k),
                None => None,
            };
            let kept = match kept {
                Some(k) => k,
                None => self.forward(&T::host(x)?, &wv, &mv).1,
            };
            let (dx, dw) = self.backward(&T::host(grad)?, &T::host(res)?, &wv, &mv, &kept);
            Ok((
                Tensor::from_vec(dx, x.shape(), x.device())?,
                Tensor::from_vec(dw, w.shape(), w.device())?,
            ))
        }
    }

    impl CustomOp3 for Recurrence {
        fn name(&self) -> &'static str {
            "rosetta-lstm-recurrence"
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
            match s1 {
                CpuStorage::F32(_) => self.cpu::<f32>((s1, l1), (s2, l2), (s3, l3)),
                CpuStorage::F64(_) => self.cpu::<f64>((s1, l1), (s2, l2), (s3, l3)),
                _ => candle_core::bail!("lstm recurrence: f32 or f64 values expected"),
            }
        }

        fn bwd(
            &self,
            x: &Tensor,
            w: &Tensor,
            m: &Tensor,
            res: &Tensor,
            grad: &Tensor,
        ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
            let (dx, dw) = match x.dtype() {
                DType::F32 => self.grads::<f32>(x, w, m, res, grad)?,
                DType::F64 => self.grads::<f64>(x, w, m, res, grad)?,
                d => candle_core::bail!("lstm recurrence: no gradient in {d:?}"),
            };
            Ok((Some(dx), Some(dw), None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    fn uniform(shape: &[usize], scale: f64, r: &mut ChaCha8Rng) -> Tensor {
        let n = shape.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|_| (2.0 * r.random::<f64>() - 1.0) * scale)
            .collect();
        Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
    }

    fn mask_of(lengths: &[usize], t: usize) -> Tensor {
        let v: Vec<f64> = lengths
            .iter()
            .flat_map(|&n| (0..t).map(move |s| if s < n { 1.0 } else { 0.0 }))
            .collect();
        Tensor::from_vec(v, (lengths.len(), t), &Device::Cpu).unwrap()
    }

    fn vec3(t: &Tensor) -> Vec<Vec<Vec<f64>>> {
        t.to_vec3::<f64>().unwrap()
    }

    fn sig(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// One direction of an LSTM over `xs` (no padding), written out: `w_ih`
    /// `(input, 8H)` columns `dir·4H…`, `w_hh` `(H, 4H)` of that direction.
    fn naive_direction(
        xs: &[Vec<f64>],
        w_ih: &[Vec<f64>],
        bias: &[f64],
        w_hh: &[Vec<f64>],
        dir: usize,
        h: usize,
    ) -> Vec<Vec<f64>> {
        let mut hp = vec![0.0; h];
        let mut cp = vec![0.0; h];
        let mut out = vec![Vec::new(); xs.len()];
        let order: Vec<usize> = if dir == 0 {
            (0..xs.len()).collect()
        } else {
            (0..xs.len()).rev().collect()
        };
        for t in order {
            let mut z = vec![0.0; 4 * h];
            for (j, zj) in z.iter_mut().enumerate() {
                let col = dir * 4 * h + j;
                *zj = bias[col];
                for (k, xk) in xs[t].iter().enumerate() {
                    *zj += xk * w_ih[k][col];
                }
                for (k, hk) in hp.iter().enumerate() {
                    *zj += hk * w_hh[k][j];
                }
            }
            for u in 0..h {
                let (i, f, g, o) = (
                    sig(z[u]),
                    sig(z[h + u]),
                    z[2 * h + u].tanh(),
                    sig(z[3 * h + u]),
                );
                cp[u] = f * cp[u] + i * g;
                hp[u] = o * cp[u].tanh();
            }
            out[t] = hp.clone();
        }
        out
    }

    /// The scalar loss of the gradient checks: Σ max_pool(forward(x)) ⊙ w.
    fn pooled_loss(lstm: &BiLstm, x: &Tensor, mask: &Tensor, w: &Tensor) -> Tensor {
        let y = max_pool(&lstm.forward(x, mask).unwrap(), mask).unwrap();
        (y * w).unwrap().sum_all().unwrap()
    }

    #[test]
    fn fused_cell_and_sequence_op_match_candle_ops_with_gradients() {
        // the fused cell (a GPU's path, here through its CPU code) and the
        // whole-sequence op (the CPU's path) against candle's ops: outputs
        // and every gradient, padding included
        let mut r = rng(11);
        let lstm = BiLstm::new(3, 4, &mut r, DType::F64, &Device::Cpu).unwrap();
        let x = Var::from_tensor(&uniform(&[3, 5, 3], 1.0, &mut r)).unwrap();
        let mask = mask_of(&[5, 2, 3], 5);
        let w = uniform(&[3, 5, 8], 1.0, &mut r);
        let run = |path: Path| {
            let proj = lstm
                .project(&x.as_tensor().reshape((15, 3)).unwrap())
                .unwrap();
            let out = lstm
                .recur_with(&proj.reshape((3, 5, 32)).unwrap(), &mask, path)
                .unwrap();
            let loss = (&out * &w).unwrap().sum_all().unwrap();
            let grads = loss.backward().unwrap();
            let mut all = vec![out.flatten_all().unwrap().to_vec1::<f64>().unwrap()];
            for (_, v) in lstm
                .named_vars("l")
                .iter()
                .chain([("x".to_string(), x.clone())].iter())
            {
                all.push(
                    grads
                        .get(v.as_tensor())
                        .unwrap()
                        .flatten_all()
                        .unwrap()
                        .to_vec1::<f64>()
                        .unwrap(),
                );
            }
            all
        };
        let plain = run(Path::Ops);
        for path in [Path::Cell, Path::Sequence] {
            let fused = run(path);
            for (a, b) in fused.iter().zip(&plain) {
                assert_eq!(a.len(), b.len());
                for (x, y) in a.iter().zip(b) {
                    assert!((x - y).abs() < 1e-10, "{path:?}: {x} vs {y}");
                }
            }
            assert!(
                fused.iter().skip(1).all(|g| g.iter().any(|v| *v != 0.0)),
                "{path:?}: a variable got no gradient"
            );
        }
    }

    #[test]
    fn gradients_match_finite_differences() {
        let mut r = rng(7);
        let lstm = BiLstm::new(3, 2, &mut r, DType::F64, &Device::Cpu).unwrap();
        let x = Var::from_tensor(&uniform(&[2, 4, 3], 1.0, &mut r)).unwrap();
        let mask = mask_of(&[4, 2], 4);
        let w = uniform(&[2, 4], 1.0, &mut r);
        let loss = pooled_loss(&lstm, x.as_tensor(), &mask, &w);
        let grads = loss.backward().unwrap();
        let mut vars = lstm.named_vars("l");
        vars.push(("x".into(), x.clone()));
        let eps = 1e-6;
        let mut checked = 0;
        for (name, v) in &vars {
            let g = grads
                .get(v.as_tensor())
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f64>()
                .unwrap();
            let base = v
                .as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f64>()
                .unwrap();
            let mut numeric = Vec::new();
            for k in 0..base.len() {
                let at = |delta: f64| {
                    let mut p = base.clone();
                    p[k] += delta;
                    v.set(&Tensor::from_vec(p, v.shape(), &Device::Cpu).unwrap())
                        .unwrap();
                    pooled_loss(&lstm, x.as_tensor(), &mask, &w)
                        .to_scalar::<f64>()
                        .unwrap()
                };
                numeric.push((at(eps) - at(-eps)) / (2.0 * eps));
            }
            v.set(&Tensor::from_vec(base.clone(), v.shape(), &Device::Cpu).unwrap())
                .unwrap();
            let scale = numeric.iter().fold(1e-3f64, |a, b| a.max(b.abs()));
            for (k, (a, n)) in g.iter().zip(&numeric).enumerate() {
                assert!(
                    (a - n).abs() <= 1e-6 * scale,
                    "{name}[{k}]: autograd {a}, finite difference {n}"
                );
            }
            checked += base.len();
        }
        // w_ih 3×16, b 16, w_hh 2×2×8, x 2×4×3
        assert_eq!(checked, 48 + 16 + 32 + 24);
    }

    #[test]
    fn batched_forward_equals_naive_per_sequence_loops() {
        let mut r = rng(11);
        let (inp, h, t) = (4, 3, 6);
        let lstm = BiLstm::new(inp, h, &mut r, DType::F64, &Device::Cpu).unwrap();
        let lengths = [6, 3, 1, 5];
        let x = uniform(&[4, t, inp], 2.0, &mut r);
        let y = vec3(&lstm.forward(&x, &mask_of(&lengths, t)).unwrap());
        let xs = vec3(&x);
        let w_ih = lstm.w_ih.as_tensor().to_vec2::<f64>().unwrap();
        let bias = lstm.b.as_tensor().to_vec1::<f64>().unwrap();
        let w_hh = vec3(lstm.w_hh.as_tensor());
        for (row, &n) in lengths.iter().enumerate() {
            let seq = &xs[row][..n];
            let fwd = naive_direction(seq, &w_ih, &bias, &w_hh[0], 0, h);
            let bwd = naive_direction(seq, &w_ih, &bias, &w_hh[1], 1, h);
            for s in 0..t {
                for u in 0..2 * h {
                    let want = match (s < n, u < h) {
                        (false, _) => 0.0,
                        (true, true) => fwd[s][u],
                        (true, false) => bwd[s][u - h],
                    };
                    let got = y[row][s][u];
                    assert!(
                        (got - want).abs() < 1e-10,
                        "row {row} step {s} unit {u}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn padding_changes_no_encoding_and_gets_no_gradient() {
        let mut r = rng(5);
        let (inp, h) = (3, 4);
        let lstm = BiLstm::new(inp, h, &mut r, DType::F64, &Device::Cpu).unwrap();
        let lengths = [3usize, 5];
        let tight = uniform(&[2, 5, inp], 1.0, &mut r);
        let tight_mask = mask_of(&lengths, 5);
        let want = max_pool(&lstm.forward(&tight, &tight_mask).unwrap(), &tight_mask)
            .unwrap()
            .to_vec2::<f64>()
            .unwrap();
        // the same two sequences padded to 9 steps with arbitrary values,
        // between an empty row and a row of length 9
        let junk = vec3(&uniform(&[4, 9, inp], 50.0, &mut r));
        let rows = vec3(&tight);
        let mut padded = junk.clone();
        for (dst, (src, &n)) in [1usize, 3].iter().zip(rows.iter().zip(&lengths)) {
            padded[*dst][..n].clone_from_slice(&src[..n]);
        }
        let flat: Vec<f64> = padded.iter().flatten().flatten().copied().collect();
        let x =
            Var::from_tensor(&Tensor::from_vec(flat, (4, 9, inp), &Device::Cpu).unwrap()).unwrap();
        let lens = [0usize, 3, 9, 5];
        let mask = mask_of(&lens, 9);
        let pooled = max_pool(&lstm.forward(x.as_tensor(), &mask).unwrap(), &mask).unwrap();
        let got = pooled.to_vec2::<f64>().unwrap();
        assert!(got[0].iter().all(|&v| v == 0.0), "empty row: {:?}", got[0]);
        for (g, w) in [&got[1], &got[3]].into_iter().zip(&want) {
            for (a, b) in g.iter().zip(w) {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
        }
        let w = uniform(&[4, 2 * h], 1.0, &mut r);
        let grads = (pooled * w).unwrap().sum_all().unwrap().backward().unwrap();
        let gx = vec3(grads.get(x.as_tensor()).unwrap());
        let mut real_nonzero = 0;
        for (row, &n) in lens.iter().enumerate() {
            for (s, g) in gx[row].iter().enumerate() {
                if s >= n {
                    assert!(g.iter().all(|&v| v == 0.0), "row {row} step {s}: {g:?}");
                } else if g.iter().any(|&v| v != 0.0) {
                    real_nonzero += 1;
                }
            }
        }
        assert!(real_nonzero > 0, "the real steps get gradient");
    }

    #[test]
    fn named_tensors_round_trip_and_bad_shapes_are_named() {
        let mut r = rng(3);
        let lstm = BiLstm::new(5, 3, &mut r, DType::F64, &Device::Cpu).unwrap();
        assert_eq!((lstm.input(), lstm.hidden()), (5, 3));
        let x = uniform(&[2, 4, 5], 1.0, &mut r);
        let mask = mask_of(&[4, 1], 4);
        let snap = lstm.snapshot("enc").unwrap();
        let names: Vec<&str> = snap.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["enc.w_ih", "enc.b", "enc.w_hh"]);
        let map: HashMap<String, Tensor> = snap.iter().cloned().collect();
        let back = BiLstm::from_tensors("enc", &map, DType::F64, &Device::Cpu).unwrap();
        let (a, b) = (
            lstm.forward(&x, &mask).unwrap(),
            back.forward(&x, &mask).unwrap(),
        );
        assert_eq!(vec3(&a), vec3(&b));
        // set_from restores a snapshot into a changed layer
        let other = BiLstm::new(5, 3, &mut r, DType::F64, &Device::Cpu).unwrap();
        other.set_from("enc", &snap).unwrap();
        assert_eq!(vec3(&other.forward(&x, &mask).unwrap()), vec3(&a));

        let mut bad = map.clone();
        bad.insert(
            "enc.b".into(),
            Tensor::zeros(23, DType::F64, &Device::Cpu).unwrap(),
        );
        let e = BiLstm::from_tensors("enc", &bad, DType::F64, &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("`enc.b`") && e.contains("[23]"), "{e}");
        let mut bad = map.clone();
        bad.insert(
            "enc.w_hh".into(),
            Tensor::zeros((2, 3, 11), DType::F64, &Device::Cpu).unwrap(),
        );
        let e = BiLstm::from_tensors("enc", &bad, DType::F64, &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("`enc.w_hh`"), "{e}");
        let mut bad = map.clone();
        bad.insert(
            "enc.w_ih".into(),
            Tensor::zeros((5, 12), DType::F64, &Device::Cpu).unwrap(),
        );
        let e = BiLstm::from_tensors("enc", &bad, DType::F64, &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("`enc.w_ih`"), "{e}");
        let mut bad = map.clone();
        bad.remove("enc.w_ih");
        let e = BiLstm::from_tensors("enc", &bad, DType::F64, &Device::Cpu)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("enc.w_ih"), "{e}");
        assert!(other.set_from("dec", &snap).is_err());
        // wrong input widths and masks are errors, not panics
        assert!(lstm
            .forward(&uniform(&[2, 4, 6], 1.0, &mut r), &mask)
            .is_err());
        assert!(lstm.forward(&x, &mask_of(&[4, 1, 2], 4)).is_err());
        assert!(BiLstm::new(5, 0, &mut r, DType::F64, &Device::Cpu).is_err());
    }

    #[test]
    fn same_seed_same_weights_in_f32() {
        let a = BiLstm::new(4, 2, &mut rng(9), DType::F32, &Device::Cpu).unwrap();
        let b = BiLstm::new(4, 2, &mut rng(9), DType::F32, &Device::Cpu).unwrap();
        let w = a
            .w_hh
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        assert_eq!(
            w,
            b.w_hh
                .as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        );
        assert!(w.iter().all(|v| v.abs() < 1.0 / 2f32.sqrt()));
        let batch = PaddedBatch::new(&[&[1, 2, 3], &[4]], 10, DType::F32, &Device::Cpu).unwrap();
        let x = Tensor::ones((2, batch.steps, 4), DType::F32, &Device::Cpu).unwrap();
        let y = a.forward(&x, &batch.mask).unwrap();
        assert_eq!(y.dims(), [2, 3, 4]);
        assert_eq!(y.dtype(), DType::F32);
    }

    #[test]
    fn padded_batches_truncate_and_pad_right() {
        let seqs: [&[u32]; 3] = [&[5, 6, 7, 8], &[9], &[]];
        let pb = PaddedBatch::new(&seqs, 3, DType::F64, &Device::Cpu).unwrap();
        assert_eq!((pb.lengths.clone(), pb.steps), (vec![3, 1, 0], 3));
        assert_eq!(
            pb.ids.to_vec2::<u32>().unwrap(),
            [[5, 6, 7], [9, 0, 0], [0, 0, 0]]
        );
        assert_eq!(
            pb.mask.to_vec2::<f64>().unwrap(),
            [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        );
        let empty = PaddedBatch::new(&[&[], &[]], 5, DType::F32, &Device::Cpu).unwrap();
        assert_eq!((empty.steps, empty.ids.dims()), (1, &[2usize, 1][..]));
        let none = PaddedBatch::new(&[], 5, DType::F32, &Device::Cpu).unwrap();
        assert_eq!(none.ids.dims(), [0, 1]);
    }

    #[test]
    fn length_batches_cover_every_index_once_by_length() {
        let mut r = rng(1);
        let lengths: Vec<usize> = (0..1000).map(|_| r.random_range(0..60)).collect();
        // one chunk (≤ 50 batches): batches are disjoint runs of the sorted lengths
        let small = &lengths[..430];
        let batches = length_batches(small, 10, &mut rng(2));
        assert_eq!(batches.len(), 43);
        let mut seen: Vec<usize> = batches.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..430).collect::<Vec<_>>());
        let span = |b: &Vec<usize>| {
            let l = b.iter().map(|&i| small[i]);
            (l.clone().min().unwrap(), l.max().unwrap())
        };
        for a in &batches {
            for b in &batches {
                let ((a0, a1), (b0, b1)) = (span(a), span(b));
                assert!(
                    std::ptr::eq(a, b) || a1 <= b0 || b1 <= a0,
                    "overlap {a0}..{a1} / {b0}..{b1}"
                );
            }
        }
        // the batch order is shuffled, not sorted
        let firsts: Vec<usize> = batches.iter().map(|b| small[b[0]]).collect();
        assert!(firsts.windows(2).any(|w| w[0] > w[1]));
        // several chunks: every index once, batches of at most `batch`, deterministic
        let all = length_batches(&lengths, 7, &mut rng(4));
        assert!(all.iter().all(|b| !b.is_empty() && b.len() <= 7));
        let mut seen: Vec<usize> = all.iter().flatten().copied().collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        assert_eq!(all, length_batches(&lengths, 7, &mut rng(4)));
        assert_ne!(all, length_batches(&lengths, 7, &mut rng(5)));
        // and much less spread within a batch than random batches have
        let spread = |bs: &[Vec<usize>]| -> usize {
            bs.iter()
                .map(|b| {
                    let l = b.iter().map(|&i| lengths[i]);
                    l.clone().max().unwrap() - l.min().unwrap()
                })
                .sum()
        };
        let random: Vec<Vec<usize>> = (0..1000)
            .collect::<Vec<_>>()
            .chunks(7)
            .map(<[usize]>::to_vec)
            .collect();
        assert!(
            spread(&all) * 5 < spread(&random),
            "{} vs {}",
            spread(&all),
            spread(&random)
        );
        assert!(length_batches(&[], 3, &mut rng(1)).is_empty());
        assert_eq!(length_batches(&[2, 1], 0, &mut rng(1)).len(), 2);
    }

    /// A measurement, not a check: forward + backward of B=100, T=50,
    /// input 512, H=128 in f32 on the CPU (`cargo test --lib
    /// models::lstm::tests::time_forward_backward -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn time_forward_backward() {
        let mut r = rng(1);
        let dev = Device::Cpu;
        let lstm = BiLstm::new(512, 128, &mut r, DType::F32, &dev).unwrap();
        let lens: Vec<usize> = (0..100).map(|_| r.random_range(10..=50)).collect();
        let mask = mask_of(&lens, 50).to_dtype(DType::F32).unwrap();
        let x = Var::from_tensor(
            &uniform(&[100, 50, 512], 1.0, &mut r)
                .to_dtype(DType::F32)
                .unwrap(),
        )
        .unwrap();
        for rep in 0..3 {
            let t0 = std::time::Instant::now();
            let y = lstm.forward(x.as_tensor(), &mask).unwrap();
            let loss = max_pool(&y, &mask).unwrap().sum_all().unwrap();
            let t1 = std::time::Instant::now();
            let g = loss.backward().unwrap();
            let t2 = std::time::Instant::now();
            assert!(g.get(lstm.w_hh.as_tensor()).is_some());
            println!(
                "rep {rep}: forward {:.3} s, backward {:.3} s, total {:.3} s",
                (t1 - t0).as_secs_f64(),
                (t2 - t1).as_secs_f64(),
                (t2 - t0).as_secs_f64()
            );
        }
    }
}

/// One step of both directions as a single op, `[h | c]` in and out: the
/// forward and backward passes are one kernel each on a GPU
/// (`kernels/lstm.cu`) instead of some twenty candle kernels per step.
/// `gates` `(2, B, 4H)` are the pre-activations `x·W_ih + b + h·W_hh`, `st`
/// `(2, B, 2H)` the previous `[h | c]`, `mask` `(2, B, 1)` the step's mask.
mod cell {
    use candle_core::{CpuStorage, CustomOp2, CustomOp3, Layout, Shape, Storage, Tensor};

    use crate::Result;

    /// The new `[h | c]` `(2, B, 2H)`.
    pub fn step(gates: &Tensor, st: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let h2 = st.dims().last().copied().unwrap_or(0);
        if mask.elem_count() * h2 != st.elem_count() || gates.elem_count() != 2 * st.elem_count() {
            return Err(crate::Error::invalid(format!(
                "lstm cell: gates {:?}, state {:?} and mask {:?} do not match",
                gates.dims(),
                st.dims(),
                mask.dims()
            )));
        }
        let op = Cell {
            mask: mask.contiguous()?,
        };
        Ok(gates.contiguous()?.apply_op2(&st.contiguous()?, op)?)
    }

    struct Cell {
        mask: Tensor,
    }

    struct CellGrad {
        mask: Tensor,
    }

    fn host(s: &CpuStorage, l: &Layout) -> candle_core::Result<Vec<f64>> {
        crate::models::kit::rows::host_f64(s, l, "lstm-cell")
    }

    use crate::models::kit::rows::like;

    /// `(rows, H)` of gates `(…, 4H)` and a state `(…, 2H)`.
    fn sizes(lg: &Layout, ls: &Layout) -> candle_core::Result<(usize, usize)> {
        let h = ls.dims().last().copied().unwrap_or(0) / 2;
        let rows = ls.shape().elem_count() / (2 * h).max(1);
        if lg.dims().last() != Some(&(4 * h)) || lg.shape().elem_count() != rows * 4 * h {
            candle_core::bail!(
                "lstm-cell: gates {:?} and state {:?} differ",
                lg.dims(),
                ls.dims()
            );
        }
        Ok((rows, h))
    }

    fn mask_host(mask: &Tensor) -> candle_core::Result<Vec<f64>> {
        let (s, l) = mask.storage_and_layout();
        match &*s {
            Storage::Cpu(c) => host(c, l),
            _ => candle_core::bail!("lstm-cell: the mask is on another device"),
        }
    }

    fn sig(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// The gates' activations and the new cell of row `r`, unit `j`.
    fn gates_of(a: &[f64], cp: f64, h: usize, j: usize) -> [f64; 5] {
        let (i, f) = (sig(a[j]), sig(a[h + j]));
        let (g, o) = (a[2 * h + j].tanh(), sig(a[3 * h + j]));
        [i, f, g, o, f * cp + i * g]
    }

    impl CustomOp2 for Cell {
        fn name(&self) -> &'static str {
            "rosetta-lstm-cell"
        }

        fn cpu_fwd(
            &self,
            s1: &CpuStorage,
            l1: &Layout,
            s2: &CpuStorage,
            l2: &Layout,
        ) -> candle_core::Result<(CpuStorage, Shape)> {
            let (rows, h) = sizes(l1, l2)?;
            let (a, st, m) = (host(s1, l1)?, host(s2, l2)?, mask_host(&self.mask)?);
            let mut out = vec![0f64; rows * 2 * h];
            for r in 0..rows {
                for j in 0..h {
                    let (hp, cp) = (st[r * 2 * h + j], st[r * 2 * h + h + j]);
                    let [_, _, _, o, cn] = gates_of(&a[r * 4 * h..], cp, h, j);
                    let hn = o * cn.tanh();
                    out[r * 2 * h + j] = m[r] * hn + (1.0 - m[r]) * hp;
                    out[r * 2 * h + h + j] = m[r] * cn + (1.0 - m[r]) * cp;
                }
            }
            Ok((like(s1, out), l2.shape().clone()))
        }

        #[cfg(feature = "cuda")]
        fn cuda_fwd(
            &self,
            s1: &candle_core::CudaStorage,
            l1: &Layout,
            s2: &candle_core::CudaStorage,
            l2: &Layout,
        ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
            let (rows, h) = sizes(l1, l2)?;
            let (ms, ml) = self.mask.storage_and_layout();
            let Storage::Cuda(m) = &*ms else {
                candle_core::bail!("lstm-cell: the mask is on another device")
            };
            let out = gpu::launch(false, [(s1, l1), (s2, l2), (m, ml)], None, rows, h)?;
            Ok((out, l2.shape().clone()))
        }

        fn bwd(
            &self,
            gates: &Tensor,
            st: &Tensor,
            _res: &Tensor,
            grad: &Tensor,
        ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
            let op = CellGrad {
                mask: self.mask.clone(),
            };
            let packed = gates.apply_op3_no_bwd(st, &grad.contiguous()?, &op)?;
            let last = packed.rank() - 1;
            let h = st.dims()[last] / 2;
            Ok((
                Some(packed.narrow(last, 0, 4 * h)?.contiguous()?),
                Some(packed.narrow(last, 4 * h, 2 * h)?.contiguous()?),
            ))
        }
    }

    impl CustomOp3 for CellGrad {
        fn name(&self) -> &'static str {
            "rosetta-lstm-cell-grad"
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
            let (rows, h) = sizes(l1, l2)?;
            let (a, st, g) = (host(s1, l1)?, host(s2, l2)?, host(s3, l3)?);
            let m = mask_host(&self.mask)?;
            let mut out = vec![0f64; rows * 6 * h];
            for r in 0..rows {
                for j in 0..h {
                    let cp = st[r * 2 * h + h + j];
                    let [i, f, gg, o, cn] = gates_of(&a[r * 4 * h..], cp, h, j);
                    let tc = cn.tanh();
                    let (dh, dc) = (g[r * 2 * h + j], g[r * 2 * h + h + j]);
                    let dhn = m[r] * dh;
                    let dcn = m[r] * dc + dhn * o * (1.0 - tc * tc);
                    let d = &mut out[r * 6 * h..(r + 1) * 6 * h];
                    d[j] = dcn * gg * i * (1.0 - i);
                    d[h + j] = dcn * cp * f * (1.0 - f);
                    d[2 * h + j] = dcn * i * (1.0 - gg * gg);
                    d[3 * h + j] = dhn * tc * o * (1.0 - o);
                    d[4 * h + j] = (1.0 - m[r]) * dh;
                    d[5 * h + j] = (1.0 - m[r]) * dc + dcn * f;
                }
            }
            let mut dims = l2.dims().to_vec();
            *dims.last_mut().expect("state has a last axis") = 6 * h;
            Ok((like(s1, out), Shape::from(dims)))
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
            let (rows, h) = sizes(l1, l2)?;
            let (ms, ml) = self.mask.storage_and_layout();
            let Storage::Cuda(m) = &*ms else {
                candle_core::bail!("lstm-cell: the mask is on another device")
            };
            let out = gpu::launch(true, [(s1, l1), (s2, l2), (m, ml)], Some((s3, l3)), rows, h)?;
            let mut dims = l2.dims().to_vec();
            *dims.last_mut().expect("state has a last axis") = 6 * h;
            Ok((out, Shape::from(dims)))
        }
    }

    #[cfg(feature = "cuda")]
    mod gpu {
        use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
        use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
        use candle_core::{CudaStorage, Layout};

        use crate::models::kit::rows::gpu::launch_cfg;
        use crate::models::kit::rows::offsets;

        const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/lstm.ptx"));

        /// The cell (`grad` false: out `rows × 2H`) or its gradient (out
        /// `rows × 6H`, reading `g`) over gates, state and mask.
        pub fn launch(
            grad: bool,
            ins: [(&CudaStorage, &Layout); 3],
            g: Option<(&CudaStorage, &Layout)>,
            rows: usize,
            h: usize,
        ) -> candle_core::Result<CudaStorage> {
            let dev = ins[0].0.device.clone();
            let (r64, h64) = (rows as u64, h as u64);
            macro_rules! run {
                ($t:ty, $s:literal) => {{
                    macro_rules! view {
                        ($x:expr) => {{
                            let (s, l) = $x;
                            let (a, b) = offsets(l, "lstm-cell")?;
                            s.as_cuda_slice::<$t>()?.slice(a..b)
                        }};
                    }
                    let (a, st, m) = (view!(ins[0]), view!(ins[1]), view!(ins[2]));
                    let gv = match g {
                        Some(x) => Some(view!(x)),
                        None => None,
                    };
                    let width = if grad { 6 } else { 2 };
                    let mut out = dev.alloc_zeros::<$t>(rows * width * h)?;
                    let name = if grad {
                        concat!("lstm_cell_grad_", $s)
                    } else {
                        concat!("lstm_cell_", $s)
                    };
                    let f = dev.get_or_load_custom_func(name, "rosetta_lstm", PTX)?;
                    {
                        let mut bld = f.builder();
                        bld.arg(&a);
                        bld.arg(&st);
                        bld.arg(&m);
                        if let Some(gv) = &gv {
                            bld.arg(gv);
                        }
                        bld.arg(&mut out);
                        bld.arg(&r64);
                        bld.arg(&h64);
                        // SAFETY: gates hold rows·4H values, state and g rows·2H,
                        // mask rows, out rows·width·H (checked by `sizes` and
                        // the op's shapes).
                        unsafe { bld.launch(launch_cfg(rows * h)) }.w()?;
                    }
                    CudaStorage::wrap_cuda_slice(out, dev.clone())
                }};
            }
            Ok(match &ins[0].0.slice {
                CudaStorageSlice::F32(_) => run!(f32, "f32"),
                CudaStorageSlice::F64(_) => run!(f64, "f64"),
                _ => candle_core::bail!("lstm-cell: f32 or f64 values expected"),
            })
        }
    }
}

/// cuDNN's recurrence (`recurrence=cudnn`) against the CPU's.
#[cfg(all(test, feature = "cudnn"))]
mod cudnn_tests {
    use candle_core::{DType, Device, Tensor};
    use rand::SeedableRng;

    use super::BiLstm;

    /// On a GPU (a build with `cudnn`, run where one is present): cuDNN's
    /// outputs and the gradients of every parameter and input agree with the
    /// CPU's recurrence, on right-padded rows of different lengths (one of
    /// length 0).
    #[test]
    fn cudnn_matches_the_cpu_recurrence() {
        // where no GPU opens the test has nothing to check, unless
        // ROSETTA_REQUIRE_GPU=1 (scripts/gpu/gpu.sh) says one must
        let gpu = match Device::new_cuda(0) {
            Ok(d) => d,
            Err(e) if std::env::var("ROSETTA_REQUIRE_GPU").as_deref() != Ok("1") => {
                eprintln!("no GPU ({e}): the cuDNN recurrence was not run");
                return;
            }
            Err(e) => panic!("ROSETTA_REQUIRE_GPU=1 but no GPU opens: {e}"),
        };
        let (b, t, d, h) = (4usize, 5usize, 3usize, 6usize);
        let lengths = [5usize, 2, 0, 4];
        let mut mask = vec![0f32; b * t];
        for (r, &n) in lengths.iter().enumerate() {
            mask[r * t..r * t + n].fill(1.0);
        }
        let xv: Vec<f32> = (0..b * t * d).map(|i| ((i as f32) * 0.37).sin()).collect();
        let run = |dev: &Device, cudnn: bool| -> Vec<Vec<f32>> {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
            let l = BiLstm::new(d, h, &mut rng, DType::F32, dev).unwrap();
            let x = candle_core::Var::from_tensor(
                &Tensor::from_vec(xv.clone(), (b, t, d), dev).unwrap(),
            )
            .unwrap();
            let m = Tensor::from_vec(mask.clone(), (b, t), dev).unwrap();
            let out = if cudnn {
                l.forward_cudnn(x.as_tensor(), &m, &lengths).unwrap()
            } else {
                l.forward(x.as_tensor(), &m).unwrap()
            };
            let wts: Vec<f32> = (0..b * t * 2 * h)
                .map(|i| ((i as f32) * 0.11).cos())
                .collect();
            let wts = Tensor::from_vec(wts, (b, t, 2 * h), dev).unwrap();
            let g = (&out * &wts)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap();
            let flat = |t: &Tensor| {
                t.flatten_all()
                    .unwrap()
                    .to_device(&Device::Cpu)
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap()
            };
            let mut v = vec![flat(&out)];
            for var in [
                x.as_tensor(),
                l.w_ih.as_tensor(),
                l.b.as_tensor(),
                l.w_hh.as_tensor(),
            ] {
                v.push(flat(g.get(var).unwrap()));
            }
            v
        };
        let (a, c) = (run(&gpu, true), run(&Device::Cpu, false));
        for (part, (a, c)) in a.iter().zip(&c).enumerate() {
            for (x, y) in a.iter().zip(c) {
                assert!(
                    (x - y).abs() <= 1e-4 * (1.0 + y.abs()),
                    "part {part}: {x} vs {y}"
                );
            }
        }
    }
}
