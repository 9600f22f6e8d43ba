//! Adam with decoupled weight decay (the update of `candle_nn::AdamW`: β₁ 0.9,
//! β₂ 0.999, ε 1e-8), shared by the models trained by gradient (S2Net, XCNN,
//! BAE). Written out rather than taken from `candle_nn` because a resumed job
//! must continue with the optimiser's state: here the moments and the step
//! count are named tensors a checkpoint holds (`adam.m.NAME`, `adam.v.NAME`,
//! `adam.t`).
//!
//! Two updates: dense ([`Adam::step`]: every entry of every parameter) and
//! row-sparse "lazy" ([`Adam::backward_step_rows`]: only the term-table rows
//! a batch uses, as TensorFlow's LazyAdam). For f32 both run as one in-place
//! pass per parameter on the CPU and as fused kernels on CUDA (dense), candle
//! tensor ops otherwise, with the same arithmetic.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::backprop::GradStore;
use candle_core::{CpuStorage, DType, Device, InplaceOp1, InplaceOp2, Layout, Tensor, Var};

use crate::{Error, Result};

/// Adam with decoupled weight decay, the update of `candle_nn::AdamW`, with
/// named parameters and moments that can be checkpointed and restored.
pub struct Adam {
    vars: Vec<(String, Var, Var, Var)>,
    t: usize,
    /// Learning rate.
    pub lr: f64,
    /// Decoupled weight decay (0 = plain Adam).
    pub weight_decay: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    /// Whether the fused CPU kernels may be used where they apply.
    fused: bool,
    /// Parameter updates done by the fused kernels so far (for tests).
    fused_updates: AtomicUsize,
    /// Names of the parameters kept fixed ([`Adam::freeze`]).
    frozen: Vec<String>,
}

impl Adam {
    /// An optimiser over named variables, moments zero.
    pub fn new(vars: Vec<(String, Var)>, lr: f64, weight_decay: f64) -> Result<Self> {
        let vars = vars
            .into_iter()
            .map(|(n, v)| {
                let m = Var::zeros(v.shape(), v.dtype(), v.device())?;
                let s = Var::zeros(v.shape(), v.dtype(), v.device())?;
                Ok((n, v, m, s))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Adam {
            vars,
            t: 0,
            lr,
            weight_decay,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            fused: true,
            fused_updates: AtomicUsize::new(0),
            frozen: Vec::new(),
        })
    }

    /// Keeps the parameters named `names` fixed from now on (no update, their
    /// moments untouched: a pretrained table held while the rest learns);
    /// an empty list frees every one. A name the optimiser does not hold is
    /// an error.
    pub fn freeze(&mut self, names: &[&str]) -> Result<()> {
        for n in names {
            if !self.vars.iter().any(|(v, ..)| v == n) {
                return Err(Error::invalid(format!(
                    "internal: no parameter `{n}` to freeze"
                )));
            }
        }
        self.frozen = names.iter().map(|n| n.to_string()).collect();
        Ok(())
    }

    /// The parameters that are updated (not frozen).
    fn live(&self) -> impl Iterator<Item = &(String, Var, Var, Var)> {
        self.vars.iter().filter(|(n, ..)| !self.frozen.contains(n))
    }

    /// Allows (the default) or forbids the fused CPU kernels. Forbidden, every
    /// update runs as the candle tensor ops that CUDA (and any non-CPU
    /// device) always takes, which lets a test check that path against the
    /// fused one on the same CPU f32 tensors.
    pub fn set_fused(&mut self, allowed: bool) {
        self.fused = allowed;
    }

    /// One update from the gradients of `loss` (minimised).
    pub fn backward_step(&mut self, loss: &Tensor) -> Result<()> {
        let grads = loss.backward()?;
        self.step(&grads)
    }

    /// One update from gradients already computed. With f32 contiguous
    /// tensors ([`fused_ok`]) one in-place pass per parameter does it on the
    /// CPU (moments and parameter together), fused kernels on CUDA, without
    /// the temporaries of tensor ops; otherwise (f64) the same update runs
    /// as candle tensor ops.
    pub fn step(&mut self, grads: &GradStore) -> Result<()> {
        self.t += 1;
        for (_, theta, m, v) in self.live() {
            if let Some(g) = grads.get(theta.as_tensor()) {
                self.update(theta, m, v, g, None)?;
            }
        }
        Ok(())
    }

    /// The update of one parameter from its gradient `g`: of every entry, or
    /// with `rows` of only those rows of a table (`g` then holds just them).
    /// Fused in-place CPU kernels where the tensors allow ([`fused_ok`]),
    /// candle tensor ops otherwise; the same arithmetic either way.
    fn update(
        &self,
        theta: &Var,
        m: &Var,
        v: &Var,
        g: &Tensor,
        rows: Option<&Tensor>,
    ) -> Result<()> {
        let (b1, b2) = (self.beta1, self.beta2);
        let scale_m = 1.0 / (1.0 - b1.powi(self.t as i32));
        let scale_v = 1.0 / (1.0 - b2.powi(self.t as i32));
        let (th, mt, vt) = (theta.as_tensor(), m.as_tensor(), v.as_tensor());
        let fused = match rows {
            _ if !self.fused => None,
            None => fused_ok(&[th, g, mt, vt]).then_some(None),
            Some(ids) => fused_rows(th, mt, vt, g, ids)?.map(Some),
        };
        if let Some(ids) = fused {
            self.fused_updates.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "cuda")]
            if !th.device().is_cpu() {
                // dense only: `fused_rows` takes CPU tensors
                return self.cuda_dense(th, mt, vt, g);
            }
            let rows = match &ids {
                Some(ids) => Rows::Listed(ids),
                None => Rows::All,
            };
            return one_pass_cpu(th, mt, vt, g, rows, self.consts());
        }
        let take = |t: &Tensor| -> Result<Tensor> {
            Ok(match rows {
                Some(ids) => super::rows::gather_rows(t, ids)?,
                None => t.clone(),
            })
        };
        let next_m = ((take(mt)? * b1)? + (g * (1.0 - b1))?)?;
        let next_v = ((take(vt)? * b2)? + (g.sqr()? * (1.0 - b2))?)?;
        let upd = ((&next_m * scale_m)? / ((&next_v * scale_v)?.sqrt()? + self.eps)?)?;
        let mut next = take(th)?;
        if self.weight_decay != 0.0 {
            next = (next * (1.0 - self.lr * self.weight_decay))?;
        }
        let next = (next - (upd * self.lr)?)?;
        match rows {
            Some(ids) => {
                super::rows::set_rows(mt, ids, &next_m)?;
                super::rows::set_rows(vt, ids, &next_v)?;
                super::rows::set_rows(th, ids, &next)?;
            }
            None => {
                m.set(&next_m)?;
                v.set(&next_v)?;
                theta.set(&next)?;
            }
        }
        Ok(())
    }

    /// One update where some table parameters got their gradient through a
    /// per-step leaf holding only the rows `ids` (distinct) of the table named
    /// `name` (see [`crate::models::neural::xcnn::Composer::compose_rows`]): those rows, and only those,
    /// of the table and its moments are updated in place ("lazy" Adam, as
    /// TensorFlow's LazyAdam and PyTorch's SparseAdam: untouched rows keep
    /// their moments instead of decaying them). Other variables get the
    /// ordinary update.
    pub fn backward_step_rows(
        &mut self,
        loss: &Tensor,
        rows: &[(&str, &Tensor, &Var)],
    ) -> Result<()> {
        let grads = loss.backward()?;
        self.step_rows(&grads, rows)
    }

    /// [`Adam::backward_step_rows`] from gradients already computed (a
    /// caller that times the backward pass apart from the update).
    pub fn step_rows(&mut self, grads: &GradStore, rows: &[(&str, &Tensor, &Var)]) -> Result<()> {
        self.t += 1;
        for (name, theta, m, v) in self.live() {
            match rows.iter().find(|r| r.0 == name) {
                Some((_, ids, leaf)) => {
                    if let Some(g) = grads.get(leaf.as_tensor()) {
                        self.update(theta, m, v, g, Some(ids))?;
                    }
                }
                None => {
                    if let Some(g) = grads.get(theta.as_tensor()) {
                        self.update(theta, m, v, g, None)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The dense update ([`Adam::step`]: every row of every table, moments
    /// decaying where the gradient is 0) from the gradients of per-step
    /// leaves holding only the rows `ids` (distinct) of the tables named,
    /// as in [`Adam::backward_step_rows`]. The same arithmetic as the
    /// dense step on a `V × k` gradient that is zero outside those rows, but
    /// that gradient is never built: on the CPU the moments read the rows'
    /// gradient through a row map. Other variables get the ordinary update.
    pub fn backward_step_dense_rows(
        &mut self,
        loss: &Tensor,
        rows: &[(&str, &Tensor, &Var)],
    ) -> Result<()> {
        let grads = loss.backward()?;
        self.t += 1;
        for (name, theta, m, v) in self.live() {
            match rows.iter().find(|r| r.0 == name) {
                Some((_, ids, leaf)) => {
                    if let Some(g) = grads.get(leaf.as_tensor()) {
                        self.update_spread(theta, m, v, g, ids)?;
                    }
                }
                None => {
                    if let Some(g) = grads.get(theta.as_tensor()) {
                        self.update(theta, m, v, g, None)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A dense update whose gradient is `g` on rows `ids` and 0 elsewhere.
    fn update_spread(&self, theta: &Var, m: &Var, v: &Var, g: &Tensor, ids: &Tensor) -> Result<()> {
        let (th, mt, vt) = (theta.as_tensor(), m.as_tensor(), v.as_tensor());
        let n = th.dim(0)?;
        if self.fused && th.rank() == 2 && th.device().is_cpu() && ids.device().is_cpu() {
            if let Some(list) = fused_rows(th, mt, vt, g, ids)? {
                let mut pos = vec![0u32; n];
                for (j, &r) in list.iter().enumerate() {
                    pos[r as usize] = j as u32 + 1;
                }
                self.fused_updates.fetch_add(1, Ordering::Relaxed);
                return one_pass_cpu(th, mt, vt, g, Rows::Spread(&pos), self.consts());
            }
        }
        // elsewhere: the full gradient, then the dense update
        let full = super::rows::scatter_add_rows(g, ids, n)?;
        self.update(theta, m, v, &full, None)
    }

    /// The dense update of f32 tensors on one CUDA device, by the kernels
    /// of `kernels/rows.cu`: both moments, then the parameter.
    #[cfg(feature = "cuda")]
    fn cuda_dense(&self, th: &Tensor, mt: &Tensor, vt: &Tensor, g: &Tensor) -> Result<()> {
        let (b1, b2) = (self.beta1, self.beta2);
        for (t, beta, square) in [(mt, b1, false), (vt, b2, true)] {
            t.inplace_op2(g, &Moment { beta, square })?;
        }
        th.inplace_op3(
            mt,
            vt,
            &ParamUpdate {
                lr: self.lr,
                decay: 1.0 - self.lr * self.weight_decay,
                scale_m: 1.0 / (1.0 - b1.powi(self.t as i32)),
                scale_v: 1.0 / (1.0 - b2.powi(self.t as i32)),
                eps: self.eps,
            },
        )?;
        Ok(())
    }

    /// Moments and step count as named tensors (`adam.m.NAME`, `adam.v.NAME`,
    /// `adam.t`), for a checkpoint.
    pub fn state(&self) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::new();
        for (n, _, m, v) in &self.vars {
            out.push((format!("adam.m.{n}"), m.as_tensor().copy()?));
            out.push((format!("adam.v.{n}"), v.as_tensor().copy()?));
        }
        let dev = self.vars.first().map(|v| v.1.device().clone());
        let dev = dev.unwrap_or(Device::Cpu);
        out.push(("adam.t".to_string(), Tensor::new(&[self.t as i64], &dev)?));
        Ok(out)
    }

    /// Restores moments and step count written by [`Adam::state`].
    pub fn restore(&mut self, tensors: &HashMap<String, Tensor>) -> Result<()> {
        self.restore_moments(tensors)?;
        let t = tensors
            .get("adam.t")
            .ok_or_else(|| Error::invalid("checkpoint lacks adam.t"))?;
        self.t = t.to_dtype(DType::I64)?.flatten_all()?.to_vec1::<i64>()?[0].max(0) as usize;
        Ok(())
    }

    /// Restores the moments only (`adam.m.NAME`, `adam.v.NAME`), for
    /// checkpoints that keep the step count elsewhere; see [`Adam::set_step`].
    pub fn restore_moments(&mut self, tensors: &HashMap<String, Tensor>) -> Result<()> {
        for (n, theta, m, v) in &self.vars {
            for (kind, var) in [("m", m), ("v", v)] {
                let key = format!("adam.{kind}.{n}");
                let t = tensors
                    .get(&key)
                    .ok_or_else(|| Error::invalid(format!("checkpoint lacks {key}")))?;
                if t.shape() != theta.shape() {
                    return Err(Error::invalid(format!(
                        "checkpoint {key} has shape {:?}, expected {:?}",
                        t.dims(),
                        theta.dims()
                    )));
                }
                var.set(&t.to_dtype(theta.dtype())?.to_device(theta.device())?)?;
            }
        }
        Ok(())
    }

    /// Sets the step count (bias correction) after [`Adam::restore_moments`].
    pub fn set_step(&mut self, t: usize) {
        self.t = t;
    }
}

/// Whether the fused kernels apply: f32 tensors on the CPU (or, in a CUDA
/// build, all on one CUDA device: `kernels/rows.cu`), contiguous from offset
/// 0, of one shape.
pub fn fused_ok(ts: &[&Tensor]) -> bool {
    ts.iter().all(|t| {
        (t.device().is_cpu() || (cfg!(feature = "cuda") && t.device().same_device(ts[0].device())))
            && t.dtype() == DType::F32
            && t.layout().contiguous_offsets() == Some((0, t.elem_count()))
            && t.shape() == ts[0].shape()
    })
}

/// The ids of a row-sparse update when the fused kernels can do it: the
/// table, its moments and the rows' gradient f32, contiguous, on the CPU,
/// `g` one row per id and every id inside the table; `None` otherwise.
fn fused_rows(
    th: &Tensor,
    m: &Tensor,
    v: &Tensor,
    g: &Tensor,
    ids: &Tensor,
) -> Result<Option<Vec<u32>>> {
    let dense = |t: &Tensor| {
        t.device().is_cpu()
            && t.dtype() == DType::F32
            && t.layout().contiguous_offsets() == Some((0, t.elem_count()))
    };
    if th.rank() != 2
        || ![th, m, v, g].iter().all(|t| dense(t))
        || m.shape() != th.shape()
        || v.shape() != th.shape()
        || !ids.device().is_cpu()
        || ids.dtype() != DType::U32
        || ids.rank() != 1
    {
        return Ok(None);
    }
    let (n, k) = th.dims2()?;
    let ids: Vec<u32> = ids.to_vec1()?;
    if g.dims() != [ids.len(), k] || ids.iter().any(|&r| r as usize >= n) {
        return Ok(None);
    }
    Ok(Some(ids))
}

fn f32_slice<'a>(s: &'a CpuStorage, name: &str) -> candle_core::Result<&'a [f32]> {
    match s {
        CpuStorage::F32(v) => Ok(v),
        _ => candle_core::bail!("{name}: f32 storage expected"),
    }
}

fn f32_slice_mut<'a>(s: &'a mut CpuStorage, name: &str) -> candle_core::Result<&'a mut [f32]> {
    match s {
        CpuStorage::F32(v) => Ok(v),
        _ => candle_core::bail!("{name}: f32 storage expected"),
    }
}

/// The constants of one step as the f32 kernels use them.
#[derive(Clone, Copy)]
struct StepConsts {
    b1: f32,
    c1: f32,
    b2: f32,
    c2: f32,
    lr: f32,
    decay: f32,
    sm: f32,
    sv: f32,
    eps: f32,
}

impl Adam {
    /// This step's constants (bias corrections for step `t`).
    fn consts(&self) -> StepConsts {
        let (b1, b2) = (self.beta1, self.beta2);
        StepConsts {
            b1: b1 as f32,
            c1: (1.0 - b1) as f32,
            b2: b2 as f32,
            c2: (1.0 - b2) as f32,
            lr: self.lr as f32,
            decay: (1.0 - self.lr * self.weight_decay) as f32,
            sm: (1.0 / (1.0 - b1.powi(self.t as i32))) as f32,
            sv: (1.0 / (1.0 - b2.powi(self.t as i32))) as f32,
            eps: self.eps as f32,
        }
    }
}

impl StepConsts {
    /// Entries with gradient `g` (one each): `m ← β₁m + (1−β₁)g`,
    /// `v ← β₂v + (1−β₂)g²`, `θ ← θ(1 − lr·λ) − lr·m̂/(√v̂ + ε)`, in one pass.
    /// Multiplies and adds stay separate (no fused multiply-add), so every
    /// build gives the same bits as the CUDA kernels' arithmetic order.
    #[inline(always)]
    fn entries(&self, t: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
        let n = t.len();
        let (m, v, g) = (&mut m[..n], &mut v[..n], &g[..n]);
        for i in 0..n {
            let gi = g[i];
            let mi = self.b1 * m[i] + self.c1 * gi;
            let vi = self.b2 * v[i] + self.c2 * (gi * gi);
            m[i] = mi;
            v[i] = vi;
            t[i] =
                t[i] * self.decay - self.lr * (mi * self.sm) / ((vi * self.sv).sqrt() + self.eps);
        }
    }

    /// Entries whose gradient is 0: the moments decay, the parameter moves
    /// by what they still hold.
    #[inline(always)]
    fn idle(&self, t: &mut [f32], m: &mut [f32], v: &mut [f32]) {
        let n = t.len();
        let (m, v) = (&mut m[..n], &mut v[..n]);
        for i in 0..n {
            let mi = m[i] * self.b1;
            let vi = v[i] * self.b2;
            m[i] = mi;
            v[i] = vi;
            t[i] =
                t[i] * self.decay - self.lr * (mi * self.sm) / ((vi * self.sv).sqrt() + self.eps);
        }
    }

    /// A block of rows of a dense update whose gradient is given by rows
    /// ([`Spread`]).
    #[inline(always)]
    fn spread(&self, t: &mut [f32], m: &mut [f32], v: &mut [f32], gradient: Spread<'_>) {
        let (g, pos, k) = gradient;
        let rows = t.chunks_mut(k).zip(m.chunks_mut(k)).zip(v.chunks_mut(k));
        for (((t, m), v), &p) in rows.zip(pos) {
            match p {
                0 => self.idle(t, m, v),
                p => self.entries(t, m, v, &g[(p as usize - 1) * k..][..k]),
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn entries_avx2(&self, t: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
        self.entries(t, m, v, g)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn spread_avx2(&self, t: &mut [f32], m: &mut [f32], v: &mut [f32], g: Spread<'_>) {
        self.spread(t, m, v, g)
    }
}

/// A gradient `(g, pos, k)` given by rows `k` wide: a row with entry `p > 0`
/// in `pos` has row `p − 1` of `g`, the others have gradient 0.
type Spread<'a> = (&'a [f32], &'a [u32], usize);

/// Which entries a one-pass CPU update touches.
enum Rows<'a> {
    /// Every entry; the gradient has the parameter's shape.
    All,
    /// Only these rows (distinct); the gradient holds one row per id, in order.
    Listed(&'a [u32]),
    /// Every row; the gradient holds the rows whose entry here is `j + 1`
    /// (row `j` of the gradient), all others have gradient 0.
    Spread(&'a [u32]),
}

/// The whole update of one f32 CPU parameter in one pass over its entries
/// (moments and parameter together), in place. The three tensors' storages
/// are locked for writing by nesting candle's in-place ops ([`Lock1`]); a
/// gradient sharing the parameter's storage is an error.
fn one_pass_cpu(
    th: &Tensor,
    m: &Tensor,
    v: &Tensor,
    g: &Tensor,
    rows: Rows<'_>,
    c: StepConsts,
) -> Result<()> {
    use rayon::prelude::*;
    let k = th.dims().last().copied().unwrap_or(1);
    #[cfg(target_arch = "x86_64")]
    let avx2 = is_x86_feature_detected!("avx2");
    #[cfg(not(target_arch = "x86_64"))]
    let avx2 = false;
    let mut pass = |t: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]| {
        let entries = |t: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]| {
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the CPU has AVX2, checked above.
                return unsafe { c.entries_avx2(t, m, v, g) };
            }
            c.entries(t, m, v, g)
        };
        match rows {
            Rows::All => {
                const C: usize = 1 << 14;
                t.par_chunks_mut(C)
                    .zip(m.par_chunks_mut(C))
                    .zip(v.par_chunks_mut(C).zip(g.par_chunks(C)))
                    .for_each(|((t, m), (v, g))| entries(t, m, v, g));
            }
            Rows::Listed(ids) => {
                for (j, &r) in ids.iter().enumerate() {
                    let at = r as usize * k;
                    let (t, m, v) = (&mut t[at..at + k], &mut m[at..at + k], &mut v[at..at + k]);
                    entries(t, m, v, &g[j * k..][..k]);
                }
            }
            Rows::Spread(pos) => {
                const R: usize = 64; // rows per task
                t.par_chunks_mut(R * k)
                    .zip(m.par_chunks_mut(R * k))
                    .zip(v.par_chunks_mut(R * k).zip(pos.par_chunks(R)))
                    .for_each(|((t, m), (v, pos))| {
                        #[cfg(target_arch = "x86_64")]
                        if avx2 {
                            // SAFETY: the CPU has AVX2, checked above.
                            return unsafe { c.spread_avx2(t, m, v, (g, pos, k)) };
                        }
                        c.spread(t, m, v, (g, pos, k))
                    });
            }
        }
    };
    th.inplace_op2(
        g,
        &Lock1 {
            m,
            v,
            f: RefCell::new(&mut pass),
        },
    )?;
    Ok(())
}

/// The update run by [`one_pass_cpu`] once all three storages are held.
type Pass<'f> = dyn FnMut(&mut [f32], &mut [f32], &mut [f32], &[f32]) + 'f;

/// Holds the parameter's storage and reads the gradient (taken together, so
/// candle refuses a gradient that shares the parameter's storage), then
/// takes the first moment's ([`Lock2`]). The moments are the optimiser's
/// own tensors, shared with nothing.
struct Lock1<'a, 'f> {
    m: &'a Tensor,
    v: &'a Tensor,
    f: RefCell<&'a mut Pass<'f>>,
}

/// Holds the parameter's and the first moment's storage, and takes the
/// second moment's ([`Lock3`]).
struct Lock2<'o, 'a, 'f> {
    t: RefCell<&'o mut [f32]>,
    g: &'o [f32],
    outer: &'o Lock1<'a, 'f>,
}

/// Holds all three and runs the pass.
struct Lock3<'p, 'o, 'a, 'f> {
    m: RefCell<&'p mut [f32]>,
    outer: &'p Lock2<'o, 'a, 'f>,
}

impl InplaceOp2 for Lock1<'_, '_> {
    fn name(&self) -> &'static str {
        "adamw-one-pass"
    }
    fn cpu_fwd(
        &self,
        s: &mut CpuStorage,
        _: &Layout,
        gs: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<()> {
        let t = f32_slice_mut(s, self.name())?;
        let g = f32_slice(gs, self.name())?;
        self.m.inplace_op1(&Lock2 {
            t: RefCell::new(t),
            g,
            outer: self,
        })
    }
}

impl InplaceOp1 for Lock2<'_, '_, '_> {
    fn name(&self) -> &'static str {
        "adamw-one-pass"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, _: &Layout) -> candle_core::Result<()> {
        let m = f32_slice_mut(s, self.name())?;
        self.outer.v.inplace_op1(&Lock3 {
            m: RefCell::new(m),
            outer: self,
        })
    }
}

impl InplaceOp1 for Lock3<'_, '_, '_, '_> {
    fn name(&self) -> &'static str {
        "adamw-one-pass"
    }
    fn cpu_fwd(&self, s: &mut CpuStorage, _: &Layout) -> candle_core::Result<()> {
        let v = f32_slice_mut(s, self.name())?;
        let mut t = self.outer.t.borrow_mut();
        let mut m = self.m.borrow_mut();
        (self.outer.outer.f.borrow_mut())(&mut t, &mut m, v, self.outer.g);
        Ok(())
    }
}

/// `m ← β m + (1 − β) g` (or `g²`), in place, on a CUDA device (the CPU
/// takes [`one_pass_cpu`]).
#[cfg(feature = "cuda")]
struct Moment {
    beta: f64,
    square: bool,
}

#[cfg(feature = "cuda")]
impl InplaceOp2 for Moment {
    fn name(&self) -> &'static str {
        "adamw-moment"
    }
    fn cpu_fwd(
        &self,
        _: &mut CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<()> {
        candle_core::bail!("adamw-moment: the CPU takes the one-pass update")
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &mut candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<()> {
        use super::rows::gpu::{launch_cfg, MODULE, PTX};
        use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
        use candle_core::cuda_backend::WrapErr;
        let dev = s1.device.clone();
        let (a, b) = l1
            .contiguous_offsets()
            .ok_or(candle_core::Error::RequiresContiguous { op: "adamw-moment" })?;
        let (ga, gb) = l2
            .contiguous_offsets()
            .ok_or(candle_core::Error::RequiresContiguous { op: "adamw-moment" })?;
        let g = s2.as_cuda_slice::<f32>()?.slice(ga..gb);
        let mut m = s1.as_cuda_slice_mut::<f32>()?.slice_mut(a..b);
        let f = dev.get_or_load_custom_func("adam_moment_f32", MODULE, PTX)?;
        let (beta, c, sq, n) = (
            self.beta as f32,
            (1.0 - self.beta) as f32,
            self.square as i32,
            (b - a) as u64,
        );
        let mut bld = f.builder();
        bld.arg(&mut m);
        bld.arg(&g);
        bld.arg(&beta);
        bld.arg(&c);
        bld.arg(&sq);
        bld.arg(&n);
        // SAFETY: both slices hold n values (fused_ok: one shape, contiguous).
        unsafe { bld.launch(launch_cfg(b - a)) }.w()?;
        Ok(())
    }
}

/// `θ ← θ·(1 − lr·λ) − lr · m̂ / (√v̂ + ε)`, in place, on a CUDA device
/// (the CPU takes [`one_pass_cpu`]).
#[cfg(feature = "cuda")]
struct ParamUpdate {
    lr: f64,
    decay: f64,
    scale_m: f64,
    scale_v: f64,
    eps: f64,
}

#[cfg(feature = "cuda")]
impl candle_core::InplaceOp3 for ParamUpdate {
    fn name(&self) -> &'static str {
        "adamw-update"
    }
    fn cpu_fwd(
        &self,
        _: &mut CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<()> {
        candle_core::bail!("adamw-update: the CPU takes the one-pass update")
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &mut candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<()> {
        use super::rows::gpu::{launch_cfg, MODULE, PTX};
        use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
        use candle_core::cuda_backend::WrapErr;
        let dev = s1.device.clone();
        let off = |l: &Layout| {
            l.contiguous_offsets()
                .ok_or(candle_core::Error::RequiresContiguous { op: "adamw-update" })
        };
        let ((a, b), (ma, mb), (va, vb)) = (off(l1)?, off(l2)?, off(l3)?);
        let m = s2.as_cuda_slice::<f32>()?.slice(ma..mb);
        let v = s3.as_cuda_slice::<f32>()?.slice(va..vb);
        let mut th = s1.as_cuda_slice_mut::<f32>()?.slice_mut(a..b);
        let f = dev.get_or_load_custom_func("adam_update_f32", MODULE, PTX)?;
        let (lr, decay, sm, sv, eps, n) = (
            self.lr as f32,
            self.decay as f32,
            self.scale_m as f32,
            self.scale_v as f32,
            self.eps as f32,
            (b - a) as u64,
        );
        let mut bld = f.builder();
        bld.arg(&mut th);
        bld.arg(&m);
        bld.arg(&v);
        bld.arg(&lr);
        bld.arg(&decay);
        bld.arg(&sm);
        bld.arg(&sv);
        bld.arg(&eps);
        bld.arg(&n);
        // SAFETY: the three slices hold n values (fused_ok: one shape, contiguous).
        unsafe { bld.launch(launch_cfg(b - a)) }.w()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tensor's values as `f32`.
    fn values(t: &Tensor) -> Vec<f32> {
        t.to_dtype(DType::F32)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    }

    /// Parameter, first and second moment of every variable, after the run.
    fn trajectory(opt: &Adam) -> Vec<f32> {
        let mut out = Vec::new();
        for (_, th, m, v) in &opt.vars {
            for t in [th, m, v] {
                out.extend(values(t.as_tensor()));
            }
        }
        out
    }

    /// The three ways an update can run: fused CPU kernels (f32), the
    /// tensor-op path every non-CPU device takes, forced on the same f32 CPU
    /// tensors, and that path in f64.
    const PATHS: [(DType, bool); 3] =
        [(DType::F32, true), (DType::F32, false), (DType::F64, false)];

    /// Entries of `got` within `tol` of `want`.
    fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!((a - b).abs() <= tol, "{what}, entry {i}: {a} vs {b}");
        }
    }

    /// Dense steps: the fused in-place CPU kernels (f32) and the tensor-op
    /// update (f32 on the same tensors, and f64) give the same parameters and
    /// moments, with and without weight decay.
    #[test]
    fn fused_adam_matches_tensor_ops() {
        let dev = Device::Cpu;
        let init: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
        let c: Vec<f32> = (0..24).map(|i| (i as f32 * 0.11).cos()).collect();
        let run = |dtype: DType, fused: bool, wd: f64| -> Vec<f32> {
            let t = Tensor::from_vec(init.clone(), (4, 6), &dev).unwrap();
            let var = Var::from_tensor(&t.to_dtype(dtype).unwrap()).unwrap();
            let bias = Var::from_tensor(&Tensor::zeros(6, dtype, &dev).unwrap()).unwrap();
            let ct = Tensor::from_vec(c.clone(), (4, 6), &dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let vars = vec![("p".into(), var.clone()), ("b".into(), bias.clone())];
            let mut opt = Adam::new(vars, 0.1, wd).unwrap();
            opt.set_fused(fused);
            let (_, th, m, v) = &opt.vars[0];
            assert_eq!(
                fused_ok(&[th.as_tensor(), m.as_tensor(), v.as_tensor()]),
                dtype == DType::F32
            );
            for _ in 0..5 {
                let loss = (var.as_tensor() * &ct)
                    .unwrap()
                    .broadcast_add(bias.as_tensor())
                    .unwrap()
                    .sin()
                    .unwrap()
                    .sum_all()
                    .unwrap();
                opt.backward_step(&loss).unwrap();
            }
            // 5 steps × 2 variables fused, or none
            assert_eq!(
                opt.fused_updates.load(Ordering::Relaxed),
                if fused { 10 } else { 0 }
            );
            trajectory(&opt)
        };
        for wd in [0.0, 0.01] {
            let [fused, generic, f64_] = PATHS.map(|(d, f)| run(d, f, wd));
            assert_ne!(fused[..24], init[..], "no update happened");
            assert_close(&generic, &fused, 1e-6, &format!("f32 tensor ops, wd {wd}"));
            assert_close(&f64_, &fused, 1e-5, &format!("f64 tensor ops, wd {wd}"));
        }
    }

    /// Row-sparse ("lazy") steps: the fused row kernels (f32) and the tensor-op
    /// path (f32 on the same tensors, and f64) agree on the table and its
    /// moments, and rows outside the batch never change.
    #[test]
    fn fused_rows_match_tensor_ops_and_leave_other_rows() {
        let dev = Device::Cpu;
        let init: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
        let run = |dtype: DType, fused: bool| -> Vec<f32> {
            let t = Tensor::from_vec(init.clone(), (6, 4), &dev).unwrap();
            let table = Var::from_tensor(&t.to_dtype(dtype).unwrap()).unwrap();
            let mut opt = Adam::new(vec![("p".into(), table.clone())], 0.1, 0.01).unwrap();
            opt.set_fused(fused);
            let (_, th, m, v) = &opt.vars[0];
            let g = Tensor::zeros((3, 4), dtype, &dev).unwrap();
            let ids = Tensor::new(&[1u32, 3, 4], &dev).unwrap();
            let fusable = fused_rows(th.as_tensor(), m.as_tensor(), v.as_tensor(), &g, &ids);
            assert_eq!(fusable.unwrap().is_some(), dtype == DType::F32);
            for step in 0..5u32 {
                // distinct ids, in another order every other step
                let order = if step % 2 == 0 {
                    [1u32, 3, 4]
                } else {
                    [4, 1, 3]
                };
                let ids = Tensor::new(&order, &dev).unwrap();
                let rows = table.as_tensor().index_select(&ids, 0).unwrap();
                let leaf = Var::from_tensor(&rows).unwrap();
                let loss = leaf
                    .as_tensor()
                    .sin()
                    .unwrap()
                    .sqr()
                    .unwrap()
                    .sum_all()
                    .unwrap();
                opt.backward_step_rows(&loss, &[("p", &ids, &leaf)])
                    .unwrap();
            }
            assert_eq!(
                opt.fused_updates.load(Ordering::Relaxed),
                if fused { 5 } else { 0 }
            );
            trajectory(&opt)
        };
        let [fused, generic, f64_] = PATHS.map(|(d, f)| run(d, f));
        assert_close(&generic, &fused, 1e-6, "f32 tensor ops");
        assert_close(&f64_, &fused, 1e-5, "f64 tensor ops");
        for (i, a) in fused[..24].iter().enumerate() {
            let row = i / 4;
            let touched = [1, 3, 4].contains(&row);
            assert_eq!(*a != init[i], touched, "entry {i} of row {row}");
            // untouched rows keep zero moments
            assert_eq!(fused[24 + i] != 0.0, touched, "m, entry {i}");
            assert_eq!(fused[48 + i] != 0.0, touched, "v, entry {i}");
        }
    }

    /// Dense Adam from the rows' gradient ([`Adam::backward_step_dense_rows`])
    /// is the dense step on the full gradient, bit for bit on the fused CPU
    /// path, within rounding on the tensor-op path; rows the batches skip
    /// still move (their moments decay), unlike lazy Adam.
    #[test]
    fn dense_rows_step_is_the_dense_step() {
        let dev = Device::Cpu;
        let init: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37 + 0.1).sin()).collect();
        let orders: [&[u32]; 3] = [&[1, 3, 4], &[4, 0], &[3, 1]];
        let run = |via_rows: bool, fused: bool| -> Vec<f32> {
            let t = Tensor::from_vec(init.clone(), (6, 4), &dev).unwrap();
            let table = Var::from_tensor(&t).unwrap();
            let mut opt = Adam::new(vec![("p".into(), table.clone())], 0.1, 0.0).unwrap();
            opt.set_fused(fused);
            for order in orders.iter().cycle().take(5) {
                let ids = Tensor::new(*order, &dev).unwrap();
                if via_rows {
                    let leaf = Var::from_tensor(&table.as_tensor().index_select(&ids, 0).unwrap())
                        .unwrap();
                    let loss = leaf
                        .as_tensor()
                        .sin()
                        .unwrap()
                        .sqr()
                        .unwrap()
                        .sum_all()
                        .unwrap();
                    opt.backward_step_dense_rows(&loss, &[("p", &ids, &leaf)])
                        .unwrap();
                } else {
                    let rows = table.as_tensor().index_select(&ids, 0).unwrap();
                    let loss = rows.sin().unwrap().sqr().unwrap().sum_all().unwrap();
                    opt.backward_step(&loss).unwrap();
                }
            }
            trajectory(&opt)
        };
        let dense = run(false, true);
        assert_eq!(run(true, true), dense, "fused dense-rows step");
        assert_close(&run(true, false), &dense, 1e-6, "tensor-op dense-rows step");
        // rows 2 and 5 never had a gradient: unchanged (no weight decay here);
        // rows that had one at an earlier step keep moving through their moments
        for i in 0..24 {
            let row = i / 4;
            assert_eq!(dense[i] != init[i], ![2, 5].contains(&row), "entry {i}");
        }
    }

    /// The one-pass CPU update over a table larger than one parallel block
    /// (20,000 entries, 200 rows: several 16,384-entry and 64-row blocks)
    /// agrees with the tensor-op path, dense and from rows, with weight decay.
    #[test]
    fn one_pass_matches_tensor_ops_across_blocks() {
        let dev = Device::Cpu;
        let (n, k) = (200usize, 100usize);
        let init: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.013).sin()).collect();
        let ids: Vec<u32> = (0..n as u32).filter(|r| r % 3 != 1).collect();
        let run = |fused: bool, via_rows: bool| -> Vec<f32> {
            let t = Tensor::from_vec(init.clone(), (n, k), &dev).unwrap();
            let table = Var::from_tensor(&t).unwrap();
            let mut opt = Adam::new(vec![("p".into(), table.clone())], 0.05, 0.01).unwrap();
            opt.set_fused(fused);
            for step in 0..4 {
                // every step another subset of rows, so idle rows decay
                let ids: Vec<u32> = ids
                    .iter()
                    .copied()
                    .filter(|r| (r + step) % 2 == 0)
                    .collect();
                let ids = Tensor::new(ids.as_slice(), &dev).unwrap();
                let leaf =
                    Var::from_tensor(&table.as_tensor().index_select(&ids, 0).unwrap()).unwrap();
                let rows = if via_rows {
                    leaf.as_tensor().clone()
                } else {
                    table.as_tensor().index_select(&ids, 0).unwrap()
                };
                let loss = rows.cos().unwrap().sum_all().unwrap();
                if via_rows {
                    opt.backward_step_dense_rows(&loss, &[("p", &ids, &leaf)])
                        .unwrap();
                } else {
                    opt.backward_step(&loss).unwrap();
                }
            }
            assert_eq!(
                opt.fused_updates.load(Ordering::Relaxed),
                if fused { 4 } else { 0 }
            );
            trajectory(&opt)
        };
        let fused = run(true, false);
        assert_ne!(fused[..n * k], init[..], "no update happened");
        assert_close(&run(false, false), &fused, 1e-6, "dense, tensor ops");
        assert_eq!(run(true, true), fused, "dense from rows, one pass");
        assert_close(
            &run(false, true),
            &fused,
            1e-6,
            "dense from rows, tensor ops",
        );
    }

    /// A gradient sharing the parameter's storage is refused with an error
    /// (not a deadlock on the parameter's lock), and nothing is written.
    #[test]
    fn one_pass_refuses_a_gradient_aliasing_the_parameter() {
        let dev = Device::Cpu;
        let var = Var::from_tensor(&Tensor::new(&[1.0f32, -2.0, 3.0], &dev).unwrap()).unwrap();
        let mut opt = Adam::new(vec![("p".into(), var.clone())], 0.1, 0.0).unwrap();
        opt.t = 1;
        let (_, th, m, v) = &opt.vars[0];
        let (th, m, v) = (th.as_tensor(), m.as_tensor(), v.as_tensor());
        let e = one_pass_cpu(th, m, v, th, Rows::All, opt.consts()).unwrap_err();
        assert!(e.to_string().contains("adamw-one-pass"), "{e}");
        assert_eq!(th.to_vec1::<f32>().unwrap(), [1.0, -2.0, 3.0]);
        // a distinct gradient goes through
        let g = Tensor::new(&[1.0f32, 1.0, 1.0], &dev).unwrap();
        one_pass_cpu(th, m, v, &g, Rows::All, opt.consts()).unwrap();
        assert_ne!(th.to_vec1::<f32>().unwrap(), [1.0, -2.0, 3.0]);
    }

    /// State written and restored continues the same trajectory.
    #[test]
    fn state_round_trips() {
        let dev = Device::Cpu;
        let var = Var::from_tensor(&Tensor::new(&[1.0f32, -2.0, 3.0], &dev).unwrap()).unwrap();
        let loss = |v: &Var| v.as_tensor().sqr().unwrap().sum_all().unwrap();
        let mut a = Adam::new(vec![("p".into(), var.clone())], 0.1, 0.0).unwrap();
        a.backward_step(&loss(&var)).unwrap();
        let state: HashMap<String, Tensor> = a.state().unwrap().into_iter().collect();
        let copy = Var::from_tensor(&var.as_tensor().copy().unwrap()).unwrap();
        let mut b = Adam::new(vec![("p".into(), copy.clone())], 0.1, 0.0).unwrap();
        b.restore(&state).unwrap();
        a.backward_step(&loss(&var)).unwrap();
        b.backward_step(&loss(&copy)).unwrap();
        let vals = |v: &Var| v.as_tensor().to_vec1::<f32>().unwrap();
        assert_eq!(vals(&var), vals(&copy));
        let mut c = Adam::new(vec![("q".into(), copy)], 0.1, 0.0).unwrap();
        let e = c.restore(&state).unwrap_err().to_string();
        assert!(e.contains("adam.m.q"), "{e}");
    }
}
