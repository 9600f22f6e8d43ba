//! A session's own name, tags and note (`meta.json`), and the checks that
//! a folder is a session's.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::session::{json_error, CONFIG_FILE, STATUS_FILE};
use crate::util::write_atomic;
use crate::{Error, Result};

pub use crate::session::files::META_FILE;

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

pub(super) fn check_session_dir(dir: &Path) -> Result<()> {
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
