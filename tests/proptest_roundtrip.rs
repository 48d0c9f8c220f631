//! Random images of every shape the format allows round-trip exactly, including rows whose
//! residual range needs bit width 0 and the full sample depth (8 or 16): the widths the L3
//! prototype mis-handled; and the same shapes in the compact profile (version 2), with every
//! encoder option, including single-token (zero-bit) codes and 16-bit raw bits.

use l3::inspect::Coding;
use l3::{
    ColorType, CompactOptions, CompactPredictor, DecodeOptions, EncodeOptions, FastOptions,
    FastPredictor, PredictorChoice, PredictorSet, ProfileOptions, RawImage, Samples,
};
use proptest::prelude::*;

#[derive(Debug, Clone, Copy)]
enum Content {
    Noise,
    Constant,
    Gradient,
    /// Rows of 0, 1/3 and 2/3 of full scale: with no prediction every row needs full depth.
    FullRange,
}

fn pixels(
    n: usize,
    width: usize,
    channels: usize,
    depth: u8,
    content: Content,
    seed: u64,
) -> Vec<u16> {
    let max = if depth == 8 { 255u64 } else { 65535 };
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let x = (i / channels) % width;
            let y = i / channels / width;
            (match content {
                Content::Noise => s % (max + 1),
                Content::Constant => seed % (max + 1),
                Content::Gradient => ((x * 3 + y * 5) as u64 + seed) % (max + 1),
                Content::FullRange => [0, max / 3, 2 * max / 3][(x + y) % 3],
            }) as u16
        })
        .collect()
}

fn round_trip(
    width: u32,
    height: u32,
    color: ColorType,
    depth: u8,
    content: Content,
    options: EncodeOptions,
    seed: u64,
) -> l3::inspect::Inspection {
    let channels = color.channels() as usize;
    let n = width as usize * height as usize * channels;
    let px = pixels(n, width as usize, channels, depth, content, seed);
    let px8: Vec<u8> = px.iter().map(|&v| v as u8).collect();
    let samples = if depth == 8 {
        Samples::U8(&px8)
    } else {
        Samples::U16(&px)
    };
    let raw = RawImage {
        width,
        height,
        color,
        samples,
    };
    let file = l3::encode::encode(&raw, &options).unwrap();
    let (header, decoded) = l3::decode::decode(&file, &DecodeOptions::default()).unwrap();
    assert_eq!(
        (header.width, header.height, header.color, header.depth),
        (width, height, color, depth)
    );
    assert_eq!(header.max_error, options.max_error);
    let e = options.max_error as u32;
    if depth == 8 {
        if e == 0 {
            assert_eq!(decoded, px8);
        } else {
            for (k, (&a, &b)) in px8.iter().zip(&decoded).enumerate() {
                assert!(
                    (a as u32).abs_diff(b as u32) <= e,
                    "sample {k}: {a} -> {b}, e = {e}"
                );
            }
        }
    } else {
        let mut out = vec![0u16; n];
        l3::decode_into_u16(&file, &mut out, &DecodeOptions::default()).unwrap();
        assert_eq!(decoded, bytemuck::cast_slice::<u16, u8>(&out));
        if e == 0 {
            assert_eq!(out, px);
        } else {
            for (k, (&a, &b)) in px.iter().zip(&out).enumerate() {
                assert!(
                    (a as u32).abs_diff(b as u32) <= e,
                    "sample {k}: {a} -> {b}, e = {e}"
                );
            }
        }
    }
    l3::inspect::inspect(&file, &DecodeOptions::default()).unwrap()
}

fn color() -> impl Strategy<Value = ColorType> {
    prop_oneof![
        Just(ColorType::Gray),
        Just(ColorType::GrayAlpha),
        Just(ColorType::Rgb),
        Just(ColorType::Rgba)
    ]
}

fn content() -> impl Strategy<Value = Content> {
    prop_oneof![
        Just(Content::Noise),
        Just(Content::Constant),
        Just(Content::Gradient),
        Just(Content::FullRange)
    ]
}

fn predictor() -> impl Strategy<Value = PredictorChoice> {
    prop_oneof![
        Just(PredictorChoice::Best),
        Just(PredictorChoice::Fixed(FastPredictor::None)),
        Just(PredictorChoice::Fixed(FastPredictor::Up)),
        Just(PredictorChoice::Fixed(FastPredictor::L3Paeth)),
        Just(PredictorChoice::Fixed(FastPredictor::UpMean)),
    ]
}

fn dimension() -> impl Strategy<Value = u32> {
    // Weighted toward 1 and patch-size boundaries.
    prop_oneof![
        Just(1u32),
        1u32..20,
        Just(63),
        Just(64),
        Just(65),
        Just(129),
        1u32..300
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_images_round_trip(
        width in dimension(), height in dimension(), color in color(),
        depth in prop_oneof![Just(8u8), Just(16u8)], content in content(),
        patch_log2 in 3u8..=7, predictor in predictor(), parallel in any::<bool>(), seed in any::<u64>()
    ) {
        let options = EncodeOptions {
            profile: ProfileOptions::Fast(FastOptions { predictor }), patch_log2, parallel,
            max_error: 0,
        };
        round_trip(width, height, color, depth, content, options, seed);
    }

    #[test]
    fn random_images_round_trip_compact(
        width in dimension(), height in dimension(), color in color(),
        depth in prop_oneof![Just(8u8), Just(16u8)], content in content(),
        patch_log2 in 3u8..=7, compact in compact_options(), parallel in any::<bool>(),
        seed in any::<u64>()
    ) {
        let options = EncodeOptions {
            profile: ProfileOptions::Compact(compact), patch_log2, parallel, max_error: 0,
        };
        round_trip(width, height, color, depth, content, options, seed);
    }

    /// Error-bounded files of both profiles decode within their bound everywhere (edges, both
    /// ends of the range: the contents include flat extremes and full-range noise).
    #[test]
    fn error_bounded_images_decode_within_the_bound(
        width in dimension(), height in dimension(), color in color(),
        depth in prop_oneof![Just(8u8), Just(16u8)], content in content(),
        patch_log2 in 3u8..=7, compact in compact_options(), fast in any::<bool>(),
        max_error in prop_oneof![1u16..=4, 5u16..=127], seed in any::<u64>()
    ) {
        let profile = if fast {
            ProfileOptions::Fast(FastOptions { predictor: l3::PredictorChoice::Best })
        } else {
            ProfileOptions::Compact(compact)
        };
        let options = EncodeOptions { profile, patch_log2, parallel: true, max_error };
        round_trip(width, height, color, depth, content, options, seed);
    }
}

fn compact_options() -> impl Strategy<Value = CompactOptions> {
    let predictors = prop_oneof![
        Just(PredictorSet::all()),
        proptest::sample::select(CompactPredictor::ALL.to_vec())
            .prop_map(|p| PredictorSet::only(&[p])),
    ];
    (
        predictors,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(predictors, subtract_green, pair_tokens, run_tokens, palette, shared_codes)| {
                CompactOptions {
                    predictors,
                    subtract_green,
                    pair_tokens,
                    run_tokens,
                    palette,
                    shared_codes,
                }
            },
        )
}

fn nbit_counts(ins: &l3::inspect::Inspection) -> [u64; 17] {
    match ins.coding {
        Coding::Fast { nbit_counts, .. } => nbit_counts,
        Coding::Compact { .. } => panic!("expected a version-1 file"),
    }
}

#[test]
fn compact_constant_images_cost_almost_nothing() {
    // One token per channel: zero-bit codes, so the file is headers only.
    for depth in [8, 16] {
        let options = EncodeOptions {
            profile: ProfileOptions::Compact(Default::default()),
            ..Default::default()
        };
        let ins = round_trip(
            640,
            480,
            ColorType::Rgb,
            depth,
            Content::Constant,
            options,
            7,
        );
        assert!(
            ins.bits_per_pixel() < 0.1,
            "depth {depth}: {} bpp",
            ins.bits_per_pixel()
        );
    }
}

#[test]
fn compact_is_smaller_than_fast_on_smooth_content_and_round_trips_noise() {
    let compact = EncodeOptions {
        profile: ProfileOptions::Compact(Default::default()),
        ..Default::default()
    };
    let fast = round_trip(
        200,
        150,
        ColorType::Rgb,
        8,
        Content::Gradient,
        EncodeOptions::for_profile(l3::Profile::Fast),
        3,
    );
    let small = round_trip(200, 150, ColorType::Rgb, 8, Content::Gradient, compact, 3);
    assert!(
        small.file_bytes < fast.file_bytes,
        "{} vs {}",
        small.file_bytes,
        fast.file_bytes
    );
    // Noise: the worst case, full-depth residuals in every token bucket; 16-bit raw bits.
    for depth in [8, 16] {
        let ins = round_trip(130, 70, ColorType::Rgba, depth, Content::Noise, compact, 11);
        assert!(matches!(ins.coding, Coding::Compact { .. }));
    }
}

#[test]
fn constant_rows_use_bit_width_zero() {
    for depth in [8, 16] {
        let ins = round_trip(
            70,
            65,
            ColorType::Rgb,
            depth,
            Content::Constant,
            EncodeOptions::for_profile(l3::Profile::Fast),
            12345,
        );
        let counts = nbit_counts(&ins);
        let rows: u64 = counts.iter().sum();
        assert_eq!(counts[0], rows, "depth {depth}: {counts:?}");
    }
}

#[test]
fn full_range_rows_use_the_full_depth() {
    for depth in [8u8, 16] {
        let options = EncodeOptions {
            profile: ProfileOptions::Fast(FastOptions {
                predictor: PredictorChoice::Fixed(FastPredictor::None),
            }),
            ..Default::default()
        };
        let ins = round_trip(
            67,
            66,
            ColorType::Gray,
            depth,
            Content::FullRange,
            options,
            1,
        );
        let counts = nbit_counts(&ins);
        assert!(
            counts[depth as usize] > 0,
            "depth {depth}: no full-width rows in {counts:?}"
        );
    }
}

#[test]
fn noise_needs_full_depth_and_still_round_trips() {
    let options = EncodeOptions {
        profile: ProfileOptions::Fast(FastOptions {
            predictor: PredictorChoice::Fixed(FastPredictor::Up),
        }),
        ..Default::default()
    };
    let ins = round_trip(128, 128, ColorType::Rgba, 8, Content::Noise, options, 99);
    assert!(nbit_counts(&ins)[8] > 0, "{:?}", nbit_counts(&ins));
}
