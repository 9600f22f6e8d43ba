//! Honest queries: `rosetta search` and `rosetta neighbours` account for
//! every query word (used, or dropped and why), refuse a query with no
//! usable word with a non-zero exit and the reason (in the JSON too), fold
//! typographic apostrophes, and back off to character n-grams for a text of
//! unknown words.

use crate::common;

use std::path::Path;
use std::process::Output;

use serde_json::Value;

use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn search(cwd: &Path, session: &str, query: &str, json: bool) -> Output {
    let mut args = vec!["search", "--session", session, "--query", query];
    if json {
        args.push("--json");
    }
    rosetta(cwd, &args)
}

/// `(word, reason code or "")` of a search or neighbours answer's words.
fn account(v: &Value) -> Vec<(String, String)> {
    v["query"]["words"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|w| {
            (
                w["word"].as_str().unwrap().to_string(),
                w["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Sets the workspace's `[text]` to `text` and trains CL-LSI (k = 4) on it
/// into session folder `session`.
fn lsi_with_text(ws: &Path, text: &str, session: &str) {
    let p = ws.join("workspace.toml");
    let orig = std::fs::read_to_string(&p).unwrap();
    let head = orig.split("[text]").next().unwrap().to_string();
    std::fs::write(&p, format!("{head}[text]\n{text}\n")).unwrap();
    train(ws, &p, "cl-lsi", session, &["--dim", "4"]);
}

#[test]
fn search_and_neighbours_say_what_they_dropped() {
    let ws = tiny_workspace();
    let root = ws.path();
    // stop words removed, min_df 2: every reason can be met
    lsi_with_text(
        root,
        "vocab_per_language = 1000\nmin_df = 2\nstopwords = true\nstem = true\noov_ngrams = 0",
        "s",
    );

    // a usable query: each word accounted for, in order
    let v = json_of(&search(root, "s", "The dog’s meat zzyzx", true));
    assert_eq!(
        account(&v),
        vec![
            ("the".into(), "stop_word".into()),
            ("dog's".into(), String::new()),
            ("meat".into(), "below_min_df".into()),
            ("zzyzx".into(), "out_of_vocabulary".into()),
        ],
        "{v}"
    );
    assert!(!v["hits"].as_array().unwrap().is_empty());
    assert!(v.get("unanswerable").is_none(), "{v}");
    let text = ok(&search(root, "s", "The dog’s meat zzyzx", false));
    assert!(
        text.contains("searched with: dog's")
            && text.contains("dropped: the (stop word), meat (in 1 training text(s), below min_df 2), zzyzx (out of vocabulary)"),
        "{text}"
    );

    // nothing usable: no ranking, exit 1, the reason on stderr and in the JSON
    let out = search(root, "s", "the of zzyzx", true);
    assert!(!out.status.success());
    let v = json_of(&out);
    assert!(v["hits"].as_array().unwrap().is_empty(), "{v}");
    let why = v["unanswerable"].as_str().unwrap();
    assert!(
        why.contains("the (stop word)") && why.contains("zzyzx (out of vocabulary)"),
        "{why}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no ranking") && err.contains("zzyzx (out of vocabulary)"),
        "{err}"
    );

    // neighbours give the same reasons, in both forms
    for (word, code) in [
        ("the", "stop_word"),
        ("zzyzx", "out_of_vocabulary"),
        ("meat", "below_min_df"),
    ] {
        let out = rosetta(
            root,
            &["neighbours", "--session", "s", "--term", word, "--json"],
        );
        assert!(!out.status.success(), "{word}");
        let v = json_of(&out);
        assert_eq!(v["known"], false, "{v}");
        assert_eq!(v["reason"], code, "{v}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("`{word}` has no neighbours")),
            "{err}"
        );
    }
    // a known word: its neighbours shown as training words, stems in the JSON
    let v = json_of(&rosetta(
        root,
        &["neighbours", "--session", "s", "--term", "dogs", "--json"],
    ));
    assert_eq!(v["known"], true, "{v}");
    assert_eq!(v["term"], "dog");
    assert_eq!(v["surface"], "dog");
    for n in v["cross"].as_array().unwrap() {
        let s = n["surface"].as_str().unwrap();
        assert!(!s.is_empty() && !s.contains(char::is_whitespace), "{n}");
    }
    // following a neighbour by its surface form finds its term again
    let first = &v["cross"][0];
    let back = json_of(&rosetta(
        root,
        &[
            "neighbours",
            "--session",
            "s",
            "--lang",
            "target",
            "--term",
            first["surface"].as_str().unwrap(),
            "--json",
        ],
    ));
    assert_eq!(back["term"], first["term"], "{back}");
}

#[test]
fn texts_of_unknown_words_back_off_to_ngrams() {
    let ws = tiny_workspace();
    let root = ws.path();
    // a vocabulary of 5 words leaves most words out: their n-grams stand in
    lsi_with_text(
        root,
        "vocab_per_language = 5\nmin_df = 1\nstopwords = true\nstem = false\noov_ngrams = 300",
        "s",
    );
    let v = json_of(&search(root, "s", "gardens", true));
    let w = &v["query"]["words"][0];
    assert!(w.get("reason").is_none(), "{v}");
    let grams: Vec<&str> = w["ngrams"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    assert!(grams.contains(&"gard…"), "{grams:?}");
    assert!(!v["hits"].as_array().unwrap().is_empty());
    // a term lookup does not back off: an unknown word has no neighbours, and says why
    let out = rosetta(
        root,
        &[
            "neighbours",
            "--session",
            "s",
            "--term",
            "gardens",
            "--json",
        ],
    );
    assert!(!out.status.success());
    let n = json_of(&out);
    assert_eq!(n["known"], false, "{n}");
    assert!(n["reason"].is_string(), "{n}");
    // the n-gram units are no neighbours: only words are listed
    let vocab: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("s/vocab.source.json")).unwrap())
            .unwrap();
    assert!(
        vocab["terms"].as_array().unwrap().len() > 100,
        "n-gram units added"
    );
    let word = vocab["terms"][0].as_str().unwrap();
    let n = json_of(&rosetta(
        root,
        &[
            "neighbours",
            "--session",
            "s",
            "--term",
            word,
            "--k",
            "1000",
            "--json",
        ],
    ));
    for list in ["cross", "own"] {
        let terms = n[list].as_array().unwrap();
        assert!(!terms.is_empty() && terms.len() <= 5, "{n}");
        assert!(
            terms
                .iter()
                .all(|t| !t["term"].as_str().unwrap().starts_with('#')),
            "{n}"
        );
    }
    // the same workspace without the fallback has nothing to search with
    lsi_with_text(
        root,
        "vocab_per_language = 5\nmin_df = 1\nstopwords = true\nstem = false\noov_ngrams = 0",
        "t",
    );
    assert!(!search(root, "t", "gardens", true).status.success());
}
