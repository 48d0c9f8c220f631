//! The training loader: batches of augmented f32 or f16 NCHW tensors from a dataset of record
//! shards, in a planned global shuffle with exact resume ([`LoaderState`]) and rank and
//! worker partitioning. A `Loader` runs one producer thread; each step of the plan goes
//! through these stages:
//!
//! 1. plan: [`plan`] (the epoch's permutation, this rank's steps), [`ranks`] (which rank
//!    takes which sample of a global batch: slices, or by what every rank's cache holds) and
//!    [`cache`] (compressed records kept by the plan: farthest next use, Belady's rule, or
//!    LRU);
//! 2. read: `read` (the cache misses' payloads for the level, coalesced positional reads);
//! 3. decode and augment: `decode`, on the loader's pool one sample per task (only the
//!    patches of the crop, then [`augment`]'s one pass), or on the GPU as one batch (the
//!    level decode, then `gpu`'s `augment.wgsl` stage);
//! 4. hand-off: `batch` (`Batch`, its `StageTimes`, the `SkippedRecord`s by `OnError`)
//!    through a bounded channel to `consumer` (`Loader`: an iterator that stops and joins the
//!    thread on drop).
//!
//! `producer` runs the loop over the steps; `options` holds `LoaderOptions` and their checks;
//! [`tensor`] the batch values ([`Tensor`], exact f32 to f16 rounding); [`tensor_augment`] the
//! windows of tensor records (crop, flips, quarter turns, normalisation). A tensor dataset
//! (`LoaderDataset::Tensors`) shares the plan, the cache and the hand-off; its records are
//! read, decoded and cut by `tensor_batch` into named arrays (`NamedTensor`), and
//! `tensor_gpu` is their GPU path (the records' arrays decoded and windowed as one batch).
//! The `Loader` and its stages need the `dataset` feature, `gpu` and `tensor_gpu` the `gpu`
//! feature; the plan, the cache, the augmentation and the tensors need neither.

pub mod augment;
#[cfg(feature = "dataset")]
mod batch;
pub mod cache;
#[cfg(feature = "dataset")]
mod consumer;
#[cfg(feature = "dataset")]
mod decode;
#[cfg(feature = "dataset")]
mod disk_cache;
#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(feature = "gpu")]
pub mod handoff;
#[cfg(feature = "dataset")]
mod options;
pub mod plan;
#[cfg(feature = "dataset")]
mod producer;
pub mod ranks;
#[cfg(feature = "dataset")]
mod read;
pub mod reuse;
pub mod tensor;
pub mod tensor_augment;
#[cfg(feature = "dataset")]
mod tensor_batch;
#[cfg(feature = "gpu")]
pub mod tensor_gpu;

pub use augment::{Augment, AugmentParams, RandomResizedCrop};
#[cfg(feature = "dataset")]
pub use batch::{Batch, NamedTensor, SkippedRecord, StageTimes};
pub use cache::{
    epoch_step_ends, first_and_next_uses, next_uses, read_floor, simulate, simulate_after,
    CacheStats, PlannedCache, Policy,
};
#[cfg(feature = "dataset")]
pub use consumer::{Loader, LoaderDataset, Received};
#[cfg(feature = "dataset")]
pub use options::{LoaderOptions, OnError, MAX_LOADER_THREADS};
pub use plan::{
    permutation, rank_steps, steps_per_epoch, worker_share, DropLast, LoaderState, Partition,
    SplitMix64, StepSlice,
};
pub use ranks::{
    simulate_reads, EpochPlan, PlannedStep, RankCaches, RecordWindow, Simulation, Split,
};
pub use reuse::{
    epoch_order, front_for, position_correlation, reuse_order, stratify, ReuseOrders, WINDOW_STRATA,
};
pub use tensor::{Tensor, TensorType};
pub use tensor_augment::{TensorAugment, TensorNorm, TensorWindow};
