//! Cache study: hit rate and bytes read of the loader's record cache with planned eviction
//! (farthest next use, with bypass) against LRU and no cache, for budgets of 10-90% of the
//! dataset over several shuffled epochs. Runs `l3::loader::simulate`, the same cache code the
//! loader runs, on the loader's own access sequence (`l3::loader::permutation` per epoch).
//!
//! ```text
//! cargo run --release --example cache_study -- [--records N] [--epochs E] [--dataset DIR]
//!     [--out docs/cache-study]
//! ```
//!
//! Record sizes: those of a packed dataset (`--dataset`, cycled to N records), else a
//! log-normal spread (median 100 kB, sigma 0.8) from a fixed seed. Writes `OUT.md` (tables)
//! and `OUT.png` (hit rate after the first epoch vs budget: planned blue, LRU red, no cache
//! grey, the line y = budget fraction black).

use std::fmt::Write as _;
use std::path::PathBuf;

use l3::loader::{permutation, simulate, Policy, SplitMix64};

struct Args {
    records: u32,
    epochs: u64,
    dataset: Option<PathBuf>,
    out: PathBuf,
}

fn args() -> Args {
    let mut a = Args {
        records: 20_000,
        epochs: 4,
        dataset: None,
        out: PathBuf::from("docs/cache-study"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--records" => a.records = v.parse().expect("--records N"),
            "--epochs" => a.epochs = v.parse().expect("--epochs E"),
            "--dataset" => a.dataset = Some(v.into()),
            "--out" => a.out = v.into(),
            _ => panic!("unknown option {k}"),
        }
    }
    a
}

fn sizes(a: &Args) -> (Vec<u64>, String) {
    if let Some(dir) = &a.dataset {
        let ds = l3::shard::Dataset::open(dir).expect("opening the dataset");
        let real: Vec<u64> = ds
            .shards()
            .iter()
            .flat_map(|s| s.records().iter().map(|r| r.levels.iter().map(|l| l.len).sum()))
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

fn main() {
    let a = args();
    let (sizes, source) = sizes(&a);
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
        "\n![hit rate vs budget](cache-study.png)\n\nThe plot: x = budget fraction 0..1, y = hit rate 0..1 after the first epoch; blue = planned, red = LRU, grey = no cache, black = y = x (the steady-state optimum for independent shuffles).\n\nNot measured here: reordering within a window of the plan to raise hits beyond f (SOLAR's idea), which costs shuffle quality."
    );
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
