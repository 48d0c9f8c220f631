//! Version 2 (*compact*) stream syntax: one stream per patch holding all its channels.
//!
//! ```text
//! stream   = transform (TRANSFORM_BITS) | channel header x channels | segment data | pad
//!          | with the palette transform: transform | count - 1 (PALETTE_COUNT_BITS)
//!            | count x channels samples (depth bits each) | one channel header (the
//!            index plane) | its segment data | pad
//! channel  = predictor (PREDICTOR_BITS) | ntok (TOKEN_COUNT_BITS)
//!          | ntok code lengths: "0" = same as the previous token's (0 before the first),
//!                               "1" + CODE_LENGTH_BITS-bit length
//!          | seg_width (SEGMENT_WIDTH_BITS) | seg_base (SEGMENT_BASE_BITS)
//!          | S segment lengths (seg_width bits each; length = seg_base + field, in bits)
//! segments = channel 0 segment 0 .. S-1, channel 1 segment 0 .. S-1, ...
//! segment  = rows s, s+S, s+2S, ... of the channel
//! row      = ceil(pw / 2) positions left to right, each two samples (the last one sample
//!            when pw is odd): a pair token, or two single symbols (one when odd), or a
//!            run token that covers this and the next positions of the row with zeros
//! symbol   = Huffman code of the token (MSB of the code first) | raw bits (LSB first)
//! ```
//!
//! Every segment starts at a bit offset known from the headers alone, so segments decode in
//! parallel (one GPU invocation each); within a segment the work is serial over at most
//! `ceil(ph / S)` rows.
//!
//! The prediction arithmetic lives with the codec (`crate::compact::predict`); this module is
//! syntax and constants only.

use super::Header;

/// Bits of the per-patch colour transform id.
pub const TRANSFORM_BITS: u32 = 2;
/// Bits of a channel's predictor id.
pub const PREDICTOR_BITS: u32 = 3;
/// Bits of a channel's token count (how many code lengths follow).
pub const TOKEN_COUNT_BITS: u32 = 6;
/// Bits of each code length.
pub const CODE_LENGTH_BITS: u32 = 4;
/// Longest Huffman code; lengths above it are an error. Decoders index 2^11-entry tables.
pub const MAX_CODE_LEN: u32 = 11;
/// Bits of the segment-length field width.
pub const SEGMENT_WIDTH_BITS: u32 = 5;
/// Bits of the segment-length base.
pub const SEGMENT_BASE_BITS: u32 = 16;
/// Largest segment-length field width.
pub const SEGMENT_WIDTH_MAX: u32 = 16;
/// Most segments per channel.
pub const SEGMENTS_MAX: u32 = 16;
/// Segments x patch side is at most this, so a GPU workgroup holds one row of residuals
/// per segment for four 16-bit channels in 8 KiB (128-pixel patches get 8 segments).
pub const SEGMENT_ROW_SAMPLES_MAX: u32 = 1024;
/// Zigzag values below this are their own token, with no raw bits.
pub const TOKEN_DIRECT: u32 = 16;
/// Two neighbouring zigzag values both below this are coded as one pair token, so smooth
/// areas (mostly zeros) cost well under one bit per sample.
pub const PAIR_LIMIT: u32 = 4;
/// Number of pair tokens.
pub const PAIR_TOKENS: u32 = PAIR_LIMIT * PAIR_LIMIT;
/// Number of run tokens: the end-of-row token, then runs of `2^j + raw` (`j` =
/// 1..=[`RUN_EXPONENT_MAX`], `j` raw bits) zero positions. They take flat areas (label maps,
/// artwork, screenshots) far below the half bit per sample a pair token costs.
pub const RUN_TOKENS: u32 = 1 + RUN_EXPONENT_MAX;
/// Largest exponent of a run token: runs up to `2^7 - 1` positions cover a 128-px row.
pub const RUN_EXPONENT_MAX: u32 = 6;
/// log2 of [`TOKEN_DIRECT`].
pub const TOKEN_DIRECT_LOG2: u32 = 4;
/// Bits below the leading one that a token above [`TOKEN_DIRECT`] holds; the rest are raw.
pub const TOKEN_MANTISSA_BITS: u32 = 1;
const MANTISSAS: u32 = 1 << TOKEN_MANTISSA_BITS;

/// Number of single-sample tokens for a sample depth: 16 direct + 2 per exponent
/// 4..depth-1 (24 at 8 bits, 40 at 16 bits).
pub const fn token_count(depth: u8) -> u32 {
    TOKEN_DIRECT + MANTISSAS * (depth as u32 - TOKEN_DIRECT_LOG2)
}

/// The first run token (the end-of-row token): after the single and the pair tokens.
pub const fn run_token_first(depth: u8) -> u32 {
    token_count(depth) + PAIR_TOKENS
}

/// Size of the alphabet: the single tokens, then [`PAIR_TOKENS`] pair tokens, then
/// [`RUN_TOKENS`] run tokens (47 at 8 bits, 63 at 16 bits).
pub const fn alphabet_size(depth: u8) -> u32 {
    run_token_first(depth) + RUN_TOKENS
}

/// The run token of `n` zero positions (`2 ..= 2^(RUN_EXPONENT_MAX + 1) - 1`) and its raw
/// bits: `(token, raw_bit_count, raw_value)`.
#[inline(always)]
pub const fn run_token(depth: u8, n: u32) -> (u32, u32, u32) {
    let j = 31 - n.leading_zeros();
    (run_token_first(depth) + j, j, n - (1 << j))
}

/// What a run token means: `Some((base, raw_bit_count))` for a run of `base + raw`
/// positions, `None` for the end-of-row token (every position left in the row).
#[inline(always)]
pub const fn run_base(depth: u8, token: u32) -> Option<(u32, u32)> {
    let j = token - run_token_first(depth);
    if j == 0 {
        None
    } else {
        Some((1 << j, j))
    }
}

/// Longest run one run token codes, in positions.
pub const RUN_MAX: u32 = (2 << RUN_EXPONENT_MAX) - 1;

/// The pair token of zigzag values `z0` (left) and `z1` (right), both < [`PAIR_LIMIT`].
#[inline(always)]
pub const fn pair_token(depth: u8, z0: u32, z1: u32) -> u32 {
    token_count(depth) + z0 * PAIR_LIMIT + z1
}

/// Segments of a patch `ph` rows high in a file with `patch_size`-pixel patches.
pub const fn segments(patch_size: u32, ph: u32) -> u32 {
    let max = SEGMENT_ROW_SAMPLES_MAX / patch_size;
    let max = if max < SEGMENTS_MAX {
        max
    } else {
        SEGMENTS_MAX
    };
    if ph < max {
        ph
    } else {
        max
    }
}

/// Token of a zigzag value `z` (< 2^depth) and the raw bits that follow its code:
/// `(token, raw_bit_count, raw_value)`. Values below 16 are their own token; above, the
/// token holds the exponent `n = floor(log2 z)` and the bit below the leading one, and the
/// `n - 1` lower bits follow raw.
#[inline(always)]
pub const fn token_of(z: u32) -> (u32, u32, u32) {
    if z < TOKEN_DIRECT {
        return (z, 0, 0);
    }
    let n = 31 - z.leading_zeros();
    let nraw = n - TOKEN_MANTISSA_BITS;
    let m = (z >> nraw) & (MANTISSAS - 1);
    (
        TOKEN_DIRECT + MANTISSAS * (n - TOKEN_DIRECT_LOG2) + m,
        nraw,
        z & ((1 << nraw) - 1),
    )
}

/// Inverse of [`token_of`]: `(base, raw_bit_count)`; the value is `base + raw`.
#[inline(always)]
pub const fn token_base(token: u32) -> (u32, u32) {
    if token < TOKEN_DIRECT {
        return (token, 0);
    }
    let n = TOKEN_DIRECT_LOG2 + (token - TOKEN_DIRECT) / MANTISSAS;
    let m = (token - TOKEN_DIRECT) & (MANTISSAS - 1);
    let nraw = n - TOKEN_MANTISSA_BITS;
    ((1 << n) | (m << nraw), nraw)
}

/// Zigzag map of a residual `e` (mod 2^depth) read as signed: 0, -1, 1, -2, ... -> 0, 1, 2, 3.
#[inline(always)]
pub const fn zigzag(e: u32, depth: u32) -> u32 {
    let half = 1 << (depth - 1);
    if e < half {
        2 * e
    } else {
        2 * ((1 << depth) - e) - 1
    }
}

/// Inverse of [`zigzag`], as a residual mod 2^32 (callers mask to the depth).
#[inline(always)]
pub const fn unzigzag(z: u32) -> u32 {
    (z >> 1) ^ (0u32.wrapping_sub(z & 1))
}

/// Per-patch colour transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Transform {
    /// Channels are coded as they are.
    None = 0,
    /// Channels 0 and 2 are coded as `R - G` and `B - G` (mod 2^depth); needs 3+ channels.
    SubtractGreen = 1,
    /// The patch has at most [`PALETTE_MAX`] distinct pixels: they are listed, and one plane
    /// of indices into the list is coded instead of the channels. Label maps, artwork and
    /// screenshots code an edge once instead of once per channel.
    Palette = 2,
}

/// Bits of a palette's entry count (stored minus one).
pub const PALETTE_COUNT_BITS: u32 = 8;
/// Most entries of a patch's palette.
pub const PALETTE_MAX: u32 = 1 << PALETTE_COUNT_BITS;

impl Transform {
    /// The transform with this id, if any.
    pub const fn from_id(id: u32) -> Option<Self> {
        match id {
            0 => Some(Transform::None),
            1 => Some(Transform::SubtractGreen),
            2 => Some(Transform::Palette),
            _ => None,
        }
    }
    /// Name as used by `l3 info`.
    pub const fn name(self) -> &'static str {
        match self {
            Transform::None => "none",
            Transform::SubtractGreen => "subtract-green",
            Transform::Palette => "palette",
        }
    }
}

/// A channel's predictor. With `b` the sample above, `a` above-left and `c` above-right
/// (in the patch's first row all are 0; at its left edge `a = b`, at its right edge
/// `c = b`), and `left` the reconstructed sample to the left. All arithmetic is on
/// integers, reduced mod 2^depth at the end.
///
/// *Up-type* predictors use the row above only. *Left-type* predictors are
/// `left + g(a, b)`, and `b` in the first column: a row then decodes as a prefix sum of
/// `residual + g`, which a GPU workgroup computes in log2(width) steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CompactPredictor {
    /// 0 (up-type).
    None = 0,
    /// `b` (up-type).
    Up = 1,
    /// `left + b - a` (left-type).
    Gradient = 2,
    /// `left` (left-type).
    Left = 3,
    /// `left + floor((b - a) / 2)` (left-type).
    HalfGradient = 4,
    /// `floor((a + c) / 2)` (up-type).
    UpMean = 5,
}

impl CompactPredictor {
    /// All predictors, in id order.
    pub const ALL: [CompactPredictor; 6] = [
        CompactPredictor::None,
        CompactPredictor::Up,
        CompactPredictor::Gradient,
        CompactPredictor::Left,
        CompactPredictor::HalfGradient,
        CompactPredictor::UpMean,
    ];
    /// The predictor with this id, if any.
    pub const fn from_id(id: u32) -> Option<Self> {
        match id {
            0 => Some(CompactPredictor::None),
            1 => Some(CompactPredictor::Up),
            2 => Some(CompactPredictor::Gradient),
            3 => Some(CompactPredictor::Left),
            4 => Some(CompactPredictor::HalfGradient),
            5 => Some(CompactPredictor::UpMean),
            _ => None,
        }
    }
    /// Name as used by `l3 info`.
    pub const fn name(self) -> &'static str {
        match self {
            CompactPredictor::None => "none",
            CompactPredictor::Up => "up",
            CompactPredictor::Gradient => "gradient",
            CompactPredictor::Left => "left",
            CompactPredictor::HalfGradient => "half-gradient",
            CompactPredictor::UpMean => "up-mean",
        }
    }
    /// True for `left + g` predictors, decoded by a prefix sum along the row.
    pub const fn is_left_type(self) -> bool {
        matches!(
            self,
            CompactPredictor::Gradient | CompactPredictor::Left | CompactPredictor::HalfGradient
        )
    }
}

/// Bits of the smallest and largest channel header (the code-length table and the
/// segment-length table vary).
const fn channel_header_bits(depth: u8, segments: u32) -> (u64, u64) {
    let fixed = (PREDICTOR_BITS + TOKEN_COUNT_BITS + SEGMENT_WIDTH_BITS + SEGMENT_BASE_BITS) as u64;
    (
        fixed + 1,
        fixed
            + (alphabet_size(depth) * (2 + CODE_LENGTH_BITS)) as u64
            + (segments * SEGMENT_WIDTH_MAX) as u64,
    )
}

/// Largest bits one sample can take: the longest code plus the most raw bits.
pub const fn max_sample_bits(depth: u8) -> u32 {
    MAX_CODE_LEN + depth as u32 - 2
}

/// Smallest and largest valid stream size in bytes for a `pw` x `ph` patch: the smaller and
/// the larger of the channel-coded and the palette-coded bounds.
pub fn stream_size_bounds(h: &Header, pw: u32, ph: u32) -> (u64, u64) {
    let c = h.channels() as u64;
    let (min_ch, max_ch) = channel_header_bits(h.depth, segments(h.patch_size(), ph));
    let max_plane = max_ch + pw as u64 * ph as u64 * max_sample_bits(h.depth) as u64;
    let entry = c * h.depth as u64;
    let palette = (TRANSFORM_BITS + PALETTE_COUNT_BITS) as u64;
    let min_bits = (TRANSFORM_BITS as u64 + c * min_ch).min(palette + entry + min_ch);
    let max_bits = (TRANSFORM_BITS as u64 + c * max_plane)
        .max(palette + PALETTE_MAX as u64 * entry + max_plane);
    (min_bits.div_ceil(8), max_bits.div_ceil(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_every_value() {
        for depth in [8u8, 16] {
            let mut last = 0;
            for z in 0..1u32 << depth {
                let (t, nraw, raw) = token_of(z);
                assert!(t < token_count(depth), "z={z} token {t}");
                assert!(t >= last, "tokens are monotonic in z");
                last = t;
                let (base, n2) = token_base(t);
                assert_eq!((n2, base + raw), (nraw, z));
                assert!(raw < 1 << nraw.max(1) || nraw == 0 && raw == 0);
            }
            assert_eq!(last, token_count(depth) - 1);
        }
    }

    #[test]
    fn zigzag_round_trips() {
        for depth in [8u32, 16] {
            let m = (1u32 << depth) - 1;
            let mut seen = vec![false; 1 << depth];
            for e in 0..=m {
                let z = zigzag(e, depth);
                assert!(!seen[z as usize]);
                seen[z as usize] = true;
                assert_eq!(unzigzag(z) & m, e);
            }
        }
        assert_eq!(
            [zigzag(0, 8), zigzag(255, 8), zigzag(1, 8), zigzag(254, 8)],
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn segments_fit_the_gpu_budget() {
        for log2 in super::super::PATCH_LOG2_MIN..=super::super::PATCH_LOG2_MAX {
            let p = 1u32 << log2;
            for ph in 1..=p {
                let s = segments(p, ph);
                assert!(s >= 1 && s <= ph && s <= SEGMENTS_MAX);
                assert!(s * p <= SEGMENT_ROW_SAMPLES_MAX);
            }
        }
        assert_eq!(
            (segments(64, 64), segments(128, 128), segments(8, 5)),
            (16, 8, 5)
        );
    }
}
