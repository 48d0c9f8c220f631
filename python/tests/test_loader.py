"""The loader from Python (no torch): every sample once per epoch, exact resume, ranks."""

import os

import numpy as np
import pytest

import l3


def run(ds, **kw):
    with l3.Loader(ds, kw.pop("batch_size", 2), size=32, **kw) as loader:
        return list(loader)


def test_one_epoch_sees_each_sample_once(dataset3):
    n = len(l3.open_dataset(dataset3))
    batches = run(dataset3, seed=5, end_epoch=1)
    samples = np.concatenate([b["samples"] for b in batches])
    assert sorted(samples) == list(range(n))
    b = batches[0]
    assert b["images"].shape == (2, 3, 32, 32) and b["images"].dtype == np.float32
    assert b["labels"].dtype == np.int64
    assert batches[-1]["state"] == (5, 1, 0)


def test_resume_is_exact(dataset3):
    full = run(dataset3, seed=9, end_epoch=2)
    k = 2
    seed, epoch, consumed = full[k]["state"]
    rest = run(dataset3, seed=seed, epoch=epoch, consumed=consumed, end_epoch=2)
    assert len(rest) == len(full) - k - 1
    for a, b in zip(full[k + 1 :], rest):
        assert np.array_equal(a["samples"], b["samples"])
        assert np.array_equal(a["images"], b["images"])


def test_reuse_front_puts_the_last_samples_first_and_resumes(dataset3):
    # The reuse order: each epoch's first k samples are the previous epoch's last k; every
    # sample once per epoch; a resume mid-epoch (and with 2 ranks) continues the same order.
    n = len(l3.open_dataset(dataset3))
    k = n // 2
    full = run(dataset3, seed=4, end_epoch=3, reuse_front=k)
    orders = [
        [int(s) for b in full if b["epoch"] == e for s in b["samples"]] for e in range(3)
    ]
    for e in range(3):
        assert sorted(orders[e]) == list(range(n))
    for e in (1, 2):
        assert sorted(orders[e][:k]) == sorted(orders[e - 1][n - k :])
    plain = run(dataset3, seed=4, end_epoch=3)
    assert [int(s) for b in plain if b["epoch"] == 1 for s in b["samples"]] != orders[1]
    first_of_epoch1 = sum(1 for b in full if b["epoch"] == 0)
    seed, epoch, consumed = full[first_of_epoch1]["state"]
    assert epoch == 1 and consumed > 0
    rest = []
    for rank in range(2):
        rest += [
            int(s)
            for b in run(dataset3, seed=seed, epoch=epoch, consumed=consumed, rank=rank,
                         world_size=2, end_epoch=2, reuse_front=k, batch_size=1)
            for s in b["samples"]
        ]
    assert sorted(rest) == sorted(orders[1][consumed:])
    with pytest.raises(l3.ParameterError):
        l3.Loader(dataset3, 2, reuse_front=-1)


def test_ranks_partition_the_epoch(dataset3):
    n = len(l3.open_dataset(dataset3))
    seen = []
    for rank in range(2):
        seen += [s for b in run(dataset3, rank=rank, world_size=2, end_epoch=1) for s in b["samples"]]
    assert sorted(seen) == list(range(n))


def test_locality_split_covers_each_epoch_resumes_and_reads_less(dataset3):
    """With a cache and two ranks, the locality split (the default) gives each sample once per
    epoch across the ranks, reads less after the first epoch than the slices
    (``locality=False``), and a state from it resumes with three ranks."""
    n = len(l3.open_dataset(dataset3))

    def epochs(**kw):
        seen, read = [[] for _ in range(3)], [0] * 3
        for rank in range(2):
            for b in run(dataset3, rank=rank, world_size=2, end_epoch=3, cache_mb=1, seed=3, **kw):
                seen[b["epoch"]] += b["samples"].tolist()
                read[b["epoch"]] += b["bytes_read"]
        return seen, read

    seen, local = epochs()
    for e in seen:
        assert sorted(e) == list(range(n))
    _, slices = epochs(locality=False)
    assert local[0] == slices[0] > 0
    assert sum(local[1:]) < sum(slices[1:]), (local, slices)
    # One global step of epoch 1 on two ranks, then the rest of the epoch on three.
    first, state = [], None
    for rank in range(2):
        with l3.Loader(dataset3, 2, size=32, rank=rank, world_size=2, cache_mb=1, seed=3,
                       epoch=1, end_epoch=2) as loader:
            b = next(iter(loader))
            first += b["samples"].tolist()
            state = b["state"]
    seed, epoch, consumed = state
    assert (epoch, consumed) == (1, len(first))
    rest = []
    for rank in range(3):
        rest += [s for b in run(dataset3, rank=rank, world_size=3, cache_mb=1, seed=seed,
                                epoch=epoch, consumed=consumed, end_epoch=2)
                 for s in b["samples"].tolist()]
    assert sorted(first + rest) == list(range(n))


def test_float16_and_levels(dataset3):
    b16 = run(dataset3, dtype="float16", end_epoch=1)[0]
    b32 = run(dataset3, end_epoch=1)[0]
    assert b16["images"].dtype == np.float16
    assert np.allclose(b16["images"].astype(np.float32), b32["images"], atol=2e-3, rtol=1e-3)
    low = run(dataset3, level=0, end_epoch=1)
    assert low[0]["images"].shape == (2, 3, 32, 32)


def test_bad_options(dataset3):
    for bad in (
        dict(drop_last="sometimes"),
        dict(dtype="int8"),
        dict(device="tpu"),
        dict(level=7),
        dict(worker=2, num_workers=2),
        dict(mean=[0.1] * 5),
        dict(scale=[1.0, 0.5]),
        dict(max_imbalance=3),
        dict(max_imbalance=-1),
    ):
        with pytest.raises(l3.ParameterError):
            l3.Loader(dataset3, 2, **bad)
    with pytest.raises(l3.L3IOError):
        l3.Loader("/nonexistent/dataset", 2)


def test_gpu_loader_matches_the_cpu_loader(dataset3, gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    cpu = run(dataset3, seed=6, end_epoch=1)
    gpu = run(dataset3, seed=6, end_epoch=1, device="gpu")
    assert len(cpu) == len(gpu)
    for a, b in zip(cpu, gpu):
        assert np.array_equal(a["samples"], b["samples"])
        # The stated tolerance of the GPU augmentation (float rounding of the resampling).
        assert np.abs(a["images"] - b["images"]).max() <= 1e-4


def test_a_forked_copy_of_an_open_loader_is_refused_and_never_joined(dataset3):
    """A process forked while a loader runs (a DataLoader worker, say) has a copy of the
    loader without its threads: using it is a ParameterError, closing or collecting it returns
    at once (joining threads that are not there would hang), and the parent's loader goes on."""
    import gc
    import signal
    import time

    n = len(l3.open_dataset(dataset3))
    loader = l3.Loader(dataset3, 2, size=(24, 24), threads=1, end_epoch=1)
    first = next(loader)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                next(loader)
            except l3.ParameterError as e:
                code = 0 if "another process" in str(e) else 2
            loader.close()
            del loader
            gc.collect()
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the loader's copy")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    rest = [int(s) for b in loader for s in b["samples"]]
    assert sorted([int(s) for s in first["samples"]] + rest) == list(range(n))
    loader.close()
