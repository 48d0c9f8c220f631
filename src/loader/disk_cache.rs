//! The disk tier of the record cache, for datasets in object stores: records (their
//! compressed payloads) in files under a folder of this loader's own, within a byte budget,
//! kept and evicted by the same plan as the RAM cache above it ([`PlannedCache`]: the record
//! needed farthest in the future goes first, and a record needed later than everything it
//! would displace is not written; [`Policy::Lru`] to compare). A lookup goes to the disk tier
//! only when the RAM cache missed.
//!
//! Each entry is one file, `<record>.rec`: the payload count (u32), each payload's length
//! (u64), the payloads, then the CRC-32 of everything before it (written without fsync: the
//! folder does not outlive the loader). An entry that is missing, short or fails its CRC is a
//! miss and is dropped. The
//! folder (`l3-cache-<random>` under the caller's folder) belongs to one loader, so several
//! processes sharing a node's cache folder never touch each other's files; it is removed when
//! the loader ends.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::cache::{CacheStats, NextUse, PlannedCache, Policy};
use super::read::Payloads;

/// A cached record's file, deleted when the cache lets go of it (evicted, bypassed, dropped).
struct DiskFile(PathBuf);

impl Drop for DiskFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The disk tier (see the module docs).
pub(super) struct DiskCache {
    dir: tempfile::TempDir,
    index: PlannedCache<DiskFile>,
}

impl DiskCache {
    /// A cache of at most `budget` bytes of entry files in a new folder under `root`.
    pub(super) fn new(root: &Path, budget: u64, policy: Policy) -> std::io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let dir = tempfile::Builder::new()
            .prefix("l3-cache-")
            .tempdir_in(root)?;
        Ok(DiskCache {
            dir,
            index: PlannedCache::new(policy, budget),
        })
    }

    fn path(&self, id: u32) -> PathBuf {
        self.dir.path().join(format!("{id}.rec"))
    }

    /// Record `id`'s payloads if its entry is on disk and intact (access `t`, next use `next`).
    pub(super) fn get(&mut self, id: u32, t: u64, next: NextUse) -> Option<Payloads> {
        self.index.get(id, t, next)?;
        match std::fs::read(self.path(id))
            .ok()
            .and_then(|b| decode_entry(&b))
        {
            Some(p) => Some(Arc::new(p)),
            None => {
                // Damaged or gone: a miss from now on (dropping the entry deletes the file).
                self.index.remove(id);
                None
            }
        }
    }

    /// Offers record `id`'s payloads (access `t`, next use `next`): written when the plan
    /// keeps it. A failed write leaves it out.
    pub(super) fn insert(&mut self, id: u32, payloads: &Payloads, t: u64, next: NextUse) {
        let entry = encode_entry(payloads);
        let path = self.path(id);
        let file = DiskFile(path.clone());
        if !self.index.insert(id, file, entry.len() as u64, t, next) {
            return;
        }
        // No fsync: the folder dies with the loader, and a torn file fails its CRC.
        if std::fs::write(&path, &entry).is_err() {
            self.index.remove(id);
        }
    }

    /// The tier's counters.
    pub(super) fn stats(&self) -> CacheStats {
        self.index.stats()
    }

    /// Bytes of the entries on disk.
    #[cfg(test)]
    fn used(&self) -> u64 {
        self.index.used()
    }

    /// Re-keys the entries for a new plan horizon (see [`PlannedCache::rekey`]).
    pub(super) fn rekey(&mut self, next_of: impl FnMut(u32) -> NextUse) {
        self.index.rekey(next_of)
    }
}

/// The bytes of an entry file (see the module docs).
fn encode_entry(payloads: &[Vec<u8>]) -> Vec<u8> {
    let total: usize = payloads.iter().map(Vec::len).sum();
    let mut out = Vec::with_capacity(4 + 8 * payloads.len() + total + 4);
    out.extend_from_slice(&(payloads.len() as u32).to_le_bytes());
    for p in payloads {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
    }
    for p in payloads {
        out.extend_from_slice(p);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The payloads of an entry file, or `None` if it is not one intact entry.
fn decode_entry(b: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (body, crc) = b.split_at_checked(b.len().checked_sub(4)?)?;
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().ok()?) {
        return None;
    }
    let count = u32::from_le_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let lens_end = 4usize.checked_add(count.checked_mul(8)?)?;
    let lens = body.get(4..lens_end)?;
    let mut at = lens_end;
    let mut out = Vec::with_capacity(count.min(body.len()));
    for k in 0..count {
        let len = u64::from_le_bytes(lens[8 * k..8 * k + 8].try_into().ok()?);
        let end = at.checked_add(usize::try_from(len).ok()?)?;
        out.push(body.get(at..end)?.to_vec());
        at = end;
    }
    (at == body.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::cache::NEVER;

    #[test]
    fn entries_round_trip_and_damage_is_a_miss() {
        let payloads = vec![vec![1u8, 2, 3], vec![], vec![9; 1000]];
        let e = encode_entry(&payloads);
        assert_eq!(decode_entry(&e), Some(payloads.clone()));
        for cut in 0..e.len() {
            assert_eq!(decode_entry(&e[..cut]), None, "cut at {cut}");
        }
        for i in 0..e.len() {
            let mut bad = e.clone();
            bad[i] ^= 0x10;
            assert_eq!(decode_entry(&bad), None, "flip at {i}");
        }
        let root = tempfile::tempdir().unwrap();
        let mut c = DiskCache::new(root.path(), 1 << 20, Policy::Planned).unwrap();
        let p = Arc::new(payloads);
        c.insert(7, &p, 0, 5);
        assert_eq!(c.get(7, 5, NEVER).as_deref(), Some(&*p));
        // A damaged file: a miss, and the entry gone.
        c.insert(8, &p, 6, 9);
        std::fs::write(c.path(8), b"garbage").unwrap();
        assert!(c.get(8, 9, NEVER).is_none());
        assert_eq!(c.used(), encode_entry(&p).len() as u64);
    }

    #[test]
    fn the_budget_holds_and_evicted_files_are_deleted() {
        let root = tempfile::tempdir().unwrap();
        let p = Arc::new(vec![vec![0u8; 1000]]);
        let one = encode_entry(&p).len() as u64;
        let mut c = DiskCache::new(root.path(), 3 * one, Policy::Planned).unwrap();
        // Records 0..6 accessed at t = id, next used at 100 - id (0 farthest).
        for id in 0..6u32 {
            c.insert(id, &p, id as u64, 100 - id as u64);
            assert!(c.used() <= 3 * one);
        }
        let files = std::fs::read_dir(c.dir.path()).unwrap().count();
        assert_eq!((files as u64) * one, c.used());
        // Farthest next use evicted first: the last three (needed soonest) are kept.
        for id in 3..6u32 {
            assert!(c.path(id).exists(), "{id}");
        }
        let dir = c.dir.path().to_path_buf();
        drop(c);
        assert!(!dir.exists(), "the folder goes with the cache");
    }
}
