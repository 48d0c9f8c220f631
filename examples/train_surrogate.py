"""Trains a small CNN to predict the next step of a shallow-water simulation from l3 tensor
records, once per storage mode, and reports what the error bound costs in accuracy.

    pip install .                    # the l3 package, from the repository root
    pip install torch h5py
    python examples/train_surrogate.py [--sim-steps 600] [--size 128] [--train-steps 400]

1. `scripts/make-simulation.py` runs a rotating shallow-water model (h, u, v float32 on a
   periodic square) into an HDF5 file; ``--sim FILE`` takes an existing one instead.
2. `l3.pack_source` packs it into tensor records: ``input`` is (h, u, v) at step t and
   ``target`` (h, u, v) at step t + 1 (``offsets={"target": 1}``). The last
   ``--val-fraction`` of the steps is the validation set, always lossless; the other steps
   are the training set, packed three times: lossless, relative bound 1e-3 and 1e-2.
3. Each training set trains the same CNN from the same initial weights, on the same batch
   order (the loader's planned shuffle from one seed) of random ``--crop`` windows (the same
   window on input and target). The fields are periodic, so any window is a valid sample;
   flips and quarter turns are not used, because mirroring or turning u and v as plain
   arrays does not mirror or turn the velocity (and the Coriolis term has a handedness).
   Inputs and targets are normalised by the lossless training set's statistics; the model
   predicts the change ``target - input``.
4. Each run reports its validation loss: the mean squared error over whole fields of every
   validation record, in normalised units, next to persistence (predicting no change) and
   the training set's bytes on disk.

``--device gpu`` has the loader decode and crop on the GPU (wgpu) instead of its CPU threads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

import l3
from l3.torch import L3DataLoader, L3IterableDataset

VARIABLES = ["h", "u", "v"]
MODES = {"lossless": "lossless", "rel 1e-3": {"relative": 1e-3}, "rel 1e-2": {"relative": 1e-2}}


class Surrogate(nn.Module):
    """Four 3x3 convolutions with circular padding (the domain is periodic) predicting the
    change over one step, channels (h, u, v) in and out."""

    def __init__(self, width: int = 32):
        super().__init__()
        conv = lambda a, b: nn.Conv2d(a, b, 3, padding=1, padding_mode="circular")  # noqa: E731
        self.net = nn.Sequential(
            conv(3, width), nn.GELU(), conv(width, width), nn.GELU(),
            conv(width, width), nn.GELU(), conv(width, 3),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


def simulate(out: Path, steps: int, size: int) -> Path:
    script = Path(__file__).resolve().parent.parent / "scripts" / "make-simulation.py"
    cmd = [sys.executable, str(script), "--out", str(out), "--steps", str(steps)]
    subprocess.run(cmd + ["--size", str(size), "--formats", "h5"], check=True)
    return out / "sim.h5"


def pack(sim: Path, work: Path, val_fraction: float) -> dict:
    """Packs the training set in every mode and the validation set (lossless); returns
    their folders."""
    import h5py

    with h5py.File(sim, "r") as f:
        steps = f[VARIABLES[0]].shape[0]
    split = int(round(steps * (1 - val_fraction)))
    if not 2 <= split <= steps - 2:
        raise SystemExit(f"{steps} steps are too few to split at {val_fraction}")
    arrays = {"input": VARIABLES, "target": VARIABLES}
    common = dict(offsets={"target": 1}, samples_per_shard=128)
    out = {}
    for name, mode in MODES.items():
        folder = work / ("train-" + name.replace(" ", "-"))
        # Training records pair steps 0..split-1 with the next; the last target is step split.
        l3.pack_source(sim, folder, arrays, modes=mode, stop=split + 1, **common)
        out[name] = folder
    out["val"] = work / "val"
    l3.pack_source(sim, out["val"], arrays, modes="lossless", start=split, **common)
    return out


def stats_of(folder: Path) -> tuple:
    """Per-channel mean and std of (h, u, v) as (1, 3, 1, 1) tensors, over about 64 of the
    records' inputs (the manifest's statistics are per array, over all three channels)."""
    ds = l3.open_dataset(folder)
    acc = np.zeros((3, 3))
    for i in range(0, len(ds), max(1, len(ds) // 64)):
        x = ds[i]["input"].astype(np.float64)
        acc += np.stack([np.ones(3) * x[0].size, x.sum((1, 2)), (x * x).sum((1, 2))], 1).T
    count, total, squares = acc
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean * mean, 1e-30))
    shape = (1, 3, 1, 1)
    return (
        torch.tensor(mean, dtype=torch.float32).reshape(shape),
        torch.tensor(std, dtype=torch.float32).reshape(shape),
    )


def loader_for(folder: Path, args: argparse.Namespace) -> L3DataLoader:
    ds = L3IterableDataset(
        str(folder),
        batch_size=args.batch_size,
        seed=args.seed,
        crop=(args.crop, args.crop),
        normalize=False,
        device=args.device,
    )
    return L3DataLoader(ds, num_workers=args.workers)


def train(folder: Path, stats: tuple, args: argparse.Namespace) -> tuple:
    """Trains from the fixed initial weights for ``args.train_steps`` batches; returns the
    model and the seconds it took."""
    torch.manual_seed(args.seed)
    model = Surrogate()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.train_steps)
    mean, std = stats
    loader = loader_for(folder, args)
    step, epoch, t0 = 0, 0, time.perf_counter()
    while step < args.train_steps:
        loader.set_epoch(epoch)
        for batch in loader:
            x = (torch.as_tensor(batch["input"]) - mean) / std
            y = (torch.as_tensor(batch["target"]) - mean) / std
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 100 == 0:
                print(f"  step {step}: train loss {loss.item():.3e}", flush=True)
            if step == args.train_steps:
                break
        epoch += 1
    loader.close()
    return model, time.perf_counter() - t0


@torch.no_grad()
def validate(model: nn.Module, val: Path, stats: tuple) -> tuple:
    """Mean squared error of the model and of persistence over every validation record."""
    mean, std = stats
    ds = l3.open_dataset(val)
    model_se = persist_se = 0.0
    count = 0
    for i in range(len(ds)):
        rec = ds[i]
        x = (torch.from_numpy(rec["input"])[None] - mean) / std
        y = (torch.from_numpy(rec["target"])[None] - mean) / std
        model_se += float(((model(x) - y) ** 2).sum())
        persist_se += float(((x - y) ** 2).sum())
        count += y.numel()
    return model_se / count, persist_se / count


def bytes_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix == ".l3s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", type=Path, help="an HDF5 file of make-simulation.py (default: run it)")
    ap.add_argument("--sim-steps", type=int, default=600, help="steps to simulate (600)")
    ap.add_argument("--size", type=int, default=128, help="grid cells per side (128)")
    ap.add_argument("--val-fraction", type=float, default=0.2, help="last steps kept out (0.2)")
    ap.add_argument("--train-steps", type=int, default=400, help="batches per run (400)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--crop", type=int, default=64, help="window side (64)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--workers", type=int, default=2, help="loader threads (2)")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, help="folder for the files (default: a temporary one)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    # The loader decodes on its own threads; torch gets the other cores.
    torch.set_num_threads(max(1, (os.cpu_count() or 2) - args.workers))

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        sim = args.sim or simulate(work / "sim", args.sim_steps, args.size)
        folders = pack(sim, work, args.val_fraction)
        stats = stats_of(folders["lossless"])
        raw = len(l3.open_dataset(folders["lossless"])) * 2 * 3 * 4
        rows = []
        for name in MODES:
            print(f"{name}: training on {folders[name]}", flush=True)
            model, seconds = train(folders[name], stats, args)
            loss, persistence = validate(model, folders["val"], stats)
            rows.append(
                dict(
                    mode=name,
                    train_bytes=bytes_of(folders[name]),
                    val_loss=loss,
                    persistence=persistence,
                    train_seconds=seconds,
                )
            )
        ds = l3.open_dataset(folders["val"])
        side = ds[0]["input"].shape[-1]
        raw *= side * side
        base = rows[0]["val_loss"]
        print(
            f"\n{args.train_steps} steps of batch {args.batch_size}, {args.crop}x{args.crop}"
            f" crops, device {args.device}; validation: {len(ds)} whole {side}x{side} fields\n"
        )
        print("| training records | size on disk | ratio | val MSE | vs lossless | persistence |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in rows:
            print(
                f"| {r['mode']} | {r['train_bytes'] / 1e6:.1f} MB | {raw / r['train_bytes']:.1f}x"
                f" | {r['val_loss']:.4e} | {r['val_loss'] / base:.3f} | {r['persistence']:.4e} |"
            )
        if args.json:
            args.json.write_text(json.dumps(dict(args=vars(args), rows=rows), default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
