//! The loader's GPU hand-off (feature `gpu`): how a GPU batch leaves the loader
//! ([`GpuOutput`]: read back, staged in host-visible memory, or left on the GPU) and, when
//! not read back, the batch as one span of values with one view per tensor
//! ([`GpuHandOff`]): an image batch's `"images"` (`loader::gpu`'s augment), or a tensor
//! dataset's arrays by name (`loader::tensor_gpu`). The Python pools cut it into tensors.

use super::tensor::TensorType;
use crate::error::Result;
use crate::gpu::readback::stage_buffer;
use crate::gpu::StagedBuffer;

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
