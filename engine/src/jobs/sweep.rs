//! Sweeps: one session per point of a grid of settings (times each seed),
//! grouped as one sweep.
//!
//! [`create`] checks every point's request before anything is written, then
//! makes the sessions `<root>/<id>-<i>` (`<id>` is `<model>-sweep-<UTC
//! stamp>`), each with a `sweep.json` ([`SweepMember`]: the sweep id, its
//! index, its point and seed). [`submit_slurm`] submits them as one Slurm
//! job array (task `i` runs session `i`; the script is kept in
//! `<root>/.sweeps/<id>/array.sh`); [`run_local`] runs them as detached
//! processes on this machine, at most N at a time. [`summaries`] groups a
//! root's sessions by sweep and point: the settings that vary, the seeds,
//! and each best figure's mean and standard deviation over the seeds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::slurm::{self, SlurmOptions};
use super::{check_request, JobRequest, Launched};
use crate::session::runs::Run;
use crate::session::{fmt_stamp, now_unix, read_status, JobLife, State};
use crate::util::write_atomic;
use crate::{Error, Result};

/// A session's membership of a sweep.
pub const SWEEP_FILE: &str = "sweep.json";
/// Folder under a sessions root that keeps each sweep's array script.
pub const SWEEPS_DIR: &str = ".sweeps";

/// `sweep.json`: which sweep a session belongs to, and its point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepMember {
    /// The sweep id (`<model>-sweep-<stamp>`).
    pub id: String,
    /// Index of the session in the sweep (its array task on Slurm).
    pub index: usize,
    /// The grid's settings at this point.
    pub point: BTreeMap<String, String>,
    /// The seed.
    pub seed: u64,
}

impl SweepMember {
    /// `sweep.json` of session folder `dir`; `None` when it is no sweep's.
    pub fn read(dir: &Path) -> Result<Option<SweepMember>> {
        slurm::read_json_if_any(&dir.join(SWEEP_FILE))
    }
}

/// A sweep as asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRequest {
    /// Workspace, model, fixed settings, device and sessions root
    /// (`session` must be `None`; `seed` is replaced by `seeds`).
    pub base: JobRequest,
    /// The grid: each setting with its values, in the order given.
    pub grid: Vec<(String, Vec<String>)>,
    /// Seeds; each point is trained once per seed.
    pub seeds: Vec<u64>,
}

/// `KEY=V1,V2,...` as a grid axis; an empty key, no value or an empty
/// value is an error.
pub fn parse_axis(spec: &str) -> Result<(String, Vec<String>)> {
    let (k, vs) = spec
        .split_once('=')
        .ok_or_else(|| Error::invalid(format!("--grid {spec}: expected KEY=V1,V2,...")))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(Error::invalid(format!("--grid {spec}: empty key")));
    }
    let vals: Vec<String> = vs.split(',').map(|v| v.trim().to_string()).collect();
    if vals.iter().any(String::is_empty) {
        return Err(Error::invalid(format!("--grid {spec}: an empty value")));
    }
    Ok((k.to_string(), vals))
}

/// The sweep's points, seeds innermost: `(settings of the point, seed)`.
pub fn points(req: &SweepRequest) -> Vec<(BTreeMap<String, String>, u64)> {
    let mut pts = vec![BTreeMap::new()];
    for (k, vs) in &req.grid {
        pts = pts
            .into_iter()
            .flat_map(|p| {
                vs.iter().map(move |v| {
                    let mut q = p.clone();
                    q.insert(k.clone(), v.clone());
                    q
                })
            })
            .collect();
    }
    pts.into_iter()
        .flat_map(|p| req.seeds.iter().map(move |&s| (p.clone(), s)))
        .collect()
}

/// A sweep made by [`create`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    /// Its id.
    pub id: String,
    /// Its session folders (absolute), by index.
    pub dirs: Vec<PathBuf>,
    /// Its folder under `<root>/.sweeps`.
    pub dir: PathBuf,
}

/// Checks every point of `req` (each setting against the model, each
/// value, a grid key given twice or also as a fixed setting, `seed` in the
/// grid, repeated seeds), then makes the sweep's sessions (state `queued`)
/// with their `sweep.json`. Nothing is written when a point is refused.
pub fn create(req: &SweepRequest) -> Result<Sweep> {
    if req.base.session.is_some() {
        return Err(Error::invalid(
            "a sweep names its own sessions: no --session",
        ));
    }
    if req.grid.is_empty() {
        return Err(Error::invalid(
            "a sweep needs at least one --grid KEY=V1,V2",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (k, vs) in &req.grid {
        if k == "seed" {
            return Err(Error::invalid("--grid seed=...: give seeds with --seeds"));
        }
        if !seen.insert(k) {
            return Err(Error::invalid(format!("--grid {k} given twice")));
        }
        if req.base.settings.contains_key(k) {
            return Err(Error::invalid(format!(
                "{k} given both as --grid and as a fixed setting"
            )));
        }
        let mut u = vs.clone();
        u.sort();
        u.dedup();
        if u.len() != vs.len() {
            return Err(Error::invalid(format!("--grid {k}: a value given twice")));
        }
    }
    let mut s = req.seeds.clone();
    s.sort_unstable();
    s.dedup();
    if s.is_empty() || s.len() != req.seeds.len() {
        return Err(Error::invalid("--seeds: give distinct seeds, at least one"));
    }
    let pts = points(req);
    let reqs: Vec<JobRequest> = pts
        .iter()
        .map(|(p, seed)| {
            let mut r = req.base.clone();
            r.settings.extend(p.clone());
            r.seed = *seed;
            r
        })
        .collect();
    for r in &reqs {
        check_request(r)?;
    }
    slurm::check_path(&req.base.root)?;
    let root = &req.base.root;
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    let root = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
    let sweeps = root.join(SWEEPS_DIR);
    std::fs::create_dir_all(&sweeps).map_err(|e| Error::io(&sweeps, e))?;
    let base = format!("{}-sweep-{}", req.base.model, fmt_stamp(now_unix()));
    let (id, dir) = (1..10_000)
        .find_map(|i| {
            let id = if i == 1 {
                base.clone()
            } else {
                format!("{base}-{i}")
            };
            let d = sweeps.join(&id);
            // taken when its folder or a session of that name exists
            if root.join(format!("{id}-0")).exists() {
                return None;
            }
            std::fs::create_dir(&d).ok().map(|_| (id, d))
        })
        .ok_or_else(|| Error::file(&sweeps, "cannot find a free sweep name"))?;
    let mut dirs = Vec::new();
    for (i, (mut r, (point, seed))) in reqs.into_iter().zip(pts).enumerate() {
        let d = root.join(format!("{id}-{i}"));
        r.session = Some(d.clone());
        let s = super::create(&r)?;
        let m = SweepMember {
            id: id.clone(),
            index: i,
            point,
            seed,
        };
        let mut bytes = serde_json::to_vec_pretty(&m)
            .map_err(|e| Error::file(&s.dir, format!("cannot serialise: {e}")))?;
        bytes.push(b'\n');
        write_atomic(&s.dir.join(SWEEP_FILE), &bytes)?;
        dirs.push(d);
    }
    Ok(Sweep { id, dirs, dir })
}

/// Submits a sweep's sessions as one Slurm job array (`--array=0-N-1`, with
/// `%max_parallel` when given), each task's output appended to its
/// session's `log.txt`. Returns the array's job id.
pub fn submit_slurm(
    sweep: &Sweep,
    opts: &SlurmOptions,
    exe: &Path,
    max_parallel: Option<usize>,
) -> Result<u64> {
    let root = sweep
        .dirs
        .first()
        .and_then(|d| d.parent())
        .ok_or_else(|| Error::invalid("an empty sweep"))?;
    let pattern = root
        .join(format!("{}-%a", sweep.id))
        .join(crate::session::LOG_FILE);
    let pattern = pattern
        .to_str()
        .ok_or_else(|| Error::file(&pattern, "not UTF-8"))?
        .to_string();
    slurm::submit_array(
        &sweep.dirs,
        &sweep.dir.join("array.sh"),
        &pattern,
        opts,
        exe,
        max_parallel,
    )
}

/// Runs a sweep's sessions on this machine as detached processes, at most
/// `parallel` at a time, until every one has ended; `started` is told of
/// each launch. A session that cannot be launched is recorded `failed` and
/// the sweep goes on.
pub fn run_local(
    sweep: &Sweep,
    exe: &Path,
    parallel: usize,
    started: &mut dyn FnMut(&Launched),
) -> Result<()> {
    let parallel = parallel.max(1);
    let mut next = 0;
    let mut running: Vec<PathBuf> = Vec::new();
    loop {
        running.retain(|d| {
            read_status(d)
                .map(|s| !s.effective_state().is_final())
                .unwrap_or(false)
        });
        while running.len() < parallel && next < sweep.dirs.len() {
            let d = &sweep.dirs[next];
            next += 1;
            match super::launch(d, exe) {
                Ok(l) => {
                    started(&l);
                    running.push(l.dir);
                }
                Err(e) => {
                    if let Ok(mut life) = JobLife::open(d) {
                        let _ = life.failed(e.to_string());
                    }
                }
            }
        }
        if running.is_empty() && next >= sweep.dirs.len() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Mean and sample standard deviation (`None` for one value); `None` for
/// no values or a non-finite one.
pub fn mean_sd(xs: &[f64]) -> Option<(f64, Option<f64>)> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = (xs.len() > 1)
        .then(|| (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    Some((mean, sd))
}

/// One point of a sweep: its settings, sessions and figures over seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct PointSummary {
    /// The point's settings.
    pub point: BTreeMap<String, String>,
    /// Seeds of its sessions.
    pub seeds: Vec<u64>,
    /// Its session folders.
    pub dirs: Vec<PathBuf>,
    /// Each session's state to show.
    pub states: Vec<State>,
    /// Each best figure over the sessions that are done: mean, standard
    /// deviation (over two or more) and how many sessions it is over.
    pub figures: BTreeMap<String, (f64, Option<f64>, usize)>,
}

/// One sweep under a sessions root.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepSummary {
    /// The sweep id.
    pub id: String,
    /// Model of its sessions.
    pub model: String,
    /// The settings that vary between points, in name order.
    pub varying: Vec<String>,
    /// Its points, in index order of their first session.
    pub points: Vec<PointSummary>,
}

impl SweepSummary {
    /// Number of sessions in the sweep.
    pub fn sessions(&self) -> usize {
        self.points.iter().map(|p| p.dirs.len()).sum()
    }
    /// How many sessions are in each state.
    pub fn state_counts(&self) -> BTreeMap<&'static str, usize> {
        let mut m = BTreeMap::new();
        for s in self.points.iter().flat_map(|p| &p.states) {
            *m.entry(s.as_str()).or_insert(0) += 1;
        }
        m
    }
}

/// A sweep member's figures as [`group`] takes them: its folder, model,
/// state to show and best figures.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberFigures {
    /// The session folder.
    pub dir: PathBuf,
    /// Its model.
    pub model: String,
    /// Its state to show (Slurm's view included).
    pub state: State,
    /// Its best value of each recorded figure.
    pub best: BTreeMap<String, f64>,
}

/// The sweeps among `runs` (sessions with a `sweep.json`), by id; `state`
/// gives each session's state to show (the caller's, Slurm's view
/// included). Figures are the runs' best figures over the sessions that
/// are done ([`group`]).
pub fn summaries(runs: &[Run], state: &dyn Fn(&Run) -> State) -> Vec<SweepSummary> {
    let members = runs
        .iter()
        .filter_map(|r| {
            let m = SweepMember::read(&r.entry.dir).ok().flatten()?;
            Some((
                m,
                MemberFigures {
                    dir: r.entry.dir.clone(),
                    model: r
                        .entry
                        .config
                        .as_ref()
                        .map(|c| c.model.clone())
                        .unwrap_or_default(),
                    state: state(r),
                    best: r.best.iter().map(|(k, (v, _))| (k.clone(), *v)).collect(),
                },
            ))
        })
        .collect();
    group(members)
}

/// Sweep members grouped by sweep id and point: the settings that vary,
/// and each point's figures (mean ± sd over its sessions that are done).
/// The CLI's `rosetta jobs` and the workbench's Jobs table both group so.
pub fn group(members: Vec<(SweepMember, MemberFigures)>) -> Vec<SweepSummary> {
    let mut by_id: BTreeMap<String, Vec<(SweepMember, MemberFigures)>> = BTreeMap::new();
    for (m, f) in members {
        by_id.entry(m.id.clone()).or_default().push((m, f));
    }
    by_id
        .into_iter()
        .map(|(id, mut members)| {
            members.sort_by_key(|(m, _)| m.index);
            let model = members
                .first()
                .map(|(_, f)| f.model.clone())
                .unwrap_or_default();
            let mut varying: Vec<String> = Vec::new();
            for (m, _) in &members {
                for (k, v) in &m.point {
                    let differs = members.iter().any(|(o, _)| o.point.get(k) != Some(v));
                    if differs && !varying.contains(k) {
                        varying.push(k.clone());
                    }
                }
            }
            varying.sort();
            let mut points: Vec<PointSummary> = Vec::new();
            let mut values: Vec<BTreeMap<String, Vec<f64>>> = Vec::new();
            for (m, f) in &members {
                let i = match points.iter().position(|p| p.point == m.point) {
                    Some(i) => i,
                    None => {
                        points.push(PointSummary {
                            point: m.point.clone(),
                            seeds: Vec::new(),
                            dirs: Vec::new(),
                            states: Vec::new(),
                            figures: BTreeMap::new(),
                        });
                        values.push(BTreeMap::new());
                        points.len() - 1
                    }
                };
                let p = &mut points[i];
                p.seeds.push(m.seed);
                p.dirs.push(f.dir.clone());
                p.states.push(f.state);
                if f.state == State::Done {
                    for (k, v) in &f.best {
                        values[i].entry(k.clone()).or_default().push(*v);
                    }
                }
            }
            for (p, vals) in points.iter_mut().zip(values) {
                for (k, xs) in vals {
                    if let Some((m, sd)) = mean_sd(&xs) {
                        p.figures.insert(k, (m, sd, xs.len()));
                    }
                }
            }
            SweepSummary {
                id,
                model,
                varying,
                points,
            }
        })
        .collect()
}

/// A mean with its standard deviation to `decimals` places: `0.4123 ±
/// 0.0132`, the mean alone when there is no deviation (one value).
pub fn fmt_mean_sd(m: f64, sd: Option<f64>, decimals: usize) -> String {
    match sd {
        Some(sd) => format!("{m:.decimals$} ± {sd:.decimals$}"),
        None => format!("{m:.decimals$}"),
    }
}

impl SweepSummary {
    /// Point `i` by its varying settings (`dim=64 lr=0.01`), `point N`
    /// (from 1) when no setting varies.
    pub fn point_label(&self, i: usize) -> String {
        let Some(p) = self.points.get(i) else {
            return format!("point {}", i + 1);
        };
        if self.varying.is_empty() {
            return format!("point {}", i + 1);
        }
        self.varying
            .iter()
            .map(|k| format!("{k}={}", p.point.get(k).map_or("-", String::as_str)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Each session of the sweep labelled by its point's varying settings
    /// (`dim=64 lr=0.01`), with ` seed=S` when a point has several seeds
    /// (`point N` when no setting varies), in index order: what `rosetta
    /// compare --sweep` compares.
    pub fn labelled(&self) -> Vec<(String, PathBuf)> {
        let seeds = self.points.iter().any(|p| p.seeds.len() > 1);
        let mut out = Vec::new();
        for (i, p) in self.points.iter().enumerate() {
            let label = self.point_label(i);
            for (seed, dir) in p.seeds.iter().zip(&p.dirs) {
                let mut l = label.clone();
                if seeds {
                    l.push_str(&format!(" seed={seed}"));
                }
                out.push((l, dir.clone()));
            }
        }
        out
    }
}

/// The sweep `id` among the sessions under `root` (states as recorded),
/// or an error naming the root when it has no such sweep.
pub fn find(root: &Path, id: &str) -> Result<SweepSummary> {
    let runs = crate::session::runs::RunIndex::default().scan(root)?;
    summaries(&runs, &|r| r.entry.state())
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| Error::file(root, format!("no sweep {id:?} among its sessions")))
}

/// `S1,S2,...` as distinct seeds; a word that is no seed, or none, is an
/// error.
pub fn parse_seeds(spec: &str) -> Result<Vec<u64>> {
    let seeds = spec
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| Error::invalid(format!("--seeds {spec}: {s:?} is not a seed")))
        })
        .collect::<Result<Vec<u64>>>()?;
    Ok(seeds)
}

/// Error when `parallel` is given as 0.
pub fn check_parallel(parallel: Option<usize>) -> Result<()> {
    if parallel == Some(0) {
        return Err(Error::invalid("--parallel: must be at least 1"));
    }
    Ok(())
}

/// A sweep on Slurm: `opts` checked by Slurm itself (`sbatch --test-only`)
/// and every point checked before anything is written ([`create`]), then
/// its sessions submitted as one job array ([`submit_slurm`]). A refused
/// submission is recorded in each session (state `failed`) and returned.
/// Returns the sweep and the array's job id.
pub fn start_slurm(
    req: &SweepRequest,
    opts: &SlurmOptions,
    exe: &Path,
    max_parallel: Option<usize>,
) -> Result<(Sweep, u64)> {
    check_parallel(max_parallel)?;
    opts.sbatch_args()?;
    slurm::check(opts)?;
    let s = create(req)?;
    let job = submit_slurm(&s, opts, exe, max_parallel).inspect_err(|e| {
        for d in &s.dirs {
            if let Ok(mut life) = JobLife::open(d) {
                let _ = life.failed(e.to_string());
            }
        }
    })?;
    Ok((s, job))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_points_and_spread() {
        assert_eq!(
            parse_axis("lr = 0.1, 0.01").unwrap(),
            (
                "lr".to_string(),
                vec!["0.1".to_string(), "0.01".to_string()]
            )
        );
        for bad in ["lr", "=1", "lr=", "lr=1,,2"] {
            assert!(parse_axis(bad).is_err(), "{bad}");
        }
        let req = SweepRequest {
            base: JobRequest::new("w.toml", "s2net"),
            grid: vec![
                ("lr".into(), vec!["1".into(), "2".into()]),
                ("dim".into(), vec!["4".into(), "8".into()]),
            ],
            seeds: vec![1, 2],
        };
        let p = points(&req);
        assert_eq!(p.len(), 8);
        assert_eq!(p[0].0["lr"], "1");
        assert_eq!(p[0].0["dim"], "4");
        assert_eq!((p[0].1, p[1].1), (1, 2));
        assert_eq!(p[2].0["dim"], "8");
        let (m, sd) = mean_sd(&[1.0, 3.0]).unwrap();
        assert_eq!(m, 2.0);
        assert!((sd.unwrap() - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(mean_sd(&[5.0]), Some((5.0, None)));
        assert_eq!(mean_sd(&[]), None);
        assert_eq!(mean_sd(&[1.0, f64::NAN]), None);
    }
}
