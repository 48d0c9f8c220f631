"""Writes the dataset fixtures under tests/fixtures/datasets/ with the l3 package on the path
(run it with an *older* l3 installed, so the fixtures are that version's files):

    PYTHONPATH=/path/to/old/l3 python scripts/make-dataset-fixtures.py tests/fixtures/datasets

- images/: a packed image dataset (compact, 2 levels, 2 records per shard, two classes and
  one unlabelled image; 8-bit gray, RGB and 16-bit RGBA images, small and deterministic);
- tensors/: a tensor dataset (float32 lossless, float32 error-bounded at 1e-3, int16 raw,
  with a fill value; 3 records per shard);
- expected.json: what that version decoded: per image record its key, class and the CRC-32
  of its pixels at every level; per tensor record its key and the CRC-32 of every array's
  bytes. tests/dataset_fixtures.rs checks today's reader against it.
"""

import json
import sys
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

import l3

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(44)

# Images: smooth gradients plus noise (so the codec has something to predict), in folders.
src = out / "images-src"
images = {
    "cats/a.png": np.clip(np.add.outer(np.arange(24), np.arange(32)) * 4 + rng.integers(0, 9, (24, 32)), 0, 255).astype(np.uint8),
    "cats/b.png": np.clip(rng.normal(120, 30, (20, 28, 3)), 0, 255).astype(np.uint8),
    "dogs/c.png": (np.add.outer(np.arange(16), np.arange(16)) * 900 + rng.integers(0, 50, (16, 16))).astype(np.uint16),
    "d.png": np.full((9, 13, 3), 77, np.uint8),
}
for rel, a in images.items():
    p = src / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(a).save(p)  # uint16 2-D: 16-bit gray

ds = l3.pack(src, out / "images", levels=2, records_per_shard=2, profile="compact")
expected = {"images": [], "tensors": []}
for i in range(len(ds)):
    rec = ds.record(i)
    levels = [zlib.crc32(np.ascontiguousarray(ds.read(i, level=k)).tobytes()) for k in range(ds.levels)]
    expected["images"].append({"key": rec["key"], "label": ds[i][1], "crc32": levels})

# Tensors.
samples = []
for k in range(5):
    t = np.cumsum(rng.normal(0, 1, (6, 8)).astype(np.float32), axis=1)
    t[0, 0] = -9999.0
    samples.append({
        "field": t,
        "bounded": (np.sin(np.arange(40, dtype=np.float32) / 7 + k) * 10).reshape(5, 8),
        "counts": rng.integers(-300, 300, (4, 4)).astype(np.int16),
    })
l3.pack_arrays(
    samples, out / "tensors",
    modes={"field": {"mode": "lossless", "fill_value": -9999.0}, "bounded": {"absolute": 1e-3}, "counts": "raw"},
    samples_per_shard=3,
)
tds = l3.TensorDataset(str(out / "tensors"))
for i in range(len(tds)):
    arrays = tds[i]
    expected["tensors"].append({
        "key": tds.record(i)["key"],
        "arrays": {name: zlib.crc32(np.ascontiguousarray(a).tobytes()) for name, a in arrays.items()},
    })
import shutil

shutil.rmtree(src)
(out / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
print(json.dumps(expected))
