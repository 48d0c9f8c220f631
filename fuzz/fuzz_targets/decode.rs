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
    if let Ok((header, pixels)) = l3::decode::decode(file, &options) {
        assert_eq!(pixels.len() as u64, header.output_bytes());
    }
    let _ = l3::inspect::inspect(file, &options);
});
