//! The Jobs screen's popup panes: the details popup of a session and the
//! name/tags/note editor.

use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use crate::tui::backend::*;
use crate::tui::config::Theme;
use crate::tui::widgets::*;

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
