"""A held-out float32 corpus for lossless float codecs: real arrays l3 was not tuned on, and
made (synthetic) arrays of the kinds real data has but the shared corpus lacks.

    python scripts/make-float-corpus.py OUT [--eraint eraint_uvz.nc] [--obspy-git DIR]

Writes `NAME.f32` (raw little-endian float32, C order) and `NAME.json` (shape, fill_value,
source, real or made) into OUT, the layout scripts/peers_lossless.py reads. Nothing is
downloaded: the real inputs are files you pass.

Real (names start with the source):
- `eraint_u`, `eraint_v`, `eraint_z`: ERA-Interim u, v wind and geopotential, shape
  (2, 3, 241, 480), from `eraint_uvz.nc` in the public repo pydata/xarray-data (int16 with
  CF scale_factor/add_offset; unpacked as float64 `int16 * scale + offset`, then float32: low-
  precision numbers stored as float). Needs netCDF4.
- `obspy_karc_corrected` (instrument-corrected seismogram, float64 text -> float32, 86399
  values), `obspy_kw1_counts` (raw seismometer counts, integers stored as float, 936001 values)
  and `obspy_crlz_hhz` (a SAC float32 seismogram), from obspy/obspy's test data, read out of a
  git mirror of that repository given as --obspy-git (`git --git-dir DIR show HEAD:path`).

Made (names start with `made_`, fixed seed, deterministic):
- `made_precip`: precipitation-like field, 88 % exact 0.0, rare wet cells in blobs with
  amounts rounded to 0.1 mm (so many repeated values);
- `made_saturated`: a smooth noisy image clipped at its maximum 1.0 (a saturated sensor);
- `made_quiet_1d`: a 1-D signal of bursts separated by long stretches of exact 0.0 and of
  tiny noise;
- `made_hdr`: an HDR image (RGB) with a dynamic range of about 1e9, full float32 precision;
- `made_counts`: Poisson counts of a smooth intensity, integers stored as float;
- `made_decimals2`: a smooth temperature-like field rounded to 2 decimals.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import subprocess
from pathlib import Path

import numpy as np


def write(out: Path, name: str, a: np.ndarray, source: str, kind: str, fill=None) -> None:
    a = np.ascontiguousarray(a, dtype="<f4")
    (out / f"{name}.f32").write_bytes(a.tobytes())
    meta = {"shape": list(a.shape), "fill_value": fill, "source": source, "kind": kind}
    (out / f"{name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{name:24s} {kind:4s} {str(a.shape):20s} {a.nbytes / 1e6:6.2f} MB")


def smooth_noise(rng, shape, passes=6):
    """Correlated noise: white noise box-blurred `passes` times along every axis (wraps)."""
    a = rng.standard_normal(shape)
    for _ in range(passes):
        for ax in range(a.ndim):
            a = (a + np.roll(a, 1, ax) + np.roll(a, -1, ax) + np.roll(a, 2, ax)
                 + np.roll(a, -2, ax)) / 5
    return a / a.std()


def eraint(out: Path, path: Path) -> None:
    import netCDF4

    d = netCDF4.Dataset(path)
    for var in ("u", "v", "z"):
        v = d.variables[var]
        v.set_auto_maskandscale(False)
        packed = np.asarray(v[:])
        a = (packed.astype(np.float64) * float(v.scale_factor) + float(v.add_offset))
        write(out, f"eraint_{var}", a.astype(np.float32),
              f"pydata/xarray-data eraint_uvz.nc variable {var} (int16 packed, unpacked)", "real")


def obspy(out: Path, git_dir: Path) -> None:
    def show(p):
        return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{p}"],
                              check=True, capture_output=True).stdout

    p = "obspy/signal/tests/data/KARC_corrected.sac.asc.gz"
    a = np.loadtxt(io.BytesIO(gzip.decompress(show(p))), dtype=np.float64)
    write(out, "obspy_karc_corrected", a.astype(np.float32), f"obspy/obspy {p}", "real")
    p = "obspy/signal/tests/data/BW.KW1._.EHZ.D.2011.090_downsampled.asc.gz"
    a = np.loadtxt(io.BytesIO(gzip.decompress(show(p))), dtype=np.float64)
    write(out, "obspy_kw1_counts", a.astype(np.float32), f"obspy/obspy {p}", "real")
    p = "obspy/signal/tests/data/CRLZ.HHZ.10.NZ.SAC"
    raw = show(p)
    # SAC: 632-byte header (npts is int 9 after 70 floats), then npts float32; either endian.
    for end in ("<", ">"):
        npts = int(np.frombuffer(raw[280 + 36:280 + 40], dtype=f"{end}i4")[0])
        if 632 + 4 * npts == len(raw):
            a = np.frombuffer(raw[632:], dtype=f"{end}f4")
            write(out, "obspy_crlz_hhz", a.astype(np.float32), f"obspy/obspy {p}", "real")
            break
    else:
        print(f"skipped {p}: not a SAC file this script understands")


def made(out: Path) -> None:
    rng = np.random.default_rng(20261206)

    # Precipitation: wet where a smooth field is high; amounts rounded to 0.1 mm.
    shape = (4, 360, 720)
    wet = smooth_noise(rng, shape)
    amount = np.exp(1.2 * smooth_noise(rng, shape) + 0.4 * rng.standard_normal(shape))
    a = np.where(wet > 1.2, np.round(amount * (wet - 1.2) * 8, 1), 0.0)
    write(out, "made_precip", a.astype(np.float32),
          f"made: {np.mean(a == 0):.0%} exact zeros, amounts rounded to 0.1", "made")

    # Saturated image: smooth scene with photon-like noise, clipped at 1.0.
    shape = (1024, 1024)
    scene = 0.75 + 0.35 * smooth_noise(rng, shape, passes=10)
    img = scene + 0.01 * rng.standard_normal(shape)
    a = np.clip(img, 0.0, 1.0).astype(np.float32)
    write(out, "made_saturated", a, f"made: {np.mean(a == 1.0):.0%} clipped at 1.0", "made")

    # 1-D: bursts (damped oscillations) separated by long quiet stretches.
    n = 1 << 21
    a = np.zeros(n)
    t = 0
    while t < n:
        gap = int(rng.integers(20_000, 120_000))
        t += gap
        length = int(rng.integers(2_000, 20_000))
        if t + length > n:
            break
        k = np.arange(length)
        a[t:t + length] = (rng.uniform(0.5, 50) * np.exp(-k / (length / 4))
                           * np.sin(k * rng.uniform(0.02, 0.2)) + 0.01 * rng.standard_normal(length))
        t += length
    quiet = a == 0
    # Half the quiet stretches carry tiny sensor noise instead of exact zeros.
    half = np.cumsum(np.diff(np.concatenate([[0], quiet.astype(int)])) == 1) % 2 == 0
    a[quiet & half] = 1e-4 * rng.standard_normal(int((quiet & half).sum()))
    write(out, "made_quiet_1d", a.astype(np.float32),
          f"made: {np.mean(a == 0):.0%} exact zeros in quiet stretches", "made")

    # HDR: luminance exp(smooth * 5) spans ~1e9, times colour, with small noise.
    shape = (768, 1024)
    lum = np.exp(3.5 * smooth_noise(rng, shape, passes=8))
    rgb = lum[..., None] * np.array([1.0, 0.8, 0.6]) * (1 + 0.01 * rng.standard_normal(shape + (3,)))
    write(out, "made_hdr", rgb.astype(np.float32),
          f"made: dynamic range {rgb.max() / rgb.min():.1e}", "made")

    # Counts: Poisson of a smooth intensity, stored as float.
    shape = (1024, 1024)
    lam = np.exp(2.0 + 1.5 * smooth_noise(rng, shape, passes=8))
    a = rng.poisson(lam).astype(np.float32)
    write(out, "made_counts", a, "made: Poisson counts as float32", "made")

    # Two decimals: temperatures in deg C.
    shape = (8, 256, 512)
    a = np.round(15 + 8 * smooth_noise(rng, shape, passes=8) + 0.05 * rng.standard_normal(shape), 2)
    write(out, "made_decimals2", a.astype(np.float32), "made: rounded to 0.01", "made")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--eraint", type=Path, help="eraint_uvz.nc (pydata/xarray-data)")
    p.add_argument("--obspy-git", type=Path, help="git dir of an obspy/obspy mirror")
    p.add_argument("--no-made", action="store_true", help="only the real arrays")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.eraint:
        eraint(args.out, args.eraint)
    if args.obspy_git:
        obspy(args.out, args.obspy_git)
    if not args.no_made:
        made(args.out)


if __name__ == "__main__":
    main()
