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

pub use crate::error::ShardError;
