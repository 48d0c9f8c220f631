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
    // A window decode (only the rows above the window's end where chunks are planes) of any
    // input: values or an error, never a panic; of an input that decodes whole, the same
    // values in the window (rows from the input's first byte).
    let rows_end = input.first().map_or(1, |&b| b as u32 + 1);
    let window =
        l3::field::decode_lossless_window(&data, &options, Some((0..rows_end, 0..u32::MAX)));
    if let Ok((h, values)) = l3::field::decode_lossless(&data, &options) {
        assert_eq!(values.as_bytes().len() as u64, h.output_bytes());
        let (_, part) = window.expect("the whole array decoded");
        let nd = h.shape.len();
        let (ny, nx) = if nd >= 2 {
            (h.shape[nd - 2] as usize, h.shape[nd - 1] as usize)
        } else {
            (1, h.shape[0] as usize)
        };
        let size = h.dtype.size();
        let (whole, part) = (values.as_bytes(), part.as_bytes());
        let plane = ny * nx * size;
        for p in 0..whole.len() / plane.max(1) {
            let rows = (rows_end as usize).min(ny) * nx * size;
            let span = p * plane..p * plane + rows;
            assert!(part[span.clone()] == whole[span]);
        }
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
