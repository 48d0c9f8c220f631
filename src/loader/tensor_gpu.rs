//! The loader's GPU path over tensor records (feature `gpu`): [`window_batch`] takes a
//! batch's records (each array's index entry and payload) and their windows
//! ([`TensorAugment::window`]), decodes the compressed arrays in one batch per kind
//! (`field::gpu::decode_fields_windows` for error-bounded version 1, only the bin-image
//! patches a one-plane array's window reads; `decode_bounded_fields` for version 3;
//! `decode_lossless_fields` for lossless),
//! uploads the raw ones, and cuts every window with the engine's tensor-window kernel
//! (`shaders/tensor_window.wgsl`), the twin of [`TensorAugment::apply`] bit for bit. The
//! result is one f32 or f16 tensor `[N, ...]` per array name, left on the GPU
//! ([`GpuTensorBatch`]) or read back. Here the records become the kernel's jobs
//! ([`plan_tensor_batch`], a pure function of the records, the windows and the limits); the
//! engine (`crate::gpu`) checks the bindings and dispatches.
//!
//! Every index entry and payload is hostile: a payload must agree with its entry
//! (`tensor::check_payload`), every window must lie inside its array, arrays of one name must
//! give one output shape, and sizes are checked against the decode limits and the device's
//! before anything is allocated. float64, int64 and uint64 arrays are refused here (a
//! [`ParameterError`]): the CPU path takes them.

use super::tensor::{Tensor, TensorType};
use super::tensor_augment::{TensorAugment, TensorNorm, TensorWindow};
use crate::error::invalid_option;
use crate::error::{Error, LimitsError, Result};
use crate::gpu::abi::{element, TensorWindowJob, OUT_ALIGN};
use crate::gpu::bindings::BindLimits;
use crate::gpu::tensor_window::{self, WindowTask};
use crate::gpu::{GpuDecoder, StagedBuffer};
use crate::tensor::{check_payload, check_shape, ArraySpec, DType, StorageMode};

/// One array of one record, as the loader read it: its index entry and its payload.
#[derive(Debug, Clone, Copy)]
pub struct TensorArrayInput<'a> {
    /// The index entry.
    pub spec: &'a ArraySpec,
    /// The payload (checked against the entry before use).
    pub payload: &'a [u8],
}

/// One sample of a batch: its record's arrays and its window.
#[derive(Debug, Clone)]
pub struct TensorSampleInput<'a> {
    /// The record's arrays (every sample of a batch holds the same names).
    pub arrays: Vec<TensorArrayInput<'a>>,
    /// Its window ([`TensorAugment::window`] over the arrays' spatial extent).
    pub window: TensorWindow,
}

/// One named tensor of a [`GpuTensorBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuTensorArray {
    /// The array name.
    pub name: String,
    /// `[samples, ...]`: the batch size, then the output shape of one sample.
    pub shape: Vec<usize>,
    /// Byte offset of its values in [`GpuTensorBatch::buffer`] (a multiple of 256).
    pub offset: u64,
}

/// What a batch moved and ran, counted by the plan (for the benchmark and the tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TensorGpuCounts {
    /// Bytes of the arrays' elements as the records describe them (their raw size).
    pub array_bytes: u64,
    /// Bytes of raw payloads uploaded (copied once, into a mapped buffer).
    pub raw_upload_bytes: u64,
    /// Bytes of compressed payloads handed to the field decoders.
    pub compressed_bytes: u64,
    /// Error-bounded arrays decoded from `.l3f` version 1 payloads (2 or 3 axes; one
    /// `decode_fields` batch).
    pub error_bounded: usize,
    /// Of those, the arrays of one plane whose bin image was decoded only within the
    /// job's window (the patches it reads).
    pub error_bounded_windowed: usize,
    /// Error-bounded arrays decoded from `.l3f` version 3 payloads (1 to 4 axes; one
    /// `decode_bounded_fields` batch).
    pub bounded: usize,
    /// Lossless arrays decoded (one `decode_lossless_fields` batch).
    pub lossless: usize,
    /// Raw arrays uploaded.
    pub raw: usize,
    /// Dispatches of the tensor-window kernel (1 unless a binding limit splits the batch).
    pub window_dispatches: usize,
    /// Bytes of the output tensors.
    pub output_bytes: u64,
}

/// A batch of named tensors on the GPU: each name's `[N, ...]` values, C order, f32 or f16,
/// in one buffer.
#[derive(Debug)]
pub struct GpuTensorBatch {
    /// The values (usage `STORAGE | COPY_SRC`).
    pub buffer: wgpu::Buffer,
    /// The tensors, in the order of the first sample's arrays.
    pub arrays: Vec<GpuTensorArray>,
    /// The element type.
    pub element: TensorType,
    /// What the batch moved and ran.
    pub counts: TensorGpuCounts,
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl GpuTensorBatch {
    /// Values of tensor `i`.
    pub fn len_of(&self, i: usize) -> usize {
        self.arrays[i].shape.iter().product()
    }

    /// The device the tensors live on.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue of that device.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Tensor `i`, read back (blocking).
    pub fn read_back_array(&self, i: usize) -> Result<Tensor> {
        let gpu = (&self.device, &self.queue);
        let (offset, n) = (self.arrays[i].offset, self.len_of(i));
        super::gpu::read_values(gpu, &self.buffer, offset, n, self.element)
    }

    /// Tensor `i` copied into a new mapped host-visible buffer (blocking until it is
    /// mapped), for a consumer that copies it where it wants (a reused, pinned tensor).
    pub fn stage_array(&self, i: usize) -> Result<StagedBuffer> {
        let gpu = (&self.device, &self.queue);
        let (offset, n) = (self.arrays[i].offset, self.len_of(i));
        super::gpu::stage_values(gpu, &self.buffer, offset, n, self.element)
    }

    /// Every tensor, read back (blocking), by name.
    pub fn read_back(&self) -> Result<Vec<(String, Tensor)>> {
        (0..self.arrays.len())
            .map(|i| Ok((self.arrays[i].name.clone(), self.read_back_array(i)?)))
            .collect()
    }

    /// The batch handed over by `mode` (staged, or left on the GPU), one view per tensor at
    /// its offset; `None` for [`super::handoff::GpuOutput::ReadBack`] and a batch without values.
    pub fn into_hand_off(
        self,
        mode: super::handoff::GpuOutput,
    ) -> Result<Option<super::handoff::GpuHandOff>> {
        let views = self
            .arrays
            .into_iter()
            .map(|a| super::handoff::HandOffView {
                name: a.name,
                shape: a.shape,
                offset: a.offset,
            })
            .collect();
        let gpu = (self.buffer, &self.device, &self.queue);
        super::handoff::GpuHandOff::new(mode, gpu, views, self.element)
    }
}

/// Where a job's array comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArraySource {
    /// Bytes `offset..offset + len` of the raw upload.
    Raw {
        /// Byte offset (a multiple of 4).
        offset: u64,
        /// Bytes.
        len: u64,
    },
    /// Array `k` of the error-bounded batch (f32 values, `len` bytes).
    ErrorBounded {
        /// Index in [`TensorBatchPlan::error_bounded`].
        k: usize,
        /// Bytes.
        len: u64,
    },
    /// Array `k` of the version 3 error-bounded batch (f32 values, `len` bytes).
    Bounded {
        /// Index in [`TensorBatchPlan::bounded`].
        k: usize,
        /// Bytes.
        len: u64,
    },
    /// Array `k` of the lossless batch (`len` bytes).
    Lossless {
        /// Index in [`TensorBatchPlan::lossless`].
        k: usize,
        /// Bytes.
        len: u64,
    },
}

/// Source bindings of the window kernel, by [`ArraySource`] kind.
const SOURCE_RAW: u32 = 0;
const SOURCE_ERROR_BOUNDED: u32 = 1;
const SOURCE_LOSSLESS: u32 = 2;

/// The plan of one batch: the output tensors, a job per (name, sample) with where its array
/// comes from, and what goes to each decoder. Public for tests and fuzzing; not a stable API.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct TensorBatchPlan<'a> {
    /// The output tensors (offsets in the output buffer).
    pub arrays: Vec<GpuTensorArray>,
    /// Bytes of the output buffer.
    pub output_bytes: u64,
    /// Per job: the job (offsets and workgroups left to the engine), its array's source and
    /// its first output value.
    pub(crate) jobs: Vec<(TensorWindowJob, ArraySource, u64)>,
    /// Per job: the sample it belongs to.
    pub samples: Vec<usize>,
    /// The raw payloads, at their upload offsets.
    pub raw: Vec<(u64, &'a [u8])>,
    /// Bytes of the raw upload.
    pub raw_bytes: u64,
    /// The error-bounded `.l3f` version 1 payloads (2 or 3 axes), in job order.
    pub error_bounded: Vec<&'a [u8]>,
    /// Per version 1 payload: the window of its bin image the job reads, where the array
    /// is one plane (its elements outside the last two axes number 1): only those patches
    /// are decoded. `None`: decoded whole (several planes are stacked in the bin image).
    pub error_bounded_windows: Vec<Option<crate::layout::Window>>,
    /// The error-bounded `.l3f` version 3 payloads (1 to 4 axes), in job order. They
    /// share the window kernel's source binding with version 1's, after them.
    pub bounded: Vec<&'a [u8]>,
    /// The lossless payloads (`.l3f` version 2), in job order.
    pub lossless: Vec<&'a [u8]>,
    /// Per decoder batch entry: its job (error-bounded, lossless, then version 3).
    pub decoded_jobs: [Vec<usize>; 3],
    /// What the batch moves.
    pub counts: TensorGpuCounts,
}

impl TensorBatchPlan<'_> {
    /// The engine's tasks, given the byte offsets of the decoded arrays in their buffers.
    pub(crate) fn tasks(
        &self,
        error_bounded: &[u64],
        lossless: &[u64],
        bounded: &[u64],
    ) -> Vec<WindowTask> {
        self.jobs
            .iter()
            .map(|&(job, source, dst)| {
                let (src, source_binding) = match source {
                    ArraySource::Raw { offset, len } => ((offset, len), SOURCE_RAW),
                    ArraySource::ErrorBounded { k, len } => {
                        ((error_bounded[k], len), SOURCE_ERROR_BOUNDED)
                    }
                    ArraySource::Bounded { k, len } => ((bounded[k], len), SOURCE_ERROR_BOUNDED),
                    ArraySource::Lossless { k, len } => ((lossless[k], len), SOURCE_LOSSLESS),
                };
                WindowTask {
                    job: TensorWindowJob {
                        source: source_binding,
                        ..job
                    },
                    src,
                    dst,
                }
            })
            .collect()
    }
}

fn in_sample(sample: usize, e: Error) -> Error {
    Error::InBatch {
        image: sample,
        error: Box::new(e),
    }
}

/// The window kernel's element type of an array stored as `spec` says, or why the GPU
/// path does not take it.
fn element_of(spec: &ArraySpec) -> Result<u32> {
    Ok(match spec.dtype {
        DType::Float32 => element::F32,
        DType::Float16 => element::F16,
        DType::BFloat16 => element::BF16,
        DType::UInt8 => element::U8,
        DType::Int8 => element::I8,
        DType::UInt16 => element::U16,
        DType::Int16 => element::I16,
        DType::UInt32 => element::U32,
        DType::Int32 => element::I32,
        DType::Float64 | DType::Int64 | DType::UInt64 => {
            return Err(invalid_option(
                "tensor dtype",
                spec.dtype as u64,
                "64-bit arrays are windowed on the CPU path, not the GPU",
            ))
        }
    })
}

/// Plans a batch (see [`TensorBatchPlan`]): checks every sample (the same array names as
/// the first, payloads that agree with their entries, one spatial extent per record, a
/// window inside it, one output shape per name) and sizes (each array within
/// `max_output_bytes` and u32 indexing, the upload and the output within `limits`), then
/// places the jobs by name, then sample. `stats` gives a name's `(mean, std)` where
/// `augment.normalise` (names without statistics are not normalised, as on the CPU).
/// Public for tests and fuzzing; not a stable API.
#[doc(hidden)]
pub fn plan_tensor_batch<'a>(
    augment: &TensorAugment,
    samples: &[TensorSampleInput<'a>],
    stats: &dyn Fn(&str) -> Option<(f64, f64)>,
    limits: &BindLimits,
    max_output_bytes: u64,
) -> Result<TensorBatchPlan<'a>> {
    augment.validate()?;
    let n = augment.spatial_axes();
    let Some(first) = samples.first() else {
        return Err(invalid_option("tensor batch", 0, "at least one sample"));
    };
    let names: Vec<&str> = first.arrays.iter().map(|a| a.spec.name.as_str()).collect();
    // Per name: its output shape of one sample (from the first sample, checked on all).
    let mut shapes: Vec<Option<Vec<u32>>> = vec![None; names.len()];
    // Per sample, per name: the array.
    let mut table: Vec<Vec<TensorArrayInput<'a>>> = Vec::with_capacity(samples.len());
    for (s, sample) in samples.iter().enumerate() {
        let row = order_arrays(&names, sample).map_err(|e| in_sample(s, e))?;
        let w = &sample.window;
        let extent = row
            .first()
            .map(|a| spatial_extent(a.spec, n))
            .transpose()
            .map_err(|e| in_sample(s, e))?
            .unwrap_or_default();
        let fits = w.origin.len() == n
            && w.size.len() == n
            && w.flip.len() == n
            && w.rot90 < 4
            && (0..n).all(|i| w.origin[i] as u64 + w.size[i] as u64 <= extent[i] as u64)
            && (w.rot90 == 0 || w.size[n - 2] == w.size[n - 1]);
        if !fits {
            return Err(in_sample(
                s,
                invalid_option("tensor window", n as u64, "inside the arrays, as drawn"),
            ));
        }
        for (a, shape) in row.iter().zip(shapes.iter_mut()) {
            let check = || -> Result<Vec<u32>> {
                check_shape(&a.spec.shape)
                    .map_err(|reason| invalid_option("tensor array shape", 0, reason))?;
                if spatial_extent(a.spec, n)? != extent {
                    return Err(invalid_option(
                        "tensor array shape",
                        a.spec.shape.len() as u64,
                        "the record's arrays share their spatial axes",
                    ));
                }
                let out = augment.output_shape(&a.spec.shape, &extent)?;
                if out[out.len() - n..] != w.size[..] {
                    return Err(invalid_option("tensor window", n as u64, "the crop's size"));
                }
                if a.spec.byte_len() > max_output_bytes {
                    return Err(LimitsError::OutputBytes {
                        needed: a.spec.byte_len(),
                        max: max_output_bytes,
                    }
                    .into());
                }
                if a.spec.elements() > u32::MAX as u64 {
                    return Err(LimitsError::GpuBuffer {
                        what: "tensor array elements",
                        needed: a.spec.elements(),
                        max: u32::MAX as u64,
                    }
                    .into());
                }
                element_of(a.spec)?;
                check_payload(a.spec, a.payload)?;
                Ok(out)
            };
            let out = check().map_err(|e| in_sample(s, e))?;
            match shape {
                Some(want) if *want != out => {
                    return Err(in_sample(
                        s,
                        invalid_option(
                            "tensor array shape",
                            out.len() as u64,
                            "one output shape per array name in a batch",
                        ),
                    ))
                }
                _ => *shape = Some(out),
            }
        }
        table.push(row);
    }
    let half = augment.output == TensorType::F16;
    let size = augment.output.size();
    let mut plan = TensorBatchPlan {
        arrays: Vec::with_capacity(names.len()),
        output_bytes: 0,
        jobs: Vec::with_capacity(names.len() * samples.len()),
        samples: Vec::with_capacity(names.len() * samples.len()),
        raw: Vec::new(),
        raw_bytes: 0,
        error_bounded: Vec::new(),
        error_bounded_windows: Vec::new(),
        bounded: Vec::new(),
        lossless: Vec::new(),
        decoded_jobs: [Vec::new(), Vec::new(), Vec::new()],
        counts: TensorGpuCounts::default(),
    };
    for (i, (name, shape)) in names.iter().zip(&shapes).enumerate() {
        let shape = shape.as_ref().expect("every name has a shape");
        let per: u64 = shape.iter().map(|&d| d as u64).product();
        let values = per * samples.len() as u64;
        let offset = plan.output_bytes;
        plan.output_bytes = (offset + values * size).next_multiple_of(OUT_ALIGN);
        if plan.output_bytes > limits.max_buffer || values > u32::MAX as u64 {
            return Err(LimitsError::GpuBuffer {
                what: "tensor batch output",
                needed: plan.output_bytes.max(values),
                max: limits.max_buffer,
            }
            .into());
        }
        plan.arrays.push(GpuTensorArray {
            name: name.to_string(),
            shape: std::iter::once(samples.len())
                .chain(shape.iter().map(|&d| d as usize))
                .collect(),
            offset,
        });
        let norm = augment
            .normalise
            .then(|| stats(name))
            .flatten()
            .map(|(m, s)| TensorNorm::from_stats(m, s));
        for (s, row) in table.iter().enumerate() {
            let a = row[i];
            let len = a.spec.byte_len();
            let source = match a.spec.mode {
                StorageMode::Raw => {
                    let offset = plan.raw_bytes;
                    plan.raw_bytes = (offset + len).next_multiple_of(4);
                    plan.raw.push((offset, a.payload));
                    plan.counts.raw += 1;
                    ArraySource::Raw { offset, len }
                }
                StorageMode::ErrorBounded
                    if crate::field::field_version(a.payload)
                        == Some(crate::field::BOUNDED_VERSION) =>
                {
                    plan.bounded.push(a.payload);
                    plan.decoded_jobs[2].push(plan.jobs.len());
                    plan.counts.compressed_bytes += a.payload.len() as u64;
                    ArraySource::Bounded {
                        k: plan.bounded.len() - 1,
                        len,
                    }
                }
                StorageMode::ErrorBounded => {
                    plan.error_bounded.push(a.payload);
                    let w = &samples[s].window;
                    let planes: u64 = a.spec.shape[..a.spec.shape.len().saturating_sub(2)]
                        .iter()
                        .map(|&d| d as u64)
                        .product();
                    let window = (planes == 1 && n >= 2).then(|| crate::layout::Window {
                        rows: w.origin[n - 2]..w.origin[n - 2] + w.size[n - 2],
                        columns: w.origin[n - 1]..w.origin[n - 1] + w.size[n - 1],
                    });
                    plan.counts.error_bounded_windowed += window.is_some() as usize;
                    plan.error_bounded_windows.push(window);
                    plan.decoded_jobs[0].push(plan.jobs.len());
                    plan.counts.compressed_bytes += a.payload.len() as u64;
                    ArraySource::ErrorBounded {
                        k: plan.error_bounded.len() - 1,
                        len,
                    }
                }
                StorageMode::Lossless => {
                    plan.lossless.push(a.payload);
                    plan.decoded_jobs[1].push(plan.jobs.len());
                    plan.counts.compressed_bytes += a.payload.len() as u64;
                    ArraySource::Lossless {
                        k: plan.lossless.len() - 1,
                        len,
                    }
                }
            };
            plan.counts.array_bytes += len;
            let job = job_of(a.spec, &samples[s].window, n, per, norm, half)?;
            plan.jobs
                .push((job, source, offset / size + s as u64 * per));
            plan.samples.push(s);
        }
    }
    if plan.raw_bytes > limits.max_buffer {
        return Err(LimitsError::GpuBuffer {
            what: "tensor raw upload",
            needed: plan.raw_bytes,
            max: limits.max_buffer,
        }
        .into());
    }
    plan.counts.raw_upload_bytes = plan.raw.iter().map(|(_, p)| p.len() as u64).sum();
    plan.counts.error_bounded = plan.error_bounded.len();
    plan.counts.lossless = plan.lossless.len();
    plan.counts.bounded = plan.bounded.len();
    plan.counts.output_bytes = plan.output_bytes;
    Ok(plan)
}

/// The sample's arrays in the order of `names` (the first sample's): the same names, each
/// once.
fn order_arrays<'a>(
    names: &[&str],
    sample: &TensorSampleInput<'a>,
) -> Result<Vec<TensorArrayInput<'a>>> {
    let same = sample.arrays.len() == names.len();
    let row: Option<Vec<TensorArrayInput<'a>>> = names
        .iter()
        .map(|&name| {
            let mut found = sample.arrays.iter().filter(|a| a.spec.name == name);
            match (found.next(), found.next()) {
                (Some(a), None) => Some(*a),
                _ => None,
            }
        })
        .collect();
    match row {
        Some(row) if same => Ok(row),
        _ => Err(invalid_option(
            "tensor record arrays",
            sample.arrays.len() as u64,
            "every sample of a batch holds the same array names, each once",
        )),
    }
}

/// The last `n` axes of the array.
fn spatial_extent(spec: &ArraySpec, n: usize) -> Result<Vec<u32>> {
    if spec.shape.len() < n {
        return Err(invalid_option(
            "tensor array shape",
            spec.shape.len() as u64,
            "the record's spatial axes last",
        ));
    }
    Ok(spec.shape[spec.shape.len() - n..].to_vec())
}

/// The kernel's job of one array under `window` (the shape, window and output checked by
/// the caller): spatial axes padded to 3 with a leading axis of 1.
fn job_of(
    spec: &ArraySpec,
    window: &TensorWindow,
    n: usize,
    per: u64,
    norm: Option<TensorNorm>,
    half: bool,
) -> Result<TensorWindowJob> {
    let pad = 3 - n;
    let mut extent = [1u32; 3];
    let mut origin = [0u32; 3];
    let mut size = [1u32; 3];
    let mut flips = 0u32;
    let lead_axes = spec.shape.len() - n;
    extent[pad..].copy_from_slice(&spec.shape[lead_axes..]);
    origin[pad..].copy_from_slice(&window.origin);
    size[pad..].copy_from_slice(&window.size);
    for (i, &f) in window.flip.iter().enumerate() {
        flips |= (f as u32) << (pad + i);
    }
    let lead = spec.shape[..lead_axes].iter().product::<u32>();
    let normalise = norm.is_some();
    let norm = norm.unwrap_or(TensorNorm {
        mean: 0.0,
        scale: 1.0,
    });
    Ok(TensorWindowJob {
        element: element_of(spec)?,
        lead,
        extent0: extent[0],
        extent1: extent[1],
        extent2: extent[2],
        origin0: origin[0],
        origin1: origin[1],
        origin2: origin[2],
        size0: size[0],
        size1: size[1],
        size2: size[2],
        flips,
        rot90: window.rot90 as u32,
        normalise: normalise as u32,
        mean: norm.mean,
        scale: norm.scale,
        half: half as u32,
        count: per as u32,
        ..Default::default()
    })
}

/// Cuts the windows of a batch of tensor records on `decoder`'s device (see the module
/// docs): one `[N, ...]` tensor per array name of `augment.output` values, bit for bit what
/// [`TensorAugment::apply`] gives (then `f32_to_f16_bits` for f16). `stats` gives a name's
/// manifest `(mean, std)` where `augment.normalise`. Errors name the sample
/// ([`Error::InBatch`]).
pub fn window_batch(
    decoder: &GpuDecoder,
    augment: &TensorAugment,
    samples: &[TensorSampleInput<'_>],
    stats: &dyn Fn(&str) -> Option<(f64, f64)>,
) -> Result<GpuTensorBatch> {
    let limits = BindLimits::of(decoder.device());
    let max_output = decoder.options().limits.max_output_bytes;
    let plan = plan_tensor_batch(augment, samples, stats, &limits, max_output)?;
    let device = decoder.device();
    let named = |kind: usize, e: Error| match e {
        Error::InBatch { image, error } => {
            let job = plan.decoded_jobs[kind].get(image).copied().unwrap_or(0);
            in_sample(plan.samples.get(job).copied().unwrap_or(0), *error)
        }
        e => e,
    };
    let empty = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        })
    };
    let raw = if plan.raw.is_empty() {
        empty("l3 tensor raw upload (none)")
    } else {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 tensor raw upload"),
            size: plan.raw_bytes,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: true,
        });
        {
            let mut view = buffer
                .get_mapped_range_mut(..)
                .map_err(|e| Error::Gpu(format!("map failed: {e}")))?;
            for &(offset, bytes) in &plan.raw {
                view.slice(offset as usize..offset as usize + bytes.len())
                    .copy_from_slice(bytes);
            }
        }
        buffer.unmap();
        buffer
    };
    let (fields, field_offsets) = if plan.error_bounded.is_empty() {
        (empty("l3 tensor fields (none)"), Vec::new())
    } else {
        let b = crate::field::gpu::decode_fields_windows(
            decoder,
            &plan.error_bounded,
            &plan.error_bounded_windows,
        )
        .map_err(|e| named(0, e))?;
        (b.buffer, b.offsets)
    };
    let (lossless, lossless_offsets) = if plan.lossless.is_empty() {
        (empty("l3 tensor lossless (none)"), Vec::new())
    } else {
        let b = crate::field::gpu::decode_lossless_fields(decoder, &plan.lossless)
            .map_err(|e| named(1, e))?;
        (b.buffer, b.offsets)
    };
    // Version 3 arrays decode into their own buffer; the window kernel reads them from the
    // error-bounded binding, after version 1's (one device-side copy when both are present).
    let (fields, bounded_offsets) = if plan.bounded.is_empty() {
        (fields, Vec::new())
    } else {
        let b = crate::field::gpu::decode_bounded_fields(decoder, &plan.bounded, decoder.options())
            .map_err(|e| named(2, e))?;
        if plan.error_bounded.is_empty() {
            (b.buffer, b.offsets)
        } else {
            let base = fields.size().next_multiple_of(OUT_ALIGN);
            let both = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("l3 tensor error-bounded arrays"),
                size: base + b.buffer.size(),
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("l3 tensor error-bounded arrays"),
            });
            enc.copy_buffer_to_buffer(&fields, 0, &both, 0, fields.size());
            enc.copy_buffer_to_buffer(&b.buffer, 0, &both, base, b.buffer.size());
            decoder.submit_commands(enc.finish());
            (both, b.offsets.iter().map(|o| base + o).collect())
        }
    };
    let tasks = plan.tasks(&field_offsets, &lossless_offsets, &bounded_offsets);
    let (buffer, dispatches) = tensor_window::dispatch(
        decoder,
        [&raw, &fields, &lossless],
        &tasks,
        plan.output_bytes,
        &limits,
    )?;
    Ok(GpuTensorBatch {
        buffer,
        arrays: plan.arrays,
        element: augment.output,
        counts: TensorGpuCounts {
            window_dispatches: dispatches,
            ..plan.counts
        },
        device: device.clone(),
        queue: decoder.queue().clone(),
    })
}

#[cfg(test)]
#[path = "tensor_gpu_tests.rs"]
mod tests;
