//! Block-coded arrays (SPEC.md, "Block-coded arrays"): float32 values within an absolute
//! bound in a format a GPU encodes and decodes in one pass each, with no host work between
//! (no code tables, no per-array choices): the in-memory format of training activations kept
//! on the device. Blocks of [`BLOCK`] values, each at one bit width; a block with zeros may
//! store a bit mask and only its other values; a block the quantiser cannot hold (NaN,
//! infinities, values too far from zero for the bound) is stored as its raw bits.
//!
//! The quantiser keeps signs and zeros: zero decodes to +0.0, a positive value to a positive
//! one, a negative to a negative one (a ReLU mask survives coding). A value `a = |x| > 0`
//! becomes `k >= 1` and decodes to `(2k - 1) e`, `e` the stored bound: an f32 with an 8-bit
//! significand, so that `(2k - 1) e` (k below 2^15: a 16-bit odd integer) is exact in f32 on
//! every IEEE unit, fused multiply-add or not. The encoder accepts `k` only where
//! `fl(|a - (2k - 1) e|) < e`, which (rounding being monotone and `e` representable) implies
//! `|a - (2k - 1) e| < e` exactly. So the bound holds for every value by construction, and
//! the GPU kernels (`shaders/blocks.wgsl`), which run these functions' steps, give the same
//! bits.
//!
//! This module is the format in code and the CPU twin of the kernels: [`quantise`] and
//! [`analyse_block`] (kernel `blocks_analyse`), [`pack_block`] (`blocks_pack`), and
//! [`reconstruct`] (`blocks_unpack`).

use crate::error::{FormatError, LimitsError, ParameterError, Result};

#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(test)]
mod tests;

pub use crate::format::blocks::*;

/// The bound a stream stores for `max_error`: the largest f32 at most `max_error` with an
/// 8-bit significand (within 2^-7 of it, relatively), or 0 for a bound below the smallest
/// normal f32 (then every nonzero value is stored raw). Refused: a negative or NaN bound.
pub fn stored_bound(max_error: f64) -> Result<f32> {
    if max_error.is_nan() || max_error < 0.0 {
        return Err(ParameterError::InvalidFloat {
            name: "max_error",
            value_bits: max_error.to_bits(),
            reason: "a bound is a number at least 0",
        }
        .into());
    }
    // The largest f32 at most max_error (f64 -> f32 rounds to nearest).
    let mut e = max_error.min(f32::MAX as f64) as f32;
    if e as f64 > max_error {
        e = f32::from_bits(e.to_bits() - 1);
    }
    if e < f32::MIN_POSITIVE {
        return Ok(0.0);
    }
    Ok(f32::from_bits(e.to_bits() & !BOUND_LOW_BITS))
}

/// The encoder's reciprocal: `fl32(1 / (2e))` (any value would keep the bound: it only picks
/// the first `k` tried; the GPU is given these bits).
pub fn inverse_step(e: f32) -> f32 {
    (0.5 / e as f64) as f32
}

/// Whether `k` reconstructs magnitude `a` within `e`: `(2k - 1) e` is finite and
/// `fl(|a - (2k - 1) e|) < e`.
fn fits(a: f32, k: u32, e: f32) -> bool {
    let r = (2 * k - 1) as f32 * e;
    r.is_finite() && (a - r).abs() < e
}

/// The zigzag code of the value with f32 bits `bits` (0: zero; `2k`: positive; `2k - 1`:
/// negative), or None where its block must be raw (NaN, infinity, no `k` below [`K_LIMIT`]
/// that fits). `inv` is [`inverse_step`]`(e)`.
pub fn quantise(bits: u32, e: f32, inv: f32) -> Option<u32> {
    let mag = bits & 0x7fff_ffff;
    if mag == 0 {
        return Some(0);
    }
    let exp = mag >> 23;
    if exp == 255 {
        return None;
    }
    let k = if exp == 0 {
        // Subnormal (a GPU may flush it): below the smallest normal e, so k = 1 fits.
        if e > 0.0 {
            1
        } else {
            return None;
        }
    } else {
        let a = f32::from_bits(mag);
        let t = a * inv;
        if t.is_nan() || t >= (K_LIMIT - 2) as f32 {
            return None;
        }
        let k0 = t.floor() as u32;
        [k0 + 1, k0, k0 + 2]
            .into_iter()
            .find(|&k| k >= 1 && fits(a, k, e))?
    };
    Some(2 * k - (bits >> 31))
}

/// The value of zigzag code `z` (see [`quantise`]) at bound `e`.
pub fn reconstruct(z: u32, e: f32) -> f32 {
    if z == 0 {
        return 0.0;
    }
    let k = z.div_ceil(2);
    let r = (2 * k - 1) as f32 * e;
    if z & 1 == 1 {
        -r
    } else {
        r
    }
}

/// Bits needed for `v` (0 for 0).
fn bits_of(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// A block's 16-bit header from its values' codes (None: not quantisable): raw
/// ([`HEAD_RAW`]); masked ([`FLAG_MASKED`] | width | nonzero count << 8) where that takes
/// fewer words; else plain (the width).
pub fn analyse_block(codes: &[Option<u32>; BLOCK]) -> u32 {
    if codes.iter().any(|c| c.is_none()) {
        return HEAD_RAW;
    }
    let zmax = codes.iter().map(|c| c.unwrap_or(0)).max().unwrap_or(0);
    let m = codes.iter().filter(|c| **c != Some(0)).count() as u32;
    let plain = bits_of(zmax);
    if m > 0 && (m as usize) < BLOCK {
        let w = bits_of(zmax - 1);
        if 1 + (m * w).div_ceil(32) < plain {
            return FLAG_MASKED | w | (m << 8);
        }
    }
    plain
}

/// Payload words of a block with header `h` (valid, see [`check_head`]).
pub fn block_words(h: u32) -> u32 {
    if h == HEAD_RAW {
        32
    } else if h & FLAG_MASKED != 0 {
        1 + ((h >> 8) * (h & 0x3f)).div_ceil(32)
    } else {
        h & 0x3f
    }
}

/// Whether `h` is a header the format allows: raw; masked with a width at most
/// [`WIDTH_MAX`] and 1 to 31 nonzero values; plain with a width at most [`WIDTH_MAX`].
pub fn check_head(h: u32) -> bool {
    let w = h & 0x3f;
    let m = h >> 8;
    match h & 0xc0 {
        0x80 => h == HEAD_RAW,
        0x40 => w <= WIDTH_MAX && (1..BLOCK as u32).contains(&m) && h < 1 << 16,
        0 => w <= WIDTH_MAX && m == 0,
        _ => false,
    }
}

/// Writes `v` (`w` bits) at bit `pos` of `words`.
fn put_bits(words: &mut [u32], pos: u32, w: u32, v: u32) {
    if w == 0 {
        return;
    }
    let (i, s) = ((pos / 32) as usize, pos % 32);
    words[i] |= v << s;
    if s + w > 32 {
        words[i + 1] |= v >> (32 - s);
    }
}

/// `w` bits at bit `pos` of `words`.
fn get_bits(words: &[u32], pos: u32, w: u32) -> u32 {
    if w == 0 {
        return 0;
    }
    let (i, s) = ((pos / 32) as usize, pos % 32);
    let mut v = words[i] >> s;
    if s + w > 32 {
        v |= words[i + 1] << (32 - s);
    }
    if w < 32 {
        v &= (1 << w) - 1;
    }
    v
}

/// The payload of one block with header `h` ([`block_words`] words): raw, its values' bits;
/// masked, the mask (bit `j`: value `j` is not zero), then the nonzero codes less one, in
/// order, `w` bits each from bit 0 of the next word; plain, every code at `w` bits.
pub fn pack_block(h: u32, bits: &[u32; BLOCK], codes: &[Option<u32>; BLOCK], out: &mut [u32]) {
    out.fill(0);
    if h == HEAD_RAW {
        out.copy_from_slice(bits);
        return;
    }
    let w = h & 0x3f;
    if h & FLAG_MASKED != 0 {
        let mut rank = 0;
        for (j, c) in codes.iter().enumerate() {
            let z = c.unwrap_or(0);
            if z != 0 {
                out[0] |= 1 << j;
                put_bits(&mut out[1..], rank * w, w, z - 1);
                rank += 1;
            }
        }
    } else {
        for (j, c) in codes.iter().enumerate() {
            put_bits(out, j as u32 * w, w, c.unwrap_or(0));
        }
    }
}

/// The sizes of a stream of `n` values: blocks, groups, header words.
fn counts(n: usize) -> (usize, usize, usize) {
    let blocks = n.div_ceil(BLOCK);
    (blocks, blocks.div_ceil(GROUP_BLOCKS), blocks.div_ceil(2))
}

/// Encodes `values` within `max_error` (absolute; see [`stored_bound`]) as a block-coded
/// stream: every value decodes within the stored bound, signs and zeros kept.
pub fn encode_blocks(values: &[f32], max_error: f64) -> Result<Vec<u8>> {
    if values.len() as u64 > MAX_VALUES {
        return Err(LimitsError::OutputBytes {
            needed: values.len() as u64 * 4,
            max: MAX_VALUES * 4,
        }
        .into());
    }
    let e = stored_bound(max_error)?;
    let inv = inverse_step(e);
    let n = values.len();
    let (blocks, groups, head_words) = counts(n);
    let mut heads = vec![0u32; head_words];
    let mut offsets = vec![0u32; groups];
    let mut payload: Vec<u32> = Vec::with_capacity(n / 4);
    for b in 0..blocks {
        if b % GROUP_BLOCKS == 0 {
            offsets[b / GROUP_BLOCKS] = payload.len() as u32;
        }
        let mut bits = [0u32; BLOCK];
        for (j, v) in values[b * BLOCK..n.min((b + 1) * BLOCK)].iter().enumerate() {
            bits[j] = v.to_bits();
        }
        let codes = bits.map(|x| quantise(x, e, inv));
        let h = analyse_block(&codes);
        heads[b / 2] |= h << (16 * (b % 2));
        let at = payload.len();
        payload.resize(at + block_words(h) as usize, 0);
        pack_block(h, &bits, &codes, &mut payload[at..]);
    }
    let mut out = Vec::with_capacity(4 * (HEAD_WORDS + groups + head_words + payload.len()));
    for w in [BLOCKS_MAGIC, n as u32, e.to_bits(), payload.len() as u32]
        .into_iter()
        .chain(offsets)
        .chain(heads)
        .chain(payload)
    {
        out.extend_from_slice(&w.to_le_bytes());
    }
    Ok(out)
}

/// A checked block-coded stream ([`parse_blocks`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BlocksHeader {
    /// Values.
    pub values: u32,
    /// The stored bound: every value decodes within it of the value encoded.
    pub bound: f32,
    /// Payload words.
    pub payload_words: u32,
}

impl BlocksHeader {
    /// Words of the whole stream.
    pub fn stream_words(&self) -> usize {
        let (_, groups, heads) = counts(self.values as usize);
        HEAD_WORDS + groups + heads + self.payload_words as usize
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

/// Checks a whole stream without decoding a value: its head, its length, every block
/// header, every group offset and every mask; `max_values` is checked before anything is
/// allocated. What a GPU decode of the stream may rely on.
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
        return Err(bad("magic", 0, word(data, 0) as u64, "expected \"L3B1\"").into());
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
    let header = BlocksHeader {
        values: n,
        bound: e,
        payload_words: word(data, 3),
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
    let (blocks, groups, _) = counts(n as usize);
    let heads_at = HEAD_WORDS + groups;
    let payload_at = heads_at + blocks.div_ceil(2);
    let mut at = 0u64;
    for b in 0..blocks {
        if b % GROUP_BLOCKS == 0 {
            let g = b / GROUP_BLOCKS;
            let o = word(data, HEAD_WORDS + g);
            if o as u64 != at {
                return Err(bad(
                    "group offset",
                    HEAD_WORDS + g,
                    o as u64,
                    "the words of the blocks before",
                )
                .into());
            }
        }
        let h = (word(data, heads_at + b / 2) >> (16 * (b % 2))) & 0xffff;
        if !check_head(h) {
            return Err(bad(
                "block header",
                heads_at + b / 2,
                h as u64,
                "raw (0x80), masked or plain, width at most 16",
            )
            .into());
        }
        if h & FLAG_MASKED != 0 && at < header.payload_words as u64 {
            let mask = word(data, payload_at + at as usize);
            if mask.count_ones() != h >> 8 {
                return Err(bad(
                    "block mask",
                    payload_at + at as usize,
                    mask as u64,
                    "as many bits set as the header's count",
                )
                .into());
            }
        }
        at += block_words(h) as u64;
        if at > header.payload_words as u64 {
            return Err(bad(
                "payload words",
                3,
                header.payload_words as u64,
                "the blocks' words",
            )
            .into());
        }
    }
    if blocks % 2 == 1 && word(data, payload_at - 1) >> 16 != 0 {
        return Err(bad(
            "block header",
            payload_at - 1,
            word(data, payload_at - 1) as u64,
            "the unused half zero",
        )
        .into());
    }
    if at != header.payload_words as u64 {
        return Err(bad(
            "payload words",
            3,
            header.payload_words as u64,
            "the blocks' words",
        )
        .into());
    }
    Ok(header)
}

/// Decodes a block-coded stream ([`parse_blocks`] first: any malformed stream is an error).
pub fn decode_blocks(data: &[u8], max_values: u64) -> Result<Vec<f32>> {
    let header = parse_blocks(data, max_values)?;
    let n = header.values as usize;
    let (blocks, groups, head_words) = counts(n);
    let words: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let heads = &words[HEAD_WORDS + groups..HEAD_WORDS + groups + head_words];
    let payload = &words[HEAD_WORDS + groups + head_words..];
    let mut out = Vec::with_capacity(n);
    let mut at = 0usize;
    for b in 0..blocks {
        let h = (heads[b / 2] >> (16 * (b % 2))) & 0xffff;
        let size = block_words(h) as usize;
        let p = &payload[at..at + size];
        let take = BLOCK.min(n - b * BLOCK);
        for j in 0..take {
            out.push(unpack_value(h, p, j as u32, header.bound));
        }
        at += size;
    }
    Ok(out)
}

/// Value `j` of a block with header `h` and payload `p` (kernel `blocks_unpack`'s step).
pub fn unpack_value(h: u32, p: &[u32], j: u32, e: f32) -> f32 {
    if h == HEAD_RAW {
        return f32::from_bits(p[j as usize]);
    }
    let w = h & 0x3f;
    let z = if h & FLAG_MASKED != 0 {
        let mask = p[0];
        if mask >> j & 1 == 0 {
            0
        } else {
            let rank = (mask & ((1u32 << j) - 1)).count_ones();
            1 + get_bits(&p[1..], rank * w, w)
        }
    } else {
        get_bits(p, j * w, w)
    };
    reconstruct(z, e)
}
