"""NumPy size estimates for candidate lossless float32 designs (a design study, not a codec).

    pip install numpy zstandard
    python scripts/lossless_float_proto.py [../shared/data/float32] [--out FILE]

Every design first maps each float32 to an order-preserving uint32 (sign set: all bits
inverted; sign clear: top bit set), which is a bijection, so NaN payloads and -0.0 survive.
Prediction is a difference along a chosen set of axes, in wrapping uint32 arithmetic: the last
axis alone is "previous value", all axes is n-D Lorenzo. Its inverse is a wrapping cumulative sum
along the same axes (each axis in parallel over the others), which the script runs to check the
round trip bit for bit. Per array the axis set with the smallest estimate is kept ("best").

Designs, all estimated on chunks of --chunk values (independent, as a GPU decoder needs):
  a-zstd   zigzag residuals split into 4 byte planes, each plane zstd -19 (real compressed size);
  a-H0     the same byte planes, order-0 entropy per chunk and plane, plus 1 byte per distinct
           symbol as a table cost (a bound for a per-chunk rANS/Huffman coder);
  b-bins   pcodec-like: per chunk, equal-count quantile bins over the signed residuals
           (1..256 bins, best count kept); cost = order-0 entropy of the bin ids + each value's
           offset bits (ceil log2 of its bin's width) + 9 bytes per bin;
  c-xor    the mapped value XOR the mapped prediction (Gorilla/fpzip style): order-0 entropy of
           the leading-zero count per chunk + the bits below the leading one, sent raw;
  c-len    the same with the zigzag arithmetic residual instead of the XOR (fpzip/Elias-gamma
           style: bit-length class entropy-coded, the bits below its leading one raw);
  c-tok    l3's image tokens (SPEC.md, version 2 single tokens) widened to 32-bit residuals:
           z < 16 a token of its own, else bit length and the next bit as the token, the
           rest raw; order-0 entropy of the tokens per chunk plus 1 byte per distinct token.
All but a-zstd and the side mask are entropy bounds, not coded sizes.

Input streams an encoder chooses between (each design takes its best; all are rebuilt and
checked bit for bit): "bits" (the ordered float bits, NaN and fill inline); "bits, specials
out" (NaN and the declared fill moved to a side mask: packbits + zstd -19, real size, plus 4
bytes per distinct pattern; their cells take the previous kept value before prediction); and
"xB" (pcodec's float-mult idea: a regular value v is k = rint(v / B) with |k| < 2^24 and a
small adjustment: v's ordered bits minus those of f32(k) * f32(B), one f32 multiply; B is tried
from powers of two and 1, 2, 2.5, 4, 5 x 10^e near the gaps between distinct values, kept when
98% of the values need an adjustment of at most 63 ULPs; k is predicted and coded, the
adjustments cost their order-0 entropy per chunk plus 1 byte per distinct one, the values that
do not fit go to the side mask with 4 bytes each).
"""

from __future__ import annotations

import argparse
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


def to_ordered(a: np.ndarray) -> np.ndarray:
    u = a.view("<u4")
    return np.where(u >> 31 == 1, ~u, u | np.uint32(0x80000000)).astype(np.uint32)


def from_ordered(m: np.ndarray) -> np.ndarray:
    return np.where(m >> 31 == 1, m & np.uint32(0x7FFFFFFF), ~m).astype(np.uint32)


def diff_axes(m: np.ndarray, axes) -> np.ndarray:
    r = m.copy()
    for ax in axes:
        prev = np.zeros_like(r)
        sl = [slice(None)] * r.ndim
        sl[ax] = slice(1, None)
        src = [slice(None)] * r.ndim
        src[ax] = slice(None, -1)
        prev[tuple(sl)] = r[tuple(src)]
        r = r - prev  # wraps mod 2^32
    return r


def undiff_axes(r: np.ndarray, axes) -> np.ndarray:
    m = r
    for ax in reversed(axes):
        m = np.cumsum(m, axis=ax, dtype=np.uint32)
    return m


def zigzag(r: np.ndarray) -> np.ndarray:
    s = r.view(np.int32)
    return ((s << 1) ^ (s >> 31)).view(np.uint32)


def h0_bits(sym: np.ndarray, nsym: int) -> tuple[float, int]:
    """Order-0 entropy in bits of sym and the number of distinct symbols."""
    c = np.bincount(sym, minlength=nsym)
    c = c[c > 0]
    p = c / sym.size
    return float(-(c * np.log2(p)).sum()), int(c.size)


def chunks(x: np.ndarray, n: int):
    for i in range(0, x.size, n):
        yield x[i:i + n]


def est_a_h0(z: np.ndarray, chunk: int) -> float:
    planes = z.view(np.uint8).reshape(-1, 4)
    total = 0.0
    for c in chunks(np.arange(z.size), chunk):
        for b in range(4):
            bits, k = h0_bits(planes[c[0]:c[-1] + 1, b], 256)
            total += bits / 8 + k
    return total


def est_a_zstd(z: np.ndarray, chunk: int) -> int:
    planes = z.view(np.uint8).reshape(-1, 4)
    total = 0
    for s in range(0, z.size, chunk):
        for b in range(4):
            total += len(Z19.compress(np.ascontiguousarray(planes[s:s + chunk, b]).tobytes()))
    return total


def bitlen(x: np.ndarray) -> np.ndarray:
    """Bit length (0 for 0) of uint32 values: frexp's exponent, exact since uint32 fits f64."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64)


def est_len(x: np.ndarray, chunk: int) -> float:
    """Class = bit length (entropy-coded per chunk), then the bits below the leading one raw."""
    bl = bitlen(x)
    total = 0.0
    for c in chunks(bl, chunk):
        bits, k = h0_bits(c, 33)
        total += bits / 8 + k + np.maximum(c - 1, 0).sum() / 8
    return total


def est_tok(z: np.ndarray, chunk: int) -> float:
    """l3's version 2 single tokens widened to 32 bits: z < 16 is token z; else n = floor(log2 z),
    token 16 + 2 (n - 4) + (bit n-1 of z), then n - 1 raw bits. Order-0 entropy per chunk."""
    n = bitlen(z) - 1
    big = z >= 16
    nn = np.where(big, n, 4)
    m = ((z.astype(np.int64) >> np.maximum(nn - 1, 0)) & 1)
    tok = np.where(big, 16 + 2 * (nn - 4) + m, z.astype(np.int64))
    raw = np.where(big, nn - 1, 0)
    total = 0.0
    for t, r in zip(chunks(tok, chunk), chunks(raw, chunk)):
        bits, k = h0_bits(t, 16 + 2 * 28)
        total += bits / 8 + k + r.sum() / 8
    return total


def est_bins(r: np.ndarray, chunk: int) -> float:
    s = r.view(np.int32).astype(np.int64)
    total = 0.0
    for c in chunks(s, chunk):
        v = np.sort(c)
        best = math.inf
        for k in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            q = v[(np.arange(k) * v.size) // k]
            # quantile lower bounds, each quantile value also as its own one-value bin (so a
            # spike such as all the zero residuals never shares a wide bin)
            edges = np.unique(np.concatenate([q, q + 1]))
            edges = edges[edges <= v[-1]]
            idx = np.searchsorted(edges, v, side="right") - 1
            hi = np.append(edges[1:] - 1, v[-1])
            width = hi - edges + 1
            off = np.ceil(np.log2(np.maximum(width, 1))).astype(np.int64)
            bits, _ = h0_bits(idx, edges.size)
            cost = bits / 8 + off[idx].sum() / 8 + 9 * edges.size
            best = min(best, cost)
        total += best
    return total


CHUNK = 1 << 16


def mult_bases(v: np.ndarray) -> list[float]:
    """Candidate quanta B: powers of two and 1, 2, 2.5, 4, 5 x 10^e around the 10th
    percentile of the gaps between distinct values."""
    uq = np.unique(v.astype(np.float64))
    if uq.size < 2:
        return [1.0]
    d = float(np.quantile(np.diff(uq), 0.1))
    if not d > 0:
        return []
    e = math.floor(math.log10(d))
    out = {2.0 ** round(math.log2(d)), 1.0}
    for ee in (e - 1, e, e + 1):
        for mm in (1, 2, 2.5, 4, 5):
            out.add(float(f"{mm}e{ee}"))
    return sorted(x for x in out if d / 1.01 <= x or x == 1.0)[::-1]


def side_cost(u: np.ndarray, out: np.ndarray) -> int:
    """Bytes to send the cells in mask OUT verbatim: zstd -19 of the packed mask, then per
    distinct bit pattern 4 bytes when there are few patterns (NaN, fill), else 4 bytes a cell."""
    if not out.any():
        return 0
    pats = np.unique(u[out]).size
    vals = 4 * pats + (0 if pats <= 4 else 4 * int(out.sum()))
    return len(Z19.compress(np.packbits(out).tobytes())) + vals


def fill_forward(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x (flat) with the cells in OUT replaced by the previous kept cell (the first kept cell
    before any kept one)."""
    if not out.any() or out.all():
        return np.where(out, 0, x).astype(x.dtype)
    idx = np.where(~out, np.arange(x.size), 0)
    np.maximum.accumulate(idx, out=idx)
    y = x[idx].copy()
    first = int(np.argmax(~out))
    y[:first] = x[first]
    return y


def inputs(a: np.ndarray, fill) -> list[tuple[str, np.ndarray, int]]:
    """The integer streams an encoder could choose between: (label, uint32 array of a's shape,
    side bytes for the cells moved out). Each is checked to rebuild a bit for bit."""
    u = a.view("<u4").ravel()
    sp = np.isnan(a).ravel()
    if fill is not None:
        sp |= a.ravel() == np.float32(fill)
    out = [("bits", to_ordered(a), 0)]
    if sp.any():
        m = fill_forward(to_ordered(a).ravel(), sp)
        out.append(("bits, specials out", m.reshape(a.shape), side_cost(u, sp)))
    f = a.ravel()
    reg = ~sp
    fits = []
    for base in mult_bases(f[reg]):
        b = np.float32(base)
        k = np.rint(f[reg].astype(np.float64) / float(b))
        ok = np.abs(k) < (1 << 24)
        k = np.where(ok, k, 0).astype(np.float32)
        back = (k * b).astype(np.float32)  # one f32 multiply: correctly rounded in WGSL too
        adj = to_ordered(f[reg]).astype(np.int64) - to_ordered(back).astype(np.int64)
        ok &= np.abs(adj) <= 63  # the adjustment, in ULPs, must be small
        if ok.mean() >= 0.98:
            fits.append((base, b, k, adj, ok))
    fits.sort(key=lambda t: -t[0])
    for base, b, k, adj, ok in fits[:2]:  # the two coarsest bases that fit
        exc = sp.copy()
        exc[np.flatnonzero(reg)[~ok]] = True
        kk = np.zeros(f.size, np.int64)
        kk[np.flatnonzero(reg)] = k.astype(np.int64)
        aa = np.zeros(f.size, np.int64)
        aa[np.flatnonzero(reg)] = np.where(ok, adj, 0)
        m = fill_forward((kk + (1 << 31)).astype(np.uint32), exc)
        # rebuild check: f32(k) * f32(B), moved by the adjustment in ordered-bit ULPs
        back = ((m.astype(np.int64) - (1 << 31)).astype(np.float32) * b).astype(np.float32)
        rec = from_ordered((to_ordered(back).astype(np.int64) + aa).astype(np.uint32))
        rec[exc] = u[exc]
        assert np.array_equal(rec, u), f"mult {base} does not rebuild"
        # the adjustment stream: order-0 entropy per chunk over the kept cells (0 when none)
        adj_bytes = 0.0
        if aa.any():
            for c in chunks(aa[~exc] + 63, CHUNK):
                bits, nsym = h0_bits(c, 127)
                adj_bytes += bits / 8 + nsym
        # NaN / fill as a mask with a pattern table; values that do not fit: a second mask and
        # their 4 bytes each
        misfit = exc & ~sp
        side = side_cost(u, sp) + (len(Z19.compress(np.packbits(misfit).tobytes()))
                                   + 4 * int(misfit.sum()) if misfit.any() else 0)
        out.append((f"x{base:g}, {int(misfit.sum())} misfits, adj {'yes' if aa.any() else 'no'}",
                    m.reshape(a.shape), side + int(adj_bytes)))
    return out


def study_one(m: np.ndarray, side: int, chunk: int) -> dict:
    nd = m.ndim
    axsets = [s for k in range(1, nd + 1) for s in itertools.combinations(range(nd), k)]
    best = None
    per = {}
    for axes in axsets:
        r = diff_axes(m, axes)
        assert np.array_equal(undiff_axes(r, axes), m), f"cumsum inverse failed {axes}"
        h = est_a_h0(zigzag(r.ravel()), chunk) + side
        per[",".join(map(str, axes))] = h
        if best is None or h < best[0]:
            best = (h, axes, r)
    h, axes, r = best
    z = zigzag(r.ravel())
    pred = m - r  # the prediction, wrapping
    return {"axes": list(axes), "a-H0 per axis set": per, "a-H0": h,
            "a-zstd": est_a_zstd(z, chunk) + side,
            "b-bins": est_bins(r.ravel(), chunk) + side,
            "c-xor": est_len((m ^ pred).ravel(), chunk) + side,
            "c-len": est_len(z, chunk) + side,
            "c-tok": est_tok(z, chunk) + side}


def study(a: np.ndarray, fill, chunk: int) -> dict:
    assert np.array_equal(from_ordered(to_ordered(a)), a.view("<u4")), "order map"
    res = {"raw": a.nbytes, "inputs": {}}
    for label, m, side in inputs(a, fill):
        res["inputs"][label] = study_one(m, side, chunk)
    for d in DESIGNS:
        label = min(res["inputs"], key=lambda k: res["inputs"][k][d])
        res[d] = res["inputs"][label][d]
        res[d + " input"] = label
    res["bits-only"] = {d: res["inputs"]["bits"][d] for d in DESIGNS}
    res["axes"] = res["inputs"][res["a-H0 input"]]["axes"]
    return res


DESIGNS = ("a-zstd", "a-H0", "b-bins", "c-xor", "c-len", "c-tok")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", nargs="?", default="../shared/data/float32")
    p.add_argument("--chunk", type=int, default=1 << 16)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    global CHUNK
    CHUNK = args.chunk
    rows = {}
    for f32 in sorted(Path(args.source).glob("*.f32")):
        meta = json.loads(f32.with_suffix(".json").read_text())
        a = np.fromfile(f32, dtype="<f4").reshape(meta["shape"])
        rows[f32.stem] = study(a, meta.get("fill_value"), args.chunk)
        r = rows[f32.stem]
        print(f32.stem, r["axes"], " ".join(f"{d} {r['raw'] / r[d]:.3f}" for d in DESIGNS),
              file=sys.stderr, flush=True)
    md = [f"Estimated ratio (raw / estimated bytes), chunks of {args.chunk} values. Each design "
          "takes the best of the input streams; input and axes are those a-H0 chose "
          "(axes: difference axes, 0 = slowest).", "",
          "| array | input | axes | " + " | ".join(DESIGNS) + " |",
          "|---|---|---|" + "---:|" * len(DESIGNS)]
    for name, r in rows.items():
        md.append(f"| {name} | {r['a-H0 input']} | {','.join(map(str, r['axes']))} | "
                  + " | ".join(f"{r['raw'] / r[d]:.3f}" for d in DESIGNS) + " |")

    def gm(sel, get):
        return math.exp(sum(math.log(r["raw"] / get(r)) for r in sel) / len(sel))

    for label, keep in (("all", lambda n: True),
                        ("smooth", lambda n: not n.startswith("eso_")),
                        ("noisy", lambda n: n.startswith("eso_"))):
        sel = [r for n, r in rows.items() if keep(n)]
        md.append(f"| **geomean {label}** | best input | | " + " | ".join(
            f"**{gm(sel, lambda r: r[d]):.3f}**" for d in DESIGNS) + " |")
        md.append(f"| geomean {label} | float bits only | | " + " | ".join(
            f"{gm(sel, lambda r: r['bits-only'][d]):.3f}" for d in DESIGNS) + " |")
    text = "\n".join(md) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
