//! Synthetic parallel data for the linear models' and HDLR's tests: a
//! vocabulary of `LANGi` terms and pairs of "concepts" mapped by a fixed
//! permutation, with one noise term per side.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosetta::models::TrainData;
use rosetta::text::{CsrMatrix, Vocabs, Vocabulary};

pub fn vocab(lang: &str, n: usize, n_docs: usize) -> Vocabulary {
    Vocabulary::from_parts(
        lang,
        (0..n).map(|i| format!("{lang}{i}")).collect(),
        (0..n).map(|i| 1 + (i % 5) as u32).collect(),
        n_docs,
    )
}

/// Parallel texts: each pair draws 2-5 "concepts"; the source text has
/// term `c`, the target term `perm[c]`, plus one random noise term each.
pub fn parallel(n: usize, vs: usize, vt: usize, seed: u64) -> (CsrMatrix, CsrMatrix) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let concepts = vs.min(vt);
    let perm: Vec<usize> = (0..concepts).map(|c| (c * 7 + 3) % concepts).collect();
    let (mut s, mut t) = (CsrMatrix::new(vs), CsrMatrix::new(vt));
    for _ in 0..n {
        let m = rng.random_range(2..=5);
        let cs: Vec<usize> = (0..m).map(|_| rng.random_range(0..concepts)).collect();
        let mut rs: Vec<(u32, f32)> = cs.iter().map(|c| (*c as u32, 1.0)).collect();
        let mut rt: Vec<(u32, f32)> = cs.iter().map(|c| (perm[*c] as u32, 1.0)).collect();
        rs.push((rng.random_range(0..vs) as u32, 1.0));
        rt.push((rng.random_range(0..vt) as u32, 1.0));
        s.push_row(rs);
        t.push_row(rt);
    }
    (s, t)
}

/// `n` training pairs and `n / 2` validation pairs over `vs` and `vt`
/// terms, the target side also as the monolingual texts.
pub fn train_data(n: usize, vs: usize, vt: usize, seed: u64) -> TrainData {
    let (s, t) = parallel(n, vs, vt, seed);
    let (vs_, vt_) = parallel(n / 2, vs, vt, seed + 1);
    TrainData {
        vocabs: Vocabs {
            source: vocab("en", vs, n),
            target: vocab("hi", vt, n),
        },
        mono: t.clone(),
        mono_positive: vec![None; t.n_rows()],
        seqs: None,
        texts: None,
        pretrained: None,
        dictionary: None,
        init: None,
        train_src: s,
        train_tgt: t,
        valid_src: vs_,
        valid_tgt: vt_,
    }
}
