//! Corpus tests: workspaces, parallel text, collections, dictionaries, the
//! prepared cache and `rosetta data inspect`, with every kind of bad input.

use std::path::{Path, PathBuf};
use std::process::Command;

use rosetta::corpus::{Collection, Dictionary, ParallelText, Prepared, Workspace};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus/tiny")
}

/// A private copy of the tiny fixture (so caches and edits stay in a temp dir).
fn tiny_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == ".rosetta-cache" {
            continue;
        }
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}

/// Runs the binary; returns (exit ok, stdout, stderr).
fn rosetta(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `data inspect` must fail cleanly (non-zero, no panic) with all of `want` in the message.
fn inspect_fails(ws: &Path, want: &[&str]) -> String {
    let (ok, out, err) = rosetta(&["data", "inspect", "--workspace", ws.to_str().unwrap()]);
    assert!(!ok, "expected failure, got: {out}");
    assert!(!err.contains("panicked"), "panic: {err}");
    for w in want {
        assert!(err.contains(w), "message lacks {w:?}: {err}");
    }
    err
}

#[test]
fn tiny_workspace_prepares() {
    let dir = tiny_copy();
    let ws = Workspace::load(&dir.path().join("workspace.toml")).unwrap();
    assert_eq!(
        (ws.source_lang.as_str(), ws.target_lang.as_str()),
        ("en", "es")
    );
    let p = Prepared::load_or_build(&ws).unwrap();
    assert_eq!(
        (p.train.pairs(), p.valid.pairs(), p.test.pairs()),
        (29, 6, 6)
    );
    assert_eq!(
        p.train.empty,
        vec![27],
        "the whitespace-only English line 28"
    );
    assert!(p.vocabs.source.id("dog").is_some() && p.vocabs.target.id("perr").is_some());
    // alignment kept: pair 28 (after the empty one) is still "children eat bread"
    assert_eq!(p.train.src_tokens[28], vec!["children", "eat", "bread"]);
    assert_eq!(p.train.tgt_tokens[28], vec!["niñ", "com", "pan"]);
    let td = rosetta::models::TrainData::from_prepared(&p, Vec::new());
    assert_eq!(td.train_src.n_rows(), 28);
    assert_eq!(td.train_tgt.n_rows(), 28);
    assert_eq!(td.valid_src.n_rows(), 6);
    assert_eq!(td.mono.n_rows(), 28);
    assert_eq!(td.mono_positive, vec![None; 28]);
    // the declared task
    let a = &p.adhoc;
    assert!(!a.derived);
    assert_eq!(a.doc_ids.len(), 8);
    assert_eq!(a.query_ids, vec!["q1", "q2", "q3", "q4", "q5"]);
    assert_eq!(a.target_queries.as_ref().unwrap().n_rows(), 5);
    assert_eq!(a.qrels.judgements["q2"]["d05"], 0);
    // new text counted like the workspace's own
    let m = p
        .count_texts(
            rosetta::text::Side::Target,
            &["El perro bebe agua.".to_string()],
        )
        .unwrap();
    assert_eq!(m, p.train.tgt.select_rows(&[0]));
    // the cache reads back identically
    let q = Prepared::load(p.cache_dir.as_ref().unwrap()).unwrap();
    assert_eq!(q.train.src, p.train.src);
    assert_eq!(q.train.tgt_tokens, p.train.tgt_tokens);
    assert_eq!(q.adhoc.docs, p.adhoc.docs);
    assert_eq!(q.vocabs.target.terms, p.vocabs.target.terms);
}

#[test]
fn derived_task_and_fraction_split() {
    let dir = tiny_copy();
    let ws = Workspace::load(&dir.path().join("split.toml")).unwrap();
    let splits = rosetta::corpus::Splits::read(&ws).unwrap();
    assert_eq!(
        (splits.train.len(), splits.valid.len(), splits.test.len()),
        (29, 6, 6)
    );
    let task = ws.adhoc().unwrap();
    assert!(task.derived);
    assert_eq!(
        task.docs.len(),
        40,
        "41 pairs less the one with an empty side"
    );
    assert_eq!(task.queries.len(), 6);
    for (i, q) in task.queries.ids.iter().enumerate() {
        assert!(q.starts_with("test:"));
        assert_eq!(task.qrels.judgements[q].keys().collect::<Vec<_>>(), vec![q]);
        // the relevant document is the aligned translation
        let d = task.docs.ids.iter().position(|d| d == q).unwrap();
        let k: usize = q[5..].parse().unwrap();
        assert_eq!(task.docs.texts[d], splits.test.target[k]);
        assert_eq!(task.queries.texts[i], splits.test.source[k]);
    }
    let p = Prepared::load_or_build(&ws).unwrap();
    assert_eq!(p.adhoc.docs.n_rows(), 40);
    assert_eq!(p.mono.n_rows(), 4, "mono.es has 4 non-blank lines");
}

#[test]
fn concurrent_preparation_never_corrupts_the_cache() {
    let dir = tiny_copy();
    let ws = Workspace::load(&dir.path().join("workspace.toml")).unwrap();
    let results: Vec<Prepared> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| s.spawn(|| Prepared::load_or_build(&ws).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results[0].train.src, results[1].train.src);
    let entries: Vec<String> = std::fs::read_dir(ws.cache_root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        entries,
        vec![results[0].hash.clone()],
        "no temp folders left"
    );
    let again = Prepared::load_or_build(&ws).unwrap();
    assert_eq!(again.adhoc.queries, results[0].adhoc.queries);
    // changed data → a new hash and a new cache entry
    let f = dir.path().join("docs.es.tsv");
    let mut docs = std::fs::read_to_string(&f).unwrap();
    docs.push_str("d09\tEl gato duerme.\n");
    std::fs::write(&f, docs).unwrap();
    let changed = Prepared::load_or_build(&ws).unwrap();
    assert_ne!(changed.hash, results[0].hash);
    assert_eq!(changed.adhoc.doc_ids.len(), 9);
}

#[test]
fn inspect_json_is_one_object() {
    let dir = tiny_copy();
    let ws = dir.path().join("workspace.toml");
    let (ok, out, err) = rosetta(&[
        "data",
        "inspect",
        "--workspace",
        ws.to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["splits"][0]["pairs"], 29);
    assert_eq!(v["splits"][0]["empty_pairs"], 1);
    assert_eq!(v["adhoc"]["docs"]["texts"], 8);
    assert_eq!(v["adhoc"]["qrels_relevant"], 5);
    assert!(v["dictionary"]["source_vocab_coverage"].as_f64().unwrap() > 0.5);
    let (ok, out, _) = rosetta(&["data", "inspect", "--workspace", ws.to_str().unwrap()]);
    assert!(
        ok && out.contains("trainable") && out.contains("OOV rate"),
        "{out}"
    );
}

#[test]
fn dictionaries_tsv_and_dictd() {
    let d = Dictionary::read(&fixture().join("eng-spa.tsv")).unwrap();
    assert_eq!(d.get("fish").unwrap(), ["pescado", "pez"]);
    let dd = Dictionary::read(&fixture().join("dictd/tiny-eng-spa.index")).unwrap();
    assert_eq!(dd.get("drink").unwrap(), ["beber", "tomar", "bebida"]);
    assert_eq!(
        dd.get("good").unwrap(),
        ["bueno"],
        "mangled 'good morning' dropped"
    );
    assert_eq!(dd.dropped, 1);
    let cfg = rosetta::text::TextConfig::default();
    let en = rosetta::text::Analyzer::new("en", &cfg).unwrap();
    let es = rosetta::text::Analyzer::new("es", &cfg).unwrap();
    let a = d.analysed(&en, &es);
    assert_eq!(a["fish"], vec!["pesc", "pez"]);
    assert!(!a.contains_key("good morn"), "multi-word entries drop out");
    // a dictd index without its data file
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("x.index");
    std::fs::copy(fixture().join("dictd/tiny-eng-spa.index"), &idx).unwrap();
    let e = Dictionary::read(&idx).unwrap_err().to_string();
    assert!(e.contains("x.index") && e.contains("data file"), "{e}");
}

#[test]
fn several_corpora_per_split_concatenate_in_order() {
    let dir = tiny_copy();
    let ws = Workspace::load(&dir.path().join("parts.toml")).unwrap();
    let splits = rosetta::corpus::Splits::read(&ws).unwrap();
    let (train, valid) = (&splits.train, &splits.valid);
    assert_eq!(
        (train.len(), valid.len(), splits.test.len()),
        (29 + 6, 41, 6)
    );
    // train.en/.es first, then valid.en/.es, each line still aligned
    assert_eq!(train.source[0], "The dog drinks water.");
    assert_eq!(train.source[29], "The dog plays with the children.");
    assert_eq!(train.target[29], "El perro juega con los niños.");
    assert_eq!(
        train.origin[28..31],
        [28, 0, 1],
        "line index within its own file"
    );
    assert_eq!(train.empty_pairs(), vec![27]);
    // every listed file is part of the content hash
    let files = ws.data_files();
    assert!(
        files.iter().any(|f| f.ends_with("valid.es"))
            && files.iter().any(|f| f.ends_with("pairs.tsv"))
    );
    let (ok, out, err) = rosetta(&[
        "data",
        "inspect",
        "--workspace",
        dir.path().join("parts.toml").to_str().unwrap(),
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["splits"][0]["pairs"], 35);
    assert_eq!(v["splits"][0]["empty_pairs"], 1);
    assert_eq!(v["splits"][1]["pairs"], 41);
    assert!(v["dictionary"]["source_vocab_coverage"].as_f64().unwrap() > 0.5);
    // a part of different lengths names its files; a bad list names file, line and key
    let ws_path = dir.path().join("parts.toml");
    let orig = std::fs::read_to_string(&ws_path).unwrap();
    std::fs::write(
        &ws_path,
        orig.replace(
            "[\"valid.en\", \"valid.es\"]",
            "[\"valid.en\", \"train.es\"]",
        ),
    )
    .unwrap();
    inspect_fails(&ws_path, &["valid.en", "6 lines", "train.es", "29 lines"]);
    std::fs::write(
        &ws_path,
        orig.replace("[\"valid.en\", \"valid.es\"]", "\"valid.tsv\""),
    )
    .unwrap();
    inspect_fails(&ws_path, &["parts.toml:13:", "parallel.train", "mixing"]);
    std::fs::write(
        &ws_path,
        orig.replace(
            "[[\"pairs.tsv\"]]",
            "[[\"pairs.tsv\"], [\"a\", \"b\", \"c\"]]",
        ),
    )
    .unwrap();
    inspect_fails(
        &ws_path,
        &["parts.toml:14:", "parallel.valid", "corpus 2", "3 files"],
    );
    std::fs::write(&ws_path, orig.replace("[[\"pairs.tsv\"]]", "[]")).unwrap();
    inspect_fails(
        &ws_path,
        &["parts.toml:14:", "parallel.valid", "invalid length 0"],
    );
}

#[test]
fn gzipped_dictionary_reads_as_the_plain_one() {
    let plain = Dictionary::read(&fixture().join("eng-spa.tsv")).unwrap();
    let gz = Dictionary::read(&fixture().join("eng-spa.tsv.gz")).unwrap();
    assert!(!plain.entries.is_empty());
    assert_eq!(gz, plain);
    // a bad line inside the gzip names the file and the line
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.tsv.gz");
    let mut w = flate2::write::GzEncoder::new(
        std::fs::File::create(&p).unwrap(),
        flate2::Compression::default(),
    );
    w.write_all("dog\tperro\ncat\n".as_bytes()).unwrap();
    w.finish().unwrap();
    let e = Dictionary::read(&p).unwrap_err().to_string();
    assert!(e.contains("bad.tsv.gz:2:"), "{e}");
    // damaged gzip data: the file named, no panic
    let raw = std::fs::read(fixture().join("eng-spa.tsv.gz")).unwrap();
    std::fs::write(&p, &raw[..raw.len() / 2]).unwrap();
    let e = Dictionary::read(&p).unwrap_err().to_string();
    assert!(e.contains("bad.tsv.gz") && e.contains("gzip"), "{e}");
}

/// `[dictionary] reverse = true` reads a target → source file swapped: an
/// es → en workspace over the eng-spa fixture looks Spanish words up, in
/// inspect, BM25 dictionary translation and the content hash.
#[test]
fn reversed_dictionary_reads_target_to_source() {
    let dir = tiny_copy();
    let toml = |reverse: &str| {
        format!(
            "name = \"tiny-es-en\"\nsource.lang = \"es\"\ntarget.lang = \"en\"\n\
             [parallel]\ntrain = [\"train.es\", \"train.en\"]\nvalid = [\"valid.es\", \"valid.en\"]\n\
             test = [\"test.es\", \"test.en\"]\n[dictionary]\npath = \"eng-spa.tsv\"\n{reverse}\
             [text]\nmin_df = 1\n"
        )
    };
    let write = |name: &str, reverse: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, toml(reverse)).unwrap();
        p
    };
    let rev = write("rev.toml", "reverse = true\n");
    let fwd = write("fwd.toml", "reverse = false\n");
    let plain = write("plain.toml", "");

    let w = Workspace::load(&rev).unwrap();
    assert!(w.dictionary_reverse);
    let d = w.read_dictionary().unwrap().unwrap();
    assert_eq!(d.get("pez").unwrap(), ["fish"]);
    assert_eq!(d.get("buenos días").unwrap(), ["good morning"]);
    assert!(d.get("fish").is_none());
    let f = Workspace::load(&fwd).unwrap();
    assert_eq!(
        f.read_dictionary().unwrap().unwrap().get("fish").unwrap(),
        ["pescado", "pez"]
    );
    // the key changes the hash only when set: `reverse = false` is the old file
    let hash = |p: &Path| Workspace::load(p).unwrap().content_hash().unwrap();
    assert_eq!(hash(&fwd), hash(&plain));
    assert_ne!(hash(&rev), hash(&fwd));

    let inspect = |p: &Path| {
        let (ok, out, err) = rosetta(&[
            "data",
            "inspect",
            "--workspace",
            p.to_str().unwrap(),
            "--json",
        ]);
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let (vr, vf) = (inspect(&rev), inspect(&fwd));
    assert_eq!(vr["dictionary"]["reversed"], true);
    assert_eq!(vf["dictionary"]["reversed"], false);
    let cov = |v: &serde_json::Value| v["dictionary"]["source_vocab_coverage"].as_f64().unwrap();
    assert!(
        cov(&vr) > 0.3 && cov(&vf) < 0.1,
        "{} {}",
        cov(&vr),
        cov(&vf)
    );

    // BM25 over dictionary-translated Spanish queries (the derived task)
    let translated = |p: &Path| {
        let run = dir.path().join("r.run");
        let (ok, out, err) = rosetta(&[
            "bm25",
            "--workspace",
            p.to_str().unwrap(),
            "--translate",
            "dict",
            "--run",
            run.to_str().unwrap(),
            "--json",
        ]);
        assert!(ok, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["query_stats"]["translated_tokens"].as_u64().unwrap()
    };
    let (tr, tf) = (translated(&rev), translated(&fwd));
    assert!(tr >= 5 && tr > 3 * tf, "reversed {tr}, as written {tf}");

    // without --run: the same figures, and no file anywhere
    let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    let (ok, out, err) = rosetta(&[
        "bm25",
        "--workspace",
        rev.to_str().unwrap(),
        "--translate",
        "dict",
        "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["run"], serde_json::Value::Null);
    assert_eq!(v["query_stats"]["translated_tokens"].as_u64().unwrap(), tr);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before.len());
}

#[test]
fn trec_topics_as_queries() {
    let q = Collection::read_queries(&fixture().join("topics.en.txt")).unwrap();
    assert_eq!(q.ids, vec!["q1", "q2"]);
    assert_eq!(
        q.texts[0],
        "dog drinks water Where does the dog drink water?"
    );
}

// ---- bad input: every case a clear message and a non-zero exit ----

#[test]
fn parallel_files_of_different_lengths() {
    let dir = tiny_copy();
    let f = dir.path().join("valid.es");
    let mut t = std::fs::read_to_string(&f).unwrap();
    t.push_str("Una línea de más.\n");
    std::fs::write(&f, t).unwrap();
    let e = inspect_fails(
        &dir.path().join("workspace.toml"),
        &["valid.en", "6 lines", "valid.es", "7 lines"],
    );
    assert!(e.contains("differ in length"), "{e}");
}

#[test]
fn empty_and_whitespace_lines_keep_alignment() {
    let dir = tempfile::tempdir().unwrap();
    let (s, t) = (dir.path().join("a.en"), dir.path().join("a.es"));
    std::fs::write(&s, "one\n\nthree\n \t \nfive\n").unwrap();
    std::fs::write(&t, "uno\ndos\ntres\ncuatro\n\n").unwrap();
    let p = ParallelText::read_files(&s, &t).unwrap();
    assert_eq!(p.len(), 5);
    assert_eq!(p.empty_pairs(), vec![1, 3, 4]);
    assert_eq!(p.usable(), vec![0, 2]);
    assert_eq!(p.target[2], "tres");
}

#[test]
fn invalid_utf8_names_file_line_and_byte() {
    let dir = tiny_copy();
    let f = dir.path().join("train.es");
    let mut b = std::fs::read(&f).unwrap();
    let line2 = b.iter().position(|c| *c == b'\n').unwrap() + 1;
    b.insert(line2 + 3, 0xFF);
    std::fs::write(&f, b).unwrap();
    inspect_fails(
        &dir.path().join("workspace.toml"),
        &[
            "train.es:2:",
            "invalid UTF-8",
            &format!("byte offset {}", line2 + 3),
        ],
    );
}

#[test]
fn tsv_line_without_tab() {
    let dir = tiny_copy();
    let f = dir.path().join("pairs.tsv");
    let t = std::fs::read_to_string(&f).unwrap().replacen(
        "The cat sleeps in the house.\t",
        "The cat sleeps in the house. ",
        1,
    );
    std::fs::write(&f, t).unwrap();
    inspect_fails(&dir.path().join("split.toml"), &["pairs.tsv:2:", "no tab"]);
    // the same in a docs file
    let dir = tiny_copy();
    std::fs::write(dir.path().join("docs.es.tsv"), "d01\tuno\nd02 dos\n").unwrap();
    inspect_fails(
        &dir.path().join("workspace.toml"),
        &["docs.es.tsv:2:", "no tab"],
    );
}

#[test]
fn duplicate_ids_in_docs_or_queries() {
    let dir = tiny_copy();
    let f = dir.path().join("docs.es.tsv");
    let mut t = std::fs::read_to_string(&f).unwrap();
    t.push_str("d03\tOtra vez.\n");
    std::fs::write(&f, t).unwrap();
    inspect_fails(
        &dir.path().join("workspace.toml"),
        &["docs.es.tsv:9:", "duplicate id \"d03\"", "line 3"],
    );
    let dir = tiny_copy();
    let f = dir.path().join("queries.en.tsv");
    let mut t = std::fs::read_to_string(&f).unwrap();
    t.push_str("q1\tdog again\n");
    std::fs::write(&f, t).unwrap();
    inspect_fails(
        &dir.path().join("workspace.toml"),
        &["queries.en.tsv:6:", "duplicate id \"q1\"", "line 1"],
    );
}

#[test]
fn qrels_naming_unknown_queries() {
    let dir = tiny_copy();
    let f = dir.path().join("qrels.tsv");
    let mut t = std::fs::read_to_string(&f).unwrap();
    t.push_str("q99 0 d01 1\nq1 0 d77 1\n");
    std::fs::write(&f, t).unwrap();
    inspect_fails(
        &dir.path().join("workspace.toml"),
        &["qrels.tsv", "\"q99\"", "not among the queries"],
    );
    // unknown documents are only counted
    let dir = tiny_copy();
    let f = dir.path().join("qrels.tsv");
    let mut t = std::fs::read_to_string(&f).unwrap();
    t.push_str("q1 0 d77 1\n");
    std::fs::write(&f, t).unwrap();
    let ws = Workspace::load(&dir.path().join("workspace.toml")).unwrap();
    assert_eq!(ws.adhoc().unwrap().unknown_doc_judgements, 1);
}

#[test]
fn missing_file() {
    let dir = tiny_copy();
    std::fs::remove_file(dir.path().join("test.es")).unwrap();
    inspect_fails(
        &dir.path().join("workspace.toml"),
        &[
            "workspace.toml:",
            "test.es does not exist",
            "correct the path",
        ],
    );
    inspect_fails(
        &dir.path().join("nope.toml"),
        &["nope.toml", "No such file"],
    );
}

#[test]
fn workspace_toml_unknown_key_or_wrong_type() {
    let dir = tiny_copy();
    let ws = dir.path().join("workspace.toml");
    let orig = std::fs::read_to_string(&ws).unwrap();
    std::fs::write(
        &ws,
        orig.replace("[adhoc]\n", "[adhoc]\nqueries_hi = \"x\"\n"),
    )
    .unwrap();
    inspect_fails(&ws, &["workspace.toml:", "queries_hi"]);
    std::fs::write(&ws, orig.replace("min_df = 1", "min_df = \"one\"")).unwrap();
    inspect_fails(&ws, &["workspace.toml:", "min_df", "invalid type"]);
    std::fs::write(&ws, orig.replace("stem = true", "stem = 3")).unwrap();
    inspect_fails(&ws, &["workspace.toml:", "text.stem", "expected a boolean"]);
    std::fs::write(&ws, orig.replace("lang = \"es\"", "lang = 7")).unwrap();
    inspect_fails(&ws, &["workspace.toml:", "lang"]);
}

#[test]
fn damaged_cache_is_rebuilt() {
    let dir = tiny_copy();
    let ws = Workspace::load(&dir.path().join("workspace.toml")).unwrap();
    let p = Prepared::load_or_build(&ws).unwrap();
    let cache = p.cache_dir.clone().unwrap();
    std::fs::write(cache.join("train.src.csr"), b"garbage").unwrap();
    assert!(Prepared::load(&cache).is_err());
    let q = Prepared::load_or_build(&ws).unwrap();
    assert_eq!(q.train.src, p.train.src);
    assert!(Prepared::load(&cache).is_ok(), "the cache was rewritten");
}

#[test]
fn setup_without_tools_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let empty_path = dir.path().join("bin");
    std::fs::create_dir(&empty_path).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(["setup", "--dir", dir.path().join("ws").to_str().unwrap()])
        .env("PATH", &empty_path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("sword-text-kjv") && err.contains("diatheke"),
        "{err}"
    );
    assert!(!dir.path().join("ws/workspace.toml").exists());
}

#[test]
fn content_hash_ignores_the_working_folder_but_not_the_data() {
    let dir = tiny_copy();
    let a = Workspace::load(&dir.path().join("workspace.toml")).unwrap();
    let b = Workspace::load(&dir.path().join("./workspace.toml")).unwrap();
    assert_eq!(a.content_hash().unwrap(), b.content_hash().unwrap());
    let other = tiny_copy();
    let c = Workspace::load(&other.path().join("workspace.toml")).unwrap();
    assert_eq!(a.content_hash().unwrap(), c.content_hash().unwrap());
    let f = other.path().join("qrels.tsv");
    let t = std::fs::read_to_string(&f)
        .unwrap()
        .replace("q5 0 d06 0", "q5 0 d06 1");
    std::fs::write(&f, t).unwrap();
    assert_ne!(a.content_hash().unwrap(), c.content_hash().unwrap());
    let toml = std::fs::read_to_string(other.path().join("workspace.toml")).unwrap();
    std::fs::write(
        other.path().join("workspace.toml"),
        toml.replace("min_df = 1", "min_df = 2"),
    )
    .unwrap();
    let d = Workspace::load(&other.path().join("workspace.toml")).unwrap();
    assert_ne!(c.content_hash().unwrap(), d.content_hash().unwrap());
}

#[test]
fn no_usable_training_pairs() {
    let dir = tiny_copy();
    std::fs::write(dir.path().join("train.en"), "\n \n").unwrap();
    std::fs::write(dir.path().join("train.es"), "uno\ndos\n").unwrap();
    inspect_fails(
        &dir.path().join("workspace.toml"),
        &["workspace.toml", "no usable pairs"],
    );
}
