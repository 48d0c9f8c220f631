//! CPU reference decoder. Also the fallback when no GPU is present, and the oracle the GPU
//! decoder is tested against.
//!
//! Work is split into bands of one patch row (`patch_size` image rows), which own disjoint
//! slices of the output, so threads never share a cache line they write.

use rayon::prelude::*;

use crate::bits::BitReader;
use crate::compact;
use crate::error::{FormatError, ParameterError, Result};
use crate::format::{self, nbit_field_bits, FileLayout, Header, ParseOptions, Predictor, Profile};
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
    let layout = parse(data, options)?;
    let h = layout.header;
    if h.depth == 8 {
        let mut px = vec![0u8; h.output_bytes() as usize];
        decode_layout(&layout, &mut px, options.parallel)?;
        Ok(image_from_samples(&h, px))
    } else {
        // Decoded straight into u16 storage: no copy, no alignment concern.
        let mut px = vec![0u16; h.sample_count() as usize];
        decode_layout(&layout, bytemuck::cast_slice_mut(&mut px), options.parallel)?;
        Ok(image_from_u16(&h, px))
    }
}

/// Wraps decoded interleaved samples (as [`decode_into`] or the GPU's interleaved output lay
/// them out: 16-bit samples in native byte order) in a `DynamicImage`.
///
/// # Panics
/// If `samples` is not exactly [`Header::output_bytes`] long.
pub fn image_from_samples(h: &Header, samples: Vec<u8>) -> image::DynamicImage {
    use crate::format::ColorType as C;
    use image::{DynamicImage as D, ImageBuffer};
    assert_eq!(samples.len() as u64, h.output_bytes(), "sample buffer size");
    let (w, ht) = (h.width, h.height);
    if h.depth == 16 {
        return image_from_u16(h, bytemuck::pod_collect_to_vec(&samples));
    }
    match h.color {
        C::Gray => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLuma8),
        C::GrayAlpha => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLumaA8),
        C::Rgb => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgb8),
        C::Rgba => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgba8),
    }
    .expect("length checked above")
}

fn image_from_u16(h: &Header, samples: Vec<u16>) -> image::DynamicImage {
    use crate::format::ColorType as C;
    use image::{DynamicImage as D, ImageBuffer};
    let (w, ht) = (h.width, h.height);
    match h.color {
        C::Gray => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLuma16),
        C::GrayAlpha => ImageBuffer::from_raw(w, ht, samples).map(D::ImageLumaA16),
        C::Rgb => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgb16),
        C::Rgba => ImageBuffer::from_raw(w, ht, samples).map(D::ImageRgba16),
    }
    .expect("buffer length equals width x height x channels by construction")
}

/// Decodes every stream of a validated layout into `out` (exactly `output_bytes` long).
pub fn decode_layout(layout: &FileLayout, out: &mut [u8], parallel: bool) -> Result<()> {
    let h = &layout.header;
    let band_bytes =
        h.patch_size() as usize * h.width as usize * h.channels() as usize * h.bytes_per_sample();
    let decode_band = |(band, chunk): (usize, &mut [u8])| {
        let patches = (0..h.patches_x() as usize).map(|px| band * h.patches_x() as usize + px);
        match h.profile {
            Profile::Fast => {
                let mut scratch = Scratch::new(h.patch_size() as usize, h.channels() as usize);
                patches.into_iter().try_for_each(|patch| {
                    decode_patch_into_band(layout, patch, chunk, &mut scratch)
                })
            }
            Profile::Compact => {
                let mut scratch = compact::decode::Scratch::new(h);
                patches.into_iter().try_for_each(|patch| {
                    compact::decode::decode_patch_into_band(layout, patch, chunk, &mut scratch)
                })
            }
        }
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

/// Per-thread buffers: one plane per channel and two row buffers of the patch size.
struct Scratch {
    planes: Vec<u16>,
    deltas: Vec<u16>,
    prediction: Vec<u16>,
}

impl Scratch {
    fn new(patch_size: usize, channels: usize) -> Self {
        Scratch {
            planes: vec![0; patch_size * patch_size * channels],
            deltas: vec![0; patch_size],
            prediction: vec![0; patch_size],
        }
    }
}

/// Proof that the CPU has AVX2, made only by [`Avx2::detect`]. The hand-written AVX2 bit
/// unpacking runs only when one is passed in, so no safe caller can reach it unchecked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// `Some` when this CPU supports AVX2 (a cached check, cheap to repeat).
    #[inline]
    pub(crate) fn detect() -> Option<Avx2> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Some(Avx2(()));
        }
        None
    }
}

/// Decodes one patch, all channels, into its band; with AVX2 code generation where the CPU
/// has it.
fn decode_patch_into_band(
    layout: &FileLayout,
    patch: usize,
    band: &mut [u8],
    scratch: &mut Scratch,
) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx2) = Avx2::detect() {
        // SAFETY: `avx2` proves the CPU supports AVX2, the function's only requirement; it
        // runs the same safe code as the portable path, compiled for AVX2.
        return unsafe { decode_patch_avx2(layout, patch, band, scratch, avx2) };
    }
    decode_patch_portable(layout, patch, band, scratch, None)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decode_patch_avx2(
    layout: &FileLayout,
    patch: usize,
    band: &mut [u8],
    scratch: &mut Scratch,
    avx2: Avx2,
) -> Result<()> {
    decode_patch_portable(layout, patch, band, scratch, Some(avx2))
}

/// The decoder's work for one patch; everything it calls is inlined so the AVX2 copy above
/// vectorises all of it. `avx2` (a constant at each call site, so the check folds away)
/// selects the hand-written AVX2 bit unpacking.
#[inline(always)]
fn decode_patch_portable(
    layout: &FileLayout,
    patch: usize,
    band: &mut [u8],
    scratch: &mut Scratch,
    avx2: Option<Avx2>,
) -> Result<()> {
    let h = &layout.header;
    let channels = h.channels() as usize;
    let (x0, _, pw, ph) = h.patch_rect(patch as u64);
    let (x0, pw, ph) = (x0 as usize, pw as usize, ph as usize);
    let plane_len = pw * ph;
    for c in 0..channels {
        let index = patch * channels + c;
        let start = layout.offsets[index] as usize;
        decode_stream(
            h,
            layout.data,
            start..start + layout.stream_size(index) as usize,
            pw,
            &mut scratch.planes[c * plane_len..(c + 1) * plane_len],
            (&mut scratch.deltas[..pw], &mut scratch.prediction[..pw]),
            avx2,
        )
        .map_err(|e| {
            e.at(
                h.stream_pos(patch as u64, c as u8, start as u64),
                layout.stream_size(index),
                h.depth,
            )
        })?;
    }
    let planes = &scratch.planes[..channels * plane_len];
    let row_len = h.width as usize * channels * h.bytes_per_sample();
    for (y, out_row) in band.chunks_mut(row_len).take(ph).enumerate() {
        let start = x0 * channels * h.bytes_per_sample();
        let dst = &mut out_row[start..start + pw * channels * h.bytes_per_sample()];
        match (h.depth, channels) {
            (8, 1) => interleave_u8::<1>(planes, plane_len, y * pw, dst),
            (8, 2) => interleave_u8::<2>(planes, plane_len, y * pw, dst),
            (8, 3) => interleave_u8::<3>(planes, plane_len, y * pw, dst),
            (8, _) => interleave_u8::<4>(planes, plane_len, y * pw, dst),
            (_, 1) => interleave_u16::<1>(planes, plane_len, y * pw, dst),
            (_, 2) => interleave_u16::<2>(planes, plane_len, y * pw, dst),
            (_, 3) => interleave_u16::<3>(planes, plane_len, y * pw, dst),
            (_, _) => interleave_u16::<4>(planes, plane_len, y * pw, dst),
        }
    }
    Ok(())
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

/// Decodes one (patch, channel) stream, bytes `stream` of `file`, into `plane`
/// (`pw` wide, `plane.len() / pw` rows). The CPU twin of `shaders/decode.wgsl`: same field
/// order, same checks. Bit fields are read with 8-byte loads that may extend past the stream
/// into the rest of the file (never past the file: rows near its end take the slow path); only
/// bits inside the stream are used, since each row's length is checked against it first.
#[inline(always)]
pub(crate) fn decode_stream(
    h: &Header,
    file: &[u8],
    stream: std::ops::Range<usize>,
    pw: usize,
    plane: &mut [u16],
    (deltas, prediction): (&mut [u16], &mut [u16]),
    avx2: Option<Avx2>,
) -> Result<(), StreamError> {
    let depth = h.depth as u32;
    let mask = ((1u32 << depth) - 1) as u16;
    let nb = nbit_field_bits(h.depth);
    // parse_file guarantees the stream holds at least the predictor byte.
    let (start, len) = (stream.start, stream.len());
    let id = file[start];
    let predictor = Predictor::from_id(id).ok_or(StreamError::UnknownPredictor(id))?;
    let payload_start = start + format::STREAM_PREFIX_LEN;
    let payload_bits = (len - format::STREAM_PREFIX_LEN) as u64 * 8;
    // The reader sees the file from the payload on; positions are relative to the payload.
    let bytes = &file[payload_start..];
    let mut r = BitReader::new(bytes);
    for row_index in 0..plane.len() / pw {
        let row_no = row_index as u32;
        if r.position() + (nb + depth) as u64 > payload_bits {
            return Err(StreamError::Overrun { row: row_no });
        }
        // nbit and base in one read (at most 5 + 16 bits).
        let fields = r.read(nb + depth);
        let nbit = fields & ((1 << nb) - 1);
        if nbit > depth {
            return Err(StreamError::BadBitWidth { row: row_no, nbit });
        }
        let base = (fields >> nb) as u16;
        let row_bits = pw as u64 * nbit as u64;
        if r.position() + row_bits > payload_bits {
            return Err(StreamError::Overrun { row: row_no });
        }
        unpack_row(bytes, r.position(), nbit, deltas, avx2);
        r.skip(row_bits);
        let (above, rest) = plane.split_at_mut(row_index * pw);
        let row = &mut rest[..pw];
        if row_index == 0 || predictor == Predictor::None {
            for (o, &d) in row.iter_mut().zip(deltas.iter()) {
                *o = base.wrapping_add(d) & mask;
            }
        } else if predictor == Predictor::Up {
            // The most common predictor, fused with the addition: no prediction buffer.
            let up = &above[(row_index - 1) * pw..];
            for ((o, &d), &p) in row.iter_mut().zip(deltas.iter()).zip(up) {
                *o = p.wrapping_add(base).wrapping_add(d) & mask;
            }
        } else {
            predict_row(predictor, &above[(row_index - 1) * pw..], prediction);
            for ((o, &d), &p) in row.iter_mut().zip(deltas.iter()).zip(prediction.iter()) {
                *o = p.wrapping_add(base).wrapping_add(d) & mask;
            }
        }
    }
    check_stream_end(&bytes[..(payload_bits / 8) as usize], r.position())
}

/// The end-of-stream rule: the rows, `used` bits, must fill the stream's `payload` (the bytes
/// after the predictor byte) to within the last byte, and the padding bits must be zero.
pub(crate) fn check_stream_end(payload: &[u8], used: u64) -> Result<(), StreamError> {
    let used_bytes = used.div_ceil(8);
    let padding_ok = used % 8 == 0
        || payload
            .get((used / 8) as usize)
            .is_some_and(|&b| b >> (used % 8) == 0);
    if used_bytes != payload.len() as u64 || !padding_ok {
        return Err(StreamError::Trailing {
            used: used_bytes + format::STREAM_PREFIX_LEN as u64,
        });
    }
    Ok(())
}

/// Unpacks `out.len()` fields of `nbit` bits starting at bit `pos` of `bytes`. Dispatches to
/// a copy of the loop per width, so shifts and masks are constants the compiler can unroll.
#[inline(always)]
fn unpack_row(bytes: &[u8], pos: u64, nbit: u32, out: &mut [u16], avx2: Option<Avx2>) {
    let last_byte = ((pos + out.len() as u64 * nbit as u64) >> 3) as usize;
    if last_byte + UNPACK_SLACK > bytes.len() {
        // Near the end of the file: the bounds-checked reader.
        let mut r = BitReader::new(bytes);
        r.skip(pos);
        r.read_many(nbit, out);
        return;
    }
    let mut pos = pos;
    let mut out = out;
    #[cfg(target_arch = "x86_64")]
    if avx2.is_some() && (1..=crate::unpack_avx2::MAX_WIDTH).contains(&nbit) && out.len() >= 8 {
        // SAFETY: an `Avx2` exists only on a CPU with AVX2 (Avx2::detect); the slack check
        // above keeps every 16-byte group load inside `bytes`, and the function bounds-checks
        // it again.
        let done = unsafe {
            crate::unpack_avx2::unpack_groups(
                bytes,
                (pos >> 3) as usize,
                (pos & 7) as u32,
                nbit,
                out,
            )
        };
        pos += done as u64 * nbit as u64;
        out = &mut out[done..];
        if out.is_empty() {
            return;
        }
    }
    macro_rules! widths {
        ($($n:literal)*) => {
            match nbit {
                0 => out.fill(0),
                $($n => unpack_fixed::<$n>(bytes, pos, out),)*
                _ => unreachable!("nbit checked against the depth"),
            }
        };
    }
    widths!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// Bytes past a row's last byte that [`unpack_fixed`] may load.
const UNPACK_SLACK: usize = 17;

/// Eight `N`-bit fields are exactly `N` bytes, so every group of eight starts at the same bit
/// shift within its first byte: one 16-byte load and one shift per group, then constant shifts.
#[inline(always)]
fn unpack_fixed<const N: u32>(bytes: &[u8], pos: u64, out: &mut [u16]) {
    let mask = (1u64 << N) - 1;
    let shift = (pos & 7) as u32;
    let first = (pos >> 3) as usize;
    let len = out.len();
    // 16 loaded bytes hold shift + 8N bits only for N < 16 or shift 0.
    let grouped = if N < 16 || shift == 0 { len / 8 * 8 } else { 0 };
    let mut byte = first;
    for group in out[..grouped].chunks_exact_mut(8) {
        let w = u128::from_le_bytes(bytes[byte..byte + 16].try_into().unwrap()) >> shift;
        for (i, o) in group.iter_mut().enumerate() {
            *o = ((w >> (i as u32 * N)) as u64 & mask) as u16;
        }
        byte += N as usize;
    }
    let done = grouped;
    let mut p = pos + done as u64 * N as u64;
    for o in &mut out[done..] {
        let b = (p >> 3) as usize;
        let w = u64::from_le_bytes(bytes[b..b + 8].try_into().unwrap());
        *o = ((w >> (p & 7)) & mask) as u16;
        p += N as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::BitWriter;

    /// The portable path (what CPUs without AVX2 run) decodes exactly what the dispatched one
    /// does.
    #[test]
    fn portable_and_dispatched_decoders_agree() {
        use crate::encode::TestImage;
        use crate::{ColorType, EncodeOptions};
        for (color, depth) in [
            (ColorType::Gray, 8),
            (ColorType::Rgb, 8),
            (ColorType::GrayAlpha, 16),
        ] {
            let test_image = TestImage::new(131, 67, color, depth);
            let file = crate::encode::encode(&test_image.raw(), &EncodeOptions::default()).unwrap();
            let layout = parse(&file, &DecodeOptions::default()).unwrap();
            let hd = layout.header;
            let band_bytes = hd.patch_size() as usize
                * hd.width as usize
                * hd.channels() as usize
                * hd.bytes_per_sample();
            let mut a = vec![0u8; hd.output_bytes() as usize];
            let mut b = a.clone();
            for (band, (ca, cb)) in a
                .chunks_mut(band_bytes)
                .zip(b.chunks_mut(band_bytes))
                .enumerate()
            {
                let mut sa = Scratch::new(hd.patch_size() as usize, hd.channels() as usize);
                let mut sb = Scratch::new(hd.patch_size() as usize, hd.channels() as usize);
                for px in 0..hd.patches_x() as usize {
                    let patch = band * hd.patches_x() as usize + px;
                    decode_patch_portable(&layout, patch, ca, &mut sa, None).unwrap();
                    decode_patch_into_band(&layout, patch, cb, &mut sb).unwrap();
                }
            }
            assert_eq!(a, b, "{color:?} {depth}-bit");
            assert_eq!(a, test_image.bytes());
        }
    }

    /// The grouped fast path must read exactly what the plain bit reader reads, for every
    /// width, every starting bit shift and lengths with and without a remainder.
    #[test]
    fn fast_unpack_matches_the_bit_reader() {
        for nbit in 0..=16u32 {
            for shift in 0..8u64 {
                for len in [1usize, 7, 8, 9, 63, 64, 128] {
                    let mut w = BitWriter::default();
                    w.write(0, shift as u32);
                    let mut expect = Vec::new();
                    for i in 0..len as u32 {
                        let v = if nbit == 0 {
                            0
                        } else {
                            i.wrapping_mul(0x9E37_79B9).rotate_left(7) & ((1 << nbit) - 1)
                        };
                        w.write(v, nbit);
                        expect.push(v as u16);
                    }
                    let mut bytes = w.finish();
                    // With and without slack after the row: fast and slow path.
                    for slack in [0, UNPACK_SLACK] {
                        bytes.resize(bytes.len() + slack, 0xA5);
                        let mut out = vec![0xFFFF; len];
                        unpack_row(&bytes, shift, nbit, &mut out, None);
                        assert_eq!(
                            out, expect,
                            "portable: nbit {nbit} shift {shift} len {len} slack {slack}"
                        );
                        if let Some(avx2) = Avx2::detect() {
                            let mut out = vec![0xFFFF; len];
                            unpack_row(&bytes, shift, nbit, &mut out, Some(avx2));
                            assert_eq!(
                                out, expect,
                                "AVX2: nbit {nbit} shift {shift} len {len} slack {slack}"
                            );
                        }
                    }
                }
            }
        }
    }
}
