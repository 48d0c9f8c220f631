//! CPU reference decoder. Also the fallback when no GPU is present, and the oracle the GPU
//! decoder is tested against.
//!
//! Work is split into bands of one patch row (`patch_size` image rows), which own disjoint
//! slices of the output, so threads never share a cache line they write.

use rayon::prelude::*;

use crate::bits::BitReader;
use crate::error::{FormatError, ParameterError, Result};
use crate::format::{self, nbit_field_bits, FileLayout, Header, ParseOptions, Predictor};
use crate::predict::predict_row;
use crate::Limits;

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
    let needed = layout.header.output_bytes() as usize;
    if out.len() != needed {
        return Err(ParameterError::BufferSize {
            got: out.len(),
            needed,
        }
        .into());
    }
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

/// Decodes into the `image` crate's `DynamicImage` (Luma/LumaA/Rgb/Rgba, 8 or 16 bit).
pub fn decode_image(data: &[u8], options: &DecodeOptions) -> Result<image::DynamicImage> {
    use crate::format::ColorType as C;
    use image::{DynamicImage as D, ImageBuffer};
    let layout = parse(data, options)?;
    let h = layout.header;
    let (w, ht) = (h.width, h.height);
    let built = if h.depth == 8 {
        let mut px = vec![0u8; h.output_bytes() as usize];
        decode_layout(&layout, &mut px, options.parallel)?;
        match h.color {
            C::Gray => ImageBuffer::from_raw(w, ht, px).map(D::ImageLuma8),
            C::GrayAlpha => ImageBuffer::from_raw(w, ht, px).map(D::ImageLumaA8),
            C::Rgb => ImageBuffer::from_raw(w, ht, px).map(D::ImageRgb8),
            C::Rgba => ImageBuffer::from_raw(w, ht, px).map(D::ImageRgba8),
        }
    } else {
        let mut px = vec![0u16; h.sample_count() as usize];
        decode_layout(&layout, bytemuck::cast_slice_mut(&mut px), options.parallel)?;
        match h.color {
            C::Gray => ImageBuffer::from_raw(w, ht, px).map(D::ImageLuma16),
            C::GrayAlpha => ImageBuffer::from_raw(w, ht, px).map(D::ImageLumaA16),
            C::Rgb => ImageBuffer::from_raw(w, ht, px).map(D::ImageRgb16),
            C::Rgba => ImageBuffer::from_raw(w, ht, px).map(D::ImageRgba16),
        }
    };
    Ok(built.expect("buffer length equals width x height x channels by construction"))
}

/// Decodes every stream of a validated layout into `out` (exactly `output_bytes` long).
pub fn decode_layout(layout: &FileLayout, out: &mut [u8], parallel: bool) -> Result<()> {
    let h = &layout.header;
    let band_bytes =
        h.patch_size() as usize * h.width as usize * h.channels() as usize * h.bytes_per_sample();
    let decode_band = |(band, chunk): (usize, &mut [u8])| {
        let mut scratch = Scratch::new(h.patch_size() as usize);
        (0..h.patches_x() as usize).try_for_each(|px| {
            let patch = band * h.patches_x() as usize + px;
            decode_patch_into_band(layout, patch, chunk, &mut scratch)
        })
    };
    if parallel {
        out.par_chunks_mut(band_bytes)
            .enumerate()
            .try_for_each(decode_band)
    } else {
        out.chunks_mut(band_bytes)
            .enumerate()
            .try_for_each(decode_band)
    }
}

/// Per-thread buffers: one plane and two row buffers of the patch size.
struct Scratch {
    plane: Vec<u16>,
    deltas: Vec<u16>,
    prediction: Vec<u16>,
}

impl Scratch {
    fn new(patch_size: usize) -> Self {
        Scratch {
            plane: vec![0; patch_size * patch_size],
            deltas: vec![0; patch_size],
            prediction: vec![0; patch_size],
        }
    }
}

fn decode_patch_into_band(
    layout: &FileLayout,
    patch: usize,
    band: &mut [u8],
    scratch: &mut Scratch,
) -> Result<()> {
    let h = &layout.header;
    let channels = h.channels() as usize;
    let (x0, _, pw, ph) = h.patch_rect(patch as u64);
    let (x0, pw, ph) = (x0 as usize, pw as usize, ph as usize);
    let width = h.width as usize;
    for c in 0..channels {
        let index = patch * channels + c;
        let plane = &mut scratch.plane[..pw * ph];
        decode_stream(
            h,
            layout.stream(index),
            pw,
            plane,
            &mut scratch.deltas[..pw],
            &mut scratch.prediction[..pw],
        )
        .map_err(|e| {
            e.at(
                h.stream_pos(patch as u64, c as u8, layout.offsets[index]),
                layout.stream_size(index),
                h.depth,
            )
        })?;
        // Interleave this channel into the band.
        for (y, row) in plane.chunks_exact(pw).enumerate() {
            let start = (y * width + x0) * channels + c;
            if h.depth == 8 {
                let dst = &mut band[start..];
                for (x, &v) in row.iter().enumerate() {
                    dst[x * channels] = v as u8;
                }
            } else {
                let dst = &mut band[start * 2..];
                for (x, &v) in row.iter().enumerate() {
                    dst[x * channels * 2..x * channels * 2 + 2].copy_from_slice(&v.to_ne_bytes());
                }
            }
        }
    }
    Ok(())
}

/// A stream error before its position is known; [`StreamError::at`] names the stream.
pub(crate) enum StreamError {
    UnknownPredictor(u8),
    BadBitWidth { row: u32, nbit: u32 },
    Overrun { row: u32 },
    Trailing { used: u64 },
}

impl StreamError {
    /// The full error, naming the stream, its size and the sample depth.
    pub(crate) fn at(self, pos: crate::error::StreamPos, size: u32, depth: u8) -> FormatError {
        match self {
            StreamError::UnknownPredictor(id) => FormatError::UnknownPredictor { pos, id },
            StreamError::BadBitWidth { row, nbit } => FormatError::BadBitWidth {
                pos,
                row,
                nbit,
                depth: depth as u32,
            },
            StreamError::Overrun { row } => FormatError::StreamOverrun { pos, row, size },
            StreamError::Trailing { used } => FormatError::StreamTrailingData { pos, size, used },
        }
    }
}

/// Decodes one (patch, channel) stream into `plane` (`pw` wide, `plane.len() / pw` rows).
/// The CPU twin of `shaders/decode.wgsl`: same field order, same checks.
pub(crate) fn decode_stream(
    h: &Header,
    stream: &[u8],
    pw: usize,
    plane: &mut [u16],
    deltas: &mut [u16],
    prediction: &mut [u16],
) -> Result<(), StreamError> {
    let depth = h.depth as u32;
    let mask = ((1u32 << depth) - 1) as u16;
    let nb = nbit_field_bits(h.depth);
    // parse_file guarantees the stream holds at least the predictor byte.
    let predictor =
        Predictor::from_id(stream[0]).ok_or(StreamError::UnknownPredictor(stream[0]))?;
    let bits = &stream[format::STREAM_PREFIX_LEN..];
    let mut r = BitReader::new(bits);
    for row_index in 0..plane.len() / pw {
        let row_no = row_index as u32;
        if r.remaining() < (nb + depth) as u64 {
            return Err(StreamError::Overrun { row: row_no });
        }
        let nbit = r.read(nb);
        if nbit > depth {
            return Err(StreamError::BadBitWidth { row: row_no, nbit });
        }
        let base = r.read(depth) as u16;
        if r.remaining() < pw as u64 * nbit as u64 {
            return Err(StreamError::Overrun { row: row_no });
        }
        r.read_many(nbit, deltas);
        let (above, rest) = plane.split_at_mut(row_index * pw);
        let row = &mut rest[..pw];
        if row_index == 0 || predictor == Predictor::None {
            for (o, &d) in row.iter_mut().zip(deltas.iter()) {
                *o = base.wrapping_add(d) & mask;
            }
        } else {
            predict_row(predictor, &above[(row_index - 1) * pw..], prediction);
            for ((o, &d), &p) in row.iter_mut().zip(deltas.iter()).zip(prediction.iter()) {
                *o = p.wrapping_add(base).wrapping_add(d) & mask;
            }
        }
    }
    let used = r.position();
    let used_bytes = used.div_ceil(8);
    let padding_ok = used % 8 == 0 || bits[(used / 8) as usize] >> (used % 8) == 0;
    if used_bytes != bits.len() as u64 || !padding_ok {
        return Err(StreamError::Trailing {
            used: used_bytes + format::STREAM_PREFIX_LEN as u64,
        });
    }
    Ok(())
}
