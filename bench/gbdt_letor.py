#!/usr/bin/env python3
"""rankd's gradient-boosted trees against LightGBM lambdarank on the LightGBM LETOR example
(issue 15), in one run, over seeds.

    python bench/gbdt_letor.py [--seeds 1,2,3,4,5] [--rankd target/release/rankd] [--json]
                               [--only NAME,...] [--stable-ap-flags '...']

Every row trains on ../shared/data/letor-lightgbm/rank.train and is scored on rank.test under
LightGBM's convention (rankd's metric code for all rows: `rankd eval-letor --scores` for
LightGBM's predictions). Same trees, leaves, learning rate and bins for every row:
LightGBM's examples/lambdarank/train.conf — 100 trees, lr 0.1, 31 leaves, max_bin 255,
min_data_in_leaf 50, min_sum_hessian_in_leaf 5, bagging 0.9 every round — all training
queries, no early stopping. The seed drives bagging (both libraries).

Rows:
  lightgbm        LightGBM 4.7 lambdarank (num_threads 1, deterministic)
  lambda-ndcg     rankd LambdaMART-NDCG (LightGBM's formulas)
  lambda-ap       rankd ΔAP LambdaMART (XGBoost rank:map's delta)
  stable-ap       rankd stable AP trees, curvature bound (--stable-ap-hessian bound)
  stable-ap-const rankd stable AP trees, constant hessian
Stable AP rows take --stable-ap-flags (default: graded, tau 0.1, a 10, t 2, their learning
rates as chosen on a split of rank.train, see notes-gbdt.md).

Paired comparisons printed: rankd lambda-ndcg minus LightGBM on NDCG@10 (per seed); each
stable AP row minus lambda-ap on MAP, paired t-tests over seeds (seed-level MAP) and over
the 50 test queries (per-query AP averaged over seeds).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import tempfile

import lightgbm as lgb
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "letor-lightgbm")
TRAIN, TEST = os.path.join(DATA, "rank.train"), os.path.join(DATA, "rank.test")
METRICS = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"]

COMMON = ["--trees", "100", "--leaves", "31", "--max-bins", "255",
          "--min-data-in-leaf", "50", "--min-sum-hessian", "5", "--row-fraction", "0.9"]
STABLE = "--graded --tau 0.1 --weight-a 10 --weight-t 2"


def lightgbm_scores(seed):
    params = {"objective": "lambdarank", "max_bin": 255, "learning_rate": 0.1, "num_leaves": 31,
              "feature_fraction": 1.0, "bagging_freq": 1, "bagging_fraction": 0.9,
              "min_data_in_leaf": 50, "min_sum_hessian_in_leaf": 5.0, "num_threads": 1,
              "deterministic": True, "seed": seed, "verbose": -1}
    train = lgb.Dataset(TRAIN, params={"max_bin": 255, "verbose": -1})
    booster = lgb.train(params, train, num_boost_round=100)
    return booster.predict(TEST)


def rankd_eval_scores(rankd, scores):
    with tempfile.NamedTemporaryFile("w", suffix=".scores", delete=False) as f:
        f.write("\n".join(repr(float(s)) for s in scores) + "\n")
        path = f.name
    try:
        out = subprocess.run([rankd, "eval-letor", "--test", TEST, "--scores", path, "--json"],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)["test"]


def rankd_trees(rankd, seed, flags):
    with tempfile.NamedTemporaryFile(suffix=".scores", delete=False) as f:
        path = f.name
    try:
        out = subprocess.run([rankd, "eval-letor", "--train", TRAIN, "--test", TEST, "--model", "gbdt",
                              "--seed", str(seed), "--write-scores", path, "--json"] + COMMON + flags,
                             check=True, capture_output=True, text=True).stdout
        with open(path) as f:
            scores = np.array([float(l) for l in f if l.strip()])
    finally:
        os.unlink(path)
    result = json.loads(out)
    return result["test"], scores, result.get("train_seconds")


def per_query_ap(scores):
    labels = np.array([int(float(l.split()[0])) for l in open(TEST) if l.strip()])
    groups = [int(l) for l in open(TEST + ".query") if l.strip()]
    out, start = [], 0
    for g in groups:
        lab, sc = labels[start:start + g], scores[start:start + g]
        start += g
        rel = lab[np.argsort(-sc, kind="stable")] >= 1
        if rel.any():
            hits = np.cumsum(rel)
            out.append(float(np.sum((hits / np.arange(1, len(rel) + 1))[rel]) / rel.sum()))
        else:
            out.append(None)
    return out


def paired_t(diffs):
    """Two-sided paired t-test of mean(diffs) = 0: (mean, t, p) (Student t via the
    regularised incomplete beta, no scipy needed)."""
    n = len(diffs)
    mean = statistics.fmean(diffs)
    sd = statistics.stdev(diffs) if n > 1 else 0.0
    if sd == 0:
        return mean, float("inf") if mean else 0.0, 0.0 if mean else 1.0
    t = mean / (sd / math.sqrt(n))
    df = n - 1
    x = df / (df + t * t)
    return mean, t, betainc(df / 2, 0.5, x)


def betainc(a, b, x):
    """Regularised incomplete beta I_x(a, b) by Lentz's continued fraction."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(math.log(x) * a + math.log(1 - x) * b + lbeta)
    if x > (a + 1) / (a + b + 2):
        return 1.0 - betainc(b, a, 1 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -((a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > 1e-30 else 1e-30)
        c = 1.0 + num / c
        c = c if abs(c) > 1e-30 else 1e-30
        f *= c * d
        if abs(1.0 - c * d) < 1e-12:
            break
    return front * (f - 1.0) / a


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    ap.add_argument("--only", default="")
    ap.add_argument("--stable-ap-flags", default=STABLE)
    ap.add_argument("--stable-ap-lr", default="0.1")
    ap.add_argument("--stable-ap-const-lr", default="0.1")
    ap.add_argument("--rankd-flags", default="", help="extra flags for every rankd row")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    stable = args.stable_ap_flags.split()
    rows = {
        "lightgbm": None,
        "lambda-ndcg": ["--objective", "lambda-ndcg"],
        "lambda-ap": ["--objective", "lambda-ap"],
        "stable-ap": ["--objective", "stable-ap", "--stable-ap-hessian", "bound"] + stable,
        "stable-ap-const": ["--objective", "stable-ap", "--stable-ap-hessian", "constant"] + stable,
    }
    if args.only:
        keep = args.only.split(",")
        rows = {k: v for k, v in rows.items() if k in keep or k in ("lightgbm", "lambda-ap")}
    results = {name: [] for name in rows}
    aps = {name: [] for name in rows}
    seconds = {name: [] for name in rows}
    for seed in seeds:
        for name, flags in rows.items():
            if flags is None:
                scores = lightgbm_scores(seed)
                m = rankd_eval_scores(args.rankd, scores)
            else:
                lr = {"stable-ap": args.stable_ap_lr, "stable-ap-const": args.stable_ap_const_lr}.get(name, "0.1")
                extra = ["--tree-lr", lr]
                m, scores, secs = rankd_trees(args.rankd, seed, flags + extra + args.rankd_flags.split())
                seconds[name].append(secs)
            results[name].append(m)
            aps[name].append(per_query_ap(scores))
    summary = {name: {k: (statistics.fmean([r[k] for r in rs]), statistics.pstdev([r[k] for r in rs]))
                      for k in METRICS} for name, rs in results.items()}
    comparisons = []

    def compare(a, b, metric):
        seed_diffs = [ra[metric] - rb[metric] for ra, rb in zip(results[a], results[b])]
        out = {"a": a, "b": b, "metric": metric, "per_seed": seed_diffs,
               "seeds": dict(zip(("mean", "t", "p"), paired_t(seed_diffs)))}
        if metric == "map":
            qa = np.array([[v if v is not None else np.nan for v in s] for s in aps[a]]).mean(axis=0)
            qb = np.array([[v if v is not None else np.nan for v in s] for s in aps[b]]).mean(axis=0)
            keep = ~np.isnan(qa)
            out["queries"] = dict(zip(("mean", "t", "p"), paired_t(list(qa[keep] - qb[keep]))))
            out["queries"]["n"] = int(keep.sum())
        comparisons.append(out)

    if "lambda-ndcg" in rows:
        compare("lambda-ndcg", "lightgbm", "ndcg@10")
        compare("lambda-ndcg", "lightgbm", "map")
    for name in ("stable-ap", "stable-ap-const"):
        if name in rows:
            compare(name, "lambda-ap", "map")
            compare(name, "lambda-ap", "ndcg@10")
    report = {"lightgbm_version": lgb.__version__, "seeds": seeds, "summary": summary,
              "runs": results, "comparisons": comparisons,
              "train_seconds": {k: v for k, v in seconds.items() if v}}
    if args.json:
        print(json.dumps(report))
        return
    print(f"rank.test, LightGBM convention, seeds {seeds}; mean ± population std")
    print("| method | " + " | ".join(m.upper() if m == "map" else m.replace("ndcg", "NDCG") for m in METRICS) + " |")
    print("|---|" + "---|" * len(METRICS))
    for name in rows:
        cells = [f"{summary[name][m][0]:.4f} ± {summary[name][m][1]:.4f}" for m in METRICS]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for c in comparisons:
        s = c["seeds"]
        line = f"{c['a']} − {c['b']} on {c['metric']}: {s['mean']:+.4f} over seeds (t {s['t']:.2f}, p {s['p']:.3f})"
        if "queries" in c:
            q = c["queries"]
            line += f"; per query ({q['n']}): {q['mean']:+.4f} (t {q['t']:.2f}, p {q['p']:.3f})"
        print(line)
    for name, v in seconds.items():
        if v:
            print(f"{name}: {statistics.fmean(v):.2f} s to train (mean)")


if __name__ == "__main__":
    main()
