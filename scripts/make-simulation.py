#!/usr/bin/env python3
"""A 2-D shallow-water simulation written as scientific arrays, for the tensor loader's tests
and benchmarks: h (fluid depth), u, v (velocity), float32, one sample per saved step along
axis 0, written in chunks to HDF5 (uncompressed, gzip, Blosc2 or Zstd through hdf5plugin),
NetCDF-4 and Zarr.

    python scripts/make-simulation.py --out /tmp/sim --steps 2000 --formats h5,h5-gzip,h5-blosc2

The model: the rotating shallow-water equations in vector-invariant form on a doubly
periodic square of side 2*pi, N x N cells (--size, 256), g = 1, mean depth 1, Coriolis
f = 3 (deformation radius 1/3: about 1/19 of the domain), viscosity 4e-4 on h, u and v.
Centred differences, SSP-RK3 at a CFL number of 0.4 against the gravity-wave speed plus
the largest initial velocity, --substeps (2) steps per saved sample. Initial state from
--seed: a random streamfunction (wavenumbers 1..10, amplitude falling as k^-2) gives the
velocity (largest speed 0.5) and a random depth anomaly (wavenumbers 1..6, +-0.1): gravity
waves, geostrophic adjustment and turbulent vortices, smooth with sharp fronts, not noise.
NumPy only, float32; the same seed gives the same bytes on the same machine (the final
state's SHA-256 is printed).

Outputs in --out: sim.h5 (uncompressed), sim-gzip.h5 (gzip level 4, shuffle), sim-blosc2.h5
(Blosc2 + zstd level 5, byte shuffle), sim-zstd.h5 (Zstd level 3), sim.nc (NetCDF-4, `time`
unlimited, uncompressed) and sim.zarr (Zarr v3, zarr's default zstd); chunks of
--chunk-steps steps (1) x the full field, so one sample is one chunk per variable. Each file
has h, u, v (steps, N, N), a `time` coordinate, units and the model's parameters as
attributes. The script prints each file's bytes and the time taken.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np

FORMATS = ("h5", "h5-gzip", "h5-blosc2", "h5-zstd", "nc", "zarr")
VARIABLES = {
    "h": ("fluid depth", "1"),
    "u": ("eastward velocity", "1"),
    "v": ("northward velocity", "1"),
}
G, DEPTH, CORIOLIS, VISCOSITY, CFL = 1.0, 1.0, 3.0, 4e-4, 0.4


class ShallowWater:
    """The model's state and its SSP-RK3 step (float32, periodic, centred differences)."""

    def __init__(self, n: int, seed: int):
        self.n = n
        self.dx = 2 * math.pi / n
        rng = np.random.default_rng(seed)
        k = np.fft.fftfreq(n, 1.0 / n)
        kk = np.hypot(*np.meshgrid(k, k))

        def random_field(kmax: float, slope: float) -> np.ndarray:
            amp = np.zeros_like(kk)
            band = (kk > 0) & (kk <= kmax)
            amp[band] = kk[band] ** slope
            spec = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))) * amp
            field = np.fft.ifft2(spec).real
            return field / np.abs(field).max()

        psi = random_field(10, -2.0)
        u, v = -self.ddy(psi), self.ddx(psi)
        scale = 0.5 / max(np.abs(u).max(), np.abs(v).max())
        self.u = (u * scale).astype(np.float32)
        self.v = (v * scale).astype(np.float32)
        self.h = (DEPTH + 0.1 * random_field(6, -1.0)).astype(np.float32)
        self.dt = np.float32(CFL * self.dx / (math.sqrt(G * DEPTH) + 0.5))

    def ddx(self, a: np.ndarray) -> np.ndarray:
        return (np.roll(a, -1, 1) - np.roll(a, 1, 1)) * np.float32(0.5 / self.dx)

    def ddy(self, a: np.ndarray) -> np.ndarray:
        return (np.roll(a, -1, 0) - np.roll(a, 1, 0)) * np.float32(0.5 / self.dx)

    def lap(self, a: np.ndarray) -> np.ndarray:
        s = np.roll(a, -1, 1) + np.roll(a, 1, 1) + np.roll(a, -1, 0) + np.roll(a, 1, 0) - 4 * a
        return s * np.float32(1 / self.dx**2)

    def rhs(self, h, u, v):
        nu = np.float32(VISCOSITY)
        q = np.float32(CORIOLIS) + self.ddx(v) - self.ddy(u)  # absolute vorticity
        bernoulli = np.float32(G) * h + np.float32(0.5) * (u * u + v * v)
        dh = -(self.ddx(h * u) + self.ddy(h * v)) + nu * self.lap(h)
        du = q * v - self.ddx(bernoulli) + nu * self.lap(u)
        dv = -q * u - self.ddy(bernoulli) + nu * self.lap(v)
        return dh, du, dv

    def step(self) -> None:
        dt, s = self.dt, (self.h, self.u, self.v)
        k = self.rhs(*s)
        s1 = [a + dt * b for a, b in zip(s, k)]
        k = self.rhs(*s1)
        s2 = [np.float32(0.75) * a + np.float32(0.25) * (b + dt * c) for a, b, c in zip(s, s1, k)]
        k = self.rhs(*s2)
        third = np.float32(1 / 3)
        self.h, self.u, self.v = (
            third * a + (1 - third) * (b + dt * c) for a, b, c in zip(s, s2, k)
        )


def open_outputs(out: Path, formats, steps: int, n: int, chunk: int, attrs: dict):
    """Creates each requested file; returns ``(name, path, write(lo, block), close)``."""
    outputs = []
    shape, chunks = (steps, n, n), (chunk, n, n)
    times = np.arange(steps) * attrs["saved_dt"]
    for fmt in formats:
        if fmt.startswith("h5"):
            import h5py

            filters: dict = {}
            if fmt == "h5-gzip":
                filters = dict(compression="gzip", compression_opts=4, shuffle=True)
            elif fmt in ("h5-blosc2", "h5-zstd"):
                import hdf5plugin

                filters = dict(
                    hdf5plugin.Blosc2(cname="zstd", clevel=5, filters=hdf5plugin.Blosc2.SHUFFLE)
                    if fmt == "h5-blosc2"
                    else hdf5plugin.Zstd(clevel=3)
                )
            path = out / ("sim.h5" if fmt == "h5" else f"sim-{fmt[3:]}.h5")
            f = h5py.File(path, "w")
            f.attrs.update(attrs)
            f.create_dataset("time", data=times)
            dsets = {}
            for name, (long_name, units) in VARIABLES.items():
                d = f.create_dataset(name, shape, np.float32, chunks=chunks, **filters)
                d.attrs.update(long_name=long_name, units=units)
                d.dims[0].label = "time"
                dsets[name] = d

            def write(lo, block, dsets=dsets):
                for name, data in block.items():
                    dsets[name][lo : lo + len(data)] = data

            outputs.append((fmt, path, write, f.close))
        elif fmt == "nc":
            import netCDF4

            path = out / "sim.nc"
            nc = netCDF4.Dataset(path, "w")
            nc.setncatts(attrs)
            nc.createDimension("time", None)
            nc.createDimension("y", n)
            nc.createDimension("x", n)
            t = nc.createVariable("time", "f8", ("time",))
            t.units = "model time units"
            t[:] = times
            nvars = {}
            for name, (long_name, units) in VARIABLES.items():
                var = nc.createVariable(name, "f4", ("time", "y", "x"), chunksizes=chunks)
                var.long_name, var.units = long_name, units
                nvars[name] = var

            def write(lo, block, nvars=nvars):
                for name, data in block.items():
                    nvars[name][lo : lo + len(data)] = data

            outputs.append((fmt, path, write, nc.close))
        elif fmt == "zarr":
            import zarr

            path = out / "sim.zarr"
            shutil.rmtree(path, ignore_errors=True)
            g = zarr.open_group(str(path), mode="w", zarr_format=3)
            g.attrs.update(attrs)
            g.create_array("time", data=times, chunks=(steps,))
            arrays = {}
            for name, (long_name, units) in VARIABLES.items():
                a = g.create_array(
                    name,
                    shape=shape,
                    chunks=chunks,
                    dtype=np.float32,
                    dimension_names=("time", "y", "x"),
                )
                a.attrs.update(long_name=long_name, units=units)
                arrays[name] = a

            def write(lo, block, arrays=arrays):
                for name, data in block.items():
                    arrays[name][lo : lo + len(data)] = data

            outputs.append((fmt, path, write, lambda: None))
        else:
            raise SystemExit(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    return outputs


def size_of(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--steps", type=int, default=2000, help="saved steps (samples), default 2000")
    ap.add_argument("--size", type=int, default=256, help="grid cells per side, default 256")
    ap.add_argument("--substeps", type=int, default=2, help="model steps per saved step, default 2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk-steps", type=int, default=1, help="steps per chunk, default 1")
    ap.add_argument(
        "--formats", default="h5", help=f"comma-separated, of {','.join(FORMATS)} (default h5)"
    )
    args = ap.parse_args()
    if min(args.steps, args.size, args.substeps, args.chunk_steps) < 1 or args.size < 8:
        raise SystemExit("--steps, --substeps, --chunk-steps must be >= 1 and --size >= 8")
    formats = [f for f in args.formats.split(",") if f]
    args.out.mkdir(parents=True, exist_ok=True)
    model = ShallowWater(args.size, args.seed)
    attrs = dict(
        model="rotating shallow water, periodic, centred differences, SSP-RK3",
        size=args.size,
        dx=model.dx,
        g=G,
        mean_depth=DEPTH,
        coriolis=CORIOLIS,
        viscosity=VISCOSITY,
        model_dt=float(model.dt),
        substeps=args.substeps,
        saved_dt=float(model.dt) * args.substeps,
        seed=args.seed,
    )
    outputs = open_outputs(args.out, formats, args.steps, args.size, args.chunk_steps, attrs)
    per_write = args.chunk_steps * max(1, 16 // args.chunk_steps)
    t0 = time.monotonic()
    sim_s = 0.0
    write_s = {fmt: 0.0 for fmt in formats}
    lo = 0
    while lo < args.steps:
        rows = min(per_write, args.steps - lo)
        block = {name: np.empty((rows, args.size, args.size), np.float32) for name in VARIABLES}
        t = time.monotonic()
        for r in range(rows):
            if lo + r > 0:
                for _ in range(args.substeps):
                    model.step()
            block["h"][r], block["u"][r], block["v"][r] = model.h, model.u, model.v
        sim_s += time.monotonic() - t
        if not np.isfinite(model.h).all():
            raise SystemExit(f"the simulation blew up at step {lo + rows}")
        for fmt, _, write, _ in outputs:
            t = time.monotonic()
            write(lo, block)
            write_s[fmt] += time.monotonic() - t
        lo += rows
        print(f"\r{lo}/{args.steps} steps", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    for _, _, _, close in outputs:
        close()
    state = hashlib.sha256(b"".join(a.tobytes() for a in (model.h, model.u, model.v))).hexdigest()
    raw = 3 * args.steps * args.size * args.size * 4
    print(
        f"{args.steps} steps of {args.size}x{args.size} (h, u, v float32, {raw} bytes raw) in"
        f" {time.monotonic() - t0:.1f} s (model {sim_s:.1f} s); final state sha256 {state[:16]}"
    )
    print(
        f"h range {float(model.h.min()):.3f}..{float(model.h.max()):.3f},"
        f" max speed {float(np.hypot(model.u, model.v).max()):.3f}"
    )
    for fmt, path, _, _ in outputs:
        size = size_of(path)
        print(f"  {path}: {size} bytes ({raw / size:.2f}x), written in {write_s[fmt]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
