//! Training jobs: the one implementation of a job's life cycle, for the CLI
//! (`rosetta train`, `rosetta cancel`) and the workbench.
//!
//! - [`create`] checks a [`JobRequest`] and makes its session folder (state
//!   `queued`); nothing is written when the request is refused.
//! - [`launch`] starts `rosetta train --resume DIR --background` as a
//!   detached process (its own session, output appended to `log.txt`);
//!   [`start`] is [`create`] then [`launch`], [`resume`] launches an existing,
//!   stopped session.
//! - [`run`] runs a session's job in this process (what the launched process
//!   does).
//! - [`cancel`] asks a session's live job to stop (SIGTERM); [`wait_final`]
//!   waits until its status records a final state.
//!
//! The checks a front-end can make before a request exists are public too
//! ([`parse_settings`], [`check_model`], [`check_device`], [`check_setting`]),
//! so a form reports the engine's own messages field by field.
//!
//! Where a job runs is its [`Launcher`]: this machine (a detached
//! process), or a Slurm cluster ([`slurm`]: a batch job running the same
//! `rosetta train --resume DIR --background` on the allocated node);
//! [`start_on`] and [`resume_on`] take one, and [`sweep`] starts a grid of
//! sessions on either.
//!
//! Layering: this module uses `session`, `train`, `models` and `corpus`;
//! nothing below it uses it.

pub mod index;
pub mod slurm;
pub mod sweep;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::corpus::{Prepared, Workspace};
use crate::models::settings::ModelConfig;
use crate::models::{is_lexical, registry, DeviceSpec, TrainData};
use crate::session::retrieval::adhoc_validation;
use crate::session::{
    fmt_utc, now_unix, read_status, Session, SessionConfig, State, Status, BEST_CHECKPOINT,
    LOG_FILE,
};
use crate::train::runner::{run_job_with_validation, ExtraValidation, Observer};
use crate::{Error, Result};

pub use crate::train::runner::Outcome;

/// A new training job, as a front-end asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRequest {
    /// Workspace file (`workspace.toml`).
    pub workspace: PathBuf,
    /// Model registry name, or a lexical baseline.
    pub model: String,
    /// Settings (`--set KEY=VALUE` and the common flags); absent keys take
    /// the model's defaults.
    pub settings: BTreeMap<String, String>,
    /// Random seed.
    pub seed: u64,
    /// Device asked for (`auto`, `cpu`, `cuda`, `cuda:N`), parsed where it
    /// was given; opened by the job's runner.
    pub device: DeviceSpec,
    /// Exact session folder to make (must not exist, or be empty); `None`
    /// for a fresh `<model>-<UTC stamp>` folder under `root`.
    pub session: Option<PathBuf>,
    /// Where named sessions go.
    pub root: PathBuf,
    /// Most bytes of memory the job may need (`--max-memory`); `None`:
    /// this machine's memory. A job whose estimate exceeds it is refused.
    pub max_memory: Option<u64>,
}

impl JobRequest {
    /// A request with the defaults: seed 1, device `auto`, no settings, a
    /// named session under `sessions`.
    pub fn new(workspace: impl Into<PathBuf>, model: impl Into<String>) -> JobRequest {
        JobRequest {
            workspace: workspace.into(),
            model: model.into(),
            settings: BTreeMap::new(),
            seed: 1,
            device: DeviceSpec::Auto,
            session: None,
            root: PathBuf::from("sessions"),
            max_memory: None,
        }
    }
}

/// A job started in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// The session folder (absolute).
    pub dir: PathBuf,
    /// Process id of the job (0 for a Slurm job: its process is on a node).
    pub pid: u32,
    /// The Slurm job, for a job submitted to Slurm.
    pub slurm: Option<slurm::SlurmId>,
}

/// Where a job runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Launcher {
    /// A detached process on this machine.
    #[default]
    Local,
    /// A Slurm batch job with these options.
    Slurm(slurm::SlurmOptions),
}

/// The file under a sessions root that remembers the launcher last used
/// there (the workbench's new-job form starts from it). Its name starts
/// with a dot: no session is ever named so, and session listings only
/// take folders.
pub const LAUNCHER_FILE: &str = ".rosetta-launcher.json";

/// The launcher last used under a sessions root (`LAUNCHER_FILE`): local
/// or Slurm, and the Slurm options (kept when local was chosen since, so
/// that switching back finds them).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LauncherMemory {
    /// Slurm was chosen (else this machine).
    pub slurm: bool,
    /// Partition, GRES, time limit and account last given.
    pub options: slurm::SlurmOptions,
}

impl LauncherMemory {
    /// The memory of sessions root `root`; the default (local, no options)
    /// when it has none. A malformed file is an error naming it.
    pub fn read(root: &Path) -> Result<LauncherMemory> {
        Ok(slurm::read_json_if_any(&root.join(LAUNCHER_FILE))?.unwrap_or_default())
    }

    /// Writes it atomically under `root` (made if missing).
    pub fn write(&self, root: &Path) -> Result<()> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
        let path = root.join(LAUNCHER_FILE);
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::file(&path, format!("cannot serialise: {e}")))?;
        bytes.push(b'\n');
        crate::util::write_atomic(&path, &bytes)
    }

    /// The launcher this memory chooses.
    pub fn launcher(&self) -> Launcher {
        if self.slurm {
            Launcher::Slurm(self.options.clone())
        } else {
            Launcher::Local
        }
    }
}

/// What [`cancel`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// SIGTERM was sent to the job's process; it stops after its step.
    Signalled {
        /// The job's process.
        pid: u32,
    },
    /// Nothing to do: the job had already ended in this state.
    Finished(State),
    /// The Slurm job was cancelled (`scancel`): the job receives SIGTERM
    /// and records `cancelled`, or, still pending, never starts.
    Slurm {
        /// The Slurm job.
        job: slurm::SlurmId,
    },
}

/// `KEY=VALUE` strings as a map; a malformed string, an empty key or a key
/// given twice is an error. Keys and values are trimmed.
pub fn parse_settings(sets: &[String]) -> Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    for s in sets {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| Error::invalid(format!("--set {s}: expected KEY=VALUE")))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(Error::invalid(format!("--set {s}: empty key")));
        }
        if m.insert(k.to_string(), v.trim().to_string()).is_some() {
            return Err(Error::invalid(format!("--set {k} given twice")));
        }
    }
    Ok(m)
}

/// Error unless `model` is in the model registry (a trainable model or a
/// lexical baseline); the message lists the known names.
pub fn check_model(model: &str) -> Result<()> {
    registry::spec(model).map(|_| ())
}

/// The registry's model names, in registry order (the new-job form cycles
/// through them).
pub fn model_names() -> Vec<&'static str> {
    registry::names().collect()
}

/// The default of `model`'s setting `key`, as `rosetta train --help` shows
/// it; `None` for an unknown model, a setting the model does not read, or
/// one without a default.
pub fn setting_default(model: &str, key: &str) -> Option<String> {
    let spec = registry::spec(model).ok()?;
    spec.settings
        .iter()
        .chain(registry::RUNNER_SETTINGS)
        .find(|s| s.key == key)
        .and_then(|s| s.default.map(str::to_string))
}

/// `spec` as a device, for a form that holds it as text: an error unless
/// it is `auto`, `cpu`, `cuda` or `cuda:N`. Whether the model can use it is
/// checked by [`create`]; the device is opened once, by the job's runner.
pub fn check_device(spec: &str) -> Result<DeviceSpec> {
    spec.parse()
}

pub use crate::models::registry::check_setting;

/// Checks `req` as far as possible without writing anything: model, device
/// (a model that computes on the CPU only, its definition's `gpu` false,
/// refuses `cuda`, and so does a build without CUDA; the device is opened
/// once, where the job runs), every setting against the model, the
/// `init` session, the workspace, the memory the job needs
/// ([`crate::models::check_memory`]: refused above `req.max_memory` or this
/// machine's memory). Returns the settings as they will be
/// recorded ([`check_setting`]), the loaded workspace and its canonical path.
fn check_request(req: &JobRequest) -> Result<(BTreeMap<String, String>, Workspace, PathBuf)> {
    check_model(&req.model)?;
    registry::check_device(&req.model, req.device)?;
    let def = registry::spec(&req.model)?;
    let mut settings = BTreeMap::new();
    // a named preset (`recipe=clir`) gives its settings, each overridden
    // by one given beside it (an unknown preset name is refused by its
    // setting's check)
    for (k, v) in &def.with_presets(&req.settings) {
        settings.insert(k.clone(), check_setting(&req.model, k, v)?);
    }
    // the model's typed settings, read once as the job will read them
    let params = crate::models::Params::new(settings.clone());
    let config = def.config(&params)?;
    let trainer = def.trainer.map(|make| make());
    {
        // combinations checked, and a given key that nothing reads refused
        match &trainer {
            None => {
                crate::models::bm25::Bm25Baseline::new(&req.model, &params)?;
            }
            Some(trainer) => {
                trainer.check(&params)?;
                registry::RunnerSettings::from_params(&params)?;
            }
        }
        params.check_unused()?;
    }
    if let Some(p) = config.precision()? {
        // tf32 where the job would compute on the CPU
        p.check_device(&req.model, registry::runs_on(&req.model, req.device))?;
    }
    if let Some(r) = config.recurrence()? {
        r.check_build()?;
        let device = registry::runs_on(&req.model, req.device);
        if r == crate::models::kit::lstm::Recurrence::Cudnn && device.computes_on_cpu() {
            return Err(Error::invalid(format!(
                "{}: recurrence=cudnn runs on a CUDA GPU, and --device {device} computes on the CPU",
                req.model
            )));
        }
    }
    if let Some(init) = config.init() {
        // a session folder with a best checkpoint, or (XCNN) a checkpoint file
        if !init.is_file() && !init.join(BEST_CHECKPOINT).is_file() {
            return Err(Error::invalid(format!(
                "init={}: not a trained session (no {BEST_CHECKPOINT}) or a checkpoint",
                init.display()
            )));
        }
        // its tensors, checked by the trainer (kind, shapes, dimension)
        if let Some(trainer) = &trainer {
            crate::session::init::check(trainer.as_ref(), &params, init)?;
        }
    }
    if let Some(v) = vectors_session(config.as_ref())? {
        // a session folder with a model to give vectors (checked, not loaded)
        if !v.join(crate::session::CONFIG_FILE).is_file()
            || !(v.join(BEST_CHECKPOINT).is_file()
                || v.join(crate::session::LAST_CHECKPOINT).is_file())
        {
            return Err(Error::invalid(format!(
                "vectors={}: not a trained session (no config.toml and checkpoint){}",
                v.display(),
                // a model that also reads word2vec files
                if def.word2vec {
                    "; word2vec files are given as SOURCE.vec,TARGET.vec"
                } else {
                    ""
                }
            )));
        }
        // recorded absolute: the job may run elsewhere (a Slurm node)
        let abs = std::fs::canonicalize(&v).map_err(|e| Error::io(&v, e))?;
        settings.insert(
            crate::models::pretrained::KEY.into(),
            abs.display().to_string(),
        );
    }
    let ws_path = std::fs::canonicalize(&req.workspace)
        .map_err(|e| Error::file(&req.workspace, format!("cannot open workspace: {e}")))?;
    // a model's own [text] defaults apply where the workspace is silent
    let ws = Workspace::load(&ws_path)?.with_model_text(def.text)?;
    if config.needs_dictionary() {
        // read now, so a missing or unreadable dictionary writes nothing
        ws_dictionary(&ws, &ws_path)?;
    }
    if let Some(trainer) = &trainer {
        // a job that cannot fit in memory is refused here, with the figure
        crate::models::check_memory(
            &req.model,
            trainer.as_ref(),
            &params,
            req.max_memory,
            || {
                let p = Prepared::load_or_build(&ws)?;
                Ok(crate::models::DataSizes {
                    source_terms: p.vocabs.source.len(),
                    target_terms: p.vocabs.target.len(),
                })
            },
        )?;
    }
    Ok((settings, ws, ws_path))
}

/// Makes the session folder of `req` (state `queued`) after checking the
/// request ([`check_model`], the device for the model
/// ([`registry::check_device`]), [`check_setting`] for every setting and the
/// settings the model's trainer reads, the `init` checkpoint, the
/// workspace); a refused request writes nothing. A named session
/// (`req.session` is `None`) never reuses a folder: two requests in the
/// same second get `<model>-<stamp>` and `<model>-<stamp>-2`.
pub fn create(req: &JobRequest) -> Result<Session> {
    let (given, ws, ws_path) = check_request(req)?;
    let cfg = SessionConfig {
        rosetta_version: env!("CARGO_PKG_VERSION").to_string(),
        model: req.model.clone(),
        workspace: ws_path,
        workspace_hash: ws.content_hash()?,
        seed: req.seed,
        device_request: req.device,
        device: String::new(),
        given,
        params: BTreeMap::new(),
        created: fmt_utc(now_unix()),
        text: Some(ws.text.clone()),
    };
    match &req.session {
        Some(dir) => Session::create(dir, cfg),
        None => Session::create_in(&req.root, cfg),
    }
}

/// Starts the job of session folder `dir` in the background: `exe train
/// --resume DIR --background` (`exe` is the `rosetta` program) in a session
/// of its own (it survives the terminal), stdin null, stdout and stderr
/// appended to `log.txt`. Refused when the session's job is already
/// running. The child is reaped by a thread of this process, so a
/// long-lived caller (the workbench) keeps no zombies.
pub fn launch(dir: &Path, exe: &Path) -> Result<Launched> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let session = Session::open(&dir)?;
    check_not_running(&dir, &session.status)?;
    if slurm::SlurmRecord::read(&dir)?.is_some() {
        return Err(Error::file(
            &dir,
            "a Slurm session runs on Slurm: resume it with `rosetta train --resume DIR` \
             (it is resubmitted)",
        ));
    }
    let args: [std::ffi::OsString; 4] = [
        "train".into(),
        "--resume".into(),
        dir.as_os_str().into(),
        "--background".into(),
    ];
    let pid = spawn_detached(exe, &args, &dir.join(LOG_FILE))?;
    Ok(Launched {
        dir,
        pid,
        slurm: None,
    })
}

/// Starts `exe ARGS` detached: a session of its own (it survives the
/// terminal), stdin null, stdout and stderr appended to `log` (never
/// through a link); the child is reaped by a thread of this process, so a
/// long-lived caller (the workbench) keeps no zombies. Returns its pid.
pub(crate) fn spawn_detached(
    exe: &Path,
    args: &[std::ffi::OsString],
    log_path: &Path,
) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    // never through a planted symbolic link
    let log = crate::util::open_append_nofollow(log_path)?;
    let log2 = log.try_clone().map_err(|e| Error::io(log_path, e))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(log2)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; it makes the job its own session
    // and process group, so closing the terminal does not stop it.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        Error::invalid(format!(
            "cannot start the background job ({}): {e}",
            exe.display()
        ))
    })?;
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(pid)
}

fn check_not_running(dir: &Path, st: &Status) -> Result<()> {
    if !st.state.is_final() && st.process_alive() {
        return Err(Error::file(
            dir,
            format!("the job is already running (pid {})", st.pid),
        ));
    }
    Ok(())
}

/// [`create`] then [`launch`]. When the job cannot be started, the new
/// session records it (state `failed`) and the error is returned.
pub fn start(req: &JobRequest, exe: &Path) -> Result<Launched> {
    let mut session = create(req)?;
    launch(&session.dir, exe).inspect_err(|e| {
        let _ = session.transition(|l| l.failed(e.to_string()));
    })
}

/// Continues the stopped job of session folder `dir` in the background
/// from its last checkpoint (or starts a queued one): [`launch`], refused
/// for a session that is done or whose job is running. A Slurm session is
/// resubmitted ([`resume_on`]) with the partition, GRES, time and account
/// its record gives ([`slurm::SlurmRecord::resubmit_options`]), never with
/// extra `sbatch` arguments read back from the record.
pub fn resume(dir: &Path, exe: &Path) -> Result<Launched> {
    match slurm::SlurmRecord::read(dir)? {
        Some(rec) => resume_on(dir, exe, &Launcher::Slurm(rec.resubmit_options().0)),
        None => resume_on(dir, exe, &Launcher::Local),
    }
}

/// [`resume`] on a given launcher: locally ([`launch`]; refused for a
/// Slurm session), or resubmitted to Slurm (refused while the session's
/// Slurm job is queued or running, or when Slurm refuses the options).
pub fn resume_on(dir: &Path, exe: &Path, launcher: &Launcher) -> Result<Launched> {
    let session = Session::open(dir)?;
    if session.status.state == State::Done {
        return Err(Error::file(
            dir,
            "the session is done: nothing to resume; train a new session",
        ));
    }
    match launcher {
        Launcher::Local => launch(dir, exe),
        Launcher::Slurm(opts) => {
            let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
            slurm::check_not_active(&dir)?;
            slurm::check(opts)?;
            let rec = slurm::submit(&dir, opts, exe)?;
            Ok(Launched {
                dir,
                pid: 0,
                slurm: Some(rec.job_id),
            })
        }
    }
}

/// [`start`] on a given launcher. For Slurm, everything Slurm can check
/// (`sbatch --test-only`: partition, account, GRES, time) is checked with
/// the request before the session folder is written; the session is then
/// submitted ([`slurm::submit`]), and a failed submission is recorded in it
/// (state `failed`).
pub fn start_on(req: &JobRequest, exe: &Path, launcher: &Launcher) -> Result<Launched> {
    let Launcher::Slurm(opts) = launcher else {
        return start(req, exe);
    };
    check_request(req)?;
    match &req.session {
        Some(d) => slurm::check_path(d)?,
        None => slurm::check_path(&req.root)?,
    }
    opts.sbatch_args()?;
    slurm::check(opts)?;
    let mut session = create(req)?;
    let dir = std::fs::canonicalize(&session.dir).map_err(|e| Error::io(&session.dir, e))?;
    match slurm::submit(&dir, opts, exe) {
        Ok(rec) => Ok(Launched {
            dir,
            pid: 0,
            slurm: Some(rec.job_id),
        }),
        Err(e) => {
            let _ = session.transition(|l| l.failed(e.to_string()));
            Err(e)
        }
    }
}

/// The session folder a model's `vectors=` setting names, if any
/// ([`crate::models::pretrained::VectorsSetting`]).
fn vectors_session(config: &dyn ModelConfig) -> Result<Option<PathBuf>> {
    Ok(config
        .vectors()?
        .and_then(|v| v.session().map(Path::to_path_buf)))
}

/// The dictionary of `ws` (at `path`), its file and entries; an error
/// naming the workspace when it has none.
fn ws_dictionary(ws: &Workspace, path: &Path) -> Result<(PathBuf, crate::corpus::Dictionary)> {
    let none = || {
        Error::file(
            path,
            "this model fits on the workspace's dictionary, and it names none ([dictionary] path)",
        )
    };
    let file = ws.dictionary.clone().ok_or_else(none)?;
    let dict = ws.read_dictionary()?.ok_or_else(none)?;
    Ok((file, dict))
}

/// The workspace's dictionary for a model that fits on it, analysed with
/// `prepared`'s analysers exactly as `eval --task bli` analyses it (so
/// [`crate::corpus::BliSplit`] gives the same parts in both). Errors when
/// the workspace names no dictionary or it cannot be read.
pub fn training_dictionary(
    path: &Path,
    text: Option<&crate::text::TextConfig>,
    prepared: &Prepared,
) -> Result<crate::models::TrainDictionary> {
    let ws = Workspace::load_with_text(path, text)?;
    let (file, dict) = ws_dictionary(&ws, path)?;
    let (src, tgt) = prepared.analyzers()?;
    Ok(crate::models::TrainDictionary {
        file,
        entries: dict.analysed(&src, &tgt),
    })
}

/// A workspace's prepared data (cached by the corpus module), its training
/// data and its content hash.
pub fn load_workspace(
    path: &Path,
    text: Option<&crate::text::TextConfig>,
) -> Result<(Prepared, TrainData, String)> {
    let ws = Workspace::load_with_text(path, text)?;
    let prepared = Prepared::load_or_build(&ws)?;
    // XCNN mines its own pseudo-relevant positives (its `positives` setting)
    let data = TrainData::from_prepared(&prepared, Vec::new());
    let hash = prepared.hash.clone();
    Ok((prepared, data, hash))
}

/// Saves the workspace's learnt subword models (`[text] units = "bpe"` or
/// `"unigram"`) in a session folder next to its vocabularies, unless the
/// session has them already (a resume keeps the models it was trained with).
fn save_unit_models(dir: &Path, prepared: &Prepared) -> Result<()> {
    use crate::text::units::{UNITS_SOURCE, UNITS_TARGET};
    if let Some((s, t)) = &prepared.unit_models {
        for (name, m) in [(UNITS_SOURCE, s), (UNITS_TARGET, t)] {
            let path = dir.join(name);
            if !path.exists() {
                m.save(&path)?;
            }
        }
    }
    Ok(())
}

/// Runs the job of `session` in this process until it ends: a lexical
/// baseline scores and finishes; a trained model trains (or continues from
/// its last checkpoint, unless the session is queued) with the workspace's
/// ad-hoc figures per epoch when it has a real ad-hoc collection. A queued
/// session is owned by this process from the start (its pid is recorded,
/// so a death while loading shows as stale) and is marked failed when its
/// data cannot be loaded. `cancel` stops the job after its current step
/// (state `cancelled`). The outcome's state says how a started job ended;
/// an `Err` is a problem before it started (also recorded in the session).
pub fn run(
    session: &mut Session,
    observer: &mut dyn Observer,
    cancel: Arc<AtomicBool>,
) -> Result<Outcome> {
    if is_lexical(&session.config.model) {
        return crate::train::lexical::run_lexical_job(session, observer);
    }
    let resume = session.status.state != State::Queued;
    if session.status.state == State::Queued {
        // this process owns the queued job from now on: `jobs` can tell
        // when it dies while loading the data
        session.transition(|l| l.take())?;
    }
    let loaded = crate::models::registry::trainer(&session.config.model).and_then(|t| {
        let params = session.config.run_settings();
        // the model's typed settings, read once
        let config = registry::spec(&session.config.model)?.config(&params)?;
        let (prepared, mut data, hash) =
            load_workspace(&session.config.workspace, session.config.text.as_ref())?;
        // settings edited since the session was made are estimated again
        let sizes = crate::models::DataSizes {
            source_terms: data.vocabs.source.len(),
            target_terms: data.vocabs.target.len(),
        };
        crate::models::check_memory(&session.config.model, t.as_ref(), &params, None, || {
            Ok(sizes)
        })?;
        // `vectors=SESSION`: that session's term vectors for this vocabulary
        if let Some(dir) = vectors_session(config.as_ref())? {
            data.pretrained = Some(crate::session::pretrained::term_vectors_for(
                &dir,
                &data.vocabs,
            )?);
        }
        // `init=SESSION`: that session's checkpoint, checked against this vocabulary
        data.init = crate::session::init::resolve(config.init(), &data.vocabs)?;
        if config.needs_dictionary() {
            data.dictionary = Some(training_dictionary(
                &session.config.workspace,
                session.config.text.as_ref(),
                &prepared,
            )?);
        }
        Ok((t, prepared, data, hash))
    });
    let (trainer, prepared, data, hash) = match loaded {
        Ok(x) => x,
        Err(e) => {
            if session.status.state == State::Queued {
                session.transition(|l| l.failed(e.to_string()))?;
            }
            return Err(e);
        }
    };
    save_unit_models(&session.dir, &prepared)?;
    // a real ad-hoc collection (not one derived from the parallel test
    // split): its figures are reported per epoch, never used for selection
    let rerank = session.rerank()?;
    let adhoc_figures = |m: &dyn crate::models::Model| adhoc_validation(m, &prepared.adhoc, rerank);
    let extra: Option<&ExtraValidation<'_>> = if prepared.adhoc.derived {
        None
    } else {
        Some(&adhoc_figures)
    };
    run_job_with_validation(
        session,
        trainer.as_ref(),
        &data,
        &hash,
        resume,
        cancel,
        observer,
        extra,
    )
}

/// Asks the live job of session folder `dir` to stop: SIGTERM to the
/// process its status records (the job finishes its step, keeps its
/// checkpoints and records `cancelled`). A job that has already ended is
/// [`Cancel::Finished`]; a job not started yet, or whose process is gone
/// without recording an end (stale), is an error.
pub fn cancel(dir: &Path) -> Result<Cancel> {
    // a Slurm session: Slurm says whether its job lives, and scancel stops it
    if let Some(v) = slurm::view(dir)? {
        return Ok(match slurm::cancel(dir)? {
            Some(job) => Cancel::Slurm { job },
            None => Cancel::Finished(v.combined.state),
        });
    }
    let st = read_status(dir)?;
    if st.state.is_final() {
        return Ok(Cancel::Finished(st.state));
    }
    if st.pid == 0 {
        return Err(Error::file(
            dir,
            format!(
                "the job has not started yet (state {}); try again in a moment",
                st.state
            ),
        ));
    }
    if !st.process_alive() {
        return Err(Error::file(
            dir,
            format!(
                "status says {} but process {} is gone (the job died without recording it: \
                 stale); resume the session to continue it",
                st.state, st.pid
            ),
        ));
    }
    // only a process proven to be the session's job (same start time, and
    // it holds the session's lock) is signalled
    let pid = crate::session::job_process(dir)?;
    // SAFETY: kill(2) on the session's live job process, proven above.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } != 0 {
        return Err(Error::file(
            dir,
            format!(
                "cannot signal process {pid}: {}",
                std::io::Error::last_os_error()
            ),
        ));
    }
    Ok(Cancel::Signalled { pid })
}

/// Waits until the status of session folder `dir` records a final state
/// and returns it; an error when the job's process ends without recording
/// one, or after `timeout`.
pub fn wait_final(dir: &Path, timeout: Duration) -> Result<Status> {
    if slurm::SlurmRecord::read(dir)?.is_some() {
        // no process check: the job's process may be on another machine
        let v = slurm::wait_ended(dir, timeout)?;
        let st = read_status(dir)?;
        if st.state.is_final() {
            return Ok(st);
        }
        return Err(Error::file(
            dir,
            format!(
                "Slurm ended job {} ({}) without a recorded end: {}",
                v.record.job_id,
                v.describe(),
                v.combined.label
            ),
        ));
    }
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(st) = read_status(dir) {
            if st.state.is_final() {
                return Ok(st);
            }
            if st.pid != 0 && !st.process_alive() {
                return Err(Error::file(
                    dir,
                    format!(
                        "process {} ended without recording a final state (see {})",
                        st.pid,
                        dir.join(LOG_FILE).display()
                    ),
                ));
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::file(
                dir,
                format!(
                    "the job has not stopped after {} s (it stops after its current step)",
                    timeout.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
