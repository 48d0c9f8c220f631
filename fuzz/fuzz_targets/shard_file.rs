//! Any bytes as a shard file, read through `ShardReader` as the loader and the CLI read it:
//! single payloads, coalesced runs (gap and run size from the input) and level prefixes,
//! under a 1 MiB read limit. Each read returns bytes or an error, never panics or allocates
//! past the limit; the three ways agree: a payload read alone, in a coalesced run and inside
//! a prefix is the same bytes (or an error each way).
#![no_main]
use std::io::Write;

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::fix_index_crc;

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let (max_gap, max_read) = (1u64 << (input[0] % 24), 1u64 << (input[1] % 24));
    let mut data = input[2..].to_vec();
    if input[0] & 0x80 != 0 {
        fix_index_crc(&mut data);
    }
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(&data).unwrap();
    let limits = l3::Limits {
        max_input_bytes: 1 << 20,
        ..l3::Limits::default()
    };
    let Ok(reader) = l3::shard::ShardReader::open_with_limits(file.path(), 1 << 20, &limits) else {
        return;
    };
    let (records, levels) = (reader.len(), reader.level_count());
    let wanted: Vec<(usize, u8)> = (0..records.min(64))
        .flat_map(|i| (0..levels).map(move |l| (i, l)))
        // A payload asked twice, and one past the end, too.
        .chain([(0, 0), (records, 0)])
        .collect();
    let alone: Vec<_> = wanted
        .iter()
        .map(|&(i, l)| reader.read_level(i, l))
        .collect();
    let (coalesced, reads) = reader.read_levels_coalesced(&wanted, max_gap, max_read);
    assert_eq!(coalesced.len(), wanted.len());
    assert!(reads <= wanted.len());
    for (k, (a, c)) in alone.iter().zip(&coalesced).enumerate() {
        if let (Ok(a), Ok(c)) = (a, c) {
            assert_eq!(
                a, c,
                "payload {:?} differs read alone and coalesced",
                wanted[k]
            );
        }
        // An I/O-free shard: a payload readable alone is readable in a run, and back.
        assert_eq!(
            a.is_ok(),
            c.is_ok(),
            "payload {:?}: {a:?} / {c:?}",
            wanted[k]
        );
    }
    for level in 0..levels {
        let Ok(prefix) = reader.read_prefix(level) else {
            continue;
        };
        assert_eq!(prefix.ranges.len(), records);
        for i in 0..records.min(64) {
            for (l, p) in prefix.payloads(i).into_iter().enumerate() {
                // Flat records have no payloads above level 0 (empty ranges).
                if p.is_empty() {
                    continue;
                }
                let alone = reader.read_level(i, l as u8);
                assert!(
                    matches!(alone.as_deref(), Ok(a) if a == p),
                    "record {i} level {l}: the prefix's payload is not the one read alone"
                );
            }
        }
    }
});
