//! The read stage (feature `dataset`): a step's cache misses read from their shards with
//! coalesced positional reads of only the payloads the requested level needs, each
//! CRC-checked ([`read_coalesced`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::Result;
use crate::progressive::LevelScheme;
use crate::shard::{Dataset, DatasetManifest, DatasetOf, Shard};

/// A record's payloads for the requested level.
pub(super) type Payloads = Arc<Vec<Vec<u8>>>;
/// A miss read: its index in the batch and its payloads.
pub(super) type Fetched = (usize, Result<Payloads>);
/// Largest single read of [`read_coalesced`] (and of tensor records' coalesced reads).
pub(super) const MAX_COALESCED_READ: u64 = 8 << 20;

/// The payloads that `level` needs of the samples `ids[k]` of `dataset` for `k` in `misses`,
/// each CRC-checked: per shard, payloads at most `gap` bytes apart are read together
/// ([`crate::shard::ShardReader::read_levels_coalesced`]), shards in parallel
/// ([`read_by_shard`]). Returns `(k, payloads)` per miss and the number of reads.
pub(super) fn read_coalesced(
    dataset: &Dataset,
    ids: &[u32],
    misses: &[usize],
    level: u8,
    gap: u64,
) -> (Vec<Fetched>, usize) {
    read_by_shard(dataset, ids, misses, |shard, records| {
        let needed: Vec<Result<u8>> = records
            .iter()
            .map(|&r| Ok(levels_needed(shard.entry(r)?.scheme, level)))
            .collect();
        let wanted: Vec<(usize, u8)> = records
            .iter()
            .zip(&needed)
            .flat_map(|(&r, n)| (0..*n.as_ref().unwrap_or(&0)).map(move |l| (r, l)))
            .collect();
        let (mut results, calls) = shard.read_levels_coalesced(&wanted, gap, MAX_COALESCED_READ);
        let mut drained = results.drain(..);
        let per_record = needed
            .into_iter()
            .map(|n| {
                let n = n?;
                drained.by_ref().take(n as usize).collect()
            })
            .collect();
        (per_record, calls)
    })
}

/// Payloads a record stored by `scheme` needs for `level`: levels `0..=level`, or its one
/// payload where it is stored flat.
fn levels_needed(scheme: LevelScheme, level: u8) -> u8 {
    match scheme {
        LevelScheme::Flat => 1,
        LevelScheme::Interlace => level + 1,
    }
}

/// Bytes of each record's payloads for `level` (what [`read_coalesced`] returns for it,
/// from the index; 0 for an entry the index cannot give).
pub(super) fn record_bytes(dataset: &Dataset, level: u8) -> Vec<u64> {
    (0..dataset.len())
        .map(|i| {
            dataset.entry(i).map_or(0, |e| {
                let needed = levels_needed(e.scheme, level) as usize;
                e.levels().take(needed).map(|l| l.len).sum()
            })
        })
        .collect()
}

/// The records of the samples `ids[k]` of `dataset` for `k` in `misses`, grouped by shard and
/// read with `read(shard, records in it)` (one result per record, in order, and the reads
/// made), shards in parallel (on the calling thread's rayon pool). Returns `(k, payloads)`
/// per miss (a sample the dataset does not have is an error of its own) and the reads.
pub(super) fn read_by_shard<M: DatasetManifest>(
    dataset: &DatasetOf<M>,
    ids: &[u32],
    misses: &[usize],
    read: impl Fn(&Shard<M::Index>, &[usize]) -> (Vec<Result<Vec<Vec<u8>>>>, usize) + Sync,
) -> (Vec<Fetched>, usize) {
    let mut out = Vec::with_capacity(misses.len());
    // shard -> (miss k, record in the shard)
    let mut by_shard: BTreeMap<usize, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for &k in misses {
        match dataset.locate(ids[k] as u64) {
            Ok((s, r)) => {
                let (ks, rs) = by_shard.entry(s).or_default();
                ks.push(k);
                rs.push(r);
            }
            Err(e) => out.push((k, Err(e))),
        }
    }
    // (shard, (the batch positions, their records)).
    type Group = (usize, (Vec<usize>, Vec<usize>));
    let groups: Vec<Group> = by_shard.into_iter().collect();
    let read: Vec<(Vec<Fetched>, usize)> = groups
        .par_iter()
        .map(|(s, (ks, records))| {
            let (results, calls) = read(&dataset.shards()[*s], records);
            debug_assert_eq!(results.len(), ks.len());
            let fetched = ks
                .iter()
                .zip(results)
                .map(|(&k, r)| (k, r.map(Arc::new)))
                .collect();
            (fetched, calls)
        })
        .collect();
    let mut calls = 0;
    for (r, c) in read {
        out.extend(r);
        calls += c;
    }
    (out, calls)
}
