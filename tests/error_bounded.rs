//! Error-bounded images: every bundled sample and every shared image (`../shared/data/images`,
//! or `$L3_TEST_DATA`; required with `CI=true`) at bounds 1..=4, both profiles, decodes within
//! its bound on the CPU, says so in its header, and decodes on the GPU (lavapipe in CI)
//! bit-identically to the CPU; hostile headers are refused.

mod common;

#[cfg(feature = "gpu")]
#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::decode::DecodeOptions;
use l3::raw::RawImage;
use l3::{EncodeOptions, Profile};

/// The images: the bundled samples and the shared photos/scans (PNG, 8 and 16 bits).
fn images() -> Vec<image::DynamicImage> {
    let mut paths = common::files_under(&common::samples_dir());
    if let Some(c) = common::corpus_dir() {
        paths.extend(common::files_under(&c.join("images")));
    }
    paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")))
        .map(|p| l3::read_image(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// The largest difference between the samples of `raw` and `decoded` (little-endian u16
/// pairs for 16-bit images).
fn max_difference(raw: &RawImage, decoded: &[u8]) -> u32 {
    match raw.samples {
        l3::Samples::U8(s) => s
            .iter()
            .zip(decoded)
            .map(|(&a, &b)| (a as u32).abs_diff(b as u32))
            .max()
            .unwrap_or(0),
        l3::Samples::U16(s) => s
            .iter()
            .zip(decoded.chunks_exact(2))
            .map(|(&a, b)| (a as u32).abs_diff(u16::from_le_bytes([b[0], b[1]]) as u32))
            .max()
            .unwrap_or(0),
    }
}

#[test]
fn every_image_decodes_within_its_bound() {
    let images = images();
    assert!(images.len() >= 6);
    let mut smaller = 0;
    let mut total = 0;
    #[cfg(feature = "gpu")]
    let gpu = gpu_support::gpu();
    for (i, img) in images.iter().enumerate() {
        let raw = l3::image_support::raw_image(img).unwrap();
        for profile in [Profile::Fast, Profile::Compact] {
            let lossless = l3::encode::encode(&raw, &EncodeOptions::for_profile(profile)).unwrap();
            #[cfg(feature = "gpu")]
            let mut files = Vec::new();
            for e in 1..=4u16 {
                let options = EncodeOptions {
                    max_error: e,
                    ..EncodeOptions::for_profile(profile)
                };
                let file = l3::encode::encode(&raw, &options).unwrap();
                let (header, decoded) =
                    l3::decode::decode(&file, &DecodeOptions::default()).unwrap();
                assert_eq!(header.max_error, e);
                let d = max_difference(&raw, &decoded);
                assert!(
                    d <= e as u32,
                    "image {i} ({profile:?}, e = {e}): off by {d}"
                );
                total += 1;
                smaller += (file.len() < lossless.len()) as usize;
                #[cfg(feature = "gpu")]
                files.push((file, decoded));
            }
            // The GPU decodes the four bounds as one batch, byte for byte as the CPU.
            #[cfg(feature = "gpu")]
            if let Some(gpu) = gpu {
                let refs: Vec<&[u8]> = files.iter().map(|(f, _)| f.as_slice()).collect();
                let batch = gpu
                    .decode_batch(&refs, l3::gpu::OutputLayout::Interleaved)
                    .unwrap();
                for (k, (_, cpu)) in files.iter().enumerate() {
                    assert!(
                        batch.read_back_image(k).unwrap() == *cpu,
                        "image {i} ({profile:?}, e = {}): GPU differs from CPU",
                        k + 1
                    );
                }
            }
        }
    }
    // A bound buys bytes (flat label maps may already be as small as they get).
    assert!(
        smaller * 10 >= total * 9,
        "only {smaller} of {total} files shrank"
    );
}

/// The f32 CHW layout normalises the decoded values, not the bins, on the CPU and the GPU.
#[test]
fn f32_output_normalises_the_decoded_values() {
    let img = l3::read_image(&common::samples_dir().join("skimage_coffee.png")).unwrap();
    let raw = l3::image_support::raw_image(&img).unwrap();
    let file = l3::encode::encode(
        &raw,
        &EncodeOptions {
            max_error: 3,
            ..EncodeOptions::for_profile(Profile::Compact)
        },
    )
    .unwrap();
    let (h, interleaved) = l3::decode::decode(&file, &DecodeOptions::default()).unwrap();
    let norm = l3::Normalize::IMAGENET;
    let mut chw = vec![0f32; h.sample_count() as usize];
    l3::decode_into_f32_chw(&file, &mut chw, norm, &DecodeOptions::default()).unwrap();
    let (w, hh, c) = (h.width as usize, h.height as usize, h.channels() as usize);
    for y in (0..hh).step_by(7) {
        for x in (0..w).step_by(5) {
            for ch in 0..c {
                let v = interleaved[(y * w + x) * c + ch] as u32;
                assert_eq!(chw[ch * w * hh + y * w + x], norm.apply(v, 8, ch));
            }
        }
    }
    #[cfg(feature = "gpu")]
    if let Some(gpu) = gpu_support::gpu() {
        let batch = gpu
            .decode_batch(&[&file], l3::gpu::OutputLayout::F32Chw(norm))
            .unwrap();
        let bytes = batch.read_back_image(0).unwrap();
        let got: &[f32] = bytemuck::cast_slice(&bytes);
        let worst = got
            .iter()
            .zip(&chw)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-6, "GPU f32 output off by {worst}");
    }
}

/// Headers that claim a bound inconsistently, or too large a one, are refused by name.
#[test]
fn hostile_bounds_are_refused() {
    use l3::format::{FLAG_ERROR_BOUNDED, OFFSET_FLAGS, OFFSET_MAX_ERROR};
    let img = l3::read_image(&common::samples_dir().join("skimage_camera_gray.png")).unwrap();
    let raw = l3::image_support::raw_image(&img).unwrap();
    let lossless =
        l3::encode::encode(&raw, &EncodeOptions::for_profile(l3::Profile::Fast)).unwrap();
    let bounded = l3::encode::encode(
        &raw,
        &EncodeOptions {
            max_error: 2,
            ..EncodeOptions::for_profile(l3::Profile::Fast)
        },
    )
    .unwrap();
    let mut cases = Vec::new();
    let mut flag_only = lossless.clone();
    flag_only[OFFSET_FLAGS] = FLAG_ERROR_BOUNDED;
    cases.push(flag_only);
    let mut bound_only = lossless.clone();
    bound_only[OFFSET_MAX_ERROR] = 3;
    cases.push(bound_only);
    let mut too_large = bounded.clone();
    too_large[OFFSET_MAX_ERROR] = 128;
    cases.push(too_large);
    for bad in cases {
        let err = l3::read_header(&bad).unwrap_err();
        assert!(err.to_string().contains("max_error"), "{err}");
    }
    // Unknown flags stay errors.
    let mut unknown = bounded.clone();
    unknown[OFFSET_FLAGS] |= 2;
    assert!(l3::read_header(&unknown)
        .unwrap_err()
        .to_string()
        .contains("flags"));
    // Error-bounded records are stored flat (never interlaced against lossy coarse levels),
    // and their payload says it is error-bounded.
    let levels = l3::progressive::encode_levels(
        &raw,
        &l3::progressive::ProgressiveOptions {
            levels: 3,
            max_overhead: f64::INFINITY,
        },
        &EncodeOptions {
            max_error: 1,
            ..EncodeOptions::for_profile(l3::Profile::Fast)
        },
    )
    .unwrap();
    assert_eq!(levels.scheme, l3::progressive::LevelScheme::Flat);
    assert_eq!(l3::read_header(&levels.payloads[0]).unwrap().max_error, 1);
    assert!(levels
        .matches(&raw, &l3::decode::DecodeOptions::default())
        .unwrap());
}
