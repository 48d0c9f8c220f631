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

One run per file, files in the order given: one warm-up pass of --warmup-batches batches
(workers started, files opened), then a cold epoch (with --drop-caches, run as root: the
page cache dropped just before, `echo 1 > /proc/sys/vm/drop_caches`) and a warm epoch (the
page cache as the cold epoch left it). Each epoch: samples/s (samples / wall time from
creating the epoch's iterator to its last batch; every batch is made contiguous and one
element read, as a training step would), bytes read from storage (the workers'
/proc/PID/io read_bytes, summed: page-cache misses only, so 0 when the file is cached) and
bytes requested from the OS (rchar, summed: every read() h5py made, cached or not). Peak
RSS: the main process's ru_maxrss plus each worker's VmHWM (pages shared with the main
process, PyTorch's libraries among them, count in each). Each epoch's samples are checked:
every index exactly once.

Arms: `ARMS` maps a name to a function (args, file) -> figures; the l3 loader over tensor
records is to be added as another arm (an `--l3 DATASET` option) once it exists, measured
the same way. Results: a markdown table on stdout and in --out, raw figures in --out.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
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

    def __init__(self, path: str, crop: int, mean: np.ndarray, std: np.ndarray, variables=VARIABLES):
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
        pair = np.stack([d[t : t + 2, y : y + c, x : x + c] for d in self.dsets], axis=1)  # (2, C, c, c)
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


def vm_hwm(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("1\n")
        return True
    except OSError:
        return False


def run_epoch(loader: DataLoader, expected: int) -> Dict[str, Any]:
    """One epoch: samples/s and the workers' I/O counters around it."""
    t0 = time.perf_counter()
    it = iter(loader)
    pids = [w.pid for w in it._workers]
    before = [proc_io(p) for p in pids]
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
        raise SystemExit(f"epoch check failed: {int((seen != 1).sum())} samples not seen exactly once")
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
        ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
        persistent_workers=True, prefetch_factor=2,
    )
    it = iter(loader)
    for _ in range(args.warmup_batches):
        next(it)
    del it
    dropped = drop_caches() if args.drop_caches else False
    cold = run_epoch(loader, len(ds))
    warm = run_epoch(loader, len(ds))
    pids = cold["worker_pids"]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 + sum(vm_hwm(p) for p in pids)
    del loader
    return {"cache_dropped": dropped, "cold": cold, "warm": warm, "peak_rss": peak}


ARMS: Dict[str, Callable[[argparse.Namespace, str], Dict[str, Any]]] = {"h5py + DataLoader": h5py_arm}


def compression_of(path: str) -> str:
    with h5py.File(path, "r") as f:
        d = f[VARIABLES[0]]
        if d.compression:
            return f"{d.compression} {d.compression_opts}"
        filters = d._filters
        if not filters:
            return "none"
        names = {32001: "blosc", 32026: "blosc2", 32015: "zstd"}
        return ", ".join(names.get(int(k), str(k)) if str(k).isdigit() else str(k) for k in filters)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="HDF5 files of scripts/make-simulation.py")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--crop", type=int, default=128)
    ap.add_argument("--warmup-batches", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--drop-caches", action="store_true", help="drop the page cache before each cold epoch (root)")
    ap.add_argument("--out", type=Path, help="markdown report (raw figures beside it, .json)")
    args = ap.parse_args()
    if args.workers < 1:
        raise SystemExit("--workers must be at least 1 (the baseline runs DataLoader workers)")
    rows = []
    for path in args.files:
        for arm, run in ARMS.items():
            print(f"{arm}: {path}", file=sys.stderr)
            r = run(args, path)
            r.update(arm=arm, file=path, file_bytes=os.path.getsize(path), compression=compression_of(path))
            rows.append(r)
            print(f"  cold {r['cold']['samples_per_s']:.0f} samples/s, {r['cold']['storage_bytes'] / 1e6:.0f} MB"
                  f" from storage; warm {r['warm']['samples_per_s']:.0f} samples/s", file=sys.stderr)
    gb = 1e9
    lines = [
        f"{platform.node()}, {os.cpu_count()} cores, torch {torch.__version__}, h5py {h5py.__version__};"
        f" {args.workers} workers, batch {args.batch_size}, crop {args.crop}",
        "",
        "| loader | file | compression | file GB | cold samples/s | cold GB from storage | cold GB requested"
        " | warm samples/s | warm GB from storage | peak RSS GB |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        c, w = r["cold"], r["warm"]
        cold_storage = f"{c['storage_bytes'] / gb:.2f}" if r["cache_dropped"] else f"{c['storage_bytes'] / gb:.2f} (cached)"
        lines.append(
            f"| {r['arm']} | {Path(r['file']).name} | {r['compression']} | {r['file_bytes'] / gb:.2f}"
            f" | {c['samples_per_s']:.0f} | {cold_storage} | {c['requested_bytes'] / gb:.2f}"
            f" | {w['samples_per_s']:.0f} | {w['storage_bytes'] / gb:.2f} | {r['peak_rss'] / gb:.2f} |"
        )
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
