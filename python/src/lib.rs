//! The `l3._l3` extension module: the Rust side of the `l3` Python package. The package's
//! Python files (`python/l3/`) wrap it: `l3/__init__.py` re-exports the codec and dataset
//! functions, `l3/torch.py` builds the PyTorch dataset on [`loader::Loader`], and
//! `l3/_errors.py` defines the exception classes that [`to_py_err`] raises (defined in Python so
//! that each can also be a `ValueError`, `OSError` or `RuntimeError`).
//!
//! Every function that decodes, encodes or reads releases the GIL while it works.

use pyo3::prelude::*;

mod arrays;
mod codec;
mod dataset;
mod loader;

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
    codec::register(m)?;
    dataset::register(m)?;
    loader::register(m)?;
    Ok(())
}
