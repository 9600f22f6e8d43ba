//! `rosetta associations`: the term pairs a trained session's model links
//! that its workspace dictionary lacks, or the dictionary pairs it fails to
//! link (the engine's [`rosetta::session::associations`]).

use std::path::PathBuf;

use clap::Args;

use rosetta::session::associations::{
    session_associations, AssocKind, AssocOptions, AssocSort, DEFAULT_K, DEFAULT_TERMS,
};

/// Arguments of `rosetta associations`.
#[derive(Debug, Args)]
pub struct AssociationsArgs {
    /// Trained session folder (a model with term vectors, not a lexical baseline).
    #[arg(long, value_name = "DIR")]
    pub session: PathBuf,
    /// `new`: each frequent source word's nearest target word where the
    /// dictionary does not list it; `missed`: dictionary headwords none of
    /// whose translations is among their --k nearest target words.
    #[arg(long, value_enum, default_value = "new")]
    pub kind: KindArg,
    /// Rows to print or write after --grep and --sort (0: all).
    #[arg(long, default_value_t = 50)]
    pub top: usize,
    /// Score by CSLS instead of the model's similarity (demotes hub terms).
    #[arg(long)]
    pub csls: bool,
    /// Keep rows where this text occurs in a word, term, nearest word or
    /// dictionary entry (case-insensitive).
    #[arg(long, value_name = "WORD")]
    pub grep: Option<String>,
    /// `sim`: strongest first (new: highest score; missed: worst rank);
    /// `freq`: the source word's training document frequency, highest first.
    #[arg(long, value_enum, default_value = "sim")]
    pub sort: SortArg,
    /// New pairs: how many of the most frequent source words to look up
    /// (0: all) [default: 10000].
    #[arg(long)]
    pub terms: Option<usize>,
    /// Missed pairs: a translation among the k nearest target words counts
    /// as linked [default: 10].
    #[arg(long)]
    pub k: Option<usize>,
    /// New pairs: keep mutual nearest neighbours only.
    #[arg(long)]
    pub mutual: bool,
    /// Write the rows as tab-separated values (header line first) to FILE.
    #[arg(long, value_name = "FILE")]
    pub tsv: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `--kind`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum KindArg {
    /// Pairs the model links that the dictionary lacks.
    New,
    /// Dictionary pairs the model fails to link.
    Missed,
}

/// `--sort`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SortArg {
    /// Strongest finding first.
    Sim,
    /// Source word frequency.
    Freq,
}

/// What the words looked up are of: the vocabulary's words, its n-gram
/// units left out (`data inspect` counts both as terms).
fn words_of_terms(t: &rosetta::session::associations::Associations) -> String {
    if t.source_terms > t.source_words {
        format!(
            " (of its {} words: the vocabulary's {} terms less {} character n-gram units)",
            t.source_words,
            t.source_terms,
            t.source_terms - t.source_words
        )
    } else {
        format!(" (of its {} words)", t.source_words)
    }
}

/// Runs `rosetta associations`.
pub fn associations(args: AssociationsArgs) -> anyhow::Result<()> {
    let kind = match args.kind {
        KindArg::New => AssocKind::New,
        KindArg::Missed => AssocKind::Missed,
    };
    match kind {
        AssocKind::New if args.k.is_some() => {
            anyhow::bail!("--k applies to --kind missed only")
        }
        AssocKind::Missed if args.mutual || args.terms.is_some() => {
            anyhow::bail!("--mutual and --terms apply to --kind new only")
        }
        _ => {}
    }
    if args.k == Some(0) {
        anyhow::bail!("--k must be at least 1");
    }
    let opts = AssocOptions {
        kind,
        csls: args.csls,
        terms: args.terms.unwrap_or(DEFAULT_TERMS),
        k: args.k.unwrap_or(DEFAULT_K),
        mutual: args.mutual,
    };
    let started = std::time::Instant::now();
    let mut t = {
        let _p = super::progress::Progress::start(format!(
            "term associations of {}",
            args.session.display()
        ));
        session_associations(&args.session, &opts)?
    };
    let secs = started.elapsed().as_secs_f64();
    let total = t.rows.len();
    t.sort(match args.sort {
        SortArg::Sim => AssocSort::Sim,
        SortArg::Freq => AssocSort::Freq,
    });
    let grep = args.grep.as_deref().unwrap_or("");
    t.retain_matching(grep);
    let matching = t.rows.len();
    if args.top > 0 {
        t.rows.truncate(args.top);
    }
    if let Some(path) = &args.tsv {
        let n = t.write_tsv(path, "")?;
        eprintln!("wrote {n} rows to {}", path.display());
    }
    if args.json {
        println!("{}", serde_json::to_string(&t)?);
        return Ok(());
    }
    let score = if t.csls { "CSLS" } else { t.similarity.label() };
    let (sl, tl) = (&t.source_lang, &t.target_lang);
    match t.kind {
        AssocKind::New => println!(
            "{total} of the {} most frequent {sl} words{} have a nearest {tl} word ({score}{}) \
             that the dictionary does not list{}; {secs:.1} s",
            t.looked_up,
            words_of_terms(&t),
            if t.mutual_only {
                ", mutual nearest neighbours only"
            } else {
                ""
            },
            filtered(grep, matching),
        ),
        AssocKind::Missed => println!(
            "{total} of {} dictionary headwords (both sides in the vocabulary) have no \
             translation among their {} nearest {tl} words ({score}){}; {secs:.1} s",
            t.looked_up,
            t.k,
            filtered(grep, matching),
        ),
    }
    println!(
        "terms shown as their commonest training word; sorted by {}{}",
        t.sort.name(),
        if matching > t.rows.len() {
            format!(", first {} rows (--top)", t.rows.len())
        } else {
            String::new()
        }
    );
    let w = |s: &str| s.chars().count();
    let sw = t
        .rows
        .iter()
        .map(|r| w(&r.source))
        .max()
        .unwrap_or(0)
        .max(6);
    let tw = t
        .rows
        .iter()
        .map(|r| w(&r.target))
        .max()
        .unwrap_or(0)
        .max(11);
    let pad = |s: &str, n: usize| format!("{s}{}", " ".repeat(n.saturating_sub(w(s))));
    match t.kind {
        AssocKind::New => {
            println!(
                "  {} {} {:>7} {:>6} {:>6}  dictionary has",
                pad(sl, sw),
                pad(tl, tw),
                "score",
                "df",
                "mutual"
            );
            for r in &t.rows {
                println!(
                    "  {} {} {:>7.4} {:>6} {:>6}  {}",
                    pad(&r.source, sw),
                    pad(&r.target, tw),
                    r.score,
                    r.source_df,
                    if r.mutual { "yes" } else { "" },
                    dict_entry(&r.dictionary)
                );
            }
        }
        AssocKind::Missed => {
            let nw = t
                .rows
                .iter()
                .filter_map(|r| r.nearest.as_deref().map(w))
                .max()
                .unwrap_or(0)
                .max(7);
            println!(
                "  {} {} {:>7} {:>6} {} {:>6}",
                pad(sl, sw),
                pad("translation", tw),
                "score",
                "rank",
                pad("nearest", nw),
                "df"
            );
            for r in &t.rows {
                println!(
                    "  {} {} {:>7.4} {:>6} {} {:>6}",
                    pad(&r.source, sw),
                    pad(&r.target, tw),
                    r.score,
                    r.rank,
                    pad(r.nearest.as_deref().unwrap_or(""), nw),
                    r.source_df
                );
            }
        }
    }
    Ok(())
}

fn filtered(grep: &str, matching: usize) -> String {
    if grep.trim().is_empty() {
        String::new()
    } else {
        format!(" ({matching} matching `{}`)", grep.trim())
    }
}

fn dict_entry(d: &[String]) -> String {
    if d.is_empty() {
        "(no entry)".into()
    } else {
        d.join(", ")
    }
}
