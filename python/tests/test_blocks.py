"""Block-coded arrays (`l3.encode_blocks` / `l3.decode_blocks`, the GPU's in-memory format of
activations): within the stored bound, signs and zeros kept, special values exact; every
malformed stream refused; a stream in l3's GPU memory (`GpuEncodeStaging.encode_blocks`) is
the host encoder's bytes, and decodes on the GPU to the host decoder's values bit for bit."""

import numpy as np
import pytest

import l3


def activations(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    x[rng.random(n) < 0.4] = 0.0  # ReLU zeros
    return x


@pytest.mark.parametrize("bound", [1e-4, 1e-2, 0.3])
def test_values_come_back_within_the_stored_bound(bound):
    x = activations(7 * 14_300, 1)
    x[5], x[77], x[900] = np.nan, np.inf, -1e30
    data = l3.encode_blocks(x.reshape(7, -1)[:, :14_000], max_error=bound)  # any shape, C order
    y = l3.decode_blocks(data)
    xs = x.reshape(7, -1)[:, :14_000].reshape(-1)
    assert y.shape == xs.shape and y.dtype == np.float32
    ok = np.isfinite(xs)
    assert np.abs(y[ok].astype(np.float64) - xs[ok]).max() <= bound
    assert np.array_equal(np.sign(y[ok]), np.sign(xs[ok])), "signs and zeros kept"
    assert np.array_equal(y[~ok].view(np.uint32), xs[~ok].view(np.uint32))
    assert len(data) < xs.nbytes / 2


def test_every_malformed_stream_is_refused():
    x = activations(5000, 2)
    data = l3.encode_blocks(x, max_error=1e-2)
    for cut in (0, 8, 16, len(data) - 4):
        with pytest.raises(l3.FormatError):
            l3.decode_blocks(data[:cut])
    with pytest.raises(l3.FormatError):
        l3.decode_blocks(b"XXXX" + data[4:])
    with pytest.raises(l3.LimitsError):
        l3.decode_blocks(data, limits=l3.Limits(max_output_bytes=4 * 4999))
    rng = np.random.default_rng(3)
    for _ in range(300):
        bad = bytearray(data)
        i = int(rng.integers(len(bad)))
        bad[i] ^= 1 << int(rng.integers(8))
        try:
            y = l3.decode_blocks(bytes(bad))
        except l3.FormatError:
            continue
        assert y.dtype == np.float32
    with pytest.raises(l3.ParameterError):
        l3.encode_blocks(x, max_error=-1.0)


def staging_or_skip(size, gpu_available):
    if not gpu_available:
        pytest.skip("no GPU adapter")
    try:
        return l3._l3.GpuEncodeStaging(size)
    except l3.GpuError as e:
        if "external_memory" in str(e) or "export" in str(e):
            pytest.skip(f"this Vulkan device exports no memory: {e}")
        raise


def test_a_stream_in_gpu_memory_is_the_host_encoders(gpu_available):
    x = activations(70_001, 4)
    x[10] = np.nan
    staging = staging_or_skip(x.nbytes + 4096, gpu_available)
    staging.write(x)
    stream = staging.encode_blocks(x.size, max_error=1e-3)
    want = l3.encode_blocks(x, max_error=1e-3)
    assert stream.values == x.size and stream.nbytes == len(want)
    assert stream.bound <= 1e-3
    assert stream.to_bytes() == want
    out = staging_or_skip(x.nbytes, gpu_available)
    assert out.decode_blocks_into(stream) == x.size
    got = np.frombuffer(out.read_back(x.nbytes), dtype=np.uint32)
    assert np.array_equal(got, l3.decode_blocks(want).view(np.uint32))
    # Bytes decode the same way (checked on the host first).
    assert out.decode_blocks_into(want) == x.size
    assert np.array_equal(np.frombuffer(out.read_back(x.nbytes), dtype=np.uint32), got)
    with pytest.raises(l3.FormatError):
        out.decode_blocks_into(want[:-4])
    with pytest.raises(l3.ParameterError):
        staging.encode_blocks(x.size + 2000, max_error=1e-3)
    # Rows like the rows above them: the column stride is taken, on the GPU as on the host.
    rows = np.repeat(np.sin(np.arange(96, dtype=np.float32) * 0.37)[None, :], 300, axis=0)
    rows += np.arange(300, dtype=np.float32)[:, None] * 1e-3
    staging.write(rows)
    stream = staging.encode_blocks(rows.size, max_error=1e-3, stride=96)
    want = l3.encode_blocks(rows, max_error=1e-3)
    assert stream.to_bytes() == want
    assert len(want) * 2 < len(l3.encode_blocks(rows, max_error=1e-3, stride=0))
    assert out.decode_blocks_into(stream) == rows.size
    got = np.frombuffer(out.read_back(rows.nbytes), dtype=np.uint32)
    assert np.array_equal(got, l3.decode_blocks(want).view(np.uint32))


def test_batches_of_streams_in_gpu_memory_are_the_host_encoders(gpu_available):
    """Several arrays of one staging buffer encoded in one batch (each its own offset, bound
    and stride) give the host encoder's streams; decoded in one batch (another order, other
    offsets) the host decoder's values; the streams outlive each other in any order (they
    share one buffer); offsets past the buffer or not on a word are refused."""
    arrays = [(activations(5000, 1), 1e-2, 0), (activations(1, 2), 1e-3, 0),
              (activations(96 * 40, 3), 1e-3, 96), (activations(70_001, 4), 5e-3, 1)]
    flat, jobs = [], []
    at = 0
    for x, bound, stride in arrays:
        at += 3  # a gap of 3 values before each
        flat.append(np.zeros(3, dtype=np.float32))
        flat.append(x)
        jobs.append((4 * at, x.size, bound, stride))
        at += x.size
    values = np.concatenate(flat)
    staging = staging_or_skip(values.nbytes, gpu_available)
    staging.write(values)
    streams = staging.encode_blocks_batch(jobs)
    want = [l3.encode_blocks(x, max_error=bound, stride=stride) for x, bound, stride in arrays]
    assert [s.to_bytes() for s in streams] == want
    out = staging_or_skip(values.nbytes + 64, gpu_available)
    order = [3, 0, 2, 1]
    offsets, at = {}, 0
    for k in order:
        offsets[k] = 4 * at
        at += arrays[k][0].size + 1
    out.decode_blocks_batch([(streams[k], offsets[k]) for k in order])
    for k in order:
        n = arrays[k][0].size
        got = np.frombuffer(out.read_back(offsets[k] + 4 * n), dtype=np.uint32)[offsets[k] // 4:]
        assert np.array_equal(got, l3.decode_blocks(want[k]).view(np.uint32)), k
    # The batch's buffer lives while any of its streams does.
    last = streams[2]
    del streams
    assert last.to_bytes() == want[2]
    assert staging.encode_blocks_batch([]) == []
    with pytest.raises(l3.ParameterError):
        staging.encode_blocks_batch([(2, 10, 1e-3, 0)])  # not on a word
    with pytest.raises(l3.ParameterError):
        staging.encode_blocks_batch([(values.nbytes - 8, 10, 1e-3, 0)])
    with pytest.raises(l3.ParameterError):
        staging.encode_blocks_batch([(0, 10, 1e-3, 3)])  # a stride that does not divide 10
    with pytest.raises(l3.ParameterError):
        out.decode_blocks_batch([(last, values.nbytes)])
