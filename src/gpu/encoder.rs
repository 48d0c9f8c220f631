//! [`GpuEncoder`]: the error-bounded encoder's kernels (`shaders/encode_quantise.wgsl`,
//! `encode_differences.wgsl`, `encode_histogram.wgsl`, `encode_pack.wgsl`) on a device, and
//! their dispatch in four submissions ([`EncodeRun`]): the extent of the regular values
//! (read back: 2 words); the bins and the exception fill, with the axis sets' estimate when
//! the caller gives no set (read back: its histograms); the differences and the token
//! histograms (read back: the histograms and one flag bit per value); the bit packing
//! (read back: the packed segments). The data side (`field::bounded::gpu_encode`) computes
//! the parameters between them and assembles the file; this module knows buffers, bindings
//! and dispatches, nothing of the format.

use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::{request_device, select_adapter, Family, Kernel, Kernels};
use super::encode_abi::{
    EncodeParams, EncodeSegment, ENCODE_WORKGROUP_SIZE, EST_ITEM, EST_WORDS, FILL_WORDS,
    HIST_WORDS, RANGE_ITEM,
};
use super::readback::read_buffer;
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::{Error, Result};

/// The error-bounded encoder on a GPU: its device and its kernel family (compiled on first
/// use, as the decoder's are: `Kernel::Encode`). Encode with
/// `l3::field::gpu::encode_bounded_gpu` (the engine knows no formats; see ARCHITECTURE.md).
pub struct GpuEncoder {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    /// The encode kernel family ([`Kernel::Encode`]), compiled on first use.
    kernels: Kernels,
}

impl std::fmt::Debug for GpuEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEncoder").finish_non_exhaustive()
    }
}

/// Runs `f` inside validation and out-of-memory error scopes of `device`.
fn scoped<T>(device: &wgpu::Device, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let r = f();
    for scope in [validation, oom] {
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("GPU encode failed: {e}")));
        }
    }
    r
}

impl GpuEncoder {
    /// An encoder on the caller's device and queue (handles are cloned). Its pipelines are
    /// compiled on the first encode ([`Kernels`]).
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<Self> {
        Ok(GpuEncoder {
            device: device.clone(),
            queue: queue.clone(),
            kernels: Kernels::new(device),
        })
    }

    /// The encode kernel family, compiled on its first use.
    fn family(&self) -> Result<&Family> {
        self.kernels.kernel(Kernel::Encode)
    }

    /// An encoder on the decoder's device and queue.
    pub fn from_decoder(decoder: &GpuDecoder) -> Result<Self> {
        GpuEncoder::new(decoder.device(), decoder.queue())
    }

    /// An encoder on a new device of the adapter [`select_adapter`] picks.
    pub fn new_default() -> Result<Self> {
        let (device, queue) = request_device(&select_adapter()?)?;
        GpuEncoder::new(&device, &queue)
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
}

/// The values to encode: `count` f32 at byte `offset` of `buffer` (usage `STORAGE`; the
/// offset on the device's storage alignment).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EncodeInput<'a> {
    /// The buffer.
    pub buffer: &'a wgpu::Buffer,
    /// Byte offset of the first value.
    pub offset: u64,
    /// Values.
    pub count: u32,
}

/// Workgroups (x, y) of a dispatch of one invocation per item (`item()` in
/// `shared/encode_bindings.wgsl`).
fn groups(items: u64) -> (u32, u32) {
    let wg = items.div_ceil(ENCODE_WORKGROUP_SIZE as u64).max(1);
    let x = wg.min(65_535);
    (x as u32, wg.div_ceil(x) as u32)
}

/// Bytes of a binding of `words` words (never empty).
fn bytes(words: u64) -> u64 {
    (words * 4).max(4)
}

/// One encode in flight: its buffers, kept between the submissions.
pub(crate) struct EncodeRun<'a> {
    enc: &'a GpuEncoder,
    /// The encode kernels.
    kernel: &'a Family,
    input: EncodeInput<'a>,
    q: wgpu::Buffer,
    z: wgpu::Buffer,
    hist: wgpu::Buffer,
    segs: wgpu::Buffer,
    extent: wgpu::Buffer,
    fill: wgpu::Buffer,
    params: wgpu::Buffer,
    limits: BindLimits,
    segments: u32,
}

impl<'a> EncodeRun<'a> {
    /// Checks every binding against the device's limits, then creates the buffers of an
    /// encode of `input` with `segments` segments and `blocks` fill blocks.
    pub fn new(
        enc: &'a GpuEncoder,
        input: EncodeInput<'a>,
        segments: u32,
        blocks: u32,
    ) -> Result<Self> {
        let limits = BindLimits::of(&enc.device);
        let n = input.count as u64;
        let sizes = [
            ("encoder bins", bytes(n)),
            ("encoder residuals", bytes(n)),
            (
                "encoder histograms",
                bytes(3 * segments as u64 * HIST_WORDS as u64),
            ),
            (
                "encoder segments",
                bytes(segments.max(1) as u64 * (size_of::<EncodeSegment>() as u64 / 4)),
            ),
            ("encoder extent", bytes(2)),
            (
                "encoder fill blocks and flags",
                bytes(FILL_WORDS as u64 * blocks as u64 + 1 + n.div_ceil(32)),
            ),
        ];
        check_bindings(
            sizes
                .iter()
                .map(|&(what, size)| Binding::whole(what, size))
                .chain([Binding {
                    what: "encoder input",
                    buffer_len: input.buffer.size(),
                    offset: input.offset,
                    size: bytes(n),
                    copy: false,
                }]),
            &limits,
        )?;
        let d = &enc.device;
        let b: Vec<wgpu::Buffer> = sizes
            .iter()
            .map(|&(what, size)| storage_buffer(d, what, size))
            .collect();
        let params = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("encoder params"),
            size: size_of::<EncodeParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let [q, z, hist, segs, extent, fill] = <[wgpu::Buffer; 6]>::try_from(b)
            .map_err(|_| Error::Gpu("internal: encoder buffers".into()))?;
        Ok(EncodeRun {
            enc,
            kernel: enc.family()?,
            input,
            q,
            z,
            hist,
            segs,
            extent,
            fill,
            params,
            limits,
            segments,
        })
    }

    /// A bind group of the run's buffers with `results` (the histograms or the packed
    /// bits) and `codes`.
    fn group(&self, results: &wgpu::Buffer, codes: &wgpu::Buffer) -> wgpu::BindGroup {
        let n = self.input.count as u64;
        let bufs: [&wgpu::Buffer; 7] = [
            &self.q,
            &self.z,
            results,
            &self.segs,
            codes,
            &self.extent,
            &self.fill,
        ];
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: super::device::range(self.input.buffer, self.input.offset, bytes(n)),
        }];
        for (i, b) in bufs.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: b.as_entire_binding(),
            });
        }
        entries.push(wgpu::BindGroupEntry {
            binding: 8,
            resource: self.params.as_entire_binding(),
        });
        self.enc
            .device
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("l3 encode"),
                layout: &self.kernel.bgl,
                entries: &entries,
            })
    }

    /// Records `(pipeline, items)` dispatches in one compute pass and submits them.
    fn submit(&self, group: &wgpu::BindGroup, steps: &[(&wgpu::ComputePipeline, u64)]) {
        let d = &self.enc.device;
        let mut encoder = d.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("l3 encode"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 encode"),
                timestamp_writes: None,
            });
            pass.set_bind_group(0, group, &[]);
            for &(p, items) in steps {
                let (x, y) = groups(items);
                pass.set_pipeline(p);
                pass.dispatch_workgroups(x, y, 1);
            }
        }
        self.enc.queue.submit([encoder.finish()]);
    }

    fn read(&self, buffer: &wgpu::Buffer, words: u64) -> Result<Vec<u32>> {
        let b = read_buffer(&self.enc.device, &self.enc.queue, buffer, 0, words * 4)?;
        Ok(bytemuck::pod_collect_to_vec(&b))
    }

    /// Submission 1: the order keys of the smallest and largest regular value (`u32::MAX`
    /// and 0 without one); `params` needs `count` and the fill value.
    pub fn extent(&self, params: &EncodeParams) -> Result<[u32; 2]> {
        scoped(&self.enc.device, || {
            let q = &self.enc.queue;
            q.write_buffer(&self.params, 0, bytemuck::bytes_of(params));
            q.write_buffer(&self.extent, 0, bytemuck::cast_slice(&[u32::MAX, 0u32]));
            let dummy = storage_buffer(&self.enc.device, "encoder placeholder", 4);
            let group = self.group(&self.hist, &dummy);
            let per_wg = (RANGE_ITEM * ENCODE_WORKGROUP_SIZE) as u64;
            let items = (params.count as u64).div_ceil(per_wg) * ENCODE_WORKGROUP_SIZE as u64;
            self.submit(&group, &[(self.kernel.entry("value_range"), items)]);
            let e = self.read(&self.extent, 2)?;
            Ok([e[0], e[1]])
        })
    }

    /// Submission 2: the bins and the exception fill, and with `params.sets` nonzero the
    /// axis sets' estimate (read back: `EST_WORDS` per workgroup of `EST_ITEM x 64` values
    /// and set; empty without).
    pub fn bins(&self, params: &EncodeParams) -> Result<Vec<u32>> {
        let e = self.enc;
        let n = params.count as u64;
        let per = (EST_ITEM * ENCODE_WORKGROUP_SIZE) as u64;
        let groups = n.div_ceil(per);
        let words = groups * params.sets as u64 * EST_WORDS as u64;
        if params.sets > 0 {
            let size = bytes(words);
            check_bindings(
                [Binding {
                    what: "encoder estimate",
                    buffer_len: size,
                    offset: 0,
                    size,
                    copy: false,
                }],
                &self.limits,
            )?;
        }
        scoped(&e.device, || {
            let q = &e.queue;
            q.write_buffer(&self.params, 0, bytemuck::bytes_of(params));
            let dummy = storage_buffer(&e.device, "encoder placeholder", 4);
            let est = if params.sets > 0 {
                storage_buffer(&e.device, "encoder estimate", bytes(words))
            } else {
                storage_buffer(&e.device, "encoder placeholder", 4)
            };
            let group = self.group(&est, &dummy);
            let blocks = params.blocks as u64;
            let mut steps = vec![
                (self.kernel.entry("quantise"), n),
                (self.kernel.entry("fill_blocks"), blocks),
                (self.kernel.entry("fill_carry"), 1),
                (self.kernel.entry("fill_apply"), blocks),
            ];
            if params.sets > 0 {
                steps.push((
                    self.kernel.entry("estimate"),
                    groups * ENCODE_WORKGROUP_SIZE as u64,
                ));
            }
            self.submit(&group, &steps);
            if params.sets > 0 {
                self.read(&est, words)
            } else {
                Ok(Vec::new())
            }
        })
    }

    /// Submission 3: the differences along `params.axes` and the histograms of `segments`
    /// (their `start` and `count`); returns the histograms (`HIST_WORDS` per segment and
    /// token set) and the exception flags (a bit per value).
    pub fn histograms(
        &self,
        params: &EncodeParams,
        segments: &[EncodeSegment],
    ) -> Result<(Vec<u32>, Vec<u32>)> {
        scoped(&self.enc.device, || {
            let e = self.enc;
            let q = &e.queue;
            q.write_buffer(&self.params, 0, bytemuck::bytes_of(params));
            q.write_buffer(&self.segs, 0, bytemuck::cast_slice(segments));
            let dummy = storage_buffer(&e.device, "encoder placeholder", 4);
            let group = self.group(&self.hist, &dummy);
            let n = params.count as u64;
            self.submit(
                &group,
                &[
                    (self.kernel.entry("differences"), n),
                    (self.kernel.entry("histogram"), 3 * self.segments as u64),
                ],
            );
            let hist = self.read(&self.hist, 3 * self.segments as u64 * HIST_WORDS as u64)?;
            let at = params.flags_at as u64 * 4;
            let flags = read_buffer(&e.device, q, &self.fill, at, n.div_ceil(32) * 4)?;
            let flags = bytemuck::pod_collect_to_vec(&flags);
            Ok((hist, flags))
        })
    }

    /// Submission 4: the segments' bits (`segments` with their `set`, `codes` and
    /// `out_word`; `codes` the code tables) into `words` words, read back.
    pub fn pack(
        &self,
        params: &EncodeParams,
        segments: &[EncodeSegment],
        codes: &[u32],
        words: u64,
    ) -> Result<Vec<u32>> {
        check_bindings(
            [
                ("encoder codes", bytes(codes.len() as u64)),
                ("encoder packed bits", bytes(words)),
            ]
            .map(|(what, size)| Binding {
                what,
                buffer_len: size,
                offset: 0,
                size,
                copy: false,
            }),
            &self.limits,
        )?;
        scoped(&self.enc.device, || {
            let e = self.enc;
            let q = &e.queue;
            let codes_buf = storage_buffer(&e.device, "encoder codes", bytes(codes.len() as u64));
            let packed = storage_buffer(&e.device, "encoder packed bits", bytes(words));
            q.write_buffer(&self.params, 0, bytemuck::bytes_of(params));
            q.write_buffer(&self.segs, 0, bytemuck::cast_slice(segments));
            q.write_buffer(&codes_buf, 0, bytemuck::cast_slice(codes));
            let group = self.group(&packed, &codes_buf);
            self.submit(&group, &[(self.kernel.entry("pack"), self.segments as u64)]);
            self.read(&packed, words)
        })
    }
}

/// A storage buffer of the encoder's device holding `bytes` (at least 4 bytes).
pub(crate) fn upload_values(enc: &GpuEncoder, bytes: &[u8]) -> wgpu::Buffer {
    let buffer = storage_buffer(&enc.device, "encoder input", (bytes.len() as u64).max(4));
    enc.queue.write_buffer(&buffer, 0, bytes);
    buffer
}

/// `size` bytes at `offset` of `buffer` (usage `COPY_SRC`), read back.
pub(crate) fn read_values(
    enc: &GpuEncoder,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>> {
    scoped(&enc.device, || {
        read_buffer(&enc.device, &enc.queue, buffer, offset, size)
    })
}
