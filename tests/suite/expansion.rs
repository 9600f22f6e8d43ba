//! Pseudo-relevance feedback of BM25 queries (Bo1 as Terrier, RM3 as
//! Anserini): weights computed by hand on tiny collections, and the
//! expansion end to end through `rosetta bm25 --expand` and a `bm25-dict`
//! session with `--set expand=`.

use std::path::Path;

use serde_json::Value;

use rosetta::index::expand::{expand, Expanded, Expansion};
use rosetta::index::{Bm25Index, Bm25Params, Query};

use crate::common;
use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

fn weight(q: &Query, term: &str) -> Option<f64> {
    q.clauses
        .iter()
        .find(|c| c.terms == [term])
        .map(|c| c.weight)
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6, "{a} vs {b}");
}

/// Five documents; `a` occurs in the first three.
fn bo1_index() -> Bm25Index {
    let docs = vec![
        vec!["a", "b", "c", "c"],
        vec!["a", "c", "d"],
        vec!["a", "b", "e"],
        vec!["c", "e", "e", "f"],
        vec!["g", "h"],
    ];
    Bm25Index::build(&docs, Bm25Params::default()).unwrap()
}

#[test]
fn bo1_weights_computed_by_hand() {
    let idx = bo1_index();
    let q = Query::from_tokens(&["a"]);
    let e: Expanded = expand(
        &idx,
        &q,
        Expansion::Bo1 {
            fb_docs: 3,
            fb_terms: 2,
        },
    );
    // feedback set: the three documents holding `a`. Counts there (tf_x)
    // and feedback documents: a 3 (3), b 2 (2), c 3 (2), d 1 (1), e 1 (1);
    // d and e occur in fewer than 2 feedback documents: dropped.
    assert_eq!(e.feedback_docs, 3);
    // N = 5; collection counts F: a 3, b 2, c 4
    let w = |tf: f64, f: f64| {
        let p = f / 5.0;
        tf * ((1.0 + p) / p).log2() + (1.0 + p).log2()
    };
    let (wa, wb, wc) = (w(3.0, 3.0), w(2.0, 2.0), w(3.0, 4.0));
    close(wa, 3.0 * (1.6f64 / 0.6).log2() + 1.6f64.log2());
    assert!(wa > wc && wc > wb);
    // parameter-free normaliser: the best term (a) has tf_x = 3, f = 3/5
    let norm = 3.0 * (1.6f64 / 0.6).log2() + 1.6f64.log2();
    // max(fb_terms = 2, 1 query term) = 2 terms: a and c; b is cut
    let got: Vec<(&str, f64)> = e
        .terms
        .iter()
        .map(|t| (t.term.as_str(), t.weight))
        .collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].0, got[1].0), ("a", "c"));
    close(got[0].1, wa / norm); // = 1
    close(got[1].1, wc / norm);
    close(got[1].1, 0.885_153_095);
    // the original weight (1, divided by the largest, 1) plus the feedback's
    close(weight(&e.query, "a").unwrap(), 1.0 + wa / norm);
    close(weight(&e.query, "c").unwrap(), wc / norm);
    assert_eq!(weight(&e.query, "b"), None);
    assert_eq!(e.query.clauses.len(), 2);

    // Terrier's defaults (3 documents, 10 terms): b joins, d and e never do
    let d = expand(&idx, &q, Expansion::bo1());
    let terms: Vec<&str> = d.terms.iter().map(|t| t.term.as_str()).collect();
    assert_eq!(terms, ["a", "c", "b"]);
    close(weight(&d.query, "b").unwrap(), wb / norm);

    // the original weights are divided by the largest one first: a query
    // `a a z` (z in no document) holds a with 2/2 and z with 1/2, and the
    // same feedback as `a`
    let q2 = Query::from_tokens(&["a", "a", "z"]);
    let e2 = expand(&idx, &q2, Expansion::bo1());
    assert_eq!(e2.terms, d.terms);
    close(weight(&e2.query, "z").unwrap(), 0.5);
    close(weight(&e2.query, "a").unwrap(), 1.0 + wa / norm);
}

#[test]
fn bo1_with_one_feedback_document_keeps_every_term() {
    // fewer feedback documents than expansion.mindocuments (2): no cut
    let idx = bo1_index();
    let e = expand(
        &idx,
        &Query::from_tokens(&["f"]),
        Expansion::Bo1 {
            fb_docs: 3,
            fb_terms: 10,
        },
    );
    assert_eq!(e.feedback_docs, 1);
    let mut terms: Vec<&str> = e.terms.iter().map(|t| t.term.as_str()).collect();
    terms.sort_unstable();
    assert_eq!(terms, ["c", "e", "f"]);
}

#[test]
fn rm3_weights_computed_by_hand() {
    // 30 documents: five made up, 25 fillers of one unique word each
    let mut docs: Vec<Vec<String>> = ["a b c c s", "a c d s", "a b e", "c e e f s", "g h s"]
        .iter()
        .map(|d| d.split(' ').map(String::from).collect())
        .collect();
    docs.extend((0..25).map(|i| vec![format!("x{i}")]));
    let idx = Bm25Index::build(&docs, Bm25Params::default()).unwrap();
    let q = Query::from_tokens(&["a"]);
    let e = expand(
        &idx,
        &q,
        Expansion::Rm3 {
            fb_docs: 2,
            fb_terms: 2,
            original_weight: 0.5,
        },
    );
    // first pass: `a` in docs 0 (5 terms), 1 (4), 2 (3); avgdl = 45/30
    let idf = (1.0f64 + (30.0 - 3.0 + 0.5) / (3.0 + 0.5)).ln();
    let bm = |dl: f64| idf * 2.2 / (1.0 + 1.2 * (0.25 + 0.75 * dl / 1.5));
    let (s2, s1) = (bm(3.0), bm(4.0));
    let hits = idx.search(&q, 2);
    assert_eq!((hits[0].doc, hits[1].doc), (2, 1));
    close(hits[0].score, s2);
    close(hits[1].score, s1);
    assert_eq!(e.feedback_docs, 2);
    // s is in 4 of 30 documents (> 10 %): left out. Doc 2 keeps a, b, e
    // (tf 1 each), cut to 2 terms: a, b (ties by term); doc 1 keeps a, c, d:
    // a, c. |d| = 2 for both.
    let (ra, rb, rc) = ((s2 + s1) / 2.0, s2 / 2.0, s1 / 2.0);
    assert!(rb > rc);
    // cut to 2 terms (a, b) and scaled to sum 1
    let (pa, pb) = (ra / (ra + rb), rb / (ra + rb));
    let got: Vec<(&str, f64)> = e
        .terms
        .iter()
        .map(|t| (t.term.as_str(), t.weight))
        .collect();
    assert_eq!((got[0].0, got[1].0), ("a", "b"), "{got:?}");
    close(got[0].1, 0.5 * pa);
    close(got[1].1, 0.5 * pb);
    // α · q (a: 1/1) + (1 − α) · rm
    close(weight(&e.query, "a").unwrap(), 0.5 + 0.5 * pa);
    close(weight(&e.query, "b").unwrap(), 0.5 * pb);
    close(pb, s2 / (s1 + 2.0 * s2));
    assert_eq!(e.query.clauses.len(), 2);
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(ok(out).trim()).unwrap()
}

/// The tiny workspace with its own ad-hoc task: Spanish documents and
/// Spanish (target) queries where only feedback reaches the relevant one.
fn feedback_workspace(dir: &Path) -> std::path::PathBuf {
    std::fs::write(
        dir.join("fb_docs.tsv"),
        "e1\tvolcán lava ceniza\n\
         e2\tvolcán lava erupción\n\
         e3\tvolcán lava montaña\n\
         e4\tlava roca caliente magma\n\
         e5\tmesa silla puerta\n\
         e6\tlibro papel tinta\n",
    )
    .unwrap();
    std::fs::write(dir.join("fb_queries.tsv"), "q1\tvolcán\n").unwrap();
    std::fs::write(dir.join("fb_qrels.tsv"), "q1 0 e4 1\n").unwrap();
    let toml = std::fs::read_to_string(dir.join("workspace.toml")).unwrap();
    let toml = toml
        .replace("docs = \"docs.es.tsv\"", "docs = \"fb_docs.tsv\"")
        .replace(
            "target_queries = \"queries.es.tsv\"",
            "target_queries = \"fb_queries.tsv\"",
        )
        .replace("qrels = \"qrels.tsv\"", "qrels = \"fb_qrels.tsv\"");
    // the source queries need judged ids too: q1 only
    std::fs::write(dir.join("fb_src.tsv"), "q1\tvolcano\n").unwrap();
    let toml = toml.replace("queries = \"queries.en.tsv\"", "queries = \"fb_src.tsv\"");
    let p = dir.join("fb.toml");
    std::fs::write(&p, toml).unwrap();
    p
}

#[test]
fn bm25_expand_bo1_reaches_a_document_without_the_query_term() {
    let ws = tiny_workspace();
    let wsf = feedback_workspace(ws.path());
    let run = ws.path().join("r.run");
    let bm25 = |more: &[&str]| {
        let mut args = vec![
            "bm25",
            "--workspace",
            wsf.to_str().unwrap(),
            "--queries",
            "target",
            "--run",
            run.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(more);
        json(&rosetta(ws.path(), &args))
    };
    // `volcán` is in e1-e3 only: the relevant e4 is never retrieved
    let plain = bm25(&[]);
    assert_eq!(plain["metrics"]["MRR"], 0.0, "{plain}");
    assert!(plain.get("expansion_terms").is_none());
    // Bo1: `lava` is in all three feedback documents (the others in one):
    // it joins the query and e4 comes right after them
    let bo1 = bm25(&["--expand", "bo1"]);
    assert_eq!(bo1["tag"], "bm25-target-bo1");
    close(bo1["metrics"]["MRR"].as_f64().unwrap(), 0.25);
    let terms: Vec<&str> = bo1["expansion_terms"]["q1"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["term"].as_str().unwrap())
        .collect();
    assert_eq!(terms.len(), 2, "{terms:?}");
    assert!(terms.iter().any(|t| t.starts_with("lav")), "{terms:?}");
    let st = &bo1["query_stats"]["expansion"];
    assert_eq!(
        (st["method"].as_str(), st["fb_docs"].as_u64()),
        (Some("bo1"), Some(3))
    );
    assert_eq!(st["expanded_queries"], 1);
    let text = std::fs::read_to_string(&run).unwrap();
    assert!(text.lines().any(|l| l.starts_with("q1 Q0 e4 4 ")), "{text}");
    // one term only (max(1, 1 query term)): `volcán` outweighs `lava`
    // (rarer in the collection) and is only re-weighted
    let one = bm25(&["--expand", "bo1", "--fb-terms", "1"]);
    assert_eq!(one["metrics"]["MRR"], 0.0, "{one}");
    assert_eq!(one["expansion_terms"]["q1"].as_array().unwrap().len(), 1);
    // RM3: in six documents every term is in more than 10 % of them, so
    // Anserini's cut leaves no feedback term
    let rm3 = bm25(&["--expand", "rm3", "--rm3-weight", "0.3"]);
    assert_eq!(rm3["expansion"]["original_weight"], 0.3);
    assert_eq!(rm3["metrics"]["MRR"], 0.0, "{rm3}");
    assert!(rm3.get("expansion_terms").is_none(), "{rm3}");
    // flags a method does not read are refused
    let e = rosetta(
        ws.path(),
        &[
            "bm25",
            "--workspace",
            wsf.to_str().unwrap(),
            "--queries",
            "target",
            "--expand",
            "bo1",
            "--rm3-weight",
            "0.3",
            "--run",
            run.to_str().unwrap(),
        ],
    );
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("applies to rm3"));
}

#[test]
fn a_bm25_dict_session_expands_as_rosetta_bm25_does() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let s = root.path().join("dict-bo1");
    train(root.path(), &wsf, "bm25-dict", &s, &["--set", "expand=bo1"]);
    let cfg = std::fs::read_to_string(s.join("config.toml")).unwrap();
    for key in [
        "expand = \"bo1\"",
        "fb_docs = \"auto\"",
        "fb_terms = \"auto\"",
        "rm3_weight = \"0.5\"",
    ] {
        assert!(cfg.contains(key), "{key} missing from\n{cfg}");
    }
    let e = json(&rosetta(
        root.path(),
        &[
            "eval",
            "--session",
            s.to_str().unwrap(),
            "--task",
            "adhoc",
            "--json",
        ],
    ));
    let run = root.path().join("b.run");
    let b = json(&rosetta(
        root.path(),
        &[
            "bm25",
            "--workspace",
            wsf.to_str().unwrap(),
            "--translate",
            "dict",
            "--expand",
            "bo1",
            "--run",
            run.to_str().unwrap(),
            "--json",
        ],
    ));
    assert_eq!(e["adhoc"]["MAP"], b["metrics"]["MAP"]);
    assert_eq!(
        e["adhoc"]["query_stats"]["expansion"],
        b["query_stats"]["expansion"]
    );
    assert_eq!(b["query_stats"]["expansion"]["method"], "bo1");
    // a setting the method does not read is an error naming it
    let bad = root.path().join("bad");
    let out = rosetta(
        root.path(),
        &[
            "train",
            "--workspace",
            wsf.to_str().unwrap(),
            "--model",
            "bm25-dict",
            "--set",
            "fb_docs=5",
            "--session",
            bad.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not to none"), "{err}");
}
