//! The loader's producer (feature `dataset`): the background thread's loop over the plan
//! ([`super::plan`]) for this rank and worker, and one batch per step through the stages:
//! plan lookups in the planned cache ([`super::cache`]), the misses read ([`super::read`],
//! or [`super::tensor_batch`] for tensor records) and inserted, the samples decoded and
//! augmented on the loader's pool or on the GPU ([`super::decode`]; tensor records:
//! [`super::tensor_batch`], on the pool or on the GPU), and the finished [`Batch`] handed off through the bounded
//! channel that [`super::Loader`] receives from. The plan, the cache and the hand-off are the
//! same for both kinds of records. The thread stops when the stop flag is set or the channel
//! is closed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;

use super::batch::{reject, Batch, StageTimes};
use super::cache::PlannedCache;
use super::decode::Decode;
use super::disk_cache::DiskCache;
use super::options::LoaderOptions;
use super::plan::{steps_per_epoch, worker_share, LoaderState};
use super::ranks::{slices_epoch_over, EpochInput, PlannedStep, RankCaches, RecordWindow, Split};
use super::read::{read_coalesced, record_bytes, Payloads};
use super::reuse::ReuseOrders;
use super::tensor::Tensor;
use super::tensor_batch::{read_records, sample_inputs, tensor_record_bytes, TensorPlan};
use crate::error::{Error, Result};
use crate::shard::{Dataset, TensorDataset};

/// The records a producer loads: an image dataset, or a tensor dataset with the plan of its
/// batches' arrays.
pub(super) enum Source {
    /// Images.
    Images(Arc<Dataset>),
    /// Tensor records.
    Tensors(Arc<TensorDataset>, TensorPlan),
}

impl Source {
    /// Samples in the dataset (a windowed tensor dataset's samples, else its records).
    fn len(&self) -> u64 {
        match self {
            Source::Images(d) => d.len(),
            Source::Tensors(d, _) => d.samples(),
        }
    }

    /// A windowed tensor dataset's window over its records (`None`: a sample is a record).
    fn window(&self) -> Option<RecordWindow> {
        let Source::Tensors(d, _) = self else {
            return None;
        };
        let w = d.manifest().window.as_ref()?;
        let mut offsets: Vec<u32> = w.arrays.iter().map(|a| a.offset as u32).collect();
        offsets.sort_unstable();
        offsets.dedup();
        Some(RecordWindow {
            offsets,
            records: d.len() as u32,
        })
    }
}

/// The producer's thread state: the dataset, the options, the loader's pool, the stop flag
/// and the channel's sending end.
pub(super) struct Producer {
    source: Source,
    options: LoaderOptions,
    pool: rayon::ThreadPool,
    stop: Arc<AtomicBool>,
    tx: SyncSender<Result<Batch>>,
    /// The disk tier below the RAM cache, if any.
    disk: Option<std::cell::RefCell<DiskCache>>,
}

impl Producer {
    /// A producer of `dataset`'s batches by `options`, decoding on `pool`, sending to `tx`
    /// until `stop` is set.
    pub(super) fn new(
        source: Source,
        options: LoaderOptions,
        pool: rayon::ThreadPool,
        stop: Arc<AtomicBool>,
        tx: SyncSender<Result<Batch>>,
        disk: Option<DiskCache>,
    ) -> Self {
        Producer {
            source,
            options,
            pool,
            stop,
            tx,
            disk: disk.map(std::cell::RefCell::new),
        }
    }

    /// The level read (images; 0 for tensor records, which have none).
    fn level(&self) -> u8 {
        match &self.source {
            Source::Images(d) => self.options.level.unwrap_or(d.manifest().levels - 1),
            Source::Tensors(..) => 0,
        }
    }

    /// Bytes of each record as the cache counts it (for the locality split's simulation).
    fn record_sizes(&self) -> Vec<u64> {
        match &self.source {
            Source::Images(d) => record_bytes(d, self.level()),
            Source::Tensors(d, _) => tensor_record_bytes(d),
        }
    }

    /// Produces the batches from `start` to the end epoch (or until stopped).
    pub(super) fn run(&mut self, start: LoaderState) {
        let n = self.source.len();
        let window = self.source.window();
        let p = self.options.partition;
        let mut cache: PlannedCache<Payloads> =
            PlannedCache::new(self.options.cache_policy, self.options.cache_bytes);
        let mut state = start;
        let workers = self.options.workers;
        // Whether a whole epoch gives this loader any step; if not, no epoch after the
        // current one does either, and the run ends after it.
        let later_epochs = worker_share(steps_per_epoch(n, &p), workers.0, workers.1) > 0;
        let cached = self.options.cache_bytes > 0 || self.disk.is_some();
        // With the locality split, every rank's cache simulated from this run's start; where
        // one rank's cache holds the whole dataset the slices read less (every rank ends up
        // holding everything; the split keeps a record's copies past the first as spares, in
        // free room only), and every rank sees so.
        let mut ranks = match self.options.split() {
            Split::Locality { max_imbalance } => {
                let sizes = self.record_sizes();
                let whole = self.options.cache_bytes >= sizes.iter().sum::<u64>();
                (!whole).then(|| {
                    RankCaches::new(
                        p.world_size,
                        self.options.cache_policy,
                        self.options.cache_bytes,
                        sizes,
                        max_imbalance,
                    )
                    .over(window.clone())
                })
            }
            Split::Slices => None,
        };
        // Each epoch's order ([`super::reuse`]: the permutation, stratified where `strata` is
        // not 0; the reuse order where `reuse_front` is not 0).
        let mut orders = ReuseOrders::new(state.seed, n as u32, self.options.reuse_front)
            .stratified(self.options.strata_for(window.is_some()));
        // The next epoch's permutation, made for the cache's horizon: kept for that epoch.
        let mut ahead: Option<(u64, Vec<u32>)> = None;
        while state.epoch < self.options.end_epoch {
            if self.stop.load(Ordering::Relaxed) || (state.epoch > start.epoch && !later_epochs) {
                return;
            }
            let epoch = state.epoch;
            let plan_start = Instant::now();
            // With a cache, the next epoch's permutation too (its horizon), made beside this
            // one on the pool.
            let with_next = cached && state.epoch + 1 < self.options.end_epoch;
            let (perm, next_perm) = match ahead.take() {
                // The reuse order: each epoch from the last (made in turn, kept by `orders`).
                _ if !orders.is_plain() => {
                    let perm = orders.order(epoch);
                    (perm, with_next.then(|| orders.order(epoch + 1)))
                }
                Some((e, perm)) if e == epoch => {
                    let next = with_next.then(|| orders.base(epoch + 1));
                    (perm, next)
                }
                _ => {
                    let orders = &orders;
                    self.pool.install(|| {
                        rayon::join(
                            || orders.base(epoch),
                            || with_next.then(|| orders.base(epoch + 1)),
                        )
                    })
                }
            };
            // This rank's steps and the cache's horizon: this epoch's remaining accesses,
            // then the next epoch's.
            let input = EpochInput {
                perm: &perm,
                next_perm: next_perm.as_deref(),
                consumed: state.consumed,
            };
            let plan = match &mut ranks {
                Some(ranks) => ranks
                    .epoch(input, &p, workers, Some(p.rank))
                    .swap_remove(p.rank as usize),
                None => slices_epoch_over(input, &p, workers, window.as_ref()),
            };
            if let Some(next_perm) = next_perm {
                ahead = Some((epoch + 1, next_perm));
            }
            if cached {
                cache.rekey(|id| plan.first[id as usize]);
                if let Some(disk) = &self.disk {
                    disk.borrow_mut().rekey(|id| plan.first[id as usize]);
                }
            }
            let mut planned = Some(plan_start.elapsed());
            for step in &plan.steps {
                if self.stop.load(Ordering::Relaxed) {
                    return;
                }
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
                let mut batch = self.batch(&mut cache, step, state, after);
                let planned = planned.take().unwrap_or_default();
                if let Ok(b) = &mut batch {
                    b.times.plan = planned;
                }
                if self.tx.send(batch).is_err() {
                    return;
                }
                state = after;
            }
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
    /// order (as [`super::ranks`] simulates them), then decode + augment in parallel (or on
    /// the GPU), then the hand-off's tensor. The cache and the reads see the step's records
    /// ([`PlannedStep::accesses`]: the samples, or a windowed dataset's records, each once).
    fn batch(
        &self,
        cache: &mut PlannedCache<Payloads>,
        step: &PlannedStep,
        state: LoaderState,
        after: LoaderState,
    ) -> Result<Batch> {
        let started = Instant::now();
        let ids = step.accesses();
        let mut payloads: Vec<Option<Payloads>> = ids
            .iter()
            .enumerate()
            .map(|(k, &id)| cache.get(id, step.times[k], step.keys[k]).cloned())
            .collect();
        let misses: Vec<usize> = (0..ids.len()).filter(|&k| payloads[k].is_none()).collect();
        let read_start = Instant::now();
        let level = self.level();
        // RAM misses from the disk tier.
        if let Some(disk) = &self.disk {
            let mut disk = disk.borrow_mut();
            for &k in &misses {
                payloads[k] = disk.get(ids[k], step.times[k], step.keys[k]);
            }
        }
        let unread: Vec<usize> = misses
            .iter()
            .copied()
            .filter(|&k| payloads[k].is_none())
            .collect();
        let gap = self.options.coalesce_gap;
        let (reads, read_calls) = match &self.source {
            Source::Images(d) => self
                .pool
                .install(|| read_coalesced(d, ids, &unread, level, gap)),
            Source::Tensors(d, _) => self.pool.install(|| read_records(d, ids, &unread, gap)),
        };
        let read = read_start.elapsed();
        let mut bytes_read = 0u64;
        let mut errors: Vec<Option<Error>> = (0..ids.len()).map(|_| None).collect();
        for (k, r) in reads {
            match r {
                Ok(p) => {
                    bytes_read += p.iter().map(|x| x.len() as u64).sum::<u64>();
                    if let Some(disk) = &self.disk {
                        disk.borrow_mut()
                            .insert(ids[k], &p, step.times[k], step.keys[k]);
                    }
                    payloads[k] = Some(p);
                }
                Err(e) => errors[k] = Some(e),
            }
        }
        // The RAM misses offered to the RAM cache in plan order (from the disk tier or read).
        for &k in &misses {
            if let Some(p) = &payloads[k] {
                let bytes = p.iter().map(|x| x.len() as u64).sum();
                cache.insert(ids[k], p.clone(), bytes, step.times[k], step.keys[k]);
            }
        }
        let aug = &self.options.augment;
        let per = aug.output_len();
        let mut out = Batch {
            epoch: state.epoch,
            consumed_before: state.consumed,
            samples: Vec::with_capacity(ids.len()),
            classes: Vec::with_capacity(ids.len()),
            data: Tensor::with_capacity(aug.output, 0),
            shape: [
                0,
                aug.channels as usize,
                aug.size.1 as usize,
                aug.size.0 as usize,
            ],
            arrays: Vec::new(),
            windows: Vec::new(),
            skipped: Vec::new(),
            state_after: after,
            times: StageTimes {
                read,
                ..StageTimes::default()
            },
            cache: cache.stats(),
            disk_cache: self
                .disk
                .as_ref()
                .map_or_else(Default::default, |d| d.borrow().stats()),
            bytes_read,
            read_calls,
            #[cfg(feature = "gpu")]
            gpu: None,
            #[cfg(feature = "gpu")]
            gpu_counts: None,
        };
        let dataset = match &self.source {
            Source::Images(d) => d,
            Source::Tensors(d, plan) => {
                let (inputs, errors) = sample_inputs(d, &step.ids, ids, payloads, errors);
                return self.tensor_batch(d, plan, &step.ids, &inputs, errors, out, started);
            }
        };
        let decode = Decode {
            dataset,
            options: &self.options,
            level,
            seed: state.seed,
            epoch: state.epoch,
        };
        #[cfg(feature = "gpu")]
        if let Some(gpu) = &self.options.gpu {
            decode.on_gpu(gpu, ids, payloads, errors, &mut out)?;
            out.shape[0] = out.samples.len();
            out.times.total = started.elapsed();
            return Ok(out);
        }
        // Decode + augment, one sample per task, each into its slot of the batch tensor.
        out.data = Tensor::zeroed(aug.output, ids.len() * per);
        let results = decode.on_cpu(
            &self.pool,
            &self.stop,
            ids,
            &payloads,
            &mut errors,
            per,
            &mut out.data,
        );
        // Hand-off: the good samples' slots closed up over the failed ones' (none moves when
        // every sample decoded).
        let assemble = Instant::now();
        let mut kept = 0;
        for (k, r) in results.into_iter().enumerate() {
            let sample = ids[k] as u64;
            match r {
                Ok((decode, augment)) => {
                    if kept != k {
                        out.data.move_slot(k, kept, per);
                    }
                    kept += 1;
                    out.samples.push(sample);
                    out.classes.push(dataset.entry(sample)?.class);
                    out.times.decode += decode;
                    out.times.augment += augment;
                }
                Err(e) => reject(&**dataset, self.options.on_error, &mut out, sample, e)?,
            }
        }
        out.data.truncate(kept * per);
        out.shape[0] = out.samples.len();
        out.times.assemble = assemble.elapsed();
        out.times.total = started.elapsed();
        Ok(out)
    }

    /// The rest of a tensor dataset's batch: decode and cut on the pool into the plan's
    /// arrays, then the hand-off (the good samples' slots closed up over the failed ones');
    /// or, with the GPU, `TensorPlan::on_gpu` (one batch, read back).
    #[allow(clippy::too_many_arguments)]
    fn tensor_batch(
        &self,
        dataset: &TensorDataset,
        plan: &TensorPlan,
        ids: &[u32],
        payloads: &[Option<super::tensor_batch::SampleInput>],
        mut errors: Vec<Option<Error>>,
        mut out: Batch,
        started: Instant,
    ) -> Result<Batch> {
        out.shape = [0; 4];
        out.data = Tensor::with_capacity(plan.output(), 0);
        #[cfg(feature = "gpu")]
        if let Some(gpu) = &self.options.gpu {
            let (decode, read_back) = plan.on_gpu(
                gpu,
                dataset,
                &self.options,
                (out.state_after.seed, out.epoch),
                ids,
                payloads,
                errors,
                &mut out,
            )?;
            out.times.decode = decode;
            out.times.augment = read_back;
            out.shape[0] = out.samples.len();
            out.times.total = started.elapsed();
            return Ok(out);
        }
        out.arrays = plan.zeroed(ids.len());
        let results = plan.on_cpu(
            &self.pool,
            &self.stop,
            dataset,
            &self.options,
            (out.state_after.seed, out.epoch),
            ids,
            payloads,
            &mut errors,
            &mut out.arrays,
        );
        let assemble = Instant::now();
        let mut kept = 0;
        for (k, r) in results.into_iter().enumerate() {
            let sample = ids[k] as u64;
            match r {
                Ok((decode, cut, window)) => {
                    if kept != k {
                        for (t, a) in out.arrays.iter_mut().zip(&plan.arrays) {
                            t.tensor.move_slot(k, kept, a.per);
                        }
                    }
                    kept += 1;
                    out.samples.push(sample);
                    out.classes
                        .push(super::tensor_batch::class_of(dataset, sample)?);
                    out.windows.extend(window);
                    out.times.decode += decode;
                    out.times.augment += cut;
                }
                Err(e) => reject(dataset, self.options.on_error, &mut out, sample, e)?,
            }
        }
        for (t, a) in out.arrays.iter_mut().zip(&plan.arrays) {
            t.tensor.truncate(kept * a.per);
            t.shape[0] = kept;
        }
        out.shape[0] = kept;
        out.times.assemble = assemble.elapsed();
        out.times.total = started.elapsed();
        Ok(out)
    }
}
