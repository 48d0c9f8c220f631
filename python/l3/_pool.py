"""The buffer pool both GPU-loader hand-offs share (`l3._handoff.HostBatchPool`,
`l3.cuda.CudaBatchPool`): slots of pooled memory, each reused only after the CUDA event
recorded at its release, and the event itself. Its own module so that `l3.cuda` and
`l3._handoff` both import it and not each other (`_handoff` makes a `cuda.CudaBatchPool`),
and `views_of`, the checked views of a batch both pools cut.
The lifetime rule is `l3._handoff`'s.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Deque, Dict, Optional, Tuple

import torch

from ._errors import ParameterError

#: Buffers each pool keeps for reuse (the loader's prefetch, the batch in use, and one more).
POOL_SLOTS = 4


def release_event(device: Optional[int] = None) -> Any:
    """A CUDA event recorded on the current stream (of ``device``), or None where CUDA is not
    initialised (then no CUDA work can still read the buffer)."""
    if not torch.cuda.is_initialized():
        return None
    ev = torch.cuda.Event()
    ev.record(torch.cuda.current_stream(device))
    return ev


class Slot:
    """One pooled buffer: ``capacity`` bytes, whether the pool reuses it, and what the pool
    knows of it (the host tensor or the CUDA import)."""

    def __init__(self, capacity: int, pooled: bool, memory: Any) -> None:
        self.capacity = capacity
        self.pooled = pooled
        self.memory = memory


class SlotPool:
    """Free buffers of at most ``slots`` pooled ones, each free with the event after which it
    may be written; `take` picks the oldest free one that is big enough and done."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ParameterError(f"a pool needs at least one slot, got {slots}")
        self.slots = slots
        self.made = 0
        # The largest batch asked for: new slots get this capacity.
        self.largest = 0
        # (slot, release event or None), oldest first. Appended by `release`, which may run
        # in any thread (the last reference to a batch can go anywhere): deque appends are
        # atomic, and `take` only removes entries it found.
        self.free: Deque[Tuple[Slot, Any]] = collections.deque()
        self.lock = threading.Lock()

    def take(self, nbytes: int, make) -> Slot:
        """A slot of at least ``nbytes`` bytes that nothing reads or will read: a free one,
        else a new pooled one (``make(capacity, pooled)``), else after waiting for the oldest
        released one's event, else (all held by live batches) a new unpooled one."""
        with self.lock:
            self.largest = max(self.largest, nbytes)
            waiting = None
            for entry in list(self.free):
                slot, ev = entry
                if slot.capacity < nbytes:
                    # Too small for this run's batches: let it go.
                    self.free.remove(entry)
                    self.made -= 1
                    continue
                if ev is None or ev.query():
                    self.free.remove(entry)
                    return slot
                if waiting is None:
                    waiting = entry
            if self.made < self.slots:
                self.made += 1
                try:
                    return make(self.largest, True)
                except BaseException:
                    self.made -= 1
                    raise
            if waiting is not None:
                self.free.remove(waiting)
                waiting[1].synchronize()
                return waiting[0]
        return make(nbytes, False)

    def release(self, slot: Slot, event: Any) -> None:
        """Gives ``slot`` back (reusable after ``event``); an unpooled slot is dropped."""
        if slot.pooled:
            self.free.append((slot, event))


def views_of(batch: Any) -> Dict[str, Tuple[Tuple[int, ...], int]]:
    """``{name: (shape, byte offset)}`` of a `l3._l3.GpuBatch`'s tensors, each checked to lie
    inside its ``nbytes``."""
    item = 4 if batch.dtype == "float32" else 2
    out = {}
    for name, shape, offset in batch.views:
        size = item
        for d in shape:
            size *= d
        if offset % item or offset + size > batch.nbytes:
            raise ParameterError(f"view {name!r} of {size} bytes at {offset} lies outside the "
                                 f"batch's {batch.nbytes}")
        out[name] = (tuple(shape), offset)
    return out
