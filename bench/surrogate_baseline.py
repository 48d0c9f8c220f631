#!/usr/bin/env python3
"""SOLAR's baseline for surrogate training: the PyTorch `Dataset` + `DataLoader` users write
over h5py, on the shallow-water files of scripts/make-simulation.py (h, u, v, one step per
sample, chunks of one step).

    python scripts/make-simulation.py --out /tmp/sim --formats h5,h5-gzip,h5-blosc2,h5-zstd
    python bench/surrogate_baseline.py /tmp/sim/sim.h5 /tmp/sim/sim-gzip.h5 ... [--drop-caches]

The baseline (`H5Steps`): each DataLoader worker opens the file lazily on its first item;
item t reads steps t and t+1 of every variable in one h5py slice per variable, only the
crop window (a random 128x128 window, the same for input and target), flips both at random
(left-right, up-down, p 0.5 each), normalises each variable by its mean and standard
deviation (computed once before the run from every 50th step) and returns (input, target),
each (3, 128, 128) float32. --workers 2, --batch-size 32, shuffle, persistent workers.

One run per file, files in the order given, --rounds times: a warm-up of --warmup-batches
batches (workers started, files opened), then a cold epoch (the file evicted from the page
cache just before: fsync + POSIX_FADV_DONTNEED, checked with mincore; with --drop-caches,
as root, also `echo 1 > /proc/sys/vm/drop_caches`) and a warm epoch (the page cache as the
cold epoch left it). The table gives the median and range over the rounds.

Each epoch: samples/s (samples / wall time from creating the epoch's iterator to its last
batch; every batch is made contiguous and one element read, as a training step would),
bytes read from storage (the workers' /proc/PID/io read_bytes from before the iterator
starts them to the end, summed: page-cache misses only, so 0 when the file is cached) and
bytes requested from the OS (rchar, summed: every read() h5py made, cached or not). Peak
RSS: the main process's ru_maxrss plus each worker's VmHWM (pages shared with the main
process, PyTorch's libraries among them, count in each). Each epoch's samples are checked:
every index exactly once.

The l3 arm (`--l3 DATASET`, repeatable): tensor records packed from the same file with
``python -m l3 pack-arrays sim.h5 -o DATASET --input h,u,v --target h,u,v --offset
target=1 [--mode rel:1e-3]`` (one record per step, stored once, and a window pairing t with
t + 1; datasets packed before issue 47, or with ``pack_source(..., windows=False)``, store
record t = steps t and t+1, each step twice),
read by `l3.Loader` (the Rust loader that `l3.torch.L3DataLoader` wraps; ``threads`` =
--workers, no worker processes) with the same crop, flips (``flips=True``: left-right and
up-down, p 0.5 each) and normalisation (``normalize=True``: the manifest's statistics of
the stacked array, not per variable; the cost is the same). Its planned cache holds
--cache-fraction (0.25) of the raw simulation's bytes (steps x variables x H x W x 4),
compressed payloads. Each run is a fresh process (spawned, so its peak RSS is its own): a
warm-up of --warmup-batches batches of epoch 0 with a first loader (closed after), then the
shards are evicted like the HDF5 file, then a second loader runs epoch 1 (cold: page cache
and loader cache empty) and epoch 2 (warm: the page cache as left, and the planned cache as
epoch 1 filled it). Bytes from storage: the process's /proc/self/io read_bytes; the cache
hit rate: hits / lookups over the epoch from the loader's counters. Each batch becomes
torch tensors (``torch.from_numpy``, no copy) made contiguous and read like the baseline's.

Arms: `ARMS` maps a name to a function (args, file) -> figures. Results: a markdown table on
stdout and in --out, raw figures in --out.json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

try:
    import hdf5plugin  # noqa: F401  (registers the Blosc2 and Zstd filters)
except ImportError:
    hdf5plugin = None

VARIABLES = ("h", "u", "v")


def variable_stats(path: str, variables=VARIABLES, stride: int = 50) -> tuple:
    """Per-variable mean and standard deviation over every ``stride``-th step (float64)."""
    with h5py.File(path, "r") as f:
        means, stds = [], []
        for name in variables:
            sample = f[name][::stride].astype(np.float64)
            means.append(sample.mean())
            stds.append(sample.std())
    return np.array(means, np.float32), np.array(stds, np.float32)


class H5Steps(Dataset):
    """Item t: (input, target) = normalised crops of steps t and t+1 of `variables`, the
    same random window and flips on both. The file opens lazily in each worker."""

    def __init__(
        self, path: str, crop: int, mean: np.ndarray, std: np.ndarray, variables=VARIABLES
    ):
        self.path, self.crop, self.variables = path, crop, variables
        self.mean = mean[:, None, None]
        self.std = std[:, None, None]
        with h5py.File(path, "r") as f:
            steps, self.height, self.width = f[variables[0]].shape
        self.steps = steps
        self.file = None
        self.dsets: List[Any] = []

    def __len__(self) -> int:
        return self.steps - 1

    def __getitem__(self, t: int):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
            self.dsets = [self.file[name] for name in self.variables]
        c = self.crop
        y = int(torch.randint(0, self.height - c + 1, ()))
        x = int(torch.randint(0, self.width - c + 1, ()))
        pair = np.stack(
            [d[t : t + 2, y : y + c, x : x + c] for d in self.dsets], axis=1
        )  # (2, C, c, c)
        if torch.rand(()) < 0.5:
            pair = pair[..., ::-1]
        if torch.rand(()) < 0.5:
            pair = pair[..., ::-1, :]
        pair = (pair - self.mean) / self.std
        pair = np.ascontiguousarray(pair, dtype=np.float32)
        return torch.from_numpy(pair[0]), torch.from_numpy(pair[1]), t


def proc_io(pid: int) -> Dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/io") as fh:
        for line in fh:
            key, value = line.split(":")
            out[key] = int(value)
    return out


def settle(pids: List[int], quiet_s: float = 0.5, limit_s: float = 60.0) -> None:
    """Waits until the workers have read nothing for ``quiet_s`` (at most ``limit_s``)."""
    last = [proc_io(p)["rchar"] for p in pids]
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        time.sleep(quiet_s)
        now = [proc_io(p)["rchar"] for p in pids]
        if now == last:
            return
        last = now


def vm_hwm(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def evict(path: str, system_wide: bool) -> float:
    """Evicts ``path`` from the page cache (fsync + POSIX_FADV_DONTNEED; with
    ``system_wide``, also ``echo 1 > /proc/sys/vm/drop_caches``) and returns the fraction
    of its pages still resident after (mincore)."""
    os.sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if system_wide:
        try:
            with open("/proc/sys/vm/drop_caches", "w") as fh:
                fh.write("1\n")
        except OSError as e:
            print(f"cannot drop the page cache: {e}", file=sys.stderr)
    return resident(path)


def resident(path: str) -> float:
    """The fraction of ``path``'s pages in the page cache (mincore over an mmap)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0.0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return float("nan")
        vec = (ctypes.c_ubyte * pages)()
        ok = libc.mincore(addr, size, vec) == 0
        libc.munmap(addr, size)
    finally:
        os.close(fd)
    if not ok:
        return float("nan")
    return sum(v & 1 for v in vec) / pages


def run_epoch(loader: DataLoader, expected: int, pids: List[int]) -> Dict[str, Any]:
    """One epoch: samples/s and the I/O counters of the (persistent) workers ``pids`` from
    before its iterator starts them to its end."""
    before = [proc_io(p) for p in pids]
    t0 = time.perf_counter()
    it = iter(loader)
    if sorted(w.pid for w in it._workers) != sorted(pids):
        raise SystemExit("the DataLoader's workers changed between epochs")
    seen = np.zeros(expected, np.int64)
    samples = 0
    checksum = 0.0
    for inp, tgt, idx in it:
        inp, tgt = inp.contiguous(), tgt.contiguous()
        checksum += float(inp[0, 0, 0, 0]) + float(tgt[-1, -1, -1, -1])
        seen[idx.numpy()] += 1
        samples += len(idx)
    wall = time.perf_counter() - t0
    after = [proc_io(p) for p in pids]
    if not (seen == 1).all():
        raise SystemExit(
            f"epoch check failed: {int((seen != 1).sum())} samples not seen exactly once"
        )
    return {
        "samples": samples,
        "seconds": wall,
        "samples_per_s": samples / wall,
        "storage_bytes": sum(a["read_bytes"] - b["read_bytes"] for a, b in zip(after, before)),
        "requested_bytes": sum(a["rchar"] - b["rchar"] for a, b in zip(after, before)),
        "worker_pids": pids,
        "checksum": checksum,
    }


def h5py_arm(args: argparse.Namespace, path: str) -> Dict[str, Any]:
    """The baseline on one file: warm-up, a cold epoch and a warm epoch."""
    mean, std = variable_stats(path)
    ds = H5Steps(path, args.crop, mean, std)
    torch.manual_seed(args.seed)
    loader = DataLoader(
        ds,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        persistent_workers=True,
        prefetch_factor=2,
    )
    it = iter(loader)
    pids = [w.pid for w in it._workers]
    for _ in it:  # the warm-up: a whole epoch would read the file into the page cache
        if it._num_yielded >= args.warmup_batches:
            break
    del it
    settle(pids)  # the workers finish the warm-up's prefetched batches before the eviction
    left = evict(path, args.drop_caches)
    cold = run_epoch(loader, len(ds), pids)
    warm = run_epoch(loader, len(ds), pids)
    warm["resident_before"] = resident(path)
    main_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    workers_rss = [vm_hwm(p) for p in pids]
    del loader
    return {
        "resident_before_cold": left,
        "cold": cold,
        "warm": warm,
        "peak_rss": main_rss + sum(workers_rss),
        "main_rss": main_rss,
        "workers_rss": workers_rss,
    }


ARMS: Dict[str, Callable[[argparse.Namespace, str], Dict[str, Any]]] = {
    "h5py + DataLoader": h5py_arm
}


def dataset_files(path: str) -> List[str]:
    return sorted(str(p) for p in Path(path).iterdir() if p.suffix == ".l3s")


def l3_epoch(it: Any, batches: int, epoch: int, expected: int) -> Dict[str, Any]:
    """The next ``batches`` batches of an l3 loader's iterator ``it``, all of ``epoch``:
    samples/s, bytes from storage (this process's read_bytes), the loader's bytes read and
    the cache's lookups and hits over them (its counters are cumulative)."""
    io0 = proc_io(os.getpid())
    seen = np.zeros(expected, np.int64)
    samples = 0
    checksum = 0.0
    loader_bytes = 0
    first_batch = None
    cache0 = cache1 = None
    t0 = time.perf_counter()
    for _ in range(batches):
        b = next(it)
        if first_batch is None:
            first_batch = time.perf_counter() - t0
        if b["epoch"] != epoch:
            raise SystemExit(f"expected a batch of epoch {epoch}, got {b['epoch']}")
        inp = torch.from_numpy(b["input"]).contiguous()
        tgt = torch.from_numpy(b["target"]).contiguous()
        checksum += float(inp[0, 0, 0, 0]) + float(tgt[-1, -1, -1, -1])
        seen[b["samples"]] += 1
        samples += len(b["samples"])
        loader_bytes += b["bytes_read"]
        cache1 = b["cache"]
        if cache0 is None:
            cache0 = {k: 0 for k in cache1} if epoch == 1 else None
    wall = time.perf_counter() - t0
    io1 = proc_io(os.getpid())
    if not (seen == 1).all():
        raise SystemExit(f"l3 epoch check failed: {int((seen != 1).sum())} samples not once")
    return {
        "samples": samples,
        "seconds": wall,
        "samples_per_s": samples / wall,
        "first_batch_s": first_batch,
        "storage_bytes": io1["read_bytes"] - io0["read_bytes"],
        "requested_bytes": io1["rchar"] - io0["rchar"],
        "loader_bytes": loader_bytes,
        "cache": cache1,
        "checksum": checksum,
    }


def l3_child(options: Dict[str, Any], path: str) -> Dict[str, Any]:
    """The l3 arm's run, in a fresh process (see the module help)."""
    import l3

    torch.set_num_threads(1)
    n = len(l3.open_dataset(path))
    batch = options["batch_size"]
    common = dict(
        seed=options["seed"],
        crop=(options["crop"], options["crop"]),
        flips=True,
        normalize=True,
        threads=options["workers"],
    )
    warm = l3.Loader(path, batch, epoch=0, end_epoch=1, **common)
    for k, _ in enumerate(warm):
        if k + 1 >= options["warmup_batches"]:
            break
    warm.close()
    del warm
    files = dataset_files(path)
    sizes = [os.path.getsize(f) for f in files]
    left = [evict(f, options["drop_caches"]) * s for f, s in zip(files, sizes)]
    cache_mb = int(options["cache_bytes"]) >> 20
    loader = l3.Loader(path, batch, epoch=1, end_epoch=3, cache_mb=cache_mb, **common)
    it = iter(loader)
    per_epoch = -(-n // batch)
    cold = l3_epoch(it, per_epoch, 1, n)
    warm_ = l3_epoch(it, per_epoch, 2, n)
    loader.close()
    c1, c2 = cold["cache"], warm_["cache"]
    cold["hit_rate"] = c1["hits"] / max(1, c1["accesses"])
    warm_["hit_rate"] = (c2["hits"] - c1["hits"]) / max(1, c2["accesses"] - c1["accesses"])
    return {
        "records": n,
        "dataset_bytes": sum(sizes),
        "cache_mb": cache_mb,
        "resident_before_cold": sum(left) / max(1, sum(sizes)),
        "cold": cold,
        "warm": warm_,
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def l3_arm(args: argparse.Namespace, path: str) -> Dict[str, Any]:
    """The l3 loader on one dataset, in a spawned process."""
    import multiprocessing

    options = dict(
        seed=args.seed, crop=args.crop, workers=args.workers, batch_size=args.batch_size,
        warmup_batches=args.warmup_batches, drop_caches=args.drop_caches,
        cache_bytes=args.cache_fraction * args.raw_bytes,
    )  # fmt: skip
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(l3_child, (options, path))


def compression_of(path: str) -> str:
    with h5py.File(path, "r") as f:
        d = f[VARIABLES[0]]
        if d.compression in ("gzip", "lzf", "szip"):
            return f"{d.compression} {d.compression_opts}"
        names = {"32001": "blosc", "32026": "blosc2", "32015": "zstd", "shuffle": None}
        found = [names.get(str(k), str(k)) for k in d._filters]
        return ", ".join(n for n in found if n) or "none"


def spread(values: List[float], fmt: str = "{:.0f}") -> str:
    """The median, and the range when there are several values."""
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def l3_mode(path: str) -> str:
    """The dataset's first array's mode: "l3 lossless", "l3 rel 0.001", ..."""
    import l3

    arr = l3.open_dataset(path).arrays[0]
    bound = arr["bound"] or {}
    for key, short in (("relative", "rel"), ("absolute", "abs")):
        if key in bound:
            return f"l3 {short} {bound[key]:g}"
    return f"l3 {arr['mode']}"


def raw_bytes_of(args: argparse.Namespace) -> int:
    """The raw simulation's bytes: steps x variables x H x W x 4, from the first HDF5 file,
    else from the first l3 dataset (records + 1 steps)."""
    if args.files:
        with h5py.File(args.files[0], "r") as f:
            return sum(f[v].size * f[v].dtype.itemsize for v in VARIABLES)
    import l3

    ds = l3.open_dataset(args.l3[0])
    return (len(ds) + 1) * ds[0]["input"].nbytes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", help="HDF5 files of scripts/make-simulation.py")
    ap.add_argument(
        "--l3", action="append", default=[], metavar="DATASET", help="an l3 arm (repeatable)"
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--crop", type=int, default=128)
    ap.add_argument("--warmup-batches", type=int, default=10)
    ap.add_argument(
        "--cache-fraction",
        type=float,
        default=0.25,
        help="the l3 loader's cache, as a fraction of the raw simulation (0.25)",
    )
    ap.add_argument("--rounds", type=int, default=1, help="repeat every file's run, interleaved")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--drop-caches",
        action="store_true",
        help="also drop the whole page cache before each cold epoch (root)",
    )
    ap.add_argument("--out", type=Path, help="markdown report (raw figures beside it, .json)")
    args = ap.parse_args()
    if args.workers < 1 or args.rounds < 1:
        raise SystemExit("--workers and --rounds must be at least 1")
    if not args.files and not args.l3:
        raise SystemExit("give HDF5 files, --l3 datasets or both")
    args.raw_bytes = raw_bytes_of(args)
    plan = [(arm, run, path) for path in args.files for arm, run in ARMS.items()]
    plan += [("l3 loader", l3_arm, path) for path in args.l3]
    runs: Dict[tuple, List[Dict[str, Any]]] = {}
    for round_ in range(args.rounds):
        for arm, run, path in plan:
            print(f"round {round_ + 1}, {arm}: {path}", file=sys.stderr)
            r = run(args, path)
            runs.setdefault((arm, path), []).append(r)
            print(
                f"  cold {r['cold']['samples_per_s']:.0f} samples/s,"
                f" {r['cold']['storage_bytes'] / 1e6:.0f} MB from storage"
                f" ({r['resident_before_cold']:.1%} resident before);"
                f" warm {r['warm']['samples_per_s']:.0f} samples/s",
                file=sys.stderr,
            )
    gb = 1e9
    lines = [
        f"{platform.node()}, {os.cpu_count()} cores, torch {torch.__version__}, h5py"
        f" {h5py.__version__}; {args.workers} workers, batch {args.batch_size}, crop"
        f" {args.crop}; raw simulation {args.raw_bytes / gb:.2f} GB; l3 cache"
        f" {args.cache_fraction:.0%} of it; median (range) of {args.rounds} round(s)",
        "",
        "| loader | file | storage | file GB | cold samples/s | cold GB from storage"
        " | GB requested | warm samples/s | warm GB from storage | warm cache hit rate"
        " | peak RSS GB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = []
    for (arm, path), rs in runs.items():
        cold = [r["cold"] for r in rs]
        warm = [r["warm"] for r in rs]
        if arm == "l3 loader":
            size = rs[0]["dataset_bytes"]
            storage = l3_mode(path)
            hit = spread([w["hit_rate"] for w in warm], "{:.2f}")
        else:
            size = os.path.getsize(path)
            storage = compression_of(path)
            hit = "page cache"
        lines.append(
            f"| {arm} | {Path(path).name} | {storage} | {size / gb:.2f}"
            f" | {spread([c['samples_per_s'] for c in cold])}"
            f" | {spread([c['storage_bytes'] / gb for c in cold], '{:.2f}')}"
            f" | {spread([c['requested_bytes'] / gb for c in cold], '{:.2f}')}"
            f" | {spread([w['samples_per_s'] for w in warm])}"
            f" | {spread([w['storage_bytes'] / gb for w in warm], '{:.2f}')}"
            f" | {hit} | {max(r['peak_rss'] for r in rs) / gb:.2f} |"
        )
        rows.append({"arm": arm, "file": path, "file_bytes": size, "runs": rs})
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
