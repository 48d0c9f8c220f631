//! `Loader`: the Rust loader (planned shuffle, planned cache, exact resume, decode + augment
//! on the CPU pool or the GPU) as a Python iterator of batch dicts. `l3/torch.py` builds the
//! PyTorch dataset on it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use l3::loader::gpu::GpuOutput;
use l3::loader::{
    Augment, DropLast, LoaderOptions, LoaderState, OnError, Partition, Policy, RandomResizedCrop,
    Received, Tensor, TensorType,
};
use l3::Normalize;

use crate::codec::device_gpu;
use crate::dataset::Dataset;
use crate::handoff::GpuImages;
use crate::{choose, limits_of, parameter_error, OrPyErr, PyLimits};

/// How long `__next__` waits without the GIL before it checks for signals.
const WAIT_SLICE: Duration = Duration::from_millis(50);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Loader>()?;
    Ok(())
}

/// Batches of augmented images from a dataset, in the planned order of (seed, epoch), this
/// rank's share (and this worker's, for loaders in data-loading workers): iterate it for
/// dicts `{"images", "labels", "samples", "epoch", "state", "skipped"}`. `images` is an
/// `(N, C, H, W)` float32 (or float16) array, `labels` and `samples` int64 arrays; `state` is
/// `(seed, epoch, consumed)` after the batch: pass it back as `seed`, `epoch`, `consumed` to
/// resume exactly after it (also with another world size).
///
/// With the GPU path, `gpu_output` says how batches come: `"array"` (default) read back into
/// a new array; `"staged"` or `"device"` as an `l3._l3.GpuImages` (staged in host-visible
/// memory, or left on the GPU) that the consumer copies into memory it reuses (`l3.torch`'s
/// pinned and CUDA pools). A batch without samples is an empty array in every mode.
#[pyclass(module = "l3._l3", frozen)]
struct Loader {
    inner: Mutex<Option<l3::loader::Loader>>,
    /// The state after the last batch returned (kept after `close`, for checkpoints).
    state: Mutex<LoaderState>,
    /// `(channels, height, width)` of each output image.
    chw: (usize, usize, usize),
    f16: bool,
    /// The process that created the loader: its threads live there only. In a child made by
    /// `fork` (a `DataLoader` worker forked while a loader was open) the loader is never used
    /// nor joined, only forgotten: its threads do not exist there and its locks may be held.
    pid: u32,
}

impl Loader {
    /// An error if this process is not the one that created the loader.
    fn check_process(&self) -> PyResult<()> {
        if std::process::id() == self.pid {
            return Ok(());
        }
        Err(parameter_error(
            "this loader was created in another process (this one was forked from it): \
             create a new loader here",
        ))
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            // A forked copy: dropping would join threads that are not in this process.
            let inner = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
            std::mem::forget(inner.take());
        }
    }
}

fn pair(v: &[f32], what: &str) -> PyResult<(f32, f32)> {
    match v {
        [a, b] if a <= b => Ok((*a, *b)),
        _ => Err(parameter_error(format!(
            "{what} must be (low, high) with low <= high, got {v:?}"
        ))),
    }
}

fn per_channel(v: &[f32], what: &str) -> PyResult<[f32; 4]> {
    match v.len() {
        1..=4 => {
            let mut out = [*v.last().expect("non-empty"); 4];
            out[..v.len()].copy_from_slice(v);
            Ok(out)
        }
        n => Err(parameter_error(format!(
            "{what} must have 1 to 4 values (one per channel), got {n}"
        ))),
    }
}

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (
        dataset, batch_size, *, seed = 0, epoch = 0, consumed = 0, rank = 0, world_size = 1,
        drop_last = "partial", size = (224, 224), level = None, crop = true,
        scale = vec![0.08, 1.0], ratio = vec![0.75, 4.0 / 3.0], flip = 0.5,
        mean = vec![0.485, 0.456, 0.406], std = vec![0.229, 0.224, 0.225], channels = 3,
        rotate90 = false, max_angle = 0.0, padding = 0, fill = 0.0, noise_std = 0.0,
        dtype = "float32", cache_mb = 0, cache_policy = "planned", threads = 0, prefetch = 2,
        device = "cpu", end_epoch = None, worker = 0, num_workers = 1, on_error = "skip",
        crop_window = true, limits = None, gpu_output = "array"
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        dataset: &Bound<'_, PyAny>,
        batch_size: u32,
        seed: u64,
        epoch: u64,
        consumed: u64,
        rank: u32,
        world_size: u32,
        drop_last: &str,
        size: (u32, u32),
        level: Option<u8>,
        crop: bool,
        scale: Vec<f32>,
        ratio: Vec<f32>,
        flip: f32,
        mean: Vec<f32>,
        std: Vec<f32>,
        channels: u8,
        rotate90: bool,
        max_angle: f32,
        padding: u32,
        fill: f32,
        noise_std: f32,
        dtype: &str,
        cache_mb: u64,
        cache_policy: &str,
        threads: usize,
        prefetch: usize,
        device: &str,
        end_epoch: Option<u64>,
        worker: u32,
        num_workers: u32,
        on_error: &str,
        crop_window: bool,
        limits: Option<PyRef<'_, PyLimits>>,
        gpu_output: &str,
    ) -> PyResult<Self> {
        let dataset = match dataset.cast::<Dataset>() {
            Ok(d) => d.get().inner.clone(),
            Err(_) => {
                let path: std::path::PathBuf = dataset.extract().map_err(|_| {
                    parameter_error("dataset must be an l3.Dataset or a dataset folder path")
                })?;
                Arc::new(py.detach(|| l3::shard::Dataset::open(&path)).py_err()?)
            }
        };
        let drop_last = choose(
            "drop_last",
            drop_last,
            &[
                ("partial", DropLast::Partial),
                ("drop", DropLast::Drop),
                ("pad", DropLast::Pad),
            ],
        )?;
        let mut o = LoaderOptions::new(Partition {
            batch_size,
            world_size,
            rank,
            drop_last,
        });
        o.seed = seed;
        o.level = level;
        let mut a = Augment::with_size(size.0, size.1);
        a.crop = crop.then_some(RandomResizedCrop {
            scale: pair(&scale, "scale")?,
            ratio: pair(&ratio, "ratio")?,
        });
        if !(0.0..=1.0).contains(&flip) {
            return Err(parameter_error(format!(
                "flip must be a probability, got {flip}"
            )));
        }
        a.flip_probability = flip;
        a.normalize = Normalize {
            mean: per_channel(&mean, "mean")?,
            std: per_channel(&std, "std")?,
        };
        a.channels = channels;
        a.rotate90 = rotate90;
        a.max_angle_degrees = max_angle;
        a.padding = padding;
        a.fill = fill;
        a.noise_std = noise_std;
        a.output = choose(
            "dtype",
            dtype,
            &[("float32", TensorType::F32), ("float16", TensorType::F16)],
        )?;
        o.augment = a;
        o.cache_bytes = cache_mb.checked_mul(1 << 20).ok_or_else(|| {
            parameter_error(format!(
                "cache_mb {cache_mb} is too large (the bytes overflow)"
            ))
        })?;
        o.cache_policy = choose(
            "cache_policy",
            cache_policy,
            &[("planned", Policy::Planned), ("lru", Policy::Lru)],
        )?;
        o.threads = threads;
        if prefetch == 0 {
            return Err(parameter_error("prefetch must be at least 1"));
        }
        o.prefetch_batches = prefetch;
        o.end_epoch = end_epoch.unwrap_or(u64::MAX);
        o.workers = (worker, num_workers);
        o.on_error = choose(
            "on_error",
            on_error,
            &[("skip", OnError::Skip), ("fail", OnError::Fail)],
        )?;
        o.crop_window_decode = crop_window;
        o.decode.limits = limits_of(limits.as_deref());
        o.gpu = device_gpu(device)?;
        o.gpu_output = choose(
            "gpu_output",
            gpu_output,
            &[
                ("array", GpuOutput::ReadBack),
                ("staged", GpuOutput::Staged),
                ("device", GpuOutput::Device),
            ],
        )?;
        if o.gpu_output != GpuOutput::ReadBack && o.gpu.is_none() {
            return Err(parameter_error(format!(
                "gpu_output={gpu_output:?} needs the GPU path (device=\"gpu\", or \"auto\" with a \
                 hardware GPU)"
            )));
        }
        let state = LoaderState {
            seed,
            epoch,
            consumed,
        };
        let inner = py
            .detach(|| l3::loader::Loader::new(dataset, o, state))
            .py_err()?;
        Ok(Loader {
            inner: Mutex::new(Some(inner)),
            state: Mutex::new(state),
            chw: (channels as usize, size.1 as usize, size.0 as usize),
            f16: dtype == "float16",
            pid: std::process::id(),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch. Waits in slices of [`WAIT_SLICE`] without the GIL and checks for
    /// signals between them, so Ctrl-C interrupts a wait and `close()` from another thread
    /// gets the loader within one slice.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.check_process()?;
        let batch = loop {
            let received = py.detach(|| {
                let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                match guard.as_mut() {
                    Some(l) => l.next_timeout(WAIT_SLICE),
                    None => Received::Finished,
                }
            });
            match received {
                Received::Batch(b) => break b,
                Received::Finished => return Ok(None),
                Received::TimedOut => py.check_signals()?,
            }
        };
        let b = batch.py_err()?;
        {
            let s = b.state_after;
            *self.state.lock().unwrap_or_else(|e| e.into_inner()) = s;
        }
        let (c, h, w) = self.chw;
        let shape = [b.samples.len(), c, h, w];
        let d = PyDict::new(py);
        match b.gpu {
            // Staged or on the GPU (`gpu_output`): the consumer copies it where it wants.
            Some(handed) => {
                d.set_item("images", GpuImages::new(handed))?;
                d.set_item("f16_bits", false)?;
            }
            None => {
                let images = match b.data {
                    Tensor::F32(v) => PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
                    // float16 bits: the Python side views them as numpy.float16 (no copy).
                    Tensor::F16(v) => PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
                };
                d.set_item("images", images)?;
                d.set_item("f16_bits", self.f16)?;
            }
        }
        let labels: Vec<i64> = b.classes.iter().map(|c| c.map_or(-1, i64::from)).collect();
        d.set_item("labels", PyArray1::from_vec(py, labels))?;
        let samples: Vec<i64> = b.samples.iter().map(|&s| s as i64).collect();
        d.set_item("samples", PyArray1::from_vec(py, samples))?;
        d.set_item("epoch", b.epoch)?;
        let s = b.state_after;
        d.set_item("state", (s.seed, s.epoch, s.consumed))?;
        let skipped = PyList::empty(py);
        for r in &b.skipped {
            let e = PyDict::new(py);
            e.set_item("sample", r.sample)?;
            e.set_item("shard", &r.shard)?;
            e.set_item("key", &r.key)?;
            e.set_item("error", &r.error)?;
            skipped.append(e)?;
        }
        d.set_item("skipped", skipped)?;
        d.set_item("bytes_read", b.bytes_read)?;
        Ok(Some(d))
    }

    /// `(seed, epoch, consumed)` after the last batch returned (the starting state before
    /// the first; still after `close()`): resume from it exactly.
    fn state(&self) -> (u64, u64, u64) {
        let s = *self.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.seed, s.epoch, s.consumed)
    }

    /// Stops the loader's threads now (also done when it is garbage-collected). Returns within
    /// about one sample's decode, whatever the loader is doing.
    fn close(&self, py: Python<'_>) {
        if std::process::id() != self.pid {
            // A forked copy: nothing of it runs here (see `Loader::pid`).
            return;
        }
        py.detach(|| {
            let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            drop(taken)
        });
    }
}
