"""How `compress_activations` codes a saved tensor beside the error-bounded payload: the
signs kept exact (one bit per value for the positives, one more for the negatives where there
are any), and integer and bool tensors kept exact in fewer bytes. Every decoded byte here came
from this process's own encoder (saved tensors never leave it)."""

from __future__ import annotations

import math
from typing import Any, Iterable, Optional, Tuple

import numpy as np
import torch

from . import _l3
from ._activation_sites import ATTENTION_OPS, group_stats
from ._errors import ParameterError

#: Integer dtypes kept exact, packed (bool: one bit a value).
INTEGERS = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                      torch.int64})


class Coded:
    """One saved tensor's coding: ``data`` (an l3 error-bounded array, or with ``blocks`` a
    block-coded stream: bytes, or an ``l3._l3.BlocksStream`` in l3's GPU memory; for an exact
    integer tensor, its packing), ``pos``/``neg`` (sign bits, or None; a block-coded stream
    keeps signs itself), ``exact`` (None for a lossy float payload; else how the exact
    packing reads: ``("bits",)``, ``("offset", lo, numpy dtype)`` or ``("field", lo)``)."""

    __slots__ = ("data", "pos", "neg", "exact", "affine", "blocks")

    def __init__(self, data: Any, pos: Optional[bytes] = None, neg: Optional[bytes] = None,
                 exact: Optional[tuple] = None, affine: Optional[tuple] = None,
                 blocks: bool = False) -> None:
        self.data, self.pos, self.neg, self.exact = data, pos, neg, exact
        # (mean, std, view): the payload holds (x - mean) / std of x.reshape(view).
        self.affine = affine
        self.blocks = blocks

    @property
    def nbytes(self) -> int:
        stream = getattr(self.data, "nbytes", None)  # a BlocksStream (bytes have no nbytes)
        n = (len(self.data) if stream is None else stream) + len(self.pos or b"") + len(
            self.neg or b"")
        if self.affine is not None:
            n += 4 * (self.affine[0].numel() + self.affine[1].numel())
        return n


def axes_for(ndim: int) -> int:
    """The differences predictor's axes for an activation: the two spatial axes of an image
    batch (N, C, H, W), the last axis of a sequence batch (N, C, L) and of anything else."""
    if ndim == 4:
        return 0b1100
    return 1 << (ndim - 1)


def cpu_axes(shape: tuple, sites: Iterable[str] = ()) -> Optional[int]:
    """The CPU encoder's axes for an activation saved by ``sites``: the two spatial axes of an
    image batch (N, C, H, W) of more than 8 x 8 positions; else None, the encoder's own
    estimate. (The last axis of a sequence batch, or attention's head dimension, holds
    unrelated features: differenced along it a ViT kept 6.1x fewer bytes, with the estimate
    8.6x; ResNet-50's 4 x 4 layers code 8-15 % smaller too. The estimate about doubles those
    tensors' encoding time.)"""
    if (len(shape) == 4 and shape[2] * shape[3] > 64
            and not any(site in ATTENTION_OPS for site in sites)):
        return 0b1100
    return None


def codec_shape(shape: tuple) -> tuple:
    """``shape`` in at most 4 axes (the codec's most): the middle axes of a longer one merged,
    a 0-d tensor as one value."""
    if len(shape) == 0:
        return (1,)
    if len(shape) > 4:
        return (shape[0], int(np.prod(shape[1:-2])), shape[-2], shape[-1])
    return tuple(shape)


def sign_bits(x: torch.Tensor) -> Tuple[bytes, Optional[bytes]]:
    """The positions of positive values and, if any value is negative, of negative ones, one
    bit per value (NumPy's packbits order)."""
    flat = x.reshape(-1)
    pos = np.packbits(flat.gt(0).cpu().numpy()).tobytes()
    neg_mask = flat.lt(0)
    neg = np.packbits(neg_mask.cpu().numpy()).tobytes() if bool(neg_mask.any()) else None
    return pos, neg


def unpack_bits(bits: bytes, n: int) -> torch.Tensor:
    return torch.from_numpy(np.unpackbits(np.frombuffer(bits, np.uint8), count=n).astype(bool))


def restore_signs(y: torch.Tensor, pos: bytes, neg: Optional[bytes]) -> torch.Tensor:
    """``y`` (decoded within the bound) with every value's sign as stored: zeros exactly zero,
    a value stored positive (negative) at least the smallest positive normal number ``c`` of
    its dtype (at most ``-c``). Still within the bound ``e``: a positive ``v`` decoded to
    ``d < c`` becomes ``c``; if ``v >= c``, ``c`` lies between ``d`` and ``v``; if ``v < c``,
    ``|c - v| < c <= e`` (the encoder keeps exact a tensor whose bound is below ``c``). NaN
    stays NaN."""
    n = y.numel()
    flat = y.reshape(-1)
    tiny = torch.finfo(y.dtype).tiny
    p = unpack_bits(pos, n)
    out = torch.where(p, flat.clamp_min(tiny), flat)
    if neg is not None:
        m = unpack_bits(neg, n)
        out = torch.where(m, out.clamp_max(-tiny), out)
        zero = ~(p | m)
    else:
        zero = ~p
    out = torch.where(zero & ~torch.isnan(out), torch.zeros((), dtype=out.dtype), out)
    return out.reshape(y.shape)


def blocks_stride(shape: tuple) -> int:
    """The stride a block-coded tensor of ``shape`` is offered (`l3.encode_blocks`): its last
    axis where that leaves at least 32 rows (a block's height: fewer rows make more, shorter
    blocks, and a worst-case stream, what a GPU encode reserves, many times the values),
    else 0."""
    if len(shape) < 2 or shape[-1] <= 0:
        return 0
    return shape[-1] if math.prod(shape) // shape[-1] >= 32 else 0


def encode_normalised(x: torch.Tensor, groups: tuple, k: float,
                      blocks: bool = False) -> Optional[Tuple[Coded, float, float]]:
    """``x`` (float32, finite) coded as its normalised values ``(x - mean) / std`` per group
    of a normalisation (`group_stats`), each within ``k`` less a margin for float32 rounding
    in the affine map, so that every value decodes within ``k`` times its own group's std (a
    float16 or bfloat16 tensor: plus the cast back's half unit, as "auto" allows). Returns
    the coding, the least bound (``k`` times the least std) and ``x``'s range; None if that
    leaves no bound the codec can hold. ``blocks``: as a block-coded stream."""
    mean, std, view = group_stats(x, groups)
    lo_hi = torch.aminmax(x)
    lo, hi = float(lo_hi[0]), float(lo_hi[1])
    big = max(abs(lo), abs(hi)) + float(mean.abs().max())
    least = float(std.min())
    if not (least > 0 and math.isfinite(big)):
        return None
    eb = k - 8 * big * 2.0 ** -23 / least
    z = (x.reshape(view) - mean) / std
    z_lo_hi = torch.aminmax(z)
    span = float(z_lo_hi[1]) - float(z_lo_hi[0])
    if not (span > 0 and eb > span * 2.0 ** -15):
        return None
    arr = z.reshape(x.shape).contiguous().numpy()
    if blocks:
        data = _l3.encode_blocks(arr, max_error=eb, stride=blocks_stride(arr.shape))
        return Coded(data, affine=(mean, std, view), blocks=True), k * least, hi - lo
    shape = codec_shape(arr.shape)
    data = _l3.encode_field(arr.reshape(shape), max_error=eb, version=3,
                            predictor="differences", axes=cpu_axes(shape))
    return Coded(data, affine=(mean, std, view)), k * least, hi - lo


def denormalise(y: torch.Tensor, coded: Coded) -> torch.Tensor:
    """The values `encode_normalised` coded, from the decoded normalised ones ``y``."""
    assert coded.affine is not None
    mean, std, view = coded.affine
    return (y.reshape(view) * std + mean).reshape(y.shape)


_BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def pack_sparse(t: torch.Tensor) -> Optional[Coded]:
    """A float tensor kept bit for bit with its zeros (+0.0) as one bit each: the positions
    of the other values, then their bytes. None where that saves nothing (fewer than one
    value in eight is +0.0)."""
    flat = t.reshape(-1)
    bits = flat.view(_BITS[t.dtype])
    nonzero = bits.ne(0)
    kept = int(nonzero.sum())
    if kept * 8 > flat.numel() * 7:
        return None
    values = flat[nonzero].contiguous().view(torch.uint8).numpy().tobytes()
    return Coded(values, pos=np.packbits(nonzero.numpy()).tobytes(), exact=("sparse",))


def pack_exact(t: torch.Tensor) -> Optional[Coded]:
    """An integer or bool tensor (on the host) kept exact in fewer bytes, or None (as it is):
    bools one bit a value; integers as their offsets from the least, coded as an l3
    error-bounded array within 0.49 (so rounding gives them back exactly; max-pooling indices
    are near neighbours' and code small) or, where that is larger or the range too wide for
    it, in the narrowest unsigned dtype that holds them."""
    if t.dtype == torch.bool:
        return Coded(np.packbits(t.reshape(-1).numpy()).tobytes(), exact=("bits",))
    flat = t.reshape(-1)
    lo_hi = torch.aminmax(flat)
    lo, span = int(lo_hi[0]), int(lo_hi[1]) - int(lo_hi[0])
    best: Optional[Coded] = None
    for dt in (np.uint8, np.uint16, np.uint32):
        if span <= np.iinfo(dt).max:
            best = Coded((flat - lo).numpy().astype(dt).tobytes(), exact=("offset", lo, dt))
            break
    if 0 < span < 1 << 14:
        arr = (t - lo).to(torch.float32).contiguous().numpy()
        shape = codec_shape(arr.shape)
        try:
            data = _l3.encode_field(arr.reshape(shape), max_error=0.49, version=3,
                                    predictor="differences", axes=axes_for(len(shape)))
        except ParameterError:
            data = None
        if data is not None and (best is None or len(data) < best.nbytes):
            best = Coded(data, exact=("field", lo))
    if best is not None and best.nbytes >= t.numel() * t.element_size():
        return None
    return best


def unpack_exact(coded: Coded, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """The tensor `pack_exact` packed, exactly."""
    n = int(np.prod(shape)) if shape else 1
    how = coded.exact
    assert how is not None
    if how[0] == "bits":
        return unpack_bits(coded.data, n).reshape(shape)
    if how[0] == "sparse":
        assert coded.pos is not None
        out = torch.zeros(n, dtype=dtype)
        values = torch.frombuffer(bytearray(coded.data), dtype=dtype) if coded.data else (
            torch.zeros(0, dtype=dtype))
        out[unpack_bits(coded.pos, n)] = values
        return out.reshape(shape)
    if how[0] == "offset":
        vals = np.frombuffer(coded.data, dtype=how[2]).astype(np.int64) + how[1]
    else:
        vals = np.rint(np.asarray(_l3.decode_field(coded.data), dtype=np.float64)).astype(
            np.int64).reshape(-1) + how[1]
    return torch.from_numpy(vals).to(dtype).reshape(shape)


def dense_layout(t: torch.Tensor) -> Optional[tuple]:
    """``t``'s strides when it is dense but not row-major (channels-last, a transpose, the
    layouts a compiled graph chooses), else None. Decoded tensors come back in that layout:
    eager backward takes any layout, but a compiled graph's backward asserts the strides it
    was compiled for (``torch.compile``: "expected size ..., stride ...")."""
    if t.is_contiguous():
        return None
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n != 1):
        if stride != expected:
            return None  # gaps or overlaps: row-major, as before
        expected *= size
    return tuple(t.stride())


#: Significand bits (without the implicit one) of the dtypes compressed.
MANTISSA = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}


def value_range(x: torch.Tensor) -> tuple:
    """``x``'s least and greatest values (NaN if it holds a NaN): one reduction and, for a
    CUDA tensor, one copy to the host (one wait for the device, not one per value)."""
    lo, hi = torch.stack(tuple(torch.aminmax(x))).tolist()
    return float(lo), float(hi)


def all_finite(x: torch.Tensor) -> bool:
    """No NaN and no infinity in ``x`` (one reduction: min and max propagate NaN; far faster
    here than ``isfinite(x).all()``)."""
    lo, hi = value_range(x)
    return math.isfinite(lo) and math.isfinite(hi)


def half_ulp(dtype: torch.dtype, magnitude: float) -> float:
    """Half a unit in the last place of ``dtype`` at ``magnitude`` (0 for float32: the codec
    already decodes float32 within the bound)."""
    if dtype == torch.float32 or magnitude <= 0 or not math.isfinite(magnitude):
        return 0.0
    exponent = math.frexp(magnitude)[1] - 1
    return math.ldexp(1.0, exponent - MANTISSA[dtype] - 1)
