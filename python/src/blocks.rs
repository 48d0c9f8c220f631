//! Block-coded arrays (`l3::field::blocks`): `encode_blocks` / `decode_blocks` on the host,
//! and `BlocksStream`, a stream kept in l3's GPU memory (written by
//! `GpuEncodeStaging.encode_blocks`, decoded by `GpuEncodeStaging.decode_blocks_into`).

use std::sync::{Arc, Mutex};

use numpy::{PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use l3::field::blocks::{self, BlocksHeader};
use l3::gpu::GpuBlocks;

use crate::codec::bytes_of;
use crate::{limits_of, to_py_err, OrPyErr, PyLimits};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(decode_blocks, m)?)?;
    m.add_class::<BlocksStream>()?;
    Ok(())
}

/// Encodes a float32 array's values (any shape, read in C order) as a block-coded stream
/// within the absolute bound `max_error`: each value decodes within the stored bound (the
/// largest f32 at most `max_error` with an 8-bit significand), zeros as +0.0 and every
/// other value with its sign; NaN and infinities exactly. `stride`: the column stride the
/// encoder may predict along (default: the last axis's length for 2 axes or more; 0: none
/// beyond the array's own order).
#[pyfunction]
#[pyo3(signature = (array, *, max_error, stride = None))]
fn encode_blocks<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    max_error: f64,
    stride: Option<usize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let a = py
        .import("numpy")?
        .call_method1("ascontiguousarray", (array,))?
        .cast_into::<numpy::PyArrayDyn<f32>>()
        .map_err(|_| crate::parameter_error("expected a float32 array (native byte order)"))?;
    let stride = stride.unwrap_or_else(|| match a.shape() {
        [.., last] if a.ndim() >= 2 => *last,
        _ => 0,
    });
    let ro = a.readonly();
    let values = ro.as_slice()?;
    let data = py
        .detach(|| blocks::encode_blocks(values, max_error, stride))
        .py_err()?;
    Ok(PyBytes::new(py, &data))
}

/// Decodes a block-coded stream into a 1-D float32 array, within `limits` (default
/// `l3.Limits()`: its output bytes bound the values); a malformed stream raises FormatError.
#[pyfunction]
#[pyo3(signature = (data, *, limits = None))]
fn decode_blocks<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<Bound<'py, numpy::PyArray1<f32>>> {
    let bytes = bytes_of(data)?;
    let max_values = limits_of(limits.as_deref()).max_output_bytes / 4;
    let values = py
        .detach(|| blocks::decode_blocks(&bytes, max_values))
        .py_err()?;
    let out = numpy::PyArray1::from_vec(py, values);
    debug_assert_eq!(out.len(), out.shape()[0]);
    Ok(out)
}

/// A block-coded stream in l3's GPU memory: `values`, `bound`, `nbytes` (the stream's
/// bytes, what it keeps on the device); `to_bytes()` reads it back (the bytes
/// `encode_blocks` gives for the same values). The streams of one batch
/// (`GpuEncodeStaging.encode_blocks_batch`) share one buffer of exactly their sizes, freed
/// when the last of them goes.
#[pyclass(module = "l3._l3", frozen)]
pub(crate) struct BlocksStream {
    /// The buffer (shared by a batch's streams: a handle, freed with its last one).
    pub(crate) buffer: wgpu::Buffer,
    /// Word of `buffer` where the stream starts.
    pub(crate) at: u64,
    pub(crate) gpu: Arc<GpuBlocks>,
    pub(crate) header: BlocksHeader,
}

/// The process's block kernels, on the GPU decoder's device (made on first use).
pub(crate) fn blocks_gpu() -> PyResult<Arc<GpuBlocks>> {
    static BLOCKS: Mutex<Option<Arc<GpuBlocks>>> = Mutex::new(None);
    let mut slot = BLOCKS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(b) = &*slot {
        return Ok(b.clone());
    }
    let Some(gpu) = crate::codec::device_gpu("gpu")? else {
        return Err(to_py_err(l3::Error::Gpu("no GPU adapter".into())));
    };
    let b = Arc::new(GpuBlocks::from_decoder(&gpu));
    *slot = Some(b.clone());
    Ok(b)
}

#[pymethods]
impl BlocksStream {
    /// Values the stream holds.
    #[getter]
    fn values(&self) -> u32 {
        self.header.values
    }

    /// The stored bound (absolute).
    #[getter]
    fn bound(&self) -> f32 {
        self.header.bound
    }

    /// Bytes of the stream in GPU memory.
    #[getter]
    fn nbytes(&self) -> u64 {
        4 * self.header.stream_words() as u64
    }

    /// The stream's bytes, read back to the host.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let n = self.nbytes();
        let words = py
            .detach(|| self.gpu.read_words(&self.buffer, self.at, n / 4))
            .py_err()?;
        Ok(PyBytes::new(py, bytemuck::cast_slice(&words)))
    }
}
