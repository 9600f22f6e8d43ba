//! Using a model for retrieval: ad-hoc runs over a workspace's collection
//! (queries in the source language, documents in the target language, both
//! encoded by the model, ranked by its [`Similarity`]) and their trec_eval
//! figures.
//! Shared by the runner's per-epoch validation, `rosetta eval`, `rosetta
//! export` and the workbench.

use std::collections::BTreeMap;

use ndarray::{Array2, Axis};

use crate::corpus::prepare::{AdhocData, SplitData};
use crate::eval::metrics::{evaluate_rankings, Evaluation};
use crate::eval::trec::Run;
use crate::models::kit::late::LateRerank;
use crate::models::{encode_texts, Model, TextRole, TextRows};
use crate::space::Similarity;
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

/// Depth of ad-hoc runs (trec_eval's usual 1000).
pub const RUN_DEPTH: usize = 1000;

/// Embeddings of an ad-hoc task's documents (target side) and queries
/// (source side).
pub fn encode_adhoc(model: &dyn Model, adhoc: &AdhocData) -> Result<(Array2<f32>, Array2<f32>)> {
    let docs = TextRows {
        counts: &adhoc.docs,
        seqs: Some(&adhoc.doc_seqs),
        raw: Some(&adhoc.doc_texts),
    };
    let queries = TextRows {
        counts: &adhoc.queries,
        seqs: Some(&adhoc.query_seqs),
        raw: Some(&adhoc.query_texts),
    };
    Ok((
        encode_texts(model, Side::Target, TextRole::Document, docs)?,
        encode_texts(model, Side::Source, TextRole::Query, queries)?,
    ))
}

/// Embeddings of the texts of `side` of a split's pairs `rows`, as the
/// model reads them (counts, sequences over `vocabs` for a model that
/// reads word order, raw texts for an encoder; both sides of a pair are
/// read as queries: sentence retrieval is a symmetric task).
pub fn encode_split(
    model: &dyn Model,
    split: &SplitData,
    side: Side,
    vocabs: &Vocabs,
    rows: &[usize],
) -> Result<Array2<f32>> {
    let (counts, texts) = match side {
        Side::Source => (&split.src, &split.src_text),
        Side::Target => (&split.tgt, &split.tgt_text),
    };
    let seqs = model
        .reads_order()
        .then(|| split.sequences(side, vocabs).select_rows(rows));
    let raw: Option<Vec<String>> = model
        .reads_text()
        .then(|| rows.iter().map(|&i| texts[i].clone()).collect());
    let rows_in = TextRows {
        counts: &counts.select_rows(rows),
        seqs: seqs.as_ref(),
        raw: raw.as_deref(),
    };
    encode_texts(model, side, TextRole::Query, rows_in)
}

/// The ranked run of `model` on `adhoc`, `depth` documents per query.
pub fn adhoc_run(model: &dyn Model, adhoc: &AdhocData, depth: usize, tag: &str) -> Result<Run> {
    let (docs, queries) = encode_adhoc(model, adhoc)?;
    run_from_embeddings(
        docs,
        &queries,
        &adhoc.doc_ids,
        &adhoc.query_ids,
        depth,
        tag,
        model.similarity(),
    )
}

/// A run from document and query embeddings (rows in the order of
/// `doc_ids` and `query_ids`) compared by `sim`, ranked as
/// trec_eval ranks (score descending, ties by document id descending),
/// `depth` per query.
pub fn run_from_embeddings<S: AsRef<str>>(
    docs: Array2<f32>,
    queries: &Array2<f32>,
    doc_ids: &[S],
    query_ids: &[S],
    depth: usize,
    tag: &str,
    sim: Similarity,
) -> Result<Run> {
    if docs.ncols() != queries.ncols() {
        return Err(crate::Error::invalid(format!(
            "queries have {} dimensions but documents {}",
            queries.ncols(),
            docs.ncols()
        )));
    }
    let mut results = BTreeMap::new();
    for (qi, ranked) in rank(docs.view(), queries, doc_ids, depth, sim)
        .into_iter()
        .enumerate()
    {
        results.insert(
            query_ids[qi].as_ref().to_string(),
            ranked
                .into_iter()
                .map(|(d, s)| (doc_ids[d].as_ref().to_string(), s))
                .collect(),
        );
    }
    Ok(Run {
        results,
        tag: tag.to_string(),
    })
}

/// The `depth` best documents (row, score by `sim`) of every query row, ranked as
/// trec_eval ranks: score descending, ties by document id descending.
pub fn rank<S: AsRef<str>>(
    docs: ndarray::ArrayView2<f32>,
    queries: &Array2<f32>,
    doc_ids: &[S],
    depth: usize,
    sim: Similarity,
) -> Vec<Vec<(usize, f64)>> {
    let mut out = Vec::with_capacity(queries.nrows());
    const BLOCK: usize = 256;
    let cmp = |a: &(usize, f64), b: &(usize, f64)| {
        crate::eval::trec::rank_key(b.1)
            .total_cmp(&crate::eval::trec::rank_key(a.1))
            .then_with(|| doc_ids[b.0].as_ref().cmp(doc_ids[a.0].as_ref()))
    };
    for chunk in queries.axis_chunks_iter(Axis(0), BLOCK) {
        let sims = sim.scores(chunk, docs);
        for row in sims.axis_iter(Axis(0)) {
            let mut ranked: Vec<(usize, f64)> = row
                .iter()
                .enumerate()
                .map(|(d, s)| (d, *s as f64))
                .collect();
            if depth < ranked.len() {
                if depth == 0 {
                    ranked.clear();
                } else {
                    ranked.select_nth_unstable_by(depth - 1, cmp);
                    ranked.truncate(depth);
                }
            }
            ranked.sort_by(cmp);
            out.push(ranked);
        }
    }
    out
}

/// trec_eval figures of `model` on `adhoc`, its run reranked as `rerank`
/// says (the session's `rerank` setting) where given.
pub fn adhoc_eval(
    model: &dyn Model,
    adhoc: &AdhocData,
    rerank: Option<LateRerank>,
) -> Result<Evaluation> {
    let run = adhoc_run(model, adhoc, RUN_DEPTH, "rosetta")?;
    let run = adhoc_reranked(model, adhoc, run, rerank)?;
    Ok(evaluate_rankings(&run.results, &adhoc.qrels))
}

/// `run`, a run of `adhoc`'s queries over its documents, reranked as
/// `rerank` says (a session's `rerank` setting), else as it is.
pub fn adhoc_reranked(
    model: &dyn Model,
    adhoc: &AdhocData,
    run: Run,
    rerank: Option<LateRerank>,
) -> Result<Run> {
    match rerank {
        Some(r) => super::rerank::reranked_run(
            model,
            &run,
            (&adhoc.query_ids, &adhoc.query_texts),
            (&adhoc.doc_ids, &adhoc.doc_texts),
            r,
            &|_, _| {},
        ),
        None => Ok(run),
    }
}

/// The per-epoch validation figures of an ad-hoc task, named `adhoc_MRR`,
/// `adhoc_MAP`, `adhoc_P@1`, `adhoc_nDCG@10` (for
/// [`crate::train::runner::run_job_with_validation`]), of the run as the
/// session ranks it (`rerank`, [`adhoc_eval`]).
pub fn adhoc_validation(
    model: &dyn Model,
    adhoc: &AdhocData,
    rerank: Option<LateRerank>,
) -> Result<BTreeMap<String, f64>> {
    let e = adhoc_eval(model, adhoc, rerank)?;
    Ok([
        ("adhoc_MRR".to_string(), e.mean.mrr),
        ("adhoc_MAP".to_string(), e.mean.map),
        ("adhoc_P@1".to_string(), e.mean.p1),
        ("adhoc_nDCG@10".to_string(), e.mean.ndcg10),
    ]
    .into())
}

/// Figures of bilingual lexicon induction.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BliScores {
    /// Share of dictionary words whose nearest target term is a translation.
    #[serde(rename = "P@1")]
    pub p1: f64,
    /// ... among the 5 nearest.
    #[serde(rename = "P@5")]
    pub p5: f64,
    /// ... among the 10 nearest.
    #[serde(rename = "P@10")]
    pub p10: f64,
    /// Dictionary words evaluated (source term and a translation in the vocabularies).
    pub queries: usize,
    /// Dictionary words (analysed to one term) in all.
    pub entries: usize,
    /// Whether CSLS ranked the candidates.
    pub csls: bool,
}

/// The dictionary entries [`bli`] can score: source term and at least one
/// translation in the vocabularies.
pub fn bli_scorable(
    loaded: &super::Loaded,
    dict: &std::collections::HashMap<String, Vec<String>>,
) -> usize {
    let (vs, vt) = (&loaded.vocabs.source, &loaded.vocabs.target);
    dict.iter()
        .filter(|(s, ts)| vs.id(s).is_some() && ts.iter().any(|t| vt.id(t).is_some()))
        .count()
}

/// Bilingual lexicon induction: for every dictionary entry (source term ->
/// target terms, analysed as the training data) whose source term and at
/// least one translation are in the vocabularies, the rank of the first
/// translation among all target words by the model's similarity (or CSLS; the n-gram
/// fallback's units are no candidates). An error when no entry can be
/// scored (a figure over nothing).
pub fn bli(
    loaded: &super::Loaded,
    dict: &std::collections::HashMap<String, Vec<String>>,
    csls: bool,
) -> Result<BliScores> {
    let ranks = bli_ranks(loaded, dict, csls)?;
    if ranks.is_empty() {
        // a figure over nothing is an error, never P@1 0
        return Err(Error::invalid(format!(
            "lexicon induction: none of the dictionary's {} entries has a source word and a \
             translation in the model's vocabularies: no figure to give",
            dict.len()
        )));
    }
    let d = ranks.len() as f64;
    let hits = |k: usize| ranks.iter().filter(|(_, r)| *r <= k).count() as f64 / d;
    Ok(BliScores {
        p1: hits(1),
        p5: hits(5),
        p10: hits(10),
        queries: ranks.len(),
        entries: dict.len(),
        csls,
    })
}

/// The ranks [`bli`] counts: for every dictionary entry it scores (source
/// term and a translation in the vocabularies), in the order of the source
/// terms, the term and the rank (from 1) of its best-ranked translation
/// among the target words, ties counted against it. Empty when no entry
/// can be scored.
pub fn bli_ranks(
    loaded: &super::Loaded,
    dict: &std::collections::HashMap<String, Vec<String>>,
    csls: bool,
) -> Result<Vec<(String, usize)>> {
    let src = loaded.term_vectors(Side::Source)?;
    let tgt = loaded.term_vectors(Side::Target)?;
    let sim = loaded.model.similarity();
    let r_tgt = if csls {
        Some(loaded.csls_penalty(Side::Target)?)
    } else {
        None
    };
    let r_src = if csls {
        Some(loaded.csls_penalty(Side::Source)?)
    } else {
        None
    };
    let (vs, vt) = (&loaded.vocabs.source, &loaded.vocabs.target);
    let mut entries: Vec<(&String, &Vec<String>)> = dict.iter().collect();
    entries.sort();
    let mut ranks = Vec::new();
    for (s, ts) in &entries {
        let Some(sid) = vs.id(s) else { continue };
        let gold: Vec<usize> = ts
            .iter()
            .filter_map(|t| vt.id(t))
            .map(|i| i as usize)
            .collect();
        if gold.is_empty() {
            continue;
        }
        let mut scores = sim.against(tgt.view(), src.row(sid as usize));
        if let (Some(rt), Some(rs)) = (r_tgt, r_src) {
            let rq = rs[sid as usize];
            scores.zip_mut_with(rt, |c, r| *c = 2.0 * *c - rq - r);
        }
        let best_gold = gold
            .iter()
            .map(|g| scores[*g])
            .fold(f32::NEG_INFINITY, f32::max);
        // rank of the best translation among the target words (not the
        // n-gram fallback's units); ties count against it
        let above = scores
            .iter()
            .take(vt.words())
            .filter(|x| **x >= best_gold)
            .count()
            - 1;
        ranks.push(((*s).clone(), above + 1));
    }
    Ok(ranks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn ranking_follows_trec_eval_order_and_depth() {
        let docs = array![[1.0f32, 0.0], [0.0, 1.0], [1.0, 0.0], [0.6, 0.8]];
        let ids = ["a", "b", "c", "d"];
        let q = array![[1.0f32, 0.0], [0.0, 1.0]];
        let r = rank(docs.view(), &q, &ids, 3, Similarity::Cosine);
        // ties (a, c at 1.0) go to the larger id first, as trec_eval
        assert_eq!(r[0].iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 0, 3]);
        assert_eq!(r[1][0].0, 1);
        assert_eq!(
            rank(docs.view(), &q, &ids, 0, Similarity::Cosine)[0].len(),
            0
        );
        assert_eq!(
            rank(docs.view(), &q, &ids, 10, Similarity::Cosine)[0].len(),
            4
        );
    }
}
