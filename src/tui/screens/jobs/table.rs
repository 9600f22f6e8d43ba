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

/// A column's cell of a session at a width.
type CellFn<'a> = Box<dyn Fn(&SessionSummary, usize) -> Cell<'static> + 'a>;

/// One column of the sessions table: header, what width it asks for
/// ([`ColWidth`]), the width it got, and a cell per row at that width.
struct Column<'a> {
    header: String,
    size: ColWidth,
    width: u16,
    kind: ColKind,
    cell: CellFn<'a>,
}

impl<'a> Column<'a> {
    fn new(
        header: &str,
        size: ColWidth,
        kind: ColKind,
        cell: impl Fn(&SessionSummary, usize) -> Cell<'static> + 'a,
    ) -> Column<'a> {
        Column {
            header: header.into(),
            size,
            width: size.want as u16,
            kind,
            cell: Box::new(cell),
        }
    }
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
    // the sessions of a sweep's point (their settings, for the settings
    // the point does not set)
    let member = |dir: &std::path::Path| visible.iter().find(|s| s.dir == dir);
    // a group row's points and its sessions' states
    let group_points = |r: &JobRow| -> (Vec<jobs::sweep::PointSummary>, Vec<State>) {
        match r {
            JobRow::Sweep(sw) => (
                sw.points.clone(),
                sw.points.iter().flat_map(|p| p.states.clone()).collect(),
            ),
            JobRow::Point { point, .. } => (vec![point.clone()], point.states.clone()),
            JobRow::Session(..) => (Vec::new(), Vec::new()),
        }
    };
    // the distinct values of setting `k` over a group row's sessions
    let group_values = |k: &str, r: &JobRow| -> Vec<String> {
        let mut vals: Vec<String> = Vec::new();
        for p in &group_points(r).0 {
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
        vals
    };
    let group_rows: Vec<&JobRow> = table_rows
        .iter()
        .filter(|r| !matches!(r, JobRow::Session(..)))
        .collect();
    let widest = |cells: &mut dyn Iterator<Item = String>| cells.map(|c| width(&c)).max();
    let state_w = visible
        .iter()
        .map(|s| width(&state_label(s)))
        .max()
        .unwrap_or(0)
        // Slurm's states are longer: `pending (JobHeldUser)`
        .clamp(9, 21);
    // the model tells runs apart: never cut (`bm25-dict`, `procrustes`)
    let model_w = widest(&mut visible.iter().map(|s| s.model.clone()).chain(
        group_rows.iter().filter_map(|r| match r {
            JobRow::Sweep(sw) => Some(sw.model.clone()),
            _ => None,
        }),
    ))
    .unwrap_or(0)
    .max(5);
    let mut cols: Vec<Column> = vec![
        Column::new(
            "state",
            // a Slurm state's reason is what the user acts on: never cut
            ColWidth::new(state_w, state_w),
            ColKind::State,
            move |s, w| Cell::from(Span::styled(trunc(&state_label(s), w), state_style(th, s))),
        ),
        Column::new(
            "model",
            ColWidth::keep(model_w, model_w),
            ColKind::Model,
            |s, _| Cell::from(s.model.clone()),
        ),
    ];
    if wide {
        let ws_w = widest(&mut visible.iter().map(|s| workspace_label(&s.workspace)))
            .unwrap_or(0)
            .max(9);
        cols.push(Column::new(
            "workspace",
            ColWidth::new(ws_w, 9),
            ColKind::Other,
            |s, w| Cell::from(trunc(&workspace_label(&s.workspace), w)),
        ));
        let dev_w = widest(&mut visible.iter().map(|s| s.device.clone()))
            .unwrap_or(0)
            .max(6);
        cols.push(Column::new(
            "device",
            ColWidth::new(dev_w, 4),
            ColKind::Other,
            |s, w| Cell::from(trunc(&s.device, w)),
        ));
    }
    cols.push(Column::new(
        "progress",
        ColWidth::fixed(10),
        ColKind::Other,
        |s, _| {
            Cell::from(match (s.state, s.progress) {
                (State::Done, _) => bar(1.0, 5),
                (_, Some(p)) => bar(p, 5),
                _ => String::new(),
            })
        },
    ));
    // ETA and throughput give way to the differing settings on a narrow screen
    if wide || diff.is_empty() {
        cols.push(Column::new(
            "ETA",
            ColWidth::fixed(5),
            ColKind::Other,
            |s, _| {
                Cell::from(if !s.state.is_final() {
                    s.eta_s.map(fmt_duration).unwrap_or_default()
                } else {
                    String::new()
                })
            },
        ));
        cols.push(Column::new(
            "pairs/s",
            ColWidth::fixed(7),
            ColKind::Other,
            |s, _| Cell::from(s.pairs_per_s.map(|p| format!("{p:.0}")).unwrap_or_default()),
        ));
    }
    cols.push(Column::new(
        "best MRR",
        // a sweep's mean ± sd: `0.412 ± 0.013`
        ColWidth::fixed(if groups { 13 } else { 10 }),
        ColKind::Mrr,
        |s, _| {
            Cell::from(
                s.best_mrr
                    .map(|m| match s.best_epoch {
                        Some(e) => format!("{m:.4} @{e}"),
                        None => format!("{m:.4}"),
                    })
                    .unwrap_or_default(),
            )
        },
    ));
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
    // the session column: its labels whole when there is room, else cut
    // in the middle (it is the widest, so it narrows first), never below
    // 14 cells; a setting column joins only while the names keep up to 32
    // cells (a sweep's varying settings while they keep 14)
    let label_w = |r: &JobRow, cap: usize| match r {
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
        other => width(&group_label(other)).min(cap),
    };
    let session_want = table_rows
        .iter()
        .map(|r| label_w(r, usize::MAX))
        .max()
        .unwrap_or(0)
        .max(14);
    let name_w = table_rows
        .iter()
        .map(|r| label_w(r, 20))
        .max()
        .unwrap_or(0)
        .clamp(14, 32);
    // what the columns need at least beside names `names` wide: borders,
    // the mark column and one cell of spacing after each column
    let needs = |cols: &[Column], names: usize| {
        4 + names + cols.len() + min_width(&cols.iter().map(|c| c.size).collect::<Vec<_>>())
    };
    for k in &diff {
        // the values whole: a number is never cut; a sweep's values in
        // their range (`16…64`) when the list does not fit
        let session_vals: Vec<String> = visible
            .iter()
            .map(|s| s.settings.get(k).cloned().unwrap_or_else(|| "—".into()))
            .collect();
        let group_vals: Vec<Vec<String>> = group_rows.iter().map(|r| group_values(k, r)).collect();
        let cut_w = |v: &str| {
            if v.parse::<f64>().is_ok() {
                width(v)
            } else {
                width(v).min(12)
            }
        };
        let want = session_vals
            .iter()
            .map(|v| width(v))
            .chain(group_vals.iter().map(|g| width(&g.join(","))))
            .max()
            .unwrap_or(1)
            .max(width(k));
        let min = session_vals
            .iter()
            .map(|v| cut_w(v))
            .chain(group_vals.iter().map(|g| {
                let all = g.join(",");
                match values_range(g) {
                    Some(r) => width(&r).min(width(&all)),
                    None => cut_w(&all),
                }
            }))
            .max()
            .unwrap_or(1)
            .max(width(k));
        let key = k.clone();
        cols.push(Column::new(
            k,
            ColWidth::keep(want, min),
            ColKind::Setting(k.clone()),
            move |s, w| {
                Cell::from(elide_middle(
                    s.settings.get(&key).map_or("—", String::as_str),
                    w,
                ))
            },
        ));
        let names = if varied.contains(k) { 14 } else { name_w };
        if needs(&cols, names) > area.width as usize {
            cols.pop();
            break;
        }
    }
    // the widths: the widest column narrows first, the model and the
    // settings last; the session column takes what is left
    let room = (area.width as usize).saturating_sub(4 + cols.len());
    let mut sizes = vec![ColWidth::new(session_want, 14)];
    sizes.extend(cols.iter().map(|c| c.size));
    let fitted = fit_widths(&sizes, room);
    for (c, w) in cols.iter_mut().zip(&fitted[1..]) {
        c.width = *w as u16;
    }
    let session_w = room
        .saturating_sub(fitted[1..].iter().sum::<usize>())
        .max(fitted[0]) as u16;
    // a group row's cell in column `c`
    let group_cell = |c: &Column, r: &JobRow| -> String {
        let (sw_points, states) = group_points(r);
        let w = c.width as usize;
        match &c.kind {
            ColKind::State => trunc(&states_cell(&states), w),
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
            ColKind::Setting(k) => values_cell(&group_values(k, r), w),
            ColKind::Other => String::new(),
        }
    };
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
                cells.extend(cols.iter().map(|c| (c.cell)(s, c.width as usize)));
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
