"""GPU batches into CUDA tensors without a host round trip (NVIDIA only; opt-in).

`decode_batch_cuda` decodes L3 files as one batch with l3's GPU decoder (WGSL through wgpu on
Vulkan), copies the batch into device memory allocated exportable, exports it as an opaque
file descriptor, imports that into CUDA (``cudaImportExternalMemory`` +
``cudaExternalMemoryGetMappedBuffer``) and hands the mapping to torch through
``__cuda_array_interface__``: the pixels never leave the GPU.

Needs an NVIDIA GPU with its Vulkan driver (in containers, ``NVIDIA_DRIVER_CAPABILITIES``
must include ``graphics``), torch with CUDA, and ``cuda-python`` (``pip install
cuda-python``). The Vulkan device is matched to the CUDA device by UUID, never by index.
The export half is tested everywhere (lavapipe in CI); this module's import half runs only
where CUDA is present (``python/tests/test_cuda.py``). See ``docs/gpu-torch-interop.md``.

Synchronisation: the export waits for the copy on the host before returning, so the tensor
is complete when it is handed out; the tensor owns the CUDA mapping and the exported memory,
which are released when the tensor is garbage-collected.
"""

from __future__ import annotations

import uuid
from typing import Any, Sequence, Tuple

from . import _l3


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
    for i in range(torch.cuda.device_count()):
        got = str(torch.cuda.get_device_properties(i).uuid)
        if uuid.UUID(got.removeprefix("GPU-")) == want:
            return i
    raise _l3_gpu_error(f"no CUDA device has the Vulkan device's UUID {want}")


class _CudaMapping:
    """A CUDA mapping of exported memory, as ``__cuda_array_interface__`` (version 3)."""

    def __init__(self, exported: Any, ext_mem: Any, ptr: int, shape, strides, typestr: str):
        self._exported = exported  # keeps the Vulkan memory alive
        self._ext_mem = ext_mem
        self._ptr = ptr
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "strides": tuple(strides),
            "typestr": typestr,
            "data": (ptr, False),
            "version": 3,
            "stream": None,
        }

    def __del__(self) -> None:
        try:
            from cuda.bindings import runtime as cudart

            cudart.cudaFree(self._ptr)
            cudart.cudaDestroyExternalMemory(self._ext_mem)
        except Exception:
            pass


def decode_batch_cuda(files: Sequence[bytes]):
    """Decodes L3 files of one shape and dtype into one ``(N, H, W[, C])`` CUDA tensor (uint8,
    or int16-typed views of uint16 samples on torch versions without uint16) on the CUDA
    device that is the same GPU as l3's Vulkan adapter."""
    import torch
    from cuda.bindings import runtime as cudart

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
    torch.cuda.set_device(device)

    desc = cudart.cudaExternalMemoryHandleDesc()
    desc.type = cudart.cudaExternalMemoryHandleType.cudaExternalMemoryHandleTypeOpaqueFd
    desc.handle.fd = exported.take_fd()
    desc.size = exported.allocation_size
    desc.flags = cudart.cudaExternalMemoryDedicated if exported.dedicated else 0
    ext_mem = _check(cudart.cudaImportExternalMemory(desc), "cudaImportExternalMemory")
    buf = cudart.cudaExternalMemoryBufferDesc()
    buf.offset = 0
    buf.size = exported.size
    buf.flags = 0
    ptr = _check(cudart.cudaExternalMemoryGetMappedBuffer(ext_mem, buf),
                 "cudaExternalMemoryGetMappedBuffer")
    shape = [len(images), height, width] + ([channels] if channels > 1 else [])
    strides = [step, width * channels * item, channels * item] + ([item] if channels > 1 else [])
    mapping = _CudaMapping(exported, ext_mem, int(ptr) + offsets[0], shape, strides,
                           "|u1" if item == 1 else "<u2")
    return torch.as_tensor(mapping, device=f"cuda:{device}")
