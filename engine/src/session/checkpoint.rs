//! Checkpoints: a model's tensors (and, in `last`, the optimiser's extra
//! tensors) in one safetensors file, with metadata saying what they are.
//! Written atomically, so a job killed at any moment leaves the previous
//! checkpoint whole.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use safetensors::tensor::{Dtype, TensorView};
use serde::{Deserialize, Serialize};

use crate::util::write_atomic;
use crate::{Error, Result};

/// What a checkpoint holds, stored as the safetensors file's metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// Model registry name.
    pub kind: String,
    /// Training phase at the checkpoint.
    pub phase: String,
    /// Last completed epoch.
    pub epoch: usize,
    /// Last optimiser step.
    pub step: usize,
    /// Every hyper-parameter, defaults included.
    pub params: BTreeMap<String, String>,
    /// Validation MRR of this model, if validated.
    pub valid_mrr: Option<f64>,
    /// Best validation MRR of the job up to this checkpoint.
    pub best_mrr: Option<f64>,
    /// Epoch of that best MRR.
    pub best_epoch: Option<usize>,
    /// Epochs since the best one (early-stopping patience count).
    pub bad_epochs: usize,
    /// Names of the extra (optimiser) tensors, not part of the model.
    pub extra: Vec<String>,
    /// Rosetta version that wrote it.
    pub rosetta_version: String,
}

/// A checkpoint read back.
#[derive(Debug)]
pub struct Checkpoint {
    /// Its metadata.
    pub meta: CheckpointMeta,
    /// Model and extra tensors by name.
    pub tensors: HashMap<String, Tensor>,
}

impl Checkpoint {
    /// The model's tensors only (extra optimiser tensors left out).
    pub fn model_tensors(&self) -> HashMap<String, Tensor> {
        self.tensors
            .iter()
            .filter(|(k, _)| !self.meta.extra.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Writes a checkpoint atomically, never through a symbolic link (the
    /// file's folder must not be one). The bytes depend on the contents
    /// only: the header's metadata keys are in a fixed (sorted) order, so
    /// two identical runs write identical files.
    pub fn write(
        path: &Path,
        meta: &CheckpointMeta,
        model: &[(String, Tensor)],
        extra: &[(String, Tensor)],
    ) -> Result<()> {
        let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (name, t) in model.iter().chain(extra.iter()) {
            if !seen.insert(name.clone()) {
                return Err(Error::file(
                    path,
                    format!("checkpoint tensor name `{name}` given twice (model and extra tensors must differ)"),
                ));
            }
            let (dt, shape, bytes) = tensor_bytes(t)?;
            if model.iter().any(|(n, _)| n == name) {
                check_finite(path, name, dt, &bytes)?;
            }
            owned.push((name.clone(), dt, shape, bytes));
        }
        let mut views = Vec::with_capacity(owned.len());
        for (name, dt, shape, bytes) in &owned {
            let v = TensorView::new(*dt, shape.clone(), bytes)
                .map_err(|e| Error::file(path, format!("tensor `{name}`: {e}")))?;
            views.push((name.clone(), v));
        }
        let mut info = HashMap::new();
        let meta_json = serde_json::to_string(meta)
            .map_err(|e| Error::file(path, format!("cannot serialise metadata: {e}")))?;
        let digest = checksum(
            &meta_json,
            owned
                .iter()
                .map(|(n, dt, shape, b)| (n.as_str(), *dt, shape.as_slice(), b.as_slice())),
        );
        info.insert(CHECKSUM_KEY.to_string(), digest);
        info.insert("rosetta".to_string(), meta_json);
        info.insert("kind".to_string(), meta.kind.clone());
        info.insert("phase".to_string(), meta.phase.clone());
        info.insert("epoch".to_string(), meta.epoch.to_string());
        info.insert("step".to_string(), meta.step.to_string());
        info.insert(
            "params".to_string(),
            serde_json::to_string(&meta.params).unwrap_or_default(),
        );
        let bytes = safetensors::tensor::serialize(views, Some(info))
            .and_then(|b| canonical_header(&b))
            .map_err(|e| Error::file(path, format!("cannot serialise checkpoint: {e}")))?;
        refuse_linked_folder(path)?;
        write_atomic(path, &bytes)
    }

    /// Reads a checkpoint; a truncated or corrupt file is an error naming it,
    /// and so is a symbolic link (the file or its folder) or anything but a
    /// regular file.
    pub fn read(path: &Path, device: &Device) -> Result<Checkpoint> {
        refuse_linked_folder(path)?;
        let bytes = crate::util::read_regular(path, crate::util::Links::Refuse, u64::MAX)?;
        let bad = |msg: String| Error::file(path, format!("not a valid checkpoint: {msg}"));
        // full validation of header and offsets
        let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| bad(e.to_string()))?;
        let (_, md) =
            safetensors::SafeTensors::read_metadata(&bytes).map_err(|e| bad(e.to_string()))?;
        let info = md
            .metadata()
            .as_ref()
            .ok_or_else(|| bad("no metadata".into()))?;
        let meta_json = info
            .get("rosetta")
            .ok_or_else(|| bad("no `rosetta` metadata entry".into()))?;
        let meta: CheckpointMeta =
            serde_json::from_str(meta_json).map_err(|e| bad(format!("metadata: {e}")))?;
        // the checksum covers the metadata and every tensor; a checkpoint
        // without one (its metadata edited, or not written by Rosetta) is
        // never trusted: its epoch, figures and tensors could be anything
        let want = info.get(CHECKSUM_KEY).ok_or_else(|| {
            bad(format!(
                "no `{CHECKSUM_KEY}` checksum in its metadata (every checkpoint Rosetta writes \
                 has one): refusing a file whose contents cannot be verified"
            ))
        })?;
        let views = st.tensors();
        let got = checksum(
            meta_json,
            views
                .iter()
                .map(|(n, v)| (n.as_str(), v.dtype(), v.shape(), v.data())),
        );
        if &got != want {
            return Err(bad(
                "checksum mismatch: the file is corrupt (its bytes changed after it was written)"
                    .into(),
            ));
        }
        let mut tensors = HashMap::new();
        for (name, view) in st.tensors() {
            let t =
                view_to_tensor(&view, device).map_err(|e| bad(format!("tensor `{name}`: {e}")))?;
            tensors.insert(name, t);
        }
        for x in &meta.extra {
            if !tensors.contains_key(x) {
                return Err(bad(format!("extra tensor `{x}` listed but missing")));
            }
        }
        Ok(Checkpoint { meta, tensors })
    }
}

/// Error when the folder of checkpoint `path` (`checkpoints/`) is a
/// symbolic link: a session's checkpoints are never written or read
/// through one.
fn refuse_linked_folder(path: &Path) -> Result<()> {
    let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    match std::fs::symlink_metadata(dir) {
        Ok(md) if md.file_type().is_symlink() => Err(Error::file(
            dir,
            "is a symbolic link: session files are never written or read through links",
        )),
        _ => Ok(()),
    }
}

/// A safetensors file `bytes` with its JSON header rewritten in a fixed
/// order: the safetensors crate writes the `__metadata__` map in hash-map
/// order, which differs from one process to the next. Keys are sorted at
/// both levels (tensor entries and metadata); the header is padded with
/// spaces to a multiple of 8 bytes as safetensors does, and the tensor
/// data, whose offsets are relative to the header's end, is unchanged.
fn canonical_header(bytes: &[u8]) -> std::result::Result<Vec<u8>, safetensors::SafeTensorError> {
    use safetensors::SafeTensorError as E;
    let n = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
        .ok_or(E::HeaderTooSmall)?;
    let header = bytes.get(8..8 + n).ok_or(E::InvalidHeaderLength)?;
    let mut top: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(header).map_err(E::InvalidHeaderDeserialization)?;
    if let Some(md) = top.get_mut("__metadata__") {
        let sorted: BTreeMap<String, String> =
            serde_json::from_value(md.take()).map_err(E::InvalidHeaderDeserialization)?;
        *md = serde_json::to_value(sorted).map_err(E::InvalidHeaderDeserialization)?;
    }
    let mut json = serde_json::to_vec(&top).map_err(E::InvalidHeaderDeserialization)?;
    while json.len() % 8 != 0 {
        json.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + json.len() + bytes.len() - 8 - n);
    out.extend_from_slice(&(json.len() as u64).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&bytes[8 + n..]);
    Ok(out)
}

/// Metadata key of the checkpoint's BLAKE3 checksum.
pub const CHECKSUM_KEY: &str = "blake3";

/// BLAKE3 of the metadata JSON and every tensor (name, type, shape, bytes),
/// in name order.
fn checksum<'a>(
    meta_json: &str,
    tensors: impl Iterator<Item = (&'a str, Dtype, &'a [usize], &'a [u8])>,
) -> String {
    let mut v: Vec<_> = tensors.collect();
    v.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = blake3::Hasher::new();
    h.update(&(meta_json.len() as u64).to_le_bytes());
    h.update(meta_json.as_bytes());
    for (name, dt, shape, bytes) in v {
        h.update(&(name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update(format!("{dt:?}").as_bytes());
        h.update(&(shape.len() as u64).to_le_bytes());
        for d in shape {
            h.update(&(*d as u64).to_le_bytes());
        }
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.finalize().to_hex().to_string()
}

/// A model tensor holding NaN or ±inf is never written: the error names it.
fn check_finite(path: &Path, name: &str, dt: Dtype, bytes: &[u8]) -> Result<()> {
    let bad = match dt {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .any(|c| !f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()),
        Dtype::F64 => bytes
            .chunks_exact(8)
            .any(|c| !f64::from_le_bytes(c.try_into().expect("8 bytes")).is_finite()),
        _ => false,
    };
    if bad {
        return Err(Error::file(
            path,
            format!("tensor `{name}` holds values that are not finite: checkpoint not written"),
        ));
    }
    Ok(())
}

fn tensor_bytes(t: &Tensor) -> Result<(Dtype, Vec<usize>, Vec<u8>)> {
    let t = t.to_device(&Device::Cpu)?;
    let shape = t.dims().to_vec();
    let flat = t.flatten_all()?;
    Ok(match flat.dtype() {
        DType::F64 => (
            Dtype::F64,
            shape,
            flat.to_vec1::<f64>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::U32 => (
            Dtype::U32,
            shape,
            flat.to_vec1::<u32>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::I64 => (
            Dtype::I64,
            shape,
            flat.to_vec1::<i64>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        DType::U8 => (Dtype::U8, shape, flat.to_vec1::<u8>()?),
        _ => (
            Dtype::F32,
            shape,
            flat.to_dtype(DType::F32)?
                .to_vec1::<f32>()?
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
    })
}

fn view_to_tensor(v: &TensorView<'_>, device: &Device) -> Result<Tensor> {
    let shape = v.shape().to_vec();
    let d = v.data();
    let t = match v.dtype() {
        Dtype::F32 => {
            let x: Vec<f32> = d
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Tensor::from_vec(x, shape, device)?
        }
        Dtype::F64 => {
            let x: Vec<f64> = d
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            Tensor::from_vec(x, shape, device)?
        }
        Dtype::U32 => {
            let x: Vec<u32> = d
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Tensor::from_vec(x, shape, device)?
        }
        Dtype::I64 => {
            let x: Vec<i64> = d
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            Tensor::from_vec(x, shape, device)?
        }
        Dtype::U8 => Tensor::from_vec(d.to_vec(), shape, device)?,
        other => return Err(Error::invalid(format!("unsupported tensor type {other:?}"))),
    };
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> CheckpointMeta {
        CheckpointMeta {
            kind: "test".into(),
            phase: "train".into(),
            epoch: 3,
            step: 30,
            params: [("dim".to_string(), "4".to_string())].into(),
            valid_mrr: Some(0.5),
            best_mrr: Some(0.5),
            best_epoch: Some(3),
            bad_epochs: 0,
            extra: vec!["adam.m".into()],
            rosetta_version: "0".into(),
        }
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.safetensors");
        let w = Tensor::new(&[[1.0f32, 2.0], [3.0, 4.0]], &Device::Cpu).unwrap();
        let m = Tensor::new(&[0.5f64], &Device::Cpu).unwrap();
        Checkpoint::write(
            &p,
            &meta(),
            &[("w".into(), w.clone())],
            &[("adam.m".into(), m)],
        )
        .unwrap();
        let c = Checkpoint::read(&p, &Device::Cpu).unwrap();
        assert_eq!(c.meta, meta());
        assert_eq!(c.tensors.len(), 2);
        let mt = c.model_tensors();
        assert_eq!(mt.len(), 1);
        assert_eq!(
            mt["w"].to_vec2::<f32>().unwrap(),
            vec![vec![1.0, 2.0], vec![3.0, 4.0]]
        );
        let bytes = std::fs::read(&p).unwrap();
        // one flipped byte in the data: the checksum says so
        let mut flipped = bytes.clone();
        let n = flipped.len();
        flipped[n - 2] ^= 0x40;
        std::fs::write(&p, &flipped).unwrap();
        let e = Checkpoint::read(&p, &Device::Cpu).unwrap_err().to_string();
        assert!(e.contains("c.safetensors") && e.contains("checksum"), "{e}");
        // a model tensor that is not finite is never written
        let nan = Tensor::new(&[f32::NAN, 1.0], &Device::Cpu).unwrap();
        let e = Checkpoint::write(&p, &meta(), &[("w".into(), nan)], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`w`") && e.contains("not finite"), "{e}");
        std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
        let e = Checkpoint::read(&p, &Device::Cpu).unwrap_err().to_string();
        assert!(e.contains("c.safetensors: not a valid checkpoint"), "{e}");
        let dup = Checkpoint::write(&p, &meta(), &[("w".into(), w.clone())], &[("w".into(), w)]);
        assert!(dup.is_err());
    }

    /// Issue 39: a checkpoint whose metadata lacks its checksum (edited to
    /// say epoch 999, say) is refused, never trusted.
    #[test]
    fn a_checkpoint_without_its_checksum_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.safetensors");
        let w: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let view = TensorView::new(Dtype::F32, vec![2], &w).unwrap();
        let mut m = meta();
        m.epoch = 999;
        m.extra.clear();
        let info: HashMap<String, String> =
            [("rosetta".to_string(), serde_json::to_string(&m).unwrap())].into();
        let bytes = safetensors::tensor::serialize([("w".to_string(), view)], Some(info)).unwrap();
        std::fs::write(&p, bytes).unwrap();
        let e = Checkpoint::read(&p, &Device::Cpu).unwrap_err().to_string();
        assert!(
            e.contains("c.safetensors") && e.contains("no `blake3`"),
            "{e}"
        );
    }
}
