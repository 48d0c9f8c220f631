//! Any bytes as an index-cache entry (`src/store/index_cache.rs`): parsing returns an entry or
//! nothing, never panics or allocates past the input; an accepted entry's head and tail lie
//! inside the object it names. Half the inputs are made well-formed entries (valid CRC) from
//! the input's bytes, so mutations reach the field checks behind the CRC.
#![no_main]
use l3::store::fuzzing::{index_entry, index_entry_bytes};
use libfuzzer_sys::fuzz_target;

const URL: &str = "s3://b/ds/shard-00000.l3s";

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let len = u64::from(u16::from_le_bytes([data[1], data[2]]));
    let crc = u32::from_le_bytes([data[3], data[4], data[5], data[6]]);
    let body = &data[9..];
    let bytes = if data[0] & 1 == 1 && len as usize >= body.len() {
        // A well-formed entry: head and tail split from the body at data[7], data[8].
        let h = (data[7] as usize).min(body.len());
        let t = (data[8] as usize).min(body.len() - h);
        index_entry_bytes(URL, crc, len, &body[..h], &body[body.len() - t..])
    } else {
        body.to_vec()
    };
    if let Some((head, tail_start, tail)) = index_entry(&bytes, URL, len, crc) {
        assert!(head as u64 <= len);
        assert_eq!(tail_start + tail as u64, len);
        assert!(head + tail <= bytes.len());
    }
});
