//! Commands that use a trained session: `rosetta neighbours`, `rosetta export`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use rosetta::models::Side;
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

/// `rosetta neighbours`.
pub fn neighbours(args: NeighboursArgs) -> anyhow::Result<()> {
    let (device, _) = select_device(&args.device)?;
    let l = Loaded::open(&args.session, &device)?;
    let n = l.neighbours(&args.term, args.lang.into(), args.k, args.csls)?;
    if args.json {
        println!("{}", serde_json::to_string(&n)?);
        return Ok(());
    }
    let side: Side = args.lang.into();
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
    println!("  {other:<24} {:>7}   {lang:<24} {:>7}", "score", "cosine");
    for i in 0..n.cross.len().max(n.same.len()) {
        let c = n
            .cross
            .get(i)
            .map(|x| format!("{:<24} {:>7.4}", x.term, x.score))
            .unwrap_or_else(|| " ".repeat(32));
        let s = n
            .same
            .get(i)
            .map(|x| format!("{:<24} {:>7.4}", x.term, x.cosine))
            .unwrap_or_default();
        println!("  {c}   {s}");
    }
    Ok(())
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
    for p in written {
        println!("{}", p.display());
    }
    Ok(())
}
