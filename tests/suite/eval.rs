//! Evaluation against trec_eval: Rosetta's metrics on hand-written fixtures
//! must agree with the outputs of trec_eval's own C code (pytrec_eval via
//! `/work/shared/peers/trec_eval.py`), stored next to the fixtures by
//! `tests/fixtures/eval/regenerate.sh`. Also the `trec-eval` and `compare`
//! commands end to end.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rosetta::eval::{evaluate, Metric, Qrels, Run};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/eval")
        .join(name)
}

fn read_json(name: &str) -> Value {
    let path = fixture(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// The runs with stored trec_eval outputs, each with its qrels.
const CASES: [(&str, &str); 8] = [
    ("basic", "basic"),
    ("ties", "ties"),
    ("graded", "graded"),
    ("missing", "missing"),
    ("long", "long"),
    ("sig_base", "sig"),
    ("sig_better", "sig"),
    ("sig_same", "sig"),
];

/// Compares one run's evaluation with trec_eval's: per query to 1e-9 (the
/// peer prints full precision there) and the means to its 4 decimals.
fn check_against_trec_eval(run_name: &str, qrels_name: &str) {
    let run = Run::read(&fixture(&format!("{run_name}.run"))).unwrap();
    let qrels = Qrels::read(&fixture(&format!("{qrels_name}.qrels"))).unwrap();
    let ev = evaluate(&run, &qrels);

    let mean = read_json(&format!("{run_name}.expected.json"));
    let per = read_json(&format!("{run_name}.per-query.expected.json"));
    assert_eq!(
        ev.queries as u64,
        mean["queries"].as_u64().unwrap(),
        "{run_name}"
    );
    assert_eq!(ev.per_query.len(), ev.queries);

    let per = per["per_query"].as_object().unwrap();
    let mut compared = 0;
    for (qid, ours) in &ev.per_query {
        match per.get(qid) {
            Some(theirs) => {
                for m in Metric::ALL {
                    let Some(name) = m.trec_name() else { continue };
                    let want = theirs[name].as_f64().unwrap();
                    let got = ours.get(m);
                    assert!(
                        (got - want).abs() < 1e-9,
                        "{run_name} {qid} {m}: rosetta {got}, trec_eval {want}"
                    );
                    compared += 1;
                }
            }
            None => {
                // pytrec_eval leaves out judged queries the run lacks; trec_eval -c
                // counts them as zero
                assert!(!run.results.contains_key(qid), "{run_name} {qid}");
                assert_eq!(*ours, Default::default(), "{run_name} {qid}");
            }
        }
        assert_eq!(
            ours.top1, ours.p1,
            "{run_name} {qid}: Top1 is P@1 per query"
        );
    }
    // every query trec_eval scored is a judged query
    for qid in per.keys() {
        assert!(ev.per_query.contains_key(qid), "{run_name} {qid}");
    }
    assert!(compared > 0, "{run_name}: nothing compared");
    for m in Metric::ALL {
        let Some(name) = m.trec_name() else { continue };
        let want = mean[name].as_f64().unwrap();
        let got = ev.mean.get(m);
        assert!(
            (got - want).abs() <= 5e-5 + 1e-12,
            "{run_name} mean {m}: rosetta {got}, trec_eval {want}"
        );
        assert!(
            ((got * 1e4).round() / 1e4 - want).abs() < 1e-12,
            "{run_name} mean {m}: rosetta {got:.4}, trec_eval {want}"
        );
    }
}

#[test]
fn agrees_with_trec_eval_basic() {
    check_against_trec_eval("basic", "basic");
}

#[test]
fn agrees_with_trec_eval_on_ties() {
    check_against_trec_eval("ties", "ties");
}

#[test]
fn agrees_with_trec_eval_on_graded_relevance() {
    check_against_trec_eval("graded", "graded");
}

#[test]
fn agrees_with_trec_eval_on_missing_and_unjudged_queries() {
    check_against_trec_eval("missing", "missing");
}

#[test]
fn agrees_with_trec_eval_past_rank_100() {
    check_against_trec_eval("long", "long");
}

#[test]
fn agrees_with_trec_eval_on_comparison_runs() {
    for (run, qrels) in &CASES[5..] {
        check_against_trec_eval(run, qrels);
    }
}

#[test]
fn rank_column_and_line_order_are_ignored() {
    // the same results, lines reversed and ranks renumbered, score the same
    let path = fixture("graded.run");
    let text = std::fs::read_to_string(&path).unwrap();
    let shuffled: String = text
        .lines()
        .rev()
        .enumerate()
        .map(|(i, l)| {
            let f: Vec<&str> = l.split_whitespace().collect();
            format!("{} Q0 {} {} {} {}\n", f[0], f[2], 1000 - i, f[4], f[5])
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("shuffled.run");
    std::fs::write(&p, shuffled).unwrap();
    let qrels = Qrels::read(&fixture("graded.qrels")).unwrap();
    let a = evaluate(&Run::read(&path).unwrap(), &qrels);
    let b = evaluate(&Run::read(&p).unwrap(), &qrels);
    assert_eq!(a, b);
}

// ---------------------------------------------------------------- the CLI

fn rosetta(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .args(args)
        .current_dir(fixture(""))
        .output()
        .expect("run rosetta")
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "rosetta failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(text.trim().lines().count(), 1, "one JSON object: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn fails_with(args: &[&str], needle: &str) {
    let out = rosetta(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?}: exit code, stderr {err}"
    );
    assert!(err.contains(needle), "{args:?}: want {needle:?} in {err:?}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn cli_trec_eval_json_matches_trec_eval() {
    let out = stdout_json(&rosetta(&[
        "trec-eval",
        "missing.run",
        "missing.qrels",
        "--json",
    ]));
    let want = read_json("missing.expected.json");
    assert_eq!(out["queries"], want["queries"]);
    assert_eq!(out["judged_without_results"], 2);
    assert_eq!(out["unjudged_ignored"], 1);
    assert!(out.get("per_query").is_none());
    for m in Metric::ALL {
        let got = out["metrics"][m.name()].as_f64().unwrap();
        let want = want[m.trec_name().unwrap_or("P_1")].as_f64().unwrap();
        assert!((got - want).abs() <= 5e-5, "{m}: {got} vs {want}");
    }
    let out = stdout_json(&rosetta(&[
        "trec-eval",
        "missing.run",
        "missing.qrels",
        "--json",
        "--per-query",
    ]));
    let per = out["per_query"].as_object().unwrap();
    let qids: Vec<&str> = per.keys().map(|k| k.as_str()).collect();
    assert_eq!(qids, ["m1", "m2", "m3", "m4", "m5", "m6"]);
    assert_eq!(per["m4"]["MAP"].as_f64().unwrap(), 0.8333333333333333);
    assert_eq!(per["m2"]["MRR"].as_f64().unwrap(), 0.0);
}

#[test]
fn cli_trec_eval_table() {
    let out = rosetta(&["trec-eval", "basic.run", "basic.qrels", "--per-query"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |m: &str, q: &str| {
        text.lines()
            .find(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                f[0].trim() == m && f[1] == q
            })
            .unwrap_or_else(|| panic!("no {m} {q} line in {text}"))
            .split('\t')
            .nth(2)
            .unwrap()
            .to_string()
    };
    // basic.expected.json: map 0.3207, recip_rank 0.4747
    assert_eq!(line("MAP", "all"), "0.3207");
    assert_eq!(line("MRR", "all"), "0.4747");
    assert_eq!(line("MRR", "q3"), "0.0909");
    assert_eq!(line("queries", "all"), "3");
}

#[test]
fn cli_compare_t_test_matches_scipy() {
    // p-values: scipy 1.17.1 stats.ttest_rel on trec_eval's per-query values
    // (sig_*.per-query.expected.json), system first, baseline second
    let out = stdout_json(&rosetta(&[
        "compare",
        "sig_base.run",
        "sig_better.run",
        "sig_same.run",
        "--qrels",
        "sig.qrels",
        "--json",
    ]));
    assert_eq!(out["baseline"], "sig_base.run");
    assert_eq!(out["test"], "t");
    assert_eq!(out["correction"], "holm");
    let runs = out["systems"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r["queries"] == 12));
    assert_eq!(runs[0]["baseline"], true);
    assert!(runs[0]["tests"].as_object().unwrap().is_empty());
    let t = |run: usize, m: &str, k: &str| runs[run]["tests"][m][k].as_f64().unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-3);
    assert!(close(t(1, "MAP", "statistic"), 10.109987343371625));
    assert!(close(t(1, "MAP", "p_value"), 6.626772983919721e-07));
    assert!(close(t(2, "MAP", "p_value"), 0.41836940768885583));
    assert!(close(t(1, "MRR", "p_value"), 1.6018322775522398e-06));
    assert!(close(t(2, "nDCG@10", "p_value"), 0.7192429983326422));
    // Holm over the two comparisons
    assert!(close(
        t(1, "MAP", "p_adjusted"),
        2.0 * 6.626772983919721e-07
    ));
    assert!(close(t(2, "MAP", "p_adjusted"), 0.41836940768885583));
    assert_eq!(runs[1]["tests"]["MAP"]["significant"], true);
    assert_eq!(runs[1]["tests"]["MAP"]["mark"], "better");
    assert_eq!(runs[2]["tests"]["MAP"]["significant"], false);
    assert_eq!(runs[2]["tests"]["MAP"]["mark"], "none");
    // the means are trec_eval's
    let want = read_json("sig_better.expected.json");
    let got = runs[1]["means"]["MAP"].as_f64().unwrap();
    assert!((got - want["map"].as_f64().unwrap()).abs() <= 5e-5);
}

#[test]
fn cli_compare_randomization_exact_matches_scipy() {
    // 12 queries: 4096 sign assignments <= --permutations, so the test is
    // exact; scipy 1.17.1 stats.permutation_test((d,), np.mean,
    // permutation_type='samples') gives these
    let out = stdout_json(&rosetta(&[
        "compare",
        "sig_better.run",
        "sig_same.run",
        "--baseline",
        "sig_base.run",
        "--qrels",
        "sig.qrels",
        "--test",
        "randomization",
        "--permutations",
        "4096",
        "--correction",
        "bonferroni",
        "--json",
    ]));
    assert_eq!(out["baseline"], "sig_base.run");
    assert_eq!(out["permutations"], 4096);
    let runs = out["systems"].as_array().unwrap();
    assert_eq!(runs[0]["system"], "sig_base.run");
    assert_eq!(runs[1]["system"], "sig_better.run");
    let t = |run: usize, m: &str, k: &str| runs[run]["tests"][m][k].as_f64().unwrap();
    assert_eq!(t(1, "MAP", "p_value"), 0.00048828125);
    assert_eq!(t(1, "MRR", "p_value"), 0.0009765625);
    assert_eq!(t(2, "MAP", "p_value"), 0.439453125);
    assert_eq!(t(2, "nDCG@10", "p_value"), 0.7001953125);
    assert_eq!(t(1, "MAP", "p_adjusted"), 2.0 * 0.00048828125);
    assert_eq!(t(2, "MAP", "p_adjusted"), 0.87890625);
}

#[test]
fn cli_compare_table_marks_significance() {
    let out = rosetta(&[
        "compare",
        "sig_base.run",
        "sig_better.run",
        "sig_same.run",
        "--qrels",
        "sig.qrels",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name} in {text}"))
            .to_string()
    };
    let marked = |name: &str| row(name).contains('▲') || row(name).contains('▼');
    assert!(row("sig_better.run").contains("0.8206 ▲"), "{text}");
    assert!(!marked("sig_same.run"), "{text}");
    assert!(!marked("sig_base.run"), "{text}");
    assert!(
        text.contains("holm correction over 2 comparisons"),
        "{text}"
    );
}

#[test]
fn cli_reports_bad_input_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad_run = dir.path().join("bad.run");
    std::fs::write(&bad_run, "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 high t\n").unwrap();
    let short_run = dir.path().join("short.run");
    std::fs::write(&short_run, "q1 Q0 d1 1 0.5\n").unwrap();
    let dup_run = dir.path().join("dup.run");
    std::fs::write(&dup_run, "q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n").unwrap();
    let bad_qrels = dir.path().join("bad.qrels");
    std::fs::write(&bad_qrels, "q1 0 d1 1\n\nq1 0 d2\n").unwrap();
    let grade_qrels = dir.path().join("grade.qrels");
    std::fs::write(&grade_qrels, "q1 0 d1 yes\n").unwrap();
    let empty = dir.path().join("empty.qrels");
    std::fs::write(&empty, "# nothing\n").unwrap();
    let p = |x: &PathBuf| x.to_str().unwrap().to_string();

    fails_with(
        &["trec-eval", &p(&bad_run), "basic.qrels"],
        &format!("{}:2:", bad_run.display()),
    );
    fails_with(
        &["trec-eval", &p(&short_run), "basic.qrels"],
        &format!("{}:1:", short_run.display()),
    );
    fails_with(
        &["trec-eval", &p(&dup_run), "basic.qrels"],
        &format!("{}:2:", dup_run.display()),
    );
    fails_with(
        &["trec-eval", "basic.run", &p(&bad_qrels)],
        &format!("{}:3:", bad_qrels.display()),
    );
    fails_with(
        &["trec-eval", "basic.run", &p(&grade_qrels)],
        &format!("{}:1:", grade_qrels.display()),
    );
    fails_with(&["trec-eval", "basic.run", &p(&empty)], "no judgements");
    // a document judged twice, with another grade: a warning naming both
    // lines, an error with --strict
    let twice = dir.path().join("twice.qrels");
    std::fs::write(&twice, "q1 0 d1 1\nq1 0 d1 0\n").unwrap();
    let out = rosetta(&["trec-eval", "basic.run", &p(&twice)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning") && err.contains(&format!("{}:2", twice.display())),
        "{err}"
    );
    fails_with(
        &["trec-eval", "basic.run", &p(&twice), "--strict"],
        &format!("{}:2", twice.display()),
    );
    fails_with(
        &["trec-eval", "nonexistent.run", "basic.qrels"],
        "nonexistent.run",
    );
    fails_with(
        &["trec-eval", "basic.run", "nonexistent.qrels"],
        "nonexistent.qrels",
    );
    // a run for other queries
    fails_with(
        &["trec-eval", "ties.run", "basic.qrels"],
        "ties.run: none of its",
    );
    fails_with(
        &[
            "compare",
            "basic.run",
            &p(&bad_run),
            "--qrels",
            "basic.qrels",
            "--json",
        ],
        &format!("{}:2:", bad_run.display()),
    );
    fails_with(
        &[
            "compare",
            "basic.run",
            "basic.run",
            "--qrels",
            "basic.qrels",
        ],
        "given twice",
    );
    fails_with(
        &[
            "compare",
            "basic.run",
            "--qrels",
            "basic.qrels",
            "--permutations",
            "100",
        ],
        "--test randomization",
    );
    fails_with(
        &[
            "compare",
            "basic.run",
            "--qrels",
            "basic.qrels",
            "--resamples",
            "0",
        ],
        "--resamples must be at least 1",
    );
    fails_with(
        &[
            "compare",
            "basic.run",
            "--qrels",
            "basic.qrels",
            "--alpha",
            "1.5",
        ],
        "--alpha",
    );
}
