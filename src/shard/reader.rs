//! Reading a shard with positional reads: opening reads the header, the trailer and the index
//! (three reads, validated before the next), nothing else; the index is kept as its validated
//! bytes ([`Index`]: nothing allocated per record) and its entries read in place
//! ([`ShardReader::entry`]). Each level of each record is then one read at a known offset, and
//! the first `k + 1` levels of every record are one contiguous read
//! ([`ShardReader::read_prefix`]). No read depends on an unvalidated field.

use std::path::Path;
use std::sync::OnceLock;

use rayon::prelude::*;

use super::format::{
    Index, LevelEntry, RecordEntry, RecordRef, ShardHeader, Trailer, HEADER_LEN, TRAILER_LEN,
};
use super::ShardError;
use crate::decode::DecodeOptions;
use crate::error::{LimitsError, Result};
use crate::limits::Limits;
use crate::progressive::{decode_level, LevelImage, LevelScheme, StoredLevels};
use crate::store::{Blob, BlobHint, Span, Store};

/// An open shard: its validated index, and the file for positional reads.
#[derive(Debug)]
pub struct ShardReader {
    file: Blob,
    /// The shard's file name, for errors.
    name: String,
    /// Most bytes one read may take ([`Limits::max_input_bytes`]).
    max_read: u64,
    /// Bytes of the file when it was opened.
    file_len: u64,
    level_count: u8,
    index: Index,
    /// The entries owned, made on the first call that needs them ([`ShardReader::records`]).
    records: OnceLock<Vec<RecordEntry>>,
    index_offset: u64,
}

/// `e` naming the shard: a structural error wrapped as [`ShardError::File`] with `name`, an
/// I/O error prefixed with `path` (the file's path or URL; image and tensor shard readers).
pub(super) fn named_error(name: &str, path: &str, e: crate::error::Error) -> crate::error::Error {
    match e {
        crate::error::Error::Shard(e) => ShardError::File {
            file: name.to_owned(),
            error: Box::new(e),
        }
        .into(),
        crate::error::Error::Io(e) => {
            if e.to_string().starts_with(path) {
                e.into()
            } else {
                std::io::Error::new(e.kind(), format!("{path}: {e}")).into()
            }
        }
        e => e,
    }
}

/// A shard's blob opened from a local `path`, with the name errors give it and its shown path
/// (image and tensor shard readers).
pub(super) fn open_path(path: &Path) -> Result<(Blob, String, String)> {
    let name = path
        .file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy()
        .into_owned();
    let shown = path.display().to_string();
    let blob = Blob::open_file(path).map_err(|e| named_error(&name, &shown, e))?;
    Ok((blob, name, shown))
}

/// What opening a shard of either kind reads: checks the file holds a header and a trailer,
/// parses both with `parse(header bytes, trailer bytes, file length)`, checks the index
/// against `max_index` (before reading it) and reads it. Returns the file length, the parsed
/// header, the trailer and the index bytes; the caller names the shard in errors.
pub(super) fn read_head_and_index<H>(
    file: &Blob,
    name: &str,
    max_index: u64,
    parse: impl FnOnce(&[u8], &[u8], u64) -> std::result::Result<(H, Trailer), ShardError>,
) -> Result<(u64, H, Trailer, Vec<u8>)> {
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
    let (header, trailer) = parse(&head, &tail, len)?;
    if trailer.index_len > max_index {
        return Err(LimitsError::ShardRead {
            shard: name.to_owned(),
            what: "the index".into(),
            len: trailer.index_len,
            max: max_index,
        }
        .into());
    }
    let index = file.read_at(trailer.index_offset, trailer.index_len as usize)?;
    Ok((len, header, trailer, index))
}

/// Shard `file` of `store` opened as a blob (with the manifest's `hint`, when known), with its
/// name and its shown path or URL.
pub(super) fn open_named(
    store: &Store,
    file: &str,
    hint: Option<&BlobHint>,
) -> Result<(Blob, String, String)> {
    let shown = store.describe(file);
    let blob = match hint {
        Some(h) => store.open_blob_hinted(file, h),
        None => store.open_blob(file),
    }
    .map_err(|e| named_error(file, &shown, e))?;
    Ok((blob, file.to_owned(), shown))
}

impl ShardReader {
    /// Opens a shard and validates its header, trailer and index; the index may take at most
    /// `max_index_bytes` (what opening allocates, besides the parsed entries). Later reads are
    /// bounded by the default [`Limits::max_input_bytes`] (see [`ShardReader::open_with_limits`]).
    pub fn open(path: &Path, max_index_bytes: u64) -> Result<Self> {
        Self::open_with_limits(path, max_index_bytes, &Limits::default())
    }

    /// Like [`ShardReader::open`], with every read (the index, a payload, a coalesced read, a
    /// prefix) at most `limits.max_input_bytes`: a larger one is a [`LimitsError::ShardRead`]
    /// naming the shard (and the record and key), returned before anything is allocated for it.
    pub fn open_with_limits(path: &Path, max_index_bytes: u64, limits: &Limits) -> Result<Self> {
        let (blob, name, shown) = open_path(path)?;
        Self::open_blob(blob, name, &shown, max_index_bytes, limits)
    }

    /// Like [`ShardReader::open_with_limits`], for shard `file` of `store` (a local folder
    /// or an object store: the index is then read with the blob's first ranged read).
    pub fn open_in(
        store: &Store,
        file: &str,
        max_index_bytes: u64,
        limits: &Limits,
    ) -> Result<Self> {
        let (blob, name, shown) = open_named(store, file, None)?;
        Self::open_blob(blob, name, &shown, max_index_bytes, limits)
    }

    /// Like [`ShardReader::open_in`], for a shard the dataset's manifest describes as `hint`
    /// (a remote store then reads exactly its header and index, or takes them from its index
    /// cache).
    pub fn open_in_hinted(
        store: &Store,
        file: &str,
        hint: &BlobHint,
        max_index_bytes: u64,
        limits: &Limits,
    ) -> Result<Self> {
        let (blob, name, shown) = open_named(store, file, Some(hint))?;
        Self::open_blob(blob, name, &shown, max_index_bytes, limits)
    }

    fn open_blob(
        file: Blob,
        name: String,
        shown: &str,
        max_index_bytes: u64,
        limits: &Limits,
    ) -> Result<Self> {
        let max_read = limits.max_input_bytes;
        // Errors of the file or its structure name the shard.
        let named = |e| named_error(&name, shown, e);
        type Opened = (u64, ShardHeader, Trailer, Index);
        let (len, header, trailer, index) = (|| -> Result<Opened> {
            let (len, header, trailer, index) =
                read_head_and_index(&file, &name, max_index_bytes.min(max_read), |h, t, len| {
                    let header = ShardHeader::parse(h)?;
                    let trailer = Trailer::parse(t, len, header.level_count)?;
                    Ok((header, trailer))
                })?;
            let index = Index::parse(index, &trailer, header.level_count)?;
            Ok((len, header, trailer, index))
        })()
        .map_err(named)?;
        Ok(ShardReader {
            file,
            name,
            max_read,
            file_len: len,
            level_count: header.level_count,
            index,
            records: OnceLock::new(),
            index_offset: trailer.index_offset,
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
        self.index.is_empty()
    }

    /// Levels per record.
    pub fn level_count(&self) -> u8 {
        self.level_count
    }

    /// Every record's index entry, in order (made from the index on the first call; reading
    /// a few entries, [`ShardReader::entry`] allocates nothing).
    pub fn records(&self) -> &[RecordEntry] {
        self.records.get_or_init(|| self.index.entries())
    }

    /// Record `i`'s index entry (from [`ShardReader::records`]).
    pub fn record(&self, i: usize) -> Result<&RecordEntry> {
        self.records().get(i).ok_or_else(|| self.no_such(i, 0))
    }

    /// Record `i`'s index entry, read in place from the validated index.
    pub fn entry(&self, i: usize) -> Result<RecordRef<'_>> {
        self.index.get(i).ok_or_else(|| self.no_such(i, 0))
    }

    /// Payload bytes per level (level 0 first), summed over the records (from the index).
    pub fn level_bytes(&self) -> &[u64] {
        self.index.level_bytes()
    }

    /// The largest class id of a record (`None` if no record has one).
    pub fn max_class(&self) -> Option<u32> {
        self.index.max_class()
    }

    /// Every record's index entry, read in place, in order.
    pub fn entries(&self) -> impl Iterator<Item = RecordRef<'_>> + '_ {
        self.index.iter()
    }

    fn no_such(&self, record: usize, level: u8) -> crate::error::Error {
        ShardError::NoSuchRecord {
            record: record as u64,
            level,
            records: self.index.len() as u64,
            levels: self.level_count,
        }
        .into()
    }

    /// The error for a read of `len` bytes above the limit; `what` says what it was.
    fn too_large(&self, what: String, len: u64) -> crate::error::Error {
        LimitsError::ShardRead {
            shard: self.name.clone(),
            what,
            len,
            max: self.max_read,
        }
        .into()
    }

    /// Level `level` of record `i`, checked against the read limit.
    fn level_entry(&self, i: usize, level: u8) -> Result<LevelEntry> {
        let (record, entry) = self
            .index
            .get(i)
            .and_then(|r| Some((r, r.level(level)?)))
            .ok_or_else(|| self.no_such(i, level))?;
        if entry.len > self.max_read {
            let what = format!("record {i} (key {:?}) level {level}", record.key);
            return Err(self.too_large(what, entry.len));
        }
        Ok(entry)
    }

    /// The bytes of level `level` of record `i` (an L3 file), checked against their CRC-32.
    pub fn read_level(&self, i: usize, level: u8) -> Result<Vec<u8>> {
        let entry = self.level_entry(i, level)?;
        // In the data area: checked by parse_index; at most max_read bytes: checked above.
        let bytes = self.file.read_at(entry.offset, entry.len as usize)?;
        check_crc(&bytes, entry.crc32, i, level)?;
        Ok(bytes)
    }

    /// Reads the payloads `wanted` (`(record, level)` pairs) with few positional reads:
    /// payloads at most `max_gap` bytes apart are read together, up to `max_read` bytes per read
    /// (a payload larger than that is read alone), the reads run on rayon's pool, and every
    /// payload is checked against its CRC-32. No read is larger than the reader's limit
    /// ([`ShardReader::open_with_limits`]): a payload above it is an error of its own. Returns one result per wanted payload, in order
    /// (an I/O error fails every payload of its read; a checksum error only its payload), and
    /// the number of reads made.
    pub fn read_levels_coalesced(
        &self,
        wanted: &[(usize, u8)],
        max_gap: u64,
        max_read: u64,
    ) -> (Vec<Result<Vec<u8>>>, usize) {
        // The payloads that exist, as spans; the others' errors.
        let mut results: Vec<Option<Result<Vec<u8>>>> = (0..wanted.len()).map(|_| None).collect();
        let (mut spans, mut crcs, mut of_span) = (Vec::new(), Vec::new(), Vec::new());
        for (w, &(i, level)) in wanted.iter().enumerate() {
            match self.level_entry(i, level) {
                Ok(l) => {
                    spans.push(Span {
                        start: l.offset,
                        end: l.offset + l.len,
                    });
                    crcs.push(l.crc32);
                    of_span.push(w);
                }
                Err(e) => results[w] = Some(Err(e)),
            }
        }
        // A run of several payloads stays within the limit too; every span lies in the data
        // area (checked by parse_index).
        let (read, reads) =
            self.file
                .read_coalesced(&spans, max_gap, max_read.min(self.max_read), |k, b| {
                    let (i, level) = wanted[of_span[k]];
                    check_crc(b, crcs[k], i, level)?;
                    Ok(b.to_vec())
                });
        for (k, r) in read.into_iter().enumerate() {
            results[of_span[k]] = Some(r);
        }
        let results = results
            .into_iter()
            .map(|r| r.expect("every wanted payload has a result"))
            .collect();
        (results, reads)
    }

    /// Byte range of levels `0..=level` of every record: one contiguous prefix of the shard
    /// after its header.
    pub fn prefix_range(&self, level: u8) -> Result<std::ops::Range<u64>> {
        if level >= self.level_count {
            return Err(self.no_such(0, level));
        }
        let end = if level + 1 == self.level_count {
            self.index_offset
        } else {
            self.index
                .get(0)
                .and_then(|r| r.level(level + 1))
                .map_or(self.index_offset, |l| l.offset)
        };
        Ok(HEADER_LEN..end)
    }

    /// Levels `0..=level` of every record in one contiguous read (in 4 MiB chunks on rayon's
    /// pool), every payload in it checked against its CRC-32. A prefix above the reader's limit
    /// is an error, returned before anything is allocated.
    pub fn read_prefix(&self, level: u8) -> Result<ShardPrefix> {
        let range = self.prefix_range(level)?;
        if range.end - range.start > self.max_read {
            let what = format!("the prefix of levels 0..={level}");
            return Err(self.too_large(what, range.end - range.start));
        }
        let mut bytes = vec![0u8; (range.end - range.start) as usize];
        bytes
            .par_chunks_mut(PREFIX_CHUNK)
            .enumerate()
            .try_for_each(|(i, chunk)| {
                self.file
                    .read_into(chunk, range.start + (i * PREFIX_CHUNK) as u64)
            })?;
        // Every offset was validated by the index parser to lie in the data area, level-major,
        // so each range below lies inside the prefix.
        let records = self.records();
        let ranges: Vec<Vec<std::ops::Range<usize>>> = records
            .iter()
            .map(|r| {
                r.levels[..=level as usize]
                    .iter()
                    .map(|l| {
                        let start = (l.offset - range.start) as usize;
                        start..start + l.len as usize
                    })
                    .collect()
            })
            .collect();
        ranges
            .par_iter()
            .zip(records)
            .enumerate()
            .try_for_each(|(i, (spans, r))| {
                spans
                    .iter()
                    .zip(&r.levels)
                    .enumerate()
                    .try_for_each(|(k, (span, l))| {
                        check_crc(&bytes[span.clone()], l.crc32, i, k as u8)
                    })
            })?;
        Ok(ShardPrefix {
            bytes,
            ranges,
            level,
        })
    }

    /// Record `i`'s stored levels over `payloads` (its payloads `0..=k`), for
    /// [`crate::progressive::decode_level`] or the GPU.
    pub fn stored_levels<'a>(
        &self,
        i: usize,
        payloads: &'a [&'a [u8]],
    ) -> Result<StoredLevels<'a>> {
        Ok(self.entry(i)?.stored(self.level_count, payloads))
    }

    /// Record `i` at level `level`, decoded on the CPU: reads only the payloads that level
    /// needs (one positional read each), CRC-checked, then [`crate::progressive::decode_level`].
    pub fn decode_record(
        &self,
        i: usize,
        level: u8,
        options: &DecodeOptions,
    ) -> Result<LevelImage> {
        let r = self.entry(i)?;
        if level >= self.level_count {
            return Err(self.no_such(i, level));
        }
        let needed = match r.scheme {
            LevelScheme::Flat => 1,
            LevelScheme::Interlace => level + 1,
        };
        let owned: Vec<Vec<u8>> = (0..needed)
            .map(|k| self.read_level(i, k))
            .collect::<Result<_>>()?;
        let refs: Vec<&[u8]> = owned.iter().map(|p| p.as_slice()).collect();
        decode_level(&self.stored_levels(i, &refs)?, level, options)
    }

    /// Every record of a prefix ([`ShardReader::read_prefix`]) at the prefix's level, decoded on
    /// the CPU, rayon over records.
    pub fn decode_prefix(
        &self,
        prefix: &ShardPrefix,
        options: &DecodeOptions,
    ) -> Result<Vec<LevelImage>> {
        (0..prefix.ranges.len())
            .into_par_iter()
            .map(|i| {
                let payloads = prefix.payloads(i);
                decode_level(&self.stored_levels(i, &payloads)?, prefix.level, options)
            })
            .collect()
    }
}

/// Levels `0..=level` of every record of a shard, read as one contiguous prefix
/// ([`ShardReader::read_prefix`]).
#[derive(Debug, Clone)]
pub struct ShardPrefix {
    /// The bytes, from the end of the shard header.
    pub bytes: Vec<u8>,
    /// `ranges[i][k]`: record `i`'s payload of level `k` in `bytes` (empty for the levels
    /// above 0 of a flat record).
    pub ranges: Vec<Vec<std::ops::Range<usize>>>,
    /// The highest level read.
    pub level: u8,
}

impl ShardPrefix {
    /// Record `i`'s payloads of levels `0..=level`.
    pub fn payloads(&self, i: usize) -> Vec<&[u8]> {
        self.ranges[i]
            .iter()
            .map(|r| &self.bytes[r.clone()])
            .collect()
    }
}

#[cfg(feature = "gpu")]
impl ShardReader {
    /// Every record at level `level`, read as one prefix ([`ShardReader::read_prefix`]) and
    /// decoded on the GPU as one batch ([`crate::progressive::gpu::decode_levels`]): image `i`
    /// of the batch is record `i`, interleaved, bit-exact with [`ShardReader::decode_prefix`].
    pub fn decode_prefix_on_gpu(
        &self,
        gpu: &crate::gpu::GpuDecoder,
        level: u8,
    ) -> Result<crate::gpu::GpuBatch> {
        let prefix = self.read_prefix(level)?;
        let payloads: Vec<Vec<&[u8]>> = (0..self.len()).map(|i| prefix.payloads(i)).collect();
        let stored: Vec<StoredLevels> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| self.stored_levels(i, p))
            .collect::<Result<_>>()?;
        crate::progressive::gpu::decode_levels(gpu, &stored, level)
    }
}

fn check_crc(bytes: &[u8], stored: u32, record: usize, level: u8) -> Result<()> {
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

/// Bytes of one read of [`ShardReader::read_prefix`].
const PREFIX_CHUNK: usize = 4 << 20;
