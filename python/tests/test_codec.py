"""The codec through Python: round trips for every dtype and shape, both profiles, errors on
bad input, decoding into a caller's array, files, and batch decode on the CPU and the GPU."""

import numpy as np
import pytest
from PIL import Image

import l3

SHAPES = [(37, 53), (37, 53, 1), (37, 53, 2), (37, 53, 3), (64, 70, 4), (1, 1), (200, 3, 3)]


def make(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    smooth = np.add.outer(np.arange(shape[0]), np.arange(shape[1])) * (top // 300)
    smooth = smooth.reshape(shape[:2] + (1,) * (len(shape) - 2))
    noise = rng.integers(0, 20, size=shape)
    return ((smooth + noise) % (top + 1)).astype(dtype)


@pytest.mark.parametrize("profile", ["fast", "compact"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip(shape, dtype, profile):
    a = make(shape, dtype)
    data = l3.encode(a, profile=profile)
    assert isinstance(data, bytes)
    h = l3.info(data)
    want_shape = shape[:2] if len(shape) == 2 or shape[2] == 1 else shape
    assert h["shape"] == want_shape
    assert h["dtype"] == np.dtype(dtype).name
    assert h["profile"] == profile
    b = l3.decode(data)
    assert b.dtype == dtype and b.shape == want_shape
    assert np.array_equal(b.reshape(shape), a)


@pytest.mark.parametrize("patch_size", [8, 16, 32, 64, 128])
def test_patch_sizes(patch_size):
    a = make((150, 97, 3), np.uint8)
    data = l3.encode(a, patch_size=patch_size)
    assert l3.info(data)["patch_size"] == patch_size
    assert np.array_equal(l3.decode(data), a)


def test_non_contiguous_arrays_are_copied():
    a = make((80, 120, 3), np.uint8)
    for view in (a[:, ::2], a[::-1], np.asfortranarray(a), a.transpose(1, 0, 2)):
        assert not view.flags.c_contiguous
        assert np.array_equal(l3.decode(l3.encode(view)), view)


def test_bytes_like_inputs():
    a = make((30, 40), np.uint8)
    data = l3.encode(a)
    for form in (bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert np.array_equal(l3.decode(form), a)
        assert l3.info(form)["width"] == 40


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((4, 4), np.float32), "dtype"),
        (np.zeros((4, 4), np.int16), "dtype"),
        (np.zeros((4, 4, 5), np.uint8), "channels"),
        (np.zeros((2, 4, 4, 3), np.uint8), "shape"),
        (np.zeros(7, np.uint8), "shape"),
        (np.zeros((0, 4), np.uint8), "height"),
    ],
)
def test_bad_arrays_are_refused(bad, message):
    with pytest.raises(l3.ParameterError, match=message):
        l3.encode(bad)


def test_bad_options_are_refused():
    a = make((8, 8), np.uint8)
    with pytest.raises(l3.ParameterError, match="profile"):
        l3.encode(a, profile="tiny")
    with pytest.raises(l3.ParameterError, match="patch_size"):
        l3.encode(a, patch_size=48)
    with pytest.raises(ValueError):  # every l3 error of this kind is a ValueError
        l3.encode(a, patch_size=256)


def test_corrupt_data_raises_format_errors():
    a = make((100, 90, 3), np.uint8)
    data = l3.encode(a)
    for bad in (data[:10], data[:len(data) // 2], b"\x00" * 64, b""):
        with pytest.raises(l3.FormatError):
            l3.decode(bad)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10
    with pytest.raises(l3.FormatError, match="checksum|CRC|crc"):
        l3.decode(bytes(flipped))
    with pytest.raises(l3.L3Error):
        l3.info(b"not an l3 file at all")
    with pytest.raises(l3.ParameterError):
        l3.decode("a string")


def test_decode_into_a_callers_array():
    a = make((50, 60, 3), np.uint16)
    data = l3.encode(a)
    out = np.zeros_like(a)
    assert l3.decode(data, out=out) is out
    assert np.array_equal(out, a)
    with pytest.raises(l3.ParameterError, match="shape"):
        l3.decode(data, out=np.zeros((50, 61, 3), np.uint16))
    with pytest.raises(l3.ParameterError, match="dtype"):
        l3.decode(data, out=np.zeros((50, 60, 3), np.uint8))
    with pytest.raises(l3.ParameterError, match="contiguous"):
        l3.decode(data, out=np.zeros((60, 50, 3), np.uint16).transpose(1, 0, 2))
    ro = np.zeros_like(a)
    ro.flags.writeable = False
    with pytest.raises(l3.ParameterError):
        l3.decode(data, out=ro)


def test_files(tmp_path, sample_paths):
    a = make((33, 44, 4), np.uint8)
    path = tmp_path / "x.l3"
    l3.imwrite(path, a)
    assert np.array_equal(l3.imread(path), a)
    assert not list(tmp_path.glob(".*")), "a temp file was left behind"
    with pytest.raises(l3.ParameterError, match=r"\.l3"):
        l3.imwrite(tmp_path / "x.png", a)
    with pytest.raises(l3.L3IOError):
        l3.imread(tmp_path / "missing.l3")
    with pytest.raises(OSError):
        l3.imread(tmp_path / "missing.png")
    # PNG sources read as Pillow reads them; Pillow reads 16-bit RGB as 8-bit (the high
    # bytes), l3 keeps the 16 bits.
    for p in sample_paths:
        with Image.open(p) as im:
            want = np.asarray(im)
        got = l3.imread(p)
        if got.dtype == np.uint16 and want.dtype == np.uint8:
            got = (got >> 8).astype(np.uint8)
        assert np.array_equal(got, want), p.name


def test_decode_batch_cpu_and_gpu(gpu_available):
    arrays = [make((70, 90, 3), np.uint8, seed=s) for s in range(5)]
    files = [l3.encode(a, profile=("fast", "compact")[s % 2]) for s, a in enumerate(arrays)]
    want = np.stack(arrays)
    cpu = l3.decode_batch(files, device="cpu")
    assert cpu.shape == (5, 70, 90, 3) and np.array_equal(cpu, want)
    if gpu_available:
        gpu = l3.decode_batch(files, device="gpu")
        assert np.array_equal(gpu, want)
    with pytest.raises(l3.ParameterError, match="shape"):
        l3.decode_batch(files + [l3.encode(make((71, 90, 3), np.uint8))], device="cpu")
    with pytest.raises(l3.ParameterError):
        l3.decode_batch([], device="cpu")
    with pytest.raises(l3.ParameterError, match="device"):
        l3.decode_batch(files, device="tpu")
    with pytest.raises(l3.FormatError, match="image 2"):
        l3.decode_batch(files[:2] + [files[2][:40]], device="cpu")


@pytest.mark.parametrize("profile", ["fast", "compact"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("max_error", [1, 2, 4, 50])
def test_error_bounded_round_trip(profile, dtype, max_error):
    a = make((61, 77, 3), dtype, seed=max_error)
    a[0, :5] = np.iinfo(dtype).max  # both ends of the range
    a[1, :5] = 0
    data = l3.encode(a, profile=profile, max_error=max_error)
    assert l3.info(data)["max_error"] == max_error
    b = l3.decode(data)
    assert b.dtype == dtype
    assert np.abs(b.astype(np.int64) - a.astype(np.int64)).max() <= max_error
    assert len(data) < len(l3.encode(a, profile=profile))
    with pytest.raises(l3.ParameterError, match="max_error"):
        l3.encode(a.astype(np.uint8), max_error=128)


@pytest.mark.parametrize("shape", [(40, 50), (3, 20, 30)])
def test_fields_round_trip_within_the_bound(shape):
    rng = np.random.default_rng(1)
    a = np.cumsum(rng.normal(size=shape).astype(np.float32), axis=-1).astype(np.float32)
    a.flat[3] = np.nan
    a.flat[10:20] = -999.0
    for kw in (dict(max_error=0.05), dict(relative=1e-3)):
        data = l3.encode_field(a, fill_value=-999.0, **kw)
        info = l3.field_info(data)
        assert info["shape"] == shape and info["fill_value"] == -999.0
        b = l3.decode_field(data)
        assert b.dtype == np.float32 and b.shape == shape
        special = np.isnan(a) | (a == -999.0)
        assert np.array_equal(np.isnan(b), np.isnan(a))
        assert np.array_equal(b[a == -999.0], a[a == -999.0])
        assert np.abs(b[~special].astype(np.float64) - a[~special]).max() <= info["max_error"]
    with pytest.raises(l3.ParameterError):
        l3.encode_field(a)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(a.astype(np.float64), max_error=0.1)
    with pytest.raises(l3.FormatError):
        l3.decode_field(data[:-3])
