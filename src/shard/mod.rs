//! Record shards: many records in one file with an index at its end, read with few large
//! positional reads. An image record is stored as one or more *levels* (up to
//! [`format::MAX_LEVELS`]) laid out level-major, so a prefix of the shard holds every record
//! at a lower resolution (see [`crate::progressive`]); a tensor record is a set of named
//! arrays (`SPEC.md`, part "Tensor records"; [`crate::tensor`]).
//!
//! One of each concept, the record kind plugged in:
//! - the format: [`mod@format`] (header, trailer, image index; `SPEC.md` "Record shards") and
//!   [`mod@tensor_format`] (the tensor index, version 2 shards), all validation in code;
//! - the reader: [`Shard`] (`file`) opens a shard of either kind with bounded, checked
//!   positional reads; its [`ShardIndex`] is the kind: [`ShardReader`] =
//!   `Shard<ImageIndex>` (`reader`), [`TensorShardReader`] = `Shard<TensorIndex>`
//!   (`tensor_io`, with [`TensorShardWriter`]); [`ShardWriter`] writes image shards; every
//!   write is atomic (`atomic`: temp file, fsync, rename);
//! - with feature `dataset`, the dataset: [`DatasetOf`] opens the shards a
//!   [`DatasetManifest`] lists and checks each against it: [`Dataset`] (a [`Manifest`] of
//!   images), [`TensorDataset`] (a [`TensorManifest`]); `open` opens either kind from one
//!   read of its manifest ([`AnyDataset`]); [`pack`] and [`tensor_pack`] write datasets that
//!   a rerun resumes (`l3 pack`, Python's `l3.pack`), [`tree`] plans an image folder's pack.

#[cfg(feature = "dataset")]
mod copy;
#[cfg(feature = "dataset")]
mod dataset;
mod file;
pub mod format;
#[cfg(feature = "dataset")]
mod manifest;
#[cfg(feature = "dataset")]
mod open;
#[cfg(feature = "dataset")]
pub mod pack;
mod reader;
#[cfg(feature = "dataset")]
mod sample_window;
#[cfg(feature = "dataset")]
mod tensor_dataset;
pub mod tensor_format;
mod tensor_io;
#[cfg(feature = "dataset")]
pub mod tensor_pack;
#[cfg(feature = "dataset")]
pub mod tree;
mod writer;

pub use crate::store::atomic::{
    remove_stale_temps, write_atomic, write_atomic_with, PendingWrite, TEMP_MARKER,
};
#[cfg(feature = "dataset")]
pub use copy::{copy_dataset, CopyReport};
#[cfg(feature = "dataset")]
pub use dataset::{Dataset, DatasetManifest, DatasetOf, OpenTimes, ShardEntry};
pub use file::{Shard, ShardIndex};
pub use format::{Index, LevelEntry, RecordEntry, RecordRef};
#[cfg(feature = "dataset")]
pub use manifest::{
    dataset_kind, dataset_kind_in, file_crc32, Manifest, ShardInfo, MANIFEST_NAME,
    MANIFEST_VERSION, TENSOR_KIND,
};
#[cfg(feature = "dataset")]
pub use open::{AnyDataset, AnyManifest};
pub use reader::{ImageIndex, ShardPrefix, ShardReader};
#[cfg(feature = "dataset")]
pub use sample_window::{SamplePart, SampleWindow, WindowArray, TENSOR_WINDOW_VERSION};
#[cfg(feature = "dataset")]
pub use tensor_dataset::{
    ArrayDecl, ArrayStats, TensorDataset, TensorManifest, TensorShardInfo, TENSOR_MANIFEST_VERSION,
};
pub use tensor_format::{ArrayEntry, PayloadEntry, RecordKind, TensorEntry};
pub use tensor_io::{
    RecordPayloads, TensorIndex, TensorRecordInput, TensorShardReader, TensorShardWriter,
};
pub use writer::{RecordInput, ShardWriter};

pub use crate::error::ShardError;
