//! Any bytes that start with l3's magic through the `image` crate's L3 hook
//! (`register_image_hooks`), as `image::load_from_memory` users reach it: format detection
//! by the magic, then `L3ImageDecoder` under image's limits; an image or an error, never a
//! panic. An accepted image equals l3's own decode of the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static HOOKS: std::sync::Once = std::sync::Once::new();
    HOOKS.call_once(|| {
        l3::image_support::register_image_hooks();
    });
    let mut reader = image::ImageReader::new(std::io::Cursor::new(data));
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(1 << 24);
    reader.limits(limits);
    let Ok(reader) = reader.with_guessed_format() else {
        return;
    };
    // Only L3 files: image's other formats (PNM, ...) are image's to fuzz.
    if !data.starts_with(&l3::format::MAGIC) {
        return;
    }
    if let Ok(img) = reader.decode() {
        let options = l3::DecodeOptions {
            limits: l3::Limits {
                max_output_bytes: 1 << 24,
                ..l3::Limits::default()
            },
            ..l3::DecodeOptions::default()
        };
        let ours = l3::image_support::decode_image(data, &options).unwrap();
        assert_eq!(img, ours);
    }
});
