//! Which checkpoints an epoch end writes, and how: `best` (the model
//! only) when the epoch is the best so far, then `last` (the model and the
//! trainer's extra state, for `--resume`) at every epoch end. Each is
//! written atomically and synced before anything names it.

use std::path::Path;

use candle_core::Tensor;

use crate::session::{Checkpoint, CheckpointMeta, BEST_CHECKPOINT, LAST_CHECKPOINT};
use crate::Result;

/// One checkpoint of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Save {
    /// `checkpoints/best.safetensors`: the best model, without extra state.
    Best,
    /// `checkpoints/last.safetensors`: the latest model with the trainer's
    /// extra (optimiser) tensors.
    Last,
}

impl Save {
    /// Its path inside a session folder.
    pub fn path(self) -> &'static str {
        match self {
            Save::Best => BEST_CHECKPOINT,
            Save::Last => LAST_CHECKPOINT,
        }
    }

    /// Writes this checkpoint into session folder `dir`: `meta` and the
    /// `model` tensors, and for `last` the `extra` ones (`best` leaves them
    /// out, and their names out of its metadata).
    pub fn write(
        self,
        dir: &Path,
        meta: &CheckpointMeta,
        model: &[(String, Tensor)],
        extra: &[(String, Tensor)],
    ) -> Result<()> {
        let path = dir.join(self.path());
        match self {
            Save::Best => {
                let mut m = meta.clone();
                m.extra.clear();
                Checkpoint::write(&path, &m, model, &[])
            }
            Save::Last => Checkpoint::write(&path, meta, model, extra),
        }
    }
}

/// The runner's checkpoint policy: `best` when an epoch improved, `last`
/// after every epoch, in that order (a job killed between the two resumes
/// from the previous `last`, whose best is then not behind its `best`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointPolicy;

impl CheckpointPolicy {
    /// The checkpoints to write, in order, at the end of an epoch that
    /// `improved` (or not).
    pub fn at_epoch_end(&self, improved: bool) -> Vec<Save> {
        if improved {
            vec![Save::Best, Save::Last]
        } else {
            vec![Save::Last]
        }
    }

    /// The log's words for `saves`: `last` or `last and best`.
    pub fn describe(saves: &[Save]) -> &'static str {
        if saves.contains(&Save::Best) {
            "last and best"
        } else {
            "last"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn best_then_last_when_improved_else_last_only() {
        let p = CheckpointPolicy;
        assert_eq!(p.at_epoch_end(true), [Save::Best, Save::Last]);
        assert_eq!(p.at_epoch_end(false), [Save::Last]);
        assert_eq!(
            CheckpointPolicy::describe(&p.at_epoch_end(true)),
            "last and best"
        );
        assert_eq!(CheckpointPolicy::describe(&p.at_epoch_end(false)), "last");
    }

    #[test]
    fn best_leaves_the_extra_state_out_and_last_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("checkpoints")).unwrap();
        let d = Device::Cpu;
        let model = vec![(
            "w".to_string(),
            Tensor::ones(2, candle_core::DType::F32, &d).unwrap(),
        )];
        let extra = vec![(
            "adam.m".to_string(),
            Tensor::zeros(2, candle_core::DType::F32, &d).unwrap(),
        )];
        let meta = CheckpointMeta {
            kind: "m".into(),
            phase: "train".into(),
            epoch: 1,
            step: 3,
            params: Default::default(),
            valid_mrr: Some(0.5),
            best_mrr: Some(0.5),
            best_epoch: Some(1),
            bad_epochs: 0,
            extra: vec!["adam.m".into()],
            rosetta_version: "0".into(),
        };
        for s in [Save::Best, Save::Last] {
            s.write(dir.path(), &meta, &model, &extra).unwrap();
        }
        let best = Checkpoint::read(&dir.path().join(BEST_CHECKPOINT), &d).unwrap();
        assert!(best.meta.extra.is_empty() && !best.tensors.contains_key("adam.m"));
        let last = Checkpoint::read(&dir.path().join(LAST_CHECKPOINT), &d).unwrap();
        assert_eq!(last.meta, meta);
        assert!(last.tensors.contains_key("adam.m"));
    }
}
