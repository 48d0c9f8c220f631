//! The loader: a planned global shuffle with exact resume and rank partitioning ([`plan`]),
//! a record cache that evicts by the plan (farthest next use, Belady's rule) ([`cache`]).

pub mod augment;
pub mod cache;
pub mod plan;

pub use augment::{Augment, AugmentParams, RandomResizedCrop};
pub use cache::{simulate, CacheStats, PlannedCache, Policy};
pub use plan::{permutation, rank_steps, DropLast, LoaderState, Partition, SplitMix64, StepSlice};
