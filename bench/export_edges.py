#!/usr/bin/env python3
"""Writes the link graph stored in an index's `link_scores.json` (written by `rankd graph`) as
a graph file the bare-graph tools (`examples/graph_scores`, `bench/graph_bench.py`, networkx,
igraph) read, so they run on the same graph.

- default: a SNAP edge list (`src<TAB>dst`, 0-based node ids). Pages without any link in or
  out do not appear in an edge list, so its node count can be lower than the index's.
- `--hollins`: the Hollins layout (header `nodes edges 1`, one `i DOC_ID` line per node,
  then `src dst` lines, 1-based), which keeps every node of the index's graph: use it to
  benchmark on exactly the graph `rankd graph` scores (isolated pages included).

Usage: python3 bench/export_edges.py [--hollins] DATA/link_scores.json OUT.txt
"""

import argparse
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hollins", action="store_true", help="Hollins layout, every node kept")
    ap.add_argument("scores")
    ap.add_argument("out")
    args = ap.parse_args()
    with open(args.scores) as f:
        f.readline()  # header
        body = json.loads(f.readline())
    offsets, targets, keys = body["out_offsets"], body["out_targets"], body["keys"]
    n = len(offsets) - 1
    assert len(keys) == n, f"{len(keys)} keys for {n} nodes"
    with open(args.out, "w") as f:
        if args.hollins:
            f.write(f"{n} {len(targets)} 1\n")
            for u, key in enumerate(keys):
                assert key and not any(c.isspace() for c in key), f"node {u}: id {key!r} has spaces"
                f.write(f"{u + 1} {key}\n")
            for u in range(n):
                for v in targets[offsets[u]:offsets[u + 1]]:
                    f.write(f"{u + 1} {v + 1}\n")
        else:
            f.write(f"# rankd link graph: {n} nodes, {len(targets)} edges\n")
            for u in range(n):
                for v in targets[offsets[u]:offsets[u + 1]]:
                    f.write(f"{u}\t{v}\n")
    print(f"{n} nodes, {len(targets)} edges -> {args.out}")


if __name__ == "__main__":
    main()
