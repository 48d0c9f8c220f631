"""Tensor records from Python: pack_arrays and open_dataset (arrays of every dtype back exactly
or within their bound, statistics against NumPy), resume, refused samples, and `l3 unpack`'s
.npy files loaded by NumPy."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import l3

from conftest import REPO, in_ci


def make_sample(i):
    rng = np.random.default_rng(i)
    y, x = np.mgrid[0:12, 0:10]
    target = np.stack([np.sin(0.3 * x + i) * np.cos(0.2 * y), np.cos(0.1 * x * y + i)]).astype(
        np.float32
    )
    target[0, 0, 0] = -9999.0  # the fill value
    target[1, 2, 3] = np.nan
    return {
        "input": rng.standard_normal((3, 12, 10)).astype(np.float32),
        "target": target,
        "mask": (rng.random((12, 10)) > 0.5).astype(np.uint8),
        "coef": rng.standard_normal(5).astype(np.float64),
        "half": rng.standard_normal((2, 2, 2, 3)).astype(np.float16),
        "count": rng.integers(-(2**40), 2**40, size=(4,), dtype=np.int64),
    }


MODES = {
    "input": "raw",
    "target": {"absolute": 1e-3, "fill_value": -9999.0},
    "mask": "lossless",  # an integer array: stored raw
    "coef": "raw",
    "half": "raw",
    "count": "raw",
}


def test_pack_and_read_back(tmp_path):
    out = tmp_path / "ds"
    samples = [make_sample(i) for i in range(7)]
    summary = l3.pack_arrays(iter(samples), out, modes=MODES, samples_per_shard=3, labels=range(7))
    assert summary["records"] == 7 and summary["shards"] == 3
    assert summary["written"] == 3 and summary["kept"] == 0 and summary["bytes"] > 0
    ds = l3.open_dataset(out)
    assert isinstance(ds, l3.TensorDataset) and len(ds) == 7
    assert [a["name"] for a in ds.arrays] == list(MODES)
    spec = {a["name"]: a for a in ds.arrays}
    assert spec["target"]["mode"] == "error-bounded"
    assert spec["target"]["bound"] == {"absolute": 1e-3}
    assert spec["mask"]["mode"] == "raw" and spec["half"]["dtype"] == "float16"
    assert spec["input"]["shape"] == (3, 12, 10)
    for i, src in enumerate(samples):
        got = ds[i]
        assert list(got) == list(MODES)
        for name in ("input", "mask", "coef", "half", "count"):
            assert got[name].dtype == src[name].dtype, name
            assert np.array_equal(got[name], src[name]), name
        t, s = got["target"], src["target"]
        assert t.shape == s.shape and t.dtype == np.float32
        regular = np.isfinite(s) & (s != -9999.0)
        assert np.all(np.abs(t[regular] - s[regular]) <= 1e-3)
        assert np.array_equal(t.view(np.uint32)[~regular], s.view(np.uint32)[~regular])
        rec = ds.record(i)
        assert rec["key"] == f"{i:08d}" and rec["label"] == i
        assert [a["name"] for a in rec["arrays"]] == list(MODES)
        assert 0 < rec["arrays"][1]["bound"] <= 1e-3
    assert ds[-1]["coef"].tolist() == samples[-1]["coef"].tolist()
    with pytest.raises(IndexError):
        ds[7]


def test_stats_match_numpy(tmp_path):
    samples = [make_sample(i) for i in range(9)]
    l3.pack_arrays(samples, tmp_path / "ds", modes=MODES, samples_per_shard=4)
    stats = l3.open_dataset(tmp_path / "ds").stats
    assert set(stats) == {"input", "target", "coef", "half"}
    for name in stats:
        values = np.concatenate([s[name].astype(np.float64).ravel() for s in samples])
        keep = np.isfinite(values)
        if name == "target":
            keep &= values != -9999.0
        values = values[keep]
        assert stats[name]["count"] == values.size
        assert stats[name]["mean"] == pytest.approx(values.mean(), rel=1e-12, abs=1e-15)
        assert stats[name]["std"] == pytest.approx(values.std(), rel=1e-12)


def dataset_files(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())}


def test_rerun_keeps_shards_and_refuses_other_inputs(tmp_path):
    out = tmp_path / "ds"
    samples = [make_sample(i) for i in range(8)]
    l3.pack_arrays(samples, out, modes=MODES, samples_per_shard=3)
    before = dataset_files(out)
    again = l3.pack_arrays(samples, out, modes=MODES, samples_per_shard=3)
    assert (again["written"], again["kept"]) == (0, 3)
    assert dataset_files(out) == before
    changed = list(samples)
    changed[4] = make_sample(40)
    with pytest.raises(l3.L3IOError, match=r"shard-00001\.l3s.*sample 4 differs"):
        l3.pack_arrays(changed, out, modes=MODES, samples_per_shard=3)
    with pytest.raises(l3.L3IOError, match="other options"):
        l3.pack_arrays(samples, out, modes="raw", samples_per_shard=3)
    assert dataset_files(out) == before
    forced = l3.pack_arrays(changed, out, modes=MODES, samples_per_shard=3, force=True)
    assert (forced["written"], forced["kept"]) == (1, 2)
    assert np.array_equal(l3.open_dataset(out)[4]["input"], changed[4]["input"])


def test_a_sample_with_another_shape_is_refused(tmp_path):
    samples = [make_sample(i) for i in range(3)]
    samples[2]["input"] = samples[2]["input"][:, :11]
    with pytest.raises(
        l3.ParameterError,
        match=r"sample 2: array \"input\" has shape \[3, 11, 10\].*first sample's has shape \[3, 12, 10\]",
    ):
        l3.pack_arrays(samples, tmp_path / "ds", modes=MODES)
    missing = [make_sample(0), {"input": np.zeros(3, np.float32)}]
    with pytest.raises(l3.ParameterError, match="sample 1 has arrays"):
        l3.pack_arrays(missing, tmp_path / "ds2", modes="raw")
    with pytest.raises(l3.ParameterError, match="axes"):
        l3.pack_arrays([{"x": np.zeros((1, 1, 1, 1, 2))}], tmp_path / "ds3", modes="raw")
    with pytest.raises(l3.ParameterError, match="float32"):
        l3.pack_arrays([{"x": np.zeros((4, 4))}], tmp_path / "ds4", modes={"absolute": 0.1})


def test_lossless_floats_are_bit_exact_and_smaller(tmp_path):
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:64, 0:48]
    samples = []
    for i in range(6):
        field = (np.sin(0.05 * x + i) * np.cos(0.07 * y) * 100).astype(np.float32)
        field[0, 0] = np.nan
        field[1, 1] = -0.0
        samples.append({
            "field": field,
            "half": field.astype(np.float16),
            "series": np.cumsum(rng.standard_normal(500)).astype(np.float32),
        })
    out = tmp_path / "ds"
    summary = l3.pack_arrays(samples, out, samples_per_shard=4)  # the default: lossless
    ds = l3.open_dataset(out)
    assert {a["name"]: a["mode"] for a in ds.arrays} == {
        "field": "lossless", "half": "lossless", "series": "lossless"}
    for i, s in enumerate(samples):
        got = ds[i]
        for name, a in s.items():
            assert got[name].dtype == a.dtype and got[name].shape == a.shape
            width = np.uint32 if a.itemsize == 4 else np.uint16
            np.testing.assert_array_equal(got[name].view(width), a.view(width))
    raw = sum(a.nbytes for s in samples for a in s.values())
    assert summary["bytes"] < raw


def test_a_damaged_manifest_or_shard_is_an_error(tmp_path):
    out = tmp_path / "ds"
    l3.pack_arrays([make_sample(i) for i in range(3)], out, modes=MODES)
    shard = out / "shard-00000.l3s"
    data = bytearray(shard.read_bytes())
    data[40] ^= 0xFF  # a byte of record 0's first payload
    shard.write_bytes(bytes(data))
    ds = l3.open_dataset(out)
    with pytest.raises(l3.FormatError, match="checksum"):
        ds[0]
    m = json.loads((out / "manifest.json").read_text())
    m["arrays"][0]["shape"] = [3, 12, 11]
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(l3.FormatError, match="not the manifest's"):
        l3.open_dataset(out)
    with pytest.raises(l3.FormatError, match="tensor dataset"):
        l3.Dataset(out)


def l3_binary():
    candidates = [os.environ.get("L3_BIN")]
    for target in (os.environ.get("CARGO_TARGET_DIR"), str(REPO / "target")):
        if target:
            candidates.append(os.path.join(target, "release", "l3"))
    candidates.append(shutil.which("l3"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    if in_ci():
        pytest.fail("CI=true but no l3 binary (set L3_BIN or build the CLI)")
    pytest.skip("no l3 binary (set L3_BIN or build the CLI)")


def test_unpack_writes_npy_files_numpy_loads(tmp_path):
    binary = l3_binary()
    samples = [make_sample(i) for i in range(3)]
    l3.pack_arrays(samples, tmp_path / "ds", modes=MODES, keys=[f"run/a{i}" for i in range(3)])
    subprocess.run([binary, "unpack", str(tmp_path / "ds"), "-o", str(tmp_path / "out")], check=True)
    for i, src in enumerate(samples):
        folder = tmp_path / "out" / "run" / f"a{i}"
        assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.npy" for n in MODES)
        for name in ("input", "mask", "coef", "half", "count"):
            got = np.load(folder / f"{name}.npy")
            assert got.dtype == src[name].dtype and np.array_equal(got, src[name]), name
        target = np.load(folder / "target.npy")
        assert np.array_equal(target, l3.open_dataset(tmp_path / "ds")[i]["target"], equal_nan=True)


def test_error_bounded_arrays_of_one_and_four_axes(tmp_path):
    """1- and 4-axis float32 arrays are stored error-bounded (.l3f version 3) within their
    bound, NaN kept, and the CPU loader reads them whole."""
    rng = np.random.default_rng(3)
    samples = []
    for i in range(5):
        signal = np.cumsum(rng.standard_normal(500)).astype(np.float32)
        signal[7] = np.nan
        grid = np.sin(np.arange(2 * 3 * 6 * 8, dtype=np.float32) * 0.1 + i).reshape(2, 3, 6, 8)
        samples.append({"signal": signal, "grid": grid})
    out = tmp_path / "ds"
    l3.pack_arrays(samples, out, modes={"signal": {"relative": 1e-3}, "grid": {"absolute": 1e-3}})
    ds = l3.open_dataset(out)
    for i, s in enumerate(samples):
        rec, info = ds[i], ds.record(i)
        bound = {a["name"]: a["bound"] for a in info["arrays"]}
        span = float(np.nanmax(s["signal"])) - float(np.nanmin(s["signal"]))  # in f64
        assert 0 < bound["signal"] <= 1e-3 * span
        assert np.isnan(rec["signal"][7])
        ok = ~np.isnan(s["signal"])
        assert np.abs(rec["signal"][ok] - s["signal"][ok]).max() <= bound["signal"]
        assert np.abs(rec["grid"] - s["grid"]).max() <= bound["grid"] <= 1e-3
    got = {}
    for b in l3.Loader(out, 2, end_epoch=1):
        for k, n in enumerate(b["samples"]):
            got[int(n)] = b["grid"][k]
    assert sorted(got) == list(range(5))
    for n, grid in got.items():
        assert np.abs(grid - samples[n]["grid"]).max() <= 1e-3


def test_the_smaller_field_format_for_2_and_3_axes(tmp_path):
    """``"format": "v3"``: error-bounded arrays of 2 or 3 axes as .l3f version 3 (smaller on a
    smooth field), read back within the bound with NaN and the fill value exact; a rerun with
    the other format is other options; an unknown format or one without a bound is refused."""
    y, x = np.mgrid[0:64, 0:80]
    samples = []
    for i in range(4):
        f = (np.sin(0.11 * x + i) * np.cos(0.07 * y) * 3.0).astype(np.float32)
        f[5, 7] = -9999.0
        f[9, 2] = np.nan
        # g's plane 1 holds -19998 (not the fill value): a range too wide for 1e-3 in the
        # bins may store g exactly (a lossless record under an error-bounded declaration),
        # and the dataset must still open (Rust: a_dataset_with_an_array_stored_exactly...).
        samples.append({"f": f, "g": np.stack([f, 2 * f])})
    sizes = {}
    for fmt in ("v1", "v3"):
        out = tmp_path / fmt
        mode = {"absolute": 1e-3, "fill_value": -9999.0, "format": fmt}
        summary = l3.pack_arrays(samples, out, modes=mode, samples_per_shard=2)
        sizes[fmt] = summary["bytes"]
        ds = l3.open_dataset(out)
        for i, s in enumerate(samples):
            for name in ("f", "g"):
                got, want = ds[i][name], s[name]
                regular = np.isfinite(want) & (want != -9999.0)
                assert np.abs(got[regular] - want[regular]).max() <= 1e-3
                assert np.array_equal(got[~regular], want[~regular], equal_nan=True)
        with pytest.raises(l3.L3IOError, match="other options"):
            other = {**mode, "format": "v3" if fmt == "v1" else "v1"}
            l3.pack_arrays(samples, out, modes=other, samples_per_shard=2)
    assert sizes["v3"] < sizes["v1"], sizes
    for bad in ({"absolute": 1e-3, "format": "v2"}, {"mode": "raw", "format": "v3"}):
        with pytest.raises(l3.ParameterError, match="format"):
            l3.pack_arrays(samples, tmp_path / "bad", modes=bad)
