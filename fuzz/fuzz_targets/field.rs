//! Any bytes as a float field file: the parser and the decoder return values or an error,
//! never panic or over-allocate; accepted runs lie inside the field. Half the inputs get their
//! CRC recomputed so mutations reach the header, image and run checks.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let mut data = input.to_vec();
    if input.first().is_some_and(|b| b & 1 == 1) && data.len() >= 4 {
        let body = data.len() - 4;
        let crc = crc32fast::hash(&data[..body]);
        data[body..].copy_from_slice(&crc.to_le_bytes());
    }
    let options = l3::DecodeOptions {
        limits: l3::Limits {
            max_output_bytes: 1 << 24,
            ..l3::Limits::default()
        },
        parallel: false,
        verify_checksum: true,
    };
    if let Ok(layout) = l3::field::parse_field(&data) {
        let n = layout.header.len();
        for r in &layout.runs {
            assert!(r.start as u64 + r.len as u64 <= n);
        }
        if let Ok((h, values)) = l3::field::decode_field(&data, &options) {
            assert_eq!(values.len() as u64, h.len());
        }
    }
});
