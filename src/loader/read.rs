//! The read stage (feature `dataset`): a step's cache misses read from their shards with
//! coalesced positional reads of only the payloads the requested level needs, each
//! CRC-checked ([`read_coalesced`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::Result;
use crate::progressive::LevelScheme;
use crate::shard::Dataset;

/// A record's payloads for the requested level.
pub(super) type Payloads = Arc<Vec<Vec<u8>>>;
/// A miss read: its index in the batch and its payloads.
pub(super) type Fetched = (usize, Result<Payloads>);
/// A miss to read: its index in the batch, its record in its shard, how many payloads.
type Wanted = (usize, usize, u8);

/// Largest single read of [`read_coalesced`] (and of tensor records' coalesced reads).
pub(super) const MAX_COALESCED_READ: u64 = 8 << 20;

/// The payloads that `level` needs of the samples `ids[k]` of `dataset` for `k` in `misses`,
/// each CRC-checked: per shard, payloads at most `gap` bytes apart are read together
/// ([`crate::shard::ShardReader::read_levels_coalesced`]), shards in parallel (on the
/// calling thread's rayon pool). Returns `(k, payloads)` per miss and the number of reads.
pub(super) fn read_coalesced(
    dataset: &Dataset,
    ids: &[u32],
    misses: &[usize],
    level: u8,
    gap: u64,
) -> (Vec<Fetched>, usize) {
    let mut out = Vec::with_capacity(misses.len());
    // shard -> (miss k, record, payload count)
    let mut by_shard: BTreeMap<usize, Vec<Wanted>> = Default::default();
    for &k in misses {
        let located = dataset.locate(ids[k] as u64).and_then(|(s, r)| {
            let needed = match dataset.shards()[s].entry(r)?.scheme {
                LevelScheme::Flat => 1,
                LevelScheme::Interlace => level + 1,
            };
            Ok((s, r, needed))
        });
        match located {
            Ok((s, r, needed)) => by_shard.entry(s).or_default().push((k, r, needed)),
            Err(e) => out.push((k, Err(e))),
        }
    }
    let groups: Vec<(usize, Vec<Wanted>)> = by_shard.into_iter().collect();
    let read: Vec<(Vec<Fetched>, usize)> = groups
        .par_iter()
        .map(|(s, samples)| {
            let wanted: Vec<(usize, u8)> = samples
                .iter()
                .flat_map(|&(_, r, needed)| (0..needed).map(move |l| (r, l)))
                .collect();
            let (mut results, calls) =
                dataset.shards()[*s].read_levels_coalesced(&wanted, gap, MAX_COALESCED_READ);
            let mut per_sample = Vec::with_capacity(samples.len());
            let mut at = 0;
            for &(k, _, needed) in samples {
                let mine: Result<Vec<Vec<u8>>> =
                    results.drain(..needed as usize).collect::<Result<_>>();
                at += needed as usize;
                per_sample.push((k, mine.map(Arc::new)));
            }
            debug_assert_eq!(at, wanted.len());
            (per_sample, calls)
        })
        .collect();
    let mut calls = 0;
    for (r, c) in read {
        out.extend(r);
        calls += c;
    }
    (out, calls)
}
