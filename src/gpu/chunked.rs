//! The host side both chunked-float kernels share (`lossless.rs` over `shaders/lossless.wgsl`,
//! `bounded.rs` over `shaders/bounded.wgsl`): storage tables bound whole at bindings 0 to 6
//! (binding 4 the per-file error flags), the output at binding 7 as a range of the caller's
//! buffer, and the uniform step at binding 8, one slot per step at the device's dynamic
//! offset alignment. One compute pass runs the kernel's list of dispatches and the error
//! flags' copy to the host follows, in one submission. Every binding is checked against the device's
//! limits before anything is created. A kernel module says only what its tables, steps and
//! dispatches are.

use super::abi::LosslessSegment;
use super::bindings::{check_bindings, BindLimits, Binding};
use super::timing::{ticks_ns, TimingBuffers};
use super::upload::STORAGE_USAGE;
use super::GpuDecoder;
use crate::error::{LimitsError, Result};

/// Most workgroups along x or y of one dispatch (WebGPU's default limit), and so most files
/// in one batch (one workgroup row each).
pub(crate) const MAX_GROUPS: u32 = 65535;

/// Workgroups for `items` invocations of a `workgroup`-wide kernel (1 to [`MAX_GROUPS`]).
pub(crate) fn groups(items: u64, workgroup: u32) -> u32 {
    items.div_ceil(workgroup as u64).clamp(1, MAX_GROUPS as u64) as u32
}

/// Bytes of a binding of `words` words (bindings are never empty).
pub(crate) fn bytes(words: usize) -> u64 {
    (words as u64 * 4).max(4)
}

/// Binding of the error flags among the tables.
const ERRORS: usize = 4;

/// One storage table: what it is (for errors), its bytes, and what to upload (`None`: left
/// as created, zeroed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Table<'a> {
    /// Names the binding in errors.
    pub what: &'static str,
    /// Bytes of the binding.
    pub size: u64,
    /// The bytes to write at its start, if any.
    pub data: Option<&'a [u8]>,
}

impl<'a> Table<'a> {
    /// A table of `size` bytes holding `data` at its start.
    pub fn filled(what: &'static str, size: u64, data: &'a [u8]) -> Self {
        Table {
            what,
            size,
            data: Some(data),
        }
    }

    /// A table of `size` bytes the kernel writes.
    pub fn scratch(what: &'static str, size: u64) -> Self {
        Table {
            what,
            size,
            data: None,
        }
    }
}

/// The tables both kernels decode the files' token streams from (bindings 0 to 3, read by
/// `shaders/shared/segments.wgsl`) and the rounds that takes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamTables<'a> {
    /// Binding 0: the files' bytes as words.
    pub input_words: &'a [u32],
    /// Binding 1: one entry per segment.
    pub segments: &'a [LosslessSegment],
    /// Rounds of `decode_segments` (1 at least): the longest segment's values over
    /// `SEGMENT_ROUND`, rounded up.
    pub rounds: u32,
    /// Binding 2: the decode tables (the error-bounded kernel's: then the exception runs).
    pub luts: &'a [u32],
    /// Binding 3: words of the scratch buffer (the residuals first).
    pub words: u32,
}

impl<'a> StreamTables<'a> {
    /// Bindings 0 to 3, named in errors by `names` (input, segments, decode tables, scratch),
    /// the segment table `segment_words` words.
    pub fn tables(&self, names: [&'static str; 4], segment_words: usize) -> [Table<'a>; 4] {
        [
            Table::filled(
                names[0],
                bytes(self.input_words.len()),
                bytemuck::cast_slice(self.input_words),
            ),
            Table::filled(
                names[1],
                bytes(segment_words),
                bytemuck::cast_slice(self.segments),
            ),
            Table::filled(
                names[2],
                bytes(self.luts.len()),
                bytemuck::cast_slice(self.luts),
            ),
            Table::scratch(names[3], bytes(self.words as usize)),
        ]
    }

    /// The dispatches of `decode_segments` (`pipeline`, a `workgroup`-wide kernel), one per
    /// round (1 at least), round `r` at uniform slot `first_slot + r`.
    pub fn decode_rounds<'p>(
        &self,
        pipeline: &'p wgpu::ComputePipeline,
        first_slot: u32,
        workgroup: u32,
    ) -> impl Iterator<Item = Dispatch<'p>> {
        let groups = [groups(self.segments.len() as u64, workgroup), 1];
        (0..self.rounds.max(1)).map(move |r| Dispatch {
            pipeline,
            slot: first_slot + r,
            groups,
        })
    }
}

/// One dispatch: the pipeline, the uniform slot bound for it and the workgroups `[x, y]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dispatch<'a> {
    /// The kernel entry point.
    pub pipeline: &'a wgpu::ComputePipeline,
    /// Its step's slot in the uniform buffer.
    pub slot: u32,
    /// Workgroups along x and y.
    pub groups: [u32; 2],
}

/// The uniform steps of a batch: `T` values at `slot`-byte strides.
pub(crate) struct Steps {
    /// Bytes between slots: the step's size rounded up to the device's offset alignment.
    pub slot: u64,
    size: usize,
    bytes: Vec<u8>,
}

impl Steps {
    /// Lays out `steps` one to a slot on `device`.
    pub fn new<T: bytemuck::Pod>(
        device: &wgpu::Device,
        steps: impl IntoIterator<Item = T>,
    ) -> Self {
        let size = size_of::<T>();
        let slot = (device.limits().min_uniform_buffer_offset_alignment as u64).max(size as u64);
        let mut bytes = Vec::new();
        for s in steps {
            let at = bytes.len();
            bytes.resize(at + slot as usize, 0);
            bytes[at..at + size].copy_from_slice(bytemuck::bytes_of(&s));
        }
        if bytes.is_empty() {
            bytes.resize(slot as usize, 0);
        }
        Steps { slot, size, bytes }
    }

    /// Bytes of the uniform buffer.
    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// The chunked kernels' buffers, kept by the decoder between batches (both kernels share
/// them; a batch holds the lock from its uploads to its flags' read-back): the seven tables,
/// the uniform steps and the flags' host-mapped copy, each the last one if large enough, else a new one of the next power
/// of two bytes (at least 256); never shrunk. Tables are bound as ranges of their batch's
/// size, so `arrayLength` in the kernels sees the batch's tables, not the pool's buffers.
#[derive(Default)]
pub(crate) struct FloatPool {
    tables: [Option<wgpu::Buffer>; 7],
    steps: Option<wgpu::Buffer>,
    /// The error flags' read-back copy (host-mapped).
    flags: Option<wgpu::Buffer>,
}

impl FloatPool {
    /// Makes every buffer large enough for `tables` and `steps` bytes of steps: how many
    /// buffers were (re)created.
    fn ensure(&mut self, device: &wgpu::Device, tables: &[Table<'_>; 7], steps: u64) -> u64 {
        let grow = |slot: &mut Option<wgpu::Buffer>, what: &str, size: u64, usage| {
            if slot.as_ref().is_some_and(|b| b.size() >= size) {
                return 0;
            }
            *slot = Some(device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(what),
                size: size.max(256).next_power_of_two(),
                usage,
                mapped_at_creation: false,
            }));
            1
        };
        let mut grown = 0;
        for (slot, t) in self.tables.iter_mut().zip(tables) {
            grown += grow(slot, t.what, t.size, STORAGE_USAGE);
        }
        grown
            + grow(
                &mut self.steps,
                "l3 chunked-float steps",
                steps,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            )
            + grow(
                &mut self.flags,
                "l3 chunked-float flags read-back",
                tables[ERRORS].size,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )
    }
}

/// A batch's kernel run: its name, bind group layout, tables, output range, steps and
/// dispatches; `files` error flags come back.
pub(crate) struct Run<'a> {
    /// Names the bind group, the pass and the uniform buffer.
    pub label: &'static str,
    /// Names the files in the error of too many.
    pub files_what: &'static str,
    /// The kernel's bind group layout.
    pub layout: &'a wgpu::BindGroupLayout,
    /// Bindings 0 to 6 (4: the error flags).
    pub tables: [Table<'a>; 7],
    /// Binding 7: the output buffer, the byte offset (storage-aligned) and size of the range.
    pub output: (&'a wgpu::Buffer, u64, u64),
    /// Names the output binding in errors.
    pub output_what: &'static str,
    /// Binding 8's steps.
    pub steps: &'a Steps,
    /// The dispatches, in order.
    pub dispatches: &'a [Dispatch<'a>],
    /// Files in the batch (one error flag each).
    pub files: usize,
}

/// What a kernel run gave back.
#[derive(Debug)]
pub(crate) struct Ran {
    /// One error flag per file.
    pub flags: Vec<u32>,
    /// Bytes written to the GPU (tables and steps).
    pub uploaded: u64,
    /// Dispatches recorded.
    pub dispatches: u32,
    /// GPU nanoseconds of the compute pass (timestamps at its beginning and end), where the
    /// decoder's timing is on ([`GpuDecoder::set_timing`]); else `None`.
    pub kernel_ns: Option<u64>,
}

/// Checks every binding, fills the decoder's pooled buffers ([`FloatPool`]), records the
/// dispatches in one compute pass (timed where the decoder's timing is on) and the error
/// flags' copy to the host, submits them as one submission and reads the flags back.
pub(crate) fn run(decoder: &GpuDecoder, r: &Run<'_>, limits: &BindLimits) -> Result<Ran> {
    if r.files as u64 > MAX_GROUPS as u64 {
        return Err(LimitsError::GpuBuffer {
            what: r.files_what,
            needed: r.files as u64,
            max: MAX_GROUPS as u64,
        }
        .into());
    }
    let (output, out_offset, out_size) = r.output;
    check_bindings(
        r.tables
            .iter()
            .map(|t| Binding::whole(t.what, t.size))
            .chain([Binding {
                what: r.output_what,
                buffer_len: output.size(),
                offset: out_offset,
                size: out_size,
                copy: false,
            }]),
        limits,
    )?;
    let d = &decoder.device;
    // The pool stays locked until the flags are read back: another batch on this decoder
    // would otherwise clear them (queue order) before this one's copy.
    let mut pool = decoder.float_pool.lock().unwrap_or_else(|e| e.into_inner());
    let flag_bytes = bytes(r.files);
    // Timing: the pass's timestamps (the first two queries of a chunk's set), resolved and
    // copied to a mapped buffer in the same submission (the image decode's buffers, one
    // chunk).
    let timing = decoder.timing.then(|| {
        let b = TimingBuffers::new(d, 1).expect("one chunk");
        (TimingBuffers::query_set(d), b.resolve, b.readback)
    });
    let flags = decoder.with_error_scopes(|| {
        let grown = pool.ensure(d, &r.tables, r.steps.len());
        decoder.count_allocations(grown);
        let bufs = pool.tables.each_ref().map(|b| b.as_ref().expect("ensured"));
        let steps = pool.steps.as_ref().expect("ensured");
        // Uploaded tables get their data and zeros to the binding's end; the tables the
        // kernel writes are cleared in the pass's encoder (after the uploads, in queue
        // order): what the kernel sees is what fresh zeroed buffers held.
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(r.label),
        });
        for (b, t) in bufs.iter().zip(&r.tables) {
            match t.data {
                Some(data) => {
                    decoder.upload(b, 0, data);
                    let tail = t.size - data.len() as u64;
                    if tail > 0 {
                        decoder.upload(b, data.len() as u64, &vec![0u8; tail as usize]);
                    }
                }
                None => encoder.clear_buffer(b, 0, Some(t.size)),
            }
        }
        decoder.upload(steps, 0, &r.steps.bytes);
        let mut entries: Vec<wgpu::BindGroupEntry<'_>> = bufs
            .iter()
            .zip(&r.tables)
            .enumerate()
            .map(|(i, (b, t))| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: super::device::range(b, 0, t.size),
            })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: 7,
            resource: super::device::range(output, out_offset, out_size),
        });
        entries.push(wgpu::BindGroupEntry {
            binding: 8,
            resource: super::device::range(steps, 0, r.steps.size as u64),
        });
        let group = decoder.bind_group(&wgpu::BindGroupDescriptor {
            label: Some(r.label),
            layout: r.layout,
            entries: &entries,
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(r.label),
                timestamp_writes: timing.as_ref().map(|(qs, _, _)| {
                    wgpu::ComputePassTimestampWrites {
                        query_set: qs,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    }
                }),
            });
            decoder.count_dispatches(r.dispatches.len() as u64);
            for x in r.dispatches {
                pass.set_pipeline(x.pipeline);
                pass.set_bind_group(0, &group, &[(x.slot as u64 * r.steps.slot) as u32]);
                pass.dispatch_workgroups(x.groups[0], x.groups[1], 1);
            }
        }
        // The flags' copy to the pooled staging buffer in the same submission.
        let staging = pool.flags.as_ref().expect("ensured");
        encoder.copy_buffer_to_buffer(bufs[ERRORS], 0, staging, 0, flag_bytes);
        if let Some((qs, resolve, read)) = &timing {
            encoder.resolve_query_set(qs, 0..2, resolve, 0);
            encoder.copy_buffer_to_buffer(resolve, 0, read, 0, resolve.size());
        }
        decoder.submit_commands(encoder.finish());
        Ok(())
    });
    flags?;
    let staging = pool.flags.as_ref().expect("ensured");
    decoder.count_readbacks(1);
    let map = super::map::map_read(staging, 0..flag_bytes);
    let ticks = timing
        .as_ref()
        .map(|(_, _, read)| (read, super::map::map_read(read, 0..read.size())));
    super::readback::wait_idle(d)?;
    pollster::block_on(map.wait())?;
    // The pooled flags buffer is unmapped whatever follows (a later batch copies into it).
    let flags = staging
        .get_mapped_range(0..flag_bytes)
        .map(|view| bytemuck::pod_collect_to_vec::<u8, u32>(&view[..r.files * 4]));
    staging.unmap();
    let flags = flags.map_err(|e| crate::error::Error::Gpu(format!("map failed: {e}")))?;
    // The timestamps' buffers are this run's own.
    let kernel_ns = match ticks {
        Some((read, request)) => {
            pollster::block_on(request.wait())?;
            let t: Vec<u64> = {
                let view = read
                    .get_mapped_range(..)
                    .map_err(|e| crate::error::Error::Gpu(format!("map failed: {e}")))?;
                bytemuck::pod_collect_to_vec(&view[..])
            };
            Some(ticks_ns(t[0], t[1], decoder.queue.get_timestamp_period()))
        }
        None => None,
    };
    drop(pool);
    let uploaded = r
        .tables
        .iter()
        .filter_map(|t| t.data)
        .map(<[u8]>::len)
        .sum::<usize>() as u64
        + r.steps.len();
    Ok(Ran {
        flags,
        uploaded,
        dispatches: r.dispatches.len() as u32,
        kernel_ns,
    })
}
