//! The error-bounded arrays' kernel: `shaders/bounded.wgsl` over the tables of a batch of
//! `.l3f` version 3 arrays (planned by the data side, `field::bounded::gpu`): one dispatch of
//! `decode_segments` per round (as many as the plan says), one of `undiff` per step of the
//! blocked line sums (`gpu::line_sum`: blocks, then carries and adds where a line has
//! several blocks) for each axis some array is differenced along, one of `lattice_pass` per
//! pass with targets (the round, pass, axis and stage a dynamic uniform offset), one of
//! `finish`, in one submission. Every buffer is bound whole, but the output, which the
//! caller gives as a range of its buffer, so that sub-batches (planned by the data side to
//! fit the device's bindings) write one output buffer; every binding is checked against the
//! device's limits first. Returns the per-file error flags (read back), the dispatch count
//! and the bytes uploaded.

use super::abi::{BoundedArray, BoundedPass, BoundedStep, LosslessSegment, BOUNDED_WORKGROUP_SIZE};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::line_sum::line_sum_steps;
use super::readback::read_buffer;
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::{LimitsError, Result};

/// The tables of one batch, in binding order (see `shaders/bounded.wgsl`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BoundedTables<'a> {
    /// Binding 0: the files' bytes as words.
    pub input_words: &'a [u32],
    /// Binding 1: one entry per segment.
    pub segments: &'a [LosslessSegment],
    /// Rounds of `decode_segments` (1 at least): the longest segment's values over
    /// `SEGMENT_ROUND`, rounded up.
    pub rounds: u32,
    /// Binding 2: the decode tables, then the exception runs.
    pub tables: &'a [u32],
    /// Binding 3: words of the residual buffer.
    pub words: u32,
    /// Binding 5: one entry per file.
    pub arrays: &'a [BoundedArray],
    /// Binding 6: the lattice passes (value 0's first) of every lattice array.
    pub passes: &'a [BoundedPass],
    /// The most passes of any array: `lattice_pass` dispatches.
    pub max_passes: u32,
    /// Binding 7: the output buffer (usage `STORAGE`), and the byte range of it the batch
    /// writes (offset on the storage alignment).
    pub output: (&'a wgpu::Buffer, u64, u64),
}

/// What one batch gave: each file's error flags, the dispatches and the bytes written to the
/// GPU.
pub(crate) type BoundedResult = (Vec<u32>, u32, u64);

/// Most workgroups along x or y of one dispatch (WebGPU's default limit).
const MAX_GROUPS: u32 = 65535;

fn groups(items: u64) -> u32 {
    items
        .div_ceil(BOUNDED_WORKGROUP_SIZE as u64)
        .clamp(1, MAX_GROUPS as u64) as u32
}

/// The (padded shape, differenced axes) of the differences arrays among `arrays`, for
/// [`line_sum_steps`].
fn differenced(arrays: &[BoundedArray]) -> impl Iterator<Item = ([u32; 4], u32)> + Clone + '_ {
    arrays
        .iter()
        .filter(|a| a.predictor == 1)
        .map(|a| ([a.shape0, a.shape1, a.shape2, a.shape3], a.axes))
}

/// Bytes of a binding of `words` words (bindings are never empty).
fn bytes(words: usize) -> u64 {
    (words as u64 * 4).max(4)
}

/// Words of a struct table of `len` entries of `size` words (one entry at least: a runtime
/// array binds one element).
fn table_words(len: usize, size: usize) -> usize {
    len.max(1) * size
}

/// Decodes the batch on the GPU (see the module head).
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    t: &BoundedTables<'_>,
    limits: &BindLimits,
) -> Result<BoundedResult> {
    let files = t.arrays.len();
    if files as u64 > MAX_GROUPS as u64 {
        return Err(LimitsError::GpuBuffer {
            what: "error-bounded arrays in one batch",
            needed: files as u64,
            max: MAX_GROUPS as u64,
        }
        .into());
    }
    let word = |s: usize| s / 4;
    let sizes = [
        ("error-bounded input", bytes(t.input_words.len())),
        (
            "error-bounded segments",
            bytes(table_words(
                t.segments.len(),
                word(size_of::<LosslessSegment>()),
            )),
        ),
        ("error-bounded tables", bytes(t.tables.len())),
        ("error-bounded residuals", bytes(t.words as usize)),
        ("error-bounded error flags", bytes(files)),
        (
            "error-bounded arrays",
            bytes(table_words(files, word(size_of::<BoundedArray>()))),
        ),
        (
            "error-bounded passes",
            bytes(table_words(t.passes.len(), word(size_of::<BoundedPass>()))),
        ),
    ];
    let (output, out_offset, out_size) = t.output;
    check_bindings(
        sizes
            .iter()
            .map(|&(what, size)| Binding::whole(what, size))
            .chain([Binding {
                what: "error-bounded output",
                buffer_len: output.size(),
                offset: out_offset,
                size: out_size,
                copy: false,
            }]),
        limits,
    )?;
    let d = &decoder.device;
    let q = &decoder.queue;
    // One uniform slot per lattice pass, then 3 per axis (the prefix sums' stages), then one
    // per round, at the device's uniform offset alignment.
    let slot = (d.limits().min_uniform_buffer_offset_alignment as u64)
        .max(size_of::<BoundedStep>() as u64);
    let rounds = t.rounds.max(1);
    let slots = t.max_passes as u64 + 12 + rounds as u64;
    let round_slot = |r: u32| t.max_passes + 12 + r;
    let uploaded = [
        bytemuck::cast_slice::<_, u8>(t.input_words).len(),
        bytemuck::cast_slice::<_, u8>(t.segments).len(),
        bytemuck::cast_slice::<_, u8>(t.tables).len(),
        bytemuck::cast_slice::<_, u8>(t.arrays).len(),
        bytemuck::cast_slice::<_, u8>(t.passes).len(),
        (slot * slots) as usize,
    ]
    .iter()
    .sum::<usize>() as u64;
    let (errors, dispatches) = decoder.with_error_scopes(|| {
        let bufs: Vec<wgpu::Buffer> = sizes
            .iter()
            .map(|&(what, size)| storage_buffer(d, what, size))
            .collect();
        q.write_buffer(&bufs[0], 0, bytemuck::cast_slice(t.input_words));
        q.write_buffer(&bufs[1], 0, bytemuck::cast_slice(t.segments));
        q.write_buffer(&bufs[2], 0, bytemuck::cast_slice(t.tables));
        q.write_buffer(&bufs[5], 0, bytemuck::cast_slice(t.arrays));
        q.write_buffer(&bufs[6], 0, bytemuck::cast_slice(t.passes));
        let steps = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("error-bounded pass steps"),
            size: slot * slots,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut step_bytes = vec![0u8; (slot * slots) as usize];
        for j in 0..slots as u32 {
            let u = j.saturating_sub(t.max_passes);
            let s = BoundedStep {
                pass_index: j,
                axis: u / 3,
                stage: u % 3,
                round: j.saturating_sub(round_slot(0)),
            };
            let at = (j as u64 * slot) as usize;
            step_bytes[at..at + size_of::<BoundedStep>()].copy_from_slice(bytemuck::bytes_of(&s));
        }
        q.write_buffer(&steps, 0, &step_bytes);
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
            resource: super::device::range(output, out_offset, out_size),
        });
        entries.push(wgpu::BindGroupEntry {
            binding: 8,
            resource: super::device::range(&steps, 0, size_of::<BoundedStep>() as u64),
        });
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("l3 bounded"),
            layout: &p.bounded_bgl,
            entries: &entries,
        });
        let max_count = t.arrays.iter().map(|a| a.count as u64).max().unwrap_or(0);
        let files_y = files.max(1) as u32;
        let mut dispatches = 0u32;
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("l3 bounded"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 bounded"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&p.bounded_segments);
            for r in 0..rounds {
                pass.set_bind_group(0, &group, &[(round_slot(r) as u64 * slot) as u32]);
                pass.dispatch_workgroups(groups(t.segments.len() as u64), 1, 1);
                dispatches += 1;
            }
            pass.set_pipeline(&p.bounded_undiff);
            for step in line_sum_steps(differenced(t.arrays)) {
                let j = t.max_passes + 3 * step.axis + step.stage;
                pass.set_bind_group(0, &group, &[(j as u64 * slot) as u32]);
                pass.dispatch_workgroups(groups(step.items), files_y, 1);
                dispatches += 1;
            }
            pass.set_pipeline(&p.bounded_lattice);
            for j in 0..t.max_passes {
                let targets = t
                    .arrays
                    .iter()
                    .filter(|a| a.predictor == 0 && j < a.pass_count)
                    .map(|a| t.passes[(a.passes + j) as usize].count as u64)
                    .max()
                    .unwrap_or(0);
                if targets == 0 {
                    continue;
                }
                pass.set_bind_group(0, &group, &[(j as u64 * slot) as u32]);
                pass.dispatch_workgroups(groups(targets), files_y, 1);
                dispatches += 1;
            }
            pass.set_bind_group(0, &group, &[0]);
            pass.set_pipeline(&p.bounded_finish);
            pass.dispatch_workgroups(groups(max_count), files_y, 1);
            dispatches += 1;
        }
        q.submit([encoder.finish()]);
        let mut bufs = bufs;
        Ok((bufs.swap_remove(4), dispatches))
    })?;
    let flags = read_buffer(d, q, &errors, 0, files as u64 * 4)?;
    Ok((bytemuck::pod_collect_to_vec(&flags), dispatches, uploaded))
}
