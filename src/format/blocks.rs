//! The constants of block-coded arrays (SPEC.md, "Block-coded arrays"; the format in code:
//! `field::blocks`), where the GPU kernels' prelude reads them too.

/// Values per block: a block's bits start on a byte, and one GPU invocation decodes it.
pub const BLOCK: usize = 32;
/// Blocks per group: the stream keeps one payload word offset per group (a GPU encode
/// workgroup's 256 values).
pub const GROUP_BLOCKS: usize = 8;
/// Values per group.
pub const GROUP: usize = BLOCK * GROUP_BLOCKS;
/// Quantised magnitudes `k` are below this (beyond: the value is escaped).
pub const K_LIMIT: u32 = 1 << 15;
/// Symbols of the code: a residual's bit length `L` (0 to 17; `L - 1` more bits follow for
/// `L >= 2`), and [`ESCAPE`] (the value's 32 bits follow).
pub const SYMBOLS: usize = 19;
/// The escape symbol.
pub const ESCAPE: u32 = 18;
/// Longest Huffman code.
pub const MAX_CODE: u32 = 11;
/// Longest block in bytes (every value escaped with the longest code).
pub const MAX_BLOCK_BYTES: u32 = (BLOCK as u32 * (MAX_CODE + 32)).div_ceil(8);
/// Bits a block costs beside its values' in the encoder's comparison of strides: its
/// length byte and half a byte of padding.
pub const BLOCK_COST: u32 = 12;
/// The stream's first word: `"L3B2"` little-endian.
pub const BLOCKS_MAGIC: u32 = u32::from_le_bytes(*b"L3B2");
/// Words before the group offsets: magic, values, bound bits, payload words, the code
/// lengths (4 bits a symbol, symbol `s` at bits `4 (s % 8)` of word `4 + s / 8`), the
/// stride (0: no prediction; else blocks run `stride` values apart, each value predicted by
/// the one before it in its block).
pub const HEAD_WORDS: usize = 8;
/// Most values one stream holds (its payload offsets are 32-bit word counts).
pub const MAX_VALUES: u64 = (1 << 30) - 1;
/// The low bits of a stored bound that must be zero (an 8-bit significand).
pub const BOUND_LOW_BITS: u32 = 0xffff;

const _: () = assert!(MAX_BLOCK_BYTES <= 255);
