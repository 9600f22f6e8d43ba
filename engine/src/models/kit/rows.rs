//! Row gathers and scatters whose gradients run in parallel on a GPU.
//!
//! candle's CUDA `index_add` and `scatter` kernels (the gradient of
//! `index_select`, and lazy Adam's row write) give each thread one column and
//! loop over every id, so a batch of sparse texts or word positions runs its
//! backward pass almost serially. [`gather_rows`] and [`scatter_add_rows`] are
//! `index_select(ids, 0)` and `zeros.index_add(ids, src, 0)`, each the other's
//! gradient; [`set_rows`] is `scatter_set` of whole rows. On a CUDA device
//! they run Rosetta's kernels (`kernels/rows.cu`: one thread per entry, atomic
//! adds); on the CPU they are candle's own ops, so CPU figures are unchanged.
//!
//! Contract: `ids` is a `u32` vector whose every id is below the table's
//! number of rows (the kernels do not check; callers build ids from their own
//! vocabularies); [`set_rows`] also wants the ids distinct.

use candle_core::{CpuStorage, CustomOp2, DType, InplaceOp3, Layout, Shape, Tensor};

use crate::Result;

/// `table.index_select(ids, 0)`: row `ids[j]` of `table` as row `j`.
pub fn gather_rows(table: &Tensor, ids: &Tensor) -> Result<Tensor> {
    if !custom(table, ids) {
        return Ok(table.index_select(ids, 0)?);
    }
    gather_rows_op(table, ids)
}

/// `zeros(n, …).index_add(ids, src, 0)`: row `j` of `src` added into row
/// `ids[j]` of an `n`-row result.
pub fn scatter_add_rows(src: &Tensor, ids: &Tensor, n: usize) -> Result<Tensor> {
    if !custom(src, ids) {
        let mut dims = src.dims().to_vec();
        dims[0] = n;
        let zeros = Tensor::zeros(dims, src.dtype(), src.device())?;
        return Ok(zeros.index_add(ids, src, 0)?);
    }
    scatter_add_rows_op(src, ids, n)
}

/// Writes row `j` of `src` over row `ids[j]` of `dst`, in place (`ids`
/// distinct); no gradient.
pub fn set_rows(dst: &Tensor, ids: &Tensor, src: &Tensor) -> Result<()> {
    if !custom(dst, ids) || !contiguous_from_start(dst) {
        let idx = if dst.rank() == 1 {
            ids.clone()
        } else {
            ids.unsqueeze(1)?.broadcast_as(src.shape())?.contiguous()?
        };
        dst.scatter_set(&idx, src, 0)?;
        return Ok(());
    }
    set_rows_op(dst, ids, src)
}

/// Whether Rosetta's kernels do it: off the CPU, f32/f64 values, u32 ids.
fn custom(t: &Tensor, ids: &Tensor) -> bool {
    !t.device().is_cpu()
        && matches!(t.dtype(), DType::F32 | DType::F64)
        && ids.dtype() == DType::U32
        && ids.rank() == 1
        && t.rank() >= 1
}

fn contiguous_from_start(t: &Tensor) -> bool {
    t.layout().contiguous_offsets() == Some((0, t.elem_count()))
}

/// [`gather_rows`] through the custom op on any device (the CPU too: tests).
pub(crate) fn gather_rows_op(table: &Tensor, ids: &Tensor) -> Result<Tensor> {
    Ok(table.contiguous()?.apply_op2(&ids.contiguous()?, Gather)?)
}

/// [`scatter_add_rows`] through the custom op on any device.
pub(crate) fn scatter_add_rows_op(src: &Tensor, ids: &Tensor, n: usize) -> Result<Tensor> {
    Ok(src
        .contiguous()?
        .apply_op2(&ids.contiguous()?, ScatterAdd { n })?)
}

/// [`set_rows`] through the custom op on any device.
pub(crate) fn set_rows_op(dst: &Tensor, ids: &Tensor, src: &Tensor) -> Result<()> {
    Ok(dst.inplace_op3(&src.contiguous()?, &ids.contiguous()?, &SetRows)?)
}

/// Entries per row: the product of the dimensions after the first.
fn width(l: &Layout) -> usize {
    l.dims().iter().skip(1).product()
}

/// The start and end of a contiguous layout (custom ops' inputs are made
/// contiguous first).
pub(crate) fn offsets(l: &Layout, op: &'static str) -> candle_core::Result<(usize, usize)> {
    l.contiguous_offsets()
        .ok_or(candle_core::Error::RequiresContiguous { op })
}

/// The values of a CPU storage (`f32` or `f64`) under a contiguous layout,
/// as `f64`: the CPU code of Rosetta's custom ops computes in f64.
pub(crate) fn host_f64(
    s: &CpuStorage,
    l: &Layout,
    op: &'static str,
) -> candle_core::Result<Vec<f64>> {
    let (a, b) = offsets(l, op)?;
    Ok(match s {
        CpuStorage::F32(v) => v[a..b].iter().map(|&x| x as f64).collect(),
        CpuStorage::F64(v) => v[a..b].to_vec(),
        _ => candle_core::bail!("{op}: f32 or f64 values expected"),
    })
}

/// `v` as a storage of the same type as `s` (`f32` or `f64`).
pub(crate) fn like(s: &CpuStorage, v: Vec<f64>) -> CpuStorage {
    match s {
        CpuStorage::F32(_) => CpuStorage::F32(v.into_iter().map(|x| x as f32).collect()),
        _ => CpuStorage::F64(v),
    }
}

/// The shape `l` has with `rows` rows.
fn with_rows(l: &Layout, rows: usize) -> Shape {
    let mut d = l.dims().to_vec();
    d[0] = rows;
    Shape::from(d)
}

struct Gather;

impl CustomOp2 for Gather {
    fn name(&self) -> &'static str {
        "rosetta-gather-rows"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        fn go<T: Copy>(t: &[T], ids: &[u32], k: usize) -> candle_core::Result<Vec<T>> {
            let mut out = Vec::with_capacity(ids.len() * k);
            for &i in ids {
                let at = i as usize * k;
                let row = t.get(at..at + k).ok_or_else(|| {
                    candle_core::Error::Msg(format!("gather-rows: id {i} out of range"))
                })?;
                out.extend_from_slice(row);
            }
            Ok(out)
        }
        let (a, b) = offsets(l1, self.name())?;
        let (ia, ib) = offsets(l2, self.name())?;
        let k = width(l1);
        let CpuStorage::U32(ids) = s2 else {
            candle_core::bail!("gather-rows: u32 ids expected")
        };
        let ids = &ids[ia..ib];
        let out = match s1 {
            CpuStorage::F32(t) => CpuStorage::F32(go(&t[a..b], ids, k)?),
            CpuStorage::F64(t) => CpuStorage::F64(go(&t[a..b], ids, k)?),
            _ => candle_core::bail!("gather-rows: f32 or f64 values expected"),
        };
        Ok((out, with_rows(l1, ids.len())))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let n_ids = l2.shape().elem_count();
        let out = gpu::rows_kernel(gpu::RowKernel::Gather, s1, l1, s2, l2, n_ids)?;
        Ok((out, with_rows(l1, n_ids)))
    }

    fn bwd(
        &self,
        table: &Tensor,
        ids: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let g = scatter_add_rows_op(grad, ids, table.dim(0)?).map_err(to_candle)?;
        Ok((Some(g), None))
    }
}

struct ScatterAdd {
    n: usize,
}

impl CustomOp2 for ScatterAdd {
    fn name(&self) -> &'static str {
        "rosetta-scatter-add-rows"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        fn go<T: Copy + Default + std::ops::AddAssign>(
            src: &[T],
            ids: &[u32],
            k: usize,
            n: usize,
        ) -> candle_core::Result<Vec<T>> {
            let mut out = vec![T::default(); n * k];
            for (j, &i) in ids.iter().enumerate() {
                let at = i as usize * k;
                let row = out.get_mut(at..at + k).ok_or_else(|| {
                    candle_core::Error::Msg(format!("scatter-add-rows: id {i} out of range"))
                })?;
                for (o, s) in row.iter_mut().zip(&src[j * k..(j + 1) * k]) {
                    *o += *s;
                }
            }
            Ok(out)
        }
        let (a, b) = offsets(l1, self.name())?;
        let (ia, ib) = offsets(l2, self.name())?;
        let k = width(l1);
        let CpuStorage::U32(ids) = s2 else {
            candle_core::bail!("scatter-add-rows: u32 ids expected")
        };
        let ids = &ids[ia..ib];
        if ids.len() != l1.dims()[0] {
            candle_core::bail!(
                "scatter-add-rows: {} ids for {} rows",
                ids.len(),
                l1.dims()[0]
            );
        }
        let out = match s1 {
            CpuStorage::F32(s) => CpuStorage::F32(go(&s[a..b], ids, k, self.n)?),
            CpuStorage::F64(s) => CpuStorage::F64(go(&s[a..b], ids, k, self.n)?),
            _ => candle_core::bail!("scatter-add-rows: f32 or f64 values expected"),
        };
        Ok((out, with_rows(l1, self.n)))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        if l2.shape().elem_count() != l1.dims()[0] {
            candle_core::bail!(
                "scatter-add-rows: {} ids for {} rows",
                l2.shape().elem_count(),
                l1.dims()[0]
            );
        }
        let out = gpu::rows_kernel(gpu::RowKernel::ScatterAdd, s1, l1, s2, l2, self.n)?;
        Ok((out, with_rows(l1, self.n)))
    }

    fn bwd(
        &self,
        _src: &Tensor,
        ids: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        Ok((Some(gather_rows_op(grad, ids).map_err(to_candle)?), None))
    }
}

struct SetRows;

impl InplaceOp3 for SetRows {
    fn name(&self) -> &'static str {
        "rosetta-set-rows"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<()> {
        fn go<T: Copy>(dst: &mut [T], src: &[T], ids: &[u32], k: usize) -> candle_core::Result<()> {
            for (j, &i) in ids.iter().enumerate() {
                let at = i as usize * k;
                let row = dst.get_mut(at..at + k).ok_or_else(|| {
                    candle_core::Error::Msg(format!("set-rows: id {i} out of range"))
                })?;
                row.copy_from_slice(&src[j * k..(j + 1) * k]);
            }
            Ok(())
        }
        let (a, b) = offsets(l1, self.name())?;
        let (sa, sb) = offsets(l2, self.name())?;
        let (ia, ib) = offsets(l3, self.name())?;
        let k = width(l1);
        let CpuStorage::U32(ids) = s3 else {
            candle_core::bail!("set-rows: u32 ids expected")
        };
        let ids = &ids[ia..ib];
        if sb - sa != ids.len() * k {
            candle_core::bail!(
                "set-rows: {} ids for {} values of width {k}",
                ids.len(),
                sb - sa
            );
        }
        match (s1, s2) {
            (CpuStorage::F32(d), CpuStorage::F32(s)) => go(&mut d[a..b], &s[sa..sb], ids, k),
            (CpuStorage::F64(d), CpuStorage::F64(s)) => go(&mut d[a..b], &s[sa..sb], ids, k),
            _ => candle_core::bail!("set-rows: f32 or f64 values of one type expected"),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &mut candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<()> {
        let k = width(l1);
        if l2.shape().elem_count() != l3.shape().elem_count() * k {
            candle_core::bail!("set-rows: ids and values of different sizes");
        }
        gpu::set_rows(s1, l1, s2, l2, s3, l3)
    }
}

fn to_candle(e: crate::Error) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

/// Launching `kernels/rows.cu` (built into PTX by build.rs).
#[cfg(feature = "cuda")]
pub(crate) mod gpu {
    use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaStorageSlice, WrapErr};
    use candle_core::{CudaStorage, Layout};

    use super::{offsets, width};

    /// The PTX of `kernels/rows.cu`.
    pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/rows.ptx"));
    /// The name the module is loaded under (once per device).
    pub const MODULE: &str = "rosetta_rows";

    /// The index range of a contiguous custom-op input's values in its
    /// storage.
    pub fn range(
        a: (&CudaStorage, &Layout),
        op: &'static str,
    ) -> candle_core::Result<std::ops::Range<usize>> {
        let (s, e) = offsets(a.1, op)?;
        Ok(s..e)
    }

    /// Threads for `n` entries (grid-stride loops cover the rest).
    pub fn launch_cfg(n: usize) -> LaunchConfig {
        let threads = 256u32;
        let blocks = n.div_ceil(threads as usize).clamp(1, 1 << 20) as u32;
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    pub enum RowKernel {
        Gather,
        ScatterAdd,
    }

    /// A gather (`rows` = number of ids) or a scatter-add (`rows` = rows of
    /// the result) of `s1` by the u32 ids `s2`, into a new storage.
    pub fn rows_kernel(
        which: RowKernel,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        rows: usize,
    ) -> candle_core::Result<CudaStorage> {
        let dev = s1.device.clone();
        let (a, b) = offsets(l1, "rows")?;
        let (ia, ib) = offsets(l2, "rows")?;
        let k = width(l1);
        let n_ids = ib - ia;
        let ids = s2.as_cuda_slice::<u32>()?.slice(ia..ib);
        let n = (n_ids * k) as u64;
        let name = |base: &str, s: &str| format!("{base}_{s}");
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let src = s1.as_cuda_slice::<$t>()?.slice(a..b);
                let mut out = dev.alloc_zeros::<$t>(rows * k)?;
                let fname = match which {
                    RowKernel::Gather => name("gather_rows", $s),
                    RowKernel::ScatterAdd => name("scatter_add_rows", $s),
                };
                let f = dev.get_or_load_custom_func(&fname, MODULE, PTX)?;
                let (n64, k64) = (n_ids as u64, k as u64);
                if n > 0 {
                    let mut bld = f.builder();
                    bld.arg(&src);
                    bld.arg(&ids);
                    bld.arg(&mut out);
                    bld.arg(&n64);
                    bld.arg(&k64);
                    // SAFETY: the kernel reads n_ids·k values of src (gather:
                    // rows ids[j] < table rows, the module's contract) and
                    // writes inside out (rows·k values).
                    unsafe { bld.launch(launch_cfg(n as usize)) }.w()?;
                }
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        Ok(match &s1.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::F64(_) => run!(f64, "f64"),
            _ => candle_core::bail!("rows: f32 or f64 values expected"),
        })
    }

    /// `dst[ids[j]] = src[j]` in place.
    pub fn set_rows(
        s1: &mut CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<()> {
        let dev = s1.device.clone();
        let (a, b) = offsets(l1, "set-rows")?;
        let (sa, sb) = offsets(l2, "set-rows")?;
        let (ia, ib) = offsets(l3, "set-rows")?;
        let k = width(l1);
        let n_ids = ib - ia;
        if n_ids == 0 {
            return Ok(());
        }
        let ids = s3.as_cuda_slice::<u32>()?.slice(ia..ib);
        macro_rules! run {
            ($t:ty, $s:literal) => {{
                let src = s2.as_cuda_slice::<$t>()?.slice(sa..sb);
                let mut dst = s1.as_cuda_slice_mut::<$t>()?.slice_mut(a..b);
                let f = dev.get_or_load_custom_func(concat!("set_rows_", $s), MODULE, PTX)?;
                let (n64, k64) = (n_ids as u64, k as u64);
                let mut bld = f.builder();
                bld.arg(&mut dst);
                bld.arg(&src);
                bld.arg(&ids);
                bld.arg(&n64);
                bld.arg(&k64);
                // SAFETY: writes rows ids[j] < dst rows (the module's contract).
                unsafe { bld.launch(launch_cfg(n_ids * k)) }.w()?;
            }};
        }
        match &s2.slice {
            CudaStorageSlice::F32(_) => run!(f32, "f32"),
            CudaStorageSlice::F64(_) => run!(f64, "f64"),
            _ => candle_core::bail!("set-rows: f32 or f64 values expected"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn ids(v: &[u32]) -> Tensor {
        Tensor::from_vec(v.to_vec(), v.len(), &Device::Cpu).unwrap()
    }

    fn close(a: &Tensor, b: &Tensor) {
        let a: Vec<f64> = a
            .flatten_all()
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec1()
            .unwrap();
        let b: Vec<f64> = b
            .flatten_all()
            .unwrap()
            .to_dtype(DType::F64)
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() < 1e-6, "{x} vs {y}");
        }
    }

    /// The custom ops (as they run on a GPU, here through their CPU code)
    /// give candle's values and gradients, repeated ids included.
    #[test]
    fn custom_ops_match_candle_with_gradients() {
        let dev = Device::Cpu;
        for dtype in [DType::F32, DType::F64] {
            let table = Var::from_tensor(
                &Tensor::arange(0f64, 24.0, &dev)
                    .unwrap()
                    .reshape((6, 4))
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap(),
            )
            .unwrap();
            let id = ids(&[4, 0, 4, 5, 2]);
            let w = Tensor::from_vec(vec![1.0f64, -2.0, 0.5, 3.0, 1.5], (5, 1), &dev)
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let rows = ids(&[0, 2, 0, 1, 2]);
            // compose: gather, weight, scatter-add into 3 rows
            let mine = scatter_add_rows_op(
                &gather_rows_op(table.as_tensor(), &id)
                    .unwrap()
                    .broadcast_mul(&w)
                    .unwrap(),
                &rows,
                3,
            )
            .unwrap();
            let theirs = Tensor::zeros((3, 4), dtype, &dev)
                .unwrap()
                .index_add(
                    &rows,
                    &table
                        .as_tensor()
                        .index_select(&id, 0)
                        .unwrap()
                        .broadcast_mul(&w)
                        .unwrap(),
                    0,
                )
                .unwrap();
            close(&mine, &theirs);
            let probe = Tensor::arange(1f64, 13.0, &dev)
                .unwrap()
                .reshape((3, 4))
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let gm = (&mine * &probe)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap();
            let gt = (&theirs * &probe)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap();
            close(
                gm.get(table.as_tensor()).unwrap(),
                gt.get(table.as_tensor()).unwrap(),
            );
            // the dispatching functions are candle's ops on the CPU
            close(
                &gather_rows(table.as_tensor(), &id).unwrap(),
                &table.as_tensor().index_select(&id, 0).unwrap(),
            );
        }
    }

    /// A 1-D table (the flattened logits of BAE's sparse cross-entropy).
    #[test]
    fn gather_of_a_vector() {
        let dev = Device::Cpu;
        let v = Var::from_tensor(&Tensor::arange(0f32, 10.0, &dev).unwrap()).unwrap();
        let id = ids(&[9, 1, 1]);
        let g = gather_rows_op(v.as_tensor(), &id).unwrap();
        assert_eq!(g.to_vec1::<f32>().unwrap(), vec![9.0, 1.0, 1.0]);
        let grads = g.sum_all().unwrap().backward().unwrap();
        let d = grads.get(v.as_tensor()).unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(d, vec![0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn set_rows_writes_only_its_rows() {
        let dev = Device::Cpu;
        let dst = Var::from_tensor(&Tensor::zeros((4, 2), DType::F32, &dev).unwrap()).unwrap();
        let src = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], (2, 2), &dev).unwrap();
        set_rows_op(dst.as_tensor(), &ids(&[3, 1]), &src).unwrap();
        assert_eq!(
            dst.as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap(),
            vec![0.0, 0.0, 3.0, 4.0, 0.0, 0.0, 1.0, 2.0]
        );
        set_rows(
            dst.as_tensor(),
            &ids(&[0]),
            &Tensor::from_vec(vec![7f32, 8.0], (1, 2), &dev).unwrap(),
        )
        .unwrap();
        assert_eq!(
            dst.as_tensor().get(0).unwrap().to_vec1::<f32>().unwrap(),
            vec![7.0, 8.0]
        );
        assert!(set_rows_op(
            dst.as_tensor(),
            &ids(&[9]),
            &Tensor::from_vec(vec![7f32, 8.0], (1, 2), &dev).unwrap()
        )
        .is_err());
    }
}
