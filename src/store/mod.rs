//! Where datasets live: a local folder or, with feature `remote`, an object store
//! (`s3://bucket/prefix`, `gs://`, `az://`, `http(s)://`). A [`Store`] is a dataset's root; a
//! [`Blob`] is one object in it (a shard), opened once and then read by byte ranges.
//!
//! Files: this one (locations, [`Store`], [`Blob`], local folders), `atomic` (atomic file
//! writes: unique temporary file, fsync, rename) and, with feature `remote`, `remote` (object
//! stores through the `object_store` crate: retries, requests in flight, reads pinned to the
//! object's ETag) and `index_cache` (what opening a remote object fetched, kept on local disk
//! for the next process).
//!
//! A remote [`Blob`] a manifest describes ([`BlobHint`]) opens with two concurrent ranged
//! reads sized by the manifest: exactly the shard's header, and exactly its index and
//! trailer. Without a hint it opens with one ranged read of the object's last [`TAIL_BYTES`]
//! (the trailer and, for most shards, the whole index). Either gives the object's size and
//! ETag; every later read names that ETag (`If-Match`), so an object replaced while it is read
//! is refused instead of mixing two versions.

pub(crate) mod atomic;
mod coalesce;
#[cfg(feature = "remote")]
mod index_cache;
#[cfg(feature = "remote")]
mod remote;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{LimitsError, Result};

pub use coalesce::Span;

#[cfg(feature = "remote")]
pub use remote::RemoteOptions;

/// Bytes a remote blob reads from its end when opened (and keeps): a shard's trailer and its
/// index when the index is smaller, so opening a shard costs two requests (this and the
/// header).
pub const TAIL_BYTES: u64 = 256 << 10;

/// Entry points for the fuzz targets (not a stable API).
#[cfg(feature = "remote")]
#[doc(hidden)]
pub mod fuzzing {
    /// Parses `bytes` as an index-cache entry for object `url` of `len` bytes and CRC-32
    /// `crc32`: `Some((head bytes, tail start, tail bytes))` when it is valid.
    pub fn index_entry(
        bytes: &[u8],
        url: &str,
        len: u64,
        crc32: u32,
    ) -> Option<(usize, u64, usize)> {
        super::index_cache::parse_entry(bytes, url, len, crc32)
            .map(|o| (o.head.len(), o.tail_start, o.tail.len()))
    }

    /// An entry's bytes as the cache writes them (seeds and round trips).
    pub fn index_entry_bytes(url: &str, crc32: u32, len: u64, head: &[u8], tail: &[u8]) -> Vec<u8> {
        super::index_cache::entry_bytes(
            url,
            crc32,
            &super::index_cache::Opened {
                len,
                etag: Some("\"e\"".into()),
                head: head.to_vec(),
                tail_start: len - tail.len() as u64,
                tail: tail.to_vec(),
            },
        )
    }
}

/// What a dataset's manifest says of one of its objects (a shard), so that opening it asks
/// for exactly the bytes the reader needs first: its first `head` bytes (the header) and last
/// `tail` bytes (index and trailer). Wrong hints cost extra reads, never wrong data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobHint {
    /// The object's size.
    pub len: u64,
    /// CRC-32 of the whole object (keys the index cache).
    pub crc32: u32,
    /// Bytes to read from its start.
    pub head: u64,
    /// Bytes to read from its end.
    pub tail: u64,
}

/// URL schemes of object stores (with feature `remote`).
pub const REMOTE_SCHEMES: [&str; 8] = ["s3", "s3a", "gs", "az", "abfs", "abfss", "http", "https"];

/// Whether `location` names an object store (`scheme://...` with a scheme of
/// [`REMOTE_SCHEMES`], in any case) rather than a local path.
pub fn is_remote(location: &str) -> bool {
    location
        .split_once("://")
        .is_some_and(|(scheme, _)| REMOTE_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()))
}

/// A dataset's root: a local folder or a prefix in an object store. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
enum Inner {
    Local(PathBuf),
    #[cfg(feature = "remote")]
    Remote(Arc<remote::Remote>),
}

impl Store {
    /// The local folder `dir`.
    pub fn local(dir: &Path) -> Store {
        Store {
            inner: Arc::new(Inner::Local(dir.to_path_buf())),
        }
    }

    /// `location`: an object-store URL ([`is_remote`]; credentials and endpoint from the
    /// environment, see [`RemoteOptions`]), a `file://` URL or a local path.
    pub fn open(location: &str) -> Result<Store> {
        Self::open_with_index_cache(location, None)
    }

    /// Like [`Store::open`], with `index_cache` (a local folder) as the index cache, over the
    /// environment's (see [`RemoteOptions::index_cache`]); local stores ignore it.
    pub fn open_with_index_cache(location: &str, index_cache: Option<&Path>) -> Result<Store> {
        if let Some(path) = location.strip_prefix("file://") {
            return Ok(Store::local(Path::new(path)));
        }
        if !is_remote(location) {
            return Ok(Store::local(Path::new(location)));
        }
        #[cfg(feature = "remote")]
        {
            let mut options = RemoteOptions::from_env()?;
            if let Some(dir) = index_cache {
                options.index_cache = Some(dir.to_path_buf());
            }
            Ok(Store {
                inner: Arc::new(Inner::Remote(Arc::new(remote::Remote::open(
                    location, &options,
                )?))),
            })
        }
        #[cfg(not(feature = "remote"))]
        {
            let _ = index_cache;
            Err(crate::error::ParameterError::Location {
                location: location.to_owned(),
                reason: "this build of l3 reads no object stores (feature `remote`)".into(),
            }
            .into())
        }
    }

    /// The folder, for a local store.
    pub fn local_dir(&self) -> Option<&Path> {
        match &*self.inner {
            Inner::Local(dir) => Some(dir),
            #[cfg(feature = "remote")]
            Inner::Remote(_) => None,
        }
    }

    /// Whether this is an object store.
    pub fn is_remote(&self) -> bool {
        self.local_dir().is_none()
    }

    /// The location as given (a path or a URL without a trailing `/`).
    pub fn location(&self) -> String {
        match &*self.inner {
            Inner::Local(dir) => dir.display().to_string(),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.url().to_owned(),
        }
    }

    /// Read requests made through this store (and the blobs it opened) so far, and the bytes
    /// they fetched: what crossed the network. Local stores count nothing: `(0, 0)`.
    pub fn traffic(&self) -> (u64, u64) {
        match &*self.inner {
            Inner::Local(_) => (0, 0),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.traffic(),
        }
    }

    /// Objects opened from the index cache so far (see [`RemoteOptions::index_cache`]).
    pub fn index_cache_hits(&self) -> u64 {
        match &*self.inner {
            Inner::Local(_) => 0,
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.cache_hits(),
        }
    }

    /// The full name of object `name` (a path or a URL), as errors give it.
    pub fn describe(&self, name: &str) -> String {
        match &*self.inner {
            Inner::Local(dir) => dir.join(name).display().to_string(),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.describe(name),
        }
    }

    /// The whole of object `name`, at most `max` bytes: a larger object is a
    /// [`LimitsError::InputBytes`] before its body is read.
    pub fn read(&self, name: &str, max: u64) -> Result<Vec<u8>> {
        match &*self.inner {
            Inner::Local(dir) => {
                use std::io::Read;
                let path = dir.join(name);
                let mut bytes = Vec::new();
                // One byte more than the limit tells a file at the limit from a larger one
                // (also when it grows while it is read).
                File::open(&path)
                    .map_err(|e| named_io(&path.display().to_string(), e))?
                    .take(max.saturating_add(1))
                    .read_to_end(&mut bytes)?;
                if bytes.len() as u64 > max {
                    return Err(LimitsError::InputBytes {
                        len: std::fs::metadata(&path).map_or(bytes.len() as u64, |m| m.len()),
                        max,
                    }
                    .into());
                }
                Ok(bytes)
            }
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.read(name, max),
        }
    }

    /// Whether object `name` exists.
    pub fn exists(&self, name: &str) -> Result<bool> {
        match &*self.inner {
            Inner::Local(dir) => Ok(dir.join(name).exists()),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.exists(name),
        }
    }

    /// Opens object `name` for ranged reads.
    pub fn open_blob(&self, name: &str) -> Result<Blob> {
        match &*self.inner {
            Inner::Local(dir) => Blob::open_file(&dir.join(name)),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.open_blob(name),
        }
    }

    /// Opens object `name`, which the dataset's manifest describes as `hint` (see
    /// [`BlobHint`]; a remote store asks for exactly those bytes, or nothing when its index
    /// cache holds them).
    pub fn open_blob_hinted(&self, name: &str, hint: &BlobHint) -> Result<Blob> {
        match &*self.inner {
            Inner::Local(dir) => {
                let _ = hint;
                Blob::open_file(&dir.join(name))
            }
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.open_blob_hinted(name, hint),
        }
    }

    /// Writes object `name` from the local file `from`: atomically for a local store
    /// (`atomic`); for an object store, as one upload (multipart above 64 MiB) that
    /// replaces the object only once complete.
    pub fn put_file(&self, name: &str, from: &Path) -> Result<()> {
        match &*self.inner {
            Inner::Local(dir) => {
                let to = dir.join(name);
                let mut src = File::open(from)?;
                atomic::write_atomic_with(&to, |f| std::io::copy(&mut src, f).map(|_| ()))?;
                Ok(())
            }
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.put_file(name, from),
        }
    }

    /// Writes object `name` as `bytes` (see [`Store::put_file`]).
    pub fn put(&self, name: &str, bytes: &[u8]) -> Result<()> {
        match &*self.inner {
            Inner::Local(dir) => Ok(atomic::write_atomic(&dir.join(name), bytes)?),
            #[cfg(feature = "remote")]
            Inner::Remote(r) => r.put(name, bytes.to_vec()),
        }
    }
}

/// An I/O error `e` prefixed with the object's name.
pub(crate) fn named_io(name: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{name}: {e}"))
}

/// One object opened for ranged reads: a local file, or an object of a store pinned to the
/// version (ETag) it had when opened.
#[derive(Debug)]
pub struct Blob {
    len: u64,
    inner: BlobInner,
}

#[derive(Debug)]
enum BlobInner {
    File(File),
    #[cfg(feature = "remote")]
    Remote(remote::RemoteBlob),
}

impl Blob {
    /// Opens the local file `path`.
    pub fn open_file(path: &Path) -> Result<Blob> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        Ok(Blob {
            len,
            inner: BlobInner::File(file),
        })
    }

    /// Bytes of the object (when it was opened).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the object is in an object store.
    pub fn is_remote(&self) -> bool {
        !matches!(self.inner, BlobInner::File(_))
    }

    /// `len` bytes at `offset`; the caller has checked the range against [`Blob::len`] and its
    /// limits. Remote reads retry, then fail naming the object; a changed object is refused
    /// (see the module docs).
    pub fn read_at(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        match &self.inner {
            BlobInner::File(file) => {
                let mut buf = vec![0u8; len];
                read_exact_at(file, &mut buf, offset)?;
                Ok(buf)
            }
            #[cfg(feature = "remote")]
            BlobInner::Remote(r) => r.read_at(offset, len),
        }
    }

    /// Fills `buf` from `offset` (see [`Blob::read_at`]).
    pub fn read_into(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        match &self.inner {
            BlobInner::File(file) => read_exact_at(file, buf, offset),
            #[cfg(feature = "remote")]
            BlobInner::Remote(r) => {
                buf.copy_from_slice(&r.read_at(offset, buf.len())?);
                Ok(())
            }
        }
    }
}

fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        let mut done = 0;
        while done < buf.len() {
            let n = file.seek_read(&mut buf[done..], offset + done as u64)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_locations_are_told_from_paths() {
        for url in [
            "s3://b/p",
            "S3://b",
            "gs://b/x",
            "az://c/p",
            "https://h/x",
            "http://h:1/b",
        ] {
            assert!(is_remote(url), "{url}");
        }
        for path in [
            "/tmp/ds",
            "ds",
            "file:///tmp/ds",
            "C:\\ds",
            "weird://x",
            "s3:/b",
        ] {
            assert!(!is_remote(path), "{path}");
        }
    }

    #[test]
    fn a_local_store_reads_within_its_limit_and_blobs_by_range() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"0123456789").unwrap();
        let store = Store::open(dir.path().to_str().unwrap()).unwrap();
        assert!(!store.is_remote());
        assert_eq!(store.read("a", 10).unwrap(), b"0123456789");
        assert!(matches!(
            store.read("a", 9),
            Err(crate::Error::Limits(LimitsError::InputBytes {
                len: 10,
                max: 9
            }))
        ));
        let blob = store.open_blob("a").unwrap();
        assert_eq!((blob.len(), blob.is_remote()), (10, false));
        assert_eq!(blob.read_at(3, 4).unwrap(), b"3456");
        assert!(blob.read_at(8, 4).is_err());
        let e = store.read("missing", 10).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
        store.put("b", b"xyz").unwrap();
        assert!(store.exists("b").unwrap() && !store.exists("c").unwrap());
        store.put_file("c", &dir.path().join("a")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("c")).unwrap(), b"0123456789");
    }
}
