//! Search results you can read (issue 19): a workspace whose parallel data
//! has `[parallel] labels` (the Bible's verse references) labels the derived
//! task's documents and queries with them, every document keeps its aligned
//! source-language text, and `Searcher::document` gives a whole document by
//! id or label, never shortened — the engine call behind `rosetta search
//! --show/--full` and the workbench's document view.

use crate::common;

use std::path::Path;
use std::process::Command;

use rosetta::corpus::Workspace;
use rosetta::index::Fusion;
use rosetta::session::search::{DenseSearch, Searcher, TEXT_CHARS};

use common::{ok, rosetta_in as rosetta, train};

/// A private copy of `tests/fixtures/corpus/bible` (John 1:1-12, KJV and
/// RV1909, verse references in verses.txt).
fn bible() -> tempfile::TempDir {
    common::fixture_workspace("bible")
}

fn lines(dir: &Path, f: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(f))
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn the_derived_task_carries_verse_references_and_the_english_side() {
    let dir = bible();
    let (en, es, refs) = (
        lines(dir.path(), "kjv.en"),
        lines(dir.path(), "sparv.es"),
        lines(dir.path(), "verses.txt"),
    );
    let ws = Workspace::load(&dir.path().join("workspace.toml")).unwrap();
    let task = ws.adhoc().unwrap();
    let labels = task.doc_labels.as_ref().expect("labelled");
    let sources = task.doc_sources.as_ref().expect("aligned texts");
    assert_eq!((labels.len(), sources.len()), (12, 12));
    for (i, id) in task.docs.ids.iter().enumerate() {
        // the label names the verse whose Spanish is the document and whose
        // English is its aligned text
        let v = refs.iter().position(|r| *r == labels[i]).unwrap();
        assert_eq!(task.docs.texts[i], es[v], "{id}");
        assert_eq!(sources[i], en[v], "{id}");
    }
    let qlabels = task.query_labels.as_ref().unwrap();
    assert_eq!(qlabels.len(), task.queries.len());
    for (i, q) in task.queries.texts.iter().enumerate() {
        let v = refs.iter().position(|r| *r == qlabels[i]).unwrap();
        assert_eq!(*q, en[v]);
    }

    // a labels file that does not match the corpus is refused by name
    std::fs::write(dir.path().join("verses.txt"), "John 1:1\n").unwrap();
    let e = ws.adhoc().unwrap_err().to_string();
    assert!(
        e.contains("verses.txt") && e.contains("1 lines") && e.contains("12 pairs"),
        "{e}"
    );
}

#[test]
fn search_labels_results_and_shows_whole_documents() {
    let dir = bible();
    let root = dir.path();
    // one long verse pair past the hits' text limit (synthetic, labelled so)
    let long_es = "la luz resplandece en las tinieblas ".repeat(20);
    let long_en = "the light shineth in darkness ".repeat(20);
    for (f, t) in [
        ("sparv.es", long_es.trim()),
        ("kjv.en", long_en.trim()),
        ("verses.txt", "Synthetic 1:1"),
    ] {
        let mut text = std::fs::read_to_string(root.join(f)).unwrap();
        text.push_str(t);
        text.push('\n');
        std::fs::write(root.join(f), text).unwrap();
    }
    let session = root.join("sessions/bm25");
    train(
        root,
        &root.join("workspace.toml"),
        "bm25-dict",
        &session,
        &[],
    );
    let en = lines(root, "kjv.en");
    let es = lines(root, "sparv.es");

    let s = Searcher::open_alone(&session, DenseSearch::Saved, None, &|_, _| {}).unwrap();
    let r = s.search("light witness", 13, Fusion::Model).unwrap();
    assert!(!r.hits.is_empty());
    for h in &r.hits {
        let v: usize = match h.label.strip_prefix("John 1:") {
            Some(n) => n.parse::<usize>().unwrap() - 1,
            None => {
                assert_eq!(h.label, "Synthetic 1:1");
                12
            }
        };
        assert_ne!(h.label, h.docno);
        assert!(es[v].starts_with(h.text.trim_end_matches('…')), "{h:?}");
    }
    // the long verse: cut with … in the list, whole in the document
    let long = r.hits.iter().find(|h| h.label == "Synthetic 1:1").unwrap();
    assert!(long.text.ends_with('…') && long.text.chars().count() == TEXT_CHARS + 1);
    let d = s.document("Synthetic 1:1", Some("light")).unwrap();
    assert_eq!(d.text, es[12]);
    assert_eq!(d.source.as_deref(), Some(en[12].as_str()));

    // by label and by id, the same document; the query's words marked
    let d = s.document("John 1:8", Some("light")).unwrap();
    assert_eq!((d.text.as_str(), d.lang.as_str()), (es[7].as_str(), "es"));
    assert_eq!(d.source.as_deref(), Some(en[7].as_str()));
    assert_eq!(d.source_lang, "en");
    let marked: Vec<&str> = d.spans.iter().map(|&(a, b)| &d.text[a..b]).collect();
    assert_eq!(marked, vec!["luz", "luz"], "the dictionary's translation");
    let src = d.source.as_deref().unwrap();
    let marked: Vec<&str> = d.source_spans.iter().map(|&(a, b)| &src[a..b]).collect();
    assert_eq!(marked, vec!["Light", "Light"]);
    let by_id = s.document(&d.docno, None).unwrap();
    assert_eq!((by_id.label.as_str(), &by_id.text), ("John 1:8", &d.text));
    assert!(by_id.spans.is_empty());
    let e = s.document("John 9:99", None).unwrap_err().to_string();
    assert!(
        e.contains("no document \"John 9:99\"") && e.contains("John 1:"),
        "{e}"
    );

    // the CLI: labels in the list, whole documents with --full and --show
    let sess = session.to_str().unwrap();
    let out = ok(&rosetta(
        root,
        &["search", "--session", sess, "--query", "light witness"],
    ));
    assert!(out.contains(&format!("John 1:8 ({})", d.docno)), "{out}");
    let out = ok(&rosetta(
        root,
        &[
            "search",
            "--session",
            sess,
            "--query",
            "light witness",
            "--full",
        ],
    ));
    assert!(out.contains(&format!("en: {}", en[7])), "{out}");
    assert!(
        out.contains(&format!("es: {}", es[12])),
        "the long verse whole: {out}"
    );
    let out = ok(&rosetta(
        root,
        &["search", "--session", sess, "--show", "John 1:8"],
    ));
    assert_eq!(
        out,
        format!("John 1:8 ({})\n  es: {}\n  en: {}\n", d.docno, es[7], en[7])
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&rosetta(
        root,
        &["search", "--session", sess, "--show", &d.docno, "--json"],
    )))
    .unwrap();
    assert_eq!(v["label"], "John 1:8");
    assert_eq!(v["source"], en[7].as_str());
    let out = rosetta(root, &["search", "--session", sess, "--show", "John 9:99"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no document") && !err.contains("panicked"),
        "{err}"
    );
    let out = rosetta(root, &["search", "--session", sess]);
    assert!(
        !out.status.success(),
        "a query, --show or --history is needed"
    );
}

#[test]
fn search_history_lists_the_recorded_queries() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rosetta/search-history.txt");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(&f, "light of men\nthe word\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(["search", "--history"])
        .env("XDG_STATE_HOME", dir.path())
        .output()
        .unwrap();
    assert_eq!(ok(&out), "light of men\nthe word\n");
}

/// Query-word contributions account for the score: for a cosine model
/// linear in its counts (CCA, S2Net) they sum to each hit's score within
/// 1e-6 and name every query word the model read, as typed: also when the
/// session's text settings differ from the BM25 side's (here: no stemming,
/// stop words kept), where the words were looked up in the wrong analysis
/// and dropped, and with more than three words (the fourth was cut).
#[test]
fn contributions_sum_to_the_score_and_name_every_matched_word() {
    let ws = common::tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let text = std::fs::read_to_string(&wsf).unwrap();
    let text = text
        .replace("stem = true", "stem = false")
        .replace("stopwords = true", "stopwords = false");
    std::fs::write(&wsf, text).unwrap();
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "cca", "cca", &["--dim", "8"]);
    train(
        cwd,
        &wsf,
        "s2net",
        "s2net",
        &["--dim", "8", "--epochs", "1", "--set", "batch=8"],
    );
    for session in ["cca", "s2net"] {
        for query in [
            "the dog drinks water",
            "drinks",
            "cat drinks milk in the garden",
        ] {
            let out = ok(&rosetta(
                cwd,
                &[
                    "search",
                    "--session",
                    session,
                    "--query",
                    query,
                    "--k",
                    "5",
                    "--json",
                ],
            ));
            let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
            let hits = j["hits"].as_array().unwrap();
            assert!(!hits.is_empty(), "{session} {query}: {j}");
            // the words the model used: those the query report keeps
            let used: Vec<String> = j["query"]["words"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|w| w["reason"].is_null())
                .map(|w| w["word"].as_str().unwrap().to_lowercase())
                .collect();
            assert!(!used.is_empty(), "{j}");
            for h in hits {
                let c = h["contributions"].as_array().unwrap();
                let sum: f64 = c.iter().map(|x| x[1].as_f64().unwrap()).sum();
                let score = h["score"].as_f64().unwrap();
                assert!(
                    (sum - score).abs() < 1e-6,
                    "{session} {query}: contributions sum {sum}, score {score}: {h}"
                );
                assert!(h["rest"].as_f64().unwrap().abs() < 1e-6, "{h}");
                let mut named: Vec<String> = c
                    .iter()
                    .map(|x| x[0].as_str().unwrap().to_string())
                    .collect();
                named.sort();
                let mut want = used.clone();
                want.sort();
                want.dedup();
                assert_eq!(named, want, "{session} {query}: {h}");
            }
        }
    }
}
