//! `rosetta trec-eval` and `rosetta compare`: scoring TREC runs against qrels
//! with trec_eval's conventions, and comparing runs with paired significance
//! tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use serde_json::{json, Map, Value};

use rosetta::eval::{evaluate, Correction, Evaluation, Metric, PairedTest, Qrels, Run};

/// Arguments of `rosetta trec-eval`.
#[derive(Debug, Args)]
pub struct TrecEvalArgs {
    /// TREC run file: `qid Q0 docno rank score tag` per line (the rank column
    /// is ignored; documents are ranked by score, ties by docno descending).
    pub run: PathBuf,
    /// TREC qrels file: `qid iter docno rel` per line (rel > 0 is relevant).
    pub qrels: PathBuf,
    /// Print one JSON object (`metrics`, `queries`, ...) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also print each judged query's scores (under `per_query` with --json).
    #[arg(long)]
    pub per_query: bool,
}

/// The paired test `compare` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestKind {
    /// Paired two-sided Student's t-test.
    T,
    /// Paired two-sided randomisation (sign-flip) test.
    #[value(alias = "randomisation", alias = "permutation")]
    Randomization,
}

/// The multiple-comparison correction `compare` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CorrectionKind {
    /// Holm's step-down correction.
    Holm,
    /// Bonferroni correction.
    Bonferroni,
    /// No correction.
    None,
}

/// Arguments of `rosetta compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// TREC run files to compare (the first is the baseline unless
    /// --baseline names one).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// TREC qrels file the runs are scored against.
    #[arg(long)]
    pub qrels: PathBuf,
    /// The run the others are tested against (added to the list if not in it;
    /// default: the first run).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Paired significance test over the judged queries.
    #[arg(long, value_enum, default_value = "t")]
    pub test: TestKind,
    /// Random sign flips for `--test randomization` (all 2^n of them when
    /// that is fewer) [default: 10000].
    #[arg(long)]
    pub permutations: Option<usize>,
    /// Seed of the randomisation test's generator [default: 42].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Correction of the p-values over the comparisons with the baseline
    /// (one family per metric).
    #[arg(long, value_enum, default_value = "holm")]
    pub correction: CorrectionKind,
    /// Significance level for the † mark, after correction.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Print one JSON object (each run's metrics and p-values) instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Reads and scores a run, refusing runs that cannot be meant for the qrels.
fn score(run_path: &Path, qrels: &Qrels, qrels_path: &Path) -> anyhow::Result<Scored> {
    let run = Run::read(run_path)?;
    if run.results.is_empty() {
        bail!("{}: the run has no results", run_path.display());
    }
    let unjudged = run
        .results
        .keys()
        .filter(|q| !qrels.judgements.contains_key(*q))
        .count();
    if unjudged == run.results.len() {
        bail!(
            "{}: none of its {} queries is judged in {} (different query ids?)",
            run_path.display(),
            run.results.len(),
            qrels_path.display()
        );
    }
    let without_results = qrels
        .judgements
        .keys()
        .filter(|q| !run.results.contains_key(*q))
        .count();
    Ok(Scored {
        path: run_path.to_path_buf(),
        eval: evaluate(&run, qrels),
        unjudged,
        without_results,
    })
}

/// A scored run and how its queries matched the qrels.
struct Scored {
    path: PathBuf,
    eval: Evaluation,
    /// Run queries absent from the qrels (ignored).
    unjudged: usize,
    /// Judged queries absent from the run (scored zero).
    without_results: usize,
}

impl Scored {
    /// A note for stderr on queries that did not match, if any.
    fn note(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.without_results > 0 {
            parts.push(format!(
                "{} judged quer{} without results (scored zero)",
                self.without_results,
                if self.without_results == 1 {
                    "y"
                } else {
                    "ies"
                }
            ));
        }
        if self.unjudged > 0 {
            parts.push(format!(
                "{} unjudged quer{} ignored",
                self.unjudged,
                if self.unjudged == 1 { "y" } else { "ies" }
            ));
        }
        (!parts.is_empty()).then(|| format!("{}: {}", self.path.display(), parts.join(", ")))
    }
}

/// Reads qrels and refuses empty ones.
fn read_qrels(path: &Path) -> anyhow::Result<Qrels> {
    let qrels = Qrels::read(path)?;
    if qrels.is_empty() {
        bail!("{}: no judgements", path.display());
    }
    Ok(qrels)
}

/// `rosetta trec-eval RUN QRELS`.
pub fn trec_eval(args: TrecEvalArgs) -> anyhow::Result<()> {
    let qrels = read_qrels(&args.qrels)?;
    let s = score(&args.run, &qrels, &args.qrels)?;
    if args.json {
        let mut out = json!({
            "run": args.run.display().to_string(),
            "qrels": args.qrels.display().to_string(),
            "queries": s.eval.queries,
            "metrics": s.eval.mean,
            "judged_without_results": s.without_results,
            "unjudged_ignored": s.unjudged,
        });
        if args.per_query {
            out["per_query"] = serde_json::to_value(&s.eval.per_query)?;
        }
        println!("{out}");
    } else {
        if let Some(note) = s.note() {
            eprintln!("note: {note}");
        }
        for m in Metric::ALL {
            if args.per_query {
                for (qid, qm) in &s.eval.per_query {
                    println!("{:<8}\t{qid}\t{:.4}", m.name(), qm.get(m));
                }
            }
            println!("{:<8}\tall\t{:.4}", m.name(), s.eval.mean.get(m));
        }
        println!("{:<8}\tall\t{}", "queries", s.eval.queries);
    }
    Ok(())
}

/// One metric's test of a run against the baseline.
struct Tested {
    statistic: f64,
    mean_difference: f64,
    p: f64,
    p_adjusted: f64,
}

/// `rosetta compare RUN... --qrels QRELS`.
pub fn compare(args: CompareArgs) -> anyhow::Result<()> {
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        bail!("--alpha must lie in (0, 1), got {}", args.alpha);
    }
    let test = match args.test {
        TestKind::T => {
            if args.permutations.is_some() || args.seed.is_some() {
                bail!("--permutations and --seed apply only to --test randomization");
            }
            PairedTest::T
        }
        TestKind::Randomization => {
            let permutations = args.permutations.unwrap_or(10_000);
            if permutations == 0 {
                bail!("--permutations must be at least 1");
            }
            PairedTest::Randomization {
                permutations,
                seed: args.seed.unwrap_or(42),
            }
        }
    };
    let correction = match args.correction {
        CorrectionKind::Holm => Correction::Holm,
        CorrectionKind::Bonferroni => Correction::Bonferroni,
        CorrectionKind::None => Correction::None,
    };
    let mut paths = args.runs.clone();
    if let Some(b) = &args.baseline {
        match paths.iter().position(|p| p == b) {
            Some(i) => {
                let b = paths.remove(i);
                paths.insert(0, b);
            }
            None => paths.insert(0, b.clone()),
        }
    }
    for (i, p) in paths.iter().enumerate() {
        if paths[..i].contains(p) {
            bail!("{}: run given twice", p.display());
        }
    }
    let qrels = read_qrels(&args.qrels)?;
    let mut scored = Vec::with_capacity(paths.len());
    for p in &paths {
        scored.push(score(p, &qrels, &args.qrels)?);
    }
    let n = qrels.len();
    if scored.len() > 1 && n < 2 {
        bail!(
            "{}: significance tests need at least 2 judged queries, got {n}",
            args.qrels.display()
        );
    }

    // tests[run index - 1][metric]
    let column = |s: &Scored, m: Metric| -> Vec<f64> {
        s.eval.per_query.values().map(|q| q.get(m)).collect()
    };
    let mut tests: Vec<BTreeMap<Metric, Tested>> =
        (1..scored.len()).map(|_| BTreeMap::new()).collect();
    for m in Metric::ALL {
        let base = column(&scored[0], m);
        let mut results = Vec::new();
        for s in &scored[1..] {
            let r = test.run(&column(s, m), &base).with_context(|| {
                format!(
                    "testing {} against {} on {m}",
                    s.path.display(),
                    scored[0].path.display()
                )
            })?;
            results.push(r);
        }
        let raw: Vec<f64> = results.iter().map(|r| r.p_value).collect();
        let adjusted = correction.adjust(&raw);
        for (i, r) in results.iter().enumerate() {
            tests[i].insert(
                m,
                Tested {
                    statistic: r.statistic,
                    mean_difference: r.mean_difference,
                    p: r.p_value,
                    p_adjusted: adjusted[i],
                },
            );
        }
    }

    if args.json {
        let runs: Vec<Value> = scored
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut o = json!({
                    "run": s.path.display().to_string(),
                    "baseline": i == 0,
                    "metrics": s.eval.mean,
                    "judged_without_results": s.without_results,
                    "unjudged_ignored": s.unjudged,
                });
                if i > 0 {
                    let mut t = Map::new();
                    for (m, r) in &tests[i - 1] {
                        t.insert(
                            m.name().to_string(),
                            json!({
                                "statistic": finite_or_null(r.statistic),
                                "mean_difference": r.mean_difference,
                                "p_value": r.p,
                                "p_adjusted": r.p_adjusted,
                                "significant": r.p_adjusted < args.alpha,
                            }),
                        );
                    }
                    o["tests"] = Value::Object(t);
                }
                o
            })
            .collect();
        let mut out = json!({
            "qrels": args.qrels.display().to_string(),
            "queries": n,
            "baseline": scored[0].path.display().to_string(),
            "test": match args.test { TestKind::T => "t", TestKind::Randomization => "randomization" },
            "correction": correction.name(),
            "alpha": args.alpha,
            "runs": runs,
        });
        if let PairedTest::Randomization { permutations, seed } = test {
            out["permutations"] = json!(permutations);
            out["seed"] = json!(seed);
        }
        println!("{out}");
        return Ok(());
    }

    for s in &scored {
        if let Some(note) = s.note() {
            eprintln!("note: {note}");
        }
    }
    let names: Vec<String> = scored
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(15);
    let mut header = format!("{:<width$}", "run");
    for m in Metric::ALL {
        header.push_str(&format!("  {:>8}", m.name()));
    }
    println!("{header}");
    for (i, (s, name)) in scored.iter().zip(&names).enumerate() {
        let mut line = format!("{name:<width$}");
        for m in Metric::ALL {
            let mark = if i > 0 && tests[i - 1][&m].p_adjusted < args.alpha {
                "†"
            } else {
                " "
            };
            line.push_str(&format!("  {:>7.4}{mark}", s.eval.mean.get(m)));
        }
        println!("{}", line.trim_end());
        if i > 0 {
            let mut line = format!("{:<width$}", "  p (corrected)");
            for m in Metric::ALL {
                line.push_str(&format!("  {:>7} ", format_p(tests[i - 1][&m].p_adjusted)));
            }
            println!("{}", line.trim_end());
        }
    }
    println!();
    if scored.len() > 1 {
        let family = scored.len() - 1;
        println!(
            "† p < {} against the baseline {} ({}, {} correction over {family} comparison{} per metric); {n} judged queries",
            args.alpha,
            names[0],
            test.describe(),
            correction.name(),
            if family == 1 { "" } else { "s" },
        );
    } else {
        println!("{n} judged queries (one run: nothing to test)");
    }
    Ok(())
}

/// JSON has no infinities: an infinite statistic (zero-variance differences)
/// becomes `null`.
fn finite_or_null(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

/// A p-value for the table: four decimals, or `<.0001` below that.
fn format_p(p: f64) -> String {
    if p < 1e-4 {
        "<.0001".to_string()
    } else {
        format!("{p:.4}")
    }
}
