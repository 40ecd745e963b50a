#!/usr/bin/env python3
"""Soak test: a `rankd serve` under searches, document batches, graph jobs and model swaps at
once, for a fixed time; reports errors, latency, the server's RSS and open file descriptors
over time, and whether every acknowledged document is there at the end.

Standard library only. The server runs on loopback over a generated corpus in a temporary
directory, with an admin token, judgments and two trained models to swap between.

    python3 bench/soak.py --rankd target/release/rankd --minutes 30 --out bench/out/soak.json

With `--wrk`, the searches come from wrk (Debian's `wrk`, bench/wrk_search.lua, `--connections`
keep-alive connections on 2 threads) at saturation instead of Python threads; wrk's non-2xx
responses and socket errors count as failed searches. With `--replace`, each batch rewrites
existing documents (ids of the starting corpus in turn) instead of adding new ones, so the
index keeps its size and RSS growth after warm-up measures the server, not the data.

Exit status 1 if any request failed or an acknowledged document is missing.
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

TOKEN = "soak-admin-token-0123456789"
TOPICS = ["vector", "iterator", "thread", "socket", "parser", "matrix", "string", "buffer"]


def corpus(n, prefix="d"):
    """n linked documents about TOPICS, as JSON lines."""
    rng = random.Random(len(prefix) * 7919 + n)
    lines = []
    for i in range(n):
        t, o = TOPICS[i % len(TOPICS)], rng.choice(TOPICS)
        lines.append(json.dumps({
            "id": f"{prefix}{i}", "url": f"https://soak.example/{prefix}{i}",
            "title": f"{t} guide {i}",
            "body": f"{t} and {o}: " + " ".join(rng.choice(TOPICS) for _ in range(40)),
            "links": [f"https://soak.example/{prefix}{rng.randrange(n)}" for _ in range(3)],
        }))
    return "\n".join(lines) + "\n"


class Client:
    """One keep-alive connection; reconnects after an error."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.conn = None

    def request(self, method, path, body=None, content_type="application/json", admin=False):
        headers = {"Content-Type": content_type}
        if admin:
            headers["Authorization"] = f"Bearer {TOKEN}"
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                return resp.status, data
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


def proc_stats(pid):
    """(RSS, its anonymous part, its file-backed part (the index's mapped segment files),
    all in MB, and the open file descriptors) of a process, from /proc."""
    with open(f"/proc/{pid}/status") as f:
        status = f.read()
    mb = lambda key: int(re.search(key + r":\s+(\d+)", status).group(1)) / 1024
    return mb("VmRSS"), mb("RssAnon"), mb("RssFile"), len(os.listdir(f"/proc/{pid}/fd"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rankd", required=True, help="the rankd binary")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--searchers", type=int, default=4)
    ap.add_argument("--docs", type=int, default=5000, help="documents at the start")
    ap.add_argument("--batch-every", type=float, default=10, help="seconds between batches")
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--swap-every", type=float, default=30, help="seconds between swaps")
    ap.add_argument("--graph-every", type=float, default=60, help="seconds between graph jobs")
    ap.add_argument("--sample-every", type=float, default=10, help="seconds between RSS samples")
    ap.add_argument("--warmup", type=float, default=60, help="seconds before the RSS baseline")
    ap.add_argument("--wrk", action="store_true", help="searches from wrk at saturation")
    ap.add_argument("--connections", type=int, default=16, help="wrk's connections")
    ap.add_argument("--replace", action="store_true",
                    help="batches rewrite existing documents (the index keeps its size)")
    ap.add_argument("--out", help="write the summary as JSON here")
    args = ap.parse_args()
    if args.wrk and shutil.which("wrk") is None:
        sys.exit("--wrk: no wrk on PATH (Debian: apt-get install wrk)")

    work = tempfile.mkdtemp(prefix="rankd-soak-")
    data = os.path.join(work, "data")
    docs = os.path.join(work, "docs.jsonl")
    with open(docs, "w") as f:
        f.write(corpus(args.docs))
    run = lambda *a: subprocess.run([args.rankd, *a], check=True, capture_output=True)
    run("ingest", "--format", "jsonl", "--input", docs, "--data-dir", data, "--json")
    run("graph", "--data-dir", data, "--json")
    env = dict(os.environ, RANKD_ADMIN_TOKEN=TOKEN, RANKD_LOG="warn")
    log = open(os.path.join(work, "serve.log"), "w+")
    server = subprocess.Popen(
        [args.rankd, "serve", "--addr", "127.0.0.1:0", "--data-dir", data],
        env=env, stderr=log)
    port = None
    for _ in range(300):
        log.seek(0)
        m = re.search(r"http://127\.0\.0\.1:(\d+)", log.read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.1)
    if port is None:
        sys.exit("rankd serve did not start: " + open(log.name).read())
    admin = Client("127.0.0.1", port)

    def post(path, body, content_type="application/json"):
        status, out = admin.request("POST", path, body.encode(), content_type, admin=True)
        if status not in (200, 202):
            raise RuntimeError(f"POST {path}: {status} {out[:300]!r}")
        return json.loads(out)

    def wait_job(job):
        while True:
            status, out = admin.request("GET", f"/admin/jobs/{job}", admin=True)
            j = json.loads(out)
            if j["status"] not in ("queued", "running"):
                return j
            time.sleep(0.2)

    judgments = [{"query_id": f"q{q}", "query": f"{t} guide", "doc_id": f"d{i}",
                  "grade": int(i % len(TOPICS) == q)}
                 for q, t in enumerate(TOPICS) for i in range(0, 400)]
    post("/admin/judgments", json.dumps(judgments))
    models = []
    for seed in (1, 2):
        job = post("/admin/train", json.dumps({"model": "linear", "epochs": 5, "seed": seed}))["job"]
        j = wait_job(job)
        if j["status"] != "succeeded":
            sys.exit(f"training failed: {j}")
        models.append(j["result"]["model"])
    post(f"/admin/models/{models[0]}/activate", "")

    stop = threading.Event()
    lock = threading.Lock()
    counts = {"search": 0, "search_errors": 0, "batches": 0, "batch_errors": 0, "swaps": 0,
              "swap_errors": 0, "graph_jobs": 0, "graph_busy": 0, "graph_errors": 0}
    latencies = []
    errors = []
    acknowledged = []
    samples = []
    start = time.time()

    def count(key, error=None):
        with lock:
            counts[key] += 1
            if error and len(errors) < 20:
                errors.append(error)

    def searcher(seed):
        rng = random.Random(seed)
        c = Client("127.0.0.1", port)
        while not stop.is_set():
            q = urllib.parse.quote(f"{rng.choice(TOPICS)} {rng.choice(TOPICS)}")
            t = time.perf_counter()
            try:
                status, _ = c.request("GET", f"/search?q={q}&k=10")
            except OSError as e:
                status = str(e)
            elapsed = time.perf_counter() - t
            with lock:
                latencies.append(elapsed)
            count("search")
            if status != 200:
                count("search_errors", f"search: {status}")

    def every(seconds, action):
        n = 0
        while not stop.wait(seconds):
            action(n)
            n += 1

    def batch(n):
        if args.replace:
            first = n * args.batch_size
            ids = [f"d{(first + i) % args.docs}" for i in range(args.batch_size)]
        else:
            ids = [f"b{n}-{i}" for i in range(args.batch_size)]
        body = "\n".join(json.dumps({"id": i, "title": f"batch {n}", "body": f"soak batch {n} "
                                     + random.choice(TOPICS)}) for i in ids)
        c = Client("127.0.0.1", port)
        try:
            status, out = c.request("POST", "/admin/documents", body.encode(),
                                    "application/x-ndjson", admin=True)
        except OSError as e:
            status, out = str(e), b""
        count("batches")
        if status == 200:
            with lock:
                acknowledged.extend(ids)
        else:
            count("batch_errors", f"batch: {status} {out[:200]!r}")

    def swap(n):
        c = Client("127.0.0.1", port)
        status, out = c.request("POST", f"/admin/models/{models[(n + 1) % 2]}/activate", b"",
                                admin=True)
        count("swaps")
        if status != 200:
            count("swap_errors", f"swap: {status} {out[:200]!r}")

    def graph(_):
        c = Client("127.0.0.1", port)
        status, out = c.request("POST", "/admin/graph", b"", admin=True)
        count("graph_jobs")
        if status == 409:
            count("graph_busy")
        elif status != 202:
            count("graph_errors", f"graph: {status} {out[:200]!r}")

    def sample(_):
        rss, anon, mapped, fds = proc_stats(server.pid)
        with lock:
            samples.append({"t": round(time.time() - start, 1), "rss_mb": round(rss, 1),
                            "anon_mb": round(anon, 1), "file_mb": round(mapped, 1),
                            "fds": fds, "searches": counts["search"]})

    wrk_report = {}

    def wrk():
        queries = os.path.join(work, "queries.txt")
        with open(queries, "w") as f:
            f.write("\n".join(f"{a} {b}" for a in TOPICS for b in TOPICS) + "\n")
        lua = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk_search.lua")
        out = subprocess.run(
            ["wrk", "-t2", f"-c{args.connections}", f"-d{int(args.minutes * 60)}s",
             "--timeout", "10s", "--latency", "-s", lua, f"http://127.0.0.1:{port}", "--",
             "k=10"],
            env=dict(os.environ, WRK_QUERIES=queries), capture_output=True, text=True)
        m = re.search(r"^wrk_json (.*)$", out.stdout, re.M)
        if out.returncode != 0 or not m:
            count("search_errors", f"wrk: exit {out.returncode}: {out.stderr[-300:]}")
            return
        report = json.loads(m.group(1))
        wrk_report.update(report)
        with lock:
            counts["search"] += report["requests"]
            failed = report["non2xx"] + sum(report["socket_errors"].values())
            counts["search_errors"] += failed
            if failed and len(errors) < 20:
                errors.append(f"wrk: {report['non2xx_by_status']} {report['socket_errors']}")

    if args.wrk:
        threads = [threading.Thread(target=wrk)]
    else:
        threads = [threading.Thread(target=searcher, args=(s,)) for s in range(args.searchers)]
    threads += [threading.Thread(target=every, args=(args.batch_every, batch)),
                threading.Thread(target=every, args=(args.swap_every, swap)),
                threading.Thread(target=every, args=(args.graph_every, graph)),
                threading.Thread(target=every, args=(args.sample_every, sample))]
    sample(0)
    for t in threads:
        t.start()
    time.sleep(args.minutes * 60)
    stop.set()
    for t in threads:
        t.join()
    sample(0)

    missing = []
    c = Client("127.0.0.1", port)
    for doc in acknowledged:
        status, _ = c.request("GET", f"/doc/{urllib.parse.quote(doc, safe='')}")
        if status != 200:
            missing.append(doc)
    alive = server.poll() is None
    server.terminate()
    server.wait(timeout=60)
    shutil.rmtree(work, ignore_errors=True)

    warm = [s for s in samples if s["t"] >= args.warmup] or samples
    lat = sorted(latencies)
    if args.wrk:
        p50, p99 = wrk_report.get("p50_ms"), wrk_report.get("p99_ms")
    else:
        p50 = round(1000 * statistics.median(lat), 2) if lat else None
        p99 = round(1000 * lat[int(0.99 * (len(lat) - 1))], 2) if lat else None
    summary = {
        "minutes": args.minutes, "load": f"wrk, {args.connections} connections" if args.wrk
        else f"{args.searchers} Python searchers", "docs": args.docs, "replace": args.replace,
        **counts,
        "search_per_second": round(counts["search"] / (args.minutes * 60), 1),
        "search_p50_ms": p50,
        "search_p99_ms": p99,
        "acknowledged_documents": len(acknowledged), "missing_documents": len(missing),
        "rss_mb_after_warmup": warm[0]["rss_mb"], "rss_mb_end": samples[-1]["rss_mb"],
        "rss_growth_after_warmup": round(samples[-1]["rss_mb"] / warm[0]["rss_mb"] - 1, 4),
        "rss_mb_max": max(s["rss_mb"] for s in samples),
        "anon_mb_after_warmup": warm[0]["anon_mb"], "anon_mb_end": samples[-1]["anon_mb"],
        "anon_growth_after_warmup": round(samples[-1]["anon_mb"] / warm[0]["anon_mb"] - 1, 4),
        "fds_min": min(s["fds"] for s in samples), "fds_max": max(s["fds"] for s in samples),
        "server_alive_at_end": alive, "errors": errors, "samples": samples,
    }
    text = json.dumps(summary, indent=1)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=1))
    failed = (counts["search_errors"] + counts["batch_errors"] + counts["swap_errors"]
              + counts["graph_errors"] + len(missing)) > 0 or not alive
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
