//! Error-bounded float32 fields on the GPU ([`decode_fields`]): the fields' bin images decode
//! as one batch (16-bit gray L3 files), then `shaders/fields.wgsl` turns them all into f32
//! values in one dispatch, bit for bit what [`super::decode_field`] gives on the CPU. This
//! file parses the files, plans the buffers ([`plan_fields`]) and builds the kernel's jobs;
//! the engine's `gpu::fields` binds and dispatches them. Lossless float arrays (version 2)
//! decode with [`decode_lossless_fields`]: `field::lossless::gpu` checks and plans them (in
//! sub-batches where the batch outgrows a binding), `gpu::lossless` dispatches
//! `shaders/lossless.wgsl` once per sub-batch into one output buffer. Error-bounded arrays of
//! 1 to 4 axes (version 3) decode with [`decode_bounded_fields`]: `field::bounded::gpu`
//! checks and plans them (split the same way), `gpu::bounded` dispatches
//! `shaders/bounded.wgsl`. They encode on the GPU too (differences predictor, byte for byte
//! the CPU encoder) with [`encode_bounded_gpu`] and [`encode_bounded_buffer`]
//! (`field::bounded::gpu_encode` over `gpu::GpuEncoder`).

use super::bounded::gpu::{plan_bounded_batches, SplitLimits};
use super::lossless::gpu::{plan_lossless_batches, LosslessPlan};
use super::{
    parse_field, BoundedHeader, FieldHeader, FieldLayout, FloatArrayHeader, FloatType, FloatVec,
    LosslessHeader,
};
use crate::decode::DecodeOptions;
use crate::error::{Error, FormatError, Result};
use crate::gpu::abi::{FieldJob, FIELD_RUN_WORDS, OUT_ALIGN};
use crate::gpu::bindings::{BindLimits, Binding};
use crate::gpu::bounded::BoundedTables;
use crate::gpu::fields::{self, FieldDispatch};
use crate::gpu::lossless::{self, LosslessTables};
use crate::gpu::readback::read_buffer;
use crate::gpu::{GpuDecoder, ImageLayout};
use crate::layout::OutputLayout;

/// Decoded version-1 fields in one GPU buffer of f32 values (their bin images decode as an
/// image batch first, so the chunked formats' counts do not apply).
#[derive(Debug)]
pub struct GpuFieldBatch {
    /// The values (usage `STORAGE | COPY_SRC`): field `i` at `offsets[i]` bytes, C order.
    pub buffer: wgpu::Buffer,
    /// Byte offset of each field (multiples of 256).
    pub offsets: Vec<u64>,
    /// Each field's header.
    pub headers: Vec<FieldHeader>,
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl GpuFieldBatch {
    /// Field `i`'s values, read back (blocking): what [`super::decode_field`] gives.
    pub fn read_back_field(&self, i: usize) -> Result<Vec<f32>> {
        let n = self.headers[i].len();
        let bytes = read_buffer(
            &self.device,
            &self.queue,
            &self.buffer,
            self.offsets[i],
            n * 4,
        )?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}

/// Decodes field files (see [`crate::field`]) on `decoder` into one buffer of f32 values.
/// Every file is parsed and checked on the CPU first (an error names the field:
/// [`Error::InBatch`]).
pub fn decode_fields(decoder: &GpuDecoder, files: &[&[u8]]) -> Result<GpuFieldBatch> {
    decode_fields_windows(decoder, files, &[])
}

/// Like [`decode_fields`], but field `i`'s bin image is decoded only where `windows[i]` (if
/// given: pixel rows and columns of the bin image, the planes stacked) needs it: only the
/// patches holding the window are uploaded and decoded ([`GpuDecoder::decode_batch_windows`]);
/// its values elsewhere are unspecified. `windows` may be shorter than `files`.
pub fn decode_fields_windows(
    decoder: &GpuDecoder,
    files: &[&[u8]],
    windows: &[Option<crate::layout::Window>],
) -> Result<GpuFieldBatch> {
    let layouts = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            parse_field(f).map_err(|e| Error::InBatch {
                image: i,
                error: Box::new(e),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let plan = plan_fields(&layouts, &BindLimits::of(decoder.device()))?;
    let images: Vec<&[u8]> = layouts.iter().map(|l| l.image).collect();
    let bins = decoder.decode_batch_windows(&images, OutputLayout::Interleaved, windows)?;
    let dispatches: Vec<FieldDispatch> = plan.dispatches(&layouts).collect();
    let buffer = fields::dispatch(
        decoder,
        &bins,
        &dispatches,
        &plan.run_words,
        plan.total,
        &plan.limits,
    )?;
    Ok(GpuFieldBatch {
        buffer,
        offsets: plan.offsets,
        headers: layouts.iter().map(|l| l.header).collect(),
        device: decoder.device().clone(),
        queue: decoder.queue().clone(),
    })
}

/// Where a batch of fields goes: each field's values in the output, its runs in the runs
/// buffer (a pure function of the fields and the device's limits, checked by
/// [`FieldPlan::bindings`] before anything is bound).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub struct FieldPlan {
    /// Byte offset of each field's values (multiples of [`OUT_ALIGN`]).
    pub offsets: Vec<u64>,
    /// Bytes of the values buffer.
    pub total: u64,
    /// The runs buffer: each field's `[start, len, bits]` words.
    pub run_words: Vec<u32>,
    /// Byte offset of each field's runs (multiples of the storage alignment).
    pub run_base: Vec<u64>,
    /// The limits it was planned for.
    pub limits: BindLimits,
}

/// Plans a batch of parsed fields (see [`FieldPlan`]); public for the fuzz target
/// `gpu_plan`, not a stable API.
#[doc(hidden)]
pub fn plan_fields(layouts: &[FieldLayout<'_>], limits: &BindLimits) -> Result<FieldPlan> {
    let align = (limits.storage_align / 4).max(1) as usize;
    let mut offsets = Vec::with_capacity(layouts.len());
    let mut total = 0u64;
    let mut run_words: Vec<u32> = Vec::new();
    let mut run_base = Vec::with_capacity(layouts.len());
    for l in layouts {
        let values = l.header.len().saturating_mul(4);
        if values > limits.max_binding {
            return Err(crate::error::LimitsError::GpuBuffer {
                what: "field values binding",
                needed: values,
                max: limits.max_binding,
            }
            .into());
        }
        offsets.push(total);
        total = (total + values).next_multiple_of(OUT_ALIGN);
        if total > limits.max_buffer {
            return Err(crate::error::LimitsError::GpuBuffer {
                what: "field values buffer",
                needed: total,
                max: limits.max_buffer,
            }
            .into());
        }
        run_base.push(run_words.len() as u64 * 4);
        for r in &l.runs {
            let words: [u32; FIELD_RUN_WORDS as usize] = [r.start, r.len, r.bits];
            run_words.extend(words);
        }
        // A field without runs still binds one word, which must lie inside the buffer even
        // when the field is the last one (it used to start at the buffer's end).
        if l.runs.is_empty() {
            run_words.push(0);
        }
        // Each field's runs start on a storage-offset boundary.
        run_words.resize(run_words.len().next_multiple_of(align), 0);
    }
    Ok(FieldPlan {
        offsets,
        total,
        run_words,
        run_base,
        limits: *limits,
    })
}

impl FieldPlan {
    /// Each field's dispatch: its job (count, runs, offset and bin width from its header)
    /// and where its runs and values lie.
    fn dispatches<'a>(
        &'a self,
        layouts: &'a [FieldLayout<'_>],
    ) -> impl Iterator<Item = FieldDispatch> + 'a {
        layouts.iter().enumerate().map(|(k, l)| FieldDispatch {
            job: FieldJob {
                count: l.header.len() as u32,
                run_count: l.runs.len() as u32,
                offset_bits: l.header.offset.to_bits(),
                bin_bits: l.header.bin_width.to_bits(),
                ..Default::default()
            },
            count: l.header.len(),
            run_count: l.runs.len() as u64,
            run_offset: self.run_base[k],
            offset: self.offsets[k],
        })
    }

    /// Every storage range the fields stage binds, for `check_bindings`: each field's bin
    /// image in the decoded batch (`images`, in a buffer of `batch_len` bytes), its runs and
    /// its values.
    pub fn bindings<'a>(
        &'a self,
        layouts: &'a [FieldLayout<'_>],
        images: &'a [ImageLayout],
        batch_len: u64,
    ) -> impl Iterator<Item = Binding> + 'a {
        fields::bindings(
            self.dispatches(layouts),
            images,
            batch_len,
            self.run_words.len() as u64 * 4,
            self.total,
        )
    }
}

/// Decoded float arrays of the chunked formats in one GPU buffer: lossless arrays
/// ([`GpuLosslessBatch`]) or error-bounded ones ([`GpuBoundedBatch`]).
#[derive(Debug)]
pub struct GpuArrayBatch<H> {
    /// The values (usage `STORAGE | COPY_SRC`): array `i` at `offsets[i]` bytes, C order;
    /// float32 as 4 bytes, float16 and bfloat16 as 2 (little-endian).
    pub buffer: wgpu::Buffer,
    /// Byte offset of each array (multiples of 256).
    pub offsets: Vec<u64>,
    /// Each array's header.
    pub headers: Vec<H>,
    /// Submissions the decode took: 1, more where the batch was split to fit the device's
    /// bindings (0 for an empty batch).
    pub submissions: usize,
    /// Compute dispatches the decode took (token rounds, prefix-sum stages, lattice passes,
    /// finish; all sub-batches).
    pub dispatches: u32,
    /// Bytes written to the GPU for the batch: the files, the segment, decode, run, array
    /// and pass tables, and the step uniforms.
    pub uploaded_bytes: u64,
    /// GPU nanoseconds of the decode's compute passes (timestamps at each submission's pass
    /// beginning and end, summed) where the decoder's timing is on
    /// ([`GpuDecoder::set_timing`]) on a device with `TIMESTAMP_QUERY`; `None` otherwise and
    /// for an empty batch. Uploads, the flags' read-back and gaps between submissions are
    /// outside it.
    pub kernel_ns: Option<u64>,
    /// Bytes of each array's values.
    lens: Vec<u64>,
    device: wgpu::Device,
    queue: wgpu::Queue,
}

/// Decoded lossless float arrays (`.l3f` version 2) in one GPU buffer.
pub type GpuLosslessBatch = GpuArrayBatch<LosslessHeader>;

/// Decoded error-bounded arrays (`.l3f` version 3) in one GPU buffer of f32 values.
pub type GpuBoundedBatch = GpuArrayBatch<BoundedHeader>;

impl<H> GpuArrayBatch<H> {
    /// Array `i`'s bytes, read back (blocking): the CPU decoder's values as bytes on a
    /// little-endian machine.
    pub fn read_back_bytes(&self, i: usize) -> Result<Vec<u8>> {
        let len = self.lens[i];
        let mut v = read_buffer(
            &self.device,
            &self.queue,
            &self.buffer,
            self.offsets[i],
            len.next_multiple_of(4),
        )?;
        v.truncate(len as usize);
        Ok(v)
    }
}

impl GpuLosslessBatch {
    /// Array `i`'s bytes, read back (blocking): what [`super::decode_lossless`] gives as
    /// bytes on a little-endian machine.
    pub fn read_back_array(&self, i: usize) -> Result<Vec<u8>> {
        self.read_back_bytes(i)
    }
}

impl GpuBoundedBatch {
    /// Array `i`'s values, read back (blocking): what [`super::decode_bounded`] gives.
    pub fn read_back_array(&self, i: usize) -> Result<Vec<f32>> {
        Ok(bytemuck::pod_collect_to_vec(&self.read_back_bytes(i)?))
    }
}

/// The output buffer of a batch of `total` bytes.
fn output_buffer(decoder: &GpuDecoder, label: &'static str, total: u64) -> wgpu::Buffer {
    decoder.count_buffers(1);
    decoder.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: total.max(4),
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// The error of the first file a sub-batch's kernel flagged (`first`: the sub-batch's first
/// file in the batch), if any.
fn flagged(first: usize, flags: &[u32]) -> Result<()> {
    match flags.iter().enumerate().find(|(_, &f)| f != 0) {
        Some((k, &flags)) => {
            let image = first + k;
            Err(Error::InBatch {
                image,
                error: Box::new(FormatError::GpuReported { image, flags }.into()),
            })
        }
        None => Ok(()),
    }
}

/// Decodes lossless float arrays on the GPU: every file is checked on the CPU first (the
/// CPU decoder's checks; the first bad file's error comes back as [`Error::InBatch`]), then
/// `shaders/lossless.wgsl` decodes them into one buffer: in one submission, or in one per
/// sub-batch where the batch's tables outgrow a storage binding of the device (consecutive
/// files, as many to a sub-batch as fit). An array whose own tables do not fit a binding,
/// or an output larger than a buffer, is a [`crate::error::LimitsError::GpuBuffer`]. A stream
/// error is reported for the first file with one as
/// [`crate::error::FormatError::GpuReported`].
pub fn decode_lossless_fields(decoder: &GpuDecoder, files: &[&[u8]]) -> Result<GpuLosslessBatch> {
    let limits = BindLimits::of(decoder.device());
    let batches = plan_lossless_batches(files, &DecodeOptions::default(), |p| {
        lossless::fits(&tables(p), &limits)
    })?;
    // Each sub-batch's output from a multiple of 256 bytes (its arrays' offsets are).
    let mut base = Vec::with_capacity(batches.len());
    let mut total = 0u64;
    for (_, plan) in &batches {
        base.push(total);
        total = (total + plan.output_words as u64 * 4).next_multiple_of(OUT_ALIGN);
    }
    let total = total.max(4);
    if total > limits.max_buffer {
        return Err(crate::error::LimitsError::GpuBuffer {
            what: "lossless output buffer",
            needed: total,
            max: limits.max_buffer,
        }
        .into());
    }
    let buffer = output_buffer(decoder, "l3 lossless output", total);
    let mut offsets = Vec::with_capacity(files.len());
    let mut headers = Vec::with_capacity(files.len());
    let (mut dispatches, mut uploaded, mut kernel_ns) = (0, 0, Some(0));
    for ((first, plan), &at) in batches.into_iter().zip(&base) {
        let ran = lossless::dispatch(decoder, &tables(&plan), &buffer, at, &limits)?;
        dispatches += ran.dispatches;
        uploaded += ran.uploaded;
        kernel_ns = kernel_ns.zip(ran.kernel_ns).map(|(a, b)| a + b);
        flagged(first, &ran.flags)?;
        offsets.extend(plan.arrays.iter().map(|a| at + a.out_word as u64 * 4));
        headers.extend(plan.headers);
    }
    Ok(GpuArrayBatch {
        buffer,
        offsets,
        lens: headers.iter().map(LosslessHeader::output_bytes).collect(),
        headers,
        submissions: base.len(),
        dispatches,
        uploaded_bytes: uploaded,
        kernel_ns: kernel_ns.filter(|_| decoder.timing && !files.is_empty()),
        device: decoder.device().clone(),
        queue: decoder.queue().clone(),
    })
}

/// The kernel's view of a plan's tables.
fn tables(plan: &LosslessPlan) -> LosslessTables<'_> {
    LosslessTables {
        streams: plan.streams(),
        arrays: &plan.arrays,
        runs: &plan.own.runs,
        output_words: plan.output_words,
    }
}

/// Decodes error-bounded arrays of 1 to 4 axes on the GPU, bit for bit what
/// [`super::decode_bounded`] gives: every file is checked on the CPU first with `options`
/// (the CPU decoder's checks; the first bad file's error comes back as [`Error::InBatch`]),
/// then `shaders/bounded.wgsl` decodes them in one submission, or in one per sub-batch where
/// the batch outgrows a storage binding (into one buffer); a stream or value error is
/// reported for the first file with one as [`FormatError::GpuReported`].
pub fn decode_bounded_fields(
    decoder: &GpuDecoder,
    files: &[&[u8]],
    options: &DecodeOptions,
) -> Result<GpuBoundedBatch> {
    let limits = BindLimits::of(decoder.device());
    let split = SplitLimits {
        max_binding: limits.max_binding,
        max_buffer: limits.max_buffer,
    };
    let plans = plan_bounded_batches(files, options, split)?;
    let total: u64 = plans.iter().map(|p| p.output_words as u64 * 4).sum();
    let buffer = output_buffer(decoder, "l3 error-bounded output", total);
    let (mut dispatches, mut uploaded, mut offsets, mut headers) = (0, 0, Vec::new(), Vec::new());
    let mut kernel_ns = Some(0);
    let submissions = if files.is_empty() { 0 } else { plans.len() };
    for plan in plans.into_iter().filter(|p| !p.arrays.is_empty()) {
        let tables = BoundedTables {
            streams: plan.streams(),
            arrays: &plan.arrays,
            passes: &plan.own.passes,
            max_passes: plan.own.max_passes,
            output: (
                &buffer,
                plan.own.output_base * 4,
                (plan.output_words as u64 * 4).max(4),
            ),
        };
        let ran = crate::gpu::bounded::dispatch(decoder, &tables, &limits)?;
        flagged(plan.own.first_file, &ran.flags)?;
        dispatches += ran.dispatches;
        uploaded += ran.uploaded;
        kernel_ns = kernel_ns.zip(ran.kernel_ns).map(|(a, b)| a + b);
        offsets.extend(
            plan.arrays
                .iter()
                .map(|a| (plan.own.output_base + a.out_word as u64) * 4),
        );
        headers.extend(plan.headers);
    }
    Ok(GpuArrayBatch {
        buffer,
        offsets,
        lens: headers.iter().map(BoundedHeader::output_bytes).collect(),
        headers,
        dispatches,
        submissions,
        uploaded_bytes: uploaded,
        kernel_ns: kernel_ns.filter(|_| decoder.timing && submissions > 0),
        device: decoder.device().clone(),
        queue: decoder.queue().clone(),
    })
}

/// Encodes a float32 array (C order, `shape` of 1 to 4 axes) on the GPU, byte for byte what
/// [`super::encode_bounded`] gives with the same options. Supported: `predictor:
/// Some(Predictor::Differences)`, any `axes` (or the estimate's set), at most 2^15 values a segment
/// (`2^chunk_log2 / segments`, for the defaults 8192), a bin width from 2^-100 to 2^100; other
/// options are an [`Error::Parameter`] (never a CPU fallback), buffers past the device's
/// limits an [`Error::Limits`]. The values are uploaded, quantised, differenced, tokenized and
/// bit-packed on the GPU (`shaders/encode_*.wgsl`); the host picks each chunk's code from the
/// GPU's histograms and assembles the file.
pub fn encode_bounded_gpu(
    encoder: &crate::gpu::GpuEncoder,
    values: &[f32],
    shape: &[u32],
    options: &super::BoundedOptions,
) -> Result<Vec<u8>> {
    super::bounded::gpu_encode::encode_host(encoder, values, shape, options)
}

/// [`encode_bounded_gpu`] of values already on the encoder's device: `shape`'s product of
/// f32 at byte `offset` of `buffer` (usage `STORAGE`, and `COPY_SRC`: the values of exception
/// cells are read back when there are any; `offset` on the device's storage alignment).
pub fn encode_bounded_buffer(
    encoder: &crate::gpu::GpuEncoder,
    buffer: &wgpu::Buffer,
    offset: u64,
    shape: &[u32],
    options: &super::BoundedOptions,
) -> Result<Vec<u8>> {
    super::bounded::gpu_encode::encode_device(encoder, buffer, offset, shape, options)
}

/// Decoded float arrays of any version ([`decode_float_arrays`]): each version's batch in its
/// own buffer, array `i` where [`GpuFloatArrays::place`] says.
#[derive(Debug)]
pub struct GpuFloatArrays {
    /// Each array's header, in the order of the files.
    pub headers: Vec<FloatArrayHeader>,
    /// The version-1 fields, if any.
    pub fields: Option<GpuFieldBatch>,
    /// The lossless arrays (version 2), if any.
    pub lossless: Option<GpuLosslessBatch>,
    /// The error-bounded arrays of 1 to 4 axes (version 3), if any.
    pub bounded: Option<GpuBoundedBatch>,
    /// File `i`'s index within its version's batch.
    within: Vec<usize>,
}

impl GpuFloatArrays {
    /// Array `i`'s buffer, byte offset and byte length (values as the CPU decoder gives
    /// them, little-endian).
    pub fn place(&self, i: usize) -> (&wgpu::Buffer, u64, u64) {
        let (k, h) = (self.within[i], &self.headers[i]);
        let bytes = h.len() * h.dtype().size() as u64;
        match h {
            FloatArrayHeader::Field(_) => {
                let b = self.fields.as_ref().expect("a version-1 batch");
                (&b.buffer, b.offsets[k], bytes)
            }
            FloatArrayHeader::Lossless(_) => {
                let b = self.lossless.as_ref().expect("a lossless batch");
                (&b.buffer, b.offsets[k], bytes)
            }
            FloatArrayHeader::Bounded(_) => {
                let b = self.bounded.as_ref().expect("an error-bounded batch");
                (&b.buffer, b.offsets[k], bytes)
            }
        }
    }

    /// Array `i`'s values, read back (blocking): what [`super::decode_float_array`] gives.
    pub fn read_back(&self, i: usize) -> Result<FloatVec> {
        let k = self.within[i];
        Ok(match &self.headers[i] {
            FloatArrayHeader::Field(_) => FloatVec::F32(
                self.fields
                    .as_ref()
                    .expect("a version-1 batch")
                    .read_back_field(k)?,
            ),
            FloatArrayHeader::Lossless(h) => {
                let bytes = self
                    .lossless
                    .as_ref()
                    .expect("a lossless batch")
                    .read_back_bytes(k)?;
                match h.dtype {
                    FloatType::F32 => FloatVec::F32(bytemuck::pod_collect_to_vec(&bytes)),
                    FloatType::F16 => FloatVec::F16(bytemuck::pod_collect_to_vec(&bytes)),
                    FloatType::BF16 => FloatVec::BF16(bytemuck::pod_collect_to_vec(&bytes)),
                }
            }
            FloatArrayHeader::Bounded(_) => FloatVec::F32(
                self.bounded
                    .as_ref()
                    .expect("an error-bounded batch")
                    .read_back_array(k)?,
            ),
        })
    }

    /// Submissions the decode took, all versions together.
    pub fn submissions(&self) -> usize {
        // A version-1 batch is the bin images' decode, then the fields' dispatch.
        self.fields.as_ref().map_or(0, |_| 2)
            + self.lossless.as_ref().map_or(0, |b| b.submissions)
            + self.bounded.as_ref().map_or(0, |b| b.submissions)
    }
}

/// Decodes float array files of any version on the GPU, bit for bit what
/// [`super::decode_float_array`] gives: the files are grouped by version, each group decodes
/// as [`decode_fields`], [`decode_lossless_fields`] or [`decode_bounded_fields`] (with
/// `options`) does, and an error names the file by its index in `files`
/// ([`Error::InBatch`]). A file that is not a float array is version 1's parse error.
pub fn decode_float_arrays(
    decoder: &GpuDecoder,
    files: &[&[u8]],
    options: &DecodeOptions,
) -> Result<GpuFloatArrays> {
    let mut groups: [Vec<usize>; 3] = Default::default();
    let mut within = Vec::with_capacity(files.len());
    for (i, f) in files.iter().enumerate() {
        let g = match super::field_version(f) {
            Some(super::LOSSLESS_VERSION) => 1,
            Some(super::BOUNDED_VERSION) => 2,
            _ => 0,
        };
        within.push(groups[g].len());
        groups[g].push(i);
    }
    // An error inside a group names the file by its index in `files`.
    let renumber = |g: &[usize], e: Error| match e {
        Error::InBatch { image, error } => Error::InBatch {
            image: g[image],
            error,
        },
        e => e,
    };
    let of = |g: &[usize]| g.iter().map(|&i| files[i]).collect::<Vec<_>>();
    let fields = (!groups[0].is_empty())
        .then(|| decode_fields(decoder, &of(&groups[0])).map_err(|e| renumber(&groups[0], e)))
        .transpose()?;
    let lossless = (!groups[1].is_empty())
        .then(|| {
            decode_lossless_fields(decoder, &of(&groups[1])).map_err(|e| renumber(&groups[1], e))
        })
        .transpose()?;
    let bounded = (!groups[2].is_empty())
        .then(|| {
            decode_bounded_fields(decoder, &of(&groups[2]), options)
                .map_err(|e| renumber(&groups[2], e))
        })
        .transpose()?;
    let mut headers = Vec::with_capacity(files.len());
    for (i, &k) in within.iter().enumerate() {
        headers.push(match super::field_version(files[i]) {
            Some(super::LOSSLESS_VERSION) => FloatArrayHeader::Lossless(
                lossless.as_ref().expect("decoded above").headers[k].clone(),
            ),
            Some(super::BOUNDED_VERSION) => FloatArrayHeader::Bounded(
                bounded.as_ref().expect("decoded above").headers[k].clone(),
            ),
            _ => FloatArrayHeader::Field(fields.as_ref().expect("decoded above").headers[k]),
        });
    }
    Ok(GpuFloatArrays {
        headers,
        fields,
        lossless,
        bounded,
        within,
    })
}
