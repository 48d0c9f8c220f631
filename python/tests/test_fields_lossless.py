"""Lossless float fields through Python: float32, float16 and bfloat16 (uint16 bit patterns
with dtype="bfloat16") of 1 to 4 axes round-trip bit for bit, NaN payloads and -0.0
included; field_info reports the mode; hostile bytes raise, never crash."""

import os
from pathlib import Path

import numpy as np
import pytest

import l3

SHARED = Path(os.environ.get("L3_TEST_DATA", Path(__file__).resolve().parents[2] / "../shared/data")) / "float32"


def bits(a):
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


@pytest.mark.parametrize("shape", [(5000,), (40, 60), (6, 20, 30), (2, 3, 20, 30)])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_round_trip_shapes(shape, dtype):
    rng = np.random.default_rng(1)
    a = (np.cumsum(rng.normal(size=shape).astype(np.float64), axis=-1) * 0.1).astype(dtype)
    flat = a.reshape(-1)
    flat[::97] = np.nan
    flat[5] = -0.0
    flat[7] = np.inf
    data = l3.encode_field(a, lossless=True)
    back = l3.decode_field(data)
    assert back.dtype == np.dtype(dtype) and back.shape == shape
    assert np.array_equal(bits(back), bits(a))
    info = l3.field_info(data)
    assert info["mode"] == "lossless" and info["dtype"] == dtype and info["shape"] == shape


def test_nan_payloads_and_every_float16_pattern():
    every = np.arange(65536, dtype=np.uint16)
    for name in ("float16", "bfloat16"):
        if name == "float16":
            data = l3.encode_field(every.view(np.float16).reshape(256, 256), lossless=True)
            back = l3.decode_field(data)
            assert back.dtype == np.float16
        else:
            data = l3.encode_field(every.reshape(256, 256), lossless=True, dtype="bfloat16")
            back = l3.decode_field(data)
            assert back.dtype == np.uint16  # bfloat16 comes back as its bit patterns
        assert np.array_equal(back.view(np.uint16).reshape(-1), every)
        assert l3.field_info(data)["dtype"] == name
    payloads = np.array([0x7FC00001, 0xFFC01234, 0x7F800001, 0x80000000, 1], dtype=np.uint32)
    a = np.tile(payloads, 100).view(np.float32)
    assert np.array_equal(bits(l3.decode_field(l3.encode_field(a, lossless=True))), bits(a))


def test_fill_value_and_error_bounded_mode():
    a = np.linspace(0, 1, 4000, dtype=np.float32).reshape(40, 100)
    a[10:20] = -999.0
    data = l3.encode_field(a, lossless=True, fill_value=-999.0)
    info = l3.field_info(data)
    assert info["fill_value"] == np.float32(-999.0).view(np.uint32)
    assert np.array_equal(bits(l3.decode_field(data)), bits(a))
    assert l3.field_info(l3.encode_field(a, max_error=1e-3, fill_value=-999.0))["mode"] == "error_bounded"


def test_bad_arguments_raise():
    a = np.zeros((4, 4), dtype=np.float64)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(a, lossless=True)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(np.zeros(4, np.uint16), lossless=True)  # uint16 needs dtype="bfloat16"
    with pytest.raises(l3.ParameterError):
        l3.encode_field(np.zeros(4, np.float32), lossless=True, max_error=0.1)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(np.zeros((1, 1, 1, 1, 2), np.float32), lossless=True)


def test_hostile_bytes_raise():
    a = np.arange(3000, dtype=np.float32).reshape(30, 100) * 0.01
    data = l3.encode_field(a, lossless=True)
    for n in range(0, len(data), 7):
        with pytest.raises(l3.L3Error):
            l3.decode_field(data[:n])
    for i in range(0, len(data), 3):
        bad = bytearray(data)
        bad[i] ^= 0x10
        with pytest.raises(l3.L3Error):
            l3.decode_field(bytes(bad))
    with pytest.raises(l3.LimitsError):
        l3.decode_field(data, limits=l3.Limits(max_output_bytes=1000))


@pytest.mark.skipif(not SHARED.is_dir() and os.environ.get("CI") != "true", reason="no shared data")
def test_shared_arrays():
    import json

    for f in sorted(SHARED.glob("*.f32")):
        meta = json.loads(f.with_suffix(".json").read_text())
        a = np.fromfile(f, dtype="<f4").reshape(meta["shape"])
        data = l3.encode_field(a, lossless=True, fill_value=meta.get("fill_value"))
        assert np.array_equal(bits(l3.decode_field(data)), bits(a)), f.name
