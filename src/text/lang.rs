//! The two languages of a workspace and their vocabularies.

use serde::{Deserialize, Serialize};

use super::Vocabulary;

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

/// Vocabularies of both sides, as a model was trained with them.
#[derive(Debug, Clone)]
pub struct Vocabs {
    /// Query-language vocabulary.
    pub source: Vocabulary,
    /// Document-language vocabulary.
    pub target: Vocabulary,
}

impl Vocabs {
    /// The vocabulary of `side`.
    pub fn side(&self, side: Side) -> &Vocabulary {
        match side {
            Side::Source => &self.source,
            Side::Target => &self.target,
        }
    }
}
