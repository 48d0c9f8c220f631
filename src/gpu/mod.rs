//! The GPU engine: WGSL compute shaders run through wgpu decode a batch of L3 files into one
//! GPU buffer, and run the kernels that the data side's GPU stages build on (the wgpu parts
//! need the `gpu` feature; the ABI and the layout types do not). The engine knows devices,
//! buffers, batch plans, kernels and their ABI structs, and nothing of datasets: a stage
//! that uses a kernel for its own data (level refinement, field reconstruction,
//! augmentation) lives with that data, turns its own parameters into the ABI structs of
//! `abi` and calls the kernel module's dispatch (see `ARCHITECTURE.md`).
//!
//! Pipeline, per chunk of the batch (one submission each), two stages:
//! 1. `prefix_sum.wgsl`: the size tables of all the chunk's files, scanned into byte offsets
//!    of the streams in the uploaded stream bytes (multi-level, any number of streams);
//! 2. the decode, each sample written straight to the output, with no intermediate buffer
//!    and no store pass. Version-1 files: (patch, channel) streams, rows in order; a
//!    workgroup of 64 invocations decodes 64 / patch size patches, every channel of each
//!    (one patch when 64 or 128 wide: [`patches_per_workgroup`]), and writes each
//!    interleaved row as whole words; `shaders/shared/decode_streams.wgsl`. Version-2
//!    files: one workgroup per patch stream; invocation 0 checks the header and builds the
//!    Huffman tables in workgroup memory, then one invocation per (channel, segment) decodes
//!    the residuals of the next row of its segment and the workgroup reconstructs those rows
//!    (a workgroup prefix sum for left-type predictors); `shaders/shared/decode_compact.wgsl`.
//!    A batch may mix both versions: each chunk's image table lists version-1 images first,
//!    and each version's entry point (`main`, `main_compact`) is dispatched over its images'
//!    workgroups ([`workgroups_of`]), so that each pipeline reserves only its own workgroup
//!    memory. The entry points (`shaders/decode.wgsl`) and the decode bodies are shared by
//!    every output layout; each layout adds one file in `shaders/output/` with its output
//!    binding and `put_sample` (the shader assembler, `shaders.rs`, concatenates them):
//!    - `output/interleaved.wgsl` for [`OutputLayout::Interleaved`]: each sample is ORed
//!      (`atomicOr`) into its u32 output word (four u8 or two u16 samples to a word, shared by
//!      neighbouring streams);
//!    - `output/f32_chw.wgsl` for [`OutputLayout::F32Chw`]: each sample, normalised as
//!      [`Normalize::apply`] does, to its own element of the planar output.
//!
//! The output buffer is cleared once per batch, before the first chunk's decode, so the ORs
//! start from zero and the alignment padding between images is 0 (0.0).
//!
//! Per-stage GPU times: on a device with [`wgpu::Features::TIMESTAMP_QUERY`] (which
//! [`GpuDecoder::with_adapter`] and [`GpuDecoder::new_default`] request when the adapter has
//! it), [`GpuDecoder::set_timing`] or [`GpuDecoder::decode_batch_timed`] write timestamps
//! around each stage and return the sums as [`StageTimings`]. Without timing (the default),
//! nothing extra is recorded or read back.
//!
//! Headers and size tables are validated on the CPU first ([`crate::format::parse_file`]:
//! the CPU decoder's errors, for the first bad file, prefixed with its index in the batch:
//! see [`GpuDecoder::decode_batch`]); the shaders check the streams themselves and report
//! inconsistencies as flag bits per image ([`flags`]), returned as
//! [`crate::error::FormatError::GpuReported`].
//!
//! Batches whose buffers would exceed the device's `max_storage_buffer_binding_size` are split
//! into chunks (one submission each) transparently. A single image whose own buffers exceed
//! it is split into bands of whole patch rows for [`OutputLayout::Interleaved`] output; for
//! [`OutputLayout::F32Chw`] output (whose bands would not be contiguous), and when even one
//! patch row does not fit, it is refused with [`crate::error::LimitsError::GpuBuffer`]. There is no
//! intermediate buffer: a chunk's largest buffers are its output binding (1, 2 or 4 bytes
//! per sample plus the alignment padding) and its stream data.
//!
//! To decode many files with per-file errors, byte-budgeted batches and buffers reused
//! between batches, use [`Batcher`].
//!
//! Modules: `abi` (every struct a shader reads, declared once with `wgsl_struct!` and
//! generated into WGSL; the error flags and workgroup constants), `plan` (the batch plan:
//! output positions, bands and chunks; CPU only), `shaders` (the WGSL assembler: generated
//! constants and structs, shared sources, the stage's file), `cpu_twin` (test-only CPU ports
//! of the decode kernels, one file per WGSL file). With the `gpu` feature: `device` (adapter,
//! limits, pipelines), `decoder` ([`GpuDecoder`]), `upload` (submission and scratch buffers),
//! `map` (buffer maps as futures), `readback` ([`GpuBatch`]), `timing` ([`StageTimings`]),
//! `batcher` ([`Batcher`]), `bindings` (every planned range checked against its buffer and
//! the device's limits before a bind group exists), the kernels' dispatch for the data side
//! (`augment`, `fields`, `levels`, `tensor_window`: one dispatch per stage per batch, through
//! `jobs`, the job table each workgroup finds its job in; `lossless`: the lossless float
//! arrays' three stages over whole-buffer tables, a sub-batch per group of arrays that fits
//! the device's bindings; `bounded`: the error-bounded arrays' (`.l3f` version 3) token
//! decode, prefix sums or lattice passes, and finish, split the same way), and `interop`
//! (feature `interop`: [`GpuBatch`] memory exported to CUDA or another process), and
//! `encoder` ([`GpuEncoder`]: the error-bounded encoder's kernels, `shaders/encode_*.wgsl`,
//! their structs in `encode_abi`; the data side is `field::bounded::gpu_encode`). Without the
//! `gpu` feature only the ABI ([`ImageInfo`], [`Params`], [`flags`], the workgroup constants)
//! and the layout types are here.
//!
//! ```no_run
//! # #[cfg(feature = "gpu")] {
//! use l3::gpu::{GpuDecoder, OutputLayout};
//! let decoder = GpuDecoder::new_default()?;
//! println!("adapter: {}", decoder.adapter_name());
//! let file = std::fs::read("image.l3")?;
//! let batch = decoder.decode_batch(&[&file], OutputLayout::Interleaved)?;
//! let pixels: Vec<Vec<u8>> = batch.read_back()?;
//! # }
//! # Ok::<(), l3::Error>(())
//! ```

pub(crate) mod abi;
#[cfg(feature = "gpu")]
pub(crate) mod augment;
#[cfg(feature = "gpu")]
pub mod budget;
#[cfg(test)]
pub(crate) mod cpu_twin;
pub(crate) mod encode_abi;
#[cfg(any(test, feature = "gpu"))]
pub(crate) mod line_sum;
#[cfg(any(test, feature = "gpu"))]
mod plan;
#[cfg(any(test, feature = "gpu"))]
mod shaders;

#[cfg(feature = "gpu")]
mod batcher;
#[cfg(feature = "gpu")]
pub(crate) mod bindings;
#[cfg(feature = "gpu")]
mod blocks;
#[cfg(feature = "gpu")]
pub(crate) mod bounded;
#[cfg(feature = "gpu")]
pub(crate) mod chunked;
#[cfg(feature = "gpu")]
mod counters;
#[cfg(feature = "gpu")]
mod decoder;
#[cfg(feature = "gpu")]
mod device;
#[cfg(feature = "gpu")]
mod encoder;
#[cfg(feature = "gpu")]
pub(crate) mod fields;
#[cfg(all(feature = "interop", unix))]
pub mod interop;
#[cfg(feature = "gpu")]
pub(crate) mod jobs;
#[cfg(feature = "gpu")]
pub(crate) mod levels;
#[cfg(feature = "gpu")]
pub(crate) mod lossless;
#[cfg(feature = "gpu")]
mod map;
#[cfg(feature = "gpu")]
pub(crate) mod readback;
#[cfg(feature = "gpu")]
pub(crate) mod tensor_window;
#[cfg(feature = "gpu")]
mod timing;
#[cfg(feature = "gpu")]
mod upload;

#[cfg(test)]
pub(crate) mod tests;

pub use crate::layout::{Normalize, OutputLayout, SampleType};
pub use abi::{
    flags, patches_per_workgroup, workgroups_of, ImageInfo, Params, DECODE_WORKGROUP_SIZE,
};

#[cfg(feature = "gpu")]
pub use batcher::{Batcher, BatcherStats, Decoded, FileError, FileResult, DEFAULT_BUDGET};
#[cfg(feature = "gpu")]
pub use blocks::GpuBlocks;
#[cfg(feature = "gpu")]
pub(crate) use blocks::{BlocksBuffer, BlocksJob};
#[cfg(feature = "gpu")]
pub use counters::Counts;
#[cfg(feature = "gpu")]
pub use decoder::{Context, GpuDecoder};
#[cfg(feature = "gpu")]
pub use device::{required_limits, select_adapter};
#[cfg(feature = "gpu")]
pub use encoder::GpuEncoder;
#[cfg(feature = "gpu")]
pub(crate) use encoder::{read_values, upload_values, EncodeInput, EncodeRun};
#[cfg(feature = "gpu")]
pub use readback::{GpuBatch, ImageLayout, StagedBuffer};
#[cfg(feature = "gpu")]
pub use timing::StageTimings;

/// The stages' planners and the binding check, as pure functions for the fuzz targets
/// (`fuzz/fuzz_targets/gpu_plan.rs`); not a stable API.
#[cfg(feature = "gpu")]
#[doc(hidden)]
pub mod fuzzing {
    pub use super::bindings::{check_bindings, BindLimits, Binding};
}
