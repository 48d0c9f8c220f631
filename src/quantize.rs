//! Error-bounded images (SPEC.md, "Error-bounded files"): the bin mapping in code.
//!
//! A file with `max_error = e > 0` stores each sample `x` as its bin `q = (x + e) / (2e + 1)`
//! (integer division), losslessly, with the same profiles and streams as any file; a decoder
//! writes `min(q * (2e + 1), 2^depth - 1)`. Every decoded sample is within `e` of the original:
//! `x` lies in `[q(2e+1) - e, q(2e+1) + e]` by the choice of `q`, and clamping to the sample
//! range only moves the value towards `x`, which is inside the range. This holds at image and
//! patch edges and at both ends of the range with no special case.
//!
//! Why bins of the samples rather than quantised prediction residuals (JPEG-LS near-lossless):
//! the compact profile's left-type predictors are decoded by a prefix sum along the row (one
//! invocation per column on the GPU); a residual quantiser must clamp each reconstruction to
//! the sample range, which breaks the linearity the prefix sum needs. Binning first (cuSZ's
//! "dual quantisation") keeps every decoder unchanged but for one multiply and clamp per sample
//! at output, with no serial error feedback, and predicts from exactly what the decoder
//! reconstructs (the bins), so it is closed-loop in the bin domain.

use crate::raw::{RawImage, Samples};

/// The largest error bound a file of `depth` bits may state (a rule of the format).
pub use crate::format::max_error_limit;

/// Width of a bin: `2e + 1` sample values.
#[inline(always)]
pub const fn bin_width(max_error: u16) -> u32 {
    2 * max_error as u32 + 1
}

/// The bin of sample `x` for the bound `max_error`.
#[inline(always)]
pub const fn quantize(x: u32, max_error: u16) -> u32 {
    (x + max_error as u32) / bin_width(max_error)
}

/// The value a decoder writes for bin `q`: its centre, clamped to the `depth`-bit range.
#[inline(always)]
pub fn dequantize(q: u32, max_error: u16, depth: u8) -> u32 {
    let max = (1u32 << depth) - 1;
    (q.saturating_mul(bin_width(max_error))).min(max)
}

/// Owned samples of a quantised image.
pub(crate) enum QuantizedSamples {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl QuantizedSamples {
    /// The bins of every sample of `image`.
    pub(crate) fn of(image: &RawImage, max_error: u16) -> Self {
        match image.samples {
            Samples::U8(s) => QuantizedSamples::U8(
                s.iter()
                    .map(|&x| quantize(x as u32, max_error) as u8)
                    .collect(),
            ),
            Samples::U16(s) => QuantizedSamples::U16(
                s.iter()
                    .map(|&x| quantize(x as u32, max_error) as u16)
                    .collect(),
            ),
        }
    }

    /// The quantised image, with `image`'s shape.
    pub(crate) fn raw<'a>(&'a self, image: &RawImage) -> RawImage<'a> {
        RawImage {
            width: image.width,
            height: image.height,
            color: image.color,
            samples: match self {
                QuantizedSamples::U8(v) => Samples::U8(v),
                QuantizedSamples::U16(v) => Samples::U16(v),
            },
        }
    }
}

/// Replaces every bin in `out` (interleaved output of `depth` bits: bytes, or little-endian
/// u16 pairs) by its decoded value.
pub(crate) fn dequantize_in_place(out: &mut [u8], max_error: u16, depth: u8) {
    if depth == 8 {
        let table: [u8; 256] = std::array::from_fn(|q| dequantize(q as u32, max_error, 8) as u8);
        for b in out.iter_mut() {
            *b = table[*b as usize];
        }
    } else {
        for pair in out.chunks_exact_mut(2) {
            let q = u16::from_le_bytes([pair[0], pair[1]]) as u32;
            pair.copy_from_slice(&(dequantize(q, max_error, 16) as u16).to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample value of both depths, every bound up to the limit (16-bit: a sample of
    /// bounds), decodes within the bound and inside the range.
    #[test]
    fn every_value_decodes_within_the_bound() {
        for depth in [8u8, 16] {
            let max = (1u32 << depth) - 1;
            let bounds: Vec<u16> = if depth == 8 {
                (1..=max_error_limit(8)).collect()
            } else {
                vec![1, 2, 3, 4, 7, 100, 1000, 12345, max_error_limit(16)]
            };
            for e in bounds {
                let step = if depth == 8 { 1 } else { 7 };
                for x in (0..=max).step_by(step).chain([max]) {
                    let q = quantize(x, e);
                    assert!(q <= max, "bin {q} of {x} does not fit {depth} bits");
                    let y = dequantize(q, e, depth);
                    assert!(y <= max && x.abs_diff(y) <= e as u32, "{x} -> {y}, e = {e}");
                }
            }
        }
    }

    #[test]
    fn in_place_matches_the_scalar_mapping() {
        let mut bytes: Vec<u8> = (0..=255).collect();
        dequantize_in_place(&mut bytes, 3, 8);
        for (q, &b) in bytes.iter().enumerate() {
            assert_eq!(b as u32, dequantize(q as u32, 3, 8));
        }
        let mut pairs: Vec<u8> = [0u16, 1, 9000, 65535]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        dequantize_in_place(&mut pairs, 4, 16);
        let got: Vec<u16> = pairs
            .chunks_exact(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect();
        assert_eq!(got, vec![0, 9, 65535, 65535]);
    }
}
