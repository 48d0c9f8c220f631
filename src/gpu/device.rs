//! The device side of the engine: adapter selection ([`select_adapter`]), the limits asked
//! for ([`required_limits`]), and the compiled pipelines: the decoder's prefix sum and decode
//! pipeline per (format version, output layout kind), created with the decoder
//! ([`Pipelines`]), and every kernel family ([`Kernel`]: levels, augment, fields, lossless,
//! tensor window, bounded, and the encoder's) compiled on first use ([`Kernels`]), each built
//! from the shaders [`super::shaders::source`] assembles.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::OnceLock;

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

/// The kernel families compiled on first use ([`Kernels`]): each its WGSL stages, one bind
/// group layout and the entry points of each stage ([`Family`]). The decoder's kernels and the
/// encoder's are built the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// `levels.wgsl`: jobs, src, residual (read), dst.
    Levels,
    /// `augment.wgsl`: jobs, src (read), dst (read-write).
    Augment,
    /// `fields.wgsl`: jobs, bins, runs (read), values (read-write).
    Fields,
    /// `lossless.wgsl`: input words, segments, tables (read), words, errors (read-write),
    /// arrays, runs (read), output (read-write), the step (uniform, dynamic offset).
    Lossless,
    /// `tensor_window.wgsl`: jobs, src0, src1, src2 (read), dst (read-write).
    TensorWindow,
    /// `bounded.wgsl`: as `lossless.wgsl`, binding 6 the lattice passes.
    Bounded,
    /// The error-bounded encoder (`encode_quantise.wgsl`, `encode_differences.wgsl`,
    /// `encode_histogram.wgsl`, `encode_pack.wgsl`; `shared/encode_bindings.wgsl`): values
    /// (read), q, z, hist (read-write), segs, extent (read), fill, out (read-write), params
    /// (uniform).
    Encode,
    /// `blocks.wgsl`: src (read), dst, scratch (read-write), params (uniform).
    Blocks,
}

/// Kernel families there are (`Blocks` is the last variant).
const KERNELS: usize = Kernel::Blocks as usize + 1;

impl Kernel {
    /// Its WGSL stages, each with its entry points.
    fn stages(self) -> &'static [(Stage, &'static [&'static str])] {
        match self {
            Kernel::Levels => &[(Stage::Levels, &["refine", "subsample"])],
            Kernel::Augment => &[(Stage::Augment, &["augment"])],
            Kernel::Fields => &[(Stage::Fields, &["reconstruct_field"])],
            Kernel::Lossless => &[(Stage::Lossless, &["decode_segments", "undiff", "finish"])],
            Kernel::TensorWindow => &[(Stage::TensorWindow, &["tensor_window"])],
            Kernel::Bounded => &[(
                Stage::Bounded,
                &["decode_segments", "undiff", "lattice_pass", "finish"],
            )],
            Kernel::Encode => &[
                (
                    Stage::EncodeQuantise,
                    &[
                        "value_range",
                        "quantise",
                        "fill_blocks",
                        "fill_carry",
                        "fill_apply",
                    ],
                ),
                (Stage::EncodeDifferences, &["differences", "estimate"]),
                (Stage::EncodeHistogram, &["histogram"]),
                (Stage::EncodePack, &["pack"]),
            ],
            Kernel::Blocks => &[(
                Stage::Blocks,
                &[
                    "blocks_histogram",
                    "blocks_code",
                    "blocks_sizes",
                    "blocks_scan",
                    "blocks_pack",
                    "blocks_decode",
                ],
            )],
        }
    }

    /// Its name in labels and errors.
    fn label(self) -> String {
        let stages: Vec<&str> = self.stages().iter().map(|(s, _)| s.label()).collect();
        stages.join(", ")
    }

    /// Its bindings: storage (read-only or not) or, for the chunked float kernels, a last
    /// uniform with a dynamic offset.
    fn bindings(self) -> Vec<wgpu::BindGroupLayoutEntry> {
        let storage = |read_only: &[bool]| -> Vec<wgpu::BindGroupLayoutEntry> {
            read_only
                .iter()
                .enumerate()
                .map(|(i, &r)| storage_entry(i as u32, r))
                .collect()
        };
        match self {
            Kernel::Levels | Kernel::Fields => storage(&[true, true, true, false]),
            Kernel::Augment => storage(&[true, true, false]),
            Kernel::TensorWindow => storage(&[true, true, true, true, false]),
            Kernel::Lossless | Kernel::Bounded => {
                let mut b = storage(&[true, true, true, false, false, true, true, false]);
                b.push(uniform_dynamic_entry(8));
                b
            }
            Kernel::Encode => {
                let mut b = storage(&[true, false, false, false, true, true, false, false]);
                b.push(uniform_entry(8));
                b
            }
            Kernel::Blocks => {
                let mut b = storage(&[true, false, false]);
                b.push(uniform_entry(3));
                b
            }
        }
    }
}

/// One kernel family on a device: its bind group layout and a pipeline per entry point.
#[derive(Debug)]
pub(crate) struct Family {
    /// The bind group layout of every entry point.
    pub bgl: wgpu::BindGroupLayout,
    entries: Vec<(&'static str, wgpu::ComputePipeline)>,
}

impl Family {
    /// The pipeline of entry point `name`, which the family has (see [`Kernel`]).
    pub fn entry(&self, name: &str) -> &wgpu::ComputePipeline {
        &self
            .entries
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no entry point {name} in this kernel family"))
            .1
    }
}

/// The kernel families of one device, each compiled on its first use ([`Kernels::kernel`]).
pub(crate) struct Kernels {
    device: wgpu::Device,
    /// By [`Kernel`] (in declaration order), once compiled.
    families: [OnceLock<Family>; KERNELS],
}

impl Kernels {
    /// No family compiled yet, on `device`.
    pub fn new(device: &wgpu::Device) -> Self {
        Kernels {
            device: device.clone(),
            families: Default::default(),
        }
    }

    /// Kernel family `k`, compiled on its first use (by one thread; a concurrent first use
    /// may compile it twice and keep one), validation errors as [`Error::Gpu`].
    pub fn kernel(&self, k: Kernel) -> Result<&Family> {
        let cell = &self.families[k as usize];
        if let Some(f) = cell.get() {
            return Ok(f);
        }
        let device = &self.device;
        let name = k.label();
        let family = validated(device, &name, || {
            let bgl = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(&format!("l3 {name}")),
                entries: &k.bindings(),
            });
            let mut entries = Vec::new();
            for &(stage, names) in k.stages() {
                let m = module(device, stage);
                for &e in names {
                    let label = format!("l3 {} {e}", stage.label());
                    entries.push((e, pipeline(device, &label, &bgl, &m, e)));
                }
            }
            Family { bgl, entries }
        })?;
        Ok(cell.get_or_init(|| family))
    }
}

/// The decoder's pipelines: the prefix sum and the decode (every batch needs them), created
/// with the decoder; every other kernel family on first use ([`Pipelines::kernel`]), so a
/// decoder that never runs a kernel never compiles it.
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
    /// The kernel families, each compiled on first use.
    kernels: Kernels,
}

/// The format versions the decode stage has an entry point for, with their entry points.
const ENTRY_POINTS: [(u32, &str); 2] = [
    (crate::format::VERSION_FAST as u32, "main"),
    (VERSION_COMPACT, "main_compact"),
];

/// A compute pipeline of `entry` in `module` with the one bind group layout `bgl`.
fn pipeline(
    device: &wgpu::Device,
    label: &str,
    bgl: &wgpu::BindGroupLayout,
    module: &wgpu::ShaderModule,
    entry: &str,
) -> wgpu::ComputePipeline {
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
}

/// The shader module of `stage`.
fn module(device: &wgpu::Device, stage: Stage) -> wgpu::ShaderModule {
    device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(stage.label()),
        source: wgpu::ShaderSource::Wgsl(shaders::source(stage).into()),
    })
}

/// Runs `make` in a validation error scope: its value, or the error as [`Error::Gpu`].
fn validated<T>(device: &wgpu::Device, what: &str, make: impl FnOnce() -> T) -> Result<T> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let made = make();
    match pollster::block_on(scope.pop()) {
        Some(e) => Err(Error::Gpu(format!("creating {what} failed: {e:?}"))),
        None => Ok(made),
    }
}

impl Pipelines {
    /// Compiles the prefix sum and decode stages on `device`, reporting validation errors as
    /// [`Error::Gpu`].
    pub fn new(device: &wgpu::Device) -> Result<Self> {
        validated(device, "the decoder's pipelines", || {
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
            let scan_module = module(device, Stage::PrefixSum);
            let scan_blocks = pipeline(
                device,
                "l3 scan_blocks",
                &scan_bgl,
                &scan_module,
                "scan_blocks",
            );
            let add_sums = pipeline(device, "l3 add_sums", &scan_bgl, &scan_module, "add_sums");
            let mut decode = HashMap::new();
            for kind in LayoutKind::ALL {
                let stage = Stage::Decode(kind);
                let m = module(device, stage);
                for (version, entry) in ENTRY_POINTS {
                    let label = format!("l3 {} {entry}", stage.label());
                    decode.insert(
                        (version, kind),
                        pipeline(device, &label, &decode_bgl, &m, entry),
                    );
                }
            }
            Pipelines {
                scan_bgl,
                decode_bgl,
                scan_blocks,
                add_sums,
                decode,
                kernels: Kernels::new(device),
            }
        })
    }

    /// The decode pipeline of format version `version` for output layout kind `kind`.
    pub fn decode(&self, version: u32, kind: LayoutKind) -> &wgpu::ComputePipeline {
        &self.decode[&(version, kind)]
    }

    /// Kernel family `k`, compiled on its first use ([`Kernels::kernel`]).
    pub fn kernel(&self, k: Kernel) -> Result<&Family> {
        self.kernels.kernel(k)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every entry point a kernel family names is an entry point of its stage's WGSL, and every
    /// family has its slot in `Kernels` (so the list and the shaders cannot drift).
    #[test]
    fn every_kernel_entry_point_is_in_its_shader() {
        use Kernel::*;
        let all = [
            Levels,
            Augment,
            Fields,
            Lossless,
            TensorWindow,
            Bounded,
            Encode,
            Blocks,
        ];
        assert_eq!(all.len(), KERNELS);
        for (i, k) in all.into_iter().enumerate() {
            assert_eq!(k as usize, i);
            for &(stage, names) in k.stages() {
                let module = wgpu::naga::front::wgsl::parse_str(&shaders::source(stage)).unwrap();
                let have: Vec<&str> = module
                    .entry_points
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect();
                for name in names {
                    assert!(
                        have.contains(name),
                        "{}: no {name} in {have:?}",
                        stage.label()
                    );
                }
            }
        }
    }
}
