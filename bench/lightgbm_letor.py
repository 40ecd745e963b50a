#!/usr/bin/env python3
"""LightGBM lambdarank on ../shared/data/letor-lightgbm with the example's train.conf, and a
cross-check of rankd's metric code on LightGBM's own predictions.

    bench/.venv/bin/python bench/lightgbm_letor.py [--seeds 1,2,3,4,5] [--json] [--rankd PATH]

For each seed: train 100 trees (lr 0.1, 31 leaves, min_data_in_leaf 50, min_sum_hessian 5,
bagging 0.9 every iteration, max_bin 255: LightGBM's examples/lambdarank/train.conf), predict
rank.test, and
  1. take LightGBM's own NDCG@1/3/5/10 on rank.test (its evaluator: gain 2^l - 1, an
     all-zero-label query counts as 1),
  2. score the same predictions with `rankd eval-letor --scores` and with an independent numpy
     implementation here (NDCG and MAP; MAP over queries with a relevant row, label >= 1),
  3. fail (exit 1) if rankd differs from LightGBM's NDCG or from numpy's MAP by more than 1e-4.
Prints NDCG@1/3/5/10 and MAP per seed and their mean (LightGBM's convention).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import lightgbm as lgb
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "letor-lightgbm")
TOL = 1e-4


def train_conf(seed):
    return {
        "objective": "lambdarank",
        "metric": "ndcg",
        "ndcg_eval_at": [1, 3, 5, 10],
        "max_bin": 255,
        "learning_rate": 0.1,
        "num_leaves": 31,
        "tree_learner": "serial",
        "feature_fraction": 1.0,
        "bagging_freq": 1,
        "bagging_fraction": 0.9,
        "min_data_in_leaf": 50,
        "min_sum_hessian_in_leaf": 5.0,
        "is_enable_sparse": True,
        "num_threads": 1,
        "deterministic": True,
        "seed": seed,
        "verbose": -1,
    }


def read_groups(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def read_labels(path):
    with open(path) as f:
        return np.array([int(float(line.split()[0])) for line in f if line.strip()])


def query_metrics(labels, scores):
    """NDCG@1/3/5/10 (LightGBM convention) and AP (None without a relevant row) of one query.
    Ties in score keep row order (stable sort), as LightGBM's evaluator does."""
    order = np.argsort(-scores, kind="stable")
    ranked = labels[order]
    gains = 2.0 ** ranked - 1.0
    ideal = 2.0 ** np.sort(labels)[::-1] - 1.0
    disc = 1.0 / np.log2(np.arange(2, len(labels) + 2))
    out = {}
    for k in (1, 3, 5, 10):
        idcg = float(np.sum(ideal[:k] * disc[:k]))
        out[f"ndcg@{k}"] = 1.0 if idcg == 0 else float(np.sum(gains[:k] * disc[:k])) / idcg
    rel = ranked >= 1
    if rel.any():
        hits = np.cumsum(rel)
        out["ap"] = float(np.sum((hits / np.arange(1, len(rel) + 1))[rel]) / rel.sum())
    else:
        out["ap"] = None
    return out


def numpy_metrics(labels, groups, scores):
    per_query, start = [], 0
    for g in groups:
        per_query.append(query_metrics(labels[start:start + g], scores[start:start + g]))
        start += g
    means = {f"ndcg@{k}": float(np.mean([q[f"ndcg@{k}"] for q in per_query])) for k in (1, 3, 5, 10)}
    means["map"] = float(np.mean([q["ap"] for q in per_query if q["ap"] is not None]))
    return means


def rankd_metrics(rankd, scores):
    with tempfile.NamedTemporaryFile("w", suffix=".scores", delete=False) as f:
        f.write("\n".join(repr(float(s)) for s in scores) + "\n")
        path = f.name
    try:
        out = subprocess.run(
            [rankd, "eval-letor", "--test", os.path.join(DATA, "rank.test"), "--scores", path, "--json"],
            check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)["test"]


def run_seed(seed, rankd):
    train = lgb.Dataset(os.path.join(DATA, "rank.train"), params={"max_bin": 255, "verbose": -1})
    test = lgb.Dataset(os.path.join(DATA, "rank.test"), reference=train)
    evals = {}
    booster = lgb.train(train_conf(seed), train, num_boost_round=100, valid_sets=[test],
                        valid_names=["test"], callbacks=[lgb.record_evaluation(evals)])
    own = {f"ndcg@{k}": evals["test"][f"ndcg@{k}"][-1] for k in (1, 3, 5, 10)}
    scores = booster.predict(os.path.join(DATA, "rank.test"))
    labels = read_labels(os.path.join(DATA, "rank.test"))
    groups = read_groups(os.path.join(DATA, "rank.test.query"))
    mine = numpy_metrics(labels, groups, scores)
    ours = rankd_metrics(rankd, scores)
    failures = []
    for k in (1, 3, 5, 10):
        name = f"ndcg@{k}"
        if abs(ours[name] - own[name]) > TOL:
            failures.append(f"seed {seed} {name}: rankd {ours[name]:.6f} vs LightGBM {own[name]:.6f}")
        if abs(mine[name] - own[name]) > TOL:
            failures.append(f"seed {seed} {name}: numpy {mine[name]:.6f} vs LightGBM {own[name]:.6f}")
    if abs(ours["map"] - mine["map"]) > TOL:
        failures.append(f"seed {seed} map: rankd {ours['map']:.6f} vs numpy {mine['map']:.6f}")
    result = dict(own)
    result["map"] = ours["map"]
    return result, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs, failures = [], []
    for seed in seeds:
        result, bad = run_seed(seed, args.rankd)
        runs.append(result)
        failures += bad
    names = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"]
    summary = {n: {"mean": float(np.mean([r[n] for r in runs])), "std": float(np.std([r[n] for r in runs]))}
               for n in names}
    if args.json:
        print(json.dumps({"lightgbm_version": lgb.__version__, "seeds": seeds, "runs": runs,
                          "summary": summary, "crosscheck_failures": failures}))
    else:
        print(f"LightGBM {lgb.__version__} lambdarank, train.conf, seeds {seeds} (rank.test, LightGBM convention)")
        for seed, r in zip(seeds, runs):
            print(f"  seed {seed}: " + "  ".join(f"{n} {r[n]:.4f}" for n in names))
        print("  mean:   " + "  ".join(f"{n} {summary[n]['mean']:.4f}" for n in names))
        print(f"metric cross-check (rankd vs LightGBM NDCG, rankd vs numpy MAP, tolerance {TOL}): "
              + ("OK" if not failures else "FAILED"))
    for f in failures:
        print("MISMATCH " + f, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
