//! The Jobs screen's index builds: each session's `rosetta index build`
//! (launched from Search or a shell) with its state and progress, as
//! `rosetta jobs` lists them under "index builds".

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::model::JobsScreen;
use crate::tui::backend::*;
use crate::tui::screens::View;
use crate::tui::widgets::*;

/// Rows the pane shows at most (the title counts them all).
pub(super) const SHOWN: usize = 3;

/// The sessions with an index build: running (or stale) ones first, then
/// the most recently updated.
pub(super) fn builds(j: &JobsScreen) -> Vec<&SessionSummary> {
    let mut v: Vec<&SessionSummary> = j.sessions.iter().filter(|s| s.index.is_some()).collect();
    let key = |s: &SessionSummary| {
        let b = s.index.as_ref().expect("filtered");
        (
            !matches!(b.state.as_str(), "running" | "stale"),
            std::cmp::Reverse(b.status.updated.clone()),
        )
    };
    v.sort_by_key(|s| key(s));
    v
}

/// Height of the pane for `n` builds (none: no pane).
pub(super) fn height(n: usize) -> u16 {
    if n == 0 {
        0
    } else {
        n.min(SHOWN) as u16 + 2
    }
}

/// Draws the index builds: session, state, device and progress (texts
/// done of total, texts/s, ETA), or why a build failed.
pub(super) fn draw_index_builds(
    f: &mut Frame,
    j: &JobsScreen,
    view: &View<'_>,
    area: Rect,
    list: &[&SessionSummary],
) {
    let th = &view.settings.theme;
    let ids: Vec<String> = list.iter().map(|s| s.id.clone()).collect();
    let names = j.labels(&ids);
    let name_w = names
        .iter()
        .map(|n| width(n))
        .max()
        .unwrap_or(0)
        .clamp(8, 28);
    let lines: Vec<Line> = list
        .iter()
        .zip(&names)
        .take(SHOWN)
        .map(|(s, name)| {
            let b = s.index.as_ref().expect("filtered");
            let style = match b.state.as_str() {
                "running" => th.warn(),
                "done" => th.good(),
                "failed" | "stale" => th.bad(),
                _ => th.dim(),
            };
            let what = match (&b.status.error, b.state.as_str()) {
                (Some(e), "failed" | "cancelled") => format!("{} · {e}", b.status.describe()),
                _ => b.status.describe(),
            };
            Line::from(vec![
                Span::raw(format!(
                    " {} ",
                    fit(&rosetta::session::runs::elide_middle(name, name_w), name_w)
                )),
                Span::styled(format!("{:<9} ", b.state), style),
                Span::raw(format!("{:<7} ", trunc(&b.status.device, 7))),
                Span::raw(what),
            ])
        })
        .collect();
    let title = if list.len() > SHOWN {
        format!(
            " Index builds ({}, {SHOWN} shown: `rosetta jobs` lists all) ",
            list.len()
        )
    } else {
        format!(" Index builds ({}) ", list.len())
    };
    f.render_widget(Paragraph::new(lines).block(block(th, title, false)), area);
}
