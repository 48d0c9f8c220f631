"""Error-bounded float arrays of 1 to 4 axes: l3 `.l3f` version 3 against l3 version 1, SZ3
and the design study's prototype (scripts/bounded_nd_proto.py), on the study's arrays.

    PYTHONPATH=<dir holding only the l3 package> python scripts/peers_bounded.py \
        [../shared/data/float32] [--bounds 1e-2 1e-3 1e-4] [--repeats 3] [--out FILE.md] \
        [--only NAME ...] [--no-proto]

Arrays: the shared float32 corpus (the study's tuning set) and the study's 6 held-out arrays
(made from fixed seeds by the prototype). Bound: e = rel x (max - min) of the regular values
(finite, not the fill value), the same absolute e for every codec, and every decoded regular
value is checked against it in float64 (NaN and fill values must come back exactly from l3).

- **l3 v3**: `l3.encode_field(a, max_error=e, fill_value=..., version=3)` in the array's own
  shape (1 to 4 axes).
- **l3 v1**: `l3.encode_field(a, max_error=e, ..., version=1)` (1-D as 1 x n, 4-D with its
  first two axes merged, as the study did).
- **SZ3**: imagecodecs' `sz3_encode(a, mode="abs", abs=e)`; NaN/fill cells are first replaced
  by the previous regular value and SZ3 is charged the runs section the prototype costs.
- **proto d**: the prototype's sizes (huf3 stage): b, c-best and e as the study computes them,
  d = the cheapest + 1 byte; **proto b|e** the cheaper of b and e only (version 3 has no c).

Speed: single-thread (RAYON_NUM_THREADS=1, set here before l3 is imported), each encode and
decode timed `--repeats` times, the median kept; MB/s = raw bytes / summed median seconds
over a set's arrays. Timings on a shared machine are noisy: sizes are exact, speeds are not.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent


def load_proto():
    spec = importlib.util.spec_from_file_location("bounded_nd_proto", HERE / "bounded_nd_proto.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def special_mask(a, fill):
    sp = ~np.isfinite(a)
    if fill is not None:
        sp |= a == np.float32(fill)
    return sp


def check(name, codec, a, back, sp, e):
    back = np.asarray(back).reshape(a.shape)
    err = np.abs(back.astype(np.float64) - a.astype(np.float64))[~sp]
    worst = float(err.max()) if err.size else 0.0
    assert worst <= e, f"{name} {codec}: error {worst} > bound {e}"
    return worst


def timed(fn, repeats):
    out, ts = None, []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return out, statistics.median(ts)


def l3_v3(l3, name, a, fill, e, sp, repeats):
    d, te = timed(lambda: l3.encode_field(a, max_error=e, fill_value=fill, version=3), repeats)
    back, td = timed(lambda: l3.decode_field(d), repeats)
    check(name, "l3 v3", a, back, sp, e)
    back = np.asarray(back).reshape(a.shape)
    assert np.array_equal(back.view(np.uint32)[sp], a.view(np.uint32)[sp]), "specials changed"
    info = l3.field_info(d)
    return len(d), te, td, info["predictor"]


def l3_v1(l3, name, a, fill, e, sp):
    b = a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1, *a.shape[-2:]) if a.ndim == 4 else a
    d = l3.encode_field(b, max_error=e, fill_value=fill, version=1)
    check(name, "l3 v1", a, l3.decode_field(d), sp, e)
    return len(d)


def sz3(ic, name, a, fill, e, sp, runs_bytes, repeats):
    f = a.copy().ravel()
    s = sp.ravel()
    if s.any():
        src = np.where(s, 0, np.arange(f.size))
        np.maximum.accumulate(src, out=src)
        f = f[src]
        first = int(np.argmax(~s))
        f[:first] = f[first]
    f = f.reshape(a.shape)
    d, te = timed(lambda: ic.sz3_encode(f, mode="abs", abs=e), repeats)
    back, td = timed(lambda: ic.sz3_decode(d, shape=f.shape, dtype=f.dtype), repeats)
    check(name, "SZ3", a, back, sp, e)
    return len(d) + (runs_bytes if s.any() else 0), te, td


def proto_sizes(P, a, fill, e):
    """The prototype's huf3 sizes of b, c-best and e (study's settings), d and b|e."""
    q, runs, _ = P.quantise(a, fill, e)
    hdr = 56 + 4
    st = ("huf2", "huf3")
    rb, _ = P.design_b(q)
    b = P.code_stream(rb, st)["huf3"] + runs + hdr
    s, _ = P.design_c_full(q, "best")
    c = P.code_stream(s, st)["huf3"] + runs + hdr + 1
    ks, eruns, _, order = P.design_e(a, fill, e)
    cands = [P.code_stream(ks, st)["huf3"] + eruns + hdr + 1]
    for ab in P.AB_CHOICES:
        ks2, eruns2, _, _ = P.design_e(a, fill, e, orders=[order], ab=ab)
        cands.append(P.code_stream(ks2, st)["huf3"] + eruns2 + hdr + 1)
    ee = min(cands)
    return {"d": min(b, c, ee) + 1, "b|e": min(b, ee) + 1}, runs


def gm(vals):
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", nargs="?", default="../shared/data/float32")
    p.add_argument("--bounds", type=float, nargs="+", default=[1e-2, 1e-3, 1e-4])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path)
    p.add_argument("--only", nargs="*")
    p.add_argument("--no-proto", action="store_true")
    args = p.parse_args()
    import l3
    import imagecodecs as ic

    P = load_proto()
    sets = {"tuning": list(P.shared_arrays(Path(args.source))),
            "held-out": list(P.held_out_arrays())}
    rows = []
    for setname, arrays in sets.items():
        for name, a, fill in arrays:
            if args.only and name not in args.only:
                continue
            a = np.ascontiguousarray(a, dtype=np.float32)
            sp = special_mask(a, fill)
            reg = a[~sp]
            lo, hi = float(reg.min()), float(reg.max())
            for rel in args.bounds:
                e = rel * (hi - lo)
                r = {"set": setname, "name": name, "rel": rel, "raw": a.nbytes,
                     "shape": list(a.shape)}
                r["v3"], r["v3 enc"], r["v3 dec"], r["pred"] = l3_v3(
                    l3, name, a, fill, e, sp, args.repeats)
                r["v1"] = l3_v1(l3, name, a, fill, e, sp)
                _, runs, _ = P.quantise(a, fill, e)
                r["SZ3"], r["SZ3 enc"], r["SZ3 dec"] = sz3(
                    ic, name, a, fill, e, sp, runs, args.repeats)
                if not args.no_proto:
                    sizes, _ = proto_sizes(P, a, fill, e)
                    r["proto d"], r["proto b|e"] = sizes["d"], sizes["b|e"]
                rows.append(r)
                print(f"{setname:8} {name:30} {rel:g} v3 {r['raw'] / r['v3']:.2f} ({r['pred']})"
                      + (f" proto d {r['raw'] / r['proto d']:.2f} b|e {r['raw'] / r['proto b|e']:.2f}"
                         if "proto d" in r else "")
                      + f" v1 {r['raw'] / r['v1']:.2f} SZ3 {r['raw'] / r['SZ3']:.2f}"
                      f" | v3 enc {r['raw'] / r['v3 enc'] / 1e6:.1f} dec {r['raw'] / r['v3 dec'] / 1e6:.1f}"
                      f" SZ3 enc {r['raw'] / r['SZ3 enc'] / 1e6:.1f} dec {r['raw'] / r['SZ3 dec'] / 1e6:.1f} MB/s",
                      file=sys.stderr, flush=True)
    sizes = ["v3", "proto d", "proto b|e", "v1", "SZ3"]
    sizes = [k for k in sizes if rows and k in rows[0]]
    md = ["Geometric-mean ratio (raw / bytes; higher is better) and single-thread MB/s "
          "(raw bytes / summed median seconds).", "",
          "| set | bound | " + " | ".join(f"{k}" for k in sizes)
          + " | v3 wins | v3 enc | v3 dec | SZ3 enc | SZ3 dec |",
          "|---|---:|" + "---:|" * (len(sizes) + 5)]
    for setname in sets:
        for rel in args.bounds:
            sel = [r for r in rows if r["set"] == setname and r["rel"] == rel]
            if not sel:
                continue
            raw = sum(r["raw"] for r in sel)
            wins = sum(r["v3"] < r["SZ3"] for r in sel)
            md.append(f"| {setname} | {rel:g} | " + " | ".join(
                f"{gm([r['raw'] / r[k] for r in sel]):.2f}" for k in sizes)
                + f" | {wins}/{len(sel)} | "
                + " | ".join(f"{raw / sum(r[k] for r in sel) / 1e6:.1f}"
                             for k in ("v3 enc", "v3 dec", "SZ3 enc", "SZ3 dec")) + " |")
    md += ["", "Per array (ratio; v3's predictor):", "",
           "| set | array | shape | bound | " + " | ".join(sizes) + " | v3 predictor |",
           "|---|---|---|---:|" + "---:|" * len(sizes) + "---|"]
    for r in rows:
        md.append(f"| {r['set']} | {r['name']} | {'x'.join(map(str, r['shape']))} | {r['rel']:g} | "
                  + " | ".join(f"{r['raw'] / r[k]:.2f}" for k in sizes) + f" | {r['pred']} |")
    text = "\n".join(md) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
