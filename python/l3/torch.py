"""PyTorch integration: `L3IterableDataset` (a ``torch.utils.data.IterableDataset`` over the
Rust loader) and `L3DataLoader` (a ``DataLoader`` that records where the run stands, for
``state_dict()`` / ``load_state_dict()``).

Each item of the dataset is a whole batch (the loader batches, shuffles and augments in
Rust), so the ``DataLoader`` runs with ``batch_size=None``::

    ds = L3IterableDataset("dataset/", batch_size=64, seed=1)
    loader = L3DataLoader(ds, num_workers=2, pin_memory=True)
    for epoch in range(start_epoch, epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            images, labels = batch["images"], batch["labels"]   # (N, 3, 224, 224), (N,)
            ...
            checkpoint = {"loader": loader.state_dict(), ...}
    # later: loader.load_state_dict(checkpoint["loader"]) resumes right after the last batch.

Workers: `L3DataLoader` starts no worker processes. The Rust loader decodes and augments on
its own threads without the GIL and prefetches across epochs (it is kept between
iterations), so ``num_workers=N`` only asks for at least ``N`` threads, and more workers are
never slower than none.

Order and partitioning: the order is a global permutation of the dataset from ``(seed,
epoch)``; each global step hands ``batch_size`` samples to each rank (rank and world size from
``torch.distributed`` when it is initialised, else the arguments). Given to a plain
``DataLoader`` with worker processes, data-loading worker ``w`` of ``W`` produces the rank's
steps ``w, w + W, ...``: ``DataLoader`` takes workers' batches round-robin, so the k-th batch
the training loop sees is the rank's k-th step there too. Every sample of the epoch is seen
exactly once across ranks (and workers), and the state after a batch is exact. Resuming with
another world size re-partitions the rest of the epoch (nothing repeated, nothing skipped).
With ``cache_mb`` and several ranks, which rank takes which sample of a global batch follows
what each rank's cache holds (``locality=True``, the default: each rank computes every rank's
cache from the plan, no communication), so the ranks together re-read about ``1 - world_size
x cache`` of the dataset per epoch (a windowed tensor dataset, whose samples share records,
keeps each rank's records to a range of its own and stratifies each epoch's order over 64
ranges, ``strata``, so every global batch holds each range's share; BENCHMARKS.md); a rank's
batch may then differ from ``batch_size`` by up
to ``max_imbalance`` samples (default ``batch_size // 8``; ``max_imbalance=0`` keeps batches
equal at a few more reads, ``locality=False`` restores the slices). Caches last across epochs
with `L3DataLoader` (its loader is kept); a plain ``DataLoader``'s workers start a new loader,
with an empty cache, each epoch. ``reuse_front=k`` (default 0) reads each epoch's order with
the k samples the previous epoch read last first (docs/cache-study.md: it helps a page cache
or LRU, not the planned cache); resume with the same k.

Tensors: on the CPU path a batch's images are created in Rust and wrapped by
``torch.from_numpy`` without a copy (``pin_memory=True`` pins them; in worker processes of a
plain ``DataLoader`` they move through shared memory as for any dataset). ``device="gpu"``
decodes and augments on the GPU through wgpu; use it with `L3DataLoader` (in worker
processes of a plain ``DataLoader`` its batches are plain arrays). Its batches go where
``output`` says:

- ``"cuda"`` (the default where l3's GPU is a CUDA device of torch, matched by UUID, and
  ``cuda-python`` is installed): CUDA tensors over exported Vulkan memory, with no host round
  trip (`l3.cuda.CudaBatchPool`);
- ``"host"`` (the default elsewhere): host tensors read back into a few reused buffers,
  pinned when torch can pin (`l3._handoff.HostBatchPool`), so ``.to("cuda",
  non_blocking=True)`` is asynchronous.

Either way a batch is complete when handed out, its memory lives as long as any tensor
viewing it, and a pooled buffer is reused only after every tensor viewing it is released
(and the CUDA work queued on the current stream then is done): live batches never alias. A
batch used on another CUDA stream must be kept until that stream is done with it.

Tensor datasets (``l3.pack_arrays``): the same dataset over a tensor dataset yields one
tensor per declared array under its name, ``(N, ...)``, every array of a sample cut by the
same window (``crop``, ``flips``, ``rot90``, ``normalize``, ``dtype``: see `l3.Loader`)::

    ds = L3IterableDataset("fields/", batch_size=16, crop=(64, 64), flips=True, normalize=True)
    for batch in L3DataLoader(ds):
        x, y = batch["input"], batch["target"]   # (16, C, 64, 64) each, the same windows

with ``samples``, ``labels``, ``epoch``, ``state``, ``skipped`` and ``windows`` (each
sample's window: ``origin``, ``size``, ``flip``, ``rot90`` tensors; None without windows)
as for images. The plan, the cache, resume, ranks and workers are the image loader's. With
``device="gpu"`` the arrays are decoded and cut on the GPU (bit for bit the CPU path's) and
go where ``output`` says, as images do: every array of a batch in one pooled buffer
(CUDA tensors with ``"cuda"``, no host round trip). ``device="auto"`` loads tensor datasets
on the CPU path (it takes every dtype), so ``output`` needs ``device="gpu"`` there.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
import weakref
from typing import Any, Dict, Iterator, Optional, Tuple

import torch
import torch.utils.data

from . import Dataset, Loader, ParameterError, TensorDataset, open_dataset
from ._activations import ActivationStats, compress_activations  # noqa: F401
from ._l3 import dataset_kind, is_remote
from ._handoff import check_output, choose_output
from ._handoff import pool as handoff_pool
from ._options import INT_OPTIONS, check_int, check_options, check_state


def _remove_own(folder: str, pid: int) -> None:
    """Removes ``folder`` in the process that made it (not in a forked worker's copy)."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def _distributed() -> Tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class L3IterableDataset(torch.utils.data.IterableDataset):
    """Batches of augmented images from an l3 dataset, as torch tensors: each item is a dict
    ``{"images": (N, C, H, W) float tensor, "labels": (N,) int64, "samples": (N,) int64
    (dataset indices), "epoch": int, "state": (seed, epoch, consumed), "skipped": int}``. One
    iteration is one epoch (from the current state to the end of its epoch). Over a tensor
    dataset, ``images`` is replaced by one ``(N, ...)`` tensor per declared array, by name,
    and ``windows`` (see the module's documentation).

    ``skipped`` counts the batch's records left out because they could not be read or decoded
    (``on_error="skip"``, the default; such a batch is smaller than ``batch_size``); the first
    one is also reported once by ``warnings.warn`` with its shard, key and error. Pass
    ``on_error="fail"`` to raise instead.

    ``rank`` / ``world_size`` default to ``torch.distributed``'s when it is initialised, else
    0 / 1. ``threads`` is the loader's thread count in each process (default: the cores
    divided among the data-loading workers). ``output`` is where the GPU path's batches go:
    ``"cuda"`` (CUDA tensors, no host round trip) or ``"host"`` (pooled pinned host tensors);
    default ``"cuda"`` where CUDA can import l3's GPU memory, else ``"host"`` (see the
    module's documentation for their lifetime rule); it must be None on the CPU path. Other
    keyword options are `l3.Loader`'s (augmentation, level, cache, device, ...).
    """

    def __init__(
        self,
        dataset: str | os.PathLike | Dataset | TensorDataset,
        batch_size: int,
        *,
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        threads: Optional[int] = None,
        output: Optional[str] = None,
        **options: Any,
    ) -> None:
        super().__init__()
        if "gpu_output" in options:
            raise TypeError("'gpu_output' is set by the dataset (use output)")
        # Checked now (a bad value fails here, not in the first iteration).
        check_output(options.get("device", "cpu"), output)
        self.output = output
        for reserved in ("epoch", "consumed", "end_epoch", "worker", "num_workers"):
            if reserved in options:
                raise TypeError(
                    f"{reserved!r} is set by the dataset (use set_epoch / load_state_dict)"
                )
        check_options(dict(options, batch_size=batch_size, seed=seed))
        for name, value in (("rank", rank), ("world_size", world_size), ("threads", threads)):
            if value is not None:
                check_int(name, value, *INT_OPTIONS[name][:2])
        # A path, not the opened Dataset: the dataset object is pickled into spawned workers.
        opened = isinstance(dataset, (Dataset, TensorDataset))
        self.path = os.fspath(dataset.path if opened else dataset)
        # A remote dataset's index cache, shared with the data-loading workers: of workers
        # opening a shard together one fetches its index, the others read it from here (and
        # every later epoch's opening too). A folder of this object's own, removed with it by
        # the process that made it, unless the caller or L3_INDEX_CACHE names one.
        if (is_remote(self.path) and options.get("index_cache") is None
                and not os.environ.get("L3_INDEX_CACHE")):
            folder = tempfile.mkdtemp(prefix="l3-index-")
            options = dict(options, index_cache=folder)
            weakref.finalize(self, _remove_own, folder, os.getpid())
        self.batch_size = batch_size
        self.seed = seed
        # Records of the dataset (read when a state is loaded, to check it).
        self._records: Optional[int] = len(dataset) if opened else None
        # "images" or "tensors" (read from the manifest when first needed).
        self._kind: Optional[str] = (
            ("tensors" if isinstance(dataset, TensorDataset) else "images") if opened else None
        )
        # Whether a skipped record was reported by a warning (once per dataset object).
        self._warned_skip = False
        dist_rank, dist_world = _distributed()
        self.rank = dist_rank if rank is None else rank
        self.world_size = dist_world if world_size is None else world_size
        self.threads = threads
        self.options = options
        # Set by L3DataLoader: its num_workers as a floor on the threads, its prefetch_factor.
        self._min_threads = 1
        self._prefetch: Optional[int] = None
        # The loader kept between in-process iterations (`_in_process`).
        self._live: Optional[_Live] = None
        # Where the next iteration starts.
        self.start: Tuple[int, int, int] = (seed, 0, 0)
        if is_remote(self.path):
            # Known before workers start, so that each does not ask the server again.
            self._tensors()

    def _tensors(self) -> bool:
        """Whether the dataset holds tensor records (its manifest says so)."""
        if self._kind is None:
            self._kind = dataset_kind(self.path)
        return self._kind == "tensors"

    def set_epoch(self, epoch: int) -> None:
        """Starts the next iteration at ``epoch`` (at its beginning, unless a loaded state is
        in that epoch: then from there)."""
        epoch = check_int("epoch", epoch, *INT_OPTIONS["epoch"][:2])  # type: ignore[assignment]
        seed, at_epoch, consumed = self.start
        self.start = (seed, epoch, consumed if at_epoch == epoch else 0)

    def state_dict(self) -> Dict[str, int]:
        seed, epoch, consumed = self.start
        return {"seed": seed, "epoch": epoch, "consumed": consumed}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        """Resumes from ``state`` (a `state_dict`): exactly the keys ``seed``, ``epoch`` and
        ``consumed``, ints in range, ``consumed`` within the dataset, ``seed`` the dataset's.
        Anything else is a ``TypeError`` or a ``ParameterError`` (a ``ValueError``), and the
        current state is kept."""
        if self._records is None:
            self._records = len(
                open_dataset(self.path, index_cache=self.options.get("index_cache")))
        seed, epoch, consumed = check_state(state, self._records)
        if seed != self.seed:
            raise ParameterError(
                f"the state's seed {seed} is not this dataset's seed {self.seed}: create the "
                f"dataset with seed={seed} to resume that run"
            )
        self.start = (seed, epoch, consumed)

    def _threads(self, workers: int) -> int:
        """The loader's threads in this process: ``threads`` if given, else this process's
        share of the cores it may run on (divided among the ranks of this node, by
        ``LOCAL_WORLD_SIZE`` as torchrun sets it, and among the data-loading workers), and at
        least ``L3DataLoader``'s ``num_workers`` up to those cores."""
        if self.threads is not None:
            return self.threads
        cores = _cores()
        share = max(1, cores // _local_world_size() // workers)
        return max(share, min(self._min_threads, cores))

    def _open(self, info: Any, output: Optional[str]) -> Tuple[Loader, Any]:
        """A loader from the current state and the pool its GPU batches are copied into
        (None without a hand-off): one epoch in a data-loading worker, open-ended in-process
        (kept across epochs by `__iter__`)."""
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        seed, epoch, consumed = self.start
        pool = None
        gpu_options = {}
        if output is not None:
            pool = handoff_pool(output)
            gpu_options["gpu_output"] = "device" if output == "cuda" else "staged"
        options = dict(self.options)
        if "prefetch" not in options and self._prefetch is not None:
            options["prefetch"] = self._prefetch
        loader = Loader(
            self.path, self.batch_size, seed=seed, epoch=epoch, consumed=consumed,
            rank=self.rank, world_size=self.world_size,
            end_epoch=epoch + 1 if info is not None else None, worker=worker,
            num_workers=workers, threads=self._threads(workers), **options, **gpu_options,
        )
        return loader, pool

    def _item(self, b: Dict[str, Any], pool: Any) -> Dict[str, Any]:
        skipped = b["skipped"]
        if skipped and not self._warned_skip:
            self._warned_skip = True
            first = skipped[0]
            warnings.warn(
                f"l3: {len(skipped)} record(s) skipped in a batch of epoch {b['epoch']} "
                f"(first: {first['shard']}, key {first['key']!r}: {first['error']}); "
                "batches with skipped records are smaller, each batch's 'skipped' "
                "counts them; pass on_error='fail' to raise instead",
                RuntimeWarning,
                stacklevel=3,
            )
        if "arrays" in b:
            # A tensor dataset: its arrays by name (handed off in one pooled buffer, or
            # arrays: on the CPU path, and for a batch without samples), and each sample's
            # window.
            if "gpu" in b:
                item: Dict[str, Any] = pool.tensors_of(b["gpu"])
            else:
                convert = torch.from_numpy if pool is None else pool.tensor_of
                item = {name: convert(b[name]) for name in b["arrays"]}
            windows = b["windows"]
            item.update(
                labels=torch.from_numpy(b["labels"]),
                samples=torch.from_numpy(b["samples"]),
                epoch=b["epoch"],
                state=tuple(b["state"]),
                skipped=len(skipped),
                windows=None if windows is None
                else {k: torch.from_numpy(v) for k, v in windows.items()},
            )
            return item
        return {
            "images": torch.from_numpy(b["images"]) if pool is None
            else pool.tensor_of(b["images"]),
            "labels": torch.from_numpy(b["labels"]),
            "samples": torch.from_numpy(b["samples"]),
            "epoch": b["epoch"],
            "state": tuple(b["state"]),
            "skipped": len(skipped),
        }

    def close(self) -> None:
        """Stops the loader kept between in-process iterations (its threads and prefetched
        batches); the next iteration starts a new one. Also done when the dataset is
        garbage-collected."""
        live, self._live = self._live, None
        if live is not None:
            live.loader.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self) -> Dict[str, Any]:
        # A data-loading worker gets the dataset without the in-process loader.
        state = self.__dict__.copy()
        state["_live"] = None
        return state

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        # The GPU path's hand-off: CUDA tensors or pooled pinned host tensors. In a worker
        # process the batch goes through shared memory anyway: plain arrays there. A tensor
        # dataset takes the GPU path only with device="gpu" ("auto" loads tensors on the CPU).
        device = self.options.get("device", "cpu")
        if self._tensors() and device != "gpu":
            if self.output is not None:
                raise ParameterError(f"output={self.output!r} over a tensor dataset needs "
                                     "device=\"gpu\" (\"auto\" loads tensors on the CPU)")
            output = None
        elif info is None:
            output = choose_output(device, self.output)
        elif self.output == "cuda":
            raise ParameterError("output='cuda' needs the loader in this process (L3DataLoader, "
                                 "not DataLoader worker processes: CUDA tensors cannot come "
                                 "from a forked data-loading worker)")
        else:
            output = None
        if info is not None:
            # A data-loading worker: this worker's steps of one epoch.
            loader, pool = self._open(info, output)
            try:
                for b in loader:
                    yield self._item(b, pool)
            finally:
                loader.close()
            return
        yield from self._in_process(output)

    def _in_process(self, output: Optional[str]) -> Iterator[Dict[str, Any]]:
        """One epoch from the current state, in this process. The loader is kept between
        iterations: when the next one starts where this one stopped (the next epoch, or right
        after the last batch handed out), it goes on with the batches it prefetched, so an
        epoch starts without waiting for a new loader's first batch."""
        seed, epoch, consumed = self.start
        key = (output, self._threads(1), self._prefetch)
        live = self._live
        if live is not None and (live.next != self.start or live.key != key):
            self.close()
            live = None
        if live is None:
            loader, pool = self._open(None, output)
            live = self._live = _Live(loader, pool, self.start, key)
        while True:
            b, live.pending = live.pending, None
            if b is None:
                try:
                    b = next(live.loader, None)
                except BaseException:
                    # An error or an interrupt while waiting: a new loader next time.
                    self.close()
                    raise
            if b is None:
                self.close()
                break
            if b["epoch"] != epoch:
                # Nothing of this epoch was left: the batch opens the next one.
                live.pending = b
                live.next = (seed, epoch + 1, 0)
                break
            item = self._item(b, live.pool)
            live.next = item["state"]
            yield item
            if item["state"][1] != epoch:
                break
        # The next in-process iteration continues after this epoch.
        self.start = (seed, epoch + 1, 0)


class _Live:
    """The loader kept between in-process iterations: the loader, the pool its GPU batches
    are copied into (None without a hand-off), the state it stands at (after the last batch
    handed out), a batch of the next epoch already taken from it, and the options it was
    opened with."""

    def __init__(self, loader: Loader, pool: Any, at: Tuple[int, int, int], key: Any):
        self.loader = loader
        self.pool = pool
        self.next: Tuple[int, int, int] = at
        self.pending: Optional[Dict[str, Any]] = None
        self.key = key


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _local_world_size() -> int:
    """Processes of this job on this node (torchrun's ``LOCAL_WORLD_SIZE``), else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


class L3DataLoader(torch.utils.data.DataLoader):
    """A ``DataLoader`` over an `L3IterableDataset` (``batch_size=None``: items are batches)
    that records the state after each batch it hands out, so ``state_dict()`` is exact and
    ``load_state_dict()`` resumes right after that batch.

    It starts no worker processes: the l3 loader decodes and augments on its own threads,
    without the GIL, and batches never cross a process boundary. ``num_workers=N`` asks for
    at least ``N`` of those threads (up to the cores this process may use; by default the
    loader already takes this process's share of them), so more workers are never slower
    than none. ``prefetch_factor`` sets how many batches the loader prepares ahead
    (``prefetch_factor * num_workers``, unless the dataset sets ``prefetch``);
    ``persistent_workers`` is accepted and changes nothing (the loader is kept between epochs
    anyway). ``worker_init_fn`` and ``multiprocessing_context`` are refused, since no worker
    process runs them. Other arguments are ``DataLoader``'s (``pin_memory``, ...). To run the
    dataset in worker processes anyway, give it to a plain ``torch.utils.data.DataLoader``
    (each worker then runs its own loader on its share of the cores, started each epoch, and
    each batch is copied through shared memory: slower, see BENCHMARKS.md).
    """

    def __init__(self, dataset: L3IterableDataset, **kwargs: Any) -> None:
        if not isinstance(dataset, L3IterableDataset):
            raise TypeError("L3DataLoader needs an L3IterableDataset")
        for name in ("worker_init_fn", "multiprocessing_context"):
            if kwargs.get(name) is not None:
                raise TypeError(f"{name} does not apply: L3DataLoader starts no worker "
                                "processes (the loader has its own threads)")
        workers = check_int("num_workers", kwargs.pop("num_workers", 0), 0, INT_OPTIONS["threads"][1])
        kwargs.pop("persistent_workers", None)
        prefetch_factor = kwargs.pop("prefetch_factor", None)
        if prefetch_factor is not None:
            prefetch_factor = check_int("prefetch_factor", prefetch_factor, 1, 1024)
        kwargs.setdefault("batch_size", None)
        if kwargs["batch_size"] is not None:
            raise ValueError("the dataset's items are batches: leave batch_size=None")
        super().__init__(dataset, num_workers=0, **kwargs)
        self.l3_dataset = dataset
        #: The ``num_workers`` asked for (the loader's threads; no processes are started).
        self.l3_workers = workers
        dataset._min_threads = max(1, workers or 0)
        if prefetch_factor is not None:
            dataset._prefetch = min(1024, prefetch_factor * max(1, workers or 0))

    def close(self) -> None:
        """Stops the loader kept between epochs (see `L3IterableDataset.close`)."""
        self.l3_dataset.close()

    def _tensors(self) -> bool:
        """Whether the dataset holds tensor records (its manifest says so)."""
        if self._kind is None:
            self._kind = dataset_kind(self.path)
        return self._kind == "tensors"

    def set_epoch(self, epoch: int) -> None:
        """See `L3IterableDataset.set_epoch`."""
        self.l3_dataset.set_epoch(epoch)

    def state_dict(self) -> Dict[str, int]:
        """``{"seed", "epoch", "consumed"}``: after the last batch handed out."""
        return self.l3_dataset.state_dict()

    def load_state_dict(self, state: Dict[str, int]) -> None:
        """Resumes right after the batch whose state this is (on the next iteration)."""
        self.l3_dataset.load_state_dict(state)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        for batch in super().__iter__():
            state = tuple(int(x) for x in batch.pop("state"))
            self.l3_dataset.start = state  # type: ignore[assignment]
            yield batch
