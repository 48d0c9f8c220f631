#!/usr/bin/env python3
"""Training to the end with `l3.torch.compress_activations`: does a model trained on coded
activations reach the metric of one trained on exact ones? CPU, a few seeds per arm.

    pip install . torchvision        # the l3 package, from the repository root
    python bench/activation_convergence.py [--arms none,auto] [--seeds 0,1,2] \
        [--epochs 8] [--per-class 160] [--json out.json]

Task (fits a CPU): 32 x 32 RGB crops of the repository's sample photographs (`samples/*.png`),
labelled by the photo and the quadrant they come from (6 photos x 4 = 24 classes). Each
quadrant's top 70 % of rows gives the training crops, its bottom 30 % the test crops, so no
test pixel is seen in training. The crops are drawn once (seed 1234) and shared by every arm
and seed; training adds random horizontal flips.

Model: a small ResNet with the parts that make activation coding hard: a conv stem with
BatchNorm, ReLU and max-pool, then torchvision's own `BasicBlock`s (32, 64 and 128 channels,
BatchNorm and ReLU inside, strided downsampling with BatchNorm), global average pool, linear.
SGD (momentum 0.9, weight decay 5e-4, cosine learning rate from 0.05), batch 64.

Arms: ``none`` (exact activations), ``auto`` (`compress_activations("auto", model=model)`),
or a relative bound such as ``1e-2``; seeds change the initial weights and the batch order,
identically across arms. The script reports per arm the final test accuracy and training loss
(mean and spread over seeds: min and max), the saved-activation ratio as `ActivationStats`
counts it (raw bytes / stored bytes over the whole run) and seconds per epoch.

The claim checked (issue 46's goal): the l3 arm's mean test accuracy lies within the exact
arm's min..max over seeds and within 1 % (relative) of its mean; the script prints whether.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

# torchvision before l3: importing it after l3 has opened a Vulkan device crashed lavapipe.
import torchvision  # noqa: F401
import numpy as np
import torch
import torch.nn as nn
from PIL import Image
from torchvision.models.resnet import BasicBlock

import l3.torch as l3t

CROP = 32


def load_photos() -> list:
    here = Path(__file__).resolve().parent.parent / "samples"
    photos = []
    for f in sorted(here.glob("*.png")):
        a = np.asarray(Image.open(f).convert("RGB"), dtype=np.float32) / 255.0
        photos.append(torch.from_numpy(a).permute(2, 0, 1).contiguous())
    if not photos:
        raise SystemExit(f"no samples/*.png under {here}")
    return photos


def make_sets(per_class: int, test_per_class: int) -> tuple:
    """Training and test crops with labels (photo x quadrant), normalised per channel."""
    g = torch.Generator().manual_seed(1234)
    photos = load_photos()
    xs = {"train": [], "test": []}
    ys = {"train": [], "test": []}
    label = 0
    for p in photos:
        _, h, w = p.shape
        for qy in range(2):
            for qx in range(2):
                y0, y1 = qy * h // 2, (qy + 1) * h // 2
                x0, x1 = qx * w // 2, (qx + 1) * w // 2
                cut = y0 + int(0.7 * (y1 - y0))
                for split, (a, b), n in (("train", (y0, cut), per_class),
                                         ("test", (cut, y1), test_per_class)):
                    if b - a < CROP or x1 - x0 < CROP:
                        raise SystemExit("a sample photo is too small for the crops")
                    for _ in range(n):
                        y = a + int(torch.randint(b - a - CROP + 1, (1,), generator=g))
                        x = x0 + int(torch.randint(x1 - x0 - CROP + 1, (1,), generator=g))
                        xs[split].append(p[:, y:y + CROP, x:x + CROP])
                        ys[split].append(label)
                label += 1
    train_x, test_x = torch.stack(xs["train"]), torch.stack(xs["test"])
    mean = train_x.mean(dim=(0, 2, 3), keepdim=True)
    std = train_x.std(dim=(0, 2, 3), keepdim=True)
    return ((train_x - mean) / std, torch.tensor(ys["train"]),
            (test_x - mean) / std, torch.tensor(ys["test"]), label)


class SmallResNet(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(2))

        def down(cin: int, cout: int) -> nn.Module:
            return nn.Sequential(nn.Conv2d(cin, cout, 1, stride=2, bias=False),
                                 nn.BatchNorm2d(cout))

        self.layers = nn.Sequential(
            BasicBlock(32, 32), BasicBlock(32, 32),
            BasicBlock(32, 64, stride=2, downsample=down(32, 64)),
            BasicBlock(64, 128, stride=2, downsample=down(64, 128)))
        self.head = nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(x[i:i + 256]).argmax(1) == y[i:i + 256]).sum())
                      for i in range(0, len(x), 256))
    model.train()
    return correct / len(x)


def train(arm: str, seed: int, data: tuple, epochs: int, batch: int) -> dict:
    train_x, train_y, test_x, test_y, classes = data
    torch.manual_seed(seed)
    model = SmallResNet(classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    steps = epochs * math.ceil(len(train_x) / batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    order = torch.Generator().manual_seed(seed)
    ca = None
    if arm != "none":
        bound = "auto" if arm == "auto" else float(arm)
        ca = l3t.compress_activations(bound, model=model)
    losses, epoch_seconds = [], []
    for _ in range(epochs):
        started = time.perf_counter()
        perm = torch.randperm(len(train_x), generator=order)
        total, count = 0.0, 0
        for i in range(0, len(perm), batch):
            idx = perm[i:i + batch]
            x = train_x[idx]
            flip = torch.rand(len(idx), generator=order) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)
            opt.zero_grad(set_to_none=True)
            if ca is None:
                loss = nn.functional.cross_entropy(model(x), train_y[idx])
            else:
                with ca:
                    loss = nn.functional.cross_entropy(model(x), train_y[idx])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss) * len(idx)
            count += len(idx)
        losses.append(total / count)
        epoch_seconds.append(time.perf_counter() - started)
    out = {"arm": arm, "seed": seed, "test_accuracy": evaluate(model, test_x, test_y),
           "train_loss": losses[-1], "losses": losses,
           "epoch_seconds": statistics.median(epoch_seconds)}
    if ca is not None:
        s = ca.stats
        out["ratio"] = s.raw_bytes / max(1, s.stored_bytes)
        out["compressed"], out["exact"] = s.compressed, s.exact
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arms", default="none,auto")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--per-class", type=int, default=160)
    ap.add_argument("--test-per-class", type=int, default=60)
    ap.add_argument("--json")
    a = ap.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    data = make_sets(a.per_class, a.test_per_class)
    print(f"{len(data[0])} training and {len(data[2])} test crops, {data[4]} classes, "
          f"{a.epochs} epochs, batch {a.batch}", flush=True)
    runs = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        for arm in a.arms.split(","):
            r = train(arm, seed, data, a.epochs, a.batch)
            runs.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "losses"}), flush=True)
    print("\n| arm | test accuracy, mean (min..max) | final train loss, mean (min..max) "
          "| saved ratio | s / epoch |\n|---|---|---|---:|---:|")
    summary = {}
    for arm in a.arms.split(","):
        rs = [r for r in runs if r["arm"] == arm]
        acc = [r["test_accuracy"] for r in rs]
        loss = [r["train_loss"] for r in rs]
        ratio = statistics.mean(r["ratio"] for r in rs) if "ratio" in rs[0] else 1.0
        summary[arm] = {"acc": acc, "loss": loss, "ratio": ratio}
        print(f"| {arm} | {statistics.mean(acc):.4f} ({min(acc):.4f}..{max(acc):.4f}) "
              f"| {statistics.mean(loss):.4f} ({min(loss):.4f}..{max(loss):.4f}) "
              f"| {ratio:.2f} | {statistics.mean(r['epoch_seconds'] for r in rs):.1f} |")
    if "none" in summary:
        base = summary["none"]["acc"]
        for arm, s in summary.items():
            if arm == "none":
                continue
            m = statistics.mean(s["acc"])
            within = min(base) <= m <= max(base)
            rel = abs(m - statistics.mean(base)) / statistics.mean(base)
            print(f"{arm}: mean accuracy {m:.4f} {'within' if within else 'OUTSIDE'} the exact "
                  f"arm's seed range {min(base):.4f}..{max(base):.4f}; "
                  f"{rel * 100:.2f} % from its mean ({'<=' if rel <= 0.01 else '>'} 1 %)")
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
