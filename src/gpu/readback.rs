//! Getting results off the GPU: the decoded batch ([`GpuBatch`]) and its read-back (also
//! staged, [`StagedBuffer`]: mapped, for the caller to copy where it wants), and the error
//! flags and timestamps of a submitted batch ([`Pending`]), each mapped as a future
//! ([`super::map`]).
//!
//! Native wgpu (30) runs `map_async` callbacks only inside `Device::poll`; nothing else wakes
//! a map future. So whoever waits on a map must make sure the device gets polled: the
//! blocking paths call `device.poll(PollType::wait_indefinitely())` themselves, and the async
//! path ([`super::GpuDecoder::decode_batch_async`]) hands one blocking poll to a helper
//! thread ([`Poller::Thread`]), which sleeps in the driver until the GPU is done and then
//! runs the callbacks that wake the future.

use super::map::map_read;
use super::timing::{StageTimings, TimingReadback};
use crate::error::{Error, FormatError, Result};
use crate::layout::SampleType;

/// Where one decoded image lies in [`GpuBatch::buffer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImageLayout {
    /// Byte offset in the buffer (a multiple of 256, so it can be bound on its own).
    pub offset: u64,
    /// Bytes of the image: width x height x channels x sample bytes.
    pub len: u64,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels.
    pub channels: u8,
    /// Bit depth of the file (8 or 16).
    pub depth: u8,
    /// Sample type of the output.
    pub sample_type: SampleType,
    /// `true` for planar (CHW) output, `false` for interleaved (HWC).
    pub planar: bool,
}

/// A decoded batch: one GPU buffer holding every image, and where each image is.
#[derive(Debug)]
pub struct GpuBatch {
    /// The decoded images (usage `STORAGE | COPY_SRC`).
    pub buffer: wgpu::Buffer,
    /// One entry per input file, in order.
    pub images: Vec<ImageLayout>,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
}

impl GpuBatch {
    /// The device the batch lives on.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The queue of that device.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// Copies the whole buffer back to the CPU (blocking).
    pub fn read_back_all(&self) -> Result<Vec<u8>> {
        read_buffer(
            &self.device,
            &self.queue,
            &self.buffer,
            0,
            self.buffer.size(),
        )
    }

    /// Copies every image back to the CPU (blocking), one vector per image, without the
    /// alignment padding between images.
    pub fn read_back(&self) -> Result<Vec<Vec<u8>>> {
        let all = self.read_back_all()?;
        Ok(self
            .images
            .iter()
            .map(|l| all[l.offset as usize..(l.offset + l.len) as usize].to_vec())
            .collect())
    }

    /// Copies one image back to the CPU (blocking).
    pub fn read_back_image(&self, index: usize) -> Result<Vec<u8>> {
        let l = self.images[index];
        let mut v = read_buffer(
            &self.device,
            &self.queue,
            &self.buffer,
            l.offset,
            l.len.next_multiple_of(4),
        )?;
        v.truncate(l.len as usize);
        Ok(v)
    }
}

/// How the device gets polled while a [`Pending`] batch's maps are awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Poller {
    /// This thread blocks in `device.poll(PollType::wait_indefinitely())`.
    Block,
    /// A helper thread does that blocking poll, so the awaiting task is woken by the map
    /// callbacks (no busy polling).
    Thread,
}

impl Poller {
    /// Polls the device until its submitted work is done (or has a thread do it).
    pub fn drive(self, device: &wgpu::Device) -> Result<()> {
        match self {
            Poller::Block => wait_idle(device),
            Poller::Thread => {
                let device = device.clone();
                std::thread::Builder::new()
                    .name("l3 gpu poll".into())
                    .spawn(move || {
                        let _ = device.poll(wgpu::PollType::wait_indefinitely());
                    })
                    .map_err(|e| Error::Gpu(format!("spawning the poll thread failed: {e}")))?;
                Ok(())
            }
        }
    }
}

/// Blocks until the device has finished its submitted work (and ran the callbacks).
pub(crate) fn wait_idle(device: &wgpu::Device) -> Result<()> {
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))
}

/// A submitted batch whose error flags are still to be read.
pub(crate) struct Pending {
    pub batch: GpuBatch,
    /// The error flags' read-back buffer.
    pub staging: wgpu::Buffer,
    /// Images of the batch (flags to read).
    pub count: usize,
    /// Set when the batch was timed.
    pub timing: Option<TimingReadback>,
}

/// A finished batch: the images, each image's error flags and, for a timed batch, the
/// stage timings.
pub(crate) struct Finished {
    pub batch: GpuBatch,
    pub flags: Vec<u32>,
    pub timings: Option<StageTimings>,
}

impl Pending {
    /// Maps the flags (and timestamps), has `poller` poll the device, and reads them.
    pub async fn finish(self, poller: Poller) -> Result<Finished> {
        let flags_map = map_read(&self.staging, 0..self.staging.size());
        let timing_map = self.timing.as_ref().and_then(|t| t.request());
        poller.drive(&self.batch.device)?;
        flags_map.wait().await?;
        let flags = read_flags(&self.staging, self.count)?;
        let timings = match (&self.timing, timing_map) {
            (Some(t), map) => {
                if let Some(m) = map {
                    m.wait().await?;
                }
                Some(t.read()?)
            }
            (None, _) => None,
        };
        Ok(Finished {
            batch: self.batch,
            flags,
            timings,
        })
    }
}

/// The first `count` flags of a mapped flags buffer (unmaps it).
pub(crate) fn read_flags(staging: &wgpu::Buffer, count: usize) -> Result<Vec<u32>> {
    let flags: Vec<u32> = {
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| Error::Gpu(format!("map failed: {e}")))?;
        bytemuck::pod_collect_to_vec(&view[..count * 4])
    };
    staging.unmap();
    Ok(flags)
}

/// The first flagged image as [`FormatError::GpuReported`].
pub(crate) fn check_flags(flags: &[u32]) -> Result<()> {
    match flags.iter().enumerate().find(|(_, &f)| f != 0) {
        Some((image, &flags)) => Err(FormatError::GpuReported { image, flags }.into()),
        None => Ok(()),
    }
}

/// Copies `size` bytes (a multiple of 4) at `offset` of `buffer` to the CPU (blocking).
pub(crate) fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>> {
    if size == 0 {
        return Ok(Vec::new());
    }
    let staged = stage_buffer(device, queue, buffer, offset, size)?;
    let mut v = vec![0u8; size as usize];
    staged.copy_to(&mut v)?;
    Ok(v)
}

/// Bytes copied off the GPU into a mapped host-visible buffer, waiting to be copied where the
/// caller wants them ([`StagedBuffer::copy_to`]): the read-back without its final copy, so
/// that copy can go straight into memory the caller reuses (a pinned tensor) instead of a
/// new vector. Unmapped and freed when dropped.
#[derive(Debug)]
pub struct StagedBuffer {
    buffer: wgpu::Buffer,
}

impl StagedBuffer {
    /// Bytes held.
    pub fn len(&self) -> u64 {
        self.buffer.size()
    }

    /// Whether no bytes are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the first `dst.len()` bytes into `dst` (at most [`StagedBuffer::len`]).
    pub fn copy_to(&self, dst: &mut [u8]) -> Result<()> {
        if dst.len() as u64 > self.len() {
            return Err(Error::Gpu(format!(
                "{} bytes asked of a staged read-back of {}",
                dst.len(),
                self.len()
            )));
        }
        let view = self
            .buffer
            .get_mapped_range(..)
            .map_err(|e| Error::Gpu(format!("map failed: {e}")))?;
        dst.copy_from_slice(&view[..dst.len()]);
        Ok(())
    }
}

/// Copies `size` bytes (a multiple of 4, not 0) at `offset` of `buffer` into a new mapped
/// buffer (blocking until the copy is done and the buffer is mapped).
pub(crate) fn stage_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<StagedBuffer> {
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("l3 readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder =
        device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, size);
    queue.submit([encoder.finish()]);
    let map = map_read(&staging, 0..size);
    wait_idle(device)?;
    pollster::block_on(map.wait())?;
    Ok(StagedBuffer { buffer: staging })
}
