//! Compact-profile CPU decoder for one patch: parses the patch header (`header.rs`, shared
//! with `inspect`), then decodes rows top to bottom, each row's channels from their segments at
//! once (independent bit positions, so the CPU overlaps them), then undoes prediction and the
//! colour transform and interleaves into the output band.

use super::huffman::{
    self, pack_pair, END_OF_ROW_STEP, LUT_PAIR, LUT_RUN, LUT_SIZE, NOT_WHOLE, POSITION_BITS,
    POSITION_SIZE,
};

pub(crate) use super::header::{parse_patch_header, CompactError, PatchHeader};
use super::predict::{prediction_from_above, undo_prediction};
#[cfg(target_arch = "x86_64")]
use super::predict_avx2;
pub(crate) use super::scratch::Scratch;
use super::scratch::{rows_mut, tables_of, Pairs, Tables, ROW};
use crate::codec::bits::{window_unchecked, WINDOW_BYTES};
use crate::codec::simd::{avx2_dispatch, Avx2};
use crate::codec::sink::{prefetch_next_patch, BandSink};
use crate::format::compact::{alphabet_size, unzigzag, Transform, SEGMENTS_MAX};
use crate::format::FileLayout;

/// Most bits one position can take, by the table entries' field widths alone (so it holds
/// for any table): a whole position's bit count is a `u8` without the [`NOT_WHOLE`] bit (so
/// at most `!NOT_WHOLE`); a symbol's code length and raw bit count are 4-bit fields each, two
/// symbols per position.
const MAX_POSITION_BITS: usize = {
    let whole = (!NOT_WHOLE) as usize;
    let symbols = 2 * (15 + 15);
    if whole > symbols {
        whole
    } else {
        symbols
    }
};

/// Bytes past a row's starting bit position (per channel) that its decode may read: a row
/// has at most `ROW / 2` positions and an odd last sample, then one [`WINDOW_BYTES`] load.
/// The decoder checks every channel's position against this before each row
/// ([`check_row_start`]), which is what makes the row's unchecked reads safe.
const ROW_READ_BYTES: usize = ((ROW / 2 + 1) * MAX_POSITION_BITS).div_ceil(8) + WINDOW_BYTES;

/// The `C` channels' state while a row decodes: per channel only the bit position and the
/// bit buffer; the tables and the output rows are arrays reached from one pointer each. The
/// row's residuals are decoded first and the prediction undone in a second pass
/// ([`undo_prediction`]): with the running sums and the rows above in the decode loop too,
/// the state of three or four channels did not fit the registers, and the spilled running
/// sums put a store and a reload on every position's dependency chain.
struct RowState<'a, const C: usize> {
    tables: &'a [Tables; C],
    /// The row's residuals, unzigzagged (mod 2^16).
    residuals: &'a mut [Pairs; C],
    /// Bit position in the stream.
    pos: [u64; C],
    /// The stream's next bits from `pos` (see [`RowState::refill`]): the whole-position
    /// lookups read them here, so a position's chain of dependent work is one table load and
    /// a shift, not a load of the stream too.
    buf: [u64; C],
}

impl<const C: usize> RowState<'_, C> {
    /// Decodes channel `c`'s position `x` (< ROW / 2: samples 2x and 2x + 1): both symbols
    /// come from one 57-bit window (a position takes at most 2 x 25 bits). `bad` collects
    /// misplaced pair tokens (one accumulator for all channels: fewer registers in the loop).
    ///
    /// # Safety
    /// This is one of a row's positions (or its odd last sample) of channel `c`, whose bit
    /// position passed [`check_row_start`] against `bytes` when the row began.
    #[inline(always)]
    unsafe fn pair(&mut self, c: usize, bytes: &[u8], x: usize, bad: &mut u32) {
        // SAFETY: the contract above; ROW_READ_BYTES covers the row's positions.
        let bits = unsafe { window_unchecked(bytes, self.pos[c]) };
        let i = bits as usize & (POSITION_SIZE - 1);
        let whole = self.tables[c].positions.bits[i];
        let (pair, adv) = if whole & NOT_WHOLE == 0 {
            (self.tables[c].positions.pairs[i], whole as u32)
        } else {
            let (r0, r1, adv) = symbols(&self.tables[c], bits, bad);
            (pack_pair(r0, r1), adv)
        };
        self.pos[c] += adv as u64;
        self.residuals[c][x] = pair;
    }

    /// Loads channel `c`'s bit buffer from its position: at least 57 valid bits (a 64-bit
    /// load shifted by at most 7), which [`REFILL_POSITIONS`] whole positions of at most
    /// `POSITION_BITS` bits each leave enough of for the next lookup.
    ///
    /// # Safety
    /// As [`RowState::pair`].
    #[inline(always)]
    unsafe fn refill(&mut self, c: usize, bytes: &[u8]) {
        // SAFETY: as in `pair`.
        self.buf[c] = unsafe { window_unchecked(bytes, self.pos[c]) };
    }

    /// As [`RowState::pair`], from the bit buffer, which must have been refilled at most
    /// [`REFILL_POSITIONS`] positions ago; a position that is not whole reads the stream
    /// itself and refills the buffer.
    ///
    /// # Safety
    /// As [`RowState::pair`].
    #[inline(always)]
    unsafe fn pair_buffered(&mut self, c: usize, bytes: &[u8], x: usize, bad: &mut u32) {
        let bits = self.buf[c];
        let i = bits as usize & (POSITION_SIZE - 1);
        let whole = self.tables[c].positions.bits[i];
        if whole & NOT_WHOLE == 0 {
            self.buf[c] = bits >> whole;
            self.pos[c] += whole as u64;
            self.residuals[c][x] = self.tables[c].positions.pairs[i];
        } else {
            // SAFETY: as in `pair`.
            let (pair, pos, buf) =
                unsafe { slow_position(&self.tables[c], bytes, self.pos[c], bad) };
            self.pos[c] = pos;
            self.buf[c] = buf;
            self.residuals[c][x] = pair;
        }
    }

    /// Decodes channel `c`'s last sample of an odd row: a single token only.
    ///
    /// # Safety
    /// As [`RowState::pair`].
    #[inline(always)]
    unsafe fn last(&mut self, c: usize, bytes: &[u8], x: usize, bad: &mut u32) {
        // SAFETY: as in `pair`.
        let bits = unsafe { window_unchecked(bytes, self.pos[c]) };
        let e0 = self.tables[c].symbols[bits as usize & (LUT_SIZE - 1)];
        let (len0, nraw0) = (e0 & 15, (e0 >> 4) & 15);
        let v0 = (e0 >> 16) + (((bits >> len0) as u32) & ((1u32 << nraw0) - 1));
        *bad |= e0 & LUT_PAIR;
        self.pos[c] += (len0 + nraw0) as u64;
        self.set(c, x, unzigzag(v0) as u16);
    }

    /// Channel `c`'s residual `x` alone (the odd last sample of a row).
    #[inline(always)]
    fn set(&mut self, c: usize, x: usize, r: u16) {
        bytemuck::cast_slice_mut::<u32, u16>(&mut self.residuals[c][..])[x] = r;
    }

    /// As [`RowState::pair_buffered`] for a code with run tokens, from channel `c`'s own
    /// cursor `x`;
    /// returns the positions the token covers: 1, a run's length (its residuals are the
    /// row's zeros: [`decode_row_runs`] clears the row first), or [`END_OF_ROW_STEP`]. A run
    /// token with its raw bits is a whole position too (see `huffman::fill_position_lut`),
    /// so most runs take the same path as the positions around them.
    ///
    /// # Safety
    /// As [`RowState::pair`].
    #[inline(always)]
    unsafe fn pair_or_run(&mut self, c: usize, bytes: &[u8], x: usize, bad: &mut u32) -> usize {
        let tables = &self.tables[c];
        let bits = self.buf[c];
        let i = bits as usize & (POSITION_SIZE - 1);
        let whole = tables.positions.bits[i];
        if whole & NOT_WHOLE == 0 {
            self.buf[c] = bits >> whole;
            self.pos[c] += whole as u64;
            self.residuals[c][x] = tables.positions.pairs[i];
            return tables.positions.steps[i] as usize;
        }
        // SAFETY: as in `pair`.
        let bits = unsafe { window_unchecked(bytes, self.pos[c]) };
        let e0 = tables.symbols[bits as usize & (LUT_SIZE - 1)];
        let step = if e0 & LUT_RUN != 0 {
            let (len0, nraw0) = (e0 & 15, (e0 >> 4) & 15);
            self.pos[c] += (len0 + nraw0) as u64;
            // Base 0: the end-of-row token.
            if e0 >> 16 == 0 {
                END_OF_ROW_STEP as usize
            } else {
                ((e0 >> 16) + (((bits >> len0) as u32) & ((1u32 << nraw0) - 1))) as usize
            }
        } else {
            let (r0, r1, adv) = symbols(tables, bits, bad);
            self.pos[c] += adv as u64;
            self.residuals[c][x] = pack_pair(r0, r1);
            1
        };
        // SAFETY: as in `pair` (ROW_READ_BYTES covers the window after every position).
        unsafe { self.refill(c, bytes) };
        step
    }

    /// As [`RowState::last`] for a code with run tokens: the odd last sample is a single
    /// token, or the end-of-row token (runs are 2 positions or more, so no other run fits).
    ///
    /// # Safety
    /// As [`RowState::pair`].
    #[inline(always)]
    unsafe fn last_or_run(&mut self, c: usize, bytes: &[u8], x: usize, bad: &mut u32) {
        // SAFETY: as in `pair`.
        let bits = unsafe { window_unchecked(bytes, self.pos[c]) };
        let e0 = self.tables[c].symbols[bits as usize & (LUT_SIZE - 1)];
        let (len0, nraw0) = (e0 & 15, (e0 >> 4) & 15);
        if e0 & LUT_RUN != 0 {
            if e0 >> 16 != 0 {
                *bad |= LUT_RUN;
            }
            self.pos[c] += (len0 + nraw0) as u64;
            self.set(c, x, 0);
            return;
        }
        // SAFETY: the same position, not yet advanced.
        unsafe { self.last(c, bytes, x, bad) };
    }
}

/// Whole positions between bit-buffer refills: at most 5 (5 x 10 bits of the 57 a refill
/// gives leave 7, fewer than a lookup takes); 4 divides the usual 32 positions of a row.
const REFILL_POSITIONS: usize = 4;
const _: () = assert!(REFILL_POSITIONS * (POSITION_BITS as usize + 1) <= 57);

/// The least mean share of whole positions (of `POSITION_SIZE`, by the codes' own
/// statistics: `PositionTables::whole_share`) at which a patch without runs decodes from
/// bit buffers: half.
const BUFFERED_SHARE_MIN: u32 = POSITION_SIZE as u32 / 2;

/// A position that is not whole, from the stream at bit `pos`: its residuals, the position
/// after it, and the bit buffer there. Out of line: rare in most rows, and the decode loop
/// inlines several copies of its caller.
///
/// # Safety
/// `pos` is one of a row's positions whose start passed [`check_row_start`] (so this
/// position's read and the refill after it lie inside `bytes`).
#[inline(always)]
unsafe fn slow_position(tables: &Tables, bytes: &[u8], pos: u64, bad: &mut u32) -> (u32, u64, u64) {
    // SAFETY: the contract above.
    let bits = unsafe { window_unchecked(bytes, pos) };
    let (r0, r1, adv) = symbols(tables, bits, bad);
    let pos = pos + adv as u64;
    // SAFETY: the contract above: ROW_READ_BYTES covers the window after every position.
    (pack_pair(r0, r1), pos, unsafe {
        window_unchecked(bytes, pos)
    })
}

/// A position symbol by symbol: both residuals (unzigzagged, mod 2^16) and the bits taken.
#[inline(always)]
fn symbols(tables: &Tables, bits: u64, bad: &mut u32) -> (u16, u16, u32) {
    let e0 = tables.symbols[bits as usize & (LUT_SIZE - 1)];
    let (len0, nraw0) = (e0 & 15, (e0 >> 4) & 15);
    let v0 = (e0 >> 16) + (((bits >> len0) as u32) & ((1u32 << nraw0) - 1));
    let adv0 = len0 + nraw0;
    let rest = bits >> adv0;
    let e1 = tables.symbols[rest as usize & (LUT_SIZE - 1)];
    let (len1, nraw1) = (e1 & 15, (e1 >> 4) & 15);
    let v1 = (e1 >> 16) + (((rest >> len1) as u32) & ((1u32 << nraw1) - 1));
    // A branch: pair and single positions come in runs (smooth vs textured areas), so it
    // predicts well (measured faster than selecting with masks), and a pair position skips
    // the second symbol's work.
    let (z0, z1, adv) = if e0 & LUT_PAIR != 0 {
        ((e0 >> 16) & 0xff, e0 >> 24, adv0)
    } else {
        // A run token as the second symbol is misplaced too (codes with runs only).
        *bad |= e1 & (LUT_PAIR | LUT_RUN);
        (v0, v1, adv0 + len1 + nraw1)
    };
    (unzigzag(z0) as u16, unzigzag(z1) as u16, adv)
}

/// Decodes the residuals of one row of every channel (see [`RowState`]): `C` independent
/// bit positions advanced together (written out per channel, so each channel's state stays
/// in registers), so the CPU overlaps their table lookups. Returns non-zero when a pair
/// token stood where only a single token may.
///
/// # Safety
/// Every channel's position in `ch` passed [`check_row_start`] against `bytes`, and `ch`
/// decodes this one row.
#[inline(always)]
unsafe fn decode_row<const C: usize>(
    bytes: &[u8],
    ch: &mut RowState<C>,
    pw: usize,
    buffered: bool,
) -> u32 {
    // The calls below (unsafe) are this row's positions: the contract above.
    let mut bad = 0;
    let n = (pw / 2).min(ROW / 2);
    let mut x = 0;
    // Groups of REFILL_POSITIONS positions (unrolled) from the bit buffers, then the rest
    // one by one; all one by one where few positions are whole ([`BUFFERED_SHARE_MIN`]).
    if buffered {
        while x + REFILL_POSITIONS <= n {
            for c in 0..C {
                ch.refill(c, bytes);
            }
            for k in 0..REFILL_POSITIONS {
                ch.pair_buffered(0, bytes, x + k, &mut bad);
                if C > 1 {
                    ch.pair_buffered(1, bytes, x + k, &mut bad);
                }
                if C > 2 {
                    ch.pair_buffered(2, bytes, x + k, &mut bad);
                }
                if C > 3 {
                    ch.pair_buffered(3, bytes, x + k, &mut bad);
                }
            }
            x += REFILL_POSITIONS;
        }
    }
    while x < n {
        ch.pair(0, bytes, x, &mut bad);
        if C > 1 {
            ch.pair(1, bytes, x, &mut bad);
        }
        if C > 2 {
            ch.pair(2, bytes, x, &mut bad);
        }
        if C > 3 {
            ch.pair(3, bytes, x, &mut bad);
        }
        x += 1;
    }
    if pw % 2 == 1 {
        for c in 0..C {
            ch.last(c, bytes, pw - 1, &mut bad);
        }
    }
    bad
}

/// As [`decode_row`] for a patch with run tokens in some channel's code (the others decode
/// the same way: their codes have no run tokens, so they never start a run).
///
/// # Safety
/// Every channel's position in `ch` passed [`check_row_start`] against `bytes`, and `ch`
/// decodes this one row.
#[inline(always)]
unsafe fn decode_row_runs<const C: usize>(bytes: &[u8], ch: &mut RowState<C>, pw: usize) -> u32 {
    // The calls below (unsafe) are this row's positions: the contract above.
    let mut bad = 0;
    let positions = pw.div_ceil(2);
    let end = (pw / 2).min(ROW / 2);
    // Each channel has its own cursor: a run moves it past the run's positions at once, so
    // positions inside runs cost nothing, and no test per position and channel asks whether
    // a run goes on (a branch the CPU mispredicted at every run's end). The channels still
    // take one token each per step, so their table lookups overlap. Runs leave the row's
    // zeros in place.
    for row in ch.residuals.iter_mut() {
        row.fill(0);
    }
    let mut x = [0usize; C];
    while x.iter().any(|&x| x < end) {
        // A channel takes at most REFILL_POSITIONS tokens between refills (one per step).
        for c in 0..C {
            ch.refill(c, bytes);
        }
        for _ in 0..REFILL_POSITIONS {
            if x[0] < end {
                x[0] += ch.pair_or_run(0, bytes, x[0], &mut bad);
            }
            if C > 1 && x[1] < end {
                x[1] += ch.pair_or_run(1, bytes, x[1], &mut bad);
            }
            if C > 2 && x[2] < end {
                x[2] += ch.pair_or_run(2, bytes, x[2], &mut bad);
            }
            if C > 3 && x[3] < end {
                x[3] += ch.pair_or_run(3, bytes, x[3], &mut bad);
            }
        }
    }
    for (c, &x) in x.iter().enumerate() {
        row_end_or_run(ch, c, x, (end, positions), bytes, pw, &mut bad);
    }
    bad
}

/// As [`decode_row_runs`], and the residuals of the next row (another segment, so an
/// independent bit position per channel) in the same loop: twice the independent lookup
/// chains, for images of one or two channels, whose single chain per row otherwise leaves
/// the CPU waiting on each lookup.
///
/// # Safety
/// As [`decode_row_runs`], for both `ch` and `next`.
#[inline(always)]
unsafe fn decode_row_runs_and_next<const C: usize>(
    bytes: &[u8],
    ch: &mut RowState<C>,
    next: &mut RowState<C>,
    pw: usize,
) -> u32 {
    // The calls below (unsafe) are these two rows' positions: the contract above.
    debug_assert!(C <= 2, "the loop below steps channels 0 and 1");
    let mut bad = 0;
    let positions = pw.div_ceil(2);
    let end = (pw / 2).min(ROW / 2);
    for row in ch.residuals.iter_mut().chain(next.residuals.iter_mut()) {
        row.fill(0);
    }
    let (mut x, mut xn) = ([0usize; C], [0usize; C]);
    while x.iter().chain(&xn).any(|&x| x < end) {
        for c in 0..C {
            ch.refill(c, bytes);
            next.refill(c, bytes);
        }
        for _ in 0..REFILL_POSITIONS {
            if x[0] < end {
                x[0] += ch.pair_or_run(0, bytes, x[0], &mut bad);
            }
            if xn[0] < end {
                xn[0] += next.pair_or_run(0, bytes, xn[0], &mut bad);
            }
            if C > 1 && x[1] < end {
                x[1] += ch.pair_or_run(1, bytes, x[1], &mut bad);
            }
            if C > 1 && xn[1] < end {
                xn[1] += next.pair_or_run(1, bytes, xn[1], &mut bad);
            }
        }
    }
    for c in 0..C {
        row_end_or_run(ch, c, x[c], (end, positions), bytes, pw, &mut bad);
        row_end_or_run(next, c, xn[c], (end, positions), bytes, pw, &mut bad);
    }
    bad
}

/// The end of channel `c`'s row in [`decode_row_runs`] and [`decode_row_runs_and_next`]
/// (its cursor at `x`): the odd last sample, or a check that no run went past the row's end
/// (the end-of-row token goes past on purpose).
///
/// # Safety
/// As [`RowState::last_or_run`].
#[inline(always)]
unsafe fn row_end_or_run<const C: usize>(
    state: &mut RowState<C>,
    c: usize,
    x: usize,
    (end, positions): (usize, usize),
    bytes: &[u8],
    pw: usize,
    bad: &mut u32,
) {
    if x == end && pw % 2 == 1 {
        // SAFETY: the contract above.
        unsafe { state.last_or_run(c, bytes, pw - 1, bad) };
    } else if x != positions && x < END_OF_ROW_STEP as usize {
        *bad |= LUT_RUN;
    }
}

/// As [`decode_row`], and the residuals of the next row (another segment, so an independent
/// bit position per channel) in the same loop: twice the independent table-lookup chains.
/// (A near-copy on purpose: one function generic over the row count measured 4-5 % slower
/// on RGB photos.)
///
/// # Safety
/// As [`decode_row`], for both `ch` and `next`.
#[inline(always)]
unsafe fn decode_row_and_next<const C: usize>(
    bytes: &[u8],
    ch: &mut RowState<C>,
    next: &mut RowState<C>,
    pw: usize,
    buffered: bool,
) -> u32 {
    // The calls below (unsafe) are this row's positions: the contract above.
    let mut bad = 0;
    let n = (pw / 2).min(ROW / 2);
    let mut x = 0;
    // As in decode_row: groups of REFILL_POSITIONS from the bit buffers, then the rest.
    if buffered {
        while x + REFILL_POSITIONS <= n {
            for c in 0..C {
                ch.refill(c, bytes);
                next.refill(c, bytes);
            }
            for k in 0..REFILL_POSITIONS {
                for c in 0..C {
                    ch.pair_buffered(c, bytes, x + k, &mut bad);
                    next.pair_buffered(c, bytes, x + k, &mut bad);
                }
            }
            x += REFILL_POSITIONS;
        }
    }
    while x < n {
        for c in 0..C {
            ch.pair(c, bytes, x, &mut bad);
            next.pair(c, bytes, x, &mut bad);
        }
        x += 1;
    }
    if pw % 2 == 1 {
        for c in 0..C {
            ch.last(c, bytes, pw - 1, &mut bad);
            next.last(c, bytes, pw - 1, &mut bad);
        }
    }
    bad
}

/// The check that makes a row's unchecked reads safe: every channel's bit position in
/// segment `s` leaves [`ROW_READ_BYTES`] of `len` bytes after it. A valid stream always
/// passes (positions never pass the segment's end, and the stream is padded); one that
/// fails has overrun its segment, and gets the same error as the check after each row.
#[inline(always)]
fn check_row_start<const C: usize>(
    pos: &[u64; C],
    s: usize,
    header: &PatchHeader,
    len: usize,
) -> Result<(), CompactError> {
    // Every one of the `C` positions, indexed (not zipped with the channel list, which
    // would skip positions if the list were shorter).
    for (c, &p) in pos.iter().enumerate() {
        if (p >> 3) as usize + ROW_READ_BYTES > len {
            return Err(header.channels[c].segment_error(c, s, p));
        }
    }
    Ok(())
}

/// Decodes the patches of band `band` (one patch row) of a validated layout whose patch
/// columns are in `columns` into `sink` (patches are independent: the others are skipped).
pub(crate) fn decode_band<S: BandSink>(
    layout: &FileLayout,
    band: usize,
    columns: std::ops::Range<usize>,
    sink: &mut S,
) -> crate::error::Result<()> {
    let h = &layout.header;
    let first = band * h.patches_x() as usize;
    let columns =
        columns.start.min(h.patches_x() as usize)..columns.end.min(h.patches_x() as usize);
    let end = first + columns.end;
    Scratch::with(h, |scratch| {
        for patch in first + columns.start..end {
            prefetch_next_patch(sink, h, patch, end);
            decode_patch(layout, patch, sink, scratch)?;
        }
        Ok(())
    })
}

avx2_dispatch! {
    /// Decodes one patch into its band's sink; with AVX2 code generation where the CPU has
    /// it.
    pub(crate) fn decode_patch<S: BandSink>(
        layout: &FileLayout,
        patch: usize,
        sink: &mut S,
        scratch: &mut Scratch,
    ) -> crate::error::Result<()> => decode_patch_portable;
}

#[inline(always)]
pub(crate) fn decode_patch_portable<S: BandSink>(
    layout: &FileLayout,
    patch: usize,
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
    let rect = (x0, pw, ph);
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

/// Decodes the `C` coded planes of a patch row by row into `sink` as `OUT` channels: the
/// channels themselves (`C == OUT`), or with a palette one index plane (`C == 1`) looked up
/// in `scratch.palette`.
#[inline(always)]
fn decode_patch_rows<const C: usize, const OUT: usize, S: BandSink>(
    layout: &FileLayout,
    patch: usize,
    header: &PatchHeader,
    sink: &mut S,
    scratch: &mut Scratch,
    (x0, pw, ph): (u32, u32, u32),
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
    let ph = ph as usize;
    // Some channel has run tokens: every channel decodes symbol by symbol (a patch is flat
    // in all its channels or in none, mostly; one path keeps the loop simple).
    let runs = header.channels.iter().any(|c| c.runs);
    // The bit buffers pay where most positions are whole; where most are not (16-bit
    // samples with raw bits), each such position refills its buffer for nothing.
    let whole_share: u32 = (0..C)
        .map(|c| scratch.tables[c].positions.whole_share)
        .sum();
    let buffered = whole_share >= BUFFERED_SHARE_MIN * C as u32;
    // Whether `scratch.pending` holds the residuals of row y (decoded with row y - 1).
    let mut pending = false;
    for y in 0..ph {
        let s = y % segs;
        for c in 0..C {
            let range = c * stride..c * stride + pw;
            prediction_from_above(
                header.channels[c].predictor,
                &scratch.previous[range.clone()],
                &mut scratch.above[range],
            );
        }
        // Decode this row with the next one's residuals (two rows of independent work) when
        // the next row exists and is in another segment; for 1 and 2 channels only: with
        // 3 or 4, the channels already give the CPU enough independent chains, and twice as
        // many measured slower (gray 16-bit: +23 %; RGB photos: -14 %).
        let with_next = C <= 2 && !pending && y + 1 < ph && segs > 1;
        let bad = if pending {
            // The residuals are there (decoded with the row above).
            std::mem::swap(&mut scratch.residuals, &mut scratch.pending);
            0
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
        let checked = if with_next {
            [s, (y + 1) % segs]
        } else {
            [s, s]
        };
        for s in checked {
            for (c, (&p, ch)) in pos[s].iter().zip(&header.channels).enumerate() {
                if p > ch.segment_start[s + 1] {
                    return Err(ch.segment_error(c, s, p));
                }
            }
        }
        pending = with_next;
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
    for (s, p) in pos.iter().enumerate().take(segs) {
        for (c, (&p, ch)) in p.iter().zip(&header.channels).enumerate() {
            if p != ch.segment_start[s + 1] {
                return Err(ch.segment_error(c, s, p));
            }
        }
    }
    Ok(())
}
