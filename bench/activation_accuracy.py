#!/usr/bin/env python3
"""Gradient accuracy and saved-bytes ratio of `l3.torch.compress_activations` on standard
models (torchvision ResNet-18, ResNet-50, a small ViT), CPU.

    pip install . torchvision        # the l3 package, from the repository root
    python bench/activation_accuracy.py --model resnet18 --bounds auto,1e-2,1e-3 \
        --checkpoint none,reentrant,non-reentrant [--batch 8 --size 64] [--codec blocks]
        [--json out.json]

For each (bound, checkpointing) the model (training mode: BatchNorm uses batch statistics;
the same weights and random batch every time, cross-entropy on random labels) runs a forward
and backward with activations kept exact, then with them compressed (``"auto"`` first runs
``--warmup`` compressed steps on the same weights so every layer is measured)
(inputs: random crops of the repository's sample photographs, `samples/*.png`, or with
``--input noise`` Gaussian noise, the codec's worst case) and reports:

* ``grad error``: ``||g_l3 - g_exact|| / ||g_exact||`` over all parameter gradients
  concatenated, and the worst parameter tensor's own relative error (its name);
* ``ratio``: raw saved bytes / stored bytes as `ActivationStats` counts them (every tensor
  the hooks packed, those kept exact included);
* ``step ms``: the compressed step's forward + backward (median of ``--repeat``), beside
  the exact step's (median of ``--repeat`` before and as many after the compressed steps;
  without checkpointing).

Checkpointing wraps each stage of the model (ResNet's layer1-4, each ViT encoder block) in
``torch.utils.checkpoint.checkpoint`` (``use_reentrant`` True or False); the exact gradient it
is compared with is the plain model's. Backward runs after the ``with`` block, as documented.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.utils.checkpoint

import l3.torch as l3t


class Checkpointed(nn.Module):
    """``inner`` run under ``torch.utils.checkpoint`` (reentrant or not)."""

    def __init__(self, inner: nn.Module, reentrant: bool):
        super().__init__()
        self.inner, self.reentrant = inner, reentrant

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(self.inner, x, use_reentrant=self.reentrant)


def make_model(name: str, size: int) -> nn.Module:
    import torchvision

    torch.manual_seed(0)
    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=100)
    if name == "resnet50":
        return torchvision.models.resnet50(num_classes=100)
    if name == "vit":
        # A small ViT from torchvision's own class: 4 blocks, width 192 (ViT-Tiny's), patches of 8.
        vit = torchvision.models.VisionTransformer(image_size=size, patch_size=8, num_layers=4,
                                                   num_heads=3, hidden_dim=192, mlp_dim=768,
                                                   num_classes=100)
        # torchvision starts the head at zero: no gradient would reach the blocks.
        nn.init.normal_(vit.heads.head.weight, std=0.02)
        return vit
    raise SystemExit(f"unknown model {name}")


def photo_batch(batch: int, size: int, g: torch.Generator) -> torch.Tensor:
    """``batch`` random ``size`` x ``size`` crops of the repository's sample photographs
    (`samples/*.png`, RGB), normalised as torchvision's ImageNet models expect."""
    from pathlib import Path

    import numpy as np
    from PIL import Image

    here = Path(__file__).resolve().parent.parent / "samples"
    photos = []
    for f in sorted(here.glob("*.png")):
        a = np.asarray(Image.open(f).convert("RGB"), dtype=np.float32) / 255.0
        if min(a.shape[:2]) >= size:
            photos.append(torch.from_numpy(a).permute(2, 0, 1))
    crops = []
    for _ in range(batch):
        p = photos[int(torch.randint(len(photos), (1,), generator=g))]
        y = int(torch.randint(p.shape[1] - size + 1, (1,), generator=g))
        x = int(torch.randint(p.shape[2] - size + 1, (1,), generator=g))
        crops.append(p[:, y : y + size, x : x + size])
    mean = torch.tensor([0.485, 0.456, 0.406]).reshape(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).reshape(3, 1, 1)
    return (torch.stack(crops) - mean) / std


def checkpointed(model: nn.Module, name: str, mode: str) -> nn.Module:
    """The same module objects (same weights), each stage wrapped for checkpointing."""
    if mode == "none":
        return model
    reentrant = mode == "reentrant"
    if name.startswith("resnet"):
        for stage in ("layer1", "layer2", "layer3", "layer4"):
            inner = getattr(model, stage)
            setattr(model, stage, Checkpointed(inner, reentrant))
    else:
        layers = model.encoder.layers
        for i in range(len(layers)):
            layers[i] = Checkpointed(layers[i], reentrant)
    return model


def unwrap(model: nn.Module) -> None:
    for name, child in list(model.named_children()):
        if isinstance(child, Checkpointed):
            setattr(model, name, child.inner)
        else:
            unwrap(child)


def step(model: nn.Module, x: torch.Tensor, y: torch.Tensor, ca=None) -> float:
    model.zero_grad(set_to_none=True)
    started = time.perf_counter()
    if ca is None:
        loss = nn.functional.cross_entropy(model(x), y)
    else:
        with ca:
            loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return time.perf_counter() - started


def grads(model: nn.Module) -> dict:
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def compare(got: dict, exact: dict) -> tuple:
    assert got.keys() == exact.keys(), set(got) ^ set(exact)
    diff = sum(float((got[k] - exact[k]).square().sum()) for k in exact)
    norm = sum(float(exact[k].square().sum()) for k in exact)
    worst, worst_name = 0.0, ""
    for k in exact:
        n = float(exact[k].norm())
        if n > 0:
            e = float((got[k] - exact[k]).norm()) / n
            if e > worst:
                worst, worst_name = e, k
    return (diff / norm) ** 0.5, worst, worst_name


def measure(args: argparse.Namespace, model_name: str, bound: str, ckpt: str) -> dict:
    model = make_model(model_name, args.size).train()
    g = torch.Generator().manual_seed(1)
    if args.input == "photos":
        x = photo_batch(args.batch, args.size, g)
    else:
        x = torch.randn(args.batch, 3, args.size, args.size, generator=g)
    y = torch.randint(0, 100, (args.batch,), generator=g)
    step(model, x, y)  # warm-up
    exact_times = [step(model, x, y) for _ in range(args.repeat)]
    exact = grads(model)
    checkpointed(model, model_name, ckpt)
    # The reentrant checkpoint gives a stage no parameter gradients when its input needs
    # none: the input does (as train_memory.py does it).
    xin = x.clone().requires_grad_(ckpt == "reentrant")
    b = None if bound == "none" else ("auto" if bound == "auto" else float(bound))
    times, ca = [], None
    for i in range(args.warmup * (b == "auto") + args.repeat):
        # (No optimiser step: the weights stay; BatchNorm in training mode normalises by the
        # batch's statistics, so its running statistics change nothing here.)
        ca = l3t.compress_activations(b, threads=args.threads, codec=args.codec)
        times.append(step(model, xin, y, ca))
        if i < args.warmup * (b == "auto") + args.repeat - 1:
            ca.close()
    unwrap(model)
    got = grads(model)
    # The exact step timed again after the compressed ones (the first steps of a process run
    # slower): its time is the median of both rounds.
    exact_times += [step(model, x, y) for _ in range(args.repeat)]
    err, worst, worst_name = compare(got, exact)
    s = ca.stats.as_dict()
    ca.close()
    return {
        "model": model_name, "input": args.input, "bound": bound, "checkpoint": ckpt,
        "batch": args.batch,
        "size": args.size, "grad_error": err, "worst_param_error": worst,
        "worst_param": worst_name, "ratio": s["raw_bytes"] / max(1, s["stored_bytes"]),
        "raw_mb": s["raw_bytes"] / 1e6, "stored_mb": s["stored_bytes"] / 1e6,
        "compressed": s["compressed"], "exact": s["exact"],
        "step_ms": 1000 * statistics.median(times[-args.repeat:]),
        "exact_step_ms": 1000 * statistics.median(exact_times),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet18", help="resnet18, resnet50, vit; ','-separated")
    ap.add_argument("--bounds", default="auto,1e-2,1e-3,1e-4", help="auto, a relative bound, none")
    ap.add_argument("--checkpoint", default="none", help="none, reentrant, non-reentrant")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--input", default="photos", choices=("photos", "noise"),
                    help="crops of samples/*.png, or Gaussian noise (the codec's worst case)")
    ap.add_argument("--warmup", type=int, default=2, help="auto's measuring steps first")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--codec", default="auto", choices=("auto", "fields", "blocks"),
                    help="compress_activations' codec (auto: fields on the CPU)")
    ap.add_argument("--json", help="rows written here too")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    print("| model | bound | checkpoint | grad error | worst parameter | ratio | step ms "
          "| exact ms |")
    print("|---|---|---|---:|---|---:|---:|---:|")
    for model_name in args.model.split(","):
        for ckpt in args.checkpoint.split(","):
            for bound in args.bounds.split(","):
                r = measure(args, model_name, bound, ckpt)
                rows.append(r)
                print(f"| {model_name} {r['batch']}x{r['size']}px | {bound} | {ckpt} | "
                      f"{r['grad_error']:.2e} | {r['worst_param_error']:.2e} ({r['worst_param']}) "
                      f"| {r['ratio']:.2f}x | {r['step_ms']:.0f} | {r['exact_step_ms']:.0f} |",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
