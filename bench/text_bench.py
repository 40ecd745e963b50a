#!/usr/bin/env python3
"""Text-core benchmark of issue 2 in one run (docs/BENCHMARKS.md, "Text core").

On the full Rust-docs corpus that rustup installs:
1. indexing throughput: `rankd ingest --format html ... --json` into fresh directories
   (--ingest-runs times, median; wall time and the CPU time the process used);
2. in-process single-thread query latency p50/p99 per model, top 10 and top 100, and top 10
   with snippets (`examples/query_latency.rs`), over bench/queries/rust-docs.txt;
3. the same through HTTP: `rankd serve` on 127.0.0.1, one keep-alive client, `/search?k=10`;
4. the bm25s peer over the text rankd stored (`examples/export_text.rs`, bench/bm25s_bench.py).
Prints a Markdown table and keeps the raw JSON under bench/out/text/.

Run from the crate root with the venv's Python (bm25s is needed):
    bench/.venv/bin/python bench/text_bench.py [--passes 3] [--ingest-runs 2]
Needs `cargo build --release --examples` (done here unless --no-build).
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out", "text")
RANKD = os.path.join(ROOT, "target", "release", "rankd")
EXAMPLES = os.path.join(ROOT, "target", "release", "examples")
BASE_URL = "https://doc.rust-lang.org/stable/"
MODELS = ["tfidf", "bm25", "bm25f", "f2exp", "lm", "bm25prox"]
# Targets of issue 2.
BM25_P50_MAX_MS = 1.0
HTTP_OVERHEAD_MAX_MS = 0.3
MODEL_VS_BM25_MAX = 5.0


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def rust_docs():
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True)
    docs = os.path.join(sysroot.stdout.strip(), "share", "doc", "rust", "html")
    if not os.path.isdir(docs):
        sys.exit(f"no Rust docs at {docs}; `rustup component add rust-docs`")
    return docs


def ingest(docs, data_dir):
    """One fresh ingest; its JSON summary plus wall and CPU seconds of the process."""
    shutil.rmtree(data_dir, ignore_errors=True)
    before = os.times()
    t0 = time.perf_counter()
    p = subprocess.run([RANKD, "ingest", "--format", "html", "--input", docs, "--base-url", BASE_URL,
                        "--json", "--data-dir", data_dir], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = os.times()
    if p.returncode != 0:
        sys.exit(f"rankd ingest failed:\n{p.stderr}")
    s = json.loads(p.stdout)
    s["wall_s"] = wall
    s["cpu_s"] = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir):
    port = free_port()
    addr = f"127.0.0.1:{port}"
    log_file = open(os.path.join(OUT, "serve.log"), "w")
    proc = subprocess.Popen([RANKD, "serve", "--data-dir", data_dir, "--addr", addr],
                            stdout=log_file, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"rankd serve exited with {proc.returncode}; see {log_file.name}")
        try:
            with urllib.request.urlopen(f"http://{addr}/readyz", timeout=2) as r:
                if r.status == 200:
                    return proc, addr
        except OSError:
            time.sleep(0.3)
    stop_server(proc)
    sys.exit("rankd serve did not become ready in 120 s")


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def run_json(cmd, path):
    log("$ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{p.stderr}")
    with open(path, "w") as fh:
        fh.write(p.stdout)
    return json.loads(p.stdout)


def fmt(ms):
    return f"{ms * 1000:.0f} µs" if ms < 1 else f"{ms:.2f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3, help="timed passes over all queries")
    ap.add_argument("--ingest-runs", type=int, default=2)
    ap.add_argument("--queries", default=os.path.join(ROOT, "bench", "queries", "rust-docs.txt"))
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if args.passes < 1 or args.ingest_runs < 1:
        sys.exit("--passes and --ingest-runs must be at least 1")
    os.makedirs(OUT, exist_ok=True)
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--bin", "rankd", "--examples"], cwd=ROOT, check=True)
    docs = rust_docs()
    data_dir = os.path.join(OUT, "index")

    runs = []
    for i in range(args.ingest_runs):
        log(f"ingest {i + 1}/{args.ingest_runs} of {docs}")
        runs.append(ingest(docs, data_dir))
        log(json.dumps(runs[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in
           ("docs_per_second", "mb_per_second", "peak_rss_mb", "wall_s", "cpu_s", "read_seconds", "index_seconds")}
    documents, input_mb = runs[-1]["documents"], runs[-1]["input_bytes"] / 1e6

    top = os.path.join(OUT, "rankd_bm25_top10.jsonl")
    server, addr = start_server(data_dir)
    try:
        lat = run_json([os.path.join(EXAMPLES, "query_latency"), "--data-dir", data_dir, "--queries", args.queries,
                        "--passes", str(args.passes), "--http", addr, "--top-out", top],
                       os.path.join(OUT, "query_latency.json"))
    finally:
        stop_server(server)

    export = os.path.join(OUT, "docs.jsonl")
    with open(export, "w") as fh:
        subprocess.run([os.path.join(EXAMPLES, "export_text"), "--data-dir", data_dir], stdout=fh, check=True)
    peer = run_json([sys.executable, os.path.join(ROOT, "bench", "bm25s_bench.py"), "--docs", export,
                     "--queries", args.queries, "--passes", str(args.passes), "--rankd-top", top],
                    os.path.join(OUT, "bm25s.json"))

    rows = {(r["model"], r["via"], r["k"], r["snippets"]): r for r in lat["rows"]}
    lib10 = {m: rows[(m, "lib", 10, False)] for m in MODELS}
    bm25_p50 = lib10["bm25"]["p50_ms"]
    print(f"\n{documents} documents ({input_mb:.0f} MB of HTML), {lat['queries']} queries, "
          f"{args.passes} timed passes (medians over passes), {args.ingest_runs} ingests (median).\n")
    print("| indexing | docs/s (wall) | MB/s (wall) | wall | CPU time | of which HTML parsing / indexing (wall) | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    print(f"| rankd ingest | {med['docs_per_second']:.0f} | {med['mb_per_second']:.2f} | {med['wall_s']:.0f} s | "
          f"{med['cpu_s']:.0f} s | {med['read_seconds']:.0f} s / {med['index_seconds']:.0f} s | {med['peak_rss_mb']:.0f} MB |")
    print(f"| bm25s index (extracted text, {peer['text_mb']:.0f} MB) | {documents / peer['index_wall_s']:.0f} | "
          f"{peer['text_mb'] / peer['index_wall_s']:.2f} | {peer['index_wall_s']:.0f} s | {peer['index_cpu_s']:.0f} s | "
          f"– / {peer['index_wall_s']:.0f} s | – |")
    print(f"\nbm25s / rankd indexing time (rankd's indexing phase only, no HTML parsing): "
          f"{peer['index_wall_s'] / med['index_seconds']:.2f}×\n")

    print("| model | top-10 p50 | top-10 p99 | top-100 p50 | top-100 p99 | top-10 + snippets p50 | p99 | HTTP p50 | HTTP p99 | HTTP overhead at p50 | p50 / BM25 p50 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    verdict = {"bm25_p50": bm25_p50 < BM25_P50_MAX_MS, "http": True, "models": True}
    for m in MODELS:
        a, b, s, h = lib10[m], rows[(m, "lib", 100, False)], rows[(m, "lib", 10, True)], rows[(m, "http", 10, True)]
        overhead = h["p50_ms"] - s["p50_ms"]
        ratio = a["p50_ms"] / bm25_p50
        verdict["http"] &= overhead < HTTP_OVERHEAD_MAX_MS
        verdict["models"] &= ratio <= MODEL_VS_BM25_MAX
        print(f"| {m} | {fmt(a['p50_ms'])} | {fmt(a['p99_ms'])} | {fmt(b['p50_ms'])} | {fmt(b['p99_ms'])} | "
              f"{fmt(s['p50_ms'])} | {fmt(s['p99_ms'])} | {fmt(h['p50_ms'])} | {fmt(h['p99_ms'])} | "
              f"{overhead * 1000:+.0f} µs | {ratio:.2f}× |")
    print(f"| bm25s {peer['bm25s_version']} (top 10) | {fmt(peer['p50_ms'])} | {fmt(peer['p99_ms'])} | | | | | | | | |")
    print(f"\nrankd bm25 / bm25s at p50 (top 10): {bm25_p50 / peer['p50_ms']:.3f}× "
          f"(p99 {lib10['bm25']['p99_ms'] / peer['p99_ms']:.3f}×); top-10 overlap rankd bm25 vs bm25s: "
          f"{peer['top10_overlap_mean']:.3f} over {peer['top10_overlap_queries']} queries")
    print(f"\nTargets: BM25 top-10 p50 < {BM25_P50_MAX_MS} ms: {'met' if verdict['bm25_p50'] else 'NOT met'}; "
          f"HTTP adds < {HTTP_OVERHEAD_MAX_MS * 1000:.0f} µs at p50 (every model): {'met' if verdict['http'] else 'NOT met'}; "
          f"no model > {MODEL_VS_BM25_MAX:.0f}× BM25 at p50 (top 10): {'met' if verdict['models'] else 'NOT met'}")
    with open(os.path.join(OUT, "summary.json"), "w") as fh:
        json.dump({"ingest_runs": runs, "ingest_median": med, "latency": lat, "bm25s": peer, "verdict": verdict}, fh, indent=1)


if __name__ == "__main__":
    main()
