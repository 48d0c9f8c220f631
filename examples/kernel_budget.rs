//! Prints the kernel budget (issue 45).
//!
//! 1. Static, read from the shaders with naga (no GPU): for every entry point of every WGSL
//!    stage, its workgroup size and memory, the storage bindings it reads and writes, and the
//!    static sites of atomics, barriers, loops and storage stores.
//! 2. Per batch, on the adapter wgpu picks (lavapipe included; skipped when there is none):
//!    what the engine asks of the device for one batch of the bundled sample images (fast and
//!    compact) and of a lossless float field: submissions, dispatches, bind groups, buffers
//!    created, read-backs, bytes uploaded, and host microseconds from the call to the batch on
//!    the device (GPU work included: a software adapter's figure is mostly kernel time). The
//!    first batch and a second, identical one (what stays cached) are both shown.
//!
//!     cargo run --release --example kernel_budget
use std::time::Instant;

use l3::gpu::{Counts, GpuDecoder, OutputLayout};
use l3::loader::tensor_augment::TensorAugment;
use l3::loader::tensor_gpu::{window_batch, TensorArrayInput, TensorSampleInput};
use l3::tensor::{encode_array, ArrayMode, ArrayOptions, DType, EncodedArray, NdArray};

fn main() {
    print!(
        "{}",
        l3::gpu::budget::markdown(&l3::gpu::budget::static_budget())
    );
    if let Err(e) = per_batch() {
        println!("\nPer batch: skipped ({e})");
    }
}

/// The bundled sample images, in memory.
fn samples() -> l3::Result<Vec<image::DynamicImage>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "png"))
        .collect();
    paths.sort();
    paths.iter().map(|p| l3::read_image(p)).collect()
}

fn per_batch() -> l3::Result<()> {
    let decoder = GpuDecoder::with_adapter(&l3::gpu::select_adapter()?)?;
    let images = samples()?;
    let encode = |profile| -> l3::Result<Vec<Vec<u8>>> {
        let options = l3::EncodeOptions {
            profile,
            ..Default::default()
        };
        images
            .iter()
            .map(|i| l3::encode_image(i, &options))
            .collect()
    };
    let fast = encode(l3::ProfileOptions::Fast(Default::default()))?;
    let compact = encode(l3::ProfileOptions::Compact(Default::default()))?;
    let (w, h) = (512u32, 512u32);
    let field: Vec<f32> = (0..w * h)
        .map(|i| ((i % w) as f32 * 0.031).sin() * ((i / w) as f32 * 0.017).cos())
        .collect();
    let lossless = l3::field::encode_lossless(
        l3::field::FloatSlice::F32(&field),
        &[h, w],
        &Default::default(),
    )?;
    println!(
        "\nPer batch on {} (`cargo run --release --example kernel_budget`):\n",
        decoder.adapter_name()
    );
    println!("| batch | run | decoded bytes | submissions | dispatches | bind groups | buffers | read-backs | uploaded bytes | host µs |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let row = |name: &str,
               files: &[Vec<u8>],
               run: &dyn Fn(&[&[u8]]) -> l3::Result<u64>|
     -> l3::Result<()> {
        let refs: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
        for pass in ["first", "second"] {
            let before: Counts = decoder.counts();
            let t = Instant::now();
            let bytes = run(&refs)?;
            let us = t.elapsed().as_micros();
            let c = decoder.counts() - before;
            println!(
                "| {name} | {pass} | {bytes} | {} | {} | {} | {} | {} | {} | {us} |",
                c.submissions, c.dispatches, c.bind_groups, c.buffers, c.readbacks, c.upload_bytes
            );
        }
        Ok(())
    };
    let images = |files: &[&[u8]]| -> l3::Result<u64> {
        let batch = decoder.decode_batch(files, OutputLayout::Interleaved)?;
        Ok(batch.images.iter().map(|i| i.len).sum())
    };
    row(&format!("{} images, fast", fast.len()), &fast, &images)?;
    row(
        &format!("{} images, compact", compact.len()),
        &compact,
        &images,
    )?;
    row(
        "one 512x512 f32 field, lossless",
        &[lossless],
        &|files: &[&[u8]]| -> l3::Result<u64> {
            let batch = l3::field::gpu::decode_lossless_fields(&decoder, files)?;
            drop(batch);
            Ok(w as u64 * h as u64 * 4)
        },
    )?;
    let bounded =
        l3::field::encode_bounded(&field, &[h, w], &l3::field::BoundedOptions::new(1e-3))?;
    row(
        "one 512x512 f32 field, error-bounded v3",
        &[bounded],
        &|files: &[&[u8]]| -> l3::Result<u64> {
            let batch =
                l3::field::gpu::decode_bounded_fields(&decoder, files, &Default::default())?;
            drop(batch);
            Ok(w as u64 * h as u64 * 4)
        },
    )?;
    // The tensor loader's GPU batch (`loader::tensor_gpu::window_batch`): its records come
    // with their windows, not as files.
    let records = tensor_records()?;
    let samples = tensor_samples(&records)?;
    row(
        "tensor batch: 8 x (lossless 2x256x256, v1 256x256, raw 256x256), 128 crops",
        &[],
        &|_| -> l3::Result<u64> {
            let batch = window_batch(&decoder, &TENSOR_CROP, &samples, &|_| None)?;
            // Wait for the batch's work (a read-back of one value would add a read-back).
            decoder
                .device()
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| l3::Error::Gpu(format!("poll: {e}")))?;
            Ok(batch.counts.output_bytes)
        },
    )
}

/// 128 x 128 windows with flips.
static TENSOR_CROP: std::sync::LazyLock<TensorAugment> =
    std::sync::LazyLock::new(|| TensorAugment {
        crop: vec![128, 128],
        flips: true,
        ..Default::default()
    });

/// 8 records of a lossless (2, 256, 256) `input`, an error-bounded (version 1) (256, 256)
/// `eb` and a raw (256, 256) `target`.
fn tensor_records() -> l3::Result<Vec<Vec<EncodedArray>>> {
    let plane = |k: u32, n: usize| -> Vec<f32> {
        (0..n)
            .map(|i| ((i % 256) as f32 * 0.03 + k as f32).sin() * ((i / 256) as f32 * 0.02).cos())
            .collect()
    };
    let array = |shape: Vec<u32>, v: Vec<f32>| {
        NdArray::new(DType::Float32, shape, bytemuck::cast_slice(&v).to_vec())
    };
    (0..8u32)
        .map(|k| {
            Ok(vec![
                encode_array(
                    "input",
                    &array(vec![2, 256, 256], plane(k, 2 * 65536))?,
                    &ArrayOptions::new(ArrayMode::Lossless),
                )?,
                encode_array(
                    "eb",
                    &array(vec![256, 256], plane(k + 50, 65536))?,
                    &ArrayOptions::new(ArrayMode::Bounded(l3::field::Bound::Absolute(1e-3))),
                )?,
                encode_array(
                    "target",
                    &array(vec![256, 256], plane(k + 90, 65536))?,
                    &ArrayOptions::new(ArrayMode::Raw),
                )?,
            ])
        })
        .collect()
}

/// The records as a batch's samples, each with its window.
fn tensor_samples(records: &[Vec<EncodedArray>]) -> l3::Result<Vec<TensorSampleInput<'_>>> {
    records
        .iter()
        .enumerate()
        .map(|(s, r)| {
            Ok(TensorSampleInput {
                arrays: r
                    .iter()
                    .map(|e| TensorArrayInput {
                        spec: &e.spec,
                        payload: &e.payload,
                    })
                    .collect(),
                window: TENSOR_CROP.window(1, 0, s as u64, &[256, 256])?,
            })
        })
        .collect()
}
