//! How two texts' rows in a shared space are compared: the cosine (unit-length
//! rows, a dot product) or the Jensen–Shannon score of topic distributions.
//!
//! Every score is "higher is more similar", so ranking, ties and fusion treat
//! both alike. A zero row (a text with no known term) scores 0 against
//! everything under both measures.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The similarity a model's space is searched with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Similarity {
    /// Dot product of unit-length rows.
    #[default]
    Cosine,
    /// `1 − JS distance` of rows that are probability distributions, the JS
    /// distance being the square root of the Jensen–Shannon divergence in
    /// bits (a metric in [0, 1]); so the score lies in [0, 1].
    JensenShannon,
}

impl Similarity {
    /// Name as written in configs and reports (`cosine`, `jensen-shannon`).
    pub fn name(self) -> &'static str {
        match self {
            Similarity::Cosine => "cosine",
            Similarity::JensenShannon => "jensen-shannon",
        }
    }

    /// Short label for a score column (`cosine`, `JS`).
    pub fn label(self) -> &'static str {
        match self {
            Similarity::Cosine => "cosine",
            Similarity::JensenShannon => "JS",
        }
    }

    /// Scales `v` (a sum of rows) back into the space's form: unit length
    /// for the cosine, sum 1 for Jensen–Shannon; a zero row stays zero.
    pub fn normalize(self, v: &mut Array1<f32>) {
        let n = match self {
            Similarity::Cosine => v.dot(v).sqrt(),
            Similarity::JensenShannon => v.sum(),
        };
        if n > 0.0 {
            *v /= n;
        }
    }

    /// Scores of `q` against every row of `rows`.
    pub fn against(self, rows: ArrayView2<f32>, q: ArrayView1<f32>) -> Array1<f32> {
        match self {
            Similarity::Cosine => rows.dot(&q),
            Similarity::JensenShannon => rows.outer_iter().map(|r| js_score(q, r)).collect(),
        }
    }

    /// The score of rows `a` and `b` (same length).
    pub fn score(self, a: ArrayView1<f32>, b: ArrayView1<f32>) -> f32 {
        match self {
            Similarity::Cosine => a.dot(&b),
            Similarity::JensenShannon => js_score(a, b),
        }
    }

    /// Scores of every row of `a` (rows) against every row of `b` (columns).
    pub fn scores(self, a: ArrayView2<f32>, b: ArrayView2<f32>) -> Array2<f32> {
        assert_eq!(a.ncols(), b.ncols(), "rows of different dimension");
        match self {
            Similarity::Cosine => a.dot(&b.t()),
            Similarity::JensenShannon => {
                let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
                let k = a.ncols();
                let (a, b) = (
                    a.as_slice().expect("standard layout"),
                    b.as_slice().expect("standard layout"),
                );
                let mut out = Array2::<f32>::zeros((a.len() / k.max(1), b.len() / k.max(1)));
                if k > 0 {
                    js_scores_into(a, b, k, out.as_slice_mut().expect("standard layout"));
                }
                out
            }
        }
    }

    /// Checks that `rows` are what this measure compares: finite, and for
    /// Jensen–Shannon non-negative rows summing to 1 (or all zero); `what`
    /// names them in the error.
    pub fn check_rows(self, rows: ArrayView2<f32>, what: &str) -> Result<()> {
        for (i, r) in rows.axis_iter(Axis(0)).enumerate() {
            if let Some(x) = r.iter().find(|x| !x.is_finite()) {
                return Err(Error::invalid(format!("{what}: row {i} holds {x}")));
            }
            if self == Similarity::JensenShannon {
                if let Some(x) = r.iter().find(|x| **x < 0.0) {
                    return Err(Error::invalid(format!(
                        "{what}: row {i} holds {x}, not a probability"
                    )));
                }
                let s: f64 = r.iter().map(|&x| f64::from(x)).sum();
                if s != 0.0 && (s - 1.0).abs() > 1e-3 {
                    return Err(Error::invalid(format!(
                        "{what}: row {i} sums to {s}, not to 1"
                    )));
                }
            }
        }
        Ok(())
    }
}

impl std::fmt::Display for Similarity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Similarity {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "cosine" => Ok(Similarity::Cosine),
            "jensen-shannon" | "js" => Ok(Similarity::JensenShannon),
            t => Err(Error::invalid(format!(
                "similarity {t:?}: expected cosine or jensen-shannon"
            ))),
        }
    }
}

/// Jensen–Shannon divergence of distributions `p` and `q` in bits, in
/// [0, 1]; 0·ln 0 counts 0. Written per coordinate as `m·f(d)` with
/// `m = (p+q)/2`, `d = (p−q)/(p+q)` and `f(d) = (1+d)·ln(1+d) + (1−d)·ln(1−d)`
/// (halved), which keeps its precision when `p ≈ q`.
pub fn js_divergence(p: ArrayView1<f32>, q: ArrayView1<f32>) -> f64 {
    let mut s = 0.0f64;
    for (&a, &b) in p.iter().zip(q.iter()) {
        let (a, b) = (f64::from(a), f64::from(b));
        let t = a + b;
        if t <= 0.0 {
            continue;
        }
        let d = (a - b) / t;
        let f = if d >= 1.0 || d <= -1.0 {
            2.0 * std::f64::consts::LN_2
        } else {
            (1.0 + d) * d.ln_1p() + (1.0 - d) * (-d).ln_1p()
        };
        // m·f(d)/2 summed = JSD in nats; m = t/2.
        s += 0.25 * t * f;
    }
    (s / std::f64::consts::LN_2).clamp(0.0, 1.0)
}

/// `1 − sqrt(JSD₂(p, q))`: 1 for equal distributions, 0 for disjoint ones
/// and for a zero row. Computed in `f32` by [`js_divergence_fast`], within
/// about 1e-6 of [`js_divergence`] (the tests check it).
pub fn js_score(p: ArrayView1<f32>, q: ArrayView1<f32>) -> f32 {
    if p.iter().all(|&x| x == 0.0) || q.iter().all(|&x| x == 0.0) {
        return 0.0;
    }
    match (p.as_slice(), q.as_slice()) {
        (Some(a), Some(b)) => 1.0 - js_divergence_fast(a, b).sqrt(),
        _ => (1.0 - js_divergence(p, q).sqrt()) as f32,
    }
}

/// Below this divergence (nats) the entropy form's cancellation matters and
/// [`js_scores_into`] recomputes the pair by [`js_divergence_fast`].
const ENTROPY_FORM_FLOOR: f64 = 0.02;

/// Scores of every `k`-wide row of `a` against every row of `b` (row-major,
/// `out` is `rows(a) × rows(b)`), in parallel: `JSD = ½(Σp ln p + Σq ln q) −
/// Σ m ln m` with `m = (p+q)/2`, one logarithm per coordinate, the rows'
/// own terms computed once; a pair closer than [`ENTROPY_FORM_FLOOR`] is
/// recomputed term by term. Within about 1e-6 of [`js_score`].
pub fn js_scores_into(a: &[f32], b: &[f32], k: usize, out: &mut [f32]) {
    use rayon::prelude::*;
    let own = |m: &[f32]| -> Vec<Option<f64>> {
        m.chunks_exact(k)
            .map(|r| {
                (r.iter().any(|&x| x != 0.0)).then(|| {
                    r.iter()
                        .filter(|&&x| x > 0.0)
                        .map(|&x| f64::from(x) * f64::from(x).ln())
                        .sum()
                })
            })
            .collect()
    };
    let (ha, hb) = (own(a), own(b));
    let nb = hb.len();
    out.par_chunks_mut(nb.max(1))
        .zip(a.par_chunks_exact(k))
        .zip(ha.par_iter())
        .for_each(|((o, p), hp)| {
            for ((s, q), hq) in o.iter_mut().zip(b.chunks_exact(k)).zip(&hb) {
                let (Some(hp), Some(hq)) = (hp, hq) else {
                    *s = 0.0;
                    continue;
                };
                let mut mix = 0.0f64;
                for (&x, &y) in p.iter().zip(q) {
                    let m = 0.5 * (x + y);
                    mix += f64::from(m * ln_fast(m));
                }
                let jsd = 0.5 * (hp + hq) - mix;
                *s = if jsd < ENTROPY_FORM_FLOOR {
                    1.0 - js_divergence_fast(p, q).sqrt()
                } else {
                    1.0 - ((jsd / std::f64::consts::LN_2).clamp(0.0, 1.0) as f32).sqrt()
                };
            }
        });
}

/// [`js_divergence`] in `f32` without library calls: per coordinate
/// `t·f(|d|)/4` (`t = p+q`), `f` by its power series
/// `Σ d²ⁿ/(n(2n−1))` below `|d| = ½` (no cancellation as `p → q`) and by
/// `(1+x)ln(1+x) + (1−x)ln(1−x)` with a polynomial logarithm above it. Every
/// term is non-negative, so the sum keeps its relative precision.
pub fn js_divergence_fast(p: &[f32], q: &[f32]) -> f32 {
    let mut acc = 0.0f32;
    for (&a, &b) in p.iter().zip(q) {
        let t = a + b;
        if t <= 0.0 {
            continue;
        }
        let x = ((a - b) / t).abs();
        let g = if x < 0.5 {
            let y = x * x;
            y * (1.0
                + y * (1.0 / 6.0
                    + y * (1.0 / 15.0
                        + y * (1.0 / 28.0
                            + y * (1.0 / 45.0
                                + y * (1.0 / 66.0
                                    + y * (1.0 / 91.0 + y * (1.0 / 120.0 + y / 153.0))))))))
        } else {
            (1.0 + x) * ln_fast(1.0 + x) + (1.0 - x) * ln_fast(1.0 - x)
        };
        acc += t * g;
    }
    (acc * (0.25 / std::f32::consts::LN_2)).clamp(0.0, 1.0)
}

/// Natural logarithm of `v > 0` to about 1e-7 relative (a `v` below the
/// smallest normal counts as it, so `0·ln 0` stays 0): `v = 2ᵉ·m` with
/// `m ∈ [√½, √2)`, `ln m = 2 atanh((m−1)/(m+1))` by its series.
fn ln_fast(v: f32) -> f32 {
    let v = v.max(f32::MIN_POSITIVE);
    let bits = v.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 127;
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    if m > std::f32::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let series =
        s * (2.0 + s2 * (2.0 / 3.0 + s2 * (2.0 / 5.0 + s2 * (2.0 / 7.0 + s2 * (2.0 / 9.0)))));
    e as f32 * std::f32::consts::LN_2 + series
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{arr1, arr2};

    #[test]
    fn js_known_values_and_properties() {
        let p = arr1(&[1.0f32, 0.0]);
        let q = arr1(&[0.0f32, 1.0]);
        assert!((js_divergence(p.view(), q.view()) - 1.0).abs() < 1e-12);
        assert_eq!(js_score(p.view(), q.view()), 0.0);
        assert_eq!(js_score(p.view(), p.view()), 1.0);
        // (½,½) vs (1,0): JSD = 1 − ½·H₂(¼,¾)·… by the definition.
        let a = arr1(&[0.5f32, 0.5]);
        let h = |v: &[f64]| {
            -v.iter()
                .filter(|x| **x > 0.0)
                .map(|x| x * x.log2())
                .sum::<f64>()
        };
        let want = h(&[0.75, 0.25]) - 0.5 * (h(&[0.5, 0.5]) + h(&[1.0, 0.0]));
        assert!((js_divergence(a.view(), p.view()) - want).abs() < 1e-9);
        // Symmetric, and the distance is a metric (triangle inequality).
        let r = arr1(&[0.2f32, 0.8]);
        let d = |x: &ndarray::Array1<f32>, y: &ndarray::Array1<f32>| {
            js_divergence(x.view(), y.view()).sqrt()
        };
        assert!((d(&a, &r) - d(&r, &a)).abs() < 1e-12);
        assert!(d(&p, &r) <= d(&p, &a) + d(&a, &r) + 1e-12);
        // A zero row scores 0.
        let z = arr1(&[0.0f32, 0.0]);
        assert_eq!(js_score(z.view(), a.view()), 0.0);
    }

    #[test]
    fn near_equal_rows_keep_their_order() {
        let p = arr1(&[0.5f32, 0.5]);
        let q1 = arr1(&[0.5001f32, 0.4999]);
        let q2 = arr1(&[0.5002f32, 0.4998]);
        let (s1, s2) = (js_score(p.view(), q1.view()), js_score(p.view(), q2.view()));
        assert!(s1 > s2 && s2 < 1.0, "{s1} {s2}");
    }

    #[test]
    fn block_scores_match_pairwise() {
        let a = arr2(&[[0.1f32, 0.9, 0.0], [0.3, 0.3, 0.4]]);
        let b = arr2(&[[0.2f32, 0.2, 0.6], [0.0, 0.0, 0.0], [0.1, 0.9, 0.0]]);
        for sim in [Similarity::Cosine, Similarity::JensenShannon] {
            let s = sim.scores(a.view(), b.view());
            for i in 0..2 {
                for j in 0..3 {
                    assert!((s[[i, j]] - sim.score(a.row(i), b.row(j))).abs() < 1e-5);
                }
            }
        }
        assert!(Similarity::JensenShannon.check_rows(b.view(), "b").is_ok());
        let bad = arr2(&[[0.5f32, 0.6]]);
        let e = Similarity::JensenShannon
            .check_rows(bad.view(), "theta")
            .unwrap_err()
            .to_string();
        assert!(e.contains("theta") && e.contains("row 0"), "{e}");
        assert_eq!(
            "js".parse::<Similarity>().unwrap(),
            Similarity::JensenShannon
        );
    }

    #[test]
    fn fast_divergence_agrees_with_exact() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for v in [1e-30f32, 1e-7, 0.01, 0.3, 1.0, 1.5, 2.0, 7.5, 1e6] {
            assert!(
                (ln_fast(v) - v.ln()).abs() <= 2e-7 * v.ln().abs().max(1.0),
                "{v}"
            );
        }
        for k in [2usize, 16, 128] {
            for trial in 0..200 {
                // peaked, flat and sparse rows, and near-copies of each other
                let mut p: Vec<f32> = (0..k)
                    .map(|_| {
                        if rng.random::<f32>() < 0.3 {
                            0.0
                        } else {
                            rng.random::<f32>().powi(4)
                        }
                    })
                    .collect();
                p[0] += 1e-3;
                let mut q: Vec<f32> = if trial % 2 == 0 {
                    p.iter()
                        .map(|x| x * (1.0 + 1e-3 * rng.random::<f32>()))
                        .collect()
                } else {
                    (0..k).map(|_| rng.random::<f32>()).collect()
                };
                for v in [&mut p, &mut q] {
                    let s: f32 = v.iter().sum();
                    v.iter_mut().for_each(|x| *x /= s);
                }
                let exact = js_divergence(ArrayView1::from(&p), ArrayView1::from(&q));
                let fast = f64::from(js_divergence_fast(&p, &q));
                assert!(
                    (fast - exact).abs() <= 1e-6 * exact + 1e-9,
                    "k {k}: {fast} vs {exact}"
                );
            }
        }
    }
}

#[cfg(test)]
mod speed {
    /// `cargo test --lib js_speed -- --ignored --nocapture`: ns per
    /// coordinate of the block kernel and of pair-by-pair scoring.
    #[test]
    #[ignore]
    fn js_speed() {
        use ndarray::Array2;
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let (n, k) = (2000, 128);
        let mut a = Array2::<f32>::from_shape_fn((n, k), |_| rng.random::<f32>().powi(3));
        for mut r in a.rows_mut() {
            let s = r.sum();
            r /= s;
        }
        let per = |el: f64| el / (n * n * k) as f64 * 1e9;
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let t = std::time::Instant::now();
        let s = one.install(|| super::Similarity::JensenShannon.scores(a.view(), a.view()));
        let el = t.elapsed().as_secs_f64();
        let t = std::time::Instant::now();
        let mut c = 0.0f64;
        for p in a.rows() {
            for q in a.rows() {
                c += f64::from(super::js_score(p, q));
            }
        }
        let el2 = t.elapsed().as_secs_f64();
        eprintln!(
            "{} pairs × {k}: one thread: block {:.2} ns, pair by pair {:.2} ns per coordinate (checksums {} {c})",
            n * n,
            per(el),
            per(el2),
            s.iter().map(|&x| f64::from(x)).sum::<f64>()
        );
    }
}
