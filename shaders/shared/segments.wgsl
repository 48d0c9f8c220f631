// The token decode of the float arrays' segments, in rounds: the first stage of
// lossless.wgsl and bounded.wgsl. CPU twin: gpu/cpu_twin/segments.rs. The shader that
// includes this file declares `segments` (array<LosslessSegment>), `tables` (the decode
// tables: 2^11 entries each, code length | token << 4), `words` (array<u32>, read_write)
// and `errors` (array<atomic<u32>>); bits come from shared/bits.wgsl.
//
// Tokens of a segment of `width`-bit values (SPEC.md, "Lossless float arrays" and
// "Error-bounded float arrays"): the first 16 + 2 (width - 4) are single values (a base and
// raw bits), the next `pairs` are pairs of zigzag values below BOUNDED_PAIR_LIMIT (16 for
// error-bounded arrays, none for lossless ones), the rest zero runs of 2^j + raw(j bits)
// values. Values are stored as residuals (the inverse zigzag, mod 2^32).
//
// A round decodes up to SEGMENT_ROUND further values of a segment, one symbol or one zero of
// a run a loop iteration, so no invocation loops past llvmpipe's 65535 iterations. (No inner
// loop for a run's zeros: with one, lavapipe stopped short of a 2^15-value round of singles,
// as if every symbol cost two iterations.) A segment
// of more values keeps its bit position, value and zeros left in the 3 words of `words`
// from `seg.state` (u32::MAX: one round); one that has ended keeps `i == count` there. The
// checks at its end (trailing bits, padding) run in the round that ends it.

// A single value's base and raw bit count at `width` bits.
struct TokenBase {
    base: u32,
    nraw: u32,
}

fn single_base(token: u32) -> TokenBase {
    if (token < 16u) {
        return TokenBase(token, 0u);
    }
    let n = 4u + (token - 16u) / 2u;
    return TokenBase((1u << n) | (((token - 16u) & 1u) << (n - 1u)), n - 1u);
}

// The inverse zigzag, mod 2^32.
fn unzig(z: u32) -> u32 {
    return (z >> 1u) ^ (0u - (z & 1u));
}

// Round `round` of segment `seg` with `pairs` pair tokens; a stream error ORs
// ERR_OVERRUN (a symbol, pair or zero run past the segment's end) or ERR_TRAILING (the
// symbols do not end in the last byte, or the padding is not zero) into its file's slot.
fn decode_round(seg: LosslessSegment, round: u32, pairs: u32) {
    let total = seg.in_len * 8u;
    let singles = 16u + 2u * (seg.width - 4u);
    var pos = 0u;
    var i = 0u;
    var zeros = 0u;
    if (round > 0u) {
        if (seg.state == 0xffffffffu) {
            return;
        }
        pos = words[seg.state];
        i = words[seg.state + 1u];
        zeros = words[seg.state + 2u];
        if (i >= seg.count) {
            return;
        }
    }
    let end = min(seg.count, i + SEGMENT_ROUND);
    var bad = 0u;
    for (var it = 0u; it < SEGMENT_ROUND; it++) {
        if (i >= end) {
            break;
        }
        let out = seg.out_start + i;
        if (zeros > 0u) {
            words[out] = 0u;
            zeros -= 1u;
            i += 1u;
            continue;
        }
        let peek = read_bits32(seg.in_byte, pos);
        let e = tables[seg.lut + (peek & 2047u)];
        let cl = e & 15u;
        let token = e >> 4u;
        if (token < singles) {
            let t = single_base(token);
            let raw = read_bits32(seg.in_byte, pos + cl) & ((1u << t.nraw) - 1u);
            pos += cl + t.nraw;
            if (pos > total) {
                bad = ERR_OVERRUN;
                break;
            }
            words[out] = unzig(t.base + raw);
            i += 1u;
        } else if (token < singles + pairs) {
            pos += cl;
            if (pos > total || seg.count - i < 2u) {
                bad = ERR_OVERRUN;
                break;
            }
            let p = token - singles;
            words[out] = unzig(p / BOUNDED_PAIR_LIMIT);
            words[out + 1u] = unzig(p % BOUNDED_PAIR_LIMIT);
            i += 2u;
        } else {
            let j = token - singles - pairs + 1u;
            let v = (1u << j) + (read_bits32(seg.in_byte, pos + cl) & ((1u << j) - 1u));
            pos += cl + j;
            if (pos > total || v > seg.count - i) {
                bad = ERR_OVERRUN;
                break;
            }
            words[out] = 0u;
            zeros = v - 1u;
            i += 1u;
        }
    }
    if (bad == 0u && i < seg.count) {
        words[seg.state] = pos;
        words[seg.state + 1u] = i;
        words[seg.state + 2u] = zeros;
        return;
    }
    let tail = pos % 8u != 0u && (read_byte(seg.in_byte + pos / 8u) >> (pos % 8u)) != 0u;
    if (bad == 0u && ((pos + 7u) / 8u != seg.in_len || tail)) {
        bad = ERR_TRAILING;
    }
    if (bad != 0u) {
        atomicOr(&errors[seg.file], bad);
    }
    if (seg.state != 0xffffffffu) {
        words[seg.state + 1u] = seg.count;
    }
}
