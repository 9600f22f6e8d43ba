//! Training curves as PNG or SVG (plotters): loss per step, raw and
//! smoothed, or validation MRR per epoch, for one or several sessions
//! overlaid. Text is drawn with an embedded DejaVu Sans (ab_glyph), so no
//! system font library is needed.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::session::{Curves, MetricRecord};
use crate::{Error, Result};

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() {
    REGISTER.call_once(|| {
        // the embedded file is a valid TTF: a failure here is a build problem
        for style in [FontStyle::Normal, FontStyle::Bold] {
            plotters::style::register_font("sans-serif", style, FONT)
                .unwrap_or_else(|_| panic!("embedded DejaVu Sans is not a valid font"));
        }
    });
}

/// What to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Training loss per optimiser step (raw, thin, and smoothed, bold).
    Loss,
    /// Validation MRR per epoch.
    Mrr,
}

impl std::str::FromStr for Metric {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "loss" => Ok(Metric::Loss),
            "mrr" => Ok(Metric::Mrr),
            other => Err(Error::invalid(format!(
                "unknown metric `{other}` (loss or MRR)"
            ))),
        }
    }
}

/// One curve's data: a label and its metrics records.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label (usually the session folder name).
    pub label: String,
    /// The session's records (resumed runs are reduced to one history).
    pub records: Vec<MetricRecord>,
}

/// Points of `metric` in a history: (step, loss) or (epoch index, MRR).
/// Epochs of later phases continue the count of earlier ones.
pub fn points(records: &[MetricRecord], metric: Metric) -> Vec<(f64, f64)> {
    let curves = Curves::from_records(records);
    match metric {
        Metric::Loss => curves.loss,
        Metric::Mrr => curves.valid_points("MRR"),
    }
}

/// Centred moving average over `2 * half + 1` points (fewer at the ends),
/// for smoothed loss curves: it does not lag behind the raw curve.
pub fn smooth(points: &[(f64, f64)], half: usize) -> Vec<(f64, f64)> {
    let n = points.len();
    let mut prefix = vec![0.0f64; n + 1];
    for (i, p) in points.iter().enumerate() {
        prefix[i + 1] = prefix[i] + p.1;
    }
    (0..n)
        .map(|i| {
            let lo = i.saturating_sub(half);
            let hi = (i + half + 1).min(n);
            (points[i].0, (prefix[hi] - prefix[lo]) / (hi - lo) as f64)
        })
        .collect()
}

/// Smoothing half-width for `n` points: about a twentieth of the curve.
pub fn smoothing_for(n: usize) -> usize {
    n / 40
}

/// Draws `series` into `out` (`.png` or `.svg`, by extension).
pub fn plot(series: &[Series], metric: Metric, out: &Path) -> Result<()> {
    register_font();
    let ext = out
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let size = (1000u32, 600u32);
    if let Some(d) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    match ext.as_str() {
        "png" => {
            let root = BitMapBackend::new(out, size).into_drawing_area();
            draw(root, series, metric, out)
        }
        "svg" => {
            let root = SVGBackend::new(out, size).into_drawing_area();
            draw(root, series, metric, out)
        }
        _ => Err(Error::invalid(format!(
            "{}: the plot file must end in .png or .svg",
            out.display()
        ))),
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    series: &[Series],
    metric: Metric,
    out: &Path,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: &dyn std::fmt::Display| Error::file(out, format!("cannot draw plot: {e}"));
    let data: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| (s.label.clone(), points(&s.records, metric)))
        .collect();
    if data.iter().all(|(_, p)| p.is_empty()) {
        return Err(Error::invalid(format!(
            "nothing to plot: no {} records in the session(s)",
            match metric {
                Metric::Loss => "step (loss)",
                Metric::Mrr => "validation (MRR)",
            }
        )));
    }
    let all = data.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if metric == Metric::Mrr {
        y0 = 0.0;
        y1 = y1.max(1e-3) * 1.05;
        x0 = x0.min(1.0) - 0.2;
        x1 += 0.2;
    } else {
        let pad = ((y1 - y0) * 0.05).max(1e-6);
        y0 -= pad;
        y1 += pad;
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
    }
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (title, xl, yl) = match metric {
        Metric::Loss => ("Training loss", "step", "loss"),
        Metric::Mrr => (
            "Validation MRR (parallel sentence retrieval)",
            "epoch",
            "MRR",
        ),
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(|e| err(&e))?;
    let int_labels = |x: &f64| {
        if metric == Metric::Mrr && x.fract().abs() > 1e-9 {
            String::new()
        } else {
            format!("{x}")
        }
    };
    chart
        .configure_mesh()
        .x_label_formatter(&int_labels)
        .x_desc(xl)
        .y_desc(yl)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (label, pts)) in data.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        let color = Palette99::pick(i).to_rgba();
        match metric {
            Metric::Loss => {
                chart
                    .draw_series(LineSeries::new(
                        pts.iter().copied(),
                        color.mix(0.3).stroke_width(1),
                    ))
                    .map_err(|e| err(&e))?;
                chart
                    .draw_series(LineSeries::new(
                        smooth(pts, smoothing_for(pts.len())),
                        color.stroke_width(3),
                    ))
                    .map_err(|e| err(&e))?
                    .label(format!("{label} (smoothed)"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                    });
            }
            Metric::Mrr => {
                chart
                    .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                    .map_err(|e| err(&e))?
                    .label(label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&(x, y)| Circle::new((x, y), 4, color.filled())),
                    )
                    .map_err(|e| err(&e))?;
            }
        }
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(match metric {
            Metric::Loss => SeriesLabelPosition::UpperRight,
            Metric::Mrr => SeriesLabelPosition::LowerRight,
        })
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs() -> Vec<MetricRecord> {
        let mut v = Vec::new();
        for s in 1..=20 {
            v.push(MetricRecord::Step {
                phase: "train".into(),
                epoch: 1 + (s - 1) / 10,
                step: s,
                examples: 10,
                loss: 1.0 / s as f64,
                parts: Default::default(),
                pairs_per_s: 100.0,
                wall_s: s as f64,
            });
            if s % 10 == 0 {
                v.push(MetricRecord::Valid {
                    phase: "train".into(),
                    epoch: s / 10,
                    step: s,
                    scores: [("MRR".to_string(), s as f64 / 40.0)].into(),
                });
            }
        }
        v
    }

    #[test]
    fn points_and_smoothing() {
        let p = points(&recs(), Metric::Mrr);
        assert_eq!(p, vec![(1.0, 0.25), (2.0, 0.5)]);
        assert_eq!(points(&recs(), Metric::Loss).len(), 20);
        let s = smooth(&[(0.0, 1.0), (1.0, 0.0), (2.0, 2.0), (3.0, 4.0)], 1);
        assert_eq!(s, vec![(0.0, 0.5), (1.0, 1.0), (2.0, 2.0), (3.0, 3.0)]);
        assert_eq!(smooth(&s, 0), s);
    }

    #[test]
    fn png_and_svg_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let series = vec![
            Series {
                label: "a".into(),
                records: recs(),
            },
            Series {
                label: "b".into(),
                records: recs()[..10].to_vec(),
            },
        ];
        let png = dir.path().join("loss.png");
        plot(&series, Metric::Loss, &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        let svg = dir.path().join("mrr.svg");
        plot(&series, Metric::Mrr, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("MRR"));
        assert!(plot(&series, Metric::Mrr, &dir.path().join("x.jpg")).is_err());
    }
}
