"""Error-bounded float arrays: version 1 against version 3 (the default) on the same arrays,
one thread: encode and decode MB/s (best of 3) and the ratio at a relative bound of 1e-3,
with geometric means over the arrays of 2 or 3 axes.

    RAYON_NUM_THREADS=1 python scripts/bounded_versions.py [../shared/data/float32]
"""
import sys
import json, time, glob, os, statistics
import numpy as np, l3
os.environ.setdefault("RAYON_NUM_THREADS", "1")
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/float32", "*.f32"))):
    meta = json.load(open(f[:-4] + ".json"))
    a = np.fromfile(f, dtype="<f4").reshape(meta["shape"])
    if a.ndim not in (2, 3):
        continue
    fill = meta.get("fill_value")
    for rel in (1e-3,):
        out = {}
        for v in (1, 3):
            ts = []
            for _ in range(3):
                t = time.perf_counter(); d = l3.encode_field(a, relative=rel, fill_value=fill, version=v); ts.append(time.perf_counter() - t)
            td = []
            for _ in range(3):
                t = time.perf_counter(); l3.decode_field(d); td.append(time.perf_counter() - t)
            out[v] = (a.nbytes / min(ts) / 1e6, a.nbytes / min(td) / 1e6, a.nbytes / len(d))
        rows.append((os.path.basename(f)[:-4], out))
        print(f"{os.path.basename(f)[:-4]:32s} v1 enc {out[1][0]:7.0f} dec {out[1][1]:7.0f} MB/s ratio {out[1][2]:6.1f} | v3 enc {out[3][0]:7.0f} dec {out[3][1]:7.0f} MB/s ratio {out[3][2]:6.1f}", flush=True)
for k, name in ((0, "enc"), (1, "dec"), (2, "ratio")):
    g = lambda v: statistics.geometric_mean([r[1][v][k] for r in rows])
    print(f"geomean {name}: v1 {g(1):.1f} v3 {g(3):.1f} (v3/v1 {g(3)/g(1):.2f})")
