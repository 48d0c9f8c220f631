"""Trains a tiny CNN for a few steps on an l3 dataset, and compares loaders.

    pip install .            # the l3 package, from the repository root
    pip install torch        # torchvision is used for the PNG loader if it is installed
    python examples/train_torch.py [--source samples] [--epochs 3] [--workers 0]

It packs the images under ``--source`` (default: the bundled samples; class = first folder
under it, none for images directly in it) into a temporary l3 dataset, trains a small CNN for
a few steps on batches from the l3 loader (`l3.torch.L3DataLoader`), then times one loader
against the other over the same images and the same augmentation (random resized crop to
``--size``, horizontal flip, ImageNet normalisation, float32 NCHW batches):

- l3: shards -> Rust loader (planned shuffle, decode + augment on its thread pool, or on the
  GPU with ``--device gpu``) -> torch tensors;
- PNG: PNG files -> Pillow decode -> torchvision transforms (or the same steps in plain
  PyTorch when torchvision is absent) -> ``DataLoader`` with the same worker count.

Both loaders' figures are images per second over whole epochs, after one warm-up epoch.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

import l3
from l3.torch import L3DataLoader, L3IterableDataset

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


class TinyCnn(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.relu(self.c2(x))
        return self.head(x.mean(dim=(2, 3)))


def random_resized_crop(img: Image.Image, size: int) -> Image.Image:
    """torchvision's RandomResizedCrop parameters, for when torchvision is absent."""
    w, h = img.size
    area = w * h
    for _ in range(10):
        target = area * random.uniform(0.08, 1.0)
        ratio = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw = int(round(math.sqrt(target * ratio)))
        ch = int(round(math.sqrt(target / ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            x, y = random.randint(0, w - cw), random.randint(0, h - ch)
            return img.resize((size, size), Image.BILINEAR, box=(x, y, x + cw, y + ch))
    return img.resize((size, size), Image.BILINEAR)


class PngDataset(torch.utils.data.Dataset):
    """PNG files decoded by Pillow, augmented like the l3 loader."""

    def __init__(self, paths, labels, size: int):
        self.paths, self.labels, self.size = paths, labels, size
        try:
            import torchvision.transforms as T

            self.transform = T.Compose([
                T.RandomResizedCrop(size, antialias=False),
                T.RandomHorizontalFlip(),
                T.ToTensor(),
                T.Normalize(MEAN, STD),
            ])
        except ImportError:
            self.transform = None

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as im:
            im = im.convert("RGB")  # 8-bit RGB, as torchvision's pipeline expects
            if self.transform is not None:
                x = self.transform(im)
            else:
                im = random_resized_crop(im, self.size)
                if random.random() < 0.5:
                    im = im.transpose(Image.FLIP_LEFT_RIGHT)
                x = torch.from_numpy(np.asarray(im, dtype=np.float32) / 255.0).permute(2, 0, 1)
                x = (x - torch.tensor(MEAN)[:, None, None]) / torch.tensor(STD)[:, None, None]
        return x, self.labels[i]


def images_per_second(loader, epochs: int, images_of) -> float:
    for _ in loader:  # warm-up epoch (worker start, page cache)
        pass
    start, n = time.perf_counter(), 0
    for epoch in range(epochs):
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch + 1)
        for batch in loader:
            n += images_of(batch)
    return n / (time.perf_counter() - start)


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", type=Path, default=repo / "samples")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--steps", type=int, default=5, help="training steps")
    p.add_argument("--device", default="cpu", help="l3 loader: cpu, gpu or auto")
    a = p.parse_args()
    torch.manual_seed(0)
    random.seed(0)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ds = l3.pack(a.source, tmp)
        print(f"packed {len(ds)} images from {a.source} in {time.perf_counter() - t0:.2f} s "
              f"({len(ds.classes)} classes)")
        # Without class folders, a stand-in task: tell even from odd record indices.
        classes = len(ds.classes) if ds.classes else 2

        # A few training steps on l3 batches.
        model = TinyCnn(classes)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        data = L3IterableDataset(tmp, a.batch_size, seed=1, size=(a.size, a.size),
                                 device=a.device)
        loader = L3DataLoader(data, num_workers=a.workers)
        step = 0
        while step < a.steps:
            for batch in loader:
                labels = batch["labels"] if ds.classes else batch["samples"] % 2
                loss = F.cross_entropy(model(batch["images"]), labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                print(f"step {step}: loss {loss.item():.4f}")
                if step == a.steps:
                    break

        # Loaders alone, same images, same augmentation.
        l3_loader = L3DataLoader(
            L3IterableDataset(tmp, a.batch_size, seed=2, size=(a.size, a.size), device=a.device),
            num_workers=a.workers,
        )
        l3_rate = images_per_second(l3_loader, a.epochs, lambda b: len(b["samples"]))
        _, jobs = l3.plan_pack(a.source)
        records = [r for _, rs in jobs for r in rs]
        png = PngDataset([r[1] for r in records], [r[2] or 0 for r in records], a.size)
        png_loader = torch.utils.data.DataLoader(
            png, batch_size=a.batch_size, shuffle=True, num_workers=a.workers
        )
        png_rate = images_per_second(png_loader, a.epochs, lambda b: len(b[1]))
        how = "torchvision" if png.transform is not None else "plain PyTorch"
        print(f"l3 loader ({a.device}, {a.workers} workers): {l3_rate:.1f} images/s")
        print(f"PNG + Pillow + {how} loader ({a.workers} workers): {png_rate:.1f} images/s")
        print(f"l3 / PNG: {l3_rate / png_rate:.2f}x")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
