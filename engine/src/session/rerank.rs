//! Reranking a model's ad-hoc run by late interaction (ColBERT's MaxSim
//! over the encoder's own token states, [`crate::models::kit::late`]): each
//! query's `depth` best documents are scored again, `(1 − w)·cosine +
//! w·MaxSim`, and put back in that order above the rest of the run.
//! `w` is given, or chosen for MAP on the tuning half of the judged queries
//! (the split of [`split_queries`]), every figure then on the other half.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::eval::sentence::{aligned_ranks_both, TiedRank};
use crate::eval::trec::{sorted_for_eval, Qrels, Run};
use crate::eval::{evaluate_rankings, Metrics};
use crate::index::fusion::{split_queries, LAMBDA_GRID};
pub use crate::models::kit::late::LateRerank;
use crate::models::kit::late::{maxsim, TokenStates};
use crate::models::{Model, TextRole};
use crate::text::Side;
use crate::{Error, Result};

/// Documents reranked per query unless told otherwise (ColBERT's usual
/// reranking depth).
pub const DEFAULT_DEPTH: usize = 100;
/// Documents whose token states are held at once.
const DOC_CHUNK: usize = 256;
/// The gap between successive tail documents' scores, below the head's
/// lowest ([`LateScores::combined`]).
const TAIL_STEP: f64 = 1e-6;

/// How `rosetta eval --rerank` reranks: MaxSim mixed in with weight `w`
/// (`maxsim:W`), or with `w` chosen on the tuning half (`maxsim`,
/// `maxsim:auto`), or not at all (`none`: the cosine ranking, whatever the
/// session's own `rerank` setting).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RerankSpec {
    /// `Some(w)`: a fixed weight; `None`: tuned over 0, 0.1, …, 1.
    MaxSim(Option<f64>),
    /// No reranking.
    Off,
}

impl RerankSpec {
    /// The reranking a call uses: `given` (a flag; [`RerankSpec::Off`]
    /// for none), else the session's own (`session`, its `rerank`
    /// setting). The depth is `depth` where given, else the session's,
    /// else [`DEFAULT_DEPTH`]. `None`: no reranking.
    pub fn resolve(
        given: Option<RerankSpec>,
        depth: Option<usize>,
        session: Option<LateRerank>,
    ) -> Option<(RerankSpec, usize)> {
        let spec = match given {
            Some(RerankSpec::Off) => return None,
            Some(s) => s,
            None => RerankSpec::MaxSim(Some(session?.weight)),
        };
        let depth = depth.or(session.map(|s| s.depth)).unwrap_or(DEFAULT_DEPTH);
        Some((spec, depth))
    }

    /// Whether it reranks.
    pub fn is_on(self) -> bool {
        self != RerankSpec::Off
    }
}

impl std::str::FromStr for RerankSpec {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let w = match s.split_once(':') {
            None if s == "none" => return Ok(RerankSpec::Off),
            None if s == "maxsim" => return Ok(RerankSpec::MaxSim(None)),
            Some(("maxsim", "auto")) => return Ok(RerankSpec::MaxSim(None)),
            Some(("maxsim", w)) => w,
            _ => {
                return Err(format!(
                    "`{s}`: the reranking is maxsim, maxsim:auto, maxsim:W (W from 0 to 1) or none"
                ))
            }
        };
        match w.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(RerankSpec::MaxSim(Some(x))),
            _ => Err(format!(
                "`{s}`: MaxSim's weight must be a number from 0 to 1 (or auto)"
            )),
        }
    }
}

/// The refusal of late interaction for a model of `kind` with no token
/// states.
pub fn no_token_states(kind: &str) -> Error {
    Error::invalid(format!(
        "--rerank maxsim reads a model's token states: `{kind}` has none (an encoder has)"
    ))
}

/// The refusal of `--rerank-depth` where nothing is reranked (no
/// `--rerank`, or `none`, and session `dir` has no `rerank` setting).
pub fn depth_without_rerank(dir: &std::path::Path) -> Error {
    Error::invalid(format!(
        "--rerank-depth: nothing is reranked ({} has no rerank setting and --rerank is not \
         maxsim): give --rerank maxsim:W too",
        dir.display()
    ))
}

/// The token states of the texts of `rows` (`text` gives each) read as
/// `role` on `side`, [`DOC_CHUNK`] texts at a time (so that a large
/// collection's never are all held), each handed to `each(row, states)`;
/// `progress` hears of every chunk, `what` naming the texts.
#[allow(clippy::too_many_arguments)]
fn chunked_states(
    model: &dyn Model,
    side: Side,
    role: TextRole,
    rows: &[usize],
    text: impl Fn(usize) -> String,
    what: &str,
    progress: &dyn Fn(f64, &str),
    mut each: impl FnMut(usize, &TokenStates) -> Result<()>,
) -> Result<()> {
    for (c, chunk) in rows.chunks(DOC_CHUNK).enumerate() {
        let from = c * DOC_CHUNK;
        progress(
            from as f64 / rows.len().max(1) as f64,
            &format!(
                "reading the token states of {what} {from}..{} of {}",
                from + chunk.len(),
                rows.len()
            ),
        );
        let texts: Vec<String> = chunk.iter().map(|&r| text(r)).collect();
        let states = model
            .token_states(side, role, &texts)
            .ok_or_else(|| no_token_states(model.kind()))??;
        for (r, st) in chunk.iter().zip(&states) {
            each(*r, st)?;
        }
    }
    progress(1.0, "token states read");
    Ok(())
}

/// Each query's head (its `depth` best documents of the run, in order)
/// with the run's score and MaxSim's, and the rest of the run.
#[derive(Debug, Clone)]
pub struct LateScores {
    /// Query id → `(document, run score, MaxSim)` for the head.
    pub heads: BTreeMap<String, Vec<(String, f64, f64)>>,
    /// Query id → the documents below the head, in order.
    pub tails: BTreeMap<String, Vec<(String, f64)>>,
    /// The run's tag.
    pub tag: String,
}

/// MaxSim of every query of `run` with each of its `depth` best documents.
/// `queries` and `docs` give each id's text; the queries are read as
/// queries on the source side, the documents as documents on the target
/// side. A text with no token matches nothing: MaxSim −1, the least
/// cosine. `progress(fraction, line)` hears of each chunk of documents.
pub fn late_scores(
    model: &dyn Model,
    run: &Run,
    queries: (&[String], &[String]),
    docs: (&[String], &[String]),
    depth: usize,
    progress: &dyn Fn(f64, &str),
) -> Result<LateScores> {
    let qpos: HashMap<&str, usize> = queries
        .0
        .iter()
        .enumerate()
        .map(|(i, q)| (q.as_str(), i))
        .collect();
    let dpos: HashMap<&str, usize> = docs
        .0
        .iter()
        .enumerate()
        .map(|(i, d)| (d.as_str(), i))
        .collect();
    let mut heads = BTreeMap::new();
    let mut tails = BTreeMap::new();
    // document row → (query id, place in its head)
    let mut wanted: BTreeMap<usize, Vec<(String, usize)>> = BTreeMap::new();
    let mut asked: Vec<usize> = Vec::new();
    for (q, list) in &run.results {
        let qi = *qpos
            .get(q.as_str())
            .ok_or_else(|| Error::invalid(format!("rerank: query {q} has no text")))?;
        asked.push(qi);
        let sorted = sorted_for_eval(list);
        let cut = depth.min(sorted.len());
        let mut head = Vec::with_capacity(cut);
        for (k, (d, s)) in sorted[..cut].iter().enumerate() {
            let di = *dpos
                .get(d.as_str())
                .ok_or_else(|| Error::invalid(format!("rerank: document {d} has no text")))?;
            wanted.entry(di).or_default().push((q.clone(), k));
            head.push((d.clone(), *s, f64::NAN));
        }
        heads.insert(q.clone(), head);
        tails.insert(q.clone(), sorted[cut..].to_vec());
    }
    let qtexts: Vec<String> = asked.iter().map(|&i| queries.1[i].clone()).collect();
    let qstates = model
        .token_states(Side::Source, TextRole::Query, &qtexts)
        .ok_or_else(|| no_token_states(model.kind()))??;
    let qstate: HashMap<usize, &TokenStates> = asked.iter().copied().zip(&qstates).collect();
    let rows: Vec<usize> = wanted.keys().copied().collect();
    let doc_text = |d: usize| docs.1[d].clone();
    chunked_states(
        model,
        Side::Target,
        TextRole::Document,
        &rows,
        doc_text,
        "documents",
        progress,
        |d, ds| {
            for (q, k) in &wanted[&d] {
                let qs = qstate[&qpos[q.as_str()]];
                let s = maxsim(qs, ds).unwrap_or(-1.0);
                if !s.is_finite() {
                    return Err(Error::invalid(format!(
                        "rerank: MaxSim of query {q} with document {} is not finite",
                        docs.0[d]
                    )));
                }
                heads.get_mut(q).expect("a head per query")[*k].2 = s;
            }
            Ok(())
        },
    )?;
    Ok(LateScores {
        heads,
        tails,
        tag: run.tag.clone(),
    })
}

/// `run` with each query's head reranked as `r` says ([`late_scores`],
/// [`LateScores::combined`]): how a session with a `rerank` setting ranks.
pub fn reranked_run(
    model: &dyn Model,
    run: &Run,
    queries: (&[String], &[String]),
    docs: (&[String], &[String]),
    r: LateRerank,
    progress: &dyn Fn(f64, &str),
) -> Result<Run> {
    Ok(late_scores(model, run, queries, docs, r.depth, progress)?.combined(r.weight))
}

impl LateScores {
    /// The run reranked with MaxSim's weight `w`: each head in the order of
    /// `(1 − w)·run score + w·MaxSim` (that its score), then its tail in
    /// the run's order, scored just below the head's lowest score (steps
    /// of [`TAIL_STEP`]). The tail's scores thus say only its order, and
    /// a fusion's normalisation of the list sees the head's range, a tail
    /// document counting as about the head's lowest, as a document missing
    /// from the list would.
    pub fn combined(&self, w: f64) -> Run {
        let mut results = BTreeMap::new();
        for (q, head) in &self.heads {
            let mut list: Vec<(String, f64)> = head
                .iter()
                .map(|(d, s, m)| (d.clone(), (1.0 - w) * s + w * m))
                .collect();
            list = sorted_for_eval(&list);
            let floor = list.last().map_or(0.0, |l| l.1);
            list.extend(
                self.tails[q]
                    .iter()
                    .enumerate()
                    .map(|(i, (d, _))| (d.clone(), floor - TAIL_STEP * (i + 1) as f64)),
            );
            results.insert(q.clone(), list);
        }
        Run {
            results,
            tag: format!("{}+maxsim{w}", self.tag),
        }
    }
}

/// A search's ranking reranked ([`rerank_ranking`]), with the token states
/// it read, so that the hits' explanations need not read them again.
#[derive(Debug, Clone)]
pub struct SearchRerank {
    /// The ranking, its head reordered.
    pub ranking: Vec<(String, f64)>,
    /// The query's token states.
    pub query: TokenStates,
    /// The head's documents' token states, by document id.
    pub docs: HashMap<String, TokenStates>,
}

/// One query's ranking (best first, as a search ranks) reranked: its
/// `depth` best documents by `(1 − w)·score + w·MaxSim`, the rest below in
/// their order ([`LateScores::combined`]); `text` gives a document's text
/// by id.
pub fn rerank_ranking(
    model: &dyn Model,
    query: &str,
    ranking: &[(String, f64)],
    text: impl Fn(&str) -> String,
    depth: usize,
    w: f64,
) -> Result<SearchRerank> {
    const Q: &str = "query";
    let refuse = || no_token_states(model.kind());
    // the head as `late_scores` cuts it (trec_eval's order)
    let sorted = sorted_for_eval(ranking);
    let cut = depth.min(sorted.len());
    let q = model
        .token_states(Side::Source, TextRole::Query, &[query.to_string()])
        .ok_or_else(refuse)??
        .pop()
        .ok_or_else(|| Error::invalid("rerank: no token states for the query"))?;
    let texts: Vec<String> = sorted[..cut].iter().map(|(d, _)| text(d)).collect();
    let ds = model
        .token_states(Side::Target, TextRole::Document, &texts)
        .ok_or_else(refuse)??;
    let head = sorted[..cut]
        .iter()
        .zip(&ds)
        .map(|((d, s), st)| (d.clone(), *s, maxsim(&q, st).unwrap_or(-1.0)))
        .collect();
    let late = LateScores {
        heads: BTreeMap::from([(Q.to_string(), head)]),
        tails: BTreeMap::from([(Q.to_string(), sorted[cut..].to_vec())]),
        tag: String::new(),
    };
    Ok(SearchRerank {
        ranking: late.combined(w).results.remove(Q).unwrap_or_default(),
        query: q,
        docs: sorted[..cut]
            .iter()
            .map(|(d, _)| d.clone())
            .zip(ds)
            .collect(),
    })
}

/// A reranked run scored against the run it reranked, on the same queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RerankEvaluation {
    /// `maxsim`.
    pub rerank: &'static str,
    /// Documents reranked per query.
    pub depth: usize,
    /// MaxSim's weight used.
    pub weight: f64,
    /// `(w, MAP on the tuning half)` for every weight tried; empty for a
    /// given weight.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<(f64, f64)>,
    /// Seed of the tuning/held-out split (a tuned weight only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_seed: Option<u64>,
    /// Judged queries the figures are over: the held-out half when the
    /// weight was tuned, else every judged query.
    pub queries: usize,
    /// The run as it was, on those queries.
    pub model: Metrics,
    /// The reranked run, on those queries.
    pub reranked: Metrics,
    /// Seconds spent reading token states and scoring.
    pub seconds: f64,
    /// The reranked run (every query, at the weight used), and the queries
    /// the figures are over; not serialised.
    #[serde(skip)]
    pub runs: (Run, BTreeSet<String>),
}

/// `spec` applied to `scores` and scored on `qrels`: a given weight on
/// every judged query; a tuned one chosen for MAP on the tuning half of
/// the split with `seed` (ties to the smaller weight: the run as it was)
/// and scored on the other half.
pub fn evaluate_rerank(
    run: &Run,
    scores: &LateScores,
    qrels: &Qrels,
    spec: RerankSpec,
    depth: usize,
    seed: u64,
    seconds: f64,
) -> RerankEvaluation {
    let fixed = match spec {
        RerankSpec::MaxSim(w) => w,
        // no reranking: the run itself, weight 0
        RerankSpec::Off => Some(0.0),
    };
    let (weight, tried, held_out, split_seed) = match fixed {
        Some(w) => (
            w,
            Vec::new(),
            qrels.judgements.keys().cloned().collect(),
            None,
        ),
        None => {
            let ids: Vec<&String> = qrels.judgements.keys().collect();
            let (tune, test) = split_queries(&ids, seed);
            let sub = qrels.restricted_to(&tune);
            let tried: Vec<(f64, f64)> = LAMBDA_GRID
                .iter()
                .map(|&w| {
                    (
                        w,
                        evaluate_rankings(&scores.combined(w).results, &sub)
                            .mean
                            .map,
                    )
                })
                .collect();
            let best =
                tried.iter().fold(
                    (0.0, f64::NEG_INFINITY),
                    |b, &(w, m)| if m > b.1 { (w, m) } else { b },
                );
            (best.0, tried, test, Some(seed))
        }
    };
    let reranked = scores.combined(weight);
    let sub = qrels.restricted_to(&held_out);
    RerankEvaluation {
        rerank: "maxsim",
        depth,
        weight,
        tried,
        split_seed,
        queries: sub.judgements.len(),
        model: evaluate_rankings(&run.results, &sub).mean,
        reranked: evaluate_rankings(&reranked.results, &sub).mean,
        seconds,
        runs: (reranked, held_out),
    }
}

/// Parallel sentence retrieval with each source's `depth` best targets by
/// the cosine reranked by `(1 − w)·cosine + w·MaxSim`: `src` and `tgt` the
/// aligned texts (both read as queries, as sentence retrieval reads them),
/// `s` and `t` their unit embeddings. An answer outside its source's head
/// keeps its rank (the head, the `depth` best, stays above it); one inside
/// is ranked among the head by the new score, under both tie conventions
/// ([`TiedRank`]).
///
/// Returns each source's rank of its answer (the figures:
/// [`SentenceScores::from_ranks`](crate::eval::sentence::SentenceScores::from_ranks);
/// a paired comparison pairs the ranks).
#[allow(clippy::too_many_arguments)]
pub fn sentence_reranked_ranks(
    model: &dyn Model,
    src: &[String],
    tgt: &[String],
    s: &ndarray::Array2<f32>,
    t: &ndarray::Array2<f32>,
    depth: usize,
    w: f64,
    progress: &dyn Fn(f64, &str),
) -> Result<Vec<TiedRank>> {
    let sim = crate::space::Similarity::Cosine;
    let base = aligned_ranks_both(s, t, sim);
    let n = src.len();
    // each source's head: its `depth` best targets by the cosine
    let mut heads: Vec<Vec<(usize, f64)>> = Vec::with_capacity(n);
    const BLOCK: usize = 512;
    for start in (0..n).step_by(BLOCK) {
        let end = (start + BLOCK).min(n);
        let sims = sim.scores(s.slice(ndarray::s![start..end, ..]), t.view());
        for row in sims.rows() {
            let mut idx: Vec<usize> = (0..row.len()).collect();
            idx.sort_by(|&a, &b| {
                crate::eval::trec::rank_key(row[b] as f64)
                    .total_cmp(&crate::eval::trec::rank_key(row[a] as f64))
                    .then_with(|| a.cmp(&b))
            });
            idx.truncate(depth);
            heads.push(idx.into_iter().map(|j| (j, row[j] as f64)).collect());
        }
    }
    let qs = model
        .token_states(Side::Source, TextRole::Query, src)
        .ok_or_else(|| no_token_states(model.kind()))??;
    let mut wanted: BTreeMap<usize, Vec<(usize, usize)>> = BTreeMap::new();
    for (i, h) in heads.iter().enumerate() {
        if h.iter().any(|(j, _)| *j == i) {
            for (k, (j, _)) in h.iter().enumerate() {
                wanted.entry(*j).or_default().push((i, k));
            }
        }
    }
    let mut late: Vec<Vec<f64>> = heads.iter().map(|h| vec![f64::NAN; h.len()]).collect();
    let rows: Vec<usize> = wanted.keys().copied().collect();
    let tgt_text = |j: usize| tgt[j].clone();
    chunked_states(
        model,
        Side::Target,
        TextRole::Query,
        &rows,
        tgt_text,
        "targets",
        progress,
        |j, st| {
            for &(i, k) in &wanted[&j] {
                late[i][k] = maxsim(&qs[i], st).unwrap_or(-1.0);
            }
            Ok(())
        },
    )?;
    let ranks: Vec<TiedRank> = (0..n)
        .map(|i| {
            let h = &heads[i];
            let Some(at) = h.iter().position(|(j, _)| *j == i) else {
                return base[i];
            };
            let score = |k: usize| (1.0 - w) * h[k].1 + w * late[i][k];
            let own = score(at);
            if !own.is_finite() {
                return TiedRank {
                    against: n,
                    for_: n,
                };
            }
            let (mut above, mut tied) = (0, 0);
            for k in (0..h.len()).filter(|&k| k != at) {
                let x = score(k);
                if x > own {
                    above += 1;
                } else if x == own {
                    tied += 1;
                }
            }
            TiedRank {
                against: above + tied + 1,
                for_: above + 1,
            }
        })
        .collect();
    Ok(ranks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_reads_a_weight_or_auto_and_refuses_the_rest() {
        assert_eq!("maxsim".parse(), Ok(RerankSpec::MaxSim(None)));
        assert_eq!("maxsim:auto".parse(), Ok(RerankSpec::MaxSim(None)));
        assert_eq!("maxsim:0.3".parse(), Ok(RerankSpec::MaxSim(Some(0.3))));
        assert_eq!("none".parse(), Ok(RerankSpec::Off));
        for bad in [
            "maxsim:1.5",
            "maxsim:-0.1",
            "maxsim:x",
            "colbert",
            "maxsim:nan",
        ] {
            let e = bad.parse::<RerankSpec>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_flag_wins_over_the_sessions_reranking_and_none_turns_it_off() {
        let session = Some(LateRerank {
            weight: 1.0,
            depth: 50,
        });
        let m = RerankSpec::MaxSim;
        assert_eq!(
            RerankSpec::resolve(None, None, session),
            Some((m(Some(1.0)), 50))
        );
        assert_eq!(
            RerankSpec::resolve(None, Some(7), session),
            Some((m(Some(1.0)), 7))
        );
        assert_eq!(
            RerankSpec::resolve(Some(m(Some(0.5))), None, session),
            Some((m(Some(0.5)), 50))
        );
        assert_eq!(
            RerankSpec::resolve(Some(RerankSpec::Off), None, session),
            None
        );
        assert_eq!(RerankSpec::resolve(None, None, None), None);
        assert_eq!(
            RerankSpec::resolve(Some(m(None)), None, None),
            Some((m(None), DEFAULT_DEPTH))
        );
    }

    #[test]
    fn the_head_is_reordered_and_the_tail_stays_below() {
        let mut heads = BTreeMap::new();
        heads.insert(
            "q".to_string(),
            vec![("a".to_string(), 0.9, 0.1), ("b".to_string(), 0.8, 0.9)],
        );
        let mut tails = BTreeMap::new();
        tails.insert(
            "q".to_string(),
            vec![("c".to_string(), 0.95), ("d".to_string(), 0.2)],
        );
        let s = LateScores {
            heads,
            tails,
            tag: "t".into(),
        };
        let order = |w: f64| -> Vec<String> {
            s.combined(w).results["q"]
                .iter()
                .map(|(d, _)| d.clone())
                .collect()
        };
        assert_eq!(order(0.0), ["a", "b", "c", "d"]);
        assert_eq!(order(0.5), ["b", "a", "c", "d"]);
        let r = s.combined(0.5);
        let sc = &r.results["q"];
        assert!((sc[0].1 - 0.85).abs() < 1e-12 && (sc[1].1 - 0.5).abs() < 1e-12);
        // the tail's 0.95 is put just below the head's lowest score, in
        // trec_eval's order too
        assert_eq!(sorted_for_eval(sc), *sc);
        assert!(sc[2].1 < sc[1].1 && sc[1].1 - sc[2].1 < 1e-5, "{sc:?}");
    }
}
