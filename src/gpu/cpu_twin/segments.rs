//! CPU twin of `shaders/shared/segments.wgsl`: one round of the token decode of the float
//! arrays' segments, the first stage of the lossless and error-bounded kernels.

use super::{read_bits32, read_byte};
use crate::gpu::abi::{flags, LosslessSegment, BOUNDED_PAIR_LIMIT, SEGMENT_ROUND};

/// Twin of `single_base`: a single value's base and raw bit count.
fn single_base(token: u32) -> (u32, u32) {
    if token < 16 {
        return (token, 0);
    }
    let n = 4 + (token - 16) / 2;
    ((1 << n) | (((token - 16) & 1) << (n - 1)), n - 1)
}

/// Twin of `unzig`: the inverse zigzag, mod 2^32.
fn unzig(z: u32) -> u32 {
    (z >> 1) ^ 0u32.wrapping_sub(z & 1)
}

/// Twin of `decode_round` for every segment in turn: round `round` with `pairs` pair tokens
/// decodes up to [`SEGMENT_ROUND`] further values of each segment (a lookup in its
/// 2^11-entry table in `tables`, then the raw bits: a single value, a pair or a zero run, one
/// zero a step) into `words[out_start ..]` as residuals (inverse zigzag), keeping its place
/// in the 3 words from `words[state]` where it has more values. In the round that ends a
/// segment, it ORs [`flags::OVERRUN`] (a symbol, pair or zero run past the segment's end) or
/// [`flags::TRAILING`] (the symbols do not end in the last byte, or the padding is not
/// zero) into `errors[file]`.
pub(crate) fn decode_rounds(
    input_words: &[u32],
    segments: &[LosslessSegment],
    tables: &[u32],
    words: &mut [u32],
    errors: &mut [u32],
    round: u32,
    pairs: u32,
) {
    for seg in segments {
        let total = seg.in_len * 8;
        let singles = 16 + 2 * (seg.width - 4);
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
            let e = tables[(seg.lut + (peek & 2047)) as usize];
            let cl = e & 15;
            let token = e >> 4;
            if token < singles {
                let (base, nraw) = single_base(token);
                let raw = read_bits32(input_words, seg.in_byte, pos + cl) & ((1u32 << nraw) - 1);
                pos += cl + nraw;
                if pos > total {
                    bad = flags::OVERRUN;
                    break;
                }
                words[out] = unzig(base + raw);
                i += 1;
            } else if token < singles + pairs {
                pos += cl;
                if pos > total || seg.count - i < 2 {
                    bad = flags::OVERRUN;
                    break;
                }
                let p = token - singles;
                words[out] = unzig(p / BOUNDED_PAIR_LIMIT);
                words[out + 1] = unzig(p % BOUNDED_PAIR_LIMIT);
                i += 2;
            } else {
                let j = token - singles - pairs + 1;
                let v =
                    (1 << j) + (read_bits32(input_words, seg.in_byte, pos + cl) & ((1 << j) - 1));
                pos += cl + j;
                if pos > total || v > seg.count - i {
                    bad = flags::OVERRUN;
                    break;
                }
                words[out] = 0;
                zeros = v - 1;
                i += 1;
            }
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
