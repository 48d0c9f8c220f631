//! Cache study: hit rate and bytes read of the loader's record cache with planned eviction
//! (farthest next use, with bypass) against LRU and no cache, for budgets of 10-90% of the
//! dataset over several shuffled epochs. Runs `l3::loader::simulate`, the same cache code the
//! loader runs, on the loader's own access sequence (`l3::loader::permutation` per epoch).
//!
//! ```text
//! cargo run --release --example cache_study -- [--records N] [--epochs E] [--dataset DIR]
//!     [--out docs/cache-study]
//! cargo run --release --example cache_study -- --world-size R [--batch-size B] [--records N] [--window K]
//!     [--strata S] [--equal-sizes 1]
//! cargo run --release --example cache_study -- --reuse 1 [--batch-size B] [--records N]
//! ```
//!
//! With `--reuse 1` it prints, for 1 process and 4 ranks (locality split, B/8) each caching
//! c = 0.1, 0.2, 0.4, the share of the dataset read per epoch after the first with the plain
//! permutation and with the reuse order (`LoaderOptions::reuse_front` = `front_for`, and 0.8
//! of it), the ideal `1 - min(1, R c)`, and the reuse order's randomness cost: Spearman's
//! correlation between consecutive epochs' positions and the share of positions forced; for one process also LRU over the run's one
//! clock (a page cache's policy; the loader's LRU restarts its clock each epoch).
//!
//! With `--world-size R` it prints instead, for R ranks each caching c = 0.1, 0.2, 0.3, the
//! share of the dataset all ranks read per epoch (`l3::loader::simulate_reads`: slices, the
//! locality split at its default bound B/8, exact batches, and no bound: what the bound
//! costs) and the time one rank takes to plan an epoch of the locality split
//! (`RankCaches::epoch`, every rank's cache simulated); the floor no R caches of c can go
//! below in the same global order (`l3::loader::read_floor` for a cache of R c: any sizes,
//! any policy, any starting content, the run's steps), and for reference what one planned
//! cache of R c (all the ranks' memory in one) reads over the global order, one access at a
//! time (`--equal-sizes 1` for records of one size). With `--window K` too, sample `s`
//! reads records `s .. s + K` (a windowed tensor dataset), and each epoch's order is stratified
//! as the loader's is (`--strata S`, default 64 with a window, else 0); with `CACHE_STUDY_EPOCHS` set in
//! the environment, each epoch's share goes to stderr as well.
//!
//! Record sizes: those of a packed dataset (`--dataset`, cycled to N records), all 100 kB
//! (`--equal-sizes 1`), else a log-normal spread (median 100 kB, sigma 0.8) from a fixed seed. Writes `OUT.md` (tables)
//! and `OUT.png` (hit rate after the first epoch vs budget: planned blue, LRU red, no cache
//! grey, the line y = budget fraction black).

use std::fmt::Write as _;
use std::path::PathBuf;

use l3::loader::{
    epoch_order, epoch_step_ends, first_and_next_uses, front_for, permutation,
    position_correlation, read_floor, reuse_order, simulate, simulate_after, simulate_reads,
    DropLast, Partition, PlannedCache, Policy, RankCaches, RecordWindow, Simulation, Split,
    SplitMix64, WINDOW_STRATA,
};

struct Args {
    records: u32,
    epochs: u64,
    dataset: Option<PathBuf>,
    out: PathBuf,
    world_size: u32,
    batch_size: u32,
    reuse: bool,
    window: u32,
    strata: Option<u32>,
    equal_sizes: bool,
}

fn args() -> Args {
    let mut a = Args {
        records: 20_000,
        epochs: 4,
        dataset: None,
        out: PathBuf::from("docs/cache-study"),
        world_size: 1,
        batch_size: 32,
        reuse: false,
        window: 1,
        strata: None,
        equal_sizes: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--records" => a.records = v.parse().expect("--records N"),
            "--epochs" => a.epochs = v.parse().expect("--epochs E"),
            "--dataset" => a.dataset = Some(v.into()),
            "--out" => a.out = v.into(),
            "--world-size" => a.world_size = v.parse().expect("--world-size R"),
            "--batch-size" => a.batch_size = v.parse().expect("--batch-size B"),
            "--reuse" => a.reuse = v == "1",
            "--window" => a.window = v.parse().expect("--window K"),
            "--strata" => a.strata = Some(v.parse().expect("--strata S")),
            "--equal-sizes" => a.equal_sizes = v == "1",
            _ => panic!("unknown option {k}"),
        }
    }
    a
}

fn sizes(a: &Args) -> (Vec<u64>, String) {
    if a.equal_sizes {
        return (vec![100_000; a.records as usize], "equal (100 kB)".into());
    }
    if let Some(dir) = &a.dataset {
        let ds = l3::shard::Dataset::open(dir).expect("opening the dataset");
        let real: Vec<u64> = ds
            .shards()
            .iter()
            .flat_map(|s| {
                s.records()
                    .iter()
                    .map(|r| r.levels.iter().map(|l| l.len).sum())
            })
            .collect();
        let n = real.len();
        let v = (0..a.records as usize).map(|i| real[i % n]).collect();
        (v, format!("the {n} records of {} cycled", dir.display()))
    } else {
        let mut rng = SplitMix64::new(2026);
        let v = (0..a.records)
            .map(|_| {
                // Box-Muller from two uniforms.
                let (u1, u2) = (rng.unit_f32().max(1e-7) as f64, rng.unit_f32() as f64);
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                (100_000.0 * (0.8 * z).exp()) as u64 + 1
            })
            .collect();
        (v, "log-normal (median 100 kB, sigma 0.8, seed 2026)".into())
    }
}

/// `--world-size R`: the ranks' reads per epoch and the locality split's plan time.
fn ranks(a: &Args, sizes: &[u64]) {
    let total: u64 = sizes.iter().sum();
    // `--window K`: sample `s` reads records `s .. s + K` (a windowed tensor dataset).
    let window = (a.window > 1).then(|| RecordWindow {
        offsets: (0..a.window).collect(),
        records: a.records,
    });
    let samples = a.records - (a.window.max(1) - 1);
    // The loader's order: stratified by default over windows.
    let strata = a
        .strata
        .unwrap_or(if window.is_some() { WINDOW_STRATA } else { 0 });
    let p = Partition {
        batch_size: a.batch_size,
        world_size: a.world_size,
        rank: 0,
        drop_last: DropLast::Partial,
    };
    println!("strata: {strata}\n");
    println!(
        "| c | ideal | floor, any cache | one planned cache of R c | slices | locality (B/8) | exact | locality, no bound (B) | plan one epoch, one rank (s) |\n|---:|---:|---:|---:|---|---|---|---|---:|"
    );
    // The records the run reads, in the global order (`first`: where its second epoch starts).
    let k = a.window.max(1);
    let sequence: Vec<u32> = (0..a.epochs)
        .flat_map(|e| epoch_order(7, e, samples, strata, 0))
        .flat_map(|s| (0..k).map(move |o| s + o))
        .collect();
    let first = (samples * k) as usize;
    // The run's steps after the first epoch: global batches of B R samples, the last of an
    // epoch short.
    let ends = epoch_step_ends(
        a.epochs.saturating_sub(1) as usize,
        samples as usize,
        (a.batch_size * a.world_size) as usize,
        k as usize,
    );
    for c in [0.1, 0.2, 0.3] {
        let budget = (c * total as f64) as u64;
        let union = budget * a.world_size as u64;
        let per_epoch = |bytes: u64| {
            if a.epochs < 2 {
                f64::NAN
            } else {
                bytes as f64 / total as f64 / (a.epochs - 1) as f64
            }
        };
        // The least any R caches of `budget` bytes could read after the first epoch (at each
        // step start their union is one cache of R budgets).
        let floor = per_epoch(read_floor(&sequence[first..], &ends, sizes, union));
        // For reference, not a bound: one planned cache of the R budgets over the global order,
        // one access at a time, its reads after the first epoch.
        let one =
            per_epoch(simulate_after(&sequence, sizes, union, Policy::Planned, first).miss_bytes);
        let share = |split| {
            let (reads, _) = simulate_reads(
                sizes,
                7,
                a.epochs,
                &p,
                budget,
                &Simulation {
                    window: window.as_ref(),
                    strata,
                    ..Simulation::new(Policy::Planned, split)
                },
            );
            let f: Vec<f64> = reads[1..]
                .iter()
                .map(|r| r.iter().sum::<u64>() as f64 / total as f64)
                .collect();
            let (lo, hi) = f
                .iter()
                .fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
            if std::env::var_os("CACHE_STUDY_EPOCHS").is_some() {
                eprintln!("{split:?} c {c}: {f:.3?}");
            }
            format!("{lo:.3}-{hi:.3}")
        };
        let mut caches = RankCaches::new(
            a.world_size,
            Policy::Planned,
            budget,
            sizes.to_vec(),
            a.batch_size / 8,
        )
        .over(window.clone());
        let mut planned = std::time::Duration::ZERO;
        for e in 0..a.epochs {
            let (perm, next) = (permutation(7, e, samples), permutation(7, e + 1, samples));
            let input = l3::loader::ranks::EpochInput {
                perm: &perm,
                next_perm: Some(&next),
                consumed: 0,
            };
            let t = std::time::Instant::now();
            caches.epoch(input, &p, (0, 1), Some(0));
            planned += t.elapsed();
        }
        println!(
            "| {c} | {:.2} | {floor:.3} | {one:.3} | {} | {} | {} | {} | {:.3} |",
            1.0 - (a.world_size as f64 * c).min(1.0),
            share(Split::Slices),
            share(Split::Locality {
                max_imbalance: a.batch_size / 8
            }),
            share(Split::Locality { max_imbalance: 0 }),
            share(Split::Locality {
                max_imbalance: a.batch_size
            }),
            planned.as_secs_f64() / a.epochs as f64
        );
    }
}

/// `--reuse 1`: reads per epoch with the plain permutation and the reuse order, and the
/// reuse order's randomness cost.
fn reuse(a: &Args, sizes: &[u64]) {
    let total: u64 = sizes.iter().sum();
    let n = a.records;
    println!(
        "| ranks | c | ideal | planned, plain | planned, reuse (front_for) | planned, reuse (0.8 front_for) | LRU one clock (a page cache), plain | LRU one clock, reuse (front_for) | front / n | Spearman, consecutive epochs (reuse) | Spearman (plain) |\n|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|"
    );
    let spread = |reads: &[Vec<u64>]| {
        let f: Vec<f64> = reads[1..]
            .iter()
            .map(|r| r.iter().sum::<u64>() as f64 / total as f64)
            .collect();
        let (lo, hi) = f
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let mean = f.iter().sum::<f64>() / f.len() as f64;
        format!("{mean:.3} ({lo:.3}-{hi:.3})")
    };
    let spearman = |front: u32| {
        let orders: Vec<Vec<u32>> = (0..a.epochs).map(|e| reuse_order(7, e, n, front)).collect();
        let r: Vec<f64> = orders
            .windows(2)
            .map(|w| position_correlation(&w[0], &w[1]))
            .collect();
        r.iter().sum::<f64>() / r.len() as f64
    };
    // One process, LRU over the whole run's clock (`l3::loader::simulate`, as an OS page
    // cache would evict): reads per epoch after the first.
    let lru = |world: u32, budget: u64, front: u32| {
        if world > 1 {
            return "-".to_string();
        }
        let sequence: Vec<u32> = (0..a.epochs)
            .flat_map(|e| reuse_order(7, e, n, front))
            .collect();
        let stats = simulate(&sequence, sizes, budget, Policy::Lru);
        let later = stats.miss_bytes.saturating_sub(total) as f64;
        format!("{:.3}", later / total as f64 / (a.epochs - 1) as f64)
    };
    for world in [1u32, 4] {
        let p = Partition {
            batch_size: a.batch_size,
            world_size: world,
            rank: 0,
            drop_last: DropLast::Partial,
        };
        let split = if world > 1 {
            Split::Locality {
                max_imbalance: a.batch_size / 8,
            }
        } else {
            Split::Slices
        };
        for c in [0.1, 0.2, 0.4] {
            let budget = (c * total as f64) as u64;
            let front = front_for(n, total, budget, world);
            let reads = |front| {
                simulate_reads(
                    sizes,
                    7,
                    a.epochs,
                    &p,
                    budget,
                    &Simulation {
                        front,
                        ..Simulation::new(Policy::Planned, split)
                    },
                )
                .0
            };
            println!(
                "| {world} | {c} | {:.3} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
                1.0 - (world as f64 * c).min(1.0),
                spread(&reads(0)),
                spread(&reads(front)),
                spread(&reads(front * 4 / 5)),
                lru(world, budget, 0),
                lru(world, budget, front),
                front as f64 / n as f64,
                spearman(front),
                spearman(0),
            );
        }
    }
}

fn main() {
    let a = args();
    let (sizes, source) = sizes(&a);
    if a.reuse {
        return reuse(&a, &sizes);
    }
    if a.world_size > 1 {
        return ranks(&a, &sizes);
    }
    let total: u64 = sizes.iter().sum();
    let per_epoch = a.records as usize;
    let sequence: Vec<u32> = (0..a.epochs)
        .flat_map(|e| permutation(7, e, a.records))
        .collect();
    let fractions: Vec<f64> = (1..=9).map(|k| k as f64 / 10.0).collect();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Record cache: planned eviction vs LRU\n\n`cargo run --release --example cache_study -- --records {} --epochs {}{}` (whole run: the loader's cache code, `l3::loader::simulate`, on the loader's access sequence: {} epochs of {} records, each epoch an independent permutation from `l3::loader::permutation`, one rank). Record sizes: {source}; {:.1} MB in all.\n\nHit rate = hits / accesses after the first epoch (the first epoch is all misses for every policy: nothing has been read yet). Bytes read = bytes read from storage per epoch after the first, as a share of the dataset. With independent shuffles, no eviction policy can beat a hit rate of about the budget fraction f in steady state (each record is used once per epoch, in an order unrelated to the last); planned eviction reaches it, LRU falls far short because the record it keeps is the one just used, which is the one needed farthest away.\n",
        a.records,
        a.epochs,
        a.dataset
            .as_ref()
            .map_or(String::new(), |d| format!(" --dataset {}", d.display())),
        a.epochs,
        a.records,
        total as f64 / 1e6
    );
    let _ = writeln!(
        md,
        "| budget (share of the dataset's bytes) | planned hit rate | LRU hit rate | no cache | planned bytes read / epoch | LRU bytes read / epoch | planned / LRU bytes |\n|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut points = Vec::new();
    for &f in &fractions {
        let budget = (total as f64 * f) as u64;
        let run = |policy| {
            // Steady state: the counters after epoch 1 minus those of epoch 1 alone.
            let all = simulate(&sequence, &sizes, budget, policy);
            let first = simulate(&sequence[..per_epoch], &sizes, budget, policy);
            let hits = all.hits - first.hits;
            let accesses = all.accesses - first.accesses;
            let read = all.miss_bytes - first.miss_bytes;
            (
                hits as f64 / accesses as f64,
                read as f64 / (a.epochs - 1) as f64 / total as f64,
            )
        };
        let (ph, pb) = run(Policy::Planned);
        let (lh, lb) = run(Policy::Lru);
        let _ = writeln!(
            md,
            "| {:.0}% | {ph:.3} | {lh:.3} | 0.000 | {pb:.3} | {lb:.3} | {:.2} |",
            f * 100.0,
            pb / lb
        );
        points.push((f, ph, lh));
    }
    let _ = writeln!(
        md,
        "\n![hit rate vs budget](cache-study.png)\n\nThe plot: x = budget fraction 0..1, y = hit rate 0..1 after the first epoch; blue = planned, red = LRU, grey = no cache, black = y = x (the steady-state optimum for independent shuffles)."
    );
    reorder_study(&mut md, &a, &sizes, total, &sequence);
    std::fs::create_dir_all(a.out.parent().unwrap_or(std::path::Path::new("."))).unwrap();
    std::fs::write(a.out.with_extension("md"), &md).unwrap();
    plot(&points).save(a.out.with_extension("png")).unwrap();
    print!("{md}");
}

/// A 640 x 480 plot of the points (no text: the Markdown explains it).
fn plot(points: &[(f64, f64, f64)]) -> image::RgbImage {
    let (w, h, m) = (640u32, 480u32, 40u32);
    let mut img = image::RgbImage::from_pixel(w, h, image::Rgb([255, 255, 255]));
    let to_px = |x: f64, y: f64| {
        (
            m as f64 + x * (w - 2 * m) as f64,
            (h - m) as f64 - y * (h - 2 * m) as f64,
        )
    };
    let mut line = |x0: f64, y0: f64, x1: f64, y1: f64, c: [u8; 3]| {
        let (a, b) = (to_px(x0, y0), to_px(x1, y1));
        let steps = ((b.0 - a.0).abs().max((b.1 - a.1).abs()) * 2.0) as usize + 1;
        for s in 0..=steps {
            let t = s as f64 / steps as f64;
            let (x, y) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
            for dx in 0..2 {
                for dy in 0..2 {
                    let (px, py) = (x as u32 + dx, y as u32 + dy);
                    if px < w && py < h {
                        img.put_pixel(px, py, image::Rgb(c));
                    }
                }
            }
        }
    };
    // Axes and a 10% grid.
    for k in 0..=10 {
        let v = k as f64 / 10.0;
        line(v, 0.0, v, 1.0, [225, 225, 225]);
        line(0.0, v, 1.0, v, [225, 225, 225]);
    }
    line(0.0, 0.0, 1.0, 0.0, [0, 0, 0]);
    line(0.0, 0.0, 0.0, 1.0, [0, 0, 0]);
    line(0.0, 0.0, 1.0, 1.0, [0, 0, 0]);
    line(0.0, 0.0, 1.0, 0.0, [150, 150, 150]);
    let mut prev = (0.0, 0.0, 0.0);
    for &(f, p, l) in points {
        line(prev.0, prev.1, f, p, [30, 80, 220]);
        line(prev.0, prev.2, f, l, [220, 40, 40]);
        prev = (f, p, l);
    }
    img
}

/// Batch size of the shuffle-quality measurement.
const BATCH: usize = 256;
/// Classes of the class-sorted dataset.
const CLASSES: u64 = 100;

/// SOLAR's idea, measured: within each window of the plan, read first the records the cache
/// holds at the window's start (in planned order), then the others (in planned order). Hits
/// rise; the cost is in shuffle quality, measured on a class-sorted dataset (record i has class
/// i * CLASSES / n) as the mean share of a batch's most common class, against the plan itself
/// (a global shuffle) and a 1024-sample shuffle buffer over the class-sorted stream (as
/// WebDataset and DALI's container readers shuffle).
fn reorder_study(md: &mut String, a: &Args, sizes: &[u64], total: u64, sequence: &[u32]) {
    let n = a.records as usize;
    let budget = total / 2;
    let _ = writeln!(
        md,
        "\n## Reordering within a window (SOLAR's idea) and what it costs the shuffle\n\nBudget 50%, planned eviction, the same {} epochs. `window` = accesses reordered together: the records the cache holds at the window's start are read first, then the others, each group in planned order (a window of 0 is the plan as is). Shuffle quality on a class-sorted dataset ({CLASSES} classes of {} records, in record order): the mean over batches of {BATCH} of the largest share of one class in a batch (an ideal shuffle: about {:.3}), and the same for a 1024-sample shuffle buffer over the class-sorted stream (WebDataset, DALI containers) for comparison.\n\n| window (accesses) | hit rate after epoch 1 | bytes read / epoch after epoch 1 | mean largest class share per batch | position correlation between consecutive epochs |\n|---:|---:|---:|---:|---:|",
        a.epochs,
        n as u64 / CLASSES,
        ideal_share()
    );
    for window in [0usize, 1024, 4096, 16384, n] {
        let (order, stats_after_first) = reordered(sequence, sizes, budget, window, n);
        let share = class_share(&order[n..]);
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} |",
            if window == 0 {
                "0 (the plan)".to_string()
            } else {
                window.to_string()
            },
            stats_after_first.0,
            stats_after_first.1 / total as f64,
            share,
            epoch_correlation(&order, n)
        );
    }
    let buffered = shuffle_buffer(n, 1024, a.epochs);
    let _ = writeln!(
        md,
        "| 1024-sample shuffle buffer (no cache) | - | - | {:.3} | {:.3} |\n\nThe class mix per batch does not suffer from reordering (the cached records are a random subset); the cost shows as correlation between epochs: records read late in one epoch (so still cached) are read early in the next. The loader itself does not reorder (its order is the plan, a true global shuffle, with correlation about 0); this measures what the option would buy and cost.",
        class_share(&buffered[n..]),
        epoch_correlation(&buffered, n)
    );
}

/// The mean largest class share per batch of an ideal shuffle (simulated once).
fn ideal_share() -> f64 {
    let n = 100_000u32;
    let p = permutation(99, 0, n);
    class_share_of(&p, n as u64)
}

fn class_share(order: &[u32]) -> f64 {
    let n = order.iter().copied().max().map_or(1, |m| m as u64 + 1);
    class_share_of(order, n)
}

fn class_share_of(order: &[u32], n: u64) -> f64 {
    let mut sum = 0.0;
    let mut batches = 0;
    for b in order.chunks(BATCH) {
        let mut counts = vec![0usize; CLASSES as usize];
        for &id in b {
            counts[(id as u64 * CLASSES / n) as usize] += 1;
        }
        sum += *counts.iter().max().unwrap() as f64 / b.len() as f64;
        batches += 1;
    }
    sum / batches as f64
}

/// A shuffle buffer of `buffer` samples over the class-sorted stream 0..n, per epoch.
fn shuffle_buffer(n: usize, buffer: usize, epochs: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(5);
    let mut out = Vec::with_capacity(n * epochs as usize);
    for _ in 0..epochs {
        let mut buf: Vec<u32> = Vec::with_capacity(buffer);
        for id in 0..n as u32 {
            if buf.len() == buffer {
                let k = rng.below(buffer as u64) as usize;
                out.push(buf.swap_remove(k));
            }
            buf.push(id);
        }
        while !buf.is_empty() {
            let k = rng.below(buf.len() as u64) as usize;
            out.push(buf.swap_remove(k));
        }
    }
    out
}

/// The sequence with each window reordered (cached records first), run through the planned
/// cache; returns the new order and (hit rate, bytes read per epoch) after the first epoch.
fn reordered(
    sequence: &[u32],
    sizes: &[u64],
    budget: u64,
    window: usize,
    per_epoch: usize,
) -> (Vec<u32>, (f64, f64)) {
    let mut order = sequence.to_vec();
    let mut cache = PlannedCache::<()>::new(Policy::Planned, budget);
    let mut first_epoch = None;
    let step = if window == 0 { order.len() } else { window };
    let mut start = 0;
    while start < order.len() {
        let end = (start + step).min(order.len());
        if window > 0 {
            let (cached, rest): (Vec<u32>, Vec<u32>) = order[start..end]
                .iter()
                .partition(|&&id| cache.contains(id));
            order[start..end].copy_from_slice(&[cached, rest].concat());
        }
        // Next uses over what is left, in the order now planned.
        let (first, next) = first_and_next_uses(&order[start..], sizes.len());
        cache.rekey(|id| first[id as usize].saturating_add(start as u64));
        for t in start..end {
            let id = order[t];
            let nu = next[t - start].saturating_add(start as u64);
            if cache.get(id, t as u64, nu).is_none() {
                cache.insert(id, (), sizes[id as usize], t as u64, nu);
            }
            if t + 1 == per_epoch {
                first_epoch = Some(cache.stats());
            }
        }
        start = end;
    }
    let all = cache.stats();
    let first = first_epoch.unwrap_or_default();
    let epochs_after = (order.len() - per_epoch) as f64 / per_epoch as f64;
    (
        order,
        (
            (all.hits - first.hits) as f64 / (all.accesses - first.accesses) as f64,
            (all.miss_bytes - first.miss_bytes) as f64 / epochs_after,
        ),
    )
}

/// Mean Pearson correlation of a record's position in epoch e and in epoch e + 1.
fn epoch_correlation(order: &[u32], n: usize) -> f64 {
    let epochs = order.len() / n;
    let position = |e: usize| {
        let mut p = vec![0f64; n];
        for (i, &id) in order[e * n..(e + 1) * n].iter().enumerate() {
            p[id as usize] = i as f64;
        }
        p
    };
    let mut sum = 0.0;
    for e in 0..epochs - 1 {
        let (a, b) = (position(e), position(e + 1));
        let mean = (n as f64 - 1.0) / 2.0;
        let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
        for (x, y) in a.iter().zip(&b) {
            cov += (x - mean) * (y - mean);
            va += (x - mean) * (x - mean);
            vb += (y - mean) * (y - mean);
        }
        sum += cov / (va * vb).sqrt();
    }
    sum / (epochs - 1) as f64
}
