//! Term associations (`rosetta::session::associations`): new and missed
//! pairs on a hand-made term space whose answers are known, agreement with
//! brute force and with lexicon induction's P@k on a random space, CSLS
//! scores, the error for a lexical baseline, and `rosetta associations`
//! end to end (TSV, JSON, filter, errors).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use ndarray::{array, Array2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use rosetta::models::Model;
use rosetta::session::associations::{
    session_associations, AssocDictionary, AssocKind, AssocOptions, AssocSort,
};
use rosetta::session::retrieval::bli;
use rosetta::session::{associations, Loaded, Session, SessionConfig};
use rosetta::text::{CsrMatrix, Side, Vocabs, Vocabulary};

use crate::common;
use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

/// A model that is nothing but fixed term vectors.
struct Fixed {
    src: Array2<f32>,
    tgt: Array2<f32>,
}

impl Model for Fixed {
    fn kind(&self) -> &'static str {
        "test-fixed"
    }
    fn dim(&self) -> usize {
        self.src.ncols()
    }
    fn encode(&self, side: Side, counts: &CsrMatrix) -> rosetta::Result<Array2<f32>> {
        Ok(counts.to_dense().dot(match side {
            Side::Source => &self.src,
            Side::Target => &self.tgt,
        }))
    }
    fn term_vectors(&self, side: Side) -> rosetta::Result<Array2<f32>> {
        Ok(match side {
            Side::Source => self.src.clone(),
            Side::Target => self.tgt.clone(),
        })
    }
    fn tensors(&self) -> rosetta::Result<Vec<(String, candle_core::Tensor)>> {
        Ok(Vec::new())
    }
}

fn unit_rows(mut m: Array2<f32>) -> Array2<f32> {
    for mut r in m.axis_iter_mut(Axis(0)) {
        let n = r.dot(&r).sqrt();
        if n > 0.0 {
            r /= n;
        }
    }
    m
}

fn config(model: &str) -> SessionConfig {
    SessionConfig {
        rosetta_version: env!("CARGO_PKG_VERSION").into(),
        model: model.into(),
        workspace: PathBuf::from("tests/fixtures/corpus/tiny/workspace.toml"),
        workspace_hash: "test".into(),
        seed: 1,
        device_request: rosetta::models::DeviceSpec::Cpu,
        device: String::new(),
        given: BTreeMap::new(),
        params: BTreeMap::new(),
        created: "2026-01-01T00:00:00Z".into(),
        text: None,
    }
}

/// A loaded session over the given words (with their document frequencies
/// and surface forms) and term vectors.
fn loaded(
    dir: &std::path::Path,
    src: (&[&str], &[u32], &[&str]),
    tgt: (&[&str], &[u32], &[&str]),
    vs: Array2<f32>,
    vt: Array2<f32>,
) -> Loaded {
    let session = Session::create(dir, config("test-fixed")).unwrap();
    let vocab = |lang: &str, (terms, df, surface): (&[&str], &[u32], &[&str])| {
        let mut v = Vocabulary::from_parts(
            lang,
            terms.iter().map(|t| t.to_string()).collect(),
            df.to_vec(),
            1000,
        );
        v.surface = surface.iter().map(|s| s.to_string()).collect();
        v
    };
    let vocabs = Vocabs {
        source: vocab("en", src),
        target: vocab("es", tgt),
    };
    Loaded::from_parts(
        session,
        Box::new(Fixed {
            src: unit_rows(vs),
            tgt: unit_rows(vt),
        }),
        vocabs,
    )
    .unwrap()
}

fn dict(pairs: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
    pairs
        .iter()
        .map(|(s, ts)| (s.to_string(), ts.iter().map(|t| t.to_string()).collect()))
        .collect()
}

/// Source words (df 10, 8, 6, 4, 2) water, dog, house, cat, sun; target
/// words agua, perro, casa, gato. `cat` leans towards `perro` (0.8) more
/// than towards its translation `gato` (0.6); `sun` has no entry and its
/// nearest word is `gato`, whose nearest source word it is in turn.
fn hand_made(dir: &std::path::Path) -> (Loaded, AssocDictionary) {
    let l = loaded(
        dir,
        (
            &["water", "dog", "hous", "cat", "sun"],
            &[10, 8, 6, 4, 2],
            &["water", "dog", "house", "cat", "sun"],
        ),
        (
            &["agua", "perr", "casa", "gato"],
            &[9, 7, 5, 3],
            &["agua", "perro", "casa", "gato"],
        ),
        array![
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
            [0.0, 0.8, 0.0, 0.6],
            [0.0, 0.0, 0.0, 1.0],
        ],
        array![
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 0.8, 0.6],
            [0.0, 0.0, 0.0, 1.0],
        ],
    );
    let d = dict(&[
        ("water", &["agua"]),
        ("dog", &["perr"]),
        ("hous", &["casa"]),
        ("cat", &["gato"]),
        // not in the vocabularies: never a row
        ("moon", &["luna"]),
    ]);
    let mut d = AssocDictionary::from(d);
    // the dictionary as written, for display
    d.written
        .insert("cat".into(), vec!["gato".into(), "gata".into()]);
    (l, d)
}

#[test]
fn new_and_missed_pairs_on_a_hand_made_space() {
    let dir = tempfile::tempdir().unwrap();
    let (l, d) = hand_made(&dir.path().join("s"));

    let new = associations(&l, &d, &AssocOptions::default()).unwrap();
    assert_eq!((new.kind, new.looked_up), (AssocKind::New, 5));
    assert_eq!(
        (new.source_lang.as_str(), new.target_lang.as_str()),
        ("en", "es")
    );
    let pairs: Vec<(&str, &str, bool)> = new
        .rows
        .iter()
        .map(|r| (r.source.as_str(), r.target.as_str(), r.mutual))
        .collect();
    // by score: sun–gato (1.0), cat–perro (0.8); shown as surface words
    assert_eq!(pairs, [("sun", "gato", true), ("cat", "perro", false)]);
    let cat = &new.rows[1];
    assert_eq!(
        (cat.source_term.as_str(), cat.target_term.as_str()),
        ("cat", "perr")
    );
    assert!((cat.score - 0.8).abs() < 1e-6 && (cat.similarity - 0.8).abs() < 1e-6);
    assert_eq!((cat.rank, cat.source_df, cat.target_df), (1, 4, 7));
    assert_eq!(cat.dictionary, ["gato", "gata"], "as written");
    assert!(new.rows[0].dictionary.is_empty(), "sun has no entry");
    // by frequency: cat (df 4) before sun (df 2)
    let mut by_freq = new.clone();
    by_freq.sort(AssocSort::Freq);
    assert_eq!(by_freq.rows[0].source, "cat");
    // mutual pairs only
    let mutual = associations(
        &l,
        &d,
        &AssocOptions {
            mutual: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(mutual.rows.len(), 1);
    assert_eq!(mutual.rows[0].source, "sun");
    // the two most frequent source words both have their translation nearest
    let few = associations(
        &l,
        &d,
        &AssocOptions {
            terms: 2,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(few.looked_up, 2);
    assert!(few.rows.is_empty());

    // missed at k = 1: cat's translation gato is second, after perro
    let missed = |k: usize| {
        associations(
            &l,
            &d,
            &AssocOptions {
                kind: AssocKind::Missed,
                k,
                ..Default::default()
            },
        )
        .unwrap()
    };
    let m1 = missed(1);
    assert_eq!(m1.looked_up, 4, "moon is not in the vocabulary");
    assert_eq!(m1.rows.len(), 1);
    let r = &m1.rows[0];
    assert_eq!(
        (r.source.as_str(), r.target.as_str(), r.rank),
        ("cat", "gato", 2)
    );
    assert_eq!(r.nearest.as_deref(), Some("perro"));
    assert!((r.score - 0.6).abs() < 1e-6);
    // within the 2 nearest, every translation is linked
    assert!(missed(2).rows.is_empty());

    // filter and TSV: header, one line per row, surface words first
    assert_eq!(
        new.matching("GAT").len(),
        2,
        "target word or dictionary entry"
    );
    assert_eq!(new.matching("perro").len(), 1);
    let path = dir.path().join("out/new.tsv");
    assert_eq!(new.write_tsv(&path, "sun").unwrap(), 1);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "source\ttarget\tscore\tsimilarity\tmutual\tsource_df\ttarget_df\tdictionary\tsource_term\ttarget_term"
    );
    assert_eq!(
        lines[1],
        "sun\tgato\t1.000000\t1.000000\ttrue\t2\t3\t\tsun\tgato"
    );
    assert_eq!(lines.len(), 2);
    let t = m1.tsv(&m1.matching(""));
    assert!(
        t.lines()
            .nth(1)
            .unwrap()
            .starts_with("cat\tgato\t0.600000\t0.600000\t2\tperro\t4\t3\tgato, gata\tcat\tgato"),
        "{t}"
    );
}

#[test]
fn csls_scores_are_the_formula_on_the_model_penalties() {
    let dir = tempfile::tempdir().unwrap();
    let (l, d) = hand_made(&dir.path().join("s"));
    let opts = AssocOptions {
        csls: true,
        terms: 0,
        ..Default::default()
    };
    let t = associations(&l, &d, &opts).unwrap();
    assert!(t.csls && !t.rows.is_empty());
    let rs = l.csls_penalty(Side::Source).unwrap();
    let rt = l.csls_penalty(Side::Target).unwrap();
    for r in &t.rows {
        let s = l.vocabs.source.id(&r.source_term).unwrap() as usize;
        let g = l.vocabs.target.id(&r.target_term).unwrap() as usize;
        let want = 2.0 * r.similarity - f64::from(rs[s]) - f64::from(rt[g]);
        assert!((r.score - want).abs() < 1e-5, "{r:?}");
    }
}

/// On a random space: each new pair is the brute-force nearest target word,
/// and the missed headwords at k are exactly those lexicon induction does
/// not count at P@k, by cosine and by CSLS.
#[test]
fn agrees_with_brute_force_and_lexicon_induction() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (ns, nt, dim) = (120, 90, 6);
    let words = |p: &str, n: usize| -> Vec<String> { (0..n).map(|i| format!("{p}{i}")).collect() };
    let (sw, tw) = (words("s", ns), words("t", nt));
    let sdf: Vec<u32> = (0..ns).map(|_| rng.random_range(1..50)).collect();
    let tdf: Vec<u32> = (0..nt).map(|_| rng.random_range(1..50)).collect();
    let rand = |rng: &mut ChaCha8Rng, n: usize| {
        Array2::from_shape_fn((n, dim), |_| rng.random_range(-1.0f32..1.0))
    };
    let (vs, vt) = (rand(&mut rng, ns), rand(&mut rng, nt));
    let swr: Vec<&str> = sw.iter().map(String::as_str).collect();
    let twr: Vec<&str> = tw.iter().map(String::as_str).collect();
    let l = loaded(
        &dir.path().join("s"),
        (&swr, &sdf, &swr),
        (&twr, &tdf, &twr),
        vs,
        vt,
    );
    let mut d: HashMap<String, Vec<String>> = HashMap::new();
    for s in sw.iter().step_by(2) {
        let n = rng.random_range(1..3);
        d.insert(
            s.clone(),
            (0..n)
                .map(|_| tw[rng.random_range(0..nt)].clone())
                .collect(),
        );
    }
    let ad = AssocDictionary::from(d.clone());
    let src = l.term_vectors(Side::Source).unwrap().clone();
    let tgt = l.term_vectors(Side::Target).unwrap().clone();
    for csls in [false, true] {
        let rt = l.csls_penalty(Side::Target).unwrap().clone();
        let score = |s: usize, t: usize| {
            let c = src.row(s).dot(&tgt.row(t));
            if csls {
                2.0 * c - rt[t]
            } else {
                c
            }
        };
        // new pairs over the 50 most frequent source words
        let opts = AssocOptions {
            terms: 50,
            csls,
            ..Default::default()
        };
        let t = associations(&l, &ad, &opts).unwrap();
        let mut top: Vec<usize> = (0..ns).collect();
        top.sort_by(|a, b| sdf[*b].cmp(&sdf[*a]).then(a.cmp(b)));
        top.truncate(50);
        let mut want = 0;
        for &s in &top {
            let best = (0..nt)
                .max_by(|a, b| score(s, *a).total_cmp(&score(s, *b)))
                .unwrap();
            let listed = d.get(&sw[s]).is_some_and(|ts| ts.contains(&tw[best]));
            let row = t.rows.iter().find(|r| r.source_term == sw[s]);
            if listed {
                assert!(row.is_none(), "{} is listed", sw[s]);
            } else {
                want += 1;
                assert_eq!(row.unwrap().target_term, tw[best], "csls {csls}");
            }
        }
        assert_eq!(t.rows.len(), want);
        // missed pairs against P@k
        let b = bli(&l, &d, csls).unwrap();
        for (k, p) in [(1, b.p1), (5, b.p5), (10, b.p10)] {
            let m = associations(
                &l,
                &ad,
                &AssocOptions {
                    kind: AssocKind::Missed,
                    k,
                    csls,
                    ..Default::default()
                },
            )
            .unwrap();
            assert_eq!(m.looked_up, b.queries);
            let linked = (p * b.queries as f64).round() as usize;
            assert_eq!(m.rows.len(), b.queries - linked, "k {k} csls {csls}");
            assert!(m.rows.iter().all(|r| r.rank > k));
        }
    }
}

#[test]
fn a_lexical_baseline_has_no_associations() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("bm25");
    Session::create(&s, config("bm25")).unwrap();
    let e = session_associations(&s, &AssocOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lexical baseline `bm25`") && e.contains("no embedding space"),
        "{e}"
    );
}

/// `rosetta associations` on a trained session: the TSV holds what the
/// table shows, JSON the same rows, --grep filters; a lexical baseline and a
/// bad flag are clear errors.
#[test]
fn cli_associations() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "cl-lsi", "sessions/lsi", &["--dim", "8"]);
    train(cwd, &wsf, "bm25", "sessions/bm25", &[]);

    for kind in ["new", "missed"] {
        let mut args = vec![
            "associations",
            "--session",
            "sessions/lsi",
            "--kind",
            kind,
            "--top",
            "0",
            "--tsv",
            "out.tsv",
            "--json",
        ];
        if kind == "missed" {
            args.extend(["--k", "1"]);
        }
        let j: Value = serde_json::from_str(&ok(&rosetta(cwd, &args))).unwrap();
        assert_eq!(j["kind"], kind);
        let rows = j["rows"].as_array().unwrap();
        assert!(!rows.is_empty(), "{kind}: {j}");
        let tsv = std::fs::read_to_string(cwd.join("out.tsv")).unwrap();
        let lines: Vec<&str> = tsv.lines().collect();
        assert_eq!(lines.len(), rows.len() + 1, "{tsv}");
        assert!(lines[0].starts_with("source\t"), "{tsv}");
        for (line, r) in lines[1..].iter().zip(rows) {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f[0], r["source"].as_str().unwrap());
            assert_eq!(f[1], r["target"].as_str().unwrap());
            let score: f64 = f[2].parse().unwrap();
            assert!((score - r["score"].as_f64().unwrap()).abs() < 1e-5);
        }
        // ranked: new by score, missed by rank
        if kind == "new" {
            assert!(rows
                .windows(2)
                .all(|w| w[0]["score"].as_f64() >= w[1]["score"].as_f64()));
        } else {
            assert!(rows
                .windows(2)
                .all(|w| w[0]["rank"].as_u64() >= w[1]["rank"].as_u64()));
            assert!(rows.iter().all(|r| r["rank"].as_u64().unwrap() > 1));
        }
    }

    // the table, filtered to one word
    let j: Value = serde_json::from_str(&ok(&rosetta(
        cwd,
        &[
            "associations",
            "--session",
            "sessions/lsi",
            "--top",
            "0",
            "--json",
        ],
    )))
    .unwrap();
    let word = j["rows"][0]["source"].as_str().unwrap().to_string();
    let text = ok(&rosetta(
        cwd,
        &[
            "associations",
            "--session",
            "sessions/lsi",
            "--grep",
            &word,
            "--sort",
            "freq",
        ],
    ));
    assert!(text.contains("sorted by freq"), "{text}");
    assert!(text.contains(&format!("matching `{word}`")), "{text}");
    // summary, legend, header, then the rows: the word's own row among them
    assert!(text.lines().skip(3).any(|l| l.contains(&word)), "{text}");

    let out = rosetta(cwd, &["associations", "--session", "sessions/bm25"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("lexical baseline") && e.contains("no embedding space"),
        "{e}"
    );
    let out = rosetta(
        cwd,
        &[
            "associations",
            "--session",
            "sessions/lsi",
            "--kind",
            "missed",
            "--mutual",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("apply to --kind new only"));
    let out = rosetta(
        cwd,
        &["associations", "--session", "sessions/lsi", "--k", "3"],
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--k applies to --kind missed"));
}

/// Timing at a realistic size: 10,000 × 10,000 words of dimension 128,
/// 5,000 dictionary headwords (`cargo test --release --test suite
/// associations::timing -- --ignored --nocapture`). Each list must take under a minute.
#[test]
#[ignore]
fn timing_10k_by_10k() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (n, dim) = (10_000, 128);
    let words = |p: &str| -> Vec<String> { (0..n).map(|i| format!("{p}{i}")).collect() };
    let (sw, tw) = (words("s"), words("t"));
    let df: Vec<u32> = (0..n as u32).map(|i| n as u32 - i).collect();
    let swr: Vec<&str> = sw.iter().map(String::as_str).collect();
    let twr: Vec<&str> = tw.iter().map(String::as_str).collect();
    let mut rand = || Array2::from_shape_fn((n, dim), |_| rng.random_range(-1.0f32..1.0));
    let (vs, vt) = (rand(), rand());
    let l = loaded(
        &dir.path().join("s"),
        (&swr, &df, &swr),
        (&twr, &df, &twr),
        vs,
        vt,
    );
    let d: HashMap<String, Vec<String>> = (0..n)
        .step_by(2)
        .map(|i| (sw[i].clone(), vec![tw[(i * 7) % n].clone()]))
        .collect();
    let d = AssocDictionary::from(d);
    for csls in [false, true] {
        for kind in [AssocKind::New, AssocKind::Missed] {
            let t0 = std::time::Instant::now();
            let t = associations(
                &l,
                &d,
                &AssocOptions {
                    kind,
                    csls,
                    terms: 0,
                    ..Default::default()
                },
            )
            .unwrap();
            let secs = t0.elapsed().as_secs_f64();
            println!(
                "{} csls={csls}: {} rows of {} looked up in {secs:.2} s",
                kind.name(),
                t.rows.len(),
                t.looked_up
            );
            assert_eq!(t.looked_up, if kind == AssocKind::New { n } else { n / 2 });
            assert!(secs < 60.0, "{secs} s");
        }
    }
}
