//! The GPU plan of error-bounded arrays (`.l3f` version 3): every file is checked on the CPU
//! as the CPU decoder checks it (header, limits, CRC, runs, chunk table, every chunk's head),
//! then turned into the tables `shaders/bounded.wgsl` reads: the files' bytes as words, one
//! [`LosslessSegment`] per segment, the decode tables and exception runs (one binding), one
//! [`BoundedArray`] per file and, for the lattice predictor, one [`BoundedPass`] per pass
//! (value 0 first). Stream and value errors are left to the GPU, which reports them per file.

use super::format::{parse_chunk, parse_layout, Layout};
use super::{BoundedHeader, Predictor};
use crate::decode::DecodeOptions;
use crate::error::{Error, FormatError, LimitsError, Result};
use crate::field::lossless::code::{canonical, LUT_SIZE};
use crate::field::lossless::format::segment_range;
use crate::gpu::abi::{
    BoundedArray, BoundedPass, LosslessSegment, PASS_CUBIC, PASS_LINEAR, PASS_ORIGIN,
};

/// The tables of one batch of error-bounded arrays, in the shader's binding order.
#[derive(Debug, Default)]
pub(crate) struct BoundedPlan {
    /// The files' bytes as little-endian words, each file from a word boundary, plus one
    /// zero word (a bit read near the end may touch the next word).
    pub input_words: Vec<u32>,
    /// One entry per segment of every chunk.
    pub segments: Vec<LosslessSegment>,
    /// The chunks' decode tables (2^11 entries each: code length | token << 4), then the
    /// exception runs (3 words each: start, length, bits).
    pub tables: Vec<u32>,
    /// Words of the residual binding.
    pub words: u32,
    /// One entry per file.
    pub arrays: Vec<BoundedArray>,
    /// Every lattice array's passes.
    pub passes: Vec<BoundedPass>,
    /// The most passes of any array: the `lattice_pass` dispatches.
    pub max_passes: u32,
    /// Words of the output binding.
    pub output_words: u32,
    /// Each file's header.
    pub headers: Vec<BoundedHeader>,
}

/// Words of a residual or output region: every array starts at a multiple of 64 words
/// (256 bytes, the storage-offset alignment).
const REGION_ALIGN: u64 = 64;

fn align(n: u64) -> u64 {
    n.div_ceil(REGION_ALIGN) * REGION_ALIGN
}

fn u32_of(v: u64, what: &'static str) -> Result<u32> {
    u32::try_from(v).map_err(|_| {
        LimitsError::GpuBuffer {
            what,
            needed: v,
            max: u32::MAX as u64,
        }
        .into()
    })
}

fn in_batch(f: usize, e: Error) -> Error {
    Error::InBatch {
        image: f,
        error: Box::new(e),
    }
}

/// The decode table of validated code lengths as the shader reads it: entry `i` decodes a
/// stream whose next 11 bits are `i`, as code length | token << 4 (a lone used token:
/// length 0).
fn push_lut(lengths: &[u8], tables: &mut Vec<u32>) {
    let at = tables.len();
    tables.resize(at + LUT_SIZE, 0);
    let lut = &mut tables[at..];
    if lengths.iter().filter(|&&l| l > 0).count() == 1 {
        let t = lengths.iter().position(|&l| l > 0).expect("one used token");
        lut.fill((t as u32) << 4);
        return;
    }
    for (t, &(code, l)) in canonical(lengths).iter().enumerate() {
        if l == 0 {
            continue;
        }
        let mut i = code as usize;
        while i < LUT_SIZE {
            lut[i] = l | (t as u32) << 4;
            i += 1 << l;
        }
    }
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

/// Checks every file and plans its tables; the first bad file's error is returned with its
/// index.
pub(crate) fn plan_bounded(files: &[&[u8]], options: &DecodeOptions) -> Result<BoundedPlan> {
    let mut plan = BoundedPlan::default();
    let mut runs: Vec<u32> = Vec::new();
    let (mut words, mut output) = (0u64, 0u64);
    for (f, &data) in files.iter().enumerate() {
        let layout: Layout<'_> = parse_layout(data, options).map_err(|e| in_batch(f, e))?;
        let h = &layout.header;
        let n = h.len();
        let file_byte = plan.input_words.len() as u64 * 4;
        plan.input_words.extend(data.chunks(4).map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(w)
        }));
        let base = |c: &[u8]| (c.as_ptr() as usize - data.as_ptr() as usize) as u64;
        let res_at = words;
        words = align(words + n);
        let chunk = 1u64 << h.chunk_log2;
        let segs = h.segments as usize;
        for (c, &bytes) in layout.chunks.iter().enumerate() {
            let cl = parse_chunk(bytes, base(bytes) as usize, segs)
                .map_err(|e| in_batch(f, e.into()))?;
            let first = c as u64 * chunk;
            let m = chunk.min(n - first);
            let lut = u32_of(plan.tables.len() as u64, "error-bounded decode tables")?;
            push_lut(&cl.lengths, &mut plan.tables);
            for (k, seg) in cl.segments.iter().enumerate() {
                // No segment of at most 2^20 values needs 2^28 bytes (41 bits a symbol at
                // most); the CPU decoder refuses such a segment at its end, and the shader
                // counts its bits in u32.
                if seg.len() >= 1 << 28 {
                    return Err(in_batch(
                        f,
                        FormatError::InvalidHeader {
                            field: "segment",
                            offset: base(seg),
                            value: seg.len() as u64,
                            reason: "longer than any segment's symbols",
                        }
                        .into(),
                    ));
                }
                let r = segment_range(m as usize, segs, k);
                plan.segments.push(LosslessSegment {
                    in_byte: u32_of(file_byte + base(seg), "error-bounded input bytes")?,
                    in_len: seg.len() as u32,
                    out_start: u32_of(res_at + first + r.start as u64, "error-bounded words")?,
                    count: r.len() as u32,
                    lut,
                    width: 32,
                    file: f as u32,
                    pad: 0,
                });
            }
        }
        let mut shape = [1u32; 4];
        let pad = 4 - h.shape.len();
        shape[pad..].copy_from_slice(&h.shape);
        let (predictor, axes, limit, passes, pass_count) = match h.predictor {
            Predictor::Lattice => {
                let ps = lattice_passes(h);
                let at = u32_of(plan.passes.len() as u64, "error-bounded passes")?;
                let count = ps.len() as u32;
                plan.passes.extend(ps);
                let limit = crate::field::lattice_limit(h.unit) as u32;
                (0, 0, limit, at, count)
            }
            Predictor::Differences => (1, (h.axes[0] as u32) << pad, 0, 0, 0),
        };
        plan.max_passes = plan.max_passes.max(pass_count);
        plan.arrays.push(BoundedArray {
            count: n as u32,
            shape0: shape[0],
            shape1: shape[1],
            shape2: shape[2],
            shape3: shape[3],
            predictor,
            axes,
            words: u32_of(res_at, "error-bounded words")?,
            out_word: u32_of(output, "error-bounded output words")?,
            runs: u32_of(runs.len() as u64, "error-bounded runs")?,
            run_count: u32_of(layout.runs.len() as u64, "error-bounded runs")?,
            offset_bits: h.offset.to_bits(),
            unit_bits: h.unit.to_bits(),
            limit,
            passes,
            pass_count,
            file: f as u32,
            ..Default::default()
        });
        for r in &layout.runs {
            runs.extend([r.start, r.len, r.bits]);
        }
        output = align(output + n);
        plan.headers.push(layout.header);
    }
    // The runs follow the decode tables in one binding.
    let runs_at = u32_of(plan.tables.len() as u64, "error-bounded tables")?;
    u32_of(
        plan.tables.len() as u64 + runs.len() as u64,
        "error-bounded tables",
    )?;
    for a in &mut plan.arrays {
        a.runs += runs_at;
    }
    plan.tables.extend(runs);
    plan.input_words.push(0);
    plan.words = u32_of(words, "error-bounded words")?;
    plan.output_words = u32_of(output, "error-bounded output words")?;
    Ok(plan)
}

/// The twin's pipeline over a plan (what the GPU runs, one stage after another): the output
/// words and the per-file error flags.
#[cfg(test)]
pub(crate) fn run_twin(plan: &BoundedPlan) -> (Vec<u32>, Vec<u32>) {
    use crate::gpu::cpu_twin::bounded as twin;
    let mut words = vec![0u32; plan.words as usize];
    let mut errors = vec![0u32; plan.arrays.len()];
    let mut output = vec![0u32; plan.output_words as usize];
    twin::decode_segments(
        &plan.input_words,
        &plan.segments,
        &plan.tables,
        &mut words,
        &mut errors,
    );
    for axis in 0..4 {
        twin::undiff(&plan.arrays, &mut words, axis);
    }
    for j in 0..plan.max_passes {
        twin::lattice_pass(
            &words,
            &mut errors,
            &plan.arrays,
            &plan.passes,
            &mut output,
            j,
        );
    }
    twin::finish(&plan.tables, &words, &mut errors, &plan.arrays, &mut output);
    (output, errors)
}

#[cfg(test)]
#[path = "gpu_tests.rs"]
mod tests;
