//! Restricted Boltzmann machines trained by contrastive divergence: the
//! replicated softmax model (Salakhutdinov & Hinton 2009) over bags of
//! words, and binary RBMs over the activation probabilities of the layer
//! below. The layers of a deep belief network ([`crate::models::neural::dbn_cca`]); every
//! update is a handful of dense device ops, the same on CPU and CUDA.
//!
//! Conventions: `w` is `I × H` (visible × hidden), `b` the hidden biases,
//! `c` the visible biases. The replicated softmax's energy is
//! `E(v,h) = −Σᵢⱼ vᵢ hⱼ Wᵢⱼ − Σᵢ cᵢ vᵢ − D Σⱼ bⱼ hⱼ` with `D = Σᵢ vᵢ`, so
//! `p(hⱼ=1|v) = σ(D·bⱼ + Σᵢ vᵢ Wᵢⱼ)` (the hidden bias scales with the
//! text's length) and `p(v|h)` is a softmax over the vocabulary from which a
//! reconstruction draws `D` words.

use candle_core::{DType, Device, Tensor, D};
use candle_nn::ops::{log_softmax, sigmoid, softmax_last_dim};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::nn::SparseBatch;
use crate::text::CsrMatrix;
use crate::{Error, Result};

/// One RBM's parameters.
#[derive(Debug, Clone)]
pub struct Rbm {
    /// `I × H` weights.
    pub w: Tensor,
    /// Hidden biases (`H`).
    pub b: Tensor,
    /// Visible biases (`I`).
    pub c: Tensor,
}

/// The momentum buffers of an [`Rbm`]'s updates (same shapes).
#[derive(Debug, Clone)]
pub struct Increments {
    /// Of `w`.
    pub w: Tensor,
    /// Of `b`.
    pub b: Tensor,
    /// Of `c`.
    pub c: Tensor,
}

/// How one contrastive-divergence update is made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CdConfig {
    /// Gibbs steps of the negative phase (CD-k).
    pub k: usize,
    /// Learning rate.
    pub lr: f64,
    /// Weight decay (on `w` only).
    pub weight_decay: f64,
    /// Momentum of this update.
    pub momentum: f64,
    /// Replicated softmax only: draw `D` words from `p(v|h)` (`true`) or use
    /// the mean-field counts `D·p(v|h)`.
    pub sample_visible: bool,
}

/// A mini-batch of an RBM's visible data.
#[derive(Debug)]
pub enum Visible<'a> {
    /// Word counts for a replicated softmax: the batch and its lengths `D`
    /// (`B × 1`).
    Counts {
        /// The counts, composed on the device.
        batch: &'a SparseBatch,
        /// `D` of every row, `B × 1`.
        lengths: &'a Tensor,
        /// `D` of every row on the host (how many words a reconstruction draws).
        host_lengths: &'a [usize],
    },
    /// Activation probabilities in `[0, 1]`, `B × I`.
    Probs(&'a Tensor),
}

/// What one update measured.
#[derive(Debug, Clone)]
pub struct CdStats {
    /// The reconstruction error of the batch, a device scalar (the caller
    /// reads it back once per step, as every trainer reads its loss): for a
    /// replicated softmax the mean negative log-probability per word of the
    /// data under the first reconstruction's `p(v|h)`; for a binary RBM the
    /// mean squared error per visible unit.
    pub error: Tensor,
}

impl Rbm {
    /// A new RBM with `N(0, scale²)` weights and zero biases.
    pub fn random(
        n_visible: usize,
        n_hidden: usize,
        scale: f64,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Self> {
        Ok(Rbm {
            w: super::nn::normal_tensor((n_visible, n_hidden), scale, rng, DType::F32, device)?,
            b: Tensor::zeros(n_hidden, DType::F32, device)?,
            c: Tensor::zeros(n_visible, DType::F32, device)?,
        })
    }

    /// Zero increments of this RBM's shapes.
    pub fn zero_increments(&self) -> Result<Increments> {
        Ok(Increments {
            w: self.w.zeros_like()?,
            b: self.b.zeros_like()?,
            c: self.c.zeros_like()?,
        })
    }

    /// Number of visible units.
    pub fn n_visible(&self) -> usize {
        self.w.dims()[0]
    }

    /// Number of hidden units.
    pub fn n_hidden(&self) -> usize {
        self.w.dims()[1]
    }

    /// Hidden pre-activations: `v W + D b` for counts, `x W + b` for probabilities.
    pub fn hidden_input(&self, v: &Visible<'_>) -> Result<Tensor> {
        match v {
            Visible::Counts { batch, lengths, .. } => Ok(batch
                .compose(&self.w, false)?
                .add(&super::precision::matmul(lengths, &self.b.unsqueeze(0)?)?)?),
            Visible::Probs(x) => Ok(super::precision::matmul(x, &self.w)?.broadcast_add(&self.b)?),
        }
    }

    /// `p(h = 1 | v)`.
    pub fn hidden_probs(&self, v: &Visible<'_>) -> Result<Tensor> {
        Ok(sigmoid(&self.hidden_input(v)?)?)
    }

    /// Visible logits `h Wᵀ + c` (a softmax's or a sigmoid's input).
    pub fn visible_logits(&self, h: &Tensor) -> Result<Tensor> {
        Ok(super::precision::matmul(h, &self.w.t()?)?.broadcast_add(&self.c)?)
    }

    /// Mean free energy of the rows of `v`:
    /// `F(v) = −Σᵢ cᵢ vᵢ − Σⱼ softplus(hidden input)ⱼ`.
    pub fn free_energy(&self, v: &Visible<'_>) -> Result<f64> {
        let x = self.hidden_input(v)?;
        let sp = softplus(&x)?.sum(1)?;
        let vis = match v {
            Visible::Counts { batch, .. } => {
                batch.compose(&self.c.unsqueeze(1)?, false)?.squeeze(1)?
            }
            Visible::Probs(p) => super::precision::matmul(p, &self.c.unsqueeze(1)?)?.squeeze(1)?,
        };
        let f = (vis.neg()? - sp)?.mean_all()?;
        scalar(&f)
    }

    /// Mean over hidden units of the standard deviation over the rows of
    /// `v` of `p(h|v)`: near 0 when the units do not tell texts apart
    /// (saturated or constant), the collapse a stack must not pass up.
    pub fn hidden_spread(&self, v: &Visible<'_>) -> Result<f64> {
        let ph = self.hidden_probs(v)?;
        let mean = ph.mean_keepdim(0)?;
        let var = ph.broadcast_sub(&mean)?.sqr()?.mean(0)?;
        scalar(&var.sqrt()?.mean_all()?)
    }

    /// The reconstruction error of `v` (as [`CdStats::error`]) with the
    /// hidden units at their probabilities (deterministic: for held-out texts).
    pub fn reconstruction_error(&self, v: &Visible<'_>) -> Result<f64> {
        let ph = self.hidden_probs(v)?;
        let logits = self.visible_logits(&ph)?;
        scalar(&self.error_of(v, &logits)?)
    }

    /// Reconstruction error of `v` given the visible logits of its reconstruction.
    fn error_of(&self, v: &Visible<'_>, logits: &Tensor) -> Result<Tensor> {
        match v {
            Visible::Counts { batch, .. } => {
                let lp = log_softmax(logits, D::Minus1)?;
                let n_vis = self.n_visible();
                // exact in f64 for any batch × vocabulary size
                let flat = batch
                    .rows
                    .to_dtype(DType::F64)?
                    .affine(n_vis as f64, 0.0)?
                    .add(&batch.terms.to_dtype(DType::F64)?)?
                    .to_dtype(DType::U32)?;
                let hit = lp.flatten_all()?.index_select(&flat, 0)?.unsqueeze(1)?;
                let words = batch.weights.sum_all()?;
                Ok(((hit * &batch.weights)?.sum_all()?.neg()? / words)?)
            }
            Visible::Probs(x) => Ok((*x - sigmoid(logits)?)?.sqr()?.mean_all()?),
        }
    }

    /// One CD-k update of the RBM on the batch `v`: the positive statistics
    /// from the data, the negative ones after `k` Gibbs steps, then
    /// `Δ ← m·Δ + lr·((pos − neg)/B − wd·W)` and `W ← W + Δ` (biases alike,
    /// without decay). `rng` draws the hidden states (and a replicated
    /// softmax's words) on the CPU; elsewhere the device's seeded generator
    /// draws both, and the update reads nothing back ([`sample_counts`]).
    pub fn cd_update(
        &mut self,
        inc: &mut Increments,
        v: &Visible<'_>,
        cfg: &CdConfig,
        rng: &mut ChaCha8Rng,
    ) -> Result<CdStats> {
        let n = match v {
            Visible::Counts { batch, .. } => batch.n_rows,
            Visible::Probs(x) => x.dim(0)?,
        };
        if n == 0 {
            return Err(Error::invalid("rbm: an empty mini-batch"));
        }
        let ph0 = self.hidden_probs(v)?;
        let (pos_w, pos_b, pos_c) = self.statistics(v, &ph0)?;
        let mut ph = ph0;
        let mut neg_visible: Option<Owned> = None;
        let mut error = None;
        for _ in 0..cfg.k.max(1) {
            let h = bernoulli(&ph, rng)?;
            let logits = self.visible_logits(&h)?;
            if error.is_none() {
                error = Some(self.error_of(v, &logits)?);
            }
            let recon = match v {
                Visible::Counts {
                    lengths,
                    host_lengths,
                    ..
                } => {
                    let p = softmax_last_dim(&logits)?;
                    if cfg.sample_visible && !p.device().is_cpu() {
                        let longest = host_lengths.iter().copied().max().unwrap_or(0);
                        let counts = sample_counts(&p, lengths, longest, rng)?;
                        Owned::Probs(counts, Some((*lengths).clone()))
                    } else if cfg.sample_visible {
                        let counts = sample_words(&p, host_lengths, rng)?;
                        let batch = SparseBatch::new(
                            &counts,
                            &(0..n).collect::<Vec<_>>(),
                            false,
                            DType::F32,
                            p.device(),
                        )?;
                        Owned::Counts(batch, (*lengths).clone())
                    } else {
                        Owned::Probs(p.broadcast_mul(lengths)?, Some((*lengths).clone()))
                    }
                }
                Visible::Probs(_) => Owned::Probs(sigmoid(&logits)?, None),
            };
            ph = self.hidden_probs_owned(&recon)?;
            neg_visible = Some(recon);
        }
        let recon = neg_visible.expect("k ≥ 1 Gibbs steps");
        let (neg_w, neg_b, neg_c) = self.statistics_owned(&recon, &ph)?;
        let scale = 1.0 / n as f64;
        let (m, lr) = (cfg.momentum, cfg.lr);
        let gw = ((pos_w - neg_w)?.affine(scale, 0.0)? - self.w.affine(cfg.weight_decay, 0.0)?)?;
        inc.w = (inc.w.affine(m, 0.0)? + gw.affine(lr, 0.0)?)?;
        inc.b = (inc.b.affine(m, 0.0)? + (pos_b - neg_b)?.affine(lr * scale, 0.0)?)?;
        inc.c = (inc.c.affine(m, 0.0)? + (pos_c - neg_c)?.affine(lr * scale, 0.0)?)?;
        self.w = (&self.w + &inc.w)?;
        self.b = (&self.b + &inc.b)?;
        self.c = (&self.c + &inc.c)?;
        Ok(CdStats {
            error: error.expect("k ≥ 1 Gibbs steps"),
        })
    }

    fn hidden_probs_owned(&self, v: &Owned) -> Result<Tensor> {
        match v {
            Owned::Counts(batch, lengths) => self.hidden_probs(&Visible::Counts {
                batch,
                lengths,
                host_lengths: &[],
            }),
            Owned::Probs(x, Some(lengths)) => Ok(sigmoid(
                &super::precision::matmul(x, &self.w)?
                    .add(&super::precision::matmul(lengths, &self.b.unsqueeze(0)?)?)?,
            )?),
            Owned::Probs(x, None) => self.hidden_probs(&Visible::Probs(x)),
        }
    }

    fn statistics_owned(&self, v: &Owned, ph: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        match v {
            Owned::Counts(batch, lengths) => self.statistics(
                &Visible::Counts {
                    batch,
                    lengths,
                    host_lengths: &[],
                },
                ph,
            ),
            Owned::Probs(x, Some(lengths)) => Ok((
                super::precision::matmul(&x.t()?, ph)?,
                ph.broadcast_mul(lengths)?.sum(0)?,
                x.sum(0)?,
            )),
            Owned::Probs(x, None) => self.statistics(&Visible::Probs(x), ph),
        }
    }

    /// `(Σ vᵀ p_h, Σ D·p_h or Σ p_h, Σ v)` over the batch.
    fn statistics(&self, v: &Visible<'_>, ph: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        match v {
            Visible::Counts { batch, lengths, .. } => {
                let (n_vis, n_hid) = (self.n_visible(), self.n_hidden());
                let mut w = Tensor::zeros((n_vis, n_hid), DType::F32, ph.device())?;
                let mut c = Tensor::zeros(n_vis, DType::F32, ph.device())?;
                if batch.nnz > 0 {
                    let g =
                        super::rows::gather_rows(ph, &batch.rows)?.broadcast_mul(&batch.weights)?;
                    w = super::rows::scatter_add_rows(&g, &batch.terms, n_vis)?;
                    c = super::rows::scatter_add_rows(
                        &batch.weights.squeeze(1)?.contiguous()?,
                        &batch.terms,
                        n_vis,
                    )?;
                }
                Ok((w, ph.broadcast_mul(lengths)?.sum(0)?, c))
            }
            Visible::Probs(x) => Ok((
                super::precision::matmul(&x.t()?, ph)?,
                ph.sum(0)?,
                x.sum(0)?,
            )),
        }
    }
}

/// A reconstruction held by the update: sampled counts with their lengths,
/// or dense values (mean-field counts with their lengths, or probabilities).
enum Owned {
    Counts(SparseBatch, Tensor),
    Probs(Tensor, Option<Tensor>),
}

pub use super::nn::softplus;

fn scalar(t: &Tensor) -> Result<f64> {
    Ok(t.to_dtype(DType::F64)?.to_scalar::<f64>()?)
}

/// Uniform `[0, 1)` values: from `rng` on the CPU (seeded, so a run
/// repeats), from the device's generator elsewhere (seeded per epoch by the
/// trainer).
pub fn uniform(shape: (usize, usize), rng: &mut ChaCha8Rng, device: &Device) -> Result<Tensor> {
    if device.is_cpu() {
        let v: Vec<f32> = (0..shape.0 * shape.1)
            .map(|_| rng.random::<f32>())
            .collect();
        Ok(Tensor::from_vec(v, shape, device)?)
    } else {
        Ok(Tensor::rand(0f32, 1f32, shape, device)?)
    }
}

/// Binary states drawn with probabilities `p`.
pub fn bernoulli(p: &Tensor, rng: &mut ChaCha8Rng) -> Result<Tensor> {
    let u = uniform(p.dims2()?, rng, p.device())?;
    Ok(p.gt(&u)?.to_dtype(p.dtype())?)
}

/// Draws `lengths[r]` words from row `r`'s distribution `p` (`B × I`, rows
/// summing to 1) on `p`'s device, as dense counts `B × I`: inverse transform
/// sampling over a two-level cumulative sum (blocks of ⌈√I⌉ terms, then the
/// blocks), with the uniforms of [`uniform`]. `lengths` is `B × 1`
/// (integral values) and `longest` its maximum. Nothing is read back, so a
/// replicated-softmax step off the CPU stays on the device.
pub fn sample_counts(
    p: &Tensor,
    lengths: &Tensor,
    longest: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Tensor> {
    let (n, v) = p.dims2()?;
    let dev = p.device();
    if n == 0 || v == 0 || longest == 0 {
        return Ok(Tensor::zeros((n, v), DType::F32, dev)?);
    }
    let s = ((v as f64).sqrt().ceil() as usize).max(1);
    let nb = v.div_ceil(s);
    let mut p = p.to_dtype(DType::F32)?;
    if nb * s > v {
        p = Tensor::cat(&[&p, &Tensor::zeros((n, nb * s - v), DType::F32, dev)?], 1)?;
    }
    // running sums as plain 2-D products with a triangle of ones (candle's
    // `cumsum` broadcasts a batched product, which CUDA's may refuse); a
    // sampler's sums, not a layer's product: f32 whatever the precision
    let running = |x: &Tensor, len: usize| -> Result<Tensor> {
        Ok(x.matmul(&Tensor::triu2(len, DType::F32, dev)?)?)
    };
    let within = running(&p.reshape((n * nb, s))?, s)?.reshape((n, nb, s))?; // n × nb × s
    let totals = within.narrow(2, s - 1, 1)?.squeeze(2)?.contiguous()?; // n × nb
    let ends = running(&totals, nb)?; // n × nb
    let starts = (&ends - &totals)?;
    let u = uniform((n, longest), rng, dev)?.broadcast_mul(&ends.narrow(1, nb - 1, 1)?)?;
    // the block of each draw: how many blocks end at or before it
    let count_le = |cdf: &Tensor, x: &Tensor, top: usize| -> Result<Tensor> {
        Ok(cdf
            .broadcast_le(&x.unsqueeze(2)?)?
            .to_dtype(DType::F32)?
            .sum(2)?
            .clamp(0f32, top as f32)?)
    };
    let k = count_le(&ends.unsqueeze(1)?, &u, nb - 1)?; // n × L
    let r = (&u - starts.gather(&k.to_dtype(DType::U32)?.contiguous()?, 1)?)?;
    let row_of = Tensor::arange(0u32, n as u32, dev)?
        .to_dtype(DType::F64)?
        .unsqueeze(1)?;
    let k64 = k.to_dtype(DType::F64)?;
    let block = row_of
        .affine(nb as f64, 0.0)?
        .broadcast_add(&k64)?
        .flatten_all()?
        .to_dtype(DType::U32)?;
    let cw = within
        .reshape((n * nb, s))?
        .index_select(&block, 0)?
        .reshape((n, longest, s))?;
    let j = count_le(&cw, &r, s - 1)?.to_dtype(DType::F64)?;
    let term = k64
        .affine(s as f64, 0.0)?
        .add(&j)?
        .clamp(0f64, (v - 1) as f64)?;
    let flat = row_of
        .affine(v as f64, 0.0)?
        .broadcast_add(&term)?
        .flatten_all()?
        .to_dtype(DType::U32)?;
    let keep = Tensor::arange(0u32, longest as u32, dev)?
        .to_dtype(DType::F32)?
        .unsqueeze(0)?
        .broadcast_lt(&lengths.to_dtype(DType::F32)?)?
        .to_dtype(DType::F32)?
        .flatten_all()?;
    Ok(super::rows::scatter_add_rows(&keep, &flat, n * v)?.reshape((n, v))?)
}

/// Draws `lengths[r]` words from row `r`'s distribution `p` (rows sum to 1)
/// by inverse transform sampling on the host (the CPU's draws: the
/// probabilities are read where they are).
pub fn sample_words(p: &Tensor, lengths: &[usize], rng: &mut ChaCha8Rng) -> Result<CsrMatrix> {
    let (n, v) = p.dims2()?;
    if lengths.len() != n {
        return Err(Error::invalid(format!(
            "rbm: {} lengths for {n} rows",
            lengths.len()
        )));
    }
    let probs = p.to_dtype(DType::F32)?.to_vec2::<f32>()?;
    let mut out = CsrMatrix::new(v);
    let mut cdf = vec![0f64; v];
    for (row, &d) in probs.iter().zip(lengths) {
        let mut acc = 0f64;
        for (c, &x) in cdf.iter_mut().zip(row) {
            acc += x as f64;
            *c = acc;
        }
        let mut counts: std::collections::BTreeMap<u32, f32> = Default::default();
        for _ in 0..d {
            let u = rng.random::<f64>() * acc;
            let i = cdf.partition_point(|&c| c <= u).min(v - 1);
            *counts.entry(i as u32).or_default() += 1.0;
        }
        out.push_row(counts);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn t2(v: &[f32], shape: (usize, usize)) -> Tensor {
        Tensor::from_vec(v.to_vec(), shape, &Device::Cpu).unwrap()
    }

    fn v2(t: &Tensor) -> Vec<Vec<f32>> {
        t.to_vec2::<f32>().unwrap()
    }

    fn sig(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// A binary RBM's CD-1 update against the same arithmetic by hand,
    /// with the hidden draws fixed by the seeded generator.
    #[test]
    fn cd1_update_of_a_binary_rbm_matches_a_hand_computation() {
        let mut rbm = Rbm {
            w: t2(&[0.1, -0.2, 0.3, 0.4, -0.5, 0.6], (3, 2)),
            b: Tensor::new(&[0.05f32, -0.05], &Device::Cpu).unwrap(),
            c: Tensor::new(&[0.0f32, 0.1, -0.1], &Device::Cpu).unwrap(),
        };
        let before = rbm.clone();
        let mut inc = rbm.zero_increments().unwrap();
        let x = t2(&[1.0, 0.0, 1.0, 0.0, 1.0, 1.0], (2, 3));
        let cfg = CdConfig {
            k: 1,
            lr: 0.1,
            weight_decay: 0.01,
            momentum: 0.9,
            sample_visible: true,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        rbm.cd_update(&mut inc, &Visible::Probs(&x), &cfg, &mut rng)
            .unwrap();
        // the same draws, by hand
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let u: Vec<f32> = (0..4).map(|_| rng.random::<f32>()).collect();
        let w0 = v2(&before.w);
        let b0 = before.b.to_vec1::<f32>().unwrap();
        let c0 = before.c.to_vec1::<f32>().unwrap();
        let xs = [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]];
        let up = |v: &[f64; 3]| -> [f64; 2] {
            let mut h = [0.0; 2];
            for (j, hj) in h.iter_mut().enumerate() {
                let a: f64 = (0..3).map(|i| v[i] * w0[i][j] as f64).sum::<f64>() + b0[j] as f64;
                *hj = sig(a);
            }
            h
        };
        let mut gw = [[0.0f64; 2]; 3];
        let (mut gb, mut gc) = ([0.0f64; 2], [0.0f64; 3]);
        for (r, x) in xs.iter().enumerate() {
            let ph = up(x);
            let h: Vec<f64> = (0..2)
                .map(|j| {
                    if ph[j] as f32 > u[r * 2 + j] {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            let mut pv = [0.0; 3];
            for (i, p) in pv.iter_mut().enumerate() {
                *p = sig((0..2).map(|j| h[j] * w0[i][j] as f64).sum::<f64>() + c0[i] as f64);
            }
            let ph1 = up(&pv);
            for i in 0..3 {
                for j in 0..2 {
                    gw[i][j] += x[i] * ph[j] - pv[i] * ph1[j];
                }
                gc[i] += x[i] - pv[i];
            }
            for j in 0..2 {
                gb[j] += ph[j] - ph1[j];
            }
        }
        let w1 = v2(&rbm.w);
        for i in 0..3 {
            for j in 0..2 {
                let want = w0[i][j] as f64 + 0.1 * (gw[i][j] / 2.0 - 0.01 * w0[i][j] as f64);
                assert!((w1[i][j] as f64 - want).abs() < 1e-5, "w[{i}][{j}]");
            }
        }
        let b1 = rbm.b.to_vec1::<f32>().unwrap();
        let c1 = rbm.c.to_vec1::<f32>().unwrap();
        for j in 0..2 {
            assert!((b1[j] as f64 - (b0[j] as f64 + 0.1 * gb[j] / 2.0)).abs() < 1e-5);
        }
        for i in 0..3 {
            assert!((c1[i] as f64 - (c0[i] as f64 + 0.1 * gc[i] / 2.0)).abs() < 1e-5);
        }
        // momentum: the increment is kept and carried into the next update
        let incw = v2(&inc.w);
        assert!((incw[0][0] as f64 - (w1[0][0] - w0[0][0]) as f64).abs() < 1e-6);
    }

    /// The replicated softmax's hidden input is `v W + D b`: doubling every
    /// count doubles it (the bias term scales with the length `D`).
    #[test]
    fn replicated_softmax_hidden_input_scales_with_length() {
        let dev = Device::Cpu;
        let rbm = Rbm {
            w: t2(&[0.1, -0.2, 0.3, 0.4, -0.5, 0.6], (3, 2)),
            b: Tensor::new(&[0.5f32, -0.25], &dev).unwrap(),
            c: Tensor::zeros(3, DType::F32, &dev).unwrap(),
        };
        let input = |scale: f32| -> Vec<f32> {
            let mut m = CsrMatrix::new(3);
            m.push_row([(0u32, 2.0 * scale), (2, 1.0 * scale)]);
            let batch = SparseBatch::new(&m, &[0], false, DType::F32, &dev).unwrap();
            let d = Tensor::new(&[[3.0 * scale]], &dev).unwrap();
            let v = Visible::Counts {
                batch: &batch,
                lengths: &d,
                host_lengths: &[3 * scale as usize],
            };
            rbm.hidden_input(&v).unwrap().to_vec2::<f32>().unwrap()[0].clone()
        };
        let one = input(1.0);
        // by hand: v W + D b with v = (2, 0, 1), D = 3
        assert!((one[0] - (2.0 * 0.1 + 1.0 * -0.5 + 3.0 * 0.5)).abs() < 1e-6);
        assert!((one[1] - (2.0 * -0.2 + 1.0 * 0.6 + 3.0 * -0.25)).abs() < 1e-6);
        let two = input(2.0);
        for j in 0..2 {
            assert!((two[j] - 2.0 * one[j]).abs() < 1e-5);
        }
    }

    #[test]
    fn sampled_words_follow_the_distribution_and_the_lengths() {
        let p = t2(&[0.0, 1.0, 0.0, 0.5, 0.0, 0.5], (2, 3));
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let m = sample_words(&p, &[4, 1000], &mut rng).unwrap();
        assert_eq!(m.row(0), (&[1u32][..], &[4.0f32][..]));
        let (c, v) = m.row(1);
        assert_eq!(c, &[0, 2]);
        assert_eq!(v.iter().sum::<f32>(), 1000.0);
        assert!((v[0] - 500.0).abs() < 60.0, "{v:?}");
    }

    #[test]
    fn device_draws_follow_the_distribution_and_the_lengths() {
        // 7 terms: blocks of 3 with a padded last block; row 2 draws nothing
        let probs = [
            [0.0f32, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.05, 0.1, 0.0, 0.25, 0.2, 0.0, 0.4],
            [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5],
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        ];
        let flat: Vec<f32> = probs.iter().flatten().copied().collect();
        let p = t2(&flat, (4, 7));
        let lens = Tensor::new(&[[4f32], [20000.0], [0.0], [3.0]], &Device::Cpu).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let c = v2(&sample_counts(&p, &lens, 20000, &mut rng).unwrap());
        assert_eq!(c[0], vec![0.0, 4.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(c[2], vec![0.0; 7]);
        assert_eq!(c[3], vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0]);
        assert_eq!(c[1].iter().sum::<f32>(), 20000.0);
        for (t, (&got, &want)) in c[1].iter().zip(&probs[1]).enumerate() {
            let mean = 20000.0 * want as f64;
            let sd = (mean * (1.0 - want as f64)).sqrt();
            // zero-probability terms are never drawn; the others within 5 sd
            assert!(
                (got as f64 - mean).abs() <= 5.0 * sd,
                "term {t}: {got} drawn, {mean} expected"
            );
        }
        // a vocabulary of one term, and a batch of lengths all zero
        let one = sample_counts(
            &t2(&[1.0, 1.0], (2, 1)),
            &t2(&[2.0, 5.0], (2, 1)),
            5,
            &mut rng,
        );
        assert_eq!(v2(&one.unwrap()), vec![vec![2.0], vec![5.0]]);
        let none = sample_counts(&p, &t2(&[0.0; 4], (4, 1)), 0, &mut rng).unwrap();
        assert_eq!(none.sum_all().unwrap().to_scalar::<f32>().unwrap(), 0.0);
    }

    #[test]
    fn replicated_softmax_learns_and_its_error_falls() {
        // two topics of three words each; a 2-unit RSM should fit them
        let dev = Device::Cpu;
        let mut m = CsrMatrix::new(6);
        for i in 0..40u32 {
            let base = if i % 2 == 0 { 0 } else { 3 };
            m.push_row([(base, 2.0), (base + 1, 1.0), (base + 2, 1.0)]);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut rbm = Rbm::random(6, 2, 0.01, &mut rng, &dev).unwrap();
        let mut inc = rbm.zero_increments().unwrap();
        let rows: Vec<usize> = (0..40).collect();
        let batch = SparseBatch::new(&m, &rows, false, DType::F32, &dev).unwrap();
        let d = Tensor::from_vec(vec![4f32; 40], (40, 1), &dev).unwrap();
        let lens = vec![4usize; 40];
        let v = Visible::Counts {
            batch: &batch,
            lengths: &d,
            host_lengths: &lens,
        };
        let cfg = CdConfig {
            k: 1,
            lr: 0.05,
            weight_decay: 0.0,
            momentum: 0.5,
            sample_visible: true,
        };
        let start = rbm.reconstruction_error(&v).unwrap();
        assert!((start - 6f64.ln()).abs() < 0.05, "{start}");
        for _ in 0..300 {
            rbm.cd_update(&mut inc, &v, &cfg, &mut rng).unwrap();
        }
        let end = rbm.reconstruction_error(&v).unwrap();
        assert!(end < start - 0.3, "error {start} -> {end}");
        assert!(rbm.free_energy(&v).unwrap().is_finite());
    }
}
