//! Handing decoded batches to another API without a host round trip (feature `interop`,
//! Vulkan on Unix): [`GpuBatch::export`] copies a batch into a buffer whose memory is
//! allocated exportable (`VK_KHR_external_memory_fd`, opaque fd) and returns it with the fd,
//! which CUDA (`cudaImportExternalMemory`), another Vulkan device or another process can
//! import; [`import_buffer`] is the Vulkan import side (tests, and a consumer on Vulkan).
//! [`ExportedBuffer::copy_from`] refills an exported buffer, so a consumer can import a few
//! buffers once and reuse them batch after batch (the loader's CUDA hand-off does).
//!
//! Why a copy and not a decode straight into exportable memory: the decoder's output buffers
//! are sized and reused by its planner; a device-to-device copy costs a fraction of the decode
//! and keeps the decoder's buffers private. The copy is waited for on the host before the
//! export returns, so the importer may read at once.
//!
//! The raw Vulkan calls go through wgpu's hal (`Device::as_hal`, `Buffer::from_raw_managed`,
//! `Device::create_buffer_from_hal`, pinned to wgpu 30 / ash 0.38): wgpu owns the buffer and
//! its memory afterwards and frees both when the `wgpu::Buffer` is dropped. An importer must
//! keep using the memory only while the exporting buffer lives (CUDA: destroy the external
//! memory before dropping the [`ExportedBuffer`]). See `docs/gpu-torch-interop.md` for the
//! CUDA side.

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

use ash::vk;
use wgpu::hal::api::Vulkan;

use super::readback::{read_buffer, wait_idle, GpuBatch};
use super::upload::STORAGE_USAGE;
use crate::error::{Error, Result};

/// A buffer over exportable device memory, and the memory's file descriptor.
#[derive(Debug)]
pub struct ExportedBuffer {
    /// The buffer (usage `STORAGE | COPY_SRC | COPY_DST`), holding a copy of the batch.
    pub buffer: wgpu::Buffer,
    /// An opaque fd of the buffer's memory (`VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`):
    /// an importer takes ownership of it when an import succeeds.
    pub fd: OwnedFd,
    /// Bytes of the allocation (what an importer states as the memory's size).
    pub allocation_size: u64,
    /// Whether the allocation is dedicated to the buffer (CUDA: `cudaExternalMemoryDedicated`;
    /// Vulkan: a `VkMemoryDedicatedAllocateInfo` on import).
    pub dedicated: bool,
    /// The memory type index of the allocation (for a Vulkan importer on the same physical
    /// device).
    pub memory_type: u32,
    /// The physical device's UUID (`VkPhysicalDeviceIDProperties::deviceUUID`): CUDA's
    /// `cudaDeviceProp::uuid` of the same GPU is equal (match devices by it, never by index).
    pub device_uuid: [u8; 16],
}

fn vk_err(what: &'static str) -> impl Fn(vk::Result) -> Error {
    move |e| Error::Gpu(format!("{what}: {e}"))
}

/// Whether `device` can export memory as opaque fds (a Vulkan device with
/// `VK_KHR_external_memory_fd`).
pub fn export_supported(device: &wgpu::Device) -> bool {
    device
        .features()
        .contains(wgpu::Features::VULKAN_EXTERNAL_MEMORY_FD)
}

const HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// A raw buffer with external-memory usage, its memory requirements and whether it needs a
/// dedicated allocation.
unsafe fn external_buffer(
    raw: &ash::Device,
    size: u64,
) -> Result<(vk::Buffer, vk::MemoryRequirements, bool)> {
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
    let info = vk::BufferCreateInfo::default()
        .size(size)
        .usage(
            vk::BufferUsageFlags::STORAGE_BUFFER
                | vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST,
        )
        .sharing_mode(vk::SharingMode::EXCLUSIVE)
        .push_next(&mut external);
    // SAFETY: a valid device and create info.
    let buffer = unsafe { raw.create_buffer(&info, None) }.map_err(vk_err("vkCreateBuffer"))?;
    let mut dedicated = vk::MemoryDedicatedRequirements::default();
    let mut reqs = vk::MemoryRequirements2::default().push_next(&mut dedicated);
    // SAFETY: `buffer` was just created on `raw`.
    unsafe {
        raw.get_buffer_memory_requirements2(
            &vk::BufferMemoryRequirementsInfo2::default().buffer(buffer),
            &mut reqs,
        )
    };
    let requirements = reqs.memory_requirements;
    let needs_dedicated = dedicated.requires_dedicated_allocation == vk::TRUE
        || dedicated.prefers_dedicated_allocation == vk::TRUE;
    Ok((buffer, requirements, needs_dedicated))
}

/// Wraps a raw buffer and its memory (bound at offset 0) as a wgpu buffer that owns both.
unsafe fn wrap(
    device: &wgpu::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    allocation_size: u64,
    size: u64,
    label: &str,
) -> wgpu::Buffer {
    // SAFETY: the buffer is bound to `memory` at 0 and nothing else uses either; wgpu destroys
    // both when the returned buffer is dropped.
    unsafe {
        let hal = wgpu::hal::vulkan::Buffer::from_raw_managed(buffer, memory, 0, allocation_size);
        device.create_buffer_from_hal::<Vulkan>(
            hal,
            &wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: STORAGE_USAGE,
                mapped_at_creation: false,
            },
        )
    }
}

/// `VkPhysicalDeviceIDProperties::deviceUUID` of `physical`.
///
/// # Safety
/// `physical` is a physical device of `instance`.
unsafe fn physical_uuid(instance: &ash::Instance, physical: vk::PhysicalDevice) -> [u8; 16] {
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
    // SAFETY: the caller's guarantee.
    unsafe { instance.get_physical_device_properties2(physical, &mut props2) };
    id.device_uuid
}

/// The UUID of `device`'s physical device (`VkPhysicalDeviceIDProperties::deviceUUID`, what
/// [`ExportedBuffer::device_uuid`] reports), or `None` off Vulkan: match it against CUDA's
/// device UUIDs to know, before exporting anything, which CUDA device shares its memory.
pub fn device_uuid(device: &wgpu::Device) -> Option<[u8; 16]> {
    // SAFETY: the handles are wgpu's live ones, used only while the guard lives.
    unsafe {
        let hal = device.as_hal::<Vulkan>()?;
        Some(physical_uuid(
            hal.shared_instance().raw_instance(),
            hal.raw_physical_device(),
        ))
    }
}

/// A new buffer of `size` bytes over exportable device-local memory of `device`, and its fd.
pub fn exportable_buffer(device: &wgpu::Device, size: u64) -> Result<ExportedBuffer> {
    if !export_supported(device) {
        return Err(Error::Gpu(
            "memory export needs a Vulkan device with VK_KHR_external_memory_fd".into(),
        ));
    }
    let size = size.max(4);
    // SAFETY: the raw handles are used only while the hal guard lives, for objects this
    // function creates; they are handed to wgpu (or destroyed) before it returns.
    unsafe {
        let hal = device
            .as_hal::<Vulkan>()
            .ok_or_else(|| Error::Gpu("memory export needs the Vulkan backend".into()))?;
        let raw = hal.raw_device();
        let instance = hal.shared_instance().raw_instance();
        let physical = hal.raw_physical_device();
        let (buffer, reqs, dedicated) = external_buffer(raw, size)?;
        let props = instance.get_physical_device_memory_properties(physical);
        let memory_type = (0..props.memory_type_count).find(|&i| {
            reqs.memory_type_bits & (1 << i) != 0
                && props.memory_types[i as usize]
                    .property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
        });
        let Some(memory_type) = memory_type else {
            raw.destroy_buffer(buffer, None);
            return Err(Error::Gpu(
                "no device-local memory type can be exported".into(),
            ));
        };
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
        let mut only_for = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let mut alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(reqs.size)
            .memory_type_index(memory_type)
            .push_next(&mut export);
        if dedicated {
            alloc = alloc.push_next(&mut only_for);
        }
        let memory = match raw.allocate_memory(&alloc, None) {
            Ok(m) => m,
            Err(e) => {
                raw.destroy_buffer(buffer, None);
                return Err(vk_err("vkAllocateMemory (exportable)")(e));
            }
        };
        let fail = |e: vk::Result, what: &'static str| {
            raw.destroy_buffer(buffer, None);
            raw.free_memory(memory, None);
            vk_err(what)(e)
        };
        if let Err(e) = raw.bind_buffer_memory(buffer, memory, 0) {
            return Err(fail(e, "vkBindBufferMemory"));
        }
        let fd_api = ash::khr::external_memory_fd::Device::new(instance, raw);
        let fd = match fd_api.get_memory_fd(
            &vk::MemoryGetFdInfoKHR::default()
                .memory(memory)
                .handle_type(HANDLE),
        ) {
            Ok(fd) => OwnedFd::from_raw_fd(fd),
            Err(e) => return Err(fail(e, "vkGetMemoryFdKHR")),
        };
        let device_uuid = physical_uuid(instance, physical);
        drop(hal);
        let buffer = wrap(device, buffer, memory, reqs.size, size, "l3 exported batch");
        Ok(ExportedBuffer {
            buffer,
            fd,
            allocation_size: reqs.size,
            dedicated,
            memory_type,
            device_uuid,
        })
    }
}

/// Imports memory exported by [`exportable_buffer`] (on the same physical device) as a wgpu
/// buffer of `size` bytes on `device`: `fd` is consumed (Vulkan owns it once the import
/// succeeds; on failure it is closed here).
///
/// What can be checked is checked (a memory type index below 32 that the buffer accepts, a
/// non-zero allocation at least `size` bytes long, the buffer's requirements); a bad value
/// there is an [`Error::Gpu`].
///
/// # Safety
/// Vulkan cannot validate an imported fd, so the caller guarantees what the driver trusts:
/// `fd` is an opaque fd (`VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT`) exported from memory
/// on the physical device and driver of `device`; `allocation_size`, `memory_type` and
/// `dedicated` are those of that export (as [`ExportedBuffer`] reports them); and whoever
/// else holds the memory does not write it while this buffer is read, nor read it while this
/// buffer is written, without synchronising. Otherwise the driver may read or write outside
/// the memory, or crash.
pub unsafe fn import_buffer(
    device: &wgpu::Device,
    fd: OwnedFd,
    size: u64,
    allocation_size: u64,
    memory_type: u32,
    dedicated: bool,
) -> Result<wgpu::Buffer> {
    let type_bit = 1u32.checked_shl(memory_type).ok_or_else(|| {
        Error::Gpu(format!(
            "memory type {memory_type} does not exist (Vulkan has at most 32)"
        ))
    })?;
    if allocation_size == 0 || size > allocation_size {
        return Err(Error::Gpu(format!(
            "a buffer of {size} bytes cannot be imported from an allocation of \
             {allocation_size} bytes"
        )));
    }
    // SAFETY: the handles come from wgpu's live Vulkan device; the fd's contract is the
    // caller's (see # Safety).
    unsafe {
        let hal = device
            .as_hal::<Vulkan>()
            .ok_or_else(|| Error::Gpu("memory import needs the Vulkan backend".into()))?;
        let raw = hal.raw_device();
        let (buffer, reqs, _) = external_buffer(raw, size.max(4))?;
        if reqs.size > allocation_size || reqs.memory_type_bits & type_bit == 0 {
            raw.destroy_buffer(buffer, None);
            return Err(Error::Gpu(format!(
                "the imported memory ({allocation_size} bytes, type {memory_type}) cannot back \
                 a buffer needing {} bytes of types {:#x}",
                reqs.size, reqs.memory_type_bits
            )));
        }
        let raw_fd = fd.into_raw_fd();
        let mut import = vk::ImportMemoryFdInfoKHR::default()
            .handle_type(HANDLE)
            .fd(raw_fd);
        let mut only_for = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let mut alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(allocation_size)
            .memory_type_index(memory_type)
            .push_next(&mut import);
        if dedicated {
            alloc = alloc.push_next(&mut only_for);
        }
        let memory = match raw.allocate_memory(&alloc, None) {
            Ok(m) => m,
            Err(e) => {
                // The import failed: the fd is still ours.
                drop(OwnedFd::from_raw_fd(raw_fd));
                raw.destroy_buffer(buffer, None);
                return Err(vk_err("vkAllocateMemory (import)")(e));
            }
        };
        if let Err(e) = raw.bind_buffer_memory(buffer, memory, 0) {
            raw.destroy_buffer(buffer, None);
            raw.free_memory(memory, None);
            return Err(vk_err("vkBindBufferMemory (import)")(e));
        }
        drop(hal);
        Ok(wrap(
            device,
            buffer,
            memory,
            allocation_size,
            size.max(4),
            "l3 imported memory",
        ))
    }
}

impl ExportedBuffer {
    /// Bytes of the buffer (at most [`ExportedBuffer::allocation_size`]).
    pub fn size(&self) -> u64 {
        self.buffer.size()
    }

    /// Copies the first `size` bytes of `src` (a multiple of 4) to the start of this buffer
    /// on `queue` and waits on the host for the copy, so an importer may read at once.
    ///
    /// This is how a pool of exported buffers is refilled batch after batch: the importer
    /// must have finished reading the buffer's previous contents before this is called (the
    /// wait covers only the write). `device` and `queue` must be those the buffer was
    /// created on.
    pub fn copy_from(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        src: &wgpu::Buffer,
        size: u64,
    ) -> Result<()> {
        self.copy_from_at(device, queue, src, 0, size)
    }

    /// Like [`ExportedBuffer::copy_from`], `size` bytes from byte `offset` of `src` (a
    /// multiple of 4).
    pub fn copy_from_at(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        src: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<()> {
        if offset.checked_add(size).is_none_or(|end| end > src.size())
            || size > self.size()
            || !size.is_multiple_of(4)
            || !offset.is_multiple_of(4)
        {
            return Err(Error::Gpu(format!(
                "cannot copy {size} bytes from a buffer of {} into an exported buffer of {}",
                src.size(),
                self.size()
            )));
        }
        if size == 0 {
            return Ok(());
        }
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("l3 export copy"),
        });
        encoder.copy_buffer_to_buffer(src, offset, &self.buffer, 0, size);
        queue.submit([encoder.finish()]);
        wait_idle(device)
    }

    /// Copies the first `size` bytes (a multiple of 4) of the buffer back to the CPU
    /// (blocking): what an importer reads, for checks on devices without one.
    pub fn read_back(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        size: u64,
    ) -> Result<Vec<u8>> {
        if size > self.size() || !size.is_multiple_of(4) {
            return Err(Error::Gpu(format!(
                "cannot read {size} bytes of an exported buffer of {}",
                self.size()
            )));
        }
        read_buffer(device, queue, &self.buffer, 0, size)
    }
}

impl GpuBatch {
    /// Copies the batch into a new buffer over exportable memory and returns it with its fd
    /// (see the module documentation), after the copy has completed on the GPU. The images
    /// keep their offsets ([`GpuBatch::images`]).
    pub fn export(&self) -> Result<ExportedBuffer> {
        let size = self.buffer.size();
        let exported = exportable_buffer(&self.device, size)?;
        exported.copy_from(&self.device, &self.queue, &self.buffer, size)?;
        Ok(exported)
    }
}
