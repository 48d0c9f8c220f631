//! Any bytes as a lossless float array (field version 2): the header parser and the decoder
//! return values or an error, never panic or over-allocate; decoded values match the header.
//! Half the inputs get their CRC recomputed so mutations reach the structural checks, and
//! every input that decodes is re-encoded and must round-trip bit for bit.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_options, half_with_crc};

fuzz_target!(|input: &[u8]| {
    let data = half_with_crc(input);
    let options = decode_options(1 << 24, true);
    let _ = l3::field::parse_lossless(&data);
    if let Ok((h, values)) = l3::field::decode_lossless(&data, &options) {
        assert_eq!(values.as_bytes().len() as u64, h.output_bytes());
        let o = l3::field::LosslessOptions {
            fill_value: h.fill_value,
            parallel: false,
            ..Default::default()
        };
        let again = l3::field::encode_lossless(values.as_slice(), &h.shape, &o).unwrap();
        let (_, back) = l3::field::decode_lossless(&again, &options).unwrap();
        assert!(back.as_bytes() == values.as_bytes());
    }
});
