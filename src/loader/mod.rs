//! The loader: a planned global shuffle with exact resume and rank partitioning ([`plan`]),
//! a record cache that evicts by the plan (farthest next use, Belady's rule) ([`cache`]).

pub mod augment;
#[cfg(feature = "dataset")]
mod producer;
pub mod cache;
#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(feature = "dataset")]
mod options;
pub mod plan;
pub mod tensor;

pub use augment::{Augment, AugmentParams, RandomResizedCrop};
#[cfg(feature = "dataset")]
pub use producer::{Batch, Loader, Received, SkippedRecord, StageTimes};
pub use cache::{first_and_next_uses, next_uses, simulate, CacheStats, PlannedCache, Policy};
#[cfg(feature = "dataset")]
pub use options::{LoaderOptions, OnError, MAX_LOADER_THREADS};
pub use plan::{
    permutation, rank_steps, steps_per_epoch, worker_share, DropLast, LoaderState, Partition,
    SplitMix64, StepSlice,
};
pub use tensor::{Tensor, TensorType};
