#!/usr/bin/env python3
"""Issue 32, deliverable 1's acceptance, measured on loopback with wrk:

1. Logging overhead: `bench/http_search.sh` (wrk, 2 threads, 4 connections, the 600 benchmark
   queries) against `rankd serve` with impression logging off and on
   (`RANKD_EVENTS_LOG_IMPRESSIONS`), alternating, `--runs` runs each; p50/p99 and req/s, and
   for the runs with logging on, the impressions stored against the 2xx answers wrk counted
   (lost = answers − stored; the dropped-impressions counter beside).
2. `POST /events` throughput: wrk posting JSON arrays of 100 click events (bench/wrk_events.lua)
   over query ids the server issued; events/s acknowledged, and every acknowledged event
   stored.
3. Across `kill -9`: the same load, the server killed mid-run and restarted; every event of an
   acknowledged batch must be in the database.

    python3 bench/events_load.py --rankd target/release/rankd --data-dir DEMO_DATA

DEMO_DATA: an index built by `rankd demo` (copied; the copy gets its own database).
"""

import argparse
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = 18391
ADDR = f"127.0.0.1:{PORT}"
BASE = f"http://{ADDR}"


def start(rankd, data, log_impressions=True):
    env = dict(os.environ, RANKD_EVENTS_LOG_IMPRESSIONS="true" if log_impressions else "false",
               RANKD_EVENTS_MAX_PER_SECOND="1000000")
    p = subprocess.Popen([rankd, "serve", "--data-dir", data, "--addr", ADDR], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"{BASE}/readyz", timeout=1).read()
            return p
        except Exception:
            time.sleep(0.1)
    p.kill()
    sys.exit("the server did not become ready")


def cpu_seconds(pid):
    """User + system CPU time of process `pid` (all its threads) so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)


def count(data, table):
    con = sqlite3.connect(os.path.join(data, "rankd.db"))
    try:
        return con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    finally:
        con.close()


def metric(name):
    text = urllib.request.urlopen(f"{BASE}/metrics", timeout=5).read().decode()
    return sum(float(l.split()[-1]) for l in text.splitlines() if l.startswith(name))


def search_load(duration):
    out = subprocess.run([os.path.join(HERE, "http_search.sh"), ADDR, duration, "4"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(next(l for l in out.splitlines() if l.startswith("json "))[5:])


def events_load(ids_file, duration, kill_after=None, server=None):
    env = dict(os.environ, WRK_QUERY_IDS=ids_file)
    wrk = subprocess.Popen(["wrk", "-t2", "-c4", f"-d{duration}", "--timeout", "10s",
                            "-s", os.path.join(HERE, "wrk_events.lua"), BASE],
                           env=env, stdout=subprocess.PIPE, text=True)
    if kill_after is not None:
        time.sleep(kill_after)
        server.send_signal(signal.SIGKILL)
        server.wait()
    out, _ = wrk.communicate(timeout=300)
    return json.loads(next(l for l in out.splitlines() if l.startswith("wrk_json "))[9:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", default=os.path.join(HERE, "..", "target", "release", "rankd"))
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", default="20s")
    ap.add_argument("--search-only", action="store_true",
                    help="measure the logging overhead only, not POST /events")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rankd-events-")
    data = os.path.join(work, "data")
    shutil.copytree(args.data_dir, data, ignore=shutil.ignore_patterns("rankd.db*"))

    print("== /search under wrk, impression logging off and on (alternating)")
    rows = {"off": [], "on": []}
    for run in range(args.runs):
        for mode in ("off", "on"):
            p = start(args.rankd, data, log_impressions=(mode == "on"))
            before = count(data, "search_impressions") if os.path.exists(
                os.path.join(data, "rankd.db")) else 0
            cpu = cpu_seconds(p.pid)
            r = search_load(args.duration)
            r["cpu_ms"] = (cpu_seconds(p.pid) - cpu) * 1000 / max(r["requests"], 1)
            answered = r["requests"] - r["non2xx"]
            dropped = metric("rankd_impressions_dropped_total")
            stop(p)  # SIGTERM writes what is queued
            stored = count(data, "search_impressions") - before
            rows[mode].append(r)
            extra = (f", impressions stored {stored} of {answered} answers, dropped {dropped:.0f}"
                     if mode == "on" else f", impressions stored {stored}")
            print(f"run {run + 1} logging {mode}: {r['rps']:.0f} req/s, p50 {r['p50_ms']:.2f} ms, "
                  f"p99 {r['p99_ms']:.2f} ms, server CPU {r['cpu_ms']:.3f} ms/search, non-2xx {r['non2xx']}{extra}", flush=True)
    med = {m: {k: statistics.median(x[k] for x in rows[m])
               for k in ("rps", "p50_ms", "p99_ms", "cpu_ms")}
           for m in rows}
    pairs = [on["p99_ms"] / off["p99_ms"] for on, off in zip(rows["on"], rows["off"])]
    print(f"median off: {med['off']['rps']:.0f} req/s, p50 {med['off']['p50_ms']:.2f}, "
          f"p99 {med['off']['p99_ms']:.2f} ms; on: {med['on']['rps']:.0f} req/s, "
          f"p50 {med['on']['p50_ms']:.2f}, p99 {med['on']['p99_ms']:.2f} ms; "
          f"p99 on/off {med['on']['p99_ms'] / med['off']['p99_ms']:.3f}; "
          f"median of the pairs' p99 on/off {statistics.median(pairs):.3f}; "
          f"server CPU per search on/off {med['on']['cpu_ms'] / med['off']['cpu_ms']:.3f}")
    if args.search_only:
        shutil.rmtree(work)
        return 0

    print("== POST /events, batches of 100 clicks")
    p = start(args.rankd, data)
    shown = []
    for q in ["vec", "hashmap", "iterator", "string", "option", "result", "thread", "mutex",
              "arc", "box"] * 10:
        url = f"{BASE}/search?q={urllib.parse.quote(q)}&k=10&fields="
        answer = json.loads(urllib.request.urlopen(url, timeout=10).read())
        shown += [f"{answer['query_id']}\t{h['id']}\t{h['rank']}" for h in answer["hits"]]
    time.sleep(1)
    ids_file = os.path.join(work, "ids.txt")
    with open(ids_file, "w") as f:
        f.write("\n".join(shown) + "\n")
    before = count(data, "search_events")
    r = events_load(ids_file, args.duration)
    stored = count(data, "search_events") - before
    secs = r["duration_s"]
    print(f"{r['ok'] * 100 / secs:.0f} events/s acknowledged ({r['ok']} batches of 100 in "
          f"{secs:.1f} s, p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, non-2xx "
          f"{r['non2xx']}); stored {stored} of {r['ok'] * 100} acknowledged", flush=True)

    print("== the same load, kill -9 after 5 s")
    before = count(data, "search_events")
    r = events_load(ids_file, "10s", kill_after=5, server=p)
    p = start(args.rankd, data)
    stored = count(data, "search_events") - before
    stop(p)
    acked = r["ok"] * 100
    verdict = "nothing lost" if stored >= acked else f"LOST {acked - stored}"
    print(f"acknowledged {acked} events before the kill, stored {stored} after the restart: "
          f"{verdict} (stored beyond acknowledged: {stored - acked}, the batches in flight)")
    shutil.rmtree(work)
    return 0 if stored >= acked else 1


if __name__ == "__main__":
    sys.exit(main())
