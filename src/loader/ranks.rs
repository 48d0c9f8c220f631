//! Which rank takes which sample: each epoch's steps for one rank, as accesses the cache is
//! driven by ([`EpochPlan`]), split in one of two ways ([`Split`]).
//!
//! **Slices** (the plan's documented split, [`super::plan::rank_steps`]): at each global
//! step rank `r` takes the `r`-th slice of the global batch.
//!
//! **Locality** (SOLAR's partition): the global batches are the same (the epoch's
//! permutation, consumed `batch_size x world_size` at a time, so every sample is seen once
//! per epoch and each global batch is a uniform sample), but which rank takes which sample
//! of a global batch follows what each rank's cache holds. Every rank's cache contents are a
//! function of the plan: each rank simulates every rank's cache ([`RankCaches`], the same
//! [`PlannedCache`] the loader runs, holding nothing) step by step, so all ranks agree
//! without communication. At each global step:
//!
//! 1. each sample a rank holds goes to that rank (the lowest such rank with room), up to
//!    `base + max_imbalance` samples, where `base` is the rank's slice length;
//! 2. the others go one by one, in permutation order, to the rank furthest below its `base`
//!    (ties: the lowest rank): the loads end as even as the held samples allow;
//! 3. while a rank has fewer than `base - max_imbalance` samples (at least 1 where `base` is),
//!    the most loaded rank gives it its last sample: the exchange that keeps batches within
//!    the bound (with `max_imbalance = 0`, every rank's batch is exactly `base`).
//!
//! Each rank's batch lists its samples in permutation order. The caches' plan horizon is
//! the global sequence (this epoch's remaining global steps, then the next epoch's), so a
//! sample's next use is the same for every rank; a rank that reads a sample another rank
//! holds (it was moved) does not cache it, so the caches stay disjoint and hold together up
//! to `world_size` times one cache. The state stays `(seed, epoch, consumed)`: the caches
//! start empty where a run starts (as the loader's own do), so resuming, with any world
//! size, plans from there; every rank of a run must have the same cache size, policy,
//! workers and `max_imbalance` (each rank simulates the others with its own).
//!
//! With data-loading workers (`workers = (w, count)`), worker `w` of every rank takes global
//! steps `w, w + count, ...` and has a cache of its own: the workers `w` of all ranks form
//! one group, planned as above over their steps.

use super::cache::{first_and_next_uses, NextUse, PlannedCache, Policy, NEVER};
use super::plan::{rank_steps, Partition};

/// How a global batch's samples are split among the ranks (module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Rank `r` takes the `r`-th slice.
    Slices,
    /// Each sample to the rank whose cache holds it, each rank's batch within
    /// `max_imbalance` samples of its slice's length.
    Locality {
        /// Most samples a rank's batch may differ from its slice's length (0: exactly equal).
        max_imbalance: u32,
    },
}

/// One step of one rank, as its cache sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlannedStep {
    /// The samples, in permutation order.
    pub ids: Vec<u32>,
    /// With a [`RecordWindow`]: the records the samples read, each once, in the order the
    /// samples first read them (the cache's accesses); empty: the samples are the records.
    pub records: Vec<u32>,
    /// Each access's time in the plan's horizon (the cache's clock).
    pub times: Vec<u64>,
    /// Each access's key for the cache: its next use, or [`NEVER`] where a miss is not to be
    /// kept (another rank holds the sample).
    pub keys: Vec<NextUse>,
    /// `consumed` after this global step completes.
    pub consumed_after: u64,
}

impl PlannedStep {
    /// The records the step reads through the cache, in order: [`PlannedStep::records`], or
    /// the samples where a sample is a record. `times` and `keys` are per access.
    pub fn accesses(&self) -> &[u32] {
        if self.records.is_empty() {
            &self.ids
        } else {
            &self.records
        }
    }
}

/// Samples that are windows over records (a windowed tensor dataset): sample `s` reads
/// records `s + o` for each of `offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordWindow {
    /// The distinct offsets, ascending.
    pub offsets: Vec<u32>,
    /// Records in the dataset (at least the samples plus the largest offset).
    pub records: u32,
}

impl RecordWindow {
    /// The records of the samples `ids`, each once, in the order the samples first read
    /// them.
    pub fn records_of(&self, ids: &[u32]) -> Vec<u32> {
        let mut seen = std::collections::HashSet::with_capacity(ids.len() * self.offsets.len());
        let mut out = Vec::with_capacity(ids.len() * self.offsets.len());
        for &s in ids {
            for &o in &self.offsets {
                let r = s.saturating_add(o);
                if seen.insert(r) {
                    out.push(r);
                }
            }
        }
        out
    }
}

/// One rank's steps of one epoch (from where it starts) and each record's first use in the
/// plan's horizon (for re-keying the cache at the epoch's start).
#[derive(Debug, Clone, Default)]
pub struct EpochPlan {
    /// The steps.
    pub steps: Vec<PlannedStep>,
    /// Per record, its first access in the horizon, or [`NEVER`].
    pub first: Vec<NextUse>,
}

/// What an epoch is planned from: the epoch's permutation, the next one's (the cache's
/// horizon; `None` without a cache or at the last epoch), and the samples already consumed.
#[derive(Debug, Clone, Copy)]
pub struct EpochInput<'a> {
    /// This epoch's permutation.
    pub perm: &'a [u32],
    /// The next epoch's permutation, for the horizon.
    pub next_perm: Option<&'a [u32]>,
    /// Samples of this epoch consumed before the plan starts.
    pub consumed: u64,
}

/// Each rank's simulated cache of one worker group (module documentation).
pub struct RankCaches {
    caches: Vec<PlannedCache<()>>,
    sizes: Vec<u64>,
    max_imbalance: u32,
}

/// The steps of a worker among `steps`: `w, w + count, ...`.
fn worker_steps<T>(steps: Vec<T>, workers: (u32, u32)) -> impl Iterator<Item = T> {
    steps
        .into_iter()
        .skip(workers.0 as usize)
        .step_by(workers.1.max(1) as usize)
}

/// Every rank's steps of the worker `workers` from `consumed` samples: per global step, per
/// rank, the permutation positions (padding wrapped) and the `consumed` after it.
fn global_steps(n: u64, consumed: u64, p: &Partition, workers: (u32, u32)) -> Vec<GlobalStep> {
    let per_rank: Vec<Vec<super::plan::StepSlice>> = (0..p.world_size)
        .map(|rank| {
            let q = Partition { rank, ..*p };
            worker_steps(rank_steps(n, consumed, &q), workers).collect()
        })
        .collect();
    let count = per_rank.first().map_or(0, Vec::len);
    (0..count)
        .map(|k| GlobalStep {
            slices: per_rank
                .iter()
                .map(|steps| steps[k].positions(n).collect())
                .collect(),
            consumed_after: per_rank[0][k].consumed_after,
        })
        .collect()
}

struct GlobalStep {
    /// Per rank, its slice's permutation positions.
    slices: Vec<Vec<u64>>,
    consumed_after: u64,
}

/// One rank's steps of an epoch split in slices (as [`rank_steps`] gives them), the cache's
/// horizon being this rank's own accesses (this epoch's, then the next epoch's).
pub fn slices_epoch(input: EpochInput, partition: &Partition, workers: (u32, u32)) -> EpochPlan {
    slices_epoch_over(input, partition, workers, None)
}

/// [`slices_epoch`] whose samples are windows over records (`window`): each step's accesses
/// are the records its samples read, each once per step ([`PlannedStep::records`]), and the
/// horizon, the times, the keys and `first` are the records'. So a record that the samples
/// `t - 1` and `t` both read is one entry of the cache, kept until its last use.
pub fn slices_epoch_over(
    input: EpochInput,
    partition: &Partition,
    workers: (u32, u32),
    window: Option<&RecordWindow>,
) -> EpochPlan {
    let n = input.perm.len() as u64;
    let mine = |consumed| worker_steps(rank_steps(n, consumed, partition), workers);
    let mut steps: Vec<PlannedStep> = mine(input.consumed)
        .map(|s| {
            let ids: Vec<u32> = s.positions(n).map(|pos| input.perm[pos as usize]).collect();
            PlannedStep {
                records: window.map_or_else(Vec::new, |w| w.records_of(&ids)),
                ids,
                consumed_after: s.consumed_after,
                ..PlannedStep::default()
            }
        })
        .collect();
    let mut sequence: Vec<u32> = steps.iter().flat_map(|s| s.accesses().to_vec()).collect();
    if let Some(next_perm) = input.next_perm {
        for s in mine(0) {
            let ids: Vec<u32> = s.positions(n).map(|pos| next_perm[pos as usize]).collect();
            match window {
                Some(w) => sequence.extend(w.records_of(&ids)),
                None => sequence.extend(ids),
            }
        }
    }
    let records = window.map_or(n as usize, |w| w.records as usize);
    let (first, next) = first_and_next_uses(&sequence, records);
    let mut t = 0usize;
    for s in &mut steps {
        let len = s.accesses().len();
        s.times = (t as u64..(t + len) as u64).collect();
        s.keys = next[t..t + len].to_vec();
        t += len;
    }
    EpochPlan { steps, first }
}

impl RankCaches {
    /// Empty caches of `world_size` ranks, each of `budget` bytes evicting by `policy`, over
    /// records of `sizes` bytes (what the loader's cache counts for each record).
    pub fn new(
        world_size: u32,
        policy: Policy,
        budget: u64,
        sizes: Vec<u64>,
        max_imbalance: u32,
    ) -> Self {
        RankCaches {
            caches: (0..world_size)
                .map(|_| PlannedCache::new(policy, budget))
                .collect(),
            sizes,
            max_imbalance,
        }
    }

    /// The simulated cache of `rank`.
    pub fn cache(&self, rank: u32) -> &PlannedCache<()> {
        &self.caches[rank as usize]
    }

    /// Every rank's steps of an epoch split by locality (module documentation), the caches
    /// advanced through it: one plan per rank, only `keep`'s steps kept when it is given
    /// (the others' plans empty). `partition`'s rank is ignored; its world size must be the
    /// caches'.
    pub fn epoch(
        &mut self,
        input: EpochInput,
        partition: &Partition,
        workers: (u32, u32),
        keep: Option<u32>,
    ) -> Vec<EpochPlan> {
        let n = input.perm.len() as u64;
        let world = partition.world_size as usize;
        assert_eq!(world, self.caches.len(), "one simulated cache per rank");
        let this = global_steps(n, input.consumed, partition, workers);
        // The horizon: this epoch's global steps, then the next epoch's.
        let mut sequence: Vec<u32> = this
            .iter()
            .flat_map(|g| g.slices.iter().flatten().map(|&p| input.perm[p as usize]))
            .collect();
        let this_len = sequence.len();
        if let Some(next_perm) = input.next_perm {
            for g in global_steps(n, 0, partition, workers) {
                sequence.extend(g.slices.iter().flatten().map(|&p| next_perm[p as usize]));
            }
        }
        let (first, next) = first_and_next_uses(&sequence, n as usize);
        for c in &mut self.caches {
            c.rekey(|id| first[id as usize]);
        }
        let next_of = |t: usize| next[t];
        let mut plans: Vec<EpochPlan> = (0..world).map(|_| EpochPlan::default()).collect();
        let mut t0 = 0usize;
        for g in &this {
            let base: Vec<u64> = g.slices.iter().map(|s| s.len() as u64).collect();
            let ids: Vec<u32> = g
                .slices
                .iter()
                .flatten()
                .map(|&p| input.perm[p as usize])
                .collect();
            let owner = self.assign(&ids, &base);
            for (rank, plan) in plans.iter_mut().enumerate() {
                let ks: Vec<usize> = (0..ids.len()).filter(|&k| owner[k] == rank).collect();
                let step = self.advance(rank, &ks, &ids, t0, &next_of);
                if keep.is_none_or(|r| r as usize == rank) {
                    plan.steps.push(PlannedStep {
                        consumed_after: g.consumed_after,
                        ..step
                    });
                }
            }
            t0 += ids.len();
        }
        debug_assert_eq!(t0, this_len);
        match keep {
            Some(r) => plans[r as usize].first = first,
            None => plans.iter_mut().for_each(|plan| plan.first = first.clone()),
        }
        plans
    }

    /// Rank `rank`'s accesses `ks` of a global step (samples `ids`, the first at time `t0`)
    /// through its cache, as the loader makes them: every lookup in order, then every miss
    /// offered in order (kept only if no other rank holds it).
    fn advance(
        &mut self,
        rank: usize,
        ks: &[usize],
        ids: &[u32],
        t0: usize,
        next_of: &impl Fn(usize) -> NextUse,
    ) -> PlannedStep {
        let mut step = PlannedStep::default();
        let mut missed = Vec::new();
        for &k in ks {
            let (id, t) = (ids[k], t0 + k);
            step.ids.push(id);
            step.times.push(t as u64);
            step.keys.push(next_of(t));
            if self.caches[rank].get(id, t as u64, next_of(t)).is_none() {
                missed.push(step.ids.len() - 1);
            }
        }
        for j in missed {
            let id = step.ids[j];
            let elsewhere =
                (0..self.caches.len()).any(|q| q != rank && self.caches[q].contains(id));
            if elsewhere {
                step.keys[j] = NEVER;
            }
            let size = self.sizes.get(id as usize).copied().unwrap_or(0);
            self.caches[rank].insert(id, (), size, step.times[j], step.keys[j]);
        }
        step
    }

    /// The rank of each sample of a global batch `ids` whose ranks' slices have `base`
    /// samples (module documentation, steps 1 to 3).
    fn assign(&self, ids: &[u32], base: &[u64]) -> Vec<usize> {
        let slack = self.max_imbalance as u64;
        let world = base.len();
        let cap: Vec<u64> = base.iter().map(|b| b + slack).collect();
        let floor: Vec<u64> = base
            .iter()
            .map(|&b| b.saturating_sub(slack).max(b.min(1)))
            .collect();
        let mut load = vec![0u64; world];
        let mut owner = vec![usize::MAX; ids.len()];
        // 1. Held samples to their holders, within the cap.
        for (k, &id) in ids.iter().enumerate() {
            if let Some(r) = (0..world).find(|&r| load[r] < cap[r] && self.caches[r].contains(id)) {
                owner[k] = r;
                load[r] += 1;
            }
        }
        // 2. The rest to the rank furthest below its base.
        let below = |load: &[u64], r: usize| load[r] as i64 - base[r] as i64;
        for o in owner.iter_mut().filter(|o| **o == usize::MAX) {
            let r = (0..world)
                .filter(|&r| load[r] < cap[r])
                .min_by_key(|&r| (below(&load, r), r))
                .expect("the caps hold the global batch");
            *o = r;
            load[r] += 1;
        }
        // 3. The exchange: a rank under its floor takes the most loaded rank's last sample.
        while let Some(r) = (0..world).find(|&r| load[r] < floor[r]) {
            let q = (0..world)
                .max_by_key(|&q| (below(&load, q), std::cmp::Reverse(q)))
                .expect("ranks");
            let k = (0..ids.len())
                .rev()
                .find(|&k| owner[k] == q)
                .expect("the most loaded rank is above its floor");
            owner[k] = r;
            load[q] -= 1;
            load[r] += 1;
        }
        owner
    }
}

/// Bytes each rank reads from storage in each of `epochs` epochs from `start` (a fresh run),
/// one worker per rank, by the plan alone (the loader's counters when no record fails): what
/// the locality split (`split`) or the slices would make the loader read with caches of
/// `budget` bytes. `result[epoch][rank]`; also each epoch's largest batch imbalance (samples
/// off a slice's length).
pub fn simulate_reads(
    sizes: &[u64],
    seed: u64,
    epochs: u64,
    partition: &Partition,
    budget: u64,
    policy: Policy,
    split: Split,
) -> (Vec<Vec<u64>>, Vec<u64>) {
    simulate_reads_reuse(sizes, seed, epochs, partition, budget, policy, split, 0)
}

/// [`simulate_reads`] with the epochs in the reuse order of `front` samples
/// ([`super::reuse`]; 0: the plain permutations).
#[allow(clippy::too_many_arguments)]
pub fn simulate_reads_reuse(
    sizes: &[u64],
    seed: u64,
    epochs: u64,
    partition: &Partition,
    budget: u64,
    policy: Policy,
    split: Split,
    front: u32,
) -> (Vec<Vec<u64>>, Vec<u64>) {
    let n = sizes.len() as u32;
    let mut orders = super::reuse::ReuseOrders::new(seed, n, front);
    let world = partition.world_size;
    let mut reads = vec![vec![0u64; world as usize]; epochs as usize];
    let mut imbalance = vec![0u64; epochs as usize];
    let max_imbalance = match split {
        Split::Locality { max_imbalance } => max_imbalance,
        Split::Slices => 0,
    };
    let mut ranks = RankCaches::new(world, policy, budget, sizes.to_vec(), max_imbalance);
    let mut own: Vec<PlannedCache<()>> = (0..world)
        .map(|_| PlannedCache::new(policy, budget))
        .collect();
    for epoch in 0..epochs {
        let perm = orders.order(epoch);
        let next_perm = (epoch + 1 < epochs).then(|| orders.order(epoch + 1));
        let input = EpochInput {
            perm: &perm,
            next_perm: next_perm.as_deref(),
            consumed: 0,
        };
        let plans = match split {
            Split::Locality { .. } => ranks.epoch(input, partition, (0, 1), None),
            Split::Slices => (0..world)
                .map(|rank| slices_epoch(input, &Partition { rank, ..*partition }, (0, 1)))
                .collect(),
        };
        let slices: Vec<Vec<super::plan::StepSlice>> = (0..world)
            .map(|rank| rank_steps(n as u64, 0, &Partition { rank, ..*partition }))
            .collect();
        for (rank, plan) in plans.iter().enumerate() {
            let cache = &mut own[rank];
            cache.rekey(|id| plan.first[id as usize]);
            let before = cache.stats().miss_bytes;
            for (k, step) in plan.steps.iter().enumerate() {
                let base = slices[rank][k].len();
                imbalance[epoch as usize] =
                    imbalance[epoch as usize].max(base.abs_diff(step.ids.len() as u64));
                drive(cache, step, sizes);
            }
            reads[epoch as usize][rank] = cache.stats().miss_bytes - before;
        }
    }
    (reads, imbalance)
}

/// One step through `cache` as the loader makes it: every lookup, then every miss offered.
pub fn drive(cache: &mut PlannedCache<()>, step: &PlannedStep, sizes: &[u64]) {
    let missed: Vec<usize> = (0..step.ids.len())
        .filter(|&j| {
            cache
                .get(step.ids[j], step.times[j], step.keys[j])
                .is_none()
        })
        .collect();
    for j in missed {
        let id = step.ids[j];
        let size = sizes.get(id as usize).copied().unwrap_or(0);
        cache.insert(id, (), size, step.times[j], step.keys[j]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::plan::{permutation, DropLast};

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
                            check_epochs(n, world, batch, slack, drop_last, workers);
                        }
                    }
                }
            }
        }
    }

    fn check_epochs(
        n: u32,
        world: u32,
        batch: u32,
        slack: u32,
        drop_last: DropLast,
        workers: (u32, u32),
    ) {
        let p = partition(batch, world, drop_last);
        let sizes: Vec<u64> = (0..n as u64).map(|i| 1 + i % 3).collect();
        let budget = sizes.iter().sum::<u64>() / 3;
        let mut caches = RankCaches::new(world, Policy::Planned, budget, sizes, slack);
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
            let slices: Vec<EpochPlan> = (0..world)
                .map(|rank| slices_epoch(input, &Partition { rank, ..p }, workers))
                .collect();
            let what = format!("n {n} world {world} batch {batch} slack {slack} {drop_last:?} {workers:?} epoch {epoch}");
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
                    // In permutation order: the times increase.
                    assert!(a.times.windows(2).all(|w| w[0] < w[1]), "{what}");
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
            // 4 = batch_size / 8, the loader's default bound; 0 (exactly equal batches)
            // pays for its exchanges: up to 7 % of the dataset over the ideal here (R 4,
            // c 0.3: 0.062 against 0; R 4, c 0.2: 0.251 against 0.2).
            for (slack, over) in [(4u32, 0.05), (0, 0.07)] {
                let (reads, imbalance) = simulate_reads(
                    &sizes,
                    5,
                    4,
                    &p,
                    budget,
                    Policy::Planned,
                    Split::Locality {
                        max_imbalance: slack,
                    },
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
            let (slices, _) =
                simulate_reads(&sizes, 5, 4, &p, budget, Policy::Planned, Split::Slices);
            let f = slices[2].iter().sum::<u64>() as f64 / total as f64;
            assert!(f > ideal + 0.09, "world {world} c {c}: slices read {f:.3}");
        }
    }
}
