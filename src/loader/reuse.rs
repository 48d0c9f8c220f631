//! Each epoch's order: its seeded permutation ([`super::plan::permutation`]), stratified where
//! asked ([`stratify`]), then, with the reuse order (issue 47), the samples the previous
//! epoch read last moved to the front, so what the caches hold at an epoch's end is read
//! first in the next.
//!
//! **Stratified order** (`strata = S`, default [`WINDOW_STRATA`] for windowed tensor
//! datasets, 0 otherwise; [`stratify`]): the sample ids are cut into `S` contiguous ranges
//! (sample `s` of `n` is in stratum `floor(s S / n)`, a stratum of `m` samples), and the
//! permutation's samples are reordered by `(2 i + 1) / (2 m)`, `i` being the sample's place
//! among its stratum's samples in the permutation's order (ties: the permutation's order).
//! Every stratum is then spread evenly over the epoch: any `k` consecutive samples of the
//! order hold `k m / n` of a stratum's, give or take 2, while which samples and in which
//! order within each stratum stays the permutation's. Why: the locality split keeps each
//! window's neighbouring records on one rank by giving a windowed sample a *home* rank (the
//! records cut into contiguous ranges, [`super::ranks`]); with a plain permutation the count
//! of a global batch's samples per home rank is binomial (at batch 16 x 4 ranks a standard
//! deviation of 3.5 against a bound of 2), and each sample past a rank's bound reads both its
//! records on another rank.
//! Strata that the home ranges are unions of (`S` a multiple of the world size) make every
//! global batch hold each home rank's share to within a few samples. What it costs the
//! shuffle: a global batch is a stratified sample of the dataset (its share of each range of
//! sample ids fixed) instead of a uniform one; consecutive epochs stay uncorrelated. A pure
//! function of `(seed, epoch, n, S)`, independent of world size, batch size and cache, so a
//! run resumes with any of them changed, provided `S` is the same.
//!
//! **Reuse order.** With `front = k` samples: `order(0) = permutation(seed, 0, n)`; for `e >= 1`,
//! `order(e)` is `permutation(seed, e, n)` stably partitioned (with strata, `permutation`
//! stands for the stratified permutation throughout): first the samples at the last
//! `k` positions of `order(e - 1)`, then the others, each group in the permutation's own
//! relative order. `k = 0` (or `k >= n`) is the plain permutation. A pure function of
//! `(seed, epoch, n, k)`: nothing of it is stored, and a run resumes from `(seed, epoch,
//! consumed)` with any world size, batch size or cache, provided `k` is the same (like the
//! seed, `k` is part of the run's identity). Building `order(e)` from nothing replays
//! epochs `0..=e` (linear in `e x n`, at a resume only); [`ReuseOrders`] keeps the last one
//! so a running loader pays one permutation and one partition per epoch.
//!
//! **Why the last `k`.** The planned cache's horizon is this epoch then the next: at an
//! epoch's end the samples with the nearest next use are the next epoch's front, which are
//! the ones read last, so the planned eviction keeps them (where they fit) and they are hits
//! at the next epoch's start. With `R` ranks (the locality split or slices alike) the global
//! order is shared and each rank caches what it read last, so the union of the caches holds
//! about the global order's last `R x (samples per cache)`: `k` is chosen for the union
//! ([`front_for`]), and the locality split then gives each front sample to the rank that
//! holds it.
//!
//! **What it costs the shuffle.** Each epoch is still a uniformly random permutation
//! restricted to two groups, but which group a sample is in depends on the previous epoch: a
//! sample read among the last `k` of epoch `e` is read among the first `k` of epoch `e + 1`
//! (a share `k / n` of each epoch's positions is forced to the front). The Spearman
//! correlation between consecutive epochs' positions is about `-3 f (1 - f)` for
//! `f = k / n` (measured in docs/cache-study.md), 0 for the plain permutation. Within a
//! global batch the samples are still a uniform draw of their group.

use super::plan::permutation;

/// The strata of a windowed tensor dataset's order by default (module documentation): the
/// home ranges of any world size that divides 64 are unions of strata.
pub const WINDOW_STRATA: u32 = 64;

/// `perm`, an order of the sample ids `0..perm.len()`, stratified into `strata` contiguous
/// ranges of ids (module documentation); at most one stratum per sample, and 0 or 1 stratum
/// give `perm` back.
pub fn stratify(perm: Vec<u32>, strata: u32) -> Vec<u32> {
    let n = perm.len() as u64;
    let s = (strata as u64).min(n);
    if s <= 1 {
        return perm;
    }
    let stratum = |id: u32| ((id as u64 * s / n) as usize).min(s as usize - 1);
    let mut size = vec![0u64; s as usize];
    for &id in &perm {
        size[stratum(id)] += 1;
    }
    let mut seen = vec![0u64; s as usize];
    // (2i + 1) / (2m) in 64.64 fixed point: exact enough to order any two (m <= 2^32).
    let mut keyed: Vec<(u128, u32)> = perm
        .into_iter()
        .map(|id| {
            let st = stratum(id);
            let i = seen[st];
            seen[st] += 1;
            ((((2 * i + 1) as u128) << 64) / (2 * size[st]) as u128, id)
        })
        .collect();
    // Stable: equal keys keep the permutation's order.
    keyed.sort_by_key(|&(key, _)| key);
    keyed.into_iter().map(|(_, id)| id).collect()
}

/// Epoch `epoch`'s reuse order of `0..n` with `front` samples carried to the front
/// (module documentation), built from epoch 0.
pub fn reuse_order(seed: u64, epoch: u64, n: u32, front: u32) -> Vec<u32> {
    ReuseOrders::new(seed, n, front).order(epoch)
}

/// Epoch `epoch`'s order with `strata` strata and the reuse order's `front` (module
/// documentation), built from epoch 0 where `front` is not 0.
pub fn epoch_order(seed: u64, epoch: u64, n: u32, strata: u32, front: u32) -> Vec<u32> {
    ReuseOrders::new(seed, n, front)
        .stratified(strata)
        .order(epoch)
}

/// The reuse orders of a run, the last one kept (module documentation).
#[derive(Debug, Clone)]
pub struct ReuseOrders {
    seed: u64,
    n: u32,
    front: u32,
    strata: u32,
    last: Option<(u64, Vec<u32>)>,
}

impl ReuseOrders {
    /// The orders of `(seed, n, front)`, not stratified.
    pub fn new(seed: u64, n: u32, front: u32) -> Self {
        ReuseOrders {
            seed,
            n,
            front,
            strata: 0,
            last: None,
        }
    }

    /// The same orders over the permutations stratified into `strata` (module documentation).
    pub fn stratified(mut self, strata: u32) -> Self {
        self.strata = strata;
        self.last = None;
        self
    }

    /// Whether the reuse order is off (`front` 0 or at least `n`): each epoch's order is its
    /// own (stratified) permutation.
    pub fn is_plain(&self) -> bool {
        self.front == 0 || self.front >= self.n
    }

    /// Epoch `e`'s permutation, stratified: its order before the reuse front (the whole order
    /// where [`ReuseOrders::is_plain`]).
    pub fn base(&self, e: u64) -> Vec<u32> {
        stratify(permutation(self.seed, e, self.n), self.strata)
    }

    /// Epoch `epoch`'s order: from the kept one where it is this epoch or the one before,
    /// else replayed from epoch 0.
    pub fn order(&mut self, epoch: u64) -> Vec<u32> {
        if self.is_plain() {
            return self.base(epoch);
        }
        let (mut e, mut order) = match self.last.take() {
            Some((e, order)) if e <= epoch => (e, order),
            _ => (0, self.base(0)),
        };
        while e < epoch {
            e += 1;
            order = self.next(&order, e);
        }
        self.last = Some((e, order.clone()));
        order
    }

    /// Epoch `e`'s order from epoch `e - 1`'s.
    fn next(&self, previous: &[u32], e: u64) -> Vec<u32> {
        let n = self.n as usize;
        let k = self.front as usize;
        let mut carried = vec![false; n];
        for &s in &previous[n - k..] {
            carried[s as usize] = true;
        }
        let perm = self.base(e);
        let mut out = Vec::with_capacity(n);
        out.extend(perm.iter().copied().filter(|&s| carried[s as usize]));
        out.extend(perm.iter().copied().filter(|&s| !carried[s as usize]));
        out
    }
}

/// The `front` that fits caches of `cache_bytes` on each of `world_size` ranks over records
/// of `total_bytes` in all, `n` of them: `n x min(1, world_size x cache_bytes / total_bytes)`
/// rounded down (by the mean record size; the planned eviction keeps the nearest uses of
/// what does not fit).
pub fn front_for(n: u32, total_bytes: u64, cache_bytes: u64, world_size: u32) -> u32 {
    if total_bytes == 0 {
        return 0;
    }
    let share = (cache_bytes as f64 * world_size as f64 / total_bytes as f64).min(1.0);
    (n as f64 * share) as u32
}

/// Spearman's rank correlation between two orders of the same samples (their positions).
pub fn position_correlation(a: &[u32], b: &[u32]) -> f64 {
    let n = a.len();
    if n < 2 {
        return 0.0;
    }
    let mut pos_b = vec![0u64; n];
    for (i, &s) in b.iter().enumerate() {
        pos_b[s as usize] = i as u64;
    }
    // Ranks are the positions 0..n (no ties): rho = 1 - 6 sum d^2 / (n (n^2 - 1)).
    let d2: f64 = a
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let d = i as f64 - pos_b[s as usize] as f64;
            d * d
        })
        .sum();
    let n = n as f64;
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every epoch is a permutation; its first `k` are exactly the previous epoch's last `k`,
    /// in the permutation's relative order; the rest keep the permutation's order.
    #[test]
    fn the_front_is_the_previous_tail_and_every_sample_once() {
        for (n, k) in [
            (1u32, 0u32),
            (10, 3),
            (100, 40),
            (100, 60),
            (97, 96),
            (50, 50),
        ] {
            let mut orders = ReuseOrders::new(5, n, k);
            let mut previous: Option<Vec<u32>> = None;
            for e in 0..5u64 {
                let o = orders.order(e);
                let mut sorted = o.clone();
                sorted.sort();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n {n} k {k} e {e}");
                let perm = permutation(5, e, n);
                match &previous {
                    Some(p) if k > 0 && k < n => {
                        let tail: std::collections::HashSet<u32> =
                            p[(n - k) as usize..].iter().copied().collect();
                        let head: Vec<u32> =
                            perm.iter().copied().filter(|s| tail.contains(s)).collect();
                        let rest: Vec<u32> =
                            perm.iter().copied().filter(|s| !tail.contains(s)).collect();
                        assert_eq!(o[..k as usize], head[..], "n {n} k {k} e {e}");
                        assert_eq!(o[k as usize..], rest[..], "n {n} k {k} e {e}");
                    }
                    _ => assert_eq!(o, perm, "n {n} k {k} e {e}"),
                }
                previous = Some(o);
            }
        }
    }

    /// A pure function: built from nothing (a resume) equals built epoch by epoch, in any
    /// order of requests; and it differs from the plain permutation from epoch 1 on.
    #[test]
    fn the_order_is_the_same_however_it_is_reached() {
        let mut running = ReuseOrders::new(9, 200, 50);
        let walked: Vec<Vec<u32>> = (0..6).map(|e| running.order(e)).collect();
        for e in [5u64, 2, 4, 0, 3, 1] {
            assert_eq!(reuse_order(9, e, 200, 50), walked[e as usize], "epoch {e}");
            assert_eq!(running.order(e), walked[e as usize], "epoch {e}");
        }
        assert_eq!(walked[0], permutation(9, 0, 200));
        assert_ne!(walked[1], permutation(9, 1, 200));
    }

    /// The randomness cost as documented: consecutive epochs correlate about -3 f (1 - f);
    /// the plain permutation about 0.
    #[test]
    fn consecutive_epochs_correlate_as_documented() {
        let n = 20_000u32;
        let plain = position_correlation(&permutation(1, 1, n), &permutation(1, 2, n));
        assert!(plain.abs() < 0.03, "{plain}");
        for f in [0.1f64, 0.4] {
            let k = (n as f64 * f) as u32;
            let rho = position_correlation(&reuse_order(1, 1, n, k), &reuse_order(1, 2, n, k));
            let expect = -3.0 * f * (1.0 - f);
            assert!((rho - expect).abs() < 0.05, "f {f}: {rho} vs {expect}");
        }
    }

    /// The stratified order is a permutation; each stratum's samples keep the permutation's
    /// relative order; any `k` consecutive samples hold `k m / n` of a stratum of `m` samples
    /// give or take 2; 0 or 1 strata (and no samples) give the permutation back.
    #[test]
    fn the_stratified_order_spreads_every_stratum_evenly() {
        for (n, strata) in [
            (1000u32, 64u32),
            (997, 64),
            (4000, 7),
            (100, 64),
            (64, 64),
            (10, 64),
            (5000, 3),
        ] {
            let perm = permutation(3, 1, n);
            let o = stratify(perm.clone(), strata);
            let mut sorted = o.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n {n} strata {strata}");
            let s = (strata as u64).min(n as u64) as usize;
            let stratum = |id: u32| (id as u64 * s as u64 / n as u64) as usize;
            for st in 0..s {
                let a: Vec<u32> = perm.iter().copied().filter(|&x| stratum(x) == st).collect();
                let b: Vec<u32> = o.iter().copied().filter(|&x| stratum(x) == st).collect();
                assert_eq!(a, b, "n {n} strata {strata}: stratum {st}");
            }
            // prefix[st][j]: samples of stratum st among the first j.
            let mut prefix = vec![vec![0i64; n as usize + 1]; s];
            for (j, &id) in o.iter().enumerate() {
                for (st, p) in prefix.iter_mut().enumerate() {
                    p[j + 1] = p[j] + (stratum(id) == st) as i64;
                }
            }
            for k in [1usize, 16, 64, 100, 333] {
                for start in 0..(n as usize).saturating_sub(k) {
                    for p in &prefix {
                        let m = p[n as usize] as f64;
                        let got = (p[start + k] - p[start]) as f64;
                        let want = k as f64 * m / n as f64;
                        assert!(
                            (got - want).abs() <= 2.0,
                            "n {n} strata {strata} k {k} at {start}: {got} vs {want:.2}"
                        );
                    }
                }
            }
        }
        let perm = permutation(3, 1, 500);
        assert_eq!(stratify(perm.clone(), 0), perm);
        assert_eq!(stratify(perm.clone(), 1), perm);
        assert_ne!(stratify(perm.clone(), 2), perm);
        assert!(stratify(Vec::new(), 64).is_empty());
    }

    /// With strata and the reuse order together the order is still a pure function of
    /// `(seed, epoch, n, strata, front)`, and consecutive stratified epochs are uncorrelated.
    #[test]
    fn the_stratified_order_is_pure_and_uncorrelated_across_epochs() {
        let mut running = ReuseOrders::new(9, 300, 50).stratified(WINDOW_STRATA);
        let walked: Vec<Vec<u32>> = (0..5).map(|e| running.order(e)).collect();
        for e in [4u64, 1, 3, 0, 2] {
            assert_eq!(
                epoch_order(9, e, 300, WINDOW_STRATA, 50),
                walked[e as usize]
            );
        }
        assert_eq!(walked[0], stratify(permutation(9, 0, 300), WINDOW_STRATA));
        assert_eq!(epoch_order(9, 3, 300, 0, 0), permutation(9, 3, 300));
        let n = 20_000u32;
        let rho = position_correlation(
            &epoch_order(1, 1, n, WINDOW_STRATA, 0),
            &epoch_order(1, 2, n, WINDOW_STRATA, 0),
        );
        assert!(rho.abs() < 0.03, "{rho}");
    }

    #[test]
    fn front_for_is_the_union_of_the_caches() {
        assert_eq!(front_for(1000, 10_000, 1000, 1), 100);
        assert_eq!(front_for(1000, 10_000, 1000, 4), 400);
        assert_eq!(front_for(1000, 10_000, 5000, 4), 1000);
        assert_eq!(front_for(1000, 0, 5000, 4), 0);
    }
}
