"""Error-bounded compression of the activations autograd saves for the backward pass (COMET's
idea, on l3's error-bounded float codec). Used as ``l3.torch.compress_activations``.

Every floating-point tensor autograd saves during the forward pass (inside the context) and
that is at least ``min_bytes`` is encoded as an l3 error-bounded array (version 3, the
differences predictor) on a thread pool, off the Python thread (the Rust encoder releases the
GIL); backward gets it back decoded (the next ones are decoded ahead, also on the pool).
Everything else is kept as it is (parameters, small tensors, tensors listed in ``exclude`` or
saved by a listed module, tensors whose bound would be below what the codec can hold) or
exact in fewer bytes (integer and bool tensors; see "What each tensor is for" below).

CUDA tensors are encoded on the GPU when l3's GPU (wgpu, Vulkan) is the tensor's CUDA device
(``gpu_encode``), in staging buffers that l3 allocated exportable and CUDA imported (`l3.cuda`'s
hand-off, reversed). With ``codec="auto"`` (or ``"blocks"``) each becomes a block-coded stream
(`l3.encode_blocks`, `shaders/blocks.wgsl`: the code built on the device, signs and zeros kept
by the coding) kept in l3's GPU memory, in batches (`_activation_gpu`): a tensor's values are
copied into the encode staging buffer after those queued and the tensor is free; when the next
does not fit (``gpu_batch_mb``), when backward starts or when the block ends, one
synchronisation of the stream (the rule: CUDA's writes complete before l3's GPU reads), one
submission and one wait encode the whole queue, and the batch's streams share one buffer of
exactly their sizes, freed with the last of them. Backward decodes a stream together with the
ones it needs next (as many as the decode staging buffer holds: one submission, one wait) and
copies each into a tensor of torch's own (l3's decode is waited for before CUDA reads; CUDA's
read is waited for, by an event, before l3 writes again). With ``codec="fields"`` each tensor
is encoded on its own by the WGSL error-bounded encoder (`shaders/encode_*.wgsl`, byte for
byte the CPU encoder's file) and the host gets the file. Otherwise CUDA tensors are copied to
pinned host memory (on their stream; the encoding thread waits for the copy's event), encoded
there, decoded on the host and copied back on the current stream of the thread that decodes.
Either way torch's device memory of every compressed activation is free between forward and
backward.

The bound. A float ``bound`` is relative: that fraction of each tensor's value range (max -
min of its finite values); ``absolute=True`` makes it absolute. Bounds are capped at
``max_relative`` of the tensor's range.

What each tensor is for decides how it is coded: ReLU's signs exact, integers exact, the
inputs of torch.utils.checkpoint's segments exact, and under ``"auto"`` a bound per saved
tensor by the rule of the operation saving it (COMET's per-layer rule for convolution and
linear inputs; normalisation inputs within a fraction of their groups' std; ...). The rules
and the measurements behind their constants: `l3._activation_sites`.

float16 and bfloat16 tensors are encoded as float32 within the bound less half a unit in the
last place of the dtype at the tensor's largest magnitude, so the value cast back to the dtype
is still within the bound (a bound below that is kept exact). Under ``"auto"`` the bound is
l3's choice, not the user's: there a float16/bfloat16 tensor comes back within its bound plus
that half unit (the cast back), as ``torch.autocast``'s own rounding of it did (otherwise
bfloat16's 8 bits leave most bounds nothing: ResNet-18 under bfloat16 autocast kept 1.9x
fewer bytes than its bfloat16 activations, 3.5x with it, at 3 % gradient error).

DistributedDataParallel: each process runs its own block and codes its own activations, and
its ``stats`` count its own saves; the gradient after the allreduce is the mean of what the
ranks give alone (tested bit for bit: gloo, two CPU processes, torchvision's ResNet-18, at
"auto" and at 1e-3, 2 % from exact activations' gradient). ``"auto"`` measures each layer on
the rank's own gradient (the weight's hook runs before the allreduce): ranks' bounds differ.
SyncBatchNorm: torch runs it on CUDA only (on the CPU, DDP and the layer raise ValueError,
passed through); its autograd function saves its tensors, the input included, outside every
torch function, so they are kept exact (not run here: it needs CUDA devices).

``torch.compile``: a compiled graph run through AOTAutograd (inductor, the default backend, and
``aot_eager``) is refused (RuntimeError, saying why): its tensors are saved all at once, after
the graph ran, by one autograd function, so no operation is known for any of them, and the
rules above need it (kept exact, they would save nothing). Compile what runs outside the
block, or run the block's part uncompiled. ``backend="eager"`` works (dynamo runs the
operations themselves: the same codings, the same gradient within rounding), but ``"auto"``
measures no layer there (dynamo traces the module hooks into its graph): layers keep
``start``. The baseline (``None``) counts a compiled graph's saves. Decoded tensors keep a
dense layout other than row-major (channels-last, a compiled graph's choice).

``stats`` counts exactly what the hooks hold: the bytes of the saved tensors as they came
(``raw``) and as kept (``stored``: compressed bytes, or the tensor's bytes when kept exact),
now and at peak, the tensors compressed and kept, and the seconds spent encoding and decoding
(summed over threads).
"""

from __future__ import annotations

import collections
import math
import os
import time
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Optional, Union

import numpy as np
import torch

from . import _l3
from ._activation_coding import INTEGERS as _INTEGERS
from ._activation_coding import Coded as _Coded
from ._activation_gpu import CudaStaging as _CudaStaging, GpuBlocks as _GpuBlocks
from ._activation_coding import axes_for as _axes_for
from ._activation_coding import codec_shape as _codec_shape
from ._activation_coding import blocks_stride, cpu_axes, dense_layout
from ._activation_coding import MANTISSA as _MANTISSA
from ._activation_coding import all_finite as _all_finite
from ._activation_coding import half_ulp as _half_ulp
from ._activation_coding import value_range as _range
from ._activation_coding import (denormalise, encode_normalised, pack_exact, pack_sparse,
                                 restore_signs,
                                 sign_bits, unpack_exact)
from ._activation_sites import (COMPILED_REFUSED, Need, OpNames, is_parameter, need_for,
                               saved_by_compiled_graph, smallest_std)
from ._activation_layers import LayerWatch
from ._activation_stats import ActivationStats
from ._errors import ParameterError


def _gpu_error(message: str) -> Exception:
    from ._errors import GpuError

    return GpuError(message)


class _Packed:
    """One saved tensor as the hooks keep it: exact, or compressed (a future of the bytes)."""

    __slots__ = ("owner", "tensor", "future", "shape", "dtype", "raw", "stored", "decoded",
                 "device", "copied", "on_gpu", "need", "span", "coded_eb", "counted",
                 "strides", "__weakref__")

    def __init__(self, owner: "compress_activations", raw: int) -> None:
        self.owner = owner
        self.tensor: Optional[torch.Tensor] = None
        self.future: Optional[Future] = None
        self.decoded: Optional[Future] = None
        self.shape: tuple = ()
        self.dtype = torch.float32
        self.raw = raw
        self.stored = 0
        self.device = torch.device("cpu")
        self.copied: Optional[Any] = None
        self.on_gpu = False  # encoded (and decoded) by l3's GPU codec
        self.need: Optional[Need] = None  # what its sites ask (None: kept exact)
        self.span = 0.0  # its range, once coded
        self.coded_eb: Optional[float] = None  # the absolute bound it was coded within
        self.counted: Optional[bool] = None  # counted as compressed (True) or exact (False)
        self.strides: Optional[tuple] = None  # a dense layout other than row-major, restored

    def __del__(self) -> None:
        try:
            self.owner.stats._add(-self.raw, -self.stored)
        except Exception:
            pass


class compress_activations:
    """Context manager compressing the activations saved for backward (see the module
    documentation). ``bound``: l3's one spelling, ``{"relative": r}`` (a fraction of each
    tensor's range) or ``{"absolute": e}``; a number (relative, absolute with
    ``absolute=True``); ``"auto"``; or ``None`` (nothing compressed; ``stats`` still counts:
    the baseline).

    Options (defaults): ``absolute`` (False: ``bound`` is relative to each tensor's range),
    ``model`` (the ``nn.Module`` whose layers ``"auto"`` measures; default: every layer run
    inside the block), ``tau`` (0.03: the weight
    gradient noise ``"auto"`` allows, as a fraction of its RMS), ``norm_tau`` (None: the
    per-normalisation ``l3._activation_sites.NORM_TAU``; a number: ``"auto"``'s bound on
    every normalisation's input, in units of its groups' std), ``start`` (1e-3: the relative
    bound before a layer's first measurement), ``max_relative`` (0.02), ``min_bytes`` (64 KiB:
    smaller tensors stay exact), ``exclude`` (tensors, or modules whose saved tensors, stay
    exact), ``gpu_encode`` (None: CUDA tensors are encoded on the GPU by l3's WGSL encoder when l3's
    GPU is the tensor's CUDA device and ``cuda.bindings`` is installed, else on the host;
    True: on the GPU or an error; False: on the host), ``threads`` (encode/decode threads;
    default: the cores), ``prefetch`` (2: tensors
    decoded ahead in backward), ``pending_mb`` (16: the forward pass waits while more than
    this many MiB of saved tensors await encoding; 0: each is encoded before it goes on),
    ``codec`` ("auto": block-coded streams kept in l3's GPU memory for tensors l3's GPU
    encodes, error-bounded arrays with sign bits on the host; "blocks" or "fields": that
    coding everywhere. Block-coded arrays (`l3.encode_blocks`) code on the GPU with no host
    work and keep signs and zeros themselves, in 3-20 % more bytes than "fields" on
    torchvision's ResNet-18/50 and a ViT at "auto"), ``gpu_batch_mb`` (64: the MiB of
    CUDA tensors l3's GPU encodes in one batch, and of streams it decodes in one; also the
    size of each of its two staging buffers; 0: one tensor at a time).

    Under DistributedDataParallel each rank runs its own block (its ``stats`` its own); a
    ``torch.compile``'d graph (inductor, aot_eager) is refused (see the module documentation).

        with l3.torch.compress_activations("auto", model=model) as ca:
            loss = criterion(model(x), y)
        loss.backward()          # may run after the block
        print(ca.stats)
    """

    def __init__(
        self,
        bound: Union[float, str, Dict[str, float], None] = "auto",
        *,
        absolute: bool = False,
        model: Optional[torch.nn.Module] = None,
        tau: float = 0.03,
        norm_tau: Optional[float] = None,
        start: float = 1e-3,
        max_relative: float = 0.02,
        min_bytes: int = 64 << 10,
        exclude: Iterable[Any] = (),
        threads: Optional[int] = None,
        prefetch: int = 2,
        pending_mb: int = 16,
        gpu_encode: Optional[bool] = None,
        codec: str = "auto",
        gpu_batch_mb: int = 64,
    ) -> None:
        if isinstance(bound, dict):
            kind, bound = _l3.parse_bound(bound)
            if absolute and kind == "relative":
                raise ParameterError("absolute=True and a relative bound disagree")
            absolute = kind == "absolute"
        if bound == "auto":
            if absolute:
                raise ParameterError("absolute=True is for a numeric bound, not 'auto'")
        elif bound is not None:
            if isinstance(bound, bool) or not isinstance(bound, (int, float)):
                raise TypeError(f"bound must be a float, 'auto' or None, got {bound!r}")
            if not (math.isfinite(bound) and bound > 0):
                raise ParameterError(f"bound must be finite and positive, got {bound}")
        for name, v in (("tau", tau), ("norm_tau", 1.0 if norm_tau is None else norm_tau),
                        ("start", start), ("max_relative", max_relative)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ParameterError(f"{name} must be finite and positive, got {v!r}")
        if not isinstance(min_bytes, int) or min_bytes < 0:
            raise ParameterError(f"min_bytes must be an int >= 0, got {min_bytes!r}")
        if not isinstance(prefetch, int) or prefetch < 0:
            raise ParameterError(f"prefetch must be an int >= 0, got {prefetch!r}")
        if not isinstance(pending_mb, int) or pending_mb < 0:
            raise ParameterError(f"pending_mb must be an int >= 0, got {pending_mb!r}")
        self.pending_bytes = pending_mb << 20
        if not isinstance(gpu_batch_mb, int) or gpu_batch_mb < 0:
            raise ParameterError(f"gpu_batch_mb must be an int >= 0, got {gpu_batch_mb!r}")
        if gpu_encode not in (None, True, False):
            raise TypeError(f"gpu_encode must be None, True or False, got {gpu_encode!r}")
        self.gpu_encode = gpu_encode
        if codec not in ("auto", "fields", "blocks"):
            raise ParameterError(f"codec must be 'auto', 'fields' or 'blocks', got {codec!r}")
        self.codec = codec
        # The GPU encoder's staging buffer imported into CUDA ("gpu_encode"), made on first use.
        self._staging: Optional[_CudaStaging] = None
        self._decode_staging: Optional[_CudaStaging] = None
        # Block-coded CUDA tensors: the encode queue and the batched decode (see
        # `_activation_gpu`).
        self._gpu_blocks = _GpuBlocks(gpu_batch_mb << 20)
        self._gpu_ok: Optional[bool] = None
        # Encodes not yet finished, oldest first, and the raw bytes they hold.
        self._pending: "collections.deque[tuple]" = collections.deque()
        self._pending_raw = 0
        self.bound = bound
        self.absolute = absolute
        self.model = model
        self.tau, self.start, self.max_relative = float(tau), float(start), float(max_relative)
        self.norm_tau = None if norm_tau is None else float(norm_tau)
        # The operation running when a tensor is saved (a torch-function mode, in the block)
        # and the compressed tensor not yet submitted to the encoder (see `_compress`).
        self._ops: Optional[OpNames] = None
        self._open: Optional[_Packed] = None
        self.min_bytes = min_bytes
        self.prefetch = prefetch
        excluded = list(exclude)
        self._excluded_modules = {id(m) for m in excluded if isinstance(m, torch.nn.Module)}
        self._excluded_tensors = [t for t in excluded if isinstance(t, torch.Tensor)]
        self.stats = ActivationStats()
        self._pool = ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1,
                                        thread_name_prefix="l3-activations")
        self._hooks: Optional[torch.autograd.graph.saved_tensors_hooks] = None
        # Deduplication: a tensor saved twice (an activation's output and the next layer's
        # input) is kept once while both hold it.
        # Keyed by storage, offset, shape, strides, version and dtype; the tensor is checked
        # to be the same object (weakly), so reused memory never matches.
        self._seen: Dict[tuple, tuple] = {}
        # Packed tensors in pack order (weak), for decoding ahead in backward.
        self._order: List[weakref.ReferenceType] = []
        self._position: "weakref.WeakKeyDictionary[_Packed, int]" = weakref.WeakKeyDictionary()
        # "auto"'s layers: the module running now, the layers seen, their forward hooks.
        self._watch = LayerWatch(model, self.tau)

    # -- the context ---------------------------------------------------------------------
    def __enter__(self) -> "compress_activations":
        if self._hooks is not None:
            raise RuntimeError("compress_activations is already active")
        if self.bound == "auto" or self._excluded_modules:
            self._watch.hook()  # (the module running: "auto"'s layers, excluded modules)
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        if self.bound is not None:
            self._ops = OpNames()
            self._ops.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        hooks, self._hooks = self._hooks, None
        ops, self._ops = self._ops, None
        if ops is not None:
            ops.__exit__(*exc)
        self._flush_open()
        if len(self._gpu_blocks):
            self._gpu_blocks.flush()
        if hooks is not None:
            hooks.__exit__(*exc)
        # The forward hooks go with the block; the measurements of a backward after it are
        # made by hooks on the layers' outputs and weights (see `_activation_layers`).
        self._watch.remove()

    def close(self) -> None:
        """Stops the thread pool (after pending work)."""
        self._pool.shutdown(wait=True)

    def bounds(self) -> Dict[str, float]:
        """``"auto"``: each measured layer's absolute bound, by module name (``model``'s names,
        else the class and the order the block first ran it in)."""
        return self._watch.bounds()

    # -- packing -------------------------------------------------------------------------
    def _keep_exact(self, t: torch.Tensor) -> bool:
        if t.is_floating_point():
            if t.dtype not in _MANTISSA:
                return True
        elif t.dtype not in _INTEGERS:
            return True  # complex, quantised, ...: as they are
        if t.device.type not in ("cpu", "cuda") or t.is_sparse or t.numel() == 0:
            return True
        if t.numel() * t.element_size() < self.min_bytes:
            return True
        if any(m for m in self._watch.stack if id(m) in self._excluded_modules):
            return True
        return any(t is x for x in self._excluded_tensors)

    def _need(self, t: torch.Tensor) -> Need:
        """What the site saving ``t`` now asks of its coding (`need_for`)."""
        current = self._ops.current() if self._ops is not None else None
        return need_for(t, current, self.bound, self.absolute, self.start, self.norm_tau,
                        self._watch.site_bound)

    def _pack(self, t: torch.Tensor) -> Any:
        if is_parameter(t):
            return t  # a parameter (or a view of one): held by the model anyway
        if (self._ops is not None and not self._ops.current()[0]
                and saved_by_compiled_graph()):
            raise RuntimeError(COMPILED_REFUSED)
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(),
               t._version, t.dtype)
        seen = self._seen.get(key)
        if seen is not None:
            t_ref, p_ref = seen
            p = p_ref()
            if p is not None and t_ref() is t:
                if p.need is not None:
                    self._tighten(p, t, self._need(t))
                return p
        self._flush_open()
        if self.stats.live_raw == 0:
            # Nothing held: a new step. Forget the last one's order.
            self._order.clear()
            self._position = weakref.WeakKeyDictionary()
        if len(self._seen) > 4096:
            self._seen = {k: v for k, v in self._seen.items()
                          if v[0]() is not None and v[1]() is not None}
        if self.bound is None or self._keep_exact(t):
            p = self._exact(t)
        else:
            p = self._compress(t, self._need(t))
        self._seen[key] = (weakref.ref(t), weakref.ref(p))
        return p

    def _compress(self, t: torch.Tensor, need: Need) -> _Packed:
        """``t`` taken to be compressed: held until the next tensor is saved (so that the
        operations saving the same tensor right after, an activation's output and the next
        layer's input, add their needs first), then submitted (`_submit`)."""
        raw = t.numel() * t.element_size()
        p = _Packed(self, raw)
        p.shape, p.dtype, p.need, p.device = tuple(t.shape), t.dtype, need, t.device
        p.strides = dense_layout(t)
        p.stored = raw  # until the encoder is done
        p.tensor = t.detach()
        self.stats._add(raw, raw)
        with self.stats._lock:
            self.stats.saved += 1
            self.stats.raw_bytes += raw
        self._open = p
        return p

    def _flush_open(self) -> None:
        p, self._open = self._open, None
        if p is not None:
            self._submit(p)

    def _tighten(self, p: _Packed, t: torch.Tensor, need: Need) -> None:
        """Another site saves ``p``'s tensor ``t``: its needs join ``p``'s; a tensor already
        coded is coded again from ``t`` if they ask for a tighter bound or for signs."""
        assert p.need is not None
        if not p.need.merge(need) or p is self._open:
            return
        assert p.future is not None
        if not p.future.done():
            self._gpu_blocks.flush()  # queued for l3's GPU: its batch goes now
        coded = p.future.result()
        if coded is None or p.coded_eb is None:
            return  # kept exact
        x = t.detach().float()
        # Signs newly asked for; or a bound beside a normalisation's (coded per group, within
        # more than its least std in the wider groups: coded again, by the tightest bound).
        stricter = (need.signs and coded.pos is None and not coded.blocks) or (
            coded.affine is not None and any(spec[0] != "norm" for spec in need.specs))
        for spec in need.specs:
            stricter = stricter or self._spec_bound(x, spec, p.span) < p.coded_eb
        if stricter:
            p.tensor, p.decoded = t.detach(), None
            self._submit(p)

    def _submit(self, p: _Packed) -> None:
        """``p.tensor`` to the encoder: l3's GPU encoder for a CUDA float tensor where it can,
        else the pool (a CUDA tensor copied to pinned host memory first)."""
        t = p.tensor
        assert t is not None and p.need is not None
        if p not in self._position:
            self._position[p] = len(self._order)
            self._order.append(weakref.ref(p))
        if t.device.type == "cuda" and t.is_floating_point() and self._use_gpu(t):
            self._encode_on_gpu(p, t)
            return
        if t.device.type == "cuda":
            # Copied to pinned host memory on the tensor's stream; the encoder thread waits
            # for the copy (an event), then the device memory is free.
            host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            host.copy_(t, non_blocking=True)
            p.copied = torch.cuda.Event()
            p.copied.record()
            p.tensor = host
        p.future = self._pool.submit(self._encode, p)
        # The forward pass waits while more than pending_bytes of tensors await encoding:
        # what the hooks hold stays near the compressed size, not the raw one.
        self._pending.append((p.future, p.raw))
        self._pending_raw += p.raw
        while self._pending and (self._pending[0][0].done()
                                 or self._pending_raw > self.pending_bytes):
            future, size = self._pending.popleft()
            future.result()
            self._pending_raw -= size

    def _exact(self, t: torch.Tensor) -> _Packed:
        raw = t.numel() * t.element_size()
        p = _Packed(self, raw)
        p.tensor, p.stored = t, raw
        self.stats._add(raw, raw)
        with self.stats._lock:
            self.stats.saved += 1
            self.stats.exact += 1
            self.stats.raw_bytes += raw
            self.stats.stored_bytes += raw
        return p

    def _use_gpu(self, t: torch.Tensor) -> bool:
        """Whether CUDA tensor ``t`` is encoded by l3's GPU encoder (see ``gpu_encode``)."""
        if self.gpu_encode is False:
            return False
        if self._gpu_ok is None:
            try:
                from .cuda import cuda_device_of_l3

                self._gpu_ok = cuda_device_of_l3() == (t.device.index or 0)
                why = "l3's GPU is another device than the tensor's"
            except Exception as e:  # no Vulkan adapter, no cuda.bindings, no export
                self._gpu_ok, why = False, str(e)
            if not self._gpu_ok and self.gpu_encode:
                raise _gpu_error(f"gpu_encode=True, but l3's GPU encoder cannot take CUDA "
                                 f"tensors here: {why}")
        return self._gpu_ok

    def _encode_on_gpu(self, p: _Packed, t: torch.Tensor) -> None:
        """Encodes CUDA tensor ``t`` on l3's GPU. Block-coded (``codec`` "auto" or
        "blocks"): queued (`_activation_gpu.GpuBlocks`: its values copied into the encode
        staging buffer, the tensor free when this returns), the stream kept in l3's GPU
        memory when its batch is encoded. ``codec="fields"``: copied into the staging buffer
        l3 exported and CUDA imported, the stream synchronised (CUDA's writes complete before
        l3's GPU reads), encoded as an error-bounded file whose bytes (and sign bits, where
        asked) come back to the host."""
        assert p.need is not None
        started = time.perf_counter()
        x = t.float()
        coded = None
        eb = self._bound(p, x, t.dtype)
        if eb is not None and self.codec != "fields":
            # Signs and zeros kept by the coding itself; the last axis offered as the stride.
            stride = blocks_stride(t.shape)
            future: Future = Future()
            dtype = t.dtype

            def done(stream: Optional[Any], exact: Optional[torch.Tensor], seconds: float,
                     error: Optional[BaseException] = None, p: _Packed = p,
                     eb: float = eb) -> None:
                if error is not None:
                    p.on_gpu = False
                    future.set_exception(error)
                    return
                coded = _Coded(stream, blocks=True) if stream is not None else None
                self._encoded(p, coded, eb, seconds, gpu=True)
                if coded is None:  # kept exact: the values from the staging buffer
                    assert exact is not None
                    y = exact.reshape(p.shape).to(dtype)
                    if p.strides is not None and y.stride() != p.strides:
                        y = torch.empty_strided(p.shape, p.strides, dtype=dtype,
                                                device=y.device).copy_(y)
                    p.on_gpu, p.tensor = False, y
                future.set_result(coded)

            # Set before the queue may run `done` (a batch of one runs it at once).
            p.future, p.on_gpu, p.tensor = future, True, None
            try:
                self._gpu_blocks.put(x, eb, stride, done)
            except BaseException as e:
                if not future.done():  # not queued: nothing will ever set it
                    p.on_gpu = False
                    future.set_exception(e)
                raise
            return
        if eb is not None:
            n = x.numel()
            if self._staging is None or self._staging.size < 4 * n:
                self._staging = None  # the old one goes first
                self._staging = _CudaStaging(max(4 * n, 1 << 20))
            self._staging.view[:n].copy_(x.reshape(-1))
            self._staging.written()
            shape = _codec_shape(tuple(t.shape))
            try:
                data = self._staging.staging.encode(list(shape), max_error=eb,
                                                    axes=_axes_for(len(shape)))
                coded = _Coded(data, *(sign_bits(x) if p.need.signs else (None, None)))
            except ParameterError:
                coded = None
        done_now: Future = Future()
        done_now.set_result(coded)
        p.future = done_now
        p.on_gpu = coded is not None
        p.tensor = None if coded is not None else t  # kept exact, on its device
        self._encoded(p, coded, eb, time.perf_counter() - started, gpu=True)

    def _encoded(self, p: _Packed, coded: Optional[_Coded], eb: Optional[float], seconds: float,
                 gpu: bool) -> None:
        """Counts ``p``'s encode (``coded``, or None: kept exact): what it now holds replaces
        what it held (its raw bytes, or an earlier coding's)."""
        stored = coded.nbytes if coded is not None else p.raw
        with self.stats._lock:
            self.stats.encode_seconds += seconds
            if p.counted is not None:  # coded again (`_tighten`): the earlier one goes
                self.stats.stored_bytes -= p.stored
                if p.counted:
                    self.stats.compressed -= 1
                    self.stats.gpu_encoded -= p.on_gpu
                else:
                    self.stats.exact -= 1
            self.stats.stored_bytes += stored
            if coded is not None:
                self.stats.compressed += 1
                self.stats.gpu_encoded += gpu
            else:
                self.stats.exact += 1
            p.counted = coded is not None
        self.stats._add(0, stored - p.stored)
        p.stored = stored
        p.coded_eb = eb if coded is not None else None

    def _spec_bound(self, x: torch.Tensor, spec: tuple, span: float) -> float:
        """The absolute bound ``spec`` asks of ``x`` (float32, range ``span``)."""
        kind, value = spec[0], spec[1]
        if kind == "exact":
            return 0.0
        if kind in ("relative", "unread"):
            return value * span
        if kind == "absolute":
            return value
        # "norm": that many times the smallest standard deviation of its groups.
        return value * smallest_std(x, spec[2]) if _all_finite(x) else 0.0

    def _bound(self, p: _Packed, x: torch.Tensor, dtype: torch.dtype) -> Optional[float]:
        """The absolute bound for ``x`` (float32 values of a ``dtype`` tensor) under ``p``'s
        needs (the tightest it asks), or None to keep it exact (no finite value, no range, or
        a bound the codec cannot hold). Sets ``p.span``."""
        assert p.need is not None
        lo, hi = _range(x)
        if not (math.isfinite(lo) and math.isfinite(hi)):
            regular = x[torch.isfinite(x)]
            if regular.numel() == 0:
                return None
            lo, hi = _range(regular)
        span = p.span = hi - lo
        eb = min(self._spec_bound(x, spec, span) for spec in p.need.specs)
        if span > 0 and any(spec[0] != "unread" for spec in p.need.specs):
            eb = min(eb, self.max_relative * span)
        if self.bound != "auto":  # (see the module documentation: "auto" and the cast back)
            eb -= _half_ulp(dtype, max(abs(lo), abs(hi)) + eb)
        # Bounds far below the range (more bins than the codec holds) stay exact; so do
        # values whose signs are kept below the smallest normal number of their dtype (the
        # least magnitude a kept sign decodes to, see `restore_signs`).
        if not (span > 0 and eb > span * 2.0 ** -15):
            return None
        if p.need.signs and eb < torch.finfo(dtype).tiny:
            return None
        return eb

    def _normalised(self, p: _Packed, x: torch.Tensor) -> Optional[tuple]:
        """``(k, groups)`` when ``p``'s one need is a normalisation's (``k`` times each group's
        std: coded as normalised values, `encode_normalised`), else None."""
        assert p.need is not None
        specs = p.need.specs
        if len(specs) != 1 or specs[0][0] != "norm" or p.need.signs or not _all_finite(x):
            return None
        return specs[0][1], specs[0][2]

    def _encode(self, p: _Packed) -> Optional[_Coded]:
        """``p.tensor`` coded within ``p``'s needs (integers and bools exactly), or None to
        keep it exact."""
        started = time.perf_counter()
        t = p.tensor
        assert t is not None and p.need is not None
        if p.copied is not None:
            p.copied.synchronize()
            p.copied = None
        coded, eb = None, None
        try:
            if not t.is_floating_point():
                coded = pack_exact(t)
            else:
                x = t.float() if t.dtype != torch.float32 else t
                norm = self._normalised(p, x)
                if norm is not None:
                    # Within k of each group's own std (the bound over the whole tensor, k
                    # times the least std, may be below what the codec holds: no matter).
                    got = encode_normalised(x, norm[1], norm[0],
                                            blocks=self.codec == "blocks")
                    if got is not None:
                        coded, eb, p.span = got
                if coded is None:
                    eb = self._bound(p, x, t.dtype)
                if coded is None and eb is not None and self.codec == "blocks":
                    coded = _Coded(_l3.encode_blocks(x.contiguous().numpy(), max_error=eb,
                                                     stride=blocks_stride(t.shape)),
                                   blocks=True)
                if coded is None and eb is not None:
                    arr = x.contiguous().numpy()
                    shape = _codec_shape(arr.shape)
                    data = _l3.encode_field(arr.reshape(shape), max_error=eb, version=3,
                                            predictor="differences",
                                            axes=cpu_axes(shape, p.need.sites))
                    coded = _Coded(data, *(sign_bits(x) if p.need.signs else (None, None)))
                if coded is None:
                    coded = pack_sparse(t)  # kept exact: its zeros as bits, if that pays
        except ParameterError:
            coded = None
        self._encoded(p, coded, eb, time.perf_counter() - started, gpu=False)
        if coded is not None:
            p.tensor = None  # the original is released: only the bytes are kept
        return coded

    # -- unpacking -----------------------------------------------------------------------
    def _decode(self, p: _Packed) -> torch.Tensor:
        coded = p.future.result() if p.future is not None else None
        if coded is None:
            assert p.tensor is not None
            return p.tensor.to(p.device, non_blocking=True)
        started = time.perf_counter()
        if coded.exact is not None:
            y = unpack_exact(coded, p.shape, p.dtype)
        elif p.on_gpu and coded.blocks:
            y = self._decode_blocks_on_gpu(p, coded)
        elif p.on_gpu:
            y = self._decode_on_gpu(coded, p)
        elif coded.blocks:
            y = torch.from_numpy(_l3.decode_blocks(coded.data)).reshape(p.shape)
        else:
            y = torch.from_numpy(np.asarray(_l3.decode_field(coded.data))).reshape(p.shape)
        return self._finish(p, coded, y, started)

    def _finish(self, p: _Packed, coded: _Coded, y: torch.Tensor, started: float) -> torch.Tensor:
        """``p``'s decoded values ``y`` (float32, or its exact dtype) as the tensor saved:
        denormalised, in its dtype, its signs restored, on its device, in its layout."""
        if coded.exact is None:
            if coded.affine is not None:
                y = denormalise(y, coded)
            if p.dtype != torch.float32:
                info = torch.finfo(p.dtype)
                y = torch.where(torch.isinf(y), y, y.clamp(info.min, info.max)).to(p.dtype)
            if coded.pos is not None:
                y = restore_signs(y, coded.pos, coded.neg)
        if p.device.type == "cuda" and not p.on_gpu:
            y = y.pin_memory().to(p.device, non_blocking=True)
        if p.strides is not None and y.stride() != p.strides:
            y = torch.empty_strided(p.shape, p.strides, dtype=y.dtype,
                                    device=y.device).copy_(y)
        with self.stats._lock:
            self.stats.decode_seconds += time.perf_counter() - started
        return y

    def _decode_blocks_on_gpu(self, p: _Packed, coded: _Coded) -> torch.Tensor:
        """``p``'s stream decoded on l3's GPU together with those backward needs next (saved
        before it, still coded on the GPU), as many as the decode staging buffer holds: one
        submission; the others' tensors are kept for their unpacking. Returns ``p``'s."""
        wanted, ps = [(coded.data, p.shape)], [p]
        room = self._gpu_blocks.batch_bytes - 4 * coded.data.values
        at = self._position.get(p)
        for ref in reversed(self._order[:at] if at is not None else []):
            q = ref()
            if (q is None or not q.on_gpu or q.decoded is not None or q.future is None
                    or not q.future.done()):
                continue
            c = q.future.result()
            if c is None or not c.blocks:
                continue
            room -= 4 * c.data.values
            if room < 0:
                break
            wanted.append((c.data, q.shape))
            ps.append(q)
        ys = self._gpu_blocks.decode(wanted)
        for q, y in zip(ps[1:], ys[1:]):
            done: Future = Future()
            done.set_result(self._finish(q, q.future.result(), y, time.perf_counter()))
            q.decoded = done
        return ys[0]

    def _decode_on_gpu(self, coded: _Coded, p: _Packed) -> torch.Tensor:
        """``coded`` decoded by l3's GPU decoder into the decode staging buffer (exported to
        CUDA), then copied into a tensor of torch's own on the tensor's device."""
        n = math.prod(p.shape)
        if self._decode_staging is None or self._decode_staging.size < 4 * n:
            self._decode_staging = None
            self._decode_staging = _CudaStaging(max(4 * n, 1 << 20))
        self._decode_staging.wait_reads()  # CUDA's last read of it is done
        self._decode_staging.staging.decode_into(coded.data)  # waited for by l3
        y = self._decode_staging.view[:n].reshape(p.shape).clone()
        self._decode_staging.reads_done()
        return y

    def _unpack(self, p: Any) -> torch.Tensor:
        if isinstance(p, torch.Tensor):
            return p
        if p is self._open:
            self._flush_open()
        if len(self._gpu_blocks):
            self._gpu_blocks.flush()  # backward began: the queued encodes go now
        if p.future is None:
            assert p.tensor is not None
            return p.tensor
        if p.decoded is None:
            # Kept for a second consumer of the same saved tensor, while it lives.
            done: Future = Future()
            done.set_result(self._decode(p))
            p.decoded = done
        # Decode the tensors backward needs next (saved before this one) ahead, on the pool.
        at = self._position.get(p)
        if at is not None and self.prefetch:
            for ref in self._order[max(0, at - self.prefetch):at]:
                q = ref()
                if (q is not None and q.future is not None and q.decoded is None
                        and not q.on_gpu):
                    q.decoded = self._pool.submit(self._decode, q)
        return p.decoded.result()
