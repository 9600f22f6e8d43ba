//! `rosetta sweep`: one session per point of a grid of settings, times each
//! seed, on this machine or as a Slurm job array (engine:
//! `rosetta::jobs::sweep`).

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use rosetta::jobs::sweep::{self, SweepRequest};
use rosetta::jobs::{self, JobRequest};

use super::slurm_args::SlurmArgs;

/// Arguments of `rosetta sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Workspace file (workspace.toml) to train on.
    #[arg(long, value_name = "FILE")]
    pub workspace: PathBuf,
    /// Model to train (see `rosetta train --help`).
    #[arg(long, value_name = "NAME")]
    pub model: String,
    /// A setting and its values, KEY=V1,V2,... (repeatable: the grid is every combination).
    #[arg(long, value_name = "KEY=V1,V2", required = true)]
    pub grid: Vec<String>,
    /// Seeds, comma-separated: each point is trained once per seed (figures: mean ± sd).
    #[arg(long, value_name = "S1,S2", default_value = "1")]
    pub seeds: String,
    /// A fixed hyper-parameter for every point, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Device: auto, cpu, cuda or cuda:<i>.
    #[arg(long, default_value = "auto")]
    pub device: rosetta::models::DeviceSpec,
    /// Folder the sweep's sessions go in.
    #[arg(long, default_value = "sessions")]
    pub root: PathBuf,
    /// Where the sessions run: local (detached processes; this command waits for them and
    /// prints the sweep) or slurm (one job array; returns at once).
    #[arg(long, value_name = "WHERE", value_parser = ["local", "slurm"], default_value = "local")]
    pub on: String,
    /// At most N sessions at once (local: processes, default 1; Slurm: the array's %N limit).
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    #[command(flatten)]
    pub slurm: SlurmArgs,
}

/// `rosetta sweep`.
pub fn sweep(args: SweepArgs) -> anyhow::Result<()> {
    let on_slurm = args.on == "slurm";
    if !on_slurm && args.slurm.given() {
        bail!("--partition, --gres, --time, --account, --sbatch-arg and --rosetta-bin need --on slurm");
    }
    sweep::check_parallel(args.parallel)?;
    let seeds = sweep::parse_seeds(&args.seeds)?;
    let grid = args
        .grid
        .iter()
        .map(|g| sweep::parse_axis(g))
        .collect::<rosetta::Result<Vec<_>>>()?;
    let mut base = JobRequest::new(&args.workspace, &args.model);
    base.settings = jobs::parse_settings(&args.set)?;
    base.device = args.device;
    base.root = args.root.clone();
    let req = SweepRequest { base, grid, seeds };
    let exe = args.slurm.exe()?;
    if on_slurm {
        let opts = args.slurm.options(Default::default());
        let (s, job) = sweep::start_slurm(&req, &opts, &exe, args.parallel)?;
        eprintln!(
            "submitted {} sessions as Slurm job array {job}; follow them with `rosetta jobs`",
            s.dirs.len()
        );
        println!("{}", s.id);
        return Ok(());
    }
    let s = sweep::create(&req)?;
    eprintln!(
        "sweep {}: {} sessions, {} at a time",
        s.id,
        s.dirs.len(),
        args.parallel.unwrap_or(1)
    );
    sweep::run_local(&s, &exe, args.parallel.unwrap_or(1), &mut |l| {
        eprintln!("started {} (pid {})", l.dir.display(), l.pid);
    })?;
    let runs = rosetta::session::runs::RunIndex::default().scan(&args.root)?;
    let sums: Vec<_> = sweep::summaries(&runs, &|r| r.entry.state())
        .into_iter()
        .filter(|x| x.id == s.id)
        .collect();
    super::train::print_sweeps(&sums);
    println!("{}", s.id);
    Ok(())
}
