//! The Jobs screen's log pane beside the curves: the selected session's
//! `log.txt`.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::model::JobsScreen;
use crate::tui::keymap::{Action, Context};
use crate::tui::screens::View;
use crate::tui::widgets::*;

/// The log pane: the selected session's `log.txt`, its last lines as many
/// as fit (the end followed as the job writes).
pub(super) fn draw_log_pane(f: &mut Frame, j: &JobsScreen, view: &View<'_>, area: Rect) {
    let th = &view.settings.theme;
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
