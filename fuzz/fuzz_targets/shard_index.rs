//! Any bytes as a shard: the header, trailer and index parsers return entries or an error,
//! never panic or over-allocate; accepted entries lie inside the data area, level-major, and
//! every level of every accepted record decodes (payload shapes checked, refinements or
//! subsampling run) or fails with an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_options, half_with_index_crc};

fuzz_target!(|input: &[u8]| {
    // Half the inputs get their index CRC recomputed (and the payloads' L3 checksums are not
    // verified below), so mutations reach the field checks and the level decoding instead of
    // stopping at a checksum.
    let owned = half_with_index_crc(input);
    let data = owned.as_slice();
    let Ok((header, trailer, records)) = l3::shard::format::parse_shard(data) else {
        return;
    };
    let options = decode_options(1 << 24, false);
    for r in &records {
        assert_eq!(r.levels.len(), header.level_count as usize);
        for l in &r.levels {
            assert!(l.offset >= l3::shard::format::HEADER_LEN);
            assert!(l.offset + l.len <= trailer.index_offset);
        }
        let payloads: Vec<&[u8]> = r
            .levels
            .iter()
            .map(|l| &data[l.offset as usize..(l.offset + l.len) as usize])
            .collect();
        let stored = r.stored(header.level_count, &payloads);
        for level in 0..header.level_count {
            if let Ok(img) = l3::progressive::decode_level(&stored, level, &options) {
                let (w, h) =
                    l3::progressive::level_dims(r.width, r.height, header.level_count, level);
                assert_eq!(
                    img.data.len() as u64,
                    w as u64 * h as u64 * r.channels as u64 * (r.depth as u64 / 8)
                );
            }
        }
    }
});
