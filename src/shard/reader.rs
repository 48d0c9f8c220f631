//! Image shards read through [`Shard`]: the index is kept as its validated bytes ([`Index`]:
//! nothing allocated per record) and its entries read in place ([`ShardReader::entry`]). Each
//! level of each record is one read at a known offset, and the first `k + 1` levels of every
//! record are one contiguous read ([`ShardReader::read_prefix`]).

use std::sync::OnceLock;

use rayon::prelude::*;

use super::file::{check_crc, Planned, Shard, ShardIndex};
use super::format::{Index, LevelEntry, RecordEntry, RecordRef, ShardHeader, Trailer, HEADER_LEN};
use super::ShardError;
use crate::decode::DecodeOptions;
use crate::error::Result;
use crate::progressive::{decode_level, LevelImage, LevelScheme, StoredLevels};
use crate::store::Span;

/// The index of an image shard (version 1): its validated bytes ([`Index`]), the entries
/// owned once a caller asks for them all, and where the index starts (the end of the data).
#[derive(Debug)]
pub struct ImageIndex {
    index: Index,
    /// The entries owned, made on the first call that needs them ([`ShardReader::records`]).
    records: OnceLock<Vec<RecordEntry>>,
    index_offset: u64,
}

impl ShardIndex for ImageIndex {
    type Head = ShardHeader;

    fn parse_ends(
        head: &[u8],
        tail: &[u8],
        file_len: u64,
    ) -> std::result::Result<(ShardHeader, Trailer), ShardError> {
        let header = ShardHeader::parse(head)?;
        let trailer = Trailer::parse(tail, file_len, header.level_count)?;
        Ok((header, trailer))
    }

    fn parse(
        head: ShardHeader,
        trailer: &Trailer,
        bytes: Vec<u8>,
    ) -> std::result::Result<Self, ShardError> {
        Ok(ImageIndex {
            index: Index::parse(bytes, trailer, head.level_count)?,
            records: OnceLock::new(),
            index_offset: trailer.index_offset,
        })
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn levels(&self) -> u8 {
        self.index.level_count()
    }
}

/// An open image shard ([`Shard`] over an [`ImageIndex`]).
pub type ShardReader = Shard<ImageIndex>;

impl ShardReader {
    /// Levels per record.
    pub fn level_count(&self) -> u8 {
        self.index.index.level_count()
    }

    /// Every record's index entry, in order (made from the index on the first call; reading
    /// a few entries, [`ShardReader::entry`] allocates nothing).
    pub fn records(&self) -> &[RecordEntry] {
        self.index
            .records
            .get_or_init(|| self.index.index.entries())
    }

    /// Record `i`'s index entry (from [`ShardReader::records`]).
    pub fn record(&self, i: usize) -> Result<&RecordEntry> {
        self.records().get(i).ok_or_else(|| self.no_such(i, 0))
    }

    /// Record `i`'s index entry, read in place from the validated index.
    pub fn entry(&self, i: usize) -> Result<RecordRef<'_>> {
        self.index.index.get(i).ok_or_else(|| self.no_such(i, 0))
    }

    /// Payload bytes per level (level 0 first), summed over the records (from the index).
    pub fn level_bytes(&self) -> &[u64] {
        self.index.index.level_bytes()
    }

    /// The largest class id of a record (`None` if no record has one).
    pub fn max_class(&self) -> Option<u32> {
        self.index.index.max_class()
    }

    /// Every record's index entry, read in place, in order.
    pub fn entries(&self) -> impl Iterator<Item = RecordRef<'_>> + '_ {
        self.index.index.iter()
    }

    /// Level `level` of record `i`, checked against the read limit.
    fn level_entry(&self, i: usize, level: u8) -> Result<LevelEntry> {
        let (record, entry) = self
            .index
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
        let l = self.level_entry(i, level)?;
        // In the data area: checked by parse_index; within the limit: checked above.
        self.read_checked(l.offset, l.len, l.crc32, (i, level), String::new)
    }

    /// Reads the payloads `wanted` (`(record, level)` pairs) with few positional reads:
    /// payloads at most `max_gap` bytes apart are read together, up to `max_read` bytes per
    /// read (a payload larger than that is read alone), the reads run on rayon's pool, and
    /// every payload is checked against its CRC-32. No read is larger than the reader's limit
    /// ([`ShardReader::open_with_limits`]): a payload above it is an error of its own. Returns
    /// one result per wanted payload, in order (an I/O error fails every payload of its read;
    /// a checksum error only its payload), and the number of reads made.
    pub fn read_levels_coalesced(
        &self,
        wanted: &[(usize, u8)],
        max_gap: u64,
        max_read: u64,
    ) -> (Vec<Result<Vec<u8>>>, usize) {
        let mut crcs = vec![0; wanted.len()];
        // Every span lies in the data area (checked by parse_index).
        let plans = wanted
            .iter()
            .zip(&mut crcs)
            .map(|(&(i, level), crc)| match self.level_entry(i, level) {
                Ok(l) => {
                    *crc = l.crc32;
                    Planned::Span(Span {
                        start: l.offset,
                        end: l.offset + l.len,
                    })
                }
                Err(e) => Planned::Done(Err(e), 0),
            })
            .collect();
        self.read_planned(
            plans,
            |w, b, _| {
                let (i, level) = wanted[w];
                check_crc(b, crcs[w], i, level)?;
                Ok(b.to_vec())
            },
            max_gap,
            max_read,
        )
    }

    /// Byte range of levels `0..=level` of every record: one contiguous prefix of the shard
    /// after its header.
    pub fn prefix_range(&self, level: u8) -> Result<std::ops::Range<u64>> {
        if level >= self.level_count() {
            return Err(self.no_such(0, level));
        }
        let end = if level + 1 == self.level_count() {
            self.index.index_offset
        } else {
            self.index
                .index
                .get(0)
                .and_then(|r| r.level(level + 1))
                .map_or(self.index.index_offset, |l| l.offset)
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
        Ok(self.entry(i)?.stored(self.level_count(), payloads))
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
        if level >= self.level_count() {
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

/// Bytes of one read of [`ShardReader::read_prefix`].
const PREFIX_CHUNK: usize = 4 << 20;
