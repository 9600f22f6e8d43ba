//! The real [`Backend`]: session folders through the session module, jobs
//! started, cancelled and resumed through the jobs module, and the engine's
//! [`Workbench`] for search, neighbours, compare and workspace figures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::backend::*;
use rosetta::eval::CompareOptions;
use rosetta::jobs;
use rosetta::session::workbench::{self, Workbench};
use rosetta::session::{self, MetricsTail};
use rosetta::text::Side;
use rosetta::{Error, Result};

/// The backend the workbench uses outside tests.
pub struct LocalBackend {
    root: PathBuf,
    exe: PathBuf,
    tails: Mutex<HashMap<String, MetricsTail>>,
    engine: Workbench,
}

/// A session summary from the session module's entry.
pub fn summary(e: &session::SessionEntry) -> SessionSummary {
    let id = e
        .dir
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut s = SessionSummary {
        id,
        dir: e.dir.clone(),
        state: e.state(),
        model: e
            .config
            .as_ref()
            .map(|c| c.model.clone())
            .unwrap_or_default(),
        workspace: e
            .config
            .as_ref()
            .map(|c| c.workspace.display().to_string())
            .unwrap_or_default(),
        error: e.problem.clone(),
        ..Default::default()
    };
    if let Some(st) = &e.status {
        s.pid = (st.pid != 0).then_some(st.pid);
        if st.state.is_final() {
            s.alive = None;
        } else {
            s.alive = Some(st.process_alive());
        }
        if st.is_stale() {
            s.error = Some(format!(
                "status says running but process {} is gone (stale); r resumes it",
                st.pid
            ));
        }
        s.model = st.model.clone();
        s.workspace = st.workspace.display().to_string();
        s.device = st.device.clone();
        s.progress = Some(st.progress);
        s.epoch = (st.epoch > 0).then_some(st.epoch);
        s.epochs = (st.epochs > 0).then_some(st.epochs);
        s.eta_s = st.eta_s;
        s.pairs_per_s = st.pairs_per_s;
        s.best_mrr = st.best_mrr;
        s.best_epoch = st.best_epoch;
        if st.error.is_some() {
            s.error = st.error.clone();
        }
    }
    s
}

impl LocalBackend {
    /// Sessions under `root`; jobs are started with the program `exe`
    /// (normally `std::env::current_exe()`).
    pub fn new(root: impl Into<PathBuf>, exe: impl Into<PathBuf>) -> Self {
        LocalBackend {
            root: root.into(),
            exe: exe.into(),
            tails: Mutex::new(HashMap::new()),
            engine: Workbench::default(),
        }
    }

    fn dir(&self, session: &str) -> Result<PathBuf> {
        if session.is_empty() || session.contains('/') || session.starts_with('.') {
            return Err(Error::invalid(format!("not a session name: {session:?}")));
        }
        Ok(self.root.join(session))
    }

    fn launched(&self, l: rosetta::jobs::Launched) -> Launched {
        crate::tui::log::info(&format!("launched {} (pid {})", l.dir.display(), l.pid));
        Launched {
            session: l
                .dir
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            pid: l.pid,
        }
    }
}

impl Backend for LocalBackend {
    fn list_sessions(&self) -> Result<Vec<SessionSummary>> {
        let mut entries = session::list_sessions(&self.root)?;
        // newest first: folder names start with the model and a UTC stamp,
        // so order by the status's update time when known
        entries.sort_by(|a, b| {
            let t = |e: &session::SessionEntry| e.status.as_ref().map_or(0.0, |s| s.updated_unix);
            let c = |e: &session::SessionEntry| {
                e.config
                    .as_ref()
                    .map(|c| c.created.clone())
                    .unwrap_or_default()
            };
            c(b).cmp(&c(a)).then(t(b).total_cmp(&t(a)))
        });
        Ok(entries.iter().map(summary).collect())
    }

    fn tail_metrics(&self, session: &str, offset: u64) -> Result<MetricsChunk> {
        let path = self.dir(session)?.join(session::METRICS_FILE);
        let mut tails = self.tails.lock().expect("tails lock");
        let tail = tails
            .entry(session.to_string())
            .or_insert_with(|| MetricsTail::new(&path));
        let mut reset = false;
        if tail.offset() != offset {
            // the caller starts over (or lost track): read from the start
            *tail = MetricsTail::new(&path);
            reset = offset != 0;
        }
        let before = tail.offset();
        let batch = tail.poll()?;
        if tail.offset() < before {
            reset = true;
        }
        Ok(MetricsChunk {
            records: batch.records,
            next_offset: tail.offset(),
            reset: reset || batch.restarted,
            bad_lines: batch.errors.len(),
        })
    }

    fn session_spec(&self, session: &str) -> Result<JobSpec> {
        Ok(spec_from_config(&session::SessionConfig::read(
            &self.dir(session)?,
        )?))
    }

    fn launch(&self, spec: &JobSpec) -> Result<Launched> {
        let l = jobs::start(&spec.request(&self.root), &self.exe)?;
        Ok(self.launched(l))
    }

    fn cancel(&self, session: &str) -> Result<()> {
        match jobs::cancel(&self.dir(session)?)? {
            jobs::Cancel::Signalled { .. } => Ok(()),
            jobs::Cancel::Finished(state) => {
                Err(Error::invalid(format!("{session} is already {state}")))
            }
        }
    }

    fn resume(&self, session: &str) -> Result<Launched> {
        let l = jobs::resume(&self.dir(session)?, &self.exe)?;
        Ok(Launched {
            session: session.to_string(),
            ..self.launched(l)
        })
    }

    fn load_index(&self, session: &str, progress: ProgressFn) -> Result<IndexInfo> {
        self.engine.load_index(&self.dir(session)?, progress)
    }

    fn search(&self, session: &str, query: &str, k: usize, fusion: Fusion) -> Result<SearchResult> {
        self.engine.search(&self.dir(session)?, query, k, fusion)
    }

    fn neighbours(
        &self,
        session: &str,
        term: &str,
        side: Side,
        k: usize,
        csls: bool,
    ) -> Result<NeighbourResult> {
        self.engine
            .neighbours(&self.dir(session)?, term, side, k, csls)
    }

    fn associations(&self, session: &str, options: &AssocOptions) -> Result<Associations> {
        self.engine.associations(&self.dir(session)?, options)
    }

    fn export_associations(
        &self,
        table: &Associations,
        filter: &str,
        path: &Path,
    ) -> Result<usize> {
        table.write_tsv(path, filter)
    }

    fn compare(
        &self,
        sessions: &[String],
        baseline: Option<&str>,
        progress: &dyn Fn(usize, usize, &str),
    ) -> Result<Comparison> {
        let labelled: Vec<(String, PathBuf)> = sessions
            .iter()
            .map(|id| Ok((id.clone(), self.dir(id)?)))
            .collect::<Result<_>>()?;
        self.engine.compare(
            &labelled,
            baseline,
            &CompareOptions::default(),
            true,
            progress,
        )
    }

    fn export_compare(&self, table: &Comparison, path: &Path, format: TableFormat) -> Result<()> {
        table.write(path, format)
    }

    fn workspace_stats(&self, workspace: &str) -> Result<WorkspaceStats> {
        workbench::workspace_stats(Path::new(workspace))
    }
}
