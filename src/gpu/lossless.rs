//! The lossless kernel: `shaders/lossless.wgsl` over the tables of a batch of lossless float
//! arrays (planned by the data side, `field::lossless::gpu`): one dispatch of
//! `decode_segments`, one of `undiff_axis0` .. `undiff_axis3` each, one of `finish`, in one
//! submission. Every buffer is bound whole and checked against the device's limits first; a
//! batch over a limit is refused (not split yet). Returns the output buffer and the per-file
//! error flags, read back.

use super::abi::{LosslessArray, LosslessSegment, LOSSLESS_WORKGROUP_SIZE};
use super::bindings::{check_bindings, BindLimits, Binding};
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

/// Decodes the batch on the GPU: the output buffer (usage `STORAGE | COPY_SRC`) and each
/// file's error flags.
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    t: &LosslessTables<'_>,
    limits: &BindLimits,
) -> Result<(wgpu::Buffer, Vec<u32>)> {
    let files = t.arrays.len();
    if files as u64 > MAX_GROUPS as u64 {
        return Err(LimitsError::GpuBuffer {
            what: "lossless arrays in one batch",
            needed: files as u64,
            max: MAX_GROUPS as u64,
        }
        .into());
    }
    let sizes = [
        ("lossless input", bytes(t.input_words.len())),
        ("lossless segments", bytes(t.segments.len() * 8)),
        ("lossless decode tables", bytes(t.luts.len())),
        ("lossless scratch", bytes(t.words as usize)),
        ("lossless error flags", bytes(files)),
        ("lossless arrays", bytes(t.arrays.len() * 16)),
        ("lossless runs", bytes(t.runs.len())),
        ("lossless output", bytes(t.output_words as usize)),
    ];
    check_bindings(
        sizes.iter().map(|&(what, size)| Binding {
            what,
            buffer_len: size,
            offset: 0,
            size,
            copy: false,
        }),
        limits,
    )?;
    let d = &decoder.device;
    let q = &decoder.queue;
    let (out, errors) = decoder.with_error_scopes(|| {
        let bufs: Vec<wgpu::Buffer> = sizes
            .iter()
            .map(|&(what, size)| storage_buffer(d, what, size))
            .collect();
        q.write_buffer(&bufs[0], 0, bytemuck::cast_slice(t.input_words));
        q.write_buffer(&bufs[1], 0, bytemuck::cast_slice(t.segments));
        q.write_buffer(&bufs[2], 0, bytemuck::cast_slice(t.luts));
        q.write_buffer(&bufs[5], 0, bytemuck::cast_slice(t.arrays));
        q.write_buffer(&bufs[6], 0, bytemuck::cast_slice(t.runs));
        let p = &decoder.pipelines;
        let entries: Vec<wgpu::BindGroupEntry<'_>> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        let group = d.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("l3 lossless"),
            layout: &p.lossless_bgl,
            entries: &entries,
        });
        let max_lines = t.arrays.iter().map(|a| a.count as u64).max().unwrap_or(0);
        let max_words = t
            .arrays
            .iter()
            .map(|a| (a.count as u64).div_ceil(32 / a.width.max(1) as u64))
            .max()
            .unwrap_or(0);
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("l3 lossless"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 lossless"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, &group, &[]);
            pass.set_pipeline(&p.lossless_segments);
            pass.dispatch_workgroups(groups(t.segments.len() as u64), 1, 1);
            for undiff in &p.lossless_undiff {
                pass.set_pipeline(undiff);
                pass.dispatch_workgroups(groups(max_lines), files.max(1) as u32, 1);
            }
            pass.set_pipeline(&p.lossless_finish);
            pass.dispatch_workgroups(groups(max_words), files.max(1) as u32, 1);
        }
        q.submit([encoder.finish()]);
        let mut bufs = bufs;
        let out = bufs.swap_remove(7);
        Ok((out, bufs.swap_remove(4)))
    })?;
    let flags = read_buffer(d, q, &errors, 0, files as u64 * 4)?;
    Ok((out, bytemuck::pod_collect_to_vec(&flags)))
}
