//! Corpora: parallel text, ad-hoc collections (documents, queries, qrels),
//! dictionaries and workspaces that name them.

pub mod io;
