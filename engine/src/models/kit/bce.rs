//! The fused CPU kernel behind [`super::nn::decoder_bce_sum`]: a sigmoid
//! decoder's logits `z = codes · wᵀ + c` and their binary cross-entropy
//! against sparse 0/1 targets in one op. Forward: one product into a
//! buffer, then one pass that sums `softplus(z)` and leaves `σ(z) − 1_ones`
//! (the gradient of the sum with respect to `z`) in the same buffer.
//! The same pass sums the sigmoids per column, so the bias's gradient needs no
//! other pass. Backward: two products read the buffer; no other
//! `rows × vocab` tensor is built. The products are faer's: at these shapes
//! its kernels beat gemm's on the backward products (the ignored
//! `gemm_shapes` test times both). The pass has its own `exp`, one division
//! for the sigmoid, and one `ln` per 32 values (of lane products of
//! `1 + e^{−|z|}`), written so that LLVM vectorises it; under AVX2 + FMA
//! (chosen at run time) its polynomial uses fused multiply-adds, so the last
//! bits differ from the generic build's.

use std::sync::OnceLock;

use candle_core::{CpuStorage, CustomOp3, Device, Layout, Shape, Storage, Tensor};
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef};

use crate::Result;

/// The op: `ones` are flat positions (`row · vocab + term`) of the 1 targets.
pub(crate) struct DecoderBce {
    ones: Vec<u32>,
    /// `σ(z) − 1_ones`, `rows × vocab`, set by the forward pass.
    grad: OnceLock<Vec<f32>>,
    /// Its column sums (the bias's gradient), `vocab`, set with it.
    col_sums: OnceLock<Vec<f32>>,
}

/// `Σ softplus(codes · wᵀ + c) − Σ_ones (codes · wᵀ + c)` through the fused
/// op: `codes` `r × k`, `w` `v × k`, `c` `v`, all f32 on the CPU.
pub(crate) fn decoder_bce_sum(
    codes: &Tensor,
    w: &Tensor,
    c: &Tensor,
    ones: Vec<u32>,
) -> Result<Tensor> {
    let op = DecoderBce {
        ones,
        grad: OnceLock::new(),
        col_sums: OnceLock::new(),
    };
    Ok(codes
        .contiguous()?
        .apply_op3(&w.contiguous()?, &c.contiguous()?, op)?)
}

fn f32s<'a>(s: &'a CpuStorage, l: &Layout) -> candle_core::Result<&'a [f32]> {
    let (a, b) = crate::models::kit::rows::offsets(l, "decoder-bce")?;
    match s {
        CpuStorage::F32(v) => Ok(&v[a..b]),
        _ => candle_core::bail!("decoder-bce: f32 values expected"),
    }
}

/// `(r, k, v)` of codes `r × k`, decoder `v × k`, bias `v`.
fn dims(l1: &Layout, l2: &Layout, l3: &Layout) -> candle_core::Result<(usize, usize, usize)> {
    let (&[r, k], &[v, k2], &[v2]) = (l1.dims(), l2.dims(), l3.dims()) else {
        candle_core::bail!(
            "decoder-bce: codes r × k, decoder v × k and bias v expected, got {:?}, {:?}, {:?}",
            l1.dims(),
            l2.dims(),
            l3.dims()
        )
    };
    if k != k2 || v != v2 {
        candle_core::bail!(
            "decoder-bce: shapes {:?}, {:?}, {:?} do not fit",
            l1.dims(),
            l2.dims(),
            l3.dims()
        );
    }
    Ok((r, k, v))
}

/// faer's parallelism: the current rayon pool's threads.
fn par() -> faer::Par {
    match rayon::current_num_threads() {
        0 | 1 => faer::Par::Seq,
        n => faer::Par::rayon(n),
    }
}

impl CustomOp3 for DecoderBce {
    fn name(&self) -> &'static str {
        "rosetta-decoder-bce"
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
        let (r, k, v) = dims(l1, l2, l3)?;
        let (codes, w, c) = (f32s(s1, l1)?, f32s(s2, l2)?, f32s(s3, l3)?);
        let n = r * v;
        if let Some(&p) = self.ones.iter().find(|&&p| p as usize >= n) {
            candle_core::bail!("decoder-bce: position {p} of {n}");
        }
        let mut z = take_buffer(n);
        {
            let (cm, wm) = (
                MatRef::from_row_major_slice(codes, r, k),
                MatRef::from_row_major_slice(w, v, k),
            );
            let zm = MatMut::from_row_major_slice_mut(&mut z, r, v);
            matmul(zm, Accum::Replace, cm, wm.transpose(), 1.0, par());
        }
        let hit: f64 = self
            .ones
            .iter()
            .map(|&p| (z[p as usize] + c[p as usize % v]) as f64)
            .sum();
        // the softplus sum, and the sigmoids' column sums beside it: each
        // fixed group of rows its own sums, added in group order, so the
        // result does not depend on how rayon splits the work (a resumed
        // run must repeat the original to the bit)
        const GROUP: usize = 32;
        let mut col = vec![0f32; v];
        let mut sp = 0f64;
        if v > 0 {
            let parts: Vec<(f64, Vec<f32>)> = z
                .par_chunks_mut(v * GROUP)
                .map(|rows| {
                    let mut part = vec![0f32; v];
                    let sum = rows
                        .chunks_mut(v)
                        .map(|row| row_pass(row, c, &mut part))
                        .sum();
                    (sum, part)
                })
                .collect();
            for (sum, part) in parts {
                sp += sum;
                col.iter_mut().zip(&part).for_each(|(a, b)| *a += b);
            }
        }
        for &p in &self.ones {
            z[p as usize] -= 1.0;
            col[p as usize % v] -= 1.0;
        }
        // set once: a second forward through the same op value cannot happen
        let _ = self.grad.set(z);
        let _ = self.col_sums.set(col);
        Ok((CpuStorage::F32(vec![(sp - hit) as f32]), Shape::from(())))
    }

    fn bwd(
        &self,
        codes: &Tensor,
        w: &Tensor,
        _c: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = grad.to_dtype(candle_core::DType::F32)?.to_scalar::<f32>()?;
        let (Some(gz), Some(col)) = (self.grad.get(), self.col_sums.get()) else {
            candle_core::bail!("decoder-bce: backward before forward")
        };
        let (sc, lc) = codes.storage_and_layout();
        let (sw, lw) = w.storage_and_layout();
        let (Storage::Cpu(sc), Storage::Cpu(sw)) = (&*sc, &*sw) else {
            candle_core::bail!("decoder-bce: CPU tensors expected")
        };
        let (cv, wv) = (f32s(sc, lc)?, f32s(sw, lw)?);
        let ((r, k), (v, _)) = (codes.dims2()?, w.dims2()?);
        let mut d_codes = vec![0f32; r * k];
        let mut d_w = vec![0f32; v * k];
        {
            let gm = MatRef::from_row_major_slice(gz, r, v);
            let wm = MatRef::from_row_major_slice(wv, v, k);
            let cm = MatRef::from_row_major_slice(cv, r, k);
            let dcm = MatMut::from_row_major_slice_mut(&mut d_codes, r, k);
            matmul(dcm, Accum::Replace, gm, wm, g, par());
            let dwm = MatMut::from_row_major_slice_mut(&mut d_w, v, k);
            matmul(dwm, Accum::Replace, gm.transpose(), cm, g, par());
        }
        let d_c: Vec<f32> = col.iter().map(|&s| s * g).collect();
        let dev = Device::Cpu;
        Ok((
            Some(Tensor::from_vec(d_codes, (r, k), &dev)?),
            Some(Tensor::from_vec(d_w, (v, k), &dev)?),
            Some(Tensor::from_vec(d_c, v, &dev)?),
        ))
    }
}

/// Gradient buffers of ops dropped, kept for the next forward pass: the
/// allocator would hand a block this large back to the system and page it
/// in (zeroed) again each step.
static POOL: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());
const POOL_MAX: usize = 4;

/// A buffer of `n` values (contents unspecified: the forward product
/// overwrites them all).
fn take_buffer(n: usize) -> Vec<f32> {
    let reused = POOL.lock().ok().and_then(|mut p| {
        let i = p.iter().position(|b| b.capacity() >= n)?;
        Some(p.swap_remove(i))
    });
    match reused {
        Some(mut b) => {
            b.resize(n, 0.0);
            b
        }
        None => vec![0f32; n],
    }
}

impl Drop for DecoderBce {
    fn drop(&mut self) {
        if let (Some(b), Ok(mut p)) = (self.grad.take(), POOL.lock()) {
            if p.len() >= POOL_MAX {
                p.remove(0);
            }
            p.push(b);
        }
    }
}

/// `a·b + c`, one fused instruction where `FMA` says the function is
/// compiled for a CPU that has it, a multiply and an add elsewhere (the
/// fallback must not call the library's slow software `fmaf`).
#[inline(always)]
fn fmadd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `e^x` for `x ≤ 0` (clamped at −87, where it is below 2⁻¹²⁵): Cephes'
/// `expf` reduction and polynomial, the power of two built from bits.
#[inline(always)]
fn exp_nonpos<const FMA: bool>(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 · 2^23: adding it rounds to an integer
    let x = x.max(-87.0);
    let kf = fmadd::<FMA>(x, std::f32::consts::LOG2_E, MAGIC);
    let n = kf - MAGIC;
    let ni = kf.to_bits() as i32 - MAGIC.to_bits() as i32;
    let r = fmadd::<FMA>(n, 2.121_944_4e-4, fmadd::<FMA>(n, -0.693_359_4, x));
    let mut p = 1.987_569_1e-4;
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        p = fmadd::<FMA>(p, r, c);
    }
    let p = fmadd::<FMA>(p, r * r, r + 1.0);
    p * f32::from_bits(((ni + 127) as u32) << 23)
}

/// `(σ(x), 1 + e^{−|x|})`: the sigmoid and the factor whose logarithm is
/// `softplus(x) − max(x, 0)`, from one exponential and one division.
#[inline(always)]
fn sigmoid_factor<const FMA: bool>(x: f32) -> (f32, f32) {
    let t = exp_nonpos::<FMA>(-x.abs());
    let f = 1.0 + t;
    let q = 1.0 / f;
    (if x >= 0.0 { q } else { t * q }, f)
}

/// Values of a row per block of the pass, and the lanes its sums use: each
/// lane multiplies `B / L = 32` factors in `(1, 2]`, a product below 2³².
const BLOCK: usize = 256;
const LANES: usize = 8;

/// One row: `z ← σ(z + c)` (added to `col` too), returning `Σ softplus(z + c)`. With
/// `softplus(x) = max(x, 0) + ln(1 + e^{−|x|})`, the logarithms are taken
/// of per-lane products of 32 factors (one `ln` per 32 values; the
/// product's rounding, under 2⁻¹⁹ relative, bounds the error of the 32
/// terms' sum by 2·10⁻⁶); the maxima are summed in f32 lanes per block, and
/// the blocks in f64. The sigmoids, the gradient, are computed value by
/// value.
#[inline(always)]
fn row_pass_body<const FMA: bool>(z: &mut [f32], c: &[f32], col: &mut [f32]) -> f64 {
    let mut factors = [1f32; BLOCK];
    let mut pos = [0f32; BLOCK];
    let mut total = 0f64;
    let blocks = z.chunks_mut(BLOCK).zip(c.chunks(BLOCK));
    for ((zb, cb), sb) in blocks.zip(col.chunks_mut(BLOCK)) {
        // a loop without a carried value, which LLVM vectorises
        for (((z, &c), s), (f, p)) in zb
            .iter_mut()
            .zip(cb)
            .zip(sb.iter_mut())
            .zip(factors.iter_mut().zip(pos.iter_mut()))
        {
            let x = *z + c;
            let (sig, fac) = sigmoid_factor::<FMA>(x);
            *z = sig;
            *s += sig;
            *f = fac;
            *p = x.max(0.0);
        }
        // a short last block: neutral factors and terms past its end
        factors[zb.len()..].fill(1.0);
        pos[zb.len()..].fill(0.0);
        let (mut prod, mut sum) = ([1f32; LANES], [0f32; LANES]);
        for (fc, pc) in factors.chunks_exact(LANES).zip(pos.chunks_exact(LANES)) {
            for l in 0..LANES {
                prod[l] *= fc[l];
                sum[l] += pc[l];
            }
        }
        total += prod.iter().map(|&p| (p as f64).ln()).sum::<f64>()
            + sum.iter().map(|&s| s as f64).sum::<f64>();
    }
    total
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_pass_avx2(z: &mut [f32], c: &[f32], col: &mut [f32]) -> f64 {
    row_pass_body::<true>(z, c, col)
}

/// [`row_pass_body`], vectorised for AVX2 + FMA where the CPU has them.
fn row_pass(z: &mut [f32], c: &[f32], col: &mut [f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has the features the function is compiled for.
        return unsafe { row_pass_avx2(z, c, col) };
    }
    row_pass_body::<false>(z, c, col)
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor, Var};
    use rand::{Rng, SeedableRng};

    /// The sigmoid against f64 arithmetic over the range of logits, and a
    /// row's softplus sum (ragged last block, extreme logits) against f64
    /// sums, with and without fused multiply-adds.
    #[test]
    fn row_pass_is_accurate() {
        let mut worst = 0f64;
        for i in -200_000..=200_000 {
            let z = i as f32 * 5e-4;
            for z in [z, z * 200.0] {
                for (sig, _) in [
                    super::sigmoid_factor::<false>(z),
                    super::sigmoid_factor::<true>(z),
                ] {
                    let sig0 = 1.0 / (1.0 + (-(z as f64)).exp());
                    if sig0 > 1e-37 {
                        worst = worst.max((sig as f64 - sig0).abs() / sig0);
                    }
                }
            }
        }
        assert!(worst < 1e-6, "sigmoid's relative error {worst}");
        let sp = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        for n in [1usize, 7, 255, 256, 257, 1000, 10_007] {
            let z: Vec<f32> = (0..n)
                .map(|i| match i % 11 {
                    0 => -1000.0,
                    1 => 1000.0,
                    2 => 0.0,
                    _ => ((i as f32) * 0.618).sin() * 12.0 - 4.0,
                })
                .collect();
            let c: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.3).cos() * 0.5).collect();
            let want: f64 = z.iter().zip(&c).map(|(&z, &c)| sp((z + c) as f64)).sum();
            for fma in [false, true] {
                let mut row = z.clone();
                // the column sums add to what is there
                let mut col = vec![0.5f32; n];
                let got = if fma {
                    super::row_pass_body::<true>(&mut row, &c, &mut col)
                } else {
                    super::row_pass_body::<false>(&mut row, &c, &mut col)
                };
                for (s, a) in row.iter().zip(&col) {
                    assert_eq!(*a, 0.5 + s, "column sum");
                }
                assert!(
                    (got - want).abs() <= 1e-6 * want + 1e-6 * n as f64,
                    "n {n}, fma {fma}: {got} against {want}"
                );
                for ((&s, &z), &c) in row.iter().zip(&z).zip(&c) {
                    let s0 = sig((z + c) as f64);
                    assert!((s as f64 - s0).abs() <= 1e-6 * s0 + 1e-30, "σ({z} + {c})");
                }
            }
        }
    }

    /// Value and gradients of the fused op against candle's unfused ops in
    /// f64 on the same values (a vocabulary with a ragged last block of 8).
    #[test]
    fn fused_decoder_bce_matches_candle() {
        let dev = Device::Cpu;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let (r, k, v) = (9, 6, 45);
        let mut vals =
            |n: usize, s: f32| -> Vec<f32> { (0..n).map(|_| rng.random_range(-s..s)).collect() };
        let (cd, wd, bd) = (vals(r * k, 1.0), vals(v * k, 3.0), vals(v, 2.0));
        let ones: Vec<u32> = (0..(r * v) as u32)
            .filter(|p| p % 7 == 3 || p % 11 == 0)
            .collect();
        let var = |x: &[f32], shape: &[usize], dt: DType| {
            Var::from_tensor(
                &Tensor::from_vec(x.to_vec(), shape, &dev)
                    .unwrap()
                    .to_dtype(dt)
                    .unwrap(),
            )
            .unwrap()
        };
        let run = |dt: DType, fused: bool| {
            let (c, w, b) = (
                var(&cd, &[r, k], dt),
                var(&wd, &[v, k], dt),
                var(&bd, &[v], dt),
            );
            let ones_t = Tensor::from_vec(ones.clone(), ones.len(), &dev).unwrap();
            let loss = if fused {
                super::decoder_bce_sum(c.as_tensor(), w.as_tensor(), b.as_tensor(), ones.clone())
                    .unwrap()
            } else {
                crate::models::kit::nn::decoder_bce_sum_unfused(
                    c.as_tensor(),
                    w.as_tensor(),
                    b.as_tensor(),
                    &ones_t,
                )
                .unwrap()
            };
            let grads = (&loss * 0.37).unwrap().backward().unwrap();
            let flat = |t: &Tensor| -> Vec<f64> {
                t.to_dtype(DType::F64)
                    .unwrap()
                    .flatten_all()
                    .unwrap()
                    .to_vec1()
                    .unwrap()
            };
            let mut out = vec![flat(&loss)];
            for x in [&c, &w, &b] {
                out.push(flat(grads.get(x.as_tensor()).expect("a gradient")));
            }
            out
        };
        let (fused, plain) = (run(DType::F32, true), run(DType::F64, false));
        for (what, (a, b)) in ["loss", "codes", "decoder", "bias"]
            .iter()
            .zip(fused.iter().zip(&plain))
        {
            assert_eq!(a.len(), b.len(), "{what}");
            let scale = b.iter().fold(1f64, |m, x| m.max(x.abs()));
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= 2e-5 * scale, "{what}: {x} vs {y}");
            }
        }
        // the unfused ops in f32 agree as well (the path CUDA takes)
        let plain32 = run(DType::F32, false);
        assert!((plain32[0][0] - plain[0][0]).abs() < 1e-4 * plain[0][0].abs());
    }

    /// Timings of the three products at BAE's shapes, `gemm` against `faer`,
    /// and of the element pass; the candidates run interleaved, 40 rounds,
    /// and the medians are printed, since this machine's speed drifts
    /// (`cargo test --release --lib gemm_shapes -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn gemm_shapes() {
        use faer::{Accum, MatMut, MatRef};
        /// `dst (m × n) = lhs · rhs` by gemm, each operand given by its
        /// pointer, column stride and row stride.
        unsafe fn gemm_product(
            (m, n, k): (usize, usize, usize),
            dst: &mut [f32],
            lhs: (&[f32], isize, isize),
            rhs: (&[f32], isize, isize),
        ) {
            let par = gemm::Parallelism::Rayon(rayon::current_num_threads());
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                1,
                n as isize,
                false,
                lhs.0.as_ptr(),
                lhs.1,
                lhs.2,
                rhs.0.as_ptr(),
                rhs.1,
                rhs.2,
                0.0,
                1.0,
                false,
                false,
                false,
                par,
            )
        }
        let (r, k, v) = (300usize, 128usize, 10_000usize);
        let codes: Vec<f32> = (0..r * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let w: Vec<f32> = (0..v * k).map(|i| (i % 5) as f32 * 0.1).collect();
        let gz: Vec<f32> = (0..r * v).map(|i| (i % 3) as f32 * 0.1).collect();
        let (mut z, mut dc, mut dw) = (vec![0f32; r * v], vec![0f32; r * k], vec![0f32; v * k]);
        let (mut dc2, mut dw2) = (dc.clone(), dw.clone());
        let (ki, vi) = (k as isize, v as isize);
        let par = super::par();
        let cm = MatRef::from_row_major_slice(&codes, r, k);
        let wm = MatRef::from_row_major_slice(&w, v, k);
        let gm = MatRef::from_row_major_slice(&gz, r, v);
        let c = vec![0.1f32; v];
        let mut zz = z.clone();
        type Case<'a> = (&'a str, Box<dyn FnMut() + 'a>);
        let mut cases: Vec<Case> = vec![
            (
                "gemm fwd z = c wT",
                Box::new(|| unsafe {
                    gemm_product((r, v, k), &mut z, (&codes, 1, ki), (&w, ki, 1))
                }),
            ),
            (
                "faer fwd",
                Box::new(|| {
                    let zm = MatMut::from_row_major_slice_mut(&mut zz, r, v);
                    faer::linalg::matmul::matmul(
                        zm,
                        Accum::Replace,
                        cm,
                        wm.transpose(),
                        1.0f32,
                        par,
                    )
                }),
            ),
            (
                "gemm dc = gz w",
                Box::new(|| unsafe { gemm_product((r, k, v), &mut dc, (&gz, 1, vi), (&w, 1, ki)) }),
            ),
            (
                "faer dc",
                Box::new(|| {
                    let m = MatMut::from_row_major_slice_mut(&mut dc2, r, k);
                    faer::linalg::matmul::matmul(m, Accum::Replace, gm, wm, 1.0f32, par)
                }),
            ),
            (
                "gemm dw = gzT c",
                Box::new(|| unsafe {
                    gemm_product((v, k, r), &mut dw, (&gz, vi, 1), (&codes, 1, ki))
                }),
            ),
            (
                "faer dw",
                Box::new(|| {
                    let m = MatMut::from_row_major_slice_mut(&mut dw2, v, k);
                    faer::linalg::matmul::matmul(m, Accum::Replace, gm.transpose(), cm, 1.0f32, par)
                }),
            ),
        ];
        let mut times = vec![Vec::new(); cases.len()];
        for round in 0..41 {
            for (i, (_, f)) in cases.iter_mut().enumerate() {
                let t = std::time::Instant::now();
                f();
                if round > 0 {
                    times[i].push(t.elapsed().as_secs_f64());
                }
            }
        }
        for ((name, _), t) in cases.iter().zip(&mut times) {
            t.sort_by(f64::total_cmp);
            let s = t[t.len() / 2];
            let gf = 2.0 * (r * k * v) as f64 / s / 1e9;
            println!("{name}: median {:.2} ms, {gf:.1} GFLOP/s", s * 1e3);
        }
        let src: Vec<f32> = (0..r * v).map(|i| ((i % 97) as f32 - 48.0) * 0.2).collect();
        let mut row_times = Vec::new();
        for _ in 0..20 {
            let mut zz = src.clone();
            let t = std::time::Instant::now();
            let mut col = vec![0f32; v];
            for row in zz.chunks_mut(v) {
                std::hint::black_box(super::row_pass(row, &c, &mut col));
            }
            row_times.push(t.elapsed().as_secs_f64());
        }
        row_times.sort_by(f64::total_cmp);
        println!(
            "element pass, one thread: median {:.2} ms ({:.2} ns a value)",
            row_times[10] * 1e3,
            row_times[10] * 1e9 / (r * v) as f64
        );
    }

    /// Central finite differences of the fused value against its gradient.
    #[test]
    fn fused_decoder_bce_gradient_is_the_derivative() {
        let dev = Device::Cpu;
        let (r, k, v) = (4, 3, 19);
        let cd: Vec<f32> = (0..r * k).map(|i| ((i as f32) * 0.77).sin()).collect();
        let wd: Vec<f32> = (0..v * k)
            .map(|i| ((i as f32) * 1.31).cos() * 2.0)
            .collect();
        let bd: Vec<f32> = (0..v).map(|i| ((i as f32) * 0.4).sin()).collect();
        let ones: Vec<u32> = vec![0, 5, 20, 40, 41, 75];
        let value = |c: &[f32], w: &[f32], b: &[f32]| -> f64 {
            let t = |x: &[f32], s: &[usize]| Tensor::from_vec(x.to_vec(), s, &dev).unwrap();
            super::decoder_bce_sum(&t(c, &[r, k]), &t(w, &[v, k]), &t(b, &[v]), ones.clone())
                .unwrap()
                .to_scalar::<f32>()
                .unwrap() as f64
        };
        let (c, w, b) = (
            Var::from_vec(cd.clone(), (r, k), &dev).unwrap(),
            Var::from_vec(wd.clone(), (v, k), &dev).unwrap(),
            Var::from_vec(bd.clone(), v, &dev).unwrap(),
        );
        let loss =
            super::decoder_bce_sum(c.as_tensor(), w.as_tensor(), b.as_tensor(), ones.clone())
                .unwrap();
        let grads = loss.backward().unwrap();
        let g = |x: &Var| -> Vec<f32> {
            grads
                .get(x.as_tensor())
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        let (gc, gw, gb) = (g(&c), g(&w), g(&b));
        let h = 1e-2f32;
        for which in 0..3 {
            let (base, grad) = match which {
                0 => (&cd, &gc),
                1 => (&wd, &gw),
                _ => (&bd, &gb),
            };
            for i in (0..base.len()).step_by(5) {
                let (mut up, mut down) = (base.clone(), base.clone());
                up[i] += h;
                down[i] -= h;
                let f = |x: &[f32]| match which {
                    0 => value(x, &wd, &bd),
                    1 => value(&cd, x, &bd),
                    _ => value(&cd, &wd, x),
                };
                let fd = (f(&up) - f(&down)) / (2.0 * h as f64);
                let an = grad[i] as f64;
                assert!(
                    (fd - an).abs() < 2e-3 * (1.0 + an.abs()),
                    "argument {which}, entry {i}: finite difference {fd} vs gradient {an}"
                );
            }
        }
        assert!(
            super::decoder_bce_sum(c.as_tensor(), w.as_tensor(), b.as_tensor(), vec![76]).is_err()
        );
    }
}
