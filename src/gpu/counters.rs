//! The engine's host-side work, counted: what a batch asks of the device (submissions,
//! dispatches, bind groups, buffers created, read-backs, bytes uploaded). [`Context::counts`]
//! reads them; the difference across a batch is its host cost (`examples/kernel_budget.rs`
//! prints it per batch, on any adapter).

use std::sync::atomic::{AtomicU64, Ordering};

use super::Context;

/// Running totals of a [`Context`]'s host-side work (atomic: batches run from several threads).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    submissions: AtomicU64,
    dispatches: AtomicU64,
    bind_groups: AtomicU64,
    buffers: AtomicU64,
    readbacks: AtomicU64,
    upload_bytes: AtomicU64,
}

/// A snapshot of a [`Context`]'s counters ([`Context::counts`]); subtract two for what
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
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

impl Context {
    /// What this context has asked of its device so far ([`Counts`]).
    pub fn counts(&self) -> Counts {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Counts {
            submissions: get(&c.submissions),
            dispatches: get(&c.dispatches),
            bind_groups: get(&c.bind_groups),
            buffers: get(&c.buffers),
            readbacks: get(&c.readbacks),
            upload_bytes: get(&c.upload_bytes),
        }
    }

    /// Submits `commands` to the queue, counted.
    pub(crate) fn submit_commands(&self, commands: wgpu::CommandBuffer) -> wgpu::SubmissionIndex {
        Counters::add(&self.counters.submissions, 1);
        self.queue.submit([commands])
    }

    /// `queue.write_buffer`, counted.
    pub(crate) fn upload(&self, buffer: &wgpu::Buffer, offset: u64, data: &[u8]) {
        Counters::add(&self.counters.upload_bytes, data.len() as u64);
        self.queue.write_buffer(buffer, offset, data);
    }

    /// A bind group, counted.
    pub(crate) fn bind_group(&self, desc: &wgpu::BindGroupDescriptor<'_>) -> wgpu::BindGroup {
        Counters::add(&self.counters.bind_groups, 1);
        self.device.create_bind_group(desc)
    }

    /// `size` bytes at `offset` of `buffer`, read back through a new staging buffer
    /// (blocking), counted: a buffer, a submission, a read-back.
    pub(crate) fn read_back(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> crate::error::Result<Vec<u8>> {
        self.count_buffers(1);
        self.count_readbacks(1);
        Counters::add(&self.counters.submissions, 1);
        super::readback::read_buffer(&self.device, &self.queue, buffer, offset, size)
    }

    /// Counts `n` compute dispatches recorded.
    pub(crate) fn count_dispatches(&self, n: u64) {
        Counters::add(&self.counters.dispatches, n);
    }

    /// Counts `n` GPU buffers created.
    pub(crate) fn count_buffers(&self, n: u64) {
        Counters::add(&self.counters.buffers, n);
    }

    /// Counts `n` copies into host-mapped buffers.
    pub(crate) fn count_readbacks(&self, n: u64) {
        Counters::add(&self.counters.readbacks, n);
    }
}
