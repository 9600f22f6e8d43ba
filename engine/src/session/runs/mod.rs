//! Telling runs apart: a session's own name, tags and note (`meta.json`),
//! the settings that differ between runs ("diff only"), labels that never
//! cut names to ambiguity, filters by setting or figure, a run's details,
//! and deleting a session. `rosetta jobs` and the workbench's Jobs screen
//! both go through these functions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::metrics::{Curves, MetricsTail};
use super::{
    json_error, list_sessions, read_status, SessionConfig, SessionEntry, State, CHECKPOINT_DIR,
    CONFIG_FILE, LOG_FILE, METRICS_FILE, STATUS_FILE,
};
use crate::util::write_atomic;
use crate::{Error, Result};

/// A session's own name, tags and note, kept in its folder.
pub const META_FILE: &str = "meta.json";

/// `meta.json`: what a user wrote about a run. Every field is optional; a
/// session without the file has none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunMeta {
    /// Display name (the folder name when empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Tags, each once, in the order given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Free text.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl RunMeta {
    /// Reads `meta.json` of session folder `dir`; a missing file is the
    /// empty meta, a malformed one an error with its path and line.
    pub fn read(dir: &Path) -> Result<RunMeta> {
        use crate::util::{read_regular_if_exists, Links, SMALL_FILE_LIMIT};
        let path = dir.join(META_FILE);
        let Some(b) = read_regular_if_exists(&path, Links::Refuse, SMALL_FILE_LIMIT)? else {
            return Ok(RunMeta::default());
        };
        serde_json::from_slice(&b).map_err(|e| json_error(&path, e))
    }

    /// Writes `meta.json` atomically into session folder `dir` (which must
    /// be a session folder: it has a `config.toml` or `status.json`).
    pub fn write(&self, dir: &Path) -> Result<()> {
        check_session_dir(dir)?;
        let path = dir.join(META_FILE);
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::file(&path, format!("cannot serialise: {e}")))?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes)
    }

    /// The name to show for session folder `dir`: the meta's name, else the
    /// folder name.
    pub fn display_name(&self, dir: &Path) -> String {
        if self.name.is_empty() {
            folder_name(dir)
        } else {
            self.name.clone()
        }
    }
}

/// The folder name of `dir` (its path when it has none).
pub fn folder_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Whether `dir` is a session folder: a folder with a `config.toml` or a
/// `status.json`.
pub fn is_session_dir(dir: &Path) -> bool {
    dir.is_dir() && (dir.join(CONFIG_FILE).is_file() || dir.join(STATUS_FILE).is_file())
}

fn check_session_dir(dir: &Path) -> Result<()> {
    if is_session_dir(dir) {
        Ok(())
    } else {
        Err(Error::file(
            dir,
            format!("not a session folder (no {CONFIG_FILE} or {STATUS_FILE})"),
        ))
    }
}

fn one_line(what: &str, s: &str) -> Result<String> {
    let t = s.trim();
    if t.contains(['\n', '\r']) {
        return Err(Error::invalid(format!("{what} must be one line")));
    }
    Ok(t.to_string())
}

/// Sets the display name of session `dir` (empty: back to the folder name).
pub fn rename(dir: &Path, name: &str) -> Result<RunMeta> {
    let mut m = RunMeta::read(dir)?;
    m.name = one_line("a name", name)?;
    m.write(dir)?;
    Ok(m)
}

/// Sets the note of session `dir` (empty: no note).
pub fn set_note(dir: &Path, note: &str) -> Result<RunMeta> {
    let mut m = RunMeta::read(dir)?;
    m.note = note.trim().to_string();
    m.write(dir)?;
    Ok(m)
}

/// Adds `add` and removes `remove` from the tags of session `dir`. A tag
/// is one word (no spaces or commas) and is kept once.
pub fn edit_tags(dir: &Path, add: &[String], remove: &[String]) -> Result<RunMeta> {
    let mut m = RunMeta::read(dir)?;
    for t in add {
        let t = t.trim();
        if t.is_empty() || t.contains(|c: char| c.is_whitespace() || c == ',') {
            return Err(Error::invalid(format!(
                "tag {t:?}: a tag is one word (no spaces or commas)"
            )));
        }
        if !m.tags.iter().any(|x| x == t) {
            m.tags.push(t.to_string());
        }
    }
    m.tags.retain(|t| !remove.iter().any(|r| r.trim() == t));
    m.write(dir)?;
    Ok(m)
}

/// Replaces the tags of session `dir` with the words of `text` (spaces or
/// commas between them).
pub fn set_tags(dir: &Path, text: &str) -> Result<RunMeta> {
    let words: Vec<String> = text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect();
    let old = RunMeta::read(dir)?.tags;
    edit_tags(
        dir,
        &words,
        &old.into_iter()
            .filter(|t| !words.contains(t))
            .collect::<Vec<_>>(),
    )
}

/// Deletes session folder `dir`: its own files ([`super::SESSION_FILES`],
/// the checkpoints, temporary files of its writes) and then the folder.
/// Refused, with nothing deleted, for a folder that is not a session
/// written by Rosetta (its `config.toml` and `status.json` must parse as a
/// session's), for a folder holding anything else (a file or folder a
/// session does not write: it is not ours to delete), and for a job that
/// may be running: its status is not final and its process is alive, or
/// someone holds its lock (cancel it first). Refused too, before anything
/// is looked at, for a path [`session_folder_path`] refuses (a link to a
/// folder, with or without a trailing slash, or a path ending in `.` or
/// `..`). Links inside the folder are removed, never followed.
pub fn delete(dir: &Path) -> Result<()> {
    let dir: &Path = &session_folder_path(dir, "deleted")?;
    let not_session = |e: Error| {
        Error::file(
            dir,
            format!("not a Rosetta session folder ({e}); nothing deleted"),
        )
    };
    check_session_dir(dir)?;
    SessionConfig::read(dir).map_err(not_session)?;
    let st = read_status(dir).map_err(not_session)?;
    if !st.state.is_final() && st.process_alive() {
        return Err(Error::file(
            dir,
            format!(
                "the job is {} (pid {}): cancel it before deleting the session",
                st.state, st.pid
            ),
        ));
    }
    if super::lock_is_held(dir) {
        return Err(Error::file(
            dir,
            "a process holds the session's lock (its job is running): cancel it before deleting",
        ));
    }
    // everything to remove, listed before anything is removed
    let ck_dir = dir.join(CHECKPOINT_DIR);
    let mut files = Vec::new();
    let mut foreign = Vec::new();
    let mut ck_is_dir = false;
    for (folder, known) in [
        (dir, super::SESSION_FILES),
        (ck_dir.as_path(), super::CHECKPOINT_FILES),
    ] {
        if folder == ck_dir && !ck_is_dir {
            break;
        }
        for e in std::fs::read_dir(folder).map_err(|e| Error::io(folder, e))? {
            let e = e.map_err(|e| Error::io(folder, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let t = e.file_type().map_err(|x| Error::io(e.path(), x))?;
            if folder == dir && name == CHECKPOINT_DIR && t.is_dir() {
                ck_is_dir = true;
            } else if (t.is_file() || t.is_symlink()) && is_own_file(&name, known) {
                files.push(e.path());
            } else {
                foreign.push(e.path());
            }
        }
    }
    if !foreign.is_empty() {
        foreign.sort();
        let shown: Vec<String> = foreign
            .iter()
            .take(5)
            .map(|p| p.display().to_string())
            .collect();
        return Err(Error::file(
            dir,
            format!(
                "holds {} entr{} a session does not write ({}{}): not deleting what is not ours; \
                 nothing deleted",
                foreign.len(),
                if foreign.len() == 1 { "y" } else { "ies" },
                shown.join(", "),
                if foreign.len() > 5 { ", …" } else { "" }
            ),
        ));
    }
    for f in &files {
        std::fs::remove_file(f).map_err(|e| Error::io(f, e))?;
    }
    if ck_is_dir {
        std::fs::remove_dir(&ck_dir).map_err(|e| Error::io(&ck_dir, e))?;
    }
    std::fs::remove_dir(dir).map_err(|e| Error::io(dir, e))
}

/// The session folder `dir` names, as a path with no symbolic link in it:
/// its parent canonicalised (links above the session folder, a sessions
/// root on another disk, are the user's choice and are resolved) and its
/// own name, which must be a plain name of a folder that is not a symbolic
/// link. A path whose last component is `.` or `..` (`rep/real/.`), that
/// holds `..` anywhere, or whose last component is a link (`rep/link`,
/// `rep/link/`: a trailing slash would make the system follow it) is an
/// error naming the path and saying what to give instead, with `what`
/// (`deleted`, `touched`) said as not done.
pub fn session_folder_path(dir: &Path, what: &str) -> Result<PathBuf> {
    use std::path::Component;
    let raw = dir.as_os_str().as_encoded_bytes();
    let trimmed = {
        let mut t = raw;
        while t.len() > 1 && t.ends_with(b"/") {
            t = &t[..t.len() - 1];
        }
        t
    };
    let ends_dot = trimmed == b"." || trimmed.ends_with(b"/.");
    if ends_dot || dir.components().any(|c| c == Component::ParentDir) {
        return Err(Error::file(
            dir,
            format!(
                "a session folder is named by a path without `.` or `..` at its end or `..`                  inside (give the folder's own path, e.g. sessions/NAME); nothing {what}"
            ),
        ));
    }
    let name = match dir.components().next_back() {
        Some(Component::Normal(n)) => n.to_os_string(),
        _ => {
            return Err(Error::file(
                dir,
                format!("does not name a session folder; nothing {what}"),
            ))
        }
    };
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let parent = std::fs::canonicalize(parent).map_err(|e| Error::io(parent, e))?;
    let path = parent.join(&name);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::file(
                dir,
                format!("not a session folder (nothing is there); nothing {what}"),
            )
        } else {
            Error::io(dir, e)
        }
    })?;
    if meta.file_type().is_symlink() {
        return Err(Error::file(
            dir,
            format!(
                "is a symbolic link (to {}): give the session folder itself, not a link to it;                  nothing {what}",
                std::fs::read_link(&path)
                    .map(|t| t.display().to_string())
                    .unwrap_or_else(|_| "?".into())
            ),
        ));
    }
    if !meta.is_dir() {
        return Err(Error::file(dir, format!("is not a folder; nothing {what}")));
    }
    Ok(path)
}

/// Whether `name` is one of `known`, or a temporary file of one
/// (`.NAME.tmp.…`, [`crate::util::write_atomic`]).
pub(crate) fn is_own_file(name: &str, known: &[&str]) -> bool {
    let bli_split = |n: &str| {
        n.strip_prefix("bli-split-")
            .and_then(|r| r.strip_suffix(".json"))
            .is_some_and(|seed| !seed.is_empty() && seed.bytes().all(|b| b.is_ascii_digit()))
    };
    known.contains(&name)
        || (known == super::SESSION_FILES
            && (bli_split(name) || super::pretrained::is_cache_name(name)))
        || name
            .strip_prefix('.')
            .and_then(|r| r.split_once(".tmp."))
            .is_some_and(|(n, _)| known.contains(&n))
}

/// Names that tell runs apart: `names[i]` (a display name) as it is when
/// no other run has it, else `NAME (ID)` with the run's folder name
/// `ids[i]` (a name that is its folder name is kept as it is).
pub fn unique_names(names: &[String], ids: &[String]) -> Vec<String> {
    names
        .iter()
        .zip(ids)
        .map(|(n, id)| {
            if n != id && names.iter().filter(|m| *m == n).count() > 1 {
                format!("{n} ({id})")
            } else {
                n.clone()
            }
        })
        .collect()
}

/// Labels of session folders `dirs` in tables and legends: each one's
/// name (`meta.json`; its folder name when it has none, or when its
/// `meta.json` cannot be read), `NAME (FOLDER)` for a name several share
/// ([`unique_names`]), and, where two are still alike (the same folder
/// name under different roots), their paths as given.
pub fn session_labels(dirs: &[PathBuf]) -> Vec<String> {
    let ids: Vec<String> = dirs.iter().map(|d| folder_name(d)).collect();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| {
            RunMeta::read(d)
                .map(|m| m.display_name(d))
                .unwrap_or_else(|_| folder_name(d))
        })
        .collect();
    let labels = unique_names(&names, &ids);
    let clash = labels
        .iter()
        .enumerate()
        .any(|(i, n)| labels[..i].contains(n));
    if clash {
        labels
            .iter()
            .zip(dirs)
            .map(|(l, d)| {
                let p = d.display().to_string();
                if *l == folder_name(d) {
                    p
                } else {
                    format!("{l} ({p})")
                }
            })
            .collect()
    } else {
        labels
    }
}

/// Labels for `names` that are never cut to ambiguity: the prefix all of
/// them share is elided (`…`) up to a word boundary (`-`, `_`, `.`, `/`,
/// space), so `s2net-20261122-190301` and `s2net-20261122-190455` become
/// `…190301` and `…190455`. With fewer than two names, names all alike,
/// or no shared prefix worth eliding, the names are returned as they are.
pub fn distinct_labels(names: &[String]) -> Vec<String> {
    if names.len() < 2 || names.iter().all(|n| *n == names[0]) {
        return names.to_vec();
    }
    let first: Vec<char> = names[0].chars().collect();
    let mut lcp = first.len();
    for n in &names[1..] {
        lcp = lcp.min(
            n.chars()
                .zip(first.iter())
                .take_while(|(a, b)| a == *b)
                .count(),
        );
    }
    let shortest = names.iter().map(|n| n.chars().count()).min().unwrap_or(0);
    // the cut: right after a separator, leaving every label non-empty
    let cut = (1..=lcp.min(shortest.saturating_sub(1)))
        .rev()
        .find(|&i| matches!(first[i - 1], '-' | '_' | '.' | '/' | ' '))
        .unwrap_or(0);
    if cut < 3 {
        return names.to_vec();
    }
    names
        .iter()
        .map(|n| format!("…{}", n.chars().skip(cut).collect::<String>()))
        .collect()
}

/// `s` in at most `n` characters, cut in the middle (`ab…yz`) so both its
/// start and its distinguishing end stay visible.
pub fn elide_middle(s: &str, n: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= n || n < 3 {
        return s.to_string();
    }
    let tail = (n - 1) / 2;
    let head = n - 1 - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// The value of setting `key` in a session's config: `model`, `seed`,
/// `device` (as asked for), `workspace` (its folder or file stem), or a
/// hyper-parameter (resolved value, else the given one).
pub fn setting(cfg: &SessionConfig, key: &str) -> Option<String> {
    match key {
        "model" => Some(cfg.model.clone()),
        "seed" => Some(cfg.seed.to_string()),
        "device" => Some(cfg.device_request.to_string()),
        "workspace" => Some(workspace_label(&cfg.workspace)),
        k => cfg.params.get(k).or_else(|| cfg.given.get(k)).cloned(),
    }
}

/// A short name for a workspace file: its folder for `…/NAME/workspace.toml`,
/// else the file's stem.
pub fn workspace_label(p: &Path) -> String {
    let named = if p.file_name().is_some_and(|n| n == "workspace.toml") {
        p.parent().and_then(|d| d.file_name())
    } else {
        p.file_stem()
    };
    named
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Every setting of a session's config by name: `model`, `workspace`,
/// `seed`, `device` and each hyper-parameter ([`setting`]).
pub fn settings_map(cfg: &SessionConfig) -> BTreeMap<String, String> {
    let mut keys: Vec<&str> = FIXED_SETTINGS.to_vec();
    keys.extend(cfg.params.keys().map(String::as_str));
    keys.extend(cfg.given.keys().map(String::as_str));
    keys.into_iter()
        .filter_map(|k| Some((k.to_string(), setting(cfg, k)?)))
        .collect()
}

/// A setting's value as JSON: an integer or a finite number as a number
/// (when it reads back as written, so `001` and `1e-3` stay as typed only
/// where a number cannot hold them: `001` is a string, `1e-3` the number
/// 0.001), `true`/`false` as a boolean, anything else as a string.
pub fn typed_value(v: &str) -> serde_json::Value {
    let t = v.trim();
    let numeric = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
        && t.chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '-' || c == '.');
    if numeric {
        if let Ok(i) = t.parse::<i64>() {
            if i.to_string() == t {
                return serde_json::Value::from(i);
            }
        } else if let Ok(x) = t.parse::<f64>() {
            if x.is_finite() {
                return serde_json::Value::from(x);
            }
        }
    }
    match t {
        "true" => serde_json::Value::Bool(true),
        "false" => serde_json::Value::Bool(false),
        _ => serde_json::Value::String(v.to_string()),
    }
}

/// The settings every session has, shown first among differing settings.
const FIXED_SETTINGS: [&str; 4] = ["model", "workspace", "seed", "device"];

/// Sorts `items` by a column whose text `value` gives for each item (the
/// run tables' sort, CLI and workbench alike): values that parse as numbers
/// compare as numbers, others as text; items without a value go last
/// whatever the direction; equal items keep their order.
pub fn sort_by_column<T>(items: &mut [T], desc: bool, value: impl Fn(&T) -> Option<String>) {
    items.sort_by(|a, b| match (value(a), value(b)) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (Some(_), None) => std::cmp::Ordering::Less,
        (Some(x), Some(y)) => {
            let o = match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(p), Ok(q)) => p.total_cmp(&q),
                _ => x.cmp(&y),
            };
            if desc {
                o.reverse()
            } else {
                o
            }
        }
    });
}

/// The keys whose values differ between the settings maps
/// ([`settings_map`]) of several runs ("diff only"): `model`, `workspace`,
/// `seed`, `device` first, then hyper-parameters by name. A
/// hyper-parameter is compared within each model's own runs (those with
/// the same `model` value): it differs when two runs of one model differ
/// on it (one lacking it included), never merely because another model
/// has no such setting. Fewer than two runs: none.
pub fn differing_keys(maps: &[&BTreeMap<String, String>]) -> Vec<String> {
    if maps.len() < 2 {
        return Vec::new();
    }
    let mut all: std::collections::BTreeSet<&str> = Default::default();
    for m in maps {
        all.extend(m.keys().map(String::as_str));
    }
    let mut keys: Vec<&str> = FIXED_SETTINGS
        .iter()
        .copied()
        .filter(|k| all.contains(k))
        .collect();
    keys.extend(all.iter().filter(|k| !FIXED_SETTINGS.contains(k)));
    let differ = |group: &[&&BTreeMap<String, String>], k: &str| {
        group.len() > 1 && group[1..].iter().any(|m| m.get(k) != group[0].get(k))
    };
    let mut models: Vec<Option<&String>> = maps.iter().map(|m| m.get("model")).collect();
    models.sort();
    models.dedup();
    let groups: Vec<Vec<&&BTreeMap<String, String>>> = models
        .iter()
        .map(|model| maps.iter().filter(|m| m.get("model") == *model).collect())
        .collect();
    let all_runs: Vec<&&BTreeMap<String, String>> = maps.iter().collect();
    keys.into_iter()
        .filter(|k| {
            if FIXED_SETTINGS.contains(k) {
                differ(&all_runs, k)
            } else {
                groups.iter().any(|g| differ(g, k))
            }
        })
        .map(str::to_string)
        .collect()
}

/// The settings whose values differ between the sessions of `configs`
/// ([`differing_keys`] of their [`settings_map`]s).
pub fn differing_settings(configs: &[&SessionConfig]) -> Vec<String> {
    let maps: Vec<BTreeMap<String, String>> = configs.iter().map(|c| settings_map(c)).collect();
    differing_keys(&maps.iter().collect::<Vec<_>>())
}

/// Best value of each figure in a session's curves: the highest of each
/// validation figure (`MRR`, `P@1`, ad-hoc figures) with its epoch, and
/// the lowest loss. Names as recorded.
pub fn best_figures(curves: &Curves) -> BTreeMap<String, (f64, f64)> {
    let mut best: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for v in &curves.valid {
        for (k, &y) in &v.scores {
            if k == "queries" || !y.is_finite() {
                continue;
            }
            let e = best.entry(k.clone()).or_insert((y, v.x));
            if y > e.0 {
                *e = (y, v.x);
            }
        }
    }
    if let Some(&(s, y)) = curves.loss.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        best.insert("loss".into(), (y, s));
    }
    best
}

/// One run as the run table shows it: the session entry, its meta and its
/// figures.
#[derive(Debug, Clone)]
pub struct Run {
    /// Folder, config and status as listed.
    pub entry: SessionEntry,
    /// Its `meta.json`.
    pub meta: RunMeta,
    /// What could not be read in `meta.json`, if anything.
    pub meta_problem: Option<String>,
    /// Best figures ([`best_figures`]).
    pub best: BTreeMap<String, (f64, f64)>,
    /// Why the training looks diverged ([`Curves::divergence`]), if it does.
    pub divergence: Option<String>,
}

impl Run {
    /// Folder name.
    pub fn id(&self) -> String {
        folder_name(&self.entry.dir)
    }
    /// Display name ([`RunMeta::display_name`]).
    pub fn name(&self) -> String {
        self.meta.display_name(&self.entry.dir)
    }
    /// Value of a setting ([`setting`]).
    pub fn setting(&self, key: &str) -> Option<String> {
        self.entry.config.as_ref().and_then(|c| setting(c, key))
    }
}

/// The runs under a sessions root, kept between scans: each session's
/// metrics are read incrementally, so rescanning every few seconds reads
/// only what jobs appended.
#[derive(Debug, Default)]
pub struct RunIndex {
    tails: BTreeMap<PathBuf, (MetricsTail, Curves)>,
}

impl RunIndex {
    /// Every session under `root` ([`list_sessions`]) with its meta, best
    /// figures and divergence, in folder-name order.
    pub fn scan(&mut self, root: &Path) -> Result<Vec<Run>> {
        let entries = list_sessions(root)?;
        self.tails
            .retain(|d, _| entries.iter().any(|e| &e.dir == d));
        Ok(entries
            .into_iter()
            .map(|entry| {
                let (meta, meta_problem) = match RunMeta::read(&entry.dir) {
                    Ok(m) => (m, None),
                    Err(e) => (RunMeta::default(), Some(e.to_string())),
                };
                let (tail, curves) = self.tails.entry(entry.dir.clone()).or_insert_with(|| {
                    (
                        MetricsTail::new(entry.dir.join(METRICS_FILE)),
                        Curves::default(),
                    )
                });
                if let Ok(b) = tail.poll() {
                    if b.restarted {
                        *curves = Curves::default();
                    }
                    for r in &b.records {
                        curves.push(r);
                    }
                }
                Run {
                    best: best_figures(curves),
                    divergence: curves.divergence(),
                    entry,
                    meta,
                    meta_problem,
                }
            })
            .collect())
    }
}

/// A comparison in a [`RunFilter`] term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

/// One term of a [`RunFilter`].
#[derive(Debug, Clone, PartialEq)]
enum Term {
    /// Plain text: a substring of the name, folder, model, workspace,
    /// state, tags or note.
    Text(String),
    /// `key OP value`.
    Cmp(String, Op, String),
}

/// A run filter as typed in the filter box or given to `rosetta jobs
/// --filter`: words that must all match. A plain word matches a run whose
/// name, folder, model, workspace, state, tags or note contain it (case
/// ignored); `KEY=VALUE`, `KEY!=VALUE` compare a setting (`lr=0.01`,
/// `model=s2net`), `tag=T` a tag, `state=done` the state; `KEY>X`,
/// `KEY>=X`, `KEY<X`, `KEY<=X` compare a number: a best figure (`mrr>0.5`,
/// `p@1>=0.3`, `loss<0.4`, names case-insensitive) or a numeric setting
/// (`dim>=256`). A run without the key does not match a comparison.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunFilter {
    terms: Vec<Term>,
}

impl std::str::FromStr for RunFilter {
    type Err = Error;
    fn from_str(s: &str) -> Result<RunFilter> {
        let mut terms = Vec::new();
        for w in s.split_whitespace() {
            let ops = [
                ("!=", Op::Ne),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("=", Op::Eq),
                (">", Op::Gt),
                ("<", Op::Lt),
            ];
            let found = ops
                .iter()
                .filter_map(|(t, op)| w.find(t).map(|i| (i, *t, *op)))
                .min_by_key(|(i, t, _)| (*i, std::cmp::Reverse(t.len())));
            let Some((i, t, op)) = found else {
                terms.push(Term::Text(w.to_lowercase()));
                continue;
            };
            let (k, v) = (&w[..i], &w[i + t.len()..]);
            if k.is_empty() || v.is_empty() {
                return Err(Error::invalid(format!(
                    "filter `{w}`: expected KEY{t}VALUE (e.g. lr=0.01, mrr>0.5)"
                )));
            }
            if matches!(op, Op::Gt | Op::Ge | Op::Lt | Op::Le) && v.parse::<f64>().is_err() {
                return Err(Error::invalid(format!(
                    "filter `{w}`: `{v}` is not a number"
                )));
            }
            terms.push(Term::Cmp(k.to_lowercase(), op, v.to_string()));
        }
        Ok(RunFilter { terms })
    }
}

/// What a [`RunFilter`] looks at in a run; the engine's [`Run`] and the
/// workbench's rows both provide it.
pub trait Filterable {
    /// Text a plain word is searched in (lower-cased by the filter).
    fn haystack(&self) -> String;
    /// The value of setting `key` (lower-case), if the run has it.
    fn setting(&self, key: &str) -> Option<String>;
    /// Tags.
    fn tags(&self) -> Vec<String>;
    /// The state's name.
    fn state(&self) -> String;
    /// The best value of figure `name` (case-insensitive), if recorded.
    fn figure(&self, name: &str) -> Option<f64>;
}

impl RunFilter {
    /// Whether the filter has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether `run` passes every term.
    pub fn matches(&self, run: &dyn Filterable) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Text(w) => run.haystack().to_lowercase().contains(w),
            Term::Cmp(k, op, v) => cmp_term(run, k, *op, v),
        })
    }
}

fn cmp_term(run: &dyn Filterable, key: &str, op: Op, v: &str) -> bool {
    if matches!(op, Op::Eq | Op::Ne) {
        let eq = match key {
            "tag" | "tags" => run.tags().iter().any(|t| t.eq_ignore_ascii_case(v)),
            "state" => run.state().eq_ignore_ascii_case(v),
            k => match run.setting(k) {
                Some(s) => {
                    s.eq_ignore_ascii_case(v)
                        || matches!((s.parse::<f64>(), v.parse::<f64>()), (Ok(a), Ok(b)) if a == b)
                }
                None => match (run.figure(k), v.parse::<f64>()) {
                    (Some(a), Ok(b)) => a == b,
                    _ => return op == Op::Ne,
                },
            },
        };
        return eq == (op == Op::Eq);
    }
    let Ok(x) = v.parse::<f64>() else {
        return false;
    };
    let val = run
        .figure(key)
        .or_else(|| run.setting(key).and_then(|s| s.parse().ok()));
    match val {
        None => false,
        Some(a) => match op {
            Op::Gt => a > x,
            Op::Ge => a >= x,
            Op::Lt => a < x,
            Op::Le => a <= x,
            Op::Eq | Op::Ne => unreachable!("handled above"),
        },
    }
}

impl Filterable for Run {
    fn haystack(&self) -> String {
        let mut s = format!(
            "{} {} {}",
            self.name(),
            self.id(),
            self.entry.state().as_str()
        );
        if let Some(c) = &self.entry.config {
            s.push_str(&format!(" {} {}", c.model, c.workspace.display()));
        }
        for t in &self.meta.tags {
            s.push(' ');
            s.push_str(t);
        }
        s.push(' ');
        s.push_str(&self.meta.note);
        s
    }
    fn setting(&self, key: &str) -> Option<String> {
        let c = self.entry.config.as_ref()?;
        setting(c, key).or_else(|| {
            c.params
                .iter()
                .chain(&c.given)
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.clone())
        })
    }
    fn tags(&self) -> Vec<String> {
        self.meta.tags.clone()
    }
    fn state(&self) -> String {
        self.entry.state().as_str().to_string()
    }
    fn figure(&self, name: &str) -> Option<f64> {
        self.best
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.0)
            .or_else(|| {
                (name.eq_ignore_ascii_case("mrr"))
                    .then(|| self.entry.status.as_ref()?.best_mrr)
                    .flatten()
            })
    }
}

/// A checkpoint file of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointFile {
    /// File name (`best.safetensors`).
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Last modification, UTC.
    pub modified: String,
}

/// Everything the detail pane shows about one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunDetail {
    /// Folder name.
    pub id: String,
    /// The session folder.
    pub dir: PathBuf,
    /// Its meta.
    pub meta: RunMeta,
    /// `config.toml` as written (or why it cannot be read).
    pub config: String,
    /// The last lines of `log.txt` (empty when there is none).
    pub log_tail: Vec<String>,
    /// Checkpoints present.
    pub checkpoints: Vec<CheckpointFile>,
    /// Best figures per figure name: (value, epoch; for the loss, step),
    /// from the validation records of `metrics.jsonl`.
    pub best: BTreeMap<String, (f64, f64)>,
    /// State and, for a failed job, its error.
    pub state: String,
    /// Malformed lines of `metrics.jsonl` (path:line: message).
    pub problems: Vec<String>,
}

/// The details of session folder `dir`: config, the last `log_lines` lines
/// of its log, checkpoints, best figures and state.
pub fn detail(dir: &Path, log_lines: usize) -> Result<RunDetail> {
    check_session_dir(dir)?;
    let config = match crate::util::read_regular_text(
        &dir.join(CONFIG_FILE),
        crate::util::Links::Refuse,
        crate::util::SMALL_FILE_LIMIT,
    ) {
        Ok(t) => t,
        Err(e) => format!("(cannot read {CONFIG_FILE}: {e})"),
    };
    let log_tail = log_tail(dir, log_lines)?;
    let mut checkpoints = Vec::new();
    let ck_dir = dir.join(CHECKPOINT_DIR);
    let ck_link = std::fs::symlink_metadata(&ck_dir).is_ok_and(|m| m.file_type().is_symlink());
    let rd = if ck_link {
        None // never listed through a link (`check_no_links` names it)
    } else {
        std::fs::read_dir(&ck_dir).ok()
    };
    if let Some(rd) = rd {
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if !md.is_file() || name.starts_with('.') {
                continue;
            }
            let modified = md
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| super::fmt_utc(d.as_secs_f64()))
                .unwrap_or_default();
            checkpoints.push(CheckpointFile {
                name,
                bytes: md.len(),
                modified,
            });
        }
    }
    checkpoints.sort_by(|a, b| a.name.cmp(&b.name));
    let mut tail = MetricsTail::new(dir.join(METRICS_FILE));
    let mut batch = tail.poll()?;
    let rest = tail.finish();
    batch.records.extend(rest.records);
    batch.errors.extend(rest.errors);
    let curves = Curves::from_records(&batch.records);
    let state = match read_status(dir) {
        Ok(st) => {
            let mut s = st.effective_state().as_str().to_string();
            if st.is_stale() {
                s.push_str(" (stale: its process is gone)");
            }
            if let (State::Failed | State::Cancelled, Some(e)) = (st.effective_state(), &st.error) {
                s.push_str(&format!(": {e}"));
            }
            s
        }
        Err(e) => format!("unknown ({e})"),
    };
    Ok(RunDetail {
        id: folder_name(dir),
        dir: dir.to_path_buf(),
        meta: RunMeta::read(dir)?,
        config,
        log_tail,
        checkpoints,
        best: best_figures(&curves),
        state,
        problems: super::check_no_links(dir)
            .err()
            .into_iter()
            .chain(batch.errors)
            .map(|e| e.to_string())
            .collect(),
    })
}

/// The last `n` lines of session `dir`'s `log.txt` (none before the job
/// writes one); progress-bar frames are reduced to their last.
pub fn log_tail(dir: &Path, n: usize) -> Result<Vec<String>> {
    check_session_dir(dir)?;
    tail_lines(&dir.join(LOG_FILE), n)
}

/// The complete lines session `dir`'s `log.txt` holds from byte `offset`
/// on (invalid UTF-8 replaced, each progress-bar line reduced to its last
/// frame), and the offset after the last of them: a line still being
/// written is left for the next call, unless `to_end` (the job is over:
/// its unterminated last line is all there will be). A log shorter than
/// `offset` (started anew) is read from its start; a missing log has no
/// lines.
pub fn log_since(dir: &Path, offset: u64, to_end: bool) -> Result<(Vec<String>, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    check_session_dir(dir)?;
    let path = dir.join(LOG_FILE);
    let Some(mut f) = crate::util::open_regular_if_exists(&path, crate::util::Links::Refuse)?
    else {
        return Ok((Vec::new(), 0));
    };
    let len = f.metadata().map_err(|e| Error::io(&path, e))?.len();
    let from = if len < offset { 0 } else { offset };
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io(&path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| Error::io(&path, e))?;
    let end = match buf.iter().rposition(|&b| b == b'\n') {
        Some(nl) if !to_end || nl + 1 == buf.len() => nl,
        _ if to_end && !buf.is_empty() => buf.len(),
        _ => return Ok((Vec::new(), from)),
    };
    let text = String::from_utf8_lossy(&buf[..end]);
    let lines = text
        .split('\n')
        .map(|l| last_frame(l).to_string())
        .collect();
    Ok((lines, from + (end as u64 + 1).min(buf.len() as u64)))
}

/// A line as a terminal shows it: progress bars redraw with carriage
/// returns, the last frame stays.
fn last_frame(l: &str) -> &str {
    let l = l.strip_suffix('\r').unwrap_or(l);
    l.rsplit('\r').next().unwrap_or(l)
}

/// The last `n` lines of a text file (invalid UTF-8 replaced); a missing
/// file has none; a symbolic link or anything but a regular file is an
/// error.
pub fn tail_lines(path: &Path, n: usize) -> Result<Vec<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(mut f) = crate::util::open_regular_if_exists(path, crate::util::Links::Refuse)? else {
        return Ok(Vec::new());
    };
    let len = f.metadata().map_err(|e| Error::io(path, e))?.len();
    // enough bytes for n lines of a log, without reading a huge file whole
    let want = (n as u64 * 400).max(4096).min(len);
    f.seek(SeekFrom::Start(len - want))
        .map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8_lossy(&buf);
    let mut lines: Vec<&str> = text.lines().collect();
    if want < len && !lines.is_empty() {
        lines.remove(0); // cut in the middle
    }
    let start = lines.len().saturating_sub(n);
    Ok(lines[start..]
        .iter()
        .map(|l| last_frame(l).to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{MetricRecord, Session};

    fn cfg(params: &[(&str, &str)], seed: u64) -> SessionConfig {
        SessionConfig {
            rosetta_version: "0".into(),
            model: "test".into(),
            workspace: PathBuf::from("/w/tiny/workspace.toml"),
            workspace_hash: "h".into(),
            seed,
            device_request: crate::models::DeviceSpec::Cpu,
            device: String::new(),
            given: BTreeMap::new(),
            params: params
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            created: "2026-01-01T00:00:00Z".into(),
            text: None,
        }
    }

    #[test]
    fn only_differing_settings_are_columns() {
        let a = cfg(&[("dim", "128"), ("lr", "0.01"), ("epochs", "5")], 1);
        let b = cfg(&[("dim", "128"), ("lr", "0.02"), ("epochs", "5")], 1);
        let c = cfg(
            &[
                ("dim", "128"),
                ("lr", "0.01"),
                ("epochs", "5"),
                ("tau", "1"),
            ],
            2,
        );
        assert_eq!(differing_settings(&[&a, &b]), vec!["lr"]);
        assert_eq!(differing_settings(&[&a, &b, &c]), vec!["seed", "lr", "tau"]);
        assert!(differing_settings(&[&a, &a.clone()]).is_empty());
        assert!(differing_settings(&[&a]).is_empty());
        // two models: a setting only one model has is no difference; one
        // varied within a model is, and so is the model
        let mut s1 = cfg(&[("dim", "128"), ("gamma", "10")], 1);
        s1.model = "s2net".into();
        let mut s2 = s1.clone();
        s2.params.insert("gamma".into(), "20".into());
        let mut c1 = cfg(&[("dim", "64"), ("reg", "0.1")], 1);
        c1.model = "cca".into();
        let c2 = c1.clone();
        assert_eq!(
            differing_settings(&[&s1, &s2, &c1, &c2]),
            vec!["model", "gamma"]
        );
        assert_eq!(differing_settings(&[&s1, &c1]), vec!["model"]);
        assert_eq!(setting(&c, "tau").as_deref(), Some("1"));
        // typed JSON values
        use serde_json::json;
        assert_eq!(typed_value("128"), json!(128));
        assert_eq!(typed_value("0.001"), json!(0.001));
        assert_eq!(typed_value("1e-3"), json!(0.001));
        assert_eq!(typed_value("-2"), json!(-2));
        assert_eq!(typed_value("001"), json!("001"));
        assert_eq!(typed_value("true"), json!(true));
        assert_eq!(typed_value("adam"), json!("adam"));
        assert_eq!(typed_value("nan"), json!("nan"));
        assert_eq!(typed_value("inf"), json!("inf"));
        assert_eq!(typed_value("cuda:0"), json!("cuda:0"));
        assert_eq!(setting(&a, "tau"), None);
        assert_eq!(setting(&a, "workspace").as_deref(), Some("tiny"));
    }

    #[test]
    fn common_prefix_is_elided_not_the_end() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            distinct_labels(&n(&["s2net-20261122-190301", "s2net-20261122-190455"])),
            n(&["…190301", "…190455"])
        );
        assert_eq!(
            distinct_labels(&n(&["s2net-20261122-190301", "s2net-20261122-190301-2"])),
            n(&["…190301", "…190301-2"]),
            "a suffix run stays distinct"
        );
        // a prefix shared by chance (no word boundary) is not cut mid-word
        assert_eq!(
            distinct_labels(&n(&["alpha", "alpine"])),
            n(&["alpha", "alpine"])
        );
        assert_eq!(
            distinct_labels(&n(&["s2net-a", "cl-lsi-a"])),
            n(&["s2net-a", "cl-lsi-a"])
        );
        assert_eq!(distinct_labels(&n(&["only"])), n(&["only"]));
        let labels = distinct_labels(&n(&["run-x", "run-x"]));
        assert_eq!(labels, n(&["run-x", "run-x"]), "no empty label");
        assert_eq!(elide_middle("s2net-20261122-190301", 11), "s2net…90301");
        assert_eq!(elide_middle("short", 11), "short");
    }

    #[test]
    fn meta_round_trips_and_names_fall_back_to_the_folder() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s2net-1");
        Session::create(&dir, cfg(&[], 1)).unwrap();
        assert_eq!(RunMeta::read(&dir).unwrap(), RunMeta::default());
        assert_eq!(RunMeta::read(&dir).unwrap().display_name(&dir), "s2net-1");
        rename(&dir, "  baseline lr 0.01 ").unwrap();
        edit_tags(&dir, &["good".into(), "lr".into(), "good".into()], &[]).unwrap();
        set_note(&dir, "first try\nsecond line").unwrap();
        let m = RunMeta::read(&dir).unwrap();
        assert_eq!(m.name, "baseline lr 0.01");
        assert_eq!(m.tags, vec!["good", "lr"]);
        assert_eq!(m.note, "first try\nsecond line");
        assert_eq!(m.display_name(&dir), "baseline lr 0.01");
        let m = edit_tags(&dir, &[], &["lr".into()]).unwrap();
        assert_eq!(m.tags, vec!["good"]);
        let m = set_tags(&dir, "a, b c").unwrap();
        assert_eq!(m.tags, vec!["a", "b", "c"]);
        assert!(rename(&dir, "two\nlines").is_err());
        assert!(edit_tags(&dir, &["has space".into()], &[]).is_err());
        rename(&dir, "").unwrap();
        assert_eq!(RunMeta::read(&dir).unwrap().display_name(&dir), "s2net-1");
        // no stray temporary files
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp.")), "{names:?}");
        std::fs::write(dir.join(META_FILE), "{\"name\": 3}").unwrap();
        let e = RunMeta::read(&dir).unwrap_err().to_string();
        assert!(e.contains("meta.json:1"), "{e}");
        assert!(rename(&root.path().join("nope"), "x").is_err());
    }

    #[test]
    fn delete_refuses_a_running_job_and_removes_a_finished_one() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        let mut s = Session::create(&dir, cfg(&[], 1)).unwrap();
        // this test process plays the job
        let running = |l: &mut crate::session::JobLife| l.running("cpu", &Default::default());
        s.transition(running).unwrap();
        let e = delete(&dir).unwrap_err().to_string();
        assert!(e.contains("cancel it"), "{e}");
        assert!(dir.exists());
        s.transition(|l| l.done(&Default::default())).unwrap();
        delete(&dir).unwrap();
        assert!(!dir.exists());
        // not a session: refused, nothing removed
        let other = root.path().join("data");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("x.txt"), "keep").unwrap();
        assert!(delete(&other).is_err());
        assert!(other.join("x.txt").exists());
    }

    struct Row(BTreeMap<String, String>, f64, Vec<String>);
    impl Filterable for Row {
        fn haystack(&self) -> String {
            "s2net-1 done".into()
        }
        fn setting(&self, k: &str) -> Option<String> {
            self.0.get(k).cloned()
        }
        fn tags(&self) -> Vec<String> {
            self.2.clone()
        }
        fn state(&self) -> String {
            "done".into()
        }
        fn figure(&self, n: &str) -> Option<f64> {
            n.eq_ignore_ascii_case("mrr").then_some(self.1)
        }
    }

    #[test]
    fn filters_by_setting_figure_tag_and_text() {
        let r = Row(
            [
                ("lr".to_string(), "0.01".to_string()),
                ("dim".into(), "256".into()),
            ]
            .into(),
            0.62,
            vec!["good".into()],
        );
        let f = |s: &str| s.parse::<RunFilter>().unwrap().matches(&r);
        assert!(f("lr=0.01") && f("lr=1e-2") && f("mrr>0.5") && f("MRR>=0.62"));
        assert!(!f("lr=0.02") && !f("mrr>0.7") && !f("mrr<0.5"));
        assert!(f("dim>=256") && !f("dim>256") && f("lr!=0.1"));
        assert!(f("tag=good") && !f("tag=bad") && f("state=done") && f("s2net"));
        assert!(f("s2net lr=0.01 mrr>0.5") && !f("s2net lr=0.02"));
        assert!(!f("tau=1") && f("tau!=1") && !f("p@1>0"));
        assert!(f(""));
        assert!("mrr>abc".parse::<RunFilter>().is_err());
        assert!("=3".parse::<RunFilter>().is_err());
    }

    #[test]
    fn best_figures_and_detail_of_a_session() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("r");
        Session::create(&dir, cfg(&[("lr", "0.1")], 1)).unwrap();
        let mut lines = String::new();
        for (e, mrr) in [(1, 0.5), (2, 0.7), (3, 0.6)] {
            let r = MetricRecord::Valid {
                phase: "train".into(),
                epoch: e,
                step: e * 10,
                scores: [("MRR".to_string(), mrr), ("queries".to_string(), 9.0)].into(),
            };
            lines.push_str(&serde_json::to_string(&r).unwrap());
            lines.push('\n');
        }
        std::fs::write(dir.join(METRICS_FILE), lines).unwrap();
        let log: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.join(LOG_FILE), log).unwrap();
        std::fs::write(dir.join("checkpoints/best.safetensors"), b"1234").unwrap();
        let d = detail(&dir, 5).unwrap();
        assert_eq!(d.best["MRR"], (0.7, 2.0));
        assert!(!d.best.contains_key("queries"));
        assert_eq!(
            d.log_tail,
            vec!["line 46", "line 47", "line 48", "line 49", "line 50"]
        );
        assert_eq!(d.checkpoints.len(), 1);
        assert_eq!(d.checkpoints[0].bytes, 4);
        assert!(d.config.contains("lr = \"0.1\""), "{}", d.config);
        assert_eq!(d.state, "queued");
        let mut idx = RunIndex::default();
        let runs = idx.scan(root.path()).unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].figure("mrr"), Some(0.7));
        assert!("mrr>0.65".parse::<RunFilter>().unwrap().matches(&runs[0]));
        assert!("lr=0.1".parse::<RunFilter>().unwrap().matches(&runs[0]));
    }

    #[test]
    fn log_since_reads_complete_lines_and_follows_appends() {
        use std::io::Write;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("r");
        Session::create(&dir, cfg(&[], 1)).unwrap();
        assert_eq!(log_since(&dir, 0, false).unwrap(), (vec![], 0));
        std::fs::write(dir.join(LOG_FILE), "one\nbar 10%\rbar 100%\r\nhalf").unwrap();
        let (lines, off) = log_since(&dir, 0, false).unwrap();
        assert_eq!(lines, vec!["one", "bar 100%"]);
        // a job that is over: its unterminated last line too
        let all = "one\nbar 10%\rbar 100%\r\nhalf".len() as u64;
        assert_eq!(
            log_since(&dir, off, true).unwrap(),
            (vec!["half".to_string()], all)
        );
        assert_eq!(off, "one\nbar 10%\rbar 100%\r\n".len() as u64);
        // the unfinished line comes once it ends
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(LOG_FILE))
            .unwrap();
        f.write_all(b" done\nnext\n").unwrap();
        let (lines, off2) = log_since(&dir, off, false).unwrap();
        assert_eq!(lines, vec!["half done", "next"]);
        assert_eq!(log_since(&dir, off2, false).unwrap(), (vec![], off2));
        assert_eq!(log_since(&dir, off2, true).unwrap(), (vec![], off2));
        // a log started anew is read from its start
        std::fs::write(dir.join(LOG_FILE), "fresh\n").unwrap();
        assert_eq!(
            log_since(&dir, off2, false).unwrap(),
            (vec!["fresh".into()], 6)
        );
        assert_eq!(log_tail(&dir, 5).unwrap(), vec!["fresh"]);
        // not a session folder: an error naming it
        let e = log_since(root.path(), 0, false).unwrap_err().to_string();
        assert!(e.contains("not a session folder"), "{e}");
    }
}
