//! `rosetta eval`'s report of texts that encode to nothing and of both tie
//! conventions, and `rosetta export`'s files read back by their formats'
//! rules, on the tiny English→Spanish fixture workspace.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ndarray::Array2;
use ndarray_npy::ReadNpyExt;
use serde_json::Value;

use crate::common;
use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

/// Words in no vocabulary of the fixture: a text of them encodes to nothing.
const UNKNOWN: &str = "qxzv wyrrk zzptq";

fn json(out: &std::process::Output) -> Value {
    serde_json::from_str(ok(out).trim()).unwrap()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
        .lines()
        .map(str::to_string)
        .collect()
}

/// A CCA session (dimension 4) trained on a private copy of the fixture,
/// edited first by `edit`.
fn cca_session(edit: impl Fn(&Path)) -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let ws = tiny_workspace();
    edit(ws.path());
    let root = tempfile::tempdir().unwrap();
    let s = root.path().join("cca");
    train(
        root.path(),
        &ws.path().join("workspace.toml"),
        "cca",
        &s,
        &["--dim", "4"],
    );
    (ws, root, s)
}

fn eval(root: &Path, session: &Path, more: &[&str]) -> std::process::Output {
    let mut args = vec!["eval", "--session", session.to_str().unwrap()];
    args.extend_from_slice(more);
    rosetta(root, &args)
}

fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no count {key} in {v}"))
}

/// Both tie conventions are reported, and ties for the answer never score
/// lower than ties against it.
fn check_tie_conventions(s: &Value) {
    let f = |k: &str| s[k].as_f64().unwrap_or_else(|| panic!("no {k} in {s}"));
    assert!(f("MRR_ties_for") >= f("MRR"), "{s}");
    assert!(f("P@1_ties_for") >= f("P@1"), "{s}");
    assert!(f("MRR_ties_for") <= 1.0 && f("MRR") > 0.0, "{s}");
}

#[test]
fn eval_counts_texts_that_encode_to_nothing() {
    // planted in the workspace: a test pair whose source and another whose
    // target is all unknown words, a judged query and a document of them
    let (ws, root, session) = cca_session(|dir| {
        let replace = |name: &str, i: usize| {
            let mut l = lines(&dir.join(name));
            l[i] = UNKNOWN.into();
            std::fs::write(dir.join(name), l.join("\n") + "\n").unwrap();
        };
        replace("test.en", 0);
        replace("test.es", 1);
        let append = |name: &str, more: &str| {
            let mut t = std::fs::read_to_string(dir.join(name)).unwrap();
            t.push_str(more);
            std::fs::write(dir.join(name), t).unwrap();
        };
        append("docs.es.tsv", &format!("d98\t{UNKNOWN}\n"));
        append("queries.en.tsv", &format!("q98\t{UNKNOWN}\n"));
        append("qrels.tsv", "q98 0 d02 1\n");
    });
    let root = root.path();
    let f = |name: &str| ws.path().join(name).to_str().unwrap().to_string();

    // the workspace's test split: the counts of its prepared matrices equal
    // those of the same files counted with the session's vocabulary
    let own = json(&eval(root, &session, &["--task", "sentence", "--json"]));
    let given = json(&eval(
        root,
        &session,
        &[
            "--task",
            "sentence",
            "--json",
            "--test",
            &f("test.en"),
            &f("test.es"),
        ],
    ));
    assert_eq!(count(&own["sentence"], "empty_source_texts"), 1, "{own}");
    assert_eq!(count(&own["sentence"], "empty_target_texts"), 1, "{own}");
    assert_eq!(count(&own["sentence"], "pairs_without_known_terms"), 2);
    for key in [
        "empty_source_texts",
        "empty_target_texts",
        "pairs_without_known_terms",
    ] {
        assert_eq!(
            count(&own["sentence"], key),
            count(&given["sentence"], key),
            "{key}: {own} {given}"
        );
    }
    check_tie_conventions(&own["sentence"]);
    assert_eq!(own["sentence"]["MRR"], given["sentence"]["MRR"]);
    assert_eq!(
        own["sentence"]["MRR_ties_for"],
        given["sentence"]["MRR_ties_for"]
    );

    // planted texts of unknown words: 2 source and 2 target texts encode to
    // nothing, in 3 pairs (one pair on both sides)
    let en = lines(&ws.path().join("test.en"));
    let es = lines(&ws.path().join("test.es"));
    let dir = tempfile::tempdir().unwrap();
    let (src, tgt) = (dir.path().join("t.en"), dir.path().join("t.es"));
    let src_lines = [UNKNOWN, UNKNOWN, &en[2], &en[3], &en[4]];
    let tgt_lines = [es[2].as_str(), UNKNOWN, UNKNOWN, &es[3], &es[4]];
    std::fs::write(&src, src_lines.join("\n") + "\n").unwrap();
    std::fs::write(&tgt, tgt_lines.join("\n") + "\n").unwrap();
    let (src, tgt) = (src.to_str().unwrap(), tgt.to_str().unwrap());
    let args = ["--task", "sentence", "--test", src, tgt];
    let v = json(&eval(root, &session, &[&args[..], &["--json"]].concat()));
    let s = &v["sentence"];
    assert_eq!(count(s, "queries"), 5, "{s}");
    assert_eq!(count(s, "empty_source_texts"), 2, "{s}");
    assert_eq!(count(s, "empty_target_texts"), 2, "{s}");
    assert_eq!(count(s, "pairs_without_known_terms"), 3, "{s}");
    check_tie_conventions(s);
    let text = ok(&eval(root, &session, &args));
    assert!(
        text.contains("5 pairs; 2 source and 2 target texts encode to nothing")
            && text.contains("(ties for the answer: MRR "),
        "{text}"
    );

    // the workspace's ad-hoc task, and the same files given: equal counts
    let own = json(&eval(root, &session, &["--task", "adhoc", "--json"]));
    assert_eq!(count(&own["adhoc"], "empty_queries"), 1, "{own}");
    assert_eq!(count(&own["adhoc"], "empty_documents"), 1, "{own}");
    let adhoc = |docs: &str, queries: &str, qrels: &str, json: bool| {
        let mut a = vec!["--task", "adhoc", "--adhoc", docs, queries, qrels];
        if json {
            a.push("--json");
        }
        eval(root, &session, &a)
    };
    let given = json(&adhoc(
        &f("docs.es.tsv"),
        &f("queries.en.tsv"),
        &f("qrels.tsv"),
        true,
    ));
    for key in ["empty_queries", "empty_documents"] {
        assert_eq!(
            count(&own["adhoc"], key),
            count(&given["adhoc"], key),
            "{key}"
        );
    }
    // planted: one judged and one unjudged query of unknown words (only the
    // judged one is evaluated, so counted), and one document of them
    let docs = dir.path().join("docs.tsv");
    let queries = dir.path().join("queries.tsv");
    let qrels = dir.path().join("qrels.tsv");
    let mut d = std::fs::read_to_string(f("docs.es.tsv")).unwrap();
    d.push_str(&format!("d99\t{UNKNOWN}\n"));
    std::fs::write(&docs, d).unwrap();
    let mut q = std::fs::read_to_string(f("queries.en.tsv")).unwrap();
    q.push_str(&format!("q97\t{UNKNOWN}\nq99\t{UNKNOWN}\n"));
    std::fs::write(&queries, q).unwrap();
    let mut j = std::fs::read_to_string(f("qrels.tsv")).unwrap();
    j.push_str("q99 0 d01 1\n");
    std::fs::write(&qrels, j).unwrap();
    let (docs, queries, qrels) = (
        docs.to_str().unwrap(),
        queries.to_str().unwrap(),
        qrels.to_str().unwrap(),
    );
    let v = json(&adhoc(docs, queries, qrels, true));
    let a = &v["adhoc"];
    assert_eq!(count(a, "queries"), 7, "{a}");
    assert_eq!(
        count(a, "empty_queries"),
        count(&given["adhoc"], "empty_queries") + 1,
        "{a}"
    );
    assert_eq!(
        count(a, "empty_documents"),
        count(&given["adhoc"], "empty_documents") + 1,
        "{a}"
    );
    let text = ok(&adhoc(docs, queries, qrels, false));
    let want = format!(
        "7 queries, 10 documents; {} quer",
        count(a, "empty_queries")
    );
    assert!(
        text.contains(&want) && text.contains("encode to nothing"),
        "{text}"
    );
}

/// A lexical baseline reports both tie conventions too (it has no
/// vocabulary, so no counts of texts encoding to nothing).
#[test]
fn lexical_baseline_reports_both_tie_conventions() {
    let ws = tiny_workspace();
    let root = tempfile::tempdir().unwrap();
    let s = root.path().join("bm25");
    train(
        root.path(),
        &ws.path().join("workspace.toml"),
        "bm25-dict",
        &s,
        &[],
    );
    let v = json(&eval(root.path(), &s, &["--task", "sentence", "--json"]));
    check_tie_conventions(&v["sentence"]);
    assert!(v["sentence"].get("empty_source_texts").is_none(), "{v}");
    let text = ok(&eval(root.path(), &s, &["--task", "sentence"]));
    assert!(text.contains("(ties for the answer: MRR "), "{text}");
    // queries of unknown words match nothing: every target ties at 0, so
    // each answer ranks last against and first for
    let dir = tempfile::tempdir().unwrap();
    let es = lines(&ws.path().join("test.es"));
    let (src, tgt) = (dir.path().join("t.en"), dir.path().join("t.es"));
    std::fs::write(&src, format!("{UNKNOWN}\n{UNKNOWN} {UNKNOWN}\n")).unwrap();
    std::fs::write(&tgt, format!("{}\n{}\n", es[0], es[1])).unwrap();
    let v = json(&eval(
        root.path(),
        &s,
        &[
            "--task",
            "sentence",
            "--json",
            "--test",
            src.to_str().unwrap(),
            tgt.to_str().unwrap(),
        ],
    ));
    let sc = &v["sentence"];
    assert_eq!(sc["queries"], 2, "{sc}");
    assert_eq!(
        (sc["MRR"].as_f64(), sc["P@1"].as_f64()),
        (Some(0.5), Some(0.0)),
        "{sc}"
    );
    assert_eq!(
        (sc["MRR_ties_for"].as_f64(), sc["P@1_ties_for"].as_f64()),
        (Some(1.0), Some(1.0)),
        "{sc}"
    );
}

/// Reads a word2vec text file by the format's rules; returns its terms and
/// the dimension.
fn read_word2vec(path: &Path) -> (Vec<String>, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert!(text.ends_with('\n'), "{path:?}: no final newline");
    let mut lines = text.lines();
    let header: Vec<usize> = lines
        .next()
        .expect("a header line")
        .split(' ')
        .map(|x| x.parse().expect("header: two integers"))
        .collect();
    let [count, dim] = header[..] else {
        panic!("{path:?}: header is not `count dim`: {header:?}")
    };
    assert!(dim > 0, "{path:?}: dimension 0");
    let mut terms = Vec::new();
    for (n, line) in lines.enumerate() {
        let fields: Vec<&str> = line.split(' ').collect();
        assert_eq!(
            fields.len(),
            dim + 1,
            "{path:?} line {}: {line:?} is not a term and {dim} numbers",
            n + 2
        );
        let term = fields[0];
        assert!(
            !term.is_empty() && !term.chars().any(char::is_whitespace),
            "{path:?} line {}: term {term:?}",
            n + 2
        );
        for x in &fields[1..] {
            let v: f32 = x
                .parse()
                .unwrap_or_else(|e| panic!("{path:?} line {}: {x:?}: {e}", n + 2));
            assert!(v.is_finite(), "{path:?} line {}: {x}", n + 2);
        }
        terms.push(term.to_string());
    }
    assert_eq!(terms.len(), count, "{path:?}: header count against lines");
    let unique: HashSet<&String> = terms.iter().collect();
    assert_eq!(unique.len(), terms.len(), "{path:?}: a term twice");
    (terms, dim)
}

fn read_npy(path: &Path) -> Array2<f32> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    Array2::<f32>::read_npy(f).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

#[test]
fn export_round_trips() {
    let (ws, root, session) = cca_session(|_| {});
    let out = root.path().join("export");
    let printed = ok(&rosetta(
        root.path(),
        &[
            "export",
            "--session",
            session.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--terms",
            "indexed",
            "--write",
            "vectors,embeddings,run",
        ],
    ));
    for (lang, vocab) in [("en", "vocab.source.json"), ("es", "vocab.target.json")] {
        let path = out.join(format!("terms.{lang}.vec"));
        assert!(printed.contains(path.to_str().unwrap()), "{printed}");
        let (terms, dim) = read_word2vec(&path);
        assert_eq!(dim, 4, "{path:?}");
        // every term of the session's vocabulary, in id order
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(session.join(vocab)).unwrap()).unwrap();
        let want: Vec<String> = serde_json::from_value(v["terms"].clone()).unwrap();
        assert_eq!(terms, want, "{path:?}");
    }
    // embeddings: one row per id (per test pair), the model's dimension
    for (npy, rows) in [
        ("test.en.npy", lines(&ws.path().join("test.en")).len()),
        ("test.es.npy", lines(&ws.path().join("test.es")).len()),
        ("docs.es.npy", lines(&out.join("docs.es.ids.txt")).len()),
        (
            "queries.en.npy",
            lines(&out.join("queries.en.ids.txt")).len(),
        ),
    ] {
        let a = read_npy(&out.join(npy));
        assert_eq!(a.dim(), (rows, 4), "{npy}");
        assert!(a.iter().all(|x| x.is_finite()), "{npy}");
    }
    assert_eq!(lines(&out.join("docs.es.ids.txt")).len(), 8);
    assert_eq!(lines(&ws.path().join("test.en")).len(), 6);
    assert_eq!(lines(&out.join("queries.en.ids.txt")).len(), 5);
    assert!(out.join("adhoc.run").is_file());
}

/// A surface word the word2vec text format cannot hold (whitespace inside,
/// as the lone visarga `" ः"` of vocabularies saved before issue 55) is left
/// out with a warning naming it and the count, and the export goes on: every
/// other word is written. (A vocabulary file whose terms hold whitespace is
/// refused when read.)
#[test]
fn export_skips_a_word_the_format_cannot_hold() {
    let (_ws, root, session) = cca_session(|_| {});
    let vocab = session.join("vocab.target.json");
    let original = std::fs::read_to_string(&vocab).unwrap();
    let clean = root.path().join("clean");
    ok(&crate::common::export(
        root.path(),
        &session,
        &clean,
        "vectors",
    ));
    let (all, _) = read_word2vec(&clean.join("terms.es.vec"));
    for bad in [" \u{903}", "two words"] {
        let mut v: Value = serde_json::from_str(&original).unwrap();
        let was = v["surface"][2].as_str().unwrap().to_string();
        v["surface"][2] = Value::String(bad.into());
        std::fs::write(&vocab, serde_json::to_string(&v).unwrap()).unwrap();
        let out = root.path().join(format!("export-{}", bad.len()));
        let o = crate::common::export(root.path(), &session, &out, "vectors");
        ok(&o);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("1 es word left out") && err.contains(&format!("term 2, {bad:?}")),
            "{bad:?}: {err}"
        );
        let (got, _) = read_word2vec(&out.join("terms.es.vec"));
        let want: Vec<String> = all.iter().filter(|w| **w != was).cloned().collect();
        assert_eq!(got, want, "{bad:?}");
    }
}

fn fails_with(out: &std::process::Output, what: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    for w in what {
        assert!(err.contains(w), "{w:?} not in: {err}");
    }
    err
}

/// Issue 39 items 8 and 9: a figure over nothing (empty documents, queries,
/// qrels or dictionary) is an error naming the file, never 0.0; with its
/// best checkpoint gone, `eval` says it used the last one (text and JSON).
#[test]
fn empty_inputs_are_errors_and_a_fallback_is_said() {
    let (ws, root, session) = cca_session(|_| {});
    let root = root.path();
    let f = |name: &str| ws.path().join(name).to_str().unwrap().to_string();
    let empty = root.join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    let e = empty.to_str().unwrap();
    let (docs, queries, qrels) = (f("docs.es.tsv"), f("queries.en.tsv"), f("qrels.tsv"));
    for (args, file, what) in [
        ([docs.as_str(), queries.as_str(), e], e, "no judgements"),
        ([docs.as_str(), e, qrels.as_str()], e, "no queries"),
        ([e, queries.as_str(), qrels.as_str()], e, "no documents"),
    ] {
        let mut a = vec!["--task", "adhoc", "--adhoc"];
        a.extend_from_slice(&args);
        fails_with(&eval(root, &session, &a), &[file, what]);
    }
    fails_with(
        &eval(root, &session, &["--task", "bli", "--dictionary", e]),
        &[e, "no dictionary entries"],
    );
    // a dictionary none of whose words the model knows: no figure either
    let foreign = root.join("foreign.tsv");
    std::fs::write(&foreign, "qxzv\twyrrk\n").unwrap();
    fails_with(
        &eval(
            root,
            &session,
            &["--task", "bli", "--dictionary", foreign.to_str().unwrap()],
        ),
        &["none of the dictionary's 1 entries"],
    );
    // BM25 on a workspace whose ad-hoc qrels are empty
    let kept = std::fs::read(ws.path().join("qrels.tsv")).unwrap();
    std::fs::write(ws.path().join("qrels.tsv"), "").unwrap();
    let ws_file = f("workspace.toml");
    fails_with(
        &rosetta(root, &["bm25", "--workspace", &ws_file]),
        &["qrels.tsv", "no judgements"],
    );
    std::fs::write(ws.path().join("qrels.tsv"), kept).unwrap();

    // the best checkpoint gone: the last one is used, and eval says so
    let best = session.join("checkpoints/best.safetensors");
    let out = json(&eval(root, &session, &["--task", "sentence", "--json"]));
    assert_eq!(out["checkpoint"]["checkpoint"], "best", "{out}");
    assert!(out["checkpoint"].get("warning").is_none(), "{out}");
    std::fs::remove_file(&best).unwrap();
    let o = eval(root, &session, &["--task", "sentence", "--json"]);
    let out = json(&o);
    assert_eq!(out["checkpoint"]["checkpoint"], "last", "{out}");
    let w = out["checkpoint"]["warning"].as_str().unwrap_or_default();
    assert!(w.contains("best.safetensors is missing"), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("best.safetensors is missing"), "{err}");
}

/// The vocabulary file of `session` for `lang`, as JSON.
fn vocab_json(session: &Path, file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(session.join(file)).unwrap()).unwrap()
}

/// By default `export` writes surface words (a stem's commonest training
/// form, as `neighbours` shows), the n-gram units left out, readable by the
/// word2vec text rules; each word's vector is its term's; the ad-hoc run
/// only when asked, at the depth asked.
#[test]
fn export_writes_surface_words_and_the_run_only_when_asked() {
    // a vocabulary smaller than the fixture's words, so that n-gram units
    // stand in for the words left out
    let (_ws, root, session) = cca_session(|dir| {
        let p = dir.join("workspace.toml");
        let t = std::fs::read_to_string(&p).unwrap();
        let t = t.replace(
            "vocab_per_language = 1000",
            "vocab_per_language = 12\noov_ngrams = 50",
        );
        std::fs::write(&p, t).unwrap();
    });
    let run = |out: &Path, more: &[&str]| {
        let mut args = vec![
            "export",
            "--session",
            session.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(more);
        rosetta(root.path(), &args)
    };
    let words = root.path().join("words");
    ok(&run(&words, &[]));
    let indexed = root.path().join("indexed");
    ok(&run(
        &indexed,
        &["--terms", "indexed", "--write", "vectors"],
    ));
    let mut stems_differ = 0;
    for (lang, file) in [("en", "vocab.source.json"), ("es", "vocab.target.json")] {
        let v = vocab_json(&session, file);
        let terms: Vec<String> = serde_json::from_value(v["terms"].clone()).unwrap();
        let surface: Vec<String> = serde_json::from_value(v["surface"].clone()).unwrap();
        let n_words = v["fallback"]["words"].as_u64().unwrap() as usize;
        assert!(
            terms.len() > n_words,
            "{lang}: no n-gram units to leave out"
        );
        let path = words.join(format!("terms.{lang}.vec"));
        let (got, dim) = read_word2vec(&path);
        assert_eq!(dim, 4);
        // the words, in id order, each once; no n-gram unit
        let mut seen = HashSet::new();
        let want: Vec<String> = surface[..n_words]
            .iter()
            .filter(|w| seen.insert(w.to_string()))
            .cloned()
            .collect();
        assert_eq!(got, want, "{path:?}");
        assert!(got.iter().all(|w| !w.starts_with('#')), "{got:?}");
        stems_differ += terms[..n_words]
            .iter()
            .zip(&surface)
            .filter(|(t, s)| t != s)
            .count();
        // a word's vector is its term's (the first term showing as it)
        let idx = lines(&indexed.join(format!("terms.{lang}.vec")));
        let wl = lines(&path);
        let numbers = |l: &str| l.split_once(' ').unwrap().1.to_string();
        for (j, w) in got.iter().enumerate() {
            let i = surface.iter().position(|s| s == w).unwrap();
            assert!(i < n_words, "{w}");
            assert_eq!(idx[i + 1].split(' ').next(), Some(terms[i].as_str()));
            assert_eq!(numbers(&wl[j + 1]), numbers(&idx[i + 1]), "{lang} {w}");
        }
    }
    assert!(stems_differ > 0, "the fixture has no stem unlike its word");
    assert!(!words.join("adhoc.run").exists(), "the run written unasked");
    assert!(words.join("docs.es.npy").is_file());
    assert!(!indexed.join("docs.es.npy").exists());
    // the run when asked, at the depth asked
    let deep = root.path().join("run");
    ok(&run(&deep, &["--write", "run", "--depth", "2"]));
    let run_lines = lines(&deep.join("adhoc.run"));
    let queries: HashSet<&str> = run_lines
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert!(!queries.is_empty());
    assert_eq!(run_lines.len(), 2 * queries.len(), "{run_lines:?}");
    assert!(!deep.join("terms.en.vec").exists());
    // a depth with no run is refused before anything is written
    let none = root.path().join("none");
    let o = run(&none, &["--depth", "5"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--write"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!none.exists());
}

/// Lexicon induction as MUSE evaluates it: the workspace dictionary split
/// by source word (seeded), scored on the test part only, the split
/// recorded in the session; another seed gives another split.
#[test]
fn lexicon_induction_is_scored_on_a_recorded_test_part() {
    let (_ws, root, session) = cca_session(|_| {});
    let v = json(&eval(root.path(), &session, &["--task", "bli", "--json"]));
    let split = &v["bli"]["split"];
    assert_eq!(split["seed"], 1, "{v}");
    let file = PathBuf::from(split["file"].as_str().unwrap());
    assert_eq!(file, session.join("bli-split-1.json"));
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let part = |k: &str| -> Vec<String> { serde_json::from_value(rec[k].clone()).unwrap() };
    let (train, test) = (part("train"), part("test"));
    assert_eq!(test.len() as u64, split["test_words"].as_u64().unwrap());
    assert_eq!(train.len() as u64, split["train_words"].as_u64().unwrap());
    assert!(!test.is_empty() && !train.is_empty(), "{rec}");
    let test_set: HashSet<&String> = test.iter().collect();
    assert!(train.iter().all(|w| !test_set.contains(w)), "{rec}");
    // the figures count test words only
    let c = &v["bli"]["cosine"];
    assert_eq!(c["entries"].as_u64().unwrap(), test.len() as u64, "{v}");
    assert!(c["queries"].as_u64().unwrap() <= test.len() as u64);
    // the split is the seed's: the same again, another for another seed
    let again = json(&eval(root.path(), &session, &["--task", "bli", "--json"]));
    assert_eq!(again["bli"], v["bli"]);
    let other = json(&eval(
        root.path(),
        &session,
        &["--task", "bli", "--json", "--bli-seed", "7"],
    ));
    assert_eq!(other["bli"]["split"]["seed"], 7);
    let rec7: Value =
        serde_json::from_str(&std::fs::read_to_string(session.join("bli-split-7.json")).unwrap())
            .unwrap();
    assert_ne!(rec7["test"], rec["test"]);
    // a seed for a task without lexicon induction does nothing: refused
    let o = eval(
        root.path(),
        &session,
        &["--task", "adhoc", "--bli-seed", "2"],
    );
    assert!(!o.status.success());
}
