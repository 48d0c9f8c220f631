"""The PyTorch dataset with real torch: L3DataLoader (in-process, its loader kept between
epochs) and plain DataLoader workers see every sample exactly once per epoch, in the same
order; simulated ranks partition it, and a state_dict resume continues exactly. Fails (does
not skip) without torch when CI=true."""

import multiprocessing
import os

import numpy as np
import pytest

import l3

if os.environ.get("CI") == "true":
    import torch  # noqa: F401  (CI installs torch: its absence is a failure there)
else:
    torch = pytest.importorskip("torch")

from l3.torch import L3DataLoader, L3IterableDataset  # noqa: E402


def epoch_samples(loader):
    batches = list(loader)
    for b in batches:
        assert isinstance(b["images"], torch.Tensor) and b["images"].dtype == torch.float32
        assert b["images"].shape[1:] == (3, 24, 24)
        assert b["labels"].dtype == torch.int64
    return batches, [int(s) for b in batches for s in b["samples"]]


def process_workers(ds, workers, **kwargs):
    """A plain DataLoader running the dataset in `workers` worker processes."""
    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers, **kwargs)


@pytest.mark.parametrize("kind,workers", [("l3", 0), ("l3", 2), ("processes", 2)])
def test_every_sample_once_per_epoch(dataset3, kind, workers):
    n = len(l3.open_dataset(dataset3))
    ds = L3IterableDataset(dataset3, batch_size=2, seed=3, size=(24, 24), threads=1)
    if kind == "l3":
        loader = L3DataLoader(ds, num_workers=workers)
    else:
        loader = process_workers(ds, workers)
    orders = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        batches, seen = epoch_samples(loader)
        assert sorted(seen) == list(range(n)), (epoch, seen)
        assert all(b["epoch"] == epoch for b in batches)
        orders.append(seen)
    assert orders[0] != orders[1], "two epochs in the same order"


def test_worker_processes_give_the_single_process_order(dataset3):
    one = L3DataLoader(L3IterableDataset(dataset3, 2, seed=4, size=(24, 24)), num_workers=0)
    two = process_workers(L3IterableDataset(dataset3, 2, seed=4, size=(24, 24)), 2)
    a, _ = epoch_samples(one)
    b, _ = epoch_samples(two)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.equal(x["samples"], y["samples"])
        assert torch.equal(x["images"], y["images"])


def test_l3_workers_are_threads_of_one_kept_loader(dataset3):
    """num_workers starts no process; the loader kept across epochs (prefetching into the
    next) gives exactly the batches of a new loader per epoch, and an iteration stopped
    mid-epoch continues after the last batch handed out."""
    def fresh(epoch):
        ds = L3IterableDataset(dataset3, 2, seed=6, size=(24, 24))
        ds.set_epoch(epoch)
        return epoch_samples(L3DataLoader(ds))[0]

    ds = L3IterableDataset(dataset3, 2, seed=6, size=(24, 24))
    loader = L3DataLoader(ds, num_workers=2, persistent_workers=True, prefetch_factor=2)
    assert loader.num_workers == 0 and loader.l3_workers == 2
    assert ds._threads(1) >= min(2, len(os.sched_getaffinity(0)))
    got = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        batches = []
        for b in loader:
            assert multiprocessing.active_children() == []
            batches.append(b)
        got.append(batches)
    live = ds._live
    assert live is not None and live.next == (6, 3, 0), "the loader is kept for epoch 3"
    for epoch, batches in enumerate(got):
        want = fresh(epoch)
        assert len(batches) == len(want)
        for x, y in zip(batches, want):
            assert torch.equal(x["samples"], y["samples"])
            assert torch.equal(x["images"], y["images"])
    # Stop epoch 3 after one batch, then iterate again: the rest of epoch 3, same loader.
    want = fresh(3)
    it = iter(loader)
    head = next(it)
    del it
    rest = list(loader)
    assert ds._live is live
    assert [int(s) for b in [head] + rest for s in b["samples"]] == [
        int(s) for b in want for s in b["samples"]
    ]
    # A state from elsewhere opens a new loader.
    loader.load_state_dict({"seed": 6, "epoch": 1, "consumed": 2})
    again = list(loader)
    assert ds._live is not live
    assert [int(s) for b in again for s in b["samples"]] == [
        int(s) for b in got[1][1:] for s in b["samples"]
    ]
    loader.close()
    assert ds._live is None


def test_two_ranks_partition_the_epoch(dataset3):
    n = len(l3.open_dataset(dataset3))
    seen = []
    for rank in range(2):
        ds = L3IterableDataset(dataset3, 2, seed=3, rank=rank, world_size=2, size=(24, 24))
        _, s = epoch_samples(L3DataLoader(ds, num_workers=2))
        seen += s
        _, s = epoch_samples(process_workers(ds, 2))
        seen += s
    assert sorted(seen) == sorted(list(range(n)) * 2)


def test_two_ranks_with_caches_cover_each_epoch(dataset3):
    """With a cache (the locality split, the default), two ranks see each sample once per
    epoch: in-process over two epochs (the loader and its cache kept), and in worker
    processes (a new loader each epoch)."""
    n = len(l3.open_dataset(dataset3))

    def make(rank):
        return L3IterableDataset(dataset3, 2, seed=3, rank=rank, world_size=2, size=(24, 24),
                                 cache_mb=1, threads=1)

    in_process = [L3DataLoader(make(rank)) for rank in range(2)]
    for epoch in range(2):
        seen = []
        for loader in in_process:
            batches, s = epoch_samples(loader)
            assert all(b["epoch"] == epoch for b in batches)
            seen += s
        assert sorted(seen) == list(range(n)), epoch
    seen = []
    for rank in range(2):
        seen += epoch_samples(process_workers(make(rank), 2))[1]
    assert sorted(seen) == list(range(n))


def test_state_dict_resume_continues_exactly(dataset3):
    def make():
        return L3DataLoader(L3IterableDataset(dataset3, 2, seed=8, size=(24, 24)), num_workers=2)

    full, _ = epoch_samples(make())
    loader = make()
    it = iter(loader)
    head = [next(it) for _ in range(2)]
    state = loader.state_dict()
    del it  # the run is killed here
    resumed = make()
    resumed.load_state_dict(state)
    rest, _ = epoch_samples(resumed)
    assert len(head) + len(rest) == len(full)
    for x, y in zip(full, head + rest):
        assert torch.equal(x["samples"], y["samples"])
        assert torch.equal(x["images"], y["images"])
    # The next iteration is the next epoch, from its beginning.
    nxt, seen = epoch_samples(resumed)
    assert all(b["epoch"] == 1 for b in nxt)
    assert sorted(seen) == list(range(len(l3.open_dataset(dataset3))))


def test_misuse_is_refused(dataset3):
    ds = L3IterableDataset(dataset3, 2)
    with pytest.raises(ValueError):
        L3DataLoader(ds, batch_size=4)
    with pytest.raises(TypeError):
        L3DataLoader(ds, num_workers=1, worker_init_fn=print)
    with pytest.raises(TypeError):
        L3DataLoader(ds, num_workers=1, multiprocessing_context="spawn")
    with pytest.raises(l3.ParameterError):
        L3DataLoader(ds, num_workers=-1)
    with pytest.raises(TypeError):
        L3IterableDataset(dataset3, 2, epoch=3)


def test_spawned_workers_and_an_opened_dataset(dataset3):
    """The dataset pickles (spawned workers) even when built from an opened l3.Dataset."""
    n = len(l3.open_dataset(dataset3))
    ds = L3IterableDataset(l3.open_dataset(dataset3), 2, seed=1, size=(24, 24), threads=1)
    loader = process_workers(ds, 2, multiprocessing_context="spawn")
    _, seen = epoch_samples(loader)
    assert sorted(seen) == list(range(n))


def test_skipped_records_are_counted_and_warned_once(tmp_path, dataset3):
    """With on_error="skip", a corrupt record shrinks its batch: each batch says by how many,
    and the first one is reported once as a warning naming the shard and key."""
    import shutil
    import warnings

    copy = tmp_path / "ds"
    shutil.copytree(dataset3, copy)
    shard = copy / "shard-00000.l3s"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF  # inside the first records' level payloads: a checksum error on read
    shard.write_bytes(bytes(data))
    n = len(l3.open_dataset(copy))
    ds = L3IterableDataset(copy, 2, seed=2, size=(24, 24), threads=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = list(L3DataLoader(ds, num_workers=0))
        batches += list(L3DataLoader(ds, num_workers=0))  # a second epoch: no second warning
    skipped = sum(b["skipped"] for b in batches)
    seen = sum(len(b["samples"]) for b in batches)
    assert skipped >= 2 and seen + skipped == 2 * n, (skipped, seen, n)
    assert all(isinstance(b["skipped"], int) for b in batches)
    mine = [w for w in caught if "skipped" in str(w.message)]
    assert len(mine) == 1, [str(w.message) for w in caught]
    assert "shard-00000.l3s" in str(mine[0].message)
