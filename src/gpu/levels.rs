//! The levels kernel: `shaders/levels.wgsl` over payloads already decoded in a [`GpuBatch`],
//! step by step, as a [`LevelSteps`] lists them: `refine` dispatches (intermediate levels
//! ping-pong between two scratch buffers so no dispatch reads the buffer it writes),
//! `subsample` dispatches and buffer copies. The caller plans the steps; this file checks
//! every range, then binds and dispatches.

use super::abi::{strided_workgroups, LevelJob, LEVELS_WORKGROUP_SIZE, OUT_ALIGN};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::range;
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
        check_bindings(
            self.bindings(batch.buffer.size()),
            &BindLimits::of(&decoder.device),
        )?;
        let LevelSteps {
            steps,
            out_len,
            ping_len,
            pong_len,
        } = self;
        decoder.with_error_scopes(|| {
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

            // One 256-byte uniform slot per dispatch.
            let jobs: Vec<LevelJob> = steps
                .iter()
                .flatten()
                .filter_map(|op| match op {
                    Op::Copy { .. } => None,
                    Op::Subsample { job, .. } | Op::Refine { job, .. } => Some(*job),
                })
                .collect();
            let slot_len = decoder.uniform_align;
            let job_buffer = decoder.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("l3 level jobs"),
                size: (jobs.len() as u64 * slot_len).max(slot_len),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            for (n, job) in jobs.iter().enumerate() {
                decoder.queue.write_buffer(
                    &job_buffer,
                    n as u64 * slot_len,
                    bytemuck::bytes_of(job),
                );
            }

            let mut encoder =
                decoder
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("l3 levels"),
                    });
            let mut job_index = 0u64;
            let job_size = size_of::<LevelJob>() as u64;
            for step in steps {
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
                for op in step {
                    let (pipeline, job, src, residual, dst) = match op {
                        Op::Copy { .. } => continue,
                        Op::Subsample { job, src, dst } => {
                            (&decoder.pipelines.subsample, job, src, src, dst)
                        }
                        Op::Refine {
                            job,
                            coarse,
                            residual,
                            dst,
                        } => (&decoder.pipelines.refine, job, coarse, residual, dst),
                    };
                    let bind = |binding, s: &Slot| wgpu::BindGroupEntry {
                        binding,
                        resource: range(buffer(s.buf), s.offset, s.bound()),
                    };
                    let group = decoder
                        .device
                        .create_bind_group(&wgpu::BindGroupDescriptor {
                            label: Some("l3 levels"),
                            layout: &decoder.pipelines.levels_bgl,
                            entries: &[
                                wgpu::BindGroupEntry {
                                    binding: 0,
                                    resource: range(&job_buffer, job_index * slot_len, job_size),
                                },
                                bind(1, src),
                                bind(2, residual),
                                bind(3, dst),
                            ],
                        });
                    job_index += 1;
                    let per_word = 32 / job.depth as u64;
                    let words = (job.width as u64 * job.height as u64 * job.channels as u64)
                        .div_ceil(per_word);
                    let groups = strided_workgroups(words, LEVELS_WORKGROUP_SIZE);
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, &group, &[]);
                    pass.dispatch_workgroups(groups, 1, 1);
                }
            }
            decoder.queue.submit([encoder.finish()]);
            Ok(GpuBatch {
                buffer: out,
                images,
                device: decoder.device.clone(),
                queue: decoder.queue.clone(),
            })
        })
    }
}
