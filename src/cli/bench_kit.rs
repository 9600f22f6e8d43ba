//! What both benchmark commands use (`bench.rs`, `bench_encode.rs`): a
//! thread pool of the asked size, a peer script's JSON answer, rounding.

use std::path::Path;

use anyhow::{bail, Context};

/// A rayon pool of `threads` threads (at least 1).
pub(super) fn pool(threads: usize) -> anyhow::Result<rayon::ThreadPool> {
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    Ok(rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?)
}

/// Runs a peer script and parses the JSON object on its last line of
/// output (every peer in `../shared/peers` prints one); a failed run is an
/// error with its standard error.
pub(super) fn peer_json(
    cmd: &mut std::process::Command,
    script: &Path,
) -> anyhow::Result<serde_json::Value> {
    let o = cmd
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !o.status.success() {
        bail!(
            "{} failed ({}): {}",
            script.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let stdout = String::from_utf8_lossy(&o.stdout);
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last)
        .with_context(|| format!("{} printed no JSON last line: {last:?}", script.display()))
}

/// `x` rounded to `places` decimals (for JSON figures).
pub(super) fn round(x: f64, places: i32) -> f64 {
    let p = 10f64.powi(places);
    (x * p).round() / p
}
