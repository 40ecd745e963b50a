#!/usr/bin/env python3
"""Cross-check rankd's link analysis against networkx on real graph files (issue 4).

For each graph file, runs `graph_scores dump FILE` (the rankd example binary) and compares its
full score vectors with:
  - PageRank: networkx.pagerank(alpha=0.85, tol=1e-12)            (max abs diff <= 1e-9)
  - HITS:     networkx.hits (scipy SVD), normalised to sum 1       (max abs diff <= 1e-6)
  - SALSA:    the Lempel-Moran closed form over networkx's connected components of the
              bipartite hub/authority graph, and the two SALSA random walks iterated with
              scipy sparse matrices from uniform starts             (max abs diff <= 1e-6)
Exits non-zero on any mismatch.

Usage: bench/graph_crosscheck.py [--bin target/release/examples/graph_scores] [FILE ...]
Default files: ../shared/data/graphs/{hollins.dat,wiki-Vote.txt}.
"""
import argparse
import os
import subprocess
import sys
import time

import networkx as nx
import numpy as np
import scipy.sparse as sp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "graphs")


def read_graph(path):
    """Independent loader: networkx DiGraph with string labels, self-loops removed."""
    with open(path, encoding="utf-8") as f:
        lines = [l.strip() for l in f.read().splitlines()]
    lines = [l for l in lines if l and not l.startswith(("#", "%"))]
    g = nx.DiGraph()
    head = lines[0].split()
    if len(head) == 3:  # Hollins layout: header, n node lines, m edge lines (1-based)
        n = int(head[0])
        g.add_nodes_from(str(i) for i in range(1, n + 1))
        edge_lines = lines[1 + n:]
    else:
        edge_lines = lines
    for l in edge_lines:
        a, b = l.split()
        g.add_edge(a, b)
    g.remove_edges_from(list(nx.selfloop_edges(g)))
    return g


def salsa_closed_form(g):
    b = nx.Graph()
    b.add_edges_from((("h", u), ("a", v)) for u, v in g.edges())
    n_auth = sum(1 for v in g if g.in_degree(v) > 0)
    n_hub = sum(1 for u in g if g.out_degree(u) > 0)
    hub = {v: 0.0 for v in g}
    auth = {v: 0.0 for v in g}
    for comp in nx.connected_components(b):
        hubs = [x for s, x in comp if s == "h"]
        auths = [x for s, x in comp if s == "a"]
        edges = sum(g.out_degree(u) for u in hubs)
        for u in hubs:
            hub[u] = len(hubs) / n_hub * g.out_degree(u) / edges
        for v in auths:
            auth[v] = len(auths) / n_auth * g.in_degree(v) / edges
    return hub, auth


def salsa_walks(g, nodes, iterations=20000, tol=1e-15):
    """The SALSA chains by sparse power iteration (no component bookkeeping at all)."""
    idx = {v: i for i, v in enumerate(nodes)}
    n = len(nodes)
    rows = [idx[u] for u, v in g.edges()]
    cols = [idx[v] for u, v in g.edges()]
    a = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    outdeg = np.asarray(a.sum(axis=1)).ravel()
    indeg = np.asarray(a.sum(axis=0)).ravel()
    inv = lambda d: np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    row_norm = sp.diags(inv(outdeg)) @ a          # hub -> authority, by out-links
    col_norm = a @ sp.diags(inv(indeg))           # used transposed: authority -> hub, by in-links
    x_a = (indeg > 0) / max((indeg > 0).sum(), 1)
    x_h = (outdeg > 0) / max((outdeg > 0).sum(), 1)
    for _ in range(iterations):
        new_a = row_norm.T @ (col_norm @ x_a)
        new_h = col_norm @ (row_norm.T @ x_h)
        err = np.abs(new_a - x_a).sum() + np.abs(new_h - x_h).sum()
        x_a, x_h = new_a, new_h
        if err < tol * n:
            break
    return x_h, x_a


def check(name, got, want, tol):
    diff = float(np.max(np.abs(got - want))) if len(got) else 0.0
    ok = diff <= tol and np.all(np.isfinite(got))
    print(f"  {name:<22} max |diff| = {diff:.3e}  (tol {tol:g})  {'ok' if ok else 'MISMATCH'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "examples", "graph_scores"))
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    files = args.files or [os.path.join(DATA, "hollins.dat"), os.path.join(DATA, "wiki-Vote.txt")]
    all_ok = True
    for path in files:
        t0 = time.time()
        out = subprocess.run([args.bin, "dump", path, "--tol", "1e-14"], check=True,
                             capture_output=True, text=True).stdout.splitlines()
        rows = [l.split("\t") for l in out[1:]]
        labels = [r[0] for r in rows]
        ours = np.array([[float(x) for x in r[1:]] for r in rows])
        g = read_graph(path)
        print(f"{os.path.basename(path)}: {g.number_of_nodes()} nodes, {g.number_of_edges()} edges")
        ok = sorted(labels) == sorted(g.nodes())
        if not ok:
            print("  node sets differ")
        else:
            pr = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=10000)
            hubs, auths = nx.hits(g, max_iter=10000, tol=1e-12)
            s_hub, s_auth = salsa_closed_form(g)
            w_hub, w_auth = salsa_walks(g, labels)
            vec = lambda d: np.array([d[l] for l in labels])
            ok &= check("pagerank", ours[:, 0], vec(pr), 1e-9)
            ok &= check("hits hub", ours[:, 1], vec(hubs), 1e-6)
            ok &= check("hits authority", ours[:, 2], vec(auths), 1e-6)
            ok &= check("salsa hub (closed)", ours[:, 3], vec(s_hub), 1e-12)
            ok &= check("salsa authority (closed)", ours[:, 4], vec(s_auth), 1e-12)
            ok &= check("salsa hub (walk)", ours[:, 3], w_hub, 1e-6)
            ok &= check("salsa authority (walk)", ours[:, 4], w_auth, 1e-6)
        print(f"  {time.time() - t0:.1f} s")
        all_ok &= bool(ok)
    print("graph cross-check:", "PASS" if all_ok else "FAIL")
    sys.exit(0 if all_ok else 1)


if __name__ == "__main__":
    main()
