"""The ``python -m l3`` commands over scientific stores: ``pack-arrays`` (a store into a
tensor dataset through `l3.pack_source`) and ``source-info`` (a store's variables).

``--mode`` takes ``lossless``, ``raw``, ``abs:X`` or ``rel:X`` (absolute or relative error
bound X), for every array or per array (``--mode input=rel:1e-3``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Dict, List, Optional

from ._errors import L3Error, ParameterError


def parse_mode(text: str) -> Any:
    """A mode of ``pack_arrays`` from its command-line form."""
    if text in ("lossless", "raw"):
        return text
    kind, sep, value = text.partition(":")
    value, sep_format, fmt = value.partition(":")
    names = {"abs": "absolute", "absolute": "absolute", "rel": "relative", "relative": "relative"}
    if not sep or kind not in names or (sep_format and fmt not in ("v1", "v3")):
        raise ParameterError(
            f"mode {text!r}: expected lossless, raw, abs:X or rel:X (then :v3 for the smaller"
            " field format)"
        )
    try:
        bound = float(value)
    except ValueError:
        raise ParameterError(f"mode {text!r}: {value!r} is not a number") from None
    if not (math.isfinite(bound) and bound > 0):
        raise ParameterError(f"mode {text!r}: the bound must be a positive finite number")
    mode: Dict[str, Any] = {names[kind]: bound}
    if fmt:
        mode["format"] = fmt
    return mode


def parse_modes(items: List[str], arrays: List[str]) -> Any:
    """``--mode`` options: one mode for every array, or ``NAME=MODE`` per array (a name not
    given gets the plain mode, else lossless)."""
    default: Any = None
    per: Dict[str, Any] = {}
    for item in items:
        name, sep, mode = item.partition("=")
        if not sep:
            if default is not None:
                raise ParameterError("--mode without a name given twice")
            default = parse_mode(item)
            continue
        if name not in arrays:
            raise ParameterError(f"--mode {item}: {name!r} is not an array ({', '.join(arrays)})")
        if name in per:
            raise ParameterError(f"--mode given twice for {name!r}")
        per[name] = parse_mode(mode)
    if not per:
        return default or "lossless"
    return {name: per.get(name, default or "lossless") for name in arrays}


def _names(text: str, option: str) -> List[str]:
    names = [n.strip() for n in text.split(",")]
    if not names or not all(names):
        raise ParameterError(f"{option} {text!r}: expected comma-separated variable names")
    return names


def parse_arrays(args: argparse.Namespace) -> Dict[str, List[str]]:
    """The arrays of a sample from ``--input``, ``--target`` and ``--array NAME=VARS``: each
    a list of variables stacked on a new leading (channel) axis."""
    arrays: Dict[str, List[str]] = {}
    if args.input:
        arrays["input"] = _names(args.input, "--input")
    if args.target:
        arrays["target"] = _names(args.target, "--target")
    for item in args.array or []:
        name, sep, vs = item.partition("=")
        if not sep or not name:
            raise ParameterError(f"--array {item!r}: expected NAME=VAR[,VAR...]")
        if name in arrays:
            raise ParameterError(f"array {name!r} given twice")
        arrays[name] = _names(vs, "--array")
    if not arrays:
        raise ParameterError(
            "name the arrays of a sample: --input VARS, --target VARS or --array NAME=VARS"
        )
    return arrays


def _offsets(items: List[str]) -> Optional[Dict[str, int]]:
    out: Dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ParameterError(f"--offset {item!r}: expected NAME=N")
        if name in out:
            raise ParameterError(f"--offset given twice for {name!r}")
        try:
            out[name] = int(value)
        except ValueError:
            raise ParameterError(f"--offset {item!r}: {value!r} is not an integer") from None
    return out or None


def _fill_values(items: List[str]) -> Optional[Dict[str, Any]]:
    out: Dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ParameterError(f"--fill {item!r}: expected NAME=VALUE or NAME=none")
        try:
            out[name] = None if value.lower() == "none" else float(value)
        except ValueError:
            raise ParameterError(f"--fill {item!r}: {value!r} is not a number") from None
    return out or None


def _axis(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def add_parsers(sub: Any) -> None:
    """Adds ``pack-arrays`` and ``source-info`` to the ``python -m l3`` subparsers."""
    p = sub.add_parser(
        "pack-arrays",
        help="pack an HDF5, NetCDF-4 or Zarr store into a tensor dataset",
        description="Packs one record per index of the sample axis of an HDF5, NetCDF-4 or Zarr "
        "store. Each array of a record stacks its variables on a new leading axis "
        "(--input u,v: input = stack(u, v)). A rerun keeps the finished shards.",
    )
    p.add_argument("source", help="HDF5 or NetCDF file, Zarr store (folder, .zip or URL)")
    p.add_argument("-o", "--output", required=True, help="dataset folder")
    p.add_argument("--input", help="variables of the `input` array, comma-separated")
    p.add_argument("--target", help="variables of the `target` array, comma-separated")
    p.add_argument(
        "--array", action="append", metavar="NAME=VARS", help="another array (repeatable)"
    )
    p.add_argument(
        "--sample-axis", type=_axis, default=0, help="axis index or dimension name (default 0)"
    )
    p.add_argument("--group", help="HDF5/NetCDF/Zarr group holding the variables")
    p.add_argument(
        "--offset",
        action="append",
        metavar="NAME=N",
        help="read an array N steps after the sample's index (--offset target=1: next step;"
        " an array read at two steps is stored once per step, paired by the manifest's"
        " window)",
    )
    p.add_argument(
        "--no-window",
        action="store_true",
        help="with --offset: the earlier layout, one record per sample (a step in every"
        " sample that reads it)",
    )
    p.add_argument("--start", type=int, help="first index along the sample axis")
    p.add_argument("--stop", type=int, help="one past the last index along the sample axis")
    p.add_argument(
        "--broadcast", help="variables without the sample axis, repeated in every sample"
    )
    p.add_argument(
        "--unpack",
        action="store_true",
        help="apply CF scale_factor/add_offset (float32, fill -> NaN)",
    )
    p.add_argument(
        "--fill", action="append", metavar="NAME=VALUE", help="override a fill value (or NAME=none)"
    )
    p.add_argument(
        "--mode",
        action="append",
        default=[],
        metavar="[NAME=]MODE",
        help="lossless (default), raw, abs:X or rel:X (rel:X:v3: .l3f version 3 for 2- and"
        " 3-axis arrays, smaller and slower to decode than the default version 1); per array"
        " with NAME=MODE (repeatable)",
    )
    p.add_argument(
        "--samples-per-shard", type=int, default=256, help="records per shard (default 256)"
    )
    p.add_argument("--force", action="store_true", help="rewrite shards written with other options")
    p.add_argument(
        "--kind", choices=("hdf5", "netcdf", "zarr"), help="store kind (default: detected)"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    p.set_defaults(run=run_pack_arrays)

    q = sub.add_parser("source-info", help="list the variables of an HDF5, NetCDF-4 or Zarr store")
    q.add_argument("source")
    q.add_argument("--group")
    q.add_argument("--kind", choices=("hdf5", "netcdf", "zarr"))
    q.set_defaults(run=run_source_info)


def run_pack_arrays(args: argparse.Namespace) -> int:
    """``pack-arrays``: prints pack_arrays' result as JSON."""
    from .sources import open_source, pack_source

    arrays = parse_arrays(args)
    modes = parse_modes(args.mode, list(arrays))
    if args.samples_per_shard < 1:
        raise ParameterError("--samples-per-shard must be at least 1")
    broadcast = _names(args.broadcast, "--broadcast") if args.broadcast else ()
    with open_source(
        args.source,
        arrays,
        sample_axis=args.sample_axis,
        group=args.group,
        start=args.start,
        stop=args.stop,
        broadcast=broadcast,
        unpack=args.unpack,
        fill_values=_fill_values(args.fill or []),
        kind=args.kind,
        offsets=_offsets(args.offset or []),
    ) as src:
        if not args.quiet:
            shapes = ", ".join(
                f"{a.name} {a.dtype.name}{list(a.shape)}" for a in src.arrays.values()
            )
            print(f"{src.kind} {args.source}: {len(src)} samples of {shapes}", file=sys.stderr)
        result = pack_source(
            src,
            args.output,
            modes=modes,
            samples_per_shard=args.samples_per_shard,
            force=args.force,
            show_progress=not args.quiet,
            windows=not args.no_window,
        )
    print(json.dumps(result, indent=1, default=str))
    return 0


def run_source_info(args: argparse.Namespace) -> int:
    """``source-info``: one line per variable (name, dtype, shape, dims, chunks, fill)."""
    from ._stores import MAX_NAMES, backend

    store = backend(args.source, args.kind, args.group)
    try:
        names = store.names()
        print(
            f"{store.kind} {args.source}: {len(names)} variables"
            + (" (first ones)" if len(names) >= MAX_NAMES else "")
        )
        for name in names:
            try:
                v = store.var(name)
            except L3Error as e:
                print(f"  {name}: {e}")
                continue
            print(
                f"  {name}: {v.dtype} {list(v.shape)} dims={list(v.dims) if v.dims else None}"
                f" chunks={list(v.chunks) if v.chunks else None} fill={v.fill_value}"
            )
    finally:
        store.close()
    return 0
