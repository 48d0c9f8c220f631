//! The stream's Huffman code (SPEC "Block-coded arrays", "The encoder's choices"): its
//! lengths from the symbol counts, the canonical codes, the decode table, and the lengths'
//! place in the head. `blocks_code` in `shaders/blocks.wgsl` runs the same construction on
//! the device. (The float codecs' `field::core::code` builds its lengths by the image
//! codec's construction, and gives a lone token no bits; this one is what the kernel runs.)

use super::*;

/// The code lengths of a stream with symbol counts `counts` (0: symbol unused; at most
/// [`MAX_CODE`]): Huffman's (the two least weights merged first, ties to the lower node
/// index, new nodes numbered after the symbols), then limited to [`MAX_CODE`] as deflate
/// encoders do (a code from the longest length moved up one level at a time) and handed out
/// by weight (heaviest shortest, ties to the lower symbol). One used symbol: length 1.
pub fn code_lengths(counts: &[u32; SYMBOLS]) -> [u32; SYMBOLS] {
    let mut lengths = [0u32; SYMBOLS];
    let used = counts.iter().filter(|&&c| c > 0).count();
    if used == 0 {
        return lengths;
    }
    if used == 1 {
        let s = counts.iter().position(|&c| c > 0).unwrap_or(0);
        lengths[s] = 1;
        return lengths;
    }
    // Huffman: nodes 0..SYMBOLS are the symbols, then the merged ones.
    const NODES: usize = 2 * SYMBOLS;
    let mut weight = [0u64; NODES];
    let mut parent = [usize::MAX; NODES];
    let mut alive = [false; NODES];
    for s in 0..SYMBOLS {
        weight[s] = counts[s] as u64;
        alive[s] = counts[s] > 0;
    }
    for next in SYMBOLS..SYMBOLS + used - 1 {
        let mut pick = [usize::MAX; 2];
        for p in &mut pick {
            let mut best = usize::MAX;
            for (i, (&a, &w)) in alive.iter().zip(&weight).enumerate().take(next) {
                if a && (best == usize::MAX || w < weight[best]) {
                    best = i;
                }
            }
            alive[best] = false;
            *p = best;
        }
        weight[next] = weight[pick[0]] + weight[pick[1]];
        parent[pick[0]] = next;
        parent[pick[1]] = next;
        alive[next] = true;
    }
    // Lengths per level, the longest clamped, then the Kraft sum mended.
    let max = MAX_CODE as usize;
    let mut per_length = [0u32; MAX_CODE as usize + 1];
    for (s, &c) in counts.iter().enumerate() {
        if c > 0 {
            let mut depth = 0;
            let mut i = s;
            while parent[i] != usize::MAX {
                i = parent[i];
                depth += 1;
            }
            per_length[depth.min(max)] += 1;
        }
    }
    let mut total: u32 = (1..=max).map(|l| per_length[l] << (max - l)).sum();
    while total > 1 << max {
        per_length[max] -= 1;
        for l in (1..max).rev() {
            if per_length[l] > 0 {
                per_length[l] -= 1;
                per_length[l + 1] += 2;
                break;
            }
        }
        total -= 1;
    }
    // Symbols by weight, heaviest first (ties: lower symbol), take the shortest lengths.
    let mut order: Vec<usize> = (0..SYMBOLS).filter(|&s| counts[s] > 0).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then(a.cmp(&b)));
    let mut l = 1;
    for s in order {
        while per_length[l] == 0 {
            l += 1;
        }
        lengths[s] = l as u32;
        per_length[l] -= 1;
    }
    lengths
}

/// Canonical codes of `lengths` (shorter first, then by symbol), each bit-reversed to its
/// length: the stream is read from bit 0 of each word up, so a code's first bit is its
/// lowest. None where the lengths are no prefix code (Kraft sum above 1, or a length above
/// [`MAX_CODE`]).
pub fn canonical_codes(lengths: &[u32; SYMBOLS]) -> Option<[u32; SYMBOLS]> {
    let mut per_length = [0u32; MAX_CODE as usize + 1];
    for &l in lengths {
        if l > MAX_CODE {
            return None;
        }
        per_length[l as usize] += 1;
    }
    let kraft: u32 = (1..=MAX_CODE as usize)
        .map(|l| per_length[l] << (MAX_CODE as usize - l))
        .sum();
    if kraft > 1 << MAX_CODE {
        return None;
    }
    let mut first = [0u32; MAX_CODE as usize + 2];
    let mut code = 0;
    for l in 1..=MAX_CODE as usize {
        code = (code + per_length[l - 1] * (l > 1) as u32) << 1;
        first[l] = code;
    }
    // (first[l]: the first code of length l, counted after every shorter code.)
    let mut codes = [0u32; SYMBOLS];
    let mut seen = [0u32; MAX_CODE as usize + 1];
    for s in 0..SYMBOLS {
        let l = lengths[s] as usize;
        if l > 0 {
            let c = first[l] + seen[l];
            seen[l] += 1;
            codes[s] = c.reverse_bits() >> (32 - l);
        }
    }
    Some(codes)
}

/// The head's words 4..7: code length of symbol `s` at bits `4 (s % 8)` of word `s / 8`.
pub(super) fn pack_lengths(lengths: &[u32; SYMBOLS]) -> [u32; 3] {
    let mut w = [0u32; 3];
    for (s, &l) in lengths.iter().enumerate() {
        w[s / 8] |= l << (4 * (s % 8));
    }
    w
}

pub(super) fn unpack_lengths(w: &[u32]) -> [u32; SYMBOLS] {
    std::array::from_fn(|s| (w[s / 8] >> (4 * (s % 8))) & 0xf)
}

/// A decode table of a code: for every [`MAX_CODE`]-bit window (read from its bit 0), the
/// symbol and the length of the code it starts with (length 0: no code starts so).
pub fn decode_table(lengths: &[u32; SYMBOLS], codes: &[u32; SYMBOLS]) -> Vec<u32> {
    let mut table = vec![0u32; 1 << MAX_CODE];
    for (i, t) in table.iter_mut().enumerate() {
        for s in 0..SYMBOLS {
            let l = lengths[s];
            if l > 0 && (i as u32) & ((1 << l) - 1) == codes[s] {
                *t = s as u32 | (l << 8);
            }
        }
    }
    table
}
