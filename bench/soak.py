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

With `--hostile` (issue 30's soak), a second client address, 127.0.0.2, adds the requests of
the hardening findings beside that load: heavy searches (310 distinct words over six fused
models, explanations on), idle and slowloris connections held past the connection cap (so
eviction runs), malformed request heads (a bad request line, a 70 KB URI, 300 headers), wrong
tokens, gzip bodies, bad JSON, bodies over the limit, a 20,000-deep RankLib model, training
settings over their bounds and searches over the cost cap. The searches may be answered 503
or 408 by the request budget (counted apart, as "budget"); a hostile request must get its
4xx; every other 5xx, or a 2xx a hostile request should not get, is a failure.

Exit status 1 if any request failed or an acknowledged document is missing.
"""

import argparse
import http.client
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

TOKEN = "soak-admin-token-0123456789"
TOPICS = ["vector", "iterator", "thread", "socket", "parser", "matrix", "string", "buffer"]


def impression_counts(port):
    """The server's impressions queued and dropped so far (`/metrics`); {} if unreadable."""
    try:
        status, text = Client("127.0.0.1", port).request("GET", "/metrics")
    except OSError:
        return {}
    if status != 200:
        return {}
    out = {"impressions": 0.0, "impressions_dropped": 0.0}
    for line in text.decode().splitlines():
        name = line.split("{")[0].split(" ")[0]
        if name == "rankd_impressions_total":
            out["impressions"] += float(line.rsplit(" ", 1)[1])
        elif name == "rankd_impressions_dropped_total":
            out["impressions_dropped"] += float(line.rsplit(" ", 1)[1])
    return out


def rss_trend(samples):
    """RSS after warm-up as a trend: least-squares slope (MB per minute) and the medians of its
    first and last thirds (a single end sample is as noisy as any other)."""
    t = [s["t"] for s in samples]
    r = [s["rss_mb"] for s in samples]
    if len(r) < 3:
        return {}
    mt, mr = statistics.mean(t), statistics.mean(r)
    slope = sum((a - mt) * (b - mr) for a, b in zip(t, r)) / sum((a - mt) ** 2 for a in t)
    k = len(r) // 3
    return {"rss_mb_per_minute": round(60 * slope, 3),
            "rss_mb_median_first_third": statistics.median(r[:k]),
            "rss_mb_median_last_third": statistics.median(r[-k:])}


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

    def __init__(self, host, port, source=None):
        self.host, self.port, self.source = host, port, source
        self.conn = None

    def request(self, method, path, body=None, content_type="application/json", admin=False,
                headers=None):
        headers = {"Content-Type": content_type, **(headers or {})}
        if admin:
            headers["Authorization"] = f"Bearer {TOKEN}"
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(
                        self.host, self.port, timeout=60,
                        source_address=(self.source, 0) if self.source else None)
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


HOG = "127.0.0.2"  # the hostile client's address (any 127/8 address reaches loopback)


def raw_status(port, data, timeout=10):
    """Sends raw bytes from the hostile address and returns the answer's status, or None
    when the server closed the connection without one."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                      source_address=(HOG, 0)) as sock:
            sock.sendall(data)
            head = sock.recv(64)
    except OSError:
        return None
    m = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    return int(m.group(1)) if m else None


def deep_ranklib(depth):
    """A RankLib model whose one tree is a chain `depth` splits deep (over the bound)."""
    parts = ["## LambdaMART\n<ensemble>\n<tree id=\"1\" weight=\"0.5\">\n<split>\n"]
    for k in range(depth):
        parts.append(f"<feature> 1 </feature><threshold> {k} </threshold><split pos=\"left\">"
                     f"<output> {k} </output></split><split pos=\"right\">\n")
    parts.append("<output> 1 </output>\n" + "</split>\n" * (depth + 1) + "</tree>\n</ensemble>\n")
    return "".join(parts).encode()


def hostile_requests(port):
    """(name, function returning the status) of each hostile request; each expects a 4xx
    (or, for a malformed head, a closed connection)."""
    c = Client("127.0.0.1", port, source=HOG)
    heavy_words = " ".join(TOPICS + ["guide", "and"] + [str(i) for i in range(300)])
    too_many = " ".join(f"w{i}" for i in range(3000))
    deep = deep_ranklib(20_000)
    over = b"[" + b" " * (16 << 20) + b"]"
    q = urllib.parse.quote
    def get(path, **kw):
        return lambda: c.request("GET", path, **kw)[0]
    def post(path, body, ctype="application/json", **kw):
        return lambda: c.request("POST", path, body, ctype, **kw)[0]
    return [
        ("bad_request_line", lambda: raw_status(port, b"GARBAGE / HTTP/9\r\n\r\n")),
        ("uri_70k", lambda: raw_status(
            port, b"GET /search?q=a&x=" + b"y" * 70_000 + b" HTTP/1.1\r\nhost: x\r\n\r\n")),
        ("headers_300", lambda: raw_status(
            port, b"GET /search?q=a HTTP/1.1\r\n"
            + b"".join(b"x-h%d: v\r\n" % i for i in range(300)) + b"\r\n")),
        ("wrong_token", lambda: c.request("POST", "/admin/judgments", b"[]", "application/json",
                                          headers={"Authorization": "Bearer wrong"})[0]),
        ("gzip_body", lambda: c.request("POST", "/admin/documents", b"\x1f\x8b\x08\x00",
                                        "application/x-ndjson", admin=True,
                                        headers={"Content-Encoding": "gzip"})[0]),
        ("bad_json", post("/admin/judgments", b"{", admin=True)),
        ("deep_model", post("/admin/models?format=ranklib", deep, "application/octet-stream",
                            admin=True)),
        ("huge_mlp", post("/admin/train", b'{"model":"mlp","hidden":[1000000000]}', admin=True)),
        ("huge_ensemble", post("/admin/train", b'{"ensemble":1000000000}', admin=True)),
        ("fusion_k", get("/search?q=vector&model=fusion&inputs=bm25f,lm&fusion_k=1e308")),
        ("cost_cap", get(f"/search?q={q(too_many)}&model=fusion&inputs=bm25,bm25f,lm")),
        ("body_over_limit", post("/admin/judgments", over, admin=True)),
        ("heavy_search", get(f"/search?q={q(heavy_words)}&k=100&explain=true&model=fusion"
                             "&inputs=bm25,bm25f,tfidf,lm,f2exp,bm25prox&fusion=condorcet")),
    ]


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
    ap.add_argument("--hostile", action="store_true",
                    help="add heavy and hostile requests from a second address (issue 30)")
    ap.add_argument("--idle", type=int, default=560,
                    help="--hostile: idle connections held (above limits.max_connections)")
    ap.add_argument("--slowloris", type=int, default=40,
                    help="--hostile: connections sending their head a line every 3 s")
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
              "swap_errors": 0, "graph_jobs": 0, "graph_busy": 0, "graph_errors": 0,
              "hostile_requests": 0, "hostile_errors": 0, "budget": 0, "heavy_search_200": 0,
              "evicted_or_closed": 0}
    hostile_statuses = {}
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
            if status in (408, 503) and args.hostile:
                count("budget")
            elif status != 200:
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

    active = [0]  # which of the two models is active (a swap cut off by 408 changed nothing)

    def swap(n):
        c = Client("127.0.0.1", port)
        status, out = c.request("POST", f"/admin/models/{models[1 - active[0]]}/activate", b"",
                                admin=True)
        if status == 200:
            active[0] = 1 - active[0]
        count("swaps")
        if status in (408, 503) and args.hostile:
            count("budget")
        elif status != 200:
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
        logged = impression_counts(port)
        with lock:
            samples.append({"t": round(time.time() - start, 1), "rss_mb": round(rss, 1),
                            "anon_mb": round(anon, 1), "file_mb": round(mapped, 1),
                            "fds": fds, "searches": counts["search"], **logged})

    def hostile():
        requests = hostile_requests(port)
        n = 0
        while not stop.is_set():
            name, send = requests[n % len(requests)]
            n += 1
            # The big bodies (16 MB, 1.5 MB) one round in ten.
            if name in ("body_over_limit", "deep_model") and (n // len(requests)) % 10:
                continue
            try:
                status = send()
            except OSError:
                status = None
            count("hostile_requests")
            with lock:
                hostile_statuses.setdefault(name, {})
                hostile_statuses[name][str(status)] = hostile_statuses[name].get(str(status), 0) + 1
            if status in (408, 503):
                count("budget")  # the request budget's answers (time limit, slots, shedding)
            elif name == "heavy_search":
                if status == 200:
                    count("heavy_search_200")
                else:
                    count("hostile_errors", f"{name}: {status}")
            elif status is None and name in ("bad_request_line", "uri_70k", "headers_300",
                                             "body_over_limit"):
                # hyper may close a connection whose head it cannot read, and one whose body
                # is refused (413) before the client has sent it all.
                count("evicted_or_closed")
            elif status is None or not 400 <= status < 500:
                count("hostile_errors", f"{name}: {status}")
            stop.wait(0.2)

    def holder(n, slowloris):
        """Keeps n connections open from the hostile address: idle, or sending a header
        line every 3 s; one the server closes (evicted at the cap, or timed out) is opened
        again a second later."""
        socks = [None] * n
        while not stop.is_set():
            # At most 100 new connections a pass (a second): enough to stay above the cap
            # although the server closes each after the header-read timeout (10 s), while at
            # the cap each new one evicts another of this address's, reopened next pass.
            opened = 0
            for i in range(n):
                if stop.is_set():
                    break
                s = socks[i]
                if s is not None:
                    try:
                        if slowloris:
                            s.sendall(b"x-slow: 1\r\n")
                        else:
                            s.setblocking(False)
                            try:
                                closed = s.recv(1024) == b""
                            except BlockingIOError:
                                closed = False
                            s.setblocking(True)
                            if closed:
                                raise OSError("closed")
                    except OSError:
                        s.close()
                        socks[i] = None
                        count("evicted_or_closed")
                        continue
                elif opened < 100:
                    opened += 1
                    try:
                        s = socket.create_connection(("127.0.0.1", port), timeout=5,
                                                     source_address=(HOG, 0))
                        if slowloris:
                            s.sendall(b"GET /search?q=slow HTTP/1.1\r\nhost: x\r\n")
                        socks[i] = s
                    except OSError:
                        pass
            stop.wait(3 if slowloris else 1)
        for s in socks:
            if s is not None:
                s.close()

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
            by_status = {int(k): v for k, v in report["non2xx_by_status"].items()}
            budget = sum(by_status.get(b, 0) for b in (408, 503)) if args.hostile else 0
            counts["budget"] += budget
            failed = report["non2xx"] - budget + sum(report["socket_errors"].values())
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
    if args.hostile:
        threads += [threading.Thread(target=hostile), threading.Thread(target=hostile),
                    threading.Thread(target=holder, args=(args.idle, False)),
                    threading.Thread(target=holder, args=(args.slowloris, True))]
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
        else f"{args.searchers} Python searchers", "hostile": args.hostile, "docs": args.docs, "replace": args.replace,
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
        **rss_trend(warm),
        "impressions_logged": samples[-1].get("impressions"),
        "impressions_dropped": samples[-1].get("impressions_dropped"),
        "hostile_statuses": hostile_statuses,
        "server_alive_at_end": alive, "errors": errors, "samples": samples,
    }
    text = json.dumps(summary, indent=1)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=1))
    failed = (counts["search_errors"] + counts["batch_errors"] + counts["swap_errors"]
              + counts["graph_errors"] + counts["hostile_errors"] + len(missing)) > 0 \
        or not alive
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
