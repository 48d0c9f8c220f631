//! Job tables: the data-side kernels (`augment.wgsl`, `fields.wgsl`, `levels.wgsl`,
//! `tensor_window.wgsl`) take a whole batch in one dispatch. The batch's jobs go up as one
//! table in a storage buffer; each workgroup finds its job by binary search over the jobs'
//! first workgroups (`wg_base`) and its invocations loop over the job's items with the stride
//! of the job's workgroups (`shaders/shared/jobs.wgsl`: `find_job`, `job_invocation`).
//!
//! [`plan_windows`] groups consecutive jobs into dispatches ([`Window`]s). Each dispatch
//! binds one range of each of the stage's buffers, so a new dispatch starts only where the
//! device forces it: a range that would outgrow a storage binding, a table that would, or more
//! workgroups than a 2-D grid of WebGPU's guaranteed 65535 per dimension numbers. It is a pure
//! function of the jobs' byte ranges and [`BindLimits`], tested without a GPU;
//! [`JobTable::encode`] uploads the table and records the dispatches.

use std::ops::Range;

use super::bindings::{BindLimits, Binding};
use crate::error::{LimitsError, Result};

/// Workgroups per dimension every WebGPU device allows (`max_compute_workgroups_per_dimension`
/// is at least this): a window's 2-D grid stays within it on any device.
pub(crate) const MAX_GRID_DIM: u64 = 65535;

/// Work items an invocation takes at least (the job's last workgroup may have fewer), so
/// that finding the job is paid once per [`ITEMS_PER_INVOCATION`] items.
pub(crate) const ITEMS_PER_INVOCATION: u64 = 8;

/// Workgroups a job of `items` work items takes in a kernel of `workgroup` invocations that
/// loops with the stride of its job's workgroups: none for an empty job, else one per
/// [`ITEMS_PER_INVOCATION`] items per invocation, capped at [`MAX_GRID_DIM`] (the
/// invocations loop over the rest).
pub(crate) fn job_workgroups(items: u64, workgroup: u32) -> u32 {
    if items == 0 {
        0
    } else {
        items
            .div_ceil(workgroup as u64 * ITEMS_PER_INVOCATION)
            .min(MAX_GRID_DIM) as u32
    }
}

/// What one job touches and how much work it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobSpan<const N: usize> {
    /// Byte offset and length of what the job reads or writes in each of the stage's `N`
    /// buffers (offsets multiples of 4; an empty range counts as 4 bytes).
    pub ranges: [(u64, u64); N],
    /// Its workgroups ([`job_workgroups`]).
    pub workgroups: u32,
}

/// One dispatch: consecutive jobs and the range of each buffer it binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window<const N: usize> {
    /// Its jobs.
    pub jobs: Range<usize>,
    /// Byte offset (a multiple of the storage alignment) and size (a multiple of 4) bound
    /// from each buffer: every job's range lies inside.
    pub bound: [(u64, u64); N],
    /// Byte offset of its first job in the table (a multiple of the storage alignment).
    pub table_offset: u64,
    /// Its workgroups: the sum of its jobs'.
    pub workgroups: u64,
}

impl<const N: usize> Window<N> {
    /// The 2-D grid that numbers its workgroups: `(x, y)` with `x * y >= workgroups`.
    pub(crate) fn grid(&self, max_dim: u32) -> (u32, u32) {
        let x = self.workgroups.min(max_dim.max(1) as u64).max(1);
        (x as u32, self.workgroups.div_ceil(x) as u32)
    }
}

/// Where each job of a batch goes: its dispatch, its first workgroup there and its word
/// offsets in the ranges its dispatch binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobTable<const N: usize> {
    /// The dispatches, in job order.
    pub windows: Vec<Window<N>>,
    /// Per job: the first workgroup, counted from its window's first.
    pub wg_base: Vec<u32>,
    /// Per job: the word offset of its range in each buffer, counted from its window's bound
    /// range.
    pub words: Vec<[u32; N]>,
    /// Bytes of one job in the table.
    pub job_size: u64,
    /// Bytes of the table (at least 4).
    pub table_len: u64,
}

/// Splits `spans` into dispatches (see the module docs) for jobs of `job_size` bytes in the
/// table. A job whose own range cannot be bound (larger than a binding once aligned) is a
/// [`LimitsError::GpuBuffer`] naming `what[slot]`; so is a table the buffer limit cannot hold.
pub(crate) fn plan_windows<const N: usize>(
    spans: &[JobSpan<N>],
    job_size: u64,
    what: [&'static str; N],
    limits: &BindLimits,
) -> Result<JobTable<N>> {
    let align = limits.storage_align.max(4);
    let max_binding = limits.max_binding;
    let max_workgroups = (MAX_GRID_DIM * MAX_GRID_DIM).min(u32::MAX as u64);
    let max_jobs = (max_binding / job_size.max(1)).max(1);
    let extent = |(offset, len): (u64, u64)| {
        let lo = offset / align * align;
        (lo, offset.saturating_add(len.max(4)).next_multiple_of(4))
    };
    let mut windows: Vec<Window<N>> = Vec::new();
    let mut open: Option<Window<N>> = None;
    for (k, span) in spans.iter().enumerate() {
        let mut own = [(0u64, 0u64); N];
        for (slot, &range) in span.ranges.iter().enumerate() {
            let (lo, hi) = extent(range);
            if hi - lo > max_binding {
                return Err(LimitsError::GpuBuffer {
                    what: what[slot],
                    needed: hi - lo,
                    max: max_binding,
                }
                .into());
            }
            own[slot] = (lo, hi);
        }
        let joined = open.as_ref().and_then(|w| {
            let mut bound = w.bound;
            for (b, &(lo, hi)) in bound.iter_mut().zip(&own) {
                let (start, end) = (b.0.min(lo), (b.0 + b.1).max(hi));
                if end - start > max_binding {
                    return None;
                }
                *b = (start, end - start);
            }
            let workgroups = w.workgroups + span.workgroups as u64;
            let jobs = w.jobs.start..k + 1;
            (workgroups <= max_workgroups && jobs.len() as u64 <= max_jobs).then_some(Window {
                jobs,
                bound,
                table_offset: 0,
                workgroups,
            })
        });
        open = Some(match joined {
            Some(w) => w,
            None => {
                windows.extend(open.take());
                Window {
                    jobs: k..k + 1,
                    bound: own.map(|(lo, hi)| (lo, hi - lo)),
                    table_offset: 0,
                    workgroups: span.workgroups as u64,
                }
            }
        });
    }
    windows.extend(open);
    let mut table_len = 0u64;
    let mut wg_base = Vec::with_capacity(spans.len());
    let mut words = Vec::with_capacity(spans.len());
    for w in &mut windows {
        w.table_offset = table_len.next_multiple_of(align);
        table_len = w.table_offset + w.jobs.len() as u64 * job_size;
        let mut base = 0u64;
        for span in &spans[w.jobs.clone()] {
            wg_base.push(base as u32);
            base += span.workgroups as u64;
            let mut at = [0u32; N];
            for (slot, a) in at.iter_mut().enumerate() {
                *a = ((span.ranges[slot].0 - w.bound[slot].0) / 4) as u32;
            }
            words.push(at);
        }
    }
    let table_len = table_len.max(4);
    if table_len > limits.max_buffer {
        return Err(LimitsError::GpuBuffer {
            what: "job table",
            needed: table_len,
            max: limits.max_buffer,
        }
        .into());
    }
    Ok(JobTable {
        windows,
        wg_base,
        words,
        job_size,
        table_len,
    })
}

impl<const N: usize> JobTable<N> {
    /// Every range the dispatches bind, for `check_bindings`: each window's table range and
    /// its range of each buffer (`buffer_len[slot]` bytes).
    pub(crate) fn bindings(
        &self,
        what: [&'static str; N],
        buffer_len: [u64; N],
    ) -> impl Iterator<Item = Binding> + '_ {
        self.windows.iter().flat_map(move |w| {
            let table = Binding {
                what: "job table",
                buffer_len: self.table_len,
                offset: w.table_offset,
                size: w.jobs.len() as u64 * self.job_size,
                copy: false,
            };
            let ranges = (0..N).map(move |slot| Binding {
                what: what[slot],
                buffer_len: buffer_len[slot],
                offset: w.bound[slot].0,
                size: w.bound[slot].1,
                copy: false,
            });
            std::iter::once(table).chain(ranges)
        })
    }

    /// The table's bytes: each window's jobs (`jobs`, one per span, [`Self::job_size`] bytes
    /// each) at its offset.
    pub(crate) fn table_bytes<T: bytemuck::Pod>(&self, jobs: &[T]) -> Vec<u8> {
        debug_assert_eq!(size_of::<T>() as u64, self.job_size);
        let mut bytes = vec![0u8; self.table_len as usize];
        for w in &self.windows {
            let at = w.table_offset as usize;
            let src: &[u8] = bytemuck::cast_slice(&jobs[w.jobs.clone()]);
            bytes[at..at + src.len()].copy_from_slice(src);
        }
        bytes
    }
}

impl<const N: usize> JobTable<N> {
    /// Uploads the table (its bytes from [`Self::table_bytes`]) and records one dispatch of
    /// `pipeline` per window into `pass`: binding 0 the window's jobs, bindings `1..=N` its
    /// range of `buffers[slot]`. Windows without workgroups (only empty jobs) dispatch nothing.
    pub(crate) fn encode(
        &self,
        decoder: &super::GpuDecoder,
        pass: &mut wgpu::ComputePass<'_>,
        pipeline: (&wgpu::ComputePipeline, &wgpu::BindGroupLayout),
        table: &[u8],
        buffers: [&wgpu::Buffer; N],
    ) {
        use super::device::range;
        if self.windows.iter().all(|w| w.workgroups == 0) {
            return;
        }
        decoder.count_buffers(1);
        let jobs = super::upload::storage_buffer(&decoder.device, "l3 job table", self.table_len);
        decoder.upload(&jobs, 0, table);
        let max_dim = decoder.device.limits().max_compute_workgroups_per_dimension;
        pass.set_pipeline(pipeline.0);
        for w in self.windows.iter().filter(|w| w.workgroups > 0) {
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: range(&jobs, w.table_offset, w.jobs.len() as u64 * self.job_size),
            }];
            for (slot, buffer) in buffers.iter().enumerate() {
                entries.push(wgpu::BindGroupEntry {
                    binding: slot as u32 + 1,
                    resource: range(buffer, w.bound[slot].0, w.bound[slot].1),
                });
            }
            let group = decoder.bind_group(&wgpu::BindGroupDescriptor {
                label: Some("l3 job window"),
                layout: pipeline.1,
                entries: &entries,
            });
            let (x, y) = w.grid(max_dim);
            pass.set_bind_group(0, &group, &[]);
            decoder.count_dispatches(1);
            pass.dispatch_workgroups(x, y, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BindLimits = BindLimits {
        max_binding: 1 << 12,
        max_buffer: 1 << 20,
        storage_align: 256,
    };

    fn span(src: (u64, u64), dst: (u64, u64), workgroups: u32) -> JobSpan<2> {
        JobSpan {
            ranges: [src, dst],
            workgroups,
        }
    }

    /// Every job lies inside its window's ranges at its word offsets, windows cover the jobs
    /// in order, and every bound range passes the binding check.
    fn check(spans: &[JobSpan<2>], t: &JobTable<2>, buffer_len: [u64; 2]) {
        let mut next = 0;
        for w in &t.windows {
            assert_eq!(w.jobs.start, next);
            next = w.jobs.end;
            let mut base = 0u64;
            for k in w.jobs.clone() {
                assert_eq!(t.wg_base[k] as u64, base);
                base += spans[k].workgroups as u64;
                for slot in 0..2 {
                    let (offset, len) = spans[k].ranges[slot];
                    let (lo, size) = w.bound[slot];
                    assert_eq!(lo + t.words[k][slot] as u64 * 4, offset);
                    assert!(offset + len.max(4) <= lo + size, "job {k} slot {slot}");
                }
            }
            assert_eq!(base, w.workgroups);
            let (x, y) = w.grid(65535);
            assert!(x as u64 * y as u64 >= w.workgroups && y as u64 <= MAX_GRID_DIM);
        }
        assert_eq!(next, spans.len());
        crate::gpu::bindings::check_bindings(t.bindings(["src", "dst"], buffer_len), &LIMITS)
            .unwrap();
    }

    #[test]
    fn a_batch_that_fits_is_one_dispatch() {
        // 256 jobs of mixed sizes, one of them empty: one window, whatever the batch size.
        let spans: Vec<_> = (0..256u64)
            .map(|k| span((k * 8, 8), (k * 4, 4), (k % 5) as u32))
            .collect();
        let t = plan_windows(&spans, 16, ["src", "dst"], &LIMITS).unwrap();
        assert_eq!(t.windows.len(), 1);
        assert_eq!(t.windows[0].bound, [(0, 2048), (0, 1024)]);
        check(&spans, &t, [2048, 1024]);
        let one = plan_windows(&spans[..1], 16, ["src", "dst"], &LIMITS).unwrap();
        assert_eq!(one.windows.len(), 1);
        assert_eq!(one.windows[0].workgroups, 0);
    }

    #[test]
    fn windows_split_only_where_a_binding_would_overflow() {
        // Sources of 1000 bytes every 1024: four fit a 4096-byte binding.
        let spans: Vec<_> = (0..10u64)
            .map(|k| span((k * 1024, 1000), (k * 12, 12), 3))
            .collect();
        let t = plan_windows(&spans, 16, ["src", "dst"], &LIMITS).unwrap();
        let jobs: Vec<_> = t.windows.iter().map(|w| w.jobs.clone()).collect();
        assert_eq!(jobs, [0..4, 4..8, 8..10]);
        // The second window's destination starts at an aligned offset below its first job.
        assert_eq!(t.windows[1].bound[1].0, 0);
        assert_eq!(t.words[4], [0, 12]);
        check(&spans, &t, [10 * 1024, 120]);
        // The table: each window's jobs start on the storage alignment.
        assert_eq!(
            t.windows.iter().map(|w| w.table_offset).collect::<Vec<_>>(),
            [0, 256, 512]
        );
        assert_eq!(t.table_len, 512 + 2 * 16);
    }

    #[test]
    fn tables_larger_than_a_binding_split_and_unbindable_jobs_are_refused() {
        // 300 jobs of 16 bytes: 256 fit a 4096-byte table binding.
        let spans: Vec<_> = (0..300u64).map(|k| span((0, 4), (k * 4, 4), 1)).collect();
        let t = plan_windows(&spans, 16, ["src", "dst"], &LIMITS).unwrap();
        assert_eq!(t.windows.len(), 2);
        check(&spans, &t, [4, 1200]);
        for bad in [(0, 4097), (4, 4094)] {
            let e = plan_windows(&[span(bad, (0, 4), 1)], 16, ["src", "dst"], &LIMITS);
            assert!(
                matches!(
                    e,
                    Err(crate::Error::Limits(LimitsError::GpuBuffer {
                        what: "src",
                        ..
                    }))
                ),
                "{bad:?}: {e:?}"
            );
        }
        assert_eq!(
            plan_windows::<2>(&[], 16, ["src", "dst"], &LIMITS)
                .unwrap()
                .windows,
            []
        );
    }

    #[test]
    fn job_workgroups_are_bounded() {
        assert_eq!(job_workgroups(0, 64), 0);
        assert_eq!(job_workgroups(1, 64), 1);
        assert_eq!(job_workgroups(64 * ITEMS_PER_INVOCATION, 64), 1);
        assert_eq!(job_workgroups(64 * ITEMS_PER_INVOCATION + 1, 64), 2);
        assert_eq!(job_workgroups(u32::MAX as u64, 64), 65535);
    }

    #[test]
    fn windows_split_at_the_grid_limit() {
        // Jobs of 65535 workgroups: 65537 of them exceed 65535 x 65535 (and u32).
        let spans: Vec<_> = (0..65_537u64)
            .map(|_| span((0, 4), (0, 4), 65535))
            .collect();
        let limits = BindLimits {
            max_binding: 1 << 30,
            max_buffer: 1 << 32,
            ..LIMITS
        };
        let t = plan_windows(&spans, 16, ["src", "dst"], &limits).unwrap();
        let jobs: Vec<_> = t.windows.iter().map(|w| w.jobs.clone()).collect();
        assert_eq!(jobs, [0..65_535, 65_535..65_537]);
        assert!(t.windows[0].workgroups <= u32::MAX as u64);
    }
}
