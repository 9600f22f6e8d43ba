//! One owner of a job's life: every change of a session's `status.json`
//! goes through a [`JobLife`]'s methods, which refuse a transition the
//! life-cycle does not have and write the file atomically.
//!
//! The life-cycle (see [`allowed`]):
//!
//! ```text
//! queued ──take──▶ queued (this process owns the job)
//! queued | running | failed | cancelled ──running──▶ running (start, resume)
//! running ──progress──▶ running
//! running ──done──▶ done            (final: nothing leaves it)
//! running ──cancelled──▶ cancelled  (resumable)
//! queued | running ──failed──▶ failed (resumable)
//! ```
//!
//! A `running` status another live process owns is never failed from here
//! (its job records its own end). The file's format is [`Status`]'s, as it
//! always was: old sessions read as before.

use std::path::{Path, PathBuf};

use super::files::{is_own_file, CHECKPOINT_DIR, SESSION_FILES};
use super::{
    fmt_stamp, fmt_utc, now_unix, process_start_time, read_status, Session, SessionConfig, State,
    Status, STATUS_FILE,
};
use crate::util::write_atomic;
use crate::{Error, Result};

/// The figures a job reports as it runs: everything in `status.json` but
/// its state, process, device, error and time stamp.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// Share of the planned training done, 0..1.
    pub progress: f64,
    /// Current training phase.
    pub phase: String,
    /// Current epoch (from 1; 0 before the first step).
    pub epoch: usize,
    /// Planned epochs of the phase (0 while unknown).
    pub epochs: usize,
    /// Optimiser steps so far.
    pub step: usize,
    /// Estimated seconds left.
    pub eta_s: Option<f64>,
    /// Training pairs per second recently.
    pub pairs_per_s: Option<f64>,
    /// Best validation MRR so far.
    pub best_mrr: Option<f64>,
    /// Epoch of the best validation MRR.
    pub best_epoch: Option<usize>,
    /// The validation under way, while it runs.
    pub validation: Option<super::ValidationProgress>,
}

impl Status {
    /// The figures this status holds.
    pub fn figures(&self) -> Figures {
        Figures {
            progress: self.progress,
            phase: self.phase.clone(),
            epoch: self.epoch,
            epochs: self.epochs,
            step: self.step,
            eta_s: self.eta_s,
            pairs_per_s: self.pairs_per_s,
            best_mrr: self.best_mrr,
            best_epoch: self.best_epoch,
            validation: self.validation.clone(),
        }
    }

    fn set_figures(&mut self, f: &Figures) {
        self.progress = f.progress;
        self.phase = f.phase.clone();
        self.epoch = f.epoch;
        self.epochs = f.epochs;
        self.step = f.step;
        self.eta_s = f.eta_s;
        self.pairs_per_s = f.pairs_per_s;
        self.best_mrr = f.best_mrr;
        self.best_epoch = f.best_epoch;
        self.validation = f.validation.clone();
    }
}

/// Whether a job may go from state `from` to state `to` (the life-cycle in
/// the [module documentation](self)). `done` is final; a `failed` or
/// `cancelled` job may run again (a resume).
pub fn allowed(from: State, to: State) -> bool {
    use State::*;
    match to {
        Queued => from == Queued,
        Running => from != Done,
        Done | Cancelled => from == Running,
        Failed => matches!(from, Queued | Running),
    }
}

/// The life of one session's job: its status, and the only way to change
/// it on disk. Every method that changes the state checks the transition
/// ([`allowed`]) against the status it holds, writes `status.json`
/// atomically (stamping `updated`) and only then keeps the new status; a
/// refused transition or a failed write leaves both as they were.
#[derive(Debug, Clone)]
pub struct JobLife {
    dir: PathBuf,
    status: Status,
}

impl JobLife {
    /// Writes a fresh `queued` status for a new session of `config` in `dir`.
    pub(crate) fn create(dir: &Path, config: &SessionConfig) -> Result<JobLife> {
        let mut life = JobLife {
            dir: dir.to_path_buf(),
            status: Status::queued(config),
        };
        let next = life.status.clone();
        life.commit(next)?;
        Ok(life)
    }

    /// The life of session folder `dir`, as its `status.json` says now.
    pub fn open(dir: &Path) -> Result<JobLife> {
        Ok(JobLife {
            dir: dir.to_path_buf(),
            status: read_status(dir)?,
        })
    }

    /// The life of `session`, from the status it holds (what
    /// [`super::Session::open`] read, or `queued` when it had none).
    pub fn of(session: &super::Session) -> JobLife {
        JobLife {
            dir: session.dir.clone(),
            status: session.status.clone(),
        }
    }

    /// The status as last written.
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The status as last written, for the session that holds it.
    pub fn into_status(self) -> Status {
        self.status
    }

    /// This process owns the queued job from now on (its pid is recorded,
    /// so a death while loading the data shows as stale); still `queued`.
    pub fn take(&mut self) -> Result<()> {
        let mut next = self.next(State::Queued)?;
        own(&mut next);
        self.commit(next)
    }

    /// The job runs (a start, or a resume of a stopped one) in this
    /// process on `device`, at `figures`; a recorded error is cleared.
    pub fn running(&mut self, device: &str, figures: &Figures) -> Result<()> {
        let mut next = self.next(State::Running)?;
        own(&mut next);
        next.device = device.to_string();
        next.error = None;
        next.set_figures(figures);
        self.commit(next)
    }

    /// New figures of the running job.
    pub fn progress(&mut self, figures: &Figures) -> Result<()> {
        if self.status.state != State::Running {
            return Err(self.refused(State::Running, "progress of a job that is not running"));
        }
        let mut next = self.status.clone();
        next.set_figures(figures);
        self.commit(next)
    }

    /// The job finished, at `figures` (its progress is then 1).
    pub fn done(&mut self, figures: &Figures) -> Result<()> {
        let mut next = self.next(State::Done)?;
        next.set_figures(figures);
        next.progress = 1.0;
        self.commit(next)
    }

    /// The job stopped on request, at `figures`; `note` says where and how
    /// to continue it (kept in `error`).
    pub fn cancelled(&mut self, figures: &Figures, note: String) -> Result<()> {
        let mut next = self.next(State::Cancelled)?;
        next.set_figures(figures);
        next.eta_s = None;
        next.error = Some(note);
        self.commit(next)
    }

    /// The job failed with `error`, its figures as they were (no ETA).
    pub fn failed(&mut self, error: String) -> Result<()> {
        let figures = self.status.figures();
        self.failed_at(&figures, error)
    }

    /// The job failed with `error` at `figures` (no ETA). Refused for a
    /// final status and for a `running` one whose live process is not this
    /// one.
    pub fn failed_at(&mut self, figures: &Figures, error: String) -> Result<()> {
        let mut next = self.next(State::Failed)?;
        let st = &self.status;
        if st.state == State::Running && st.pid != std::process::id() && st.process_alive() {
            return Err(self.refused(
                State::Failed,
                &format!("the job is running in process {}", st.pid),
            ));
        }
        next.set_figures(figures);
        next.eta_s = None;
        next.error = Some(error);
        self.commit(next)
    }

    /// The current status, to become state `to`, if the life-cycle allows.
    fn next(&self, to: State) -> Result<Status> {
        if !allowed(self.status.state, to) {
            return Err(self.refused(to, "not a step of a job's life"));
        }
        let mut next = self.status.clone();
        next.state = to;
        Ok(next)
    }

    fn refused(&self, to: State, why: &str) -> Error {
        Error::file(
            self.dir.join(STATUS_FILE),
            format!(
                "a {} job cannot become {to} ({why}); status left as it was",
                self.status.state
            ),
        )
    }

    /// Writes `next` atomically (stamped now) and keeps it.
    fn commit(&mut self, mut next: Status) -> Result<()> {
        let now = now_unix();
        next.updated = fmt_utc(now);
        next.updated_unix = now;
        let path = self.dir.join(STATUS_FILE);
        let mut bytes = serde_json::to_vec_pretty(&next)
            .map_err(|e| Error::file(&path, format!("cannot serialise status: {e}")))?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes)?;
        self.status = next;
        Ok(())
    }
}

/// A session's birth: its folder, its config and its first status.
impl Session {
    /// Makes a new session folder (it must not exist, or be empty) with its
    /// config and a `queued` status. An existing folder is looked at before
    /// anything in it is touched: it must not be a symbolic link, and it
    /// may hold only what a job killed while making the folder leaves (the
    /// temporary files of a session file, `.NAME.tmp.PID.…`, of a dead
    /// process, and an empty `checkpoints/`), which are then removed;
    /// anything else refuses it with nothing removed.
    pub fn create(dir: &Path, mut config: SessionConfig) -> Result<Session> {
        config.resolve()?;
        let link = std::fs::symlink_metadata(dir).map(|m| m.file_type().is_symlink());
        if link.as_ref().is_ok_and(|l| *l) {
            return Err(Error::file(
                dir,
                "is a symbolic link: a new session is made in a folder of its own,                  never through a link; nothing touched",
            ));
        }
        if link.is_ok() {
            let leftovers = killed_leftovers(dir)?;
            for p in &leftovers {
                let r = if p.file_name().is_some_and(|n| n == CHECKPOINT_DIR) {
                    std::fs::remove_dir(p)
                } else {
                    std::fs::remove_file(p)
                };
                r.map_err(|e| Error::io(p, e))?;
            }
        } else {
            if let Some(p) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
            }
            std::fs::create_dir(dir).map_err(|e| Error::io(dir, e))?;
        }
        Session::init(dir, config)
    }

    fn init(dir: &Path, config: SessionConfig) -> Result<Session> {
        // the config first, made only where there is none: it claims the
        // folder for this job
        config.write_first(dir)?;
        let ck = dir.join(CHECKPOINT_DIR);
        std::fs::create_dir_all(&ck).map_err(|e| Error::io(&ck, e))?;
        let status = JobLife::create(dir, &config)?.into_status();
        Ok(Session {
            dir: dir.to_path_buf(),
            config,
            status,
        })
    }

    /// Makes a new session under `root` named `<model>-<UTC timestamp>`; two
    /// jobs started in the same second get distinct folders (`-2`, `-3`...).
    pub fn create_in(root: &Path, mut config: SessionConfig) -> Result<Session> {
        config.resolve()?;
        // the model names the folder: a plain name only
        let m = &config.model;
        if m.is_empty()
            || !m
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::invalid(format!(
                "model name {m:?} cannot name a session folder (ASCII letters, digits, `-`, `_`)"
            )));
        }
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let stamp = fmt_stamp(now_unix());
        let base = format!("{}-{}", config.model, stamp);
        for i in 1..10_000 {
            let name = if i == 1 {
                base.clone()
            } else {
                format!("{base}-{i}")
            };
            let dir = root.join(name);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Session::init(&dir, config),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(&dir, e)),
            }
        }
        Err(Error::file(root, "cannot find a free session folder name"))
    }
}

/// What a job killed while making session folder `dir` left in it, to be
/// removed before the folder is used: the temporary files of session files
/// (`.NAME.tmp.PID.…`, NAME one of [`SESSION_FILES`]) whose process is gone,
/// and `checkpoints/` when it is an empty folder. An error, with nothing
/// removed, when `dir` holds anything else (it is not ours, or is a
/// session: `rosetta train --resume` continues one).
fn killed_leftovers(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut other = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let t = e.file_type().map_err(|x| Error::io(e.path(), x))?;
        let dead_temp = t.is_file()
            && !SESSION_FILES.contains(&name.as_str())
            && is_own_file(&name, SESSION_FILES)
            && name
                .split_once(".tmp.")
                .and_then(|(_, r)| r.split('.').next())
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|pid| !crate::util::pid_alive(pid, None));
        let empty_ck = name == CHECKPOINT_DIR
            && t.is_dir()
            && std::fs::read_dir(e.path()).is_ok_and(|mut r| r.next().is_none());
        if dead_temp || empty_ck {
            out.push(e.path());
        } else {
            other.push(name);
        }
    }
    if !other.is_empty() {
        other.sort();
        let shown: Vec<&str> = other.iter().take(5).map(String::as_str).collect();
        return Err(Error::file(
            dir,
            format!(
                "session folder exists and is not empty (it holds {}{}): give a new or empty \
                 folder, or use `rosetta train --resume` to continue a session; nothing touched",
                shown.join(", "),
                if other.len() > 5 { ", …" } else { "" }
            ),
        ));
    }
    Ok(out)
}

impl Session {
    /// Runs `step` on this session's [`JobLife`] (from the status it
    /// holds) and keeps the status the step leaves, written or not.
    pub fn transition(&mut self, step: impl FnOnce(&mut JobLife) -> Result<()>) -> Result<()> {
        let mut life = JobLife::of(self);
        let r = step(&mut life);
        self.status = life.into_status();
        r
    }
}

/// Records this process as the job's.
fn own(st: &mut Status) {
    let pid = std::process::id();
    st.pid = pid;
    st.pid_start = process_start_time(pid);
}

/// A new session `s` under `root` of model `model` (for tests).
#[cfg(test)]
pub(crate) fn test_session(root: &Path, model: &str) -> super::Session {
    let cfg = SessionConfig {
        rosetta_version: "0".into(),
        model: model.into(),
        workspace: root.join("ws.toml"),
        workspace_hash: String::new(),
        seed: 1,
        device_request: crate::models::DeviceSpec::Cpu,
        device: "cpu".into(),
        given: Default::default(),
        params: Default::default(),
        created: String::new(),
        text: None,
    };
    super::Session::create(&root.join("s"), cfg).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Session;

    fn session(root: &Path) -> Session {
        test_session(root, "bm25")
    }

    #[test]
    fn the_life_cycle_allows_only_its_steps() {
        use State::*;
        let all = [Queued, Running, Done, Failed, Cancelled];
        let ok: Vec<(State, State)> = all
            .iter()
            .flat_map(|&a| all.iter().map(move |&b| (a, b)))
            .filter(|&(a, b)| allowed(a, b))
            .collect();
        assert_eq!(
            ok,
            vec![
                (Queued, Queued),
                (Queued, Running),
                (Queued, Failed),
                (Running, Running),
                (Running, Done),
                (Running, Failed),
                (Running, Cancelled),
                (Failed, Running),
                (Cancelled, Running),
            ]
        );
    }

    #[test]
    fn a_done_job_refuses_to_run_or_fail_and_its_file_is_untouched() {
        let root = tempfile::tempdir().unwrap();
        let s = session(root.path());
        let mut life = JobLife::of(&s);
        life.take().unwrap();
        let f = Figures {
            epoch: 2,
            epochs: 2,
            best_mrr: Some(0.5),
            best_epoch: Some(2),
            ..Figures::default()
        };
        life.running("cpu", &f).unwrap();
        life.progress(&f).unwrap();
        life.done(&f).unwrap();
        assert_eq!(life.status().progress, 1.0);
        let file = s.dir.join(STATUS_FILE);
        let before = std::fs::read(&file).unwrap();
        let e = life.running("cpu", &f).unwrap_err().to_string();
        assert!(
            e.contains("status.json") && e.contains("a done job cannot become running"),
            "{e}"
        );
        assert!(life.failed("late".into()).is_err());
        assert!(life.cancelled(&f, "late".into()).is_err());
        assert!(life.progress(&f).is_err());
        assert!(life.take().is_err());
        assert_eq!(std::fs::read(&file).unwrap(), before);
        assert_eq!(read_status(&s.dir).unwrap().state, State::Done);
    }

    #[test]
    fn a_stopped_job_resumes_and_a_queued_one_fails_or_starts() {
        let root = tempfile::tempdir().unwrap();
        let s = session(root.path());
        let mut life = JobLife::open(&s.dir).unwrap();
        assert!(life.progress(&Figures::default()).is_err(), "not running");
        assert!(life.done(&Figures::default()).is_err(), "never ran");
        life.failed("no data".into()).unwrap();
        let st = read_status(&s.dir).unwrap();
        assert_eq!(
            (st.state, st.error.as_deref()),
            (State::Failed, Some("no data"))
        );
        life.running("cpu", &Figures::default()).unwrap();
        let st = read_status(&s.dir).unwrap();
        assert_eq!((st.state, st.error), (State::Running, None));
        assert_eq!(st.pid, std::process::id());
        life.cancelled(&Figures::default(), "stopped".into())
            .unwrap();
        life.running("cpu", &Figures::default()).unwrap();
        assert_eq!(read_status(&s.dir).unwrap().state, State::Running);
    }

    #[test]
    fn a_job_running_in_another_live_process_is_not_failed_from_here() {
        let root = tempfile::tempdir().unwrap();
        let s = session(root.path());
        let mut life = JobLife::of(&s);
        life.running("cpu", &Figures::default()).unwrap();
        // pid 1 lives; its start time is what the status records
        life.status.pid = 1;
        life.status.pid_start = process_start_time(1);
        if !life.status.process_alive() {
            return; // no /proc to prove it: nothing to check here
        }
        let e = life.failed("x".into()).unwrap_err().to_string();
        assert!(e.contains("running in process 1"), "{e}");
    }

    #[test]
    fn the_file_keeps_its_format() {
        let root = tempfile::tempdir().unwrap();
        let s = session(root.path());
        let text = std::fs::read_to_string(s.dir.join(STATUS_FILE)).unwrap();
        let keys: Vec<&str> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix('"')?.split('"').next())
            .collect();
        assert_eq!(
            keys,
            [
                "state",
                "pid",
                "pid_start",
                "model",
                "workspace",
                "device",
                "progress",
                "phase",
                "epoch",
                "epochs",
                "step",
                "eta_s",
                "pairs_per_s",
                "best_mrr",
                "best_epoch",
                "error",
                "updated",
                "updated_unix"
            ]
        );
        assert!(text.starts_with("{\n  \"state\": \"queued\",") && text.ends_with("}\n"));
    }
}

#[cfg(test)]
mod owner {
    /// The engine's files (tests left out: they craft states on purpose).
    fn sources(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                let code = match text.find("#[cfg(test)]\nmod ") {
                    Some(i) => text[..i].to_string(),
                    None => text,
                };
                out.push((p, code));
            }
        }
    }

    #[test]
    fn no_other_engine_file_sets_a_state_or_writes_the_status() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        assert!(files.len() > 20, "{}", src.display());
        let mut found = Vec::new();
        for (path, code) in &files {
            // an index build's status is another file (`index/status.json`)
            // with its one writer, the build itself
            if path.ends_with("session/life.rs") || path.ends_with("jobs/index.rs") {
                continue;
            }
            for (i, line) in code.lines().enumerate() {
                let l = line.trim();
                // an assignment, not a comparison (`==`)
                let assigns = |lhs: &str| {
                    l.match_indices(lhs)
                        .any(|(i, m)| !l[i + m.len()..].starts_with('='))
                };
                let sets_state = l.contains(".state = State::")
                    || assigns("status.state =")
                    || assigns("st.state =");
                let writes = l.contains("STATUS_FILE") && l.contains("write");
                if sets_state || writes || l.contains("status.write(") {
                    found.push(format!("{}:{}: {l}", path.display(), i + 1));
                }
            }
        }
        assert!(
            found.is_empty(),
            "only session/life.rs changes a job's status:\n{}",
            found.join("\n")
        );
    }
}
