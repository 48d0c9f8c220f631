//! The index cache (feature `remote`): what opening a remote shard fetched (its size, ETag,
//! head and tail, where the trailer and index sit), kept in a local folder so that the next
//! process to open it (a `DataLoader` worker, another rank on the node, the next run) asks the
//! server nothing. One file per object, written atomically; the folder may be shared by any
//! number of processes.
//!
//! An entry is keyed by the object's URL and by what the dataset's manifest says of it (size
//! and CRC-32), so a repacked dataset (a new manifest) misses. An entry is read as hostile:
//! anything that does not parse, or that names another object, is a miss (and is replaced).
//! An entry can still be stale when an object was replaced in place with the same size and
//! CRC-32 in the manifest: its ETag is then stale too, and the first payload read (which names
//! that ETag) is refused by the server instead of mixing two versions.
//!
//! Entry layout, little-endian: `ENTRY_MAGIC` | u64 size | u32 manifest CRC-32 | u16 URL
//! length, URL | u16 ETag length (`NO_ETAG`: none), ETag | u32 head length, head | u64 tail
//! start, u32 tail length, tail | u32 CRC-32 of everything before it.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::atomic::write_atomic;

/// First bytes of an entry (the last one is the entry format's version).
const ENTRY_MAGIC: [u8; 5] = *b"L3IX\x01";
/// ETag length meaning "the server gave none".
const NO_ETAG: u16 = u16::MAX;
/// Longest ETag kept.
const MAX_ETAG: usize = 1024;
/// Bytes an entry keeps at most (head and tail together); larger openings are not cached.
pub(super) const MAX_KEPT: u64 = 64 << 20;
/// File name suffix of an entry.
const SUFFIX: &str = "l3ix";

/// What opening an object fetched.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Opened {
    pub len: u64,
    pub etag: Option<String>,
    pub head: Vec<u8>,
    pub tail_start: u64,
    pub tail: Vec<u8>,
}

/// Lock files in a cache folder: an object's opening holds the one its key hashes to.
const LOCK_STRIPES: u64 = 16;

/// Holds the lock of object `url`'s entry in `dir` (an exclusive `flock`-style lock on one of
/// [`LOCK_STRIPES`] files) until dropped, so that of several processes opening the same
/// object at once one fetches it and the others find it cached; `None` when the folder cannot
/// be locked (then every process fetches for itself). The system releases the lock of a
/// process that dies.
pub(super) fn lock(dir: &Path, url: &str, len: u64, crc32: u32) -> Option<std::fs::File> {
    std::fs::create_dir_all(dir).ok()?;
    let stripe = key_hash(url, len, crc32) % LOCK_STRIPES;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("lock-{stripe:02}")))
        .ok()?;
    file.lock().ok()?;
    Some(file)
}

/// FNV-1a 64 of an entry's key.
fn key_hash(url: &str, len: u64, crc32: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url
        .as_bytes()
        .iter()
        .chain(&len.to_le_bytes())
        .chain(&crc32.to_le_bytes())
    {
        h = (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The entry file of object `url` as the manifest describes it (`len`, `crc32`); the entry
/// repeats the key, so a hash collision is a miss.
fn entry_path(dir: &Path, url: &str, len: u64, crc32: u32) -> PathBuf {
    dir.join(format!("{:016x}.{SUFFIX}", key_hash(url, len, crc32)))
}

/// The cached opening of `url`, if a valid entry for it (with this `len` and `crc32`) exists.
pub(super) fn load(dir: &Path, url: &str, len: u64, crc32: u32) -> Option<Opened> {
    let path = entry_path(dir, url, len, crc32);
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_KEPT + 4096)
        .read_to_end(&mut bytes)
        .ok()?;
    parse_entry(&bytes, url, len, crc32)
}

/// Keeps `opened` for `url` (best effort: a folder that cannot be written caches nothing).
pub(super) fn save(dir: &Path, url: &str, crc32: u32, opened: &Opened) {
    if opened.head.len() as u64 + opened.tail.len() as u64 > MAX_KEPT
        || url.len() > u16::MAX as usize
        || opened.etag.as_ref().is_some_and(|e| e.len() > MAX_ETAG)
    {
        return;
    }
    let b = entry_bytes(url, crc32, opened);
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = write_atomic(&entry_path(dir, url, opened.len, crc32), &b);
    }
}

/// The bytes of `opened`'s entry (see the module docs; the caller has checked the sizes).
pub(super) fn entry_bytes(url: &str, crc32: u32, opened: &Opened) -> Vec<u8> {
    let mut b = Vec::with_capacity(64 + url.len() + opened.head.len() + opened.tail.len());
    b.extend_from_slice(&ENTRY_MAGIC);
    b.extend_from_slice(&opened.len.to_le_bytes());
    b.extend_from_slice(&crc32.to_le_bytes());
    b.extend_from_slice(&(url.len() as u16).to_le_bytes());
    b.extend_from_slice(url.as_bytes());
    match &opened.etag {
        Some(e) => {
            b.extend_from_slice(&(e.len() as u16).to_le_bytes());
            b.extend_from_slice(e.as_bytes());
        }
        None => b.extend_from_slice(&NO_ETAG.to_le_bytes()),
    }
    b.extend_from_slice(&(opened.head.len() as u32).to_le_bytes());
    b.extend_from_slice(&opened.head);
    b.extend_from_slice(&opened.tail_start.to_le_bytes());
    b.extend_from_slice(&(opened.tail.len() as u32).to_le_bytes());
    b.extend_from_slice(&opened.tail);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// A reader of an entry's fields; `None` past its end.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// Entry `bytes` if it is whole and describes `url` with `len` and `crc32`, and its head and
/// tail fit inside the object.
pub(super) fn parse_entry(bytes: &[u8], url: &str, len: u64, crc32: u32) -> Option<Opened> {
    let body_len = bytes.len().checked_sub(4)?;
    let (body, crc) = bytes.split_at(body_len);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return None;
    }
    let mut f = Fields(body);
    if f.take(ENTRY_MAGIC.len())? != ENTRY_MAGIC {
        return None;
    }
    if f.u64()? != len || f.u32()? != crc32 {
        return None;
    }
    let n = f.u16()? as usize;
    if f.take(n)? != url.as_bytes() {
        return None;
    }
    let etag = match f.u16()? {
        NO_ETAG => None,
        n if n as usize <= MAX_ETAG => Some(String::from_utf8(f.take(n as usize)?.to_vec()).ok()?),
        _ => return None,
    };
    let n = f.u32()? as usize;
    let head = f.take(n)?.to_vec();
    let tail_start = f.u64()?;
    let n = f.u32()? as usize;
    let tail = f.take(n)?.to_vec();
    let fits = head.len() as u64 <= len
        && tail_start.checked_add(tail.len() as u64) == Some(len)
        && head.len() as u64 + tail.len() as u64 <= MAX_KEPT;
    if !f.0.is_empty() || !fits {
        return None;
    }
    Some(Opened {
        len,
        etag,
        head,
        tail_start,
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Opened {
        Opened {
            len: 1000,
            etag: Some("\"abc\"".into()),
            head: b"0123456789abcdef".to_vec(),
            tail_start: 900,
            tail: (0..100u8).collect(),
        }
    }

    #[test]
    fn an_entry_round_trips_and_misses_on_any_other_key() {
        let dir = tempfile::tempdir().unwrap();
        let url = "s3://b/ds/shard-00000.l3s";
        assert_eq!(load(dir.path(), url, 1000, 7), None);
        save(dir.path(), url, 7, &sample());
        assert_eq!(load(dir.path(), url, 1000, 7), Some(sample()));
        assert_eq!(load(dir.path(), url, 1000, 8), None);
        assert_eq!(load(dir.path(), url, 1001, 7), None);
        assert_eq!(load(dir.path(), "s3://b/ds/shard-00001.l3s", 1000, 7), None);
        let none = Opened {
            etag: None,
            ..sample()
        };
        save(dir.path(), url, 7, &none);
        assert_eq!(load(dir.path(), url, 1000, 7), Some(none));
    }

    #[test]
    fn every_damaged_or_foreign_entry_is_a_miss() {
        let url = "s3://b/x";
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), url, 7, &sample());
        let path = entry_path(dir.path(), url, 1000, 7);
        let good = std::fs::read(&path).unwrap();
        // Every truncation and every single-byte change (the CRC covers all of it).
        for cut in 0..good.len() {
            assert_eq!(
                parse_entry(&good[..cut], url, 1000, 7),
                None,
                "cut at {cut}"
            );
        }
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x41;
            assert_eq!(parse_entry(&bad, url, 1000, 7), None, "byte {i}");
        }
        // A well-formed entry (valid CRC) whose tail does not end at the object's end.
        let shifted = Opened {
            tail_start: 800,
            ..sample()
        };
        save(dir.path(), url, 7, &shifted);
        assert_eq!(load(dir.path(), url, 1000, 7), None);
        // An entry written for another URL under this one's name (a hash collision).
        let other = tempfile::tempdir().unwrap();
        save(other.path(), "s3://b/y", 7, &sample());
        std::fs::copy(entry_path(other.path(), "s3://b/y", 1000, 7), &path).unwrap();
        assert_eq!(load(dir.path(), url, 1000, 7), None);
    }
}
