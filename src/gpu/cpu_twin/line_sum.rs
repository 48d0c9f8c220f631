//! CPU twin of `shaders/shared/line_sum.wgsl`: one stage of the blocked wrapping prefix sums
//! of an array's lines along one axis, the difference inverse of the lossless and
//! error-bounded kernels.

use crate::gpu::abi::LINE_BLOCK;

/// Twin of `sum_lines` with every item in turn: stage `stage` of the sums along padded axis
/// `axis` of the array of padded `shape` whose values start at `words[at]` (C order) and
/// its carries at `words[carry]`. Stage 0 sums within each block of [`LINE_BLOCK`] values,
/// stage 1 sums the blocks' last values into their carries, stage 2 adds each block's carry
/// to it (wrapping).
pub(crate) fn sum_lines(
    words: &mut [u32],
    shape: [u32; 4],
    axis: u32,
    at: u32,
    carry: u32,
    stage: u32,
) {
    let stride: u32 = shape[axis as usize + 1..].iter().product();
    let len = shape[axis as usize];
    let lines = shape.iter().product::<u32>() / len;
    let nb = len.div_ceil(LINE_BLOCK);
    let first = |line: u32| at + (line / stride) * len * stride + line % stride;
    if stage == 1 {
        if nb == 1 {
            return;
        }
        for line in 0..lines {
            let f = first(line);
            let mut c = 0u32;
            for blk in 1..nb {
                c = c.wrapping_add(words[(f + (blk * LINE_BLOCK - 1) * stride) as usize]);
                words[(carry + line * nb + blk) as usize] = c;
            }
        }
        return;
    }
    for item in 0..lines * nb {
        let (line, blk) = (item / nb, item % nb);
        let f = first(line);
        let k0 = blk * LINE_BLOCK;
        let k1 = len.min(k0 + LINE_BLOCK);
        if stage == 0 {
            let mut s = words[(f + k0 * stride) as usize];
            for k in k0 + 1..k1 {
                let i = (f + k * stride) as usize;
                s = s.wrapping_add(words[i]);
                words[i] = s;
            }
        } else if blk > 0 {
            let c = words[(carry + item) as usize];
            for k in k0..k1 {
                let i = (f + k * stride) as usize;
                words[i] = words[i].wrapping_add(c);
            }
        }
    }
}
