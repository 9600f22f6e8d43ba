//! The real [`Backend`]: session folders through the session module, jobs
//! started, cancelled and resumed through the jobs module, and the engine's
//! [`Workbench`] for search, neighbours, compare and workspace figures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::backend::*;
use rosetta::eval::CompareOptions;
use rosetta::jobs;
use rosetta::jobs::sweep;
use rosetta::session::collection::SILENT_LIMIT_S;
use rosetta::session::search::QueryHistory;
use rosetta::session::workbench::{self, Workbench};
use rosetta::session::{self, runs, MetricsTail};
use rosetta::text::Side;
use rosetta::{Error, Result};

/// The backend the workbench uses outside tests. Loading a session starts
/// no encoding of its collection estimated to take more than
/// [`SILENT_LIMIT_S`] seconds ([`LocalBackend::with_encode_limit`]): Search
/// offers the index build instead, other screens say why they cannot use
/// the session.
pub struct LocalBackend {
    root: PathBuf,
    exe: PathBuf,
    tails: Mutex<HashMap<String, MetricsTail>>,
    runs: Mutex<runs::RunIndex>,
    engine: Workbench,
}

/// The last component of a folder, as text.
fn folder_name(dir: &Path) -> String {
    dir.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
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
        if st.state.is_final() || (st.state == State::Queued && st.pid == 0) {
            // a queued job no process has taken yet has no process to watch
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

/// A session summary from the engine's run (entry, meta and figures).
pub fn run_summary(r: &runs::Run) -> SessionSummary {
    let mut s = summary(&r.entry);
    s.name = r.name();
    s.tags = r.meta.tags.clone();
    s.note = r.meta.note.clone();
    s.settings = r
        .entry
        .config
        .as_ref()
        .map(runs::settings_map)
        .unwrap_or_default();
    s.best = r.best.iter().map(|(k, v)| (k.clone(), v.0)).collect();
    s.divergence = r.divergence.clone();
    match jobs::sweep::SweepMember::read(&r.entry.dir) {
        Ok(m) => s.sweep = m,
        Err(e) => {
            s.error.get_or_insert_with(|| e.to_string());
        }
    }
    if s.error.is_none() {
        s.error = r.meta_problem.clone();
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
            runs: Mutex::new(runs::RunIndex::default()),
            engine: Workbench::default().with_encode_limit(Some(SILENT_LIMIT_S)),
        }
    }

    /// This backend with another limit on the seconds of encoding that
    /// loading a session may start (the engine's
    /// [`Workbench::with_encode_limit`]).
    pub fn with_encode_limit(mut self, seconds: f64) -> Self {
        self.engine = Workbench::default().with_encode_limit(Some(seconds));
        self
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
            session: folder_name(&l.dir),
            pid: l.pid,
            slurm_job: l.slurm.map(|j| j.to_string()),
            sweep: None,
        }
    }

    /// A sweep started by the engine's sweep functions: on Slurm as one job
    /// array ([`sweep::start_slurm`]), or here ([`sweep::create`], then
    /// [`sweep::run_local`] on a thread of the workbench: at most N at
    /// once while the workbench runs; sessions it has not started when it
    /// quits stay queued, and `r` starts them).
    fn launch_sweep(&self, spec: &JobSpec, sw: &SweepSpec) -> Result<Launched> {
        let req = sweep::SweepRequest {
            base: spec.request(&self.root),
            grid: sw.grid.clone(),
            seeds: sw.seeds.clone(),
        };
        let (s, slurm_job) = match spec.launcher.launcher() {
            jobs::Launcher::Slurm(opts) => {
                let (s, job) = sweep::start_slurm(&req, &opts, &self.exe, sw.parallel)?;
                (s, Some(job.to_string()))
            }
            jobs::Launcher::Local => {
                sweep::check_parallel(sw.parallel)?;
                let s = sweep::create(&req)?;
                let (run, exe, n) = (s.clone(), self.exe.clone(), sw.parallel.unwrap_or(1));
                std::thread::spawn(move || {
                    let r = sweep::run_local(&run, &exe, n, &mut |l| {
                        crate::tui::log::info(&format!(
                            "sweep {}: started {}",
                            run.id,
                            l.dir.display()
                        ))
                    });
                    if let Err(e) = r {
                        crate::tui::log::info(&format!("sweep {}: {e}", run.id));
                    }
                });
                (s, None)
            }
        };
        crate::tui::log::info(&format!("sweep {}: {} sessions", s.id, s.dirs.len()));
        let sessions: Vec<String> = s.dirs.iter().map(|d| folder_name(d)).collect();
        Ok(Launched {
            session: sessions.first().cloned().unwrap_or_default(),
            pid: 0,
            slurm_job,
            sweep: Some((s.id, sessions)),
        })
    }
}

impl Backend for LocalBackend {
    fn list_sessions(&self) -> Result<Vec<SessionSummary>> {
        let mut entries = self.runs.lock().expect("runs lock").scan(&self.root)?;
        // newest first: folder names start with the model and a UTC stamp,
        // so order by the status's update time when known
        entries.sort_by(|a, b| {
            let (a, b) = (&a.entry, &b.entry);
            let t = |e: &session::SessionEntry| e.status.as_ref().map_or(0.0, |s| s.updated_unix);
            let c = |e: &session::SessionEntry| {
                e.config
                    .as_ref()
                    .map(|c| c.created.clone())
                    .unwrap_or_default()
            };
            c(b).cmp(&c(a)).then(t(b).total_cmp(&t(a)))
        });
        let mut out: Vec<SessionSummary> = entries.iter().map(run_summary).collect();
        for s in &mut out {
            match jobs::index::view(&s.dir) {
                Ok(st) => {
                    s.index = st.map(|status| IndexBuild {
                        state: status.shown_state().to_string(),
                        status,
                    })
                }
                Err(e) => crate::tui::log::info(&format!("{}: {e}", s.id)),
            }
        }
        // Slurm jobs: state and liveness from Slurm, not from a process id
        let (views, problem) = rosetta::jobs::slurm::views(
            &entries
                .iter()
                .map(|r| (r.entry.dir.as_path(), r.entry.status.as_ref()))
                .collect::<Vec<_>>(),
        );
        if let Some(p) = problem {
            crate::tui::log::info(&p);
        }
        for s in &mut out {
            if let Some(v) = views.get(&s.dir) {
                s.state = v.combined.state;
                s.alive = None;
                s.slurm = Some(v.combined.label.clone());
                s.slurm_job = Some(v.describe());
                if let Some(e) = &s.error {
                    let kept: Vec<&str> =
                        e.split("; ").filter(|x| !x.starts_with("stale:")).collect();
                    s.error = (!kept.is_empty()).then(|| kept.join("; "));
                }
            }
        }
        Ok(out)
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
        let l = match &spec.sweep {
            Some(sw) => self.launch_sweep(spec, sw)?,
            None => {
                let l = jobs::start_on(
                    &spec.request(&self.root),
                    &self.exe,
                    &spec.launcher.launcher(),
                )?;
                self.launched(l)
            }
        };
        // the form starts from this launcher next time (a failure to
        // remember is logged: the job runs all the same)
        if let Err(e) = spec.launcher.write(&self.root) {
            crate::tui::log::info(&format!("launcher not remembered: {e}"));
        }
        Ok(l)
    }

    fn launcher_memory(&self) -> Result<LauncherMemory> {
        LauncherMemory::read(&self.root)
    }

    fn cancel(&self, session: &str) -> Result<()> {
        match jobs::cancel(&self.dir(session)?)? {
            jobs::Cancel::Signalled { .. } | jobs::Cancel::Slurm { .. } => Ok(()),
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

    fn load_index(&self, session: &str, progress: ProgressFn) -> Result<IndexOpening> {
        self.engine.open_index(&self.dir(session)?, progress)
    }

    fn build_index(&self, session: &str) -> Result<u32> {
        let pid = jobs::index::launch(
            &self.dir(session)?,
            &self.exe,
            rosetta::models::DeviceSpec::Auto,
            rosetta::session::collection::BuildOptions::default(),
            jobs::index::HNSW_ABOVE,
            None,
        )?;
        crate::tui::log::info(&format!("index build of {session} started (pid {pid})"));
        Ok(pid)
    }

    fn search(&self, session: &str, query: &str, k: usize, fusion: Fusion) -> Result<SearchResult> {
        self.engine.search(&self.dir(session)?, query, k, fusion)
    }

    fn document(&self, session: &str, docno: &str, query: Option<&str>) -> Result<Document> {
        self.engine.document(&self.dir(session)?, docno, query)
    }

    fn load_history(&self) -> Result<Vec<String>> {
        Ok(QueryHistory::load(&QueryHistory::default_path())?.queries)
    }

    fn save_history(&self, queries: &[String]) -> Result<()> {
        QueryHistory {
            queries: queries.to_vec(),
        }
        .save(&QueryHistory::default_path())
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
        sessions: &[(String, String)],
        baseline: Option<&str>,
        progress: &dyn Fn(f64, &str),
    ) -> Result<Comparison> {
        let labelled: Vec<(String, PathBuf)> = sessions
            .iter()
            .map(|(id, label)| Ok((label.clone(), self.dir(id)?)))
            .collect::<Result<_>>()?;
        self.engine.compare(
            &labelled,
            baseline,
            &CompareOptions::default(),
            true,
            progress,
        )
    }

    fn judged_ranking(&self, session: &str, qid: &str, k: usize) -> Result<JudgedRanking> {
        self.engine.judged_ranking(&self.dir(session)?, qid, k)
    }

    fn export_compare(&self, table: &Comparison, path: &Path, format: TableFormat) -> Result<()> {
        table.write(path, format)
    }

    fn workspace_stats(&self, workspace: &str) -> Result<WorkspaceStats> {
        workbench::workspace_stats(Path::new(workspace))
    }

    fn session_detail(&self, session: &str) -> Result<RunDetail> {
        runs::detail(&self.dir(session)?, 200)
    }

    fn log_tail(&self, session: &str, lines: usize) -> Result<Vec<String>> {
        runs::log_tail(&self.dir(session)?, lines)
    }

    fn set_meta(&self, session: &str, field: MetaField, value: &str) -> Result<()> {
        let dir = self.dir(session)?;
        match field {
            MetaField::Name => runs::rename(&dir, value),
            MetaField::Tags => runs::set_tags(&dir, value),
            MetaField::Note => runs::set_note(&dir, value),
        }
        .map(|_| ())
    }

    fn delete(&self, session: &str) -> Result<()> {
        rosetta::jobs::slurm::check_not_active(&self.dir(session)?)?;
        jobs::index::check_not_active(&self.dir(session)?)?;
        runs::delete(&self.dir(session)?)?;
        self.tails.lock().expect("tails lock").remove(session);
        crate::tui::log::info(&format!("deleted session {session}"));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rosetta::session::{SessionConfig, Status};

    fn entry(state: State, pid: u32) -> session::SessionEntry {
        let cfg = SessionConfig {
            rosetta_version: "0".into(),
            model: "s2net".into(),
            workspace: "ws.toml".into(),
            workspace_hash: String::new(),
            seed: 1,
            device_request: rosetta::models::DeviceSpec::Cpu,
            device: "cpu".into(),
            given: Default::default(),
            params: Default::default(),
            created: String::new(),
            text: None,
        };
        let mut st = Status::queued(&cfg);
        st.state = state;
        st.pid = pid;
        session::SessionEntry {
            dir: "sessions/s2net-x".into(),
            config: Some(cfg),
            status: Some(st),
            problem: None,
        }
    }

    #[test]
    fn a_queued_job_no_process_took_is_not_reported_gone() {
        let s = summary(&entry(State::Queued, 0));
        assert_eq!(s.alive, None);
        assert_eq!(s.error, None);
        // a running job whose process is gone is, with the reason
        let s = summary(&entry(State::Running, u32::MAX - 7));
        assert_eq!(s.alive, Some(false));
        assert!(s.error.unwrap().contains("is gone"));
    }

    /// The launcher is remembered in a file under the sessions root,
    /// written atomically; listing the sessions ignores it and deleting it
    /// as a session is refused.
    #[test]
    fn the_remembered_launcher_is_no_session() {
        let root = tempfile::tempdir().unwrap();
        let b = LocalBackend::new(root.path(), "/nonexistent/rosetta");
        assert_eq!(b.launcher_memory().unwrap(), LauncherMemory::default());
        let m = LauncherMemory {
            slurm: true,
            options: rosetta::jobs::slurm::SlurmOptions {
                partition: Some("debug".into()),
                time: Some("10:00".into()),
                ..Default::default()
            },
        };
        m.write(root.path()).unwrap();
        assert_eq!(b.launcher_memory().unwrap(), m);
        let names: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            [rosetta::jobs::LAUNCHER_FILE],
            "no temporary file left"
        );
        assert!(b.list_sessions().unwrap().is_empty());
        assert!(b.delete(rosetta::jobs::LAUNCHER_FILE).is_err());
        assert!(root.path().join(rosetta::jobs::LAUNCHER_FILE).exists());
        // a malformed memory is an error naming the file
        std::fs::write(root.path().join(rosetta::jobs::LAUNCHER_FILE), "{ nope").unwrap();
        let e = b.launcher_memory().unwrap_err().to_string();
        assert!(e.contains(rosetta::jobs::LAUNCHER_FILE), "{e}");
    }
}
