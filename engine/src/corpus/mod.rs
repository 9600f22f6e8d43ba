//! Corpora: parallel text, ad-hoc collections (documents, queries, qrels),
//! dictionaries and workspaces that name them, and their prepared (analysed,
//! counted, cached) form.

pub mod bible;
pub mod collection;
pub mod dictionary;
pub mod inspect;
pub mod parallel;
pub mod prepare;
pub mod workspace;

pub use collection::{AdhocTask, Collection};
pub use dictionary::{BliSplit, Dictionary, WrittenWords};
pub use parallel::{ParallelText, Splits};
pub use prepare::{workspace_analyzers, AdhocData, Prepared, SideStats, SplitData, UnitModels};
pub use workspace::{AdhocSpec, PairSource, ParallelSpec, Workspace};
