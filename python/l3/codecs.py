"""Zarr and numcodecs codecs that store each chunk of a float array as an l3 field file.

Zarr v3 (the ``zarr`` package, 3.x): the codec replaces the ``bytes`` serializer::

    import zarr
    from l3.codecs import L3

    z = zarr.create_array("data.zarr", shape=(365, 721, 1440), chunks=(8, 721, 1440),
                          dtype="float32", serializer=L3(), compressors=None)  # lossless
    z = zarr.create_array(..., serializer=L3(bound={"absolute": 1e-3}))   # within 1e-3

(``compressors=None``: otherwise Zarr adds its default zstd after the serializer, a second
pass over chunks that l3 has already entropy-coded.)

Zarr v2 stores and other numcodecs users take :class:`L3Numcodecs` as the compressor
(``zarr.create_array(..., zarr_format=2, compressors=L3Numcodecs())``).

Both are registered under the name ``"l3"`` (entry points ``zarr.codecs`` and
``numcodecs.codecs``), so a store written with them opens with plain ``zarr.open`` once l3 is
installed, without importing this module.

Modes (the same for both classes): ``bound`` in l3's one spelling, ``{"absolute": e}`` or
``{"relative": r}``, gives the mode; ``mode="absolute"`` (or ``"relative"``) with a number
``bound=e`` is the same (and what the stored configuration holds); no bound is lossless.

- ``"lossless"`` (default): float32 and float16 chunks, bit for bit (NaN payloads and -0.0
  included), with l3's lossless float arrays (SPEC.md, "Lossless float arrays").
- ``"absolute"``: float32 chunks, every value within ``bound`` of the original, as
  error-bounded arrays of version 3 (SPEC.md, "Error-bounded float arrays"; chunks
  written before 2026-12-07 are version 1 and still decode); NaN, infinities and
  ``fill_value`` stay exact.
- ``"relative"``: as ``"absolute"`` with ``bound`` a fraction of each *chunk's* value range
  (chunks with different ranges get different absolute bounds, and an edge chunk's range
  includes the fill value Zarr pads it with; use ``"absolute"`` for one bound over the
  whole array).
- A bound finer than the format's 65,536 bins allow over a chunk's range (or a relative bound
  of a constant chunk) is honoured, never refused: that chunk is stored exactly, as a lossless
  float array (``l3.field_info(chunk)["mode"] == "lossless"``), and decodes like any other.

A chunk has the array's axes; l3 files have 1 to 4, so a chunk of more has its leading axes
merged before encoding; decoding restores the chunk's shape, which the file's own shape must
match in size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from . import _l3
from ._errors import FormatError, ParameterError

__all__ = ["L3", "L3Numcodecs", "encode_chunk", "decode_chunk"]

_MODES = ("lossless", "absolute", "relative")


def _check(mode: str, bound: Optional[float], fill_value: Optional[float]) -> None:
    if mode not in _MODES:
        raise ParameterError(f"l3 codec: mode must be one of {', '.join(_MODES)}, not {mode!r}")
    if mode == "lossless":
        if bound is not None:
            raise ParameterError("l3 codec: a lossless codec takes no bound")
    elif bound is None or not (isinstance(bound, (int, float)) and math.isfinite(bound) and bound > 0):
        raise ParameterError(f"l3 codec: mode {mode!r} needs a finite bound > 0, not {bound!r}")
    if fill_value is not None and not isinstance(fill_value, (int, float)):
        raise ParameterError(f"l3 codec: fill_value must be a number, not {fill_value!r}")


class _InputTypeError(ParameterError, TypeError):
    """Input of a type the codec does not store (an object or integer array, raw bytes): a
    ``ParameterError`` as everywhere in l3, and the ``TypeError`` numcodecs codecs raise."""


def _check_dtype(mode: str, dtype: np.dtype) -> None:
    ok = (np.dtype(np.float32), np.dtype(np.float16)) if mode == "lossless" else (np.dtype(np.float32),)
    if np.dtype(dtype).newbyteorder("=") not in ok:
        names = " or ".join(str(d) for d in ok)
        raise _InputTypeError(f"l3 codec: mode {mode!r} stores {names} arrays, not {np.dtype(dtype)}")


def _file_shape(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The shape the chunk is stored with: its own, leading axes merged past 4."""
    if len(shape) == 0:
        return (1,)
    if len(shape) <= 4:
        return tuple(shape)
    return (math.prod(shape[:-3]),) + tuple(shape[-3:])


def _mode_and_bound(mode: str, bound: Any) -> Tuple[str, Optional[float]]:
    """``bound`` in l3's one spelling (``{"absolute": e}`` or ``{"relative": r}``: the mode
    follows from it) or as ``mode=`` with a number: ``(mode, number)``."""
    if isinstance(bound, dict):
        kind, value = _l3.parse_bound(bound)
        if mode not in ("lossless", kind):
            raise ParameterError(f"l3 codec: mode {mode!r} and bound {bound!r} disagree")
        return kind, value
    return mode, bound


def encode_chunk(
    chunk: np.ndarray,
    mode: str = "lossless",
    bound: Any = None,
    fill_value: Optional[float] = None,
) -> bytes:
    """One chunk as an l3 field file (the codecs' encode)."""
    mode, bound = _mode_and_bound(mode, bound)
    _check(mode, bound, fill_value)
    a = np.asarray(chunk)
    _check_dtype(mode, a.dtype)
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
    a = a.reshape(_file_shape(a.shape))
    if mode == "lossless":
        fill = None if fill_value is None else a.dtype.type(fill_value)
        return _l3.encode_field(a, lossless=True, fill_value=fill)
    key = "max_error" if mode == "absolute" else "relative"
    return _l3.encode_field(a, **{key: float(bound)}, fill_value=fill_value)


def decode_chunk(data: Any, shape: Optional[Tuple[int, ...]] = None) -> np.ndarray:
    """An l3 field file back to its array, reshaped to ``shape`` when given (its size must
    match the file's)."""
    a = _l3.decode_field(bytes(data) if not isinstance(data, (bytes, bytearray, memoryview)) else data)
    if shape is not None:
        if math.prod(shape) != a.size:
            raise FormatError(
                f"l3 codec: the chunk holds {a.size} values, its array expects {math.prod(shape)} "
                f"(shape {tuple(shape)})"
            )
        a = a.reshape(shape)
    return a


try:  # Zarr v3
    from zarr.abc.codec import ArrayBytesCodec as _ArrayBytesCodec
    from zarr.core.common import parse_named_configuration as _parse_named_configuration
    from zarr.registry import register_codec as _register_zarr_codec
except ImportError:  # pragma: no cover - zarr is optional
    _ArrayBytesCodec = None

if _ArrayBytesCodec is not None:

    @dataclass(frozen=True)
    class L3(_ArrayBytesCodec):  # type: ignore[misc,valid-type]
        """Zarr v3 array-to-bytes codec ``"l3"`` (see the module's head for the modes)."""

        is_fixed_size = False

        mode: str
        bound: Optional[float]
        fill_value: Optional[float]

        def __init__(
            self, *, mode: str = "lossless", bound: Any = None,
            fill_value: Optional[float] = None,
        ) -> None:
            mode, bound = _mode_and_bound(mode, bound)
            _check(mode, bound, fill_value)
            object.__setattr__(self, "mode", mode)
            object.__setattr__(self, "bound", None if bound is None else float(bound))
            object.__setattr__(self, "fill_value", None if fill_value is None else float(fill_value))

        @classmethod
        def from_dict(cls, data: dict) -> "L3":
            _, configuration = _parse_named_configuration(data, "l3", require_configuration=False)
            configuration = dict(configuration or {})
            unknown = set(configuration) - {"mode", "bound", "fill_value"}
            if unknown:
                raise ParameterError(f"l3 codec: unknown configuration keys {sorted(unknown)}")
            return cls(**configuration)

        def to_dict(self) -> dict:
            configuration: dict = {"mode": self.mode}
            if self.bound is not None:
                configuration["bound"] = self.bound
            if self.fill_value is not None:
                configuration["fill_value"] = self.fill_value
            return {"name": "l3", "configuration": configuration}

        def validate(self, *, shape: Any, dtype: Any, chunk_grid: Any) -> None:
            native = dtype.to_native_dtype() if hasattr(dtype, "to_native_dtype") else np.dtype(dtype)
            _check_dtype(self.mode, native)

        async def _encode_single(self, chunk_array: Any, chunk_spec: Any) -> Any:
            data = encode_chunk(chunk_array.as_numpy_array(), self.mode, self.bound, self.fill_value)
            return chunk_spec.prototype.buffer.from_bytes(data)

        async def _decode_single(self, chunk_bytes: Any, chunk_spec: Any) -> Any:
            a = decode_chunk(chunk_bytes.to_bytes(), tuple(chunk_spec.shape))
            want = chunk_spec.dtype.to_native_dtype()
            if a.dtype != want:
                raise FormatError(f"l3 codec: the chunk holds {a.dtype}, its array is {want}")
            return chunk_spec.prototype.nd_buffer.from_ndarray_like(a)

        def compute_encoded_size(self, input_byte_length: int, chunk_spec: Any) -> int:
            raise NotImplementedError("l3 chunks are variable-size")

    _register_zarr_codec("l3", L3)

else:  # pragma: no cover

    class L3:  # type: ignore[no-redef]
        """Zarr v3 codec ``"l3"``: needs the ``zarr`` package (3.x)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError("l3.codecs.L3 needs zarr 3: pip install zarr")


try:  # numcodecs (Zarr v2 stores, and numcodecs users)
    from numcodecs.abc import Codec as _Codec
    from numcodecs.compat import ensure_ndarray_like as _ensure_ndarray_like
    from numcodecs.compat import ndarray_copy as _ndarray_copy
    from numcodecs.registry import register_codec as _register_codec
except ImportError:  # pragma: no cover - numcodecs is optional
    _Codec = None

if _Codec is not None:

    class L3Numcodecs(_Codec):  # type: ignore[misc,valid-type]
        """numcodecs codec ``"l3"`` (see the module's head for the modes). It needs the chunk
        as a shaped array, which is what Zarr passes its compressor when no filter comes
        first."""

        codec_id = "l3"

        def __init__(
            self, mode: str = "lossless", bound: Any = None,
            fill_value: Optional[float] = None,
        ) -> None:
            mode, bound = _mode_and_bound(mode, bound)
            _check(mode, bound, fill_value)
            self.mode = mode
            self.bound = None if bound is None else float(bound)
            self.fill_value = None if fill_value is None else float(fill_value)

        def encode(self, buf: Any) -> bytes:
            if not isinstance(buf, np.ndarray):
                raise _InputTypeError("l3 codec: needs the chunk as a NumPy array, not raw bytes")
            return encode_chunk(buf, self.mode, self.bound, self.fill_value)

        def decode(self, buf: Any, out: Any = None) -> Any:
            if out is not None and _ensure_ndarray_like(out).dtype == object:
                raise TypeError("l3 codec: cannot decode into an object array")
            a = decode_chunk(buf)
            if out is not None:
                return _ndarray_copy(a, out)
            return a

    _register_codec(L3Numcodecs)

else:  # pragma: no cover

    class L3Numcodecs:  # type: ignore[no-redef]
        """numcodecs codec ``"l3"``: needs the ``numcodecs`` package."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError("l3.codecs.L3Numcodecs needs numcodecs: pip install numcodecs")
