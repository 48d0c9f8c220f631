//! One array to its payload and back: raw (the bytes), error-bounded (a float32 `.l3f`
//! field: for 2 or 3 axes version 1 by default or version 3 ([`BoundedFormat`]), version 3
//! for 1 or 4; both decode on the CPU and the GPU) and
//! lossless (a `.l3f` version 2 field of a float32, float16 or bfloat16
//! array; other types are stored raw). A payload whose header disagrees
//! with its index entry is a [`FormatError`], never a wrong array.

use super::model::{ArraySpec, DType, NdArray, StorageMode};
use crate::decode::DecodeOptions;
use crate::error::invalid_option;
use crate::error::{Error, FormatError, LimitsError, ParameterError, Result};
use crate::field::{
    decode_bounded, encode_bounded, field_version, parse_bounded, parse_lossless, regular_range,
    Bound, BoundedOptions, FieldHeader, FieldOptions, FloatSlice, FloatType, FloatVec,
    LosslessOptions, BOUNDED_VERSION, FIELD_VERSION, LOSSLESS_VERSION,
};

/// How an array is to be stored, as a packer asks for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArrayMode {
    /// The elements' bytes.
    Raw,
    /// Lossless: a lossless float field for float32, float16 and bfloat16 arrays, the bytes
    /// for the others (float64 and integers).
    Lossless,
    /// Error-bounded (float32 arrays); a relative bound is a fraction of each array's value
    /// range (max - min over its finite, non-fill values; an array with no range is stored
    /// exactly). A bound too fine for the field formats' bins stores the array as a lossless
    /// float field, and its entry says [`StorageMode::Lossless`].
    Bounded(Bound),
}

/// The `.l3f` format of an error-bounded array of 2 or 3 axes (arrays of 1 or 4 axes are
/// always version 3). Both decode on the CPU and the GPU, bit for bit alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundedFormat {
    /// Version 1 (the bins as an L3 image; the default): decodes about 3x faster on the CPU
    /// than version 3, and a window decodes only the bin-image patches it needs.
    #[default]
    V1,
    /// Version 3 (lattice interpolation or differences): the smaller file, 1.2-5x smaller
    /// than version 1 on smooth fields at relative bounds of 1e-3 to 1e-2; encodes and
    /// decodes slower (BENCHMARKS.md, "Tensor records").
    V3,
}

/// What [`encode_array`] does with one array.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrayOptions {
    /// The mode.
    pub mode: ArrayMode,
    /// A fill value (missing data): it must be exact in the array's type; excluded from the
    /// statistics and, error-bounded, stored exactly.
    pub fill_value: Option<f64>,
    /// The format of an error-bounded array of 2 or 3 axes (ignored by the other modes).
    pub format: BoundedFormat,
}

impl ArrayOptions {
    /// `mode`, no fill value, error-bounded arrays of 2 or 3 axes in the default format.
    pub fn new(mode: ArrayMode) -> Self {
        ArrayOptions {
            mode,
            fill_value: None,
            format: BoundedFormat::default(),
        }
    }

    /// The storage mode this gives an array of `dtype`.
    pub fn storage(&self, dtype: DType) -> StorageMode {
        match self.mode {
            ArrayMode::Raw => StorageMode::Raw,
            ArrayMode::Lossless if float_type(dtype).is_some() => StorageMode::Lossless,
            ArrayMode::Lossless => StorageMode::Raw,
            ArrayMode::Bounded(_) => StorageMode::ErrorBounded,
        }
    }
}

/// An array encoded: its index entry's fields and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedArray {
    /// What the index says of it.
    pub spec: ArraySpec,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Encodes `array` named `name` as `options` asks.
pub fn encode_array(name: &str, array: &NdArray, options: &ArrayOptions) -> Result<EncodedArray> {
    super::check_name(name).map_err(|reason| invalid_option("name", name.len() as u64, reason))?;
    let dtype = array.dtype();
    let fill = match options.fill_value {
        None => None,
        Some(v) => Some(
            dtype
                .bits_of(v)
                .ok_or_else(|| ParameterError::InvalidFloat {
                    name: "fill_value",
                    value_bits: v.to_bits(),
                    reason: "not exactly a value of the array's type",
                })?,
        ),
    };
    let mode = options.storage(dtype);
    let mut spec = ArraySpec {
        name: name.to_owned(),
        dtype,
        shape: array.shape().to_vec(),
        mode,
        bound: 0.0,
        fill,
    };
    let payload = match mode {
        StorageMode::Raw => array.bytes().to_vec(),
        StorageMode::Lossless => encode_lossless(array, fill)?,
        StorageMode::ErrorBounded => {
            let values = array.to_f32().ok_or_else(|| {
                invalid_option(
                    "mode",
                    dtype as u64,
                    "error-bounded arrays are float32 (store others lossless or raw)",
                )
            })?;
            let fill_value = fill.map(|b| f32::from_bits(b as u32));
            let bound = match options.mode {
                ArrayMode::Bounded(Bound::Absolute(e)) => Bound::Absolute(e),
                ArrayMode::Bounded(Bound::Relative(r)) => {
                    if !(r.is_finite() && r > 0.0) {
                        return Err(ParameterError::InvalidFloat {
                            name: "relative bound",
                            value_bits: r.to_bits(),
                            reason: "must be finite and positive",
                        }
                        .into());
                    }
                    // An array without a range (constant, or no regular value) is exact
                    // with the smallest bound the field format takes.
                    if regular_range(&values, fill_value) > 0.0 {
                        Bound::Relative(r)
                    } else {
                        Bound::Absolute(f32::MIN_POSITIVE as f64)
                    }
                }
                _ => unreachable!("the error-bounded modes"),
            };
            if matches!(array.shape().len(), 2 | 3) && options.format == BoundedFormat::V1 {
                let field = crate::field::encode_field(
                    &values,
                    array.shape(),
                    &FieldOptions {
                        fill_value,
                        ..FieldOptions::new(bound)
                    },
                )?;
                if field_version(&field) == Some(LOSSLESS_VERSION) {
                    // A bound too fine for the bins: stored exactly, and the index says so.
                    spec.mode = StorageMode::Lossless;
                } else {
                    spec.bound = FieldHeader::parse(&field)?.bound;
                }
                field
            } else {
                let field = encode_bounded(
                    &values,
                    array.shape(),
                    &BoundedOptions {
                        fill_value,
                        ..BoundedOptions::new(bound)
                    },
                )?;
                if field_version(&field) == Some(LOSSLESS_VERSION) {
                    spec.mode = StorageMode::Lossless;
                } else {
                    spec.bound = parse_bounded(&field)?.bound;
                }
                field
            }
        }
    };
    Ok(EncodedArray { spec, payload })
}

/// Checks that `payload`'s own header agrees with `spec` (without decoding it): a raw payload
/// has exactly the array's bytes; a field's header has its shape, bound and fill value.
pub fn check_payload(spec: &ArraySpec, payload: &[u8]) -> Result<()> {
    let disagree = |field, value: u64, reason| -> Error {
        FormatError::InvalidHeader {
            field,
            offset: 0,
            value,
            reason,
        }
        .into()
    };
    match spec.mode {
        StorageMode::Raw => {
            if payload.len() as u64 != spec.byte_len() {
                return Err(disagree(
                    "raw array bytes",
                    payload.len() as u64,
                    "a raw payload holds exactly the array's elements",
                ));
            }
        }
        StorageMode::Lossless => check_lossless(spec, payload)?,
        StorageMode::ErrorBounded => {
            let version = field_version(payload);
            let allowed = version == Some(BOUNDED_VERSION)
                || (version == Some(FIELD_VERSION) && matches!(spec.shape.len(), 2 | 3));
            if !allowed {
                return Err(disagree(
                    "field version",
                    version.unwrap_or(0) as u64,
                    "an error-bounded array of 2 or 3 axes is a .l3f version 1 or 3 file, of 1 \
                     or 4 axes version 3",
                ));
            }
            let (dims, bound, fill) = match field_version(payload) {
                Some(FIELD_VERSION) => {
                    let h = FieldHeader::parse(payload)?;
                    (h.dims().to_vec(), h.bound, h.fill_value)
                }
                Some(BOUNDED_VERSION) => {
                    let h = parse_bounded(payload)?;
                    (h.shape, h.bound, h.fill_value)
                }
                v => {
                    return Err(disagree(
                        "field version",
                        v.unwrap_or(0) as u64,
                        "an error-bounded payload is a .l3f file of version 1 or 3",
                    ))
                }
            };
            if spec.dtype != DType::Float32 {
                return Err(disagree(
                    "dtype",
                    spec.dtype as u64,
                    "an error-bounded field holds float32",
                ));
            }
            if dims.as_slice() != spec.shape.as_slice() {
                return Err(disagree(
                    "field shape",
                    dims.iter().map(|&d| d as u64).product(),
                    "the field's shape is not the index entry's",
                ));
            }
            if bound.to_bits() != spec.bound.to_bits() {
                return Err(disagree(
                    "field bound",
                    bound.to_bits(),
                    "the field's bound is not the index entry's",
                ));
            }
            if fill.map(|f| f.to_bits() as u64) != spec.fill {
                return Err(disagree(
                    "field fill value",
                    fill.map_or(0, |f| f.to_bits() as u64),
                    "the field's fill value is not the index entry's",
                ));
            }
        }
    }
    Ok(())
}

/// Decodes `payload` as the array `spec` describes: its header checked against `spec` first
/// ([`check_payload`]), the array's bytes against `options.limits.max_output_bytes` before
/// anything is allocated.
pub fn decode_array(spec: &ArraySpec, payload: &[u8], options: &DecodeOptions) -> Result<NdArray> {
    decode_array_window(spec, payload, options, None)
}

/// Like [`decode_array`], but with `window = Some((rows, columns))` only the elements in those
/// rows and columns of the last two axes (every index of the others) are sure to be decoded:
/// the others are unspecified. An error-bounded version 1 field decodes only the patches of
/// its bin image that hold the window ([`crate::field::decode_field_window`]), a lossless
/// array of one chunk per plane only each plane's rows down to the window's last
/// ([`crate::field::decode_lossless_window`]); the other payloads decode whole. Checks and
/// errors are [`decode_array`]'s.
pub fn decode_array_window(
    spec: &ArraySpec,
    payload: &[u8],
    options: &DecodeOptions,
    window: Option<(std::ops::Range<u32>, std::ops::Range<u32>)>,
) -> Result<NdArray> {
    let bytes = spec.byte_len();
    if bytes > options.limits.max_output_bytes {
        return Err(LimitsError::OutputBytes {
            needed: bytes,
            max: options.limits.max_output_bytes,
        }
        .into());
    }
    check_payload(spec, payload)?;
    match spec.mode {
        StorageMode::Raw => NdArray::new(spec.dtype, spec.shape.clone(), payload.to_vec()),
        StorageMode::Lossless => decode_lossless(spec, payload, options, window),
        StorageMode::ErrorBounded => {
            if field_version(payload) == Some(BOUNDED_VERSION) {
                NdArray::from_f32(spec.shape.clone(), &decode_bounded(payload, options)?.1)
            } else {
                let bytes = crate::field::decode_field_window_le(payload, options, window)?.1;
                NdArray::new(DType::Float32, spec.shape.clone(), bytes)
            }
        }
    }
}

/// Decodes `encoded` back and compares it with `source`: bit for bit (raw, lossless), or
/// every regular value within the bound and NaN, infinities and the fill value exact
/// (error-bounded). [`Error::Verification`] names the first element that differs.
pub fn verify_array(source: &NdArray, encoded: &EncodedArray) -> Result<()> {
    let decoded = decode_array(&encoded.spec, &encoded.payload, &DecodeOptions::default())?;
    let name = &encoded.spec.name;
    if decoded.shape() != source.shape() || decoded.dtype() != source.dtype() {
        return Err(Error::Verification(format!(
            "array {name:?}: decoded shape or type differs from the source"
        )));
    }
    let first_bad = match encoded.spec.mode {
        StorageMode::Raw | StorageMode::Lossless => {
            (decoded.bytes() != source.bytes()).then(|| {
                (0..source.len())
                    .find(|&i| decoded.bits_at(i) != source.bits_at(i))
                    .unwrap_or(0)
            })
        }
        StorageMode::ErrorBounded => {
            let fill = encoded.spec.fill;
            (0..source.len()).find(|&i| {
                let (s, d) = (source.float_at(i), decoded.float_at(i));
                let (Some(s), Some(d)) = (s, d) else {
                    return true;
                };
                let exact = !s.is_finite() || fill == Some(source.bits_at(i));
                if exact {
                    source.bits_at(i) != decoded.bits_at(i)
                } else {
                    (d - s).abs() > encoded.spec.bound
                }
            })
        }
    };
    match first_bad {
        None => Ok(()),
        Some(i) => Err(Error::Verification(format!(
            "array {name:?}: element {i} decodes to another value than the source's"
        ))),
    }
}

// The lossless arms (mode 1): `.l3f` version 2 files (`l3::field::lossless`).

/// The lossless codec's element type for `dtype` (float32, float16, bfloat16), if it has one.
fn float_type(dtype: DType) -> Option<FloatType> {
    match dtype {
        DType::Float32 => Some(FloatType::F32),
        DType::Float16 => Some(FloatType::F16),
        DType::BFloat16 => Some(FloatType::BF16),
        _ => None,
    }
}

/// The lossless codec's arm of [`encode_array`]: a `.l3f` version 2 field of a float32,
/// float16 or bfloat16 array.
fn encode_lossless(array: &NdArray, fill: Option<u64>) -> Result<Vec<u8>> {
    let options = LosslessOptions {
        fill_value: fill.map(|b| b as u32),
        ..LosslessOptions::default()
    };
    let bytes = array.bytes();
    match float_type(array.dtype()) {
        Some(FloatType::F32) => {
            let values: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            crate::field::encode_lossless(FloatSlice::F32(&values), array.shape(), &options)
        }
        Some(t) => {
            let values: Vec<u16> = bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect();
            let slice = if t == FloatType::F16 {
                FloatSlice::F16(&values)
            } else {
                FloatSlice::BF16(&values)
            };
            crate::field::encode_lossless(slice, array.shape(), &options)
        }
        None => Err(invalid_option(
            "mode",
            array.dtype() as u64,
            "lossless float fields hold float32, float16 or bfloat16",
        )),
    }
}

/// The lossless codec's arm of [`check_payload`]: the field header's type, shape and fill
/// value against the index entry's.
fn check_lossless(spec: &ArraySpec, payload: &[u8]) -> Result<()> {
    let disagree = |field, value: u64, reason| -> Error {
        FormatError::InvalidHeader {
            field,
            offset: 0,
            value,
            reason,
        }
        .into()
    };
    let h = parse_lossless(payload)?;
    if float_type(spec.dtype) != Some(h.dtype) {
        return Err(disagree(
            "field dtype",
            spec.dtype as u64,
            "the lossless field's element type is not the index entry's",
        ));
    }
    if h.shape != spec.shape {
        return Err(disagree(
            "field shape",
            h.shape.len() as u64,
            "the field's shape is not the index entry's",
        ));
    }
    if h.fill_value.map(u64::from) != spec.fill {
        return Err(disagree(
            "field fill value",
            h.fill_value.map_or(0, u64::from),
            "the field's fill value is not the index entry's",
        ));
    }
    Ok(())
}

/// The lossless codec's arm of [`decode_array`]: the header was checked against `spec`.
fn decode_lossless(
    spec: &ArraySpec,
    payload: &[u8],
    options: &DecodeOptions,
    window: Option<(std::ops::Range<u32>, std::ops::Range<u32>)>,
) -> Result<NdArray> {
    let (_, values) = crate::field::decode_lossless_window(payload, options, window)?;
    let bytes: Vec<u8> = match &values {
        FloatVec::F32(v) => super::model::le_bytes(v),
        FloatVec::F16(v) | FloatVec::BF16(v) => super::model::le_bytes(v),
    };
    NdArray::new(spec.dtype, spec.shape.clone(), bytes)
}
