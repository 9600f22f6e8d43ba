//! The lexical baselines: BM25 over the target language's terms, with
//! queries translated through a dictionary. No trainer and no space.

pub mod bm25;
