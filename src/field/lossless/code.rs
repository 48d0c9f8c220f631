//! Canonical Huffman codes over the lossless token alphabet (at most 82 tokens, codes of at
//! most 11 bits): length-limited construction for the encoder, validation, the bit-reversed
//! codes for LSB-first writing and the decoder's lookup table. The same rules as the image
//! codec's version-2 codes (SPEC.md, "Codes"), over a wider alphabet.

use super::format::{alphabet, token_base, MAX_CODE_LEN};

/// Most tokens of any width (32-bit values: 72 singles and 10 run tokens).
pub(super) const MAX_TOKENS: usize = alphabet(32) as usize;
/// Entries of a decode table.
pub(super) const LUT_SIZE: usize = 1 << MAX_CODE_LEN;

/// Code lengths per token, at most [`MAX_CODE_LEN`]; unused tokens get 0, and a lone used
/// token gets 1 (its code then takes zero bits). The image codec's construction.
pub(super) fn code_lengths(hist: &[u64], lengths: &mut [u8]) {
    crate::compact::huffman::limited_code_lengths(hist, lengths, MAX_CODE_LEN);
}

/// Each token's canonical code (deflate's rule), bit-reversed for LSB-first writing, and its
/// length in bits (0 for unused tokens and for a one-token code).
pub(super) fn canonical(lengths: &[u8]) -> Vec<(u32, u32)> {
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

/// Decode-table entry: code length (bits 0..8), raw bit count (bits 8..16), run flag (bit
/// 16), code length plus raw bit count (bits 24..32), base value (bits 32..64).
pub(super) type Entry = u64;
/// Run flag of an [`Entry`].
pub(super) const ENTRY_RUN: u64 = 1 << 16;

fn entry(code_len: u32, width: u32, token: u32) -> Entry {
    let (base, nraw, run) = token_base(width, token);
    code_len as u64
        | (nraw as u64) << 8
        | if run { ENTRY_RUN } else { 0 }
        | ((code_len + nraw) as u64) << 24
        | (base as u64) << 32
}

/// The decode table of validated `lengths`: entry `i` decodes a stream whose next 11 bits
/// are `i`. Returns whether any run token is used.
pub(super) fn fill_lut(lengths: &[u8], width: u32, lut: &mut [Entry; LUT_SIZE]) -> bool {
    let runs = lengths
        .iter()
        .enumerate()
        .any(|(t, &l)| l > 0 && token_base(width, t as u32).2);
    let codes = canonical(lengths);
    if lengths.iter().filter(|&&l| l > 0).count() == 1 {
        let t = lengths.iter().position(|&l| l > 0).expect("one used token");
        lut.fill(entry(0, width, t as u32));
        return runs;
    }
    for (t, &(code, l)) in codes.iter().enumerate() {
        if l == 0 {
            continue;
        }
        let e = entry(l, width, t as u32);
        let mut i = code as usize;
        while i < LUT_SIZE {
            lut[i] = e;
            i += 1 << l;
        }
    }
    runs
}
