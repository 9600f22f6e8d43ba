//! The Jobs screen's detail panes: the log pane beside the curves, the
//! details popup of a session and the name/tags/note editor.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::View;
use crate::tui::backend::*;
use crate::tui::config::Theme;
use crate::tui::keymap::{Action, Context};
use crate::tui::ui::*;

/// The log pane: the selected session's `log.txt`, its last lines as many
/// as fit (the end followed as the job writes).
pub(super) fn draw_log_pane(f: &mut Frame, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
    let j = &view.jobs;
    let hide = view
        .settings
        .keymap
        .keys_for(Context::Jobs, Action::ToggleLogPane);
    let title = format!(" log.txt · {hide} hide ");
    let sel = j.selected.as_deref();
    let lines: Vec<Line> = match (&j.log, sel) {
        (_, None) => vec![Line::styled(" no session selected", th.dim())],
        (Some((s, Ok(lines))), Some(id)) if s == id => {
            if lines.is_empty() {
                vec![Line::styled(" the job has written no log yet", th.dim())]
            } else {
                log_rows(
                    lines,
                    area.width.saturating_sub(2) as usize,
                    area.height.saturating_sub(2) as usize,
                )
                .into_iter()
                .map(|(time, text)| Line::from(vec![Span::styled(time, th.dim()), Span::raw(text)]))
                .collect()
            }
        }
        (Some((s, Err(e))), Some(id)) if s == id => {
            vec![Line::styled(format!(" ✗ {e}"), th.bad())]
        }
        _ => vec![Line::styled(" reading…", th.dim())],
    };
    f.render_widget(Paragraph::new(lines).block(block(th, title, false)), area);
}

/// The last `height` rows of `lines` wrapped at `width` cells, as
/// (time, text): a line's leading UTC stamp (`2026-11-26T10:48:04Z`) is
/// shown as its time of day (`10:48:04`), continuation rows are indented.
fn log_rows(lines: &[String], width: usize, height: usize) -> Vec<(String, String)> {
    let mut rows: Vec<(String, String)> = Vec::new();
    for l in lines.iter().rev() {
        let (time, text) = match l.split_once(' ') {
            Some((stamp, rest))
                if stamp.len() == 20
                    && stamp.ends_with('Z')
                    && stamp.as_bytes().get(10) == Some(&b'T') =>
            {
                (format!("{} ", &stamp[11..19]), rest)
            }
            _ => (String::new(), l.as_str()),
        };
        let indent = time.chars().count();
        let mut part: Vec<(String, String)> =
            wrap_ranges(text, width.saturating_sub(indent).max(8))
                .into_iter()
                .enumerate()
                .map(|(i, (a, b))| {
                    let lead = if i == 0 {
                        time.clone()
                    } else {
                        " ".repeat(indent)
                    };
                    (lead, text[a..b].to_string())
                })
                .collect();
        while let Some(r) = part.pop() {
            rows.push(r);
            if rows.len() == height {
                rows.reverse();
                return rows;
            }
        }
    }
    rows.reverse();
    rows
}

/// Lines of the detail pane (for scrolling to the end).
pub(super) fn detail_lines_len(d: &Option<Result<Box<RunDetail>, String>>) -> usize {
    match d {
        Some(Ok(d)) => detail_text(d).len(),
        _ => 0,
    }
}

/// The detail pane's text: state, meta, best figures, checkpoints, config
/// and the end of the log.
fn detail_text(d: &RunDetail) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = vec![(format!("{} · {}", d.id, d.state), true)];
    let mut line = |s: String, head: bool| v.push((s, head));
    line(format!("folder      {}", d.dir.display()), false);
    if !d.meta.name.is_empty() {
        line(format!("name        {}", d.meta.name), false);
    }
    if !d.meta.tags.is_empty() {
        line(format!("tags        {}", d.meta.tags.join(", ")), false);
    }
    for (i, n) in d.meta.note.lines().enumerate() {
        let lead = if i == 0 {
            "note        "
        } else {
            "            "
        };
        line(format!("{lead}{n}"), false);
    }
    line(String::new(), false);
    line("Best figures (validation; loss: lowest step)".into(), true);
    if d.best.is_empty() {
        line("  none recorded yet".into(), false);
    }
    for (k, (val, at)) in &d.best {
        let at = if k == "loss" {
            format!("step {at}")
        } else {
            format!("epoch {at}")
        };
        line(format!("  {k:<12} {val:.4}  ({at})"), false);
    }
    line(String::new(), false);
    line("Checkpoints".into(), true);
    if d.checkpoints.is_empty() {
        line("  none".into(), false);
    }
    for c in &d.checkpoints {
        line(
            format!(
                "  {:<22} {:>9.1} MB  {}",
                c.name,
                c.bytes as f64 / 1e6,
                c.modified
            ),
            false,
        );
    }
    line(String::new(), false);
    line("config.toml".into(), true);
    for l in d.config.lines() {
        line(format!("  {l}"), false);
    }
    line(String::new(), false);
    line(format!("log.txt (last {} lines)", d.log_tail.len()), true);
    for l in &d.log_tail {
        line(format!("  {l}"), false);
    }
    for p in &d.problems {
        line(format!("  ✗ {p}"), false);
    }
    v
}

/// Draws the detail pane of a session (a popup of the Jobs screen).
pub fn draw_detail(
    f: &mut Frame,
    th: &Theme,
    session: &str,
    scroll: u16,
    detail: &Option<Result<Box<RunDetail>, String>>,
) {
    let area = centered(
        f.area(),
        f.area().width.saturating_sub(4).min(110),
        f.area().height.saturating_sub(2),
    );
    f.render_widget(Clear, area);
    // G scrolls to the end: at most so far that the last line shows
    let inner = area.height.saturating_sub(2);
    let scroll = scroll.min((detail_lines_len(detail) as u16).saturating_sub(inner));
    let lines: Vec<Line> = match detail {
        None => vec![Line::raw(format!(" loading {session}…"))],
        Some(Err(e)) => vec![Line::from(Span::styled(format!(" ✗ {e}"), th.bad()))],
        Some(Ok(d)) => detail_text(d)
            .into_iter()
            .map(|(t, head)| {
                if head {
                    Line::from(Span::styled(t, th.accent()))
                } else {
                    Line::raw(t)
                }
            })
            .collect(),
    };
    f.render_widget(
        Paragraph::new(lines).scroll((scroll, 0)).block(block(
            th,
            format!(" {session} · ↑↓ PgUp/PgDn scroll · Esc close "),
            true,
        )),
        area,
    );
}

/// Draws the name / tags / note editor (a popup of the Jobs screen).
pub fn draw_edit_meta(f: &mut Frame, th: &Theme, session: &str, field: MetaField, value: &str) {
    let area = centered(f.area(), 70, 6);
    f.render_widget(Clear, area);
    let hint = match field {
        MetaField::Name => "empty: back to the folder name",
        MetaField::Tags => "words separated by spaces or commas",
        MetaField::Note => "free text; empty removes it",
    };
    let lines = vec![
        input_line(th, &format!(" {}:", field.as_str()), value, true),
        Line::raw(""),
        Line::from(Span::styled(
            format!(" {hint} · Enter save · Ctrl-U clear · Esc cancel"),
            th.dim(),
        )),
    ];
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(
                th,
                format!(" {} of {session} ", field.as_str()),
                true,
            )),
        area,
    );
}
