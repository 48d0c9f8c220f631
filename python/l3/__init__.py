"""l3: lossless images whose decoder runs on any GPU (wgpu), record shards with progressive
levels, and a loader with a planned shuffle, planned caching and exact resume.

Codec (NumPy arrays ``uint8``/``uint16`` of shape ``(H, W)`` or ``(H, W, C)``)::

    data = l3.encode(array, profile="compact")
    array = l3.decode(data)            # or l3.decode(data, out=preallocated)
    l3.info(data)                      # shape, dtype, profile, ... without decoding
    l3.imwrite("x.l3", array); l3.imread("x.l3")   # imread also reads PNG, TIFF, ...
    batch = l3.decode_batch([d1, d2], device="gpu")  # (N, H, W[, C]) in one array

Datasets::

    l3.pack("images/", "dataset/", levels=3)   # class = first folder under images/
    ds = l3.open_dataset("dataset/")
    image, label = ds[0]; ds.read(0, level=0); ds.record(0); ds.labels

Scientific stores (HDF5, NetCDF-4, Zarr; see ``l3.sources``; ``python -m l3 pack-arrays``)::

    src = l3.open_source("run.nc", {"input": ["u", "v"], "target": ["p"]}, sample_axis="time")
    for sample in src: sample["input"]   # (2, H, W): u and v stacked, read in chunk blocks

Loading (see ``l3.torch`` for PyTorch)::

    for batch in l3.Loader("dataset/", batch_size=64, seed=1, end_epoch=1):
        batch["images"]  # (N, 3, 224, 224) float32, augmented and normalised

Errors are ``l3.L3Error`` subclasses: ``FormatError``, ``LimitsError``, ``ParameterError``
(all also ``ValueError``), ``L3IOError`` (also ``OSError``), ``GpuError`` and ``LoaderError``
(also ``RuntimeError``).

Limits: every function that decodes or reads (``decode``, ``decode_batch``, ``decode_field``,
``imread``, ``Dataset.read``, ``write_manifest``, ``Loader``) checks sizes, dimensions and
decoded bytes against ``limits=l3.Limits(...)`` (default: l3's) before it allocates, and
raises ``LimitsError`` beyond them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, List, Tuple

import numpy as np

from . import _l3
from ._options import check_options
from ._errors import (
    FormatError,
    GpuError,
    L3Error,
    L3IOError,
    LimitsError,
    LoaderError,
    ParameterError,
)
from ._l3 import (
    Dataset,
    Limits,
    TensorDataset,
    copy_dataset,
    decode,
    decode_batch,
    decode_blocks,
    decode_field,
    encode,
    encode_blocks,
    encode_field,
    field_info,
    gpu_adapter,
    imread,
    imwrite,
    info,
    write_manifest,
    write_shard,
)
from ._tensor_pack import pack_arrays
from .sources import Source, open_source, pack_source

__version__ = _l3.__version__

#: Extensions `pack` reads (the same as the ``l3 pack`` command: one list, in Rust).
IMAGE_EXTENSIONS = tuple("." + e for e in _l3.IMAGE_EXTENSIONS)


def open_dataset(
    path: str | os.PathLike,
    *,
    limits: Optional[Limits] = None,
    index_cache: Optional[str | os.PathLike] = None,
) -> Dataset | TensorDataset:
    """Opens a packed dataset (a folder with ``manifest.json``, or an object-store URL such as
    ``s3://bucket/prefix``, ``gs://``, ``az://``, ``https://``; credentials and endpoint from
    the standard environment variables) for random access: a
    `Dataset` of images, or a `TensorDataset` of named arrays (``ds[i]`` a dict of NumPy
    arrays; ``ds.arrays``, ``ds.stats``, ``ds.record(i)``).

    ``index_cache`` (default: the environment's ``L3_INDEX_CACHE``, else none): a local folder
    where opening each remote shard keeps what it fetched (size, ETag, header, index), shared
    by every process naming it, so that the next opening asks the server only for the
    manifest; of processes opening a shard at once, one fetches it and the others wait for it.
    Local datasets ignore it. ``limits`` (default `Limits()`) bound every read of a shard and,
    for tensors, every decoded array. The manifest is read once, in Rust."""
    return _l3.open_dataset(path, limits=limits, index_cache=index_cache)


def plan_pack(
    source: str | os.PathLike, records_per_shard: int = 1024
) -> Tuple[List[str], List[Tuple[str, list]]]:
    """Plans packing the image tree ``source`` as ``l3 pack`` does: images sorted by path,
    each labelled by the first folder under ``source`` (none for images directly in it),
    ``records_per_shard`` per shard. Returns ``(classes, jobs)``: the sorted class names and,
    per shard, ``(file name, records)`` ready for `write_shard` (records are
    ``(key, path, label, None)``). Each job is independent: run them anywhere (threads,
    processes, Ray or Spark tasks), then call `write_manifest`.
    """
    if records_per_shard < 1:
        raise ParameterError("records_per_shard must be at least 1")
    return _l3.plan_pack(os.fspath(source), records_per_shard)


def pack(
    source: str | os.PathLike,
    output: str | os.PathLike,
    *,
    levels: int = 1,
    profile: str = "compact",
    records_per_shard: int = 1024,
    max_overhead: float = 1.25,
    force: bool = False,
    max_error: int = 0,
    map: Callable[..., Iterable[Any]] = map,
) -> Dataset:
    """Packs the image tree ``source`` into a dataset in ``output`` (as ``l3 pack`` does; see
    `plan_pack` for labels and order). Every record is verified through every level before
    its shard is written atomically; a rerun keeps the complete shards. ``map`` runs the
    shard jobs (default: one after the other, each encoding its records on all cores); pass
    e.g. ``concurrent.futures.ProcessPoolExecutor().map`` to spread shards. ``max_error`` > 0
    stores every sample within that bound of the source (records are then flat; changing it
    needs ``force``). ``output`` may be an object-store URL (``s3://bucket/prefix``,
    ``gs://``, ``az://``): the dataset is then packed in a temporary folder and copied there
    (`copy_dataset`: shards checked, manifest last). Returns the opened dataset.
    """
    if _l3.is_remote(output):
        import tempfile

        with tempfile.TemporaryDirectory() as staging:
            pack(source, staging, levels=levels, profile=profile,
                 records_per_shard=records_per_shard, max_overhead=max_overhead,
                 max_error=max_error, map=map)
            copy_dataset(staging, output, force=force)
        return Dataset(output)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    classes, jobs = plan_pack(source, records_per_shard)

    def run(job: Tuple[str, list]) -> dict:
        name, records = job
        return write_shard(
            str(out / name), records, levels=levels, profile=profile,
            max_overhead=max_overhead, force=force, max_error=max_error,
        )

    infos = list(map(run, jobs))
    write_manifest(str(out), [i["file"] for i in infos], classes=classes, levels=levels)
    return Dataset(out)


class Loader:
    """Batches of augmented images from a dataset: a planned global shuffle from ``(seed,
    epoch)``, this rank's share, prefetched on a thread pool, decoded and augmented on the CPU
    (``device="cpu"``) or the GPU (``"gpu"``; ``"auto"``: a hardware GPU if any).

    Each batch is a dict: ``images`` ``(N, C, H, W)`` float32 (or float16), ``labels`` and
    ``samples`` int64 arrays, ``epoch``, ``state`` = ``(seed, epoch, consumed)`` after the batch
    (resume exactly with ``Loader(..., seed=s, epoch=e, consumed=c)``, also with another
    ``world_size``), ``skipped`` (records left out, with shard, key and error) and
    ``bytes_read``.

    Keyword options (defaults): ``seed`` (0), ``epoch`` (0), ``consumed`` (0), ``rank`` (0),
    ``world_size`` (1), ``drop_last`` ("partial" | "drop" | "pad"), ``size`` ((224, 224):
    width, height), ``level`` (full resolution), ``crop`` (True: random resized crop with
    ``scale`` (0.08, 1) and ``ratio`` (3/4, 4/3)), ``flip`` (0.5), ``mean``/``std`` (ImageNet),
    ``channels`` (3), ``rotate90`` (False), ``max_angle`` (0 degrees), ``padding`` (0),
    ``fill`` (0), ``noise_std`` (0), ``dtype`` ("float32" | "float16"), ``cache_mb`` (0),
    ``cache_policy`` ("planned" | "lru", both tiers), ``locality`` (True: with ``cache_mb``
    and several ranks, each global batch is split among the ranks by what their caches hold,
    the same global batches and coverage with fewer reads; every rank must pass the same cache
    options) and ``max_imbalance`` (None: ``batch_size // 8`` samples a rank's batch may
    differ from ``batch_size``; 0 keeps batches equal), ``reuse_front`` (0: the plain
    permutation; k: the k samples the previous epoch read last come first in each epoch, the
    reuse order of docs/cache-study.md, for a page cache or LRU below the loader; resume with
    the same k), ``strata`` (None: 64 for a windowed tensor dataset, else 0, the plain
    permutation; S: each epoch's permutation spreads each of S contiguous ranges of sample ids
    evenly over the epoch, which keeps the locality split's batches even over windows; resume
    with the same S), ``disk_cache`` (None: a folder for a disk
    tier below the RAM cache, for remote datasets: a folder of the loader's own is made in it
    and removed with it) and ``disk_cache_mb`` (its size), ``index_cache`` (None: see
    `open_dataset`), ``threads`` (0: one per core), ``prefetch`` (2),
    ``device`` ("cpu"), ``end_epoch`` (None: run until closed), ``worker`` / ``num_workers``
    (0 / 1: this loader takes every num_workers-th step of the rank, for data-loading
    workers), ``on_error`` ("skip" | "fail"), ``crop_window`` (True: decode only the patches a
    crop needs, down to its last row), ``limits`` (`Limits`: the batch tensor and each decode).

    Over a tensor dataset (``pack_arrays``; a path or a `TensorDataset`) a batch holds one
    ``(N, ...)`` array per declared array by name instead of ``images`` (float32, or float16
    with ``dtype="float16"``), ``arrays`` (their names) and ``windows`` (each sample's
    ``origin``, ``size``, ``flip`` and ``rot90``; None without windows). Its options: ``crop``
    (None: whole arrays; a window size per spatial axis, 2 or 3 ints: the last axes of every
    array, one window per sample shared by its arrays), ``flips`` (False: reverse each
    spatial axis with probability 1/2), ``rot90`` (False: quarter turns of the last two axes,
    as ``numpy.rot90``), ``normalize`` (False: ``(x - mean) / std`` with the manifest's
    statistics, float arrays only), ``spatial`` (the spatial axes without ``crop``: 2);
    image-only options are ignored. Every batch also has ``read_calls`` and ``cache`` (the
    cache's cumulative ``accesses``, ``hits``, ``hit_bytes``, ``miss_bytes``, ``evictions``).

    Options are checked before anything starts: a wrong type is a ``TypeError``, a value out
    of range a ``ParameterError``, a batch tensor beyond ``limits`` a ``LimitsError``, and
    ``drop_last="drop"`` with fewer records than ``batch_size x world_size`` (no step in any
    epoch) a ``ParameterError``. Waiting for a batch can be interrupted (Ctrl-C); ``close()``
    returns promptly from any state. A failure of the loader's thread raises ``LoaderError``
    (not the end of the iteration).
    """

    def __init__(
        self, dataset: str | os.PathLike | Dataset | TensorDataset, batch_size: int, **options: Any
    ):
        if isinstance(dataset, os.PathLike):
            dataset = os.fspath(dataset)
        options = check_options(dict(options, batch_size=batch_size))
        batch_size = options.pop("batch_size")
        self._inner = _l3.Loader(dataset, batch_size, **options)

    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        batch = next(self._inner)
        if batch.pop("f16_bits"):
            batch["images"] = batch["images"].view(np.float16)
        return batch

    def state(self) -> Tuple[int, int, int]:
        """``(seed, epoch, consumed)`` after the last batch returned (the starting state
        before the first; kept after ``close()``)."""
        return self._inner.state()

    def close(self) -> None:
        """Stops the loader's threads (also done when it is garbage-collected)."""
        self._inner.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = [
    "Dataset", "TensorDataset", "copy_dataset", "FormatError", "GpuError", "IMAGE_EXTENSIONS", "L3Error", "L3IOError",
    "Limits", "LimitsError", "Loader", "LoaderError", "ParameterError", "decode", "decode_batch", "decode_blocks",
    "decode_field", "encode", "encode_blocks", "encode_field", "field_info",
    "gpu_adapter", "imread", "imwrite", "info", "open_dataset", "open_source", "pack", "pack_arrays",
    "pack_source", "plan_pack", "Source",
    "write_manifest", "write_shard",
]
