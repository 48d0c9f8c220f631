//! The tables and step uniforms of the chunked float arrays' kernels: the segments both read
//! ([`LosslessSegment`]), `lossless.wgsl`'s ([`LosslessArray`], [`LosslessStep`]) and
//! `bounded.wgsl`'s ([`BoundedArray`], [`BoundedPass`], [`BoundedStep`]).

use super::*;

wgsl_struct! {
    /// One segment of a lossless or error-bounded float array in the table the
    /// `decode_segments` of `lossless.wgsl` and `bounded.wgsl` read (`segments`): one
    /// invocation decodes it, a round at a time (`shared/segments.wgsl`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct LosslessSegment {
        /// First byte of the segment in the `input_words` binding.
        pub(crate) in_byte: u32,
        /// Bytes of the segment.
        pub(crate) in_len: u32,
        /// First value the segment writes in the `words` binding.
        pub(crate) out_start: u32,
        /// Values of the segment.
        pub(crate) count: u32,
        /// First entry of the segment's decode table in the `luts` binding (2^11 entries:
        /// code length in bits 0..4, token from bit 4).
        pub(crate) lut: u32,
        /// Width of the values in bits (32 or 16; 32 for adjustments).
        pub(crate) width: u32,
        /// The file's index in its batch (its error-flag slot).
        pub(crate) file: u32,
        /// The first of 3 words in the `words` binding where a segment of more than
        /// [`SEGMENT_ROUND`] values keeps its place between rounds, else `u32::MAX`.
        pub(crate) state: u32,
    }
}

wgsl_struct! {
    /// One lossless float array in the table the difference inverse and the finish of
    /// `lossless.wgsl` read (`arrays`).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct LosslessArray {
        /// Values.
        pub(crate) count: u32,
        /// Width of a value in bits (32 or 16).
        pub(crate) width: u32,
        /// Axis 0 (the slowest) of the shape padded to 4 axes with leading 1s.
        pub(crate) shape0: u32,
        /// Axis 1 of the padded shape.
        pub(crate) shape1: u32,
        /// Axis 2 of the padded shape.
        pub(crate) shape2: u32,
        /// Axis 3 (the fastest) of the padded shape.
        pub(crate) shape3: u32,
        /// Bit `a`: the values are differenced along padded axis `a`; bit `4 + a`: along it
        /// a second time.
        pub(crate) axes: u32,
        /// First value of the array in the `words` binding.
        pub(crate) words: u32,
        /// First adjustment in the `words` binding, or `u32::MAX` without float-mult
        /// adjustments.
        pub(crate) adjust: u32,
        /// f32 bits of the float-mult base, 0 for ordered input.
        pub(crate) mult_base: u32,
        /// First run (3 words: start, length, bits) in the `runs` binding.
        pub(crate) runs: u32,
        /// Exception runs.
        pub(crate) run_count: u32,
        /// First word of the array in the `output` binding (two 16-bit values to a word).
        pub(crate) out_word: u32,
        /// The file's index in its batch (its error-flag slot).
        pub(crate) file: u32,
        /// The first of the prefix sums' block carries in the `words` binding (one per block
        /// of each line along the axis being summed).
        pub(crate) carry: u32,
        /// The value table in the `runs` binding (its size, then its entries), or
        /// `u32::MAX` without value-table input.
        pub(crate) table: u32,
    }
}

wgsl_struct! {
    /// The uniform of one `decode_segments` or `undiff` dispatch of `lossless.wgsl`
    /// (`current`, bound at a dynamic offset per dispatch): which round, or which axis and
    /// stage.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct LosslessStep {
        /// `decode_segments`: the round (from 0).
        pub(crate) round: u32,
        /// `undiff`: the padded axis summed along.
        pub(crate) axis: u32,
        /// `undiff`: 0 sums within blocks, 1 the carries, 2 adds them.
        pub(crate) stage: u32,
        /// Padding (0).
        pub(crate) pad0: u32,
    }
}

wgsl_struct! {
    /// One error-bounded array in the table `bounded.wgsl` reads (`arrays`). Its segments
    /// are [`LosslessSegment`]s of width 32.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct BoundedArray {
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
        /// 0: lattice interpolation; 1: differences of bins.
        pub(crate) predictor: u32,
        /// Differences: bit `a`, differenced along padded axis `a`. Lattice: 0.
        pub(crate) axes: u32,
        /// First residual (stream order) in the `words` binding; differences: the bins
        /// after the prefix sums.
        pub(crate) words: u32,
        /// First word of the array in the `output` binding: lattice values (C order), then
        /// the f32 values.
        pub(crate) out_word: u32,
        /// First run (3 words: start, length, bits) in the `tables` binding.
        pub(crate) runs: u32,
        /// Exception runs.
        pub(crate) run_count: u32,
        /// f32 bits of the value of lattice value (or bin) 0.
        pub(crate) offset_bits: u32,
        /// f32 bits of the lattice unit (or bin width).
        pub(crate) unit_bits: u32,
        /// Lattice: every `|x|` must be below this (`lattice_limit`). Differences: 0.
        pub(crate) limit: u32,
        /// First entry of the array's passes in the `passes` binding.
        pub(crate) passes: u32,
        /// Passes of the array, value 0's included (lattice: `L ndim + 1`; differences: 0).
        pub(crate) pass_count: u32,
        /// The file's index in its batch (its error-flag slot).
        pub(crate) file: u32,
        /// Differences: the first of the prefix sums' block carries in the `words` binding
        /// (one per block of each line along the axis being summed).
        pub(crate) carry: u32,
        /// Padding (0).
        pub(crate) pad1: u32,
        /// Padding (0).
        pub(crate) pad2: u32,
    }
}

wgsl_struct! {
    /// One pass of the lattice predictor of one array in the table `bounded.wgsl`'s
    /// `lattice_pass` reads (`passes`). Its targets are a grid of `g0 x g1 x g2 x g3`
    /// values (padded axes, `g0 = count / (g1 g2 g3)`): target `(t0, t1, t2, t3)` is value
    /// `base + sum t_a istep_a` and takes stream position `stream + t`, `t` its C-order rank.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct BoundedPass {
        /// Targets.
        pub(crate) count: u32,
        /// Stream position of the first target (from the array's first residual).
        pub(crate) stream: u32,
        /// [`PASS_ORIGIN`], [`PASS_LINEAR`] or [`PASS_CUBIC`].
        pub(crate) kind: u32,
        /// Lattice units per quantisation step.
        pub(crate) step: u32,
        /// The padded axis predicted along.
        pub(crate) axis: u32,
        /// The stride `s` (coordinate distance to the nearest known neighbours).
        pub(crate) stride: u32,
        /// The axis's length.
        pub(crate) len: u32,
        /// Index distance of the neighbours at `s` (the axis's index stride times `s`).
        pub(crate) dist: u32,
        /// Index of the first target.
        pub(crate) base: u32,
        /// Targets along padded axis 1.
        pub(crate) g1: u32,
        /// Targets along padded axis 2.
        pub(crate) g2: u32,
        /// Targets along padded axis 3.
        pub(crate) g3: u32,
        /// Index step between targets along padded axis 0 (0 with one target along it).
        pub(crate) istep0: u32,
        /// Index step along padded axis 1.
        pub(crate) istep1: u32,
        /// Index step along padded axis 2.
        pub(crate) istep2: u32,
        /// Index step along padded axis 3.
        pub(crate) istep3: u32,
    }
}

wgsl_struct! {
    /// The uniform of one `decode_segments`, `lattice_pass` or `undiff` dispatch of
    /// `bounded.wgsl` (`current`, bound at a dynamic offset per dispatch): which round,
    /// pass, or axis and stage.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct BoundedStep {
        /// `lattice_pass`: the pass (from each array's first).
        pub(crate) pass_index: u32,
        /// `undiff`: the padded axis summed along.
        pub(crate) axis: u32,
        /// `undiff`: 0 sums within blocks, 1 the carries, 2 adds them.
        pub(crate) stage: u32,
        /// `decode_segments`: the round (from 0).
        pub(crate) round: u32,
    }
}
