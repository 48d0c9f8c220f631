//! GPU decoder: WGSL compute shaders run through wgpu decode a batch of L3 files into one GPU
//! buffer.
//!
//! Pipeline, per chunk of the batch (one submission each), two stages:
//! 1. `prefix_sum.wgsl`: the size tables of all the chunk's files, scanned into byte offsets
//!    of the streams in the uploaded stream bytes (multi-level, any number of streams);
//! 2. the decode, each sample written straight to the output, with no intermediate buffer
//!    and no store pass. Version-1 files: (patch, channel) streams, rows in order; a
//!    workgroup of 64 invocations decodes 64 / patch size streams (one for 64- and 128-wide
//!    patches: [`streams_per_workgroup`]); `shaders/shared/decode_streams.wgsl`. Version-2
//!    files: one workgroup per patch stream; invocation 0 checks the header and builds the
//!    Huffman tables in workgroup memory, then one invocation per (channel, segment) decodes
//!    the residuals of the next row of its segment and the workgroup reconstructs those rows
//!    (a workgroup prefix sum for left-type predictors); `shaders/shared/decode_compact.wgsl`.
//!    A batch may mix both versions: each chunk's image table lists version-1 images first,
//!    and each version's entry point (`main`, `main_compact`) is dispatched over its images'
//!    workgroups ([`workgroups_of`]), so that each pipeline reserves only its own workgroup
//!    memory. Two stages share the decode bodies:
//!    - `decode.wgsl` for [`OutputFormat::Interleaved`] output: each sample is ORed
//!      (`atomicOr`) into its u32 output word (four u8 or two u16 samples to a word, shared by
//!      neighbouring streams);
//!    - `decode_f32_chw.wgsl` for [`OutputFormat::F32Chw`] output: each normalised sample to
//!      its own element of the planar output.
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
//! [`FormatError::GpuReported`].
//!
//! Batches whose buffers would exceed the device's `max_storage_buffer_binding_size` are split
//! into chunks (one submission each) transparently. A single image whose own buffers exceed
//! it is split into bands of whole patch rows for [`OutputFormat::Interleaved`] output; for
//! [`OutputFormat::F32Chw`] output (whose bands would not be contiguous), and when even one
//! patch row does not fit, it is refused with [`LimitsError::GpuBuffer`]. There is no
//! intermediate buffer: a chunk's largest buffers are its output binding (1, 2 or 4 bytes
//! per sample plus the alignment padding) and its stream data.
//!
//! ```no_run
//! use l3::gpu::{GpuDecoder, OutputFormat};
//! let decoder = GpuDecoder::new_default()?;
//! println!("adapter: {}", decoder.adapter_name());
//! let file = std::fs::read("image.l3")?;
//! let batch = decoder.decode_batch(&[&file], OutputFormat::Interleaved)?;
//! let pixels: Vec<Vec<u8>> = batch.read_back()?;
//! # Ok::<(), l3::Error>(())
//! ```

pub mod cpu_twin;
pub mod shaders;

use std::future::Future;
use std::num::NonZeroU64;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use crate::decode::DecodeOptions;
use crate::error::{Error, FormatError, LimitsError, Result};
use crate::format::FileLayout;
use shaders::Stage;

/// [`ImageInfo::version`] of a version-2 file.
const VERSION_COMPACT: u32 = crate::format::VERSION_COMPACT as u32;

/// Error flag bits the decode shader ORs into an image's slot (`FormatError::GpuReported`).
pub mod flags {
    /// A stream names an unknown predictor.
    pub const PREDICTOR: u32 = 1;
    /// A row's bit width exceeds the sample depth.
    pub const BIT_WIDTH: u32 = 2;
    /// A row runs past the end of its stream.
    pub const OVERRUN: u32 = 4;
    /// A stream is longer than its rows, or its padding bits are not zero.
    pub const TRAILING: u32 = 8;
    /// A stream lies outside the uploaded bytes (an internal inconsistency).
    pub const RANGE: u32 = 16;
    /// Version 2: a patch names an unknown colour transform, or subtract-green with fewer
    /// than 3 channels.
    pub const TRANSFORM: u32 = 32;
    /// Version 2: a channel's token count or code lengths do not form a valid code.
    pub const CODE: u32 = 64;
    /// Version 2: a channel's segment-length field width exceeds 16.
    pub const SEGMENT_TABLE: u32 = 128;
    /// Version 2: a pair token where only a single-sample token may stand.
    pub const SYMBOL: u32 = 256;
    /// Version 2: a segment's rows use more or fewer bits than its stored length.
    pub const SEGMENT: u32 = 512;
}

/// Per-image entry of the table the shaders read (`ImageInfo` in `shaders/shared/images.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ImageInfo {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels (1..=4).
    pub channels: u32,
    /// Bits per sample (8 or 16).
    pub depth: u32,
    /// log2 of the patch size.
    pub patch_log2: u32,
    /// Patches per row of the patch grid.
    pub patches_x: u32,
    /// First stream of the image (chunk-local index).
    pub stream_base: u32,
    /// Streams of the image.
    pub stream_count: u32,
    /// First output word (4 bytes: u32 or f32) of the image (or band) in the chunk's output
    /// binding.
    pub out_base: u32,
    /// Output words of the image (without alignment padding).
    pub out_words: u32,
    /// Index of the image in its batch (its error-flag slot).
    pub image_index: u32,
    /// First decode workgroup of the image; a workgroup decodes
    /// [`streams_per_workgroup`] streams (version 1) or one patch (version 2).
    pub wg_base: u32,
    /// Format version of the file ([`crate::format::VERSION_FAST`] or
    /// [`crate::format::VERSION_COMPACT`]): which entry point decodes it (`main` or
    /// `main_compact`).
    pub version: u32,
    /// Padding.
    pub pad: [u32; 3],
}

/// Invocations of a decode workgroup (`WG` in `decode.wgsl`).
pub const DECODE_WORKGROUP_SIZE: u32 = 64;

/// Streams one decode workgroup takes, in a version-1 file, for a patch size
/// `1 << patch_log2`: 64 / patch size, at least 1. (In a version-2 file a workgroup takes one
/// patch, i.e. one stream: [`workgroups_of`].)
pub const fn streams_per_workgroup(patch_log2: u8) -> u32 {
    let ps = 1u32 << patch_log2;
    if ps >= DECODE_WORKGROUP_SIZE {
        1
    } else {
        DECODE_WORKGROUP_SIZE / ps
    }
}

/// Decode workgroups of `streams` consecutive streams of a file with header `h`: version 1
/// packs [`streams_per_workgroup`] streams into a workgroup; version 2 gives each patch (one
/// stream) a workgroup of its own, whatever the patch size, since its segments and channels
/// decode in parallel inside it.
pub fn workgroups_of(h: &crate::Header, streams: u32) -> u32 {
    match h.profile {
        crate::Profile::Fast => streams.div_ceil(streams_per_workgroup(h.patch_log2)),
        crate::Profile::Compact => streams,
    }
}

/// Per-dispatch parameters (`Params` in `shaders/shared/images.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Params {
    /// Work items: decode workgroups.
    pub count: u32,
    /// Images in the chunk's image table.
    pub image_count: u32,
    /// Bytes of stream data uploaded.
    pub input_bytes: u32,
    /// Chunk-local index ([`ImageInfo::wg_base`] numbering) of the dispatch's first
    /// workgroup.
    pub first_workgroup: u32,
    /// Per-channel mean for [`OutputFormat::F32Chw`].
    pub mean: [f32; 4],
    /// Per-channel standard deviation for [`OutputFormat::F32Chw`].
    pub std: [f32; 4],
}

/// Per-level parameters of the prefix sum (`ScanParams` in `shaders/prefix_sum.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, bytemuck::Pod, bytemuck::Zeroable)]
struct ScanParams {
    n: u32,
    data_offset: u32,
    sums_offset: u32,
    pad: u32,
}

/// Per-channel normalisation of f32 output: `(x / max - mean[c]) / std[c]`, where
/// `max = 2^depth - 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalize {
    /// Mean per channel (channels beyond the image's are ignored).
    pub mean: [f32; 4],
    /// Standard deviation per channel.
    pub std: [f32; 4],
}

impl Normalize {
    /// `x / max`: values in [0, 1].
    pub const UNIT: Normalize = Normalize {
        mean: [0.0; 4],
        std: [1.0; 4],
    };
    /// ImageNet mean and std for RGB (alpha, if any, is scaled to [0, 1]).
    pub const IMAGENET: Normalize = Normalize {
        mean: [0.485, 0.456, 0.406, 0.0],
        std: [0.229, 0.224, 0.225, 1.0],
    };
}

/// Layout of the decoded images in the output buffer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OutputFormat {
    /// Interleaved samples (HWC), row-major, no padding: 8-bit images as u8, 16-bit images
    /// as u16 little-endian. The CPU decoder writes native byte order, so the bytes equal
    /// the CPU decoder's on little-endian hosts (on big-endian hosts, 16-bit samples are
    /// byte-swapped relative to them).
    Interleaved,
    /// Planar (CHW) f32, normalised per channel.
    F32Chw(Normalize),
}

/// Sample type of one image in a [`GpuBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SampleType {
    /// u8 samples.
    U8,
    /// u16 samples, little-endian.
    U16,
    /// f32 samples.
    F32,
}

impl SampleType {
    /// Bytes per sample.
    pub const fn bytes(self) -> u64 {
        match self {
            SampleType::U8 => 1,
            SampleType::U16 => 2,
            SampleType::F32 => 4,
        }
    }
}

/// Where one decoded image lies in [`GpuBatch::buffer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImageLayout {
    /// Byte offset in the buffer (a multiple of 256, so it can be bound on its own).
    pub offset: u64,
    /// Bytes of the image: width x height x channels x sample bytes.
    pub len: u64,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels.
    pub channels: u8,
    /// Bit depth of the file (8 or 16).
    pub depth: u8,
    /// Sample type of the output.
    pub sample_type: SampleType,
    /// `true` for planar (CHW) output, `false` for interleaved (HWC).
    pub planar: bool,
}

/// A decoded batch: one GPU buffer holding every image, and where each image is.
#[derive(Debug)]
pub struct GpuBatch {
    /// The decoded images (usage `STORAGE | COPY_SRC`).
    pub buffer: wgpu::Buffer,
    /// One entry per input file, in order.
    pub images: Vec<ImageLayout>,
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl GpuBatch {
    /// Copies the whole buffer back to the CPU (blocking).
    pub fn read_back_all(&self) -> Result<Vec<u8>> {
        read_buffer(
            &self.device,
            &self.queue,
            &self.buffer,
            0,
            self.buffer.size(),
        )
    }

    /// Copies every image back to the CPU (blocking), one vector per image, without the
    /// alignment padding between images.
    pub fn read_back(&self) -> Result<Vec<Vec<u8>>> {
        let all = self.read_back_all()?;
        Ok(self
            .images
            .iter()
            .map(|l| all[l.offset as usize..(l.offset + l.len) as usize].to_vec())
            .collect())
    }

    /// Copies one image back to the CPU (blocking).
    pub fn read_back_image(&self, index: usize) -> Result<Vec<u8>> {
        let l = self.images[index];
        let mut v = read_buffer(
            &self.device,
            &self.queue,
            &self.buffer,
            l.offset,
            l.len.next_multiple_of(4),
        )?;
        v.truncate(l.len as usize);
        Ok(v)
    }
}

/// GPU time of each compute stage of one batch, measured with timestamp queries written at
/// the beginning and end of each stage's compute pass, summed over the chunks (submissions)
/// of the batch. See [`GpuDecoder::set_timing`] and [`GpuDecoder::decode_batch_timed`].
///
/// The times cover the passes only: not the CPU parse, the uploads (`queue.write_buffer`),
/// the error-flag copy, nor the gaps between submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StageTimings {
    /// Nanoseconds of the prefix-sum pass (`prefix_sum.wgsl`, all levels).
    pub prefix_sum_ns: u64,
    /// Nanoseconds of the decode pass (`decode.wgsl`, or `decode_f32_chw.wgsl` for
    /// [`OutputFormat::F32Chw`] output), which also writes the output.
    pub decode_ns: u64,
    /// Chunks (submissions) the sums are over; 0 for an empty batch.
    pub chunks: usize,
}

impl StageTimings {
    /// Nanoseconds of both stages: prefix sum + decode.
    pub fn kernels_ns(&self) -> u64 {
        self.prefix_sum_ns + self.decode_ns
    }
}

/// Timestamp queries per chunk: begin and end of the prefix-sum and decode passes.
const QUERIES_PER_CHUNK: u32 = 4;

/// Where a timed batch's timestamps are read back from.
struct TimingReadback {
    /// `chunks * QUERY_RESOLVE_BUFFER_ALIGNMENT` bytes, chunk `k`'s four u64 ticks at
    /// `k * QUERY_RESOLVE_BUFFER_ALIGNMENT`; `None` for an empty batch.
    staging: Option<wgpu::Buffer>,
    chunks: usize,
    /// Nanoseconds per tick.
    period: f32,
}

impl TimingReadback {
    async fn finish(self, device: &wgpu::Device) -> Result<StageTimings> {
        let mut t = StageTimings {
            chunks: self.chunks,
            ..Default::default()
        };
        let Some(staging) = self.staging else {
            return Ok(t);
        };
        MapFuture::new(device, &staging, 0, staging.size()).await?;
        let ticks: Vec<u64> = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| Error::Gpu(format!("map failed: {e}")))?;
            bytemuck::pod_collect_to_vec(&view[..])
        };
        staging.unmap();
        let stride = (wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT / 8) as usize;
        let ns = |begin: u64, end: u64| {
            (end.saturating_sub(begin) as f64 * self.period as f64).round() as u64
        };
        for k in 0..self.chunks {
            let q = &ticks[k * stride..k * stride + QUERIES_PER_CHUNK as usize];
            t.prefix_sum_ns += ns(q[0], q[1]);
            t.decode_ns += ns(q[2], q[3]);
        }
        Ok(t)
    }
}

/// Reusable per-chunk buffers, grown on demand.
struct Scratch {
    input: wgpu::Buffer,
    sizes: wgpu::Buffer,
    scan: wgpu::Buffer,
    images: wgpu::Buffer,
    params: wgpu::Buffer,
}

/// What one chunk needs, in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Needs {
    input: u64,
    sizes: u64,
    scan: u64,
    images: u64,
    params: u64,
}

/// Elements per workgroup of the prefix sum.
const WG_256: u64 = 256;
/// Alignment of each image (and chunk) in the output buffer.
const OUT_ALIGN: u64 = 256;

/// The levels of the prefix sum over `n` elements: (n, data_offset, sums_offset) in words,
/// and the total words of the scan buffer.
fn scan_levels(n: u32) -> (Vec<ScanParams>, u64) {
    let mut levels = Vec::new();
    let (mut n, mut off) = (n, 0u32);
    loop {
        let blocks = n.div_ceil(WG_256 as u32);
        let sums = off + n;
        levels.push(ScanParams {
            n,
            data_offset: off,
            sums_offset: sums,
            pad: 0,
        });
        if blocks <= 1 {
            return (levels, sums as u64 + 1);
        }
        off = sums;
        n = blocks;
    }
}

/// Device limits that the decoder asks for: the adapter's largest buffers.
pub fn required_limits(adapter: &wgpu::Adapter) -> wgpu::Limits {
    let a = adapter.limits();
    wgpu::Limits {
        max_storage_buffer_binding_size: a.max_storage_buffer_binding_size,
        max_buffer_size: a.max_buffer_size,
        ..wgpu::Limits::default()
    }
}

/// Picks an adapter: the one named by `WGPU_ADAPTER_NAME` (substring, case-insensitive) if
/// set, else the first discrete GPU, then integrated, virtual, CPU. Backends follow
/// `WGPU_BACKEND` (e.g. `WGPU_BACKEND=vulkan`).
pub fn select_adapter() -> Result<wgpu::Adapter> {
    let instance =
        wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
    let adapters = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    if let Ok(name) = std::env::var("WGPU_ADAPTER_NAME") {
        let name = name.to_lowercase();
        let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
        return adapters
            .into_iter()
            .find(|a| a.get_info().name.to_lowercase().contains(&name))
            .ok_or_else(|| {
                Error::Gpu(format!(
                    "WGPU_ADAPTER_NAME={name} matches no adapter (found: {names:?})"
                ))
            });
    }
    let rank = |t: wgpu::DeviceType| match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    adapters
        .into_iter()
        .filter(|a| {
            a.get_downlevel_capabilities()
                .flags
                .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
        })
        .min_by_key(|a| rank(a.get_info().device_type))
        .ok_or_else(|| Error::Gpu("no GPU adapter with compute shaders found".into()))
}

/// The GPU decoder: pipelines created once, buffers reused between batches.
pub struct GpuDecoder {
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter_info: Option<wgpu::AdapterInfo>,
    scan_bgl: wgpu::BindGroupLayout,
    decode_bgl: wgpu::BindGroupLayout,
    scan_blocks: wgpu::ComputePipeline,
    add_sums: wgpu::ComputePipeline,
    decode: wgpu::ComputePipeline,
    decode_f32_chw: wgpu::ComputePipeline,
    decode_compact: wgpu::ComputePipeline,
    decode_f32_chw_compact: wgpu::ComputePipeline,
    chunk_limit: u64,
    uniform_align: u64,
    options: DecodeOptions,
    scratch: Mutex<Option<Scratch>>,
    timing: bool,
    last_timings: Mutex<Option<StageTimings>>,
}

impl std::fmt::Debug for GpuDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuDecoder")
            .field("adapter", &self.adapter_name())
            .field("chunk_limit", &self.chunk_limit)
            .finish()
    }
}

fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn uniform_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn range(buffer: &wgpu::Buffer, offset: u64, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer,
        offset,
        size: NonZeroU64::new(size),
    })
}

impl GpuDecoder {
    /// A decoder on the caller's device and queue (handles are cloned). Creates the pipelines.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<Self> {
        let limits = device.limits();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = |stage: Stage| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(stage.file_name()),
                source: wgpu::ShaderSource::Wgsl(shaders::source(stage).into()),
            })
        };
        let bgl = |label, entries: &[wgpu::BindGroupLayoutEntry]| {
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(label),
                entries,
            })
        };
        let scan_bgl = bgl(
            "l3 prefix_sum",
            &[storage_entry(0, false), uniform_entry(1)],
        );
        let decode_bgl = bgl(
            "l3 decode",
            &[
                storage_entry(0, true),
                storage_entry(1, true),
                storage_entry(2, true),
                storage_entry(3, true),
                storage_entry(4, false),
                storage_entry(5, false),
                uniform_entry(6),
            ],
        );
        let pipeline = |label, bgl: &wgpu::BindGroupLayout, module: &wgpu::ShaderModule, entry| {
            let layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(label),
                bind_group_layouts: &[Some(bgl)],
                immediate_size: 0,
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: Some(&layout),
                module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let scan_module = module(Stage::PrefixSum);
        let scan_blocks = pipeline("l3 scan_blocks", &scan_bgl, &scan_module, "scan_blocks");
        let add_sums = pipeline("l3 add_sums", &scan_bgl, &scan_module, "add_sums");
        let decode_module = module(Stage::Decode);
        let f32_module = module(Stage::DecodeF32Chw);
        let decode = pipeline("l3 decode", &decode_bgl, &decode_module, "main");
        let decode_f32_chw = pipeline("l3 decode_f32_chw", &decode_bgl, &f32_module, "main");
        let decode_compact = pipeline(
            "l3 decode compact",
            &decode_bgl,
            &decode_module,
            "main_compact",
        );
        let decode_f32_chw_compact = pipeline(
            "l3 decode_f32_chw compact",
            &decode_bgl,
            &f32_module,
            "main_compact",
        );
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!(
                "creating the decoder's pipelines failed: {e:?}"
            )));
        }
        let chunk_limit = max_chunk_limit(&limits);
        Ok(GpuDecoder {
            device: device.clone(),
            queue: queue.clone(),
            adapter_info: None,
            scan_bgl,
            decode_bgl,
            scan_blocks,
            add_sums,
            decode,
            decode_f32_chw,
            decode_compact,
            decode_f32_chw_compact,
            chunk_limit,
            uniform_align: (limits.min_uniform_buffer_offset_alignment as u64).max(256),
            options: DecodeOptions::default(),
            scratch: Mutex::new(None),
            timing: false,
            last_timings: Mutex::new(None),
        })
    }

    /// A decoder on a new device of `adapter`, asking for the adapter's largest buffers, and
    /// for [`wgpu::Features::TIMESTAMP_QUERY`] when the adapter supports it (used only when
    /// timing is asked for: [`GpuDecoder::set_timing`]).
    pub fn with_adapter(adapter: &wgpu::Adapter) -> Result<Self> {
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("l3 gpu decoder"),
            required_features: adapter.features() & wgpu::Features::TIMESTAMP_QUERY,
            required_limits: required_limits(adapter),
            ..Default::default()
        }))
        .map_err(|e| Error::Gpu(format!("request_device failed: {e}")))?;
        let mut d = GpuDecoder::new(&device, &queue)?;
        d.adapter_info = Some(adapter.get_info());
        Ok(d)
    }

    /// A decoder on the adapter [`select_adapter`] picks (respects `WGPU_ADAPTER_NAME` and
    /// `WGPU_BACKEND`).
    pub fn new_default() -> Result<Self> {
        GpuDecoder::with_adapter(&select_adapter()?)
    }

    /// The adapter's description, when the decoder created its own device.
    pub fn adapter_info(&self) -> Option<&wgpu::AdapterInfo> {
        self.adapter_info.as_ref()
    }

    /// The adapter's name and backend, or "caller-provided device".
    pub fn adapter_name(&self) -> String {
        match &self.adapter_info {
            Some(i) => format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type),
            None => "caller-provided device".into(),
        }
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Largest buffer binding a chunk uses, in bytes (the device's
    /// `max_storage_buffer_binding_size`, at most 2 GiB).
    pub fn chunk_limit(&self) -> u64 {
        self.chunk_limit
    }

    /// Lowers the chunk size (to save memory, or to test chunking); clamped to
    /// 4096..=the device limit, rounded down to 256 bytes.
    pub fn set_chunk_limit(&mut self, bytes: u64) {
        let max = max_chunk_limit(&self.device.limits());
        self.chunk_limit = bytes.clamp(4096, max) / OUT_ALIGN * OUT_ALIGN;
    }

    /// Options for the CPU-side parse (limits, checksum); `parallel` is ignored.
    pub fn set_options(&mut self, options: DecodeOptions) {
        self.options = options;
    }

    /// Whether the device has [`wgpu::Features::TIMESTAMP_QUERY`], i.e. whether
    /// [`GpuDecoder::set_timing`] and [`GpuDecoder::decode_batch_timed`] can measure stages.
    pub fn timing_supported(&self) -> bool {
        self.device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Turns per-stage GPU timing on or off for [`GpuDecoder::decode_batch`],
    /// [`GpuDecoder::decode_batch_with_flags`] and [`GpuDecoder::decode_batch_async`]; the
    /// timings of the last such batch are then in [`GpuDecoder::last_stage_timings`]. Off by
    /// default: timing costs a query set, a resolve and a small read-back per batch. Returns
    /// whether timing is now
    /// on: `false` when the device lacks [`wgpu::Features::TIMESTAMP_QUERY`] (the request
    /// is then ignored and batches decode as usual).
    pub fn set_timing(&mut self, on: bool) -> bool {
        self.timing = on && self.timing_supported();
        if !self.timing {
            *self.last_timings.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        self.timing
    }

    /// Per-stage GPU times of the last batch decoded with timing on ([`GpuDecoder::set_timing`]
    /// or [`GpuDecoder::decode_batch_timed`]), or `None` when no batch was timed (timing off,
    /// or not supported by the device).
    pub fn last_stage_timings(&self) -> Option<StageTimings> {
        *self.last_timings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Like [`GpuDecoder::decode_batch`], with this batch's per-stage GPU times whatever
    /// [`GpuDecoder::set_timing`] says: `None` when the device lacks
    /// [`wgpu::Features::TIMESTAMP_QUERY`] (the batch is still decoded).
    pub fn decode_batch_timed(
        &self,
        files: &[&[u8]],
        output: OutputFormat,
    ) -> Result<(GpuBatch, Option<StageTimings>)> {
        let (batch, flags, timings) = self.decode_blocking(files, output, true)?;
        check_flags(&flags)?;
        Ok((batch, timings))
    }

    /// Submits (timed if `timed` and supported), waits, and reads the flags and timings.
    #[allow(clippy::type_complexity)]
    fn decode_blocking(
        &self,
        files: &[&[u8]],
        output: OutputFormat,
        timed: bool,
    ) -> Result<(GpuBatch, Vec<u32>, Option<StageTimings>)> {
        let pending = self.submit(files, output, timed)?;
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
        let r = pollster::block_on(pending.finish(&self.device))?;
        self.record_timings(r.2);
        Ok(r)
    }

    fn record_timings(&self, t: Option<StageTimings>) {
        if t.is_some() {
            *self.last_timings.lock().unwrap_or_else(|e| e.into_inner()) = t;
        }
    }

    /// Decodes a batch of L3 files into one GPU buffer (blocking until the GPU is done).
    ///
    /// Errors:
    /// - headers, size tables, checksums and [`crate::Limits`] are checked on the CPU for
    ///   every file before anything is submitted; the first bad file fails the whole batch
    ///   with [`Error::InBatch`]: its index in `files` and the CPU decoder's error for it;
    /// - [`FormatError::GpuReported`] (first image with flags) for corrupt streams;
    /// - [`LimitsError::GpuBuffer`] if one image does not fit the device's buffer limits even
    ///   split into bands of patch rows (see the module documentation).
    pub fn decode_batch(&self, files: &[&[u8]], output: OutputFormat) -> Result<GpuBatch> {
        let (batch, flags) = self.decode_batch_with_flags(files, output)?;
        check_flags(&flags)?;
        Ok(batch)
    }

    /// Like [`GpuDecoder::decode_batch`], but a corrupt stream does not fail the batch: returns
    /// the batch and each image's error flags ([`flags`]; 0 = decoded correctly). The output
    /// of a flagged image is unspecified. CPU-side errors (headers, size tables, checksum,
    /// limits) still fail the whole batch, naming the first bad file's index (as for
    /// [`GpuDecoder::decode_batch`]).
    pub fn decode_batch_with_flags(
        &self,
        files: &[&[u8]],
        output: OutputFormat,
    ) -> Result<(GpuBatch, Vec<u32>)> {
        let (batch, flags, _) = self.decode_blocking(files, output, self.timing)?;
        Ok((batch, flags))
    }

    /// Async form of [`GpuDecoder::decode_batch`]: submits, then resolves when the GPU is done.
    /// The future polls the device itself (non-blocking) each time it is polled, so it
    /// completes under any executor, including `pollster::block_on`; until the GPU is done
    /// it wakes itself after every poll, i.e. it busy-polls (one core spinning), since
    /// native wgpu has no other way to wake it.
    pub async fn decode_batch_async(
        &self,
        files: &[&[u8]],
        output: OutputFormat,
    ) -> Result<GpuBatch> {
        let pending = self.submit(files, output, self.timing)?;
        let (batch, flags, timings) = pending.finish(&self.device).await?;
        self.record_timings(timings);
        check_flags(&flags)?;
        Ok(batch)
    }

    /// Runs only the prefix-sum kernel on `sizes` (blocking) and returns the exclusive
    /// prefix sums: for testing the shader against [`cpu_twin::prefix_sum`].
    pub fn prefix_sum(&self, sizes: &[u32]) -> Result<Vec<u32>> {
        if sizes.is_empty() {
            return Ok(Vec::new());
        }
        let (levels, scan_words) = scan_levels(sizes.len() as u32);
        let needs = Needs {
            scan: scan_words * 4,
            params: levels.len() as u64 * self.uniform_align,
            ..Default::default()
        };
        if needs.scan > self.chunk_limit {
            return Err(LimitsError::GpuBuffer {
                what: "prefix-sum buffer",
                needed: needs.scan,
                max: self.chunk_limit,
            }
            .into());
        }
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let scratch = self.ensure_scratch(&mut guard, needs);
        self.queue
            .write_buffer(&scratch.scan, 0, bytemuck::cast_slice(sizes));
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        self.encode_scan(&mut encoder, scratch, &levels, 0, None);
        // The guard is held until the result is read back: the writes above take effect at
        // the next submission on the queue, so another batch on this decoder must not write
        // the scratch buffers before this scan is submitted, nor before the read-back's copy
        // of `scratch.scan` (a later submission) has been made.
        self.queue.submit([encoder.finish()]);
        let bytes = read_buffer(
            &self.device,
            &self.queue,
            &scratch.scan,
            0,
            sizes.len() as u64 * 4,
        );
        drop(guard);
        Ok(bytemuck::pod_collect_to_vec(&bytes?))
    }

    fn ensure_scratch<'a>(&self, slot: &'a mut Option<Scratch>, needs: Needs) -> &'a Scratch {
        let grow = |have: Option<&wgpu::Buffer>, need: u64, usage, label| -> Option<wgpu::Buffer> {
            let need = need.max(256).next_multiple_of(256);
            match have {
                Some(b) if b.size() >= need => None,
                _ => Some(self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size: need.next_power_of_two().min(self.chunk_limit.max(need)),
                    usage,
                    mapped_at_creation: false,
                })),
            }
        };
        let st = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let old = slot.take();
        // Each buffer: the one kept from the last batch if it is large enough, else a new one.
        let keep_or_grow = |have: Option<&wgpu::Buffer>, need: u64, usage, label| {
            grow(have, need, usage, label).unwrap_or_else(|| have.expect("kept").clone())
        };
        let o = old.as_ref();
        let s = Scratch {
            input: keep_or_grow(o.map(|s| &s.input), needs.input, st, "l3 input"),
            sizes: keep_or_grow(o.map(|s| &s.sizes), needs.sizes, st, "l3 sizes"),
            scan: keep_or_grow(
                o.map(|s| &s.scan),
                needs.scan,
                st | wgpu::BufferUsages::COPY_SRC,
                "l3 scan",
            ),
            images: keep_or_grow(o.map(|s| &s.images), needs.images, st, "l3 images"),
            params: keep_or_grow(
                o.map(|s| &s.params),
                needs.params,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                "l3 params",
            ),
        };
        slot.insert(s)
    }

    /// Records the prefix-sum dispatches; level params are written at `params_slot0` onwards.
    fn encode_scan(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        scratch: &Scratch,
        levels: &[ScanParams],
        params_slot0: u64,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        let groups: Vec<wgpu::BindGroup> = levels
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let off = (params_slot0 + i as u64) * self.uniform_align;
                self.queue
                    .write_buffer(&scratch.params, off, bytemuck::bytes_of(p));
                self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 scan level"),
                    layout: &self.scan_bgl,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: scratch.scan.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: range(&scratch.params, off, 16),
                        },
                    ],
                })
            })
            .collect();
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("l3 prefix sum"),
            timestamp_writes,
        });
        pass.set_pipeline(&self.scan_blocks);
        for (p, g) in levels.iter().zip(&groups) {
            pass.set_bind_group(0, g, &[]);
            self.dispatch(&mut pass, p.n.div_ceil(WG_256 as u32));
        }
        pass.set_pipeline(&self.add_sums);
        for (p, g) in levels.iter().zip(&groups).rev().skip(1) {
            pass.set_bind_group(0, g, &[]);
            self.dispatch(&mut pass, p.n.div_ceil(WG_256 as u32));
        }
    }

    fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, groups: u32) {
        if groups == 0 {
            return;
        }
        let max = self
            .device
            .limits()
            .max_compute_workgroups_per_dimension
            .max(1);
        let x = groups.min(max);
        pass.dispatch_workgroups(x, groups.div_ceil(x), 1);
    }

    /// Validates, uploads and submits every chunk, with timestamp queries if `timed` and the
    /// device supports them; returns what `finish` needs.
    fn submit(&self, files: &[&[u8]], output: OutputFormat, timed: bool) -> Result<Pending> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let timed = timed && self.timing_supported();
        let pending = self.submit_inner(files, output, timed)?;
        for scope in [validation, oom] {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::Gpu(format!("GPU decode failed: {e}")));
            }
        }
        Ok(pending)
    }

    fn submit_inner(&self, files: &[&[u8]], output: OutputFormat, timed: bool) -> Result<Pending> {
        let layouts: Vec<FileLayout> = files
            .iter()
            .enumerate()
            .map(|(i, f)| crate::decode::parse(f, &self.options).map_err(|e| in_image(i, e)))
            .collect::<Result<_>>()?;
        let (image_pos, total_out, parts, chunks) =
            plan_chunks(&layouts, output, self.chunk_limit)?;
        let max_buffer = self.device.limits().max_buffer_size;
        if total_out > max_buffer {
            return Err(LimitsError::GpuBuffer {
                what: "output buffer",
                needed: total_out,
                max: max_buffer,
            }
            .into());
        }
        let out_buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 decoded batch"),
            size: total_out,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let n_err = (files.len() as u64 * 4).next_multiple_of(256).max(256);
        let errors = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 error flags"),
            size: n_err,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 error flags readback"),
            size: n_err,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut image_layouts = Vec::with_capacity(files.len());
        for (l, &offset) in layouts.iter().zip(&image_pos) {
            let h = &l.header;
            image_layouts.push(ImageLayout {
                offset,
                len: output_bytes(h, output),
                width: h.width,
                height: h.height,
                channels: h.channels(),
                depth: h.depth,
                sample_type: match output {
                    OutputFormat::Interleaved if h.depth == 8 => SampleType::U8,
                    OutputFormat::Interleaved => SampleType::U16,
                    OutputFormat::F32Chw(_) => SampleType::F32,
                },
                planar: matches!(output, OutputFormat::F32Chw(_)),
            });
        }
        // Timing: one query set of four timestamps per chunk, resolved into 256-byte slots.
        let n_chunks = chunks.len();
        let resolve = (timed && n_chunks > 0).then(|| {
            let size = n_chunks as u64 * wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT;
            let mk = |label, usage| {
                self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(label),
                    size,
                    usage,
                    mapped_at_creation: false,
                })
            };
            (
                mk(
                    "l3 timestamps",
                    wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                ),
                mk(
                    "l3 timestamps readback",
                    wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                ),
            )
        });
        let queries = QUERIES_PER_CHUNK;
        let mut first = true;
        let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        for (chunk_index, chunk) in chunks.into_iter().enumerate() {
            let chunk_parts = &parts[chunk];
            let chunk_out_start = chunk_parts[0].out_pos / OUT_ALIGN * OUT_ALIGN;
            let c = build_parts(&layouts, chunk_parts, chunk_out_start, output);
            let input_bytes: &[u8] = bytemuck::cast_slice(&c.input_words);
            // The chunk's output binding, in words.
            let (sizes, infos, out_words) = (&c.sizes, &c.images, c.out_words);
            let (levels, scan_words) = scan_levels(sizes.len() as u32);
            let needs = Needs {
                input: input_bytes.len() as u64,
                sizes: sizes.len() as u64 * 4,
                scan: scan_words * 4,
                images: infos.len() as u64 * std::mem::size_of::<ImageInfo>() as u64,
                // Version-1 decode, scan levels, version-2 decode.
                params: (2 + levels.len() as u64) * self.uniform_align,
            };
            let scratch = self.ensure_scratch(&mut guard, needs);
            let q = &self.queue;
            q.write_buffer(&scratch.input, 0, input_bytes);
            q.write_buffer(&scratch.sizes, 0, bytemuck::cast_slice(sizes));
            q.write_buffer(&scratch.images, 0, bytemuck::cast_slice(infos));
            let (decode_params, compact_params) = (c.decode_params, c.compact_params);
            let compact_params_at = (1 + levels.len() as u64) * self.uniform_align;
            q.write_buffer(&scratch.params, 0, bytemuck::bytes_of(&decode_params));
            q.write_buffer(
                &scratch.params,
                compact_params_at,
                bytemuck::bytes_of(&compact_params),
            );
            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("l3 decode chunk"),
                });
            if first {
                encoder.clear_buffer(&errors, 0, None);
                // Once per batch, before any decode: the interleaved decode ORs samples into
                // zeroed words (words shared by streams of an image combine), and neither
                // decode writes the alignment padding between images, which stays 0.
                encoder.clear_buffer(&out_buffer, 0, None);
                first = false;
            }
            encoder.copy_buffer_to_buffer(&scratch.sizes, 0, &scratch.scan, 0, needs.sizes);
            let query_set = resolve.as_ref().map(|_| {
                self.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("l3 stage timestamps"),
                    ty: wgpu::QueryType::Timestamp,
                    count: queries,
                })
            });
            let writes = |stage: u32| {
                query_set
                    .as_ref()
                    .map(|qs| wgpu::ComputePassTimestampWrites {
                        query_set: qs,
                        beginning_of_pass_write_index: Some(2 * stage),
                        end_of_pass_write_index: Some(2 * stage + 1),
                    })
            };
            self.encode_scan(&mut encoder, scratch, &levels, 1, writes(0));
            let psize = std::mem::size_of::<Params>() as u64;
            let out_len = out_words as u64 * 4;
            // The bindings of both decode dispatches; only the parameters differ.
            let decode_bg = |params_at: u64| {
                self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 decode"),
                    layout: &self.decode_bgl,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: scratch.input.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: scratch.sizes.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: scratch.scan.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 3,
                            resource: scratch.images.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            // From the 256-byte boundary before the chunk's first part
                            // (OUT_ALIGN, a multiple of min_storage_buffer_offset_alignment);
                            // each part's `out_base` is relative to it.
                            binding: 4,
                            resource: range(&out_buffer, chunk_out_start, out_len),
                        },
                        wgpu::BindGroupEntry {
                            binding: 5,
                            resource: errors.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 6,
                            resource: range(&scratch.params, params_at, psize),
                        },
                    ],
                })
            };
            let (fast_pipeline, compact_pipeline) = match output {
                OutputFormat::Interleaved => (&self.decode, &self.decode_compact),
                OutputFormat::F32Chw(_) => (&self.decode_f32_chw, &self.decode_f32_chw_compact),
            };
            {
                // One pass, both versions' dispatches (an entry point each, so that each
                // reserves only its own workgroup memory); timed batches write timestamps at
                // its beginning and end.
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("l3 decode"),
                    timestamp_writes: writes(1),
                });
                for (pipeline, params, params_at) in [
                    (fast_pipeline, decode_params, 0),
                    (compact_pipeline, compact_params, compact_params_at),
                ] {
                    if params.count > 0 {
                        pass.set_pipeline(pipeline);
                        pass.set_bind_group(0, &decode_bg(params_at), &[]);
                        self.dispatch(&mut pass, params.count);
                    }
                }
            }
            if let (Some(qs), Some((resolve, _))) = (&query_set, &resolve) {
                encoder.resolve_query_set(
                    qs,
                    0..queries,
                    resolve,
                    chunk_index as u64 * wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT,
                );
            }
            self.queue.submit([encoder.finish()]);
        }
        drop(guard);
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        if first {
            encoder.clear_buffer(&errors, 0, None);
        }
        encoder.copy_buffer_to_buffer(&errors, 0, &staging, 0, n_err);
        if let Some((resolve, readback)) = &resolve {
            encoder.copy_buffer_to_buffer(resolve, 0, readback, 0, resolve.size());
        }
        self.queue.submit([encoder.finish()]);
        let timing = timed.then(|| TimingReadback {
            staging: resolve.map(|(_, readback)| readback),
            chunks: n_chunks,
            period: self.queue.get_timestamp_period(),
        });
        Ok(Pending {
            batch: GpuBatch {
                buffer: out_buffer,
                images: image_layouts,
                device: self.device.clone(),
                queue: self.queue.clone(),
            },
            staging,
            count: files.len(),
            timing,
        })
    }
}

/// The batch's plan: each image's output position, the output buffer size, the parts
/// (whole images, or bands of patch rows of images too large for one chunk) and the chunks
/// (runs of parts whose buffers each fit `limit` bytes).
#[allow(clippy::type_complexity)]
fn plan_chunks(
    layouts: &[FileLayout],
    output: OutputFormat,
    limit: u64,
) -> Result<(Vec<u64>, u64, Vec<Part>, Vec<std::ops::Range<usize>>)> {
    // Output positions: each image at a multiple of 256 bytes.
    let mut image_pos = Vec::with_capacity(layouts.len());
    let mut total_out = 0u64;
    for l in layouts {
        image_pos.push(total_out);
        total_out += output_bytes(&l.header, output).next_multiple_of(OUT_ALIGN);
    }
    let total_out = total_out.max(OUT_ALIGN);
    let f32_out = matches!(output, OutputFormat::F32Chw(_));
    // What a run of parts needs, each term checked against the binding limit (the decode
    // writes straight into the output binding: there is no intermediate buffer).
    #[derive(Clone, Copy, Default)]
    struct Sum {
        input: u64,
        streams: u64,
        out: u64,
        parts: u64,
    }
    let over = |s: &Sum| -> Option<(&'static str, u64)> {
        let checks = [
            ("stream-data buffer", s.input + 8),
            (
                "prefix-sum buffer",
                scan_levels(s.streams.min(u32::MAX as u64) as u32).1 * 4,
            ),
            ("output binding", s.out),
            (
                "image table",
                s.parts * std::mem::size_of::<ImageInfo>() as u64,
            ),
        ];
        if s.streams > u32::MAX as u64 / 2 {
            return Some(("prefix-sum buffer", s.streams * 4));
        }
        checks.into_iter().find(|&(_, n)| n > limit)
    };
    let part_sum = |l: &FileLayout, p: &Part| {
        let (s0, s1) = p.streams(&l.header);
        Sum {
            input: l.offsets[s1] - l.offsets[s0],
            streams: (s1 - s0) as u64,
            // A band's binding starts at the 256-byte boundary before it.
            out: p.out_end - p.out_pos + p.out_pos % OUT_ALIGN,
            parts: 1,
        }
    };
    // Split images that do not fit alone into bands of patch rows (interleaved only).
    let mut parts: Vec<Part> = Vec::new();
    for (i, l) in layouts.iter().enumerate() {
        let h = &l.header;
        let out = output_bytes(h, output);
        let whole = Part {
            image: i,
            patch_row0: 0,
            patch_rows: h.patches_y(),
            out_pos: image_pos[i],
            out_len: out,
            out_end: image_pos[i] + out.next_multiple_of(OUT_ALIGN),
        };
        let Some((what, needed)) = over(&part_sum(l, &whole)) else {
            parts.push(whole);
            continue;
        };
        if f32_out {
            return Err(LimitsError::GpuBuffer {
                what,
                needed,
                max: limit,
            }
            .into());
        }
        let row_bytes = h.width as u64 * h.channels() as u64 * h.bytes_per_sample() as u64;
        let band = |row0: u32, rows: u32| {
            let y0 = row0 * h.patch_size();
            let band_h = (rows * h.patch_size()).min(h.height - y0);
            let last = row0 + rows == h.patches_y();
            let out_pos = image_pos[i] + y0 as u64 * row_bytes;
            let out_len = band_h as u64 * row_bytes;
            Part {
                image: i,
                patch_row0: row0,
                patch_rows: rows,
                out_pos,
                out_len,
                out_end: if last {
                    whole.out_end
                } else {
                    out_pos + out_len
                },
            }
        };
        let mut row0 = 0;
        while row0 < h.patches_y() {
            let mut rows = 1;
            if let Some((what, needed)) = over(&part_sum(l, &band(row0, 1))) {
                // Not even one patch row fits.
                return Err(LimitsError::GpuBuffer {
                    what,
                    needed,
                    max: limit,
                }
                .into());
            }
            while row0 + rows < h.patches_y() && over(&part_sum(l, &band(row0, rows + 1))).is_none()
            {
                rows += 1;
            }
            parts.push(band(row0, rows));
            row0 += rows;
        }
    }
    // Greedy chunking of the parts.
    let mut chunks: Vec<std::ops::Range<usize>> = Vec::new();
    let (mut start, mut acc) = (0usize, Sum::default());
    for (k, p) in parts.iter().enumerate() {
        let s = part_sum(&layouts[p.image], p);
        let next = Sum {
            input: acc.input + s.input,
            streams: acc.streams + s.streams,
            out: acc.out + s.out,
            parts: acc.parts + 1,
        };
        if over(&next).is_some() && k > start {
            chunks.push(start..k);
            start = k;
            acc = s;
        } else {
            acc = next;
        }
    }
    if start < parts.len() {
        chunks.push(start..parts.len());
    }
    Ok((image_pos, total_out, parts, chunks))
}

/// Bytes of one decoded image in `output` format (without alignment padding).
pub fn output_bytes(h: &crate::Header, output: OutputFormat) -> u64 {
    match output {
        OutputFormat::Interleaved => h.output_bytes(),
        OutputFormat::F32Chw(_) => h.sample_count() * 4,
    }
}

/// Everything one chunk uploads: the shaders' inputs, exactly as the GPU path builds them
/// (the CPU twins and the tests use the same function).
#[derive(Debug, Clone)]
pub struct ChunkInputs {
    /// The stream bytes of every file, concatenated, as little-endian words (zero-padded,
    /// plus one spare word).
    pub input_words: Vec<u32>,
    /// Size of every stream (the files' size tables, concatenated).
    pub sizes: Vec<u32>,
    /// One entry per image (or band of an image): version-1 images first, then version-2
    /// ones, each in batch order (each entry point decodes a contiguous run of workgroups).
    pub images: Vec<ImageInfo>,
    /// Parameters of the decode dispatch of version-1 images (entry points `main`).
    pub decode_params: Params,
    /// Parameters of the decode dispatch of version-2 images (entry points `main_compact`).
    pub compact_params: Params,
    /// Words of the chunk's output binding (its parts' outputs, from the 256-byte boundary
    /// before the first, up to the end of the last, alignment padding included).
    pub out_words: u32,
}

/// A band of whole patch rows of one image (the whole image unless the image alone exceeds
/// the device's buffer limits), and where its output goes.
#[derive(Debug, Clone, Copy)]
struct Part {
    /// Index of the image in the batch.
    image: usize,
    /// First patch row and patch rows of the band.
    patch_row0: u32,
    patch_rows: u32,
    /// Byte position of the band's output in the batch buffer.
    out_pos: u64,
    /// Bytes of the band's output (interleaved: contiguous; a split image is never f32).
    out_len: u64,
    /// End of the band's output area in the batch buffer, including the image's alignment
    /// padding after its last band.
    out_end: u64,
}

impl Part {
    /// Streams `s0..s1` of the band.
    fn streams(&self, h: &crate::Header) -> (usize, usize) {
        let per_row = h.patches_x() as usize * h.streams_per_patch() as usize;
        (
            self.patch_row0 as usize * per_row,
            (self.patch_row0 + self.patch_rows) as usize * per_row,
        )
    }
    /// First pixel row and rows of the band.
    fn rows(&self, h: &crate::Header) -> (u32, u32) {
        let y0 = self.patch_row0 * h.patch_size();
        (y0, (self.patch_rows * h.patch_size()).min(h.height - y0))
    }
}

/// Builds a chunk's inputs from validated layouts, whole images, their outputs at
/// consecutive multiples of 256 bytes; `first_index` is the batch index of the first layout
/// (its error-flag slot). The GPU path builds its chunks the same way.
pub fn build_chunk(layouts: &[FileLayout], first_index: u32, output: OutputFormat) -> ChunkInputs {
    let mut pos = 0u64;
    let parts: Vec<Part> = layouts
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let out = output_bytes(&l.header, output);
            let p = Part {
                image: i,
                patch_row0: 0,
                patch_rows: l.header.patches_y(),
                out_pos: pos,
                out_len: out,
                out_end: pos + out.next_multiple_of(OUT_ALIGN),
            };
            pos = p.out_end;
            p
        })
        .collect();
    let mut c = build_parts(layouts, &parts, 0, output);
    for info in &mut c.images {
        info.image_index += first_index;
    }
    c
}

/// Builds the inputs of a chunk made of `parts`, whose output binding starts at byte
/// `out_start` of the batch buffer.
fn build_parts(
    layouts: &[FileLayout],
    parts: &[Part],
    out_start: u64,
    output: OutputFormat,
) -> ChunkInputs {
    // Stream bytes, copied once into their words (plus one spare zero word).
    let data_len: usize = parts
        .iter()
        .map(|p| {
            let l = &layouts[p.image];
            let (s0, s1) = p.streams(&l.header);
            (l.offsets[s1] - l.offsets[s0]) as usize
        })
        .sum();
    let mut input_words = vec![0u32; data_len.div_ceil(4) + 1];
    let input_bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut input_words);
    let mut filled = 0usize;
    let mut sizes: Vec<u32> = Vec::new();
    let mut images: Vec<ImageInfo> = Vec::new();
    let mut out_words_total = 0u32;
    for part in parts {
        let l = &layouts[part.image];
        let h = &l.header;
        let (s0, s1) = part.streams(h);
        let (_, band_h) = part.rows(h);
        let first_stream = sizes.len() as u32;
        let stream_bytes = &l.data[l.offsets[s0] as usize..l.offsets[s1] as usize];
        input_bytes[filled..filled + stream_bytes.len()].copy_from_slice(stream_bytes);
        filled += stream_bytes.len();
        sizes.extend(l.offsets[s0..=s1].windows(2).map(|w| (w[1] - w[0]) as u32));
        let stream_count = (s1 - s0) as u32;
        // Bands start at a whole patch row (a multiple of 8 pixel rows), so on a word: the
        // decode's word index (out_base + byte / 4) needs no byte delta.
        debug_assert_eq!((part.out_pos - out_start) % 4, 0);
        let out_base = ((part.out_pos - out_start) / 4) as u32;
        images.push(ImageInfo {
            width: h.width,
            height: band_h,
            channels: h.channels() as u32,
            depth: h.depth as u32,
            patch_log2: h.patch_log2 as u32,
            patches_x: h.patches_x(),
            stream_base: first_stream,
            stream_count,
            out_base,
            out_words: part.out_len.div_ceil(4) as u32,
            image_index: part.image as u32,
            // Set below.
            wg_base: workgroups_of(h, stream_count),
            version: h.profile.version() as u32,
            pad: [0; 3],
        });
        out_words_total = ((part.out_end - out_start) / 4) as u32;
    }
    debug_assert_eq!(filled, data_len);
    let norm = match output {
        OutputFormat::F32Chw(n) => n,
        OutputFormat::Interleaved => Normalize::UNIT,
    };
    // Version-1 images first, then version-2 ones (a stable sort): each version's entry
    // point is dispatched over a contiguous run of workgroups.
    images.sort_by_key(|i| i.version == VERSION_COMPACT);
    let mut wg_base = 0u32;
    let mut fast_workgroups = 0u32;
    for info in &mut images {
        let count = std::mem::replace(&mut info.wg_base, wg_base);
        wg_base += count;
        if info.version != VERSION_COMPACT {
            fast_workgroups = wg_base;
        }
    }
    let params = |first_workgroup: u32, count: u32| Params {
        count,
        image_count: images.len() as u32,
        input_bytes: data_len as u32,
        first_workgroup,
        mean: norm.mean,
        std: norm.std,
    };
    ChunkInputs {
        input_words,
        out_words: out_words_total,
        decode_params: params(0, fast_workgroups),
        compact_params: params(fast_workgroups, wg_base - fast_workgroups),
        sizes,
        images,
    }
}

/// A submitted batch whose error flags are still to be read.
struct Pending {
    batch: GpuBatch,
    staging: wgpu::Buffer,
    count: usize,
    /// Set when the batch was timed.
    timing: Option<TimingReadback>,
}

impl Pending {
    #[allow(clippy::type_complexity)]
    async fn finish(
        self,
        device: &wgpu::Device,
    ) -> Result<(GpuBatch, Vec<u32>, Option<StageTimings>)> {
        MapFuture::new(device, &self.staging, 0, self.staging.size()).await?;
        let flags: Vec<u32> = {
            let view = self
                .staging
                .get_mapped_range(..)
                .map_err(|e| Error::Gpu(format!("map failed: {e}")))?;
            bytemuck::pod_collect_to_vec(&view[..self.count * 4])
        };
        self.staging.unmap();
        let timings = match self.timing {
            Some(t) => Some(t.finish(device).await?),
            None => None,
        };
        Ok((self.batch, flags, timings))
    }
}

/// The first flagged image as [`FormatError::GpuReported`].
fn check_flags(flags: &[u32]) -> Result<()> {
    match flags.iter().enumerate().find(|(_, &f)| f != 0) {
        Some((image, &flags)) => Err(FormatError::GpuReported { image, flags }.into()),
        None => Ok(()),
    }
}

/// Shared state between a `map_async` callback and [`MapFuture`].
type MapState = Arc<
    Mutex<(
        Option<std::result::Result<(), wgpu::BufferAsyncError>>,
        Option<Waker>,
    )>,
>;

/// Resolves when a `map_async` completes; polls the device (non-blocking) when polled.
///
/// Native wgpu runs map callbacks only when the device is polled, and nothing else wakes the
/// task, so while the GPU is busy every `Pending` wakes the task again at once: under an
/// executor the future busy-polls (one core spinning on `device.poll`) until the map
/// completes. Blocking callers avoid the spin by waiting on the device first
/// (`PollType::wait_indefinitely`), as [`GpuDecoder::decode_batch`] does; async callers that
/// mind the spin can do the same on a blocking thread before awaiting.
struct MapFuture {
    device: wgpu::Device,
    state: MapState,
}

impl MapFuture {
    fn new(device: &wgpu::Device, buffer: &wgpu::Buffer, offset: u64, size: u64) -> Self {
        let state: MapState = Arc::new(Mutex::new((None, None)));
        let s = state.clone();
        buffer.map_async(wgpu::MapMode::Read, offset..offset + size, move |r| {
            let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
            g.0 = Some(r);
            if let Some(w) = g.1.take() {
                w.wake();
            }
        });
        MapFuture {
            device: device.clone(),
            state,
        }
    }
}

impl Future for MapFuture {
    type Output = Result<()>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let check = |state: &MapState| {
            state
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .0
                .take()
                .map(|r| r.map_err(|e| Error::Gpu(format!("buffer map failed: {e}"))))
        };
        if let Some(r) = check(&self.state) {
            return Poll::Ready(r);
        }
        let _ = self.device.poll(wgpu::PollType::Poll);
        if let Some(r) = check(&self.state) {
            return Poll::Ready(r);
        }
        self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = Some(cx.waker().clone());
        // Native wgpu only runs callbacks when polled: ask to be polled again (a busy poll:
        // see the type's documentation).
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The largest chunk limit `limits` allow: the largest storage binding (and buffer), at most
/// 2 GiB, rounded down to [`OUT_ALIGN`].
fn max_chunk_limit(limits: &wgpu::Limits) -> u64 {
    limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(1 << 31)
        / OUT_ALIGN
        * OUT_ALIGN
}

/// A CPU-side parse error of image `image` of a batch, as [`Error::Gpu`] with the message
/// `image {image}: ` followed by the CPU decoder's error message, so that a batch error names
/// its file.
fn in_image(image: usize, e: Error) -> Error {
    Error::InBatch {
        image,
        error: Box::new(e),
    }
}

/// Copies `size` bytes (a multiple of 4) at `offset` of `buffer` to the CPU (blocking).
fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("l3 readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder =
        device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
    queue.submit([encoder.finish()]);
    let fut = MapFuture::new(device, &staging, 0, size);
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
    pollster::block_on(fut)?;
    let v = staging
        .get_mapped_range(..)
        .map_err(|e| Error::Gpu(format!("map failed: {e}")))?
        .to_vec();
    staging.unmap();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{encode, EncodeOptions, RawImage, Samples};
    use crate::format::{parse_file, ParseOptions};
    use crate::{ColorType, Limits};

    /// Plans a batch of version-1 and version-2 files with a small chunk limit (so images are
    /// split into bands and chunks), runs every chunk through the CPU twins, assembles the batch buffer as the GPU path
    /// does, and compares each image with the CPU decoder. No GPU needed.
    #[test]
    fn banded_chunks_through_the_twins_match_the_cpu_decoder() {
        let mut files = Vec::new();
        for (i, &(w, h, c, depth)) in [
            (300u32, 300u32, 3u8, 8u8),
            (20, 10, 1, 8),
            (257, 199, 4, 16),
            (3, 30000, 1, 16),
            (123, 411, 2, 8),
        ]
        .iter()
        .enumerate()
        {
            let n = (w * h * c as u32) as usize;
            let samples: Vec<u16> = (0..n)
                .map(|k| ((k * 7 + k / 13 * 3) % if depth == 8 { 256 } else { 65536 }) as u16)
                .collect();
            let bytes: Vec<u8> = samples.iter().map(|&v| v as u8).collect();
            let image = RawImage {
                width: w,
                height: h,
                color: ColorType::from_channels(c).unwrap(),
                samples: if depth == 8 {
                    Samples::U8(&bytes)
                } else {
                    Samples::U16(&samples)
                },
            };
            // Both format versions: version 2 has one stream per patch.
            let opts = EncodeOptions {
                patch_log2: 3 + (i % 4) as u8,
                profile: crate::ProfileOptions::default_for(if i % 2 == 0 {
                    crate::Profile::Compact
                } else {
                    crate::Profile::Fast
                }),
                ..Default::default()
            };
            files.push(encode(&image, &opts).unwrap());
        }
        let layouts: Vec<FileLayout> = files
            .iter()
            .map(|f| parse_file(f, &Limits::default(), ParseOptions::default()).unwrap())
            .collect();
        let output = OutputFormat::Interleaved;
        let (image_pos, total, parts, chunks) = plan_chunks(&layouts, output, 256 << 10).unwrap();
        assert!(parts.len() > layouts.len(), "no image was split");
        assert!(chunks.len() > 1);
        let mut buffer = vec![0u8; total as usize];
        for chunk in chunks {
            let chunk_parts = &parts[chunk];
            let start = chunk_parts[0].out_pos / OUT_ALIGN * OUT_ALIGN;
            let c = build_parts(&layouts, chunk_parts, start, output);
            let (out, flags) = cpu_twin::run_chunk(&c, output);
            assert!(flags.iter().all(|&f| f == 0));
            // The decode writes from the first part's output on (the words before it, after
            // the aligned binding start, belong to the previous chunk and stay zero here).
            let from = (chunk_parts[0].out_pos - start) as usize;
            buffer[start as usize + from..start as usize + out.len()].copy_from_slice(&out[from..]);
        }
        for (f, &pos) in files.iter().zip(&image_pos) {
            let (_, want) = crate::decode::decode(f, &Default::default()).unwrap();
            assert!(buffer[pos as usize..pos as usize + want.len()] == want[..]);
        }
        // f32 output is never split: the same batch is refused.
        assert!(matches!(
            plan_chunks(&layouts, OutputFormat::F32Chw(Normalize::UNIT), 256 << 10),
            Err(Error::Limits(LimitsError::GpuBuffer { .. }))
        ));
    }
}
