//! The engine's host-side work, counted: what a batch asks of the device (submissions,
//! dispatches, bind groups, buffers created, read-backs, bytes uploaded). `Context::counts`
//! (in `decoder.rs`, with the counted wrappers) reads them; the difference across a batch is its host cost (`examples/kernel_budget.rs`
//! prints it per batch, on any adapter).

use std::sync::atomic::{AtomicU64, Ordering};

/// Running totals of a `Context`'s host-side work (atomic: batches run from several threads).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) submissions: AtomicU64,
    pub(crate) dispatches: AtomicU64,
    pub(crate) bind_groups: AtomicU64,
    pub(crate) buffers: AtomicU64,
    pub(crate) readbacks: AtomicU64,
    pub(crate) upload_bytes: AtomicU64,
}

/// A snapshot of a `Context`'s counters (`Context::counts`); subtract two for what
/// happened between them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Command buffers submitted to the queue.
    pub submissions: u64,
    /// Compute dispatches recorded.
    pub dispatches: u64,
    /// Bind groups created.
    pub bind_groups: u64,
    /// GPU buffers created (scratch growth, per-batch outputs, flags and staging).
    pub buffers: u64,
    /// Copies into a buffer the host maps to read (error flags, outputs, timestamps).
    pub readbacks: u64,
    /// Bytes written to GPU buffers with `queue.write_buffer`.
    pub upload_bytes: u64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, o: Counts) -> Counts {
        Counts {
            submissions: self.submissions - o.submissions,
            dispatches: self.dispatches - o.dispatches,
            bind_groups: self.bind_groups - o.bind_groups,
            buffers: self.buffers - o.buffers,
            readbacks: self.readbacks - o.readbacks,
            upload_bytes: self.upload_bytes - o.upload_bytes,
        }
    }
}

impl Counters {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The totals so far.
    pub(crate) fn snapshot(&self) -> Counts {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counts {
            submissions: get(&self.submissions),
            dispatches: get(&self.dispatches),
            bind_groups: get(&self.bind_groups),
            buffers: get(&self.buffers),
            readbacks: get(&self.readbacks),
            upload_bytes: get(&self.upload_bytes),
        }
    }
}
