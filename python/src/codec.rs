//! The codec: `encode`, `decode` (optionally into a caller's array), `info`, `imread`,
//! `imwrite`, `decode_batch` (CPU or GPU, into one array) and `gpu_adapter`.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};
use rayon::prelude::*;

use l3::decode::DecodeOptions;
use l3::gpu::{GpuDecoder, OutputLayout};
use l3::{EncodeOptions, Header, Profile};

use crate::arrays::{array_from_samples, image_from_array, image_shape, shaped_array, SendSlice};
use crate::{choose, limits_of, parameter_error, read_limited, to_py_err, OrPyErr, PyLimits};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(imread, m)?)?;
    m.add_function(wrap_pyfunction!(imwrite, m)?)?;
    m.add_function(wrap_pyfunction!(decode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_adapter, m)?)?;
    m.add_function(wrap_pyfunction!(decode_batch_export, m)?)?;
    m.add_class::<ExportedBatch>()?;
    Ok(())
}

/// Encode options from the Python arguments.
pub(crate) fn encode_options(
    profile: &str,
    patch_size: u32,
    max_error: u16,
) -> PyResult<EncodeOptions> {
    let profile = choose(
        "profile",
        profile,
        &[("fast", Profile::Fast), ("compact", Profile::Compact)],
    )?;
    if !patch_size.is_power_of_two() || !(8..=128).contains(&patch_size) {
        return Err(parameter_error(format!(
            "patch_size must be 8, 16, 32, 64 or 128, got {patch_size}"
        )));
    }
    Ok(EncodeOptions {
        patch_log2: patch_size.trailing_zeros() as u8,
        max_error,
        ..EncodeOptions::for_profile(profile)
    })
}

/// The bytes of `data`: `bytes` without a copy, anything else `bytes()` accepts (bytearray,
/// memoryview, a uint8 NumPy array) copied once.
pub(crate) fn bytes_of(data: &Bound<'_, PyAny>) -> PyResult<PyBackedBytes> {
    if let Ok(b) = data.extract::<PyBackedBytes>() {
        return Ok(b);
    }
    let py = data.py();
    let builtins = py.import("builtins")?;
    builtins
        .getattr("bytes")?
        .call1((data,))
        .map_err(|_| parameter_error("expected bytes-like data (bytes, bytearray, memoryview)"))?
        .extract::<PyBackedBytes>()
        .map_err(Into::into)
}

/// Encodes an image array (`uint8` or `uint16`, shape `(H, W)` or `(H, W, C)`) as an L3 file;
/// `max_error` > 0 makes it error-bounded (every decoded sample within that of the original).
#[pyfunction]
#[pyo3(signature = (array, profile = "compact", patch_size = 64, max_error = 0))]
fn encode<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    profile: &str,
    patch_size: u32,
    max_error: u16,
) -> PyResult<Bound<'py, PyBytes>> {
    let options = encode_options(profile, patch_size, max_error)?;
    let image = image_from_array(array)?;
    let file = py
        .detach(|| l3::encode::encode(&image.raw(), &options))
        .py_err()?;
    Ok(PyBytes::new(py, &file))
}

fn header_dict<'py>(py: Python<'py>, h: &Header) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("width", h.width)?;
    d.set_item("height", h.height)?;
    d.set_item("channels", h.channels())?;
    d.set_item("depth", h.depth)?;
    d.set_item("dtype", if h.depth == 16 { "uint16" } else { "uint8" })?;
    let shape = image_shape(h.width, h.height, h.channels());
    d.set_item("shape", pyo3::types::PyTuple::new(py, shape)?)?;
    d.set_item("color", format!("{:?}", h.color))?;
    d.set_item(
        "profile",
        match h.profile {
            Profile::Fast => "fast",
            Profile::Compact => "compact",
        },
    )?;
    d.set_item("version", h.profile.version())?;
    d.set_item("patch_size", h.patch_size())?;
    d.set_item("max_error", h.max_error)?;
    d.set_item("output_bytes", h.output_bytes())?;
    Ok(d)
}

/// The header of an L3 file as a dict (shape, dtype, profile, ...), without decoding it.
#[pyfunction]
fn info<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let bytes = bytes_of(data)?;
    let header = l3::read_header(&bytes).py_err()?;
    header_dict(py, &header)
}

/// Decodes into a new array, or into `out` (a C-contiguous, writable array of the file's
/// dtype and shape), which is returned.
fn decode_bytes<'py>(
    py: Python<'py>,
    bytes: &[u8],
    out: Option<&Bound<'py, PyAny>>,
    limits: l3::Limits,
) -> PyResult<Bound<'py, PyAny>> {
    let options = DecodeOptions {
        limits,
        ..DecodeOptions::default()
    };
    let header = l3::read_header(bytes).py_err()?;
    let shape = image_shape(header.width, header.height, header.channels());
    let Some(out) = out else {
        let (h, data) = py.detach(|| l3::decode::decode(bytes, &options)).py_err()?;
        return array_from_samples(py, h.width, h.height, h.channels(), h.depth, data);
    };
    let want = if header.depth == 16 {
        "uint16"
    } else {
        "uint8"
    };
    let wrong = |what: String| {
        parameter_error(format!(
            "out: expected a C-contiguous writable {want} array of shape {shape:?}, {what}"
        ))
    };
    let untyped = out
        .cast::<numpy::PyUntypedArray>()
        .map_err(|_| wrong("got a non-array".into()))?;
    if untyped.shape() != shape.as_slice() {
        return Err(wrong(format!("got shape {:?}", untyped.shape())));
    }
    if !untyped.is_c_contiguous() {
        return Err(wrong("got a non-contiguous array".into()));
    }
    if header.depth == 16 {
        let a = out
            .cast::<PyArrayDyn<u16>>()
            .map_err(|_| wrong(format!("got dtype {}", untyped.dtype())))?;
        let mut rw = a.try_readwrite().map_err(|e| wrong(e.to_string()))?;
        let mut target = SendSlice::new(rw.as_slice_mut()?);
        // SAFETY: `rw` borrows the array exclusively until after the closure.
        py.detach(|| l3::decode_into_u16(bytes, unsafe { target.get() }, &options))
            .py_err()?;
    } else {
        let a = out
            .cast::<PyArrayDyn<u8>>()
            .map_err(|_| wrong(format!("got dtype {}", untyped.dtype())))?;
        let mut rw = a.try_readwrite().map_err(|e| wrong(e.to_string()))?;
        let mut target = SendSlice::new(rw.as_slice_mut()?);
        // SAFETY: as above.
        py.detach(|| l3::decode_into(bytes, unsafe { target.get() }, &options))
            .py_err()?;
    }
    Ok(out.clone())
}

/// Decodes an L3 file into an array (`uint8` or `uint16`, `(H, W)` or `(H, W, C)`), or into
/// `out`, within `limits` (default `l3.Limits()`).
#[pyfunction]
#[pyo3(signature = (data, out = None, *, limits = None))]
fn decode<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = bytes_of(data)?;
    decode_bytes(py, &bytes, out, limits_of(limits.as_deref()))
}

/// Reads an image file into an array: an `.l3` file with l3's decoder, anything else (PNG,
/// TIFF, JPEG, ...) with the `image` crate; within `limits` (default `l3.Limits()`: the file's
/// size, then the decoded size, checked before either is allocated).
#[pyfunction]
#[pyo3(signature = (path, *, limits = None))]
fn imread<'py>(
    py: Python<'py>,
    path: PathBuf,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<Bound<'py, PyAny>> {
    let limits = limits_of(limits.as_deref());
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("l3"))
    {
        let bytes = py.detach(|| read_limited(&path, &limits)).py_err()?;
        return decode_bytes(py, &bytes, None, limits);
    }
    let (w, h, c, depth, data) = py
        .detach(|| -> l3::Result<_> {
            let image = read_image_within(&path, &limits)?;
            let raw = l3::image_support::raw_image(&image)?;
            let (depth, data) = match raw.samples {
                l3::Samples::U8(s) => (8, s.to_vec()),
                l3::Samples::U16(s) => (16, s.iter().flat_map(|v| v.to_le_bytes()).collect()),
            };
            Ok((raw.width, raw.height, raw.color.channels(), depth, data))
        })
        .py_err()?;
    array_from_samples(py, w, h, c, depth, data)
}

/// Reads any image file the `image` crate reads, after checking its dimensions and decoded
/// size (from its header) against `limits`: a `LimitsError` before any pixel is allocated.
pub(crate) fn read_image_within(
    path: &std::path::Path,
    limits: &l3::Limits,
) -> l3::Result<image::DynamicImage> {
    use image::ImageDecoder;
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len > limits.max_input_bytes {
        return Err(l3::LimitsError::InputBytes {
            len,
            max: limits.max_input_bytes,
        }
        .into());
    }
    // The header first (no pixels yet): its dimensions and size are checked here, so a
    // refusal is a LimitsError; then the decoder's own allocations are held to the limit.
    let mut reader =
        image::ImageReader::new(std::io::BufReader::new(file)).with_guessed_format()?;
    reader.no_limits();
    let mut decoder = reader.into_decoder()?;
    let (width, height) = decoder.dimensions();
    if width > limits.max_dimension || height > limits.max_dimension {
        return Err(l3::LimitsError::Dimensions {
            width,
            height,
            max: limits.max_dimension,
        }
        .into());
    }
    let needed = decoder.total_bytes();
    if needed > limits.max_output_bytes {
        return Err(l3::LimitsError::OutputBytes {
            needed,
            max: limits.max_output_bytes,
        }
        .into());
    }
    let mut image_limits = image::Limits::default();
    image_limits.max_alloc = Some(limits.max_output_bytes);
    decoder.set_limits(image_limits)?;
    Ok(image::DynamicImage::from_decoder(decoder)?)
}

/// Encodes `array` and writes it to `path` (an `.l3` file) atomically: a temp file beside it,
/// synced, then renamed, so a crash never leaves a partial file under that name.
#[pyfunction]
#[pyo3(signature = (path, array, profile = "compact", patch_size = 64, max_error = 0))]
fn imwrite(
    py: Python<'_>,
    path: PathBuf,
    array: &Bound<'_, PyAny>,
    profile: &str,
    patch_size: u32,
    max_error: u16,
) -> PyResult<()> {
    if !path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("l3"))
    {
        return Err(parameter_error(format!(
            "imwrite writes .l3 files, got {}; use Pillow or imageio for other formats",
            path.display()
        )));
    }
    let options = encode_options(profile, patch_size, max_error)?;
    let image = image_from_array(array)?;
    py.detach(|| -> l3::Result<()> {
        let file = l3::encode::encode(&image.raw(), &options)?;
        Ok(l3::shard::write_atomic(&path, &file)?)
    })
    .py_err()
}

/// The process's GPU decoder, created on first use (or why there is none).
pub(crate) fn gpu() -> Result<Arc<GpuDecoder>, String> {
    static GPU: OnceLock<Result<Arc<GpuDecoder>, String>> = OnceLock::new();
    GPU.get_or_init(|| {
        GpuDecoder::new_default()
            .map(Arc::new)
            .map_err(|e| e.to_string())
    })
    .clone()
}

/// The GPU decoder for `device` ("gpu": required; "auto": a hardware adapter if there is one;
/// "cpu": none).
pub(crate) fn device_gpu(device: &str) -> PyResult<Option<Arc<GpuDecoder>>> {
    match device {
        "cpu" => Ok(None),
        "gpu" => gpu()
            .map(Some)
            .map_err(|e| to_py_err(l3::Error::Gpu(format!("device=\"gpu\": {e}")))),
        "auto" => Ok(gpu().ok().filter(|g| !g.is_software())),
        other => Err(parameter_error(format!(
            "device must be \"auto\", \"gpu\" or \"cpu\", got {other:?}"
        ))),
    }
}

/// The adapter the GPU paths use (name, backend, and "(software)" for a CPU implementation
/// such as lavapipe), or None if wgpu finds none.
#[pyfunction]
fn gpu_adapter() -> Option<String> {
    gpu().ok().map(|g| {
        format!(
            "{}{}",
            g.adapter_name(),
            if g.is_software() { " (software)" } else { "" }
        )
    })
}

/// Each file's header, checked against `limits` (input size, dimensions, decoded size) before
/// anything is decoded; an error names the file's index.
fn checked_headers(bytes: &[PyBackedBytes], limits: &l3::Limits) -> l3::Result<Vec<Header>> {
    bytes
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let header = (|| -> l3::Result<Header> {
                if b.len() as u64 > limits.max_input_bytes {
                    return Err(l3::LimitsError::InputBytes {
                        len: b.len() as u64,
                        max: limits.max_input_bytes,
                    }
                    .into());
                }
                let h = l3::read_header(b)?;
                h.check_limits(limits)?;
                Ok(h)
            })();
            header.map_err(|e| l3::Error::InBatch {
                image: i,
                error: Box::new(e),
            })
        })
        .collect()
}

/// Bytes of a batch of `n` images of `per` bytes each, if within `limits.max_output_bytes`
/// (the batch is one array, held to the limit of one output).
fn batch_bytes(per: u64, n: usize, limits: &l3::Limits) -> l3::Result<usize> {
    let max = limits.max_output_bytes.min(isize::MAX as u64);
    match per.checked_mul(n as u64) {
        Some(total) if total <= max => Ok(total as usize),
        total => Err(l3::LimitsError::OutputBytes {
            needed: total.unwrap_or(u64::MAX),
            max,
        }
        .into()),
    }
}

/// Decodes L3 files of one shape and dtype into one array of shape `(N, H, W[, C])`: on the
/// GPU as one batch (`device="gpu"`, or `"auto"` when a hardware adapter exists), else on
/// the CPU, files in parallel. Each file, and the whole array, is held to `limits` (default
/// `l3.Limits()`) before anything is allocated.
#[pyfunction]
#[pyo3(signature = (files, device = "auto", *, limits = None))]
fn decode_batch<'py>(
    py: Python<'py>,
    files: Vec<Bound<'py, PyAny>>,
    device: &str,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<Bound<'py, PyAny>> {
    let limits = limits_of(limits.as_deref());
    let gpu = device_gpu(device)?;
    let bytes: Vec<PyBackedBytes> = files.iter().map(bytes_of).collect::<PyResult<_>>()?;
    if bytes.is_empty() {
        return Err(parameter_error("decode_batch needs at least one file"));
    }
    let headers = checked_headers(&bytes, &limits).py_err()?;
    let first = headers[0];
    let same = |h: &Header| {
        (h.width, h.height, h.channels(), h.depth)
            == (first.width, first.height, first.channels(), first.depth)
    };
    if let Some(i) = headers.iter().position(|h| !same(h)) {
        return Err(parameter_error(format!(
            "decode_batch: file {i} is {}x{}x{} at {} bits, file 0 is {}x{}x{} at {} bits; \
             decode files of different shapes with decode()",
            headers[i].width,
            headers[i].height,
            headers[i].channels(),
            headers[i].depth,
            first.width,
            first.height,
            first.channels(),
            first.depth
        )));
    }
    let n = bytes.len();
    let total = batch_bytes(first.output_bytes(), n, &limits).py_err()?;
    let per = total / n;
    let data = py
        .detach(|| -> l3::Result<Vec<u8>> {
            let mut all = vec![0u8; total];
            match gpu {
                Some(g) => {
                    let refs: Vec<&[u8]> = bytes.iter().map(|b| &b[..]).collect();
                    let batch = g.decode_batch(&refs, OutputLayout::Interleaved)?;
                    let images = batch.read_back()?;
                    if images.len() != n || images.iter().any(|im| im.len() != per) {
                        return Err(l3::Error::Gpu(format!(
                            "the GPU returned {} images, expected {n} of {per} bytes",
                            images.len()
                        )));
                    }
                    for (out, image) in all.chunks_exact_mut(per.max(1)).zip(&images) {
                        out.copy_from_slice(image);
                    }
                }
                None => {
                    let options = DecodeOptions {
                        parallel: false,
                        limits,
                        ..DecodeOptions::default()
                    };
                    all.par_chunks_mut(per)
                        .zip(bytes.par_iter())
                        .enumerate()
                        .try_for_each(|(i, (out, b))| {
                            l3::decode_into(b, out, &options).map(|_| ()).map_err(|e| {
                                l3::Error::InBatch {
                                    image: i,
                                    error: Box::new(e),
                                }
                            })
                        })?;
                }
            }
            Ok(all)
        })
        .py_err()?;
    let mut shape = vec![n];
    shape.extend(image_shape(first.width, first.height, first.channels()));
    shaped_array(py, first.depth, data, shape)
}

/// A batch decoded on the GPU and copied into exportable device memory (Vulkan external
/// memory, opaque fd): what `l3.cuda` imports into CUDA without a host round trip.
#[pyclass(module = "l3._l3", frozen)]
pub(crate) struct ExportedBatch {
    exported: l3::gpu::interop::ExportedBuffer,
    images: Vec<l3::gpu::ImageLayout>,
    size: u64,
}

#[pymethods]
impl ExportedBatch {
    /// Bytes of the buffer (the images at their offsets, 256-byte aligned).
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

    /// Per image: `(offset, bytes, width, height, channels, depth)`.
    #[getter]
    fn images(&self) -> Vec<(u64, u64, u32, u32, u32, u32)> {
        self.images
            .iter()
            .map(|l| {
                (
                    l.offset,
                    l.len,
                    l.width,
                    l.height,
                    l.channels as u32,
                    l.depth as u32,
                )
            })
            .collect()
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
}

/// Decodes L3 files as one GPU batch (interleaved u8/u16) and exports it (see
/// `ExportedBatch`). Needs a Vulkan device with `VK_KHR_external_memory_fd`. Each file and
/// the whole batch are held to `limits` (default `l3.Limits()`).
#[pyfunction]
#[pyo3(signature = (files, *, limits = None))]
fn decode_batch_export(
    py: Python<'_>,
    files: Vec<Bound<'_, PyAny>>,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<ExportedBatch> {
    let limits = limits_of(limits.as_deref());
    let bytes: Vec<PyBackedBytes> = files.iter().map(bytes_of).collect::<PyResult<_>>()?;
    if bytes.is_empty() {
        return Err(parameter_error(
            "decode_batch_export needs at least one file",
        ));
    }
    let headers = checked_headers(&bytes, &limits).py_err()?;
    let sum = headers
        .iter()
        .try_fold(0u64, |acc, h| acc.checked_add(h.output_bytes()))
        .unwrap_or(u64::MAX);
    batch_bytes(sum, 1, &limits).py_err()?;
    let Some(gpu) = device_gpu("gpu")? else {
        return Err(to_py_err(l3::Error::Gpu("no GPU decoder".into())));
    };
    py.detach(|| -> l3::Result<ExportedBatch> {
        let refs: Vec<&[u8]> = bytes.iter().map(|b| &b[..]).collect();
        let batch = gpu.decode_batch(&refs, OutputLayout::Interleaved)?;
        let exported = batch.export()?;
        Ok(ExportedBatch {
            exported,
            images: batch.images.clone(),
            size: batch.buffer.size(),
        })
    })
    .py_err()
}
