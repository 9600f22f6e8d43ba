//! Commands that use a trained session: `rosetta neighbours`, `rosetta export`,
//! `rosetta eval`, `rosetta search`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use rosetta::models::Side;
use rosetta::session::search::{marked_neighbours, TermTranslations};
use rosetta::session::Loaded;
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
    /// Device to load the model on (auto, cpu, cuda, cuda:<i>).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `rosetta neighbours`: the engine's [`marked_neighbours`], as the
/// workbench's Neighbours screen shows them.
pub fn neighbours(args: NeighboursArgs) -> anyhow::Result<()> {
    let (device, _) = select_device(&args.device)?;
    let l = Loaded::open(&args.session, &device)?;
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
        dict.as_ref().map(|(f, r)| (f, r)),
    )?;
    if args.json {
        let mut v = serde_json::to_value(&n)?;
        v["side"] = serde_json::to_value(side)?;
        println!("{v}");
        return Ok(());
    }
    let (lang, other) = (
        l.vocabs.side(side).lang.clone(),
        l.vocabs.side(side.other()).lang.clone(),
    );
    println!(
        "{} ({lang} term `{}`), {}:",
        n.word,
        n.term,
        if n.csls { "CSLS" } else { "cosine" }
    );
    println!(
        "  {other:<24} {:>7}     {lang:<24} {:>7}",
        "score", "cosine"
    );
    for i in 0..n.cross.len().max(n.own.len()) {
        let c = n
            .cross
            .get(i)
            .map(|x| {
                let mark = if x.gold { "✓" } else { " " };
                format!("{:<24} {:>7.4} {mark}", x.term, x.score)
            })
            .unwrap_or_else(|| " ".repeat(34));
        let s = n
            .own
            .get(i)
            .map(|x| format!("{:<24} {:>7.4}", x.term, x.cosine))
            .unwrap_or_default();
        println!("  {c}   {}", s.trim_end());
    }
    match &n.translations {
        None => println!("(the workspace has no dictionary: translations not marked)"),
        Some(t) if t.is_empty() => {
            println!("✓ dictionary translation (none listed for `{}`)", n.term)
        }
        Some(t) => println!(
            "✓ dictionary translation ({} listed for `{}`: {})",
            t.len(),
            n.term,
            t.join(", ")
        ),
    }
    Ok(())
}

/// The session's workspace dictionary analysed as the session's texts, or
/// `None` when the workspace names no dictionary.
fn workspace_dictionary(
    l: &Loaded,
) -> anyhow::Result<Option<(TermTranslations, TermTranslations)>> {
    let ws = rosetta::corpus::Workspace::load(&l.session.config.workspace)?;
    if ws.dictionary.is_none() {
        return Ok(None);
    }
    let d = rosetta::models::bm25::analysed_dictionary(
        &ws,
        l.analyzer(Side::Source),
        l.analyzer(Side::Target),
    )?;
    Ok(Some(d))
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
    /// Device to load the model on (auto, cpu, cuda, cuda:<i>).
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// Writes term vectors in word2vec text format (`N D` header, then `term v1 .. vD`).
pub fn write_vec(
    path: &Path,
    vocab: &rosetta::text::Vocabulary,
    v: &ndarray::Array2<f32>,
) -> anyhow::Result<()> {
    let mut s = String::with_capacity(v.len() * 10);
    writeln!(s, "{} {}", v.nrows(), v.ncols())?;
    for (i, row) in v.outer_iter().enumerate() {
        s.push_str(vocab.term(i as u32));
        for x in row {
            write!(s, " {x}")?;
        }
        s.push('\n');
    }
    rosetta::util::write_atomic(path, s.as_bytes())?;
    Ok(())
}

/// `rosetta export`.
pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let (device, _) = select_device(&args.device)?;
    let l = Loaded::open(&args.session, &device)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("{}: cannot create", args.out.display()))?;
    let mut written = Vec::new();
    for side in [Side::Source, Side::Target] {
        let vocab = l.vocabs.side(side);
        let tv = l.term_vectors(side)?;
        let name = format!("terms.{}.vec", vocab.lang);
        let path = args.out.join(&name);
        write_vec(&path, vocab, tv)?;
        written.push(path);
    }
    match export_workspace(&l, &args.out) {
        Ok(more) => written.extend(more),
        Err(e) => eprintln!("warning: only term vectors exported: {e:#}"),
    }
    for p in written {
        println!("{}", p.display());
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
/// split and ad-hoc collection, and the ad-hoc TREC run.
fn export_workspace(l: &Loaded, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use rosetta::session::retrieval::{encode_adhoc, run_from_embeddings, RUN_DEPTH};
    let ws = rosetta::corpus::Workspace::load(&l.session.config.workspace)?;
    let prepared = rosetta::corpus::Prepared::load_or_build(&ws)?;
    l.session
        .config
        .check_workspace_hash(&l.session.dir, &prepared.hash)?;
    let mut written = Vec::new();
    let test = &prepared.test;
    for (side, m, lang) in [
        (Side::Source, &test.src, &prepared.source_lang),
        (Side::Target, &test.tgt, &prepared.target_lang),
    ] {
        let p = out.join(format!("test.{lang}.npy"));
        write_npy(&p, &l.model.encode(side, m)?)?;
        written.push(p);
    }
    let a = &prepared.adhoc;
    let (docs, queries) = encode_adhoc(l.model.as_ref(), a)?;
    for (name, emb, ids) in [
        (format!("docs.{}", prepared.target_lang), &docs, &a.doc_ids),
        (
            format!("queries.{}", prepared.source_lang),
            &queries,
            &a.query_ids,
        ),
    ] {
        let p = out.join(format!("{name}.npy"));
        write_npy(&p, emb)?;
        let idp = out.join(format!("{name}.ids.txt"));
        let mut text = ids.join("\n");
        text.push('\n');
        rosetta::util::write_atomic(&idp, text.as_bytes())?;
        written.extend([p, idp]);
    }
    let tag = session_tag(&l.session.dir);
    let run = run_from_embeddings(docs, &queries, &a.doc_ids, &a.query_ids, RUN_DEPTH, &tag)?;
    let p = out.join("adhoc.run");
    run.write(&p)?;
    written.push(p);
    Ok(written)
}

/// A loaded session with its workspace's prepared data, refused when the
/// workspace changed since the session was made.
fn with_workspace(
    dir: &Path,
    device: &str,
) -> anyhow::Result<(
    Loaded,
    rosetta::corpus::Workspace,
    rosetta::corpus::Prepared,
)> {
    let (device, _) = select_device(device)?;
    let l = Loaded::open(dir, &device)?;
    let ws = rosetta::corpus::Workspace::load(&l.session.config.workspace)?;
    let prepared = rosetta::corpus::Prepared::load_or_build(&ws)?;
    l.session.config.check_workspace_hash(dir, &prepared.hash)?;
    Ok((l, ws, prepared))
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

/// Arguments of `rosetta eval`.
#[derive(Debug, Args)]
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
    /// or dictd) instead of the workspace's.
    #[arg(long, value_name = "FILE")]
    pub dictionary: Option<PathBuf>,
    /// Write the ad-hoc run (TREC format, 1000 per query) to this file.
    #[arg(long, value_name = "FILE")]
    pub run: Option<PathBuf>,
    /// Also score the ad-hoc run fused with BM25 over dictionary-translated
    /// queries: `bm25:auto` (λ chosen for MAP on a seeded half of the judged
    /// queries), `bm25:λ`, `rrf` or `rrf:K`. Fused, model and BM25 figures
    /// are all on the other half of the queries.
    #[arg(long, value_name = "FUSION")]
    pub fuse: Option<rosetta::index::fusion::FusionSpec>,
    /// Seed of the validation/test split of the queries for --fuse.
    #[arg(long, default_value_t = 1, requires = "fuse")]
    pub fuse_seed: u64,
    /// Device to load the model on (auto, cpu, cuda, cuda:<i>).
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `rosetta eval`.
pub fn eval(args: EvalArgs) -> anyhow::Result<()> {
    use rosetta::session::retrieval::{adhoc_run, bli, run_from_embeddings, RUN_DEPTH};
    check_task_flags(&args)?;
    if rosetta::session::Session::open(&args.session)?.is_lexical() {
        return eval_lexical(args);
    }
    let (l, ws, prepared) = with_workspace(&args.session, &args.device)?;
    let want = |t: Task| args.task == t || args.task == Task::All;
    let mut out = serde_json::Map::new();
    out.insert("session".into(), serde_json::json!(args.session));
    out.insert("model".into(), serde_json::json!(l.session.config.model));
    let mut text = Vec::new();
    if let (true, Some(files)) = (want(Task::Sentence), &args.test) {
        let pairs = read_pairs(files)?;
        let rows = pairs.usable();
        let side = |s: Side, texts: &[String]| {
            let t: Vec<&str> = rows.iter().map(|&i| texts[i].as_str()).collect();
            l.encode_texts(s, &t)
        };
        let (s, t) = (
            side(Side::Source, &pairs.source)?,
            side(Side::Target, &pairs.target)?,
        );
        let zero = |m: &ndarray::Array2<f32>, i: usize| m.row(i).iter().all(|x| *x == 0.0);
        let without_terms = (0..rows.len())
            .filter(|&i| zero(&s, i) || zero(&t, i))
            .count();
        let sc = rosetta::eval::sentence::sentence_retrieval(&s, &t);
        let name = files_label(files);
        text.push(format!(
            "sentence retrieval ({name}, {} pairs, {without_terms} with no known term on a side): MRR {:.4}  P@1 {:.4}",
            sc.queries, sc.mrr, sc.p1
        ));
        let mut v = serde_json::to_value(sc)?;
        v["split"] = serde_json::json!(name);
        v["pairs_without_known_terms"] = serde_json::json!(without_terms);
        out.insert("sentence".into(), v);
    } else if want(Task::Sentence) {
        let (name, split) = match args.split {
            Split::Valid => ("valid", &prepared.valid),
            Split::Test => ("test", &prepared.test),
        };
        let rows = split.nonblank();
        let without_terms = rows.len() - split.trainable().len();
        if rows.is_empty() {
            if args.task == Task::Sentence {
                anyhow::bail!("the {name} split has no usable pairs");
            }
        } else {
            let s = l
                .model
                .encode(Side::Source, &split.src.select_rows(&rows))?;
            let t = l
                .model
                .encode(Side::Target, &split.tgt.select_rows(&rows))?;
            let sc = rosetta::eval::sentence::sentence_retrieval(&s, &t);
            text.push(format!(
                "sentence retrieval ({name}, {} pairs, {without_terms} with no known term on a side): MRR {:.4}  P@1 {:.4}",
                sc.queries, sc.mrr, sc.p1
            ));
            let mut v = serde_json::to_value(sc)?;
            v["split"] = serde_json::json!(name);
            v["pairs_without_known_terms"] = serde_json::json!(without_terms);
            out.insert("sentence".into(), v);
        }
    }
    if want(Task::Adhoc) {
        let tag = session_tag(&l.session.dir);
        let other = args.adhoc.as_deref().map(other_task).transpose()?;
        let (run, qrels, derived, docs) = match &other {
            Some(task) => {
                let d = l.encode_texts(Side::Target, &task.docs.texts)?;
                let q = l.encode_texts(Side::Source, &task.queries.texts)?;
                let run =
                    run_from_embeddings(d, &q, &task.docs.ids, &task.queries.ids, RUN_DEPTH, &tag)?;
                (run, &task.qrels, false, task.docs.len())
            }
            None => {
                let a = &prepared.adhoc;
                if a.derived && args.task == Task::Adhoc {
                    eprintln!("note: the workspace has no [adhoc] collection; using the task derived from its parallel data");
                }
                let run = adhoc_run(l.model.as_ref(), a, RUN_DEPTH, &tag)?;
                (run, &a.qrels, a.derived, a.doc_ids.len())
            }
        };
        let e = rosetta::eval::evaluate_rankings(&run.results, qrels);
        let mut v = adhoc_report(&e, derived, docs, &mut text)?;
        if let Some(p) = &args.run {
            run.write(p)?;
            v["run"] = serde_json::json!(p);
            text.push(format!("run written to {}", p.display()));
        }
        out.insert("adhoc".into(), v);
        if let Some(spec) = args.fuse {
            let task = match other {
                Some(t) => t,
                None => ws.adhoc()?,
            };
            let f = fused_adhoc(&ws, &task, &run, spec, args.fuse_seed)?;
            text.push(format!(
                "fused with BM25+dict ({}{}; {} held-out queries): MAP {:.4} (model {:.4}, BM25 {:.4})  MRR {:.4} (model {:.4}, BM25 {:.4})  nDCG@10 {:.4} (model {:.4}, BM25 {:.4})",
                f.fusion,
                f.tuning
                    .as_ref()
                    .map(|t| format!(", λ chosen on {} queries", t.queries))
                    .unwrap_or_default(),
                f.queries,
                f.fused.map,
                f.model.map,
                f.bm25.map,
                f.fused.mrr,
                f.model.mrr,
                f.bm25.mrr,
                f.fused.ndcg10,
                f.model.ndcg10,
                f.bm25.ndcg10
            ));
            out.insert("adhoc_fused".into(), serde_json::to_value(f)?);
        }
    } else if args.fuse.is_some() {
        anyhow::bail!("--fuse applies to the ad-hoc task (--task adhoc or all)");
    }
    if want(Task::Bli) {
        match args.dictionary.as_ref().or(ws.dictionary.as_ref()) {
            None if args.task == Task::Bli => anyhow::bail!(
                "{}: the workspace has no [dictionary] (give one with --dictionary)",
                ws.path.display()
            ),
            None => {}
            Some(path) => {
                let dict = rosetta::corpus::Dictionary::read(path)?;
                let analysed = dict.analysed(l.analyzer(Side::Source), l.analyzer(Side::Target));
                let cos = bli(&l, &analysed, false)?;
                let csls = bli(&l, &analysed, true)?;
                text.push(format!(
                    "lexicon induction ({} of {} entries): cosine P@1 {:.4} P@5 {:.4} P@10 {:.4}; CSLS P@1 {:.4} P@5 {:.4} P@10 {:.4}",
                    cos.queries, cos.entries, cos.p1, cos.p5, cos.p10, csls.p1, csls.p5, csls.p10
                ));
                out.insert(
                    "bli".into(),
                    serde_json::json!({ "cosine": cos, "csls": csls }),
                );
            }
        }
    }
    if args.json {
        println!("{}", serde_json::Value::Object(out));
    } else {
        println!("{} ({})", args.session.display(), l.session.config.model);
        for t in text {
            println!("  {t}");
        }
    }
    Ok(())
}

/// The model's ad-hoc run fused with BM25 over dictionary-translated
/// queries, scored on held-out queries (see `rosetta::index::fusion::evaluate_fusion`).
fn fused_adhoc(
    ws: &rosetta::corpus::Workspace,
    task: &rosetta::corpus::AdhocTask,
    run: &rosetta::eval::Run,
    spec: rosetta::index::fusion::FusionSpec,
    seed: u64,
) -> anyhow::Result<rosetta::index::fusion::FusedEvaluation> {
    use rosetta::index::adhoc::{bm25_run, Bm25RunConfig, Translation};
    let cfg = Bm25RunConfig {
        translation: Translation::Dict,
        ..Default::default()
    };
    let bm = bm25_run(ws, task, &cfg)?;
    Ok(rosetta::index::fusion::evaluate_fusion(
        run,
        &bm.run,
        &task.qrels,
        spec,
        seed,
    ))
}

/// The ad-hoc figures as a text line (pushed on `text`) and as JSON.
fn adhoc_report(
    e: &rosetta::eval::metrics::Evaluation,
    derived: bool,
    docs: usize,
    text: &mut Vec<String>,
) -> anyhow::Result<serde_json::Value> {
    text.push(format!(
        "ad-hoc retrieval ({}{} queries, {docs} documents): MRR {:.4}  MAP {:.4}  P@1 {:.4}  nDCG@10 {:.4}  R@100 {:.4}",
        if derived { "derived, " } else { "" },
        e.queries,
        e.mean.mrr,
        e.mean.map,
        e.mean.p1,
        e.mean.ndcg10,
        e.mean.r100
    ));
    let mut v = serde_json::to_value(e.mean)?;
    v["queries"] = serde_json::json!(e.queries);
    v["derived"] = serde_json::json!(derived);
    Ok(v)
}

/// Refuses a data flag whose task is not evaluated (it would do nothing).
fn check_task_flags(args: &EvalArgs) -> anyhow::Result<()> {
    let runs = |t: Task| args.task == t || args.task == Task::All;
    for (given, flag, task, name) in [
        (args.test.is_some(), "--test", Task::Sentence, "sentence"),
        (args.adhoc.is_some(), "--adhoc", Task::Adhoc, "adhoc"),
        (args.dictionary.is_some(), "--dictionary", Task::Bli, "bli"),
    ] {
        if given && !runs(task) {
            anyhow::bail!("{flag} applies to --task {name} (or all)");
        }
    }
    Ok(())
}

/// Parallel text from `--test`: one TSV of pairs, or two aligned files.
fn read_pairs(files: &[PathBuf]) -> anyhow::Result<rosetta::corpus::ParallelText> {
    use rosetta::corpus::ParallelText;
    let pairs = match files {
        [tsv] => ParallelText::read_tsv(tsv)?,
        [src, tgt] => ParallelText::read_files(src, tgt)?,
        _ => anyhow::bail!("--test takes one TSV of pairs or two aligned files"),
    };
    if pairs.usable().is_empty() {
        anyhow::bail!("{}: no pair with text on both sides", files_label(files));
    }
    Ok(pairs)
}

/// The ad-hoc task of `--adhoc DOCS QUERIES QRELS`.
fn other_task(files: &[PathBuf]) -> anyhow::Result<rosetta::corpus::AdhocTask> {
    match files {
        [docs, queries, qrels] => Ok(rosetta::corpus::AdhocTask::from_files(
            docs, queries, None, qrels,
        )?),
        _ => anyhow::bail!("--adhoc takes DOCS QUERIES QRELS"),
    }
}

/// Files named as one label (`a.en+a.hi`).
fn files_label(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join("+")
}

/// The session's name, for run tags.
fn session_tag(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "rosetta".into())
}

/// `rosetta eval` of a lexical baseline session: the same tasks and output
/// as a trained model's, lexicon induction excepted (a BM25 baseline has no
/// term space; its dictionary is its translation).
fn eval_lexical(args: EvalArgs) -> anyhow::Result<()> {
    use rosetta::models::bm25::Bm25Baseline;
    use rosetta::session::retrieval::RUN_DEPTH;
    let session = rosetta::session::Session::open(&args.session)?;
    let ws = rosetta::corpus::Workspace::load(&session.config.workspace)?;
    session
        .config
        .check_workspace_hash(&args.session, &ws.content_hash()?)?;
    let params = rosetta::models::Params::new(session.config.run_params());
    let baseline = Bm25Baseline::new(&session.config.model, &params)?;
    if args.fuse.is_some() {
        anyhow::bail!(
            "{}: --fuse blends BM25 into a trained model; `{}` is a BM25 baseline itself",
            args.session.display(),
            session.config.model
        );
    }
    if args.task == Task::Bli || args.dictionary.is_some() {
        anyhow::bail!(
            "{}: lexicon induction does not apply to the lexical baseline `{}` (it has no term space)",
            args.session.display(),
            session.config.model
        );
    }
    let want = |t: Task| args.task == t || args.task == Task::All;
    let mut out = serde_json::Map::new();
    out.insert("session".into(), serde_json::json!(args.session));
    out.insert("model".into(), serde_json::json!(session.config.model));
    let mut text = Vec::new();
    if want(Task::Sentence) {
        let (name, pairs) = match &args.test {
            Some(files) => (files_label(files), read_pairs(files)?),
            None => {
                let name = match args.split {
                    Split::Valid => "valid",
                    Split::Test => "test",
                };
                let split = ws.splits()?.get(name).cloned().ok_or_else(|| {
                    anyhow::anyhow!("{}: the workspace has no {name} split", ws.path.display())
                })?;
                (name.to_string(), split)
            }
        };
        let sc = baseline.sentence_retrieval(&ws, &pairs)?;
        text.push(format!(
            "sentence retrieval ({name}, {} pairs): MRR {:.4}  P@1 {:.4}",
            sc.queries, sc.mrr, sc.p1
        ));
        let mut v = serde_json::to_value(sc)?;
        v["split"] = serde_json::json!(name);
        out.insert("sentence".into(), v);
    }
    if want(Task::Adhoc) {
        let task = match &args.adhoc {
            Some(files) => other_task(files)?,
            None => ws.adhoc()?,
        };
        let mut r = baseline.adhoc_run(&ws, &task, RUN_DEPTH)?;
        r.run.tag = session_tag(&args.session);
        let e = rosetta::eval::evaluate(&r.run, &task.qrels);
        let mut v = adhoc_report(&e, task.derived, task.docs.len(), &mut text)?;
        v["query_stats"] = serde_json::to_value(&r.stats)?;
        if let Some(p) = &args.run {
            r.run.write(p)?;
            v["run"] = serde_json::json!(p);
            text.push(format!("run written to {}", p.display()));
        }
        out.insert("adhoc".into(), v);
    }
    if args.json {
        println!("{}", serde_json::Value::Object(out));
    } else {
        println!("{} ({})", args.session.display(), session.config.model);
        for t in text {
            println!("  {t}");
        }
    }
    Ok(())
}

/// Arguments of `rosetta search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// Session folder (a trained model or a BM25 baseline).
    #[arg(long, value_name = "DIR")]
    pub session: PathBuf,
    /// Query text in the source language.
    #[arg(long)]
    pub query: String,
    /// Number of documents to show.
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// Blend in BM25 over the query's dictionary translation: `bm25:λ`
    /// (min-max normalised, λ·BM25 + (1−λ)·model, λ in 0..1), `rrf` or
    /// `rrf:K` (reciprocal rank fusion, K = 60 by default), or `none`.
    #[arg(long, value_name = "FUSION", default_value = "none")]
    pub fuse: rosetta::index::Fusion,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `rosetta search`: the query against the workspace's collection (the
/// engine's `Searcher`, as in the workbench's Search screen).
pub fn search(args: SearchArgs) -> anyhow::Result<()> {
    let s = rosetta::session::search::Searcher::open_alone(&args.session, &|_, _| {})?;
    let r = s.search(&args.query, args.k, args.fuse)?;
    if r.hits.is_empty() {
        anyhow::bail!(
            "no document matches: none of the query's words is usable by {} ({})",
            args.session.display(),
            s.session.config.model
        );
    }
    if args.json {
        let mut v = serde_json::to_value(&r)?;
        v["session"] = serde_json::json!(args.session);
        v["query"] = serde_json::json!(args.query);
        v["fusion"] = serde_json::json!(args.fuse.to_string());
        println!("{v}");
        return Ok(());
    }
    println!(
        "{} ({}), {}, {} documents{}",
        args.session.display(),
        s.session.config.model,
        args.fuse.label(),
        s.corpus.len(),
        if r.oov.is_empty() {
            String::new()
        } else {
            format!("; not in the vocabulary: {}", r.oov.join(" "))
        }
    );
    if let Some(j) = &r.judged {
        println!(
            "judged query {}: RR {:.4}, AP {:.4}, {} relevant",
            j.qid, j.rr, j.ap, j.relevant
        );
    }
    for h in &r.hits {
        let mark = match h.relevant {
            Some(true) => "*",
            _ => " ",
        };
        let snippet: String = h.text.chars().take(160).collect();
        println!(
            "{:>3}{mark} {:.4}  {}  {}",
            h.rank,
            h.score,
            h.docno,
            snippet.replace('\n', " ")
        );
        if !h.contributions.is_empty() {
            let c: Vec<String> = h
                .contributions
                .iter()
                .map(|(t, v)| format!("{t} {v:+.3}"))
                .collect();
            println!("       query terms: {}", c.join(", "));
        }
    }
    Ok(())
}
