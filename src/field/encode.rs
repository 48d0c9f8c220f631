//! The field encoder: bins by dual quantisation within the bound, values whose
//! reconstruction misses it stored exactly as runs, the bins encoded as a 16-bit L3 image.

use super::core::runs::{write_runs, Run};
use super::decode::reconstruct;
use super::format::{FieldHeader, BIN_WIDTH_BITS, FIELD_HEADER_LEN, MAX_BINS};
use super::lossless::{encode_lossless, FloatSlice, LosslessOptions};
use crate::encode::EncodeOptions;
use crate::error::{ParameterError, Result};
use crate::format::ColorType;
use crate::raw::{RawImage, Samples};

/// The error bound asked for: the one spelling every encoder, front end and manifest takes
/// (in a tensor manifest, JSON `{"absolute": e}` or `{"relative": r}`). A bare `f64` converts
/// to [`Bound::Absolute`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "dataset",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Bound {
    /// Every decoded value within this of the original.
    Absolute(f64),
    /// Within this fraction of the value range (max - min over finite, non-fill values).
    Relative(f64),
}

impl Bound {
    /// The absolute bound for `values` with fill value `fill`: the bound itself, or the
    /// fraction times [`regular_range`] (0 for an array without range, which encoders refuse
    /// or store exactly). The one place a relative bound becomes absolute.
    pub fn resolve(self, values: &[f32], fill: Option<f32>) -> f64 {
        match self {
            Bound::Absolute(e) => e,
            Bound::Relative(r) => r * regular_range(values, fill),
        }
    }

    /// The absolute bound for values whose regular range (max - min) is `range`.
    pub fn over_range(self, range: f64) -> f64 {
        match self {
            Bound::Absolute(e) => e,
            Bound::Relative(r) => r * range,
        }
    }
}

impl From<f64> for Bound {
    fn from(e: f64) -> Self {
        Bound::Absolute(e)
    }
}

/// `max - min` (in f64) of the regular values (finite, not the fill value), 0 without any.
pub fn regular_range(values: &[f32], fill: Option<f32>) -> f64 {
    let (lo, hi) = values
        .iter()
        .filter(|v| v.is_finite() && fill.is_none_or(|f| v.to_bits() != f.to_bits()))
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if lo <= hi {
        hi as f64 - lo as f64
    } else {
        0.0
    }
}

/// Options of [`encode_field`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FieldOptions {
    /// The bound (no default: a lossy mode is always asked for explicitly).
    pub bound: Bound,
    /// A fill value (missing data) stored exactly, like NaN (default none).
    pub fill_value: Option<f32>,
    /// Encode options of the bin image (default: the compact profile, lossless, 128-px
    /// patches: on the shared fields 1.5-5 % smaller than 64-px ones, whose headers cost more
    /// where the coarse bins of a loose bound leave little else to code).
    pub image: EncodeOptions,
}

impl FieldOptions {
    /// `bound`, no fill value, the compact profile with 128-px patches.
    pub fn new(bound: Bound) -> Self {
        FieldOptions {
            bound,
            fill_value: None,
            image: EncodeOptions {
                patch_log2: 7,
                ..EncodeOptions::for_profile(crate::format::Profile::Compact)
            },
        }
    }
}

/// The largest positive normal f32 at most `limit` with [`BIN_WIDTH_BITS`] significant bits.
pub(super) fn bin_width_for(limit: f64) -> Option<f32> {
    unit_for(limit, BIN_WIDTH_BITS)
}

/// The largest positive normal f32 at most `limit` with at most `bits` significant bits: the
/// bin widths of version-1 fields and the error-bounded arrays' units.
pub(in crate::field) fn unit_for(limit: f64, bits: u32) -> Option<f32> {
    if !(limit.is_finite() && limit >= f32::MIN_POSITIVE as f64) {
        return None;
    }
    let x = (limit as f32).min(f32::MAX);
    // Round down to f32 first (as f32 may round up), then drop significand bits.
    let x = if x as f64 > limit {
        f32::from_bits(x.to_bits() - 1)
    } else {
        x
    };
    let u = f32::from_bits(x.to_bits() & !((1u32 << (24 - bits)) - 1));
    u.is_normal().then_some(u)
}

/// A float32 array stored exactly, as a lossless float array (version 2) with the same fill
/// value: what the error-bounded encoders write when the bound is finer than their bins allow
/// (within any bound, and the file says lossless).
pub(crate) fn encode_exactly(values: &[f32], shape: &[u32], fill: Option<f32>) -> Result<Vec<u8>> {
    let options = LosslessOptions {
        fill_value: fill.map(f32::to_bits),
        ..LosslessOptions::default()
    };
    encode_lossless(FloatSlice::F32(values), shape, &options)
}

/// Encodes a float32 field of `shape` (2 or 3 dimensions, C order) within `options.bound`:
/// a version 1 file, or, when the bound is finer than the bins allow (the regular range
/// needs more than [`MAX_BINS`] bins of width `2 x bound`, the bound is below half the
/// smallest normal f32, or a relative bound of a field without range), the field stored
/// exactly as a lossless version 2 file ([`super::field_version`] tells them apart;
/// [`super::decode_float_array`] decodes either). Never an error for a finite positive bound.
pub fn encode_field(values: &[f32], shape: &[u32], options: &FieldOptions) -> Result<Vec<u8>> {
    let shape3: [u32; 3] = match *shape {
        [ny, nx] => [1, ny, nx],
        [nz, ny, nx] => [nz, ny, nx],
        _ => {
            return Err(ParameterError::InvalidOption {
                name: "shape",
                value: shape.len() as u64,
                reason: "a field has 2 or 3 dimensions",
            }
            .into())
        }
    };
    let total128 = shape3.iter().map(|&d| d as u128).product::<u128>();
    let total = total128.min(u64::MAX as u128) as u64;
    if total != values.len() as u64 || total == 0 || total > u32::MAX as u64 {
        return Err(ParameterError::SampleCount {
            got: values.len(),
            needed: total as usize,
            width: shape3[2],
            height: shape3[1],
            channels: 1,
        }
        .into());
    }
    let fill = options.fill_value;
    let is_regular = |v: f32| v.is_finite() && fill.is_none_or(|f| v.to_bits() != f.to_bits());
    let (lo, hi) = values
        .iter()
        .filter(|&&v| is_regular(v))
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let range = if lo <= hi { hi as f64 - lo as f64 } else { 0.0 };
    let (Bound::Absolute(asked) | Bound::Relative(asked)) = options.bound;
    if !(asked.is_finite() && asked > 0.0) {
        return Err(ParameterError::InvalidFloat {
            name: "bound",
            value_bits: asked.to_bits(),
            reason: "must be finite and positive",
        }
        .into());
    }
    // A relative bound of a wide range may pass what the bin width can double.
    let bound = options.bound.over_range(range).min(f64::MAX / 4.0);
    // A bound finer than the bins allow (a relative bound of a constant field is 0; a bound
    // below the smallest normal bin width; a range of more than 65536 bins) is honoured by
    // storing the field exactly: a lossless file (version 2), which says so.
    let Some(bin_width) = bin_width_for(2.0 * bound) else {
        return encode_exactly(values, shape, fill);
    };
    let offset = if lo <= hi && !lo.is_subnormal() {
        lo
    } else {
        0.0
    };
    let bins = ((hi as f64 - offset as f64) / bin_width as f64).floor() + 1.0;
    if lo <= hi && bins > MAX_BINS as f64 {
        return encode_exactly(values, shape, fill);
    }
    // Bins, and exceptions where the reconstruction misses the bound.
    let mut bins_image = vec![0u16; values.len()];
    let mut exceptions: Vec<(u32, u32)> = Vec::new();
    let mut last = 0u16;
    for (i, &v) in values.iter().enumerate() {
        let mut chosen = None;
        if is_regular(v) {
            let q = ((v as f64 - offset as f64) / bin_width as f64).round();
            for dq in [0.0, -1.0, 1.0] {
                let c = q + dq;
                if !(0.0..MAX_BINS as f64).contains(&c) {
                    continue;
                }
                let r = reconstruct(c as u16, offset, bin_width);
                if !r.is_subnormal() && (r as f64 - v as f64).abs() <= bound {
                    chosen = Some(c as u16);
                    break;
                }
            }
        }
        match chosen {
            Some(q) => {
                bins_image[i] = q;
                last = q;
            }
            None => {
                // Stored exactly; the bin keeps its neighbour's value, for the predictor.
                bins_image[i] = last;
                exceptions.push((i as u32, v.to_bits()));
            }
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for (i, bits) in exceptions {
        match runs.last_mut() {
            Some(r) if r.bits == bits && r.start + r.len == i => r.len += 1,
            _ => runs.push(Run {
                start: i,
                len: 1,
                bits,
            }),
        }
    }
    let [nz, ny, nx] = shape3;
    let height = ny as u64 * nz as u64;
    if height > crate::format::MAX_DIMENSION as u64 || nx > crate::format::MAX_DIMENSION {
        return Err(ParameterError::InvalidOption {
            name: "shape",
            value: height,
            reason: "nx and ny x nz must each be at most 16777215",
        }
        .into());
    }
    let image = crate::encode::encode(
        &RawImage {
            width: nx,
            height: height as u32,
            color: ColorType::Gray,
            samples: Samples::U16(&bins_image),
        },
        &EncodeOptions {
            max_error: 0,
            ..options.image
        },
    )?;
    let header = FieldHeader {
        shape: shape3,
        ndim: shape.len() as u8,
        bound,
        offset,
        bin_width,
        fill_value: fill,
        runs: runs.len() as u32,
        image_len: image.len() as u64,
    };
    let mut out = Vec::with_capacity(FIELD_HEADER_LEN + image.len() + runs.len() * 4 + 8);
    out.extend_from_slice(&header.to_bytes());
    out.extend_from_slice(&image);
    write_runs(&runs, &mut out)?;
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}
