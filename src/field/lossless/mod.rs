//! Lossless float arrays (SPEC.md, "Lossless float arrays"): float32, float16 and bfloat16
//! arrays of 1 to 4 axes stored bit for bit (NaN payloads, -0.0, infinities, subnormals).
//!
//! Each value's bits map to an order-preserving integer (or, for float32 data on a decimal
//! grid, to the multiplier `k` of float-mult: `f32(k) x base` moved by a small adjustment; or,
//! for arrays of few distinct values, to the value's index in a sorted value table);
//! NaN and the fill value go inline or to exception runs, whichever the encoder estimates
//! smaller. The integers are differenced along the set of axes that codes smallest (chosen
//! per array), and the zigzagged residuals are coded as the image codec's version-2 tokens
//! widened to 32 bits, with zero-run tokens, under one canonical Huffman code per
//! independent chunk of values, each chunk split into segments that decode independently.
//! Decoding is integer-only but for float-mult's one correctly rounded f32 multiply.
//!
//! Modules: `format` (the format in code: [`LosslessHeader`], [`parse_lossless`], the chunk
//! head, the order map), `encode` ([`encode_lossless`]) and `decode` ([`decode_lossless`],
//! [`decode_lossless_into`]); tokens, codes, runs and the container are `field::core`'s.

pub(super) mod decode;
pub(super) mod encode;
pub(super) mod format;
#[cfg(any(test, feature = "gpu"))]
pub(crate) mod gpu;

#[cfg(test)]
mod tests;

pub use decode::{decode_lossless, decode_lossless_into, decode_lossless_window};
pub use encode::{encode_lossless, LosslessOptions};
pub use format::{
    parse_lossless, LosslessHeader, LOSSLESS_FLAG_FILL, LOSSLESS_FLAG_MULT, LOSSLESS_FLAG_TABLE,
    LOSSLESS_MAX_NDIM, LOSSLESS_VERSION,
};

/// Element type of a lossless float array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FloatType {
    /// IEEE binary32.
    F32 = 0,
    /// IEEE binary16.
    F16 = 1,
    /// bfloat16 (the top half of a binary32).
    BF16 = 2,
}

impl FloatType {
    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            FloatType::F32 => 4,
            FloatType::F16 | FloatType::BF16 => 2,
        }
    }

    /// The type's name: "float32", "float16" or "bfloat16".
    pub fn name(self) -> &'static str {
        match self {
            FloatType::F32 => "float32",
            FloatType::F16 => "float16",
            FloatType::BF16 => "bfloat16",
        }
    }

    /// The type with this dtype byte, if any.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(FloatType::F32),
            1 => Some(FloatType::F16),
            2 => Some(FloatType::BF16),
            _ => None,
        }
    }

    /// Bits per value.
    pub(crate) fn bits(self) -> u32 {
        8 * self.size() as u32
    }

    /// Whether the bit pattern is a NaN of this type.
    pub(crate) fn is_nan(self, bits: u32) -> bool {
        let (exp, man) = match self {
            FloatType::F32 => (0x7f80_0000, 0x007f_ffff),
            FloatType::F16 => (0x7c00, 0x03ff),
            FloatType::BF16 => (0x7f80, 0x007f),
        };
        bits & exp == exp && bits & man != 0
    }
}

/// Values to encode: float32 as they are, float16 and bfloat16 as their bit patterns.
#[derive(Debug, Clone, Copy)]
pub enum FloatSlice<'a> {
    /// float32 values.
    F32(&'a [f32]),
    /// float16 bit patterns.
    F16(&'a [u16]),
    /// bfloat16 bit patterns.
    BF16(&'a [u16]),
}

impl FloatSlice<'_> {
    /// The element type.
    pub fn dtype(&self) -> FloatType {
        match self {
            FloatSlice::F32(_) => FloatType::F32,
            FloatSlice::F16(_) => FloatType::F16,
            FloatSlice::BF16(_) => FloatType::BF16,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            FloatSlice::F32(v) => v.len(),
            FloatSlice::F16(v) | FloatSlice::BF16(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Decoded values: float32 as they are, float16 and bfloat16 as their bit patterns.
#[derive(Debug, Clone, PartialEq)]
pub enum FloatVec {
    /// float32 values.
    F32(Vec<f32>),
    /// float16 bit patterns.
    F16(Vec<u16>),
    /// bfloat16 bit patterns.
    BF16(Vec<u16>),
}

impl FloatVec {
    /// The element type.
    pub fn dtype(&self) -> FloatType {
        match self {
            FloatVec::F32(_) => FloatType::F32,
            FloatVec::F16(_) => FloatType::F16,
            FloatVec::BF16(_) => FloatType::BF16,
        }
    }

    /// The values as a [`FloatSlice`].
    pub fn as_slice(&self) -> FloatSlice<'_> {
        match self {
            FloatVec::F32(v) => FloatSlice::F32(v),
            FloatVec::F16(v) => FloatSlice::F16(v),
            FloatVec::BF16(v) => FloatSlice::BF16(v),
        }
    }

    /// The values' bytes, native-endian.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            FloatVec::F32(v) => bytemuck::cast_slice(v),
            FloatVec::F16(v) | FloatVec::BF16(v) => bytemuck::cast_slice(v),
        }
    }
}
