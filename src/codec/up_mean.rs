//! The up-mean prediction of a row, as both profiles define it (SPEC: fast predictor 3,
//! compact predictor 5): `floor((a + c) / 2)` of the samples above-left and above-right, the
//! sample above standing in for a missing neighbour at the patch's edges.

use super::sample::Sample;

/// Up-mean predictions for a whole row from the row above (`up` and `out` of the row's
/// width). The interior loop runs on 16-bit lanes without edge tests (twice the lanes of the
/// u32 form, same results).
#[inline(always)]
pub(crate) fn up_mean_row<T: Sample>(up: &[T], out: &mut [u16]) {
    let w = up.len();
    if w == 1 {
        out[0] = up[0].wide();
        return;
    }
    out[0] = mean(up[0].wide(), up[1].wide());
    out[w - 1] = mean(up[w - 2].wide(), up[w - 1].wide());
    for ((o, &a), &c) in out[1..w - 1].iter_mut().zip(&up[..w - 2]).zip(&up[2..]) {
        *o = mean(a.wide(), c.wide());
    }
}

/// `floor((a + c) / 2)` as `(a & c) + ((a ^ c) >> 1)`, which never leaves 16 bits. A
/// function, not a closure: closures are not inlined into the decoders' AVX2 copies
/// (`codec::simd`).
#[inline(always)]
fn mean(a: u16, c: u16) -> u16 {
    (a & c) + ((a ^ c) >> 1)
}
