//! The job runner: drives a [`Trainer`] inside a session folder. It
//! implements [`Hooks`]: metrics records, `status.json`, progress and ETA,
//! validation (parallel sentence retrieval) and early stopping on MRR,
//! checkpoints (`best` and `last`, atomic), cancellation on SIGTERM, and a
//! clear `failed` state on errors (non-finite loss included).
//!
//! Settings the runner reads from `--set` are the registry's
//! [`RUNNER_SETTINGS`](crate::models::registry::RUNNER_SETTINGS) (`patience`,
//! `log_every`, `step_delay_ms`), recorded in `config.toml` like the model's own.
//!
//! Phases: the runner executes the trainer's declared plan
//! ([`Trainer::plan`]) without knowing any model by name: progress and the
//! planned epochs come from the plan, patience counts within a phase, and a
//! phase declared as pre-training is never early-stopped here.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use candle_core::Tensor;

use crate::eval::sentence::sentence_retrieval;
use crate::models::{encode_texts, Model, Params, TextRole, TextRows};
use crate::models::{Flow, Hooks, Phase, Resume, StepReport, TrainData, Trainer};
use crate::session::metrics::MetricsWriter;
use crate::session::{
    fmt_utc, now_unix, Checkpoint, CheckpointMeta, Figures, JobLife, MetricRecord, Session, State,
    Status, BEST_CHECKPOINT, LAST_CHECKPOINT, LOG_FILE, METRICS_FILE, VOCAB_SOURCE, VOCAB_TARGET,
};
use crate::text::Side;
use crate::train::checkpoints::{CheckpointPolicy, Save};
use crate::train::early_stopping::{EarlyStopping, Verdict};
use crate::{Error, Result};

pub use crate::models::select_device;

/// A flag set by SIGTERM and SIGINT, for [`run_job`]'s `cancel`: the job
/// finishes its step, keeps its checkpoints and ends as `cancelled`. A
/// second Ctrl-C (SIGINT) while the flag is set exits at once (status 130;
/// the checkpoints are whole anyway: atomic writes). A repeated SIGTERM does
/// not: it is what `rosetta cancel`, timeout(1) and process managers send,
/// sometimes twice in a row (timeout(1) signals the job, then its process
/// group), and a job asked twice to stop still ends `cancelled`.
pub fn cancel_on_signals() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let installed =
        |e: std::io::Error| Error::invalid(format!("cannot install signal handler: {e}"));
    signal_hook::flag::register_conditional_shutdown(
        signal_hook::consts::SIGINT,
        130,
        flag.clone(),
    )
    .map_err(installed)?;
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, flag.clone()).map_err(installed)?;
    }
    Ok(flag)
}

/// A global allocator (the `rosetta` program wraps mimalloc in it) that,
/// when an allocation fails, records it in the session of the job this
/// process is running ([`run_job`] registers it) before Rust aborts: the
/// session then reads `failed` with the size that could not be allocated,
/// rather than `running`. Rust cannot continue after a failed allocation
/// (on stable Rust it prints "memory allocation of N bytes failed" and
/// aborts; no hook can turn that into an error), and under the kernel's
/// OOM killer no allocation fails at all: the process is killed (SIGKILL)
/// and the session shows `failed` as stale (its process gone). Jobs that
/// cannot fit are refused before they start by their memory estimate
/// ([`crate::models::check_memory`]).
///
/// Once [`count_heap`] has been called it also counts the bytes live on the
/// heap and their peak ([`heap_peak_bytes`]): the memory a computation
/// needs, which the resident size (the allocator keeps freed pages:
/// `src/main.rs`) overstates. Off, an allocation pays one relaxed load.
pub struct RecordingAlloc<A>(pub A);

/// Whether [`RecordingAlloc`] counts (`count_heap`).
static HEAP_COUNTING: AtomicBool = AtomicBool::new(false);
/// Bytes allocated through [`RecordingAlloc`] since counting began, less
/// those freed (a block from before frees a little below zero).
static HEAP_LIVE: AtomicIsize = AtomicIsize::new(0);
/// The most [`HEAP_LIVE`] has been.
static HEAP_PEAK: AtomicIsize = AtomicIsize::new(0);

/// Makes [`RecordingAlloc`] count the heap from now on (`rosetta bench
/// train` does, first thing); other commands do not pay for the shared
/// counters on every allocation.
pub fn count_heap() {
    HEAP_COUNTING.store(true, Ordering::Relaxed);
}

fn heap_grew(size: usize) {
    if HEAP_COUNTING.load(Ordering::Relaxed) {
        let size = size as isize;
        let now = HEAP_LIVE.fetch_add(size, Ordering::Relaxed) + size;
        if now > HEAP_PEAK.load(Ordering::Relaxed) {
            HEAP_PEAK.fetch_max(now, Ordering::Relaxed);
        }
    }
}

fn heap_shrank(size: usize) {
    if HEAP_COUNTING.load(Ordering::Relaxed) {
        HEAP_LIVE.fetch_sub(size as isize, Ordering::Relaxed);
    }
}

/// The most bytes live at once on the heap since [`count_heap`], in a
/// process whose global allocator is a [`RecordingAlloc`] (0 before it, and
/// in one whose allocator is not: a test binary).
pub fn heap_peak_bytes() -> usize {
    HEAP_PEAK.load(Ordering::Relaxed).max(0) as usize
}

/// The session folder of the job this process runs, for [`RecordingAlloc`].
static JOB_DIR: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);
/// Set while a failure is being recorded (the recording allocates too).
static RECORDING: AtomicBool = AtomicBool::new(false);

// SAFETY: every call is forwarded to the wrapped allocator unchanged; a
// failure (null) is returned as it came, after the recording.
unsafe impl<A: std::alloc::GlobalAlloc> std::alloc::GlobalAlloc for RecordingAlloc<A> {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = self.0.alloc(layout);
        if p.is_null() {
            allocation_failed(layout.size());
        } else {
            heap_grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = self.0.alloc_zeroed(layout);
        if p.is_null() {
            allocation_failed(layout.size());
        } else {
            heap_grew(layout.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        let p = self.0.realloc(ptr, layout, new);
        if p.is_null() {
            allocation_failed(new);
        } else {
            heap_shrank(layout.size());
            heap_grew(new);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        heap_shrank(layout.size());
        self.0.dealloc(ptr, layout)
    }
}

/// Records a failed allocation of `size` bytes in the registered job's
/// status (state `failed`, the size in its error), once per failure; the
/// process aborts next (or, for a fallible allocation a caller handles,
/// the job's next status write says `running` again).
pub fn allocation_failed(size: usize) {
    if RECORDING.swap(true, Ordering::SeqCst) {
        return;
    }
    let dir = JOB_DIR.try_lock().ok().and_then(|g| g.clone());
    if let Some(dir) = dir {
        record_failure(
            &dir,
            &format!(
                "memory allocation of {size} bytes failed: the job needs more memory than \
                 this machine (or its limit) gives; lower the model's sizes"
            ),
        );
    }
    RECORDING.store(false, Ordering::SeqCst);
}

/// Marks the job of session `dir` that this process runs as failed with
/// `msg` (a status of another process, or a final one, is left alone).
fn record_failure(dir: &Path, msg: &str) {
    if let Ok(mut life) = JobLife::open(dir) {
        let st = life.status();
        if !st.state.is_final() && st.pid == std::process::id() {
            let _ = life.failed(msg.to_string());
        }
    }
}

/// Registers a session folder with [`RecordingAlloc`] while it lives.
struct AllocWatch;

impl AllocWatch {
    fn new(dir: &Path) -> AllocWatch {
        if let Ok(mut g) = JOB_DIR.lock() {
            *g = Some(dir.to_path_buf());
        }
        AllocWatch
    }
}

impl Drop for AllocWatch {
    fn drop(&mut self) {
        if let Ok(mut g) = JOB_DIR.lock() {
            *g = None;
        }
    }
}

/// Receives the job's progress (the CLI's progress bar); the session's
/// files get everything anyway.
pub trait Observer {
    /// The status after a change (every step record, epoch end, state change).
    fn status(&mut self, _status: &Status) {}
    /// A human-readable line (also written to `log.txt`).
    fn line(&mut self, _line: &str) {}
}

/// An observer that ignores everything (detached jobs, tests).
pub struct Quiet;
impl Observer for Quiet {}

/// How a job ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Final state: done, failed or cancelled.
    pub state: State,
    /// Best validation MRR.
    pub best_mrr: Option<f64>,
    /// Its epoch.
    pub best_epoch: Option<usize>,
    /// Last completed epoch.
    pub epoch: usize,
    /// Last optimiser step.
    pub step: usize,
    /// Whether early stopping ended the training.
    pub early_stopped: bool,
    /// The error of a failed job.
    pub error: Option<String>,
}

/// An exclusive lock on a session folder, held while a process runs its
/// job: a `flock` on the folder itself (not on a file in it, which a
/// hard link could share with another session).
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

/// Attempts to take a session's lock, 20 ms apart.
const LOCK_TRIES: usize = 10;

impl SessionLock {
    /// Takes the lock, or fails naming the session when another process
    /// holds it (a job already running in it).
    pub fn acquire(dir: &Path) -> Result<SessionLock> {
        use std::os::unix::io::AsRawFd;
        let file = crate::session::open_folder(dir).map_err(|e| Error::io(dir, e))?;
        // A lock released a moment ago can still be held for a few
        // microseconds by a child of this process that was forked before the
        // release and has not yet exec'd (flock belongs to the open file
        // description, which the child shares until exec closes it): retry
        // briefly before calling the session busy.
        for attempt in 0..LOCK_TRIES {
            // SAFETY: flock on a valid open descriptor.
            let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if r == 0 {
                return Ok(SessionLock { _file: file });
            }
            if attempt + 1 < LOCK_TRIES {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Err(Error::file(
            dir,
            "session is in use by another running job (see `rosetta jobs`)",
        ))
    }
}

/// Runs (or, with `resume`, continues from `last.safetensors`) the training
/// job of `session` with `trainer` on `data`: checks the workspace hash,
/// picks the device, writes vocabularies, metrics, status and checkpoints.
/// Returns how it ended; a training error is an `Ok` outcome with state
/// `failed` (recorded in the session), an `Err` is a problem before training
/// (lock, device, hash, unreadable checkpoint).
pub fn run_job(
    session: &mut Session,
    trainer: &dyn Trainer,
    data: &TrainData,
    workspace_hash: &str,
    resume: bool,
    cancel: Arc<AtomicBool>,
    observer: &mut dyn Observer,
) -> Result<Outcome> {
    run_job_with_validation(
        session,
        trainer,
        data,
        workspace_hash,
        resume,
        cancel,
        observer,
        None,
    )
}

/// More figures computed on the model at every epoch end (ad-hoc MRR/MAP on
/// a workspace's collection), added to the `valid` record under their names.
/// Early stopping stays on the sentence-retrieval MRR.
pub type ExtraValidation<'a> = dyn Fn(&dyn Model) -> Result<BTreeMap<String, f64>> + 'a;

/// [`run_job`] with extra validation figures per epoch.
#[allow(clippy::too_many_arguments)]
pub fn run_job_with_validation(
    session: &mut Session,
    trainer: &dyn Trainer,
    data: &TrainData,
    workspace_hash: &str,
    resume: bool,
    cancel: Arc<AtomicBool>,
    observer: &mut dyn Observer,
    extra_validation: Option<&ExtraValidation<'_>>,
) -> Result<Outcome> {
    let dir = session.dir.clone();
    let _lock = SessionLock::acquire(&dir)?;
    // nothing of the session through a link (before the sweep below, which
    // would otherwise remove files wherever `checkpoints` points)
    crate::session::check_no_links(&dir)?;
    let _watch = AllocWatch::new(&dir);
    // temporary files a killed job left (its writes never finished)
    crate::util::sweep_temp_files(&dir);
    crate::util::sweep_temp_files(&dir.join(crate::session::CHECKPOINT_DIR));
    let mut log = LogFile::open(&dir.join(LOG_FILE))?;
    match prepare_and_train(
        session,
        trainer,
        data,
        workspace_hash,
        resume,
        cancel,
        observer,
        &mut log,
        extra_validation,
    ) {
        Ok(o) => Ok(o),
        Err(e) => {
            // a problem before training: the session says so too
            let msg = e.to_string();
            log.line(&format!("error: {msg}"));
            if let Ok(mut w) = MetricsWriter::open(&dir.join(METRICS_FILE)) {
                let _ = w.append(&MetricRecord::event("error", msg.clone(), None, None));
            }
            // a job that never started fails; a finished or interrupted
            // session keeps its state (its checkpoints are still what it says)
            let mut life = JobLife::open(&dir).unwrap_or_else(|_| JobLife::of(session));
            // a job that never started, or one that this process was running
            // when a write failed (a full disk), fails with the reason
            let me = std::process::id();
            let st = life.status();
            let ours = st.state == State::Running && st.pid == me;
            if st.state == State::Queued || ours {
                if st.pid != me {
                    // the job failed in this process
                    let _ = life.take();
                }
                let _ = life.failed(msg);
            }
            session.status = life.into_status();
            Err(e)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn prepare_and_train(
    session: &mut Session,
    trainer: &dyn Trainer,
    data: &TrainData,
    workspace_hash: &str,
    resume: bool,
    cancel: Arc<AtomicBool>,
    observer: &mut dyn Observer,
    log: &mut LogFile,
    extra_validation: Option<&ExtraValidation<'_>>,
) -> Result<Outcome> {
    let dir = session.dir.clone();
    if resume && session.status.state == State::Done {
        return Err(Error::file(
            &dir,
            "the session is done (all epochs or early stop): nothing to resume; train a new session",
        ));
    }
    session.config.check_workspace_hash(&dir, workspace_hash)?;
    let asked = session.config.device_request;
    let (device, device_name) = select_device(crate::models::registry::runs_on(
        &session.config.model,
        asked,
    ))?;
    session.config.device = device_name.clone();

    let params = session.config.run_settings();
    let crate::models::registry::RunnerSettings {
        patience,
        log_every,
        step_delay_ms,
        valid_sample,
    } = crate::models::registry::RunnerSettings::from_params(&params)?;
    let valid_rows = valid_sample_rows(data.valid_src.n_rows(), valid_sample, session.config.seed);
    let rerank = session.rerank()?;
    let plan = trainer.plan(data, &params)?;
    if plan.is_empty() {
        return Err(Error::invalid(format!(
            "{}: the trainer planned no phase",
            session.config.model
        )));
    }

    // a session holding a checkpoint continues with the vocabularies it was
    // trained with, never with another analysis of the same data
    if std::fs::symlink_metadata(dir.join(LAST_CHECKPOINT)).is_ok() {
        if let Ok(saved) = session.vocabs() {
            crate::session::check_same_terms(&dir, &saved, &data.vocabs)?;
        }
    }
    // vocabularies, so new text can be encoded
    for (name, v) in [
        (VOCAB_SOURCE, &data.vocabs.source),
        (VOCAB_TARGET, &data.vocabs.target),
    ] {
        v.save(&dir.join(name))?;
    }

    let metrics = MetricsWriter::open(&dir.join(METRICS_FILE))?;
    let mut hooks = RunnerHooks {
        dir: dir.clone(),
        model_name: session.config.model.clone(),
        data,
        params: &params,
        life: JobLife::of(session),
        figures: session.status.figures(),
        metrics,
        log,
        observer,
        cancel: cancel.clone(),
        log_every,
        step_delay: Duration::from_millis(step_delay_ms),
        stopping: EarlyStopping::new(patience),
        checkpoint_policy: CheckpointPolicy,
        phase: String::new(),
        epoch: 0,
        step: 0,
        epoch_examples: 0,
        epoch_loss_sum: 0.0,
        started: Instant::now(),
        progress_at_start: 0.0,
        last_record: Instant::now(),
        examples_since_record: 0,
        unrecorded: None,
        last_status_write: Instant::now(),
        config_written: false,
        early_stopped: false,
        checkpoints: 0,
        config_params_snapshot: Default::default(),
        session_config: session.config.clone(),
        extra_validation,
        plan,
        trainer_scores: Vec::new(),
        valid_rows,
        rerank,
    };

    let mut resume_from: Option<Resume> = None;
    // the checkpoints are the truth: a session whose status says it never
    // started (or whose `status.json` is missing, read as `queued`) but
    // that holds a checkpoint continues from it, never starts again over it
    let last = dir.join(LAST_CHECKPOINT);
    let mut resume = resume;
    if !resume && std::fs::symlink_metadata(&last).is_ok() {
        let msg = format!(
            "the session's status says it never started (state {}), but it holds {}: \
             continuing from that checkpoint rather than starting over it",
            session.status.state,
            last.display()
        );
        hooks.say(&format!("warning: {msg}"));
        resume = true;
    }
    // a checkpoint whose patience had run out: the job early-stopped
    // there (it was killed before recording `done`, or its status is lost)
    let mut stopped_at_checkpoint = false;
    if resume {
        if last.exists() {
            let ck = Checkpoint::read(&last, &device)?;
            if ck.meta.kind != session.config.model {
                return Err(Error::file(
                    &last,
                    format!(
                        "checkpoint is of model `{}`, session is `{}`",
                        ck.meta.kind, session.config.model
                    ),
                ));
            }
            hooks.stopping = EarlyStopping::resumed(
                patience,
                ck.meta.best_mrr,
                ck.meta.best_epoch,
                ck.meta.bad_epochs,
            );
            hooks.phase = ck.meta.phase.clone();
            hooks.epoch = ck.meta.epoch;
            hooks.step = ck.meta.step;
            let phase_stops = hooks
                .plan
                .iter()
                .find(|p| p.name == ck.meta.phase)
                .is_none_or(|p| p.early_stop);
            stopped_at_checkpoint = hooks
                .stopping
                .spent(ck.meta.valid_mrr.is_some(), phase_stops);
            let msg = format!(
                "resuming from {} (phase {}, epoch {}, step {}) on {device_name}",
                last.display(),
                ck.meta.phase,
                ck.meta.epoch,
                ck.meta.step
            );
            hooks.record(MetricRecord::event(
                "resume",
                msg.clone(),
                Some(ck.meta.epoch),
                Some(ck.meta.step),
            ))?;
            hooks.say(&msg);
            resume_from = Some(Resume {
                phase: ck.meta.phase,
                epoch: ck.meta.epoch,
                step: ck.meta.step,
                tensors: ck.tensors,
            });
        } else {
            let msg = "no checkpoint yet (stopped before its first epoch ended): starting again from the beginning";
            hooks.record(MetricRecord::event("resume", msg, Some(0), Some(0)))?;
            hooks.say(msg);
        }
    } else {
        let sample = match &hooks.valid_rows {
            Some(r) => format!(" (a sample of {} scored each epoch)", r.len()),
            None => String::new(),
        };
        let msg = format!(
            "start: model {} on {} ({} training pairs, {} validation pairs{sample}), device {device_name}, seed {}",
            session.config.model,
            session.config.workspace.display(),
            data.train_src.n_rows(),
            data.valid_src.n_rows(),
            session.config.seed
        );
        hooks.record(MetricRecord::event("start", msg.clone(), Some(0), Some(0)))?;
        hooks.say(&msg);
    }

    // running
    hooks.figures.best_mrr = hooks.stopping.best();
    hooks.figures.best_epoch = hooks.stopping.best_epoch();
    if resume_from.is_some() {
        // the checkpoint's epoch is complete
        hooks.epoch_examples = hooks.epoch_size();
    }
    hooks.update_progress();
    hooks.epoch_examples = 0;
    hooks.write_config()?;
    hooks.life.running(&device_name, &hooks.figures)?;
    hooks.status_written();
    hooks.progress_at_start = hooks.figures.progress;

    let seed = session.config.seed;
    // a resume from a checkpoint of the job's last epoch (killed after
    // writing it) trains nothing more; its checkpoints are already final
    let from_checkpoint = resume_from.is_some();
    if stopped_at_checkpoint {
        hooks.early_stopped = true;
        let m = format!(
            "done (early stop) after epoch {}: the checkpoint's patience had run out ({} epochs \
             without a better validation MRR); {}",
            hooks.epoch,
            hooks.stopping.bad_epochs(),
            hooks.best_line()
        );
        let outcome = hooks.finish(State::Done, "done", m, None)?;
        session.status = hooks.life.into_status();
        session.config = hooks.session_config;
        return Ok(outcome);
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        trainer.train(data, &params, &device, seed, resume_from, &mut hooks)
    }));
    let result: Result<Box<dyn Model>> = match result {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::invalid(format!("the trainer panicked: {what}")))
        }
    };
    let cancelled = cancel.load(Ordering::SeqCst);
    let outcome = match result {
        Ok(model) => {
            let planned: usize = hooks.plan.iter().map(|p| p.epochs).sum();
            if hooks.checkpoints == 0 && !cancelled && !from_checkpoint {
                // a trainer that never ended an epoch through the hooks (a
                // plan of 0 epochs keeps epoch 0: nothing was trained)
                if planned > 0 {
                    hooks.epoch = hooks.epoch.max(1);
                }
                let _ = hooks.epoch_end_inner(
                    &hooks.phase.clone(),
                    hooks.epoch,
                    model.as_ref(),
                    Vec::new(),
                )?;
            }
            if cancelled {
                hooks.finish(State::Cancelled, "cancelled", cancel_message(&hooks), None)?
            } else if hooks.early_stopped {
                let m = format!(
                    "done (early stop) after epoch {}; {}",
                    hooks.epoch,
                    hooks.best_line()
                );
                hooks.finish(State::Done, "done", m, None)?
            } else if planned == 0 {
                let m = format!(
                    "done without training (every phase planned 0 epochs): the initial model \
                     is saved; its MRR {}",
                    fmt_opt(hooks.stopping.best())
                );
                hooks.finish(State::Done, "done", m, None)?
            } else if hooks.phase == crate::models::ZERO_SHOT_PHASE {
                let m = format!(
                    "done: zero-shot, validation MRR {}",
                    fmt_opt(hooks.stopping.best())
                );
                hooks.finish(State::Done, "done", m, None)?
            } else {
                let m = format!("done after epoch {}; {}", hooks.epoch, hooks.best_line());
                hooks.finish(State::Done, "done", m, None)?
            }
        }
        Err(Error::Cancelled) => {
            let m = cancel_message(&hooks);
            hooks.finish(State::Cancelled, "cancelled", m, None)?
        }
        Err(e) => {
            let best_epoch = hooks.stopping.best_epoch();
            let kept = if dir.join(BEST_CHECKPOINT).is_file() && best_epoch.is_some() {
                format!(
                    "; the best checkpoint (epoch {}) is kept",
                    best_epoch.map(|e| e.to_string()).unwrap_or("-".into())
                )
            } else {
                String::new()
            };
            let msg = format!("{e}{kept}");
            hooks.finish(State::Failed, "error", msg.clone(), Some(msg))?
        }
    };
    session.status = hooks.life.into_status();
    session.config = hooks.session_config;
    Ok(outcome)
}

/// Largest magnitude a model parameter may reach: beyond it the squares of
/// an embedding's entries overflow `f32`, so norms and cosines mean nothing.
pub const MAX_PARAMETER: f64 = 1e18;

/// Error when a model tensor holds a value that is not finite or whose
/// magnitude passes [`MAX_PARAMETER`]: the training diverged.
pub fn check_parameters(tensors: &[(String, Tensor)], phase: &str, epoch: usize) -> Result<()> {
    for (name, t) in tensors {
        if !t.dtype().is_float() {
            continue;
        }
        let v = t
            .flatten_all()?
            .to_dtype(candle_core::DType::F64)?
            .to_vec1::<f64>()?;
        if let Some(x) = v.iter().find(|x| !x.is_finite() || x.abs() > MAX_PARAMETER) {
            return Err(Error::invalid(format!(
                "training diverged: parameter `{name}` holds {x:e} at {phase} epoch {epoch} \
                 (try a lower --lr)"
            )));
        }
    }
    Ok(())
}

fn cancel_message(h: &RunnerHooks<'_>) -> String {
    format!(
        "cancelled at epoch {}, step {}; `rosetta train --resume {}` continues from the last checkpoint{}",
        h.epoch,
        h.step,
        h.dir.display(),
        if h.checkpoints > 0 || h.dir.join(LAST_CHECKPOINT).exists() {
            ""
        } else {
            " (none yet: it starts again)"
        }
    )
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.4}")).unwrap_or_else(|| "-".into())
}

pub(crate) struct LogFile {
    path: PathBuf,
    file: File,
}

impl LogFile {
    pub(crate) fn open(path: &Path) -> Result<LogFile> {
        let file = crate::util::open_append_nofollow(path)?;
        Ok(LogFile {
            path: path.to_path_buf(),
            file,
        })
    }
    pub(crate) fn line(&mut self, msg: &str) {
        let line = format!("{} {msg}\n", fmt_utc(now_unix()));
        // the log is for people; a full disk shows up in the other files
        if let Err(e) = self.file.write_all(line.as_bytes()) {
            eprintln!("{}: {e}", self.path.display());
        }
    }
}

/// Texts a text-reading model's validation encodes between two reports.
const VALID_BATCH: usize = 64;
/// The least time between two validation lines in the log.
const VALID_LOG_EVERY: Duration = Duration::from_secs(5);

/// A validation under way: texts done of `total`, since `started`.
struct ValidationRun {
    done: usize,
    total: usize,
    started: Instant,
    /// When the log last said how it goes.
    told: Option<Instant>,
}

impl ValidationRun {
    fn new(total: usize) -> ValidationRun {
        ValidationRun {
            done: 0,
            total,
            started: Instant::now(),
            told: None,
        }
    }

    /// `k` more texts encoded: where the validation stands.
    fn advance(&mut self, k: usize) -> crate::session::ValidationProgress {
        self.done += k;
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let rate = self.done as f64 / secs;
        crate::session::ValidationProgress {
            done: self.done,
            total: self.total,
            texts_per_s: Some(rate),
            eta_s: Some((self.total - self.done) as f64 / rate),
        }
    }
}

/// The validation rows a job scores each epoch: `None` (all `n`) when
/// `sample` is 0 or at least `n`, else `sample` of them drawn with `seed`
/// (the same draw every epoch and on resume), in increasing order.
fn valid_sample_rows(n: usize, sample: usize, seed: u64) -> Option<Vec<usize>> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    if sample == 0 || sample >= n {
        return None;
    }
    let mut rows: Vec<usize> = (0..n).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x7661_6c69_6421);
    rows.shuffle(&mut rng);
    rows.truncate(sample);
    rows.sort_unstable();
    Some(rows)
}

struct RunnerHooks<'a> {
    dir: PathBuf,
    model_name: String,
    data: &'a TrainData,
    params: &'a Params,
    /// The job's state, written only through it.
    life: JobLife,
    /// The figures the status reports next.
    figures: Figures,
    metrics: MetricsWriter,
    log: &'a mut LogFile,
    observer: &'a mut dyn Observer,
    cancel: Arc<AtomicBool>,
    log_every: usize,
    step_delay: Duration,
    stopping: EarlyStopping,
    checkpoint_policy: CheckpointPolicy,
    phase: String,
    epoch: usize,
    step: usize,
    epoch_examples: usize,
    epoch_loss_sum: f64,
    started: Instant,
    progress_at_start: f64,
    last_record: Instant,
    examples_since_record: usize,
    unrecorded: Option<StepReport>,
    last_status_write: Instant,
    config_written: bool,
    early_stopped: bool,
    checkpoints: usize,
    config_params_snapshot: BTreeMap<String, String>,
    session_config: crate::session::SessionConfig,
    extra_validation: Option<&'a ExtraValidation<'a>>,
    plan: Vec<Phase>,
    /// Figures the trainer gave for the epoch about to end.
    trainer_scores: Vec<(String, f64)>,
    /// The validation pairs scored each epoch when a sample
    /// (`valid_sample`), in order; `None`: all of them.
    valid_rows: Option<Vec<usize>>,
    /// How the session reranks by late interaction (its `rerank`
    /// setting): validation ranks as the session's evaluation will.
    rerank: Option<crate::models::kit::late::LateRerank>,
}

impl RunnerHooks<'_> {
    /// `best MRR 0.4321 at epoch 3` (dashes while there is none).
    fn best_line(&self) -> String {
        format!(
            "best MRR {} at epoch {}",
            fmt_opt(self.stopping.best()),
            self.stopping
                .best_epoch()
                .map_or("-".into(), |e| e.to_string())
        )
    }

    fn record(&mut self, r: MetricRecord) -> Result<()> {
        self.metrics.append(&r)
    }

    fn say(&mut self, msg: &str) {
        self.log.line(msg);
        self.observer.line(msg);
    }

    /// Writes the running job's figures.
    fn write_status(&mut self) -> Result<()> {
        self.life.progress(&self.figures)?;
        self.status_written();
        Ok(())
    }

    /// After a status write: the observer sees it, the next one waits.
    fn status_written(&mut self) {
        self.last_status_write = Instant::now();
        self.observer.status(self.life.status());
    }

    /// Records the resolved parameters in `config.toml` when they changed.
    fn write_config(&mut self) -> Result<()> {
        let resolved = self.params.resolved();
        if !self.config_written || resolved != self.config_params_snapshot {
            // what the job read joins what was resolved when it was made
            self.session_config.params.extend(resolved.clone());
            self.session_config.write(&self.dir)?;
            self.config_params_snapshot = resolved;
            self.config_written = true;
        }
        Ok(())
    }

    /// The plan's phase that is running (the first before any step).
    fn current_phase(&self) -> Option<(usize, &Phase)> {
        if self.phase.is_empty() {
            return self.plan.first().map(|p| (0, p));
        }
        self.plan
            .iter()
            .enumerate()
            .find(|(_, p)| p.name == self.phase)
    }

    /// Planned epochs of the current phase (0 while unknown).
    fn planned_epochs(&self) -> usize {
        self.current_phase().map_or(0, |(_, p)| p.epochs)
    }

    /// (epochs of the phases before the current one, epochs of the whole
    /// plan) for the progress figure.
    fn progress_plan(&self) -> (usize, usize) {
        let total = self.plan.iter().map(|p| p.epochs).sum();
        let before = self
            .current_phase()
            .map_or(0, |(i, _)| self.plan[..i].iter().map(|p| p.epochs).sum());
        (before, total)
    }

    fn epoch_size(&self) -> usize {
        self.current_phase()
            .map_or(self.data.train_src.n_rows(), |(_, p)| p.examples)
            .max(1)
    }

    fn update_progress(&mut self) {
        self.figures.epochs = self.planned_epochs();
        self.figures.epoch = self.epoch;
        self.figures.step = self.step;
        self.figures.phase = self.phase.clone();
        let (offset, total) = self.progress_plan();
        if total > 0 {
            let frac = (self.epoch_examples as f64 / self.epoch_size() as f64).min(1.0);
            let done = (offset as f64 + self.epoch.saturating_sub(1) as f64 + frac) / total as f64;
            self.figures.progress = done.clamp(0.0, 1.0);
            let gained = self.figures.progress - self.progress_at_start;
            let secs = self.started.elapsed().as_secs_f64();
            self.figures.eta_s = if gained > 1e-9 && secs > 0.0 {
                Some((1.0 - self.figures.progress).max(0.0) * secs / gained)
            } else {
                None
            };
        }
    }

    /// A `step` record for `r` (pairs/s since the previous record).
    fn record_step(&mut self, r: &StepReport) -> Result<()> {
        let secs = self.last_record.elapsed().as_secs_f64();
        let pps = if secs > 0.0 {
            self.examples_since_record as f64 / secs
        } else {
            0.0
        };
        self.last_record = Instant::now();
        self.examples_since_record = 0;
        self.unrecorded = None;
        self.figures.pairs_per_s = Some(pps);
        self.record(MetricRecord::Step {
            phase: r.phase.clone(),
            epoch: r.epoch,
            step: r.step,
            examples: r.examples,
            loss: r.loss,
            parts: r.parts.iter().cloned().collect(),
            pairs_per_s: pps,
            wall_s: self.started.elapsed().as_secs_f64(),
        })
    }

    /// The end of an epoch, in steps: its last step recorded, the phase
    /// entered, the model checked and validated, its checkpoints written
    /// (the early-stopping state adopted once they are on disk), the status
    /// reported, and whether to go on.
    fn epoch_end_inner(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        extra: Vec<(String, Tensor)>,
    ) -> Result<Flow> {
        // the epoch's last step is always recorded, so that short epochs
        // still draw a loss curve
        if let Some(r) = self.unrecorded.take() {
            self.record_step(&r)?;
        }
        if phase != self.phase {
            self.stopping.new_phase();
        }
        self.phase = phase.to_string();
        self.epoch = epoch;
        self.write_config()?;
        // a diverged model is never validated, never "best", never written
        let model_tensors = model.tensors()?;
        check_parameters(&model_tensors, phase, epoch)?;
        let valid = self.validate(phase, epoch, model)?;
        // a pre-training phase is not early-stopped by the runner: the
        // sentence MRR says little about it
        let phase_stops = self.current_phase().is_none_or(|(_, p)| p.early_stop);
        let pending = self.stopping_after(epoch, valid.mrr, model.has_space(), phase_stops);
        self.save_checkpoints(phase, epoch, &valid, &pending, &model_tensors, &extra)?;
        self.report_epoch(phase, epoch, &valid.line)?;
        if pending.verdict.stop {
            return self.early_stop(epoch);
        }
        if self.cancel.load(Ordering::SeqCst) {
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }

    /// Validates the model of `phase` epoch `epoch` (sentence retrieval on
    /// the validation pairs once it has a space, the trainer's own figures,
    /// the extra validation) and records the figures (a `valid` record).
    /// A figure that is not finite is an error: the training diverged.
    fn validate(&mut self, phase: &str, epoch: usize, model: &dyn Model) -> Result<Validation> {
        let mut valid = Validation::default();
        let mut scores = BTreeMap::new();
        // a model still in pre-training has no space to validate in
        let space = model.has_space();
        if space && self.data.valid_src.n_rows() > 0 {
            let sc = self.sentence_scores(phase, epoch, model)?;
            valid.mrr = Some(sc.mrr);
            scores.insert("MRR".to_string(), sc.mrr);
            scores.insert("P@1".to_string(), sc.p1);
            scores.insert("queries".to_string(), sc.queries as f64);
            valid.line = format!(" valid MRR {:.4} P@1 {:.4}", sc.mrr, sc.p1);
        }
        for (k, v) in std::mem::take(&mut self.trainer_scores) {
            if !v.is_finite() {
                return Err(Error::invalid(format!(
                    "training diverged: {k} is {v} at {phase} epoch {epoch}"
                )));
            }
            valid.line.push_str(&format!(" {k} {v:.4}"));
            scores.insert(k, v);
        }
        if let (true, Some(f)) = (space, self.extra_validation) {
            for (k, v) in f(model)? {
                valid.line.push_str(&format!(" {k} {v:.4}"));
                scores.insert(k, v);
            }
        }
        if !scores.is_empty() {
            self.record(MetricRecord::Valid {
                phase: phase.to_string(),
                epoch,
                step: self.step,
                scores,
            })?;
        }
        Ok(valid)
    }

    /// Parallel sentence retrieval on the validation pairs (both sides
    /// read as queries: it is symmetric).
    fn sentence_scores(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
    ) -> Result<crate::eval::sentence::SentenceScores> {
        let data = self.data;
        let seqs = data.seqs.as_ref();
        let texts = data.texts.as_ref();
        // the seeded sample (`valid_sample`), row for row on every view
        let sample = self.valid_rows.as_ref().map(|rows| {
            let pick = |v: &[String]| rows.iter().map(|&i| v[i].clone()).collect::<Vec<_>>();
            (
                [
                    data.valid_src.select_rows(rows),
                    data.valid_tgt.select_rows(rows),
                ],
                seqs.map(|q| [q.valid_src.select_rows(rows), q.valid_tgt.select_rows(rows)]),
                texts.map(|t| [pick(&t.valid_src), pick(&t.valid_tgt)]),
            )
        });
        let (src, tgt) = match &sample {
            Some((counts, q, raw)) => (
                TextRows {
                    counts: &counts[0],
                    seqs: q.as_ref().map(|q| &q[0]),
                    raw: raw.as_ref().map(|r| r[0].as_slice()),
                },
                TextRows {
                    counts: &counts[1],
                    seqs: q.as_ref().map(|q| &q[1]),
                    raw: raw.as_ref().map(|r| r[1].as_slice()),
                },
            ),
            None => (
                TextRows {
                    counts: &data.valid_src,
                    seqs: seqs.map(|q| &q.valid_src),
                    raw: texts.map(|t| t.valid_src.as_slice()),
                },
                TextRows {
                    counts: &data.valid_tgt,
                    seqs: seqs.map(|q| &q.valid_tgt),
                    raw: texts.map(|t| t.valid_tgt.as_slice()),
                },
            ),
        };
        let (s, t) = if model.reads_text() {
            // minutes on a CPU: encoded batch by batch, reported as it goes
            let total = src.counts.n_rows() + tgt.counts.n_rows();
            let mut v = ValidationRun::new(total);
            let s = self.encode_reporting(model, Side::Source, &src, &mut v)?;
            let t = self.encode_reporting(model, Side::Target, &tgt, &mut v)?;
            self.figures.validation = None;
            (s, t)
        } else {
            (
                encode_texts(model, Side::Source, TextRole::Query, src)?,
                encode_texts(model, Side::Target, TextRole::Query, tgt)?,
            )
        };
        if s.iter().chain(t.iter()).any(|v| !v.is_finite()) {
            return Err(Error::invalid(format!(
                "training diverged: the model's validation embeddings are not finite at {phase} \
                 epoch {epoch} (try a lower --lr)"
            )));
        }
        let sc = match (self.rerank, src.raw, tgt.raw) {
            (Some(r), Some(a), Some(b)) => crate::eval::sentence::SentenceScores::from_ranks(
                &crate::session::rerank::sentence_reranked_ranks(
                    model,
                    a,
                    b,
                    &s,
                    &t,
                    r.depth,
                    r.weight,
                    &|_, _| {},
                )?,
            ),
            _ => sentence_retrieval(&s, &t, model.similarity()),
        };
        if !sc.mrr.is_finite() {
            return Err(Error::invalid(format!(
                "validation MRR is not finite at epoch {epoch} (the model produced NaN embeddings)"
            )));
        }
        Ok(sc)
    }

    /// `rows` of `side` encoded (as queries) [`VALID_BATCH`] texts at a
    /// time, each batch reported in `status.json` (its `validation`, and
    /// for a zero-shot session its progress and ETA) and, every
    /// [`VALID_LOG_EVERY`] at most, in the log.
    fn encode_reporting(
        &mut self,
        model: &dyn Model,
        side: Side,
        rows: &TextRows,
        v: &mut ValidationRun,
    ) -> Result<ndarray::Array2<f32>> {
        let n = rows.counts.n_rows();
        let mut parts = Vec::new();
        let mut at = 0;
        while at < n {
            let idx: Vec<usize> = (at..(at + VALID_BATCH).min(n)).collect();
            let seqs = rows.seqs.map(|q| q.select_rows(&idx));
            let batch = TextRows {
                counts: &rows.counts.select_rows(&idx),
                seqs: seqs.as_ref(),
                raw: rows.raw.map(|t| &t[at..at + idx.len()]),
            };
            parts.push(encode_texts(model, side, TextRole::Query, batch)?);
            at += idx.len();
            let p = v.advance(idx.len());
            self.update_progress();
            if self.phase == crate::models::ZERO_SHOT_PHASE {
                // validating is all a zero-shot session does
                self.figures.progress = p.done as f64 / p.total.max(1) as f64;
                self.figures.eta_s = p.eta_s;
            }
            self.figures.validation = Some(p.clone());
            if v.told.is_none_or(|t| t.elapsed() >= VALID_LOG_EVERY) || p.done == p.total {
                v.told = Some(Instant::now());
                self.say(&p.describe());
            }
            if self.last_status_write.elapsed() >= Duration::from_millis(500) || p.done == p.total {
                self.write_status()?;
            }
        }
        if parts.is_empty() {
            return encode_texts(model, side, TextRole::Query, *rows);
        }
        let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
        ndarray::concatenate(ndarray::Axis(0), &views)
            .map_err(|e| Error::invalid(format!("joining the validation embeddings: {e}")))
    }

    /// The early-stopping state after this epoch, not adopted yet: it
    /// becomes the job's (and the status's) only once the checkpoint
    /// holding it is on disk, so a failed write (a full disk) never leaves
    /// a status naming a best epoch or MRR that `best.safetensors` lacks.
    fn stopping_after(
        &self,
        epoch: usize,
        mrr: Option<f64>,
        space: bool,
        phase_stops: bool,
    ) -> Pending {
        let mut next = self.stopping;
        let verdict = next.update(epoch, mrr, space, phase_stops);
        Pending { next, verdict }
    }

    /// Writes the checkpoints the policy asks for at this epoch end,
    /// adopting the pending early-stopping state as they land (the best
    /// figure with `best`, the patience count with `last`), and records it.
    fn save_checkpoints(
        &mut self,
        phase: &str,
        epoch: usize,
        valid: &Validation,
        pending: &Pending,
        model: &[(String, Tensor)],
        extra: &[(String, Tensor)],
    ) -> Result<()> {
        let next = &pending.next;
        let meta = CheckpointMeta {
            kind: self.model_name.clone(),
            phase: phase.to_string(),
            epoch,
            step: self.step,
            params: self.params.resolved(),
            valid_mrr: valid.mrr,
            best_mrr: next.best(),
            best_epoch: next.best_epoch(),
            bad_epochs: next.bad_epochs(),
            extra: extra.iter().map(|(n, _)| n.clone()).collect(),
            rosetta_version: env!("CARGO_PKG_VERSION").to_string(),
        };
        let saves = self
            .checkpoint_policy
            .at_epoch_end(pending.verdict.improved);
        for save in &saves {
            // written and synced (file and folder) before anything names it
            save.write(&self.dir, &meta, model, extra)?;
            if *save == Save::Best {
                self.stopping.adopt_best(next);
            }
        }
        self.stopping = *next;
        self.checkpoints += 1;
        self.record(MetricRecord::event(
            "checkpoint",
            format!(
                "epoch {epoch}: {} checkpoint written",
                CheckpointPolicy::describe(&saves)
            ),
            Some(epoch),
            Some(self.step),
        ))
    }

    /// The epoch's line (loss, figures, best so far) in the log, and its
    /// figures in the status.
    fn report_epoch(&mut self, phase: &str, epoch: usize, scores_line: &str) -> Result<()> {
        let mean_loss = if self.epoch_examples > 0 {
            format!(
                " loss {:.4}",
                self.epoch_loss_sum / self.epoch_examples as f64
            )
        } else {
            String::new()
        };
        let epochs = self.planned_epochs();
        self.epoch_examples = self.epoch_size();
        self.update_progress();
        self.figures.best_mrr = self.stopping.best();
        self.figures.best_epoch = self.stopping.best_epoch();
        let line = if phase == crate::models::ZERO_SHOT_PHASE {
            // one validation of the starting model: no epoch, no "best"
            format!(
                "{phase}:{scores_line} {:.1} s",
                self.started.elapsed().as_secs_f64()
            )
        } else {
            format!(
                "{phase} epoch {epoch}{}{mean_loss}{scores_line} (best {} at epoch {}) {:.1} s",
                if epochs > 0 {
                    format!("/{epochs}")
                } else {
                    String::new()
                },
                fmt_opt(self.stopping.best()),
                self.stopping
                    .best_epoch()
                    .map(|e| e.to_string())
                    .unwrap_or("-".into()),
                self.started.elapsed().as_secs_f64()
            )
        };
        self.say(&line);
        self.write_status()?;
        self.epoch_examples = 0;
        self.epoch_loss_sum = 0.0;
        Ok(())
    }

    /// Patience ran out at `epoch`: recorded, and the training stops.
    fn early_stop(&mut self, epoch: usize) -> Result<Flow> {
        self.early_stopped = true;
        let msg = format!(
            "early stop: no better validation MRR for {} epochs (best {} at epoch {})",
            self.stopping.bad_epochs(),
            fmt_opt(self.stopping.best()),
            self.stopping
                .best_epoch()
                .map(|e| e.to_string())
                .unwrap_or("-".into())
        );
        self.record(MetricRecord::event(
            "early_stop",
            msg.clone(),
            Some(epoch),
            Some(self.step),
        ))?;
        self.say(&msg);
        Ok(Flow::Stop)
    }

    fn finish(
        &mut self,
        state: State,
        event: &str,
        message: String,
        error: Option<String>,
    ) -> Result<Outcome> {
        // status.json is written whatever else fails (a full disk): a
        // failed write turns the outcome into `failed` with its reason
        let written = self.write_config().and_then(|_| {
            self.record(MetricRecord::event(
                event,
                message.clone(),
                Some(self.epoch),
                Some(self.step),
            ))
        });
        self.say(&message);
        let (state, error) = match written {
            Ok(()) => (state, error),
            Err(e) => {
                let msg = match &error {
                    Some(first) => format!("{first}; then {e}"),
                    None => format!("{message}; then {e}"),
                };
                self.say(&format!("error: {e}"));
                (State::Failed, Some(msg))
            }
        };
        self.figures.best_mrr = self.stopping.best();
        self.figures.best_epoch = self.stopping.best_epoch();
        match state {
            State::Done => {
                self.figures.eta_s = Some(0.0);
                self.life.done(&self.figures)?;
            }
            State::Cancelled => self.life.cancelled(&self.figures, message.clone())?,
            _ => {
                let why = error.clone().unwrap_or_else(|| message.clone());
                self.life.failed_at(&self.figures, why)?;
            }
        }
        self.status_written();
        Ok(Outcome {
            state,
            best_mrr: self.stopping.best(),
            best_epoch: self.stopping.best_epoch(),
            epoch: self.epoch,
            step: self.step,
            early_stopped: self.early_stopped,
            error,
        })
    }
}

/// What validation found at an epoch end.
#[derive(Debug, Default)]
struct Validation {
    /// Sentence-retrieval MRR (once the model has a space).
    mrr: Option<f64>,
    /// The figures for the epoch's log line.
    line: String,
}

/// The early-stopping state after an epoch, adopted as its checkpoints land.
struct Pending {
    next: EarlyStopping,
    verdict: Verdict,
}

impl Hooks for RunnerHooks<'_> {
    fn step(&mut self, r: &StepReport) -> Result<Flow> {
        if !r.loss.is_finite() {
            return Err(Error::invalid(format!(
                "training diverged: loss is {} at {} epoch {}, step {} (try a lower --lr)",
                r.loss, r.phase, r.epoch, r.step
            )));
        }
        if r.phase != self.phase || r.epoch != self.epoch {
            if r.phase != self.phase {
                // patience counts within a phase
                self.stopping.new_phase();
            }
            self.phase = r.phase.clone();
            self.epoch = r.epoch;
            self.epoch_examples = 0;
            self.epoch_loss_sum = 0.0;
        }
        self.step = r.step;
        self.epoch_examples += r.examples;
        self.epoch_loss_sum += r.loss * r.examples as f64;
        self.examples_since_record += r.examples;
        if !self.config_written {
            self.write_config()?;
        }
        if !self.step_delay.is_zero() {
            std::thread::sleep(self.step_delay);
        }
        if r.step.is_multiple_of(self.log_every) {
            self.record_step(r)?;
        } else {
            self.unrecorded = Some(r.clone());
        }
        // status.json is fsynced: at most a few writes a second
        if self.last_status_write.elapsed() >= Duration::from_millis(500) {
            self.update_progress();
            self.write_status()?;
        }
        if self.cancel.load(Ordering::SeqCst) {
            self.say(&format!("cancel requested: stopping after step {}", r.step));
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }

    fn epoch_end(
        &mut self,
        phase: &str,
        epoch: usize,
        model: &dyn Model,
        extra: Vec<(String, Tensor)>,
    ) -> Result<Flow> {
        self.epoch_end_inner(phase, epoch, model, extra)
    }

    fn log(&mut self, msg: &str) {
        self.say(msg);
    }

    fn record(&mut self, name: &'static str, json: &str) -> Result<()> {
        // only a file the session's delete guard knows
        if !crate::session::SESSION_FILES.contains(&name) {
            return Err(Error::invalid(format!(
                "internal: `{name}` is not a session file"
            )));
        }
        crate::util::write_atomic(&self.dir.join(name), json.as_bytes())
    }

    fn epoch_scores(&mut self, scores: Vec<(String, f64)>) {
        self.trainer_scores.extend(scores);
    }
}

#[cfg(test)]
mod tests {
    use super::valid_sample_rows;

    #[test]
    fn the_validation_sample_is_seeded_distinct_and_ordered() {
        assert_eq!(valid_sample_rows(10, 0, 1), None);
        assert_eq!(valid_sample_rows(10, 10, 1), None);
        let a = valid_sample_rows(100, 7, 42).unwrap();
        assert_eq!(a, valid_sample_rows(100, 7, 42).unwrap(), "the same draw");
        assert_ne!(a, valid_sample_rows(100, 7, 43).unwrap(), "another seed");
        assert_eq!(a.len(), 7);
        assert!(a.windows(2).all(|w| w[0] < w[1]) && a[6] < 100, "{a:?}");
        assert_ne!(a, (0..7).collect::<Vec<_>>(), "not the first rows");
    }
}
