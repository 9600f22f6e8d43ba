//! Drawing the frame: the tab bar, the status line and the popups, from
//! [`App`] state only; each screen draws itself into the body
//! ([`Screen::draw`]).

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use super::app::*;
use super::backend::*;
use super::config::Theme;
use super::keymap::{Action, Context};
use super::screens::{jobs, Screen, View};

/// Smallest usable terminal.
pub const MIN_W: u16 = 80;
/// Smallest usable terminal height.
pub const MIN_H: u16 = 24;

/// Draws the whole workbench.
pub fn draw(f: &mut Frame, app: &mut App) {
    let area = f.area();
    if area.width < MIN_W || area.height < MIN_H {
        let msg = format!(
            "terminal too small: {}×{}\nthe workbench needs at least {MIN_W}×{MIN_H}\n\nresize, or press q to quit",
            area.width, area.height
        );
        let y = area.height.saturating_sub(4) / 2;
        let r = Rect::new(
            area.x,
            area.y + y,
            area.width,
            area.height.saturating_sub(y),
        );
        f.render_widget(
            Paragraph::new(msg)
                .alignment(Alignment::Center)
                .wrap(Wrap { trim: true }),
            r,
        );
        app.tab_hits.clear();
        return;
    }
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_tabs(f, app, top);
    let view = View {
        settings: &app.settings,
        jobs: &app.jobs,
    };
    match app.tab {
        Tab::Jobs => app.jobs.draw(f, body, &view),
        Tab::Search => app.search.draw(f, body, &view),
        Tab::Neighbours => app.neigh.draw(f, body, &view),
        Tab::Compare => app.compare.draw(f, body, &view),
        Tab::Data => app.data.draw(f, body, &view),
    }
    draw_status(f, app, bottom);
    match &app.popup {
        Some(Popup::Help { scroll }) => draw_help(f, app, *scroll),
        Some(Popup::Form(form)) => jobs::draw_form(f, &app.settings.theme, form),
        Some(Popup::ConfirmQuit(running)) => {
            let text = format!(
                "Jobs you started are still running:\n{}\n\n[l] leave them running and quit\n[c] cancel them and quit\n[Esc] stay",
                running.join(", ")
            );
            draw_dialog(f, &app.settings.theme, "Quit?", &text);
        }
        Some(Popup::ConfirmCancel(id)) => {
            let text = format!("Cancel job {id}?\n\n[y] cancel it   [n/Esc] keep it running");
            draw_dialog(f, &app.settings.theme, "Cancel job", &text);
        }
        Some(Popup::Picker { purpose, selected }) => draw_picker(f, app, *purpose, *selected),
        Some(Popup::Detail {
            session,
            scroll,
            detail,
        }) => jobs::draw_detail(f, &app.settings.theme, session, *scroll, detail),
        Some(Popup::ConfirmDelete(id)) => {
            let text = format!(
                "Delete session {id} and all its files\n(checkpoints, metrics, log)?\n\n[y] delete it   [n/Esc] keep it"
            );
            draw_dialog(f, &app.settings.theme, "Delete session", &text);
        }
        Some(Popup::EditMeta {
            session,
            field,
            value,
        }) => jobs::draw_edit_meta(f, &app.settings.theme, session, *field, value),
        None => {}
    }
}

fn draw_tabs(f: &mut Frame, app: &mut App, area: Rect) {
    let th = &app.settings.theme;
    let mut spans = vec![Span::styled(" rosetta ", th.accent())];
    let mut x = area.x + 9;
    app.tab_hits.clear();
    for (i, t) in Tab::ALL.iter().enumerate() {
        let label = format!(" {} {} ", i + 1, t.title());
        let w = label.chars().count() as u16;
        let style = if *t == app.tab {
            th.accent().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        app.tab_hits.push((x, x + w));
        spans.push(Span::styled(label, style));
        spans.push(Span::raw("│"));
        x += w + 1;
    }
    let help = format!(
        "{} help ",
        app.settings.keymap.keys_for(Context::Global, Action::Help)
    );
    let used: usize = spans.iter().map(|s| s.width()).sum();
    let pad = (area.width as usize).saturating_sub(used + help.chars().count());
    spans.push(Span::raw(" ".repeat(pad)));
    spans.push(Span::styled(help, th.dim()));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn hints(app: &App) -> String {
    match app.tab {
        Tab::Jobs => app.jobs.hints(&app.settings.keymap),
        Tab::Search => app.search.hints(&app.settings.keymap),
        Tab::Neighbours => app.neigh.hints(&app.settings.keymap),
        Tab::Compare => app.compare.hints(&app.settings.keymap),
        Tab::Data => app.data.hints(&app.settings.keymap),
    }
}

fn draw_status(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let line = match &app.message {
        Some(Message::Error(e)) => Line::from(Span::styled(format!(" ✗ {e}"), th.bad())),
        Some(Message::Info(s)) => Line::from(Span::styled(format!(" {s}"), th.good())),
        None => Line::from(Span::styled(
            format!(" {}", fit_hints(&hints(app), area.width as usize)),
            th.dim(),
        )),
    };
    f.render_widget(Paragraph::new(line), area);
}

/// Status-line hints (`a · b · c`) cut at an item boundary to fit `width`
/// columns (with the leading space), ending in `· …` when some were dropped:
/// the help popup lists them all.
pub(crate) fn fit_hints(hints: &str, width: usize) -> String {
    let w = |s: &str| Span::raw(s).width();
    if w(hints) < width {
        return hints.to_string();
    }
    let items: Vec<&str> = hints.split(" · ").collect();
    for n in (1..items.len()).rev() {
        let s = format!("{} · …", items[..n].join(" · "));
        if w(&s) < width {
            return s;
        }
    }
    "…".to_string()
}

/// Characters after which a word too wide for a line is broken, after a
/// path's `/` (or `\`) before any other (hyphenated names, key=value lists).
const WRAP_AFTER: &[char] = &['-', '_', '.', ',', ':', '=', ';'];

/// Byte ranges of `text`'s lines wrapped at `width` cells: at white space,
/// a word wider than a line split after the last `/` that fits, else the
/// last of [`WRAP_AFTER`], else by characters, `\n` ending a line; every
/// character of `text` except the white space at a break falls in a range.
pub(crate) fn wrap_ranges(text: &str, width_cells: usize) -> Vec<(usize, usize)> {
    let w = width_cells.max(1);
    let mut lines = Vec::new();
    let base = text.as_ptr() as usize;
    for para in text.split('\n') {
        let p0 = para.as_ptr() as usize - base;
        let mut cur: Option<(usize, usize)> = None;
        for word in para.split_whitespace() {
            let start = word.as_ptr() as usize - base;
            let end = start + word.len();
            if let Some((a, _)) = cur {
                if width(&text[a..end]) <= w {
                    cur = Some((a, end));
                    continue;
                }
                lines.extend(cur.take());
            }
            // a new line starts with this word, split when wider than a
            // line: after the last separator that fits (a path breaks after
            // a `/`), else at the width
            let mut a = start;
            while width(&text[a..end]) > w {
                let mut cells = 0;
                let mut cut = a;
                let (mut after_slash, mut after_sep) = (None, None);
                for (i, c) in text[a..end].char_indices() {
                    let cw = width(c.encode_utf8(&mut [0; 4]));
                    if cells + cw > w && i > 0 {
                        break;
                    }
                    cells += cw;
                    cut = a + i + c.len_utf8();
                    if c == '/' || c == '\\' {
                        after_slash = Some(cut);
                    } else if WRAP_AFTER.contains(&c) {
                        after_sep = Some(cut);
                    }
                }
                let cut = after_slash.or(after_sep).unwrap_or(cut);
                lines.push((a, cut));
                a = cut;
            }
            cur = Some((a, end));
        }
        match cur {
            Some(l) => lines.push(l),
            None => lines.push((p0, p0)),
        }
    }
    lines
}

pub(crate) fn block<'a>(th: &Theme, title: impl Into<Line<'a>>, focused: bool) -> Block<'a> {
    let b = Block::default().borders(Borders::ALL).title(title);
    if focused {
        b.border_style(th.accent())
    } else {
        b.border_style(th.dim())
    }
}

/// `3m05s`, `1h02m`, `12s`.
pub fn fmt_duration(s: f64) -> String {
    rosetta::util::fmt_duration(s)
}

pub(crate) fn bar(frac: f64, width: usize) -> String {
    let frac = frac.clamp(0.0, 1.0);
    let full = (frac * width as f64).round() as usize;
    format!(
        "{}{} {:>3.0}%",
        "█".repeat(full),
        "░".repeat(width - full),
        frac * 100.0
    )
}

pub(crate) fn state_style(th: &Theme, s: &SessionSummary) -> Style {
    match s.state {
        State::Running if s.alive == Some(false) => th.bad(),
        State::Running | State::Queued => th.warn(),
        State::Done => th.good(),
        State::Failed => th.bad(),
        State::Cancelled => th.dim(),
    }
}

pub(crate) fn state_label(s: &SessionSummary) -> String {
    if let Some(l) = &s.slurm {
        l.clone()
    } else if !s.state.is_final() && s.alive == Some(false) {
        format!("{}?", s.state.as_str())
    } else {
        s.state.as_str().to_string()
    }
}

/// Display width of `s` in terminal cells (as ratatui counts them).
pub(crate) fn width(s: &str) -> usize {
    Span::raw(s).width()
}

/// `s` cut to at most `n` cells, with `…` when cut.
pub(crate) fn trunc(s: &str, n: usize) -> String {
    if width(s) <= n {
        return s.to_string();
    }
    let mut t = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = width(c.encode_utf8(&mut [0; 4]));
        if w + cw + 1 > n {
            break;
        }
        t.push(c);
        w += cw;
    }
    t.push('…');
    t
}

/// `s` cut or padded to exactly `n` cells.
pub(crate) fn fit(s: &str, n: usize) -> String {
    let mut t = trunc(s, n);
    let w = width(&t);
    t.push_str(&" ".repeat(n.saturating_sub(w)));
    t
}

/// At most `max` points: per bucket of consecutive points, the min and max
/// (in x order), so spikes survive downsampling.
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 4 {
        return points.to_vec();
    }
    let buckets = max / 2;
    let size = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max);
    for chunk in points.chunks(size) {
        let (mut lo, mut hi) = (0, 0);
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[lo].1 {
                lo = i;
            }
            if p.1 > chunk[hi].1 {
                hi = i;
            }
        }
        let (a, b) = (lo.min(hi), lo.max(hi));
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    out
}

pub(crate) fn input_line<'a>(th: &Theme, label: &str, value: &str, editing: bool) -> Line<'a> {
    Line::from(vec![
        Span::styled(format!("{label} "), th.dim()),
        Span::styled(
            value.to_string(),
            if editing {
                th.accent()
            } else {
                Style::default()
            },
        ),
        Span::raw(if editing { "▏" } else { "" }),
    ])
}

pub(crate) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn draw_help(f: &mut Frame, app: &App, scroll: u16) {
    let th = &app.settings.theme;
    let area = centered(f.area(), 76, f.area().height.saturating_sub(2));
    let mut lines = Vec::new();
    for (title, rows) in app.settings.keymap.help() {
        lines.push(Line::from(Span::styled(title, th.accent())));
        for (keys, desc) in rows {
            lines.push(Line::from(vec![
                Span::raw(format!("  {keys:<18} ")),
                Span::raw(desc),
            ]));
        }
        lines.push(Line::raw(""));
    }
    lines.push(Line::from(Span::styled("Mouse", th.accent())));
    for (what, desc) in [
        ("click a tab title", "switch to that screen"),
        (
            "wheel",
            "move down / up in the list under the cursor's screen",
        ),
    ] {
        lines.push(Line::raw(format!("  {what:<18} {desc}")));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled("Symbols", th.accent())));
    for (sym, desc) in [
        ("●", "Jobs: a marked run (overlaid in the charts)"),
        ("◆", "Compare: the baseline the others are tested against"),
        ("▲ ▼", "significantly better / worse than the baseline"),
        ("✓", "Search: a result judged relevant in the qrels"),
        ("✓gold", "Neighbours: a dictionary translation of the word"),
        ("▶", "the form field being edited"),
        ("✗", "an error (the message says what and where)"),
        ("█░", "progress of a running job"),
    ] {
        lines.push(Line::raw(format!("  {sym:<18} {desc}")));
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled(
        format!(
            "  keys and colours: {} (`rosetta --print-config` prints the defaults)   log: {}",
            super::config::default_path().display(),
            super::log::path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "none".into())
        ),
        th.dim(),
    )));
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines)
            .scroll((scroll, 0))
            .wrap(Wrap { trim: false })
            .block(block(th, " Help · ↑↓ scroll · Esc close ", true)),
        area,
    );
}

fn draw_dialog(f: &mut Frame, th: &Theme, title: &str, text: &str) {
    let h = text.lines().count() as u16 + 2;
    let area = centered(f.area(), 60, h);
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(text.to_string())
            .wrap(Wrap { trim: false })
            .block(block(th, format!(" {title} "), true)),
        area,
    );
}

fn draw_picker(f: &mut Frame, app: &App, purpose: PickFor, selected: usize) {
    let th = &app.settings.theme;
    let list = app.pickable();
    let h = (list.len() as u16 + 2).clamp(3, f.area().height.saturating_sub(4));
    let area = centered(f.area(), 64, h);
    f.render_widget(Clear, area);
    let title = match purpose {
        PickFor::Search => " Session to search with ",
        PickFor::Neighbours(0) => " Session (left pane) ",
        PickFor::Neighbours(_) => " Session (right pane) ",
    };
    if list.is_empty() {
        f.render_widget(
            Paragraph::new(" no sessions yet").block(block(th, title, true)),
            area,
        );
        return;
    }
    // sessions by their names, as on Jobs
    let ids: Vec<String> = list.iter().map(|s| s.id.clone()).collect();
    let names = app.jobs.names(&ids);
    let items: Vec<ListItem> = list
        .iter()
        .zip(&names)
        .map(|(s, name)| {
            ListItem::new(Line::from(vec![
                Span::raw(format!(
                    "{} ",
                    fit(&rosetta::session::runs::elide_middle(name, 28), 28)
                )),
                Span::styled(format!("{:<10}", state_label(s)), state_style(th, s)),
                Span::raw(format!("{:<8} ", s.model)),
                Span::raw(
                    s.best_mrr
                        .map(|m| format!("MRR {m:.4}"))
                        .unwrap_or_default(),
                ),
            ]))
        })
        .collect();
    let mut st = ListState::default().with_selected(Some(selected));
    f.render_stateful_widget(
        List::new(items)
            .block(block(th, title, true))
            .highlight_style(th.selected()),
        area,
        &mut st,
    );
}

/// A short name for a workspace file: its folder for `…/NAME/workspace.toml`,
/// else the file's stem (`assets/workspaces/enhi-xquad.toml` → `enhi-xquad`).
pub(crate) fn workspace_label(path: &str) -> String {
    rosetta::session::runs::workspace_label(std::path::Path::new(path))
}

#[cfg(test)]
mod fit_tests {
    use super::fit_hints;

    #[test]
    fn hints_are_cut_between_items_to_fit() {
        let h = "n new · c cancel · r resume · y duplicate · m mark";
        assert_eq!(fit_hints(h, 80), h);
        assert_eq!(fit_hints(h, 30), "n new · c cancel · …");
        assert_eq!(fit_hints(h, 5), "…");
    }
}
