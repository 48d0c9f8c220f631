#!/usr/bin/env python3
"""Time to the first batch from Python, each run in a fresh process (cold process; the page
cache stays warm after the first run): `l3.Loader` directly, and `L3IterableDataset` through
`L3DataLoader` with 0 and 2 workers. Batch 64, 2 loader threads, default augmentation (224 x
224 crops), planned shuffle; with and without a cache budget, world size 1 and 8 (rank 0).

    cargo run --release --example make_records -- /tmp/ds-1m      # 1M records of 32x32
    python3 scripts/bench-first-batch.py /tmp/ds-1m [--repeats 5] [--cache-mb 512]

Prints, per case, the median [min-max] over the runs of: the import of `l3` (and torch), and
the time from creating the loader (which opens the dataset) to the first batch in hand.
"""

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
case = json.loads(sys.argv[1])
t0 = time.perf_counter()
import l3
if case["kind"] != "loader":
    import l3.torch
t1 = time.perf_counter()
opts = dict(world_size=case["world"], rank=0, cache_mb=case["cache_mb"])
if case["kind"] == "loader":
    loader = l3.Loader(case["path"], 64, threads=2, **opts)
    batch = next(iter(loader))
    n = batch["images"].shape[0]
else:
    ds = l3.torch.L3IterableDataset(case["path"], 64, threads=max(1, 2 // max(1, case["workers"])), **opts)
    dl = l3.torch.L3DataLoader(ds, num_workers=case["workers"])
    batch = next(iter(dl))
    n = batch["images"].shape[0]
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "n": n}))
"""


def run(case):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(case)],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dataset")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cache-mb", type=int, default=512)
    p.add_argument("--no-torch", action="store_true", help="only l3.Loader")
    p.add_argument("--raw", action="store_true", help="print every run's figures as JSON")
    a = p.parse_args()
    kinds = [("loader", 0)] + ([] if a.no_torch else [("torch", 0), ("torch", 2)])
    cases = [
        dict(path=a.dataset, kind=k, workers=w, world=world, cache_mb=cache)
        for k, w in kinds
        for world in (1, 8)
        for cache in (0, a.cache_mb)
    ]
    run(cases[0])  # warms the page cache
    results = {i: [] for i in range(len(cases))}
    for _ in range(a.repeats):
        for i, case in enumerate(cases):
            results[i].append(run(case))
    ms = lambda xs: (f"{1e3 * statistics.median(xs):.0f} ms "
                     f"[{1e3 * min(xs):.0f}-{1e3 * max(xs):.0f}]")
    if a.raw:
        print(json.dumps([dict(case, runs=results[i]) for i, case in enumerate(cases)]))
        return
    for i, case in enumerate(cases):
        name = ("l3.Loader" if case["kind"] == "loader"
                else f"L3DataLoader, {case['workers']} workers")
        r = results[i]
        print(f"{name:26s} world {case['world']}, cache {case['cache_mb']:4d} MiB: "
              f"first batch {ms([x['first'] for x in r])}, "
              f"import {ms([x['import'] for x in r])}")


if __name__ == "__main__":
    main()
