"""Checks of the loader's integer options and resume states before they reach Rust: a value of
the wrong type is a ``TypeError``, one out of range a ``ParameterError`` (a ``ValueError``),
each naming the option, instead of an ``OverflowError`` from the conversion or a wrapped-around
value.
"""

from __future__ import annotations

import numbers
from typing import Any, Dict, Mapping, Optional, Tuple

from ._errors import ParameterError

U8 = 2**8 - 1
U32 = 2**32 - 1
U64 = 2**64 - 1

#: The loader's integer options and their ranges (inclusive; `None` allowed where marked).
INT_OPTIONS: Dict[str, Tuple[int, int, bool]] = {
    "batch_size": (1, U32, False),
    "seed": (0, U64, False),
    # The epoch after it must exist (a loader runs up to ``epoch + 1`` at least).
    "epoch": (0, U64 - 1, False),
    "consumed": (0, U64, False),
    "rank": (0, U32, False),
    "world_size": (1, U32, False),
    "worker": (0, U32, False),
    "num_workers": (1, U32, False),
    "padding": (0, U32, False),
    "channels": (0, U8, False),
    "level": (0, U8, True),
    "cache_mb": (0, U64 >> 20, False),
    "disk_cache_mb": (0, U64 >> 20, False),
    "max_imbalance": (0, U32, True),
    "reuse_front": (0, U32, False),
    "strata": (0, U32, True),
    "threads": (0, 1024, False),
    "prefetch": (1, 1024, False),
    "end_epoch": (0, U64, True),
}

#: The keys of a resume state (`L3IterableDataset.state_dict`).
STATE_KEYS = ("seed", "epoch", "consumed")


def check_int(name: str, value: Any, low: int, high: int, optional: bool = False) -> Optional[int]:
    """``value`` as an int in ``low..=high`` (or None when ``optional``); a bool, float,
    string or other non-integer is a ``TypeError``, an integer out of range a
    ``ParameterError``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    v = int(value)
    if not low <= v <= high:
        raise ParameterError(f"{name} must be in {low}..={high}, got {v}")
    return v


def check_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The loader's keyword options with their integer values checked (see `INT_OPTIONS`);
    ``size`` as an int or a ``(width, height)`` pair of ints."""
    out = dict(options)
    for name, (low, high, optional) in INT_OPTIONS.items():
        if name in out:
            out[name] = check_int(name, out[name], low, high, optional)
    if "size" in out:
        size = out["size"]
        if isinstance(size, numbers.Integral) and not isinstance(size, bool):
            size = (size, size)
        if not isinstance(size, (tuple, list)) or len(size) != 2:
            raise TypeError(f"size must be an int or (width, height), got {size!r}")
        out["size"] = tuple(check_int("size", s, 1, U32) for s in size)
    return out


def check_state(state: Any, records: Optional[int] = None) -> Tuple[int, int, int]:
    """``(seed, epoch, consumed)`` of a resume state dict: a mapping with exactly the keys
    ``seed``, ``epoch`` and ``consumed``, each an int in range, ``consumed`` at most
    ``records`` (the dataset's length, when given)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"a loader state must be a dict, got {type(state).__name__}")
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        raise ParameterError(f"the loader state lacks {', '.join(missing)} (has {sorted(map(str, state))})")
    extra = [k for k in state if k not in STATE_KEYS]
    if extra:
        raise ParameterError(
            f"the loader state has unknown keys {sorted(map(str, extra))}: expected exactly "
            f"{', '.join(STATE_KEYS)}"
        )
    seed, epoch, consumed = (
        check_int(k, state[k], *INT_OPTIONS[k][:2]) for k in STATE_KEYS
    )
    if records is not None and consumed > records:
        raise ParameterError(
            f"the loader state has consumed {consumed} of an epoch, but the dataset has "
            f"{records} records: the state is from another dataset"
        )
    return seed, epoch, consumed  # type: ignore[return-value]
