//! The augment kernel: `shaders/augment.wgsl` dispatched once per image of a decoded batch,
//! each dispatch with its [`AugmentJob`], reading its image whole and writing its part of one
//! output buffer. The caller plans the jobs; this file knows only engine types.

use super::abi::{strided_workgroups, AugmentJob, AUGMENT_WORKGROUP_SIZE};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::range;
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

/// Dispatches `augment.wgsl` once per image of `batch` (interleaved), `jobs[i]` for image
/// `i`, each over `per` output values, into a new output buffer of `out_bytes` bytes (usage
/// `STORAGE | COPY_SRC`). Its [`bindings`] are checked against `limits` first; a GPU error
/// while submitting is [`crate::Error::Gpu`].
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
    decoder.with_error_scopes(|| Ok(submit(decoder, batch, jobs, per, out_bytes)))
}

/// Uploads the jobs and dispatches `augment.wgsl` once per image (bindings checked).
fn submit(
    decoder: &GpuDecoder,
    batch: &GpuBatch,
    jobs: &[AugmentJob],
    per: u64,
    out_bytes: u64,
) -> wgpu::Buffer {
    let out = storage_buffer(&decoder.device, "l3 augmented batch", out_bytes);
    let slot = decoder.uniform_align;
    let jobs_buffer = decoder.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("l3 augment jobs"),
        size: (jobs.len() as u64 * slot).max(slot),
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    for (i, job) in jobs.iter().enumerate() {
        decoder
            .queue
            .write_buffer(&jobs_buffer, i as u64 * slot, bytemuck::bytes_of(job));
    }
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
        pass.set_pipeline(&decoder.pipelines.augment);
        for (i, l) in batch.images.iter().enumerate() {
            let group = decoder
                .device
                .create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 augment"),
                    layout: &decoder.pipelines.augment_bgl,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: range(
                                &jobs_buffer,
                                i as u64 * slot,
                                size_of::<AugmentJob>() as u64,
                            ),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: range(&batch.buffer, l.offset, l.len.next_multiple_of(4)),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: out.as_entire_binding(),
                        },
                    ],
                });
            let groups = strided_workgroups(per, AUGMENT_WORKGROUP_SIZE);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(groups, 1, 1);
        }
    }
    decoder.queue.submit([encoder.finish()]);
    out
}
