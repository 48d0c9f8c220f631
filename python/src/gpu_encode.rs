//! The GPU encoder of error-bounded arrays (`.l3f` version 3, differences predictor):
//! `gpu_encode_field` encodes a host array on l3's GPU, and `GpuEncodeStaging` is a device
//! buffer over exportable memory that another API (CUDA) fills and that is encoded where it
//! is. Both give byte for byte what `encode_field(version=3, predictor="differences")` gives.

use std::sync::{Arc, Mutex};

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use l3::field::{BoundedOptions, Predictor};
use l3::gpu::interop::{exportable_buffer, ExportedBuffer};
use l3::gpu::GpuEncoder;

use crate::{parameter_error, to_py_err, OrPyErr};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gpu_encode_field, m)?)?;
    m.add_class::<GpuEncodeStaging>()?;
    Ok(())
}

/// The process's GPU encoder, on the GPU decoder's device (made on first use).
fn encoder() -> PyResult<Arc<GpuEncoder>> {
    static ENCODER: Mutex<Option<Arc<GpuEncoder>>> = Mutex::new(None);
    let mut slot = ENCODER.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = &*slot {
        return Ok(e.clone());
    }
    let Some(gpu) = crate::codec::device_gpu("gpu")? else {
        return Err(to_py_err(l3::Error::Gpu("no GPU adapter".into())));
    };
    let e = Arc::new(GpuEncoder::from_decoder(&gpu).py_err()?);
    *slot = Some(e.clone());
    Ok(e)
}

fn options(max_error: f64, axes: Option<u8>) -> BoundedOptions {
    BoundedOptions {
        predictor: Some(Predictor::Differences),
        axes,
        ..BoundedOptions::new(max_error)
    }
}

fn shape_u32(shape: &[usize]) -> PyResult<Vec<u32>> {
    shape
        .iter()
        .map(|&d| u32::try_from(d).map_err(|_| parameter_error("dimension too large")))
        .collect()
}

/// Encodes a float32 array of 1 to 4 axes on the GPU within the absolute bound `max_error`
/// (`axes`: the differences predictor's axis set, bit a = axis a; default: by the estimate):
/// the bytes of `encode_field(array, max_error=..., version=3, predictor="differences",
/// axes=...)`.
#[pyfunction]
#[pyo3(signature = (array, *, max_error, axes = None))]
fn gpu_encode_field<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    max_error: f64,
    axes: Option<u8>,
) -> PyResult<Bound<'py, PyBytes>> {
    let np = py.import("numpy")?;
    let contiguous = np.call_method1("ascontiguousarray", (array,))?;
    let a = contiguous.cast::<PyArrayDyn<f32>>().map_err(|_| {
        parameter_error("expected a float32 array (native byte order) of 1 to 4 axes")
    })?;
    let shape = shape_u32(a.shape())?;
    let ro = a.readonly();
    let values = ro.as_slice()?;
    let enc = encoder()?;
    let opts = options(max_error, axes);
    let file = py
        .detach(|| l3::field::gpu::encode_bounded_gpu(&enc, values, &shape, &opts))
        .py_err()?;
    Ok(PyBytes::new(py, &file))
}

/// A buffer of `size` bytes on l3's GPU over exportable memory (Vulkan, opaque fd), to be
/// filled by another API and encoded in place: import it into CUDA (`take_fd`,
/// `allocation_size`, `dedicated`, `device_uuid`, as `l3.cuda` does), write float32 values
/// from its start, wait for that write to finish (for CUDA: synchronise the stream that
/// wrote), then `encode`. `write` fills it from the host (tests).
#[pyclass(module = "l3._l3")]
pub(crate) struct GpuEncodeStaging {
    encoder: Arc<GpuEncoder>,
    exported: ExportedBuffer,
    size: u64,
}

#[pymethods]
impl GpuEncodeStaging {
    #[new]
    fn new(size: u64) -> PyResult<Self> {
        if size == 0 || !size.is_multiple_of(4) {
            return Err(parameter_error(format!(
                "the staging size must be a positive multiple of 4 bytes, got {size}"
            )));
        }
        let encoder = encoder()?;
        let exported = exportable_buffer(encoder.device(), size).py_err()?;
        Ok(GpuEncodeStaging {
            encoder,
            exported,
            size,
        })
    }

    /// Bytes of the buffer.
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    /// Bytes of the exported allocation (the size an importer states).
    #[getter]
    fn allocation_size(&self) -> u64 {
        self.exported.allocation_size
    }

    /// Whether the allocation is dedicated (CUDA: `cudaExternalMemoryDedicated`).
    #[getter]
    fn dedicated(&self) -> bool {
        self.exported.dedicated
    }

    /// The GPU's UUID (16 bytes): the CUDA device with the same UUID shares this memory.
    #[getter]
    fn device_uuid<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.exported.device_uuid)
    }

    /// A new file descriptor of the memory (the caller owns it; CUDA takes it over when an
    /// import succeeds).
    fn take_fd(&self) -> PyResult<i32> {
        use std::os::fd::IntoRawFd;
        let fd = self
            .exported
            .fd
            .try_clone()
            .map_err(|e| to_py_err(l3::Error::Io(e)))?;
        Ok(fd.into_raw_fd())
    }

    /// Writes a float32 array at the buffer's start (from the host) and waits for it.
    fn write(&self, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let np = py.import("numpy")?;
        let contiguous = np.call_method1("ascontiguousarray", (array,))?;
        let a = contiguous
            .cast::<PyArrayDyn<f32>>()
            .map_err(|_| parameter_error("expected a float32 array"))?;
        let ro = a.readonly();
        let bytes: &[u8] = bytemuck::cast_slice(ro.as_slice()?);
        if bytes.len() as u64 > self.size {
            return Err(parameter_error(format!(
                "{} bytes do not fit the {}-byte staging buffer",
                bytes.len(),
                self.size
            )));
        }
        let queue = self.encoder.queue();
        queue.write_buffer(&self.exported.buffer, 0, bytes);
        queue.submit([]);
        let device = self.encoder.device().clone();
        py.detach(|| device.poll(wgpu::PollType::wait_indefinitely()))
            .map_err(|e| to_py_err(l3::Error::Gpu(format!("waiting for the write: {e}"))))?;
        Ok(())
    }

    /// The first `count` float32 values of the buffer, read back to the host (tests).
    fn read<'py>(&self, py: Python<'py>, count: u64) -> PyResult<Bound<'py, numpy::PyArray1<f32>>> {
        let bytes = count
            .checked_mul(4)
            .filter(|&b| b <= self.size)
            .ok_or_else(|| parameter_error(format!("{count} values do not fit the buffer")))?;
        let raw = py
            .detach(|| {
                self.exported
                    .read_back(self.encoder.device(), self.encoder.queue(), bytes)
            })
            .py_err()?;
        let values: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(numpy::PyArray1::from_vec(py, values))
    }

    /// Decodes an error-bounded array file (`.l3f` version 3) on l3's GPU into the buffer's
    /// start and waits for it; returns its shape. The values are the CPU decoder's, bit for
    /// bit. Whoever reads the buffer afterwards (CUDA) must finish before the next write.
    fn decode_into(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let bytes = crate::codec::bytes_of(data)?;
        let Some(gpu) = crate::codec::device_gpu("gpu")? else {
            return Err(to_py_err(l3::Error::Gpu("no GPU adapter".into())));
        };
        let exported = &self.exported;
        let size = self.size;
        py.detach(|| -> l3::Result<Vec<u32>> {
            let batch = l3::field::gpu::decode_bounded_fields(
                &gpu,
                &[&bytes[..]],
                &l3::decode::DecodeOptions::default(),
            )?;
            let header = &batch.headers[0];
            let len = header.shape.iter().map(|&d| d as u64).product::<u64>() * 4;
            if len > size {
                return Err(l3::Error::Parameter(l3::ParameterError::BufferSize {
                    got: size as usize,
                    needed: len as usize,
                }));
            }
            exported.copy_from_at(
                gpu.device(),
                gpu.queue(),
                &batch.buffer,
                batch.offsets[0],
                len,
            )?;
            Ok(header.shape.clone())
        })
        .py_err()
    }

    /// Encodes the `shape` (C order, 1 to 4 axes) float32 values at the buffer's start within
    /// the absolute bound `max_error` (see `gpu_encode_field`).
    #[pyo3(signature = (shape, *, max_error, axes = None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        shape: Vec<u64>,
        max_error: f64,
        axes: Option<u8>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let shape: Vec<u32> = shape
            .iter()
            .map(|&d| u32::try_from(d).map_err(|_| parameter_error("dimension too large")))
            .collect::<PyResult<_>>()?;
        let bytes = shape
            .iter()
            .try_fold(4u64, |a, &d| a.checked_mul(d as u64))
            .unwrap_or(u64::MAX);
        if bytes > self.size {
            return Err(parameter_error(format!(
                "shape {shape:?} needs {bytes} bytes, the staging buffer has {}",
                self.size
            )));
        }
        let opts = options(max_error, axes);
        let file = py
            .detach(|| {
                l3::field::gpu::encode_bounded_buffer(
                    &self.encoder,
                    &self.exported.buffer,
                    0,
                    &shape,
                    &opts,
                )
            })
            .py_err()?;
        Ok(PyBytes::new(py, &file))
    }
}
