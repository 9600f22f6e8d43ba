//! The real [`Backend`]: session folders on disk, jobs started as detached
//! `rosetta train` processes, and the engine for search and neighbours.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::backend::*;
use crate::models::Side;
use crate::{Error, Result};

/// The backend the workbench uses outside tests.
pub struct LocalBackend {
    root: PathBuf,
    exe: PathBuf,
}

impl LocalBackend {
    /// Sessions under `root`; jobs are started with the program `exe`
    /// (normally `std::env::current_exe()`).
    pub fn new(root: impl Into<PathBuf>, exe: impl Into<PathBuf>) -> Self {
        LocalBackend {
            root: root.into(),
            exe: exe.into(),
        }
    }

    /// The sessions root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, session: &str) -> Result<PathBuf> {
        if session.is_empty() || session.contains('/') || session.starts_with('.') {
            return Err(Error::invalid(format!("not a session name: {session:?}")));
        }
        Ok(self.root.join(session))
    }

    fn run_detached(&self, args: &[String]) -> Result<Launched> {
        crate::tui::log::info(&format!(
            "launch: {} {}",
            self.exe.display(),
            args.join(" ")
        ));
        let out = Command::new(&self.exe)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(&self.exe, e))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !out.status.success() {
            let msg = if stderr.is_empty() { stdout } else { stderr };
            return Err(Error::invalid(format!(
                "rosetta {} failed ({}): {msg}",
                args.first().map(String::as_str).unwrap_or(""),
                out.status
            )));
        }
        Ok(Launched {
            session: session_from_output(&stdout).or_else(|| session_from_output(&stderr)),
            message: if stdout.is_empty() { stderr } else { stdout },
        })
    }
}

impl Backend for LocalBackend {
    fn list_sessions(&self) -> Result<Vec<SessionSummary>> {
        scan_sessions(&self.root)
    }

    fn tail_metrics(&self, session: &str, offset: u64) -> Result<MetricsChunk> {
        tail_metrics_file(&self.dir(session)?.join("metrics.jsonl"), offset)
    }

    fn session_spec(&self, session: &str) -> Result<JobSpec> {
        let path = self.dir(session)?.join("config.toml");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        spec_from_config(&text, &path)
    }

    fn launch(&self, spec: &JobSpec) -> Result<Launched> {
        self.run_detached(&spec.train_args(&self.root))
    }

    fn cancel(&self, session: &str) -> Result<()> {
        let dir = self.dir(session)?;
        let status = dir.join("status.json");
        let text = std::fs::read_to_string(&status).map_err(|e| Error::io(&status, e))?;
        let s = parse_status(&text, &status)?;
        if !s.state.is_active() {
            return Err(Error::invalid(format!(
                "{session} is {}, not running",
                s.state.name()
            )));
        }
        let pid = s
            .pid
            .ok_or_else(|| Error::file(&status, "no pid recorded: cannot cancel"))?;
        // SAFETY: plain signal to a process id read from the session.
        let r = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        if r != 0 {
            return Err(Error::invalid(format!(
                "cannot signal pid {pid} of {session}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }

    fn resume(&self, session: &str) -> Result<Launched> {
        let dir = self.dir(session)?;
        self.run_detached(&[
            "train".into(),
            "--resume".into(),
            dir.to_string_lossy().into_owned(),
            "--detach".into(),
        ])
    }

    fn load_index(&self, session: &str, _progress: ProgressFn) -> Result<IndexInfo> {
        Err(Error::invalid(format!(
            "cannot load {session}: this build has no search index module"
        )))
    }

    fn search(&self, session: &str, _q: &str, _k: usize, _f: Fusion) -> Result<SearchResult> {
        Err(Error::invalid(format!(
            "cannot search {session}: this build has no search index module"
        )))
    }

    fn neighbours(
        &self,
        session: &str,
        _term: &str,
        _side: Side,
        _k: usize,
        _csls: bool,
    ) -> Result<NeighbourResult> {
        Err(Error::invalid(format!(
            "cannot look up neighbours in {session}: this build has no session loader"
        )))
    }

    fn compare(&self, sessions: &[String], baseline: Option<&str>) -> Result<CompareTable> {
        compare_from_metrics(self, sessions, baseline)
    }

    fn export_compare(
        &self,
        table: &CompareTable,
        session: &str,
        format: ExportFormat,
    ) -> Result<PathBuf> {
        let (name, text) = match format {
            ExportFormat::Markdown => ("compare.md", table.to_markdown()),
            ExportFormat::Csv => ("compare.csv", table.to_csv()),
        };
        let path = self.dir(session)?.join(name);
        crate::util::write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }

    fn workspace_stats(&self, workspace: &str) -> Result<WorkspaceStats> {
        Err(Error::invalid(format!(
            "cannot read {workspace}: this build has no workspace module"
        )))
    }
}

/// A compare table from each session's validation records: the figures of
/// its best-MRR epoch. No significance test (no per-query figures here).
pub fn compare_from_metrics(
    backend: &dyn Backend,
    sessions: &[String],
    baseline: Option<&str>,
) -> Result<CompareTable> {
    let all = backend.list_sessions()?;
    let mut metrics: Vec<String> = vec!["MRR".into(), "P@1".into()];
    let mut found = Vec::new();
    for id in sessions {
        let chunk = backend.tail_metrics(id, 0)?;
        let mut best: Option<(f64, Option<f64>, std::collections::BTreeMap<String, f64>)> = None;
        for r in chunk.records {
            if let MetricRecord::Valid { mrr, p1, extra, .. } = r {
                let m = mrr.unwrap_or(f64::NEG_INFINITY);
                if best.as_ref().is_none_or(|b| m > b.0) {
                    best = Some((m, p1, extra));
                }
            }
        }
        if let Some((_, _, extra)) = &best {
            for k in extra.keys() {
                if !metrics.contains(k) && k != "wall_s" && k != "examples" {
                    metrics.push(k.clone());
                }
            }
        }
        found.push((id.clone(), best));
    }
    let rows = found
        .into_iter()
        .map(|(id, best)| {
            let model = all
                .iter()
                .find(|s| s.id == id)
                .map(|s| s.model.clone())
                .unwrap_or_default();
            let values = metrics
                .iter()
                .map(|m| {
                    let (mrr, p1, extra) = best.as_ref()?;
                    match m.as_str() {
                        "MRR" => mrr.is_finite().then_some(*mrr),
                        "P@1" => *p1,
                        other => extra.get(other).copied(),
                    }
                })
                .collect::<Vec<_>>();
            CompareRow {
                session: id,
                model,
                marks: vec![Significance::None; values.len()],
                values,
            }
        })
        .collect();
    Ok(CompareTable {
        metrics,
        rows,
        baseline: baseline.map(str::to_string),
        test: None,
    })
}
