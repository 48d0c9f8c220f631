//! Datasets: `Dataset` (open a packed dataset: length, records at any level, labels,
//! metadata), `write_shard` (pack records into one shard, verified and atomic; one call per
//! task in a distributed conversion) and `write_manifest` (the dataset's manifest over shards
//! written by any number of such calls).

use std::path::PathBuf;
use std::sync::Arc;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};

use l3::decode::DecodeOptions;
use l3::progressive::{LevelScheme, ProgressiveOptions};
use l3::shard::pack::{
    encode_record, pack_shard, pack_shard_recorded, PackInputs, PlannedRecord, ShardOutcome,
};
use l3::shard::{Manifest, ShardInfo, MANIFEST_VERSION};

use crate::arrays::{array_from_samples, image_from_array, OwnedImage};
use crate::codec::{encode_options, read_image_within};
use crate::{limits_of, parameter_error, to_py_err, OrPyErr, PyLimits};

/// The store of the dataset at `path` (a folder or an object-store URL), what opening remote
/// shards fetched kept in `index_cache` when given.
pub(crate) fn open_store(
    path: &std::path::Path,
    index_cache: Option<&std::path::Path>,
) -> l3::Result<l3::store::Store> {
    l3::store::Store::open_with_index_cache(&path.to_string_lossy(), index_cache)
}

/// Opens the dataset of kind `M` at `path` (a folder or an object-store URL) within
/// `limits` (default `l3.Limits()`), the GIL released: `l3.Dataset` and `l3.TensorDataset`.
pub(crate) fn open_kind<M: l3::shard::DatasetManifest + Send>(
    py: Python<'_>,
    path: &std::path::Path,
    limits: Option<&PyLimits>,
    index_cache: Option<&std::path::Path>,
) -> PyResult<Arc<l3::shard::DatasetOf<M>>> {
    let limits = limits_of(limits);
    py.detach(|| l3::shard::DatasetOf::open_in(&open_store(path, index_cache)?, &limits))
        .map(Arc::new)
        .py_err()
}

/// Record `i` of a dataset of `len` records, counted from the end when negative (Python's
/// indexing), or an `IndexError`.
pub(crate) fn record_index(i: i64, len: u64) -> PyResult<u64> {
    let n = len as i64;
    let j = if i < 0 { i + n } else { i };
    if !(0..n).contains(&j) {
        return Err(pyo3::exceptions::PyIndexError::new_err(format!(
            "record {i} out of range for a dataset of {n} records"
        )));
    }
    Ok(j as u64)
}

/// Opens a packed dataset of either kind from one read of its manifest: an `l3.Dataset` of
/// images or an `l3.TensorDataset`, every shard read within `limits` (default `l3.Limits()`).
#[pyfunction]
#[pyo3(signature = (path, *, limits = None, index_cache = None))]
fn open_dataset(
    py: Python<'_>,
    path: PathBuf,
    limits: Option<PyRef<'_, PyLimits>>,
    index_cache: Option<PathBuf>,
) -> PyResult<Py<PyAny>> {
    let limits = limits_of(limits.as_deref());
    let any = py
        .detach(|| {
            let store = open_store(&path, index_cache.as_deref())?;
            l3::shard::AnyDataset::open_in(&store, &limits)
        })
        .py_err()?;
    Ok(match any {
        l3::shard::AnyDataset::Images(d) => Py::new(py, Dataset { inner: Arc::new(d) })?.into_any(),
        l3::shard::AnyDataset::Tensors(d) => {
            Py::new(py, crate::tensors::PyTensorDataset { inner: Arc::new(d) })?.into_any()
        }
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Dataset>()?;
    m.add_function(wrap_pyfunction!(open_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(write_shard, m)?)?;
    m.add_function(wrap_pyfunction!(write_manifest, m)?)?;
    m.add_function(wrap_pyfunction!(copy_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(is_remote, m)?)?;
    m.add_function(wrap_pyfunction!(plan_pack, m)?)?;
    Ok(())
}

/// A pack's record: `(key, path, label, metadata)`, as `write_shard` takes it.
type PlannedImage = (String, String, Option<u32>, Option<Vec<u8>>);

/// The plan of packing the image tree `source` (`l3.plan_pack`; the one `l3 pack` makes):
/// `(classes, [(shard file name, [(key, path, label, None), ...]), ...])`.
#[pyfunction]
#[pyo3(signature = (source, records_per_shard = 1024))]
fn plan_pack(
    py: Python<'_>,
    source: PathBuf,
    records_per_shard: usize,
) -> PyResult<(Vec<String>, Vec<(String, Vec<PlannedImage>)>)> {
    let tree = py
        .detach(|| l3::shard::tree::ImageTree::list(&source))
        .py_err()?;
    if tree.images.is_empty() {
        return Err(parameter_error(format!(
            "no images under {}",
            source.display()
        )));
    }
    let classes = tree.classes();
    let label = |c: &Option<String>| {
        c.as_ref()
            .map(|c| classes.binary_search(c).expect("a listed class") as u32)
    };
    let jobs = tree
        .shards(records_per_shard)
        .py_err()?
        .into_iter()
        .map(|(name, images)| {
            let records = images
                .iter()
                .map(|i| {
                    let path = i.path.to_string_lossy().into_owned();
                    (i.key.clone(), path, label(&i.class), None)
                })
                .collect();
            (name, records)
        })
        .collect();
    Ok((classes, jobs))
}

/// Whether `location` is an object-store URL (`s3://`, `gs://`, `az://`, `http(s)://`, ...)
/// rather than a folder.
#[pyfunction]
fn is_remote(location: PathBuf) -> bool {
    l3::store::is_remote(&location.to_string_lossy())
}

/// Copies the dataset at `source` to `dest` (folders or object-store URLs): shards checked
/// against the manifest's size and CRC-32, the manifest last, the copy reopened and checked; a
/// destination with a manifest is refused unless `force`. Returns `{"records", "shards",
/// "bytes"}`.
#[pyfunction]
#[pyo3(signature = (source, dest, *, force = false))]
fn copy_dataset(
    py: Python<'_>,
    source: PathBuf,
    dest: PathBuf,
    force: bool,
) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let (source, dest) = (source.to_string_lossy(), dest.to_string_lossy());
    let report = py
        .detach(|| {
            let from = l3::store::Store::open(&source)?;
            if !l3::store::is_remote(&dest) {
                std::fs::create_dir_all(&*dest)?;
            }
            let to = l3::store::Store::open(&dest)?;
            l3::shard::copy_dataset(&from, &to, force, |_, _| {})
        })
        .py_err()?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("records", report.records)?;
    d.set_item("shards", report.shards)?;
    d.set_item("bytes", report.bytes)?;
    Ok(d)
}

/// `store`'s location for Python: a `pathlib.Path` for a folder, the URL as a `str` for an
/// object store.
pub(crate) fn location<'py>(
    py: Python<'py>,
    store: &l3::store::Store,
) -> PyResult<Bound<'py, PyAny>> {
    match store.local_dir() {
        Some(dir) => dir.to_path_buf().into_pyobject(py).map(|p| p.into_any()),
        None => Ok(pyo3::types::PyString::new(py, &store.location()).into_any()),
    }
}

/// A packed dataset (a folder of record shards and `manifest.json`), opened for random
/// access. Every shard's index is read and checked when it is opened.
#[pyclass(module = "l3._l3", frozen)]
pub(crate) struct Dataset {
    pub(crate) inner: Arc<l3::shard::Dataset>,
}

impl Dataset {
    fn index(&self, i: i64) -> PyResult<u64> {
        record_index(i, self.inner.len())
    }

    fn level_of(&self, level: Option<u8>) -> PyResult<u8> {
        let levels = self.inner.manifest().levels;
        match level {
            None => Ok(levels - 1),
            Some(l) if l < levels => Ok(l),
            Some(l) => Err(parameter_error(format!(
                "level {l} does not exist: the dataset has levels 0..={}",
                levels - 1
            ))),
        }
    }
}

#[pymethods]
impl Dataset {
    /// Opens the dataset in folder `path`, or at an object-store URL (`s3://bucket/prefix`,
    /// `gs://`, `az://`, `https://`).
    /// `index_cache`: a local folder keeping what opening each remote shard fetched, for the
    /// next process (see `l3.open_dataset`).
    #[new]
    #[pyo3(signature = (path, *, limits = None, index_cache = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        limits: Option<PyRef<'_, PyLimits>>,
        index_cache: Option<PathBuf>,
    ) -> PyResult<Self> {
        let inner = open_kind(py, &path, limits.as_deref(), index_cache.as_deref())?;
        Ok(Dataset { inner })
    }

    fn __len__(&self) -> usize {
        self.inner.len() as usize
    }

    /// `(image, label)` of record `i` at full resolution (label -1 when it has none).
    fn __getitem__<'py>(&self, py: Python<'py>, i: i64) -> PyResult<(Bound<'py, PyAny>, i64)> {
        let image = self.read(py, i, None, None)?;
        let j = self.index(i)?;
        let class = self.inner.record(j).py_err()?.class;
        Ok((image, class.map_or(-1, i64::from)))
    }

    /// The dataset's folder (a `pathlib.Path`), or its URL (a `str`: a path would fold its
    /// `//`).
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        location(py, self.inner.store())
    }

    /// Levels per record (level `levels - 1` is full resolution).
    #[getter]
    fn levels(&self) -> u8 {
        self.inner.manifest().levels
    }

    /// Class names; a record's label indexes this list.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.inner.manifest().classes.clone()
    }

    /// Every record's label as an int64 array (-1: none), in record order.
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let labels: Vec<i64> = self
            .inner
            .shards()
            .iter()
            .flat_map(|s| s.records().iter().map(|r| r.class.map_or(-1, i64::from)))
            .collect();
        Ok(PyArray1::from_vec(py, labels))
    }

    /// Record `i` decoded at `level` (default: full resolution) as an array, within `limits`
    /// (default `l3.Limits()`).
    #[pyo3(signature = (i, level = None, *, limits = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        i: i64,
        level: Option<u8>,
        limits: Option<PyRef<'_, PyLimits>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let j = self.index(i)?;
        let level = self.level_of(level)?;
        let inner = self.inner.clone();
        let options = DecodeOptions {
            limits: limits_of(limits.as_deref()),
            ..DecodeOptions::default()
        };
        let image = py
            .detach(|| {
                let (s, r) = inner.locate(j)?;
                inner.shards()[s].decode_record(r, level, &options)
            })
            .py_err()?;
        array_from_samples(
            py,
            image.width,
            image.height,
            image.channels,
            image.depth,
            image.data,
        )
    }

    /// Record `i`'s index entry: key, label, class name, metadata (bytes), full-resolution
    /// shape, dtype, storage scheme, shard, and bytes per level.
    fn record<'py>(&self, py: Python<'py>, i: i64) -> PyResult<Bound<'py, PyDict>> {
        let j = self.index(i)?;
        let (s, _) = self.inner.locate(j).py_err()?;
        let r = self.inner.record(j).py_err()?;
        let d = PyDict::new(py);
        d.set_item("key", &r.key)?;
        d.set_item("label", r.class.map_or(-1, i64::from))?;
        d.set_item("class_name", r.class.and_then(|c| self.inner.class_name(c)))?;
        d.set_item("meta", PyBytes::new(py, &r.meta))?;
        d.set_item("width", r.width)?;
        d.set_item("height", r.height)?;
        d.set_item("channels", r.channels)?;
        d.set_item("dtype", if r.depth == 16 { "uint16" } else { "uint8" })?;
        d.set_item(
            "scheme",
            match r.scheme {
                LevelScheme::Flat => "flat",
                LevelScheme::Interlace => "interlace",
            },
        )?;
        d.set_item("shard", &self.inner.manifest().shards[s].file)?;
        d.set_item(
            "level_bytes",
            r.levels.iter().map(|l| l.len).collect::<Vec<u64>>(),
        )?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let m = self.inner.manifest();
        format!(
            "l3.Dataset({:?}: {} records, {} shards, {} levels, {} classes)",
            self.inner.dir(),
            m.records,
            m.shards.len(),
            m.levels,
            m.classes.len()
        )
    }
}

/// One record to pack: its planned index entry and where its pixels come from.
enum Source {
    Path(PathBuf),
    Array(OwnedImage),
}

/// A record argument of `write_shard`: `(key, source, label, meta)`.
type RecordArg<'py> = (
    String,
    Bound<'py, PyAny>,
    Option<i64>,
    Option<PyBackedBytes>,
);

/// Packs `records` into the shard file `path`: each a tuple `(key, source, label, meta)` where
/// `source` is an image file path or an image array, `label` an int or None, `meta` bytes or
/// None. Every record is encoded with `levels` levels and decoded back through each against its
/// pixels before the shard is written (atomically). A complete shard already at `path` with the
/// same records, built from image files whose size, time and contents and whose options are
/// unchanged (recorded in a `.pack.json` sidecar beside the shard), is kept (unless `force`),
/// so a rerun after a crash redoes only what is missing; a shard with an array among its
/// sources is always rebuilt (an array has no identity to compare). With `max_error` > 0 every stored sample is within it of the source (records are
/// then flat, and verified against the bound). Image files are read within `limits` (default
/// `l3.Limits()`: decoded size and dimensions checked before the pixels are allocated).
/// Returns `{"file", "records", "bytes", "written"}`.
#[pyfunction]
#[pyo3(signature = (path, records, levels = 1, profile = "compact", max_overhead = 1.25, force = false, max_error = 0, *, limits = None))]
#[allow(clippy::too_many_arguments)]
fn write_shard<'py>(
    py: Python<'py>,
    path: PathBuf,
    records: Vec<RecordArg<'py>>,
    levels: u8,
    profile: &str,
    max_overhead: f64,
    force: bool,
    max_error: u16,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<Bound<'py, PyDict>> {
    let limits = limits_of(limits.as_deref());
    let options = encode_options(profile, 64, max_error)?;
    if !(1..=8).contains(&levels) {
        return Err(parameter_error(format!(
            "levels must be 1..=8, got {levels}"
        )));
    }
    if max_overhead.is_nan() || max_overhead <= 0.0 {
        return Err(parameter_error("max_overhead must be a positive number"));
    }
    let progressive = ProgressiveOptions {
        levels,
        max_overhead,
    };
    let mut planned = Vec::with_capacity(records.len());
    let mut sources = Vec::with_capacity(records.len());
    for (key, source, label, meta) in &records {
        let class = match label {
            None => None,
            Some(l) => Some(
                u32::try_from(*l)
                    .ok()
                    .filter(|&c| c != u32::MAX)
                    .ok_or_else(|| {
                        parameter_error(format!("record {key:?}: label {l} is not in 0..2^32-1"))
                    })?,
            ),
        };
        planned.push(PlannedRecord {
            key: key.clone(),
            class,
            meta: meta.as_ref().map_or(Vec::new(), |m| m.to_vec()),
        });
        sources.push(match source.extract::<PathBuf>() {
            Ok(p) => Source::Path(p),
            Err(_) => Source::Array(image_from_array(source)?),
        });
    }
    // Files have an identity (size, time, CRC) the shard's sidecar records, so a rerun keeps
    // a shard only when its files and options are unchanged; arrays have none, so a shard
    // with an array among its sources is rebuilt on every call.
    let files: Option<Vec<PathBuf>> = sources
        .iter()
        .map(|s| match s {
            Source::Path(p) => Some(p.clone()),
            Source::Array(_) => None,
        })
        .collect();
    let class_names: Vec<Option<String>> = records
        .iter()
        .map(|(_, _, label, _)| label.map(|l| l.to_string()))
        .collect();
    let recorded_options = format!("levels {levels}; {progressive:?}; {options:?}");
    let build = |k: usize| {
        let loaded;
        let raw = match &sources[k] {
            Source::Path(p) => {
                loaded = read_image_within(p, &limits)?;
                l3::image_support::raw_image(&loaded)?
            }
            Source::Array(a) => a.raw(),
        };
        encode_record(&planned[k], &raw, &progressive, &options)
    };
    let (info, outcome) = py
        .detach(|| match &files {
            Some(files) => {
                let inputs = PackInputs {
                    options: recorded_options,
                    sources: files,
                    class_names: &class_names,
                };
                pack_shard_recorded(&path, &planned, levels, force, &inputs, build)
            }
            None => pack_shard(&path, &planned, levels, true, build),
        })
        .py_err()?;
    let d = PyDict::new(py);
    d.set_item("file", &info.file)?;
    d.set_item("records", info.records)?;
    d.set_item("bytes", info.bytes)?;
    d.set_item("written", outcome == ShardOutcome::Written)?;
    Ok(d)
}

/// Writes `manifest.json` in `output` over the shard files `shards` (names in `output`, in
/// dataset order), each read and checked (index, levels, record count, CRC recomputed), with
/// `classes` as the class names. The manifest is written last and atomically: a dataset is
/// complete when it exists. Each shard is read only if it is within `limits.max_input_bytes`
/// (default `l3.Limits()`: 4 GiB).
#[pyfunction]
#[pyo3(signature = (output, shards, classes = Vec::new(), levels = 1, *, limits = None))]
fn write_manifest(
    py: Python<'_>,
    output: PathBuf,
    shards: Vec<String>,
    classes: Vec<String>,
    levels: u8,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<()> {
    let limits = limits_of(limits.as_deref());
    py.detach(|| -> l3::Result<()> {
        let mut infos = Vec::with_capacity(shards.len());
        for name in &shards {
            // A plain file name in `output`, checked before anything is read.
            if std::path::Path::new(name).file_name() != Some(std::ffi::OsStr::new(name)) {
                return Err(l3::Error::Manifest(format!(
                    "shard file name {name:?} is not a plain file name in the output folder"
                )));
            }
            // The index and a streamed CRC-32: the shard is never held whole.
            let info = ShardInfo::of_file(&output, name, &limits)?;
            if info.level_bytes.len() != levels as usize {
                return Err(l3::Error::Manifest(format!(
                    "{name}: {} levels, the manifest is for {levels}",
                    info.level_bytes.len()
                )));
            }
            infos.push(info);
        }
        let manifest = Manifest {
            version: MANIFEST_VERSION,
            levels,
            classes,
            records: infos.iter().map(|s| s.records).sum(),
            shards: infos,
        };
        manifest.write(&output)?;
        // Read back through the same checks as every reader.
        l3::shard::Dataset::open_with_limits(&output, &limits).map(|_| ())
    })
    .map_err(to_py_err)
}
