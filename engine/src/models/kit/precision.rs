//! Mixed precision for the candle-trained models (the `precision` setting),
//! as PyTorch's autocast gives its users: the weights, the optimiser's
//! state, the losses and every element-wise op stay `f32`; only the matrix
//! products change.
//!
//! - `f32` (default): today's arithmetic, bit for bit.
//! - `bf16`: every dense product of the forward pass ([`matmul`],
//!   [`broadcast_matmul`]) rounds its two `f32` inputs to bfloat16,
//!   multiplies in bfloat16 (candle's gemm on the CPU, cuBLAS on CUDA) and
//!   returns `f32`. The backward pass follows the graph: the incoming `f32`
//!   gradient is rounded to bfloat16 by the conversion's backward, its two
//!   products run in bfloat16, and the gradients reach the `f32` weights
//!   through the conversion back. The sparse input layers (a gather and a
//!   segment sum: an embedding bag, which autocast leaves in `f32` too) are
//!   not dense products and stay `f32`.
//! - `tf32` (CUDA only): cuBLAS computes the `f32` products on tensor cores
//!   with TF32 inputs (candle's `set_gemm_reduced_precision_f32`), set for
//!   the job's process when its device is a GPU. The CPU has no TF32: it is
//!   refused there ([`Precision::check_device`], [`Precision::enter`]).
//!
//! A trainer reads the setting into its typed config ([`setting`]) and
//! enters it for the length of its training ([`Precision::enter`]); the
//! product helpers read the precision entered on the calling thread (as
//! autocast's state is per thread: a trainer that runs its forward pass on
//! threads of its own enters it there too, [`Precision::enter_thread`]).
//! Outside a trainer (loading a session, evaluating) products are `f32`.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{DType, Device, Tensor};

use crate::models::DeviceSpec;
use crate::{Error, Result};

/// The registry key.
pub const KEY: &str = "precision";

/// The arithmetic of a model's matrix products (see the module's docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// Plain `f32` products.
    #[default]
    F32,
    /// bfloat16 inputs, `f32` results.
    Bf16,
    /// TF32 tensor-core products on CUDA.
    Tf32,
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "f32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            "tf32" => Ok(Precision::Tf32),
            t => Err(format!("expected f32, bf16 or tf32, got `{t}`")),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
            Precision::Tf32 => "tf32",
        })
    }
}

/// A model's `precision` setting.
pub fn setting(v: &str) -> Result<Precision> {
    v.parse().map_err(Error::invalid)
}

thread_local! {
    static CURRENT: Cell<Precision> = const { Cell::new(Precision::F32) };
}

/// Products computed in bfloat16 by this process so far ([`bf16_products`]).
static BF16_PRODUCTS: AtomicU64 = AtomicU64::new(0);

/// How many products this process has computed in bfloat16: a diagnostic
/// that a training really took the bf16 path (a model whose products
/// bypassed [`matmul`] would leave it unchanged).
pub fn bf16_products() -> u64 {
    BF16_PRODUCTS.load(Ordering::Relaxed)
}

/// The precision entered on this thread ([`Precision::enter`]); `f32`
/// outside any.
pub fn current() -> Precision {
    CURRENT.with(Cell::get)
}

/// Restores the thread's previous precision when dropped.
#[must_use = "the precision holds only while the guard lives"]
#[derive(Debug)]
pub struct Entered {
    previous: Precision,
}

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

impl Precision {
    /// Refuses `tf32` for a job asked to run on `device` that will compute
    /// on the CPU: `cpu`, or `auto` in a build without CUDA (`auto` in a
    /// CUDA build is checked again when the device opens, by
    /// [`Precision::enter`]). What a job's request is checked against before
    /// its session is written.
    pub fn check_device(self, model: &str, device: DeviceSpec) -> Result<()> {
        if self != Precision::Tf32 {
            return Ok(());
        }
        if device.computes_on_cpu() {
            return Err(Error::invalid(format!(
                "{model}: precision=tf32 needs a CUDA GPU (TF32 is a tensor-core format), and \
                 --device {device} computes on the CPU{}; use precision=bf16 or f32 on the CPU",
                if device == DeviceSpec::Auto {
                    " (this build has no CUDA)"
                } else {
                    ""
                }
            )));
        }
        Ok(())
    }

    /// Enters this precision on the calling thread for a training of
    /// `model` on `device` (restored when the guard drops): `tf32` on the
    /// CPU is an error; on a CUDA device the process's reduced-precision
    /// `f32` gemm flag is set for `tf32` and cleared otherwise (a job is a
    /// process of its own).
    pub fn enter(self, model: &str, device: &Device) -> Result<Entered> {
        if self == Precision::Tf32 && !device.is_cuda() {
            return Err(Error::invalid(format!(
                "{model}: precision=tf32 needs a CUDA GPU, and this job's device is the CPU; \
                 use precision=bf16 or f32"
            )));
        }
        if device.is_cuda() {
            candle_core::cuda::set_gemm_reduced_precision_f32(self == Precision::Tf32);
        }
        Ok(self.enter_thread())
    }

    /// Enters this precision on the calling thread only (a thread a trainer
    /// spawns for its forward pass, after [`Precision::enter`] on its own).
    pub fn enter_thread(self) -> Entered {
        let previous = CURRENT.with(|c| c.replace(self));
        Entered { previous }
    }
}

/// Rounds an `f32` operand to bfloat16 under `bf16`; anything else as it is.
fn operand(x: &Tensor, p: Precision) -> Result<Tensor> {
    if p == Precision::Bf16 && x.dtype() == DType::F32 {
        Ok(x.to_dtype(DType::BF16)?)
    } else {
        Ok(x.clone())
    }
}

/// `a · b` at the thread's precision ([`current`]): `a.matmul(b)` itself
/// under `f32` and `tf32`; under `bf16` the product of the bfloat16-rounded
/// `f32` inputs, returned as `f32`. Every candle model's dense products go
/// through it (or [`broadcast_matmul`]).
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    product(a, b, current(), false)
}

/// [`matmul`] with candle's batch broadcasting (`broadcast_matmul`).
pub fn broadcast_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    product(a, b, current(), true)
}

fn product(a: &Tensor, b: &Tensor, p: Precision, broadcast: bool) -> Result<Tensor> {
    let mm = |x: &Tensor, y: &Tensor| -> Result<Tensor> {
        Ok(if broadcast {
            x.broadcast_matmul(y)?
        } else {
            x.matmul(y)?
        })
    };
    if p != Precision::Bf16 || a.dtype() != DType::F32 || b.dtype() != DType::F32 {
        return mm(a, b);
    }
    let out = mm(&operand(a, p)?, &operand(b, p)?)?.to_dtype(DType::F32)?;
    BF16_PRODUCTS.fetch_add(1, Ordering::Relaxed);
    Ok(out)
}

/// `a · b` in bfloat16 with a bfloat16 result (`f32` operands are rounded
/// first; their gradients come back `f32` through the conversion): the
/// products of a model that keeps its activations in bfloat16 under
/// `precision=bf16` (the encoder's training), counted by [`bf16_products`].
pub fn bf16_matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let out = operand(a, Precision::Bf16)?.matmul(&operand(b, Precision::Bf16)?)?;
    BF16_PRODUCTS.fetch_add(1, Ordering::Relaxed);
    Ok(out)
}

/// [`fused::affine`](super::fused::affine) (`x · wᵀ + b`) in bfloat16 with
/// a bfloat16 result, as [`bf16_matmul`] (its operands rounded first; counted
/// by [`bf16_products`]).
pub fn bf16_affine(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    let p = Precision::Bf16;
    let out = super::fused::affine(&operand(x, p)?, &operand(w, p)?, &operand(b, p)?)?;
    BF16_PRODUCTS.fetch_add(1, Ordering::Relaxed);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Var;

    fn t(v: &[f32], r: usize, c: usize) -> Tensor {
        Tensor::from_vec(v.to_vec(), (r, c), &Device::Cpu).unwrap()
    }

    #[test]
    fn spelling_round_trips_and_bad_values_are_refused() {
        for s in ["f32", "bf16", "tf32"] {
            assert_eq!(s.parse::<Precision>().unwrap().to_string(), s);
        }
        let e = "fp16".parse::<Precision>().unwrap_err();
        assert!(e.contains("f32, bf16 or tf32") && e.contains("fp16"), "{e}");
    }

    #[test]
    fn bf16_rounds_the_inputs_and_returns_f32_and_f32_is_the_plain_product() {
        // 1 + 2^-10 is exact in f32 and rounds to 1 in bfloat16 (8 bits)
        let x = 1.0f32 + 2f32.powi(-10);
        let a = t(&[x, 1.0, 2.0, x], 2, 2);
        let b = t(&[x, 0.5, 1.0, x], 2, 2);
        let plain = a.matmul(&b).unwrap();
        let f32_ = matmul(&a, &b).unwrap();
        assert_eq!(
            f32_.to_vec2::<f32>().unwrap(),
            plain.to_vec2::<f32>().unwrap(),
            "f32 outside any precision is the plain product"
        );
        let _g = Precision::Bf16.enter(KEY, &Device::Cpu).unwrap();
        let half = matmul(&a, &b).unwrap();
        assert_eq!(half.dtype(), DType::F32);
        let rounded = |m: &Tensor| {
            m.to_dtype(DType::BF16)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
        };
        let want = rounded(&a).matmul(&rounded(&b)).unwrap();
        assert_eq!(
            half.to_vec2::<f32>().unwrap(),
            rounded(&want).to_vec2::<f32>().unwrap()
        );
        assert_ne!(
            half.to_vec2::<f32>().unwrap(),
            plain.to_vec2::<f32>().unwrap(),
            "bf16 must change the arithmetic"
        );
        // the gradient reaches the f32 leaf through the conversions, as f32
        let w = Var::from_tensor(&b).unwrap();
        let g = broadcast_matmul(&a, w.as_tensor())
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        let gw = g.get(w.as_tensor()).unwrap();
        assert_eq!(gw.dtype(), DType::F32);
        // d(sum(a·w))/dw[i][j] = Σ_r a[r][i], a's rounded columns summed
        let col: Vec<f32> = rounded(&a).sum(0).unwrap().to_vec1::<f32>().unwrap();
        let got = gw.to_vec2::<f32>().unwrap();
        for (i, row) in got.iter().enumerate() {
            for v in row {
                assert_eq!(*v, col[i]);
            }
        }
    }

    #[test]
    fn the_precision_is_restored_and_tf32_is_refused_on_the_cpu() {
        assert_eq!(current(), Precision::F32);
        {
            let _g = Precision::Bf16.enter_thread();
            assert_eq!(current(), Precision::Bf16);
            // a thread of its own starts at f32
            std::thread::scope(|s| {
                s.spawn(|| assert_eq!(current(), Precision::F32));
            });
        }
        assert_eq!(current(), Precision::F32);
        let e = Precision::Tf32.enter("s2net", &Device::Cpu).unwrap_err();
        assert!(e.to_string().contains("tf32 needs a CUDA GPU"), "{e}");
        let e = Precision::Tf32
            .check_device("s2net", DeviceSpec::Cpu)
            .unwrap_err();
        assert!(e.to_string().contains("--device cpu"), "{e}");
        assert_eq!(
            Precision::Tf32
                .check_device("s2net", DeviceSpec::Auto)
                .is_ok(),
            cfg!(feature = "cuda")
        );
        Precision::Tf32
            .check_device("s2net", DeviceSpec::Cuda(0))
            .unwrap();
        Precision::Bf16
            .check_device("s2net", DeviceSpec::Cpu)
            .unwrap();
    }
}
