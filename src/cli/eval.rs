//! `rosetta trec-eval` and `rosetta compare`: scoring TREC runs against qrels
//! with trec_eval's conventions, and comparing runs or sessions with paired
//! significance tests (the engine's [`rosetta::eval::compare`] table).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use serde_json::json;

use rosetta::eval::compare::{
    self, render_drill_downs, CompareOptions, Comparison, System, TableFormat, Task,
};
use rosetta::eval::{evaluate, Bootstrap, Correction, Evaluation, Metric, PairedTest, Qrels, Run};
use rosetta::session::evaluate::{PairedTask, Split as EvalSplit, DEFAULT_BLI_SEED};
use rosetta::session::Workbench;

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
    /// A document judged twice for one query in the qrels is an error, not a warning.
    #[arg(long)]
    pub strict: bool,
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

/// The task `rosetta compare --sessions` scores each session on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareTaskKind {
    /// Each workspace's ad-hoc task, per judged query (every metric).
    Adhoc,
    /// Parallel sentence retrieval on --split, per pair (MRR, P@1).
    Sentence,
    /// Lexicon induction on the dictionary's test part, per source word (P@1, P@5, P@10).
    Bli,
}

/// How `compare --task bli` ranks the target words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BliRetrieval {
    /// The model's own similarity (the cosine for most models; `eval`'s first figures).
    Cosine,
    /// CSLS (cross-domain similarity local scaling).
    Csls,
}

/// Output format of `rosetta compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatKind {
    /// Aligned plain text.
    Text,
    /// GitHub Markdown.
    #[value(alias = "markdown")]
    Md,
    /// Comma-separated values.
    Csv,
    /// Tab-separated values.
    Tsv,
    /// One JSON object (as --json).
    Json,
}

/// Arguments of `rosetta compare`.
#[derive(Debug, Args)]
#[command(after_help = "\
Two forms, one table:
  rosetta compare RUN... --qrels QRELS      TREC run files scored against qrels
  rosetta compare --sessions DIR...         session folders, each scored on its own
                                            workspace's ad-hoc task (model alone),
                                            or with --task sentence|bli on parallel
                                            sentence retrieval (per pair) or lexicon
                                            induction (per dictionary test word)
Rows are labelled by file name; sessions by their name (rosetta jobs
rename), else folder name. Each system is tested against the baseline on
the queries both were scored on, only when it was scored on the baseline's
task (the same queries, the same judgements); ▲/▼ mark a significantly better/
worse mean (corrected p < --alpha), as in the workbench's Compare screen. The
text and Markdown tables also give the corrected p-values and per-query
wins/ties/losses against the baseline (a tie: values within 1e-9) and each
mean difference with its 95% interval (paired bootstrap over the queries,
--resamples, --seed) and effect size d (Cohen's d_z: the mean difference over
the standard deviation of the per-query differences); every
table says what its figures are over (task, split, judged queries).
--per-query N lists, per system, the N queries on which it differs most from
the baseline on --metric (with CSV/TSV output: only those lists, one row per
query). Sessions' per-query ad-hoc scores are cached in each session folder
(adhoc-scores.json), recomputed when the session or its workspace changes;
sentence and lexicon-induction scores are computed afresh and record
nothing in the sessions (an encoder session may cache its term vectors,
as eval does).

  rosetta compare --sessions A B --task sentence --test randomization
  rosetta compare --sessions A B --task bli --bli-retrieval csls --out bli.md")]
pub struct CompareArgs {
    /// TREC run files to compare (the first is the baseline unless
    /// --baseline names one); needs --qrels.
    #[arg(required_unless_present_any = ["sessions", "sweep"], conflicts_with_all = ["sessions", "sweep"])]
    pub runs: Vec<PathBuf>,
    /// TREC qrels file the runs are scored against.
    #[arg(long, conflicts_with = "sessions")]
    pub qrels: Option<PathBuf>,
    /// A document judged twice for one query in the qrels is an error, not a warning.
    #[arg(long, requires = "qrels")]
    pub strict: bool,
    /// The workspace whose ad-hoc task the runs answer: --per-query then
    /// shows each query's text and label (a Bible verse's reference) as a
    /// session comparison does. Its query ids must be the qrels' ids.
    #[arg(long, value_name = "FILE", requires = "qrels")]
    pub workspace: Option<PathBuf>,
    /// Session folders to compare instead of runs, each on its own
    /// workspace's ad-hoc task (the first is the baseline unless --baseline
    /// names one). Paths that are no session folder (`sessions/*` also
    /// names `sessions/README.md`) are left out with a note. Only sessions
    /// on the baseline's task (same queries, same judgements) are tested
    /// against it; the others are shown untested, with the reason.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub sessions: Vec<PathBuf>,
    /// With --sessions or --sweep: encode an encoder session's collection in
    /// the foreground (with progress) when it has no index yet and that
    /// would take more than 10 s; without it such a comparison is refused
    /// with the estimate and the `rosetta index build` command.
    #[arg(long)]
    pub build: bool,
    /// A sweep's points compared (`rosetta sweep`; its id as `rosetta jobs`
    /// shows it): each session under --root labelled by the settings that
    /// vary (and its seed when points have several), the first the baseline
    /// unless --baseline names one of its folders. Paired tests only where
    /// the task is the baseline's, as with --sessions.
    #[arg(long, value_name = "SWEEP", conflicts_with = "sessions")]
    pub sweep: Option<String>,
    /// The sessions folder holding the sweep.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "sessions",
        requires = "sweep"
    )]
    pub root: PathBuf,
    /// The run (or session folder) the others are tested against (added to
    /// the list if not in it; default: the first).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Metrics to show, comma-separated (MRR, MAP, P@1, P@5, P@10, R@100,
    /// nDCG@1, nDCG@5, nDCG@10, Top1; trec_eval names work too) [default:
    /// all; with --task sentence MRR and P@1, with --task bli P@1, P@5, P@10].
    #[arg(long, value_delimiter = ',', value_parser = parse_metric)]
    pub metrics: Vec<Metric>,
    /// Paired significance test over the queries both were scored on.
    #[arg(long, value_enum, default_value = "t")]
    pub test: TestKind,
    /// Random sign flips for `--test randomization` (all 2^n of them when
    /// that is fewer) [default: 10000].
    #[arg(long)]
    pub permutations: Option<usize>,
    /// Seed of the randomisation test's and the bootstrap's generators
    /// [default: 42].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Resamples of the paired bootstrap giving each difference from the
    /// baseline its 95% interval.
    #[arg(long, default_value_t = 10_000)]
    pub resamples: usize,
    /// Correction of the p-values over the comparisons with the baseline
    /// (one family per metric).
    #[arg(long, value_enum, default_value = "holm")]
    pub correction: CorrectionKind,
    /// Significance level for the ▲/▼ marks, after correction.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Output format [default: from --out's extension (.txt, .md, .csv,
    /// .tsv, .json), else text].
    #[arg(long, value_enum)]
    pub format: Option<FormatKind>,
    /// Print one JSON object (each system's means, tests and counts): --format json.
    #[arg(long)]
    pub json: bool,
    /// Write the table to this file instead of standard output (the format
    /// follows its extension unless --format is given).
    #[arg(long, visible_alias = "export", value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Also list, per system, the N queries on which it differs most from
    /// the baseline on --metric (query, text where known, baseline value,
    /// system value, difference); 0 lists every paired query.
    #[arg(long, value_name = "N")]
    pub per_query: Option<usize>,
    /// The metric of --per-query [default: the first of --metrics].
    #[arg(long, requires = "per_query", value_parser = parse_metric)]
    pub metric: Option<Metric>,
    /// Instead of the table, each session's ranking of the judged query
    /// QID (its id, as --per-query lists it), by the model alone: its best
    /// --k documents, ✓ on those judged relevant, and where every relevant
    /// document came (the workbench's rankings view). Sessions only.
    #[arg(long, value_name = "QID", requires = "sessions")]
    pub rankings: Option<String>,
    /// Documents per ranking of --rankings.
    #[arg(long, default_value_t = 10, requires = "rankings")]
    pub k: usize,
    /// What sessions are compared on, query by query: `adhoc` (each
    /// workspace's ad-hoc task, every metric), `sentence` (parallel
    /// sentence retrieval on --split: per pair its reciprocal rank and P@1,
    /// ties counted against the answer, as `rosetta eval`), `bli` (lexicon
    /// induction on the test part of the workspace dictionary's --bli-seed
    /// split: per source word P@1, P@5, P@10 by --bli-retrieval). Pairs and
    /// words are paired only when both sessions' workspaces give the same
    /// split (the same texts in the same order) or the same test part;
    /// otherwise the session is shown untested with the reason. A BM25
    /// session is compared on `sentence` by its own ranking and left out of
    /// `bli` with the reason (it has no term space).
    #[arg(long, value_enum, default_value = "adhoc")]
    pub task: CompareTaskKind,
    /// The split of --task sentence [default: test].
    #[arg(long, value_enum)]
    pub split: Option<super::apply::Split>,
    /// Seed of the dictionary split whose test part --task bli scores (as
    /// `rosetta eval --bli-seed`) [default: 1].
    #[arg(long, value_name = "N")]
    pub bli_seed: Option<u64>,
    /// How --task bli ranks the target words: the model's similarity
    /// (`cosine`, `eval --task bli`'s first figures) or CSLS [default: cosine].
    #[arg(long, value_enum)]
    pub bli_retrieval: Option<BliRetrieval>,
}

fn parse_metric(s: &str) -> Result<Metric, String> {
    s.trim().parse::<Metric>().map_err(|e| e.to_string())
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

/// Reads qrels, printing duplicate or contradictory judgements as warnings
/// (errors with `strict`), and refuses empty ones.
fn read_qrels(path: &Path, strict: bool) -> anyhow::Result<Qrels> {
    let (qrels, warnings) = Qrels::read_checked(path, strict)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    if qrels.is_empty() {
        bail!("{}: no judgements", path.display());
    }
    Ok(qrels)
}

/// `rosetta trec-eval RUN QRELS`.
pub fn trec_eval(args: TrecEvalArgs) -> anyhow::Result<()> {
    let qrels = read_qrels(&args.qrels, args.strict)?;
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

/// The texts and labels (where the collection has them) of the queries of
/// workspace `path`'s ad-hoc task, by id; an error when none of its query
/// ids is judged in `qrels` (another task's workspace).
fn workspace_queries(
    path: &Path,
    qrels: &Qrels,
) -> anyhow::Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    let ws = rosetta::corpus::workspace::Workspace::load(path)?;
    let task = rosetta::corpus::collection::AdhocTask::load(&ws)?;
    let ids = &task.queries.ids;
    if !ids.iter().any(|q| qrels.judgements.contains_key(q)) {
        bail!(
            "--workspace {}: none of its {} ad-hoc queries (ids like {:?}) is judged in the qrels; \
             is it the workspace these runs were made on?",
            path.display(),
            ids.len(),
            ids.first().map(String::as_str).unwrap_or("")
        );
    }
    let texts = ids
        .iter()
        .cloned()
        .zip(task.queries.texts.iter().cloned())
        .collect();
    let labels = match &task.query_labels {
        Some(l) => ids.iter().cloned().zip(l.iter().cloned()).collect(),
        None => BTreeMap::new(),
    };
    Ok((texts, labels))
}

/// `rosetta compare RUN... --qrels QRELS` or `rosetta compare --sessions DIR...`.
pub fn compare(args: CompareArgs) -> anyhow::Result<()> {
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        bail!("--alpha must lie in (0, 1), got {}", args.alpha);
    }
    let test = match args.test {
        TestKind::T => {
            if args.permutations.is_some() {
                bail!("--permutations applies only to --test randomization");
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
    let format = match (args.json, args.format) {
        (true, None | Some(FormatKind::Json)) => TableFormat::Json,
        (true, Some(other)) => bail!(
            "--json conflicts with --format {}",
            other
                .to_possible_value()
                .map_or("?".into(), |v| v.get_name().to_string())
        ),
        (false, None) => match &args.out {
            None => TableFormat::Text,
            Some(p) => TableFormat::from_path(p).ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: cannot tell the format from the extension (.txt, .md, .csv, .tsv, .json); give --format",
                    p.display()
                )
            })?,
        },
        (false, Some(FormatKind::Text)) => TableFormat::Text,
        (false, Some(FormatKind::Md)) => TableFormat::Markdown,
        (false, Some(FormatKind::Csv)) => TableFormat::Csv,
        (false, Some(FormatKind::Tsv)) => TableFormat::Tsv,
        (false, Some(FormatKind::Json)) => TableFormat::Json,
    };
    if args.resamples == 0 {
        bail!("--resamples must be at least 1");
    }
    let sessions = !args.sessions.is_empty() || args.sweep.is_some();
    if args.build && !sessions {
        bail!("--build applies to --sessions or --sweep (run files are scored as they are)");
    }
    let task = paired_task(&args, sessions)?;
    let options = CompareOptions {
        bootstrap: Bootstrap {
            resamples: args.resamples,
            seed: args.seed.unwrap_or(42),
        },
        test,
        correction: match args.correction {
            CorrectionKind::Holm => Correction::Holm,
            CorrectionKind::Bonferroni => Correction::Bonferroni,
            CorrectionKind::None => Correction::None,
        },
        alpha: args.alpha,
        metrics: if args.metrics.is_empty() {
            task.metrics().to_vec()
        } else {
            args.metrics.clone()
        },
    };
    task.check_metrics(&options.metrics)?;
    let mut skipped_paths = Vec::new();
    // a sweep's sessions, labelled by their varying settings
    let sweep_labels: Option<Vec<(String, PathBuf)>> = match &args.sweep {
        Some(id) => Some(rosetta::jobs::sweep::find(&args.root, id)?.labelled()),
        None => None,
    };
    let mut paths = if let Some(l) = &sweep_labels {
        l.iter().map(|(_, p)| p.clone()).collect()
    } else if sessions {
        // a shell glob (`sessions/*`) also names files and folders that are
        // no sessions: they are left out with a note
        let (keep, skip): (Vec<PathBuf>, Vec<PathBuf>) = args
            .sessions
            .iter()
            .cloned()
            .partition(|p| rosetta::session::runs::is_session_dir(p));
        skipped_paths = skip;
        keep
    } else {
        args.runs.clone()
    };
    for p in &skipped_paths {
        eprintln!(
            "note: {} left out: not a session folder (no config.toml or status.json)",
            p.display()
        );
    }
    if sessions && paths.is_empty() {
        bail!("none of the paths given to --sessions is a session folder");
    }
    if let Some(b) = &args.baseline {
        // a baseline among a sweep's folders, however spelled, is that folder
        let b = &match &sweep_labels {
            Some(_) => {
                let want = std::fs::canonicalize(b)
                    .with_context(|| format!("--baseline {}: cannot find it", b.display()))?;
                paths
                    .iter()
                    .find(|p| std::fs::canonicalize(p).is_ok_and(|c| c == want))
                    .cloned()
                    .unwrap_or_else(|| b.clone())
            }
            None => b.clone(),
        };
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
            bail!("{}: given twice", p.display());
        }
    }
    // sessions by their names (`rosetta jobs rename`), runs by file name
    let labels = if let Some(l) = &sweep_labels {
        // a --baseline outside the sweep keeps its session name
        paths
            .iter()
            .map(|p| match l.iter().find(|(_, d)| d == p) {
                Some((label, _)) => label.clone(),
                None => rosetta::session::runs::session_labels(std::slice::from_ref(p))
                    .pop()
                    .unwrap_or_default(),
            })
            .collect()
    } else if sessions {
        rosetta::session::runs::session_labels(&paths)
    } else {
        compare::labels(&paths)
    };
    if let Some(qid) = &args.rankings {
        if args.out.is_some() || args.per_query.is_some() {
            bail!("--rankings prints to standard output, without --out or --per-query");
        }
        return print_rankings(&paths, &labels, qid, args.k, format);
    }
    let progress = super::progress::Progress::start("comparing");
    let table = if sessions {
        let labelled: Vec<(String, PathBuf)> = labels.iter().cloned().zip(paths).collect();
        let table = Workbench::new()
            .with_encode_limit(super::index::encode_limit(args.build)?)
            .compare_on(
                task,
                &labelled,
                Some(&labels[0]),
                &options,
                false,
                &|f, what| progress.update(f, what),
            );
        drop(progress);
        table?
    } else {
        let Some(qrels_path) = &args.qrels else {
            bail!("comparing runs needs --qrels QRELS (or give --sessions DIR...)");
        };
        let qrels = read_qrels(qrels_path, args.strict)?;
        let task = Task {
            name: format!("qrels {}", qrels_path.display()),
            split: None,
            queries: qrels.judgements.len(),
            judgements: compare::judgements_fingerprint(&qrels.judgements, &BTreeMap::new()),
            collection: String::new(),
        };
        let (texts, query_labels) = match &args.workspace {
            Some(w) => workspace_queries(w, &qrels)?,
            None => Default::default(),
        };
        let mut systems = Vec::with_capacity(paths.len());
        let mut notes = Vec::new();
        for (i, (p, label)) in paths.iter().zip(&labels).enumerate() {
            progress.update(
                i as f64 / paths.len() as f64,
                &format!("reading {label} ({}/{})", i + 1, paths.len()),
            );
            let s = score(p, &qrels, qrels_path)?;
            notes.extend(s.note());
            systems.push(System {
                name: label.clone(),
                detail: String::new(),
                task: task.clone(),
                per_query: s.eval.per_query,
                texts: texts.clone(),
                labels: query_labels.clone(),
            });
        }
        drop(progress);
        let mut t = Comparison::build(&systems, Some(&labels[0]), &options)?;
        t.notes = notes;
        t
    };
    let drill = args.per_query.map(|n| {
        let metric = args.metric.unwrap_or(options.metrics[0]);
        table.drill_downs(metric, n)
    });
    if matches!(format, TableFormat::Csv | TableFormat::Tsv) {
        // CSV has no room for them
        for n in &table.notes {
            eprintln!("note: {n}");
        }
    }
    let text = match (&drill, format) {
        (None, _) => table.render(format),
        (Some(d), TableFormat::Csv | TableFormat::Tsv) => render_drill_downs(d, format),
        (Some(d), TableFormat::Json) => {
            let mut j = serde_json::to_value(&table)?;
            j["per_query"] = serde_json::to_value(d)?;
            format!("{j}\n")
        }
        (Some(d), _) => format!(
            "{}\n{}",
            table.render(format),
            render_drill_downs(d, format)
        ),
    };
    // names, query and document texts come from workspaces and sessions:
    // their terminal control sequences go (JSON escapes them already)
    let text = match format {
        TableFormat::Json => text,
        _ => rosetta::util::strip_controls(&text).into_owned(),
    };
    match &args.out {
        Some(p) => {
            rosetta::util::write_atomic(p, text.as_bytes())?;
            eprintln!("wrote {}", p.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// The task `compare` scores sessions on, from `--task` and its options;
/// an error for an option of another task, or a task other than the
/// ad-hoc one for runs.
fn paired_task(args: &CompareArgs, sessions: bool) -> anyhow::Result<PairedTask> {
    if args.task != CompareTaskKind::Adhoc && !sessions {
        bail!("--task sentence and bli compare sessions (--sessions or --sweep); runs are scored on their qrels");
    }
    if args.split.is_some() && args.task != CompareTaskKind::Sentence {
        bail!("--split applies to --task sentence");
    }
    if (args.bli_seed.is_some() || args.bli_retrieval.is_some())
        && args.task != CompareTaskKind::Bli
    {
        bail!("--bli-seed and --bli-retrieval apply to --task bli");
    }
    if args.rankings.is_some() && args.task != CompareTaskKind::Adhoc {
        bail!("--rankings shows ad-hoc rankings: it applies to --task adhoc");
    }
    Ok(match args.task {
        CompareTaskKind::Adhoc => PairedTask::Adhoc,
        CompareTaskKind::Sentence => PairedTask::Sentence(match args.split {
            Some(super::apply::Split::Valid) => EvalSplit::Valid,
            Some(super::apply::Split::Test) | None => EvalSplit::Test,
        }),
        CompareTaskKind::Bli => PairedTask::Bli {
            seed: args.bli_seed.unwrap_or(DEFAULT_BLI_SEED),
            csls: args.bli_retrieval == Some(BliRetrieval::Csls),
        },
    })
}

/// `compare --sessions ... --rankings QID`: each session's ranking of one
/// judged query, as text (one block per session) or JSON.
fn print_rankings(
    dirs: &[PathBuf],
    labels: &[String],
    qid: &str,
    k: usize,
    format: TableFormat,
) -> anyhow::Result<()> {
    if k == 0 {
        bail!("--k must be at least 1");
    }
    let wb = Workbench::new();
    let mut all = Vec::with_capacity(dirs.len());
    for (d, l) in dirs.iter().zip(labels) {
        let r = wb
            .judged_ranking(d, qid, k)
            .map_err(|e| anyhow::anyhow!("{l}: {e}"))?;
        all.push((l, r));
    }
    match format {
        TableFormat::Json => {
            let v: Vec<_> = all
                .iter()
                .map(|(l, r)| json!({ "system": l, "ranking": r }))
                .collect();
            println!("{}", json!({ "query": qid, "systems": v }));
        }
        TableFormat::Text => {
            // workspace texts and names, their control sequences removed
            let mut out = String::new();
            macro_rules! out_line {
                ($($t:tt)*) => {{
                    out.push_str(&format!($($t)*));
                    out.push('\n');
                }};
            }
            for (l, r) in &all {
                out_line!("{l}: {} ({}) {}", r.label, r.qid, r.text);
                for h in &r.hits {
                    out_line!(
                        "  {:>3} {} {:.4}  {}",
                        h.rank,
                        if h.relevant { "✓" } else { "·" },
                        h.score,
                        h.label
                    );
                }
                let where_: Vec<String> = r
                    .relevant
                    .iter()
                    .map(|(d, p)| match p {
                        Some(p) => format!("{d} at {p}"),
                        None => format!("{d} below {}", r.depth),
                    })
                    .collect();
                out_line!("  relevant: {}\n", where_.join(", "));
            }
            print!("{}", rosetta::util::strip_controls(&out));
        }
        _ => bail!("--rankings prints text or JSON"),
    }
    Ok(())
}
