//! The device side of the decoder: adapter selection ([`select_adapter`]), the limits the
//! decoder asks for ([`required_limits`]), and the compiled pipelines ([`Pipelines`]): the
//! prefix sum's two entry points and a decode pipeline per (format version, output layout
//! kind), each built from the shader [`super::shaders::source`] assembles.

use std::collections::HashMap;
use std::num::NonZeroU64;

use super::abi::{LayoutKind, OUT_ALIGN, VERSION_COMPACT};
use super::shaders::{self, Stage};
use crate::error::{Error, Result};

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

/// A new device of `adapter` for the decoder: the adapter's largest buffers, and
/// [`wgpu::Features::TIMESTAMP_QUERY`] and [`wgpu::Features::VULKAN_EXTERNAL_MEMORY_FD`]
/// (for `GpuBatch::export`) when the adapter supports them.
pub(crate) fn request_device(adapter: &wgpu::Adapter) -> Result<(wgpu::Device, wgpu::Queue)> {
    pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("l3 gpu decoder"),
        required_features: adapter.features()
            & (wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::VULKAN_EXTERNAL_MEMORY_FD),
        required_limits: required_limits(adapter),
        ..Default::default()
    }))
    .map_err(|e| Error::Gpu(format!("request_device failed: {e}")))
}

/// The largest chunk limit `limits` allow: the largest storage binding (and buffer), at most
/// 2 GiB, rounded down to [`OUT_ALIGN`].
pub(crate) fn max_chunk_limit(limits: &wgpu::Limits) -> u64 {
    limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(1 << 31)
        / OUT_ALIGN
        * OUT_ALIGN
}

/// The decoder's bind group layouts and pipelines, created once per decoder.
pub(crate) struct Pipelines {
    /// Prefix sum: binding 0 the scan buffer, 1 the level's `ScanParams`.
    pub scan_bgl: wgpu::BindGroupLayout,
    /// Decode: bindings 0..=6 of `shaders/decode.wgsl`.
    pub decode_bgl: wgpu::BindGroupLayout,
    /// `scan_blocks` of `prefix_sum.wgsl`.
    pub scan_blocks: wgpu::ComputePipeline,
    /// `add_sums` of `prefix_sum.wgsl`.
    pub add_sums: wgpu::ComputePipeline,
    /// The decode pipelines, keyed by (format version, output layout kind): entry point
    /// `main` for version 1, `main_compact` for version 2.
    decode: HashMap<(u32, LayoutKind), wgpu::ComputePipeline>,
    /// Bindings of `levels.wgsl`: jobs, src, residual (read), dst.
    pub levels_bgl: wgpu::BindGroupLayout,
    /// `levels.wgsl`'s `refine`.
    pub refine: wgpu::ComputePipeline,
    /// `levels.wgsl`'s `subsample`.
    pub subsample: wgpu::ComputePipeline,
    /// Bindings of `augment.wgsl`: jobs, src (read), dst (read-write).
    pub augment_bgl: wgpu::BindGroupLayout,
    /// `augment.wgsl`'s `augment`.
    pub augment: wgpu::ComputePipeline,
    /// Bindings of `fields.wgsl`: jobs, bins, runs (read), values (read-write).
    pub fields_bgl: wgpu::BindGroupLayout,
    /// `fields.wgsl`'s `reconstruct_field`.
    pub fields: wgpu::ComputePipeline,
    /// Bindings of `lossless.wgsl`: input words, segments, tables (read), words, errors
    /// (read-write), arrays, runs (read), output (read-write), the step (uniform, dynamic
    /// offset).
    pub lossless_bgl: wgpu::BindGroupLayout,
    /// `lossless.wgsl`'s `decode_segments`.
    pub lossless_segments: wgpu::ComputePipeline,
    /// `lossless.wgsl`'s `undiff`.
    pub lossless_undiff: wgpu::ComputePipeline,
    /// `lossless.wgsl`'s `finish`.
    pub lossless_finish: wgpu::ComputePipeline,
    /// Bindings of `tensor_window.wgsl`: jobs, src0, src1, src2 (read), dst (read-write).
    pub tensor_window_bgl: wgpu::BindGroupLayout,
    /// `tensor_window.wgsl`'s `tensor_window`.
    pub tensor_window: wgpu::ComputePipeline,
    /// Bindings of `bounded.wgsl`: input words, segments, tables (read), words, errors
    /// (read-write), arrays, passes (read), output (read-write), the pass (uniform, dynamic
    /// offset).
    pub bounded_bgl: wgpu::BindGroupLayout,
    /// `bounded.wgsl`'s `decode_segments`.
    pub bounded_segments: wgpu::ComputePipeline,
    /// `bounded.wgsl`'s `undiff`.
    pub bounded_undiff: wgpu::ComputePipeline,
    /// `bounded.wgsl`'s `lattice_pass`.
    pub bounded_lattice: wgpu::ComputePipeline,
    /// `bounded.wgsl`'s `finish`.
    pub bounded_finish: wgpu::ComputePipeline,
}

/// The format versions the decode stage has an entry point for, with their entry points.
const ENTRY_POINTS: [(u32, &str); 2] = [
    (crate::format::VERSION_FAST as u32, "main"),
    (VERSION_COMPACT, "main_compact"),
];

impl Pipelines {
    /// Compiles every stage on `device`, reporting validation errors as [`Error::Gpu`].
    pub fn new(device: &wgpu::Device) -> Result<Self> {
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = |stage: Stage| {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(stage.label()),
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
        let levels_bgl = bgl(
            "l3 levels",
            &[
                storage_entry(0, true),
                storage_entry(1, true),
                storage_entry(2, true),
                storage_entry(3, false),
            ],
        );
        let augment_bgl = bgl(
            "l3 augment",
            &[
                storage_entry(0, true),
                storage_entry(1, true),
                storage_entry(2, false),
            ],
        );
        let fields_bgl = bgl(
            "l3 fields",
            &[
                storage_entry(0, true),
                storage_entry(1, true),
                storage_entry(2, true),
                storage_entry(3, false),
            ],
        );
        let lossless_bgl = bgl(
            "l3 lossless",
            &[
                storage_entry(0, true),
                storage_entry(1, true),
                storage_entry(2, true),
                storage_entry(3, false),
                storage_entry(4, false),
                storage_entry(5, true),
                storage_entry(6, true),
                storage_entry(7, false),
                uniform_dynamic_entry(8),
            ],
        );
        let tensor_window_bgl = bgl(
            "l3 tensor_window",
            &[
                storage_entry(0, true),
                storage_entry(1, true),
                storage_entry(2, true),
                storage_entry(3, true),
                storage_entry(4, false),
            ],
        );
        let bounded_bgl = bgl(
            "l3 bounded",
            &[
                storage_entry(0, true),
                storage_entry(1, true),
                storage_entry(2, true),
                storage_entry(3, false),
                storage_entry(4, false),
                storage_entry(5, true),
                storage_entry(6, true),
                storage_entry(7, false),
                uniform_dynamic_entry(8),
            ],
        );
        let pipeline =
            |label: &str, bgl: &wgpu::BindGroupLayout, module: &wgpu::ShaderModule, entry| {
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
        let mut decode = HashMap::new();
        for kind in LayoutKind::ALL {
            let stage = Stage::Decode(kind);
            let m = module(stage);
            for (version, entry) in ENTRY_POINTS {
                let label = format!("l3 {} {entry}", stage.label());
                decode.insert((version, kind), pipeline(&label, &decode_bgl, &m, entry));
            }
        }
        let levels_module = module(Stage::Levels);
        let refine = pipeline(
            "l3 levels.wgsl refine",
            &levels_bgl,
            &levels_module,
            "refine",
        );
        let subsample = pipeline(
            "l3 levels.wgsl subsample",
            &levels_bgl,
            &levels_module,
            "subsample",
        );
        let augment_module = module(Stage::Augment);
        let augment = pipeline(
            "l3 augment.wgsl augment",
            &augment_bgl,
            &augment_module,
            "augment",
        );
        let fields_module = module(Stage::Fields);
        let fields = pipeline(
            "l3 fields.wgsl reconstruct_field",
            &fields_bgl,
            &fields_module,
            "reconstruct_field",
        );
        let lossless_module = module(Stage::Lossless);
        let lossless = |entry: &'static str| {
            let label = format!("l3 lossless.wgsl {entry}");
            pipeline(&label, &lossless_bgl, &lossless_module, entry)
        };
        let lossless_segments = lossless("decode_segments");
        let lossless_undiff = lossless("undiff");
        let lossless_finish = lossless("finish");
        let tensor_window = pipeline(
            "l3 tensor_window.wgsl tensor_window",
            &tensor_window_bgl,
            &module(Stage::TensorWindow),
            "tensor_window",
        );
        let bounded_module = module(Stage::Bounded);
        let bounded = |entry: &'static str| {
            let label = format!("l3 bounded.wgsl {entry}");
            pipeline(&label, &bounded_bgl, &bounded_module, entry)
        };
        let bounded_segments = bounded("decode_segments");
        let bounded_undiff = bounded("undiff");
        let bounded_lattice = bounded("lattice_pass");
        let bounded_finish = bounded("finish");
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!(
                "creating the decoder's pipelines failed: {e:?}"
            )));
        }
        Ok(Pipelines {
            scan_bgl,
            decode_bgl,
            scan_blocks,
            add_sums,
            decode,
            levels_bgl,
            refine,
            subsample,
            augment_bgl,
            augment,
            fields_bgl,
            fields,
            lossless_bgl,
            lossless_segments,
            lossless_undiff,
            lossless_finish,
            tensor_window_bgl,
            tensor_window,
            bounded_bgl,
            bounded_segments,
            bounded_undiff,
            bounded_lattice,
            bounded_finish,
        })
    }

    /// The decode pipeline of format version `version` for output layout kind `kind`.
    pub fn decode(&self, version: u32, kind: LayoutKind) -> &wgpu::ComputePipeline {
        &self.decode[&(version, kind)]
    }
}

pub(crate) fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
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

pub(crate) fn uniform_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
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

/// A uniform binding whose offset is given per `set_bind_group`.
fn uniform_dynamic_entry(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: None,
        },
        count: None,
    }
}

/// A binding of `size` bytes at `offset` of `buffer`.
pub(crate) fn range(buffer: &wgpu::Buffer, offset: u64, size: u64) -> wgpu::BindingResource<'_> {
    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
        buffer,
        offset,
        size: NonZeroU64::new(size),
    })
}
