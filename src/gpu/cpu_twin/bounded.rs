//! CPU twin of `shaders/bounded.wgsl`, the decode of error-bounded arrays of 1 to 4 axes:
//! its hooks into `shaders/shared/float_arrays.wgsl` (twin [`super::float_arrays`]:
//! `decode_segments`, `undiff` of the differences arrays) and the entry points
//! `lattice_pass` (lattice: one invocation per target of one pass) and `finish` (one
//! invocation per value: `offset + f32(x) * unit`, then the exception runs).

use super::float_arrays::{run_bits, ArrayEntry};
use crate::gpu::abi::{
    flags, BoundedArray, BoundedPass, BOUNDED_MAX_BINS, BOUNDED_PAIR0, BOUNDED_RUN0, PASS_CUBIC,
    PASS_ORIGIN,
};

/// Twin of `PAIR_TOKENS` in `bounded.wgsl`: the pair tokens.
pub(crate) const PAIR_TOKENS: u32 = BOUNDED_RUN0 - BOUNDED_PAIR0;

impl ArrayEntry for BoundedArray {
    /// Twin of `differenced` in `bounded.wgsl`: the differences arrays along their axes.
    fn differenced(&self, axis: u32) -> bool {
        self.predictor == 1 && self.axes >> axis & 1 != 0
    }

    fn lines(&self) -> ([u32; 4], u32, u32) {
        let shape = [self.shape0, self.shape1, self.shape2, self.shape3];
        (shape, self.words, self.carry)
    }
}

/// Twin of `predict` in `bounded.wgsl`: the prediction of the target at index `i`,
/// coordinate `c` along the pass's axis, from the lattice values at `output[at ..]`.
fn predict(output: &[u32], at: u32, p: &BoundedPass, i: u32, c: u32) -> i32 {
    let x = |j: u32| output[(at + j) as usize] as i32;
    let b = x(i - p.dist);
    if p.len - c <= p.stride {
        return b;
    }
    let cc = x(i + p.dist);
    let s = p.stride;
    if p.kind == PASS_CUBIC && s <= p.len / 3 && c >= 3 * s && p.len - c > 3 * s {
        let a = x(i - 3 * p.dist);
        let d = x(i + 3 * p.dist);
        return (-a)
            .wrapping_add(9i32.wrapping_mul(b))
            .wrapping_add(9i32.wrapping_mul(cc))
            .wrapping_sub(d)
            .wrapping_add(8)
            >> 4;
    }
    b.wrapping_add(cc).wrapping_add(1) >> 1
}

/// Twin of the entry point `lattice_pass` with `pass_index` (the dispatch's uniform): every
/// lattice array's pass `pass_index` sets its targets to `P + S k`, ORing [`flags::VALUE`]
/// into `errors[file]` for `|k| >= 2^26` or `|x|` at or past the array's limit.
pub(crate) fn lattice_pass(
    words: &[u32],
    errors: &mut [u32],
    arrays: &[BoundedArray],
    passes: &[BoundedPass],
    output: &mut [u32],
    pass_index: u32,
) {
    for a in arrays {
        if a.predictor != 0 || pass_index >= a.pass_count {
            continue;
        }
        let p = &passes[(a.passes + pass_index) as usize];
        let mut bad = false;
        for t in 0..p.count {
            let mut r = t;
            let t3 = r % p.g3;
            r /= p.g3;
            let t2 = r % p.g2;
            r /= p.g2;
            let t1 = r % p.g1;
            let t0 = r / p.g1;
            let i = p.base + t0 * p.istep0 + t1 * p.istep1 + t2 * p.istep2 + t3 * p.istep3;
            let c = p.stride + 2 * p.stride * [t0, t1, t2, t3][p.axis as usize];
            let k = words[(a.words + p.stream + t) as usize] as i32;
            let pred = if p.kind == PASS_ORIGIN {
                0
            } else {
                predict(output, a.out_word, p, i, c)
            };
            let big = k >= 1 << 26 || k <= -(1 << 26);
            let x = pred.wrapping_add((p.step as i32).wrapping_mul(if big { 0 } else { k }));
            if big || x.wrapping_abs() >= a.limit as i32 {
                bad = true;
            }
            output[(a.out_word + i) as usize] = x as u32;
        }
        if bad {
            errors[a.file as usize] |= flags::VALUE;
        }
    }
}

/// Twin of `value_bits` in `bounded.wgsl`: value `i` of array `a` as f32 bits, and whether
/// its bin is past the limit.
fn value_bits(
    a: &BoundedArray,
    words: &[u32],
    tables: &[u32],
    output: &[u32],
    i: u32,
) -> (u32, bool) {
    let (x, bad) = if a.predictor == 0 {
        (output[(a.out_word + i) as usize] as i32, false)
    } else {
        let q = words[(a.words + i) as usize];
        (q as i32, q >= BOUNDED_MAX_BINS)
    };
    let v = (f32::from_bits(a.offset_bits) + x as f32 * f32::from_bits(a.unit_bits)).to_bits();
    // The exception run that covers `i`, if any, overrides the value.
    let v = run_bits(tables, a.runs, a.run_count, i, v);
    (v, bad)
}

/// Twin of the entry point `finish`: every value to `offset + f32(x) * unit` (or its run's
/// bits), ORing [`flags::VALUE`] into `errors[file]` for a bin past 65535.
pub(crate) fn finish(
    tables: &[u32],
    words: &[u32],
    errors: &mut [u32],
    arrays: &[BoundedArray],
    output: &mut [u32],
) {
    for a in arrays {
        let mut bad = false;
        for i in 0..a.count {
            let (v, b) = value_bits(a, words, tables, output, i);
            output[(a.out_word + i) as usize] = v;
            bad |= b;
        }
        if bad {
            errors[a.file as usize] |= flags::VALUE;
        }
    }
}
