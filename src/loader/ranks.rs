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
//! 1. each sample lists the ranks holding any of its records, most first (then the lowest),
//!    then, over windows, its *home* rank (the records cut into `world_size` contiguous
//!    ranges, one per rank); the samples with most records held go first (then those with
//!    fewest ranks listed, then in permutation order), each to the first rank of its list
//!    below `base + max_imbalance` samples, where `base` is the rank's slice length;
//! 2. the others go one by one, in permutation order, to the rank below its `base` that took
//!    fewest samples this epoch which come in the same global step of the next epoch as this
//!    one (ties: the furthest below its `base`, then the lowest), so what the caches keep
//!    for the next epoch is spread evenly over its batches; where no rank is below its `base`
//!    (or no next epoch is planned), to the rank furthest below its `base`;
//! 3. while a rank has fewer than `base - max_imbalance` samples (at least 1 where `base` is),
//!    the rank furthest above its `base` gives it the sample that loses least by moving (2
//!    per record the giver holds, 1 for the giver being its home rank, less the same counted
//!    at the taker; the last such): the exchange that keeps batches within the bound (with
//!    `max_imbalance = 0`, every rank's batch is exactly `base`).
//!
//! Each rank's batch lists its samples in permutation order. The caches' plan horizon is
//! the global sequence (this epoch's remaining global steps, then the next epoch's), so a
//! sample's next use is the same for every rank. A rank that reads a record another rank
//! holds keeps it only as a *spare* (key [`SPARE`]: in room no other record needs, evicted
//! first), so the caches hold together up to `world_size` times one cache without a copy
//! displacing a record; where they have room beyond the dataset, spare copies give a
//! sample a second rank to go to when the first is full (of a record held by several ranks,
//! the lowest keeps its next use at an epoch's start, the others' copies are spare). Where
//! samples are windows over records ([`RankCaches::over`]), a rank keeps records outside its
//! home range only as spares (at an epoch's start too): a sample reads neighbouring records,
//! which are then held by one rank. The state stays `(seed, epoch, consumed)`: the caches
//! start empty where a run starts (as the loader's own do), so resuming, with any world
//! size, plans from there; every rank of a run must have the same cache size, policy,
//! workers and `max_imbalance` (each rank simulates the others with its own).
//!
//! With data-loading workers (`workers = (w, count)`), worker `w` of every rank takes global
//! steps `w, w + count, ...` and has a cache of its own: the workers `w` of all ranks form
//! one group, planned as above over their steps.

use super::cache::{first_and_next_uses, NextUse, PlannedCache, Policy, SPARE};
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
    /// Each access's key for the cache: its next use, or [`SPARE`] where another rank holds
    /// the record (or, over windows, it is outside this rank's home range).
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
    /// Per record, its first access in the horizon, or [`NEVER`](super::cache::NEVER), or
    /// [`SPARE`] where a lower rank holds it too.
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
    window: Option<RecordWindow>,
}

/// Where the samples of an epoch come in the next one, and how many each rank took per next
/// global step.
struct Spread {
    /// Per sample, its global step in the next epoch.
    step: Vec<u32>,
    /// Per rank, per next global step, the samples it took this epoch.
    count: Vec<Vec<u32>>,
}

/// Per cache, the records it holds that a cache before it holds too.
fn held_lower(caches: &[PlannedCache<()>]) -> Vec<std::collections::HashSet<u32>> {
    let mut seen = std::collections::HashSet::new();
    caches
        .iter()
        .map(|c| {
            let ids: Vec<u32> = c.ids().collect();
            let dup = ids.iter().copied().filter(|id| seen.contains(id)).collect();
            seen.extend(ids);
            dup
        })
        .collect()
}

/// Record `id`'s home rank among `world` over `records` records cut into `world` contiguous
/// ranges ([`RankCaches`]' `home`).
fn home_of(id: u32, records: usize, world: usize) -> usize {
    let records = records.max(1) as u64;
    ((id as u64).min(records - 1) * world as u64 / records) as usize
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

/// The accesses of samples `ids` in order: the samples, or over `window` the records they
/// read (each once).
fn accesses_of(window: Option<&RecordWindow>, ids: Vec<u32>) -> Vec<u32> {
    match window {
        Some(w) => w.records_of(&ids),
        None => ids,
    }
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
            sequence.extend(accesses_of(window, ids));
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
            window: None,
        }
    }

    /// The same caches over samples that are windows over records (`window`; `None`: the
    /// samples are the records): the caches hold records (`sizes` are the records'), a
    /// step's accesses are the records its samples read, each once per rank and step, and a
    /// sample is held by a rank in proportion to how many of its records that rank holds.
    pub fn over(mut self, window: Option<RecordWindow>) -> Self {
        self.window = window;
        self
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
        let window = self.window.clone();
        let accesses = |ids: Vec<u32>| accesses_of(window.as_ref(), ids);
        let ids_of = |g: &GlobalStep, perm: &[u32]| -> Vec<u32> {
            g.slices
                .iter()
                .flatten()
                .map(|&p| perm[p as usize])
                .collect()
        };
        // The horizon: this epoch's global steps, then the next epoch's.
        let mut sequence: Vec<u32> = this
            .iter()
            .flat_map(|g| accesses(ids_of(g, input.perm)))
            .collect();
        let this_len = sequence.len();
        if let Some(next_perm) = input.next_perm {
            for g in global_steps(n, 0, partition, workers) {
                sequence.extend(accesses(ids_of(&g, next_perm)));
            }
        }
        let records = window.as_ref().map_or(n as usize, |w| w.records as usize);
        let (first, next) = first_and_next_uses(&sequence, records);
        // Spare copies: over windows, those outside a record's home rank; otherwise, of a
        // record several ranks hold, all but the lowest holder's.
        let windows = self.window.is_some();
        let lower: Vec<std::collections::HashSet<u32>> = if windows {
            Vec::new()
        } else {
            held_lower(&self.caches)
        };
        let (n_records, n_ranks) = (self.sizes.len(), self.caches.len());
        let first_of = |r: usize, id: u32| {
            let spare = if windows {
                home_of(id, n_records, n_ranks) != r
            } else {
                lower[r].contains(&id)
            };
            if spare {
                SPARE
            } else {
                first[id as usize]
            }
        };
        for (r, c) in self.caches.iter_mut().enumerate() {
            c.rekey(|id| first_of(r, id));
        }
        // Each sample's global step in the next epoch, and per rank how many samples it
        // took this epoch that come in each of them (step 2 spreads them).
        let mut spread = input.next_perm.map(|next_perm| {
            let global = (partition.batch_size as usize * world).max(1);
            let mut step = vec![0u32; n as usize];
            for (p, &id) in next_perm.iter().enumerate() {
                if let Some(s) = step.get_mut(id as usize) {
                    *s = (p / global) as u32;
                }
            }
            let steps = next_perm.len().div_ceil(global);
            Spread {
                step,
                count: vec![vec![0u32; steps]; world],
            }
        });
        let next_of = |t: usize| next[t];
        let mut plans: Vec<EpochPlan> = (0..world).map(|_| EpochPlan::default()).collect();
        let mut t0 = 0usize;
        for g in &this {
            let base: Vec<u64> = g.slices.iter().map(|s| s.len() as u64).collect();
            let ids = ids_of(g, input.perm);
            let owner = self.assign(&ids, &base, spread.as_mut());
            // Each access's time: its place in the global batch's accesses (a sample's own
            // place where samples are records, as padding may repeat one; over windows a
            // record's place among the records the batch reads).
            let mut at = std::collections::HashMap::new();
            let len = match &window {
                Some(w) => {
                    let global = w.records_of(&ids);
                    at.extend(global.iter().enumerate().map(|(k, &r)| (r, t0 + k)));
                    global.len()
                }
                None => ids.len(),
            };
            for (rank, plan) in plans.iter_mut().enumerate() {
                let ks: Vec<usize> = (0..ids.len()).filter(|&k| owner[k] == rank).collect();
                let mine: Vec<u32> = ks.iter().map(|&k| ids[k]).collect();
                let timed: Vec<(u32, usize)> = match &window {
                    Some(w) => w
                        .records_of(&mine)
                        .into_iter()
                        .map(|r| (r, at[&r]))
                        .collect(),
                    None => ks.iter().map(|&k| (ids[k], t0 + k)).collect(),
                };
                let mut step = self.advance(rank, &timed, &next_of);
                if window.is_some() {
                    step.records = std::mem::replace(&mut step.ids, mine);
                }
                if keep.is_none_or(|r| r as usize == rank) {
                    plan.steps.push(PlannedStep {
                        consumed_after: g.consumed_after,
                        ..step
                    });
                }
            }
            t0 += len;
        }
        debug_assert_eq!(t0, this_len);
        for (r, plan) in plans.iter_mut().enumerate() {
            if keep.is_none_or(|k| k as usize == r) {
                plan.first = (0..records as u32).map(|id| first_of(r, id)).collect();
            }
        }
        plans
    }

    /// Rank `rank`'s accesses of a global step (`(id, time)` each) through its cache, as the
    /// loader makes them: every lookup in order, then every miss offered. A record another
    /// rank holds (with a next use, not as a spare), or over windows one outside this rank's
    /// home range, is keyed [`SPARE`]: kept only in free room. The step's `ids` are the
    /// accesses' ids.
    fn advance(
        &mut self,
        rank: usize,
        accesses: &[(u32, usize)],
        next_of: &impl Fn(usize) -> NextUse,
    ) -> PlannedStep {
        let mut step = PlannedStep::default();
        let mut missed = Vec::new();
        for &(id, t) in accesses {
            let elsewhere = (0..self.caches.len())
                .any(|q| q != rank && self.caches[q].key_of(id).is_some_and(|k| k != SPARE));
            // Over windows a rank keeps records of its own range only (a sample reads
            // neighbouring records: they are then held together).
            let away = self.window.is_some() && self.home(id) != rank;
            let key = if elsewhere || away { SPARE } else { next_of(t) };
            step.ids.push(id);
            step.times.push(t as u64);
            step.keys.push(key);
            if self.caches[rank].get(id, t as u64, key).is_none() {
                missed.push(step.ids.len() - 1);
            }
        }
        for j in missed {
            let id = step.ids[j];
            let size = self.sizes.get(id as usize).copied().unwrap_or(0);
            self.caches[rank].insert(id, (), size, step.times[j], step.keys[j]);
        }
        step
    }

    /// Sample `id`'s home rank: the records split in `world_size` contiguous ranges, the
    /// rank of the range its first record is in.
    fn home(&self, id: u32) -> usize {
        home_of(id, self.sizes.len(), self.caches.len())
    }

    /// How many of sample `id`'s records rank `rank` holds (its record itself where samples
    /// are records).
    fn held(&self, rank: usize, id: u32) -> usize {
        let cache = &self.caches[rank];
        match &self.window {
            Some(w) => w
                .offsets
                .iter()
                .filter(|&&o| cache.contains(id.saturating_add(o)))
                .count(),
            None => cache.contains(id) as usize,
        }
    }

    /// The rank of each sample of a global batch `ids` whose ranks' slices have `base`
    /// samples (module documentation, steps 1 to 3).
    fn assign(&self, ids: &[u32], base: &[u64], mut spread: Option<&mut Spread>) -> Vec<usize> {
        let slack = self.max_imbalance as u64;
        let world = base.len();
        let cap: Vec<u64> = base.iter().map(|b| b + slack).collect();
        let floor: Vec<u64> = base
            .iter()
            .map(|&b| b.saturating_sub(slack).max(b.min(1)))
            .collect();
        let mut load = vec![0u64; world];
        let mut owner = vec![usize::MAX; ids.len()];
        // Each sample's ranks in order of preference: those holding any of its records, most
        // first (then the lowest), then, over windows, its home rank.
        let prefer: Vec<Vec<(usize, usize)>> = ids
            .iter()
            .map(|&id| {
                let mut p: Vec<(usize, usize)> = (0..world)
                    .map(|r| (r, self.held(r, id)))
                    .filter(|&(_, held)| held > 0)
                    .collect();
                p.sort_by_key(|&(r, held)| (std::cmp::Reverse(held), r));
                if let Some(home) = self.window.as_ref().map(|_| self.home(id)) {
                    if p.iter().all(|&(r, _)| r != home) {
                        p.push((home, 0));
                    }
                }
                p
            })
            .collect();
        // 1. Samples take their preferred ranks, those with most records held first (then
        // those with fewest choices, then in permutation order), each its first rank below
        // its cap.
        let mut order: Vec<usize> = (0..ids.len()).filter(|&k| !prefer[k].is_empty()).collect();
        order.sort_by_key(|&k| {
            let p = &prefer[k];
            (std::cmp::Reverse(p[0].1), p.len(), k)
        });
        for &k in &order {
            if let Some(&(r, _)) = prefer[k].iter().find(|&&(r, _)| load[r] < cap[r]) {
                owner[k] = r;
                load[r] += 1;
            }
        }
        // 2. The rest, in permutation order, to the rank below its base that took fewest
        // samples of this one's next-epoch global step (`spread`; ties: the furthest below
        // its base, then the lowest), else to the rank furthest below its base.
        let below = |load: &[u64], r: usize| load[r] as i64 - base[r] as i64;
        for (k, o) in owner
            .iter_mut()
            .enumerate()
            .filter(|(_, o)| **o == usize::MAX)
        {
            let under = |r: usize| load[r] < base[r];
            let r = match &spread {
                Some(sp) if (0..world).any(under) => {
                    let g = sp.step[ids[k] as usize] as usize;
                    (0..world)
                        .filter(|&r| under(r))
                        .min_by_key(|&r| (sp.count[r][g], below(&load, r), r))
                }
                _ => (0..world)
                    .filter(|&r| load[r] < cap[r])
                    .min_by_key(|&r| (below(&load, r), r)),
            }
            .expect("the caps hold the global batch");
            *o = r;
            load[r] += 1;
        }
        // 3. The exchange: a rank under its floor takes, from the rank furthest above its
        // base, the sample that loses least by moving (the last such).
        // What sample `k` gains at rank `q`: 2 per record held there, 1 for its home rank
        // where that holds none of them.
        let pull = |k: usize, q: usize| {
            prefer[k]
                .iter()
                .find(|&&(r, _)| r == q)
                .map_or(0, |&(_, held)| 2 * held as i64 + (held == 0) as i64)
        };
        while let Some(r) = (0..world).find(|&r| load[r] < floor[r]) {
            let q = (0..world)
                .max_by_key(|&q| (below(&load, q), std::cmp::Reverse(q)))
                .expect("ranks");
            let k = (0..ids.len())
                .rev()
                .filter(|&k| owner[k] == q)
                .min_by_key(|&k| pull(k, q) - pull(k, r))
                .expect("the most loaded rank is above its floor");
            owner[k] = r;
            load[q] -= 1;
            load[r] += 1;
        }
        if let Some(sp) = spread.as_mut() {
            for (k, &r) in owner.iter().enumerate() {
                let g = sp.step[ids[k] as usize] as usize;
                sp.count[r][g] += 1;
            }
        }
        owner
    }
}

/// What [`simulate_reads`] runs: the cache policy, the split across ranks, the reuse order's
/// front (0: the plain permutations; [`super::reuse`]) and, for a windowed tensor dataset,
/// the window that makes each sample read several records (`sizes` are then the records').
#[derive(Debug, Clone, Copy)]
pub struct Simulation<'a> {
    /// The caches' policy.
    pub policy: Policy,
    /// The locality split or the slices.
    pub split: Split,
    /// The reuse order's front.
    pub front: u32,
    /// The stratified order's strata (0: the plain permutation; the loader's default for
    /// windows is [`super::WINDOW_STRATA`]).
    pub strata: u32,
    /// Samples as windows over records.
    pub window: Option<&'a RecordWindow>,
}

impl Simulation<'static> {
    /// `policy` and `split`, the plain permutations, samples that are records.
    pub fn new(policy: Policy, split: Split) -> Self {
        Simulation {
            policy,
            split,
            front: 0,
            strata: 0,
            window: None,
        }
    }
}

/// Bytes each rank reads from storage in each of `epochs` epochs from `start` (a fresh run),
/// one worker per rank, by the plan alone (the loader's counters when no record fails): what
/// the locality split or the slices (`sim`) would make the loader read with caches of
/// `budget` bytes. `result[epoch][rank]`; also each epoch's largest batch imbalance (samples
/// off a slice's length).
pub fn simulate_reads(
    sizes: &[u64],
    seed: u64,
    epochs: u64,
    partition: &Partition,
    budget: u64,
    sim: &Simulation,
) -> (Vec<Vec<u64>>, Vec<u64>) {
    let Simulation {
        policy,
        split,
        front,
        strata,
        window,
    } = *sim;
    let span = window.map_or(0, |w| w.offsets.last().copied().unwrap_or(0));
    let n = (sizes.len() as u32).saturating_sub(span);
    let mut orders = super::reuse::ReuseOrders::new(seed, n, front).stratified(strata);
    let world = partition.world_size;
    let mut reads = vec![vec![0u64; world as usize]; epochs as usize];
    let mut imbalance = vec![0u64; epochs as usize];
    let max_imbalance = match split {
        Split::Locality { max_imbalance } => max_imbalance,
        Split::Slices => 0,
    };
    let mut ranks =
        RankCaches::new(world, policy, budget, sizes.to_vec(), max_imbalance).over(window.cloned());
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
                .map(|rank| {
                    let p = Partition { rank, ..*partition };
                    slices_epoch_over(input, &p, (0, 1), window)
                })
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
    let ids = step.accesses();
    let missed: Vec<usize> = (0..ids.len())
        .filter(|&j| cache.get(ids[j], step.times[j], step.keys[j]).is_none())
        .collect();
    for j in missed {
        let id = ids[j];
        let size = sizes.get(id as usize).copied().unwrap_or(0);
        cache.insert(id, (), size, step.times[j], step.keys[j]);
    }
}

#[cfg(test)]
#[path = "ranks_tests.rs"]
mod tests;
