//! A mapping baseline, as MUSE (Conneau et al., ICLR 2018, supervised
//! Procrustes with refinement) and VecMap (Artetxe et al., AAAI 2018) do:
//! another session's term vectors of the two languages (`vectors=SESSION`,
//! [`crate::models::kit::pretrained`]), the source ones rotated onto the target
//! ones by an orthogonal map fitted on the training part of the workspace's
//! dictionary, then refined on the words the map itself pairs up by CSLS.
//!
//! - **Normalisation**: every found term vector is made unit length,
//!   mean-centred (each language on its own mean) and made unit length
//!   again (VecMap's `--normalize unit center unit`; MUSE's
//!   `--normalize_embeddings renorm,center,renorm`). Terms without a
//!   vector stay zero rows.
//! - **Fit**: `W = U Vᵀ` from the SVD `Xᵀ Y = U Σ Vᵀ`, where the rows of `X`
//!   and `Y` are the two terms of each training pair: every pair of a source
//!   word of the dictionary's training part ([`BliSplit`] of `bli_seed`, the
//!   split `eval --task bli --bli-seed` scores the other part of) with each
//!   of its translations, both in the job's vocabularies with a vector.
//!   Dictionary words are mapped to terms as lexicon induction maps them
//!   (analysed as the training data; [`crate::models::TrainDictionary`]).
//! - **Refinement** (`refine` rounds; 0: plain Procrustes): among the
//!   `refine_words` most frequent word terms of each language, the pairs
//!   that are mutual nearest neighbours under CSLS (`2 cos − r_s − r_t`,
//!   `r` the mean cosine of a term's `csls_k` nearest terms of the other
//!   language) between the mapped source and the target are added to the
//!   training pairs (which are always kept: the supervision is never
//!   dropped), and `W` is solved again on them.
//!
//! The model is a [`LinearModel`]: `proj.source = X W`, `proj.target = Y`
//! over the whole vocabularies, so texts are tf-idf weighted sums of mapped
//! term vectors and the session searches, evaluates and lists neighbours as
//! every linear model does.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use candle_core::{Device, Tensor};
use faer::Mat;
use ndarray::{Array1, Array2, Axis};
use serde::Serialize;

use crate::corpus::BliSplit;
use crate::models::kit::linear::{fix_parallelism, LinearModel};
use crate::models::kit::pretrained::{self, VectorsSetting};
use crate::models::settings::ModelDef;
use crate::models::settings::{boxed, model_config, s, unset, Check, ModelConfig, Settings};
use crate::models::{Hooks, Model, Params, Phase, PretrainedVectors, Resume, TrainData, Trainer};
use crate::space::Similarity;
use crate::text::{Vocabs, Vocabulary};
use crate::{Error, Result};

/// The registry name.
pub const KIND: &str = "procrustes";

/// Unit length, mean-centred, unit length again, over the rows with
/// `found` (the others are zero rows and take no part in the mean).
/// Errors on a non-finite value or no found row.
pub fn normalise(m: &Array2<f32>, found: &[bool]) -> Result<Array2<f32>> {
    if m.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid(
            "procrustes: a term vector holds NaN or infinity".to_string(),
        ));
    }
    if found.len() != m.nrows() {
        return Err(Error::invalid(format!(
            "procrustes: {} terms marked found or not for {} vectors",
            found.len(),
            m.nrows()
        )));
    }
    let n = found.iter().filter(|&&f| f).count();
    if n == 0 {
        return Err(Error::invalid(
            "procrustes: no term of a language has a vector".to_string(),
        ));
    }
    let mut out = m.clone();
    for (mut r, &f) in out.axis_iter_mut(Axis(0)).zip(found) {
        if !f {
            r.fill(0.0);
        }
    }
    out = crate::models::kit::linear::unit_rows(out);
    let mut mean = Array1::<f32>::zeros(m.ncols());
    for (r, &f) in out.axis_iter(Axis(0)).zip(found) {
        if f {
            mean += &r;
        }
    }
    mean /= n as f32;
    for (mut r, &f) in out.axis_iter_mut(Axis(0)).zip(found) {
        if f {
            r -= &mean;
        }
    }
    Ok(crate::models::kit::linear::unit_rows(out))
}

/// The orthogonal `W` (`d × d`) that minimises `Σ ‖x_s W − y_t‖²` over
/// `pairs` of rows `(s, t)` of `x` and `y`: `U Vᵀ` from the SVD of `Xᵀ Y`.
pub fn solve(x: &Array2<f32>, y: &Array2<f32>, pairs: &[(usize, usize)]) -> Result<Array2<f32>> {
    let d = x.ncols();
    if y.ncols() != d || d == 0 {
        return Err(Error::invalid(format!(
            "procrustes: the languages' vectors have {} and {} dimensions",
            d,
            y.ncols()
        )));
    }
    if pairs.is_empty() {
        return Err(Error::invalid(
            "procrustes: no pair to fit the map on".to_string(),
        ));
    }
    fix_parallelism();
    let mut m = Mat::<f64>::zeros(d, d);
    for &(s, t) in pairs {
        let (xs, yt) = (x.row(s), y.row(t));
        for i in 0..d {
            let a = xs[i] as f64;
            if a == 0.0 {
                continue;
            }
            for j in 0..d {
                m[(i, j)] += a * yt[j] as f64;
            }
        }
    }
    let svd = m
        .thin_svd()
        .map_err(|e| Error::invalid(format!("procrustes: SVD did not converge: {e:?}")))?;
    let w = svd.U() * svd.V().transpose();
    Ok(Array2::from_shape_fn((d, d), |(i, j)| w[(i, j)] as f32))
}

/// Pairs `(i, j)` of rows of `a` and `b` (unit rows) that are each other's
/// nearest neighbour under CSLS with `k` neighbours: `2 cos(a_i, b_j) −
/// r_a(i) − r_b(j)`.
pub fn csls_mutual(a: &Array2<f32>, b: &Array2<f32>, k: usize) -> Vec<(usize, usize)> {
    if a.nrows() == 0 || b.nrows() == 0 {
        return Vec::new();
    }
    let mean_top = crate::index::dense::mean_top_k;
    let ra = mean_top(a, b, k, Similarity::Cosine);
    let rb = mean_top(b, a, k, Similarity::Cosine);
    // best column of every row, best row of every column (one blocked pass)
    let mut row_best = vec![(f32::NEG_INFINITY, usize::MAX); a.nrows()];
    let mut col_best = vec![(f32::NEG_INFINITY, usize::MAX); b.nrows()];
    const BLOCK: usize = 1024;
    for (bi, chunk) in a.axis_chunks_iter(Axis(0), BLOCK).enumerate() {
        let sims = chunk.dot(&b.t());
        for (r, row) in sims.axis_iter(Axis(0)).enumerate() {
            let i = bi * BLOCK + r;
            for (j, &c) in row.iter().enumerate() {
                let s = 2.0 * c - ra[i] - rb[j];
                // ties go to the lower index (a strict comparison)
                if s > row_best[i].0 {
                    row_best[i] = (s, j);
                }
                if s > col_best[j].0 {
                    col_best[j] = (s, i);
                }
            }
        }
    }
    row_best
        .iter()
        .enumerate()
        .filter(|(i, (_, j))| *j != usize::MAX && col_best[*j].1 == *i)
        .map(|(i, (_, j))| (i, *j))
        .collect()
}

/// What one refinement round did.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Mutual CSLS pairs among the candidate words.
    pub induced: usize,
    /// Of them, pairs the training part lacks (added to it).
    pub added: usize,
}

/// A fitted map.
#[derive(Debug, Clone)]
pub struct Fit {
    /// The orthogonal map, `d × d`.
    pub w: Array2<f32>,
    /// Each refinement round.
    pub rounds: Vec<Round>,
}

/// Fits `W` on `seed` pairs of rows of `x` and `y` (normalised), then
/// refines it `refine` times on the seed pairs and the mutual CSLS
/// neighbours (`k` neighbours) between the mapped rows `cand_x` of `x` and
/// the rows `cand_y` of `y`.
pub fn fit(
    x: &Array2<f32>,
    y: &Array2<f32>,
    seed: &[(usize, usize)],
    refine: usize,
    (cand_x, cand_y): (&[usize], &[usize]),
    k: usize,
) -> Result<Fit> {
    let mut w = solve(x, y, seed)?;
    let seed_set: BTreeSet<(usize, usize)> = seed.iter().copied().collect();
    let cy = y.select(Axis(0), cand_y);
    let cx = x.select(Axis(0), cand_x);
    let mut rounds = Vec::with_capacity(refine);
    for _ in 0..refine {
        let mapped = crate::models::kit::linear::unit_rows(cx.dot(&w));
        let induced: Vec<(usize, usize)> = csls_mutual(&mapped, &cy, k)
            .into_iter()
            .map(|(i, j)| (cand_x[i], cand_y[j]))
            .collect();
        let mut pairs = seed_set.clone();
        pairs.extend(induced.iter().copied());
        rounds.push(Round {
            induced: induced.len(),
            added: pairs.len() - seed_set.len(),
        });
        let pairs: Vec<(usize, usize)> = pairs.into_iter().collect();
        w = solve(x, y, &pairs)?;
    }
    Ok(Fit { w, rounds })
}

/// The training pairs of `v`'s terms: every source word of `dict`'s
/// training part under `seed` with each of its translations, both in the
/// vocabularies with a vector. Returns the pairs and the training part's
/// size in words.
pub fn training_pairs(
    entries: &HashMap<String, Vec<String>>,
    seed: u64,
    vocabs: &Vocabs,
    v: &PretrainedVectors,
) -> (Vec<(usize, usize)>, usize) {
    let split = BliSplit::of(entries, seed);
    let mut pairs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for s in &split.train {
        let Some(si) = vocabs.source.id(s).map(|i| i as usize) else {
            continue;
        };
        if !v.found_source.get(si).copied().unwrap_or(false) {
            continue;
        }
        for t in &entries[s] {
            if let Some(ti) = vocabs.target.id(t).map(|i| i as usize) {
                if v.found_target.get(ti).copied().unwrap_or(false) && seen.insert((si, ti)) {
                    pairs.push((si, ti));
                }
            }
        }
    }
    (pairs, split.train.len())
}

/// The `n` most frequent word terms of `vocab` (by document frequency;
/// never the n-gram fallback's units) that have a vector.
pub fn frequent_words(vocab: &Vocabulary, found: &[bool], n: usize) -> Vec<usize> {
    let mut ids: Vec<usize> = (0..vocab.words().min(found.len()))
        .filter(|&i| found[i])
        .collect();
    ids.sort_by(|&a, &b| vocab.df[b].cmp(&vocab.df[a]).then(a.cmp(&b)));
    ids.truncate(n);
    ids
}

model_config! {
    /// The Procrustes map's settings, as given (`--set`) and recorded
    /// (`config.toml`).
    pub struct Config {
        bli_seed: u64 = s(
            "1",
            Check::Int { min: 0, max: u64::MAX },
            "which split of the workspace's dictionary it fits on (the training part); must match eval's --bli-seed",
        ),
        csls_k: usize = s(
            "10",
            Check::Int { min: 1, max: 10_000 },
            "refinement: nearest terms in CSLS's hub penalty",
        ),
        refine: usize = s(
            "5",
            Check::Int { min: 0, max: 1_000 },
            "refinement rounds on the mutual CSLS neighbours (0: plain Procrustes)",
        ),
        refine_words: usize = s(
            "15000",
            Check::Int { min: 1, max: 100_000_000 },
            "refinement: the most frequent words per language it pairs up",
        ),
        vectors: Option<String> = unset(
            Check::Parse(pretrained::check_session_only),
            "required: the session (an encoder, or any model with a space) whose term vectors it maps",
        ),
    }
}

impl ModelConfig for Config {
    fn vectors(&self) -> Result<Option<VectorsSetting>> {
        vectors_setting(&self.vectors).map(Some)
    }
    fn bli_seed(&self) -> Option<u64> {
        Some(self.bli_seed)
    }
}

/// Procrustes in the registry.
pub static DEF: ModelDef = ModelDef {
    name: KIND,
    summary: "orthogonal Procrustes map between another session's term vectors of the two languages, fitted on the dictionary's training part and refined by CSLS (MUSE, Conneau et al., ICLR 2018)",
    space: true,
    runner: true,
    gpu: false,
    word2vec: false,
    settings: Config::SETTINGS,
    read: boxed::<Config>,
    trainer: Some(|| Box::new(ProcrustesTrainer)),
    text: &[],
    presets: &[],
};

/// The `vectors` setting as given (no default: `None` when absent).
fn vectors_setting(v: &Option<String>) -> Result<VectorsSetting> {
    match v {
        None => Ok(VectorsSetting::None),
        Some(v) => VectorsSetting::parse(v)
            .map_err(|e| Error::invalid(format!("{KIND}: --set vectors={v}: {e}"))),
    }
}

/// The session folder of the required `vectors` setting.
fn vectors_dir(v: &VectorsSetting) -> Result<&Path> {
    v.session().ok_or_else(|| {
        Error::invalid(format!(
            "{KIND}: set vectors=SESSION (an encoder session, or any session with a space): \
             the term vectors it maps; `none` leaves nothing to map"
        ))
    })
}

/// What a procrustes session records of its fit (`pretrained.json`).
#[derive(Debug, Serialize)]
struct Record<'a> {
    session: String,
    checkpoint_blake3: &'a str,
    model: &'static str,
    dim: usize,
    normalisation: &'static str,
    dictionary: String,
    bli_seed: u64,
    train_words: usize,
    train_pairs: usize,
    refine_words: usize,
    csls_k: usize,
    rounds: &'a [Round],
}

/// Trains and reloads procrustes maps.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcrustesTrainer;

/// The map's settings, read once from its typed [`Config`].
#[derive(Debug, Clone)]
struct MapConfig {
    /// `vectors`: the session whose term vectors are mapped (required).
    vectors: VectorsSetting,
    /// `bli_seed`: the dictionary split fitted on.
    bli_seed: u64,
    /// `refine`: CSLS refinement rounds.
    refine: usize,
    /// `refine_words`: the most frequent words refinement looks at.
    refine_words: usize,
    /// `csls_k`: CSLS's neighbourhood.
    csls_k: usize,
}

impl MapConfig {
    /// Reads every setting; `vectors` must name a session.
    fn from_params(params: &Params) -> Result<MapConfig> {
        let p = Config::from_params(params, KIND)?;
        let cfg = MapConfig {
            vectors: vectors_setting(&p.vectors)?,
            bli_seed: p.bli_seed,
            refine: p.refine,
            refine_words: p.refine_words,
            csls_k: p.csls_k,
        };
        vectors_dir(&cfg.vectors)?;
        Ok(cfg)
    }
}

impl Trainer for ProcrustesTrainer {
    fn check(&self, params: &Params) -> Result<()> {
        MapConfig::from_params(params).map(|_| ())
    }

    fn plan(&self, data: &TrainData, _params: &Params) -> Result<Vec<Phase>> {
        let n = data.dictionary.as_ref().map_or(0, |d| d.entries.len());
        Ok(vec![Phase::closed_form(n.max(1))])
    }

    fn train(
        &self,
        data: &TrainData,
        params: &Params,
        _device: &Device,
        _seed: u64,
        resume: Option<Resume>,
        hooks: &mut dyn Hooks,
    ) -> Result<Box<dyn Model>> {
        if resume.is_some() {
            hooks.log(&format!(
                "{KIND}: a closed-form fit has no partial state to resume; fitting again (same result)"
            ));
        }
        let MapConfig {
            vectors: setting,
            bli_seed,
            refine,
            refine_words,
            csls_k: k,
        } = MapConfig::from_params(params)?;
        let dir = vectors_dir(&setting)?;
        params.check_unused()?;
        let v = pretrained::require(data.pretrained.as_ref(), dir, KIND)?;
        let (vs, vt) = (&data.vocabs.source, &data.vocabs.target);
        if v.source.nrows() != vs.len()
            || v.target.nrows() != vt.len()
            || v.found_source.len() != vs.len()
            || v.found_target.len() != vt.len()
        {
            return Err(Error::invalid(format!(
                "{KIND}: vectors={}: tables do not fit this job's vocabularies",
                dir.display()
            )));
        }
        let dict = data.dictionary.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "{KIND}: the workspace's dictionary was not loaded for this job \
                 (start it with `rosetta train` on a workspace with a [dictionary])"
            ))
        })?;
        let (pairs, train_words) = training_pairs(&dict.entries, bli_seed, &data.vocabs, v);
        if pairs.is_empty() {
            return Err(Error::file(
                &dict.file,
                format!(
                    "{KIND}: no word of the dictionary's training part (bli_seed {bli_seed}, \
                     {train_words} words) has itself and a translation among this job's terms \
                     with a vector: nothing to fit the map on"
                ),
            ));
        }
        let x = normalise(&v.source, &v.found_source)?;
        let y = normalise(&v.target, &v.found_target)?;
        let cx = frequent_words(vs, &v.found_source, refine_words);
        let cy = frequent_words(vt, &v.found_target, refine_words);
        let t0 = std::time::Instant::now();
        let f = fit(&x, &y, &pairs, refine, (&cx, &cy), k)?;
        let rounds: Vec<String> = f
            .rounds
            .iter()
            .map(|r| format!("{} (+{})", r.induced, r.added))
            .collect();
        hooks.log(&format!(
            "{KIND}: map of {} dims fitted on {} pairs ({train_words} training words of {}, \
             bli_seed {bli_seed}) in {:.1}s; refinement on {} × {} words, CSLS k={k}: mutual pairs \
             per round {}",
            x.ncols(),
            pairs.len(),
            dict.file.display(),
            t0.elapsed().as_secs_f64(),
            cx.len(),
            cy.len(),
            if rounds.is_empty() {
                "none (refine=0)".to_string()
            } else {
                rounds.join(", ")
            }
        ));
        let record = Record {
            session: dir.display().to_string(),
            checkpoint_blake3: &v.checkpoint_blake3,
            model: KIND,
            dim: x.ncols(),
            normalisation: "unit, centre, unit",
            dictionary: dict.file.display().to_string(),
            bli_seed,
            train_words,
            train_pairs: pairs.len(),
            refine_words,
            csls_k: k,
            rounds: &f.rounds,
        };
        let json =
            serde_json::to_string_pretty(&record).map_err(|e| Error::invalid(e.to_string()))?;
        hooks.record(pretrained::RECORD_FILE, &json)?;
        let model = LinearModel::new(KIND, data.vocabs.clone(), x.dot(&f.w), y)?;
        hooks.epoch_end("train", 1, &model, Vec::new())?;
        Ok(Box::new(model))
    }

    fn load(
        &self,
        vocabs: &Vocabs,
        tensors: HashMap<String, Tensor>,
        _params: &Params,
        _device: &Device,
    ) -> Result<Box<dyn Model>> {
        Ok(Box::new(LinearModel::from_tensors(KIND, vocabs, &tensors)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    fn gaussian(rows: usize, cols: usize, sd: f32, rng: &mut impl rand::Rng) -> Array2<f32> {
        let n = Normal::new(0.0f32, sd).unwrap();
        Array2::from_shape_fn((rows, cols), |_| n.sample(rng))
    }

    /// A random orthogonal `d × d` matrix (the Q of a Gaussian's QR).
    fn rotation(d: usize, rng: &mut impl rand::Rng) -> Array2<f32> {
        let g = gaussian(d, d, 1.0, rng);
        let m = Mat::<f64>::from_fn(d, d, |i, j| g[[i, j]] as f64);
        let q = m.qr().compute_thin_Q();
        Array2::from_shape_fn((d, d), |(i, j)| q[(i, j)] as f32)
    }

    #[test]
    fn procrustes_recovers_a_known_rotation() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (n, d) = (300, 12);
        let q = rotation(d, &mut rng);
        let x = gaussian(n, d, 1.0, &mut rng);
        let y = x.dot(&q) + gaussian(n, d, 1e-5, &mut rng);
        let pairs: Vec<(usize, usize)> = (0..n).map(|i| (i, i)).collect();
        let w = solve(&x, &y, &pairs).unwrap();
        let worst = (&w - &q).iter().fold(0f32, |a, v| a.max(v.abs()));
        assert!(worst < 1e-4, "{worst}");
        // orthogonal
        let eye = w.t().dot(&w);
        for i in 0..d {
            for j in 0..d {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((eye[[i, j]] - want).abs() < 1e-4);
            }
        }
        assert!(solve(&x, &y, &[]).is_err());
    }

    /// Share of rows `i` of `x` whose nearest row of `y` after the map is `i`.
    fn accuracy(x: &Array2<f32>, y: &Array2<f32>, w: &Array2<f32>) -> f64 {
        let m = x.dot(w);
        let s = m.dot(&y.t());
        let hits = s
            .axis_iter(Axis(0))
            .enumerate()
            .filter(|(i, r)| {
                let best = r
                    .iter()
                    .enumerate()
                    .fold(
                        (0, f32::NEG_INFINITY),
                        |a, (j, &v)| if v > a.1 { (j, v) } else { a },
                    );
                best.0 == *i
            })
            .count();
        hits as f64 / x.nrows() as f64
    }

    #[test]
    fn refinement_adds_correct_pairs_to_a_partial_seed_dictionary() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let (n, d) = (400, 16);
        let q = rotation(d, &mut rng);
        let found = vec![true; n];
        let x = normalise(&gaussian(n, d, 1.0, &mut rng), &found).unwrap();
        let y = normalise(&(x.dot(&q) + gaussian(n, d, 0.03, &mut rng)), &found).unwrap();
        // a seed too small to pin the map down: 12 pairs for 16 dimensions
        let seed: Vec<(usize, usize)> = (0..12).map(|i| (i, i)).collect();
        let all: Vec<usize> = (0..n).collect();
        let plain = fit(&x, &y, &seed, 0, (&all, &all), 10).unwrap();
        assert!(plain.rounds.is_empty());
        let refined = fit(&x, &y, &seed, 3, (&all, &all), 10).unwrap();
        let (a0, a1) = (accuracy(&x, &y, &plain.w), accuracy(&x, &y, &refined.w));
        assert!(a0 < 0.8 && a1 > 0.99, "plain {a0}, refined {a1}");
        assert_eq!(refined.rounds.len(), 3);
        assert!(refined.rounds[0].added > 0, "{:?}", refined.rounds);
        // the last round's mutual pairs are the true ones
        let mapped = crate::models::kit::linear::unit_rows(x.dot(&refined.w));
        let mutual = csls_mutual(&mapped, &y, 10);
        let right = mutual.iter().filter(|(i, j)| i == j).count();
        assert!(
            mutual.len() > 9 * n / 10 && right == mutual.len(),
            "{right} of {}",
            mutual.len()
        );
    }

    #[test]
    fn normalisation_centres_each_language_and_keeps_missing_rows_zero() {
        let m = ndarray::array![[3.0f32, 0.0], [0.0, 2.0], [9.0, 9.0]];
        let found = [true, true, false];
        let n = normalise(&m, &found).unwrap();
        // unit (1,0), (0,1); centred on their mean (.5,.5); unit again
        let h = std::f32::consts::FRAC_1_SQRT_2;
        let want = ndarray::array![[h, -h], [-h, h], [0.0, 0.0]];
        let worst = (&n - &want).iter().fold(0f32, |a, v| a.max(v.abs()));
        assert!(worst < 1e-6, "{n:?}");
        assert!(normalise(&m, &[false; 3]).is_err());
        let mut bad = m.clone();
        bad[[0, 0]] = f32::NAN;
        assert!(normalise(&bad, &found).is_err());
    }
}
