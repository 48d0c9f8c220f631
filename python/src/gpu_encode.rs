//! The GPU encoder of error-bounded arrays (`.l3f` version 3, differences predictor):
//! `gpu_encode_field` encodes a host array on l3's GPU, and `GpuEncodeStaging` is an
//! `ExportSlot` (exportable device memory another API such as CUDA imports) on l3's GPU whose
//! values are encoded where they are, or that a file is decoded into. Both give byte for byte
//! what `encode_field(version=3, predictor="differences")` gives.

use std::sync::{Arc, Mutex};

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use l3::field::{BoundedOptions, Predictor};
use l3::gpu::interop::exportable_buffer;
use l3::gpu::GpuEncoder;

use crate::blocks::{blocks_gpu, BlocksStream};
use crate::fields::shape_of;
use crate::handoff::ExportSlot;
use crate::{parameter_error, to_py_err, OrPyErr};
use l3::field::blocks::gpu::{
    blocks_buffer, decode_blocks_batch, decode_blocks_buffer, encode_blocks_batch,
    stream_capacity_words, DecodeJob, EncodeJob,
};

/// Checks that `count` float32 values at byte `offset` (a multiple of 4) lie inside a
/// staging buffer of `size` bytes.
fn check_values(count: u64, offset: u64, size: u64) -> PyResult<()> {
    let end = count.saturating_mul(4).saturating_add(offset);
    if !offset.is_multiple_of(4) || end > size {
        return Err(parameter_error(format!(
            "{count} values at byte {offset} need bytes {offset}..{end} at an offset that is \
             a multiple of 4; the staging buffer has {size}"
        )));
    }
    Ok(())
}

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

/// `array` as a C-contiguous float32 NumPy array.
fn float32_array<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let contiguous = py
        .import("numpy")?
        .call_method1("ascontiguousarray", (array,))?;
    contiguous
        .cast_into::<PyArrayDyn<f32>>()
        .map_err(|_| parameter_error("expected a float32 array (native byte order)"))
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
    let a = float32_array(py, array)?;
    let shape = shape_of(a.shape())?;
    let ro = a.readonly();
    let values = ro.as_slice()?;
    let enc = encoder()?;
    let opts = options(max_error, axes);
    let file = py
        .detach(|| l3::field::gpu::encode_bounded_gpu(&enc, values, &shape, &opts))
        .py_err()?;
    Ok(PyBytes::new(py, &file))
}

/// An `ExportSlot` of `size` bytes on l3's GPU (import it into CUDA as `l3.cuda` does: its
/// `take_fd`, `allocation_size`, `dedicated`, `device_uuid`; `read_back` reads it to the
/// host), whose float32 values are encoded in place (`encode`) or that a file is decoded
/// into (`decode_into`). Whoever writes it (CUDA) must finish before `encode`; whoever reads
/// it must finish before the next `decode_into`. `write` fills it from the host (tests).
#[pyclass(module = "l3._l3", frozen, extends = ExportSlot)]
pub(crate) struct GpuEncodeStaging {
    encoder: Arc<GpuEncoder>,
    /// Where `encode_blocks` writes a stream before it is copied to its own buffer (grown
    /// to the largest stream's capacity so far).
    blocks_scratch: Mutex<Option<wgpu::Buffer>>,
}

#[pymethods]
impl GpuEncodeStaging {
    #[new]
    fn new(py: Python<'_>, size: u64) -> PyResult<PyClassInitializer<Self>> {
        if size == 0 || !size.is_multiple_of(4) {
            return Err(parameter_error(format!(
                "the staging size must be a positive multiple of 4 bytes, got {size}"
            )));
        }
        let encoder = encoder()?;
        let exported = py
            .detach(|| exportable_buffer(encoder.device(), size))
            .py_err()?;
        let slot = ExportSlot {
            exported,
            device: encoder.device().clone(),
            queue: encoder.queue().clone(),
        };
        Ok(
            PyClassInitializer::from(slot).add_subclass(GpuEncodeStaging {
                encoder,
                blocks_scratch: Mutex::new(None),
            }),
        )
    }

    /// Writes a float32 array at the buffer's start (from the host) and waits for it.
    fn write(slf: PyRef<'_, Self>, py: Python<'_>, array: &Bound<'_, PyAny>) -> PyResult<()> {
        let a = float32_array(py, array)?;
        let ro = a.readonly();
        let bytes: &[u8] = bytemuck::cast_slice(ro.as_slice()?);
        let slot = slf.as_super();
        let size = slot.exported.size();
        if bytes.len() as u64 > size {
            return Err(parameter_error(format!(
                "{} bytes do not fit the {size}-byte staging buffer",
                bytes.len()
            )));
        }
        slot.queue.write_buffer(&slot.exported.buffer, 0, bytes);
        slot.queue.submit([]);
        let device = slot.device.clone();
        py.detach(|| device.poll(wgpu::PollType::wait_indefinitely()))
            .map_err(|e| to_py_err(l3::Error::Gpu(format!("waiting for the write: {e}"))))?;
        Ok(())
    }

    /// Decodes an error-bounded array file (`.l3f` version 3) on l3's GPU into the buffer's
    /// start and waits for it; returns its shape. The values are the CPU decoder's, bit for
    /// bit.
    fn decode_into(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<u32>> {
        let bytes = crate::codec::bytes_of(data)?;
        let Some(gpu) = crate::codec::device_gpu("gpu")? else {
            return Err(to_py_err(l3::Error::Gpu("no GPU adapter".into())));
        };
        let exported = &slf.as_super().exported;
        py.detach(|| -> l3::Result<Vec<u32>> {
            let batch = l3::field::gpu::decode_bounded_fields(
                &gpu,
                &[&bytes[..]],
                &l3::decode::DecodeOptions::default(),
            )?;
            let header = &batch.headers[0];
            let len = header.shape.iter().map(|&d| d as u64).product::<u64>() * 4;
            if len > exported.size() {
                return Err(l3::Error::Parameter(l3::ParameterError::BufferSize {
                    got: exported.size() as usize,
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
        slf: PyRef<'_, Self>,
        py: Python<'py>,
        shape: Vec<usize>,
        max_error: f64,
        axes: Option<u8>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let shape = shape_of(&shape)?;
        let exported = &slf.as_super().exported;
        let bytes = shape
            .iter()
            .try_fold(4u64, |a, &d| a.checked_mul(d as u64))
            .unwrap_or(u64::MAX);
        if bytes > exported.size() {
            return Err(parameter_error(format!(
                "shape {shape:?} needs {bytes} bytes, the staging buffer has {}",
                exported.size()
            )));
        }
        let opts = options(max_error, axes);
        let encoder = &slf.encoder;
        let file = py
            .detach(|| {
                l3::field::gpu::encode_bounded_buffer(encoder, &exported.buffer, 0, &shape, &opts)
            })
            .py_err()?;
        Ok(PyBytes::new(py, &file))
    }

    /// Encodes the `count` float32 values at the buffer's start as a block-coded stream
    /// within the absolute bound `max_error`, offered `stride` (as `l3.encode_blocks`), kept
    /// in l3's GPU memory: `encode_blocks_batch` of one.
    #[pyo3(signature = (count, *, max_error, stride = 0))]
    fn encode_blocks(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        count: u64,
        max_error: f64,
        stride: u64,
    ) -> PyResult<BlocksStream> {
        let mut streams = Self::encode_blocks_batch(slf, py, vec![(0, count, max_error, stride)])?;
        Ok(streams.remove(0))
    }

    /// Encodes several arrays of the buffer as block-coded streams kept in l3's GPU memory:
    /// `jobs` is a list of `(offset, count, max_error, stride)`, `count` float32 values from
    /// byte `offset` (a multiple of 4) within the absolute bound `max_error`, offered
    /// `stride` (as `l3.encode_blocks`). One submission and one wait for them all (their
    /// sizes read back together), then one copy each into a buffer of exactly their sizes
    /// (submitted, not waited for), which the returned streams share. Whoever wrote the
    /// values (CUDA) must have finished.
    fn encode_blocks_batch(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        jobs: Vec<(u64, u64, f64, u64)>,
    ) -> PyResult<Vec<BlocksStream>> {
        let exported = &slf.as_super().exported;
        let mut planned = Vec::with_capacity(jobs.len());
        let mut room = 0u64;
        for &(offset, count, max_error, stride) in &jobs {
            check_values(count, offset, exported.size())?;
            planned.push(EncodeJob {
                src_at: offset / 4,
                count,
                max_error,
                stride,
                dst_at: room,
            });
            room = room.saturating_add(stream_capacity_words(count, stride));
        }
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let gpu = blocks_gpu()?;
        let scratch = &slf.blocks_scratch;
        py.detach(|| -> l3::Result<Vec<BlocksStream>> {
            let mut slot = scratch.lock().unwrap_or_else(|p| p.into_inner());
            if slot.as_ref().is_none_or(|b| b.size() < 4 * room) {
                *slot = None;
                *slot = Some(blocks_buffer(&gpu, "l3 blocks scratch", room));
            }
            let scratch = slot.as_ref().expect("made above");
            let headers = encode_blocks_batch(&gpu, &exported.buffer, scratch, &planned)?;
            let words: u64 = headers.iter().map(|h| h.stream_words() as u64).sum();
            let buffer = blocks_buffer(&gpu, "l3 blocks streams", words);
            let mut enc = gpu
                .device()
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            let mut at = 0u64;
            let mut streams = Vec::with_capacity(headers.len());
            for (job, header) in planned.iter().zip(headers) {
                let n = header.stream_words() as u64;
                enc.copy_buffer_to_buffer(scratch, 4 * job.dst_at, &buffer, 4 * at, 4 * n);
                streams.push(BlocksStream {
                    buffer: buffer.clone(),
                    at,
                    gpu: gpu.clone(),
                    header,
                });
                at += n;
            }
            gpu.queue().submit([enc.finish()]);
            Ok(streams)
        })
        .py_err()
    }

    /// Decodes a block-coded stream (a `BlocksStream` in GPU memory, or bytes, checked
    /// first) on l3's GPU into the buffer's start and waits for it; returns the values.
    fn decode_blocks_into(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        stream: &Bound<'_, PyAny>,
    ) -> PyResult<u32> {
        let exported = &slf.as_super().exported;
        let gpu = blocks_gpu()?;
        if let Ok(s) = stream.cast::<BlocksStream>() {
            let values = s.get().header.values;
            Self::decode_blocks_batch(slf, py, vec![(s.clone().unbind(), 0)])?;
            return Ok(values);
        }
        let bytes = crate::codec::bytes_of(stream)?;
        py.detach(|| -> l3::Result<u32> {
            let header = l3::field::blocks::parse_blocks(&bytes, exported.size() / 4)?;
            let src = blocks_buffer(&gpu, "l3 blocks stream", header.stream_words() as u64);
            gpu.queue().write_buffer(&src, 0, &bytes);
            decode_blocks_buffer(&gpu, &src, 0, &header, &exported.buffer, 0)?;
            Ok(header.values)
        })
        .py_err()
    }

    /// Decodes several `BlocksStream`s into the buffer: `jobs` is a list of `(stream,
    /// offset)`, each stream's float32 values to byte `offset` (a multiple of 4). One
    /// submission and one wait for them all.
    fn decode_blocks_batch(
        slf: PyRef<'_, Self>,
        py: Python<'_>,
        jobs: Vec<(Py<BlocksStream>, u64)>,
    ) -> PyResult<()> {
        let exported = &slf.as_super().exported;
        for (s, offset) in &jobs {
            check_values(s.get().header.values as u64, *offset, exported.size())?;
        }
        if jobs.is_empty() {
            return Ok(());
        }
        let gpu = blocks_gpu()?;
        py.detach(|| {
            let batch: Vec<DecodeJob<'_>> = jobs
                .iter()
                .map(|(s, offset)| {
                    let s = s.get();
                    DecodeJob {
                        src: &s.buffer,
                        src_at: s.at,
                        header: &s.header,
                        dst_at: offset / 4,
                    }
                })
                .collect();
            decode_blocks_batch(&gpu, &batch, &exported.buffer)
        })
        .py_err()
    }
}
