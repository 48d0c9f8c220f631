//! The lossless decoder's token loops: segments decoded [`LANES`] at a time in lockstep (by
//! bit position while 8-byte loads stay inside the segments), then two by two, then byte-wise
//! one by one; every lane checked to end in its segment's last byte.

use super::*;

/// Segments decoded in lockstep: independent dependency chains for the CPU to overlap.
pub(super) const LANES: usize = 4;

/// Decodes one symbol (a value or a zero run) of a segment held in local variables (so
/// that the bit buffer stays in a register), returning an error naming lane `$k` for a run
/// past the end.
macro_rules! step {
    ($k:expr, $runs:expr, $lut:expr, $seg:expr, $pos:ident, $buf:ident, $avail:ident, $out:expr, $i:ident) => {{
        if $pos + 8 <= $seg.len() {
            let w = u64::from_le_bytes($seg[$pos..$pos + 8].try_into().expect("8 bytes"));
            $buf |= w << $avail;
            $pos += ((63 - $avail) >> 3) as usize;
            $avail |= 56;
        } else {
            while $avail <= 56 {
                $buf |= (*$seg.get($pos).unwrap_or(&0) as u64) << $avail;
                $pos += 1;
                $avail += 8;
            }
        }
        let e = $lut[($buf & (LUT_SIZE as u64 - 1)) as usize];
        let cl = (e & 0xff) as u32;
        let nraw = ((e >> 8) & 0xff) as u32;
        let total = ((e >> 24) & 0xff) as u32;
        let v = (e >> 32) as u32 + (($buf >> cl) as u32 & ((1u32 << nraw) - 1));
        $buf >>= total;
        $avail -= total;
        if $runs && e & ENTRY_RUN != 0 {
            let v = v as usize;
            if v > $out.len() - $i {
                return Err(($k, v as u64, "a zero run past the segment's end"));
            }
            $out[$i..$i + v].fill(MaybeUninit::new(W::default()));
            $i += v;
        } else {
            $out[$i] = MaybeUninit::new(W::from_u32(v));
            $i += 1;
        }
    }};
}

/// One segment being decoded: its bytes, the bit buffer, its output and how far it is.
pub(super) struct Lane<'a, 'o, W> {
    pub(super) seg: &'a [u8],
    pos: usize,
    buf: u64,
    avail: u32,
    out: &'o mut [MaybeUninit<W>],
    i: usize,
}

impl<'a, 'o, W: Word> Lane<'a, 'o, W> {
    pub(super) fn new(seg: &'a [u8], out: &'o mut [MaybeUninit<W>]) -> Self {
        Lane {
            seg,
            pos: 0,
            buf: 0,
            avail: 0,
            out,
            i: 0,
        }
    }

    /// Decodes symbols until the output is full (every word written), or fails.
    #[inline(always)]
    pub(super) fn finish<const RUNS: bool>(
        &mut self,
        k: usize,
        lut: &[Entry; LUT_SIZE],
    ) -> std::result::Result<(), (usize, u64, &'static str)> {
        let (seg, out) = (self.seg, &mut *self.out);
        let (mut pos, mut buf, mut avail, mut i) = (self.pos, self.buf, self.avail, self.i);
        while i < out.len() {
            step!(k, RUNS, lut, seg, pos, buf, avail, out, i);
        }
        (self.pos, self.buf, self.avail, self.i) = (pos, buf, avail, i);
        Ok(())
    }

    /// Sets the reading state to `bits` consumed from the segment's start (at most its
    /// length in bits): the bytes wholly used skipped, a partly used byte's rest in `buf`.
    fn seek(&mut self, bits: usize) {
        let (p, r) = (bits >> 3, (bits & 7) as u32);
        if r == 0 {
            (self.pos, self.buf, self.avail) = (p, 0, 0);
        } else {
            (self.pos, self.buf, self.avail) = (p + 1, (self.seg[p] >> r) as u64, 8 - r);
        }
    }

    /// Checks that the symbols ended in the segment's last byte, padding zero.
    pub(super) fn check_end(&self) -> std::result::Result<(), (u64, &'static str)> {
        let used = self.pos as u64 * 8 - self.avail as u64;
        let len = self.seg.len();
        if used.div_ceil(8) != len as u64 {
            return Err((used, "the symbols do not end in the segment's last byte"));
        }
        if !used.is_multiple_of(8) && self.seg[len - 1] >> (used % 8) != 0 {
            return Err((used, "padding bits are not zero"));
        }
        Ok(())
    }
}

/// What decoding a group gives: nothing, or the failing lane, a value and the reason.
pub(super) type GroupResult = std::result::Result<(), (usize, u64, &'static str)>;

avx2_dispatch! {
    /// Decodes up to [`LANES`] segments whose code has run tokens (see
    /// [`decode_group_body`]).
    pub(super) fn decode_group_runs<W: Word>(lanes: &mut [Lane<'_, '_, W>], lut: &[Entry; LUT_SIZE])
        -> GroupResult => group_runs;
}

avx2_dispatch! {
    /// Decodes up to [`LANES`] segments whose code has no run tokens.
    pub(super) fn decode_group_plain<W: Word>(lanes: &mut [Lane<'_, '_, W>], lut: &[Entry; LUT_SIZE])
        -> GroupResult => group_plain;
}

#[inline(always)]
fn group_runs<W: Word>(
    l: &mut [Lane<'_, '_, W>],
    lut: &[Entry; LUT_SIZE],
    a: Option<Avx2>,
) -> GroupResult {
    decode_group_body::<W, true>(l, lut, a)
}

#[inline(always)]
fn group_plain<W: Word>(
    l: &mut [Lane<'_, '_, W>],
    lut: &[Entry; LUT_SIZE],
    a: Option<Avx2>,
) -> GroupResult {
    decode_group_body::<W, false>(l, lut, a)
}

/// The most bits one symbol of `lut` takes (code and raw bits), at least 1.
#[inline(always)]
fn max_symbol_bits(lut: &[Entry; LUT_SIZE]) -> usize {
    let mut m = 1;
    for &e in lut.iter() {
        m = m.max((e >> 24) & 0xff);
    }
    m as usize
}

/// How many symbols of at most `mb` bits each can be read from `seg` starting `bits` in,
/// every one with an 8-byte load inside the segment.
#[inline(always)]
fn safe_symbols(seg: &[u8], bits: usize, mb: usize) -> usize {
    // The last bit position whose byte starts 8 readable bytes.
    match seg.len().checked_sub(8).map(|b| b * 8 + 7) {
        Some(last) if bits <= last => (last - bits) / mb + 1,
        _ => 0,
    }
}

/// Decodes one symbol of a segment at bit position `$bp`, giving the entry and the value
/// (or run length). Only within a block of symbols counted by [`safe_symbols`] from the
/// block's first position with [`max_symbol_bits`] of the same `$lut`: then its 8-byte load
/// is inside the segment.
macro_rules! symbol_at {
    ($lut:expr, $seg:expr, $bp:ident) => {{
        let p = $bp >> 3;
        debug_assert!(p + 8 <= $seg.len());
        // SAFETY: `p + 8 <= $seg.len()`. The block starts at a position `b` with `k =
        // safe_symbols(seg, b, mb)` symbols, so `b + (k - 1) * mb <= (seg.len() - 8) * 8 + 7`;
        // this is symbol `i < k` of the block, and every symbol advances `$bp` by an entry's
        // total of at most `mb = max_symbol_bits(lut)` bits (the largest over all entries),
        // so `$bp <= b + i * mb` and its byte `p <= seg.len() - 8`. The read is unaligned.
        let word = u64::from_le_bytes(unsafe {
            ($seg.as_ptr().add(p) as *const [u8; 8]).read_unaligned()
        }) >> ($bp & 7);
        let e = $lut[(word & (LUT_SIZE as u64 - 1)) as usize];
        let cl = (e & 0xff) as u32;
        let nraw = ((e >> 8) & 0xff) as u32;
        $bp += ((e >> 24) & 0xff) as usize;
        (
            e,
            (e >> 32) as u32 + ((word >> cl) as u32 & ((1u32 << nraw) - 1)),
        )
    }};
}

/// One symbol of lane `$k` by bit position, a run's zeros or one value at `$i`.
macro_rules! run_symbol_at {
    ($k:expr, $lut:expr, $seg:expr, $bp:ident, $out:expr, $i:ident) => {{
        let (e, v) = symbol_at!($lut, $seg, $bp);
        if e & ENTRY_RUN != 0 {
            let v = v as usize;
            if v > $out.len() - $i {
                return Err(($k, v as u64, "a zero run past the segment's end"));
            }
            $out[$i..$i + v].fill(MaybeUninit::new(W::default()));
            $i += v;
        } else {
            $out[$i] = MaybeUninit::new(W::from_u32(v));
            $i += 1;
        }
    }};
}

/// Decodes four fresh segments in lockstep by bit position, each symbol an 8-byte load at
/// its byte (no bit buffer to refill), in blocks of symbols whose loads all stay inside the
/// segments; leaves each lane's state at the first symbol not decoded, for the byte-wise
/// loop to go on.
#[inline(always)]
fn lockstep_bits<W: Word, const RUNS: bool>(
    [a, b, c, d]: [&mut Lane<'_, '_, W>; 4],
    lut: &[Entry; LUT_SIZE],
) -> GroupResult {
    let mb = max_symbol_bits(lut);
    let (sa, sb, sc, sd) = (a.seg, b.seg, c.seg, d.seg);
    let (mut pa, mut pb, mut pc, mut pd) = (0usize, 0usize, 0usize, 0usize);
    let (oa, ob, oc, od) = (&mut *a.out, &mut *b.out, &mut *c.out, &mut *d.out);
    let (mut ia, mut ib, mut ic, mut id) = (0usize, 0usize, 0usize, 0usize);
    loop {
        let k = safe_symbols(sa, pa, mb)
            .min(safe_symbols(sb, pb, mb))
            .min(safe_symbols(sc, pc, mb))
            .min(safe_symbols(sd, pd, mb));
        if RUNS {
            if k == 0 || !(ia < oa.len() && ib < ob.len() && ic < oc.len() && id < od.len()) {
                break;
            }
            for _ in 0..k {
                if !(ia < oa.len() && ib < ob.len() && ic < oc.len() && id < od.len()) {
                    break;
                }
                run_symbol_at!(0, lut, sa, pa, oa, ia);
                run_symbol_at!(1, lut, sb, pb, ob, ib);
                run_symbol_at!(2, lut, sc, pc, oc, ic);
                run_symbol_at!(3, lut, sd, pd, od, id);
            }
        } else {
            // One value per symbol: the lanes stay at the same index.
            let n = oa.len().min(ob.len()).min(oc.len()).min(od.len());
            let k = k.min(n - ia);
            if k == 0 {
                break;
            }
            let r = ia..ia + k;
            let lanes = oa[r.clone()]
                .iter_mut()
                .zip(&mut ob[r.clone()])
                .zip(&mut oc[r.clone()])
                .zip(&mut od[r]);
            for (((wa, wb), wc), wd) in lanes {
                *wa = MaybeUninit::new(W::from_u32(symbol_at!(lut, sa, pa).1));
                *wb = MaybeUninit::new(W::from_u32(symbol_at!(lut, sb, pb).1));
                *wc = MaybeUninit::new(W::from_u32(symbol_at!(lut, sc, pc).1));
                *wd = MaybeUninit::new(W::from_u32(symbol_at!(lut, sd, pd).1));
            }
            ia += k;
            (ib, ic, id) = (ia, ia, ia);
        }
    }
    for (l, bits, i) in [(a, pa, ia), (b, pb, ib), (c, pc, ic), (d, pd, id)] {
        l.seek(bits);
        l.i = i;
    }
    Ok(())
}

/// Decodes two segments of a code with runs in lockstep by bit position (as
/// [`lockstep_bits`]) from wherever they are, until one of them is full (true) or a load
/// would leave a segment (false).
#[inline(always)]
fn pair_runs_bits<W: Word>(
    [(ka, a), (kb, b)]: [(usize, &mut Lane<'_, '_, W>); 2],
    lut: &[Entry; LUT_SIZE],
) -> std::result::Result<bool, (usize, u64, &'static str)> {
    let mb = max_symbol_bits(lut);
    let (sa, sb) = (a.seg, b.seg);
    let mut pa = (a.pos * 8).wrapping_sub(a.avail as usize);
    let mut pb = (b.pos * 8).wrapping_sub(b.avail as usize);
    let (oa, ob) = (&mut *a.out, &mut *b.out);
    let (mut ia, mut ib) = (a.i, b.i);
    let full = loop {
        if !(ia < oa.len() && ib < ob.len()) {
            break true;
        }
        // Positions past the segment (its zero padding read) give 0.
        let k = safe_symbols(sa, pa, mb).min(safe_symbols(sb, pb, mb));
        if k == 0 {
            break false;
        }
        for _ in 0..k {
            if !(ia < oa.len() && ib < ob.len()) {
                break;
            }
            run_symbol_at!(ka, lut, sa, pa, oa, ia);
            run_symbol_at!(kb, lut, sb, pb, ob, ib);
        }
    };
    for (l, bits, i) in [(a, pa, ia), (b, pb, ib)] {
        if bits <= l.seg.len() * 8 {
            l.seek(bits);
        }
        l.i = i;
    }
    Ok(full)
}

/// Decodes up to [`LANES`] segments: in lockstep while all have values left, then each
/// alone; an error names the lane. Compiled twice (for AVX2 with BMI2, and portable).
#[inline(always)]
fn decode_group_body<W: Word, const RUNS: bool>(
    lanes: &mut [Lane<'_, '_, W>],
    lut: &[Entry; LUT_SIZE],
    _avx2: Option<Avx2>,
) -> GroupResult {
    if let [a, b, c, d] = lanes {
        if [&*a, &*b, &*c, &*d]
            .iter()
            .all(|l| l.pos == 0 && l.avail == 0 && l.i == 0)
        {
            lockstep_bits::<W, RUNS>([a, b, c, d], lut)?;
        }
    }
    if let [a, b, c, d] = lanes {
        // Four independent chains in locals (no closure: it would not inherit the AVX2 copy's
        // target features).
        let (sa, sb, sc, sd) = (a.seg, b.seg, c.seg, d.seg);
        let (oa, ob, oc, od) = (&mut *a.out, &mut *b.out, &mut *c.out, &mut *d.out);
        let (mut pa, mut ba, mut va, mut ia) = (a.pos, a.buf, a.avail, a.i);
        let (mut pb, mut bb, mut vb, mut ib) = (b.pos, b.buf, b.avail, b.i);
        let (mut pc, mut bc, mut vc, mut ic) = (c.pos, c.buf, c.avail, c.i);
        let (mut pd, mut bd, mut vd, mut id) = (d.pos, d.buf, d.avail, d.i);
        while ia < oa.len() && ib < ob.len() && ic < oc.len() && id < od.len() {
            step!(0, RUNS, lut, sa, pa, ba, va, oa, ia);
            step!(1, RUNS, lut, sb, pb, bb, vb, ob, ib);
            step!(2, RUNS, lut, sc, pc, bc, vc, oc, ic);
            step!(3, RUNS, lut, sd, pd, bd, vd, od, id);
        }
        (a.pos, a.buf, a.avail, a.i) = (pa, ba, va, ia);
        (b.pos, b.buf, b.avail, b.i) = (pb, bb, vb, ib);
        (c.pos, c.buf, c.avail, c.i) = (pc, bc, vc, ic);
        (d.pos, d.buf, d.avail, d.i) = (pd, bd, vd, id);
    }
    if RUNS {
        // Runs end the segments at different symbols: the lanes left go on two by two.
        loop {
            let mut left = lanes
                .iter_mut()
                .enumerate()
                .filter(|(_, l)| l.i < l.out.len());
            let (Some((ka, a)), Some((kb, b))) = (left.next(), left.next()) else {
                break;
            };
            if !pair_runs_bits::<W>([(ka, a), (kb, b)], lut)? {
                break;
            }
        }
    }
    for (k, lane) in lanes.iter_mut().enumerate() {
        lane.finish::<RUNS>(k, lut)?;
        lane.check_end().map_err(|(v, why)| (k, v, why))?;
    }
    Ok(())
}
