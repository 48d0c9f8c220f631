//! Packing records into shards, the part shared by `l3 pack` and the Python module's
//! `write_shard` (and so by any distributed conversion that runs one shard per task): each
//! record is encoded into its levels and decoded back through every level against its source
//! pixels before the shard is written; the shard is written whole and atomically.
//!
//! Resume: [`pack_shard_recorded`] writes beside each shard a small sidecar
//! (`<shard>.pack.json`, [`PackRecord`]) holding what the shard was built from: the options
//! that change its bytes, and each source file's identity (size, modification time, CRC-32 of
//! its bytes). A rerun keeps a shard only when its sidecar matches the options and sources of
//! the new plan and the shard matches the sidecar (size and CRC-32), so a rerun after a crash
//! writes only what is missing or stale, and the result is byte-identical to an uninterrupted
//! run. [`pack_shard`] (no sources to compare) keeps a complete shard with the planned records.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::manifest::file_crc32;
use super::{write_atomic, RecordInput, ShardInfo, ShardReader, ShardWriter};
use crate::decode::DecodeOptions;
use crate::encode::EncodeOptions;
use crate::error::{Error, ParameterError, Result};
use crate::limits::Limits;
use crate::progressive::{encode_levels, ProgressiveOptions};
use crate::raw::RawImage;

/// What a shard's index will hold for a record besides its levels.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlannedRecord {
    /// Key (e.g. the source path relative to the dataset root).
    pub key: String,
    /// Class id.
    pub class: Option<u32>,
    /// Metadata bytes (e.g. JSON).
    pub meta: Vec<u8>,
}

/// Whether the shard was written or a complete one from an earlier run was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardOutcome {
    /// Encoded, verified and written.
    Written,
    /// Already complete with the planned records: left as it was.
    Kept,
}

/// Encodes `image` as `planned`'s record with `progressive.levels` levels, and decodes it back
/// through every level: [`Error::Verification`] if any pixel differs. A key that is not a
/// relative path ([`super::format::check_key`]) is refused before anything is encoded.
pub fn encode_record(
    planned: &PlannedRecord,
    image: &RawImage,
    progressive: &ProgressiveOptions,
    options: &EncodeOptions,
) -> Result<RecordInput> {
    check_planned_key(&planned.key)?;
    let levels = encode_levels(image, progressive, options)?;
    if !levels.matches(image, &DecodeOptions::default())? {
        return Err(Error::Verification(format!(
            "record {:?}: decoded pixels differ from the source",
            planned.key
        )));
    }
    Ok(RecordInput {
        key: planned.key.clone(),
        class: planned.class,
        meta: planned.meta.clone(),
        width: image.width,
        height: image.height,
        levels,
    })
}

fn check_planned_key(key: &str) -> Result<()> {
    super::format::check_key(key).map_err(|reason| {
        ParameterError::InvalidOption {
            name: "key",
            value: key.len() as u64,
            reason,
        }
        .into()
    })
}

/// Whether `bytes` are a complete shard with `levels` levels holding exactly the `planned`
/// records, in order, with their classes and metadata.
pub fn shard_is_complete(bytes: &[u8], planned: &[PlannedRecord], levels: u8) -> bool {
    super::format::parse_shard(bytes).is_ok_and(|(header, _, records)| {
        holds_planned(header.level_count, &records, planned, levels)
    })
}

fn holds_planned(
    level_count: u8,
    records: &[super::RecordEntry],
    planned: &[PlannedRecord],
    levels: u8,
) -> bool {
    level_count == levels
        && records.len() == planned.len()
        && records
            .iter()
            .zip(planned)
            .all(|(r, p)| (&r.key, &r.class, &r.meta) == (&p.key, &p.class, &p.meta))
}

/// A source file's identity as a sidecar records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceId {
    /// Bytes of the file.
    pub bytes: u64,
    /// Modification time in nanoseconds since the Unix epoch (0 where the platform has none).
    pub mtime_ns: u64,
    /// CRC-32 of the file's bytes.
    pub crc32: u32,
}

impl SourceId {
    /// The identity of the file at `path` (its bytes read in pieces for the CRC-32).
    pub fn of_file(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        Ok(SourceId {
            bytes: meta.len(),
            mtime_ns: mtime_ns(&meta),
            crc32: file_crc32(path)?,
        })
    }

    /// Whether the file at `path` still has this identity: the same size, and the same
    /// modification time or (when only that differs, e.g. after a copy) the same CRC-32.
    pub fn matches_file(&self, path: &Path) -> bool {
        let Ok(meta) = std::fs::metadata(path) else {
            return false;
        };
        if meta.len() != self.bytes {
            return false;
        }
        (self.mtime_ns != 0 && mtime_ns(&meta) == self.mtime_ns)
            || file_crc32(path).is_ok_and(|c| c == self.crc32)
    }
}

fn mtime_ns(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// One record of a [`PackRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackedSource {
    /// The record's key.
    pub key: String,
    /// The name of its class (the manifest's name for its class id), if any.
    pub class_name: Option<String>,
    /// Its source file's identity when the record was encoded.
    pub source: SourceId,
}

/// The sidecar `<shard>.pack.json`: what a shard was built from (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackRecord {
    /// [`PACK_RECORD_VERSION`].
    pub version: u32,
    /// The library version and every option that changes the shard's bytes.
    pub options: String,
    /// Bytes of the shard written.
    pub shard_bytes: u64,
    /// CRC-32 of the shard written.
    pub shard_crc32: u32,
    /// One per record, in order.
    pub records: Vec<PackedSource>,
}

/// The sidecar format this code writes and reads.
pub const PACK_RECORD_VERSION: u32 = 1;
/// Largest sidecar accepted, in bytes.
pub const MAX_PACK_RECORD_BYTES: u64 = 256 << 20;

impl PackRecord {
    /// Where the sidecar of the shard at `shard` lies: `<shard>.pack.json` beside it.
    pub fn path_of(shard: &Path) -> PathBuf {
        let mut name = shard.file_name().unwrap_or_default().to_os_string();
        name.push(".pack.json");
        shard.with_file_name(name)
    }

    /// Reads the sidecar of the shard at `shard`: `Ok(None)` if there is none; an error if it
    /// is larger than [`MAX_PACK_RECORD_BYTES`] or does not parse.
    pub fn read(shard: &Path) -> Result<Option<Self>> {
        use std::io::Read;
        let path = Self::path_of(shard);
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut bytes = Vec::new();
        file.take(MAX_PACK_RECORD_BYTES + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_PACK_RECORD_BYTES {
            return Err(crate::error::LimitsError::InputBytes {
                len: bytes.len() as u64,
                max: MAX_PACK_RECORD_BYTES,
            }
            .into());
        }
        let r: PackRecord = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Manifest(format!("{}: {e}", path.display())))?;
        if r.version != PACK_RECORD_VERSION {
            return Err(Error::Manifest(format!(
                "{}: unsupported version {}",
                path.display(),
                r.version
            )));
        }
        Ok(Some(r))
    }

    /// Writes the sidecar of the shard at `shard` atomically.
    pub fn write(&self, shard: &Path) -> Result<()> {
        let mut json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Manifest(format!("serialising a pack record: {e}")))?;
        json.push(b'\n');
        Ok(write_atomic(&Self::path_of(shard), &json)?)
    }
}

/// What [`pack_shard_recorded`] compares with a shard's sidecar.
#[derive(Debug, Clone)]
pub struct PackInputs<'a> {
    /// Every option that changes the shard's bytes (profile, patch size, error bound, levels,
    /// progressive options, ...), in any stable text form; the library adds its version.
    pub options: String,
    /// Each planned record's source file, in order.
    pub sources: &'a [PathBuf],
    /// Each planned record's class name, in order.
    pub class_names: &'a [Option<String>],
}

/// Writes the shard at `path` holding the `planned` records, each built by `record(i)`
/// (typically: read the source, then [`encode_record`]), in parallel on rayon's pool. A
/// complete shard already at `path` with these records (and `levels`) is kept unless `force`.
/// The shard is written atomically (temp file, fsync, rename), its folder created. Returns the
/// shard's manifest entry (named by `path`'s file name) and what was done. An error of a record
/// names it ([`Error::Record`], with its index in `planned` as `sample`).
///
/// Without the sources to compare, a shard built from other sources or options is kept too:
/// [`pack_shard_recorded`] compares them.
pub fn pack_shard<F>(
    path: &Path,
    planned: &[PlannedRecord],
    levels: u8,
    force: bool,
    record: F,
) -> Result<(ShardInfo, ShardOutcome)>
where
    F: Fn(usize) -> Result<RecordInput> + Sync,
{
    let name = shard_name(path)?;
    if !force {
        // The index only (bounded by the default limits), then the CRC-32 in pieces.
        let complete = ShardReader::open(path, Limits::default().max_input_bytes)
            .is_ok_and(|s| holds_planned(s.level_count(), s.records(), planned, levels));
        if complete {
            let dir = path.parent().unwrap_or(Path::new(""));
            let info = ShardInfo::of_file(dir, &name, &Limits::default())?;
            return Ok((info, ShardOutcome::Kept));
        }
    }
    let (bytes, _) = build(&name, planned, levels, |i| Ok((record(i)?, ())))?;
    write_shard(path, &bytes)?;
    Ok((ShardInfo::of_shard(name, &bytes)?, ShardOutcome::Written))
}

/// Like [`pack_shard`], with the sidecar (see the module docs): a shard is kept only when its
/// sidecar records the same `inputs.options` (and library version), the same keys, and
/// sources that still have the identity it records, and the shard file has the size and
/// CRC-32 the sidecar records and holds the planned records. Otherwise the old sidecar is
/// removed, the shard rebuilt and written, then its new sidecar (so a crash in between leaves
/// a shard without a sidecar, which the next run rebuilds). The source identities are taken
/// before each record is built. A kept shard whose class names changed gets a new sidecar.
pub fn pack_shard_recorded<F>(
    path: &Path,
    planned: &[PlannedRecord],
    levels: u8,
    force: bool,
    inputs: &PackInputs,
    record: F,
) -> Result<(ShardInfo, ShardOutcome)>
where
    F: Fn(usize) -> Result<RecordInput> + Sync,
{
    let name = shard_name(path)?;
    if inputs.sources.len() != planned.len() || inputs.class_names.len() != planned.len() {
        return Err(ParameterError::InvalidOption {
            name: "inputs",
            value: inputs.sources.len() as u64,
            reason: "one source and one class name per planned record",
        }
        .into());
    }
    let options = format!("l3 {}; {}", env!("CARGO_PKG_VERSION"), inputs.options);
    let sidecar = PackRecord::path_of(path);
    if !force {
        if let Some((info, old)) = keepable(path, &name, planned, levels, &options, inputs) {
            let records: Vec<PackedSource> = old
                .records
                .iter()
                .zip(inputs.class_names)
                .map(|(r, c)| PackedSource {
                    class_name: c.clone(),
                    ..r.clone()
                })
                .collect();
            if records != old.records {
                PackRecord { records, ..old }.write(path)?;
            }
            return Ok((info, ShardOutcome::Kept));
        }
    }
    match std::fs::remove_file(&sidecar) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
        _ => {}
    }
    let (bytes, ids) = build(&name, planned, levels, |i| {
        let id = SourceId::of_file(&inputs.sources[i])?;
        Ok((record(i)?, id))
    })?;
    write_shard(path, &bytes)?;
    let info = ShardInfo::of_shard(name, &bytes)?;
    PackRecord {
        version: PACK_RECORD_VERSION,
        options,
        shard_bytes: info.bytes,
        shard_crc32: info.crc32,
        records: planned
            .iter()
            .zip(inputs.class_names)
            .zip(ids)
            .map(|((p, c), source)| PackedSource {
                key: p.key.clone(),
                class_name: c.clone(),
                source,
            })
            .collect(),
    }
    .write(path)?;
    Ok((info, ShardOutcome::Written))
}

/// The shard at `path` and its sidecar, if the shard may be kept (see
/// [`pack_shard_recorded`]).
fn keepable(
    path: &Path,
    name: &str,
    planned: &[PlannedRecord],
    levels: u8,
    options: &str,
    inputs: &PackInputs,
) -> Option<(ShardInfo, PackRecord)> {
    let old = PackRecord::read(path).ok()??;
    let same_plan = old.options == options
        && old.records.len() == planned.len()
        && old.records.iter().zip(planned).all(|(r, p)| r.key == p.key);
    if !same_plan {
        return None;
    }
    // Sizes and times first (cheap), then the sources whose time changed by their bytes.
    let sources_unchanged = old
        .records
        .par_iter()
        .zip(inputs.sources)
        .all(|(r, s)| r.source.matches_file(s));
    if !sources_unchanged || std::fs::metadata(path).ok()?.len() != old.shard_bytes {
        return None;
    }
    let shard = ShardReader::open(path, Limits::default().max_input_bytes).ok()?;
    if !holds_planned(shard.level_count(), shard.records(), planned, levels) {
        return None;
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    let info = ShardInfo::of_file(dir, name, &Limits::default()).ok()?;
    (info.crc32 == old.shard_crc32 && info.bytes == old.shard_bytes).then_some((info, old))
}

fn shard_name(path: &Path) -> Result<String> {
    Ok(path
        .file_name()
        .ok_or_else(|| Error::Manifest(format!("{} has no file name", path.display())))?
        .to_string_lossy()
        .into_owned())
}

/// Builds every record with `record(i)` on rayon's pool (an error names its record), checks
/// each against its plan entry, and returns the shard's bytes and what `record` returned
/// besides each record.
fn build<T: Send, F>(
    name: &str,
    planned: &[PlannedRecord],
    levels: u8,
    record: F,
) -> Result<(Vec<u8>, Vec<T>)>
where
    F: Fn(usize) -> Result<(RecordInput, T)> + Sync,
{
    let named = |i: usize, e: Error| Error::Record {
        sample: i as u64,
        shard: name.to_owned(),
        key: planned[i].key.clone(),
        error: Box::new(e),
    };
    let built: Vec<(RecordInput, T)> = (0..planned.len())
        .into_par_iter()
        .map(|i| {
            check_planned_key(&planned[i].key).map_err(|e| named(i, e))?;
            record(i).map_err(|e| named(i, e))
        })
        .collect::<Result<_>>()?;
    let mut writer = ShardWriter::new(levels)?;
    let mut extra = Vec::with_capacity(built.len());
    for (i, ((r, t), p)) in built.into_iter().zip(planned).enumerate() {
        if (&r.key, &r.class, &r.meta) != (&p.key, &p.class, &p.meta) {
            return Err(Error::Verification(format!(
                "record {:?} was built for another plan entry ({:?})",
                r.key, p.key
            )));
        }
        writer.add(r).map_err(|e| named(i, e))?;
        extra.push(t);
    }
    Ok((writer.to_bytes(), extra))
}

/// Writes a shard's bytes atomically, its folder created.
fn write_shard(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    Ok(write_atomic(path, bytes)?)
}
