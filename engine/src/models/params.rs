//! The settings a job is given, as text: [`Params`] (the `--set` values and
//! the values a session recorded) and [`ModelParams`], one model's view of
//! them through its settings table ([`Setting`], each value checked by its
//! [`Check`]). The leaf of the models' contract: it imports nothing of
//! `models/`, so the typed definitions ([`super::settings`]) and the
//! registry build on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// What a setting's value must be. Every check refuses NaN and infinities.
#[derive(Debug, Clone, Copy)]
pub enum Check {
    /// A whole number in `min..=max`.
    Int {
        /// Smallest value.
        min: u64,
        /// Largest value.
        max: u64,
    },
    /// A finite number `> 0`.
    Positive,
    /// A finite number `≥ 0`.
    NonNegative,
    /// A finite number in `[min, max]` (`max` excluded when `open`).
    Range {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// Whether `max` itself is refused.
        open: bool,
    },
    /// `true` or `false`.
    Bool,
    /// One of the listed words.
    Choice(&'static [&'static str]),
    /// A value with its own grammar, checked by the function (the message
    /// says what is expected).
    Parse(fn(&str) -> std::result::Result<(), String>),
    /// A path (read when the job starts).
    Path,
}

impl Check {
    /// Checks `value`; the message says what was expected.
    pub fn check(&self, value: &str) -> std::result::Result<(), String> {
        let v = value.trim();
        let number = || -> std::result::Result<f64, String> {
            let x: f64 = v
                .parse()
                .map_err(|_| format!("expected a number, got `{v}`"))?;
            if x.is_finite() {
                Ok(x)
            } else {
                Err(format!("expected a finite number, got `{v}`"))
            }
        };
        match *self {
            Check::Int { min, max } => {
                let x: u64 = v
                    .parse()
                    .map_err(|_| format!("expected a whole number in {min}..={max}, got `{v}`"))?;
                if x < min || x > max {
                    return Err(format!("{x} is out of range ({min}..={max})"));
                }
                Ok(())
            }
            Check::Positive => {
                let x = number()?;
                if x > 0.0 {
                    Ok(())
                } else {
                    Err(format!("must be > 0, got {x}"))
                }
            }
            Check::NonNegative => {
                let x = number()?;
                if x >= 0.0 {
                    Ok(())
                } else {
                    Err(format!("must be ≥ 0, got {x}"))
                }
            }
            Check::Range { min, max, open } => {
                let x = number()?;
                let ok = x >= min && if open { x < max } else { x <= max };
                if ok {
                    Ok(())
                } else {
                    let close = if open { ")" } else { "]" };
                    Err(format!("must lie in [{min}, {max}{close}, got {x}"))
                }
            }
            Check::Bool => match v {
                "true" | "false" => Ok(()),
                _ => Err(format!("expected true or false, got `{v}`")),
            },
            Check::Choice(words) => {
                if words.contains(&v) {
                    Ok(())
                } else {
                    Err(format!("expected {}, got `{v}`", words.join(" or ")))
                }
            }
            Check::Parse(f) => f(v),
            Check::Path => {
                if v.is_empty() {
                    Err("expected a path".into())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// A short description of the accepted values, for help texts.
    pub fn describe(&self) -> String {
        match *self {
            Check::Int { min, max } if max == u64::MAX => format!("integer ≥ {min}"),
            Check::Int { min, max } => format!("integer {min}..={max}"),
            Check::Positive => "number > 0".into(),
            Check::NonNegative => "number ≥ 0".into(),
            Check::Range { min, max, open } => {
                format!("number in [{min}, {max}{}", if open { ")" } else { "]" })
            }
            Check::Bool => "true|false".into(),
            Check::Choice(w) => w.join("|"),
            Check::Parse(_) => "see the model's docs".into(),
            Check::Path => "path".into(),
        }
    }
}

/// One `--set` key of a model.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// The key.
    pub key: &'static str,
    /// The default as written in `config.toml`; `None`: unset unless given.
    pub default: Option<&'static str>,
    /// What a value must be.
    pub check: Check,
    /// One line of help.
    pub help: &'static str,
    /// Whether it chooses how the model computes, not what its checkpoint
    /// holds (a BiLSTM's recurrence, the training precision): a checkpoint
    /// recording another value of it is still the session's.
    pub compute_only: bool,
}

/// Hyper-parameters given as `--set key=value` (and the common flags), which
/// records every value a model reads, defaults included, so the session's
/// `config.toml` lists them all.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Params {
    given: BTreeMap<String, String>,
    /// Values resolved when the session was made (`config.toml`'s
    /// `[params]`): used for a key not given, before the registry default,
    /// so a resume reads what the interrupted run read.
    #[serde(default)]
    recorded: BTreeMap<String, String>,
    #[serde(skip)]
    used: std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

impl Params {
    /// Parameters from `key=value` settings.
    pub fn new(given: BTreeMap<String, String>) -> Self {
        Params {
            given,
            recorded: BTreeMap::new(),
            used: Default::default(),
        }
    }

    /// Parameters from the given settings, falling back to `recorded`
    /// values (a session's resolved `[params]`) before registry defaults.
    /// Only given keys count for [`Params::check_unused`].
    pub fn with_recorded(
        given: BTreeMap<String, String>,
        recorded: BTreeMap<String, String>,
    ) -> Self {
        Params {
            given,
            recorded,
            used: Default::default(),
        }
    }

    /// The given value of `key`, else its recorded one.
    fn lookup(&self, key: &str) -> Option<&String> {
        self.given.get(key).or_else(|| self.recorded.get(key))
    }

    /// Whether `key` was given (not merely recorded or defaulted).
    pub fn is_given(&self, key: &str) -> bool {
        self.given.contains_key(key)
    }

    /// Sets or replaces one value.
    pub fn set(&mut self, key: &str, value: impl ToString) {
        self.given.insert(key.to_string(), value.to_string());
    }

    fn record(&self, key: &str, v: &str) {
        self.used
            .lock()
            .expect("params lock")
            .insert(key.to_string(), v.to_string());
    }

    /// These parameters read as the settings `settings` of model `name`
    /// (a typed `Config`'s [`Settings::SETTINGS`](super::settings::Settings::SETTINGS)).
    pub fn with_settings<'a>(
        &'a self,
        name: &'a str,
        settings: &'static [Setting],
    ) -> ModelParams<'a> {
        ModelParams {
            params: self,
            name,
            settings,
        }
    }

    /// The value of `key` parsed as `T`, or `default`, with no registry
    /// check; the choice is recorded. For trainers outside the registry
    /// (test doubles); registered models read their typed `Config`
    /// ([`Settings`](super::settings::Settings)).
    pub fn get_or<T>(&self, key: &str, default: T) -> Result<T>
    where
        T: std::str::FromStr + ToString,
        T::Err: std::fmt::Display,
    {
        match self.lookup(key) {
            Some(s) => {
                let v = s.parse::<T>().map_err(|e| {
                    Error::invalid(format!("--set {key}={s}: not a valid value ({e})"))
                })?;
                self.record(key, s);
                Ok(v)
            }
            None => {
                self.record(key, &default.to_string());
                Ok(default)
            }
        }
    }

    /// Every value read so far, defaults included.
    pub fn resolved(&self) -> BTreeMap<String, String> {
        self.used.lock().expect("params lock").clone()
    }

    /// Keys that were given but never read: an error naming them, so that a
    /// misspelt `--set` is not silently ignored.
    pub fn check_unused(&self) -> Result<()> {
        let used = self.used.lock().expect("params lock");
        let unused: Vec<&String> = self
            .given
            .keys()
            .filter(|k| !used.contains_key(*k))
            .collect();
        if unused.is_empty() {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "unknown setting(s) for this model: {}",
                unused
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }
}

/// One model's view of [`Params`]: values are checked and defaulted by the
/// model's settings, and every value read is recorded.
#[derive(Debug, Clone, Copy)]
pub struct ModelParams<'a> {
    params: &'a Params,
    name: &'a str,
    settings: &'static [Setting],
}

impl ModelParams<'_> {
    fn setting(&self, key: &str) -> Result<&'static Setting> {
        self.settings.iter().find(|s| s.key == key).ok_or_else(|| {
            Error::invalid(format!(
                "{}: `{key}` is not one of the model's settings",
                self.name
            ))
        })
    }

    /// The value of `key` parsed as `T`: the given one (checked by the
    /// registry) or the registry default; the choice is recorded.
    pub fn get<T>(&self, key: &str) -> Result<T>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        let setting = self.setting(key)?;
        let name = self.name;
        let (value, given) = match self.params.lookup(key) {
            Some(v) => (v.as_str(), true),
            None => (
                setting.default.ok_or_else(|| {
                    Error::invalid(format!("{name}: `{key}` has no default; set it"))
                })?,
                false,
            ),
        };
        if given {
            setting
                .check
                .check(value)
                .map_err(|e| Error::invalid(format!("{name}: --set {key}={value}: {e}")))?;
        }
        let v = value.trim().parse::<T>().map_err(|e| {
            Error::invalid(format!(
                "{name}: --set {key}={value}: not a valid value ({e})"
            ))
        })?;
        self.params.record(key, value.trim());
        Ok(v)
    }

    /// An optional setting with no default (`init`): the given value,
    /// checked and recorded, or `None`.
    pub fn get_opt(&self, key: &str) -> Result<Option<String>> {
        let setting = self.setting(key)?;
        match self.params.lookup(key) {
            None => Ok(None),
            Some(v) => {
                setting
                    .check
                    .check(v)
                    .map_err(|e| Error::invalid(format!("{}: --set {key}={v}: {e}", self.name)))?;
                self.params.record(key, v);
                Ok(Some(v.clone()))
            }
        }
    }

    /// [`Params::check_unused`].
    pub fn check_unused(&self) -> Result<()> {
        self.params.check_unused()
    }
}
