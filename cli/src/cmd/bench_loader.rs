//! `l3 bench-loader DATASET`: runs the loader (`l3::loader::Loader`, CPU path) over a packed
//! dataset for some epochs and prints images/s, the per-stage split, the cache hit rate and the
//! bytes read, per epoch.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;

use crate::display::human;
use crate::limits::limits;
use l3::loader::{
    Augment, DropLast, Loader, LoaderOptions, LoaderState, Partition, Policy, StageTimes,
};
use l3::shard::Dataset;

#[derive(Args)]
pub struct BenchLoaderArgs {
    /// Dataset folder (with manifest.json).
    pub dataset: PathBuf,
    /// Epochs to run.
    #[arg(long, default_value_t = 2)]
    pub epochs: u64,
    /// Samples per batch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: u32,
    /// Output side (square crops).
    #[arg(long, default_value_t = 224)]
    pub size: u32,
    /// Level to read (default: full resolution).
    #[arg(long)]
    pub level: Option<u8>,
    /// Cache for compressed records, MiB (0: none).
    #[arg(long, default_value_t = 0)]
    pub cache_mb: u64,
    /// Evict least recently used records instead of by the plan.
    #[arg(long)]
    pub lru: bool,
    /// Loader threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Seed of the shuffle and the augmentation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Decode and augment on the GPU (wgpu; WGPU_BACKEND / WGPU_ADAPTER_NAME pick it).
    #[arg(long)]
    pub gpu: bool,
    /// f16 batch tensors instead of f32.
    #[arg(long)]
    pub f16: bool,
    /// Decode whole images, not only the patches each crop needs (to measure the saving).
    #[arg(long)]
    pub no_crop_window: bool,
}

#[derive(Default)]
struct EpochTotals {
    images: u64,
    skipped: u64,
    bytes_read: u64,
    reads: u64,
    times: StageTimes,
    wall: f64,
}

pub fn cmd_bench_loader(a: BenchLoaderArgs) -> Result<u64> {
    let ds = Arc::new(
        // Every read of a shard within --max-input-bytes.
        Dataset::open_with_limits(&a.dataset, &limits())
            .with_context(|| format!("opening {}", a.dataset.display()))?,
    );
    let mut o = LoaderOptions::new(Partition {
        batch_size: a.batch_size,
        world_size: 1,
        rank: 0,
        drop_last: DropLast::Partial,
    });
    o.seed = a.seed;
    o.level = a.level;
    o.augment = Augment::with_size(a.size, a.size);
    if a.f16 {
        o.augment.output = l3::loader::TensorType::F16;
    }
    o.cache_bytes = a.cache_mb << 20;
    o.cache_policy = if a.lru { Policy::Lru } else { Policy::Planned };
    o.threads = a.threads;
    o.end_epoch = a.epochs;
    o.crop_window_decode = !a.no_crop_window;
    #[cfg_attr(not(feature = "gpu"), allow(unused_mut))]
    let mut device = "CPU".to_string();
    if a.gpu {
        #[cfg(feature = "gpu")]
        {
            let gpu = l3::gpu::GpuDecoder::new_default().context("--gpu: no usable adapter")?;
            device = format!(
                "GPU {}{}",
                gpu.adapter_name(),
                if gpu.is_software() { " (software)" } else { "" }
            );
            o.gpu = Some(Arc::new(gpu));
        }
        #[cfg(not(feature = "gpu"))]
        anyhow::bail!("--gpu: this build has no GPU support (feature `gpu`)");
    }
    let threads = if a.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        a.threads
    };
    println!(
        "{}: {} records, {} level(s); reading level {}, {}x{} crops, batches of {}, {threads} threads, decode ({}) + augment on the {device}, cache {} MiB ({})",
        a.dataset.display(),
        ds.len(),
        ds.manifest().levels,
        a.level.unwrap_or(ds.manifest().levels - 1),
        a.size,
        a.size,
        a.batch_size,
        if a.no_crop_window { "whole images" } else { "the patches each crop needs" },
        a.cache_mb,
        if a.lru { "LRU" } else { "planned eviction" }
    );
    let start = LoaderState {
        seed: a.seed,
        ..Default::default()
    };
    let mut epochs: Vec<EpochTotals> = (0..a.epochs).map(|_| EpochTotals::default()).collect();
    let mut last = Instant::now();
    let mut cache = Default::default();
    for batch in Loader::new(ds, o, start)? {
        let b = batch?;
        let e = &mut epochs[b.epoch as usize];
        e.images += b.samples.len() as u64;
        e.skipped += b.skipped.len() as u64;
        e.bytes_read += b.bytes_read;
        e.reads += b.read_calls as u64;
        e.times.read += b.times.read;
        e.times.decode += b.times.decode;
        e.times.augment += b.times.augment;
        e.times.assemble += b.times.assemble;
        e.times.waited += b.times.waited;
        let now = Instant::now();
        e.wall += (now - last).as_secs_f64();
        last = now;
        for s in &b.skipped {
            eprintln!(
                "skipped: sample {} ({}, {}): {}",
                s.sample, s.shard, s.key, s.error
            );
        }
        cache = b.cache;
    }
    for (k, e) in epochs.iter().enumerate() {
        let per = |d: std::time::Duration| 1e3 * d.as_secs_f64() / e.images.max(1) as f64;
        println!(
            "epoch {k}: {} images in {:.2} s = {:.1} images/s; per image: read {:.2} ms (wall), decode {:.2} ms, augment {:.2} ms ({}), hand-off {:.3} ms (wall); consumer waited {:.2} ms; {} read in {} reads; {} skipped",
            e.images,
            e.wall,
            e.images as f64 / e.wall.max(1e-9),
            per(e.times.read),
            per(e.times.decode),
            per(e.times.augment),
            if a.gpu {
                "GPU, wall time of the batch's submission and read-back"
            } else {
                "CPU time summed over the loader's threads"
            },
            per(e.times.assemble),
            per(e.times.waited),
            human(e.bytes_read),
            e.reads,
            e.skipped
        );
    }
    println!(
        "cache: {} lookups, hit rate {:.3}, {} evictions",
        cache.accesses,
        cache.hit_rate(),
        cache.evictions
    );
    Ok(0)
}
