//! The consumer's end of the loader (feature `dataset`): [`Loader`] checks the options,
//! starts the producer's thread ([`super::producer`]) and receives its batches through a
//! bounded channel (an [`Iterator`], or [`Loader::next_timeout`]); dropping it stops the
//! thread and joins it, also mid-epoch.
//!
//! Memory is bounded by the cache budget + `prefetch_batches` finished batches + the batch
//! being built. A record that cannot be read or decoded is reported with its shard and key and
//! skipped (counted in [`Batch::skipped`]) or fails its batch, by [`super::OnError`]; it never
//! stalls the loader.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::batch::Batch;
use super::options::LoaderOptions;
use super::plan::LoaderState;
use super::producer::{Producer, Source};
use super::tensor_batch::TensorPlan;
use crate::error::{Error, ParameterError, Result};
use crate::shard::{Dataset, TensorDataset};

/// The dataset a [`Loader`] loads: images, or tensor records (named arrays, cut by
/// [`super::LoaderOptions::tensor`]).
#[derive(Debug, Clone)]
pub enum LoaderDataset {
    /// An image dataset: batches in [`Batch::data`].
    Images(Arc<Dataset>),
    /// A tensor dataset: batches in [`Batch::arrays`].
    Tensors(Arc<TensorDataset>),
}

impl LoaderDataset {
    /// Samples in the dataset: its records, or a windowed tensor dataset's samples.
    pub fn len(&self) -> u64 {
        match self {
            LoaderDataset::Images(d) => d.len(),
            LoaderDataset::Tensors(d) => d.samples(),
        }
    }

    /// Records in the dataset (at least its samples).
    fn records(&self) -> u64 {
        match self {
            LoaderDataset::Images(d) => d.len(),
            LoaderDataset::Tensors(d) => d.len(),
        }
    }

    /// Whether the dataset has no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
        Loader::open(LoaderDataset::Images(dataset), options, state)
    }

    /// Starts loading an image or a tensor dataset from `state`, as [`Loader::new`] does. A
    /// tensor dataset's options are checked against its manifest first (the arrays' spatial
    /// axes against [`LoaderOptions::tensor`], the batch's arrays against the limits); an
    /// image dataset refuses [`LoaderOptions::tensor`].
    pub fn open(
        dataset: LoaderDataset,
        options: LoaderOptions,
        state: LoaderState,
    ) -> Result<Self> {
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
        if dataset.records() > u32::MAX as u64 {
            return Err(ParameterError::InvalidOption {
                name: "dataset records",
                value: dataset.records(),
                reason: "the loader numbers samples with u32",
            }
            .into());
        }
        state.validate(n)?;
        let source = match dataset {
            LoaderDataset::Images(dataset) => {
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
                Source::Images(dataset)
            }
            LoaderDataset::Tensors(dataset) => {
                let plan = TensorPlan::new(&options, dataset.manifest(), n)?;
                Source::Tensors(dataset, plan)
            }
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads)
            .thread_name(|i| format!("l3-loader-{i}"))
            .build()
            .map_err(|e| Error::Io(std::io::Error::other(e)))?;
        let disk = match &options.disk_cache {
            Some((dir, bytes)) if *bytes > 0 => Some(
                super::disk_cache::DiskCache::new(dir, *bytes, options.cache_policy)
                    .map_err(|e| crate::store::named_io(&dir.display().to_string(), e))?,
            ),
            _ => None,
        };
        Loader::spawn(state, options.prefetch_batches, move |tx, stop| {
            let mut producer = Producer::new(source, options, pool, stop, tx, disk);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::batch::StageTimes;
    use crate::loader::cache::CacheStats;
    use crate::loader::tensor::{Tensor, TensorType};

    fn empty_batch(consumed: u64) -> Batch {
        Batch {
            epoch: 0,
            consumed_before: consumed,
            samples: Vec::new(),
            classes: Vec::new(),
            data: Tensor::with_capacity(TensorType::F32, 0),
            shape: [0, 3, 1, 1],
            arrays: Vec::new(),
            windows: Vec::new(),
            skipped: Vec::new(),
            state_after: LoaderState {
                seed: 0,
                epoch: 0,
                consumed: consumed + 1,
            },
            times: StageTimes::default(),
            cache: CacheStats::default(),
            disk_cache: CacheStats::default(),
            bytes_read: 0,
            read_calls: 0,
            #[cfg(feature = "gpu")]
            gpu: None,
            #[cfg(feature = "gpu")]
            gpu_counts: None,
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
