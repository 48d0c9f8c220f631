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
use super::readback::read_buffer;
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

    /// Records and submits `entries` (each over its count of workgroups) with `src`, `dst`
    /// and `scratch` bound whole (`scratch` cleared first), inside error scopes.
    fn run(
        &self,
        params: &BlocksParams,
        src: BlocksBuffer<'_>,
        dst: BlocksBuffer<'_>,
        scratch: &wgpu::Buffer,
        entries: &[(&str, u32)],
    ) -> Result<wgpu::SubmissionIndex> {
        let limits = BindLimits::of(&self.device);
        check_bindings(
            [src, dst]
                .into_iter()
                .map(|b| Binding::whole(b.what, b.buffer.size())),
            &limits,
        )?;
        let family = self.family()?;
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let uniform = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 blocks params"),
            size: size_of::<BlocksParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue
            .write_buffer(&uniform, 0, bytemuck::bytes_of(params));
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("l3 blocks"),
            layout: &family.bgl,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: src.buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: dst.buffer.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: scratch.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: uniform.as_entire_binding(),
                },
            ],
        });
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("l3 blocks"),
            });
        encoder.clear_buffer(scratch, 0, None);
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 blocks"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, &group, &[]);
            for &(entry, workgroups) in entries {
                if workgroups == 0 {
                    continue;
                }
                let (x, y) = grid(workgroups);
                pass.set_pipeline(family.entry(entry));
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        let index = self.queue.submit([encoder.finish()]);
        for scope in [validation, oom] {
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::Gpu(format!("GPU block coding failed: {e}")));
            }
        }
        Ok(index)
    }

    /// A scratch buffer for [`encode`](Self::encode) and [`decode`](Self::decode) (their
    /// histograms, code and error flags).
    pub(crate) fn scratch(&self) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 blocks scratch"),
            size: 4 * BLOCKS_SCRATCH_WORDS as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Submits the encode `params` describes: values from word `params.src_at` of `src`,
    /// the stream from word `params.dst_at` of `dst` (which must hold the stream's
    /// capacity: the data side checks); `groups` workgroups for the group passes (the most
    /// any stride the encoder may pick needs).
    pub(crate) fn encode(
        &self,
        params: &BlocksParams,
        src: BlocksBuffer<'_>,
        dst: BlocksBuffer<'_>,
        scratch: &wgpu::Buffer,
        groups: u32,
    ) -> Result<wgpu::SubmissionIndex> {
        let value_groups = params.count.div_ceil(crate::format::blocks::GROUP as u32);
        self.run(
            params,
            src,
            dst,
            scratch,
            &[
                ("blocks_histogram", value_groups),
                ("blocks_code", 1),
                ("blocks_sizes", groups),
                ("blocks_scan", 1),
                ("blocks_pack", groups),
            ],
        )
    }

    /// Submits the decode `params` describes: the stream from word `params.src_at` of
    /// `src` (its head and code checked by the data side), the values from word
    /// `params.dst_at` of `dst`; what the kernel finds malformed sets bits of `scratch`'s
    /// first word.
    pub(crate) fn decode(
        &self,
        params: &BlocksParams,
        src: BlocksBuffer<'_>,
        dst: BlocksBuffer<'_>,
        scratch: &wgpu::Buffer,
    ) -> Result<wgpu::SubmissionIndex> {
        let workgroups = params.blocks.div_ceil(256);
        self.run(params, src, dst, scratch, &[("blocks_decode", workgroups)])
    }

    /// `words` words at word `at` of `buffer` (usage `COPY_SRC`), read back (blocking).
    pub fn read_words(&self, buffer: &wgpu::Buffer, at: u64, words: u64) -> Result<Vec<u32>> {
        let b = read_buffer(&self.device, &self.queue, buffer, at * 4, words * 4)?;
        Ok(bytemuck::pod_collect_to_vec(&b))
    }
}

/// Workgroup size check: one encode workgroup is one group of the format.
const _: () = assert!(super::abi::BLOCKS_WORKGROUP_SIZE as usize == crate::format::blocks::GROUP);
