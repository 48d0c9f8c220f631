"""The loader over tensor datasets from Python: whole arrays equal ``open_dataset(path)[i]``,
windows equal the records cut by hand (origin, flips, numpy.rot90) for the windows the
loader reports, input and target share each window, normalisation by the manifest's
statistics, float16, the cache, resume from the state, refused options, and PyTorch: two
DataLoader workers give each sample once per epoch, state_dict resumes exactly. On a GPU
adapter (lavapipe in CI; with ``CI=true`` a missing adapter fails) ``device="gpu"`` gives the
CPU path's batches byte for byte, through ``l3.Loader`` and ``L3IterableDataset``, read
back or handed off (``GpuBatch`` views, pooled host tensors)."""

import os

import numpy as np
import pytest
import torch

import l3
from l3.torch import L3DataLoader, L3IterableDataset

RECORDS = 13


def make_sample(i):
    rng = np.random.default_rng(i)
    inp = rng.standard_normal((2, 12, 10)).astype(np.float32)
    return {
        "input": inp,
        "target": inp * np.float32(2) + np.float32(1),
        "eb": np.cos(np.arange(120, dtype=np.float32).reshape(12, 10) * 0.1 + i),
        "mask": (rng.random((12, 10)) > 0.5).astype(np.uint8),
    }


MODES = {"input": "lossless", "target": "raw", "eb": {"absolute": 1e-3}, "mask": "raw"}
NAMES = list(MODES)


@pytest.fixture(scope="module")
def tensors(tmp_path_factory):
    out = tmp_path_factory.mktemp("tensors")
    l3.pack_arrays(
        (make_sample(i) for i in range(RECORDS)), out, modes=MODES, samples_per_shard=4,
        labels=[i % 3 for i in range(RECORDS)],
    )
    return out


def batches(path, batch_size=4, **options):
    with l3.Loader(path, batch_size, end_epoch=options.pop("end_epoch", 1), **options) as loader:
        return list(loader)


def cut(x, origin, size, flip, k):
    """A record's array cut by hand: the window on the last axes, flips, then numpy.rot90."""
    n = len(origin)
    index = (Ellipsis,) + tuple(slice(o, o + s) for o, s in zip(origin, size))
    y = x[index]
    for axis in range(n):
        if flip[axis]:
            y = np.flip(y, axis=y.ndim - n + axis)
    return np.rot90(y, k, axes=(-2, -1))


def test_whole_arrays_equal_the_records(tensors):
    ds = l3.open_dataset(tensors)
    seen = []
    for b in batches(tensors, 4, seed=3):
        assert b["arrays"] == NAMES and b["windows"] is None
        n = len(b["samples"])
        assert b["input"].shape == (n, 2, 12, 10) and b["input"].dtype == np.float32
        assert b["mask"].shape == (n, 12, 10)
        assert list(b["labels"]) == [s % 3 for s in b["samples"]]
        for k, s in enumerate(b["samples"]):
            record = ds[int(s)]
            for name in NAMES:
                np.testing.assert_array_equal(b[name][k], record[name].astype(np.float32))
            seen.append(int(s))
    assert sorted(seen) == list(range(RECORDS))


@pytest.mark.parametrize("normalize", [False, True])
def test_windows_equal_the_records_cut_by_hand(tensors, normalize):
    ds = l3.open_dataset(tensors)
    stats = ds.stats
    turns = set()
    for b in batches(tensors, 5, seed=9, end_epoch=2, crop=(6, 6), flips=True, rot90=True,
                     normalize=normalize):
        w = b["windows"]
        n = len(b["samples"])
        assert w["origin"].shape == (n, 2) and w["flip"].dtype == np.bool_
        assert b["input"].shape == (n, 2, 6, 6) and b["eb"].shape == (n, 6, 6)
        for k, s in enumerate(b["samples"]):
            origin, size = w["origin"][k], w["size"][k]
            assert list(size) == [6, 6]
            assert 0 <= origin[0] <= 6 and 0 <= origin[1] <= 4
            turns.add((int(w["rot90"][k]), tuple(w["flip"][k])))
            record = ds[int(s)]
            for name in NAMES:
                x = cut(record[name], origin, size, w["flip"][k], int(w["rot90"][k]))
                if normalize and name in stats:
                    mean, std = stats[name]["mean"], stats[name]["std"]
                    # In f32: (x - mean) * (1 / std), mean and 1 / std rounded once to f32.
                    want = (x.astype(np.float32) - np.float32(mean)) * np.float32(1.0 / std)
                else:
                    want = x.astype(np.float32)
                np.testing.assert_array_equal(b[name][k], want, err_msg=f"{name} of {s}")
            if not normalize:
                np.testing.assert_array_equal(b["target"][k], b["input"][k] * 2 + 1)
    assert "mask" not in stats and "input" in stats
    assert len(turns) > 4, turns


def test_float16_and_the_cache(tensors):
    f32 = batches(tensors, 4, seed=1, crop=(4, 4), normalize=True)
    f16 = batches(tensors, 4, seed=1, crop=(4, 4), normalize=True, dtype="float16")
    for x, y in zip(f32, f16):
        assert y["input"].dtype == np.float16
        np.testing.assert_array_equal(y["input"], x["input"].astype(np.float16))
    got = batches(tensors, 4, seed=1, end_epoch=2, cache_mb=1)
    read = {e: sum(b["bytes_read"] for b in got if b["epoch"] == e) for e in (0, 1)}
    assert read[0] > 0 and read[1] == 0, read
    assert got[-1]["cache"]["hits"] == RECORDS and got[-1]["cache"]["accesses"] == 2 * RECORDS


def test_resume_from_the_state(tensors):
    options = dict(seed=7, end_epoch=2, crop=(6, 6), flips=True)
    full = batches(tensors, 3, **options)
    with l3.Loader(tensors, 3, **options) as loader:
        head = [next(loader) for _ in range(2)]
        seed, epoch, consumed = loader.state()
    assert (epoch, consumed) == (0, 6)
    rest = batches(tensors, 3, **dict(options, epoch=epoch, consumed=consumed))
    assert len(head) + len(rest) == len(full)
    for x, y in zip(head + rest, full):
        assert list(x["samples"]) == list(y["samples"])
        for name in NAMES:
            np.testing.assert_array_equal(x[name], y[name])


def test_refused_options(tensors, dataset3, tmp_path):
    with pytest.raises(l3.ParameterError, match="extent"):
        l3.Loader(tensors, 4, crop=(13, 6))
    with pytest.raises(l3.ParameterError, match="window size"):
        l3.Loader(tensors, 4, crop=True)
    with pytest.raises(l3.ParameterError, match="2 or 3"):
        l3.Loader(tensors, 4, crop=(6,))
    with pytest.raises(l3.ParameterError, match="spatial must be 2 or 3"):
        l3.Loader(tensors, 4, spatial=-1)
    with pytest.raises(l3.ParameterError, match="disagrees"):
        l3.Loader(tensors, 4, crop=(6, 6), spatial=3)
    with pytest.raises(l3.ParameterError, match="square"):
        l3.Loader(tensors, 4, crop=(6, 4), rot90=True)
    with pytest.raises(l3.ParameterError, match="tensor datasets"):
        l3.Loader(dataset3, 4, flips=True)
    with pytest.raises(l3.ParameterError, match="tensor dataset"):
        l3.Loader(dataset3, 4, crop=(6, 6))
    clash = tmp_path / "clash"
    l3.pack_arrays([{"samples": np.zeros((4, 4), np.float32)}], clash)
    with pytest.raises(l3.ParameterError, match="samples"):
        l3.Loader(clash, 1)


def torch_samples(loader):
    out = []
    for b in loader:
        assert isinstance(b["input"], torch.Tensor) and b["input"].shape[1:] == (2, 6, 6)
        torch.testing.assert_close(b["target"], b["input"] * 2 + 1, rtol=0, atol=0)
        out.extend(int(s) for s in b["samples"])
    return out


def test_two_torch_workers_give_each_sample_once_per_epoch(tensors):
    ds = L3IterableDataset(tensors, 2, seed=5, crop=(6, 6), flips=True, rot90=True)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in range(2):
        ds.set_epoch(epoch)
        assert sorted(torch_samples(loader)) == list(range(RECORDS))
    # The same order as one process: workers take the rank's steps round-robin.
    one = L3IterableDataset(tensors, 2, seed=5, crop=(6, 6), flips=True, rot90=True)
    ds.set_epoch(0)
    assert torch_samples(loader) == torch_samples(L3DataLoader(one))


def test_torch_state_dict_resumes_exactly(tensors):
    def make():
        return L3DataLoader(L3IterableDataset(l3.open_dataset(tensors), 3, seed=2, crop=(6, 6)))

    full = make()
    everything = [(int(s), b["input"][k].clone()) for b in full for k, s in enumerate(b["samples"])]
    first = make()
    it = iter(first)
    head = [next(it) for _ in range(2)]
    state = first.state_dict()
    assert state == {"seed": 2, "epoch": 0, "consumed": 6}
    resumed = make()
    resumed.load_state_dict(state)
    got = [(int(s), b["input"][k]) for b in head + list(resumed) for k, s in enumerate(b["samples"])]
    assert [s for s, _ in got] == [s for s, _ in everything]
    for (_, x), (_, y) in zip(got, everything):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert head[0]["windows"]["origin"].shape == (3, 2)


def test_a_corrupt_record_is_skipped_or_raises(tmp_path):
    out = tmp_path / "ds"
    l3.pack_arrays((make_sample(i) for i in range(RECORDS)), out, modes=MODES, samples_per_shard=4)
    bad = 5
    raw = make_sample(bad)["target"].tobytes()
    shards = sorted(out.glob("*.l3s"))
    hits = [(p, p.read_bytes().find(raw)) for p in shards]
    [(shard, at)] = [(p, i) for p, i in hits if i >= 0]
    data = bytearray(shard.read_bytes())
    data[at + 17] ^= 0x10
    shard.write_bytes(bytes(data))
    key = l3.open_dataset(out).record(bad)["key"]
    got = batches(out, 4, end_epoch=2, crop=(6, 6))
    skipped = [s for b in got for s in b["skipped"]]
    assert [(s["sample"], s["key"], s["shard"]) for s in skipped] == [(bad, key, shard.name)] * 2
    seen = [int(s) for b in got for s in b["samples"]]
    assert bad not in seen and len(seen) == 2 * (RECORDS - 1)
    with pytest.raises(l3.L3Error, match=key):
        batches(out, 4, on_error="fail")
    ds = L3IterableDataset(out, 4, crop=(6, 6))
    with pytest.warns(RuntimeWarning, match="skipped"):
        items = list(L3DataLoader(ds))
    assert sum(b["skipped"] for b in items) == 1


def gpu_cpu_pairs(path, **options):
    cpu = batches(path, 4, end_epoch=2, **options)
    gpu = batches(path, 4, end_epoch=2, device="gpu", **options)
    assert len(cpu) == len(gpu)
    return list(zip(cpu, gpu))


@pytest.mark.parametrize(
    "options",
    [
        dict(seed=4, crop=(6, 6), flips=True, rot90=True, normalize=True),
        dict(seed=4, crop=(6, 6), flips=True, rot90=True, normalize=True, dtype="float16"),
        dict(seed=8, crop=(5, 7), flips=True),
        dict(seed=8),
    ],
)
def test_the_gpu_path_equals_the_cpu_path(tensors, gpu_available, options):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    for c, g in gpu_cpu_pairs(tensors, **options):
        assert list(c["samples"]) == list(g["samples"]) and c["epoch"] == g["epoch"]
        assert list(c["labels"]) == list(g["labels"]) and c["state"] == g["state"]
        assert g["arrays"] == NAMES and g["skipped"] == c["skipped"] == []
        assert (g["bytes_read"], g["read_calls"]) == (c["bytes_read"], c["read_calls"])
        for name in NAMES:
            x, y = c[name], g[name]
            assert x.dtype == y.dtype and x.shape == y.shape, name
            assert x.tobytes() == y.tobytes(), name
        if c["windows"] is None:
            assert g["windows"] is None
        else:
            for key, v in c["windows"].items():
                np.testing.assert_array_equal(v, g["windows"][key])


def test_torch_gpu_batches_equal_the_cpu_batches(tensors, gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    options = dict(seed=6, crop=(6, 6), flips=True, rot90=True, normalize=True)
    cpu = list(L3DataLoader(L3IterableDataset(tensors, 3, **options)))
    on_gpu = L3IterableDataset(tensors, 3, device="gpu", **options)
    gpu = list(L3DataLoader(on_gpu))
    assert len(cpu) == len(gpu)
    for c, g in zip(cpu, gpu):
        assert set(c) == set(g)
        assert torch.equal(c["samples"], g["samples"])
        for name in NAMES:
            assert g[name].device.type == "cpu"
            assert torch.equal(c[name].view(torch.int32), g[name].view(torch.int32)), name
        for key in c["windows"]:
            assert torch.equal(c["windows"][key], g["windows"][key])
    # The pooled hand-off: every array of a batch in one pooled host buffer, each array's
    # tensor equal to the CPU path's; a batch's tensors outlive the next batches.
    pooled = list(L3DataLoader(L3IterableDataset(tensors, 3, device="gpu", output="host",
                                                 **options)))
    assert len(pooled) == len(cpu)
    for c, g in zip(cpu, pooled):
        assert torch.equal(c["samples"], g["samples"])
        for name in NAMES:
            assert g[name].device.type == "cpu" and g[name].is_contiguous()
            assert torch.equal(c[name].view(torch.int32), g[name].view(torch.int32)), name
    # "auto" loads tensors on the CPU: a hand-off needs device="gpu".
    with pytest.raises(l3.ParameterError, match="tensor dataset"):
        list(L3DataLoader(L3IterableDataset(tensors, 3, device="auto", output="host",
                                            **options)))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_gpu_batches_handed_off_hold_the_read_back_arrays(tensors, gpu_available, dtype):
    """`gpu_output="staged"` and `"device"`: a `GpuBatch` under "gpu" whose views (one per
    array, in order) hold the read-back arrays' bytes, copied out and (where the adapter can
    export memory) copied into an export slot."""
    if not gpu_available:
        pytest.skip("no GPU adapter")
    options = dict(seed=6, crop=(6, 6), flips=True, rot90=True, dtype=dtype, end_epoch=2)
    want = list(l3.Loader(tensors, 4, device="gpu", **options))
    for mode in ("staged", "device"):
        got = list(l3.Loader(tensors, 4, device="gpu", gpu_output=mode, **options))
        assert len(got) == len(want)
        slot = None
        for w, g in zip(want, got):
            batch = g["gpu"]
            assert batch.kind == mode and batch.dtype == dtype
            assert [v[0] for v in batch.views] == NAMES == g["arrays"]
            with pytest.raises(l3.ParameterError, match="views"):
                batch.shape
            host = np.zeros(batch.nbytes, np.uint8)
            batch.copy_into(host)
            for name, shape, offset in batch.views:
                data = w[name].tobytes()
                assert tuple(shape) == w[name].shape and offset % 256 == 0
                assert host[offset:offset + len(data)].tobytes() == data, name
            if mode == "device":
                if slot is None:
                    try:
                        slot = batch.new_export_slot(batch.nbytes)
                    except l3.GpuError as e:
                        if os.environ.get("CI") == "true":
                            raise
                        pytest.skip(f"this adapter cannot export memory: {e}")
                batch.export_into(slot)
                size = batch.nbytes + (-batch.nbytes) % 4
                assert slot.read_back(size)[:batch.nbytes] == host.tobytes()
