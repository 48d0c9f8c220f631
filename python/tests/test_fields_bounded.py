"""Error-bounded float arrays of 1 to 4 axes through Python (`encode_field`, version 3): the
bound holds (checked in float64) for absolute and relative bounds, NaN and fill values come
back exactly, field_info reports version 3, the default (version 1 on request), and hostile bytes
raise, never crash."""

import math
import os
from pathlib import Path

import numpy as np
import pytest

import l3

SHARED = Path(os.environ.get("L3_TEST_DATA", Path(__file__).resolve().parents[2] / "../shared/data")) / "float32"


def check_bound(a, back, e, fill=None):
    special = ~np.isfinite(a)
    if fill is not None:
        special |= a == np.float32(fill)
    assert back.shape == a.shape and back.dtype == np.float32
    assert np.array_equal(back.view(np.uint32)[special], a.view(np.uint32)[special])
    err = np.abs(back[~special].astype(np.float64) - a[~special].astype(np.float64))
    assert err.max(initial=0.0) <= e


@pytest.mark.parametrize("shape", [(5000,), (40, 60), (6, 20, 30), (2, 3, 20, 30)])
@pytest.mark.parametrize("rel", [1e-2, 1e-4])
def test_round_trip_shapes(shape, rel):
    rng = np.random.default_rng(2)
    a = (np.cumsum(rng.normal(size=shape), axis=-1) * 0.1).astype(np.float32)
    flat = a.reshape(-1)
    flat[::97] = np.nan
    flat[7] = np.inf
    flat[11] = -999.0
    data = l3.encode_field(a, relative=rel, fill_value=-999.0, version=3)
    info = l3.field_info(data)
    assert info["mode"] == "error_bounded" and info["version"] == 3
    assert info["shape"] == shape and info["predictor"] in ("lattice", "differences")
    regular = flat[np.isfinite(flat) & (flat != -999.0)]
    e = rel * (float(regular.max()) - float(regular.min()))
    assert info["max_error"] == pytest.approx(e, rel=1e-12)
    check_bound(a, l3.decode_field(data), info["max_error"], -999.0)


def test_absolute_bound_and_default_version():
    a = np.sin(np.arange(4096, dtype=np.float32) / 30).reshape(64, 64)
    v3 = l3.encode_field(a, max_error=1e-3)
    assert v3 == l3.encode_field(a, max_error=1e-3, version=3)
    v1 = l3.encode_field(a, max_error=1e-3, version=1)
    assert l3.field_info(v3)["version"] == 3 and l3.field_info(v1)["version"] == 1
    # Version 1's bin image takes a profile; the default (version 3) has none.
    fast = l3.encode_field(a, max_error=1e-3, version=1, profile="fast")
    assert l3.field_info(fast)["version"] == 1 and fast != v1
    check_bound(a, l3.decode_field(fast), 1e-3)
    with pytest.raises(ValueError, match="profile is for version=1"):
        l3.encode_field(a, max_error=1e-3, profile="fast")
    with pytest.raises(ValueError, match="predictor and axes are for version 3"):
        l3.encode_field(a, max_error=1e-3, version=1, predictor="lattice")
    with pytest.raises(ValueError, match="lossless=True takes no"):
        l3.encode_field(a, lossless=True, profile="fast")
    assert l3.field_info(v3)["max_error"] == 1e-3
    check_bound(a, l3.decode_field(v3), 1e-3)
    check_bound(a, l3.decode_field(v1), 1e-3)
    with pytest.raises(ValueError):
        l3.encode_field(a, max_error=1e-3, version=2)
    with pytest.raises(ValueError):
        l3.encode_field(a, max_error=1e-3, relative=1e-3, version=3)
    with pytest.raises(ValueError):
        l3.encode_field(a.reshape(1, 1, 1, 1, 4096), max_error=1e-3, version=3)


def test_shared_arrays_as_one_and_four_axes():
    files = sorted(SHARED.glob("*.f32"))[:3]
    if not files:
        if os.environ.get("CI") == "true":
            raise AssertionError(f"{SHARED} missing")
        pytest.skip("no shared arrays")
    import json
    for f in files:
        meta = json.loads(f.with_suffix(".json").read_text())
        a = np.fromfile(f, dtype="<f4").reshape(meta["shape"])
        fill = meta.get("fill_value")
        for b in (a.reshape(-1), a.reshape(1, 1, *a.shape[-2:]) if a.ndim == 2 else a.reshape(1, *a.shape)):
            data = l3.encode_field(b, relative=1e-3, fill_value=fill, version=3)
            check_bound(b, l3.decode_field(data), l3.field_info(data)["max_error"], fill)
            assert len(data) < b.nbytes / 3


def test_hostile_bytes_raise():
    a = np.cos(np.arange(3000, dtype=np.float32) / 9)
    data = bytearray(l3.encode_field(a, max_error=1e-2, version=3))
    for n in range(0, len(data), 7):
        with pytest.raises(ValueError):
            l3.decode_field(bytes(data[:n]))
    for i in range(len(data)):
        d = bytearray(data)
        d[i] ^= 0x10
        with pytest.raises(ValueError):
            l3.decode_field(bytes(d))
    with pytest.raises(ValueError):
        l3.decode_field(bytes(data), limits=l3.Limits(max_output_bytes=3000 * 4 - 1))


@pytest.mark.parametrize("version", [1, 3])
def test_one_bound_spelling_and_its_aliases(version):
    """``bound={"absolute": e}`` / ``{"relative": r}`` is the one spelling; ``max_error=`` and
    ``relative=`` are aliases giving the same bytes; anything else is refused clearly."""
    rng = np.random.default_rng(5)
    a = np.cumsum(rng.normal(size=(30, 40)), axis=1).astype(np.float32)
    for new, old in (({"absolute": 1e-3}, {"max_error": 1e-3}), ({"relative": 1e-2}, {"relative": 1e-2})):
        assert l3.encode_field(a, bound=new, version=version) == l3.encode_field(a, **old, version=version)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(a, bound={"absolute": 1e-3}, max_error=1e-3, version=version)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(a, bound={"absolute": 1e-3, "relative": 1e-2}, version=version)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(a, bound={"absolute": -1.0}, version=version)
    with pytest.raises(l3.ParameterError):
        l3.encode_field(a, bound={"maximum": 1.0}, version=version)
    with pytest.raises(TypeError):
        l3.encode_field(a, bound=1e-3, version=version)
    with pytest.raises(TypeError):
        l3.encode_field(a, bound={"absolute": True}, version=version)


@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.parametrize("shape,kw", [
    ((20, 20), {"max_error": 1e-3}),
    ((4, 10, 10), {"max_error": 1e-300}),
    ((2, 3), {"relative": 1e-3}),
])
def test_a_bound_too_fine_for_the_bins_stores_the_array_exactly(version, shape, kw):
    """A range needing more bins than the format has, a bound below the smallest normal bin
    width, a relative bound of a constant array: never an error; the array is stored exactly
    (a lossless file, which says so) with its fill value."""
    n = math.prod(shape)
    a = (np.sin(np.arange(n, dtype=np.float32) * 0.37) * 1e6).astype(np.float32).reshape(shape)
    if n == 6:
        a[:] = 1.5
    else:
        a.reshape(-1)[3] = np.nan
        a.reshape(-1)[7] = -9999.0
    data = l3.encode_field(a, **kw, fill_value=-9999.0, version=version)
    info = l3.field_info(data)
    assert info["mode"] == "lossless" and info["shape"] == shape
    assert info["fill_value"] == np.float32(-9999.0).view(np.uint32)
    back = l3.decode_field(data)
    assert back.dtype == np.float32 and back.shape == shape
    np.testing.assert_array_equal(back.view(np.uint32), a.view(np.uint32))
