//! A packed dataset (feature `dataset`): the shards a [`Manifest`] lists, opened once, with
//! records numbered across shards. Opening checks every shard's index against the manifest
//! (record count, level count); records are then read with positional reads.

use std::path::{Path, PathBuf};

use super::{Manifest, RecordEntry, ShardReader};
use crate::error::{Error, Result};

/// Largest index of one shard accepted when opening a dataset.
pub const MAX_SHARD_INDEX_BYTES: u64 = 1 << 30;

/// An open dataset.
#[derive(Debug)]
pub struct Dataset {
    dir: PathBuf,
    manifest: Manifest,
    shards: Vec<ShardReader>,
    /// First dataset record of each shard, plus the total at the end.
    starts: Vec<u64>,
}

impl Dataset {
    /// Opens `dir/manifest.json` and every shard it lists.
    pub fn open(dir: &Path) -> Result<Self> {
        let manifest = Manifest::read(dir)?;
        let mut shards = Vec::with_capacity(manifest.shards.len());
        let mut starts = vec![0u64];
        for info in &manifest.shards {
            let shard = ShardReader::open(&dir.join(&info.file), MAX_SHARD_INDEX_BYTES)?;
            if shard.len() as u64 != info.records || shard.level_count() != manifest.levels {
                return Err(Error::Manifest(format!(
                    "{}: {} records and {} levels, the manifest says {} and {}",
                    info.file,
                    shard.len(),
                    shard.level_count(),
                    info.records,
                    manifest.levels
                )));
            }
            starts.push(starts.last().expect("non-empty") + info.records);
            shards.push(shard);
        }
        Ok(Dataset {
            dir: dir.to_path_buf(),
            manifest,
            shards,
            starts,
        })
    }

    /// The dataset's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
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
    pub fn shards(&self) -> &[ShardReader] {
        &self.shards
    }

    /// Which shard holds dataset record `i`, and its index there.
    pub fn locate(&self, i: u64) -> Result<(usize, usize)> {
        if i >= self.len() {
            return Err(super::ShardError::NoSuchRecord {
                record: i,
                level: 0,
                records: self.len(),
                levels: self.manifest.levels,
            }
            .into());
        }
        // The last shard whose first record is <= i.
        let shard = self.starts.partition_point(|&s| s <= i) - 1;
        Ok((shard, (i - self.starts[shard]) as usize))
    }

    /// Record `i`'s index entry (key, class, metadata, shape, levels).
    pub fn record(&self, i: u64) -> Result<&RecordEntry> {
        let (s, r) = self.locate(i)?;
        self.shards[s].record(r)
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
