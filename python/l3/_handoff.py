"""Where the GPU loader's batches go (``L3IterableDataset(..., device="gpu", output=...)``):
``"cuda"``, CUDA tensors over exported Vulkan memory (`l3.cuda.CudaBatchPool`); ``"host"``,
host tensors in a pool of pinned buffers (`HostBatchPool`). The default is ``"cuda"`` where
l3's GPU is a CUDA device of torch (matched by UUID) and ``cuda-python`` is installed, else
``"host"``.

The lifetime rule of both pools: a batch is complete when it is handed out; its memory
lives as long as any tensor viewing it; a pooled buffer is reused only after every tensor
viewing it was released (and, where CUDA is initialised, after the work queued on the
current CUDA stream at that moment is done), so two live batches never alias. When every
pooled buffer is held, a batch gets a buffer of its own (not pooled) rather than waiting.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from . import _l3
from ._errors import ParameterError
# The pool machinery lives in _pool (shared with l3.cuda); its names stay importable from
# here as before.
from ._pool import POOL_SLOTS, Slot, SlotPool, release_event, views_of

OUTPUTS = ("cuda", "host")


class _HostLease:
    """A flat numpy uint8 view (``__array_interface__``) of a host slot's first ``nbytes``;
    gives the slot back when collected, which is when the last array or tensor viewing it
    is."""

    def __init__(self, pool: "HostBatchPool", slot: Slot, nbytes: int) -> None:
        self._pool = pool
        self._slot = slot
        host: torch.Tensor = slot.memory
        self.__array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (host.data_ptr(), False),
            "version": 3,
        }

    def __del__(self) -> None:
        try:
            self._pool.pool.release(self._slot, release_event())
        except Exception:  # interpreter shutdown: nothing left to reuse it
            pass


class HostBatchPool:
    """Host tensors for the GPU loader's batches, copied from the GPU's staged read-back into
    a few reused buffers, pinned (``torch.empty(..., pin_memory=True)``) when torch can pin,
    so ``.to("cuda", non_blocking=True)`` is an asynchronous copy. See the module's lifetime
    rule."""

    def __init__(self, slots: int = POOL_SLOTS, pin: Optional[bool] = None) -> None:
        self.pin = torch.cuda.is_available() if pin is None else pin
        self.pool = SlotPool(slots)

    def _make(self, nbytes: int, pooled: bool) -> Slot:
        host = torch.empty(max(nbytes, 1), dtype=torch.uint8, pin_memory=self.pin)
        return Slot(nbytes, pooled, host)

    def tensors_of(self, batch: Any) -> Dict[str, torch.Tensor]:
        """The tensors of ``batch`` (an `l3._l3.GpuBatch`) by name, as host tensors viewing
        one pooled buffer (given back when every one of them is collected)."""
        views = views_of(batch)
        slot = self.pool.take(batch.nbytes, self._make)
        try:
            batch.copy_into(slot.memory.numpy())
        except BaseException:
            self.pool.release(slot, None)
            raise
        flat = np.asarray(_HostLease(self, slot, batch.nbytes))
        dtype = np.float32 if batch.dtype == "float32" else np.float16
        item = np.dtype(dtype).itemsize
        out = {}
        for name, (shape, offset) in views.items():
            count = int(np.prod(shape, dtype=np.int64))
            values = flat[offset:offset + count * item].view(dtype).reshape(shape)
            out[name] = torch.from_numpy(values)
        return out

    def tensor_of(self, images: Any) -> torch.Tensor:
        """The batch ``images`` (an image `l3._l3.GpuBatch`, or a numpy array for a batch
        without samples) as a host tensor in a pooled buffer."""
        if isinstance(images, np.ndarray):
            return torch.from_numpy(images)
        return self.tensors_of(images)["images"]


_POOLS: dict = {}
_POOLS_LOCK = threading.Lock()


def pool(output: str) -> Any:
    """This process's pool for ``output`` (``"cuda"`` or ``"host"``), made on first use."""
    with _POOLS_LOCK:
        if output not in _POOLS:
            if output == "cuda":
                from .cuda import CudaBatchPool

                _POOLS[output] = CudaBatchPool()
            else:
                _POOLS[output] = HostBatchPool()
        return _POOLS[output]


def check_output(device: Any, output: Optional[str]) -> None:
    """Checks ``output`` against ``device`` without touching any GPU (a dataset checks it
    when created, before it may be pickled into worker processes)."""
    if output is not None and output not in OUTPUTS:
        raise ParameterError(f"output must be one of {OUTPUTS} or None, got {output!r}")
    if output is not None and device not in ("gpu", "auto"):
        raise ParameterError(f"output={output!r} needs device=\"gpu\" (the GPU path)")


def choose_output(device: Any, output: Optional[str]) -> Optional[str]:
    """The hand-off for a dataset's ``device`` and ``output`` options: None for the CPU path
    (``output`` must then be None), else ``"cuda"`` or ``"host"`` (``output``, or the
    default). ``output="cuda"`` where CUDA cannot import l3's GPU memory is a GpuError."""
    check_output(device, output)
    adapter = _l3.gpu_adapter() if device in ("gpu", "auto") else None
    on_gpu = device == "gpu" or (
        device == "auto" and adapter is not None and "(software)" not in adapter
    )
    if not on_gpu:
        if output is not None:
            raise ParameterError(f"output={output!r} needs device=\"gpu\" (the GPU path)")
        return None
    if output == "host":
        return "host"
    from .cuda import cuda_device_of_l3

    try:
        cuda_device_of_l3()
    except Exception:
        if output == "cuda":
            raise
        return "host"
    return "cuda"
