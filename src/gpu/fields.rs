//! The fields kernel: `shaders/fields.wgsl` over 16-bit bin images already decoded in a
//! [`GpuBatch`], one dispatch per field, each value `offset + q * bin_width` or its exact run
//! value. The caller parses the fields and plans the jobs; this file checks every range,
//! then binds and dispatches what it is given.

use super::abi::{strided_workgroups, FieldJob, FIELDS_WORKGROUP_SIZE, FIELD_RUN_WORDS, OUT_ALIGN};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::range;
use super::readback::{GpuBatch, ImageLayout};
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::Result;

/// One field's dispatch of `fields.wgsl`: its job and where its runs and values lie.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldDispatch {
    /// The uniform the kernel reads.
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

/// Dispatches `fields.wgsl` once per field of `fields` over the bin images of `bins` (field
/// `k`'s image is `bins.images[k]`), with the runs buffer `run_words`, into a new values
/// buffer of `total` bytes (usage `STORAGE | COPY_SRC`), which it returns. Every range is
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
    check_bindings(
        bindings(
            fields.iter().copied(),
            &bins.images,
            bins.buffer.size(),
            run_words.len() as u64 * 4,
            total,
        ),
        limits,
    )?;
    decoder.with_error_scopes(|| Ok(submit(decoder, bins, fields, run_words, total)))
}

/// Uploads the runs and jobs and dispatches `fields.wgsl` once per field; the caller has
/// checked every buffer and binding against the device's limits.
fn submit(
    decoder: &GpuDecoder,
    bins: &GpuBatch,
    fields: &[FieldDispatch],
    run_words: &[u32],
    total: u64,
) -> wgpu::Buffer {
    let out = storage_buffer(&decoder.device, "l3 field values", total.max(OUT_ALIGN));
    let runs = storage_buffer(&decoder.device, "l3 field runs", run_words.len() as u64 * 4);
    decoder
        .queue
        .write_buffer(&runs, 0, bytemuck::cast_slice(run_words));
    let slot = decoder.uniform_align;
    let jobs = decoder.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("l3 field jobs"),
        size: slot * fields.len().max(1) as u64,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    for (k, f) in fields.iter().enumerate() {
        decoder
            .queue
            .write_buffer(&jobs, k as u64 * slot, bytemuck::bytes_of(&f.job));
    }
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
        pass.set_pipeline(&decoder.pipelines.fields);
        for (k, f) in fields.iter().enumerate() {
            let n = f.count;
            let image = bins.images[k];
            let group = decoder
                .device
                .create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 fields"),
                    layout: &decoder.pipelines.fields_bgl,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: range(&jobs, k as u64 * slot, size_of::<FieldJob>() as u64),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: range(
                                &bins.buffer,
                                image.offset,
                                image.len.next_multiple_of(4),
                            ),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: range(&runs, f.run_offset, f.run_binding_len()),
                        },
                        wgpu::BindGroupEntry {
                            binding: 3,
                            resource: range(&out, f.offset, n * 4),
                        },
                    ],
                });
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(strided_workgroups(n, FIELDS_WORKGROUP_SIZE), 1, 1);
        }
    }
    decoder.queue.submit([encoder.finish()]);
    out
}
