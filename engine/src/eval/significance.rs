//! Paired significance tests over per-query scores, and corrections for
//! testing several systems against one baseline.
//!
//! Both tests are two-sided and pair the scores query by query (`a[i]` and
//! `b[i]` belong to the same query).

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::{Error, Result};

/// The outcome of one paired test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// The test statistic: Student's t for the t-test, the mean difference
    /// `mean(a - b)` for the randomisation test.
    pub statistic: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// `mean(a - b)`.
    pub mean_difference: f64,
    /// Number of pairs.
    pub n: usize,
}

/// The differences `a[i] - b[i]`, after checking the inputs.
fn differences(a: &[f64], b: &[f64]) -> Result<Vec<f64>> {
    if a.len() != b.len() {
        return Err(Error::invalid(format!(
            "paired test needs equal lengths, got {} and {}",
            a.len(),
            b.len()
        )));
    }
    if a.len() < 2 {
        return Err(Error::invalid(format!(
            "paired test needs at least 2 pairs, got {}",
            a.len()
        )));
    }
    if a.iter().chain(b).any(|x| !x.is_finite()) {
        return Err(Error::invalid("paired test given a non-finite score"));
    }
    Ok(a.iter().zip(b).map(|(x, y)| x - y).collect())
}

/// The mean of `d`, its sample standard deviation (n − 1) and its largest
/// magnitude (the scale below which a standard deviation counts as zero).
fn spread(d: &[f64]) -> (f64, f64, f64) {
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let scale = d.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    (mean, sd, scale)
}

/// Paired two-sided Student's t-test (as `scipy.stats.ttest_rel`).
///
/// Where every difference is the same (zero variance) scipy gives NaN; here
/// identical systems (all differences zero) get p = 1, and a constant
/// non-zero difference gets t = ±∞, p = 0.
pub fn paired_t_test(a: &[f64], b: &[f64]) -> Result<TestResult> {
    let d = differences(a, b)?;
    let n = d.len() as f64;
    let (mean, sd, scale) = spread(&d);
    let (t, p) = if scale == 0.0 {
        (0.0, 1.0)
    } else if sd <= 1e-12 * scale {
        (f64::INFINITY.copysign(mean), 0.0)
    } else {
        let t = mean / (sd / n.sqrt());
        let dist = StudentsT::new(0.0, 1.0, n - 1.0)
            .map_err(|e| Error::invalid(format!("Student's t distribution: {e}")))?;
        (t, (2.0 * dist.sf(t.abs())).min(1.0))
    };
    Ok(TestResult {
        statistic: t,
        p_value: p,
        mean_difference: mean,
        n: d.len(),
    })
}

/// Paired two-sided randomisation (permutation) test: under the null each
/// difference `a[i] - b[i]` is equally likely to have either sign.
///
/// When `2^n <= permutations` every sign assignment is enumerated and the p-value
/// is exact (the share of assignments whose mean difference is at least as far
/// from zero as the observed one, as `scipy.stats.permutation_test` computes
/// it). Otherwise `permutations` random assignments are drawn from a ChaCha8
/// generator seeded with `seed` and p = (hits + 1) / (permutations + 1), which
/// is never zero. Ties with the observed statistic count as hits (with a
/// relative tolerance of 100 ulp, as scipy).
pub fn randomization_test(
    a: &[f64],
    b: &[f64],
    permutations: usize,
    seed: u64,
) -> Result<TestResult> {
    let d = differences(a, b)?;
    if permutations == 0 {
        return Err(Error::invalid("randomisation test needs permutations > 0"));
    }
    let n = d.len();
    let observed = d.iter().sum::<f64>();
    let threshold = observed.abs() * (1.0 - 100.0 * f64::EPSILON);
    let exact = n < 63 && (1u64 << n) <= permutations as u64;
    let p = if exact {
        let total = 1u64 << n;
        let mut hits = 0u64;
        for mask in 0..total {
            let s: f64 = d
                .iter()
                .enumerate()
                .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                .sum();
            if s.abs() >= threshold {
                hits += 1;
            }
        }
        hits as f64 / total as f64
    } else {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut hits = 0usize;
        for _ in 0..permutations {
            let s: f64 = d
                .iter()
                .map(|x| if rng.random::<bool>() { -x } else { *x })
                .sum();
            if s.abs() >= threshold {
                hits += 1;
            }
        }
        (hits + 1) as f64 / (permutations + 1) as f64
    };
    let mean = observed / n as f64;
    Ok(TestResult {
        statistic: mean,
        p_value: p,
        mean_difference: mean,
        n,
    })
}

/// The confidence level of [`Bootstrap`] intervals.
pub const CONFIDENCE: f64 = 0.95;

/// Resamples drawn by one generator stream of [`Bootstrap::intervals`]; the
/// streams are independent of the thread count.
const CHUNK: usize = 256;

/// Paired bootstrap over queries: percentile intervals of the mean difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bootstrap {
    /// Resamples drawn (at least 1).
    pub resamples: usize,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for Bootstrap {
    /// 10,000 resamples, seed 42.
    fn default() -> Self {
        Bootstrap {
            resamples: 10_000,
            seed: 42,
        }
    }
}

impl Bootstrap {
    /// The [`CONFIDENCE`] (95%) percentile interval `(low, high)` of
    /// `mean(a - b)` over `resamples` resamples of the query pairs (drawn
    /// with replacement, `n` of `n`), one interval per column: `columns[k]`
    /// holds the paired scores `(a, b)` of one metric, all columns over the
    /// same queries in the same order, and every resample draws the same
    /// queries for every column. The percentiles interpolate linearly
    /// between order statistics (numpy's default). Resample `r` draws from
    /// ChaCha8 stream `r / 256` of `seed`, so the result depends on the seed
    /// alone, never on the thread count. Errors as [`paired_t_test`] on bad
    /// input, and on `resamples == 0`.
    pub fn intervals(&self, columns: &[(&[f64], &[f64])]) -> Result<Vec<(f64, f64)>> {
        use rayon::prelude::*;
        if self.resamples == 0 {
            return Err(Error::invalid("the bootstrap needs resamples > 0"));
        }
        let d: Vec<Vec<f64>> = columns
            .iter()
            .map(|(a, b)| differences(a, b))
            .collect::<Result<_>>()?;
        let Some(n) = d.first().map(Vec::len) else {
            return Ok(Vec::new());
        };
        if d.iter().any(|c| c.len() != n) {
            return Err(Error::invalid(
                "bootstrap columns must pair the same queries",
            ));
        }
        let k = d.len();
        // row-major: the k differences of query i at rows[i * k..]
        let rows: Vec<f64> = (0..n).flat_map(|i| d.iter().map(move |c| c[i])).collect();
        let chunks = self.resamples.div_ceil(CHUNK);
        // means[chunk] holds, resample by resample, one mean per column
        let means: Vec<Vec<f64>> = (0..chunks)
            .into_par_iter()
            .map(|c| {
                let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
                rng.set_stream(c as u64);
                let count = CHUNK.min(self.resamples - c * CHUNK);
                let mut out = Vec::with_capacity(count * k);
                let mut sums = vec![0.0f64; k];
                for _ in 0..count {
                    sums.iter_mut().for_each(|s| *s = 0.0);
                    for _ in 0..n {
                        let i = rng.random_range(0..n);
                        for (s, x) in sums.iter_mut().zip(&rows[i * k..(i + 1) * k]) {
                            *s += x;
                        }
                    }
                    out.extend(sums.iter().map(|s| s / n as f64));
                }
                out
            })
            .collect();
        let tail = (1.0 - CONFIDENCE) / 2.0;
        Ok((0..k)
            .map(|j| {
                let mut m: Vec<f64> = means
                    .iter()
                    .flat_map(|c| c.iter().skip(j).step_by(k).copied())
                    .collect();
                m.sort_by(f64::total_cmp);
                (percentile(&m, tail), percentile(&m, 1.0 - tail))
            })
            .collect())
    }
}

/// The `q` quantile of sorted, non-empty `x`, interpolating linearly between
/// order statistics (numpy's `linear` method).
fn percentile(x: &[f64], q: f64) -> f64 {
    let pos = q * (x.len() - 1) as f64;
    let (lo, frac) = (pos.floor() as usize, pos.fract());
    match x.get(lo + 1) {
        Some(hi) if frac > 0.0 => x[lo] + frac * (hi - x[lo]),
        _ => x[lo],
    }
}

/// Paired effect size Cohen's d_z: the mean of the differences `a[i] - b[i]`
/// over their standard deviation (n − 1 in the denominator). `None` where it
/// is undefined: all differences equal (zero spread, identical systems
/// included), never NaN or infinite. Errors as [`paired_t_test`].
pub fn effect_size(a: &[f64], b: &[f64]) -> Result<Option<f64>> {
    let (mean, sd, scale) = spread(&differences(a, b)?);
    Ok((sd > 1e-12 * scale).then(|| mean / sd))
}

/// Which paired test to run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum PairedTest {
    /// [`paired_t_test`].
    T,
    /// [`randomization_test`] with this many permutations and seed.
    Randomization {
        /// Random sign assignments drawn (or all of them when `2^n` is smaller).
        permutations: usize,
        /// Seed of the generator.
        seed: u64,
    },
}

impl PairedTest {
    /// Runs the test on paired scores `a` (the system) and `b` (the baseline).
    pub fn run(&self, a: &[f64], b: &[f64]) -> Result<TestResult> {
        match *self {
            PairedTest::T => paired_t_test(a, b),
            PairedTest::Randomization { permutations, seed } => {
                randomization_test(a, b, permutations, seed)
            }
        }
    }

    /// A short description for table legends.
    pub fn describe(&self) -> String {
        match self {
            PairedTest::T => "paired t-test".to_string(),
            PairedTest::Randomization { permutations, seed } => {
                format!("paired randomisation test, {permutations} permutations, seed {seed}")
            }
        }
    }
}

/// Correction of p-values for several comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Correction {
    /// No correction.
    None,
    /// Bonferroni: `min(1, m p)`.
    Bonferroni,
    /// Holm's step-down method: uniformly more powerful than Bonferroni with
    /// the same family-wise error guarantee.
    Holm,
}

impl Correction {
    /// Adjusted p-values, in the order given.
    pub fn adjust(self, p: &[f64]) -> Vec<f64> {
        let m = p.len() as f64;
        match self {
            Correction::None => p.to_vec(),
            Correction::Bonferroni => p.iter().map(|x| (x * m).min(1.0)).collect(),
            Correction::Holm => {
                let mut order: Vec<usize> = (0..p.len()).collect();
                order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
                let mut out = vec![0.0; p.len()];
                let mut running = 0.0f64;
                for (rank, &i) in order.iter().enumerate() {
                    running = running.max(((m - rank as f64) * p[i]).min(1.0));
                    out[i] = running;
                }
                out
            }
        }
    }

    /// The lower-case name (`none`, `bonferroni`, `holm`).
    pub fn name(self) -> &'static str {
        match self {
            Correction::None => "none",
            Correction::Bonferroni => "bonferroni",
            Correction::Holm => "holm",
        }
    }
}

impl fmt::Display for Correction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Correction {
    type Err = Error;
    fn from_str(s: &str) -> Result<Correction> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Correction::None),
            "bonferroni" => Ok(Correction::Bonferroni),
            "holm" => Ok(Correction::Holm),
            _ => Err(Error::invalid(format!(
                "unknown correction {s:?}; known: holm, bonferroni, none"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference values from scipy 1.17.1 (/work/.peers/bin/python):
    //   stats.ttest_rel(A, B), stats.ttest_rel(C, D)
    //   stats.permutation_test((A-B,), np.mean, permutation_type='samples',
    //                          n_resamples=100000)  (exact: 2^n <= 100000)
    const A: [f64; 8] = [0.5, 1.0, 0.333, 0.25, 1.0, 0.0, 0.2, 1.0];
    const B: [f64; 8] = [0.25, 1.0, 0.5, 0.1, 0.5, 0.0, 0.1, 0.2];
    const C: [f64; 12] = [
        0.9, 0.8, 0.7, 0.95, 0.85, 0.6, 0.75, 0.8, 0.9, 0.7, 0.65, 0.8,
    ];
    const D: [f64; 12] = [
        0.85, 0.82, 0.6, 0.9, 0.8, 0.62, 0.7, 0.78, 0.91, 0.6, 0.6, 0.79,
    ];

    fn close(x: f64, y: f64, tol: f64) -> bool {
        (x - y).abs() <= tol
    }

    #[test]
    fn t_test_matches_scipy() {
        let r = paired_t_test(&A, &B).unwrap();
        assert!(close(r.statistic, 1.853013503410994, 1e-10), "{r:?}");
        assert!(close(r.p_value, 0.10629597759844252, 1e-8), "{r:?}");
        let r = paired_t_test(&C, &D).unwrap();
        assert!(close(r.statistic, 3.0275139089159597, 1e-10), "{r:?}");
        assert!(close(r.p_value, 0.011500279184636544, 1e-8), "{r:?}");
        // antisymmetric in its arguments
        let s = paired_t_test(&D, &C).unwrap();
        assert!(close(s.statistic, -r.statistic, 1e-12));
        assert!(close(s.p_value, r.p_value, 1e-12));
    }

    #[test]
    fn t_test_degenerate_cases() {
        let r = paired_t_test(&A, &A).unwrap();
        assert_eq!((r.statistic, r.p_value), (0.0, 1.0));
        let shifted: Vec<f64> = A.iter().map(|x| x + 0.5).collect();
        let r = paired_t_test(&shifted, &A).unwrap();
        assert_eq!(r.p_value, 0.0);
        assert!(r.statistic.is_infinite() && r.statistic > 0.0);
        assert!(paired_t_test(&A, &C).is_err());
        assert!(paired_t_test(&[1.0], &[0.0]).is_err());
        assert!(paired_t_test(&[1.0, f64::NAN], &[0.0, 0.0]).is_err());
    }

    #[test]
    fn exact_randomization_matches_scipy() {
        let r = randomization_test(&A, &B, 100_000, 1).unwrap();
        assert!(close(r.statistic, 0.204125, 1e-12));
        assert!(close(r.p_value, 0.125, 1e-12), "{r:?}");
        let r = randomization_test(&C, &D, 4096, 1).unwrap();
        assert!(close(r.statistic, 0.035833333333333335, 1e-12));
        assert!(close(r.p_value, 0.0146484375, 1e-12), "{r:?}");
    }

    #[test]
    fn sampled_randomization_is_seeded_and_near_exact() {
        // 4096 assignments exist; 10,000 random draws estimate the exact p
        let big = 10_000;
        let r1 = randomization_test(&C, &D, 4095, 7).unwrap();
        let r2 = randomization_test(&C, &D, 4095, 7).unwrap();
        assert_eq!(r1.p_value, r2.p_value);
        assert!(close(r1.p_value, 0.0146484375, 0.006), "{r1:?}");
        // a long sample with many queries: identical systems give p = 1
        let x: Vec<f64> = (0..100).map(|i| (i as f64 * 0.37).sin().abs()).collect();
        let r = randomization_test(&x, &x, big, 3).unwrap();
        assert_eq!(r.p_value, 1.0);
        // a large consistent improvement: the smallest p the sample can give
        let y: Vec<f64> = x.iter().map(|v| v + 0.1).collect();
        let r = randomization_test(&y, &x, big, 3).unwrap();
        assert!(close(r.p_value, 1.0 / (big + 1) as f64, 1e-15), "{r:?}");
        assert!(randomization_test(&x, &y, 0, 3).is_err());
    }

    #[test]
    fn bootstrap_interval_and_effect_size_by_hand() {
        let boot = Bootstrap::default();
        // identical systems: every resample's mean difference is 0; d undefined
        let iv = boot.intervals(&[(&A, &A)]).unwrap();
        assert_eq!(iv, vec![(0.0, 0.0)]);
        assert_eq!(effect_size(&A, &A).unwrap(), None);
        // a constant +0.1: the interval is [0.1, 0.1]; d undefined (no spread)
        let shifted: Vec<f64> = A.iter().map(|x| x + 0.1).collect();
        let (lo, hi) = boot.intervals(&[(&shifted, &A)]).unwrap()[0];
        assert!(close(lo, 0.1, 1e-12) && close(hi, 0.1, 1e-12), "{lo} {hi}");
        assert_eq!(effect_size(&shifted, &A).unwrap(), None);
        // d_z by hand: differences 1, 2, 3: mean 2, sd 1
        assert_eq!(
            effect_size(&[1.0, 2.0, 3.0], &[0.0, 0.0, 0.0]).unwrap(),
            Some(2.0)
        );
        // C against D: mean 0.0358333, sd of differences 0.0410009 (numpy ddof=1)
        let dz = effect_size(&C, &D).unwrap().unwrap();
        assert!(close(dz, 0.873967, 1e-5), "{dz}");
        // the interval holds the mean difference, lies within the extreme
        // differences, is the same for a seed and differs for another
        let iv = boot.intervals(&[(&C, &D), (&A[..], &B[..])]);
        assert!(iv.is_err(), "columns over different queries");
        let (lo, hi) = boot.intervals(&[(&C, &D)]).unwrap()[0];
        assert!(
            lo < 0.035833 && 0.035834 < hi && lo > -0.1 && hi < 0.11,
            "{lo} {hi}"
        );
        assert_eq!(boot.intervals(&[(&C, &D)]).unwrap()[0], (lo, hi));
        let other = Bootstrap { seed: 7, ..boot };
        assert_ne!(other.intervals(&[(&C, &D)]).unwrap()[0], (lo, hi));
        // several columns: each as if alone (the same resampled queries)
        let both = boot.intervals(&[(&C, &D), (&D, &C)]).unwrap();
        assert_eq!(both[0], (lo, hi));
        assert!(close(both[1].0, -hi, 1e-12) && close(both[1].1, -lo, 1e-12));
        // the same on one thread as on many
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        assert_eq!(
            one.install(|| boot.intervals(&[(&C, &D)]).unwrap())[0],
            (lo, hi)
        );
        assert!(Bootstrap {
            resamples: 0,
            seed: 1
        }
        .intervals(&[(&C, &D)])
        .is_err());
        assert!(effect_size(&[1.0], &[0.0]).is_err());
    }

    #[test]
    fn corrections_by_hand() {
        let p = [0.01, 0.04, 0.03, 0.20];
        let holm = Correction::Holm.adjust(&p);
        let want = [0.04, 0.09, 0.09, 0.2];
        for (h, w) in holm.iter().zip(want) {
            assert!(close(*h, w, 1e-12), "{holm:?}");
        }
        let bonf = Correction::Bonferroni.adjust(&p);
        let want = [0.04, 0.16, 0.12, 0.8];
        for (h, w) in bonf.iter().zip(want) {
            assert!(close(*h, w, 1e-12), "{bonf:?}");
        }
        assert_eq!(Correction::None.adjust(&p), p.to_vec());
        assert_eq!(Correction::Bonferroni.adjust(&[0.5, 0.6]), vec![1.0, 1.0]);
        assert_eq!("Holm".parse::<Correction>().unwrap(), Correction::Holm);
        assert!("sidak".parse::<Correction>().is_err());
    }
}
