//! The reuse order (issue 47, `LoaderOptions::reuse_front`) end to end: the loader's batches
//! follow `reuse_order` (each epoch's front is the previous epoch's tail); killed and resumed
//! with other world sizes (and caches, and the locality split), every sample is seen exactly
//! once per epoch; the loaders read what the plan says, and less than with the plain
//! permutation. The stratified order (`LoaderOptions::strata`) resumes the same way.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use l3::loader::{
    epoch_order, reuse_order, simulate_reads, Augment, DropLast, Loader, LoaderOptions,
    LoaderState, Partition, Policy, Simulation, Split,
};
use l3::shard::Dataset;

use common::pack_samples as pack;

fn options(batch: u32, world: u32, rank: u32, front: u32) -> LoaderOptions {
    let mut o = LoaderOptions::new(Partition {
        batch_size: batch,
        world_size: world,
        rank,
        drop_last: DropLast::Partial,
    });
    o.seed = 11;
    o.augment = Augment::with_size(16, 16);
    o.level = Some(0);
    o.end_epoch = 3;
    o.threads = 2;
    o.reuse_front = front;
    o
}

fn sizes(ds: &Dataset) -> Vec<u64> {
    (0..ds.len())
        .map(|i| ds.entry(i).unwrap().level(0).unwrap().len)
        .collect()
}

/// Runs `world` ranks for `steps` global steps (all if `None`) from `state`; per epoch, per
/// global step, the union of the ranks' samples; returns the state they agree on.
fn run(
    ds: &Arc<Dataset>,
    (world, batch, front, cache, strata): (u32, u32, u32, u64, Option<u32>),
    state: LoaderState,
    steps: Option<usize>,
    seen: &mut Vec<Vec<BTreeSet<u64>>>,
) -> LoaderState {
    let mut loaders: Vec<Loader> = (0..world)
        .map(|r| {
            let mut o = options(batch, world, r, front);
            o.cache_bytes = cache;
            o.max_imbalance = Some(1);
            o.strata = strata;
            Loader::new(ds.clone(), o, state).unwrap()
        })
        .collect();
    let mut per_rank: Vec<Vec<(u64, Vec<u64>)>> = Vec::new();
    for l in &mut loaders {
        let mut mine = Vec::new();
        while steps.is_none_or(|s| mine.len() < s) {
            let Some(b) = l.next() else { break };
            let b = b.unwrap();
            assert!(b.skipped.is_empty());
            mine.push((b.epoch, b.samples.clone()));
        }
        per_rank.push(mine);
    }
    for k in 0..per_rank[0].len() {
        let epoch = per_rank[0][k].0 as usize;
        while seen.len() <= epoch {
            seen.push(Vec::new());
        }
        let step: BTreeSet<u64> = per_rank.iter().flat_map(|r| r[k].1.clone()).collect();
        let count: usize = per_rank.iter().map(|r| r[k].1.len()).sum();
        assert_eq!(step.len(), count, "a sample twice in one step");
        seen[epoch].push(step);
    }
    let states: Vec<LoaderState> = loaders.iter().map(|l| l.state()).collect();
    assert!(states.iter().all(|s| *s == states[0]), "{states:?}");
    states[0]
}

/// Each epoch of `seen` (its global steps, whatever the world sizes that took them) holds
/// every sample once, step by step in `orders`' sequence.
fn check_epochs(seen: &[Vec<BTreeSet<u64>>], orders: &[Vec<u32>], n: u32) {
    for (e, steps) in seen.iter().enumerate() {
        let mut all: Vec<u64> = steps.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..n as u64).collect::<Vec<_>>(), "epoch {e}");
        let order = &orders[e];
        let mut at = 0usize;
        for s in steps {
            let want: BTreeSet<u64> = order[at..at + s.len()].iter().map(|&x| x as u64).collect();
            assert_eq!(s, &want, "epoch {e} at {at}");
            at += s.len();
        }
    }
}

/// The global steps of `order` in batches of `g` (sets).
fn steps_of(order: &[u32], g: usize) -> Vec<BTreeSet<u64>> {
    order
        .chunks(g)
        .map(|c| c.iter().map(|&s| s as u64).collect())
        .collect()
}

/// One uninterrupted rank follows `reuse_order`; 3 ranks with caches (the locality split),
/// killed, 2 ranks without, killed, 4 ranks with caches to the end: each global step holds
/// the samples of `reuse_order`'s step, so each epoch sees every sample exactly once, and
/// its front is the previous epoch's tail.
#[test]
fn reuse_order_keeps_coverage_and_resumes_across_world_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 10, 1) as u32;
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let total: u64 = sizes(&ds).iter().sum();
    let front = n * 2 / 5;
    let start = LoaderState {
        seed: 11,
        ..Default::default()
    };
    let mut one = Vec::new();
    run(&ds, (1, 4, front, 0, None), start, None, &mut one);
    let orders: Vec<Vec<u32>> = (0..3).map(|e| reuse_order(11, e, n, front)).collect();
    for e in 0..3 {
        assert_eq!(one[e], steps_of(&orders[e], 4), "epoch {e}");
    }
    // The front of epochs 1 and 2 is the previous epoch's tail, and the order is not the
    // plain permutation.
    for e in 1..3 {
        let tail: BTreeSet<u32> = orders[e - 1][(n - front) as usize..]
            .iter()
            .copied()
            .collect();
        let head: BTreeSet<u32> = orders[e][..front as usize].iter().copied().collect();
        assert_eq!(head, tail, "epoch {e}");
        assert_ne!(orders[e], l3::loader::permutation(11, e as u64, n));
    }
    let mut seen = Vec::new();
    let cache = total / 5;
    let s1 = run(&ds, (3, 4, front, cache, None), start, Some(7), &mut seen);
    assert_eq!((s1.epoch, s1.consumed), (1, 24), "{s1:?}");
    let s2 = run(&ds, (2, 8, front, 0, None), s1, Some(2), &mut seen);
    assert_eq!((s2.epoch, s2.consumed), (1, 56), "{s2:?}");
    let s3 = run(&ds, (4, 3, front, cache, None), s2, None, &mut seen);
    assert_eq!(s3.epoch, 3);
    check_epochs(&seen, &orders, n);
}

/// The stratified order (`LoaderOptions::strata`, here with the reuse order too): one
/// uninterrupted rank follows `epoch_order`, which differs from the reuse order alone; 3 ranks
/// with caches (the locality split), killed, 2 ranks without, killed, 4 ranks with caches to
/// the end: each global step holds the samples of `epoch_order`'s step, so each epoch sees
/// every sample exactly once.
#[test]
fn stratified_order_keeps_coverage_and_resumes_across_world_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 10, 1) as u32;
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let total: u64 = sizes(&ds).iter().sum();
    let (front, strata) = (n / 4, 5);
    let start = LoaderState {
        seed: 11,
        ..Default::default()
    };
    let mut one = Vec::new();
    run(&ds, (1, 4, front, 0, Some(strata)), start, None, &mut one);
    let orders: Vec<Vec<u32>> = (0..3)
        .map(|e| epoch_order(11, e, n, strata, front))
        .collect();
    for e in 0..3 {
        assert_eq!(one[e], steps_of(&orders[e], 4), "epoch {e}");
        assert_ne!(orders[e], reuse_order(11, e as u64, n, front), "epoch {e}");
    }
    let mut seen = Vec::new();
    let cache = total / 5;
    let s1 = run(
        &ds,
        (3, 4, front, cache, Some(strata)),
        start,
        Some(7),
        &mut seen,
    );
    let s2 = run(&ds, (2, 8, front, 0, Some(strata)), s1, Some(2), &mut seen);
    let s3 = run(&ds, (4, 3, front, cache, Some(strata)), s2, None, &mut seen);
    assert_eq!(s3.epoch, 3);
    check_epochs(&seen, &orders, n);
}

/// 1 and 3 ranks with caches of a fifth of the dataset each: the loaders read exactly what
/// `simulate_reads` says for the reuse order (and the plain permutation). With one rank,
/// each epoch's first step after the first reads nothing from storage with either order: with the
/// reuse order the previous epoch's last samples are still cached; with the plain one the
/// planned cache (its horizon runs into the next epoch) already holds the next epoch's
/// first samples, which is why the reuse order saves no bytes over it (docs/cache-study.md).
#[test]
fn reuse_order_reads_what_the_plan_says() {
    let dir = tempfile::tempdir().unwrap();
    let n = pack(dir.path(), 10, 1) as u32;
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    let sizes = sizes(&ds);
    let total: u64 = sizes.iter().sum();
    let budget = total / 5;
    for world in [1u32, 3] {
        let front = l3::loader::front_for(n, total, budget, world);
        // Per epoch, per rank, bytes read; and the bytes of each epoch's first step.
        let reads = |front: u32| -> (Vec<Vec<u64>>, Vec<u64>) {
            let mut read = vec![vec![0u64; world as usize]; 3];
            let mut first = vec![0u64; 3];
            for rank in 0..world {
                let mut o = options(4, world, rank, front);
                o.cache_bytes = budget;
                o.max_imbalance = Some(1);
                let state = LoaderState {
                    seed: 11,
                    ..Default::default()
                };
                let mut last_epoch = None;
                for b in Loader::new(ds.clone(), o, state).unwrap() {
                    let b = b.unwrap();
                    read[b.epoch as usize][rank as usize] += b.bytes_read;
                    if last_epoch != Some(b.epoch) {
                        first[b.epoch as usize] += b.bytes_read;
                        last_epoch = Some(b.epoch);
                    }
                }
            }
            (read, first)
        };
        let p = Partition {
            batch_size: 4,
            world_size: world,
            rank: 0,
            drop_last: DropLast::Partial,
        };
        let split = if world > 1 {
            Split::Locality { max_imbalance: 1 }
        } else {
            Split::Slices
        };
        let plan = |front| {
            simulate_reads(
                &sizes,
                11,
                3,
                &p,
                budget,
                &Simulation {
                    front,
                    ..Simulation::new(Policy::Planned, split)
                },
            )
            .0
        };
        let ((plain, plain_first), (reuse, reuse_first)) = (reads(0), reads(front));
        assert_eq!(plain, plan(0), "world {world}");
        assert_eq!(reuse, plan(front), "world {world}");
        assert!(front > 4 * world, "world {world}: front {front}");
        if world == 1 {
            // (With ranks, the bound on the split moves a sample or two to a rank without it.)
            assert_eq!(reuse_first[1..], [0, 0], "{reuse_first:?}");
            assert_eq!(plain_first[1..], [0, 0], "{plain_first:?}");
        }
        assert!(plain_first[0] > 0 && reuse_first[0] > 0);
    }
}
