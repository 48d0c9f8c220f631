//! The tensor-window kernel: `shaders/tensor_window.wgsl` dispatched once over a batch of
//! arrays held in up to three source buffers, a [`TensorWindowJob`] per (sample, array) in
//! one job table (`gpu::jobs`), each job reading its array whole and writing its values into
//! one output buffer. The caller plans the jobs ([`WindowTask`]); [`plan`] places them in
//! dispatches (a pure function, run by the tests without a GPU) and [`dispatch`] binds and
//! submits. This file knows only engine types.

use super::abi::{TensorWindowJob, TENSOR_WORKGROUP_SIZE};
use super::bindings::{check_bindings, BindLimits};
use super::device::Kernel;
use super::jobs::{job_workgroups, plan_windows, JobSpan, JobTable};
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::{Error, Result};

/// One job as the caller plans it: the job (all but its offsets and workgroups) and where
/// its array and its values lie.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WindowTask {
    /// The job; [`plan`] fills `src_offset`, `dst_offset`, `wg_base` and `wg_count`.
    pub job: TensorWindowJob,
    /// Byte offset (a multiple of 4) and length of the array in source buffer `job.source`.
    pub src: (u64, u64),
    /// First output value in the output buffer (f32 values, or f16 values where `job.half`).
    pub dst: u64,
}

impl WindowTask {
    /// Byte offset and length of the words its values occupy.
    fn dst_range(&self) -> (u64, u64) {
        let n = self.job.count as u64;
        if self.job.half == 1 {
            let first = self.dst / 2;
            (first * 4, ((self.dst + n).div_ceil(2) - first) * 4)
        } else {
            (self.dst * 4, n * 4)
        }
    }

    /// Work items: values, or words of f16 values.
    fn items(&self) -> u64 {
        self.dst_range().1 / 4
    }
}

/// What the windows of a batch bind, for the binding check and the errors.
const WHAT: [&str; 4] = [
    "tensor source 0",
    "tensor source 1",
    "tensor source 2",
    "tensor batch output",
];

/// Places `tasks` in dispatches for `limits` (see `gpu::jobs`): the job table and each job
/// with its offsets in its dispatch's bindings and its workgroups. A source range that is
/// not word-aligned, or a source other than 0 to 2, is an internal [`Error::Gpu`]; a job
/// whose own ranges cannot be bound is a [`crate::error::LimitsError::GpuBuffer`].
pub(crate) fn plan(
    tasks: &[WindowTask],
    limits: &BindLimits,
) -> Result<(JobTable<4>, Vec<TensorWindowJob>)> {
    if let Some(t) = tasks.iter().find(|t| t.job.source > 2 || t.src.0 % 4 != 0) {
        return Err(Error::Gpu(format!(
            "internal: tensor window source {} at byte {}",
            t.job.source, t.src.0
        )));
    }
    // A job reads one source; in the others it stands at the last range read there (or the
    // first, before any), so that it widens no window's binding.
    let mut cursor = [0u64; 3];
    for (slot, c) in cursor.iter_mut().enumerate() {
        if let Some(t) = tasks.iter().find(|t| t.job.source as usize == slot) {
            *c = t.src.0;
        }
    }
    let spans: Vec<JobSpan<4>> = tasks
        .iter()
        .map(|t| {
            let s = t.job.source as usize;
            cursor[s] = t.src.0;
            let mut ranges = [(0, 0); 4];
            for (slot, r) in ranges.iter_mut().take(3).enumerate() {
                *r = if slot == s { t.src } else { (cursor[slot], 0) };
            }
            ranges[3] = t.dst_range();
            JobSpan {
                ranges,
                workgroups: job_workgroups(t.items(), TENSOR_WORKGROUP_SIZE),
            }
        })
        .collect();
    let table = plan_windows(&spans, size_of::<TensorWindowJob>() as u64, WHAT, limits)?;
    let jobs = tasks
        .iter()
        .zip(&spans)
        .enumerate()
        .map(|(k, (t, span))| {
            let words = table.words[k];
            TensorWindowJob {
                src_offset: words[t.job.source as usize],
                dst_offset: if t.job.half == 1 {
                    words[3] * 2 + (t.dst % 2) as u32
                } else {
                    words[3]
                },
                wg_base: table.wg_base[k],
                wg_count: span.workgroups,
                ..t.job
            }
        })
        .collect();
    Ok((table, jobs))
}

/// Dispatches `tensor_window.wgsl` over `tasks`, job `k` reading from `sources[job.source]`,
/// into a new output buffer of `out_bytes` bytes (usage `STORAGE | COPY_SRC`, zeroed before
/// the jobs write), which it returns with the number of dispatches: one for the batch, more
/// only where a binding limit forces it. Every range is checked against its buffer and
/// `limits` first; a GPU error while submitting is [`Error::Gpu`].
pub(crate) fn dispatch(
    decoder: &GpuDecoder,
    sources: [&wgpu::Buffer; 3],
    tasks: &[WindowTask],
    out_bytes: u64,
    limits: &BindLimits,
) -> Result<(wgpu::Buffer, usize)> {
    let out_len = out_bytes.next_multiple_of(4).max(4);
    let (table, jobs) = plan(tasks, limits)?;
    let lens = [
        sources[0].size(),
        sources[1].size(),
        sources[2].size(),
        out_len,
    ];
    check_bindings(table.bindings(WHAT, lens), limits)?;
    let dispatches = table.windows.iter().filter(|w| w.workgroups > 0).count();
    let kernel = decoder.pipelines.kernel(Kernel::TensorWindow)?;
    decoder.with_error_scopes(|| {
        decoder.count_buffers(1);
        let out = storage_buffer(&decoder.device, "l3 tensor batch", out_len);
        let mut encoder = decoder
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("l3 tensor_window"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 tensor_window"),
                timestamp_writes: None,
            });
            table.encode(
                decoder,
                &mut pass,
                (kernel.entry("tensor_window"), &kernel.bgl),
                &table.table_bytes(&jobs),
                [sources[0], sources[1], sources[2], &out],
            );
        }
        decoder.submit_commands(encoder.finish());
        Ok((out, dispatches))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(source: u32, src: (u64, u64), dst: u64, count: u32, half: u32) -> WindowTask {
        WindowTask {
            job: TensorWindowJob {
                source,
                count,
                half,
                ..Default::default()
            },
            src,
            dst,
        }
    }

    /// Offsets come out relative to each dispatch's bindings; f16 jobs keep their parity;
    /// an unused source does not widen a window; a misaligned source is refused.
    #[test]
    fn plan_places_jobs_in_their_windows() {
        let limits = BindLimits {
            max_binding: 4096,
            max_buffer: 1 << 20,
            storage_align: 256,
        };
        // Raw jobs, then source-2 jobs far away in their buffer: one window, since the
        // source-2 range is bound from its first job only.
        let tasks = [
            task(0, (0, 100), 0, 9, 1),
            task(0, (100, 100), 9, 9, 1),
            task(2, (1 << 19, 400), 18, 9, 1),
        ];
        let (table, jobs) = plan(&tasks, &limits).unwrap();
        assert_eq!(table.windows.len(), 1);
        assert_eq!(table.windows[0].bound[2].0, 1 << 19);
        assert_eq!(
            jobs.iter()
                .map(|j| (j.src_offset, j.dst_offset))
                .collect::<Vec<_>>(),
            [(0, 0), (25, 9), (0, 18)]
        );
        // f32 jobs over 4096 bytes of output: a second window starts its output at 0.
        let tasks = [task(0, (0, 4), 0, 1000, 0), task(0, (0, 4), 1000, 100, 0)];
        let (table, jobs) = plan(&tasks, &limits).unwrap();
        assert_eq!(table.windows.len(), 2);
        assert_eq!(table.windows[1].bound[3].0, 3840);
        assert_eq!(jobs[1].dst_offset, 40);
        assert!(plan(&[task(0, (2, 4), 0, 1, 0)], &limits).is_err());
        assert!(plan(&[task(3, (0, 4), 0, 1, 0)], &limits).is_err());
    }
}
