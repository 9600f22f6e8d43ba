//! `rosetta plot`: training curves of one or more sessions as PNG or SVG
//! (engine: `rosetta::plot`, the series work the workbench's charts share).

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use rosetta::plot::{plot as draw, PlotOptions, Series, XAxis};
use rosetta::session::runs::{distinct_labels, RunMeta};
use rosetta::session::{MetricsTail, METRICS_FILE};

/// Arguments of `rosetta plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Session folder(s); several are overlaid (told apart by colour, dash pattern and point
    /// shape; legend labels elide the prefix the names share).
    #[arg(required = true, value_name = "SESSION")]
    pub sessions: Vec<PathBuf>,
    /// Output file, .png or .svg.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Figure to plot: loss, a loss part the job logs (e.g. disc_loss), or a validation figure
    /// (MRR, P@1, ...; case ignored). An unknown name lists the recorded ones.
    #[arg(long, default_value = "loss", value_name = "NAME")]
    pub metric: String,
    /// X axis: step, epoch or time (wall time of training; a resumed job continues its clock).
    #[arg(long, default_value = "step", value_name = "AXIS")]
    pub x: XAxis,
    /// Logarithmic y axis (values at or below 0 are left out).
    #[arg(long)]
    pub log_y: bool,
    /// EMA smoothing factor in [0, 1), the raw curve drawn faint beneath; 0 turns it off.
    /// Default: 0.9 for per-step figures (loss), none for validation figures.
    #[arg(long, value_name = "ALPHA")]
    pub smooth: Option<f64>,
    /// Only the last N points of each curve.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
}

/// `rosetta plot`.
pub fn plot(args: PlotArgs) -> anyhow::Result<()> {
    let opts = PlotOptions {
        metric: args.metric.clone(),
        x: args.x,
        log_y: args.log_y,
        smooth: args.smooth,
        last: args.last,
    };
    opts.check()?;
    let mut series = Vec::new();
    let mut names = Vec::new();
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
        let dir_abs = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        // the session's own name (meta.json), else its folder name
        let meta = RunMeta::read(dir).unwrap_or_else(|e| {
            eprintln!("warning: {e} (folder name used)");
            RunMeta::default()
        });
        names.push(meta.display_name(&dir_abs));
        series.push(Series {
            label: String::new(),
            records: batch.records,
        });
    }
    for (s, label) in series.iter_mut().zip(distinct_labels(&names)) {
        s.label = label;
    }
    draw(&series, &opts, &args.out)?;
    println!("{}", args.out.display());
    Ok(())
}
