//! The job of a lexical baseline session (`rosetta train --model
//! bm25|bm25-dict|bm25-mt`): nothing to fit, so it records the resolved
//! settings, scores the validation split (parallel sentence retrieval) and
//! the ad-hoc task, and finishes. Its files are a trained session's (config,
//! status, metrics, log), so jobs, eval, search and the workbench treat it
//! like any other row of a comparison.

use std::collections::BTreeMap;

use super::runner::{LogFile, Observer, Outcome, SessionLock};
use crate::corpus::Workspace;
use crate::eval::evaluate;
use crate::models::bm25::Bm25Baseline;
use crate::session::metrics::MetricsWriter;
use crate::session::retrieval::RUN_DEPTH;
use crate::session::{now_unix, Figures, MetricRecord, Session, State, LOG_FILE, METRICS_FILE};
use crate::{Error, Result};

/// Runs the lexical baseline job of `session`: validation figures into
/// `metrics.jsonl` (one `valid` record, phase `bm25`, epoch 1), state done.
/// A failure is recorded in the session (state failed) and returned.
pub fn run_lexical_job(session: &mut Session, observer: &mut dyn Observer) -> Result<Outcome> {
    let dir = session.dir.clone();
    let _lock = SessionLock::acquire(&dir)?;
    let mut log = LogFile::open(&dir.join(LOG_FILE))?;
    let mut metrics = MetricsWriter::open(&dir.join(METRICS_FILE))?;
    match score(session, &mut log, &mut metrics, observer) {
        Ok(o) => Ok(o),
        Err(e) => {
            let msg = e.to_string();
            log.line(&format!("error: {msg}"));
            let _ = metrics.append(&MetricRecord::event("error", msg.clone(), None, None));
            // a done session stays done (its figures are still what it says)
            let _ = session.transition(|l| l.failed(msg));
            Err(e)
        }
    }
}

fn score(
    session: &mut Session,
    log: &mut LogFile,
    metrics: &mut MetricsWriter,
    observer: &mut dyn Observer,
) -> Result<Outcome> {
    let dir = session.dir.clone();
    if session.status.state == State::Done {
        return Err(Error::file(
            &dir,
            "the session is done: a lexical baseline has nothing to resume",
        ));
    }
    let ws = Workspace::load_with_text(&session.config.workspace, session.config.text.as_ref())?;
    session
        .config
        .check_workspace_hash(&dir, &ws.content_hash()?)?;
    // BM25 runs on the CPU (a `cuda` request is refused when the session
    // is made: models::registry::check_device)
    session.config.device = "cpu".into();
    let params = session.config.run_settings();
    let baseline = Bm25Baseline::new(&session.config.model, &params)?;
    params.check_unused()?;
    session.config.params.extend(params.resolved());
    session.config.write(&dir)?;

    let mut figures = Figures {
        phase: "bm25".into(),
        epochs: 1,
        ..session.status.figures()
    };
    session.transition(|l| l.running("cpu", &figures))?;
    observer.status(&session.status);
    let started = now_unix();
    let msg = format!(
        "start: lexical baseline {} on {} (k1 {}, b {})",
        session.config.model,
        session.config.workspace.display(),
        baseline.params.k1,
        baseline.params.b
    );
    log.line(&msg);
    observer.line(&msg);
    metrics.append(&MetricRecord::event("start", msg, None, None))?;

    let splits = ws.splits()?;
    let valid = splits
        .get("valid")
        .ok_or_else(|| Error::file(&ws.path, "the workspace has no validation split"))?;
    let s = baseline.sentence_retrieval(&ws, valid)?;
    let mut scores: BTreeMap<String, f64> = BTreeMap::from([
        ("MRR".into(), s.mrr),
        ("P@1".into(), s.p1),
        ("queries".into(), s.queries as f64),
    ]);
    let task = ws.adhoc()?;
    if !task.derived {
        let run = baseline.adhoc_run(&ws, &task, RUN_DEPTH)?;
        let e = evaluate(&run.run, &task.qrels);
        scores.insert("adhoc_MRR".into(), e.mean.mrr);
        scores.insert("adhoc_MAP".into(), e.mean.map);
        scores.insert("adhoc_P@1".into(), e.mean.p1);
        scores.insert("adhoc_nDCG@10".into(), e.mean.ndcg10);
    }
    metrics.append(&MetricRecord::Valid {
        phase: "bm25".into(),
        epoch: 1,
        step: 0,
        scores,
    })?;
    let line = format!(
        "validation: sentence retrieval MRR {:.4} P@1 {:.4} over {} pairs",
        s.mrr, s.p1, s.queries
    );
    log.line(&line);
    observer.line(&line);
    let done = format!("done in {:.1} s (nothing to train)", now_unix() - started);
    metrics.append(&MetricRecord::event("done", done.clone(), Some(1), Some(0)))?;
    log.line(&done);
    figures.epoch = 1;
    figures.eta_s = None;
    figures.best_mrr = Some(s.mrr);
    figures.best_epoch = Some(1);
    session.transition(|l| l.done(&figures))?;
    observer.status(&session.status);
    Ok(Outcome {
        state: State::Done,
        best_mrr: Some(s.mrr),
        best_epoch: Some(1),
        epoch: 1,
        step: 0,
        early_stopped: false,
        error: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{read_status, Figures};
    use crate::train::runner::Quiet;

    #[test]
    fn a_done_baseline_asked_to_run_again_stays_done() {
        let root = tempfile::tempdir().unwrap();
        let mut s = crate::session::life::test_session(root.path(), "bm25");
        let f = Figures {
            best_mrr: Some(0.5),
            best_epoch: Some(1),
            ..Figures::default()
        };
        s.transition(|l| l.running("cpu", &f)).unwrap();
        s.transition(|l| l.done(&f)).unwrap();
        let e = run_lexical_job(&mut s, &mut Quiet).unwrap_err().to_string();
        assert!(e.contains("nothing to resume"), "{e}");
        let st = read_status(&s.dir).unwrap();
        assert_eq!(
            (st.state, st.best_mrr, st.error),
            (State::Done, Some(0.5), None)
        );
        assert_eq!(s.status.state, State::Done);
    }
}
