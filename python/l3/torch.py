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

Order and partitioning: the order is a global permutation of the dataset from ``(seed,
epoch)``; each global step hands ``batch_size`` samples to each rank (rank and world size from
``torch.distributed`` when it is initialised, else the arguments). Inside a rank, data-loading
worker ``w`` of ``W`` produces the rank's steps ``w, w + W, ...``: ``DataLoader`` takes
workers' batches round-robin, so the k-th batch the training loop sees is the rank's k-th step,
every sample of the epoch is seen exactly once across ranks and workers, and the state after a
batch is exact. Resuming with another world size re-partitions the rest of the epoch (nothing
repeated, nothing skipped).

Tensors: on the CPU path a batch's images are created in Rust and wrapped by
``torch.from_numpy`` without a copy (with workers, ``DataLoader`` moves them through shared
memory as for any dataset; ``pin_memory=True`` pins them). ``device="gpu"`` decodes and
augments on the GPU through wgpu; use it with ``num_workers=0`` (the loader has its own
threads; in data-loading workers its batches are plain arrays). Its batches go where
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
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Iterator, Optional, Tuple

import torch
import torch.utils.data

from . import Dataset, Loader, ParameterError
from ._handoff import check_output, choose_output
from ._handoff import pool as handoff_pool
from ._options import INT_OPTIONS, check_int, check_options, check_state


def _distributed() -> Tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class L3IterableDataset(torch.utils.data.IterableDataset):
    """Batches of augmented images from an l3 dataset, as torch tensors: each item is a dict
    ``{"images": (N, C, H, W) float tensor, "labels": (N,) int64, "samples": (N,) int64
    (dataset indices), "epoch": int, "state": (seed, epoch, consumed), "skipped": int}``. One
    iteration is one epoch (from the current state to the end of its epoch).

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
        dataset: str | os.PathLike | Dataset,
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
        self.path = os.fspath(dataset.path if isinstance(dataset, Dataset) else dataset)
        self.batch_size = batch_size
        self.seed = seed
        # Records of the dataset (read when a state is loaded, to check it).
        self._records: Optional[int] = len(dataset) if isinstance(dataset, Dataset) else None
        # Whether a skipped record was reported by a warning (once per dataset object).
        self._warned_skip = False
        dist_rank, dist_world = _distributed()
        self.rank = dist_rank if rank is None else rank
        self.world_size = dist_world if world_size is None else world_size
        self.threads = threads
        self.options = options
        # Where the next iteration starts.
        self.start: Tuple[int, int, int] = (seed, 0, 0)

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
            self._records = len(Dataset(self.path))
        seed, epoch, consumed = check_state(state, self._records)
        if seed != self.seed:
            raise ParameterError(
                f"the state's seed {seed} is not this dataset's seed {self.seed}: create the "
                f"dataset with seed={seed} to resume that run"
            )
        self.start = (seed, epoch, consumed)

    def __iter__(self) -> Iterator[Dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        threads = self.threads
        if threads is None:
            threads = max(1, (os.cpu_count() or 1) // workers)
        seed, epoch, consumed = self.start
        # The GPU path's hand-off: CUDA tensors or pooled pinned host tensors. In a worker
        # process the batch goes through shared memory anyway: plain arrays there.
        if info is None:
            output = choose_output(self.options.get("device", "cpu"), self.output)
        elif self.output == "cuda":
            raise ParameterError("output='cuda' needs num_workers=0 (CUDA tensors cannot come "
                                 "from a forked data-loading worker)")
        else:
            output = None
        to_tensor = torch.from_numpy
        gpu_options = {}
        if output is not None:
            to_tensor = handoff_pool(output).tensor_of
            gpu_options["gpu_output"] = "device" if output == "cuda" else "staged"
        loader = Loader(
            self.path, self.batch_size, seed=seed, epoch=epoch, consumed=consumed,
            rank=self.rank, world_size=self.world_size, end_epoch=epoch + 1, worker=worker,
            num_workers=workers, threads=threads, **self.options, **gpu_options,
        )
        try:
            for b in loader:
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
                        stacklevel=2,
                    )
                yield {
                    "images": to_tensor(b["images"]),
                    "labels": torch.from_numpy(b["labels"]),
                    "samples": torch.from_numpy(b["samples"]),
                    "epoch": b["epoch"],
                    "state": tuple(b["state"]),
                    "skipped": len(skipped),
                }
        finally:
            loader.close()
        if info is None:
            # In-process iteration: the next one continues after this epoch.
            self.start = (seed, epoch + 1, 0)


class L3DataLoader(torch.utils.data.DataLoader):
    """A ``DataLoader`` over an `L3IterableDataset` (``batch_size=None``: items are batches)
    that records the state after each batch it hands out, so ``state_dict()`` is exact and
    ``load_state_dict()`` resumes right after that batch. Other arguments are
    ``DataLoader``'s (``num_workers``, ``pin_memory``, ...); ``persistent_workers`` is refused,
    since workers must start from the state of each new iteration.
    """

    def __init__(self, dataset: L3IterableDataset, **kwargs: Any) -> None:
        if not isinstance(dataset, L3IterableDataset):
            raise TypeError("L3DataLoader needs an L3IterableDataset")
        if kwargs.get("persistent_workers"):
            raise ValueError("persistent_workers is not supported: each epoch starts workers "
                             "from the loader's state")
        kwargs.setdefault("batch_size", None)
        if kwargs["batch_size"] is not None:
            raise ValueError("the dataset's items are batches: leave batch_size=None")
        super().__init__(dataset, **kwargs)
        self.l3_dataset = dataset

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
