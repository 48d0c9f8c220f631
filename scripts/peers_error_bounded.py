"""Error-bounded images: l3 against JPEG-LS near-lossless (CharLS, through imagecodecs) at the
same bound, on the same pixels, in one run.

    pip install . imagecodecs      # the l3 package and the peers
    python scripts/peers_error_bounded.py [../shared/data/images] [--bounds 1 2 4] [--reps 3]

For each image and bound e: compressed bytes (and the ratio to the lossless l3 compact file and
to the raw pixels), the largest error actually reached (checked here, for every codec), PSNR,
and single-thread decode MB/s of raw pixels (median of --reps). JPEG-LS takes 8- and 16-bit
gray and RGB (images with alpha are left out for it and noted).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import l3

try:
    import imagecodecs as ic
except ImportError:  # pragma: no cover
    sys.exit("needs imagecodecs: pip install imagecodecs")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    peak = float(np.iinfo(a.dtype).max)
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(peak * peak / mse)


def timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("source", nargs="?", default="../shared/data/images")
    p.add_argument("--bounds", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    paths = sorted(q for q in Path(a.source).rglob("*.png"))
    rows = {}  # (codec, e) -> [bytes, raw bytes, worst error, psnr sum, n, decode seconds]
    used, skipped = 0, []
    for path in paths:
        img = l3.imread(path)
        channels = 1 if img.ndim == 2 else img.shape[2]
        if channels not in (1, 3):  # JPEG-LS (CharLS) takes gray and RGB only
            skipped.append(path.name)
            continue
        used += 1
        raw = img.nbytes
        for e in [0] + a.bounds:
            codecs = {
                "l3 compact": (lambda x, e=e: l3.encode(x, profile="compact", max_error=e), l3.decode),
                "l3 fast": (lambda x, e=e: l3.encode(x, profile="fast", max_error=e), l3.decode),
                "JPEG-LS (CharLS)": (lambda x, e=e: ic.jpegls_encode(x, level=e), ic.jpegls_decode),
            }
            for name, (enc, dec) in codecs.items():
                data = enc(img)
                out = np.asarray(dec(data)).reshape(img.shape)
                worst = int(np.abs(out.astype(np.int64) - img.astype(np.int64)).max())
                seconds = timed(lambda: dec(data), a.reps)
                r = rows.setdefault((name, e), [0, 0, 0, 0.0, 0, 0.0])
                r[0] += len(data)
                r[1] += raw
                r[2] = max(r[2], worst)
                r[3] += psnr(img, out) if worst else 0.0
                r[4] += 1
                r[5] += seconds
                if worst > e:
                    print(f"BOUND VIOLATED: {name} on {path.name} at e={e}: {worst}")
    print(f"{used} gray/RGB images from {a.source} (left out, with alpha or gray+alpha: "
          f"{', '.join(skipped) or 'none'}); decode single-threaded, median of {a.reps}")
    print()
    print("| e | codec | bytes | ratio (raw / compressed) | vs JPEG-LS | max error reached | "
          "mean PSNR dB | decode MB/s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for (name, e), (b, raw, worst, ps, n, sec) in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        jls = rows[("JPEG-LS (CharLS)", e)][0]
        mean_psnr = "inf (lossless)" if worst == 0 else f"{ps / n:.2f}"
        print(f"| {e} | {name} | {b} | {raw / b:.3f} | {b / jls:.3f}x | {worst} | {mean_psnr} | "
              f"{raw / sec / 1e6:.0f} |")


if __name__ == "__main__":
    main()
