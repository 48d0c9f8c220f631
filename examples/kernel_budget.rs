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
    Ok(())
}
