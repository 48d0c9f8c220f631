"""The batches of `compress_activations` on l3's GPU (`l3._activation_gpu.GpuBlocks`) on a
real l3 GPU (lavapipe in CI). CUDA's import of the staging buffers is the one part replaced:
a host tensor stands for the CUDA view, copied to l3's buffer where CUDA's writes would be
complete (`written`) and back where l3's decode has been waited for (`gpu_wrote`). What is
checked: every queued array's stream is the host encoder's, a batch is one submission, the
queue flushes when the next array does not fit, one larger than the buffer gets a buffer of
its own, decodes fill the buffer as far as it holds, and batches of 0 bytes code one array
at a time."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import l3  # noqa: E402
from l3._activation_gpu import GpuBlocks  # noqa: E402


class HostStaging:
    """A `CudaStaging` whose view is host memory, copied to and from l3's buffer."""

    made = []

    def __init__(self, nbytes):
        self.size = nbytes
        self.staging = l3._l3.GpuEncodeStaging(nbytes)
        self.view = torch.zeros(nbytes // 4, dtype=torch.float32)
        HostStaging.made.append(nbytes)

    def written(self):
        self.staging.write(self.view.numpy())

    def gpu_wrote(self):
        data = np.frombuffer(self.staging.read_back(self.size), dtype=np.float32)
        self.view.copy_(torch.from_numpy(data.copy()))

    def reads_done(self):
        pass

    def wait_reads(self):
        pass


@pytest.fixture
def gpu(gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    try:
        l3._l3.GpuEncodeStaging(4096)
    except l3.GpuError as e:
        pytest.skip(f"this Vulkan device exports no memory: {e}")
    HostStaging.made = []


def activations(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n).astype(np.float32)
    x[rng.random(n) < 0.4] = 0.0
    return torch.from_numpy(x)


def queue_all(coder, arrays):
    got = {}
    for k, (x, bound, stride) in enumerate(arrays):
        coder.put(x, bound, stride,
                  lambda s, exact, seconds, error=None, k=k: got.__setitem__(k, (s, exact, error)))
    return got


def test_queued_arrays_are_coded_in_batches_as_the_host_encodes_them(gpu):
    arrays = [(activations(20_000, k), 10.0 ** -(2 + k % 3), 100 if k % 2 else 0)
              for k in range(5)]
    coder = GpuBlocks(50_000 * 4, staging=HostStaging)
    got = queue_all(coder, arrays)
    # 20,000 values each, 50,000 a buffer: the third does not fit, so the first two go;
    # the fifth does not, so the third and fourth go.
    assert sorted(got) == [0, 1, 2, 3] and coder.submissions == 2 and len(coder) == 1
    coder.flush()
    assert sorted(got) == [0, 1, 2, 3, 4] and coder.submissions == 3 and len(coder) == 0
    for k, (x, bound, stride) in enumerate(arrays):
        stream, exact, error = got[k]
        assert exact is None and error is None
        assert stream.to_bytes() == l3.encode_blocks(x.numpy(), max_error=bound, stride=stride)
    assert HostStaging.made == [200_000]
    # Decoded together, as far as the decode buffer holds (50,000 values: two of them).
    wanted = [(got[k][0], (100, 200)) for k in (4, 3, 2)]
    ys = coder.decode(wanted)
    assert len(ys) == 2 and coder.submissions == 4
    for k, y in zip((4, 3), ys):
        want = l3.decode_blocks(got[k][0].to_bytes()).reshape(100, 200)
        assert y.shape == (100, 200) and np.array_equal(y.numpy().view(np.uint32),
                                                        want.view(np.uint32))
    flush_count = coder.submissions
    coder.flush()  # nothing queued: nothing submitted
    assert coder.submissions == flush_count


def test_an_array_larger_than_the_buffer_gets_one_of_its_own(gpu):
    coder = GpuBlocks(4096, staging=HostStaging)
    small, large = activations(100, 1), activations(30_000, 2)
    got = queue_all(coder, [(small, 1e-2, 0), (large, 1e-3, 0)])
    coder.flush()
    assert HostStaging.made == [4096, 120_000] and coder.submissions == 2
    assert got[1][0].to_bytes() == l3.encode_blocks(large.numpy(), max_error=1e-3, stride=0)
    (y,) = coder.decode([(got[1][0], (30_000,))])
    assert np.array_equal(y.numpy(), l3.decode_blocks(got[1][0].to_bytes()))


def test_batches_of_zero_bytes_code_each_array_alone(gpu):
    coder = GpuBlocks(0, staging=HostStaging)
    arrays = [(activations(3000, k), 1e-2, 0) for k in range(3)]
    got = queue_all(coder, arrays)
    assert sorted(got) == [0, 1, 2] and coder.submissions == 3 and len(coder) == 0
    ys = coder.decode([(got[k][0], (3000,)) for k in range(3)])
    assert len(ys) == 1  # a buffer of one array: one decode at a time


def test_an_array_the_codec_cannot_take_is_kept_exactly(gpu):
    coder = GpuBlocks(1 << 20, staging=HostStaging)
    x = activations(4000, 5)
    # A stride that does not divide the count: that one is refused, the others coded.
    got = queue_all(coder, [(x, 1e-2, 0), (x, 1e-2, 3999), (x, 1e-3, 40)])
    coder.flush()
    assert got[1][0] is None and torch.equal(got[1][1], x)
    assert got[0][1] is None and got[2][1] is None
    assert got[2][0].to_bytes() == l3.encode_blocks(x.numpy(), max_error=1e-3, stride=40)


def test_a_failed_batch_fails_every_queued_tensor(gpu):
    """A batch that cannot run (here the copy to l3's buffer fails, as a CUDA error would)
    tells every queued tensor, then raises: none waits for a result that never comes."""
    class Failing(HostStaging):
        def written(self):
            raise RuntimeError("the device is gone")

    coder = GpuBlocks(1 << 20, staging=Failing)
    got = queue_all(coder, [(activations(1000, k), 1e-2, 0) for k in range(3)])
    with pytest.raises(RuntimeError, match="device is gone"):
        coder.flush()
    assert sorted(got) == [0, 1, 2] and len(coder) == 0
    assert all(s is None and e is None and isinstance(err, RuntimeError)
               for s, e, err in got.values())


def test_the_row_stride_is_offered_only_where_it_leaves_whole_blocks():
    from l3._activation_coding import blocks_stride

    assert blocks_stride((4096,)) == 0
    assert blocks_stride((1, 4096)) == 0  # one row: blocks of one value each
    assert blocks_stride((31, 96)) == 0
    assert blocks_stride((32, 96)) == 96
    assert blocks_stride((4, 64, 8, 8)) == 8
    assert blocks_stride((2, 3, 4, 5)) == 0
    assert blocks_stride((10, 0)) == 0
