#!/usr/bin/env python3
"""`rankd fuse` against ranx (`ranx.fuse`) on Cranfield runs of the six first-phase models.

Ingests Cranfield into a temporary data directory, writes each model's top 100 per query
with `rankd eval --run`, then fuses the same run files with `rankd fuse` and with ranx for
every method (and the weighted variants) and fails unless, for every query, both give the same
documents with scores within 1e-9 (relative to max(1, |score|)) and rankd's order is ranx's
order (documents whose ranx scores are within that tolerance may come in either order).

Conventions the comparison needs, written down in src/search/fusion.rs:
- ranx orders tied input scores by numba's unstable quicksort, so a rank-based method has no
  defined input order on tied scores. The runs are first made tie-free: within a group of
  equal scores (in trec_eval's order, doc id descending) each later document's score is
  lowered by a step far below the gap to the next distinct score. Both tools read these files.
- ranx's Condorcet sorts with the pairwise-majority comparator, which is not a total order
  when the majority relation has cycles or ties (its result then depends on Python's string
  hash order). rankd orders by Copeland score. They are compared on the queries where ranx's
  relation is a strict total order equal to rankd's majority relation, on five inputs (an odd
  number, so pairs are rarely tied), each restricted to the union of the five top 5s ("short
  lists" that rank nearly every candidate); the script prints how many queries that is and
  fails if it is under a third.

Run from the crate root: bench/.venv/bin/python bench/fusion_crosscheck.py [--release]
"""

import argparse
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from ranx import Run, fuse

ROOT = Path(__file__).resolve().parent.parent
CRANFIELD = ROOT.parent / "shared" / "data" / "cranfield"
MODELS = ["tfidf", "bm25", "bm25f", "f2exp", "lm", "bm25prox"]
TOL = 1e-9


def rankd(release, *args):
    cmd = ["cargo", "run", "-q"] + (["--release"] if release else []) + ["--", *args]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    return out.stdout


def read_run(path):
    run = {}
    for line in Path(path).read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    return run


def untie(run):
    """Lowers tied scores (trec_eval order: score desc, doc id desc) into distinct ones."""
    out = {}
    for q, docs in run.items():
        items = sorted(docs.items(), key=lambda x: (-x[1], tuple(-b for b in x[0].encode())))
        fixed = {}
        i = 0
        while i < len(items):
            j = i
            while j + 1 < len(items) and items[j + 1][1] == items[i][1]:
                j += 1
            s = items[i][1]
            nxt = items[j + 1][1] if j + 1 < len(items) else s - 1.0
            step = min((s - nxt) / (j - i + 2), 1e-6 * max(1.0, abs(s)))
            for k in range(i, j + 1):
                fixed[items[k][0]] = s - (k - i) * step
            i = j + 1
        assert len(set(fixed.values())) == len(fixed), q
        out[q] = fixed
    return out


def short_lists(runs, depth):
    """Each run restricted to the union of the runs' top `depth` (so nearly every list ranks
    every candidate and the majority relation has few abstentions)."""
    out = [dict() for _ in runs]
    for q in runs[0]:
        union = set()
        for r in runs:
            union |= {d for d, _ in sorted(r.get(q, {}).items(), key=lambda x: -x[1])[:depth]}
        for o, r in zip(out, runs):
            o[q] = {d: s for d, s in r.get(q, {}).items() if d in union}
    return out


def write_run(run, path):
    with open(path, "w") as f:
        for q in sorted(run):
            for r, (d, s) in enumerate(sorted(run[q].items(), key=lambda x: -x[1])):
                f.write(f"{q} Q0 {d} {r + 1} {s!r} t\n")


def ranx_fuse(runs, method, weights=None, k=None, norm=None):
    rr = [Run.from_dict({q: dict(d) for q, d in r.items()}) for r in runs]
    if method == "rrf" and weights is not None:
        # ranx has no weighted RRF: its per-run RRF scores, then a weighted sum.
        from ranx.fusion.rrf import _rrf_score_parallel
        per_run = []
        for r in rr:
            x = Run()
            x.run = _rrf_score_parallel(r.run, k or 60)
            per_run.append(x)
        fused = fuse(per_run, norm=None, method="wsum", params={"weights": weights})
    else:
        names = {"rrf": "rrf", "combsum": "sum", "combmnz": "mnz", "borda": "bordafuse",
                 "condorcet": "condorcet"}
        wnames = {"combsum": "wsum", "combmnz": "wmnz", "borda": "w_bordafuse"}
        ranx_norm = {None: None, "minmax": "min-max", "zscore": "zmuv"}[norm]
        params = {}
        if method == "rrf":
            params["k"] = k or 60
        if weights is not None:
            params["weights"] = weights
        m = wnames[method] if weights is not None else names[method]
        fused = fuse(rr, norm=ranx_norm, method=m, params=params)
    return {q: dict(d) for q, d in fused.to_dict().items()}


def compare(name, ours, theirs, queries=None):
    bad = 0
    for q in queries if queries is not None else theirs:
        a, b = ours.get(q, {}), theirs[q]
        if set(a) != set(b):
            print(f"  {name} q{q}: different documents ({len(a)} vs {len(b)})")
            bad += 1
            continue
        for d, s in a.items():
            if abs(s - b[d]) > TOL * max(1.0, abs(b[d])):
                print(f"  {name} q{q} {d}: score {s!r} vs ranx {b[d]!r}")
                bad += 1
                break
        order = sorted(a, key=lambda d: -a[d])  # rankd's written order is by its own score
        for x, y in zip(order, order[1:]):
            if b[y] > b[x] + TOL * max(1.0, abs(b[x])):
                print(f"  {name} q{q}: {x} before {y} but ranx scores {b[x]!r} < {b[y]!r}")
                bad += 1
                break
    return bad


def rankd_fuse(release, paths, *flags):
    out = rankd(release, "fuse", *flags, *map(str, paths))
    fused = {}
    order_ok = True
    last = {}
    for line in out.splitlines():
        q, _, d, r, s, _ = line.split()
        s = float(s)
        if q in last and s > last[q]:
            order_ok = False
        last[q] = s
        fused.setdefault(q, {})[d] = s
    assert order_ok, "rankd fuse wrote a query's list out of score order"
    return fused


def condorcet_comparable(runs, q):
    """Whether ranx's majority comparator is a strict total order equal to rankd's relation."""
    docs = sorted({d for r in runs for d in r.get(q, {})})
    n, big = len(docs), 1_000_000
    index = {d: i for i, d in enumerate(docs)}
    ranks = np.full((len(runs), n), big)
    for li, r in enumerate(runs):
        for pos, d in enumerate(sorted(r.get(q, {}), key=lambda d: -r[q][d])):
            ranks[li, index[d]] = pos
    less = (ranks[:, :, None] < ranks[:, None, :]).sum(0)  # lists putting x above y
    ranx_before = less >= (len(runs) - less)  # ranx: x first when x_votes >= y_votes
    np.fill_diagonal(ranx_before, False)
    ours = less > less.T
    off = ~np.eye(n, dtype=bool)
    if not np.array_equal(ranx_before[off], ours[off]):
        return False
    if not np.all((ours | ours.T)[off]):
        return False
    # A tournament is transitive iff its win counts are 0..n-1.
    return sorted(ours.sum(1)) == list(range(n))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--release", action="store_true")
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = tmp / "data"
        rankd(args.release, "ingest", "--format", "cranfield", "--input", str(CRANFIELD),
              "--data-dir", str(data), "--json")
        runs = []
        for model in MODELS:
            path = tmp / f"{model}.raw"
            rankd(args.release, "eval", "--format", "cranfield",
                  "--queries", str(CRANFIELD / "cran.qry"), "--qrels", str(CRANFIELD / "cranqrel"),
                  "--model", model, "--depth", "100", "--run", str(path),
                  "--data-dir", str(data), "--json")
            runs.append(untie(read_run(path)))
        paths = []
        for model, run in zip(MODELS, runs):
            p = tmp / f"{model}.trec"
            write_run(run, p)
            paths.append(p)
        weights = [1.0, 2.0, 0.5, 1.5, 3.0, 0.25]
        cases = [
            ("rrf", [], dict()),
            ("rrf k=10", ["--k", "10"], dict(k=10)),
            ("rrf weighted", ["--weights", ",".join(map(str, weights))], dict(weights=weights)),
            ("combsum minmax", [], dict(norm="minmax")),
            ("combsum zscore", ["--norm", "zscore"], dict(norm="zscore")),
            ("combsum weighted", ["--weights", ",".join(map(str, weights))],
             dict(norm="minmax", weights=weights)),
            ("combmnz minmax", [], dict(norm="minmax")),
            ("combmnz zscore", ["--norm", "zscore"], dict(norm="zscore")),
            ("combmnz weighted", ["--weights", ",".join(map(str, weights))],
             dict(norm="minmax", weights=weights)),
            ("borda", [], dict()),
            ("borda weighted", ["--weights", ",".join(map(str, weights))], dict(weights=weights)),
        ]
        for name, flags, kw in cases:
            method = name.split()[0]
            ours = rankd_fuse(args.release, paths, "--method", method, *flags)
            theirs = ranx_fuse(runs, method, **kw)
            bad = compare(name, ours, theirs)
            print(f"{name:18s} {len(theirs)} queries: {'ok' if bad == 0 else f'{bad} differ'}")
            failures += bad
        # Condorcet on five inputs, short lists: each restricted to the union of the top 5s.
        short = short_lists(runs[:1] + runs[2:], 5)
        short_paths = []
        for i, run in enumerate(short):
            p = tmp / f"short{i}.trec"
            write_run(run, p)
            short_paths.append(p)
        ours = rankd_fuse(args.release, short_paths, "--method", "condorcet")
        theirs = ranx_fuse(short, "condorcet")
        comparable = [q for q in theirs if condorcet_comparable(short, q)]
        bad = compare("condorcet", ours, theirs, comparable)
        print(f"condorcet          {len(comparable)} of {len(theirs)} queries comparable: "
              f"{'ok' if bad == 0 else f'{bad} differ'}")
        failures += bad
        if len(comparable) < len(theirs) / 3:
            print("too few queries where ranx's Condorcet is well defined")
            failures += 1
    if failures:
        sys.exit(f"{failures} differences against ranx")
    print("rankd fuse agrees with ranx")


if __name__ == "__main__":
    main()
