//! [`GpuBlocks`]: the block-coded arrays' kernels (`shaders/blocks.wgsl`) on a device. An
//! encode is one submission of five dispatches (`blocks_histogram`, `blocks_code`,
//! `blocks_sizes`, `blocks_scan`, `blocks_pack`) from values in one buffer to the stream in
//! another; a decode is one dispatch (`blocks_decode`). No host work between the dispatches
//! and nothing read back but what the caller asks for. The data side (`field::blocks::gpu`)
//! computes the uniform and checks streams; this module knows buffers, bindings and
//! dispatches.

use super::abi::{BlocksParams, BLOCKS_SCRATCH_WORDS};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::{request_device, select_adapter, Family, Kernel, Kernels};
use super::map::map_read;
use super::readback::{read_buffer, read_flags, wait_idle};
use super::GpuDecoder;
use crate::error::{Error, Result};

/// The block-coded arrays' kernels on a device (compiled on first use).
pub struct GpuBlocks {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    kernels: Kernels,
}

impl std::fmt::Debug for GpuBlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBlocks").finish_non_exhaustive()
    }
}

/// A buffer and the binding's name (for limit errors).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlocksBuffer<'a> {
    /// The buffer (usage `STORAGE`), bound whole.
    pub buffer: &'a wgpu::Buffer,
    /// Its name in errors.
    pub what: &'static str,
}

/// Bytes of one job's scratch slot (a multiple of every storage-binding offset alignment).
const SCRATCH_BYTES: u64 = 4 * BLOCKS_SCRATCH_WORDS as u64;
const _: () = assert!(SCRATCH_BYTES.is_multiple_of(256));

/// One encode or decode of one stream in a [`GpuBlocks::submit`]: its uniform, its buffers,
/// and the entries it runs (each over its count of workgroups; 0: skipped).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlocksJob<'a> {
    params: BlocksParams,
    src: BlocksBuffer<'a>,
    dst: BlocksBuffer<'a>,
    entries: [(&'static str, u32); 5],
}

impl<'a> BlocksJob<'a> {
    /// The encode `params` describes: values from word `params.src_at` of `src`, the stream
    /// from word `params.dst_at` of `dst` (which must hold the stream's capacity: the data
    /// side checks); `groups` workgroups for the group passes (the most any stride the
    /// encoder may pick needs).
    pub(crate) fn encode(
        params: BlocksParams,
        src: BlocksBuffer<'a>,
        dst: BlocksBuffer<'a>,
        groups: u32,
    ) -> Self {
        let value_groups = params.count.div_ceil(crate::format::blocks::GROUP as u32);
        BlocksJob {
            params,
            src,
            dst,
            entries: [
                ("blocks_histogram", value_groups),
                ("blocks_code", 1),
                ("blocks_sizes", groups),
                ("blocks_scan", 1),
                ("blocks_pack", groups),
            ],
        }
    }

    /// The decode `params` describes: the stream from word `params.src_at` of `src` (its
    /// head and code checked by the data side), the values from word `params.dst_at` of
    /// `dst`.
    pub(crate) fn decode(
        params: BlocksParams,
        src: BlocksBuffer<'a>,
        dst: BlocksBuffer<'a>,
    ) -> Self {
        let workgroups = params.blocks.div_ceil(256);
        BlocksJob {
            params,
            src,
            dst,
            entries: [
                ("blocks_decode", workgroups),
                ("", 0),
                ("", 0),
                ("", 0),
                ("", 0),
            ],
        }
    }
}

/// Workgroups (x, y) of `groups` groups.
fn grid(groups: u32) -> (u32, u32) {
    let x = groups.clamp(1, 65_535);
    (x, groups.div_ceil(x).max(1))
}

impl GpuBlocks {
    /// The kernels on the caller's device and queue (handles are cloned).
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Self {
        GpuBlocks {
            device: device.clone(),
            queue: queue.clone(),
            kernels: Kernels::new(device),
        }
    }

    /// The kernels on the decoder's device and queue.
    pub fn from_decoder(decoder: &GpuDecoder) -> Self {
        GpuBlocks::new(decoder.device(), decoder.queue())
    }

    /// The kernels on a new device of the adapter [`select_adapter`] picks.
    pub fn new_default() -> Result<Self> {
        let (device, queue) = request_device(&select_adapter()?)?;
        Ok(GpuBlocks::new(&device, &queue))
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    fn family(&self) -> Result<&Family> {
        self.kernels.kernel(Kernel::Blocks)
    }

    /// Submits `jobs` (see [`BlocksJob`]) in one submission, inside error scopes: each its
    /// entries (each over its count of workgroups) with its own `src`, `dst`, uniform and
    /// [`BLOCKS_SCRATCH_WORDS`] words of `scratch` from word `BLOCKS_SCRATCH_WORDS * j`
    /// (cleared first; `scratch` from [`scratch`](Self::scratch) for as many jobs), in order,
    /// then `then`'s commands (copies of what the caller reads back). What a decode finds
    /// malformed sets bits of its scratch slot's first word.
    pub(crate) fn submit(
        &self,
        jobs: &[BlocksJob<'_>],
        scratch: &wgpu::Buffer,
        then: impl FnOnce(&mut wgpu::CommandEncoder),
    ) -> Result<wgpu::SubmissionIndex> {
        let limits = BindLimits::of(&self.device);
        check_bindings(
            jobs.iter()
                .flat_map(|j| [j.src, j.dst])
                .map(|b| Binding::whole(b.what, b.buffer.size())),
            &limits,
        )?;
        let slot = SCRATCH_BYTES;
        if scratch.size() < slot * jobs.len() as u64 {
            return Err(Error::Gpu(format!(
                "the block kernels' scratch holds {} bytes, {} jobs need {}",
                scratch.size(),
                jobs.len(),
                slot * jobs.len() as u64
            )));
        }
        let family = self.family()?;
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        // One uniform slot per job, at offsets every binding may start at.
        let uniform_slot = (size_of::<BlocksParams>() as u64)
            .next_multiple_of(self.device.limits().min_uniform_buffer_offset_alignment as u64);
        let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 blocks params"),
            size: uniform_slot * jobs.len().max(1) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut bytes = vec![0u8; uniform.size() as usize];
        for (j, job) in jobs.iter().enumerate() {
            let at = j * uniform_slot as usize;
            bytes[at..at + size_of::<BlocksParams>()]
                .copy_from_slice(bytemuck::bytes_of(&job.params));
        }
        self.queue.write_buffer(&uniform, 0, &bytes);
        let groups: Vec<wgpu::BindGroup> = jobs
            .iter()
            .enumerate()
            .map(|(j, job)| {
                fn range(buffer: &wgpu::Buffer, at: u64, size: u64) -> wgpu::BindingResource<'_> {
                    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer,
                        offset: at,
                        size: std::num::NonZeroU64::new(size),
                    })
                }
                self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 blocks"),
                    layout: &family.bgl,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: job.src.buffer.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: job.dst.buffer.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: range(scratch, slot * j as u64, slot),
                        },
                        wgpu::BindGroupEntry {
                            binding: 3,
                            resource: range(
                                &uniform,
                                uniform_slot * j as u64,
                                size_of::<BlocksParams>() as u64,
                            ),
                        },
                    ],
                })
            })
            .collect();
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("l3 blocks"),
            });
        encoder.clear_buffer(scratch, 0, Some(slot * jobs.len() as u64));
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 blocks"),
                timestamp_writes: None,
            });
            for (job, group) in jobs.iter().zip(&groups) {
                pass.set_bind_group(0, group, &[]);
                for &(entry, workgroups) in &job.entries {
                    if workgroups == 0 {
                        continue;
                    }
                    let (x, y) = grid(workgroups);
                    pass.set_pipeline(family.entry(entry));
                    pass.dispatch_workgroups(x, y, 1);
                }
            }
        }
        then(&mut encoder);
        let index = self.queue.submit([encoder.finish()]);
        for scope in [validation, oom] {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::Gpu(format!("GPU block coding failed: {e}")));
            }
        }
        Ok(index)
    }

    /// A scratch buffer for `jobs` jobs of [`encode`](Self::encode) and
    /// [`decode`](Self::decode) (their histograms, code and error flags:
    /// [`BLOCKS_SCRATCH_WORDS`] words each).
    pub(crate) fn scratch(&self, jobs: usize) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 blocks scratch"),
            size: SCRATCH_BYTES * jobs.max(1) as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// A buffer of `words` words the host reads (`MAP_READ`) after copies into it.
    pub(crate) fn read_back_buffer(&self, words: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 blocks read-back"),
            size: 4 * words.max(1),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// The words of `buffer` (from [`read_back_buffer`](Self::read_back_buffer), its copies
    /// submitted): waits for the device (the one wait) and maps it.
    pub(crate) fn read_mapped(&self, buffer: &wgpu::Buffer) -> Result<Vec<u32>> {
        let request = map_read(buffer, 0..buffer.size());
        wait_idle(&self.device)?;
        pollster::block_on(request.wait())?;
        read_flags(buffer, (buffer.size() / 4) as usize)
    }

    /// `words` words at word `at` of `buffer` (usage `COPY_SRC`), read back (blocking).
    pub fn read_words(&self, buffer: &wgpu::Buffer, at: u64, words: u64) -> Result<Vec<u32>> {
        let b = read_buffer(&self.device, &self.queue, buffer, at * 4, words * 4)?;
        Ok(bytemuck::pod_collect_to_vec(&b))
    }
}

/// Workgroup size check: one encode workgroup is one group of the format.
const _: () = assert!(super::abi::BLOCKS_WORKGROUP_SIZE as usize == crate::format::blocks::GROUP);
