//! One shard reader for every record kind: [`Shard`] opens a shard file (local or on an
//! object store) with bounded positional reads (header and trailer, then the index, each
//! validated before the next read) and reads payloads at the offsets its index gives, each
//! read within the caller's [`Limits`] and checked against its CRC-32. What a record kind
//! brings is its index ([`ShardIndex`]): [`super::ImageIndex`] (levels of images, `SPEC.md`
//! "Record shards") and [`super::TensorIndex`] (named arrays, "Tensor records"). No read
//! depends on an unvalidated field.

use std::path::Path;

use super::format::{Trailer, HEADER_LEN, TRAILER_LEN};
use super::ShardError;
use crate::error::{Error, LimitsError, Result};
use crate::limits::Limits;
use crate::store::{Blob, BlobHint, Span, Store};

/// A record kind's shard index, parsed and validated from the bytes a shard holds.
pub trait ShardIndex: Sized + std::fmt::Debug + Send + Sync {
    /// What the header and trailer tell the index parser (the image shard's level count).
    type Head;

    /// Checks the shard's `head` (its first [`HEADER_LEN`] bytes) and `tail` (its last
    /// [`TRAILER_LEN`]) for a file of `file_len` bytes.
    fn parse_ends(
        head: &[u8],
        tail: &[u8],
        file_len: u64,
    ) -> std::result::Result<(Self::Head, Trailer), ShardError>;

    /// Validates `bytes` as the index the trailer describes.
    fn parse(
        head: Self::Head,
        trailer: &Trailer,
        bytes: Vec<u8>,
    ) -> std::result::Result<Self, ShardError>;

    /// Records in the index.
    fn len(&self) -> usize;

    /// Whether the index has no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Levels (image shards) or arrays (tensor shards: 1) a record has, as errors report it.
    fn levels(&self) -> u8;
}

/// An open shard of record kind `I`: its validated index, and the file for positional reads.
/// [`super::ShardReader`] and [`super::TensorShardReader`] name the two kinds.
#[derive(Debug)]
pub struct Shard<I> {
    pub(super) file: Blob,
    /// The shard's file name, for errors.
    pub(super) name: String,
    /// Most bytes one read may take ([`Limits::max_input_bytes`]).
    pub(super) max_read: u64,
    /// Bytes of the file when it was opened.
    file_len: u64,
    pub(super) index: I,
}

/// `e` naming the shard: a structural error wrapped as [`ShardError::File`] with `name`, an
/// I/O error prefixed with `path` (the file's path or URL).
fn named_error(name: &str, path: &str, e: Error) -> Error {
    match e {
        Error::Shard(e) => ShardError::File {
            file: name.to_owned(),
            error: Box::new(e),
        }
        .into(),
        Error::Io(e) => {
            if e.to_string().starts_with(path) {
                e.into()
            } else {
                std::io::Error::new(e.kind(), format!("{path}: {e}")).into()
            }
        }
        e => e,
    }
}

/// Where one planned item of [`Shard::read_planned`] comes from.
pub(super) enum Planned<T> {
    /// The bytes of this span of the shard (in its data area).
    Span(Span),
    /// Already resolved (an error, or read apart), with the reads it took.
    Done(Result<T>, usize),
}

impl<I: ShardIndex> Shard<I> {
    /// Opens a shard and validates its header, trailer and index; the index may take at most
    /// `max_index_bytes` (what opening allocates, besides the parsed entries). Later reads are
    /// bounded by the default [`Limits::max_input_bytes`] (see [`Shard::open_with_limits`]).
    pub fn open(path: &Path, max_index_bytes: u64) -> Result<Self> {
        Self::open_with_limits(path, max_index_bytes, &Limits::default())
    }

    /// Like [`Shard::open`], with every read (the index, a payload, a coalesced read, a
    /// prefix) at most `limits.max_input_bytes`: a larger one is a [`LimitsError::ShardRead`]
    /// naming the shard (and the record), returned before anything is allocated for it.
    pub fn open_with_limits(path: &Path, max_index_bytes: u64, limits: &Limits) -> Result<Self> {
        let name = path
            .file_name()
            .unwrap_or(path.as_os_str())
            .to_string_lossy()
            .into_owned();
        let shown = path.display().to_string();
        let blob = Blob::open_file(path).map_err(|e| named_error(&name, &shown, e))?;
        Self::open_blob(blob, name, &shown, max_index_bytes, limits)
    }

    /// Like [`Shard::open_with_limits`], for shard `file` of `store` (a local folder or an
    /// object store: the index is then read with the blob's first ranged read).
    pub fn open_in(
        store: &Store,
        file: &str,
        max_index_bytes: u64,
        limits: &Limits,
    ) -> Result<Self> {
        Self::open_store(store, file, None, max_index_bytes, limits)
    }

    /// Like [`Shard::open_in`], for a shard the dataset's manifest describes as `hint` (a
    /// remote store then reads exactly its header and index, or takes them from its index
    /// cache).
    pub fn open_in_hinted(
        store: &Store,
        file: &str,
        hint: &BlobHint,
        max_index_bytes: u64,
        limits: &Limits,
    ) -> Result<Self> {
        Self::open_store(store, file, Some(hint), max_index_bytes, limits)
    }

    fn open_store(
        store: &Store,
        file: &str,
        hint: Option<&BlobHint>,
        max_index_bytes: u64,
        limits: &Limits,
    ) -> Result<Self> {
        let shown = store.describe(file);
        let blob = match hint {
            Some(h) => store.open_blob_hinted(file, h),
            None => store.open_blob(file),
        }
        .map_err(|e| named_error(file, &shown, e))?;
        Self::open_blob(blob, file.to_owned(), &shown, max_index_bytes, limits)
    }

    fn open_blob(
        file: Blob,
        name: String,
        shown: &str,
        max_index_bytes: u64,
        limits: &Limits,
    ) -> Result<Self> {
        let max_read = limits.max_input_bytes;
        let max_index = max_index_bytes.min(max_read);
        // Errors of the file or its structure name the shard.
        let (file_len, index) = (|| -> Result<(u64, I)> {
            let len = file.len();
            if len < HEADER_LEN + TRAILER_LEN {
                return Err(ShardError::Truncated {
                    len,
                    min: HEADER_LEN + TRAILER_LEN,
                }
                .into());
            }
            let head = file.read_at(0, HEADER_LEN as usize)?;
            let tail = file.read_at(len - TRAILER_LEN, TRAILER_LEN as usize)?;
            let (head, trailer) = I::parse_ends(&head, &tail, len)?;
            if trailer.index_len > max_index {
                return Err(LimitsError::ShardRead {
                    shard: name.clone(),
                    what: "the index".into(),
                    len: trailer.index_len,
                    max: max_index,
                }
                .into());
            }
            let bytes = file.read_at(trailer.index_offset, trailer.index_len as usize)?;
            Ok((len, I::parse(head, &trailer, bytes)?))
        })()
        .map_err(|e| named_error(&name, shown, e))?;
        Ok(Shard {
            file,
            name,
            max_read,
            file_len,
            index,
        })
    }

    /// The shard's file name (as errors name it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes of the shard file (when it was opened).
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// Records in the shard.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the shard has no records.
    pub fn is_empty(&self) -> bool {
        self.index.len() == 0
    }

    /// The lines saying where this shard (`file` in a manifest) has other than `records`
    /// records or `bytes` bytes, for a manifest's check of a shard it lists.
    #[cfg(feature = "dataset")]
    pub(super) fn differs(&self, file: &str, records: u64, bytes: u64) -> Vec<String> {
        let mut out = Vec::new();
        if self.len() as u64 != records {
            out.push(super::manifest::differs(
                file,
                "records",
                self.len(),
                records,
            ));
        }
        if self.file_len != bytes {
            out.push(super::manifest::differs(
                file,
                "bytes",
                self.file_len,
                bytes,
            ));
        }
        out
    }

    /// The error for record `record`, level or array `level`, that the shard does not have.
    pub(super) fn no_such(&self, record: usize, level: u8) -> Error {
        ShardError::NoSuchRecord {
            record: record as u64,
            level,
            records: self.index.len() as u64,
            levels: self.index.levels(),
        }
        .into()
    }

    /// The error for a read of `len` bytes above the limit; `what` says what it was.
    pub(super) fn too_large(&self, what: String, len: u64) -> Error {
        LimitsError::ShardRead {
            shard: self.name.clone(),
            what,
            len,
            max: self.max_read,
        }
        .into()
    }

    /// The `len` bytes at `offset` (a payload the index validated to lie in the data area),
    /// at most the reader's limit (`what` names them in the error), checked against `crc32`
    /// as payload `level` of record `record`.
    pub(super) fn read_checked(
        &self,
        offset: u64,
        len: u64,
        crc32: u32,
        (record, level): (usize, u8),
        what: impl FnOnce() -> String,
    ) -> Result<Vec<u8>> {
        if len > self.max_read {
            return Err(self.too_large(what(), len));
        }
        let bytes = self.file.read_at(offset, len as usize)?;
        check_crc(&bytes, crc32, record, level)?;
        Ok(bytes)
    }

    /// Items read with few positional reads: `plans[w]` says where item `w` lies (or
    /// resolves it), spans at most `max_gap` bytes apart are read together while a read stays
    /// within `max_read` and the reader's limit, and `cut(w, bytes, start)` makes item `w` of
    /// the bytes of its span (which begins at shard offset `start`). Reads run on rayon's
    /// pool. Returns one result per item, in order (an I/O error fails every item of its
    /// read), and the number of reads.
    pub(super) fn read_planned<T: Send>(
        &self,
        plans: Vec<Planned<T>>,
        cut: impl Fn(usize, &[u8], u64) -> Result<T> + Sync,
        max_gap: u64,
        max_read: u64,
    ) -> (Vec<Result<T>>, usize) {
        let mut results: Vec<Option<Result<T>>> = (0..plans.len()).map(|_| None).collect();
        let (mut spans, mut of_span, mut calls) = (Vec::new(), Vec::new(), 0);
        for (w, (plan, result)) in plans.into_iter().zip(results.iter_mut()).enumerate() {
            match plan {
                Planned::Span(s) => {
                    spans.push(s);
                    of_span.push(w);
                }
                Planned::Done(r, reads) => {
                    *result = Some(r);
                    calls += reads;
                }
            }
        }
        let (read, reads) =
            self.file
                .read_coalesced(&spans, max_gap, max_read.min(self.max_read), |k, bytes| {
                    cut(of_span[k], bytes, spans[k].start)
                });
        for (k, r) in read.into_iter().enumerate() {
            results[of_span[k]] = Some(r);
        }
        let results = results
            .into_iter()
            .map(|r| r.expect("every item has a result"))
            .collect();
        (results, calls + reads)
    }
}

/// Checks payload `level` (an array, for tensor shards) of record `record` against its
/// CRC-32.
pub(super) fn check_crc(bytes: &[u8], stored: u32, record: usize, level: u8) -> Result<()> {
    let computed = crc32fast::hash(bytes);
    if computed != stored {
        return Err(ShardError::LevelChecksum {
            record: record as u64,
            level,
            stored,
            computed,
        }
        .into());
    }
    Ok(())
}
