//! Float fields: `encode_field` (error-bounded: version 3 of 1 to 4 axes by default, or
//! `version=1` of 2 or 3 axes; or `lossless=True` for float32, float16 and bfloat16 arrays of 1 to 4 axes),
//! `decode_field` (any version, the stored dtype back; bfloat16 as uint16 bit patterns) and
//! `field_info` (the header, with its "mode").

use numpy::{PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use l3::decode::DecodeOptions;
use l3::field::Bound as FieldBound;
use l3::field::{FloatSlice, FloatType, FloatVec, BOUNDED_VERSION, LOSSLESS_VERSION};

use crate::codec::{bytes_of, encode_options};
use crate::{limits_of, parameter_error, to_py_err, OrPyErr, PyLimits};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_field, m)?)?;
    m.add_function(wrap_pyfunction!(decode_field, m)?)?;
    m.add_function(wrap_pyfunction!(field_info, m)?)?;
    m.add_function(wrap_pyfunction!(parse_bound, m)?)?;
    Ok(())
}

/// An error bound as Python spells it everywhere (`encode_field(bound=)`, the zarr and
/// numcodecs codecs' `bound`, `pack_arrays`' modes, `compress_activations`): `{"absolute": e}`
/// or `{"relative": r}` (a fraction of the values' range), the number finite and positive. A
/// wrong type is a `TypeError`, a wrong key or value a `ParameterError`.
pub(crate) fn bound_from_py(obj: &Bound<'_, PyAny>) -> PyResult<FieldBound> {
    let dict = obj.cast::<PyDict>().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "a bound is {{\"absolute\": e}} or {{\"relative\": r}}, got {}",
            obj.repr().map_or_else(|_| "?".into(), |r| r.to_string())
        ))
    })?;
    if dict.len() != 1 {
        return Err(parameter_error(
            "a bound has exactly one key: \"absolute\" or \"relative\"",
        ));
    }
    let (key, value) = dict.iter().next().expect("one item");
    let key: String = key
        .extract()
        .map_err(|_| pyo3::exceptions::PyTypeError::new_err("a bound's key is a str"))?;
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "a bound's value is a number, not a bool",
        ));
    }
    let v: f64 = value
        .extract()
        .map_err(|_| pyo3::exceptions::PyTypeError::new_err("a bound's value is a number"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(parameter_error(format!(
            "a bound must be finite and positive, got {v}"
        )));
    }
    match key.as_str() {
        "absolute" => Ok(FieldBound::Absolute(v)),
        "relative" => Ok(FieldBound::Relative(v)),
        other => Err(parameter_error(format!(
            "a bound's key is \"absolute\" or \"relative\", got {other:?}"
        ))),
    }
}

/// The bound of `encode_field`: `bound` (the one spelling) or its aliases `max_error`
/// (absolute) and `relative`, exactly one of them.
fn bound_of(
    bound: Option<&Bound<'_, PyAny>>,
    max_error: Option<f64>,
    relative: Option<f64>,
) -> PyResult<FieldBound> {
    match (bound, max_error, relative) {
        (Some(b), None, None) => bound_from_py(b),
        (None, Some(e), None) => Ok(FieldBound::Absolute(e)),
        (None, None, Some(r)) => Ok(FieldBound::Relative(r)),
        _ => Err(parameter_error(
            "give exactly one of bound ({\"absolute\": e} or {\"relative\": r}), max_error \
             (absolute) and relative (fraction of the range), or lossless=True",
        )),
    }
}

/// `bound` in the one spelling, checked: `("absolute" | "relative", value)` (for the Python
/// modules that take a bound: codecs, activations).
#[pyfunction]
fn parse_bound(bound: &Bound<'_, PyAny>) -> PyResult<(&'static str, f64)> {
    Ok(match bound_from_py(bound)? {
        FieldBound::Absolute(e) => ("absolute", e),
        FieldBound::Relative(r) => ("relative", r),
    })
}

pub(crate) fn shape_of(shape: &[usize]) -> PyResult<Vec<u32>> {
    shape
        .iter()
        .map(|&d| u32::try_from(d).map_err(|_| parameter_error("dimension too large")))
        .collect()
}

/// Encodes a float array. Error-bounded (a float32 array within an absolute `max_error` or
/// value-range-relative `relative` bound; NaN, infinities and `fill_value` kept exactly):
/// version 3 (default: 1 to 4 axes, the smaller file) or `version=1` (2 or 3 axes, the bins
/// as an L3 image of `profile`, default "compact"; decodes faster on the CPU); both decode on
/// the GPU too. With `lossless=True` bit for bit: float32, float16, or
/// bfloat16 given as a uint16 array of bit patterns with `dtype="bfloat16"` (or an array
/// whose dtype is named "bfloat16", e.g. ml_dtypes'), 1 to 4 axes. Version 3 also takes
/// `predictor` ("lattice" or "differences"; default: the smaller file) and `axes` (the
/// differences predictor's axis set, bit a = axis a; default: by an estimate). A bound too
/// fine for the format's bins (more than 65536 over the range, or below the smallest normal
/// bin width, or relative over an array without range) is honoured by storing the array
/// exactly: a lossless file (`field_info(...)["mode"] == "lossless"`), never an error.
#[pyfunction]
#[pyo3(signature = (array, *, bound = None, max_error = None, relative = None, fill_value = None, profile = None, lossless = false, dtype = None, version = None, predictor = None, axes = None))]
#[allow(clippy::too_many_arguments)]
fn encode_field<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    bound: Option<&Bound<'py, PyAny>>,
    max_error: Option<f64>,
    relative: Option<f64>,
    fill_value: Option<f64>,
    profile: Option<&str>,
    lossless: bool,
    dtype: Option<&str>,
    version: Option<u8>,
    predictor: Option<&str>,
    axes: Option<u8>,
) -> PyResult<Bound<'py, PyBytes>> {
    if lossless {
        if bound.is_some()
            || max_error.is_some()
            || relative.is_some()
            || version.is_some()
            || profile.is_some()
            || predictor.is_some()
            || axes.is_some()
        {
            return Err(parameter_error(
                "lossless=True takes no bound, max_error, relative, version, profile, \
                 predictor or axes",
            ));
        }
        return encode_lossless(py, array, fill_value, dtype);
    }
    if (predictor.is_some() || axes.is_some()) && version == Some(1) {
        return Err(parameter_error("predictor and axes are for version 3"));
    }
    if profile.is_some() && version != Some(1) {
        return Err(parameter_error(
            "profile is for version=1 (the bins as an L3 image); the default is version 3",
        ));
    }
    match version {
        Some(1) => {}
        None | Some(3) => {
            if dtype.is_some() {
                return Err(parameter_error("dtype is for lossless=True"));
            }
            let predictor = match predictor {
                None => None,
                Some("lattice") => Some(l3::field::Predictor::Lattice),
                Some("differences") => Some(l3::field::Predictor::Differences),
                Some(p) => {
                    return Err(parameter_error(format!(
                        "predictor must be \"lattice\" or \"differences\", got {p:?}"
                    )))
                }
            };
            let bound = bound_of(bound, max_error, relative)?;
            return encode_bounded(py, array, bound, fill_value, predictor, axes);
        }
        Some(v) => {
            return Err(parameter_error(format!(
                "version must be 1 or 3 (lossless=True writes version 2), got {v}"
            )))
        }
    }
    if dtype.is_some() {
        return Err(parameter_error("dtype is for lossless=True"));
    }
    use l3::field::FieldOptions;
    let bound = bound_of(bound, max_error, relative)?;
    let np = py.import("numpy")?;
    let contiguous = np.call_method1("ascontiguousarray", (array,))?;
    let a = contiguous.cast::<PyArrayDyn<f32>>().map_err(|_| {
        parameter_error("expected a float32 array (native byte order) of 2 or 3 dimensions")
    })?;
    let shape = shape_of(a.shape())?;
    let values = a.readonly().as_slice()?.to_vec();
    let mut options = FieldOptions::new(bound);
    options.fill_value = fill_value.map(|f| f as f32);
    // The profile chosen, with the field default's patch size.
    let profile = profile.unwrap_or("compact");
    options.image = encode_options(profile, 1 << options.image.patch_log2, 0)?;
    let file = py
        .detach(|| l3::field::encode_field(&values, &shape, &options))
        .py_err()?;
    Ok(PyBytes::new(py, &file))
}

/// `encode_field` error-bounded, version 3 (the default): a float32 array of 1 to 4 axes; a relative bound is that
/// fraction of the regular values' range (max - min of the finite, non-fill values).
fn encode_bounded<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    bound: FieldBound,
    fill_value: Option<f64>,
    predictor: Option<l3::field::Predictor>,
    axes: Option<u8>,
) -> PyResult<Bound<'py, PyBytes>> {
    let np = py.import("numpy")?;
    let contiguous = np.call_method1("ascontiguousarray", (array,))?;
    let a = contiguous.cast::<PyArrayDyn<f32>>().map_err(|_| {
        parameter_error("expected a float32 array (native byte order) of 1 to 4 axes")
    })?;
    let shape = shape_of(a.shape())?;
    let ro = a.readonly();
    let values = ro.as_slice()?;
    let fill = fill_value.map(|f| f as f32);
    let options = l3::field::BoundedOptions {
        fill_value: fill,
        predictor,
        axes,
        ..l3::field::BoundedOptions::new(bound)
    };
    let file = py
        .detach(|| l3::field::encode_bounded(values, &shape, &options))
        .py_err()?;
    Ok(PyBytes::new(py, &file))
}

/// The fill value's bit pattern in `dtype`: exact, or an error.
fn fill_bits(fill: f64, dtype: FloatType) -> PyResult<u32> {
    let f = fill as f32;
    if f as f64 != fill && !fill.is_nan() {
        return Err(parameter_error("fill_value is not exact in float32"));
    }
    match dtype {
        FloatType::F32 => Ok(f.to_bits()),
        FloatType::BF16 if f.to_bits() & 0xffff == 0 => Ok(f.to_bits() >> 16),
        FloatType::F16 => {
            let h = half_bits(f)
                .ok_or_else(|| parameter_error("fill_value is not exact in float16"))?;
            Ok(h as u32)
        }
        _ => Err(parameter_error("fill_value is not exact in bfloat16")),
    }
}

/// The float16 bits of `f` when `f` is exactly a float16 (NaN: the quiet NaN of its sign).
fn half_bits(f: f32) -> Option<u16> {
    let b = f.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    if f.is_nan() {
        return Some(sign | 0x7e00);
    }
    if f.is_infinite() {
        return Some(sign | 0x7c00);
    }
    if f == 0.0 {
        return Some(sign);
    }
    let a = f.abs() as f64;
    // Normal: 2^-14 ..= 65504, 11 significant bits; subnormal: multiples of 2^-24.
    let units = a * (1u64 << 24) as f64;
    if a < 2f64.powi(-14) {
        return (units.fract() == 0.0).then_some(sign | units as u16);
    }
    let e = a.log2().floor() as i32;
    let m = a / 2f64.powi(e) * 1024.0 - 1024.0;
    (e <= 15 && m.fract() == 0.0).then(|| sign | (((e + 15) as u16) << 10) | m as u16)
}

fn encode_lossless<'py>(
    py: Python<'py>,
    array: &Bound<'py, PyAny>,
    fill_value: Option<f64>,
    dtype: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let np = py.import("numpy")?;
    let mut arr = np.call_method1("ascontiguousarray", (array,))?;
    let name: String = arr.getattr("dtype")?.getattr("name")?.extract()?;
    let kind = match (dtype, name.as_str()) {
        (None | Some("float32"), "float32") => FloatType::F32,
        (None | Some("float16"), "float16") => FloatType::F16,
        (Some("bfloat16"), "uint16") => FloatType::BF16,
        (None | Some("bfloat16"), "bfloat16") => {
            arr = arr.call_method1("view", (np.getattr("uint16")?,))?;
            FloatType::BF16
        }
        _ => {
            return Err(parameter_error(format!(
                "lossless fields take float32, float16, or bfloat16 (uint16 bits with dtype=\"bfloat16\"); got {name} with dtype={dtype:?}"
            )))
        }
    };
    let options = l3::field::LosslessOptions {
        fill_value: fill_value.map(|f| fill_bits(f, kind)).transpose()?,
        ..Default::default()
    };
    let file = match kind {
        FloatType::F32 => {
            let a = arr
                .cast::<PyArrayDyn<f32>>()
                .map_err(|_| parameter_error("float32 array in native byte order"))?;
            let shape = shape_of(a.shape())?;
            let ro = a.readonly();
            let v = ro.as_slice()?;
            py.detach(|| l3::field::encode_lossless(FloatSlice::F32(v), &shape, &options))
        }
        _ => {
            let a = arr
                .call_method1("view", (np.getattr("uint16")?,))?
                .cast_into::<PyArrayDyn<u16>>()
                .map_err(|_| parameter_error("16-bit array in native byte order"))?;
            let shape = shape_of(a.shape())?;
            let ro = a.readonly();
            let v = ro.as_slice()?;
            let s = if kind == FloatType::F16 {
                FloatSlice::F16(v)
            } else {
                FloatSlice::BF16(v)
            };
            py.detach(|| l3::field::encode_lossless(s, &shape, &options))
        }
    }
    .py_err()?;
    Ok(PyBytes::new(py, &file))
}

/// Decodes a field file into an array of its shape: float32 for error-bounded fields; the
/// stored dtype for lossless ones (float32, float16, or bfloat16 as uint16 bit patterns),
/// within `limits` (default `l3.Limits()`).
#[pyfunction]
#[pyo3(signature = (data, *, limits = None))]
fn decode_field<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    limits: Option<PyRef<'_, PyLimits>>,
) -> PyResult<Bound<'py, PyAny>> {
    let bytes = bytes_of(data)?;
    let options = DecodeOptions {
        limits: limits_of(limits.as_deref()),
        ..DecodeOptions::default()
    };
    let (h, values) = py
        .detach(|| l3::field::decode_float_array(&bytes, &options))
        .py_err()?;
    let shape: Vec<usize> = h.shape().iter().map(|&d| d as usize).collect();
    Ok(match values {
        FloatVec::F32(v) => numpy::PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
        FloatVec::F16(v) => numpy::PyArray1::from_vec(py, v)
            .reshape(shape)?
            .call_method1("view", (py.import("numpy")?.getattr("float16")?,))?,
        FloatVec::BF16(v) => numpy::PyArray1::from_vec(py, v).reshape(shape)?.into_any(),
    })
}

/// A field file's header. Error-bounded: mode "error_bounded", version (1 or 3), shape,
/// max_error (absolute), offset, fill_value, exception_runs; version 1 also bin_width;
/// version 3 also predictor ("lattice" or "differences"), unit (lattice unit or bin width),
/// axes (lattice: the axis order; differences: bit a = axis a differenced), chunks,
/// chunk_values, segments. Lossless: mode "lossless", shape, dtype,
/// fill_value (the dtype's bit pattern, or None), float_mult_base, value_table (entries of
/// the value table, 0 without), axes (differenced, bit a = axis a), axes2 (differenced a
/// second time), chunks, chunk_values, segments, exception_runs.
#[pyfunction]
fn field_info<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
    let bytes = bytes_of(data)?;
    let d = PyDict::new(py);
    if l3::field::field_version(&bytes) == Some(LOSSLESS_VERSION) {
        let h = l3::field::parse_lossless(&bytes).map_err(to_py_err)?;
        d.set_item("mode", "lossless")?;
        d.set_item("shape", pyo3::types::PyTuple::new(py, &h.shape)?)?;
        d.set_item("dtype", h.dtype.name())?;
        d.set_item("fill_value", h.fill_value)?;
        d.set_item("float_mult_base", h.mult_base)?;
        d.set_item("value_table", h.table.len())?;
        d.set_item("axes", h.axes)?;
        d.set_item("axes2", h.axes2)?;
        d.set_item("chunks", h.chunks())?;
        d.set_item("chunk_values", 1u64 << h.chunk_log2)?;
        d.set_item("segments", h.segments)?;
        d.set_item("exception_runs", h.runs)?;
        return Ok(d);
    }
    if l3::field::field_version(&bytes) == Some(BOUNDED_VERSION) {
        let h = l3::field::parse_bounded(&bytes).map_err(to_py_err)?;
        d.set_item("mode", "error_bounded")?;
        d.set_item("version", BOUNDED_VERSION)?;
        d.set_item("shape", pyo3::types::PyTuple::new(py, &h.shape)?)?;
        d.set_item("max_error", h.bound)?;
        d.set_item("offset", h.offset)?;
        d.set_item("fill_value", h.fill_value)?;
        d.set_item("exception_runs", h.runs)?;
        let axes: Vec<u32> = h.axes.iter().map(|&a| a as u32).collect();
        let predictor = match h.predictor {
            l3::field::Predictor::Lattice => "lattice",
            l3::field::Predictor::Differences => "differences",
        };
        d.set_item("predictor", predictor)?;
        d.set_item("unit", h.unit)?;
        d.set_item("axes", axes)?;
        d.set_item("chunks", h.chunks())?;
        d.set_item("chunk_values", 1u64 << h.chunk_log2)?;
        d.set_item("segments", h.segments)?;
        return Ok(d);
    }
    let h = l3::field::FieldHeader::parse(&bytes).map_err(|e| to_py_err(e.into()))?;
    d.set_item("mode", "error_bounded")?;
    d.set_item("version", 1)?;
    d.set_item("shape", pyo3::types::PyTuple::new(py, h.dims())?)?;
    d.set_item("max_error", h.bound)?;
    d.set_item("bin_width", h.bin_width)?;
    d.set_item("offset", h.offset)?;
    d.set_item("fill_value", h.fill_value)?;
    d.set_item("exception_runs", h.runs)?;
    Ok(d)
}
