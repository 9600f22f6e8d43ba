//! Training curves: the series work shared by `rosetta plot` and the
//! workbench's charts (any recorded figure on a step, epoch or wall-time
//! axis, EMA smoothing, log scale, best-value markers, auto-ranged axes,
//! titles that say what they show), and PNG or SVG output (plotters) for
//! one or several sessions overlaid, told apart by dash pattern and point
//! shape as well as colour. Text is drawn with an embedded DejaVu Sans (ab_glyph), so no
//! system font library is needed.

use std::path::Path;
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::session::{Curves, MetricRecord};
use crate::{Error, Result};

static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
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

pub use crate::session::XAxis;

/// How curves are shown: the one set of options of `rosetta plot` and the
/// workbench's charts.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotOptions {
    /// Figure to plot: `loss`, a step record's part, or a validation
    /// figure (`MRR`, `P@1`, ...), as in [`Curves::metric_names`].
    pub metric: String,
    /// The x axis.
    pub x: XAxis,
    /// Logarithmic y axis (values ≤ 0 are left out and counted).
    pub log_y: bool,
    /// EMA smoothing factor in [0, 1) (0: none); the raw curve is drawn
    /// faint beneath the smoothed one. `None`: 0.9 for figures logged per
    /// step, none for validation figures (one point per epoch).
    pub smooth: Option<f64>,
    /// Only the last this many points of each curve (`None`: all).
    pub last: Option<usize>,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions {
            metric: "loss".into(),
            x: XAxis::Step,
            log_y: false,
            smooth: None,
            last: None,
        }
    }
}

impl PlotOptions {
    /// Checks the options: a smoothing factor in [0, 1).
    pub fn check(&self) -> Result<()> {
        if let Some(a) = self.smooth {
            if !(0.0..1.0).contains(&a) {
                return Err(Error::invalid(format!(
                    "smoothing {a}: must be at least 0 and below 1 (0: none, 0.9: strong)"
                )));
            }
        }
        Ok(())
    }
}

/// Whether a lower value of `metric` is better (a loss).
pub fn lower_is_better(metric: &str) -> bool {
    metric.to_ascii_lowercase().contains("loss")
}

/// Debiased exponential moving average (TensorBoard-style smoothing):
/// `alpha` 0 returns the points as they are; the first points are not
/// pulled towards 0.
pub fn ema(points: &[(f64, f64)], alpha: f64) -> Vec<(f64, f64)> {
    let mut acc = 0.0;
    let mut w = 0.0;
    points
        .iter()
        .map(|&(x, y)| {
            acc = alpha * acc + (1.0 - alpha) * y;
            w = alpha * w + (1.0 - alpha);
            (x, acc / w)
        })
        .collect()
}

/// One curve ready to draw, in display coordinates (log10 of the values on
/// a log axis).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Line {
    /// Legend label.
    pub label: String,
    /// The recorded points.
    pub raw: Vec<(f64, f64)>,
    /// The smoothed curve, when smoothing is on.
    pub smooth: Option<Vec<(f64, f64)>>,
    /// Where the best value lies (on the smoothed curve when there is one;
    /// lowest for a loss, highest otherwise).
    pub best: Option<(f64, f64)>,
    /// The best value itself (not in log10).
    pub best_value: Option<f64>,
    /// Points left out of a log axis (zero or negative).
    pub dropped: usize,
}

impl Line {
    /// The curve drawn bold: the smoothed one, else the raw one.
    pub fn main(&self) -> &[(f64, f64)] {
        self.smooth.as_deref().unwrap_or(&self.raw)
    }
}

/// Whether `metric` is logged per step (loss and its parts) in `curves`.
pub fn is_step_metric(curves: &Curves, metric: &str) -> bool {
    metric == "loss" || curves.parts.contains_key(metric)
}

/// The curve of `opts.metric` in `curves` ([`Curves::points`] then
/// [`line_from_points`]).
pub fn line(curves: &Curves, label: impl Into<String>, opts: &PlotOptions) -> Line {
    let pts = curves.points(&opts.metric, opts.x);
    line_from_points(label, pts, is_step_metric(curves, &opts.metric), opts)
}

/// A curve from points of `opts.metric`: the last `opts.last` points,
/// smoothed (`step_metric`: a per-step figure, smoothed by default), the
/// best value found, then mapped to a log axis when asked.
pub fn line_from_points(
    label: impl Into<String>,
    mut pts: Vec<(f64, f64)>,
    step_metric: bool,
    opts: &PlotOptions,
) -> Line {
    if let Some(n) = opts.last {
        if pts.len() > n {
            pts.drain(..pts.len() - n);
        }
    }
    let alpha = opts.smooth.unwrap_or(if step_metric { 0.9 } else { 0.0 });
    let smooth = (alpha > 0.0 && pts.len() > 1).then(|| ema(&pts, alpha));
    let lower = lower_is_better(&opts.metric);
    let best = smooth
        .as_deref()
        .unwrap_or(&pts)
        .iter()
        .copied()
        .filter(|p| p.1.is_finite())
        .reduce(|a, b| {
            let better = if lower { b.1 < a.1 } else { b.1 > a.1 };
            if better {
                b
            } else {
                a
            }
        });
    let mut dropped = 0;
    let mut to_axis = |v: Vec<(f64, f64)>, count: bool| -> Vec<(f64, f64)> {
        if !opts.log_y {
            return v;
        }
        let n = v.len();
        let out: Vec<(f64, f64)> = v
            .into_iter()
            .filter(|p| p.1 > 0.0)
            .map(|(x, y)| (x, y.log10()))
            .collect();
        if count {
            dropped += n - out.len();
        }
        out
    };
    let raw = to_axis(pts, true);
    let smooth = smooth.map(|s| to_axis(s, false));
    let best_disp = best.and_then(|(x, y)| {
        if opts.log_y {
            (y > 0.0).then(|| (x, y.log10()))
        } else {
            Some((x, y))
        }
    });
    Line {
        label: label.into(),
        raw,
        smooth,
        best: best_disp,
        best_value: best.map(|b| b.1),
        dropped,
    }
}

/// The x values the lines' points span, lowest and highest (equal for
/// points at one x), if they have any: what a title names.
pub fn x_span(lines: &[Line]) -> Option<[f64; 2]> {
    let mut r = [f64::INFINITY, f64::NEG_INFINITY];
    for l in lines {
        for &(x, _) in l.raw.iter().chain(l.smooth.iter().flatten()) {
            r = [r[0].min(x), r[1].max(x)];
        }
    }
    r[0].is_finite().then_some(r)
}

/// The x range of the lines' points to draw, if they have any: their span
/// ([`x_span`]), or half a unit either side of a single x.
pub fn x_range(lines: &[Line]) -> Option<[f64; 2]> {
    x_span(lines).map(|r| {
        if r[1] <= r[0] {
            [r[0] - 0.5, r[0] + 0.5]
        } else {
            r
        }
    })
}

/// The y range to draw: the range of the data (raw and smoothed) with a
/// margin of 5 % each side, never forced to start at 0; a flat curve gets
/// a small band around its value. Data that are all non-negative (a loss)
/// get no margin below 0: the axis never shows values they cannot take.
pub fn y_range(lines: &[Line]) -> Option<[f64; 2]> {
    let mut r = [f64::INFINITY, f64::NEG_INFINITY];
    for l in lines {
        for &(_, y) in l.raw.iter().chain(l.smooth.iter().flatten()) {
            if y.is_finite() {
                r = [r[0].min(y), r[1].max(y)];
            }
        }
    }
    if !r[0].is_finite() {
        return None;
    }
    let span = r[1] - r[0];
    let pad = if span > 0.0 {
        span * 0.05
    } else {
        (r[0].abs() * 0.05).max(1e-3)
    };
    let lo = if r[0] >= 0.0 {
        (r[0] - pad).max(0.0)
    } else {
        r[0] - pad
    };
    Some([lo, r[1] + pad])
}

/// `1,840` for a step, `2.5` for an epoch, `5m02s` for a wall time.
pub fn fmt_x(x: XAxis, v: f64) -> String {
    match x {
        XAxis::Step => {
            let n = v.round() as i64;
            let s = n.abs().to_string();
            let mut out = String::new();
            for (i, c) in s.chars().enumerate() {
                if i > 0 && (s.len() - i).is_multiple_of(3) {
                    out.push(',');
                }
                out.push(c);
            }
            if n < 0 {
                format!("-{out}")
            } else {
                out
            }
        }
        XAxis::Epoch => {
            if (v - v.round()).abs() < 1e-9 {
                format!("{}", v.round())
            } else {
                format!("{v:.1}")
            }
        }
        XAxis::Time => crate::util::fmt_duration(v.max(0.0)),
    }
}

/// A y value as labelled: on a log axis the value itself (`10^v`).
pub fn fmt_y(log_y: bool, v: f64) -> String {
    let y = if log_y { 10f64.powf(v) } else { v };
    let a = y.abs();
    if a != 0.0 && !(1e-3..1e4).contains(&a) {
        format!("{y:.1e}")
    } else if a >= 100.0 {
        format!("{y:.0}")
    } else if a >= 1.0 {
        format!("{y:.2}")
    } else {
        format!("{y:.3}")
    }
}

/// What the x range covers, for titles: `steps 10–1,840`, `epochs 1–5`,
/// `0s–5m02s`; a single x as itself: `step 0`, `epoch 1`, `at 5m02s`.
pub fn range_label(x: XAxis, r: [f64; 2]) -> String {
    if r[0] == r[1] {
        let what = match x {
            XAxis::Step => "step ",
            XAxis::Epoch => "epoch ",
            XAxis::Time => "at ",
        };
        return format!("{what}{}", fmt_x(x, r[0]));
    }
    let what = match x {
        XAxis::Step => "steps ",
        XAxis::Epoch => "epochs ",
        XAxis::Time => "",
    };
    format!("{what}{}–{}", fmt_x(x, r[0]), fmt_x(x, r[1]))
}

/// A chart's title: the figure, its scale and smoothing, and the x range
/// the lines actually span (`loss · steps 10–1,840 · log · EMA 0.9`; one
/// evaluation: `MRR · step 0`).
pub fn title(opts: &PlotOptions, lines: &[Line]) -> String {
    let mut t = opts.metric.clone();
    if let Some(r) = x_span(lines) {
        t.push_str(" · ");
        t.push_str(&range_label(opts.x, r));
    }
    if opts.log_y {
        t.push_str(" · log");
    }
    if let Some(a) = lines
        .iter()
        .any(|l| l.smooth.is_some())
        .then(|| opts.smooth.unwrap_or(0.9))
    {
        t.push_str(&format!(" · EMA {a}"));
    }
    t
}

/// One curve's data: a label and its metrics records.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label (usually the session's display name; overlaid labels
    /// are made distinct with [`crate::session::runs::distinct_labels`]).
    pub label: String,
    /// The session's records (resumed runs are reduced to one history).
    pub records: Vec<MetricRecord>,
}

/// Draws `series` into `out` (`.png` or `.svg`, by extension) with `opts`.
pub fn plot(series: &[Series], opts: &PlotOptions, out: &Path) -> Result<()> {
    opts.check()?;
    register_font();
    let ext = out
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if !matches!(ext.as_str(), "png" | "svg") {
        return Err(Error::invalid(format!(
            "{}: the plot file must end in .png or .svg",
            out.display()
        )));
    }
    let lines: Vec<Line> = series
        .iter()
        .map(|s| line(&Curves::from_records(&s.records), s.label.clone(), opts))
        .collect();
    if lines.iter().all(|l| l.raw.is_empty()) {
        let known: Vec<String> = series
            .iter()
            .flat_map(|s| Curves::from_records(&s.records).metric_names())
            .fold(Vec::new(), |mut v, n| {
                if !v.contains(&n) {
                    v.push(n);
                }
                v
            });
        return Err(Error::invalid(format!(
            "nothing to plot: no `{}` points{} in the session(s); recorded: {}",
            opts.metric,
            if opts.log_y { " above 0" } else { "" },
            if known.is_empty() {
                "nothing".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    let size = (1000u32, 600u32);
    if let Some(d) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
    }
    if ext == "png" {
        let root = BitMapBackend::new(out, size).into_drawing_area();
        draw(root, &lines, opts, out)
    } else {
        let root = SVGBackend::new(out, size).into_drawing_area();
        draw(root, &lines, opts, out)
    }
}

/// Dash pattern (dash, gap in pixels) of overlaid curve `i`: solid, dashed,
/// dotted, long dashes, so curves differ without colour.
pub fn dash_pattern(i: usize) -> Option<(u32, u32)> {
    match i % 4 {
        0 => None,
        1 => Some((10, 6)),
        2 => Some((2, 5)),
        _ => Some((22, 7)),
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    lines: &[Line],
    opts: &PlotOptions,
    out: &Path,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: &dyn std::fmt::Display| Error::file(out, format!("cannot draw plot: {e}"));
    let [x0, x1] = x_range(lines).unwrap_or([0.0, 1.0]);
    let [y0, y1] = y_range(lines).unwrap_or([0.0, 1.0]);
    let pad = if opts.x == XAxis::Epoch {
        0.2
    } else {
        (x1 - x0) * 0.01
    };
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title(opts, lines), ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 - pad)..(x1 + pad), y0..y1)
        .map_err(|e| err(&e))?;
    let xfmt = |v: &f64| fmt_x(opts.x, *v);
    let yfmt = |v: &f64| fmt_y(opts.log_y, *v);
    let ydesc = if opts.log_y {
        format!("{} (log scale)", opts.metric)
    } else {
        opts.metric.clone()
    };
    let xdesc = match opts.x {
        XAxis::Step => "step",
        XAxis::Epoch => "epoch",
        XAxis::Time => "wall time",
    };
    chart
        .configure_mesh()
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt)
        .x_desc(xdesc)
        .y_desc(ydesc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    for (i, l) in lines.iter().enumerate() {
        if l.raw.is_empty() {
            continue;
        }
        let color = Palette99::pick(i).to_rgba();
        if l.smooth.is_some() {
            // the raw curve, faint beneath
            chart
                .draw_series(LineSeries::new(
                    l.raw.iter().copied(),
                    color.mix(0.25).stroke_width(1),
                ))
                .map_err(|e| err(&e))?;
        }
        let main = l.main().to_vec();
        let style = color.stroke_width(2);
        let label = l.label.clone();
        let legend = move |(x, y): (i32, i32)| {
            let (d, g) = dash_pattern(i).unwrap_or((100, 1));
            plotters::element::DashedPathElement::new(vec![(x, y), (x + 24, y)], d, g, style)
        };
        match dash_pattern(i) {
            None => chart
                .draw_series(LineSeries::new(main.iter().copied(), style))
                .map_err(|e| err(&e))?
                .label(label)
                .legend(legend),
            Some((d, g)) => chart
                .draw_series(DashedLineSeries::new(main.iter().copied(), d, g, style))
                .map_err(|e| err(&e))?
                .label(label)
                .legend(legend),
        };
        if l.smooth.is_none() {
            // one point per record (validation figures): shape per curve
            draw_shapes(&mut chart, &main, i, color, 3).map_err(|e| err(&e))?;
        }
        if let Some(b) = l.best {
            draw_shapes(&mut chart, &[b], i, color, 7).map_err(|e| err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(if lower_is_better(&opts.metric) {
            SeriesLabelPosition::UpperRight
        } else {
            SeriesLabelPosition::LowerRight
        })
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Point shape of curve `i` (circle, triangle, cross, square) at `pts`.
fn draw_shapes<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    pts: &[(f64, f64)],
    i: usize,
    color: RGBAColor,
    size: i32,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let it = pts.iter().copied();
    match i % 4 {
        0 => {
            chart.draw_series(it.map(|p| Circle::new(p, size, color.filled())))?;
        }
        1 => {
            chart.draw_series(it.map(|p| TriangleMarker::new(p, size + 1, color.filled())))?;
        }
        2 => {
            chart.draw_series(it.map(|p| Cross::new(p, size, color.stroke_width(2))))?;
        }
        _ => {
            chart.draw_series(it.map(|p| {
                EmptyElement::at(p) + Rectangle::new([(-size, -size), (size, size)], color.filled())
            }))?;
        }
    }
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
    fn a_non_negative_curve_gets_no_axis_below_zero() {
        let opts = PlotOptions::default();
        // a loss falling near 0: the 5 % margin would reach -0.05
        let l = line_from_points("a", vec![(0.0, 1.0), (1.0, 0.01), (2.0, 0.0)], true, &opts);
        let [lo, hi] = y_range(&[l]).unwrap();
        assert_eq!(lo, 0.0);
        assert!(hi > 1.0);
        let flat = line_from_points("f", vec![(0.0, 0.0), (1.0, 0.0)], true, &opts);
        assert_eq!(y_range(&[flat]).unwrap()[0], 0.0);
        // values below 0 keep their margin
        let neg = line_from_points("n", vec![(0.0, -1.0), (1.0, 1.0)], false, &opts);
        assert!(y_range(&[neg]).unwrap()[0] < -1.0);
    }

    #[test]
    fn one_evaluation_is_titled_by_its_step() {
        let opts = PlotOptions {
            metric: "MRR".into(),
            smooth: Some(0.0),
            ..Default::default()
        };
        let one = line_from_points("MRR", vec![(0.0, 0.96)], false, &opts);
        assert_eq!(title(&opts, std::slice::from_ref(&one)), "MRR · step 0");
        // drawn half a step either side, titled by the point alone
        assert_eq!(x_range(std::slice::from_ref(&one)), Some([-0.5, 0.5]));
        let epochs = PlotOptions {
            x: XAxis::Epoch,
            ..opts.clone()
        };
        assert_eq!(range_label(XAxis::Epoch, [3.0, 3.0]), "epoch 3");
        let two = line_from_points("MRR", vec![(1.0, 0.5), (2.0, 0.6)], false, &epochs);
        assert_eq!(title(&epochs, &[two]), "MRR · epochs 1–2");
    }

    #[test]
    fn ema_smooths_without_pulling_the_start_to_zero() {
        let e = ema(&[(0.0, 1.0), (1.0, 3.0)], 0.5);
        assert_eq!(e[0], (0.0, 1.0));
        assert!((e[1].1 - (0.25 + 1.5) / 0.75).abs() < 1e-12);
        let pts = vec![(0.0, 2.0), (1.0, 4.0)];
        assert_eq!(ema(&pts, 0.0), pts);
    }

    #[test]
    fn series_on_each_axis_with_log_scale_and_best_markers() {
        let c = Curves::from_records(&recs());
        assert_eq!(c.points("MRR", XAxis::Epoch), vec![(1.0, 0.25), (2.0, 0.5)]);
        assert_eq!(
            c.points("mrr", XAxis::Step),
            vec![(10.0, 0.25), (20.0, 0.5)]
        );
        assert_eq!(
            c.points("MRR", XAxis::Time),
            vec![(10.0, 0.25), (20.0, 0.5)]
        );
        let by_epoch = c.points("loss", XAxis::Epoch);
        assert_eq!(by_epoch.len(), 20);
        assert!((by_epoch[0].0 - 0.1).abs() < 1e-9 && (by_epoch[19].0 - 2.0).abs() < 1e-9);
        assert!(c
            .metric_names()
            .starts_with(&["loss".to_string(), "MRR".to_string()]));
        // log scale: log10 of the values, the best (lowest) loss marked
        let opts = PlotOptions {
            log_y: true,
            smooth: Some(0.0),
            ..PlotOptions::default()
        };
        let l = line(&c, "a", &opts);
        assert_eq!(l.raw.len(), 20);
        assert!((l.raw[0].1 - 0.0).abs() < 1e-12 && (l.raw[9].1 + 1.0).abs() < 1e-12);
        assert_eq!(l.best_value, Some(0.05));
        assert_eq!(l.best.unwrap().0, 20.0);
        assert!(l.smooth.is_none());
        // a loss is smoothed by default, the raw curve kept; MRR is not
        let l = line(&c, "a", &PlotOptions::default());
        assert!(l.smooth.is_some() && l.raw.len() == 20);
        let m = line(
            &c,
            "a",
            &PlotOptions {
                metric: "MRR".into(),
                ..Default::default()
            },
        );
        assert!(m.smooth.is_none());
        assert_eq!(m.best, Some((20.0, 0.5)));
        // non-positive values leave a log axis, counted
        let z = line_from_points("z", vec![(1.0, 0.0), (2.0, 1.0)], false, &opts);
        assert_eq!((z.raw.len(), z.dropped), (1, 1));
        // the y axis is the data's range with a margin, not from 0
        let y = y_range(&[m]).unwrap();
        assert!(
            y[0] > 0.2 && y[0] < 0.25 && y[1] > 0.5 && y[1] < 0.55,
            "{y:?}"
        );
        // the title says what the lines span
        let last = PlotOptions {
            last: Some(5),
            ..Default::default()
        };
        let l = line(&c, "a", &last);
        assert_eq!(title(&last, &[l]), "loss · steps 16–20 · EMA 0.9");
        assert_eq!(fmt_x(XAxis::Step, 1840.0), "1,840");
        assert_eq!(fmt_x(XAxis::Time, 302.0), "5m02s");
        assert!(PlotOptions {
            smooth: Some(1.0),
            ..Default::default()
        }
        .check()
        .is_err());
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
        plot(&series, &PlotOptions::default(), &png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        let svg = dir.path().join("mrr.svg");
        let mrr = PlotOptions {
            metric: "MRR".into(),
            x: XAxis::Time,
            ..Default::default()
        };
        plot(&series, &mrr, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("MRR"));
        assert!(text.contains("stroke-dasharray") || text.matches("<polyline").count() >= 2);
        let log = dir.path().join("log.svg");
        plot(
            &series,
            &PlotOptions {
                log_y: true,
                ..Default::default()
            },
            &log,
        )
        .unwrap();
        assert!(std::fs::read_to_string(&log).unwrap().contains("log scale"));
        assert!(plot(&series, &mrr, &dir.path().join("x.jpg")).is_err());
        let e = plot(
            &series,
            &PlotOptions {
                metric: "MAP".into(),
                ..Default::default()
            },
            &dir.path().join("m.svg"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("recorded: loss, MRR"), "{e}");
    }
}
