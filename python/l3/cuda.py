"""GPU batches into CUDA tensors without a host round trip (NVIDIA only).

l3 decodes (and the loader augments) with WGSL through wgpu on Vulkan. Its batches reach CUDA
through Vulkan memory allocated exportable: l3 copies a batch into it device to device and
waits for the copy, the memory's opaque file descriptor is imported into CUDA
(``cudaImportExternalMemory`` + ``cudaExternalMemoryGetMappedBuffer``), and the mapping is
handed to torch through ``__cuda_array_interface__``: the pixels never leave the GPU.

- `decode_batch_cuda`: decodes files as one batch into a CUDA tensor (fresh memory per call).
- `CudaBatchPool`: the loader's hand-off (``L3IterableDataset(..., device="gpu",
  output="cuda")``, the default where this module works): a few exported buffers, each
  imported into CUDA once and reused batch after batch.

Needs an NVIDIA GPU with its Vulkan driver (in containers, ``NVIDIA_DRIVER_CAPABILITIES``
must include ``graphics``), torch with CUDA, and ``cuda-python`` (``cuda.bindings``). The
Vulkan device is matched to the CUDA device by UUID, never by index. The export half is
tested everywhere (lavapipe in CI); the import half only where CUDA is present
(``python/tests/test_cuda.py``). See ``docs/gpu-torch-interop.md``.

Synchronisation: the copy into exported memory is waited for on the host before the tensor
is handed out, so the tensor is complete when the caller gets it (no stream to wait on). The
tensor keeps its memory alive: `decode_batch_cuda`'s until it is collected; a pooled buffer
is reused only after every tensor viewing it is collected and the work queued on the current
CUDA stream at that moment has finished (an event recorded then is waited for before the
buffer is written again). A batch used on another stream must be kept until that stream's
work on it is done, as for any tensor torch did not allocate on that stream.
"""

from __future__ import annotations

import uuid
from typing import Any, Sequence, Tuple

from . import _l3
from ._pool import POOL_SLOTS, Slot, SlotPool, release_event, views_of


def _check(result: Tuple[Any, ...], what: str) -> Any:
    from cuda.bindings import runtime as cudart

    err, *rest = result
    if err != cudart.cudaError_t.cudaSuccess:
        raise _l3_gpu_error(f"{what} failed: {cudart.cudaGetErrorString(err)[1]!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def _l3_gpu_error(message: str) -> Exception:
    from ._errors import GpuError

    return GpuError(message)


def cuda_device_of(device_uuid: bytes) -> int:
    """The index of the CUDA device whose UUID is ``device_uuid`` (GpuError if none)."""
    import torch

    want = uuid.UUID(bytes=bytes(device_uuid))
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            got = str(torch.cuda.get_device_properties(i).uuid)
            if uuid.UUID(got.removeprefix("GPU-")) == want:
                return i
    raise _l3_gpu_error(f"no CUDA device has the Vulkan device's UUID {want}")


def cuda_device_of_l3() -> int:
    """The index of the CUDA device that is l3's GPU (matched by UUID); GpuError when there
    is none, l3's GPU is not a Vulkan device, or ``cuda-python`` is missing."""
    try:
        from cuda.bindings import runtime  # noqa: F401
    except ImportError as e:
        raise _l3_gpu_error(f"the CUDA hand-off needs cuda-python (cuda.bindings): {e}")
    device_uuid = _l3.gpu_device_uuid()
    if device_uuid is None:
        raise _l3_gpu_error("l3 has no Vulkan GPU (the CUDA hand-off imports Vulkan memory)")
    return cuda_device_of(device_uuid)


class _CudaImport:
    """Exported memory (an `l3._l3.ExportedBatch` or `ExportSlot`) imported into CUDA and
    mapped: ``ptr`` on CUDA device ``device``. Releases the mapping and the import when
    collected, before the exported memory (which it holds) can go."""

    def __init__(self, exported: Any, device: int) -> None:
        import torch
        from cuda.bindings import runtime as cudart

        self.exported = exported
        self.device = device
        self._ext_mem = None
        self.ptr = 0
        with torch.cuda.device(device):
            # torch's and cuda-python's runtimes may keep separate current devices.
            _check(cudart.cudaSetDevice(device), "cudaSetDevice")
            desc = cudart.cudaExternalMemoryHandleDesc()
            desc.type = cudart.cudaExternalMemoryHandleType.cudaExternalMemoryHandleTypeOpaqueFd
            # CUDA owns the fd once the import succeeds; on failure it is closed here.
            fd = exported.take_fd()
            desc.handle.fd = fd
            desc.size = exported.allocation_size
            desc.flags = cudart.cudaExternalMemoryDedicated if exported.dedicated else 0
            try:
                self._ext_mem = _check(cudart.cudaImportExternalMemory(desc),
                                       "cudaImportExternalMemory")
            except BaseException:
                import os

                os.close(fd)
                raise
            buf = cudart.cudaExternalMemoryBufferDesc()
            buf.offset = 0
            buf.size = exported.size
            buf.flags = 0
            self.ptr = int(_check(cudart.cudaExternalMemoryGetMappedBuffer(self._ext_mem, buf),
                                  "cudaExternalMemoryGetMappedBuffer"))

    def __del__(self) -> None:
        try:
            from cuda.bindings import runtime as cudart

            if self.ptr:
                cudart.cudaFree(self.ptr)
            if self._ext_mem is not None:
                cudart.cudaDestroyExternalMemory(self._ext_mem)
        except Exception:
            pass


class _CudaMapping:
    """A view (``__cuda_array_interface__``, version 3) of imported memory; ``owner`` is
    kept alive with it, and ``on_release`` is called when it is collected."""

    def __init__(self, owner: Any, ptr: int, shape, strides, typestr: str,
                 on_release=None) -> None:
        self._owner = owner
        self._on_release = on_release
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "strides": tuple(strides),
            "typestr": typestr,
            "data": (ptr, False),
            "version": 3,
            # Complete when handed out (the export waited for its copy): nothing to wait on.
            "stream": None,
        }

    def __del__(self) -> None:
        if self._on_release is not None:
            try:
                self._on_release()
            except Exception:
                pass


def decode_batch_cuda(files: Sequence[bytes]):
    """Decodes L3 files of one shape and dtype into one ``(N, H, W[, C])`` CUDA tensor (uint8,
    or int16-typed views of uint16 samples on torch versions without uint16) on the CUDA
    device that is the same GPU as l3's Vulkan adapter."""
    import torch

    exported = _l3.decode_batch_export(list(files))
    images = exported.images
    offsets = [im[0] for im in images]
    shapes = {im[2:] for im in images}
    if len(shapes) != 1:
        raise _l3_gpu_error("decode_batch_cuda needs files of one shape and depth")
    width, height, channels, depth = shapes.pop()
    step = offsets[1] - offsets[0] if len(offsets) > 1 else images[0][1]
    if any(b - a != step for a, b in zip(offsets, offsets[1:])):
        raise _l3_gpu_error("images of the batch are not evenly spaced")
    item = depth // 8
    device = cuda_device_of(exported.device_uuid)
    imported = _CudaImport(exported, device)
    shape = [len(images), height, width] + ([channels] if channels > 1 else [])
    strides = [step, width * channels * item, channels * item] + ([item] if channels > 1 else [])
    mapping = _CudaMapping(imported, imported.ptr + offsets[0], shape, strides,
                           "|u1" if item == 1 else "<u2")
    return torch.as_tensor(mapping, device=f"cuda:{device}")


class CudaBatchPool:
    """CUDA tensors for the GPU loader's batches (`l3._l3.GpuBatch` left on the GPU): each
    batch is copied device to device into one of a few exported buffers, each imported into
    CUDA once, and handed to torch as C-contiguous float32 or float16 CUDA tensors (an image
    batch's ``(N, C, H, W)``, or a tensor dataset's arrays by name). The lifetime rule is the
    module's (and `l3._handoff`'s)."""

    def __init__(self, slots: int = POOL_SLOTS) -> None:
        self.pool = SlotPool(slots)
        self.device = cuda_device_of_l3()

    def _make(self, images: Any, nbytes: int, pooled: bool) -> Slot:
        exported = images.new_export_slot(nbytes)
        return Slot(nbytes, pooled, _CudaImport(exported, self.device))

    def tensors_of(self, batch: Any) -> dict:
        """The tensors of ``batch`` (an `l3._l3.GpuBatch` of kind ``"device"``) by name, as
        CUDA tensors viewing one pooled exported buffer (given back when every one of them
        is collected)."""
        import torch

        views = views_of(batch)
        slot = self.pool.take(batch.nbytes,
                              lambda n, pooled: self._make(batch, n, pooled))
        try:
            batch.export_into(slot.memory.exported)
        except BaseException:
            self.pool.release(slot, None)
            raise
        item = 4 if batch.dtype == "float32" else 2
        device = self.device
        # One release for the slot, when the last mapping (so the last tensor) is collected.
        lease = _Lease(slot.memory, lambda: self.pool.release(slot, release_event(device)))
        out = {}
        for name, (shape, offset) in views.items():
            strides, step = [], item
            for d in reversed(shape):
                strides.append(step)
                step *= d
            mapping = _CudaMapping(lease, slot.memory.ptr + offset, shape,
                                   tuple(reversed(strides)), "<f4" if item == 4 else "<f2")
            out[name] = torch.as_tensor(mapping, device=f"cuda:{device}")
        return out

    def tensor_of(self, images: Any):
        """The batch ``images`` (an image `l3._l3.GpuBatch` of kind ``"device"``, or a numpy
        array for a batch without samples) as a CUDA tensor."""
        import numpy as np
        import torch

        if isinstance(images, np.ndarray):
            return torch.from_numpy(images).to(f"cuda:{self.device}")
        return self.tensors_of(images)["images"]


class _Lease:
    """Keeps ``owner`` (an imported slot) alive and calls ``on_release`` once when collected:
    shared by every mapping of one batch."""

    def __init__(self, owner: Any, on_release) -> None:
        self._owner = owner
        self._on_release = on_release

    def __del__(self) -> None:
        try:
            self._on_release()
        except Exception:
            pass
