//! The `l3._l3` extension module: the Rust side of the `l3` Python package. The package's
//! Python files (`python/l3/`) wrap it: `l3/__init__.py` re-exports the codec and dataset
//! functions, `l3/torch.py` builds the PyTorch dataset on [`loader::Loader`], and
//! `l3/_errors.py` defines the exception classes that [`to_py_err`] raises (defined in Python so
//! that each can also be a `ValueError`, `OSError` or `RuntimeError`).
//!
//! Every function that decodes, encodes or reads releases the GIL while it works.

use pyo3::prelude::*;

mod arrays;
mod blocks;
mod codec;
mod dataset;
mod fields;
#[cfg(unix)]
mod gpu_encode;
mod handoff;
mod loader;
mod tensors;

/// The exception class of `l3._errors` for an error: by its cause, looking through the
/// wrappers that only say where it happened (a record of a dataset, an image of a batch).
fn error_class(e: &l3::Error) -> &'static str {
    use l3::Error as E;
    match e {
        E::Format(_) | E::Shard(_) | E::Manifest(_) | E::Image(_) | E::Verification(_) => {
            "FormatError"
        }
        E::Limits(_) => "LimitsError",
        E::Parameter(_) => "ParameterError",
        E::Io(_) => "L3IOError",
        E::Gpu(_) => "GpuError",
        E::LoaderThread(_) => "LoaderError",
        E::InBatch { error, .. } | E::Record { error, .. } => error_class(error),
        _ => "L3Error",
    }
}

/// The Python exception for an l3 error: its `l3._errors` class (see [`error_class`]) with the
/// Rust error's message.
pub(crate) fn to_py_err(e: l3::Error) -> PyErr {
    py_error(error_class(&e), e.to_string())
}

/// An instance of `l3._errors.<class>` with `message`.
fn py_error(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("l3._errors")
            .and_then(|m| m.getattr(class))
            .and_then(|class| class.call1((message,)));
        match made {
            Ok(value) => PyErr::from_value(value),
            Err(err) => err,
        }
    })
}

/// A `ParameterError` (an argument is out of range or of the wrong kind) with `message`.
pub(crate) fn parameter_error(message: impl Into<String>) -> PyErr {
    py_error("ParameterError", message.into())
}

/// The value named `value` among `options` (a string option of a Python argument `name`), or
/// a `ParameterError` listing the choices.
pub(crate) fn choose<T: Copy>(name: &str, value: &str, options: &[(&str, T)]) -> PyResult<T> {
    options
        .iter()
        .find(|(n, _)| *n == value)
        .map(|&(_, v)| v)
        .ok_or_else(|| {
            let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
            parameter_error(format!(
                "{name} must be one of {}, got {value:?}",
                names.join(", ")
            ))
        })
}

/// Resource limits of a call (`l3.Limits`): every function that decodes or reads checks its
/// input against them before it allocates, and raises `LimitsError` beyond them. Unset fields
/// keep l3's defaults (dimensions up to the format's 16777215, 4 GiB decoded, 4 GiB read).
#[pyclass(module = "l3._l3", name = "Limits", frozen)]
#[derive(Clone, Copy)]
pub(crate) struct PyLimits {
    pub(crate) inner: l3::Limits,
}

#[pymethods]
impl PyLimits {
    #[new]
    #[pyo3(signature = (*, max_dimension = None, max_output_bytes = None, max_input_bytes = None))]
    fn new(
        max_dimension: Option<u32>,
        max_output_bytes: Option<u64>,
        max_input_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let mut inner = l3::Limits::default();
        if let Some(d) = max_dimension {
            if d == 0 || d > inner.max_dimension {
                return Err(parameter_error(format!(
                    "max_dimension must be 1..={}, got {d}",
                    inner.max_dimension
                )));
            }
            inner.max_dimension = d;
        }
        if let Some(b) = max_output_bytes {
            inner.max_output_bytes = b;
        }
        if let Some(b) = max_input_bytes {
            inner.max_input_bytes = b;
        }
        Ok(PyLimits { inner })
    }

    /// Largest width and height.
    #[getter]
    fn max_dimension(&self) -> u32 {
        self.inner.max_dimension
    }

    /// Largest decoded output of one call (an image, a batch array, a field), bytes.
    #[getter]
    fn max_output_bytes(&self) -> u64 {
        self.inner.max_output_bytes
    }

    /// Largest input (a file's bytes, a shard read), bytes.
    #[getter]
    fn max_input_bytes(&self) -> u64 {
        self.inner.max_input_bytes
    }

    fn __repr__(&self) -> String {
        format!(
            "l3.Limits(max_dimension={}, max_output_bytes={}, max_input_bytes={})",
            self.inner.max_dimension, self.inner.max_output_bytes, self.inner.max_input_bytes
        )
    }
}

/// The limits a call was given, or l3's defaults.
pub(crate) fn limits_of(limits: Option<&PyLimits>) -> l3::Limits {
    limits.map_or_else(l3::Limits::default, |l| l.inner)
}

/// The whole file at `path`, read only after its size is checked against `max_input_bytes`
/// (and never more than that many bytes, should it grow meanwhile).
pub(crate) fn read_limited(path: &std::path::Path, limits: &l3::Limits) -> l3::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let too_long = |len| {
        l3::Error::Limits(l3::LimitsError::InputBytes {
            len,
            max: limits.max_input_bytes,
        })
    };
    if len > limits.max_input_bytes {
        return Err(too_long(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limits.max_input_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limits.max_input_bytes {
        return Err(too_long(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Converts an l3 result.
pub(crate) trait OrPyErr<T> {
    fn py_err(self) -> PyResult<T>;
}

impl<T> OrPyErr<T> for l3::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}

#[pymodule]
fn _l3(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "IMAGE_EXTENSIONS",
        l3::shard::tree::IMAGE_EXTENSIONS.to_vec(),
    )?;
    m.add_class::<PyLimits>()?;
    codec::register(m)?;
    fields::register(m)?;
    blocks::register(m)?;
    #[cfg(unix)]
    gpu_encode::register(m)?;
    dataset::register(m)?;
    loader::register(m)?;
    handoff::register(m)?;
    tensors::register(m)?;
    Ok(())
}
