"""Training memory: the surrogate CNN of `examples/train_surrogate.py` (made 12 convolutions deep
by default, `--depth 4` for the original) trained on the CPU with
the activations saved for backward kept as they are, compressed by l3
(`l3.torch.compress_activations` at relative bounds 1e-3, 1e-2 and "auto"), offloaded
(`torch.autograd.graph.save_on_cpu`) and recomputed (`torch.utils.checkpoint`).

    pip install .                    # the l3 package, from the repository root
    pip install torch h5py
    python examples/train_memory.py [--train-steps 300] [--out report.md]

Every arm trains the same model from the same initial weights on the same batches (random
crops of a shallow-water simulation made by `scripts/make-simulation.py`, the order from one
seed), each in a process of its own (so its peak RSS is its own), and reports: the peak bytes
of saved activations (counted exactly in the saved-tensor hooks, parameters excluded; the
offloading arm's hooks are torch's, so it is not counted there), the process's peak RSS, the
median step time after 10 warm-up steps, and the final validation loss (mean squared error
over whole validation fields, normalised units) with its change against the arm that keeps
activations as they are ("none, other init": the same from other initial weights, for the
spread of the final loss that has nothing to do with activations). The l3 arms also report the gradient's relative error (the norm of
the difference over the norm) against the gradient with exact activations, on the same weights
and batch, at the first, middle and last steps.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

import l3.torch as l3t

HERE = Path(__file__).resolve().parent
ARMS = ("none", "l3 1e-3", "l3 1e-2", "l3 auto", "l3 auto unbatched", "save_on_cpu", "checkpoint",
        "none, other init")


class Deep(nn.Module):
    """The surrogate's layers (3x3 convolutions with circular padding, GELU between) with
    ``depth`` convolutions instead of 4, predicting the change over one step."""

    def __init__(self, width: int, depth: int):
        super().__init__()
        conv = lambda a, b: nn.Conv2d(a, b, 3, padding=1, padding_mode="circular")  # noqa: E731
        layers = [conv(3, width)]
        for _ in range(depth - 2):
            layers += [nn.GELU(), conv(width, width)]
        layers += [nn.GELU(), conv(width, 3)]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


def surrogate_module():
    spec = importlib.util.spec_from_file_location("train_surrogate", HERE / "train_surrogate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def load(sim: Path, val_fraction: float):
    """(train fields, val fields): (steps, 3, S, S) float32 arrays of h, u, v."""
    import h5py

    with h5py.File(sim, "r") as f:
        fields = np.stack([f[v][...] for v in ("h", "u", "v")], 1).astype(np.float32)
    split = int(round(len(fields) * (1 - val_fraction)))
    return fields[:split], fields[split:]


def batches(train: np.ndarray, args: argparse.Namespace):
    """The run's batches (input, target) of random periodic crops, the same for every arm."""
    rng = np.random.default_rng(args.seed)
    steps, _, size, _ = train.shape
    for _ in range(args.train_steps):
        t = rng.integers(0, steps - 1, args.batch_size)
        oy, ox = rng.integers(0, size, (2, args.batch_size))
        rows = (oy[:, None] + np.arange(args.crop)) % size
        cols = (ox[:, None] + np.arange(args.crop)) % size
        pick = lambda a: a[np.arange(args.batch_size)[:, None, None, None],  # noqa: E731
                           np.arange(3)[None, :, None, None],
                           rows[:, None, :, None], cols[:, None, None, :]]
        yield torch.from_numpy(pick(train[t])), torch.from_numpy(pick(train[t + 1]))


def child(arm: str, args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    train, val = load(args.sim, args.val_fraction)
    mean = torch.from_numpy(train.mean((0, 2, 3), dtype=np.float64).astype(np.float32))
    std = torch.from_numpy(train.std((0, 2, 3), dtype=np.float64).astype(np.float32))
    mean, std = mean.reshape(1, 3, 1, 1), std.reshape(1, 3, 1, 1)
    # "none, other init": the baseline from other initial weights (same batches), for the
    # spread of the final loss that has nothing to do with the activations.
    torch.manual_seed(args.seed + (arm == "none, other init"))
    if args.depth == 4:
        model = surrogate_module().Surrogate(args.width)
    else:
        model = Deep(args.width, args.depth)
    dev = torch.device(args.device)
    model.to(dev)
    mean, std = mean.to(dev), std.to(dev)
    cuda = dev.type == "cuda"
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.train_steps)
    counting = arm in ("none", "checkpoint", "none, other init")
    ca = None
    if arm.startswith("l3 "):
        bound = arm.split()[1]
        # "unbatched": l3's GPU codes and decodes one CUDA tensor per submission (the
        # behaviour before batches), beside the default batches of 64 MiB.
        ca = l3t.compress_activations("auto" if bound == "auto" else float(bound), model=model,
                                      threads=args.threads,
                                      gpu_batch_mb=0 if arm.endswith("unbatched") else 64)
    elif counting:
        ca = l3t.compress_activations(None)
    times, grad_errors, peak_cuda = [], [], 0
    probe = {0, args.train_steps // 2, args.train_steps - 1} if arm.startswith("l3 ") else set()
    for step, (x, y) in enumerate(batches(train, args)):
        x, y = (x.to(dev) - mean) / std, (y.to(dev) - mean) / std
        exact = None
        if step in probe:
            # The gradient with activations kept exact, on the same weights and batch.
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            exact = torch.cat([p.grad.flatten() for p in model.parameters()])
        if cuda:
            # The peak of the measured steps only (the probe above keeps activations exact).
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        started = time.perf_counter()
        opt.zero_grad()
        if arm == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu():
                loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
        elif arm == "checkpoint":
            # Two segments, recomputed in backward; the counting hooks stay on through
            # backward, so the recomputed segment's saved tensors are counted too.
            # (Reentrant checkpointing computes no parameter gradients for a segment whose
            # inputs need none: the input is marked as needing one.)
            with ca:
                out = x + torch.utils.checkpoint.checkpoint_sequential(
                    model.net, 2, x.requires_grad_(), use_reentrant=True)
                loss = nn.functional.mse_loss(out, y)
                loss.backward()
        else:
            with ca:
                loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
        if exact is not None:
            got = torch.cat([p.grad.flatten() for p in model.parameters()])
            grad_errors.append(float((got - exact).norm() / exact.norm()))
        opt.step()
        sched.step()
        if cuda:
            torch.cuda.synchronize(dev)
            peak_cuda = max(peak_cuda, torch.cuda.max_memory_allocated(dev))
        times.append(time.perf_counter() - started)
    model.eval()
    se = count = 0.0
    with torch.no_grad():
        for t in range(len(val) - 1):
            x = (torch.from_numpy(val[t : t + 1]).to(dev) - mean) / std
            y = (torch.from_numpy(val[t + 1 : t + 2]).to(dev) - mean) / std
            se += float(((model(x) - y) ** 2).sum())
            count += y.numel()
    out = {
        "arm": arm,
        "val_mse": se / count,
        "step_ms": 1000 * statistics.median(times[10:] or times),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_train_loss": float(loss),
        "grad_rel_error": grad_errors,
    }
    if cuda:
        out["peak_cuda_mb"] = peak_cuda / 2**20
    if ca is not None:
        s = ca.stats.as_dict()
        out.update(peak_saved=s["peak_stored"], peak_saved_raw=s["peak_raw"],
                   ratio=s["raw_bytes"] / max(1, s["stored_bytes"]),
                   encode_s=s["encode_seconds"], decode_s=s["decode_seconds"])
        if arm == "l3 auto":
            b = sorted(ca.bounds().items())
            out["bounds"] = {k: float(f"{v:.3g}") for k, v in b}
        ca.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sim", type=Path, help="an HDF5 file of scripts/make-simulation.py")
    ap.add_argument("--sim-steps", type=int, default=300)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--crop", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--depth", type=int, default=12, help="convolutions (4: the surrogate's)")
    ap.add_argument("--train-steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--val-fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (then peak CUDA memory too)")
    ap.add_argument("--arms", default=";".join(ARMS), help="arm names, ';'-separated")
    ap.add_argument("--out", type=Path, help="markdown report (figures beside it, .json)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        if args.sim is None:
            script = HERE.parent / "scripts" / "make-simulation.py"
            subprocess.run([sys.executable, str(script), "--out", tmp, "--steps",
                            str(args.sim_steps), "--size", str(args.size), "--formats", "h5"],
                           check=True)
            args.sim = Path(tmp) / "sim.h5"
        rows = []
        for arm in args.arms.split(";"):
            cmd = [sys.executable, __file__, "--child", arm, "--sim", str(args.sim)]
            for k in ("crop", "batch_size", "width", "depth", "train_steps", "lr", "val_fraction",
                      "seed", "threads", "device"):
                cmd += ["--" + k.replace("_", "-"), str(getattr(args, k))]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    base = next((r for r in rows if r["arm"] == "none"), rows[0])
    lines = [
        f"{args.train_steps} steps, batch {args.batch_size} of {args.crop}x{args.crop} crops, "
        f"width {args.width}, depth {args.depth}, {args.device}, {args.threads} threads, torch {torch.__version__}",
        "",
        "| arm | peak saved activations MB | less than none | peak RSS MB | peak CUDA MB | "
        "step ms | val MSE | vs none | gradient error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        saved = r.get("peak_saved")
        less = f"{base['peak_saved'] / saved:.1f}x" if saved and base.get("peak_saved") else "-"
        lines.append(
            f"| {r['arm']} | {saved / 1e6:.1f} | {less} | " if saved else f"| {r['arm']} | - | - | "
        )
        cuda_mb = f"{r['peak_cuda_mb']:.0f}" if "peak_cuda_mb" in r else "-"
        lines[-1] += (f"{r['peak_rss_mb']:.0f} | {cuda_mb} | {r['step_ms']:.0f} | {r['val_mse']:.4e} | "
                      f"{100 * (r['val_mse'] / base['val_mse'] - 1):+.2f} % | ")
        g = r.get("grad_rel_error")
        lines[-1] += (" / ".join(f"{e:.1e}" for e in g) + " |") if g else "- |"
    report = "\n".join(lines)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
