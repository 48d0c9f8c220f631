// Bit reader shared by the decode stage (as src/codec/bits.rs; CPU twins in gpu/cpu_twin/mod.rs).
//
// decode.wgsl declares `input_words`: the batch's stream bytes as little-endian u32 words, so
// bit i of a stream payload starting at byte `base` is bit ((base % 4) * 8 + i) % 32 of word
// base / 4 + ((base % 4) * 8 + i) / 32. A field may straddle two words.

// One byte of the input.
fn read_byte(byte_index: u32) -> u32 {
    return (input_words[byte_index >> 2u] >> ((byte_index & 3u) * 8u)) & 0xffu;
}

// Reads `n` (0..=16) bits at bit position `p` of the payload that starts at byte `base`.
fn read_bits(base: u32, p: u32, n: u32) -> u32 {
    if (n == 0u) {
        return 0u;
    }
    let abs_bit = (base & 3u) * 8u + p;
    let w = (base >> 2u) + (abs_bit >> 5u);
    let sh = abs_bit & 31u;
    var v = input_words[w] >> sh;
    if (sh + n > 32u) {
        v = v | (input_words[w + 1u] << (32u - sh));
    }
    return v & ((1u << n) - 1u);
}

// The 32 bits at bit position `p` of the payload that starts at byte `base` (a Huffman
// code and its raw bits, at most 25 bits, in one read).
fn read_bits32(base: u32, p: u32) -> u32 {
    let abs_bit = (base & 3u) * 8u + p;
    let w = (base >> 2u) + (abs_bit >> 5u);
    let sh = abs_bit & 31u;
    var v = input_words[w] >> sh;
    if (sh != 0u) {
        v = v | (input_words[w + 1u] << (32u - sh));
    }
    return v;
}
