//! The ONE keymap: every binding with its screen and description. Key
//! handling looks actions up here and the `?` help popup is generated from
//! it, so the two cannot drift apart. The config file may rebind actions.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Context {
    /// Every screen (unless the screen binds the same key).
    Global,
    /// Jobs screen.
    Jobs,
    /// Search screen.
    Search,
    /// Neighbours screen.
    Neighbours,
    /// Compare screen.
    Compare,
    /// Data screen.
    Data,
}

impl Context {
    /// Heading in the help popup.
    pub fn title(self) -> &'static str {
        match self {
            Context::Global => "Everywhere",
            Context::Jobs => "1 Jobs",
            Context::Search => "2 Search",
            Context::Neighbours => "3 Neighbours",
            Context::Compare => "4 Compare",
            Context::Data => "5 Data",
        }
    }
}

/// Everything a key can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Quit,
    Help,
    Copy,
    Tab(u8),
    NextTab,
    PrevTab,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Filter,
    Close,
    Enter,
    Refresh,
    NewJob,
    CancelJob,
    ResumeJob,
    DuplicateJob,
    MarkJob,
    ToggleHistory,
    PhasePrev,
    PhaseNext,
    ToggleParts,
    DeleteJob,
    RenameJob,
    TagJob,
    NoteJob,
    ToggleLogScale,
    ToggleLogPane,
    CycleXAxis,
    CycleSmoothing,
    CycleMetric,
    PickSession,
    PickSession2,
    CycleFusion,
    NextJudged,
    BuildIndex,
    LambdaUp,
    LambdaDown,
    ToggleSide,
    ToggleCsls,
    SwitchPane,
    Back,
    Forward,
    ToggleAssoc,
    AssocKind,
    AssocSort,
    AssocExport,
    SortColumn,
    SortJobs,
    SetBaseline,
    ExportMarkdown,
    ExportCsv,
}

/// A key with modifiers, parsed from text like `q`, `ctrl-c`, `shift-tab`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// The key.
    pub code: KeyCode,
    /// Ctrl / Alt (Shift is folded into characters).
    pub mods: KeyModifiers,
}

impl Key {
    /// Parses `ctrl-c`, `alt-left`, `enter`, `esc`, `tab`, `backtab`,
    /// `shift-tab`, `space`, `f1`, `pageup`, or one character.
    pub fn parse(s: &str) -> Option<Key> {
        let mut mods = KeyModifiers::NONE;
        let mut rest = s;
        loop {
            let lower = rest.to_ascii_lowercase();
            if lower.starts_with("ctrl-") && rest.len() > 5 {
                mods |= KeyModifiers::CONTROL;
                rest = &rest[5..];
            } else if lower.starts_with("alt-") && rest.len() > 4 {
                mods |= KeyModifiers::ALT;
                rest = &rest[4..];
            } else if lower.starts_with("shift-") && rest.len() > 6 {
                mods |= KeyModifiers::SHIFT;
                rest = &rest[6..];
            } else {
                break;
            }
        }
        let code = match rest.to_ascii_lowercase().as_str() {
            "enter" | "return" => KeyCode::Enter,
            "esc" | "escape" => KeyCode::Esc,
            "tab" if mods.contains(KeyModifiers::SHIFT) => {
                mods.remove(KeyModifiers::SHIFT);
                KeyCode::BackTab
            }
            "tab" => KeyCode::Tab,
            "backtab" => KeyCode::BackTab,
            "space" => KeyCode::Char(' '),
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "pageup" | "pgup" => KeyCode::PageUp,
            "pagedown" | "pgdn" => KeyCode::PageDown,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "backspace" => KeyCode::Backspace,
            "delete" | "del" => KeyCode::Delete,
            f if f.len() >= 2 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                KeyCode::F(f[1..].parse().ok()?)
            }
            _ => {
                let mut cs = rest.chars();
                let c = cs.next()?;
                if cs.next().is_some() {
                    return None;
                }
                if mods.contains(KeyModifiers::SHIFT) {
                    mods.remove(KeyModifiers::SHIFT);
                    KeyCode::Char(c.to_ascii_uppercase())
                } else {
                    KeyCode::Char(c)
                }
            }
        };
        Some(Key { code, mods })
    }

    /// Whether a terminal key event is this key.
    pub fn matches(&self, ev: &KeyEvent) -> bool {
        let mut mods = ev.modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT);
        let code = match ev.code {
            KeyCode::Char(c) if mods.contains(KeyModifiers::CONTROL) => {
                KeyCode::Char(c.to_ascii_lowercase())
            }
            other => other,
        };
        if matches!(ev.code, KeyCode::BackTab) {
            mods.remove(KeyModifiers::SHIFT);
        }
        code == self.code && mods == self.mods
    }

    /// Text as shown in the help popup.
    pub fn label(&self) -> String {
        let mut s = String::new();
        if self.mods.contains(KeyModifiers::CONTROL) {
            s.push_str("Ctrl-");
        }
        if self.mods.contains(KeyModifiers::ALT) {
            s.push_str("Alt-");
        }
        match self.code {
            KeyCode::Char(' ') => s.push_str("Space"),
            KeyCode::Char(c) if self.mods.contains(KeyModifiers::CONTROL) => {
                s.push(c.to_ascii_uppercase())
            }
            KeyCode::Char(c) => s.push(c),
            KeyCode::Enter => s.push_str("Enter"),
            KeyCode::Esc => s.push_str("Esc"),
            KeyCode::Tab => s.push_str("Tab"),
            KeyCode::BackTab => s.push_str("Shift-Tab"),
            KeyCode::Up => s.push('↑'),
            KeyCode::Down => s.push('↓'),
            KeyCode::Left => s.push('←'),
            KeyCode::Right => s.push('→'),
            KeyCode::PageUp => s.push_str("PgUp"),
            KeyCode::PageDown => s.push_str("PgDn"),
            KeyCode::Home => s.push_str("Home"),
            KeyCode::End => s.push_str("End"),
            KeyCode::F(n) => s.push_str(&format!("F{n}")),
            other => s.push_str(&format!("{other:?}")),
        }
        s
    }
}

/// One binding: an action on a screen, its keys and what it does.
#[derive(Debug, Clone)]
pub struct Binding {
    /// Config name (`new_job`), used in `[keys]` overrides.
    pub name: &'static str,
    /// The action.
    pub action: Action,
    /// Where it applies.
    pub context: Context,
    /// Keys that trigger it.
    pub keys: Vec<Key>,
    /// What it does (help popup).
    pub desc: &'static str,
}

const DEFAULTS: &[(&str, Action, Context, &[&str], &str)] = {
    use Action::*;
    use Context::*;
    &[
        (
            "quit",
            Quit,
            Global,
            &["q", "ctrl-c"],
            "quit (asks if jobs you started still run)",
        ),
        ("help", Help, Global, &["?", "f1"], "show or hide this help"),
        (
            "copy",
            Copy,
            Global,
            &["Y"],
            "copy the selected session's folder, the query, the open document's id or the term (terminal clipboard, OSC 52)",
        ),
        ("tab_jobs", Tab(1), Global, &["1"], "Jobs screen"),
        ("tab_search", Tab(2), Global, &["2"], "Search screen"),
        (
            "tab_neighbours",
            Tab(3),
            Global,
            &["3"],
            "Neighbours screen",
        ),
        ("tab_compare", Tab(4), Global, &["4"], "Compare screen"),
        ("tab_data", Tab(5), Global, &["5"], "Data screen"),
        ("next_tab", NextTab, Global, &["tab"], "next screen"),
        ("prev_tab", PrevTab, Global, &["backtab"], "previous screen"),
        ("up", Up, Global, &["up", "k"], "move up"),
        ("down", Down, Global, &["down", "j"], "move down"),
        (
            "left",
            Left,
            Global,
            &["left", "h"],
            "move left / previous column or pane",
        ),
        (
            "right",
            Right,
            Global,
            &["right", "l"],
            "move right / next column or pane",
        ),
        ("page_up", PageUp, Global, &["pageup", "ctrl-u"], "page up"),
        (
            "page_down",
            PageDown,
            Global,
            &["pagedown", "ctrl-d"],
            "page down",
        ),
        ("top", Top, Global, &["g", "home"], "first item"),
        ("bottom", Bottom, Global, &["G", "end"], "last item"),
        (
            "filter",
            Filter,
            Global,
            &["/"],
            "filter the list / edit the query",
        ),
        (
            "close",
            Close,
            Global,
            &["esc"],
            "close popup, stop editing, clear filter",
        ),
        ("enter", Enter, Global, &["enter"], "open / run / choose"),
        (
            "refresh",
            Refresh,
            Global,
            &["ctrl-r"],
            "reload from disk now",
        ),
        ("new_job", NewJob, Jobs, &["n"], "new training job (form)"),
        (
            "cancel_job",
            CancelJob,
            Jobs,
            &["c"],
            "cancel the selected job",
        ),
        (
            "resume_job",
            ResumeJob,
            Jobs,
            &["r"],
            "resume the selected job from its checkpoint",
        ),
        (
            "duplicate_job",
            DuplicateJob,
            Jobs,
            &["d"],
            "new job from the selected one's settings",
        ),
        (
            "mark_job",
            MarkJob,
            Jobs,
            &["space"],
            "mark / unmark for overlaid charts",
        ),
        (
            "toggle_history",
            ToggleHistory,
            Jobs,
            &["w"],
            "charts: full history / recent window",
        ),
        (
            "phase_prev",
            PhasePrev,
            Jobs,
            &["["],
            "loss chart: the previous training phase (layer)",
        ),
        (
            "phase_next",
            PhaseNext,
            Jobs,
            &["]"],
            "loss chart: the next training phase (the last follows the job)",
        ),
        (
            "toggle_parts",
            ToggleParts,
            Jobs,
            &["t"],
            "loss chart: the loss's terms and the discriminator's game / the loss",
        ),
        (
            "job_details",
            Enter,
            Jobs,
            &["enter"],
            "details of the selected job: config, log, checkpoints, best figures (Esc closes)",
        ),
        (
            "delete_job",
            DeleteJob,
            Jobs,
            &["D", "delete"],
            "delete the selected session (asks first; not while it runs)",
        ),
        (
            "rename_job",
            RenameJob,
            Jobs,
            &["R"],
            "rename the selected session",
        ),
        (
            "tag_job",
            TagJob,
            Jobs,
            &["#"],
            "edit the selected session's tags",
        ),
        (
            "note_job",
            NoteJob,
            Jobs,
            &["N"],
            "edit the selected session's note",
        ),
        (
            "log_scale",
            ToggleLogScale,
            Jobs,
            &["L"],
            "loss chart: log / linear y axis",
        ),
        (
            "log_pane",
            ToggleLogPane,
            Jobs,
            &["o"],
            "the selected job's log.txt beside the curves: show / hide (follows the end)",
        ),
        (
            "x_axis",
            CycleXAxis,
            Jobs,
            &["x"],
            "charts: x axis step / epoch / wall time",
        ),
        (
            "smoothing",
            CycleSmoothing,
            Jobs,
            &["s"],
            "charts: EMA smoothing 0.9 / 0.95 / 0.99 / off / 0.6 (raw curve faint beneath)",
        ),
        (
            "chart_metric",
            CycleMetric,
            Jobs,
            &["m"],
            "right chart: the next recorded figure (MRR, P@1, loss parts...)",
        ),
        (
            "sort_jobs",
            SortJobs,
            Jobs,
            &["S"],
            "sort the table: name, model, state, best MRR, then each differing setting (descending, then off)",
        ),
        (
            "pick_session",
            PickSession,
            Search,
            &["s"],
            "choose the session to search with",
        ),
        (
            "cycle_fusion",
            CycleFusion,
            Search,
            &["f"],
            "fusion: model / BM25+dict λ / RRF",
        ),
        (
            "lambda_up",
            LambdaUp,
            Search,
            &["]", "+"],
            "raise λ (weight of BM25+dict)",
        ),
        ("lambda_down", LambdaDown, Search, &["[", "-"], "lower λ"),
        (
            "next_judged",
            NextJudged,
            Search,
            &["e"],
            "run the next workspace query that has judgements",
        ),
        (
            "build_index",
            BuildIndex,
            Search,
            &["B"],
            "build the session's index as a background job (offered when its collection would take long to encode)",
        ),
        (
            "pick_session_left",
            PickSession,
            Neighbours,
            &["s"],
            "choose the left session",
        ),
        (
            "pick_session_right",
            PickSession2,
            Neighbours,
            &["S"],
            "choose the right session (side by side)",
        ),
        (
            "toggle_side",
            ToggleSide,
            Neighbours,
            &["t"],
            "query language: source / target",
        ),
        (
            "toggle_csls",
            ToggleCsls,
            Neighbours,
            &["c"],
            "score: cosine / CSLS",
        ),
        (
            "switch_list",
            SwitchPane,
            Neighbours,
            &["o"],
            "switch list: other language / own language",
        ),
        ("back", Back, Neighbours, &["b", "alt-left"], "history back"),
        (
            "forward",
            Forward,
            Neighbours,
            &["f", "alt-right"],
            "history forward",
        ),
        (
            "associations",
            ToggleAssoc,
            Neighbours,
            &["a"],
            "term associations table / word lookup",
        ),
        (
            "assoc_kind",
            AssocKind,
            Neighbours,
            &["m"],
            "associations: pairs new to the dictionary / dictionary pairs missed",
        ),
        (
            "assoc_sort",
            AssocSort,
            Neighbours,
            &["O"],
            "associations: sort by score / source word frequency",
        ),
        (
            "assoc_export",
            AssocExport,
            Neighbours,
            &["x"],
            "associations: export the rows shown as TSV (type a path)",
        ),
        (
            "sort",
            SortColumn,
            Compare,
            &["s"],
            "sort by the selected column (again: reverse)",
        ),
        (
            "baseline",
            SetBaseline,
            Compare,
            &["b"],
            "make the selected session the baseline",
        ),
        (
            "export_md",
            ExportMarkdown,
            Compare,
            &["m"],
            "export the table as Markdown (asks for the path)",
        ),
        (
            "export_csv",
            ExportCsv,
            Compare,
            &["x"],
            "export the table as CSV (asks for the path)",
        ),
        (
            "reload_data",
            Refresh,
            Data,
            &["r"],
            "reload the workspace figures",
        ),
    ]
};

/// The default bindings as the config file spells them: (config name, keys,
/// what it does), in help order; `rosetta --print-config` lists them.
pub fn default_keys() -> impl Iterator<Item = (&'static str, &'static [&'static str], &'static str)>
{
    DEFAULTS
        .iter()
        .map(|(name, _, _, keys, desc)| (*name, *keys, *desc))
}

/// The active keymap (defaults plus overrides).
#[derive(Debug, Clone)]
pub struct Keymap {
    /// All bindings, in help order.
    pub bindings: Vec<Binding>,
}

impl Default for Keymap {
    fn default() -> Self {
        Keymap {
            bindings: DEFAULTS
                .iter()
                .map(|(name, action, context, keys, desc)| Binding {
                    name,
                    action: *action,
                    context: *context,
                    keys: keys.iter().filter_map(|k| Key::parse(k)).collect(),
                    desc,
                })
                .collect(),
        }
    }
}

impl Keymap {
    /// Defaults with `[keys]` overrides (`name = ["key", ...]`) applied.
    /// Unknown names or unparsable keys are errors naming them.
    pub fn with_overrides(overrides: &BTreeMap<String, Vec<String>>) -> Result<Keymap, String> {
        let mut km = Keymap::default();
        for (name, keys) in overrides {
            let parsed = keys
                .iter()
                .map(|k| Key::parse(k).ok_or_else(|| format!("[keys] {name}: bad key {k:?}")))
                .collect::<Result<Vec<_>, _>>()?;
            let b = km
                .bindings
                .iter_mut()
                .find(|b| b.name == name)
                .ok_or_else(|| format!("[keys] {name}: no such action"))?;
            b.keys = parsed;
        }
        Ok(km)
    }

    /// The action for a key on a screen: the screen's bindings first, then
    /// the global ones.
    pub fn lookup(&self, context: Context, ev: &KeyEvent) -> Option<Action> {
        let find = |ctx: Context| {
            self.bindings
                .iter()
                .find(|b| b.context == ctx && b.keys.iter().any(|k| k.matches(ev)))
                .map(|b| b.action)
        };
        find(context).or_else(|| find(Context::Global))
    }

    /// Key labels of the first binding of `action` on `context` (or global),
    /// for hints.
    pub fn keys_for(&self, context: Context, action: Action) -> String {
        self.bindings
            .iter()
            .find(|b| b.action == action && b.context == context)
            .or_else(|| {
                self.bindings
                    .iter()
                    .find(|b| b.action == action && b.context == Context::Global)
            })
            .map(|b| b.keys.iter().map(Key::label).collect::<Vec<_>>().join("/"))
            .unwrap_or_default()
    }

    /// Help popup lines: (section title, [(keys, description)]).
    pub fn help(&self) -> Vec<(&'static str, Vec<(String, &'static str)>)> {
        let order = [
            Context::Global,
            Context::Jobs,
            Context::Search,
            Context::Neighbours,
            Context::Compare,
            Context::Data,
        ];
        order
            .iter()
            .map(|ctx| {
                let rows = self
                    .bindings
                    .iter()
                    .filter(|b| b.context == *ctx)
                    .map(|b| {
                        (
                            b.keys.iter().map(Key::label).collect::<Vec<_>>().join(" "),
                            b.desc,
                        )
                    })
                    .collect();
                (ctx.title(), rows)
            })
            .collect()
    }
}
