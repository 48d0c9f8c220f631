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
//! This module is the format in code and the CPU twin of the kernels: [`quantise`] and
//! [`symbol_of`] (kernels `blocks_histogram`, `blocks_sizes`), [`code_lengths`] and
//! [`canonical_codes`] (`blocks_code`), [`value_bits`] (`blocks_pack`), [`decode_block`]
//! (`blocks_decode`).

use rayon::prelude::*;

use crate::error::{FormatError, LimitsError, ParameterError, Result};
pub use crate::format::blocks::*;

#[cfg(feature = "gpu")]
pub mod gpu;
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

/// The code lengths of a stream with symbol counts `counts` (0: symbol unused; at most
/// [`MAX_CODE`]): Huffman's (the two least weights merged first, ties to the lower node
/// index, new nodes numbered after the symbols), then limited to [`MAX_CODE`] as deflate
/// encoders do (a code from the longest length moved up one level at a time) and handed out
/// by weight (heaviest shortest, ties to the lower symbol). One used symbol: length 1.
pub fn code_lengths(counts: &[u32; SYMBOLS]) -> [u32; SYMBOLS] {
    let mut lengths = [0u32; SYMBOLS];
    let used = counts.iter().filter(|&&c| c > 0).count();
    if used == 0 {
        return lengths;
    }
    if used == 1 {
        let s = counts.iter().position(|&c| c > 0).unwrap_or(0);
        lengths[s] = 1;
        return lengths;
    }
    // Huffman: nodes 0..SYMBOLS are the symbols, then the merged ones.
    const NODES: usize = 2 * SYMBOLS;
    let mut weight = [0u64; NODES];
    let mut parent = [usize::MAX; NODES];
    let mut alive = [false; NODES];
    for s in 0..SYMBOLS {
        weight[s] = counts[s] as u64;
        alive[s] = counts[s] > 0;
    }
    for next in SYMBOLS..SYMBOLS + used - 1 {
        let mut pick = [usize::MAX; 2];
        for p in &mut pick {
            let mut best = usize::MAX;
            for (i, (&a, &w)) in alive.iter().zip(&weight).enumerate().take(next) {
                if a && (best == usize::MAX || w < weight[best]) {
                    best = i;
                }
            }
            alive[best] = false;
            *p = best;
        }
        weight[next] = weight[pick[0]] + weight[pick[1]];
        parent[pick[0]] = next;
        parent[pick[1]] = next;
        alive[next] = true;
    }
    // Lengths per level, the longest clamped, then the Kraft sum mended.
    let max = MAX_CODE as usize;
    let mut per_length = [0u32; MAX_CODE as usize + 1];
    for (s, &c) in counts.iter().enumerate() {
        if c > 0 {
            let mut depth = 0;
            let mut i = s;
            while parent[i] != usize::MAX {
                i = parent[i];
                depth += 1;
            }
            per_length[depth.min(max)] += 1;
        }
    }
    let mut total: u32 = (1..=max).map(|l| per_length[l] << (max - l)).sum();
    while total > 1 << max {
        per_length[max] -= 1;
        for l in (1..max).rev() {
            if per_length[l] > 0 {
                per_length[l] -= 1;
                per_length[l + 1] += 2;
                break;
            }
        }
        total -= 1;
    }
    // Symbols by weight, heaviest first (ties: lower symbol), take the shortest lengths.
    let mut order: Vec<usize> = (0..SYMBOLS).filter(|&s| counts[s] > 0).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let mut l = 1;
    for s in order {
        while per_length[l] == 0 {
            l += 1;
        }
        lengths[s] = l as u32;
        per_length[l] -= 1;
    }
    lengths
}

/// Canonical codes of `lengths` (shorter first, then by symbol), each bit-reversed to its
/// length: the stream is read from bit 0 of each word up, so a code's first bit is its
/// lowest. None where the lengths are no prefix code (Kraft sum above 1, or a length above
/// [`MAX_CODE`]).
pub fn canonical_codes(lengths: &[u32; SYMBOLS]) -> Option<[u32; SYMBOLS]> {
    let mut per_length = [0u32; MAX_CODE as usize + 1];
    for &l in lengths {
        if l > MAX_CODE {
            return None;
        }
        per_length[l as usize] += 1;
    }
    let kraft: u32 = (1..=MAX_CODE as usize)
        .map(|l| per_length[l] << (MAX_CODE as usize - l))
        .sum();
    if kraft > 1 << MAX_CODE {
        return None;
    }
    let mut first = [0u32; MAX_CODE as usize + 2];
    let mut code = 0;
    for l in 1..=MAX_CODE as usize {
        code = (code + per_length[l - 1] * (l > 1) as u32) << 1;
        first[l] = code;
    }
    // (first[l]: the first code of length l, counted after every shorter code.)
    let mut codes = [0u32; SYMBOLS];
    let mut seen = [0u32; MAX_CODE as usize + 1];
    for s in 0..SYMBOLS {
        let l = lengths[s] as usize;
        if l > 0 {
            let c = first[l] + seen[l];
            seen[l] += 1;
            codes[s] = c.reverse_bits() >> (32 - l);
        }
    }
    Some(codes)
}

/// The head's words 4..7: code length of symbol `s` at bits `4 (s % 8)` of word `s / 8`.
fn pack_lengths(lengths: &[u32; SYMBOLS]) -> [u32; 3] {
    let mut w = [0u32; 3];
    for (s, &l) in lengths.iter().enumerate() {
        w[s / 8] |= l << (4 * (s % 8));
    }
    w
}

fn unpack_lengths(w: &[u32]) -> [u32; SYMBOLS] {
    std::array::from_fn(|s| (w[s / 8] >> (4 * (s % 8))) & 0xf)
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
/// Values one task of the decoder decodes at least (whole bands with a column stride, so a
/// task's values are one run of the array).
const TASK_VALUES: usize = 1 << 14;

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

/// A decode table of a code: for every [`MAX_CODE`]-bit window (read from its bit 0), the
/// symbol and the length of the code it starts with (length 0: no code starts so).
pub fn decode_table(lengths: &[u32; SYMBOLS], codes: &[u32; SYMBOLS]) -> Vec<u32> {
    let mut table = vec![0u32; 1 << MAX_CODE];
    for (i, t) in table.iter_mut().enumerate() {
        for s in 0..SYMBOLS {
            let l = lengths[s];
            if l > 0 && (i as u32) & ((1 << l) - 1) == codes[s] {
                *t = s as u32 | (l << 8);
            }
        }
    }
    table
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
