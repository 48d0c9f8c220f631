//! The fast profile's encoder (format version 1): per (patch, channel), the predictor whose
//! rows take the fewest bits (or a fixed one), then each row as base + fixed-width deltas.

use super::predict::predict_row;
use super::{FastOptions, PredictorChoice};
use crate::codec::bits::BitWriter;
use crate::codec::planes::extract_plane;
use crate::codec::simd::{avx2_dispatch, Avx2};
use crate::format::fast::{nbit_field_bits, row_bits, FastPredictor};
use crate::format::Header;
use crate::raw::{RawImage, Samples};

/// Chooses `(base, nbit)` for a row of residuals so every `(r - base) mod 2^depth` fits in
/// `nbit` bits. Two candidates: the plain min..max range, and the range of residuals read as
/// signed around zero (so -1 and +1, i.e. 2^depth - 1 and 1, need 2 bits, not `depth`).
/// The decoder does not care which was chosen: it adds base and delta modulo 2^depth.
#[inline(always)]
pub(crate) fn row_params(residuals: &[u16], depth: u8) -> (u32, u32) {
    let mask = (1u32 << depth) - 1;
    let half = 1u32 << (depth - 1);
    let (mut lo, mut hi, mut lo_s, mut hi_s) = (u32::MAX, 0u32, u32::MAX, 0u32);
    for &r in residuals {
        let r = r as u32;
        let s = (r + half) & mask;
        lo = lo.min(r);
        hi = hi.max(r);
        lo_s = lo_s.min(s);
        hi_s = hi_s.max(s);
    }
    let (base, span) = if hi_s - lo_s < hi - lo {
        ((lo_s.wrapping_sub(half)) & mask, hi_s - lo_s)
    } else {
        (lo, hi - lo)
    };
    (base, 32 - span.leading_zeros())
}

/// Residuals of one row: the sample minus its prediction, modulo 2^depth.
#[inline(always)]
fn residual_row(row: &[u16], prediction: &[u16], mask: u16, out: &mut [u16]) {
    for ((o, &x), &p) in out.iter_mut().zip(row).zip(prediction) {
        *o = x.wrapping_sub(p) & mask;
    }
}

/// Row buffers reused across the streams a thread encodes.
struct RowScratch {
    prediction: Vec<u16>,
    residuals: Vec<u16>,
}

impl RowScratch {
    fn new(width: usize) -> Self {
        RowScratch {
            prediction: vec![0; width],
            residuals: vec![0; width],
        }
    }

    /// Residuals of row `y` of `plane` (`pw` wide) under `predictor`, in `self.residuals`.
    #[inline(always)]
    fn residuals(
        &mut self,
        plane: &[u16],
        pw: usize,
        y: usize,
        predictor: FastPredictor,
        mask: u16,
    ) {
        let row = &plane[y * pw..(y + 1) * pw];
        if y == 0 || predictor == FastPredictor::None {
            for (o, &x) in self.residuals.iter_mut().zip(row) {
                *o = x & mask;
            }
        } else {
            predict_row(
                predictor,
                &plane[(y - 1) * pw..y * pw],
                &mut self.prediction,
            );
            residual_row(row, &self.prediction, mask, &mut self.residuals);
        }
    }
}

/// Estimated bits of a plane's rows with `predictor`, from its odd rows (for ranking).
#[inline(always)]
fn plane_bits(
    plane: &[u16],
    pw: usize,
    header: &Header,
    predictor: FastPredictor,
    rows: &mut RowScratch,
) -> u64 {
    let mask = ((1u32 << header.depth) - 1) as u16;
    let mut bits = 0;
    // Row 0 is stored unpredicted whatever the predictor, and every other row is a good
    // enough sample to rank predictors: half the search work for a negligible size cost.
    for y in (1..plane.len() / pw).step_by(2) {
        rows.residuals(plane, pw, y, predictor, mask);
        let (_, nbit) = row_params(&rows.residuals, header.depth);
        bits += row_bits(header.depth, pw as u32, nbit);
    }
    bits
}

/// Encodes one channel plane of one patch as a stream.
#[inline(always)]
fn encode_plane(
    plane: &[u16],
    pw: usize,
    header: &Header,
    predictor: FastPredictor,
    rows: &mut RowScratch,
) -> Vec<u8> {
    let depth = header.depth;
    let mask = ((1u32 << depth) - 1) as u16;
    let nb = nbit_field_bits(depth);
    let ph = plane.len() / pw;
    let (_, max) = header.stream_size_bounds(pw as u32, ph as u32);
    let mut w = BitWriter::with_prefix(&[predictor as u8], max as usize);
    for y in 0..ph {
        rows.residuals(plane, pw, y, predictor, mask);
        let (base, nbit) = row_params(&rows.residuals, depth);
        w.write(nbit, nb);
        w.write(base, depth as u32);
        if nbit > 0 {
            for &r in &rows.residuals {
                w.write((r.wrapping_sub(base as u16) & mask) as u32, nbit);
            }
        }
    }
    w.finish()
}

avx2_dispatch! {
    /// Encodes one patch, all channels (one stream each); with AVX2 code generation where
    /// the CPU has it.
    pub(crate) fn encode_patch(
        image: &RawImage,
        header: &Header,
        options: &FastOptions,
        patch: u64,
    ) -> Vec<Vec<u8>> => encode_patch_portable;
}

/// The encoder's work for one patch; everything it calls is inlined so the AVX2 copy above
/// vectorises all of it.
#[inline(always)]
pub(crate) fn encode_patch_portable(
    image: &RawImage,
    header: &Header,
    options: &FastOptions,
    patch: u64,
    _avx2: Option<Avx2>,
) -> Vec<Vec<u8>> {
    let (x0, y0, pw, ph) = header.patch_rect(patch);
    let rect = (x0 as usize, y0 as usize, pw as usize, ph as usize);
    let pw = pw as usize;
    let mut plane = vec![0u16; pw * ph as usize];
    let mut rows = RowScratch::new(pw);
    // Loops, not iterator closures: closures would not be inlined into the AVX2 copy.
    let mut streams = Vec::with_capacity(header.channels() as usize);
    for c in 0..header.channels() as usize {
        match image.samples {
            Samples::U8(s) => extract_plane(s, header, rect, c, &mut plane),
            Samples::U16(s) => extract_plane(s, header, rect, c, &mut plane),
        }
        let predictor = match options.predictor {
            PredictorChoice::Fixed(p) => p,
            PredictorChoice::Best => {
                // A plain loop, not min_by_key: a closure would not be inlined into the
                // AVX2 copy of this function.
                let mut best = (u64::MAX, FastPredictor::None);
                for p in FastPredictor::ALL {
                    let bits = plane_bits(&plane, pw, header, p, &mut rows);
                    if bits < best.0 {
                        best = (bits, p);
                    }
                }
                best.1
            }
        };
        streams.push(encode_plane(&plane, pw, header, predictor, &mut rows));
    }
    streams
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_params_handles_constant_full_range_and_wrapping_rows() {
        assert_eq!(row_params(&[7, 7, 7], 8), (7, 0));
        assert_eq!(row_params(&[0, 85, 170], 8).1, 8);
        // 0 and 255 are neighbours modulo 256: one bit.
        assert_eq!(row_params(&[0, 255], 8), (255, 1));
        assert_eq!(row_params(&[0, 65535, 1], 16), (65535, 2));
        // -1, 0, +1 mod 256: base -1 (255), span 2 -> 2 bits.
        assert_eq!(row_params(&[255, 0, 1], 8), (255, 2));
        assert_eq!(row_params(&[0, 128], 8).1, 8);
    }
}

/// A patterned test image (every sample distinct-ish, all bit widths exercised), shared by the
/// encoder's and decoder's unit tests.
#[cfg(test)]
mod portable_tests {
    use super::*;
    use crate::raw::TestImage;
    use crate::{encode::EncodeOptions, format::ColorType};

    /// The portable path (what CPUs without AVX2 run) writes the same streams as the
    /// dispatched one, for every predictor choice, depth and channel count.
    #[test]
    fn portable_and_dispatched_encoders_agree() {
        for (color, depth) in [
            (ColorType::Gray, 8),
            (ColorType::Rgb, 8),
            (ColorType::Rgba, 16),
        ] {
            let test_image = TestImage::new(75, 70, color, depth);
            let image = test_image.raw();
            let header =
                crate::encode::validate(&image, &EncodeOptions::for_profile(crate::Profile::Fast))
                    .unwrap();
            for predictor in [
                PredictorChoice::Best,
                PredictorChoice::Fixed(FastPredictor::L3Paeth),
            ] {
                let choice = FastOptions { predictor };
                for patch in 0..header.patch_count() {
                    assert_eq!(
                        encode_patch_portable(&image, &header, &choice, patch, None),
                        encode_patch(&image, &header, &choice, patch),
                        "{color:?} {depth}-bit {choice:?} patch {patch}"
                    );
                }
            }
        }
    }
}
