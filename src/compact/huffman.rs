//! Canonical Huffman codes over the compact profile's token alphabet (at most 40 tokens):
//! length-limited code construction and the exact cost of a code-length table and its symbols
//! for the encoder, validation and a lookup table for the decoder. Codes are canonical (deflate's rule: shorter codes first, ties by token), written
//! most significant bit first into the LSB-first stream, i.e. bit-reversed, so a decoder
//! indexes its table with the next `MAX_CODE_LEN` stream bits as they are.

use crate::format::compact::{
    alphabet_size, run_base, run_token_first, token_base, token_count, unzigzag, CODE_LENGTH_BITS,
    MAX_CODE_LEN, PAIR_LIMIT, PAIR_TOKENS, RUN_MAX, RUN_TOKENS, TOKEN_DIRECT,
};

/// Most tokens of any depth (16-bit samples: 40 single and 16 pair tokens).
pub(crate) const MAX_TOKENS: usize = alphabet_size(16) as usize;
/// Entries of a decode table.
pub(crate) const LUT_SIZE: usize = 1 << MAX_CODE_LEN;
/// Stream bits that index the whole-position tables: one less than the symbol table's, so
/// a position whose two codes take 11 bits goes symbol by symbol. Such positions are rare
/// (their codes are long, so improbable), and the two tables then take half the building
/// per patch and half the cache: 1-4.5 % fewer instructions on 8-bit images (1.4 % more
/// on a 16-bit photo); 9 bits was no better (docs/bench-history.md, "Position tables").
pub(crate) const POSITION_BITS: u32 = 10;
/// Entries of the whole-position tables.
pub(crate) const POSITION_SIZE: usize = 1 << POSITION_BITS;

/// Code lengths per token, at most [`MAX_CODE_LEN`]. Tokens with count 0 get length 0. When
/// only one token occurs it gets length 1 in the table and its code takes zero bits (see
/// [`is_single`]).
pub(crate) fn code_lengths(hist: &[u32], lengths: &mut [u8]) {
    debug_assert!(hist.len() <= MAX_TOKENS);
    limited_code_lengths(hist, lengths, MAX_CODE_LEN);
}

/// [`code_lengths`] for any alphabet and length limit (the lossless float arrays' 32-bit
/// tokens use it too): Huffman's lengths, limited to `max_len` bits as JPEG does.
pub(crate) fn limited_code_lengths<C: Copy + Into<u64>>(
    hist: &[C],
    lengths: &mut [u8],
    max_len: u32,
) {
    debug_assert!(lengths.len() == hist.len());
    lengths.fill(0);
    // The used tokens as (count, token), lightest first.
    let mut leaves: Vec<(u64, usize)> = hist
        .iter()
        .enumerate()
        .map(|(t, &c)| (c.into(), t))
        .filter(|&(c, _)| c > 0)
        .collect();
    let n = leaves.len();
    match n {
        0 => return,
        1 => {
            lengths[leaves[0].1] = 1;
            return;
        }
        _ => {}
    }
    leaves.sort_unstable();
    // Huffman's algorithm with two queues (van Leeuwen): the sorted leaves, and the merged
    // nodes, which come out in order of weight. Each step merges the two lightest fronts
    // (a leaf before a merged node of equal weight). Nodes 0..n are the leaves in sorted
    // order, n.. the merged ones; `parent` links them for the depth computation.
    let mut merged = vec![0u64; n];
    let mut parent = vec![0usize; 2 * n];
    let (mut next_leaf, mut next_merged) = (0, 0);
    for m in 0..n - 1 {
        let mut lightest = || {
            if next_leaf < n && (next_merged == m || leaves[next_leaf].0 <= merged[next_merged]) {
                next_leaf += 1;
                (next_leaf - 1, leaves[next_leaf - 1].0)
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
    let mut depth_of = vec![0usize; 2 * n];
    let root = 2 * n - 2;
    for node in (0..root).rev() {
        depth_of[node] = depth_of[parent[node]] + 1;
    }
    // A depth is below n; the limit may exceed it.
    let max = max_len as usize;
    let mut count = vec![0u32; n.max(max + 1)];
    for &d in &depth_of[..n] {
        count[d] += 1;
    }
    // Limit the lengths as JPEG does (ITU T.81 Annex K.3, Adjust_BITS): move pairs of the
    // longest codes up, splitting a shorter code, until none is longer than the limit.
    for i in (max + 1..count.len()).rev() {
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

/// A canonical code (deflate's rule: shorter codes first, ties by token) of validated
/// lengths: each token's code, and the used tokens in code order, which the decode tables
/// are filled in (see [`fill_lut`]).
pub(crate) struct Canonical {
    /// Each token's code, bit-reversed for LSB-first writing (`codes[t]` holds `lengths[t]`
    /// bits; 0 for unused tokens and for a one-token code, whose code takes zero bits).
    pub codes: [u32; MAX_TOKENS],
    /// The tokens, shorter codes first, ties by token (the unused ones first).
    order: [u8; MAX_TOKENS],
    /// `order[start[l]..start[l + 1]]` are the tokens of length `l`.
    start: [u8; MAX_CODE_LEN as usize + 2],
    /// Exactly one token is used (see [`is_single`]).
    single: bool,
}

impl Canonical {
    /// The canonical code of `lengths` (at most [`MAX_TOKENS`] of them).
    pub(crate) fn new(lengths: &[u8]) -> Self {
        debug_assert!(lengths.len() <= MAX_TOKENS);
        // A counting sort by length (tokens in order within a length; the unused ones, of
        // length 0, first), without a branch per token.
        let mut start = [0u8; MAX_CODE_LEN as usize + 2];
        for &l in lengths {
            start[(l as usize + 1).min(MAX_CODE_LEN as usize + 1)] += 1;
        }
        for l in 1..start.len() {
            start[l] += start[l - 1];
        }
        let mut next = start;
        let mut order = [0u8; MAX_TOKENS];
        for (t, &l) in lengths.iter().enumerate() {
            let l = (l as usize).min(MAX_CODE_LEN as usize);
            order[next[l] as usize] = t as u8;
            next[l] += 1;
        }
        // Consecutive codes within a length; one bit longer, the next free code doubled.
        let mut codes = [0u32; MAX_TOKENS];
        // Exactly one token of non-zero length (what `is_single` says, from the counts).
        let single = start[MAX_CODE_LEN as usize + 1] - start[1] == 1;
        if !single {
            let mut code = 0u32;
            for l in 1..=MAX_CODE_LEN as usize {
                for &t in &order[start[l] as usize..start[l + 1] as usize] {
                    codes[t as usize] = code.reverse_bits() >> (32 - l as u32);
                    code += 1;
                }
                code <<= 1;
            }
        }
        Canonical {
            codes,
            order,
            start,
            single,
        }
    }

    /// The tokens of code length `l`, in code order.
    fn of_length(&self, l: usize) -> &[u8] {
        &self.order[self.start[l] as usize..self.start[l + 1] as usize]
    }

    /// The longest code's length.
    fn longest(&self) -> usize {
        (1..=MAX_CODE_LEN as usize)
            .rev()
            .find(|&l| self.start[l + 1] > self.start[l])
            .unwrap_or(0)
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

/// Fills a decode table for the canonical code `code` of validated lengths: entry `i`
/// decodes a stream whose next [`MAX_CODE_LEN`] bits are `i`. Filled by doubling, as
/// libdeflate does: the table for codes up to `l` bits is the one for `l - 1` bits twice
/// over (a shorter code does not depend on bit `l`), plus one entry per code of length `l`.
/// Every code is written once, and the copies are block moves: no loop per code whose trip
/// count depends on its length, which mispredicted once per code.
pub(crate) fn fill_lut(code: &Canonical, depth: u8, lut: &mut [u32; LUT_SIZE]) {
    let mut filled = 1;
    if code.single {
        let t = code.of_length(1)[0];
        lut[0] = lut_entry(0, t as u32, depth);
    } else {
        for l in 1..=code.longest() {
            double(lut, filled);
            filled *= 2;
            for &t in code.of_length(l) {
                lut[code.codes[t as usize] as usize] = lut_entry(l as u32, t as u32, depth);
            }
        }
    }
    // The bits above the longest code do not matter: the decoder indexes with one mask.
    while filled < LUT_SIZE {
        double(lut, filled);
        filled *= 2;
    }
}

/// Copies `table[..filled]` to `table[filled..2 * filled]`, inline in blocks of 16 (a
/// `memmove` call per doubling mispredicted its size dispatch about three times).
#[inline(always)]
fn double<T: Copy>(table: &mut [T], filled: usize) {
    let (done, rest) = table.split_at_mut(filled);
    if filled < 16 {
        for (o, &v) in rest[..filled].iter_mut().zip(done.iter()) {
            *o = v;
        }
    } else {
        for (o, block) in rest[..filled]
            .chunks_exact_mut(16)
            .zip(done.chunks_exact(16))
        {
            let block: &[T; 16] = block.try_into().expect("16 entries");
            o.copy_from_slice(block);
        }
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

/// The whole-position tables of one code, all indexed by the next [`POSITION_BITS`] stream
/// bits (see [`fill_position_lut`]).
pub(crate) struct PositionTables {
    /// Both residuals, unzigzagged, packed by [`pack_pair`] (valid where `bits` is whole; 0
    /// for a run).
    pub pairs: [u32; POSITION_SIZE],
    /// The bits the whole position takes, or [`NOT_WHOLE`].
    pub bits: [u8; POSITION_SIZE],
    /// The positions it covers (valid where `bits` is whole): 1, a run's length, or
    /// [`END_OF_ROW_STEP`].
    pub steps: [u8; POSITION_SIZE],
    /// The share of stream bit patterns (out of [`POSITION_SIZE`]) that start a whole
    /// position: how often the code's own statistics say a position is whole.
    pub whole_share: u32,
    /// [`fill_position_lut`]'s whole positions sorted by their bits: scratch, here so that
    /// a build does not clear 3 KB first.
    sorted: [(u16, u32, u8); MAX_WHOLE],
}

impl PositionTables {
    pub(crate) const fn new() -> Self {
        PositionTables {
            pairs: [0; POSITION_SIZE],
            bits: [0; POSITION_SIZE],
            steps: [0; POSITION_SIZE],
            whole_share: 0,
            sorted: [(0, 0, 0); MAX_WHOLE],
        }
    }
}

/// The step of the end-of-row token: more than any row has positions plus the longest run
/// ([`RUN_MAX`]), so a cursor past it can only have come from this token.
pub(crate) const END_OF_ROW_STEP: u8 = 255;
const _: () = assert!(RUN_MAX as usize + (1 << crate::format::PATCH_LOG2_MAX) / 2 < 255);

/// Most whole-position entries a code has: two direct tokens, or one pair token, or one run
/// token with its raw bits (the run tokens of `j` raw bits, `j = 1 ..`, have `2^j` entries
/// each; the end-of-row token one).
const MAX_WHOLE: usize =
    (TOKEN_DIRECT * TOKEN_DIRECT + PAIR_TOKENS + (1 << RUN_TOKENS) - 1) as usize;

/// Fills the whole-position tables for the canonical code `code` of validated lengths:
/// index `i` holds a whole position when the next [`POSITION_BITS`] stream bits `i`
/// determine it: a pair token, or two single tokens below 16 whose codes fit together, or a
/// run token with its raw bits (a run of zero positions, or the end-of-row token).
/// Elsewhere `bits` is [`NOT_WHOLE`] and the decoder takes the symbol-by-symbol path. One
/// lookup instead of two dependent ones for most positions of smooth and moderately
/// textured areas, and one store of both residuals; and no branch of its own for the runs
/// of flat areas. Filled by doubling as [`fill_lut`] is, the whole positions sorted by
/// their bits first: no two share an entry (the code is prefix-free), so each is written
/// once.
pub(crate) fn fill_position_lut(code: &Canonical, depth: u8, tables: &mut PositionTables) {
    let limit = POSITION_BITS as usize;
    // A counting sort of the whole positions by their bits.
    let mut start = [0usize; POSITION_BITS as usize + 2];
    for_each_whole(code, depth, |_, bits, _, _| start[bits + 1] += 1);
    for l in 1..start.len() {
        start[l] += start[l - 1];
    }
    let mut next = start;
    // Kept between builds (not cleared: the sort writes every entry it reads back).
    let sorted = &mut tables.sorted;
    for_each_whole(code, depth, |index, bits, pair, step| {
        sorted[next[bits]] = (index as u16, pair, step);
        next[bits] += 1;
    });
    tables.whole_share = (0..=limit)
        .map(|bits| ((start[bits + 1] - start[bits]) << (limit - bits)) as u32)
        .sum();
    tables.bits[0] = NOT_WHOLE;
    let mut filled = 1;
    for bits in 0..=limit {
        if bits > 0 {
            double(&mut tables.bits, filled);
            double(&mut tables.pairs, filled);
            double(&mut tables.steps, filled);
            filled *= 2;
        }
        for &(index, pair, step) in &tables.sorted[start[bits]..start[bits + 1]] {
            tables.bits[index as usize] = bits as u8;
            tables.pairs[index as usize] = pair;
            tables.steps[index as usize] = step;
        }
    }
}

/// Calls `each(entry, bits, residual pair, step)` for every whole position of `code` (see
/// [`fill_position_lut`]): pair tokens and run tokens, then each direct token followed by
/// each direct token that fits beside it.
#[inline(always)]
fn for_each_whole(code: &Canonical, depth: u8, mut each: impl FnMut(usize, usize, u32, u8)) {
    let singles = token_count(depth) as usize;
    let limit = POSITION_BITS as usize;
    // A one-token code takes zero bits.
    let len_of = |l: usize| if code.single { 0 } else { l };
    // The direct tokens that fit the index, in code order: (token, code, bits).
    let mut direct = [(0u32, 0usize, 0usize); TOKEN_DIRECT as usize];
    let mut n_direct = 0;
    for l in 1..=limit.min(code.longest()) {
        for &t in code.of_length(l) {
            let t = t as usize;
            if t < singles.min(TOKEN_DIRECT as usize) {
                direct[n_direct] = (t as u32, code.codes[t] as usize, len_of(l));
                n_direct += 1;
            } else if (singles..run_token_first(depth) as usize).contains(&t) {
                let p = (t - singles) as u32;
                let pair = pack_pair(
                    unzigzag(p / PAIR_LIMIT) as u16,
                    unzigzag(p % PAIR_LIMIT) as u16,
                );
                each(code.codes[t] as usize, len_of(l), pair, 1);
            } else if t >= run_token_first(depth) as usize {
                let c = code.codes[t] as usize;
                match run_base(depth, t as u32) {
                    // The end-of-row token: its step says so (see END_OF_ROW_STEP).
                    None => each(c, len_of(l), 0, END_OF_ROW_STEP),
                    // A run of `base + raw` positions: one entry per raw value that fits.
                    Some((base, nraw)) if len_of(l) + nraw as usize <= limit => {
                        for raw in 0..1usize << nraw {
                            let step = (base as usize + raw) as u8;
                            each(c | raw << len_of(l), len_of(l) + nraw as usize, 0, step);
                        }
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let direct = &direct[..n_direct];
    for &(t0, code0, len0) in direct {
        // The second token in code order, until the two no longer fit.
        for &(t1, code1, len1) in direct.iter().take_while(|d| len0 + d.2 <= limit) {
            let pair = pack_pair(unzigzag(t0) as u16, unzigzag(t1) as u16);
            each(code0 | code1 << len0, len0 + len1, pair, 1);
        }
    }
}

/// The exact bits of a channel coded with its own Huffman code (as [`choose_codes`] builds
/// it without sharing): its code-length table, its symbols' codes and `raw_bits`. Predictor,
/// token count and segment fields aside, which every choice pays alike.
pub(crate) fn coded_bits(hist: &[u32], raw_bits: u64) -> u64 {
    let mut lengths = [0u8; MAX_TOKENS];
    code_lengths(hist, &mut lengths[..hist.len()]);
    code_cost(hist, &lengths) + raw_bits
}

/// Bits of the code-length table of `lengths` plus those of the symbols of `hist` coded with
/// it (every token of `hist` has a code in `lengths`); raw bits aside.
pub(crate) fn code_cost(hist: &[u32], lengths: &[u8]) -> u64 {
    let lengths = &lengths[..hist.len()];
    let symbols = if is_single(lengths) {
        0
    } else {
        hist.iter()
            .zip(lengths)
            .map(|(&n, &l)| n as u64 * l as u64)
            .sum()
    };
    table_bits(lengths) + symbols
}

/// Bits of the code-length table of `lengths` (token 0 up to the last used one).
pub(crate) fn table_bits(lengths: &[u8]) -> u64 {
    let ntok = lengths.iter().rposition(|&l| l > 0).map_or(0, |t| t + 1);
    let mut bits = 0u64;
    for_each_length_field(&lengths[..ntok], |_, b| bits += b as u64);
    bits
}

/// Calls `field(value, bits)` for each field of the code-length table of `lengths` (token 0
/// up to the last used one), in stream order: "0": same as the previous length; "01"/"11"
/// (+1/-1, LSB first: bit 0 = 1 says "changed", bit 1 = 0 says "by one", bit 2 the sign);
/// "x11": a literal.
pub(crate) fn for_each_length_field(lengths: &[u8], mut field: impl FnMut(u32, u32)) {
    let mut previous = 0u8;
    for &l in lengths {
        match l as i32 - previous as i32 {
            0 => field(0, 1),
            1 => field(0b001, 3),
            -1 => field(0b101, 3),
            _ => field(0b11 | (l as u32) << 2, 2 + CODE_LENGTH_BITS),
        }
        previous = l;
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
            let code = Canonical::new(&lengths);
            let mut lut = Box::new([0u32; LUT_SIZE]);
            fill_lut(&code, depth, &mut lut);
            let mut positions = Box::new(PositionTables::new());
            fill_position_lut(&code, depth, &mut positions);
            let mask = LUT_SIZE - 1;
            let (mut whole, mut runs) = (0, 0);
            for (i, (&pair, &bits)) in positions.pairs.iter().zip(&positions.bits).enumerate() {
                if bits == NOT_WHOLE {
                    continue;
                }
                whole += 1;
                let step = positions.steps[i];
                let e0 = lut[i & mask];
                if e0 & LUT_RUN != 0 {
                    // A run token and its raw bits: no residuals, the run's length as step.
                    runs += 1;
                    let (len, nraw) = (e0 & 15, (e0 >> 4) & 15);
                    let n = if e0 >> 16 == 0 {
                        END_OF_ROW_STEP as u32
                    } else {
                        (e0 >> 16) + ((i as u32 >> len) & ((1 << nraw) - 1))
                    };
                    assert_eq!((bits as u32, pair, step as u32), (len + nraw, 0, n));
                    continue;
                }
                assert_eq!(step, 1, "depth {depth} index {i}");
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
            // A whole position of b bits fills 2^(10 - b) entries: the share is the count.
            assert_eq!(positions.whole_share as usize, whole, "depth {depth}");
            // Every run token's code is at most 10 bits here: the short ones fit with all
            // their raw values (the end-of-row token and runs of 2-3, 4-7 positions).
            assert!(runs >= 1 + 2 + 4, "depth {depth}: {runs} run entries");
        }
    }

    /// For many codes (one token, a few, many; with and without runs; long ones), every
    /// entry of the position tables is whole exactly when decoding its bits symbol by symbol
    /// finds a whole position inside the index (a pair or run token with its raw bits, or two
    /// direct tokens), and then holds that position.
    #[test]
    fn position_table_holds_exactly_the_whole_positions() {
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            seed >> 8
        };
        let mask = LUT_SIZE - 1;
        let mut lut = Box::new([0u32; LUT_SIZE]);
        let mut positions = Box::new(PositionTables::new());
        let mut kinds = [0usize; 3];
        for round in 0..600 {
            let depth = if round % 3 == 2 { 16u8 } else { 8 };
            let n = crate::format::compact::alphabet_size(depth) as usize;
            // 1 to n used tokens, with skewed counts (so some codes are long).
            let used = 1 + next() as usize % n.min(1 + round % 50);
            let mut hist = vec![0u32; n];
            for _ in 0..used {
                let t = next() as usize % n;
                hist[t] += 1 + (next() % 1000) * (next() % 3) * (next() % 50);
            }
            let mut lengths = vec![0u8; n];
            code_lengths(&hist, &mut lengths);
            let code = Canonical::new(&lengths);
            fill_lut(&code, depth, &mut lut);
            fill_position_lut(&code, depth, &mut positions);
            let limit = POSITION_BITS;
            let mut whole = 0;
            for i in 0..POSITION_SIZE {
                let e0 = lut[i & mask];
                let (len0, nraw0) = (e0 & 15, (e0 >> 4) & 15);
                let expected = if e0 & LUT_RUN != 0 {
                    let step = if e0 >> 16 == 0 {
                        END_OF_ROW_STEP as u32
                    } else {
                        (e0 >> 16) + ((i as u32 >> len0) & ((1 << nraw0) - 1))
                    };
                    (len0 + nraw0 <= limit).then_some((len0 + nraw0, 0, step))
                } else if e0 & LUT_PAIR != 0 {
                    let pair = pack_pair(
                        unzigzag((e0 >> 16) & 0xff) as u16,
                        unzigzag(e0 >> 24) as u16,
                    );
                    (len0 <= limit).then_some((len0, pair, 1))
                } else {
                    let e1 = lut[(i >> len0) & mask];
                    let len1 = e1 & 15;
                    let direct = |e: u32| e & (LUT_PAIR | LUT_RUN) == 0 && (e >> 4) & 15 == 0;
                    (direct(e0) && direct(e1) && len0 + len1 <= limit).then(|| {
                        let pair = pack_pair(unzigzag(e0 >> 16) as u16, unzigzag(e1 >> 16) as u16);
                        (len0 + len1, pair, 1)
                    })
                };
                let got = positions.bits[i];
                match expected {
                    Some((bits, pair, step)) => {
                        whole += 1;
                        kinds[(e0 & LUT_RUN != 0) as usize + (e0 & LUT_PAIR != 0) as usize * 2] +=
                            1;
                        let got = (got as u32, positions.pairs[i], positions.steps[i] as u32);
                        assert_eq!(got, (bits, pair, step), "round {round} index {i}");
                    }
                    None => assert_eq!(got, NOT_WHOLE, "round {round} index {i}"),
                }
            }
            assert_eq!(positions.whole_share, whole, "round {round}");
        }
        // Two direct tokens, run tokens and pair tokens all met.
        assert!(kinds.iter().all(|&k| k > 1000), "{kinds:?}");
    }

    /// The canonical codes are deflate's (RFC 1951, 3.2.2, its example), bit-reversed; the
    /// GPU decoder derives them on its own, so both must follow the rule, not each other.
    #[test]
    fn canonical_codes_follow_deflate() {
        let lengths = [3u8, 3, 3, 3, 3, 2, 4, 4];
        let msb_first = [0b010u32, 0b011, 0b100, 0b101, 0b110, 0b00, 0b1110, 0b1111];
        let code = Canonical::new(&lengths);
        for (t, (&l, &c)) in lengths.iter().zip(&msb_first).enumerate() {
            assert_eq!(
                code.codes[t],
                c.reverse_bits() >> (32 - l as u32),
                "token {t}"
            );
        }
        assert_eq!(code.of_length(2), &[5]);
        assert_eq!(code.of_length(3), &[0, 1, 2, 3, 4]);
        assert_eq!(code.longest(), 4);
        // One used token: a zero-bit code.
        let single = Canonical::new(&[0, 0, 1, 0]);
        assert!(single.single && single.codes.iter().all(|&c| c == 0));
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
        let code = Canonical::new(&lengths);
        let c = code.codes;
        let mut lut = Box::new([0u32; LUT_SIZE]);
        fill_lut(&code, 8, &mut lut);
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
