//! Where the CPU decoders put decoded rows: one *band* (the image rows of one patch row) of
//! an output in some [`OutputLayout`]. Both codecs decode a patch row by row into per-channel
//! `u16` rows and hand each to a [`BandSink`], so every layout is written inside the decoder's
//! row loop, each output element once (no decode-then-convert pass).
//!
//! A new layout is a new sink here and an arm in [`crate::decode::decode_to_layout`] (and a
//! `put_sample` in `shaders/output/` for the GPU).

use super::planes::{interleave_u16, interleave_u8};
use super::sample::Sample;
use super::simd::{prefetch_line, Avx2};
use crate::format::Header;
use crate::layout::Normalize;

/// The cache line size the prefetch hints step by (64 bytes on every x86-64 and most ARM
/// CPUs; a wrong guess costs only hints).
const CACHE_LINE: usize = 64;

/// A palette as the sinks read it: entries looked up by index, either into planar channel
/// rows or straight into interleaved output pixels. The compact profile's decoder palette
/// implements it (`compact::palette::PatchPalette`); this layer knows no palette format.
pub(crate) trait PaletteLookup {
    /// Looks one row of checked indices up into `OUT` planar channel rows of `out`
    /// (`stride` apart).
    fn expand_row<const OUT: usize>(&self, indices: &[u16], out: &mut [u16], stride: usize);

    /// Writes one row of checked indices as interleaved pixels of `N` bytes each into `dst`
    /// (`N x indices.len()` bytes), with AVX2 where given.
    fn write_pixels<const N: usize>(&self, indices: &[u16], dst: &mut [u8], avx2: Option<Avx2>);
}

/// Receives the decoded rows of the patches of one band.
pub(crate) trait BandSink {
    /// Writes row `y` (counted from the band's top) of a patch whose left edge is column
    /// `x0`: channel `c`'s `pw` samples are `rows[c * stride + offset..][..pw]`, already
    /// reduced to the sample depth (`u8` rows only for 8-bit images).
    fn put_row<const C: usize, T: Sample>(
        &mut self,
        rows: &[T],
        stride: usize,
        offset: usize,
        y: usize,
        x0: usize,
        pw: usize,
    );

    /// Writes row `y` of a palette patch whose left edge is column `x0`: pixel `i` is entry
    /// `indices[i]` of `palette` (every index already checked). The default looks the
    /// samples up into `scratch` (`C` rows, `stride` apart) and calls [`BandSink::put_row`];
    /// a sink that can write whole pixels overrides it.
    #[inline(always)]
    fn put_palette_row<const C: usize>(
        &mut self,
        indices: &[u16],
        palette: &impl PaletteLookup,
        scratch: &mut [u16],
        stride: usize,
        y: usize,
        x0: usize,
    ) {
        palette.expand_row::<C>(indices, scratch, stride);
        self.put_row::<C, u16>(scratch, stride, 0, y, x0, indices.len());
    }

    /// Hints that rows `0..rows` of the patch at columns `x0..x0 + pw` are written soon: a
    /// sink whose writes go to memory the caches may not hold starts loading it. Called for
    /// a band's first [`AHEAD`] patches; the sink's `put_row` hints the later ones, row by
    /// row. The default does nothing.
    #[inline(always)]
    fn prefetch_patch(&self, _x0: usize, _pw: usize, _rows: usize) {}
}

/// How many patches ahead of the one it writes a sink hints its output rows: a patch's
/// 64 row pieces sit a whole image row apart, too many streams for the hardware
/// prefetcher, so each would wait for memory (a write first reads its cache line). Hinted
/// row by row while the patch `AHEAD` to the left is written, the lines arrive while
/// `AHEAD` patches are decoded. One patch ahead is too close (fast profile, 6 MP RGB
/// JPEG-origin photo, AMD EPYC Zen 4: 950 MP/s, against 1200 for two and three, 1170 for
/// four, 800 for the whole next patch hinted at once before it is decoded, which waits on
/// the CPU's queue of misses, and 770 for none).
pub(crate) const AHEAD: usize = 2;

/// Before decoding the patches `first..end` of a band: hints the sink to fetch the output of
/// the first [`AHEAD`] of them (the sink hints the others as it writes; see
/// [`BandSink::prefetch_patch`]).
#[inline(always)]
pub(crate) fn prefetch_band_start<S: BandSink>(sink: &S, h: &Header, first: usize, end: usize) {
    for patch in first..end.min(first + AHEAD) {
        let (x0, _, pw, ph) = h.patch_rect(patch as u64);
        sink.prefetch_patch(x0 as usize, pw as usize, ph as usize);
    }
}

/// Hints the caches to fetch `len` bytes of `out` from `at` (see [`prefetch_line`]).
#[inline(always)]
fn prefetch_span(out: &[u8], at: usize, len: usize) {
    for line in (at & !(CACHE_LINE - 1)..at + len).step_by(CACHE_LINE) {
        prefetch_line(out, line);
    }
}

/// A band of interleaved (HWC) u8 or u16 output: `out` holds the band's whole rows.
pub(crate) struct InterleavedBand<'a> {
    out: &'a mut [u8],
    row_len: usize,
    bytes_per_sample: usize,
    pixel_bytes: usize,
    depth: u8,
    /// Whether 8-bit pixels are interleaved with AVX2 (detected once per band).
    avx2: Option<Avx2>,
}

impl<'a> InterleavedBand<'a> {
    /// The band of `h`'s interleaved output whose bytes are `out`.
    pub(crate) fn new(h: &Header, out: &'a mut [u8]) -> Self {
        let bytes_per_sample = h.bytes_per_sample();
        InterleavedBand {
            out,
            row_len: h.width as usize * h.channels() as usize * bytes_per_sample,
            bytes_per_sample,
            pixel_bytes: bytes_per_sample * h.channels() as usize,
            depth: h.depth,
            avx2: Avx2::detect(),
        }
    }

    /// The same band written by the portable loops only (what CPUs without AVX2 run), for
    /// tests that compare the two paths.
    #[cfg(test)]
    pub(crate) fn portable(self) -> Self {
        InterleavedBand { avx2: None, ..self }
    }
}

impl BandSink for InterleavedBand<'_> {
    #[inline(always)]
    fn prefetch_patch(&self, x0: usize, pw: usize, rows: usize) {
        for y in 0..rows {
            prefetch_span(
                self.out,
                y * self.row_len + x0 * self.pixel_bytes,
                pw * self.pixel_bytes,
            );
        }
    }

    #[inline(always)]
    fn put_row<const C: usize, T: Sample>(
        &mut self,
        rows: &[T],
        stride: usize,
        offset: usize,
        y: usize,
        x0: usize,
        pw: usize,
    ) {
        let start = y * self.row_len + x0 * C * self.bytes_per_sample;
        let len = pw * C * self.bytes_per_sample;
        // The same row `AHEAD` patches to the right (past the band's last patch: lines of
        // the row below, already written, or past `out`, ignored).
        prefetch_span(self.out, start + AHEAD * len, len);
        let dst = &mut self.out[start..start + len];
        if self.depth == 8 {
            interleave_u8::<C, _>(rows, stride, offset, dst, self.avx2);
        } else {
            interleave_u16::<C, _>(rows, stride, offset, dst);
        }
    }

    /// One load and one store per pixel (the palette's packed pixels are this output's
    /// bytes), instead of a lookup per sample and an interleave.
    #[inline(always)]
    fn put_palette_row<const C: usize>(
        &mut self,
        indices: &[u16],
        palette: &impl PaletteLookup,
        _scratch: &mut [u16],
        _stride: usize,
        y: usize,
        x0: usize,
    ) {
        let pixel = C * self.bytes_per_sample;
        let start = y * self.row_len + x0 * pixel;
        let len = indices.len() * pixel;
        prefetch_span(self.out, start + AHEAD * len, len);
        let dst = &mut self.out[start..start + len];
        match pixel {
            1 => palette.write_pixels::<1>(indices, dst, self.avx2),
            2 => palette.write_pixels::<2>(indices, dst, self.avx2),
            3 => palette.write_pixels::<3>(indices, dst, self.avx2),
            4 => palette.write_pixels::<4>(indices, dst, self.avx2),
            6 => palette.write_pixels::<6>(indices, dst, self.avx2),
            _ => palette.write_pixels::<8>(indices, dst, self.avx2),
        }
    }
}

/// [`Normalize::apply`] of every 8-bit value, per channel: the exact same f32 values, one
/// table lookup per sample instead of two divisions.
pub(crate) type NormalizeTable = [[f32; 256]; 4];

/// The [`NormalizeTable`] of `norm` for 8-bit samples of a file with error bound `max_error`
/// (a stored value is a bin: the table holds its decoded value, normalised).
pub(crate) fn normalize_table(norm: &Normalize, max_error: u16) -> Box<NormalizeTable> {
    let mut table = Box::new([[0f32; 256]; 4]);
    for (c, row) in table.iter_mut().enumerate() {
        for (v, o) in row.iter_mut().enumerate() {
            *o = norm.apply(dequantize(v as u32, max_error, 8), 8, c);
        }
    }
    table
}

/// The decoded value of stored sample `v` of a file with error bound `max_error` (itself when
/// lossless).
#[inline(always)]
fn dequantize(v: u32, max_error: u16, depth: u8) -> u32 {
    if max_error == 0 {
        v
    } else {
        crate::quantize::dequantize(v, max_error, depth)
    }
}

/// A band of planar (CHW) normalised f32 output: `planes[c]` holds channel `c`'s rows of the
/// band (`width` each).
pub(crate) struct F32ChwBand<'a> {
    planes: [&'a mut [f32]; 4],
    width: usize,
    depth: u8,
    max_error: u16,
    norm: Normalize,
    table: &'a NormalizeTable,
}

impl<'a> F32ChwBand<'a> {
    /// The band whose channel rows are `planes` (unused channels empty); `table` is
    /// [`normalize_table`] of `norm` (used for 8-bit images).
    pub(crate) fn new(
        h: &Header,
        planes: [&'a mut [f32]; 4],
        norm: Normalize,
        table: &'a NormalizeTable,
    ) -> Self {
        F32ChwBand {
            planes,
            width: h.width as usize,
            depth: h.depth,
            max_error: h.max_error,
            norm,
            table,
        }
    }
}

impl BandSink for F32ChwBand<'_> {
    #[inline(always)]
    fn put_row<const C: usize, T: Sample>(
        &mut self,
        rows: &[T],
        stride: usize,
        offset: usize,
        y: usize,
        x0: usize,
        pw: usize,
    ) {
        let start = y * self.width + x0;
        for c in 0..C {
            // As InterleavedBand::put_row does (see AHEAD), per plane.
            let plane = bytemuck::cast_slice::<f32, u8>(self.planes[c]);
            prefetch_span(plane, (start + AHEAD * pw) * 4, pw * 4);
            let src = &rows[c * stride + offset..c * stride + offset + pw];
            let dst = &mut self.planes[c][start..start + pw];
            if self.depth == 8 {
                let table = &self.table[c];
                for (o, &v) in dst.iter_mut().zip(src) {
                    *o = table[(v.wide() & 0xff) as usize];
                }
            } else {
                for (o, &v) in dst.iter_mut().zip(src) {
                    *o = self
                        .norm
                        .apply(dequantize(v.get(), self.max_error, 16), 16, c);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_exactly_what_apply_computes() {
        let norm = Normalize::IMAGENET;
        let table = normalize_table(&norm, 0);
        for c in 0..4 {
            for v in 0..256u32 {
                assert_eq!(
                    table[c][v as usize].to_bits(),
                    norm.apply(v, 8, c).to_bits()
                );
            }
        }
    }
}
