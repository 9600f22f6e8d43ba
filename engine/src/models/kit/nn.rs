//! The shared kit of the candle-trained models (S2Net, XCNN, BAE): sparse
//! batches composed on the device, unit rows, seeded initialisation, the
//! `optim` setting, per-epoch generators, validation MRR and loss checks.

use candle_core::{DType, Device, Tensor, Var};
use ndarray::Array2;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::eval::sentence::sentence_retrieval;
use crate::models::{Model, TrainData};
use crate::text::{CsrMatrix, Side};
use crate::{Error, Result};

/// Largest shared-space dimension accepted (a `V × k` table per language).
pub const MAX_DIM: usize = 4096;
const NORM_EPS: f64 = 1e-12;

/// Rows of a raw-count [`CsrMatrix`] laid out for composition on a device:
/// the distinct terms the rows use, and per stored entry its term (global id
/// and position among the distinct terms), its row in the batch and its count.
#[derive(Debug, Clone)]
pub struct SparseBatch {
    /// Number of texts (rows) in the batch.
    pub n_rows: usize,
    /// Distinct term ids used by the batch, ascending (`u32`, length `u`).
    pub uniq: Tensor,
    /// Global term id of every entry (`u32`, length `nnz`).
    pub terms: Tensor,
    /// Position of every entry's term in `uniq` (`u32`, length `nnz`).
    pub local: Tensor,
    /// Batch row of every entry (`u32`, length `nnz`).
    pub rows: Tensor,
    /// Value of every entry as an `nnz × 1` column of `dtype`.
    pub weights: Tensor,
    /// Number of stored entries.
    pub nnz: usize,
    /// Every value is 1 (binary bags): [`SparseBatch::compose`] skips the
    /// product by `weights`.
    pub unit: bool,
}

impl SparseBatch {
    /// The rows `rows` of `m` (in that order), on `device`, values as `dtype`;
    /// `binary` replaces every count by 1.
    pub fn new(
        m: &CsrMatrix,
        rows: &[usize],
        binary: bool,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let mut terms = Vec::new();
        let mut row_of = Vec::new();
        let mut vals = Vec::new();
        for (b, &r) in rows.iter().enumerate() {
            let (c, v) = m.row(r);
            terms.extend_from_slice(c);
            row_of.extend(std::iter::repeat_n(b as u32, c.len()));
            vals.extend(v.iter().map(|&x| if binary { 1.0f64 } else { x as f64 }));
        }
        let mut uniq = terms.clone();
        uniq.sort_unstable();
        uniq.dedup();
        let local: Vec<u32> = terms
            .iter()
            .map(|t| uniq.binary_search(t).expect("term in its own set") as u32)
            .collect();
        let nnz = terms.len();
        let unit = vals.iter().all(|&v| v == 1.0);
        Ok(SparseBatch {
            n_rows: rows.len(),
            uniq: Tensor::from_vec(uniq.clone(), uniq.len(), device)?,
            terms: Tensor::from_vec(terms, nnz, device)?,
            local: Tensor::from_vec(local, nnz, device)?,
            rows: Tensor::from_vec(row_of, nnz, device)?,
            weights: Tensor::from_vec(vals, (nnz, 1), device)?.to_dtype(dtype)?,
            nnz,
            unit,
        })
    }

    /// Segment sum: `out[r] = Σ weight·table[idx]` over the entries of row
    /// `r`, where `table` is indexed by `idx` (`terms` for a full `V × k`
    /// table, `local` for a table of the distinct terms). Empty rows stay zero.
    pub fn compose(&self, table: &Tensor, by_local: bool) -> Result<Tensor> {
        let k = table.dim(1)?;
        let out = Tensor::zeros((self.n_rows, k), table.dtype(), table.device())?;
        if self.nnz == 0 {
            return Ok(out);
        }
        let idx = if by_local { &self.local } else { &self.terms };
        let mut g = super::rows::gather_rows(table, idx)?;
        if !self.unit {
            g = g.broadcast_mul(&self.weights)?;
        }
        super::rows::scatter_add_rows(&g, &self.rows, self.n_rows)
    }
}

/// Rows scaled to unit length (`y / sqrt(|y|² + ε)`: zero rows stay zero and
/// the gradient stays finite).
pub fn unit_rows(y: &Tensor) -> Result<Tensor> {
    let n = (y.sqr()?.sum_keepdim(1)? + NORM_EPS)?.sqrt()?;
    Ok(y.broadcast_div(&n)?)
}

/// S2Net's pairwise logistic loss over a batch of aligned projections
/// (`ys`, `yt`: b × k, row i of each a pair): the mean of
/// `log(1 + exp(−γ (cos(s_i, t_i) − cos(s_i, t_j))))` over all `i ≠ j`.
pub fn s2net_loss(ys: &Tensor, yt: &Tensor, gamma: f64) -> Result<Tensor> {
    let b = ys.dim(0)?;
    if b < 2 {
        return Err(Error::invalid(
            "s2net: a batch needs at least 2 pairs (the others are the negatives)".to_string(),
        ));
    }
    let (us, ut) = (unit_rows(ys)?, unit_rows(yt)?);
    let c = super::precision::matmul(&us, &ut.t()?)?; // b × b cosines
    let diag = (&us * &ut)?.sum_keepdim(1)?; // b × 1
    let x = (c.broadcast_sub(&diag)? * gamma)?; // −γΔ
    let sp = softplus(&x)?;
    let mask = (Tensor::ones((b, b), ys.dtype(), ys.device())?
        - Tensor::eye(b, ys.dtype(), ys.device())?)?;
    Ok(((sp * mask)?.sum_all()? / (b * (b - 1)) as f64)?)
}

/// A tensor of unit rows as an ndarray matrix of `f32`.
pub fn to_array(y: &Tensor) -> Result<Array2<f32>> {
    let (n, k) = y.dims2()?;
    let v = y.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    Array2::from_shape_vec((n, k), v).map_err(|e| Error::invalid(format!("tensor shape: {e}")))
}

/// Normal `N(0,1)·scale` values from a seeded generator (device independent).
pub fn normal_tensor(
    shape: (usize, usize),
    scale: f64,
    rng: &mut ChaCha8Rng,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let n = shape.0 * shape.1;
    let v: Vec<f64> = (0..n)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            z * scale
        })
        .collect();
    Ok(Tensor::from_vec(v, shape, device)?.to_dtype(dtype)?)
}

/// A `shape` tensor drawn uniform in `(−k, k)` from `rng`, row-major, as
/// `(2u − 1)·k` with `u` uniform in `[0, 1)` (torch's `nn.Linear` and
/// `nn.LSTM` draw their weights and biases so, with `k = 1/√fan_in`).
pub fn uniform_tensor(
    shape: &[usize],
    k: f64,
    rng: &mut ChaCha8Rng,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let n = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|_| (2.0 * rand::Rng::random::<f64>(rng) - 1.0) * k)
        .collect();
    Ok(Tensor::from_vec(v, shape, device)?.to_dtype(dtype)?)
}

/// How many times a worker of candle's CPU pool spins, waiting for the next
/// op, before it sleeps ([`yielding_candle_pool`]).
const CANDLE_POOL_SPINS: &str = "100";

/// Makes candle's CPU worker pool sleep soon after an op instead of spinning
/// (`CANDLE_BARRIER_POOL_SPIN_LIMIT`, candle's default 25,000 `pause`s, about
/// half a millisecond), unless the user has set it. Between candle's element-wise
/// ops the step runs products and fused ops on rayon's threads; a candle worker
/// still spinning then holds a core those threads need, so on 2 threads the
/// encoder's fine-tuning step ran at 8.9–10.4 pairs/s against 12.8–12.9 with
/// 100 spins (docs/results.md, issue 51, session 31). Process-wide: call it
/// first thing in `main`, before any thread exists; candle reads it when it
/// first builds its pool.
pub fn yielding_candle_pool() {
    if std::env::var_os("CANDLE_BARRIER_POOL_SPIN_LIMIT").is_none() {
        std::env::set_var("CANDLE_BARRIER_POOL_SPIN_LIMIT", CANDLE_POOL_SPINS);
    }
}

/// Turns candle's own CPU worker pool off (`CANDLE_NUM_THREADS=1`) unless the
/// user has set it, for trainers whose candle ops are small or whose heavy
/// work runs on rayon's threads: there candle's spinning pool competes with
/// rayon for the cores and costs more than it gives. Process-wide; candle
/// reads it when it first needs its pool.
pub fn single_threaded_candle() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
}

/// The `optim` setting of a model trained with [`Adam`](super::optim::Adam): `adam` (dense) or
/// `lazy-adam` (row-sparse, [`Adam::backward_step_rows`](super::optim::Adam::backward_step_rows)); true for lazy.
pub fn lazy_optim(optim: &str) -> bool {
    optim == "lazy-adam"
}

/// A generator for one (phase, epoch), so a resumed job draws what the
/// uninterrupted one would have.
pub fn epoch_rng(seed: u64, phase: u64, epoch: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(
        seed ^ phase.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (epoch as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
    )
}

/// Rows of a matrix with at least one known term.
pub fn nonempty_rows(m: &CsrMatrix) -> Vec<usize> {
    (0..m.n_rows()).filter(|&i| !m.row_is_empty(i)).collect()
}

/// Sentence-retrieval MRR on (at most `max`) validation pairs.
pub fn valid_mrr(model: &dyn Model, data: &TrainData, max: usize) -> Result<f64> {
    let n = data.valid_src.n_rows().min(max);
    if n == 0 {
        return Ok(f64::NAN);
    }
    let rows: Vec<usize> = (0..n).collect();
    let s = model.encode(Side::Source, &data.valid_src.select_rows(&rows))?;
    let t = model.encode(Side::Target, &data.valid_tgt.select_rows(&rows))?;
    Ok(sentence_retrieval(&s, &t, model.similarity()).mrr)
}

/// A non-finite training loss is an error naming the model, phase and step.
pub fn check_loss(model: &str, loss: f64, phase: &str, step: usize) -> Result<()> {
    if loss.is_finite() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{model}: {phase} loss became {loss} at step {step} (try a lower lr)"
        )))
    }
}

/// The tail of every optimiser step: reads the mean loss back (the step's
/// one host round-trip besides the batch upload), fails on a non-finite
/// loss, and reports the step to the runner.
pub fn report_step(
    hooks: &mut dyn crate::models::Hooks,
    kind: &str,
    phase: &str,
    (epoch, step): (usize, usize),
    loss: &Tensor,
    examples: usize,
) -> Result<crate::models::Flow> {
    let l = loss.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    check_loss(kind, l, phase, step)?;
    hooks.step(&crate::models::StepReport {
        phase: phase.to_string(),
        epoch,
        step,
        loss: l,
        examples,
        parts: Vec::new(),
    })
}

/// A trainer's own running choice (its best snapshot so far, its score and
/// a patience count) as extra checkpoint tensors named `PREFIX…`, so that a
/// resume continues the same choice, not one restarted from the resumed
/// network. The score is stored as `f64` (NaN allowed: "none yet").
pub fn best_state(
    prefix: &str,
    score: f64,
    since_best: usize,
    snapshot: Vec<(String, Tensor)>,
    device: &Device,
) -> Result<Vec<(String, Tensor)>> {
    let mut out: Vec<(String, Tensor)> = snapshot
        .into_iter()
        .map(|(n, t)| (format!("{prefix}{n}"), t))
        .collect();
    out.push((format!("{prefix}score"), Tensor::new(&[score], device)?));
    out.push((
        format!("{prefix}since_best"),
        Tensor::new(&[since_best as i64], device)?,
    ));
    Ok(out)
}

/// A trainer's running choice read back: `(score, since_best, snapshot)`.
pub type BestState = (f64, usize, std::collections::HashMap<String, Tensor>);

/// Reads back [`best_state`] from a checkpoint's tensors: `(score,
/// since_best, snapshot with the prefix taken off)`, or `None` when the
/// checkpoint has none (one written by an older version).
pub fn restore_best_state(
    prefix: &str,
    tensors: &std::collections::HashMap<String, Tensor>,
) -> Result<Option<BestState>> {
    let (Some(score), Some(since)) = (
        tensors.get(&format!("{prefix}score")),
        tensors.get(&format!("{prefix}since_best")),
    ) else {
        return Ok(None);
    };
    let score = score
        .to_dtype(DType::F64)?
        .flatten_all()?
        .to_vec1::<f64>()?;
    let since = since
        .to_dtype(DType::I64)?
        .flatten_all()?
        .to_vec1::<i64>()?;
    let (Some(&score), Some(&since)) = (score.first(), since.first()) else {
        return Err(Error::invalid(format!(
            "checkpoint tensors {prefix}score / {prefix}since_best are empty"
        )));
    };
    let snap = tensors
        .iter()
        .filter_map(|(n, t)| {
            let rest = n.strip_prefix(prefix)?;
            (rest != "score" && rest != "since_best").then(|| (rest.to_string(), t.clone()))
        })
        .collect();
    Ok(Some((score, since.max(0) as usize, snap)))
}

/// Error (naming the tensor) unless checkpoint tensor `name` has `rank`
/// dimensions and, where `want` gives a size, that size: a malformed
/// checkpoint is reported, never indexed out of bounds.
pub fn check_shape(name: &str, t: &Tensor, want: &[Option<usize>]) -> Result<()> {
    let dims = t.dims();
    let ok = dims.len() == want.len()
        && dims
            .iter()
            .zip(want)
            .all(|(d, w)| w.is_none_or(|w| *d == w));
    if ok {
        Ok(())
    } else {
        let want: Vec<String> = want
            .iter()
            .map(|w| w.map_or("_".to_string(), |w| w.to_string()))
            .collect();
        Err(Error::invalid(format!(
            "checkpoint tensor `{name}` has shape {dims:?}, expected [{}]",
            want.join(", ")
        )))
    }
}

/// Deep copies of named variables (a snapshot or checkpoint tensors).
pub fn copy_vars(vars: Vec<(String, Var)>) -> Result<Vec<(String, Tensor)>> {
    vars.into_iter()
        .map(|(n, v)| Ok((n, v.as_tensor().copy()?)))
        .collect()
}

/// Sets named variables from a snapshot with the same names, each converted
/// to its variable's dtype and device; a missing tensor or a shape that
/// differs is an error naming it.
pub fn set_vars(vars: Vec<(String, Var)>, snap: &[(String, Tensor)]) -> Result<()> {
    let map: std::collections::HashMap<&str, &Tensor> =
        snap.iter().map(|(n, t)| (n.as_str(), t)).collect();
    for (n, v) in vars {
        let t = map
            .get(n.as_str())
            .ok_or_else(|| Error::invalid(format!("snapshot lacks {n}")))?;
        let want: Vec<Option<usize>> = v.dims().iter().map(|&d| Some(d)).collect();
        check_shape(&n, t, &want)?;
        v.set(&t.to_dtype(v.dtype())?.to_device(v.device())?)?;
    }
    Ok(())
}

/// `softplus(x) = ln(1 + eˣ)`, computed stably as `max(x, 0) + ln(1 + e^{−|x|})`:
/// candle's ops on the CPU; one fused kernel each way off it
/// (`kernels/act.cu`, gradient `σ(x)`).
pub fn softplus(x: &Tensor) -> Result<Tensor> {
    if x.device().is_cpu() || !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Ok((x.relu()? + (x.abs()?.neg()?.exp()? + 1.0)?.log()?)?);
    }
    act::softplus_op(x)
}

/// `Σ softplus(z) − Σ_{i ∈ ones} z_i` over every entry of `z`, `ones` the
/// flat positions (`u32`) of the targets that are 1: the summed binary
/// cross-entropy of `σ(z)` against a sparse 0/1 target, as a scalar. On the
/// CPU one fused pass each way (gradient `σ(z) − 1_ones`), with no
/// intermediate the size of `z`; elsewhere candle's ops and [`softplus`].
pub fn bce_logits_sum(z: &Tensor, ones: &Tensor) -> Result<Tensor> {
    if z.device().is_cpu() && matches!(z.dtype(), DType::F32 | DType::F64) {
        return Ok(z
            .contiguous()?
            .apply_op2(&ones.contiguous()?, act::BceSum)?);
    }
    let hit = super::rows::gather_rows(&z.flatten_all()?, ones)?.sum_all()?;
    Ok((softplus(z)?.sum_all()? - hit)?)
}

/// [`bce_logits_sum`] of the logits `z = codes · wᵀ + c` of a sigmoid
/// decoder (`codes` `r × k`, `w` `v × k`, `c` `v`; `ones` flat positions in
/// `r × v`), as a scalar. On the CPU with f32 one fused op
/// (`models/kit/bce.rs`) that builds no tensor the size of `z` besides its own
/// gradient buffer; elsewhere (CUDA, f64, and `precision=bf16`, whose product
/// is [`super::precision::matmul`]'s) the product, then one op that folds in
/// the bias and builds only the product's gradient
/// ([`super::logit_bce::bias_bce_sum`]).
pub fn decoder_bce_sum(codes: &Tensor, w: &Tensor, c: &Tensor, ones: &Tensor) -> Result<Tensor> {
    let cpu32 = |t: &Tensor| t.device().is_cpu() && t.dtype() == DType::F32;
    let bf16 = super::precision::current() == super::precision::Precision::Bf16;
    if !bf16 && cpu32(codes) && cpu32(w) && cpu32(c) && ones.device().is_cpu() {
        return super::bce::decoder_bce_sum(codes, w, c, ones.to_vec1::<u32>()?);
    }
    let z = super::precision::matmul(codes, &w.t()?)?;
    super::logit_bce::bias_bce_sum(&z, c, ones)
}

/// [`decoder_bce_sum`] as candle ops: a matmul, the bias added, then
/// [`bce_logits_sum`]: the reference the fused paths are tested against.
pub fn decoder_bce_sum_unfused(
    codes: &Tensor,
    w: &Tensor,
    c: &Tensor,
    ones: &Tensor,
) -> Result<Tensor> {
    let z = super::precision::matmul(codes, &w.t()?)?.broadcast_add(c)?;
    bce_logits_sum(&z, ones)
}

/// The fused activation ops behind [`softplus`] and [`bce_logits_sum`].
pub(crate) mod act {
    use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor};

    use crate::Result;

    /// [`super::softplus`] through the fused op on any device.
    pub(crate) fn softplus_op(x: &Tensor) -> Result<Tensor> {
        Ok(x.contiguous()?.apply_op1(Softplus)?)
    }

    struct Softplus;
    struct SoftplusGrad;
    /// `Σ softplus(z) − Σ_ones z` (a scalar).
    pub(crate) struct BceSum;
    /// Its gradient `g·(σ(z) − 1_ones)`.
    struct BceSumGrad {
        g: f64,
    }

    fn ones_of(s: &CpuStorage, l: &Layout, n: usize) -> candle_core::Result<Vec<usize>> {
        let (a, b) = offsets(l, "bce")?;
        let CpuStorage::U32(v) = s else {
            candle_core::bail!("bce: u32 positions expected")
        };
        v[a..b]
            .iter()
            .map(|&i| {
                let i = i as usize;
                if i < n {
                    Ok(i)
                } else {
                    Err(candle_core::Error::Msg(format!("bce: position {i} of {n}")))
                }
            })
            .collect()
    }

    /// `Σ softplus` over the f32 or f64 values of `s` (contiguous), summed in
    /// f64: fixed chunks' sums added in chunk order, so the figure does not
    /// depend on how rayon splits the work or on the thread count.
    fn sum_softplus(s: &CpuStorage, l: &Layout) -> candle_core::Result<f64> {
        use rayon::prelude::*;
        let (a, b) = offsets(l, "bce")?;
        let sp = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
        let parts: Vec<f64> = match s {
            CpuStorage::F32(v) => v[a..b]
                .par_chunks(1 << 14)
                .map(|c| {
                    c.iter()
                        // ln(1 + t), t in (0, 1]: ln is exact enough here and
                        // about twice as fast as ln_1p
                        .map(|&x| (x.max(0.0) + (1.0 + (-x.abs()).exp()).ln()) as f64)
                        .sum::<f64>()
                })
                .collect(),
            CpuStorage::F64(v) => v[a..b]
                .par_chunks(1 << 14)
                .map(|c| c.iter().map(|&x| sp(x)).sum::<f64>())
                .collect(),
            _ => candle_core::bail!("bce: f32 or f64 values expected"),
        };
        Ok(parts.iter().sum())
    }

    impl CustomOp2 for BceSum {
        fn name(&self) -> &'static str {
            "rosetta-bce-sum"
        }

        fn cpu_fwd(
            &self,
            s1: &CpuStorage,
            l1: &Layout,
            s2: &CpuStorage,
            l2: &Layout,
        ) -> candle_core::Result<(CpuStorage, Shape)> {
            let n = l1.shape().elem_count();
            let ones = ones_of(s2, l2, n)?;
            let (a, _) = offsets(l1, "bce")?;
            let hit: f64 = match s1 {
                CpuStorage::F32(v) => ones.iter().map(|&i| v[a + i] as f64).sum(),
                CpuStorage::F64(v) => ones.iter().map(|&i| v[a + i]).sum(),
                _ => candle_core::bail!("bce: f32 or f64 values expected"),
            };
            let total = sum_softplus(s1, l1)? - hit;
            Ok((like(s1, vec![total]), Shape::from(())))
        }

        fn bwd(
            &self,
            z: &Tensor,
            ones: &Tensor,
            _res: &Tensor,
            grad: &Tensor,
        ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
            let g = grad.to_dtype(candle_core::DType::F64)?.to_scalar::<f64>()?;
            Ok((Some(z.apply_op2_no_bwd(ones, &BceSumGrad { g })?), None))
        }
    }

    impl CustomOp2 for BceSumGrad {
        fn name(&self) -> &'static str {
            "rosetta-bce-sum-grad"
        }

        fn cpu_fwd(
            &self,
            s1: &CpuStorage,
            l1: &Layout,
            s2: &CpuStorage,
            l2: &Layout,
        ) -> candle_core::Result<(CpuStorage, Shape)> {
            use rayon::prelude::*;
            let n = l1.shape().elem_count();
            let ones = ones_of(s2, l2, n)?;
            let (a, b) = offsets(l1, "bce")?;
            let out = match s1 {
                CpuStorage::F32(v) => {
                    let g = self.g as f32;
                    let mut out = vec![0f32; n];
                    out.par_chunks_mut(1 << 14)
                        .zip(v[a..b].par_chunks(1 << 14))
                        .for_each(|(o, z)| {
                            for (o, &z) in o.iter_mut().zip(z) {
                                *o = g / (1.0 + (-z).exp());
                            }
                        });
                    for &i in &ones {
                        out[i] -= g;
                    }
                    CpuStorage::F32(out)
                }
                CpuStorage::F64(v) => {
                    let g = self.g;
                    let mut out: Vec<f64> =
                        v[a..b].iter().map(|&z| g / (1.0 + (-z).exp())).collect();
                    for &i in &ones {
                        out[i] -= g;
                    }
                    CpuStorage::F64(out)
                }
                _ => candle_core::bail!("bce: f32 or f64 values expected"),
            };
            Ok((out, l1.shape().clone()))
        }
    }

    use crate::models::kit::rows::{like, offsets};

    fn values(s: &CpuStorage, l: &Layout) -> candle_core::Result<Vec<f64>> {
        crate::models::kit::rows::host_f64(s, l, "softplus")
    }

    impl CustomOp1 for Softplus {
        fn name(&self) -> &'static str {
            "rosetta-softplus"
        }

        fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
            let y = values(s, l)?
                .into_iter()
                .map(|x| x.max(0.0) + (-x.abs()).exp().ln_1p())
                .collect();
            Ok((like(s, y), l.shape().clone()))
        }

        #[cfg(feature = "cuda")]
        fn cuda_fwd(
            &self,
            s: &candle_core::CudaStorage,
            l: &Layout,
        ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
            Ok((gpu::launch("softplus", (s, l), None)?, l.shape().clone()))
        }

        fn bwd(
            &self,
            x: &Tensor,
            _res: &Tensor,
            grad: &Tensor,
        ) -> candle_core::Result<Option<Tensor>> {
            Ok(Some(
                x.apply_op2_no_bwd(&grad.contiguous()?, &SoftplusGrad)?,
            ))
        }
    }

    impl CustomOp2 for SoftplusGrad {
        fn name(&self) -> &'static str {
            "rosetta-softplus-grad"
        }

        fn cpu_fwd(
            &self,
            s1: &CpuStorage,
            l1: &Layout,
            s2: &CpuStorage,
            l2: &Layout,
        ) -> candle_core::Result<(CpuStorage, Shape)> {
            let (x, g) = (values(s1, l1)?, values(s2, l2)?);
            if x.len() != g.len() {
                candle_core::bail!("softplus-grad: {} values, {} gradients", x.len(), g.len());
            }
            let out = x
                .iter()
                .zip(&g)
                .map(|(x, g)| g / (1.0 + (-x).exp()))
                .collect();
            Ok((like(s1, out), l1.shape().clone()))
        }

        #[cfg(feature = "cuda")]
        fn cuda_fwd(
            &self,
            s1: &candle_core::CudaStorage,
            l1: &Layout,
            s2: &candle_core::CudaStorage,
            l2: &Layout,
        ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
            if l1.shape().elem_count() != l2.shape().elem_count() {
                candle_core::bail!("softplus-grad: values and gradients differ in size");
            }
            Ok((
                gpu::launch("softplus_grad", (s1, l1), Some((s2, l2)))?,
                l1.shape().clone(),
            ))
        }
    }

    #[cfg(feature = "cuda")]
    mod gpu {
        use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
        use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
        use candle_core::{CudaStorage, Layout};

        use crate::models::kit::rows::gpu::launch_cfg;

        const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/act.ptx"));

        /// `KERNEL_f32|f64(x, [g,] out, n)` into a new storage the size of `x`.
        pub fn launch(
            kernel: &str,
            x: (&CudaStorage, &Layout),
            g: Option<(&CudaStorage, &Layout)>,
        ) -> candle_core::Result<CudaStorage> {
            let dev = x.0.device.clone();
            let off = |l: &Layout| crate::models::kit::rows::offsets(l, "softplus");
            let (a, b) = off(x.1)?;
            let n = b - a;
            let n64 = n as u64;
            macro_rules! run {
                ($t:ty, $s:literal) => {{
                    let xv = x.0.as_cuda_slice::<$t>()?.slice(a..b);
                    let gv = match g {
                        Some((s, l)) => {
                            let (ga, gb) = off(l)?;
                            Some(s.as_cuda_slice::<$t>()?.slice(ga..gb))
                        }
                        None => None,
                    };
                    let mut out = dev.alloc_zeros::<$t>(n)?;
                    let f = dev.get_or_load_custom_func(
                        &format!("{kernel}_{}", $s),
                        "rosetta_act",
                        PTX,
                    )?;
                    if n > 0 {
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
                CudaStorageSlice::F64(_) => run!(f64, "f64"),
                _ => candle_core::bail!("softplus: f32 or f64 values expected"),
            })
        }
    }

    #[cfg(test)]
    mod tests {
        use candle_core::{Device, Var};

        /// The fused cross-entropy sum and its gradient against candle's ops.
        #[test]
        fn fused_bce_sum_matches_candle() {
            let dev = Device::Cpu;
            let vals: Vec<f64> = (0..12)
                .map(|i| (i as f64 * 1.7).sin() * 6.0 + 0.05)
                .collect();
            let z = Var::from_tensor(&candle_core::Tensor::from_vec(vals, (3, 4), &dev).unwrap())
                .unwrap();
            let ones = candle_core::Tensor::new(&[0u32, 5, 11, 7], &dev).unwrap();
            let fused = crate::models::kit::nn::bce_logits_sum(z.as_tensor(), &ones).unwrap();
            let hit = z
                .as_tensor()
                .flatten_all()
                .unwrap()
                .index_select(&ones, 0)
                .unwrap();
            let plain = (crate::models::kit::nn::softplus(z.as_tensor())
                .unwrap()
                .sum_all()
                .unwrap()
                - hit.sum_all().unwrap())
            .unwrap();
            let (a, b) = (
                fused.to_scalar::<f64>().unwrap(),
                plain.to_scalar::<f64>().unwrap(),
            );
            assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            let gf = (fused * 3.0).unwrap().backward().unwrap();
            let gp = (plain * 3.0).unwrap().backward().unwrap();
            let v = |t: &candle_core::Tensor| t.flatten_all().unwrap().to_vec1::<f64>().unwrap();
            for (a, b) in v(gf.get(z.as_tensor()).unwrap())
                .iter()
                .zip(v(gp.get(z.as_tensor()).unwrap()))
            {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
            assert!(crate::models::kit::nn::bce_logits_sum(
                z.as_tensor(),
                &candle_core::Tensor::new(&[12u32], &dev).unwrap()
            )
            .is_err());
        }

        /// The fused op's value and gradient (σ) against candle's composition,
        /// away from 0 where candle's `relu`/`abs` gradients take 0.
        #[test]
        fn fused_softplus_matches_candle() {
            let x = Var::from_tensor(
                &candle_core::Tensor::new(&[-30.0f64, -2.5, -0.3, 0.7, 4.0, 40.0], &Device::Cpu)
                    .unwrap(),
            )
            .unwrap();
            let fused = super::softplus_op(x.as_tensor()).unwrap();
            let plain = crate::models::kit::nn::softplus(x.as_tensor()).unwrap();
            let gf = fused.sum_all().unwrap().backward().unwrap();
            let gp = plain.sum_all().unwrap().backward().unwrap();
            let v = |t: &candle_core::Tensor| t.to_vec1::<f64>().unwrap();
            for (a, b) in v(&fused).iter().zip(v(&plain)) {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
            let (a, b) = (
                gf.get(x.as_tensor()).unwrap(),
                gp.get(x.as_tensor()).unwrap(),
            );
            for (a, b) in v(a).iter().zip(v(b)) {
                assert!((a - b).abs() < 1e-12, "{a} vs {b}");
            }
        }
    }
}
