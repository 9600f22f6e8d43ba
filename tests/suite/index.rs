//! Index tests: exact BM25 against figures computed independently (Python,
//! `tests/fixtures/index/expected.bm25.tsv`), structured queries, pruned
//! mining against brute force, dense top-k against a naive scan.

use std::collections::HashMap;
use std::path::PathBuf;

use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rosetta::index::bm25::{Bm25Index, Bm25Params, Query};
use rosetta::index::dense::{read_npy, top_k, write_npy, DenseIndex, Matmul};
use rosetta::index::mining::{
    mine_positives, mine_positives_exhaustive, IdfSource, MineConfig, MineScoring,
};
use rosetta::index::translate::{apertium_pairs, apertium_translate, translate_dict};
use rosetta::index::{Hit, TieOrder};
use rosetta::text::{CsrMatrix, Vocabulary};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/index")
        .join(name)
}

fn tsv(name: &str) -> Vec<(String, String)> {
    std::fs::read_to_string(fixture(name))
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once('\t').unwrap();
            (a.to_string(), b.to_string())
        })
        .collect()
}

fn fixture_index() -> (Vec<String>, Bm25Index) {
    let docs = tsv("docs.tsv");
    let ids: Vec<String> = docs.iter().map(|d| d.0.clone()).collect();
    let toks: Vec<Vec<String>> = docs
        .iter()
        .map(|d| d.1.split_whitespace().map(str::to_string).collect())
        .collect();
    let idx = Bm25Index::build(&toks, Bm25Params::default())
        .unwrap()
        .with_docnos(&ids)
        .unwrap();
    (ids, idx)
}

fn expected() -> HashMap<String, Vec<(String, f64)>> {
    let mut m: HashMap<String, Vec<(String, f64)>> = HashMap::new();
    for l in std::fs::read_to_string(fixture("expected.bm25.tsv"))
        .unwrap()
        .lines()
    {
        let f: Vec<&str> = l.split('\t').collect();
        m.entry(f[0].to_string())
            .or_default()
            .push((f[1].to_string(), f[2].parse().unwrap()));
    }
    m
}

fn check(got: &[Hit], ids: &[String], want: &[(String, f64)]) {
    let got: Vec<(String, f64)> = got
        .iter()
        .map(|h| (ids[h.doc as usize].clone(), h.score))
        .collect();
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.0, w.0, "order: {got:?} vs {want:?}");
        assert!((g.1 - w.1).abs() < 1e-9, "{g:?} vs {w:?}");
    }
}

#[test]
fn bm25_matches_independent_figures_and_evaluator_ties() {
    let (ids, idx) = fixture_index();
    let want = expected();
    for (qid, text) in tsv("queries.tsv") {
        let toks: Vec<&str> = text.split_whitespace().collect();
        let hits = idx.search(&Query::from_tokens(&toks), usize::MAX);
        check(&hits, &ids, want.get(&qid).map_or(&[][..], |v| &v[..]));
        // top-k is a prefix of the full ranking
        let top2 = idx.search(&Query::from_tokens(&toks), 2);
        assert_eq!(&top2[..], &hits[..hits.len().min(2)]);
    }
    // the empty document still counts towards nothing: N = 9 non-empty
    assert_eq!(idx.n_docs(), 10);
    assert_eq!(idx.n_nonempty(), 9);
}

#[test]
fn structured_query_pools_synonyms() {
    let (ids, idx) = fixture_index();
    let mut dict = HashMap::new();
    dict.insert(
        "zorro".to_string(),
        vec!["fox".to_string(), "hound".to_string()],
    );
    dict.insert("perro".to_string(), vec!["dog".to_string()]);
    let t = translate_dict(&["zorro", "perro", "el", "perro"], &dict);
    assert_eq!((t.translated, t.dropped), (3, 1));
    let hits = idx.search(&t.query, usize::MAX);
    check(&hits, &ids, &expected()["syn"]);
    // many queries at once give the same lists
    let many = idx.search_many(&[t.query.clone(), Query::from_tokens(&["fox"])], usize::MAX);
    assert_eq!(many[0], hits);
}

#[test]
fn bm25_parameters_matter_and_are_checked() {
    let (_, mut idx) = fixture_index();
    let q = Query::from_tokens(&["quick", "fox"]);
    let a = idx.search(&q, 1)[0].score;
    idx.set_params(Bm25Params { k1: 2.0, b: 0.3 }).unwrap();
    assert!((idx.search(&q, 1)[0].score - a).abs() > 1e-6);
    assert!(idx.set_params(Bm25Params { k1: 1.2, b: 1.5 }).is_err());
    assert!(Bm25Index::build(&[vec!["a"]], Bm25Params { k1: -1.0, b: 0.5 }).is_err());
}

/// A random collection with Zipf-like term draws and planted duplicates.
fn random_collection(seed: u64, n: usize, v: usize) -> (CsrMatrix, Vocabulary) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut m = CsrMatrix::new(v);
    let mut rows: Vec<Vec<(u32, f32)>> = Vec::new();
    for i in 0..n {
        if i > 0 && rng.random_bool(0.1) {
            let j = rng.random_range(0..i);
            rows.push(rows[j].clone());
        } else {
            let len = rng.random_range(0..12);
            let row: Vec<(u32, f32)> = (0..len)
                .map(|_| {
                    let u: f64 = rng.random();
                    (((v as f64).powf(u) - 1.0) as u32 % v as u32, 1.0)
                })
                .collect();
            rows.push(row);
        }
        m.push_row(rows[i].clone());
    }
    let mut df = vec![0u32; v];
    for &c in &m.indices {
        df[c as usize] += 1;
    }
    let terms = (0..v).map(|t| format!("t{t}")).collect();
    (m.clone(), Vocabulary::from_parts("xx", terms, df, n))
}

#[test]
fn pruned_mining_equals_brute_force() {
    let mut pruned_away = 0;
    for (seed, n, v) in [
        (0u64, 400, 60),
        (1, 400, 60),
        (2, 300, 20),
        (3, 3000, 400),
        (4, 3000, 100),
    ] {
        let (m, vocab) = random_collection(seed, n, v);
        let mut df = vec![0u64; v];
        for &c in &m.indices {
            df[c as usize] += 1;
        }
        let brute_postings: u64 = m.indices.iter().map(|&c| df[c as usize]).sum();
        for scoring in [
            MineScoring::Bm25 { k1: 1.2, b: 0.75 },
            MineScoring::Bm25 { k1: 0.9, b: 0.4 },
            MineScoring::TfIdfCosine,
        ] {
            for idf in [IdfSource::Collection, IdfSource::Vocabulary] {
                for skip_duplicates in [false, true] {
                    let cfg = MineConfig {
                        scoring,
                        idf,
                        skip_duplicates,
                    };
                    let pruned = mine_positives(&m, &vocab, &cfg).unwrap();
                    let brute = mine_positives_exhaustive(&m, &vocab, &cfg).unwrap();
                    let diff: Vec<usize> = (0..n)
                        .filter(|&i| pruned.positives[i] != brute[i])
                        .collect();
                    assert!(
                        diff.is_empty(),
                        "seed {seed} {cfg:?}: {} texts differ, first {:?}",
                        diff.len(),
                        diff.first()
                    );
                    assert!(pruned.postings <= brute_postings);
                    pruned_away += brute_postings - pruned.postings;
                    for (q, p) in pruned.positives.iter().enumerate() {
                        if let Some(p) = p {
                            assert_ne!(*p as usize, q, "a text is never its own positive");
                            if skip_duplicates {
                                assert_ne!(m.row(q), m.row(*p as usize));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(pruned_away > 0, "pruning never skipped a posting");
}

#[test]
fn mining_on_a_tiny_collection() {
    let mut m = CsrMatrix::new(4);
    m.push_row([(0, 1.0), (1, 1.0)]); // 0: a b
    m.push_row([(0, 1.0), (1, 1.0)]); // 1: a b (duplicate of 0)
    m.push_row([(1, 1.0), (2, 2.0)]); // 2: b c c
    m.push_row([(3, 1.0)]); // 3: d, shares nothing
    m.push_row([]); // 4: empty
    let vocab = Vocabulary::from_parts(
        "xx",
        vec!["a".into(), "b".into(), "c".into(), "d".into()],
        vec![2, 3, 1, 1],
        5,
    );
    let got = mine_positives(&m, &vocab, &MineConfig::default()).unwrap();
    assert_eq!(got.positives, vec![Some(1), Some(0), Some(0), None, None]);
    let cfg = MineConfig {
        skip_duplicates: true,
        ..Default::default()
    };
    let got = mine_positives(&m, &vocab, &cfg).unwrap();
    assert_eq!(got.positives, vec![Some(2), Some(2), Some(0), None, None]);
    assert_eq!(got.duplicates_skipped, 2);
    // a vocabulary that does not fit the matrix is an error, not a panic
    let small = Vocabulary::from_parts("xx", vec!["a".into()], vec![1], 5);
    assert!(mine_positives(&m, &small, &cfg).is_err());
}

fn naive_top_k(docs: &Array2<f32>, q: &Array2<f32>, k: usize, ties: &TieOrder) -> Vec<Vec<Hit>> {
    q.rows()
        .into_iter()
        .map(|qr| {
            let mut hits: Vec<Hit> = docs
                .rows()
                .into_iter()
                .enumerate()
                .map(|(i, dr)| Hit {
                    doc: i as u32,
                    score: dr.iter().zip(qr.iter()).map(|(a, b)| a * b).sum::<f32>() as f64,
                })
                .collect();
            ties.sort(&mut hits);
            hits.truncate(k);
            hits
        })
        .collect()
}

#[test]
fn dense_top_k_equals_a_naive_scan_with_ties() {
    // small integers: every product is exact, so kernels agree bit for bit
    // and many scores tie
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (n, nq, d) = (2500, 300, 8);
    let docs = Array2::from_shape_fn((n, d), |_| rng.random_range(-2i32..=2) as f32);
    let q = Array2::from_shape_fn((nq, d), |_| rng.random_range(-2i32..=2) as f32);
    let docnos: Vec<String> = (0..n)
        .map(|i| format!("doc{:x}", (i * 7919) % 10007))
        .collect();
    for ties in [TieOrder::by_row(), TieOrder::from_docnos(&docnos)] {
        let want = naive_top_k(&docs, &q, 10, &ties);
        for m in Matmul::ALL {
            let got = top_k(docs.view(), q.view(), 10, &ties, m).unwrap();
            assert_eq!(got, want, "{m:?}");
        }
    }
    // k beyond the collection returns everything, in order
    let small = docs.slice(ndarray::s![..5, ..]).to_owned();
    let got = DenseIndex::new(small.clone())
        .unwrap()
        .search(q.view(), 50)
        .unwrap();
    assert_eq!(got, naive_top_k(&small, &q, 50, &TieOrder::by_row()));
    // shape errors are errors
    let bad = Array2::<f32>::zeros((2, d + 1));
    assert!(top_k(
        docs.view(),
        bad.view(),
        3,
        &TieOrder::by_row(),
        Matmul::Gemm
    )
    .is_err());
    let mut nan = small.clone();
    nan[[1, 1]] = f32::NAN;
    assert!(DenseIndex::new(nan).is_err());
}

#[test]
fn npy_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let a = Array2::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f32 / 7.0);
    let p = dir.path().join("sub/x.npy");
    write_npy(&p, &a).unwrap();
    assert_eq!(read_npy(&p).unwrap(), a);
    std::fs::write(dir.path().join("bad.npy"), b"not npy").unwrap();
    let e = read_npy(&dir.path().join("bad.npy"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.npy"), "{e}");
}

#[test]
fn apertium_errors_name_the_pair_and_keep_lines() {
    // an unknown pair is a clear error whether or not apertium is installed
    let e = apertium_translate(&["hello"], "en", "zz")
        .unwrap_err()
        .to_string();
    assert!(e.contains("apertium"), "{e}");
    if apertium_pairs()
        .map(|p| p.iter().any(|p| p == "eng-spa"))
        .unwrap_or(false)
    {
        let out =
            apertium_translate(&["The dog.", "", "Where is\nthe house?"], "en", "es").unwrap();
        assert_eq!(out.len(), 3);
        assert!(out[0].to_lowercase().contains("perro"), "{out:?}");
        assert_eq!(out[1], "");
        assert!(out[2].to_lowercase().contains("casa"), "{out:?}");
    }
}

fn tiny_ws() -> PathBuf {
    fixture("ws/ws.toml")
}

fn bm25_cli(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .arg("bm25")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn bm25_runs_on_a_workspace_task() {
    use rosetta::corpus::Workspace;
    use rosetta::eval::{evaluate, Run};
    use rosetta::index::adhoc::{bm25_run, Bm25RunConfig, Translation};
    use rosetta::text::Side;

    let ws = Workspace::load(&tiny_ws()).unwrap();
    let task = ws.adhoc().unwrap();
    let mono = bm25_run(
        &ws,
        &task,
        &Bm25RunConfig {
            queries: Side::Target,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(mono.run.tag, "bm25-target");
    assert_eq!(evaluate(&mono.run, &task.qrels).mean.mrr, 1.0);
    let dict = bm25_run(
        &ws,
        &task,
        &Bm25RunConfig {
            translation: Translation::Dict,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(dict.stats.translated_tokens > 0 && dict.stats.dropped_tokens > 0);
    let none = bm25_run(&ws, &task, &Bm25RunConfig::default()).unwrap();
    let (d, n) = (
        evaluate(&dict.run, &task.qrels).mean.mrr,
        evaluate(&none.run, &task.qrels).mean.mrr,
    );
    assert!(d > n, "dictionary {d} should beat untranslated {n}");
    // the written run reads back to the same evaluation (scores as written)
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dict.run");
    dict.run.write(&p).unwrap();
    let back = Run::read(&p).unwrap();
    assert_eq!(
        evaluate(&back, &task.qrels),
        evaluate(&dict.run, &task.qrels)
    );
    // target queries take no translation
    let bad = Bm25RunConfig {
        queries: Side::Target,
        translation: Translation::Dict,
        ..Default::default()
    };
    assert!(bm25_run(&ws, &task, &bad).is_err());
}

#[test]
fn bm25_cli_writes_a_run_and_one_json_object() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r.run");
    let ws = tiny_ws();
    let o = bm25_cli(&[
        "--workspace",
        ws.to_str().unwrap(),
        "--queries",
        "target",
        "--run",
        run.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.trim().lines().count(), 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["metrics"]["MRR"].as_f64(), Some(1.0));
    assert_eq!(v["query_stats"]["queries"].as_u64(), Some(4));
    let text = std::fs::read_to_string(&run).unwrap();
    assert!(
        text.lines().next().unwrap().starts_with("q1 Q0 e1 1 "),
        "{text}"
    );
    // a bad parameter is an error naming it
    let o = bm25_cli(&[
        "--workspace",
        ws.to_str().unwrap(),
        "--b",
        "2",
        "--run",
        run.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("b must lie"));
}

#[test]
fn bm25_mt_through_apertium_when_installed() {
    use rosetta::corpus::Workspace;
    use rosetta::index::adhoc::{bm25_run, Bm25RunConfig, Translation};
    let ws = Workspace::load(&tiny_ws()).unwrap();
    let task = ws.adhoc().unwrap();
    let cfg = Bm25RunConfig {
        translation: Translation::Mt,
        ..Default::default()
    };
    match apertium_pairs() {
        Ok(p) if p.iter().any(|p| p == "eng-spa") => {
            let r = bm25_run(&ws, &task, &cfg).unwrap();
            let mrr = rosetta::eval::evaluate(&r.run, &task.qrels).mean.mrr;
            assert!(mrr >= 0.75, "MT MRR {mrr}");
        }
        _ => {
            let e = bm25_run(&ws, &task, &cfg).unwrap_err().to_string();
            assert!(e.contains("apertium"), "{e}");
        }
    }
}

/// Document embeddings memory-mapped from a `.npy` file rank every query
/// exactly as the same rows in memory (same rows, same scores to 1e-6),
/// exactly and through an HNSW graph over them; the map is scanned in
/// blocks whose pages are released, so reading it again gives the same.
#[test]
fn mapped_embeddings_rank_as_the_loaded_ones() {
    use rosetta::index::{ApproxIndex, Embeddings, HnswParams, MappedNpy};
    let mut rng = ChaCha8Rng::seed_from_u64(53);
    let (n, d) = (9000, 24);
    let mut docs = Array2::from_shape_fn((n, d), |_| rng.random::<f32>() - 0.5);
    for mut r in docs.rows_mut() {
        let norm = r.dot(&r).sqrt();
        r.mapv_inplace(|x| x / norm);
    }
    let q = Array2::from_shape_fn((7, d), |_| rng.random::<f32>() - 0.5);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("doc-embeddings.npy");
    write_npy(&p, &docs).unwrap();
    let ids: Vec<String> = (0..n).map(|i| format!("d{:05}", (i * 7919) % n)).collect();
    let loaded = DenseIndex::new(docs.clone())
        .unwrap()
        .with_docnos(&ids)
        .unwrap();
    let mapped = Embeddings::from(MappedNpy::open(&p, (n, d)).unwrap());
    assert_eq!(mapped.mapped_from(), Some(p.as_path()));
    let from_map = DenseIndex::new(mapped.clone())
        .unwrap()
        .with_docnos(&ids)
        .unwrap();
    let same = |a: &[Vec<Hit>], b: &[Vec<Hit>]| {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert_eq!(
                x.iter().map(|h| h.doc).collect::<Vec<_>>(),
                y.iter().map(|h| h.doc).collect::<Vec<_>>()
            );
            for (h, g) in x.iter().zip(y) {
                assert!((h.score - g.score).abs() <= 1e-6, "{h:?} {g:?}");
            }
        }
    };
    let want = loaded.search(q.view(), 50).unwrap();
    same(&want, &from_map.search(q.view(), 50).unwrap());
    // again, after the first scan released the pages
    same(&want, &from_map.search(q.view(), 50).unwrap());
    // one graph, searching the rows in memory and the mapped ones
    let g_loaded = ApproxIndex::build(docs.clone(), HnswParams::default()).unwrap();
    let graph = dir.path().join("hnsw.graph");
    g_loaded.save(&graph).unwrap();
    let g_mapped = ApproxIndex::load_for(&graph, mapped)
        .unwrap()
        .expect("the graph of these rows");
    same(
        &g_loaded.search(q.view(), 10).unwrap(),
        &g_mapped.search(q.view(), 10).unwrap(),
    );
}
