//! The lossless kernel: `shaders/lossless.wgsl` over the tables of a batch of lossless float
//! arrays (planned by the data side, `field::lossless::gpu`): one dispatch of
//! `decode_segments` per round (as many as the plan says), one of `undiff` per step of the blocked
//! line sums (`gpu::line_sum`), one of `finish`, in one submission (the round, axis and
//! stage a dynamic uniform offset). Every buffer is bound whole, but the output, which the
//! caller gives as a range of its buffer, so that sub-batches (planned by the data side to
//! pass [`fits`]) write one output buffer; every binding is checked against the device's
//! limits first (`gpu::chunked` runs it). Returns the per-file error flags (read back), the
//! dispatch count and the bytes uploaded.

use super::abi::{LosslessArray, LosslessStep, LOSSLESS_WORKGROUP_SIZE};
use super::bindings::BindLimits;
use super::chunked::{self, bytes, groups, Dispatch, Run, Steps, StreamTables, Table, MAX_GROUPS};
use super::device::Kernel;
use super::line_sum::line_sum_steps;
use super::GpuDecoder;
use crate::error::Result;

/// The tables of one batch, in binding order (see `shaders/lossless.wgsl`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LosslessTables<'a> {
    /// Bindings 0 to 3: the files' bytes, the segments, the decode tables and the scratch
    /// words.
    pub streams: StreamTables<'a>,
    /// Binding 5: one entry per file.
    pub arrays: &'a [LosslessArray],
    /// Binding 6: the exception runs (3 words each).
    pub runs: &'a [u32],
    /// Binding 7: words of the output buffer.
    pub output_words: u32,
}

/// Every table of `t` (bindings 0 to 6) with its size in bytes, in binding order.
fn tables<'a>(t: &LosslessTables<'a>) -> [Table<'a>; 7] {
    let names = [
        "lossless input",
        "lossless segments",
        "lossless decode tables",
        "lossless scratch",
    ];
    let [input, segments, luts, scratch] = t.streams.tables(names, t.streams.segments.len() * 8);
    [
        input,
        segments,
        luts,
        scratch,
        Table::scratch("lossless error flags", bytes(t.arrays.len())),
        Table::filled(
            "lossless arrays",
            bytes(t.arrays.len() * 16),
            bytemuck::cast_slice(t.arrays),
        ),
        Table::filled(
            "lossless runs",
            bytes(t.runs.len()),
            bytemuck::cast_slice(t.runs),
        ),
    ]
}

/// Whether [`dispatch`] can bind `t` under `limits`: every binding within the binding and
/// buffer limits, and at most 65535 arrays.
pub(crate) fn fits(t: &LosslessTables<'_>, limits: &BindLimits) -> bool {
    let output = bytes(t.output_words as usize);
    t.arrays.len() as u64 <= MAX_GROUPS as u64
        && tables(t)
            .iter()
            .map(|b| b.size)
            .chain([output])
            .all(|size| size <= limits.max_binding && size <= limits.max_buffer)
}

/// Decodes the batch on the GPU into `out` (a buffer with usage `STORAGE`) from byte
/// `out_offset` (a multiple of the storage alignment): each file's error flags, the
/// dispatches, the bytes written to the GPU and the pass's GPU time where timing is on.
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    t: &LosslessTables<'_>,
    out: &wgpu::Buffer,
    out_offset: u64,
    limits: &BindLimits,
) -> Result<chunked::Ran> {
    // One uniform slot per round, then one per line-sum step.
    let rounds = t.streams.rounds.max(1);
    let sums = line_sum_steps(
        t.arrays
            .iter()
            .map(|a| ([a.shape0, a.shape1, a.shape2, a.shape3], a.axes)),
    );
    let steps = Steps::new(
        decoder.device(),
        (0..rounds)
            .map(|round| LosslessStep {
                round,
                ..Default::default()
            })
            .chain(sums.iter().map(|step| LosslessStep {
                axis: step.axis,
                stage: step.stage,
                ..Default::default()
            })),
    );
    let k = decoder.pipelines.kernel(Kernel::Lossless)?;
    let files_y = t.arrays.len().max(1) as u32;
    let max_words = t
        .arrays
        .iter()
        .map(|a| (a.count as u64).div_ceil(32 / a.width.max(1) as u64))
        .max()
        .unwrap_or(0);
    let g = |items: u64| groups(items, LOSSLESS_WORKGROUP_SIZE);
    let dispatches: Vec<Dispatch<'_>> = t
        .streams
        .decode_rounds(k.entry("decode_segments"), 0, LOSSLESS_WORKGROUP_SIZE)
        .chain(sums.iter().enumerate().map(|(j, step)| Dispatch {
            pipeline: k.entry("undiff"),
            slot: rounds + j as u32,
            groups: [g(step.items), files_y],
        }))
        .chain([Dispatch {
            pipeline: k.entry("finish"),
            slot: 0,
            groups: [g(max_words), files_y],
        }])
        .collect();
    chunked::run(
        decoder,
        &Run {
            label: "l3 lossless",
            files_what: "lossless arrays in one batch",
            layout: &k.bgl,
            tables: tables(t),
            output: (out, out_offset, bytes(t.output_words as usize)),
            output_what: "lossless output",
            steps: &steps,
            dispatches: &dispatches,
            files: t.arrays.len(),
        },
        limits,
    )
}
