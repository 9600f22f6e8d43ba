//! Pretrained starts (`vectors=SESSION`): a model's word embeddings or first
//! layer taken from another session's term vectors, as the seed papers took
//! theirs from word2vec (seed 003) — here from one model of both languages,
//! so the start is already cross-lingual.
//!
//! The job layer resolves the session into [`PretrainedVectors`] (one row
//! per term of the job's vocabularies); [`fit_width`] turns them into a
//! table of the model's width and scale; [`start`] does both and records
//! what was done in the job's session (`pretrained.json`).

use std::path::{Path, PathBuf};

use faer::{Mat, Side as FaerSide};
use ndarray::{Array1, Array2, Axis};
use rand::Rng;
use rand_distr::{Distribution, Normal};
use serde::Serialize;

use crate::models::PretrainedVectors;
use crate::{Error, Result};

/// File in a session folder that records its pretrained start.
pub const RECORD_FILE: &str = "pretrained.json";

/// What a model's `vectors` setting names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VectorsSetting {
    /// `none`: a random start.
    None,
    /// A session folder whose term vectors start the model.
    Session(PathBuf),
    /// Two word2vec text files, `SOURCE.vec,TARGET.vec` (adv-bilstm only).
    Files(PathBuf, PathBuf),
}

impl VectorsSetting {
    /// Parses a `vectors` value: `none`, `A.vec,B.vec`, or a session folder.
    pub fn parse(v: &str) -> std::result::Result<VectorsSetting, String> {
        let v = v.trim();
        if v.is_empty() {
            return Err("expected `none`, a session folder or SOURCE.vec,TARGET.vec".into());
        }
        if v == "none" {
            return Ok(VectorsSetting::None);
        }
        let parts: Vec<&str> = v.split(',').map(str::trim).collect();
        match parts.as_slice() {
            [one] => Ok(VectorsSetting::Session(PathBuf::from(one))),
            [a, b] if !a.is_empty() && !b.is_empty() => {
                Ok(VectorsSetting::Files(PathBuf::from(a), PathBuf::from(b)))
            }
            _ => Err(format!(
                "expected `none`, a session folder or SOURCE.vec,TARGET.vec, got `{v}`"
            )),
        }
    }

    /// The session folder, when the setting names one.
    pub fn session(&self) -> Option<&Path> {
        match self {
            VectorsSetting::Session(p) => Some(p),
            _ => None,
        }
    }
}

/// Registry check of a `vectors` setting that takes a session folder only
/// (s2net, xcnn, bae).
pub fn check_session_only(v: &str) -> std::result::Result<(), String> {
    match VectorsSetting::parse(v)? {
        VectorsSetting::Files(..) => Err(format!(
            "expected `none` or a session folder, got `{v}` (.vec files: adv-bilstm only)"
        )),
        _ => Ok(()),
    }
}

/// Registry check of adv-bilstm's `vectors`: any [`VectorsSetting`].
pub fn check_any(v: &str) -> std::result::Result<(), String> {
    VectorsSetting::parse(v).map(|_| ())
}

/// The key of the `vectors` setting: a model's `Config` field of that name
/// (the job layer records it as an absolute path).
pub const KEY: &str = "vectors";

/// A model's `vectors` setting (default `none`).
pub fn setting(v: &str) -> Result<VectorsSetting> {
    VectorsSetting::parse(v).map_err(|e| Error::invalid(format!("--set {KEY}={v}: {e}")))
}

/// Refuses `frozen_epochs > 0` without a start to hold.
pub fn check_frozen(model: &str, frozen_epochs: usize, has_vectors: bool) -> Result<()> {
    if frozen_epochs > 0 && !has_vectors {
        return Err(Error::invalid(format!(
            "{model}: frozen_epochs={frozen_epochs} holds a vectors= start fixed; set vectors too"
        )));
    }
    Ok(())
}

/// The resolved vectors of `dir` from the job's data: an error when the job
/// layer did not resolve them (a trainer called directly with a session
/// setting) or resolved another session's.
pub fn require<'a>(
    pretrained: Option<&'a PretrainedVectors>,
    dir: &Path,
    model: &str,
) -> Result<&'a PretrainedVectors> {
    match pretrained {
        Some(p) if p.session == dir => Ok(p),
        _ => Err(Error::invalid(format!(
            "{model}: vectors={}: the session's term vectors were not loaded for this job \
             (start it with `rosetta train`)",
            dir.display()
        ))),
    }
}

/// A pretrained table fitted to a model's width.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// `source vocabulary × width`.
    pub source: Array2<f32>,
    /// `target vocabulary × width`.
    pub target: Array2<f32>,
    /// Columns that came from the vectors (`min(width, d)`); the rest are random.
    pub kept: usize,
    /// Share of the vectors' variance the kept axes hold (1 when `kept = d`).
    pub explained: f64,
    /// Dimension of the vectors.
    pub dim: usize,
    /// Source terms with a vector.
    pub found_source: usize,
    /// Target terms with a vector.
    pub found_target: usize,
}

/// Fits `v` to `width` columns at a model's scale: the found rows of both
/// languages are centred on their common mean and rotated onto their
/// principal axes (one PCA fitted on both languages together, so the two
/// stay in one space); the first `min(width, d)` axes are kept and scaled
/// so that a kept coordinate's root mean square over the found rows is
/// `rms` (the model's random start has that scale: the start changes the
/// directions, not the size, of what the model learns from). Columns past
/// `d`, and rows of terms without a vector, are drawn `N(0, rms²)` from
/// `rng`. With `width ≥ d` nothing is lost: the rotation keeps every
/// cosine between centred vectors.
///
/// Errors: no term with a vector, a non-finite value, or vectors that are
/// all the same.
pub fn fit_width(
    v: &PretrainedVectors,
    width: usize,
    rms: f64,
    rng: &mut impl Rng,
) -> Result<Fitted> {
    let d = v.source.ncols();
    if v.target.ncols() != d
        || v.source.nrows() != v.found_source.len()
        || v.target.nrows() != v.found_target.len()
    {
        return Err(Error::invalid(format!(
            "vectors={}: source and target tables disagree in shape",
            v.session.display()
        )));
    }
    let found: Vec<ndarray::ArrayView1<f32>> = v
        .source
        .axis_iter(Axis(0))
        .zip(&v.found_source)
        .chain(v.target.axis_iter(Axis(0)).zip(&v.found_target))
        .filter(|(_, &f)| f)
        .map(|(r, _)| r)
        .collect();
    if found.is_empty() || d == 0 {
        return Err(Error::invalid(format!(
            "vectors={}: no term of this job's vocabularies has a vector",
            v.session.display()
        )));
    }
    if found.iter().any(|r| r.iter().any(|x| !x.is_finite())) {
        return Err(Error::invalid(format!(
            "vectors={}: a term vector holds NaN or infinity",
            v.session.display()
        )));
    }
    let n = found.len() as f64;
    let mut mean = Array1::<f64>::zeros(d);
    for r in &found {
        for (m, &x) in mean.iter_mut().zip(r.iter()) {
            *m += x as f64;
        }
    }
    mean /= n;
    // d × d covariance of the centred rows (d is a few hundred)
    let mut cov = Mat::<f64>::zeros(d, d);
    let mut c = vec![0f64; d];
    for r in &found {
        for (j, (&x, &m)) in r.iter().zip(mean.iter()).enumerate() {
            c[j] = x as f64 - m;
        }
        for i in 0..d {
            let ci = c[i];
            if ci == 0.0 {
                continue;
            }
            for j in 0..=i {
                cov[(i, j)] += ci * c[j];
            }
        }
    }
    for i in 0..d {
        for j in 0..=i {
            let x = cov[(i, j)] / n;
            cov[(i, j)] = x;
            cov[(j, i)] = x;
        }
    }
    let total: f64 = (0..d).map(|i| cov[(i, i)]).sum();
    if total <= 0.0 || !total.is_finite() {
        return Err(Error::invalid(format!(
            "vectors={}: every term has the same vector",
            v.session.display()
        )));
    }
    let eig = cov
        .self_adjoint_eigen(FaerSide::Lower)
        .map_err(|e| Error::invalid(format!("vectors: PCA failed ({e:?})")))?;
    let kept = width.min(d);
    // eigenvalues ascending: the axes of the largest `kept`, descending
    let axes: Vec<usize> = (0..d).rev().take(kept).collect();
    let var: f64 = axes.iter().map(|&a| eig.S()[a].max(0.0)).sum();
    let explained = var / total;
    // one scale for every kept axis (their relative sizes are information)
    let scale = rms / (var / kept as f64).sqrt().max(f64::MIN_POSITIVE);
    let u = eig.U();
    let normal =
        Normal::new(0.0f32, rms as f32).map_err(|e| Error::invalid(format!("vectors: {e}")))?;
    let mut table = |m: &Array2<f32>, have: &[bool]| -> Array2<f32> {
        let mut out = Array2::<f32>::zeros((m.nrows(), width));
        for ((row, mut o), &f) in m
            .axis_iter(Axis(0))
            .zip(out.axis_iter_mut(Axis(0)))
            .zip(have)
        {
            if f {
                for (j, &a) in axes.iter().enumerate() {
                    let mut s = 0f64;
                    for (i, (&x, &mu)) in row.iter().zip(mean.iter()).enumerate() {
                        s += (x as f64 - mu) * u[(i, a)];
                    }
                    o[j] = (s * scale) as f32;
                }
                for j in kept..width {
                    o[j] = normal.sample(rng);
                }
            } else {
                for x in o.iter_mut() {
                    *x = normal.sample(rng);
                }
            }
        }
        out
    };
    let source = table(&v.source, &v.found_source);
    let target = table(&v.target, &v.found_target);
    Ok(Fitted {
        source,
        target,
        kept,
        explained,
        dim: d,
        found_source: v.found_source.iter().filter(|&&f| f).count(),
        found_target: v.found_target.iter().filter(|&&f| f).count(),
    })
}

/// What a session's `pretrained.json` says of its start.
#[derive(Debug, Clone, Serialize)]
struct Record<'a> {
    session: String,
    checkpoint_blake3: &'a str,
    model: &'a str,
    dim: usize,
    width: usize,
    kept: usize,
    explained_variance: f64,
    rms: f64,
    found_source: usize,
    source_terms: usize,
    found_target: usize,
    target_terms: usize,
}

/// The pretrained start of a job with `vectors=dir`: the resolved vectors
/// ([`require`]) fitted to `width` columns at scale `rms` ([`fit_width`]),
/// said in the log and recorded in the session's `pretrained.json`.
#[allow(clippy::too_many_arguments)]
pub fn start(
    pretrained: Option<&PretrainedVectors>,
    dir: &Path,
    model: &str,
    width: usize,
    rms: f64,
    rng: &mut impl Rng,
    hooks: &mut dyn crate::models::Hooks,
) -> Result<Fitted> {
    let v = require(pretrained, dir, model)?;
    let f = fit_width(v, width, rms, rng)?;
    hooks.log(&summary(model, v, &f));
    hooks.record(RECORD_FILE, &record_json(model, v, &f, rms)?)?;
    Ok(f)
}

/// The JSON of a session's `pretrained.json`.
fn record_json(model: &str, v: &PretrainedVectors, f: &Fitted, rms: f64) -> Result<String> {
    let r = Record {
        session: v.session.display().to_string(),
        checkpoint_blake3: &v.checkpoint_blake3,
        model,
        dim: f.dim,
        width: f.source.ncols(),
        kept: f.kept,
        explained_variance: f.explained,
        rms,
        found_source: f.found_source,
        source_terms: v.found_source.len(),
        found_target: f.found_target,
        target_terms: v.found_target.len(),
    };
    serde_json::to_string_pretty(&r).map_err(|e| Error::invalid(e.to_string()))
}

/// One line saying what the start is.
pub fn summary(model: &str, v: &PretrainedVectors, f: &Fitted) -> String {
    format!(
        "{model}: start from the term vectors of {} ({} of {} source and {} of {} target terms; \
         {} dims → {} columns, {:.1}% of their variance kept)",
        v.session.display(),
        f.found_source,
        v.found_source.len(),
        f.found_target,
        v.found_target.len(),
        f.dim,
        f.source.ncols(),
        100.0 * f.explained
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn vectors(src: Array2<f32>, tgt: Array2<f32>) -> PretrainedVectors {
        PretrainedVectors {
            session: PathBuf::from("s"),
            checkpoint_blake3: "h".into(),
            found_source: vec![true; src.nrows()],
            found_target: vec![true; tgt.nrows()],
            source: src,
            target: tgt,
        }
    }

    fn cos(a: ndarray::ArrayView1<f32>, b: ndarray::ArrayView1<f32>) -> f32 {
        a.dot(&b) / (a.dot(&a).sqrt() * b.dot(&b).sqrt())
    }

    #[test]
    fn a_full_width_fit_keeps_every_cosine_of_the_centred_vectors_across_languages() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let normal = Normal::new(0.0f32, 1.0).unwrap();
        let s = Array2::from_shape_fn((20, 6), |_| normal.sample(&mut rng) + 3.0);
        let t = Array2::from_shape_fn((15, 6), |_| normal.sample(&mut rng) + 3.0);
        let v = vectors(s.clone(), t.clone());
        let f = fit_width(&v, 8, 0.1, &mut rng).unwrap();
        assert_eq!(
            (f.kept, f.source.dim(), f.target.dim()),
            (6, (20, 8), (15, 8))
        );
        assert!((f.explained - 1.0).abs() < 1e-9);
        let all = ndarray::concatenate(Axis(0), &[s.view(), t.view()]).unwrap();
        let mean = all.mean_axis(Axis(0)).unwrap();
        for (i, j) in [(0, 0), (3, 7), (19, 14)] {
            let want = cos((&s.row(i) - &mean).view(), (&t.row(j) - &mean).view());
            let got = cos(
                f.source.row(i).slice(ndarray::s![..6]),
                f.target.row(j).slice(ndarray::s![..6]),
            );
            assert!((want - got).abs() < 1e-4, "{want} vs {got}");
        }
        // the kept coordinates have the model's scale
        let kept = f.source.slice(ndarray::s![.., ..6]).to_owned();
        let kept_t = f.target.slice(ndarray::s![.., ..6]).to_owned();
        let sq: f32 = kept.iter().chain(kept_t.iter()).map(|x| x * x).sum();
        let rms = (sq / (35.0 * 6.0)).sqrt();
        assert!((rms - 0.1).abs() < 1e-4, "{rms}");
    }

    #[test]
    fn a_narrow_fit_keeps_the_largest_axes() {
        // all variance on one axis, a little on another
        let s = Array2::from_shape_fn((10, 3), |(i, j)| match j {
            0 => i as f32,
            1 => (i % 2) as f32 * 0.01,
            _ => 0.0,
        });
        let v = vectors(s, Array2::zeros((0, 3)));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let f = fit_width(&v, 1, 1.0, &mut rng).unwrap();
        assert!(f.explained > 0.999 && f.explained < 1.0, "{}", f.explained);
        // the one column is the ramp (up to sign)
        let c: Vec<f32> = f.source.column(0).to_vec();
        let inc = c.windows(2).all(|w| w[1] > w[0]);
        let dec = c.windows(2).all(|w| w[1] < w[0]);
        assert!(inc || dec, "{c:?}");
    }

    #[test]
    fn rows_without_a_vector_are_random_and_bad_tables_are_refused() {
        let mut v = vectors(Array2::ones((3, 2)), Array2::ones((2, 2)));
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        // all the same: nothing to fit
        assert!(fit_width(&v, 2, 0.1, &mut rng).is_err());
        v.source[[0, 0]] = f32::NAN;
        let e = fit_width(&v, 2, 0.1, &mut rng).unwrap_err().to_string();
        assert!(e.contains("NaN"), "{e}");
        v.found_source = vec![false; 3];
        v.found_target = vec![false; 2];
        let e = fit_width(&v, 2, 0.1, &mut rng).unwrap_err().to_string();
        assert!(e.contains("no term"), "{e}");
        let mut w = vectors(
            Array2::from_shape_fn((4, 2), |(i, j)| (i * 2 + j) as f32 * (i as f32)),
            Array2::zeros((1, 2)),
        );
        w.found_target = vec![false];
        let f = fit_width(&w, 2, 0.1, &mut rng).unwrap();
        assert!(f.target.iter().all(|x| x.is_finite() && *x != 0.0));
        assert_eq!(f.found_target, 0);
    }

    #[test]
    fn the_setting_parses_sessions_and_files() {
        assert_eq!(VectorsSetting::parse("none").unwrap(), VectorsSetting::None);
        assert_eq!(
            VectorsSetting::parse("sessions/e5").unwrap(),
            VectorsSetting::Session("sessions/e5".into())
        );
        assert!(matches!(
            VectorsSetting::parse("a.vec, b.vec").unwrap(),
            VectorsSetting::Files(..)
        ));
        assert!(VectorsSetting::parse("a,b,c").is_err());
        assert!(check_session_only("a.vec,b.vec").is_err());
        assert!(check_any("a.vec,b.vec").is_ok());
    }
}
