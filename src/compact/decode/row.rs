//! The compact decoder's row loop: the residuals of one row of every channel at once, from
//! per-channel bit positions ([`RowState`]), by whole positions (a pair of samples, or a run
//! token with its raw bits) from the position tables, with bit buffers where most positions
//! are whole, or symbol by symbol for patches with run tokens; two rows together where that
//! helps ([`decode_row_and_next`]). Unchecked reads, made safe by [`check_row_start`].

use super::super::header::{CompactError, PatchHeader};
use super::super::huffman::{
    pack_pair, END_OF_ROW_STEP, LUT_PAIR, LUT_RUN, LUT_SIZE, NOT_WHOLE, POSITION_BITS,
    POSITION_SIZE,
};
use super::super::scratch::{Pairs, Tables, ROW};
use crate::codec::bits::{window_unchecked, WINDOW_BYTES};
use crate::format::compact::unzigzag;

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
pub(super) const ROW_READ_BYTES: usize =
    ((ROW / 2 + 1) * MAX_POSITION_BITS).div_ceil(8) + WINDOW_BYTES;

/// The `C` channels' state while a row decodes: per channel only the bit position and the
/// bit buffer; the tables and the output rows are arrays reached from one pointer each. The
/// row's residuals are decoded first and the prediction undone in a second pass
/// ([`undo_prediction`](super::super::predict::undo_prediction)): with the running sums and
/// the rows above in the decode loop too, the state of three or four channels did not fit the
/// registers, and the spilled running sums put a store and a reload on every position's
/// dependency chain.
pub(super) struct RowState<'a, const C: usize> {
    pub(super) tables: &'a [Tables; C],
    /// The row's residuals, unzigzagged (mod 2^16).
    pub(super) residuals: &'a mut [Pairs; C],
    /// Bit position in the stream.
    pub(super) pos: [u64; C],
    /// The stream's next bits from `pos` (see [`RowState::refill`]): the whole-position
    /// lookups read them here, so a position's chain of dependent work is one table load and
    /// a shift, not a load of the stream too.
    pub(super) buf: [u64; C],
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
pub(super) const BUFFERED_SHARE_MIN: u32 = POSITION_SIZE as u32 / 2;

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
pub(super) unsafe fn decode_row<const C: usize>(
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
pub(super) unsafe fn decode_row_runs<const C: usize>(
    bytes: &[u8],
    ch: &mut RowState<C>,
    pw: usize,
) -> u32 {
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
pub(super) unsafe fn decode_row_runs_and_next<const C: usize>(
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
pub(super) unsafe fn decode_row_and_next<const C: usize>(
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

/// As [`decode_row_and_next`] for one channel and four rows (four segments, so four
/// independent bit positions) in the same loop: a gray image's single chain per row leaves
/// the CPU waiting on each lookup, and two rows did not hide all of it. (A near-copy of
/// [`decode_row`] on purpose, as [`decode_row_and_next`] is: one function generic over the
/// row count measured 2-3 % slower on gray photos; six rows were slower than four.)
///
/// # Safety
/// As [`decode_row`], for every state in `st` (each decodes one row).
#[inline(always)]
pub(super) unsafe fn decode_four_rows(
    bytes: &[u8],
    st: &mut [RowState<'_, 1>; 4],
    pw: usize,
    buffered: bool,
) -> u32 {
    // The calls below (unsafe) are these rows' positions: the contract above.
    let mut bad = 0;
    let n = (pw / 2).min(ROW / 2);
    let mut x = 0;
    if buffered {
        while x + REFILL_POSITIONS <= n {
            for s in st.iter_mut() {
                s.refill(0, bytes);
            }
            for k in 0..REFILL_POSITIONS {
                for s in st.iter_mut() {
                    s.pair_buffered(0, bytes, x + k, &mut bad);
                }
            }
            x += REFILL_POSITIONS;
        }
    }
    while x < n {
        for s in st.iter_mut() {
            s.pair(0, bytes, x, &mut bad);
        }
        x += 1;
    }
    if pw % 2 == 1 {
        for s in st.iter_mut() {
            s.last(0, bytes, pw - 1, &mut bad);
        }
    }
    bad
}

/// The check that makes a row's unchecked reads safe: every channel's bit position in
/// segment `s` leaves [`ROW_READ_BYTES`] of `len` bytes after it. A valid stream always
/// passes (positions never pass the segment's end, and the stream is padded); one that
/// fails has overrun its segment, and gets the same error as the check after each row.
#[inline(always)]
pub(super) fn check_row_start<const C: usize>(
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
