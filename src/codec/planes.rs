//! Moving samples between interleaved pixels and per-channel planes, which is how both codecs
//! work on a patch: `u16` planes whatever the depth, except the fast decoder's byte planes
//! for 8-bit images.

use super::sample::Sample;
use super::simd::Avx2;
use crate::format::Header;

/// Copies channel `c` of a patch out of interleaved samples into a plane.
#[inline(always)]
pub(crate) fn extract_plane<T: Copy + Into<u16>>(
    samples: &[T],
    header: &Header,
    (x0, y0, pw, ph): (usize, usize, usize, usize),
    c: usize,
    plane: &mut [u16],
) {
    let channels = header.channels() as usize;
    let width = header.width as usize;
    for (y, dst) in plane.chunks_exact_mut(pw).take(ph).enumerate() {
        let start = ((y0 + y) * width + x0) * channels;
        let src = &samples[start..start + pw * channels];
        for (o, px) in dst.iter_mut().zip(src.chunks_exact(channels)) {
            *o = px[c].into();
        }
    }
}

/// Writes one patch row of `C` planes (each `plane_len` long, the row at `offset`; samples
/// below 256, as bytes or as `u16`) as interleaved 8-bit pixels. Three and four channels go
/// through the AVX2 shuffles where `avx2` is given (the rest of the row, and every other
/// case, through the loops below). Written with zipped iterators so there is no bounds check
/// per sample and the compiler can vectorise the shuffle.
#[inline(always)]
pub(crate) fn interleave_u8<const C: usize, T: Sample>(
    planes: &[T],
    plane_len: usize,
    offset: usize,
    dst: &mut [u8],
    avx2: Option<Avx2>,
) {
    // The rows as one array (built by a loop: closures are not inlined into the AVX2 copies).
    let mut w = dst.len() / C;
    let mut rows: [&[T]; C] = [&[]; C];
    for (c, row) in rows.iter_mut().enumerate() {
        *row = &planes[c * plane_len + offset..c * plane_len + offset + w];
    }
    let mut dst = dst;
    #[cfg(target_arch = "x86_64")]
    if (C == 3 || C == 4) && avx2.is_some() {
        // SAFETY: an `Avx2` exists only on a CPU with AVX2 (Avx2::detect).
        let done = unsafe { super::interleave_avx2::interleave::<C, T>(rows, dst) };
        for row in &mut rows {
            *row = &row[done..];
        }
        dst = &mut dst[done * C..];
        w -= done;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx2;
    debug_assert!(rows.iter().all(|r| r.len() == w));
    match C {
        1 => {
            for (o, &v) in dst.iter_mut().zip(rows[0]) {
                *o = v.wide() as u8;
            }
        }
        2 => {
            for ((o, &a), &b) in dst.chunks_exact_mut(2).zip(rows[0]).zip(rows[1]) {
                o.copy_from_slice(&[a.wide() as u8, b.wide() as u8]);
            }
        }
        3 => {
            for (((o, &a), &b), &c) in dst
                .chunks_exact_mut(3)
                .zip(rows[0])
                .zip(rows[1])
                .zip(rows[2])
            {
                o.copy_from_slice(&[a.wide() as u8, b.wide() as u8, c.wide() as u8]);
            }
        }
        _ => {
            for ((((o, &a), &b), &c), &d) in dst
                .chunks_exact_mut(4)
                .zip(rows[0])
                .zip(rows[1])
                .zip(rows[2])
                .zip(rows[3])
            {
                o.copy_from_slice(&[
                    a.wide() as u8,
                    b.wide() as u8,
                    c.wide() as u8,
                    d.wide() as u8,
                ]);
            }
        }
    }
}

/// As [`interleave_u8`], for 16-bit samples in native byte order.
#[inline(always)]
pub(crate) fn interleave_u16<const C: usize, T: Sample>(
    planes: &[T],
    plane_len: usize,
    offset: usize,
    dst: &mut [u8],
) {
    let w = dst.len() / (2 * C);
    let rows: [&[T]; C] =
        std::array::from_fn(|c| &planes[c * plane_len + offset..c * plane_len + offset + w]);
    for (x, px) in dst.chunks_exact_mut(2 * C).enumerate() {
        for (c, row) in rows.iter().enumerate() {
            px[2 * c..2 * c + 2].copy_from_slice(&row[x].wide().to_ne_bytes());
        }
    }
}

/// The end-of-stream rule both versions share: the stream's `used` bits must fill `payload`
/// to within its last byte, and the padding bits after them must be zero. On failure returns
/// the bytes the bits take.
pub(crate) fn check_padding(payload: &[u8], used: u64) -> Result<(), u64> {
    let used_bytes = used.div_ceil(8);
    let padding_ok = used.is_multiple_of(8)
        || payload
            .get((used / 8) as usize)
            .is_some_and(|&b| b >> (used % 8) == 0);
    if used_bytes != payload.len() as u64 || !padding_ok {
        return Err(used_bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 interleave writes exactly what the portable loops write, for three and four
    /// channels held as `u16` or byte planes, at every row width around its 16-pixel steps and
    /// at an offset into the planes, every sample value included.
    #[test]
    fn avx2_and_portable_interleave_agree() {
        let Some(avx2) = Avx2::detect() else {
            return; // Nothing to compare on this CPU: the portable path is the only one.
        };
        fn check<const C: usize, T: Sample>(avx2: Avx2) {
            let plane_len = 160;
            let planes: Vec<T> = (0..C * plane_len)
                .map(|i| T::put(((i * 37 + i / 7) % 256) as u32))
                .collect();
            for w in 0..=70 {
                for offset in [0, 3] {
                    let mut a = vec![0xA5u8; w * C];
                    let mut b = a.clone();
                    interleave_u8::<C, T>(&planes, plane_len, offset, &mut a, None);
                    interleave_u8::<C, T>(&planes, plane_len, offset, &mut b, Some(avx2));
                    let what = format!("{C} channels of {}-bit planes", T::DEPTH);
                    assert_eq!(a, b, "{what}, width {w}, offset {offset}");
                    // The portable result itself: pixel x is channel c's sample x.
                    for x in 0..w {
                        for c in 0..C {
                            let sample = planes[c * plane_len + offset + x].get();
                            assert_eq!(a[x * C + c] as u32, sample, "{what}");
                        }
                    }
                }
            }
        }
        check::<3, u16>(avx2);
        check::<4, u16>(avx2);
        check::<3, u8>(avx2);
        check::<4, u8>(avx2);
    }
}
