#!/usr/bin/env python3
"""Hyperparameter search for `rankd eval-letor` on the TRAIN queries only.

    bench/.venv/bin/python bench/letor_tune.py --objective stable-ap --model mlp \
        --grid 'lr=0.01,0.03;batch=8,32' [--seeds 1,2] [--fixed '--hidden 32'] [--jobs 2]

rank.train is split by query (seeded, 25% held out) into bench/out/tune/{fit,held} (+ .query
group files); every grid point trains on `fit` (early stopping on an internal split of `fit`)
and is scored on `held`. rank.test is never read. Prints one line per grid point, sorted by
the selection criterion: the mean of held-out MAP and NDCG@10 (each a mean over seeds) — the
two numbers issue 5's targets are stated in.
"""
import argparse
import itertools
import json
import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "letor-lightgbm")
OUT = os.path.join(ROOT, "bench", "out", "tune")


def split_train(held_fraction=0.25, seed=0):
    """Writes fit/held LETOR files (+ group files) from rank.train, split by query."""
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(DATA, "rank.train")) as f:
        rows = [line for line in f if line.strip()]
    with open(os.path.join(DATA, "rank.train.query")) as f:
        groups = [int(line) for line in f if line.strip()]
    queries, start = [], 0
    for g in groups:
        queries.append(rows[start:start + g])
        start += g
    assert start == len(rows)
    order = list(range(len(queries)))
    random.Random(seed).shuffle(order)
    held = set(order[:round(len(queries) * held_fraction)])
    for name, keep in (("fit", lambda i: i not in held), ("held", lambda i: i in held)):
        chosen = [q for i, q in enumerate(queries) if keep(i)]
        with open(os.path.join(OUT, name), "w") as f:
            f.writelines(line for q in chosen for line in q)
        with open(os.path.join(OUT, name + ".query"), "w") as f:
            f.writelines(f"{len(q)}\n" for q in chosen)
    return os.path.join(OUT, "fit"), os.path.join(OUT, "held")


def run(rankd, fit, held, args):
    cmd = [rankd, "eval-letor", "--train", fit, "--test", held, "--json"] + args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objective", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--grid", required=True, help="'name=v1,v2;name2=v3,v4' (rankd flag names)")
    ap.add_argument("--fixed", default="", help="extra rankd flags for every run")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    args = ap.parse_args()
    fit, held = split_train()
    axes = [(kv.split("=")[0], kv.split("=")[1].split(",")) for kv in args.grid.split(";") if kv]
    points = [dict(zip([a[0] for a in axes], values)) for values in itertools.product(*[a[1] for a in axes])]
    seeds = args.seeds.split(",")
    jobs = []
    for p in points:
        flags = ["--objective", args.objective, "--model", args.model] + args.fixed.split()
        for k, v in p.items():
            if v == "true":  # a switch such as --graded
                flags.append(f"--{k}")
            elif v != "false":
                flags += [f"--{k}", v]
        for s in seeds:
            jobs.append((tuple(sorted(p.items())), flags + ["--seed", s]))
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda j: (j[0], run(args.rankd, fit, held, j[1])), jobs))
    table = {}
    for key, r in results:
        table.setdefault(key, []).append(r)
    rows = []
    for key, rs in table.items():
        m = sum(r["test"]["map"] for r in rs) / len(rs)
        n = sum(r["test"]["ndcg@10"] for r in rs) / len(rs)
        # Networks report their kept epoch, trees (`--model gbdt`) their kept round.
        e = sum(r.get("best_epoch", r.get("best_round", 0)) for r in rs) / len(rs)
        rows.append((m, n, e, dict(key)))
    rows.sort(key=lambda r: -(r[0] + r[1]) / 2)
    print(f"{args.objective} {args.model} {args.fixed}  (held-out split of rank.train, seeds {args.seeds})")
    for m, n, e, p in rows:
        print(f"  (MAP+NDCG@10)/2 {(m + n) / 2:.4f}  MAP {m:.4f}  NDCG@10 {n:.4f}  best epoch {e:5.1f}  {p}")


if __name__ == "__main__":
    main()
