//! Writing a shard: records are collected in memory (a shard's payload bytes, which the caller
//! bounds by choosing how many records go in one shard), then written level-major in one pass
//! to a temporary file beside the target, synced, and renamed into place: a crash leaves either
//! no shard or a complete one, never a partial file under the shard's name.

use std::path::Path;

use super::format::{
    check_key, LevelEntry, RecordEntry, ShardHeader, Trailer, HEADER_LEN, MAX_LEVELS, MAX_META_LEN,
};
use crate::error::{ParameterError, Result};
use crate::progressive::{EncodedLevels, LevelScheme, StoredLevels};

/// One record to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInput {
    /// Key (e.g. the source path relative to the dataset root): a relative path with `/`
    /// separators, at most 1024 bytes of UTF-8 ([`super::format::check_key`]).
    pub key: String,
    /// Class id (`u32::MAX` is reserved for "none").
    pub class: Option<u32>,
    /// Metadata bytes (e.g. JSON), at most 1 MiB.
    pub meta: Vec<u8>,
    /// Width of the full-resolution image.
    pub width: u32,
    /// Height of the full-resolution image.
    pub height: u32,
    /// The levels ([`crate::progressive::encode_levels`]), one payload per level of the
    /// shard, lowest fidelity first.
    pub levels: EncodedLevels,
}

impl RecordInput {
    /// A record stored flat: `file` (an L3 file) as level 0, and empty payloads for the
    /// shard's other `level_count - 1` levels. The shape comes from the file's header.
    pub fn flat(
        key: String,
        class: Option<u32>,
        meta: Vec<u8>,
        file: Vec<u8>,
        level_count: u8,
    ) -> Result<Self> {
        let header = crate::decode::read_header(&file)?;
        let mut payloads = vec![Vec::new(); level_count.max(1) as usize];
        payloads[0] = file;
        Ok(RecordInput {
            key,
            class,
            meta,
            width: header.width,
            height: header.height,
            levels: EncodedLevels {
                scheme: LevelScheme::Flat,
                payloads,
            },
        })
    }
}

/// Collects records and writes them as one shard (see the module docs).
#[derive(Debug)]
pub struct ShardWriter {
    level_count: u8,
    records: Vec<(RecordEntry, Vec<Vec<u8>>)>,
    payload_bytes: u64,
}

impl ShardWriter {
    /// A writer of shards whose records have `level_count` levels (1..=8).
    pub fn new(level_count: u8) -> Result<Self> {
        if level_count == 0 || level_count > MAX_LEVELS {
            return Err(ParameterError::InvalidOption {
                name: "level_count",
                value: level_count as u64,
                reason: "must be 1..=8",
            }
            .into());
        }
        Ok(ShardWriter {
            level_count,
            records: Vec::new(),
            payload_bytes: 0,
        })
    }

    /// Records added so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record was added.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Payload bytes added so far (what the shard will hold besides header, index, trailer).
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Adds a record. Its last level's L3 header gives the shape stored in the index; every
    /// level must be an L3 file whose header parses.
    pub fn add(&mut self, record: RecordInput) -> Result<()> {
        let payloads = &record.levels.payloads;
        if payloads.len() != self.level_count as usize {
            return Err(bad(
                "levels",
                payloads.len(),
                "a record needs exactly the shard's level count",
            ));
        }
        check_record_head(&record.key, record.class, &record.meta)?;
        // Every payload must have the shape its level needs (the same check a reader makes),
        // and a flat record nothing above level 0.
        let first = crate::decode::read_header(&payloads[0])?;
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
        let stored = StoredLevels {
            scheme: record.levels.scheme,
            level_count: self.level_count,
            width: record.width,
            height: record.height,
            channels: first.channels(),
            depth: first.depth,
            payloads: &refs,
        };
        let plan = stored.plan(self.level_count - 1)?;
        for shape in &plan {
            let header = crate::decode::read_header(&payloads[shape.level as usize])?;
            stored.check_header(shape, &header)?;
        }
        if record.levels.scheme == LevelScheme::Flat && payloads[1..].iter().any(|p| !p.is_empty())
        {
            return Err(bad("levels", 0, "a flat record has no bytes above level 0"));
        }
        self.payload_bytes += record.levels.total_bytes();
        let entry = RecordEntry {
            key: record.key,
            class: record.class,
            meta: record.meta,
            width: record.width,
            height: record.height,
            channels: first.channels(),
            depth: first.depth,
            scheme: record.levels.scheme,
            levels: Vec::new(),
        };
        self.records.push((entry, record.levels.payloads));
        Ok(())
    }

    /// The shard's bytes: header, levels level-major, index, trailer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.payload_bytes as usize + 1024);
        out.extend_from_slice(
            &ShardHeader {
                level_count: self.level_count,
            }
            .to_bytes(),
        );
        debug_assert_eq!(out.len() as u64, HEADER_LEN);
        let mut entries: Vec<RecordEntry> = self.records.iter().map(|(e, _)| e.clone()).collect();
        for k in 0..self.level_count as usize {
            for ((_, levels), entry) in self.records.iter().zip(&mut entries) {
                let bytes = &levels[k];
                entry.levels.push(LevelEntry {
                    offset: out.len() as u64,
                    len: bytes.len() as u64,
                    crc32: crc32fast::hash(bytes),
                });
                out.extend_from_slice(bytes);
            }
        }
        let mut index = Vec::new();
        for e in &entries {
            e.write(&mut index);
        }
        append_index(&mut out, &index, entries.len());
        out
    }

    /// Writes the shard to `path` atomically ([`super::write_atomic`]); an existing file at
    /// `path` is replaced.
    pub fn write_to(&self, path: &Path) -> Result<()> {
        Ok(super::write_atomic(path, &self.to_bytes())?)
    }
}

/// The error of a record a shard writer refuses: `value` (a length or count) of `name`.
pub(super) fn bad(name: &'static str, value: usize, reason: &'static str) -> crate::error::Error {
    crate::error::invalid_option(name, value as u64, reason)
}

/// Checks the head every record kind shares, as a reader will: its key ([`check_key`]), its
/// metadata (at most 1 MiB) and its class (`u32::MAX` is reserved for "none").
pub(super) fn check_record_head(key: &str, class: Option<u32>, meta: &[u8]) -> Result<()> {
    if let Err(reason) = check_key(key) {
        return Err(bad("key", key.len(), reason));
    }
    if meta.len() > MAX_META_LEN {
        return Err(bad("meta", meta.len(), "metadata is at most 1 MiB"));
    }
    if class == Some(super::format::NO_CLASS) {
        return Err(bad("class", u32::MAX as usize, "u32::MAX means no class"));
    }
    Ok(())
}

/// Appends `index` (the entries of `records` records) and the trailer to a shard's bytes,
/// which end with the last payload.
pub(super) fn append_index(out: &mut Vec<u8>, index: &[u8], records: usize) {
    let index_offset = out.len() as u64;
    out.extend_from_slice(index);
    out.extend_from_slice(
        &Trailer {
            index_offset,
            index_len: index.len() as u64,
            record_count: records as u64,
            index_crc32: crc32fast::hash(index),
        }
        .to_bytes(),
    );
}
