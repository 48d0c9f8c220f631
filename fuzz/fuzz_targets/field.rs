//! Any bytes as a float field file (version 1, and any version through
//! `decode_float_array`): the parsers and the decoders return values or an error,
//! never panic or over-allocate; accepted runs lie inside the field. Half the inputs get their
//! CRC recomputed so mutations reach the header, image and run checks.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_options, half_with_crc};

fuzz_target!(|input: &[u8]| {
    let data = half_with_crc(input);
    let options = decode_options(1 << 24, true);
    if let Ok(layout) = l3::field::parse_field(&data) {
        let n = layout.header.len();
        for r in &layout.runs {
            assert!(r.start as u64 + r.len as u64 <= n);
        }
        if let Ok((h, values)) = l3::field::decode_field(&data, &options) {
            assert_eq!(values.len() as u64, h.len());
        }
    }
    // The any-version entry point: whatever the version byte says, values or an error.
    if let Ok((h, values)) = l3::field::decode_float_array(&data, &options) {
        assert_eq!(values.as_slice().len() as u64, h.len());
        assert_eq!(l3::field::parse_float_array(&data).ok(), Some(h));
    }
});
