//! Block-coded streams read: the head checked ([`parse_blocks`]: what a GPU decode relies
//! on), and the values decoded on rayon's pool ([`decode_blocks`]; [`decode_block`] is the
//! CPU twin of `blocks_decode`).

use rayon::prelude::*;

use super::code::unpack_lengths;
use super::*;
use crate::error::FormatError;

/// Values one task of the decoder decodes at least (whole bands with a column stride, so a
/// task's values are one run of the array).
const TASK_VALUES: usize = 1 << 14;

/// A checked block-coded stream's head ([`parse_blocks`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BlocksHeader {
    /// Values.
    pub values: u32,
    /// The stored bound: every value decodes within it of the value encoded.
    pub bound: f32,
    /// Payload words.
    pub payload_words: u32,
    /// Code length per symbol.
    pub lengths: [u32; SYMBOLS],
    /// The blocks' stride (0: no prediction; see [`encode_blocks`]).
    pub stride: u32,
}

impl BlocksHeader {
    /// Words of the whole stream.
    pub fn stream_words(&self) -> usize {
        let (_, groups, length_words) = counts_of(self.values as usize, self.stride as usize);
        HEAD_WORDS + groups + length_words + self.payload_words as usize
    }
}

fn word(data: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(data[4 * i..4 * i + 4].try_into().unwrap())
}

fn bad(field: &'static str, word_index: usize, value: u64, reason: &'static str) -> FormatError {
    FormatError::InvalidHeader {
        field,
        offset: 4 * word_index as u64,
        value,
        reason,
    }
}

/// Checks a stream's head, code, length and group offsets (what a GPU decode relies on;
/// the blocks themselves are checked as they decode); `max_values` is checked before
/// anything is allocated.
pub fn parse_blocks(data: &[u8], max_values: u64) -> Result<BlocksHeader> {
    let len = data.len() as u64;
    if len < 4 * HEAD_WORDS as u64 {
        return Err(FormatError::Truncated {
            what: "block-coded stream head",
            offset: 0,
            end: 4 * HEAD_WORDS as u64,
            len,
        }
        .into());
    }
    if word(data, 0) != BLOCKS_MAGIC {
        return Err(bad("magic", 0, word(data, 0) as u64, "expected \"L3B2\"").into());
    }
    let n = word(data, 1);
    if n as u64 > MAX_VALUES.min(max_values) {
        return Err(LimitsError::OutputBytes {
            needed: n as u64 * 4,
            max: MAX_VALUES.min(max_values) * 4,
        }
        .into());
    }
    let eb = word(data, 2);
    let e = f32::from_bits(eb);
    if eb != 0 && (eb & BOUND_LOW_BITS != 0 || !e.is_normal() || e < 0.0) {
        return Err(bad(
            "bound",
            2,
            eb as u64,
            "0 or a positive normal f32 with an 8-bit significand",
        )
        .into());
    }
    let stride = word(data, 7);
    if !stride_ok(n as usize, stride as usize) {
        return Err(bad(
            "stride",
            7,
            stride as u64,
            "0, 1, or a divisor of the values' count",
        )
        .into());
    }
    let lw = [word(data, 4), word(data, 5), word(data, 6)];
    if lw[2] >> (4 * (SYMBOLS - 16)) != 0 {
        return Err(bad("code lengths", 6, lw[2] as u64, "the unused nibbles zero").into());
    }
    let lengths = unpack_lengths(&lw);
    if canonical_codes(&lengths).is_none() {
        return Err(bad(
            "code lengths",
            4,
            lw[0] as u64,
            "a prefix code of lengths at most 11",
        )
        .into());
    }
    let header = BlocksHeader {
        values: n,
        bound: e,
        payload_words: word(data, 3),
        lengths,
        stride,
    };
    let total = header.stream_words() as u64 * 4;
    if len != total {
        return Err(FormatError::Truncated {
            what: "block-coded stream (its length must be exactly what its head says)",
            offset: 0,
            end: total,
            len,
        }
        .into());
    }
    let (blocks, groups, _) = counts_of(n as usize, stride as usize);
    let bytes_at = HEAD_WORDS + groups;
    let mut at = 0u64;
    for g in 0..groups {
        let o = word(data, HEAD_WORDS + g);
        if o as u64 != at {
            return Err(bad(
                "group offset",
                HEAD_WORDS + g,
                o as u64,
                "the words of the groups before",
            )
            .into());
        }
        let mut bytes = 0u64;
        for b in g * GROUP_BLOCKS..blocks.min((g + 1) * GROUP_BLOCKS) {
            let nb = (word(data, bytes_at + b / 4) >> (8 * (b % 4))) & 0xff;
            if nb > MAX_BLOCK_BYTES {
                return Err(bad("block bytes", bytes_at + b / 4, nb as u64, "at most 172").into());
            }
            bytes += nb as u64;
        }
        at += bytes.div_ceil(4);
    }
    if blocks % 4 != 0 && word(data, bytes_at + blocks / 4) >> (8 * (blocks % 4)) != 0 {
        return Err(bad(
            "block bytes",
            bytes_at + blocks / 4,
            word(data, bytes_at + blocks / 4) as u64,
            "the unused bytes zero",
        )
        .into());
    }
    if at != header.payload_words as u64 {
        return Err(bad(
            "payload words",
            3,
            header.payload_words as u64,
            "the groups' words",
        )
        .into());
    }
    Ok(header)
}

/// Reads `n <= 16` bits from bit `pos` of `words` (bits past the end read as 0).
fn read(words: &[u32], pos: u64, n: u32) -> u32 {
    let at = (pos / 32) as usize;
    let s = (pos % 32) as u32;
    let lo = words.get(at).copied().unwrap_or(0) >> s;
    let hi = if s + n > 32 {
        words.get(at + 1).copied().unwrap_or(0) << (32 - s)
    } else {
        0
    };
    (lo | hi) & ((1u32 << n) - 1)
}

/// Decodes a block's `count` values from bit `pos` of `payload`, each into `out[first + j
/// step]` (predicted by the one before it where `predict`); None if a code is not in the
/// table, a value is out of range or the block's bits are not `bytes` bytes.
#[allow(clippy::too_many_arguments)]
pub fn decode_block(
    payload: &[u32],
    pos: u64,
    bytes: u32,
    (first, step, count): (usize, usize, usize),
    predict: bool,
    table: &[u32],
    e: f32,
    out: &mut [f32],
) -> Option<()> {
    let mut p = pos;
    let mut prev = 0i32;
    for j in 0..count {
        let t = table[read(payload, p, MAX_CODE) as usize];
        let l = t >> 8;
        if l == 0 {
            return None;
        }
        p += l as u64;
        let s = t & 0xff;
        out[first + j * step] = if s == ESCAPE {
            let v = read(payload, p, 16) | (read(payload, p + 16, 16) << 16);
            p += 32;
            prev = 0;
            f32::from_bits(v)
        } else {
            let extra = s.saturating_sub(1);
            let z = if s == 0 {
                0
            } else {
                (1 << extra) | read(payload, p, extra)
            };
            p += extra as u64;
            let q = unzigzag(z).wrapping_add(if predict { prev } else { 0 });
            prev = q;
            if q.unsigned_abs() >= K_LIMIT {
                return None;
            }
            reconstruct(q, e)
        };
    }
    if (p - pos).div_ceil(8) != bytes as u64 {
        return None;
    }
    Some(())
}

/// Decodes a block-coded stream ([`parse_blocks`] first); any malformed stream is an error.
pub fn decode_blocks(data: &[u8], max_values: u64) -> Result<Vec<f32>> {
    let header = parse_blocks(data, max_values)?;
    let n = header.values as usize;
    let stride = header.stride as usize;
    let (blocks, groups, length_words) = counts_of(n, stride);
    let words: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let offsets = &words[HEAD_WORDS..HEAD_WORDS + groups];
    let block_bytes = &words[HEAD_WORDS + groups..HEAD_WORDS + groups + length_words];
    let payload = &words[HEAD_WORDS + groups + length_words..];
    let codes = canonical_codes(&header.lengths).expect("checked by parse_blocks");
    let table = decode_table(&header.lengths, &codes);
    // Each block's first bit and bytes, checked to lie in the payload.
    let mut places = Vec::with_capacity(blocks);
    let mut pos = 0u64;
    for b in 0..blocks {
        if b % GROUP_BLOCKS == 0 {
            pos = 32 * offsets[b / GROUP_BLOCKS] as u64;
        }
        let bytes = (block_bytes[b / 4] >> (8 * (b % 4))) & 0xff;
        let end = pos + 8 * bytes as u64;
        if end > 32 * payload.len() as u64 {
            return Err(bad(
                "block bytes",
                HEAD_WORDS + groups + b / 4,
                bytes as u64,
                "within the payload",
            )
            .into());
        }
        places.push((pos, bytes));
        pos = end;
    }
    // Tasks of whole blocks (with a column stride whole bands) whose values are one run of
    // the array: `per` blocks hold `32 per` values.
    let per = if stride <= 1 {
        TASK_VALUES / BLOCK
    } else {
        stride * (TASK_VALUES / (BLOCK * stride)).max(1)
    };
    let mut out = vec![0f32; n];
    let failed: Vec<usize> = out
        .par_chunks_mut(per * BLOCK)
        .enumerate()
        .filter_map(|(task, chunk)| {
            let base = task * per * BLOCK;
            let end = blocks.min((task + 1) * per);
            for (b, &(pos, bytes)) in places.iter().enumerate().take(end).skip(task * per) {
                let (first, step, count) = block_values(n, stride, b);
                let ok = decode_block(
                    payload,
                    pos,
                    bytes,
                    (first - base, step, count),
                    stride > 0,
                    &table,
                    header.bound,
                    chunk,
                );
                if ok.is_none() {
                    return Some(b);
                }
            }
            None
        })
        .collect();
    if let Some(&b) = failed.iter().min() {
        return Err(bad(
            "block",
            HEAD_WORDS + groups + b / 4,
            b as u64,
            "its codes, in range, and their bits fill exactly its bytes",
        )
        .into());
    }
    Ok(out)
}
