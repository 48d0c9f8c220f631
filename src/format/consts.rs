//! The container's constants, each named once: signature, versions, header fields and their
//! offsets, patch sizes, the largest dimension and error bound. A leaf: [`super::container`]
//! re-exports it and [`crate::limits`] reads [`MAX_DIMENSION`] from it.

/// File signature: like PNG's, it catches 7-bit transfers and CRLF/LF conversions.
pub const MAGIC: [u8; 8] = [0x89, b'L', b'3', b'I', 0x0D, 0x0A, 0x1A, 0x0A];
/// Format version of the *fast* profile: fixed-width rows, as in the L3 paper.
pub const VERSION_FAST: u8 = 1;
/// Format version of the *compact* profile: Huffman-coded residual segments.
pub const VERSION_COMPACT: u8 = 2;
/// The newest format version this crate reads and writes (it reads every version from 1).
pub const VERSION_LATEST: u8 = VERSION_COMPACT;
/// Header length in bytes.
pub const HEADER_LEN: usize = 24;

/// Byte offset of the version field.
pub const OFFSET_VERSION: usize = 8;
/// Byte offset of the flags field (one flag is defined: [`FLAG_ERROR_BOUNDED`]; any other set
/// bit is an error).
pub const OFFSET_FLAGS: usize = 9;
/// Flag: the samples are bins of an error-bounded image ([`OFFSET_MAX_ERROR`] holds the bound;
/// see `crate::quantize`). Set if and only if the bound is not zero.
pub const FLAG_ERROR_BOUNDED: u8 = 1;
/// Byte offset of the channel count.
pub const OFFSET_CHANNELS: usize = 10;
/// Byte offset of the bit depth.
pub const OFFSET_DEPTH: usize = 11;
/// Byte offset of the width (u32 little-endian).
pub const OFFSET_WIDTH: usize = 12;
/// Byte offset of the height (u32 little-endian).
pub const OFFSET_HEIGHT: usize = 16;
/// Byte offset of log2(patch size).
pub const OFFSET_PATCH_LOG2: usize = 20;
/// Byte offset of the reserved byte (must be zero).
pub const OFFSET_RESERVED: usize = 21;
/// Byte offset of the error bound (u16 little-endian): 0 for a lossless file, else the
/// largest difference between a decoded and an original sample, 1..=2^(depth-1)-1.
pub const OFFSET_MAX_ERROR: usize = 22;

/// Bytes per size-table entry (u32 little-endian).
pub const SIZE_ENTRY_LEN: usize = 4;
/// Bytes of the trailing CRC-32.
pub const CHECKSUM_LEN: usize = 4;

/// Smallest log2 patch size (8x8 patches).
pub const PATCH_LOG2_MIN: u8 = 3;
/// Largest log2 patch size (128x128 patches; one GPU invocation per column stays <= 128).
pub const PATCH_LOG2_MAX: u8 = 7;
/// Default log2 patch size (64x64, as in the L3 paper).
pub const PATCH_LOG2_DEFAULT: u8 = 6;

/// Largest width or height the format allows (2^24 - 1).
pub const MAX_DIMENSION: u32 = (1 << 24) - 1;

/// The largest error bound a file of `depth` bits may state: half the sample range, less one
/// (beyond it every sample would fall in one or two bins).
pub const fn max_error_limit(depth: u8) -> u16 {
    ((1u32 << (depth - 1)) - 1) as u16
}
