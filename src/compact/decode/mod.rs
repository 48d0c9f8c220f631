//! Compact-profile CPU decoder for one patch: parses the patch header (`header.rs`, shared
//! with `inspect`), then decodes rows top to bottom, each row's channels from their segments at
//! once (independent bit positions, so the CPU overlaps them: `row.rs`), then undoes prediction
//! and the colour transform and interleaves into the output band (this file).

mod row;

use super::huffman::{self, LUT_RUN};
use row::{
    check_row_start, decode_four_rows, decode_row, decode_row_and_next, decode_row_runs,
    decode_row_runs_and_next, RowState, BUFFERED_SHARE_MIN, ROW_READ_BYTES,
};

pub(crate) use super::header::{parse_patch_header, CompactError, PatchHeader};
use super::predict::{prediction_from_above, undo_prediction};
#[cfg(target_arch = "x86_64")]
use super::predict_avx2;
pub(crate) use super::scratch::Scratch;
use super::scratch::{rows_mut, tables_of, ROW};
use crate::codec::simd::{avx2_dispatch, Avx2};
use crate::codec::sink::{prefetch_band_start, BandSink};
use crate::format::compact::{alphabet_size, Transform, SEGMENTS_MAX};
use crate::format::FileLayout;

/// Decodes the patches of band `band` (one patch row) of a validated layout whose patch
/// columns are in `columns` into `sink` (patches are independent: the others are skipped),
/// each patch's first `rows` rows (all where the patch has no more; see [`decode_patch`]).
pub(crate) fn decode_band<S: BandSink>(
    layout: &FileLayout,
    band: usize,
    columns: std::ops::Range<usize>,
    rows: u32,
    sink: &mut S,
) -> crate::error::Result<()> {
    let h = &layout.header;
    let first = band * h.patches_x() as usize;
    let columns =
        columns.start.min(h.patches_x() as usize)..columns.end.min(h.patches_x() as usize);
    let end = first + columns.end;
    Scratch::with(h, |scratch| {
        prefetch_band_start(sink, h, first + columns.start, end);
        for patch in first + columns.start..end {
            decode_patch(layout, patch, rows, sink, scratch)?;
        }
        Ok(())
    })
}

avx2_dispatch! {
    /// Decodes one patch into its band's sink: its first `rows` rows (rows are predicted
    /// from the row above, so a window's rows need those above it, never those below; where
    /// fewer than all are decoded, the segments' ends are not checked). With AVX2 code
    /// generation where the CPU has it.
    pub(crate) fn decode_patch<S: BandSink>(
        layout: &FileLayout,
        patch: usize,
        rows: u32,
        sink: &mut S,
        scratch: &mut Scratch,
    ) -> crate::error::Result<()> => decode_patch_portable;
}

#[inline(always)]
pub(crate) fn decode_patch_portable<S: BandSink>(
    layout: &FileLayout,
    patch: usize,
    rows: u32,
    sink: &mut S,
    scratch: &mut Scratch,
    avx2: Option<Avx2>,
) -> crate::error::Result<()> {
    let h = &layout.header;
    let (x0, _, pw, ph) = h.patch_rect(patch as u64);
    let start = layout.offsets[patch];
    let size = layout.stream_size(patch);
    let fail = |e: CompactError| e.at(h, patch as u64, start, size);
    let stream = layout.stream(patch);
    let header = parse_patch_header(h, stream, ph).map_err(fail)?;
    let rect = (x0, pw, ph, ph.min(rows));
    let palette = header.palette > 0;
    if palette {
        let (start, count) = (header.palette_start, header.palette);
        scratch.palette.read(h, stream, start, count);
    }
    // Coded planes x output channels: a palette patch codes one plane.
    match (palette, h.channels()) {
        (_, 1) => decode_patch_rows::<1, 1, S>(layout, patch, &header, sink, scratch, rect, avx2),
        (true, 2) => {
            decode_patch_rows::<1, 2, S>(layout, patch, &header, sink, scratch, rect, avx2)
        }
        (true, 3) => {
            decode_patch_rows::<1, 3, S>(layout, patch, &header, sink, scratch, rect, avx2)
        }
        (true, _) => {
            decode_patch_rows::<1, 4, S>(layout, patch, &header, sink, scratch, rect, avx2)
        }
        (false, 2) => {
            decode_patch_rows::<2, 2, S>(layout, patch, &header, sink, scratch, rect, avx2)
        }
        (false, 3) => {
            decode_patch_rows::<3, 3, S>(layout, patch, &header, sink, scratch, rect, avx2)
        }
        (false, _) => {
            decode_patch_rows::<4, 4, S>(layout, patch, &header, sink, scratch, rect, avx2)
        }
    }
    .map_err(|e| fail(e).into())
}

/// Decodes the `C` coded planes of a patch (`ph` rows) row by row into `sink` as `OUT`
/// channels, its first `rows` rows: the channels themselves (`C == OUT`), or with a palette
/// one index plane (`C == 1`) looked up in `scratch.palette`.
#[inline(always)]
fn decode_patch_rows<const C: usize, const OUT: usize, S: BandSink>(
    layout: &FileLayout,
    patch: usize,
    header: &PatchHeader,
    sink: &mut S,
    scratch: &mut Scratch,
    (x0, pw, ph, rows): (u32, u32, u32, u32),
    avx2: Option<Avx2>,
) -> Result<(), CompactError> {
    let h = &layout.header;
    let (x0, pw) = (x0 as usize, pw as usize);
    let stride = ROW;
    #[cfg(not(target_arch = "x86_64"))]
    let _ = avx2;
    let mask = ((1u32 << h.depth) - 1) as u16;
    let depth = h.depth;
    for (ch, tables) in header.channels.iter().zip(scratch.tables.iter_mut()) {
        // Valid codes have a non-zero length, so all-zero `tables.lengths` never matches.
        if tables.lengths == ch.lengths {
            continue;
        }
        tables.lengths = ch.lengths;
        let lengths = &ch.lengths[..alphabet_size(depth) as usize];
        let code = huffman::Canonical::new(lengths);
        huffman::fill_lut(&code, depth, &mut tables.symbols);
        huffman::fill_position_lut(&code, depth, &mut tables.positions);
    }
    // Positions are relative to the stream start; reads may look past the stream into the
    // rest of the file (only bits inside a segment are used once the segment lengths check
    // out). The decode loop reads without bounds checks, which needs ROW_READ_BYTES bytes
    // after the stream: a stream that ends closer to the end of the file (the last one) is
    // copied and padded with zeros, which is what reads past the file's end saw before.
    let rest = &layout.data[layout.offsets[patch] as usize..];
    let padded: Vec<u8>;
    let bytes = if rest.len() >= layout.stream_size(patch) as usize + ROW_READ_BYTES {
        rest
    } else {
        padded = [rest, &[0; ROW_READ_BYTES]].concat();
        &padded[..]
    };
    let segs = header.segments as usize;
    let mut pos = [[0u64; C]; SEGMENTS_MAX as usize];
    for (s, p) in pos.iter_mut().enumerate().take(segs) {
        for (p, ch) in p.iter_mut().zip(&header.channels) {
            *p = ch.segment_start[s];
        }
    }
    scratch.previous.fill(0);
    let left_type: [bool; C] = std::array::from_fn(|c| header.channels[c].predictor.is_left_type());
    let (ph, rows) = (ph as usize, rows as usize);
    // Some channel has run tokens: every channel decodes symbol by symbol (a patch is flat
    // in all its channels or in none, mostly; one path keeps the loop simple).
    let runs = header.channels.iter().any(|c| c.runs);
    // The bit buffers pay where most positions are whole; where most are not (16-bit
    // samples with raw bits), each such position refills its buffer for nothing.
    let whole_share: u32 = (0..C)
        .map(|c| scratch.tables[c].positions.whole_share)
        .sum();
    let buffered = whole_share >= BUFFERED_SHARE_MIN * C as u32;
    // Rows decoded ahead: one row of every channel in `scratch.pending` (decoded with the
    // row above), or, four rows at a time, up to three rows of one channel in
    // `scratch.ahead` (the next in `ahead[3 - ahead]`).
    let mut ahead = 0usize;
    let mut four_ahead = false;
    let four = C == 1 && !runs && segs >= 4;
    for y in 0..rows {
        let s = y % segs;
        if C < 3 {
            above_row::<C>(header, scratch, pw);
        }
        // Decode this row with the next one's residuals (two rows of independent work) when
        // the next row exists and is in another segment; for 1 and 2 channels only: with
        // 3 or 4, the channels already give the CPU enough independent chains, and twice as
        // many measured slower (gray 16-bit: +23 %; RGB photos: -14 %). One channel without
        // run tokens decodes four rows together where four remain in four segments (Kodak
        // gray photos +10 % on an Intel Xeon, one thread; 16-bit gray +22 %).
        let with_four = four && ahead == 0 && y + 3 < rows;
        let with_next = C <= 2 && ahead == 0 && !with_four && y + 1 < rows && segs > 1;
        let bad = if ahead > 0 {
            // The residuals are there (decoded with a row above).
            if four_ahead {
                scratch.residuals[0] = scratch.ahead[3 - ahead];
            } else {
                std::mem::swap(&mut scratch.residuals, &mut scratch.pending);
            }
            ahead -= 1;
            0
        } else if with_four {
            let segments: [usize; 4] = std::array::from_fn(|k| (y + k) % segs);
            for &s in &segments {
                check_row_start(&pos[s], s, header, bytes.len())?;
            }
            let tables = tables_of::<1>(&scratch.tables);
            let [a0, a1, a2] = &mut *scratch.ahead;
            let rows4 = [&mut scratch.residuals[0], a0, a1, a2];
            let mut k = 0;
            let mut st = rows4.map(|row| {
                let state = RowState::<1> {
                    tables,
                    residuals: std::array::from_mut(row),
                    pos: [pos[segments[k]][0]],
                    buf: [0],
                };
                k += 1;
                state
            });
            // SAFETY: every state's position passed check_row_start; one row each.
            let bad = unsafe { decode_four_rows(bytes, &mut st, pw, buffered) };
            for (k, &s) in segments.iter().enumerate() {
                pos[s][0] = st[k].pos[0];
            }
            bad
        } else {
            check_row_start(&pos[s], s, header, bytes.len())?;
            let mut ch = RowState::<C> {
                tables: tables_of(&scratch.tables),
                residuals: rows_mut(&mut scratch.residuals),
                pos: pos[s],
                buf: [0; C],
            };
            let bad = if runs && !with_next {
                // SAFETY: `ch`'s positions passed check_row_start; it decodes one row.
                unsafe { decode_row_runs::<C>(bytes, &mut ch, pw) }
            } else if with_next {
                let s1 = (y + 1) % segs;
                check_row_start(&pos[s1], s1, header, bytes.len())?;
                let mut next = RowState::<C> {
                    tables: tables_of(&scratch.tables),
                    residuals: rows_mut(&mut scratch.pending),
                    pos: pos[s1],
                    buf: [0; C],
                };
                // SAFETY: both states' positions passed check_row_start; one row each.
                let bad = if runs {
                    unsafe { decode_row_runs_and_next::<C>(bytes, &mut ch, &mut next, pw) }
                } else {
                    unsafe { decode_row_and_next::<C>(bytes, &mut ch, &mut next, pw, buffered) }
                };
                pos[s1] = next.pos;
                bad
            } else {
                // SAFETY: as for decode_row_runs.
                unsafe { decode_row::<C>(bytes, &mut ch, pw, buffered) }
            };
            pos[s] = ch.pos;
            bad
        };
        if bad != 0 {
            return Err(CompactError::Field {
                channel: 0,
                field: "symbol",
                value: y as u64,
                reason: if bad & LUT_RUN != 0 {
                    "a run token past the row's end or inside a position (row given)"
                } else {
                    "a pair token where only a single-sample token may stand (row given)"
                },
            });
        }
        let checked = if with_four {
            [s, (y + 1) % segs, (y + 2) % segs, (y + 3) % segs]
        } else if with_next {
            [s, (y + 1) % segs, s, s]
        } else {
            [s; 4]
        };
        for s in checked {
            for (c, (&p, ch)) in pos[s].iter().zip(&header.channels).enumerate() {
                if p > ch.segment_start[s + 1] {
                    return Err(ch.segment_error(c, s, p));
                }
            }
        }
        if with_four {
            (ahead, four_ahead) = (3, true);
        } else if with_next {
            (ahead, four_ahead) = (1, false);
        }
        // The part of the prediction from the row above: with 3 or 4 channels after the
        // residuals (the row above was stored just before this row began, and reading it back
        // at once, shifted by a sample across its stores, waited on them: 8 % of an RGB
        // photo's decode in one profile on an AMD EPYC); with 1 or 2 before them, which
        // measured faster there (a gray disparity map 4-11 %).
        if C >= 3 {
            above_row::<C>(header, scratch, pw);
        }
        for (c, &left_type) in left_type.iter().enumerate() {
            #[cfg(target_arch = "x86_64")]
            if left_type && avx2.is_some() {
                // Whole steps of 16 past `pw` (the rows are ROW wide): the samples past `pw`
                // are never read.
                let range = c * stride..c * stride + pw.next_multiple_of(16);
                let residuals = bytemuck::cast_slice::<u32, u16>(&scratch.residuals[c][..]);
                // SAFETY: an `Avx2` exists only on a CPU with AVX2 (Avx2::detect).
                unsafe {
                    predict_avx2::undo_left_prediction(
                        &residuals[..range.len()],
                        &scratch.above[range.clone()],
                        &mut scratch.current[range],
                        mask,
                    )
                };
                continue;
            }
            let range = c * stride..c * stride + pw;
            undo_prediction(
                left_type,
                &bytemuck::cast_slice::<u32, u16>(&scratch.residuals[c][..])[..pw],
                &scratch.above[range.clone()],
                &mut scratch.current[range],
            );
        }
        // Reduce to the sample depth (the sums above ran mod 2^16; the AVX2 running sums
        // reduce as they store).
        if depth != 16 {
            for (c, &left_type) in left_type.iter().enumerate() {
                #[cfg(target_arch = "x86_64")]
                if left_type && avx2.is_some() {
                    continue;
                }
                #[cfg(not(target_arch = "x86_64"))]
                let _ = left_type;
                for v in &mut scratch.current[c * stride..c * stride + pw] {
                    *v &= mask;
                }
            }
        }
        if header.palette > 0 {
            let indices = &scratch.current[..pw];
            scratch
                .palette
                .check_row(indices)
                .map_err(|largest| CompactError::Field {
                    channel: 0,
                    field: "palette index",
                    value: largest as u64,
                    reason: "is past the patch's palette",
                })?;
            let out = &mut scratch.output;
            sink.put_palette_row::<OUT>(indices, &scratch.palette, out, stride, y, x0);
            std::mem::swap(&mut scratch.previous, &mut scratch.current);
            continue;
        }
        let rows = if header.transform == Transform::SubtractGreen {
            // Channels 0 and 2 plus green; green (and alpha) as they are, whole ROW-wide rows
            // (a fixed-size copy, not a `memcpy` call).
            let (cur, out) = (&scratch.current, &mut scratch.output);
            let green = &cur[stride..stride + pw];
            for c in 0..C {
                let (src, dst) = (
                    &cur[c * stride..(c + 1) * stride],
                    &mut out[c * stride..(c + 1) * stride],
                );
                if c == 0 || c == 2 {
                    for ((o, &v), &g) in dst[..pw].iter_mut().zip(&src[..pw]).zip(green) {
                        *o = v.wrapping_add(g) & mask;
                    }
                } else {
                    dst.copy_from_slice(src);
                }
            }
            &scratch.output
        } else {
            &scratch.current
        };
        sink.put_row::<OUT, u16>(rows, stride, 0, y, x0, pw);
        std::mem::swap(&mut scratch.previous, &mut scratch.current);
    }
    if rows < ph {
        // A window's rows: the segments' rest is not read.
        return Ok(());
    }
    for (s, p) in pos.iter().enumerate().take(segs) {
        for (c, (&p, ch)) in p.iter().zip(&header.channels).enumerate() {
            if p != ch.segment_start[s + 1] {
                return Err(ch.segment_error(c, s, p));
            }
        }
    }
    Ok(())
}

/// The part of each channel's prediction that comes from the row above (`scratch.previous`)
/// into `scratch.above` (see [`prediction_from_above`]).
#[inline(always)]
fn above_row<const C: usize>(header: &PatchHeader, scratch: &mut Scratch, pw: usize) {
    for c in 0..C {
        let range = c * ROW..c * ROW + pw;
        prediction_from_above(
            header.channels[c].predictor,
            &scratch.previous[range.clone()],
            &mut scratch.above[range],
        );
    }
}
