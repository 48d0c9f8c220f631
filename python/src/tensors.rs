//! Tensor datasets: `TensorDataset` (open a dataset of named arrays: length, records as dicts
//! of NumPy arrays, the declared arrays, their statistics, index entries), `TensorPacker`
//! (the Rust half of `l3.pack_arrays`: samples pushed one by one, each full shard encoded
//! on Rust threads without the GIL) and `dataset_kind`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList};

use l3::field::Bound as FieldBound;
use l3::shard::tensor_pack::{TensorPackOptions, TensorPacker, TensorSample};
use l3::shard::{RecordKind, TensorDataset};
use l3::tensor::{ArrayMode, ArrayOptions, BoundedFormat, DType, NdArray};

use crate::{limits_of, parameter_error, OrPyErr, PyLimits};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTensorDataset>()?;
    m.add_class::<PyTensorPacker>()?;
    m.add_function(wrap_pyfunction!(dataset_kind, m)?)?;
    Ok(())
}

/// The kind of the dataset in folder `path` (or at a URL): `"images"` or `"tensors"`.
#[pyfunction]
fn dataset_kind(path: PathBuf) -> PyResult<&'static str> {
    let kind = l3::store::Store::open(&path.to_string_lossy())
        .and_then(|s| l3::shard::dataset_kind_in(&s));
    Ok(match kind.py_err()? {
        RecordKind::Images => "images",
        RecordKind::Tensors => "tensors",
    })
}

/// `array` as a NumPy array (a copy): its dtype from the stored type (bfloat16 as `uint16`
/// bit patterns), its shape.
fn to_numpy<'py>(py: Python<'py>, array: &NdArray) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let buffer = PyByteArray::new(py, array.bytes());
    let flat = np.call_method1("frombuffer", (buffer, array.dtype().numpy_descr()))?;
    flat.call_method1("reshape", (array.shape().to_vec(),))
}

/// A tensor dataset (a folder of tensor shards and `manifest.json` of kind `"tensors"`),
/// opened for random access; every shard's index is read and checked against the manifest.
#[pyclass(module = "l3._l3", name = "TensorDataset", frozen)]
pub(crate) struct PyTensorDataset {
    pub(crate) inner: Arc<TensorDataset>,
}

impl PyTensorDataset {
    fn index(&self, i: i64) -> PyResult<u64> {
        crate::dataset::record_index(i, self.inner.len())
    }

    fn sample_index(&self, i: i64) -> PyResult<u64> {
        crate::dataset::record_index(i, self.inner.samples())
    }
}

#[pymethods]
impl PyTensorDataset {
    /// Opens the tensor dataset in folder `path`, every read and decoded array within
    /// `limits` (default `l3.Limits()`).
    #[new]
    #[pyo3(signature = (path, *, limits = None, index_cache = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        limits: Option<PyRef<'_, PyLimits>>,
        index_cache: Option<PathBuf>,
    ) -> PyResult<Self> {
        let inner =
            crate::dataset::open_kind(py, &path, limits.as_deref(), index_cache.as_deref())?;
        Ok(PyTensorDataset { inner })
    }

    /// Samples: the records, or a windowed dataset's samples (`window`).
    fn __len__(&self) -> usize {
        self.inner.samples() as usize
    }

    /// Sample `i`'s arrays as a dict of NumPy arrays, in order (float16 as `np.float16`,
    /// bfloat16 as `np.uint16` bit patterns): record `i`'s arrays, or with a window each
    /// array from the record that holds it.
    fn __getitem__<'py>(&self, py: Python<'py>, i: i64) -> PyResult<Bound<'py, PyDict>> {
        let j = self.sample_index(i)?;
        let inner = self.inner.clone();
        let arrays = py.detach(|| inner.read_sample(j)).py_err()?;
        let d = PyDict::new(py);
        for (name, a) in &arrays {
            d.set_item(name, to_numpy(py, a)?)?;
        }
        Ok(d)
    }

    /// The dataset's folder (a `pathlib.Path`), or its URL (a `str`).
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::dataset::location(py, self.inner.store())
    }

    /// The arrays every record holds: a list of dicts (name, dtype, shape, mode, bound as
    /// asked: `{"absolute": e}`, `{"relative": r}` or None, fill_bits).
    #[getter]
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for a in &self.inner.manifest().arrays {
            let d = PyDict::new(py);
            d.set_item("name", &a.name)?;
            d.set_item("dtype", &a.dtype)?;
            d.set_item("shape", pyo3::types::PyTuple::new(py, &a.shape)?)?;
            d.set_item("mode", &a.mode)?;
            let bound = match a.bound {
                None => None,
                Some(b) => {
                    let bd = PyDict::new(py);
                    match b {
                        FieldBound::Absolute(e) => bd.set_item("absolute", e)?,
                        FieldBound::Relative(r) => bd.set_item("relative", r)?,
                    }
                    Some(bd)
                }
            };
            d.set_item("bound", bound)?;
            d.set_item("fill_bits", a.fill_bits)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Records (steps of a windowed dataset; else `len()`).
    #[getter]
    fn records(&self) -> u64 {
        self.inner.len()
    }

    /// The sample window of a windowed dataset (manifest version 2): a list of dicts (name,
    /// array: the stored array it reads, offset: records after the sample's index), or None
    /// where a sample is a record.
    #[getter]
    fn window<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let Some(w) = &self.inner.manifest().window else {
            return Ok(None);
        };
        let list = PyList::empty(py);
        for a in &w.arrays {
            let d = PyDict::new(py);
            d.set_item("name", &a.name)?;
            d.set_item("array", &a.array)?;
            d.set_item("offset", a.offset)?;
            list.append(d)?;
        }
        Ok(Some(list))
    }

    /// Normalisation statistics per float array name: `{name: {"count", "mean", "std"}}`
    /// over the finite, non-fill source values (population standard deviation).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, s) in &self.inner.manifest().stats {
            let e = PyDict::new(py);
            e.set_item("count", s.count)?;
            e.set_item("mean", s.mean)?;
            e.set_item("std", s.std)?;
            d.set_item(name, e)?;
        }
        Ok(d)
    }

    /// Record `i`'s index entry: key, label (-1: none), metadata (bytes), shard, and per
    /// array its name, dtype, shape, mode, absolute bound (0 unless error-bounded),
    /// fill_bits (None without a fill value) and payload bytes.
    fn record<'py>(&self, py: Python<'py>, i: i64) -> PyResult<Bound<'py, PyDict>> {
        let j = self.index(i)?;
        let (s, _) = self.inner.locate(j).py_err()?;
        let e = self.inner.entry(j).py_err()?;
        let d = PyDict::new(py);
        d.set_item("key", &e.key)?;
        d.set_item("label", e.class.map_or(-1, i64::from))?;
        d.set_item("meta", PyBytes::new(py, &e.meta))?;
        d.set_item("shard", self.inner.shards()[s].name())?;
        let arrays = PyList::empty(py);
        for a in &e.arrays {
            let x = PyDict::new(py);
            x.set_item("name", &a.spec.name)?;
            x.set_item("dtype", a.spec.dtype.name())?;
            x.set_item("shape", pyo3::types::PyTuple::new(py, &a.spec.shape)?)?;
            x.set_item("mode", a.spec.mode.name())?;
            x.set_item("bound", a.spec.bound)?;
            x.set_item("fill_bits", a.spec.fill)?;
            x.set_item("bytes", a.payload.len)?;
            arrays.append(x)?;
        }
        d.set_item("arrays", arrays)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let m = self.inner.manifest();
        let names: Vec<&str> = m.arrays.iter().map(|a| a.name.as_str()).collect();
        format!(
            "l3.TensorDataset({:?}: {} records, {} shards, arrays {:?}{})",
            self.inner.dir(),
            m.records,
            m.shards.len(),
            names,
            m.window.as_ref().map_or(String::new(), |w| format!(
                ", {} samples over the records",
                w.samples
            ))
        )
    }
}

/// A mode as `l3.pack_arrays` passes it: `(kind, value, fill_value, format)` with kind
/// `"raw"`, `"lossless"`, `"absolute"` or `"relative"` and format `"v1"` or `"v3"` (of an
/// error-bounded array of 2 or 3 axes).
type ModeArg = (String, f64, Option<f64>, String);

fn mode_of(name: &str, m: &ModeArg) -> PyResult<ArrayOptions> {
    let mode = match m.0.as_str() {
        "raw" => ArrayMode::Raw,
        "lossless" => ArrayMode::Lossless,
        "absolute" => ArrayMode::Bounded(FieldBound::Absolute(m.1)),
        "relative" => ArrayMode::Bounded(FieldBound::Relative(m.1)),
        other => {
            return Err(parameter_error(format!(
                "mode of {name}: {other:?} is not \"raw\", \"lossless\", absolute or relative"
            )))
        }
    };
    if matches!(mode, ArrayMode::Bounded(_)) && !(m.1.is_finite() && m.1 > 0.0) {
        return Err(parameter_error(format!(
            "mode of {name}: the bound must be finite and positive, got {}",
            m.1
        )));
    }
    let format = match m.3.as_str() {
        "v1" => BoundedFormat::V1,
        "v3" => BoundedFormat::V3,
        other => {
            return Err(parameter_error(format!(
                "mode of {name}: format {other:?} is not \"v1\" or \"v3\""
            )))
        }
    };
    Ok(ArrayOptions {
        mode,
        fill_value: m.2,
        format,
    })
}

/// One array of a sample as `l3.pack_arrays` passes it: `(name, dtype name, shape, bytes)`
/// (C order, little-endian).
type ArrayArg = (String, String, Vec<u32>, PyBackedBytes);

/// An array's name, dtype name and shape.
type Described = (String, String, Vec<u32>);

/// The Rust half of `l3.pack_arrays`: see its docstring.
#[pyclass(module = "l3._l3", name = "TensorPacker", frozen)]
pub(crate) struct PyTensorPacker {
    inner: Mutex<Option<TensorPacker>>,
    /// The first sample's arrays: name, dtype, shape.
    first: Mutex<Option<Vec<Described>>>,
    max_array_bytes: u64,
}

#[pymethods]
impl PyTensorPacker {
    #[new]
    #[pyo3(signature = (out, default_mode, modes, samples_per_shard, force, limits = None, window = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        out: PathBuf,
        default_mode: ModeArg,
        modes: BTreeMap<String, ModeArg>,
        samples_per_shard: usize,
        force: bool,
        limits: Option<PyRef<'_, PyLimits>>,
        window: Option<Vec<(String, String, u64)>>,
    ) -> PyResult<Self> {
        if samples_per_shard == 0 {
            return Err(parameter_error("samples_per_shard must be at least 1"));
        }
        let mut options = TensorPackOptions::new(samples_per_shard, ArrayMode::Lossless);
        options.force = force;
        options.default_mode = mode_of("every array", &default_mode)?;
        options.window = window.unwrap_or_default();
        for (name, m) in &modes {
            options
                .modes
                .insert(name.clone(), mode_of(&format!("{name:?}"), m)?);
        }
        let packer = TensorPacker::new(&out, options).py_err()?;
        Ok(PyTensorPacker {
            inner: Mutex::new(Some(packer)),
            first: Mutex::new(None),
            max_array_bytes: limits_of(limits.as_deref()).max_output_bytes,
        })
    }

    /// Adds sample `index` (its arrays, key and label); a full shard is encoded and written
    /// (or kept) without the GIL. A sample whose arrays differ from the first's is refused,
    /// naming the sample and the array.
    #[pyo3(signature = (index, arrays, key = None, label = None))]
    fn push(
        &self,
        py: Python<'_>,
        index: u64,
        arrays: Vec<ArrayArg>,
        key: Option<String>,
        label: Option<i64>,
    ) -> PyResult<()> {
        let described: Vec<Described> = arrays
            .iter()
            .map(|(n, d, s, _)| (n.clone(), d.clone(), s.clone()))
            .collect();
        {
            let mut first = self.first.lock().expect("not poisoned");
            match first.as_ref() {
                None => *first = Some(described.clone()),
                Some(f) => check_like_first(index, f, &described)?,
            }
        }
        let class = match label {
            None => None,
            Some(l) if (0..u32::MAX as i64).contains(&l) => Some(l as u32),
            Some(l) => {
                return Err(parameter_error(format!(
                    "sample {index}: label {l} is not 0..=4294967294"
                )))
            }
        };
        let mut nd = Vec::with_capacity(arrays.len());
        for (name, dtype, shape, bytes) in arrays {
            let t = DType::from_name(&dtype).ok_or_else(|| {
                parameter_error(format!(
                    "sample {index}: array {name:?} has dtype {dtype}, which l3 does not store"
                ))
            })?;
            if bytes.len() as u64 > self.max_array_bytes {
                return Err(parameter_error(format!(
                    "sample {index}: array {name:?} is {} bytes, above limits.max_output_bytes \
                     ({}): it could not be read back within these limits",
                    bytes.len(),
                    self.max_array_bytes
                )));
            }
            let a = NdArray::new(t, shape, bytes.to_vec()).py_err()?;
            nd.push((name, a));
        }
        let sample = TensorSample {
            key,
            class,
            meta: Vec::new(),
            arrays: nd,
        };
        py.detach(|| {
            let mut guard = self.inner.lock().expect("not poisoned");
            let packer = guard.as_mut().ok_or_else(|| {
                l3::Error::Parameter(l3::ParameterError::InvalidOption {
                    name: "packer",
                    value: 0,
                    reason: "finished already",
                })
            })?;
            packer.push(sample)
        })
        .py_err()
    }

    /// Writes the last shard and the manifest; returns `{"records", "shards", "bytes",
    /// "written", "kept"}`.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let packer = self
            .inner
            .lock()
            .expect("not poisoned")
            .take()
            .ok_or_else(|| parameter_error("the packer has finished already"))?;
        let s = py.detach(|| packer.finish()).py_err()?;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("shards", s.shards)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("written", s.written)?;
        d.set_item("kept", s.kept)?;
        Ok(d)
    }
}

/// A `ParameterError` naming the first way sample `index`'s arrays differ from the first's.
fn check_like_first(index: u64, first: &[Described], got: &[Described]) -> PyResult<()> {
    let names = |v: &[Described]| {
        let mut n: Vec<String> = v.iter().map(|a| a.0.clone()).collect();
        n.sort();
        n
    };
    if names(first) != names(got) {
        return Err(parameter_error(format!(
            "sample {index} has arrays {:?}, the first sample has {:?}",
            names(got),
            names(first)
        )));
    }
    for (name, dtype, shape) in got {
        let (_, d0, s0) = first.iter().find(|a| a.0 == *name).expect("same names");
        if shape != s0 || dtype != d0 {
            return Err(parameter_error(format!(
                "sample {index}: array {name:?} has shape {shape:?} and dtype {dtype}, the \
                 first sample's has shape {s0:?} and dtype {d0}"
            )));
        }
    }
    Ok(())
}
