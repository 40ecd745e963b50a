#!/usr/bin/env python3
"""Two rankd binaries under the same HTTP load, alternating: `bench/http_search.sh` (wrk, 2
threads, 4 connections, the 600 benchmark queries) against `rankd serve` of binary A, then B,
`--runs` times, on a copy of one data directory. Prints each run and the medians (req/s, p50,
p99) and the ratio B / A — the "within 5 % of before" checks of the hardening issues.

    python3 bench/http_ab.py --a /tmp/rankd-before --b target/release/rankd --data-dir DEMO
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ADDR = "127.0.0.1:18393"


def run(binary, data, duration):
    p = subprocess.Popen([binary, "serve", "--data-dir", data, "--addr", ADDR],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://{ADDR}/readyz", timeout=1).read()
                break
            except Exception:
                time.sleep(0.1)
        out = subprocess.run([os.path.join(HERE, "http_search.sh"), ADDR, duration, "4"],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(next(l for l in out.splitlines() if l.startswith("json "))[5:])
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", default="20s")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rankd-ab-")
    data = os.path.join(work, "data")
    shutil.copytree(args.data_dir, data, ignore=shutil.ignore_patterns("rankd.db*"))
    rows = {"a": [], "b": []}
    for i in range(args.runs):
        for side in ("a", "b"):
            r = run(getattr(args, side), data, args.duration)
            rows[side].append(r)
            print(f"run {i + 1} {side.upper()}: {r['rps']:.0f} req/s, p50 {r['p50_ms']:.2f} ms, "
                  f"p99 {r['p99_ms']:.2f} ms, non-2xx {r['non2xx']}", flush=True)
    med = {s: {k: statistics.median(x[k] for x in rows[s]) for k in ("rps", "p50_ms", "p99_ms")}
           for s in rows}
    for s in ("a", "b"):
        print(f"median {s.upper()}: {med[s]['rps']:.0f} req/s, p50 {med[s]['p50_ms']:.2f} ms, "
              f"p99 {med[s]['p99_ms']:.2f} ms")
    print(f"B / A: req/s {med['b']['rps'] / med['a']['rps']:.3f}, "
          f"p50 {med['b']['p50_ms'] / med['a']['p50_ms']:.3f}, "
          f"p99 {med['b']['p99_ms'] / med['a']['p99_ms']:.3f}")
    shutil.rmtree(work)


if __name__ == "__main__":
    sys.exit(main())
