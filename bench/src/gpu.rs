//! The wgpu section: adapter listing, buffer copy and upload bandwidth, GPU decoder rows.

use anyhow::Result;

use l3::{EncodeOptions, Profile};

use crate::args::Args;
use crate::guard::{guard, one_line};
use crate::images::Pixels;
use crate::measure::{gpu_wait, measure, stats_of, Stats};
use crate::rows::{GpuReport, GpuRow};
use crate::steady;

fn wgpu_instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
}

fn adapter_line(info: &wgpu::AdapterInfo) -> String {
    format!(
        "{} ({:?}, {:?}, driver: {} {})",
        info.name, info.backend, info.device_type, info.driver, info.driver_info
    )
}

pub fn list_adapters() -> Vec<String> {
    let instance = wgpu_instance();
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .map(|a| adapter_line(&a.get_info()))
        .collect()
}

/// A device of our own, for the wgpu-only rows when the GPU decoder cannot be created.
fn own_device() -> Result<(wgpu::Device, wgpu::Queue, String)> {
    let adapter = l3::gpu::select_adapter()?;
    let info = adapter.get_info();
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("l3-bench"),
        required_limits: adapter.limits(),
        ..Default::default()
    }))?;
    Ok((device, queue, adapter_line(&info)))
}

/// The wgpu section: copy bandwidth and upload on the decoder's device (or, when the decoder
/// could not be created, on a device of our own), then the GPU decoder's rows.
pub fn bench_gpu(
    decoder: std::result::Result<&l3::gpu::GpuDecoder, &str>,
    images: &[Pixels],
    args: &Args,
) -> Result<GpuReport> {
    let own;
    let (device, queue, adapter) = match decoder {
        Ok(d) => (d.device(), d.queue(), d.adapter_name()),
        Err(_) => {
            own = own_device()?;
            (&own.0, &own.1, own.2.clone())
        }
    };
    let max_buf = device.limits().max_buffer_size;
    let n = images.len();
    let mut rows = Vec::new();

    // Device buffer-to-buffer copy of each image's output size (the bandwidth ceiling of a
    // kernel that reads and writes the output once).
    let mut total = Stats::default();
    let mut bytes = 0u64;
    for p in images {
        let size = (p.bytes.len() as u64).div_ceil(4) * 4;
        if size > max_buf {
            continue;
        }
        let mk = |usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let src = mk(wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST);
        let dst = mk(wgpu::BufferUsages::COPY_DST);
        let (s, ()) = measure(args.reps, args.max_seconds, || {
            let mut enc = device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&src, 0, &dst, 0, size);
            queue.submit([enc.finish()]);
            gpu_wait(device)
        })?;
        total = total.add(s);
        bytes += p.bytes.len() as u64;
    }
    rows.push(GpuRow {
        name: "device buffer-to-buffer copy, output size".into(),
        bytes,
        pixels: 0,
        stats: Some(total),
        note: "per image, submit + wait each".into(),
    });

    // The l3 files of the batch, per profile (encoded with the default options, untimed),
    // and their upload: the file bytes written to one device buffer (what decode_batch
    // uploads).
    let mut batches = Vec::new();
    for profile in [Profile::Fast, Profile::Compact] {
        let options = EncodeOptions {
            profile: l3::ProfileOptions::default_for(profile),
            ..EncodeOptions::default()
        };
        let files: Vec<Vec<u8>> = images
            .iter()
            .map(|p| l3::encode::encode(&p.raw(), &options))
            .collect::<std::result::Result<_, _>>()?;
        let in_bytes: u64 = files.iter().map(|f| f.len() as u64).sum();
        let mut joined = Vec::with_capacity(in_bytes as usize + 4);
        for f in &files {
            joined.extend_from_slice(f);
        }
        joined.resize(joined.len().next_multiple_of(4), 0);
        let mut upload = None;
        if (joined.len() as u64) <= max_buf {
            let buf = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("l3-bench upload"),
                size: joined.len() as u64,
                usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            let (s, ()) = measure(args.reps, args.max_seconds, || {
                queue.write_buffer(&buf, 0, &joined);
                queue.submit([]);
                gpu_wait(device)
            })?;
            rows.push(GpuRow {
                name: format!("upload of {n} l3 {} files (host to device)", profile.name()),
                bytes: in_bytes,
                pixels: 0,
                stats: Some(s),
                note: "queue.write_buffer + wait".into(),
            });
            upload = Some(s);
        }
        batches.push((profile, files, upload));
    }

    let decoder = match decoder {
        Ok(d) => d,
        Err(e) => {
            rows.push(GpuRow::note_only(
                "l3 GPU decoder",
                format!("unavailable: {e}"),
            ));
            return Ok(GpuReport {
                adapter,
                rows,
                lossless: batches.iter().map(|b| (b.0, None)).collect(),
            });
        }
    };

    let mut lossless = Vec::new();
    let steady_mb = args
        .gpu_steady_mb
        .unwrap_or(if decoder.is_software() { 0 } else { 1024 });
    for (profile, files, upload) in &batches {
        let label = format!("l3 {}", profile.name());
        let refs: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
        let mut profile_rows = Vec::new();
        let result = guard(|| {
            gpu_decoder_rows(
                decoder,
                &label,
                &refs,
                *upload,
                images,
                args,
                &mut profile_rows,
            )
        });
        rows.append(&mut profile_rows);
        match (result, profile) {
            (Ok(l), _) => lossless.push((*profile, Some(l))),
            // The compact profile's GPU support is newer than the fast one's: its failure is
            // a row of the report (the fast profile's still fails the section, as before).
            (Err(e), Profile::Compact) => {
                eprintln!("  gpu: {label} files: {e:#}");
                rows.push(GpuRow::note_only(
                    format!("{label}: decode_batch of {n} files"),
                    format!("unavailable: {}", one_line(&format!("{e:#}"))),
                ));
                lossless.push((*profile, None));
            }
            (Err(e), Profile::Fast) => return Err(e),
        }
    }
    if steady_mb > 0 {
        eprintln!("  gpu steady state ({steady_mb} MB batches)...");
        let mut files: Vec<(String, Vec<Vec<u8>>)> = batches
            .into_iter()
            .map(|(p, f, _)| (format!("l3 {}", p.name()), f))
            .collect();
        // The compact profile with 128-px patches too: a quarter as many patches, each
        // segment 16 rows of 128 px instead of 4 of 64 (faster on the CPU; the GPU decides
        // whether it could be the default).
        let options = EncodeOptions {
            parallel: true,
            ..crate::codecs::Codec::L3Compact128
                .l3_options()
                .expect("an l3 codec")
        };
        // (Not checked against the CPU decoder here: tests/gpu.rs covers 128-px patches.)
        match images
            .iter()
            .map(|p| l3::encode::encode(&p.raw(), &options))
            .collect::<std::result::Result<Vec<_>, _>>()
        {
            Ok(compact_128) => files.push(("l3 compact 128px".into(), compact_128)),
            Err(e) => eprintln!("  gpu steady state: no 128-px compact files: {e}"),
        }
        let raw: Vec<u64> = images.iter().map(|p| p.bytes.len() as u64).collect();
        match guard(|| steady::steady_rows(decoder, &files, &raw, steady_mb << 20, args.reps)) {
            Ok(mut r) => rows.append(&mut r),
            Err(e) => rows.push(GpuRow::note_only(
                "steady state",
                format!("failed: {}", one_line(&format!("{e:#}"))),
            )),
        }
        eprintln!("  gpu float steady state ({steady_mb} MB batches)...");
        let (device, queue) = (decoder.device(), decoder.queue());
        match guard(|| steady::float_steady_rows(device, queue, steady_mb << 20, args.reps)) {
            Ok(mut r) => rows.append(&mut r),
            Err(e) => rows.push(GpuRow::note_only(
                "float steady state",
                format!("failed: {}", one_line(&format!("{e:#}"))),
            )),
        }
    }
    Ok(GpuReport {
        adapter,
        rows,
        lossless,
    })
}

/// The GPU decoder's rows for one batch of files (one profile), appended to `rows` as they
/// are measured; returns whether the decoded pixels were bit-exact.
fn gpu_decoder_rows(
    decoder: &l3::gpu::GpuDecoder,
    label: &str,
    refs: &[&[u8]],
    upload: Option<Stats>,
    images: &[Pixels],
    args: &Args,
    rows: &mut Vec<GpuRow>,
) -> Result<bool> {
    let n = refs.len();
    let total_px: u64 = images.iter().map(Pixels::pixels).sum();
    let total_raw: u64 = images.iter().map(|p| p.bytes.len() as u64).sum();
    // Decode to a device buffer: CPU parse + CRC, upload, kernels, wait.
    let out = l3::gpu::OutputLayout::Interleaved;
    let (dec, batch) = measure(args.reps, args.max_seconds, || {
        Ok(decoder.decode_batch(refs, out)?)
    })?;
    rows.push(GpuRow {
        name: format!("{label}: decode_batch of {n} files to a device buffer"),
        bytes: total_raw,
        pixels: total_px,
        stats: Some(dec),
        note: "parse + CRC on CPU, upload, kernels, wait; output stays on device".into(),
    });
    // Kernels: GPU timestamps around each stage where the device supports them (the same
    // batch, decoded again with timing; per-stage sums over the batch's chunks).
    let mut timings: Vec<l3::gpu::StageTimings> = Vec::new();
    if decoder.timing_supported() {
        measure(args.reps, args.max_seconds, || {
            let (b, t) = decoder.decode_batch_timed(refs, out)?;
            timings.extend(t);
            drop(b);
            Ok(())
        })?;
        // The first call is measure's warm-up.
        if timings.len() > 1 {
            timings.remove(0);
        }
    }
    if !timings.is_empty() {
        let chunks = timings[0].chunks;
        let stage = |f: fn(&l3::gpu::StageTimings) -> u64| {
            stats_of(timings.iter().map(|t| f(t) as f64 * 1e-9).collect())
        };
        let stages = [
            (
                format!("{label}: kernels (GPU timestamps: prefix sum + decode)"),
                stage(|t| t.kernels_ns()),
            ),
            (
                "  prefix sum (GPU timestamps)".into(),
                stage(|t| t.prefix_sum_ns),
            ),
            ("  decode (GPU timestamps)".into(), stage(|t| t.decode_ns)),
        ];
        for (name, stats) in stages {
            rows.push(GpuRow {
                name,
                bytes: total_raw,
                pixels: total_px,
                stats: Some(stats),
                note: format!(
                    "compute passes only, summed over {chunks} chunk(s); timestamp queries"
                ),
            });
        }
    } else if let Some(up) = upload {
        let k = (dec.median - up.median).max(1e-9);
        rows.push(GpuRow {
            name: format!("{label}: kernels (estimate: decode_batch - upload)"),
            bytes: total_raw,
            pixels: total_px,
            stats: Some(Stats {
                median: k,
                min: k,
                max: k,
                reps: dec.reps,
            }),
            note: "no TIMESTAMP_QUERY on this device: includes CPU parse + CRC; medians \
                   subtracted"
                .into(),
        });
    }
    let (rb, host) = measure(args.reps, args.max_seconds, || Ok(batch.read_back()?))?;
    rows.push(GpuRow {
        name: format!("{label}: read-back of the decoded batch (device to host)"),
        bytes: total_raw,
        pixels: 0,
        stats: Some(rb),
        note: "GpuBatch::read_back".into(),
    });
    drop(batch);
    let lossless =
        host.len() == images.len() && host.iter().zip(images).all(|(h, p)| *h == p.bytes);
    if !lossless {
        eprintln!("  GPU decoder output on {label} files differs from the reference pixels");
    }
    let (e2e, ()) = measure(args.reps, args.max_seconds, || {
        let b = decoder.decode_batch(refs, out)?;
        std::hint::black_box(b.read_back()?);
        Ok(())
    })?;
    rows.push(GpuRow {
        name: format!("{label}: end to end: decode_batch + read-back"),
        bytes: total_raw,
        pixels: total_px,
        stats: Some(e2e),
        note: "files in host memory to pixels in host memory".into(),
    });
    Ok(lossless)
}
