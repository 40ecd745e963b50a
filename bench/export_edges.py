#!/usr/bin/env python3
"""Writes the link graph stored in an index's `link_scores.json` (written by `rankd graph`) as
a SNAP edge list (`src<TAB>dst`, 0-based node ids), so the bare-graph tools
(`examples/graph_scores`, `bench/graph_bench.py`, networkx, igraph) run on the same graph.

Usage: python3 bench/export_edges.py DATA/link_scores.json OUT.txt
"""

import json
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src) as f:
        f.readline()  # header
        body = json.loads(f.readline())
    offsets, targets = body["out_offsets"], body["out_targets"]
    n = len(offsets) - 1
    with open(out, "w") as f:
        f.write(f"# rankd link graph: {n} nodes, {len(targets)} edges\n")
        for u in range(n):
            for v in targets[offsets[u]:offsets[u + 1]]:
                f.write(f"{u}\t{v}\n")
    print(f"{n} nodes, {len(targets)} edges -> {out}")


if __name__ == "__main__":
    main()
