//! The new-job form (a popup of the Jobs screen): its fields by name, their
//! validation (the engine's checks, as `rosetta train` and `rosetta sweep`
//! make them), its keys and its drawing.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use super::request::Request;
use crate::tui::backend::*;
use crate::tui::config::Theme;
use crate::tui::screens::Ctx;
use crate::tui::widgets::*;
use rosetta::jobs;

/// The fields of the new-job form, in the order shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Path of the workspace file.
    Workspace,
    /// Model name (a choice: ←/→ step through the registry).
    Model,
    /// `dim` setting.
    Dim,
    /// `epochs` setting.
    Epochs,
    /// `lr` setting.
    Lr,
    /// `negatives` setting.
    Negatives,
    /// `--device`.
    Device,
    /// `init` setting: a finished session to start from.
    Init,
    /// Other `--set KEY=VALUE` settings.
    Other,
    /// The launcher (a choice: `local` or `slurm`).
    Launcher,
    /// Slurm's partition.
    Partition,
    /// Slurm's gres (GPUs).
    Gres,
    /// Slurm's time limit.
    Time,
    /// Slurm's account.
    Account,
    /// A sweep's grid (`KEY=V1,V2 ...`).
    Grid,
    /// A sweep's seeds.
    Seeds,
    /// A sweep's sessions at once.
    Parallel,
}

impl Field {
    /// Every field, in the order shown.
    pub const ALL: [Field; 17] = [
        Field::Workspace,
        Field::Model,
        Field::Dim,
        Field::Epochs,
        Field::Lr,
        Field::Negatives,
        Field::Device,
        Field::Init,
        Field::Other,
        Field::Launcher,
        Field::Partition,
        Field::Gres,
        Field::Time,
        Field::Account,
        Field::Grid,
        Field::Seeds,
        Field::Parallel,
    ];

    /// Label shown in the form.
    pub fn label(self) -> &'static str {
        match self {
            Field::Workspace => "workspace",
            Field::Model => "model",
            Field::Dim => "dim",
            Field::Epochs => "epochs",
            Field::Lr => "lr",
            Field::Negatives => "negatives",
            Field::Device => "device",
            Field::Init => "init session",
            Field::Other => "other --set",
            Field::Launcher => "run on",
            Field::Partition => "partition",
            Field::Gres => "gres (GPUs)",
            Field::Time => "time limit",
            Field::Account => "account",
            Field::Grid => "sweep grid",
            Field::Seeds => "seeds",
            Field::Parallel => "parallel",
        }
    }

    /// The model setting this field gives, if it is one (the keys of
    /// [`FORM_KEYS`]).
    pub fn setting(self) -> Option<&'static str> {
        match self {
            Field::Dim => Some("dim"),
            Field::Epochs => Some("epochs"),
            Field::Lr => Some("lr"),
            Field::Negatives => Some("negatives"),
            Field::Init => Some("init"),
            _ => None,
        }
    }
}

/// One field of the new-job form.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    /// Which field.
    pub field: Field,
    /// Label.
    pub label: &'static str,
    /// Text as typed.
    pub value: String,
    /// Validation error of the last attempt.
    pub error: Option<String>,
}

/// The new-job form.
#[derive(Debug, Clone, PartialEq)]
pub struct JobForm {
    /// Popup title.
    pub title: String,
    /// Fields in the order of [`Field::ALL`]: workspace, model, dim, epochs,
    /// lr, negatives, device, init, other settings; the launcher (local or
    /// slurm) and Slurm's partition, gres, time and account; a sweep's
    /// grid, seeds and parallel.
    pub fields: Vec<FormField>,
    /// Focused field (index into `fields`).
    pub focus: usize,
    /// Waiting for the launch answer.
    pub submitting: bool,
    /// Error of the last launch.
    pub error: Option<String>,
    /// Each field's value as the form was opened with it (the defaults,
    /// a duplicated session's settings): a sweep grid's key replaces its
    /// field's value while that is still the one filled in.
    pub prefilled: Vec<String>,
}

/// The form's values, trimmed, looked up by field.
struct Values(Vec<(Field, String)>);

impl Values {
    fn get(&self, f: Field) -> &str {
        self.0
            .iter()
            .find(|(k, _)| *k == f)
            .map_or("", |(_, v)| v.as_str())
    }
}

impl JobForm {
    /// A form filled from `spec` (its launcher: the one remembered).
    pub fn new(title: impl Into<String>, spec: &JobSpec) -> JobForm {
        fn opt<T: ToString>(v: Option<T>) -> String {
            v.map(|x| x.to_string()).unwrap_or_default()
        }
        let o = &spec.launcher.options;
        let sw = spec.sweep.clone().unwrap_or_default();
        let value = |f: Field| match f {
            Field::Workspace => spec.workspace.clone(),
            Field::Model => spec.model.clone(),
            Field::Dim => opt(spec.dim),
            Field::Epochs => opt(spec.epochs),
            Field::Lr => opt(spec.lr),
            Field::Negatives => spec.negatives.clone().unwrap_or_default(),
            Field::Device => spec.device.to_string(),
            Field::Init => spec.init.clone().unwrap_or_default(),
            Field::Other => spec
                .extra
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            Field::Launcher => if spec.launcher.slurm {
                "slurm"
            } else {
                "local"
            }
            .into(),
            Field::Partition => o.partition.clone().unwrap_or_default(),
            Field::Gres => o.gres.clone().unwrap_or_default(),
            Field::Time => o.time.clone().unwrap_or_default(),
            Field::Account => o.account.clone().unwrap_or_default(),
            Field::Grid => sw
                .grid
                .iter()
                .map(|(k, vs)| format!("{k}={}", vs.join(",")))
                .collect::<Vec<_>>()
                .join(" "),
            Field::Seeds => sw
                .seeds
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(","),
            Field::Parallel => opt(sw.parallel),
        };
        let fields: Vec<FormField> = Field::ALL
            .iter()
            .map(|&field| FormField {
                field,
                label: field.label(),
                value: value(field),
                error: None,
            })
            .collect();
        JobForm {
            title: title.into(),
            prefilled: fields.iter().map(|f| f.value.clone()).collect(),
            fields,
            focus: 0,
            submitting: false,
            error: None,
        }
    }

    /// The focused field.
    pub fn focused(&self) -> Option<Field> {
        self.fields.get(self.focus).map(|f| f.field)
    }

    /// The settings the sweep grid names (`dim` of `dim=16,32`), whether
    /// or not their values parse.
    fn grid_keys(&self) -> Vec<String> {
        self.fields
            .iter()
            .filter(|f| f.field == Field::Grid)
            .flat_map(|f| f.value.split_whitespace())
            .filter_map(|w| w.split_once('=').map(|(k, _)| k.trim().to_string()))
            .collect()
    }

    /// Whether field `i` still holds the value it was filled in with (not
    /// empty): a value the user has not typed.
    fn is_prefilled(&self, i: usize) -> bool {
        let v = self.fields[i].value.trim();
        !v.is_empty() && self.prefilled.get(i).is_some_and(|p| p.trim() == v)
    }

    /// Whether the sweep grid replaces field `i`'s value: a setting's own
    /// field the grid sweeps, holding the value filled in (`dim 128` before
    /// a grid of `dim=16,32`); a value the user typed is theirs and
    /// conflicts instead.
    pub fn swept(&self, i: usize) -> bool {
        let f = self.fields[i].field;
        f.setting()
            .is_some_and(|k| self.grid_keys().iter().any(|g| g == k))
            && self.is_prefilled(i)
    }

    /// Checks every field; on success the job to launch, else the errors
    /// are stored on the fields. Empty optional fields mean the model's
    /// default (Slurm's default for the Slurm options). The checks are the
    /// engine's, as `rosetta train` and `rosetta sweep` make them.
    pub fn validate(&mut self, sessions: &[SessionSummary]) -> Option<JobSpec> {
        for f in &mut self.fields {
            f.error = None;
        }
        // a grid of a setting whose field holds the value filled in sweeps
        // it: that value gives way (as does a filled-in `other --set`'s)
        let grid_keys = self.grid_keys();
        let other_prefilled = self
            .fields
            .iter()
            .position(|f| f.field == Field::Other)
            .is_some_and(|i| self.is_prefilled(i));
        let v = Values(
            self.fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let value = if self.swept(i) {
                        String::new()
                    } else {
                        f.value.trim().to_string()
                    };
                    (f.field, value)
                })
                .collect(),
        );
        let mut errs: Vec<(Field, String)> = Vec::new();
        if v.get(Field::Workspace).is_empty() {
            errs.push((
                Field::Workspace,
                "required: path of a workspace.toml".into(),
            ));
        }
        let model = v.get(Field::Model);
        let model_ok = match jobs::check_model(model) {
            Ok(()) => true,
            Err(e) => {
                errs.push((Field::Model, e.to_string()));
                false
            }
        };
        // the engine's checks (the model registry's): whether the model
        // reads the setting at all (CL-LSI has no epochs, BM25 learns
        // nothing) and the value's form; none without a known model
        let check = |f: Field, key: &str, value: &str, errs: &mut Vec<(Field, String)>| {
            if !model_ok {
                return None;
            }
            jobs::check_setting(model, key, value)
                .map_err(|e| errs.push((f, e.to_string())))
                .ok()
        };
        // a setting's own field: empty is the model's default
        let setting = |f: Field, errs: &mut Vec<(Field, String)>| {
            let value = v.get(f);
            match f.setting() {
                Some(key) if !value.is_empty() => check(f, key, value, errs),
                _ => None,
            }
        };
        let dim = setting(Field::Dim, &mut errs).and_then(|x| x.parse().ok());
        let epochs = setting(Field::Epochs, &mut errs).and_then(|x| x.parse().ok());
        let lr = setting(Field::Lr, &mut errs).and_then(|x| x.parse().ok());
        let negatives = setting(Field::Negatives, &mut errs);
        let device = jobs::check_device(v.get(Field::Device))
            .map_err(|e| errs.push((Field::Device, e.to_string())))
            .unwrap_or_default();
        let init = setting(Field::Init, &mut errs);
        if let Some(i) = &init {
            if !sessions
                .iter()
                .any(|s| &s.id == i && s.state == State::Done)
            {
                errs.push((Field::Init, "not a finished session".into()));
            }
        }
        let words: Vec<String> = v
            .get(Field::Other)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let mut extra = Vec::new();
        match jobs::parse_settings(&words) {
            Ok(given) => {
                for (k, val) in given {
                    if FORM_KEYS.contains(&k.as_str()) {
                        errs.push((Field::Other, format!("{k}: use its own field")));
                    } else if other_prefilled && grid_keys.contains(&k) {
                        // filled in, not typed: the grid sweeps it
                    } else if let Some(val) = check(Field::Other, &k, &val, &mut errs) {
                        extra.push((k, val));
                    }
                }
            }
            Err(e) => errs.push((Field::Other, e.to_string())),
        }
        // the launcher: Slurm's options each checked as sbatch takes them
        let slurm = match v.get(Field::Launcher) {
            "local" => false,
            "slurm" => true,
            _ => {
                errs.push((Field::Launcher, "local or slurm (←/→ choose)".into()));
                false
            }
        };
        let mut options = SlurmOptions::default();
        for f in [Field::Partition, Field::Gres, Field::Time, Field::Account] {
            let value = v.get(f);
            if value.is_empty() {
                continue;
            }
            let value = Some(value.to_string());
            let mut one = SlurmOptions::default();
            match f {
                Field::Partition => (options.partition, one.partition) = (value.clone(), value),
                Field::Gres => (options.gres, one.gres) = (value.clone(), value),
                Field::Time => (options.time, one.time) = (value.clone(), value),
                _ => (options.account, one.account) = (value.clone(), value),
            }
            if let Err(e) = one.sbatch_args() {
                errs.push((f, e.to_string()));
            }
        }
        // a sweep: the grid's axes (`rosetta sweep --grid`), each value
        // checked against the model; seeds and parallel only with a grid
        let mut grid = Vec::new();
        for w in v.get(Field::Grid).split_whitespace() {
            match jobs::sweep::parse_axis(w) {
                Ok((k, vals)) => {
                    // the grid gives the value: the fixed field must be empty
                    let free = match Field::ALL.iter().find(|f| f.setting() == Some(k.as_str())) {
                        Some(&f) => v.get(f).is_empty(),
                        None => !extra.iter().any(|(e, _)| *e == k),
                    };
                    if !free {
                        errs.push((Field::Grid, format!("{k}: clear its fixed value first")));
                    }
                    for val in &vals {
                        check(Field::Grid, &k, val, &mut errs);
                    }
                    grid.push((k, vals));
                }
                Err(e) => errs.push((Field::Grid, e.to_string())),
            }
        }
        let seeds = match v.get(Field::Seeds) {
            "" => vec![1],
            s => jobs::sweep::parse_seeds(s)
                .map_err(|e| errs.push((Field::Seeds, e.to_string())))
                .unwrap_or_default(),
        };
        let parallel = match v.get(Field::Parallel) {
            "" => None,
            s => match s.parse::<usize>() {
                Ok(n) => {
                    if let Err(e) = jobs::sweep::check_parallel(Some(n)) {
                        errs.push((Field::Parallel, e.to_string()));
                    }
                    Some(n)
                }
                Err(_) => {
                    errs.push((Field::Parallel, "a number of sessions at once".into()));
                    None
                }
            },
        };
        if v.get(Field::Grid).is_empty() {
            for f in [Field::Seeds, Field::Parallel] {
                if !v.get(f).is_empty() {
                    errs.push((f, "for a sweep: give a grid".into()));
                }
            }
        }
        if !errs.is_empty() {
            for (f, e) in errs {
                if let Some(x) = self.fields.iter_mut().find(|x| x.field == f) {
                    x.error.get_or_insert(e);
                }
            }
            return None;
        }
        Some(JobSpec {
            extra,
            workspace: v.get(Field::Workspace).to_string(),
            model: model.to_string(),
            dim,
            epochs,
            lr,
            negatives,
            device,
            init,
            launcher: LauncherMemory { slurm, options },
            sweep: (!grid.is_empty()).then_some(SweepSpec {
                grid,
                seeds,
                parallel,
            }),
        })
    }
}

impl JobForm {
    /// A key in the new-job form: the form as it stays open, or `None`
    /// when it closes (`cx`'s sessions are the ones names are checked
    /// against).
    pub(super) fn key(mut self, k: KeyEvent, cx: &mut Ctx<'_, Request>) -> Option<JobForm> {
        let form = &mut self;
        if form.submitting {
            // Only Esc (close, the launch still completes) while waiting.
            return if k.code == KeyCode::Esc {
                None
            } else {
                Some(self)
            };
        }
        let nf = form.fields.len();
        match k.code {
            KeyCode::Esc => return None,
            KeyCode::Tab | KeyCode::Down => form.focus = (form.focus + 1) % nf,
            KeyCode::BackTab | KeyCode::Up => form.focus = (form.focus + nf - 1) % nf,
            KeyCode::Backspace => {
                form.fields[form.focus].value.pop();
            }
            KeyCode::Char('u') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                form.fields[form.focus].value.clear()
            }
            // the launcher field is a choice: ←/→ toggle local and slurm
            KeyCode::Left | KeyCode::Right if form.focused() == Some(Field::Launcher) => {
                let f = &mut form.fields[form.focus].value;
                *f = if f.trim() == "local" {
                    "slurm"
                } else {
                    "local"
                }
                .into();
            }
            // the model field is a choice: ←/→ step through the registry
            KeyCode::Left | KeyCode::Right if form.focused() == Some(Field::Model) => {
                let names = jobs::model_names();
                let cur = names
                    .iter()
                    .position(|n| *n == form.fields[form.focus].value.trim());
                let n = names.len();
                let i = match (cur, k.code) {
                    (Some(i), KeyCode::Right) => (i + 1) % n,
                    (Some(i), _) => (i + n - 1) % n,
                    (None, _) => 0,
                };
                form.fields[form.focus].value = names[i].to_string();
            }
            KeyCode::Char(c) if !k.modifiers.contains(KeyModifiers::CONTROL) => {
                form.fields[form.focus].value.push(c)
            }
            KeyCode::Enter => {
                if let Some(spec) = form.validate(cx.sessions.list) {
                    form.submitting = true;
                    form.error = None;
                    cx.send(Request::Launch(Box::new(spec)));
                } else if let Some(i) = form.fields.iter().position(|f| f.error.is_some()) {
                    form.focus = i;
                }
            }
            _ => {}
        }
        // after a refused launch, check again as the user edits: a fixed
        // field loses its ✗ at once
        let edited = !matches!(
            k.code,
            KeyCode::Enter | KeyCode::Tab | KeyCode::BackTab | KeyCode::Up | KeyCode::Down
        );
        if edited && (form.error.is_some() || form.fields.iter().any(|f| f.error.is_some())) {
            form.error = None;
            form.validate(cx.sessions.list);
        }
        Some(self)
    }
}

/// Draws the new-job form (a popup of the Jobs screen).
pub fn draw_form(f: &mut Frame, th: &Theme, form: &JobForm) {
    let h = form.fields.len() as u16 + 6;
    let area = centered(f.area(), 76, h);
    f.render_widget(Clear, area);
    let mut lines = Vec::new();
    for (i, fl) in form.fields.iter().enumerate() {
        let focus = i == form.focus;
        let mut spans = vec![
            Span::styled(if focus { "▶ " } else { "  " }, th.accent()),
            Span::styled(format!("{:<13}", fl.label), th.dim()),
            Span::styled(
                fl.value.clone(),
                if focus { th.accent() } else { Style::default() },
            ),
            Span::raw(if focus { "▏" } else { "" }),
        ];
        if fl.value.is_empty() && fl.error.is_none() {
            let model = form
                .fields
                .iter()
                .find(|x| x.field == Field::Model)
                .map_or("", |x| x.value.trim());
            let hint = match fl.field {
                Field::Dim | Field::Epochs | Field::Lr | Field::Negatives => {
                    match jobs::setting_default(model, fl.field.setting().unwrap_or_default()) {
                        Some(d) => format!("(default {d})"),
                        None if jobs::check_model(model).is_ok() => {
                            format!("(not read by {model})")
                        }
                        None => "(model default)".into(),
                    }
                }
                Field::Init => "(none: fresh start)".into(),
                Field::Other => "(KEY=VALUE ..., e.g. batch=50 patience=3)".into(),
                Field::Partition | Field::Gres | Field::Time | Field::Account => {
                    "(Slurm's default)".into()
                }
                Field::Grid => "(none: one job; KEY=V1,V2 ...: a sweep)".into(),
                Field::Seeds => "(1; a sweep's seeds, e.g. 1,2,3)".into(),
                Field::Parallel => "(a sweep's sessions at once; local default 1)".into(),
                _ => String::new(),
            };
            spans.push(Span::styled(hint, th.dim()));
        } else if form.swept(i) {
            spans.push(Span::styled(
                "  (the sweep grid's values replace it)",
                th.dim(),
            ));
        } else if matches!(fl.field, Field::Model | Field::Launcher) && focus {
            spans.push(Span::styled("  ←/→ choose", th.dim()));
        }
        if let Some(e) = &fl.error {
            spans.push(Span::styled(format!("  ✗ {e}"), th.bad()));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::raw(""));
    if form.submitting {
        lines.push(Line::from(Span::styled("  launching…", th.warn())));
    } else if let Some(e) = &form.error {
        lines.push(Line::from(Span::styled(format!("  ✗ {e}"), th.bad())));
    } else {
        lines.push(Line::raw(""));
    }
    lines.push(Line::from(Span::styled(
        "  Enter launch · Tab/↓ next · ↑ previous · Ctrl-U clear · Esc cancel",
        th.dim(),
    )));
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block(th, format!(" {} ", form.title), true)),
        area,
    );
}
