"""GPU batches into CUDA: the export half everywhere a GPU adapter can export memory (lavapipe
in CI), the CUDA import half only where an NVIDIA GPU, torch with CUDA and cuda-python are
present. With ``CI=true`` and ``L3_REQUIRE_CUDA=1`` (the GPU machine's run,
``scripts/device-bench.sh``) the CUDA half fails instead of skipping."""

import os

import numpy as np
import pytest

import l3
from l3 import _l3


def files_and_arrays(n=4, shape=(48, 40, 3)):
    rng = np.random.default_rng(7)
    arrays = [rng.integers(0, 255, shape, dtype=np.uint8) for _ in range(n)]
    return [l3.encode(a, profile=("fast", "compact")[i % 2]) for i, a in enumerate(arrays)], arrays


def test_export_gives_an_fd_and_the_layout(gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    files, arrays = files_and_arrays()
    try:
        exported = _l3.decode_batch_export(files)
    except l3.GpuError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"this adapter cannot export memory: {e}")
    assert exported.allocation_size >= exported.size
    assert len(exported.device_uuid) == 16
    images = exported.images
    assert len(images) == len(arrays)
    for (offset, length, w, h, c, depth), a in zip(images, arrays):
        assert offset % 256 == 0 and length == a.nbytes
        assert (h, w, c, depth) == (a.shape[0], a.shape[1], a.shape[2], 8)
    fd = exported.take_fd()
    try:
        st = os.fstat(fd)  # a live descriptor the caller owns
        assert st is not None
    finally:
        os.close(fd)
    with pytest.raises(l3.ParameterError):
        _l3.decode_batch_export([])


def cuda_missing():
    """Why the CUDA half cannot run here, or None when it can."""
    try:
        import torch
        from cuda.bindings import runtime  # noqa: F401
    except ImportError as e:
        return f"torch or cuda-python missing ({e})"
    if not torch.cuda.is_available():
        return "torch has no CUDA device"
    adapter = l3.gpu_adapter() or ""
    if "nvidia" not in adapter.lower():
        return f"l3's GPU is not an NVIDIA one ({adapter or 'none'})"
    return None


def need_cuda():
    why = cuda_missing()
    if why is None:
        return
    if os.environ.get("CI") == "true" and os.environ.get("L3_REQUIRE_CUDA") == "1":
        pytest.fail(f"L3_REQUIRE_CUDA=1 but the CUDA hand-off cannot run: {why}")
    pytest.skip(f"needs an NVIDIA GPU, torch with CUDA, cuda-python: {why}")


def test_cuda_tensor_equals_the_cpu_decode():
    need_cuda()
    import torch

    from l3.cuda import decode_batch_cuda

    files, arrays = files_and_arrays()
    t = decode_batch_cuda(files)
    assert t.is_cuda and tuple(t.shape) == (len(arrays),) + arrays[0].shape
    assert np.array_equal(t.cpu().numpy(), np.stack(arrays))
    del t
    torch.cuda.synchronize()


def test_loader_batches_reach_cuda_without_the_host_and_equal_it(dataset3):
    """``output="cuda"`` (the default here) gives CUDA tensors equal to ``output="host"``'s
    byte for byte over two epochs; live batches never alias; released buffers are reused,
    each imported into CUDA once."""
    need_cuda()
    import torch

    from l3 import _handoff
    from l3.cuda import cuda_device_of_l3
    from l3.torch import L3IterableDataset

    options = dict(size=(40, 32), seed=3, device="gpu")
    assert _handoff.choose_output("gpu", None) == "cuda"
    device = cuda_device_of_l3()

    def run(output, keep):
        ds = L3IterableDataset(dataset3, 4, output=output, **options)
        out = []
        for epoch in range(2):
            ds.set_epoch(epoch)
            for b in ds:
                t = b["images"]
                key = (b["epoch"], int(b["samples"][0]))
                # A copy when not kept, so the pooled buffer is released at once.
                out.append((key, t if keep else t.to("cpu", copy=True), t.data_ptr()))
        return out

    host = run("host", keep=False)
    live = run("cuda", keep=True)
    assert [k for k, _, _ in live] == [k for k, _, _ in host]
    assert len({p for _, _, p in live}) == len(live), "live batches alias"
    for (key, t, _), (_, h, _) in zip(live, host):
        assert t.is_cuda and t.device.index == device and t.is_contiguous()
        # Work on the tensor as a model would, then compare bytes.
        assert torch.equal((t * 1).cpu().view(torch.uint8), h.view(torch.uint8)), key
    del live
    torch.cuda.synchronize()
    pool = _handoff.pool("cuda")
    released = run("cuda", keep=False)
    assert len({p for _, _, p in released}) <= pool.pool.slots
    for (key, t, _), (_, h, _) in zip(released, host):
        assert torch.equal(t.view(torch.uint8), h.view(torch.uint8)), key


def test_tensor_batches_reach_cuda_without_the_host_and_equal_it(tmp_path):
    """A tensor dataset's GPU batches with ``output="cuda"``: every array a CUDA tensor over
    one exported buffer, equal byte for byte to ``output="host"``'s over two epochs, the
    arrays of live batches never aliasing."""
    need_cuda()
    import torch

    from l3.torch import L3IterableDataset

    rng = np.random.default_rng(5)

    def sample(i):
        x = rng.standard_normal((2, 24, 20)).astype(np.float32)
        return {"input": x, "target": x[:1] * np.float32(3),
                "eb": np.sin(x[0] + np.float32(i))}

    l3.pack_arrays((sample(i) for i in range(11)), tmp_path / "t",
                   modes={"input": "lossless", "target": "raw", "eb": {"absolute": 1e-3}},
                   samples_per_shard=4)
    options = dict(seed=2, crop=(16, 16), flips=True, rot90=True, normalize=True,
                   device="gpu")

    def run(output):
        ds = L3IterableDataset(tmp_path / "t", 4, output=output, **options)
        out = []
        for epoch in range(2):
            ds.set_epoch(epoch)
            out.extend(ds)
        return out

    host, cuda = run("host"), run("cuda")
    assert len(host) == len(cuda)
    ptrs = set()
    for h, c in zip(host, cuda):
        assert torch.equal(h["samples"], c["samples"])
        for name in ("input", "target", "eb"):
            t = c[name]
            assert t.is_cuda and t.is_contiguous() and t.shape == h[name].shape
            ptrs.add(t.data_ptr())
            assert torch.equal((t * 1).cpu().view(torch.int32), h[name].view(torch.int32)), name
    assert len(ptrs) == 3 * len(cuda), "live batches alias"
    del cuda
    torch.cuda.synchronize()
