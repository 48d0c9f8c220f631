"""Property tests over many seeded random hostile values: `load_state_dict` with hostile state
dicts and `l3.Loader` with hostile options either refuse them with a `TypeError` or a
`ValueError` (l3's `ParameterError` and `LimitsError` are both), leaving the state as it was,
or accept them and give a batch or a clean end. Never another exception, a panic or a hang (a
watchdog ends the process if one iteration stalls)."""

import faulthandler
import math
import random

import numpy as np
import pytest

import l3

U64 = 2**64 - 1

#: Values for integer fields: in range, at the edges, beyond them, and of the wrong type.
HOSTILE_INTS = [
    0, 1, 2, 3, 5, 6, 7, 64, 2**32 - 1, 2**32, U64 - 1, U64, U64 + 1, 2**100, -1, -(2**63),
    True, False, 1.0, 1.5, math.nan, math.inf, "3", b"3", None, [1], {"a": 1},
    np.int64(2), np.uint64(U64), np.int32(-4),
]


@pytest.fixture(autouse=True)
def watchdog():
    """Ends the process (a failure) if a test stalls: a hang must not go unnoticed."""
    faulthandler.dump_traceback_later(300, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def hostile_state(rng):
    if rng.random() < 0.05:
        return rng.choice([None, [], "state", (1, 2, 3), 5, {1, 2}])
    state = {}
    for key in ("seed", "epoch", "consumed"):
        if rng.random() < 0.95:
            # Half the values valid, so that accepted states are exercised too.
            state[key] = rng.randint(0, 7) if rng.random() < 0.5 else rng.choice(HOSTILE_INTS)
    if rng.random() < 0.1:
        state[rng.choice(["world_size", "rank", "extra", 5])] = rng.choice(HOSTILE_INTS)
    return state


def test_hostile_state_dicts(dataset3):
    torch_module = pytest.importorskip("torch")  # noqa: F841
    from l3.torch import L3IterableDataset

    n = len(l3.open_dataset(dataset3))
    rng = random.Random(20261203)
    accepted = refused = 0
    for case in range(400):
        state = hostile_state(rng)
        seed = state.get("seed") if isinstance(state, dict) else None
        seed = seed if type(seed) is int and 0 <= seed <= U64 else 0
        ds = L3IterableDataset(dataset3, 2, seed=seed, size=(8, 8), threads=1)
        before = ds.state_dict()
        try:
            ds.load_state_dict(state)
        except (TypeError, ValueError) as e:
            assert str(e), (case, state)
            assert ds.state_dict() == before, (case, state)
            refused += 1
            continue
        accepted += 1
        s = ds.state_dict()
        assert 0 <= s["consumed"] <= n and 0 <= s["epoch"] < U64 and s["seed"] == seed, state
        # One iteration is the rest of that epoch: it ends, with the samples not consumed.
        samples = [int(x) for b in ds for x in b["samples"]]
        assert len(samples) == len(set(samples)) <= n - s["consumed"], (state, samples)
    print("accepted", accepted, "refused", refused)
    assert accepted > 50 and refused > 100, (accepted, refused)


#: Hostile values per loader option (each list has valid values too).
HOSTILE_OPTIONS = {
    "seed": HOSTILE_INTS,
    "epoch": [0, 1, U64 - 1, U64, -1, 1.5, "0"],
    "consumed": [0, 3, 6, 7, U64, -1, None],
    "end_epoch": [None, 0, 1, 2, U64, -1, "1"],
    "rank": [0, 1, 2, 2**32 - 1, -1],
    "world_size": [1, 2, 2**32 - 1, 0, 2**32],
    "drop_last": ["partial", "drop", "pad", "sometimes", 3],
    "size": [8, (8, 8), (1, 1), (4096, 1), 0, -3, (0, 5), (16777215, 16777215), (2**32, 1),
             (8,), "8", None],
    "level": [None, 0, 2, 3, 255, 256, -1],
    "crop": [True, False, 1],
    "scale": [[0.08, 1.0], [1.0, 0.5], [0.0, 1.0], [math.nan, 1.0], [], [0.5], "ab"],
    "ratio": [[0.75, 1.33], [2.0, 1.0], [-1.0, 1.0], [math.inf, math.inf], [1.0, 1.0, 1.0]],
    "flip": [0.0, 0.5, 1.0, -0.1, 2.0, math.nan, "a"],
    "mean": [[0.5], [0.1, 0.2, 0.3], [math.nan], [1.0] * 5, []],
    "std": [[0.5], [0.0], [math.inf], [1.0, 2.0]],
    "channels": [3, 1, 0, 2, 4, 255, 256],
    "rotate90": [False, True],
    "max_angle": [0.0, 30.0, -5.0, 400.0, math.nan, math.inf],
    "padding": [0, 4, 16777215, 16777216, 2**32 - 1, 2**32, -1],
    "fill": [0.0, 0.5, math.nan, math.inf],
    "noise_std": [0.0, 0.1, -1.0, math.nan],
    "dtype": ["float32", "float16", "int8"],
    "cache_mb": [0, 1, 2**44, 2**44 + 1, U64, -1],
    "cache_policy": ["planned", "lru", "mru"],
    "threads": [0, 1, 2, 1025, 10**9, -1, 2.0],
    "prefetch": [1, 2, 0, 1025, 2**64, -1],
    "device": ["cpu", "tpu", 0],
    "worker": [0, 1, 6, 2**32, -1],
    "num_workers": [1, 2, 7, 0, -1],
    "on_error": ["skip", "fail", "ignore"],
    "crop_window": [True, False],
}


def test_hostile_loader_options(dataset3):
    rng = random.Random(31)
    built = refused = 0
    for case in range(300):
        names = rng.sample(sorted(HOSTILE_OPTIONS), rng.randint(1, 4))
        # Each list starts with a valid value: half the time it, so that loaders get built.
        options = {
            k: HOSTILE_OPTIONS[k][0] if rng.random() < 0.4 else rng.choice(HOSTILE_OPTIONS[k])
            for k in names
        }
        options.setdefault("size", 8)
        options.setdefault("threads", 1)
        batch_size = rng.choice([2, 2, 1, 64, 0, -1, 2**32 - 1, 2**32, 1.5])
        try:
            loader = l3.Loader(dataset3, batch_size, **options)
        except (TypeError, ValueError) as e:
            assert str(e), (case, batch_size, options)
            refused += 1
            continue
        built += 1
        try:
            batch = next(loader)
            assert batch["images"].shape[0] == len(batch["samples"]), options
        except StopIteration:
            pass
        except (l3.FormatError, l3.ParameterError) as e:
            # A record's own error with on_error="fail" (e.g. channels=1 of RGB records).
            assert "sample" in str(e), (case, options, e)
        finally:
            loader.close()
    print("built", built, "refused", refused)
    assert built > 40 and refused > 100, (built, refused)
