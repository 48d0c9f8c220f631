//! The loader: a planned global shuffle with exact resume and rank partitioning ([`plan`]),
//! a record cache that evicts by the plan (farthest next use, Belady's rule) ([`cache`]).

pub mod augment;
#[cfg(feature = "dataset")]
mod batch;
pub mod cache;
#[cfg(feature = "dataset")]
mod consumer;
#[cfg(feature = "dataset")]
mod decode;
#[cfg(feature = "gpu")]
pub mod gpu;
#[cfg(feature = "dataset")]
mod options;
pub mod plan;
#[cfg(feature = "dataset")]
mod producer;
#[cfg(feature = "dataset")]
mod read;
pub mod tensor;

pub use augment::{Augment, AugmentParams, RandomResizedCrop};
#[cfg(feature = "dataset")]
pub use batch::{Batch, SkippedRecord, StageTimes};
pub use cache::{first_and_next_uses, next_uses, simulate, CacheStats, PlannedCache, Policy};
#[cfg(feature = "dataset")]
pub use consumer::{Loader, Received};
#[cfg(feature = "dataset")]
pub use options::{LoaderOptions, OnError, MAX_LOADER_THREADS};
pub use plan::{
    permutation, rank_steps, steps_per_epoch, worker_share, DropLast, LoaderState, Partition,
    SplitMix64, StepSlice,
};
pub use tensor::{Tensor, TensorType};
