#!/usr/bin/env python3
"""A counting, optionally throttling HTTP reverse proxy in front of an S3 endpoint (standard
library only), for measuring what a data loader fetches from object storage.

    python bench/s3_proxy.py --upstream http://127.0.0.1:8333 [--port 0] [--rate-mbps 80]
                             [--stats-file stats.json] [--ready-file port.txt]

Point the client at the proxy (`AWS_ENDPOINT_URL=http://127.0.0.1:PORT` for l3/object_store,
`S3_ENDPOINT_URL=...` for MosaicML Streaming, `endpoint_url=...` for boto3). Every request is
forwarded to --upstream unchanged: method, path, query string, headers and body, and the
`Host` header as the client sent it (the client signed it: SigV4 stays valid, since the
upstream sees exactly the signed request). Only hop-by-hop headers (Connection, Keep-Alive,
Proxy-*, TE, Trailer, Upgrade) and `Expect: 100-continue` (answered by the proxy itself) are
not passed on; neither is signed by SigV4 clients. A chunked request body is passed through
as it came (chunk framing included: `aws-chunked` signatures stay intact); a chunked
response is passed on chunked. Connections are kept alive on both sides (HTTP/1.1, one
upstream connection per client connection).

Counters (since start or the last reset): requests and response-body bytes per method, and
for GET the size of each response body (count, sum, min, median, max) and how many GETs
carried a `Range` header (and the sorted list of sizes). Response bodies are the bytes a loader fetches; request bodies
(uploads) are counted separately as `request_body_bytes`.

Control, on the proxy's own port (paths no S3 bucket can have, so they never reach S3):

    GET  /__stats              the counters as JSON
    POST /__stats/reset        the counters as JSON, then zeroed
    POST /__rate?mbps=N        throttle response bodies to N MB/s (10^6 bytes/s); 0: off

--stats-file: the counters are also written there as JSON on SIGUSR1 and at exit (SIGTERM,
SIGINT). --ready-file: the bound port is written there once the proxy listens (with --port 0
the OS picks a free port).

Throttle: one token bucket shared by all connections (a link of that rate), refilled at the
rate, holding at most 64 KiB (so bursts stay short); each response-body chunk (up to 64 KiB)
waits for its tokens before it is written to the client.
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from typing import Any, Dict, List

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
              "trailer", "trailers", "transfer-encoding", "upgrade", "expect",
              "proxy-connection"}
CHUNK = 64 * 1024


class TokenBucket:
    """Bytes per second, shared by all connections; rate 0: no limit."""

    def __init__(self, rate: float = 0.0, burst: int = CHUNK):
        self.lock = threading.Lock()
        self.rate, self.burst = rate, burst
        self.tokens, self.t = float(burst), time.monotonic()

    def set_rate(self, rate: float) -> None:
        with self.lock:
            self.rate, self.tokens, self.t = rate, float(self.burst), time.monotonic()

    def take(self, n: int) -> None:
        """Waits until n bytes may pass (n may exceed the burst: then it waits for the debt)."""
        with self.lock:
            if self.rate <= 0:
                return
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
            self.t = now
            self.tokens -= n
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.methods: Dict[str, Dict[str, int]] = {}
        self.get_sizes: List[int] = []
        self.ranged_gets = 0
        self.request_body_bytes = 0
        self.statuses: Dict[str, int] = {}
        self.since = time.time()

    def add(self, method: str, status: int, body: int, request_body: int, ranged: bool) -> None:
        with self.lock:
            self.requests += 1
            m = self.methods.setdefault(method, {"requests": 0, "response_bytes": 0})
            m["requests"] += 1
            m["response_bytes"] += body
            self.request_body_bytes += request_body
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
            if method == "GET":
                self.get_sizes.append(body)
                self.ranged_gets += ranged

    def snapshot(self, reset: bool = False) -> Dict[str, Any]:
        with self.lock:
            sizes = sorted(self.get_sizes)
            out = {
                "since": self.since,
                "seconds": time.time() - self.since,
                "requests": self.requests,
                "response_bytes": sum(m["response_bytes"] for m in self.methods.values()),
                "request_body_bytes": self.request_body_bytes,
                "methods": {k: dict(v) for k, v in self.methods.items()},
                "statuses": dict(self.statuses),
                "get": {
                    "requests": len(sizes),
                    "bytes": sum(sizes),
                    "ranged": self.ranged_gets,
                    "min": sizes[0] if sizes else 0,
                    "median": sizes[len(sizes) // 2] if sizes else 0,
                    "max": sizes[-1] if sizes else 0,
                    "mean": sum(sizes) / len(sizes) if sizes else 0.0,
                    "sizes": sizes,
                },
            }
            if reset:
                self.reset()
            return out


class Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, upstream: str, rate_mbps: float):
        super().__init__(addr, Handler)
        u = urllib.parse.urlsplit(upstream)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise SystemExit(f"--upstream {upstream!r}: give http(s)://HOST:PORT")
        self.up_https = u.scheme == "https"
        self.up_host = u.hostname
        self.up_port = u.port or (443 if self.up_https else 80)
        self.stats = Stats()
        self.bucket = TokenBucket(rate_mbps * 1e6)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Proxy

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet
        pass

    def _upstream(self) -> http.client.HTTPConnection:
        conn = getattr(self, "_conn", None)
        if conn is None:
            s = self.server
            cls = http.client.HTTPSConnection if s.up_https else http.client.HTTPConnection
            conn = cls(s.up_host, s.up_port, timeout=300)
            self._conn = conn
        return conn

    def _read_request_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            # Passed through with its framing (and any trailers) exactly as received.
            parts = []
            while True:
                line = self.rfile.readline()
                parts.append(line)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while True:
                        t = self.rfile.readline()
                        parts.append(t)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    return b"".join(parts)
                parts.append(self.rfile.read(size + 2))
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _control(self) -> bool:
        path = urllib.parse.urlsplit(self.path)
        if not path.path.startswith("/__"):
            return False
        s = self.server
        if path.path == "/__stats":
            body = s.stats.snapshot()
        elif path.path == "/__stats/reset" and self.command == "POST":
            body = s.stats.snapshot(reset=True)
        elif path.path == "/__rate" and self.command == "POST":
            q = urllib.parse.parse_qs(path.query)
            mbps = float(q.get("mbps", ["0"])[0])
            s.bucket.set_rate(mbps * 1e6)
            body = {"rate_mbps": mbps}
        else:
            self.send_error(404)
            return True
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return True

    def _forward(self) -> None:
        if self._control():
            return
        body = self._read_request_body()
        headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP]
        chunked_req = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        if chunked_req:
            headers.append(("Transfer-Encoding", "chunked"))
        for attempt in (0, 1):
            conn = self._upstream()
            try:
                # skip_host / skip_accept_encoding: the client's headers go as they are.
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)
                for k, v in headers:
                    conn.putheader(k, v)
                conn.endheaders()
                if body:
                    conn.send(body)
                resp = conn.getresponse()
                break
            except (ConnectionError, http.client.HTTPException, OSError):
                # A kept-alive upstream connection the server closed: one new one.
                conn.close()
                self._conn = None
                if attempt:
                    raise
        s = self.server
        no_body = self.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
        out_chunked = False
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() in HOP_BY_HOP:
                continue
            self.send_header(k, v)
        if not no_body and resp.getheader("Content-Length") is None:
            out_chunked = True
            self.send_header("Transfer-Encoding", "chunked")
        if resp.will_close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        sent = 0
        if not no_body:
            while True:
                data = resp.read(CHUNK)
                if not data:
                    break
                s.bucket.take(len(data))
                if out_chunked:
                    self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
                else:
                    self.wfile.write(data)
                sent += len(data)
            if out_chunked:
                self.wfile.write(b"0\r\n\r\n")
        else:
            resp.read()
        if resp.will_close:
            conn.close()
            self._conn = None
        s.stats.add(self.command, resp.status, sent, len(body),
                    "Range" in self.headers or "range" in self.headers)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_OPTIONS = do_PATCH = _forward

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            conn = getattr(self, "_conn", None)
            if conn is not None:
                conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", required=True, help="the S3 endpoint, http(s)://HOST:PORT")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (see --ready-file)")
    ap.add_argument("--rate-mbps", type=float, default=0.0,
                    help="throttle response bodies to this many MB/s (10^6 B/s); 0: off")
    ap.add_argument("--stats-file", help="write the counters here on SIGUSR1 and at exit")
    ap.add_argument("--ready-file", help="write the bound port here once listening")
    args = ap.parse_args()
    server = Proxy((args.host, args.port), args.upstream, args.rate_mbps)
    port = server.server_address[1]

    def dump(*_: Any) -> None:
        if args.stats_file:
            tmp = args.stats_file + ".tmp"
            with open(tmp, "w") as f:
                json.dump(server.stats.snapshot(), f, indent=1)
            os.replace(tmp, args.stats_file)

    def stop(*_: Any) -> None:
        dump()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGUSR1, dump)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, args.ready_file)
    print(f"s3_proxy: http://{args.host}:{port} -> {args.upstream}"
          + (f", {args.rate_mbps} MB/s" if args.rate_mbps else ""), file=sys.stderr, flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
