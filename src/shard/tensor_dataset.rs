//! A tensor dataset (feature `dataset`): tensor shards and a `manifest.json` of kind
//! `"tensors"` ([`TensorManifest`]: the arrays every record holds, their normalisation
//! statistics, the shards), opened as one [`TensorDataset`] with records numbered across
//! shards. Opening checks every shard's index against the manifest: record count, size,
//! payload bytes, and that every record holds exactly the declared arrays. A manifest of
//! version 2 adds a [`SampleWindow`] (`super::sample_window`): a sample is then a window over
//! the records, each array read some records after the sample's index.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::dataset::{DatasetManifest, DatasetOf, ShardEntry};
use super::manifest::{differs, parse_checked, MANIFEST_NAME, TENSOR_KIND};
use super::sample_window::{SamplePart, SampleWindow, TENSOR_WINDOW_VERSION};
use super::tensor_format::{PayloadEntry, TensorEntry};
use super::{TensorIndex, TensorShardReader};
use crate::decode::DecodeOptions;
use crate::error::{Error, Result};
use crate::field::Bound;
use crate::tensor::{check_name, check_shape, ArraySpec, DType, Moments, NdArray, StorageMode};

/// The tensor manifest format of a dataset whose samples are its records (this code writes it
/// for them and reads it; a windowed dataset is [`TENSOR_WINDOW_VERSION`]).
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

    /// Whether the array `spec` of a record is this one (name, type, shape, mode, fill). An
    /// error-bounded array may be stored lossless in a record: its bound was too fine for the
    /// bins there, and the packer stores such an array exactly (SPEC "Tensor records").
    pub fn describes(&self, spec: &ArraySpec) -> bool {
        let mode = self.mode == spec.mode.name()
            || (self.mode == StorageMode::ErrorBounded.name()
                && self.dtype == DType::Float32.name()
                && spec.mode == StorageMode::Lossless);
        self.name == spec.name
            && self.dtype == spec.dtype.name()
            && self.shape == spec.shape
            && mode
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
    /// [`TENSOR_MANIFEST_VERSION`], or [`TENSOR_WINDOW_VERSION`] with a window.
    pub version: u32,
    /// [`TENSOR_KIND`].
    pub kind: String,
    /// The arrays of every record, in index order.
    pub arrays: Vec<ArrayDecl>,
    /// Statistics per float array name (of a windowed dataset: per sample array name, over
    /// the records its samples read).
    pub stats: BTreeMap<String, ArrayStats>,
    /// Shards in order.
    pub shards: Vec<TensorShardInfo>,
    /// Records (the shards' sum).
    pub records: u64,
    /// Version 2: a sample is a window over the records (absent in version 1: a sample is a
    /// record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<SampleWindow>,
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
    /// The checks that need no shard: version and kind; 1..=16 arrays with valid, distinct
    /// names, known types and modes, valid shapes; plain, distinct shard file names; a
    /// record total equal to the shards' sum. Returns what is wrong.
    pub fn check_fields(&self) -> std::result::Result<(), String> {
        match (self.version, &self.window) {
            (TENSOR_MANIFEST_VERSION, None) | (TENSOR_WINDOW_VERSION, Some(_)) => {}
            (TENSOR_WINDOW_VERSION, None) => {
                return Err(format!(
                    "manifest version {TENSOR_WINDOW_VERSION} without a window"
                ))
            }
            (TENSOR_MANIFEST_VERSION, Some(_)) => {
                return Err(format!(
                    "a window needs manifest version {TENSOR_WINDOW_VERSION}, not {}",
                    self.version
                ))
            }
            (v, _) => return Err(format!("unsupported manifest version {v}")),
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
        if let Some(w) = &self.window {
            w.check(&self.stored_names(), self.records)?;
        }
        Ok(())
    }

    /// The stored arrays' names, in order.
    fn stored_names(&self) -> Vec<&str> {
        self.arrays.iter().map(|a| a.name.as_str()).collect()
    }

    /// Samples: the window's, or the records.
    pub fn samples(&self) -> u64 {
        self.window.as_ref().map_or(self.records, |w| w.samples)
    }

    /// The arrays of a sample, in order: the window's (each its stored array's declaration
    /// under the sample's name), or the records' arrays.
    pub fn sample_arrays(&self) -> Vec<ArrayDecl> {
        match &self.window {
            Some(w) => w
                .arrays
                .iter()
                .filter_map(|x| {
                    let a = self.arrays.iter().find(|a| a.name == x.array)?;
                    Some(ArrayDecl {
                        name: x.name.clone(),
                        ..a.clone()
                    })
                })
                .collect(),
            None => self.arrays.clone(),
        }
    }

    /// Where each array of sample `i` lies (record, array index in it), in
    /// [`TensorManifest::sample_arrays`]' order; an error for a sample past the end.
    pub fn sample_parts(&self, i: u64) -> Result<Vec<SamplePart>> {
        match &self.window {
            Some(w) => w.parts(&self.stored_names(), i),
            None if i < self.records => Ok((0..self.arrays.len())
                .map(|array| SamplePart { record: i, array })
                .collect()),
            None => Err(Error::Manifest(format!(
                "sample {i} is past the end of {} samples",
                self.records
            ))),
        }
    }

    /// The distinct records sample `i` reads, ascending (`[i]` without a window).
    pub fn sample_records(&self, i: u64) -> Vec<u64> {
        match &self.window {
            Some(w) => w.records_of(i),
            None => vec![i],
        }
    }

    /// Every field of shard entry `s` that disagrees with `shard` (its file opened), one line
    /// each naming the shard: records, bytes, payload bytes, and the first record whose
    /// arrays are not the declared ones. The CRC-32 needs the whole file (`l3
    /// verify-dataset` checks it).
    pub fn mismatches(&self, s: &TensorShardInfo, shard: &TensorShardReader) -> Vec<String> {
        let mut out = shard.differs(&s.file, s.records, s.bytes);
        if shard.payload_bytes() != s.payload_bytes {
            let (has, says) = (shard.payload_bytes(), s.payload_bytes);
            out.push(differs(&s.file, "payload_bytes", has, says));
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

impl DatasetManifest for TensorManifest {
    type Index = TensorIndex;
    type ShardInfo = TensorShardInfo;

    fn parse(bytes: &[u8], shown: &str) -> Result<Self> {
        parse_checked(bytes, shown, TensorManifest::check_fields)
    }

    fn shard_infos(&self) -> &[TensorShardInfo] {
        &self.shards
    }

    fn record_levels(&self) -> u8 {
        1
    }

    fn mismatches(&self, info: &TensorShardInfo, shard: &TensorShardReader) -> Vec<String> {
        TensorManifest::mismatches(self, info, shard)
    }
}

impl ShardEntry for TensorShardInfo {
    fn file(&self) -> &str {
        &self.file
    }
    fn records(&self) -> u64 {
        self.records
    }
    fn hint(&self) -> crate::store::BlobHint {
        TensorShardInfo::hint(self)
    }
}

/// An open tensor dataset.
pub type TensorDataset = DatasetOf<TensorManifest>;

impl TensorDataset {
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

    /// Samples (the records, or a window's samples: [`TensorManifest::samples`]).
    pub fn samples(&self) -> u64 {
        self.manifest().samples()
    }

    /// Sample `i`'s arrays (named as the sample names them), each decoded on the CPU from
    /// the record that holds it within the dataset's limits: [`TensorDataset::read`] of
    /// record `i` without a window. An error names the record.
    pub fn read_sample(&self, i: u64) -> Result<Vec<(String, NdArray)>> {
        let m = self.manifest();
        if m.window.is_none() {
            return self.read(i);
        }
        let parts = m.sample_parts(i)?;
        let names = m.sample_arrays();
        let mut records: BTreeMap<u64, Vec<(String, NdArray)>> = BTreeMap::new();
        let mut out = Vec::with_capacity(parts.len());
        for (p, d) in parts.iter().zip(names) {
            let arrays = match records.entry(p.record) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => e.insert(self.read(p.record)?),
            };
            let (_, a) = arrays.get(p.array).ok_or_else(|| Error::Record {
                sample: p.record,
                shard: self.name_of(p.record).0,
                key: self.name_of(p.record).1,
                error: Box::new(Error::Manifest(format!("no array {}", p.array))),
            })?;
            out.push((d.name, a.clone()));
        }
        Ok(out)
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
