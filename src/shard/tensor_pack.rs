//! Packing samples of named arrays into a tensor dataset ([`TensorPacker`], Python's
//! `l3.pack_arrays`): samples arrive one at a time; each full shard's samples are encoded on
//! rayon's pool, decoded back and compared with their source ([`verify_array`]), and written
//! atomically, so memory holds at most one shard's samples.
//!
//! Resume: beside each shard a sidecar `<shard>.pack.json` ([`TensorPackRecord`]) records the
//! options and a CRC-32 of every sample (key, class, metadata, each array's name, type, shape
//! and bytes). It is written before the shard, with the shard's size and CRC-32. A rerun reads
//! the samples again and keeps a shard whose sidecar has the same options and samples and
//! whose file has the recorded size and CRC-32 (nothing is encoded); it writes a missing shard,
//! or one whose sidecar matches but whose file does not (an interrupted write). A shard or a
//! manifest from other samples or options is an error naming it unless `force`.
//!
//! Windows ([`TensorPackOptions::window`]): the samples pushed are then the steps of a
//! sequence (one record each, every array stored once) and the manifest (version 2) says a
//! sample of the dataset is a window over them (`super::sample_window`); its statistics are
//! per sample array, over the records its samples read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::manifest::{file_crc32, MANIFEST_NAME, TENSOR_KIND};
use super::sample_window::{SampleWindow, TENSOR_WINDOW_VERSION};
use super::tensor_dataset::{
    merge_stats, ArrayDecl, ArrayStats, TensorManifest, TensorShardInfo, TENSOR_MANIFEST_VERSION,
};
use super::{
    write_atomic, DatasetManifest, TensorRecordInput, TensorShardReader, TensorShardWriter,
};
use crate::error::invalid_option;
use crate::error::{Error, ParameterError, Result};
use crate::tensor::{
    encode_array, verify_array, ArrayMode, ArrayOptions, BoundedFormat, Moments, NdArray,
    StorageMode,
};

/// One sample to pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSample {
    /// Key (a relative path); `None`: the sample's index, 8 digits.
    pub key: Option<String>,
    /// Class id, or `None`.
    pub class: Option<u32>,
    /// Metadata bytes.
    pub meta: Vec<u8>,
    /// The arrays: the same names, types and shapes in every sample.
    pub arrays: Vec<(String, NdArray)>,
}

/// Options of a [`TensorPacker`].
#[derive(Debug, Clone, PartialEq)]
pub struct TensorPackOptions {
    /// Samples per shard (at least 1).
    pub samples_per_shard: usize,
    /// Overwrite shards and a manifest made from other samples or options.
    pub force: bool,
    /// The mode of arrays not named in `modes`.
    pub default_mode: ArrayOptions,
    /// The mode of each array named here.
    pub modes: BTreeMap<String, ArrayOptions>,
    /// A sample window: `(sample array name, stored array name, offset)` per array of a
    /// sample (module documentation); empty: a sample is a record.
    pub window: Vec<(String, String, u64)>,
}

impl TensorPackOptions {
    /// `samples_per_shard` per shard, every array stored with `mode`, no fill value.
    pub fn new(samples_per_shard: usize, mode: ArrayMode) -> Self {
        TensorPackOptions {
            samples_per_shard,
            force: false,
            default_mode: ArrayOptions::new(mode),
            modes: BTreeMap::new(),
            window: Vec::new(),
        }
    }
}

/// What a pack did.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorPackSummary {
    /// Records in the dataset.
    pub records: u64,
    /// Shards.
    pub shards: usize,
    /// Bytes of the shards.
    pub bytes: u64,
    /// Shards written.
    pub written: usize,
    /// Shards kept from an earlier run.
    pub kept: usize,
    /// The manifest written.
    pub manifest: TensorManifest,
}

/// The sidecar of a tensor shard (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorPackRecord {
    /// [`TENSOR_KIND`].
    pub kind: String,
    /// The library version and every option that changes the shard's bytes.
    pub options: String,
    /// Bytes of the shard.
    pub shard_bytes: u64,
    /// CRC-32 of the shard.
    pub shard_crc32: u32,
    /// CRC-32 of each sample, in order.
    pub samples: Vec<u32>,
}

/// Largest sidecar read, in bytes.
const MAX_SIDECAR_BYTES: u64 = 64 << 20;

impl TensorPackRecord {
    /// `<shard>.pack.json` beside the shard.
    pub fn path_of(shard: &Path) -> PathBuf {
        super::pack::PackRecord::path_of(shard)
    }

    /// The sidecar of the shard at `shard`, if there is one that parses.
    pub fn read(shard: &Path) -> Option<Self> {
        use std::io::Read;
        let mut bytes = Vec::new();
        std::fs::File::open(Self::path_of(shard))
            .ok()?
            .take(MAX_SIDECAR_BYTES)
            .read_to_end(&mut bytes)
            .ok()?;
        serde_json::from_slice::<Self>(&bytes)
            .ok()
            .filter(|r| r.kind == TENSOR_KIND)
    }

    fn write(&self, shard: &Path) -> Result<()> {
        let mut json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Manifest(format!("serialising a pack record: {e}")))?;
        json.push(b'\n');
        Ok(write_atomic(&Self::path_of(shard), &json)?)
    }
}

/// Writes samples as tensor shards in a folder, then its manifest (see the module docs).
#[derive(Debug)]
pub struct TensorPacker {
    dir: PathBuf,
    options: TensorPackOptions,
    /// The arrays of the first sample, and each one's options.
    layout: Vec<(ArrayDecl, ArrayOptions)>,
    options_text: String,
    pending: Vec<TensorSample>,
    samples: u64,
    shards: Vec<TensorShardInfo>,
    written: usize,
    kept: usize,
    /// With a window: each record's moments per array (in the layout's order).
    record_moments: Vec<Vec<Option<Moments>>>,
}

impl TensorPacker {
    /// A packer writing into `dir` (created if missing).
    pub fn new(dir: &Path, options: TensorPackOptions) -> Result<Self> {
        if options.samples_per_shard == 0 {
            return Err(invalid_option("samples_per_shard", 0, "at least 1"));
        }
        std::fs::create_dir_all(dir)?;
        Ok(TensorPacker {
            dir: dir.to_path_buf(),
            options,
            layout: Vec::new(),
            options_text: String::new(),
            pending: Vec::new(),
            samples: 0,
            shards: Vec::new(),
            written: 0,
            kept: 0,
            record_moments: Vec::new(),
        })
    }

    /// Samples pushed so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The arrays every sample must hold (from the first sample; empty before it).
    pub fn arrays(&self) -> impl Iterator<Item = &ArrayDecl> {
        self.layout.iter().map(|(d, _)| d)
    }

    /// Adds a sample; a full shard is then encoded and written (or kept). Its arrays must
    /// be the first sample's (names, types, shapes; in any order): an error names the sample.
    pub fn push(&mut self, mut sample: TensorSample) -> Result<()> {
        let index = self.samples;
        let shard = self.shard_name(self.shards.len());
        let key = sample.key.clone().unwrap_or_else(|| default_key(index));
        let named = |e: Error| Error::Record {
            sample: index,
            shard: shard.clone(),
            key: key.clone(),
            error: Box::new(e),
        };
        if self.layout.is_empty() {
            self.layout = self.layout_of(&sample).map_err(named)?;
            self.check_window()?;
            self.options_text = self.options_text();
        }
        self.conform(&mut sample).map_err(named)?;
        if let Some(k) = &sample.key {
            super::format::check_key(k)
                .map_err(|reason| named(invalid_option("key", k.len() as u64, reason)))?;
        }
        self.pending.push(sample);
        self.samples += 1;
        if self.pending.len() == self.options.samples_per_shard {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the last shard and the manifest. A manifest already there that describes
    /// another dataset is an error unless `force`.
    pub fn finish(mut self) -> Result<TensorPackSummary> {
        if self.samples == 0 {
            return Err(invalid_option(
                "samples",
                0,
                "a dataset needs at least one sample",
            ));
        }
        if !self.pending.is_empty() {
            self.flush()?;
        }
        let (version, window, stats) = if self.options.window.is_empty() {
            (TENSOR_MANIFEST_VERSION, None, merge_stats(&self.shards))
        } else {
            let w = SampleWindow::new(&self.options.window, self.samples).map_err(|_| {
                invalid_option(
                    "window",
                    self.samples,
                    "an offset leaves no sample: the largest offset must be below the records",
                )
            })?;
            let stats = self.window_stats(&w);
            (TENSOR_WINDOW_VERSION, Some(w), stats)
        };
        let manifest = TensorManifest {
            version,
            kind: TENSOR_KIND.to_owned(),
            arrays: self.layout.iter().map(|(d, _)| d.clone()).collect(),
            stats,
            shards: self.shards.clone(),
            records: self.samples,
            window,
        };
        // Compared as the bytes written (JSON floats need not parse back to the same bits).
        let path = self.dir.join(MANIFEST_NAME);
        let json = manifest.to_json()?;
        match std::fs::read(&path) {
            Ok(old) if old == json => {}
            Ok(_) if !self.options.force => {
                let what = TensorManifest::read(&self.dir).map_or_else(
                    |_| "is not this dataset's manifest".to_owned(),
                    |old| {
                        format!(
                            "describes another dataset ({} records in {} shards)",
                            old.records,
                            old.shards.len()
                        )
                    },
                );
                return Err(exists(format!(
                    "{}: {what}; pass force to overwrite",
                    path.display()
                )));
            }
            _ => manifest.write(&self.dir)?,
        }
        Ok(TensorPackSummary {
            records: self.samples,
            shards: self.shards.len(),
            bytes: self.shards.iter().map(|s| s.bytes).sum(),
            written: self.written,
            kept: self.kept,
            manifest,
        })
    }

    /// Statistics per sample array of window `w`: its stored array's record moments merged
    /// in record order over the records its samples read.
    fn window_stats(&self, w: &SampleWindow) -> BTreeMap<String, ArrayStats> {
        let mut out = BTreeMap::new();
        for a in &w.arrays {
            let Some(j) = self.layout.iter().position(|(d, _)| d.name == a.array) else {
                continue;
            };
            let mut m = Moments::default();
            let mut any = false;
            let first = a.offset as usize;
            for r in self
                .record_moments
                .iter()
                .skip(first)
                .take(w.samples as usize)
            {
                if let Some(x) = &r[j] {
                    m.merge(x);
                    any = true;
                }
            }
            if any {
                let stats = ArrayStats {
                    count: m.count,
                    mean: m.mean,
                    std: m.std(),
                };
                out.insert(a.name.clone(), stats);
            }
        }
        out
    }

    /// Checks the window's arrays against the layout: each names a stored array, sample
    /// names valid and distinct.
    fn check_window(&self) -> Result<()> {
        let w = &self.options.window;
        if w.len() > crate::tensor::MAX_ARRAYS {
            return Err(invalid_option(
                "window",
                w.len() as u64,
                "a sample has 1 to 16 arrays",
            ));
        }
        for (k, (name, array, _)) in w.iter().enumerate() {
            crate::tensor::check_name(name)
                .map_err(|reason| invalid_option("window name", name.len() as u64, reason))?;
            if w[..k].iter().any(|x| x.0 == *name) {
                return Err(invalid_option(
                    "window name",
                    k as u64,
                    "sample array names are distinct",
                ));
            }
            if !self.layout.iter().any(|(d, _)| d.name == *array) {
                return Err(invalid_option(
                    "window",
                    k as u64,
                    "names an array the records do not have",
                ));
            }
        }
        Ok(())
    }

    fn shard_name(&self, i: usize) -> String {
        format!("shard-{i:05}.l3s")
    }

    /// The declared arrays of the first sample, with their options.
    fn layout_of(&self, sample: &TensorSample) -> Result<Vec<(ArrayDecl, ArrayOptions)>> {
        if sample.arrays.is_empty() || sample.arrays.len() > crate::tensor::MAX_ARRAYS {
            return Err(invalid_option(
                "arrays",
                sample.arrays.len() as u64,
                "a sample has 1 to 16 arrays",
            ));
        }
        if let Some(name) = self
            .options
            .modes
            .keys()
            .find(|n| !sample.arrays.iter().any(|(a, _)| a == *n))
        {
            return Err(invalid_option(
                "modes",
                name.len() as u64,
                "names an array the samples do not have",
            ));
        }
        let mut out: Vec<(ArrayDecl, ArrayOptions)> = Vec::new();
        for (name, a) in &sample.arrays {
            crate::tensor::check_name(name)
                .map_err(|reason| invalid_option("name", name.len() as u64, reason))?;
            if out.iter().any(|(d, _)| d.name == *name) {
                return Err(invalid_option(
                    "name",
                    name.len() as u64,
                    "array names are distinct",
                ));
            }
            let opts = *self
                .options
                .modes
                .get(name)
                .unwrap_or(&self.options.default_mode);
            let mode = opts.storage(a.dtype());
            let fill_bits = match opts.fill_value {
                None => None,
                Some(v) => {
                    Some(
                        a.dtype()
                            .bits_of(v)
                            .ok_or_else(|| ParameterError::InvalidFloat {
                                name: "fill_value",
                                value_bits: v.to_bits(),
                                reason: "not exactly a value of the array's type",
                            })?,
                    )
                }
            };
            let bound = match opts.mode {
                ArrayMode::Bounded(b) => Some(b),
                _ => None,
            };
            if mode == StorageMode::ErrorBounded && a.dtype() != crate::tensor::DType::Float32 {
                return Err(invalid_option(
                    "modes",
                    a.dtype() as u64,
                    "error-bounded arrays are float32 (store others lossless or raw)",
                ));
            }
            out.push((
                ArrayDecl {
                    name: name.clone(),
                    dtype: a.dtype().name().to_owned(),
                    shape: a.shape().to_vec(),
                    mode: mode.name().to_owned(),
                    bound,
                    fill_bits,
                },
                opts,
            ));
        }
        Ok(out)
    }

    /// Puts the sample's arrays in the layout's order, checking names, types and shapes.
    fn conform(&self, sample: &mut TensorSample) -> Result<()> {
        if sample.arrays.len() != self.layout.len() {
            return Err(invalid_option(
                "arrays",
                sample.arrays.len() as u64,
                "not the first sample's number of arrays",
            ));
        }
        let mut ordered = Vec::with_capacity(self.layout.len());
        for (d, _) in &self.layout {
            let k = sample
                .arrays
                .iter()
                .position(|(n, _)| *n == d.name)
                .ok_or_else(|| invalid_option("arrays", 0, "lacks an array of the first sample"))?;
            let (name, a) = sample.arrays.swap_remove(k);
            if a.dtype().name() != d.dtype {
                return Err(invalid_option(
                    "dtype",
                    a.dtype() as u64,
                    "not the first sample's",
                ));
            }
            if a.shape() != d.shape.as_slice() {
                return Err(invalid_option(
                    "shape",
                    a.shape().len() as u64,
                    "not the first sample's",
                ));
            }
            ordered.push((name, a));
        }
        sample.arrays = ordered;
        Ok(())
    }

    fn options_text(&self) -> String {
        let arrays: Vec<String> = self
            .layout
            .iter()
            .map(|(d, o)| {
                // The format only where it is not the default, so sidecars written before
                // the option existed still match.
                let format = match (o.mode, o.format) {
                    (ArrayMode::Bounded(_), BoundedFormat::V3) => " format v3",
                    _ => "",
                };
                format!(
                    "{}: {:?}{format} fill {:?} -> {} {:?} {:?}",
                    d.name, o.mode, d.fill_bits, d.mode, d.dtype, d.shape
                )
            })
            .collect();
        format!(
            "l3 {}; tensors; samples_per_shard {}; {}",
            env!("CARGO_PKG_VERSION"),
            self.options.samples_per_shard,
            arrays.join("; ")
        )
    }

    /// Encodes, verifies and writes (or keeps) the pending samples as the next shard.
    fn flush(&mut self) -> Result<()> {
        let index = self.shards.len();
        let name = self.shard_name(index);
        let path = self.dir.join(&name);
        let first = self.samples - self.pending.len() as u64;
        let samples = std::mem::take(&mut self.pending);
        let crcs: Vec<u32> = samples.par_iter().map(sample_crc).collect();
        let mut moments: BTreeMap<String, Moments> = BTreeMap::new();
        let windowed = !self.options.window.is_empty();
        for s in &samples {
            let mut record = Vec::new();
            for ((n, a), (d, _)) in s.arrays.iter().zip(&self.layout) {
                let m = Moments::of_array(a, d.fill_bits);
                if let Some(m) = &m {
                    moments.entry(n.clone()).or_default().merge(m);
                }
                record.push(m);
            }
            if windowed {
                self.record_moments.push(record);
            }
        }
        let sidecar = TensorPackRecord::read(&path);
        let same_inputs = sidecar
            .as_ref()
            .is_some_and(|r| r.options == self.options_text && r.samples == crcs);
        let on_disk = std::fs::metadata(&path).ok().map(|m| m.len());
        if let (Some(r), Some(len)) = (&sidecar, on_disk) {
            if same_inputs && len == r.shard_bytes && file_crc32(&path)? == r.shard_crc32 {
                let shard = TensorShardReader::open(&path, u64::MAX)?;
                self.shards.push(TensorShardInfo {
                    file: name,
                    records: shard.len() as u64,
                    bytes: len,
                    crc32: r.shard_crc32,
                    payload_bytes: shard.payload_bytes(),
                    moments,
                });
                self.kept += 1;
                return Ok(());
            }
        }
        if on_disk.is_some() && !same_inputs && !self.options.force {
            let why = match &sidecar {
                None => "was not written by this packer".to_owned(),
                Some(r) if r.options != self.options_text => {
                    "was packed with other options".to_owned()
                }
                Some(r) => match r.samples.iter().zip(&crcs).position(|(a, b)| a != b) {
                    Some(k) => format!(
                        "was packed from other samples (sample {} differs)",
                        first + k as u64
                    ),
                    None => format!(
                        "was packed from {} samples, this run has {}",
                        r.samples.len(),
                        crcs.len()
                    ),
                },
            };
            return Err(exists(format!(
                "{}: {why}; pass force to overwrite",
                path.display()
            )));
        }
        let bytes = self.build(&name, first, &samples)?;
        let record = TensorPackRecord {
            kind: TENSOR_KIND.to_owned(),
            options: self.options_text.clone(),
            shard_bytes: bytes.len() as u64,
            shard_crc32: crc32fast::hash(&bytes),
            samples: crcs,
        };
        // The sidecar first: a crash before the shard leaves a sidecar whose shard is missing
        // or other, which the next run with these samples writes.
        record.write(&path)?;
        write_atomic(&path, &bytes)?;
        let payload_bytes = TensorShardReader::open(&path, u64::MAX)?.payload_bytes();
        self.shards.push(TensorShardInfo {
            file: name,
            records: samples.len() as u64,
            bytes: record.shard_bytes,
            crc32: record.shard_crc32,
            payload_bytes,
            moments,
        });
        self.written += 1;
        Ok(())
    }

    /// The shard's bytes: every array of every sample encoded and verified on rayon's pool.
    fn build(&self, name: &str, first: u64, samples: &[TensorSample]) -> Result<Vec<u8>> {
        let records: Vec<TensorRecordInput> = samples
            .par_iter()
            .enumerate()
            .map(|(k, s)| {
                let key = s
                    .key
                    .clone()
                    .unwrap_or_else(|| default_key(first + k as u64));
                let arrays = s
                    .arrays
                    .iter()
                    .zip(&self.layout)
                    .map(|((n, a), (_, o))| {
                        let e = encode_array(n, a, o)?;
                        verify_array(a, &e)?;
                        Ok(e)
                    })
                    .collect::<Result<Vec<_>>>()
                    .map_err(|e| Error::Record {
                        sample: first + k as u64,
                        shard: name.to_owned(),
                        key: key.clone(),
                        error: Box::new(e),
                    })?;
                Ok(TensorRecordInput {
                    key,
                    class: s.class,
                    meta: s.meta.clone(),
                    arrays,
                })
            })
            .collect::<Result<_>>()?;
        let mut writer = TensorShardWriter::new();
        for (k, r) in records.into_iter().enumerate() {
            let key = r.key.clone();
            writer.add(r).map_err(|e| Error::Record {
                sample: first + k as u64,
                shard: name.to_owned(),
                key,
                error: Box::new(e),
            })?;
        }
        Ok(writer.to_bytes())
    }
}

/// The key of sample `i` without one: its index, 8 digits.
fn default_key(i: u64) -> String {
    format!("{i:08}")
}

/// CRC-32 of everything of a sample that goes into its record.
fn sample_crc(s: &TensorSample) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let key = s.key.as_deref().unwrap_or("");
    h.update(&(key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    h.update(&s.class.map_or(u64::MAX, u64::from).to_le_bytes());
    h.update(&(s.meta.len() as u64).to_le_bytes());
    h.update(&s.meta);
    for (n, a) in &s.arrays {
        h.update(&(n.len() as u64).to_le_bytes());
        h.update(n.as_bytes());
        h.update(&[a.dtype() as u8, a.shape().len() as u8]);
        for d in a.shape() {
            h.update(&d.to_le_bytes());
        }
        h.update(a.bytes());
    }
    h.finalize()
}

fn exists(message: String) -> Error {
    std::io::Error::new(std::io::ErrorKind::AlreadyExists, message).into()
}
