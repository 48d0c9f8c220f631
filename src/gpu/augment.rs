//! The augment kernel: `shaders/augment.wgsl` dispatched once over a decoded batch, an
//! [`AugmentJob`] per image in one job table (`gpu::jobs`), each job reading its image whole
//! and writing its part of one output buffer. The caller plans the jobs; this file knows only
//! engine types.

use super::abi::{AugmentJob, AUGMENT_WORKGROUP_SIZE};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::{Family, Kernel};
use super::jobs::{job_workgroups, plan_windows, JobSpan, JobTable};
use super::readback::{GpuBatch, ImageLayout};
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::Result;

/// Every storage range [`dispatch`] binds, for [`check_bindings`]: each decoded image of
/// `images` (in a buffer of `batch_len` bytes) and the whole output of `out_bytes` bytes.
pub(crate) fn bindings(
    images: &[ImageLayout],
    batch_len: u64,
    out_bytes: u64,
) -> impl Iterator<Item = Binding> + '_ {
    let out = Binding {
        what: "augmented batch tensor",
        buffer_len: out_bytes,
        offset: 0,
        size: out_bytes,
        copy: false,
    };
    images
        .iter()
        .map(move |l| Binding {
            what: "decoded image binding (augment reads each image whole)",
            buffer_len: batch_len,
            offset: l.offset,
            size: l.len.next_multiple_of(4).max(4),
            copy: false,
        })
        .chain(std::iter::once(out))
}

/// What the windows of a batch bind, for the binding check and the errors.
const WHAT: [&str; 2] = [
    "decoded image binding (augment reads each image whole)",
    "augmented batch tensor",
];

/// Dispatches `augment.wgsl` over `batch` (interleaved), `jobs[i]` for image `i`, each over
/// `per` output values, into a new output buffer of `out_bytes` bytes (usage
/// `STORAGE | COPY_SRC`): one dispatch for the batch, more only where a binding limit forces
/// it (`gpu::jobs`). Its [`bindings`] and its windows' are checked against `limits` first; a
/// GPU error while submitting is [`crate::Error::Gpu`].
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    batch: &GpuBatch,
    jobs: &[AugmentJob],
    per: u64,
    out_bytes: u64,
    limits: &BindLimits,
) -> Result<wgpu::Buffer> {
    check_bindings(
        bindings(&batch.images, batch.buffer.size(), out_bytes),
        limits,
    )?;
    let spans: Vec<JobSpan<2>> = batch
        .images
        .iter()
        .zip(jobs)
        .map(|(l, job)| {
            let words = if job.half == 1 { per.div_ceil(2) } else { per };
            JobSpan {
                ranges: [
                    (l.offset, l.len.next_multiple_of(4)),
                    (job.dst_offset as u64 * 4, words * 4),
                ],
                workgroups: job_workgroups(words, AUGMENT_WORKGROUP_SIZE),
            }
        })
        .collect();
    let table = plan_windows(&spans, size_of::<AugmentJob>() as u64, WHAT, limits)?;
    check_bindings(
        table.bindings(WHAT, [batch.buffer.size(), out_bytes]),
        limits,
    )?;
    let jobs: Vec<AugmentJob> = jobs
        .iter()
        .zip(&spans)
        .enumerate()
        .map(|(k, (job, span))| AugmentJob {
            src_offset: table.words[k][0],
            dst_offset: table.words[k][1],
            wg_base: table.wg_base[k],
            wg_count: span.workgroups,
            ..*job
        })
        .collect();
    let kernel = decoder.pipelines.kernel(Kernel::Augment)?;
    decoder.with_error_scopes(|| Ok(submit(decoder, kernel, batch, &table, &jobs, out_bytes)))
}

/// Uploads the job table and dispatches `augment.wgsl` once per window (bindings checked).
fn submit(
    decoder: &GpuDecoder,
    kernel: &Family,
    batch: &GpuBatch,
    table: &JobTable<2>,
    jobs: &[AugmentJob],
    out_bytes: u64,
) -> wgpu::Buffer {
    decoder.count_buffers(1);
    let out = storage_buffer(&decoder.device, "l3 augmented batch", out_bytes);
    let mut encoder = decoder
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("l3 augment"),
        });
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("l3 augment"),
            timestamp_writes: None,
        });
        table.encode(
            decoder,
            &mut pass,
            (kernel.entry("augment"), &kernel.bgl),
            &table.table_bytes(jobs),
            [&batch.buffer, &out],
        );
    }
    decoder.submit_commands(encoder.finish());
    out
}
