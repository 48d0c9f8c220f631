//! Submitting a batch: the CPU-side parse, the plan, the batch's buffers ([`Targets`]), the
//! per-chunk uploads into reusable scratch buffers ([`Scratch`], grown on demand, never
//! shrunk), and the recording of each chunk's two stages (prefix sum, decode) as one
//! submission. [`GpuDecoder::submit_planned`] is the common path of the decoder's batch API
//! and of [`super::Batcher`], which passes buffers it reuses between batches.

use std::sync::MutexGuard;

use super::abi::{scan_levels, ImageInfo, LayoutKind, Params, ScanParams, VERSION_COMPACT, WG_256};
use super::device::range;
use super::plan::{build_parts, plan_batch, BatchPlan, ChunkInputs};
use super::readback::{GpuBatch, ImageLayout, Pending};
use super::timing::{TimingBuffers, TimingReadback, QUERIES_PER_CHUNK};
use super::Context;
use crate::error::{Error, LimitsError, Result};
use crate::format::FileLayout;
use crate::layout::{OutputLayout, Window};

/// Reusable per-chunk buffers, grown on demand.
pub(crate) struct Scratch {
    input: wgpu::Buffer,
    sizes: wgpu::Buffer,
    pub(crate) scan: wgpu::Buffer,
    images: wgpu::Buffer,
    params: wgpu::Buffer,
}

/// What one chunk needs, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Needs {
    pub input: u64,
    pub sizes: u64,
    pub scan: u64,
    pub images: u64,
    pub params: u64,
}

/// The buffers a batch writes: its output, its error flags, the flags' read-back copy and,
/// for the batcher, a read-back copy of the output.
#[derive(Debug, Clone)]
pub(crate) struct Targets {
    /// The decoded images (`STORAGE | COPY_SRC | COPY_DST`), at least the plan's size.
    pub out: wgpu::Buffer,
    /// One u32 of flags per image.
    pub errors: wgpu::Buffer,
    /// `MAP_READ` copy of `errors`.
    pub flags_staging: wgpu::Buffer,
    /// `MAP_READ` copy of the output, when the batch is read back whole.
    pub out_staging: Option<wgpu::Buffer>,
}

/// Bytes of the error-flag buffers of `count` images.
pub(crate) fn flags_bytes(count: usize) -> u64 {
    (count as u64 * 4).next_multiple_of(256).max(256)
}

/// Usage of the storage buffers the kernels write and the host copies from (and of exported
/// buffers, `gpu::interop`).
pub(crate) const STORAGE_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// A storage buffer the decode writes and the host copies from.
pub(crate) fn storage_buffer(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: STORAGE_USAGE,
        mapped_at_creation: false,
    })
}

/// A buffer the host maps to read.
pub(crate) fn readback_buffer(device: &wgpu::Device, label: &str, size: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// What [`GpuDecoder::submit_planned`] submitted.
pub(crate) struct Submitted {
    /// Where each image is in the output.
    pub images: Vec<ImageLayout>,
    /// Bytes of the output the batch uses.
    pub total_out: u64,
    /// The last submission of the batch (its read-back copies).
    pub index: wgpu::SubmissionIndex,
    /// Set when the batch was timed.
    pub timing: Option<TimingReadback>,
}

/// Where each image of `layouts` lies in the output of `plan`.
fn image_layouts(
    layouts: &[FileLayout],
    plan: &BatchPlan,
    output: OutputLayout,
) -> Vec<ImageLayout> {
    layouts
        .iter()
        .zip(&plan.image_pos)
        .map(|(l, &offset)| {
            let h = &l.header;
            ImageLayout {
                offset,
                len: output.output_bytes(h),
                width: h.width,
                height: h.height,
                channels: h.channels(),
                depth: h.depth,
                sample_type: output.sample_type(h.depth),
                planar: output.is_planar(),
            }
        })
        .collect()
}

/// A CPU-side parse error of image `image` of a batch, as [`Error::InBatch`], so that a batch
/// error names its file.
fn in_image(image: usize, e: Error) -> Error {
    Error::InBatch {
        image,
        error: Box::new(e),
    }
}

impl Context {
    /// Step 1: validates every file on the CPU (headers, size tables, checksum, limits); the
    /// first bad file fails with [`Error::InBatch`].
    pub(crate) fn parse_files<'a>(&self, files: &[&'a [u8]]) -> Result<Vec<FileLayout<'a>>> {
        files
            .iter()
            .enumerate()
            .map(|(i, f)| crate::decode::parse(f, &self.options).map_err(|e| in_image(i, e)))
            .collect()
    }

    /// Step 2: plans the batch into chunks that fit the chunk limit (only the patches of
    /// `windows[i]` of image `i` where given), and checks that its output fits one buffer.
    pub(crate) fn plan(
        &self,
        layouts: &[FileLayout],
        output: OutputLayout,
        windows: &[Option<Window>],
    ) -> Result<BatchPlan> {
        let plan = plan_batch(layouts, output, self.chunk_limit, windows)?;
        let max_buffer = self.device.limits().max_buffer_size;
        if plan.total_out > max_buffer {
            return Err(LimitsError::GpuBuffer {
                what: "output buffer",
                needed: plan.total_out,
                max: max_buffer,
            }
            .into());
        }
        Ok(plan)
    }

    /// Validates, uploads and submits every chunk into new buffers, with timestamp queries if
    /// `timed` and the device supports them; returns what `finish` needs. `windows`: as for
    /// [`GpuDecoder::decode_batch_windows`] (empty: every image whole).
    pub(crate) fn submit(
        &self,
        files: &[&[u8]],
        output: OutputLayout,
        timed: bool,
        windows: &[Option<Window>],
    ) -> Result<Pending> {
        let layouts = self.parse_files(files)?;
        let plan = self.plan(&layouts, output, windows)?;
        let timed = timed && self.timing_supported();
        let n_flags = flags_bytes(files.len());
        let targets = self.with_error_scopes(|| {
            self.count_buffers(3);
            Ok(Targets {
                out: storage_buffer(&self.device, "l3 decoded batch", plan.total_out),
                errors: storage_buffer(&self.device, "l3 error flags", n_flags),
                flags_staging: readback_buffer(&self.device, "l3 error flags readback", n_flags),
                out_staging: None,
            })
        })?;
        let submitted = self.submit_planned(&layouts, &plan, output, &targets, timed)?;
        Ok(Pending {
            batch: GpuBatch {
                buffer: targets.out,
                images: submitted.images,
                device: self.device.clone(),
                queue: self.queue.clone(),
            },
            staging: targets.flags_staging,
            count: files.len(),
            timing: submitted.timing,
        })
    }

    /// Runs `f` inside out-of-memory and validation error scopes: a GPU error in it becomes
    /// [`Error::Gpu`].
    pub(crate) fn with_error_scopes<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let r = f();
        for scope in [validation, oom] {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::Gpu(format!("GPU decode failed: {e}")));
            }
        }
        let escaped = self
            .uncaptured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(e) = escaped {
            return Err(Error::Gpu(format!("GPU error outside a decode: {e}")));
        }
        r
    }

    /// Steps 3 to 5 for planned, validated files: per chunk, build and upload its inputs
    /// and record and submit its two stages, the last chunk with the read-back copies. `targets`
    /// must hold the plan's output and `layouts.len()` flags.
    pub(crate) fn submit_planned(
        &self,
        layouts: &[FileLayout],
        plan: &BatchPlan,
        output: OutputLayout,
        targets: &Targets,
        timed: bool,
    ) -> Result<Submitted> {
        self.with_error_scopes(|| {
            let timing = if timed {
                TimingBuffers::new(&self.device, plan.chunks.len())
            } else {
                None
            };
            let mut guard = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
            let mut last: Option<wgpu::CommandEncoder> = None;
            for (k, chunk) in plan.chunks.iter().enumerate() {
                let out_start = plan.chunk_out_start(chunk);
                let c = build_parts(layouts, &plan.parts[chunk.clone()], out_start, output);
                let mut encoder =
                    self.device
                        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                            label: Some("l3 decode chunk"),
                        });
                if k == 0 {
                    // Once per batch, before any decode: the interleaved decode ORs samples
                    // into zeroed words (words shared by streams of an image combine), and no
                    // decode writes the alignment padding between images, which stays 0.
                    encoder.clear_buffer(&targets.errors, 0, None);
                    encoder.clear_buffer(&targets.out, 0, Some(plan.total_out));
                }
                let query_set = timing
                    .as_ref()
                    .map(|_| TimingBuffers::query_set(&self.device));
                self.encode_chunk(
                    &mut encoder,
                    &mut guard,
                    &c,
                    output,
                    (&targets.out, out_start),
                    &targets.errors,
                    query_set.as_ref(),
                );
                if let (Some(qs), Some(t)) = (&query_set, &timing) {
                    encoder.resolve_query_set(
                        qs,
                        0..QUERIES_PER_CHUNK,
                        &t.resolve,
                        k as u64 * wgpu::QUERY_RESOLVE_BUFFER_ALIGNMENT,
                    );
                }
                // Each chunk goes before the next one's uploads (they reuse the scratch
                // buffers); the last waits to carry the read-back copies.
                if k + 1 < plan.chunks.len() {
                    self.submit_commands(encoder.finish());
                } else {
                    last = Some(encoder);
                }
            }
            let mut encoder = last.unwrap_or_else(|| {
                self.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
            });
            self.record_readback(&mut encoder, layouts.len(), plan, targets, timing.as_ref());
            let index = self.submit_commands(encoder.finish());
            // The scratch buffers are free for the next batch once the last chunk is in.
            drop(guard);
            Ok(Submitted {
                images: image_layouts(layouts, plan, output),
                total_out: plan.total_out,
                index,
                timing: timed.then(|| TimingReadback {
                    staging: timing.map(|t| t.readback),
                    chunks: plan.chunks.len(),
                    period: self.queue.get_timestamp_period(),
                }),
            })
        })
    }

    /// Step 3 and 4 for one chunk: uploads its inputs into the scratch buffers, and records
    /// the prefix sum and the decode (one pass, both versions' entry points).
    #[allow(clippy::too_many_arguments)]
    fn encode_chunk(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        scratch: &mut MutexGuard<'_, Option<Scratch>>,
        c: &ChunkInputs,
        output: OutputLayout,
        (out, out_start): (&wgpu::Buffer, u64),
        errors: &wgpu::Buffer,
        query_set: Option<&wgpu::QuerySet>,
    ) {
        let input_bytes: &[u8] = bytemuck::cast_slice(&c.input_words);
        let (levels, scan_words) = scan_levels(c.sizes.len() as u32);
        let needs = Needs {
            input: input_bytes.len() as u64,
            sizes: c.sizes.len() as u64 * 4,
            scan: scan_words * 4,
            images: c.images.len() as u64 * std::mem::size_of::<ImageInfo>() as u64,
            // Version-1 decode, scan levels, version-2 decode.
            params: (2 + levels.len() as u64) * self.uniform_align,
        };
        let scratch = self.ensure_scratch(scratch, needs);
        self.upload(&scratch.input, 0, input_bytes);
        self.upload(&scratch.sizes, 0, bytemuck::cast_slice(&c.sizes));
        self.upload(&scratch.images, 0, bytemuck::cast_slice(&c.images));
        let compact_params_at = (1 + levels.len() as u64) * self.uniform_align;
        self.upload(&scratch.params, 0, bytemuck::bytes_of(&c.decode_params));
        self.upload(
            &scratch.params,
            compact_params_at,
            bytemuck::bytes_of(&c.compact_params),
        );
        encoder.copy_buffer_to_buffer(&scratch.sizes, 0, &scratch.scan, 0, needs.sizes);
        let writes = |stage: u32| {
            query_set.map(|qs| wgpu::ComputePassTimestampWrites {
                query_set: qs,
                beginning_of_pass_write_index: Some(2 * stage),
                end_of_pass_write_index: Some(2 * stage + 1),
            })
        };
        self.encode_scan(encoder, scratch, &levels, 1, writes(0));
        let psize = std::mem::size_of::<Params>() as u64;
        let out_len = c.out_words as u64 * 4;
        // The bindings of both decode dispatches; only the parameters differ.
        let decode_bg = |params_at: u64| {
            let entry = |binding, resource| wgpu::BindGroupEntry { binding, resource };
            self.bind_group(&wgpu::BindGroupDescriptor {
                label: Some("l3 decode"),
                layout: &self.pipelines.decode_bgl,
                entries: &[
                    entry(0, scratch.input.as_entire_binding()),
                    entry(1, scratch.sizes.as_entire_binding()),
                    entry(2, scratch.scan.as_entire_binding()),
                    entry(3, scratch.images.as_entire_binding()),
                    // From the 256-byte boundary before the chunk's first part (OUT_ALIGN, a
                    // multiple of min_storage_buffer_offset_alignment); each part's
                    // `out_base` is relative to it.
                    entry(4, range(out, out_start, out_len)),
                    entry(5, errors.as_entire_binding()),
                    entry(6, range(&scratch.params, params_at, psize)),
                ],
            })
        };
        let kind = LayoutKind::of(output);
        let fast = crate::format::VERSION_FAST as u32;
        // One pass, both versions' dispatches (an entry point each, so that each reserves
        // only its own workgroup memory); timed batches write timestamps at its beginning
        // and end.
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("l3 decode"),
            timestamp_writes: writes(1),
        });
        for (version, params, params_at) in [
            (fast, c.decode_params, 0),
            (VERSION_COMPACT, c.compact_params, compact_params_at),
        ] {
            if params.count > 0 {
                pass.set_pipeline(self.pipelines.decode(version, kind));
                pass.set_bind_group(0, &decode_bg(params_at), &[]);
                self.dispatch(&mut pass, params.count);
            }
        }
    }

    /// Step 5: records the copies of the flags (and the output when `targets.out_staging` is
    /// set, and the timestamps) to their read-back buffers, after the last chunk's decode in
    /// its encoder (or alone, for a batch without chunks).
    fn record_readback(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        count: usize,
        plan: &BatchPlan,
        targets: &Targets,
        timing: Option<&TimingBuffers>,
    ) {
        if plan.chunks.is_empty() {
            encoder.clear_buffer(&targets.errors, 0, None);
        }
        encoder.copy_buffer_to_buffer(
            &targets.errors,
            0,
            &targets.flags_staging,
            0,
            flags_bytes(count),
        );
        self.count_readbacks(1 + targets.out_staging.is_some() as u64 + timing.is_some() as u64);
        if let Some(staging) = &targets.out_staging {
            if plan.chunks.is_empty() {
                encoder.clear_buffer(&targets.out, 0, Some(plan.total_out));
            }
            encoder.copy_buffer_to_buffer(&targets.out, 0, staging, 0, plan.total_out);
        }
        if let Some(t) = timing {
            encoder.copy_buffer_to_buffer(&t.resolve, 0, &t.readback, 0, t.resolve.size());
        }
    }

    /// The scratch buffers, each the one kept from the last chunk if it is large enough,
    /// else a new one (rounded up to a power of two).
    pub(crate) fn ensure_scratch<'a>(
        &self,
        slot: &'a mut Option<Scratch>,
        needs: Needs,
    ) -> &'a Scratch {
        let grow = |have: Option<&wgpu::Buffer>, need: u64, usage, label| -> wgpu::Buffer {
            let need = need.max(256).next_multiple_of(256);
            match have {
                Some(b) if b.size() >= need => b.clone(),
                _ => {
                    self.count_allocation();
                    self.device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some(label),
                        size: need.next_power_of_two().min(self.chunk_limit.max(need)),
                        usage,
                        mapped_at_creation: false,
                    })
                }
            }
        };
        let st = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC;
        let old = slot.take();
        let o = old.as_ref();
        let s = Scratch {
            input: grow(o.map(|s| &s.input), needs.input, st, "l3 input"),
            sizes: grow(o.map(|s| &s.sizes), needs.sizes, st, "l3 sizes"),
            scan: grow(o.map(|s| &s.scan), needs.scan, st, "l3 scan"),
            images: grow(o.map(|s| &s.images), needs.images, st, "l3 images"),
            params: grow(
                o.map(|s| &s.params),
                needs.params,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                "l3 params",
            ),
        };
        slot.insert(s)
    }

    /// Records the prefix-sum dispatches; level params are written at `params_slot0` onwards.
    pub(crate) fn encode_scan(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        scratch: &Scratch,
        levels: &[ScanParams],
        params_slot0: u64,
        timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'_>>,
    ) {
        let groups: Vec<wgpu::BindGroup> = levels
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let off = (params_slot0 + i as u64) * self.uniform_align;
                self.upload(&scratch.params, off, bytemuck::bytes_of(p));
                self.bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 scan level"),
                    layout: &self.pipelines.scan_bgl,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: scratch.scan.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: range(&scratch.params, off, 16),
                        },
                    ],
                })
            })
            .collect();
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("l3 prefix sum"),
            timestamp_writes,
        });
        pass.set_pipeline(&self.pipelines.scan_blocks);
        for (p, g) in levels.iter().zip(&groups) {
            pass.set_bind_group(0, g, &[]);
            self.dispatch(&mut pass, p.n.div_ceil(WG_256 as u32));
        }
        pass.set_pipeline(&self.pipelines.add_sums);
        for (p, g) in levels.iter().zip(&groups).rev().skip(1) {
            pass.set_bind_group(0, g, &[]);
            self.dispatch(&mut pass, p.n.div_ceil(WG_256 as u32));
        }
    }

    /// Dispatches `groups` workgroups, over two dimensions when they exceed the device's
    /// per-dimension limit (the shaders number them back: `dispatched_workgroup`).
    fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, groups: u32) {
        if groups == 0 {
            return;
        }
        let max = self
            .device
            .limits()
            .max_compute_workgroups_per_dimension
            .max(1);
        let x = groups.min(max);
        self.count_dispatches(1);
        pass.dispatch_workgroups(x, groups.div_ceil(x), 1);
    }
}
