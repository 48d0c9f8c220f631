//! Shared by the targets that include it with `#[path]`: the decode options they run under
//! and the forged checksums (the single-file formats' trailing CRC, a shard's index CRC) that
//! let mutations reach the checks behind them.
#![allow(dead_code)]

/// Options for one fuzzed decode: at most `max_output_bytes` of output, one thread, the
/// checksum verified where `verify_checksum`.
pub fn decode_options(max_output_bytes: u64, verify_checksum: bool) -> l3::DecodeOptions {
    l3::DecodeOptions {
        limits: l3::Limits {
            max_output_bytes,
            ..l3::Limits::default()
        },
        parallel: false,
        verify_checksum,
    }
}

/// `f` with its last four bytes replaced by the CRC-32 of the rest (unchanged under four
/// bytes).
pub fn with_crc(f: &[u8]) -> Vec<u8> {
    let mut v = f.to_vec();
    if v.len() >= 4 {
        let body = v.len() - 4;
        let crc = crc32fast::hash(&v[..body]);
        v[body..].copy_from_slice(&crc.to_le_bytes());
    }
    v
}

/// `input`, with its trailing CRC recomputed ([`with_crc`]) where its first byte is odd: half
/// the inputs, so that mutations reach the structural checks behind the checksum.
pub fn half_with_crc(input: &[u8]) -> Vec<u8> {
    if input.first().is_some_and(|b| b & 1 == 1) {
        with_crc(input)
    } else {
        input.to_vec()
    }
}

/// Recomputes the trailer's index CRC, if the trailer's offsets point inside the input.
pub fn fix_index_crc(b: &mut [u8]) {
    let len = b.len();
    if len < 48 {
        return;
    }
    let t = len - 32;
    let offset = u64::from_le_bytes(b[t..t + 8].try_into().unwrap()) as usize;
    if offset >= 16 && offset <= t {
        let crc = crc32fast::hash(&b[offset..t]);
        b[t + 24..t + 28].copy_from_slice(&crc.to_le_bytes());
    }
}

/// `input`, with its index CRC recomputed ([`fix_index_crc`]) where its first byte is odd:
/// half the inputs.
pub fn half_with_index_crc(input: &[u8]) -> Vec<u8> {
    let mut owned = input.to_vec();
    if input.first().is_some_and(|b| b & 1 == 1) {
        fix_index_crc(&mut owned);
    }
    owned
}
