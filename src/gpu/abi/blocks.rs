//! The uniform of the block-coded arrays' kernels (`shaders/blocks.wgsl`): one encode or
//! decode of one stream ([`BlocksParams`]), and the layout of their scratch buffer. The
//! format is `field::blocks` (SPEC.md, "Block-coded arrays"); its constants reach the WGSL
//! through the prelude.

use super::*;

/// Workgroup size of the block kernels: an encode workgroup is one group of the format (8
/// blocks of 32 values); a decode workgroup decodes 256 blocks, one an invocation.
pub(crate) const BLOCKS_WORKGROUP_SIZE: u32 = 256;
/// Words of the kernels' scratch buffer: the decode's error flags (word 0), the encode's
/// histograms of the three predictions (words 1 to 57, 19 each), the chosen code (64 to
/// 82), its lengths (84 to 102) and stride (104).
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub(crate) const BLOCKS_SCRATCH_WORDS: u32 = 128;

wgsl_struct! {
    /// One encode (`blocks_histogram`, `blocks_code`, `blocks_sizes`, `blocks_scan`,
    /// `blocks_pack`) or decode (`blocks_decode`) of one stream (`bp`). Word offsets are into
    /// the bindings: `src` holds the values (encode) or the stream (decode), `dst` the
    /// stream (encode) or the values (decode).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct BlocksParams {
        /// Values.
        pub(crate) count: u32,
        /// f32 bits of the stored bound.
        pub(crate) e_bits: u32,
        /// f32 bits of `field::blocks::inverse_step` (encode).
        pub(crate) inv_bits: u32,
        /// First word of the values (encode) or the stream (decode) in `src`.
        pub(crate) src_at: u32,
        /// First word of the stream (encode) or the values (decode) in `dst`.
        pub(crate) dst_at: u32,
        /// The column stride the encoder may pick (0 or 1: none beyond 1).
        pub(crate) offer: u32,
        /// The stream's stride (decode).
        pub(crate) stride: u32,
        /// The stream's blocks (decode).
        pub(crate) blocks: u32,
        /// The stream's groups (decode).
        pub(crate) groups: u32,
        /// The stream's payload words (decode).
        pub(crate) payload_words: u32,
        /// Padding.
        pub(crate) pad0: u32,
        /// Padding.
        pub(crate) pad1: u32,
    }
}
