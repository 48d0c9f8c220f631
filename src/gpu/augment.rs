//! Augmentation on the GPU ([`GpuDecoder::augment`]): each image of a decoded batch cropped,
//! resized, flipped and normalised into one f32 NCHW tensor buffer by `shaders/augment.wgsl`,
//! the twin of [`crate::loader::Augment::apply`].

use super::abi::{strided_workgroups, AugmentJob, AUGMENT_WORKGROUP_SIZE};
use super::bindings::{check_bindings, BindLimits, Binding};
use super::device::range;
use super::readback::{read_buffer, GpuBatch, ImageLayout};
use super::upload::storage_buffer;
use super::GpuDecoder;
use crate::error::{LimitsError, ParameterError, Result};
use crate::loader::augment::source_channels;
use crate::loader::{Augment, AugmentParams, Tensor, TensorType};

/// A batch tensor on the GPU: `images x channels x height x width` f32 or f16 values.
#[derive(Debug)]
pub struct GpuTensor {
    /// The values (usage `STORAGE | COPY_SRC`).
    pub buffer: wgpu::Buffer,
    /// `[images, channels, height, width]`.
    pub shape: [usize; 4],
    /// The element type.
    pub element: TensorType,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
}

impl GpuTensor {
    /// Copies the tensor back to the CPU (blocking).
    pub fn read_back(&self) -> Result<Tensor> {
        let n = self.shape.iter().product::<usize>();
        let len = match self.element {
            TensorType::F32 => n as u64 * 4,
            TensorType::F16 => n as u64 * 2,
        };
        if len == 0 {
            return Ok(Tensor::with_capacity(self.element, 0));
        }
        let bytes = read_buffer(
            &self.device,
            &self.queue,
            &self.buffer,
            0,
            len.next_multiple_of(4),
        )?;
        Ok(match self.element {
            TensorType::F32 => Tensor::F32(bytemuck::pod_collect_to_vec(&bytes)),
            TensorType::F16 => {
                let mut v: Vec<u16> = bytemuck::pod_collect_to_vec(&bytes);
                v.truncate(n);
                Tensor::F16(v)
            }
        })
    }
}

impl GpuDecoder {
    /// Augments image `i` of `batch` (interleaved, as [`GpuDecoder::decode_batch`] or
    /// [`GpuDecoder::decode_levels`] produce) with `params[i]` into image `i` of one f32 NCHW
    /// tensor: the GPU twin of [`Augment::apply`], equal within float tolerance (fused
    /// multiply-adds and WGSL's division precision; see the GPU tests).
    pub fn augment(
        &self,
        batch: &GpuBatch,
        params: &[AugmentParams],
        augment: &Augment,
    ) -> Result<GpuTensor> {
        let plan = plan_augment(
            &batch.images,
            params,
            augment,
            &BindLimits::of(&self.device),
        )?;
        check_bindings(
            plan.bindings(&batch.images, batch.buffer.size()),
            &plan.limits,
        )?;
        self.with_error_scopes(|| self.submit_augment(batch, &plan, augment.output))
    }

    /// Uploads the jobs and dispatches `augment.wgsl` once per image of a checked plan.
    fn submit_augment(
        &self,
        batch: &GpuBatch,
        plan: &AugmentPlan,
        element: TensorType,
    ) -> Result<GpuTensor> {
        let out = storage_buffer(&self.device, "l3 augmented batch", plan.bytes);
        let slot = self.uniform_align;
        let jobs_buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("l3 augment jobs"),
            size: (plan.jobs.len() as u64 * slot).max(slot),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        for (i, job) in plan.jobs.iter().enumerate() {
            self.queue
                .write_buffer(&jobs_buffer, i as u64 * slot, bytemuck::bytes_of(job));
        }
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("l3 augment"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("l3 augment"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipelines.augment);
            for (i, l) in batch.images.iter().enumerate() {
                let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("l3 augment"),
                    layout: &self.pipelines.augment_bgl,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: range(
                                &jobs_buffer,
                                i as u64 * slot,
                                size_of::<AugmentJob>() as u64,
                            ),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: range(&batch.buffer, l.offset, l.len.next_multiple_of(4)),
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: out.as_entire_binding(),
                        },
                    ],
                });
                let groups = strided_workgroups(plan.per, AUGMENT_WORKGROUP_SIZE);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(groups, 1, 1);
            }
        }
        self.queue.submit([encoder.finish()]);
        Ok(GpuTensor {
            buffer: out,
            shape: plan.shape,
            element,
            device: self.device.clone(),
            queue: self.queue.clone(),
        })
    }
}

/// The augment stage of one batch: a job per image and the output tensor's size (a pure
/// function of the decoded images, the parameters and the device's limits).
#[derive(Debug, Clone)]
pub struct AugmentPlan {
    jobs: Vec<AugmentJob>,
    /// Values per image.
    per: u64,
    /// Bytes of the output tensor.
    pub bytes: u64,
    /// `[images, channels, height, width]`.
    pub shape: [usize; 4],
    /// The limits it was planned for.
    pub limits: BindLimits,
}

impl AugmentPlan {
    /// Every storage range the stage binds, for [`check_bindings`]: each decoded image of
    /// `images` (in a buffer of `batch_len` bytes) and the whole output.
    pub fn bindings<'a>(
        &'a self,
        images: &'a [ImageLayout],
        batch_len: u64,
    ) -> impl Iterator<Item = Binding> + 'a {
        let out = Binding {
            what: "augmented batch tensor",
            buffer_len: self.bytes,
            offset: 0,
            size: self.bytes,
            copy: false,
        };
        images
            .iter()
            .map(move |l| Binding {
                what: "decoded image binding (augment reads each image whole)",
                buffer_len: batch_len,
                offset: l.offset,
                size: l.len.next_multiple_of(4).max(4),
                copy: false,
            })
            .chain(std::iter::once(out))
    }
}

/// Plans the augment stage (see [`AugmentPlan`]): checks the parameters (one per image, each
/// crop inside its padded image, channels the augment can take) and the tensor's size.
pub fn plan_augment(
    images: &[ImageLayout],
    params: &[AugmentParams],
    augment: &Augment,
    limits: &BindLimits,
) -> Result<AugmentPlan> {
    if params.len() != images.len() {
        return Err(ParameterError::InvalidOption {
            name: "params",
            value: params.len() as u64,
            reason: "one per image of the batch",
        }
        .into());
    }
    if images.iter().any(|l| l.planar) {
        return Err(ParameterError::InvalidOption {
            name: "batch layout",
            value: 0,
            reason: "augment reads interleaved batches",
        }
        .into());
    }
    let per = augment.output_len() as u64;
    let half = augment.output == TensorType::F16;
    if half && per % 2 == 1 {
        return Err(ParameterError::InvalidOption {
            name: "augment output",
            value: per,
            reason: "f16 output needs an even number of values per image",
        }
        .into());
    }
    let shape = [
        params.len(),
        augment.channels as usize,
        augment.size.1 as usize,
        augment.size.0 as usize,
    ];
    let values = per.saturating_mul(params.len() as u64);
    let bytes = values.saturating_mul(if half { 2 } else { 4 }).max(4);
    if bytes > limits.max_binding || values > u32::MAX as u64 {
        return Err(LimitsError::GpuBuffer {
            what: "augmented batch tensor",
            needed: bytes,
            max: limits.max_binding,
        }
        .into());
    }
    let mut jobs = Vec::with_capacity(images.len());
    for (i, (l, p)) in images.iter().zip(params).enumerate() {
        let (x, y, w, h) = p.crop;
        let pad = augment.padding as u64;
        let fits =
            |start: u32, len: u32, size: u32| start as u64 + len as u64 <= size as u64 + 2 * pad;
        if w == 0 || h == 0 || !fits(x, w, l.width) || !fits(y, h, l.height) {
            return Err(ParameterError::InvalidOption {
                name: "crop",
                value: i as u64,
                reason: "the crop must lie inside its image",
            }
            .into());
        }
        let sources = source_channels(l.channels, augment.channels)?;
        let packed = sources
            .iter()
            .enumerate()
            .fold(0u32, |acc, (c, &s)| acc | (s as u32) << (8 * c));
        jobs.push(AugmentJob {
            width: l.width,
            height: l.height,
            channels: l.channels as u32,
            depth: l.depth as u32,
            crop_x: x,
            crop_y: y,
            crop_w: w,
            crop_h: h,
            out_w: augment.size.0,
            out_h: augment.size.1,
            out_c: augment.channels as u32,
            flip: p.flip as u32,
            dst_offset: (i as u64 * if half { per / 2 } else { per }) as u32,
            source_channels: packed,
            rot90: p.rot90 as u32,
            padding: augment.padding,
            noise_seed: p.noise_seed,
            general: p.is_general(augment.padding) as u32,
            half: half as u32,
            cos_a: p.rotation.0,
            sin_a: p.rotation.1,
            fill: augment.fill,
            noise_std: augment.noise_std,
            mean: augment.normalize.mean,
            std_dev: augment.normalize.std,
            ..Default::default()
        });
    }
    Ok(AugmentPlan {
        jobs,
        per,
        bytes,
        shape,
        limits: *limits,
    })
}
