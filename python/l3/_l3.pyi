"""Type stubs of the extension module (the Rust side of the l3 package)."""

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Bytes = Union[bytes, bytearray, memoryview, npt.NDArray[np.uint8]]
_Path = Union[str, os.PathLike[str]]
_Image = npt.NDArray[Union[np.uint8, np.uint16]]

__version__: str
IMAGE_EXTENSIONS: List[str]

class Limits:
    """Resource limits of a call: inputs, dimensions and decoded bytes are checked against
    them before anything is allocated (LimitsError beyond them). Unset fields keep l3's
    defaults (16777215 pixels each way, 4 GiB decoded, 4 GiB read)."""

    def __init__(
        self,
        *,
        max_dimension: Optional[int] = None,
        max_output_bytes: Optional[int] = None,
        max_input_bytes: Optional[int] = None,
    ) -> None: ...
    @property
    def max_dimension(self) -> int: ...
    @property
    def max_output_bytes(self) -> int: ...
    @property
    def max_input_bytes(self) -> int: ...

def encode(
    array: _Image, profile: str = "compact", patch_size: int = 64, max_error: int = 0
) -> bytes:
    """Encodes a uint8/uint16 array of shape (H, W) or (H, W, C), C in 1..4, as an L3 file
    (profile "compact": smaller; "fast": faster to decode). Non-contiguous arrays are copied.
    max_error > 0: error-bounded, every decoded sample within max_error of the original."""

def decode(
    data: _Bytes, out: Optional[_Image] = None, *, limits: Optional[Limits] = None
) -> _Image:
    """Decodes an L3 file into a new array, or into `out` (C-contiguous, writable, of the
    file's dtype and shape), which is returned."""

def info(data: _Bytes) -> Dict[str, Any]:
    """The header as a dict: width, height, channels, depth, dtype, shape, color, profile,
    version, patch_size, max_error (0: lossless), output_bytes."""

def imread(path: _Path, *, limits: Optional[Limits] = None) -> _Image:
    """Reads an .l3 file, or any image the `image` crate reads (PNG, TIFF, JPEG, ...)."""

def imwrite(
    path: _Path, array: _Image, profile: str = "compact", patch_size: int = 64, max_error: int = 0
) -> None:
    """Encodes `array` and writes it to an .l3 file atomically."""

def decode_batch(
    files: Sequence[_Bytes], device: str = "auto", *, limits: Optional[Limits] = None
) -> _Image:
    """Decodes files of one shape and dtype into one (N, H, W[, C]) array, on the GPU
    ("gpu"; "auto": a hardware GPU if present) or the CPU ("cpu"). Each file and the whole
    array are held to `limits`."""

def gpu_adapter() -> Optional[str]:
    """The GPU adapter the GPU paths use, or None."""

def write_shard(
    path: _Path,
    records: Sequence[Tuple[str, Union[_Path, _Image], Optional[int], Optional[bytes]]],
    levels: int = 1,
    profile: str = "compact",
    max_overhead: float = 1.25,
    force: bool = False,
    max_error: int = 0,
    *,
    limits: Optional[Limits] = None,
) -> Dict[str, Any]:
    """Packs (key, source, label, meta) records into one shard, verified and atomic; keeps a
    complete shard with the same records. Returns {"file", "records", "bytes", "written"}."""

def write_manifest(
    output: _Path,
    shards: Sequence[str],
    classes: Sequence[str] = ...,
    levels: int = 1,
    *,
    limits: Optional[Limits] = None,
) -> None:
    """Writes output/manifest.json over the shard files (each read and checked)."""

def plan_pack(
    source: _Path, records_per_shard: int = 1024
) -> Tuple[List[str], List[Tuple[str, List[Tuple[str, str, Optional[int], None]]]]]:
    """The plan of packing an image tree, as ``l3 pack`` makes it (see ``l3.plan_pack``)."""
    ...

def is_remote(location: _Path) -> bool:
    """Whether ``location`` is an object-store URL rather than a folder."""

def copy_dataset(source: _Path, dest: _Path, *, force: bool = False) -> dict:
    """Copies a dataset between folders and object-store URLs: shards checked against the
    manifest's size and CRC-32, the manifest last, the copy reopened and checked."""

class Dataset:
    """A packed dataset opened for random access."""

    def __init__(
        self, path: _Path, *, limits: Optional[Limits] = None, index_cache: Optional[_Path] = None
    ) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> Tuple[_Image, int]:
        """(image at full resolution, label or -1)."""
    @property
    def path(self) -> str: ...
    @property
    def levels(self) -> int: ...
    @property
    def classes(self) -> List[str]: ...
    @property
    def labels(self) -> npt.NDArray[np.int64]: ...
    def read(
        self, i: int, level: Optional[int] = None, *, limits: Optional[Limits] = None
    ) -> _Image:
        """Record i decoded at `level` (default: full resolution)."""
    def record(self, i: int) -> Dict[str, Any]:
        """key, label, class_name, meta, width, height, channels, dtype, scheme, shard,
        level_bytes."""

def dataset_kind(path: _Path) -> str:
    """"images" or "tensors", from the dataset's manifest."""

def open_dataset(
    path: _Path, *, limits: Optional[Limits] = None, index_cache: Optional[_Path] = None
) -> Union[Dataset, TensorDataset]:
    """A `Dataset` or a `TensorDataset`, as the manifest (read once) says."""

class TensorDataset:
    """A tensor dataset (records of named arrays) opened for random access."""

    def __init__(
        self, path: _Path, *, limits: Optional[Limits] = None, index_cache: Optional[_Path] = None
    ) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> Dict[str, npt.NDArray[Any]]:
        """Sample i's arrays by name (record i's, or a windowed dataset's window over its
        records; float16 as np.float16, bfloat16 as np.uint16 bits)."""
    @property
    def path(self) -> str: ...
    @property
    def arrays(self) -> List[Dict[str, Any]]:
        """name, dtype, shape, mode, bound ({"absolute": e}, {"relative": r} or None),
        fill_bits, per declared array."""
    @property
    def stats(self) -> Dict[str, Dict[str, float]]:
        """{name: {"count", "mean", "std"}} per float array name."""
    def record(self, i: int) -> Dict[str, Any]:
        """key, label, meta, shard, arrays (name, dtype, shape, mode, bound, fill_bits,
        bytes)."""
    @property
    def records(self) -> int:
        """Records (a windowed dataset's steps; else len())."""
    @property
    def window(self) -> Optional[List[Dict[str, Any]]]:
        """A windowed dataset's sample arrays (name, array, offset), or None."""

class TensorPacker:
    """The Rust half of l3.pack_arrays (use that)."""

    def __init__(
        self,
        out: _Path,
        default_mode: Tuple[str, float, Optional[float], str],
        modes: Dict[str, Tuple[str, float, Optional[float], str]],
        samples_per_shard: int,
        force: bool,
        limits: Optional[Limits] = None,
        window: Optional[List[Tuple[str, str, int]]] = None,
    ) -> None: ...
    def push(
        self,
        index: int,
        arrays: List[Tuple[str, str, Tuple[int, ...], bytes]],
        key: Optional[str] = None,
        label: Optional[int] = None,
    ) -> None: ...
    def finish(self) -> Dict[str, int]: ...

class Loader:
    """The Rust loader; use l3.Loader (which views float16 batches as numpy.float16).

    Over a tensor dataset (a path, or a TensorDataset) each batch holds one (N, ...) array per
    declared array by name (float32, or numpy.float16 already), ``arrays`` (their names) and
    ``windows`` (None, or a dict of ``origin``, ``size``, ``flip`` as (N, axes) arrays and
    ``rot90`` as (N,)), with the tensor options ``crop`` (None: whole arrays; 2 or 3 sizes),
    ``flips``, ``rot90``, ``normalize`` (bools, default False), ``spatial`` (axes without a
    crop, default 2) and ``dtype``. Every batch also has ``read_calls`` and ``cache``
    (cumulative ``accesses``, ``hits``, ``hit_bytes``, ``miss_bytes``, ``evictions``).
    ``device="gpu"`` cuts a tensor dataset's windows on the GPU, bit for bit the CPU path's
    (no 64-bit arrays); with ``gpu_output="staged"`` or ``"device"`` they come as a
    `GpuBatch` under ``"gpu"``, one view per array."""

    def __init__(
        self, dataset: Union[_Path, Dataset, TensorDataset], batch_size: int, **options: Any
    ) -> None: ...
    def __iter__(self) -> Iterator[Dict[str, Any]]: ...
    def __next__(self) -> Dict[str, Any]: ...
    def state(self) -> Tuple[int, int, int]: ...
    def close(self) -> None: ...

class GpuBatch:
    """A GPU loader batch not read back into arrays (gpu_output="staged" or "device")."""

    @property
    def shape(self) -> Tuple[int, int, int, int]:
        """(N, C, H, W) of an image batch; ParameterError for a tensor dataset's."""
    @property
    def views(self) -> List[Tuple[str, List[int], int]]:
        """(name, shape, byte offset) of each tensor: "images", or one per array."""
    @property
    def dtype(self) -> str:
        """"float32" or "float16"."""
    @property
    def nbytes(self) -> int: ...
    @property
    def kind(self) -> str:
        """"staged" (host-visible) or "device" (on the GPU)."""
    def copy_into(self, dst: npt.NDArray[np.uint8]) -> None:
        """Copies the values into a writable C-contiguous uint8 array of >= nbytes bytes."""
    def export_into(self, slot: ExportSlot) -> None:
        """Copies a device batch into an export slot (device to device, waited for)."""
    def new_export_slot(self, size: int) -> ExportSlot:
        """A new exportable buffer of `size` bytes on the batch's GPU."""

class ExportSlot:
    """Exportable device memory (Vulkan, opaque fd) that batches are copied into."""

    @property
    def size(self) -> int: ...
    @property
    def allocation_size(self) -> int: ...
    @property
    def dedicated(self) -> bool: ...
    @property
    def device_uuid(self) -> bytes: ...
    def take_fd(self) -> int:
        """A new fd of the memory, owned by the caller (an importer takes it over)."""
    def read_back(self, size: int) -> bytes:
        """The first `size` bytes (a multiple of 4), read back to the host."""

def gpu_device_uuid() -> Optional[bytes]:
    """The UUID of l3's GPU (Vulkan), or None."""

class ExportedBatch:
    """A GPU batch copied into exportable device memory (Vulkan, opaque fd)."""

    @property
    def size(self) -> int: ...
    @property
    def allocation_size(self) -> int: ...
    @property
    def dedicated(self) -> bool: ...
    @property
    def device_uuid(self) -> bytes: ...
    @property
    def images(self) -> List[Tuple[int, int, int, int, int, int]]:
        """Per image: (offset, bytes, width, height, channels, depth)."""
    def take_fd(self) -> int:
        """A new fd of the memory, owned by the caller (an importer takes it over)."""

def decode_batch_export(
    files: Sequence[_Bytes], *, limits: Optional[Limits] = None
) -> ExportedBatch:
    """Decodes files as one GPU batch and exports it (needs VK_KHR_external_memory_fd)."""

def encode_field(
    array: npt.NDArray[Any],
    *,
    bound: Optional[Dict[str, float]] = None,
    max_error: Optional[float] = None,
    relative: Optional[float] = None,
    fill_value: Optional[float] = None,
    profile: Optional[str] = None,
    lossless: bool = False,
    dtype: Optional[str] = None,
    version: Optional[int] = None,
    predictor: Optional[str] = None,
    axes: Optional[int] = None,
) -> bytes:
    """Encodes a float32 array within ``bound``: ``{"absolute": e}`` or ``{"relative": r}`` (a
    fraction of the values' range; ``max_error=e`` and ``relative=r`` are aliases); NaN,
    infinities and fill_value are kept exactly. version 3 (default): 1 to 4 axes, lattice
    interpolation or differences (``predictor``, ``axes``), the smaller file; version=1: 2 or
    3 axes, the bins as an L3 image of ``profile`` (default "compact"), which decodes faster
    on the CPU. Both decode on the GPU too, bit for bit (version 3 also encodes there:
    gpu_encode_field). A bound too fine for the bins (more
    than 65536 over the range, below the smallest normal bin width, or relative over an
    array without range) stores the array exactly instead, as a lossless file (field_info's
    mode "lossless"), never an error.
    lossless=True: stores a float32, float16, or bfloat16 array of 1 to 4 axes bit for bit
    (NaN payloads, -0.0); bfloat16 is given as a uint16 array of bit patterns with
    dtype="bfloat16", or an array whose dtype is named "bfloat16" (ml_dtypes). fill_value
    must be exact in the dtype."""

def decode_field(
    data: _Bytes, *, limits: Optional[Limits] = None
) -> npt.NDArray[Any]:
    """Decodes a field file into an array of its shape: float32 for error-bounded fields; the
    stored dtype for lossless ones (float32, float16, or bfloat16 as uint16 bit patterns)."""

def parse_bound(bound: Dict[str, float]) -> Tuple[str, float]:
    """``{"absolute": e}`` or ``{"relative": r}`` checked: ``(kind, value)``."""

def field_info(data: _Bytes) -> Dict[str, Any]:
    """mode "error_bounded": version (1 or 3), shape, max_error (absolute), offset,
    fill_value, exception_runs; version 1 also bin_width; version 3 also predictor ("lattice"
    or "differences"), unit, axes (axis order, or bits of the differenced axes), chunks,
    chunk_values, segments. mode "lossless": shape, dtype, fill_value (bit pattern or None),
    float_mult_base, value_table (entries of the value table, 0 without), axes (bit a = axis a
    differenced), axes2 (bit a = axis a differenced a second time), chunks, chunk_values,
    segments, exception_runs."""

def gpu_encode_field(
    array: npt.NDArray[np.float32], *, max_error: float, axes: Optional[int] = None
) -> bytes:
    """Encodes a float32 array of 1 to 4 axes on l3's GPU within the absolute bound: the bytes
    of encode_field(array, max_error=..., version=3, predictor="differences", axes=...)."""

def encode_blocks(array: npt.NDArray[np.float32], *, max_error: float,
                  stride: Optional[int] = None) -> bytes:
    """Encodes a float32 array's values (C order) as a block-coded stream within the absolute
    bound `max_error` (stored as the largest f32 at most it with an 8-bit significand): zeros
    as +0.0, every other value with its sign, NaN and infinities exactly. `stride`: the column
    stride the encoder may predict along (default: the last axis for 2 axes or more)."""

def decode_blocks(data: _Bytes, *, limits: Optional[Limits] = None) -> npt.NDArray[np.float32]:
    """Decodes a block-coded stream into a 1-D float32 array (FormatError if malformed)."""

class BlocksStream:
    """A block-coded stream in l3's GPU memory (its own buffer, freed with the object)."""

    @property
    def values(self) -> int: ...
    @property
    def bound(self) -> float: ...
    @property
    def nbytes(self) -> int: ...
    def to_bytes(self) -> bytes:
        """The stream's bytes, read back (those `encode_blocks` gives for the same values)."""

class GpuEncodeStaging(ExportSlot):
    """An ExportSlot on l3's GPU (exportable memory, imported by CUDA), whose float32 values
    are encoded in place or that a file is decoded into."""

    def __init__(self, size: int) -> None: ...
    def write(self, array: npt.NDArray[np.float32]) -> None:
        """Writes float32 values at the buffer's start from the host and waits for it."""
    def decode_into(self, data: bytes) -> List[int]:
        """Decodes an error-bounded (version 3) file on l3's GPU into the buffer's start."""
    def encode(self, shape: Sequence[int], *, max_error: float, axes: Optional[int] = None) -> bytes:
        """Encodes the float32 values of `shape` at the buffer's start (see gpu_encode_field)."""
    def encode_blocks(self, count: int, *, max_error: float, stride: int = 0) -> BlocksStream:
        """Encodes the `count` float32 values at the buffer's start as a block-coded stream
        kept in l3's GPU memory (one submission; the stream's size read back)."""
    def decode_blocks_into(self, stream: Union[BlocksStream, _Bytes]) -> int:
        """Decodes a block-coded stream on l3's GPU into the buffer's start (waits); returns
        the values."""
    def encode_blocks_batch(self, jobs: Sequence[Tuple[int, int, float, int]]) -> List[BlocksStream]:
        """Encodes several arrays of the buffer, `(byte offset, count, max_error, stride)`
        each, in one submission and one wait; the streams share one buffer of their sizes."""
    def decode_blocks_batch(self, jobs: Sequence[Tuple[BlocksStream, int]]) -> None:
        """Decodes several streams, `(stream, byte offset)` each, into the buffer in one
        submission and one wait."""
