//! Canonical Huffman codes over the compact profile's token alphabet (at most 40 tokens):
//! length-limited code construction for the encoder, validation and a lookup table for the
//! decoder. Codes are canonical (deflate's rule: shorter codes first, ties by token), written
//! most significant bit first into the LSB-first stream, i.e. bit-reversed, so a decoder
//! indexes its table with the next `MAX_CODE_LEN` stream bits as they are.

use crate::format::compact::{
    alphabet_size, run_base, run_token_first, token_base, token_count, unzigzag, MAX_CODE_LEN,
    PAIR_LIMIT, TOKEN_DIRECT,
};

/// Most tokens of any depth (16-bit samples: 40 single and 16 pair tokens).
pub(crate) const MAX_TOKENS: usize = alphabet_size(16) as usize;
/// Entries of a decode table.
pub(crate) const LUT_SIZE: usize = 1 << MAX_CODE_LEN;
/// Stream bits that index the whole-position tables: one less than the symbol table's, so
/// a position whose two codes take 11 bits goes symbol by symbol. Such positions are rare
/// (their codes are long, so improbable), and the two tables then take half the building
/// per patch and half the cache: 1-4.5 % fewer instructions on 8-bit images (1.4 % more
/// on a 16-bit photo); 9 bits was no better (BENCHMARKS.md, "Position tables").
pub(crate) const POSITION_BITS: u32 = 10;
/// Entries of the whole-position tables.
pub(crate) const POSITION_SIZE: usize = 1 << POSITION_BITS;

/// Code lengths per token, at most [`MAX_CODE_LEN`]. Tokens with count 0 get length 0. When
/// only one token occurs it gets length 1 in the table and its code takes zero bits (see
/// [`is_single`]).
pub(crate) fn code_lengths(hist: &[u32], lengths: &mut [u8]) {
    debug_assert!(hist.len() <= MAX_TOKENS && lengths.len() == hist.len());
    lengths.fill(0);
    // The used tokens as (count, token), lightest first.
    let mut leaves = [(0u32, 0usize); MAX_TOKENS];
    let mut n = 0;
    for (t, &count) in hist.iter().enumerate() {
        if count > 0 {
            leaves[n] = (count, t);
            n += 1;
        }
    }
    match n {
        0 => return,
        1 => {
            lengths[leaves[0].1] = 1;
            return;
        }
        _ => {}
    }
    let leaves = &mut leaves[..n];
    leaves.sort_unstable();
    // Huffman's algorithm with two queues (van Leeuwen): the sorted leaves, and the merged
    // nodes, which come out in order of weight. Each step merges the two lightest fronts
    // (a leaf before a merged node of equal weight). Nodes 0..n are the leaves in sorted
    // order, n.. the merged ones; `parent` links them for the depth computation.
    let mut merged = [0u64; MAX_TOKENS];
    let mut parent = [0usize; 2 * MAX_TOKENS];
    let (mut next_leaf, mut next_merged) = (0, 0);
    for m in 0..n - 1 {
        let mut lightest = || {
            if next_leaf < n
                && (next_merged == m || leaves[next_leaf].0 as u64 <= merged[next_merged])
            {
                next_leaf += 1;
                (next_leaf - 1, leaves[next_leaf - 1].0 as u64)
            } else {
                next_merged += 1;
                (n + next_merged - 1, merged[next_merged - 1])
            }
        };
        let (a, wa) = lightest();
        let (b, wb) = lightest();
        merged[m] = wa + wb;
        parent[a] = n + m;
        parent[b] = n + m;
    }
    // Depths from the root (the last merged node) down: parents come after their children.
    let mut depth_of = [0u32; 2 * MAX_TOKENS];
    let root = 2 * n - 2;
    for node in (0..root).rev() {
        depth_of[node] = depth_of[parent[node]] + 1;
    }
    let mut count = [0u32; 64];
    for &d in &depth_of[..n] {
        count[d as usize] += 1;
    }
    // Limit the lengths as JPEG does (ITU T.81 Annex K.3, Adjust_BITS): move pairs of the
    // longest codes up, splitting a shorter code, until none is longer than the limit.
    let max = MAX_CODE_LEN as usize;
    for i in (max + 1..64).rev() {
        while count[i] > 0 {
            let mut j = i - 2;
            while count[j] == 0 {
                j -= 1;
            }
            count[i] -= 2;
            count[i - 1] += 1;
            count[j + 1] += 2;
            count[j] -= 1;
        }
    }
    // The most frequent tokens get the shortest lengths.
    leaves.sort_unstable_by_key(|&(w, t)| (std::cmp::Reverse(w), t));
    let mut it = leaves.iter();
    for (len, &c) in count.iter().enumerate().take(max + 1) {
        for _ in 0..c {
            let &(_, t) = it.next().expect("counts add up to the leaves");
            lengths[t] = len as u8;
        }
    }
}

/// True when exactly one token has a non-zero length: its code then takes zero bits.
pub(crate) fn is_single(lengths: &[u8]) -> bool {
    lengths.iter().filter(|&&l| l > 0).count() == 1
}

/// Why a code-length table is invalid.
pub(crate) fn check_lengths(lengths: &[u8]) -> Result<(), &'static str> {
    if lengths.iter().any(|&l| l as u32 > MAX_CODE_LEN) {
        return Err("a code length exceeds 11");
    }
    let used = lengths.iter().filter(|&&l| l > 0).count();
    if used == 0 {
        return Err("no token has a code");
    }
    if used == 1 {
        // Its code is zero bits long whatever the length says; only 1 is allowed so that
        // every image has one encoding per choice of codes (a flipped bit is never ignored).
        return if lengths.iter().any(|&l| l > 1) {
            Err("a single used token must have length 1")
        } else {
            Ok(())
        };
    }
    let kraft: u32 = lengths
        .iter()
        .filter(|&&l| l > 0)
        .map(|&l| 1u32 << (MAX_CODE_LEN - l as u32))
        .sum();
    match kraft.cmp(&(1 << MAX_CODE_LEN)) {
        std::cmp::Ordering::Less => Err("the code is incomplete"),
        std::cmp::Ordering::Greater => Err("the code is over-subscribed"),
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// Canonical codes, bit-reversed for LSB-first writing (`codes[t]` holds `lengths[t]` bits).
pub(crate) fn codes(lengths: &[u8], codes: &mut [u32]) {
    let mut count = [0u32; MAX_CODE_LEN as usize + 1];
    for &l in lengths {
        count[l as usize] += 1;
    }
    count[0] = 0;
    let mut next = [0u32; MAX_CODE_LEN as usize + 2];
    let mut code = 0;
    for len in 1..=MAX_CODE_LEN as usize {
        code = (code + count[len - 1]) << 1;
        next[len] = code;
    }
    for (t, &l) in lengths.iter().enumerate() {
        codes[t] = if l == 0 {
            0
        } else {
            let c = next[l as usize];
            next[l as usize] += 1;
            c.reverse_bits() >> (32 - l as u32)
        };
    }
    if is_single(lengths) {
        codes.fill(0);
    }
}

/// Bit of a decode-table entry that marks a pair token.
pub(crate) const LUT_PAIR: u32 = 1 << 8;
/// Bit of a decode-table entry that marks a run token.
pub(crate) const LUT_RUN: u32 = 1 << 9;

/// One decode-table entry: code length (bits 0..4), raw bit count (bits 4..8), [`LUT_PAIR`],
/// [`LUT_RUN`], and from bit 16 the token's base value (the value is `base + next raw bits`;
/// for a run token the run's length in positions, base 0 for the end-of-row token) or, for
/// a pair token, the two zigzag values (bits 16..24 and 24..32).
#[inline(always)]
pub(crate) const fn lut_entry(code_len: u32, token: u32, depth: u8) -> u32 {
    let singles = token_count(depth);
    if token >= run_token_first(depth) {
        return match run_base(depth, token) {
            Some((base, nraw)) => code_len | (nraw << 4) | LUT_RUN | (base << 16),
            None => code_len | LUT_RUN,
        };
    }
    if token >= singles {
        let p = token - singles;
        return code_len | LUT_PAIR | (p / PAIR_LIMIT) << 16 | (p % PAIR_LIMIT) << 24;
    }
    let (base, nraw) = token_base(token);
    code_len | (nraw << 4) | (base << 16)
}

/// Fills a decode table for validated `lengths` and their canonical `codes` (see
/// [`codes`]): entry `i` decodes a stream whose next [`MAX_CODE_LEN`] bits are `i`. Only the
/// first 2^(longest code) entries are computed, code by code; the rest repeat them (the
/// bits above the longest code do not matter), so short codes cost a small fill and the
/// decoder indexes with one fixed mask.
pub(crate) fn fill_lut(lengths: &[u8], codes: &[u32], depth: u8, lut: &mut [u32; LUT_SIZE]) {
    let filled = if is_single(lengths) {
        let t = lengths.iter().position(|&l| l > 0).expect("one token");
        lut[0] = lut_entry(0, t as u32, depth);
        1
    } else {
        let size = 1usize << lengths.iter().copied().max().unwrap_or(0);
        for (t, &l) in lengths.iter().enumerate() {
            if l == 0 {
                continue;
            }
            let entry = lut_entry(l as u32, t as u32, depth);
            let step = 1usize << l;
            let mut i = codes[t] as usize;
            while i < size {
                lut[i] = entry;
                i += step;
            }
        }
        size
    };
    let mut filled = filled;
    while filled < LUT_SIZE {
        lut.copy_within(0..filled, filled);
        filled *= 2;
    }
}

/// A position-bits entry that says the position is not whole (the decoder then reads it
/// symbol by symbol). Whole positions take at most [`POSITION_BITS`] bits.
pub(crate) const NOT_WHOLE: u8 = 0x80;

/// Both residuals of a position as one `u32` whose bytes are the two `u16` samples in
/// order (native byte order), so that the decoder stores a position with one write.
#[inline(always)]
pub(crate) const fn pack_pair(r0: u16, r1: u16) -> u32 {
    let (a, b) = (r0.to_ne_bytes(), r1.to_ne_bytes());
    u32::from_ne_bytes([a[0], a[1], b[0], b[1]])
}

/// The whole-position tables of one code, both indexed by the next [`POSITION_BITS`] stream
/// bits (see [`fill_position_lut`]).
pub(crate) struct PositionTables {
    /// Both residuals, unzigzagged, packed by [`pack_pair`] (valid where `bits` is whole).
    pub pairs: [u32; POSITION_SIZE],
    /// The bits the whole position takes, or [`NOT_WHOLE`].
    pub bits: [u8; POSITION_SIZE],
}

/// Fills the whole-position tables for validated `lengths` and their canonical codes: index
/// `i` holds a whole position when the next [`POSITION_BITS`] stream bits `i` determine it
/// without raw bits: a pair token, or two single tokens below 16 whose codes fit together.
/// Elsewhere `bits` is [`NOT_WHOLE`] and the decoder takes the symbol-by-symbol path. One
/// lookup instead of two dependent ones for most positions of smooth and moderately
/// textured areas, and one store of both residuals. Filled code by code (each entry is
/// written at most once), not entry by entry.
pub(crate) fn fill_position_lut(
    lengths: &[u8],
    codes_buf: &[u32],
    depth: u8,
    tables: &mut PositionTables,
) {
    tables.bits.fill(NOT_WHOLE);
    let single = is_single(lengths);
    let singles = token_count(depth) as usize;
    let fill = |tables: &mut PositionTables, code: u32, len: u32, z0: u32, z1: u32| {
        let pair = pack_pair(unzigzag(z0) as u16, unzigzag(z1) as u16);
        let step = 1usize << len;
        let mut i = code as usize;
        while i < POSITION_SIZE {
            tables.pairs[i] = pair;
            tables.bits[i] = len as u8;
            i += step;
        }
    };
    // Direct single tokens (value = token, no raw bits) with their codes.
    let mut direct = [(0u32, 0u32, 0u32); TOKEN_DIRECT as usize];
    let mut n_direct = 0;
    for t in 0..singles.min(TOKEN_DIRECT as usize) {
        if lengths[t] > 0 {
            let len = if single { 0 } else { lengths[t] as u32 };
            direct[n_direct] = (t as u32, codes_buf[t], len);
            n_direct += 1;
        }
    }
    let direct = &direct[..n_direct];
    for (t, &l) in lengths.iter().enumerate() {
        if l == 0 {
            continue;
        }
        let len0 = if single { 0 } else { l as u32 };
        let code0 = codes_buf[t];
        if len0 > POSITION_BITS {
            continue;
        } else if t >= run_token_first(depth) as usize {
            // Runs span positions: the decoders that accept them read symbol by symbol.
            continue;
        } else if t >= singles {
            let p = (t - singles) as u32;
            fill(tables, code0, len0, p / PAIR_LIMIT, p % PAIR_LIMIT);
        } else if t < TOKEN_DIRECT as usize {
            for &(t1, code1, len1) in direct {
                if len0 + len1 <= POSITION_BITS {
                    fill(tables, code0 | code1 << len0, len0 + len1, t as u32, t1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_complete_limited_and_prefer_frequent_tokens() {
        // Fibonacci weights force a deep tree: the limit must kick in.
        let mut hist = [0u32; 24];
        let (mut a, mut b) = (1u32, 1u32);
        for h in hist.iter_mut() {
            *h = a;
            (a, b) = (b, a + b);
        }
        let mut lengths = [0u8; 24];
        code_lengths(&hist, &mut lengths);
        assert_eq!(check_lengths(&lengths), Ok(()));
        assert!(lengths.iter().all(|&l| (1..=11).contains(&(l as u32))));
        assert!(lengths[23] <= lengths[0]);
        // Single token and two tokens.
        let mut l2 = [0u8; 24];
        code_lengths(
            &[
                0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
            &mut l2,
        );
        assert!(is_single(&l2) && l2[1] == 1 && check_lengths(&l2).is_ok());
        let mut hist2 = [0u32; 24];
        hist2[3] = 1;
        hist2[9] = 100;
        code_lengths(&hist2, &mut l2);
        assert_eq!((l2[3], l2[9]), (1, 1));
    }

    /// Every whole-position entry agrees with decoding its two symbols one by one.
    #[test]
    fn position_table_agrees_with_symbol_by_symbol_decoding() {
        for depth in [8u8, 16] {
            let n = crate::format::compact::alphabet_size(depth) as usize;
            let hist: Vec<u32> = (0..n as u32)
                .map(|i| 1 + (i * 53 % 17) * (n as u32 - i))
                .collect();
            let mut lengths = vec![0u8; n];
            code_lengths(&hist, &mut lengths);
            let mut c = vec![0u32; n];
            codes(&lengths, &mut c);
            let mut lut = Box::new([0u32; LUT_SIZE]);
            fill_lut(&lengths, &c, depth, &mut lut);
            let mut positions = Box::new(PositionTables {
                pairs: [0; POSITION_SIZE],
                bits: [0; POSITION_SIZE],
            });
            fill_position_lut(&lengths, &c, depth, &mut positions);
            let mask = LUT_SIZE - 1;
            let mut whole = 0;
            for (i, (&pair, &bits)) in positions.pairs.iter().zip(&positions.bits).enumerate() {
                if bits == NOT_WHOLE {
                    continue;
                }
                whole += 1;
                let e0 = lut[i & mask];
                let (z0, z1, len) = if e0 & LUT_PAIR != 0 {
                    ((e0 >> 16) & 0xff, e0 >> 24, e0 & 15)
                } else {
                    let e1 = lut[(i >> (e0 & 15)) & mask];
                    assert_eq!((e0 >> 4) & 15, 0, "raw bits in a whole position");
                    assert_eq!((e1 >> 4) & 15, 0, "raw bits in a whole position");
                    (e0 >> 16, e1 >> 16, (e0 & 15) + (e1 & 15))
                };
                assert_eq!(bits as u32, len, "depth {depth} index {i}");
                let expected = pack_pair(unzigzag(z0) as u16, unzigzag(z1) as u16);
                assert_eq!(pair, expected, "depth {depth} index {i}");
            }
            assert!(
                whole > POSITION_SIZE / 4,
                "depth {depth}: only {whole} whole entries"
            );
        }
    }

    #[test]
    fn bad_tables_are_named() {
        assert_eq!(
            check_lengths(&[1, 1, 1]),
            Err("the code is over-subscribed")
        );
        assert_eq!(check_lengths(&[1, 2, 0]), Err("the code is incomplete"));
        assert_eq!(check_lengths(&[0, 0]), Err("no token has a code"));
        assert_eq!(check_lengths(&[12, 1]), Err("a code length exceeds 11"));
        assert_eq!(
            check_lengths(&[0, 3]),
            Err("a single used token must have length 1")
        );
        assert_eq!(check_lengths(&[0, 1]), Ok(()));
    }

    #[test]
    fn table_decodes_what_the_codes_write() {
        let hist: Vec<u32> = (0..40).map(|i| 1 + (i * 37 % 11) * (40 - i)).collect();
        let mut lengths = [0u8; 40];
        code_lengths(&hist, &mut lengths);
        let mut c = [0u32; 40];
        codes(&lengths, &mut c);
        let mut lut = Box::new([0u32; LUT_SIZE]);
        fill_lut(&lengths, &c, 8, &mut lut);
        for t in 0..40u32 {
            let l = lengths[t as usize] as u32;
            // Any bits may follow the code, up to the table's full 11-bit index.
            for tail in [0u32, 0x7ff, 0x555] {
                let window = (c[t as usize] | (tail << l)) as usize & (LUT_SIZE - 1);
                assert_eq!(lut[window], lut_entry(l, t, 8), "token {t}");
            }
        }
    }
}
