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
