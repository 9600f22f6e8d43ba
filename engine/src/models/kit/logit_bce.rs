//! A sigmoid decoder's binary cross-entropy from its product, the bias
//! folded in: `Σ softplus(z + c) − Σ_ones (z + c)` for the product
//! `z = codes · wᵀ` (`r × v`, computed by candle: cuBLAS on a GPU), the bias
//! `c` (`v`) and the flat positions (`row · v + term`, `u32`) of the 1
//! targets. It is [`super::nn::decoder_bce_sum`]'s path wherever the CPU's
//! fused f32 op (`kit/bce.rs`) does not apply: on CUDA (BAE's large-vocabulary
//! step, issue 41 item 2), and for f64 or `precision=bf16` on the CPU.
//!
//! - **Forward**: one reducing pass over `z` and the positions, with no
//!   tensor the size of `z`. Its sums are in f64: on the GPU per-block
//!   partial sums, then one block adds them in a fixed order, so the figure
//!   does not depend on the scheduling; on the CPU per-row sums added in
//!   row order.
//! - **Backward**: one pass writes `g · (σ(z + c) − 1_ones)`, the only
//!   `r × v` tensor it builds; its column sums are the bias's gradient, and
//!   candle's product backward takes it to `codes` and `w`.
//!
//! Against candle's composition ([`super::nn::decoder_bce_sum_unfused`]: bias
//! added, softplus, gather, sum and their backward ops), which builds about
//! seven `r × v` tensors per reconstruction, this builds two: the product
//! and its gradient.
//!
//! A position outside `r × v` is an error on the CPU; on the GPU, where
//! checking it would stop the stream, it makes the sum NaN, which the
//! trainers refuse as a failure.

use candle_core::{CpuStorage, CustomOp3, DType, Layout, Shape, Tensor};

use crate::models::kit::rows::offsets;
use crate::Result;

/// `Σ softplus(z + c) − Σ_ones (z + c)` (a scalar of `z`'s dtype, f32 or
/// f64), `z` `r × v`, `c` `v`, `ones` flat `u32` positions in `r × v`.
pub fn bias_bce_sum(z: &Tensor, c: &Tensor, ones: &Tensor) -> Result<Tensor> {
    if !matches!(z.dtype(), DType::F32 | DType::F64) || c.dtype() != z.dtype() {
        return Err(crate::Error::Invalid(format!(
            "decoder loss: f32 or f64 logits and bias of one dtype expected, got {:?} and {:?}",
            z.dtype(),
            c.dtype()
        )));
    }
    Ok(z.contiguous()?
        .apply_op3(&c.contiguous()?, &ones.contiguous()?, BiasBceSum)?)
}

/// The loss (forward) and, as its backward, [`BiasBceGrad`].
struct BiasBceSum;

/// `g · (σ(z + c) − 1_ones)`, `r × v`.
struct BiasBceGrad {
    g: f64,
}

/// `(r, v)` of `z` `r × v` and `c` `v`.
fn dims(lz: &Layout, lc: &Layout) -> candle_core::Result<(usize, usize)> {
    let (&[r, v], &[v2]) = (lz.dims(), lc.dims()) else {
        candle_core::bail!(
            "decoder loss: logits r × v and bias v expected, got {:?} and {:?}",
            lz.dims(),
            lc.dims()
        )
    };
    if v != v2 {
        candle_core::bail!(
            "decoder loss: logits {:?} and bias {:?} do not fit",
            lz.dims(),
            lc.dims()
        );
    }
    Ok((r, v))
}

/// `z`'s and `c`'s f64 values, the checked positions and `v` (CPU).
type Host = (Vec<f64>, Vec<f64>, Vec<usize>, usize);

/// The f64 values of `z` and `c`, the checked positions, and `v`, on the
/// CPU.
fn host(
    s1: &CpuStorage,
    l1: &Layout,
    s2: &CpuStorage,
    l2: &Layout,
    s3: &CpuStorage,
    l3: &Layout,
) -> candle_core::Result<Host> {
    let (_, v) = dims(l1, l2)?;
    let z = crate::models::kit::rows::host_f64(s1, l1, "decoder loss")?;
    let c = crate::models::kit::rows::host_f64(s2, l2, "decoder loss")?;
    let (a, b) = offsets(l3, "decoder loss")?;
    let CpuStorage::U32(p) = s3 else {
        candle_core::bail!("decoder loss: u32 positions expected")
    };
    let n = z.len();
    let ones = p[a..b]
        .iter()
        .map(|&i| {
            let i = i as usize;
            if i < n {
                Ok(i)
            } else {
                Err(candle_core::Error::Msg(format!(
                    "decoder loss: position {i} outside the {n} logits"
                )))
            }
        })
        .collect::<candle_core::Result<Vec<_>>>()?;
    Ok((z, c, ones, v))
}

fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

impl CustomOp3 for BiasBceSum {
    fn name(&self) -> &'static str {
        "rosetta-bias-bce-sum"
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
        use rayon::prelude::*;
        let (z, c, ones, v) = host(s1, l1, s2, l2, s3, l3)?;
        let rows: Vec<f64> = z
            .par_chunks(v.max(1))
            .map(|row| row.iter().zip(&c).map(|(&z, &c)| softplus(z + c)).sum())
            .collect();
        let hit: f64 = ones.iter().map(|&i| z[i] + c[i % v]).sum();
        let total = rows.iter().sum::<f64>() - hit;
        Ok((
            crate::models::kit::rows::like(s1, vec![total]),
            Shape::from(()),
        ))
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
        let (_, v) = dims(l1, l2)?;
        Ok((gpu::sum((s1, l1), (s2, l2), (s3, l3), v)?, Shape::from(())))
    }

    fn bwd(
        &self,
        z: &Tensor,
        c: &Tensor,
        ones: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = grad.to_dtype(DType::F64)?.to_scalar::<f64>()?;
        let dz = z.apply_op3_no_bwd(c, ones, &BiasBceGrad { g })?;
        let dc = dz.sum(0)?;
        Ok((Some(dz), Some(dc), None))
    }
}

impl CustomOp3 for BiasBceGrad {
    fn name(&self) -> &'static str {
        "rosetta-bias-bce-grad"
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
        let (z, c, ones, v) = host(s1, l1, s2, l2, s3, l3)?;
        let g = self.g;
        let mut out: Vec<f64> = z
            .iter()
            .enumerate()
            .map(|(i, &z)| g / (1.0 + (-(z + c[i % v])).exp()))
            .collect();
        for &i in &ones {
            out[i] -= g;
        }
        Ok((crate::models::kit::rows::like(s1, out), l1.shape().clone()))
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
        let (_, v) = dims(l1, l2)?;
        Ok((
            gpu::grad((s1, l1), (s2, l2), (s3, l3), v, self.g)?,
            l1.shape().clone(),
        ))
    }
}

/// Launching `kernels/bce.cu` (built into PTX by build.rs).
#[cfg(feature = "cuda")]
mod gpu {
    use candle_core::cuda_backend::cudarc::driver::{CudaView, LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
    use candle_core::{CudaStorage, Layout};

    use crate::models::kit::rows::gpu::launch_cfg;
    use crate::models::kit::rows::offsets;

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/bce.ptx"));
    const MODULE: &str = "rosetta_bce";
    /// The reducing kernels' block: their shared arrays hold this many.
    const THREADS: u32 = 256;
    /// At most this many partial sums (grid-stride loops cover the rest).
    const MAX_BLOCKS: usize = 1024;

    fn cfg(blocks: u32) -> LaunchConfig {
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    type Arg<'a> = (&'a CudaStorage, &'a Layout);

    /// What both kernels read: the device, `z`'s and `c`'s value ranges,
    /// the positions, and the counts of logits and positions.
    struct Call<'a> {
        dev: candle_core::cuda_backend::CudaDevice,
        z: std::ops::Range<usize>,
        c: std::ops::Range<usize>,
        ones: CudaView<'a, u32>,
        n: usize,
        n_ones: usize,
    }

    fn call<'a>(z: Arg<'a>, c: Arg<'a>, ones: Arg<'a>) -> candle_core::Result<Call<'a>> {
        let (za, zb) = offsets(z.1, "decoder loss")?;
        let (ca, cb) = offsets(c.1, "decoder loss")?;
        let (oa, ob) = offsets(ones.1, "decoder loss")?;
        Ok(Call {
            dev: z.0.device.clone(),
            z: za..zb,
            c: ca..cb,
            ones: ones.0.as_cuda_slice::<u32>()?.slice(oa..ob),
            n: zb - za,
            n_ones: ob - oa,
        })
    }

    /// The scalar loss: per-block partial sums, then their total.
    pub fn sum(z: Arg, c: Arg, ones: Arg, v: usize) -> candle_core::Result<CudaStorage> {
        let Call {
            dev,
            z: zr,
            c: cr,
            ones: ov,
            n,
            n_ones,
        } = call(z, c, ones)?;
        let blocks = n
            .max(n_ones)
            .div_ceil(THREADS as usize)
            .clamp(1, MAX_BLOCKS);
        let mut partial = dev.alloc_zeros::<f64>(blocks)?;
        let (n64, v64, m64, b64) = (n as u64, v as u64, n_ones as u64, blocks as u64);
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let zv = z.0.as_cuda_slice::<$t>()?.slice(zr.clone());
                let cv = c.0.as_cuda_slice::<$t>()?.slice(cr.clone());
                let mut out = dev.alloc_zeros::<$t>(1)?;
                let f =
                    dev.get_or_load_custom_func(concat!("bias_bce_partial_", $s), MODULE, PTX)?;
                let mut bld = f.builder();
                bld.arg(&zv);
                bld.arg(&cv);
                bld.arg(&ov);
                bld.arg(&n64);
                bld.arg(&v64);
                bld.arg(&m64);
                bld.arg(&mut partial);
                // SAFETY: z holds n values and c v (n = r·v); positions at or
                // past n are not read (they make the sum NaN); partial holds
                // one value per block.
                unsafe { bld.launch(cfg(blocks as u32)) }.w()?;
                let f = dev.get_or_load_custom_func(concat!("bias_bce_total_", $s), MODULE, PTX)?;
                let mut bld = f.builder();
                bld.arg(&partial);
                bld.arg(&b64);
                bld.arg(&mut out);
                // SAFETY: one block reads the `blocks` partial sums, writes out[0].
                unsafe { bld.launch(cfg(1)) }.w()?;
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &z.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::F64(_) => run!(f64, "f64"),
            _ => candle_core::bail!("decoder loss: f32 or f64 logits expected"),
        })
    }

    /// `g · (σ(z + c) − 1_ones)` into a new storage the size of `z`.
    pub fn grad(z: Arg, c: Arg, ones: Arg, v: usize, g: f64) -> candle_core::Result<CudaStorage> {
        let Call {
            dev,
            z: zr,
            c: cr,
            ones: ov,
            n,
            n_ones,
        } = call(z, c, ones)?;
        let (n64, v64, m64) = (n as u64, v as u64, n_ones as u64);
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let zv = z.0.as_cuda_slice::<$t>()?.slice(zr.clone());
                let cv = c.0.as_cuda_slice::<$t>()?.slice(cr.clone());
                let gt = g as $t;
                let mut out = dev.alloc_zeros::<$t>(n)?;
                if n > 0 {
                    let f =
                        dev.get_or_load_custom_func(concat!("bias_bce_grad_", $s), MODULE, PTX)?;
                    let mut bld = f.builder();
                    bld.arg(&zv);
                    bld.arg(&cv);
                    bld.arg(&n64);
                    bld.arg(&v64);
                    bld.arg(&gt);
                    bld.arg(&mut out);
                    // SAFETY: z and out hold n values, c v.
                    unsafe { bld.launch(launch_cfg(n)) }.w()?;
                }
                if n_ones > 0 {
                    let f = dev.get_or_load_custom_func(
                        concat!("bias_bce_grad_ones_", $s),
                        MODULE,
                        PTX,
                    )?;
                    let mut bld = f.builder();
                    bld.arg(&ov);
                    bld.arg(&n64);
                    bld.arg(&m64);
                    bld.arg(&gt);
                    bld.arg(&mut out);
                    // SAFETY: positions at or past n are skipped (the
                    // forward's sum is NaN for them).
                    unsafe { bld.launch(launch_cfg(n_ones)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &z.0.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::F64(_) => run!(f64, "f64"),
            _ => candle_core::bail!("decoder loss: f32 or f64 logits expected"),
        })
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor, Var};

    /// Logits, bias and positions of a small decoder (`r × v`), with one
    /// repeated row so a column's gradient sums several rows.
    fn case(dev: &Device, dt: DType) -> (Var, Var, Var, Tensor) {
        let (r, k, v) = (3usize, 4usize, 7usize);
        let vals = |n: usize, s: f64| -> Vec<f64> {
            (0..n).map(|i| ((i as f64 + 1.0) * s).sin() * 2.5).collect()
        };
        let t = |x: Vec<f64>, d: &[usize]| {
            Var::from_tensor(&Tensor::from_vec(x, d, dev).unwrap().to_dtype(dt).unwrap()).unwrap()
        };
        let ones = Tensor::new(&[0u32, 3, 8, 13, 14, 20], dev).unwrap();
        (
            t(vals(r * k, 0.7), &[r, k]),
            t(vals(v * k, 1.3), &[v, k]),
            t(vals(v, 2.9), &[v]),
            ones,
        )
    }

    fn host(t: &Tensor) -> Vec<f64> {
        t.to_dtype(DType::F64)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap()
    }

    /// The loss and its gradients for codes, decoder and bias, through this
    /// op (`fused`) or candle's composition.
    fn run(dev: &Device, dt: DType, fused: bool) -> Vec<Vec<f64>> {
        let (codes, w, c, ones) = case(dev, dt);
        let loss = if fused {
            let z = codes
                .as_tensor()
                .matmul(&w.as_tensor().t().unwrap())
                .unwrap();
            super::bias_bce_sum(&z, c.as_tensor(), &ones).unwrap()
        } else {
            crate::models::kit::nn::decoder_bce_sum_unfused(
                codes.as_tensor(),
                w.as_tensor(),
                c.as_tensor(),
                &ones,
            )
            .unwrap()
        };
        let grads = (&loss * 0.37).unwrap().backward().unwrap();
        let mut out = vec![host(&loss)];
        for x in [&codes, &w, &c] {
            out.push(host(grads.get(x.as_tensor()).unwrap()));
        }
        out
    }

    fn assert_close(a: &[Vec<f64>], b: &[Vec<f64>], tol: f64) {
        for (part, (a, b)) in a.iter().zip(b).enumerate() {
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x - y).abs() <= tol * (1.0 + y.abs()),
                    "part {part}: {x} vs {y}"
                );
            }
        }
    }

    /// The op's loss and its gradients for codes, decoder and bias agree
    /// with candle's composition (f64 to 1e-12, f32 to 1e-5).
    #[test]
    fn the_bias_folded_loss_matches_candles_composition() {
        let dev = Device::Cpu;
        assert_close(
            &run(&dev, DType::F64, true),
            &run(&dev, DType::F64, false),
            1e-12,
        );
        assert_close(
            &run(&dev, DType::F32, true),
            &run(&dev, DType::F32, false),
            1e-5,
        );
    }

    /// A position outside the logits is an error, and so is a bias that
    /// does not fit or a dtype the op has no kernel for.
    #[test]
    fn a_position_outside_the_logits_is_refused() {
        let dev = Device::Cpu;
        let z = Tensor::zeros((2, 3), DType::F64, &dev).unwrap();
        let c = Tensor::zeros(3, DType::F64, &dev).unwrap();
        let inside = Tensor::new(&[5u32], &dev).unwrap();
        let v = super::bias_bce_sum(&z, &c, &inside).unwrap();
        // six logits at 0: 6·ln 2, less the one hit's 0
        assert!((v.to_scalar::<f64>().unwrap() - 6.0 * 2f64.ln()).abs() < 1e-12);
        let outside = Tensor::new(&[6u32], &dev).unwrap();
        let e = super::bias_bce_sum(&z, &c, &outside)
            .unwrap_err()
            .to_string();
        assert!(e.contains("position 6 outside the 6 logits"), "{e}");
        let c4 = Tensor::zeros(4, DType::F64, &dev).unwrap();
        assert!(super::bias_bce_sum(&z, &c4, &inside).is_err());
        let zh = z.to_dtype(DType::F16).unwrap();
        let ch = c.to_dtype(DType::F16).unwrap();
        assert!(super::bias_bce_sum(&zh, &ch, &inside).is_err());
    }

    /// On a GPU (CUDA build, run where one is present): the kernels' loss
    /// and gradients agree with the CPU's, in f32 and f64.
    #[cfg(feature = "cuda")]
    #[test]
    fn the_gpu_kernels_match_the_cpu() {
        // where no GPU opens the test has nothing to check, unless
        // ROSETTA_REQUIRE_GPU=1 (scripts/gpu/gpu.sh) says one must
        let gpu = match Device::new_cuda(0) {
            Ok(d) => d,
            Err(e) if std::env::var("ROSETTA_REQUIRE_GPU").as_deref() != Ok("1") => {
                eprintln!("no GPU ({e}): the CUDA kernels were not run");
                return;
            }
            Err(e) => panic!("ROSETTA_REQUIRE_GPU=1 but no GPU opens: {e}"),
        };
        for (dt, tol) in [(DType::F64, 1e-10), (DType::F32, 1e-5)] {
            assert_close(&run(&gpu, dt, true), &run(&Device::Cpu, dt, true), tol);
        }
    }
}
