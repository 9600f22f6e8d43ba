//! A trained session ready to use: its model (best checkpoint), its
//! vocabularies and analysers, so that new text and single words can be put
//! into the shared space (`rosetta neighbours`, `search`, `export`, the TUI).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use candle_core::Device;
use ndarray::{Array1, Array2, ArrayView1, Axis};
use serde::Serialize;

use super::table_cache::TableCache;
use super::Session;
use crate::models::{encode_texts, Model, TextRole, TextRows};
use crate::space::Similarity;
use crate::text::{Analyzer, CsrMatrix, Sequences, TextConfig};
use crate::text::{Side, Vocabs};
use crate::{Error, Result};

/// Number of nearest neighbours CSLS averages over (Conneau et al. 2018).
pub const CSLS_K: usize = 10;

/// A session with its model loaded.
pub struct Loaded {
    /// The session.
    pub session: Session,
    /// The trained model (best checkpoint, else last).
    pub model: Box<dyn Model>,
    /// Its vocabularies.
    pub vocabs: Vocabs,
    /// Text settings used for new text.
    pub text: TextConfig,
    /// The checkpoint the model came from (when opened from a session
    /// folder), with a warning when it is not the best one.
    pub checkpoint: Option<super::ModelSource>,
    source: Analyzer,
    target: Analyzer,
    term_vectors: [OnceLock<Array2<f32>>; 2],
    /// Single terms' vectors of a model that reads raw text, computed on
    /// demand while the whole table is not at hand ([`Loaded::term_vectors_of`]).
    some_term_vectors: [Mutex<HashMap<u32, Vec<f32>>>; 2],
    csls_r: [OnceLock<Array1<f32>>; 2],
    /// BLAKE3 of the checkpoint file, read once ([`Loaded::checkpoint_hash`]).
    checkpoint_hash: OnceLock<String>,
}

/// One neighbour of a term.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Neighbour {
    /// The neighbouring term (an index term: stemmed where the language stems).
    pub term: String,
    /// The model's similarity, or the CSLS score built on it.
    pub score: f32,
    /// The plain similarity (cosine, or the Jensen–Shannon score of a topic
    /// model); equal to `score` without CSLS.
    pub plain: f32,
}

/// The answer of [`Loaded::neighbours`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Neighbours {
    /// The word as given.
    pub word: String,
    /// Its index term.
    pub term: String,
    /// Language side of the word.
    pub side: Side,
    /// Whether scores are CSLS.
    pub csls: bool,
    /// The measure the scores are built on.
    pub similarity: Similarity,
    /// Nearest terms of the other language, best first.
    pub cross: Vec<Neighbour>,
    /// Nearest terms of the same language (the word itself left out).
    pub same: Vec<Neighbour>,
}

fn idx(side: Side) -> usize {
    match side {
        Side::Source => 0,
        Side::Target => 1,
    }
}

impl Loaded {
    /// Opens the session in `dir` and loads its model on `device`.
    pub fn open(dir: &Path, device: &Device) -> Result<Loaded> {
        let session = Session::open(dir)?;
        let (model, vocabs, source) = session.load_model_from(device)?;
        let mut l = Self::from_parts(session, model, vocabs)?;
        l.checkpoint = Some(source);
        Ok(l)
    }

    /// The warning of [`Loaded::checkpoint`]: the model is not the best
    /// checkpoint the session's status names.
    pub fn checkpoint_warning(&self) -> Option<&str> {
        self.checkpoint.as_ref()?.warning.as_deref()
    }

    /// A loaded session from a model already rebuilt (by a trainer that is
    /// not in the registry, or kept in memory).
    pub fn from_parts(session: Session, model: Box<dyn Model>, vocabs: Vocabs) -> Result<Loaded> {
        // a session too old to record its settings was made with the
        // defaults of its day
        let text = session
            .config
            .text
            .clone()
            .unwrap_or_else(TextConfig::legacy);
        let models = if text.units.learnt() {
            let load = |name: &str| -> Result<std::sync::Arc<crate::text::UnitModel>> {
                Ok(std::sync::Arc::new(crate::text::UnitModel::load(
                    &session.dir.join(name),
                )?))
            };
            Some((
                load(crate::text::units::UNITS_SOURCE)?,
                load(crate::text::units::UNITS_TARGET)?,
            ))
        } else {
            None
        };
        let (source, target) = crate::corpus::prepare::analyzers_with(
            &vocabs.source.lang,
            &vocabs.target.lang,
            &text,
            models.as_ref(),
        )?;
        Ok(Loaded {
            session,
            model,
            vocabs,
            text,
            checkpoint: None,
            source,
            target,
            term_vectors: Default::default(),
            some_term_vectors: Default::default(),
            csls_r: Default::default(),
            checkpoint_hash: OnceLock::new(),
        })
    }

    /// The analyser of `side`.
    pub fn analyzer(&self, side: Side) -> &Analyzer {
        match side {
            Side::Source => &self.source,
            Side::Target => &self.target,
        }
    }

    /// What a person reads for index term `term` of `side`: a subword unit
    /// without its marks (`light…`), a word-level term as its commonest
    /// training word (a stem's surface form), else the term itself.
    pub fn show(&self, side: Side, term: &str) -> String {
        let an = self.analyzer(side);
        if an.units().subword() {
            return an.display(term);
        }
        let v = self.vocabs.side(side);
        v.id(term)
            .map(|i| v.display(i).into_owned())
            .unwrap_or_else(|| term.to_string())
    }

    /// Raw term counts of `texts` over `side`'s vocabulary.
    pub fn counts<S: AsRef<str>>(&self, side: Side, texts: &[S]) -> CsrMatrix {
        let an = self.analyzer(side);
        let tokens: Vec<Vec<String>> = texts.iter().map(|t| an.analyze(t.as_ref())).collect();
        self.vocabs.side(side).count_matrix(&tokens)
    }

    /// Unit-length embeddings of raw texts of `side` (zero rows for texts
    /// with no known term), read as the ad-hoc task reads `side` (source
    /// queries, target documents).
    pub fn encode_texts<S: AsRef<str>>(&self, side: Side, texts: &[S]) -> Result<Array2<f32>> {
        self.encode_texts_as(side, TextRole::adhoc(side), texts)
    }

    /// [`Loaded::encode_texts`] with the texts' role given (a target-language
    /// query is a query).
    pub fn encode_texts_as<S: AsRef<str>>(
        &self,
        side: Side,
        role: TextRole,
        texts: &[S],
    ) -> Result<Array2<f32>> {
        let an = self.analyzer(side);
        let tokens: Vec<Vec<String>> = texts.iter().map(|t| an.analyze(t.as_ref())).collect();
        let vocab = self.vocabs.side(side);
        let seqs = self
            .model
            .reads_order()
            .then(|| Sequences::of(vocab, &tokens));
        let raw: Option<Vec<String>> = self
            .model
            .reads_text()
            .then(|| texts.iter().map(|t| t.as_ref().to_string()).collect());
        let rows = TextRows {
            counts: &vocab.count_matrix(&tokens),
            seqs: seqs.as_ref(),
            raw: raw.as_deref(),
        };
        encode_texts(self.model.as_ref(), side, role, rows)
    }

    /// Unit term vectors of `side` (computed once).
    pub fn term_vectors(&self, side: Side) -> Result<&Array2<f32>> {
        let cell = &self.term_vectors[idx(side)];
        if let Some(v) = cell.get() {
            return Ok(v);
        }
        let v = if self.model.reads_text() {
            self.cached_term_vectors(side)?
        } else {
            self.model.term_vectors(side)?
        };
        Ok(cell.get_or_init(|| v))
    }

    /// The rows `ids` of [`Loaded::term_vectors`] of `side`, in the order of
    /// `ids` (an id past the vocabulary is an error). For a model that reads
    /// raw text (an encoder: minutes per vocabulary on a CPU) only these
    /// terms are computed, unless the whole table is already loaded or
    /// cached in the session; what is computed is kept for later calls. So
    /// a search explains its hits without encoding every word.
    pub fn term_vectors_of(&self, side: Side, ids: &[u32]) -> Result<Array2<f32>> {
        let n = self.vocabs.side(side).len();
        let rows = crate::models::term_rows(ids, n)?;
        let cell = &self.term_vectors[idx(side)];
        if !self.model.reads_text() || cell.get().is_some() {
            return Ok(self.term_vectors(side)?.select(Axis(0), &rows));
        }
        if let Some(v) = self.term_cache(side)?.read() {
            return Ok(cell.get_or_init(|| v).select(Axis(0), &rows));
        }
        let mut kept = self.some_term_vectors[idx(side)]
            .lock()
            .map_err(|_| Error::invalid("term vectors: an earlier computation panicked"))?;
        let missing: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|i| !kept.contains_key(i))
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect();
        if !missing.is_empty() {
            let v = self.model.term_vectors_of(side, &missing)?;
            if v.dim() != (missing.len(), self.model.dim()) {
                return Err(Error::invalid(format!(
                    "{}: {} term vectors of width {} asked, {:?} given",
                    self.model.kind(),
                    missing.len(),
                    self.model.dim(),
                    v.dim()
                )));
            }
            for (i, row) in missing.iter().zip(v.rows()) {
                kept.insert(*i, row.to_vec());
            }
        }
        let mut out = Array2::zeros((ids.len(), self.model.dim()));
        for (mut o, i) in out.rows_mut().into_iter().zip(ids) {
            o.assign(&ArrayView1::from(&kept[i][..]));
        }
        Ok(out)
    }

    /// The session's cache of `side`'s term vectors: `term-vectors.SIDE.npy`,
    /// used only while `term-vectors.SIDE.json` names the current checkpoint's
    /// BLAKE3 and the table's shape.
    fn term_cache(&self, side: Side) -> Result<TableCache> {
        let name = match side {
            Side::Source => "source",
            Side::Target => "target",
        };
        let hash = self.checkpoint_hash()?;
        let (rows, dim) = (self.vocabs.side(side).len(), self.model.dim());
        Ok(TableCache {
            npy: self.session.dir.join(format!("term-vectors.{name}.npy")),
            meta: self.session.dir.join(format!("term-vectors.{name}.json")),
            want: serde_json::json!({"checkpoint_blake3": hash, "rows": rows, "dim": dim}),
            shape: (rows, dim),
        })
    }

    /// BLAKE3 of the checkpoint the model came from (best, else last).
    /// Read once per loaded session, and hashed only when the session's
    /// record of it is stale ([`super::table_cache::checkpoint_blake3`]): a
    /// fine-tuned encoder's checkpoint is hundreds of megabytes, and every
    /// search of the workbench asks.
    pub(crate) fn checkpoint_hash(&self) -> Result<String> {
        if let Some(h) = self.checkpoint_hash.get() {
            return Ok(h.clone());
        }
        let h = super::table_cache::checkpoint_blake3(&self.session.dir)?;
        Ok(self.checkpoint_hash.get_or_init(|| h).clone())
    }

    /// [`Loaded::encode_texts`] of a collection searched again and again
    /// (the ad-hoc documents). For a model that reads raw text (an encoder:
    /// minutes for a few hundred paragraphs on a CPU) the embeddings are
    /// kept in the session as `doc-embeddings.SIDE.npy`, used again while
    /// `doc-embeddings.SIDE.json` names the same checkpoint and the same
    /// texts (their BLAKE3); other models encode at once, as before.
    pub fn encode_collection<S: AsRef<str>>(&self, side: Side, texts: &[S]) -> Result<Array2<f32>> {
        if !self.model.reads_text() {
            return self.encode_texts(side, texts);
        }
        let cache = self.collection_cache(side, texts)?;
        if let Some(v) = cache.read() {
            return Ok(v);
        }
        let v = self.encode_texts(side, texts)?;
        cache.write(&v);
        Ok(v)
    }

    /// An encoder's term vectors (the encoder run on every vocabulary word:
    /// minutes on a CPU), kept in the session ([`Loaded::term_cache`]).
    fn cached_term_vectors(&self, side: Side) -> Result<Array2<f32>> {
        let cache = self.term_cache(side)?;
        if let Some(v) = cache.read() {
            return Ok(v);
        }
        let v = self.model.term_vectors(side)?;
        cache.write(&v);
        Ok(v)
    }

    /// CSLS penalty of every term of `side`: mean similarity of its
    /// [`CSLS_K`] nearest terms of the other language (computed once).
    pub fn csls_penalty(&self, side: Side) -> Result<&Array1<f32>> {
        let cell = &self.csls_r[idx(side)];
        if let Some(v) = cell.get() {
            return Ok(v);
        }
        let mine = self.term_vectors(side)?;
        let other = self.term_vectors(side.other())?;
        let r = crate::index::dense::mean_top_k(mine, other, CSLS_K, self.model.similarity());
        Ok(cell.get_or_init(|| r))
    }

    /// Nearest terms of `word` (a word of `side`'s language, analysed as the
    /// training data was) in the other language and in its own, by the
    /// model's similarity or by CSLS (cross-domain similarity local scaling:
    /// `2 sim(x, y) - r(x) - r(y)`, which demotes "hub" terms close to
    /// everything).
    pub fn neighbours(&self, word: &str, side: Side, k: usize, csls: bool) -> Result<Neighbours> {
        let an = self.analyzer(side);
        let words = Analyzer::words(word);
        let w = match words.as_slice() {
            [w] => w.clone(),
            [] => return Err(Error::invalid(format!("`{word}`: no word in it"))),
            _ => {
                return Err(Error::invalid(format!(
                    "`{word}`: give one word, not {}",
                    words.len()
                )))
            }
        };
        let term = an
            .term(&w)
            .ok_or_else(|| Error::invalid(format!("`{word}` is a stop word of `{}`", an.lang())))?;
        let vocab = self.vocabs.side(side);
        let mine = self.term_vectors(side)?;
        let sim = self.model.similarity();
        // the word's units: one for `units = "words"`; a word cut into several
        // subword units gets the sum of their vectors, normalised
        let units = an.segment(vec![term.clone()]);
        let ids: Vec<usize> = units
            .iter()
            .filter_map(|u| vocab.id(u).map(|i| i as usize))
            .collect();
        let (q, id): (Array1<f32>, Option<usize>) = match (units.len(), ids.as_slice()) {
            (1, [i]) => (mine.row(*i).to_owned(), Some(*i)),
            (_, []) => {
                let shown: Vec<String> = units.iter().map(|u| an.display(u)).collect();
                return Err(Error::invalid(if units.len() > 1 {
                    format!(
                        "`{word}` (units {}) has no unit in the {} vocabulary of this session ({} terms)",
                        shown.join(" "),
                        an.lang(),
                        vocab.len()
                    )
                } else {
                    format!(
                        "`{word}` (term `{term}`) is not in the {} vocabulary of this session ({} terms)",
                        an.lang(),
                        vocab.len()
                    )
                }));
            }
            (_, ids) => {
                let mut v = Array1::<f32>::zeros(mine.ncols());
                for &i in ids {
                    v += &mine.row(i);
                }
                sim.normalize(&mut v);
                (v, None)
            }
        };
        let q = q.view();
        let cross = {
            let other = self.term_vectors(side.other())?;
            let cos = sim.against(other.view(), q);
            let scores = if csls {
                let r_q = mean_top_k_row(q, other, CSLS_K, sim);
                let r_other = self.csls_penalty(side.other())?;
                cos.iter()
                    .zip(r_other.iter())
                    .map(|(c, r)| 2.0 * c - r_q - r)
                    .collect::<Vec<f32>>()
            } else {
                cos.to_vec()
            };
            top(
                &scores,
                cos.as_slice().expect("contiguous"),
                k,
                None,
                self.vocabs.side(side.other()),
            )
        };
        let same = {
            let cos = sim.against(mine.view(), q);
            top(
                cos.as_slice().expect("contiguous"),
                cos.as_slice().expect("contiguous"),
                k,
                id,
                vocab,
            )
        };
        Ok(Neighbours {
            word: word.to_string(),
            term,
            side,
            csls,
            similarity: sim,
            cross,
            same,
        })
    }
}

fn top(
    scores: &[f32],
    cos: &[f32],
    k: usize,
    skip: Option<usize>,
    vocab: &crate::text::Vocabulary,
) -> Vec<Neighbour> {
    // words only: the n-gram fallback's units are not terms to show
    let mut order: Vec<usize> = (0..scores.len().min(vocab.words()))
        .filter(|i| Some(*i) != skip && scores[*i].is_finite())
        .collect();
    // best first; ties by term id for a stable answer
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    order
        .into_iter()
        .take(k)
        .map(|i| Neighbour {
            term: vocab.term(i as u32).to_string(),
            score: scores[i],
            plain: cos[i],
        })
        .collect()
}

fn mean_top_k_row(q: ArrayView1<f32>, other: &Array2<f32>, k: usize, sim: Similarity) -> f32 {
    let mut c = sim.against(other.view(), q).to_vec();
    crate::index::dense::mean_of_top(&mut c, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn mean_top_k_is_exact() {
        let a = array![[1.0f32, 0.0], [0.0, 1.0]];
        let b = array![[1.0f32, 0.0], [0.6, 0.8], [0.0, 1.0]];
        let r = crate::index::dense::mean_top_k(&a, &b, 2, Similarity::Cosine);
        assert!((r[0] - 0.8).abs() < 1e-6);
        assert!((r[1] - 0.9).abs() < 1e-6);
        assert!((mean_top_k_row(a.row(0), &b, 1, Similarity::Cosine) - 1.0).abs() < 1e-6);
    }
}
