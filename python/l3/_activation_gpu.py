"""CUDA tensors coded by l3's GPU for `compress_activations`: block-coded streams
(`l3.encode_blocks`) kept in l3's GPU memory, encoded and decoded in batches.

The rule that keeps CUDA and l3's GPU (Vulkan) apart: both work on staging buffers l3 exports
and CUDA imports. CUDA's writes to the encode staging buffer are complete before l3 reads it
(one synchronisation of the tensor's stream per batch, not per tensor); l3's decode into the
decode staging buffer is waited for before CUDA reads it, and CUDA's last read of it (an
event) is complete before l3 writes it again.

Encode: a saved tensor's float32 values are copied (device to device, on its stream) into the
encode staging buffer after the ones already queued, and the tensor is free. When the next
one does not fit, or when backward starts (or the block ends), the queue is flushed: one
synchronisation, one submission encoding every queued array and one wait for their sizes
(`GpuEncodeStaging.encode_blocks_batch`), then one copy each into one buffer of exactly
their sizes, shared by the batch's streams and freed with the last of them. So the memory
l3 holds for a step is the staging buffer (``batch_bytes``, or the largest tensor), the room
the batch's streams may take at most while they are encoded (about 1.5 times the values:
`blocks_stride` offers a row stride only where it leaves whole blocks), and the streams
themselves (a batch's buffer lives while any of its streams does).

Decode: backward asks for one tensor; it and the tensors backward needs next (saved before
it, still coded) are decoded together, as many as fit the decode staging buffer (one
submission, one wait), and copied out into tensors of torch's own.
"""

from __future__ import annotations

import time
from typing import Any, Callable, List, Optional, Tuple

import torch

from . import _l3
from ._errors import GpuError, LimitsError, ParameterError


class CudaStaging:
    """l3's exported staging buffer (`l3._l3.GpuEncodeStaging`) imported into CUDA: ``view``
    is a float32 CUDA tensor over it. The import is released before the buffer. The rule's
    two halves: `written` (CUDA's writes to ``view`` are complete before l3's GPU reads)
    and `wait_reads` / `reads_done` (CUDA's reads of ``view`` are complete before l3's GPU
    writes it again); l3 itself waits for its own work before returning."""

    def __init__(self, nbytes: int) -> None:
        from .cuda import _CudaImport, _CudaMapping, cuda_device_of

        self.size = nbytes
        self.staging = _l3.GpuEncodeStaging(nbytes)
        device = cuda_device_of(self.staging.device_uuid)
        self._import = _CudaImport(self.staging, device)
        mapping = _CudaMapping(self._import, self._import.ptr, (nbytes // 4,), (4,), "<f4")
        self.view = torch.as_tensor(mapping, device=f"cuda:{device}")
        self._read: Optional[Any] = None

    def written(self) -> None:
        """CUDA's writes to ``view`` are complete (on every stream of its device: the copies
        may have been queued on other streams than the one current now)."""
        torch.cuda.synchronize(self.view.device)

    def reads_done(self) -> None:
        """Marks CUDA's reads of ``view`` so far (an event on its current stream)."""
        self._read = torch.cuda.Event()
        self._read.record(torch.cuda.current_stream(self.view.device))

    def wait_reads(self) -> None:
        """Waits for the reads `reads_done` marked."""
        if self._read is not None:
            self._read.synchronize()

    def gpu_wrote(self) -> None:
        """l3's GPU wrote the buffer (and waited for it): nothing to do, ``view`` is it."""


# What a queued encode reports when its batch is done: the stream, or None and the values
# kept exactly (float32, from the staging buffer), and the seconds its batch took; or, when
# the batch failed, None, None, 0 and the error.
Done = Callable[..., None]

# What keeps an array exact rather than failing the batch: a limit, an option the codec
# refuses, or l3's GPU out of memory for the streams.
_KEPT_EXACT = (ParameterError, LimitsError, GpuError)


class GpuBlocks:
    """The encode queue and the batched decode of `compress_activations` on l3's GPU (see the
    module documentation). ``batch_bytes``: each staging buffer's size (a tensor larger than
    it gets a buffer of its own size); 0 encodes and decodes each tensor on its own.
    ``submissions``: encode and decode submissions so far (one per batch)."""

    def __init__(self, batch_bytes: int, staging: Callable[[int], Any] = CudaStaging) -> None:
        self.batch_bytes = batch_bytes
        self._staging = staging  # makes a staging buffer of so many bytes (`CudaStaging`)
        self._enc: Optional[Any] = None
        self._dec: Optional[Any] = None
        # Queued encodes: (word offset, values, bound, stride, done).
        self._queue: List[Tuple[int, int, float, int, Done]] = []
        self._used = 0  # words of the encode staging buffer the queue takes
        self.submissions = 0

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, x: torch.Tensor, max_error: float, stride: int, done: Done) -> None:
        """Queues ``x`` (float32, on the CUDA device of l3's GPU) to be coded within the
        absolute bound ``max_error``, offered ``stride``; ``done`` is called when its batch
        is encoded. ``x`` may be freed when this returns (its copy is ordered on its
        stream)."""
        n = x.numel()
        size = max(self.batch_bytes, 4 * n, 4)
        if self._enc is not None and 4 * (self._used + n) > self._enc.size:
            self.flush()
        if self._enc is None or self._enc.size < 4 * n:
            self.flush()
            self._enc = None  # the old one goes first
            self._enc = self._staging(size)
        at = self._used
        self._enc.view[at:at + n].copy_(x.reshape(-1))
        if x.device.type == "cuda":
            # The copy is queued on this stream: x's memory is not reused before it ran.
            x.record_stream(torch.cuda.current_stream(x.device))
        self._queue.append((at, n, max_error, stride, done))
        self._used += n
        if self.batch_bytes == 0:
            self.flush()

    def flush(self) -> None:
        """Encodes every queued array (see the module documentation) and reports each."""
        queue, self._queue = self._queue, []
        self._used = 0
        if not queue:
            return
        started = time.perf_counter()
        assert self._enc is not None
        try:
            self._enc.written()  # CUDA's copies are done
            streams = self._encode([(4 * at, n, eb, stride) for at, n, eb, stride, _ in queue])
        except BaseException as e:
            # Every queued tensor hears of it (their futures fail, none waits forever).
            for *_, done in queue:
                done(None, None, 0.0, e)
            raise
        self.submissions += 1
        seconds = (time.perf_counter() - started) / len(queue)
        failed: Optional[BaseException] = None
        for (at, n, _, _, done), stream in zip(queue, streams):
            try:
                exact = None if stream is not None else self._enc.view[at:at + n].clone()
                done(stream, exact, seconds)
            except BaseException as e:  # the others are still told; the first error raised
                failed = failed or e
                done(None, None, 0.0, e)
        if failed is not None:
            raise failed

    def _encode(self, jobs: List[Tuple[int, int, float, int]]) -> List[Optional[Any]]:
        """The streams of ``jobs`` in one batch; if the batch fails for a reason that keeps
        arrays exact (`_KEPT_EXACT`), each on its own, None for those that fail alone."""
        assert self._enc is not None
        try:
            return list(self._enc.staging.encode_blocks_batch(jobs))
        except _KEPT_EXACT:
            streams: List[Optional[Any]] = []
            for job in jobs:
                try:
                    streams.append(self._enc.staging.encode_blocks_batch([job])[0])
                except _KEPT_EXACT:
                    streams.append(None)
            return streams

    def decode(self, wanted: List[Tuple[Any, tuple]]) -> List[torch.Tensor]:
        """The streams of ``wanted`` (``(stream, shape)``, the first the one needed now)
        decoded into float32 CUDA tensors of torch's own: as many as fit the decode staging
        buffer in one submission (the first always), the rest left out of the result."""
        first = 4 * wanted[0][0].values
        if self._dec is None or self._dec.size < first:
            self._dec = None
            self._dec = self._staging(max(self.batch_bytes, first, 4))
        jobs, at = [], 0
        for stream, _ in wanted:
            n = stream.values
            if jobs and 4 * (at + n) > self._dec.size:
                break
            jobs.append((stream, 4 * at))
            at += n
        self._dec.wait_reads()  # CUDA's last reads of the buffer are done
        self._dec.staging.decode_blocks_batch(jobs)  # waited for by l3
        self._dec.gpu_wrote()
        self.submissions += 1
        out = []
        for (stream, offset), (_, shape) in zip(jobs, wanted):
            w = offset // 4
            out.append(self._dec.view[w:w + stream.values].reshape(shape).clone())
        self._dec.reads_done()
        return out
