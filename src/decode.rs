//! Decoding on the CPU, whatever the profile: the reference decoder, the fallback when no GPU
//! is present, and the oracle the GPU decoder is tested against.
//!
//! Work is split into bands of one patch row (`patch_size` image rows), which own disjoint
//! parts of the output, so threads never share a cache line they write. Each codec
//! ([`crate::fast`], [`crate::compact`]) decodes a band's patches row by row into a
//! band sink of the requested [`OutputLayout`], chosen by one `match` on the profile.

use rayon::prelude::*;

use crate::codec::sink::{normalize_table, BandSink, F32ChwBand, InterleavedBand};
use crate::error::{ParameterError, Result};
use crate::format::{self, FileLayout, Header, ParseOptions, Profile};
use crate::layout::{Normalize, OutputLayout};
use crate::{compact, fast, limits::Limits};

/// Decoder options.
#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    /// Resource limits, checked before any allocation (default [`Limits::default`]).
    pub limits: Limits,
    /// Verify the file's CRC-32 before decoding (default true).
    pub verify_checksum: bool,
    /// Decode bands of patches on rayon's thread pool (default true).
    pub parallel: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            limits: Limits::default(),
            verify_checksum: true,
            parallel: true,
        }
    }
}

/// Reads and validates only the header: dimensions, channels, depth, patch size.
pub fn read_header(data: &[u8]) -> Result<Header> {
    Ok(Header::parse(data)?)
}

/// Parses the file's structure with these options (header, limits, size table, checksum).
pub fn parse<'a>(data: &'a [u8], options: &DecodeOptions) -> Result<FileLayout<'a>> {
    format::parse_file(
        data,
        &options.limits,
        ParseOptions {
            verify_checksum: options.verify_checksum,
        },
    )
}

/// Decodes into a caller-provided buffer of exactly [`Header::output_bytes`] bytes:
/// interleaved samples, row-major, no padding; 16-bit samples in native byte order (as
/// `bytemuck::cast_slice` of a `&[u16]` lays them out). Allocates nothing proportional to the
/// image. Returns the header.
pub fn decode_into(data: &[u8], out: &mut [u8], options: &DecodeOptions) -> Result<Header> {
    let layout = parse(data, options)?;
    check_len(out.len(), layout.header.output_bytes())?;
    decode_layout(&layout, out, options.parallel)?;
    Ok(layout.header)
}

/// Decodes a 16-bit image into a caller-provided `u16` buffer of width x height x channels.
pub fn decode_into_u16(data: &[u8], out: &mut [u16], options: &DecodeOptions) -> Result<Header> {
    let header = read_header(data)?;
    if header.depth != 16 {
        return Err(ParameterError::DepthMismatch {
            depth: header.depth,
        }
        .into());
    }
    decode_into(data, bytemuck::cast_slice_mut(out), options)
}

/// Decodes into a newly allocated buffer (allocated only after the limits are checked).
pub fn decode(data: &[u8], options: &DecodeOptions) -> Result<(Header, Vec<u8>)> {
    let layout = parse(data, options)?;
    let mut out = vec![0u8; layout.header.output_bytes() as usize];
    decode_layout(&layout, &mut out, options.parallel)?;
    Ok((layout.header, out))
}

/// Decodes into `out` laid out as `output`, the layouts the GPU decoder writes
/// ([`OutputLayout`]): `out` is exactly [`OutputLayout::output_bytes`] long, as bytes (for
/// [`OutputLayout::F32Chw`], native-endian f32s; any alignment). The normalisation runs
/// inside the decoder's row loop, so each output element is written once.
///
/// For `F32Chw`, the values are [`Normalize::apply`]'s exactly (8-bit images through a
/// 256-entry table of them).
pub fn decode_to_layout(
    data: &[u8],
    out: &mut [u8],
    output: OutputLayout,
    options: &DecodeOptions,
) -> Result<Header> {
    let layout = parse(data, options)?;
    check_len(out.len(), output.output_bytes(&layout.header))?;
    match output {
        OutputLayout::Interleaved => decode_layout(&layout, out, options.parallel)?,
        OutputLayout::F32Chw(norm) => match bytemuck::try_cast_slice_mut::<u8, f32>(out) {
            Ok(values) => decode_f32_chw(&layout, values, norm, options.parallel)?,
            Err(_) => {
                // Unaligned bytes: decode into aligned storage, then copy (the caller who
                // wants one pass passes 4-byte-aligned memory, or uses `decode_into_f32_chw`).
                let mut values = vec![0f32; layout.header.sample_count() as usize];
                decode_f32_chw(&layout, &mut values, norm, options.parallel)?;
                out.copy_from_slice(bytemuck::cast_slice(&values));
            }
        },
    }
    Ok(layout.header)
}

/// Decodes into planar (CHW) f32 samples normalised with `norm` (see
/// [`OutputLayout::F32Chw`]); `out` holds exactly width x height x channels values.
pub fn decode_into_f32_chw(
    data: &[u8],
    out: &mut [f32],
    norm: Normalize,
    options: &DecodeOptions,
) -> Result<Header> {
    let layout = parse(data, options)?;
    check_len(out.len(), layout.header.sample_count())?;
    decode_f32_chw(&layout, out, norm, options.parallel)?;
    Ok(layout.header)
}

fn check_len(got: usize, needed: u64) -> Result<()> {
    if got as u64 != needed {
        return Err(ParameterError::BufferSize {
            got,
            needed: needed as usize,
        }
        .into());
    }
    Ok(())
}

/// Decodes every stream of a validated layout into `out` (exactly `output_bytes` long),
/// interleaved.
pub fn decode_layout(layout: &FileLayout, out: &mut [u8], parallel: bool) -> Result<()> {
    let h = &layout.header;
    decode_layout_window(layout, out, 0..h.width, 0..h.height, parallel)
}

/// Like [`decode_layout`], but decodes only the patches that hold pixels of the window
/// `columns x rows` of the image, and of those only the rows down to the window's last
/// (rows are predicted from the row above, so the rows above the window in its top patches
/// are decoded too): the other pixels of `out` are left as they are. For consumers that need
/// only a window (a random crop): patches are independent, so the skipped ones cost nothing.
/// The window is clamped to the image. Where a patch is decoded only in part, the rest of its
/// stream is not checked (the file's checksum, where verified, still covers it).
pub fn decode_layout_window(
    layout: &FileLayout,
    out: &mut [u8],
    columns: std::ops::Range<u32>,
    rows: std::ops::Range<u32>,
    parallel: bool,
) -> Result<()> {
    let h = &layout.header;
    check_len(out.len(), h.output_bytes())?;
    let p = h.patch_size();
    let patch_range = |r: std::ops::Range<u32>, len: u32| {
        (r.start.min(len) / p) as usize..r.end.min(len).div_ceil(p) as usize
    };
    // Rows of each band's patches down to the window's last row.
    let last_row = rows.end.min(h.height);
    let (cols, bands) = (patch_range(columns, h.width), patch_range(rows, h.height));
    let band_bytes = p as usize * h.width as usize * h.channels() as usize * h.bytes_per_sample();
    let decode = |(band, chunk): (usize, &mut [u8])| {
        decode_band(
            layout,
            band,
            cols.clone(),
            last_row.saturating_sub(band as u32 * p),
            &mut InterleavedBand::new(h, chunk),
        )?;
        // An error-bounded file decodes to bins: their values, in place, while the band is hot.
        if h.max_error > 0 {
            crate::quantize::dequantize_in_place(chunk, h.max_error, h.depth);
        }
        Ok(())
    };
    let skip = bands.start;
    let take = bands.end.saturating_sub(bands.start);
    if parallel {
        out.par_chunks_mut(band_bytes)
            .enumerate()
            .skip(skip)
            .take(take)
            .try_for_each(decode)
    } else {
        out.chunks_mut(band_bytes)
            .enumerate()
            .skip(skip)
            .take(take)
            .try_for_each(decode)
    }
}

/// Decodes a validated layout into planar normalised f32 (exactly `sample_count` values).
fn decode_f32_chw(
    layout: &FileLayout,
    out: &mut [f32],
    norm: Normalize,
    parallel: bool,
) -> Result<()> {
    let h = &layout.header;
    let table = normalize_table(&norm, h.max_error);
    let plane_len = h.width as usize * h.height as usize;
    let band_len = h.patch_size() as usize * h.width as usize;
    // Each band owns its rows of every channel plane.
    let mut planes: Vec<std::slice::ChunksMut<'_, f32>> = out
        .chunks_mut(plane_len)
        .map(|plane| plane.chunks_mut(band_len))
        .collect();
    let bands: Vec<F32ChwBand> = (0..h.patches_y())
        .map(|_| {
            let rows = std::array::from_fn(|c| {
                planes
                    .get_mut(c)
                    .and_then(Iterator::next)
                    .unwrap_or_default()
            });
            F32ChwBand::new(h, rows, norm, &table)
        })
        .collect();
    let all = 0..h.patches_x() as usize;
    let decode = |(band, mut sink): (usize, F32ChwBand)| {
        decode_band(layout, band, all.clone(), u32::MAX, &mut sink)
    };
    if parallel {
        bands.into_par_iter().enumerate().try_for_each(decode)
    } else {
        bands.into_iter().enumerate().try_for_each(decode)
    }
}

/// Decodes the patches of band `band` (one patch row) in patch columns `columns`, each
/// patch's first `rows` rows, into `sink`: the one place the profile picks a codec.
fn decode_band<S: BandSink>(
    layout: &FileLayout,
    band: usize,
    columns: std::ops::Range<usize>,
    rows: u32,
    sink: &mut S,
) -> Result<()> {
    match layout.header.profile {
        Profile::Fast => fast::decode::decode_band(layout, band, columns, rows, sink),
        Profile::Compact => compact::decode::decode_band(layout, band, columns, rows, sink),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{encode, EncodeOptions};
    use crate::format::ColorType;
    use crate::raw::TestImage;
    use crate::Profile;

    /// A window decode gives the window's pixels exactly as the full decode has them, where it
    /// decodes only the rows of the window's patches down to its last row: both profiles,
    /// both depths, 1 to 4 channels, two patch sizes, smooth and flat content (runs, pairs)
    /// beside noise, windows ending inside a patch, on a band's edge and past the image.
    #[test]
    fn window_decodes_give_the_full_decodes_pixels() {
        let (w, h) = (150u32, 133u32);
        let value = |x: u32, y: u32, c: u32| -> u16 {
            if y < 40 {
                (x / 9 * 40 + c * 7) as u16 // flat steps: runs
            } else if x < 70 {
                ((x * 3 + y * 2) * (c + 1)) as u16 // smooth
            } else {
                ((x * 7919) ^ (y * 104729) ^ (c * 31)) as u16 // noise
            }
        };
        let windows = [
            (0..150, 0..1),
            (10..80, 5..70),
            (64..128, 64..128),
            (37..38, 100..133),
            (0..150, 60..96),
            (140..400, 90..200),
        ];
        for color in [ColorType::Gray, ColorType::Rgb, ColorType::Rgba] {
            let ch = color.channels() as u32;
            for depth in [8u8, 16] {
                let image = TestImage::from_fn(w, h, color, depth, value);
                let raw = image.raw();
                for (profile, patch_log2) in [
                    (Profile::Fast, 6),
                    (Profile::Fast, 5),
                    (Profile::Compact, 6),
                    (Profile::Compact, 5),
                ] {
                    let mut options = EncodeOptions::for_profile(profile);
                    options.patch_log2 = patch_log2;
                    let file = encode(&raw, &options).unwrap();
                    let layout = parse(&file, &DecodeOptions::default()).unwrap();
                    let mut full = vec![0u8; layout.header.output_bytes() as usize];
                    decode_layout(&layout, &mut full, false).unwrap();
                    let pixel = (ch * depth as u32 / 8) as usize;
                    for (columns, rows) in windows.clone() {
                        for parallel in [false, true] {
                            let mut part = vec![0u8; full.len()];
                            decode_layout_window(
                                &layout,
                                &mut part,
                                columns.clone(),
                                rows.clone(),
                                parallel,
                            )
                            .unwrap();
                            for y in rows.start..rows.end.min(h) {
                                let row = (y * w) as usize * pixel;
                                let span = row + columns.start.min(w) as usize * pixel
                                    ..row + columns.end.min(w) as usize * pixel;
                                assert!(
                                    part[span.clone()] == full[span],
                                    "{color:?} {depth}-bit {profile:?} {patch_log2} \
                                     {columns:?} x {rows:?}, row {y}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
