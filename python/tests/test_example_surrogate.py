"""examples/train_surrogate.py end to end at a tiny size: a simulation written with h5py,
packed with pack_source (offsets), trained through L3DataLoader from lossless, 1e-3 and 1e-2
records, on the CPU path and the GPU path (lavapipe in CI). The GPU path's batches are the
CPU path's bit for bit, so the two runs must report the same losses exactly."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

pytest.importorskip("h5py")


def run(tmp_path, device):
    out = tmp_path / f"{device}.json"
    cmd = [
        sys.executable, str(REPO / "examples" / "train_surrogate.py"),
        "--sim-steps", "48", "--size", "32", "--train-steps", "30", "--crop", "16",
        "--batch-size", "8", "--device", device, "--json", str(out),
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "| rel 1e-2 |" in r.stdout
    return json.loads(out.read_text())["rows"]


def test_the_example_trains_on_cpu_and_gpu_alike(tmp_path, gpu_available):
    cpu = run(tmp_path, "cpu")
    assert [r["mode"] for r in cpu] == ["lossless", "rel 1e-3", "rel 1e-2"]
    sizes = [r["train_bytes"] for r in cpu]
    assert sizes[0] > sizes[1] > sizes[2] > 0
    for r in cpu:
        # Thirty steps already beat persistence (predicting no change) by far.
        assert 0 < r["val_loss"] < 0.5 * r["persistence"], r
    if not gpu_available:
        pytest.skip("no GPU adapter")
    gpu = run(tmp_path, "gpu")
    for c, g in zip(cpu, gpu):
        assert (c["mode"], c["train_bytes"]) == (g["mode"], g["train_bytes"])
        assert c["val_loss"] == g["val_loss"], (c, g)
