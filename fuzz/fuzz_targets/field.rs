//! Any bytes as a float field file (version 1, and any version through
//! `decode_float_array`): the parsers and the decoders return values or an error,
//! never panic or over-allocate; accepted runs lie inside the field; a window of a file that
//! decodes holds the whole decode's values. Half the inputs get their
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
            // A window (from the input's last bytes, any ranges, clamped by the decoder)
            // decodes the same values inside it, as bytes too.
            let [_, ny, nx] = h.shape;
            let at = |k: usize| *input.get(input.len().saturating_sub(k)).unwrap_or(&0) as u32;
            let rows = at(1) % (ny + 2)..at(2) % (ny + 2) + at(1) % (ny + 2);
            let cols = at(3) % (nx + 2)..at(4) % (nx + 2) + at(3) % (nx + 2);
            let w = Some((rows.clone(), cols.clone()));
            let (_, part) = l3::field::decode_field_window(&data, &options, w.clone()).unwrap();
            let (_, le) = l3::field::decode_field_window_le(&data, &options, w).unwrap();
            assert_eq!((part.len(), le.len()), (values.len(), values.len() * 4));
            for z in 0..h.shape[0] as usize {
                for y in rows.start.min(ny)..rows.end.min(ny) {
                    for x in cols.start.min(nx)..cols.end.min(nx) {
                        let i = (z * ny as usize + y as usize) * nx as usize + x as usize;
                        assert_eq!(part[i].to_bits(), values[i].to_bits());
                        assert_eq!(le[i * 4..i * 4 + 4], values[i].to_le_bytes());
                    }
                }
            }
        }
    }
    // The any-version entry point: whatever the version byte says, values or an error.
    if let Ok((h, values)) = l3::field::decode_float_array(&data, &options) {
        assert_eq!(values.as_slice().len() as u64, h.len());
        assert_eq!(l3::field::parse_float_array(&data).ok(), Some(h));
    }
});
