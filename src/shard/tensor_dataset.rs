//! A tensor dataset (feature `dataset`): tensor shards and a `manifest.json` of kind
//! `"tensors"` ([`TensorManifest`]: the arrays every record holds, their normalisation
//! statistics, the shards), opened as one [`TensorDataset`] with records numbered across
//! shards. Opening checks every shard's index against the manifest: record count, size,
//! payload bytes, and that every record holds exactly the declared arrays.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::dataset::MAX_SHARD_INDEX_BYTES;
use super::manifest::{read_manifest_bytes, MANIFEST_NAME, TENSOR_KIND};
use super::tensor_format::{PayloadEntry, TensorEntry};
use super::TensorShardReader;
use crate::decode::DecodeOptions;
use crate::error::{Error, Result};
use crate::field::Bound;
use crate::limits::Limits;
use crate::store::Store;
use crate::tensor::{check_name, check_shape, ArraySpec, DType, Moments, NdArray, StorageMode};

/// The tensor manifest format this code writes and reads.
pub const TENSOR_MANIFEST_VERSION: u32 = 1;

/// An array every record of the dataset holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayDecl {
    /// Its name.
    pub name: String,
    /// Element type ([`DType::name`]).
    pub dtype: String,
    /// Shape, C order.
    pub shape: Vec<u32>,
    /// Storage mode ([`StorageMode::name`]).
    pub mode: String,
    /// The bound asked for (error-bounded arrays only).
    pub bound: Option<Bound>,
    /// The fill value's bits in the element type, if one is declared.
    pub fill_bits: Option<u64>,
}

impl ArrayDecl {
    /// The element type.
    pub fn dtype(&self) -> Option<DType> {
        DType::from_name(&self.dtype)
    }

    /// Whether the array `spec` of a record is this one (name, type, shape, mode, fill).
    pub fn describes(&self, spec: &ArraySpec) -> bool {
        self.name == spec.name
            && self.dtype == spec.dtype.name()
            && self.shape == spec.shape
            && self.mode == spec.mode.name()
            && self.fill_bits == spec.fill
    }
}

/// Normalisation statistics of one float array name over the dataset: its finite, non-fill
/// values (population standard deviation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ArrayStats {
    /// Values counted.
    pub count: u64,
    /// Their mean.
    pub mean: f64,
    /// Their standard deviation.
    pub std: f64,
}

/// One shard of a tensor dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorShardInfo {
    /// File name in the dataset folder.
    pub file: String,
    /// Records in the shard.
    pub records: u64,
    /// Bytes of the shard file.
    pub bytes: u64,
    /// CRC-32 of the whole file.
    pub crc32: u32,
    /// Payload bytes of every record.
    pub payload_bytes: u64,
    /// Moments of each float array name over the shard's records (merged in shard order into
    /// the dataset's statistics).
    pub moments: BTreeMap<String, Moments>,
}

impl TensorShardInfo {
    /// What opening the shard reads first: its header, and its index and trailer (after the
    /// payloads, which follow the header).
    pub fn hint(&self) -> crate::store::BlobHint {
        super::manifest::shard_hint(self.bytes, self.crc32, self.payload_bytes)
    }
}

/// The manifest of a tensor dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorManifest {
    /// [`TENSOR_MANIFEST_VERSION`].
    pub version: u32,
    /// [`TENSOR_KIND`].
    pub kind: String,
    /// The arrays of every record, in index order.
    pub arrays: Vec<ArrayDecl>,
    /// Statistics per float array name.
    pub stats: BTreeMap<String, ArrayStats>,
    /// Shards in order.
    pub shards: Vec<TensorShardInfo>,
    /// Records (the shards' sum).
    pub records: u64,
}

/// Merges per-shard moments in shard order into statistics per name.
pub fn merge_stats(shards: &[TensorShardInfo]) -> BTreeMap<String, ArrayStats> {
    let mut all: BTreeMap<String, Moments> = BTreeMap::new();
    for s in shards {
        for (name, m) in &s.moments {
            all.entry(name.clone()).or_default().merge(m);
        }
    }
    all.into_iter()
        .map(|(name, m)| {
            let stats = ArrayStats {
                count: m.count,
                mean: m.mean,
                std: m.std(),
            };
            (name, stats)
        })
        .collect()
}

impl TensorManifest {
    /// Reads and validates `DIR/manifest.json` ([`TensorManifest::check_fields`]).
    pub fn read(dir: &Path) -> Result<Self> {
        Self::read_in(&Store::local(dir))
    }

    /// Like [`TensorManifest::read`], the manifest of `store` (a local folder or an object
    /// store).
    pub fn read_in(store: &Store) -> Result<Self> {
        Self::parse(&read_manifest_bytes(store)?, &store.describe(MANIFEST_NAME))
    }

    /// The manifest in `bytes` (read from `shown`, a path or URL), checked
    /// ([`TensorManifest::check_fields`]).
    pub fn parse(bytes: &[u8], shown: &str) -> Result<Self> {
        let m: TensorManifest =
            serde_json::from_slice(bytes).map_err(|e| Error::Manifest(format!("{shown}: {e}")))?;
        m.check_fields()
            .map_err(|what| Error::Manifest(format!("{shown}: {what}")))?;
        Ok(m)
    }

    /// The checks that need no shard: version and kind; 1..=16 arrays with valid, distinct
    /// names, known types and modes, valid shapes; plain, distinct shard file names; a
    /// record total equal to the shards' sum. Returns what is wrong.
    pub fn check_fields(&self) -> std::result::Result<(), String> {
        if self.version != TENSOR_MANIFEST_VERSION {
            return Err(format!("unsupported manifest version {}", self.version));
        }
        if self.kind != TENSOR_KIND {
            return Err(format!("kind {:?} (expected {TENSOR_KIND:?})", self.kind));
        }
        if self.arrays.is_empty() || self.arrays.len() > crate::tensor::MAX_ARRAYS {
            return Err(format!("{} arrays (must be 1..=16)", self.arrays.len()));
        }
        let mut names = std::collections::HashSet::new();
        for a in &self.arrays {
            check_name(&a.name).map_err(|r| format!("array name {:?}: {r}", a.name))?;
            if !names.insert(a.name.as_str()) {
                return Err(format!("array {:?} is listed twice", a.name));
            }
            if a.dtype().is_none() {
                return Err(format!("array {:?}: unknown dtype {:?}", a.name, a.dtype));
            }
            check_shape(&a.shape).map_err(|r| format!("array {:?}: shape: {r}", a.name))?;
            let modes = [
                StorageMode::Raw,
                StorageMode::Lossless,
                StorageMode::ErrorBounded,
            ];
            if !modes.iter().any(|m| m.name() == a.mode) {
                return Err(format!("array {:?}: unknown mode {:?}", a.name, a.mode));
            }
        }
        let mut files = std::collections::HashSet::new();
        for s in &self.shards {
            super::manifest::check_shard_file(&s.file, &mut files)?;
        }
        let total = self
            .shards
            .iter()
            .try_fold(0u64, |a, s| a.checked_add(s.records));
        if total != Some(self.records) {
            return Err(format!("records {} is not the shards' sum", self.records));
        }
        Ok(())
    }

    /// Every field of shard entry `s` that disagrees with `shard` (its file opened), one line
    /// each naming the shard: records, bytes, payload bytes, and the first record whose
    /// arrays are not the declared ones. The CRC-32 needs the whole file (`l3
    /// verify-dataset` checks it).
    pub fn mismatches(&self, s: &TensorShardInfo, shard: &TensorShardReader) -> Vec<String> {
        let mut out = Vec::new();
        let mut differ = |field: &str, has: u64, says: u64| {
            out.push(format!(
                "{}: {field}: the shard has {has}, the manifest says {says}",
                s.file
            ))
        };
        if shard.len() as u64 != s.records {
            differ("records", shard.len() as u64, s.records);
        }
        if shard.file_len() != s.bytes {
            differ("bytes", shard.file_len(), s.bytes);
        }
        if shard.payload_bytes() != s.payload_bytes {
            differ("payload_bytes", shard.payload_bytes(), s.payload_bytes);
        }
        if let Some((i, e)) = shard
            .entries()
            .iter()
            .enumerate()
            .find(|(_, e)| !self.holds(e))
        {
            out.push(format!(
                "{}: record {i} (key {:?}): its arrays are not the manifest's",
                s.file, e.key
            ));
        }
        out
    }

    /// Whether record entry `e` holds exactly the declared arrays, in order.
    pub fn holds(&self, e: &TensorEntry) -> bool {
        e.arrays.len() == self.arrays.len()
            && e.arrays
                .iter()
                .zip(&self.arrays)
                .all(|(a, d)| d.describes(&a.spec))
    }

    /// Writes `DIR/manifest.json` atomically after [`TensorManifest::check_fields`].
    pub fn write(&self, dir: &Path) -> Result<()> {
        self.check_fields().map_err(|what| {
            Error::Manifest(format!("{}: {what}", dir.join(MANIFEST_NAME).display()))
        })?;
        Ok(super::write_atomic(
            &dir.join(MANIFEST_NAME),
            &self.to_json()?,
        )?)
    }

    /// The manifest file's bytes: pretty JSON and a newline.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let mut json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Manifest(format!("serialising the manifest: {e}")))?;
        json.push(b'\n');
        Ok(json)
    }
}

/// An open tensor dataset.
#[derive(Debug)]
pub struct TensorDataset {
    /// The folder (for an object store, its URL as a path).
    dir: PathBuf,
    store: Store,
    manifest: TensorManifest,
    shards: Vec<TensorShardReader>,
    /// First dataset record of each shard, plus the total at the end.
    starts: Vec<u64>,
    limits: Limits,
}

impl TensorDataset {
    /// Opens `dir/manifest.json` and every shard it lists with the default [`Limits`].
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with_limits(dir, &Limits::default())
    }

    /// Opens the dataset, every read of a shard at most `limits.max_input_bytes` and every
    /// decoded array at most `limits.max_output_bytes`; each shard is checked against the
    /// manifest ([`TensorManifest::mismatches`]).
    pub fn open_with_limits(dir: &Path, limits: &Limits) -> Result<Self> {
        Self::open_in(&Store::local(dir), limits)
    }

    /// Like [`TensorDataset::open_with_limits`], the dataset of `store` (a local folder or an
    /// object store). The shards are opened in parallel (at most 8 threads of their own); the
    /// error returned is the first shard's in manifest order.
    pub fn open_in(store: &Store, limits: &Limits) -> Result<Self> {
        Self::open_with_manifest(store, TensorManifest::read_in(store)?, limits)
    }

    /// Like [`TensorDataset::open_in`], with the manifest already read from `store`.
    pub fn open_with_manifest(
        store: &Store,
        manifest: TensorManifest,
        limits: &Limits,
    ) -> Result<Self> {
        let open = |s: &TensorShardInfo| -> Result<TensorShardReader> {
            let shard = TensorShardReader::open_in_hinted(
                store,
                &s.file,
                &s.hint(),
                MAX_SHARD_INDEX_BYTES,
                limits,
            )?;
            let problems = manifest.mismatches(s, &shard);
            if !problems.is_empty() {
                return Err(Error::Manifest(problems.join("; ")));
            }
            Ok(shard)
        };
        let (shards, starts) = super::dataset::open_shards(&manifest.shards, |s| s.records, open)?;
        Ok(TensorDataset {
            dir: PathBuf::from(store.location()),
            store: store.clone(),
            manifest,
            shards,
            starts,
            limits: *limits,
        })
    }

    /// Where the dataset lives.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The dataset's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &TensorManifest {
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
    pub fn shards(&self) -> &[TensorShardReader] {
        &self.shards
    }

    /// Which shard holds record `i`, and its index there.
    pub fn locate(&self, i: u64) -> Result<(usize, usize)> {
        if i >= self.len() {
            return Err(super::ShardError::NoSuchRecord {
                record: i,
                level: 0,
                records: self.len(),
                levels: 1,
            }
            .into());
        }
        let shard = self.starts.partition_point(|&s| s <= i) - 1;
        Ok((shard, (i - self.starts[shard]) as usize))
    }

    /// Record `i`'s index entry.
    pub fn entry(&self, i: u64) -> Result<&TensorEntry> {
        let (s, r) = self.locate(i)?;
        self.shards[s].entry(r)
    }

    /// Record `i`'s arrays as its index gives them, in index order: each array's spec and
    /// where its payload lies (nothing read).
    pub fn arrays_of(&self, i: u64) -> Result<Vec<(&ArraySpec, PayloadEntry)>> {
        Ok(self
            .entry(i)?
            .arrays
            .iter()
            .map(|a| (&a.spec, a.payload))
            .collect())
    }

    /// Record `i`'s payloads, one per array in index order, read with one positional read
    /// where the record is within the dataset's read limit (else one per array, each within
    /// it), each checked against its CRC-32, not decoded (for a reader that caches or decodes
    /// them itself: [`crate::tensor::decode_array`]). Errors are the shard's; the caller
    /// names the record ([`TensorDataset::name_of`]).
    pub fn read_payloads(&self, i: u64) -> Result<Vec<Vec<u8>>> {
        let (s, r) = self.locate(i)?;
        let (mut read, _) = self.shards[s].read_records_coalesced(&[r], 0, u64::MAX);
        read.pop().expect("one record asked")
    }

    /// The shard file and the key of record `i` (empty strings where there is no such
    /// record).
    pub fn name_of(&self, i: u64) -> (String, String) {
        match self.locate(i) {
            Ok((s, r)) => (
                self.shards[s].name().to_owned(),
                self.shards[s]
                    .entry(r)
                    .map(|e| e.key.clone())
                    .unwrap_or_default(),
            ),
            Err(_) => (String::new(), String::new()),
        }
    }

    /// Record `i`'s arrays, decoded on the CPU within the dataset's limits. An error names
    /// the record ([`Error::Record`]).
    pub fn read(&self, i: u64) -> Result<Vec<(String, NdArray)>> {
        let (s, r) = self.locate(i)?;
        let options = DecodeOptions {
            limits: self.limits,
            ..DecodeOptions::default()
        };
        let shard = &self.shards[s];
        shard.read_record(r, &options).map_err(|e| Error::Record {
            sample: i,
            shard: shard.name().to_owned(),
            key: shard.entry(r).map(|e| e.key.clone()).unwrap_or_default(),
            error: Box::new(e),
        })
    }
}
