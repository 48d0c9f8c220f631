//! The CPU decoder's output layouts: `decode_to_layout` and `decode_into_f32_chw` write what
//! the interleaved decoder writes, rearranged and normalised with `Normalize::apply` to the
//! bit, on the samples and the corpus, in both profiles; and the `image` crate reads L3
//! files through its hooks.

mod common;
#[path = "common/gpu_support.rs"]
mod gpu_support;

use l3::{
    decode_into_f32_chw, decode_to_layout, DecodeOptions, EncodeOptions, Error, Normalize,
    OutputLayout, ParameterError, Profile,
};

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn every_layout_matches_the_interleaved_decoder_on_the_corpus() {
    let norms = [
        Normalize::UNIT,
        Normalize::IMAGENET,
        Normalize {
            mean: [0.5, 0.25, 0.125, 0.0],
            std: [0.3, 0.7, 1.5, 2.0],
        },
    ];
    let mut checked = 0;
    // Every file once, alternating profiles and normalisations, so both profiles see both
    // depths and every channel count.
    for (i, path) in common::corpus_images().iter().enumerate() {
        let Ok(img) = l3::read_image(path) else {
            continue;
        };
        let profile = if i % 2 == 0 {
            Profile::Fast
        } else {
            Profile::Compact
        };
        let Ok(file) = l3::encode_image(&img, &EncodeOptions::for_profile(profile)) else {
            continue;
        };
        let options = DecodeOptions {
            parallel: i % 3 != 0,
            ..Default::default()
        };
        let (_, interleaved) = l3::decode::decode(&file, &options).unwrap();
        // Interleaved through decode_to_layout: the same bytes.
        let mut out = vec![0u8; interleaved.len()];
        decode_to_layout(&file, &mut out, OutputLayout::Interleaved, &options).unwrap();
        assert_eq!(out, interleaved, "{}", path.display());
        // f32 CHW: bit-equal to the definition, through both entry points.
        let norm = norms[i % norms.len()];
        let expected = gpu_support::expected_f32_chw(&file, &norm);
        let mut values = vec![0f32; expected.len()];
        decode_into_f32_chw(&file, &mut values, norm, &options).unwrap();
        assert!(
            same_bits(&values, &expected),
            "{} {profile:?}",
            path.display()
        );
        // As bytes, at an offset that is not 4-byte aligned (the copying path).
        let mut bytes = vec![0u8; expected.len() * 4 + 1];
        decode_to_layout(&file, &mut bytes[1..], OutputLayout::F32Chw(norm), &options).unwrap();
        let from_bytes: Vec<f32> = bytes[1..]
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        assert!(same_bits(&from_bytes, &expected), "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} images checked");
}

/// Palette patches take their own output path (an interleaved output writes whole packed
/// pixels; other layouts look the samples up): label maps, which the encoder stores with
/// palettes, decode to the source pixels and to the same f32 values as any other file, in
/// every channel count and both depths.
#[test]
fn palette_patches_decode_alike_in_every_layout() {
    let mut rng = gpu_support::Rng(0x9e37_79b9_7f4a_7c15);
    let norm = Normalize::IMAGENET;
    for c in 1..=4u8 {
        for depth in [8u8, 16] {
            let (w, h) = (131, 70);
            let samples = gpu_support::label_samples(&mut rng, w, h, c, depth);
            let options = EncodeOptions::for_profile(Profile::Compact);
            let file = gpu_support::encode_raw(w, h, c, depth, &samples, &options);
            let what = format!("{c} channels, {depth}-bit");
            let inspection = l3::inspect::inspect(&file, &DecodeOptions::default()).unwrap();
            let l3::inspect::Coding::Compact {
                transform_counts, ..
            } = inspection.coding
            else {
                panic!("{what}: not a compact file");
            };
            // Gray label maps with dense values go without a palette (see the encoder).
            if c > 1 {
                assert!(transform_counts[2] > 0, "{what}: no palette patch");
            }
            let (_, interleaved) = l3::decode::decode(&file, &DecodeOptions::default()).unwrap();
            let source: Vec<u8> = if depth == 8 {
                samples.iter().map(|&v| v as u8).collect()
            } else {
                samples.iter().flat_map(|&v| v.to_ne_bytes()).collect()
            };
            assert_eq!(interleaved, source, "{what}");
            let expected = gpu_support::expected_f32_chw(&file, &norm);
            let mut values = vec![0f32; expected.len()];
            decode_into_f32_chw(&file, &mut values, norm, &DecodeOptions::default()).unwrap();
            assert!(same_bits(&values, &expected), "{what}");
        }
    }
}

#[test]
fn wrong_buffer_sizes_are_parameter_errors() {
    let path = common::samples_dir().join("skimage_coffee.png");
    let img = l3::read_image(&path).unwrap();
    let file = l3::encode_image(&img, &EncodeOptions::for_profile(l3::Profile::Fast)).unwrap();
    let n = (img.width() * img.height() * 3) as usize;
    let mut short = vec![0f32; n - 1];
    assert!(matches!(
        decode_into_f32_chw(&file, &mut short, Normalize::UNIT, &Default::default()),
        Err(Error::Parameter(ParameterError::BufferSize { .. }))
    ));
    // Interleaved-sized bytes are too few for f32.
    let mut bytes = vec![0u8; n];
    assert!(matches!(
        decode_to_layout(
            &file,
            &mut bytes,
            OutputLayout::F32Chw(Normalize::UNIT),
            &Default::default()
        ),
        Err(Error::Parameter(ParameterError::BufferSize { .. }))
    ));
}

#[test]
fn the_image_crate_opens_l3_files_through_its_hooks() {
    l3::register_image_hooks();
    // A second registration is refused, and harmless.
    assert!(!l3::register_image_hooks());
    let dir = tempfile::tempdir().unwrap();
    for (name, profile) in [
        ("skimage_coffee.png", Profile::Fast),
        ("jxl_hdr_room_16bit.png", Profile::Compact),
        ("jxl_riaphotographs_alpha.png", Profile::Fast),
    ] {
        let img = l3::read_image(&common::samples_dir().join(name)).unwrap();
        let file = l3::encode_image(&img, &EncodeOptions::for_profile(profile)).unwrap();
        let path = dir.path().join(name).with_extension("l3");
        std::fs::write(&path, &file).unwrap();
        // By extension, and by content with another extension.
        let opened = image::open(&path).unwrap();
        assert_eq!(opened, img, "{name}");
        let renamed = dir.path().join(name).with_extension("bin");
        std::fs::write(&renamed, &file).unwrap();
        let guessed = image::ImageReader::open(&renamed)
            .unwrap()
            .with_guessed_format()
            .unwrap()
            .decode()
            .unwrap();
        assert_eq!(guessed, img, "{name} (guessed)");
        // A corrupt file is an error, not a panic.
        let mut bad = file.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        let bad_path = dir.path().join("bad.l3");
        std::fs::write(&bad_path, &bad).unwrap();
        let err = image::open(&bad_path).unwrap_err();
        assert!(
            err.to_string().contains("checksum") || err.to_string().contains("CRC"),
            "{err}"
        );
    }
}
