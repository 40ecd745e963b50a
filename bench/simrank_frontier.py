#!/usr/bin/env python3
"""Counts the work of rankd's Monte Carlo single-source SimRank (src/graph/simrank.rs) on an
index's link graph: replays the same coupled reverse walks (lazily drawn in-neighbour choices
σ_t(w), backward expansion from the source's walk) and prints, per sample, the (level, page)
pairs visited, the out-links read (every one pushed, no heavy-target pull) and the pages that
meet the source's walk. Explains the latencies in docs/BENCHMARKS.md ("The Rust-docs link graph").

Usage: python3 bench/simrank_frontier.py DATA/link_scores.json DOC_ID ... [--samples 5]
"""
import argparse
import json
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scores")
    ap.add_argument("docs", nargs="+")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open(args.scores) as f:
        f.readline()  # header
        body = json.loads(f.readline())
    off, tg, keys = body["out_offsets"], body["out_targets"], body["keys"]
    n = len(off) - 1
    inn = [[] for _ in range(n)]
    for u in range(n):
        for v in tg[off[u]:off[u + 1]]:
            inn[v].append(u)
    rng = random.Random(args.seed)
    k = args.steps
    for doc in args.docs:
        source = keys.index(doc)
        rows = []
        for _ in range(args.samples):
            memo = [{} for _ in range(k + 1)]

            def sigma(t, w):
                if w not in memo[t]:
                    memo[t][w] = rng.choice(inn[w]) if inn[w] else None
                return memo[t][w]

            visits = reads = met = 0
            x = source
            for t in range(1, k + 1):
                if not inn[x]:
                    break
                y = sigma(t, x)
                frontier = [w for w in tg[off[y]:off[y + 1]] if w != x and sigma(t, w) == y]
                reads += off[y + 1] - off[y]
                visits += len(frontier)
                for s in range(t - 1, 0, -1):
                    if not frontier:
                        break
                    nxt = []
                    for v in frontier:
                        reads += off[v + 1] - off[v]
                        nxt.extend(w for w in tg[off[v]:off[v + 1]] if sigma(s, w) == v)
                    frontier = nxt
                    visits += len(frontier)
                met += len(frontier)
                x = y
            rows.append((visits, reads, met))
        print(f"{doc}: per sample (level, page) visits {[r[0] for r in rows]}, "
              f"out-links read {[r[1] for r in rows]}, pages meeting the walk {[r[2] for r in rows]}")


if __name__ == "__main__":
    main()
