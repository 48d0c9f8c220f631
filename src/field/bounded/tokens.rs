//! The entropy stage: zigzag residuals as the lossless coder's 32-bit single tokens plus
//! pair tokens (two values below [`PAIR_LIMIT`]) and zero runs up to [`BOUNDED_RUN_MAX`],
//! under one canonical Huffman code per chunk (the lossless coder's codes and decode
//! tables), each chunk split into segments that decode independently. The chunk head writes
//! the code lengths as the image codec does (`format::parse_chunk` reads it). The encoder
//! picks per chunk the smallest of singles only, with pairs, and with pairs and runs.

use rayon::prelude::*;

use super::format::*;
use crate::codec::bits::{BitWriter, SliceBits};
use crate::compact::huffman::{for_each_length_field, table_bits};
use crate::error::{FormatError, Result};
use crate::field::core::code::{
    canonical, code_lengths, fill_lut_by, Entry, ENTRY_PAIR, ENTRY_RUN, LUT_SIZE,
};
use crate::field::core::container::segment_range;
use crate::field::core::tokens::token_of_masked;

/// Zero runs shorter than this are coded as pairs or singles by the encoder.
const RUN_MIN_ENCODE: usize = 4;

// `tokenize` forms a pair's token from values masked below PAIR_LIMIT.
const _: () = assert!(PAIR_LIMIT.is_power_of_two());

/// Calls `emit(token, raw bit count, raw bits)` for each symbol of one segment, with pair
/// tokens and zero runs when asked.
#[inline(always)]
fn tokenize(z: &[u32], pairs: bool, runs: bool, mut emit: impl FnMut(u32, u32, u32)) {
    let mut i = 0;
    while i < z.len() {
        if runs && z[i] == 0 {
            let run = z[i..].iter().take_while(|&&v| v == 0).count();
            if run >= RUN_MIN_ENCODE {
                let mut left = run;
                while left >= 2 {
                    let n = left.min(BOUNDED_RUN_MAX as usize);
                    let (t, r, v) = run_token(n as u32);
                    emit(t, r, v);
                    left -= n;
                }
                if left == 1 {
                    emit(0, 0, 0);
                }
                i += run;
                continue;
            }
        }
        if pairs && i + 1 < z.len() {
            // Pair or single chosen by masks, not a branch: which one comes next is as
            // random as the data (mispredicted about as often as not on noisy residuals).
            let (a, b) = (z[i], z[i + 1]);
            let pair = (a < PAIR_LIMIT) & (b < PAIR_LIMIT);
            let m = 0u32.wrapping_sub(pair as u32);
            let (t, r, v) = token_of_masked(a);
            let p = PAIR0 + PAIR_LIMIT * (a & (PAIR_LIMIT - 1)) + (b & (PAIR_LIMIT - 1));
            emit((p & m) | (t & !m), r & !m, v & !m);
            i += 1 + pair as usize;
            continue;
        }
        let (t, r, v) = token_of_masked(z[i]);
        emit(t, r, v);
        i += 1;
    }
}

/// The token sets a chunk may use, `(pairs, runs)`, in the order they are tried (the GPU
/// encoder's set index is the position here).
pub(super) const TOKEN_SETS: [(bool, bool); 3] = [(false, false), (true, false), (true, true)];

/// A token histogram and its raw bits.
pub(super) type Histogram = ([u64; BOUNDED_ALPHABET as usize], u64);

/// The histogram of one segment's symbols under a token set. The counts go to two tables in
/// turn, so that a run of one token (zeros) does not wait on its own count's store; the raw
/// bits are summed in a local (with `into`: a load and a store a symbol). Encode -4 % (whole
/// process, 10 runs paired, ResNet-18's saved tensors).
pub(super) fn histogram(z: &[u32], (pairs, runs): (bool, bool), into: &mut Histogram) {
    let mut raw = 0u64;
    let (mut h0, mut h1) = (
        [0u32; BOUNDED_ALPHABET as usize],
        [0u32; BOUNDED_ALPHABET as usize],
    );
    let (mut a, mut b) = (&mut h0, &mut h1);
    tokenize(z, pairs, runs, |t, r, _| {
        a[t as usize] += 1;
        std::mem::swap(&mut a, &mut b);
        raw += r as u64;
    });
    for ((h, &x), &y) in into.0.iter_mut().zip(&h0).zip(&h1) {
        *h += x as u64 + y as u64;
    }
    into.1 += raw;
}

/// A chunk's code: the token set (index in [`TOKEN_SETS`]), the code lengths and the bits
/// the chunk takes with it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ChunkCode {
    /// Index in [`TOKEN_SETS`].
    pub set: usize,
    /// Code lengths, token 0 to the last used one.
    pub lengths: Vec<u8>,
}

/// The code of a chunk from the histograms of its symbols under each token set (`None` for
/// a set not worth trying: pairs without a value below [`PAIR_LIMIT`], runs without 4 zeros
/// in a row; such a set tokenizes as the one before it, so it could not win the strict
/// comparison anyway): the set whose chunk is smallest, the first on ties.
pub(super) fn choose_code(hists: &[Option<Histogram>; 3], segments: usize) -> ChunkCode {
    let mut best: Option<(u64, usize, Vec<u8>)> = None;
    for (set, h) in hists.iter().enumerate() {
        let Some((hist, raw)) = h else { continue };
        let ntok = hist.iter().rposition(|&c| c > 0).map_or(1, |t| t + 1);
        let mut lengths = vec![0u8; ntok];
        code_lengths(&hist[..ntok], &mut lengths);
        if lengths.iter().all(|&l| l == 0) {
            lengths[0] = 1; // an empty chunk: one token, zero bits
        }
        let single = lengths.iter().filter(|&&l| l > 0).count() == 1;
        let mut bits: u64 = raw + table_bits(&lengths);
        if !single {
            bits += hist
                .iter()
                .zip(&lengths)
                .map(|(&c, &l)| c * l as u64)
                .sum::<u64>();
        }
        // Every segment pads to a byte.
        bits += 4 * segments as u64;
        if best.as_ref().is_none_or(|b| bits < b.0) {
            best = Some((bits, set, lengths));
        }
    }
    let (_, set, lengths) = best.expect("singles are always tried");
    ChunkCode { set, lengths }
}

/// A chunk's head: `ntok - 1`, the code lengths, the width of the segment lengths and the
/// segment lengths in bytes.
pub(super) fn chunk_head(
    lengths: &[u8],
    segment_bytes: impl Iterator<Item = usize> + Clone,
) -> Vec<u8> {
    let width = segment_bytes
        .clone()
        .map(|s| 32 - (s as u32).leading_zeros())
        .max()
        .unwrap_or(0);
    debug_assert!(width <= SEG_WIDTH_MAX);
    let mut head = BitWriter::with_prefix(&[], 64);
    head.write(lengths.len() as u32 - 1, NTOK_BITS);
    for_each_length_field(lengths, |value, bits| head.write(value, bits));
    head.write(width, SEG_WIDTH_BITS);
    for s in segment_bytes {
        head.write(s as u32, width);
    }
    head.finish()
}

/// One chunk's bytes: head (code lengths, segment lengths), segments; the token set
/// (singles, +pairs, +pairs and runs) that makes it smallest.
pub(super) fn encode_chunk(z: &[u32], segments: usize) -> Vec<u8> {
    let small = z.iter().any(|&v| v < PAIR_LIMIT);
    let zeros = z.windows(RUN_MIN_ENCODE).any(|w| w.iter().all(|&v| v == 0));
    let mut hists: [Option<Histogram>; 3] = [None, None, None];
    for (k, &(pairs, runs)) in TOKEN_SETS.iter().enumerate() {
        if (pairs && !small) || (runs && !zeros) {
            continue;
        }
        let mut h = ([0u64; BOUNDED_ALPHABET as usize], 0u64);
        for s in 0..segments {
            histogram(
                &z[segment_range(z.len(), segments, s)],
                (pairs, runs),
                &mut h,
            );
        }
        hists[k] = Some(h);
    }
    let code = choose_code(&hists, segments);
    let (pairs, runs) = TOKEN_SETS[code.set];
    let codes = canonical(&code.lengths);
    // The segments one after another in one buffer of the bits the chosen set's histogram
    // counts (a code's length there is at least the bits it writes), each segment padded to
    // a byte.
    let (hist, raw) = hists[code.set]
        .as_ref()
        .expect("the chosen set was counted");
    let bits: u64 = raw
        + hist
            .iter()
            .zip(&code.lengths)
            .map(|(&c, &l)| c * l as u64)
            .sum::<u64>();
    let mut body = vec![0u8; (bits / 8) as usize + segments];
    let mut lens = Vec::with_capacity(segments);
    let mut at = 0;
    for s in 0..segments {
        let seg = &z[segment_range(z.len(), segments, s)];
        let mut w = SliceBits::new(&mut body[at..]);
        tokenize(seg, pairs, runs, |t, r, v| {
            let (code, l) = codes[t as usize];
            w.write(code, l);
            w.write(v, r);
        });
        let len = w.finish();
        lens.push(len);
        at += len;
    }
    let mut out = chunk_head(&code.lengths, lens.iter().copied());
    out.extend_from_slice(&body[..at]);
    out
}

/// The chunks of a zigzag stream, `2^chunk_log2` values each.
pub(super) fn encode_chunks(
    z: &[u32],
    chunk_log2: u8,
    segments: usize,
    parallel: bool,
) -> Vec<Vec<u8>> {
    let chunk = 1usize << chunk_log2;
    if parallel {
        z.par_chunks(chunk)
            .map(|c| encode_chunk(c, segments))
            .collect()
    } else {
        z.chunks(chunk).map(|c| encode_chunk(c, segments)).collect()
    }
}

/// Why a segment is invalid: `(value, reason)`.
type SegError = (u64, &'static str);

/// Decodes one segment into `out` (zigzag values) with the decode table `lut`, and checks
/// that it ends in its last byte with zero padding.
fn decode_segment(seg: &[u8], lut: &[Entry; LUT_SIZE], out: &mut [u32]) -> Result<(), SegError> {
    let (mut pos, mut buf, mut avail, mut i) = (0usize, 0u64, 0u32, 0usize);
    while i < out.len() {
        if pos + 8 <= seg.len() {
            let w = u64::from_le_bytes(seg[pos..pos + 8].try_into().expect("8 bytes"));
            buf |= w << avail;
            pos += ((63 - avail) >> 3) as usize;
            avail |= 56;
        } else {
            while avail <= 56 {
                buf |= (*seg.get(pos).unwrap_or(&0) as u64) << avail;
                pos += 1;
                avail += 8;
            }
        }
        let e = lut[(buf & (LUT_SIZE as u64 - 1)) as usize];
        let cl = (e & 0xff) as u32;
        let nraw = ((e >> 8) & 0xff) as u32;
        let total = ((e >> 24) & 0xff) as u32;
        let base = (e >> 32) as u32;
        let v = base + ((buf >> cl) as u32 & ((1u64 << nraw) - 1) as u32);
        buf >>= total;
        avail -= total;
        if e & (ENTRY_RUN | ENTRY_PAIR) == 0 {
            out[i] = v;
            i += 1;
        } else if e & ENTRY_PAIR != 0 {
            if out.len() - i < 2 {
                return Err((i as u64, "a pair token past the segment's end"));
            }
            out[i] = base & 0xffff;
            out[i + 1] = base >> 16;
            i += 2;
        } else {
            let v = v as usize;
            if v > out.len() - i {
                return Err((v as u64, "a zero run past the segment's end"));
            }
            out[i..i + v].fill(0);
            i += v;
        }
        if pos > seg.len() + 8 {
            return Err((pos as u64, "symbols past the segment's end"));
        }
    }
    let used = pos as u64 * 8 - avail as u64;
    let len = seg.len();
    if used.div_ceil(8) != len as u64 {
        return Err((used, "the symbols do not end in the segment's last byte"));
    }
    if !used.is_multiple_of(8) && seg[len - 1] >> (used % 8) != 0 {
        return Err((used, "padding bits are not zero"));
    }
    Ok(())
}

/// Decodes every chunk of a checked file into `z` (the zigzag stream, all values).
pub(super) fn decode_chunks(
    data: &[u8],
    chunks: &[&[u8]],
    chunk_log2: u8,
    segments: usize,
    parallel: bool,
    z: &mut [u32],
) -> Result<()> {
    let base = |c: &[u8]| (c.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
    let one = |c: usize, out: &mut [u32]| -> Result<()> {
        let bytes = chunks[c];
        let cl = parse_chunk(bytes, base(bytes), segments)?;
        let mut lut = Box::new([0 as Entry; LUT_SIZE]);
        fill_lut_by(&cl.lengths, &mut lut, bounded_token);
        let m = out.len();
        let mut rest = out;
        for (s, seg) in cl.segments.iter().enumerate() {
            let r = segment_range(m, segments, s);
            let (a, b) = rest.split_at_mut(r.len());
            rest = b;
            decode_segment(seg, &lut, a).map_err(|(value, reason)| FormatError::InvalidHeader {
                field: "segment",
                offset: base(seg) as u64,
                value,
                reason,
            })?;
        }
        Ok(())
    };
    let chunk = 1usize << chunk_log2;
    if parallel && chunks.len() > 1 {
        z.par_chunks_mut(chunk)
            .enumerate()
            .try_for_each(|(c, out)| one(c, out))
    } else {
        z.chunks_mut(chunk)
            .enumerate()
            .try_for_each(|(c, out)| one(c, out))
    }
}
