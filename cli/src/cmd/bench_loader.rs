//! `l3 bench-loader DATASET`: runs the loader (`l3::loader::Loader`, CPU path) over a packed
//! dataset for some epochs and prints the time to the first batch (from the start of opening
//! the dataset, with its parts), then images/s, the per-stage split, the cache hit rate, the
//! bytes read and the smallest and largest batch, per epoch. A tensor dataset (manifest kind
//! `"tensors"`) is read with `--size` square windows over its last two axes (`--flips`,
//! `--normalize` as `l3.Loader` takes them); its "images" are samples.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;

use crate::display::human;
use crate::limits::limits;
use l3::loader::{
    Augment, DropLast, Loader, LoaderDataset, LoaderOptions, LoaderState, Partition, Policy, Split,
    StageTimes, TensorAugment,
};
use l3::shard::{AnyDataset, OpenTimes};

#[derive(Args)]
pub struct BenchLoaderArgs {
    /// Dataset folder (with manifest.json), or its URL (`s3://bucket/prefix`, ...).
    pub dataset: String,
    /// Epochs to run.
    #[arg(long, default_value_t = 2)]
    pub epochs: u64,
    /// Stop after this many batches (0: run every epoch); `--steps 1` measures the start.
    #[arg(long, default_value_t = 0)]
    pub steps: u64,
    /// Samples per batch.
    #[arg(long, default_value_t = 64)]
    pub batch_size: u32,
    /// Ranks of the run (the plan partitions each epoch among them).
    #[arg(long, default_value_t = 1)]
    pub world_size: u32,
    /// The rank this loader is.
    #[arg(long, default_value_t = 0)]
    pub rank: u32,
    /// Output side (square crops).
    #[arg(long, default_value_t = 224)]
    pub size: u32,
    /// Level to read (default: full resolution).
    #[arg(long)]
    pub level: Option<u8>,
    /// Cache for compressed records, MiB (0: none).
    #[arg(long, default_value_t = 0)]
    pub cache_mb: u64,
    /// Cache for compressed records as a fraction of the bytes the run reads in an epoch (the
    /// manifest's bytes of levels 0 to the level read), instead of --cache-mb.
    #[arg(long, conflicts_with = "cache_mb")]
    pub cache_fraction: Option<f64>,
    /// Split each global batch among the ranks in slices (rank r takes the r-th), not by
    /// what each rank's cache holds (the default with --cache-mb and --world-size above 1).
    #[arg(long)]
    pub no_locality: bool,
    /// With the locality split: most samples a rank's batch may differ from --batch-size
    /// (default batch_size / 8; 0 keeps batches equal).
    #[arg(long)]
    pub max_imbalance: Option<u32>,
    /// The reuse order (issue 47): each epoch's permutation with the N samples the previous
    /// epoch read last moved to the front (default 0: the plain permutation). Resume with the
    /// same N.
    #[arg(long, default_value_t = 0)]
    pub reuse_front: u32,
    /// The stratified order: each epoch's permutation spreads each of N contiguous ranges of
    /// sample ids evenly over the epoch (default: 64 for a windowed tensor dataset, else 0,
    /// the plain permutation). Resume with the same N.
    #[arg(long)]
    pub strata: Option<u32>,
    /// Evict least recently used records instead of by the plan (both tiers).
    #[arg(long)]
    pub lru: bool,
    /// A disk tier for compressed records under this folder (for remote datasets), its size
    /// in MiB given by --disk-cache-mb.
    #[arg(long, requires = "disk_cache_mb")]
    pub disk_cache: Option<std::path::PathBuf>,
    /// Size of the disk tier, MiB.
    #[arg(long, default_value_t = 0)]
    pub disk_cache_mb: u64,
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
    /// A tensor dataset: reverse each of the window's two axes with probability 1/2.
    #[arg(long)]
    pub flips: bool,
    /// A tensor dataset: normalise each array by its manifest statistics.
    #[arg(long)]
    pub normalize: bool,
}

#[derive(Default)]
struct EpochTotals {
    images: u64,
    skipped: u64,
    bytes_read: u64,
    reads: u64,
    times: StageTimes,
    wall: f64,
    /// Smallest and largest batch of the epoch, its last step aside (`None`: no such step).
    batches: Option<(usize, usize)>,
}

pub fn cmd_bench_loader(a: BenchLoaderArgs) -> Result<u64> {
    let started = Instant::now();
    // Every read of a shard within --max-input-bytes.
    let any = AnyDataset::open_in(&crate::shards::open_store(&a.dataset)?, &limits())
        .with_context(|| format!("opening {}", a.dataset))?;
    let tensors = matches!(any, AnyDataset::Tensors(_));
    anyhow::ensure!(
        !tensors || !a.gpu && a.level.is_none(),
        "--gpu and --level are for image datasets; {} holds tensor records",
        a.dataset
    );
    anyhow::ensure!(
        tensors || !a.flips && !a.normalize,
        "--flips and --normalize are for tensor datasets; {} holds images",
        a.dataset
    );
    // What the dataset is: records, shards, levels, the bytes an epoch reads, open times.
    let (records, shards, levels, epoch_bytes, open_times) = match &any {
        AnyDataset::Images(ds) => {
            let level = a.level.unwrap_or(ds.manifest().levels - 1) as usize;
            let bytes: u64 = ds
                .manifest()
                .shards
                .iter()
                .flat_map(|s| s.level_bytes.iter().take(level + 1))
                .sum();
            (
                ds.len(),
                ds.shards().len(),
                ds.manifest().levels,
                bytes,
                ds.open_times(),
            )
        }
        AnyDataset::Tensors(ds) => {
            let bytes = ds.manifest().shards.iter().map(|s| s.payload_bytes).sum();
            (ds.len(), ds.shards().len(), 1, bytes, ds.open_times())
        }
    };
    let store = any.store().clone();
    let mut o = LoaderOptions::new(Partition {
        batch_size: a.batch_size,
        world_size: a.world_size,
        rank: a.rank,
        drop_last: DropLast::Partial,
    });
    o.seed = a.seed;
    o.level = a.level;
    o.augment = Augment::with_size(a.size, a.size);
    if a.f16 {
        o.augment.output = l3::loader::TensorType::F16;
    }
    o.cache_bytes = a.cache_mb << 20;
    if let Some(f) = a.cache_fraction {
        anyhow::ensure!(
            (0.0..=1.0).contains(&f),
            "--cache-fraction must be in 0..=1, got {f}"
        );
        o.cache_bytes = (f * epoch_bytes as f64) as u64;
    }
    o.cache_policy = if a.lru { Policy::Lru } else { Policy::Planned };
    o.locality = !a.no_locality;
    o.max_imbalance = a.max_imbalance;
    o.reuse_front = a.reuse_front;
    o.strata = a.strata;
    o.disk_cache = a.disk_cache.clone().map(|d| (d, a.disk_cache_mb << 20));
    o.threads = a.threads;
    o.end_epoch = a.epochs;
    o.crop_window_decode = !a.no_crop_window;
    if tensors {
        o.tensor = Some(TensorAugment {
            crop: vec![a.size, a.size],
            spatial: 2,
            flips: a.flips,
            rot90: false,
            normalise: a.normalize,
            output: o.augment.output,
        });
    }
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
    let opened = started.elapsed();
    println!(
        "{}: {} {} records in {} shard(s), {} level(s); reading level {}, {}x{} crops, batches of {} (rank {} of {}), {threads} threads, decode ({}) + augment on the {device}, cache {} ({}{})",
        a.dataset,
        records,
        if tensors { "tensor" } else { "image" },
        shards,
        levels,
        a.level.unwrap_or(levels - 1),
        a.size,
        a.size,
        a.batch_size,
        a.rank,
        a.world_size,
        if tensors {
            "whole arrays"
        } else if a.no_crop_window {
            "whole images"
        } else {
            "the patches each crop needs"
        },
        human(o.cache_bytes),
        if a.lru { "LRU" } else { "planned eviction" },
        match o.split() {
            // A cache holding the whole dataset takes the slices (`LoaderOptions::locality`).
            Split::Locality { max_imbalance } if o.cache_bytes < epoch_bytes =>
                format!(", locality split, batches within {max_imbalance} of --batch-size"),
            _ => String::new(),
        } + &if a.reuse_front > 0 {
            format!(", reuse order (front {})", a.reuse_front)
        } else {
            String::new()
        } + &match a.strata {
            Some(s) if s > 1 => format!(", {s} strata"),
            _ => String::new(),
        }
    );
    let start = LoaderState {
        seed: a.seed,
        ..Default::default()
    };
    let mut epochs: Vec<EpochTotals> = (0..a.epochs).map(|_| EpochTotals::default()).collect();
    let opening = store.traffic();
    let mut last = Instant::now();
    let mut cache = Default::default();
    let mut disk: l3::loader::cache::CacheStats = Default::default();
    let loader_start = Instant::now();
    let dataset = match any {
        AnyDataset::Images(ds) => LoaderDataset::Images(Arc::new(ds)),
        AnyDataset::Tensors(ds) => LoaderDataset::Tensors(Arc::new(ds)),
    };
    let loader = Loader::open(dataset, o, start)?;
    let loader_started = loader_start.elapsed();
    for (k, batch) in loader.enumerate() {
        let b = batch?;
        if k == 0 {
            first_batch(
                started.elapsed(),
                opened,
                open_times,
                loader_started,
                &b.times,
            );
        }
        let e = &mut epochs[b.epoch as usize];
        e.images += b.samples.len() as u64;
        e.skipped += b.skipped.len() as u64;
        e.bytes_read += b.bytes_read;
        e.reads += b.read_calls as u64;
        if b.state_after.epoch == b.epoch {
            let len = b.samples.len() + b.skipped.len();
            let (lo, hi) = e.batches.unwrap_or((len, len));
            e.batches = Some((lo.min(len), hi.max(len)));
        }
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
        disk = b.disk_cache;
        if a.steps > 0 && k as u64 + 1 >= a.steps {
            break;
        }
    }
    let unit = if tensors { "sample" } else { "image" };
    for (k, e) in epochs.iter().enumerate().filter(|(_, e)| e.images > 0) {
        let per = |d: std::time::Duration| 1e3 * d.as_secs_f64() / e.images.max(1) as f64;
        println!(
            "epoch {k}: {} {unit}s in {:.2} s = {:.1} {unit}s/s; per {unit}: read {:.2} ms (wall), decode {:.2} ms, augment {:.2} ms ({}), hand-off {:.3} ms (wall); consumer waited {:.2} ms; {} ({} B) read in {} reads; batches of {} samples (last step aside); {} skipped",
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
            e.bytes_read,
            e.reads,
            e.batches
                .map_or("-".to_string(), |(lo, hi)| format!("{lo}..={hi}")),
            e.skipped
        );
    }
    println!(
        "cache: {} lookups, hit rate {:.3}, {} evictions",
        cache.accesses,
        cache.hit_rate(),
        cache.evictions
    );
    if a.disk_cache.is_some() {
        println!(
            "disk cache: {} lookups, hit rate {:.3}, {} evictions",
            disk.accesses,
            disk.hit_rate(),
            disk.evictions
        );
    }
    if store.is_remote() {
        let (requests, bytes) = store.traffic();
        println!(
            "network: {} fetched in {requests} GET requests ({} in {} to open the dataset)",
            human(bytes),
            human(opening.1),
            opening.0
        );
    }
    Ok(0)
}

/// Prints the time to the first batch and its parts: `total` from the start of opening the
/// dataset to the batch in hand, `opened` of it to open the dataset (`open`: manifest, shard
/// indexes), `loader` to start the loader, and the first batch's stage times (`plan` before
/// it on the producer's thread).
fn first_batch(
    total: Duration,
    opened: Duration,
    open: OpenTimes,
    loader: Duration,
    t: &StageTimes,
) {
    let ms = |d: Duration| 1e3 * d.as_secs_f64();
    let accounted = opened + loader + t.plan + t.total;
    println!(
        "first batch: {:.1} ms from the start: open {:.1} ms (manifest {:.1} ms, shard indexes {:.1} ms), loader start {:.1} ms, plan {:.1} ms, batch {:.1} ms (read {:.1} ms wall, decode {:.1} ms + augment {:.1} ms CPU over the threads, hand-off {:.1} ms), other {:.1} ms",
        ms(total),
        ms(opened),
        ms(open.manifest),
        ms(open.shards),
        ms(loader),
        ms(t.plan),
        ms(t.total),
        ms(t.read),
        ms(t.decode),
        ms(t.augment),
        ms(t.assemble),
        ms(total.saturating_sub(accounted)),
    );
}
