"""Samples from scientific stores: HDF5 (h5py), NetCDF-4 (netCDF4) and Zarr v2/v3 (zarr).

``open_source(path, variables, sample_axis=0)`` opens a store and yields one dict of NumPy
arrays per index along the sample axis, with that axis removed, ready for ``l3.pack_arrays``::

    src = l3.open_source("run.nc", {"input": ["u", "v"], "target": ["p"]}, sample_axis="time")
    len(src); src.arrays["input"].shape      # (2, H, W): u and v stacked on a new axis
    for sample in src: sample["input"], sample["target"]
    l3.pack_source("run.nc", "ds/", {"input": ["u", "v"], "target": ["p"]}, modes="lossless")

Reading: each variable is read in blocks along the sample axis, aligned to its chunks there
(one chunk length per block; a contiguous variable in blocks of about 64 MiB), and the
reader holds one block per variable at a time, whatever the file's size. HDF5 and NetCDF
chunk caches are set to one block. ``start``/``stop`` select a range of the sample axis.

Variables: ``variables`` names the arrays of a sample. A name maps to one variable (the
array as stored) or to a list of variables stacked on a new leading axis (``input`` =
stack(u, v)); a plain list of names is one array per variable. Every variable needs the
sample axis (an int, or a dimension name: NetCDF dimensions, Zarr v3 ``dimension_names``
or xarray's ``_ARRAY_DIMENSIONS``, HDF5 dimension labels) and the same length along it;
those listed in ``broadcast`` may lack it and are read once and repeated in every sample.
Stacked variables need one dtype and one sample shape. Only numeric dtypes (bool, integer,
float) are read; data comes out native-endian.

Fill values: a variable's ``_FillValue`` (else a scalar ``missing_value``) attribute, else
the HDF5 dataset's user-defined fill value (HDF5's default, not set by the writer, is
ignored), else the Zarr array's ``fill_value`` (zarr v3 always has one; 0 unless set),
becomes the array's ``fill_value`` mode option (`Source.modes`). Stacked variables whose
fill values differ are refused unless ``fill_values`` overrides them.

Scale and offset (CF ``scale_factor``/``add_offset``): by default values are read packed,
as stored (so lossless records keep the file's bits) and the attributes stay in the
array's metadata (`Source.meta`); ``unpack=True`` applies the CF rule ``packed *
scale_factor + add_offset`` in float64, stores float32 and turns ``_FillValue`` and
``missing_value`` cells into NaN (the fill value is then NaN).

Hostile stores: a missing variable, a wrong axis, a non-numeric dtype, an empty range, a
length mismatch or more than 4 axes per sample is a ``ParameterError``; a sample over the
limits (``limits=l3.Limits(...)``: bytes per sample array, each dimension) a
``LimitsError``, as is a chunk over ``max_block_bytes`` (256 MiB: libraries decode a chunk
whole); a file that is not a readable store a ``FormatError``. All are checked
from the metadata before any data is read.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

import numpy as np

from ._errors import FormatError, L3Error, LimitsError, ParameterError
from ._stores import Var, backend, scalar

#: Bytes a contiguous (unchunked) variable reads per block.
CONTIGUOUS_BLOCK_BYTES = 64 << 20
#: Most bytes one block of one variable may hold; a chunk row beyond it is read in parts.
MAX_BLOCK_BYTES = 256 << 20
#: Most axes of one sample array (tensor records hold 1 to 4).
MAX_SAMPLE_AXES = 4

Variables = Union[Sequence[str], Mapping[str, Union[str, Sequence[str]]]]


@dataclass
class VariableInfo:
    """One variable of the store as the source reads it."""

    #: Its path in the store (relative to ``group``).
    name: str
    #: The dtype of the values yielded (native-endian; float32 when unpacked).
    dtype: np.dtype
    #: Its full shape in the store.
    shape: tuple
    #: Its dimension names, where the store has them.
    dims: Optional[tuple]
    #: Its chunk shape (None: contiguous).
    chunks: Optional[tuple]
    #: Its attributes (JSON-compatible values only; large ones dropped).
    attrs: Dict[str, Any]
    #: Its fill value (None: none declared).
    fill_value: Any
    #: Its sample axis (None: broadcast to every sample).
    axis: Optional[int]
    #: Samples read per block (0 when broadcast).
    block: int = 0


@dataclass
class ArrayInfo:
    """One array of a sample: a variable, or several stacked on a new leading axis."""

    #: Its name in the sample dict.
    name: str
    #: Its variables, in stacking order.
    variables: List[str]
    #: True: the variables are stacked on a new leading axis.
    stacked: bool
    #: Its dtype.
    dtype: np.dtype
    #: Its shape in one sample.
    shape: tuple
    #: The fill value mapped to its mode (None: none).
    fill_value: Any = None
    #: Attributes per variable.
    attrs: Dict[str, Dict[str, Any]] = field(default_factory=dict)


def _limits(limits: Any):
    from ._l3 import Limits

    return limits if limits is not None else Limits()


def _same_fill(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


class Source:
    """A scientific store read as samples: ``len()``, iteration (one dict of arrays per index
    of the sample axis), ``src[i]`` (one sample), `variables`, `arrays`, `modes`, `meta`.
    Built by `open_source`; close it (or use ``with``) to close the file."""

    def __init__(
        self,
        target: Any,
        variables: Variables,
        *,
        sample_axis: Union[int, str] = 0,
        group: Optional[str] = None,
        start: Optional[int] = None,
        stop: Optional[int] = None,
        broadcast: Union[bool, Sequence[str]] = (),
        unpack: bool = False,
        fill_values: Optional[Mapping[str, Any]] = None,
        limits: Any = None,
        kind: Optional[str] = None,
        max_block_bytes: int = MAX_BLOCK_BYTES,
        offsets: Optional[Mapping[str, int]] = None,
    ):
        spec = _parse_variables(variables)
        if not isinstance(sample_axis, (int, str)) or isinstance(sample_axis, bool):
            raise ParameterError("sample_axis must be an int or a dimension name")
        if not isinstance(max_block_bytes, int) or max_block_bytes < 1:
            raise ParameterError("max_block_bytes must be a positive int")
        limits = _limits(limits)
        self.path = os.fspath(target) if isinstance(target, (str, os.PathLike)) else repr(target)
        self.sample_axis = sample_axis
        self.unpack = bool(unpack)
        self._backend = backend(target, kind, group)
        self.kind: str = self._backend.kind
        try:
            self._open(spec, sample_axis, broadcast, fill_values or {}, limits, max_block_bytes)
            self._range(start, stop)
            self._offsets(offsets)
        except BaseException:
            self._backend.close()
            raise
        self._buffers: Dict[str, tuple] = {}
        #: Most bytes the reader's block buffers held at once (broadcast variables included).
        self.peak_buffer_bytes = 0
        #: Blocks read, as ``(variable, lo, hi)`` along the sample axis.
        self.blocks_read: List[tuple] = []

    def _open(self, spec, sample_axis, broadcast, fill_values, limits, max_block_bytes) -> None:
        names = [v for _, vs, _ in spec for v in vs]
        if broadcast is True:
            broadcast = names
        broadcast = set(broadcast or ())
        for b in broadcast - set(names):
            raise ParameterError(f"broadcast names {b!r}, which is not one of the variables")
        self._vars: Dict[str, Var] = {}
        #: The variables read, by name.
        self.variables: Dict[str, VariableInfo] = {}
        length = None
        for name in dict.fromkeys(names):
            v = self._backend.var(name)
            self._vars[name] = v
            dtype = v.dtype
            if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
                raise ParameterError(
                    f"variable {name!r} has dtype {dtype}: only bool, integer and float"
                    " variables are read"
                )
            if self.unpack and ("scale_factor" in v.attrs or "add_offset" in v.attrs):
                dtype = np.dtype(np.float32)
            dtype = dtype.newbyteorder("=")
            axis = self._axis(v, sample_axis)
            if axis is None and name not in broadcast:
                raise ParameterError(
                    f"variable {name!r} (shape {v.shape}, dims {v.dims}) has no sample axis"
                    f" {sample_axis!r};"
                    " pass broadcast=[...] to repeat it in every sample"
                )
            sample_shape = v.shape if axis is None else v.shape[:axis] + v.shape[axis + 1 :]
            itemsize = dtype.itemsize
            for d in sample_shape:
                if d > limits.max_dimension:
                    raise LimitsError(
                        f"variable {name!r}: dimension {d} over the limit {limits.max_dimension}"
                    )
            sample_bytes = math.prod(sample_shape) * itemsize
            if sample_bytes > limits.max_output_bytes:
                raise LimitsError(
                    f"variable {name!r}: one sample is {sample_bytes} bytes, over the limit"
                    f" {limits.max_output_bytes}"
                )
            block = 0
            if axis is not None:
                n = v.shape[axis]
                if length is not None and n != length[1]:
                    raise ParameterError(
                        f"variable {name!r} has {n} samples along the sample axis, {length[0]!r}"
                        f" has {length[1]}"
                    )
                length = length or (name, n)
                per = max(sample_bytes, 1)
                if v.chunks is not None and len(v.chunks) == len(v.shape) and v.chunks[axis] >= 1:
                    chunk_bytes = math.prod(v.chunks) * v.dtype.itemsize
                    if chunk_bytes > max_block_bytes:  # a chunk is decoded whole to read any of it
                        raise LimitsError(
                            f"variable {name!r}: a chunk {v.chunks} is {chunk_bytes} bytes, over"
                            f" {max_block_bytes}"
                            " (max_block_bytes)"
                        )
                    block = v.chunks[axis]
                else:
                    block = max(1, CONTIGUOUS_BLOCK_BYTES // per)
                block = max(1, min(block, max_block_bytes // per, max(n, 1)))
                if v.cache_fn is not None:
                    v.cache_fn(block * per)
            fill = fill_values[name] if name in fill_values else v.fill_value
            if (
                fill is not None
                and self.unpack
                and ("scale_factor" in v.attrs or "add_offset" in v.attrs)
            ):
                fill = float("nan")  # unpacking turns fill and missing cells into NaN
            self.variables[name] = VariableInfo(
                name, dtype, v.shape, v.dims, v.chunks, v.attrs, fill, axis, block
            )
        if length is None:
            raise ParameterError("every variable is broadcast: at least one needs the sample axis")
        self._length = length[1]
        #: The arrays of a sample, by name.
        self.arrays: Dict[str, ArrayInfo] = {}
        for array, vs, stacked in spec:
            infos = [self.variables[v] for v in vs]
            first = infos[0]
            shape0 = self._sample_shape(first)
            for other in infos[1:]:
                if other.dtype != first.dtype or self._sample_shape(other) != shape0:
                    raise ParameterError(
                        f"array {array!r} stacks {first.name!r} ({first.dtype}, {shape0}) and"
                        f" {other.name!r}"
                        f" ({other.dtype}, {self._sample_shape(other)}): stacked variables need"
                        " one dtype and shape"
                    )
            shape = ((len(vs),) + shape0) if stacked else shape0
            if len(shape) == 0:
                raise ParameterError(
                    f"array {array!r}: variable {first.name!r} has only the sample axis, so a"
                    " sample would be a"
                    " scalar; stack it with others (a list) to make a 1-axis array"
                )
            if len(shape) > MAX_SAMPLE_AXES:
                raise ParameterError(
                    f"array {array!r} has {len(shape)} axes per sample (shape {shape}); records"
                    " hold 1 to 4"
                )
            nbytes = math.prod(shape) * first.dtype.itemsize
            if nbytes > limits.max_output_bytes:
                raise LimitsError(
                    f"array {array!r}: one sample is {nbytes} bytes, over the limit"
                    f" {limits.max_output_bytes}"
                )
            fills = [i.fill_value for i in infos if i.fill_value is not None]
            if array in fill_values:
                fill = fill_values[array]
            elif not fills:
                fill = None
            elif all(_same_fill(f, fills[0]) for f in fills):
                fill = fills[0]
            else:
                raise ParameterError(
                    f"array {array!r} stacks variables with different fill values"
                    f" ({ {i.name: i.fill_value for i in infos} }); pass"
                    f" fill_values={{{array!r}: ...}}"
                )
            self.arrays[array] = ArrayInfo(
                array, list(vs), stacked, first.dtype, shape, fill, {i.name: i.attrs for i in infos}
            )

    @staticmethod
    def _sample_shape(info: VariableInfo) -> tuple:
        if info.axis is None:
            return info.shape
        return info.shape[: info.axis] + info.shape[info.axis + 1 :]

    @staticmethod
    def _axis(v: Var, sample_axis: Union[int, str]) -> Optional[int]:
        if isinstance(sample_axis, str):
            if v.dims is None or sample_axis not in v.dims:
                return None
            return v.dims.index(sample_axis)
        ndim = len(v.shape)
        if -ndim <= sample_axis < ndim:
            return sample_axis % ndim
        return None

    def _range(self, start: Optional[int], stop: Optional[int]) -> None:
        for name, value in (("start", start), ("stop", stop)):
            if value is not None and (
                not isinstance(value, (int, np.integer)) or isinstance(value, bool)
            ):
                raise ParameterError(f"{name} must be an int")
        start = 0 if start is None else int(start)
        stop = self._length if stop is None else int(stop)
        if not 0 <= start <= stop <= self._length:
            raise ParameterError(
                f"start {start} and stop {stop} must satisfy 0 <= start <= stop <= {self._length}"
            )
        if start == stop:
            raise ParameterError(
                f"no samples: the sample axis has {self._length} and the range is {start}..{stop}"
            )
        #: The first and one past the last index read along the sample axis.
        self.start, self.stop = start, stop

    def _offsets(self, offsets: Optional[Mapping[str, int]]) -> None:
        offsets = dict(offsets or {})
        for name, value in offsets.items():
            if name not in self.arrays:
                raise ParameterError(
                    f"offsets names {name!r}, not an array of this source ({list(self.arrays)})"
                )
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ParameterError(f"offset of {name!r} must be an int >= 0, not {value!r}")
        #: Per array, how many steps along the sample axis after the sample's index it is
        #: read (``{"target": 1}``: the target of sample t is step t + 1).
        self.offsets: Dict[str, int] = {name: int(offsets.get(name, 0)) for name in self.arrays}
        span = max(self.offsets.values())
        if self.stop - self.start <= span:
            raise ParameterError(
                f"no samples: the range {self.start}..{self.stop} holds no index whose offset"
                f" {span} stays inside it"
            )
        self._span = span

    def __len__(self) -> int:
        return self.stop - self.start - self._span

    def keys(self) -> List[str]:
        """Record keys: each sample's index along the store's sample axis, zero-padded."""
        width = max(6, len(str(self._length - 1)))
        return [f"{i:0{width}d}" for i in range(self.start, self.stop - self._span)]

    def _read(self, name: str, lo: int, hi: int) -> np.ndarray:
        v, info = self._vars[name], self.variables[name]
        if info.axis is None:
            sel: Any = Ellipsis
        else:
            sel = tuple(
                slice(lo, hi) if d == info.axis else slice(None) for d in range(len(v.shape))
            )
        try:
            data = np.asarray(v.read_fn(sel))
        except L3Error:
            raise
        except Exception as e:
            raise FormatError(
                f"reading {name!r} [{lo}:{hi}] of {self.path}: {type(e).__name__}: {e}"
            ) from e
        if data.shape != (
            info.shape
            if info.axis is None
            else info.shape[: info.axis] + (hi - lo,) + info.shape[info.axis + 1 :]
        ):
            raise FormatError(f"reading {name!r} [{lo}:{hi}] gave shape {data.shape}")
        if self.unpack and ("scale_factor" in v.attrs or "add_offset" in v.attrs):
            data = self._unpack(v, data)
        data = data.astype(info.dtype, copy=False)
        if info.axis not in (None, 0):
            data = np.moveaxis(data, info.axis, 0)
        return data

    @staticmethod
    def _unpack(v: Var, raw: np.ndarray) -> np.ndarray:
        scale = scalar(v.attrs.get("scale_factor"))
        offset = scalar(v.attrs.get("add_offset"))
        out = raw.astype(np.float64)
        if scale is not None:
            out *= scale
        if offset is not None:
            out += offset
        out = out.astype(np.float32)
        for key in ("_FillValue", "missing_value"):
            m = v.attrs.get(key)
            for f in (m if isinstance(m, list) else [m]):
                f = scalar(f)
                if f is not None:
                    out[raw == f] = np.nan
        return out

    def _sample_of(self, name: str, i: int) -> np.ndarray:
        info = self.variables[name]
        held = self._buffers.get(name)
        if held is None or not held[0] <= i < held[1]:
            self._buffers.pop(name, None)  # release the old block before reading the next
            if info.axis is None:
                lo, hi = 0, 1
                data = self._read(name, 0, 0)[None]
            else:
                lo = max(self.start, i - i % info.block)
                hi = min(self.stop, i - i % info.block + info.block)
                data = self._read(name, lo, hi)
                self.blocks_read.append((name, lo, hi))
            if info.axis is None:
                self._buffers[name] = (-1, sys.maxsize, data)
            else:
                self._buffers[name] = (lo, hi, data)
            live = sum(b[2].nbytes for b in self._buffers.values())
            self.peak_buffer_bytes = max(self.peak_buffer_bytes, live)
            held = self._buffers[name]
        return held[2][0] if info.axis is None else held[2][i - held[0]]

    def _sample(self, i: int) -> Dict[str, np.ndarray]:
        out = {}
        for name, arr in self.arrays.items():
            parts = [self._sample_of(v, i + self.offsets[name]) for v in arr.variables]
            out[name] = np.stack(parts) if arr.stacked else np.array(parts[0], order="C", copy=True)
        return out

    def window(self, modes: Any = "lossless") -> tuple:
        """The once-stored layout of this source's samples (``pack_source``'s default with
        ``offsets``): ``(stored, pairs)``. ``stored`` maps each stored array's name to its
        source array: arrays with the same variables, stacking and mode (``modes`` as
        `Source.modes` takes it) are stored once, under the first one's name. ``pairs`` is
        ``[(array, stored name, offset)]`` per array, the window `l3.pack_arrays` takes:
        array ``array`` of sample t is the stored array of step t + offset."""
        per = self.modes(modes)
        stored: Dict[str, str] = {}
        pairs = []
        for name, arr in self.arrays.items():
            home = next(
                (
                    s
                    for s, src in stored.items()
                    if self.arrays[src].variables == arr.variables
                    and self.arrays[src].stacked == arr.stacked
                    and per[src] == per[name]
                ),
                None,
            )
            if home is None:
                home = name
                stored[name] = name
            pairs.append((name, home, self.offsets[name]))
        return stored, pairs

    def steps(self, stored: Mapping[str, str]) -> Iterator[Dict[str, np.ndarray]]:
        """Every step from ``start`` to ``stop`` as a dict of the ``stored`` arrays (name ->
        source array, from `Source.window`), each at that step: the records of the
        once-stored layout (``stop - start`` of them, `Source.step_keys`)."""
        try:
            for i in range(self.start, self.stop):
                out = {}
                for name, src in stored.items():
                    arr = self.arrays[src]
                    parts = [self._sample_of(v, i) for v in arr.variables]
                    out[name] = (
                        np.stack(parts) if arr.stacked else np.array(parts[0], order="C", copy=True)
                    )
                yield out
        finally:
            self._buffers.clear()

    def step_keys(self) -> List[str]:
        """Record keys of `Source.steps`: each step's index along the sample axis."""
        width = max(6, len(str(self._length - 1)))
        return [f"{i:0{width}d}" for i in range(self.start, self.stop)]

    def __getitem__(self, index: int) -> Dict[str, np.ndarray]:
        """Sample ``index`` (0-based from ``start``); reads the blocks that hold it."""
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise ParameterError("a sample index must be an int")
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"sample {index} out of range 0..{n}")
        return self._sample(self.start + int(index) % n)

    def __iter__(self) -> Iterator[Dict[str, np.ndarray]]:
        """Every sample from ``start`` to ``stop``, in order; each array is a new array."""
        try:
            for i in range(self.start, self.stop - self._span):
                yield self._sample(i)
        finally:
            self._buffers.clear()

    def modes(self, modes: Any = "lossless") -> Dict[str, Any]:
        """The ``modes`` argument of ``l3.pack_arrays`` for this source: ``modes`` (one mode,
        or a dict per array name; a missing name gets "lossless") with each array's fill
        value added as ``fill_value`` (a string mode becomes ``{"mode": mode, "fill_value":
        f}``; ``"raw"`` stores values as they are and gets none)."""
        if isinstance(modes, Mapping) and not _is_mode_dict(modes):
            unknown = set(modes) - set(self.arrays)
            if unknown:
                raise ParameterError(
                    f"modes names {sorted(unknown)}, not arrays of this source"
                    f" ({list(self.arrays)})"
                )
            per = {name: modes.get(name, "lossless") for name in self.arrays}
        else:
            per = {name: modes for name in self.arrays}
        out = {}
        for name, mode in per.items():
            fill = self.arrays[name].fill_value
            if fill is None or mode == "raw":
                out[name] = mode
            elif isinstance(mode, str):
                out[name] = {"mode": mode, "fill_value": fill}
            elif isinstance(mode, Mapping):
                out[name] = dict(mode) if "fill_value" in mode else dict(mode, fill_value=fill)
            else:
                raise ParameterError(
                    f"mode of {name!r} must be a string or a dict, not {type(mode).__name__}"
                )
        return out

    def meta(self) -> Dict[str, Any]:
        """What the source was: store, kind, sample axis, range and, per array, its
        variables (names, dtypes, shapes, dimension names, attributes) and fill value."""
        return {
            "source": self.path,
            "kind": self.kind,
            "sample_axis": self.sample_axis,
            "start": self.start,
            "stop": self.stop,
            "offsets": self.offsets,
            "unpacked": self.unpack,
            "arrays": {
                name: {
                    "variables": arr.variables,
                    "stacked": arr.stacked,
                    "dtype": arr.dtype.name,
                    "shape": list(arr.shape),
                    "fill_value": arr.fill_value,
                    "variable_info": {
                        v: {
                            "dtype": self.variables[v].dtype.name,
                            "shape": list(self.variables[v].shape),
                            "dims": (
                                list(self.variables[v].dims) if self.variables[v].dims else None
                            ),
                            "broadcast": self.variables[v].axis is None,
                            "attrs": self.variables[v].attrs,
                        }
                        for v in arr.variables
                    },
                }
                for name, arr in self.arrays.items()
            },
        }

    def close(self) -> None:
        """Closes the store (when the source opened it)."""
        self._buffers.clear()
        self._backend.close()

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as the strings "NaN", "Infinity", "-Infinity"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _is_mode_dict(d: Mapping) -> bool:
    return any(k in d for k in ("mode", "absolute", "relative", "fill_value", "format"))


def _parse_variables(variables: Variables) -> List[tuple]:
    """``[(array name, [variables], stacked)]`` from the ``variables`` argument."""
    if isinstance(variables, str):
        variables = [v for v in variables.split(",") if v]
    if isinstance(variables, Mapping):
        items = list(variables.items())
    elif isinstance(variables, Sequence):
        items = [(v, v) for v in variables]
    else:
        raise ParameterError(
            "variables must be a list of names or a dict of array name -> variable(s)"
        )
    if not items:
        raise ParameterError("no variables named")
    spec = []
    for array, vs in items:
        if not isinstance(array, str) or not array:
            raise ParameterError(f"array names must be non-empty strings, not {array!r}")
        stacked = not isinstance(vs, str)
        vs = [vs] if isinstance(vs, str) else list(vs)
        if not vs or not all(isinstance(v, str) and v for v in vs):
            raise ParameterError(f"array {array!r}: variables must be non-empty strings")
        if len(set(vs)) != len(vs):
            raise ParameterError(f"array {array!r} names a variable twice: {vs}")
        spec.append((array, vs, stacked))
    return spec


def open_source(
    path_or_url: Any,
    variables: Variables,
    *,
    sample_axis: Union[int, str] = 0,
    group: Optional[str] = None,
    start: Optional[int] = None,
    stop: Optional[int] = None,
    broadcast: Union[bool, Sequence[str]] = (),
    unpack: bool = False,
    fill_values: Optional[Mapping[str, Any]] = None,
    limits: Any = None,
    kind: Optional[str] = None,
    max_block_bytes: int = MAX_BLOCK_BYTES,
    offsets: Optional[Mapping[str, int]] = None,
) -> Source:
    """Opens an HDF5 file, a NetCDF file or a Zarr store (a path, a URL through fsspec, or
    an open ``h5py.File``/``netCDF4.Dataset``/``zarr.Group``) as a `Source` of samples.
    ``kind`` ("hdf5", "netcdf", "zarr") overrides detection (HDF5 by its signature, NetCDF
    by it or a ``.nc`` name, Zarr by ``zarr.json``/``.zgroup``/``.zarray``).
    ``max_block_bytes`` bounds one block (and one chunk) of one variable. ``offsets`` reads an
    array that many steps after the sample's index (``{"target": 1}``: sample t pairs step t
    with step t + 1, for next-step prediction; the source then has that many fewer samples;
    ``pack_source`` stores each step once, with the pairing as the dataset's window where
    one array is read at two steps).
    See the module help
    for variables, axes, fill values, scale/offset and errors."""
    return Source(
        path_or_url,
        variables,
        sample_axis=sample_axis,
        group=group,
        start=start,
        stop=stop,
        broadcast=broadcast,
        unpack=unpack,
        fill_values=fill_values,
        limits=limits,
        kind=kind,
        max_block_bytes=max_block_bytes,
        offsets=offsets,
    )


def progress(iterable, total: int, desc: str = "samples"):
    """``iterable`` with a progress line on stderr: tqdm's when installed, else a counter
    updated at most every half second."""
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        yield from tqdm(iterable, total=total, desc=desc, unit="sample", file=sys.stderr)
        return
    t0 = last = time.monotonic()
    n = 0
    for item in iterable:
        yield item
        n += 1
        now = time.monotonic()
        if now - last >= 0.5 or n == total:
            rate = n / max(now - t0, 1e-9)
            sys.stderr.write(f"\r{desc}: {n}/{total} ({rate:.0f}/s)")
            sys.stderr.flush()
            last = now
    sys.stderr.write("\n")


def pack_source(
    source: Any,
    output: Union[str, os.PathLike],
    variables: Optional[Variables] = None,
    *,
    modes: Any = "lossless",
    samples_per_shard: int = 256,
    force: bool = False,
    limits: Any = None,
    show_progress: bool = False,
    windows: bool = True,
    **source_options: Any,
) -> dict:
    """Packs a store into a tensor dataset in ``output`` through ``l3.pack_arrays``: one
    record per index of the sample axis, keyed by that index (`Source.keys`), modes with the
    fill values (`Source.modes`). With ``offsets`` that read one stored array at two steps
    (``input`` and ``target`` of the same variables and mode, `Source.window`), each step is
    one record of the distinct arrays, keyed by its index (`Source.step_keys`), and the
    dataset's window (manifest version 2) pairs them: each step stored once, the dataset's
    samples those of the source. Offsets whose arrays are all distinct keep one record per
    sample (each step of each array is then stored once already, and a sample is one read).
    ``windows=False`` always writes one record per sample (a step stored in every sample that
    reads it). ``source`` is a `Source`, or a path/URL/open store opened
    with `open_source` (``variables`` and ``source_options``: its arguments). A rerun keeps
    the finished shards (``pack_arrays``' resume). Writes ``source.json`` (`Source.meta`)
    beside the manifest. Returns ``pack_arrays``' dict."""
    from ._tensor_pack import pack_arrays

    if isinstance(source, Source):
        if variables is not None or source_options:
            raise ParameterError(
                "pass variables and source options to open_source, not with a Source"
            )
        src, owned = source, False
    else:
        if variables is None:
            raise ParameterError("variables are needed to open a source")
        src, owned = open_source(source, variables, limits=limits, **source_options), True
    try:
        windowed = bool(windows) and any(src.offsets.values())
        if windowed:
            stored, pairs = src.window(modes)
            # Windows only where they store less: some stored array read at two offsets.
            # Otherwise one record per sample already holds each step of each array once,
            # and a sample reads one record.
            at: Dict[str, set] = {}
            for _, home, offset in pairs:
                at.setdefault(home, set()).add(offset)
            windowed = any(len(offsets) > 1 for offsets in at.values())
        if windowed:
            all_modes = src.modes(modes)
            samples: Any = src.steps(stored)
            total, keys = src.stop - src.start, src.step_keys()
            pack_modes: Any = {name: all_modes[name] for name in stored}
        else:
            samples, total, keys, pairs = iter(src), len(src), src.keys(), None
            pack_modes = src.modes(modes)
        if show_progress:
            samples = progress(samples, total)
        result = pack_arrays(
            samples,
            os.fspath(output),
            modes=pack_modes,
            samples_per_shard=samples_per_shard,
            force=force,
            keys=keys,
            limits=limits,
            window=pairs,
        )
        out = Path(output)
        tmp = out / ".source.json.tmp"
        meta = src.meta()
        if windowed:
            meta["window"] = [list(p) for p in pairs]
        tmp.write_text(json.dumps(_finite(meta), indent=1, allow_nan=False) + "\n")
        os.replace(tmp, out / "source.json")
        return result
    finally:
        if owned:
            src.close()


__all__ = ["ArrayInfo", "Source", "VariableInfo", "open_source", "pack_source"]
