//! Packing records into shards, the part shared by `l3 pack` and the Python module's
//! `write_shard` (and so by any distributed conversion that runs one shard per task): each
//! record is encoded into its levels and decoded back through every level against its source
//! pixels before the shard is written; the shard is written whole and atomically; a shard a
//! previous run completed with the same records is kept, so a rerun after a crash writes only
//! what is missing.

use std::path::Path;

use rayon::prelude::*;

use super::format::parse_shard;
use super::{write_atomic, RecordInput, ShardInfo, ShardWriter};
use crate::decode::DecodeOptions;
use crate::encode::{EncodeOptions, RawImage};
use crate::error::{Error, Result};
use crate::progressive::{encode_levels, ProgressiveOptions};

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
/// through every level: [`Error::Verification`] if any pixel differs.
pub fn encode_record(
    planned: &PlannedRecord,
    image: &RawImage,
    progressive: &ProgressiveOptions,
    options: &EncodeOptions,
) -> Result<RecordInput> {
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

/// Whether `bytes` are a complete shard with `levels` levels holding exactly the `planned`
/// records, in order, with their classes and metadata.
pub fn shard_is_complete(bytes: &[u8], planned: &[PlannedRecord], levels: u8) -> bool {
    parse_shard(bytes).is_ok_and(|(header, _, records)| {
        header.level_count == levels
            && records.len() == planned.len()
            && records
                .iter()
                .zip(planned)
                .all(|(r, p)| (&r.key, &r.class, &r.meta) == (&p.key, &p.class, &p.meta))
    })
}

/// Writes the shard at `path` holding the `planned` records, each built by `record(i)`
/// (typically: read the source, then [`encode_record`]), in parallel on rayon's pool. A
/// complete shard already at `path` with these records (and `levels`) is kept unless `force`.
/// The shard is written atomically (temp file, fsync, rename), its folder created. Returns the
/// shard's manifest entry (named by `path`'s file name) and what was done. An error of a record
/// names it ([`Error::Record`], with its index in `planned` as `sample`).
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
    let name = path
        .file_name()
        .ok_or_else(|| Error::Manifest(format!("{} has no file name", path.display())))?
        .to_string_lossy()
        .into_owned();
    if !force {
        if let Ok(bytes) = std::fs::read(path) {
            if shard_is_complete(&bytes, planned, levels) {
                return Ok((ShardInfo::of_shard(name, &bytes)?, ShardOutcome::Kept));
            }
        }
    }
    let records: Vec<RecordInput> = (0..planned.len())
        .into_par_iter()
        .map(|i| {
            record(i).map_err(|e| Error::Record {
                sample: i as u64,
                shard: name.clone(),
                key: planned[i].key.clone(),
                error: Box::new(e),
            })
        })
        .collect::<Result<_>>()?;
    let mut writer = ShardWriter::new(levels)?;
    for (r, p) in records.into_iter().zip(planned) {
        if (&r.key, &r.class, &r.meta) != (&p.key, &p.class, &p.meta) {
            return Err(Error::Verification(format!(
                "record {:?} was built for another plan entry ({:?})",
                r.key, p.key
            )));
        }
        writer.add(r)?;
    }
    let bytes = writer.to_bytes();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    write_atomic(path, &bytes)?;
    Ok((ShardInfo::of_shard(name, &bytes)?, ShardOutcome::Written))
}
