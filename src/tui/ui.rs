//! Drawing the frame: the tab bar, the status line and the popups, from
//! [`App`] state only; each screen draws itself into the body
//! ([`Screen::draw`]).

use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, List, ListItem, ListState, Paragraph, Wrap};
use ratatui::Frame;

use super::app::*;
use super::keymap::{Action, Context};
use super::screens::{Modal, Screen, View};
use super::widgets::*;

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
    app.frames += 1;
    let view = View {
        settings: &app.settings,
        sessions: app.sessions(),
    };
    match app.tab {
        Tab::Jobs => app.jobs.draw(f, body, &view),
        Tab::Search => app.search.draw(f, body, &view),
        Tab::Neighbours => app.neigh.draw(f, body, &view),
        Tab::Compare => app.compare.draw(f, body, &view),
        Tab::Data => app.data.draw(f, body, &view),
    }
    draw_status(f, app, bottom);
    if let Some(p) = &app.jobs.popup {
        p.draw(f, &view);
    }
    match &app.popup {
        Some(Popup::Help { scroll }) => draw_help(f, app, *scroll),
        Some(Popup::ConfirmQuit(running)) => {
            let text = format!(
                "Jobs you started are still running:\n{}\n\n[l] leave them running and quit\n[c] cancel them and quit\n[Esc] stay",
                running.join(", ")
            );
            draw_dialog(f, &app.settings.theme, "Quit?", &text);
        }
        Some(Popup::Picker { purpose, selected }) => draw_picker(f, app, *purpose, *selected),
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

/// The status line: the busy mark while work is in flight (a spinner and
/// what runs), then the last message, else the screen's key hints.
fn draw_status(f: &mut Frame, app: &App, area: Rect) {
    let th = &app.settings.theme;
    let mut spans = Vec::new();
    let mut room = area.width as usize;
    if let Some(mark) = app.busy_mark() {
        let mark = format!(" {mark} ·");
        room = room.saturating_sub(width(&mark));
        spans.push(Span::styled(mark, th.warn()));
    }
    spans.push(match &app.message {
        Some(Message::Error(e)) => Span::styled(format!(" ✗ {e}"), th.bad()),
        Some(Message::Info(s)) => Span::styled(format!(" {s}"), th.good()),
        None => Span::styled(format!(" {}", fit_hints(&hints(app), room)), th.dim()),
    });
    f.render_widget(Paragraph::new(Line::from(spans)), area);
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

/// The session picker: each session's name, state, model with the settings
/// that set it apart from the others listed (`s2net dim=16`, the engine's
/// `differing_labels`) and best MRR. The popup is as wide as its columns
/// (at most the frame less 4); when narrower, the widest column other than
/// the model narrows first ([`fit_widths`]).
fn draw_picker(f: &mut Frame, app: &App, purpose: PickFor, selected: usize) {
    let th = &app.settings.theme;
    let list = app.pickable();
    let h = (list.len() as u16 + 2).clamp(3, f.area().height.saturating_sub(4));
    let title = match purpose {
        PickFor::Search => " Session to search with ",
        PickFor::Neighbours(0) => " Session (left pane) ",
        PickFor::Neighbours(_) => " Session (right pane) ",
    };
    if list.is_empty() {
        let area = centered(f.area(), 64, h);
        f.render_widget(Clear, area);
        f.render_widget(
            Paragraph::new(" no sessions yet").block(block(th, title, true)),
            area,
        );
        return;
    }
    // sessions by their names, as on Jobs
    let ids: Vec<String> = list.iter().map(|s| s.id.clone()).collect();
    let names = app.jobs.names(&ids);
    let maps: Vec<&std::collections::BTreeMap<String, String>> =
        list.iter().map(|s| &s.settings).collect();
    let models: Vec<String> = list
        .iter()
        .zip(rosetta::session::runs::differing_labels(&maps, &["model"]))
        .map(|(s, d)| {
            if d.is_empty() {
                s.model.clone()
            } else {
                format!("{} {d}", s.model)
            }
        })
        .collect();
    let mrr: Vec<String> = list
        .iter()
        .map(|s| {
            s.best_mrr
                .map(|m| format!("MRR {m:.4}"))
                .unwrap_or_default()
        })
        .collect();
    let states: Vec<String> = list.iter().map(|s| state_label(s)).collect();
    let widest = |v: &[String]| v.iter().map(|x| width(x)).max().unwrap_or(0);
    let cols = [
        ColWidth::new(widest(&names), 12),
        ColWidth::new(widest(&states), 4),
        ColWidth::keep(widest(&models), widest(&models).min(12)),
        ColWidth::fixed(widest(&mrr)),
    ];
    // borders, and one cell after each of the first three columns
    let most = (f.area().width as usize).saturating_sub(4);
    let w = fit_widths(&cols, most.saturating_sub(2 + 3));
    let popup_w = (w.iter().sum::<usize>() + 2 + 3).clamp(40, most.max(40));
    let area = centered(f.area(), popup_w as u16, h);
    f.render_widget(Clear, area);
    let items: Vec<ListItem> = list
        .iter()
        .enumerate()
        .map(|(i, s)| {
            ListItem::new(Line::from(vec![
                Span::raw(format!(
                    "{} ",
                    fit(&rosetta::session::runs::elide_middle(&names[i], w[0]), w[0])
                )),
                Span::styled(format!("{} ", fit(&states[i], w[1])), state_style(th, s)),
                Span::raw(format!("{} ", fit(&models[i], w[2]))),
                Span::raw(mrr[i].clone()),
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
