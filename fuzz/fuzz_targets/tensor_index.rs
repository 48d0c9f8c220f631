//! Any bytes as a tensor shard: the header, trailer and index parsers return entries or an
//! error, never panic or over-allocate; accepted payloads lie inside the data area, in record
//! and array order, and every accepted array decodes (its payload's header checked against
//! the entry first) to exactly its shape and type, or fails with an error.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_options, half_with_index_crc};

fuzz_target!(|input: &[u8]| {
    // Half the inputs get their index CRC recomputed, so mutations reach the field checks.
    let owned = half_with_index_crc(input);
    let data = owned.as_slice();
    let Ok((trailer, entries)) = l3::shard::tensor_format::parse_tensor_shard(data) else {
        return;
    };
    let options = decode_options(1 << 24, false);
    let mut expected = l3::shard::format::HEADER_LEN;
    for e in &entries {
        assert!((1..=l3::tensor::MAX_ARRAYS).contains(&e.arrays.len()));
        for a in &e.arrays {
            assert_eq!(a.payload.offset, expected);
            expected = a.payload.offset + a.payload.len;
            assert!(expected <= trailer.index_offset);
            let payload = &data[a.payload.offset as usize..expected as usize];
            if let Ok(array) = l3::tensor::decode_array(&a.spec, payload, &options) {
                assert_eq!(array.shape(), a.spec.shape.as_slice());
                assert_eq!(array.dtype(), a.spec.dtype);
                assert_eq!(array.bytes().len() as u64, a.spec.byte_len());
            }
        }
    }
    assert_eq!(expected, trailer.index_offset);
});
