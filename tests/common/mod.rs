//! Helpers shared by the integration tests.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A private copy of the tiny English→Spanish fixture workspace
/// (`tests/fixtures/corpus/tiny`): jobs write their prepared-data cache
/// next to it, and some tests edit its data.
pub fn tiny_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new("tests/fixtures/corpus/tiny");
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
