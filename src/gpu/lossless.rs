//! The lossless kernel: `shaders/lossless.wgsl` over the tables of a batch of lossless float
//! arrays (planned by the data side, `field::lossless::gpu`): one dispatch of
//! `decode_segments` per round (as many as the plan says), one of `undiff` per step of the blocked
//! line sums (`gpu::line_sum`), one of `finish`, in one submission (the round, axis and
//! stage a dynamic uniform offset). Every buffer is bound whole, but the output, which the
//! caller gives as a range of its buffer, so that sub-batches (planned by the data side to
//! pass [`fits`]) write one output buffer; every binding is checked against the device's
//! limits first. Returns the per-file error flags (read back) and the dispatch count.

use super::abi::{LosslessArray, LosslessSegment, LosslessStep, LOSSLESS_WORKGROUP_SIZE};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::line_sum::line_sum_steps;
use super::readback::read_buffer;
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::{LimitsError, Result};

/// The tables of one batch, in binding order (see `shaders/lossless.wgsl`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LosslessTables<'a> {
    /// Binding 0: the files' bytes as words.
    pub input_words: &'a [u32],
    /// Binding 1: one entry per segment.
    pub segments: &'a [LosslessSegment],
    /// Rounds of `decode_segments` (1 at least): the longest segment's values over
    /// `SEGMENT_ROUND`, rounded up.
    pub rounds: u32,
    /// Binding 2: the decode tables.
    pub luts: &'a [u32],
    /// Binding 3: words of the scratch buffer.
    pub words: u32,
    /// Binding 5: one entry per file.
    pub arrays: &'a [LosslessArray],
    /// Binding 6: the exception runs (3 words each).
    pub runs: &'a [u32],
    /// Binding 7: words of the output buffer.
    pub output_words: u32,
}

/// Most workgroups along x or y of one dispatch (WebGPU's default limit).
const MAX_GROUPS: u32 = 65535;

fn groups(items: u64) -> u32 {
    items
        .div_ceil(LOSSLESS_WORKGROUP_SIZE as u64)
        .clamp(1, MAX_GROUPS as u64) as u32
}

/// Bytes of a binding of `words` words (bindings are never empty).
fn bytes(words: usize) -> u64 {
    (words as u64 * 4).max(4)
}

/// Every binding of `t` with its size in bytes, in binding order.
fn binding_sizes(t: &LosslessTables<'_>) -> [(&'static str, u64); 8] {
    [
        ("lossless input", bytes(t.input_words.len())),
        ("lossless segments", bytes(t.segments.len() * 8)),
        ("lossless decode tables", bytes(t.luts.len())),
        ("lossless scratch", bytes(t.words as usize)),
        ("lossless error flags", bytes(t.arrays.len())),
        ("lossless arrays", bytes(t.arrays.len() * 16)),
        ("lossless runs", bytes(t.runs.len())),
        ("lossless output", bytes(t.output_words as usize)),
    ]
}

/// Whether [`dispatch`] can bind `t` under `limits`: every binding within the binding and
/// buffer limits, and at most 65535 arrays.
pub(crate) fn fits(t: &LosslessTables<'_>, limits: &BindLimits) -> bool {
    t.arrays.len() as u64 <= MAX_GROUPS as u64
        && binding_sizes(t)
            .iter()
            .all(|&(_, size)| size <= limits.max_binding && size <= limits.max_buffer)
}

/// Decodes the batch on the GPU into `out` (a buffer with usage `STORAGE`) from byte
/// `out_offset` (a multiple of the storage alignment): each file's error flags and the
/// dispatches.
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    t: &LosslessTables<'_>,
    out: &wgpu::Buffer,
    out_offset: u64,
    limits: &BindLimits,
) -> Result<(Vec<u32>, u32)> {
    let files = t.arrays.len();
    if files as u64 > MAX_GROUPS as u64 {
        return Err(LimitsError::GpuBuffer {
            what: "lossless arrays in one batch",
            needed: files as u64,
            max: MAX_GROUPS as u64,
        }
        .into());
    }
    let sizes = binding_sizes(t);
    let out_size = sizes[7].1;
    check_bindings(
        sizes.iter().enumerate().map(|(i, &(what, size))| Binding {
            what,
            buffer_len: if i == 7 { out.size() } else { size },
            offset: if i == 7 { out_offset } else { 0 },
            size,
            copy: false,
        }),
        limits,
    )?;
    let d = &decoder.device;
    let q = &decoder.queue;
    // One uniform slot per round, then one per line-sum step, at the device's uniform
    // offset alignment.
    let rounds = t.rounds.max(1);
    let steps = line_sum_steps(
        t.arrays
            .iter()
            .map(|a| ([a.shape0, a.shape1, a.shape2, a.shape3], a.axes)),
    );
    let slot = (d.limits().min_uniform_buffer_offset_alignment as u64)
        .max(size_of::<LosslessStep>() as u64);
    let slots = rounds as usize + steps.len();
    let (errors, dispatches) = decoder.with_error_scopes(|| {
        let bufs: Vec<wgpu::Buffer> = sizes[..7]
            .iter()
            .map(|&(what, size)| storage_buffer(d, what, size))
            .collect();
        q.write_buffer(&bufs[0], 0, bytemuck::cast_slice(t.input_words));
        q.write_buffer(&bufs[1], 0, bytemuck::cast_slice(t.segments));
        q.write_buffer(&bufs[2], 0, bytemuck::cast_slice(t.luts));
        q.write_buffer(&bufs[5], 0, bytemuck::cast_slice(t.arrays));
        q.write_buffer(&bufs[6], 0, bytemuck::cast_slice(t.runs));
        let step_buffer = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("lossless steps"),
            size: slot * slots as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut step_bytes = vec![0u8; slot as usize * slots];
        let rounds_then_steps = (0..rounds)
            .map(|round| LosslessStep {
                round,
                ..Default::default()
            })
            .chain(steps.iter().map(|step| LosslessStep {
                axis: step.axis,
                stage: step.stage,
                ..Default::default()
            }));
        for (j, s) in rounds_then_steps.enumerate() {
            let at = j * slot as usize;
            step_bytes[at..at + size_of::<LosslessStep>()].copy_from_slice(bytemuck::bytes_of(&s));
        }
        q.write_buffer(&step_buffer, 0, &step_bytes);
        let p = &decoder.pipelines;
        let mut entries: Vec<wgpu::BindGroupEntry<'_>> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: 7,
            resource: super::device::range(out, out_offset, out_size),
        });
        entries.push(wgpu::BindGroupEntry {
            binding: 8,
            resource: super::device::range(&step_buffer, 0, size_of::<LosslessStep>() as u64),
        });
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("l3 lossless"),
            layout: &p.lossless_bgl,
            entries: &entries,
        });
        let max_words = t
            .arrays
            .iter()
            .map(|a| (a.count as u64).div_ceil(32 / a.width.max(1) as u64))
            .max()
            .unwrap_or(0);
        let files_y = files.max(1) as u32;
        let offset = |j: usize| [(j as u64 * slot) as u32];
        let mut dispatches = 0u32;
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("l3 lossless"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 lossless"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&p.lossless_segments);
            for j in 0..rounds as usize {
                pass.set_bind_group(0, &group, &offset(j));
                pass.dispatch_workgroups(groups(t.segments.len() as u64), 1, 1);
                dispatches += 1;
            }
            pass.set_pipeline(&p.lossless_undiff);
            for (j, step) in steps.iter().enumerate() {
                pass.set_bind_group(0, &group, &offset(rounds as usize + j));
                pass.dispatch_workgroups(groups(step.items), files_y, 1);
                dispatches += 1;
            }
            pass.set_bind_group(0, &group, &offset(0));
            pass.set_pipeline(&p.lossless_finish);
            pass.dispatch_workgroups(groups(max_words), files_y, 1);
            dispatches += 1;
        }
        q.submit([encoder.finish()]);
        let mut bufs = bufs;
        Ok((bufs.swap_remove(4), dispatches))
    })?;
    let flags = read_buffer(d, q, &errors, 0, files as u64 * 4)?;
    Ok((bytemuck::pod_collect_to_vec(&flags), dispatches))
}
