//! Copying a dataset between stores (feature `dataset`): a packed local folder to an object
//! store (`l3 cp`, `l3 pack -o s3://...`) or back. Every shard is checked against the
//! manifest's size and CRC-32 before it is sent; the manifest goes last, so a reader never
//! sees a manifest whose shards are not all there; the copy is then opened through the
//! destination and its shards' indexes checked against the manifest.

use serde::Deserialize;

use super::manifest::{read_manifest_bytes, MANIFEST_NAME};
use super::open::{AnyDataset, AnyManifest};
use super::tensor_format::RecordKind;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::store::Store;

/// What [`copy_dataset`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// Image or tensor records.
    pub kind: RecordKind,
    /// Shards copied.
    pub shards: usize,
    /// Records in the dataset.
    pub records: u64,
    /// Bytes sent (shards and manifest).
    pub bytes: u64,
}

/// The fields both manifest kinds share.
#[derive(Deserialize)]
struct Listing {
    shards: Vec<ListedShard>,
}

#[derive(Deserialize)]
struct ListedShard {
    file: String,
    records: u64,
    bytes: u64,
    crc32: u32,
}

/// Copies the dataset of `from` to `to` (from a folder, shards stream from their files; from
/// an object store, one shard in memory at a time): shards first (each checked against the manifest's
/// size and CRC-32 as it is read), the manifest last, then the copy opened through `to` and
/// checked. A destination that already has a manifest is refused unless `force`; shards left
/// by an unfinished copy (no manifest yet) are overwritten. Calls `progress(done, total)` in
/// bytes after each shard.
pub fn copy_dataset(
    from: &Store,
    to: &Store,
    force: bool,
    mut progress: impl FnMut(u64, u64),
) -> Result<CopyReport> {
    // Both manifests are validated fully (shard names included) before anything is sent.
    let manifest = read_manifest_bytes(from)?;
    let kind = AnyManifest::parse(&manifest, &from.describe(MANIFEST_NAME))?.kind();
    let listing: Listing = serde_json::from_slice(&manifest)
        .map_err(|e| Error::Manifest(format!("{}: {e}", from.describe(MANIFEST_NAME))))?;
    if !force && to.exists(MANIFEST_NAME)? {
        return Err(Error::Manifest(format!(
            "{} exists: refusing to overwrite a dataset (pass --force, or force=True in Python)",
            to.describe(MANIFEST_NAME)
        )));
    }
    let total: u64 = listing.shards.iter().map(|s| s.bytes).sum::<u64>() + manifest.len() as u64;
    let mut sent = 0u64;
    for s in &listing.shards {
        match from.local_dir() {
            // From a folder: checked and sent in pieces (in parts above 64 MiB for an
            // object store), never whole in memory.
            Some(dir) => {
                let path = dir.join(&s.file);
                check_file(&path, s, &from.describe(&s.file))?;
                to.put_file(&s.file, &path)?;
            }
            None => to.put(&s.file, &read_checked(from, s)?)?,
        }
        sent += s.bytes;
        progress(sent, total);
    }
    to.put(MANIFEST_NAME, &manifest)?;
    sent += manifest.len() as u64;
    progress(sent, total);
    // The copy as a reader sees it: every shard's index against the manifest.
    drop(AnyDataset::open_in(to, &Limits::default())?);
    Ok(CopyReport {
        kind,
        shards: listing.shards.len(),
        records: listing.shards.iter().map(|s| s.records).sum(),
        bytes: sent,
    })
}

/// Whether a shard of `len` bytes and CRC-32 `crc` (`crc` computed only when the size
/// agrees) is the manifest's shard `s`; `shown` names it in the error.
fn check(shown: &str, s: &ListedShard, len: u64, crc: impl FnOnce() -> Result<u32>) -> Result<()> {
    if len != s.bytes {
        return Err(Error::Manifest(format!(
            "{shown}: {len} bytes, the manifest says {}",
            s.bytes
        )));
    }
    let crc = crc()?;
    if crc != s.crc32 {
        return Err(Error::Manifest(format!(
            "{shown}: CRC-32 {crc:08x}, the manifest says {:08x}",
            s.crc32
        )));
    }
    Ok(())
}

/// Checks the local shard file `path` against the manifest's size and CRC-32 (read in pieces).
fn check_file(path: &std::path::Path, s: &ListedShard, shown: &str) -> Result<()> {
    let named = |e| crate::store::named_io(shown, e);
    let len = std::fs::metadata(path).map_err(named)?.len();
    check(
        shown,
        s,
        len,
        || Ok(super::file_crc32(path).map_err(named)?),
    )
}

/// The whole of shard `s` of `from`, checked against the manifest's size and CRC-32.
fn read_checked(from: &Store, s: &ListedShard) -> Result<Vec<u8>> {
    let bytes = from.read(&s.file, s.bytes)?;
    check(&from.describe(&s.file), s, bytes.len() as u64, || {
        Ok(crc32fast::hash(&bytes))
    })?;
    Ok(bytes)
}
