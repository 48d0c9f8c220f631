//! The loader's GPU stage (feature `gpu`): augmentation of a decoded batch ([`augment`]), each
//! image cropped, resized, flipped and normalised into one f32 or f16 NCHW tensor
//! ([`GpuTensor`]) by the engine's augment kernel (`shaders/augment.wgsl`), the twin of
//! [`Augment::apply`]. Here the parameters become the kernel's jobs ([`plan_augment`]); the
//! engine (`crate::gpu`) checks the bindings and dispatches. The tensor is then handed off by
//! [`GpuOutput`] (`loader::handoff`): read back into the batch's vector, staged (mapped, for
//! the consumer to copy into memory it reuses) or left on the GPU for the consumer to export
//! ([`GpuHandOff`]).

use super::augment::{source_channels, Augment, AugmentParams};
use super::handoff::{GpuHandOff, GpuOutput, HandOffView, IMAGES};
use super::tensor::{Tensor, TensorType};
use crate::error::{LimitsError, ParameterError, Result};
use crate::gpu::abi::AugmentJob;
use crate::gpu::bindings::{BindLimits, Binding};
use crate::gpu::readback::{read_buffer, stage_buffer};
use crate::gpu::{GpuBatch, GpuDecoder, ImageLayout, StagedBuffer};

/// Bytes of the values of a tensor of `shape` and `element`.
fn tensor_bytes(shape: [usize; 4], element: TensorType) -> u64 {
    shape.iter().map(|&d| d as u64).product::<u64>() * element.size()
}

/// `n` values of `element` from byte `offset` of `buffer`, read back (blocking): the batch
/// tensors of either record kind.
pub(super) fn read_values(
    (device, queue): (&wgpu::Device, &wgpu::Queue),
    buffer: &wgpu::Buffer,
    offset: u64,
    n: usize,
    element: TensorType,
) -> Result<Tensor> {
    if n == 0 {
        return Ok(Tensor::with_capacity(element, 0));
    }
    let len = (n as u64 * element.size()).next_multiple_of(4);
    let bytes = read_buffer(device, queue, buffer, offset, len)?;
    Ok(match element {
        TensorType::F32 => Tensor::F32(bytemuck::pod_collect_to_vec(&bytes)),
        TensorType::F16 => {
            let mut v: Vec<u16> = bytemuck::pod_collect_to_vec(&bytes);
            v.truncate(n);
            Tensor::F16(v)
        }
    })
}

/// `n` values of `element` from byte `offset` of `buffer`, copied into a new mapped
/// host-visible buffer (blocking until it is mapped).
pub(super) fn stage_values(
    (device, queue): (&wgpu::Device, &wgpu::Queue),
    buffer: &wgpu::Buffer,
    offset: u64,
    n: usize,
    element: TensorType,
) -> Result<StagedBuffer> {
    let len = (n as u64 * element.size()).next_multiple_of(4);
    stage_buffer(device, queue, buffer, offset, len)
}

/// A batch tensor on the GPU: `images x channels x height x width` f32 or f16 values.
#[derive(Debug)]
pub struct GpuTensor {
    /// The values (usage `STORAGE | COPY_SRC`).
    pub buffer: wgpu::Buffer,
    /// `[images, channels, height, width]`.
    pub shape: [usize; 4],
    /// The element type.
    pub element: TensorType,
    device: wgpu::Device,
    queue: wgpu::Queue,
}

impl GpuTensor {
    /// Bytes of the values (the buffer may be longer).
    pub fn bytes(&self) -> u64 {
        tensor_bytes(self.shape, self.element)
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue of that device.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Copies the tensor back to the CPU (blocking).
    pub fn read_back(&self) -> Result<Tensor> {
        let n = self.shape.iter().product::<usize>();
        read_values(
            (&self.device, &self.queue),
            &self.buffer,
            0,
            n,
            self.element,
        )
    }
}

/// Hands `tensor` over into `out` by `mode` (see [`GpuOutput`]).
pub(super) fn hand_off(tensor: GpuTensor, mode: GpuOutput, out: &mut super::Batch) -> Result<()> {
    if mode == GpuOutput::ReadBack {
        out.data = tensor.read_back()?;
        return Ok(());
    }
    let view = HandOffView {
        name: IMAGES.to_string(),
        shape: tensor.shape.to_vec(),
        offset: 0,
    };
    let gpu = (tensor.buffer, &tensor.device, &tensor.queue);
    out.gpu = GpuHandOff::new(mode, gpu, vec![view], tensor.element)?.map(std::sync::Arc::new);
    Ok(())
}

/// Augments image `i` of `batch` (interleaved, as [`GpuDecoder::decode_batch`] or the GPU
/// level decode, `decode_levels`, produce) with `params[i]` into image `i` of one NCHW tensor
/// of `augment.output` values on `decoder`'s device: the GPU twin of [`Augment::apply`], equal
/// within float tolerance (fused multiply-adds and WGSL's division precision; see the GPU
/// tests).
pub fn augment(
    decoder: &GpuDecoder,
    batch: &GpuBatch,
    params: &[AugmentParams],
    augment: &Augment,
) -> Result<GpuTensor> {
    let plan = plan_augment(
        &batch.images,
        params,
        augment,
        &BindLimits::of(decoder.device()),
    )?;
    let buffer = crate::gpu::augment::dispatch(
        decoder,
        batch,
        &plan.jobs,
        plan.per,
        plan.bytes,
        &plan.limits,
    )?;
    Ok(GpuTensor {
        buffer,
        shape: plan.shape,
        element: augment.output,
        device: decoder.device().clone(),
        queue: decoder.queue().clone(),
    })
}

/// The augment stage of one batch: a job per image and the output tensor's size (a pure
/// function of the decoded images, the parameters and the device's limits). Public for the
/// fuzz target `gpu_plan`; not a stable API.
#[doc(hidden)]
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
    /// Every storage range the stage binds, for `check_bindings`: each decoded image of
    /// `images` (in a buffer of `batch_len` bytes) and the whole output.
    pub fn bindings<'a>(
        &'a self,
        images: &'a [ImageLayout],
        batch_len: u64,
    ) -> impl Iterator<Item = Binding> + 'a {
        crate::gpu::augment::bindings(images, batch_len, self.bytes)
    }
}

/// Plans the augment stage (see [`AugmentPlan`]): checks the parameters (one per image, each
/// crop inside its padded image, channels the augment can take) and the tensor's size.
/// Public for the fuzz target `gpu_plan`; not a stable API.
#[doc(hidden)]
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
