//! Loader options ([`LoaderOptions`], [`OnError`]) and their checks: every value a caller
//! (or a hostile Python call) can pass is validated before the loader starts.

#[cfg(feature = "gpu")]
use std::sync::Arc;

use super::augment::Augment;
use super::cache::Policy;
use super::plan::{steps_per_epoch, DropLast, Partition};
use super::ranks::Split;
use super::tensor::TensorType;
use super::tensor_augment::TensorAugment;
use crate::decode::DecodeOptions;
use crate::error::{LimitsError, ParameterError, Result};

/// Most threads of the loader's pool, and most batches kept ready ahead (each option's upper
/// bound: a larger value is a parameter error, not an attempt to spawn or reserve that many).
pub const MAX_LOADER_THREADS: usize = 1024;

/// What to do with a record that cannot be read or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Leave it out of its batch and report it in [`super::Batch::skipped`] (default).
    #[default]
    Skip,
    /// Fail the batch with the record's error (shard and key named).
    Fail,
}

/// Loader options. `LoaderOptions::new(partition)` gives the documented defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoaderOptions {
    /// The run's seed (default 0).
    pub seed: u64,
    /// Batch size, world size, rank, last-batch policy.
    pub partition: Partition,
    /// Level to read (default: the full resolution, the dataset's last level).
    pub level: Option<u8>,
    /// The augmentation pipeline (default: [`Augment::default`], 224 x 224 ImageNet). Images
    /// only: a tensor dataset ignores it.
    pub augment: Augment,
    /// The windows of a tensor dataset's records (default `None`: whole arrays, no flips, no
    /// normalisation, f32 out). Tensor datasets only: an image dataset refuses it. Every
    /// record holds the manifest's arrays with the manifest's shapes (checked when the
    /// dataset opens), so a batch's arrays always stack; a record that differs is a bad
    /// record (`on_error`).
    pub tensor: Option<TensorAugment>,
    /// Host memory for compressed records, bytes (default 0: no cache).
    pub cache_bytes: u64,
    /// Eviction policy (default [`Policy::Planned`]), of both tiers.
    pub cache_policy: Policy,
    /// Split each global batch among the ranks by what their caches hold (SOLAR's partition,
    /// [`super::ranks`]) where the loader has a RAM cache (`cache_bytes > 0`) and more than
    /// one rank (default true), unless that cache holds the whole dataset (then the slices,
    /// which end with every rank holding everything): the global batches and each epoch's
    /// coverage are the same as without it, only which rank takes which sample changes.
    /// Every rank of a run must have
    /// the same cache size, policy, workers and `max_imbalance`. False: rank `r` takes the
    /// `r`-th slice of each global batch.
    pub locality: bool,
    /// With `locality`: most samples a rank's batch may differ from `batch_size` (SOLAR's
    /// trade-off: fewer reads for a slightly uneven split); default `None`, `batch_size / 8`
    /// (rounded down). `Some(0)` keeps every batch exactly `batch_size`, moving the few
    /// samples that must move to a rank that does not hold them (2-8 % more reads in
    /// BENCHMARKS.md). At most `batch_size`; a batch has at least one sample where its slice
    /// has one. Where each rank's mean gradient is averaged (DDP), a sample of an uneven batch
    /// weighs up to `max_imbalance / batch_size` more or less: pass 0 where that matters.
    pub max_imbalance: Option<u32>,
    /// The reuse order ([`super::reuse`], issue 47): each epoch's order is its permutation
    /// with the `reuse_front` samples the previous epoch read last moved to the front (in the
    /// permutation's relative order), so what the caches hold at an epoch's end is read
    /// first in the next. Default 0: the plain permutation. Part of the run's identity, like
    /// the seed: resume with the same value (any world size, batch size or cache). Where the
    /// caches' union holds a share `f` of the dataset, `front_for` gives `f x n`; the cost is
    /// a correlation of about `-3 f (1 - f)` between consecutive epochs' positions.
    pub reuse_front: u32,
    /// The stratified order ([`super::reuse`]): each epoch's permutation reordered so that
    /// each of `strata` contiguous ranges of sample ids is spread evenly over the epoch, so
    /// that with the locality split every global batch holds about each rank's share of the
    /// samples whose records it keeps. Default `None`: [`super::WINDOW_STRATA`] (64) for a
    /// windowed tensor dataset (its samples' home ranks make a plain permutation's batches
    /// uneven: BENCHMARKS.md, "Ranks"), 0 (the plain permutation) otherwise. Part of the
    /// run's identity, like the seed: resume with the same value (any world size, batch size
    /// or cache).
    pub strata: Option<u32>,
    /// A disk tier below the RAM cache, for datasets in object stores: `(folder, bytes)`
    /// (default `None`). Records go to files in a new folder of this loader's own under
    /// `folder`, at most `bytes` of them, kept by the same plan; the folder is removed when
    /// the loader ends.
    pub disk_cache: Option<(std::path::PathBuf, u64)>,
    /// Finished batches kept ready ahead of the consumer (default 2).
    pub prefetch_batches: usize,
    /// Threads of the loader's pool (default 0: one per core).
    pub threads: usize,
    /// Bad records (default [`OnError::Skip`]).
    pub on_error: OnError,
    /// Stop before this epoch (default `u64::MAX`: run until dropped).
    pub end_epoch: u64,
    /// Decoder options (default: checksums verified, one thread per image).
    pub decode: DecodeOptions,
    /// Payloads of one shard at most this many bytes apart are read with one positional read
    /// (default 64 KiB; reads stay below 8 MiB). 0 still merges adjacent payloads.
    pub coalesce_gap: u64,
    /// Which of this rank's steps this loader produces (default: all): with `workers = (w,
    /// count)`, the steps `w, w + count, w + 2 count, ...` of each epoch (counted from the
    /// state the loader starts at). For loaders running side by side in a rank's data-loading
    /// workers whose batches are taken round-robin (PyTorch's `DataLoader` does so): then the
    /// k-th batch the rank's consumer gets is the rank's k-th step, and its `state_after` is
    /// exact for resuming.
    pub workers: (u32, u32),
    /// Decode only the patches each random crop reads, down to its last row, where the level
    /// is stored as is (default true; the output is the same either way, this is for
    /// measuring the saving).
    pub crop_window_decode: bool,
    /// Decode and augment on this GPU instead of the CPU pool (default `None`): each batch's
    /// payloads as one GPU batch (`progressive::gpu::decode_levels_windows`), then
    /// `augment.wgsl` (`loader::gpu`); the tensor is handed off by `gpu_output`. Equal to the
    /// CPU path within float tolerance (the GPU tests state it). A tensor dataset's batches
    /// are decoded and windowed as one GPU batch (`loader::tensor_gpu::window_batch`), bit
    /// for bit the CPU path's, and handed off by `gpu_output` too; it refuses 64-bit
    /// arrays.
    #[cfg(feature = "gpu")]
    pub gpu: Option<Arc<crate::gpu::GpuDecoder>>,
    /// With `gpu`: read the batch back into [`super::Batch::data`] (images) or
    /// [`super::Batch::arrays`] (tensors) (default), or leave it staged or on the GPU in
    /// [`super::Batch::gpu`] for the consumer to copy where it wants.
    #[cfg(feature = "gpu")]
    pub gpu_output: super::handoff::GpuOutput,
}

impl LoaderOptions {
    /// The defaults with this partition.
    pub fn new(partition: Partition) -> Self {
        LoaderOptions {
            seed: 0,
            partition,
            level: None,
            augment: Augment::default(),
            tensor: None,
            cache_bytes: 0,
            cache_policy: Policy::Planned,
            locality: true,
            max_imbalance: None,
            reuse_front: 0,
            strata: None,
            disk_cache: None,
            prefetch_batches: 2,
            threads: 0,
            on_error: OnError::Skip,
            end_epoch: u64::MAX,
            decode: DecodeOptions {
                parallel: false,
                ..DecodeOptions::default()
            },
            crop_window_decode: true,
            workers: (0, 1),
            coalesce_gap: 64 << 10,
            #[cfg(feature = "gpu")]
            gpu: None,
            #[cfg(feature = "gpu")]
            gpu_output: super::handoff::GpuOutput::ReadBack,
        }
    }

    /// Checks the options against an image dataset of `n` records: a partition that gives
    /// this rank no step in any epoch (no records, or [`DropLast::Drop`] with fewer records
    /// than a global batch), more than [`MAX_LOADER_THREADS`] threads or prefetched batches,
    /// tensor windows (`tensor`), augmentation values out of range ([`Augment::validate`]),
    /// and a batch tensor above `decode.limits.max_output_bytes` are errors.
    pub fn validate(&self, n: u64) -> Result<()> {
        self.validate_common(n)?;
        if self.tensor.is_some() {
            return Err(ParameterError::InvalidOption {
                name: "tensor",
                value: 1,
                reason: "tensor windows apply to a tensor dataset; this dataset holds images",
            }
            .into());
        }
        let limits = self.decode.limits;
        self.augment.validate(limits.max_dimension)?;
        let element = match self.augment.output {
            TensorType::F32 => 4,
            TensorType::F16 => 2,
        };
        let batch_bytes = (self.augment.output_len() as u64)
            .checked_mul(self.batch_samples(n))
            .and_then(|v| v.checked_mul(element))
            .unwrap_or(u64::MAX);
        self.check_batch_bytes(batch_bytes)
    }

    /// Most samples of one batch of a dataset of `n` records: `batch_size` with
    /// [`DropLast::Pad`], else at most the dataset; plus the imbalance the split allows.
    pub(super) fn batch_samples(&self, n: u64) -> u64 {
        let b = self.partition.batch_size as u64;
        let slack = match self.split() {
            Split::Locality { max_imbalance } => max_imbalance as u64,
            Split::Slices => 0,
        };
        match self.partition.drop_last {
            DropLast::Pad => b + slack,
            _ => (b + slack).min(n),
        }
    }

    /// How each global batch is split among the ranks: by locality where `locality` is set,
    /// with a RAM cache and more than one rank; else in slices.
    pub fn split(&self) -> Split {
        let p = &self.partition;
        if self.locality && self.cache_bytes > 0 && p.world_size > 1 {
            Split::Locality {
                max_imbalance: self.max_imbalance.unwrap_or(p.batch_size / 8),
            }
        } else {
            Split::Slices
        }
    }

    /// The strata of each epoch's order: `strata`, or by default [`super::WINDOW_STRATA`]
    /// over a windowed dataset and 0 (the plain permutation) otherwise.
    pub fn strata_for(&self, windowed: bool) -> u32 {
        self.strata
            .unwrap_or(if windowed { super::WINDOW_STRATA } else { 0 })
    }

    /// A batch's tensors of `bytes` in all must fit `decode.limits.max_output_bytes`.
    pub(super) fn check_batch_bytes(&self, bytes: u64) -> Result<()> {
        let max = self.decode.limits.max_output_bytes;
        if bytes > max.min(isize::MAX as u64) {
            return Err(LimitsError::OutputBytes { needed: bytes, max }.into());
        }
        Ok(())
    }

    /// The checks of every dataset kind: the partition, the threads and the prefetch.
    pub(super) fn validate_common(&self, n: u64) -> Result<()> {
        if steps_per_epoch(n, &self.partition) == 0 {
            return Err(ParameterError::InvalidOption {
                name: "batch_size",
                value: self.partition.batch_size as u64,
                reason: "no epoch gives this rank a step: the dataset has no records, or \
                         drop_last drops every batch (fewer records than batch_size x world_size)",
            }
            .into());
        }
        if let Some(m) = self.max_imbalance {
            if m > self.partition.batch_size {
                return Err(ParameterError::InvalidOption {
                    name: "max_imbalance",
                    value: m as u64,
                    reason: "at most batch_size",
                }
                .into());
            }
        }
        if self.threads > MAX_LOADER_THREADS {
            return Err(ParameterError::InvalidOption {
                name: "threads",
                value: self.threads as u64,
                reason: "at most 1024",
            }
            .into());
        }
        if self.prefetch_batches > MAX_LOADER_THREADS {
            return Err(ParameterError::InvalidOption {
                name: "prefetch_batches",
                value: self.prefetch_batches as u64,
                reason: "at most 1024",
            }
            .into());
        }
        Ok(())
    }
}
