//! CPU twin of `shaders/lossless.wgsl`, the decode of lossless float arrays: its hooks into
//! `shaders/shared/float_arrays.wgsl` (twin [`super::float_arrays`]: `decode_segments`,
//! `undiff`) and the entry point `finish` (one invocation per output word: ordered bits or
//! float-mult to float bits, then the exception runs).

use super::float_arrays::{run_bits, ArrayEntry};
use crate::gpu::abi::{flags, LosslessArray};

/// Twin of `PAIR_TOKENS` in `lossless.wgsl`: no pair tokens.
pub(crate) const PAIR_TOKENS: u32 = 0;

impl ArrayEntry for LosslessArray {
    /// Twin of `differenced` in `lossless.wgsl`: every array along its axes (4 to 7: a second
    /// time along axis `axis - 4`).
    fn differenced(&self, axis: u32) -> bool {
        self.axes >> axis & 1 != 0
    }

    fn lines(&self) -> ([u32; 4], u32, u32) {
        let shape = [self.shape0, self.shape1, self.shape2, self.shape3];
        (shape, self.words, self.carry)
    }
}

/// Twin of `value_bits` in `lossless.wgsl`: value `i` of array `a` as float bits of its
/// width, and the error flags it raises (float-mult found it invalid: [`flags::MULT`]; an
/// index past the value table: [`flags::VALUE`]).
fn value_bits(a: &LosslessArray, words: &[u32], runs: &[u32], i: u32) -> (u32, u32) {
    let x = words[(a.words + i) as usize];
    let (mut v, bad) = if a.table != u32::MAX {
        let m = if a.width == 32 {
            u32::MAX
        } else {
            (1u32 << a.width) - 1
        };
        let k = runs[a.table as usize];
        let j = x & m;
        if j < k {
            (runs[(a.table + 1 + j) as usize], 0)
        } else {
            (0, flags::VALUE)
        }
    } else if a.mult_base == 0 {
        let w = a.width;
        let m = if w == 32 { u32::MAX } else { (1u32 << w) - 1 };
        let x = x & m;
        let sign = 1u32 << (w - 1);
        let top = (x >> (w - 1)) & 1;
        ((x ^ (top.wrapping_sub(1) | sign)) & m, 0)
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
        let bad = if bad_k || sub { flags::MULT } else { 0 };
        (o ^ ((o >> 31).wrapping_sub(1) | 0x8000_0000), bad)
    };
    // The exception run that covers `i`, if any, overrides the value (the check above
    // still counts, as on the CPU).
    v = run_bits(runs, a.runs, a.run_count, i, v);
    (v, bad)
}

/// Twin of the entry point `finish`: output word `j` of each array (one value, or two
/// 16-bit values with the first in the low half) from its reconstructed values, ORing
/// [`flags::MULT`] into `errors[file]` for an invalid float-mult value and [`flags::VALUE`]
/// for an index past the value table.
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
            let mut bad = 0;
            for h in 0..per {
                let i = j * per + h;
                if i < a.count {
                    let (v, b) = value_bits(a, words, runs, i);
                    w |= v << (h * a.width);
                    bad |= b;
                }
            }
            output[(a.out_word + j) as usize] = w;
            errors[a.file as usize] |= bad;
        }
    }
}
