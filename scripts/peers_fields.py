"""Error-bounded float32 fields: l3 against SZ3, ZFP, SPERR (error-bounded) and pcodec
(lossless), through imagecodecs, on the same arrays, in one run. l3 here is version 1 (the
bins as an L3 image, `version=1`); scripts/peers_bounded.py compares version 3, the default.

    pip install . imagecodecs
    python scripts/peers_fields.py [../shared/data/float32] [--bounds 1e-2 1e-3 1e-4] [--reps 3]

Bounds are fractions of each field's value range (finite, non-fill values), turned into the
same absolute bound for every codec (SZ3 mode "abs", ZFP fixed accuracy, SPERR point-wise
error). For each codec: compression ratio (raw bytes / compressed), the largest error actually
reached over the regular values, whether every NaN and fill value came back exactly, PSNR over
the regular values (peak = the range) and single-thread decode MB/s (median of --reps). A bound
is violated when the largest error exceeds it, or a NaN or fill value does not come back.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import l3  # noqa: E402

try:
    import imagecodecs as ic
except ImportError:  # pragma: no cover
    sys.exit("needs imagecodecs: pip install imagecodecs")


def timed(fn, reps):
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        t.append(time.perf_counter() - s)
    return statistics.median(t)


def codecs(a, e, fill):
    shape, dtype = a.shape, a.dtype
    return {
        "l3": (lambda: l3.encode_field(a, max_error=e, fill_value=fill, version=1),
               l3.decode_field),
        "SZ3": (lambda: ic.sz3_encode(a, mode="abs", abs=e),
                lambda d: ic.sz3_decode(d, shape=shape, dtype=dtype)),
        "ZFP": (lambda: ic.zfp_encode(a, level=e, mode="a"), ic.zfp_decode),
        "SPERR": (lambda: ic.sperr_encode(a, level=e, mode="pwe"), ic.sperr_decode),
        "pcodec (lossless)": (lambda: ic.pcodec_encode(a),
                              lambda d: ic.pcodec_decode(d, shape=shape, dtype=dtype)),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("source", nargs="?", default="../shared/data/float32")
    p.add_argument("--bounds", type=float, nargs="+", default=[1e-2, 1e-3, 1e-4])
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    detail = []
    summary = {}  # (codec, rel) -> [log ratio sum (smooth), n smooth, log ratio sum, n, violations]
    for f32 in sorted(Path(a.source).glob("*.f32")):
        meta = json.loads(f32.with_suffix(".json").read_text())
        arr = np.fromfile(f32, dtype="<f4").reshape(meta["shape"])
        fill = meta.get("fill_value")
        fill = None if fill is None else np.float32(fill)
        regular = np.isfinite(arr) & (True if fill is None else arr != fill)
        lo, hi = float(arr[regular].min()), float(arr[regular].max())
        smooth = meta.get("lag1_autocorr_last_axis", 0) >= 0.99
        for rel in a.bounds:
            e = rel * (hi - lo)
            for name, (enc, dec) in codecs(arr, e, None if fill is None else float(fill)).items():
                try:
                    data = enc()
                    out = np.asarray(dec(data)).reshape(arr.shape)
                except Exception as err:  # a peer refusing an input is a result too
                    detail.append((f32.stem, rel, name, "error", str(err)[:60]))
                    continue
                diff = np.abs(out[regular].astype(np.float64) - arr[regular].astype(np.float64))
                worst = float(diff.max()) if diff.size else 0.0
                specials_ok = bool(
                    np.array_equal(np.isnan(out), np.isnan(arr))
                    and (fill is None or np.array_equal(out[arr == fill], arr[arr == fill]))
                )
                lossless = name.startswith("pcodec")
                violated = (not lossless and worst > e) or not specials_ok
                mse = float(np.mean(diff ** 2)) if diff.size else 0.0
                psnr = math.inf if mse == 0 else 10 * math.log10((hi - lo) ** 2 / mse)
                ratio = arr.nbytes / len(data)
                secs = timed(lambda: dec(data), a.reps)
                detail.append((f32.stem, rel, name, f"{ratio:.2f}",
                               f"{worst:.3g} / {e:.3g}{' VIOLATED' if violated else ''}",
                               "yes" if specials_ok else "NO", f"{psnr:.1f}",
                               f"{arr.nbytes / secs / 1e6:.0f}"))
                s = summary.setdefault((name, rel), [0.0, 0, 0.0, 0, 0])
                if smooth:
                    s[0] += math.log(ratio)
                    s[1] += 1
                s[2] += math.log(ratio)
                s[3] += 1
                s[4] += violated
    print("Summary: geometric-mean compression ratio (raw / compressed); violations = fields "
          "where the bound was exceeded or a NaN / fill value changed")
    print()
    print("| bound (x range) | codec | smooth fields (lag-1 r >= 0.99) | all fields | violations |")
    print("|---:|---|---:|---:|---:|")
    for (name, rel), (ls, ns, la, na, v) in sorted(summary.items(), key=lambda kv: (-kv[0][1], kv[0][0])):
        sm = f"{math.exp(ls / ns):.2f}" if ns else "-"
        print(f"| {rel:g} | {name} | {sm} | {math.exp(la / na):.2f} | {v} of {na} |")
    print()
    print("| field | bound (x range) | codec | ratio | max error / bound | NaN & fill exact | PSNR dB | decode MB/s |")
    print("|---|---:|---|---:|---|---|---:|---:|")
    for row in detail:
        print("| " + " | ".join(str(x) for x in row) + " |")


if __name__ == "__main__":
    main()
