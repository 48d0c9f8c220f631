//! `Loader`: the Rust loader (planned shuffle, planned cache, exact resume, decode + augment
//! on the CPU pool or the GPU) as a Python iterator of batch dicts, over an image dataset
//! (`images`) or a tensor dataset (one array per declared name, cut by the tensor windows).
//! `l3/torch.py` builds the PyTorch dataset on it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use l3::loader::handoff::GpuOutput;
use l3::loader::{
    Augment, Batch, DropLast, LoaderDataset, LoaderOptions, LoaderState, OnError, Partition,
    Policy, RandomResizedCrop, Received, Tensor, TensorAugment, TensorType,
};
use l3::Normalize;

use crate::codec::device_gpu;
use crate::dataset::Dataset;
use crate::handoff::GpuBatch;
use crate::tensors::PyTensorDataset;
use crate::{choose, limits_of, parameter_error, OrPyErr, PyLimits};

/// How long `__next__` waits without the GIL before it checks for signals.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// Keys of a batch dict besides a tensor dataset's arrays: an array of one of these names
/// cannot be loaded (its name would be ambiguous).
const BATCH_KEYS: &[&str] = &[
    "arrays",
    "samples",
    "labels",
    "epoch",
    "state",
    "skipped",
    "bytes_read",
    "read_calls",
    "cache",
    "disk_cache",
    "windows",
    "f16_bits",
    "images",
];

/// What a loader's batches hold.
enum Kind {
    /// Images: `(channels, height, width)` of each.
    Images((usize, usize, usize)),
    /// A tensor dataset's arrays, by name in the manifest's order.
    Tensors(Vec<String>),
}

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
/// With `cache_mb` and more than one rank, `locality` (default True) splits each global batch
/// among the ranks by what their caches hold (SOLAR's partition: the same global batches and
/// coverage, fewer reads), each rank's batch within `max_imbalance` samples of `batch_size`
/// (default None: `batch_size // 8`; 0 keeps batches exactly equal). Every rank must pass the
/// same cache and split options. `reuse_front` (default 0: the plain permutation) puts the
/// samples the previous epoch read last at the front of each epoch (the reuse order,
/// docs/cache-study.md); resume with the same value. `strata` (default None: 64 for a windowed
/// tensor dataset, else 0) stratifies each epoch's permutation over that many contiguous
/// ranges of sample ids, so that the locality split's batches stay even over windows; resume
/// with the same value.
///
/// With the GPU path, `gpu_output` says how batches come: `"array"` (default) read back into
/// a new array; `"staged"` or `"device"` as an `l3._l3.GpuBatch` (staged in host-visible
/// memory, or left on the GPU) that the consumer copies into memory it reuses (`l3.torch`'s
/// pinned and CUDA pools): under `"images"`, or for a tensor dataset under `"gpu"` with one
/// view per array (the arrays' own keys are then absent; `"arrays"` still names them). A
/// batch without samples is arrays in every mode.
///
/// Over a tensor dataset `device="gpu"` decodes and cuts the batch's arrays on the GPU, bit
/// for bit the CPU path's (64-bit arrays load on the CPU only); `"auto"` takes the CPU path
/// for tensors.
#[pyclass(module = "l3._l3", frozen)]
struct Loader {
    inner: Mutex<Option<l3::loader::Loader>>,
    /// The state after the last batch returned (kept after `close`, for checkpoints).
    state: Mutex<LoaderState>,
    /// Images or tensor arrays.
    kind: Kind,
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
        drop_last = "partial", size = (224, 224), level = None, crop = None,
        scale = vec![0.08, 1.0], ratio = vec![0.75, 4.0 / 3.0], flip = 0.5,
        mean = vec![0.485, 0.456, 0.406], std = vec![0.229, 0.224, 0.225], channels = 3,
        rotate90 = false, max_angle = 0.0, padding = 0, fill = 0.0, noise_std = 0.0,
        dtype = "float32", cache_mb = 0, cache_policy = "planned", locality = true,
        max_imbalance = None, reuse_front = 0, strata = None, threads = 0, prefetch = 2,
        device = "cpu", end_epoch = None, worker = 0, num_workers = 1, on_error = "skip",
        crop_window = true, limits = None, gpu_output = "array", flips = None, rot90 = None,
        normalize = None, spatial = None, disk_cache = None, disk_cache_mb = 0,
        index_cache = None
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
        crop: Option<&Bound<'_, PyAny>>,
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
        locality: bool,
        max_imbalance: Option<u32>,
        reuse_front: u32,
        strata: Option<u32>,
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
        flips: Option<bool>,
        rot90: Option<bool>,
        normalize: Option<bool>,
        spatial: Option<i64>,
        disk_cache: Option<std::path::PathBuf>,
        disk_cache_mb: u64,
        index_cache: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let spatial = spatial
            .map(|s| {
                u8::try_from(s)
                    .ok()
                    .filter(|s| (2..=3).contains(s))
                    .ok_or_else(|| parameter_error(format!("spatial must be 2 or 3, got {s}")))
            })
            .transpose()?;
        let dataset = open_dataset(
            py,
            dataset,
            &limits_of(limits.as_deref()),
            index_cache.as_deref(),
        )?;
        let output = choose(
            "dtype",
            dtype,
            &[("float32", TensorType::F32), ("float16", TensorType::F16)],
        )?;
        let tensor_options = TensorOptions {
            crop,
            flips,
            rot90,
            normalize,
            spatial,
            output,
        };
        let (image_crop, kind) = match &dataset {
            LoaderDataset::Images(_) => {
                tensor_options.refuse_for_images()?;
                let crop = crop
                    .map_or(Ok(true), |c| c.extract::<bool>())
                    .map_err(|_| {
                        parameter_error(
                            "crop of an image dataset is True or False (a random resized crop); \
                         a window size per axis is for a tensor dataset",
                        )
                    })?;
                let chw = (channels as usize, size.1 as usize, size.0 as usize);
                (Some(crop), Kind::Images(chw))
            }
            LoaderDataset::Tensors(d) => {
                // A sample's arrays: a windowed dataset's window names them.
                let names: Vec<String> = d
                    .manifest()
                    .sample_arrays()
                    .into_iter()
                    .map(|a| a.name)
                    .collect();
                if let Some(n) = names.iter().find(|n| BATCH_KEYS.contains(&n.as_str())) {
                    return Err(parameter_error(format!(
                        "the dataset has an array named {n:?}, a key of the batch dicts \
                         ({BATCH_KEYS:?}): repack it with another name"
                    )));
                }
                (None, Kind::Tensors(names))
            }
        };
        let tensor_augment = match &kind {
            Kind::Tensors(_) => tensor_options.augment()?,
            Kind::Images(_) => None,
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
        a.crop = image_crop.unwrap_or(false).then_some(RandomResizedCrop {
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
        a.output = output;
        o.augment = a;
        o.tensor = tensor_augment;
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
        o.locality = locality;
        o.max_imbalance = max_imbalance;
        o.reuse_front = reuse_front;
        o.strata = strata;
        o.disk_cache = match (disk_cache, disk_cache_mb) {
            (Some(dir), mb) if mb > 0 => Some((
                dir,
                mb.checked_mul(1 << 20)
                    .ok_or_else(|| parameter_error(format!("disk_cache_mb {mb} is too large")))?,
            )),
            (Some(_), _) => return Err(parameter_error("disk_cache needs disk_cache_mb above 0")),
            (None, _) => None,
        };
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
        if matches!(kind, Kind::Tensors(_)) && device == "auto" {
            // "auto" takes the CPU path for tensors (it takes every dtype); "gpu" asks for
            // the GPU path, which refuses 64-bit arrays.
            o.gpu = None;
        }
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
            .detach(|| l3::loader::Loader::open(dataset, o, state))
            .py_err()?;
        Ok(Loader {
            inner: Mutex::new(Some(inner)),
            state: Mutex::new(state),
            kind,
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
        let mut b = batch.py_err()?;
        {
            let s = b.state_after;
            *self.state.lock().unwrap_or_else(|e| e.into_inner()) = s;
        }
        let d = PyDict::new(py);
        match &self.kind {
            Kind::Images((c, h, w)) => {
                let shape = [b.samples.len(), *c, *h, *w];
                match b.gpu.take() {
                    // Staged or on the GPU (`gpu_output`): the consumer copies it where it
                    // wants.
                    Some(handed) => {
                        d.set_item("images", GpuBatch::new(handed))?;
                        d.set_item("f16_bits", false)?;
                    }
                    None => {
                        let images = match std::mem::take(&mut b.data) {
                            Tensor::F32(v) => PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
                            // float16 bits: the Python side views them as numpy.float16 (no
                            // copy).
                            Tensor::F16(v) => PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
                        };
                        d.set_item("images", images)?;
                        d.set_item("f16_bits", self.f16)?;
                    }
                }
            }
            Kind::Tensors(names) => {
                if let Some(handed) = b.gpu.take() {
                    // Staged or on the GPU (`gpu_output`): one view per array name; the
                    // consumer copies them where it wants.
                    d.set_item("gpu", GpuBatch::new(handed))?;
                }
                tensors_into(py, &d, &mut b)?;
                d.set_item("arrays", names.clone())?;
                // float16 arrays are numpy.float16 already.
                d.set_item("f16_bits", false)?;
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
        d.set_item("read_calls", b.read_calls)?;
        for (name, stats) in [("cache", &b.cache), ("disk_cache", &b.disk_cache)] {
            let cache = PyDict::new(py);
            cache.set_item("accesses", stats.accesses)?;
            cache.set_item("hits", stats.hits)?;
            cache.set_item("hit_bytes", stats.hit_bytes)?;
            cache.set_item("miss_bytes", stats.miss_bytes)?;
            cache.set_item("evictions", stats.evictions)?;
            d.set_item(name, cache)?;
        }
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

/// A tensor batch's arrays into `d` (moved out of `b`): each by its name, `(N, ...)`,
/// float32 or numpy.float16; its windows as `windows` (`None` without tensor windows): a
/// dict of `origin`, `size`, `flip` (`(N, axes)` int64, int64, bool) and `rot90` (`(N,)`).
fn tensors_into(py: Python<'_>, d: &Bound<'_, PyDict>, b: &mut Batch) -> PyResult<()> {
    for a in std::mem::take(&mut b.arrays) {
        let array = match a.tensor {
            Tensor::F32(v) => PyArray1::from_vec(py, v).reshape(a.shape)?.into_any(),
            Tensor::F16(v) => PyArray1::from_vec(py, v)
                .reshape(a.shape)?
                .call_method1("view", ("float16",))?,
        };
        d.set_item(a.name, array)?;
    }
    if b.windows.len() != b.samples.len() {
        d.set_item("windows", py.None())?;
        return Ok(());
    }
    let n = b.samples.len();
    let axes = b.windows.first().map_or(0, |w| w.origin.len());
    let flat = |f: &dyn Fn(&l3::loader::TensorWindow) -> Vec<i64>| -> Vec<i64> {
        b.windows.iter().flat_map(f).collect()
    };
    let origin = flat(&|w| w.origin.iter().map(|&x| x as i64).collect());
    let size = flat(&|w| w.size.iter().map(|&x| x as i64).collect());
    let flip: Vec<bool> = b.windows.iter().flat_map(|w| w.flip.clone()).collect();
    let rot: Vec<i64> = b.windows.iter().map(|w| w.rot90 as i64).collect();
    let w = PyDict::new(py);
    w.set_item("origin", PyArray1::from_vec(py, origin).reshape([n, axes])?)?;
    w.set_item("size", PyArray1::from_vec(py, size).reshape([n, axes])?)?;
    w.set_item("flip", PyArray1::from_vec(py, flip).reshape([n, axes])?)?;
    w.set_item("rot90", PyArray1::from_vec(py, rot))?;
    d.set_item("windows", w)?;
    Ok(())
}

/// `dataset` (an `l3.Dataset`, an `l3.TensorDataset` or a dataset folder path) opened for the
/// loader: a folder whose manifest is of kind `"tensors"` as a tensor dataset within
/// `limits`, any other as an image dataset.
fn open_dataset(
    py: Python<'_>,
    dataset: &Bound<'_, PyAny>,
    limits: &l3::Limits,
    index_cache: Option<&std::path::Path>,
) -> PyResult<LoaderDataset> {
    if let Ok(d) = dataset.cast::<Dataset>() {
        return Ok(LoaderDataset::Images(d.get().inner.clone()));
    }
    let path: std::path::PathBuf = if dataset.is_instance_of::<PyTensorDataset>() {
        dataset.getattr("path")?.extract()?
    } else {
        dataset.extract().map_err(|_| {
            parameter_error(
                "dataset must be an l3.Dataset, an l3.TensorDataset or a dataset folder path",
            )
        })?
    };
    py.detach(|| {
        let store = crate::dataset::open_store(&path, index_cache)?;
        // One read of the manifest; `limits` bound either kind's reads.
        Ok(match l3::shard::AnyDataset::open_in(&store, limits)? {
            l3::shard::AnyDataset::Tensors(d) => LoaderDataset::Tensors(Arc::new(d)),
            l3::shard::AnyDataset::Images(d) => LoaderDataset::Images(Arc::new(d)),
        })
    })
    .py_err()
}

/// The tensor windows' options as Python gives them (`None`: not given).
struct TensorOptions<'a, 'py> {
    crop: Option<&'a Bound<'py, PyAny>>,
    flips: Option<bool>,
    rot90: Option<bool>,
    normalize: Option<bool>,
    spatial: Option<u8>,
    output: TensorType,
}

impl TensorOptions<'_, '_> {
    /// An image dataset takes none of the tensor-only options.
    fn refuse_for_images(&self) -> PyResult<()> {
        let given = [
            ("flips", self.flips.is_some()),
            ("rot90", self.rot90.is_some()),
            ("normalize", self.normalize.is_some()),
            ("spatial", self.spatial.is_some()),
        ];
        if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
            return Err(parameter_error(format!(
                "{name} is an option of tensor datasets; this dataset holds images (see flip, \
                 rotate90, mean and std)"
            )));
        }
        Ok(())
    }

    /// The loader's tensor windows: `None` (whole arrays, float32) when no option asks for
    /// more.
    fn augment(&self) -> PyResult<Option<TensorAugment>> {
        let crop: Vec<u32> = match self.crop {
            None => Vec::new(),
            Some(c) if c.is_none() => Vec::new(),
            Some(c) => {
                let sizes: Vec<i64> = c.extract().map_err(|_| {
                    parameter_error(format!(
                        "crop of a tensor dataset is a window size per spatial axis (2 or 3 \
                         ints) or None (whole arrays), got {c}"
                    ))
                })?;
                if !(2..=3).contains(&sizes.len()) {
                    return Err(parameter_error(format!(
                        "crop must have 2 or 3 sizes (one per spatial axis), got {sizes:?}"
                    )));
                }
                sizes
                    .iter()
                    .map(|&x| {
                        u32::try_from(x).ok().filter(|&x| x > 0).ok_or_else(|| {
                            parameter_error(format!(
                                "crop sizes must be in 1..=4294967295, got {sizes:?}"
                            ))
                        })
                    })
                    .collect::<PyResult<_>>()?
            }
        };
        let flips = self.flips.unwrap_or(false);
        let rot90 = self.rot90.unwrap_or(false);
        let normalise = self.normalize.unwrap_or(false);
        let plain = crop.is_empty()
            && !flips
            && !rot90
            && !normalise
            && self.spatial.is_none()
            && self.output == TensorType::F32;
        if plain {
            return Ok(None);
        }
        if let Some(s) = self.spatial {
            if !crop.is_empty() && s as usize != crop.len() {
                return Err(parameter_error(format!(
                    "spatial={s} disagrees with crop's {} sizes",
                    crop.len()
                )));
            }
        }
        let spatial = self
            .spatial
            .unwrap_or(if crop.is_empty() { 2 } else { crop.len() as u8 });
        Ok(Some(TensorAugment {
            crop,
            spatial,
            flips,
            rot90,
            normalise,
            output: self.output,
        }))
    }
}
