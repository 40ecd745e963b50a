#!/usr/bin/env python3
"""Reranking latency as the server measures it (issue 5): every query of a file through
`/search` with rerank=false (first phase only) and with rerank=true at windows 100 and 1000,
interleaved per query, on one keep-alive loopback connection. Uses the server's own `took_ms`
(search work without HTTP), medians over passes of p50/p99. The added cost of reranking is
reported per query as took_ms(reranked) − took_ms(first phase).

    python3 bench/rerank_http.py --url http://127.0.0.1:8080 [--queries FILE] [--passes 3]
"""
import argparse
import http.client
import json
import statistics
import urllib.parse


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, round((len(v) - 1) * p))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--queries", default="bench/queries/rust-docs.txt")
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    u = urllib.parse.urlparse(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    queries = [l.strip() for l in open(args.queries) if l.strip()]
    configs = {"first_phase": "rerank=false", "rerank_w100": "window=100", "rerank_w1000": "window=1000"}
    per_pass = {name: [] for name in list(configs) + ["added_w100", "added_w1000"]}
    reranker = None
    for _ in range(args.passes):
        took = {name: [] for name in configs}
        for q in queries:
            for name, extra in configs.items():
                path = f"/search?q={urllib.parse.quote(q)}&k=10&{extra}"
                conn.request("GET", path)
                r = conn.getresponse()
                body = json.loads(r.read())
                if r.status != 200:
                    raise SystemExit(f"{path}: {r.status} {body}")
                if name != "first_phase":
                    reranker = body["reranker"]
                    if reranker is None:
                        raise SystemExit("the server has no active reranker")
                took[name].append(body["took_ms"])
        for name in configs:
            per_pass[name].append((pct(took[name], 0.5), pct(took[name], 0.99)))
        for w in ("w100", "w1000"):
            added = [a - b for a, b in zip(took[f"rerank_{w}"], took["first_phase"])]
            per_pass[f"added_{w}"].append((pct(added, 0.5), pct(added, 0.99)))
    out = {
        "queries": len(queries),
        "passes": args.passes,
        "reranker": reranker,
    }
    for name, rows in per_pass.items():
        out[name] = {
            "p50_ms": statistics.median(r[0] for r in rows),
            "p99_ms": statistics.median(r[1] for r in rows),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
