//! The Slurm options that `train`, `sweep` and `index build` share (with
//! `--on slurm`): a leaf, so that each command's file can take them
//! without importing another command's.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use rosetta::jobs::slurm::SlurmOptions;

/// The Slurm options of `train`, `sweep` and `index build` (with `--on slurm`).
#[derive(Debug, Args, Default)]
pub struct SlurmArgs {
    /// Slurm partition (`sbatch --partition`); default: the cluster's.
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// Generic resources (`sbatch --gres`), e.g. gpu:1.
    #[arg(long, value_name = "GRES")]
    pub gres: Option<String>,
    /// Time limit (`sbatch --time`), e.g. 2:00:00; a job stopped by it shows as `timeout`.
    #[arg(long, value_name = "LIMIT")]
    pub time: Option<String>,
    /// Account to charge (`sbatch --account`).
    #[arg(long, value_name = "A")]
    pub account: Option<String>,
    /// One more sbatch option, e.g. --sbatch-arg=--mem=8G (repeatable).
    #[arg(long = "sbatch-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub sbatch_arg: Vec<String>,
    /// The rosetta program the batch job runs on the node (default: this program's absolute path).
    #[arg(long, value_name = "FILE")]
    pub rosetta_bin: Option<PathBuf>,
}

impl SlurmArgs {
    pub(crate) fn given(&self) -> bool {
        self.partition.is_some()
            || self.gres.is_some()
            || self.time.is_some()
            || self.account.is_some()
            || !self.sbatch_arg.is_empty()
            || self.rosetta_bin.is_some()
    }

    /// `base` (a Slurm session's recorded options, or none) with the
    /// options given here in place.
    pub(crate) fn options(&self, base: SlurmOptions) -> SlurmOptions {
        SlurmOptions {
            partition: self.partition.clone().or(base.partition),
            gres: self.gres.clone().or(base.gres),
            time: self.time.clone().or(base.time),
            account: self.account.clone().or(base.account),
            extra: if self.sbatch_arg.is_empty() {
                base.extra
            } else {
                self.sbatch_arg.clone()
            },
        }
    }

    /// The program the batch job runs: --rosetta-bin (made absolute), or this one.
    pub(crate) fn exe(&self) -> anyhow::Result<PathBuf> {
        match &self.rosetta_bin {
            Some(p) => std::fs::canonicalize(p)
                .with_context(|| format!("--rosetta-bin {}: cannot find it", p.display())),
            None => std::env::current_exe().context("cannot find the rosetta executable"),
        }
    }
}
