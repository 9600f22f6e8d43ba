//! TREC qrels (`qid iter docno rel`) and run files (`qid Q0 docno rank score tag`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::text::io::read_lines;
use crate::{Error, Result};

/// Relevance judgements: query id → document id → grade (> 0 is relevant).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Qrels {
    /// Judgements by query.
    pub judgements: BTreeMap<String, BTreeMap<String, i32>>,
}

impl Qrels {
    /// Reads a TREC qrels file (whitespace-separated `qid iter docno rel`;
    /// blank lines and `#` comments skipped).
    /// A document judged twice for one query is reported on stderr (file
    /// and line; the last judgement wins); [`Qrels::read_checked`] returns
    /// those warnings, or makes them errors.
    pub fn read(path: &Path) -> Result<Qrels> {
        let (q, warnings) = Qrels::read_checked(path, false)?;
        for w in warnings {
            eprintln!("warning: {w}");
        }
        Ok(q)
    }

    /// [`Qrels::read`], returning the warnings (a document judged twice for
    /// a query: "same grade repeated" or "contradicts line N", with file
    /// and line) instead of printing them; with `strict` the first one is
    /// an error.
    pub fn read_checked(path: &Path, strict: bool) -> Result<(Qrels, Vec<String>)> {
        let mut q = Qrels::default();
        let mut warnings = Vec::new();
        let mut first_line: std::collections::HashMap<(String, String), usize> =
            std::collections::HashMap::new();
        for (n, line) in read_lines(path)?.iter().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() || f[0].starts_with('#') {
                continue;
            }
            if f.len() != 4 {
                return Err(Error::parse(
                    path,
                    n + 1,
                    format!("want 4 fields 'qid iter docno rel', got {}", f.len()),
                ));
            }
            let rel: i32 = f[3].parse().map_err(|_| {
                Error::parse(
                    path,
                    n + 1,
                    format!("relevance {:?} is not an integer", f[3]),
                )
            })?;
            let key = (f[0].to_string(), f[2].to_string());
            if let Some(&before) = first_line.get(&key) {
                let old = q.judgements[f[0]][f[2]];
                let what = if old == rel {
                    format!(
                        "document {} judged again for query {} (same grade {rel} as line {before})",
                        f[2], f[0]
                    )
                } else {
                    format!(
                        "document {} judged {rel} for query {}, contradicting grade {old} on line {before} \
                         (the last judgement is used)",
                        f[2], f[0]
                    )
                };
                let e = Error::parse(path, n + 1, what);
                if strict {
                    return Err(e);
                }
                warnings.push(e.to_string());
            } else {
                first_line.insert(key, n + 1);
            }
            q.judgements
                .entry(f[0].to_string())
                .or_default()
                .insert(f[2].to_string(), rel);
        }
        Ok((q, warnings))
    }

    /// The judgements of the queries in `queries` only.
    pub fn restricted_to(&self, queries: &std::collections::BTreeSet<String>) -> Qrels {
        Qrels {
            judgements: self
                .judgements
                .iter()
                .filter(|(q, _)| queries.contains(*q))
                .map(|(q, j)| (q.clone(), j.clone()))
                .collect(),
        }
    }

    /// Qrels with one relevant document per query, from `(qid, docid)` pairs.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Qrels {
        let mut q = Qrels::default();
        for (qid, did) in pairs {
            q.judgements
                .entry(qid.to_string())
                .or_default()
                .insert(did.to_string(), 1);
        }
        q
    }

    /// Number of judged queries.
    pub fn len(&self) -> usize {
        self.judgements.len()
    }

    /// Whether there are no judgements.
    pub fn is_empty(&self) -> bool {
        self.judgements.is_empty()
    }
}

/// A ranked run: query id → `(document id, score)` in the order written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// Retrieved documents by query.
    pub results: BTreeMap<String, Vec<(String, f64)>>,
    /// The run tag (sixth column).
    pub tag: String,
}

impl Run {
    /// Reads a TREC run file (six whitespace-separated fields; the rank column
    /// is ignored, as trec_eval does). A document listed twice for a query is
    /// an error.
    pub fn read(path: &Path) -> Result<Run> {
        let mut run = Run::default();
        let mut seen = std::collections::HashSet::new();
        for (n, line) in read_lines(path)?.iter().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() || f[0].starts_with('#') {
                continue;
            }
            if f.len() != 6 {
                return Err(Error::parse(
                    path,
                    n + 1,
                    format!(
                        "want 6 fields 'qid Q0 docno rank score tag', got {}",
                        f.len()
                    ),
                ));
            }
            let score: f64 = f[4].parse().map_err(|_| {
                Error::parse(path, n + 1, format!("score {:?} is not a number", f[4]))
            })?;
            if !score.is_finite() {
                return Err(Error::parse(path, n + 1, "score is not finite"));
            }
            if !seen.insert((f[0].to_string(), f[2].to_string())) {
                return Err(Error::parse(
                    path,
                    n + 1,
                    format!("document {} listed twice for query {}", f[2], f[0]),
                ));
            }
            if run.tag.is_empty() {
                run.tag = f[5].to_string();
            }
            run.results
                .entry(f[0].to_string())
                .or_default()
                .push((f[2].to_string(), score));
        }
        Ok(run)
    }

    /// The run in TREC format, each query's documents in trec_eval's order
    /// (score descending, ties by document id descending) with ranks from 1.
    pub fn to_trec_string(&self) -> String {
        let mut s = String::new();
        let tag = if self.tag.is_empty() {
            "rosetta"
        } else {
            &self.tag
        };
        for (qid, docs) in &self.results {
            for (rank, (did, score)) in sorted_for_eval(docs).into_iter().enumerate() {
                let _ = writeln!(s, "{qid} Q0 {did} {} {score:.6} {tag}", rank + 1);
            }
        }
        s
    }

    /// Writes the run atomically to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        crate::util::write_atomic(path, self.to_trec_string().as_bytes())
    }
}

impl Qrels {
    /// The judgements as a TREC qrels file (`qid 0 docno rel`), sorted.
    pub fn to_trec_string(&self) -> String {
        let mut s = String::new();
        for (qid, docs) in &self.judgements {
            for (did, rel) in docs {
                let _ = writeln!(s, "{qid} 0 {did} {rel}");
            }
        }
        s
    }

    /// Writes the qrels atomically to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        crate::util::write_atomic(path, self.to_trec_string().as_bytes())
    }
}

/// Where [`write_run`] puts the qrels of a derived task: `<run>.qrels`.
pub fn qrels_beside(run: &Path) -> std::path::PathBuf {
    let mut name = run.as_os_str().to_owned();
    name.push(".qrels");
    name.into()
}

/// Writes `run` to `path`; for a task `derived` from parallel data (whose
/// judgements live in no file) also `qrels` to [`qrels_beside`], returned,
/// so `rosetta compare RUN... --qrels RUN.qrels` can score it.
pub fn write_run(
    run: &Run,
    path: &Path,
    qrels: &Qrels,
    derived: bool,
) -> Result<Option<std::path::PathBuf>> {
    run.write(path)?;
    if !derived {
        return Ok(None);
    }
    let q = qrels_beside(path);
    qrels.write(&q)?;
    Ok(Some(q))
}

/// A query's documents in the order trec_eval ranks them: score descending,
/// ties broken by document id descending (trec_eval sorts by score, then docno,
/// both decreasing). A score that is not finite (NaN, ±inf: a diverged
/// model) ranks below every finite one.
pub fn sorted_for_eval(docs: &[(String, f64)]) -> Vec<(String, f64)> {
    let mut v = docs.to_vec();
    v.sort_by(|a, b| {
        rank_key(b.1)
            .total_cmp(&rank_key(a.1))
            .then_with(|| b.0.cmp(&a.0))
    });
    v
}

/// The score a ranking sorts by: the score itself when finite, else below
/// every finite score (NaN and ±inf are the worst, never the best).
pub fn rank_key(s: f64) -> f64 {
    if s.is_finite() {
        s
    } else {
        f64::NEG_INFINITY
    }
}
