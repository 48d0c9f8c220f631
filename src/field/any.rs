//! One entry point for every float array file, whatever its version: what an encoder gave
//! back decodes here without the caller looking at the version byte. `encode_field` and
//! `encode_bounded` store an array exactly (version 2) when a bound is too fine for the
//! quantiser's bins, so a caller that decoded with the version it asked for would refuse
//! its own file; [`decode_float_array`] and, on the GPU, `gpu::decode_float_arrays` take all
//! three.

use super::{
    decode_bounded, decode_field, decode_lossless, field_version, parse_bounded, parse_field,
    parse_lossless, BoundedHeader, FieldHeader, FloatType, FloatVec, LosslessHeader,
    BOUNDED_VERSION, FIELD_VERSION, LOSSLESS_VERSION,
};
use crate::decode::DecodeOptions;
use crate::error::Result;

/// A float array file's header, whichever version it is.
#[derive(Debug, Clone, PartialEq)]
pub enum FloatArrayHeader {
    /// Version 1: an error-bounded 2D or 3D float32 field (a bin image).
    Field(FieldHeader),
    /// Version 2: a lossless float32, float16 or bfloat16 array.
    Lossless(LosslessHeader),
    /// Version 3: an error-bounded float32 array of 1 to 4 axes.
    Bounded(BoundedHeader),
}

impl FloatArrayHeader {
    /// The file's version byte (1, 2 or 3).
    pub fn version(&self) -> u8 {
        match self {
            Self::Field(_) => FIELD_VERSION,
            Self::Lossless(_) => LOSSLESS_VERSION,
            Self::Bounded(_) => BOUNDED_VERSION,
        }
    }

    /// The shape, C order (last axis fastest), as the array has it.
    pub fn shape(&self) -> Vec<u32> {
        match self {
            Self::Field(h) => h.dims().to_vec(),
            Self::Lossless(h) => h.shape.clone(),
            Self::Bounded(h) => h.shape.clone(),
        }
    }

    /// Values in the array.
    pub fn len(&self) -> u64 {
        self.shape().iter().map(|&d| d as u64).product()
    }

    /// Whether the array has no values (never, for a valid file: every axis is at least 1).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type of the decoded values (error-bounded files are float32).
    pub fn dtype(&self) -> FloatType {
        match self {
            Self::Lossless(h) => h.dtype,
            _ => FloatType::F32,
        }
    }

    /// The absolute bound every regular value is within: 0 for a lossless file (exact).
    pub fn bound(&self) -> f64 {
        match self {
            Self::Field(h) => h.bound,
            Self::Lossless(_) => 0.0,
            Self::Bounded(h) => h.bound,
        }
    }

    /// The declared fill value's bit pattern (in the dtype's width), if any.
    pub fn fill_bits(&self) -> Option<u32> {
        match self {
            Self::Field(h) => h.fill_value.map(f32::to_bits),
            Self::Lossless(h) => h.fill_value,
            Self::Bounded(h) => h.fill_value.map(f32::to_bits),
        }
    }

    /// Exception runs (values stored exactly: NaN, the fill value, and in error-bounded
    /// files the values a reconstruction would miss).
    pub fn runs(&self) -> u32 {
        match self {
            Self::Field(h) => h.runs,
            Self::Lossless(h) => h.runs,
            Self::Bounded(h) => h.runs,
        }
    }
}

/// Reads and checks a float array file's header, whichever version (the version's own
/// parser: a file that is not a float array, or of an unknown version, is version 1's
/// error).
pub fn parse_float_array(data: &[u8]) -> Result<FloatArrayHeader> {
    Ok(match field_version(data) {
        Some(LOSSLESS_VERSION) => FloatArrayHeader::Lossless(parse_lossless(data)?),
        Some(BOUNDED_VERSION) => FloatArrayHeader::Bounded(parse_bounded(data)?),
        _ => FloatArrayHeader::Field(parse_field(data)?.header),
    })
}

/// Decodes a float array file of any version on the CPU: its header and its values (C
/// order; float16 and bfloat16 as bit patterns), with every check of that version's decoder
/// and `options`' limits before allocating.
pub fn decode_float_array(
    data: &[u8],
    options: &DecodeOptions,
) -> Result<(FloatArrayHeader, FloatVec)> {
    Ok(match field_version(data) {
        Some(LOSSLESS_VERSION) => {
            let (h, v) = decode_lossless(data, options)?;
            (FloatArrayHeader::Lossless(h), v)
        }
        Some(BOUNDED_VERSION) => {
            let (h, v) = decode_bounded(data, options)?;
            (FloatArrayHeader::Bounded(h), FloatVec::F32(v))
        }
        _ => {
            let (h, v) = decode_field(data, options)?;
            (FloatArrayHeader::Field(h), FloatVec::F32(v))
        }
    })
}
