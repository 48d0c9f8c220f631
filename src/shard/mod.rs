//! Record shards: many images in one file with an index at its end, each image stored as one
//! or more *levels* (up to [`format::MAX_LEVELS`]) laid out level-major, so a loader reads
//! records at known offsets with few large reads, and a prefix of the shard holds every record
//! at a lower resolution (see [`crate::progressive`]).
//!
//! Files: [`mod@format`] is the shard format in code (`SPEC.md`, part "Record shards"): header,
//! index, trailer and all their validation. [`ShardWriter`] writes a shard atomically
//! (`atomic`: temp file, fsync, rename); [`ShardReader`] reads one with bounded positional
//! reads, trusting nothing in it. With feature `dataset`: a dataset is a folder of shards and
//! a `manifest.json` ([`Manifest`]), read as one [`Dataset`]; [`pack`] encodes and verifies
//! records and writes shards that a rerun resumes (`l3 pack`, Python's `l3.pack`).
//!
//! Tensor records (`SPEC.md`, part "Tensor records"; [`crate::tensor`]) are version 2
//! shards: [`mod@tensor_format`] is their index in code, `tensor_io` their writer and reader
//! ([`TensorShardWriter`], [`TensorShardReader`]); with feature `dataset`, `tensor_dataset`
//! ([`TensorManifest`], [`TensorDataset`]) and [`tensor_pack`] ([`tensor_pack::TensorPacker`]).
//! `open` opens a dataset of either kind from one read of its manifest ([`AnyDataset`]).

#[cfg(feature = "dataset")]
mod copy;
#[cfg(feature = "dataset")]
mod dataset;
pub mod format;
#[cfg(feature = "dataset")]
mod manifest;
#[cfg(feature = "dataset")]
mod open;
#[cfg(feature = "dataset")]
pub mod pack;
mod reader;
#[cfg(feature = "dataset")]
mod tensor_dataset;
pub mod tensor_format;
mod tensor_io;
#[cfg(feature = "dataset")]
pub mod tensor_pack;
mod writer;

pub use crate::store::atomic::{
    remove_stale_temps, write_atomic, write_atomic_with, PendingWrite, TEMP_MARKER,
};
#[cfg(feature = "dataset")]
pub use copy::{copy_dataset, CopyReport};
#[cfg(feature = "dataset")]
pub use dataset::{Dataset, OpenTimes};
pub use format::{Index, LevelEntry, RecordEntry, RecordRef};
#[cfg(feature = "dataset")]
pub use manifest::{
    dataset_kind, dataset_kind_in, file_crc32, Manifest, ShardInfo, MANIFEST_NAME,
    MANIFEST_VERSION, TENSOR_KIND,
};
#[cfg(feature = "dataset")]
pub use open::{AnyDataset, AnyManifest};
pub use reader::{ShardPrefix, ShardReader};
#[cfg(feature = "dataset")]
pub use tensor_dataset::{
    ArrayDecl, ArrayStats, TensorDataset, TensorManifest, TensorShardInfo, TENSOR_MANIFEST_VERSION,
};
pub use tensor_format::{ArrayEntry, PayloadEntry, RecordKind, TensorEntry};
pub use tensor_io::{RecordPayloads, TensorRecordInput, TensorShardReader, TensorShardWriter};
pub use writer::{RecordInput, ShardWriter};

pub use crate::error::ShardError;
