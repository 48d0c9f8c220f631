//! The interlace scheme in code: the lattices, the residual bands and the prediction shared by
//! the encoder and the decoder. [`refine`] and [`subsample`] are the CPU twins of the WGSL
//! entry points of the same names in `shaders/levels.wgsl` (same arithmetic, same bit
//! results; the tests in `gpu::tests` compare them).
//!
//! One refinement takes the lattice at stride `2t` (the *coarse* level) to the lattice at
//! stride `t` (the *fine* level, `fw x fh`). In fine coordinates the coarse pixels are the
//! (even x, even y) ones; the new pixels are three sub-lattices:
//!
//! ```text
//!   x:  0   1   2   3          band 0  H  (odd x, even y)  predicted from left/right (coarse)
//! y 0   C   H   C   H                                       and up/down (D)
//!   1   V   D   V   D          band 1  V  (even x, odd y)  from up/down (coarse), left/right (D)
//!   2   C   H   C   H          band 2  D  (odd x, odd y)   from its four diagonal coarse pixels
//! ```
//!
//! D pixels are predicted first, from coarse pixels only; H and V pixels then from their four
//! direct neighbours, two coarse and two D (the study's "interlace-2pass"). Every prediction
//! is the rounded mean `(a + b + c + d + 2) >> 2`; a neighbour past the image edge is replaced
//! by the one opposite it (see `pred_d`, `pred_h`, `pred_v`). The residual of a pixel is
//! `(value - prediction) mod 2^depth`, stored in a `cw x 3*ch` image (`cw = ceil(fw / 2)`,
//! `ch = ceil(fh / 2)`): band `b` in rows `b*ch .. (b+1)*ch`, entry `(i, j)` of the bands for
//! fine pixels `(2i+1, 2j)`, `(2i, 2j+1)`, `(2i+1, 2j+1)`. Entries whose fine pixel lies past
//! the edge (odd widths or heights) are 0 and never read.

pub use crate::codec::sample::Sample;
/// The residual image's band ids (stored format: `crate::format::levels`).
pub use crate::format::levels::{BAND_D, BAND_H, BAND_V};

/// Dimensions of the residual image of a refinement to a `fine_w x fine_h` lattice.
pub const fn residual_dims(fine_w: u32, fine_h: u32) -> (u32, u32) {
    (fine_w.div_ceil(2), 3 * fine_h.div_ceil(2))
}

/// A fine lattice being read (encoder: the true values; decoder: the values decoded so far,
/// which are the true ones wherever a prediction reads).
struct Grid<'a, T> {
    px: &'a [T],
    w: usize,
    h: usize,
    ch: usize,
}

impl<T: Sample> Grid<'_, T> {
    #[inline(always)]
    fn at(&self, x: usize, y: usize, c: usize) -> u32 {
        self.px[(y * self.w + x) * self.ch + c].get()
    }
}

/// A prediction function: (grid, x, y, channel) to the predicted value.
type Predictor<T> = fn(&Grid<T>, usize, usize, usize) -> u32;

/// Prediction of the D pixel at (odd `x`, odd `y`): the mean of its four diagonal
/// neighbours, all coarse; past the right or bottom edge the neighbour on the other side.
#[inline(always)]
fn pred_d<T: Sample>(g: &Grid<T>, x: usize, y: usize, c: usize) -> u32 {
    let xr = if x + 1 < g.w { x + 1 } else { x - 1 };
    let yd = if y + 1 < g.h { y + 1 } else { y - 1 };
    (g.at(x - 1, y - 1, c) + g.at(xr, y - 1, c) + g.at(x - 1, yd, c) + g.at(xr, yd, c) + 2) >> 2
}

/// Mean of four values with two optional ones: a missing one takes the other's value, and
/// with both missing the pair is replaced by the two present ones (so the mean is theirs).
#[inline(always)]
fn mean4(a: u32, b: u32, p: Option<u32>, q: Option<u32>) -> u32 {
    let (p, q) = match (p, q) {
        (Some(p), Some(q)) => (p, q),
        (Some(p), None) => (p, p),
        (None, Some(q)) => (q, q),
        (None, None) => (a, b),
    };
    (a + b + p + q + 2) >> 2
}

/// Prediction of the H pixel at (odd `x`, even `y`): coarse left and right, D up and down.
#[inline(always)]
fn pred_h<T: Sample>(g: &Grid<T>, x: usize, y: usize, c: usize) -> u32 {
    let xr = if x + 1 < g.w { x + 1 } else { x - 1 };
    let up = (y >= 1).then(|| g.at(x, y - 1, c));
    let down = (y + 1 < g.h).then(|| g.at(x, y + 1, c));
    mean4(g.at(x - 1, y, c), g.at(xr, y, c), up, down)
}

/// Prediction of the V pixel at (even `x`, odd `y`): coarse up and down, D left and right.
#[inline(always)]
fn pred_v<T: Sample>(g: &Grid<T>, x: usize, y: usize, c: usize) -> u32 {
    let yd = if y + 1 < g.h { y + 1 } else { y - 1 };
    let left = (x >= 1).then(|| g.at(x - 1, y, c));
    let right = (x + 1 < g.w).then(|| g.at(x + 1, y, c));
    mean4(g.at(x, y - 1, c), g.at(x, yd, c), left, right)
}

/// The lattice of `src` (`w x h`, `ch` channels) at `stride`: pixel (x, y) of the result is
/// pixel (x * stride, y * stride) of `src`; `ceil(w / stride) x ceil(h / stride)`. The CPU
/// twin of `levels.wgsl`'s `subsample`.
pub fn subsample<T: Sample>(src: &[T], w: u32, h: u32, ch: u8, stride: u32) -> Vec<T> {
    let (w, ch, s) = (w as usize, ch as usize, stride as usize);
    let (ow, oh) = (w.div_ceil(s), (h as usize).div_ceil(s));
    let mut out = Vec::with_capacity(ow * oh * ch);
    for y in 0..oh {
        let row = &src[y * s * w * ch..];
        for x in 0..ow {
            out.extend_from_slice(&row[x * s * ch..x * s * ch + ch]);
        }
    }
    out
}

/// The residual image taking the lattice of `fine` at stride 2 to `fine` (`fw x fh`, `ch`
/// channels, samples of `depth` bits): the encoder's side of a refinement.
pub fn residuals<T: Sample>(fine: &[T], fw: u32, fh: u32, ch: u8) -> Vec<T> {
    let g = Grid {
        px: fine,
        w: fw as usize,
        h: fh as usize,
        ch: ch as usize,
    };
    let (cw, rh) = residual_dims(fw, fh);
    let (cw, chh) = (cw as usize, rh as usize / 3);
    let mask = mask::<T>();
    let mut out = vec![T::default(); cw * chh * 3 * g.ch];
    let at = |band: usize, i: usize, j: usize, c: usize| ((band * chh + j) * cw + i) * g.ch + c;
    for y in 0..g.h {
        for x in 0..g.w {
            let (i, j) = (x / 2, y / 2);
            let (band, pred): (usize, Predictor<T>) = match (x % 2, y % 2) {
                (0, 0) => continue,
                (1, 0) => (BAND_H, pred_h),
                (0, _) => (BAND_V, pred_v),
                _ => (BAND_D, pred_d),
            };
            for c in 0..g.ch {
                let r = g.at(x, y, c).wrapping_sub(pred(&g, x, y, c)) & mask;
                out[at(band, i, j, c)] = T::put(r);
            }
        }
    }
    out
}

/// Rebuilds the fine lattice (`fw x fh`, `ch` channels) from the coarse one
/// (`ceil(fw/2) x ceil(fh/2)`) and the residual image ([`residual_dims`]): the decoder's side
/// of a refinement and the CPU twin of `levels.wgsl`'s `refine` (which computes each pixel
/// on its own; here the D pixels are computed once into a plane, then the H and V pixels from
/// it, row by row: the same integers). The slices must have exactly those sizes (the caller
/// checks the payloads' headers).
///
/// In plane terms: coarse `C` is `cw x chh`, the D plane `dw x dh` (`floor(fw/2) x
/// floor(fh/2)`), and a neighbour index past a plane's edge is clamped, as `pred_d`,
/// `pred_h` and `pred_v` replace a neighbour past the image edge by the one opposite it.
pub fn refine<T: Sample>(coarse: &[T], residual: &[T], fw: u32, fh: u32, ch: u8) -> Vec<T> {
    let (w, h, n) = (fw as usize, fh as usize, ch as usize);
    let (cw, chh) = (w.div_ceil(2), h.div_ceil(2));
    let (dw, dh) = (w / 2, h / 2);
    assert_eq!(coarse.len(), cw * chh * n, "coarse level size");
    assert_eq!(residual.len(), cw * 3 * chh * n, "residual image size");
    let mask = mask::<T>();
    let c_row = |j: usize| &coarse[j * cw * n..(j + 1) * cw * n];
    let r_row = |band: usize, j: usize| &residual[(band * chh + j) * cw * n..][..cw * n];
    // Columns 0..inner have their right coarse neighbour at i + 1; a last D/H column with
    // i + 1 = cw (even widths) clamps it to i.
    let inner = dw.min(cw - 1) * n;
    let tail = dw * n > inner;

    // D plane (dw x dh): mean of the four coarse neighbours + residual.
    let mut d = vec![T::default(); dw * dh * n];
    for j in 0..dh {
        let (c0, c1, r) = (c_row(j), c_row((j + 1).min(chh - 1)), r_row(BAND_D, j));
        let row = &mut d[j * dw * n..(j + 1) * dw * n];
        predict_row(&mut row[..inner], c0, &c0[n..], c1, &c1[n..], r, mask);
        if tail {
            let t = inner;
            predict_row(
                &mut row[t..],
                &c0[t..],
                &c0[t..],
                &c1[t..],
                &c1[t..],
                &r[t..],
                mask,
            );
        }
    }
    let d_row = |j: usize| &d[j * dw * n..(j + 1) * dw * n];

    let mut fine = vec![T::default(); w * h * n];
    let mut values = vec![T::default(); cw * n];
    for (y, out) in fine.chunks_exact_mut(w * n).enumerate() {
        let j = y / 2;
        if y % 2 == 0 {
            // Coarse pixels at even x, H pixels at odd x: coarse left/right, D up (row j - 1)
            // and down (row j); a missing one takes the other's value, both missing (a
            // one-pixel-high level): left and right twice.
            let (cr, r) = (c_row(j), r_row(BAND_H, j));
            let (u, dn) = match ((j >= 1).then(|| d_row(j - 1)), (j < dh).then(|| d_row(j))) {
                (Some(u), Some(dn)) => (u, dn),
                (Some(u), None) => (u, u),
                (None, Some(dn)) => (dn, dn),
                (None, None) => (cr, &cr[n.min(cr.len())..]),
            };
            let hv = &mut values[..dw * n];
            predict_row(&mut hv[..inner], cr, &cr[n..], u, dn, r, mask);
            if tail {
                let t = inner;
                // Both-missing case: the clamped right neighbour is the left one.
                let dn_t = if dh == 0 { &cr[t..] } else { &dn[t..] };
                predict_row(
                    &mut hv[t..],
                    &cr[t..],
                    &cr[t..],
                    &u[t..],
                    dn_t,
                    &r[t..],
                    mask,
                );
            }
            interleave(out, cr, hv, n);
        } else {
            // V pixels at even x: coarse up/down, D left (i - 1) and right (i); D at odd x.
            let (c0, c1) = (c_row(j), c_row((j + 1).min(chh - 1)));
            let (dr, r) = (d_row(j), r_row(BAND_V, j));
            let vv = &mut values[..cw * n];
            if dw == 0 {
                predict_row(vv, c0, c1, c0, c1, r, mask);
            } else {
                // i = 0: no left neighbour.
                predict_row(&mut vv[..n], c0, c1, dr, dr, r, mask);
                // 1 <= i < dw: both.
                let m = dw * n;
                predict_row(
                    &mut vv[n..m],
                    &c0[n..],
                    &c1[n..],
                    dr,
                    &dr[n..],
                    &r[n..],
                    mask,
                );
                // i = dw < cw (odd widths): no right neighbour.
                if cw > dw {
                    let l = &dr[m - n..];
                    predict_row(&mut vv[m..], &c0[m..], &c1[m..], l, l, &r[m..], mask);
                }
            }
            interleave(out, vv, dr, n);
        }
    }
    fine
}

/// Writes a fine row of `n`-channel pixels: pixel `2i` from `even[i]`, pixel `2i + 1` from
/// `odd[i]` (`even` has `ceil(w/2)` pixels, `odd` `floor(w/2)`).
fn interleave<T: Sample>(out: &mut [T], even: &[T], odd: &[T], n: usize) {
    fn run<T: Sample, const N: usize>(out: &mut [T], even: &[T], odd: &[T]) {
        let mut pairs = out.chunks_exact_mut(2 * N);
        for ((o, e), d) in (&mut pairs)
            .zip(even.chunks_exact(N))
            .zip(odd.chunks_exact(N))
        {
            o[..N].copy_from_slice(e);
            o[N..].copy_from_slice(d);
        }
        // An odd width leaves one even pixel.
        let rest = pairs.into_remainder();
        if !rest.is_empty() {
            rest.copy_from_slice(&even[even.len() - N..]);
        }
    }
    match n {
        1 => run::<T, 1>(out, even, odd),
        2 => run::<T, 2>(out, even, odd),
        3 => run::<T, 3>(out, even, odd),
        _ => run::<T, 4>(out, even, odd),
    }
}

/// `out[k] = ((a[k] + b[k] + c[k] + d[k] + 2) >> 2) + r[k]` mod `mask + 1`, for every `k` of
/// `out` (the inputs are at least as long): the one prediction of the interlace scheme, over a
/// row segment, in a loop the compiler vectorises.
#[inline(always)]
fn predict_row<T: Sample>(out: &mut [T], a: &[T], b: &[T], c: &[T], d: &[T], r: &[T], mask: u32) {
    let m = out.len();
    let (a, b, c, d, r) = (&a[..m], &b[..m], &c[..m], &d[..m], &r[..m]);
    for k in 0..m {
        let p = (a[k].get() + b[k].get() + c[k].get() + d[k].get() + 2) >> 2;
        out[k] = T::put((p + r[k].get()) & mask);
    }
}

/// `2^depth - 1` for `T`.
const fn mask<T: Sample>() -> u32 {
    ((1u64 << T::DEPTH) - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo_random<T: Sample>(n: usize, seed: u32) -> Vec<T> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                T::put(s & mask::<T>())
            })
            .collect()
    }

    fn round_trip<T: Sample>(w: u32, h: u32, ch: u8, seed: u32) {
        let img: Vec<T> = pseudo_random(w as usize * h as usize * ch as usize, seed);
        let coarse = subsample(&img, w, h, ch, 2);
        let res = residuals(&img, w, h, ch);
        let (rw, rh) = residual_dims(w, h);
        assert_eq!(res.len(), (rw * rh) as usize * ch as usize);
        assert_eq!(refine(&coarse, &res, w, h, ch), img, "{w}x{h}x{ch}");
    }

    /// Every small shape (odd and even sides, 1-pixel rows and columns, 1-4 channels) rebuilds
    /// exactly, at both depths, including full-range values where the prediction wraps.
    #[test]
    fn refine_inverts_residuals_for_every_small_shape() {
        for w in 1..=9 {
            for h in 1..=9 {
                for ch in 1..=4u8 {
                    round_trip::<u8>(w, h, ch, w * 131 + h * 7 + ch as u32);
                    round_trip::<u16>(w, h, ch, w * 17 + h * 131 + ch as u32);
                }
            }
        }
    }

    #[test]
    fn subsample_picks_the_lattice() {
        // 5x3 gray, value = 10 y + x.
        let img: Vec<u8> = (0..3)
            .flat_map(|y| (0..5).map(move |x| 10 * y + x))
            .collect();
        assert_eq!(subsample(&img, 5, 3, 1, 2), vec![0, 2, 4, 20, 22, 24]);
        assert_eq!(subsample(&img, 5, 3, 1, 4), vec![0, 4]);
        assert_eq!(subsample(&img, 5, 3, 1, 1), img);
    }

    /// A smooth image leaves small residuals: the prediction is doing its job (the point of
    /// the scheme; a broken predictor would still round-trip).
    #[test]
    fn smooth_gradients_leave_small_residuals() {
        let (w, h) = (32u32, 24u32);
        let img: Vec<u8> = (0..h)
            .flat_map(|y| (0..w).map(move |x| (x * 3 + y * 2) as u8))
            .collect();
        let res = residuals(&img, w, h, 1);
        let small = res.iter().filter(|&&r| r <= 2 || r >= 254).count();
        assert!(small * 10 >= res.len() * 9, "{small} of {}", res.len());
    }
}
