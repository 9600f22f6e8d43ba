//! What the workbench remembers between launches: the marked sessions and
//! the chosen Compare baseline, per sessions root, in
//! `$XDG_STATE_HOME/rosetta/workbench.json` (or
//! `~/.local/state/rosetta/workbench.json`, next to the log; the config
//! file is for settings the user writes, this one is written by the
//! workbench).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use rosetta::{Error, Result};

/// The remembered state of one sessions root.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UiState {
    /// Sessions marked for overlaid charts (folder names).
    pub marked: Vec<String>,
    /// The Compare screen's baseline (folder name).
    pub baseline: Option<String>,
}

/// The state file: one [`UiState`] per sessions root (its absolute path).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StateFile {
    /// By sessions root.
    pub roots: BTreeMap<String, UiState>,
}

/// The default state file path.
pub fn default_path() -> PathBuf {
    super::log::default_path().with_file_name("workbench.json")
}

/// The key of a sessions root: its absolute path when it exists.
pub fn root_key(root: &Path) -> String {
    std::fs::canonicalize(root)
        .unwrap_or_else(|_| root.to_path_buf())
        .display()
        .to_string()
}

/// Reads the state file; a missing one is empty, a malformed one an error
/// with its path and line.
pub fn load(path: &Path) -> Result<StateFile> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            Error::parse(
                path,
                e.line().max(1),
                format!("{e} (delete the file to start afresh)"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile::default()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Stores `state` for `root` in the file at `path` (read again first, so
/// workbenches on other roots keep theirs), written atomically.
pub fn save(path: &Path, root: &str, state: &UiState) -> Result<()> {
    let mut f = load(path).unwrap_or_default();
    f.roots.insert(root.to_string(), state.clone());
    let mut bytes = serde_json::to_vec_pretty(&f)
        .map_err(|e| Error::file(path, format!("cannot serialise: {e}")))?;
    bytes.push(b'\n');
    rosetta::util::write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_per_root() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rosetta/workbench.json");
        assert_eq!(load(&p).unwrap(), StateFile::default());
        let a = UiState {
            marked: vec!["s2net-1".into()],
            baseline: Some("bm25-1".into()),
        };
        save(&p, "/a", &a).unwrap();
        save(&p, "/b", &UiState::default()).unwrap();
        let f = load(&p).unwrap();
        assert_eq!(f.roots["/a"], a);
        assert_eq!(f.roots.len(), 2);
        std::fs::write(&p, "{\n  \"roots\": 3\n}").unwrap();
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("workbench.json:2"), "{e}");
    }
}
