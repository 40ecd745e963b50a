#!/usr/bin/env python3
"""Fixed cost of one HTTP round trip to `rankd serve`, without the search: `/livez` and a
`/search` whose query is only stop words (analysed to nothing, so no ranking, no snippets).
One keep-alive connection (http.client), sequential; p50/p99 in µs, median over passes.
The Python client's own cost is included, so these are upper bounds.

Usage: bench/http_floor.py 127.0.0.1:PORT [--n 2000] [--passes 3]
"""
import argparse
import http.client
import math
import statistics
import time


def pct(s, p):
    s = sorted(s)
    return s[max(1, min(len(s), math.ceil(p * len(s)))) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("addr")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("loopback addresses only")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    for path in ("/livez", "/search?q=the+of+and&k=10&model=bm25"):
        p50, p99 = [], []
        for _ in range(a.passes + 1):  # first pass is warm-up
            t = []
            for _ in range(a.n):
                t0 = time.perf_counter()
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise SystemExit(f"{path}: HTTP {r.status}")
                t.append((time.perf_counter() - t0) * 1e6)
            p50.append(pct(t, 0.5))
            p99.append(pct(t, 0.99))
        print(f"{path}: p50 {statistics.median(p50[1:]):.0f} µs, p99 {statistics.median(p99[1:]):.0f} µs")


if __name__ == "__main__":
    main()
