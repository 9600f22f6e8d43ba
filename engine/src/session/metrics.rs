//! `metrics.jsonl`: one JSON object per line, appended and flushed per
//! record by the job, read incrementally by [`MetricsTail`].

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum MetricRecord {
    /// Training loss, every `log_every` optimiser steps.
    Step {
        /// Training phase (`train`, or `mono` / `cross` for XCNN).
        phase: String,
        /// Epoch, from 1.
        epoch: usize,
        /// Optimiser step over the whole job, from 1.
        step: usize,
        /// Training examples in this step.
        examples: usize,
        /// Mean loss of the step.
        loss: f64,
        /// The loss's named terms and other figures of the step (an
        /// adversarial trainer's `disc_loss`, `disc_acc`); absent when none.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        parts: BTreeMap<String, f64>,
        /// Training pairs per second since the last step record.
        pairs_per_s: f64,
        /// Seconds since the job (this process) started.
        wall_s: f64,
    },
    /// Validation figures at the end of an epoch.
    Valid {
        /// Training phase.
        phase: String,
        /// Epoch, from 1.
        epoch: usize,
        /// Optimiser step at the end of the epoch.
        step: usize,
        /// Named figures: `MRR`, `P@1`, `queries`; later `MAP` and others.
        #[serde(flatten)]
        scores: BTreeMap<String, f64>,
    },
    /// A life-cycle event.
    Event {
        /// `start`, `resume`, `checkpoint`, `early_stop`, `cancelled`,
        /// `error` or `done`.
        event: String,
        /// What happened, for people.
        message: String,
        /// Epoch at the event (resume: last completed epoch).
        #[serde(default)]
        epoch: Option<usize>,
        /// Optimiser step at the event (resume: the checkpoint's step; step
        /// and valid records after it, from the killed run, are superseded).
        #[serde(default)]
        step: Option<usize>,
    },
}

impl MetricRecord {
    /// An event record.
    pub fn event(
        event: &str,
        message: impl Into<String>,
        epoch: Option<usize>,
        step: Option<usize>,
    ) -> Self {
        MetricRecord::Event {
            event: event.to_string(),
            message: message.into(),
            epoch,
            step,
        }
    }
}

/// The records of a session as one history: when a job was resumed, the
/// records the interrupted run wrote after the resumed checkpoint (steps
/// that were trained again) are dropped, so curves do not double back.
pub fn effective_history(records: &[MetricRecord]) -> Vec<MetricRecord> {
    let mut out: Vec<MetricRecord> = Vec::with_capacity(records.len());
    for r in records {
        if let MetricRecord::Event {
            event,
            step: Some(s),
            ..
        } = r
        {
            if event == "resume" {
                out.retain(|o| match o {
                    MetricRecord::Step { step, .. } | MetricRecord::Valid { step, .. } => {
                        *step <= *s
                    }
                    MetricRecord::Event { .. } => true,
                });
            }
        }
        out.push(r.clone());
    }
    out
}

/// One validation point of a [`Curves`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidPoint {
    /// Epoch counted over the whole job (a later phase continues the
    /// earlier phases' count).
    pub x: f64,
    /// Its phase and the epoch within it.
    pub phase: String,
    /// Epoch within the phase.
    pub epoch: usize,
    /// Optimiser step it was taken at.
    pub step: usize,
    /// Its figures (`MRR`, `P@1`, ad-hoc figures).
    pub scores: BTreeMap<String, f64>,
}

/// A session's training curves, built record by record (so a live view can
/// feed it what it tails) with the same rules as [`effective_history`]: a
/// resume drops the points the interrupted run logged past its checkpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Curves {
    /// (step, loss) of every step record with a finite loss.
    pub loss: Vec<(f64, f64)>,
    /// (step, value) of every finite named part of the step records
    /// (loss terms, a discriminator's loss and accuracy), by name.
    pub parts: BTreeMap<String, Vec<(f64, f64)>>,
    /// Where each training phase's points start in `loss`: (phase, index),
    /// in order (a layer-wise trainer's curves differ in scale, so a view
    /// draws one phase at a time).
    pub loss_phases: Vec<(String, usize)>,
    /// Validation points in order.
    pub valid: Vec<ValidPoint>,
    /// Phase, epoch and step of the last step record.
    pub last_step: Option<(String, usize, usize)>,
    /// The last event's message (or name).
    pub last_event: Option<String>,
    /// Every step record's position, in step order: what maps a step to an
    /// epoch or a wall time ([`Curves::points`]).
    pub steps: Vec<StepPoint>,
    /// Steps whose loss was NaN or infinite (kept out of `loss`).
    pub nonfinite: Vec<usize>,
    /// Epochs of the phases before the current one.
    offset: usize,
    /// The current phase and its last epoch.
    phase: Option<(String, usize)>,
    /// Step records' phase and last epoch, and the epochs of earlier phases.
    step_phase: Option<(String, usize)>,
    step_offset: usize,
    /// Wall time of the runs before the current process (a resume restarts
    /// the job's clock).
    wall_base: f64,
}

/// Where one step record lies: its step, its epoch counted over the whole
/// job (phases continue the count) and the job's wall time, summed over
/// resumed runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPoint {
    /// Optimiser step.
    pub step: usize,
    /// Epoch over the whole job, from 1.
    pub epoch: usize,
    /// Epoch within its training phase.
    pub phase_epoch: usize,
    /// Seconds of training up to this step, over every run of the job.
    pub wall_s: f64,
}

/// The x axis of a curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XAxis {
    /// Optimiser step.
    #[default]
    Step,
    /// Epoch (fractional within an epoch for step records).
    Epoch,
    /// Wall time of training in seconds (resumed runs continue the clock).
    Time,
}

impl XAxis {
    /// Name as on the command line (`step`, `epoch`, `time`).
    pub fn as_str(self) -> &'static str {
        match self {
            XAxis::Step => "step",
            XAxis::Epoch => "epoch",
            XAxis::Time => "time",
        }
    }
    /// The next axis in the order step, epoch, time.
    pub fn next(self) -> XAxis {
        match self {
            XAxis::Step => XAxis::Epoch,
            XAxis::Epoch => XAxis::Time,
            XAxis::Time => XAxis::Step,
        }
    }
}

impl std::str::FromStr for XAxis {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "step" | "steps" => Ok(XAxis::Step),
            "epoch" | "epochs" => Ok(XAxis::Epoch),
            "time" | "wall" => Ok(XAxis::Time),
            other => Err(Error::invalid(format!(
                "unknown x axis `{other}` (step, epoch or time)"
            ))),
        }
    }
}

impl Curves {
    /// The curves of a whole history.
    pub fn from_records(records: &[MetricRecord]) -> Curves {
        let mut c = Curves::default();
        for r in records {
            c.push(r);
        }
        c
    }

    /// Adds one record.
    pub fn push(&mut self, r: &MetricRecord) {
        match r {
            MetricRecord::Step {
                phase,
                epoch,
                step,
                loss,
                parts,
                wall_s,
                ..
            } => {
                match &self.step_phase {
                    Some((p, last)) if p != phase => self.step_offset += last,
                    _ => {}
                }
                self.step_phase = Some((phase.clone(), *epoch));
                let prev = self.steps.last().map_or(0.0, |p| p.wall_s);
                if self.wall_base + wall_s < prev {
                    // a new process without a resume record: continue the clock
                    self.wall_base = prev;
                }
                self.steps.push(StepPoint {
                    step: *step,
                    epoch: self.step_offset + epoch,
                    phase_epoch: *epoch,
                    wall_s: self.wall_base + wall_s.max(0.0),
                });
                if !loss.is_finite() {
                    self.nonfinite.push(*step);
                }
                for (name, v) in parts {
                    if v.is_finite() {
                        let pts = self.parts.entry(name.clone()).or_default();
                        pts.push((*step as f64, *v));
                    }
                }
                if loss.is_finite() {
                    if self.loss_phases.last().is_none_or(|(p, _)| p != phase) {
                        self.loss_phases.push((phase.clone(), self.loss.len()));
                    }
                    self.loss.push((*step as f64, *loss));
                }
                self.last_step = Some((phase.clone(), *epoch, *step));
            }
            MetricRecord::Valid {
                phase,
                epoch,
                step,
                scores,
            } => {
                match &self.phase {
                    Some((p, last)) if p != phase => {
                        self.offset += last;
                    }
                    _ => {}
                }
                self.phase = Some((phase.clone(), *epoch));
                self.valid.push(ValidPoint {
                    x: (self.offset + epoch) as f64,
                    phase: phase.clone(),
                    epoch: *epoch,
                    step: *step,
                    scores: scores.clone(),
                });
            }
            MetricRecord::Event {
                event,
                message,
                step,
                ..
            } => {
                if let (true, Some(s)) = (event == "resume", step) {
                    self.loss.retain(|p| p.0 <= *s as f64);
                    for pts in self.parts.values_mut() {
                        pts.retain(|p| p.0 <= *s as f64);
                    }
                    let kept = self.loss.len();
                    self.loss_phases.retain(|(_, start)| *start < kept);
                    self.valid.retain(|v| v.step <= *s);
                    self.steps.retain(|p| p.step <= *s);
                    self.nonfinite.retain(|p| p <= s);
                    self.wall_base = self.steps.last().map_or(0.0, |p| p.wall_s);
                    (self.step_offset, self.step_phase) = match self.steps.last() {
                        Some(p) => (
                            p.epoch - p.phase_epoch,
                            self.loss_phases
                                .last()
                                .map(|(ph, _)| (ph.clone(), p.phase_epoch)),
                        ),
                        None => (0, None),
                    };
                    // the phase bookkeeping continues from the last point kept
                    (self.offset, self.phase) = match self.valid.last() {
                        Some(v) => (v.x as usize - v.epoch, Some((v.phase.clone(), v.epoch))),
                        None => (0, None),
                    };
                }
                self.last_event = Some(if message.is_empty() {
                    event.clone()
                } else {
                    message.clone()
                });
            }
        }
    }

    /// The loss points of phase number `i` (of [`Curves::loss_phases`]).
    pub fn phase_loss(&self, i: usize) -> &[(f64, f64)] {
        match self.loss_phases.get(i) {
            None => &[],
            Some((_, start)) => {
                let end = self
                    .loss_phases
                    .get(i + 1)
                    .map_or(self.loss.len(), |(_, e)| *e);
                &self.loss[*start..end]
            }
        }
    }

    /// (x, value) of validation figure `name` (`MRR`, `P@1`, ...).
    pub fn valid_points(&self, name: &str) -> Vec<(f64, f64)> {
        self.valid
            .iter()
            .filter_map(|v| Some((v.x, *v.scores.get(name)?)))
            .collect()
    }

    /// Every figure recorded: `loss`, the step records' named parts, then
    /// the validation figures (the query count left out), each once.
    pub fn metric_names(&self) -> Vec<String> {
        let mut v = Vec::new();
        if !self.loss.is_empty() {
            v.push("loss".to_string());
        }
        v.extend(self.parts.keys().cloned());
        for p in &self.valid {
            for k in p.scores.keys() {
                if k != "queries" && !v.contains(k) {
                    v.push(k.clone());
                }
            }
        }
        v
    }

    /// (x, value) of figure `name` (`loss`, a step part, or a validation
    /// figure such as `MRR`; a validation figure is looked up
    /// case-insensitively) on axis `x`. On the epoch axis a step lies
    /// within its epoch (epoch 2's steps between 1 and 2) and a validation
    /// point at its epoch's end; on the time axis a validation point takes
    /// the wall time of the last step before it.
    pub fn points(&self, name: &str, x: XAxis) -> Vec<(f64, f64)> {
        let step_pts: Option<&Vec<(f64, f64)>> = if name == "loss" {
            Some(&self.loss)
        } else {
            self.parts.get(name)
        };
        if let Some(pts) = step_pts {
            return pts
                .iter()
                .map(|&(s, y)| (self.step_x(s as usize, x), y))
                .collect();
        }
        let key = self
            .valid
            .iter()
            .flat_map(|v| v.scores.keys())
            .find(|k| k.eq_ignore_ascii_case(name))
            .cloned();
        let Some(key) = key else {
            return Vec::new();
        };
        self.valid
            .iter()
            .filter_map(|v| {
                let y = *v.scores.get(&key)?;
                let xv = match x {
                    XAxis::Step => v.step as f64,
                    XAxis::Epoch => v.x,
                    XAxis::Time => self.at_or_before(v.step).map_or(0.0, |p| p.wall_s),
                };
                Some((xv, y))
            })
            .collect()
    }

    fn at_or_before(&self, step: usize) -> Option<&StepPoint> {
        let i = self.steps.partition_point(|p| p.step <= step);
        i.checked_sub(1).map(|i| &self.steps[i])
    }

    /// The x of step `step` on axis `x`.
    fn step_x(&self, step: usize, x: XAxis) -> f64 {
        match x {
            XAxis::Step => step as f64,
            XAxis::Time => self.at_or_before(step).map_or(0.0, |p| p.wall_s),
            XAxis::Epoch => {
                let Some(p) = self.at_or_before(step) else {
                    return 0.0;
                };
                let e = p.epoch;
                // the epoch's steps: from the last step of the epoch before
                let lo = self.steps.partition_point(|q| q.epoch < e);
                let hi = self.steps.partition_point(|q| q.epoch <= e);
                let start = lo.checked_sub(1).map_or(0, |i| self.steps[i].step);
                let mut len = self.steps[hi - 1].step.saturating_sub(start);
                if hi == self.steps.len() && lo > 0 {
                    // the epoch under way: as long as the one before
                    let before = self
                        .steps
                        .partition_point(|q| q.epoch < self.steps[lo - 1].epoch);
                    let start0 = before.checked_sub(1).map_or(0, |i| self.steps[i].step);
                    len = len.max(self.steps[lo - 1].step.saturating_sub(start0));
                }
                let frac = (step.saturating_sub(start)) as f64 / len.max(1) as f64;
                (e - 1) as f64 + frac.clamp(0.0, 1.0)
            }
        }
    }

    /// Why the job looks diverged, if it does: a NaN or infinite loss, or
    /// a smoothed loss (EMA 0.9) now over ten times its lowest value after
    /// at least 20 points. `None` for a healthy curve.
    pub fn divergence(&self) -> Option<String> {
        if let Some(s) = self.nonfinite.first() {
            return Some(format!("loss is not finite (NaN or ∞) at step {s}"));
        }
        if self.loss.len() < 20 {
            return None;
        }
        let (mut acc, mut w, mut min) = (0.0, 0.0, f64::INFINITY);
        let mut last = 0.0;
        for &(_, y) in &self.loss {
            acc = 0.9 * acc + 0.1 * y;
            w = 0.9 * w + 0.1;
            last = acc / w;
            min = f64::min(min, last);
        }
        (min > 0.0 && last > 10.0 * min)
            .then(|| format!("loss exploding: {last:.4} now, {min:.4} at its lowest (smoothed)"))
    }
}

/// What one read of a metrics file found.
#[derive(Debug, Default)]
pub struct TailBatch {
    /// Records parsed, in file order.
    pub records: Vec<MetricRecord>,
    /// Corrupt or truncated lines, each an [`Error::Parse`] with path and
    /// line; the records around them still load.
    pub errors: Vec<Error>,
    /// The file had shrunk below the offset (replaced): it was read again
    /// from the start, and `records` begin at its first line.
    pub restarted: bool,
}

/// Reads `metrics.jsonl` incrementally from a byte offset: each [`poll`]
/// returns the complete lines appended since the last one. A last line
/// without its newline is kept back (the job may be writing it) until
/// [`finish`] reports it as truncated.
///
/// [`poll`]: MetricsTail::poll
/// [`finish`]: MetricsTail::finish
#[derive(Debug, Clone)]
pub struct MetricsTail {
    path: PathBuf,
    offset: u64,
    line: usize,
    pending: Vec<u8>,
}

impl MetricsTail {
    /// A reader at the start of `path` (which need not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        MetricsTail {
            path: path.into(),
            offset: 0,
            line: 0,
            pending: Vec::new(),
        }
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes consumed so far (complete lines plus a held-back partial one).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Complete lines consumed so far.
    pub fn lines(&self) -> usize {
        self.line
    }

    /// Reads what was appended since the last call. A missing file is an
    /// empty batch (the job has not written yet); a file that shrank is
    /// read again from the start ([`TailBatch::restarted`]); a symbolic
    /// link or anything but a regular file is an error.
    pub fn poll(&mut self) -> Result<TailBatch> {
        let mut batch = TailBatch::default();
        // a regular file only, never through a link (a FIFO would block)
        let Some(mut f) =
            crate::util::open_regular_if_exists(&self.path, crate::util::Links::Refuse)?
        else {
            return Ok(batch);
        };
        let len = f.metadata().map_err(|e| Error::io(&self.path, e))?.len();
        if len < self.offset {
            batch.restarted = true;
            self.offset = 0;
            self.line = 0;
            self.pending.clear();
        }
        f.seek(SeekFrom::Start(self.offset))
            .map_err(|e| Error::io(&self.path, e))?;
        let mut buf = std::mem::take(&mut self.pending);
        let start = buf.len();
        f.read_to_end(&mut buf)
            .map_err(|e| Error::io(&self.path, e))?;
        self.offset += (buf.len() - start) as u64;
        let complete = match buf.iter().rposition(|b| *b == b'\n') {
            Some(p) => p + 1,
            None => 0,
        };
        self.pending = buf.split_off(complete);
        if !buf.is_empty() {
            // buf ends with a newline: every piece but the last (empty) is a line
            for raw in buf[..buf.len() - 1].split(|b| *b == b'\n') {
                self.line += 1;
                if raw.iter().all(|b| b.is_ascii_whitespace()) {
                    continue;
                }
                self.parse_line(raw, self.line, &mut batch);
            }
        }
        Ok(batch)
    }

    fn parse_line(&self, raw: &[u8], line: usize, batch: &mut TailBatch) {
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                batch
                    .errors
                    .push(Error::parse(&self.path, line, format!("not UTF-8 ({e})")));
                return;
            }
        };
        match serde_json::from_str::<MetricRecord>(text) {
            Ok(r) => match impossible_figure(&r) {
                None => batch.records.push(r),
                Some(why) => batch.errors.push(Error::parse(
                    &self.path,
                    line,
                    format!(
                        "impossible figure, record not shown ({why}): {}",
                        clip(text)
                    ),
                )),
            },
            Err(e) => batch.errors.push(Error::parse(
                &self.path,
                line,
                format!("corrupt metrics record ({e}): {}", clip(text)),
            )),
        }
    }

    /// Reports a held-back last line without newline: the job is over and
    /// the line was cut (a killed process). A line that parses anyway is
    /// returned as a record.
    pub fn finish(&mut self) -> TailBatch {
        let mut batch = TailBatch::default();
        if self.pending.is_empty() {
            return batch;
        }
        let raw = std::mem::take(&mut self.pending);
        self.line += 1;
        match std::str::from_utf8(&raw)
            .ok()
            .and_then(|t| serde_json::from_str::<MetricRecord>(t).ok())
            .filter(|r| impossible_figure(r).is_none())
        {
            Some(r) => batch.records.push(r),
            None => batch.errors.push(Error::parse(
                &self.path,
                self.line,
                format!(
                    "truncated metrics record (no end of line): {}",
                    clip(&String::from_utf8_lossy(&raw))
                ),
            )),
        }
        batch
    }
}

/// Whether `name` is a rate (a figure that lies in 0..1): MRR, MAP, P@k,
/// R@k, nDCG, with or without the `adhoc_` prefix of the ad-hoc figures.
pub fn is_rate(name: &str) -> bool {
    let n = name.strip_prefix("adhoc_").unwrap_or(name);
    matches!(n, "MRR" | "MAP") || ["P@", "R@", "nDCG"].iter().any(|p| n.starts_with(p))
}

/// Why a parsed record cannot be what a job wrote, if it cannot: a rate
/// outside 0..1 (or NaN: the runner never records one), a negative or
/// fractional count, a negative speed or time. Such a line is refused (a
/// located error), never shown as a figure.
pub fn impossible_figure(r: &MetricRecord) -> Option<String> {
    match r {
        MetricRecord::Valid { scores, .. } => {
            for (k, v) in scores {
                if is_rate(k) && !(0.0..=1.0).contains(v) {
                    return Some(format!("{k} {v} is not in 0..1"));
                }
                if k == "queries" && (v.is_nan() || *v < 0.0 || v.fract() != 0.0) {
                    return Some(format!("queries {v} is not a count"));
                }
            }
            None
        }
        MetricRecord::Step {
            pairs_per_s,
            wall_s,
            ..
        } => {
            if pairs_per_s.is_nan() || *pairs_per_s < 0.0 {
                Some(format!("pairs_per_s {pairs_per_s} is negative"))
            } else if wall_s.is_nan() || *wall_s < 0.0 {
                Some(format!("wall_s {wall_s} is negative"))
            } else {
                None
            }
        }
        MetricRecord::Event { .. } => None,
    }
}

fn clip(s: &str) -> String {
    let mut t: String = s.chars().take(80).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// Appends records to `metrics.jsonl`, one write per line (no buffering), so
/// a reader never waits on a buffer and a killed job loses at most the line
/// being written.
#[derive(Debug)]
pub struct MetricsWriter {
    path: PathBuf,
    file: std::fs::File,
}

impl MetricsWriter {
    /// Opens `path` for appending. If the file ends in a cut line (a killed
    /// job), a newline is added first, so the cut line stays one corrupt
    /// line and does not swallow the next record.
    pub fn open(path: &Path) -> Result<Self> {
        // never appended through a symbolic link planted in the folder, nor
        // into the file of another session through a hard link
        let mut file = crate::util::open_append_own(path, true)?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))
                .map_err(|e| Error::io(path, e))?;
            file.read_exact(&mut last).map_err(|e| Error::io(path, e))?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(|e| Error::io(path, e))?;
            }
        }
        Ok(MetricsWriter {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Appends one record as one line.
    pub fn append(&mut self, r: &MetricRecord) -> Result<()> {
        let mut line = serde_json::to_vec(r)
            .map_err(|e| Error::file(&self.path, format!("cannot serialise record: {e}")))?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|e| Error::io(&self.path, e))?;
        self.file.flush().map_err(|e| Error::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_flattened_scores() {
        let mut scores = BTreeMap::new();
        scores.insert("MRR".to_string(), 0.5);
        scores.insert("P@1".to_string(), 0.25);
        let v = MetricRecord::Valid {
            phase: "train".into(),
            epoch: 2,
            step: 40,
            scores,
        };
        let s = serde_json::to_string(&v).unwrap();
        assert!(s.contains("\"kind\":\"valid\""), "{s}");
        assert!(s.contains("\"MRR\":0.5"), "{s}");
        let back: MetricRecord = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
        let e: MetricRecord =
            serde_json::from_str(r#"{"kind":"event","event":"start","message":"hi"}"#).unwrap();
        assert_eq!(e, MetricRecord::event("start", "hi", None, None));
    }

    /// Issue 39: a record no job could have written (MRR 7.5, a negative
    /// speed) is a located error, never a figure shown.
    #[test]
    fn impossible_figures_are_refused_with_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("metrics.jsonl");
        let good = r#"{"kind":"valid","phase":"train","epoch":1,"step":3,"MRR":0.5,"P@1":0.25,"queries":10,"divergence":1031.7}"#;
        let lines = [
            good,
            r#"{"kind":"valid","phase":"train","epoch":2,"step":6,"MRR":7.5,"queries":10}"#,
            r#"{"kind":"valid","phase":"train","epoch":2,"step":6,"MRR":0.5,"adhoc_MAP":-0.1}"#,
            r#"{"kind":"valid","phase":"train","epoch":2,"step":6,"MRR":0.5,"queries":-3}"#,
            r#"{"kind":"step","phase":"train","epoch":1,"step":1,"examples":4,"loss":0.3,"pairs_per_s":-350.0,"wall_s":1.0}"#,
        ];
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        let b = MetricsTail::new(&p).poll().unwrap();
        assert_eq!(b.records.len(), 1, "{:?}", b.records);
        assert_eq!(b.errors.len(), 4);
        for (e, line) in b.errors.iter().zip(2..) {
            let e = e.to_string();
            assert!(
                e.contains(&format!("metrics.jsonl:{line}:")) && e.contains("impossible"),
                "{e}"
            );
        }
        assert!(b.errors[0].to_string().contains("MRR 7.5"));
    }

    #[test]
    fn tail_reads_incrementally_and_reports_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("metrics.jsonl");
        let mut t = MetricsTail::new(&p);
        assert!(t.poll().unwrap().records.is_empty());
        let ok = r#"{"kind":"event","event":"start","message":""}"#;
        std::fs::write(&p, format!("{ok}\n{{\"kind\":\"st\n{ok}\n{ok}")).unwrap();
        let b = t.poll().unwrap();
        assert_eq!(b.records.len(), 2);
        assert_eq!(b.errors.len(), 1);
        assert!(
            b.errors[0].to_string().contains("metrics.jsonl:2:"),
            "{}",
            b.errors[0]
        );
        // the cut line completes later
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"\n").unwrap();
        let b = t.poll().unwrap();
        assert_eq!(b.records.len(), 1);
        assert_eq!(t.lines(), 4);
        // a cut last line is reported on finish
        f.write_all(b"{\"kind\":\"ev").unwrap();
        assert!(t.poll().unwrap().records.is_empty());
        let fin = t.finish();
        assert!(
            fin.errors[0]
                .to_string()
                .contains("metrics.jsonl:5: truncated"),
            "{}",
            fin.errors[0]
        );
        // a writer re-opening the file keeps the cut line separate
        let mut w = MetricsWriter::open(&p).unwrap();
        w.append(&MetricRecord::event("resume", "", Some(1), Some(3)))
            .unwrap();
        let mut t2 = MetricsTail::new(&p);
        let b = t2.poll().unwrap();
        assert_eq!(b.records.len(), 4);
        assert_eq!(b.errors.len(), 2);
        assert!(b.errors[1].to_string().contains(":5:"), "{}", b.errors[1]);
    }

    #[test]
    fn history_drops_superseded_records() {
        let step = |s| MetricRecord::Step {
            phase: "train".into(),
            epoch: 1,
            step: s,
            examples: 1,
            loss: 1.0,
            parts: Default::default(),
            pairs_per_s: 1.0,
            wall_s: 0.0,
        };
        let recs = vec![
            step(1),
            step(2),
            step(3),
            MetricRecord::event("resume", "", Some(1), Some(2)),
            step(3),
        ];
        let h = effective_history(&recs);
        assert_eq!(h.len(), 4);
        assert_eq!(h[3], step(3));
        assert_eq!(h[1], step(2));
    }

    fn valid(phase: &str, epoch: usize, step: usize, mrr: f64) -> MetricRecord {
        MetricRecord::Valid {
            phase: phase.into(),
            epoch,
            step,
            scores: BTreeMap::from([("MRR".to_string(), mrr)]),
        }
    }

    /// Epochs of a later phase continue the count; a resume from a
    /// checkpoint of the first phase drops the second phase's points and
    /// counts from the first phase again.
    #[test]
    fn curves_count_epochs_across_phases_and_resumes() {
        let recs = vec![
            valid("mono", 1, 10, 0.1),
            valid("mono", 2, 20, 0.2),
            valid("cross", 1, 30, 0.3),
            valid("cross", 2, 40, 0.4),
        ];
        let c = Curves::from_records(&recs);
        let xs: Vec<f64> = c.valid.iter().map(|v| v.x).collect();
        assert_eq!(xs, [1.0, 2.0, 3.0, 4.0]);
        let mut again = recs[..3].to_vec();
        again.push(MetricRecord::event("resume", "", Some(2), Some(20)));
        again.push(valid("cross", 1, 30, 0.35));
        let c = Curves::from_records(&again);
        assert_eq!(c.valid_points("MRR"), [(1.0, 0.1), (2.0, 0.2), (3.0, 0.35)]);
        assert_eq!(c.last_event.as_deref(), Some("resume"));
    }

    #[test]
    fn loss_curves_keep_their_phases_through_a_resume() {
        let step = |phase: &str, step: usize, loss: f64| MetricRecord::Step {
            phase: phase.into(),
            epoch: 1,
            step,
            examples: 10,
            loss,
            parts: Default::default(),
            pairs_per_s: 1.0,
            wall_s: 1.0,
        };
        let mut recs = vec![
            step("src.rsm", 1, 8.0),
            step("src.rsm", 2, 7.5),
            step("src.rbm2", 3, 0.1),
            step("finetune", 4, 16.0),
        ];
        let c = Curves::from_records(&recs);
        let names: Vec<&str> = c.loss_phases.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["src.rsm", "src.rbm2", "finetune"]);
        assert_eq!(c.phase_loss(0), [(1.0, 8.0), (2.0, 7.5)]);
        assert_eq!(c.phase_loss(1), [(3.0, 0.1)]);
        assert_eq!(c.phase_loss(2), [(4.0, 16.0)]);
        assert!(c.phase_loss(3).is_empty());
        // a resume from step 2 drops the later phases' points and starts
        // again in the phase it continues
        recs.push(MetricRecord::event("resume", "", Some(1), Some(2)));
        recs.push(step("src.rbm2", 3, 0.2));
        let c = Curves::from_records(&recs);
        let names: Vec<&str> = c.loss_phases.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(names, ["src.rsm", "src.rbm2"]);
        assert_eq!(c.phase_loss(1), [(3.0, 0.2)]);
    }
}
