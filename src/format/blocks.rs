//! The constants of block-coded arrays (SPEC.md, "Block-coded arrays"; the format in code:
//! `field::blocks`), where the GPU kernels' prelude reads them too.

/// Values per block.
pub const BLOCK: usize = 32;
/// Blocks per group: the stream keeps one payload offset per group (a GPU workgroup's 256
/// values), so that every group decodes on its own.
pub const GROUP_BLOCKS: usize = 8;
/// Values per group.
pub const GROUP: usize = BLOCK * GROUP_BLOCKS;
/// Quantised magnitudes `k` are below this (beyond: the block is stored raw).
pub const K_LIMIT: u32 = 1 << 15;
/// Widest bit width of a plain or masked block (zigzag values below 2^16).
pub const WIDTH_MAX: u32 = 16;
/// The stream's first word: `"L3B1"` little-endian.
pub const BLOCKS_MAGIC: u32 = u32::from_le_bytes(*b"L3B1");
/// Words before the group offsets: magic, values, bound bits, payload words.
pub const HEAD_WORDS: usize = 4;
/// Most values one stream holds (its payload offsets are 32-bit word counts).
pub const MAX_VALUES: u64 = (1 << 31) - 1;
/// Block header flag: the block's mask word, then its nonzero values.
pub const FLAG_MASKED: u32 = 0x40;
/// Block header of a raw block (its 32 values' f32 bits).
pub const HEAD_RAW: u32 = 0x80;
/// The low bits of a stored bound that must be zero (an 8-bit significand).
pub const BOUND_LOW_BITS: u32 = 0xffff;
