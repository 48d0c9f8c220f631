//! The lossless decoder on the CPU: per chunk, the segments' tokens (a table lookup per
//! token, then its raw bits) into the output as zigzag residuals, then the inverse of the
//! differences in place (a running sum along the last axis plus the already decoded values
//! of earlier rows); at the end one pass from ordered bits (or float-mult) to float bits and
//! the exception runs. Chunks' tokens decode in parallel when asked; the single-thread path
//! decodes and reconstructs chunk by chunk while the chunk is in cache.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::format::*;
use crate::field::core::code::{fill_lut, Entry, ENTRY_RUN, LUT_SIZE};
use crate::field::core::container::{segment_range, strides, Stream};

use super::{FloatType, FloatVec};
use crate::codec::simd::{avx2_dispatch, Avx2};
use crate::decode::DecodeOptions;
use crate::error::{FormatError, ParameterError, Result};

#[path = "lockstep.rs"]
mod lockstep;
#[cfg(target_arch = "x86_64")]
#[path = "rowsum_avx2.rs"]
mod rowsum_avx2;
#[path = "window.rs"]
mod window;
use lockstep::{decode_group_plain, decode_group_runs, Lane, LANES};
use window::decode_prefixes;
pub(in crate::field::lossless) use window::prefix_segments;

/// An unsigned word of the decoding arithmetic: u32 for float32, u16 for the 16-bit types
/// (residuals, sums and differences wrap at the word's width).
pub(in crate::field) trait Word:
    Copy + Default + Send + Sync + bytemuck::Pod
{
    /// The low bits of `v`.
    fn from_u32(v: u32) -> Self;
    /// Widened.
    fn to_u32(self) -> u32;
    /// Wrapping sum.
    fn add(self, o: Self) -> Self;
    /// Wrapping difference.
    fn sub(self, o: Self) -> Self;
    /// Inverse zigzag.
    fn unzig(self) -> Self;
    /// Zigzag (the inverse of [`Word::unzig`]).
    fn zig(self) -> Self;
    /// The words as u32 when they are (float32), for the AVX2 row sums.
    fn as_u32s(s: &mut [Self]) -> Option<&mut [u32]>;
    /// The words as u32 when they are.
    fn as_u32s_ref(s: &[Self]) -> Option<&[u32]>;
}

macro_rules! word {
    ($t:ty) => {
        impl Word for $t {
            #[inline(always)]
            fn from_u32(v: u32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_u32(self) -> u32 {
                self as u32
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn unzig(self) -> Self {
                (self >> 1) ^ (0 as $t).wrapping_sub(self & 1)
            }
            #[inline(always)]
            fn zig(self) -> Self {
                (self << 1) ^ (0 as $t).wrapping_sub(self >> (<$t>::BITS - 1))
            }
            #[inline(always)]
            fn as_u32s(s: &mut [Self]) -> Option<&mut [u32]> {
                if std::mem::size_of::<$t>() == 4 {
                    bytemuck::try_cast_slice_mut(s).ok()
                } else {
                    None
                }
            }
            #[inline(always)]
            fn as_u32s_ref(s: &[Self]) -> Option<&[u32]> {
                if std::mem::size_of::<$t>() == 4 {
                    bytemuck::try_cast_slice(s).ok()
                } else {
                    None
                }
            }
        }
    };
}
word!(u32);
word!(u16);

/// Decodes a lossless float array on the CPU.
pub fn decode_lossless(data: &[u8], options: &DecodeOptions) -> Result<(LosslessHeader, FloatVec)> {
    decode_lossless_window(data, options, None)
}

/// Like [`decode_lossless`], but with `window = Some((rows, columns))` only the values in
/// those rows and columns of the last two axes (every index of the others) are sure to be
/// decoded: the others are unspecified. Where each chunk is one plane of the last two axes
/// (the default chunk of a 256 x 256 plane) and the array has no second differences and no
/// float-mult adjustments, each plane's segments past the window's last row are not decoded
/// (the rows above it are: the differences run from the plane's start); elsewhere the array
/// decodes whole. Checks and errors are [`decode_lossless`]'s for the part decoded (the CRC,
/// where verified, covers the whole file).
pub fn decode_lossless_window(
    data: &[u8],
    options: &DecodeOptions,
    window: Option<(std::ops::Range<u32>, std::ops::Range<u32>)>,
) -> Result<(LosslessHeader, FloatVec)> {
    let layout = parse_layout(data, options)?;
    let rows_end = window.map(|(rows, _)| rows.end);
    let n = layout.header.len() as usize;
    let out = match layout.header.dtype {
        FloatType::F32 => {
            // Not zero-filled: the decoder writes every word before any is read.
            let mut v: Vec<f32> = Vec::with_capacity(n);
            let spare: *mut [MaybeUninit<f32>] = &mut v.spare_capacity_mut()[..n];
            // SAFETY: MaybeUninit<f32> and MaybeUninit<u32> have the same size and alignment
            // and any bits are a valid MaybeUninit; the slice is `v`'s spare capacity, not
            // otherwise borrowed while `words` lives.
            let words = unsafe { &mut *(spare as *mut [MaybeUninit<u32>]) };
            decode_words::<u32>(&layout, data, options, rows_end, words)?;
            // SAFETY: the capacity is at least `n`, and `decode_words` returned Ok, so it
            // wrote all `n` words (as u32 bits, which are valid f32s).
            unsafe { v.set_len(n) };
            FloatVec::F32(v)
        }
        FloatType::F16 => FloatVec::F16(decode_vec(&layout, data, options, rows_end, n)?),
        FloatType::BF16 => FloatVec::BF16(decode_vec(&layout, data, options, rows_end, n)?),
    };
    Ok((layout.header, out))
}

/// [`decode_words`] into a new vector of `n` words, not zero-filled first.
fn decode_vec<W: Word>(
    layout: &Layout<'_>,
    data: &[u8],
    options: &DecodeOptions,
    rows_end: Option<u32>,
    n: usize,
) -> Result<Vec<W>> {
    let mut v: Vec<W> = Vec::with_capacity(n);
    decode_words::<W>(
        layout,
        data,
        options,
        rows_end,
        &mut v.spare_capacity_mut()[..n],
    )?;
    // SAFETY: the capacity is at least `n`, and `decode_words` returned Ok, so it wrote all
    // `n` words.
    unsafe { v.set_len(n) };
    Ok(v)
}

/// `s` as possibly uninitialised words, for the decoder to write.
///
/// # Safety
/// Only initialised values may be stored through the result (the decode loops store only
/// `MaybeUninit::new` values), so `s` stays initialised.
unsafe fn as_uninit<T>(s: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: MaybeUninit<T> has T's layout; the caller keeps the values initialised.
    unsafe { &mut *(s as *mut [T] as *mut [MaybeUninit<T>]) }
}

/// `s` as initialised words.
///
/// # Safety
/// Every element of `s` must have been written.
unsafe fn assume_init<T>(s: &mut [MaybeUninit<T>]) -> &mut [T] {
    // SAFETY: MaybeUninit<T> has T's layout, and every element is initialised (the
    // caller's contract).
    unsafe { &mut *(s as *mut [MaybeUninit<T>] as *mut [T]) }
}

/// Decodes a lossless float array into `out`: the values' bytes, native-endian, C order;
/// `out.len()` must be the array's values times the dtype's size.
pub fn decode_lossless_into(
    data: &[u8],
    options: &DecodeOptions,
    out: &mut [u8],
) -> Result<LosslessHeader> {
    let layout = parse_layout(data, options)?;
    let needed = layout.header.output_bytes() as usize;
    if out.len() != needed {
        return Err(ParameterError::BufferSize {
            got: out.len(),
            needed,
        }
        .into());
    }
    fn run<W: Word>(
        layout: &Layout<'_>,
        data: &[u8],
        o: &DecodeOptions,
        out: &mut [u8],
    ) -> Result<()> {
        match bytemuck::try_cast_slice_mut::<u8, W>(out) {
            // SAFETY: the decoder stores only initialised words.
            Ok(words) => decode_words::<W>(layout, data, o, None, unsafe { as_uninit(words) }),
            Err(_) => {
                let v = decode_vec::<W>(layout, data, o, None, layout.header.len() as usize)?;
                out.copy_from_slice(bytemuck::cast_slice(&v));
                Ok(())
            }
        }
    }
    match layout.header.dtype {
        FloatType::F32 => run::<u32>(&layout, data, options, out)?,
        FloatType::F16 | FloatType::BF16 => run::<u16>(&layout, data, options, out)?,
    }
    Ok(layout.header)
}

fn segment_error(data: &[u8], seg: &[u8], value: u64, reason: &'static str) -> FormatError {
    FormatError::InvalidHeader {
        field: "segment",
        offset: (seg.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize) as u64,
        value,
        reason,
    }
}

/// Decodes every chunk of a checked layout into `out` (the float bits as words), or with
/// `rows_end` where [`prefix_segments`] allows only each plane's rows above it (the rest
/// zero); on Ok every word of `out` was written.
fn decode_words<W: Word>(
    layout: &Layout<'_>,
    data: &[u8],
    options: &DecodeOptions,
    rows_end: Option<u32>,
    out: &mut [MaybeUninit<W>],
) -> Result<()> {
    let h = &layout.header;
    // One thread in the pool: the sequential path, which reconstructs each chunk in cache.
    let parallel = options.parallel && rayon::current_num_threads() > 1;
    let chunk = 1usize << h.chunk_log2;
    let width = h.dtype.bits();
    let st = strides(&h.shape);
    let base = |c: &[u8]| (c.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
    // The chunks cover `out` exactly (each writes all its words, see below).
    if layout.chunks.len() != out.len().div_ceil(chunk) {
        return Err(FormatError::InvalidHeader {
            field: "chunk table",
            offset: 0,
            value: layout.chunks.len() as u64,
            reason: "not the number of chunks the shape needs",
        }
        .into());
    }
    // Chunk heads first: whether any chunk carries adjustments (then their buffer is needed).
    let mut adjust: Vec<u32> = Vec::new();
    let any_adjust = layout
        .chunks
        .iter()
        .any(|c| c.first() == Some(&CHUNK_FLAG_ADJUST));
    if any_adjust {
        adjust = vec![0u32; out.len()];
    } else if let Some(k) = rows_end.and_then(|r| prefix_segments(h, r)) {
        return decode_prefixes(layout, data, k, out);
    }
    // Chunk `c`'s words; on Ok all of `words` written.
    let tokens = |c: usize, words: &mut [MaybeUninit<W>], adj: Option<&mut [u32]>| -> Result<()> {
        let bytes = layout.chunks[c];
        let cl = parse_chunk(bytes, base(bytes), h)?;
        decode_stream(data, &cl.residuals, h.segments as usize, width, words)?;
        match (cl.adjust, adj) {
            (Some(s), Some(a)) => {
                // SAFETY: the decoder stores only initialised words.
                let a = unsafe { as_uninit(a) };
                decode_stream(data, &s, h.segments as usize, 32, a)
            }
            (None, _) => Ok(()),
            (Some(_), None) => unreachable!("the adjustment buffer exists when a chunk has one"),
        }
    };
    // Second differences invert in two whole passes (the second reads the first's output).
    if (parallel && layout.chunks.len() > 1) || h.axes2 != 0 {
        let adj_chunks: Vec<Option<&mut [u32]>> = if any_adjust {
            adjust.chunks_mut(chunk).map(Some).collect()
        } else {
            (0..layout.chunks.len()).map(|_| None).collect()
        };
        if parallel {
            out.par_chunks_mut(chunk)
                .zip(adj_chunks)
                .enumerate()
                .try_for_each(|(c, (w, a))| tokens(c, w, a))?;
        } else {
            out.chunks_mut(chunk)
                .zip(adj_chunks)
                .enumerate()
                .try_for_each(|(c, (w, a))| tokens(c, w, a))?;
        }
        // SAFETY: every chunk returned Ok, so wrote all its words, and the chunks cover `out`
        // (checked above; `zip` gives every chunk, the adjustment chunks being as many).
        let out = unsafe { assume_init(out) };
        reconstruct(out, 0, out.len(), &h.shape, &st, h.axes);
        if h.axes2 != 0 {
            // The first inverse gives the values differenced once more along `axes2`: as
            // zigzag values again, the same inverse along `axes2` gives the values.
            out.iter_mut().for_each(|v| *v = v.zig());
            reconstruct(out, 0, out.len(), &h.shape, &st, h.axes2);
        }
        finish(out, h, any_adjust.then_some(&adjust[..]), parallel)?;
    } else {
        // Values at least `reach` before the reconstructed end are read by no later value
        // (the row's previous value and the upper axes' terms), so they map to float bits
        // while still in cache.
        let last = h.shape.len() - 1;
        let reach = 1
            + (0..last)
                .filter(|a| h.axes >> a & 1 == 1)
                .map(|a| st[a])
                .sum::<usize>();
        let mut done = 0;
        let n = out.len();
        for c in 0..layout.chunks.len() {
            let range = c * chunk..((c + 1) * chunk).min(out.len());
            let adj = any_adjust.then(|| &mut adjust[range.clone()]);
            tokens(c, &mut out[range.clone()], adj)?;
            // SAFETY: chunks 0..=c returned Ok, so wrote all their words: `..range.end`.
            let out = unsafe { assume_init(&mut out[..range.end]) };
            reconstruct(out, range.start, range.end, &h.shape, &st, h.axes);
            let safe = if range.end == n {
                range.end
            } else {
                range.end.saturating_sub(reach)
            };
            if safe > done {
                let a = any_adjust.then(|| &adjust[done..safe]);
                finish(&mut out[done..safe], h, a, false)?;
                done = safe;
            }
        }
    }
    for r in &layout.runs {
        out[r.start as usize..(r.start + r.len) as usize]
            .fill(MaybeUninit::new(W::from_u32(r.bits)));
    }
    Ok(())
}

/// Decodes one token stream's segments into `out` (zigzag values), [`LANES`] at a time.
fn decode_stream<W: Word>(
    data: &[u8],
    stream: &Stream<'_>,
    segments: usize,
    width: u32,
    out: &mut [MaybeUninit<W>],
) -> Result<()> {
    // One lane per segment's slice of `out`, so that on Ok every word was written.
    if stream.segments.len() != segments {
        return Err(FormatError::InvalidHeader {
            field: "segments",
            offset: 0,
            value: stream.segments.len() as u64,
            reason: "not the header's number of segments",
        }
        .into());
    }
    let mut lut = Box::new([0 as Entry; LUT_SIZE]);
    let runs = fill_lut(&stream.lengths, width, &mut lut);
    let m = out.len();
    // Split `out` into the segments' slices (the ranges partition `0..m`), one lane each;
    // every lane writes all of its slice or fails.
    let mut parts: Vec<&mut [MaybeUninit<W>]> = Vec::with_capacity(segments);
    let mut rest = out;
    for s in 0..segments {
        let r = segment_range(m, segments, s);
        let (a, b) = rest.split_at_mut(r.len());
        parts.push(a);
        rest = b;
    }
    let mut lanes: Vec<Lane<'_, '_, W>> = stream
        .segments
        .iter()
        .zip(parts)
        .map(|(seg, out)| Lane::new(seg, out))
        .collect();
    for group in lanes.chunks_mut(LANES) {
        let r = if runs {
            decode_group_runs::<W>(group, &lut)
        } else {
            decode_group_plain::<W>(group, &lut)
        };
        if let Err((k, v, why)) = r {
            return Err(segment_error(data, group[k].seg, v, why).into());
        }
    }
    Ok(())
}

/// The AVX2 running sums of a long row's values (see [`rowsum_avx2::row_sums`]) when the
/// CPU has AVX2 and the words are u32: how many values were done, and the running sum.
#[inline(always)]
fn rows_avx2<W: Word, const TERMS: usize>(
    avx2: Option<Avx2>,
    cur: &mut [W],
    p: [&[W]; 3],
    s: W,
) -> (usize, W) {
    #[cfg(target_arch = "x86_64")]
    if let (Some(_), Some(c)) = (avx2, W::as_u32s(cur)) {
        let p = p.map(|t| W::as_u32s_ref(t).unwrap_or(&[]));
        // SAFETY: `avx2` proves the CPU supports AVX2, `row_sums`' one requirement.
        let (k, s) = unsafe { rowsum_avx2::row_sums::<TERMS>(c, p, s.to_u32()) };
        return (k, W::from_u32(s));
    }
    let _ = (avx2, p);
    (0, s)
}

/// Rows shorter than this are reconstructed a plane at a time (the rows that share their
/// prediction terms in one loop); longer ones a row at a time.
const SHORT_ROW: usize = 64;

/// Inverts the differences along `axes` for values `start..end` in place: `out` holds their
/// zigzag residuals and the reconstructed values of everything before `start`.
pub(in crate::field) fn reconstruct<W: Word>(
    out: &mut [W],
    start: usize,
    end: usize,
    shape: &[u32],
    st: &[usize],
    axes: u8,
) {
    let avx2 = Avx2::detect();
    let nd = shape.len();
    let last = nd - 1;
    let along_rows = axes >> last & 1 == 1;
    let upper = axes & !(1 << last);
    let row_len = shape[last] as usize;
    // The terms of the upper axes' prediction for each set of usable axes (subsets T of
    // `usable` with +x[j - off] for odd |T|, - for even), built once: short rows would
    // otherwise spend more on them than on their values.
    let mut by_usable: Vec<Vec<(usize, bool)>> = vec![Vec::new(); 1 << last];
    for (usable, terms) in by_usable.iter_mut().enumerate() {
        let usable = usable as u8;
        if usable & !upper != 0 {
            continue;
        }
        let mut t = usable;
        while t != 0 {
            let off = (0..last).filter(|a| t >> a & 1 == 1).map(|a| st[a]).sum();
            terms.push((off, t.count_ones() % 2 == 1));
            t = (t - 1) & usable;
        }
    }
    // The coordinates of the current row along the upper axes, advanced row by row.
    let mut j = start;
    let mut coord: Vec<usize> = (0..last).map(|a| (j / st[a]) % shape[a] as usize).collect();
    while j < end {
        let row_start = j - j % row_len;
        // The active terms: the upper axes in the set whose coordinate is at least 1.
        let mut active = 0u8;
        for (a, &c) in coord.iter().enumerate() {
            if c >= 1 {
                active |= 1 << a;
            }
        }
        let terms = &by_usable[(upper & active) as usize][..];
        let pred = |out: &[W], i: usize| -> W {
            let mut p = W::default();
            for &(off, plus) in terms {
                p = if plus {
                    p.add(out[i - off])
                } else {
                    p.sub(out[i - off])
                };
            }
            p
        };
        // The rows that share these terms, taken in one loop: to the end of the plane
        // (the rows along the axis before the last), unless this row is its first.
        let short = row_len < SHORT_ROW;
        let rows = match coord.last() {
            Some(&c) if c >= 1 && short => shape[last - 1] as usize - c,
            _ => 1,
        };
        let group_end = (row_start + rows * row_len).min(end);
        let span = j..group_end;
        // A long row's span lies in one row, so the terms' values (at least a row back)
        // are slices before it: no bounds checks per value.
        let n = span.len();
        if along_rows && !short && terms.len() <= 3 && !matches!(*terms, [_, _]) {
            let mut s = if j > row_start {
                out[j - 1].sub(pred(out, j - 1))
            } else {
                W::default()
            };
            let (head, cur) = out.split_at_mut(j);
            let cur = &mut cur[..n];
            match *terms {
                [] => {
                    let k;
                    (k, s) = rows_avx2::<W, 0>(avx2, cur, [&[], &[], &[]], s);
                    for v in cur[k..].iter_mut() {
                        s = s.add(v.unzig());
                        *v = s;
                    }
                }
                [(o, true)] => {
                    let p = &head[j - o..][..n];
                    let k;
                    (k, s) = rows_avx2::<W, 1>(avx2, cur, [p, &[], &[]], s);
                    for (v, &p) in cur[k..].iter_mut().zip(&p[k..]) {
                        s = s.add(v.unzig());
                        *v = s.add(p);
                    }
                }
                [(o12, false), (o2, true), (o1, true)] => {
                    let (p1, p2, p12) = (
                        &head[j - o1..][..n],
                        &head[j - o2..][..n],
                        &head[j - o12..][..n],
                    );
                    let k;
                    (k, s) = rows_avx2::<W, 3>(avx2, cur, [p1, p2, p12], s);
                    let (cur, p1, p2, p12) = (&mut cur[k..], &p1[k..], &p2[k..], &p12[k..]);
                    for (((v, &a), &b), &c) in cur.iter_mut().zip(p1).zip(p2).zip(p12) {
                        s = s.add(v.unzig());
                        *v = s.add(a).add(b).sub(c);
                    }
                }
                _ => {
                    for (k, v) in cur.iter_mut().enumerate() {
                        s = s.add(v.unzig());
                        let mut p = W::default();
                        for &(off, plus) in terms {
                            let x = head[j + k - off];
                            p = if plus { p.add(x) } else { p.sub(x) };
                        }
                        *v = s.add(p);
                    }
                }
            }
        } else if !along_rows && !short && matches!(*terms, [(_, true)]) {
            let [(o, _)] = *terms else { unreachable!() };
            let (head, cur) = out.split_at_mut(j);
            for (v, &p) in cur[..n].iter_mut().zip(&head[j - o..][..n]) {
                *v = v.unzig().add(p);
            }
        } else if along_rows {
            // The running sum along the row, restarted at each row's first value.
            let mut s = if j > row_start {
                out[j - 1].sub(pred(out, j - 1))
            } else {
                W::default()
            };
            let mut c = j - row_start;
            macro_rules! rows {
                ($i:ident, $value:expr) => {
                    if short {
                        for $i in span {
                            if c == row_len {
                                c = 0;
                                s = W::default();
                            }
                            c += 1;
                            s = s.add(out[$i].unzig());
                            out[$i] = $value;
                        }
                    } else {
                        for $i in span {
                            s = s.add(out[$i].unzig());
                            out[$i] = $value;
                        }
                    }
                };
            }
            match *terms {
                [] => rows!(i, s),
                [(o, true)] => rows!(i, s.add(out[i - o])),
                // Two upper axes (3-D Lorenzo), in the order the terms are listed.
                [(o12, false), (o2, true), (o1, true)] => {
                    rows!(i, s.add(out[i - o1]).add(out[i - o2]).sub(out[i - o12]))
                }
                _ => rows!(i, s.add(pred(out, i))),
            }
        } else {
            match *terms {
                [] => out[span].iter_mut().for_each(|v| *v = v.unzig()),
                [(o, true)] => {
                    for i in span {
                        out[i] = out[i].unzig().add(out[i - o]);
                    }
                }
                // Two upper axes, the last not differenced.
                [(o12, false), (o2, true), (o1, true)] => {
                    for i in span {
                        out[i] = out[i]
                            .unzig()
                            .add(out[i - o1])
                            .add(out[i - o2])
                            .sub(out[i - o12]);
                    }
                }
                _ => {
                    for i in span {
                        out[i] = out[i].unzig().add(pred(out, i));
                    }
                }
            }
        }
        // Advance the coordinates by the rows completed, like an odometer.
        let mut carry = (group_end - row_start) / row_len;
        for a in (0..last).rev() {
            if carry == 0 {
                break;
            }
            let v = coord[a] + carry;
            coord[a] = v % shape[a] as usize;
            carry = v / shape[a] as usize;
        }
        j = group_end;
    }
}

/// The last pass: ordered bits (or float-mult multipliers and adjustments, or value-table
/// indices) to float bits.
fn finish<W: Word>(
    out: &mut [W],
    h: &LosslessHeader,
    adjust: Option<&[u32]>,
    parallel: bool,
) -> Result<()> {
    const BLOCK: usize = 1 << 16;
    let width = h.dtype.bits();
    if !h.table.is_empty() {
        let t = &h.table[..];
        let bad = if parallel {
            out.par_chunks_mut(BLOCK)
                .map(|c| from_table(c, t))
                .reduce(|| false, |x, y| x | y)
        } else {
            from_table(out, t)
        };
        if bad {
            return Err(FormatError::InvalidHeader {
                field: "value-table index",
                offset: 0,
                value: t.len() as u64,
                reason: "an index past the value table",
            }
            .into());
        }
        return Ok(());
    }
    let Some(base) = h.mult_base else {
        if parallel {
            out.par_chunks_mut(BLOCK).for_each(|c| unorder(c, width));
        } else {
            unorder(out, width);
        }
        return Ok(());
    };
    // Float-mult is float32 only (checked by the header parser), so the words are u32.
    let out: &mut [u32] = bytemuck::cast_slice_mut(out);
    let bad = match (adjust, parallel) {
        (Some(a), true) => out
            .par_chunks_mut(BLOCK)
            .zip(a.par_chunks(BLOCK))
            .map(|(c, a)| float_mult(c, Some(a), base))
            .reduce(|| false, |x, y| x | y),
        (None, true) => out
            .par_chunks_mut(BLOCK)
            .map(|c| float_mult(c, None, base))
            .reduce(|| false, |x, y| x | y),
        (a, false) => float_mult(out, a, base),
    };
    if bad {
        return Err(FormatError::InvalidHeader {
            field: "float-mult multiplier",
            offset: 0,
            value: 0,
            reason: "|k| must be below 2^24 and f32(k) x base not subnormal",
        }
        .into());
    }
    Ok(())
}

/// Value-table indices to the table's bit patterns, in place; true when an index is past
/// the table (that value is left as it was).
fn from_table<W: Word>(out: &mut [W], table: &[u32]) -> bool {
    let mut bad = false;
    for v in out.iter_mut() {
        match table.get(v.to_u32() as usize) {
            Some(&t) => *v = W::from_u32(t),
            None => bad = true,
        }
    }
    bad
}

avx2_dispatch! {
    /// Ordered bits of `width` bits to float bits, in place.
    fn unorder<W: Word>(out: &mut [W], width: u32) -> () => unorder_body;
}

#[inline(always)]
fn unorder_body<W: Word>(out: &mut [W], width: u32, _avx2: Option<Avx2>) {
    let sign = 1u32 << (width - 1);
    for v in out.iter_mut() {
        let x = v.to_u32();
        let m = (x >> (width - 1)) & 1;
        *v = W::from_u32(x ^ (m.wrapping_sub(1) | sign));
    }
}

avx2_dispatch! {
    /// Float-mult to float bits in place: `x` holds `k + 2^31`, `adjust` the zigzagged
    /// adjustments (none: all 0). True when a multiplier or product is invalid.
    fn float_mult(out: &mut [u32], adjust: Option<&[u32]>, base: f32) -> bool => float_mult_body;
}

#[inline(always)]
fn float_mult_body(
    out: &mut [u32],
    adjust: Option<&[u32]>,
    base: f32,
    _avx2: Option<Avx2>,
) -> bool {
    #[inline(always)]
    fn one(v: &mut u32, adj: u32, base: f32) -> bool {
        let k = (*v ^ 0x8000_0000) as i32;
        let bad_k = k.wrapping_add(MULT_K_LIMIT - 1) as u32 >= (2 * MULT_K_LIMIT - 1) as u32;
        let p = (k as f32 * base).to_bits();
        let sub = p & 0x7f80_0000 == 0 && p & 0x007f_ffff != 0;
        // The order map and its inverse, branch-free.
        let o = p ^ ((((p >> 31) ^ 1).wrapping_sub(1)) | 0x8000_0000);
        let o = o.wrapping_add(adj);
        *v = o ^ ((o >> 31).wrapping_sub(1) | 0x8000_0000);
        bad_k | sub
    }
    let mut bad = false;
    match adjust {
        Some(a) => {
            for (v, &z) in out.iter_mut().zip(a) {
                bad |= one(v, (z >> 1) ^ 0u32.wrapping_sub(z & 1), base);
            }
        }
        None => {
            for v in out.iter_mut() {
                bad |= one(v, 0, base);
            }
        }
    }
    bad
}

#[cfg(test)]
#[path = "decode_paths.rs"]
mod paths;
