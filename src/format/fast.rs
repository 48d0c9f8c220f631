//! Version 1 (*fast*) stream syntax: one stream per (patch, channel), the L3 paper's
//! fixed-width rows predicted from the row above.
//!
//! ```text
//! stream = predictor id (STREAM_PREFIX_LEN byte) | rows, bit-packed LSB first | zero padding to a byte
//! row    = nbit (nbit_field_bits(depth)) | base (depth bits) | width x nbit-bit deltas
//! ```
//!
//! The prediction arithmetic lives with the codec (`crate::fast::predict`); this module is
//! syntax and constants only.

use super::Header;

/// Bytes of the per-stream predictor id that precedes the bit-packed rows.
pub const STREAM_PREFIX_LEN: usize = 1;

/// Width of the per-row bit-width field for a sample depth: enough to hold 0..=depth.
pub const fn nbit_field_bits(depth: u8) -> u32 {
    match depth {
        8 => 4,
        _ => 5,
    }
}

/// How a row is predicted from the row above (upper-left `a`, upper `b`, upper-right `c`).
/// At the patch's left and right edges the missing neighbour is replaced by `b`. The first
/// row of every patch is stored unpredicted whatever the predictor, so patches are independent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FastPredictor {
    /// No prediction: every row stores the samples themselves.
    None = 0,
    /// `b`, the sample above.
    Up = 1,
    /// The L3 paper's "Paeth" variant: `p = a + c - b`, then whichever of a, b, c is closest
    /// to p (ties prefer a, then b).
    L3Paeth = 2,
    /// `(a + c) / 2`, rounded down.
    UpMean = 3,
}

impl FastPredictor {
    /// All predictors, in id order.
    pub const ALL: [FastPredictor; 4] = [
        FastPredictor::None,
        FastPredictor::Up,
        FastPredictor::L3Paeth,
        FastPredictor::UpMean,
    ];

    /// The predictor with this id, if any.
    pub const fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(FastPredictor::None),
            1 => Some(FastPredictor::Up),
            2 => Some(FastPredictor::L3Paeth),
            3 => Some(FastPredictor::UpMean),
            _ => None,
        }
    }

    /// Name as used by the CLI and `l3 info`.
    pub const fn name(self) -> &'static str {
        match self {
            FastPredictor::None => "none",
            FastPredictor::Up => "up",
            FastPredictor::L3Paeth => "l3-paeth",
            FastPredictor::UpMean => "up-mean",
        }
    }
}

/// Bits of one row of `width` samples with bit width `nbit` at this sample depth.
pub const fn row_bits(depth: u8, width: u32, nbit: u32) -> u64 {
    nbit_field_bits(depth) as u64 + depth as u64 + width as u64 * nbit as u64
}

/// Smallest and largest valid stream size in bytes for a `pw` x `ph` patch: every row at bit
/// width 0, every row at full depth.
pub fn stream_size_bounds(h: &Header, pw: u32, ph: u32) -> (u64, u64) {
    let min_bits = ph as u64 * row_bits(h.depth, pw, 0);
    let max_bits = ph as u64 * row_bits(h.depth, pw, h.depth as u32);
    (
        STREAM_PREFIX_LEN as u64 + min_bits.div_ceil(8),
        STREAM_PREFIX_LEN as u64 + max_bits.div_ceil(8),
    )
}
