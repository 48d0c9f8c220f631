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
use super::bindings::BindLimits;
use super::chunked::{self, bytes, groups, Dispatch, Run, Steps, StreamTables, Table};
use super::device::Kernel;
use super::line_sum::line_sum_steps;
use super::GpuDecoder;
use crate::error::Result;

/// The tables of one batch, in binding order (see `shaders/bounded.wgsl`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BoundedTables<'a> {
    /// Bindings 0 to 3: the files' bytes, the segments, the decode tables then the exception
    /// runs, and the residual words.
    pub streams: StreamTables<'a>,
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

/// The (padded shape, differenced axes) of the differences arrays among `arrays`, for
/// [`line_sum_steps`].
fn differenced(arrays: &[BoundedArray]) -> impl Iterator<Item = ([u32; 4], u32)> + Clone + '_ {
    arrays
        .iter()
        .filter(|a| a.predictor == 1)
        .map(|a| ([a.shape0, a.shape1, a.shape2, a.shape3], a.axes))
}

/// Words of a struct table of `len` entries of `size` words (one entry at least: a runtime
/// array binds one element).
fn table_words(len: usize, size: usize) -> usize {
    len.max(1) * size
}

/// Decodes the batch on the GPU (see the module head): each file's error flags, the
/// dispatches, the bytes written to the GPU and the pass's GPU time where timing is on.
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    t: &BoundedTables<'_>,
    limits: &BindLimits,
) -> Result<chunked::Ran> {
    let files = t.arrays.len();
    let word = |s: usize| s / 4;
    let names = [
        "error-bounded input",
        "error-bounded segments",
        "error-bounded tables",
        "error-bounded residuals",
    ];
    let segment_words = table_words(t.streams.segments.len(), word(size_of::<LosslessSegment>()));
    let [input, segments, luts, residuals] = t.streams.tables(names, segment_words);
    let tables = [
        input,
        segments,
        luts,
        residuals,
        Table::scratch("error-bounded error flags", bytes(files)),
        Table::filled(
            "error-bounded arrays",
            bytes(table_words(files, word(size_of::<BoundedArray>()))),
            bytemuck::cast_slice(t.arrays),
        ),
        Table::filled(
            "error-bounded passes",
            bytes(table_words(t.passes.len(), word(size_of::<BoundedPass>()))),
            bytemuck::cast_slice(t.passes),
        ),
    ];
    // One uniform slot per lattice pass, then 3 per axis (the prefix sums' stages), then one
    // per round.
    let rounds = t.streams.rounds.max(1);
    let slots = t.max_passes + 12 + rounds;
    let round_slot = |r: u32| t.max_passes + 12 + r;
    let steps = Steps::new(
        decoder.device(),
        (0..slots).map(|j| {
            let u = j.saturating_sub(t.max_passes);
            BoundedStep {
                pass_index: j,
                axis: u / 3,
                stage: u % 3,
                round: j.saturating_sub(round_slot(0)),
            }
        }),
    );
    let k = decoder.pipelines.kernel(Kernel::Bounded)?;
    let files_y = files.max(1) as u32;
    let g = |items: u64| groups(items, BOUNDED_WORKGROUP_SIZE);
    let max_count = t.arrays.iter().map(|a| a.count as u64).max().unwrap_or(0);
    let mut dispatches: Vec<Dispatch<'_>> = t
        .streams
        .decode_rounds(
            k.entry("decode_segments"),
            round_slot(0),
            BOUNDED_WORKGROUP_SIZE,
        )
        .collect();
    dispatches.extend(
        line_sum_steps(differenced(t.arrays))
            .iter()
            .map(|step| Dispatch {
                pipeline: k.entry("undiff"),
                slot: t.max_passes + 3 * step.axis + step.stage,
                groups: [g(step.items), files_y],
            }),
    );
    for j in 0..t.max_passes {
        let targets = t
            .arrays
            .iter()
            .filter(|a| a.predictor == 0 && j < a.pass_count)
            .map(|a| t.passes[(a.passes + j) as usize].count as u64)
            .max()
            .unwrap_or(0);
        if targets > 0 {
            dispatches.push(Dispatch {
                pipeline: k.entry("lattice_pass"),
                slot: j,
                groups: [g(targets), files_y],
            });
        }
    }
    dispatches.push(Dispatch {
        pipeline: k.entry("finish"),
        slot: 0,
        groups: [g(max_count), files_y],
    });
    chunked::run(
        decoder,
        &Run {
            label: "l3 bounded",
            files_what: "error-bounded arrays in one batch",
            layout: &k.bgl,
            tables,
            output: t.output,
            output_what: "error-bounded output",
            steps: &steps,
            dispatches: &dispatches,
            files,
        },
        limits,
    )
}
