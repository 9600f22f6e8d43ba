//! Early stopping on the validation MRR (larger is better): the job's best
//! figure and epoch, and the patience count of epochs without a better
//! one, counted within a training phase. The runner asks it after every
//! epoch ([`EarlyStopping::update`]) and adopts the answer once the
//! checkpoints that hold it are on disk.

/// The early-stopping state of a job (what a checkpoint records of it:
/// best MRR, its epoch, the epochs since).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EarlyStopping {
    patience: usize,
    best: Option<f64>,
    best_epoch: Option<usize>,
    bad_epochs: usize,
}

/// What one epoch's figure means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The epoch is the best so far (its model becomes `best`).
    pub improved: bool,
    /// Patience has run out: the training stops after this epoch.
    pub stop: bool,
}

impl EarlyStopping {
    /// A job's start: no best yet.
    pub fn new(patience: usize) -> EarlyStopping {
        EarlyStopping::resumed(patience, None, None, 0)
    }

    /// The state a checkpoint recorded (its `best_mrr`, `best_epoch`,
    /// `bad_epochs`), to continue from.
    pub fn resumed(
        patience: usize,
        best: Option<f64>,
        best_epoch: Option<usize>,
        bad_epochs: usize,
    ) -> EarlyStopping {
        EarlyStopping {
            patience,
            best,
            best_epoch,
            bad_epochs,
        }
    }

    /// Best validation MRR so far.
    pub fn best(&self) -> Option<f64> {
        self.best
    }

    /// Epoch of the best one (of the latest model with a space when the
    /// job has no validation figure).
    pub fn best_epoch(&self) -> Option<usize> {
        self.best_epoch
    }

    /// Epochs since the best one, in this phase.
    pub fn bad_epochs(&self) -> usize {
        self.bad_epochs
    }

    /// A new training phase starts: patience counts from 0 again.
    pub fn new_phase(&mut self) {
        self.bad_epochs = 0;
    }

    /// Epoch `epoch` ended with validation MRR `metric` (`None`: not
    /// validated). Without a figure, the latest model is the best once it
    /// `has_space` (nothing to compare). The training stops when a
    /// validated epoch of a phase that `phase_stops` leaves the patience
    /// spent.
    pub fn update(
        &mut self,
        epoch: usize,
        metric: Option<f64>,
        has_space: bool,
        phase_stops: bool,
    ) -> Verdict {
        let improved = match (metric, self.best) {
            (Some(m), Some(b)) => m > b,
            (Some(_), None) => true,
            (None, _) => has_space,
        };
        if improved {
            self.best = metric.or(self.best);
            self.best_epoch = Some(epoch);
            self.bad_epochs = 0;
        } else {
            self.bad_epochs += 1;
        }
        Verdict {
            improved,
            stop: self.spent(metric.is_some(), phase_stops),
        }
    }

    /// Whether patience has run out after a validated epoch (`validated`)
    /// of a phase that may be early-stopped (`phase_stops`): a checkpoint
    /// so recorded ended its job.
    pub fn spent(&self, validated: bool, phase_stops: bool) -> bool {
        validated && phase_stops && self.bad_epochs >= self.patience
    }

    /// Takes `next`'s best figure and epoch (its best checkpoint is on
    /// disk), keeping this state's patience count.
    pub fn adopt_best(&mut self, next: &EarlyStopping) {
        self.best = next.best;
        self.best_epoch = next.best_epoch;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_after_patience_epochs_without_a_better_figure() {
        let mut es = EarlyStopping::new(2);
        let v = es.update(1, Some(0.3), true, true);
        assert_eq!((v.improved, v.stop), (true, false));
        assert!(es.update(2, Some(0.5), true, true).improved);
        // equal is not better
        let v = es.update(3, Some(0.5), true, true);
        assert_eq!((v.improved, v.stop), (false, false));
        let v = es.update(4, Some(0.4), true, true);
        assert_eq!((v.improved, v.stop), (false, true));
        assert_eq!(
            (es.best(), es.best_epoch(), es.bad_epochs()),
            (Some(0.5), Some(2), 2)
        );
    }

    #[test]
    fn a_pre_training_phase_or_an_unvalidated_epoch_never_stops() {
        let mut es = EarlyStopping::new(1);
        es.update(1, Some(0.5), true, false);
        assert!(
            !es.update(2, Some(0.1), true, false).stop,
            "phase not stopped"
        );
        assert_eq!(es.bad_epochs(), 1);
        // a model still without a space is neither best nor validated
        let v = es.update(3, None, false, true);
        assert_eq!((v.improved, v.stop), (false, false));
        assert_eq!(es.bad_epochs(), 2);
        // a new phase counts from 0
        es.new_phase();
        assert_eq!(es.bad_epochs(), 0);
        assert_eq!(es.best(), Some(0.5));
    }

    #[test]
    fn without_a_figure_the_latest_model_with_a_space_is_the_best() {
        let mut es = EarlyStopping::new(1);
        let v = es.update(1, None, true, true);
        assert_eq!((v.improved, v.stop), (true, false));
        assert_eq!((es.best(), es.best_epoch()), (None, Some(1)));
        es.update(2, None, true, true);
        assert_eq!((es.best_epoch(), es.bad_epochs()), (Some(2), 0));
    }

    #[test]
    fn a_resumed_state_continues_its_count_and_adopting_keeps_the_count() {
        let es = EarlyStopping::resumed(3, Some(0.6), Some(4), 2);
        assert!(!es.spent(true, true));
        let mut next = es;
        assert!(next.update(7, Some(0.5), true, true).stop);
        assert!(next.spent(true, true) && !next.spent(false, true));
        let mut better = es;
        better.update(7, Some(0.7), true, true);
        let mut kept = es;
        kept.adopt_best(&better);
        assert_eq!(
            (kept.best(), kept.best_epoch(), kept.bad_epochs()),
            (Some(0.7), Some(7), 2)
        );
    }
}
