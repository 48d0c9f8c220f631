//! The compact profile (format version 2): per-patch subtract-green, gradient prediction and
//! canonical Huffman codes over residual tokens, in segments that decode independently. The
//! syntax and constants are in [`crate::format::compact`].

pub(crate) mod decode;
pub(crate) mod encode;
pub(crate) mod huffman;

#[cfg(test)]
mod tests {
    use crate::encode::{CompactOptions, EncodeOptions, TestImage};
    use crate::format::{ColorType, Profile};

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
                profile: Profile::Compact,
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
                    super::encode::encode_patch_portable(&image, &h, &opts, patch, &mut scratch),
                    super::encode::encode_patch(&image, &h, &opts, patch, &mut scratch),
                    "{color:?} {depth}-bit patch {patch}"
                );
                // Only the patch's own rows of the band are compared (the band is sized
                // for a full patch row; edge bands are shorter).
                let (_, _, _, ph) = h.patch_rect(patch);
                let used = ph as usize * band_bytes / h.patch_size() as usize;
                let p = patch as usize;
                super::decode::decode_patch_portable(&layout, p, &mut band_a[..used], &mut dec_a)
                    .unwrap();
                super::decode::decode_patch_into_band(&layout, p, &mut band_b[..used], &mut dec_b)
                    .unwrap();
                assert_eq!(band_a, band_b, "{color:?} {depth}-bit patch {patch}");
            }
            assert_eq!(
                crate::decode::decode(&file, &Default::default()).unwrap().1,
                test_image.bytes()
            );
        }
    }
}
