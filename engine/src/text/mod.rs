//! The text pipeline: one code path from raw text to term vectors, shared by
//! every model, index and query.
//!
//! Raw text → [`Analyzer`] (NFKC, lower case, BOM and zero-width characters
//! stripped, UAX #29 words, stop words, Snowball stems) → token lists →
//! [`units`] (the word itself, or subword units: BPE/Unigram pieces learnt on
//! the training text, character n-grams) →
//! [`Vocabulary`] (top-k terms by document frequency) → [`CsrMatrix`] of raw
//! counts → [`weight`] (log-tf·idf, BM25-saturated) for the models.

mod analyzer;
pub mod io;
mod lang;
pub mod query;
mod sequence;
pub mod sparse;
pub mod units;
pub mod vectors;
mod vocab;
pub mod weight;

pub use analyzer::{Analyzer, TextConfig, TextSettings};
pub use lang::{check_lang, Side, MAX_LANG_LEN};
pub use query::{Dropped, QueryWord, QueryWords};
pub use sequence::Sequences;
pub use sparse::CsrMatrix;
pub use units::{UnitModel, Units};
pub use vectors::{read_vec, VecTable};
pub use vocab::{Encoded, Fallback, LeftOut, Unknown, Vocabs, Vocabulary};
