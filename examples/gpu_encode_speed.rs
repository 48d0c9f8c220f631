//! Throughput of the error-bounded encoder (differences predictor) on the GPU against the CPU
//! encoder on 1 and 2 threads, on an activation-like array (post-ReLU f32, 64x64x32x32 by
//! default): medians of REPS runs, and a check that every run's bytes are the CPU's.
//!
//! `cargo run --release --example gpu_encode_speed -- [REPS] [N C H W]`
//!
//! GPU: `encode_bounded_gpu` (upload included) and `encode_bounded_buffer` (values already on
//! the device); both include the read-backs and the host's assembly and CRC.
use std::time::Instant;

use l3::field::gpu::{encode_bounded_buffer, encode_bounded_gpu};
use l3::field::{encode_bounded, BoundedOptions, Predictor};
use l3::gpu::GpuEncoder;

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let reps = *args.first().unwrap_or(&5) as usize;
    let shape: Vec<u32> = if args.len() == 5 {
        args[1..].to_vec()
    } else {
        vec![64, 64, 32, 32]
    };
    let n: usize = shape.iter().map(|&d| d as usize).product();
    // Activation-like: smooth maps per channel plus noise, through a ReLU (about half zeros).
    let (h, w) = (shape[2] as usize, shape[3] as usize);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let values: Vec<f32> = (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let c = i / (h * w);
            let (y, x) = ((i / w) % h, i % w);
            let s =
                ((x as f32 * 0.3 + c as f32).sin() + (y as f32 * 0.2 - c as f32 * 0.7).cos()) * 0.8;
            (s + noise * 0.6).max(0.0)
        })
        .collect();
    let range = values.iter().fold(0f32, |a, &b| a.max(b)) as f64;
    let enc = GpuEncoder::new_default()?;
    println!(
        "array {shape:?} ({:.1} MB), {:.1}% zeros, adapter {:?}",
        n as f64 * 4.0 / 1e6,
        values.iter().filter(|&&v| v == 0.0).count() as f64 * 100.0 / n as f64,
        enc.device().adapter_info().name
    );
    let buffer = enc.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("values"),
        size: n as u64 * 4,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    enc.queue()
        .write_buffer(&buffer, 0, bytemuck::cast_slice(&values));
    let mb = n as f64 * 4.0 / 1e6;
    for rel in [1e-2, 1e-3] {
        for axes in [Some(1u8 << (shape.len() - 1)), None] {
            let o = BoundedOptions {
                predictor: Some(Predictor::Differences),
                axes,
                ..BoundedOptions::new(rel * range)
            };
            let want = encode_bounded(&values, &shape, &o)?;
            let mut row = format!(
                "rel {rel:e} axes {:>8}: {:>8} B ({:5.2}x)",
                axes.map_or("estimate".into(), |a| format!("{a:#06b}")),
                want.len(),
                n as f64 * 4.0 / want.len() as f64
            );
            for threads in [1, 2] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()?;
                let t: Vec<f64> = (0..reps)
                    .map(|_| {
                        let s = Instant::now();
                        let f = pool
                            .install(|| encode_bounded(&values, &shape, &o))
                            .unwrap();
                        assert!(f == want);
                        s.elapsed().as_secs_f64()
                    })
                    .collect();
                row += &format!(" | CPU {threads}t {:7.1} MB/s", mb / median(t));
            }
            let mut t = Vec::new();
            for _ in 0..reps {
                let s = Instant::now();
                let f = encode_bounded_gpu(&enc, &values, &shape, &o)?;
                t.push(s.elapsed().as_secs_f64());
                assert!(f == want, "GPU bytes differ");
            }
            row += &format!(" | GPU (upload) {:7.1} MB/s", mb / median(t));
            let mut t = Vec::new();
            for _ in 0..reps {
                let s = Instant::now();
                let f = encode_bounded_buffer(&enc, &buffer, 0, &shape, &o)?;
                t.push(s.elapsed().as_secs_f64());
                assert!(f == want, "GPU bytes differ");
            }
            row += &format!(" | GPU (on device) {:7.1} MB/s", mb / median(t));
            println!("{row}");
        }
    }
    Ok(())
}
