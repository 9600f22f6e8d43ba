//! The Slurm launcher: a session's job run as a Slurm batch job.
//!
//! Rosetta talks to Slurm through its command-line tools, which every Slurm
//! version a lab runs has with the same flags: `sbatch --parsable` to
//! submit (and `sbatch --test-only` to check a request, partition, account,
//! GRES and time limit included, before any session folder is written),
//! `squeue` with a delimited `--format` for live jobs (and jobs ended less
//! than `MinJobAge` ago), `sacct --parsable2` for older ones where the
//! cluster keeps accounting, and `scancel`. `slurmrestd` needs a token and
//! a daemon many clusters do not run; the tools need nothing beyond the
//! login node's own Slurm setup.
//!
//! A Slurm session is a session folder like any other (written by
//! [`super::create`]) with two more files: `slurm.sh`, the batch script
//! (`exec ROSETTA train --resume DIR --background`: the job runs from the
//! session folder, which must be on a filesystem the nodes see), and
//! `slurm.json` ([`SlurmRecord`]): the options, the Slurm job id, earlier
//! ids of the session (resubmissions) and the last ended state seen, kept
//! so that the end of a job stays known after Slurm forgets it.
//!
//! `status.json` stays the truth about the training; Slurm's state is shown
//! beside it ([`combine`]): pending with its reason, running with its node,
//! and the ends Slurm alone knows (time limit, out of memory, node failure).
//! No process id is checked for a Slurm session: its process may run on
//! another machine, and its liveness comes from Slurm.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::session::{fmt_utc, now_unix, read_status, State, Status, LOG_FILE};
use crate::util::write_atomic;
use crate::{Error, Result};

/// A Slurm session's record (`slurm.json`).
pub const SLURM_FILE: &str = "slurm.json";
/// A Slurm session's batch script.
pub const SLURM_SCRIPT: &str = "slurm.sh";

/// What a Slurm job asks for; each `None` leaves Slurm's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--gres` (e.g. `gpu:1`).
    pub gres: Option<String>,
    /// `--time` (Slurm's spellings: `MM`, `HH:MM:SS`, `D-HH`...).
    pub time: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// More `sbatch` arguments, each one word (`--mem=8G`, `--qos=short`).
    pub extra: Vec<String>,
}

/// `sbatch` options an extra argument may not give: Rosetta's own (the
/// job's name, output, folder, array, the script), and those that change
/// what the job runs with (its environment). Each as `--long` and, where
/// sbatch has one, its `-x` short form.
const RESERVED_SBATCH: &[(&str, Option<&str>)] = &[
    ("--job-name", Some("-J")),
    ("--output", Some("-o")),
    ("--error", Some("-e")),
    ("--input", Some("-i")),
    ("--chdir", Some("-D")),
    ("--open-mode", None),
    ("--array", Some("-a")),
    ("--wrap", None),
    ("--parsable", None),
    ("--test-only", None),
    ("--export", None),
    ("--export-file", None),
    ("--get-user-env", None),
];

/// Whether `v` is a plain value of a Slurm option (a partition, account,
/// GRES or time limit: `gpu`, `gpu:a100:2`, `1-02:00:00`, `lab_x`): ASCII
/// letters, digits and `_ - . : , + = / @ ( )`, not starting with `-`.
fn plain_slurm_word(v: &str) -> bool {
    !v.is_empty()
        && !v.starts_with('-')
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:,+=/@()".contains(c))
}

impl SlurmOptions {
    /// The `sbatch` arguments of these options. An error: a value that is
    /// not a plain Slurm word ([`plain_slurm_word`]: no spaces, quotes or
    /// control characters), an extra argument that is not an option (it
    /// would be taken for the script), or one that sets what Rosetta sets
    /// itself or the job's environment ([`RESERVED_SBATCH`]: `--output`,
    /// `--chdir`, `--export`...).
    pub fn sbatch_args(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for (flag, v) in [
            ("--partition", &self.partition),
            ("--gres", &self.gres),
            ("--time", &self.time),
            ("--account", &self.account),
        ] {
            if let Some(v) = v {
                let v = v.trim();
                if !plain_slurm_word(v) {
                    return Err(Error::invalid(format!(
                        "{flag}: {v:?} is not a value (letters, digits and _-.:,+=/@() only)"
                    )));
                }
                out.push(format!("{flag}={v}"));
            }
        }
        for a in &self.extra {
            if !a.starts_with('-') || a.chars().any(char::is_control) {
                return Err(Error::invalid(format!(
                    "--sbatch-arg {a:?}: expected one sbatch option (e.g. --mem=8G)"
                )));
            }
            let name = a.split('=').next().unwrap_or(a);
            let reserved = RESERVED_SBATCH.iter().find(|(long, short)| {
                // `--exp` is sbatch's abbreviation of `--export`
                (name.starts_with("--") && name.len() > 3 && long.starts_with(name))
                    || short.is_some_and(|s| a.starts_with(s))
            });
            if let Some((long, _)) = reserved {
                return Err(Error::invalid(format!(
                    "--sbatch-arg {a:?}: {long} is not an extra option (Rosetta sets the job's \
                     name, output, folder and script itself, and a job runs with the \
                     environment of its submission)"
                )));
            }
            out.push(a.clone());
        }
        Ok(out)
    }
}

/// A Slurm job id: a job, or one task of a job array (`123_4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SlurmId {
    /// The job (for an array, the array's job id).
    pub job: u64,
    /// The array task, if any.
    pub task: Option<u32>,
}

impl std::fmt::Display for SlurmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.task {
            Some(t) => write!(f, "{}_{t}", self.job),
            None => write!(f, "{}", self.job),
        }
    }
}

impl std::str::FromStr for SlurmId {
    type Err = Error;
    /// `123`, `123_4`, or `sbatch --parsable`'s `123;cluster`.
    fn from_str(s: &str) -> Result<SlurmId> {
        let s = s.trim();
        let id = s.split(';').next().unwrap_or("");
        let bad = || Error::invalid(format!("not a Slurm job id: {s:?}"));
        let (job, task) = match id.split_once('_') {
            Some((j, t)) => (j, Some(t.parse().map_err(|_| bad())?)),
            None => (id, None),
        };
        Ok(SlurmId {
            job: job.parse().map_err(|_| bad())?,
            task,
        })
    }
}

impl TryFrom<String> for SlurmId {
    type Error = Error;
    fn try_from(s: String) -> Result<SlurmId> {
        s.parse()
    }
}

impl From<SlurmId> for String {
    fn from(id: SlurmId) -> String {
        id.to_string()
    }
}

/// Slurm's view of one job: its state word (`PENDING`, `RUNNING`,
/// `COMPLETED`, `TIMEOUT`, `OUT_OF_MEMORY`...), the pending reason, the
/// node(s).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmState {
    /// Slurm's state, upper case, one word.
    pub state: String,
    /// Why it waits (`Priority`, `Resources`...), empty or `None` otherwise.
    #[serde(default)]
    pub reason: String,
    /// The node list once it runs.
    #[serde(default)]
    pub node: String,
    /// The job's name (`rosetta:FOLDER`, `rosetta-sweep`), where `squeue`
    /// said it; empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The job's batch script, where `squeue` said it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// The job's working folder, where `squeue` said it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub workdir: String,
}

impl SlurmState {
    /// Whether Slurm has the job queued or running (anything but an end).
    pub fn is_active(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "REQUEUED"
                | "REQUEUE_FED"
                | "REQUEUE_HOLD"
                | "RESIZING"
                | "RESV_DEL_HOLD"
                | "SIGNALING"
                | "STAGE_OUT"
                | "STOPPED"
                | "SUSPENDED"
        )
    }

    /// One line: `PENDING (Priority)`, `RUNNING on node1`, `TIMEOUT`.
    pub fn describe(&self) -> String {
        let mut s = self.state.clone();
        if self.state == "PENDING" && !self.reason.is_empty() && self.reason != "None" {
            s.push_str(&format!(" ({})", self.reason));
        } else if !self.node.is_empty() && self.node != "(null)" {
            s.push_str(&format!(" on {}", self.node));
        }
        s
    }
}

/// `slurm.json`: how a session's job was submitted to Slurm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlurmRecord {
    /// The options it was submitted with (a resubmission reuses them).
    pub options: SlurmOptions,
    /// The `rosetta` program the batch script runs.
    pub exe: PathBuf,
    /// The current Slurm job.
    pub job_id: SlurmId,
    /// When it was submitted, UTC.
    pub submitted: String,
    /// Earlier jobs of this session (before resubmissions), oldest first.
    #[serde(default)]
    pub previous: Vec<SlurmId>,
    /// The last ended state Slurm reported for `job_id`, kept for when
    /// Slurm no longer knows the job.
    #[serde(default)]
    pub last_seen: Option<SlurmState>,
}

impl SlurmRecord {
    /// Reads `slurm.json` of session folder `dir`; `None` for a local
    /// session (no such file). The file is data, not instructions: read
    /// only as a regular file of at most [`crate::util::SMALL_FILE_LIMIT`]
    /// bytes, never through a link; [`SlurmRecord::resubmit_options`] is
    /// all of it a resubmission uses.
    pub fn read(dir: &Path) -> Result<Option<SlurmRecord>> {
        read_json_if_any(&dir.join(SLURM_FILE))
    }

    /// The options a resubmission of the session takes from this record:
    /// the partition, GRES, time limit and account, each kept only when it
    /// is a plain Slurm word ([`plain_slurm_word`]). Extra `sbatch`
    /// arguments are never replayed from the file (an edited record must
    /// not add `--export=LD_PRELOAD=…` to the job): they are given again
    /// with the resubmission, or left out. The second value lists what was
    /// recorded and is not used, for the caller to say.
    pub fn resubmit_options(&self) -> (SlurmOptions, Vec<String>) {
        let mut dropped = Vec::new();
        let mut keep = |flag: &str, v: &Option<String>| match v {
            Some(v) if plain_slurm_word(v.trim()) => Some(v.trim().to_string()),
            Some(v) => {
                dropped.push(format!("{flag}={v:?}"));
                None
            }
            None => None,
        };
        let o = &self.options;
        let opts = SlurmOptions {
            partition: keep("--partition", &o.partition),
            gres: keep("--gres", &o.gres),
            time: keep("--time", &o.time),
            account: keep("--account", &o.account),
            extra: Vec::new(),
        };
        dropped.extend(o.extra.iter().cloned());
        (opts, dropped)
    }

    /// Writes `slurm.json` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(SLURM_FILE);
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::file(&path, format!("cannot serialise: {e}")))?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes)
    }
}

/// How running a Slurm tool went wrong.
enum ToolError {
    /// It could not be run (not installed, not on PATH): the message.
    Missing(Error),
    /// It ran and refused: its own first error line.
    Refused(String),
}

impl ToolError {
    /// The error, a refusal prefixed with `what`.
    fn into_error(self, what: &str) -> Error {
        match self {
            ToolError::Missing(e) => e,
            ToolError::Refused(m) => Error::invalid(format!("{what}{m}")),
        }
    }
}

/// A JSON file of a session parsed, or `None` when it does not exist; a
/// malformed one is an error with its path and line.
/// Read as a regular file only (a FIFO or device is an error, never a
/// read that blocks or never ends), never through a symbolic link, and at
/// most [`crate::util::SMALL_FILE_LIMIT`] bytes.
pub(crate) fn read_json_if_any<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    use crate::util::{read_regular_if_exists, Links, SMALL_FILE_LIMIT};
    match read_regular_if_exists(path, Links::Refuse, SMALL_FILE_LIMIT)? {
        Some(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| crate::session::json_error(path, e)),
        None => Ok(None),
    }
}

/// Runs a Slurm tool; its standard output, or what went wrong on one line
/// (the tool missing, or its own first error line).
fn run_tool(program: &str, args: &[String]) -> std::result::Result<String, ToolError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            ToolError::Missing(if e.kind() == std::io::ErrorKind::NotFound {
                Error::invalid(format!(
                    "{program} not found: Slurm's command-line tools are not installed here \
                     (or not on PATH)"
                ))
            } else {
                Error::invalid(format!("cannot run {program}: {e}"))
            })
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(ToolError::Refused(
        first_error_line(&String::from_utf8_lossy(&out.stderr))
            .unwrap_or_else(|| format!("{program} failed ({})", out.status)),
    ))
}

/// [`run_tool`], a refusal said as `PROGRAM: reason`.
pub(crate) fn tool(program: &str, args: &[String]) -> Result<String> {
    run_tool(program, args).map_err(|e| e.into_error(&format!("{program}: ")))
}

/// The first line of a Slurm tool's error output that says something, its
/// `sbatch: error: ` prefix removed.
fn first_error_line(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(|l| {
            let l = l.trim();
            let l = l.split_once(": error: ").map(|(_, r)| r).unwrap_or(l);
            l.trim().to_string()
        })
        .find(|l| !l.is_empty())
}

/// Checks `opts` with Slurm itself (`sbatch --test-only`: partition,
/// account, GRES, time limit, extra arguments) without submitting
/// anything; the error is Slurm's own reason on one line.
pub fn check(opts: &SlurmOptions) -> Result<()> {
    let mut args = vec!["--test-only".to_string()];
    args.extend(opts.sbatch_args()?);
    args.extend(["--wrap".to_string(), "true".to_string()]);
    run_tool("sbatch", &args)
        .map(|_| ())
        .map_err(|e| e.into_error("Slurm refuses the job: "))
}

/// Whether the nodes of `partition` (the cluster's default when `None`)
/// have GPUs, by their generic resources (`sinfo -o %G`: `gpu:h100:8`);
/// `false` when Slurm cannot say.
pub fn partition_has_gpus(partition: Option<&str>) -> bool {
    let mut args = vec!["-h".to_string(), "-o".to_string(), "%G".to_string()];
    if let Some(p) = partition {
        args.push(format!("--partition={p}"));
    }
    run_tool("sinfo", &args).is_ok_and(|out| gres_has_gpus(&out))
}

/// Whether `sinfo -o %G` output names a GPU resource.
fn gres_has_gpus(out: &str) -> bool {
    out.lines()
        .flat_map(|l| l.split(','))
        .any(|g| g.trim().starts_with("gpu"))
}

/// `s` as one shell word.
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub(crate) fn utf8(p: &Path) -> Result<&str> {
    p.to_str()
        .ok_or_else(|| Error::file(p, "a path for a Slurm job must be UTF-8"))
}

/// Error when `p` cannot appear in an `sbatch --output` path: Slurm reads
/// `%` there as a pattern.
pub fn check_path(p: &Path) -> Result<()> {
    if utf8(p)?.contains('%') {
        return Err(Error::file(
            p,
            "a Slurm session's path must not contain `%` (sbatch reads it as a pattern)",
        ));
    }
    Ok(())
}

/// Submits `script` with `sbatch --parsable` and the options; returns the
/// job id.
/// Rosetta's own arguments (`head`) come after the options, so that
/// sbatch, where the last of an option wins, keeps them.
pub(crate) fn sbatch(script: &Path, opts: &SlurmOptions, head: &[String]) -> Result<SlurmId> {
    let mut args = vec!["--parsable".to_string()];
    args.extend(opts.sbatch_args()?);
    args.extend(head.iter().cloned());
    args.push(utf8(script)?.to_string());
    let out = run_tool("sbatch", &args).map_err(|e| e.into_error("Slurm refuses the job: "))?;
    out.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .parse()
}

/// Submits the job of session folder `dir` (absolute) as a Slurm batch
/// job running `exe train --resume DIR --background` on the allocated
/// node, its output appended to the session's `log.txt`; writes
/// `slurm.sh` and `slurm.json` (a resubmission keeps the earlier job ids).
pub fn submit(dir: &Path, opts: &SlurmOptions, exe: &Path) -> Result<SlurmRecord> {
    check_path(dir)?;
    let script = dir.join(SLURM_SCRIPT);
    let text = format!(
        "#!/bin/sh\n# written by rosetta: runs this session's job on the allocated node\n\
         exec {} train --resume {} --background\n",
        sh_quote(utf8(exe)?),
        sh_quote(utf8(dir)?)
    );
    write_atomic(&script, text.as_bytes())?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let head = vec![
        format!("--job-name=rosetta:{name}"),
        format!("--output={}", utf8(&dir.join(LOG_FILE))?),
        "--open-mode=append".to_string(),
        format!("--chdir={}", utf8(dir)?),
    ];
    let job_id = sbatch(&script, opts, &head)?;
    let previous = match SlurmRecord::read(dir) {
        Ok(Some(r)) => {
            let mut p = r.previous;
            p.push(r.job_id);
            p
        }
        _ => Vec::new(),
    };
    let rec = SlurmRecord {
        options: opts.clone(),
        exe: exe.to_path_buf(),
        job_id,
        submitted: fmt_utc(now_unix()),
        previous,
        last_seen: None,
    };
    rec.write(dir)?;
    Ok(rec)
}

/// Submits the jobs of session folders `dirs` (absolute) as one job array
/// (task `i` runs `dirs[i]`), the script in `script`; each task's output
/// goes to `log_pattern` (with `%a`, the task). Writes each session's
/// `slurm.json`. Returns the array's job id.
pub fn submit_array(
    dirs: &[PathBuf],
    script: &Path,
    log_pattern: &str,
    opts: &SlurmOptions,
    exe: &Path,
    max_parallel: Option<usize>,
) -> Result<u64> {
    let mut text = String::from(
        "#!/bin/sh\n# written by rosetta: task i of the array runs the job of session i\n\
         case \"$SLURM_ARRAY_TASK_ID\" in\n",
    );
    for (i, d) in dirs.iter().enumerate() {
        check_path(d)?;
        text.push_str(&format!("{i}) d={} ;;\n", sh_quote(utf8(d)?)));
    }
    text.push_str(
        "*) echo \"rosetta: no session for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 1 ;;\nesac\n",
    );
    text.push_str(&format!(
        "exec {} train --resume \"$d\" --background\n",
        sh_quote(utf8(exe)?)
    ));
    write_atomic(script, text.as_bytes())?;
    let mut array = format!("--array=0-{}", dirs.len().saturating_sub(1));
    if let Some(n) = max_parallel {
        array.push_str(&format!("%{n}"));
    }
    let head = vec![
        array,
        "--job-name=rosetta-sweep".to_string(),
        format!("--output={log_pattern}"),
        "--open-mode=append".to_string(),
    ];
    let id = sbatch(script, opts, &head)?;
    for (i, d) in dirs.iter().enumerate() {
        SlurmRecord {
            options: opts.clone(),
            exe: exe.to_path_buf(),
            job_id: SlurmId {
                job: id.job,
                task: Some(i as u32),
            },
            submitted: fmt_utc(now_unix()),
            previous: Vec::new(),
            last_seen: None,
        }
        .write(d)?;
    }
    Ok(id.job)
}

/// Slurm's state of each of `ids` that it knows: `squeue` for queued,
/// running and recently ended jobs, then `sacct` (where the cluster keeps
/// accounting) for the others. Ids neither knows are absent. Errors only
/// when `squeue` cannot be run at all.
pub fn query(ids: &[SlurmId]) -> Result<BTreeMap<SlurmId, SlurmState>> {
    let mut out = BTreeMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let list = ids
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let args: Vec<String> = [
        "-h",
        "-r",
        "-t",
        "all",
        "-o",
        "%i|%T|%r|%N|%j|%o|%Z",
        "-j",
        &list,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match tool("squeue", &args) {
        Ok(text) => {
            for l in text.lines() {
                let f: Vec<&str> = l.trim().splitn(7, '|').collect();
                if f.len() < 4 {
                    continue;
                }
                let field = |i: usize| f.get(i).map(|s| s.trim().to_string()).unwrap_or_default();
                if let Ok(id) = f[0].parse::<SlurmId>() {
                    out.insert(
                        id,
                        SlurmState {
                            state: field(1),
                            reason: field(2),
                            node: field(3),
                            name: field(4),
                            command: field(5),
                            workdir: field(6),
                        },
                    );
                }
            }
        }
        // every id unknown: squeue says "Invalid job id specified"
        Err(e) if e.to_string().contains("Invalid job id") => {}
        Err(e) => return Err(e),
    }
    let missing: Vec<String> = ids
        .iter()
        .filter(|i| !out.contains_key(i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        let args: Vec<String> = [
            "-n",
            "-X",
            "--parsable2",
            "-o",
            "JobID,State,NodeList",
            "-j",
            &missing.join(","),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // no accounting on this cluster: nothing more to learn
        if let Ok(text) = tool("sacct", &args) {
            for l in text.lines() {
                let f: Vec<&str> = l.trim().split('|').collect();
                if let [id, state, node] = f[..] {
                    if let Ok(id) = id.parse::<SlurmId>() {
                        // "CANCELLED by 1000"
                        let state = state.split_whitespace().next().unwrap_or("").to_string();
                        out.insert(
                            id,
                            SlurmState {
                                state,
                                reason: String::new(),
                                node: node.trim().to_string(),
                                name: String::new(),
                                command: String::new(),
                                workdir: String::new(),
                            },
                        );
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The state to show for a Slurm session: the training's recorded status
/// and Slurm's state of its job together. `state` is what filters and
/// resume go by; `label` is the word to show (`pending (Priority)`,
/// `timeout`, `out-of-memory`...).
#[derive(Debug, Clone, PartialEq)]
pub struct Combined {
    /// The state as a job state.
    pub state: State,
    /// What to show.
    pub label: String,
}

/// Combines a session's recorded status with Slurm's state of its job
/// (`None`: Slurm does not know the job). A recorded end wins (the job
/// wrote it), except that a time limit or memory kill Slurm reports is
/// said as such; a job Slurm has ended without a recorded end is failed
/// with Slurm's reason, never `running`.
pub fn combine(recorded: State, slurm: Option<&SlurmState>) -> Combined {
    let c = |state: State, label: &str| Combined {
        state,
        label: label.to_string(),
    };
    let Some(s) = slurm else {
        return if recorded.is_final() {
            c(recorded, recorded.as_str())
        } else {
            c(State::Failed, "lost (unknown to Slurm)")
        };
    };
    if s.is_active() {
        // ending for its time limit: the job's own record (cancelled, by
        // the SIGTERM) is not the reason
        if s.state == "COMPLETING" && s.reason == "TimeLimit" && recorded != State::Done {
            return c(State::Failed, "timeout");
        }
        if recorded.is_final() {
            return c(recorded, recorded.as_str());
        }
        return match s.state.as_str() {
            "PENDING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" => {
                let mut l = "pending".to_string();
                if !s.reason.is_empty() && s.reason != "None" {
                    l.push_str(&format!(" ({})", s.reason));
                }
                c(State::Queued, &l)
            }
            "SUSPENDED" | "STOPPED" => c(recorded, "suspended"),
            _ if recorded == State::Running => c(State::Running, "running"),
            _ => c(State::Queued, "starting"),
        };
    }
    if recorded == State::Done {
        return c(State::Done, "done");
    }
    match s.state.as_str() {
        "TIMEOUT" | "DEADLINE" => c(State::Failed, "timeout"),
        "OUT_OF_MEMORY" => c(State::Failed, "out-of-memory"),
        "CANCELLED" if !recorded.is_final() || recorded == State::Cancelled => {
            c(State::Cancelled, "cancelled")
        }
        _ if recorded.is_final() => c(recorded, recorded.as_str()),
        "COMPLETED" => c(State::Failed, "failed (ended without recording it)"),
        other => Combined {
            state: State::Failed,
            label: format!("failed ({})", other.to_lowercase().replace('_', "-")),
        },
    }
}

/// A Slurm session as shown: its record, Slurm's state of its job (or the
/// last ended state recorded, when Slurm has forgotten it) and the two
/// combined.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmView {
    /// `slurm.json`.
    pub record: SlurmRecord,
    /// Slurm's state of the job, if known.
    pub slurm: Option<SlurmState>,
    /// Recorded status and Slurm state together.
    pub combined: Combined,
}

impl SlurmView {
    /// `123 RUNNING on node1`, `124 PENDING (Priority)`, `125 unknown`.
    pub fn describe(&self) -> String {
        match &self.slurm {
            Some(s) => format!("{} {}", self.record.job_id, s.describe()),
            None => format!("{} unknown", self.record.job_id),
        }
    }
}

/// The Slurm view of each Slurm session among `sessions` (folder and
/// recorded status), with one `squeue` (and at most one `sacct`) for all;
/// local sessions are absent. An ended state seen for the first time is
/// recorded in the session's `slurm.json`. When Slurm cannot be asked
/// (tools missing), each view says its job is unknown and the problem is
/// returned beside the views.
pub fn views(
    sessions: &[(&Path, Option<&Status>)],
) -> (BTreeMap<PathBuf, SlurmView>, Option<String>) {
    let mut recs = Vec::new();
    let mut problem = None;
    for (dir, st) in sessions {
        match SlurmRecord::read(dir) {
            Ok(Some(r)) => recs.push((dir.to_path_buf(), *st, r)),
            Ok(None) => {}
            Err(e) => problem = Some(e.to_string()),
        }
    }
    let ids: Vec<SlurmId> = recs.iter().map(|(_, _, r)| r.job_id).collect();
    let known = match query(&ids) {
        Ok(k) => k,
        Err(e) => {
            problem = Some(e.to_string());
            BTreeMap::new()
        }
    };
    let mut out = BTreeMap::new();
    for (dir, st, mut rec) in recs {
        let slurm = match known.get(&rec.job_id) {
            Some(s) => {
                if !s.is_active() && rec.last_seen.as_ref() != Some(s) {
                    rec.last_seen = Some(s.clone());
                    // best effort: a read-only sessions folder still shows it
                    let _ = rec.write(&dir);
                }
                Some(s.clone())
            }
            None => rec.last_seen.clone(),
        };
        let recorded = st.map(|s| s.state).unwrap_or(State::Failed);
        let combined = combine(recorded, slurm.as_ref());
        out.insert(
            dir,
            SlurmView {
                record: rec,
                slurm,
                combined,
            },
        );
    }
    (out, problem)
}

/// The Slurm view of session folder `dir`; `None` for a local session.
pub fn view(dir: &Path) -> Result<Option<SlurmView>> {
    if SlurmRecord::read(dir)?.is_none() {
        return Ok(None);
    }
    let st = read_status(dir).ok();
    let (mut v, problem) = views(&[(dir, st.as_ref())]);
    if let Some(p) = problem {
        return Err(Error::file(dir, p));
    }
    Ok(v.remove(dir))
}

/// Error when the Slurm job of session folder `dir` is still queued or
/// running (a second submission would run the session twice).
pub fn check_not_active(dir: &Path) -> Result<()> {
    if let Some(v) = view(dir)? {
        if let Some(s) = v.slurm.as_ref().filter(|s| s.is_active()) {
            return Err(Error::file(
                dir,
                format!(
                    "the session's Slurm job {} is still {} (cancel it first)",
                    v.record.job_id,
                    s.describe()
                ),
            ));
        }
    }
    Ok(())
}

/// `scancel`s the Slurm job of session folder `dir`; the job receives
/// SIGTERM (Slurm's `KillWait` later, SIGKILL), keeps its checkpoints and
/// records `cancelled`. Returns the job id, or `None` when Slurm has ended
/// the job already. The job id `slurm.json` records is not trusted alone:
/// the job is cancelled only when Slurm says it is this session's
/// ([`check_job_is_session`]), else an error and nothing cancelled.
pub fn cancel(dir: &Path) -> Result<Option<SlurmId>> {
    let rec = SlurmRecord::read(dir)?.ok_or_else(|| Error::file(dir, "not a Slurm session"))?;
    // Slurm's own word, never the state the record says it last saw
    let known = query(&[rec.job_id])?;
    let Some(s) = known.get(&rec.job_id).filter(|s| s.is_active()) else {
        return Ok(None);
    };
    check_job_is_session(dir, rec.job_id, s)?;
    tool("scancel", &[rec.job_id.to_string()])?;
    Ok(Some(rec.job_id))
}

/// Error unless Slurm job `id`, as `squeue` describes it (`s`), is the
/// job Rosetta submitted for session folder `dir`: a session's own job is
/// named `rosetta:FOLDER` and runs in the session folder; a sweep's task
/// is named `rosetta-sweep` and its array script runs `dir` as task `id`'s
/// session. A `slurm.json` edited to name another job (another session's,
/// someone else's) fails this.
pub fn check_job_is_session(dir: &Path, id: SlurmId, s: &SlurmState) -> Result<()> {
    let canon = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let same_dir = |p: &str| !p.is_empty() && std::fs::canonicalize(p).is_ok_and(|p| p == canon);
    let ours = match id.task {
        None => {
            let folder = canon
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            s.name == format!("rosetta:{folder}") && same_dir(&s.workdir)
        }
        Some(task) => {
            let line = format!("{task}) d={} ;;", sh_quote(utf8(&canon)?));
            s.name == "rosetta-sweep"
                && !s.command.is_empty()
                && crate::util::read_regular_text(
                    Path::new(&s.command),
                    crate::util::Links::Follow,
                    crate::util::SMALL_FILE_LIMIT,
                )
                .is_ok_and(|t| t.lines().any(|l| l == line))
        }
    };
    if ours {
        return Ok(());
    }
    Err(Error::file(
        dir.join(SLURM_FILE),
        format!(
            "records Slurm job {id}, but Slurm says that job is not this session's \
             (its name {:?}, its folder {:?}): the record may have been edited; \
             nothing cancelled (cancel the job with scancel yourself if it is yours)",
            crate::util::strip_controls(&s.name),
            crate::util::strip_controls(&s.workdir),
        ),
    ))
}

/// Waits until the job of Slurm session `dir` has ended: its status
/// records a final state, or Slurm has ended it and (if it had started)
/// its process has had `KillWait` to record one. Returns the view then.
pub fn wait_ended(dir: &Path, timeout: Duration) -> Result<SlurmView> {
    let deadline = Instant::now() + timeout;
    let mut ended_since: Option<Instant> = None;
    loop {
        let st = read_status(dir).ok();
        let v = view(dir)?.ok_or_else(|| Error::file(dir, "not a Slurm session"))?;
        let slurm_ended = !v.slurm.as_ref().is_some_and(|s| s.is_active());
        let recorded_end = st.as_ref().is_some_and(|s| s.state.is_final());
        if recorded_end && slurm_ended {
            return Ok(v);
        }
        if slurm_ended {
            let since = *ended_since.get_or_insert_with(Instant::now);
            let started = st.as_ref().is_some_and(|s| s.pid != 0);
            if !started || since.elapsed() > Duration::from_secs(5) {
                return Ok(v);
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::file(
                dir,
                format!(
                    "the Slurm job {} has not ended after {} s ({})",
                    v.record.job_id,
                    timeout.as_secs(),
                    v.describe()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: &str, reason: &str) -> SlurmState {
        SlurmState {
            state: state.into(),
            reason: reason.into(),
            node: "n1".into(),
            ..Default::default()
        }
    }

    #[test]
    fn gpu_resources_are_found_in_sinfo_output() {
        assert!(gres_has_gpus("gpu:h100:8(S:0-1)\n"));
        assert!(gres_has_gpus("(null)\nbandwidth:1,gpu:a100:4\n"));
        assert!(!gres_has_gpus("(null)\n"));
        assert!(!gres_has_gpus(""));
    }

    #[test]
    fn ids_parse_and_print() {
        for s in ["12", "12_3"] {
            assert_eq!(s.parse::<SlurmId>().unwrap().to_string(), s);
        }
        assert_eq!("77;cluster\n".parse::<SlurmId>().unwrap().job, 77);
        for bad in ["", "x", "12_", "12_x", "-1"] {
            assert!(bad.parse::<SlurmId>().is_err(), "{bad}");
        }
    }

    #[test]
    fn slurm_ends_are_said_and_never_running() {
        let label = |rec, s: Option<&SlurmState>| combine(rec, s).label;
        assert_eq!(
            label(State::Queued, Some(&st("PENDING", "Priority"))),
            "pending (Priority)"
        );
        assert_eq!(label(State::Running, Some(&st("RUNNING", ""))), "running");
        assert_eq!(label(State::Queued, Some(&st("RUNNING", ""))), "starting");
        assert_eq!(label(State::Cancelled, Some(&st("TIMEOUT", ""))), "timeout");
        assert_eq!(
            label(State::Cancelled, Some(&st("COMPLETING", "TimeLimit"))),
            "timeout"
        );
        assert_eq!(
            label(State::Cancelled, Some(&st("COMPLETING", "None"))),
            "cancelled"
        );
        assert_eq!(
            label(State::Running, Some(&st("OUT_OF_MEMORY", ""))),
            "out-of-memory"
        );
        assert_eq!(label(State::Done, Some(&st("TIMEOUT", ""))), "done");
        assert_eq!(
            label(State::Queued, Some(&st("CANCELLED", ""))),
            "cancelled"
        );
        assert_eq!(
            label(State::Running, Some(&st("NODE_FAIL", ""))),
            "failed (node-fail)"
        );
        assert_eq!(label(State::Running, None), "lost (unknown to Slurm)");
        for s in [
            "TIMEOUT",
            "OUT_OF_MEMORY",
            "COMPLETED",
            "FAILED",
            "CANCELLED",
        ] {
            assert!(combine(State::Running, Some(&st(s, ""))).state.is_final());
        }
    }

    #[test]
    fn options_become_sbatch_arguments_or_a_clear_error() {
        let o = SlurmOptions {
            partition: Some("gpu".into()),
            time: Some("2:00:00".into()),
            extra: vec!["--mem=8G".into()],
            ..Default::default()
        };
        assert_eq!(
            o.sbatch_args().unwrap(),
            ["--partition=gpu", "--time=2:00:00", "--mem=8G"]
        );
        let bad = SlurmOptions {
            extra: vec!["script.sh".into()],
            ..Default::default()
        };
        assert!(bad
            .sbatch_args()
            .unwrap_err()
            .to_string()
            .contains("--sbatch-arg"));
        let bad = SlurmOptions {
            partition: Some(" ".into()),
            ..Default::default()
        };
        assert!(bad.sbatch_args().is_err());
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
        assert_eq!(
            first_error_line("sbatch: error: invalid partition specified: nope\nmore\n").unwrap(),
            "invalid partition specified: nope"
        );
    }
}
