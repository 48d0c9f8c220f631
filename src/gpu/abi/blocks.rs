//! The uniform of the block-coded arrays' kernels (`shaders/blocks.wgsl`): one encode or
//! decode of one stream ([`BlocksParams`]). The format is `field::blocks` (SPEC.md,
//! "Block-coded arrays"); its constants reach the WGSL through the prelude.

use super::*;

/// Workgroup size of the block kernels: one group of the format (8 blocks of 32 values).
pub(crate) const BLOCKS_WORKGROUP_SIZE: u32 = 256;

wgsl_struct! {
    /// One encode (`blocks_analyse`, `blocks_scan`, `blocks_pack`) or decode
    /// (`blocks_unpack`) of one stream (`bp`). Word offsets are into the bindings: `src`
    /// holds the values (encode) or the stream (decode), `dst` the stream (encode) or the
    /// values (decode).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct BlocksParams {
        /// Values.
        pub(crate) count: u32,
        /// Blocks: `ceil(count / 32)`.
        pub(crate) blocks: u32,
        /// Groups: `ceil(blocks / 8)`.
        pub(crate) groups: u32,
        /// f32 bits of the stored bound.
        pub(crate) e_bits: u32,
        /// f32 bits of `field::blocks::inverse_step` (encode only).
        pub(crate) inv_bits: u32,
        /// First word of the values (encode) or the stream (decode) in `src`.
        pub(crate) src_at: u32,
        /// First word of the stream (encode) or the values (decode) in `dst`.
        pub(crate) dst_at: u32,
        /// Payload words (decode only: the stream's head, checked by the host).
        pub(crate) payload_words: u32,
    }
}
