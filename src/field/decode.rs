//! The field decoder on the CPU: the bin image's decode, then one f32 addition per value and
//! the exact runs ([`reconstruct_field`], the twin of `shaders/fields.wgsl`).

use std::ops::Range;

use super::core::runs::Run;
use super::format::{parse_field, FieldHeader};
use crate::decode::DecodeOptions;
use crate::error::Result;

/// The decoded value of bin `q`: one f32 addition of an exact product (the twin of
/// `reconstruct` in `shaders/fields.wgsl`).
#[inline(always)]
pub fn reconstruct(q: u16, offset: f32, bin_width: f32) -> f32 {
    offset + q as f32 * bin_width
}

/// Decodes a field file into its values (C order) on the CPU.
pub fn decode_field(data: &[u8], options: &DecodeOptions) -> Result<(FieldHeader, Vec<f32>)> {
    decode_field_window(data, options, None)
}

/// Like [`decode_field`], but with `window = Some((rows, columns))` only the values in those
/// rows and columns of every `ny x nx` plane are decoded exactly (ranges clamped to the
/// plane): the others are unspecified. The bin image's patches outside the window are not
/// decoded (for a random crop of a large plane, most of the work). The file is validated as
/// a whole either way.
pub fn decode_field_window(
    data: &[u8],
    options: &DecodeOptions,
    window: Option<(Range<u32>, Range<u32>)>,
) -> Result<(FieldHeader, Vec<f32>)> {
    with_bins(data, options, window, |bins, rows, h| {
        let mut out = vec![0f32; bins.len()];
        for span in plane_rows(h, rows) {
            reconstruct_field(
                &bins[span.clone()],
                &[],
                h.offset,
                h.bin_width,
                &mut out[span],
            );
        }
        out
    })
    .map(|(h, runs, mut out)| {
        for r in &runs {
            out[r.start as usize..(r.start + r.len) as usize].fill(f32::from_bits(r.bits));
        }
        (h, out)
    })
}

/// [`decode_field_window`]'s values as little-endian bytes (4 per value), written once:
/// the payload of an array without a copy of its values.
pub fn decode_field_window_le(
    data: &[u8],
    options: &DecodeOptions,
    window: Option<(Range<u32>, Range<u32>)>,
) -> Result<(FieldHeader, Vec<u8>)> {
    with_bins(data, options, window, |bins, rows, h| {
        let len = bins.len() * 4;
        let mut out: Vec<u8> = Vec::with_capacity(len);
        let spare = &mut out.spare_capacity_mut()[..len];
        // Every byte written once: the window's rows their values, the others zero.
        let mut done = 0;
        for span in plane_rows(h, rows) {
            for b in &mut spare[done..span.start * 4] {
                b.write(0);
            }
            let bytes = &mut spare[span.start * 4..span.end * 4];
            for (o, &q) in bytes.chunks_exact_mut(4).zip(&bins[span.clone()]) {
                let v = reconstruct(q, h.offset, h.bin_width).to_le_bytes();
                for (b, x) in o.iter_mut().zip(v) {
                    b.write(x);
                }
            }
            done = span.end * 4;
        }
        for b in &mut spare[done..] {
            b.write(0);
        }
        // SAFETY: the loops above wrote every byte of `spare[..len]` (the spans of
        // `plane_rows` are increasing and inside the field; the gaps between them and the
        // tail are zero-filled).
        unsafe { out.set_len(len) };
        out
    })
    .map(|(h, runs, mut out)| {
        for r in &runs {
            let bytes = r.bits.to_le_bytes();
            let run = &mut out[r.start as usize * 4..(r.start + r.len) as usize * 4];
            for o in run.chunks_exact_mut(4) {
                o.copy_from_slice(&bytes);
            }
        }
        (h, out)
    })
}

/// Bins kept per thread between calls up to this many (larger ones are freed after use).
const KEPT_BINS: usize = 8 << 20;

thread_local! {
    /// The last field's bin buffer, reused: a window decode leaves bins outside the window
    /// as they were (their values are unspecified, and never read as the window's).
    static BINS: std::cell::Cell<Vec<u16>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The field parsed, limits checked, its bin image decoded (within `window`'s rows and
/// columns of every plane, clamped) into a per-thread buffer, then `finish(bins, rows, h)`.
/// Returns the header, the exception runs (validated: inside the field) and `finish`'s value.
fn with_bins<T>(
    data: &[u8],
    options: &DecodeOptions,
    window: Option<(Range<u32>, Range<u32>)>,
    finish: impl FnOnce(&[u16], Range<u32>, &FieldHeader) -> T,
) -> Result<(FieldHeader, Vec<Run>, T)> {
    let layout = parse_field(data)?;
    let h = layout.header;
    // Limits before any allocation: the values (4 bytes each) and the bins (2 bytes each).
    let values_bytes = h.len() * 4;
    if values_bytes > options.limits.max_output_bytes {
        return Err(crate::error::LimitsError::OutputBytes {
            needed: values_bytes,
            max: options.limits.max_output_bytes,
        }
        .into());
    }
    let image = crate::decode::parse(layout.image, options)?;
    let [nz, ny, nx] = h.shape;
    let clamp = |r: Range<u32>, len: u32| r.start.min(len)..r.end.min(len).max(r.start.min(len));
    let (rows, columns) = window.map_or((0..ny, 0..nx), |(r, c)| (clamp(r, ny), clamp(c, nx)));
    let n = h.len() as usize;
    let mut bins = BINS.take();
    if bins.len() != n {
        bins.clear();
        bins.resize(n, 0);
    }
    let decoded = decode_bins(&image, &mut bins, [nz, ny, nx], &rows, &columns, options);
    let value = decoded.map(|()| finish(&bins, rows, &h));
    if bins.len() <= KEPT_BINS {
        BINS.set(bins);
    }
    Ok((h, layout.runs, value?))
}

/// The bin image `image` (planes of `ny x nx` stacked) into `bins`: whole, or only the
/// patches holding `rows x columns` of each plane.
fn decode_bins(
    image: &crate::format::FileLayout,
    bins: &mut [u16],
    [nz, ny, nx]: [u32; 3],
    rows: &Range<u32>,
    columns: &Range<u32>,
    options: &DecodeOptions,
) -> Result<()> {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(bins);
    if *rows == (0..ny) && *columns == (0..nx) {
        return crate::decode::decode_layout(image, bytes, options.parallel);
    }
    // The bin image is the planes stacked: plane z's rows start at z ny.
    (0..nz).try_for_each(|z| {
        let top = z * ny;
        crate::decode::decode_layout_window(
            image,
            bytes,
            columns.clone(),
            top + rows.start..top + rows.end,
            options.parallel,
        )
    })
}

/// The value ranges of rows `rows` of every plane of field `h`.
fn plane_rows(h: &FieldHeader, rows: Range<u32>) -> impl Iterator<Item = Range<usize>> {
    let [nz, ny, nx] = h.shape;
    let (plane, width) = (ny as usize * nx as usize, nx as usize);
    (0..nz as usize).map(move |z| {
        z * plane + rows.start as usize * width..z * plane + rows.end as usize * width
    })
}

/// The field's values from its decoded bins and its exception runs (validated: inside `out`):
/// the CPU twin of `shaders/fields.wgsl`'s `reconstruct_field`.
pub fn reconstruct_field(bins: &[u16], runs: &[Run], offset: f32, bin_width: f32, out: &mut [f32]) {
    for (o, &q) in out.iter_mut().zip(bins) {
        *o = reconstruct(q, offset, bin_width);
    }
    for r in runs {
        out[r.start as usize..(r.start + r.len) as usize].fill(f32::from_bits(r.bits));
    }
}
