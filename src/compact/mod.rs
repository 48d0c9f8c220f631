//! The compact profile (format version 2): per-patch subtract-green, gradient prediction and
//! canonical Huffman codes over residual tokens, in segments that decode independently. The
//! syntax and constants are in [`crate::format::compact`]; its encoder, CPU decoder, Huffman
//! tables, prediction and options live here. The GPU decoder's version-2 kernel is
//! `shaders/shared/decode_compact.wgsl`.

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod huffman;
pub(crate) mod predict;

use crate::format::compact::CompactPredictor;

/// A set of compact-profile predictors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictorSet(u8);

impl PredictorSet {
    /// Every predictor of [`CompactPredictor::ALL`].
    pub const fn all() -> Self {
        PredictorSet((1 << CompactPredictor::ALL.len()) - 1)
    }
    /// Only these predictors (an empty list means [`CompactPredictor::Gradient`]).
    pub fn only(predictors: &[CompactPredictor]) -> Self {
        let bits = predictors.iter().fold(0, |m, &p| m | 1 << p as u8);
        if bits == 0 {
            PredictorSet(1 << CompactPredictor::Gradient as u8)
        } else {
            PredictorSet(bits)
        }
    }
    /// Whether `p` is in the set.
    pub const fn contains(self, p: CompactPredictor) -> bool {
        self.0 & 1 << p as u8 != 0
    }
}

/// The compact profile's encoder search. Every choice is per patch and channel and is
/// signalled in the stream, so these trade encode time for size and never affect decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOptions {
    /// Predictors to try (default: all six). Each costs one pass over the patch.
    pub predictors: PredictorSet,
    /// Try subtract-green on RGB(A) patches (default true). Costs two more planes' passes.
    pub subtract_green: bool,
    /// Allow pair tokens (default true): the encoder uses them per channel where they make
    /// the estimate smaller; smooth and JPEG-originated images gain most.
    pub pair_tokens: bool,
}

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            predictors: PredictorSet::all(),
            subtract_green: true,
            pair_tokens: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CompactOptions;
    use crate::codec::sink::InterleavedBand;
    use crate::encode::{EncodeOptions, ProfileOptions, TestImage};
    use crate::format::ColorType;

    /// The portable paths (what CPUs without AVX2 run) write and read exactly what the
    /// dispatched ones do.
    #[test]
    fn portable_and_dispatched_paths_agree() {
        for (color, depth, patch_log2) in [
            (ColorType::Gray, 8, 6),
            (ColorType::Rgb, 8, 4),
            (ColorType::Rgba, 16, 7),
        ] {
            let test_image = TestImage::new(75, 70, color, depth);
            let image = test_image.raw();
            let options = EncodeOptions {
                profile: ProfileOptions::Compact(CompactOptions::default()),
                patch_log2,
                ..Default::default()
            };
            let file = crate::encode::encode(&image, &options).unwrap();
            let layout = crate::decode::parse(&file, &Default::default()).unwrap();
            let h = layout.header;
            let mut scratch = super::encode::PatchScratch::new(&h);
            let band_bytes = h.patch_size() as usize
                * h.width as usize
                * h.channels() as usize
                * h.bytes_per_sample();
            let mut band_a = vec![0u8; band_bytes];
            let mut band_b = vec![0u8; band_bytes];
            let mut dec_a = super::decode::Scratch::new(&h);
            let mut dec_b = super::decode::Scratch::new(&h);
            for patch in 0..h.patch_count() {
                let opts = CompactOptions::default();
                assert_eq!(
                    super::encode::encode_patch_portable(
                        &image,
                        &h,
                        &opts,
                        patch,
                        &mut scratch,
                        None
                    ),
                    super::encode::encode_patch(&image, &h, &opts, patch, &mut scratch),
                    "{color:?} {depth}-bit patch {patch}"
                );
                // Only the patch's own rows of the band are compared (the band is sized
                // for a full patch row; edge bands are shorter).
                let (_, _, _, ph) = h.patch_rect(patch);
                let used = ph as usize * band_bytes / h.patch_size() as usize;
                let p = patch as usize;
                let mut sink_a = InterleavedBand::new(&h, &mut band_a[..used]);
                super::decode::decode_patch_portable(&layout, p, &mut sink_a, &mut dec_a, None)
                    .unwrap();
                let mut sink_b = InterleavedBand::new(&h, &mut band_b[..used]);
                super::decode::decode_patch(&layout, p, &mut sink_b, &mut dec_b).unwrap();
                assert_eq!(band_a, band_b, "{color:?} {depth}-bit patch {patch}");
            }
            assert_eq!(
                crate::decode::decode(&file, &Default::default()).unwrap().1,
                test_image.bytes()
            );
        }
    }
}
