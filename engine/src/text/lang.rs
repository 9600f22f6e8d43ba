//! The two languages of a workspace: which side a text is in, and the
//! language codes they are named by.

use serde::{Deserialize, Serialize};

/// Which language of a workspace a text is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The query language (`[source]`).
    Source,
    /// The document language (`[target]`).
    Target,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::Source => Side::Target,
            Side::Target => Side::Source,
        }
    }
}

/// Longest language code accepted ([`check_lang`]).
pub const MAX_LANG_LEN: usize = 32;

/// Error unless `lang` is a language code: 1 to [`MAX_LANG_LEN`] ASCII
/// letters, digits, `-` or `_` (`en`, `es`, `zh-Hans`, `x_custom`). A
/// language names files (`terms.en.vec`, `test.en.npy`), so nothing else,
/// no `/` or `..` above all, is ever accepted; the message says what is
/// wrong with the code.
pub fn check_lang(lang: &str) -> std::result::Result<(), String> {
    if lang.is_empty() {
        return Err("a language code is empty".into());
    }
    if lang.chars().count() > MAX_LANG_LEN {
        return Err(format!(
            "language code {lang:?} is longer than {MAX_LANG_LEN} characters"
        ));
    }
    if let Some(c) = lang
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "language code {lang:?} holds {c:?}: a code is ASCII letters, digits, `-` and `_` (en, es, zh-Hans)"
        ));
    }
    Ok(())
}
