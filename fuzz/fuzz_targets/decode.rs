//! Any bytes: the decoder returns an image or an error, never panics, hangs or over-allocates.
//! The first byte chooses whether the CRC is checked, so the fuzzer also reaches the stream
//! checks behind it without forging checksums.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let options = l3::DecodeOptions {
        limits: l3::Limits {
            max_output_bytes: 64 << 20,
            ..Default::default()
        },
        verify_checksum: mode & 1 == 1,
        parallel: mode & 2 == 2,
    };
    let decoded = l3::decode::decode(file, &options);
    if let Ok((header, pixels)) = &decoded {
        assert_eq!(pixels.len() as u64, header.output_bytes());
    }
    // The f32 CHW layout runs the same checks through another sink: same verdict.
    if mode & 4 == 4 {
        if let Ok(header) = l3::read_header(file) {
            if header.check_limits(&options.limits).is_ok() {
                let mut out = vec![0f32; header.sample_count() as usize];
                let r = l3::decode_into_f32_chw(file, &mut out, l3::Normalize::IMAGENET, &options);
                assert_eq!(r.is_ok(), decoded.is_ok());
            }
        }
    }
    let _ = l3::inspect::inspect(file, &options);
});
