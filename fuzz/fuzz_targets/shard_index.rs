//! Any bytes as a shard: the header, trailer and index parsers return entries or an error,
//! never panic or over-allocate; accepted entries lie inside the data area, level-major.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((header, trailer, records)) = l3::shard::format::parse_shard(data) {
        for r in &records {
            assert_eq!(r.levels.len(), header.level_count as usize);
            for l in &r.levels {
                assert!(l.offset >= l3::shard::format::HEADER_LEN);
                assert!(l.offset + l.len <= trailer.index_offset);
            }
        }
    }
});
