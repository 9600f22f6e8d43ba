//! The Jobs screen's charts: the loss (or its parts) and the validation
//! figure, of the selected and marked sessions.

use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, LegendPosition, Paragraph};
use ratatui::Frame;

use super::model::JobsScreen;
use crate::tui::config::Theme;
use crate::tui::screens::View;
use crate::tui::widgets::*;
use rosetta::plot::{self, PlotOptions, XAxis};
use rosetta::session::runs::elide_middle;

/// Recent window of the charts, in records (the title says which steps,
/// epochs or times they span).
pub const RECENT_POINTS: usize = 500;

fn chart_sessions(j: &JobsScreen) -> Vec<String> {
    let mut v: Vec<String> = j.marked.iter().cloned().collect();
    if let Some(s) = &j.selected {
        if !v.contains(s) && j.selected_session().is_some() {
            v.insert(0, s.clone());
        }
    }
    v
}

/// Line marker of overlaid curve `i`: without colour (NO_COLOR) each curve
/// gets its own kind of dot, shown in front of its legend name.
fn series_marker(th: &Theme, i: usize) -> (Marker, &'static str) {
    const KINDS: [(Marker, &str); 4] = [
        (Marker::Braille, "⠶"),
        (Marker::Dot, "•"),
        (Marker::Block, "█"),
        (Marker::HalfBlock, "▀"),
    ];
    if th.mono {
        KINDS[i % KINDS.len()]
    } else {
        KINDS[0]
    }
}

/// One drawn curve: legend name (empty: none), style, marker, points and
/// whether its points stand alone (a best-value marker).
struct Drawn {
    name: String,
    style: Style,
    marker: Marker,
    points: Vec<(f64, f64)>,
    scatter: bool,
}

/// How one chart is drawn.
struct ChartLook {
    title: String,
    x: XAxis,
    log_y: bool,
    empty: &'static str,
    legend: LegendPosition,
}

/// The curves of `lines` (the engine's series, in display coordinates) as
/// drawn: in an overlay one curve per run with its own colour and (without
/// colour) marker, else the raw curve faint beneath the smoothed one; each
/// with its best value marked `█`.
fn drawn(th: &Theme, lines: &[plot::Line], overlay: bool, max_pts: usize) -> Vec<Drawn> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.raw.is_empty() {
            continue;
        }
        let (marker, glyph) = series_marker(th, i);
        let style = if overlay || lines.len() > 1 {
            th.series(i)
        } else {
            th.accent()
        };
        let name = if th.mono && (overlay || lines.len() > 1) {
            format!("{glyph} {}", l.label)
        } else {
            l.label.clone()
        };
        if let Some(sm) = &l.smooth {
            if !overlay {
                out.push(Drawn {
                    name: if lines.len() > 1 {
                        String::new()
                    } else {
                        "raw".into()
                    },
                    style: th.dim(),
                    marker: Marker::Braille,
                    points: downsample(&l.raw, max_pts),
                    scatter: false,
                });
            }
            out.push(Drawn {
                name,
                style,
                marker,
                points: downsample(sm, max_pts),
                scatter: false,
            });
        } else {
            out.push(Drawn {
                name,
                style,
                marker,
                points: downsample(&l.raw, max_pts),
                scatter: false,
            });
        }
        if let Some(b) = l.best {
            out.push(Drawn {
                name: String::new(),
                style: style.add_modifier(ratatui::style::Modifier::BOLD),
                marker: Marker::Block,
                points: vec![b],
                scatter: true,
            });
        }
    }
    out
}

/// Draws one chart of the Jobs screen: axes ranged on the data (the
/// engine's `x_range` / `y_range`: never forced to 0), labelled in steps,
/// epochs or times and, on a log axis, in the values themselves.
fn draw_lines(
    f: &mut Frame,
    th: &Theme,
    area: Rect,
    look: ChartLook,
    lines: &[plot::Line],
    curves: &[Drawn],
) {
    let (Some(xb), Some(yb)) = (plot::x_range(lines), plot::y_range(lines)) else {
        f.render_widget(
            Paragraph::new(Span::styled(look.empty, th.dim())).block(block(th, look.title, false)),
            area,
        );
        return;
    };
    let datasets = curves
        .iter()
        .map(|d| {
            let mut ds = Dataset::default()
                .marker(d.marker)
                .graph_type(if d.scatter {
                    GraphType::Scatter
                } else {
                    GraphType::Line
                })
                .style(d.style)
                .data(&d.points);
            if !d.name.is_empty() {
                ds = ds.name(d.name.clone());
            }
            ds
        })
        .collect();
    // points at one x (a single evaluation): that x alone, mid-axis, not
    // the half units drawn either side of it
    let x_labels: Vec<Span> = match plot::x_span(lines) {
        Some([a, b]) if a == b => vec![
            Span::raw(""),
            Span::raw(plot::fmt_x(look.x, a)),
            Span::raw(""),
        ],
        _ => label_ticks(xb)
            .into_iter()
            .map(|v| Span::raw(plot::fmt_x(look.x, v)))
            .collect(),
    };
    let y_labels: Vec<Span> = label_ticks(yb)
        .into_iter()
        .map(|v| Span::raw(plot::fmt_y(look.log_y, v)))
        .collect();
    let chart = Chart::new(datasets)
        .block(block(th, look.title, false))
        .x_axis(
            Axis::default()
                .title(look.x.as_str())
                .bounds(xb)
                .labels(x_labels),
        )
        .y_axis(Axis::default().bounds(yb).labels(y_labels))
        .legend_position(Some(look.legend))
        .hidden_legend_constraints((Constraint::Percentage(60), Constraint::Percentage(60)));
    f.render_widget(chart, area);
}

/// Axis ends and middle.
fn label_ticks(b: [f64; 2]) -> Vec<f64> {
    vec![b[0], (b[0] + b[1]) / 2.0, b[1]]
}

/// Overlay labels of `ids`: display names, shared prefix elided, then cut
/// in the middle to `n` characters.
fn overlay_labels(j: &JobsScreen, ids: &[String], n: usize) -> Vec<String> {
    j.labels(ids)
        .into_iter()
        .map(|l| elide_middle(&l, n))
        .collect()
}

pub(super) fn draw_loss_chart(f: &mut Frame, j: &JobsScreen, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
    let max_pts = (area.width as usize).saturating_sub(10).max(8) * 2;
    let ids = chart_sessions(j);
    let overlay = !j.marked.is_empty();
    let opts = PlotOptions {
        metric: "loss".into(),
        x: j.x_axis,
        log_y: j.log_loss,
        smooth: Some(j.smooth()),
        last: (!j.full_history).then_some(RECENT_POINTS),
    };
    if j.show_parts && !overlay {
        if let Some(s) = ids.first().and_then(|id| j.series.get(id)) {
            return draw_parts_chart(f, view, area, &s.curves, &opts, max_pts);
        }
    }
    let labels = overlay_labels(j, &ids, 18);
    let mut lines: Vec<plot::Line> = Vec::new();
    let mut phase_title = String::new();
    let mut phase_short = String::new();
    for (id, label) in ids.iter().zip(labels) {
        let Some(s) = j.series.get(id) else { continue };
        if s.curves.loss.is_empty() {
            continue;
        }
        let mut pts = s.curves.points("loss", j.x_axis);
        // a job of several phases (layers): one phase at a time, their
        // losses differ in scale
        let phases = &s.curves.loss_phases;
        if !overlay && phases.len() > 1 {
            let k = j
                .loss_phase
                .unwrap_or(phases.len() - 1)
                .min(phases.len() - 1);
            phase_title = format!(
                "phase {} ({}/{}, [ ] other phases{}) · ",
                phases[k].0,
                k + 1,
                phases.len(),
                if j.loss_phase.is_none() {
                    ", following"
                } else {
                    ""
                }
            );
            phase_short = format!("phase {} ({}/{}) · ", phases[k].0, k + 1, phases.len());
            let start = phases[k].1;
            let end = phases.get(k + 1).map_or(pts.len(), |p| p.1);
            pts = pts[start..end.min(pts.len())].to_vec();
        }
        lines.push(plot::line_from_points(
            if overlay { label } else { "EMA".into() },
            pts,
            true,
            &opts,
        ));
    }
    let mut t = plot::title(&opts, &lines);
    if !j.full_history && lines.iter().any(|l| l.raw.len() >= RECENT_POINTS) {
        t.push_str(" (recent)");
    }
    let curves = drawn(th, &lines, overlay, max_pts);
    // the longest title that fits the border: "Training " goes first, then
    // the phase keys' hint, then the smoothing factor (the legend says EMA)
    let short = t.split(" · EMA").next().unwrap_or(&t).to_string();
    let title = [
        format!(" Training {phase_title}{t} "),
        format!(" {phase_title}{t} "),
        format!(" {phase_short}{t} "),
        format!(" {phase_short}{short} "),
        format!(" {short} "),
    ]
    .into_iter()
    .find(|c| c.chars().count() + 2 <= area.width as usize)
    .unwrap_or_else(|| format!(" {short} "));
    draw_lines(
        f,
        th,
        area,
        ChartLook {
            title,
            x: j.x_axis,
            log_y: j.log_loss,
            empty: " no training steps yet",
            legend: LegendPosition::TopRight,
        },
        &lines,
        &curves,
    );
}

/// The step records' named parts of one session, smoothed: an adversarial
/// job's loss terms next to its discriminator's loss and accuracy (the
/// game). The gradient norm and the regulariser, of other scales, are left
/// to `metrics.jsonl`.
fn draw_parts_chart(
    f: &mut Frame,
    view: &View<'_>,
    area: Rect,
    curves: &rosetta::session::Curves,
    opts: &PlotOptions,
    max_pts: usize,
) {
    let th = &view.settings.theme;
    let opts = PlotOptions {
        log_y: false,
        ..opts.clone()
    };
    let lines: Vec<plot::Line> = curves
        .parts
        .keys()
        .filter(|name| !matches!(name.as_str(), "grad_norm" | "L_reg"))
        .map(|name| {
            let o = PlotOptions {
                metric: name.clone(),
                ..opts.clone()
            };
            plot::line(curves, name.clone(), &o)
        })
        .collect();
    // one curve per part, smoothed, no raw curves beneath
    let lines: Vec<plot::Line> = lines
        .into_iter()
        .map(|mut l| {
            if let Some(s) = l.smooth.take() {
                l.raw = s;
            }
            l
        })
        .collect();
    let curves = drawn(th, &lines, true, max_pts);
    let range = plot::x_span(&lines)
        .map(|r| format!(" · {}", plot::range_label(opts.x, r)))
        .unwrap_or_default();
    draw_lines(
        f,
        th,
        area,
        ChartLook {
            title: format!(" Loss terms and discriminator (EMA){range} · t: the loss "),
            x: opts.x,
            log_y: false,
            empty: " this job logs no loss terms (t: the loss)",
            legend: LegendPosition::TopRight,
        },
        &lines,
        &curves,
    );
}

pub(super) fn draw_valid_chart(f: &mut Frame, j: &JobsScreen, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
    let ids = chart_sessions(j);
    let overlay = !j.marked.is_empty();
    let metric = j.chart_metric.clone().unwrap_or_else(|| "MRR".into());
    let labels = overlay_labels(j, &ids, 18);
    let mut lines = Vec::new();
    for (id, label) in ids.iter().zip(labels) {
        let Some(s) = j.series.get(id) else { continue };
        let step_metric = plot::is_step_metric(&s.curves, &metric);
        let opts = PlotOptions {
            metric: metric.clone(),
            x: j.x_axis,
            log_y: false,
            smooth: Some(if step_metric { j.smooth() } else { 0.0 }),
            last: (!j.full_history && step_metric).then_some(RECENT_POINTS),
        };
        let l = plot::line(
            &s.curves,
            if overlay { label } else { metric.clone() },
            &opts,
        );
        if !l.raw.is_empty() {
            lines.push(l);
        }
    }
    let opts = PlotOptions {
        metric: metric.clone(),
        x: j.x_axis,
        smooth: Some(0.0),
        ..Default::default()
    };
    let mut t = plot::title(&opts, &lines);
    if let Some(b) = lines
        .first()
        .and_then(|l| l.best_value)
        .filter(|_| !overlay)
    {
        t.push_str(&format!(" · best {}", plot::fmt_y(false, b)));
    }
    let curves = drawn(th, &lines, overlay, (area.width as usize).max(8) * 2);
    draw_lines(
        f,
        th,
        area,
        ChartLook {
            title: format!(" {t} "),
            x: j.x_axis,
            log_y: false,
            empty: " no validation yet (m: another figure)",
            legend: LegendPosition::BottomRight,
        },
        &lines,
        &curves,
    );
}
