//! The dataset manifest, `manifest.json` next to the shards (feature `dataset`): what a loader
//! needs before opening any shard (shards in order, their record counts, sizes and CRC-32s,
//! the class names, totals). Written atomically, last, by the packer: a dataset folder without
//! a manifest is an unfinished pack.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::tensor_format::RecordKind;
use super::ShardReader;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::store::Store;

/// File name of the manifest in a dataset folder.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The manifest format this code writes and reads.
pub const MANIFEST_VERSION: u32 = 1;
/// Largest manifest accepted, in bytes.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;
/// The manifest `kind` of a tensor dataset (an image dataset's has none, or `"images"`).
pub const TENSOR_KIND: &str = "tensors";

/// What opening a shard of `bytes` bytes (CRC-32 `crc32`) whose payloads take `payloads`
/// bytes reads first: its header, and its index and trailer after the payloads, which follow
/// the header (image and tensor shards alike).
pub(super) fn shard_hint(bytes: u64, crc32: u32, payloads: u64) -> crate::store::BlobHint {
    let header = super::format::HEADER_LEN;
    crate::store::BlobHint {
        len: bytes,
        crc32,
        head: header,
        tail: bytes.saturating_sub(header.saturating_add(payloads)),
    }
}

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
    /// What opening the shard reads first: its header, and its index and trailer (after the
    /// levels' payloads, which follow the header).
    pub fn hint(&self) -> crate::store::BlobHint {
        let payloads = self
            .level_bytes
            .iter()
            .fold(0u64, |a, &b| a.saturating_add(b));
        shard_hint(self.bytes, self.crc32, payloads)
    }

    /// The manifest's entry for the shard `file` whose bytes are `bytes` (parsed and validated
    /// here: a shard that does not parse is an error).
    pub fn of_shard(file: String, bytes: &[u8]) -> Result<Self> {
        let (header, _, records) = super::format::parse_shard(bytes)?;
        Ok(ShardInfo {
            file,
            records: records.len() as u64,
            bytes: bytes.len() as u64,
            crc32: crc32fast::hash(bytes),
            level_bytes: level_bytes(header.level_count, &records),
        })
    }

    /// The manifest's entry for the shard `dir/file`, without holding it in memory: its index
    /// opened with `limits` ([`ShardReader::open_with_limits`]), its CRC-32 computed over
    /// bounded reads.
    pub fn of_file(dir: &Path, file: &str, limits: &Limits) -> Result<Self> {
        let path = dir.join(file);
        let shard = ShardReader::open_with_limits(&path, limits.max_input_bytes, limits)?;
        Ok(ShardInfo {
            file: file.to_owned(),
            records: shard.len() as u64,
            bytes: shard.file_len(),
            crc32: file_crc32(&path)?,
            level_bytes: shard.level_bytes().to_vec(),
        })
    }

    /// Every field of this entry that disagrees with `shard` (its file opened) in a manifest
    /// of `levels` levels and `classes` class names, one line each naming the shard and the
    /// field: records, bytes, levels, level_bytes, and the class id of every record (which
    /// must index the class list). The CRC-32 needs the whole file: `l3 verify-dataset`
    /// checks it.
    pub fn mismatches(&self, shard: &ShardReader, levels: u8, classes: usize) -> Vec<String> {
        let mut out = shard.differs(&self.file, self.records, self.bytes);
        if shard.level_count() != levels {
            out.push(differs(&self.file, "levels", shard.level_count(), levels));
        }
        let sums = shard.level_bytes();
        if sums != self.level_bytes {
            let (has, says) = (format!("{sums:?}"), format!("{:?}", self.level_bytes));
            out.push(differs(&self.file, "level_bytes", has, says));
        }
        // The records' largest class first: the records are only read when one is outside.
        let outside_any = shard.max_class().is_some_and(|c| c as usize >= classes);
        let mut outside = shard
            .entries()
            .take(if outside_any { usize::MAX } else { 0 })
            .enumerate()
            .filter(|(_, r)| r.class.is_some_and(|c| c as usize >= classes));
        if let Some((i, r)) = outside.next() {
            out.push(format!(
                "{}: classes: record {i} (key {:?}) has class {}, the manifest lists {classes} \
                 class name(s) ({} more record(s) outside the list)",
                self.file,
                r.key,
                r.class.unwrap_or_default(),
                outside.count()
            ));
        }
        out
    }
}

/// Payload bytes per level of `records`.
fn level_bytes(level_count: u8, records: &[super::RecordEntry]) -> Vec<u64> {
    let mut sums = vec![0u64; level_count as usize];
    for r in records {
        for (sum, l) in sums.iter_mut().zip(&r.levels) {
            // The levels lie in the file (parse_index), so the sums fit.
            *sum = sum.saturating_add(l.len);
        }
    }
    sums
}

/// The kind of the dataset in `dir`, from its manifest's `kind` (images without one).
pub fn dataset_kind(dir: &Path) -> Result<RecordKind> {
    dataset_kind_in(&Store::local(dir))
}

/// Like [`dataset_kind`], for the dataset of `store` (a local folder or an object store).
pub fn dataset_kind_in(store: &Store) -> Result<RecordKind> {
    kind_of(&read_manifest_bytes(store)?, &store.describe(MANIFEST_NAME))
}

/// The kind a manifest's bytes (read from `shown`, a path or URL) declare.
pub(super) fn kind_of(bytes: &[u8], shown: &str) -> Result<RecordKind> {
    #[derive(Deserialize)]
    struct Kind {
        #[serde(default)]
        kind: Option<String>,
    }
    let k: Kind =
        serde_json::from_slice(bytes).map_err(|e| Error::Manifest(format!("{shown}: {e}")))?;
    match k.kind.as_deref() {
        None | Some("images") => Ok(RecordKind::Images),
        Some(TENSOR_KIND) => Ok(RecordKind::Tensors),
        Some(other) => Err(Error::Manifest(format!(
            "{shown}: unknown dataset kind {other:?}"
        ))),
    }
}

/// The manifest of either kind in `bytes` (read from `shown`), parsed and `check`ed.
pub(super) fn parse_checked<M: serde::de::DeserializeOwned>(
    bytes: &[u8],
    shown: &str,
    check: impl FnOnce(&M) -> std::result::Result<(), String>,
) -> Result<M> {
    let m: M =
        serde_json::from_slice(bytes).map_err(|e| Error::Manifest(format!("{shown}: {e}")))?;
    check(&m).map_err(|what| Error::Manifest(format!("{shown}: {what}")))?;
    Ok(m)
}

/// The line saying that shard `file` has `has` of `field` and its manifest says `says`.
pub(super) fn differs(
    file: &str,
    field: &str,
    has: impl std::fmt::Display,
    says: impl std::fmt::Display,
) -> String {
    format!("{file}: {field}: the shard has {has}, the manifest says {says}")
}

/// The bytes of the manifest of `store`, at most `MAX_MANIFEST_BYTES`.
pub(super) fn read_manifest_bytes(store: &Store) -> Result<Vec<u8>> {
    store.read(MANIFEST_NAME, MAX_MANIFEST_BYTES)
}

/// CRC-32 of the whole file at `path`, read in 1 MiB pieces.
pub fn file_crc32(path: &Path) -> std::io::Result<u32> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hasher.finalize());
        }
        hasher.update(&buf[..n]);
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

/// A manifest's shard file name: a plain file name (no folder, not hidden, not the
/// manifest's), listed once (`seen` holds the names so far; image and tensor manifests).
pub(super) fn check_shard_file<'a>(
    file: &'a str,
    seen: &mut std::collections::HashSet<&'a str>,
) -> Result<(), String> {
    let plain = Path::new(file).file_name().is_some_and(|n| n == file);
    if !plain || file.starts_with('.') || file == MANIFEST_NAME {
        return Err(format!("shard file name {file:?} is not a plain file name"));
    }
    if !seen.insert(file) {
        return Err(format!("shard {file:?} is listed twice"));
    }
    Ok(())
}

impl Manifest {
    /// The manifest in `bytes` (read from `shown`, a path or URL), checked
    /// ([`Manifest::check_fields`]); a tensor manifest is refused naming its kind.
    pub(super) fn parse_bytes(bytes: &[u8], shown: &str) -> Result<Self> {
        if kind_of(bytes, shown)? == RecordKind::Tensors {
            return Err(Error::Manifest(format!(
                "{shown}: a tensor dataset (kind \"tensors\"): open it as tensor records"
            )));
        }
        parse_checked(bytes, shown, Manifest::check_fields)
    }

    /// The checks that need no shard: a known version, 1..=8 levels, shard file names that
    /// are plain and distinct, a level count per shard, a record total equal to the shards'
    /// sum, and distinct class names. Returns what is wrong.
    pub fn check_fields(&self) -> std::result::Result<(), String> {
        if self.version != MANIFEST_VERSION {
            return Err(format!("unsupported manifest version {}", self.version));
        }
        if self.levels == 0 || self.levels > super::format::MAX_LEVELS {
            return Err(format!("levels {} (must be 1..=8)", self.levels));
        }
        let mut names = std::collections::HashSet::new();
        for s in &self.shards {
            check_shard_file(&s.file, &mut names)?;
            if s.level_bytes.len() != self.levels as usize {
                return Err(format!(
                    "{}: level_bytes has {} entries, the dataset has {} levels",
                    s.file,
                    s.level_bytes.len(),
                    self.levels
                ));
            }
        }
        let total = self
            .shards
            .iter()
            .try_fold(0u64, |a, s| a.checked_add(s.records));
        if total != Some(self.records) {
            return Err(format!("records {} is not the shards' sum", self.records));
        }
        let mut classes = std::collections::HashSet::new();
        if let Some(c) = self.classes.iter().find(|c| !classes.insert(c.as_str())) {
            return Err(format!("class name {c:?} is listed twice"));
        }
        Ok(())
    }

    /// Opens every shard in `dir` (indexes only, reads bounded by `limits`) and checks each
    /// entry against it ([`ShardInfo::mismatches`]): every mismatch, one line each.
    pub fn check_shards(&self, dir: &Path, limits: &Limits) -> Result<()> {
        let mut problems = Vec::new();
        for s in &self.shards {
            let path = dir.join(&s.file);
            match ShardReader::open_with_limits(&path, limits.max_input_bytes, limits) {
                Ok(shard) => problems.extend(s.mismatches(&shard, self.levels, self.classes.len())),
                Err(e) => problems.push(format!("{}: {e}", s.file)),
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Manifest(problems.join("; ")))
        }
    }

    /// Checks the manifest ([`Manifest::check_fields`], and against the shards in `dir`:
    /// [`Manifest::check_shards`] with the default limits), then writes `DIR/manifest.json`
    /// atomically ([`super::write_atomic`]). A manifest that fails a check is not written, so
    /// a good one already there stays.
    pub fn write(&self, dir: &Path) -> Result<()> {
        self.check_fields().map_err(|what| {
            Error::Manifest(format!("{}: {what}", dir.join(MANIFEST_NAME).display()))
        })?;
        self.check_shards(dir, &Limits::default())?;
        let mut json = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Manifest(format!("serialising the manifest: {e}")))?;
        json.push(b'\n');
        Ok(super::write_atomic(&dir.join(MANIFEST_NAME), &json)?)
    }
}
