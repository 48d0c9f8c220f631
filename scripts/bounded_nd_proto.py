"""NumPy size estimates for error-bounded float fields of 1 to 4 axes (a design study, not a
codec), with SZ3 and l3's current `.l3f` codec measured on the same arrays for calibration.

    pip install numpy zstandard imagecodecs   # plus the l3 package for the l3-today column
    python scripts/bounded_nd_proto.py [../shared/data/float32] [--bounds 1e-2 1e-3 1e-4]
        [--out FILE.md] [--only NAME ...]

Arrays: the shared float32 corpus is the tuning set; the held-out set is made here from fixed
seeds (a 1-D seismogram, a 4-D time x level x lat x lon grid, a noisy star frame, a smooth
3-D volume, a mostly-zero precipitation cube, a heavy-tailed HDR-like image).

Bins: dual quantisation as in SPEC.md "Float fields": absolute bound e = rel x value range of
the regular values, offset = the smallest regular value, bin width = the largest value at most
2e with 8 significant bits, q = round((v - offset) / width) or a neighbouring bin when only
that one decodes within e; NaN, fill and misses are exception runs (costed as SPEC's runs
section) and their cells hold the previous regular bin. The script rebuilds every value as
f32(offset + f32(q x width)) and asserts the bound, so every design below meets it.

Predictors on the integer bins (all exact; each inverse is run and checked):
  a    today's equivalent: the bins as l3's 16-bit image (nx wide, the other axes stacked),
       128 x 128 patches, per patch the best of left / up / gradient (Lorenzo) with l3's edge
       rules (first patch row predicted from 0), l3 version-2 tokens (singles, pairs, runs).
  b    wrapping differences along a set of the array's own axes (one axis: previous value;
       all: n-D Lorenzo), the best of the 2^n - 1 sets per array.
  c    SZ3-style multilevel interpolation: level by level (stride 2^l), dimension by
       dimension, each new point predicted from the known points at +-s along that axis,
       linear floor((a + b + 1) / 2) or cubic floor((-a + 9b + 9c - d + 8) / 16), in integers;
       c-lin, c-cub, and c-best (per pass the better of the two, and per array the better of
       two axis orders). Within one pass every prediction reads known points only, so a GPU
       decodes a pass in parallel.
  e    c-best's passes with SZ3's closed loop, in integers: values on a lattice of unit
       u <= 2e / 17 (7 significant bits), each target stored as k = round((x - pred) / 16)
       with pred from the decoded lattice values, decoded as pred + 16 k; exception cells get
       k = 0. Still parallel within a pass (predictions read earlier passes only); the f32
       output is offset + f32(x u), exact product, one rounded addition, checked as in SPEC.
       e0 uses the step 16 at every level; e takes per array the best (huf3) of that and two
       QoZ-style settings where level l >= 1 (stride 2^(l-1)) uses the step
       round(16 / min(alpha^(l-1), beta)), (alpha, beta) = (1.5, 4) or (2, 2): coarse levels
       decoded more exactly, which the finer levels predict from.
  d    per array the cheapest (huf3) of b, c-best and e (a flag in the header).

Entropy stages on the zigzag residual stream (32-bit tokens as the lossless float coder's,
chunks of 65536 values with their own code, as a GPU decoder needs):
  huf1   canonical Huffman (limited to 11 bits) of single tokens only (z < 16: own token, else
         bit length + next bit, rest raw), code-length table costed as SPEC's delta code;
  huf2   the same with l3's pair tokens (two z < 4) and zero-run tokens (2..127 zero pairs),
         per chunk the cheapest of singles / +pairs / +pairs+runs: real Huffman bits;
  huf3   huf2 with zero runs up to 2^15 - 1 positions (14 run tokens) where that is cheaper;
  ans    order-0 entropy of huf2's token stream + raw bits + 8 bits per used token (a bound
         for a static rANS / arithmetic coder per chunk);
  ctx    order-0 entropy of huf2's tokens in 3 contexts (previous token: zero pair or run /
         other pair or single < 4 / larger) + raw bits + tables (a context-ANS bound);
  zstd   real zstd -19 of the huf2 bitstream per chunk (SZ3's Huffman + zstd), written out bit
         by bit in NumPy.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

try:
    import zstandard
except ImportError:  # pragma: no cover
    sys.exit("needs zstandard: pip install zstandard")

Z19 = zstandard.ZstdCompressor(level=19)
CHUNK = 1 << 16
MAX_LEN = 11
NSINGLE = 16 + 2 * 28  # single tokens for 32-bit zigzag values
PAIR0 = NSINGLE
RUN0 = PAIR0 + 16  # run token j = 1..6 is RUN0 + j - 1
NTOK = RUN0 + 14  # runs up to 2^15 - 1 positions in the long-run variant


# ---------------------------------------------------------------------------------------------
# arrays


def shared_arrays(src: Path):
    for f32 in sorted(src.glob("*.f32")):
        meta = json.loads(f32.with_suffix(".json").read_text())
        a = np.fromfile(f32, dtype="<f4").reshape(meta["shape"])
        yield f32.stem, a, meta.get("fill_value")


def smooth_noise(rng, shape, slope):
    """A Gaussian random field with power spectrum k^-slope (FFT-filtered white noise), unit std."""
    w = rng.standard_normal(shape)
    f = np.fft.rfftn(w)
    k2 = np.zeros(f.shape)
    for ax, n in enumerate(shape):
        k = np.fft.rfftfreq(n) if ax == len(shape) - 1 else np.fft.fftfreq(n)
        sh = [1] * len(shape)
        sh[ax] = k.size
        k2 = k2 + (k ** 2).reshape(sh)
    k2[(0,) * len(shape)] = 1.0
    f *= k2 ** (-slope / 4)
    f[(0,) * len(shape)] = 0
    x = np.fft.irfftn(f, s=shape, axes=tuple(range(len(shape))))
    return x / x.std()


def held_out_arrays():
    """Arrays not used for tuning, from fixed seeds."""
    rng = np.random.default_rng(34)
    # 1-D seismogram: one day at 1 Hz, microseism + trend + three quakes (P and S packets)
    t = np.arange(86400, dtype=np.float64)
    x = 2.0e-3 * (t / 86400) + 1e-3 * np.sin(2 * np.pi * t / 43200)
    micro = np.zeros_like(t)
    for f0 in (0.07, 0.13, 0.19):
        micro += np.sin(2 * np.pi * f0 * t + rng.uniform(0, 6.3)) * (
            1 + 0.5 * np.sin(2 * np.pi * t / rng.uniform(2000, 9000)))
    x += 3e-4 * micro
    for t0, amp in ((20000, 0.05), (51000, 0.4), (70500, 0.02)):
        for lag, f0, tau, a in ((0, 0.21, 60, 1.0), (140, 0.09, 400, 2.2)):
            s = np.clip(t - t0 - lag, 0, None)
            on = t >= t0 + lag
            x += on * amp * a * np.exp(-s / tau) * (1 - np.exp(-s / 5)) * np.sin(
                2 * np.pi * f0 * s + rng.uniform(0, 6.3))
    x += 5e-5 * rng.standard_normal(t.size)
    yield "seismogram_1d", x.astype(np.float32), None
    # 4-D grid: time x level x lat x lon, a temperature-like field with moving waves
    nt, nz, ny, nx = 24, 12, 73, 144
    tt, zz, yy, xx = np.meshgrid(np.arange(nt), np.linspace(0, 1, nz),
                                 np.linspace(-np.pi / 2, np.pi / 2, ny),
                                 np.linspace(0, 2 * np.pi, nx, endpoint=False), indexing="ij")
    g = 300 - 60 * zz - 35 * np.sin(yy) ** 2
    for m, c, amp in ((2, 0.3, 4.0), (3, -0.2, 2.5), (5, 0.5, 1.2), (9, 0.1, 0.6)):
        g += amp * np.cos(yy) * np.cos(m * (xx - c * tt / 4) + 3 * zz) * (1 + 0.3 * zz)
    g += 0.8 * np.repeat(smooth_noise(rng, (nt, 1, ny, nx), 3.0), nz, axis=1)
    g += 0.01 * rng.standard_normal(g.shape)
    yield "grid_4d", g.astype(np.float32), None
    # noisy 2-D frame: sky + gradient + stars (Gaussian PSF) + Poisson + read noise + cosmics
    ny, nx = 1024, 1024
    yy, xx = np.mgrid[0:ny, 0:nx]
    img = 800 + 0.05 * xx + 0.03 * yy
    n = 400
    sx, sy = rng.uniform(0, nx, n), rng.uniform(0, ny, n)
    flux = 2e3 * rng.pareto(1.2, n) + 500
    for px, py, fl in zip(sx, sy, flux):
        x0, x1 = int(max(px - 12, 0)), int(min(px + 13, nx))
        y0, y1 = int(max(py - 12, 0)), int(min(py + 13, ny))
        r2 = (xx[y0:y1, x0:x1] - px) ** 2 + (yy[y0:y1, x0:x1] - py) ** 2
        sub = np.exp(-r2 / (2 * 1.8 ** 2))
        img[y0:y1, x0:x1] += fl / (2 * np.pi * 1.8 ** 2) * sub
    img = rng.poisson(np.minimum(img, 6e4)).astype(np.float64) + 6 * rng.standard_normal(img.shape)
    cr = rng.integers(0, ny * nx, 150)
    img.ravel()[cr] += rng.uniform(2e3, 2e4, cr.size)
    yield "star_frame_2d", (img / 2.3).astype(np.float32), None
    # smooth 3-D volume: a k^-3.7 random field plus two blobs
    v = smooth_noise(rng, (128, 128, 128), 3.7)
    zz, yy, xx = np.mgrid[0:128, 0:128, 0:128] / 128.0
    v += 3 * np.exp(-((xx - .3) ** 2 + (yy - .6) ** 2 + (zz - .5) ** 2) / 0.01)
    v += 2 * np.exp(-((xx - .7) ** 2 + (yy - .3) ** 2 + (zz - .2) ** 2) / 0.02)
    yield "volume_3d", v.astype(np.float32), None
    # precipitation: time x lat x lon, zero where a moving smooth field is below a threshold
    base = smooth_noise(rng, (48, 128, 128), 3.5)
    p = np.clip(base - 0.6, 0, None) ** 1.5 * 12
    yield "precip_3d", p.astype(np.float32), None
    # HDR-like radiance: exp of a smooth field, a few sharp bright sources
    h = np.exp(1.6 * smooth_noise(rng, (512, 768), 3.2))
    h[200:210, 300:330] = 2000.0
    h[400:404, 600:602] = 9000.0
    yield "hdr_2d", h.astype(np.float32), None


# ---------------------------------------------------------------------------------------------
# dual quantisation (SPEC.md "Float fields")


def bin_width(e: float) -> float:
    m, ex = math.frexp(2 * e)
    w = math.ldexp(math.floor(m * 256) / 256, ex)
    assert w <= 2 * e and float(np.float32(w)) == w
    return w


def leb128_len(v: np.ndarray) -> int:
    return int(np.sum(1 + (v >= 1 << 7) + (v >= 1 << 14) + (v >= 1 << 21) + (v >= 1 << 28)))


def runs_cost(f: np.ndarray, exc: np.ndarray) -> int:
    """Bytes of SPEC's runs section for the exception cells EXC of the flat array F."""
    if not exc.any():
        return 4
    bits = f.view(np.uint32)
    idx = np.flatnonzero(exc)
    brk = np.flatnonzero((np.diff(idx) != 1) | (bits[idx[1:]] != bits[idx[:-1]])) + 1
    starts = idx[np.r_[0, brk]]
    ends = idx[np.r_[brk - 1, idx.size - 1]] + 1
    gaps = starts - np.r_[0, ends[:-1]]
    table, tix = np.unique(bits[starts], return_inverse=True)
    return 8 + 4 * table.size + leb128_len(gaps) + leb128_len(ends - starts - 1) + leb128_len(tix)


def quantise(a: np.ndarray, fill, e: float):
    """Bins (int64, a's shape), bytes of the runs section, and the f32 reconstruction."""
    f = a.ravel()
    special = ~np.isfinite(f)
    if fill is not None:
        special |= f == np.float32(fill)
    reg = ~special
    off = np.float32(f[reg].min())
    w = bin_width(e)
    w32 = np.float32(w)
    v64 = f.astype(np.float64)
    q = np.zeros(f.size, np.int64)
    q[reg] = np.rint((v64[reg] - float(off)) / w).astype(np.int64)
    assert q.max() < 1 << 16, "more than 65536 bins"

    def rec(qq):
        return off + qq.astype(np.float32) * w32  # q x w exact in f32; one rounded addition

    def ok(qq):
        r = rec(qq)
        return (np.abs(r.astype(np.float64) - v64) <= e) & (
            (r == 0) | (np.abs(r) >= np.finfo(np.float32).tiny))

    good = ok(q) & reg
    for dq in (-1, 1):
        alt = np.clip(q + dq, 0, None)
        fix = ~good & reg & ok(alt)
        q[fix] = alt[fix]
        good |= fix
    exc = ~good
    # runs of equal f32 bits over exception cells; their bins hold the previous regular bin
    runs_bytes = runs_cost(f, exc)
    if exc.any():
        src = np.where(exc, 0, np.arange(f.size))
        np.maximum.accumulate(src, out=src)
        first = int(np.argmax(~exc))
        q = q[src]
        q[:first] = q[first]
    r = rec(q)
    # the bound, checked on every regular value; exceptions come back bit-exact from the runs
    assert np.all(np.abs(r.astype(np.float64)[~exc] - v64[~exc]) <= e)
    return q.reshape(a.shape), runs_bytes, exc.reshape(a.shape)


# ---------------------------------------------------------------------------------------------
# tokens and entropy stages


def zigzag(r: np.ndarray) -> np.ndarray:
    r = r.astype(np.int64)
    return np.where(r >= 0, 2 * r, -2 * r - 1)


def bitlen(x: np.ndarray) -> np.ndarray:
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def single_tokens(z: np.ndarray):
    """l3's single tokens (z < 16: token z; else n = floor(log2 z): 16 + 2(n - 4) + bit n-1,
    then n - 1 raw bits)."""
    n = bitlen(z) - 1
    big = z >= 16
    nn = np.where(big, n, 4)
    m = (z >> np.maximum(nn - 1, 0)) & 1
    return np.where(big, 16 + 2 * (nn - 4) + m, z), np.where(big, nn - 1, 0)


def token_stream(z: np.ndarray, pairs: bool, runs: bool, run_max: int = 127):
    """(tokens, raw bit counts, raw values) in stream order for one chunk of zigzag values."""
    n = z.size
    zp = np.r_[z, 99] if n % 2 else z  # odd tail: a lone single, never a pair or run
    z0, z1 = zp[0::2], zp[1::2]
    st0, rb0 = single_tokens(z0)
    st1, rb1 = single_tokens(z1)
    npos = z0.size
    kind = np.zeros(npos, np.int8)  # 0 two singles, 1 pair, 2 run head, 3 inside a run
    if pairs:
        kind[(z0 < 4) & (z1 < 4)] = 1
    runtok = np.zeros(npos, np.int64)
    runraw = np.zeros(npos, np.int64)
    runlen = np.zeros(npos, np.int64)
    if runs:
        zero = (z0 == 0) & (z1 == 0)
        zero[-1] &= n % 2 == 0
        d = np.diff(np.r_[0, zero.astype(np.int8), 0])
        starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        lr = ends - starts
        k, rem = lr // run_max, lr % run_max
        heads = np.repeat(starts, k) + run_max * (
            np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k))
        lens = np.full(heads.size, run_max)
        tail = rem >= 2  # a lone zero position stays a pair (or two singles)
        heads = np.r_[heads, (starts + run_max * k)[tail]]
        lens = np.r_[lens, rem[tail]]
        cov = np.zeros(npos + 1, np.int64)
        np.add.at(cov, heads + 1, 1)
        np.add.at(cov, heads + lens, -1)
        kind[np.cumsum(cov)[:npos] > 0] = 3
        kind[heads] = 2
        j = bitlen(lens) - 1
        runtok[heads] = RUN0 + j - 1
        runraw[heads] = j
        runlen[heads] = lens
    # expand positions into symbols, in stream order
    two = kind == 0
    if n % 2:
        two_b = two.copy()
        two_b[-1] = False  # the odd tail has no second value
    else:
        two_b = two
    keep = kind != 3
    pos = np.arange(npos)
    t_a = np.where(kind == 1, PAIR0 + 4 * np.minimum(z0, 3) + np.minimum(z1, 3),
                   np.where(kind == 2, runtok, st0))[keep]
    r_a = np.where(kind == 1, 0, np.where(kind == 2, runraw, rb0))[keep]
    v_a = np.where(kind == 2, runlen, z0)[keep]
    key = np.r_[2 * pos[keep], 2 * pos[two_b] + 1]
    o = np.argsort(key, kind="stable")
    sym = np.r_[t_a, st1[two_b]][o]
    raw = np.r_[r_a, rb1[two_b]][o]
    rawv = np.r_[v_a, z1[two_b]][o]
    return sym, raw, rawv


def untokens(sym, raw, rawv) -> np.ndarray:
    """The zigzag values back from a token stream (checks token_stream)."""
    out = []
    for t, r, v in zip(sym.tolist(), raw.tolist(), rawv.tolist()):
        if t < 16:
            out.append(t)
        elif t < NSINGLE:
            n, m = (t - 16) // 2 + 4, (t - 16) % 2
            assert r == n - 1
            out.append((1 << n) | (m << (n - 1)) | (v & ((1 << (n - 1)) - 1)))
        elif t < RUN0:
            out += [(t - PAIR0) // 4, (t - PAIR0) % 4]
        else:
            assert r == t - RUN0 + 1 and v >> r == 1
            out += [0] * (2 * v)
    return np.array(out, np.int64)


def check_tokens() -> None:
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 300, 301, 5001):
        z = rng.choice([0, 0, 0, 0, 0, 1, 2, 3, 5, 17, 40, 1000, 70000], n)
        z[10:400] = 0
        for pairs, runs, rm in ((False, False, 127), (True, False, 127), (True, True, 127),
                                (True, True, 32767)):
            sym, raw, rawv = token_stream(z, pairs, runs, rm)
            assert np.array_equal(untokens(sym, raw, rawv), z), (n, pairs, runs)


def huffman_lengths(counts: np.ndarray) -> np.ndarray:
    """Huffman code lengths limited to MAX_LEN (lengthen the shortest-losing codes to repair
    the Kraft sum), 0 for unused tokens; one used token gets length 1 (a zero-bit code in l3)."""
    used = np.flatnonzero(counts)
    L = np.zeros(counts.size, np.int64)
    if used.size == 1:
        L[used] = 1
        return L
    h = [(int(counts[i]), int(i), (int(i),)) for i in used]
    heapq.heapify(h)
    depth = {int(i): 0 for i in used}
    k = counts.size
    while len(h) > 1:
        c1, _, s1 = heapq.heappop(h)
        c2, _, s2 = heapq.heappop(h)
        for s in s1 + s2:
            depth[s] += 1
        heapq.heappush(h, (c1 + c2, k, s1 + s2))
        k += 1
    for s, d in depth.items():
        L[s] = min(d, MAX_LEN)
    while np.sum(2.0 ** -L[used]) > 1:
        cand = used[L[used] < MAX_LEN]
        # lengthen the least frequent of the longest codes still below the limit
        i = cand[np.lexsort((counts[cand], -L[cand]))][0]
        L[i] += 1
    return L


def table_bits(L: np.ndarray) -> int:
    """SPEC's code-length header: 6-bit ntok, then per token 1 bit (same), 3 bits (+-1) or 6."""
    used = np.flatnonzero(L)
    ntok = int(used.max()) + 1 if used.size else 1
    bits, prev = 6, 0
    for x in L[:ntok]:
        bits += 1 if x == prev else 3 if abs(int(x) - prev) == 1 else 6
        prev = int(x)
    return bits


def h0(counts: np.ndarray) -> float:
    c = counts[counts > 0].astype(np.float64)
    return float(-(c * np.log2(c / c.sum())).sum()) if c.size else 0.0


def huffman_bitstream(sym, raw, rawv, L) -> bytes:
    """The chunk's real bitstream: each symbol's canonical code (MSB first) then its raw bits."""
    used = np.flatnonzero(L)
    codes = np.zeros(L.size, np.int64)
    code, prev = 0, 0
    for i in used[np.lexsort((used, L[used]))]:
        code <<= int(L[i]) - prev
        prev = int(L[i])
        codes[i] = code
        code += 1
    ln = np.where(L[sym] == 1, 0, L[sym]) if used.size == 1 else L[sym]
    c = codes[sym]
    tot = ln + raw
    idx = np.repeat(np.arange(sym.size), tot)
    k = np.arange(idx.size) - np.repeat(np.cumsum(tot) - tot, tot)
    lnr = ln[idx]
    bit = np.where(k < lnr, (c[idx] >> np.maximum(lnr - 1 - k, 0)) & 1,
                   (rawv[idx] >> np.maximum(k - lnr, 0)) & 1)
    return np.packbits(bit.astype(np.uint8)).tobytes()


def ctx_bits(sym: np.ndarray) -> float:
    small = (sym < 4) | ((sym >= PAIR0) & (sym < RUN0))
    cls = np.where((sym == PAIR0) | (sym >= RUN0), 0, np.where(small, 1, 2))
    ctx = np.r_[0, cls[:-1]]
    bits = 0.0
    for c in range(3):
        cc = np.bincount(sym[ctx == c], minlength=NTOK)
        bits += h0(cc) + 8 * np.count_nonzero(cc)
    return bits


STAGES = ("huf1", "huf2", "huf3", "ans", "ctx", "zstd")


def code_stream(r: np.ndarray, stages=STAGES) -> dict:
    """Bytes of a residual stream (C order of r) under each entropy stage, chunk by chunk."""
    z = zigzag(r.ravel())
    out = dict.fromkeys(stages, 0.0)
    for s in range(0, z.size, CHUNK):
        c = z[s:s + CHUNK]
        hdr = 64  # chunk offset and flags
        best = None
        for pairs, runs, rm in ((False, False, 127), (True, False, 127), (True, True, 127),
                                (True, True, 32767)):
            if rm > 127 and "huf3" not in out:
                continue
            sym, raw, rawv = token_stream(c, pairs, runs, rm)
            cnt = np.bincount(sym, minlength=NTOK)
            L = huffman_lengths(cnt)
            one = np.count_nonzero(cnt) == 1
            hb = (0 if one else int((cnt * L).sum())) + int(raw.sum()) + table_bits(L) + hdr
            if not pairs and "huf1" in out:
                out["huf1"] += hb / 8
            if rm > 127:
                out["huf3"] += min(hb, best[0]) / 8
                continue
            if best is None or hb < best[0]:
                best = (hb, sym, raw, rawv, cnt, L)
        hb, sym, raw, rawv, cnt, L = best
        out["huf2"] += hb / 8
        if "ans" in out:
            out["ans"] += (h0(cnt) + raw.sum() + 8 * np.count_nonzero(cnt) + hdr) / 8
        if "ctx" in out:
            out["ctx"] += (ctx_bits(sym) + raw.sum() + hdr) / 8
        if "zstd" in out:
            bits = huffman_bitstream(sym, raw, rawv, L)
            out["zstd"] += len(Z19.compress(bits)) + 8 + table_bits(L) / 8
    return out


# ---------------------------------------------------------------------------------------------
# predictors


def diff_axes(q: np.ndarray, axes) -> np.ndarray:
    r = q.copy()
    for ax in axes:
        r = np.diff(r, axis=ax, prepend=0)
    return r


def undiff_axes(r: np.ndarray, axes) -> np.ndarray:
    for ax in reversed(axes):
        r = np.cumsum(r, axis=ax)
    return r


def quick_bits(r: np.ndarray) -> float:
    """A fast order-0 estimate (single tokens, one table) to rank candidates."""
    t, raw = single_tokens(zigzag(r.ravel()))
    return h0(np.bincount(t, minlength=NTOK)) + float(raw.sum())


def design_b(q: np.ndarray):
    nd = q.ndim
    sets = [s for k in range(1, nd + 1) for s in itertools.combinations(range(nd), k)]
    best = min(sets, key=lambda s: quick_bits(diff_axes(q, s)))
    r = diff_axes(q, best)
    assert np.array_equal(undiff_axes(r, best), q)
    return r, ",".join(map(str, best))


def interp_passes(q: np.ndarray, order):
    """Yields (index of the pass's view, its axis) pass by pass, coarse to fine; the targets
    are the view's odd entries along the axis. Shared by every encoder and decoder."""
    L = max(int(math.ceil(math.log2(max(q.shape)))), 0) if max(q.shape) > 1 else 0
    for lvl in range(L - 1, -1, -1):
        s = 1 << lvl
        for k, d in enumerate(order):
            sl = [slice(None)] * q.ndim
            for dd in order[:k]:
                sl[dd] = slice(None, None, s)
            sl[d] = slice(None, None, s)
            for dd in order[k + 1:]:
                sl[dd] = slice(None, None, 2 * s)
            yield tuple(sl), d


def predict(W: np.ndarray, kind: str) -> np.ndarray:
    """Predictions of the odd entries along axis 0 of W from its even entries."""
    m = W.shape[0]
    nt = m // 2
    left = W[0:2 * nt:2]
    right = W[2::2]
    p = left.copy()
    nr = right.shape[0]
    p[:nr] = (left[:nr] + right + 1) >> 1
    if kind == "cub" and nt >= 3:
        # targets i = 1 .. with 2i - 2 >= 0 and 2i + 4 <= m - 1
        hi = (m - 5) // 2
        if hi >= 1:
            i = slice(1, hi + 1)
            a = W[0:2 * hi - 1:2]
            b = W[2:2 * hi + 1:2]
            c = W[4:2 * hi + 3:2]
            dd = W[6:2 * hi + 5:2]
            p[i] = (-a + 9 * b + 9 * c - dd + 8) >> 4
    return p


def design_c(q: np.ndarray, kind: str, order):
    """Residual stream (level by level, pass by pass, C order in a pass) and the pass kinds.
    kind 'best' picks per pass the cheaper of linear and cubic."""
    parts, kinds = [q.ravel()[:1].copy()], []
    for sl, d in interp_passes(q, order):
        W = np.moveaxis(q[sl], d, 0)
        if W.shape[0] < 2:
            kinds.append("lin")
            continue
        t = W[1::2]
        if kind == "best":
            cand = {k: t - predict(W, k) for k in ("lin", "cub")}
            k = min(cand, key=lambda k: np.abs(cand[k]).sum())
            parts.append(np.moveaxis(cand[k], 0, d).ravel())
            kinds.append(k)
        else:
            parts.append(np.moveaxis(t - predict(W, kind), 0, d).ravel())
            kinds.append(kind)
    return np.concatenate(parts), kinds


def undo_c(shape, stream, kinds, order):
    """The decoder: pass by pass, every prediction from points decoded before the pass."""
    q = np.zeros(shape, np.int64)
    q.ravel()[:1] = stream[:1]
    pos = 1
    for (sl, d), k in zip(interp_passes(q, order), kinds):
        W = np.moveaxis(q[sl], d, 0)
        if W.shape[0] < 2:
            continue
        t = W[1::2]
        n = t.size
        r = np.moveaxis(stream[pos:pos + n].reshape(np.moveaxis(t, 0, d).shape), d, 0)
        W[1::2] = r + predict(W, k)
        pos += n
    assert pos == stream.size
    return q


def design_c_full(q: np.ndarray, kind: str):
    orders = [tuple(range(q.ndim))]
    if q.ndim > 1:
        orders.append(tuple(reversed(range(q.ndim))))
    if kind != "best":
        orders = orders[:1]
    best = None
    for order in orders:
        s, kinds = design_c(q, kind, order)
        b = quick_bits(s)
        if best is None or b < best[0]:
            best = (b, s, kinds, order)
    _, s, kinds, order = best
    assert np.array_equal(undo_c(q.shape, s, kinds, order), q)
    nc = sum(k == "cub" for k in kinds)
    return s, f"order {''.join(map(str, order))}, {nc}/{len(kinds)} cubic"


S_FB = 16  # lattice units per quantisation step in design e
AB_CHOICES = ((1.5, 4.0), (2.0, 2.0))  # besides (1, 1): QoZ-style tighter coarse levels


def lattice_unit(e: float) -> float:
    """The largest value at most 2e / (S + 1) with 7 significant bits: with step W = S x unit,
    a residual rounded to W misses by at most W / 2 and the lattice by unit / 2, so by at most
    e; x x unit is exact in f32 for |x| < 2^17."""
    m, ex = math.frexp(2 * e / (S_FB + 1))
    return math.ldexp(math.floor(m * 128) / 128, ex)


def pass_step(stride: int, alpha: float, beta: float) -> int:
    """Lattice units per quantisation step in a pass of STRIDE: S_FB at the finest level, S_FB
    divided by min(alpha^(level - 1), beta) above it (QoZ's tighter bounds for the coarse
    levels, which the finer levels predict from), rounded, at least 1."""
    level = stride.bit_length()
    return max(1, round(S_FB / min(alpha ** (level - 1), beta)))


def fb_passes(xh, u, exc, order, kinds=None, ks=None, ab=(1.0, 1.0)):
    """Closed-loop interpolation on the lattice, pass by pass. Encoding (ks None): each
    target's k = round((u - pred) / S), 0 on exception cells, and per pass the cheaper of
    linear and cubic (or KINDS when given); S is pass_step's for the pass's stride and AB.
    Decoding: xh = pred + S k from the stream KS. Writes xh in place; returns (stream, kinds)."""
    out, used, pos = [], [], 0
    half = S_FB // 2
    if ks is None:
        k0 = 0 if exc.ravel()[0] else (int(u.ravel()[0]) + half) // S_FB
        out.append(np.array([k0]))
    else:
        k0 = int(ks[0])
        pos = 1
    xh.ravel()[0] = k0 * S_FB
    for i, (sl, d) in enumerate(interp_passes(xh, order)):
        W = np.moveaxis(xh[sl], d, 0)
        if W.shape[0] < 2:
            used.append("lin")
            continue
        step = pass_step(sl[d].step, *ab)
        if ks is None:
            ut = np.moveaxis(u[sl], d, 0)[1::2]
            et = np.moveaxis(exc[sl], d, 0)[1::2]
            best = None
            for kind in ((kinds[i],) if kinds else ("lin", "cub")):
                p = predict(W, kind)
                k = np.where(et, 0, (ut - p + step // 2) // step)
                cost = np.abs(k).sum()
                if best is None or cost < best[0]:
                    best = (cost, kind, p, k)
            _, kind, p, k = best
            out.append(np.moveaxis(k, 0, d).ravel())
        else:
            kind = kinds[i]
            p = predict(W, kind)
            t = W[1::2]
            k = np.moveaxis(ks[pos:pos + t.size].reshape(np.moveaxis(t, 0, d).shape), d, 0)
            pos += t.size
        W[1::2] = p + step * k
        used.append(kind)
    return (np.concatenate(out) if out else ks), used


def design_e(a: np.ndarray, fill, e: float, orders=None, ab=(1.0, 1.0)):
    """Design e: SZ3's closed loop on an integer lattice, the better of ORDERS (default: the
    axes in order and reversed) by quick_bits. Returns the residual stream, the bytes of the
    runs section (exceptions plus any f32 misses), a note and the order."""
    f = a.ravel()
    exc = ~np.isfinite(f)
    if fill is not None:
        exc |= f == np.float32(fill)
    off = np.float32(f[~exc].min())
    unit = lattice_unit(e)
    u32 = np.float32(unit)
    u = np.zeros(f.size, np.int64)
    u[~exc] = np.rint((f[~exc].astype(np.float64) - float(off)) / unit).astype(np.int64)
    u, excs = u.reshape(a.shape), exc.reshape(a.shape)
    if orders is None:
        orders = [tuple(range(a.ndim))] + ([tuple(reversed(range(a.ndim)))] if a.ndim > 1 else [])
    best = None
    for order in orders:
        xh = np.zeros(a.shape, np.int64)
        ks, kinds = fb_passes(xh, u, excs, order, ab=ab)
        b = quick_bits(ks)
        if best is None or b < best[0]:
            best = (b, ks, kinds, order, xh)
    _, ks, kinds, order, xh = best
    back = np.zeros(a.shape, np.int64)
    fb_passes(back, None, None, order, kinds, ks, ab=ab)
    assert np.array_equal(back, xh), "closed-loop decode differs"
    assert np.abs(xh).max() < 1 << 17
    rec = off + (xh.ravel().astype(np.float32) * u32)  # exact product, one rounded addition
    miss = ~exc & ((np.abs(rec.astype(np.float64) - f.astype(np.float64)) > e) | (
        (rec != 0) & (np.abs(rec) < np.finfo(np.float32).tiny)))
    allexc = exc | miss
    assert np.all(np.abs(rec.astype(np.float64) - f)[~allexc] <= e)
    nc = sum(k == "cub" for k in kinds)
    note = (f"order {''.join(map(str, order))}, {nc}/{len(kinds)} cubic, "
            f"alpha {ab[0]:g} beta {ab[1]:g}, {int(miss.sum())} f32 misses")
    return ks, runs_cost(f, allexc), note, order


def design_a(q: np.ndarray):
    """Bytes of l3-today's bin image: patches of 128 x 128, per patch the best of left, up and
    gradient with l3's edge rules, 16-bit tokens per patch; patches of a patch row share one
    code per 65536 samples (as the encoder's shared codes do)."""
    img = q.reshape(1, -1) if q.ndim == 1 else q.reshape(-1, q.shape[-1])
    H, W = img.shape
    M = 1 << 16
    total = 0.0
    for y0 in range(0, H, 128):
        group_sym, npx = [], 0
        for x0 in range(0, W, 128):
            p = img[y0:y0 + 128, x0:x0 + 128]
            b = np.vstack([np.zeros((1, p.shape[1]), np.int64), p[:-1]])  # above, 0 in row 0
            left = np.hstack([b[:, :1], p[:, :-1]])  # first column: b
            a = np.hstack([b[:, :1], b[:, :-1]])  # above-left, = b at the left edge
            grad = left + b - a
            grad[:, 0] = b[:, 0]
            best = None
            for pred in (left, b, grad):
                e = (p - pred) % M
                z = np.where(e < M // 2, 2 * e, 2 * (M - e) - 1)
                bits = quick_bits_z(z)
                if best is None or bits < best[0]:
                    best = (bits, z)
            group_sym.append(best[1].ravel())
            npx += p.size
            if npx >= CHUNK or x0 + 128 >= W:
                zz = np.concatenate(group_sym)
                # patch header: predictor, ntok, 8 segment lengths (~ 30 + 8 x 12 bits)
                total += code_stream_z(zz)["huf2"] - 8 + len(group_sym) * 126 / 8
                group_sym, npx = [], 0
    return total


def quick_bits_z(z):
    t, raw = single_tokens(z.ravel())
    return h0(np.bincount(t, minlength=NTOK)) + float(raw.sum())


def code_stream_z(z):
    """code_stream for zigzag values already made (huf2 only)."""
    back = np.where(z % 2 == 0, z // 2, -(z + 1) // 2)
    return code_stream(back, stages=("huf2",))


# ---------------------------------------------------------------------------------------------
# peers


def peers(a, fill, e, q_runs_bytes, l3mod, ic):
    """Real sizes: SZ3 (on the array with specials replaced as in the bins, plus the same runs
    section) and l3's `.l3f` today (4-D merged to 3-D, 1-D as one row); bounds checked."""
    out = {}
    if ic is not None:
        f = a.copy().ravel()
        sp = ~np.isfinite(f) | ((f == np.float32(fill)) if fill is not None else False)
        if sp.any():
            src = np.where(sp, 0, np.arange(f.size))
            np.maximum.accumulate(src, out=src)
            f = f[src]
            f[:int(np.argmax(~sp))] = f[int(np.argmax(~sp))]
        f = f.reshape(a.shape)
        d = ic.sz3_encode(f, mode="abs", abs=e)
        back = np.asarray(ic.sz3_decode(d, shape=f.shape, dtype=f.dtype)).reshape(a.shape)
        err = np.abs(back.astype(np.float64) - a.astype(np.float64))
        worst = float(err[~sp.reshape(a.shape)].max())
        assert worst <= e, f"SZ3 missed the bound: {worst} > {e}"
        out["SZ3"] = len(d) + (q_runs_bytes if sp.any() else 0)
    if l3mod is not None:
        b = a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1, *a.shape[-2:]) if a.ndim == 4 else a
        d = l3mod.encode_field(b, max_error=e, fill_value=fill, version=1)
        back = np.asarray(l3mod.decode_field(d)).reshape(a.shape)
        sp = ~np.isfinite(a) | ((a == np.float32(fill)) if fill is not None else False)
        worst = float(np.abs(back.astype(np.float64) - a.astype(np.float64))[~sp].max())
        assert worst <= e, f"l3 missed the bound: {worst} > {e}"
        out["l3-today"] = len(d)
    return out


# ---------------------------------------------------------------------------------------------


DESIGNS = ("a", "b", "c-lin", "c-cub", "c-best", "e0", "e", "d")


def study(a, fill, rel, l3mod, ic):
    reg = np.isfinite(a) & ((a != np.float32(fill)) if fill is not None else True)
    lo, hi = float(a[reg].min()), float(a[reg].max())
    e = rel * (hi - lo)
    q, runs, exc = quantise(a, fill, e)
    hdr = 56 + 4  # header and CRC as in .l3f
    res = {"raw": a.nbytes, "shape": list(a.shape), "exceptions": int(exc.sum())}
    res["a"] = {"huf2": design_a(q) + runs + hdr}
    rb, axes = design_b(q)
    res["b"] = {k: v + runs + hdr for k, v in code_stream(rb).items()}
    res["b axes"] = axes
    for kind in ("lin", "cub", "best"):
        s, note = design_c_full(q, kind)
        stages = STAGES if kind == "best" else ("huf2", "ans")
        res["c-" + kind] = {k: v + runs + hdr + 1 for k, v in code_stream(s, stages).items()}
        res["c-" + kind + " note"] = note
    # e0: finest-level step at every level; e: per array the best of three (alpha, beta)
    ks, eruns, note, order = design_e(a, fill, e)
    res["e0"] = {k: v + eruns + hdr + 1 for k, v in code_stream(ks, ("huf2", "huf3")).items()}
    cands = [(res["e0"]["huf3"], ks, eruns, note)]
    for ab in AB_CHOICES:
        ks2, eruns2, note2, _ = design_e(a, fill, e, orders=[order], ab=ab)
        cands.append((code_stream(ks2, ("huf2", "huf3"))["huf3"] + eruns2 + hdr + 1, ks2, eruns2,
                      note2))
    _, ks, eruns, note = min(cands, key=lambda c: c[0])
    res["e"] = {k: v + eruns + hdr + 1 for k, v in code_stream(ks).items()}
    res["e note"] = note
    pick = min(("b", "c-best", "e"), key=lambda d: res[d]["huf3"])
    res["d"] = {k: res[pick][k] + 1 for k in STAGES}
    res["d pick"] = pick
    res.update(peers(a, fill, e, runs, l3mod, ic))
    return res


def gm(vals):
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", nargs="?", default="../shared/data/float32")
    p.add_argument("--bounds", type=float, nargs="+", default=[1e-2, 1e-3, 1e-4])
    p.add_argument("--out", type=Path)
    p.add_argument("--only", nargs="*")
    args = p.parse_args()
    check_tokens()
    try:
        import l3 as l3mod
    except ImportError:
        l3mod = None
        print("no l3 package: the l3-today column is left out", file=sys.stderr)
    try:
        import imagecodecs as ic
    except ImportError:
        ic = None
        print("no imagecodecs: the SZ3 column is left out", file=sys.stderr)
    sets = {"tuning": list(shared_arrays(Path(args.source))), "held-out": list(held_out_arrays())}
    rows = {}
    for setname, arrays in sets.items():
        for name, a, fill in arrays:
            if args.only and name not in args.only:
                continue
            for rel in args.bounds:
                r = study(a, fill, rel, l3mod, ic)
                r["set"] = setname
                rows[(name, rel)] = r
                print(f"{setname:8} {name:30} {rel:g} " + " ".join(
                    f"{d} {r['raw'] / r[d]['huf2']:.2f}" for d in DESIGNS) + " | d " + " ".join(
                    f"{st} {r['raw'] / r['d'][st]:.2f}" for st in STAGES) + " | " + " ".join(
                    f"{k} {r['raw'] / r[k]:.2f}" for k in ("SZ3", "l3-today") if k in r)
                    + f" | b {r['b axes']}; c {r['c-best note']}; e {r['e note']}; d {r['d pick']}",
                    file=sys.stderr, flush=True)
    md = []
    cols = ([("a", "huf2")] + [(d, "huf3") for d in ("b", "c-best", "e0", "e", "d")]
            + [("d", st) for st in STAGES if st != "huf3"] + [("c-lin", "huf2"), ("c-cub", "huf2")])
    head = ("| set | bound | " + " | ".join(f"{d} {s}" for d, s in cols)
            + " | SZ3 | l3 today |")
    md += ["Geometric-mean ratio (raw / bytes); a design's column names its entropy stage.", "",
           head, "|---|---:|" + "---:|" * (len(cols) + 2)]
    for setname in ("tuning", "held-out"):
        for rel in args.bounds:
            sel = [r for (n, b), r in rows.items() if b == rel and r["set"] == setname]
            if not sel:
                continue
            md.append(f"| {setname} | {rel:g} | " + " | ".join(
                f"{gm([r['raw'] / r[d][s] for r in sel]):.2f}" for d, s in cols) + " | "
                + " | ".join(f"{gm([r['raw'] / r[k] for r in sel]):.2f}" if all(k in r for r in sel)
                             else "-" for k in ("SZ3", "l3-today")) + " |")
    md += ["", "Per array:", "",
           "| set | array | bound | " + " | ".join(f"{d} {s}" for d, s in cols)
           + " | SZ3 | l3 today | b axes | c-best | e | d pick |",
           "|---|---|---:|" + "---:|" * (len(cols) + 2) + "---|---|---|---|"]
    for (name, rel), r in rows.items():
        md.append(f"| {r['set']} | {name} | {rel:g} | " + " | ".join(
            f"{r['raw'] / r[d][s]:.2f}" for d, s in cols) + " | " + " | ".join(
            f"{r['raw'] / r[k]:.2f}" if k in r else "-" for k in ("SZ3", "l3-today"))
            + f" | {r['b axes']} | {r['c-best note']} | {r['e note']} | {r['d pick']} |")
    text = "\n".join(md) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(
            {f"{n} {b:g}": r for (n, b), r in rows.items()}, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
