"""Steps stored once (issue 47): ``pack_source`` with ``offsets`` writes one record per step
and a window over them (manifest version 2), so a (t, t + 1) pair is two reads of
once-stored steps. Against the earlier layout (``windows=False``: each sample's steps in its
own record) from the same HDF5 file: the same samples byte for byte (lossless and
error-bounded), the same loader batches (crop, flips, resume; the GPU path's equal the
CPU path's), fewer bytes on disk; with a
cache each step is read once per epoch; ranks split the samples by what they cache; arrays
of the same variables and mode are stored once; the command line writes the new layout; bad
windows are refused; epochs are stratified over ranges of sample ids (``strata``)."""

import json

import h5py
import numpy as np
import pytest

import l3

T, H, W = 21, 16, 12


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """h, u, v of shape (T, H, W) float32 in an HDF5 file, one step per chunk."""
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:H, 0:W] / 5.0
    t = np.arange(T)[:, None, None] / 4.0
    path = tmp_path_factory.mktemp("sim") / "sim.h5"
    data = {}
    with h5py.File(path, "w") as f:
        for k, name in enumerate(("h", "u", "v")):
            a = np.sin(x * (k + 1) + t) * np.cos(y - t) + 0.01 * rng.standard_normal((T, H, W))
            data[name] = a.astype(np.float32)
            f.create_dataset(name, data=data[name], chunks=(1, H, W))
    return path, data


SPECS = {
    # Input and target of the same variables: stored once.
    "same": ({"input": ["h", "u", "v"], "target": ["h", "u", "v"]}, {"target": 1}),
    # The case: u, v at t, h at t + 1 (distinct arrays: nothing stored twice).
    "split": ({"input": ["u", "v"], "target": "h"}, {"target": 1}),
    # Both: u, v at t and t + 1, h at t + 1.
    "mixed": (
        {"input": ["u", "v"], "target": "h", "next": ["u", "v"]},
        {"target": 1, "next": 1},
    ),
}


def pack_both(sim, tmp_path, spec, modes):
    path, _ = sim
    variables, offsets = SPECS[spec]
    new, old = tmp_path / "steps", tmp_path / "pairs"
    for out, windows in ((new, True), (old, False)):
        l3.pack_source(path, out, variables, offsets=offsets, modes=modes, samples_per_shard=6,
                       windows=windows)  # fmt: skip
    return l3.open_dataset(new), l3.open_dataset(old), new, old


def disk_bytes(folder):
    return sum(p.stat().st_size for p in folder.glob("shard-*.l3s"))


@pytest.mark.parametrize("spec", list(SPECS))
@pytest.mark.parametrize("modes", ["lossless", {"relative": 1e-3}])
def test_steps_stored_once_give_the_same_samples(sim, tmp_path, spec, modes):
    new, old, new_dir, old_dir = pack_both(sim, tmp_path, spec, modes)
    _, data = sim
    assert len(new) == len(old) == T - 1
    assert old.records == T - 1 and old.window is None
    if spec == "split":
        # Distinct arrays: one record per sample stores each step once already.
        assert new.window is None and new.records == T - 1
    else:
        stored = ["input"] if spec == "same" else ["input", "target"]
        assert new.records == T and [a["name"] for a in new.arrays] == stored
        assert new.window[:2] == [
            {"name": "input", "array": "input", "offset": 0},
            {"name": "target", "array": "input" if spec == "same" else "target", "offset": 1},
        ]
        manifest = json.loads((new_dir / "manifest.json").read_text())
        assert manifest["version"] == 2 and manifest["window"]["samples"] == T - 1
        assert json.loads((new_dir / "source.json").read_text())["window"][1][2] == 1
    for i in range(len(new)):
        a, b = new[i], old[i]
        assert list(a) == list(b) == list(SPECS[spec][0])
        for name in a:
            assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape
            assert a[name].tobytes() == b[name].tobytes(), (i, name)
    if modes == "lossless":
        np.testing.assert_array_equal(new[4]["target"][..., 0, :, :] if spec == "same"
                                      else new[4]["target"], data["h"][5])  # fmt: skip
    # Each step once: about half the bytes where input and target are the same variables;
    # where they are distinct, both layouts are the same.
    ratio = disk_bytes(new_dir) / disk_bytes(old_dir)
    assert {"same": ratio < 0.6, "mixed": ratio < 0.75, "split": ratio == 1.0}[spec], ratio


def batches(path, **options):
    with l3.Loader(path, 4, **options) as loader:
        return list(loader)


def test_loader_batches_equal_and_resume(sim, tmp_path):
    new, old, new_dir, old_dir = pack_both(sim, tmp_path, "same", "lossless")
    options = dict(seed=5, end_epoch=2, crop=(8, 8), flips=True)
    a = batches(old_dir, **options)
    b = batches(new_dir, cache_mb=4, **options)
    assert len(a) == len(b) == 10
    for x, y in zip(a, b):
        assert x["arrays"] == y["arrays"] == ["input", "target"]
        assert list(x["samples"]) == list(y["samples"])
        for name in ("input", "target"):
            assert x[name].tobytes() == y[name].tobytes()
        for key, v in x["windows"].items():
            np.testing.assert_array_equal(v, y["windows"][key])
    with l3.Loader(new_dir, 4, cache_mb=4, **options) as loader:
        head = [next(loader) for _ in range(3)]
        seed, epoch, consumed = loader.state()
    rest = batches(new_dir, cache_mb=4, **dict(options, epoch=epoch, consumed=consumed))
    for x, y in zip(head + rest, b):
        assert list(x["samples"]) == list(y["samples"])
        assert x["target"].tobytes() == y["target"].tobytes()


def test_the_gpu_path_equals_the_cpu_path(sim, tmp_path, gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    new, old, new_dir, old_dir = pack_both(sim, tmp_path, "mixed", {"relative": 1e-3})
    options = dict(seed=3, end_epoch=2, crop=(8, 8), flips=True, rot90=True, normalize=True)
    cpu = batches(new_dir, cache_mb=4, **options)
    gpu = batches(new_dir, cache_mb=4, device="gpu", **options)
    assert len(cpu) == len(gpu) == 10
    for c, g in zip(cpu, gpu):
        assert list(c["samples"]) == list(g["samples"])
        assert g["arrays"] == c["arrays"] == ["input", "target", "next"]
        for name in ("input", "target", "next"):
            assert c[name].tobytes() == g[name].tobytes(), name


def test_a_cached_step_is_read_once_per_epoch(sim, tmp_path):
    new, old, new_dir, old_dir = pack_both(sim, tmp_path, "same", "lossless")
    stored = sum(new.record(i)["arrays"][0]["bytes"] for i in range(new.records))
    got = batches(new_dir, seed=2, end_epoch=3, cache_mb=16)
    read = {e: sum(b["bytes_read"] for b in got if b["epoch"] == e) for e in range(3)}
    assert read == {0: stored, 1: 0, 2: 0}, (read, stored)
    assert got[-1]["cache"]["miss_bytes"] == stored
    # The earlier layout reads every step twice in its first epoch.
    twice = sum(
        b["bytes_read"] for b in batches(old_dir, seed=2, end_epoch=1, cache_mb=16)
    )
    assert twice > 1.8 * stored, (twice, stored)


def test_ranks_with_a_cache_load_a_windowed_dataset(sim, tmp_path):
    """Several ranks with a cache and the default ``locality=True`` (a windowed dataset was
    refused with it before): every sample once per epoch across the ranks. The cache (1 MiB)
    holds the whole dataset, so the ranks take the slices, as with ``locality=False``; the
    split itself is tested in Rust (tests/loader_windows.rs) with a cache of a fifth."""
    new, old, new_dir, old_dir = pack_both(sim, tmp_path, "same", "lossless")

    def run(locality):
        read, seen = {}, {}
        for rank in range(2):
            options = dict(seed=4, end_epoch=3, world_size=2, rank=rank, cache_mb=1)
            with l3.Loader(new_dir, 3, locality=locality, **options) as loader:
                for b in loader:
                    read[b["epoch"]] = read.get(b["epoch"], 0) + b["bytes_read"]
                    seen.setdefault(b["epoch"], []).extend(int(s) for s in b["samples"])
        for epoch, samples in seen.items():
            assert sorted(samples) == list(range(T - 1)), epoch
        return read

    local, slices = run(True), run(False)
    assert local == slices, (local, slices)
    assert local[2] < local[0], local


def test_a_rerun_keeps_the_shards(sim, tmp_path):
    path, _ = sim
    variables, offsets = SPECS["same"]
    out = tmp_path / "resume"
    first = l3.pack_source(path, out, variables, offsets=offsets, samples_per_shard=6)
    manifest = (out / "manifest.json").read_bytes()
    again = l3.pack_source(path, out, variables, offsets=offsets, samples_per_shard=6)
    assert again["kept"] == first["shards"] == 4 and again["written"] == 0
    assert (out / "manifest.json").read_bytes() == manifest
    # The earlier layout into the same folder is another dataset: refused unless forced.
    with pytest.raises(l3.L3IOError, match="other samples|other options|another dataset"):
        l3.pack_source(path, out, variables, offsets=offsets, samples_per_shard=6,
                       windows=False)  # fmt: skip


def test_the_command_line_stores_steps_once(sim, tmp_path):
    import subprocess
    import sys

    path, data = sim
    out = tmp_path / "cli"
    r = subprocess.run(
        [sys.executable, "-m", "l3", "pack-arrays", str(path), "-o", str(out), "--input",
         "h,u,v", "--target", "h,u,v", "--offset", "target=1", "-q"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    ds = l3.open_dataset(out)
    assert len(ds) == T - 1 and ds.records == T and len(ds.arrays) == 1
    want = np.stack([data[n][T - 1] for n in ("h", "u", "v")])
    np.testing.assert_array_equal(ds[T - 2]["target"], want)
    # --no-window: the earlier layout, the same samples.
    old = tmp_path / "cli-pairs"
    r = subprocess.run(
        [sys.executable, "-m", "l3", "pack-arrays", str(path), "-o", str(old), "--input",
         "h,u,v", "--target", "h,u,v", "--offset", "target=1", "--no-window", "-q"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    pairs = l3.open_dataset(old)
    assert pairs.window is None and pairs.records == len(pairs) == T - 1
    assert pairs[T - 2]["target"].tobytes() == ds[T - 2]["target"].tobytes()


def test_bad_windows_are_refused(tmp_path):
    steps = [{"a": np.full((2, 2), i, np.float32)} for i in range(3)]
    with pytest.raises(l3.ParameterError, match="offset"):
        l3.pack_arrays(steps, tmp_path / "neg", window=[("x", "a", -1)])
    with pytest.raises(l3.ParameterError, match="offset"):
        l3.pack_arrays(steps, tmp_path / "big", window=[("x", "a", 2**64)])
    with pytest.raises(l3.ParameterError, match="window"):
        l3.pack_arrays(steps, tmp_path / "end", window=[("x", "a", 0), ("y", "a", 3)])
    with pytest.raises(l3.ParameterError, match="window"):
        l3.pack_arrays(steps, tmp_path / "name", window=[("x", "b", 0)])
    ok = tmp_path / "ok"
    l3.pack_arrays(steps, ok, window=[("x", "a", 0), ("y", "a", 2)])
    ds = l3.open_dataset(ok)
    assert len(ds) == 1 and ds[0]["y"][0, 0] == 2 and ds[-1]["x"][0, 0] == 0
    with pytest.raises(IndexError):
        ds[1]
    # A manifest whose window reaches past the records: a FormatError on opening.
    m = json.loads((ok / "manifest.json").read_text())
    m["window"]["arrays"][1]["offset"] = 3
    (ok / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(l3.FormatError, match="past the end"):
        l3.open_dataset(ok)


def test_windowed_epochs_are_stratified(sim, tmp_path):
    """``strata``: each epoch's permutation spreads each of S ranges of sample ids evenly.
    With 20 samples and 4 strata of 5 every batch of 4 holds one sample of each range (the
    plain permutation, ``strata=0``, does not); every sample once per epoch; a resume from
    the middle of an epoch continues the same order. (The default, 64, is one sample per
    range here: the plain permutation.)"""
    new, old, new_dir, old_dir = pack_both(sim, tmp_path, "same", "lossless")
    options = dict(seed=6, end_epoch=2, cache_mb=4)
    got = batches(new_dir, strata=4, **options)
    assert len(got) == 10
    for b in got:
        assert sorted(int(s) // 5 for s in b["samples"]) == [0, 1, 2, 3], list(b["samples"])
    for e in range(2):
        seen = sorted(int(s) for b in got if b["epoch"] == e for s in b["samples"])
        assert seen == list(range(T - 1)), e
    plain = batches(new_dir, strata=0, **options)
    assert any(sorted(int(s) // 5 for s in b["samples"]) != [0, 1, 2, 3] for b in plain)
    assert [list(b["samples"]) for b in batches(new_dir, **options)] == [
        list(b["samples"]) for b in plain
    ]
    with l3.Loader(new_dir, 4, strata=4, **options) as loader:
        head = [next(loader) for _ in range(2)]
        seed, epoch, consumed = loader.state()
    rest = batches(new_dir, strata=4, **dict(options, epoch=epoch, consumed=consumed))
    assert [list(b["samples"]) for b in head + rest] == [list(b["samples"]) for b in got]
    with pytest.raises(TypeError):
        batches(new_dir, strata=1.5, **options)
