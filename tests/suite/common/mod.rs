//! Helpers shared by the integration tests.

pub mod encoder;
pub mod synthetic;

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A private copy of the tiny English→Spanish fixture workspace
/// (`tests/fixtures/corpus/tiny`): jobs write their prepared-data cache
/// next to it, and some tests edit its data.
#[allow(dead_code)] // not every test binary uses every helper
pub fn tiny_workspace() -> tempfile::TempDir {
    fixture_workspace("tiny")
}

/// A private copy of the fixture workspace `tests/fixtures/corpus/NAME`
/// (its files, not its folders).
#[allow(dead_code)] // not every test binary uses every helper
pub fn fixture_workspace(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new("tests/fixtures/corpus").join(name);
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
        }
    }
    dir
}

/// Runs the `rosetta` binary in `cwd` with `args`, stdin closed.
pub fn rosetta_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rosetta"))
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The standard output of a command that must succeed (else a panic
/// showing both streams).
#[allow(dead_code)] // not every test binary uses every helper
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// `rosetta train` of `model` on workspace `ws` into session `dir` (on the
/// CPU, with `more` arguments), run in `cwd`; it must succeed (its
/// standard output is returned).
#[allow(dead_code)]
pub fn train(cwd: &Path, ws: &Path, model: &str, dir: impl AsRef<Path>, more: &[&str]) -> String {
    let dir = dir.as_ref().to_str().unwrap().to_string();
    let mut args = vec![
        "train",
        "--workspace",
        ws.to_str().unwrap(),
        "--model",
        model,
        "--device",
        "cpu",
        "--session",
        &dir,
    ];
    args.extend_from_slice(more);
    ok(&rosetta_in(cwd, &args))
}

/// `rosetta export --session SESSION --out OUT --write WRITE` run in `cwd`
/// (its output, succeeded or not).
#[allow(dead_code)]
pub fn export(cwd: &Path, session: &Path, out: &Path, write: &str) -> Output {
    rosetta_in(
        cwd,
        &[
            "export",
            "--session",
            session.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--write",
            write,
        ],
    )
}

/// A trained session answers `search` with finite scores, has `k` = 3
/// cross-language neighbours of `term`, and evaluates to a finite, positive
/// sentence MRR and a finite ad-hoc MAP (`rosetta eval --task all`).
#[allow(dead_code)] // not every test binary uses every helper
pub fn assert_searchable(cwd: &Path, session: &Path, query: &str, term: &str) {
    let json =
        |out: &Output| -> serde_json::Value { serde_json::from_str(ok(out).trim()).unwrap() };
    let dir = session.to_str().unwrap();
    let s = json(&rosetta_in(
        cwd,
        &["search", "--session", dir, "--query", query, "--json"],
    ));
    let hits = s["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{s}");
    assert!(hits
        .iter()
        .all(|h| h["score"].as_f64().unwrap().is_finite()));
    let n = json(&rosetta_in(
        cwd,
        &[
            "neighbours",
            "--session",
            dir,
            "--term",
            term,
            "--k",
            "3",
            "--json",
        ],
    ));
    assert_eq!(n["cross"].as_array().unwrap().len(), 3, "{n}");
    let e = json(&rosetta_in(
        cwd,
        &["eval", "--session", dir, "--task", "all", "--json"],
    ));
    let mrr = e["sentence"]["MRR"].as_f64().unwrap();
    assert!(mrr.is_finite() && mrr > 0.0, "{e}");
    assert!(e["adhoc"]["MAP"].as_f64().unwrap().is_finite(), "{e}");
}

/// A model's tensors, bit for bit (as f64), sorted by name: two models are
/// the same when these are equal.
#[allow(dead_code)] // not every test binary uses every helper
pub fn model_bits(model: &dyn rosetta::models::Model) -> Vec<(String, Vec<u64>)> {
    let mut out: Vec<(String, Vec<u64>)> = model
        .tensors()
        .unwrap()
        .into_iter()
        .map(|(k, t)| (k, tensor_bits(&t)))
        .collect();
    out.sort();
    out
}

/// A tensor's values, bit for bit (as f64: f32, u8 and i64 convert exactly).
pub fn tensor_bits(t: &candle_core::Tensor) -> Vec<u64> {
    t.flatten_all()
        .unwrap()
        .to_dtype(candle_core::DType::F64)
        .unwrap()
        .to_vec1::<f64>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// The records of a session's `metrics.jsonl`, parsed.
#[allow(dead_code)] // not every test binary uses every helper
pub fn metrics_records(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every tensor of a checkpoint file as the bits of its values (as f64),
/// by name: two checkpoints are the same run's when these are equal.
#[allow(dead_code)] // not every test binary uses every helper
pub fn bits_of(path: &Path) -> std::collections::BTreeMap<String, Vec<u64>> {
    use candle_core::{DType, Device};
    let ck = rosetta::session::checkpoint::Checkpoint::read(path, &Device::Cpu).unwrap();
    ck.tensors
        .iter()
        .map(|(k, t)| {
            let v = t
                .flatten_all()
                .unwrap()
                .to_dtype(DType::F64)
                .unwrap()
                .to_vec1::<f64>()
                .unwrap();
            (k.clone(), v.iter().map(|x| x.to_bits()).collect())
        })
        .collect()
}

/// `data` with the start its `init` setting (in `kv`) names, read and
/// checked against its vocabularies by the job layer's function, as a job
/// does before training: trainers get `init=` as tensors
/// (`TrainData::init`), never a path. `data` itself when `kv` has no `init`.
#[allow(dead_code)] // not every test binary uses every helper
pub fn with_init<'a>(
    data: &'a rosetta::models::TrainData,
    kv: &[(&str, &str)],
) -> rosetta::Result<std::borrow::Cow<'a, rosetta::models::TrainData>> {
    match kv.iter().find(|(k, _)| *k == "init") {
        None => Ok(std::borrow::Cow::Borrowed(data)),
        Some((_, given)) => {
            let mut d = data.clone();
            d.init = Some(rosetta::session::init::for_job(
                Path::new(given),
                &d.vocabs,
            )?);
            Ok(std::borrow::Cow::Owned(d))
        }
    }
}

/// What a job checks of `kv` for `trainer` before its session is written:
/// the trainer's own check, then the `init` start read and checked by it.
#[allow(dead_code)] // not every test binary uses every helper
pub fn check_with_init(
    trainer: &dyn rosetta::models::Trainer,
    kv: &[(&str, &str)],
) -> rosetta::Result<()> {
    let params = rosetta::models::Params::new(
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    trainer.check(&params)?;
    match kv.iter().find(|(k, _)| *k == "init") {
        Some((_, given)) => {
            trainer.check_init(&params, &rosetta::session::init::read(Path::new(given))?)
        }
        None => Ok(()),
    }
}

/// Writes `st` as session `dir`'s `status.json`, as a fixture: a state a
/// job's life may never reach (a job only changes it through
/// `rosetta::session::JobLife`), in the file's format.
pub fn write_status(dir: &Path, st: &rosetta::session::Status) {
    let mut bytes = serde_json::to_vec_pretty(st).unwrap();
    bytes.push(b'\n');
    std::fs::write(dir.join(rosetta::session::STATUS_FILE), bytes).unwrap();
}
