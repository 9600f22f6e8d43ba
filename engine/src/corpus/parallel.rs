//! Aligned parallel text: two line-aligned files, one TSV of pairs, or a
//! list of such corpora concatenated in order, split into train / valid /
//! test as a workspace says.
//!
//! A pair with an empty (or whitespace-only) side keeps its place, so line
//! numbers and alignment stay intact, but is counted and left out of training.

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::workspace::{PairSource, ParallelSpec, Workspace};
use crate::text::io::read_lines;
use crate::{Error, Result};

/// Aligned pairs: `source[i]` translates `target[i]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParallelText {
    /// Source-language side.
    pub source: Vec<String>,
    /// Target-language side.
    pub target: Vec<String>,
    /// For each pair, its 0-based index in the file(s) it was read from (the
    /// line number minus one, within its own corpus when several are listed;
    /// for a fraction split, the index in the corpus).
    pub origin: Vec<usize>,
}

impl ParallelText {
    /// Number of pairs, empty ones included.
    pub fn len(&self) -> usize {
        self.source.len()
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.source.is_empty()
    }

    /// Whether pair `i` has an empty or whitespace-only side.
    pub fn is_empty_pair(&self, i: usize) -> bool {
        self.source[i].trim().is_empty() || self.target[i].trim().is_empty()
    }

    /// Indices of the pairs with an empty side.
    pub fn empty_pairs(&self) -> Vec<usize> {
        (0..self.len()).filter(|&i| self.is_empty_pair(i)).collect()
    }

    /// Indices of the pairs with both sides non-empty.
    pub fn usable(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| !self.is_empty_pair(i))
            .collect()
    }

    /// The pairs at `idx`, in that order.
    pub fn select(&self, idx: &[usize]) -> ParallelText {
        ParallelText {
            source: idx.iter().map(|&i| self.source[i].clone()).collect(),
            target: idx.iter().map(|&i| self.target[i].clone()).collect(),
            origin: idx.iter().map(|&i| self.origin[i]).collect(),
        }
    }

    /// Reads two line-aligned files. Different line counts are an error
    /// naming both files and both counts.
    pub fn read_files(source: &Path, target: &Path) -> Result<ParallelText> {
        let s = read_lines(source)?;
        let t = read_lines(target)?;
        if s.len() != t.len() {
            return Err(Error::invalid(format!(
                "parallel files differ in length: {} has {} lines, {} has {} lines",
                source.display(),
                s.len(),
                target.display(),
                t.len()
            )));
        }
        let origin = (0..s.len()).collect();
        Ok(ParallelText {
            source: s,
            target: t,
            origin,
        })
    }

    /// Reads a TSV of pairs: `source<TAB>target` per line, further columns
    /// ignored (Tatoeba / ManyThings style). A line without a tab is an error
    /// naming file and line; a wholly empty line is an empty pair.
    pub fn read_tsv(path: &Path) -> Result<ParallelText> {
        let lines = read_lines(path)?;
        let mut p = ParallelText::default();
        for (n, line) in lines.iter().enumerate() {
            let (s, t) = if line.trim().is_empty() {
                ("", "")
            } else {
                let mut f = line.split('\t');
                let s = f.next().unwrap_or("");
                let t = f
                    .next()
                    .ok_or_else(|| Error::parse(path, n + 1, "no tab: want source<TAB>target"))?;
                (s, t)
            };
            p.source.push(s.to_string());
            p.target.push(t.to_string());
            p.origin.push(n);
        }
        Ok(p)
    }

    /// Reads pairs from any kind of source; a list of sources is read in
    /// order and concatenated.
    pub fn read(src: &PairSource) -> Result<ParallelText> {
        match src {
            PairSource::Files { source, target } => Self::read_files(source, target),
            PairSource::Tsv(p) => Self::read_tsv(p),
            PairSource::Parts(parts) => {
                let mut all = ParallelText::default();
                for part in parts {
                    let p = Self::read(part)?;
                    all.source.extend(p.source);
                    all.target.extend(p.target);
                    all.origin.extend(p.origin);
                }
                Ok(all)
            }
        }
    }
}

/// The three splits of a workspace's parallel data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Splits {
    /// Training pairs.
    pub train: ParallelText,
    /// Validation pairs.
    pub valid: ParallelText,
    /// Test pairs.
    pub test: ParallelText,
}

/// Split names, in order.
pub const SPLIT_NAMES: [&str; 3] = ["train", "valid", "test"];

impl Splits {
    /// Reads the parallel data of a workspace and splits it.
    pub fn read(ws: &Workspace) -> Result<Splits> {
        match &ws.parallel {
            ParallelSpec::Splits { train, valid, test } => Ok(Splits {
                train: ParallelText::read(train)?,
                valid: valid
                    .as_ref()
                    .map(ParallelText::read)
                    .transpose()?
                    .unwrap_or_default(),
                test: test
                    .as_ref()
                    .map(ParallelText::read)
                    .transpose()?
                    .unwrap_or_default(),
            }),
            ParallelSpec::Fractions {
                corpus,
                split,
                seed,
            } => Ok(split_by_fraction(
                &ParallelText::read(corpus)?,
                *split,
                *seed,
            )),
        }
    }

    /// The split called `name` (`train`, `valid`, `test`).
    pub fn get(&self, name: &str) -> Option<&ParallelText> {
        match name {
            "train" => Some(&self.train),
            "valid" => Some(&self.valid),
            "test" => Some(&self.test),
            _ => None,
        }
    }

    /// `(name, split)` in order.
    pub fn iter(&self) -> [(&'static str, &ParallelText); 3] {
        [
            ("train", &self.train),
            ("valid", &self.valid),
            ("test", &self.test),
        ]
    }
}

/// Deterministic split: pair indices shuffled with ChaCha8 seeded by `seed`,
/// then cut by `fractions` (train, valid, test; valid and test rounded, train
/// takes the rest). Each split keeps corpus order.
pub fn split_by_fraction(all: &ParallelText, fractions: [f64; 3], seed: u64) -> Splits {
    let n = all.len();
    let mut idx: Vec<usize> = (0..n).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    idx.shuffle(&mut rng);
    let n_valid = ((fractions[1] * n as f64).round() as usize).min(n);
    let n_test = ((fractions[2] * n as f64).round() as usize).min(n - n_valid);
    let n_train = n - n_valid - n_test;
    let mut parts = [
        idx[..n_train].to_vec(),
        idx[n_train..n_train + n_valid].to_vec(),
        idx[n_train + n_valid..].to_vec(),
    ];
    for p in parts.iter_mut() {
        p.sort_unstable();
    }
    Splits {
        train: all.select(&parts[0]),
        valid: all.select(&parts[1]),
        test: all.select(&parts[2]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_split_is_deterministic_and_complete() {
        let n = 100;
        let all = ParallelText {
            source: (0..n).map(|i| format!("s{i}")).collect(),
            target: (0..n).map(|i| format!("t{i}")).collect(),
            origin: (0..n).collect(),
        };
        let a = split_by_fraction(&all, [0.8, 0.1, 0.1], 1);
        let b = split_by_fraction(&all, [0.8, 0.1, 0.1], 1);
        let c = split_by_fraction(&all, [0.8, 0.1, 0.1], 2);
        assert_eq!(a, b);
        assert_ne!(a.test, c.test);
        assert_eq!((a.train.len(), a.valid.len(), a.test.len()), (80, 10, 10));
        let mut seen: Vec<usize> = a
            .iter()
            .iter()
            .flat_map(|(_, s)| s.origin.clone())
            .collect();
        seen.sort();
        assert_eq!(seen, (0..n).collect::<Vec<_>>());
        for (_, s) in a.iter() {
            for i in 0..s.len() {
                assert_eq!(s.source[i][1..], s.target[i][1..]);
            }
        }
    }
}
