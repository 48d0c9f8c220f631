"""The store back ends of `l3.sources`: detection (HDF5, NetCDF, Zarr) and one class per
library (h5py, netCDF4, zarr) that lists a store's variables and reads their slices.

Each back end turns a variable into a `_Var`: dtype, shape, dimension names, chunks,
attributes (JSON-compatible, bounded), the declared fill value, and ``read(selection)``.
Errors are l3's: a store that cannot be opened is a ``FormatError``, a missing variable a
``ParameterError``.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from ._errors import FormatError, L3Error, L3IOError, ParameterError

#: Attributes kept in the metadata: at most this many elements or characters each.
MAX_ATTR_ITEMS = 4096
#: Most variable names listed (in error messages and `names`).
MAX_NAMES = 200
#: HDF5 attributes stored in more bytes than this are not read.
MAX_ATTR_BYTES = 1 << 20

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_NETCDF_EXTS = (".nc", ".nc4", ".netcdf", ".cdf")
KINDS = ("hdf5", "netcdf", "zarr")
#: Attributes HDF5 dimension scales and the NetCDF-4 library keep for themselves.
_HDF5_INTERNAL = {
    "CLASS",
    "NAME",
    "DIMENSION_LIST",
    "DIMENSION_LABELS",
    "REFERENCE_LIST",
    "_Netcdf4Dimid",
    "_Netcdf4Coordinates",
    "_nc3_strict",
    "_NCProperties",
}


class Var:
    """A backend's variable: metadata plus ``read(lo, hi)`` along the sample axis."""

    def __init__(self, name, dtype, shape, dims, chunks, attrs, fill_value, read_fn, cache_fn=None):
        self.name, self.dtype, self.shape, self.dims = name, dtype, shape, dims
        self.chunks, self.attrs, self.fill_value = chunks, attrs, fill_value
        self.read_fn, self.cache_fn = read_fn, cache_fn


def _jsonable(value: Any) -> Any:
    """An attribute as a JSON-compatible value, or None when it is not one or too large."""
    if isinstance(value, bytes):
        value = value[:MAX_ATTR_ITEMS].decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value if len(value) <= MAX_ATTR_ITEMS else None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray):
        if value.size > MAX_ATTR_ITEMS or value.dtype.kind not in "biufSUO":
            return None
        items = [_jsonable(v) for v in value.reshape(-1).tolist()]
        if any(v is None for v in items):
            return None
        return items[0] if value.ndim == 0 else items
    if isinstance(value, (list, tuple)) and len(value) <= MAX_ATTR_ITEMS:
        items = [_jsonable(v) for v in value]
        return None if any(v is None for v in items) else items
    return None


def _attrs(pairs) -> Dict[str, Any]:
    out = {}
    for key, read in pairs:
        try:
            value = _jsonable(read())
        except Exception:  # an attribute of a type the library cannot read
            continue
        if value is not None and isinstance(key, str):
            out[key] = value
    return out


def scalar(value: Any) -> Any:
    """A fill value as a Python scalar (None: absent or not one number)."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "biuf":
        return None
    return arr.reshape(()).item()


def _attr_fill(attrs: Dict[str, Any]) -> Any:
    fill = scalar(attrs.get("_FillValue"))
    if fill is None:
        fill = scalar(attrs.get("missing_value"))
    return fill


# ---------------------------------------------------------------------------------------
# Back ends


def _detect(path: str) -> str:
    p = Path(path)
    if p.is_dir():
        if any((p / n).exists() for n in ("zarr.json", ".zgroup", ".zarray", ".zmetadata")):
            return "zarr"
        raise FormatError(
            f"{path} is a folder but not a Zarr store (no zarr.json, .zgroup or .zarray)"
        )
    if not p.exists():
        raise L3IOError(f"{path} does not exist")
    if p.suffix.lower() == ".zip":
        return "zarr"
    try:
        with open(p, "rb") as fh:
            head = fh.read(8)
            if head == _HDF5_MAGIC:
                return "netcdf" if p.suffix.lower() in _NETCDF_EXTS else "hdf5"
            if head[:3] == b"CDF" and head[3:4] in (b"\x01", b"\x02", b"\x05"):
                return "netcdf"  # NetCDF classic / 64-bit offset / CDF5: netCDF4 reads them
            # HDF5 allows a user block of 512, 1024, 2048, ... bytes before the superblock.
            offset = 512
            size = p.stat().st_size
            while offset + 8 <= min(size, 1 << 24):
                fh.seek(offset)
                if fh.read(8) == _HDF5_MAGIC:
                    return "netcdf" if p.suffix.lower() in _NETCDF_EXTS else "hdf5"
                offset *= 2
    except OSError as e:
        raise L3IOError(f"{path}: {e}") from e
    raise FormatError(f"{path} is not an HDF5, NetCDF or Zarr store")


def _import(name: str):
    try:
        return __import__(name)
    except ImportError as e:
        raise L3Error(f"reading this store needs the `{name}` package (pip install {name})") from e


def _group(store: Any, root: Any, group: Optional[str], kind: type) -> Any:
    """``root[group]`` (``root`` when no group), closing the store when it is not a group."""
    node = _lookup(lambda: root[group], group) if group else root
    if not isinstance(node, kind):
        store.close()
        raise ParameterError(f"no group {group!r} in the {store.kind} store")
    return node


def _lookup(get: Any, name: Optional[str]) -> Any:
    """``get()``; None when the name is absent, ``FormatError`` when the store is broken."""
    try:
        return get()
    except (KeyError, IndexError):
        return None
    except Exception as e:  # the libraries' errors for broken metadata differ
        raise FormatError(f"reading {name!r}: {type(e).__name__}: {e}") from e


def _attr_bytes(obj: Any, key: str) -> int:
    """An HDF5 attribute's stored bytes, read from its header (before its data)."""
    try:
        return obj.attrs.get_id(key).get_storage_size()
    except Exception:
        return MAX_ATTR_BYTES + 1


class _Hdf5:
    kind = "hdf5"

    def __init__(self, target: Any, group: Optional[str]):
        h5py = _import("h5py")
        try:
            import hdf5plugin  # noqa: F401  (registers Blosc2, Zstd, ... filters when installed)
        except ImportError:
            pass
        self.h5py = h5py
        self.owned = not isinstance(target, h5py.Group)
        try:
            if isinstance(target, h5py.Group):
                self.file = target
            elif isinstance(target, (str, os.PathLike)) and "://" in str(target):
                fsspec = _import("fsspec")
                self._fh = fsspec.open(str(target), "rb").open()
                self.file = h5py.File(self._fh, "r")
            else:
                self.file = h5py.File(target, "r")
        except (OSError, ValueError) as e:
            raise FormatError(f"cannot open the HDF5 store {target}: {e}") from e
        self.root = _group(self, self.file, group, h5py.Group)

    def names(self) -> List[str]:
        out: List[str] = []

        def visit(name: str, obj: Any) -> Optional[bool]:
            if isinstance(obj, self.h5py.Dataset):
                out.append(name)
            return True if len(out) >= MAX_NAMES else None  # True stops the visit

        self.root.visititems(visit)
        return out

    def var(self, name: str) -> Var:
        h5py = self.h5py
        obj = _lookup(lambda: self.root.get(name), name)
        if not isinstance(obj, h5py.Dataset):
            raise ParameterError(
                f"no dataset {name!r} in the HDF5 store (datasets: {self.names()})"
            )
        attrs = _attrs(
            (k, lambda k=k: obj.attrs[k])
            for k in obj.attrs.keys()
            if k not in _HDF5_INTERNAL and _attr_bytes(obj, k) <= MAX_ATTR_BYTES
        )
        fill = _attr_fill(attrs)
        if fill is None:
            try:
                if (
                    obj.id.get_create_plist().fill_value_defined()
                    == h5py.h5d.FILL_VALUE_USER_DEFINED
                ):
                    fill = scalar(obj.fillvalue)
            except Exception:
                fill = None
        try:
            dims = tuple(d.label or None for d in obj.dims)
            dims = dims if any(dims) else None
        except Exception:
            dims = None
        holder = {"ds": obj}

        def cache(nbytes: int) -> None:
            try:
                dapl = h5py.h5p.create(h5py.h5p.DATASET_ACCESS)
                dapl.set_chunk_cache(521, max(int(nbytes), 1 << 20), 1.0)
                holder["ds"] = h5py.Dataset(
                    h5py.h5d.open(obj.parent.id, obj.name.rsplit("/", 1)[-1].encode(), dapl)
                )
            except Exception:
                holder["ds"] = obj

        def read(sel) -> np.ndarray:
            return holder["ds"][sel]

        return Var(name, obj.dtype, tuple(obj.shape), dims, obj.chunks, attrs, fill, read, cache)

    def close(self) -> None:
        if self.owned:
            self.file.close()
            if getattr(self, "_fh", None) is not None:
                self._fh.close()


class _NetCdf:
    kind = "netcdf"

    def __init__(self, target: Any, group: Optional[str]):
        nc4 = _import("netCDF4")
        self.owned = not isinstance(target, nc4.Dataset)
        try:
            self.file = target if not self.owned else nc4.Dataset(os.fspath(target), "r")
        except (OSError, ValueError) as e:
            raise FormatError(f"cannot open the NetCDF store {target}: {e}") from e
        self.root = _group(self, self.file, group, nc4.Dataset)

    def names(self) -> List[str]:
        return list(self.root.variables)[:MAX_NAMES]

    def var(self, name: str) -> Var:
        v = _lookup(lambda: self.root[name], name)
        if v is None or not hasattr(v, "dimensions"):
            raise ParameterError(
                f"no variable {name!r} in the NetCDF store (variables: {self.names()})"
            )
        v.set_auto_maskandscale(False)
        dtype = v.dtype if isinstance(v.dtype, np.dtype) else np.dtype(object)
        attrs = _attrs((k, lambda k=k: v.getncattr(k)) for k in v.ncattrs())
        try:
            chunking = v.chunking()
        except Exception:
            chunking = "contiguous"
        chunks = None if chunking == "contiguous" or chunking is None else tuple(chunking)

        def cache(nbytes: int) -> None:
            try:
                v.set_var_chunk_cache(size=max(int(nbytes), 1 << 20))
            except Exception:
                pass

        def read(sel) -> np.ndarray:
            return np.asarray(v[sel])

        return Var(
            name,
            dtype,
            tuple(v.shape),
            tuple(v.dimensions),
            chunks,
            attrs,
            _attr_fill(attrs),
            read,
            cache,
        )

    def close(self) -> None:
        if self.owned:
            self.file.close()


class _Zarr:
    kind = "zarr"

    def __init__(self, target: Any, group: Optional[str]):
        zarr = _import("zarr")
        self.zarr = zarr
        try:
            if isinstance(target, zarr.Group):
                root = target
            elif isinstance(target, (str, os.PathLike)) and str(target).lower().endswith(".zip"):
                root = zarr.open_group(zarr.storage.ZipStore(os.fspath(target), mode="r"), mode="r")
            else:
                root = zarr.open_group(
                    os.fspath(target) if isinstance(target, os.PathLike) else target, mode="r"
                )
        except Exception as e:  # zarr's metadata errors have no common base class
            raise FormatError(
                f"cannot open the Zarr store {target}: {type(e).__name__}: {e}"
            ) from e
        self.root = _group(self, root, group, zarr.Group)

    def names(self) -> List[str]:
        return list(itertools.islice(self.root.array_keys(), MAX_NAMES))

    def var(self, name: str) -> Var:
        a = _lookup(lambda: self.root[name], name)
        if not isinstance(a, self.zarr.Array):
            raise ParameterError(f"no array {name!r} in the Zarr store (arrays: {self.names()})")
        attrs = _attrs((k, lambda k=k: a.attrs[k]) for k in list(a.attrs.keys()))
        dims = getattr(a.metadata, "dimension_names", None) or attrs.get("_ARRAY_DIMENSIONS")
        dims = (
            tuple(dims) if isinstance(dims, (list, tuple)) and len(dims) == len(a.shape) else None
        )
        fill = _attr_fill(attrs)
        if fill is None:
            fill = scalar(a.fill_value)
        try:
            dtype = np.dtype(a.dtype)
        except TypeError:
            dtype = np.dtype(object)
        return Var(
            name,
            dtype,
            tuple(a.shape),
            dims,
            tuple(a.chunks),
            attrs,
            fill,
            lambda sel: np.asarray(a[sel]),
        )

    def close(self) -> None:
        pass


def backend(target: Any, kind: Optional[str], group: Optional[str]):
    if kind is not None and kind not in KINDS:
        raise ParameterError(f"kind must be one of {KINDS}, not {kind!r}")
    if kind is None:
        mod = type(target).__module__.split(".")[0]
        if mod in ("h5py", "netCDF4", "zarr"):
            kind = {"h5py": "hdf5", "netCDF4": "netcdf", "zarr": "zarr"}[mod]
        elif isinstance(target, (str, os.PathLike)):
            s = os.fspath(target)
            if "://" in s and not s.startswith("file://"):
                kind = "zarr" if s.rstrip("/").lower().endswith(".zarr") else "hdf5"
            else:
                kind = _detect(s[7:] if s.startswith("file://") else s)
        elif hasattr(target, "read") and hasattr(target, "seek"):
            kind = "hdf5"  # a binary file object: h5py reads HDF5 (and NetCDF-4) through it
        else:
            raise ParameterError(f"cannot read a store from {type(target).__name__}")
    return {"hdf5": _Hdf5, "netcdf": _NetCdf, "zarr": _Zarr}[kind](target, group)
