"""Lossless float32 arrays: the compressors scientists use, on the same bytes, one thread.

    pip install numpy zstandard blosc2 pcodec fpzip imagecodecs   (and the l3 package, if built)
    python scripts/peers_lossless.py [../shared/data/float32] [--reps 3] [--out FILE]

Reads every `NAME.f32` (raw little-endian float32, C order) with its `NAME.json` sidecar
(shape) in the folder. Codecs, each given the same array and run on one thread:
zstd -3 and -19 (zstandard), Blosc2 (bitshuffle + zstd, typesize 4, clevel 9, one block
size chosen by Blosc2), pcodec (default level 8 and level 12, the whole array as one 1-D
chunk set), fpzip lossless (its own package, else imagecodecs'), ZFP reversible mode
(through imagecodecs, when the installed build has it), and bitshuffle (imagecodecs, its default block) followed by zstd -19 as a reference; and l3's
lossless float arrays (`l3.encode_field(a, lossless=True, fill_value=<sidecar's>)`, decoded
by `l3.decode_field` with RAYON_NUM_THREADS=1) when the `l3` package imports.

For each array and codec: compression ratio (raw bytes / compressed bytes), single-thread
decode MB/s of raw output (median of --reps) and a round-trip check that compares the uint32
views, so NaN payloads and -0.0 must come back bit for bit. A codec that fails the check, or
raises, is reported as failing and left out of the geometric means (which then say how many
arrays they cover). Geometric means of the ratio per codec over all arrays, over the smooth
ones (ferret_*, mricron_*, skimage_*, mpl_*) and over the noisy ones (eso_*).

Prints a Markdown table; --out FILE writes the same Markdown to FILE and the figures as JSON
to FILE with the suffix .json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "BLOSC_NTHREADS", "RAYON_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

try:
    import zstandard
except ImportError:  # pragma: no cover
    sys.exit("needs zstandard: pip install zstandard")

try:
    import blosc2
except ImportError:  # pragma: no cover
    blosc2 = None
try:
    import pcodec
except ImportError:  # pragma: no cover
    pcodec = None
try:
    import imagecodecs as ic
except ImportError:  # pragma: no cover
    ic = None
try:
    import fpzip
except ImportError:  # pragma: no cover
    fpzip = None
try:
    import l3
except ImportError:  # pragma: no cover
    l3 = None

NOISY_PREFIXES = ("eso_",)


def available(name: str) -> bool:
    """Whether this imagecodecs build has codec NAME (its wheels leave some out)."""
    if ic is None:
        return False
    try:
        return bool(getattr(ic, name.upper()).available)
    except AttributeError:
        return False


def timed(fn, reps):
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        t.append(time.perf_counter() - s)
    return statistics.median(t)


def codecs(a: np.ndarray, fill=None) -> dict:
    """name -> (encode() -> bytes, decode(bytes) -> array of a's size), or a reason it is absent.
    fill: the sidecar's fill value (only l3 uses it)."""
    raw = a.tobytes()
    z3 = zstandard.ZstdCompressor(level=3, threads=0)
    z19 = zstandard.ZstdCompressor(level=19, threads=0)
    zd = zstandard.ZstdDecompressor()
    unzstd = lambda d: np.frombuffer(zd.decompress(d), dtype="<f4")  # noqa: E731
    out: dict = {
        "zstd -3": (lambda: z3.compress(raw), unzstd),
        "zstd -19": (lambda: z19.compress(raw), unzstd),
    }
    if blosc2 is not None:
        blosc2.set_nthreads(1)
        out["Blosc2 bitshuffle+zstd 9"] = (
            lambda: blosc2.compress2(raw, typesize=4, clevel=9, codec=blosc2.Codec.ZSTD,
                                     filters=[blosc2.Filter.BITSHUFFLE], nthreads=1),
            lambda d: np.frombuffer(blosc2.decompress2(d), dtype="<f4"))
    else:
        out["Blosc2 bitshuffle+zstd 9"] = "blosc2 not installed"
    if pcodec is not None:
        flat = np.ascontiguousarray(a.ravel())
        for level in (pcodec.DEFAULT_COMPRESSION_LEVEL, 12):
            out[f"pcodec {level}"] = (
                lambda level=level: pcodec.standalone.simple_compress(
                    flat, pcodec.ChunkConfig(compression_level=level)),
                pcodec.standalone.simple_decompress)
    else:
        out["pcodec"] = "pcodec not installed"
    if available("zfp"):
        out["ZFP reversible"] = (lambda: ic.zfp_encode(a, mode="R", numthreads=1),
                                 lambda d: ic.zfp_decode(d, numthreads=1))
    else:
        out["ZFP reversible"] = "not in this imagecodecs build"
    if fpzip is not None and a.ndim <= 4:
        # fpzip's own package; it gives back 4 axes, leading ones of length 1.
        out["fpzip"] = (lambda: fpzip.compress(a, precision=0, order="C"),
                        lambda d: fpzip.decompress(d, order="C").reshape(-1))
    elif available("fpzip"):
        out["fpzip"] = (lambda: ic.fpzip_encode(a), lambda d: ic.fpzip_decode(d))
    else:
        out["fpzip"] = "neither the fpzip package nor an imagecodecs build with it"
    if available("bitshuffle"):
        out["bitshuffle + zstd -19"] = (
            lambda: z19.compress(ic.bitshuffle_encode(raw, itemsize=4)),
            lambda d: np.frombuffer(ic.bitshuffle_decode(zd.decompress(d), itemsize=4),
                                    dtype="<f4"))
    else:
        out["bitshuffle + zstd -19"] = "bitshuffle not in this imagecodecs build"
    if l3 is not None and hasattr(l3, "field_info"):
        out["l3 lossless"] = (lambda: l3.encode_field(a, lossless=True, fill_value=fill),
                              l3.decode_field)
    else:
        out["l3 lossless"] = "the l3 package is not installed"
    return out


def is_noisy(name: str) -> bool:
    return name.startswith(NOISY_PREFIXES)


def gmean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", nargs="?", default="../shared/data/float32")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    files = sorted(Path(args.source).glob("*.f32"))
    if not files:
        sys.exit(f"no .f32 arrays in {args.source}")
    rows = []  # dicts
    absent = {}
    order: list[str] = []
    for f32 in files:
        meta = json.loads(f32.with_suffix(".json").read_text())
        arr = np.fromfile(f32, dtype="<f4").reshape(meta["shape"])
        want = arr.view("<u4").ravel()
        for name, spec in codecs(arr, meta.get("fill_value")).items():
            if name not in order:
                order.append(name)
            if isinstance(spec, str):
                absent[name] = spec
                continue
            enc, dec = spec
            row = {"array": f32.stem, "shape": list(arr.shape), "codec": name,
                   "noisy": is_noisy(f32.stem), "raw_bytes": arr.nbytes}
            try:
                data = enc()
                got = np.asarray(dec(data))
                exact = got.size == want.size and np.array_equal(
                    np.ascontiguousarray(got).view("<u4").ravel(), want)
                secs = timed(lambda: dec(data), args.reps)
                row.update(bytes=len(data), ratio=arr.nbytes / len(data),
                           decode_mbps=arr.nbytes / secs / 1e6, exact=bool(exact))
            except Exception as err:  # a codec refusing an input is a result too
                row.update(bytes=None, ratio=None, decode_mbps=None, exact=False,
                           error=f"{type(err).__name__}: {str(err)[:80]}")
            rows.append(row)
            print(f"{f32.stem:32s} {name:26s} "
                  + (f"{row['ratio']:7.3f} {row['decode_mbps']:8.0f} MB/s"
                     if row["ratio"] else row.get("error", ""))
                  + ("" if row["exact"] else "  NOT EXACT"), file=sys.stderr, flush=True)

    summary = {}
    for name in order:
        if name in absent:
            continue
        mine = [r for r in rows if r["codec"] == name]
        ok = [r for r in mine if r["exact"]]
        summary[name] = {
            "all": gmean([r["ratio"] for r in ok]),
            "smooth": gmean([r["ratio"] for r in ok if not r["noisy"]]),
            "noisy": gmean([r["ratio"] for r in ok if r["noisy"]]),
            "decode_mbps_median": statistics.median([r["decode_mbps"] for r in ok]) if ok else None,
            "exact": len(ok), "arrays": len(mine),
        }

    f = lambda x, d=3: "-" if x is None else f"{x:.{d}f}"  # noqa: E731
    md = []
    md.append(f"Lossless float32, {len(files)} arrays from `{args.source}`, one thread, decode "
              f"median of {args.reps}; {platform.machine()} / {platform.processor() or '?'}, "
              f"Python {platform.python_version()}, numpy {np.__version__}, zstandard "
              f"{zstandard.__version__}, blosc2 {getattr(blosc2, '__version__', '-')}, "
              f"pcodec {getattr(pcodec, '__version__', '-')}, imagecodecs "
              f"{getattr(ic, '__version__', '-')}.")
    md.append("")
    md.append("Geometric-mean ratio (raw / compressed) over the arrays that round-tripped "
              "bit-exactly; decode MB/s is the median over arrays.")
    md.append("")
    md.append("| codec | all | smooth | noisy (eso_*) | decode MB/s (median) | bit-exact |")
    md.append("|---|---:|---:|---:|---:|---:|")
    for name, s in summary.items():
        md.append(f"| {name} | {f(s['all'])} | {f(s['smooth'])} | {f(s['noisy'])} | "
                  f"{f(s['decode_mbps_median'], 0)} | {s['exact']} of {s['arrays']} |")
    for name, why in absent.items():
        md.append(f"| {name} | - | - | - | - | not run: {why} |")
    md.append("")
    names = list(summary)
    md.append("Per array: ratio / decode MB/s (FAIL = not bit-exact or error)")
    md.append("")
    md.append("| array | " + " | ".join(names) + " |")
    md.append("|---|" + "---:|" * len(names))
    for f32 in files:
        cells = []
        for name in names:
            r = next((r for r in rows if r["array"] == f32.stem and r["codec"] == name), None)
            if r is None:
                cells.append("-")
            elif not r["exact"]:
                cells.append("FAIL" + (f" ({r['error']})" if "error" in r else
                                        f" {f(r['ratio'], 2)}"))
            else:
                cells.append(f"{r['ratio']:.2f} / {r['decode_mbps']:.0f}")
        md.append(f"| {f32.stem} | " + " | ".join(cells) + " |")
    text = "\n".join(md) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(
            {"source": str(args.source), "reps": args.reps, "absent": absent,
             "summary": summary, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
