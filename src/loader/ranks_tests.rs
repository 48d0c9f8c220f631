//! Tests of the locality split and its simulation (`super`).

use super::*;
use crate::loader::plan::{permutation, DropLast};
use crate::loader::reuse::WINDOW_STRATA;

fn partition(batch_size: u32, world_size: u32, drop_last: DropLast) -> Partition {
    Partition {
        batch_size,
        world_size,
        rank: 0,
        drop_last,
    }
}

/// Every global step of the locality split holds exactly the slices' samples (so every
/// sample once per epoch, each global batch the permutation's), each rank within the
/// imbalance bound (exactly equal at 0), over several epochs of warm caches, policies,
/// resume points and worker groups.
#[test]
fn locality_keeps_the_global_batches_and_the_bound() {
    for n in [1u32, 7, 100, 203] {
        for world in 1..=4u32 {
            for (batch, slack) in [(1u32, 0u32), (5, 0), (5, 2), (8, 100)] {
                for drop_last in [DropLast::Partial, DropLast::Drop, DropLast::Pad] {
                    for workers in [(0u32, 1u32), (1, 2)] {
                        for offsets in [None, Some(vec![0u32, 1]), Some(vec![0, 2, 3])] {
                            let window = offsets.map(|offsets| RecordWindow {
                                records: n + offsets.last().unwrap(),
                                offsets,
                            });
                            let shape = (n, world, batch, slack);
                            check_epochs(shape, drop_last, workers, window);
                        }
                    }
                }
            }
        }
    }
}

fn check_epochs(
    (n, world, batch, slack): (u32, u32, u32, u32),
    drop_last: DropLast,
    workers: (u32, u32),
    window: Option<RecordWindow>,
) {
    let p = partition(batch, world, drop_last);
    let records = window.as_ref().map_or(n, |w| w.records);
    let sizes: Vec<u64> = (0..records as u64).map(|i| 1 + i % 3).collect();
    // A third of the dataset: the caches hold it all together from 3 ranks, with room for
    // copies from 4.
    let budget = sizes.iter().sum::<u64>() / 3;
    let mut caches =
        RankCaches::new(world, Policy::Planned, budget, sizes.clone(), slack).over(window.clone());
    let mut own: Vec<PlannedCache<()>> = (0..world)
        .map(|_| PlannedCache::new(Policy::Planned, budget))
        .collect();
    for epoch in 0..3u64 {
        let perm = permutation(9, epoch, n);
        let next_perm = permutation(9, epoch + 1, n);
        let consumed = if epoch == 1 { (n / 3) as u64 } else { 0 };
        let input = EpochInput {
            perm: &perm,
            next_perm: Some(&next_perm),
            consumed,
        };
        let plans = caches.epoch(input, &p, workers, None);
        // The loader's caches, driven by the plans alone, hold what the simulation holds.
        for (rank, plan) in plans.iter().enumerate() {
            let own = &mut own[rank];
            own.rekey(|id| plan.first[id as usize]);
            plan.steps.iter().for_each(|s| drive(own, s, &sizes));
            let mut a: Vec<u32> = own.ids().collect();
            let mut b: Vec<u32> = caches.cache(rank as u32).ids().collect();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "n {n} world {world} rank {rank} epoch {epoch}");
        }
        let slices: Vec<EpochPlan> = (0..world)
            .map(|rank| {
                slices_epoch_over(input, &Partition { rank, ..p }, workers, window.as_ref())
            })
            .collect();
        let what = format!("n {n} world {world} batch {batch} slack {slack} {drop_last:?} {workers:?} {window:?} epoch {epoch}");
        for rank in 0..world as usize {
            assert_eq!(plans[rank].steps.len(), slices[rank].steps.len(), "{what}");
        }
        for k in 0..slices[0].steps.len() {
            let mut got: Vec<u32> = Vec::new();
            let mut want: Vec<u32> = Vec::new();
            for rank in 0..world as usize {
                let (a, b) = (&plans[rank].steps[k], &slices[rank].steps[k]);
                got.extend(&a.ids);
                want.extend(&b.ids);
                assert_eq!(a.consumed_after, b.consumed_after, "{what}");
                let (len, base) = (a.ids.len() as u64, b.ids.len() as u64);
                assert!(
                    len.abs_diff(base) <= slack as u64,
                    "{what}: {len} vs {base}"
                );
                assert!(len > 0 || base == 0, "{what}: an empty batch");
                match &window {
                    // In permutation order: the times increase.
                    None => assert!(a.times.windows(2).all(|w| w[0] < w[1]), "{what}"),
                    // The records the rank's samples read, each once, a time and key each.
                    Some(w) => {
                        assert_eq!(a.records, w.records_of(&a.ids), "{what}");
                        assert_eq!(a.times.len(), a.records.len(), "{what}");
                        assert_eq!(a.keys.len(), a.records.len(), "{what}");
                    }
                }
            }
            got.sort_unstable();
            want.sort_unstable();
            assert_eq!(got, want, "{what}: step {k}");
        }
    }
}

/// Every rank computes the same plan: one rank's planner and another's (started from the
/// same state) agree on every rank's steps, and a run is the same twice.
#[test]
fn every_rank_plans_the_same() {
    let p = partition(4, 3, DropLast::Partial);
    let sizes = vec![10u64; 90];
    let run = |keep: Option<u32>| {
        let mut caches = RankCaches::new(3, Policy::Planned, 300, sizes.clone(), 1);
        (0..3u64)
            .map(|e| {
                let (perm, next) = (permutation(1, e, 90), permutation(1, e + 1, 90));
                let input = EpochInput {
                    perm: &perm,
                    next_perm: Some(&next),
                    consumed: 0,
                };
                caches
                    .epoch(input, &p, (0, 1), keep)
                    .into_iter()
                    .map(|plan| plan.steps)
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    let (a, b) = (run(None), run(None));
    assert_eq!(a, b);
    // A rank keeping only its own steps (as the loader does) plans them the same.
    let own = run(Some(1));
    for (all, one) in a.iter().zip(&own) {
        assert_eq!(all[1], one[1]);
        assert!(one[0].is_empty() && one[2].is_empty());
    }
    // The warm epochs differ from the slices (the split follows the caches).
    let perm = permutation(1, 1, 90);
    let slices = slices_epoch(
        EpochInput {
            perm: &perm,
            next_perm: None,
            consumed: 0,
        },
        &p,
        (0, 1),
    );
    let ids = |steps: &[PlannedStep]| steps.iter().map(|s| s.ids.clone()).collect::<Vec<_>>();
    assert_ne!(ids(&a[1][0]), ids(&slices.steps));
}

/// The goal the split is for, on the plan alone: with R ranks each caching c of the
/// dataset, the ranks together read at most 1 - min(1, R c) + 5 % of the dataset in each
/// epoch after the first, where the slices read more (each rank's share is random).
#[test]
fn locality_reads_about_the_ideal() {
    let n = 4000u32;
    let sizes: Vec<u64> = (0..n as u64).map(|i| 800 + (i * 7919) % 400).collect();
    let total: u64 = sizes.iter().sum();
    for (world, c) in [(4u32, 0.2f64), (2, 0.3), (4, 0.3)] {
        let p = partition(32, world, DropLast::Partial);
        let budget = (c * total as f64) as u64;
        let ideal = 1.0 - (world as f64 * c).min(1.0);
        // 4 = batch_size / 8, the loader's default bound (R 4, c 0.2: 0.201; R 4, c 0.3:
        // 0.000-0.028); 0 (exactly equal batches) pays for its exchanges: up to 7 % of the
        // dataset over the ideal here (R 4, c 0.3: 0.016-0.061; R 4, c 0.2: 0.213-0.219).
        for (slack, over) in [(4u32, 0.03), (0, 0.07)] {
            let (reads, imbalance) = simulate_reads(
                &sizes,
                5,
                4,
                &p,
                budget,
                &Simulation::new(
                    Policy::Planned,
                    Split::Locality {
                        max_imbalance: slack,
                    },
                ),
            );
            assert_eq!(
                reads[0].iter().sum::<u64>(),
                total,
                "the first epoch reads all"
            );
            for e in 1..4 {
                let f = reads[e].iter().sum::<u64>() as f64 / total as f64;
                assert!(
                    f <= ideal + over,
                    "world {world} c {c} slack {slack} epoch {e}: {f:.3} vs {ideal:.3}"
                );
                assert!(imbalance[e] <= slack as u64);
            }
        }
        let (slices, _) = simulate_reads(
            &sizes,
            5,
            4,
            &p,
            budget,
            &Simulation::new(Policy::Planned, Split::Slices),
        );
        let f = slices[2].iter().sum::<u64>() as f64 / total as f64;
        assert!(f > ideal + 0.09, "world {world} c {c}: slices read {f:.3}");
    }
}

/// The split over a windowed dataset (sample `s` reads records `s` and `s + 1`, as a
/// `(t, t + 1)` pair does) in the loader's default order for windows (stratified over
/// [`WINDOW_STRATA`] ranges): with R ranks each caching c of the records, the ranks together
/// read at most 1 - min(1, R c) + 3 % of the records' bytes in each epoch after the first, at
/// batch 16 and 32 with the default bound B / 8, and batches within the bound (printed with
/// `--nocapture`). Without the strata, batch 16 at R 4, c 0.2 reads more than ideal + 5 %:
/// each global batch's samples per home rank are binomial against a bound of 2. The slices
/// read more (with 2 ranks by 1-2 % only).
#[test]
fn locality_over_windows_reads_about_the_ideal() {
    let n = 4000u32;
    let window = RecordWindow {
        offsets: vec![0, 1],
        records: n + 1,
    };
    let sizes: Vec<u64> = (0..=n as u64).map(|i| 800 + (i * 7919) % 400).collect();
    let total: u64 = sizes.iter().sum();
    let share = |r: &[u64]| r.iter().sum::<u64>() as f64 / total as f64;
    for batch in [16u32, 32] {
        for (world, c) in [(4u32, 0.2f64), (2, 0.3), (4, 0.3), (8, 0.1)] {
            let p = partition(batch, world, DropLast::Partial);
            let budget = (c * total as f64) as u64;
            let ideal = 1.0 - (world as f64 * c).min(1.0);
            let run = |split, strata| {
                simulate_reads(
                    &sizes,
                    5,
                    4,
                    &p,
                    budget,
                    &Simulation {
                        window: Some(&window),
                        strata,
                        ..Simulation::new(Policy::Planned, split)
                    },
                )
            };
            let bound = batch / 8;
            let locality = Split::Locality {
                max_imbalance: bound,
            };
            let (reads, imbalance) = run(locality, WINDOW_STRATA);
            // The first epoch reads every record, some twice (no cache between two uses).
            let first = share(&reads[0]);
            assert!(
                (1.0..1.2).contains(&first),
                "B {batch} world {world} c {c}: {first:.3}"
            );
            let after: Vec<f64> = reads[1..].iter().map(|r| share(r)).collect();
            println!("B {batch} world {world} c {c}: {after:.3?} (ideal {ideal:.2})");
            for (e, f) in after.iter().enumerate() {
                assert!(
                    *f <= ideal + 0.03,
                    "B {batch} world {world} c {c} epoch {}: {f:.3} vs {ideal:.3}",
                    e + 1
                );
                assert!(imbalance[e + 1] <= bound as u64);
            }
            // With 2 ranks the stratified slices come close (each slice holds about half of
            // each range); with more they read far more.
            let (slices, _) = run(Split::Slices, WINDOW_STRATA);
            let f = share(&slices[2]);
            let margin = if world > 2 { 0.3 } else { 0.01 };
            assert!(
                f > after[1] + margin,
                "B {batch} world {world} c {c}: slices read {f:.3}"
            );
            if batch == 16 && world == 4 && c == 0.2 {
                let (plain, _) = run(locality, 0);
                let f = share(&plain[2]);
                assert!(f > ideal + 0.05, "without strata: {f:.3}");
            }
        }
    }
}

/// Where the ranks' caches have room for more than the dataset (R c > 1), a rank that takes
/// a sample another holds keeps a spare copy in its free room, so a sample has a second rank
/// to go to when the first is full. At B 16 (a bound of 2 samples): the second epoch reads
/// nothing (the first spread its samples over the next epoch's batches), the third 0.050
/// (each record has one holder, random to that epoch's batches), then 0.016-0.037 as copies
/// are made (0.046-0.058 with one holder per record).
#[test]
fn spare_copies_balance_the_split_where_the_caches_hold_more_than_the_dataset() {
    let n = 4000u32;
    let sizes: Vec<u64> = (0..n as u64).map(|i| 800 + (i * 7919) % 400).collect();
    let total: u64 = sizes.iter().sum();
    let p = partition(16, 4, DropLast::Partial);
    let budget = (0.3 * total as f64) as u64;
    let (reads, imbalance) = simulate_reads(
        &sizes,
        5,
        8,
        &p,
        budget,
        &Simulation::new(Policy::Planned, Split::Locality { max_imbalance: 2 }),
    );
    let f: Vec<f64> = reads
        .iter()
        .map(|r| r.iter().sum::<u64>() as f64 / total as f64)
        .collect();
    for e in 1..8 {
        let over = if e < 3 { 0.06 } else { 0.05 };
        assert!(f[e] <= over, "epoch {e}: {f:.3?}");
        assert!(imbalance[e] <= 2);
    }
    // With one holder per record: 0.050 on average over these.
    let late = f[3..].iter().sum::<f64>() / 5.0;
    assert!(late <= 0.035, "{f:.3?}");
    // The copies exist: some record is held by two ranks.
    let mut caches = RankCaches::new(4, Policy::Planned, budget, sizes.clone(), 2);
    for e in 0..3u64 {
        let (perm, next) = (permutation(5, e, n), permutation(5, e + 1, n));
        let input = EpochInput {
            perm: &perm,
            next_perm: Some(&next),
            consumed: 0,
        };
        caches.epoch(input, &p, (0, 1), Some(0));
    }
    let held: usize = (0..4).map(|r| caches.cache(r).len()).sum();
    let distinct: std::collections::HashSet<u32> =
        (0..4).flat_map(|r| caches.cache(r).ids()).collect();
    assert!(
        held > distinct.len(),
        "{held} held, {} distinct",
        distinct.len()
    );
}
