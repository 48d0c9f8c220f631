//! The epoch plan: which sample each rank reads at each step, as a documented algorithm of a
//! few integers, so a run resumes exactly, on any machine, with any world size.
//!
//! **Permutation of epoch `e`** ([`permutation`]): Fisher-Yates (Durstenfeld's form) over
//! `0..n`, drawing from SplitMix64 seeded with `splitmix64(seed) ^ splitmix64(e ^
//! EPOCH_SALT)`: for `i` from `n - 1` down to `1`, swap element `i` with element
//! `uniform(i + 1)`, where `uniform(m)` is Lemire's multiply-high with rejection (draw `x`,
//! take the high 64 bits of `x * m`; redraw while the low 64 bits are below `2^64 mod m`).
//! Pure integer arithmetic: the same permutation on every machine and in every version that
//! keeps these constants.
//!
//! **Steps.** The epoch's permutation is consumed in *global batches* of `batch_size x
//! world_size` samples; at each step, rank `r` takes the `r`-th slice of `batch_size` (or,
//! with a cache, the samples its cache holds: [`super::ranks`], the same global batches). The
//! state is `(seed, epoch, consumed)` ([`LoaderState`]): `consumed` counts the epoch's
//! samples handed out by completed global steps. Resuming rebuilds the permutation (linear
//! time) and continues at `consumed`, with whatever world size and batch size the resumed run
//! has: the remaining samples are re-partitioned, none repeated or skipped.
//!
//! **The last global batch** of an epoch, when `n - consumed` is not a multiple of the global
//! batch, follows [`DropLast`].

/// Salt mixed into the epoch number (so epoch 0 and the seed do not cancel).
pub const EPOCH_SALT: u64 = 0x5EED_E90C_0000_0000;

/// SplitMix64's increment (the golden ratio in 64-bit fixed point).
const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function applied to `x`.
pub const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The SplitMix64 generator: `state += GOLDEN_GAMMA`, output `splitmix64` of the old state.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting at `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let out = splitmix64(self.state);
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        out
    }

    /// A uniform integer in `0..m` (`m >= 1`), without modulo bias (Lemire's method).
    #[inline]
    pub fn below(&mut self, m: u64) -> u64 {
        let mut product = self.next_u64() as u128 * m as u128;
        // The threshold 2^64 mod m is below m: a low half at least m is accepted without
        // computing it (Lemire's shortcut; the same draws as always comparing).
        if (product as u64) < m {
            let threshold = m.wrapping_neg() % m;
            while (product as u64) < threshold {
                product = self.next_u64() as u128 * m as u128;
            }
        }
        (product >> 64) as u64
    }

    /// A uniform float in `[0, 1)` (the top 24 bits).
    #[inline]
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }
}

/// The seed of epoch `epoch`'s generator.
pub const fn epoch_seed(seed: u64, epoch: u64) -> u64 {
    splitmix64(seed) ^ splitmix64(epoch ^ EPOCH_SALT)
}

/// The permutation of `0..n` for `(seed, epoch)` (module documentation). `n` is at most
/// `u32::MAX + 1` samples (sample ids are `u32`).
pub fn permutation(seed: u64, epoch: u64, n: u32) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n).collect();
    let mut rng = SplitMix64::new(epoch_seed(seed, epoch));
    for i in (1..p.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

/// What happens to the last global batch of an epoch when fewer samples remain than a full
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DropLast {
    /// The remaining samples are split as evenly as possible among the ranks (ranks with a
    /// lower index get one more; a rank may get none): every sample is seen exactly once per
    /// epoch (the default).
    #[default]
    Partial,
    /// The remaining samples are skipped: every step has full batches on every rank.
    Drop,
    /// The last global batch is filled up with the epoch's first samples (as PyTorch's
    /// `DistributedSampler` pads): full batches, a few samples seen twice.
    Pad,
}

/// Where a run stands: all the loader needs to resume exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct LoaderState {
    /// The run's seed.
    pub seed: u64,
    /// The current epoch.
    pub epoch: u64,
    /// Samples of this epoch's permutation handed out by completed global steps.
    pub consumed: u64,
}

/// Who reads what: the run's partitioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// Samples per batch on each rank (>= 1).
    pub batch_size: u32,
    /// Ranks (>= 1).
    pub world_size: u32,
    /// This rank (< world_size).
    pub rank: u32,
    /// The last global batch's policy.
    pub drop_last: DropLast,
}

impl Partition {
    /// One rank with batches of `batch_size`.
    pub fn single(batch_size: u32) -> Self {
        Partition {
            batch_size,
            world_size: 1,
            rank: 0,
            drop_last: DropLast::Partial,
        }
    }

    /// Samples per global step.
    pub fn global_batch(&self) -> u64 {
        self.batch_size as u64 * self.world_size as u64
    }

    /// Checks the fields.
    pub fn validate(&self) -> crate::error::Result<()> {
        let bad = |name, value: u64, reason| {
            Err(crate::error::ParameterError::InvalidOption {
                name,
                value,
                reason,
            }
            .into())
        };
        if self.batch_size == 0 {
            return bad("batch_size", 0, "must be at least 1");
        }
        if self.world_size == 0 {
            return bad("world_size", 0, "must be at least 1");
        }
        if self.rank >= self.world_size {
            return bad("rank", self.rank as u64, "must be below world_size");
        }
        Ok(())
    }
}

/// One step of one rank: positions `range` of the epoch's permutation, plus (for
/// [`DropLast::Pad`]) positions from the epoch's start appended (taken modulo the epoch's
/// length, for datasets smaller than a global batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSlice {
    /// Positions in the permutation (not sample ids).
    pub range: std::ops::Range<u64>,
    /// Padding positions (from 0), [`DropLast::Pad`] only.
    pub pad: std::ops::Range<u64>,
    /// `consumed` after this global step completes.
    pub consumed_after: u64,
}

impl StepSlice {
    /// The permutation positions of this step, padding wrapped around an epoch of `n`.
    pub fn positions(&self, n: u64) -> impl Iterator<Item = u64> + '_ {
        let pad = if n == 0 { 0..0 } else { self.pad.clone() };
        self.range.clone().chain(pad.map(move |p| p % n))
    }

    /// Samples in the step.
    pub fn len(&self) -> u64 {
        (self.range.end - self.range.start) + (self.pad.end - self.pad.start)
    }

    /// Whether the step has no samples (a rank's share of a short last batch).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The steps left in the epoch for `partition`, starting from `consumed` samples of an epoch
/// of `n`: for each global step, this rank's slice.
pub fn rank_steps(n: u64, consumed: u64, partition: &Partition) -> Vec<StepSlice> {
    let g = partition.global_batch();
    let (b, w, r) = (
        partition.batch_size as u64,
        partition.world_size as u64,
        partition.rank as u64,
    );
    let mut steps = Vec::new();
    let mut at = consumed.min(n);
    while n - at >= g {
        let start = at + r * b;
        steps.push(StepSlice {
            range: start..start + b,
            pad: 0..0,
            consumed_after: at + g,
        });
        at += g;
    }
    let rem = n - at;
    if rem > 0 {
        match partition.drop_last {
            DropLast::Drop => {}
            DropLast::Partial => {
                // Even split: the first rem % w ranks get one more.
                let (base, extra) = (rem / w, rem % w);
                let start = at + r * base + r.min(extra);
                let len = base + (r < extra) as u64;
                steps.push(StepSlice {
                    range: start..start + len,
                    pad: 0..0,
                    consumed_after: n,
                });
            }
            DropLast::Pad => {
                // Positions at..n then 0.. wrap, rank r takes its b of the padded batch.
                let lo = r * b;
                let hi = lo + b;
                let real = (at + lo).min(n)..(at + hi).min(n);
                let pad_lo = lo.saturating_sub(rem);
                let pad_hi = hi.saturating_sub(rem);
                steps.push(StepSlice {
                    range: real,
                    pad: pad_lo..pad_hi,
                    consumed_after: n,
                });
            }
        }
    }
    steps
}

/// Steps each rank takes in a whole epoch of `n` samples under `partition`: the full global
/// batches, plus the last short one unless [`DropLast::Drop`] drops it. The count of
/// [`rank_steps`]`(n, 0, partition)`, without building them.
pub fn steps_per_epoch(n: u64, partition: &Partition) -> u64 {
    let g = partition.global_batch().max(1);
    let short = !n.is_multiple_of(g) && partition.drop_last != DropLast::Drop;
    n / g + short as u64
}

/// Of `steps` steps, how many worker `worker` of `workers` takes (steps `worker`, `worker +
/// workers`, ...; `workers` >= 1).
pub fn worker_share(steps: u64, worker: u32, workers: u32) -> u64 {
    let (w, count) = (worker as u64, workers.max(1) as u64);
    if steps > w {
        (steps - w).div_ceil(count)
    } else {
        0
    }
}

impl LoaderState {
    /// Checks a state to resume from against an epoch of `records` samples: `consumed` at
    /// most `records` (more means the state belongs to another dataset), and `epoch` below
    /// `u64::MAX` (the epoch after it must exist).
    pub fn validate(&self, records: u64) -> crate::error::Result<()> {
        if self.consumed > records {
            return Err(crate::error::ParameterError::InvalidOption {
                name: "consumed",
                value: self.consumed,
                reason: "more samples than the dataset has: the state is from another dataset",
            }
            .into());
        }
        if self.epoch == u64::MAX {
            return Err(crate::error::ParameterError::InvalidOption {
                name: "epoch",
                value: self.epoch,
                reason: "must be below 2^64 - 1",
            }
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden values: the algorithm is the documented one and does not drift between
    /// versions (a change here breaks every saved resume state).
    #[test]
    fn permutation_is_pinned() {
        assert_eq!(splitmix64(0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(permutation(0, 0, 10), permutation(0, 0, 10));
        let p = permutation(42, 3, 10);
        let mut sorted = p.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_ne!(permutation(42, 3, 10), permutation(42, 4, 10));
        assert_ne!(permutation(42, 3, 10), permutation(43, 3, 10));
        assert_eq!(p, GOLDEN_42_3);
    }
    /// Recorded from this implementation when the algorithm was fixed (2026-12).
    const GOLDEN_42_3: [u32; 10] = [6, 2, 0, 8, 9, 3, 5, 4, 7, 1];

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut rng = SplitMix64::new(7);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[rng.below(6) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    /// `below` is Lemire's method as documented (redraw while the low half is below
    /// `2^64 mod m`): the same values and the same number of draws as computing the threshold
    /// every time, also where rejections are frequent (m just above 2^63).
    #[test]
    fn below_draws_as_the_documented_rule() {
        fn reference(rng: &mut SplitMix64, m: u64) -> u64 {
            let threshold = m.wrapping_neg() % m;
            loop {
                let product = rng.next_u64() as u128 * m as u128;
                if (product as u64) >= threshold {
                    return (product >> 64) as u64;
                }
            }
        }
        let ms = [
            1u64,
            2,
            3,
            7,
            10,
            1000,
            1 << 20,
            (1 << 63) + 1,
            (1 << 63) + 12345,
        ]
        .into_iter()
        .chain([u64::MAX, u64::MAX - 1, (1u64 << 62) * 3 + 1]);
        for m in ms {
            let (mut a, mut b) = (SplitMix64::new(m ^ 99), SplitMix64::new(m ^ 99));
            for _ in 0..20_000 {
                assert_eq!(a.below(m), reference(&mut b, m), "m {m}");
            }
            // The same state after: the same number of draws.
            assert_eq!(a.next_u64(), b.next_u64(), "m {m}");
        }
    }

    /// Every policy, world size and resume point: the union over ranks of every step is each
    /// remaining sample exactly once (Partial), all but the tail (Drop), or every remaining
    /// sample at least once with full batches (Pad); every rank has the same number of steps.
    #[test]
    fn ranks_cover_the_epoch_as_documented() {
        for n in [0u64, 1, 7, 64, 100] {
            for world in 1..=4u32 {
                for batch in [1u32, 3, 8] {
                    for consumed in [0u64, 5, n] {
                        for drop_last in [DropLast::Partial, DropLast::Drop, DropLast::Pad] {
                            let c = consumed.min(n);
                            let mut seen = vec![0u32; n as usize];
                            let mut steps_per_rank = Vec::new();
                            let mut total = 0u64;
                            for rank in 0..world {
                                let p = Partition {
                                    batch_size: batch,
                                    world_size: world,
                                    rank,
                                    drop_last,
                                };
                                let steps = rank_steps(n, c, &p);
                                steps_per_rank.push(steps.len());
                                for s in &steps {
                                    let len = s.positions(n).count() as u64;
                                    total += len;
                                    for pos in s.positions(n) {
                                        seen[pos as usize] += 1;
                                    }
                                    if drop_last != DropLast::Partial {
                                        assert_eq!(len, batch as u64);
                                    }
                                }
                            }
                            let case = format!("n {n} w {world} b {batch} c {c} {drop_last:?}");
                            assert!(
                                steps_per_rank.iter().all(|&s| s == steps_per_rank[0]),
                                "{case}"
                            );
                            let g = (batch * world) as u64;
                            let full_end = c + (n - c) / g * g;
                            for (pos, &k) in seen.iter().enumerate() {
                                let pos = pos as u64;
                                match drop_last {
                                    DropLast::Partial => {
                                        assert_eq!(k, (pos >= c) as u32, "{case} pos {pos}")
                                    }
                                    DropLast::Drop => assert_eq!(
                                        k,
                                        (pos >= c && pos < full_end) as u32,
                                        "{case} pos {pos}"
                                    ),
                                    DropLast::Pad => {
                                        assert!(pos < c || k >= 1, "{case} pos {pos}")
                                    }
                                }
                            }
                            if drop_last == DropLast::Pad {
                                assert_eq!(total, steps_per_rank[0] as u64 * g, "{case}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// `steps_per_epoch` and `worker_share` count what `rank_steps` builds and what the
    /// producer's `skip(worker).step_by(workers)` keeps.
    #[test]
    fn step_counts_match_the_plan() {
        for n in [0u64, 1, 2, 7, 64, 100] {
            for world in 1..=3u32 {
                for batch in [1u32, 3, 8, 64] {
                    for drop_last in [DropLast::Partial, DropLast::Drop, DropLast::Pad] {
                        let p = Partition {
                            batch_size: batch,
                            world_size: world,
                            rank: world - 1,
                            drop_last,
                        };
                        let steps = rank_steps(n, 0, &p);
                        assert_eq!(steps.len() as u64, steps_per_epoch(n, &p));
                        for workers in 1..=4u32 {
                            for w in 0..workers {
                                let kept = steps
                                    .iter()
                                    .skip(w as usize)
                                    .step_by(workers as usize)
                                    .count();
                                assert_eq!(
                                    kept as u64,
                                    worker_share(steps.len() as u64, w, workers)
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_state_past_the_dataset_is_refused() {
        let s = LoaderState {
            seed: 1,
            epoch: 0,
            consumed: 11,
        };
        assert!(s.validate(10).is_err());
        assert!(LoaderState { consumed: 10, ..s }.validate(10).is_ok());
        assert!(LoaderState {
            epoch: u64::MAX,
            consumed: 0,
            ..s
        }
        .validate(10)
        .is_err());
    }
}
