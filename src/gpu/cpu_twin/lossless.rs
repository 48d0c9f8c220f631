//! CPU twin of `shaders/lossless.wgsl`, the decode of lossless float arrays: entry points
//! `decode_segments` (one round: one invocation per segment decodes up to
//! [`SEGMENT_ROUND`] of its tokens to residuals), `undiff` (one stage of the blocked prefix
//! sums along one axis, twin [`super::line_sum`]) and `finish` (one invocation per output
//! word: ordered bits or float-mult to float bits, then the exception runs).

use super::line_sum::sum_lines;
use super::read_byte;
use crate::gpu::abi::{flags, LosslessArray, LosslessSegment, SEGMENT_ROUND};

/// Twin of `read_bits32` in `shaders/shared/bits.wgsl`: the 32 bits at bit `p` of the payload
/// starting at byte `base`. Words past the end read as 0.
fn read_bits32(input_words: &[u32], base: u32, p: u32) -> u32 {
    let word = |i: u32| input_words.get(i as usize).copied().unwrap_or(0);
    let abs_bit = (base & 3) * 8 + p;
    let w = (base >> 2) + (abs_bit >> 5);
    let sh = abs_bit & 31;
    let mut v = word(w) >> sh;
    if sh != 0 {
        v |= word(w + 1) << (32 - sh);
    }
    v
}

/// Twin of `token_base` in `lossless.wgsl`: a token's base value, raw bit count and whether
/// it is a zero run, at `width` bits (SPEC "Lossless float arrays").
fn token_base(width: u32, token: u32) -> (u32, u32, bool) {
    let singles = 16 + 2 * (width - 4);
    if token < 16 {
        (token, 0, false)
    } else if token < singles {
        let n = 4 + (token - 16) / 2;
        let m = (token - 16) & 1;
        ((1 << n) | (m << (n - 1)), n - 1, false)
    } else {
        let j = token - singles + 1;
        (1 << j, j, true)
    }
}

/// Twin of `unzig` in `lossless.wgsl`: the inverse zigzag, mod 2^32.
fn unzig(z: u32) -> u32 {
    (z >> 1) ^ 0u32.wrapping_sub(z & 1)
}

/// Twin of the entry point `decode_segments` in round `round` (the dispatch's uniform):
/// segment `g` decodes up to [`SEGMENT_ROUND`] further values (a lookup in its 2^11-entry
/// table, then the raw bits; a zero run's zeros one a step) into `words[out_start ..]` as
/// residuals (the inverse zigzag applied, mod 2^32), keeping its place in the 3 words from
/// `words[state]` where it has more values. In the round that ends it, it ORs
/// [`flags::OVERRUN`] (a symbol or zero run past the segment's end) or [`flags::TRAILING`]
/// (the symbols do not end in the last byte, or the padding is not zero) into
/// `errors[file]`. Arguments in binding order.
pub(crate) fn decode_segments(
    input_words: &[u32],
    segments: &[LosslessSegment],
    luts: &[u32],
    words: &mut [u32],
    errors: &mut [u32],
    round: u32,
) {
    for seg in segments {
        let total = seg.in_len * 8;
        let st = seg.state as usize;
        let (mut pos, mut i, mut zeros) = (0u32, 0u32, 0u32);
        if round > 0 {
            if seg.state == u32::MAX {
                continue;
            }
            (pos, i, zeros) = (words[st], words[st + 1], words[st + 2]);
            if i >= seg.count {
                continue;
            }
        }
        let end = seg.count.min(i + SEGMENT_ROUND);
        let mut bad = 0u32;
        for _ in 0..SEGMENT_ROUND {
            if i >= end {
                break;
            }
            let out = (seg.out_start + i) as usize;
            if zeros > 0 {
                words[out] = 0;
                zeros -= 1;
                i += 1;
                continue;
            }
            let peek = read_bits32(input_words, seg.in_byte, pos);
            let e = luts[(seg.lut + (peek & 2047)) as usize];
            let cl = e & 15;
            let (base, nraw, run) = token_base(seg.width, e >> 4);
            let raw = read_bits32(input_words, seg.in_byte, pos + cl) & ((1u32 << nraw) - 1);
            pos += cl + nraw;
            if pos > total {
                bad = flags::OVERRUN;
                break;
            }
            let v = base + raw;
            if run {
                if v > seg.count - i {
                    bad = flags::OVERRUN;
                    break;
                }
                words[out] = 0;
                zeros = v - 1;
            } else {
                words[out] = unzig(v);
            }
            i += 1;
        }
        if bad == 0 && i < seg.count {
            words[st..st + 3].copy_from_slice(&[pos, i, zeros]);
            continue;
        }
        let tail = pos % 8 != 0 && read_byte(input_words, seg.in_byte + pos / 8) >> (pos % 8) != 0;
        if bad == 0 && (pos.div_ceil(8) != seg.in_len || tail) {
            bad = flags::TRAILING;
        }
        errors[seg.file as usize] |= bad;
        if seg.state != u32::MAX {
            words[st + 1] = seg.count;
        }
    }
}

/// Twin of `padded_shape` in `lossless.wgsl`.
fn padded_shape(a: &LosslessArray) -> [u32; 4] {
    [a.shape0, a.shape1, a.shape2, a.shape3]
}

/// Twin of the entry point `undiff` with `axis` and `stage` (the dispatch's uniform): every
/// array differenced along `axis` gets that stage of the blocked prefix sums
/// ([`sum_lines`], `shared/line_sum.wgsl`).
pub(crate) fn undiff(arrays: &[LosslessArray], words: &mut [u32], axis: u32, stage: u32) {
    for a in arrays {
        if a.axes >> axis & 1 == 0 {
            continue;
        }
        sum_lines(words, padded_shape(a), axis, a.words, a.carry, stage);
    }
}

/// Twin of `value_bits` in `lossless.wgsl`: value `i` of array `a` as float bits of its
/// width, and whether float-mult found it invalid.
fn value_bits(a: &LosslessArray, words: &[u32], runs: &[u32], i: u32) -> (u32, bool) {
    let x = words[(a.words + i) as usize];
    let (mut v, bad) = if a.mult_base == 0 {
        let w = a.width;
        let m = if w == 32 { u32::MAX } else { (1u32 << w) - 1 };
        let x = x & m;
        let sign = 1u32 << (w - 1);
        let top = (x >> (w - 1)) & 1;
        ((x ^ (top.wrapping_sub(1) | sign)) & m, false)
    } else {
        let k = (x ^ 0x8000_0000) as i32;
        let bad_k = k.wrapping_add((1 << 24) - 1) as u32 >= (1u32 << 25) - 1;
        let p = (k as f32 * f32::from_bits(a.mult_base)).to_bits();
        let sub = p & 0x7f80_0000 == 0 && p & 0x007f_ffff != 0;
        let adj = if a.adjust == u32::MAX {
            0
        } else {
            words[(a.adjust + i) as usize]
        };
        let o = (p ^ ((((p >> 31) ^ 1).wrapping_sub(1)) | 0x8000_0000)).wrapping_add(adj);
        (o ^ ((o >> 31).wrapping_sub(1) | 0x8000_0000), bad_k || sub)
    };
    // The last run starting at or before `i`, if it covers `i`, overrides the value (the
    // check above still counts, as on the CPU).
    let (mut lo, mut hi) = (0u32, a.run_count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if runs[(a.runs + 3 * mid) as usize] <= i {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo > 0 {
        let r = (a.runs + 3 * (lo - 1)) as usize;
        if i - runs[r] < runs[r + 1] {
            v = runs[r + 2];
        }
    }
    (v, bad)
}

/// Twin of the entry point `finish`: output word `j` of each array (one value, or two
/// 16-bit values with the first in the low half) from its reconstructed values, ORing
/// [`flags::MULT`] into `errors[file]` for an invalid float-mult value.
pub(crate) fn finish(
    arrays: &[LosslessArray],
    words: &[u32],
    runs: &[u32],
    output: &mut [u32],
    errors: &mut [u32],
) {
    for a in arrays {
        let per = 32 / a.width;
        let out_words = a.count.div_ceil(per);
        for j in 0..out_words {
            let mut w = 0u32;
            let mut bad = false;
            for h in 0..per {
                let i = j * per + h;
                if i < a.count {
                    let (v, b) = value_bits(a, words, runs, i);
                    w |= v << (h * a.width);
                    bad |= b;
                }
            }
            output[(a.out_word + j) as usize] = w;
            if bad {
                errors[a.file as usize] |= flags::MULT;
            }
        }
    }
}
