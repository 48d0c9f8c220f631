"""l3.open_source over real HDF5, NetCDF-4 and Zarr (v3 and v2) files written here with h5py,
netCDF4 and zarr: every sample against NumPy slicing of the same data, block reads, fill
values, attributes, CF scale/offset, hostile stores, the command line, and packing through
l3.pack_arrays into a dataset read back with l3.open_dataset."""

import io
import json
import math
import subprocess
import sys

import h5py
import netCDF4
import numpy as np
import pytest
import zarr

import l3
from l3._commands import parse_mode, parse_modes

T, H, W = 23, 40, 30
CHUNKS = (4, 20, 15)
FILL = -9999.0
STORES = ["hdf5", "netcdf", "zarr3", "zarr2"]


@pytest.fixture(scope="module")
def data():
    """u, v, p of shape (T, H, W) float32: smooth fields plus noise, a few fill cells."""
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:H, 0:W] / 7.0
    t = np.arange(T)[:, None, None] / 5.0
    out = {}
    for k, name in enumerate(("u", "v", "p")):
        f = np.sin(x + t * (k + 1)) * np.cos(y - t) + 0.01 * rng.standard_normal((T, H, W))
        f = f.astype(np.float32)
        f[rng.random((T, H, W)) < 0.02] = FILL
        out[name] = f
    return out


def write_store(kind, path, data, chunks=CHUNKS, fill=FILL):
    """Writes data's variables (all (T, ...)) to a chunked store with a fill value, a
    `units` attribute and `time` as the first dimension's name."""
    if kind == "hdf5":
        with h5py.File(path, "w") as f:
            for name, arr in data.items():
                ds = f.create_dataset(
                    name, data=arr, chunks=chunks, fillvalue=fill, compression="gzip"
                )
                ds.attrs["units"] = "m/s"
                ds.dims[0].label = "time"
    elif kind == "netcdf":
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", None)
            nc.createDimension("y", H)
            nc.createDimension("x", W)
            for name, arr in data.items():
                v = nc.createVariable(
                    name,
                    arr.dtype,
                    ("time", "y", "x"),
                    chunksizes=chunks,
                    fill_value=fill,
                    zlib=True,
                )
                v.units = "m/s"
                v[:] = arr
    else:
        fmt = 3 if kind == "zarr3" else 2
        g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
        for name, arr in data.items():
            extra = {"dimension_names": ("time", "y", "x")} if fmt == 3 else {}
            a = g.create_array(
                name, shape=arr.shape, chunks=chunks, dtype=arr.dtype, fill_value=fill, **extra
            )
            a[:] = arr
            a.attrs["units"] = "m/s"
            if fmt == 2:
                a.attrs["_ARRAY_DIMENSIONS"] = ["time", "y", "x"]
    return path


def store_path(tmp_path, kind, name="run"):
    return tmp_path / (
        name + {"hdf5": ".h5", "netcdf": ".nc", "zarr3": ".zarr", "zarr2": ".zarr"}[kind]
    )


@pytest.fixture(scope="module", params=STORES)
def store(request, tmp_path_factory, data):
    kind = request.param
    return kind, write_store(kind, store_path(tmp_path_factory.mktemp(kind), kind), data)


def test_every_sample_matches_numpy(store, data):
    kind, path = store
    with l3.open_source(path, {"input": ["u", "v"], "target": ["p"]}) as src:
        assert src.kind == ("zarr" if kind.startswith("zarr") else kind)
        assert len(src) == T
        assert src.arrays["input"].shape == (2, H, W) and src.arrays["target"].shape == (1, H, W)
        assert src.arrays["input"].dtype == np.float32
        assert src.arrays["input"].fill_value == FILL
        assert src.variables["u"].attrs["units"] == "m/s"
        assert src.variables["u"].chunks == CHUNKS
        n = 0
        for i, sample in enumerate(src):
            assert set(sample) == {"input", "target"}
            assert sample["input"].dtype == np.float32 and sample["input"].flags.c_contiguous
            np.testing.assert_array_equal(sample["input"], np.stack([data["u"][i], data["v"][i]]))
            np.testing.assert_array_equal(sample["target"], data["p"][i][None])
            n += 1
        assert n == T
        np.testing.assert_array_equal(src[-1]["input"][1], data["v"][T - 1])


def test_plain_names_by_dimension_name_and_range(store, data):
    kind, path = store
    with l3.open_source(path, ["p", "u"], sample_axis="time", start=5, stop=17) as src:
        assert len(src) == 12
        assert src.keys()[0] == "000005"
        got = list(src)
        assert len(got) == 12
        for k, sample in enumerate(got):
            np.testing.assert_array_equal(sample["p"], data["p"][5 + k])
            np.testing.assert_array_equal(sample["u"], data["u"][5 + k])


def test_offsets_pair_a_step_with_a_later_one(store, data):
    """offsets={"target": 1}: sample t holds step t as input and step t + 1 as target, over
    the range, with one sample fewer; each block is read once even where a pair crosses a
    chunk boundary; bad offsets are refused."""
    kind, path = store
    spec = {"input": ["u", "v", "p"], "target": ["u", "v", "p"]}
    with l3.open_source(path, spec, start=2, stop=19, offsets={"target": 1}) as src:
        assert len(src) == 16 and src.offsets == {"input": 0, "target": 1}
        assert src.keys()[0] == "000002" and src.keys()[-1] == "000017"
        got = list(src)
        assert len(got) == 16
        for k, sample in enumerate(got):
            t = 2 + k
            want = [np.stack([data[n][s] for n in ("u", "v", "p")]) for s in (t, t + 1)]
            np.testing.assert_array_equal(sample["input"], want[0])
            np.testing.assert_array_equal(sample["target"], want[1])
        spans = [(lo, hi) for v, lo, hi in src.blocks_read if v == "u"]
        assert len(spans) == len(set(spans)), spans
        np.testing.assert_array_equal(src[-1]["target"][2], data["p"][18])
        assert src.meta()["offsets"] == {"input": 0, "target": 1}
    for bad, match in (
        ({"target": -1}, "int >= 0"),
        ({"target": True}, "int >= 0"),
        ({"nope": 1}, "not an array"),
        ({"target": T}, "no samples"),
    ):
        with pytest.raises(l3.ParameterError, match=match):
            l3.open_source(path, spec, offsets=bad)


def test_blocks_are_chunk_aligned_and_held_one_at_a_time(store):
    kind, path = store
    with l3.open_source(path, {"input": ["u", "v"], "target": ["p"]}, start=3) as src:
        for _ in src:
            pass
        rows = CHUNKS[0]
        for name in ("u", "v", "p"):
            spans = [(lo, hi) for v, lo, hi in src.blocks_read if v == name]
            expected = [(max(3, k), min(T, k + rows)) for k in range(0, T, rows) if k + rows > 3]
            assert spans == expected, name
        block = rows * H * W * 4
        assert 0 < src.peak_buffer_bytes <= 3 * block


class CountingFile(io.FileIO):
    """A file that counts the bytes read through it."""

    bytes_read = 0

    def readinto(self, b):
        n = super().readinto(b)
        self.bytes_read += n or 0
        return n

    def read(self, size=-1):
        out = super().read(size)
        self.bytes_read += len(out)
        return out


def test_hdf5_reads_each_chunk_once(tmp_path, data):
    """Blockwise iteration reads no more bytes from the file than one read of everything."""
    path = write_store("hdf5", tmp_path / "c.h5", data)

    def count(consume):
        fh = CountingFile(path)
        with h5py.File(fh, "r") as f:
            consume(f)
        fh.close()
        return fh.bytes_read

    whole = count(lambda f: [f[n][...] for n in ("u", "v", "p")])

    def iterate(f):
        with l3.open_source(f, {"input": ["u", "v"], "target": ["p"]}) as src:
            assert sum(1 for _ in src) == T

    blockwise = count(iterate)
    # Reading one sample at a time (what a reader without blocks does) re-reads chunks.
    per_sample = count(lambda f: [f[n][i] for i in range(T) for n in ("u", "v", "p")])
    print(f"bytes read: all at once {whole}, blockwise {blockwise}, per sample {per_sample}")
    assert blockwise <= whole * 1.05, (blockwise, whole)
    assert per_sample > 2 * blockwise, (per_sample, blockwise)


def test_zarr_reads_each_chunk_once(tmp_path, data):
    path = write_store("zarr3", tmp_path / "c.zarr", data)
    gets = []

    class Counting(zarr.storage.LocalStore):
        async def get(self, key, prototype=None, byte_range=None):
            if "/c/" in key:
                gets.append(key)
            return await super().get(key, prototype, byte_range)

    group = zarr.open_group(Counting(str(path), read_only=True), mode="r")
    with l3.open_source(group, {"input": ["u", "v"]}) as src:
        assert sum(1 for _ in src) == T
    per_var = math.ceil(T / CHUNKS[0]) * (H // CHUNKS[1]) * (W // CHUNKS[2])
    assert len(gets) == 2 * per_var and len(set(gets)) == len(gets)


def test_other_sample_axis_and_broadcast(tmp_path, data):
    path = tmp_path / "axes.h5"
    mask = (np.arange(H * W).reshape(H, W) % 3 == 0).astype(np.float32)
    with h5py.File(path, "w") as f:
        f.create_dataset("u", data=np.moveaxis(data["u"], 0, 2), chunks=(20, 15, 5))  # (H, W, T)
        f.create_dataset("mask", data=mask)
    with pytest.raises(l3.ParameterError, match="'mask'"):
        l3.open_source(path, {"x": ["u", "mask"]}, sample_axis=2)
    with l3.open_source(path, {"x": ["u", "mask"]}, sample_axis=2, broadcast=["mask"]) as src:
        assert src.variables["u"].block == 5
        got = list(src)
        assert len(got) == T
        for i, s in enumerate(got):
            np.testing.assert_array_equal(s["x"], np.stack([data["u"][i], mask]))
    with l3.open_source(path, ["u"], sample_axis=-1) as src:
        np.testing.assert_array_equal(src[4]["u"], data["u"][4])


def test_netcdf_scale_offset_packed_or_unpacked(tmp_path):
    path = tmp_path / "packed.nc"
    rng = np.random.default_rng(3)
    raw = rng.integers(-3000, 3000, size=(T, H, W), dtype=np.int16)
    raw[0, 0, :5] = -32767
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", T)
        nc.createDimension("y", H)
        nc.createDimension("x", W)
        v = nc.createVariable(
            "t2m", "i2", ("time", "y", "x"), chunksizes=(6, H, W), fill_value=-32767
        )
        v.scale_factor = 0.01
        v.add_offset = 273.15
        v.set_auto_maskandscale(False)
        v[:] = raw
    with l3.open_source(path, ["t2m"]) as src:
        assert src.arrays["t2m"].dtype == np.int16 and src.arrays["t2m"].fill_value == -32767
        assert src.variables["t2m"].attrs["scale_factor"] == pytest.approx(0.01)
        for i, s in enumerate(src):
            np.testing.assert_array_equal(s["t2m"], raw[i])
        assert src.modes({"absolute": 0.5}) == {"t2m": {"absolute": 0.5, "fill_value": -32767}}
    with l3.open_source(path, ["t2m"], unpack=True) as src:
        assert src.arrays["t2m"].dtype == np.float32 and math.isnan(src.arrays["t2m"].fill_value)
        scale = src.variables["t2m"].attrs["scale_factor"]
        expected = (raw.astype(np.float64) * scale + 273.15).astype(np.float32)
        expected[raw == -32767] = np.nan
        for i, s in enumerate(src):
            np.testing.assert_array_equal(s["t2m"], expected[i])


def test_modes_carry_fill_values(store):
    _, path = store
    with l3.open_source(
        path, {"input": ["u", "v"], "target": ["p"]}, fill_values={"target": None}
    ) as src:
        assert src.modes() == {
            "input": {"mode": "lossless", "fill_value": FILL},
            "target": "lossless",
        }
        assert src.modes({"input": {"relative": 1e-3}}) == {
            "input": {"relative": 1e-3, "fill_value": FILL},
            "target": "lossless",
        }
        assert src.modes("raw") == {"input": "raw", "target": "raw"}
        with pytest.raises(l3.ParameterError, match="nope"):
            src.modes({"nope": "raw"})
        meta = src.meta()
        assert meta["arrays"]["input"]["variables"] == ["u", "v"]
        assert meta["arrays"]["input"]["variable_info"]["v"]["attrs"]["units"] == "m/s"
        json.dumps(meta)


# ------------------------------------------------------------------------------- hostile


def test_hostile_variables_and_axes(tmp_path):
    path = tmp_path / "h.h5"
    with h5py.File(path, "w", libver="latest") as f:  # latest: attributes over 64 KiB
        f.create_dataset("a", data=np.zeros((8, 4, 4), np.float32))
        f.create_dataset("short", data=np.zeros((7, 4, 4), np.float32))
        f.create_dataset("other", data=np.zeros((8, 4, 5), np.float32))
        f.create_dataset("i", data=np.zeros((8, 4, 4), np.int32))
        f.create_dataset("s", data=np.array([b"x"] * 8))
        f.create_dataset("c", data=np.zeros(8, dtype=[("x", "f4"), ("y", "i4")]))
        f.create_dataset("empty", shape=(0, 4), dtype=np.float32)
        f.create_dataset("six", shape=(2, 1, 1, 1, 1, 1), dtype=np.float32)
        f.create_dataset("vec", data=np.zeros(8, np.float32))
        f.create_dataset("huge", shape=(8, 200_000, 200_000), dtype=np.float32, chunks=(1, 64, 64))
        f.create_dataset(
            "fat_chunks", shape=(8, 4096, 4096), dtype=np.float32, chunks=(8, 4096, 4096)
        )
        f.create_dataset("fill_a", data=np.zeros((8, 4), np.float32), fillvalue=-1)
        f.create_dataset("fill_b", data=np.zeros((8, 4), np.float32), fillvalue=-2)
        f.create_group("g")
        f["a"].attrs["big"] = np.zeros(300_000)  # 2.4 MB: not read
        f["a"].attrs["note"] = "kept"
    cases = [
        (l3.ParameterError, "'missing'", dict(variables=["missing"])),
        (l3.ParameterError, "'g'", dict(variables=["g"])),
        (l3.ParameterError, "no sample axis 3", dict(variables=["a"], sample_axis=3)),
        (l3.ParameterError, "no sample axis 'time'", dict(variables=["a"], sample_axis="time")),
        (l3.ParameterError, "'short' has 7 samples", dict(variables=["a", "short"])),
        (l3.ParameterError, "one dtype and shape", dict(variables={"x": ["a", "other"]})),
        (l3.ParameterError, "one dtype and shape", dict(variables={"x": ["a", "i"]})),
        (l3.ParameterError, "'s' has dtype", dict(variables=["s"])),
        (l3.ParameterError, "'c' has dtype", dict(variables=["c"])),
        (l3.ParameterError, "no samples", dict(variables=["empty"])),
        (l3.ParameterError, "5 axes", dict(variables=["six"])),
        (l3.ParameterError, "scalar", dict(variables=["vec"])),
        (l3.ParameterError, "different fill values", dict(variables={"x": ["fill_a", "fill_b"]})),
        (l3.ParameterError, "stop", dict(variables=["a"], start=2, stop=9)),
        (l3.ParameterError, "twice", dict(variables={"x": ["a", "a"]})),
        (l3.ParameterError, "broadcast", dict(variables=["a"], broadcast=["zz"])),
        (l3.LimitsError, "over the limit", dict(variables=["huge"])),
        (
            l3.LimitsError,
            "dimension 200000",
            dict(variables=["huge"], limits=l3.Limits(max_dimension=1000)),
        ),
        (
            l3.LimitsError,
            "over the limit",
            dict(variables=["a"], limits=l3.Limits(max_output_bytes=32)),
        ),
        (l3.LimitsError, "a chunk", dict(variables=["fat_chunks"])),
        (l3.ParameterError, "no group 'nope'", dict(variables=["a"], group="nope")),
        (l3.ParameterError, "no group 'a'", dict(variables=["a"], group="a")),
    ]
    for error, message, kwargs in cases:
        with pytest.raises(error, match=message):
            l3.open_source(path, **kwargs)
    with l3.open_source(path, ["a"]) as src:
        assert src.variables["a"].attrs == {"note": "kept"}
    with l3.open_source(path, {"x": ["fill_a", "fill_b"]}, fill_values={"x": None}) as src:
        assert src.arrays["x"].fill_value is None and src[0]["x"].shape == (2, 4)


@pytest.mark.filterwarnings("ignore::UserWarning")  # zarr warns about the broken metadata
def test_hostile_files(tmp_path, data):
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5 " * 100)
    with pytest.raises(l3.FormatError, match="not an HDF5, NetCDF or Zarr"):
        l3.open_source(junk, ["u"])
    with pytest.raises(l3.L3IOError):
        l3.open_source(tmp_path / "absent.h5", ["u"])
    folder = tmp_path / "plain"
    folder.mkdir()
    with pytest.raises(l3.FormatError, match="not a Zarr store"):
        l3.open_source(folder, ["u"])

    good = write_store("hdf5", tmp_path / "good.h5", data)
    whole = good.read_bytes()
    cut = tmp_path / "cut.h5"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(l3.FormatError):
        with l3.open_source(cut, ["u", "v", "p"]) as src:
            list(src)

    # Garbled chunk bytes: the gzip filter fails on read.
    with h5py.File(good, "r") as f:
        offset = f["u"].id.get_chunk_info(0).byte_offset
    bad = bytearray(whole)
    bad[offset : offset + 64] = b"\xff" * 64
    garbled = tmp_path / "garbled.h5"
    garbled.write_bytes(bytes(bad))
    with pytest.raises(l3.FormatError, match="'u'"):
        with l3.open_source(garbled, ["u"]) as src:
            list(src)

    z = write_store("zarr3", tmp_path / "bad.zarr", {"u": data["u"]})
    (z / "u" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", "shape": [-5]}')
    with pytest.raises((l3.FormatError, l3.ParameterError)):
        l3.open_source(z, ["u"])
    (z / "zarr.json").write_text("{ not json")
    with pytest.raises(l3.FormatError):
        l3.open_source(z, ["u"])


# --------------------------------------------------------------------------- command line


def test_mode_parsing():
    assert parse_mode("lossless") == "lossless" and parse_mode("raw") == "raw"
    assert parse_mode("abs:1e-3") == {"absolute": 1e-3} and parse_mode("rel:0.01") == {
        "relative": 0.01
    }
    assert parse_mode("rel:1e-3:v3") == {"relative": 1e-3, "format": "v3"}
    assert parse_mode("abs:0.5:v1") == {"absolute": 0.5, "format": "v1"}
    for bad in ("abs:", "abs:-1", "rel:nan", "lossy", "abs:x", "rel:1e-3:v2", "rel:1e-3:"):
        with pytest.raises(l3.ParameterError):
            parse_mode(bad)
    assert parse_modes([], ["input", "target"]) == "lossless"
    assert parse_modes(["rel:1e-2"], ["input"]) == {"relative": 1e-2}
    assert parse_modes(["input=rel:1e-3", "raw"], ["input", "target"]) == {
        "input": {"relative": 1e-3},
        "target": "raw",
    }
    with pytest.raises(l3.ParameterError, match="'x' is not an array"):
        parse_modes(["x=raw"], ["input"])


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "l3", *map(str, args)], capture_output=True, text=True
    )


def test_cli_errors_and_source_info(store, tmp_path):
    _, path = store
    r = run_cli("source-info", path)
    assert r.returncode == 0, r.stderr
    assert "u: float32 [23, 40, 30]" in r.stdout and "fill=-9999.0" in r.stdout
    r = run_cli("pack-arrays", path, "-o", tmp_path / "out", "--input", "u,nope")
    assert r.returncode == 1 and "'nope'" in r.stderr
    r = run_cli("pack-arrays", path, "-o", tmp_path / "out", "--input", "u", "--mode", "abs:0")
    assert r.returncode == 1 and "positive" in r.stderr
    r = run_cli("pack-arrays", path, "-o", tmp_path / "out")
    assert r.returncode == 1 and "--input" in r.stderr
    r = run_cli("pack-arrays", path, "-o", tmp_path / "out", "--input", "u", "--offset", "x")
    assert r.returncode == 1 and "NAME=N" in r.stderr


# ----------------------------------------------------- packing (needs l3.pack_arrays)


def test_pack_arrays_from_sources(store, tmp_path, data):
    """Each store packed with pack_arrays (lossless) through pack_source and through the
    command line, read back with open_dataset: every sample bit-exact; a rerun resumes."""
    kind, path = store
    out = tmp_path / "ds"
    l3.pack_source(path, out, {"input": ["u", "v"], "target": ["p"]}, samples_per_shard=5)
    ds = l3.open_dataset(out)
    assert len(ds) == T
    for i in range(T):
        rec = ds[i]
        np.testing.assert_array_equal(rec["input"], np.stack([data["u"][i], data["v"][i]]))
        np.testing.assert_array_equal(rec["target"], data["p"][i][None])
    meta = json.loads((out / "source.json").read_text())
    assert meta["arrays"]["input"]["variables"] == ["u", "v"]

    def shards():
        return {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.suffix != ".json"}

    before = shards()
    assert len(before) >= math.ceil(T / 5)
    l3.pack_source(path, out, {"input": ["u", "v"], "target": ["p"]}, samples_per_shard=5)
    assert shards() == before

    cli_out = tmp_path / "cli"
    r = run_cli(
        "pack-arrays",
        path,
        "-o",
        cli_out,
        "--input",
        "u,v",
        "--target",
        "p",
        "--start",
        2,
        "--samples-per-shard",
        8,
        "-q",
    )
    assert r.returncode == 0, r.stderr
    ds = l3.open_dataset(cli_out)
    assert len(ds) == T - 2
    np.testing.assert_array_equal(ds[0]["target"], data["p"][2][None])

    pair_out = tmp_path / "pairs"
    r = run_cli(
        "pack-arrays", path, "-o", pair_out, "--input", "u,v", "--target", "u,v",
        "--offset", "target=1", "--mode", "rel:1e-3", "-q",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    ds = l3.open_dataset(pair_out)
    assert len(ds) == T - 1
    for i in (0, T - 2):
        rec = ds[i]
        for name, step in (("input", i), ("target", i + 1)):
            want = np.stack([data["u"][step], data["v"][step]])
            regular = want != FILL
            assert np.array_equal(rec[name] == FILL, ~regular)
            span = float(want[regular].max() - want[regular].min())
            assert np.abs(rec[name][regular] - want[regular]).max() <= 1e-3 * span
