//! The GPU plan of error-bounded arrays (`.l3f` version 3): every file is checked on the CPU
//! as the CPU decoder checks it (header, limits, CRC, runs, chunk table, every chunk's head),
//! then turned into the tables `shaders/bounded.wgsl` reads: the files' bytes as words, one
//! [`LosslessSegment`] per segment (a segment past one round's values with 3 words to keep
//! its place between rounds, as `field::lossless::gpu` plans them), the decode tables and
//! exception runs (one binding), one [`BoundedArray`] per file and, for the lattice
//! predictor, one [`BoundedPass`] per pass (value 0 first), in sub-batches of consecutive
//! files that fit the device's bindings ([`plan_bounded_batches`]). Stream and value errors
//! are left to the GPU, which reports them per file.

use super::format::{parse_chunk, parse_layout, Layout};
use super::{BoundedHeader, Predictor};
use crate::decode::DecodeOptions;
use crate::error::{LimitsError, Result};
#[cfg(test)]
use crate::field::core::gpu::segment_rounds;
use crate::field::core::gpu::{
    align, in_batch, padded_shape, push_file, push_stream, u32_of, ArrayPlan, PlanMark,
    StreamPlace, TableNames,
};
use crate::gpu::abi::{
    BoundedArray, BoundedPass, LosslessSegment, PASS_CUBIC, PASS_LINEAR, PASS_ORIGIN,
};
use crate::gpu::line_sum::carry_words;

/// The tables of one batch of error-bounded arrays, in the shader's binding order (the
/// exception runs after the decode tables).
pub(crate) type BoundedPlan = ArrayPlan<BoundedArray, BoundedHeader, BoundedOwn>;

/// The error-bounded plan's own table and places.
#[derive(Debug, Default)]
pub(crate) struct BoundedOwn {
    /// Every lattice array's passes.
    pub passes: Vec<BoundedPass>,
    /// The most passes of any array: the `lattice_pass` dispatches.
    pub max_passes: u32,
    /// The batch's index of the sub-batch's first file (error slots are counted from it).
    pub first_file: usize,
    /// Word of the shared output buffer where the sub-batch's output starts.
    pub output_base: u64,
}

/// The lattice predictor's passes of `h` as the shader reads them: value 0, then for each
/// level `L-1` down to 0 and each axis of the order, the grid of its targets (SPEC.md,
/// "Predictor 0"). Positions are below 2^32 (the shape's product is).
fn lattice_passes(h: &BoundedHeader) -> Vec<BoundedPass> {
    let nd = h.shape.len();
    let pad = 4 - nd;
    let mut dims = [1u64; 4];
    for (a, &d) in h.shape.iter().enumerate() {
        dims[pad + a] = d as u64;
    }
    let mut strides = [1u64; 4];
    for a in (0..3).rev() {
        strides[a] = strides[a + 1] * dims[a + 1];
    }
    let levels = h.levels as u32;
    let mut out = vec![BoundedPass {
        count: 1,
        kind: PASS_ORIGIN,
        step: h.steps[levels as usize] as u32,
        g1: 1,
        g2: 1,
        g3: 1,
        ..Default::default()
    }];
    let mut stream = 1u64;
    let mut j = 0;
    for level in (0..levels).rev() {
        let s = 1u64 << level;
        for (m, &d) in h.axes.iter().enumerate() {
            let d = d as usize;
            let mut grid = [1u64; 4];
            let mut step = [1u64; 4];
            for (kk, &a) in h.axes.iter().enumerate() {
                let a = a as usize;
                step[pad + a] = if kk < m { s } else { 2 * s };
                grid[pad + a] = if a == d {
                    (dims[pad + a] + s - 1) / (2 * s)
                } else {
                    dims[pad + a].div_ceil(step[pad + a])
                };
            }
            let count: u64 = grid.iter().product();
            let axis = pad + d;
            let istep = |a: usize| {
                if grid[a] > 1 {
                    (step[a] * strides[a]) as u32
                } else {
                    0
                }
            };
            let pass = if count == 0 {
                BoundedPass {
                    stream: stream as u32,
                    g1: 1,
                    g2: 1,
                    g3: 1,
                    ..Default::default()
                }
            } else {
                BoundedPass {
                    count: count as u32,
                    stream: stream as u32,
                    kind: if h.cubic[j] { PASS_CUBIC } else { PASS_LINEAR },
                    step: h.steps[level as usize] as u32,
                    axis: axis as u32,
                    stride: s as u32,
                    len: dims[axis] as u32,
                    dist: (s * strides[axis]) as u32,
                    base: (s * strides[axis]) as u32,
                    g1: grid[1] as u32,
                    g2: grid[2] as u32,
                    g3: grid[3] as u32,
                    istep0: istep(0),
                    istep1: istep(1),
                    istep2: istep(2),
                    istep3: istep(3),
                }
            };
            out.push(pass);
            stream += count;
            j += 1;
        }
    }
    debug_assert_eq!(stream, h.len());
    out
}

/// Binding limits a batch is split for (bytes): the largest storage binding and buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SplitLimits {
    /// Largest storage binding.
    pub max_binding: u64,
    /// Largest buffer (the output buffer holds every sub-batch).
    pub max_buffer: u64,
}

impl SplitLimits {
    /// No limit: one batch.
    #[cfg(test)]
    pub const NONE: SplitLimits = SplitLimits {
        max_binding: u64::MAX,
        max_buffer: u64::MAX,
    };
}

/// The error-bounded tables' names in errors.
const NAMES: TableNames = TableNames {
    luts: "error-bounded decode tables",
    input: "error-bounded input bytes",
    words: "error-bounded words",
};

/// Most arrays in one sub-batch (workgroups along y of one dispatch).
const MAX_ARRAYS: usize = 65535;

/// Where a [`Builder`]'s tables and counts end.
struct BuilderMark {
    plan: PlanMark,
    passes: usize,
    runs: usize,
    words: u64,
    output: u64,
}

/// A sub-batch being built: the plan and its runs (appended to the tables at the end).
#[derive(Default)]
struct Builder {
    plan: BoundedPlan,
    runs: Vec<u32>,
    words: u64,
    output: u64,
}

impl Builder {
    /// Bytes of each storage binding `shaders/bounded.wgsl` binds for the sub-batch so far
    /// (`gpu::bounded::dispatch` binds the same sizes).
    fn binding_bytes(&self) -> [(&'static str, u64); 8] {
        let p = &self.plan;
        let b = |words: u64| (words * 4).max(4);
        let table = |len: usize, size: usize| b((len.max(1) * size / 4) as u64);
        [
            ("error-bounded input", b(p.input_words.len() as u64 + 1)),
            (
                "error-bounded segments",
                table(p.segments.len(), size_of::<LosslessSegment>()),
            ),
            (
                "error-bounded tables",
                b((p.luts.len() + self.runs.len()) as u64),
            ),
            ("error-bounded residuals", b(self.words)),
            ("error-bounded error flags", b(p.arrays.len() as u64)),
            (
                "error-bounded arrays",
                table(p.arrays.len(), size_of::<BoundedArray>()),
            ),
            (
                "error-bounded passes",
                table(p.own.passes.len(), size_of::<BoundedPass>()),
            ),
            ("error-bounded output", b(self.output)),
        ]
    }

    /// The first binding over `max` bytes, if any.
    fn over(&self, max: u64) -> Option<(&'static str, u64)> {
        self.binding_bytes().into_iter().find(|&(_, n)| n > max)
    }

    /// Undoes everything past the marks of [`Builder::mark`].
    fn rollback(&mut self, m: BuilderMark) {
        self.plan.rewind(m.plan);
        self.plan.own.passes.truncate(m.passes);
        self.runs.truncate(m.runs);
        self.words = m.words;
        self.output = m.output;
    }

    /// Where the sub-batch ends now, for [`Builder::rollback`].
    fn mark(&self) -> BuilderMark {
        BuilderMark {
            plan: self.plan.mark(),
            passes: self.plan.own.passes.len(),
            runs: self.runs.len(),
            words: self.words,
            output: self.output,
        }
    }

    /// Checks file `f` of the batch and adds it (error slot: its index in the sub-batch).
    fn add(&mut self, f: usize, data: &[u8], options: &DecodeOptions) -> Result<()> {
        let plan = &mut self.plan;
        let local = plan.arrays.len() as u32;
        let layout: Layout<'_> = parse_layout(data, options).map_err(|e| in_batch(f, e))?;
        let h = &layout.header;
        let n = h.len();
        let file_byte = push_file(&mut plan.input_words, data);
        let base = |c: &[u8]| c.as_ptr() as usize - data.as_ptr() as usize;
        let res_at = self.words;
        self.words = align(self.words + n);
        let chunk = 1u64 << h.chunk_log2;
        for (c, &bytes) in layout.chunks.iter().enumerate() {
            let stream = parse_chunk(bytes, base(bytes), h.segments as usize)
                .map_err(|e| in_batch(f, e.into()))?;
            let first = c as u64 * chunk;
            let at = StreamPlace {
                f,
                slot: local,
                data,
                file_byte,
                out: res_at + first,
                m: chunk.min(n - first),
                width: 32,
            };
            let (tables, segments) = (&mut plan.luts, &mut plan.segments);
            push_stream(&stream, &at, tables, segments, &mut self.words, &NAMES)?;
        }
        let (shape, pad) = padded_shape(&h.shape);
        let (predictor, axes, limit, passes, pass_count) = match h.predictor {
            Predictor::Lattice => {
                let ps = lattice_passes(h);
                let at = u32_of(plan.own.passes.len() as u64, "error-bounded passes")?;
                let count = ps.len() as u32;
                plan.own.passes.extend(ps);
                let limit = crate::field::lattice_limit(h.unit) as u32;
                (0, 0, limit, at, count)
            }
            Predictor::Differences => (1, (h.axes[0] as u32) << pad, 0, 0, 0),
        };
        // The prefix sums' block carries (`gpu::line_sum`).
        let carry_at = self.words;
        if predictor == 1 {
            self.words = align(self.words + carry_words(shape, axes));
        }
        plan.arrays.push(BoundedArray {
            count: n as u32,
            shape0: shape[0],
            shape1: shape[1],
            shape2: shape[2],
            shape3: shape[3],
            predictor,
            axes,
            words: u32_of(res_at, "error-bounded words")?,
            out_word: u32_of(self.output, "error-bounded output words")?,
            runs: u32_of(self.runs.len() as u64, "error-bounded runs")?,
            run_count: u32_of(layout.runs.len() as u64, "error-bounded runs")?,
            offset_bits: h.offset.to_bits(),
            unit_bits: h.unit.to_bits(),
            limit,
            passes,
            pass_count,
            file: local,
            carry: u32_of(carry_at, "error-bounded words")?,
            ..Default::default()
        });
        for r in &layout.runs {
            self.runs.extend([r.start, r.len, r.bits]);
        }
        self.output = align(self.output + n);
        plan.headers.push(layout.header);
        Ok(())
    }

    /// The finished sub-batch: the runs after the decode tables, one zero input word.
    fn finish(mut self) -> Result<BoundedPlan> {
        let plan = &mut self.plan;
        let runs_at = u32_of(plan.luts.len() as u64, "error-bounded tables")?;
        u32_of(
            plan.luts.len() as u64 + self.runs.len() as u64,
            "error-bounded tables",
        )?;
        for a in &mut plan.arrays {
            a.runs += runs_at;
        }
        plan.luts.extend(self.runs);
        plan.input_words.push(0);
        plan.words = u32_of(self.words, "error-bounded words")?;
        plan.output_words = u32_of(self.output, "error-bounded output words")?;
        plan.own.max_passes = plan.arrays.iter().map(|a| a.pass_count).max().unwrap_or(0);
        Ok(self.plan)
    }
}

/// Checks every file and plans the batch as sub-batches of consecutive files whose every
/// binding fits `limits` (one sub-batch when all fit); their outputs follow each other in
/// one buffer ([`BoundedPlan::output_base`]). The first bad file's error is returned with
/// its index; a file too large for a binding alone is a [`LimitsError::GpuBuffer`].
pub(crate) fn plan_bounded_batches(
    files: &[&[u8]],
    options: &DecodeOptions,
    limits: SplitLimits,
) -> Result<Vec<BoundedPlan>> {
    let mut out = Vec::new();
    let mut b = Builder::default();
    let mut output_base = 0u64;
    for (f, &data) in files.iter().enumerate() {
        let m = b.mark();
        b.add(f, data, options)?;
        let full = b.plan.arrays.len() > MAX_ARRAYS;
        if !full && b.over(limits.max_binding).is_none() {
            continue;
        }
        // A file too large for a binding alone.
        let too_large = |(what, needed)| {
            in_batch(
                f,
                LimitsError::GpuBuffer {
                    what,
                    needed,
                    max: limits.max_binding,
                }
                .into(),
            )
        };
        if b.plan.arrays.len() == 1 {
            return Err(too_large(b.over(limits.max_binding).expect("over a limit")));
        }
        b.rollback(m);
        let mut done = std::mem::take(&mut b).finish()?;
        done.own.output_base = output_base;
        output_base += done.output_words as u64;
        out.push(done);
        b.plan.own.first_file = f;
        b.add(f, data, options)?;
        if let Some(over) = b.over(limits.max_binding) {
            return Err(too_large(over));
        }
    }
    if !b.plan.arrays.is_empty() || out.is_empty() {
        let mut done = b.finish()?;
        done.own.output_base = output_base;
        output_base += done.output_words as u64;
        out.push(done);
    }
    if output_base * 4 > limits.max_buffer {
        return Err(LimitsError::GpuBuffer {
            what: "error-bounded output buffer",
            needed: output_base * 4,
            max: limits.max_buffer,
        }
        .into());
    }
    Ok(out)
}

/// Checks every file and plans them as one batch (no limits).
#[cfg(test)]
pub(crate) fn plan_bounded(files: &[&[u8]], options: &DecodeOptions) -> Result<BoundedPlan> {
    let mut plans = plan_bounded_batches(files, options, SplitLimits::NONE)?;
    assert_eq!(plans.len(), 1, "one batch without limits");
    Ok(plans.remove(0))
}

/// The twin's pipeline over a plan (what the GPU runs, one stage after another): the output
/// words and the per-file error flags.
#[cfg(test)]
pub(crate) fn run_twin(plan: &BoundedPlan) -> (Vec<u32>, Vec<u32>) {
    use crate::gpu::cpu_twin::bounded as twin;
    let (words, mut errors) = plan.twin_decode(twin::PAIR_TOKENS);
    let mut output = vec![0u32; plan.output_words as usize];
    for j in 0..plan.own.max_passes {
        twin::lattice_pass(
            &words,
            &mut errors,
            &plan.arrays,
            &plan.own.passes,
            &mut output,
            j,
        );
    }
    twin::finish(&plan.luts, &words, &mut errors, &plan.arrays, &mut output);
    (output, errors)
}

#[cfg(test)]
#[path = "gpu_tests.rs"]
pub(super) mod tests;
