//! Host-side cost of the GPU stages that run after the decode: the time the submitting thread
//! spends in `loader::gpu::augment` (plan, job upload, bind groups, encoding, submit) per
//! batch, and the time until the GPU has finished it, for a few batch sizes. The batch is
//! decoded once per size (synthetic 500x375 RGB images, four distinct ones repeated); each
//! repeat then augments it with RandomResizedCrop(`--size`, default 224) + flip + ImageNet
//! normalisation into f32.
//!
//! ```text
//! WGPU_BACKEND=vulkan cargo run --release --example gpu_stage_dispatch -- [--batch 64,256] [--repeat 15] [--size 224]
//! ```
//!
//! Prints, per batch size, the median and the range over the repeats of both times.

use std::time::{Duration, Instant};

use l3::gpu::{GpuDecoder, OutputLayout};
use l3::loader::{gpu::augment, Augment};
use l3::{ColorType, EncodeOptions, RawImage, Samples};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut batches = vec![64usize, 256];
    let mut repeat = 15usize;
    let mut size = 224u32;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--batch" => {
                batches = args
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--repeat" => repeat = args.next().unwrap_or_default().parse()?,
            "--size" => size = args.next().unwrap_or_default().parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let decoder = GpuDecoder::new_default()?;
    println!("adapter: {}", decoder.adapter_name());
    let (w, h) = (500u32, 375u32);
    let files: Vec<Vec<u8>> = (0..4u32)
        .map(|k| {
            let samples: Vec<u8> = (0..w * h * 3)
                .map(|i| {
                    let (p, c) = (i / 3, i % 3);
                    let (x, y) = (p % w, p / w);
                    ((x * (k + 1) + y * (c + 2) + (x ^ y) % 7) & 0xff) as u8
                })
                .collect();
            let raw = RawImage {
                width: w,
                height: h,
                color: ColorType::Rgb,
                samples: Samples::U8(&samples),
            };
            l3::encode::encode(&raw, &EncodeOptions::for_profile(l3::Profile::Fast))
        })
        .collect::<Result<_, _>>()?;
    let aug = Augment::with_size(size, size);
    for &n in &batches {
        let refs: Vec<&[u8]> = (0..n).map(|i| files[i % files.len()].as_slice()).collect();
        let batch = decoder.decode_batch(&refs, OutputLayout::Interleaved)?;
        let params: Vec<_> = (0..n).map(|i| aug.params(7, 0, i as u64, w, h)).collect();
        let wait = || {
            decoder
                .device()
                .poll(wgpu::PollType::wait_indefinitely())
                .map(|_| ())
        };
        let (mut host, mut done) = (Vec::new(), Vec::new());
        for r in 0..repeat + 2 {
            wait()?;
            let t0 = Instant::now();
            let tensor = augment(&decoder, &batch, &params, &aug)?;
            let t1 = Instant::now();
            wait()?;
            let t2 = Instant::now();
            drop(tensor);
            // The first two are warm-up.
            if r >= 2 {
                host.push(t1 - t0);
                done.push(t2 - t0);
            }
        }
        println!(
            "batch {n:4}: host (augment call) {} | until the GPU is done {}",
            summary(&mut host),
            summary(&mut done)
        );
    }
    Ok(())
}

/// Median and range of `times` in microseconds.
fn summary(times: &mut [Duration]) -> String {
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    format!(
        "median {:8.1} us (min {:8.1}, max {:8.1})",
        us(times[times.len() / 2]),
        us(times[0]),
        us(times[times.len() - 1])
    )
}
