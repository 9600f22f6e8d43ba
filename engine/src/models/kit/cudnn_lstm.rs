//! The BiLSTM's recurrence through cuDNN's RNN (`recurrence=cudnn`, issue 41
//! item 1): the library PyTorch's `nn.LSTM` calls on a GPU, through cudarc's
//! cuDNN bindings. Built with the `cudnn` feature (which needs the cuDNN
//! library to link and run).
//!
//! One op runs the whole bidirectional sequence, input projection included,
//! in `cudnnRNNForward` (the training mode, keeping cuDNN's reserve space
//! for the backward pass); its backward is `cudnnRNNBackwardData_v8` then
//! `cudnnRNNBackwardWeights_v8`. Padding is cuDNN's: each sequence runs for
//! its own length (the backward direction starts at its last real step from
//! zero state), padded steps output zeros and neither read nor receive
//! anything, as in the BiLSTM's own recurrence (`kit/lstm.rs`, whose
//! `BiLstm::forward_cudnn` calls this module).
//!
//! The layer's parameters stay candle variables in Rosetta's layout
//! (`BiLstm`'s: torch's gate order `i, f, g, o`, which is cuDNN's too); each forward pass packs them, transposed, into one flat
//! tensor laid out as cuDNN's weight space (offsets asked of
//! `cudnnGetRNNWeightParams` once per shape), so candle's autograd takes
//! the weight-space gradient back to the variables. One bias per gate
//! (`CUDNN_RNN_SINGLE_INP_BIAS`), as the layer has.
//!
//! f32 only. The products are f32 (`CUDNN_FMA_MATH`); with `precision=tf32`
//! cuDNN may use TF32 tensor cores (`CUDNN_DEFAULT_MATH`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};

use candle_core::cuda_backend::cudarc::cudnn::sys;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use candle_core::cuda_backend::CudaDevice;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, DType, Layout, Shape, Storage, Tensor};

use crate::{Error, Result};

/// A BiLSTM layer's parameters in Rosetta's layout: `w_ih` `(input, 8H)`,
/// `b` `(8H)`, `w_hh` `(2, H, 4H)` (forward direction, then backward; gates
/// `i, f, g, o`).
pub struct Weights<'a> {
    pub w_ih: &'a Tensor,
    pub b: &'a Tensor,
    pub w_hh: &'a Tensor,
}

impl Weights<'_> {
    fn hidden(&self) -> Result<usize> {
        Ok(self.w_hh.dim(1)?)
    }
}

/// Hidden states `(B, T, 2H)` of `x` `(B, T, input)` (f32 on CUDA) whose
/// rows have the real lengths `lengths` (each at most `T`; a row of length 0
/// runs one step, which the caller's mask zeroes), through cuDNN.
pub fn forward(lstm: &Weights, x: &Tensor, lengths: &[usize], tf32: bool) -> Result<Tensor> {
    let (b, t, d) = x.dims3()?;
    let h = lstm.hidden()?;
    let input = lstm.w_ih.dim(0)?;
    if d != input {
        return Err(Error::invalid(format!(
            "BiLSTM input has {d} features per step, the layer expects {input}"
        )));
    }
    if lengths.len() != b || lengths.iter().any(|&n| n > t) {
        return Err(Error::invalid(format!(
            "cuDNN BiLSTM: {} lengths for {b} rows of {t} steps",
            lengths.len()
        )));
    }
    let candle_core::Device::Cuda(dev) = x.device() else {
        return Err(Error::invalid(
            "recurrence=cudnn runs on a CUDA device; this batch is on the CPU",
        ));
    };
    if x.dtype() != DType::F32 {
        return Err(Error::invalid(format!(
            "recurrence=cudnn computes in f32, got {:?}",
            x.dtype()
        )));
    }
    let to_i32 =
        |n: usize| i32::try_from(n).map_err(|_| Error::invalid("cuDNN BiLSTM: size over i32"));
    let shape = Sizes {
        input: to_i32(d)?,
        hidden: to_i32(h)?,
        batch: to_i32(b)?,
        steps: to_i32(t)?,
    };
    let lengths = lengths
        .iter()
        .map(|&n| to_i32(n.max(1)))
        .collect::<Result<Vec<i32>>>()?;
    let layout = weight_layout(dev, shape.input, shape.hidden)?;
    let w = pack(lstm, &layout)?;
    let op = Rnn(Call {
        shape,
        lengths,
        tf32,
        reserve: Arc::new(Mutex::new(None)),
    });
    Ok(x.contiguous()?.apply_op2(&w, op)?)
}

/// The sizes a plan is made for.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    input: i32,
    hidden: i32,
    batch: i32,
    steps: i32,
}

fn check(s: sys::cudnnStatus_t, what: &str) -> candle_core::Result<()> {
    if s == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS {
        Ok(())
    } else {
        candle_core::bail!("cuDNN {what} failed: {s:?}")
    }
}

/// A cuDNN handle bound to a device's stream (cuDNN handles are neither
/// `Send` nor `Sync`: one per thread and stream, as candle keeps its own).
struct Handle(sys::cudnnHandle_t);

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by cudnnCreate and dropped once.
        unsafe { sys::cudnnDestroy(self.0) };
    }
}

thread_local! {
    static HANDLES: RefCell<HashMap<usize, Rc<Handle>>> = RefCell::new(HashMap::new());
}

fn handle(dev: &CudaDevice) -> candle_core::Result<Rc<Handle>> {
    let stream = dev.cuda_stream();
    let key = stream.cu_stream() as usize;
    if let Some(h) = HANDLES.with(|m| m.borrow().get(&key).cloned()) {
        return Ok(h);
    }
    stream
        .context()
        .bind_to_thread()
        .map_err(candle_core::Error::wrap)?;
    let mut raw = std::ptr::null_mut();
    // SAFETY: cudnnCreate writes a handle into `raw`.
    check(unsafe { sys::cudnnCreate(&mut raw) }, "create")?;
    let h = Rc::new(Handle(raw));
    // SAFETY: the stream outlives the handle's use (candle's device holds it).
    check(
        unsafe { sys::cudnnSetStream(raw, stream.cu_stream() as sys::cudaStream_t) },
        "set stream",
    )?;
    HANDLES.with(|m| m.borrow_mut().insert(key, h.clone()));
    Ok(h)
}

/// The descriptors of one call, destroyed on drop.
struct Plan {
    rnn: sys::cudnnRNNDescriptor_t,
    dropout: sys::cudnnDropoutDescriptor_t,
    x: sys::cudnnRNNDataDescriptor_t,
    y: sys::cudnnRNNDataDescriptor_t,
    h: sys::cudnnTensorDescriptor_t,
    weight_bytes: usize,
    work_bytes: usize,
    reserve_bytes: usize,
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: each was created by its cudnnCreate* (or is null) and is
        // destroyed once.
        unsafe {
            if !self.x.is_null() {
                sys::cudnnDestroyRNNDataDescriptor(self.x);
            }
            if !self.y.is_null() {
                sys::cudnnDestroyRNNDataDescriptor(self.y);
            }
            if !self.h.is_null() {
                sys::cudnnDestroyTensorDescriptor(self.h);
            }
            if !self.rnn.is_null() {
                sys::cudnnDestroyRNNDescriptor(self.rnn);
            }
            if !self.dropout.is_null() {
                sys::cudnnDestroyDropoutDescriptor(self.dropout);
            }
        }
    }
}

impl Plan {
    /// The RNN descriptor alone (`batch` 0: no data descriptors, no
    /// temporary sizes), or the whole plan for a batch with `lengths`.
    fn new(
        handle: &Handle,
        s: Sizes,
        lengths: Option<&[i32]>,
        tf32: bool,
    ) -> candle_core::Result<Plan> {
        let mut p = Plan {
            rnn: std::ptr::null_mut(),
            dropout: std::ptr::null_mut(),
            x: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            h: std::ptr::null_mut(),
            weight_bytes: 0,
            work_bytes: 0,
            reserve_bytes: 0,
        };
        let f32t = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
        // SAFETY: every call gets descriptors created here and host
        // pointers that live through the call.
        unsafe {
            check(
                sys::cudnnCreateDropoutDescriptor(&mut p.dropout),
                "dropout descriptor",
            )?;
            // no dropout (one layer): no state memory, as PyTorch's
            // `set_no_dropout`
            check(
                sys::cudnnSetDropoutDescriptor(
                    p.dropout,
                    handle.0,
                    0.0,
                    std::ptr::null_mut(),
                    0,
                    0,
                ),
                "dropout descriptor",
            )?;
            check(sys::cudnnCreateRNNDescriptor(&mut p.rnn), "RNN descriptor")?;
            let math = if tf32 {
                sys::cudnnMathType_t::CUDNN_DEFAULT_MATH
            } else {
                sys::cudnnMathType_t::CUDNN_FMA_MATH
            };
            const PADDED_IO_ENABLED: u32 = 1;
            check(
                sys::cudnnSetRNNDescriptor_v8(
                    p.rnn,
                    sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_STANDARD,
                    sys::cudnnRNNMode_t::CUDNN_LSTM,
                    sys::cudnnRNNBiasMode_t::CUDNN_RNN_SINGLE_INP_BIAS,
                    sys::cudnnDirectionMode_t::CUDNN_BIDIRECTIONAL,
                    sys::cudnnRNNInputMode_t::CUDNN_LINEAR_INPUT,
                    f32t,
                    f32t,
                    math,
                    s.input,
                    s.hidden,
                    s.hidden,
                    1,
                    p.dropout,
                    PADDED_IO_ENABLED,
                ),
                "RNN descriptor",
            )?;
            check(
                sys::cudnnGetRNNWeightSpaceSize(handle.0, p.rnn, &mut p.weight_bytes),
                "weight space size",
            )?;
            let Some(lengths) = lengths else {
                return Ok(p);
            };
            let mut fill = 0f32;
            let fill_ptr = (&mut fill as *mut f32).cast::<c_void>();
            let layout = sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED;
            check(sys::cudnnCreateRNNDataDescriptor(&mut p.x), "x descriptor")?;
            check(
                sys::cudnnSetRNNDataDescriptor(
                    p.x,
                    f32t,
                    layout,
                    s.steps,
                    s.batch,
                    s.input,
                    lengths.as_ptr(),
                    fill_ptr,
                ),
                "x descriptor",
            )?;
            check(sys::cudnnCreateRNNDataDescriptor(&mut p.y), "y descriptor")?;
            check(
                sys::cudnnSetRNNDataDescriptor(
                    p.y,
                    f32t,
                    layout,
                    s.steps,
                    s.batch,
                    2 * s.hidden,
                    lengths.as_ptr(),
                    fill_ptr,
                ),
                "y descriptor",
            )?;
            check(
                sys::cudnnCreateTensorDescriptor(&mut p.h),
                "state descriptor",
            )?;
            let dims = [2, s.batch, s.hidden];
            let strides = [s.batch * s.hidden, s.hidden, 1];
            check(
                sys::cudnnSetTensorNdDescriptor(p.h, f32t, 3, dims.as_ptr(), strides.as_ptr()),
                "state descriptor",
            )?;
            check(
                sys::cudnnGetRNNTempSpaceSizes(
                    handle.0,
                    p.rnn,
                    sys::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
                    p.x,
                    &mut p.work_bytes,
                    &mut p.reserve_bytes,
                ),
                "temporary space sizes",
            )?;
        }
        Ok(p)
    }
}

/// What a stretch of cuDNN's weight space holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// Input weights of direction `d`, gate `q` (`H × input`).
    Input(usize, usize),
    /// Recurrent weights (`H × H`).
    Recurrent(usize, usize),
    /// The gate's bias (`H`).
    Bias(usize, usize),
    /// A bias the layer does not have (kept at zero).
    Zero,
}

/// A stretch of the weight space: offset and length in f32 values.
#[derive(Debug, Clone, Copy)]
struct Piece {
    offset: usize,
    len: usize,
    part: Part,
}

/// The weight space's size (f32 values) and its pieces, by offset.
type WeightLayout = (usize, Vec<Piece>);

/// The layouts asked so far, by `(input, hidden)`.
type LayoutCache = Mutex<HashMap<(i32, i32), Arc<WeightLayout>>>;

/// cuDNN's weight-space layout for `(input, hidden)`, asked once per shape.
fn weight_layout(
    dev: &CudaDevice,
    input: i32,
    hidden: i32,
) -> candle_core::Result<Arc<WeightLayout>> {
    static CACHE: OnceLock<LayoutCache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(l) = cache
        .lock()
        .map_err(|_| candle_core::Error::Msg("cuDNN layout cache poisoned".into()))?
        .get(&(input, hidden))
    {
        return Ok(l.clone());
    }
    let h = handle(dev)?;
    let s = Sizes {
        input,
        hidden,
        batch: 0,
        steps: 0,
    };
    let plan = Plan::new(&h, s, None, false)?;
    let stream = dev.cuda_stream();
    let space = dev.alloc_zeros::<u8>(plan.weight_bytes.max(4))?;
    let (base, _g) = space.device_ptr(&stream);
    let (hu, iu) = (hidden as usize, input as usize);
    let mut pieces = Vec::new();
    // SAFETY: descriptors created and destroyed here; cuDNN writes the
    // addresses of the pieces inside `space` and their shapes.
    unsafe {
        let mut m = std::ptr::null_mut();
        let mut bd = std::ptr::null_mut();
        check(
            sys::cudnnCreateTensorDescriptor(&mut m),
            "matrix descriptor",
        )?;
        check(sys::cudnnCreateTensorDescriptor(&mut bd), "bias descriptor")?;
        let res = (|| -> candle_core::Result<()> {
            for d in 0..2usize {
                for lin in 0..8usize {
                    let (mut ma, mut ba) = (std::ptr::null_mut(), std::ptr::null_mut());
                    check(
                        sys::cudnnGetRNNWeightParams(
                            h.0,
                            plan.rnn,
                            d as i32,
                            plan.weight_bytes,
                            base as *const c_void,
                            lin as i32,
                            m,
                            &mut ma,
                            bd,
                            &mut ba,
                        ),
                        "weight params",
                    )?;
                    let q = lin % 4;
                    let (part, want) = if lin < 4 {
                        (Part::Input(d, q), hu * iu)
                    } else {
                        (Part::Recurrent(d, q), hu * hu)
                    };
                    if !ma.is_null() {
                        pieces.push(piece(base, ma, count(m)?, part, want)?);
                    }
                    if !ba.is_null() {
                        let part = if lin < 4 {
                            Part::Bias(d, q)
                        } else {
                            Part::Zero
                        };
                        pieces.push(piece(base, ba, count(bd)?, part, hu)?);
                    }
                }
            }
            Ok(())
        })();
        sys::cudnnDestroyTensorDescriptor(m);
        sys::cudnnDestroyTensorDescriptor(bd);
        res?;
    }
    pieces.sort_by_key(|p| p.offset);
    let want = [Part::Input(0, 0), Part::Recurrent(0, 0), Part::Bias(0, 0)];
    for w in want {
        let kind = |p: &Part| std::mem::discriminant(p) == std::mem::discriminant(&w);
        if pieces.iter().filter(|p| kind(&p.part)).count() != 8 {
            candle_core::bail!(
                "cuDNN's LSTM weight space lacks some {w:?}-like pieces: {pieces:?}"
            );
        }
    }
    let layout = Arc::new((plan.weight_bytes / 4, pieces));
    cache
        .lock()
        .map_err(|_| candle_core::Error::Msg("cuDNN layout cache poisoned".into()))?
        .insert((input, hidden), layout.clone());
    Ok(layout)
}

/// Values a tensor descriptor describes.
unsafe fn count(desc: sys::cudnnTensorDescriptor_t) -> candle_core::Result<usize> {
    let mut dt = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
    let (mut nb, mut dims, mut strides) = (0i32, [0i32; 8], [0i32; 8]);
    check(
        sys::cudnnGetTensorNdDescriptor(
            desc,
            8,
            &mut dt,
            &mut nb,
            dims.as_mut_ptr(),
            strides.as_mut_ptr(),
        ),
        "tensor descriptor",
    )?;
    Ok(dims[..nb.clamp(0, 8) as usize]
        .iter()
        .map(|&d| d.max(0) as usize)
        .product())
}

/// The piece at address `at` of the space at `base`.
fn piece(
    base: u64,
    at: *mut c_void,
    len: usize,
    part: Part,
    want: usize,
) -> candle_core::Result<Piece> {
    let bytes = (at as u64).checked_sub(base).filter(|b| b % 4 == 0);
    let Some(bytes) = bytes else {
        candle_core::bail!("cuDNN placed {part:?} outside its weight space");
    };
    if len != want {
        candle_core::bail!("cuDNN's {part:?} has {len} values, the layer {want}");
    }
    Ok(Piece {
        offset: bytes as usize / 4,
        len,
        part,
    })
}

/// The layer's parameters as one flat tensor in cuDNN's weight layout (its
/// gradient flows back to the variables).
fn pack(lstm: &Weights, layout: &WeightLayout) -> Result<Tensor> {
    let (total, pieces) = layout;
    let h = lstm.hidden()?;
    let (w_ih, b, w_hh) = (lstm.w_ih, lstm.b, lstm.w_hh);
    let dev = w_ih.device();
    let mut parts: Vec<Tensor> = Vec::with_capacity(2 * pieces.len() + 1);
    let mut at = 0usize;
    for p in pieces {
        if p.offset < at {
            return Err(Error::invalid(format!(
                "cuDNN's weight pieces overlap at {} ({:?})",
                p.offset, p.part
            )));
        }
        if p.offset > at {
            parts.push(Tensor::zeros(p.offset - at, DType::F32, dev)?);
        }
        parts.push(match p.part {
            Part::Input(d, q) => w_ih
                .narrow(1, d * 4 * h + q * h, h)?
                .t()?
                .contiguous()?
                .flatten_all()?,
            Part::Recurrent(d, q) => w_hh
                .get(d)?
                .narrow(1, q * h, h)?
                .t()?
                .contiguous()?
                .flatten_all()?,
            Part::Bias(d, q) => b.narrow(0, d * 4 * h + q * h, h)?,
            Part::Zero => Tensor::zeros(p.len, DType::F32, dev)?,
        });
        at = p.offset + p.len;
    }
    if at > *total {
        return Err(Error::invalid(
            "cuDNN's weight pieces pass its weight space",
        ));
    }
    if at < *total {
        parts.push(Tensor::zeros(total - at, DType::F32, dev)?);
    }
    Ok(Tensor::cat(&parts, 0)?)
}

/// What the forward op and its backward share.
#[derive(Clone)]
struct Call {
    shape: Sizes,
    /// The rows' lengths (each at least 1).
    lengths: Vec<i32>,
    tf32: bool,
    /// cuDNN's reserve space, from the forward pass to the backward one.
    reserve: Arc<Mutex<Option<CudaSlice<u8>>>>,
}

/// A call's device, stream, handle and plan.
type Setup = (CudaDevice, Arc<CudaStream>, Rc<Handle>, Plan);

impl Call {
    /// The device of `s`, its stream, this thread's handle and the call's plan.
    fn setup(&self, s: &CudaStorage) -> candle_core::Result<Setup> {
        let dev = s.device.clone();
        let stream = dev.cuda_stream();
        let h = handle(&dev)?;
        let plan = Plan::new(&h, self.shape, Some(&self.lengths), self.tf32)?;
        Ok((dev, stream, h, plan))
    }

    fn reserve(&self) -> candle_core::Result<std::sync::MutexGuard<'_, Option<CudaSlice<u8>>>> {
        self.reserve
            .lock()
            .map_err(|_| candle_core::Error::Msg("cuDNN reserve poisoned".into()))
    }
}

/// The forward op: `x` `(B, T, input)` and the packed weights → `(B, T, 2H)`.
struct Rnn(Call);

/// The backward op: `x` and `∂y` → `[∂x, ∂w]` flat (`w` and `y` held).
struct RnnGrad {
    call: Call,
    w: Tensor,
    y: Tensor,
}

fn cuda_only() -> candle_core::Result<(CpuStorage, Shape)> {
    candle_core::bail!("the cuDNN recurrence runs on CUDA only")
}

/// The contiguous f32 values of a CUDA storage.
fn view<'a>(
    s: &'a CudaStorage,
    l: &Layout,
) -> candle_core::Result<candle_core::cuda_backend::cudarc::driver::CudaView<'a, f32>> {
    let (a, b) = crate::models::kit::rows::offsets(l, "cudnn-lstm")?;
    Ok(s.as_cuda_slice::<f32>()?.slice(a..b))
}

impl CustomOp2 for Rnn {
    fn name(&self) -> &'static str {
        "rosetta-cudnn-lstm"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        cuda_only()
    }

    fn cuda_fwd(
        &self,
        xs: &CudaStorage,
        xl: &Layout,
        ws: &CudaStorage,
        wl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let s = self.0.shape;
        let (dev, stream, h, plan) = self.0.setup(xs)?;
        let (x, w) = (view(xs, xl)?, view(ws, wl)?);
        if w.len() * 4 != plan.weight_bytes {
            candle_core::bail!(
                "cuDNN BiLSTM: {} packed weights, cuDNN wants {} bytes",
                w.len(),
                plan.weight_bytes
            );
        }
        let (b, t, hh) = (s.batch as usize, s.steps as usize, s.hidden as usize);
        let mut y = dev.alloc_zeros::<f32>(b * t * 2 * hh)?;
        let seq = dev.clone_htod(self.0.lengths.as_slice())?;
        let mut work = dev.alloc_zeros::<u8>(plan.work_bytes.max(1))?;
        let mut reserve = dev.alloc_zeros::<u8>(plan.reserve_bytes.max(1))?;
        {
            let (xp, _gx) = x.device_ptr(&stream);
            let (wp, _gw) = w.device_ptr(&stream);
            let (sp, _gs) = seq.device_ptr(&stream);
            let (yp, _gy) = y.device_ptr_mut(&stream);
            let (kp, _gk) = work.device_ptr_mut(&stream);
            let (rp, _gr) = reserve.device_ptr_mut(&stream);
            // SAFETY: the buffers have the sizes the plan's descriptors
            // give (x B·T·input, y B·T·2H, w the weight space, the lengths
            // B values), on the handle's stream; null initial and final
            // states are zero and not written.
            check(
                unsafe {
                    sys::cudnnRNNForward(
                        h.0,
                        plan.rnn,
                        sys::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING,
                        sp as *const i32,
                        plan.x,
                        xp as *const c_void,
                        plan.y,
                        yp as *mut c_void,
                        plan.h,
                        std::ptr::null(),
                        std::ptr::null_mut(),
                        plan.h,
                        std::ptr::null(),
                        std::ptr::null_mut(),
                        plan.weight_bytes,
                        wp as *const c_void,
                        plan.work_bytes,
                        kp as *mut c_void,
                        plan.reserve_bytes,
                        rp as *mut c_void,
                    )
                },
                "RNN forward",
            )?;
        }
        *self.0.reserve()? = Some(reserve);
        Ok((
            CudaStorage::wrap_cuda_slice(y, dev.clone()),
            Shape::from((b, t, 2 * hh)),
        ))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let (nx, nw) = (x.elem_count(), w.elem_count());
        let op = RnnGrad {
            call: self.0.clone(),
            w: w.clone(),
            y: res.clone(),
        };
        let flat = x.apply_op2_no_bwd(&grad.contiguous()?, &op)?;
        Ok((
            Some(flat.narrow(0, 0, nx)?.reshape(x.shape())?),
            Some(flat.narrow(0, nx, nw)?),
        ))
    }
}

impl CustomOp2 for RnnGrad {
    fn name(&self) -> &'static str {
        "rosetta-cudnn-lstm-grad"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        cuda_only()
    }

    fn cuda_fwd(
        &self,
        xs: &CudaStorage,
        xl: &Layout,
        gs: &CudaStorage,
        gl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (dev, stream, h, plan) = self.call.setup(xs)?;
        let Some(mut reserve) = self.call.reserve()?.take() else {
            candle_core::bail!("cuDNN BiLSTM: a second backward pass through one forward pass");
        };
        let (ws_guard, wl) = self.w.storage_and_layout();
        let (ys_guard, yl) = self.y.storage_and_layout();
        let (Storage::Cuda(ws), Storage::Cuda(ys)) = (&*ws_guard, &*ys_guard) else {
            candle_core::bail!("cuDNN BiLSTM: weights and outputs must be on CUDA");
        };
        let (x, dy, w, y) = (view(xs, xl)?, view(gs, gl)?, view(ws, wl)?, view(ys, yl)?);
        let nx = x.len();
        let nw = w.len();
        // [∂x | ∂w]; ∂w accumulates (CUDNN_WGRAD_MODE_ADD) from zero
        let mut out = dev.alloc_zeros::<f32>(nx + nw)?;
        let seq = dev.clone_htod(self.call.lengths.as_slice())?;
        let mut work = dev.alloc_zeros::<u8>(plan.work_bytes.max(1))?;
        {
            let (xp, _gx) = x.device_ptr(&stream);
            let (dyp, _gdy) = dy.device_ptr(&stream);
            let (wp, _gw) = w.device_ptr(&stream);
            let (yp, _gy) = y.device_ptr(&stream);
            let (sp, _gs) = seq.device_ptr(&stream);
            let (op, _go) = out.device_ptr_mut(&stream);
            let (kp, _gk) = work.device_ptr_mut(&stream);
            let (rp, _gr) = reserve.device_ptr_mut(&stream);
            let dwp = op + (nx * 4) as u64;
            // SAFETY: as the forward pass, with ∂x (B·T·input) and ∂w (the
            // weight space) the two halves of `out`, and the forward's
            // reserve space; null states: zero, no gradient asked.
            check(
                unsafe {
                    sys::cudnnRNNBackwardData_v8(
                        h.0,
                        plan.rnn,
                        sp as *const i32,
                        plan.y,
                        yp as *const c_void,
                        dyp as *const c_void,
                        plan.x,
                        op as *mut c_void,
                        plan.h,
                        std::ptr::null(),
                        std::ptr::null(),
                        std::ptr::null_mut(),
                        plan.h,
                        std::ptr::null(),
                        std::ptr::null(),
                        std::ptr::null_mut(),
                        plan.weight_bytes,
                        wp as *const c_void,
                        plan.work_bytes,
                        kp as *mut c_void,
                        plan.reserve_bytes,
                        rp as *mut c_void,
                    )
                },
                "RNN backward (data)",
            )?;
            check(
                unsafe {
                    sys::cudnnRNNBackwardWeights_v8(
                        h.0,
                        plan.rnn,
                        sys::cudnnWgradMode_t::CUDNN_WGRAD_MODE_ADD,
                        sp as *const i32,
                        plan.x,
                        xp as *const c_void,
                        plan.h,
                        std::ptr::null(),
                        plan.y,
                        yp as *const c_void,
                        plan.weight_bytes,
                        dwp as *mut c_void,
                        plan.work_bytes,
                        kp as *mut c_void,
                        plan.reserve_bytes,
                        rp as *mut c_void,
                    )
                },
                "RNN backward (weights)",
            )?;
        }
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev.clone()),
            Shape::from(nx + nw),
        ))
    }
}
