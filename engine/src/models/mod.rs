//! The models: every way of putting two languages' texts into one space,
//! behind one [`Model`] trait. One file per model, in its family's folder.
//!
//! - the contract, here: [`Model`], [`Trainer`] and what they exchange
//!   ([`trainer`]), the settings ([`Params`]) and the [`registry`];
//! - [`kit`]: what several families share (layers, optimisers, row kernels,
//!   linear algebra, pretrained starts); it imports no model;
//! - the families, each importing only the contract and the kit:
//!   [`linear`] (linear and closed-form: CL-LSI, OPCA, CCA, S2Net, HDLR,
//!   Procrustes), [`neural`] (XCNN, BAE, DBN-CCA, the adversarial BiLSTM),
//!   [`topic`] (JPLSA, CPLSA), [`lexical`] (BM25), [`encoder`] (pretrained
//!   transformer encoders). `tests/suite/layers.rs` checks the rule.
//!
//! A model sees texts as raw term counts over its side's [`Vocabulary`](crate::text::Vocabulary) (a
//! [`CsrMatrix`] row per text) and applies its own weighting; it returns
//! rows its [`Similarity`] compares: unit-length rows (a dot product is the
//! cosine) for almost every model, topic distributions for the topic models.

pub mod encoder;
pub mod kit;
pub mod lexical;
pub mod linear;
pub mod neural;
pub mod topic;
pub mod trainer;

// every model and kit module at its old path (`models::s2net`,
// `models::nn`, ...), for the front-ends, tests and examples
pub use kit::{implicit, lstm, nn, optim, precision, pretrained, rbm, rows};
pub use lexical::bm25;
pub use linear::{cca, cl_lsi, hdlr, opca, procrustes, s2net};
pub use neural::{adv_bilstm, bae, dbn_cca, xcnn};
pub use topic::plsa;

pub use trainer::{
    check_memory, DataSizes, Flow, Hooks, InitWeights, LogOnly, MemoryEstimate, Phase,
    PretrainedVectors, Resume, StepReport, TrainData, TrainDictionary, TrainSequences, TrainTexts,
    Trainer, ZERO_SHOT_PHASE,
};

use ndarray::Array2;

use crate::space::Similarity;
use crate::text::{CsrMatrix, Sequences, Side};
use crate::{Error, Result};

mod device;
pub use device::{select_device, DeviceSpec};

/// `ids` as row indices of a term table of `rows` rows; an id past it is an
/// error naming it.
pub fn term_rows(ids: &[u32], rows: usize) -> Result<Vec<usize>> {
    ids.iter()
        .map(|&i| {
            if (i as usize) < rows {
                Ok(i as usize)
            } else {
                Err(Error::invalid(format!(
                    "term id {i} is past the vocabulary ({rows} terms)"
                )))
            }
        })
        .collect()
}

/// A trained model that maps texts of either language into one space.
pub trait Model: Send + Sync {
    /// The model's registry name (`cl-lsi`, `s2net`, `xcnn`, ...).
    fn kind(&self) -> &'static str;
    /// Dimension of the shared space.
    fn dim(&self) -> usize;
    /// Embeddings (one row per text, as [`Model::similarity`] compares them)
    /// of texts given as raw term counts over `side`'s vocabulary. A text
    /// with no known term gets a zero row.
    fn encode(&self, side: Side, counts: &CsrMatrix) -> Result<Array2<f32>>;
    /// Vectors of every single term of `side`'s vocabulary, in id order, in
    /// the same form as [`Model::encode`]'s rows.
    fn term_vectors(&self, side: Side) -> Result<Array2<f32>>;
    /// The rows `ids` of [`Model::term_vectors`], in the order of `ids` (an
    /// id past the vocabulary is an error). Default: the whole table, then
    /// those rows. A model whose whole table is costly (an encoder runs its
    /// network once per word) computes only these.
    fn term_vectors_of(&self, side: Side, ids: &[u32]) -> Result<Array2<f32>> {
        let all = self.term_vectors(side)?;
        let rows = term_rows(ids, all.nrows())?;
        Ok(all.select(ndarray::Axis(0), &rows))
    }
    /// How rows of this model's space are compared. Default: the cosine of
    /// unit-length rows.
    fn similarity(&self) -> Similarity {
        Similarity::Cosine
    }
    /// The model's parameters as named tensors, for a safetensors checkpoint.
    fn tensors(&self) -> Result<Vec<(String, candle_core::Tensor)>>;
    /// Whether the model maps texts into its shared space yet: false for a
    /// model still in pre-training (layers with no cross-language map), whose
    /// `encode` errors and whose epochs the runner does not validate.
    fn has_space(&self) -> bool {
        true
    }
    /// Whether the model reads word order (a sequence encoder): its texts
    /// must come as [`Sequences`] through [`Model::encode_sequences`], and
    /// [`Model::encode`] on counts alone is an error.
    fn reads_order(&self) -> bool {
        false
    }
    /// Embeddings of texts given as term ids in reading order.
    /// Default: the texts' counts through [`Model::encode`].
    fn encode_sequences(&self, side: Side, seqs: &Sequences) -> Result<Array2<f32>> {
        self.encode(side, &seqs.counts())
    }
    /// Whether the model reads raw text with its own tokenizer (a
    /// pretrained encoder): its texts must come through
    /// [`Model::encode_raw`], and [`Model::encode`] on counts is an error.
    fn reads_text(&self) -> bool {
        false
    }
    /// Embeddings of raw texts of `side` read as `role` (an encoder's query
    /// or passage prefix). Default: an error (the model reads terms).
    fn encode_raw(&self, side: Side, role: TextRole, texts: &[String]) -> Result<Array2<f32>> {
        let _ = (side, role, texts);
        Err(Error::invalid(format!(
            "{} reads analysed terms, not raw text",
            self.kind()
        )))
    }
    /// The token states of raw texts of `side` read as `role`, for late
    /// interaction (MaxSim reranking, token alignments): `None` for a model
    /// that has no per-token states (every model but an encoder).
    fn token_states(
        &self,
        side: Side,
        role: TextRole,
        texts: &[String],
    ) -> Option<Result<Vec<kit::late::TokenStates>>> {
        let _ = (side, role, texts);
        None
    }
}

/// What a text is to the task, for models that treat queries and documents
/// differently (an e5 encoder's `query: ` and `passage: ` prefixes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextRole {
    /// A query, or either side of a parallel sentence pair (a symmetric task).
    Query,
    /// A document of an ad-hoc collection.
    Document,
}

impl TextRole {
    /// The role of `side`'s texts in an ad-hoc task: source queries,
    /// target documents.
    pub fn adhoc(side: Side) -> TextRole {
        match side {
            Side::Source => TextRole::Query,
            Side::Target => TextRole::Document,
        }
    }
}

/// Texts as every kind of model reads them, row for row: counts over the
/// side's vocabulary, term ids in reading order (for sequence models), and
/// the raw texts (for models with their own tokenizer).
#[derive(Debug, Clone, Copy)]
pub struct TextRows<'a> {
    /// Raw term counts.
    pub counts: &'a CsrMatrix,
    /// Term ids in reading order, where known.
    pub seqs: Option<&'a Sequences>,
    /// The raw texts, where known.
    pub raw: Option<&'a [String]>,
}

/// Embeddings of texts known both as counts and (where `seqs` is given) as
/// sequences, row for row: a model that reads word order gets the
/// sequences, an encoder the raw texts, any other the counts. A sequence
/// model with no sequences (an encoder with no raw texts) is an error, never
/// a silent bag-of-words reading.
pub fn encode_texts(
    model: &dyn Model,
    side: Side,
    role: TextRole,
    rows: TextRows<'_>,
) -> Result<Array2<f32>> {
    let TextRows { counts, seqs, raw } = rows;
    if model.reads_text() {
        return match raw {
            Some(r) if r.len() == counts.n_rows() => model.encode_raw(side, role, r),
            Some(r) => Err(Error::invalid(format!(
                "{} texts as counts but {} as raw text",
                counts.n_rows(),
                r.len()
            ))),
            None => Err(Error::invalid(format!(
                "{} reads raw text, and these texts were given as terms only",
                model.kind()
            ))),
        };
    }
    if !model.reads_order() {
        return model.encode(side, counts);
    }
    match seqs {
        Some(s) if s.n_rows() == counts.n_rows() => model.encode_sequences(side, s),
        Some(s) => Err(Error::invalid(format!(
            "{} texts as counts but {} as sequences",
            counts.n_rows(),
            s.n_rows()
        ))),
        None => Err(Error::invalid(format!(
            "{} reads word order, and these texts were given as counts only",
            model.kind()
        ))),
    }
}

pub mod params;
pub mod registry;
pub mod settings;
#[cfg(test)]
mod toy;

pub use params::{ModelParams, Params, Setting};
pub use registry::{is_lexical, takes_setting, ModelDef, ModelSpec, MODELS};
