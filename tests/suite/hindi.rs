//! Issue 55 item 2: Hindi text whose vowel signs, anusvara or visarga stand
//! after a space (as enhi-nmt-sample-18k has them: `... गया ः`) trains and
//! exports; such a sign is no word of the vocabulary and no surface word
//! holds white space.

use std::path::Path;

use crate::common::{ok, rosetta_in as rosetta, train};

/// English and Hindi sentence pairs; several Hindi lines carry a lone sign
/// after a space (U+0903 visarga, U+0902 anusvara, U+093E and U+0940 vowel
/// signs), twice each so that `min_df` would keep them as terms.
const PAIRS: &[(&str, &str)] = &[
    ("the boy drinks water", "लड़का पानी पीता है ः"),
    ("the girl reads a book", "लड़की किताब पढ़ती है ं"),
    ("the teacher goes to school", "शिक्षक स्कूल जाता है ा"),
    ("the water is cold", "पानी ठंडा है ः"),
    ("the book is new", "किताब नई है ं"),
    ("the school is big", "स्कूल बड़ा है ा"),
    ("the boy reads a new book", "लड़का नई किताब पढ़ता है ी"),
    ("the girl drinks cold water", "लड़की ठंडा पानी पीती है ी"),
    ("the teacher reads", "शिक्षक पढ़ता है"),
    ("the boy goes to school", "लड़का स्कूल जाता है"),
    ("the girl goes to the big school", "लड़की बड़े स्कूल जाती है"),
    ("the teacher drinks water", "शिक्षक पानी पीता है"),
];

/// A Hindi workspace of [`PAIRS`] (all three splits) in `dir`.
fn hindi_workspace(dir: &Path) -> std::path::PathBuf {
    for (split, lang, side) in [("train", "en", 0), ("train", "hi", 1)].into_iter().chain([
        ("valid", "en", 0),
        ("valid", "hi", 1),
        ("test", "en", 0),
        ("test", "hi", 1),
    ]) {
        let text: String = PAIRS
            .iter()
            .map(|p| format!("{}\n", if side == 0 { p.0 } else { p.1 }))
            .collect();
        std::fs::write(dir.join(format!("{split}.{lang}")), text).unwrap();
    }
    let ws = dir.join("workspace.toml");
    std::fs::write(
        &ws,
        "name = \"tiny-en-hi\"\n[source]\nlang = \"en\"\n[target]\nlang = \"hi\"\n\
         [parallel]\ntrain = [\"train.en\", \"train.hi\"]\nvalid = [\"valid.en\", \"valid.hi\"]\n\
         test = [\"test.en\", \"test.hi\"]\n[text]\nmin_df = 1\n",
    )
    .unwrap();
    ws
}

/// A Devanagari sign that combines with the letter before it (candrabindu,
/// anusvara, visarga, nukta, vowel signs, virama, ...).
fn is_mark(c: char) -> bool {
    matches!(c, '\u{0900}'..='\u{0903}' | '\u{093A}'..='\u{094F}' | '\u{0951}'..='\u{0957}' | '\u{0962}' | '\u{0963}')
}

#[test]
fn lone_signs_after_a_space_are_no_words_and_the_export_writes() {
    let dir = tempfile::tempdir().unwrap();
    let ws = hindi_workspace(dir.path());
    let session = dir.path().join("cca");
    train(dir.path(), &ws, "cca", &session, &["--dim", "2"]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(session.join("vocab.target.json")).unwrap())
            .unwrap();
    for field in ["terms", "surface"] {
        let words: Vec<String> = serde_json::from_value(v[field].clone()).unwrap();
        assert!(words.iter().any(|w| w == "किताब"), "{field}: {words:?}");
        for w in &words {
            assert!(
                !w.is_empty() && !w.contains(char::is_whitespace) && !w.starts_with(is_mark),
                "{field}: {w:?} in {words:?}"
            );
        }
    }
    let out = dir.path().join("export");
    let o = crate::common::export(dir.path(), &session, &out, "vectors");
    ok(&o);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("left out:"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(out.join("terms.hi.vec")).unwrap();
    let words: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert!(words.contains(&"किताब"), "{words:?}");
    assert!(!words.iter().any(|w| w.starts_with(is_mark)), "{words:?}");
}

/// A session whose saved vocabulary is not the workspace's as this Rosetta
/// analyses it (made by a Rosetta that analysed Hindi differently) is
/// refused by `eval` and `export`, naming the vocabulary file and the first
/// term that differs, never scored with shifted term ids.
#[test]
fn a_session_of_another_analysis_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ws = hindi_workspace(dir.path());
    let session = dir.path().join("cca");
    train(dir.path(), &ws, "cca", &session, &["--dim", "2"]);
    let vocab = session.join("vocab.target.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&vocab).unwrap()).unwrap();
    // as the analysis before issue 55 made it: the lone visarga a term
    v["terms"][1] = serde_json::Value::String("\u{903}".into());
    std::fs::write(&vocab, serde_json::to_string(&v).unwrap()).unwrap();
    let s = session.to_str().unwrap();
    let out = dir.path().join("export");
    for args in [
        vec!["eval", "--session", s, "--task", "sentence"],
        vec![
            "export",
            "--session",
            s,
            "--out",
            out.to_str().unwrap(),
            "--write",
            "embeddings",
        ],
    ] {
        let o = rosetta(dir.path(), &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}: {err}");
        assert!(
            err.contains("vocab.target.json")
                && err.contains("first at term 1")
                && err.contains("train a new session"),
            "{args:?}: {err}"
        );
    }
}
