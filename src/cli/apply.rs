//! Commands that use a trained session: `rosetta neighbours`, `rosetta export`,
//! `rosetta eval`, `rosetta search`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use rosetta::corpus::WrittenWords;
use rosetta::session::search::{marked_neighbours, TermTranslations};
use rosetta::session::Loaded;
use rosetta::text::Side;
use rosetta::train::runner::select_device;

/// Which language a word is in.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Lang {
    /// The query language.
    Source,
    /// The document language.
    Target,
}

impl From<Lang> for Side {
    fn from(l: Lang) -> Side {
        match l {
            Lang::Source => Side::Source,
            Lang::Target => Side::Target,
        }
    }
}

/// Arguments of `rosetta neighbours`.
#[derive(Debug, Args)]
pub struct NeighboursArgs {
    /// Trained session folder.
    #[arg(long, value_name = "DIR")]
    pub session: PathBuf,
    /// The word to look up (analysed like the training data: lower case, stemmed).
    #[arg(long)]
    pub term: String,
    /// Language of the word.
    #[arg(long, value_enum, default_value = "source")]
    pub lang: Lang,
    /// Number of neighbours per language.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Score cross-language neighbours by CSLS instead of cosine (demotes hub terms).
    #[arg(long)]
    pub csls: bool,
    /// Device to load the model on: auto (CUDA GPU 0 if this build has CUDA and one answers, else
    /// CPU; the default, as for `train`), cpu, cuda or cuda:<i>.
    #[arg(long, default_value = "auto")]
    pub device: rosetta::models::DeviceSpec,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `rosetta neighbours`: the engine's [`marked_neighbours`], as the
/// workbench's Neighbours screen shows them.
pub fn neighbours(args: NeighboursArgs) -> anyhow::Result<()> {
    let (device, _) = select_device(args.device)?;
    let l = {
        let _p = super::progress::Progress::start(format!("loading {}", args.session.display()));
        Loaded::open(&args.session, &device)?
    };
    if let Some(w) = l.checkpoint_warning() {
        eprintln!("warning: {w}");
    }
    let side: Side = args.lang.into();
    let dict = match workspace_dictionary(&l) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("warning: dictionary translations not marked: {e:#}");
            None
        }
    };
    let n = marked_neighbours(
        &l,
        &args.term,
        side,
        args.k,
        args.csls,
        dict.as_ref().map(|(f, r, _)| (f, r)),
        dict.as_ref().map(|(_, _, w)| w),
    )?;
    if args.json {
        let mut v = serde_json::to_value(&n)?;
        v["side"] = serde_json::to_value(side)?;
        println!("{v}");
    }
    if let Some(why) = &n.dropped {
        anyhow::bail!(
            "`{}` has no neighbours in {}: {why}",
            args.term,
            args.session.display()
        );
    }
    if args.json {
        return Ok(());
    }
    let (lang, other) = (
        l.vocabs.side(side).lang.clone(),
        l.vocabs.side(side.other()).lang.clone(),
    );
    println!(
        "{} ({lang} term `{}`), {}; terms shown as their commonest training word:",
        n.word,
        n.term,
        if n.csls { "CSLS" } else { n.similarity.label() }
    );
    println!(
        "  {other:<24} {:>7}     {lang:<24} {:>7}",
        "score",
        n.similarity.label()
    );
    for i in 0..n.cross.len().max(n.own.len()) {
        let c = n
            .cross
            .get(i)
            .map(|x| {
                let mark = if x.gold { "✓" } else { " " };
                format!("{:<24} {:>7.4} {mark}", x.surface, x.score)
            })
            .unwrap_or_else(|| " ".repeat(34));
        let s = n
            .own
            .get(i)
            .map(|x| format!("{:<24} {:>7.4}", x.surface, x.plain))
            .unwrap_or_default();
        println!("  {c}   {}", s.trim_end());
    }
    match &n.translations {
        None => println!("(the workspace has no dictionary: translations not marked)"),
        Some(t) if t.is_empty() => {
            println!("✓ dictionary translation (none listed for `{}`)", n.surface)
        }
        Some(t) => println!(
            "✓ dictionary translation ({} listed for `{}`: {})",
            t.len(),
            n.surface,
            n.translation_words
                .as_deref()
                .unwrap_or_default()
                .join(", ")
        ),
    }
    Ok(())
}

/// The session's workspace dictionary analysed as the session's texts
/// with its words as written, or `None` when the workspace names no
/// dictionary.
fn workspace_dictionary(
    l: &Loaded,
) -> anyhow::Result<Option<(TermTranslations, TermTranslations, WrittenWords)>> {
    let ws = rosetta::corpus::Workspace::load_with_text(
        &l.session.config.workspace,
        l.session.config.text.as_ref(),
    )?;
    if ws.dictionary.is_none() {
        return Ok(None);
    }
    let (src, tgt) = (l.analyzer(Side::Source), l.analyzer(Side::Target));
    let (fwd, rev) = rosetta::models::bm25::analysed_dictionary(&ws, src, tgt)?;
    let written = ws
        .read_dictionary()?
        .map(|d| d.written_words(src, tgt))
        .unwrap_or_default();
    Ok(Some((fwd, rev, written)))
}

/// Which terms `rosetta export` writes to `terms.<lang>.vec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportTerms {
    /// The vocabulary's words, each as its commonest training form (the
    /// word `neighbours` shows: `agua`, not the stem `agu`); the character
    /// n-gram units are left out. What MUSE, VecMap and gensim read.
    Words,
    /// Every index term as the model holds it: stems, n-gram units
    /// (`#<de`), subword pieces.
    Indexed,
}

/// What `rosetta export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportPart {
    /// `terms.<lang>.vec`, word2vec text format.
    Vectors,
    /// The test split's and the ad-hoc collection's embeddings (`.npy`,
    /// with their ids in `.ids.txt`).
    Embeddings,
    /// The ad-hoc TREC run, `adhoc.run` (`--depth` documents per query);
    /// for a task derived from the parallel test split also its judgements,
    /// `adhoc.run.qrels`, so that the run can be scored elsewhere.
    Run,
}

/// Arguments of `rosetta export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Trained session folder.
    #[arg(long, value_name = "DIR")]
    pub session: PathBuf,
    /// Output folder (made if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// What to write, comma-separated: vectors, embeddings, run. The run is
    /// left out unless named (at depth 1000 it is about 40 bytes a line,
    /// 120 MB for the Bible's 3,108 queries).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "vectors,embeddings"
    )]
    pub write: Vec<ExportPart>,
    /// Which terms the .vec files hold: `words` (surface words, n-gram
    /// units left out) or `indexed` (every index term as the model holds it).
    #[arg(long, value_enum, default_value = "words")]
    pub terms: ExportTerms,
    /// Documents per query in the run (with `--write run`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub depth: Option<u64>,
    /// Device to load the model on: auto (CUDA GPU 0 if this build has CUDA and one answers, else
    /// CPU; the default, as for `train`), cpu, cuda or cuda:<i>.
    #[arg(long, default_value = "auto")]
    pub device: rosetta::models::DeviceSpec,
}

/// Writes vectors in word2vec text format (`N D` header, then `word v1 ..
/// vD` per row): `rows` are `(row of v, word)`. A word that the format
/// cannot carry (empty or holding whitespace: a reader would split it) is
/// left out, and the words left out are returned (term id and word), so
/// that one odd word never ends an export; a vector that is not finite is
/// refused, naming the row, rather than written into a file no reader
/// parses back.
pub fn write_vec<'a>(
    path: &Path,
    rows: &[(u32, &'a str)],
    v: &ndarray::Array2<f32>,
) -> anyhow::Result<Vec<(u32, &'a str)>> {
    let writable = |w: &str| !w.is_empty() && !w.contains(char::is_whitespace);
    let (rows, skipped): (Vec<_>, Vec<_>) = rows.iter().copied().partition(|(_, w)| writable(w));
    let mut s = String::with_capacity(rows.len() * v.ncols() * 10);
    writeln!(s, "{} {}", rows.len(), v.ncols())?;
    for (i, term) in rows {
        let row = v.row(i as usize);
        if let Some(x) = row.iter().find(|x| !x.is_finite()) {
            anyhow::bail!(
                "{}: the vector of term {i} ({term:?}) holds {x}, not a finite number",
                path.display()
            );
        }
        s.push_str(term);
        for x in row {
            write!(s, " {x}")?;
        }
        s.push('\n');
    }
    rosetta::util::write_atomic(path, s.as_bytes())?;
    Ok(skipped)
}

/// `out/STEM.LANG.EXT`, once `lang` is checked to be a language code: a
/// file name is never made of unchecked text (a language holding `/` or
/// `..` would write outside `out`).
fn lang_file(out: &Path, stem: &str, lang: &str, ext: &str) -> anyhow::Result<PathBuf> {
    rosetta::text::check_lang(lang).map_err(|why| anyhow::anyhow!("cannot export: {why}"))?;
    Ok(out.join(format!("{stem}.{lang}.{ext}")))
}

/// `rosetta export`.
pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let parts = &args.write;
    if args.depth.is_some() && !parts.contains(&ExportPart::Run) {
        anyhow::bail!("--depth is the run's depth: add `run` to --write");
    }
    if rosetta::session::Session::open(&args.session)?.is_lexical() {
        return export_lexical_run(&args);
    }
    let (device, _) = select_device(args.device)?;
    let l = {
        let _p = super::progress::Progress::start(format!("loading {}", args.session.display()));
        Loaded::open(&args.session, &device)?
    };
    if let Some(w) = l.checkpoint_warning() {
        eprintln!("warning: {w}");
    }
    // the rows of each side, chosen (and refused) before anything is written
    let mut sides = Vec::new();
    if parts.contains(&ExportPart::Vectors) {
        for side in [Side::Source, Side::Target] {
            let vocab = l.vocabs.side(side);
            let rows: Vec<(u32, &str)> = match args.terms {
                ExportTerms::Indexed => (0..vocab.len() as u32)
                    .map(|i| (i, vocab.term(i)))
                    .collect(),
                ExportTerms::Words if l.analyzer(side).units().subword() => anyhow::bail!(
                    "{}: the {} terms are subword units ({:?}), not words; `--terms indexed` writes them",
                    args.session.display(),
                    vocab.lang,
                    l.text.units
                ),
                ExportTerms::Words => vocab.surface_words().with_context(|| {
                    format!(
                        "{}: the {} vocabulary was saved before surface words were recorded; `--terms indexed` writes its terms (stems)",
                        args.session.display(),
                        vocab.lang
                    )
                })?,
            };
            sides.push((side, rows));
        }
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let mut written = Vec::new();
    for (side, rows) in &sides {
        let vocab = l.vocabs.side(*side);
        let tv = l.term_vectors(*side)?;
        let path = lang_file(&args.out, "terms", &vocab.lang, "vec")?;
        let skipped = write_vec(&path, rows, tv)?;
        if let Some((i, w)) = skipped.first() {
            eprintln!(
                "warning: {}: {} {} word{} left out: the word2vec text format cannot hold a word that is empty or holds whitespace (the first: term {i}, {w:?})",
                path.display(),
                skipped.len(),
                vocab.lang,
                if skipped.len() == 1 { "" } else { "s" }
            );
        }
        let left = vocab.len() - rows.len();
        if left > 0 {
            eprintln!(
                "{}: {} words of {} terms ({left} n-gram units or terms sharing a word left out; `--terms indexed` writes all)",
                path.display(),
                rows.len(),
                vocab.len()
            );
        }
        written.push(path);
    }
    let embeddings = parts.contains(&ExportPart::Embeddings);
    let run = parts.contains(&ExportPart::Run).then(|| {
        args.depth
            .map_or(rosetta::session::retrieval::RUN_DEPTH, |d| d as usize)
    });
    if embeddings || run.is_some() {
        let more = export_workspace(&l, &args.out, embeddings, run);
        match more {
            Ok(more) => written.extend(more),
            Err(e) if !sides.is_empty() => {
                eprintln!("warning: only term vectors exported: {e:#}")
            }
            Err(e) => return Err(e),
        }
    }
    for p in written {
        println!("{}", p.display());
    }
    let sim = l.model.similarity();
    if sim != rosetta::space::Similarity::Cosine {
        eprintln!(
            "note: {} rows ({} dimensions) are compared by {}, not by cosine",
            l.model.kind(),
            l.model.dim(),
            sim.name()
        );
    }
    Ok(())
}

/// `export` of a lexical baseline's session: it has no vectors or
/// embeddings, so only `--write run` is taken, and its ad-hoc run (with a
/// derived task's judgements) is written by the engine's evaluation, the
/// run `eval --run` writes.
fn export_lexical_run(args: &ExportArgs) -> anyhow::Result<()> {
    use rosetta::session::evaluate::{self as ev, EvalRequest};
    let model = rosetta::session::Session::open(&args.session)?.config.model;
    if args.write.iter().any(|p| *p != ExportPart::Run) {
        anyhow::bail!(
            "{}: `{model}` is a lexical baseline: it has no term vectors or embeddings to \
             export; `--write run` exports its ad-hoc run",
            args.session.display()
        );
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let path = args.out.join("adhoc.run");
    let req = EvalRequest {
        session: args.session.clone(),
        task: ev::Task::Adhoc,
        split: ev::Split::Test,
        test: None,
        adhoc: None,
        dictionary: None,
        bli_seed: ev::DEFAULT_BLI_SEED,
        run: Some(path.clone()),
        depth: args
            .depth
            .map_or(rosetta::session::retrieval::RUN_DEPTH, |d| d as usize),
        fuse: None,
        fuse_seed: 0,
        fuse_run: None,
        fuse_options: ev::FuseOptions::default(),
        rerank: None,
        rerank_depth: None,
        device: args.device,
        max_encode_s: None,
    };
    let report = ev::evaluate(&req)?;
    println!("{}", path.display());
    if let Some(q) = report.adhoc.and_then(|a| a.qrels) {
        println!("{}", q.display());
    }
    Ok(())
}

fn write_npy(path: &Path, a: &ndarray::Array2<f32>) -> anyhow::Result<()> {
    use ndarray_npy::WriteNpyExt;
    let mut bytes = Vec::new();
    a.write_npy(&mut bytes)
        .with_context(|| format!("{}: cannot encode", path.display()))?;
    rosetta::util::write_atomic(path, &bytes)?;
    Ok(())
}

/// Embeddings (.npy, with their ids in .ids.txt) of the workspace's test
/// split and ad-hoc collection when `embeddings`, and the ad-hoc TREC run
/// at depth `run` when given.
fn export_workspace(
    l: &Loaded,
    out: &Path,
    embeddings: bool,
    run: Option<usize>,
) -> anyhow::Result<Vec<PathBuf>> {
    use rosetta::session::retrieval::{
        adhoc_reranked, encode_adhoc, encode_split, run_from_embeddings,
    };
    let ws = rosetta::corpus::Workspace::load_with_text(
        &l.session.config.workspace,
        l.session.config.text.as_ref(),
    )?;
    let prepared = rosetta::corpus::Prepared::load_or_build(&ws)?;
    l.session
        .config
        .check_workspace_hash(&l.session.dir, &prepared.hash)?;
    rosetta::session::check_same_terms(&l.session.dir, &l.vocabs, &prepared.vocabs)?;
    let mut written = Vec::new();
    let test = &prepared.test;
    let sides = [
        (Side::Source, &test.src, &prepared.source_lang),
        (Side::Target, &test.tgt, &prepared.target_lang),
    ];
    for (side, m, lang) in sides.into_iter().filter(|_| embeddings) {
        let p = lang_file(out, "test", lang, "npy")?;
        let all: Vec<usize> = (0..m.n_rows()).collect();
        write_npy(
            &p,
            &encode_split(l.model.as_ref(), test, side, &prepared.vocabs, &all)?,
        )?;
        written.push(p);
    }
    let a = &prepared.adhoc;
    let (docs, queries) = encode_adhoc(l.model.as_ref(), a)?;
    let collection = [
        ("docs", &prepared.target_lang, &docs, &a.doc_ids),
        ("queries", &prepared.source_lang, &queries, &a.query_ids),
    ];
    for (stem, lang, emb, ids) in collection.into_iter().filter(|_| embeddings) {
        let p = lang_file(out, stem, lang, "npy")?;
        write_npy(&p, emb)?;
        let idp = lang_file(out, stem, lang, "ids.txt")?;
        let mut text = ids.join("\n");
        text.push('\n');
        rosetta::util::write_atomic(&idp, text.as_bytes())?;
        written.extend([p, idp]);
    }
    let Some(depth) = run else {
        return Ok(written);
    };
    let tag = rosetta::session::evaluate::session_tag(&l.session.dir);
    let run = run_from_embeddings(
        docs,
        &queries,
        &a.doc_ids,
        &a.query_ids,
        depth,
        &tag,
        l.model.similarity(),
    )?;
    // ranked as the session ranks (its `rerank` setting)
    let run = adhoc_reranked(l.model.as_ref(), a, run, l.session.rerank()?)?;
    let p = out.join("adhoc.run");
    // a derived task's judgements live in no file: written beside the run
    let qrels = rosetta::eval::trec::write_run(&run, &p, &a.qrels, a.derived)?;
    written.push(p);
    written.extend(qrels);
    Ok(written)
}

/// Which evaluation to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Task {
    /// Parallel sentence retrieval (MRR, P@1) on a split.
    Sentence,
    /// Ad-hoc retrieval on the workspace's collection (trec_eval figures).
    Adhoc,
    /// Bilingual lexicon induction on the workspace's dictionary (P@1/5/10, cosine and CSLS).
    Bli,
    /// Every task the workspace has data for.
    All,
}

/// Which parallel split sentence retrieval uses.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Split {
    /// The validation split.
    Valid,
    /// The test split.
    Test,
}

/// How `eval --fuse` translates queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FuseTranslate {
    /// Word by word through the workspace dictionary.
    Dict,
    /// Whole queries through Apertium.
    Mt,
}

/// Score normalisation of `eval --fuse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FuseNorm {
    /// (s − min) / (max − min).
    Minmax,
    /// s / max (seed 004).
    Max,
}

/// Arguments of `rosetta eval`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("tuned").multiple(true)))]
pub struct EvalArgs {
    /// Trained session folder.
    #[arg(long, value_name = "DIR")]
    pub session: PathBuf,
    /// Task(s) to evaluate.
    #[arg(long, value_enum, default_value = "all")]
    pub task: Task,
    /// Split for sentence retrieval.
    #[arg(long, value_enum, default_value = "test")]
    pub split: Split,
    /// Sentence retrieval on other parallel data instead of the workspace's
    /// split: two line-aligned files (SRC TGT) or one TSV of pairs.
    #[arg(long, value_name = "FILE", num_args = 1..=2)]
    pub test: Option<Vec<PathBuf>>,
    /// Ad-hoc retrieval on another collection instead of the workspace's:
    /// documents (TSV or JSONL), queries (TSV or TREC topics) and qrels.
    #[arg(long, value_names = ["DOCS", "QUERIES", "QRELS"], num_args = 3)]
    pub adhoc: Option<Vec<PathBuf>>,
    /// Lexicon induction against another dictionary (TSV, space-separated
    /// or dictd) instead of the workspace's, read whole as a test dictionary.
    #[arg(long, value_name = "FILE")]
    pub dictionary: Option<PathBuf>,
    /// Seed of the split of the workspace dictionary by source word (MUSE's
    /// protocol): lexicon induction is scored on the test part, a fifth of
    /// the source words, recorded in the session as bli-split-SEED.json.
    #[arg(long, value_name = "N", conflicts_with = "dictionary")]
    pub bli_seed: Option<u64>,
    /// Write the ad-hoc run (TREC format, --depth per query) to this file;
    /// for a task derived from parallel data also its qrels, to FILE.qrels.
    #[arg(long, value_name = "FILE")]
    pub run: Option<PathBuf>,
    /// Documents ranked per query in the ad-hoc run, for its figures (MAP as
    /// trec_eval at this depth) and the file: about 40 bytes a line, so the
    /// Bible's 3,108 queries at 1000 take 120 MB; `--depth 100` writes a
    /// tenth and moves no query's AP by more than 1/101.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub depth: u64,
    /// Also score the ad-hoc run fused with BM25 over translated queries:
    /// `bm25:auto` (λ chosen for MAP on a seeded half of the judged
    /// queries), `bm25:λ`, `rrf` or `rrf:K`; `auto` also chooses, on that
    /// half, among BM25 over the queries as translated, expanded by Bo1 and
    /// by RM3, each with and without the model's run on the translated
    /// queries (β tuned with λ). Fused, model and BM25 figures are all on
    /// the other half of the queries.
    #[arg(long, value_name = "FUSION", group = "tuned")]
    pub fuse: Option<rosetta::index::fusion::FusionSpec>,
    /// Rerank each query's --rerank-depth best documents by late
    /// interaction over an encoder's token states (ColBERT's MaxSim): the
    /// score becomes (1−W)·cosine + W·MaxSim. `maxsim:W` reports every
    /// judged query; `maxsim` (or `maxsim:auto`) chooses W from 0, 0.1, …,
    /// 1 for MAP on a seeded half of the judged queries (--fuse-seed) and
    /// reports the other half. With --fuse the reranked run is what is
    /// fused; with --run it is what is written (a tuned W: the held-out
    /// queries only, their qrels to FILE.qrels). Sentence retrieval is
    /// reranked too (each source's best targets), with W as given or as
    /// the ad-hoc task chose it (`--task sentence` alone: maxsim:W). With
    /// a fixed W the reported ad-hoc and sentence figures are the
    /// reranked ones, those before beside them. Without the flag, an
    /// encoder session reranks as its own `rerank` setting says
    /// (`--set recipe=clir` gives maxsim:1); `none` ranks by the cosine
    /// alone whatever the session says.
    #[arg(long, value_name = "maxsim[:W|:auto]|none", group = "tuned")]
    pub rerank: Option<rosetta::session::rerank::RerankSpec>,
    /// Documents reranked per query by --rerank [default: the session's
    /// rerank_depth, else 100].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub rerank_depth: Option<u64>,
    /// Seed of the validation/test split of the queries for --fuse and
    /// for a tuned --rerank weight (the two tune on the same half).
    #[arg(long, default_value_t = 1, requires = "tuned")]
    pub fuse_seed: u64,
    /// With --fuse bm25:λ|bm25:auto, seed 004's Eq. 1: the model's score is
    /// β·n(source query) + (1−β)·n(its translation, encoded by the model's
    /// target side); `auto` chooses β from 0, 0.1, …, 1 together with λ
    /// (which then comes from 0, 0.05, …, 1). Without it only the source
    /// query takes part (β = 1, λ from 0, 0.1, …, 1).
    #[arg(long, value_name = "auto|β", requires = "fuse")]
    pub beta: Option<rosetta::index::fusion::BetaSpec>,
    /// How --fuse translates the queries, for BM25 and for the model's
    /// target side: through the workspace dictionary or Apertium.
    #[arg(long, value_enum, default_value = "dict", requires = "fuse")]
    pub fuse_translate: FuseTranslate,
    /// Pseudo-relevance feedback of --fuse's BM25 queries (Terrier's Bo1,
    /// Anserini's RM3, with their default settings; see `rosetta bm25`).
    #[arg(long, value_enum, default_value = "none", requires = "fuse")]
    pub fuse_expand: crate::cli::bm25::ExpandArg,
    /// Score normalisation of --fuse: min-max, or division by the list's
    /// largest score as seed 004 writes it.
    #[arg(long, value_enum, default_value = "minmax", requires = "fuse")]
    pub fuse_norm: FuseNorm,
    /// Write --fuse's fused run on the held-out queries to FILE (TREC
    /// format), its BM25 partner on the same queries to FILE.bm25 and those
    /// queries' qrels to FILE.qrels, for `rosetta compare FILE.bm25 FILE
    /// --qrels FILE.qrels`.
    #[arg(long, value_name = "FILE", requires = "fuse")]
    pub fuse_run: Option<PathBuf>,
    /// Device to load the model on: auto (CUDA GPU 0 if this build has CUDA and one answers, else
    /// CPU; the default, as for `train`), cpu, cuda or cuda:<i>.
    #[arg(long, default_value = "auto")]
    pub device: rosetta::models::DeviceSpec,
    /// Encode an encoder's ad-hoc collection in the foreground (with
    /// progress) when the session has no index of it yet and that would
    /// take more than 10 s; without it such an evaluation is refused with
    /// the estimate and the `rosetta index build` command.
    #[arg(long)]
    pub build: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `rosetta eval`: the engine's [`evaluate`](rosetta::session::evaluate::evaluate), printed.
pub fn eval(args: EvalArgs) -> anyhow::Result<()> {
    use rosetta::session::evaluate::{self as ev, EvalRequest};
    if args.bli_seed.is_some() && !matches!(args.task, Task::Bli | Task::All) {
        anyhow::bail!("--bli-seed applies to lexicon induction: --task bli or all");
    }
    let req = EvalRequest {
        session: args.session.clone(),
        task: match args.task {
            Task::Sentence => ev::Task::Sentence,
            Task::Adhoc => ev::Task::Adhoc,
            Task::Bli => ev::Task::Bli,
            Task::All => ev::Task::All,
        },
        split: match args.split {
            Split::Valid => ev::Split::Valid,
            Split::Test => ev::Split::Test,
        },
        test: args.test,
        adhoc: args.adhoc,
        dictionary: args.dictionary,
        bli_seed: args.bli_seed.unwrap_or(ev::DEFAULT_BLI_SEED),
        run: args.run,
        depth: args.depth as usize,
        fuse: args.fuse,
        fuse_seed: args.fuse_seed,
        fuse_run: args.fuse_run,
        rerank: args.rerank,
        rerank_depth: args.rerank_depth.map(|d| d as usize),
        fuse_options: ev::FuseOptions {
            beta: args.beta.unwrap_or_default(),
            translation: match args.fuse_translate {
                FuseTranslate::Dict => rosetta::index::adhoc::Translation::Dict,
                FuseTranslate::Mt => rosetta::index::adhoc::Translation::Mt,
            },
            expansion: args.fuse_expand.name().parse()?,
            norm: match args.fuse_norm {
                FuseNorm::Minmax => rosetta::index::fusion::Norm::MinMax,
                FuseNorm::Max => rosetta::index::fusion::Norm::Max,
            },
        },
        device: args.device,
        max_encode_s: super::index::encode_limit(args.build)?,
    };
    let report = {
        let p = super::progress::Progress::start(format!("evaluating {}", args.session.display()));
        ev::evaluate_with(&req, &|f, line| p.update(f, line))?
    };
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    if args.json {
        println!("{}", serde_json::to_value(&report)?);
    } else {
        println!("{} ({})", report.session.display(), report.model);
        for t in report.lines() {
            println!("  {t}");
        }
    }
    Ok(())
}

/// Arguments of `rosetta search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Session folder (a trained model or a BM25 baseline).
    #[arg(long, value_name = "DIR", required_unless_present = "history")]
    pub session: Option<PathBuf>,
    /// Encode the collection in the foreground (with progress) when the
    /// session has no index yet and that would take more than 10 s;
    /// without it such a search is refused with the estimate and the
    /// `rosetta index build` command.
    #[arg(long)]
    pub build: bool,
    /// Query text in the source language.
    #[arg(long, required_unless_present_any = ["show", "history"])]
    pub query: Option<String>,
    /// Number of documents to show.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Blend in BM25 over the query's dictionary translation: `bm25:λ`
    /// (min-max normalised, λ·BM25 + (1−λ)·model, λ in 0..1), `rrf` or
    /// `rrf:K` (reciprocal rank fusion, K = 60 by default), or `none`.
    #[arg(long, value_name = "FUSION", default_value = "none")]
    pub fuse: rosetta::index::Fusion,
    /// An encoder: rerank the model's --rerank-depth best documents by
    /// (1−W)·cosine + W·MaxSim over its token states, as `eval --rerank
    /// maxsim:W` scores them (before any --fuse). `eval --rerank maxsim`
    /// chooses a W on judged queries. Without the flag the session's own
    /// `rerank` setting is used (`--set recipe=clir` gives maxsim:1);
    /// `none` ranks by the cosine alone.
    #[arg(long, value_name = "maxsim:W|none", conflicts_with_all = ["show", "history"])]
    pub rerank: Option<rosetta::session::rerank::RerankSpec>,
    /// Documents reranked by --rerank [default: the session's
    /// rerank_depth, else 100].
    #[arg(long, value_name = "N", conflicts_with_all = ["show", "history"], value_parser = clap::value_parser!(u64).range(1..))]
    pub rerank_depth: Option<u64>,
    /// Print each result's whole text (never shortened) and its aligned
    /// source-language text where the collection has one (the other side of
    /// the verse pair for a task derived from parallel data).
    #[arg(long)]
    pub full: bool,
    /// Print one whole document instead of searching: its id (`train:12`)
    /// or its label (`"John 1:8"`), with its aligned source-language text.
    #[arg(long, value_name = "ID", conflicts_with_all = ["query", "full", "k", "fuse"])]
    pub show: Option<String>,
    /// Rank a trained model's documents through the session's HNSW graph,
    /// building it and saving it in the session (`hnsw.graph`) when it has
    /// none. Without this flag a session's saved graph is used when it was
    /// built from the same document embeddings (as in the workbench).
    #[arg(long, conflicts_with_all = ["exact", "show"])]
    pub approx: bool,
    /// One exact scan of every document, even when the session has an HNSW
    /// graph.
    #[arg(long, conflicts_with = "show")]
    pub exact: bool,
    /// HNSW links per node (M) of a graph --approx builds.
    #[arg(long, requires = "approx", default_value_t = rosetta::index::HnswParams::default().m)]
    pub hnsw_m: usize,
    /// HNSW efConstruction of a graph --approx builds.
    #[arg(long, requires = "approx", default_value_t = rosetta::index::HnswParams::default().ef_construction)]
    pub ef_construction: usize,
    /// HNSW efSearch (candidates kept while searching; at least the depth of
    /// the ranking) for --approx.
    #[arg(long, requires = "approx", default_value_t = rosetta::index::HnswParams::default().ef_search)]
    pub ef_search: usize,
    /// List the workbench's recorded search queries (oldest first) and exit.
    #[arg(long, conflicts_with_all = ["session", "query", "full", "show", "k", "fuse", "json"])]
    pub history: bool,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Prints a document's label, id, whole text and aligned source text,
/// each text on its own lines after a `lang:` heading.
/// `println!` of text holding workspace or session data (document and
/// query text, names): its terminal control sequences are removed
/// ([`rosetta::util::strip_controls`]), so a document cannot clear the
/// screen or write the clipboard.
macro_rules! say {
    ($($t:tt)*) => {
        println!("{}", rosetta::util::strip_controls(&format!($($t)*)))
    };
}

/// [`say!`] without the newline.
macro_rules! say_part {
    ($($t:tt)*) => {
        print!("{}", rosetta::util::strip_controls(&format!($($t)*)))
    };
}

fn print_document(d: &rosetta::session::search::Document, indent: &str) {
    let label = if d.label == d.docno {
        d.label.clone()
    } else {
        format!("{} ({})", d.label, d.docno)
    };
    say!("{indent}{label}");
    say!("{indent}  {}: {}", d.lang, d.text.replace('\n', " "));
    if let Some(src) = &d.source {
        say!("{indent}  {}: {}", d.source_lang, src.replace('\n', " "));
    }
}

/// `rosetta search`: the query against the workspace's collection (the
/// engine's `Searcher`, as in the workbench's Search screen); with `--show`
/// one whole document; with `--history` the workbench's recorded queries.
pub fn search(args: SearchArgs) -> anyhow::Result<()> {
    use rosetta::session::search::QueryHistory;
    if args.history {
        let path = QueryHistory::default_path();
        for q in QueryHistory::load(&path)?.queries {
            say!("{q}");
        }
        return Ok(());
    }
    if matches!(
        args.rerank,
        Some(rosetta::session::rerank::RerankSpec::MaxSim(None))
    ) {
        anyhow::bail!(
            "--rerank: a search takes MaxSim's weight, maxsim:W (W from 0 to 1) or none; \
             `rosetta eval --rerank maxsim` chooses one on judged queries"
        );
    }
    let session = args
        .session
        .clone()
        .context("--session is required (the session folder to search with)")?;
    use rosetta::session::search::DenseSearch;
    let mode = if args.approx {
        DenseSearch::Approx(rosetta::index::HnswParams {
            m: args.hnsw_m,
            ef_construction: args.ef_construction,
            ef_search: args.ef_search,
        })
    } else if args.exact {
        DenseSearch::Exact
    } else {
        DenseSearch::Saved
    };
    let s = {
        let p = super::progress::Progress::start(format!("opening {}", session.display()));
        rosetta::session::search::Searcher::open_alone(
            &session,
            mode,
            super::index::encode_limit(args.build)?,
            &|f, l| p.update(f, l),
        )?
    };
    if let Some(name) = &args.show {
        let d = s.document(name, None)?;
        if args.json {
            say!("{}", serde_json::to_value(&d)?);
        } else {
            print_document(&d, "");
        }
        return Ok(());
    }
    let query = args.query.clone().context("--query is required")?;
    // the flags, else the session's own reranking
    let rerank = rosetta::session::rerank::RerankSpec::resolve(
        args.rerank,
        args.rerank_depth.map(|d| d as usize),
        s.rerank(),
    )
    .and_then(|(spec, depth)| match spec {
        rosetta::session::rerank::RerankSpec::MaxSim(Some(weight)) => {
            Some(rosetta::session::rerank::LateRerank { weight, depth })
        }
        _ => None,
    });
    if rerank.is_none() && args.rerank_depth.is_some() {
        return Err(rosetta::session::rerank::depth_without_rerank(&session).into());
    }
    let r = s.search_with(&query, args.k, args.fuse, rerank)?;
    // the whole documents, fetched only when asked for
    let docs = if args.full {
        r.hits
            .iter()
            .map(|h| s.document(&h.docno, Some(&query)))
            .collect::<rosetta::Result<Vec<_>>>()?
    } else {
        Vec::new()
    };
    if args.json {
        let mut v = serde_json::to_value(&r)?;
        v["session"] = serde_json::json!(session);
        v["text"] = serde_json::json!(query);
        v["fusion"] = serde_json::json!(args.fuse.to_string());
        if args.full {
            v["documents"] = serde_json::to_value(&docs)?;
        }
        say!("{v}");
    }
    if let Some(why) = &r.unanswerable {
        // with --json the object above carries the reason too
        anyhow::bail!(
            "no ranking: {why} ({}, {})",
            session.display(),
            s.session.config.model
        );
    }
    if args.json {
        return Ok(());
    }
    let dropped = r.query.dropped_summary();
    say!(
        "{} ({}), {}, {} documents; searched with: {}{}",
        session.display(),
        s.session.config.model,
        args.fuse.label(),
        s.corpus.len(),
        r.query
            .words
            .iter()
            .filter(|w| w.dropped.is_none())
            .map(|w| w.word.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        if dropped.is_empty() {
            String::new()
        } else {
            format!("; dropped: {dropped}")
        }
    );
    if let Some(a) = &r.approximate {
        say!("{a}");
    }
    if let Some(j) = &r.judged {
        let name = if j.label == j.qid {
            j.qid.clone()
        } else {
            format!("{} ({})", j.label, j.qid)
        };
        say!(
            "judged query {name}: RR {:.4}, AP {:.4}, {} relevant",
            j.rr,
            j.ap,
            j.relevant
        );
    }
    for (i, h) in r.hits.iter().enumerate() {
        let mark = match h.relevant {
            Some(true) => "*",
            _ => " ",
        };
        if let Some(d) = docs.get(i) {
            say_part!("{:>3}{mark} {:.4}  ", h.rank, h.score);
            print_document(d, "");
        } else {
            let name = if h.label == h.docno {
                h.docno.clone()
            } else {
                format!("{} ({})", h.label, h.docno)
            };
            let text = h.text.replace('\n', " ");
            let snippet = match text.char_indices().nth(160) {
                Some((at, _)) => format!("{}…", text[..at].trim_end_matches('…')),
                None => text,
            };
            say!("{:>3}{mark} {:.4}  {name}  {snippet}", h.rank, h.score);
        }
        if !h.aligned.is_empty() {
            // an encoder: each query word's best-matched document word
            let a: Vec<String> = h
                .aligned
                .iter()
                .map(|w| format!("{}→{} {:.2}", w.query, w.document, w.similarity))
                .collect();
            say!(
                "       aligned (MaxSim {:.3}): {}",
                h.maxsim.unwrap_or(f64::NAN),
                a.join(", ")
            );
        } else if !h.contributions.is_empty() {
            let mut c: Vec<String> = h
                .contributions
                .iter()
                .map(|(t, v)| format!("{t} {v:+.3}"))
                .collect();
            // what no single word accounts for, when it shows at 3 places
            if let Some(r) = h.rest.filter(|r| r.abs() >= 0.0005) {
                c.push(format!("(together) {r:+.3}"));
            }
            say!("       query terms: {}", c.join(", "));
        }
    }
    // the process ends here: the loaded model (half a gigabyte of tensors,
    // a 250,002-piece tokenizer) is left to the exit rather than freed
    // piece by piece, a tenth of a second of a search
    std::mem::forget(s);
    Ok(())
}
