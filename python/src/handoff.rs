//! The GPU loader's batches that are not read back into a fresh array (`Loader(...,
//! gpu_output="staged" | "device")`): [`GpuBatch`], copied by the consumer into memory it
//! reuses (a pinned host tensor, `copy_into`) or device to device into an exported buffer
//! ([`ExportSlot`], `export_into`) that `l3.cuda` imports into CUDA once and reuses. The
//! pools and their lifetime rules are Python's (`l3/_handoff.py`, `l3/cuda.py`).

use std::sync::Arc;

use numpy::{PyArrayDyn, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use l3::loader::handoff::{GpuHandOff, HandOffValues};
use l3::loader::TensorType;

use crate::{parameter_error, to_py_err, OrPyErr};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GpuBatch>()?;
    #[cfg(unix)]
    {
        m.add_class::<ExportSlot>()?;
        m.add_function(wrap_pyfunction!(gpu_device_uuid, m)?)?;
    }
    Ok(())
}

/// The UUID (16 bytes) of the GPU that l3's GPU paths use, or None when there is none or it
/// is not a Vulkan device: the CUDA device with the same UUID can import its exported memory.
#[cfg(unix)]
#[pyfunction]
fn gpu_device_uuid<'py>(py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
    let gpu = crate::codec::gpu().ok()?;
    let uuid = l3::gpu::interop::device_uuid(gpu.device())?;
    Some(PyBytes::new(py, &uuid))
}

/// One batch of the GPU loader, staged in host-visible memory (`kind == "staged"`) or still
/// on the GPU (`kind == "device"`): its tensors (`views`: an image batch's one `"images"`
/// `(N, C, H, W)`, or one per array of a tensor dataset), float32 or float16 values, C
/// order, in `nbytes` bytes. Copy them out with `copy_into` (staged) or `export_into`
/// (device).
#[pyclass(module = "l3._l3", frozen)]
pub(crate) struct GpuBatch {
    inner: Arc<GpuHandOff>,
}

impl GpuBatch {
    pub(crate) fn new(inner: Arc<GpuHandOff>) -> Self {
        GpuBatch { inner }
    }
}

#[pymethods]
impl GpuBatch {
    /// `(N, C, H, W)` of an image batch; a ParameterError for a tensor dataset's (see
    /// `views`).
    #[getter]
    fn shape(&self) -> PyResult<(usize, usize, usize, usize)> {
        let [n, c, h, w] = self.inner.image_shape().ok_or_else(|| {
            parameter_error("a tensor dataset's batch has one shape per array: see views")
        })?;
        Ok((n, c, h, w))
    }

    /// The tensors: `(name, shape, byte offset)` each, in the batch's order.
    #[getter]
    fn views(&self) -> Vec<(String, Vec<usize>, u64)> {
        self.inner
            .views
            .iter()
            .map(|v| (v.name.clone(), v.shape.clone(), v.offset))
            .collect()
    }

    /// `"float32"` or `"float16"`.
    #[getter]
    fn dtype(&self) -> &'static str {
        match self.inner.element {
            TensorType::F32 => "float32",
            TensorType::F16 => "float16",
        }
    }

    /// Bytes of the values (from the first tensor's start to the last one's end).
    #[getter]
    fn nbytes(&self) -> u64 {
        self.inner.bytes()
    }

    /// `"staged"` (host-visible, for `copy_into`) or `"device"` (on the GPU, for
    /// `export_into`).
    #[getter]
    fn kind(&self) -> &'static str {
        match &self.inner.values {
            HandOffValues::Staged(_) => "staged",
            HandOffValues::Device { .. } => "device",
        }
    }

    /// Copies the values into the first `nbytes` bytes of `dst`, a writable C-contiguous
    /// numpy uint8 array of at least `nbytes` bytes (the GIL is released while copying). A
    /// batch on the GPU is staged first (read back to host-visible memory).
    fn copy_into(&self, py: Python<'_>, dst: &Bound<'_, PyAny>) -> PyResult<()> {
        let array = dst
            .cast::<PyArrayDyn<u8>>()
            .map_err(|_| parameter_error("copy_into needs a numpy uint8 array"))?;
        let mut rw = array
            .try_readwrite()
            .map_err(|e| parameter_error(format!("copy_into needs a writable array: {e}")))?;
        let slice = rw
            .as_slice_mut()
            .map_err(|_| parameter_error("copy_into needs a C-contiguous array"))?;
        let n = self.inner.bytes();
        if (slice.len() as u64) < n {
            return Err(parameter_error(format!(
                "copy_into needs an array of at least {n} bytes, got {}",
                slice.len()
            )));
        }
        py.detach(|| self.inner.copy_to(slice)).py_err()
    }

    /// Copies the values device to device into the start of `slot` (made by
    /// `new_export_slot` in this process) and waits for the copy on the host, so an importer
    /// may read them at once. The importer must be done reading the slot's previous values.
    #[cfg(unix)]
    fn export_into(&self, py: Python<'_>, slot: &ExportSlot) -> PyResult<()> {
        let (buffer, device, queue) = self.on_device("export_into")?;
        let size = self.inner.bytes().next_multiple_of(4);
        if size > slot.exported.size() {
            return Err(parameter_error(format!(
                "the batch's {size} bytes do not fit the slot's {}",
                slot.exported.size()
            )));
        }
        py.detach(|| slot.exported.copy_from(device, queue, buffer, size))
            .py_err()
    }

    /// A new buffer of `size` bytes over exportable memory of the batch's GPU (Vulkan with
    /// `VK_KHR_external_memory_fd`; else a GpuError), for `export_into`.
    #[cfg(unix)]
    fn new_export_slot(&self, py: Python<'_>, size: u64) -> PyResult<ExportSlot> {
        let (_, device, queue) = self.on_device("new_export_slot")?;
        if size == 0 {
            return Err(parameter_error("an export slot needs at least one byte"));
        }
        let (device, queue) = (device.clone(), queue.clone());
        let exported = py
            .detach(|| l3::gpu::interop::exportable_buffer(&device, size.next_multiple_of(4)))
            .py_err()?;
        Ok(ExportSlot {
            exported,
            device,
            queue,
        })
    }
}

impl GpuBatch {
    fn on_device(&self, what: &str) -> PyResult<(&wgpu::Buffer, &wgpu::Device, &wgpu::Queue)> {
        match &self.inner.values {
            HandOffValues::Device {
                buffer,
                device,
                queue,
            } => Ok((buffer, device, queue)),
            HandOffValues::Staged(_) => Err(parameter_error(format!(
                "{what} needs a batch on the GPU (gpu_output=\"device\")"
            ))),
        }
    }
}

/// A buffer over exportable device memory (Vulkan external memory, opaque fd) that batches
/// are copied into (`GpuBatch.export_into`): `l3.cuda` imports its fd into CUDA once and
/// reuses it batch after batch. The memory lives as long as this object: an importer must
/// release its import first.
#[cfg(unix)]
#[pyclass(module = "l3._l3", frozen, subclass)]
pub(crate) struct ExportSlot {
    pub(crate) exported: l3::gpu::interop::ExportedBuffer,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
}

#[cfg(unix)]
#[pymethods]
impl ExportSlot {
    /// Bytes of the buffer.
    #[getter]
    fn size(&self) -> u64 {
        self.exported.size()
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

    /// A new file descriptor of the memory (a duplicate: the caller owns it, and an importer
    /// such as CUDA takes it over when the import succeeds).
    fn take_fd(&self) -> PyResult<i32> {
        use std::os::fd::IntoRawFd;
        let fd = self
            .exported
            .fd
            .try_clone()
            .map_err(|e| to_py_err(l3::Error::Io(e)))?;
        Ok(fd.into_raw_fd())
    }

    /// The first `size` bytes of the buffer (a multiple of 4), read back to the host: what
    /// an importer sees, for checks where there is none.
    fn read_back<'py>(&self, py: Python<'py>, size: u64) -> PyResult<Bound<'py, PyBytes>> {
        let v = py
            .detach(|| self.exported.read_back(&self.device, &self.queue, size))
            .py_err()?;
        Ok(PyBytes::new(py, &v))
    }
}
