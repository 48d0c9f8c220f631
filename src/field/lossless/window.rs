//! The lossless decoder's window path: where each chunk is one plane of the last two axes,
//! only each plane's segments above a window's last row are decoded (see
//! `decode_lossless_window`); `decode_words` takes it when [`prefix_segments`] allows.

use super::*;

/// How many of each chunk's segments hold the values above row `rows_end` of its plane (the
/// last two axes), where decoding only those is what [`decode_prefixes`] does: each chunk
/// is exactly one plane, no second differences (their inverse runs over the whole array),
/// and fewer segments than all. `None`: decode whole. (The caller has checked that no chunk
/// has adjustments.)
pub(in crate::field::lossless) fn prefix_segments(
    h: &LosslessHeader,
    rows_end: u32,
) -> Option<usize> {
    let nd = h.shape.len();
    if nd < 2 || h.axes2 != 0 {
        return None;
    }
    let (ny, nx) = (h.shape[nd - 2] as usize, h.shape[nd - 1] as usize);
    let plane = ny * nx;
    if plane != 1usize << h.chunk_log2 {
        return None;
    }
    let segments = h.segments as usize;
    let q = plane.div_ceil(segments);
    let need = (rows_end as usize).min(ny) * nx;
    let k = need.div_ceil(q).max(1);
    // Then the first k segments are exactly values 0..k q (segment_range's split of k q into
    // k segments is the first k of the plane's into all of them).
    (k < segments && k * q <= plane).then_some(k)
}

/// Decodes the first `k` segments of every chunk of a checked layout whose chunks are one
/// plane each ([`prefix_segments`]): the values of each plane's first rows, reconstructed and
/// finished, the rest of `out` zero. Every value reconstructed reads only values of the same
/// or earlier planes at the same or earlier positions, all decoded. On Ok every word of
/// `out` was written.
pub(super) fn decode_prefixes<W: Word>(
    layout: &Layout<'_>,
    data: &[u8],
    k: usize,
    out: &mut [MaybeUninit<W>],
) -> Result<()> {
    let h = &layout.header;
    let plane = 1usize << h.chunk_log2;
    let decoded = k * plane.div_ceil(h.segments as usize);
    let width = h.dtype.bits();
    let st = strides(&h.shape);
    let base = |c: &[u8]| (c.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
    // `decode_words` checked that the chunks (of `plane` values each) cover `out`, and
    // `parse_chunk` gives every chunk the header's segments (`decode_stream` checks the k).
    for (c, words) in out.chunks_mut(plane).enumerate() {
        let bytes = layout.chunks[c];
        let mut residuals = parse_chunk(bytes, base(bytes), h)?.residuals;
        residuals.segments.truncate(k);
        let (head, tail) = words.split_at_mut(decoded);
        decode_stream(data, &residuals, k, width, head)?;
        tail.fill(MaybeUninit::new(W::from_u32(0)));
    }
    // SAFETY: every chunk's head was written by decode_stream (Ok) and its tail above, and
    // the chunks cover `out` (checked by `decode_words`).
    let out = unsafe { assume_init(out) };
    for c in 0..layout.chunks.len() {
        reconstruct(out, c * plane, c * plane + decoded, &h.shape, &st, h.axes);
    }
    for words in out.chunks_mut(plane) {
        finish(&mut words[..decoded], h, None, false)?;
    }
    for r in &layout.runs {
        out[r.start as usize..(r.start + r.len) as usize].fill(W::from_u32(r.bits));
    }
    Ok(())
}
