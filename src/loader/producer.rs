//! The loader proper (feature `dataset`): a background thread that walks the plan
//! ([`super::plan`]) for this rank, serves records from the planned cache
//! ([`super::cache`]) or reads them (positional reads, only the payloads the requested level
//! needs, on the loader's own thread pool), decodes and augments each sample on that pool
//! ([`super::augment`]), and hands finished batches through a bounded channel.
//!
//! Memory is bounded by the cache budget + `prefetch_batches` finished batches + the batch
//! being built. Dropping the [`Loader`] stops the thread and joins it, also mid-epoch. A
//! record that cannot be read or decoded is reported with its shard and key and skipped
//! (counted in [`Batch::skipped`]) or fails its batch, by [`OnError`]; it never stalls the
//! loader.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::augment::{Augment, AugmentParams};
use super::cache::{first_and_next_uses, CacheStats, PlannedCache};
use super::options::{LoaderOptions, OnError};
use super::plan::{permutation, rank_steps, steps_per_epoch, worker_share, LoaderState};
use super::tensor::Tensor;
use crate::error::{Error, ParameterError, Result};
use crate::layout::Window;
use crate::progressive::{decode_level_window, level_dims, LevelScheme, StoredLevels};
use crate::shard::Dataset;

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
    /// output type (f32 by default).
    pub data: Tensor,
    /// `[samples, channels, height, width]`.
    pub shape: [usize; 4],
    /// Records that could not be used (with [`OnError::Skip`]).
    pub skipped: Vec<SkippedRecord>,
    /// Resume from this state to continue right after this batch.
    pub state_after: LoaderState,
    /// Stage times of this batch.
    pub times: StageTimes,
    /// The cache's counters so far (cumulative).
    pub cache: CacheStats,
    /// Bytes read from storage for this batch.
    pub bytes_read: u64,
    /// Positional reads made for them (nearby payloads are read together).
    pub read_calls: usize,
}

/// What [`Loader::next_timeout`] found.
#[derive(Debug)]
// Returned by value once per call, like the iterator's `Result<Batch>`: boxing gains nothing.
#[allow(clippy::large_enum_variant)]
pub enum Received {
    /// The next batch, or the error that replaced it (a failed batch, or the loader's thread
    /// dying: [`Error::LoaderThread`] with its panic message).
    Batch(Result<Batch>),
    /// The run ended (`end_epoch` reached, or no step is left for this loader).
    Finished,
    /// Nothing arrived in time; ask again.
    TimedOut,
}

/// The loader: iterate it for batches ([`Iterator`] of `Result<Batch>`); [`Loader::state`] is
/// what to save for an exact resume.
pub struct Loader {
    state: LoaderState,
    rx: Option<Receiver<Result<Batch>>>,
    stop: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
}

impl Loader {
    /// Starts loading `dataset` from `state` (a fresh run: `LoaderState { seed, ..Default }`;
    /// `options.seed` is ignored in favour of `state.seed` when resuming, so pass the saved
    /// state as is).
    ///
    /// The state ([`LoaderState::validate`]) and the options ([`LoaderOptions::validate`])
    /// are checked first, before anything is allocated or started.
    pub fn new(dataset: Arc<Dataset>, options: LoaderOptions, state: LoaderState) -> Result<Self> {
        options.partition.validate()?;
        let (worker, workers) = options.workers;
        if workers == 0 || worker >= workers {
            return Err(ParameterError::InvalidOption {
                name: "workers",
                value: worker as u64,
                reason: "the worker index must be below a worker count of at least 1",
            }
            .into());
        }
        let n = dataset.len();
        if n > u32::MAX as u64 {
            return Err(ParameterError::InvalidOption {
                name: "dataset records",
                value: n,
                reason: "the loader numbers samples with u32",
            }
            .into());
        }
        state.validate(n)?;
        options.validate(n)?;
        let levels = dataset.manifest().levels;
        if options.level.is_some_and(|l| l >= levels) {
            return Err(ParameterError::InvalidOption {
                name: "level",
                value: options.level.unwrap_or(0) as u64,
                reason: "the dataset has fewer levels",
            }
            .into());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads)
            .thread_name(|i| format!("l3-loader-{i}"))
            .build()
            .map_err(|e| Error::Io(std::io::Error::other(e)))?;
        Loader::spawn(state, options.prefetch_batches, move |tx, stop| {
            let mut producer = Producer {
                dataset,
                options,
                pool,
                stop,
                tx,
            };
            producer.run(state);
        })
    }

    /// A loader at `state` whose batches come from `produce` on its own thread, through a
    /// channel of `prefetch` batches (at least 1); `produce` stops when the flag is set or a
    /// send fails.
    fn spawn(
        state: LoaderState,
        prefetch: usize,
        produce: impl FnOnce(SyncSender<Result<Batch>>, Arc<AtomicBool>) + Send + 'static,
    ) -> Result<Self> {
        let (tx, rx) = sync_channel(prefetch.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("l3-loader".into())
                .spawn(move || produce(tx, stop))
                .map_err(Error::Io)?
        };
        Ok(Loader {
            state,
            rx: Some(rx),
            stop,
            worker: Some(worker),
        })
    }

    /// Where the run stands after the last batch this iterator returned.
    pub fn state(&self) -> LoaderState {
        self.state
    }

    /// Waits at most `timeout` for the next batch (for a caller that must stay responsive,
    /// e.g. to signals, while the loader works). A loader whose thread died gives its panic
    /// message once as [`Error::LoaderThread`], then [`Received::Finished`].
    pub fn next_timeout(&mut self, timeout: Duration) -> Received {
        let t = Instant::now();
        let Some(rx) = self.rx.as_ref() else {
            return Received::Finished;
        };
        match rx.recv_timeout(timeout) {
            Ok(batch) => Received::Batch(self.received(batch, t)),
            Err(RecvTimeoutError::Timeout) => Received::TimedOut,
            Err(RecvTimeoutError::Disconnected) => self.finished(),
        }
    }

    fn received(&mut self, mut batch: Result<Batch>, t: Instant) -> Result<Batch> {
        if let Ok(b) = &mut batch {
            b.times.waited = t.elapsed();
            self.state = b.state_after;
        }
        batch
    }

    /// The producer hung up: it finished, or it died (then its panic message, once).
    fn finished(&mut self) -> Received {
        self.rx = None;
        let Some(worker) = self.worker.take() else {
            return Received::Finished;
        };
        match worker.join() {
            Ok(()) => Received::Finished,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                Received::Batch(Err(Error::LoaderThread(format!(
                    "the loader's thread panicked: {message}"
                ))))
            }
        }
    }
}

impl Iterator for Loader {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Result<Batch>> {
        let t = Instant::now();
        let received = match self.rx.as_ref()?.recv() {
            Ok(batch) => Received::Batch(self.received(batch, t)),
            Err(_) => self.finished(),
        };
        match received {
            Received::Batch(b) => Some(b),
            Received::Finished | Received::TimedOut => None,
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Closing the channel wakes a producer blocked on a full channel.
        self.rx.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// A miss to read: its index in the batch, its record in its shard, how many payloads.
type Wanted = (usize, usize, u8);
/// A miss read: its index in the batch and its payloads.
type Fetched = (usize, Result<Payloads>);

/// Largest single read of [`Producer::read_coalesced`].
const MAX_COALESCED_READ: u64 = 8 << 20;

/// A record's payloads for the requested level.
type Payloads = Arc<Vec<Vec<u8>>>;

struct Producer {
    dataset: Arc<Dataset>,
    options: LoaderOptions,
    pool: rayon::ThreadPool,
    stop: Arc<AtomicBool>,
    tx: SyncSender<Result<Batch>>,
}

impl Producer {
    fn level(&self) -> u8 {
        self.options
            .level
            .unwrap_or(self.dataset.manifest().levels - 1)
    }

    fn run(&mut self, start: LoaderState) {
        let n = self.dataset.len();
        let p = self.options.partition;
        let mut cache: PlannedCache<Payloads> =
            PlannedCache::new(self.options.cache_policy, self.options.cache_bytes);
        let mut state = start;
        let (worker, workers) = self.options.workers;
        // Whether a whole epoch gives this loader any step; if not, no epoch after the
        // current one does either, and the run ends after it.
        let later_epochs = worker_share(steps_per_epoch(n, &p), worker, workers) > 0;
        while state.epoch < self.options.end_epoch {
            if self.stop.load(Ordering::Relaxed) || (state.epoch > start.epoch && !later_epochs) {
                return;
            }
            let epoch = state.epoch;
            let perm = permutation(state.seed, state.epoch, n as u32);
            let mine = |steps: Vec<super::plan::StepSlice>| -> Vec<super::plan::StepSlice> {
                steps
                    .into_iter()
                    .skip(worker as usize)
                    .step_by(workers as usize)
                    .collect()
            };
            let steps = mine(rank_steps(n, state.consumed, &p));
            // The plan's horizon for the cache: this epoch's remaining accesses of this rank,
            // then the next epoch's.
            let mut sequence: Vec<u32> = steps
                .iter()
                .flat_map(|s| s.positions(n).map(|pos| perm[pos as usize]))
                .collect();
            let this_epoch = sequence.len();
            if self.options.cache_bytes > 0 && state.epoch + 1 < self.options.end_epoch {
                let next_perm = permutation(state.seed, state.epoch + 1, n as u32);
                for s in mine(rank_steps(n, 0, &p)) {
                    sequence.extend(s.positions(n).map(|pos| next_perm[pos as usize]));
                }
            }
            let (first, next) = first_and_next_uses(&sequence, n as usize);
            cache.rekey(|id| first[id as usize]);
            let mut t = 0usize;
            for step in &steps {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
                let ids = &sequence[t..t + step.len() as usize];
                let after = if step.consumed_after >= n {
                    LoaderState {
                        seed: state.seed,
                        epoch: state.epoch + 1,
                        consumed: 0,
                    }
                } else {
                    LoaderState {
                        consumed: step.consumed_after,
                        ..state
                    }
                };
                let batch = self.batch(&mut cache, ids, t, &next, state, after);
                t += ids.len();
                if self.tx.send(batch).is_err() {
                    return;
                }
                state = after;
            }
            debug_assert_eq!(t, this_epoch);
            // The last step moved the state to the next epoch; with no steps (nothing left, or
            // only a dropped remainder), move it here.
            if state.epoch == epoch {
                state = LoaderState {
                    seed: state.seed,
                    epoch: epoch + 1,
                    consumed: 0,
                };
            }
        }
    }

    /// One batch: cache lookups in plan order, the misses read in parallel, inserted in plan
    /// order, then decode + augment in parallel.
    fn batch(
        &self,
        cache: &mut PlannedCache<Payloads>,
        ids: &[u32],
        t0: usize,
        next: &[u64],
        state: LoaderState,
        after: LoaderState,
    ) -> Result<Batch> {
        let started = Instant::now();
        let mut payloads: Vec<Option<Payloads>> = ids
            .iter()
            .enumerate()
            .map(|(k, &id)| {
                let t = t0 + k;
                cache.get(id, t as u64, next[t]).cloned()
            })
            .collect();
        let read_start = Instant::now();
        let level = self.level();
        let misses: Vec<usize> = (0..ids.len()).filter(|&k| payloads[k].is_none()).collect();
        let (reads, read_calls) = self
            .pool
            .install(|| self.read_coalesced(ids, &misses, level));
        let read = read_start.elapsed();
        let mut bytes_read = 0u64;
        let mut errors: Vec<Option<Error>> = (0..ids.len()).map(|_| None).collect();
        for (k, r) in reads {
            match r {
                Ok(p) => {
                    let bytes: u64 = p.iter().map(|x| x.len() as u64).sum();
                    bytes_read += bytes;
                    let t = t0 + k;
                    cache.insert(ids[k], p.clone(), bytes, t as u64, next[t]);
                    payloads[k] = Some(p);
                }
                Err(e) => errors[k] = Some(e),
            }
        }
        let aug = &self.options.augment;
        let per = aug.output_len();
        let mut out = Batch {
            epoch: state.epoch,
            consumed_before: state.consumed,
            samples: Vec::with_capacity(ids.len()),
            classes: Vec::with_capacity(ids.len()),
            data: Tensor::with_capacity(aug.output, ids.len() * per),
            shape: [
                0,
                aug.channels as usize,
                aug.size.1 as usize,
                aug.size.0 as usize,
            ],
            skipped: Vec::new(),
            state_after: after,
            times: StageTimes {
                read,
                ..StageTimes::default()
            },
            cache: cache.stats(),
            bytes_read,
            read_calls,
        };
        #[cfg(feature = "gpu")]
        if let Some(gpu) = &self.options.gpu {
            return self.gpu_batch(gpu, ids, payloads, errors, started, out);
        }
        // Decode + augment, one sample per task.
        let results: Vec<Result<(Vec<f32>, Duration, Duration)>> = self.pool.install(|| {
            payloads
                .par_iter()
                .zip(errors.par_iter_mut())
                .enumerate()
                .map(|(k, (p, err))| {
                    if let Some(e) = err.take() {
                        return Err(e);
                    }
                    if self.stop.load(Ordering::Relaxed) {
                        return Err(Error::LoaderThread("the loader is stopping".into()));
                    }
                    let p = p.as_ref().expect("read or cached");
                    self.decode_augment(ids[k] as u64, p, level, state.seed, state.epoch, per)
                })
                .collect()
        });
        let assemble = Instant::now();
        for (k, r) in results.into_iter().enumerate() {
            let sample = ids[k] as u64;
            match r {
                Ok((data, decode, augment)) => {
                    out.samples.push(sample);
                    out.classes.push(self.dataset.record(sample)?.class);
                    out.data.extend_from_f32(&data);
                    out.times.decode += decode;
                    out.times.augment += augment;
                }
                Err(e) => self.reject(&mut out, sample, e)?,
            }
        }
        out.shape[0] = out.samples.len();
        out.times.assemble = assemble.elapsed();
        out.times.total = started.elapsed();
        Ok(out)
    }

    /// The GPU path of [`Producer::batch`]: the good samples' payloads decoded as one GPU
    /// batch, augmented by `augment.wgsl`, read back. A record the GPU batch refuses (its
    /// index is in the error) is skipped or fails the batch by [`OnError`], and the batch is
    /// retried without it.
    #[cfg(feature = "gpu")]
    fn gpu_batch(
        &self,
        gpu: &crate::gpu::GpuDecoder,
        ids: &[u32],
        payloads: Vec<Option<Payloads>>,
        mut errors: Vec<Option<Error>>,
        started: Instant,
        mut out: Batch,
    ) -> Result<Batch> {
        // The run's seed and this batch's epoch: the augmentation's parameters depend on them.
        let (seed, epoch) = (out.state_after.seed, out.epoch);
        let aug = &self.options.augment;
        let level = self.level();
        for (k, e) in errors.iter_mut().enumerate() {
            if let Some(e) = e.take() {
                self.reject(&mut out, ids[k] as u64, e)?;
            }
        }
        let mut live: Vec<usize> = (0..ids.len()).filter(|&k| payloads[k].is_some()).collect();
        while !live.is_empty() {
            let t0 = Instant::now();
            let refs: Vec<Vec<&[u8]>> = live
                .iter()
                .map(|&k| {
                    let p = payloads[k].as_ref().expect("live samples have payloads");
                    p.iter().map(|x| x.as_slice()).collect()
                })
                .collect();
            let mut stored = Vec::with_capacity(live.len());
            for (&k, r) in live.iter().zip(&refs) {
                let (s, i) = self.dataset.locate(ids[k] as u64)?;
                stored.push(self.dataset.shards()[s].stored_levels(i, r)?);
            }
            // The crops are chosen before decoding, so only the patches they read are decoded
            // where the level allows (as on the CPU path, `crop_window`).
            let params: Vec<_> = live
                .iter()
                .zip(&stored)
                .map(|(&k, r)| {
                    let (w, h) = level_dims(r.width, r.height, r.level_count, level);
                    aug.params(seed, epoch, ids[k] as u64, w, h)
                })
                .collect();
            let windows: Vec<Option<Window>> = if self.options.crop_window_decode {
                params.iter().map(|p| crop_window(p, aug)).collect()
            } else {
                Vec::new()
            };
            let decoded = match gpu.decode_levels_windows(&stored, level, &windows) {
                Ok(b) => b,
                Err(Error::InBatch { image, error }) if image < live.len() => {
                    let k = live.remove(image);
                    self.reject(&mut out, ids[k] as u64, *error)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let t1 = Instant::now();
            let tensor = super::gpu::augment(gpu, &decoded, &params, aug)?;
            out.data = tensor.read_back()?;
            out.times.decode = t1 - t0;
            out.times.augment = t1.elapsed();
            for &k in &live {
                let sample = ids[k] as u64;
                out.samples.push(sample);
                out.classes.push(self.dataset.record(sample)?.class);
            }
            break;
        }
        out.shape[0] = out.samples.len();
        out.times.total = started.elapsed();
        Ok(out)
    }

    /// The payloads that `level` needs of the samples `ids[k]` for `k` in `misses`, each
    /// CRC-checked: per shard, payloads close in the shard are read together
    /// ([`crate::shard::ShardReader::read_levels_coalesced`]), shards in parallel. Returns
    /// `(k, payloads)` per miss and the number of reads.
    fn read_coalesced(&self, ids: &[u32], misses: &[usize], level: u8) -> (Vec<Fetched>, usize) {
        let mut out = Vec::with_capacity(misses.len());
        // shard -> (miss k, record, payload count)
        let mut by_shard: std::collections::BTreeMap<usize, Vec<Wanted>> = Default::default();
        for &k in misses {
            let located = self.dataset.locate(ids[k] as u64).and_then(|(s, r)| {
                let needed = match self.dataset.shards()[s].record(r)?.scheme {
                    LevelScheme::Flat => 1,
                    LevelScheme::Interlace => level + 1,
                };
                Ok((s, r, needed))
            });
            match located {
                Ok((s, r, needed)) => by_shard.entry(s).or_default().push((k, r, needed)),
                Err(e) => out.push((k, Err(e))),
            }
        }
        let groups: Vec<(usize, Vec<Wanted>)> = by_shard.into_iter().collect();
        let gap = self.options.coalesce_gap;
        let read: Vec<(Vec<Fetched>, usize)> = groups
            .par_iter()
            .map(|(s, samples)| {
                let wanted: Vec<(usize, u8)> = samples
                    .iter()
                    .flat_map(|&(_, r, needed)| (0..needed).map(move |l| (r, l)))
                    .collect();
                let (mut results, calls) = self.dataset.shards()[*s].read_levels_coalesced(
                    &wanted,
                    gap,
                    MAX_COALESCED_READ,
                );
                let mut per_sample = Vec::with_capacity(samples.len());
                let mut at = 0;
                for &(k, _, needed) in samples {
                    let mine: Result<Vec<Vec<u8>>> =
                        results.drain(..needed as usize).collect::<Result<_>>();
                    at += needed as usize;
                    per_sample.push((k, mine.map(Arc::new)));
                }
                debug_assert_eq!(at, wanted.len());
                (per_sample, calls)
            })
            .collect();
        let mut calls = 0;
        for (r, c) in read {
            out.extend(r);
            calls += c;
        }
        (out, calls)
    }

    fn decode_augment(
        &self,
        sample: u64,
        payloads: &[Vec<u8>],
        level: u8,
        seed: u64,
        epoch: u64,
        per: usize,
    ) -> Result<(Vec<f32>, Duration, Duration)> {
        let t0 = Instant::now();
        let (s, r) = self.dataset.locate(sample)?;
        let shard = &self.dataset.shards()[s];
        let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
        let stored: StoredLevels = shard.stored_levels(r, &refs)?;
        // The crop is chosen before decoding, so only the patches it reads are decoded where
        // the level allows.
        let aug = &self.options.augment;
        let (w, h) = level_dims(stored.width, stored.height, stored.level_count, level);
        let params = aug.params(seed, epoch, sample, w, h);
        let window = self
            .options
            .crop_window_decode
            .then(|| crop_window(&params, aug))
            .flatten()
            .unwrap_or(Window::whole(w, h));
        let (columns, rows) = (window.columns, window.rows);
        let image = decode_level_window(&stored, level, columns, rows, &self.options.decode)?;
        let t1 = Instant::now();
        let mut data = vec![0f32; per];
        aug.apply(&image, &params, &mut data)?;
        Ok((data, t1 - t0, t1.elapsed()))
    }

    /// A record that cannot be used: reported in `out.skipped`, or the batch's error, by
    /// [`OnError`].
    fn reject(&self, out: &mut Batch, sample: u64, error: Error) -> Result<()> {
        let (shard, key) = self.name_of(sample);
        if self.options.on_error == OnError::Fail {
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

    fn name_of(&self, sample: u64) -> (String, String) {
        match self.dataset.locate(sample) {
            Ok((s, r)) => (
                self.dataset.manifest().shards[s].file.clone(),
                self.dataset.shards()[s]
                    .record(r)
                    .map(|e| e.key.clone())
                    .unwrap_or_default(),
            ),
            Err(_) => (String::new(), String::new()),
        }
    }
}

/// The pixels of a level image that the augmentation `params` reads: the crop and one pixel
/// around it (the bilinear taps), for the separable path; `None` (the whole image) for the
/// general map (turns, rotation, padding), which may read anywhere.
fn crop_window(params: &AugmentParams, aug: &Augment) -> Option<Window> {
    if params.is_general(aug.padding) {
        return None;
    }
    let (x, y, cw, ch) = params.crop;
    Some(Window {
        columns: x.saturating_sub(1)..x + cw + 1,
        rows: y.saturating_sub(1)..y + ch + 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_batch(consumed: u64) -> Batch {
        Batch {
            epoch: 0,
            consumed_before: consumed,
            samples: Vec::new(),
            classes: Vec::new(),
            data: Tensor::with_capacity(super::super::TensorType::F32, 0),
            shape: [0, 3, 1, 1],
            skipped: Vec::new(),
            state_after: LoaderState {
                seed: 0,
                epoch: 0,
                consumed: consumed + 1,
            },
            times: StageTimes::default(),
            cache: CacheStats::default(),
            bytes_read: 0,
            read_calls: 0,
        }
    }

    /// A producer that panics after one batch: the consumer gets the batch, then the panic's
    /// message as an error (not the end of the run), then the end.
    #[test]
    fn a_dead_producer_is_an_error_with_its_message() {
        let mut loader = Loader::spawn(LoaderState::default(), 1, |tx, _| {
            tx.send(Ok(empty_batch(0))).unwrap();
            panic!("injected failure {}", 42);
        })
        .unwrap();
        assert!(loader.next().unwrap().is_ok());
        let err = loader.next().expect("the panic, not the end").unwrap_err();
        assert!(matches!(err, Error::LoaderThread(_)), "{err}");
        assert!(err.to_string().contains("injected failure 42"), "{err}");
        assert!(loader.next().is_none());
        assert_eq!(loader.state().consumed, 1);
    }

    /// The same through `next_timeout`, and a producer that ends normally is `Finished`.
    #[test]
    fn next_timeout_waits_in_slices_and_reports_the_end() {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let mut loader = Loader::spawn(LoaderState::default(), 1, move |_tx, _| {
            wait.recv().unwrap();
            panic!("static message");
        })
        .unwrap();
        assert!(matches!(
            loader.next_timeout(Duration::from_millis(10)),
            Received::TimedOut
        ));
        go.send(()).unwrap();
        match loader.next_timeout(Duration::from_secs(60)) {
            Received::Batch(Err(e)) => assert!(e.to_string().contains("static message"), "{e}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            loader.next_timeout(Duration::from_millis(1)),
            Received::Finished
        ));
        let mut done = Loader::spawn(LoaderState::default(), 1, |_, _| {}).unwrap();
        assert!(matches!(
            done.next_timeout(Duration::from_secs(60)),
            Received::Finished
        ));
    }
}
