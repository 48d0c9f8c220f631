//! What the producer hands to the consumer (feature `dataset`): one [`Batch`] per step, with
//! its [`StageTimes`], its [`NamedTensor`]s for a tensor dataset, and the records left out of
//! it ([`SkippedRecord`], by [`OnError`]: [`reject`]).

use std::time::Duration;

use super::cache::CacheStats;
use super::options::OnError;
use super::plan::LoaderState;
use super::tensor::Tensor;
use super::tensor_augment::TensorWindow;
use crate::error::{Error, Result};
use crate::shard::{Dataset, TensorDataset};

/// One array of a tensor dataset's batch: the array's name, its shape with the samples
/// first, and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// The array's name (the manifest's).
    pub name: String,
    /// `[samples, ...]`: the array's output shape ([`super::TensorAugment::output_shape`],
    /// or its whole shape without windows) after the sample count.
    pub shape: Vec<usize>,
    /// The values, C order, of the output type.
    pub tensor: Tensor,
}

/// A record left out of its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedRecord {
    /// Dataset index.
    pub sample: u64,
    /// Shard file.
    pub shard: String,
    /// Record key.
    pub key: String,
    /// What went wrong.
    pub error: String,
}

/// Time spent per stage on one batch (CPU time summed over the pool's threads for decode and
/// augment; wall time for the reads).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimes {
    /// Planning the epoch before its first batch (wall): the permutation, this loader's
    /// steps and the cache's horizon. Zero on the epoch's other batches.
    pub plan: Duration,
    /// Reading the cache misses (wall).
    pub read: Duration,
    /// Decoding (summed over samples).
    pub decode: Duration,
    /// Augmenting (summed over samples).
    pub augment: Duration,
    /// Hand-off: assembling the batch tensor from the samples (wall; for the GPU path, the
    /// tensor's read-back is in `augment`).
    pub assemble: Duration,
    /// The whole batch, from its first lookup to its hand-off (wall).
    pub total: Duration,
    /// How long the consumer waited in `Loader::next` for this batch (wall): zero when the
    /// loader is ahead of the training loop.
    pub waited: Duration,
}

/// One batch of this rank.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The epoch.
    pub epoch: u64,
    /// Samples of the epoch consumed before this global step.
    pub consumed_before: u64,
    /// Dataset indices, in tensor order (skipped ones left out).
    pub samples: Vec<u64>,
    /// Class of each sample.
    pub classes: Vec<Option<u32>>,
    /// `samples.len() x channels x height x width` values, normalised, of the augmentation's
    /// output type (f32 by default). Empty for a tensor dataset (see `arrays`).
    pub data: Tensor,
    /// `[samples, channels, height, width]`; `[samples, 0, 0, 0]` for a tensor dataset.
    pub shape: [usize; 4],
    /// A tensor dataset's arrays, one per declared array in the manifest's order; empty for
    /// an image dataset.
    pub arrays: Vec<NamedTensor>,
    /// A tensor dataset's window of each sample, in `samples` order, where
    /// [`super::LoaderOptions::tensor`] is set; empty otherwise.
    pub windows: Vec<TensorWindow>,
    /// Records that could not be used (with [`OnError::Skip`]).
    pub skipped: Vec<SkippedRecord>,
    /// Resume from this state to continue right after this batch.
    pub state_after: LoaderState,
    /// Stage times of this batch.
    pub times: StageTimes,
    /// The cache's counters so far (cumulative).
    pub cache: CacheStats,
    /// The disk tier's counters so far (cumulative; zero without one): its lookups are the RAM
    /// cache's misses.
    pub disk_cache: CacheStats,
    /// Bytes read from storage for this batch.
    pub bytes_read: u64,
    /// Positional reads made for them (nearby payloads are read together).
    pub read_calls: usize,
    /// The GPU path's tensors when [`super::LoaderOptions::gpu_output`] leaves them staged
    /// or on the GPU (`data` and `arrays` are then empty); `None` otherwise, and for a batch
    /// without samples (a tensor dataset's then has empty `arrays`).
    #[cfg(feature = "gpu")]
    pub gpu: Option<std::sync::Arc<super::handoff::GpuHandOff>>,
    /// What a tensor dataset's GPU batch moved and ran (uploads, decodes, dispatches);
    /// `None` on the CPU path, for images, and for a batch without samples.
    #[cfg(feature = "gpu")]
    pub gpu_counts: Option<super::tensor_gpu::TensorGpuCounts>,
}

/// A dataset whose records have a shard file and a key.
pub(super) trait Named {
    /// The shard file and the key of `sample` (empty where it has none).
    fn name_of(&self, sample: u64) -> (String, String);
}

impl Named for TensorDataset {
    fn name_of(&self, sample: u64) -> (String, String) {
        TensorDataset::name_of(self, sample)
    }
}

impl Named for Dataset {
    fn name_of(&self, sample: u64) -> (String, String) {
        name_of(self, sample)
    }
}

/// A record of `dataset` that cannot be used: reported in `out.skipped`, or the batch's
/// error, by `on_error`.
pub(super) fn reject(
    dataset: &impl Named,
    on_error: OnError,
    out: &mut Batch,
    sample: u64,
    error: Error,
) -> Result<()> {
    let (shard, key) = dataset.name_of(sample);
    if on_error == OnError::Fail {
        return Err(Error::Record {
            sample,
            shard,
            key,
            error: Box::new(error),
        });
    }
    out.skipped.push(SkippedRecord {
        sample,
        shard,
        key,
        error: error.to_string(),
    });
    Ok(())
}

/// The shard file and the key of `sample` (empty where it has none).
fn name_of(dataset: &Dataset, sample: u64) -> (String, String) {
    match dataset.locate(sample) {
        Ok((s, r)) => (
            dataset.manifest().shards[s].file.clone(),
            dataset.shards()[s]
                .entry(r)
                .map(|e| e.key.to_owned())
                .unwrap_or_default(),
        ),
        Err(_) => (String::new(), String::new()),
    }
}
