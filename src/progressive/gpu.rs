//! Progressive levels on the GPU ([`decode_levels`]): the records' payloads are decoded as
//! one batch, then `shaders/levels.wgsl` rebuilds each record's level: a chain of `refine`
//! steps for interlaced records (level 0, refinement 1, 2, ...), one `subsample` for a flat
//! record read below full resolution, a buffer copy where the decoded payload already is the
//! level. Each step is one dispatch for the whole batch (the engine's job table). Everything
//! is integer work, bit-exact with the CPU twins in [`super::interlace`]. This file checks the
//! payloads, plans the steps ([`plan_levels`]) and builds the kernel's jobs; the engine's
//! `gpu::levels` binds and dispatches them.

use super::{level_dims, level_stride, LevelScheme, StoredLevels};
use crate::error::{Error, ParameterError, Result};
use crate::gpu::abi::{LevelJob, OUT_ALIGN};
use crate::gpu::bindings::Binding;
use crate::gpu::levels::{Buf, LevelSteps, Op, Slot};
use crate::gpu::{GpuBatch, GpuDecoder, ImageLayout};
use crate::layout::{OutputLayout, Window};

/// Decodes level `level` of every record in `records` on `decoder`: image `i` of the result is
/// record `i` at that level, interleaved (8-bit samples as bytes, 16-bit little-endian),
/// bit-exact with [`super::decode_level`].
///
/// Every payload's header is checked against the shape its level needs before anything is
/// submitted; an error names the record ([`Error::InBatch`] with the record's index).
/// Blocks until the payloads are decoded (their error flags are read), then submits the
/// reconstruction; reading the result back waits for it.
pub fn decode_levels(
    decoder: &GpuDecoder,
    records: &[StoredLevels],
    level: u8,
) -> Result<GpuBatch> {
    decode_levels_windows(decoder, records, level, &[])
}

/// Like [`decode_levels`], but record `i` is decoded only where `windows[i]` (if given; pixels
/// of the level) needs it, where the level allows: a flat record read at full resolution
/// decodes only the patches holding the window's pixels (the rest of its image is zero), the
/// window's pixels those [`super::decode_level_window`] gives on the CPU. Other records decode
/// whole.
pub fn decode_levels_windows(
    decoder: &GpuDecoder,
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
    let batch = decoder
        .decode_batch_windows(&files, OutputLayout::Interleaved, &file_windows)
        .map_err(|e| match e {
            Error::InBatch { image, error } => Error::InBatch {
                image: owner[image],
                error,
            },
            e => e,
        })?;

    let LevelPlan {
        images,
        steps,
        out_len,
        ping_len,
        pong_len,
    } = plan_levels(records, level, &first, &batch.images)?;
    let steps = LevelSteps {
        steps: &steps,
        out_len,
        ping_len,
        pong_len,
    };
    steps.dispatch(decoder, &batch, images)
}

/// Where each record's level goes and the operations that produce it, step by step (a pure
/// function of the records, the level and where their payloads were decoded).
#[doc(hidden)]
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
/// records' `plan(level)` lists them (their headers checked against their shapes). Public for
/// the fuzz target `gpu_plan`, not a stable API.
#[doc(hidden)]
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
    /// The steps as the engine's levels kernel runs them.
    fn ops(&self) -> LevelSteps<'_> {
        LevelSteps {
            steps: &self.steps,
            out_len: self.out_len,
            ping_len: self.ping_len,
            pong_len: self.pong_len,
        }
    }

    /// Every range the stage binds or copies, for `check_bindings`: the decoded payloads
    /// (in a buffer of `batch_len` bytes), the scratch buffers and the output.
    pub fn bindings(&self, batch_len: u64) -> impl Iterator<Item = Binding> + '_ {
        self.ops().bindings(batch_len)
    }
}
