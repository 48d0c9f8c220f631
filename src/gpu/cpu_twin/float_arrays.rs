//! CPU twin of `shaders/shared/float_arrays.wgsl`, what the lossless and error-bounded
//! kernels share: the entry points `decode_segments` (one round of the token decode:
//! [`decode_rounds`], run by [`decode_and_undiff`]) and `undiff` (one stage of the blocked
//! prefix sums along one axis, twin [`super::line_sum`]), and `run_bits` (the exception
//! runs' lookup).

use super::line_sum::sum_lines;
use super::segments::decode_rounds;
use crate::gpu::abi::LosslessSegment;
use crate::gpu::line_sum::line_sum_steps;

/// What the shared entry points read of an entry of `arrays`, and the including shader's
/// `differenced`.
pub(crate) trait ArrayEntry {
    /// Twin of `differenced`: whether `undiff` sums the array along padded axis `axis`.
    fn differenced(&self, axis: u32) -> bool;
    /// The shape padded to 4 axes, the first word of its values and of its carries.
    fn lines(&self) -> ([u32; 4], u32, u32);
}

/// Twin of the entry point `undiff` with `axis` and `stage` (the dispatch's uniform): every
/// array [`ArrayEntry::differenced`] along `axis` gets that stage of the blocked prefix sums
/// ([`sum_lines`], `shared/line_sum.wgsl`).
pub(crate) fn undiff<A: ArrayEntry>(arrays: &[A], words: &mut [u32], axis: u32, stage: u32) {
    for a in arrays {
        if !a.differenced(axis) {
            continue;
        }
        let (shape, at, carry) = a.lines();
        sum_lines(words, shape, axis % 4, at, carry, stage);
    }
}

/// Twin of `run_bits`: value `i`'s bits `v`, or those of the exception run that covers it:
/// the last of the `run_count` runs from word `at` of `runs` (3 words each: start, length,
/// bits; the including shader's `run_word`) starting at or before `i`, if it covers `i`.
pub(crate) fn run_bits(runs: &[u32], at: u32, run_count: u32, i: u32, v: u32) -> u32 {
    let (mut lo, mut hi) = (0u32, run_count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if runs[(at + 3 * mid) as usize] <= i {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if lo > 0 {
        let r = (at + 3 * (lo - 1)) as usize;
        if i - runs[r] < runs[r + 1] {
            return runs[r + 2];
        }
    }
    v
}

/// The shared stages over a batch, one dispatch after another as the GPU runs them: `rounds`
/// rounds of the entry point `decode_segments` ([`decode_rounds`] with `pairs` pair tokens,
/// the including shader's `PAIR_TOKENS`), then [`undiff`] at every step of
/// the line sums ([`line_sum_steps`] over the axes each array is differenced along). Returns
/// the `words` scratch words and each array's error flags.
pub(crate) fn decode_and_undiff<A: ArrayEntry>(
    (input_words, segments, tables): (&[u32], &[LosslessSegment], &[u32]),
    words: u32,
    arrays: &[A],
    rounds: u32,
    pairs: u32,
) -> (Vec<u32>, Vec<u32>) {
    let mut scratch = vec![0u32; words as usize];
    let mut errors = vec![0u32; arrays.len()];
    for round in 0..rounds {
        let (w, e) = (&mut scratch, &mut errors);
        decode_rounds(input_words, segments, tables, w, e, round, pairs);
    }
    let differenced = arrays.iter().map(|a| {
        // Axes 4 to 7: a second time along axis `x - 4` (second differences).
        let axes = (0..8)
            .filter(|&x| a.differenced(x))
            .fold(0, |s, x| s | 1 << x);
        (a.lines().0, axes)
    });
    for step in line_sum_steps(differenced) {
        undiff(arrays, &mut scratch, step.axis, step.stage);
    }
    (scratch, errors)
}
