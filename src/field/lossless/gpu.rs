//! The GPU plan of lossless float arrays: every file is checked on the CPU as the CPU decoder
//! checks it (header, limits, CRC, runs, chunk table, every chunk's head), then turned into
//! the tables `shaders/lossless.wgsl` reads: the files' bytes as words, one
//! [`LosslessSegment`](crate::gpu::abi::LosslessSegment) per segment with its decode table (and, past [`SEGMENT_ROUND`](crate::gpu::abi::SEGMENT_ROUND)
//! values, its place between rounds in the scratch words), one [`LosslessArray`] per file
//! (with its prefix sums' block carries in the scratch words) and the exception runs, for
//! the whole batch or in sub-batches that each fit the device's
//! bindings ([`plan_lossless_batches`]). Stream errors are left to the GPU, which reports them
//! per file.

use super::format::{parse_chunk, parse_layout};
use super::LosslessHeader;
use crate::decode::DecodeOptions;
use crate::error::Result;
use crate::field::core::container::Stream;
#[cfg(test)]
use crate::field::core::gpu::segment_rounds;
use crate::field::core::gpu::{
    align, in_batch, padded_shape, push_file, push_stream, u32_of, ArrayPlan, PlanMark,
    StreamPlace, TableNames,
};
use crate::gpu::abi::LosslessArray;
use crate::gpu::line_sum::carry_words;

/// The tables of one batch of lossless arrays, in the shader's binding order.
pub(crate) type LosslessPlan = ArrayPlan<LosslessArray, LosslessHeader, LosslessRuns>;

/// The lossless plan's own table.
#[derive(Debug, Default)]
pub(crate) struct LosslessRuns {
    /// The exception runs, 3 words each (start, length, bits).
    pub runs: Vec<u32>,
}

/// Checks every file and plans its tables as one batch; the first bad file's error is
/// returned with its index.
#[cfg(test)]
pub(crate) fn plan_lossless(files: &[&[u8]], options: &DecodeOptions) -> Result<LosslessPlan> {
    let mut plan = LosslessPlan::default();
    for (f, &data) in files.iter().enumerate() {
        plan_file(&mut plan, f, f as u32, data, options)?;
    }
    plan.input_words.push(0);
    Ok(plan)
}

/// Checks every file and plans its tables in sub-batches whose tables each pass `fits`
/// (with the trailing input word): consecutive files, as many to a sub-batch as fit. Returns
/// each sub-batch's first file and plan; the first bad file's error is returned with its
/// index in `files`. A file that does not fit alone gets a sub-batch of its own (the
/// dispatch then refuses it with the limit it passes).
pub(crate) fn plan_lossless_batches(
    files: &[&[u8]],
    options: &DecodeOptions,
    fits: impl Fn(&LosslessPlan) -> bool,
) -> Result<Vec<(usize, LosslessPlan)>> {
    let mut out: Vec<(usize, LosslessPlan)> = Vec::new();
    let mut plan = LosslessPlan::default();
    let mut first = 0;
    for (f, &data) in files.iter().enumerate() {
        let mark = mark(&plan);
        plan_file(&mut plan, f, (f - first) as u32, data, options)?;
        plan.input_words.push(0);
        let ok = fits(&plan);
        plan.input_words.pop();
        if !ok && f > first {
            rewind(&mut plan, mark);
            plan.input_words.push(0);
            out.push((first, std::mem::take(&mut plan)));
            first = f;
            plan_file(&mut plan, f, 0, data, options)?;
        }
    }
    if !files.is_empty() {
        plan.input_words.push(0);
        out.push((first, plan));
    }
    Ok(out)
}

/// Where a plan's tables end, to undo a file's planning.
fn mark(plan: &LosslessPlan) -> (PlanMark, usize) {
    (plan.mark(), plan.own.runs.len())
}

fn rewind(plan: &mut LosslessPlan, (shared, runs): (PlanMark, usize)) {
    plan.rewind(shared);
    plan.own.runs.truncate(runs);
}

/// The lossless tables' names in errors.
const NAMES: TableNames = TableNames {
    luts: "lossless decode tables",
    input: "lossless input bytes",
    words: "lossless scratch words",
};

/// Checks file `f` (`data`) and appends its tables to `plan`, its error flags in slot
/// `slot`.
fn plan_file(
    plan: &mut LosslessPlan,
    f: usize,
    slot: u32,
    data: &[u8],
    options: &DecodeOptions,
) -> Result<()> {
    let layout = parse_layout(data, options).map_err(|e| in_batch(f, e))?;
    let h = &layout.header;
    let n = h.len();
    let width = h.dtype.bits();
    let file_byte = push_file(&mut plan.input_words, data);
    let base = |c: &[u8]| c.as_ptr() as usize - data.as_ptr() as usize;
    let res_at = plan.words as u64;
    let mut words = align(res_at + n);
    let mut adjust_at = u32::MAX;
    let mut streams: Vec<(Stream<'_>, u64, u32, u64)> = Vec::new();
    let chunk = 1u64 << h.chunk_log2;
    for (c, &bytes) in layout.chunks.iter().enumerate() {
        let cl = parse_chunk(bytes, base(bytes), h).map_err(|e| in_batch(f, e.into()))?;
        let first = c as u64 * chunk;
        let m = chunk.min(n - first);
        streams.push((cl.residuals, res_at + first, width, m));
        if let Some(s) = cl.adjust {
            if adjust_at == u32::MAX {
                adjust_at = u32_of(words, "lossless scratch words")?;
                words = align(words + n);
            }
            streams.push((s, adjust_at as u64 + first, 32, m));
        }
    }
    for (s, out, width, m) in streams {
        let at = StreamPlace {
            f,
            slot,
            data,
            file_byte,
            out,
            m,
            width,
        };
        push_stream(
            &s,
            &at,
            &mut plan.luts,
            &mut plan.segments,
            &mut words,
            &NAMES,
        )?;
    }
    let (shape, pad) = padded_shape(&h.shape);
    // Bits 0-3 the padded axes differenced once, bits 4-7 those differenced again.
    let axes = (h.axes as u32) << pad | ((h.axes2 as u32) << pad) << 4;
    let carry = u32_of(words, "lossless scratch words")?;
    words = align(words + carry_words(shape, axes));
    let per = 32 / width as u64;
    plan.arrays.push(LosslessArray {
        count: n as u32,
        width,
        shape0: shape[0],
        shape1: shape[1],
        shape2: shape[2],
        shape3: shape[3],
        axes,
        words: u32_of(res_at, "lossless scratch words")?,
        adjust: adjust_at,
        mult_base: h.mult_base.map_or(0, f32::to_bits),
        runs: u32_of(plan.own.runs.len() as u64, "lossless runs")?,
        run_count: u32_of(layout.runs.len() as u64, "lossless runs")?,
        out_word: plan.output_words,
        file: slot,
        carry,
        table: if h.table.is_empty() {
            u32::MAX
        } else {
            u32_of(
                (plan.own.runs.len() + 3 * layout.runs.len()) as u64,
                "lossless runs",
            )?
        },
    });
    for r in &layout.runs {
        plan.own.runs.extend([r.start, r.len, r.bits]);
    }
    if !h.table.is_empty() {
        plan.own.runs.push(h.table.len() as u32);
        plan.own.runs.extend_from_slice(&h.table);
    }
    plan.words = u32_of(words, "lossless scratch words")?;
    let output = align(plan.output_words as u64 + n.div_ceil(per));
    plan.output_words = u32_of(output, "lossless output words")?;
    plan.headers.push(layout.header);
    Ok(())
}

/// The twin's pipeline over a plan (what the GPU runs, one stage after another): the output
/// words and the per-file error flags.
#[cfg(test)]
pub(crate) fn run_twin(plan: &LosslessPlan) -> (Vec<u32>, Vec<u32>) {
    use crate::gpu::cpu_twin::lossless as twin;
    let (words, mut errors) = plan.twin_decode(twin::PAIR_TOKENS);
    let mut output = vec![0u32; plan.output_words as usize];
    twin::finish(
        &plan.arrays,
        &words,
        &plan.own.runs,
        &mut output,
        &mut errors,
    );
    (output, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::field::lossless::{decode_lossless, encode_lossless, FloatSlice, LosslessOptions};

    /// A smooth field with a decimal grid, NaN payloads, -0.0, infinities, subnormals and a
    /// fill value sprinkled in.
    fn values(n: usize, decimal: bool) -> Vec<f32> {
        (0..n)
            .map(|i| {
                let x = i as f32 * 0.013;
                let v = (x.sin() * 40.0 + (i % 7) as f32 * 0.5).round() / 10.0;
                match i % 97 {
                    3 => f32::from_bits(0x7fc0_0001 + i as u32 % 5),
                    5 => -0.0,
                    7 if !decimal => f32::INFINITY,
                    11 if !decimal => f32::from_bits(1 + i as u32 % 300),
                    13 => -9999.0,
                    _ if decimal => v,
                    _ => v + x * 1e-3,
                }
            })
            .collect()
    }

    fn check(files: &[Vec<u8>]) {
        let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
        let o = DecodeOptions::default();
        let plan = plan_lossless(&refs, &o).expect("plan");
        let (output, errors) = run_twin(&plan);
        for (f, file) in files.iter().enumerate() {
            assert_eq!(errors[f], 0, "file {f}: error flags");
            let (_, want) = decode_lossless(file, &o).expect("cpu decode");
            let want = want.as_bytes();
            let a = &plan.arrays[f];
            let got: &[u8] = bytemuck::cast_slice(&output[a.out_word as usize..]);
            assert!(
                got[..want.len()] == want[..],
                "file {f}: twin differs from the CPU"
            );
        }
    }

    #[test]
    fn twin_matches_the_cpu_decoder() {
        let mut files = Vec::new();
        let shapes: [&[u32]; 5] = [
            &[5000],
            &[61, 83],
            &[9, 17, 23],
            &[3, 5, 7, 11],
            &[1, 1, 300],
        ];
        for shape in shapes {
            let n = shape.iter().product::<u32>() as usize;
            for decimal in [false, true] {
                let v = values(n, decimal);
                let (all, last) = ((1u8 << shape.len()) - 1, 1u8 << (shape.len() - 1));
                for (axes, axes2) in [
                    (None, None),
                    (Some(0), None),
                    (Some(all), None),
                    (Some(all), Some(last)),
                    (Some(all), Some(all)),
                ] {
                    let opts = LosslessOptions {
                        fill_value: Some((-9999.0f32).to_bits()),
                        axes,
                        axes2,
                        chunk_log2: 10,
                        segments: 5,
                        ..Default::default()
                    };
                    files.push(encode_lossless(FloatSlice::F32(&v), shape, &opts).expect("enc"));
                }
                let h16: Vec<u16> = v.iter().map(|x| (x.to_bits() >> 16) as u16).collect();
                let f16: Vec<u16> = v
                    .iter()
                    .map(|x| ((x.to_bits() >> 16) as u16) ^ (x.to_bits() as u16 & 0x3ff))
                    .collect();
                let opts = LosslessOptions {
                    chunk_log2: 9,
                    ..Default::default()
                };
                files.push(encode_lossless(FloatSlice::BF16(&h16), shape, &opts).expect("enc"));
                files.push(encode_lossless(FloatSlice::F16(&f16), shape, &opts).expect("enc"));
            }
        }
        // The batch covers runs, several chunks a file and every axis set tried.
        let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
        let plan = plan_lossless(&refs, &DecodeOptions::default()).expect("plan");
        assert!(plan.arrays.iter().any(|a| a.run_count > 0), "some runs");
        assert!(plan.segments.len() > 5 * 2 * files.len(), "several chunks");
        assert!(plan.arrays.iter().any(|a| a.axes == 0b1111), "4-D Lorenzo");
        assert!(
            plan.arrays.iter().any(|a| a.axes == 0b1111_1111),
            "4-D second differences"
        );
        // Every file alone, then all of them in one batch.
        for f in &files {
            check(std::slice::from_ref(f));
        }
        check(&files);
    }

    #[test]
    fn float_mult_arrays_decode_on_the_twin() {
        let v: Vec<f32> = (0..20000)
            .map(|i| ((i as f32 * 0.01).sin() * 1000.0).round() / 100.0)
            .collect();
        let file = encode_lossless(
            FloatSlice::F32(&v),
            &[100, 200],
            &LosslessOptions::default(),
        )
        .expect("enc");
        let h = super::super::parse_lossless(&file).expect("header");
        assert!(
            h.mult_base.is_some(),
            "the encoder chose float-mult for a decimal grid"
        );
        let plan = plan_lossless(&[&file], &DecodeOptions::default()).expect("plan");
        assert_ne!(plan.arrays[0].adjust, u32::MAX, "adjustments present");
        check(&[file]);
    }

    /// Value-table arrays (unpacked int16 on a coarse grid, with runs; float32, float16,
    /// bfloat16) decode on the twin as on the CPU, with the table after the runs; an index
    /// past a shortened table raises the file's VALUE flag.
    #[test]
    fn value_table_arrays_decode_on_the_twin() {
        let v: Vec<f32> = (0..30_000)
            .map(|i| match i % 211 {
                7 => f32::NAN,
                9 => -9999.0,
                _ => {
                    let q = ((i as f64 * 0.003).sin() * 400.0).round() * 24.0;
                    (q * -0.001_572_704_938 + 26.968_75) as f32
                }
            })
            .collect();
        let opts = LosslessOptions {
            fill_value: Some((-9999.0f32).to_bits()),
            chunk_log2: 12,
            ..Default::default()
        };
        let file = encode_lossless(FloatSlice::F32(&v), &[150, 200], &opts).expect("enc");
        let h = super::super::parse_lossless(&file).expect("header");
        assert!(!h.table.is_empty(), "the encoder chose a value table");
        let pick = [0x3f80u16, 0xc2c8, 0x4700, 0x0001, 0x7f80, 0x8000, 0x7fc3];
        let bf: Vec<u16> = (0..5000).map(|i| pick[(i * i / 7) % 7]).collect();
        let b16 = encode_lossless(FloatSlice::BF16(&bf), &[50, 100], &opts_16()).expect("enc");
        assert!(!super::super::parse_lossless(&b16).unwrap().table.is_empty());
        let plan = plan_lossless(&[&file, &b16], &DecodeOptions::default()).expect("plan");
        let a = &plan.arrays[0];
        assert!(a.run_count > 0 && a.table == a.runs + 3 * a.run_count);
        assert_eq!(plan.own.runs[a.table as usize] as usize, h.table.len());
        check(&[file.clone(), b16]);
        // One entry fewer: the largest value's index is past the table.
        let old = h.header_len() as usize - 4 * h.chunks() as usize;
        let mut h2 = h.clone();
        h2.table.pop();
        let mut short = h2.to_bytes();
        short.extend_from_slice(&file[old..file.len() - 4]);
        let crc = crc32fast::hash(&short);
        short.extend_from_slice(&crc.to_le_bytes());
        assert!(decode_lossless(&short, &DecodeOptions::default()).is_err());
        let plan = plan_lossless(&[&short], &DecodeOptions::default()).expect("plan");
        let (_, errors) = run_twin(&plan);
        assert_eq!(errors[0], crate::gpu::abi::flags::VALUE);
    }

    fn opts_16() -> LosslessOptions {
        LosslessOptions {
            chunk_log2: 9,
            ..Default::default()
        }
    }

    /// Lines past one block and a segment past one round (chunk 2^20, one segment, long
    /// zero runs): the plan gives the segment its 3 state words and the array its carries,
    /// and the twin's rounds and blocked sums give the CPU decoder's bytes.
    #[test]
    fn long_lines_and_segments_decode_on_the_twin() {
        let mut v = values(1 << 20, false);
        v[200_000..300_000].fill(0.0);
        let opts = LosslessOptions {
            chunk_log2: 20,
            segments: 1,
            ..Default::default()
        };
        let long = encode_lossless(FloatSlice::F32(&v), &[1 << 20], &opts).expect("enc");
        let wide = encode_lossless(
            FloatSlice::F32(&v[..3 * 70_000]),
            &[3, 70_000],
            &LosslessOptions {
                axes: Some(0b11),
                ..Default::default()
            },
        )
        .expect("enc");
        let plan = plan_lossless(&[&long, &wide], &DecodeOptions::default()).expect("plan");
        assert_eq!(segment_rounds(&plan.segments), 32);
        assert_ne!(plan.segments[0].state, u32::MAX, "the long segment's state");
        assert!(plan.segments[1..].iter().all(|s| s.state == u32::MAX));
        let carries =
            |a: &LosslessArray| carry_words([a.shape0, a.shape1, a.shape2, a.shape3], a.axes);
        assert_eq!(carries(&plan.arrays[0]), 256);
        assert_eq!(carries(&plan.arrays[1]), 3 * 18);
        check(&[long, wide]);
    }

    /// Sub-batches under a small output binding: each passes the limit, files stay in
    /// order, every array decodes on the twin as in one batch, and a bad file's error names
    /// its index in the whole batch.
    #[test]
    fn sub_batches_split_where_the_tables_outgrow_a_binding() {
        let files: Vec<Vec<u8>> = (0..7)
            .map(|k| {
                let v = values(3000 + 500 * k, k % 2 == 0);
                let opts = LosslessOptions {
                    chunk_log2: 10,
                    ..Default::default()
                };
                encode_lossless(FloatSlice::F32(&v), &[v.len() as u32], &opts).expect("enc")
            })
            .collect();
        let refs: Vec<&[u8]> = files.iter().map(|f| &f[..]).collect();
        let o = DecodeOptions::default();
        // At most 8192 output words (32 KiB) to a sub-batch: two arrays at most.
        let fits = |p: &LosslessPlan| p.output_words <= 8192;
        let batches = plan_lossless_batches(&refs, &o, fits).expect("plan");
        assert!(batches.len() >= 4, "{} sub-batches", batches.len());
        let mut next = 0;
        for (first, plan) in &batches {
            assert_eq!(*first, next);
            assert!(fits(plan));
            assert_eq!(plan.input_words.last(), Some(&0), "the trailing word");
            let (output, errors) = run_twin(plan);
            for (k, a) in plan.arrays.iter().enumerate() {
                assert_eq!((a.file, errors[k]), (k as u32, 0));
                let (_, want) = decode_lossless(refs[first + k], &o).expect("cpu");
                let got: &[u8] = bytemuck::cast_slice(&output[a.out_word as usize..]);
                assert!(
                    got[..want.as_bytes().len()] == *want.as_bytes(),
                    "file {}",
                    first + k
                );
            }
            next = first + plan.arrays.len();
        }
        assert_eq!(next, files.len());
        // Nothing splits when everything fits: the same tables as one batch.
        let one = plan_lossless_batches(&refs, &o, |_| true).expect("plan");
        let whole = plan_lossless(&refs, &o).expect("plan");
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].1.segments, whole.segments);
        assert_eq!(one[0].1.arrays, whole.arrays);
        assert_eq!(one[0].1.input_words, whole.input_words);
        // A bad file in a later sub-batch is named by its index in the batch.
        let mut bad = files[5].clone();
        bad.truncate(bad.len() / 2);
        let mut refs = refs.clone();
        refs[5] = &bad;
        match plan_lossless_batches(&refs, &o, fits) {
            Err(Error::InBatch { image, .. }) => assert_eq!(image, 5),
            other => panic!("{:?}", other.map(|b| b.len())),
        }
        assert!(plan_lossless_batches(&[], &o, fits)
            .expect("empty")
            .is_empty());
    }
}
