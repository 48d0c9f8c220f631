//! The fast profile's CPU decoder (format version 1): one (patch, channel) stream at a time,
//! rows unpacked at their fixed bit width (hand-written AVX2 unpacking where the CPU has it)
//! and predicted from the row above, then handed to the band's [`BandSink`].

use super::predict::predict_row;
use crate::codec::bits::BitReader;
use crate::codec::planes::check_padding;
use crate::codec::sample::Sample;
use crate::codec::simd::{avx2_dispatch, Avx2};
use crate::codec::sink::{prefetch_band_start, BandSink};
use crate::error::{FormatError, Result};
use crate::format::fast::{nbit_field_bits, FastPredictor, STREAM_PREFIX_LEN};
use crate::format::{FileLayout, Header};

/// Decodes the patches of band `band` (one patch row) of a validated layout whose patch
/// columns are in `columns` into `sink` (patches are independent: the others are skipped),
/// each patch's first `rows` rows (all where the patch has no more; see [`decode_patch`]).
pub(crate) fn decode_band<S: BandSink>(
    layout: &FileLayout,
    band: usize,
    columns: std::ops::Range<usize>,
    rows: u32,
    sink: &mut S,
) -> Result<()> {
    let h = &layout.header;
    let mut scratch = Scratch::new(h.patch_size() as usize, h.channels() as usize, h.depth);
    let first = band * h.patches_x() as usize;
    let columns =
        columns.start.min(h.patches_x() as usize)..columns.end.min(h.patches_x() as usize);
    let end = first + columns.end;
    prefetch_band_start(sink, h, first + columns.start, end);
    for patch in first + columns.start..end {
        decode_patch(layout, patch, rows, sink, &mut scratch)?;
    }
    Ok(())
}

/// Per-thread buffers: one plane per channel and two row buffers of the patch size.
struct Scratch {
    planes: Planes,
    deltas: Vec<u16>,
    prediction: Vec<u16>,
}

/// A patch's planes, in the file's sample type: bytes for 8-bit images, so the planes and
/// the interleave move half the bytes of `u16` planes.
enum Planes {
    Bytes(Vec<u8>),
    Words(Vec<u16>),
}

impl Scratch {
    fn new(patch_size: usize, channels: usize, depth: u8) -> Self {
        let plane_samples = patch_size * patch_size * channels;
        Scratch {
            planes: if depth == 8 {
                Planes::Bytes(vec![0; plane_samples])
            } else {
                Planes::Words(vec![0; plane_samples])
            },
            deltas: vec![0; patch_size],
            prediction: vec![0; patch_size],
        }
    }
}

avx2_dispatch! {
    /// Decodes one patch, all channels, into its band: its first `rows` rows (rows are
    /// predicted from the row above, so a window's rows need those above it, never those
    /// below; where fewer than all are decoded, what follows them in the streams is not
    /// checked). With AVX2 code generation where the CPU has it.
    fn decode_patch<S: BandSink>(
        layout: &FileLayout,
        patch: usize,
        rows: u32,
        sink: &mut S,
        scratch: &mut Scratch,
    ) -> Result<()> => decode_patch_portable;
}

/// The decoder's work for one patch; everything it calls is inlined so the AVX2 copy above
/// vectorises all of it. `avx2` (a constant at each call site, so the check folds away)
/// selects the hand-written AVX2 bit unpacking.
#[inline(always)]
fn decode_patch_portable<S: BandSink>(
    layout: &FileLayout,
    patch: usize,
    rows: u32,
    sink: &mut S,
    scratch: &mut Scratch,
    avx2: Option<Avx2>,
) -> Result<()> {
    let (x0, _, pw, full) = layout.header.patch_rect(patch as u64);
    let (x0, pw, ph) = (x0 as usize, pw as usize, full.min(rows) as usize);
    // Whether the streams are decoded to their ends (and their ends checked).
    let complete = rows >= full;
    let buffers = (&mut scratch.deltas[..], &mut scratch.prediction[..]);
    // A whole patch of the default size is decoded by a copy of the code with its size a
    // constant: fixed-length loops without remainder paths, fewer live registers per row.
    const SIDE: usize = 1 << crate::format::PATCH_LOG2_DEFAULT;
    let whole = (pw, ph) == (SIDE, SIDE) && complete;
    match (&mut scratch.planes, whole) {
        (Planes::Bytes(p), true) => {
            decode_patch_planes(layout, patch, sink, p, buffers, avx2, x0, SIDE, SIDE, true)
        }
        (Planes::Bytes(p), false) => {
            decode_patch_planes(layout, patch, sink, p, buffers, avx2, x0, pw, ph, complete)
        }
        (Planes::Words(p), true) => {
            decode_patch_planes(layout, patch, sink, p, buffers, avx2, x0, SIDE, SIDE, true)
        }
        (Planes::Words(p), false) => {
            decode_patch_planes(layout, patch, sink, p, buffers, avx2, x0, pw, ph, complete)
        }
    }
}

/// [`decode_patch_portable`] for the patch at column `x0`, `pw` x `ph` pixels (its first
/// `ph` rows; `complete`: all of them), with planes of sample type `T`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn decode_patch_planes<S: BandSink, T: Sample>(
    layout: &FileLayout,
    patch: usize,
    sink: &mut S,
    planes: &mut [T],
    (deltas, prediction): (&mut [u16], &mut [u16]),
    avx2: Option<Avx2>,
    x0: usize,
    pw: usize,
    ph: usize,
    complete: bool,
) -> Result<()> {
    let h = &layout.header;
    let channels = h.channels() as usize;
    let plane_len = pw * ph;
    for c in 0..channels {
        let index = patch * channels + c;
        let start = layout.offsets[index] as usize;
        decode_stream(
            h,
            layout.data,
            start..start + layout.stream_size(index) as usize,
            pw,
            &mut planes[c * plane_len..(c + 1) * plane_len],
            (&mut deltas[..pw], &mut prediction[..pw]),
            avx2,
            complete,
        )
        .map_err(|e| {
            e.at(
                h.stream_pos(patch as u64, c as u8, start as u64),
                layout.stream_size(index),
                h.depth,
            )
        })?;
    }
    let planes = &planes[..channels * plane_len];
    for y in 0..ph {
        match channels {
            1 => sink.put_row::<1, T>(planes, plane_len, y * pw, y, x0, pw),
            2 => sink.put_row::<2, T>(planes, plane_len, y * pw, y, x0, pw),
            3 => sink.put_row::<3, T>(planes, plane_len, y * pw, y, x0, pw),
            _ => sink.put_row::<4, T>(planes, plane_len, y * pw, y, x0, pw),
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

/// Decodes one (patch, channel) stream, bytes `stream` of `file`, into `plane` (`pw` wide,
/// `plane.len() / pw` rows, the stream's first rows; its end is checked where `complete` says
/// they are all of them; `T` is `u8` only for 8-bit files). The CPU twin of
/// `shaders/decode.wgsl`: same field order, same checks. Bit fields are read with 8-byte loads
/// that may extend past the stream into the rest of the file (never past the file: rows near
/// its end take the slow path); only bits inside the stream are used, since each row's length
/// is checked against it first.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_stream<T: Sample>(
    h: &Header,
    file: &[u8],
    stream: std::ops::Range<usize>,
    pw: usize,
    plane: &mut [T],
    (deltas, prediction): (&mut [u16], &mut [u16]),
    avx2: Option<Avx2>,
    complete: bool,
) -> Result<(), StreamError> {
    let depth = h.depth as u32;
    let mask = ((1u32 << depth) - 1) as u16;
    let nb = nbit_field_bits(h.depth);
    // parse_file guarantees the stream holds at least the predictor byte.
    let (start, len) = (stream.start, stream.len());
    let id = file[start];
    let predictor = FastPredictor::from_id(id).ok_or(StreamError::UnknownPredictor(id))?;
    let payload_start = start + STREAM_PREFIX_LEN;
    let payload_bits = (len - STREAM_PREFIX_LEN) as u64 * 8;
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
        let (above, rest) = plane.split_at_mut(row_index * pw);
        let row = &mut rest[..pw];
        if nbit == 0 {
            // A flat row (every delta 0, the row is prediction + base): no unpacking, and
            // no pass over a row of zero deltas. Flat images are mostly such rows.
            if row_index == 0 || predictor == FastPredictor::None {
                row.fill(T::wrap(base, mask));
            } else if predictor == FastPredictor::Up {
                let up = &above[(row_index - 1) * pw..];
                for (o, &p) in row.iter_mut().zip(up) {
                    *o = T::wrap(p.wide().wrapping_add(base), mask);
                }
            } else {
                let up = &above[(row_index - 1) * pw..row_index * pw];
                predict_row(predictor, up, prediction);
                for (o, &p) in row.iter_mut().zip(prediction.iter()) {
                    *o = T::wrap(p.wrapping_add(base), mask);
                }
            }
            continue;
        }
        unpack_row(bytes, r.position(), nbit, deltas, avx2);
        r.skip(row_bits);
        if row_index == 0 || predictor == FastPredictor::None {
            for (o, &d) in row.iter_mut().zip(deltas.iter()) {
                *o = T::wrap(base.wrapping_add(d), mask);
            }
        } else if predictor == FastPredictor::Up {
            // The most common predictor, fused with the addition: no prediction buffer.
            let up = &above[(row_index - 1) * pw..];
            for ((o, &d), &p) in row.iter_mut().zip(deltas.iter()).zip(up) {
                *o = T::wrap(p.wide().wrapping_add(base).wrapping_add(d), mask);
            }
        } else {
            let up = &above[(row_index - 1) * pw..row_index * pw];
            predict_row(predictor, up, prediction);
            for ((o, &d), &p) in row.iter_mut().zip(deltas.iter()).zip(prediction.iter()) {
                *o = T::wrap(p.wrapping_add(base).wrapping_add(d), mask);
            }
        }
    }
    if !complete {
        return Ok(());
    }
    check_stream_end(&bytes[..(payload_bits / 8) as usize], r.position())
}

/// The end-of-stream rule ([`check_padding`]) for a version-1 stream's `payload` (the bytes
/// after the predictor byte).
pub(crate) fn check_stream_end(payload: &[u8], used: u64) -> Result<(), StreamError> {
    check_padding(payload, used).map_err(|used_bytes| StreamError::Trailing {
        used: used_bytes + STREAM_PREFIX_LEN as u64,
    })
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
    if avx2.is_some() && (1..=super::unpack_avx2::MAX_WIDTH16).contains(&nbit) && out.len() >= 16 {
        // SAFETY: as below; its loads are those of the 8-field path's groups.
        let done = unsafe {
            super::unpack_avx2::unpack_groups16(
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
    #[cfg(target_arch = "x86_64")]
    if avx2.is_some() && (1..=super::unpack_avx2::MAX_WIDTH).contains(&nbit) && out.len() >= 8 {
        // SAFETY: an `Avx2` exists only on a CPU with AVX2 (Avx2::detect); the slack check
        // above keeps every 16-byte group load inside `bytes`, and the function bounds-checks
        // it again.
        let done = unsafe {
            super::unpack_avx2::unpack_groups(
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
    use crate::codec::bits::BitWriter;
    use crate::codec::sink::InterleavedBand;
    use crate::decode::{parse, DecodeOptions};
    use crate::format::fast::stream_size_bounds;

    /// The portable path (what CPUs without AVX2 run) decodes exactly what the dispatched one
    /// does.
    #[test]
    fn portable_and_dispatched_decoders_agree() {
        use crate::raw::TestImage;
        use crate::{encode::EncodeOptions, format::ColorType};
        for (color, depth) in [
            (ColorType::Gray, 8),
            (ColorType::Rgb, 8),
            (ColorType::GrayAlpha, 16),
        ] {
            let test_image = TestImage::new(131, 67, color, depth);
            let file = crate::encode::encode(
                &test_image.raw(),
                &EncodeOptions::for_profile(crate::Profile::Fast),
            )
            .unwrap();
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
                let mut sa = Scratch::new(hd.patch_size() as usize, hd.channels() as usize, depth);
                let mut sb = Scratch::new(hd.patch_size() as usize, hd.channels() as usize, depth);
                for px in 0..hd.patches_x() as usize {
                    let patch = band * hd.patches_x() as usize + px;
                    let mut sink_a = InterleavedBand::new(&hd, ca).portable();
                    decode_patch_portable(&layout, patch, u32::MAX, &mut sink_a, &mut sa, None)
                        .unwrap();
                    let mut sink_b = InterleavedBand::new(&hd, cb);
                    decode_patch(&layout, patch, u32::MAX, &mut sink_b, &mut sb).unwrap();
                }
            }
            assert_eq!(a, b, "{color:?} {depth}-bit");
            assert_eq!(a, test_image.bytes());
        }
    }

    /// Rows of width 0 (flat rows, decoded without unpacking) under every predictor, in
    /// patches whose later rows are not flat, at both depths.
    #[test]
    fn flat_rows_decode_under_every_predictor() {
        use crate::fast::{FastOptions, PredictorChoice};
        use crate::{
            encode::EncodeOptions, encode::ProfileOptions, format::ColorType, raw::TestImage,
        };
        let (w, h) = (70u32, 70u32);
        // Constant rows stepping by 3 per row (flat under Up, and under None only the first
        // row), then a textured band at the bottom so rows of other widths mix in.
        let value = |x: u32, y: u32| -> u16 {
            if y < 50 {
                (y * 3) as u16
            } else {
                ((x * 7919) ^ (y * 31)) as u16
            }
        };
        for depth in [8u8, 16] {
            let image = TestImage::from_fn(w, h, ColorType::GrayAlpha, depth, |x, y, c| {
                value(x, y) ^ if c == 0 { 0 } else { 5 }
            });
            let (raw, expected) = (image.raw(), image.bytes());
            for predictor in FastPredictor::ALL {
                let options = EncodeOptions {
                    profile: ProfileOptions::Fast(FastOptions {
                        predictor: PredictorChoice::Fixed(predictor),
                    }),
                    ..Default::default()
                };
                let file = crate::encode::encode(&raw, &options).unwrap();
                let inspection = crate::inspect::inspect(&file, &DecodeOptions::default()).unwrap();
                let crate::inspect::Coding::Fast { nbit_counts, .. } = inspection.coding else {
                    panic!("not a fast file");
                };
                assert!(nbit_counts[0] > 0, "{predictor:?}: no flat row");
                let (_, decoded) = crate::decode::decode(&file, &DecodeOptions::default()).unwrap();
                assert!(decoded == expected, "{predictor:?} at {depth} bits");
            }
        }
    }

    /// Patches whose every channel has one value per row (every stream at its smallest size)
    /// decode exactly, to interleaved bytes and to f32 planes: under every predictor, at both
    /// depths, for every channel count, in whole and edge patches, and next to a patch where
    /// only some channels are flat.
    #[test]
    fn flat_patches_decode_under_every_predictor() {
        use crate::fast::{FastOptions, PredictorChoice};
        use crate::layout::{Normalize, OutputLayout};
        use crate::{
            encode::EncodeOptions, encode::ProfileOptions, format::ColorType, raw::TestImage,
        };
        let (w, h) = (70u32, 70u32);
        for depth in [8u8, 16] {
            for color in [
                ColorType::Gray,
                ColorType::GrayAlpha,
                ColorType::Rgb,
                ColorType::Rgba,
            ] {
                let channels = color.channels() as u32;
                // One value per row within each patch column, different per channel; the
                // last channel is textured in the bottom-right patch only.
                let value = |x: u32, y: u32, c: u32| -> u16 {
                    let v = if c == channels - 1 && x >= 64 && y >= 64 {
                        (x * 7919) ^ (y * 31)
                    } else {
                        y * 3 + c * 50 + (x / 64) * 17 + 200
                    };
                    (if depth == 8 { v & 0xff } else { v * 257 }) as u16
                };
                let image = TestImage::from_fn(w, h, color, depth, value);
                let raw = image.raw();
                let expected = image.bytes();
                let norm = Normalize::IMAGENET;
                let expected_f32: Vec<f32> = (0..channels)
                    .flat_map(|c| (0..h * w).map(move |i| (c, i)))
                    .map(|(c, i)| norm.apply(value(i % w, i / w, c) as u32, depth, c as usize))
                    .collect();
                for predictor in FastPredictor::ALL {
                    let what = format!("{color:?} {depth}-bit under {predictor:?}");
                    let options = EncodeOptions {
                        profile: ProfileOptions::Fast(FastOptions {
                            predictor: PredictorChoice::Fixed(predictor),
                        }),
                        ..Default::default()
                    };
                    let file = crate::encode::encode(&raw, &options).unwrap();
                    // Patches 0-2 have every stream at its smallest size.
                    let layout = parse(&file, &DecodeOptions::default()).unwrap();
                    let hd = layout.header;
                    for patch in 0..3u64 {
                        let (_, _, pw, ph) = hd.patch_rect(patch);
                        let smallest = stream_size_bounds(&hd, pw, ph).0;
                        for c in 0..channels as usize {
                            let index = patch as usize * channels as usize + c;
                            assert_eq!(layout.stream_size(index) as u64, smallest, "{what}");
                        }
                    }
                    let (_, decoded) =
                        crate::decode::decode(&file, &DecodeOptions::default()).unwrap();
                    assert!(decoded == expected, "{what}");
                    let mut f32_out = vec![0u8; expected_f32.len() * 4];
                    crate::decode::decode_to_layout(
                        &file,
                        &mut f32_out,
                        OutputLayout::F32Chw(norm),
                        &DecodeOptions::default(),
                    )
                    .unwrap();
                    let got: &[f32] = bytemuck::cast_slice(&f32_out);
                    assert!(got == expected_f32.as_slice(), "{what}, f32 planes");
                }
            }
        }
    }

    /// The grouped fast path must read exactly what the plain bit reader reads, for every
    /// width, every starting bit shift and lengths with and without a remainder.
    #[test]
    fn fast_unpack_matches_the_bit_reader() {
        for nbit in 0..=16u32 {
            for shift in 0..8u64 {
                for len in [1usize, 7, 8, 9, 16, 24, 31, 63, 64, 128] {
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
