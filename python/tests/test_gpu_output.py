"""The GPU loader's hand-offs on any GPU adapter (lavapipe in CI): batches staged and copied
into pooled host tensors, and batches left on the GPU copied into exported buffers, equal the
read-back arrays byte for byte over several epochs; live batches never alias; pooled buffers
are reused only after release; misuse is a clear error. The CUDA import half is in
test_cuda.py."""

import gc
import os

import numpy as np
import pytest

import l3
from l3 import _l3

torch = pytest.importorskip("torch")

from l3._handoff import HostBatchPool, Slot, SlotPool  # noqa: E402
from l3.torch import L3IterableDataset  # noqa: E402

OPTIONS = dict(size=(40, 32), seed=3)


@pytest.fixture
def gpu(gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")


def reference(dataset, epochs, dtype="float32", batch_size=4):
    """The read-back path's batches (new arrays): {(epoch, first sample): bytes}."""
    out = {}
    for epoch in range(epochs):
        loader = l3.Loader(dataset, batch_size, epoch=epoch, end_epoch=epoch + 1,
                           device="gpu", dtype=dtype, **OPTIONS)
        for b in loader:
            out[(b["epoch"], int(b["samples"][0]))] = (b["images"].shape,
                                                       b["images"].tobytes())
    return out


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_pooled_host_batches_equal_the_read_back_and_never_alias(gpu, dataset3, dtype):
    want = reference(dataset3, 3, dtype)
    ds = L3IterableDataset(dataset3, 4, device="gpu", output="host", dtype=dtype, **OPTIONS)
    live = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        for b in ds:
            t = b["images"]
            assert t.dtype == getattr(torch, dtype) and t.is_contiguous()
            live.append((b["epoch"], int(b["samples"][0]), t))
    assert len(live) == len(want)
    # Every batch is still held: each has its own memory, and none was overwritten by a
    # later one (the pool gave unpooled buffers once its own were all held).
    ptrs = [t.data_ptr() for _, _, t in live]
    assert len(set(ptrs)) == len(ptrs)
    for epoch, first, t in live:
        shape, data = want[(epoch, first)]
        assert tuple(t.shape) == shape
        assert t.numpy().tobytes() == data, f"epoch {epoch}, batch at sample {first}"


def test_released_buffers_are_reused_and_views_keep_theirs(gpu, dataset3):
    want = reference(dataset3, 2)
    pool = HostBatchPool(slots=2, pin=False)
    seen = set()
    kept = None
    for epoch in range(2):
        loader = l3.Loader(dataset3, 4, epoch=epoch, end_epoch=epoch + 1, device="gpu",
                           gpu_output="staged", **OPTIONS)
        for k, b in enumerate(loader):
            t = pool.tensor_of(b["images"])
            key = (b["epoch"], int(b["samples"][0]))
            assert t.numpy().tobytes() == want[key][1]
            seen.add(t.data_ptr())
            if kept is None and k == 0:
                # A view outlives its batch: its buffer must not be reused meanwhile.
                kept = (key, t[1:3])
            del t, b
            gc.collect()
    # One buffer held by the view all along, the other reused batch after batch (no CUDA
    # work to wait for here, no unpooled buffer needed).
    assert pool.pool.made == 2 and len(seen) == 2, seen
    key, view = kept
    n = int(np.prod(want[key][0][1:])) * 4
    assert view.numpy().tobytes() == want[key][1][n:3 * n]


def test_device_batches_export_into_reused_slots_with_equal_bytes(gpu, dataset3):
    want = reference(dataset3, 2)
    slot = None
    for epoch in range(2):
        loader = l3.Loader(dataset3, 4, epoch=epoch, end_epoch=epoch + 1, device="gpu",
                           gpu_output="device", **OPTIONS)
        for b in loader:
            images = b["images"]
            assert images.kind == "device" and images.dtype == "float32"
            shape, data = want[(b["epoch"], int(b["samples"][0]))]
            assert images.shape == shape and images.nbytes == len(data)
            if slot is None:
                try:
                    slot = images.new_export_slot(images.nbytes)
                except l3.GpuError as e:
                    if os.environ.get("CI") == "true":
                        raise
                    pytest.skip(f"this adapter cannot export memory: {e}")
                assert slot.allocation_size >= slot.size >= images.nbytes
                assert len(slot.device_uuid) == 16
                assert slot.device_uuid == _l3.gpu_device_uuid()
                fd = slot.take_fd()
                assert os.fstat(fd) is not None
                os.close(fd)
            images.export_into(slot)
            assert slot.read_back(len(data) + (-len(data)) % 4)[: len(data)] == data
            # The same batch copied to the host (staged on the way) is equal too.
            host = np.zeros(images.nbytes + 8, dtype=np.uint8)
            images.copy_into(host)
            assert host[: len(data)].tobytes() == data and not host[len(data):].any()


def test_misuse_is_a_clear_error(gpu, dataset3):
    with pytest.raises(l3.ParameterError):
        _l3.Loader(str(dataset3), 4, gpu_output="device")  # CPU path
    with pytest.raises(l3.ParameterError):
        _l3.Loader(str(dataset3), 4, device="gpu", gpu_output="cuda")
    with pytest.raises(l3.ParameterError):
        L3IterableDataset(dataset3, 4, output="cuda")  # CPU path
    with pytest.raises(l3.ParameterError):
        L3IterableDataset(dataset3, 4, device="gpu", output="pinned")
    with pytest.raises(TypeError):
        L3IterableDataset(dataset3, 4, device="gpu", gpu_output="staged")
    staged = next(iter(l3.Loader(dataset3, 4, device="gpu", gpu_output="staged", end_epoch=1,
                                 **OPTIONS)))["images"]
    device = next(iter(l3.Loader(dataset3, 4, device="gpu", gpu_output="device", end_epoch=1,
                                 **OPTIONS)))["images"]
    n = staged.nbytes
    for bad in (np.zeros(n - 1, np.uint8), np.zeros(n, np.float32)[: n // 4],
                np.zeros(2 * n, np.uint8)[::2], np.zeros(n, np.uint8).view(np.int8),
                bytearray(n)):
        with pytest.raises(l3.ParameterError):
            staged.copy_into(bad)
    ro = np.zeros(n, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(l3.ParameterError):
        staged.copy_into(ro)
    for bad_call in (lambda: staged.new_export_slot(n), lambda: device.new_export_slot(0)):
        with pytest.raises(l3.ParameterError):
            bad_call()
    try:
        small = device.new_export_slot(8)
    except l3.GpuError:
        return  # no export on this adapter (the test above says whether that may be)
    with pytest.raises(l3.ParameterError):
        device.export_into(small)
    with pytest.raises(l3.ParameterError):
        staged.export_into(small)
    with pytest.raises(l3.GpuError):
        small.read_back(12)


class FakeEvent:
    def __init__(self, done):
        self.done = done
        self.synchronized = False

    def query(self):
        return self.done

    def synchronize(self):
        self.synchronized = True
        self.done = True


def test_slot_pool_waits_for_release_events_and_never_blocks():
    made = []

    def make(n, pooled):
        made.append((n, pooled))
        return Slot(n, pooled, len(made))

    pool = SlotPool(2)
    a, b = pool.take(100, make), pool.take(100, make)
    assert (a.pooled, b.pooled) == (True, True) and pool.made == 2
    # Both held: a third batch gets an unpooled buffer at once.
    c = pool.take(100, make)
    assert not c.pooled and made[-1] == (100, False)
    pool.release(c, None)
    assert len(pool.free) == 0  # unpooled buffers are dropped
    busy, done = FakeEvent(False), FakeEvent(True)
    pool.release(a, busy)
    pool.release(b, done)
    # The one whose CUDA work is done comes first, though released later.
    assert pool.take(100, make) is b
    # Only a busy one left, and the pool is full: wait for its event rather than alias.
    assert pool.take(100, make) is a and busy.synchronized
    # A bigger batch: a free slot too small is let go and a bigger one made.
    pool.release(a, None)
    d = pool.take(200, make)
    assert d.pooled and d.capacity == 200 and d is not a and pool.made == 2
    with pytest.raises(l3.ParameterError):
        SlotPool(0)


def test_in_a_worker_process_batches_are_plain_arrays(gpu, dataset3, monkeypatch):
    """In a data-loading worker (get_worker_info() set) the GPU path hands plain tensors over
    arrays (DataLoader copies them into shared memory anyway): no pool, no CUDA; asking for
    CUDA tensors there is a clear error."""
    import types

    want = reference(dataset3, 1)
    info = types.SimpleNamespace(id=0, num_workers=1)
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: info)
    ds = L3IterableDataset(dataset3, 4, device="gpu", **OPTIONS)
    got = {(b["epoch"], int(b["samples"][0])): b["images"].numpy().tobytes() for b in ds}
    assert got == {k: v[1] for k, v in want.items()}
    with pytest.raises(l3.ParameterError):
        next(iter(L3IterableDataset(dataset3, 4, device="gpu", output="cuda", **OPTIONS)))


def test_cuda_pool_imports_each_slot_once_and_reuses_released_ones(gpu, dataset3, monkeypatch):
    """`CudaBatchPool`'s bookkeeping on any adapter that can export, with a stand-in CUDA
    runtime (the real import runs in test_cuda.py): each exported slot's fd is imported once
    and owned by the import; a batch's slot comes back when its tensor is collected and is
    then reused; the mapping and the import are released when the pool goes."""
    import sys
    import types

    import l3.cuda as lc

    calls = []
    fds = []

    class Desc:
        def __init__(self):
            self.handle = types.SimpleNamespace(fd=-1)

    ok = "ok"
    fake = types.SimpleNamespace(
        cudaError_t=types.SimpleNamespace(cudaSuccess=ok),
        cudaGetErrorString=lambda e: (ok, str(e)),
        cudaExternalMemoryHandleType=types.SimpleNamespace(
            cudaExternalMemoryHandleTypeOpaqueFd=1),
        cudaExternalMemoryDedicated=1,
        cudaExternalMemoryHandleDesc=Desc,
        cudaExternalMemoryBufferDesc=lambda: types.SimpleNamespace(),
        cudaSetDevice=lambda d: (ok,),
        cudaFree=lambda p: calls.append(("free", p)) or (ok,),
        cudaDestroyExternalMemory=lambda m: calls.append(("destroy", m)) or (ok,),
    )

    def import_memory(desc):
        fds.append(desc.handle.fd)
        os.fstat(desc.handle.fd)  # a live fd handed over
        os.close(desc.handle.fd)  # the importer owns it
        calls.append(("import", desc.size))
        return ok, f"mem{len(fds)}"

    fake.cudaImportExternalMemory = import_memory
    fake.cudaExternalMemoryGetMappedBuffer = lambda m, b: (ok, 0x1000 * len(fds))
    bindings = types.ModuleType("cuda.bindings")
    bindings.runtime = fake
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", fake)
    monkeypatch.setattr(lc, "cuda_device_of_l3", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device", lambda d: __import__("contextlib").nullcontext())
    monkeypatch.setattr(torch, "as_tensor", lambda obj, device: obj)  # the mapping itself

    pool = lc.CudaBatchPool(slots=2)
    loader = l3.Loader(dataset3, 4, device="gpu", gpu_output="device", end_epoch=3, **OPTIONS)
    try:
        ptrs = []
        held = None
        for k, b in enumerate(loader):
            try:
                m = pool.tensor_of(b["images"])
            except l3.GpuError as e:
                if os.environ.get("CI") == "true":
                    raise
                pytest.skip(f"this adapter cannot export memory: {e}")
            cai = m.__cuda_array_interface__
            n, c, h, w = b["images"].shape
            assert cai["shape"] == (n, c, h, w) and cai["typestr"] == "<f4"
            assert cai["strides"] == (c * h * w * 4, h * w * 4, w * 4, 4)
            ptrs.append(cai["data"][0])
            if k == 0:
                held = m  # one batch kept alive: its slot is never handed out again
            del m, b
            gc.collect()
    finally:
        loader.close()
    assert [c for c in calls if c[0] == "import"] == [("import", calls[0][1])] * 2
    assert ptrs[0] not in ptrs[1:], "a held batch's slot was reused"
    assert len(set(ptrs[1:])) == 1, "released slots were not reused"
    del held
    gc.collect()
    assert pool.pool.made == 2 and len(pool.pool.free) == 2
    del pool
    gc.collect()
    assert sorted(c[0] for c in calls if c[0] != "import") == ["destroy"] * 2 + ["free"] * 2
