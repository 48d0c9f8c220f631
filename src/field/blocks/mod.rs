//! Block-coded arrays (SPEC.md, "Block-coded arrays"): float32 values within an absolute
//! bound in a format a GPU encodes and decodes with no host work between its kernels: the
//! in-memory format of training activations kept on the device. Each value becomes a signed
//! step count `q` (see [`quantise`]); blocks of up to [`BLOCK`] values run along the array
//! (stride 0 or 1) or down its columns (a stride `S`: rows of `S` values, a block one column
//! of 32 rows); with a stride, each value's `q` is predicted by the one before it in its
//! block. The stream codes each residual's bit length `L` with one Huffman code for the whole
//! stream (built from the stream's own histogram, on the device on a GPU), then the `L - 1`
//! bits below its leading one. The encoder picks the cheapest of no prediction, stride 1
//! and the caller's stride, by the exact size of each. A value the quantiser cannot hold (NaN,
//! infinities, values too far from zero for the bound) is escaped: its 32 bits follow. Blocks
//! start on a byte (their lengths in a byte each), groups of [`GROUP_BLOCKS`] blocks on a
//! word (their offsets in a word each), so every block decodes on its own.
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
//! This module is the format in code and the CPU twin of the kernels: here the quantiser,
//! the blocks' layout and the encoder ([`quantise`] and [`symbol_of`]: kernels
//! `blocks_histogram`, `blocks_sizes`; [`value_bits`]: `blocks_pack`), in `code` the
//! stream's Huffman code ([`code_lengths`], [`canonical_codes`]: `blocks_code`), in `decode`
//! the checks and the decoder ([`decode_block`]: `blocks_decode`), in `gpu` the GPU's API.

use rayon::prelude::*;

use crate::error::{LimitsError, ParameterError, Result};
pub use crate::format::blocks::*;

mod code;
mod decode;
#[cfg(feature = "gpu")]
pub mod gpu;

use code::pack_lengths;
pub use code::{canonical_codes, code_lengths, decode_table};
pub use decode::{decode_block, decode_blocks, parse_blocks, BlocksHeader};
#[cfg(test)]
mod tests;

/// The bound a stream stores for `max_error`: the largest f32 at most `max_error` with an
/// 8-bit significand (within 2^-7 of it, relatively), or 0 for a bound below the smallest
/// normal f32 (then every nonzero value is escaped). Refused: a negative or NaN bound.
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

/// The signed step count of the value with f32 bits `bits` (0: zero; `k`: positive; `-k`:
/// negative; `|k|` below [`K_LIMIT`]), or None where it must be escaped (NaN, infinity, no
/// `k` below [`K_LIMIT`] that fits). `inv` is [`inverse_step`]`(e)`.
pub fn quantise(bits: u32, e: f32, inv: f32) -> Option<i32> {
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
    Some(if bits >> 31 == 1 {
        -(k as i32)
    } else {
        k as i32
    })
}

/// The value of step count `q` (see [`quantise`]) at bound `e`: `sign(q) (2|q| - 1) e`, +0.0
/// for 0.
pub fn reconstruct(q: i32, e: f32) -> f32 {
    if q == 0 {
        return 0.0;
    }
    let r = (2 * q.unsigned_abs() - 1) as f32 * e;
    if q < 0 {
        -r
    } else {
        r
    }
}

/// Zigzag: 0, -1, 1, -2, 2, ... to 0, 1, 2, 3, 4, ...
pub fn zigzag(d: i32) -> u32 {
    ((d << 1) ^ (d >> 31)) as u32
}

/// The inverse of [`zigzag`].
pub fn unzigzag(z: u32) -> i32 {
    (z >> 1) as i32 ^ -((z & 1) as i32)
}

/// Bits needed for `v` (0 for 0).
fn bits_of(v: u32) -> u32 {
    32 - v.leading_zeros()
}

/// The symbol of a residual's zigzag code (None: escaped): its bit length.
pub fn symbol_of(z: Option<u32>) -> u32 {
    z.map_or(ESCAPE, bits_of)
}

/// Bits a value takes besides its symbol's code: `L - 1` for `L >= 2`, 32 escaped.
pub fn extra_bits(symbol: u32) -> u32 {
    if symbol == ESCAPE {
        32
    } else {
        symbol.saturating_sub(1)
    }
}

/// A bit writer from bit 0 of each word up.
struct BitWriter {
    words: Vec<u32>,
    bits: u64,
}

impl BitWriter {
    fn put(&mut self, v: u32, n: u32) {
        if n == 0 {
            return;
        }
        let at = (self.bits / 32) as usize;
        let s = (self.bits % 32) as u32;
        if self.words.len() < at + 2 {
            self.words.resize(at + 2, 0);
        }
        self.words[at] |= v << s;
        if s + n > 32 {
            self.words[at + 1] |= v >> (32 - s);
        }
        self.bits += n as u64;
    }
}

/// A value's bits after its symbol's code ([`extra_bits`] of them): the residual's zigzag
/// code `z` less its leading one, or the escaped value's f32 bits.
pub fn value_bits(bits: u32, z: Option<u32>) -> u32 {
    match z {
        None => bits,
        Some(z) if z >= 2 => z & ((1 << (bits_of(z) - 1)) - 1),
        Some(_) => 0,
    }
}

/// Whether a stream of `n` values may have stride `stride`: 0, 1, or a divisor of `n`
/// from 2 to `n`.
pub fn stride_ok(n: usize, stride: usize) -> bool {
    stride <= 1 || (stride <= n && n.is_multiple_of(stride))
}

/// Blocks of a stream of `n` values at stride `stride` ([`stride_ok`]): `ceil(n / 32)`
/// without a column stride, else `ceil(rows / 32)` bands of `stride` blocks.
pub fn block_count(n: usize, stride: usize) -> usize {
    if stride <= 1 {
        n.div_ceil(BLOCK)
    } else {
        (n / stride).div_ceil(BLOCK) * stride
    }
}

/// Block `b`'s values: the first index, the step between them and how many.
pub fn block_values(n: usize, stride: usize, b: usize) -> (usize, usize, usize) {
    if stride <= 1 {
        (b * BLOCK, 1, BLOCK.min(n - b * BLOCK))
    } else {
        let (band, c) = (b / stride, b % stride);
        let rows = n / stride;
        (
            band * BLOCK * stride + c,
            stride,
            BLOCK.min(rows - band * BLOCK),
        )
    }
}

/// The sizes of a stream of `n` values at `stride`: blocks, groups, length words.
fn counts_of(n: usize, stride: usize) -> (usize, usize, usize) {
    let blocks = block_count(n, stride);
    (blocks, blocks.div_ceil(GROUP_BLOCKS), blocks.div_ceil(4))
}

/// The residual codes of block `b` of `q` (None: escaped) at `stride`, in order: each
/// value's zigzag difference from the value before it in its block (none before it, an
/// escaped one, or no stride: 0).
fn block_residuals(
    q: &[Option<i32>],
    stride: usize,
    b: usize,
    mut f: impl FnMut(usize, Option<u32>),
) {
    let (first, step, count) = block_values(q.len(), stride, b);
    let mut prev = 0i32;
    for j in 0..count {
        let i = first + j * step;
        let z = q[i].map(|v| zigzag(v - if stride == 0 { 0 } else { prev }));
        prev = q[i].unwrap_or(0);
        f(i, z);
    }
}

/// Groups one task of the encoder codes (on rayon's pool; groups start on words, so the
/// tasks' words are joined as they are).
const TASK_GROUPS: usize = 64;

/// Bits of a stream's values under `lengths` from symbol `counts` (blocks' padding aside).
fn coded_bits(counts: &[u32; SYMBOLS], lengths: &[u32; SYMBOLS]) -> u64 {
    (0..SYMBOLS)
        .map(|s| counts[s] as u64 * (lengths[s] + extra_bits(s as u32)) as u64)
        .sum()
}

/// Encodes `values` within `max_error` (absolute; see [`stored_bound`]) as a block-coded
/// stream, predicting along `stride` where that is smaller (0 or 1: along the array only; a
/// divisor of the values' count, e.g. a row's length: down its columns too): every value
/// decodes within the stored bound, signs and zeros kept, NaN and infinities bit for bit.
pub fn encode_blocks(values: &[f32], max_error: f64, stride: usize) -> Result<Vec<u8>> {
    if values.len() as u64 > MAX_VALUES {
        return Err(LimitsError::OutputBytes {
            needed: values.len() as u64 * 4,
            max: MAX_VALUES * 4,
        }
        .into());
    }
    let n = values.len();
    if !stride_ok(n, stride) {
        return Err(ParameterError::InvalidOption {
            name: "stride",
            value: stride as u64,
            reason: "0, 1, or a divisor of the values' count",
        }
        .into());
    }
    let e = stored_bound(max_error)?;
    let inv = inverse_step(e);
    let q: Vec<Option<i32>> = values
        .par_iter()
        .with_min_len(1 << 14)
        .map(|v| quantise(v.to_bits(), e, inv))
        .collect();
    // The candidates: no prediction, along the array, down the columns; the smallest wins
    // (ties: the first).
    let mut best: Option<(u64, usize, [u32; SYMBOLS])> = None;
    let candidates = [0, 1, stride];
    for &t in &candidates[..if stride > 1 { 3 } else { 2 }] {
        let counts = (0..block_count(n, t))
            .into_par_iter()
            .with_min_len(512)
            .fold(
                || [0u32; SYMBOLS],
                |mut c, b| {
                    block_residuals(&q, t, b, |_, z| c[symbol_of(z) as usize] += 1);
                    c
                },
            )
            .reduce(
                || [0u32; SYMBOLS],
                |a, b| std::array::from_fn(|s| a[s] + b[s]),
            );
        let lengths = code_lengths(&counts);
        // Each block also costs its byte of length and half a byte of padding on average.
        let bits = coded_bits(&counts, &lengths) + BLOCK_COST as u64 * block_count(n, t) as u64;
        if best.as_ref().is_none_or(|b| bits < b.0) {
            best = Some((bits, t, lengths));
        }
    }
    let (_, t, lengths) = best.expect("two candidates at least");
    let codes = canonical_codes(&lengths).expect("code_lengths gives a prefix code");
    let (blocks, groups, length_words) = counts_of(n, t);
    // Each task: its groups' words, each group's first word (from the task's), each block's
    // bytes.
    let tasks: Vec<(Vec<u32>, Vec<u32>, Vec<u8>)> = (0..groups.div_ceil(TASK_GROUPS))
        .into_par_iter()
        .map(|task| {
            let mut w = BitWriter {
                words: Vec::new(),
                bits: 0,
            };
            let mut starts = Vec::with_capacity(TASK_GROUPS);
            let mut bytes_of = Vec::with_capacity(TASK_GROUPS * GROUP_BLOCKS);
            let first = task * TASK_GROUPS * GROUP_BLOCKS;
            for b in first..blocks.min(first + TASK_GROUPS * GROUP_BLOCKS) {
                if b % GROUP_BLOCKS == 0 {
                    w.bits = w.bits.div_ceil(32) * 32;
                    starts.push((w.bits / 32) as u32);
                }
                let start = w.bits;
                block_residuals(&q, t, b, |i, z| {
                    let s = symbol_of(z);
                    w.put(codes[s as usize], lengths[s as usize]);
                    let v = value_bits(values[i].to_bits(), z);
                    if s == ESCAPE {
                        w.put(v & 0xffff, 16);
                        w.put(v >> 16, 16);
                    } else {
                        w.put(v, extra_bits(s));
                    }
                });
                let bytes = (w.bits - start).div_ceil(8);
                w.bits = start + 8 * bytes;
                bytes_of.push(bytes as u8);
            }
            w.words.resize(w.bits.div_ceil(32) as usize, 0);
            (w.words, starts, bytes_of)
        })
        .collect();
    let mut offsets = Vec::with_capacity(groups);
    let mut block_bytes = vec![0u32; length_words];
    let mut payload_words: Vec<u32> = Vec::new();
    let mut b = 0;
    for (words, starts, bytes_of) in tasks {
        let base = payload_words.len() as u32;
        offsets.extend(starts.iter().map(|s| base + s));
        payload_words.extend_from_slice(&words);
        for nb in bytes_of {
            block_bytes[b / 4] |= (nb as u32) << (8 * (b % 4));
            b += 1;
        }
    }
    let payload = payload_words.len();
    let l = pack_lengths(&lengths);
    let mut out = Vec::with_capacity(4 * (HEAD_WORDS + groups + length_words + payload));
    let head = [
        BLOCKS_MAGIC,
        n as u32,
        e.to_bits(),
        payload as u32,
        l[0],
        l[1],
        l[2],
        t as u32,
    ];
    for word in head
        .into_iter()
        .chain(offsets)
        .chain(block_bytes)
        .chain(payload_words)
    {
        out.extend_from_slice(&word.to_le_bytes());
    }
    Ok(out)
}
