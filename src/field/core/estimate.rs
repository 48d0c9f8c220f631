//! Size estimates both chunked encoders rank their candidates by: windows of the array
//! sampled, and the order-0 entropy of a residual stream's single tokens plus their raw bits.

use super::code::MAX_TOKENS;
use super::container::strides;
use super::tokens::{mask, token_of, zigzag};

/// Values the size estimate looks at: windows of this many values ...
const SAMPLE_WINDOW: usize = 4096;
/// ... at most this many windows.
const SAMPLE_WINDOWS: usize = 48;

/// Windows `(start, len)` of an array of `n` values the size estimate looks at, spread evenly:
/// all of it when small.
pub(in crate::field) fn sample_windows(n: usize) -> Vec<(usize, usize)> {
    if n <= SAMPLE_WINDOW * SAMPLE_WINDOWS {
        return vec![(0, n)];
    }
    let step = n / SAMPLE_WINDOWS;
    (0..SAMPLE_WINDOWS)
        .map(|w| (w * step, SAMPLE_WINDOW))
        .collect()
}

/// Estimated bits of a token histogram and its raw bits: the order-0 entropy of the tokens
/// plus the raw bits.
pub(in crate::field) fn entropy_bits(hist: &[u64; MAX_TOKENS], raw: u64) -> f64 {
    let total: u64 = hist.iter().sum();
    let mut h = raw as f64;
    for &c in hist {
        if c > 0 {
            h -= c as f64 * (c as f64 / total as f64).log2();
        }
    }
    h
}

/// Per set in `sets`: the token histogram and raw bits of `x` (C order, `shape`) differenced
/// along the set's axes (wrapping, in `width` bits, zigzag), over the cells of the `sample`
/// windows only; each cell's residual is the one the whole array's differences give it (along
/// an axis, the first cell is not differenced). One pass for every set: per cell the
/// `2^ndim` corner values, then one butterfly per axis gives every set's mixed difference.
pub(in crate::field) fn difference_tokens(
    x: &[u32],
    shape: &[u32],
    width: u32,
    sets: &[u8],
    sample: &[(usize, usize)],
) -> Vec<([u64; MAX_TOKENS], u64)> {
    let nd = shape.len();
    let st = strides(shape);
    let corners = 1usize << nd;
    // The offset of each corner (a subset T of the axes: one step back along each).
    let off: Vec<usize> = (0..corners)
        .map(|t| (0..nd).filter(|a| t >> a & 1 == 1).map(|a| st[a]).sum())
        .collect();
    let mut out = vec![([0u64; MAX_TOKENS], 0u64); sets.len()];
    let mut g = [0u32; 16];
    for_each_sampled(shape, sample, |j, coord| {
        let mut active = 0usize;
        for (a, &c) in coord[..nd].iter().enumerate() {
            if c >= 1 {
                active |= 1 << a;
            }
        }
        for t in 0..corners {
            g[t] = if t & !active == 0 { x[j - off[t]] } else { 0 };
        }
        mixed_differences(&mut g[..corners], nd, active);
        for (k, &set) in sets.iter().enumerate() {
            count(&mut out[k], g[set as usize], width);
        }
    });
    out
}

/// The token histogram and raw bits of `x` (C order, `shape`) differenced along `axes`, then
/// again along `axes2` (a subset: second differences), over the cells of the `sample`
/// windows only, as differencing the whole array twice gives each cell's residual.
pub(in crate::field) fn second_difference_tokens(
    x: &[u32],
    shape: &[u32],
    width: u32,
    axes: u8,
    axes2: u8,
    sample: &[(usize, usize)],
) -> ([u64; MAX_TOKENS], u64) {
    let nd = shape.len();
    let st = strides(shape);
    // A cell differenced m times along each axis (m: how many of the two sets hold it): per
    // axis the stencil of binomial coefficients (1, -1) or (1, -2, 1), cut where it would
    // reach before the first cell along the axis (taken as 0). The terms depend on the
    // coordinates only through each axis's reach, min(m, coordinate): one list per reach.
    let m: Vec<usize> = (0..nd)
        .map(|a| (axes >> a & 1) as usize + (axes2 >> a & 1) as usize)
        .collect();
    let terms: Vec<Vec<(usize, u32)>> = (0..3usize.pow(nd as u32))
        .map(|p| {
            let mut t: Vec<(usize, i64)> = vec![(0, 1)];
            for a in 0..nd {
                let reach = p / 3usize.pow(a as u32) % 3;
                if reach > m[a] {
                    return Vec::new();
                }
                let stencil: &[i64] = [&[1i64][..], &[1, -1], &[1, -2, 1]][m[a]];
                let stride = st[a];
                t = t
                    .iter()
                    .flat_map(|&(off, w)| {
                        stencil[..=reach]
                            .iter()
                            .enumerate()
                            .map(move |(k, &c)| (off + k * stride, w * c))
                    })
                    .collect();
            }
            t.into_iter().map(|(off, w)| (off, w as u32)).collect()
        })
        .collect();
    let mut out = ([0u64; MAX_TOKENS], 0u64);
    for_each_sampled(shape, sample, |j, coord| {
        let p: usize = (0..nd)
            .map(|a| m[a].min(coord[a]) * 3usize.pow(a as u32))
            .sum();
        let r = terms[p].iter().fold(0u32, |acc, &(off, w)| {
            acc.wrapping_add(x[j - off].wrapping_mul(w))
        });
        count(&mut out, r, width);
    });
    out
}

/// Counts residual `r` (`width` bits, before zigzag) in a token histogram and its raw bits.
#[inline(always)]
fn count(h: &mut ([u64; MAX_TOKENS], u64), r: u32, width: u32) {
    let (t, nraw, _) = token_of(zigzag(r & mask(width), width));
    h.0[t as usize] += 1;
    h.1 += nraw as u64;
}

/// Calls `f(j, coordinates)` for every cell `j` of the `sample` windows of an array of
/// `shape` (C order, at most 4 axes): each window's first coordinates, then carried cell by
/// cell.
#[inline(always)]
fn for_each_sampled(
    shape: &[u32],
    sample: &[(usize, usize)],
    mut f: impl FnMut(usize, &[usize; 4]),
) {
    let nd = shape.len();
    for &(s, l) in sample {
        let mut coord = [0usize; 4];
        let mut rest = s;
        for a in (0..nd).rev() {
            coord[a] = rest % shape[a] as usize;
            rest /= shape[a] as usize;
        }
        for j in s..s + l {
            f(j, &coord);
            for a in (0..nd).rev() {
                coord[a] += 1;
                if coord[a] < shape[a] as usize {
                    break;
                }
                coord[a] = 0;
            }
        }
    }
}

/// In place, from the values `g[T]` at the corners `cell - sum of strides of T` (for each
/// subset `T` of `ndim` axes, none the cell itself) to the residual of every axis set `S`:
/// `g[S]` becomes the cell differenced (wrapping) along each axis of `S` in `active`, as
/// differencing the whole array gives it (an axis not in `active`, where the cell is the
/// first, is not differenced; its corners are not read). One butterfly per axis.
#[inline(always)]
pub(in crate::field) fn mixed_differences(g: &mut [u32], ndim: usize, active: usize) {
    for a in 0..ndim {
        let bit = 1 << a;
        let along = active & bit != 0;
        for t in (0..g.len()).filter(|t| t & bit != 0) {
            g[t] = if along {
                g[t ^ bit].wrapping_sub(g[t])
            } else {
                g[t ^ bit]
            };
        }
    }
}
