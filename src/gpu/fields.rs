//! Error-bounded float32 fields on the GPU ([`GpuDecoder::decode_fields`]): the fields' bin
//! images decode as one batch (16-bit gray L3 files), then `shaders/fields.wgsl` turns each
//! into f32 values (one dispatch per field), bit for bit what [`crate::field::decode_field`]
//! gives on the CPU.

use super::abi::{strided_workgroups, FieldJob, FIELDS_WORKGROUP_SIZE, FIELD_RUN_WORDS, OUT_ALIGN};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::range;
use super::readback::read_buffer;
use super::readback::ImageLayout;
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::{Error, Result};
use crate::field::{parse_field, FieldHeader, FieldLayout};
use crate::layout::OutputLayout;

/// Decoded fields in one GPU buffer of f32 values.
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
    /// Field `i`'s values, read back (blocking).
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

impl GpuDecoder {
    /// Decodes field files (see [`crate::field`]) on the GPU into one buffer of f32 values.
    /// Every file is parsed and checked on the CPU first (an error names the field:
    /// [`Error::InBatch`]).
    pub fn decode_fields(&self, files: &[&[u8]]) -> Result<GpuFieldBatch> {
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
        let plan = plan_fields(&layouts, &BindLimits::of(&self.device))?;
        let images: Vec<&[u8]> = layouts.iter().map(|l| l.image).collect();
        let bins = self.decode_batch(&images, OutputLayout::Interleaved)?;
        check_bindings(
            plan.bindings(&layouts, &bins.images, bins.buffer.size()),
            &plan.limits,
        )?;
        self.with_error_scopes(|| self.submit_fields(&layouts, &bins, &plan))
    }

    /// Uploads the runs and jobs and dispatches `fields.wgsl` once per field; the caller has
    /// checked every buffer and binding against the device's limits.
    fn submit_fields(
        &self,
        layouts: &[FieldLayout<'_>],
        bins: &super::GpuBatch,
        plan: &FieldPlan,
    ) -> Result<GpuFieldBatch> {
        let FieldPlan {
            offsets,
            total,
            run_words,
            run_base,
            ..
        } = plan;
        let out = storage_buffer(&self.device, "l3 field values", (*total).max(OUT_ALIGN));
        let runs = storage_buffer(&self.device, "l3 field runs", run_words.len() as u64 * 4);
        self.queue
            .write_buffer(&runs, 0, bytemuck::cast_slice(run_words));
        let slot = self.uniform_align;
        let jobs = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 field jobs"),
            size: slot * layouts.len().max(1) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        for (k, l) in layouts.iter().enumerate() {
            let job = FieldJob {
                count: l.header.len() as u32,
                run_count: l.runs.len() as u32,
                offset_bits: l.header.offset.to_bits(),
                bin_bits: l.header.bin_width.to_bits(),
            };
            self.queue
                .write_buffer(&jobs, k as u64 * slot, bytemuck::bytes_of(&job));
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("l3 fields"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 fields"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipelines.fields);
            for (k, l) in layouts.iter().enumerate() {
                let n = l.header.len();
                let image = bins.images[k];
                let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 fields"),
                    layout: &self.pipelines.fields_bgl,
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
                            resource: range(&runs, run_base[k], run_binding_len(l)),
                        },
                        wgpu::BindGroupEntry {
                            binding: 3,
                            resource: range(&out, offsets[k], n * 4),
                        },
                    ],
                });
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(strided_workgroups(n, FIELDS_WORKGROUP_SIZE), 1, 1);
            }
        }
        self.queue.submit([encoder.finish()]);
        Ok(GpuFieldBatch {
            buffer: out,
            offsets: offsets.to_vec(),
            headers: layouts.iter().map(|l| l.header).collect(),
            device: self.device.clone(),
            queue: self.queue.clone(),
        })
    }
}

/// Where a batch of fields goes: each field's values in the output, its runs in the runs
/// buffer (a pure function of the fields and the device's limits, checked by
/// [`FieldPlan::bindings`] before anything is bound).
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

/// Bytes of field `l`'s runs binding (one word when it has none: bindings are never empty).
fn run_binding_len(l: &FieldLayout<'_>) -> u64 {
    (l.runs.len() as u64 * FIELD_RUN_WORDS as u64 * 4).max(4)
}

/// Plans a batch of parsed fields (see [`FieldPlan`]).
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
    /// Every storage range the fields stage binds, for [`check_bindings`]: each field's bin
    /// image in the decoded batch (`images`, in a buffer of `batch_len` bytes), its runs and
    /// its values.
    pub fn bindings<'a>(
        &'a self,
        layouts: &'a [FieldLayout<'_>],
        images: &'a [ImageLayout],
        batch_len: u64,
    ) -> impl Iterator<Item = Binding> + 'a {
        layouts.iter().enumerate().flat_map(move |(k, l)| {
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
                    buffer_len: self.run_words.len() as u64 * 4,
                    offset: self.run_base[k],
                    size: run_binding_len(l),
                    copy: false,
                },
                Binding {
                    what: "field values",
                    buffer_len: self.total.max(OUT_ALIGN),
                    offset: self.offsets[k],
                    size: (l.header.len() * 4).max(4),
                    copy: false,
                },
            ]
        })
    }
}
