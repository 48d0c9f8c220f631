//! Moving samples between interleaved pixels and per-channel planes (`u16`, whatever the
//! depth), which is how both codecs work on a patch.

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

/// Writes one patch row of `C` planes (each `plane_len` long, the row at `offset`) as
/// interleaved 8-bit pixels. Written with zipped iterators so there is no bounds check per
/// sample and the compiler can vectorise the shuffle.
#[inline(always)]
pub(crate) fn interleave_u8<const C: usize>(
    planes: &[u16],
    plane_len: usize,
    offset: usize,
    dst: &mut [u8],
) {
    let w = dst.len() / C;
    let row = |c: usize| &planes[c * plane_len + offset..c * plane_len + offset + w];
    match C {
        1 => {
            for (o, &v) in dst.iter_mut().zip(row(0)) {
                *o = v as u8;
            }
        }
        2 => {
            for ((o, &a), &b) in dst.chunks_exact_mut(2).zip(row(0)).zip(row(1)) {
                o.copy_from_slice(&[a as u8, b as u8]);
            }
        }
        3 => {
            for (((o, &a), &b), &c) in dst.chunks_exact_mut(3).zip(row(0)).zip(row(1)).zip(row(2)) {
                o.copy_from_slice(&[a as u8, b as u8, c as u8]);
            }
        }
        _ => {
            let rows = (row(0), row(1), row(2), row(3));
            for ((((o, &a), &b), &c), &d) in dst
                .chunks_exact_mut(4)
                .zip(rows.0)
                .zip(rows.1)
                .zip(rows.2)
                .zip(rows.3)
            {
                o.copy_from_slice(&[a as u8, b as u8, c as u8, d as u8]);
            }
        }
    }
}

/// As [`interleave_u8`], for 16-bit samples in native byte order.
#[inline(always)]
pub(crate) fn interleave_u16<const C: usize>(
    planes: &[u16],
    plane_len: usize,
    offset: usize,
    dst: &mut [u8],
) {
    let w = dst.len() / (2 * C);
    let rows: [&[u16]; C] =
        std::array::from_fn(|c| &planes[c * plane_len + offset..c * plane_len + offset + w]);
    for (x, px) in dst.chunks_exact_mut(2 * C).enumerate() {
        for (c, row) in rows.iter().enumerate() {
            px[2 * c..2 * c + 2].copy_from_slice(&row[x].to_ne_bytes());
        }
    }
}

/// The end-of-stream rule both versions share: the stream's `used` bits must fill `payload`
/// to within its last byte, and the padding bits after them must be zero. On failure returns
/// the bytes the bits take.
pub(crate) fn check_padding(payload: &[u8], used: u64) -> Result<(), u64> {
    let used_bytes = used.div_ceil(8);
    let padding_ok = used % 8 == 0
        || payload
            .get((used / 8) as usize)
            .is_some_and(|&b| b >> (used % 8) == 0);
    if used_bytes != payload.len() as u64 || !padding_ok {
        return Err(used_bytes);
    }
    Ok(())
}
