#!/usr/bin/env python3
"""What DataLoader workers cost when each opens a remote dataset: one epoch of
`L3IterableDataset(URL, batch)` in a torch `DataLoader` with 0, 2 and 4 workers, through the
counting proxy (`bench/s3_proxy.py`) in front of an S3 endpoint; GETs and bytes per run.

    python bench/remote_workers.py s3://BUCKET/PREFIX --upstream http://127.0.0.1:18333 \
        [--workers 0,2,4] [--batch-size 64] [--size 64]

Credentials from the AWS_* variables, as l3 reads them. Each run is a fresh dataset object
(its own index cache folder, unless L3_INDEX_CACHE names a shared one).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--workers", default="0,2,4")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--size", type=int, default=64)
    args = ap.parse_args()
    import torch

    from l3.torch import L3IterableDataset

    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "port"
        proxy = subprocess.Popen([sys.executable, str(Path(__file__).with_name("s3_proxy.py")),
                                  "--upstream", args.upstream, "--port", "0",
                                  "--ready-file", str(ready)], stderr=subprocess.DEVNULL)
        try:
            while not (ready.exists() and ready.read_text().strip()):
                time.sleep(0.1)
            endpoint = f"http://127.0.0.1:{int(ready.read_text())}"
            os.environ["AWS_ENDPOINT_URL"] = endpoint

            def stats(reset: bool = False) -> dict:
                req = urllib.request.Request(endpoint + ("/__stats/reset" if reset else "/__stats"),
                                             method="POST" if reset else "GET")
                with urllib.request.urlopen(req, timeout=30) as r:
                    return json.loads(r.read())["get"]

            print("| workers | batches | GETs | MB fetched | seconds |")
            print("|---:|---:|---:|---:|---:|")
            for w in (int(x) for x in args.workers.split(",")):
                stats(reset=True)
                t = time.perf_counter()
                ds = L3IterableDataset(args.url, args.batch_size, size=(args.size, args.size))
                loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=w)
                n = sum(1 for _ in loader)
                s = stats()
                print(f"| {w} | {n} | {s['requests']} | {s['bytes'] / 1e6:.1f} | "
                      f"{time.perf_counter() - t:.1f} |", flush=True)
        finally:
            proxy.terminate()
            proxy.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
