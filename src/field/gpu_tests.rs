//! The fields stage's kernel on the GPU with hand-made job tables (empty jobs among full ones),
//! against the CPU decoder. It lives with the fields stage, not in the engine's tests: the
//! engine knows no fields. Skips without an adapter unless `CI=true` (see `gpu()` in tests/common/gpu_support.rs).

use crate::decode::DecodeOptions;
use crate::gpu::tests::support::gpu;

/// A job table with empty jobs (fields whose job has no values): they take no workgroups
/// and write nothing, and every other field, found by its workgroups around them, decodes
/// bit for bit as on the CPU; a table of empty jobs only dispatches nothing.
#[test]
fn empty_jobs_in_a_table_write_nothing_and_move_nothing() {
    use crate::field::{decode_field, encode_field, parse_field, Bound, FieldOptions};
    use crate::gpu::abi::FieldJob;
    use crate::gpu::bindings::BindLimits;
    use crate::gpu::fields::{dispatch, FieldDispatch};
    use crate::gpu::readback::read_buffer;
    use crate::gpu::OutputLayout;
    let Some(gpu) = gpu() else { return };
    let o = FieldOptions::new(Bound::Absolute(1e-3));
    let files: Vec<Vec<u8>> = [(5u32, 7u32), (30, 40), (1, 3), (12, 9), (2, 2)]
        .iter()
        .enumerate()
        .map(|(k, &(ny, nx))| {
            let mut v: Vec<f32> = (0..ny * nx)
                .map(|i| (i as f32 * 0.37 + k as f32).sin())
                .collect();
            v[0] = f32::NAN;
            encode_field(&v, &[ny, nx], &o).unwrap()
        })
        .collect();
    let layouts: Vec<_> = files.iter().map(|f| parse_field(f).unwrap()).collect();
    let limits = BindLimits::of(gpu.device());
    let plan = crate::field::gpu::plan_fields(&layouts, &limits).unwrap();
    let images: Vec<&[u8]> = layouts.iter().map(|l| l.image).collect();
    let bins = gpu
        .decode_batch(&images, OutputLayout::Interleaved)
        .unwrap();
    for empty in [
        [true, false, true, false, true],
        [false, true, true, false, false],
        [true; 5],
    ] {
        let fields: Vec<FieldDispatch> = layouts
            .iter()
            .enumerate()
            .map(|(k, l)| {
                let count = if empty[k] { 0 } else { l.header.len() };
                FieldDispatch {
                    job: FieldJob {
                        count: count as u32,
                        run_count: l.runs.len() as u32,
                        offset_bits: l.header.offset.to_bits(),
                        bin_bits: l.header.bin_width.to_bits(),
                        ..Default::default()
                    },
                    count,
                    run_count: l.runs.len() as u64,
                    run_offset: plan.run_base[k],
                    offset: plan.offsets[k],
                }
            })
            .collect();
        let out = dispatch(gpu, &bins, &fields, &plan.run_words, plan.total, &limits).unwrap();
        let bytes = read_buffer(gpu.device(), gpu.queue(), &out, 0, plan.total).unwrap();
        let values: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes);
        for (k, f) in files.iter().enumerate() {
            let (_, cpu) = decode_field(f, &DecodeOptions::default()).unwrap();
            let at = plan.offsets[k] as usize / 4;
            let got = &values[at..at + cpu.len()];
            if empty[k] {
                assert!(
                    got.iter().all(|v| v.to_bits() == 0),
                    "empty field {k} written"
                );
            } else {
                assert!(
                    got.iter()
                        .zip(&cpu)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "field {k} ({empty:?}): GPU and CPU differ"
                );
            }
        }
    }
}

/// A batch mixing every version (a version 1 field, the exact file a too-fine bound gives, a
/// version 3 array, a float16 lossless array, then the first again) decodes on the GPU to
/// the CPU's bytes, each file where its index says; a damaged file is reported by its index
/// in the whole batch, not in its version's group.
#[test]
fn float_arrays_of_every_version_decode_in_one_call_as_on_the_cpu() {
    use crate::field::gpu::decode_float_arrays;
    use crate::field::*;
    let Some(gpu) = gpu() else { return };
    let o = DecodeOptions::default();
    let v: Vec<f32> = (0..900).map(|i| (i as f32 * 0.13).cos() * 3e4).collect();
    let v1 = encode_field(&v, &[30, 30], &FieldOptions::new(Bound::Absolute(10.0))).unwrap();
    let exact = encode_field(&v, &[30, 30], &FieldOptions::new(Bound::Absolute(1e-5))).unwrap();
    let v3 = encode_bounded(&v, &[9, 100], &BoundedOptions::new(0.5)).unwrap();
    let halves: Vec<u16> = (0..96u16).map(|i| 0x3800 + i * 29).collect();
    let f16 =
        encode_lossless(FloatSlice::F16(&halves), &[96], &LosslessOptions::default()).unwrap();
    let files: Vec<&[u8]> = vec![&v1, &exact, &v3, &f16, &v1];
    let batch = decode_float_arrays(gpu, &files, &o).unwrap();
    assert_eq!(
        batch
            .headers
            .iter()
            .map(|h| h.version())
            .collect::<Vec<_>>(),
        [1, 2, 3, 2, 1]
    );
    for (i, f) in files.iter().enumerate() {
        let (h, cpu) = decode_float_array(f, &o).unwrap();
        assert_eq!(batch.headers[i], h, "file {i}");
        assert_eq!(batch.read_back(i).unwrap(), cpu, "file {i}");
        let (_, _, len) = batch.place(i);
        assert_eq!(len as usize, cpu.as_bytes().len());
    }
    assert!(batch.submissions() >= 4);
    let mut damaged = v3.clone();
    let at = damaged.len() - 20;
    damaged[at] ^= 0xff;
    let files: Vec<&[u8]> = vec![&v1, &exact, &v1, &damaged];
    match decode_float_arrays(gpu, &files, &o) {
        Err(crate::Error::InBatch { image, .. }) => assert_eq!(image, 3),
        other => panic!("expected file 3's error, got {other:?}"),
    }
}

/// The float kernels' pooled buffers: a second batch of the same arrays creates none, and a
/// smaller batch after a larger one (pooled buffers holding the larger one's tables past
/// the smaller one's bindings) decodes bit for bit as on the CPU, lossless and error-bounded.
#[test]
fn pooled_float_buffers_are_reused_and_a_smaller_batch_sees_only_its_own_tables() {
    use crate::field::gpu::decode_float_arrays;
    use crate::field::*;
    let Some(gpu) = gpu() else { return };
    let o = DecodeOptions::default();
    let array = |n: usize, k: f32| -> Vec<f32> {
        (0..n)
            .map(|i| (i as f32 * 0.011 * k).sin() * 1e3 + k)
            .collect()
    };
    let lossless = |v: &[f32], shape: &[u32]| {
        encode_lossless(FloatSlice::F32(v), shape, &LosslessOptions::default()).unwrap()
    };
    let bounded =
        |v: &[f32], shape: &[u32]| encode_bounded(v, shape, &BoundedOptions::new(0.01)).unwrap();
    let big = [
        lossless(&array(200_000, 1.0), &[400, 500]),
        bounded(&array(150_000, 2.0), &[300, 500]),
        lossless(&array(30_000, 3.0), &[30_000]),
    ];
    let mut small_v = array(700, 4.0);
    small_v[5] = f32::NAN;
    let small = [lossless(&small_v, &[7, 100]), bounded(&small_v, &[700])];
    let run = |files: &[Vec<u8>]| {
        let refs: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
        let batch = decode_float_arrays(gpu, &refs, &o).unwrap();
        for (i, f) in refs.iter().enumerate() {
            let cpu = decode_float_array(f, &o).unwrap().1;
            assert_eq!(
                batch.read_back(i).unwrap().as_bytes(),
                cpu.as_bytes(),
                "{i}"
            );
        }
    };
    run(&big);
    let after_first = gpu.allocations();
    run(&big);
    run(&small);
    run(&big);
    assert_eq!(
        gpu.allocations(),
        after_first,
        "pooled buffers were created again"
    );
}
