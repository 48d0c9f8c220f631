"""Exceptions of the l3 package, one per cause, as in the Rust library (``l3::Error``).

Each is also the built-in exception a caller would expect for that cause, so code that
catches ``ValueError`` or ``OSError`` keeps working.
"""


class L3Error(Exception):
    """Base class of every error l3 raises."""


class FormatError(L3Error, ValueError):
    """The data is not a valid L3 file, shard, manifest or image (corrupt, truncated, or
    not what its header says)."""


class LimitsError(L3Error, ValueError):
    """The data is valid but exceeds a resource limit (dimensions, bytes, GPU buffers)."""


class ParameterError(L3Error, ValueError):
    """An argument is invalid: wrong dtype, shape, option value or out-of-range level."""


class L3IOError(L3Error, OSError):
    """Reading or writing a file failed."""


class GpuError(L3Error, RuntimeError):
    """The GPU path failed (no adapter, out of device memory, a driver error)."""


class LoaderError(L3Error, RuntimeError):
    """The loader's background thread died (a panic; the message says where): the run
    cannot go on. Resume from the last ``state()``."""


__all__ = [
    "L3Error", "FormatError", "LimitsError", "ParameterError", "L3IOError", "GpuError",
    "LoaderError",
]
