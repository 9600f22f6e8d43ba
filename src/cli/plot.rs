//! `rosetta plot`: training curves of one or more sessions as PNG or SVG.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use rosetta::plot::{plot as draw, Metric, Series};
use rosetta::session::{MetricsTail, METRICS_FILE};

/// Arguments of `rosetta plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Session folder(s); several are overlaid.
    #[arg(required = true, value_name = "SESSION")]
    pub sessions: Vec<PathBuf>,
    /// Output file, .png or .svg.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// What to plot: loss (per step, raw and smoothed) or MRR (validation, per epoch).
    #[arg(long, default_value = "loss")]
    pub metric: String,
}

/// `rosetta plot`.
pub fn plot(args: PlotArgs) -> anyhow::Result<()> {
    let metric: Metric = args.metric.parse()?;
    let mut series = Vec::new();
    for dir in &args.sessions {
        let path = dir.join(METRICS_FILE);
        if !path.exists() {
            bail!("{}: no metrics (is this a session folder?)", path.display());
        }
        let mut tail = MetricsTail::new(&path);
        let mut batch = tail.poll()?;
        let rest = tail.finish();
        batch.records.extend(rest.records);
        batch.errors.extend(rest.errors);
        for e in &batch.errors {
            eprintln!("warning: {e} (line skipped)");
        }
        let label = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.clone())
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| dir.display().to_string());
        series.push(Series {
            label,
            records: batch.records,
        });
    }
    draw(&series, metric, &args.out)?;
    println!("{}", args.out.display());
    Ok(())
}
