//! The record cache: compressed records in host memory under a byte budget, evicted by the
//! plan. The loader knows every access it will make (its steps of this epoch and the next), so
//! on a miss it can apply Belady's rule: evict the cached record whose next use is farthest
//! away, and do not cache the new record at all when it is needed later than everything it
//! would displace. For unit-size records and a known sequence this is optimal; with variable
//! sizes it is the standard rule (the optimum is NP-hard). [`Policy::Lru`] is here to compare
//! against, as MosaicML Streaming evicts.
//!
//! The same structure runs the loader ([`PlannedCache`] holding payloads) and the simulation
//! ([`simulate`], holding nothing), so the table in BENCHMARKS.md measures the code that runs.

use std::collections::{BinaryHeap, HashMap};

/// A record's next use: its index in the access sequence, or [`NEVER`].
pub type NextUse = u64;

/// Next use of a record not used again within the plan's horizon.
pub const NEVER: NextUse = u64::MAX;

/// The key of a record worth keeping only in room nothing else needs (a copy another rank
/// holds): after every real next use, so under [`Policy::Planned`] it displaces only records
/// not needed again ([`NEVER`]) and is evicted before any record with a next use.
pub const SPARE: NextUse = NEVER - 1;

/// Eviction policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Farthest next use first (Belady), with bypass: a record needed later than every record it
    /// would displace is not cached.
    Planned,
    /// Least recently used first; every miss is cached.
    Lru,
}

/// For each access `t` of `sequence` (record ids below `records`), the index of the next
/// access to the same record, or [`NEVER`].
pub fn next_uses(sequence: &[u32], records: usize) -> Vec<NextUse> {
    first_and_next_uses(sequence, records).1
}

/// [`next_uses`], and for each record its first access in `sequence` (or [`NEVER`]).
pub fn first_and_next_uses(sequence: &[u32], records: usize) -> (Vec<NextUse>, Vec<NextUse>) {
    let mut first = vec![NEVER; records];
    let mut next = vec![NEVER; sequence.len()];
    for (t, &id) in sequence.iter().enumerate().rev() {
        next[t] = first[id as usize];
        first[id as usize] = t as NextUse;
    }
    (first, next)
}

struct Entry<V> {
    value: V,
    bytes: u64,
    /// Planned: next use. Lru: last use (the key the heap orders by).
    key: u64,
}

/// A byte-budgeted cache of values keyed by record id (see the module documentation).
pub struct PlannedCache<V> {
    policy: Policy,
    budget: u64,
    used: u64,
    entries: HashMap<u32, Entry<V>>,
    /// (priority, id): the top is the next victim. Stale entries (the record's key changed, or
    /// it left) are skipped when they surface.
    heap: BinaryHeap<(u64, u32)>,
    stats: CacheStats,
    /// LRU: what the current horizon's access times are offset by, so that the clock runs on
    /// across horizons (each plan's times start at 0).
    lru_base: u64,
    /// LRU: the latest key given.
    lru_last: u64,
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups.
    pub accesses: u64,
    /// Lookups that found the record.
    pub hits: u64,
    /// Bytes of the records found.
    pub hit_bytes: u64,
    /// Bytes of the records not found (read from storage).
    pub miss_bytes: u64,
    /// Records evicted.
    pub evictions: u64,
}

impl CacheStats {
    /// Hits / accesses.
    pub fn hit_rate(&self) -> f64 {
        self.hits as f64 / self.accesses.max(1) as f64
    }
}

impl<V> PlannedCache<V> {
    /// An empty cache of `budget` bytes.
    pub fn new(policy: Policy, budget: u64) -> Self {
        PlannedCache {
            policy,
            budget,
            used: 0,
            entries: HashMap::new(),
            heap: BinaryHeap::new(),
            stats: CacheStats::default(),
            lru_base: 0,
            lru_last: 0,
        }
    }

    /// The LRU key of access `t` of the current horizon (on the clock that runs across
    /// horizons).
    fn lru_key(&mut self, t: u64) -> u64 {
        let key = self.lru_base.saturating_add(t);
        self.lru_last = self.lru_last.max(key);
        key
    }

    /// Bytes held.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether record `id` is held.
    pub fn contains(&self, id: u32) -> bool {
        self.entries.contains_key(&id)
    }

    /// Record `id`'s key (its next use under [`Policy::Planned`]), if it is held.
    pub fn key_of(&self, id: u32) -> Option<NextUse> {
        self.entries.get(&id).map(|e| e.key)
    }

    /// The records held, in no order.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.keys().copied()
    }

    /// The counters so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    fn priority(&self, key: u64) -> u64 {
        match self.policy {
            // Max-heap: farthest next use on top.
            Policy::Planned => key,
            // Oldest last use on top.
            Policy::Lru => u64::MAX - key,
        }
    }

    /// Looks up record `id` at access `t` whose next use is `next`; on a hit, returns the
    /// value and records the new next use.
    pub fn get(&mut self, id: u32, t: u64, next: NextUse) -> Option<&V> {
        self.stats.accesses += 1;
        let key = match self.policy {
            Policy::Planned => next,
            Policy::Lru => self.lru_key(t),
        };
        let priority = self.priority(key);
        match self.entries.get_mut(&id) {
            Some(e) => {
                self.stats.hits += 1;
                self.stats.hit_bytes += e.bytes;
                e.key = key;
                self.heap.push((priority, id));
                self.compact_heap();
                self.entries.get(&id).map(|e| &e.value)
            }
            None => None,
        }
    }

    /// Offers record `id` (`bytes` long, read from storage after a miss at access `t`, next
    /// used at `next`): cached if the policy wants it, evicting as needed. Returns whether it
    /// was cached.
    pub fn insert(&mut self, id: u32, value: V, bytes: u64, t: u64, next: NextUse) -> bool {
        self.stats.miss_bytes += bytes;
        if bytes > self.budget || self.entries.contains_key(&id) {
            return false;
        }
        let key = match self.policy {
            Policy::Planned if next == NEVER => return false,
            Policy::Planned => next,
            Policy::Lru => self.lru_key(t),
        };
        while self.used + bytes > self.budget {
            let Some((priority, victim)) = self.top() else {
                break;
            };
            if self.policy == Policy::Planned && priority <= key {
                // Every candidate victim is needed sooner than the new record: bypass.
                return false;
            }
            self.heap.pop();
            let e = self
                .entries
                .remove(&victim)
                .expect("top() returns live entries");
            self.used -= e.bytes;
            self.stats.evictions += 1;
        }
        self.used += bytes;
        self.entries.insert(id, Entry { value, bytes, key });
        let priority = self.priority(key);
        self.heap.push((priority, id));
        true
    }

    /// Takes record `id` out of the cache (a disk entry that failed its check), if it is there.
    pub fn remove(&mut self, id: u32) -> Option<V> {
        let e = self.entries.remove(&id)?;
        self.used -= e.bytes;
        Some(e.value)
    }

    /// Starts a new plan horizon (e.g. at an epoch boundary), whose access times start again
    /// at 0. Planned: re-keys every cached record with `next_of(id)` and rebuilds the heap.
    /// LRU: the clock runs on (the new horizon's times come after every earlier use), so a
    /// record used in the previous horizon is older than any used in this one.
    pub fn rekey(&mut self, mut next_of: impl FnMut(u32) -> NextUse) {
        if self.policy != Policy::Planned {
            self.lru_base = self.lru_last.saturating_add(1);
            return;
        }
        self.heap.clear();
        for (&id, e) in self.entries.iter_mut() {
            e.key = next_of(id);
            self.heap.push((e.key, id));
        }
    }

    /// The live top of the heap, dropping stale entries.
    fn top(&mut self) -> Option<(u64, u32)> {
        while let Some(&(priority, id)) = self.heap.peek() {
            let live = self
                .entries
                .get(&id)
                .is_some_and(|e| self.priority(e.key) == priority);
            if live {
                return Some((priority, id));
            }
            self.heap.pop();
        }
        None
    }

    /// Keeps the heap within a constant factor of the live entries (stale entries pile up on
    /// hits), so memory stays bounded over long runs.
    fn compact_heap(&mut self) {
        if self.heap.len() > 4 * self.entries.len() + 64 {
            let live: Vec<(u64, u32)> = self
                .entries
                .iter()
                .map(|(&id, e)| (self.priority(e.key), id))
                .collect();
            self.heap = live.into();
        }
    }
}

/// Runs `sequence` (record ids, sizes in `sizes`) through a cache of `budget` bytes holding no
/// payloads: the counters the loader's cache would have.
pub fn simulate(sequence: &[u32], sizes: &[u64], budget: u64, policy: Policy) -> CacheStats {
    simulate_after(sequence, sizes, budget, policy, 0)
}

/// As [`simulate`], the counters of the accesses from index `from` on only (the cache runs,
/// and plans, over the whole sequence).
pub fn simulate_after(
    sequence: &[u32],
    sizes: &[u64],
    budget: u64,
    policy: Policy,
    from: usize,
) -> CacheStats {
    let next = next_uses(sequence, sizes.len());
    let mut cache = PlannedCache::<()>::new(policy, budget);
    let mut before = CacheStats::default();
    for (t, &id) in sequence.iter().enumerate() {
        if t == from {
            before = cache.stats();
        }
        let t64 = t as u64;
        if cache.get(id, t64, next[t]).is_none() {
            cache.insert(id, (), sizes[id as usize], t64, next[t]);
        }
    }
    let after = cache.stats();
    if from >= sequence.len() {
        before = after;
    }
    CacheStats {
        accesses: after.accesses - before.accesses,
        hits: after.hits - before.hits,
        hit_bytes: after.hit_bytes - before.hit_bytes,
        miss_bytes: after.miss_bytes - before.miss_bytes,
        evictions: after.evictions - before.evictions,
    }
}

/// A lower bound on the bytes any cache of `budget` bytes must read to serve `sequence`
/// (record ids below `sizes.len()`, sizes in `sizes`), whatever its policy, and whatever it
/// holds when the sequence starts: the fractional relaxation of offline caching. The
/// accesses come in steps, step `k` ending before index `step_ends[k]` (increasing, the last
/// at least `sequence.len()`; a step reads a record once, as the loader's steps do, so a
/// repeat within a step is free). What a step reads is what the cache holds as it starts:
/// keeping a record from one use to its next, `g` steps later, occupies its bytes at `g`
/// step starts and saves its bytes once; held from the very start, its first use at step `g`
/// costs `g + 1`. A cache holds at most `budget` bytes at each step start, so over the
/// sequence it spends at most `budget` times the number of steps: the bound takes the
/// shortest holds first (the saving per byte-step is `1 / g` whatever the size), the last one
/// in part, until that is spent (in integers: exact). Where records are read in windows
/// (sample `s` reads records `s .. s + K`), each record has two or more uses an epoch at
/// independent times, and this floor lies above `1 - c` of the dataset for small cache
/// fractions `c`: no split or eviction rule reaches that ideal there under a uniformly random
/// order (`examples/cache_study`).
pub fn read_floor(sequence: &[u32], step_ends: &[usize], sizes: &[u64], budget: u64) -> u64 {
    let mut last = vec![None::<usize>; sizes.len()];
    let mut total = 0u64;
    // (steps held, bytes) for each hold that would turn an access into a hit.
    let mut holds: Vec<(u64, u64)> = Vec::new();
    let mut step = 0;
    for (i, &id) in sequence.iter().enumerate() {
        while step_ends.get(step).is_some_and(|&end| end <= i) {
            step += 1;
        }
        let bytes = sizes[id as usize];
        match last[id as usize] {
            // Read already in this step: free.
            Some(prev) if prev == step => continue,
            Some(prev) => holds.push(((step - prev) as u64, bytes)),
            // Held from the start (any content is allowed to begin with).
            None => holds.push((step as u64 + 1, bytes)),
        }
        last[id as usize] = Some(step);
        total += bytes;
    }
    holds.sort_unstable_by_key(|&(steps, _)| steps);
    let steps = if sequence.is_empty() { 0 } else { step + 1 };
    let mut room = budget as u128 * steps as u128;
    let mut saved = 0u128;
    for (held, bytes) in holds {
        if bytes > budget {
            continue;
        }
        let cost = held as u128 * bytes as u128;
        if cost <= room {
            room -= cost;
            saved += bytes as u128;
        } else {
            // The part of the hold the room pays for, rounded in the cache's favour.
            saved += (bytes as u128 * room).div_ceil(cost);
            break;
        }
    }
    (total as u128).saturating_sub(saved) as u64
}

/// The step ends for [`read_floor`] of `epochs` epochs of `samples` samples each, `batch`
/// samples a step (the last step of an epoch short where `batch` does not divide it), each
/// sample `per_sample` accesses.
pub fn epoch_step_ends(
    epochs: usize,
    samples: usize,
    batch: usize,
    per_sample: usize,
) -> Vec<usize> {
    let batch = batch.max(1);
    (0..epochs)
        .flat_map(|e| {
            (1..=samples.div_ceil(batch))
                .map(move |k| (e * samples + (k * batch).min(samples)) * per_sample)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new horizon's times restart at 0, but LRU's clock runs on: after `rekey`, a record
    /// used in the new horizon is newer than one used late in the previous one.
    #[test]
    fn lru_clock_runs_across_horizons() {
        let mut cache = PlannedCache::<()>::new(Policy::Lru, 2);
        // Horizon 1: A (0) at time 0, B (1) at time 1.
        for (t, id) in [(0u64, 0u32), (1, 1)] {
            assert!(cache.get(id, t, NEVER).is_none());
            assert!(cache.insert(id, (), 1, t, NEVER));
        }
        cache.rekey(|_| NEVER);
        // Horizon 2: C (2) at time 0 evicts A, the oldest; D (3) at time 1 must evict B (last
        // used in horizon 1), not C (used at time 0 of horizon 2).
        assert!(cache.insert(2, (), 1, 0, NEVER));
        assert!(!cache.contains(0));
        assert!(cache.insert(3, (), 1, 1, NEVER));
        assert!(!cache.contains(1), "B, the least recently used, is evicted");
        assert!(cache.get(2, 2, NEVER).is_some(), "C is still held");
    }

    #[test]
    fn next_uses_point_at_the_next_access() {
        assert_eq!(
            next_uses(&[0, 1, 0, 2, 1], 3),
            vec![2, 4, NEVER, NEVER, NEVER]
        );
    }

    /// Belady on a classic sequence with room for 2 unit records: 1 2 3 1 2 ... the optimum.
    #[test]
    fn planned_eviction_is_optimal_on_a_known_sequence() {
        let seq = [0, 1, 2, 0, 1, 3, 0, 1, 2, 3];
        let sizes = [1u64; 4];
        let planned = simulate(&seq, &sizes, 2, Policy::Planned);
        let lru = simulate(&seq, &sizes, 2, Policy::Lru);
        // Optimal (checked by hand): hits at accesses 3, 4, 6, 7 -> 4 hits.
        assert_eq!(planned.hits, 4);
        assert!(lru.hits < planned.hits, "{lru:?}");
    }

    /// With every record of an epoch used once per epoch, planned caching hits about the cache
    /// fraction, LRU far less (the loader-anchors study: 0.50 vs 0.155 at f = 0.5).
    #[test]
    fn planned_beats_lru_over_shuffled_epochs() {
        let n = 2000u32;
        let seq: Vec<u32> = (0..4)
            .flat_map(|e| super::super::permutation(1, e, n))
            .collect();
        let sizes = vec![1u64; n as usize];
        let planned = simulate(&seq, &sizes, n as u64 / 2, Policy::Planned);
        let lru = simulate(&seq, &sizes, n as u64 / 2, Policy::Lru);
        // First epoch all misses; the next three hit about half.
        let rate_after_first = planned.hits as f64 / (3 * n) as f64;
        assert!((0.45..=0.55).contains(&rate_after_first), "{planned:?}");
        assert!(
            lru.hits * 2 < planned.hits,
            "lru {lru:?} planned {planned:?}"
        );
    }

    #[test]
    fn budget_is_never_exceeded_and_values_come_back() {
        let mut c = PlannedCache::new(Policy::Planned, 10);
        assert!(c.insert(1, "a", 6, 0, 5));
        assert!(c.insert(2, "b", 4, 1, 3));
        // Needed at 9, later than both: bypassed.
        assert!(!c.insert(3, "c", 5, 2, 9));
        // Needed at 4: evicts record 1 (next use 5).
        assert!(c.insert(4, "d", 5, 2, 4));
        assert!(c.used() <= 10);
        assert_eq!(c.get(2, 3, NEVER), Some(&"b"));
        assert_eq!(c.get(1, 5, NEVER), None);
        assert!(!c.insert(5, "e", 11, 6, 7), "larger than the budget");
    }

    /// `simulate_after` counts the accesses from its index on of the same run as `simulate`:
    /// two records that both fit miss once each, then hit.
    #[test]
    fn simulate_after_counts_the_tail_of_one_run() {
        let (seq, sizes) = ([0, 1, 0, 1], [1u64, 1]);
        let whole = simulate(&seq, &sizes, 2, Policy::Planned);
        assert_eq!(simulate_after(&seq, &sizes, 2, Policy::Planned, 0), whole);
        let tail = simulate_after(&seq, &sizes, 2, Policy::Planned, 1);
        assert_eq!((tail.accesses, tail.hits, tail.miss_bytes), (3, 2, 1));
        let tail = simulate_after(&seq, &sizes, 2, Policy::Planned, 2);
        assert_eq!((tail.accesses, tail.hits, tail.miss_bytes), (2, 2, 0));
        assert_eq!(
            simulate_after(&seq, &sizes, 2, Policy::Planned, 4).accesses,
            0
        );
    }

    /// A spare copy takes only free room, never displaces a record, and goes first.
    #[test]
    fn spares_fill_free_room_only_and_go_first() {
        let mut c = PlannedCache::new(Policy::Planned, 10);
        assert!(c.insert(1, (), 4, 0, 50));
        assert!(c.insert(2, (), 4, 1, SPARE), "room for it");
        assert_eq!(c.key_of(2), Some(SPARE));
        assert!(!c.insert(3, (), 4, 2, SPARE), "no room: nothing displaced");
        assert!(c.contains(1) && c.contains(2));
        // A record needed later than record 1 still displaces the spare.
        assert!(c.insert(4, (), 4, 3, 90));
        assert!(c.contains(1) && c.contains(4) && !c.contains(2));
        let mut ids: Vec<u32> = c.ids().collect();
        ids.sort_unstable();
        assert_eq!(ids, [1, 4]);
    }

    /// The floor by hand: records 0 and 1 alternate, one unit of room. Holds: 0 from the
    /// start to step 0 (1 step start), 1 to step 1 (2), 0 from 0 to 2 (2), 1 from 1 to 3 (2);
    /// 4 units of room take the first, the second and half the third: 4 reads - 2.5 saved,
    /// rounded in the cache's favour.
    #[test]
    fn read_floor_by_hand() {
        assert_eq!(read_floor(&[0, 1, 0, 1], &[1, 2, 3, 4], &[1, 1], 1), 1);
        // No room: every read, a record read twice in one step once.
        assert_eq!(read_floor(&[0, 1, 0, 1], &[1, 2, 3, 4], &[3, 5], 0), 16);
        assert_eq!(read_floor(&[0, 0, 1, 1], &[2, 4], &[3, 5], 0), 8);
        // Room for everything: nothing needs reading.
        assert_eq!(
            read_floor(&[0, 1, 2, 0, 2, 1], &[1, 2, 3, 4, 5, 6], &[3, 5, 7], 15),
            0
        );
        // A record larger than the room is always read.
        assert_eq!(read_floor(&[0, 1, 0, 1], &[1, 2, 3, 4], &[1, 9], 4), 18);
        // Epochs of 3 windowed samples in steps of 2 (the last one short): samples 1, 0, 2
        // read records (1, 2), (0, 1), (2, 3), twice; a cache of one record that keeps
        // record 2 throughout reads 6, so the floor may not say more.
        let seq = [1, 2, 0, 1, 2, 3, 1, 2, 0, 1, 2, 3];
        let ends = epoch_step_ends(2, 3, 2, 2);
        assert_eq!(ends, [4, 6, 10, 12]);
        assert!(read_floor(&seq, &ends, &[1; 4], 1) <= 6);
    }

    proptest::proptest! {
        /// No cache reads less than the floor: the planned cache and LRU, started empty, on
        /// any sequence and sizes (the floor lets the cache start full, so it bounds both).
        #[test]
        fn no_cache_reads_less_than_the_floor(
            seq in proptest::collection::vec(0u32..12, 1..200),
            sizes in proptest::collection::vec(1u64..50, 12),
            budget in 0u64..300,
        ) {
            let ends: Vec<usize> = (1..=seq.len()).collect();
            let floor = read_floor(&seq, &ends, &sizes, budget);
            for policy in [Policy::Planned, Policy::Lru] {
                let stats = simulate(&seq, &sizes, budget, policy);
                proptest::prop_assert!(floor <= stats.miss_bytes, "{policy:?}: {floor} > {stats:?}");
            }
        }
    }

    /// Windowed samples (sample `s` reads records `s` and `s + 1`) in a uniformly random order:
    /// with room for 0.2 of the records, every cache reads more than 1 - 0.2 + 0.05 of them an
    /// epoch (the floor, epochs 1 to 7 of a cache that may start full, is 1.03); records
    /// read once an epoch (plain samples) have a floor below 1 - 0.2 (0.60).
    #[test]
    fn windows_read_more_than_the_ideal_in_any_cache() {
        let n = 2000u32;
        let sizes = vec![1u64; n as usize + 1];
        let per_epoch = |window: bool, e: u64| -> Vec<u32> {
            super::super::permutation(3, e, n)
                .into_iter()
                .flat_map(|s| if window { vec![s, s + 1] } else { vec![s] })
                .collect()
        };
        for (window, lo, hi) in [(true, 1.0, 1.1), (false, 0.5, 0.8)] {
            let k = if window { 2 } else { 1 };
            let seq: Vec<u32> = (1..8).flat_map(|e| per_epoch(window, e)).collect();
            let ends = epoch_step_ends(7, n as usize, 16, k);
            let floor = read_floor(&seq, &ends, &sizes, n as u64 / 5);
            let share = floor as f64 / 7.0 / n as f64;
            assert!((lo..hi).contains(&share), "window {window}: {share}");
        }
    }
}
