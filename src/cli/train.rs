//! `rosetta train`, `rosetta jobs`, `rosetta cancel`: training jobs in
//! session folders (engine: `rosetta::jobs`, `rosetta::session`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand};

use super::slurm_args::SlurmArgs;
use rosetta::jobs::slurm::{self, SlurmOptions, SlurmRecord};
use rosetta::jobs::sweep;
use rosetta::jobs::{self, JobRequest, Launcher};
use rosetta::session::runs::{self, RunFilter, RunIndex};
use rosetta::session::{Session, State, Status};
use rosetta::train::runner::{cancel_on_signals, Observer, Quiet};

/// Arguments of `rosetta train`.
#[derive(Debug, Args)]
#[command(after_long_help = rosetta::models::registry::settings_help())]
pub struct TrainArgs {
    /// Workspace file (workspace.toml) to train on.
    #[arg(long, value_name = "FILE", required_unless_present = "resume")]
    pub workspace: Option<PathBuf>,
    #[arg(long, value_name = "NAME", required_unless_present = "resume", help = model_help())]
    pub model: Option<String>,
    /// Dimension of the shared space (`--set dim=`); default: the model's (128 for most).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Training epochs (`--set epochs=`); default: the model's.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Minibatch size in pairs (`--set batch=`); default: the model's (100 for most).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Learning rate (`--set lr=`); default: the model's.
    #[arg(long)]
    pub lr: Option<f64>,
    /// Random seed (initialisation, shuffling).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Device: auto (CUDA GPU 0 if this build has CUDA and one answers, else CPU), cpu, cuda or cuda:<i>.
    #[arg(long, default_value = "auto")]
    pub device: rosetta::models::DeviceSpec,
    /// Session folder to create (default: sessions/<model>-<UTC timestamp>).
    #[arg(long, value_name = "DIR")]
    pub session: Option<PathBuf>,
    /// A hyper-parameter, KEY=VALUE (repeatable). Runner settings: patience=N (early stopping,
    /// default 5), log_every=N (step records, default 10), valid_sample=N (validate on a seeded
    /// sample of N pairs, default 0: all), step_delay_ms=N (test-only slow-down).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run in the background (own session, survives the terminal): print the session folder
    /// and return; all output goes to its log.txt.
    #[arg(long)]
    pub detach: bool,
    /// Most memory the job may need, like 512M, 8G or 1T (bytes without a suffix); a job whose
    /// estimate (from its settings and vocabularies) is larger is refused before its session
    /// is written. Default: this machine's memory (or its control group's limit).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,
    /// Continue the session in DIR from its last checkpoint (or start a queued one).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["workspace", "model", "dim", "epochs", "batch", "lr", "session", "set", "max_memory"]
    )]
    pub resume: Option<PathBuf>,
    /// Internal: run without terminal output (used by --detach).
    #[arg(long, hide = true)]
    pub background: bool,
    /// Where the job runs: `local` (this machine) or `slurm` (a batch job running this session
    /// from the sessions folder, which the nodes must see; returns at once, as --detach does).
    /// Default: local; `--resume` of a Slurm session resubmits it.
    #[arg(long, value_name = "WHERE", value_parser = ["local", "slurm"])]
    pub on: Option<String>,
    #[command(flatten)]
    pub slurm: SlurmArgs,
}

/// Arguments of `rosetta jobs`: the table of sessions, or an action on one.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub action: Option<JobsAction>,
    /// Folder holding the session folders.
    #[arg(long, default_value = "sessions")]
    pub root: PathBuf,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Add a column for each setting that differs between the listed sessions (lr, dim, seed...).
    #[arg(long)]
    pub diff: bool,
    /// Only the sessions matching EXPR: words that must all match; a plain word is searched in
    /// name, folder, model, workspace, state, tags and note; KEY=VALUE / KEY!=VALUE compare a
    /// setting (lr=0.01), tag=T or state=done; KEY>X, >=, <, <= a best figure or numeric
    /// setting (mrr>0.5, loss<0.4, dim>=256).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// List the sessions of this sweep one by one (the table shows each sweep as one group).
    #[arg(long, value_name = "ID")]
    pub sweep: Option<String>,
    /// Sort the table by a column: name, model, state, mrr (the best validation MRR) or a
    /// setting (lr, dim...); numbers as numbers, sessions without the value last. Append `:desc`
    /// for descending (`--sort mrr:desc`). Default: folder order.
    #[arg(long, value_name = "COLUMN[:desc]")]
    pub sort: Option<String>,
}

/// `rosetta jobs` actions on one session folder.
#[derive(Debug, Subcommand)]
pub enum JobsAction {
    /// Show a session: state, name, tags and note, best figures, checkpoints, config and the
    /// end of its log.
    Show {
        /// Session folder.
        session: PathBuf,
        /// Lines of log.txt to show.
        #[arg(long, default_value_t = 20)]
        lines: usize,
    },
    /// Print the end of a session's log.txt; with --follow, keep printing what the job writes
    /// until it ends (as `tail -f`, stopping by itself).
    Log {
        /// Session folder.
        session: PathBuf,
        /// Lines to print first (0: only what comes next).
        #[arg(long, default_value_t = 20)]
        lines: usize,
        /// Keep printing new lines until the job is done, failed or cancelled or its process is
        /// gone (Ctrl-C stops following, not the job).
        #[arg(long, short = 'f')]
        follow: bool,
    },
    /// Give a session a display name (kept in its meta.json; "" goes back to the folder name).
    Rename {
        /// Session folder.
        session: PathBuf,
        /// The new name.
        name: String,
    },
    /// Add tags to a session (or remove them with --remove).
    Tag {
        /// Session folder.
        session: PathBuf,
        /// Tags (one word each).
        #[arg(required = true)]
        tags: Vec<String>,
        /// Remove these tags instead.
        #[arg(long)]
        remove: bool,
    },
    /// Set a session's note ("" removes it).
    Note {
        /// Session folder.
        session: PathBuf,
        /// The note.
        text: String,
    },
    /// Delete a session: its own files, then its folder (refused while its job runs, for a
    /// folder that is not a Rosetta session, and for one holding files a session does not
    /// write). Asks first unless --yes.
    Delete {
        /// Session folder.
        session: PathBuf,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
}

/// Arguments of `rosetta cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Session folder of the running job.
    pub session: PathBuf,
    /// Seconds to wait for the job to record `cancelled`.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

fn model_help() -> String {
    format!(
        "Model to train: {} (settings and defaults: see the end of `rosetta train --help`)",
        rosetta::models::registry::names()
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `rosetta train`.
pub fn train(args: TrainArgs) -> anyhow::Result<()> {
    // a Slurm session's record, when resuming one (not from inside its job)
    let slurm_rec = match &args.resume {
        Some(dir) if !args.background => SlurmRecord::read(dir)?,
        _ => None,
    };
    let on_slurm = match args.on.as_deref() {
        Some("slurm") => true,
        Some(_) => {
            if let (Some(dir), Some(_)) = (&args.resume, &slurm_rec) {
                bail!(
                    "{}: a Slurm session runs on Slurm (leave out --on local to resubmit it)",
                    dir.display()
                );
            }
            false
        }
        None => slurm_rec.is_some(),
    };
    if !on_slurm && args.slurm.given() {
        bail!("--partition, --gres, --time, --account, --sbatch-arg and --rosetta-bin need --on slurm");
    }
    if on_slurm {
        let exe = args.slurm.exe()?;
        // what the record may give a resubmission, never its extra arguments
        let base = match slurm_rec {
            Some(r) => {
                let (base, dropped) = r.resubmit_options();
                if !dropped.is_empty() && args.slurm.sbatch_arg.is_empty() {
                    eprintln!(
                        "note: not replaying the sbatch arguments recorded in slurm.json ({}); \
                         give them again with --sbatch-arg",
                        clean(&dropped.join(" "))
                    );
                }
                base
            }
            None => SlurmOptions::default(),
        };
        let launcher = Launcher::Slurm(args.slurm.options(base));
        let launched = match &args.resume {
            Some(dir) => jobs::resume_on(dir, &exe, &launcher)?,
            None => jobs::start_on(&request(&args)?, &exe, &launcher)?,
        };
        eprintln!(
            "submitted Slurm job {}; follow it with `rosetta jobs`",
            launched
                .slurm
                .map(|j| j.to_string())
                .unwrap_or_else(|| "?".into())
        );
        println!("{}", launched.dir.display());
        return Ok(());
    }
    if args.detach {
        let exe = std::env::current_exe().context("cannot find the rosetta executable")?;
        let launched = match &args.resume {
            Some(dir) => jobs::resume(dir, &exe)?,
            None => jobs::start(&request(&args)?, &exe)?,
        };
        eprintln!(
            "started job (pid {}); follow it with `rosetta jobs`",
            launched.pid
        );
        println!("{}", launched.dir.display());
        return Ok(());
    }
    let session = match &args.resume {
        Some(dir) => Session::open(dir)?,
        None => jobs::create(&request(&args)?)?,
    };
    run_session(session, args.background)
}

/// The engine's request for `rosetta train`'s arguments (not `--resume`).
fn request(args: &TrainArgs) -> anyhow::Result<JobRequest> {
    let mut settings = jobs::parse_settings(&args.set)?;
    for (k, v) in [
        ("dim", args.dim.map(|x| x.to_string())),
        ("epochs", args.epochs.map(|x| x.to_string())),
        ("batch", args.batch.map(|x| x.to_string())),
        ("lr", args.lr.map(|x| x.to_string())),
    ] {
        if let Some(v) = v {
            if settings.insert(k.to_string(), v).is_some() {
                bail!("{k} given both as --{k} and --set {k}=");
            }
        }
    }
    Ok(JobRequest {
        workspace: args.workspace.clone().expect("clap: required"),
        model: args.model.clone().expect("clap: required"),
        settings,
        seed: args.seed,
        device: args.device,
        session: args.session.clone(),
        root: PathBuf::from("sessions"),
        max_memory: args.max_memory,
    })
}

/// `--max-memory`'s SIZE: bytes, or a number with K, M, G or T (powers of 1024).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&t[..i], t[i..].trim_end_matches(['B', 'b', 'i'])),
        None => (t, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("`{s}`: expected a size like 512M, 8G or 1T")),
    };
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}`: expected a size like 512M, 8G or 1T"))?;
    let b = x * (1u64 << shift) as f64;
    if !(b.is_finite() && b >= 1.0 && b < u64::MAX as f64) {
        return Err(format!("`{s}`: out of range"));
    }
    Ok(b as u64)
}

fn run_session(mut session: Session, background: bool) -> anyhow::Result<()> {
    // first, so that a SIGTERM while the data loads cancels cleanly too
    let cancel = cancel_on_signals()?;
    let mut bar;
    let mut quiet = Quiet;
    let observer: &mut dyn Observer = if background {
        &mut quiet
    } else {
        bar = Bar::new();
        &mut bar
    };
    let outcome = jobs::run(&mut session, observer, cancel)?;
    let dir = session.dir.display();
    if rosetta::models::is_lexical(&session.config.model) {
        println!(
            "done: {dir} (validation sentence-retrieval MRR {})",
            outcome
                .best_mrr
                .map(|m| format!("{m:.4}"))
                .unwrap_or_else(|| "-".into())
        );
        return Ok(());
    }
    let zero_shot = rosetta::session::read_status(&session.dir)
        .is_ok_and(|s| s.phase == rosetta::models::ZERO_SHOT_PHASE);
    if outcome.state == State::Done {
        // an encoder's collection timed now, so that the first search
        // refusing a long encoding answers at once; a failure here only
        // loses that shortcut (the search measures itself)
        if let Err(e) = rosetta::session::collection::keep_estimate(&session.dir) {
            eprintln!("note: the collection's encoding was not timed: {e}");
        }
    }
    match outcome.state {
        State::Done if zero_shot => {
            println!(
                "done: {dir} (zero-shot, validation MRR {})",
                outcome
                    .best_mrr
                    .map(|m| format!("{m:.4}"))
                    .unwrap_or_else(|| "-".into())
            );
            Ok(())
        }
        State::Done => {
            println!(
                "done: {dir} (best validation MRR {} at epoch {})",
                outcome
                    .best_mrr
                    .map(|m| format!("{m:.4}"))
                    .unwrap_or_else(|| "-".into()),
                outcome
                    .best_epoch
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "-".into())
            );
            Ok(())
        }
        State::Cancelled => {
            println!("cancelled: {dir} (continue with `rosetta train --resume {dir}`)");
            Ok(())
        }
        _ => Err(anyhow!(
            "training failed: {} (session {dir})",
            outcome.error.unwrap_or_default()
        )),
    }
}

/// The foreground progress bar and per-epoch lines.
struct Bar {
    pb: indicatif::ProgressBar,
}

impl Bar {
    fn new() -> Bar {
        let pb = indicatif::ProgressBar::new(1000);
        pb.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% {msg}",
            )
            .expect("valid template"),
        );
        Bar { pb }
    }
}

impl Observer for Bar {
    fn status(&mut self, s: &Status) {
        self.pb.set_position((s.progress * 1000.0).round() as u64);
        let mut msg = if s.phase == rosetta::models::ZERO_SHOT_PHASE {
            s.phase.clone()
        } else {
            let mut m = format!("{} epoch {}", s.phase, s.epoch.max(1));
            if s.epochs > 0 {
                m.push_str(&format!("/{}", s.epochs));
            }
            m
        };
        if let Some(v) = &s.validation {
            msg.push_str(&format!(" {}", v.describe()));
        } else {
            if let Some(p) = s.pairs_per_s {
                msg.push_str(&format!(" {p:.0} pairs/s"));
            }
            if let Some(e) = s.eta_s {
                msg.push_str(&format!(" ETA {}", fmt_secs(e)));
            }
        }
        self.pb.set_message(msg);
        if s.state.is_final() {
            self.pb.finish_and_clear();
        }
    }
    fn line(&mut self, line: &str) {
        if self.pb.is_hidden() {
            // not a terminal (piped, redirected): plain lines
            println!("{line}");
        } else {
            self.pb.println(line);
        }
    }
}

fn fmt_secs(s: f64) -> String {
    rosetta::util::fmt_duration(s.max(0.0))
}

/// `rosetta jobs`.
pub fn jobs(args: JobsArgs) -> anyhow::Result<()> {
    if let Some(action) = args.action {
        return jobs_action(action);
    }
    let filter: RunFilter = args.filter.as_deref().unwrap_or("").parse()?;
    let all = RunIndex::default().scan(&args.root)?;
    let total = all.len();
    let runs: Vec<runs::Run> = all.into_iter().filter(|r| filter.matches(r)).collect();
    // Slurm sessions: Slurm's state beside the recorded one (one squeue for all)
    let (views, slurm_problem) = slurm::views(
        &runs
            .iter()
            .map(|r| (r.entry.dir.as_path(), r.entry.status.as_ref()))
            .collect::<Vec<_>>(),
    );
    if let Some(p) = &slurm_problem {
        eprintln!("warning: {p}");
    }
    let shown_state = |r: &runs::Run| -> State {
        views
            .get(&r.entry.dir)
            .map(|v| v.combined.state)
            .unwrap_or_else(|| r.entry.state())
    };
    let sweeps = sweep::summaries(&runs, &shown_state);
    if let Some(id) = &args.sweep {
        if !sweeps.iter().any(|s| &s.id == id) {
            bail!("no sweep {id} under {}", args.root.display());
        }
    }
    // a sweep's sessions are one group in the table, unless it is the one asked for
    let member_of = |r: &runs::Run| {
        sweeps
            .iter()
            .find(|s| s.points.iter().any(|p| p.dirs.contains(&r.entry.dir)))
            .map(|s| s.id.clone())
    };
    let mut runs: Vec<runs::Run> = runs
        .into_iter()
        .filter(|r| match (&args.sweep, member_of(r)) {
            (Some(want), m) => m.as_ref() == Some(want),
            (None, m) => m.is_none() || args.json,
        })
        .collect();
    if let Some(spec) = &args.sort {
        let (key, desc) = match spec.rsplit_once(':') {
            Some((k, "desc")) => (k, true),
            Some((k, "asc")) => (k, false),
            _ => (spec.as_str(), false),
        };
        if key.is_empty() {
            bail!("--sort {spec}: name a column (name, model, state, mrr or a setting)");
        }
        runs::sort_by_column(&mut runs, desc, |r| match key {
            "name" => Some(r.name()),
            "model" => r.entry.config.as_ref().map(|c| c.model.clone()),
            "state" => Some(shown_state(r).as_str().to_string()),
            "mrr" | "best MRR" => r
                .entry
                .status
                .as_ref()
                .and_then(|s| s.best_mrr)
                .map(|m| m.to_string()),
            k => r.setting(k),
        });
    }
    let sweeps: Vec<sweep::SweepSummary> = sweeps
        .into_iter()
        .filter(|s| args.sweep.as_ref().is_none_or(|w| w == &s.id))
        .collect();
    let configs: Vec<_> = runs
        .iter()
        .filter_map(|r| r.entry.config.as_ref())
        .collect();
    let diff_keys = if args.diff {
        runs::differing_settings(&configs)
    } else {
        Vec::new()
    };
    let entries: Vec<&rosetta::session::SessionEntry> = runs.iter().map(|r| &r.entry).collect();
    if args.json {
        let rows: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                let e = &r.entry;
                let st = e.status.as_ref();
                let mut row = serde_json::json!({
                    "name": r.name(),
                    "tags": r.meta.tags,
                    "note": r.meta.note,
                    "best": r.best.iter().map(|(k, v)| (k.clone(), v.0)).collect::<std::collections::BTreeMap<_, _>>(),
                    "diverged": r.divergence,
                    "session": e.dir,
                    "state": shown_state(r).as_str(),
                    "slurm": views.get(&e.dir).map(slurm_json),
                    "sweep": rosetta::jobs::sweep::SweepMember::read(&e.dir).ok().flatten().map(|m| m.id),
                    "recorded_state": st.map(|s| s.state.as_str()),
                    "stale": st.map(|s| s.is_stale()).unwrap_or(false),
                    "model": e.config.as_ref().map(|c| c.model.clone()).or(st.map(|s| s.model.clone())),
                    "workspace": e.config.as_ref().map(|c| c.workspace.clone()).or(st.map(|s| s.workspace.clone())),
                    "device": st.map(|s| s.device.clone()),
                    "pid": st.map(|s| s.pid),
                    "progress": st.map(|s| s.progress),
                    "epoch": st.map(|s| s.epoch),
                    "epochs": st.map(|s| s.epochs),
                    "eta_s": st.and_then(|s| s.eta_s),
                    "best_mrr": st.and_then(|s| s.best_mrr),
                    "best_epoch": st.and_then(|s| s.best_epoch),
                    "error": st.and_then(|s| s.error.clone()),
                    "updated": st.map(|s| s.updated.clone()),
                    "problem": e.problem.clone().or(r.meta_problem.clone()),
                });
                // every setting (with --diff, those that differ), numbers
                // and booleans typed
                let typed = |v: Option<String>| v.map_or(serde_json::Value::Null, |v| runs::typed_value(&v));
                row["settings"] = if args.diff {
                    diff_keys
                        .iter()
                        .map(|k| (k.clone(), typed(r.setting(k))))
                        .collect::<serde_json::Map<_, _>>()
                } else {
                    e.config
                        .as_ref()
                        .map(runs::settings_map)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, typed(Some(v))))
                        .collect::<serde_json::Map<_, _>>()
                }
                .into();
                row
            })
            .collect();
        let sweeps: Vec<serde_json::Value> = sweeps.iter().map(sweep_json).collect();
        let builds = super::index::jobs_json(&args.root)?;
        println!(
            "{}",
            serde_json::json!({ "root": args.root, "sessions": rows, "sweeps": sweeps, "index_builds": builds })
        );
        return Ok(());
    }
    if entries.is_empty() && !sweeps.is_empty() {
        print_sweeps(&sweeps);
        return Ok(());
    }
    if entries.is_empty() {
        if total > 0 {
            println!(
                "no session under {} matches the filter",
                args.root.display()
            );
        } else {
            println!("no sessions under {}", args.root.display());
        }
        return Ok(());
    }
    let named = runs
        .iter()
        .any(|r| !r.meta.name.is_empty() || !r.meta.tags.is_empty());
    let mut rows = vec![vec![
        "SESSION".to_string(),
        "STATE".into(),
        "MODEL".into(),
        "WORKSPACE".into(),
        "DEVICE".into(),
        "PROGRESS".into(),
        "EPOCH".into(),
        "BEST MRR".into(),
        "ETA".into(),
    ]];
    if named {
        rows[0].insert(1, "NAME [TAGS]".into());
    }
    let any_slurm = runs.iter().any(|r| views.contains_key(&r.entry.dir));
    if any_slurm {
        rows[0].push("SLURM".into());
    }
    rows[0].extend(diff_keys.iter().map(|k| k.to_uppercase()));
    let mut notes = Vec::new();
    for (r, e) in runs.iter().zip(&entries) {
        let name = e
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let st = e.status.as_ref();
        let view = views.get(&e.dir);
        let mut state = e.state().as_str().to_string();
        if let Some(v) = view {
            // liveness from Slurm, not from a process id
            state = v.combined.label.clone();
        } else if st.is_some_and(|s| s.is_stale()) {
            state.push_str(" (stale)");
        }
        let ws = e
            .config
            .as_ref()
            .map(|c| c.workspace.clone())
            .or(st.map(|s| s.workspace.clone()))
            .map(|p| short_workspace(&p))
            .unwrap_or_else(|| "?".into());
        let mut row = vec![
            name.clone(),
            state,
            e.config
                .as_ref()
                .map(|c| c.model.clone())
                .or(st.map(|s| s.model.clone()))
                .unwrap_or_else(|| "?".into()),
            ws,
            st.map(|s| s.device.clone())
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| "-".into()),
            st.map(|s| format!("{:.0}%", s.progress * 100.0))
                .unwrap_or_else(|| "-".into()),
            st.map(|s| s.epoch_label()).unwrap_or_else(|| "-".into()),
            st.and_then(|s| {
                s.best_mrr
                    .map(|m| format!("{m:.4} @{}", s.best_epoch.unwrap_or(0)))
            })
            .unwrap_or_else(|| "-".into()),
            st.filter(|_| shown_state(r) == State::Running)
                .and_then(|s| s.eta_s)
                .map(fmt_secs)
                .unwrap_or_else(|| "-".into()),
        ];
        if named {
            let mut label = r.meta.name.clone();
            if !r.meta.tags.is_empty() {
                label.push_str(&format!(" [{}]", r.meta.tags.join(",")));
            }
            row.insert(1, label.trim().to_string());
        }
        if any_slurm {
            row.push(view.map(|v| v.describe()).unwrap_or_else(|| "-".into()));
        }
        row.extend(
            diff_keys
                .iter()
                .map(|k| r.setting(k).unwrap_or_else(|| "-".into())),
        );
        rows.push(row);
        if let Some(p) = r.meta_problem.as_ref() {
            notes.push(format!("{name}: {p}"));
        }
        if let Some(d) = &r.divergence {
            if !e.state().is_final() {
                notes.push(format!("{name}: {d}"));
            }
        }
        if let Some(p) = &e.problem {
            // a Slurm job's process is not ours to check: no stale note
            let p: Vec<&str> = p
                .split("; ")
                .filter(|x| view.is_none() || !x.starts_with("stale:"))
                .collect();
            if !p.is_empty() {
                notes.push(format!("{name}: {}", p.join("; ")));
            }
        }
        if let Some(err) = st.and_then(|s| s.error.as_ref()) {
            if shown_state(r) == State::Failed {
                notes.push(format!("{name}: {err}"));
            }
        }
    }
    // stored text (names, tags, errors, paths) never reaches the terminal
    // with its control sequences
    for r in rows.iter_mut() {
        for cell in r.iter_mut() {
            *cell = clean(cell).replace('\n', " ");
        }
    }
    print_table(&rows, "");
    for n in notes {
        println!("  {}", clean(&n));
    }
    if !sweeps.is_empty() {
        println!();
        print_sweeps(&sweeps);
    }
    let builds = super::index::jobs_lines(&args.root)?;
    if !builds.is_empty() {
        println!("\nindex builds");
        for l in builds {
            println!("{l}");
        }
    }
    Ok(())
}

fn slurm_json(v: &slurm::SlurmView) -> serde_json::Value {
    serde_json::json!({
        "job_id": v.record.job_id.to_string(),
        "state": v.slurm.as_ref().map(|s| s.state.clone()),
        "reason": v.slurm.as_ref().map(|s| s.reason.clone()),
        "node": v.slurm.as_ref().map(|s| s.node.clone()),
        "label": v.combined.label,
        "previous": v.record.previous.iter().map(|j| j.to_string()).collect::<Vec<_>>(),
    })
}

/// `0.4123 ± 0.0100`, or the mean alone over one session.
/// The figures shown for a sweep: those of its points, validation MRR first.
fn sweep_figures(s: &sweep::SweepSummary) -> Vec<String> {
    let mut f: Vec<String> = s
        .points
        .iter()
        .flat_map(|p| p.figures.keys().cloned())
        .collect();
    f.sort_by_key(|k| (k.as_str() != "MRR", k.clone()));
    f.dedup();
    f
}

fn sweep_json(s: &sweep::SweepSummary) -> serde_json::Value {
    serde_json::json!({
        "id": s.id,
        "model": s.model,
        "varying": s.varying,
        "points": s.points.iter().map(|p| serde_json::json!({
            "point": p.point,
            "seeds": p.seeds,
            "sessions": p.dirs,
            "states": p.states.iter().map(|x| x.as_str()).collect::<Vec<_>>(),
            "figures": p.figures.iter().map(|(k, (m, sd, n))| {
                (k.clone(), serde_json::json!({ "mean": m, "sd": sd, "n": n }))
            }).collect::<serde_json::Map<_, _>>(),
        })).collect::<Vec<_>>(),
    })
}

/// Each sweep as one group: a line, then a row per point with the settings
/// that vary, the seeds, the states and each figure's mean ± sd over the
/// seeds whose sessions are done.
pub(crate) fn print_sweeps(sweeps: &[sweep::SweepSummary]) {
    for s in sweeps {
        let counts = s
            .state_counts()
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "sweep {} ({}, {} sessions: {counts}; figures: mean ± sd over the seeds done; \
             `rosetta jobs --sweep {}` lists them)",
            s.id,
            s.model,
            s.sessions(),
            s.id
        );
        let figs = sweep_figures(s);
        let mut rows = vec![s
            .varying
            .iter()
            .map(|k| k.to_uppercase())
            .chain(["SEEDS".to_string(), "STATES".to_string()])
            .chain(figs.iter().map(|f| f.to_uppercase()))
            .collect::<Vec<_>>()];
        for p in &s.points {
            let mut states: Vec<&str> = p.states.iter().map(|x| x.as_str()).collect();
            states.dedup();
            let mut row: Vec<String> = s
                .varying
                .iter()
                .map(|k| p.point.get(k).cloned().unwrap_or_else(|| "-".into()))
                .collect();
            row.push(
                p.seeds
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
            row.push(states.join(","));
            for f in &figs {
                row.push(
                    p.figures
                        .get(f)
                        .map(|(m, sd, _)| sweep::fmt_mean_sd(*m, *sd, 4))
                        .unwrap_or_else(|| "-".into()),
                );
            }
            rows.push(row);
        }
        print_table(&rows, "  ");
    }
}

/// Rows as left-aligned columns two spaces apart, each line after `indent`.
fn print_table(rows: &[Vec<String>], indent: &str) {
    let widths: Vec<usize> = (0..rows.first().map_or(0, Vec::len))
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        println!("{indent}{}", line.join("  ").trim_end());
    }
}

/// Stored text as it may be printed: terminal control sequences removed
/// ([`rosetta::util::strip_controls`]).
pub(super) fn clean(s: &str) -> std::borrow::Cow<'_, str> {
    rosetta::util::strip_controls(s)
}

/// `rosetta jobs log`: the last `lines` lines of the session's log, then,
/// with `follow`, what the job appends, until its state is final and the
/// log has no more complete lines.
fn follow_log(session: &Path, lines: usize, follow: bool) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if !follow {
        // the end only: read without the whole log
        for l in runs::log_tail(session, lines)? {
            writeln!(out, "{}", clean(&l))?;
        }
        return Ok(());
    }
    let (all, mut offset) = runs::log_since(session, 0, false)?;
    for l in &all[all.len().saturating_sub(lines)..] {
        writeln!(out, "{}", clean(l))?;
    }
    out.flush()?;
    loop {
        // the state first: a final state read before the last lines means
        // they are all written by the time they are read
        let done = rosetta::session::read_status(session)
            .map(|s| s.effective_state().is_final() || s.is_stale())
            .unwrap_or(false);
        // once the job is over, its unterminated last line is printed too
        let (new, next) = runs::log_since(session, offset, done)?;
        offset = next;
        for l in &new {
            writeln!(out, "{}", clean(l))?;
        }
        out.flush()?;
        if done {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A `rosetta jobs` action on one session.
fn jobs_action(action: JobsAction) -> anyhow::Result<()> {
    match action {
        JobsAction::Show { session, lines } => {
            let d = runs::detail(&session, lines)?;
            println!("session  {}", clean(&d.dir.display().to_string()));
            if !d.meta.name.is_empty() {
                println!("name     {}", clean(&d.meta.name));
            }
            if !d.meta.tags.is_empty() {
                println!("tags     {}", clean(&d.meta.tags.join(", ")));
            }
            if !d.meta.note.is_empty() {
                println!(
                    "note     {}",
                    clean(&d.meta.note).replace('\n', "\n         ")
                );
            }
            match slurm::view(&session)? {
                Some(v) => {
                    println!(
                        "state    {} (status.json: {})",
                        v.combined.label,
                        clean(&d.state)
                    );
                    println!(
                        "slurm    job {} (submitted {})",
                        clean(&v.describe()),
                        clean(&v.record.submitted)
                    );
                    if !v.record.previous.is_empty() {
                        let p: Vec<String> =
                            v.record.previous.iter().map(|j| j.to_string()).collect();
                        println!("         earlier jobs {}", p.join(", "));
                    }
                    // what slurm.json records, extra arguments included (a
                    // resubmission replays none of those)
                    let o = &v.record.options;
                    let mut args: Vec<String> = [
                        ("--partition", &o.partition),
                        ("--gres", &o.gres),
                        ("--time", &o.time),
                        ("--account", &o.account),
                    ]
                    .iter()
                    .filter_map(|(f, v)| v.as_ref().map(|v| format!("{f}={v}")))
                    .collect();
                    args.extend(o.extra.iter().cloned());
                    if !args.is_empty() {
                        println!("         sbatch options {}", clean(&args.join(" ")));
                    }
                }
                None => println!("state    {}", clean(&d.state)),
            }
            if let Some(m) = sweep::SweepMember::read(&session)? {
                let point: Vec<String> = m.point.iter().map(|(k, v)| format!("{k}={v}")).collect();
                println!(
                    "sweep    {} (point {}, seed {})",
                    m.id,
                    point.join(" "),
                    m.seed
                );
            }
            println!("\nbest figures (validation, per epoch; loss: lowest step record)");
            if d.best.is_empty() {
                println!("  none recorded yet");
            }
            for (k, (v, at)) in &d.best {
                let at = if k == "loss" {
                    format!("step {at}")
                } else {
                    format!("epoch {at}")
                };
                println!("  {k:<12} {v:.4}  ({at})");
            }
            println!("\ncheckpoints");
            if d.checkpoints.is_empty() {
                println!("  none");
            }
            for c in &d.checkpoints {
                println!(
                    "  {:<24} {:>10} bytes  {}",
                    clean(&c.name),
                    c.bytes,
                    c.modified
                );
            }
            println!("\nconfig.toml\n{}", clean(d.config.trim_end()));
            println!("\nlog.txt (last {lines} lines)");
            for l in &d.log_tail {
                println!("  {}", clean(l));
            }
            for p in &d.problems {
                eprintln!("warning: {}", clean(p));
            }
        }
        JobsAction::Log {
            session,
            lines,
            follow,
        } => follow_log(&session, lines, follow)?,
        JobsAction::Rename { session, name } => {
            let m = runs::rename(&session, &name)?;
            println!(
                "{}: named {:?}",
                session.display(),
                m.display_name(&session)
            );
        }
        JobsAction::Tag {
            session,
            tags,
            remove,
        } => {
            let m = if remove {
                runs::edit_tags(&session, &[], &tags)?
            } else {
                runs::edit_tags(&session, &tags, &[])?
            };
            println!(
                "{}: tags [{}]",
                session.display(),
                clean(&m.tags.join(", "))
            );
        }
        JobsAction::Note { session, text } => {
            runs::set_note(&session, &text)?;
            println!("{}: note saved", session.display());
        }
        JobsAction::Delete { session, yes } => {
            // a link to a session, `DIR/.`: refused before anything is read
            runs::session_folder_path(&session, "deleted")?;
            let st = rosetta::session::read_status(&session).ok();
            if !yes {
                use std::io::{BufRead, IsTerminal, Write};
                if !std::io::stdin().is_terminal() {
                    bail!(
                        "{}: deleting asks for confirmation on a terminal; add --yes to delete without asking",
                        session.display()
                    );
                }
                let what = st
                    .as_ref()
                    .map(|s| format!(" ({} {})", s.model, s.effective_state()))
                    .unwrap_or_default();
                eprint!(
                    "Delete session {}{} and all its files? [y/N] ",
                    session.display(),
                    clean(&what)
                );
                std::io::stderr().flush()?;
                let mut answer = String::new();
                std::io::stdin().lock().read_line(&mut answer)?;
                if !matches!(answer.trim(), "y" | "Y" | "yes") {
                    println!("kept {}", session.display());
                    return Ok(());
                }
            }
            // a queued or running Slurm job would start or write into a deleted folder
            slurm::check_not_active(&session)?;
            rosetta::jobs::index::check_not_active(&session)?;
            runs::delete(&session)?;
            println!("deleted {}", session.display());
        }
    }
    Ok(())
}

fn short_workspace(p: &Path) -> String {
    // `.../tiny/workspace.toml` -> `tiny/workspace.toml`
    let comps: Vec<_> = p.components().collect();
    let n = comps.len();
    comps[n.saturating_sub(2)..]
        .iter()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// `rosetta cancel`.
pub fn cancel(args: CancelArgs) -> anyhow::Result<()> {
    let dir = &args.session;
    let pid = match jobs::cancel(dir)? {
        jobs::Cancel::Finished(state) => {
            println!("{}: already {state}", dir.display());
            return Ok(());
        }
        jobs::Cancel::Signalled { pid } => pid,
        jobs::Cancel::Slurm { job } => {
            eprintln!("cancelled Slurm job {job} (scancel); waiting for the job to stop");
            let v = slurm::wait_ended(dir, Duration::from_secs(args.timeout))
                .with_context(|| format!("scancel {job} (check `rosetta jobs`)"))?;
            println!("{}: {}", dir.display(), v.combined.label);
            return Ok(());
        }
    };
    eprintln!("sent SIGTERM to pid {pid}; waiting for the job to stop");
    let st = jobs::wait_final(dir, Duration::from_secs(args.timeout))
        .with_context(|| format!("sent SIGTERM to pid {pid} (check `rosetta jobs`)"))?;
    match st.state {
        State::Cancelled => println!("{}: cancelled", dir.display()),
        s => println!(
            "{}: ended as {s} before the cancel took effect{}",
            dir.display(),
            st.error
                .map(|e| format!(" ({})", clean(&e)))
                .unwrap_or_default()
        ),
    }
    Ok(())
}
