//! The GPU steady state: one batch large enough to fill a big GPU (the inputs' l3 files
//! repeated until the decoded output reaches `--gpu-steady-mb`), decoded several times, with
//! the kernels timed by GPU timestamp queries, next to a copy kernel over a buffer of the same
//! size timed the same way. Output GB/s as a fraction of the copy's is the figure that says
//! how close a decoder is to the memory bandwidth, whatever the GPU.

use anyhow::{anyhow, Result};

use crate::measure::{gpu_wait, stats_of, Stats};
use crate::rows::GpuRow;

/// Copies `words` 16-byte elements from `src` to `dst`, grid-stride: every invocation reads
/// and writes each of its elements once, as a decoder writes its output once.
const COPY_WGSL: &str = r#"
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let stride = n.x * 256u;
    for (var i = gid.x; i < arrayLength(&dst); i = i + stride) {
        dst[i] = src[i];
    }
}
"#;

/// Workgroups of the copy kernel (grid-stride over the buffer).
const COPY_WORKGROUPS: u32 = 8192;

/// Nanoseconds of each of `reps` timed copy-kernel passes over `bytes` bytes (after one
/// untimed warm-up pass), and of as many clears of a buffer that size (`clear_buffer`, which
/// the decoder records before a batch: between the end of one empty timed pass and the
/// beginning of the next).
fn copy_and_clear_ns(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    bytes: u64,
    reps: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("l3-bench copy"),
        source: wgpu::ShaderSource::Wgsl(COPY_WGSL.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("l3-bench copy"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let size = bytes.div_ceil(16) * 16;
    let buffer = |usage| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3-bench copy"),
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let (src, dst) = (
        buffer(wgpu::BufferUsages::STORAGE),
        buffer(wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST),
    );
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: src.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: dst.as_entire_binding(),
            },
        ],
    });
    let copy = timed_ns(device, queue, reps, &|enc, queries| {
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("l3-bench copy"),
            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                query_set: queries,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            }),
        });
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &group, &[]);
        pass.dispatch_workgroups(COPY_WORKGROUPS, 1, 1);
    })?;
    let clear = timed_ns(device, queue, reps, &|enc, queries| {
        let mark = |enc: &mut wgpu::CommandEncoder, begin, end| {
            enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3-bench clear mark"),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: queries,
                    beginning_of_pass_write_index: begin,
                    end_of_pass_write_index: end,
                }),
            });
        };
        mark(enc, None, Some(0));
        enc.clear_buffer(&dst, 0, None);
        mark(enc, Some(1), None);
    })?;
    Ok((copy, clear))
}

/// Nanoseconds between timestamps 0 and 1 that `record` writes, in each of `reps` timed runs
/// after one untimed warm-up run.
fn timed_ns(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    reps: usize,
    record: &dyn Fn(&mut wgpu::CommandEncoder, &wgpu::QuerySet),
) -> Result<Vec<f64>> {
    let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: 2,
    });
    let resolve = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let period = queue.get_timestamp_period() as f64;
    let mut times = Vec::new();
    for rep in 0..=reps {
        let mut enc = device.create_command_encoder(&Default::default());
        record(&mut enc, &queries);
        enc.resolve_query_set(&queries, 0..2, &resolve, 0);
        enc.copy_buffer_to_buffer(
            &resolve,
            0,
            &readback,
            0,
            wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT,
        );
        queue.submit([enc.finish()]);
        readback.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        gpu_wait(device)?;
        let ticks: Vec<u64> = {
            let view = readback
                .get_mapped_range(..)
                .map_err(|e| anyhow!("timestamp map: {e}"))?;
            bytemuck::pod_collect_to_vec(&view[..16])
        };
        readback.unmap();
        if rep > 0 {
            times.push(ticks[1].saturating_sub(ticks[0]) as f64 * period);
        }
    }
    Ok(times)
}

/// The steady-state rows: per batch, the repeated batch's kernels, then the copy kernel of
/// the same output size. `batches` are (label, the inputs' l3 files in one encoding) and
/// `raw` the inputs' decoded sizes.
pub fn steady_rows(
    decoder: &l3::gpu::GpuDecoder,
    batches: &[(String, Vec<Vec<u8>>)],
    raw: &[u64],
    target_bytes: u64,
    reps: usize,
) -> Result<Vec<GpuRow>> {
    let mut rows = Vec::new();
    if !decoder.timing_supported() {
        rows.push(GpuRow::note_only(
            "steady state",
            "skipped: the device has no TIMESTAMP_QUERY",
        ));
        return Ok(rows);
    }
    let one_pass: u64 = raw.iter().sum();
    let copies = target_bytes.div_ceil(one_pass.max(1)).max(1) as usize;
    let output = copies as u64 * one_pass;
    let out = l3::gpu::OutputLayout::Interleaved;
    let (copy_ns, clear_ns) = copy_and_clear_ns(decoder.device(), decoder.queue(), output, reps)?;
    let seconds = |ns: Vec<f64>| stats_of(ns.into_iter().map(|ns| ns * 1e-9).collect());
    let (copy, clear) = (seconds(copy_ns), seconds(clear_ns));
    for (label, files) in batches {
        // The same files `copies` times over: one batch of `output` decoded bytes.
        let refs: Vec<&[u8]> = (0..copies)
            .flat_map(|_| files.iter().map(Vec::as_slice))
            .collect();
        let mut kernels = Vec::new();
        let mut chunks = 0;
        for rep in 0..=reps {
            let (batch, t) = decoder.decode_batch_timed(&refs, out)?;
            drop(batch);
            let t = t.ok_or_else(|| anyhow!("no timings"))?;
            chunks = t.chunks;
            if rep > 0 {
                kernels.push(t.kernels_ns() as f64 * 1e-9);
            }
        }
        let k: Stats = stats_of(kernels);
        rows.push(GpuRow {
            name: format!(
                "steady state: {label}, {} files ({copies}x the inputs), kernels",
                refs.len()
            ),
            bytes: output,
            pixels: 0,
            stats: Some(k),
            note: format!(
                "GPU timestamps, prefix sum + decode, {chunks} chunk(s); {:.1}% of the copy kernel's GB/s",
                100.0 * copy.median / k.median
            ),
        });
    }
    rows.push(GpuRow {
        name: "steady state: copy kernel, same output size".into(),
        bytes: output,
        pixels: 0,
        stats: Some(copy),
        note: "reads and writes every byte once (vec4<u32>, grid-stride); GPU timestamps".into(),
    });
    rows.push(GpuRow {
        name: "steady state: clear of the same output size".into(),
        bytes: output,
        pixels: 0,
        stats: Some(clear),
        note: format!(
            "clear_buffer, as the decoder before each batch (not in the kernels' figure); GPU timestamps around it; {:.1}% of the copy kernel's time",
            100.0 * clear.median / copy.median
        ),
    });
    Ok(rows)
}

/// Side of the synthetic float fields of [`float_steady_rows`].
const FIELD_SIDE: usize = 1024;

/// A smooth float32 field, `FIELD_SIDE` squared, from `seed`: 24 sinusoids whose amplitude
/// falls as the cube of their wavenumber (as the spectra of the device run's tensor fields),
/// plus noise at 1e-4 of the amplitude, so the low bits are not all predictable.
fn smooth_field(seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let waves: Vec<(f64, f64, f64, f64)> = (0..24)
        .map(|_| {
            let (kx, ky) = (1.0 + 15.0 * next(), 1.0 + 15.0 * next());
            let amp = (kx * kx + ky * ky).sqrt().powi(-3);
            (kx, ky, amp, std::f64::consts::TAU * next())
        })
        .collect();
    let n = FIELD_SIDE as f64;
    let mut out = Vec::with_capacity(FIELD_SIDE * FIELD_SIDE);
    for y in 0..FIELD_SIDE {
        for x in 0..FIELD_SIDE {
            let (u, v) = (x as f64 / n, y as f64 / n);
            let s: f64 = waves
                .iter()
                .map(|&(kx, ky, a, p)| a * (std::f64::consts::TAU * (kx * u + ky * v) + p).sin())
                .sum();
            out.push((s * 1e3 + 0.1 * (next() - 0.5)) as f32);
        }
    }
    out
}

/// The float kernels' steady state: lossless (`.l3f` version 2) and error-bounded (version 3,
/// 1e-3 of the range) arrays of [`smooth_field`]s, repeated until the decoded output
/// reaches `target_bytes` (or the device's largest storage binding, which the copy kernel
/// binds whole), decoded `reps` times (after a warm-up) with the decoder's timing
/// on (GPU timestamps around each submission's pass), next to the copy kernel of the same
/// output size.
pub fn float_steady_rows(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    target_bytes: u64,
    reps: usize,
) -> Result<Vec<GpuRow>> {
    use l3::field::{encode_bounded, encode_lossless, BoundedOptions, FloatSlice, LosslessOptions};
    let mut decoder = l3::gpu::GpuDecoder::new(device, queue)?;
    if !decoder.set_timing(true) {
        return Ok(vec![GpuRow::note_only(
            "float steady state",
            "skipped: the device has no TIMESTAMP_QUERY",
        )]);
    }
    let fields: Vec<Vec<f32>> = (0..4).map(smooth_field).collect();
    let shape = [FIELD_SIDE as u32, FIELD_SIDE as u32];
    let mut lossless = Vec::new();
    let mut bounded = Vec::new();
    for f in &fields {
        lossless.push(encode_lossless(
            FloatSlice::F32(f),
            &shape,
            &LosslessOptions::default(),
        )?);
        let (lo, hi) = f
            .iter()
            .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        let bound = 1e-3 * (hi - lo) as f64;
        bounded.push(encode_bounded(f, &shape, &BoundedOptions::new(bound))?);
    }
    let one_pass = (fields.len() * FIELD_SIDE * FIELD_SIDE * 4) as u64;
    // The copy kernel binds the whole output: at most the device's largest storage binding.
    let max_binding = device.limits().max_storage_buffer_binding_size;
    let copies = target_bytes
        .div_ceil(one_pass)
        .min(max_binding / one_pass)
        .max(1) as usize;
    let output = copies as u64 * one_pass;
    let (copy_ns, _) = copy_and_clear_ns(device, queue, output, reps)?;
    let copy = stats_of(copy_ns.into_iter().map(|ns| ns * 1e-9).collect());
    let mut rows = Vec::new();
    for (label, files, is_lossless) in [
        ("lossless float32 (v2)", &lossless, true),
        ("error-bounded 1e-3 (v3)", &bounded, false),
    ] {
        let compressed: usize = files.iter().map(Vec::len).sum();
        let refs: Vec<&[u8]> = (0..copies)
            .flat_map(|_| files.iter().map(Vec::as_slice))
            .collect();
        let mut kernels = Vec::new();
        let mut submissions = 0;
        for rep in 0..=reps {
            let (ns, subs) = if is_lossless {
                let b = l3::field::gpu::decode_lossless_fields(&decoder, &refs)?;
                (b.kernel_ns, b.submissions)
            } else {
                let o = l3::DecodeOptions::default();
                let b = l3::field::gpu::decode_bounded_fields(&decoder, &refs, &o)?;
                (b.kernel_ns, b.submissions)
            };
            submissions = subs;
            if rep > 0 {
                kernels.push(ns.ok_or_else(|| anyhow!("no float timings"))? as f64 * 1e-9);
            }
        }
        let k = stats_of(kernels);
        rows.push(GpuRow {
            name: format!(
                "steady state: l3 {label}, {} arrays of {FIELD_SIDE}x{FIELD_SIDE} ({copies}x 4 fields), kernels",
                refs.len()
            ),
            bytes: output,
            pixels: 0,
            stats: Some(k),
            note: format!(
                "GPU timestamps, every pass of {submissions} submission(s); ratio {:.2}; {:.1}% of the copy kernel's GB/s",
                one_pass as f64 / compressed as f64,
                100.0 * copy.median / k.median
            ),
        });
    }
    rows.push(GpuRow {
        name: "steady state: copy kernel, the float rows' output size".into(),
        bytes: output,
        pixels: 0,
        stats: Some(copy),
        note: "reads and writes every byte once (vec4<u32>, grid-stride); GPU timestamps".into(),
    });
    Ok(rows)
}
