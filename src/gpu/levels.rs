//! The levels kernel: `shaders/levels.wgsl` over payloads already decoded in a [`GpuBatch`],
//! step by step, as a [`LevelSteps`] lists them: `refine` jobs (intermediate levels
//! ping-pong between two scratch buffers so no dispatch reads the buffer it writes),
//! `subsample` jobs and buffer copies. Each step's jobs of one entry point go up as one job
//! table (`gpu::jobs`) and run as one dispatch for the batch, more only where a binding limit
//! forces it. The caller plans the steps; this file checks every range, then binds and
//! dispatches.

use super::abi::{LevelJob, LEVELS_WORKGROUP_SIZE, OUT_ALIGN};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::Kernel;
use super::jobs::{job_workgroups, plan_windows, JobSpan, JobTable};
use super::readback::{GpuBatch, ImageLayout};
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::Result;

/// The buffers an operation reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Buf {
    /// The decoded payloads.
    Batch,
    /// Intermediate levels of odd refinement steps.
    Ping,
    /// Intermediate levels of even refinement steps.
    Pong,
    /// The result.
    Out,
}

/// One image in one of the buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    /// The buffer.
    pub buf: Buf,
    /// Byte offset of the image in it.
    pub offset: u64,
    /// Bytes of the image.
    pub len: u64,
}

impl Slot {
    /// The bound size: whole words (the bytes up to the next image are padding).
    fn bound(&self) -> u64 {
        self.len.next_multiple_of(4).max(4)
    }
}

/// One operation of a step: a buffer copy, or a dispatch of `levels.wgsl`'s `subsample` or
/// `refine` with its job.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Copy {
        src: Slot,
        dst: Slot,
    },
    Subsample {
        job: LevelJob,
        src: Slot,
        dst: Slot,
    },
    Refine {
        job: LevelJob,
        coarse: Slot,
        residual: Slot,
        dst: Slot,
    },
}

/// A chain of `levels.wgsl` operations, step by step (every step's copies, then one pass of
/// its dispatches), and the bytes of the buffers it writes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LevelSteps<'a> {
    /// The operations of each step.
    pub steps: &'a [Vec<Op>],
    /// Bytes of the output buffer (before the one-slot minimum).
    pub out_len: u64,
    /// Bytes of the ping scratch buffer (0: none).
    pub ping_len: u64,
    /// Bytes of the pong scratch buffer (0: none).
    pub pong_len: u64,
}

/// The buffers and entry point one dispatch of a step binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GroupKey {
    /// `refine` (else `subsample`).
    refine: bool,
    /// The `src`, `residual` and `dst` buffers.
    bufs: [Buf; 3],
}

/// A step's dispatches of one entry point over one triple of buffers: their jobs and windows.
struct Group {
    /// Its entry point and buffers.
    key: GroupKey,
    /// Its jobs, offsets and workgroups filled in from `table`.
    jobs: Vec<LevelJob>,
    /// Its windows.
    table: JobTable<3>,
}

/// A job and what it binds: source, residual and target.
type JobSlots = (LevelJob, [Slot; 3]);

/// What the windows of a step bind, for the binding check and the errors.
const WHAT: [&str; 3] = [
    "progressive level source",
    "progressive level residual",
    "progressive level target",
];

/// The dispatches of one step: its refine or subsample operations grouped by entry point and
/// buffers (in order of first appearance: one group in the plans `progressive::gpu` makes),
/// each group's jobs in one table, windows checked against `limits` (`buffer_len` of each
/// buffer).
fn plan_step(
    step: &[Op],
    limits: &BindLimits,
    buffer_len: impl Fn(Buf) -> u64,
) -> Result<Vec<Group>> {
    let mut groups: Vec<(GroupKey, Vec<JobSlots>)> = Vec::new();
    for op in step {
        let (key, job, slots) = match *op {
            Op::Copy { .. } => continue,
            Op::Subsample { job, src, dst } => (false, job, [src, src, dst]),
            Op::Refine {
                job,
                coarse,
                residual,
                dst,
            } => (true, job, [coarse, residual, dst]),
        };
        let key = GroupKey {
            refine: key,
            bufs: slots.map(|s| s.buf),
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ops)) => ops.push((job, slots)),
            None => groups.push((key, vec![(job, slots)])),
        }
    }
    groups
        .into_iter()
        .map(|(key, ops)| {
            let spans: Vec<JobSpan<3>> = ops
                .iter()
                .map(|(job, slots)| {
                    let per_word = 32 / job.depth.max(1) as u64;
                    let words = (job.width as u64 * job.height as u64 * job.channels as u64)
                        .div_ceil(per_word);
                    JobSpan {
                        ranges: slots.map(|s| (s.offset, s.bound())),
                        workgroups: job_workgroups(words, LEVELS_WORKGROUP_SIZE),
                    }
                })
                .collect();
            let table = plan_windows(&spans, size_of::<LevelJob>() as u64, WHAT, limits)?;
            check_bindings(table.bindings(WHAT, key.bufs.map(&buffer_len)), limits)?;
            let jobs = ops
                .iter()
                .zip(&spans)
                .enumerate()
                .map(|(k, ((job, _), span))| LevelJob {
                    src_offset: table.words[k][0],
                    residual_offset: table.words[k][1],
                    dst_offset: table.words[k][2],
                    wg_base: table.wg_base[k],
                    wg_count: span.workgroups,
                    ..*job
                })
                .collect();
            Ok(Group { key, jobs, table })
        })
        .collect()
}

impl<'a> LevelSteps<'a> {
    /// Every range the stage binds or copies, for [`check_bindings`]: the decoded payloads
    /// (in a buffer of `batch_len` bytes), the scratch buffers and the output.
    pub(crate) fn bindings(self, batch_len: u64) -> impl Iterator<Item = Binding> + 'a {
        let len = move |b: Buf| match b {
            Buf::Batch => batch_len,
            Buf::Ping => self.ping_len,
            Buf::Pong => self.pong_len,
            Buf::Out => self.out_len.max(OUT_ALIGN),
        };
        let range = move |what, s: Slot, copy| Binding {
            what,
            buffer_len: len(s.buf),
            offset: s.offset,
            size: s.bound(),
            copy,
        };
        let binding = move |what, s: Slot| range(what, s, false);
        self.steps.iter().flatten().flat_map(move |op| match *op {
            Op::Copy { src, dst } => vec![
                range("progressive level copy source", src, true),
                range("progressive level copy target", dst, true),
            ],
            Op::Subsample { src, dst, .. } => vec![
                binding("progressive level subsample source", src),
                binding("progressive level subsample target", dst),
            ],
            Op::Refine {
                coarse,
                residual,
                dst,
                ..
            } => vec![
                binding("progressive level coarse image", coarse),
                binding("progressive level residual", residual),
                binding("progressive level refine target", dst),
            ],
        })
    }

    /// Runs the steps on the payloads decoded in `batch` into a new output buffer whose
    /// images are `images`. Every range is checked against its buffer and the device's limits
    /// first; GPU errors in the submission are [`crate::Error::Gpu`].
    pub(crate) fn dispatch(
        self,
        decoder: &GpuDecoder,
        batch: &GpuBatch,
        images: Vec<ImageLayout>,
    ) -> Result<GpuBatch> {
        let limits = BindLimits::of(&decoder.device);
        check_bindings(self.bindings(batch.buffer.size()), &limits)?;
        let buffer_len = |b: Buf| match b {
            Buf::Batch => batch.buffer.size(),
            Buf::Ping => self.ping_len,
            Buf::Pong => self.pong_len,
            Buf::Out => self.out_len.max(OUT_ALIGN),
        };
        let planned = self
            .steps
            .iter()
            .map(|step| plan_step(step, &limits, buffer_len))
            .collect::<Result<Vec<_>>>()?;
        let LevelSteps {
            steps,
            out_len,
            ping_len,
            pong_len,
        } = self;
        let kernel = decoder.pipelines.kernel(Kernel::Levels)?;
        decoder.with_error_scopes(|| {
            decoder.count_buffers(1 + (ping_len > 0) as u64 + (pong_len > 0) as u64);
            let out = storage_buffer(&decoder.device, "l3 levels out", out_len.max(OUT_ALIGN));
            let ping =
                (ping_len > 0).then(|| storage_buffer(&decoder.device, "l3 levels ping", ping_len));
            let pong =
                (pong_len > 0).then(|| storage_buffer(&decoder.device, "l3 levels pong", pong_len));
            let buffer = |b: Buf| -> &wgpu::Buffer {
                match b {
                    Buf::Batch => &batch.buffer,
                    Buf::Ping => ping.as_ref().expect("ping allocated for its slots"),
                    Buf::Pong => pong.as_ref().expect("pong allocated for its slots"),
                    Buf::Out => &out,
                }
            };

            let mut encoder =
                decoder
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("l3 levels"),
                    });
            for (step, windows) in steps.iter().zip(&planned) {
                // Copies first (outside any pass), then one pass for the step's dispatches.
                for op in step {
                    if let Op::Copy { src, dst } = op {
                        encoder.copy_buffer_to_buffer(
                            buffer(src.buf),
                            src.offset,
                            buffer(dst.buf),
                            dst.offset,
                            src.len.next_multiple_of(4),
                        );
                    }
                }
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("l3 levels"),
                    timestamp_writes: None,
                });
                for group in windows {
                    let pipeline = kernel.entry(if group.key.refine {
                        "refine"
                    } else {
                        "subsample"
                    });
                    group.table.encode(
                        decoder,
                        &mut pass,
                        (pipeline, &kernel.bgl),
                        &group.table.table_bytes(&group.jobs),
                        group.key.bufs.map(buffer),
                    );
                }
            }
            decoder.submit_commands(encoder.finish());
            Ok(GpuBatch {
                buffer: out,
                images,
                device: decoder.device.clone(),
                queue: decoder.queue.clone(),
            })
        })
    }
}
