#!/usr/bin/env python3
"""Hot model activation under load (issue 6): concurrent /search clients on loopback while an
operator activates and rolls back rerankers repeatedly. Reports requests served, errors and
latency before and during the swaps, and checks that every response names one of the models
(no request sees a half-swapped state).

    python3 bench/hot_swap.py --url http://127.0.0.1:8080 --token TOKEN \
        [--clients 8] [--seconds 10] [--swap-every 0.25] [--queries bench/queries/rust-docs.txt]

The server needs at least two registered models (the demo's, plus one from POST /admin/train).
Exits non-zero on any error. Prints one JSON object.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


def request(conn, method, path, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    return resp.status, body


def load(host, port, queries, stop, results, models_seen):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    i = 0
    while not stop.is_set():
        q = queries[i % len(queries)]
        i += 1
        path = "/search?" + urllib.parse.urlencode({"q": q, "k": 10})
        t = time.perf_counter()
        try:
            status, body = request(conn, "GET", path)
            ms = (time.perf_counter() - t) * 1e3
            if status != 200:
                results.append((ms, f"status {status}: {body[:200]!r}"))
                continue
            models_seen.add(json.loads(body).get("reranker"))
            results.append((ms, None))
        except Exception as e:  # a dropped connection is an error to report
            results.append(((time.perf_counter() - t) * 1e3, repr(e)))
            conn = http.client.HTTPConnection(host, port, timeout=10)


def phase(host, port, queries, clients, seconds, swap=None):
    stop = threading.Event()
    per_client = [[] for _ in range(clients)]
    seen = set()
    threads = [
        threading.Thread(target=load, args=(host, port, queries, stop, per_client[c], seen))
        for c in range(clients)
    ]
    for t in threads:
        t.start()
    swaps = 0
    end = time.time() + seconds
    while time.time() < end:
        if swap:
            swaps += swap()
        else:
            time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    results = [r for c in per_client for r in c]
    lat = sorted(ms for ms, err in results if err is None)
    errors = [err for _, err in results if err is not None]
    q = statistics.quantiles(lat, n=100) if len(lat) >= 100 else [float("nan")] * 99
    return {
        "requests": len(results),
        "errors": len(errors),
        "first_errors": errors[:5],
        "p50_ms": statistics.median(lat) if lat else None,
        "p99_ms": q[98],
        "throughput_rps": len(results) / seconds,
        "swaps": swaps,
        "rerankers_seen": sorted(m for m in seen if m is not None),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--swap-every", type=float, default=0.25)
    ap.add_argument("--queries", default="bench/queries/rust-docs.txt")
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.url)
    host, port = u.hostname, u.port
    queries = [l.strip() for l in open(args.queries) if l.strip()]
    admin = http.client.HTTPConnection(host, port, timeout=30)
    status, body = request(admin, "GET", "/admin/models", args.token)
    if status != 200:
        raise SystemExit(f"GET /admin/models: {status} {body[:300]!r}")
    models = json.loads(body)["models"]
    if len(models) < 2:
        raise SystemExit("need at least two registered models (train one with POST /admin/train)")
    ids = [m["id"] for m in models[:2]]
    status, _ = request(admin, "POST", f"/admin/models/{ids[0]}/activate", args.token)
    if status not in (200, 409):
        raise SystemExit(f"activate {ids[0]}: {status}")

    swap_errors = []

    def swap():
        # Alternate: activate the other model, then roll back to this one.
        for method, path in (("POST", f"/admin/models/{ids[1]}/activate"), ("POST", "/admin/models/rollback")):
            status, body = request(admin, method, path, args.token)
            if status != 200:
                swap_errors.append(f"{path}: {status} {body[:200]!r}")
            time.sleep(args.swap_every)
        return 2

    before = phase(host, port, queries, args.clients, args.seconds)
    during = phase(host, port, queries, args.clients, args.seconds, swap)
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "clients": args.clients,
        "seconds_per_phase": args.seconds,
        "models": ids,
        "before_swaps": before,
        "during_swaps": during,
        "swap_errors": swap_errors,
    }
    print(json.dumps(out, indent=2))
    failed = before["errors"] or during["errors"] or swap_errors
    unknown = set(during["rerankers_seen"]) - set(ids)
    if unknown:
        print(f"responses named unknown rerankers: {unknown}")
    raise SystemExit(1 if failed or unknown else 0)


if __name__ == "__main__":
    main()
