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
//! by the one opposite it (see [`pred_d`], [`pred_h`], [`pred_v`]). The residual of a pixel is
//! `(value - prediction) mod 2^depth`, stored in a `cw x 3*ch` image (`cw = ceil(fw / 2)`,
//! `ch = ceil(fh / 2)`): band `b` in rows `b*ch .. (b+1)*ch`, entry `(i, j)` of the bands for
//! fine pixels `(2i+1, 2j)`, `(2i, 2j+1)`, `(2i+1, 2j+1)`. Entries whose fine pixel lies past
//! the edge (odd widths or heights) are 0 and never read.

/// A sample type: 8- or 16-bit.
pub trait Sample:
    Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + bytemuck::Pod + 'static
{
    /// Bits per sample.
    const DEPTH: u8;
    /// The sample as a `u32`.
    fn get(self) -> u32;
    /// A sample from the low bits of `v` (the caller masks).
    fn put(v: u32) -> Self;
}

impl Sample for u8 {
    const DEPTH: u8 = 8;
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn put(v: u32) -> Self {
        v as u8
    }
}

impl Sample for u16 {
    const DEPTH: u8 = 16;
    #[inline(always)]
    fn get(self) -> u32 {
        self as u32
    }
    #[inline(always)]
    fn put(v: u32) -> Self {
        v as u16
    }
}

/// Dimensions of the residual image of a refinement to a `fine_w x fine_h` lattice.
pub const fn residual_dims(fine_w: u32, fine_h: u32) -> (u32, u32) {
    (fine_w.div_ceil(2), 3 * fine_h.div_ceil(2))
}

/// Band of the residual image holding H pixels (odd x, even y).
pub const BAND_H: usize = 0;
/// Band holding V pixels (even x, odd y).
pub const BAND_V: usize = 1;
/// Band holding D pixels (odd x, odd y).
pub const BAND_D: usize = 2;

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
/// floor(fh/2)`), and a neighbour index past a plane's edge is clamped, as [`pred_d`],
/// [`pred_h`] and [`pred_v`] replace a neighbour past the image edge by the one opposite it.
pub fn refine<T: Sample>(coarse: &[T], residual: &[T], fw: u32, fh: u32, ch: u8) -> Vec<T> {
    let (w, h, n) = (fw as usize, fh as usize, ch as usize);
    let (cw, chh) = (w.div_ceil(2), h.div_ceil(2));
    let (dw, dh) = (w / 2, h / 2);
    assert_eq!(coarse.len(), cw * chh * n, "coarse level size");
    assert_eq!(residual.len(), cw * 3 * chh * n, "residual image size");
    let mask = mask::<T>();
    let c_row = |j: usize| &coarse[j * cw * n..(j + 1) * cw * n];
    let r_row = |band: usize, j: usize| &residual[(band * chh + j) * cw * n..][..cw * n];
    // The right neighbour of coarse column i (clamped): x + 1 < w exactly when i + 1 < cw.
    let right = |i: usize| if i + 1 < cw { i + 1 } else { i };

    // D plane: mean of the four coarse neighbours + residual.
    let mut d = vec![0u32; dw * dh * n];
    // (No D pixels at all when the fine level is one pixel wide or high.)
    for (j, d_row) in d.chunks_exact_mut((dw * n).max(1)).enumerate().take(dh) {
        let (c0, c1, r) = (c_row(j), c_row((j + 1).min(chh - 1)), r_row(BAND_D, j));
        for i in 0..dw {
            let (k, kr) = (i * n, right(i) * n);
            for c in 0..n {
                let p =
                    (c0[k + c].get() + c0[kr + c].get() + c1[k + c].get() + c1[kr + c].get() + 2)
                        >> 2;
                d_row[k + c] = (p + r[k + c].get()) & mask;
            }
        }
    }
    let d_row = |j: usize| &d[j * dw * n..(j + 1) * dw * n];

    let mut fine = vec![T::default(); w * h * n];
    for (y, out) in fine.chunks_exact_mut(w * n).enumerate() {
        let j = y / 2;
        if y % 2 == 0 {
            let (cr, r) = (c_row(j), r_row(BAND_H, j));
            for i in 0..cw {
                out[2 * i * n..2 * i * n + n].copy_from_slice(&cr[i * n..i * n + n]);
            }
            // H pixels: coarse left/right, D up (row j - 1) and down (row j).
            let up = (j >= 1).then(|| d_row(j - 1));
            let down = (j < dh).then(|| d_row(j));
            let vertical = match (up, down) {
                (Some(u), Some(dn)) => Some((u, dn)),
                (Some(u), None) => Some((u, u)),
                (None, Some(dn)) => Some((dn, dn)),
                (None, None) => None,
            };
            for i in 0..dw {
                let (k, kr, o) = (i * n, right(i) * n, (2 * i + 1) * n);
                for c in 0..n {
                    let (l, rt) = (cr[k + c].get(), cr[kr + c].get());
                    let (u, dn) = vertical.map_or((l, rt), |(u, dn)| (u[k + c], dn[k + c]));
                    let p = (l + rt + u + dn + 2) >> 2;
                    out[o + c] = T::put((p + r[k + c].get()) & mask);
                }
            }
        } else {
            // y odd: j < dh. V pixels at even x, D pixels at odd x.
            let (c0, c1) = (c_row(j), c_row((j + 1).min(chh - 1)));
            let (dr, r) = (d_row(j), r_row(BAND_V, j));
            for i in 0..cw {
                let (k, o) = (i * n, 2 * i * n);
                for c in 0..n {
                    let (u, dn) = (c0[k + c].get(), c1[k + c].get());
                    let left = (i >= 1).then(|| dr[k - n + c]);
                    let rt = (i < dw).then(|| dr[k + c]);
                    let p = mean4(u, dn, left, rt);
                    out[o + c] = T::put((p + r[k + c].get()) & mask);
                }
            }
            for i in 0..dw {
                for c in 0..n {
                    out[(2 * i + 1) * n + c] = T::put(dr[i * n + c]);
                }
            }
        }
    }
    fine
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
