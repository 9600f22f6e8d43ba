//! `rosetta index`: a session's collection encoded once, as a job.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use rosetta::jobs::index::{self, IndexStatus, Part, SlurmBuild};
use rosetta::session::collection::{BuildOptions, DEFAULT_BATCH, DEFAULT_CHUNK};

/// The environment variable overriding the seconds of encoding that
/// `search`, `eval` and `compare` start without `--build` (10 by default:
/// [`SILENT_LIMIT_S`](rosetta::session::collection::SILENT_LIMIT_S)); the
/// tests set it to 0 to see the refusal on a tiny collection.
pub const ENCODE_LIMIT_ENV: &str = "ROSETTA_ENCODE_LIMIT_S";

/// The most seconds of encoding a front-end starts: none with `--build`
/// (any, in the foreground), else [`ENCODE_LIMIT_ENV`] when set, else 10.
pub fn encode_limit(build: bool) -> anyhow::Result<Option<f64>> {
    if build {
        return Ok(None);
    }
    match std::env::var(ENCODE_LIMIT_ENV) {
        Err(std::env::VarError::NotPresent) => {
            Ok(Some(rosetta::session::collection::SILENT_LIMIT_S))
        }
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => Ok(Some(s)),
            _ => bail!("{ENCODE_LIMIT_ENV}={v:?}: give a number of seconds, 0 or more"),
        },
        Err(e) => bail!("{ENCODE_LIMIT_ENV}: {e}"),
    }
}

/// What `rosetta index` does.
#[derive(Debug, Subcommand)]
pub enum IndexCommand {
    /// Encode a session's collection (its workspace's ad-hoc documents, or
    /// the documents file given with --collection) with
    /// its best checkpoint into the session, in chunks: progress (texts done
    /// of total, texts/s, ETA) in index/status.json and `rosetta jobs`;
    /// killed or cancelled, building again continues from the last chunk.
    /// With --on slurm: a job array of --shards tasks (GPU tasks where the
    /// partition has GPUs) and a merge job after them.
    Build(Box<BuildArgs>),
    /// Stop a session's running index build (SIGTERM; on Slurm, scancel of
    /// its shards and merge; the chunks written are kept).
    Cancel(CancelArgs),
}

/// `rosetta index build`.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Session folder (a model that reads raw text: an encoder).
    #[arg(long, value_name = "DIR")]
    pub session: PathBuf,
    /// Device: auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Run in the background (own session, survives the terminal; output
    /// in DIR/index/log.txt): print its pid and return.
    #[arg(long)]
    pub detach: bool,
    /// Encode the documents of FILE (TSV `id<TAB>text` or JSONL, checked as
    /// a workspace's `[adhoc]` documents are) instead of the workspace's
    /// collection, for `rosetta eval --adhoc FILE ...`; the session keeps
    /// one encoded collection at a time.
    #[arg(long, value_name = "FILE")]
    pub collection: Option<PathBuf>,
    /// Texts per chunk file (what a killed build loses at most).
    #[arg(long, default_value_t = DEFAULT_CHUNK, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub chunk: usize,
    /// Texts per encoding call (one progress report each).
    #[arg(long, default_value_t = DEFAULT_BATCH, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub batch: usize,
    /// Also build the collection's HNSW graph (the session's hnsw.graph, which
    /// a search then walks; --exact scores every document) when it has at
    /// least N texts.
    #[arg(long, value_name = "N", default_value_t = index::HNSW_ABOVE)]
    pub hnsw_above: usize,
    /// The detached process itself (progress as log lines).
    #[arg(long, hide = true)]
    pub background: bool,
    /// Where the build runs: `local` (this machine) or `slurm` (a job array
    /// of --shards tasks and a merge job, from the session folder, which the
    /// nodes must see; returns at once, as --detach does).
    #[arg(long, value_name = "WHERE", value_parser = ["local", "slurm"], conflicts_with = "detach")]
    pub on: Option<String>,
    /// With --on slurm: tasks of the job array, each encoding a contiguous
    /// run of the chunks (at most the collection's chunks).
    #[arg(long, value_name = "K", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=index::MAX_SHARDS as u64))]
    pub shards: Option<usize>,
    /// With --on slurm: GPUs per shard task (`--gres=gpu:N`); default one
    /// where the partition's nodes have GPUs (sinfo), else none.
    #[arg(long, value_name = "N")]
    pub gpus: Option<u32>,
    #[command(flatten)]
    pub slurm: super::slurm_args::SlurmArgs,
    /// A task of a Slurm build: encode only this shard (of --shards).
    #[arg(
        long,
        hide = true,
        value_name = "I",
        requires = "shards",
        conflicts_with = "merge"
    )]
    pub shard: Option<usize>,
    /// A task of a Slurm build: join the shards' chunks, encoding nothing.
    #[arg(long, hide = true)]
    pub merge: bool,
}

/// `rosetta index cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Session folder.
    #[arg(long, value_name = "DIR")]
    pub session: PathBuf,
}

/// Runs an `index` subcommand.
pub fn run(cmd: IndexCommand) -> anyhow::Result<()> {
    match cmd {
        IndexCommand::Build(a) => build(*a),
        IndexCommand::Cancel(a) => {
            println!("{}", index::cancel(&a.session)?);
            Ok(())
        }
    }
}

fn build(a: BuildArgs) -> anyhow::Result<()> {
    let device = rosetta::jobs::check_device(&a.device)?;
    let opt = BuildOptions {
        chunk: a.chunk,
        batch: a.batch,
    };
    let on_slurm = a.on.as_deref() == Some("slurm");
    if !on_slurm && (a.slurm.given() || a.gpus.is_some()) {
        bail!("--partition, --gres, --gpus, --time, --account, --sbatch-arg and --rosetta-bin need --on slurm");
    }
    let part = match (a.shard, a.merge) {
        (Some(index), _) => {
            let of = a.shards.unwrap_or(1);
            if index >= of {
                bail!(
                    "--shard {index}: give a shard from 0 to {} (of --shards {of})",
                    of - 1
                );
            }
            Part::Shard { index, of }
        }
        (None, true) => Part::Merge,
        (None, false) => Part::Whole,
    };
    if on_slurm {
        let req = SlurmBuild {
            options: a.slurm.options(Default::default()),
            gpus: a.gpus,
            shards: a.shards.unwrap_or(1),
            hnsw_above: a.hnsw_above,
        };
        let exe = a.slurm.exe()?;
        let rec =
            index::submit_slurm(&a.session, &exe, device, opt, a.collection.as_deref(), &req)?;
        println!(
            "submitted Slurm job array {} ({} shard{}) and merge job {}; follow it with `rosetta jobs`",
            rec.array_job,
            rec.shards,
            if rec.shards == 1 { "" } else { "s" },
            rec.merge_job
        );
        return Ok(());
    }
    if a.shards.is_some() && part == Part::Whole {
        bail!("--shards needs --on slurm (a local build runs as one process)");
    }
    if a.detach {
        let exe = std::env::current_exe()?;
        let pid = index::launch(
            &a.session,
            &exe,
            device,
            opt,
            a.hnsw_above,
            a.collection.as_deref(),
        )?;
        println!(
            "index build started (pid {pid}); progress: `rosetta jobs` or {}",
            a.session.join(index::INDEX_STATUS).display()
        );
        return Ok(());
    }
    let cancel = rosetta::train::runner::cancel_on_signals()?;
    let bar = (!a.background)
        .then(|| super::progress::Progress::start(format!("indexing {}", a.session.display())));
    let mut last_line = std::time::Instant::now();
    let mut first = true;
    let collection = a.collection.as_deref();
    let what = match part {
        Part::Whole => "index".to_string(),
        Part::Shard { index, of } => format!("index shard {index} of {of}:"),
        Part::Merge => "index merge of the shards:".to_string(),
    };
    let st = index::run(
        &a.session,
        device,
        opt,
        part,
        a.hnsw_above,
        collection,
        &cancel,
        &mut |st: &IndexStatus| {
            if let Some(b) = &bar {
                let frac = st.texts_done as f64 / st.texts_total.max(1) as f64;
                b.update(frac, &format!("encoding {}", st.describe()));
            } else if first || last_line.elapsed().as_secs_f64() >= 5.0 {
                // a log line at most every 5 s
                eprintln!("{} {what} {}", st.updated, st.describe());
                last_line = std::time::Instant::now();
                first = false;
            }
        },
    )?;
    drop(bar);
    match st.state.as_str() {
        "done" => {
            let who = if part == Part::Whole {
                String::new()
            } else {
                format!("{what} ")
            };
            println!("{who}done: {} ({})", a.session.display(), st.describe());
            Ok(())
        }
        "cancelled" => {
            println!(
                "cancelled: {} ({}); {}",
                a.session.display(),
                st.describe(),
                st.error.unwrap_or_default()
            );
            Ok(())
        }
        s => bail!("index build ended {s}: {}", st.error.unwrap_or_default()),
    }
}

/// The index builds under `root`, as lines for `rosetta jobs` (none when
/// no session has had one).
pub fn jobs_lines(root: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for (dir, st) in index::list(root)? {
        out.push(format!(
            "{:<32} {:<9} {:<8} {}",
            rosetta::util::strip_controls(&dir.file_name().unwrap_or_default().to_string_lossy()),
            st.shown_state(),
            rosetta::util::strip_controls(&st.device),
            st.describe()
        ));
    }
    Ok(out)
}

/// The index builds under `root` for `rosetta jobs --json`: per build its
/// session folder, the state to show and its status (a Slurm build's with
/// its jobs, `slurm`).
pub fn jobs_json(root: &std::path::Path) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(index::list(root)?
        .into_iter()
        .map(|(dir, st)| {
            let mut v = serde_json::to_value(&st).unwrap_or_default();
            v["session"] = serde_json::json!(dir);
            v["shown_state"] = serde_json::json!(st.shown_state());
            v
        })
        .collect())
}
