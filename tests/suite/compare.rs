//! The engine's comparison table (`rosetta::eval::compare`) on hand-made
//! per-query figures, its renderings, `rosetta compare --sessions` end to
//! end on tiny trained sessions, and `rosetta neighbours` marking the
//! dictionary's translations.

use std::collections::BTreeMap;

use rosetta::eval::compare::{CompareOptions, Comparison, Mark, System, TableFormat};
use rosetta::eval::{Correction, Metric, Metrics};
use serde_json::Value;

use crate::common;
use common::{ok, rosetta_in as rosetta, tiny_workspace, train};

fn system(name: &str, mrr: &[(&str, f64)], map: f64) -> System {
    System {
        name: name.into(),
        detail: String::new(),
        per_query: mrr
            .iter()
            .map(|(q, v)| {
                let m = Metrics {
                    mrr: *v,
                    map,
                    ..Default::default()
                };
                (q.to_string(), m)
            })
            .collect(),
        ..Default::default()
    }
}

/// Baseline B and three systems on three shared queries (X also on a query
/// B lacks). MRR differences from B: X [0.5, 0.25, 0] (t = √3 with 2 degrees
/// of freedom: p = 1 − √(3/5)), Y [−0.2, −0.21, −0.19] (t = −20√3:
/// p = 1 − √(1200/1202)), Z a constant +0.1 (p = 0). MAP is the same for all.
fn hand_made() -> Vec<System> {
    vec![
        system("B", &[("q1", 0.5), ("q2", 0.25), ("q3", 0.8)], 0.3),
        system(
            "X",
            &[("q1", 1.0), ("q2", 0.5), ("q3", 0.8), ("q9", 0.1)],
            0.3,
        ),
        system("Y", &[("q1", 0.3), ("q2", 0.04), ("q3", 0.61)], 0.3),
        system("Z", &[("q1", 0.6), ("q2", 0.35), ("q3", 0.9)], 0.3),
    ]
}

fn options(correction: Correction) -> CompareOptions {
    CompareOptions {
        correction,
        metrics: vec![Metric::Mrr, Metric::Map],
        ..Default::default()
    }
}

const P_X: f64 = 0.2254033307585166;
const P_Y: f64 = 0.0008322931113192711;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9
}

#[test]
fn table_on_hand_made_figures() {
    let t = Comparison::build(&hand_made(), Some("B"), &options(Correction::Holm)).unwrap();
    assert_eq!(t.baseline.as_deref(), Some("B"));
    assert_eq!(t.tested(), 3);
    let row = |n: &str| t.rows.iter().find(|r| r.system == n).unwrap();
    // means over each system's own queries
    assert_eq!(row("X").queries, 4);
    assert!(close(row("X").mean(Metric::Mrr), 0.6));
    assert!(close(row("Y").mean(Metric::Mrr), 0.95 / 3.0));
    assert!(close(row("Z").mean(Metric::Mrr), 1.85 / 3.0));
    assert!(close(row("B").mean(Metric::Map), 0.3));
    // the baseline is not tested against itself
    assert!(row("B").baseline && row("B").tests.is_empty());
    let v = |n: &str, m: Metric| row(n).tests[&m];
    // paired on the 3 shared queries
    assert_eq!(v("X", Metric::Mrr).queries, 3);
    assert!(
        close(v("X", Metric::Mrr).p_value, P_X),
        "{:?}",
        v("X", Metric::Mrr)
    );
    assert!(
        close(v("Y", Metric::Mrr).p_value, P_Y),
        "{:?}",
        v("Y", Metric::Mrr)
    );
    assert_eq!(v("Z", Metric::Mrr).p_value, 0.0);
    // Holm over 3: Z ×3, Y ×2 (kept monotone), X ×1
    assert_eq!(v("Z", Metric::Mrr).p_adjusted, 0.0);
    assert!(close(v("Y", Metric::Mrr).p_adjusted, 2.0 * P_Y));
    assert!(close(v("X", Metric::Mrr).p_adjusted, P_X));
    assert_eq!(row("Z").mark(Metric::Mrr), Mark::Better);
    assert_eq!(row("Y").mark(Metric::Mrr), Mark::Worse);
    assert_eq!(row("X").mark(Metric::Mrr), Mark::None);
    // wins/ties/losses against the baseline
    let wtl = |n: &str, m: Metric| {
        let x = v(n, m);
        (x.wins, x.ties, x.losses)
    };
    assert_eq!(wtl("X", Metric::Mrr), (2, 1, 0));
    assert_eq!(wtl("Y", Metric::Mrr), (0, 0, 3));
    assert_eq!(wtl("Z", Metric::Mrr), (3, 0, 0));
    // equal MAP everywhere: all ties, p = 1, no mark
    assert_eq!(wtl("Y", Metric::Map), (0, 3, 0));
    assert_eq!(v("Y", Metric::Map).p_adjusted, 1.0);
    assert_eq!(row("Y").mark(Metric::Map), Mark::None);

    // Bonferroni multiplies every p by 3
    let b = Comparison::build(&hand_made(), Some("B"), &options(Correction::Bonferroni)).unwrap();
    let bx = b.rows[1].tests[&Metric::Mrr];
    assert!(close(bx.p_adjusted, 3.0 * P_X));
    // without a baseline nothing is tested
    let none = Comparison::build(&hand_made(), None, &options(Correction::Holm)).unwrap();
    assert!(none.rows.iter().all(|r| r.tests.is_empty() && !r.baseline));
    assert!(none.legend().is_none());
}

#[test]
fn markdown_csv_text_and_json() {
    let t = Comparison::build(&hand_made(), Some("B"), &options(Correction::Holm)).unwrap();
    let md = t.to_markdown();
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines[0], "| system | queries | MRR | MAP |", "{md}");
    assert_eq!(lines[1], "|---|---:|---:|---:|");
    assert_eq!(lines[2], "| B ◆ | 3 | 0.5167 | 0.3000 |");
    assert!(lines.contains(&"| Z | 3 | 0.6167 ▲ | 0.3000 |"), "{md}");
    assert!(lines.contains(&"| Y | 3 | 0.3167 ▼ | 0.3000 |"), "{md}");
    // second table: corrected p; wins/ties/losses; difference [95% CI] d
    // (a constant difference: its interval is a point, d undefined; Y's
    // differences −0.2, −0.21, −0.19 have sd 0.01: d = −20)
    let y = lines.iter().find(|l| l.starts_with("| Y | 0.0")).unwrap();
    assert!(y.starts_with("| Y | 0.0017; 0/0/3; -0.200 [-0.2"), "{md}");
    assert!(
        y.ends_with("] d=-20.00 | 1.0000; 0/3/0; +0.000 [+0.000, +0.000] d=— |"),
        "{md}"
    );
    assert!(
        lines.contains(
            &"| Z | <.0001; 3/0/0; +0.100 [+0.100, +0.100] d=— | 1.0000; 0/3/0; +0.000 [+0.000, +0.000] d=— |"
        ),
        "{md}"
    );
    assert!(md.contains("holm correction over 3 comparisons"), "{md}");

    let csv = t.to_csv();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0].join(","),
        "system,model,queries,baseline,task,split,task_queries,\
         MRR,MRR_p,MRR_sig,MRR_wins,MRR_ties,MRR_losses,MRR_diff,MRR_ci_low,MRR_ci_high,MRR_d,\
         MAP,MAP_p,MAP_sig,MAP_wins,MAP_ties,MAP_losses,MAP_diff,MAP_ci_low,MAP_ci_high,MAP_d"
    );
    assert_eq!(rows.len(), 5);
    assert_eq!(
        rows[1][..17],
        ["B", "", "3", "true", "", "", "", "0.5167", "", "", "", "", "", "", "", "", ""]
    );
    let y = &rows[3];
    assert_eq!(y[..4], ["Y", "", "3", "false"]);
    assert_eq!(y[7], "0.3167");
    assert!(close(y[8].parse().unwrap(), 2.0 * P_Y));
    assert_eq!(y[9..13], ["worse", "0", "0", "3"]);
    assert_eq!(rows[4][9], "better");
    // Y's interval lies within its extreme differences; Z's is a point
    let lo: f64 = y[14].parse().unwrap();
    let hi: f64 = y[15].parse().unwrap();
    assert!(
        (-0.21 - 1e-12..-0.2).contains(&lo) && -0.2 < hi && hi <= -0.19 + 1e-12,
        "{csv}"
    );
    assert!(close(y[16].parse().unwrap(), -20.0), "{csv}");
    assert!(
        close(rows[4][14].parse().unwrap(), 0.1) && rows[4][16].is_empty(),
        "{csv}"
    );

    let text = t.to_text();
    let line = |start: &str| {
        text.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?} line in\n{text}"))
    };
    assert!(line("Z ").contains("0.6167 ▲"), "{text}");
    assert!(
        !line("X ").contains('▲') && !line("X ").contains('▼'),
        "{text}"
    );
    let p_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("  p (holm)"))
        .collect();
    assert_eq!(p_lines.len(), 3, "one under each tested system\n{text}");
    assert!(
        p_lines[2].contains("<.0001") && p_lines[1].contains("0.0017"),
        "{text}"
    );
    assert!(text.contains("3/0/0") && text.contains("0/0/3"), "{text}");

    let j: Value = serde_json::from_str(&t.to_json()).unwrap();
    assert_eq!(j["baseline"], "B");
    assert_eq!(j["test"], "t");
    assert_eq!(j["metrics"][0], "MRR");
    let y = &j["systems"][2];
    assert_eq!(y["system"], "Y");
    assert_eq!(y["tests"]["MRR"]["mark"], "worse");
    assert_eq!(y["tests"]["MRR"]["losses"], 3);
    assert!(close(
        y["tests"]["MRR"]["effect_size"].as_f64().unwrap(),
        -20.0
    ));
    assert!(y["tests"]["MRR"]["ci_low"].as_f64().unwrap() < -0.2);
    // a constant difference: d undefined is null, never NaN
    assert!(j["systems"][3]["tests"]["MRR"]["effect_size"].is_null());
    assert!(close(
        j["systems"][3]["tests"]["MRR"]["ci_high"].as_f64().unwrap(),
        0.1
    ));
    // an infinite statistic (constant difference) is null in JSON
    assert!(j["systems"][3]["tests"]["MRR"]["statistic"].is_null());
    assert!(j["systems"][0]
        .get("tests")
        .unwrap()
        .as_object()
        .unwrap()
        .is_empty());

    // rendering to a file
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.md");
    t.write(&p, TableFormat::Markdown).unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), md);
}

#[test]
fn bad_figures_and_names_are_errors_naming_the_system() {
    let mut s = hand_made();
    s[2].per_query.get_mut("q2").unwrap().mrr = f64::NAN;
    let e = Comparison::build(&s, Some("B"), &options(Correction::Holm))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Y") && e.contains("q2") && e.contains("MRR"),
        "{e}"
    );
    // a NaN in a metric not shown is not reported, so not refused
    let mut s = hand_made();
    s[2].per_query.get_mut("q2").unwrap().p5 = f64::INFINITY;
    assert!(Comparison::build(&s, Some("B"), &options(Correction::Holm)).is_ok());

    let mut s = hand_made();
    s[3].name = "X".into();
    let e = Comparison::build(&s, None, &options(Correction::Holm)).unwrap_err();
    assert!(e.to_string().contains("X: system given twice"), "{e}");
    let e = Comparison::build(&hand_made(), Some("W"), &options(Correction::Holm)).unwrap_err();
    assert!(e.to_string().contains("baseline W"), "{e}");
    let mut s = hand_made();
    s[1].per_query = BTreeMap::new();
    let e = Comparison::build(&s, None, &options(Correction::Holm)).unwrap_err();
    assert!(e.to_string().contains("X: no scored query"), "{e}");
    let mut o = options(Correction::Holm);
    o.alpha = 1.0;
    assert!(Comparison::build(&hand_made(), None, &o).is_err());

    // a system sharing one query with the baseline is shown, untested
    let mut s = hand_made();
    s.push(system("W", &[("q1", 0.9), ("q7", 0.1)], 0.3));
    let t = Comparison::build(&s, Some("B"), &options(Correction::Holm)).unwrap();
    let w = t.rows.iter().find(|r| r.system == "W").unwrap();
    assert!(w.tests.is_empty());
    assert!(w.note.as_deref().unwrap().contains("1 scored query"));
    assert_eq!(t.tested(), 3, "the family is the tested systems");
    assert!(t.to_text().contains("W: not tested"));
}

/// Two tiny sessions compared from the CLI: the same table whatever the
/// format, figures equal to `rosetta eval`'s ad-hoc ones.
#[test]
fn cli_compare_sessions() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "cl-lsi", "sessions/lsi", &["--dim", "4"]);
    train(cwd, &wsf, "bm25-dict", "sessions/dict", &[]);

    let j: Value = serde_json::from_str(&ok(&rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/lsi",
            "sessions/dict",
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(j["baseline"], "lsi");
    assert_eq!(j["correction"], "holm");
    assert_eq!(j["task"]["name"], "tiny-en-es: ad-hoc collection", "{j}");
    assert_eq!(j["task"]["queries"], 5);
    let systems = j["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 2);
    assert_eq!(systems[0]["system"], "lsi");
    assert_eq!(systems[0]["detail"], "cl-lsi");
    assert_eq!(systems[1]["system"], "dict");
    assert_eq!(systems[1]["detail"], "bm25-dict");
    assert_eq!(systems[1]["queries"], 5);
    let t = &systems[1]["tests"]["MAP"];
    let (w, ti, l) = (
        t["wins"].as_u64().unwrap(),
        t["ties"].as_u64().unwrap(),
        t["losses"].as_u64().unwrap(),
    );
    assert_eq!(w + ti + l, 5);
    assert_eq!(j["metrics"].as_array().unwrap().len(), 10, "all metrics");
    // each session's means are its `rosetta eval` ad-hoc figures
    for (s, name) in [
        (&systems[0], "sessions/lsi"),
        (&systems[1], "sessions/dict"),
    ] {
        let e: Value = serde_json::from_str(&ok(&rosetta(
            cwd,
            &["eval", "--session", name, "--task", "adhoc", "--json"],
        )))
        .unwrap();
        for m in ["MRR", "MAP", "nDCG@10"] {
            let (a, b) = (
                s["means"][m].as_f64().unwrap(),
                e["adhoc"][m].as_f64().unwrap(),
            );
            assert!((a - b).abs() < 1e-9, "{name} {m}: {a} vs eval {b}");
        }
    }

    // --baseline moves the baseline first; Markdown to a file
    let out = rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/lsi",
            "sessions/dict",
            "--baseline",
            "sessions/dict",
            "--metrics",
            "MAP,ndcg_cut_10",
            "--format",
            "md",
            "--out",
            "table.md",
        ],
    );
    assert_eq!(ok(&out), "", "the table goes to the file");
    let md = std::fs::read_to_string(cwd.join("table.md")).unwrap();
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(
        lines[0], "over: tiny-en-es: ad-hoc collection, 5 judged queries  ",
        "{md}"
    );
    assert_eq!(
        lines[2], "| system | model | queries | MAP | nDCG@10 |",
        "{md}"
    );
    assert!(lines[4].starts_with("| dict ◆ | bm25-dict | 5 |"), "{md}");
    assert!(lines[5].starts_with("| lsi | cl-lsi | 5 |"), "{md}");
    assert!(md.contains("Against the baseline dict"), "{md}");

    // CSV and text on standard output
    let csv = ok(&rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/lsi",
            "sessions/dict",
            "--metrics",
            "MRR",
            "--format",
            "csv",
            "--test",
            "randomization",
            "--permutations",
            "100",
        ],
    ));
    let mut l = csv.lines();
    assert_eq!(
        l.next().unwrap(),
        "system,model,queries,baseline,task,split,task_queries,MRR,MRR_p,MRR_sig,MRR_wins,MRR_ties,MRR_losses,MRR_diff,MRR_ci_low,MRR_ci_high,MRR_d"
    );
    assert!(l
        .next()
        .unwrap()
        .starts_with("lsi,cl-lsi,5,true,tiny-en-es: ad-hoc collection,,5,"));
    assert!(l.next().unwrap().starts_with("dict,bm25-dict,5,false,"));
    let text = ok(&rosetta(
        cwd,
        &["compare", "--sessions", "sessions/lsi", "sessions/dict"],
    ));
    assert!(
        text.starts_with("over: tiny-en-es: ad-hoc collection, 5 judged queries\n\nsystem"),
        "{text}"
    );
    assert!(text.contains("win/tie/loss"), "{text}");
    assert!(text.contains("baseline lsi"), "{text}");

    // a session folder with no model is an error naming it
    std::fs::create_dir_all(cwd.join("sessions/untrained")).unwrap();
    std::fs::write(
        cwd.join("sessions/untrained/config.toml"),
        std::fs::read_to_string(cwd.join("sessions/dict/config.toml"))
            .unwrap()
            .replace("bm25-dict", "cl-lsi"),
    )
    .unwrap();
    let out = rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/lsi",
            "sessions/untrained",
        ],
    );
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("untrained"), "{e}");
    // what a shell glob adds that is no session (a README, an empty
    // folder) is left out with a note
    std::fs::write(cwd.join("sessions/README.md"), "# sessions\n").unwrap();
    std::fs::create_dir_all(cwd.join("sessions/empty")).unwrap();
    let out = rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/lsi",
            "sessions/README.md",
            "sessions/empty",
            "sessions/dict",
            "--json",
        ],
    );
    let j: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(j["systems"].as_array().unwrap().len(), 2, "{j}");
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("sessions/README.md left out: not a session folder")
            && e.contains("sessions/empty left out"),
        "{e}"
    );
    // runs and sessions do not mix; runs need qrels
    let out = rosetta(cwd, &["compare", "a.run", "--sessions", "sessions/lsi"]);
    assert!(!out.status.success());
    let out = rosetta(cwd, &["compare", "a.run"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--qrels"));
}

/// The JSON a command that must succeed prints.
fn json_of(cwd: &std::path::Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(&rosetta(cwd, args))).unwrap()
}

/// Sessions on different workspaces' tasks are never paired: their query
/// ids name other texts. The table shows each one's means over its own
/// task, tests only those on the baseline's task and says why the others
/// are not; their per-query lists are refused. A renamed session is
/// labelled by its name.
#[test]
fn cli_compare_refuses_pairing_other_tasks_and_labels_by_name() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let bible = common::fixture_workspace("bible");
    let bf = bible.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "bm25", "sessions/tiny-a", &[]);
    train(cwd, &wsf, "bm25-dict", "sessions/tiny-b", &[]);
    train(cwd, &bf, "bm25", "sessions/bible", &[]);
    ok(&rosetta(
        cwd,
        &["jobs", "rename", "sessions/tiny-b", "dictionary run"],
    ));
    let j = json_of(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/tiny-a",
            "sessions/tiny-b",
            "sessions/bible",
            "--metrics",
            "MRR",
            "--json",
        ],
    );
    let sys = j["systems"].as_array().unwrap();
    assert_eq!(sys[1]["system"], "dictionary run", "{j}");
    assert!(sys[1]["tests"]["MRR"]["p_value"].is_number(), "{j}");
    let other = &sys[2];
    assert_eq!(other["system"], "bible");
    assert_eq!(other["tests"], serde_json::json!({}), "never tested: {j}");
    let note = other["note"].as_str().unwrap();
    assert!(
        note.contains("not tested")
            && note.contains("derived ad-hoc task")
            && note.contains("the same queries with the same judgements"),
        "{note}"
    );
    // the text table says so; the per-query list leaves it out
    let text = ok(&rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/tiny-a",
            "sessions/bible",
            "sessions/tiny-b",
            "--per-query",
            "3",
        ],
    ));
    assert!(
        text.contains("bible: not tested: a paired test needs the same queries"),
        "{text}"
    );
    assert!(!text.contains("bible against"), "{text}");
    assert!(text.contains("dictionary run"), "{text}");
    // the same workspace with other judgements (runs scored against
    // different qrels): the same query ids, never paired either
    let regraded = tiny_workspace();
    let qrels = regraded.path().join("qrels.tsv");
    let text = std::fs::read_to_string(&qrels).unwrap();
    std::fs::write(&qrels, text.replace("q1 0 d01 1", "q1 0 d04 1")).unwrap();
    train(
        cwd,
        &regraded.path().join("workspace.toml"),
        "bm25-dict",
        "sessions/regraded",
        &[],
    );
    let j = json_of(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/tiny-b",
            "sessions/regraded",
            "--json",
        ],
    );
    let r = &j["systems"][1];
    assert_eq!(r["tests"], serde_json::json!({}), "{j}");
    assert!(r["note"].as_str().unwrap().contains("(judgements "), "{j}");
    // with the baseline on the other task, nothing is tested
    let j = json_of(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/bible",
            "sessions/tiny-a",
            "--json",
        ],
    );
    assert_eq!(j["systems"][1]["tests"], serde_json::json!({}), "{j}");

    // one query's rankings side by side, as the workbench's rankings view
    let j = json_of(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/tiny-a",
            "sessions/tiny-b",
            "--rankings",
            "q1",
            "--k",
            "3",
            "--json",
        ],
    );
    let sys = j["systems"].as_array().unwrap();
    assert_eq!(sys.len(), 2, "{j}");
    assert_eq!(sys[1]["system"], "dictionary run");
    for s in sys {
        let hits = s["ranking"]["hits"].as_array().unwrap();
        assert!(hits.len() <= 3, "{j}");
        assert!(hits.iter().all(|h| h["relevant"].is_boolean()), "{j}");
        assert!(
            !s["ranking"]["relevant"].as_array().unwrap().is_empty(),
            "{j}"
        );
    }
    // BM25 over the dictionary translation finds the relevant document
    // first; untranslated English BM25 finds nothing in Spanish
    assert_eq!(sys[1]["ranking"]["hits"][0]["relevant"], true, "{j}");
    assert_eq!(sys[1]["ranking"]["relevant"][0][1], 1, "{j}");
    assert_eq!(sys[0]["ranking"]["relevant"][0][1], Value::Null, "{j}");
    let out = rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/tiny-a",
            "--rankings",
            "nope",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope: not a judged query"));
}

/// `rosetta neighbours` marks the dictionary's translations of the word, as
/// the workbench's Neighbours screen does.
#[test]
fn cli_neighbours_marks_dictionary_translations() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    // a translation no training text holds: shown as the dictionary
    // writes it, never as its stem (`acuarel`)
    let dict = ws.path().join("eng-spa.tsv");
    let mut text = std::fs::read_to_string(&dict).unwrap();
    text.push_str("river\tacuarelas\n");
    std::fs::write(&dict, text).unwrap();
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "cl-lsi", "sessions/lsi", &["--dim", "8"]);
    let j: Value = serde_json::from_str(&ok(&rosetta(
        cwd,
        &[
            "neighbours",
            "--session",
            "sessions/lsi",
            "--term",
            "river",
            "--k",
            "1000",
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(j["term"], "river");
    assert_eq!(j["side"], "source");
    let translations: Vec<&str> = j["translations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!translations.is_empty());
    let cross = j["cross"].as_array().unwrap();
    let gold: Vec<&str> = cross
        .iter()
        .filter(|n| n["gold"] == true)
        .map(|n| n["term"].as_str().unwrap())
        .collect();
    assert!(!gold.is_empty(), "{j}");
    // marked exactly when listed
    for n in cross {
        let t = n["term"].as_str().unwrap();
        assert_eq!(n["gold"] == true, translations.contains(&t), "{t}");
    }
    assert!(j["own"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["gold"] == false));

    let text = ok(&rosetta(
        cwd,
        &[
            "neighbours",
            "--session",
            "sessions/lsi",
            "--term",
            "river",
            "--k",
            "1000",
        ],
    ));
    // the text shows terms as their commonest training word
    let shown = cross.iter().find(|n| n["gold"] == true).unwrap()["surface"]
        .as_str()
        .unwrap();
    let marked = text
        .lines()
        .find(|l| l.contains(&format!("{shown} ")) && l.contains('✓'))
        .unwrap_or_else(|| panic!("{shown} not marked in\n{text}"));
    assert!(marked.starts_with("  "), "{text}");
    assert!(text.contains("✓ dictionary translation"), "{text}");
    let words: Vec<&str> = j["translation_words"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(words.len(), translations.len(), "{j}");
    assert!(words.contains(&"acuarelas"), "{j}");
    assert!(!words.contains(&"acuarel"), "{j}");
    let listed = text
        .lines()
        .find(|l| l.starts_with("✓ dictionary translation"))
        .unwrap();
    assert!(
        listed.contains("acuarelas") && listed.contains("río"),
        "{listed}"
    );
}

/// A workspace without [adhoc] has a task derived from its parallel data,
/// whose judgements no file holds: `bm25` and `eval --run` write them beside
/// the run, so the quick tour's `rosetta compare` scores the runs.
#[test]
fn derived_task_runs_come_with_their_qrels() {
    let ws = common::tiny_workspace();
    let cwd = ws.path();
    let p = cwd.join("workspace.toml");
    let orig = std::fs::read_to_string(&p).unwrap();
    // drop the [adhoc] table: the task is derived from the parallel data
    let mut kept = Vec::new();
    let mut skip = false;
    for l in orig.lines() {
        if l.starts_with('[') {
            skip = l.trim() == "[adhoc]";
        }
        if !skip {
            kept.push(l);
        }
    }
    std::fs::write(&p, kept.join("\n")).unwrap();
    let j: Value = serde_json::from_str(&ok(&rosetta(
        cwd,
        &[
            "bm25",
            "--workspace",
            "workspace.toml",
            "--translate",
            "dict",
            "--run",
            "dict.run",
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(j["qrels"], "dict.run.qrels", "{j}");
    let qrels = std::fs::read_to_string(cwd.join("dict.run.qrels")).unwrap();
    assert!(qrels.lines().count() >= 5, "{qrels}");
    train(cwd, &p, "cl-lsi", "sessions/lsi", &["--dim", "4"]);
    let e: Value = serde_json::from_str(&ok(&rosetta(
        cwd,
        &[
            "eval",
            "--session",
            "sessions/lsi",
            "--task",
            "adhoc",
            "--run",
            "lsi.run",
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(e["adhoc"]["derived"], true, "{e}");
    assert_eq!(e["adhoc"]["qrels"], "lsi.run.qrels", "{e}");
    assert_eq!(
        std::fs::read_to_string(cwd.join("lsi.run.qrels")).unwrap(),
        qrels
    );
    // and the quick tour's compare scores both runs with them
    let c: Value = serde_json::from_str(&ok(&rosetta(
        cwd,
        &[
            "compare",
            "lsi.run",
            "dict.run",
            "--qrels",
            "lsi.run.qrels",
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(c["systems"].as_array().unwrap().len(), 2, "{c}");
}

/// `--per-query N --metric M` lists, per system, the queries on which it
/// differs most from the baseline; `--export FILE` writes in the format of
/// the file's extension (with `--per-query` and CSV/TSV: the per-query rows).
#[test]
fn cli_compare_per_query_and_export() {
    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "cl-lsi", "sessions/lsi", &["--dim", "4"]);
    train(cwd, &wsf, "bm25-dict", "sessions/dict", &[]);
    let base = [
        "compare",
        "--sessions",
        "sessions/lsi",
        "sessions/dict",
        "--metrics",
        "MRR,MAP",
    ];
    let with = |more: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(more);
        rosetta(cwd, &a)
    };
    let j: Value = serde_json::from_str(&ok(&with(&[
        "--per-query",
        "3",
        "--metric",
        "map",
        "--json",
    ])))
    .unwrap();
    let d = &j["per_query"][0];
    assert_eq!(j["per_query"].as_array().unwrap().len(), 1, "{j}");
    assert_eq!(
        (d["system"].as_str(), d["baseline"].as_str()),
        (Some("dict"), Some("lsi"))
    );
    assert_eq!(d["metric"], "MAP");
    assert_eq!(d["paired"], 5);
    let t = &j["systems"][1]["tests"]["MAP"];
    for k in ["wins", "ties", "losses"] {
        assert_eq!(d[k], t[k], "{k}: the drill-down counts are the table's");
    }
    let rows = d["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    let diffs: Vec<f64> = rows
        .iter()
        .map(|r| r["difference"].as_f64().unwrap())
        .collect();
    assert!(
        diffs.windows(2).all(|w| w[0].abs() >= w[1].abs()),
        "{diffs:?}"
    );
    for r in rows {
        let (v, b) = (
            r["value"].as_f64().unwrap(),
            r["baseline"].as_f64().unwrap(),
        );
        assert!((r["difference"].as_f64().unwrap() - (v - b)).abs() < 1e-12);
        assert!(
            !r["text"].as_str().unwrap().is_empty(),
            "query text known: {r}"
        );
    }

    // text: the list under the table
    let text = ok(&with(&["--per-query", "2", "--metric", "MAP"]));
    assert!(
        text.starts_with("over: tiny-en-es: ad-hoc collection"),
        "{text}"
    );
    assert!(
        text.contains("MAP per query, dict against the baseline lsi: 2 of 5 paired queries"),
        "{text}"
    );

    // --export: the table in the format of the extension
    let out = with(&["--export", "out/table.tsv"]);
    assert_eq!(ok(&out), "", "the table goes to the file");
    let tsv = std::fs::read_to_string(cwd.join("out/table.tsv")).unwrap();
    assert!(
        tsv.starts_with("system\tmodel\tqueries\tbaseline\ttask\tsplit\ttask_queries\tMRR\t"),
        "{tsv}"
    );
    assert_eq!(tsv.lines().count(), 3);
    let json = std::fs::read_to_string({
        ok(&with(&["--export", "t.json"]));
        cwd.join("t.json")
    })
    .unwrap();
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["baseline"], "lsi");
    // with --per-query, a TSV holds every paired query's row
    ok(&with(&["--per-query", "0", "--export", "pq.tsv"]));
    let pq = std::fs::read_to_string(cwd.join("pq.tsv")).unwrap();
    let lines: Vec<&str> = pq.lines().collect();
    assert_eq!(
        lines[0],
        "system\tbaseline\tmetric\tquery\tlabel\tbaseline_value\tvalue\tdifference\ttext"
    );
    assert_eq!(lines.len(), 6, "{pq}");
    assert!(
        lines[1..].iter().all(|l| l.starts_with("dict\tlsi\tMRR\t")),
        "{pq}"
    );
    // --format wins over the extension
    ok(&with(&["--export", "t.txt", "--format", "md"]));
    assert!(std::fs::read_to_string(cwd.join("t.txt"))
        .unwrap()
        .contains("| system |"));

    // an extension that names no format, --metric alone: errors
    let out = with(&["--export", "t.xlsx"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("t.xlsx") && e.contains("--format"), "{e}");
    let out = with(&["--metric", "MAP"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--per-query"));
}

/// A session's ad-hoc scores are cached in its folder and read back by a
/// fresh workbench; any change to the session (status, checkpoint, config)
/// or its workspace makes them be computed again; a broken cache file is
/// recomputed, not an error.
#[test]
fn cached_scores_follow_session_changes() {
    use rosetta::session::workbench::SCORES_CACHE;
    use rosetta::session::Workbench;
    use std::time::{Duration, SystemTime};

    let ws = tiny_workspace();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "cl-lsi", "sessions/lsi", &["--dim", "4"]);
    let dir = cwd.join("sessions/lsi");
    let scores = || Workbench::new().adhoc_scores(&dir, &|_, _| {}).unwrap();
    let first = scores();
    assert!(!first.cached);
    assert!(dir.join(SCORES_CACHE).is_file());
    assert_eq!(first.per_query.len(), 5);
    assert_eq!(first.task.queries, 5);
    assert_eq!(first.texts.len(), 5);
    let again = scores();
    assert!(again.cached, "a fresh workbench reads the cache");
    assert_eq!(
        (&again.per_query, &again.task, &again.texts),
        (&first.per_query, &first.task, &first.texts),
        "the cache gives back exactly what was computed"
    );

    // the cache is what is read: a doctored value comes back as long as the key holds
    let cache = dir.join(SCORES_CACHE);
    let q = first.per_query.keys().next().unwrap().clone();
    let doctor = || {
        let mut doc: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
        doc["scores"]["per_query"][&q]["MRR"] = 0.123456.into();
        std::fs::write(&cache, serde_json::to_vec(&doc).unwrap()).unwrap();
    };
    doctor();
    assert_eq!(scores().per_query[&q].mrr, 0.123456);

    // ... and any change to the session's files drops it
    let touch = |f: &str, secs: u64| {
        let file = std::fs::File::options()
            .append(true)
            .open(dir.join(f))
            .unwrap();
        file.set_modified(SystemTime::now() + Duration::from_secs(secs))
            .unwrap();
    };
    for (i, f) in [
        "status.json",
        "checkpoints/best.safetensors",
        "config.toml",
        "metrics.jsonl",
    ]
    .iter()
    .enumerate()
    {
        doctor();
        let s = scores();
        assert!(
            s.cached && s.per_query[&q].mrr == 0.123456,
            "{f}: the doctored cache is current"
        );
        touch(f, 10 * (i as u64 + 1));
        let fresh = scores();
        assert!(!fresh.cached, "{f} changed: computed again");
        assert_eq!(fresh.per_query, first.per_query, "{f}");
        assert!(scores().cached, "{f}: cached again");
    }

    // a broken cache file is recomputed
    std::fs::write(&cache, "not json").unwrap();
    let s = scores();
    assert!(!s.cached);
    assert_eq!(s.per_query, first.per_query);

    // a changed workspace is noticed through the cache: the session no longer matches
    for (file, line) in [
        ("train.en", "one more line\n"),
        ("train.es", "una línea más\n"),
    ] {
        let mut f = std::fs::File::options()
            .append(true)
            .open(ws.path().join(file))
            .unwrap();
        std::io::Write::write_all(&mut f, line.as_bytes()).unwrap();
    }
    let e = Workbench::new()
        .adhoc_scores(&dir, &|_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("changed since this session was made"), "{e}");
}

/// `compare RUN... --qrels Q --workspace W --per-query N`: the drill-down
/// names the queries of W's (derived, verse-labelled) task by their verse
/// references and shows their texts; a workspace whose queries the qrels do
/// not judge is refused.
#[test]
fn cli_compare_runs_labels_queries_from_the_workspace() {
    let dir = common::fixture_workspace("bible");
    let cwd = dir.path();
    for (run, how) in [
        ("dict.run", ["--translate", "dict"]),
        ("mono.run", ["--queries", "target"]),
    ] {
        let mut args = vec!["bm25", "--workspace", "workspace.toml", "--run", run];
        args.extend(how);
        ok(&rosetta(cwd, &args));
    }
    let per_query = |extra: &[&str]| {
        let mut args = vec![
            "compare",
            "dict.run",
            "mono.run",
            "--qrels",
            "dict.run.qrels",
            "--per-query",
            "0",
            "--format",
            "tsv",
        ];
        args.extend(extra);
        ok(&rosetta(cwd, &args))
    };
    let plain = per_query(&[]);
    assert!(!plain.contains("John 1:"), "{plain}");
    let labelled = per_query(&["--workspace", "workspace.toml"]);
    // every query row carries its verse reference and its English text
    let rows: Vec<&str> = labelled.lines().skip(1).collect();
    assert!(!rows.is_empty(), "{labelled}");
    for r in &rows {
        assert!(r.contains("\tJohn 1:"), "{r}");
        assert!(
            r.split('\t').next_back().unwrap().len() > 10,
            "no text: {r}"
        );
    }
    // the tiny workspace's queries are q1…q5: not this task's
    let tiny_ws = tiny_workspace();
    let tiny = tiny_ws.path().join("workspace.toml");
    let out = rosetta(
        cwd,
        &[
            "compare",
            "dict.run",
            "mono.run",
            "--qrels",
            "dict.run.qrels",
            "--workspace",
            tiny.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("none of its 5 ad-hoc queries"), "{err}");
}

/// Two hand-made runs over four queries, each with one relevant document:
/// the baseline ranks it first everywhere, the other at ranks 1, 2, 3, 4
/// (MRR differences 0, −1/2, −2/3, −3/4).
#[test]
fn cli_compare_runs_give_intervals_and_effect_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let mut qrels = String::new();
    let (mut base, mut other) = (String::new(), String::new());
    for q in 1..=4 {
        qrels.push_str(&format!("q{q} 0 rel{q} 1\n"));
        let docs: Vec<String> = (1..q).map(|i| format!("x{i}")).collect();
        base.push_str(&format!("q{q} Q0 rel{q} 1 10 base\n"));
        for (r, d) in docs.iter().chain([&format!("rel{q}")]).enumerate() {
            other.push_str(&format!("q{q} Q0 {d} {} {} other\n", r + 1, 10 - r));
        }
    }
    std::fs::write(cwd.join("qrels"), qrels).unwrap();
    std::fs::write(cwd.join("base.run"), base).unwrap();
    std::fs::write(cwd.join("other.run"), other).unwrap();
    let args = |extra: &[&'static str]| {
        let mut a = vec!["compare", "base.run", "other.run", "--qrels", "qrels"];
        a.extend(extra);
        a
    };
    let j = json_of(cwd, &args(&["--metrics", "MRR", "--json"]));
    let d = [0.0, -0.5, -2.0 / 3.0, -0.75];
    let mean = d.iter().sum::<f64>() / 4.0;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
    let v = &j["systems"][1]["tests"]["MRR"];
    let (lo, hi) = (
        v["ci_low"].as_f64().unwrap(),
        v["ci_high"].as_f64().unwrap(),
    );
    assert!(close(v["mean_difference"].as_f64().unwrap(), mean), "{v}");
    assert!((-0.75..mean).contains(&lo) && mean < hi && hi <= 0.0, "{v}");
    assert!(close(v["effect_size"].as_f64().unwrap(), mean / sd), "{v}");
    assert_eq!(j["bootstrap"]["resamples"], 10_000);
    assert_eq!(j["bootstrap"]["seed"], 42);
    // the baseline has no test, hence no interval
    assert!(j["systems"][0]["tests"].as_object().unwrap().is_empty());
    // seeded (the unit test shows another seed gives another interval)
    let again = json_of(cwd, &args(&["--metrics", "MRR", "--json", "--seed", "42"]));
    assert_eq!(again["systems"][1]["tests"]["MRR"], *v);

    let csv = ok(&rosetta(
        cwd,
        &args(&["--metrics", "MRR", "--format", "csv"]),
    ));
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0][7..],
        [
            "MRR",
            "MRR_p",
            "MRR_sig",
            "MRR_wins",
            "MRR_ties",
            "MRR_losses",
            "MRR_diff",
            "MRR_ci_low",
            "MRR_ci_high",
            "MRR_d"
        ]
    );
    assert!(rows[1][13..].iter().all(|c| c.is_empty()), "{csv}");
    let cell = |i: usize| rows[2][i].parse::<f64>().unwrap();
    assert!(
        close(cell(13), mean) && cell(14) == lo && cell(15) == hi,
        "{csv}"
    );
    assert!(close(cell(16), mean / sd), "{csv}");
    // the text table shows the interval and d under the p-values
    let text = ok(&rosetta(cwd, &args(&["--metrics", "MRR"])));
    assert!(
        text.lines().any(|l| l.starts_with("  difference [95% CI]")
            && l.contains(&format!("{mean:+.3} [{lo:+.3}, {hi:+.3}]"))),
        "{text}"
    );
    assert!(text.contains(&format!("{:.2}", mean / sd)), "{text}");
    let out = rosetta(cwd, &args(&["--resamples", "0"]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--resamples"));
}

/// A copy of the tiny workspace whose test split is its 29 training pairs:
/// enough pairs for small models to rank imperfectly.
fn tiny_with_training_pairs_as_test() -> tempfile::TempDir {
    let ws = tiny_workspace();
    let f = ws.path().join("workspace.toml");
    let text = std::fs::read_to_string(&f).unwrap();
    let edited = text.replace(
        "test = [\"test.en\", \"test.es\"]",
        "test = [\"train.en\", \"train.es\"]",
    );
    assert_ne!(text, edited, "the fixture names its test split");
    std::fs::write(&f, edited).unwrap();
    ws
}

/// The mean of one field over a drill-down's rows.
fn rows_mean(drill: &Value, field: &str) -> (f64, usize) {
    let rows = drill["rows"].as_array().unwrap();
    let sum: f64 = rows.iter().map(|r| r[field].as_f64().unwrap()).sum();
    (sum / rows.len() as f64, rows.len())
}

/// A two-session comparison `j` (with `--per-query 0 --metric
/// per_query`) against each session's `rosetta eval` figures: the means of
/// `metrics` equal eval's to 1e-9, and so does the mean of the drill-down's
/// per-query values of `per_query`, over as many queries as eval scored.
fn agrees_with_eval(j: &Value, figures: &[Value; 2], metrics: &[&str], per_query: &str) {
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() < 1e-9, "{what}: {a} vs {b}");
    let drill = &j["per_query"][0];
    assert_eq!(drill["metric"], per_query, "{j}");
    for (i, (want, column)) in figures.iter().zip(["baseline", "value"]).enumerate() {
        let sys = &j["systems"][i];
        for m in metrics {
            let what = format!("{} {m}", sys["system"]);
            close(
                sys["means"][m].as_f64().unwrap(),
                want[m].as_f64().unwrap(),
                &what,
            );
        }
        let (mean, n) = rows_mean(drill, column);
        let what = format!("{} per query", sys["system"]);
        close(mean, want[per_query].as_f64().unwrap(), &what);
        assert_eq!(n as u64, want["queries"].as_u64().unwrap(), "{j}");
        assert_eq!(sys["queries"], want["queries"], "{j}");
    }
}

/// `compare --sessions --task sentence|bli`: per pair and per test word,
/// scores whose means are `rosetta eval`'s figures (the per-pair
/// reciprocal ranks average to its MRR, the per-word hits to its P@k, by
/// the model's similarity or by CSLS), tested with the ad-hoc comparison's
/// machinery; compare records no dictionary split in the sessions; a BM25
/// session is compared on sentence retrieval by its own ranking and left
/// out of lexicon induction with the reason (an error as the baseline);
/// options of another task are refused.
#[test]
fn cli_compare_sessions_on_sentences_and_lexicon_induction() {
    let ws = tiny_with_training_pairs_as_test();
    let wsf = ws.path().join("workspace.toml");
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    train(cwd, &wsf, "cl-lsi", "sessions/lsi2", &["--dim", "2"]);
    train(cwd, &wsf, "cl-lsi", "sessions/lsi3", &["--dim", "3"]);
    train(cwd, &wsf, "bm25-dict", "sessions/dict", &[]);
    let fast = ["--permutations", "200", "--resamples", "200"];
    let compare_of = |sessions: &[&str], more: &[&str]| {
        let mut a = vec!["compare", "--sessions"];
        a.extend_from_slice(sessions);
        a.extend_from_slice(&["--test", "randomization", "--per-query", "0", "--json"]);
        a.extend_from_slice(&fast);
        a.extend_from_slice(more);
        json_of(cwd, &a)
    };
    let compare = |more: &[&str]| compare_of(&["sessions/lsi2", "sessions/lsi3"], more);
    let eval = |s: &str, more: &[&str]| {
        let mut a = vec!["eval", "--session", s, "--json"];
        a.extend_from_slice(more);
        json_of(cwd, &a)
    };

    // lexicon induction first: compare writes no split in the sessions
    for (retrieval, key) in [(None, "cosine"), (Some("csls"), "csls")] {
        let mut more = vec!["--task", "bli", "--metric", "P@1"];
        if let Some(r) = retrieval {
            more.extend(["--bli-retrieval", r]);
        }
        let j = compare(&more);
        assert_eq!(
            j["metrics"],
            serde_json::json!(["P@1", "P@5", "P@10"]),
            "{j}"
        );
        let task = j["task"]["name"].as_str().unwrap();
        assert!(task.starts_with("lexicon induction"), "{j}");
        assert_eq!(j["task"]["split"], "dictionary seed-1 test", "{j}");
        let tests = &j["systems"][1]["tests"]["P@1"];
        assert!(
            tests["p_adjusted"].is_number() && tests["ci_low"].is_number(),
            "{j}"
        );
        if key == "cosine" {
            // before any eval: compare recorded nothing
            for name in ["lsi2", "lsi3"] {
                let split = cwd.join("sessions").join(name).join("bli-split-1.json");
                assert!(!split.exists(), "compare records no split");
            }
        }
        let figures = ["lsi2", "lsi3"]
            .map(|name| eval(&format!("sessions/{name}"), &["--task", "bli"])["bli"][key].clone());
        // each word's hit, averaged: eval's P@1 over the same words
        agrees_with_eval(&j, &figures, &["P@1", "P@5", "P@10"], "P@1");
    }
    // eval recorded its split; compare on another seed scores its test part
    let e = eval("sessions/lsi3", &["--task", "bli", "--bli-seed", "7"]);
    let j = compare(&["--task", "bli", "--bli-seed", "7"]);
    assert_eq!(j["task"]["split"], "dictionary seed-7 test", "{j}");
    let (a, b) = (
        j["systems"][1]["means"]["P@5"].as_f64().unwrap(),
        e["bli"]["cosine"]["P@5"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 1e-9, "seed 7: {a} vs {b}");

    // sentence retrieval: per pair, on the test split or --split valid
    for split in ["test", "valid"] {
        let j = compare(&["--task", "sentence", "--split", split]);
        assert_eq!(j["metrics"], serde_json::json!(["MRR", "P@1"]), "{j}");
        assert_eq!(j["task"]["name"], "parallel sentence retrieval", "{j}");
        assert_eq!(j["task"]["split"], split, "{j}");
        assert!(
            j["systems"][1]["tests"]["MRR"]["p_value"].is_number(),
            "{j}"
        );
        let figures = ["lsi2", "lsi3"].map(|name| {
            let e = eval(
                &format!("sessions/{name}"),
                &["--task", "sentence", "--split", split],
            );
            e["sentence"].clone()
        });
        // the per-pair reciprocal ranks average to eval's MRR
        agrees_with_eval(&j, &figures, &["MRR", "P@1"], "MRR");
        if split == "test" {
            // 28 usable pairs (one training pair has an empty side), not all first
            let mrr = j["systems"][0]["means"]["MRR"].as_f64().unwrap();
            assert!(
                mrr > 0.0 && mrr < 1.0,
                "a fixture that ranks imperfectly: {j}"
            );
            assert_eq!(j["systems"][0]["queries"], 28, "{j}");
        }
    }

    // a BM25 baseline ranks the split's sentences itself: its per-pair
    // ranks average to eval's MRR, and it pairs with the models' pairs
    let j = compare_of(&["sessions/dict", "sessions/lsi2"], &["--task", "sentence"]);
    assert!(j["skipped"].as_array().is_none_or(|s| s.is_empty()), "{j}");
    assert!(
        j["systems"][1]["tests"]["MRR"]["p_value"].is_number(),
        "{j}"
    );
    let figures = ["dict", "lsi2"]
        .map(|name| eval(&format!("sessions/{name}"), &["--task", "sentence"])["sentence"].clone());
    agrees_with_eval(&j, &figures, &["MRR", "P@1"], "MRR");

    // BM25 has no term space: left out with the reason, never a figure
    let j = json_of(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/lsi2",
            "sessions/dict",
            "sessions/lsi3",
            "--task",
            "bli",
            "--json",
        ],
    );
    assert_eq!(j["systems"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(j["skipped"][0]["system"], "dict", "{j}");
    let why = j["skipped"][0]["reason"].as_str().unwrap();
    assert!(
        why.contains("BM25") && why.contains("lexicon induction does not apply"),
        "{why}"
    );
    let text = ok(&rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/lsi2",
            "sessions/dict",
            "--task",
            "bli",
        ],
    ));
    assert!(
        text.contains("left out dict: `bm25-dict` is a BM25 baseline"),
        "{text}"
    );
    let err = |args: &[&str]| {
        let out = rosetta(cwd, args);
        assert!(!out.status.success(), "{args:?} must fail");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = err(&[
        "compare",
        "--sessions",
        "sessions/dict",
        "sessions/lsi2",
        "--task",
        "bli",
    ]);
    assert!(
        e.contains("the baseline dict") && e.contains("no term space"),
        "{e}"
    );
    // options of another task, metrics the task does not score
    let e = err(&[
        "compare",
        "--sessions",
        "sessions/lsi2",
        "sessions/lsi3",
        "--task",
        "sentence",
        "--bli-seed",
        "2",
    ]);
    assert!(
        e.contains("--bli-seed and --bli-retrieval apply to --task bli"),
        "{e}"
    );
    let e = err(&["compare", "--sessions", "sessions/lsi2", "--split", "valid"]);
    assert!(e.contains("--split applies to --task sentence"), "{e}");
    let e = err(&[
        "compare",
        "--sessions",
        "sessions/lsi2",
        "sessions/lsi3",
        "--task",
        "sentence",
        "--metrics",
        "MAP",
    ]);
    assert!(
        e.contains("MAP is not scored on the sentence task; it scores MRR, P@1"),
        "{e}"
    );
    let e = err(&["compare", "a.run", "--qrels", "q.txt", "--task", "bli"]);
    assert!(
        e.contains("--task sentence and bli compare sessions"),
        "{e}"
    );
}

/// Pairs and words are paired only over the same split and the same
/// dictionary test part: a session whose workspace has other test pairs
/// is left untested on sentence retrieval with the reason, one whose
/// dictionary differs is left untested on lexicon induction, and each is
/// still tested where its data is the baseline's.
#[test]
fn cli_compare_sessions_pairs_only_the_same_pairs_and_words() {
    let a = tiny_with_training_pairs_as_test();
    // the fixture's own test split: other pairs, the same dictionary
    let other_pairs = tiny_workspace();
    // the same pairs, the dictionary without `cat` (a test word of seed 1)
    let other_dict = tiny_with_training_pairs_as_test();
    let d = other_dict.path().join("eng-spa.tsv");
    let text = std::fs::read_to_string(&d).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.starts_with("cat\t"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(text, cut);
    std::fs::write(&d, cut).unwrap();
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path();
    let wsf = |t: &tempfile::TempDir| t.path().join("workspace.toml");
    train(cwd, &wsf(&a), "cl-lsi", "sessions/base", &["--dim", "2"]);
    train(cwd, &wsf(&a), "cl-lsi", "sessions/same", &["--dim", "3"]);
    train(
        cwd,
        &wsf(&other_pairs),
        "cl-lsi",
        "sessions/pairs",
        &["--dim", "3"],
    );
    train(
        cwd,
        &wsf(&other_dict),
        "cl-lsi",
        "sessions/dict",
        &["--dim", "3"],
    );
    let run = |task: &str| {
        json_of(
            cwd,
            &[
                "compare",
                "--sessions",
                "sessions/base",
                "sessions/same",
                "sessions/pairs",
                "sessions/dict",
                "--task",
                task,
                "--json",
            ],
        )
    };
    // each task: the two sessions on its data tested, the other one not, with the reason
    let check = |task: &str, metric: &str, tested: [usize; 2], other: usize, says: &str| {
        let j = run(task);
        for i in tested {
            assert!(
                j["systems"][i]["tests"][metric].is_object(),
                "{task} {i}: {j}"
            );
        }
        let r = &j["systems"][other];
        assert_eq!(r["tests"], serde_json::json!({}), "{j}");
        let note = r["note"].as_str().unwrap();
        let why = "not tested: a paired test needs the same queries with the same judgements";
        assert!(note.starts_with(why) && note.contains(says), "{note}");
        assert!(j["task"].is_null(), "no shared task: {j}");
    };
    // other pairs (session 2), the same pairs with another dictionary (3)
    check(
        "sentence",
        "MRR",
        [1, 3],
        2,
        "parallel sentence retrieval, test split, 6 judged queries",
    );
    check(
        "bli",
        "P@1",
        [1, 2],
        3,
        "dictionary seed-1 test split, 5 judged queries, the baseline on",
    );
    // the text table says so too
    let text = ok(&rosetta(
        cwd,
        &[
            "compare",
            "--sessions",
            "sessions/base",
            "sessions/pairs",
            "--task",
            "sentence",
        ],
    ));
    assert!(
        text.contains("pairs: not tested: a paired test needs the same queries"),
        "{text}"
    );
}
