//! Pseudo-relevance mining for XCNN's monolingual pre-initialisation (seed
//! paper 000, Sec. 4.1 and 5.1): every text of a monolingual collection is a
//! query, and its best match in the same collection, other than itself, is
//! its positive.
//!
//! The scores are exact BM25 (or log-tf·idf cosine) over the texts' raw counts
//! on the target vocabulary. Both are sums over the query's terms of
//! `query weight × impact(term, doc)`, so each term's postings carry the
//! per-document impact and the term's largest impact bounds its contribution
//! (as in MaxScore, Turtle and Flood 1995). Per query, for the top 1 only:
//!
//! 1. *seed*: the postings of the query's rarest terms are accumulated and
//!    their best few documents scored in full: a threshold θ close to the
//!    final best score;
//! 2. *split*: the frequent terms whose bounds sum to less than ¾ θ will only
//!    be looked up; a document holding nothing else cannot win;
//! 3. *accumulate* the other terms' postings term at a time (a dense
//!    per-thread accumulator);
//! 4. *verify* each accumulated document whose bound still beats θ: look the
//!    frequent terms up (binary search, most bounding first, stopping as soon
//!    as the bound falls below θ), score the survivors in full, raise θ.
//!
//! Scoring every posting of the frequent terms is what brute force spends its
//! time on (a term in most texts has a posting list as long as the
//! collection); here they are touched only for a few candidates. It is exact:
//! the result equals [`mine_positives_exhaustive`], which scores every posting
//! (the tests check this on random collections). Full scores are summed in
//! `f64` in query-row order in both, so they are bit-identical; pruning
//! decisions leave a relative slack of 1e-9 so that rounding never prunes a
//! document that could win. Ties go to the lower row.
//!
//! **Duplicates.** A different row with exactly the same counts as the query
//! is by construction its best match. It is allowed as the positive by default
//! (it is a different text of the collection, as the paper's "most relevant
//! document"), but [`MineConfig::skip_duplicates`] leaves such rows out: an
//! identical pair teaches the model's positive term nothing (its cosine is 1
//! whatever the weights), so with many duplicates (captions, refrains) the next
//! best, different text may train better.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::bm25::{idf as bm25_idf, Postings};
use crate::text::{CsrMatrix, Vocabulary};
use crate::{Error, Result};

/// How two texts are scored.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "scheme")]
pub enum MineScoring {
    /// BM25 with Lucene's idf; the query's counts are its term weights.
    Bm25 {
        /// Term-frequency saturation.
        k1: f64,
        /// Length normalisation.
        b: f64,
    },
    /// Cosine of `(1 + ln tf) · ln(N / df)` vectors (the paper's TF-IDF).
    TfIdfCosine,
}

/// Where document frequencies come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdfSource {
    /// Counted on the mined collection itself (the searched index).
    Collection,
    /// The vocabulary's `df` and `n_docs` (the training texts).
    Vocabulary,
}

/// Settings of a mining run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MineConfig {
    /// The score.
    pub scoring: MineScoring,
    /// Document frequencies.
    pub idf: IdfSource,
    /// Leave out rows whose counts equal the query's (see the module doc).
    pub skip_duplicates: bool,
}

impl Default for MineConfig {
    fn default() -> Self {
        MineConfig {
            scoring: MineScoring::Bm25 { k1: 1.2, b: 0.75 },
            idf: IdfSource::Collection,
            skip_duplicates: false,
        }
    }
}

/// Positives and what it took to find them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mined {
    /// For each text, the row of its best match other than itself, or `None`
    /// when no other text shares a term of positive weight.
    pub positives: Vec<Option<u32>>,
    /// Texts that got a positive.
    pub with_positive: usize,
    /// Identical rows passed over (with `skip_duplicates`).
    pub duplicates_skipped: usize,
    /// Postings accumulated (work done; brute force reads every posting of
    /// every query term).
    pub postings: u64,
    /// Candidates scored in full (not pruned).
    pub scored: u64,
}

/// Impact-annotated postings of a collection and each text's query weights.
struct Impacts {
    /// Postings whose values are impacts.
    post: Postings,
    /// Largest impact of each term.
    max_imp: Vec<f32>,
    /// Query weight of every entry of the count matrix (aligned with it).
    qw: Vec<f32>,
}

fn impacts(counts: &CsrMatrix, vocab: &Vocabulary, cfg: &MineConfig) -> Result<Impacts> {
    if vocab.len() != counts.n_cols {
        return Err(Error::invalid(format!(
            "count matrix has {} columns but the vocabulary {} terms",
            counts.n_cols,
            vocab.len()
        )));
    }
    if counts.n_rows() > u32::MAX as usize {
        return Err(Error::invalid("too many texts to mine"));
    }
    if counts.values.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(Error::invalid(
            "mining needs raw counts (finite, not negative)",
        ));
    }
    let n_rows = counts.n_rows();
    let lens: Vec<f64> = (0..n_rows)
        .map(|i| counts.row(i).1.iter().map(|&v| v as f64).sum())
        .collect();
    let nonempty = lens.iter().filter(|&&l| l > 0.0).count();
    let (n, df): (usize, Vec<usize>) = match cfg.idf {
        IdfSource::Collection => {
            let mut df = vec![0usize; counts.n_cols];
            for (&c, &v) in counts.indices.iter().zip(&counts.values) {
                if v > 0.0 {
                    df[c as usize] += 1;
                }
            }
            (nonempty, df)
        }
        IdfSource::Vocabulary => (vocab.n_docs, vocab.df.iter().map(|&d| d as usize).collect()),
    };
    let mut w = counts.clone();
    let qw: Vec<f32>;
    match cfg.scoring {
        MineScoring::Bm25 { k1, b } => {
            super::Bm25Params { k1, b }.validate()?;
            let avg = if nonempty > 0 {
                lens.iter().sum::<f64>() / nonempty as f64
            } else {
                1.0
            };
            let idf: Vec<f64> = df.iter().map(|&d| bm25_idf(n, d.min(n))).collect();
            for (i, len) in lens.iter().enumerate() {
                let norm = k1 * (1.0 - b + b * len / avg);
                for j in w.indptr[i]..w.indptr[i + 1] {
                    let tf = w.values[j] as f64;
                    w.values[j] =
                        (idf[w.indices[j] as usize] * tf * (k1 + 1.0) / (tf + norm)) as f32;
                }
            }
            qw = counts.values.clone();
        }
        MineScoring::TfIdfCosine => {
            let idf: Vec<f64> = df
                .iter()
                .map(|&d| {
                    if d == 0 || n == 0 {
                        0.0
                    } else {
                        (n as f64 / d as f64).ln().max(0.0)
                    }
                })
                .collect();
            for i in 0..n_rows {
                let (a, e) = (w.indptr[i], w.indptr[i + 1]);
                let mut norm = 0.0f64;
                for j in a..e {
                    let tf = w.values[j] as f64;
                    let x = if tf > 0.0 {
                        (1.0 + tf.ln()) * idf[w.indices[j] as usize]
                    } else {
                        0.0
                    };
                    norm += x * x;
                    w.values[j] = x as f32;
                }
                let norm = norm.sqrt();
                for j in a..e {
                    w.values[j] = if norm > 0.0 {
                        (w.values[j] as f64 / norm) as f32
                    } else {
                        0.0
                    };
                }
            }
            qw = w.values.clone();
        }
    }
    let post = Postings::from_csr(&w);
    let max_imp = (0..post.n_terms() as u32)
        .map(|t| post.list(t).1.iter().copied().fold(0.0f32, f32::max))
        .collect();
    Ok(Impacts { post, max_imp, qw })
}

/// Relative slack of pruning decisions against rounding.
const SLACK: f64 = 1e-9;

/// One query term during a search.
struct Term<'a> {
    /// Position of the term in the query row (ascending term id).
    canon: usize,
    w: f64,
    ub: f64,
    docs: &'a [u32],
    imps: &'a [f32],
}

impl Term<'_> {
    /// This term's contribution to document `d` (0 when absent).
    #[inline]
    fn contribution(&self, d: u32) -> f64 {
        match self.docs.binary_search(&d) {
            Ok(p) => self.w * self.imps[p] as f64,
            Err(_) => 0.0,
        }
    }
}

/// Per-thread scratch space of the miner.
struct Scratch {
    acc: Vec<f64>,
    touched: Vec<u32>,
    cand: Vec<(u32, f64)>,
    contrib: Vec<f64>,
}

#[derive(Default)]
struct Found {
    best: Option<u32>,
    dup_skipped: bool,
    postings: u64,
    scored: u64,
}

fn same_row(counts: &CsrMatrix, a: usize, b: usize) -> bool {
    counts.row(a) == counts.row(b)
}

/// Documents scored in full to seed the threshold.
const SEED_DOCS: usize = 16;
/// Postings of the rarest terms accumulated to pick the seed documents.
const SEED_POSTINGS: usize = 256;
/// The lookup terms' summed bounds stay below this share of the seed
/// threshold (more terms accumulated, fewer candidates to look up).
const LOOKUP_SHARE: f64 = 0.75;

/// The search state of one query.
struct Best<'a> {
    q: usize,
    counts: &'a CsrMatrix,
    skip_dup: bool,
    theta: f64,
    best: Option<u32>,
    found: Found,
}

impl Best<'_> {
    /// The exact score of `d`, summed in query-row order (as the brute force).
    fn exact(&mut self, terms: &[Term], contrib: &mut [f64], d: u32) -> f64 {
        self.found.scored += 1;
        contrib.iter_mut().for_each(|x| *x = 0.0);
        for t in terms {
            contrib[t.canon] = t.contribution(d);
        }
        let mut s = 0.0f64;
        for x in contrib.iter() {
            s += *x;
        }
        s
    }

    /// Offers `d` with exact score `s`: a higher score wins, a tie goes to
    /// the lower row.
    fn offer(&mut self, d: u32, s: f64) {
        let better =
            s > self.theta || (s == self.theta && s > 0.0 && self.best.is_some_and(|b| d < b));
        if !better {
            return;
        }
        if self.skip_dup && same_row(self.counts, self.q, d as usize) {
            self.found.dup_skipped = true;
            return;
        }
        self.theta = s;
        self.best = Some(d);
    }
}

/// The best match of row `q`: the threshold is seeded by scoring documents
/// of the query's rarest terms, then the terms whose bounds can beat the
/// threshold are accumulated term at a time and the remaining (frequent)
/// terms are only looked up for candidates whose bound still beats it.
fn best_match(
    q: usize,
    counts: &CsrMatrix,
    imp: &Impacts,
    skip_dup: bool,
    sc: &mut Scratch,
) -> Found {
    let (a, e) = (counts.indptr[q], counts.indptr[q + 1]);
    let mut terms: Vec<Term> = Vec::with_capacity(e - a);
    for j in a..e {
        let t = counts.indices[j];
        let w = imp.qw[j] as f64;
        let (docs, imps) = imp.post.list(t);
        if w > 0.0 && !docs.is_empty() {
            terms.push(Term {
                canon: terms.len(),
                w,
                ub: w * imp.max_imp[t as usize] as f64,
                docs,
                imps,
            });
        }
    }
    let m = terms.len();
    let mut st = Best {
        q,
        counts,
        skip_dup,
        theta: 0.0,
        best: None,
        found: Found::default(),
    };
    if m == 0 {
        return st.found;
    }
    sc.contrib.clear();
    sc.contrib.resize(m, 0.0);
    // ascending bound; prefix[i] = bound of terms 0..=i together
    terms.sort_by(|x, y| x.ub.total_cmp(&y.ub).then(x.canon.cmp(&y.canon)));
    let mut prefix = Vec::with_capacity(m);
    let mut run = 0.0;
    for t in &terms {
        run += t.ub;
        prefix.push(run);
    }
    // 1. seed the threshold: accumulate the rarest terms' short lists and
    // score their best few documents in full
    let mut seeded = 0usize;
    for t in terms.iter().rev() {
        if seeded >= SEED_POSTINGS {
            break;
        }
        seeded += t.docs.len();
        for (&d, &x) in t.docs.iter().zip(t.imps) {
            let acc = &mut sc.acc[d as usize];
            if *acc == 0.0 {
                sc.touched.push(d);
            }
            *acc += t.w * x as f64;
        }
    }
    sc.cand.clear();
    for &d in &sc.touched {
        let s = std::mem::take(&mut sc.acc[d as usize]);
        if d as usize != q {
            sc.cand.push((d, s));
        }
    }
    sc.touched.clear();
    let n_seed = SEED_DOCS.min(sc.cand.len());
    if n_seed > 0 && n_seed < sc.cand.len() {
        sc.cand
            .select_nth_unstable_by(n_seed - 1, |x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    }
    for i in 0..n_seed {
        let d = sc.cand[i].0;
        let s = st.exact(&terms, &mut sc.contrib, d);
        st.offer(d, s);
    }
    // 2. split: terms 0..n_look are looked up, the rest accumulated
    let mut n_look = 0;
    while n_look < m && prefix[n_look] * (1.0 + SLACK) < st.theta * LOOKUP_SHARE {
        n_look += 1;
    }
    let look_bound = if n_look > 0 { prefix[n_look - 1] } else { 0.0 };
    for t in &terms[n_look..] {
        st.found.postings += t.docs.len() as u64;
        for (&d, &x) in t.docs.iter().zip(t.imps) {
            let acc = &mut sc.acc[d as usize];
            if *acc == 0.0 {
                sc.touched.push(d);
            }
            *acc += t.w * x as f64;
        }
    }
    // 3. candidates: bound check, lookups of the frequent terms (most
    // bounding first), exact score
    for i in 0..sc.touched.len() {
        let d = sc.touched[i];
        let s0 = std::mem::take(&mut sc.acc[d as usize]);
        if d as usize == q || (s0 + look_bound) * (1.0 + SLACK) < st.theta {
            continue;
        }
        let mut s = s0;
        let mut alive = true;
        for j in (0..n_look).rev() {
            if (s + prefix[j]) * (1.0 + SLACK) < st.theta {
                alive = false;
                break;
            }
            s += terms[j].contribution(d);
        }
        if alive && s * (1.0 + SLACK) >= st.theta {
            let x = st.exact(&terms, &mut sc.contrib, d);
            st.offer(d, x);
        }
    }
    sc.touched.clear();
    st.found.best = st.best;
    st.found
}

/// For every row of `counts` (raw term counts over `vocab`, one text per
/// row), its best match in the same matrix other than itself: the
/// pseudo-relevant positive. Exact, pruned, parallel over texts on the
/// current rayon pool.
pub fn mine_positives(counts: &CsrMatrix, vocab: &Vocabulary, cfg: &MineConfig) -> Result<Mined> {
    let imp = impacts(counts, vocab, cfg)?;
    let found: Vec<Found> = (0..counts.n_rows())
        .into_par_iter()
        .map_init(
            || Scratch {
                acc: vec![0.0; counts.n_rows()],
                touched: Vec::new(),
                cand: Vec::new(),
                contrib: Vec::new(),
            },
            |sc, q| best_match(q, counts, &imp, cfg.skip_duplicates, sc),
        )
        .collect();
    let mut out = Mined {
        positives: Vec::with_capacity(found.len()),
        ..Default::default()
    };
    for f in found {
        out.with_positive += f.best.is_some() as usize;
        out.duplicates_skipped += f.dup_skipped as usize;
        out.postings += f.postings;
        out.scored += f.scored;
        out.positives.push(f.best);
    }
    Ok(out)
}

/// [`mine_positives`] by scoring every posting of every query term: the
/// reference the pruned search must equal (slow: for tests and checks).
pub fn mine_positives_exhaustive(
    counts: &CsrMatrix,
    vocab: &Vocabulary,
    cfg: &MineConfig,
) -> Result<Vec<Option<u32>>> {
    let imp = impacts(counts, vocab, cfg)?;
    let n = counts.n_rows();
    Ok((0..n)
        .into_par_iter()
        .map_init(
            || vec![0.0f64; n],
            |acc, q| {
                let mut touched = Vec::new();
                for j in counts.indptr[q]..counts.indptr[q + 1] {
                    let w = imp.qw[j] as f64;
                    if w <= 0.0 {
                        continue;
                    }
                    let (docs, imps) = imp.post.list(counts.indices[j]);
                    for (&d, &x) in docs.iter().zip(imps) {
                        if acc[d as usize] == 0.0 {
                            touched.push(d);
                        }
                        acc[d as usize] += w * x as f64;
                    }
                }
                let mut best: Option<(u32, f64)> = None;
                touched.sort_unstable();
                for d in touched {
                    let s = std::mem::take(&mut acc[d as usize]);
                    if d as usize == q || s <= 0.0 {
                        continue;
                    }
                    if cfg.skip_duplicates && same_row(counts, q, d as usize) {
                        continue;
                    }
                    if best.is_none_or(|(_, b)| s > b) {
                        best = Some((d, s));
                    }
                }
                best.map(|b| b.0)
            },
        )
        .collect())
}
