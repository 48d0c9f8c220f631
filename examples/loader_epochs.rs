//! The loader's promise, checked on a real dataset: iterate several epochs, kill the run
//! twice mid-epoch and resume it with other world sizes, and prove that every sample is seen
//! exactly once per epoch with the same augmented tensor as an uninterrupted run. Also times
//! a resume (state to first batch) and the plan for 1M and 10M samples.
//!
//! ```text
//! l3 pack ../shared/data/images -o /tmp/images-ds --levels 3
//! cargo run --release --example loader_epochs -- /tmp/images-ds [--epochs 3] [--batch 4]
//!     [--size 224] [--level K]
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use l3::loader::{
    permutation, rank_steps, Augment, DropLast, Loader, LoaderOptions, LoaderState, Partition,
};
use l3::shard::Dataset;

struct Args {
    dataset: std::path::PathBuf,
    epochs: u64,
    batch: u32,
    size: u32,
    level: Option<u8>,
}

fn args() -> Args {
    let mut it = std::env::args().skip(1);
    let dataset = it
        .next()
        .expect("usage: loader_epochs DATASET [options]")
        .into();
    let mut a = Args {
        dataset,
        epochs: 3,
        batch: 4,
        size: 224,
        level: None,
    };
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--epochs" => a.epochs = v.parse().unwrap(),
            "--batch" => a.batch = v.parse().unwrap(),
            "--size" => a.size = v.parse().unwrap(),
            "--level" => a.level = Some(v.parse().unwrap()),
            _ => panic!("unknown option {k}"),
        }
    }
    a
}

/// (epoch, sample) -> CRC-32 of the sample's tensor bytes.
type Seen = BTreeMap<(u64, u64), u32>;

fn options(a: &Args, world: u32, rank: u32) -> LoaderOptions {
    let mut o = LoaderOptions::new(Partition {
        batch_size: a.batch,
        world_size: world,
        rank,
        drop_last: DropLast::Partial,
    });
    o.augment = Augment::with_size(a.size, a.size);
    o.level = a.level;
    o.end_epoch = a.epochs;
    o
}

/// Runs `world` ranks for `steps` steps each (all if `None`) from `state`; returns the state
/// they agree on. Dropping the loaders at the end is the kill.
fn run(
    ds: &Arc<Dataset>,
    a: &Args,
    world: u32,
    state: LoaderState,
    steps: Option<usize>,
    seen: &mut Seen,
) -> LoaderState {
    let mut states = Vec::new();
    for rank in 0..world {
        let mut loader = Loader::new(ds.clone(), options(a, world, rank), state).unwrap();
        let mut k = 0;
        while steps.is_none_or(|s| k < s) {
            let Some(b) = loader.next() else { break };
            let b = b.unwrap();
            assert!(b.skipped.is_empty(), "{:?}", b.skipped);
            let per = b.shape[1] * b.shape[2] * b.shape[3];
            for (i, &s) in b.samples.iter().enumerate() {
                let values = b.data.as_f32().expect("f32 batches");
                let bytes: &[u8] = bytemuck::cast_slice(&values[i * per..(i + 1) * per]);
                let old = seen.insert((b.epoch, s), crc32fast::hash(bytes));
                assert!(old.is_none(), "sample {s} seen twice in epoch {}", b.epoch);
            }
            k += 1;
        }
        states.push(loader.state());
    }
    assert!(
        states.iter().all(|s| *s == states[0]),
        "ranks disagree: {states:?}"
    );
    states[0]
}

fn main() {
    let a = args();
    let ds = Arc::new(Dataset::open(&a.dataset).expect("opening the dataset"));
    let n = ds.len();
    let start = LoaderState {
        seed: 2026,
        ..Default::default()
    };
    println!(
        "{}: {n} records; {} epochs, batches of {}, {}x{} crops, level {:?}",
        a.dataset.display(),
        a.epochs,
        a.batch,
        a.size,
        a.size,
        a.level
    );

    let t = Instant::now();
    let mut reference = Seen::new();
    run(&ds, &a, 1, start, None, &mut reference);
    let reference_s = t.elapsed().as_secs_f64();

    // World size 2 for a third of epoch 0; killed; 3 ranks to the middle of epoch 1; killed;
    // 1 rank to the end.
    let steps_2 = (n / (2 * a.batch as u64) / 3).max(1) as usize;
    let mut seen = Seen::new();
    let s1 = run(&ds, &a, 2, start, Some(steps_2), &mut seen);
    println!("killed at {s1:?} (world size 2); resuming with world size 3");
    let steps_3 =
        ((n - s1.consumed) / (3 * a.batch as u64) + 1 + n / (6 * a.batch as u64)) as usize;
    let s2 = run(&ds, &a, 3, s1, Some(steps_3), &mut seen);
    println!("killed at {s2:?} (world size 3); resuming with world size 1");
    let t_resume = Instant::now();
    let mut probe = Loader::new(ds.clone(), options(&a, 1, 0), s2).unwrap();
    let first = probe.next().unwrap().unwrap();
    let resume_ms = 1e3 * t_resume.elapsed().as_secs_f64();
    drop((probe, first));
    let s3 = run(&ds, &a, 1, s2, None, &mut seen);
    assert_eq!(s3.epoch, a.epochs);

    for e in 0..a.epochs {
        let samples: Vec<u64> = seen.keys().filter(|k| k.0 == e).map(|k| k.1).collect();
        assert_eq!(
            samples,
            (0..n).collect::<Vec<_>>(),
            "epoch {e}: not each sample once"
        );
    }
    assert_eq!(seen, reference, "tensors differ from the uninterrupted run");
    println!(
        "OK: {} epochs x {n} samples, each exactly once per epoch across two kills (world sizes 2 -> 3 -> 1), every tensor bit-identical to the uninterrupted run ({:.1} s, {:.1} images/s)",
        a.epochs,
        reference_s,
        (a.epochs * n) as f64 / reference_s
    );
    println!("resume: state -> first batch in {resume_ms:.0} ms (plan rebuilt, one batch read, decoded, augmented)");

    for n in [1_000_000u32, 10_000_000] {
        let t = Instant::now();
        let p = permutation(2026, 5, n);
        let steps = rank_steps(
            n as u64,
            n as u64 / 2,
            &Partition {
                batch_size: 256,
                world_size: 8,
                rank: 3,
                drop_last: DropLast::Partial,
            },
        );
        std::hint::black_box((&p, &steps));
        println!(
            "plan for {n} samples (permutation + rank 3 of 8's steps from mid-epoch): {:.0} ms",
            1e3 * t.elapsed().as_secs_f64()
        );
    }
}
