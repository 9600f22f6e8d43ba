//! Workspaces: one TOML file naming a language pair's data (parallel text,
//! monolingual text, an ad-hoc retrieval task, a dictionary) and the text
//! settings. Relative paths are relative to the TOML file.
//!
//! ```toml
//! name = "enhi-sample"
//! [source]
//! lang = "en"
//! [target]
//! lang = "hi"
//! [parallel]
//! train = ["train.en", "train.hi"]   # or train = "train.tsv" (source<TAB>target)
//! # or several corpora, read in order: train = [["a.en", "a.hi"], ["b.tsv"]]
//! valid = ["val.en", "val.hi"]
//! test  = ["test.en", "test.hi"]
//! # or: files = ["all.en", "all.hi"] (or tsv = "all.tsv"), split = [0.8, 0.1, 0.1], seed = 1
//! # with files/tsv + split: labels = "ids.txt", one display label per pair
//! # (a verse reference such as "John 1:8"), shown for derived-task documents
//! [monolingual]                      # optional: defaults to the target side of train
//! texts = ["more.hi"]
//! [adhoc]                            # optional: else derived from the parallel data
//! docs = "docs.hi.tsv"
//! queries = "queries.en.tsv"
//! target_queries = "queries.hi.tsv"  # optional
//! qrels = "qrels.tsv"
//! [dictionary]                       # optional
//! path = "eng-hin.tsv"
//! reverse = false                    # true: the file lists target → source; read swapped
//! [text]                             # optional: crate::text::TextConfig; keys
//! vocab_per_language = 10000         # left out take its defaults
//! units = "words"                    # or "bpe", "unigram", "char-ngrams" (crate::text::units)
//! subword_vocab = 8000               # pieces of a learnt bpe/unigram model per language
//! ngram_min = 3                      # char-ngrams: n range, boundary marks counted
//! ngram_max = 5
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::text::{TextConfig, TextSettings};
use crate::{Error, Result};

/// Where the pairs of one parallel corpus (or one split) come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PairSource {
    /// Two line-aligned files: line i of `source` translates line i of `target`.
    Files {
        /// Source-language file.
        source: PathBuf,
        /// Target-language file.
        target: PathBuf,
    },
    /// One TSV file, `source<TAB>target` per line (further columns ignored).
    Tsv(PathBuf),
    /// Several sources, their pairs concatenated in this order.
    Parts(Vec<PairSource>),
}

impl PairSource {
    /// The files it reads.
    pub fn files(&self) -> Vec<PathBuf> {
        match self {
            PairSource::Files { source, target } => vec![source.clone(), target.clone()],
            PairSource::Tsv(p) => vec![p.clone()],
            PairSource::Parts(parts) => parts.iter().flat_map(PairSource::files).collect(),
        }
    }
}

/// How the parallel data is split into train / valid / test.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParallelSpec {
    /// One source per split; `valid` and `test` may be absent (empty splits).
    Splits {
        /// Training pairs.
        train: PairSource,
        /// Validation pairs.
        valid: Option<PairSource>,
        /// Test pairs.
        test: Option<PairSource>,
    },
    /// One corpus split by fractions after a seeded shuffle of pair indices.
    Fractions {
        /// The whole corpus.
        corpus: PairSource,
        /// Fractions of train, valid and test (sum 1).
        split: [f64; 3],
        /// Shuffle seed.
        seed: u64,
    },
}

/// A declared ad-hoc retrieval task (`[adhoc]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdhocSpec {
    /// Target-language documents (`id<TAB>text` or JSONL).
    pub docs: PathBuf,
    /// Source-language queries (`id<TAB>text` or TREC topics).
    pub queries: PathBuf,
    /// The same queries in the target language (monolingual ceiling).
    pub target_queries: Option<PathBuf>,
    /// TREC qrels.
    pub qrels: PathBuf,
}

/// A loaded workspace: every path resolved, every setting checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workspace {
    /// The TOML file it was read from.
    pub path: PathBuf,
    /// The folder of the TOML file (relative paths start here; caches live here).
    pub dir: PathBuf,
    /// Workspace name.
    pub name: String,
    /// Query language (ISO 639-1).
    pub source_lang: String,
    /// Document language (ISO 639-1).
    pub target_lang: String,
    /// Parallel data and its split.
    pub parallel: ParallelSpec,
    /// `[parallel] labels`: a file of display labels, line i naming pair i
    /// of the corpus (a verse reference), for the derived task's documents
    /// and queries. Display only: not part of [`Workspace::content_hash`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<PathBuf>,
    /// Extra target-language texts, one per line; `None`: the target side of train.
    pub monolingual: Option<Vec<PathBuf>>,
    /// The declared ad-hoc task, if any (see [`Workspace::adhoc`]).
    pub adhoc: Option<AdhocSpec>,
    /// Bilingual dictionary file, if any.
    pub dictionary: Option<PathBuf>,
    /// Whether the dictionary file lists target → source and is read swapped
    /// (`[dictionary] reverse = true`; see [`crate::corpus::Dictionary::reversed`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dictionary_reverse: bool,
    /// Text analysis settings.
    pub text: TextConfig,
    /// The `[text]` keys the file sets (the rest took the defaults).
    #[serde(skip)]
    pub text_given: TextSettings,
}

// ---- the TOML as written ----

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkspace {
    name: String,
    source: RawLang,
    target: RawLang,
    parallel: RawParallel,
    monolingual: Option<RawMono>,
    adhoc: Option<RawAdhoc>,
    dictionary: Option<RawDict>,
    text: Option<TextSettings>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLang {
    lang: String,
}

#[derive(Debug)]
enum RawPairs {
    Files([String; 2]),
    Tsv(String),
    /// `[["a.en", "a.de"], ["b.tsv"]]`: each inner list one corpus.
    Parts(Vec<RawPairs>),
}

const PAIRS_EXPECTED: &str =
    "two line-aligned files [\"x.src\", \"x.tgt\"], one TSV file \"x.tsv\", \
     or a list of corpora read in order, each two files or one TSV file: \
     [[\"a.src\", \"a.tgt\"], [\"b.tsv\"]]";

/// A string or a list of strings (an element of a `train`/`valid`/`test` list).
enum StrOrList {
    Str(String),
    List(Vec<String>),
}

impl<'de> Deserialize<'de> for StrOrList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = StrOrList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a file name or a list of file names")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<StrOrList, E> {
                Ok(StrOrList::Str(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<StrOrList, A::Error> {
                let mut files = Vec::new();
                while let Some(f) = seq.next_element::<String>()? {
                    files.push(f);
                }
                Ok(StrOrList::List(files))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawPairs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawPairs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(PAIRS_EXPECTED)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<RawPairs, E> {
                Ok(RawPairs::Tsv(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<RawPairs, A::Error> {
                use serde::de::Error as _;
                let mut items: Vec<StrOrList> = Vec::new();
                while let Some(f) = seq.next_element::<StrOrList>()? {
                    items.push(f);
                }
                let strings = items
                    .iter()
                    .filter(|i| matches!(i, StrOrList::Str(_)))
                    .count();
                if strings == items.len() {
                    // the plain form: two line-aligned files
                    let files: Vec<String> = items
                        .into_iter()
                        .filter_map(|i| match i {
                            StrOrList::Str(s) => Some(s),
                            StrOrList::List(_) => None,
                        })
                        .collect();
                    return match <[String; 2]>::try_from(files) {
                        Ok(pair) => Ok(RawPairs::Files(pair)),
                        Err(v) => Err(A::Error::invalid_length(v.len(), &self)),
                    };
                }
                let mut parts = Vec::with_capacity(items.len());
                for (n, item) in items.into_iter().enumerate() {
                    let files = match item {
                        StrOrList::List(files) => files,
                        StrOrList::Str(_) => {
                            return Err(A::Error::custom(format!(
                                "a list mixing file names and lists of files; want {PAIRS_EXPECTED}"
                            )))
                        }
                    };
                    parts.push(match <[String; 2]>::try_from(files) {
                        Ok(pair) => RawPairs::Files(pair),
                        Err(mut v) if v.len() == 1 => RawPairs::Tsv(v.remove(0)),
                        Err(v) => {
                            return Err(A::Error::custom(format!(
                                "corpus {} of the list names {} files; want two line-aligned \
                                 files [\"a.src\", \"a.tgt\"] or one TSV file [\"b.tsv\"]",
                                n + 1,
                                v.len()
                            )))
                        }
                    });
                }
                Ok(RawPairs::Parts(parts))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParallel {
    train: Option<RawPairs>,
    valid: Option<RawPairs>,
    test: Option<RawPairs>,
    files: Option<[String; 2]>,
    tsv: Option<String>,
    split: Option<[f64; 3]>,
    seed: Option<u64>,
    labels: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMono {
    texts: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAdhoc {
    docs: String,
    queries: String,
    target_queries: Option<String>,
    qrels: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDict {
    path: String,
    #[serde(default)]
    reverse: bool,
}

impl Workspace {
    /// Reads and checks a workspace TOML. Errors name the file and, for bad
    /// TOML, the key, line and what was expected.
    pub fn load(path: &Path) -> Result<Workspace> {
        use crate::util::{read_regular_text, Links, SMALL_FILE_LIMIT};
        let text = read_regular_text(path, Links::Follow, SMALL_FILE_LIMIT)?;
        Self::from_toml(path, &text)
    }

    /// Parses workspace TOML `text` as if read from `path` (relative paths
    /// resolve against `path`'s folder).
    pub fn from_toml(path: &Path, text: &str) -> Result<Workspace> {
        // a missing top-level key is named as such (serde reports it at
        // whatever table comes first)
        if let Ok(table) = text.parse::<toml::Table>() {
            for (key, example) in [
                ("name", "name = \"my-workspace\""),
                ("source", "[source] lang = \"en\""),
                ("target", "[target] lang = \"es\""),
                (
                    "parallel",
                    "[parallel] train = [\"train.en\", \"train.es\"]",
                ),
            ] {
                if !table.contains_key(key) {
                    return Err(Error::file(
                        path,
                        format!(
                            "bad workspace TOML: missing top-level key `{key}` (e.g. `{example}`)"
                        ),
                    ));
                }
            }
        }
        let raw: RawWorkspace = toml::from_str(text).map_err(|e| toml_error(path, text, &e))?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let resolve = |p: &str| -> PathBuf {
            let p = Path::new(p);
            if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            }
        };
        let bad = |msg: String| Error::file(path, msg);
        fn pairs(r: &RawPairs, resolve: &dyn Fn(&str) -> PathBuf) -> PairSource {
            match r {
                RawPairs::Files([s, t]) => PairSource::Files {
                    source: resolve(s),
                    target: resolve(t),
                },
                RawPairs::Tsv(p) => PairSource::Tsv(resolve(p)),
                RawPairs::Parts(parts) => {
                    PairSource::Parts(parts.iter().map(|p| pairs(p, resolve)).collect())
                }
            }
        }
        let p = &raw.parallel;
        let by_fraction = p.files.is_some() || p.tsv.is_some() || p.split.is_some();
        let parallel = if by_fraction {
            if p.train.is_some() || p.valid.is_some() || p.test.is_some() {
                return Err(bad(
                    "[parallel]: give either train/valid/test or files/tsv + split, not both"
                        .into(),
                ));
            }
            let corpus = match (&p.files, &p.tsv) {
                (Some([s, t]), None) => PairSource::Files {
                    source: resolve(s),
                    target: resolve(t),
                },
                (None, Some(t)) => PairSource::Tsv(resolve(t)),
                (Some(_), Some(_)) => {
                    return Err(bad("[parallel]: give `files` or `tsv`, not both".into()))
                }
                (None, None) => {
                    return Err(bad("[parallel]: `split` needs `files` or `tsv`".into()))
                }
            };
            let split = p.split.ok_or_else(|| {
                bad("[parallel]: key `split` missing (e.g. [0.8, 0.1, 0.1])".into())
            })?;
            if split.iter().any(|f| !f.is_finite() || *f < 0.0)
                || (split.iter().sum::<f64>() - 1.0).abs() > 1e-6
            {
                return Err(bad(format!(
                    "[parallel]: key `split` = {split:?}: want three fractions >= 0 summing to 1"
                )));
            }
            ParallelSpec::Fractions {
                corpus,
                split,
                seed: p.seed.unwrap_or(1),
            }
        } else {
            if p.labels.is_some() {
                return Err(bad(
                    "[parallel]: key `labels` goes with `files`/`tsv` + `split` (one label per line of the corpus)".into(),
                ));
            }
            if p.seed.is_some() {
                return Err(bad("[parallel]: key `seed` only goes with `split`".into()));
            }
            let train = p.train.as_ref().ok_or_else(|| {
                bad("[parallel]: key `train` missing (or give files/tsv + split)".into())
            })?;
            ParallelSpec::Splits {
                train: pairs(train, &resolve),
                valid: p.valid.as_ref().map(|r| pairs(r, &resolve)),
                test: p.test.as_ref().map(|r| pairs(r, &resolve)),
            }
        };
        for (key, lang) in [("source", &raw.source.lang), ("target", &raw.target.lang)] {
            if lang.trim().is_empty() {
                return Err(bad(format!("[{key}]: key `lang` is empty")));
            }
            // a language names files (export's `terms.en.vec`): a code only
            if let Err(why) = crate::text::check_lang(lang.trim()) {
                let msg = format!("[{key}]: key `lang`: {why}");
                let line = text
                    .lines()
                    .position(|l| l.contains("lang") && l.contains(lang.trim()));
                return Err(match line {
                    Some(i) => Error::parse(path, i + 1, msg),
                    None => bad(msg),
                });
            }
        }
        let text_given = raw.text.unwrap_or_default();
        let text_cfg = text_given.clone().resolve();
        if text_cfg.vocab_per_language == 0 {
            return Err(bad("[text]: key `vocab_per_language` must be > 0".into()));
        }
        Ok(Workspace {
            path: path.to_path_buf(),
            dir: dir.clone(),
            name: raw.name,
            source_lang: raw.source.lang.trim().to_lowercase(),
            target_lang: raw.target.lang.trim().to_lowercase(),
            parallel,
            labels: raw.parallel.labels.as_deref().map(resolve),
            monolingual: raw
                .monolingual
                .map(|m| m.texts.iter().map(|t| resolve(t)).collect()),
            adhoc: raw.adhoc.map(|a| AdhocSpec {
                docs: resolve(&a.docs),
                queries: resolve(&a.queries),
                target_queries: a.target_queries.as_deref().map(resolve),
                qrels: resolve(&a.qrels),
            }),
            dictionary_reverse: raw.dictionary.as_ref().is_some_and(|d| d.reverse),
            dictionary: raw.dictionary.map(|d| resolve(&d.path)),
            text: text_cfg,
            text_given,
        })
    }

    /// The workspace at `path` with the text settings `recorded` by a
    /// session (when it has them) in place of the file's: a session made
    /// before the defaults changed reads its data as it was trained.
    pub fn load_with_text(path: &Path, recorded: Option<&TextConfig>) -> Result<Workspace> {
        let mut ws = Workspace::load(path)?;
        if let Some(t) = recorded {
            ws.text = t.clone();
        }
        Ok(ws)
    }

    /// The workspace as a model with its own `[text]` defaults (`defaults`,
    /// see the model registry) reads it: the file's keys first, then the
    /// model's, then the global defaults.
    pub fn with_model_text(mut self, defaults: &[(&str, &str)]) -> Result<Workspace> {
        if !defaults.is_empty() {
            let model = TextSettings::from_pairs(defaults)?;
            self.text = self.text_given.clone().or(model).resolve();
        }
        Ok(self)
    }

    /// Error for the first data file that does not exist, naming the
    /// workspace file and the line that names it, the path it was read as
    /// (relative paths are read from the workspace's folder) and the fix; a
    /// folder's files nearest the name are offered. The `[parallel] labels`
    /// file is display only (it stays out of the content hash, so a session
    /// stays valid when it is added): [`Workspace::read_labels`] gives the
    /// same error when it reads a missing one.
    pub fn check_data_files(&self) -> Result<()> {
        for f in self.data_files() {
            if std::fs::metadata(&f).is_err() {
                return Err(self.missing_file(&f));
            }
        }
        Ok(())
    }

    fn missing_file(&self, f: &Path) -> Error {
        let written = f
            .strip_prefix(&self.dir)
            .unwrap_or(f)
            .to_string_lossy()
            .into_owned();
        // the line whose quoted string ends in the path as resolved
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let names = |l: &str| {
            l.match_indices(written.as_str()).any(|(i, _)| {
                let before = l[..i].chars().next_back();
                let after = l[i + written.len()..].chars().next();
                matches!(before, Some('"' | '\'' | '/')) && matches!(after, Some('"' | '\''))
            })
        };
        let line = text
            .lines()
            .position(|l| !l.trim_start().starts_with('#') && names(l));
        let folder = f.parent().unwrap_or(Path::new("."));
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // a file the workspace names already (test.en for a missing test.es)
        // is not what was meant
        let named = self.data_files();
        let near = crate::util::closest_entry(folder, name, false)
            .filter(|n| !named.contains(&folder.join(n)));
        let hint = match near {
            Some(n) => format!("did you mean {}? ", folder.join(&n).display()),
            None if !folder.is_dir() => format!("(no folder {}) ", folder.display()),
            None => String::new(),
        };
        let msg = format!(
            "data file {} does not exist (relative paths are read from the workspace's folder, {}); \
             {hint}correct the path in the workspace file or put the file there",
            f.display(),
            self.dir.display()
        );
        match line {
            Some(i) => Error::parse(&self.path, i + 1, msg),
            None => Error::file(&self.path, msg),
        }
    }

    /// Every data file the workspace reads (a dictd `.index` brings its
    /// `.dict.dz` / `.dict`), in a fixed order.
    pub fn data_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        match &self.parallel {
            ParallelSpec::Splits { train, valid, test } => {
                out.extend(train.files());
                for s in [valid, test].into_iter().flatten() {
                    out.extend(s.files());
                }
            }
            ParallelSpec::Fractions { corpus, .. } => out.extend(corpus.files()),
        }
        if let Some(m) = &self.monolingual {
            out.extend(m.iter().cloned());
        }
        if let Some(a) = &self.adhoc {
            out.push(a.docs.clone());
            out.push(a.queries.clone());
            out.extend(a.target_queries.iter().cloned());
            out.push(a.qrels.clone());
        }
        if let Some(d) = &self.dictionary {
            out.push(d.clone());
            if let Some(dz) = crate::corpus::dictionary::dictd_data_file(d) {
                out.push(dz);
            }
        }
        out
    }

    /// BLAKE3 (hex) over the resolved settings and the bytes of every data
    /// file: changes whenever the data or the settings change. Keys caches.
    pub fn content_hash(&self) -> Result<String> {
        // paths enter by file name only, so the hash does not depend on the
        // folder the workspace is loaded from; the bytes say the rest
        fn names(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::String(s) => {
                    if let Some(n) = Path::new(s.as_str()).file_name() {
                        *s = n.to_string_lossy().into_owned();
                    }
                }
                serde_json::Value::Array(a) => a.iter_mut().for_each(names),
                serde_json::Value::Object(o) => o.values_mut().for_each(names),
                _ => {}
            }
        }
        self.check_data_files()?;
        let mut h = blake3::Hasher::new();
        let mut data = serde_json::json!({
            "parallel": self.parallel,
            "monolingual": self.monolingual,
            "adhoc": self.adhoc,
            "dictionary": self.dictionary,
        });
        names(&mut data);
        // only when set, so the hashes of workspaces without the key stay as they were
        if self.dictionary_reverse {
            data["dictionary_reverse"] = true.into();
        }
        let settings = serde_json::json!({
            "source_lang": self.source_lang,
            "target_lang": self.target_lang,
            "text": self.text,
            "data": data,
        });
        h.update(settings.to_string().as_bytes());
        for f in self.data_files() {
            let file = crate::util::open_regular(&f, crate::util::Links::Follow)?;
            let len = file.metadata().map_err(|e| Error::io(&f, e))?.len();
            h.update(&len.to_le_bytes());
            h.update_reader(file).map_err(|e| Error::io(&f, e))?;
        }
        Ok(h.finalize().to_hex().to_string())
    }

    /// Folder of cached prepared data for the current content.
    pub fn cache_root(&self) -> PathBuf {
        self.dir.join(".rosetta-cache")
    }

    /// The `[parallel] labels` file's labels, one per pair of a corpus of
    /// `pairs` pairs (`None` without the key). A line count other than
    /// `pairs`, or an empty label, is an error naming the file (and line).
    pub fn read_labels(&self, pairs: usize) -> Result<Option<Vec<String>>> {
        let Some(path) = &self.labels else {
            return Ok(None);
        };
        if std::fs::metadata(path).is_err() {
            return Err(self.missing_file(path));
        }
        let lines = crate::text::io::read_lines(path)?;
        if lines.len() != pairs {
            return Err(Error::file(
                path,
                format!(
                    "[parallel] labels: {} lines, but the parallel corpus has {pairs} pairs (want one label per pair)",
                    lines.len()
                ),
            ));
        }
        let mut out = Vec::with_capacity(lines.len());
        for (n, l) in lines.into_iter().enumerate() {
            let l = l.trim();
            if l.is_empty() {
                return Err(Error::parse(path, n + 1, "empty label"));
            }
            out.push(l.to_string());
        }
        Ok(Some(out))
    }
}

/// A toml error as `file:line: key `k`: message`. toml names unknown and
/// missing keys in its message but not the key of a wrong type, so the key is
/// read off the line the error points at (with its `[table]`).
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> Error {
    let msg = e.message().trim().to_string();
    let Some(span) = e.span() else {
        return Error::parse(path, 0, format!("bad workspace TOML: {msg}"));
    };
    let start = span.start.min(text.len());
    let line = text[..start].matches('\n').count() + 1;
    let line_text = text.lines().nth(line - 1).unwrap_or("");
    let table = text.lines().take(line - 1).filter_map(table_of_line).last();
    let key = line_text
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    let named = key
        .as_ref()
        .is_some_and(|k| msg.contains(&format!("`{k}`")));
    let full_key = match (table, key) {
        (Some(t), Some(k)) => format!("{t}.{k}"),
        (_, Some(k)) => k,
        _ => String::new(),
    };
    let header = line_text.trim_start().starts_with('[');
    let msg = if msg.starts_with("missing field") {
        match (header, table_of_line(line_text)) {
            (true, Some(t)) => format!("[{t}]: {msg}"),
            _ => msg,
        }
    } else if named {
        match full_key.rsplit_once('.') {
            Some((t, _)) => format!("[{t}]: {msg}"),
            None => msg,
        }
    } else if !full_key.is_empty() {
        format!("key `{full_key}`: {msg}")
    } else {
        msg
    };
    Error::parse(path, line, format!("bad workspace TOML: {msg}"))
}

fn table_of_line(l: &str) -> Option<String> {
    l.trim()
        .strip_prefix('[')
        .and_then(|l| l.split(']').next())
        .map(|t| t.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(text: &str) -> Result<Workspace> {
        Workspace::from_toml(Path::new("/x/w.toml"), text)
    }

    #[test]
    fn splits_and_fractions() {
        let w = ws(r#"
name = "a"
[source]
lang = "en"
[target]
lang = "ES"
[parallel]
train = ["t.en", "/abs/t.es"]
test = "test.tsv"
"#)
        .unwrap();
        assert_eq!(w.target_lang, "es");
        assert_eq!(
            w.parallel,
            ParallelSpec::Splits {
                train: PairSource::Files {
                    source: "/x/t.en".into(),
                    target: "/abs/t.es".into()
                },
                valid: None,
                test: Some(PairSource::Tsv("/x/test.tsv".into())),
            }
        );
        let w = ws(r#"
name = "a"
source.lang = "en"
target.lang = "es"
[parallel]
tsv = "p.tsv"
split = [0.5, 0.25, 0.25]
"#)
        .unwrap();
        assert!(matches!(
            w.parallel,
            ParallelSpec::Fractions { seed: 1, .. }
        ));
    }

    #[test]
    fn labels_go_with_a_fraction_split_and_stay_out_of_the_hash() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.toml");
        std::fs::write(dir.path().join("p.tsv"), "a\tb\nc\td\n").unwrap();
        let head = "name = \"a\"\nsource.lang = \"en\"\ntarget.lang = \"es\"\n[parallel]\ntsv = \"p.tsv\"\nsplit = [0.5, 0.5, 0.0]\n";
        let plain = Workspace::from_toml(&p, head).unwrap();
        let w = Workspace::from_toml(&p, &format!("{head}labels = \"ids.txt\"\n")).unwrap();
        assert_eq!(w.labels, Some(dir.path().join("ids.txt")));
        assert_eq!(plain.read_labels(2).unwrap(), None);
        // display only: sessions of the workspace stay valid when it is added
        assert_eq!(w.content_hash().unwrap(), plain.content_hash().unwrap());
        std::fs::write(dir.path().join("ids.txt"), "Gen 1:1\nGen 1:2\n").unwrap();
        assert_eq!(
            w.read_labels(2).unwrap(),
            Some(vec!["Gen 1:1".to_string(), "Gen 1:2".to_string()])
        );
        let e = w.read_labels(3).unwrap_err().to_string();
        assert!(
            e.contains("ids.txt") && e.contains("2 lines") && e.contains("3 pairs"),
            "{e}"
        );
        std::fs::write(dir.path().join("ids.txt"), "Gen 1:1\n \n").unwrap();
        let e = w.read_labels(2).unwrap_err().to_string();
        assert!(e.contains("ids.txt:2") && e.contains("empty label"), "{e}");
        let e = ws("name = \"a\"\nsource.lang = \"en\"\ntarget.lang = \"es\"\n[parallel]\ntrain = \"t.tsv\"\nlabels = \"ids.txt\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`labels` goes with `files`/`tsv` + `split`"),
            "{e}"
        );
    }

    #[test]
    fn bad_keys_and_types_are_named() {
        let e = ws("name = \"a\"\nsource.lang = \"en\"\ntarget.lang = \"es\"\n[parallel]\ntrain = \"t.tsv\"\n[text]\nvocab_per_language = \"big\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("vocab_per_language") && e.contains("/x/w.toml:7"),
            "{e}"
        );
        let e = ws("name = \"a\"\nsource.lang = \"en\"\ntarget.lang = \"es\"\nflavour = 1\n[parallel]\ntrain = \"t.tsv\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("flavour"), "{e}");
        let e = ws("name = \"a\"\nsource.lang = \"en\"\ntarget.lang = \"es\"\n[parallel]\nfiles = [\"a\", \"b\"]\nsplit = [0.5, 0.6, 0.1]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("split"), "{e}");
    }

    /// A language names export files: anything but a code is refused where
    /// the workspace is read, with the file and line.
    #[test]
    fn a_language_is_a_code_never_a_path() {
        for bad in ["x/../../../../tmp/outside/PWNED", "..", "e n", "", "en;rm"] {
            let toml = format!(
                "name = \"a\"\n[source]\nlang = \"en\"\n[target]\nlang = {bad:?}\n[parallel]\ntrain = \"t.tsv\"\n"
            );
            let e = ws(&toml).unwrap_err().to_string();
            assert!(
                e.contains("/x/w.toml") && e.contains("lang"),
                "{bad:?}: {e}"
            );
            if !bad.is_empty() {
                assert!(e.contains("/x/w.toml:5"), "{bad:?}: {e}");
            }
        }
        let long = "a".repeat(crate::text::MAX_LANG_LEN + 1);
        let toml = format!("name = \"a\"\nsource.lang = \"{long}\"\ntarget.lang = \"es\"\n[parallel]\ntrain = \"t.tsv\"\n");
        assert!(ws(&toml).unwrap_err().to_string().contains("longer than"));
        for good in ["en", "zh-Hans", "x_custom", "ES"] {
            let toml = format!("name = \"a\"\nsource.lang = \"{good}\"\ntarget.lang = \"es\"\n[parallel]\ntrain = \"t.tsv\"\n");
            assert!(ws(&toml).is_ok(), "{good}");
        }
    }

    /// A data path naming a device or a FIFO is an error naming it, never a
    /// hash or read that does not end.
    #[test]
    fn a_device_as_data_is_refused_not_read_forever() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.toml");
        let w = Workspace::from_toml(
            &p,
            "name = \"a\"\nsource.lang = \"en\"\ntarget.lang = \"es\"\n[parallel]\ntsv = \"/dev/zero\"\nsplit = [0.5, 0.5, 0.0]\n",
        )
        .unwrap();
        let e = w.content_hash().unwrap_err().to_string();
        assert!(e.contains("/dev/zero") && e.contains("device"), "{e}");
        let e = crate::text::io::read_lines(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let e = Workspace::load(&p).unwrap_err().to_string();
        assert!(e.contains("w.toml") && e.contains("device"), "{e}");
    }
}
