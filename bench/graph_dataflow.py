#!/usr/bin/env python3
"""Link analysis beyond one machine (issue 14): PageRank cost per iteration on one graph for

- rankd's CSR engine on one thread and webgraph-algo's PageRank on one thread
  (`examples/pagerank_baselines`, one process per engine), and
- `rankd graph` on timely dataflow with 1/2/4 worker threads in one process and with 1/2/4
  processes of one worker on loopback (a host file of free 127.0.0.1 ports).

Every engine runs a fixed number of iterations (tolerance 0). For timely the figures are the
PageRank stage of the whole job (`stats` of `--json`); bytes exchanged are the PageRank
records sent to workers of other processes × 12 bytes (a bincode `(u32, f64)`), per
iteration, summed over processes. Peak RSS is the largest process's VmHWM. Each
configuration runs `--runs` times; the table gives medians.

Usage: python3 bench/graph_dataflow.py [--rmat 20 | --edges FILE] [--runs 3] [--iterations 20]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANKD = os.path.join(ROOT, "target/release/rankd")
BASELINES = os.path.join(ROOT, "target/release/examples/pagerank_baselines")


def free_ports(k):
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def baseline(graph, engine, iterations):
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    out = subprocess.run([BASELINES, *graph, "--engine", engine, "--iterations", str(iterations)],
                         check=True, capture_output=True, text=True, env=env).stdout
    d = json.loads(out)
    return {"s_per_it": d["seconds_per_iteration"], "edges": d["edges"], "rss": d["peak_rss_mb"] * 2**20,
            "bytes_per_it": 0, "l1": d["l1_to_csr_fixed_point"]}


def timely(graph, workers, processes, iterations, tmp):
    common = [RANKD, "graph", *graph, "--tolerance", "0", "--max-iter", str(iterations), "--json",
              "--workers", str(workers), "--output", os.path.join(tmp, "scores.tsv")]
    if processes == 1:
        procs = [subprocess.Popen(common, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)]
    else:
        hosts = os.path.join(tmp, "hosts")
        with open(hosts, "w") as f:
            f.writelines(f"127.0.0.1:{p}\n" for p in free_ports(processes))
        procs = [subprocess.Popen(common + ["--processes", str(processes), "--process", str(i),
                                            "--hostfile", hosts],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for i in range(processes)]
    reports = []
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        if p.returncode != 0:
            sys.exit(f"rankd graph failed ({p.returncode})")
        reports.append(json.loads(out))
    pr = [next(s for s in r["stats"] if s["name"] == "pagerank") for r in reports]
    its = pr[0]["iterations"]
    return {"s_per_it": max(s["seconds"] for s in pr) / its, "edges": reports[0]["edges"],
            "rss": max(r["peak_rss_mb"] for r in reports) * 2**20,
            "bytes_per_it": sum(s["remote_records"] for s in pr) * 12 / its,
            "job_s": max(r["seconds"] for r in reports)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rmat", type=int)
    ap.add_argument("--edges")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    args = ap.parse_args()
    graph = ["--rmat", str(args.rmat)] if args.rmat is not None else ["--edges", args.edges]
    configs = [("CSR, 1 thread", lambda t: baseline(graph, "csr", args.iterations), 1),
               ("webgraph-algo, 1 thread", lambda t: baseline(graph, "webgraph", args.iterations), 1)]
    for w in (1, 2, 4):
        configs.append((f"timely, {w} thread{'s' if w > 1 else ''}, 1 process",
                        lambda t, w=w: timely(graph, w, 1, args.iterations, t), w))
    for p in (2, 4):
        configs.append((f"timely, 1 thread, {p} processes",
                        lambda t, p=p: timely(graph, 1, p, args.iterations, t), p))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn, cores in configs:
            runs = [fn(tmp) for _ in range(args.runs)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            rows.append((name, cores, med, [r["s_per_it"] for r in runs]))
            print(f"{name}: {med}", file=sys.stderr)
    csr = rows[0][2]["s_per_it"]
    print(f"\nGraph: {' '.join(graph)}, {rows[0][2]['edges']:.0f} edges; {args.iterations} iterations; "
          f"medians of {args.runs} runs; {time.strftime('%Y-%m-%d')}\n")
    print("| engine | ms / iteration | edges / s | × CSR rate | per worker × CSR | bytes exchanged / iteration | peak RSS / process |")
    print("|---|---|---|---|---|---|---|")
    for name, cores, m, all_runs in rows:
        rate = m["edges"] / m["s_per_it"]
        ratio = csr / m["s_per_it"]
        print(f"| {name} | {m['s_per_it'] * 1e3:.3g} | {rate / 1e6:.0f}M | {ratio:.2f} | {ratio / cores:.2f} | "
              f"{m['bytes_per_it'] / 1e6:.1f} MB | {m['rss'] / 2**20:.0f} MiB |")


if __name__ == "__main__":
    main()
