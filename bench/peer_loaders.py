#!/usr/bin/env python3
"""The l3 loader against its peers, side by side in one run on one corpus: torchvision
(ImageFolder of PNG files), MosaicML Streaming (MDS), WebDataset (tar shards of PNG) and l3
(`L3DataLoader` over the compact and fast profiles), all with the same augmentation.

    python bench/peer_loaders.py [--corpus DIR] [--epochs 2] [--workers 2] [--out FILE.md]

Run it through scripts/bench-peer-loaders.sh, which installs the peers and l3 into a venv and
builds the `l3` CLI. What one run does:

1. The corpus: --corpus, else scripts/make-loader-corpus.py into WORK/corpus (500x375 PNG tiles
   of ../shared/data/images in an ImageFolder tree, 3 classes; reused when complete).
2. One conversion per loader, outside the timing, from the same PNG files: torchvision reads
   the tree as is; MDS with a `png` column (each file's bytes, unchanged) and an int `label`;
   WebDataset tar shards (--wds-shards) of the same bytes (`.png`, `.cls`); `l3.pack` with the
   compact (default) and the fast profile.
3. Each loader, on the same augmentation: RandomResizedCrop(224, scale (0.08, 1), ratio
   (3/4, 4/3)) + horizontal flip (p 0.5) + ImageNet normalisation, to float32 NCHW batches of
   --batch-size. The peers decode with Pillow and augment with torchvision.transforms in
   --workers DataLoader workers; l3 runs `L3DataLoader` at each --l3-workers count (its own
   defaults are this augmentation). One warm-up epoch (page cache warm, first-time costs), then
   --epochs timed epochs; --rounds repeats the timed epochs of every loader, interleaved.
4. Each batch is consumed as a training loop would: `.contiguous()` and one element read.
   Every epoch's sample indices are checked: each sample of the corpus seen exactly once.
5. For l3, where the time goes: `l3 bench-loader` (--l3-bin) on the same datasets, once per
   round after the round's loaders, prints read, decode, augment and hand-off per image.

images/s = images of the timed epochs / their wall time, from creating the epoch's iterator
to the end of its last batch (worker start and shutdown included, as a training loop sees
them). l3's kept loader is closed after the warm-up and after each round, so
a round starts cold (no batches made while other loaders ran) and only the round's second
epoch gains from prefetching across the epoch boundary, as in a training loop. "First batch, new loader": from creating the dataset object to the first batch of the
warm-up epoch. "First batch per epoch": from creating an epoch's iterator to its first batch
(median over the timed epochs).

The report: a markdown table on stdout and in --out, the raw figures in --out with `.json`.
The exit status is 1 when a loader or `l3 bench-loader` failed or an epoch check did not hold.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 224


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, help="ImageFolder tree of PNG files (default: "
                    "WORK/corpus, built by scripts/make-loader-corpus.py)")
    ap.add_argument("--images", type=Path, default=REPO.parent / "shared/data/images",
                    help="source images of the corpus builder")
    ap.add_argument("--work", type=Path, default=REPO / "target/peer-loaders",
                    help="folder for the corpus and the converted datasets")
    ap.add_argument("--out", type=Path, help="markdown report (default WORK/report.md; the "
                    "JSON goes next to it with .json)")
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs after the warm-up")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeats of every loader's timed epochs, interleaved (median, range)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers of the peers")
    ap.add_argument("--l3-workers", default=None,
                    help="comma-separated worker counts for L3DataLoader (default: 0,WORKERS)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wds-shards", type=int, default=8, help="tar shards of the WebDataset")
    ap.add_argument("--l3-bin", type=Path, help="the `l3` CLI, for the per-stage split "
                    "(`l3 bench-loader`); without it the split is left out")
    ap.add_argument("--only", default=None, help="comma-separated subset of: torchvision, "
                    "streaming, webdataset, l3-compact, l3-fast")
    args = ap.parse_args()
    if args.epochs < 1 or args.rounds < 1 or args.batch_size < 1 or args.workers < 0:
        ap.error("--epochs, --rounds and --batch-size must be at least 1, --workers at least 0")
    if args.wds_shards < 1:
        ap.error("--wds-shards must be at least 1")
    spec = args.l3_workers if args.l3_workers is not None else f"0,{args.workers}"
    try:
        args.l3_workers = sorted({int(w) for w in spec.split(",") if w.strip()})
    except ValueError:
        ap.error(f"--l3-workers: not a list of integers: {spec!r}")
    if not args.l3_workers or min(args.l3_workers) < 0:
        ap.error("--l3-workers needs counts of at least 0")
    kinds = ("torchvision", "streaming", "webdataset", "l3-compact", "l3-fast")
    args.only = kinds if args.only is None else tuple(k.strip() for k in args.only.split(","))
    unknown = set(args.only) - set(kinds)
    if unknown:
        ap.error(f"--only: unknown {sorted(unknown)} (known: {', '.join(kinds)})")
    if "torchvision" not in args.only:
        ap.error("--only must include torchvision (the ratios are to it)")
    args.out = args.out or args.work / "report.md"
    return args


def log(msg: str) -> None:
    print(f"[peer-loaders {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- machine and versions


def machine() -> Dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {"python": platform.python_version()}
    for name in ("torch", "torchvision", "streaming", "webdataset", "PIL", "numpy", "l3"):
        try:
            versions[name] = getattr(__import__(name), "__version__", "?")
        except ImportError:
            versions[name] = None
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "commit": commit or None,
        "load_at_start": os.getloadavg(),
        "versions": versions,
    }


# --- corpus and conversions


def build_corpus(args: argparse.Namespace) -> Path:
    if args.corpus is not None:
        if not args.corpus.is_dir():
            sys.exit(f"--corpus {args.corpus} is not a folder")
        return args.corpus
    corpus, done = args.work / "corpus", args.work / "corpus.done"
    if corpus.is_dir() and done.exists():
        log(f"reusing the corpus in {corpus}")
        return corpus
    done.unlink(missing_ok=True)
    log(f"building the corpus in {corpus}")
    subprocess.run([sys.executable, str(REPO / "scripts/make-loader-corpus.py"), str(corpus),
                    "--images", str(args.images), "--force"], check=True)
    done.write_text("complete\n")
    return corpus


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def convert(args: argparse.Namespace, samples: List[Tuple[str, int]], corpus: Path
            ) -> Dict[str, Dict[str, Any]]:
    """Writes each loader's form of the corpus under WORK/data (replacing any earlier one);
    returns per loader its path, bytes on disk and conversion seconds."""
    data = args.work / "data"
    data.mkdir(parents=True, exist_ok=True)
    out: Dict[str, Dict[str, Any]] = {
        "torchvision": {"path": str(corpus), "bytes": sum(os.path.getsize(p) for p, _ in samples),
                        "seconds": 0.0},
    }
    if "streaming" in args.only:
        from streaming import MDSWriter

        path = data / "mds"
        shutil.rmtree(path, ignore_errors=True)
        t = time.perf_counter()
        with MDSWriter(out=str(path), columns={"png": "bytes", "label": "int"}) as w:
            for p, label in samples:
                w.write({"png": Path(p).read_bytes(), "label": label})
        out["streaming"] = {"path": str(path), "bytes": tree_bytes(path),
                            "seconds": time.perf_counter() - t}
    if "webdataset" in args.only:
        path = data / "wds"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir()
        t = time.perf_counter()
        per = math.ceil(len(samples) / args.wds_shards)
        shards = []
        for k in range(0, len(samples), per):
            name = path / f"shard-{k // per:04d}.tar"
            with tarfile.open(name, "w") as tar:
                for i in range(k, min(k + per, len(samples))):
                    for ext, payload in (("png", Path(samples[i][0]).read_bytes()),
                                         ("cls", str(samples[i][1]).encode())):
                        info = tarfile.TarInfo(f"{i:06d}.{ext}")
                        info.size = len(payload)
                        tar.addfile(info, io.BytesIO(payload))
            shards.append(str(name))
        out["webdataset"] = {"path": str(path), "bytes": tree_bytes(path),
                             "seconds": time.perf_counter() - t, "shards": shards}
    for profile in ("compact", "fast"):
        if f"l3-{profile}" not in args.only:
            continue
        import l3

        path = data / f"l3-{profile}"
        shutil.rmtree(path, ignore_errors=True)
        t = time.perf_counter()
        ds = l3.pack(corpus, path, profile=profile)
        if len(ds) != len(samples):
            sys.exit(f"l3.pack wrote {len(ds)} records for {len(samples)} images")
        out[f"l3-{profile}"] = {"path": str(path), "bytes": tree_bytes(path),
                                "seconds": time.perf_counter() - t}
    return out


# --- the loaders (module level, so DataLoader workers can pickle them)


def transform():
    import torchvision.transforms as T

    return T.Compose([
        T.RandomResizedCrop(SIZE, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(MEAN, STD),
    ])


def pil_rgb(data: bytes):
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return im.convert("RGB")


def make_folder_dataset(root: str):
    from torchvision.datasets import ImageFolder

    class IndexedImageFolder(ImageFolder):
        """ImageFolder that also returns each sample's index (for the epoch check)."""

        def __getitem__(self, i: int):
            image, label = super().__getitem__(i)
            return image, label, i

    return IndexedImageFolder(root, transform=transform())


def make_mds_dataset(local: str, batch_size: int, seed: int):
    from streaming import StreamingDataset

    class PngMDS(StreamingDataset):
        """MDS samples decoded by Pillow from the `png` column, then augmented."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.tf = transform()

        def __getitem__(self, i: int):
            s = super().__getitem__(i)
            return self.tf(pil_rgb(s["png"])), s["label"], i

    return PngMDS(local=local, shuffle=True, shuffle_seed=seed, batch_size=batch_size)


class Config:
    """One row of the table: a loader with its settings; `epoch(e)` is the iterable of epoch
    e's batches and `unpack(batch)` its (images, sample indices)."""

    def __init__(self, name: str, kind: str, workers: int,
                 build: Callable[[], Tuple[Callable[[int], Any], Callable[[Any], Tuple[Any, Any]]]]):
        self.name, self.kind, self.workers, self.build = name, kind, workers, build
        self.epoch: Optional[Callable[[int], Any]] = None
        self.unpack: Optional[Callable[[Any], Tuple[Any, Any]]] = None
        self.error: Optional[str] = None
        self.new_loader_first_batch: Optional[float] = None
        self.warmup: Optional[Dict[str, Any]] = None
        self.values: Optional[Dict[str, float]] = None
        self.rounds: List[List[Dict[str, Any]]] = []
        # Called after the warm-up and after each round's epochs: stops what the loader keeps
        # between epochs (l3's loader prefetches into the next epoch), so it neither works
        # while other loaders are timed nor starts a round with batches made in the pause.
        self.close: Callable[[], None] = lambda: None


def configs(args: argparse.Namespace, conv: Dict[str, Dict[str, Any]]) -> List[Config]:
    import torch
    from torch.utils.data import DataLoader

    B, W, seed = args.batch_size, args.workers, args.seed
    out: List[Config] = []

    def torchvision_build():
        ds = make_folder_dataset(conv["torchvision"]["path"])
        gen = torch.Generator().manual_seed(seed)
        dl = DataLoader(ds, batch_size=B, shuffle=True, num_workers=W, generator=gen)
        return (lambda e: dl), (lambda b: (b[0], b[2]))

    out.append(Config(f"torchvision ImageFolder + PIL (PNG), {W} workers", "torchvision", W,
                      torchvision_build))

    if "streaming" in conv:
        def streaming_build():
            ds = make_mds_dataset(conv["streaming"]["path"], B, seed)
            dl = DataLoader(ds, batch_size=B, num_workers=W)
            return (lambda e: dl), (lambda b: (b[0], b[2]))

        out.append(Config(f"MosaicML Streaming, MDS with a png column, {W} workers",
                          "streaming", W, streaming_build))

    if "webdataset" in conv:
        def webdataset_build():
            import webdataset as wds

            urls = conv["webdataset"]["shards"]
            ds = (wds.WebDataset(urls, shardshuffle=len(urls), seed=seed,
                                 nodesplitter=wds.single_node_only, empty_check=False)
                  .shuffle(1000)
                  .decode("pil")
                  .to_tuple("png", "cls", "__key__")
                  .map_tuple(transform(), int, int)
                  .batched(B, partial=True))
            dl = wds.WebLoader(ds, batch_size=None, num_workers=W)
            return (lambda e: dl), (lambda b: (b[0], b[2]))

        out.append(Config(f"WebDataset, {len(conv['webdataset']['shards'])} tar shards of PNG, "
                          f"{W} workers", "webdataset", W, webdataset_build))

    for profile in ("compact", "fast"):
        kind = f"l3-{profile}"
        if kind not in conv:
            continue
        for lw in args.l3_workers:
            def l3_build(path=conv[kind]["path"], lw=lw):
                from l3.torch import L3DataLoader, L3IterableDataset

                ds = L3IterableDataset(path, batch_size=B, seed=seed)
                dl = L3DataLoader(ds, num_workers=lw)

                def epoch(e: int):
                    dl.set_epoch(e)
                    return dl

                epoch.close = dl.close  # type: ignore[attr-defined]
                return epoch, (lambda b: (b["images"], b["samples"]))

            label = "the `l3.pack` default" if profile == "compact" else "`profile=\"fast\"`"
            out.append(Config(f"l3 {profile} ({label}), `L3DataLoader`, {lw} workers", kind, lw,
                              l3_build))
        if profile == "compact" and W > 0:
            # The same dataset in a plain DataLoader's worker processes (each runs its own
            # loader, started per epoch, batches copied through shared memory): the path
            # `L3DataLoader` avoids, shown for comparison.
            def l3_processes(path=conv[kind]["path"]):
                import torch.utils.data
                from l3.torch import L3IterableDataset

                ds = L3IterableDataset(path, batch_size=B, seed=seed)
                dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=W)

                def epoch(e: int):
                    ds.set_epoch(e)
                    return dl

                return epoch, (lambda b: (b["images"], b["samples"]))

            out.append(Config(f"l3 compact, plain `DataLoader`, {W} worker processes", kind, W,
                              l3_processes))
    return out


# --- measuring


def run_epoch(cfg: Config, e: int, n_samples: int, batch_size: int, t_start: Optional[float] = None,
              stats: bool = False) -> Dict[str, Any]:
    """One epoch of `cfg`: wall time, first batch, time the loop waited, and the check that
    every sample was seen exactly once. `t_start`: the clock's start (default: now). `stats`:
    also the mean and standard deviation of every value of the epoch's batches (a check that
    the loaders' augmentations agree; untimed epochs only)."""
    import numpy as np
    import torch

    t0 = time.perf_counter() if t_start is None else t_start
    first = None
    images = 0
    batches = 0
    waited = 0.0
    touched = 0.0
    seen: List[Any] = []
    sums = [0.0, 0.0, 0]
    t_wait = time.perf_counter()
    for batch in cfg.epoch(e):
        now = time.perf_counter()
        waited += now - t_wait
        if first is None:
            first = now - t0
        x, idx = cfg.unpack(batch)
        if not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or x.dim() != 4 \
                or tuple(x.shape[1:]) != (3, SIZE, SIZE) or x.shape[0] > batch_size:
            raise RuntimeError(f"unexpected batch: {type(x).__name__} "
                               f"{getattr(x, 'dtype', None)} {tuple(getattr(x, 'shape', ()))}")
        x = x.contiguous()
        touched += float(x[x.shape[0] - 1, 2, SIZE - 1, SIZE - 1])
        if stats:
            x64 = x.double()
            sums[0] += float(x64.sum())
            sums[1] += float((x64 * x64).sum())
            sums[2] += x.numel()
        images += x.shape[0]
        batches += 1
        seen.append(np.asarray(idx, dtype=np.int64).reshape(-1))
        t_wait = time.perf_counter()
    wall = time.perf_counter() - t0
    ids = np.sort(np.concatenate(seen)) if seen else np.zeros(0, np.int64)
    exact = ids.size == n_samples and bool(np.array_equal(ids, np.arange(n_samples)))
    distinct = int(np.unique(ids).size)
    values = None
    if stats and sums[2]:
        mean = sums[0] / sums[2]
        values = {"mean": mean, "std": math.sqrt(max(0.0, sums[1] / sums[2] - mean * mean))}
    return {
        "epoch": e, "images": images, "batches": batches, "seconds": wall,
        "first_batch_s": first, "waited_s": waited, "touched": touched,
        "each_sample_once": exact, "distinct": distinct, "values": values,
    }


def measure(args: argparse.Namespace, cfgs: List[Config], n: int,
            conv: Dict[str, Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """Runs the warm-up and the timed rounds of every loader, and in each round `l3
    bench-loader` on each l3 dataset (with --l3-bin); returns those runs per dataset."""
    stage_runs: Dict[str, List[Dict[str, Any]]] = {}
    # Warm-up: create each loader (timed to its first batch) and run one epoch.
    for cfg in cfgs:
        log(f"warm-up: {cfg.name}")
        try:
            t0 = time.perf_counter()
            cfg.epoch, cfg.unpack = cfg.build()
            cfg.close = getattr(cfg.epoch, "close", cfg.close)
            r = run_epoch(cfg, 0, n, args.batch_size, t_start=t0, stats=True)
            cfg.new_loader_first_batch = r["first_batch_s"]
            cfg.values = r.pop("values")
            cfg.warmup = r
            cfg.close()
        except Exception as exc:  # one failing peer must not lose the others' figures
            cfg.error = f"{type(exc).__name__}: {exc}"
            log(f"FAILED: {cfg.name}: {cfg.error}")
    # Timed epochs, every loader in turn for each round.
    for rnd in range(args.rounds):
        for cfg in cfgs:
            if cfg.error:
                continue
            log(f"round {rnd + 1}/{args.rounds}: {cfg.name}")
            try:
                epochs = []
                for k in range(args.epochs):
                    r = run_epoch(cfg, 1 + rnd * args.epochs + k, n, args.batch_size)
                    r.pop("values")
                    epochs.append(r)
                cfg.rounds.append(epochs)
                cfg.close()
            except Exception as exc:
                cfg.error = f"{type(exc).__name__}: {exc}"
                log(f"FAILED: {cfg.name}: {cfg.error}")
        for kind in ("l3-compact", "l3-fast"):
            if kind in conv and args.l3_bin is not None:
                log(f"round {rnd + 1}/{args.rounds}: l3 bench-loader {conv[kind]['path']}")
                stage_runs.setdefault(kind, []).append(bench_loader(args, conv[kind]["path"]))
    return stage_runs


# --- l3 bench-loader: where the time goes

STAGES = {
    "read_ms": r"read ([\d.]+) ms",
    "decode_ms": r"decode ([\d.]+) ms",
    "augment_ms": r"augment ([\d.]+) ms",
    "hand_off_ms": r"hand-off ([\d.]+) ms",
    "consumer_waited_ms": r"consumer waited ([\d.]+) ms",
    "images_per_s": r"= ([\d.]+) images/s",
}


def bench_loader(args: argparse.Namespace, path: str) -> Dict[str, Any]:
    """One run of `l3 bench-loader` on the dataset at `path` (a warm-up epoch, then --epochs):
    its per-image figures (mean over the timed epochs) and its raw lines, or its error."""
    cmd = [str(args.l3_bin), "bench-loader", path, "--epochs", str(1 + args.epochs),
           "--batch-size", str(args.batch_size), "--seed", str(args.seed)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        return {"command": cmd, "error": f"{type(exc).__name__}: {exc}"}
    if p.returncode != 0:
        return {"command": cmd, "error": p.stderr.strip()[-2000:] or f"exit {p.returncode}"}
    lines = p.stdout.splitlines()
    timed = [ln for ln in lines if re.match(r"epoch \d+:", ln) and not ln.startswith("epoch 0:")]
    figures = {}
    for key, pat in STAGES.items():
        vals = [float(m.group(1)) for m in (re.search(pat, ln) for ln in timed) if m]
        if vals:
            figures[key] = statistics.fmean(vals)
    first = [re.search(r"first batch[^\d]*([\d.]+) (ms|s)\b", ln) for ln in lines]
    first = [float(m.group(1)) * (1 if m.group(2) == "ms" else 1000) for m in first if m]
    if first:
        figures["first_batch_ms"] = first[0]
    return {"command": cmd, "figures": figures, "lines": lines}


def stage_summary(runs: Dict[str, List[Dict[str, Any]]]) -> Dict[str, Any]:
    """Per l3 dataset: each figure's median over the rounds' `bench_loader` runs, and the
    runs; the first error instead when a run failed."""
    out: Dict[str, Any] = {}
    for kind, rs in runs.items():
        failed = [r for r in rs if "error" in r]
        if failed:
            out[kind] = {"error": failed[0]["error"], "runs": rs}
            continue
        keys = {k for r in rs for k in r["figures"]}
        figures = {k: statistics.median(r["figures"][k] for r in rs if k in r["figures"])
                   for k in sorted(keys)}
        out[kind] = {"figures": figures, "runs": rs}
    return out


# --- report


def summarise(cfgs: List[Config], n: int) -> List[Dict[str, Any]]:
    tv = next(c for c in cfgs if c.kind == "torchvision")
    tv_rates = [sum(e["images"] for e in r) / sum(e["seconds"] for e in r) for r in tv.rounds]
    rows = []
    for cfg in cfgs:
        row: Dict[str, Any] = {"loader": cfg.name, "kind": cfg.kind, "workers": cfg.workers,
                               "error": cfg.error}
        if cfg.rounds:
            rates = [sum(e["images"] for e in r) / sum(e["seconds"] for e in r)
                     for r in cfg.rounds]
            eps = [e for r in cfg.rounds for e in r]
            row["images_per_s"] = statistics.median(rates)
            row["images_per_s_range"] = (min(rates), max(rates))
            if tv_rates:
                ratios = [a / b for a, b in zip(rates, tv_rates)]
                row["vs_torchvision"] = statistics.median(ratios)
            row["first_batch_per_epoch_ms"] = 1000 * statistics.median(
                e["first_batch_s"] for e in eps)
            row["waited_share"] = sum(e["waited_s"] for e in eps) / sum(e["seconds"] for e in eps)
            checks = [cfg.warmup] + eps
            row["epochs_checked"] = len(checks)
            row["each_sample_once"] = all(e["each_sample_once"] for e in checks)
            row["epoch_check"] = "ok" if row["each_sample_once"] else "; ".join(
                f"epoch {e['epoch']}: {e['images']} images, {e['distinct']} distinct of {n}"
                for e in checks if not e["each_sample_once"])
        if cfg.new_loader_first_batch is not None:
            row["first_batch_new_loader_ms"] = 1000 * cfg.new_loader_first_batch
        row["values"] = cfg.values
        rows.append(row)
    return rows


def markdown(args: argparse.Namespace, info: Dict[str, Any], n: int, rows: List[Dict[str, Any]],
             conv: Dict[str, Dict[str, Any]], stages: Dict[str, Any]) -> str:
    v = info["versions"]
    load = " / ".join(f"{x:.2f}" for x in info["load_at_start"])
    load_end = " / ".join(f"{x:.2f}" for x in info["load_at_end"])
    out = [
        f"Loaders side by side: {n} images, {args.batch_size} per batch, RandomResizedCrop({SIZE},"
        " scale (0.08, 1), ratio (3/4, 4/3)) + flip + ImageNet normalisation to float32 NCHW;"
        f" one warm-up epoch, then {args.epochs} timed epoch(s) x {args.rounds} round(s).",
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores; {info['date']}; commit "
        f"{info['commit']}; 1/5/15-min load {load} at start, {load_end} at end.",
        f"Versions: Python {v['python']}, torch {v['torch']}, torchvision {v['torchvision']}, "
        f"mosaicml-streaming {v['streaming']}, webdataset {v['webdataset']}, Pillow {v['PIL']}, "
        f"NumPy {v['numpy']}, l3 {v['l3']}.",
        "",
        "| loader | images/s | vs torchvision | first batch, new loader (ms) | first batch per "
        "epoch (ms) | loop waiting | values: mean / std | epochs |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r.get("error") or r.get("images_per_s") is None:
            out.append(f"| {r['loader']} | failed: {r['error']} | | | | | | |")
            continue
        values = "{mean:.3f} / {std:.3f}".format(**r["values"]) if r["values"] else "-"
        rate = f"{r['images_per_s']:.1f}"
        lo, hi = r["images_per_s_range"]
        if args.rounds > 1:
            rate += f" ({lo:.1f}-{hi:.1f})"
        ratio = f"{r['vs_torchvision']:.2f}x" if "vs_torchvision" in r else "-"
        check = "each sample once" if r["each_sample_once"] else r["epoch_check"]
        out.append(
            f"| {r['loader']} | {rate} | {ratio} | {r['first_batch_new_loader_ms']:.0f} | "
            f"{r['first_batch_per_epoch_ms']:.0f} | {100 * r['waited_share']:.0f} % | "
            f"{values} | {r['epochs_checked']}, {check} |")
    out += [
        "",
        "images/s: images of the timed epochs over their wall time, iterator creation to the "
        "last batch (workers' start and shutdown included); with rounds, the median and range "
        "of the rounds, and the median of each round's ratio to torchvision. Loop waiting: "
        "share of the epochs' wall time the loop spent waiting for the next batch. Values: mean "
        "and standard deviation of every value of the warm-up epoch's batches (the same "
        "augmentation gives about the same figures). Epochs: how many were checked (warm-up "
        "included) and whether each saw every sample exactly once.",
        "",
        "| data | bytes on disk | conversion (s) |",
        "|---|---:|---:|",
    ]
    for kind, c in conv.items():
        out.append(f"| {kind} | {c['bytes']:,} | {c['seconds']:.1f} |")
    if stages:
        out += [
            "",
            f"Where l3's time goes (`l3 bench-loader`, {args.epochs} epoch(s) after a warm-up, "
            "in process, no Python, once per round after the round's loaders, median of the "
            "rounds; per image: read and hand-off are wall time, decode and augment CPU time "
            "summed over the loader's threads):",
            "",
            "| l3 | images/s | read (ms) | decode (ms) | augment (ms) | hand-off (ms) | "
            "consumer waited (ms) | first batch (ms) | wall per image (ms) | "
            + " | ".join(f"`L3DataLoader`, {w} workers (ms)" for w in args.l3_workers) + " |",
            "|---|" + "---:|" * (8 + len(args.l3_workers)),
        ]
        for kind, s in stages.items():
            if "error" in s:
                last = s["error"].splitlines()[-1] if s["error"] else "?"
                out.append(f"| {kind} | failed: {last} |" + " |" * (7 + len(args.l3_workers)))
                continue
            f = s["figures"]

            def cell(key: str, fmt: str = "{:.2f}") -> str:
                return fmt.format(f[key]) if key in f else "-"

            python = []
            for w in args.l3_workers:
                r = next((r for r in rows if r["kind"] == kind and r["workers"] == w), None)
                rate = r.get("images_per_s") if r else None
                python.append(f"{1000 / rate:.2f}" if rate else "-")
            wall = f"{1000 / f['images_per_s']:.2f}" if f.get("images_per_s") else "-"
            out.append(f"| {kind} | {cell('images_per_s', '{:.1f}')} | {cell('read_ms')} | "
                       f"{cell('decode_ms')} | {cell('augment_ms')} | {cell('hand_off_ms')} | "
                       f"{cell('consumer_waited_ms')} | {cell('first_batch_ms', '{:.0f}')} | "
                       f"{wall} | " + " | ".join(python) + " |")
        out += [
            "",
            "Wall per image: `l3 bench-loader`'s epoch wall time per image, against the same "
            "through `L3DataLoader` (the table above): the difference is the Python and torch "
            "hand-off, and with workers their start per epoch and the transfer between "
            "processes.",
        ]
        if not any("first_batch_ms" in s.get("figures", {}) for s in stages.values()) \
                and any("figures" in s for s in stages.values()):
            out += ["", "(This `l3 bench-loader` prints no first-batch figure.)"]
    out += ["", "Reproduce: `scripts/bench-peer-loaders.sh " + " ".join(reproduce_args(args)) + "`"]
    return "\n".join(out) + "\n"


def reproduce_args(args: argparse.Namespace) -> List[str]:
    out = []
    if args.corpus is not None:
        out += ["--corpus", str(args.corpus)]
    out += ["--epochs", str(args.epochs), "--workers", str(args.workers),
            "--batch-size", str(args.batch_size)]
    if args.rounds != 1:
        out += ["--rounds", str(args.rounds)]
    if args.l3_workers != sorted({0, args.workers}):
        out += ["--l3-workers", ",".join(map(str, args.l3_workers))]
    return out


def main() -> int:
    args = parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    info = machine()
    corpus = build_corpus(args)
    from torchvision.datasets import ImageFolder

    samples = ImageFolder(str(corpus)).samples
    n = len(samples)
    if n == 0:
        sys.exit(f"no images in {corpus}")
    log(f"{n} images in {corpus}; converting for each loader")
    conv = convert(args, samples, corpus)
    if "streaming" in conv:
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
    cfgs = configs(args, conv)
    stages = stage_summary(measure(args, cfgs, n, conv))
    info["load_at_end"] = os.getloadavg()
    rows = summarise(cfgs, n)
    md = markdown(args, info, n, rows, conv, stages)
    print(md)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(md)
    report = {
        "machine": info,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "images": n,
        "conversions": conv,
        "rows": rows,
        "epochs": {c.name: {"warmup": c.warmup, "rounds": c.rounds} for c in cfgs},
        "stages": stages,
    }
    json_path = args.out.with_suffix(".json")
    json_path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    log(f"wrote {args.out} and {json_path}")
    ok = all(r.get("error") is None and r.get("each_sample_once") for r in rows) and not any(
        "error" in s for s in stages.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
