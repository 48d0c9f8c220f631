//! Canonical Huffman codes over the lossless token alphabet (at most 82 tokens, codes of at
//! most 11 bits): length-limited construction for the encoder, validation, the bit-reversed
//! codes for LSB-first writing and the decoder's lookup table. The same rules as the image
//! codec's version-2 codes (SPEC.md, "Codes"), over a wider alphabet; the error-bounded
//! arrays' decode tables (with pair tokens) are built by the same [`fill_lut_by`].

use super::tokens::{alphabet, token_base, MAX_CODE_LEN};

/// Most tokens of any width (32-bit values: 72 singles and 10 run tokens).
pub(in crate::field) const MAX_TOKENS: usize = alphabet(32) as usize;
/// Entries of a decode table.
pub(in crate::field) const LUT_SIZE: usize = 1 << MAX_CODE_LEN;

/// Code lengths per token, at most [`MAX_CODE_LEN`]; unused tokens get 0, and a lone used
/// token gets 1 (its code then takes zero bits). The image codec's construction.
pub(in crate::field) fn code_lengths(hist: &[u64], lengths: &mut [u8]) {
    crate::compact::huffman::limited_code_lengths(hist, lengths, MAX_CODE_LEN);
}

/// Each token's canonical code (deflate's rule), bit-reversed for LSB-first writing, and its
/// length in bits (0 for unused tokens and for a one-token code).
pub(in crate::field) fn canonical(lengths: &[u8]) -> Vec<(u32, u32)> {
    let mut out = vec![(0u32, 0u32); lengths.len()];
    if lengths.iter().filter(|&&l| l > 0).count() < 2 {
        return out;
    }
    let mut code = 0u32;
    for l in 1..=MAX_CODE_LEN {
        for (t, &lt) in lengths.iter().enumerate() {
            if lt as u32 == l {
                out[t] = (code.reverse_bits() >> (32 - l), l);
                code += 1;
            }
        }
        code <<= 1;
    }
    out
}

/// Decode-table entry: code length (bits 0..8), raw bit count (bits 8..16), flags (bits
/// 16..24: [`ENTRY_RUN`], [`ENTRY_PAIR`]), code length plus raw bit count (bits 24..32), base
/// value (bits 32..64).
pub(in crate::field) type Entry = u64;
/// Run flag of an [`Entry`].
pub(in crate::field) const ENTRY_RUN: u64 = 1 << 16;
/// Pair flag of an [`Entry`] (error-bounded arrays' pair tokens; the base holds both values).
pub(in crate::field) const ENTRY_PAIR: u64 = 1 << 17;

fn entry(code_len: u32, base: u32, nraw: u32, flags: u64) -> Entry {
    code_len as u64
        | (nraw as u64) << 8
        | flags
        | ((code_len + nraw) as u64) << 24
        | (base as u64) << 32
}

/// The decode table of validated `lengths`: entry `i` decodes a stream whose next 11 bits
/// are `i`. Returns whether any run token is used.
pub(in crate::field) fn fill_lut(lengths: &[u8], width: u32, lut: &mut [Entry; LUT_SIZE]) -> bool {
    let flags = fill_lut_by(lengths, lut, |t| {
        let (base, nraw, run) = token_base(width, t);
        (base, nraw, if run { ENTRY_RUN } else { 0 })
    });
    flags & ENTRY_RUN != 0
}

/// The decode table of validated `lengths` over any alphabet: `token(t)` gives token `t`'s
/// base, raw bit count and flags. Returns the flags of the used tokens, or-ed.
pub(in crate::field) fn fill_lut_by(
    lengths: &[u8],
    lut: &mut [Entry; LUT_SIZE],
    token: impl Fn(u32) -> (u32, u32, u64),
) -> u64 {
    let mut used_flags = 0;
    for (t, &l) in lengths.iter().enumerate() {
        if l > 0 {
            used_flags |= token(t as u32).2;
        }
    }
    let make = |l: u32, t: usize| {
        let (base, nraw, flags) = token(t as u32);
        entry(l, base, nraw, flags)
    };
    if lengths.iter().filter(|&&l| l > 0).count() == 1 {
        let t = lengths.iter().position(|&l| l > 0).expect("one used token");
        lut.fill(make(0, t));
        return used_flags;
    }
    let codes = canonical(lengths);
    for (t, &(code, l)) in codes.iter().enumerate() {
        if l == 0 {
            continue;
        }
        let e = make(l, t);
        let mut i = code as usize;
        while i < LUT_SIZE {
            lut[i] = e;
            i += 1 << l;
        }
    }
    used_flags
}
