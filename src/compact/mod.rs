//! The compact profile (format version 2): per-patch subtract-green, gradient prediction and
//! canonical Huffman codes over residual tokens, in segments that decode independently. The
//! syntax and constants are in [`crate::format::compact`]; its encoder, CPU decoder, Huffman
//! tables, prediction and options live here. The GPU decoder's version-2 kernel is
//! `shaders/shared/decode_compact.wgsl`.

pub(crate) mod decode;
pub(crate) mod encode;
mod header;
pub(crate) mod huffman;
pub(crate) mod palette;
#[cfg(target_arch = "x86_64")]
mod palette_avx2;
pub(crate) mod predict;
#[cfg(target_arch = "x86_64")]
mod predict_avx2;
mod scratch;
pub(crate) mod shared_codes;

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
    /// Allow run tokens (default true; only with `pair_tokens`): runs of zero positions
    /// and the end-of-row token, used per channel where they make it smaller by
    /// [`RUN_MIN_GAIN`] at least. Flat images (label maps, artwork, screenshots) gain most;
    /// a channel with runs decodes on a slower, symbol-by-symbol path, so photos keep the
    /// faster one unless runs clearly pay.
    pub run_tokens: bool,
    /// Try a palette per patch (default true): a patch of at most 256 distinct pixels may be
    /// coded as one plane of indices into a list of them, where the estimate says it is
    /// smaller. Label maps, artwork and screenshots gain most; costs a pass over each patch
    /// (photos leave it after a few hundred pixels) and, where it is tried, the index
    /// plane's predictor search.
    pub palette: bool,
    /// Let neighbouring patches of a row share a channel's code (default true) where each
    /// patch that joins adds at most 96 bits of code tables and symbols (segment-length
    /// fields and padding aside). l3's CPU decoder then builds that channel's tables once
    /// for the run instead of once per patch: table builds were about a sixth of the decode
    /// time of a disparity map, and label maps, gray images and artwork decode 5-17 % faster
    /// for files 0.2-1.5 % larger; photos grow 0.1-0.4 %. The format is the same either way.
    pub shared_codes: bool,
}

/// Fraction of a channel's bits that run tokens must save before the encoder uses them (see
/// [`CompactOptions::run_tokens`]).
pub const RUN_MIN_GAIN: f64 = 0.03;

impl Default for CompactOptions {
    fn default() -> Self {
        CompactOptions {
            predictors: PredictorSet::all(),
            subtract_green: true,
            pair_tokens: true,
            run_tokens: true,
            palette: true,
            shared_codes: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CompactOptions;
    use crate::codec::sink::InterleavedBand;
    use crate::encode::{EncodeOptions, ProfileOptions};
    use crate::format::ColorType;
    use crate::raw::{RawImage, Samples, TestImage};

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
            // Each patch with its own codes, so that it can be written alone.
            let write = |plan: super::encode::PatchPlan| {
                let codes = super::shared_codes::choose_codes(&[plan.histograms(depth)], false);
                super::encode::write_patch(plan, &codes[0], depth)
            };
            for patch in 0..h.patch_count() {
                let opts = CompactOptions::default();
                assert_eq!(
                    write(super::encode::analyse_patch_portable(
                        &image,
                        &h,
                        &opts,
                        patch,
                        &mut scratch,
                        None
                    )),
                    write(super::encode::analyse_patch(
                        &image,
                        &h,
                        &opts,
                        patch,
                        &mut scratch
                    )),
                    "{color:?} {depth}-bit patch {patch}"
                );
                // Only the patch's own rows of the band are compared (the band is sized
                // for a full patch row; edge bands are shorter).
                let (_, _, _, ph) = h.patch_rect(patch);
                let used = ph as usize * band_bytes / h.patch_size() as usize;
                let p = patch as usize;
                let mut sink_a = InterleavedBand::new(&h, &mut band_a[..used]).portable();
                super::decode::decode_patch_portable(
                    &layout,
                    p,
                    u32::MAX,
                    &mut sink_a,
                    &mut dec_a,
                    None,
                )
                .unwrap();
                let mut sink_b = InterleavedBand::new(&h, &mut band_b[..used]);
                super::decode::decode_patch(&layout, p, u32::MAX, &mut sink_b, &mut dec_b).unwrap();
                assert_eq!(band_a, band_b, "{color:?} {depth}-bit patch {patch}");
            }
            assert_eq!(
                crate::decode::decode(&file, &Default::default()).unwrap().1,
                test_image.bytes()
            );
        }
    }

    /// A label map: concentric rings and stripes of a few colours (flat areas, straight and
    /// curved edges), `channels` samples per pixel of `depth` bits.
    fn label_map(w: u32, h: u32, channels: usize, depth: u8) -> Vec<u16> {
        let palette = [
            [0u16, 0, 0, 255],
            [128, 0, 0, 255],
            [0, 128, 64, 200],
            [192, 192, 0, 9],
        ];
        let scale = if depth == 16 { 257 } else { 1 };
        let mut v = Vec::new();
        for y in 0..h as i64 {
            for x in 0..w as i64 {
                let r2 = (x - 40) * (x - 40) + (y - 30) * (y - 30);
                let class = if r2 < 300 {
                    1
                } else if r2 < 900 {
                    2
                } else if x % 50 < 9 {
                    3
                } else {
                    0
                };
                v.extend(palette[class][..channels].iter().map(|&s| s * scale));
            }
        }
        v
    }

    fn raw_of<'a>(w: u32, h: u32, color: ColorType, s16: &'a [u16], s8: &'a [u8]) -> RawImage<'a> {
        RawImage {
            width: w,
            height: h,
            color,
            samples: if s8.is_empty() {
                Samples::U16(s16)
            } else {
                Samples::U8(s8)
            },
        }
    }

    /// How many of the file's channel codes have run tokens.
    fn channels_with_runs(file: &[u8]) -> usize {
        let layout = crate::decode::parse(file, &Default::default()).unwrap();
        let h = &layout.header;
        (0..h.patch_count() as usize)
            .map(|p| {
                let (_, _, _, ph) = h.patch_rect(p as u64);
                let header = super::decode::parse_patch_header(h, layout.stream(p), ph).unwrap();
                header.channels.iter().filter(|c| c.runs).count()
            })
            .sum()
    }

    /// Label maps of every channel count, both depths, odd and even sizes, small and large
    /// patches, encoded with an option on and off (`set`): with it on, `used` finds it in
    /// the file; with it off, not; both decode exactly, and the file is smaller with it.
    fn option_shrinks_label_maps(
        option: &str,
        set: fn(&mut CompactOptions, bool),
        used: fn(&[u8]) -> usize,
    ) {
        for (w, h, color, depth, patch_log2) in [
            (75, 70, ColorType::Rgb, 8, 6),
            (64, 64, ColorType::Gray, 8, 6),
            (131, 97, ColorType::Rgba, 8, 7),
            (77, 45, ColorType::GrayAlpha, 16, 4),
            (90, 66, ColorType::Rgb, 16, 3),
        ] {
            let s16 = label_map(w, h, color.channels() as usize, depth);
            let s8: Vec<u8> = if depth == 8 {
                s16.iter().map(|&v| v as u8).collect()
            } else {
                Vec::new()
            };
            let image = raw_of(w, h, color, &s16, &s8);
            let encode = |on| {
                // Without shared codes, which trade bytes for decode speed and would blur
                // the option's own effect on size.
                let mut compact = CompactOptions {
                    shared_codes: false,
                    ..Default::default()
                };
                set(&mut compact, on);
                let options = EncodeOptions {
                    profile: ProfileOptions::Compact(compact),
                    patch_log2,
                    ..Default::default()
                };
                crate::encode::encode(&image, &options).unwrap()
            };
            let (with, without) = (encode(true), encode(false));
            let what = format!("{option}, {w}x{h} {color:?} {depth}-bit, patch 2^{patch_log2}");
            assert!(used(&with) > 0, "{what}: not used");
            assert_eq!(used(&without), 0, "{what}");
            assert!(
                with.len() < without.len(),
                "{what}: {} bytes with it, {} without",
                with.len(),
                without.len()
            );
            let expect = if depth == 8 {
                s8.clone()
            } else {
                bytemuck::cast_slice(&s16).to_vec()
            };
            for file in [&with, &without] {
                assert!(crate::decode::decode(file, &Default::default()).unwrap().1 == expect);
            }
        }
    }

    /// Flat images use run tokens, decode exactly, and come out smaller than without them.
    #[test]
    fn label_maps_use_run_tokens_and_round_trip() {
        option_shrinks_label_maps("run tokens", |o, on| o.run_tokens = on, channels_with_runs);
    }

    /// Table builds a one-thread decode of `file` makes: a channel's tables are built
    /// unless the patch before it in the row had the same code lengths for that channel.
    fn table_builds(file: &[u8]) -> usize {
        let layout = crate::decode::parse(file, &Default::default()).unwrap();
        let h = &layout.header;
        let mut builds = 0;
        let mut held = vec![None; h.channels() as usize];
        for p in 0..h.patch_count() as usize {
            if (p as u64).is_multiple_of(h.patches_x() as u64) {
                held.fill(None);
            }
            let (_, _, _, ph) = h.patch_rect(p as u64);
            let header = super::decode::parse_patch_header(h, layout.stream(p), ph).unwrap();
            for (c, channel) in header.channels.iter().enumerate() {
                if held[c] != Some(channel.lengths) {
                    builds += 1;
                    held[c] = Some(channel.lengths);
                }
            }
        }
        builds
    }

    /// Rows of more patches than one run of shared codes, in windows of one run or of the
    /// whole image, on one thread or many: the same bytes, which decode exactly, and the
    /// codes shared within runs only.
    #[test]
    fn windows_and_threads_give_the_same_file() {
        let (w, h, color) = (1100u32, 40u32, ColorType::Rgb);
        let samples: Vec<u8> = (0..w * h * 3)
            .map(|i| ((i / 3 % w) / 9 + (i / 3 / w) / 4 + (i % 3) * 40 + (i * 7 % 5) / 4) as u8)
            .collect();
        let image = raw_of(w, h, color, &[], &samples);
        let options = EncodeOptions {
            profile: ProfileOptions::Compact(CompactOptions::default()),
            patch_log2: 3,
            ..Default::default()
        };
        let header = crate::encode::validate(&image, &options).unwrap();
        assert!(header.patches_x() as u64 > 2 * super::encode::RUN_PATCHES);
        let compact = CompactOptions::default();
        // Windows of one run, of two runs starting mid-row (about 100 patches of 192
        // samples), and of the whole image.
        let files: Vec<Vec<u8>> = [1, 100 * 192, u64::MAX]
            .into_iter()
            .flat_map(|window| [(true, window), (false, window)])
            .map(|(parallel, window)| {
                let streams =
                    super::encode::encode_windows(&image, &header, &compact, parallel, window);
                crate::encode::assemble(&header, streams.iter())
            })
            .collect();
        for file in &files[1..] {
            assert!(*file == files[0]);
        }
        assert!(files[0] == crate::encode::encode(&image, &options).unwrap());
        assert!(
            crate::decode::decode(&files[0], &Default::default())
                .unwrap()
                .1
                == samples
        );
        // Runs start afresh: no patch at a run's start takes its left neighbour's code.
        let layout = crate::decode::parse(&files[0], &Default::default()).unwrap();
        let lengths = |p: u64| {
            let (_, _, _, ph) = header.patch_rect(p);
            let patch =
                super::decode::parse_patch_header(&header, layout.stream(p as usize), ph).unwrap();
            patch.channels.iter().map(|c| c.lengths).collect::<Vec<_>>()
        };
        // Channel by channel: a patch's code equal to its left neighbour's.
        let (mut shared_inside, mut shared_across) = (0, 0);
        for p in 1..header.patch_count() {
            let x = p % header.patches_x() as u64;
            let (this, left) = (lengths(p), lengths(p - 1));
            let same = this.iter().zip(&left).filter(|(a, b)| a == b).count();
            if x != 0 && x.is_multiple_of(super::encode::RUN_PATCHES) {
                shared_across += same;
            } else if x != 0 {
                shared_inside += same;
            }
        }
        assert!(shared_inside > 300, "{shared_inside} channels share codes");
        assert_eq!(shared_across, 0);
    }

    /// A smooth, slightly noisy image (ramps with steps, like a disparity map) encoded with
    /// shared codes and without: with them fewer table builds, a file at most
    /// SHARED_CODE_BITS larger per build saved (plus a byte per patch of stream padding),
    /// and both decode exactly.
    #[test]
    fn shared_codes_cut_table_builds_and_round_trip() {
        for (color, patch_log2) in [(ColorType::Gray, 6), (ColorType::Rgb, 5)] {
            let (w, h) = (300u32, 200u32);
            let channels = color.channels() as u32;
            let mut seed = 3u64;
            let samples: Vec<u8> = (0..w * h * channels)
                .map(|i| {
                    let (x, y) = ((i / channels) % w, (i / channels) / w);
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    let noise = ((seed >> 61) as u32).min(2);
                    ((x / 7 + y / 5 + (x / 90) * 20 + noise + i % channels * 30) % 256) as u8
                })
                .collect();
            let image = raw_of(w, h, color, &[], &samples);
            let encode = |shared_codes| {
                let options = EncodeOptions {
                    profile: ProfileOptions::Compact(CompactOptions {
                        shared_codes,
                        ..Default::default()
                    }),
                    patch_log2,
                    ..Default::default()
                };
                crate::encode::encode(&image, &options).unwrap()
            };
            let (with, without) = (encode(true), encode(false));
            let (builds_with, builds_without) = (table_builds(&with), table_builds(&without));
            assert!(
                builds_with * 2 < builds_without,
                "{color:?}: {builds_with} table builds with shared codes, {builds_without} without"
            );
            let patches = crate::decode::parse(&with, &Default::default())
                .unwrap()
                .header
                .patch_count() as usize;
            let saved = builds_without - builds_with;
            let bound = without.len()
                + saved * super::shared_codes::SHARED_CODE_BITS as usize / 8
                + patches;
            assert!(
                with.len() <= bound,
                "{color:?}: {} bytes, bound {bound}",
                with.len()
            );
            for file in [&with, &without] {
                assert!(crate::decode::decode(file, &Default::default()).unwrap().1 == samples);
            }
        }
    }

    /// An 8x8 gray compact file (one patch: 8 one-row segments) around the stream that
    /// `write` makes.
    fn forged_8x8_gray(write: impl FnOnce(&mut crate::codec::bits::BitWriter)) -> Vec<u8> {
        let zeros = vec![0u8; 64];
        let image = raw_of(8, 8, ColorType::Gray, &[], &zeros);
        let options = EncodeOptions {
            profile: ProfileOptions::Compact(CompactOptions::default()),
            patch_log2: 3,
            ..Default::default()
        };
        let header = crate::encode::validate(&image, &options).unwrap();
        let mut w = crate::codec::bits::BitWriter::with_prefix(&[], 16);
        write(&mut w);
        crate::encode::assemble(&header, [w.finish()].iter())
    }

    /// A channel header with predictor none whose code has the one token `token` (zero bits
    /// long), and every segment `segment_bits` long.
    fn single_token_channel(w: &mut crate::codec::bits::BitWriter, token: u32, segment_bits: u32) {
        use crate::format::compact::{
            PREDICTOR_BITS, SEGMENT_BASE_BITS, SEGMENT_WIDTH_BITS, TOKEN_COUNT_BITS,
        };
        w.write(0, PREDICTOR_BITS);
        w.write(token + 1, TOKEN_COUNT_BITS);
        for _ in 0..token {
            w.write(0, 1);
        }
        // Length 1 (previous + 1): the single used token, a zero-bit code.
        w.write(0b001, 3);
        w.write(0, SEGMENT_WIDTH_BITS);
        w.write(segment_bits, SEGMENT_BASE_BITS);
    }

    /// An 8x8 gray file (predictor none) whose only code is the run token of 4..=7 positions
    /// (zero bits long, 2 raw bits), with `raw[y]` as row y's raw bits; a row has 4
    /// positions, so only raw 0 fits.
    fn forged_run_file(raw: [u32; 8]) -> Vec<u8> {
        use crate::format::compact::{run_token_first, TRANSFORM_BITS};
        forged_8x8_gray(|w| {
            w.write(0, TRANSFORM_BITS);
            single_token_channel(w, run_token_first(8) + 2, 2);
            for r in raw {
                w.write(r, 2);
            }
        })
    }

    /// A run that fits its row decodes (to zeros); one past the row's end is an error that
    /// says so, in every row (rows are decoded two at a time in one-channel images: the
    /// first and the second of a pair alike).
    #[test]
    fn forged_runs_decode_or_are_named() {
        let good = forged_run_file([0; 8]);
        assert_eq!(
            crate::decode::decode(&good, &Default::default()).unwrap().1,
            vec![0u8; 64]
        );
        for row in 0..8 {
            let mut raw = [0; 8];
            raw[row] = 1;
            let err = crate::decode::decode(&forged_run_file(raw), &Default::default())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("run token past the row's end"),
                "row {row}: {err}"
            );
        }
    }

    /// How many of the file's patches have a palette.
    fn palette_patches(file: &[u8]) -> usize {
        let layout = crate::decode::parse(file, &Default::default()).unwrap();
        let h = &layout.header;
        (0..h.patch_count() as usize)
            .filter(|&p| {
                let (_, _, _, ph) = h.patch_rect(p as u64);
                super::decode::parse_patch_header(h, layout.stream(p), ph)
                    .unwrap()
                    .palette
                    > 0
            })
            .count()
    }

    /// Label maps take the palette, decode exactly, and come out smaller than without it.
    #[test]
    fn label_maps_use_palettes_and_round_trip() {
        option_shrinks_label_maps("palette", |o, on| o.palette = on, palette_patches);
    }

    /// An 8x8 gray file (predictor none) with a palette of `count` entries 10, 20, 30, ...
    /// whose index plane is all 2 (a one-token code of zigzag value 4), cut to `keep_bits`
    /// of palette entries when given.
    fn forged_palette_file(count: u32, keep_bits: Option<u32>) -> Vec<u8> {
        use crate::format::compact::{Transform, PALETTE_COUNT_BITS, TRANSFORM_BITS};
        forged_8x8_gray(|w| {
            w.write(Transform::Palette as u32, TRANSFORM_BITS);
            w.write(count - 1, PALETTE_COUNT_BITS);
            if let Some(bits) = keep_bits {
                // A stream that ends inside the palette.
                for _ in 0..bits / 8 {
                    w.write(0, 8);
                }
                return;
            }
            for i in 0..count {
                w.write(10 * (i + 1), 8);
            }
            single_token_channel(w, 4, 0);
        })
    }

    /// A palette index inside the palette decodes to its entry; one past it, and a palette
    /// past the stream's end, are errors that say so. (The GPU twin's agreement on corrupt
    /// palette and run streams is `gpu::tests`' corruption test, over label-map files.)
    #[test]
    fn forged_palettes_decode_or_are_named() {
        let good = forged_palette_file(3, None);
        assert_eq!(
            crate::decode::decode(&good, &Default::default()).unwrap().1,
            vec![30u8; 64]
        );
        let err = crate::decode::decode(&forged_palette_file(2, None), &Default::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("palette index"), "{err}");
        let err = crate::decode::decode(&forged_palette_file(200, Some(48)), &Default::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("palette"), "{err}");
    }

    /// The decoder keeps each thread's scratch between files (`Scratch::with`): files of
    /// other channel counts and depths, decoded one after the other on one thread, each
    /// decode to their own pixels, and the first again after the others.
    #[test]
    fn scratch_kept_between_files_decodes_each_exactly() {
        let images: Vec<TestImage> = [
            (ColorType::Rgb, 8),
            (ColorType::Rgb, 16),
            (ColorType::Gray, 8),
            (ColorType::Rgba, 16),
            (ColorType::Rgb, 8),
        ]
        .into_iter()
        .map(|(color, depth)| TestImage::new(150, 140, color, depth))
        .collect();
        let options = EncodeOptions {
            profile: ProfileOptions::Compact(CompactOptions::default()),
            ..Default::default()
        };
        let files: Vec<Vec<u8>> = images
            .iter()
            .map(|i| crate::encode::encode(&i.raw(), &options).unwrap())
            .collect();
        let one_thread = crate::decode::DecodeOptions {
            parallel: false,
            ..Default::default()
        };
        for round in 0..2 {
            for (i, (file, image)) in files.iter().zip(&images).enumerate() {
                let (_, pixels) = crate::decode::decode(file, &one_thread).unwrap();
                assert!(pixels == image.bytes(), "round {round}, file {i}");
            }
        }
    }

    /// One-channel patches decode four rows at a time (four segments' bit positions in one
    /// loop) where four rows remain, then two, then one: gray images of noise and of smooth
    /// content (the buffered and the symbol-by-symbol loops), 8- and 16-bit, patches 1 to 67
    /// rows high (fewer than four segments, rows left over after groups of four), decode to
    /// their pixels, whole and through windows ending on every row of the first patch row.
    #[test]
    fn gray_patches_decode_four_rows_at_a_time_exactly() {
        let value = |smooth: bool| {
            move |x: u32, y: u32, _c: u32| -> u16 {
                if smooth {
                    (x * 3 + y * 5 + (x * y) % 7) as u16
                } else {
                    ((x * 7919) ^ (y * 104729) ^ (x * y * 31)) as u16
                }
            }
        };
        let one_thread = crate::decode::DecodeOptions {
            parallel: false,
            ..Default::default()
        };
        for depth in [8u8, 16] {
            for smooth in [false, true] {
                for h in [1u32, 2, 3, 4, 5, 7, 8, 9, 15, 17, 63, 64, 65, 67] {
                    let image = TestImage::from_fn(70, h, ColorType::Gray, depth, value(smooth));
                    let options = EncodeOptions {
                        profile: ProfileOptions::Compact(CompactOptions::default()),
                        patch_log2: 6,
                        ..Default::default()
                    };
                    let file = crate::encode::encode(&image.raw(), &options).unwrap();
                    let (_, pixels) = crate::decode::decode(&file, &one_thread).unwrap();
                    let what = format!("{depth}-bit, smooth {smooth}, {h} rows");
                    assert!(pixels == image.bytes(), "{what}");
                    let layout = crate::decode::parse(&file, &one_thread).unwrap();
                    let row = 70 * depth as usize / 8;
                    for end in 1..=h.min(64) {
                        let mut part = vec![0u8; pixels.len()];
                        crate::decode::decode_layout_window(
                            &layout,
                            &mut part,
                            0..70,
                            0..end,
                            false,
                        )
                        .unwrap();
                        assert!(
                            part[..end as usize * row] == pixels[..end as usize * row],
                            "{what}, window of {end} rows"
                        );
                    }
                }
            }
        }
    }
}
