#!/usr/bin/env python3
"""What HTTP adds to a `/search`, separated from what the operating system adds to any
request/response over loopback.

For every query of the fixed set (BM25 by default, one keep-alive connection, sequential) the
overhead is the client's round trip minus the server's own `took_ms`. It is measured

* against `rankd serve`, and
* against a bare-socket baseline server started by this script (Python, no HTTP framework:
  it parses nothing but the blank line, busy-waits exactly the `took_ms` that rankd reported
  for the same query, and answers a body of the same size with a precomputed header),

each with two clients:

* `blocking`: `http.client`, which sleeps in `recv` while the server works, as most clients do;
* `spin`: a raw non-blocking socket polled in a loop, so the client's own wake-up from an idle
  CPU is not in the number.

rankd minus baseline, with the same client and the same per-query server time, is the cost of
rankd's HTTP stack (hyper, axum, tower layers, JSON). Blocking minus spin is the client's
wake-up latency, which grows with how long it slept (the search's duration) on a VM.

Usage: bench/http_overhead.py 127.0.0.1:PORT [--model bm25] [--k 10] [--passes 3] [--json]
"""
import argparse
import http.client
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse

BASELINE = r"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); buf = b''
    while True:
        d = c.recv(65536)
        if not d: break
        buf += d
        while b'\r\n\r\n' in buf:
            head, buf = buf.split(b'\r\n\r\n', 1)
            q = dict(p.split('=') for p in head.split(b' ')[1].decode().split('?')[1].split('&'))
            ms, size = float(q['ms']), int(q['size'])
            t = time.perf_counter()
            while time.perf_counter() - t < ms / 1e3: pass
            took = (time.perf_counter() - t) * 1e3
            body = ('{"took_ms":%.6f,"pad":"' % took).encode()
            body += b'x' * max(0, size - len(body) - 2) + b'"}'
            c.sendall(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n'
                      b'content-length: %d\r\n\r\n' % len(body) + body)
"""


def pct(s, p):
    s = sorted(s)
    return s[max(1, min(len(s), math.ceil(p * len(s)))) - 1]


def blocking_client(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(path):
        t = time.perf_counter()
        conn.request("GET", path)
        body = conn.getresponse().read()
        return (time.perf_counter() - t) * 1e3, body

    return get


def spin_client(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setblocking(False)

    def get(path):
        req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode()
        t = time.perf_counter()
        s.sendall(req)
        buf, need = b"", None
        while need is None or len(buf) < need:
            try:
                chunk = s.recv(1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                raise SystemExit("server closed the connection")
            buf += chunk
            if need is None and b"\r\n\r\n" in buf:
                head = buf.split(b"\r\n\r\n", 1)[0]
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        need = len(head) + 4 + int(line.split(b":")[1])
        return (time.perf_counter() - t) * 1e3, buf.split(b"\r\n\r\n", 1)[1]

    return get


def run(get, paths):
    """Per request: (round trip ms, took_ms, body bytes)."""
    out = []
    for path in paths:
        dt, body = get(path)
        out.append((dt, json.loads(body)["took_ms"], len(body)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("addr")
    ap.add_argument("--queries", default="bench/queries/rust-docs.txt")
    ap.add_argument("--model", default="bm25")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost"):
        raise SystemExit("loopback addresses only")
    port = int(port)
    queries = [l.strip() for l in open(a.queries) if l.strip()]
    paths = ["/search?" + urllib.parse.urlencode({"q": q, "k": a.k, "model": a.model})
             for q in queries]
    base = subprocess.Popen([sys.executable, "-c", BASELINE], stdout=subprocess.PIPE, text=True)
    try:
        base_port = int(base.stdout.readline())
        clients = {"blocking": blocking_client, "spin": spin_client}
        rows = {}
        for _ in range(a.passes):
            for name, make in clients.items():
                get = make(port)
                run(get, paths[:20])  # warm-up
                rankd = run(get, paths)
                bget = make(base_port)
                replay = ["/x?ms=%.6f&size=%d" % (took, size) for _, took, size in rankd]
                baseline = run(bget, replay)
                for server, res in (("rankd", rankd), ("baseline", baseline)):
                    over = [dt - took for dt, took, _ in res]
                    rows.setdefault((server, name), []).append(
                        (pct(over, 0.5), pct(over, 0.99), pct([t for _, t, _ in res], 0.5)))
    finally:
        base.kill()
    report = []
    for (server, client), passes in rows.items():
        report.append({
            "server": server, "client": client, "passes": len(passes),
            "took_p50_ms": statistics.median(p[2] for p in passes),
            "overhead_p50_ms": statistics.median(p[0] for p in passes),
            "overhead_p99_ms": statistics.median(p[1] for p in passes),
        })
    if a.json:
        print(json.dumps({"model": a.model, "k": a.k, "queries": len(paths),
                          "load_average": os.getloadavg()[0], "rows": report}, indent=1))
        return
    print("model %s, k %d, %d queries, %d passes, load average %.2f"
          % (a.model, a.k, len(paths), a.passes, os.getloadavg()[0]))
    print("| server | client | took_ms p50 | overhead p50 | overhead p99 |")
    print("|---|---|---|---|---|")
    for r in report:
        print("| %s | %s | %.3f ms | %.3f ms | %.3f ms |" % (
            r["server"], r["client"], r["took_p50_ms"], r["overhead_p50_ms"], r["overhead_p99_ms"]))
    by = {(r["server"], r["client"]): r["overhead_p50_ms"] for r in report}
    for client in clients:
        print("rankd's HTTP stack, %s client: %+.3f ms at p50 (rankd − baseline)"
              % (client, by[("rankd", client)] - by[("baseline", client)]))


if __name__ == "__main__":
    main()
