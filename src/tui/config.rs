//! Workbench settings: `$XDG_CONFIG_HOME/rosetta/config.toml` (or
//! `~/.config/rosetta/config.toml`), the `--theme` flag and `NO_COLOR`.
//!
//! ```toml
//! theme = "light"            # or "dark"
//! sessions_dir = "sessions"  # where session folders live
//! workspace = "data/workspace.toml"   # default of the new-job form
//! bell = true                # terminal bell when a job finishes, fails or diverges
//! encode_limit_s = 10        # longest encoding opening a session starts (longer: Search offers an index build)
//! [keys]                     # rebind any action named in the help popup's config names
//! new_job = ["n", "ctrl-n"]
//! [colors]                   # override theme colours (names or #rrggbb)
//! accent = "magenta"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

use super::keymap::Keymap;
use rosetta::{Error, Result};

/// The config file's contents.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConfigFile {
    /// `dark` or `light`.
    pub theme: Option<String>,
    /// Sessions root (default `sessions`).
    pub sessions_dir: Option<PathBuf>,
    /// Default workspace of the new-job form.
    pub workspace: Option<String>,
    /// Ring the terminal bell when a job finishes, fails or diverges
    /// (default true; the message on the status line shows either way).
    pub bell: Option<bool>,
    /// Seconds of encoding a collection that opening a session may start
    /// (estimated on a sample; default 10): a longer one is not started,
    /// and Search offers to build the session's index as a job.
    pub encode_limit_s: Option<f64>,
    /// Key overrides: action name → keys.
    pub keys: BTreeMap<String, Vec<String>>,
    /// Colour overrides: slot name → colour.
    pub colors: BTreeMap<String, String>,
}

/// The config file with every key at its default value, commented: what
/// `rosetta --print-config` prints (a test reads it back as the defaults).
pub fn default_config_text() -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Rosetta workbench config: {} (or --config FILE).\n\
         # Every key is optional; these are the defaults.\n\n\
         theme = \"dark\"             # dark or light (--theme wins; NO_COLOR wins over both)\n\
         sessions_dir = \"sessions\"  # where session folders live (--sessions wins)\n\
         bell = true                # terminal bell when a job finishes, fails or diverges\n\
         encode_limit_s = 10        # longest encoding (seconds, estimated) opening a session starts; longer: Search offers `rosetta index build`\n\
         # workspace = \"{SETUP_WORKSPACE}\"   # default of the new-job form (this one when `rosetta setup` made it)\n\n\
         [keys]   # action = [keys]: letters, f1..f12, ctrl-X, alt-X, up, down, left, right, pageup, pagedown, home, end, enter, esc, tab, backtab",
        default_path().display()
    );
    for (name, keys, desc) in super::keymap::default_keys() {
        let ks: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
        let _ = writeln!(t, "{name} = [{}]   # {desc}", ks.join(", "));
    }
    let th = Theme::new(ThemeKind::Dark);
    let _ = writeln!(
        t,
        "\n[colors]   # dark theme's colours: names (red, lightblue, darkgray, ...) or #rrggbb"
    );
    for (slot, c) in [
        ("accent", th.accent),
        ("dim", th.dim),
        ("good", th.good),
        ("bad", th.bad),
        ("warn", th.warn),
        ("highlight", th.highlight),
    ] {
        let _ = writeln!(t, "# {slot} = \"{c}\"");
    }
    t
}

/// The workspace `rosetta setup` writes (English→Spanish Bible), when it is
/// there: the new-job form's default unless the config names another.
pub const SETUP_WORKSPACE: &str = "workspaces/bible-en-es/workspace.toml";

/// The default config path.
pub fn default_path() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("rosetta")
        .join("config.toml")
}

impl ConfigFile {
    /// Reads `path`; a missing file is the default config.
    pub fn load(path: &Path) -> Result<ConfigFile> {
        match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| Error::file(path, e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
            Err(e) => Err(Error::io(path, e)),
        }
    }
}

/// Light or dark palette.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThemeKind {
    /// For dark terminals.
    Dark,
    /// For light terminals.
    Light,
}

/// Colours and emphasis the screens use.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// No colours at all (NO_COLOR): emphasis by bold/reverse only.
    pub mono: bool,
    /// Titles, selected tab, smoothed curves.
    pub accent: Color,
    /// Secondary text.
    pub dim: Color,
    /// Good figures, done jobs.
    pub good: Color,
    /// Errors, failed jobs.
    pub bad: Color,
    /// Running jobs, warnings.
    pub warn: Color,
    /// Highlighted query terms.
    pub highlight: Color,
    /// Series colours for overlays.
    pub series: Vec<Color>,
}

impl Theme {
    /// The built-in palette.
    pub fn new(kind: ThemeKind) -> Theme {
        match kind {
            ThemeKind::Dark => Theme {
                mono: false,
                accent: Color::Cyan,
                dim: Color::DarkGray,
                good: Color::Green,
                bad: Color::Red,
                warn: Color::Yellow,
                highlight: Color::LightYellow,
                series: vec![
                    Color::Cyan,
                    Color::Magenta,
                    Color::Yellow,
                    Color::Green,
                    Color::LightBlue,
                    Color::LightRed,
                ],
            },
            ThemeKind::Light => Theme {
                mono: false,
                accent: Color::Blue,
                dim: Color::Gray,
                good: Color::Green,
                bad: Color::Red,
                warn: Color::Rgb(180, 110, 0),
                highlight: Color::Magenta,
                series: vec![
                    Color::Blue,
                    Color::Magenta,
                    Color::Rgb(180, 110, 0),
                    Color::Green,
                    Color::Red,
                    Color::Cyan,
                ],
            },
        }
    }

    /// No colours (for `NO_COLOR` and snapshot tests).
    pub fn mono() -> Theme {
        Theme {
            mono: true,
            accent: Color::Reset,
            dim: Color::Reset,
            good: Color::Reset,
            bad: Color::Reset,
            warn: Color::Reset,
            highlight: Color::Reset,
            series: vec![Color::Reset],
        }
    }

    /// Applies `[colors]` overrides.
    pub fn with_overrides(mut self, colors: &BTreeMap<String, String>) -> Result<Theme> {
        if self.mono {
            return Ok(self);
        }
        for (k, v) in colors {
            let c: Color = v
                .parse()
                .map_err(|_| Error::invalid(format!("[colors] {k}: not a colour: {v:?}")))?;
            match k.as_str() {
                "accent" => self.accent = c,
                "dim" => self.dim = c,
                "good" => self.good = c,
                "bad" => self.bad = c,
                "warn" => self.warn = c,
                "highlight" => self.highlight = c,
                other => {
                    return Err(Error::invalid(format!(
                        "[colors] {other}: unknown slot (accent, dim, good, bad, warn, highlight)"
                    )))
                }
            }
        }
        Ok(self)
    }

    fn fg(&self, c: Color) -> Style {
        if self.mono {
            Style::default()
        } else {
            Style::default().fg(c)
        }
    }
    /// Accent text.
    pub fn accent(&self) -> Style {
        self.fg(self.accent).add_modifier(Modifier::BOLD)
    }
    /// Secondary text.
    pub fn dim(&self) -> Style {
        self.fg(self.dim)
    }
    /// Good figures.
    pub fn good(&self) -> Style {
        self.fg(self.good)
    }
    /// Errors.
    pub fn bad(&self) -> Style {
        self.fg(self.bad).add_modifier(Modifier::BOLD)
    }
    /// Warnings / running.
    pub fn warn(&self) -> Style {
        self.fg(self.warn)
    }
    /// Highlighted words.
    pub fn highlight(&self) -> Style {
        if self.mono {
            Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
        } else {
            Style::default()
                .fg(self.highlight)
                .add_modifier(Modifier::BOLD)
        }
    }
    /// Selected row.
    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    /// Colour of overlay series `i`.
    pub fn series(&self, i: usize) -> Style {
        self.fg(self.series[i % self.series.len()])
    }
}

/// Everything the workbench is configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Palette.
    pub theme: Theme,
    /// Keymap.
    pub keymap: Keymap,
    /// Sessions root.
    pub sessions_dir: PathBuf,
    /// Default workspace of the new-job form.
    pub workspace: String,
    /// Ring the terminal bell on job alerts.
    pub bell: bool,
    /// Seconds of encoding a collection that opening a session may start.
    pub encode_limit_s: f64,
    /// Where marks and the baseline are remembered between launches
    /// (`None`: not remembered, as in tests).
    pub state_file: Option<PathBuf>,
}

impl Settings {
    /// Settings from the config file, the `--theme` flag (wins over the file)
    /// and `NO_COLOR` (wins over both).
    pub fn resolve(
        file: &ConfigFile,
        theme_flag: Option<&str>,
        no_color: bool,
    ) -> Result<Settings> {
        let name = theme_flag.or(file.theme.as_deref()).unwrap_or("dark");
        let kind = match name {
            "dark" => ThemeKind::Dark,
            "light" => ThemeKind::Light,
            other => {
                return Err(Error::invalid(format!(
                    "theme {other:?}: expected dark or light"
                )))
            }
        };
        let theme = if no_color {
            Theme::mono()
        } else {
            Theme::new(kind).with_overrides(&file.colors)?
        };
        let keymap = Keymap::with_overrides(&file.keys).map_err(Error::invalid)?;
        let encode_limit_s = file
            .encode_limit_s
            .unwrap_or(rosetta::session::collection::SILENT_LIMIT_S);
        if !(encode_limit_s.is_finite() && encode_limit_s >= 0.0) {
            return Err(Error::invalid(format!(
                "encode_limit_s = {encode_limit_s}: expected seconds, 0 or more (default {})",
                rosetta::session::collection::SILENT_LIMIT_S
            )));
        }
        Ok(Settings {
            theme,
            keymap,
            sessions_dir: file
                .sessions_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("sessions")),
            workspace: file.workspace.clone().unwrap_or_default(),
            bell: file.bell.unwrap_or(true),
            encode_limit_s,
            state_file: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_printed_default_config_reads_back_as_the_defaults() {
        let text = default_config_text();
        let file: ConfigFile = toml::from_str(&text).expect("default config parses");
        let s = Settings::resolve(&file, None, false).unwrap();
        let d = Settings::resolve(&ConfigFile::default(), None, false).unwrap();
        assert_eq!(s.sessions_dir, d.sessions_dir);
        assert_eq!((s.bell, file.bell), (d.bell, Some(d.bell)));
        assert_eq!(
            (s.encode_limit_s, file.encode_limit_s),
            (d.encode_limit_s, Some(d.encode_limit_s))
        );
        let bad = ConfigFile {
            encode_limit_s: Some(-1.0),
            ..ConfigFile::default()
        };
        let e = Settings::resolve(&bad, None, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("encode_limit_s = -1"), "{e}");
        assert_eq!(s.theme, d.theme);
        assert_eq!(s.keymap.bindings.len(), d.keymap.bindings.len());
        for (a, b) in s.keymap.bindings.iter().zip(&d.keymap.bindings) {
            assert_eq!((a.name, &a.keys), (b.name, &b.keys));
        }
        // every binding is listed, and the commented colours are valid values
        assert_eq!(file.keys.len(), d.keymap.bindings.len());
        let colors: String = text
            .split("[colors]")
            .nth(1)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("# "))
            .filter(|l| l.contains(" = \""))
            .map(|l| format!("{l}\n"))
            .collect();
        let c: BTreeMap<String, String> = toml::from_str(&colors).unwrap();
        assert_eq!(c.len(), 6);
        let t = Theme::new(ThemeKind::Dark).with_overrides(&c).unwrap();
        assert_eq!(t, Theme::new(ThemeKind::Dark));
    }
}
