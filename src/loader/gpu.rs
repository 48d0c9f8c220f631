//! The loader's GPU stage (feature `gpu`): augmentation of a decoded batch ([`augment`]), each
//! image cropped, resized, flipped and normalised into one f32 or f16 NCHW tensor
//! ([`GpuTensor`]) by the engine's augment kernel (`shaders/augment.wgsl`), the twin of
//! [`Augment::apply`]. Here the parameters become the kernel's jobs ([`plan_augment`]); the
//! engine (`crate::gpu`) checks the bindings and dispatches. The tensor is then handed off by
//! [`GpuOutput`]: read back into the batch's vector, staged (mapped, for the consumer to copy
//! into memory it reuses) or left on the GPU for the consumer to export ([`GpuHandOff`]).

use super::augment::{source_channels, Augment, AugmentParams};
use super::tensor::{Tensor, TensorType};
use crate::error::{LimitsError, ParameterError, Result};
use crate::gpu::abi::AugmentJob;
use crate::gpu::bindings::{BindLimits, Binding};
use crate::gpu::readback::{read_buffer, stage_buffer};
use crate::gpu::{GpuBatch, GpuDecoder, ImageLayout, StagedBuffer};

/// How the GPU path hands an augmented batch over ([`super::LoaderOptions::gpu_output`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuOutput {
    /// Read back into [`super::Batch::data`] by the loader's thread (default).
    #[default]
    ReadBack,
    /// Copied into a mapped host-visible buffer by the loader's thread
    /// ([`GpuHandOff::Staged`]); the consumer copies it where it wants (a reused, pinned
    /// tensor) and [`super::Batch::data`] stays empty.
    Staged,
    /// Left on the GPU ([`GpuHandOff::Device`]) for the consumer to copy device to device
    /// (into exported memory, for CUDA); [`super::Batch::data`] stays empty.
    Device,
}

/// One tensor of a [`GpuHandOff`]: its name, shape and where its values start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandOffView {
    /// `"images"` for an image batch; an array's name for a tensor dataset's.
    pub name: String,
    /// `[samples, ...]` (images: `[images, channels, height, width]`).
    pub shape: Vec<usize>,
    /// Byte offset of its first value in the hand-off's values (a multiple of 256).
    pub offset: u64,
}

/// Where a [`GpuHandOff`]'s values are.
#[derive(Debug)]
pub enum HandOffValues {
    /// In a mapped host-visible buffer ([`GpuOutput::Staged`]).
    Staged(StagedBuffer),
    /// On the GPU ([`GpuOutput::Device`]), for the consumer to copy device to device.
    Device {
        /// The values (usage `STORAGE | COPY_SRC`).
        buffer: wgpu::Buffer,
        /// The device it lives on.
        device: wgpu::Device,
        /// That device's queue.
        queue: wgpu::Queue,
    },
}

/// A batch that was not read back into [`super::Batch::data`] or
/// [`super::Batch::arrays`] (see [`GpuOutput`]): its tensors (one for images, one per array
/// name for a tensor dataset), C order, in one span of values staged or left on the GPU.
#[derive(Debug)]
pub struct GpuHandOff {
    /// The values.
    pub values: HandOffValues,
    /// The tensors in them, in the batch's order, at increasing offsets.
    pub views: Vec<HandOffView>,
    /// The element type of every tensor.
    pub element: TensorType,
}

impl GpuHandOff {
    /// Bytes of the values, from the first tensor's start to the last one's end (the buffer
    /// may be longer).
    pub fn bytes(&self) -> u64 {
        span_bytes(&self.views, self.element)
    }

    /// `[images, channels, height, width]` of an image batch (its one tensor); `None` for a
    /// tensor dataset's batch.
    pub fn image_shape(&self) -> Option<[usize; 4]> {
        match self.views.as_slice() {
            [v] if v.name == IMAGES && v.offset == 0 => v.shape.as_slice().try_into().ok(),
            _ => None,
        }
    }

    /// Copies the first [`GpuHandOff::bytes`] into `dst` (at least that long); a batch on
    /// the GPU is staged first (blocking).
    pub fn copy_to(&self, dst: &mut [u8]) -> Result<()> {
        let n = self.bytes();
        let Some(dst) = dst.get_mut(..n as usize) else {
            return Err(crate::error::Error::Gpu(format!(
                "{n} bytes of a hand-off asked into {} bytes",
                dst.len()
            )));
        };
        match &self.values {
            HandOffValues::Staged(staged) => staged.copy_to(dst),
            HandOffValues::Device {
                buffer,
                device,
                queue,
            } => {
                if n == 0 {
                    return Ok(());
                }
                let len = n.next_multiple_of(4);
                stage_buffer(device, queue, buffer, 0, len)?.copy_to(dst)
            }
        }
    }

    /// `values` handed off by `mode` (`Staged` or `Device`; `None` for `ReadBack`, and for
    /// a batch without values), with its `views`.
    pub(super) fn new(
        mode: GpuOutput,
        (buffer, device, queue): (wgpu::Buffer, &wgpu::Device, &wgpu::Queue),
        views: Vec<HandOffView>,
        element: TensorType,
    ) -> Result<Option<Self>> {
        let n = span_bytes(&views, element);
        let values = match mode {
            _ if n == 0 => return Ok(None),
            GpuOutput::ReadBack => return Ok(None),
            GpuOutput::Staged => HandOffValues::Staged(stage_buffer(
                device,
                queue,
                &buffer,
                0,
                n.next_multiple_of(4),
            )?),
            GpuOutput::Device => HandOffValues::Device {
                buffer,
                device: device.clone(),
                queue: queue.clone(),
            },
        };
        Ok(Some(GpuHandOff {
            values,
            views,
            element,
        }))
    }
}

/// Bytes of `views` of `element` values: from the first one's start to the last one's end.
fn span_bytes(views: &[HandOffView], element: TensorType) -> u64 {
    views
        .iter()
        .map(|v| v.offset + v.shape.iter().map(|&d| d as u64).product::<u64>() * element.size())
        .max()
        .unwrap_or(0)
}

/// The name of an image batch's one tensor in a [`GpuHandOff`].
pub const IMAGES: &str = "images";

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
