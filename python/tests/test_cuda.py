"""GPU batches into CUDA: the export half everywhere a GPU adapter can export memory (lavapipe
in CI), the CUDA import half only where an NVIDIA GPU, torch with CUDA and cuda-python are
present."""

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


def cuda_ready():
    try:
        import torch
        from cuda.bindings import runtime  # noqa: F401
    except ImportError:
        return False
    adapter = l3.gpu_adapter() or ""
    return torch.cuda.is_available() and "nvidia" in adapter.lower()


@pytest.mark.skipif(not cuda_ready(), reason="needs an NVIDIA GPU, torch with CUDA, cuda-python")
def test_cuda_tensor_equals_the_cpu_decode():
    import torch

    from l3.cuda import decode_batch_cuda

    files, arrays = files_and_arrays()
    t = decode_batch_cuda(files)
    assert t.is_cuda and tuple(t.shape) == (len(arrays),) + arrays[0].shape
    assert np.array_equal(t.cpu().numpy(), np.stack(arrays))
    del t
    torch.cuda.synchronize()
