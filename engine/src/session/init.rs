//! The start an `init=` setting names, read for a job (as `vectors=SESSION`
//! is by [`super::pretrained`]): a trained session's folder (its
//! [`BEST_CHECKPOINT`](super::BEST_CHECKPOINT)) or a checkpoint file itself.
//! The job layer reads it and hands the trainer tensors
//! ([`InitWeights`] in [`TrainData::init`](crate::models::TrainData::init)),
//! so no model reads a session folder or knows its layout.
//!
//! The session's saved vocabularies (`vocab.source.json` /
//! `vocab.target.json`, or `vocab.<lang>.json`; beside the checkpoint's
//! `checkpoints/` folder when a file is given) must hold this job's terms in
//! the same order; a side the session did not save is checked by the model's
//! shapes only.

use std::path::{Path, PathBuf};

use candle_core::Device;

use crate::models::{InitWeights, Params, Trainer};
use crate::text::{Vocabs, Vocabulary};
use crate::{Error, Result};

/// The checkpoint `given` names (a file, or a session folder's best
/// checkpoint) and the session folder it belongs to.
fn locate(given: &Path) -> (PathBuf, PathBuf) {
    if given.is_file() {
        // `SESSION/checkpoints/NAME.safetensors`
        let session = given
            .parent()
            .and_then(|p| p.parent())
            .unwrap_or(Path::new("."));
        (given.to_path_buf(), session.to_path_buf())
    } else {
        (given.join(super::BEST_CHECKPOINT), given.to_path_buf())
    }
}

/// Reads the checkpoint `given` names: its tensors (on the CPU) and the kind
/// its metadata names. The vocabularies are not checked ([`for_job`] does).
pub fn read(given: &Path) -> Result<InitWeights> {
    let (ck, dir) = locate(given);
    // a session folder starts a job only once it has finished: while it runs
    // (or after it failed or was cancelled) its best checkpoint is not its
    // result; a checkpoint file named directly is taken as it is
    if given.is_dir() && dir.join(super::STATUS_FILE).is_file() {
        let st = super::read_status(&dir)?;
        if st.state != super::State::Done {
            return Err(Error::file(
                &dir,
                format!(
                    "init=: the session is {}, not finished; start from a finished session                      (or name one of its checkpoint files)",
                    st.state
                ),
            ));
        }
    }
    if !ck.is_file() {
        return Err(Error::file(
            &ck,
            "init=: no checkpoint here (expected the folder of a trained session, or a checkpoint file)",
        ));
    }
    let bytes = crate::util::read_regular(&ck, crate::util::Links::Follow, u64::MAX)?;
    let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
        .map_err(|e| Error::file(&ck, format!("init=: cannot read checkpoint: {e}")))?;
    let kind = safetensors::SafeTensors::read_metadata(&bytes)
        .ok()
        .and_then(|(_, m)| m.metadata().as_ref().and_then(|i| i.get("kind").cloned()));
    Ok(InitWeights {
        checkpoint: ck,
        kind,
        tensors,
    })
}

/// [`read`], then the session's saved vocabularies checked against `vocabs`
/// (the same terms in the same order, on each side it saved).
pub fn for_job(given: &Path, vocabs: &Vocabs) -> Result<InitWeights> {
    let init = read(given)?;
    let (_, dir) = locate(given);
    for (side, v) in [("source", &vocabs.source), ("target", &vocabs.target)] {
        for vp in [
            dir.join(format!("vocab.{side}.json")),
            dir.join(format!("vocab.{}.json", v.lang)),
        ] {
            if !vp.is_file() {
                continue;
            }
            let saved = Vocabulary::load(&vp)?;
            if saved.terms != v.terms {
                return Err(Error::file(
                    &vp,
                    format!(
                        "init=: the session's {side} vocabulary differs from this workspace's \
                         ({} vs {} terms); start from a session of the same workspace",
                        saved.len(),
                        v.len()
                    ),
                ));
            }
        }
    }
    Ok(init)
}

/// The start an `init` setting names, for a job with vocabularies
/// `vocabs` ([`for_job`]), or `None` when it has none.
pub fn resolve(init: Option<&Path>, vocabs: &Vocabs) -> Result<Option<InitWeights>> {
    init.map(|dir| for_job(dir, vocabs)).transpose()
}

/// Checks the start an `init` setting names (`init`, from the model's
/// typed settings) before a job is written: read ([`read`]) and checked by
/// the trainer ([`Trainer::check_init`]: kind, shapes, dimension).
pub fn check(trainer: &dyn Trainer, params: &Params, init: &Path) -> Result<()> {
    trainer.check_init(params, &read(init)?)
}
