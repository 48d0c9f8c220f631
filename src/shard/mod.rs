//! Record shards: many images in one file with an index at its end, each image stored as one
//! or more *levels* laid out level-major, so a loader reads records at known offsets with few
//! large reads and a prefix of the shard holds every record at a lower level. The format is in
//! [`mod@format`] (and `SPEC.md`, part "Record shards"); [`ShardWriter`] writes a shard atomically,
//! [`ShardReader`] reads one with positional reads, trusting nothing in it; a dataset is a
//! folder of shards and a `manifest.json` (`Manifest`, `Dataset`, feature `dataset`), which
//! `l3 pack` writes.
//!
//! In this version every shard written by the library has one level (each record a complete L3
//! file); the format already carries up to [`format::MAX_LEVELS`] levels per record for
//! progressive records.

mod atomic;
#[cfg(feature = "dataset")]
mod dataset;
pub mod format;
#[cfg(feature = "dataset")]
mod manifest;
#[cfg(feature = "dataset")]
pub mod pack;
mod reader;
mod writer;

pub use atomic::{remove_stale_temps, write_atomic, write_atomic_with, PendingWrite, TEMP_MARKER};
#[cfg(feature = "dataset")]
pub use dataset::Dataset;
pub use format::{LevelEntry, RecordEntry};
#[cfg(feature = "dataset")]
pub use manifest::{file_crc32, Manifest, ShardInfo, MANIFEST_NAME, MANIFEST_VERSION};
pub use reader::{ShardPrefix, ShardReader};
pub use writer::{RecordInput, ShardWriter};

/// What is wrong with a shard. Every field named is the one at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// The header or trailer does not carry the shard signature.
    #[error("not an l3 shard: bad {what} signature {found:02x?}")]
    BadMagic {
        /// "header" or "trailer".
        what: &'static str,
        /// The bytes found.
        found: Vec<u8>,
    },
    /// A shard format version this code does not know.
    #[error("unsupported shard version {version} (this reader knows version 1)")]
    UnsupportedVersion {
        /// The version byte.
        version: u8,
    },
    /// A header, trailer or index field has an impossible value.
    #[error("invalid shard {field} ({value}): {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },
    /// A record's index entry has an impossible value.
    #[error("record {record}: invalid {field} ({value}): {reason}")]
    InvalidRecord {
        /// Index of the record.
        record: u64,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
        /// What it must be.
        reason: &'static str,
    },
    /// The index ends inside a record's entry.
    #[error("index truncated in record {record} at field {field}")]
    IndexTruncated {
        /// Index of the record.
        record: u64,
        /// The field that does not fit.
        field: &'static str,
    },
    /// The index bytes do not match their CRC-32.
    #[error("index checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    IndexChecksum {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A level is not where the level-major layout puts it (overlapping records, a gap, a
    /// level table out of order, or bytes past the data area).
    #[error(
        "record {record} level {level}: {len} bytes at offset {offset}, expected to start at {expected} (level-major layout)"
    )]
    LevelOutOfPlace {
        /// Index of the record.
        record: u64,
        /// The level.
        level: u8,
        /// Its stored offset.
        offset: u64,
        /// Its stored length.
        len: u64,
        /// Where it should start.
        expected: u64,
    },
    /// A level's bytes do not match their CRC-32.
    #[error("record {record} level {level}: checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    LevelChecksum {
        /// Index of the record.
        record: u64,
        /// The level.
        level: u8,
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A record or level index past the end.
    #[error("record {record} level {level} does not exist (shard has {records} records, {levels} levels)")]
    NoSuchRecord {
        /// Requested record.
        record: u64,
        /// Requested level.
        level: u8,
        /// Records in the shard.
        records: u64,
        /// Levels per record.
        levels: u8,
    },
    /// An error of the shard file `file` (what opening it found).
    #[error("{file}: {error}")]
    File {
        /// The shard's file name.
        file: String,
        /// The error.
        error: Box<ShardError>,
    },
    /// The shard is shorter than a header and a trailer.
    #[error("shard truncated: {len} bytes, at least {min} needed")]
    Truncated {
        /// Bytes present.
        len: u64,
        /// Bytes needed.
        min: u64,
    },
}
