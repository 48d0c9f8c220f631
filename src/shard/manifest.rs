//! The dataset manifest, `manifest.json` next to the shards (feature `dataset`): what a loader
//! needs before opening any shard (shards in order, their record counts, sizes and CRC-32s,
//! the class names, totals). Written atomically, last, by the packer: a dataset folder without
//! a manifest is an unfinished pack.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// File name of the manifest in a dataset folder.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The manifest format this code writes and reads.
pub const MANIFEST_VERSION: u32 = 1;
/// Largest manifest accepted, in bytes.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// One shard of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// File name in the dataset folder (no path separators).
    pub file: String,
    /// Records in the shard.
    pub records: u64,
    /// Bytes of the shard file.
    pub bytes: u64,
    /// CRC-32 of the whole shard file.
    pub crc32: u32,
    /// Payload bytes per level (level 0 first).
    pub level_bytes: Vec<u64>,
}

impl ShardInfo {
    /// The manifest's entry for the shard `file` whose bytes are `bytes` (parsed and validated
    /// here: a shard that does not parse is an error).
    pub fn of_shard(file: String, bytes: &[u8]) -> Result<Self> {
        let (header, _, records) = super::format::parse_shard(bytes)?;
        let mut level_bytes = vec![0u64; header.level_count as usize];
        for r in &records {
            for (sum, l) in level_bytes.iter_mut().zip(&r.levels) {
                *sum += l.len;
            }
        }
        Ok(ShardInfo {
            file,
            records: records.len() as u64,
            bytes: bytes.len() as u64,
            crc32: crc32fast::hash(bytes),
            level_bytes,
        })
    }
}

/// A dataset: its shards and classes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_VERSION`].
    pub version: u32,
    /// Levels per record.
    pub levels: u8,
    /// Class names; a record's class id indexes this list.
    pub classes: Vec<String>,
    /// Shards in order; record `i` of the dataset is the `i`-th record of their concatenation.
    pub shards: Vec<ShardInfo>,
    /// Records in the dataset (the sum over the shards).
    pub records: u64,
}

impl Manifest {
    /// Reads and validates `DIR/manifest.json`: a known version, 1..=8 levels, shard file
    /// names without path components, and a record total equal to the shards' sum.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_NAME);
        let len = std::fs::metadata(&path)?.len();
        if len > MAX_MANIFEST_BYTES {
            return Err(crate::LimitsError::InputBytes {
                len,
                max: MAX_MANIFEST_BYTES,
            }
            .into());
        }
        let bytes = std::fs::read(&path)?;
        let m: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Manifest(format!("{}: {e}", path.display())))?;
        let bad = |what: String| Err(Error::Manifest(format!("{}: {what}", path.display())));
        if m.version != MANIFEST_VERSION {
            return bad(format!("unsupported manifest version {}", m.version));
        }
        if m.levels == 0 || m.levels > super::format::MAX_LEVELS {
            return bad(format!("levels {} (must be 1..=8)", m.levels));
        }
        for s in &m.shards {
            let plain = Path::new(&s.file)
                .file_name()
                .is_some_and(|n| n == s.file.as_str());
            if !plain || s.file.starts_with('.') {
                return bad(format!(
                    "shard file name {:?} is not a plain file name",
                    s.file
                ));
            }
        }
        let total = m
            .shards
            .iter()
            .try_fold(0u64, |a, s| a.checked_add(s.records));
        if total != Some(m.records) {
            return bad(format!("records {} is not the shards' sum", m.records));
        }
        Ok(m)
    }

    /// Writes `DIR/manifest.json` atomically (temporary file, fsync, rename).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let mut json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Manifest(format!("serialising the manifest: {e}")))?;
        json.push(b'\n');
        Ok(super::write_atomic(&dir.join(MANIFEST_NAME), &json)?)
    }
}
