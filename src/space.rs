//! How two texts' rows in a shared space are compared: the cosine (unit-length
//! rows, a dot product) or the Jensen–Shannon score of topic distributions.
//!
//! Every score is "higher is more similar", so ranking, ties and fusion treat
//! both alike. A zero row (a text with no known term) scores 0 against
//! everything under both measures.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis, Zip};
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
                let mut out = Array2::<f32>::zeros((a.nrows(), b.nrows()));
                Zip::from(out.axis_iter_mut(Axis(0)))
                    .and(a.axis_iter(Axis(0)))
                    .par_for_each(|mut o, p| {
                        for (s, q) in o.iter_mut().zip(b.axis_iter(Axis(0))) {
                            *s = js_score(p, q);
                        }
                    });
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
/// and for a zero row.
pub fn js_score(p: ArrayView1<f32>, q: ArrayView1<f32>) -> f32 {
    if p.iter().all(|&x| x == 0.0) || q.iter().all(|&x| x == 0.0) {
        return 0.0;
    }
    (1.0 - js_divergence(p, q).sqrt()) as f32
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
                    assert!((s[[i, j]] - sim.score(a.row(i), b.row(j))).abs() < 1e-6);
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
}
