//! Per-stage GPU times: timestamp queries written at the beginning and end of each stage's
//! compute pass, resolved into a buffer, read back with the batch's error flags and summed
//! over the chunks ([`StageTimings`]). Recorded only for timed batches on a device with
//! [`wgpu::Features::TIMESTAMP_QUERY`].

use super::map::{map_read, MapRequest};
use crate::error::{Error, Result};

/// GPU time of each compute stage of one batch, measured with timestamp queries written at
/// the beginning and end of each stage's compute pass, summed over the chunks (submissions)
/// of the batch. See [`super::GpuDecoder::set_timing`] and
/// [`super::GpuDecoder::decode_batch_timed`].
///
/// The times cover the passes only: not the CPU parse, the uploads (`queue.write_buffer`),
/// the error-flag copy, nor the gaps between submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StageTimings {
    /// Nanoseconds of the prefix-sum pass (`prefix_sum.wgsl`, all levels).
    pub prefix_sum_ns: u64,
    /// Nanoseconds of the decode pass (`decode.wgsl` with the output layout's
    /// `shaders/output/*.wgsl`), which also writes the output.
    pub decode_ns: u64,
    /// Chunks (submissions) the sums are over; 0 for an empty batch.
    pub chunks: usize,
}

impl StageTimings {
    /// Nanoseconds of both stages: prefix sum + decode.
    pub fn kernels_ns(&self) -> u64 {
        self.prefix_sum_ns + self.decode_ns
    }
}

/// Timestamp queries per chunk: begin and end of the prefix-sum and decode passes.
pub(crate) const QUERIES_PER_CHUNK: u32 = 4;

/// The resolve and read-back buffers of a timed batch: one 256-byte slot per chunk.
pub(crate) struct TimingBuffers {
    /// Where each chunk's query set is resolved.
    pub resolve: wgpu::Buffer,
    /// The copy of `resolve` that is mapped.
    pub readback: wgpu::Buffer,
}

impl TimingBuffers {
    /// Buffers for `chunks` chunks (none for an empty batch).
    pub fn new(device: &wgpu::Device, chunks: usize) -> Option<Self> {
        if chunks == 0 {
            return None;
        }
        let size = chunks as u64 * wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT;
        let mk = |label, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        Some(TimingBuffers {
            resolve: mk(
                "l3 timestamps",
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            readback: mk(
                "l3 timestamps readback",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
        })
    }

    /// A query set for one chunk.
    pub fn query_set(device: &wgpu::Device) -> wgpu::QuerySet {
        device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("l3 stage timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: QUERIES_PER_CHUNK,
        })
    }
}

/// Where a timed batch's timestamps are read back from.
pub(crate) struct TimingReadback {
    /// `chunks * QUERY_RESOLVE_BUFFER_ALIGNMENT` bytes, chunk `k`'s four u64 ticks at
    /// `k * QUERY_RESOLVE_BUFFER_ALIGNMENT`; `None` for an empty batch.
    pub staging: Option<wgpu::Buffer>,
    pub chunks: usize,
    /// Nanoseconds per tick.
    pub period: f32,
}

impl TimingReadback {
    /// Asks for the map of the timestamps (completes at a later device poll).
    pub fn request(&self) -> Option<MapRequest> {
        self.staging.as_ref().map(|s| map_read(s, 0..s.size()))
    }

    /// The sums, once the map `request` returned has completed.
    pub fn read(&self) -> Result<StageTimings> {
        let mut t = StageTimings {
            chunks: self.chunks,
            ..Default::default()
        };
        let Some(staging) = &self.staging else {
            return Ok(t);
        };
        let ticks: Vec<u64> = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| Error::Gpu(format!("map failed: {e}")))?;
            bytemuck::pod_collect_to_vec(&view[..])
        };
        staging.unmap();
        let stride = (wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT / 8) as usize;
        let ns = |begin: u64, end: u64| ticks_ns(begin, end, self.period);
        for k in 0..self.chunks {
            let q = &ticks[k * stride..k * stride + QUERIES_PER_CHUNK as usize];
            t.prefix_sum_ns += ns(q[0], q[1]);
            t.decode_ns += ns(q[2], q[3]);
        }
        Ok(t)
    }
}

/// Nanoseconds between two timestamps of `period` nanoseconds per tick.
pub(crate) fn ticks_ns(begin: u64, end: u64, period: f32) -> u64 {
    (end.saturating_sub(begin) as f64 * period as f64).round() as u64
}
