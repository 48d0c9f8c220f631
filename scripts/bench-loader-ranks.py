#!/usr/bin/env python3
"""Bytes read per epoch across R ranks run as R processes (`l3 bench-loader --world-size R
--rank r`, all started together), each caching a fraction c of the dataset: one table row per
(split, R, c) with the fraction of the dataset (its manifest's bytes; a windowed tensor
dataset's first epoch may read a record twice) the ranks together read in each epoch, the
ideal 1 - min(1, R c) for the epochs after the first, the largest batch imbalance (samples off
--batch-size, each epoch's last step aside) and the wall-clock per epoch (the slowest rank's,
mean of the epochs after the first).

    python scripts/bench-loader-ranks.py DATASET [--l3 target/release/l3] [--ranks 2 4]
        [--fractions 0.1 0.2 0.3] [--epochs 4] [--batch-size 16] [--splits default exact slices]
        [--manifest LOCAL_COPY/manifest.json]

Splits: "default" (the locality split, --max-imbalance left at batch_size / 8), "exact"
(--max-imbalance 0), "slices" (--no-locality). Extra arguments after -- go to every
bench-loader.
"""

import argparse
import json
import re
import subprocess
import sys

EPOCH = re.compile(
    r"^epoch (\d+): (\d+) (?:images|samples) in ([\d.]+) s .*\((\d+) B\) read in \d+ reads; "
    r"batches of (\S+) samples"
)
SPLITS = {"default": [], "exact": ["--max-imbalance", "0"], "slices": ["--no-locality"]}


def run(args, split, ranks, fraction, extra):
    procs = [
        subprocess.Popen(
            [args.l3, "bench-loader", args.dataset, "--epochs", str(args.epochs),
             "--batch-size", str(args.batch_size), "--world-size", str(ranks), "--rank",
             str(r), "--cache-fraction", str(fraction), "--threads", "1", "--seed",
             str(args.seed)] + SPLITS[split] + extra,
            stdout=subprocess.PIPE, text=True)
        for r in range(ranks)
    ]
    read = [0] * args.epochs
    wall = [0.0] * args.epochs
    off = 0
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"bench-loader failed ({p.returncode}):\n{out}")
        for line in out.splitlines():
            m = EPOCH.match(line)
            if not m:
                continue
            e = int(m.group(1))
            read[e] += int(m.group(4))
            wall[e] = max(wall[e], float(m.group(3)))
            if m.group(5) != "-":
                lo, hi = map(int, m.group(5).split("..="))
                off = max(off, args.batch_size - lo, hi - args.batch_size)
    return read, wall, off


def dataset_bytes(path, manifest=None):
    """The bytes of a local dataset's records (image levels, or tensor payloads), from its
    manifest (or `manifest`, a local copy's, for a remote dataset); None for a remote one
    without it (the first epoch's reads stand in)."""
    try:
        with open(manifest or f"{path}/manifest.json") as f:
            m = json.load(f)
    except OSError:
        return None
    if m.get("kind") == "tensors":
        return sum(s["payload_bytes"] for s in m["shards"])
    return sum(sum(s["level_bytes"]) for s in m["shards"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--l3", default="target/release/l3")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.2, 0.3])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--manifest", help="a local copy's manifest.json (remote datasets: the"
                    " dataset's bytes come from it, else from the first epoch's reads)")
    ap.add_argument("--splits", nargs="+", default=["default", "exact", "slices"],
                    choices=sorted(SPLITS))
    args, extra = ap.parse_known_args()
    extra = [x for x in extra if x != "--"]
    print("| split | R | c | ideal | read per epoch (fraction of the dataset) "
          "| max imbalance | s/epoch |")
    print("|---|---|---|---|---|---|---|")
    for split in args.splits:
        for ranks in args.ranks:
            for c in args.fractions:
                read, wall, off = run(args, split, ranks, c, extra)
                total = dataset_bytes(args.dataset, args.manifest) or read[0]
                fractions = " / ".join(f"{r / total:.3f}" for r in read)
                ideal = 1 - min(1.0, ranks * c)
                later = wall[1:] or wall
                print(f"| {split} | {ranks} | {c} | {ideal:.2f} | {fractions} | {off} "
                      f"| {sum(later) / len(later):.2f} |", flush=True)


if __name__ == "__main__":
    main()
