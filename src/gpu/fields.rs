//! The fields kernel: `shaders/fields.wgsl` over 16-bit bin images already decoded in a
//! [`GpuBatch`], one dispatch for the batch with a [`FieldJob`] per field in one job table
//! (`gpu::jobs`), each value `offset + q * bin_width` or its exact run value. The caller
//! parses the fields and plans the jobs; this file checks every range, then binds and
//! dispatches what it is given.

use super::abi::{FieldJob, FIELDS_WORKGROUP_SIZE, FIELD_RUN_WORDS, OUT_ALIGN};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::{Family, Kernel};
use super::jobs::{job_workgroups, plan_windows, JobSpan, JobTable};
use super::readback::{GpuBatch, ImageLayout};
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::Result;

/// One field's job of `fields.wgsl`: its job and where its runs and values lie.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldDispatch {
    /// Its entry of the job table (offsets and workgroups filled in by [`dispatch`]).
    pub job: FieldJob,
    /// Values of the field (f32 each).
    pub count: u64,
    /// Exception runs of the field ([`FIELD_RUN_WORDS`] words each).
    pub run_count: u64,
    /// Byte offset of its runs in the runs buffer.
    pub run_offset: u64,
    /// Byte offset of its values in the values buffer.
    pub offset: u64,
}

impl FieldDispatch {
    /// Bytes of its runs binding (one word when it has none: bindings are never empty).
    fn run_binding_len(&self) -> u64 {
        (self.run_count * FIELD_RUN_WORDS as u64 * 4).max(4)
    }
}

/// Every storage range the fields stage binds, for [`check_bindings`]: field `k`'s bin image
/// (`images[k]`, in a decoded batch of `batch_len` bytes), its runs (in a buffer of
/// `runs_len` bytes) and its values (in a buffer of `total` bytes, at least [`OUT_ALIGN`]).
pub(crate) fn bindings<'a>(
    fields: impl IntoIterator<Item = FieldDispatch> + 'a,
    images: &'a [ImageLayout],
    batch_len: u64,
    runs_len: u64,
    total: u64,
) -> impl Iterator<Item = Binding> + 'a {
    fields.into_iter().enumerate().flat_map(move |(k, f)| {
        let image = images.get(k).copied();
        [
            Binding {
                what: "field bin image",
                buffer_len: if image.is_some() { batch_len } else { 0 },
                offset: image.map_or(0, |i| i.offset),
                size: image.map_or(0, |i| i.len.next_multiple_of(4)),
                copy: false,
            },
            Binding {
                what: "field runs",
                buffer_len: runs_len,
                offset: f.run_offset,
                size: f.run_binding_len(),
                copy: false,
            },
            Binding {
                what: "field values",
                buffer_len: total.max(OUT_ALIGN),
                offset: f.offset,
                size: (f.count * 4).max(4),
                copy: false,
            },
        ]
    })
}

/// What the windows of a batch bind, for the binding check and the errors.
const WHAT: [&str; 3] = ["field bin image", "field runs", "field values"];

/// Dispatches `fields.wgsl` over the fields of `fields` and the bin images of `bins` (field
/// `k`'s image is `bins.images[k]`), with the runs buffer `run_words`, into a new values
/// buffer of `total` bytes (usage `STORAGE | COPY_SRC`), which it returns: one dispatch for
/// the batch, more only where a binding limit forces it (`gpu::jobs`). Every range is
/// checked against its buffer and `limits` first; GPU errors in the submission are
/// [`crate::Error::Gpu`].
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    bins: &GpuBatch,
    fields: &[FieldDispatch],
    run_words: &[u32],
    total: u64,
    limits: &BindLimits,
) -> Result<wgpu::Buffer> {
    let runs_len = run_words.len() as u64 * 4;
    check_bindings(
        bindings(
            fields.iter().copied(),
            &bins.images,
            bins.buffer.size(),
            runs_len,
            total,
        ),
        limits,
    )?;
    let spans: Vec<JobSpan<3>> = fields
        .iter()
        .zip(&bins.images)
        .map(|(f, image)| JobSpan {
            ranges: [
                (image.offset, image.len.next_multiple_of(4)),
                (f.run_offset, f.run_binding_len()),
                (f.offset, f.count * 4),
            ],
            workgroups: job_workgroups(f.count, FIELDS_WORKGROUP_SIZE),
        })
        .collect();
    let table = plan_windows(&spans, size_of::<FieldJob>() as u64, WHAT, limits)?;
    let out_len = total.max(OUT_ALIGN);
    check_bindings(
        table.bindings(WHAT, [bins.buffer.size(), runs_len, out_len]),
        limits,
    )?;
    let jobs: Vec<FieldJob> = fields
        .iter()
        .zip(&spans)
        .enumerate()
        .map(|(k, (f, span))| FieldJob {
            bins_offset: table.words[k][0],
            runs_offset: table.words[k][1],
            values_offset: table.words[k][2],
            wg_base: table.wg_base[k],
            wg_count: span.workgroups,
            ..f.job
        })
        .collect();
    let kernel = decoder.pipelines.kernel(Kernel::Fields)?;
    decoder.with_error_scopes(|| {
        Ok(submit(
            decoder, kernel, bins, &table, &jobs, run_words, out_len,
        ))
    })
}

/// Uploads the runs and the job table and dispatches `fields.wgsl` once per window; the
/// caller has checked every buffer and binding against the device's limits.
fn submit(
    decoder: &GpuDecoder,
    kernel: &Family,
    bins: &GpuBatch,
    table: &JobTable<3>,
    jobs: &[FieldJob],
    run_words: &[u32],
    out_len: u64,
) -> wgpu::Buffer {
    decoder.count_buffers(2);
    let out = storage_buffer(&decoder.device, "l3 field values", out_len);
    let runs = storage_buffer(&decoder.device, "l3 field runs", run_words.len() as u64 * 4);
    decoder.upload(&runs, 0, bytemuck::cast_slice(run_words));
    let mut encoder = decoder
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("l3 fields"),
        });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("l3 fields"),
            timestamp_writes: None,
        });
        table.encode(
            decoder,
            &mut pass,
            (kernel.entry("reconstruct_field"), &kernel.bgl),
            &table.table_bytes(jobs),
            [&bins.buffer, &runs, &out],
        );
    }
    decoder.submit_commands(encoder.finish());
    out
}
