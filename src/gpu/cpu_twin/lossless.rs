//! CPU twin of `shaders/lossless.wgsl`, the decode of lossless float arrays: entry points
//! `decode_segments` (one round of the token decode, twin [`super::segments`]), `undiff`
//! (one stage of the blocked prefix sums along one axis, twin [`super::line_sum`]) and
//! `finish` (one invocation per output word: ordered bits or float-mult to float bits, then
//! the exception runs).

use super::line_sum::sum_lines;
use super::segments::decode_rounds;
use crate::gpu::abi::{flags, LosslessArray, LosslessSegment};

/// Twin of the entry point `decode_segments` in round `round` (the dispatch's uniform):
/// [`decode_rounds`] without pair tokens. Arguments in binding order.
pub(crate) fn decode_segments(
    input_words: &[u32],
    segments: &[LosslessSegment],
    tables: &[u32],
    words: &mut [u32],
    errors: &mut [u32],
    round: u32,
) {
    decode_rounds(input_words, segments, tables, words, errors, round, 0);
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
