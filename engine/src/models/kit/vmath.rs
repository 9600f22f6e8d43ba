//! Branch-free `f32` `exp` and `erf` for the CPU loops of the fused ops
//! (the erf GELU and its gradient), written so that a loop over a slice
//! vectorises, with AVX2 where the CPU has it ([`gelu`], [`gelu_grad`]).
//!
//! - `exp`: Cephes' `expf` (ln 2 split in two for the range reduction, a
//!   degree-6 polynomial; relative error about 2 ulp over [−87, 88], the
//!   argument clamped there), the rounding done by adding and subtracting
//!   1.5·2²³ rather than by a `floor` call.
//! - `erf`: Abramowitz & Stegun 7.1.26, absolute error at most 1.5·10⁻⁷
//!   (5·10⁻⁷ once computed in f32, measured by the tests):
//!   the approximation PyTorch's vectorised CPU `erf`
//!   (`Vectorized<float>::erf` in ATen) uses, so this GELU computes as the
//!   peer's does. The scalar `erf` it replaces (`libm`'s, branchy, one
//!   value at a time) was about a sixth of a CPU fine-tuning step
//!   (docs/results.md).
//!
//! A NaN argument gives NaN (the clamps are comparisons that keep it).

use std::f32::consts::{FRAC_1_SQRT_2, LOG2_E};

/// `e^x`, relative error about 2 ulp; `x` clamped to [−87, 88].
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const C1: f32 = 0.693_359_4; // ln 2, its high bits
    const C2: f32 = -2.121_944_4e-4; // ln 2 − C1
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23: x + ROUND − ROUND rounds x
    let x = if x < -87.0 { -87.0 } else { x };
    let x = if x > 88.0 { 88.0 } else { x };
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = x - n * C1 - n * C2;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5; // Cephes: 5.0000001e-1, the same f32
    let y = p * r * r + r + 1.0;
    // 2^n for n in −126..=127: a normal number's exponent bits
    y * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

/// `erf(x)`, absolute error below 6·10⁻⁷ (A&S 7.1.26 in f32).
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let r =
        (((1.061_405_4 * t - 1.453_152_1) * t + 1.421_413_8) * t - 0.284_496_74) * t + 0.254_829_6;
    let y = 1.0 - r * t * exp(-a * a);
    y.copysign(x)
}

#[inline(always)]
fn gelu_loop(out: &mut [f32], x: &[f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = 0.5 * v * (1.0 + erf(v * FRAC_1_SQRT_2));
    }
}

#[inline(always)]
fn gelu_grad_loop(out: &mut [f32], x: &[f32], g: &[f32]) {
    // 1/√(2π)
    const C: f32 = 0.398_942_3;
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(g) {
        let cdf = 0.5 * (1.0 + erf(v * FRAC_1_SQRT_2));
        let pdf = C * exp(-0.5 * v * v);
        *o = g * (cdf + v * pdf);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gelu_avx2(out: &mut [f32], x: &[f32]) {
    gelu_loop(out, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gelu_grad_avx2(out: &mut [f32], x: &[f32], g: &[f32]) {
    gelu_grad_loop(out, x, g)
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2")
}

/// `out[i] = x[i]·Φ(x[i])`, Φ the normal CDF (the erf GELU); the slices
/// have one length.
pub fn gelu(out: &mut [f32], x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { gelu_avx2(out, x) };
    }
    gelu_loop(out, x)
}

/// `out[i] = g[i]·(Φ(x[i]) + x[i]·φ(x[i]))`: the erf GELU's gradient
/// times `g`.
pub fn gelu_grad(out: &mut [f32], x: &[f32], g: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { gelu_grad_avx2(out, x, g) };
    }
    gelu_grad_loop(out, x, g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_erf_agree_with_the_exact_ones() {
        let mut worst = (0.0f64, 0.0f64);
        let mut x = -12.0f64;
        while x <= 12.0 {
            // against the exact erf of the f32 argument
            let want = candle_core::cpu::erf::erf_f64(x as f32 as f64);
            worst.0 = worst.0.max((erf(x as f32) as f64 - want).abs());
            if x.abs() < 10.0 {
                let e = (x * 8.0).exp();
                let got = exp((x * 8.0) as f32) as f64;
                // against the exact exp of the f32 argument
                let exact = ((x * 8.0) as f32 as f64).exp();
                worst.1 = worst.1.max(((got - exact) / exact).abs());
                assert!(e.is_finite());
            }
            x += 0.001;
        }
        // A&S's 1.5e-7, and f32's rounding of 1 − r·t·e^(−x²) near x = 0
        assert!(worst.0 < 6e-7, "erf: {}", worst.0);
        assert!(worst.1 < 4e-7, "exp: {}", worst.1);
        assert!(exp(f32::NAN).is_nan() && erf(f32::NAN).is_nan());
        assert_eq!(exp(-200.0), exp(-87.0));
        assert!(exp(200.0).is_finite());
        assert!(erf(0.0).abs() < 1e-7);
        assert_eq!(erf(-3.0), -erf(3.0));
    }

    #[test]
    fn the_gelu_loops_agree_with_the_exact_gelu_and_each_other() {
        let x: Vec<f32> = (0..4001).map(|i| (i as f32 - 2000.0) / 250.0).collect();
        let g: Vec<f32> = (0..4001).map(|i| 1.0 - (i % 7) as f32 / 5.0).collect();
        let (mut a, mut b) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        gelu(&mut a, &x);
        gelu_loop(&mut b, &x);
        assert_eq!(a, b, "the dispatched loop computes as the plain one");
        gelu_grad(&mut a, &x, &g);
        gelu_grad_loop(&mut b, &x, &g);
        assert_eq!(a, b);
        let (mut y, mut d) = (vec![0.0; x.len()], vec![0.0; x.len()]);
        gelu(&mut y, &x);
        gelu_grad(&mut d, &x, &g);
        for i in 0..x.len() {
            let v = x[i] as f64;
            let cdf = 0.5 * (1.0 + candle_core::cpu::erf::erf_f64(v / 2f64.sqrt()));
            let pdf = (-0.5 * v * v).exp() / (2.0 * std::f64::consts::PI).sqrt();
            let (want, dwant) = (v * cdf, g[i] as f64 * (cdf + v * pdf));
            assert!(
                (y[i] as f64 - want).abs() < 2e-6 * (1.0 + v.abs()),
                "{v}: {} vs {want}",
                y[i]
            );
            assert!(
                (d[i] as f64 - dwant).abs() < 2e-6 * (1.0 + v.abs()),
                "{v}: {} vs {dwant}",
                d[i]
            );
        }
        let nan = [f32::NAN];
        let mut o = [0.0];
        gelu(&mut o, &nan);
        assert!(o[0].is_nan());
    }
}
