//! The query history of the Search screen and `rosetta search --history`.

use std::path::{Path, PathBuf};

use crate::Result;

/// Queries asked before, oldest first, kept in a small text file, one query
/// a line (`$XDG_STATE_HOME/rosetta/search-history.txt`, else
/// `~/.local/state/rosetta/search-history.txt`, beside the workbench's log):
/// the workbench's Search screen recalls them with ↑/↓ while editing, and
/// `rosetta search --history` lists them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryHistory {
    /// The queries, oldest first, each once.
    pub queries: Vec<String>,
}

/// Most queries a [`QueryHistory`] keeps (the oldest go first).
pub const HISTORY_LEN: usize = 200;

impl QueryHistory {
    /// The default history file.
    pub fn default_path() -> PathBuf {
        std::env::var_os("XDG_STATE_HOME")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .unwrap_or_else(std::env::temp_dir)
            .join("rosetta")
            .join("search-history.txt")
    }

    /// Reads the history at `path`; a missing file is an empty history.
    /// Blank lines are skipped; only the newest [`HISTORY_LEN`] are kept.
    pub fn load(path: &Path) -> Result<QueryHistory> {
        if !path.exists() {
            return Ok(QueryHistory::default());
        }
        let mut h = QueryHistory::default();
        for l in crate::text::io::read_lines(path)? {
            h.push(&l);
        }
        Ok(h)
    }

    /// Adds `query` (white space collapsed) as the newest, moving an equal
    /// earlier entry; `false` when nothing changed (blank, or already the
    /// newest).
    pub fn push(&mut self, query: &str) -> bool {
        let q = query.split_whitespace().collect::<Vec<_>>().join(" ");
        if q.is_empty() || self.queries.last() == Some(&q) {
            return false;
        }
        self.queries.retain(|x| *x != q);
        self.queries.push(q);
        if self.queries.len() > HISTORY_LEN {
            let extra = self.queries.len() - HISTORY_LEN;
            self.queries.drain(..extra);
        }
        true
    }

    /// Writes the history to `path` (atomically; its folder is created).
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut text = self.queries.join("\n");
        text.push('\n');
        crate::util::write_atomic(path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_history_keeps_each_query_once_newest_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/rosetta/search-history.txt");
        let mut h = QueryHistory::load(&path).unwrap();
        assert!(h.queries.is_empty(), "a missing file is an empty history");
        assert!(h.push("light of  men"));
        assert!(h.push("the word"));
        assert!(!h.push("the word"), "already the newest");
        assert!(!h.push("   "));
        assert!(h.push("light of men"));
        assert_eq!(h.queries, vec!["the word", "light of men"]);
        h.save(&path).unwrap();
        assert_eq!(QueryHistory::load(&path).unwrap(), h);
        for i in 0..HISTORY_LEN + 5 {
            h.push(&format!("q{i}"));
        }
        assert_eq!(h.queries.len(), HISTORY_LEN);
        assert_eq!(h.queries.last().unwrap(), &format!("q{}", HISTORY_LEN + 4));
        assert_eq!(h.queries[0], "q5");
    }
}
