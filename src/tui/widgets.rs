//! The widget kit every screen and popup draws with: blocks, cut and padded
//! text, bars, state labels, centred dialogs and wrapping. It knows no
//! screen and no shell: the frame (`ui.rs`) and the screens import it.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::backend::*;
use super::config::Theme;

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

/// What one table column asks of the width allocation ([`fit_widths`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ColWidth {
    /// Cells that show every cell of the column whole.
    pub want: usize,
    /// Cells it may be narrowed to (its cells cut, `…`, below `want`).
    pub min: usize,
    /// The column tells the rows apart (a model, a differing setting): it
    /// is narrowed only once every other column is at its minimum.
    pub keep: bool,
}

impl ColWidth {
    /// A column of `want` cells that may narrow to `min`.
    pub(crate) fn new(want: usize, min: usize) -> ColWidth {
        ColWidth {
            want: want.max(min),
            min,
            keep: false,
        }
    }
    /// A column of `want` cells that is never narrowed.
    pub(crate) fn fixed(want: usize) -> ColWidth {
        ColWidth::new(want, want)
    }
    /// A column that tells the rows apart ([`ColWidth::keep`]), `want`
    /// cells, narrowed (last) to no less than `min`.
    pub(crate) fn keep(want: usize, min: usize) -> ColWidth {
        ColWidth {
            keep: true,
            ..ColWidth::new(want, min)
        }
    }
}

/// The widths of table columns `cols` in `room` cells (the spacing between
/// them already taken off): each its `want` when they all fit; else the
/// widest column not marked `keep` is narrowed first, a cell at a time (so
/// the widest ones level down together, the leftmost of equals first), never
/// below its `min`; `keep` columns (what tells the rows apart) are narrowed
/// the same way only once every other column is at its minimum. No column
/// goes below its `min`, so the widths add up to more than `room` when the
/// minima do ([`min_width`]): the caller leaves a column out first.
pub(crate) fn fit_widths(cols: &[ColWidth], room: usize) -> Vec<usize> {
    let mut w: Vec<usize> = cols.iter().map(|c| c.want.max(c.min)).collect();
    let mut total: usize = w.iter().sum();
    for keep in [false, true] {
        while total > room {
            let widest = (0..w.len())
                .filter(|&i| cols[i].keep == keep && w[i] > cols[i].min)
                .max_by_key(|&i| (w[i], std::cmp::Reverse(i)));
            let Some(i) = widest else { break };
            w[i] -= 1;
            total -= 1;
        }
    }
    w
}

/// The cells columns `cols` need at least ([`fit_widths`] never goes below).
pub(crate) fn min_width(cols: &[ColWidth]) -> usize {
    cols.iter().map(|c| c.min).sum()
}

/// Distinct values of a setting over a group of runs, readably in `n`
/// cells: all of them comma-separated (`16,32`) when that fits, else, for
/// numbers, their range (`16…64`), else the list cut in the middle. A
/// number is never cut.
pub(crate) fn values_cell(values: &[String], n: usize) -> String {
    let all = values.join(",");
    if width(&all) <= n {
        return all;
    }
    let range = values_range(values).unwrap_or_default();
    if !range.is_empty() && width(&range) <= n {
        return range;
    }
    rosetta::session::runs::elide_middle(&all, n)
}

/// `LOW…HIGH` of `values` when they are all numbers (two or more), else
/// `None`: the narrowest readable form of a swept setting.
pub(crate) fn values_range(values: &[String]) -> Option<String> {
    let nums: Vec<(f64, &String)> = values
        .iter()
        .map(|v| Some((v.parse::<f64>().ok().filter(|x| x.is_finite())?, v)))
        .collect::<Option<_>>()?;
    let lo = nums.iter().min_by(|a, b| a.0.total_cmp(&b.0))?;
    let hi = nums.iter().max_by(|a, b| a.0.total_cmp(&b.0))?;
    (nums.len() > 1).then(|| format!("{}…{}", lo.1, hi.1))
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

/// A dialog of `text` titled `title`, centred over the frame.
pub(crate) fn draw_dialog(f: &mut Frame, th: &Theme, title: &str, text: &str) {
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

/// A short name for a workspace file: its folder for `…/NAME/workspace.toml`,
/// else the file's stem (`assets/workspaces/enhi-xquad.toml` → `enhi-xquad`).
pub(crate) fn workspace_label(path: &str) -> String {
    rosetta::session::runs::workspace_label(std::path::Path::new(path))
}

#[cfg(test)]
mod fit_tests {
    use super::*;

    #[test]
    fn hints_are_cut_between_items_to_fit() {
        let h = "n new · c cancel · r resume · y duplicate · m mark";
        assert_eq!(fit_hints(h, 80), h);
        assert_eq!(fit_hints(h, 30), "n new · c cancel · …");
        assert_eq!(fit_hints(h, 5), "…");
    }

    #[test]
    fn the_widest_other_column_narrows_first() {
        // session 60 wide, model 9 (`bm25-dict`), MRR 10: 20 cells too many
        let cols = [
            ColWidth::new(60, 14),
            ColWidth::keep(9, 9),
            ColWidth::fixed(10),
        ];
        assert_eq!(fit_widths(&cols, 79), vec![60, 9, 10], "all fit");
        assert_eq!(fit_widths(&cols, 59), vec![40, 9, 10]);
        // two wide columns level down together, the leftmost first
        let cols = [
            ColWidth::new(30, 5),
            ColWidth::new(20, 5),
            ColWidth::keep(10, 3),
        ];
        assert_eq!(fit_widths(&cols, 50), vec![20, 20, 10]);
        assert_eq!(fit_widths(&cols, 39), vec![14, 15, 10]);
        // the kept column goes only once the others are at their minimum
        assert_eq!(fit_widths(&cols, 18), vec![5, 5, 8]);
        // never below the minima: the caller drops a column
        assert_eq!(fit_widths(&cols, 5), vec![5, 5, 3]);
        assert_eq!(min_width(&cols), 13);
    }

    #[test]
    fn swept_values_are_never_cut() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(values_cell(&v(&["16", "32"]), 5), "16,32");
        assert_eq!(values_cell(&v(&["16", "32"]), 8), "16,32");
        assert_eq!(values_cell(&v(&["16", "32", "64"]), 5), "16…64");
        assert_eq!(values_cell(&v(&["0.01", "0.001", "0.1"]), 10), "0.001…0.1");
        assert_eq!(values_range(&v(&["adam", "sgd"])), None);
        assert_eq!(values_range(&v(&["16"])), None);
    }
}
