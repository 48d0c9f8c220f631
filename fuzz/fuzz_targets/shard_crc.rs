//! Shared by the shard targets (included with `#[path]`): a forged index gets a valid CRC,
//! so mutations reach the field checks instead of stopping at the checksum.

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
