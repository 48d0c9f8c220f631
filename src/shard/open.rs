//! Opening a dataset of either kind: the manifest is read once, its `kind` says whether the
//! records are images ([`Dataset`]) or tensors ([`TensorDataset`]), and the dataset opens
//! from those same bytes. Every front end (CLI, Python, copy) opens datasets here instead of
//! asking the kind first and reading the manifest again.

use std::path::Path;
use std::time::Instant;

use super::manifest::{kind_of, read_manifest_bytes, MANIFEST_NAME};
use super::{Dataset, DatasetManifest, Manifest, RecordKind, TensorDataset, TensorManifest};
use crate::error::Result;
use crate::limits::Limits;
use crate::store::Store;

/// A dataset's manifest, of either kind.
#[derive(Debug, Clone)]
pub enum AnyManifest {
    /// Image records.
    Images(Manifest),
    /// Tensor records.
    Tensors(TensorManifest),
}

impl AnyManifest {
    /// Reads and checks the manifest of `store` (one read).
    pub fn read_in(store: &Store) -> Result<Self> {
        Self::parse(&read_manifest_bytes(store)?, &store.describe(MANIFEST_NAME))
    }

    /// The manifest in `bytes` (read from `shown`, a path or URL), checked as its kind's.
    pub fn parse(bytes: &[u8], shown: &str) -> Result<Self> {
        Ok(match kind_of(bytes, shown)? {
            RecordKind::Images => AnyManifest::Images(Manifest::parse(bytes, shown)?),
            RecordKind::Tensors => AnyManifest::Tensors(TensorManifest::parse(bytes, shown)?),
        })
    }

    /// The records' kind.
    pub fn kind(&self) -> RecordKind {
        match self {
            AnyManifest::Images(_) => RecordKind::Images,
            AnyManifest::Tensors(_) => RecordKind::Tensors,
        }
    }

    /// Records in the dataset.
    pub fn records(&self) -> u64 {
        match self {
            AnyManifest::Images(m) => m.records,
            AnyManifest::Tensors(m) => m.records,
        }
    }

    /// The shard files, in order.
    pub fn shard_files(&self) -> Vec<&str> {
        match self {
            AnyManifest::Images(m) => m.shards.iter().map(|s| s.file.as_str()).collect(),
            AnyManifest::Tensors(m) => m.shards.iter().map(|s| s.file.as_str()).collect(),
        }
    }
}

/// An open dataset of either kind.
#[derive(Debug)]
pub enum AnyDataset {
    /// Image records.
    Images(Dataset),
    /// Tensor records.
    Tensors(TensorDataset),
}

impl AnyDataset {
    /// Opens the dataset in folder `dir` with the default [`Limits`].
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_in(&Store::local(dir), &Limits::default())
    }

    /// Opens the dataset of `store` (a local folder or an object store): its manifest read
    /// once, then every shard it lists, each read bounded by `limits` (see
    /// [`Dataset::open_in`] and [`TensorDataset::open_in`]).
    pub fn open_in(store: &Store, limits: &Limits) -> Result<Self> {
        let started = Instant::now();
        Ok(match AnyManifest::read_in(store)? {
            AnyManifest::Images(m) => {
                AnyDataset::Images(Dataset::open_with_manifest(store, m, limits, started)?)
            }
            AnyManifest::Tensors(m) => AnyDataset::Tensors(TensorDataset::open_with_manifest(
                store, m, limits, started,
            )?),
        })
    }

    /// The records' kind.
    pub fn kind(&self) -> RecordKind {
        match self {
            AnyDataset::Images(_) => RecordKind::Images,
            AnyDataset::Tensors(_) => RecordKind::Tensors,
        }
    }

    /// Records in the dataset.
    pub fn len(&self) -> u64 {
        match self {
            AnyDataset::Images(d) => d.len(),
            AnyDataset::Tensors(d) => d.len(),
        }
    }

    /// Whether the dataset has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where the dataset lives.
    pub fn store(&self) -> &Store {
        match self {
            AnyDataset::Images(d) => d.store(),
            AnyDataset::Tensors(d) => d.store(),
        }
    }
}
