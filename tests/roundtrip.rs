//! Every image we have round-trips bit-exactly: the decoded pixels equal what the `image`
//! crate decodes from the original, for every patch size on the small ones.

mod common;

use l3::{
    CompactOptions, CompactPredictor, DecodeOptions, EncodeOptions, FastOptions, FastPredictor,
    PredictorChoice, PredictorSet, ProfileOptions,
};

fn compact() -> EncodeOptions {
    EncodeOptions {
        profile: ProfileOptions::Compact(Default::default()),
        ..Default::default()
    }
}

fn round_trip(image: &image::DynamicImage, options: &EncodeOptions) -> Result<(), String> {
    let encoded = l3::encode_image(image, options).map_err(|e| e.to_string())?;
    let decoded =
        l3::decode_image(&encoded, &DecodeOptions::default()).map_err(|e| e.to_string())?;
    if decoded.color() != image.color() {
        return Err(format!(
            "colour {:?} became {:?}",
            image.color(),
            decoded.color()
        ));
    }
    if (decoded.width(), decoded.height()) != (image.width(), image.height()) {
        return Err("dimensions changed".into());
    }
    if decoded.as_bytes() != image.as_bytes() {
        return Err("pixels differ".into());
    }
    // The single-threaded decoder into a caller buffer must agree too.
    let mut out = vec![0u8; image.as_bytes().len()];
    let serial = DecodeOptions {
        parallel: false,
        ..Default::default()
    };
    l3::decode_into(&encoded, &mut out, &serial).map_err(|e| e.to_string())?;
    if out != image.as_bytes() {
        return Err("serial decode_into differs".into());
    }
    Ok(())
}

#[test]
fn every_readable_corpus_image_round_trips() {
    let files = common::corpus_images();
    let (mut tested, mut unreadable, mut failures) = (0, Vec::new(), Vec::new());
    for path in &files {
        let image = match l3::read_image(path) {
            Ok(i) => i,
            Err(e) => {
                // PngSuite's x*.png files are deliberately corrupt; `image` rejects them.
                unreadable.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        tested += 1;
        for o in [EncodeOptions::for_profile(l3::Profile::Fast), compact()] {
            if let Err(e) = round_trip(&image, &o) {
                failures.push(format!("{} {:?}: {e}", path.display(), o.profile));
            }
        }
        // Small images: every patch size and every fixed predictor too, in both profiles.
        if (image.width() as u64 * image.height() as u64) <= 64 * 64 {
            for patch_log2 in 3..=7 {
                let fast = FastPredictor::ALL
                    .map(PredictorChoice::Fixed)
                    .into_iter()
                    .chain([PredictorChoice::Best])
                    .map(|predictor| EncodeOptions {
                        patch_log2,
                        profile: ProfileOptions::Fast(FastOptions { predictor }),
                        ..Default::default()
                    });
                let compact = CompactPredictor::ALL
                    .map(|p| CompactOptions {
                        predictors: PredictorSet::only(&[p]),
                        subtract_green: (p as u8).is_multiple_of(2),
                        pair_tokens: !(p as u8).is_multiple_of(3),
                        run_tokens: p as u8 % 2 == 1,
                        palette: p as u8 % 3 != 1,
                        shared_codes: (p as u8).is_multiple_of(2),
                    })
                    .into_iter()
                    .chain([CompactOptions::default()])
                    .map(|compact| EncodeOptions {
                        profile: ProfileOptions::Compact(compact),
                        patch_log2,
                        ..Default::default()
                    });
                for o in fast.chain(compact) {
                    if let Err(e) = round_trip(&image, &o) {
                        failures.push(format!("{} {o:?}: {e}", path.display()));
                    }
                }
            }
        }
    }
    eprintln!(
        "round-tripped {tested} images; {} unreadable by `image` (expected for corrupt PngSuite files)",
        unreadable.len()
    );
    for u in &unreadable {
        let name = std::path::Path::new(u.split(':').next().unwrap())
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        // Only PngSuite's deliberately broken x* files may be unreadable.
        assert!(name.starts_with('x'), "unexpectedly unreadable: {u}");
    }
    assert!(
        failures.is_empty(),
        "round trip failures:\n{}",
        failures.join("\n")
    );
    assert!(tested >= 6, "too few images tested: {tested}");
}

#[test]
fn crashers_fail_cleanly() {
    let Some(corpus) = common::corpus_dir() else {
        return;
    };
    let crashers = common::files_under(&corpus.join("testpngs/crashers"));
    assert!(!crashers.is_empty(), "no crasher files found");
    for path in crashers {
        let bytes = std::fs::read(&path).unwrap();
        // As image input: `image` may reject it or decode something; either way no panic,
        // and anything decoded must round-trip.
        if let Ok(image) = l3::read_image(&path) {
            for o in [EncodeOptions::for_profile(l3::Profile::Fast), compact()] {
                round_trip(&image, &o).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
        // As L3 input: a clear "not an L3 file" error.
        match l3::decode::decode(&bytes, &DecodeOptions::default()) {
            Err(l3::Error::Format(l3::FormatError::BadMagic { .. })) => {}
            other => panic!("{}: expected BadMagic, got {other:?}", path.display()),
        }
    }
}

#[test]
fn float_images_are_refused_with_a_parameter_error() {
    let img = image::DynamicImage::new_rgb32f(4, 4);
    match l3::encode_image(&img, &EncodeOptions::for_profile(l3::Profile::Fast)) {
        Err(l3::Error::Parameter(l3::ParameterError::UnsupportedPixelType(msg))) => {
            assert!(msg.contains("Rgb32F"), "{msg}")
        }
        other => panic!("expected UnsupportedPixelType, got {other:?}"),
    }
}

/// Every input format the encoder accepts through `image`: write a sample in that format,
/// read it back as `l3 encode` would, and round-trip what `image` decodes.
#[test]
fn every_input_format_round_trips() {
    use image::ImageFormat as F;
    let tmp = tempfile::tempdir().unwrap();
    let rgb = l3::read_image(&common::samples_dir().join("skimage_coffee.png")).unwrap();
    let rgba = l3::read_image(&common::samples_dir().join("jxl_riaphotographs_alpha.png")).unwrap();
    let cases = [
        (F::Jpeg, "jpg", &rgb),
        (F::Tiff, "tiff", &rgba),
        (F::Pnm, "ppm", &rgb),
        (F::Bmp, "bmp", &rgba),
        (F::WebP, "webp", &rgba),
        (F::Qoi, "qoi", &rgba),
        (F::Tga, "tga", &rgb),
        (F::Gif, "gif", &rgba),
    ];
    for (format, ext, image) in cases {
        let path = tmp.path().join(format!("input.{ext}"));
        image.save_with_format(&path, format).unwrap();
        let read = l3::read_image(&path).unwrap_or_else(|e| panic!("{ext}: {e}"));
        for o in [EncodeOptions::for_profile(l3::Profile::Fast), compact()] {
            round_trip(&read, &o).unwrap_or_else(|e| panic!("{ext}: {e}"));
        }
    }
}
