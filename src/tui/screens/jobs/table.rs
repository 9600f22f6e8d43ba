//! The Jobs screen's sessions table.

use std::collections::{BTreeSet, HashMap};

use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use super::model::{JobRow, JobsScreen};
use crate::tui::backend::*;
use crate::tui::keymap::{Action, Context};
use crate::tui::screens::View;
use crate::tui::widgets::*;
use rosetta::jobs;
use rosetta::session::runs::elide_middle;

/// One column of the sessions table: header, width and a cell per row.
struct Column<'a> {
    header: String,
    width: u16,
    kind: ColKind,
    cell: Box<dyn Fn(&SessionSummary) -> Cell<'static> + 'a>,
}

/// What a column shows, for the rows of a sweep and its points.
#[derive(Debug, Clone, PartialEq)]
enum ColKind {
    State,
    Model,
    Setting(String),
    Mrr,
    Other,
}

/// The sweep id of a sweep row's key (or a point row's).
pub(super) fn k_sweep(key: &str) -> &str {
    let id = key.strip_prefix(".sweep/").unwrap_or(key);
    match id.rsplit_once('/') {
        Some((s, i)) if i.parse::<usize>().is_ok() => s,
        _ => id,
    }
}

/// State counts, compactly: `2 running, 6 queued`.
pub(super) fn counts_text(c: &std::collections::BTreeMap<&'static str, usize>) -> String {
    c.iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A group's states in a state cell: `4 done`, or `3/8 done` when mixed.
fn states_cell(states: &[State]) -> String {
    let n = states.len();
    match states.first() {
        Some(s0) if states.iter().all(|s| s == s0) => format!("{n} {}", s0.as_str()),
        _ => format!(
            "{}/{n} done",
            states.iter().filter(|s| **s == State::Done).count()
        ),
    }
}

/// The sessions table: fixed columns, then one column per setting that
/// differs between the listed sessions (the engine's "diff only"), as many
/// as fit; session labels elide the prefix the names share, never their end.
/// A sweep is one row (its varying settings' values, the best point's MRR
/// as mean ± sd); open, its points follow with their sessions.
pub(super) fn draw_table(
    f: &mut Frame,
    j: &JobsScreen,
    view: &View<'_>,
    area: Rect,
    visible: &[&SessionSummary],
    table_rows: &[JobRow],
) {
    let th = &view.settings.theme;
    let wide = area.width >= 110;
    let maps: Vec<&std::collections::BTreeMap<String, String>> =
        visible.iter().map(|s| &s.settings).collect();
    let mut diff: Vec<String> = rosetta::session::runs::differing_keys(&maps)
        .into_iter()
        .filter(|k| k != "model" && !(wide && k == "workspace"))
        .collect();
    // the settings a sweep varies come first: they tell its points apart
    let varied: BTreeSet<&String> = table_rows
        .iter()
        .filter_map(|r| match r {
            JobRow::Sweep(sw) => Some(&sw.varying),
            _ => None,
        })
        .flatten()
        .collect();
    diff.sort_by_key(|k| !varied.contains(k));
    let ids: Vec<String> = visible.iter().map(|s| s.id.clone()).collect();
    let labels: HashMap<String, String> = ids.iter().cloned().zip(j.labels(&ids)).collect();
    let groups = table_rows.iter().any(|r| !matches!(r, JobRow::Session(..)));
    let mut cols: Vec<Column> = vec![
        Column {
            header: "state".into(),
            // Slurm's states are longer: `pending (JobHeldUser)`
            width: visible
                .iter()
                .map(|s| width(&state_label(s)))
                .max()
                .unwrap_or(0)
                .clamp(9, 21) as u16,
            kind: ColKind::State,
            cell: Box::new(move |s| Cell::from(Span::styled(state_label(s), state_style(th, s)))),
        },
        Column {
            header: "model".into(),
            width: 7,
            kind: ColKind::Model,
            cell: Box::new(|s| Cell::from(s.model.clone())),
        },
    ];
    if wide {
        cols.push(Column {
            header: "workspace".into(),
            width: 16,
            kind: ColKind::Other,
            cell: Box::new(|s| Cell::from(trunc(&workspace_label(&s.workspace), 16))),
        });
        cols.push(Column {
            header: "device".into(),
            width: 7,
            kind: ColKind::Other,
            cell: Box::new(|s| Cell::from(s.device.clone())),
        });
    }
    cols.push(Column {
        header: "progress".into(),
        width: 10,
        kind: ColKind::Other,
        cell: Box::new(|s| {
            Cell::from(match (s.state, s.progress) {
                (State::Done, _) => bar(1.0, 5),
                (_, Some(p)) => bar(p, 5),
                _ => String::new(),
            })
        }),
    });
    // ETA and throughput give way to the differing settings on a narrow screen
    if wide || diff.is_empty() {
        cols.push(Column {
            header: "ETA".into(),
            width: 5,
            kind: ColKind::Other,
            cell: Box::new(|s| {
                Cell::from(if !s.state.is_final() {
                    s.eta_s.map(fmt_duration).unwrap_or_default()
                } else {
                    String::new()
                })
            }),
        });
        cols.push(Column {
            header: "pairs/s".into(),
            width: 7,
            kind: ColKind::Other,
            cell: Box::new(|s| {
                Cell::from(s.pairs_per_s.map(|p| format!("{p:.0}")).unwrap_or_default())
            }),
        });
    }
    cols.push(Column {
        header: "best MRR".into(),
        // a sweep's mean ± sd: `0.412 ± 0.013`
        width: if groups { 13 } else { 10 },
        kind: ColKind::Mrr,
        cell: Box::new(|s| {
            Cell::from(
                s.best_mrr
                    .map(|m| match s.best_epoch {
                        Some(e) => format!("{m:.4} @{e}"),
                        None => format!("{m:.4}"),
                    })
                    .unwrap_or_default(),
            )
        }),
    });
    let group_label = |r: &JobRow| -> String {
        match r {
            JobRow::Sweep(sw) => format!(
                "{} {} ({})",
                if j.expanded.contains(&sw.id) {
                    "▾"
                } else {
                    "▸"
                },
                sw.id,
                sw.sessions()
            ),
            JobRow::Point { label, .. } => format!("  {label}"),
            JobRow::Session(..) => String::new(),
        }
    };
    // room left for the session column and the diff columns: the names
    // first (whole up to 32 cells, at least 14), the settings after
    let used: u16 = cols.iter().map(|c| c.width + 1).sum::<u16>() + 2 + 2;
    let name_w = table_rows
        .iter()
        .map(|r| match r {
            JobRow::Session(s, depth) => {
                let l = labels.get(&s.id).map_or(s.id.len(), |l| width(l));
                depth
                    + l
                    + if s.tags.is_empty() {
                        0
                    } else {
                        3 + s.tags.iter().map(|t| t.len() + 1).sum::<usize>()
                    }
            }
            // a sweep's id elides in the middle before its settings go
            other => width(&group_label(other)).min(20),
        })
        .max()
        .unwrap_or(0)
        .clamp(14, 32) as u16;
    // the sessions of a sweep's point (their settings, for the settings
    // the point does not set)
    let member = |dir: &std::path::Path| visible.iter().find(|s| s.dir == dir);
    let mut room = area.width.saturating_sub(used + name_w);
    // a sweep's varying settings may narrow the names to 14 cells
    let mut room_varied = area.width.saturating_sub(used + 14);
    for k in &diff {
        let w = visible
            .iter()
            .map(|s| s.settings.get(k).map_or(1, |v| v.chars().count()))
            .max()
            .unwrap_or(1)
            .max(k.chars().count())
            .min(12) as u16;
        let have = if varied.contains(k) {
            room_varied
        } else {
            room
        };
        if w + 1 > have {
            break;
        }
        room = room.saturating_sub(w + 1);
        room_varied = room_varied.saturating_sub(w + 1);
        let key = k.clone();
        cols.push(Column {
            header: k.clone(),
            width: w,
            kind: ColKind::Setting(k.clone()),
            cell: Box::new(move |s| {
                Cell::from(elide_middle(
                    s.settings.get(&key).map_or("—", String::as_str),
                    w as usize,
                ))
            }),
        });
    }
    // a group row's cell in column `c`
    let group_cell = |c: &Column, r: &JobRow| -> String {
        let (sw_points, states): (Vec<&jobs::sweep::PointSummary>, Vec<State>) = match r {
            JobRow::Sweep(sw) => (
                sw.points.iter().collect(),
                sw.points.iter().flat_map(|p| p.states.clone()).collect(),
            ),
            JobRow::Point { point, .. } => (vec![point], point.states.clone()),
            JobRow::Session(..) => (Vec::new(), Vec::new()),
        };
        let text = match &c.kind {
            ColKind::State => states_cell(&states),
            ColKind::Model => match r {
                JobRow::Sweep(sw) => sw.model.clone(),
                _ => String::new(),
            },
            ColKind::Mrr => sw_points
                .iter()
                .filter_map(|p| p.figures.get("MRR"))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(m, sd, _)| jobs::sweep::fmt_mean_sd(*m, *sd, 3))
                .unwrap_or_default(),
            ColKind::Setting(k) => {
                let mut vals: Vec<String> = Vec::new();
                for p in &sw_points {
                    let vs: Vec<String> = if k == "seed" {
                        p.seeds.iter().map(u64::to_string).collect()
                    } else if let Some(v) = p.point.get(k) {
                        vec![v.clone()]
                    } else {
                        p.dirs
                            .iter()
                            .filter_map(|d| member(d)?.settings.get(k).cloned())
                            .collect()
                    };
                    for v in vs {
                        if !vals.contains(&v) {
                            vals.push(v);
                        }
                    }
                }
                vals.join(",")
            }
            ColKind::Other => String::new(),
        };
        elide_middle(&text, c.width as usize)
    };
    let session_w = area
        .width
        .saturating_sub(cols.iter().map(|c| c.width + 1).sum::<u16>() + 2 + 2)
        .max(14);
    let mut header = vec![Cell::from(""), Cell::from("session")];
    header.extend(cols.iter().map(|c| Cell::from(c.header.clone())));
    let rows: Vec<Row> = table_rows
        .iter()
        .map(|r| match r {
            JobRow::Session(s, depth) => {
                let mark = if j.marked.contains(&s.id) { "●" } else { " " };
                let mut label = labels.get(&s.id).cloned().unwrap_or_else(|| s.id.clone());
                if !s.tags.is_empty() {
                    label.push_str(&format!(" [{}]", s.tags.join(",")));
                }
                let mut cells = vec![
                    Cell::from(mark),
                    Cell::from(format!(
                        "{:depth$}{}",
                        "",
                        elide_middle(&label, (session_w as usize).saturating_sub(*depth))
                    )),
                ];
                cells.extend(cols.iter().map(|c| (c.cell)(s)));
                Row::new(cells)
            }
            group => {
                let mut cells = vec![
                    Cell::from(" "),
                    Cell::from(Span::styled(
                        elide_middle(&group_label(group), session_w as usize),
                        th.accent(),
                    )),
                ];
                cells.extend(cols.iter().map(|c| Cell::from(group_cell(c, group))));
                Row::new(cells)
            }
        })
        .collect();
    let mut widths = vec![Constraint::Length(1), Constraint::Length(session_w)];
    widths.extend(cols.iter().map(|c| Constraint::Length(c.width)));
    let mut title = format!(" Sessions ({}) ", visible.len());
    if let Some((k, desc)) = &j.sort {
        title.push_str(&format!("· by {k} {} ", if *desc { "↓" } else { "↑" }));
    }
    if !j.filter.is_empty() || j.editing_filter {
        title.push_str(&format!(
            "/{}{} ",
            j.filter,
            if j.editing_filter { "▏" } else { "" }
        ));
        if let Err(e) = j.run_filter() {
            title.push_str(&format!("✗ {e} "));
        }
    }
    if !j.scanned || visible.is_empty() {
        let msg = if let Some(e) = &j.error {
            Span::styled(format!("cannot read sessions: {e}"), th.bad())
        } else if !j.scanned {
            Span::raw("scanning sessions…")
        } else if j.sessions.is_empty() {
            Span::raw(format!(
                "no sessions yet — press {} to start a training job",
                view.settings.keymap.keys_for(Context::Jobs, Action::NewJob)
            ))
        } else {
            Span::raw("no session matches the filter (lr=0.01, mrr>0.5, tag=x or words)")
        };
        f.render_widget(
            Paragraph::new(msg).block(block(th, title_owned(&j.filter), true)),
            area,
        );
        return;
    }
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(th.accent()))
        .block(block(th, title, true))
        .row_highlight_style(th.selected());
    let mut state = TableState::default().with_selected(j.selected_index());
    f.render_stateful_widget(table, area, &mut state);
}

fn title_owned(filter: &str) -> String {
    if filter.is_empty() {
        " Sessions ".into()
    } else {
        format!(" Sessions /{filter} ")
    }
}
