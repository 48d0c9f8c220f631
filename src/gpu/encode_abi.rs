//! The structs and constants the error-bounded encoder's kernels read
//! (`shaders/encode_*.wgsl`, `shaders/shared/encode_bindings.wgsl`,
//! `shaders/shared/tokenize.wgsl`): the uniform of one encode ([`EncodeParams`]) and the
//! segment table ([`EncodeSegment`]), declared once with `wgsl_struct!` like `gpu::abi`'s.
//! No wgpu here.

#![cfg_attr(not(any(test, feature = "gpu")), allow(dead_code, unused_imports))]

use super::abi::{wgsl_struct, WgslField, WgslStruct, WgslType};

/// Workgroup size of the encode kernels (`ENCODE_WG` in their prelude).
pub(crate) const ENCODE_WORKGROUP_SIZE: u32 = 64;
/// A bin that is not yet known: an exception before the fill (`NO_BIN`).
pub(crate) const NO_BIN: u32 = u32::MAX;
/// Most values of one segment the GPU encoder tokenizes in one invocation (`SEGMENT_MAX`):
/// a segment's tokenizer loop takes at most 1.5 iterations per value (each zero of a run is
/// counted once, each symbol emitted once), so it stays below llvmpipe's 65535 iterations.
pub(crate) const ENCODE_SEGMENT_MAX: u32 = 1 << 15;
/// Values per block of the exception fill at least (`fill_blocks`, `fill_apply`: one
/// invocation walks a block; a multiple of 32, one flag word per 32 values).
pub(crate) const FILL_BLOCK_MIN: u32 = 1 << 12;
/// Most blocks of the exception fill (`fill_carry` walks them in one invocation).
pub(crate) const FILL_BLOCKS_MAX: u32 = 65_504;
/// Values one invocation of `value_range` reads (`RANGE_ITEM`), 64 invocations apart.
pub(crate) const RANGE_ITEM: u32 = 64;
/// Tokens of error-bounded arrays and the longest zero run of one token, from the format
/// (`BOUNDED_ALPHABET`, `BOUNDED_RUN_MAX` in the prelude).
pub(crate) use crate::format::floats::{BOUNDED_ALPHABET, BOUNDED_RUN_MAX};
/// Words of one token histogram in `hist`: a count per token, then the raw bits
/// (`HIST_WORDS`).
pub(crate) const HIST_WORDS: u32 = BOUNDED_ALPHABET + 1;
/// Values one invocation of `estimate` reads (`EST_ITEM`), 64 invocations apart: a
/// workgroup sums the single tokens of `EST_ITEM x 64` values under every axis set.
pub(crate) const EST_ITEM: u32 = 256;
/// Single tokens of 32-bit zigzag values (the format's `SINGLES`; `EST_TOKENS`).
pub(crate) const EST_TOKENS: u32 = crate::format::floats::SINGLES;
/// Words of one `estimate` workgroup's output in `results`: a count per single token, then
/// the raw bits (`EST_WORDS`).
pub(crate) const EST_WORDS: u32 = EST_TOKENS + 1;
/// Words of one `estimate` workgroup's histograms at most, for 15 axis sets
/// (`EST_SETS_WORDS`, its workgroup memory).
pub(crate) const EST_SETS_WORDS: u32 = 15 * EST_WORDS;
/// Words of the block table per block: last regular bin, first regular bin, carried bin.
pub(crate) const FILL_WORDS: u32 = 3;

// The fill's blocks hold whole flag words.
const _: () = assert!(FILL_BLOCK_MIN.is_multiple_of(32) && FILL_BLOCKS_MAX.is_multiple_of(32));

wgsl_struct! {
    /// The uniform of one encode (`params`): the array, its bin rule and the tables' sizes.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct EncodeParams {
        /// Values.
        pub(crate) count: u32,
        /// Axis 0 (the slowest) of the shape padded to 4 axes with leading 1s.
        pub(crate) shape0: u32,
        /// Axis 1 of the padded shape.
        pub(crate) shape1: u32,
        /// Axis 2 of the padded shape.
        pub(crate) shape2: u32,
        /// Axis 3 (the fastest) of the padded shape.
        pub(crate) shape3: u32,
        /// Bit `a`: difference along padded axis `a`.
        pub(crate) axes: u32,
        /// f32 bits of the value of bin 0.
        pub(crate) offset_bits: u32,
        /// f32 bits of the bin width.
        pub(crate) width_bits: u32,
        /// f32 bits of `fl32(1 / width)`.
        pub(crate) inv_bits: u32,
        /// f32 bits of the largest f32 at most the bound.
        pub(crate) bound_bits: u32,
        /// f32 bits of the fill value.
        pub(crate) fill_bits: u32,
        /// 1: a fill value is declared.
        pub(crate) has_fill: u32,
        /// Values per block of the exception fill (a multiple of 32).
        pub(crate) block: u32,
        /// Blocks of the exception fill.
        pub(crate) blocks: u32,
        /// Entries of the segment table.
        pub(crate) segments: u32,
        /// First word of the exception flags in the `fill` binding (after the blocks).
        pub(crate) flags_at: u32,
        /// `estimate`: the axis sets estimated (`2^ndim - 1`, sets 1 to `2^ndim - 1` of the
        /// array's own axes), or 0.
        pub(crate) sets: u32,
        /// Leading axes of 1 the shape is padded with (`4 - ndim`).
        pub(crate) pad_axes: u32,
        /// Padding (0).
        pub(crate) pad1: u32,
        /// Padding (0).
        pub(crate) pad2: u32,
    }
}

wgsl_struct! {
    /// One segment in the table `histogram` and `pack` read (`segs`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct EncodeSegment {
        /// First value of the segment in the residual stream.
        pub(crate) start: u32,
        /// Values of the segment (at most [`ENCODE_SEGMENT_MAX`]).
        pub(crate) count: u32,
        /// `pack`: the token set (0 singles, 1 with pairs, 2 with pairs and zero runs).
        pub(crate) token_set: u32,
        /// `pack`: the first entry of the chunk's code table in `codes` (entry `t`: the
        /// bit-reversed code of token `t` in bits 0..16, its length from bit 16).
        pub(crate) codes: u32,
        /// `pack`: the first word of the segment's bits in `results`.
        pub(crate) out_word: u32,
        /// Padding (0).
        pub(crate) pad0: u32,
        /// Padding (0).
        pub(crate) pad1: u32,
        /// Padding (0).
        pub(crate) pad2: u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated WGSL structs have the Rust layout (naga), the uniform a multiple of 16
    /// bytes.
    /// (The constants shared with the format are held to it by `field::bounded`'s tests.)
    #[test]
    fn structs_and_constants_match() {
        super::super::abi::assert_wgsl_layout(&EncodeParams::WGSL_STRUCT);
        super::super::abi::assert_wgsl_layout(&EncodeSegment::WGSL_STRUCT);
        assert_eq!(size_of::<EncodeParams>() % 16, 0, "a uniform");
    }
}
