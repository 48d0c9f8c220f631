//! The job tables of the data-side stages' kernels: `augment.wgsl` ([`AugmentJob`]),
//! `fields.wgsl` ([`FieldJob`]), `levels.wgsl` ([`LevelJob`]) and `tensor_window.wgsl`
//! ([`TensorWindowJob`], with its [`element`] types).

use super::*;

wgsl_struct! {
    /// One image's job in the table `augment.wgsl` reads (`jobs`; see `gpu::jobs`).
    #[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct AugmentJob {
        /// Source image width.
        pub(crate) width: u32,
        /// Source image height.
        pub(crate) height: u32,
        /// Source image channels.
        pub(crate) channels: u32,
        /// Source bits per sample (8 or 16).
        pub(crate) depth: u32,
        /// Crop column.
        pub(crate) crop_x: u32,
        /// Crop row.
        pub(crate) crop_y: u32,
        /// Crop width.
        pub(crate) crop_w: u32,
        /// Crop height.
        pub(crate) crop_h: u32,
        /// Output width.
        pub(crate) out_w: u32,
        /// Output height.
        pub(crate) out_h: u32,
        /// Output channels.
        pub(crate) out_c: u32,
        /// 1: flip horizontally.
        pub(crate) flip: u32,
        /// First output element in the dispatch's output binding, in f32 elements (in u32
        /// words for f16 output).
        pub(crate) dst_offset: u32,
        /// Output channel c reads source channel `(this >> (8c)) & 0xff`.
        pub(crate) source_channels: u32,
        /// Quarter turns after the flip.
        pub(crate) rot90: u32,
        /// Crop coordinates are in the image padded by this much.
        pub(crate) padding: u32,
        /// Noise seed (0: no noise).
        pub(crate) noise_seed: u32,
        /// 1: the per-pixel mapping (turns, rotation, padding).
        pub(crate) general: u32,
        /// 1: f16 output, two values per u32 word (`dst_offset` then in words).
        pub(crate) half: u32,
        /// First word of the image in the dispatch's source binding.
        pub(crate) src_offset: u32,
        /// First workgroup of the job in its dispatch.
        pub(crate) wg_base: u32,
        /// Workgroups of the job.
        pub(crate) wg_count: u32,
        /// Padding.
        pub(crate) pad0: u32,
        /// Padding.
        pub(crate) pad1: u32,
        /// Cosine of the rotation angle.
        pub(crate) cos_a: f32,
        /// Sine of the rotation angle.
        pub(crate) sin_a: f32,
        /// Value of padding pixels.
        pub(crate) fill: f32,
        /// Standard deviation of the Gaussian noise.
        pub(crate) noise_std: f32,
        /// Per-channel normalisation mean.
        pub(crate) mean: [f32; 4],
        /// Per-channel normalisation standard deviation.
        pub(crate) std_dev: [f32; 4],
    }
}

wgsl_struct! {
    /// One field's job in the table `fields.wgsl` reads (`jobs`; see `gpu::jobs`).
    #[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct FieldJob {
        /// Values.
        pub(crate) count: u32,
        /// Exception runs.
        pub(crate) run_count: u32,
        /// f32 bits of the value of bin 0.
        pub(crate) offset_bits: u32,
        /// f32 bits of the bin width (8 significant bits).
        pub(crate) bin_bits: u32,
        /// First word of the bin image in the dispatch's `bins` binding.
        pub(crate) bins_offset: u32,
        /// First word of the runs in the dispatch's `runs` binding.
        pub(crate) runs_offset: u32,
        /// First value in the dispatch's `values` binding.
        pub(crate) values_offset: u32,
        /// First workgroup of the job in its dispatch.
        pub(crate) wg_base: u32,
        /// Workgroups of the job.
        pub(crate) wg_count: u32,
    }
}

wgsl_struct! {
    /// One record's job in the table `levels.wgsl` reads (`jobs`; see `gpu::jobs`).
    #[derive(Debug, Clone, Copy, Default, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct LevelJob {
        /// Output (fine) width.
        pub(crate) width: u32,
        /// Output (fine) height.
        pub(crate) height: u32,
        /// Channels.
        pub(crate) channels: u32,
        /// Bits per sample (8 or 16).
        pub(crate) depth: u32,
        /// Lattice stride (`subsample` only).
        pub(crate) stride: u32,
        /// Source width (`subsample` only).
        pub(crate) src_width: u32,
        /// First word of the source (coarse) image in the dispatch's `src` binding.
        pub(crate) src_offset: u32,
        /// First word of the residual image in the dispatch's `residual` binding
        /// (`refine` only).
        pub(crate) residual_offset: u32,
        /// First word of the output image in the dispatch's `dst` binding.
        pub(crate) dst_offset: u32,
        /// First workgroup of the job in its dispatch.
        pub(crate) wg_base: u32,
        /// Workgroups of the job.
        pub(crate) wg_count: u32,
        /// Padding.
        pub(crate) pad0: u32,
    }
}

/// Element types `tensor_window.wgsl` reads ([`TensorWindowJob::element`]; `ELEMENT_*` in
/// its generated prelude): each widened to f32 by integer steps.
pub(crate) mod element {
    /// IEEE binary32, 4 bytes.
    pub const F32: u32 = 0;
    /// IEEE binary16, 2 bytes.
    pub const F16: u32 = 1;
    /// bfloat16, 2 bytes.
    pub const BF16: u32 = 2;
    /// Unsigned 8-bit.
    pub const U8: u32 = 3;
    /// Signed 8-bit.
    pub const I8: u32 = 4;
    /// Unsigned 16-bit.
    pub const U16: u32 = 5;
    /// Signed 16-bit.
    pub const I16: u32 = 6;
    /// Unsigned 32-bit.
    pub const U32: u32 = 7;
    /// Signed 32-bit.
    pub const I32: u32 = 8;
}

wgsl_struct! {
    /// One array of one sample in the table `tensor_window.wgsl` reads (`jobs`; see
    /// `gpu::jobs`): the array (leading axes `lead`, then 3 spatial axes, a 2-D array padded
    /// with a leading axis of 1) in source binding `source`, the window cut out of it, and
    /// where its values go.
    #[derive(Debug, Clone, Copy, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    pub(crate) struct TensorWindowJob {
        /// Source binding: 0, 1 or 2 (`src0` .. `src2`).
        pub(crate) source: u32,
        /// Element type (`element`).
        pub(crate) element: u32,
        /// First word of the array in its source binding.
        pub(crate) src_offset: u32,
        /// Product of the leading axes.
        pub(crate) lead: u32,
        /// Spatial extent, axis 0 (the slowest).
        pub(crate) extent0: u32,
        /// Spatial extent, axis 1.
        pub(crate) extent1: u32,
        /// Spatial extent, axis 2 (the fastest).
        pub(crate) extent2: u32,
        /// Window origin, axis 0.
        pub(crate) origin0: u32,
        /// Window origin, axis 1.
        pub(crate) origin1: u32,
        /// Window origin, axis 2.
        pub(crate) origin2: u32,
        /// Window size, axis 0.
        pub(crate) size0: u32,
        /// Window size, axis 1.
        pub(crate) size1: u32,
        /// Window size, axis 2 (equal to `size1` where `rot90` is not 0).
        pub(crate) size2: u32,
        /// Bit `a`: spatial axis `a` reversed.
        pub(crate) flips: u32,
        /// Quarter turns of axes 1 and 2, as `numpy.rot90`.
        pub(crate) rot90: u32,
        /// 1: normalise by `mean` and `scale`.
        pub(crate) normalise: u32,
        /// Mean (f32, not subnormal).
        pub(crate) mean: f32,
        /// `1 / std` (f32, normal).
        pub(crate) scale: f32,
        /// 1: f16 output, two values to a u32 word.
        pub(crate) half: u32,
        /// First output value in the dispatch's `dst` binding (f32 values, or f16 values
        /// counted in halves of words).
        pub(crate) dst_offset: u32,
        /// Output values: `lead` x the window's.
        pub(crate) count: u32,
        /// First workgroup of the job in its dispatch.
        pub(crate) wg_base: u32,
        /// Workgroups of the job.
        pub(crate) wg_count: u32,
        /// Padding (0).
        pub(crate) pad0: u32,
    }
}
