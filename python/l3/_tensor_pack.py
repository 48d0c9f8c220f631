"""`l3.pack_arrays`: samples (dicts of NumPy arrays) into a tensor dataset, through the Rust
packer (`l3._l3.TensorPacker`). Its own module so that `l3` and `l3.sources` (`pack_source`)
both import it and not each other.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Tuple

import numpy as np

from . import _l3
from ._errors import ParameterError
from ._l3 import Limits, copy_dataset


#: Keys of a dict that is one mode for every array of `pack_arrays` (not one per name).
_MODE_KEYS = {"absolute", "relative", "fill_value", "mode", "format"}


def _mode(name: str, mode: Any) -> Tuple[str, float, Any, str]:
    """A `pack_arrays` mode as ``(kind, bound, fill_value, format)``."""
    if isinstance(mode, str):
        return (mode, 0.0, None, "v1")
    if isinstance(mode, dict) and set(mode) <= _MODE_KEYS:
        fill = mode.get("fill_value")
        fill = None if fill is None else float(fill)
        bounds = [k for k in ("absolute", "relative") if k in mode]
        if len(bounds) > 1 or (bounds and "mode" in mode):
            raise ParameterError(f"mode of {name}: one of absolute, relative or mode, got {mode}")
        fmt = mode.get("format", "v1")
        if fmt not in ("v1", "v3") or ("format" in mode and not bounds):
            raise ParameterError(
                f"mode of {name}: \"format\" is \"v1\" or \"v3\", with an absolute or "
                f"relative bound, got {mode}"
            )
        if bounds:
            return (bounds[0], float(mode[bounds[0]]), fill, fmt)
        return (str(mode.get("mode", "lossless")), 0.0, fill, fmt)
    raise ParameterError(
        f"mode of {name}: \"raw\", \"lossless\", {{\"absolute\": e}} or {{\"relative\": r}} "
        f"(with an optional \"fill_value\", and \"format\": \"v3\" for the smaller "
        f"error-bounded files), got {mode!r}"
    )


def _array_arg(i: int, name: Any, a: Any) -> Tuple[str, str, Tuple[int, ...], bytes]:
    """One array of sample `i` as the Rust packer takes it: little-endian, C order."""
    if not isinstance(name, str):
        raise ParameterError(f"sample {i}: array names are strings, got {name!r}")
    a = np.asarray(a)
    dtype = a.dtype.name
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    if dtype == "bfloat16":  # e.g. ml_dtypes.bfloat16: stored as its bit patterns
        a = a.view(np.uint16)
    if a.ndim < 1 or a.ndim > 4:
        raise ParameterError(f"sample {i}: array {name!r} has {a.ndim} axes, l3 stores 1 to 4")
    return (name, dtype, tuple(int(d) for d in a.shape), np.ascontiguousarray(a).tobytes())


def pack_arrays(
    samples: Iterable[dict],
    out: str | os.PathLike,
    *,
    modes: Any = "lossless",
    samples_per_shard: int = 256,
    force: bool = False,
    keys: Iterable[str] | None = None,
    labels: Iterable[int] | None = None,
    limits: Limits | None = None,
    window: Iterable[Tuple[str, str, int]] | None = None,
) -> dict:
    """Packs ``samples`` (any iterable of dicts ``{name: numpy array}``, the same names,
    dtypes and shapes in every sample, 1 to 4 axes) into a tensor dataset in folder ``out``.

    ``modes`` is one mode for every array or a dict ``{name: mode}`` (unnamed arrays:
    lossless). A mode is ``"raw"``, ``"lossless"`` (a lossless float field for float arrays,
    the bytes for integer ones), ``{"absolute": e}`` or ``{"relative": r}`` (error-bounded
    float32; relative to each array's value range), each with an optional
    ``"fill_value"`` (``{"mode": "raw", "fill_value": -9999}``), left out of the statistics
    and stored exactly. An error-bounded array of 2 or 3 axes is a ``.l3f`` version 1
    field unless its mode says ``"format": "v3"`` (``{"relative": 1e-3, "format":
    "v3"}``): version 3 files are 1.2-5x smaller on smooth fields and decode about 3x
    slower on the CPU (arrays of 1 or 4 axes are always version 3; both versions decode
    on the GPU). A dict whose keys are all mode keys (absolute, relative, fill_value,
    mode, format) is one mode for every array, not a mode per array name. ``keys`` and
    ``labels`` give each sample's key (default its index, 8 digits) and class. Shards are
    written as they fill (at most one shard's samples in memory), encoded and verified on
    Rust threads without the GIL; ``ds.stats`` then holds each float array's count, mean and
    std. Arrays larger than ``limits.max_output_bytes`` are refused. bfloat16 arrays (e.g.
    ``ml_dtypes.bfloat16``) are stored as bfloat16.

    Resume: a rerun with the same samples and options keeps the finished shards (the samples
    are read again, not encoded again); other samples or options raise ``L3IOError`` naming
    the shard unless ``force=True``. Returns ``{"records", "shards", "bytes", "written",
    "kept"}``. ``window`` (``[(name, array, offset)]``) makes the samples given the steps
    of a sequence, one record each, and a sample of the dataset a window over them: array
    ``name`` of sample t is array ``array`` of record t + ``offset`` (manifest version 2;
    ``pack_source`` with ``offsets`` writes it, so each step is stored once). ``out`` may
    be an object-store URL (``s3://bucket/prefix``, ...): the dataset is packed in a
    temporary folder (no resume then) and copied there (`copy_dataset`: shards checked,
    manifest last).
    """
    if _l3.is_remote(out):
        import tempfile

        with tempfile.TemporaryDirectory() as staging:
            result = pack_arrays(samples, staging, modes=modes,
                                 samples_per_shard=samples_per_shard, keys=keys,
                                 labels=labels, limits=limits, window=window)
            copy_dataset(staging, out, force=force)
        return result
    if isinstance(modes, dict) and not set(modes) <= _MODE_KEYS:
        default = ("lossless", 0.0, None, "v1")
        per_name = {str(n): _mode(repr(n), m) for n, m in modes.items()}
    else:
        default = _mode("every array", modes)
        per_name = {}
    if window is not None:
        window = [(str(n), str(a), int(o)) for n, a, o in window]
        for n, _, o in window:
            if not 0 <= o < 2**63:
                raise ParameterError(f"window: offset of {n!r} must be in 0..2**63, not {o}")
    packer = _l3.TensorPacker(
        os.fspath(out), default, per_name, int(samples_per_shard), bool(force), limits, window
    )
    key_iter = iter(keys) if keys is not None else None
    label_iter = iter(labels) if labels is not None else None
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict):
            raise ParameterError(f"sample {i} is a {type(sample).__name__}, not a dict of arrays")
        key = next(key_iter, None) if key_iter is not None else None
        label = next(label_iter, None) if label_iter is not None else None
        if key_iter is not None and key is None:
            raise ParameterError(f"keys ran out at sample {i}")
        if label_iter is not None and label is None:
            raise ParameterError(f"labels ran out at sample {i}")
        arrays = [_array_arg(i, n, a) for n, a in sample.items()]
        packer.push(i, arrays, key, None if label is None else int(label))
    return packer.finish()
