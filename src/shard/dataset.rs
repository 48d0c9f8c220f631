//! A packed dataset (feature `dataset`): the shards a [`Manifest`] lists, opened once (in
//! parallel on threads of its own), with records numbered across shards. Opening checks every
//! shard's index against the manifest ([`super::ShardInfo::mismatches`]: record count, levels,
//! bytes per level, file size, class ids); records are then read with positional reads, each
//! bounded by the caller's limits.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::file::{Shard, ShardIndex};
use super::manifest::{read_manifest_bytes, MANIFEST_NAME};
use super::{ImageIndex, Manifest, RecordEntry, RecordRef, ShardInfo};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::store::{BlobHint, Store};

/// The most threads opening a dataset's shards.
const MAX_OPEN_THREADS: usize = 8;

/// Largest index of one shard accepted when opening a dataset.
pub const MAX_SHARD_INDEX_BYTES: u64 = 1 << 30;

/// A dataset's `manifest.json` as one record kind reads it: the shards it lists and how an
/// opened shard is checked against it. [`Manifest`] (images) and
/// [`super::TensorManifest`] (tensors) are the two.
pub trait DatasetManifest: Sized + std::fmt::Debug + Sync {
    /// The kind's shard index.
    type Index: ShardIndex;
    /// The manifest's entry for one shard.
    type ShardInfo: ShardEntry + Sync;

    /// The manifest in `bytes` (read from `shown`, a path or URL), checked.
    fn parse(bytes: &[u8], shown: &str) -> Result<Self>;

    /// Reads and checks `DIR/manifest.json` (at most `MAX_MANIFEST_BYTES`).
    fn read(dir: &Path) -> Result<Self> {
        Self::read_in(&Store::local(dir))
    }

    /// Like [`DatasetManifest::read`], the manifest of `store` (a local folder or an object
    /// store).
    fn read_in(store: &Store) -> Result<Self> {
        Self::parse(&read_manifest_bytes(store)?, &store.describe(MANIFEST_NAME))
    }

    /// The shards, in order.
    fn shard_infos(&self) -> &[Self::ShardInfo];

    /// Levels (images) or 1 (tensors) per record, as errors report them.
    fn record_levels(&self) -> u8;

    /// Every field of shard entry `info` that disagrees with `shard` (its file opened), one
    /// line each naming the shard.
    fn mismatches(&self, info: &Self::ShardInfo, shard: &Shard<Self::Index>) -> Vec<String>;
}

/// What a dataset needs of a manifest's shard entry.
pub trait ShardEntry {
    /// File name in the dataset folder.
    fn file(&self) -> &str;
    /// Records in the shard.
    fn records(&self) -> u64;
    /// What opening the shard reads first ([`crate::store::Store::open_blob_hinted`]).
    fn hint(&self) -> BlobHint;
}

impl DatasetManifest for Manifest {
    type Index = ImageIndex;
    type ShardInfo = ShardInfo;

    fn parse(bytes: &[u8], shown: &str) -> Result<Self> {
        Manifest::parse_bytes(bytes, shown)
    }

    fn shard_infos(&self) -> &[ShardInfo] {
        &self.shards
    }

    fn record_levels(&self) -> u8 {
        self.levels
    }

    fn mismatches(&self, info: &ShardInfo, shard: &Shard<ImageIndex>) -> Vec<String> {
        info.mismatches(shard, self.levels, self.classes.len())
    }
}

impl ShardEntry for ShardInfo {
    fn file(&self) -> &str {
        &self.file
    }
    fn records(&self) -> u64 {
        self.records
    }
    fn hint(&self) -> BlobHint {
        ShardInfo::hint(self)
    }
}

/// An open dataset of the record kind manifest `M` describes: its shards opened once (in
/// parallel on threads of their own), every one checked against the manifest, records
/// numbered across shards. [`Dataset`] and [`super::TensorDataset`] name the two kinds.
#[derive(Debug)]
pub struct DatasetOf<M: DatasetManifest> {
    /// The folder (for an object store, its URL as a path).
    dir: PathBuf,
    store: Store,
    manifest: M,
    pub(super) shards: Vec<Shard<M::Index>>,
    /// First dataset record of each shard, plus the total at the end.
    starts: Vec<u64>,
    pub(super) limits: Limits,
    times: OpenTimes,
}

/// An open image dataset.
pub type Dataset = DatasetOf<Manifest>;

/// Where the time of [`DatasetOf::open`] went (wall).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenTimes {
    /// Reading and checking the manifest.
    pub manifest: Duration,
    /// Opening every shard: its index read and validated, and checked against the manifest.
    pub shards: Duration,
}

impl<M: DatasetManifest> DatasetOf<M> {
    /// Opens `dir/manifest.json` and every shard it lists, every read bounded by the default
    /// [`Limits`] (see [`DatasetOf::open_with_limits`]).
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with_limits(dir, &Limits::default())
    }

    /// Opens `dir/manifest.json` and every shard it lists; every read of a shard (index,
    /// payload, prefix) is at most `limits.max_input_bytes` ([`Shard::open_with_limits`]),
    /// every array decoded by the dataset at most `limits.max_output_bytes`. The shards are
    /// opened and checked in parallel; the error returned is the first shard's in manifest
    /// order, as if they were opened one after another.
    pub fn open_with_limits(dir: &Path, limits: &Limits) -> Result<Self> {
        Self::open_in(&Store::local(dir), limits)
    }

    /// Like [`DatasetOf::open_with_limits`], the dataset of `store` (a local folder or an
    /// object store: see [`Store::open`]).
    pub fn open_in(store: &Store, limits: &Limits) -> Result<Self> {
        let started = Instant::now();
        let manifest = M::read_in(store)?;
        Self::open_with_manifest(store, manifest, limits, started)
    }

    /// Like [`DatasetOf::open_in`], with the manifest already read from `store` (since
    /// `started`, for [`DatasetOf::open_times`]).
    pub fn open_with_manifest(
        store: &Store,
        manifest: M,
        limits: &Limits,
        started: Instant,
    ) -> Result<Self> {
        let manifest_time = started.elapsed();
        let open = |info: &M::ShardInfo| -> Result<Shard<M::Index>> {
            let shard = Shard::open_in_hinted(
                store,
                info.file(),
                &info.hint(),
                MAX_SHARD_INDEX_BYTES,
                limits,
            )?;
            let problems = manifest.mismatches(info, &shard);
            if !problems.is_empty() {
                return Err(Error::Manifest(problems.join("; ")));
            }
            Ok(shard)
        };
        let (shards, starts) = open_shards(manifest.shard_infos(), |s| s.records(), open)?;
        let times = OpenTimes {
            manifest: manifest_time,
            shards: started.elapsed() - manifest_time,
        };
        Ok(DatasetOf {
            dir: PathBuf::from(store.location()),
            store: store.clone(),
            manifest,
            shards,
            starts,
            limits: *limits,
            times,
        })
    }

    /// Where the dataset lives.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Where the time of opening went.
    pub fn open_times(&self) -> OpenTimes {
        self.times
    }

    /// The dataset's folder (for an object store, its URL as a path: see
    /// [`DatasetOf::store`]).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &M {
        &self.manifest
    }

    /// Records in the dataset.
    pub fn len(&self) -> u64 {
        *self.starts.last().expect("non-empty")
    }

    /// Whether the dataset has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open shards, in order.
    pub fn shards(&self) -> &[Shard<M::Index>] {
        &self.shards
    }

    /// Which shard holds dataset record `i`, and its index there.
    pub fn locate(&self, i: u64) -> Result<(usize, usize)> {
        if i >= self.len() {
            return Err(super::ShardError::NoSuchRecord {
                record: i,
                level: 0,
                records: self.len(),
                levels: self.manifest.record_levels(),
            }
            .into());
        }
        // The last shard whose first record is <= i.
        let shard = self.starts.partition_point(|&s| s <= i) - 1;
        Ok((shard, (i - self.starts[shard]) as usize))
    }
}

impl Dataset {
    /// Record `i`'s index entry (key, class, metadata, shape, levels).
    pub fn record(&self, i: u64) -> Result<&RecordEntry> {
        let (s, r) = self.locate(i)?;
        self.shards[s].record(r)
    }

    /// Record `i`'s index entry, read in place ([`super::ShardReader::entry`]: nothing
    /// allocated).
    pub fn entry(&self, i: u64) -> Result<RecordRef<'_>> {
        let (s, r) = self.locate(i)?;
        self.shards[s].entry(r)
    }

    /// Record `i` at level `level`: an L3 file, checked against its CRC-32.
    pub fn read(&self, i: u64, level: u8) -> Result<Vec<u8>> {
        let (s, r) = self.locate(i)?;
        self.shards[s].read_level(r, level)
    }

    /// The class name of a class id, if the manifest has it.
    pub fn class_name(&self, class: u32) -> Option<&str> {
        self.manifest
            .classes
            .get(class as usize)
            .map(String::as_str)
    }
}

/// `open` applied to every item, on at most [`MAX_OPEN_THREADS`] threads of their own (not
/// rayon's global pool: a process forked from one that used that pool (a `DataLoader` worker)
/// has the pool without its threads, and would wait on it forever), results in order.
/// Opens every shard of `infos` with `open` ([`open_all`]): the readers, or the first error
/// in manifest order; and the record index each shard starts at (`records_of` each, summed),
/// then the total.
pub(super) fn open_shards<T: Sync, R: Send>(
    infos: &[T],
    records_of: impl Fn(&T) -> u64,
    open: impl Fn(&T) -> Result<R> + Sync,
) -> Result<(Vec<R>, Vec<u64>)> {
    let opened = open_all(infos, open);
    let mut shards = Vec::with_capacity(infos.len());
    let mut starts = vec![0u64];
    for (info, shard) in infos.iter().zip(opened) {
        starts.push(starts.last().expect("non-empty") + records_of(info));
        shards.push(shard?);
    }
    Ok((shards, starts))
}

fn open_all<T: Sync, R: Send>(items: &[T], open: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_OPEN_THREADS);
    let chunk = items.len().div_ceil(threads).max(1);
    if items.len() <= 1 || threads == 1 {
        return items.iter().map(open).collect();
    }
    let open = &open;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(open).collect::<Vec<_>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}
