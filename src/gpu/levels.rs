//! Progressive levels on the GPU ([`GpuDecoder::decode_levels`]): the records' payloads are
//! decoded as one batch, then `shaders/levels.wgsl` rebuilds each record's level: a chain of
//! `refine` dispatches for interlaced records (level 0, refinement 1, 2, ...; intermediate
//! levels ping-pong between two scratch buffers so no dispatch reads the buffer it writes), one
//! `subsample` for a flat record read below full resolution, a buffer copy where the decoded
//! payload already is the level. Everything is integer work, bit-exact with the CPU twins in
//! [`crate::progressive::interlace`].

use super::abi::{strided_workgroups, LevelJob, LEVELS_WORKGROUP_SIZE, OUT_ALIGN};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::range;
use super::readback::{GpuBatch, ImageLayout};
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::{Error, ParameterError, Result};
use crate::layout::{OutputLayout, Window};
use crate::progressive::{level_dims, level_stride, LevelScheme, StoredLevels};

/// The buffers an operation reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Buf {
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
struct Slot {
    buf: Buf,
    offset: u64,
    len: u64,
}

impl Slot {
    /// The bound size: whole words (the bytes up to the next image are padding).
    fn bound(&self) -> u64 {
        self.len.next_multiple_of(4).max(4)
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
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

impl GpuDecoder {
    /// Decodes level `level` of every record in `records` on the GPU: image `i` of the result is
    /// record `i` at that level, interleaved (8-bit samples as bytes, 16-bit little-endian),
    /// bit-exact with [`crate::progressive::decode_level`].
    ///
    /// Every payload's header is checked against the shape its level needs before anything is
    /// submitted; an error names the record ([`Error::InBatch`] with the record's index).
    /// Blocks until the payloads are decoded (their error flags are read), then submits the
    /// reconstruction; reading the result back waits for it.
    pub fn decode_levels(&self, records: &[StoredLevels], level: u8) -> Result<GpuBatch> {
        self.decode_levels_windows(records, level, &[])
    }

    /// Like [`GpuDecoder::decode_levels`], but record `i` is decoded only where `windows[i]`
    /// (if given; pixels of the level) needs it, where the level allows: a flat record read
    /// at full resolution decodes only the patches holding the window's pixels (the rest of
    /// its image is zero), as [`crate::progressive::decode_level_window`] does on the CPU,
    /// byte for byte. Other records decode whole.
    pub fn decode_levels_windows(
        &self,
        records: &[StoredLevels],
        level: u8,
        windows: &[Option<Window>],
    ) -> Result<GpuBatch> {
        if records.is_empty() {
            return Err(ParameterError::InvalidOption {
                name: "records",
                value: 0,
                reason: "a batch needs at least one record",
            }
            .into());
        }
        // Payloads to decode, each checked against its shape; `first[i]`: record i's payload 0.
        let in_record = |i: usize| {
            move |e: Error| Error::InBatch {
                image: i,
                error: Box::new(e),
            }
        };
        let mut files: Vec<&[u8]> = Vec::new();
        let mut first = Vec::with_capacity(records.len());
        let mut owner = Vec::new();
        let mut file_windows = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let plan = r.plan(level).map_err(in_record(i))?;
            first.push(files.len());
            let direct = r.scheme == LevelScheme::Flat && level + 1 == r.level_count;
            file_windows.push(windows.get(i).cloned().flatten().filter(|_| direct));
            file_windows.resize(files.len() + plan.len(), None);
            for shape in &plan {
                let payload = r.payloads[shape.level as usize];
                let header = crate::decode::read_header(payload).map_err(in_record(i))?;
                r.check_header(shape, &header).map_err(in_record(i))?;
                files.push(payload);
                owner.push(i);
            }
        }
        let batch = self
            .decode_batch_windows(&files, OutputLayout::Interleaved, &file_windows)
            .map_err(|e| match e {
                Error::InBatch { image, error } => Error::InBatch {
                    image: owner[image],
                    error,
                },
                e => e,
            })?;

        let plan = plan_levels(records, level, &first, &batch.images)?;
        check_bindings(
            plan.bindings(batch.buffer.size()),
            &BindLimits::of(&self.device),
        )?;
        let LevelPlan {
            images,
            steps,
            out_len,
            ping_len,
            pong_len,
        } = plan;
        self.with_error_scopes(|| {
            let out = storage_buffer(&self.device, "l3 levels out", out_len.max(OUT_ALIGN));
            let ping =
                (ping_len > 0).then(|| storage_buffer(&self.device, "l3 levels ping", ping_len));
            let pong =
                (pong_len > 0).then(|| storage_buffer(&self.device, "l3 levels pong", pong_len));
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
            let slot_len = self.uniform_align;
            let job_buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("l3 level jobs"),
                size: (jobs.len() as u64 * slot_len).max(slot_len),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            for (n, job) in jobs.iter().enumerate() {
                self.queue
                    .write_buffer(&job_buffer, n as u64 * slot_len, bytemuck::bytes_of(job));
            }

            let mut encoder = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("l3 levels"),
                });
            let mut job_index = 0u64;
            let job_size = size_of::<LevelJob>() as u64;
            for step in &steps {
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
                            (&self.pipelines.subsample, job, src, src, dst)
                        }
                        Op::Refine {
                            job,
                            coarse,
                            residual,
                            dst,
                        } => (&self.pipelines.refine, job, coarse, residual, dst),
                    };
                    let bind = |binding, s: &Slot| wgpu::BindGroupEntry {
                        binding,
                        resource: range(buffer(s.buf), s.offset, s.bound()),
                    };
                    let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some("l3 levels"),
                        layout: &self.pipelines.levels_bgl,
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
            self.queue.submit([encoder.finish()]);
            Ok(GpuBatch {
                buffer: out,
                images,
                device: self.device.clone(),
                queue: self.queue.clone(),
            })
        })
    }
}

/// Where each record's level goes and the operations that produce it, step by step (a pure
/// function of the records, the level and where their payloads were decoded).
#[derive(Debug, Clone)]
pub struct LevelPlan {
    /// Each record's level in the output buffer.
    pub images: Vec<ImageLayout>,
    steps: Vec<Vec<Op>>,
    /// Bytes of the output buffer (before the one-slot minimum).
    pub out_len: u64,
    /// Bytes of the ping scratch buffer (0: none).
    pub ping_len: u64,
    /// Bytes of the pong scratch buffer (0: none).
    pub pong_len: u64,
}

/// Plans level `level` of `records` (see [`LevelPlan`]): `first[i]` is the index in `decoded`
/// of record `i`'s first payload, and its payloads for the level follow it, decoded as the
/// records' `plan(level)` lists them (their headers checked against their shapes).
pub fn plan_levels(
    records: &[StoredLevels],
    level: u8,
    first: &[usize],
    decoded: &[ImageLayout],
) -> Result<LevelPlan> {
    let needed = records
        .iter()
        .zip(first)
        .map(|(r, &f)| Ok(f + r.plan(level)?.len()))
        .collect::<Result<Vec<_>>>()?;
    if first.len() != records.len() || needed.iter().any(|&n| n > decoded.len()) {
        return Err(ParameterError::InvalidOption {
            name: "decoded payloads",
            value: decoded.len() as u64,
            reason: "one per payload of every record's plan",
        }
        .into());
    }
    let mut images = Vec::with_capacity(records.len());
    let mut out_len = 0u64;
    let (mut ping_len, mut pong_len) = (0u64, 0u64);
    let mut steps: Vec<Vec<Op>> = vec![Vec::new(); level as usize + 1];
    for (i, r) in records.iter().enumerate() {
        let bytes = (r.depth / 8) as u64;
        let image_len = |(w, h): (u32, u32)| w as u64 * h as u64 * r.channels as u64 * bytes;
        let dims = level_dims(r.width, r.height, r.level_count, level);
        let offset = out_len;
        let len = image_len(dims);
        out_len = (offset + len).next_multiple_of(OUT_ALIGN);
        let payload0 = decoded[first[i]];
        images.push(ImageLayout {
            offset,
            len,
            width: dims.0,
            height: dims.1,
            ..payload0
        });
        let out = Slot {
            buf: Buf::Out,
            offset,
            len,
        };
        let in_batch = |k: usize| {
            let l = decoded[first[i] + k];
            Slot {
                buf: Buf::Batch,
                offset: l.offset,
                len: l.len,
            }
        };
        let job = |(w, h): (u32, u32)| LevelJob {
            width: w,
            height: h,
            channels: r.channels as u32,
            depth: r.depth as u32,
            stride: level_stride(r.level_count, level),
            src_width: r.width,
            ..Default::default()
        };
        let top = level == r.level_count - 1;
        match r.scheme {
            LevelScheme::Flat if top => steps[0].push(Op::Copy {
                src: in_batch(0),
                dst: out,
            }),
            LevelScheme::Flat => steps[0].push(Op::Subsample {
                job: job(dims),
                src: in_batch(0),
                dst: out,
            }),
            LevelScheme::Interlace if level == 0 => steps[0].push(Op::Copy {
                src: in_batch(0),
                dst: out,
            }),
            LevelScheme::Interlace => {
                let mut coarse = in_batch(0);
                for k in 1..=level {
                    let fine = level_dims(r.width, r.height, r.level_count, k);
                    let dst = if k == level {
                        out
                    } else {
                        let (buf, used) = if k % 2 == 1 {
                            (Buf::Ping, &mut ping_len)
                        } else {
                            (Buf::Pong, &mut pong_len)
                        };
                        let slot = Slot {
                            buf,
                            offset: *used,
                            len: image_len(fine),
                        };
                        *used = (slot.offset + slot.len).next_multiple_of(OUT_ALIGN);
                        slot
                    };
                    steps[k as usize].push(Op::Refine {
                        job: job(fine),
                        coarse,
                        residual: in_batch(k as usize),
                        dst,
                    });
                    coarse = dst;
                }
            }
        }
    }

    Ok(LevelPlan {
        images,
        steps,
        out_len,
        ping_len,
        pong_len,
    })
}

impl LevelPlan {
    /// Every range the stage binds or copies, for [`check_bindings`]: the decoded payloads
    /// (in a buffer of `batch_len` bytes), the scratch buffers and the output.
    pub fn bindings(&self, batch_len: u64) -> impl Iterator<Item = Binding> + '_ {
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
}
