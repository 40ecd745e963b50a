#!/usr/bin/env python3
"""Unbiased LambdaMART against an independent implementation (SPEC §11, "Unbiased LambdaMART";
Hu, Wang, Peng, Li 2019): rankd's `--debias pairwise` and XGBoost's `lambdarank_unbiased`
trained on the same simulated sessions, compared on the learned click biases t⁺ (and t⁻) by
rank and on test NDCG@10.

For each seed, `rankd simulate-clicks` draws sessions from the LightGBM LETOR example's training
labels (position-based clicks, examination 1/k^η). rankd trains with
`rankd eval-letor --train-clicks S --debias pairwise`. XGBoost gets the same sessions as its
query groups: one group (qid) per session with a click, its rows in the order shown (XGBoost
reads a row's position from its order within its group when `lambdarank_unbiased` is set), the
clicks as labels. Both run 100 rounds of 31-leaf trees at rate 0.1 with bias norm p = 2. For
reference, XGBoost also trains on the same groups without debiasing (naive) and on the true
labels (full information). NDCG@10 is LightGBM's convention (gain 2^l - 1, a test query
without a relevant row counts 1), rankd's `MetricConvention::Letor`.

What can agree: the biases' shape (falling with rank, t⁺ steeper than t⁻) and their size, both
being eq. 30/31 of the paper with the same p; and whether debiasing moves NDCG@10 over the naive
model the same way. What cannot agree exactly: the tree learners differ (rankd: LightGBM-style
leaf-wise trees with min_data_in_leaf 50, min_sum_hessian 5, bagging 0.9; XGBoost: its hist
learner), XGBoost builds its pairs its own way (`lambdarank_pair_method` "topk" with K = 10 takes every
pair of a 10-row session, as rankd does; "mean" samples them), and
XGBoost's pair cost is ln(1 + e^{s_i - s_j}) where rankd takes the paper's ln(1 + e^{-(s_i - s_j)})
(src/rerank/gbdt/train/unbiased.rs).

    bench/.venv/bin/python bench/unbiased_lambdamart_crosscheck.py --rankd target/release/rankd
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import xgboost as xgb

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "letor-lightgbm")
RANKS = 5


def read_letor(path, num_features=None):
    """Rows (dense features, 1-based LETOR columns at 0-based index column - 1), labels, and
    the groups from `path.query`."""
    labels, rows = [], []
    for line in open(path):
        parts = line.split()
        if not parts:
            continue
        labels.append(int(float(parts[0])))
        rows.append({int(c) - 1: float(v) for c, v in (p.split(":") for p in parts[1:])})
    d = num_features or 1 + max(c for r in rows for c in r)
    x = np.zeros((len(rows), d), dtype=np.float32)
    for i, r in enumerate(rows):
        for c, v in r.items():
            if c < d:
                x[i, c] = v
    sizes = [int(s) for s in open(path + ".query").read().split()]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return x, np.array(labels), [(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def ndcg10(labels, scores, groups):
    """Mean NDCG@10 over `groups`, LightGBM's convention, ties in row order."""
    out = []
    disc = 1.0 / np.log2(np.arange(2, 12))
    for a, b in groups:
        y, s = labels[a:b], scores[a:b]
        ranked = y[np.argsort(-s, kind="stable")][:10]
        ideal = np.sort(y)[::-1][:10]
        idcg = float(np.sum((2.0 ** ideal - 1) * disc[: len(ideal)]))
        out.append(1.0 if idcg == 0 else float(np.sum((2.0 ** ranked - 1) * disc[: len(ranked)])) / idcg)
    return float(np.mean(out))


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def session_groups(sessions_path, x, train_groups):
    """XGBoost's inputs from the sessions: one group per session with a click, rows in the order
    shown, clicks as labels; qid is the session's index (sorted, as XGBoost needs)."""
    xs, ys, qids = [], [], []
    for n, line in enumerate(open(sessions_path)):
        s = json.loads(line)
        if not s["clicks"]:
            continue
        start, _ = train_groups[int(s["qid"]) - 1]  # rankd names file-order groups 1, 2, ...
        clicked = set(s["clicks"])
        xs.extend(start + r for r in s["shown"])
        ys.extend(1 if r in clicked else 0 for r in s["shown"])
        qids.extend([n] * len(s["shown"]))
    return x[np.array(xs)], np.array(ys), np.array(qids)


def xgb_params(args, unbiased, seed):
    return {
        "objective": "rank:ndcg",
        "lambdarank_unbiased": unbiased,
        "lambdarank_bias_norm": 2.0,
        "lambdarank_pair_method": args.pair_method,
        "lambdarank_num_pair_per_sample": args.pairs_per_sample,
        "ndcg_exp_gain": True,
        "tree_method": "hist",
        "grow_policy": "lossguide",
        "max_leaves": 31,
        "max_depth": 0,
        "eta": 0.1,
        "min_child_weight": 0.0,
        "subsample": 1.0,
        "seed": seed,
        "nthread": 2,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", required=True)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--eta", default="1")
    ap.add_argument("--sessions", default="10000")
    ap.add_argument("--pair-method", default="topk", choices=["topk", "mean"],
                    help="XGBoost's pair construction (topk with K = the list length takes, as "
                         "rankd does, every pair of a 10-row list)")
    ap.add_argument("--pairs-per-sample", type=int, default=10)
    args = ap.parse_args()
    train_path, test_path = os.path.join(DATA, "rank.train"), os.path.join(DATA, "rank.test")
    x_train, y_train, g_train = read_letor(train_path)
    x_test, y_test, g_test = read_letor(test_path, x_train.shape[1])
    truth = [(1 / (k + 1)) ** float(args.eta) for k in range(RANKS)]

    # Full information, XGBoost on the true labels (no debiasing), for reference.
    qid_train = np.concatenate([[i] * (b - a) for i, (a, b) in enumerate(g_train)])
    full = xgb.train(xgb_params(args, False, 0), xgb.DMatrix(x_train, y_train, qid=qid_train),
                     num_boost_round=100)
    full_ndcg = ndcg10(y_test, full.predict(xgb.DMatrix(x_test)), g_test)
    rankd_full = run([args.rankd, "eval-letor", "--train", train_path, "--test", test_path,
                      "--model", "gbdt", "--json"])["test"]["ndcg@10"]
    print(f"full information NDCG@10: rankd {rankd_full:.4f}, XGBoost {full_ndcg:.4f}")
    print(f"η = {args.eta}, {args.sessions} sessions, {args.seeds} seeds; XGBoost pairs: "
          f"{args.pair_method}, {args.pairs_per_sample} per sample; truth 1/k^η (rank 1..{RANKS}): "
          + " ".join(f"{t:.3f}" for t in truth) + "; (1/k^η)^(1/3): "
          + " ".join(f"{t ** (1 / 3):.3f}" for t in truth))
    rows = {k: [] for k in ("rankd_ndcg", "xgb_ndcg", "xgb_naive", "rankd_naive")}
    tp = {"rankd": [], "xgb": []}
    tm = {"rankd": [], "xgb": []}
    tmp = tempfile.mkdtemp()
    for seed in range(1, args.seeds + 1):
        s = os.path.join(tmp, f"sessions-{seed}.jsonl")
        run([args.rankd, "simulate-clicks", "--letor", train_path, "--out", s, "--sessions",
             args.sessions, "--eta", args.eta, "--seed", str(seed), "--json"])
        base = [args.rankd, "eval-letor", "--train", train_path, "--test", test_path,
                "--train-clicks", s, "--model", "gbdt", "--seed", str(seed), "--json"]
        r = run(base + ["--debias", "pairwise"])
        rows["rankd_ndcg"].append(r["test"]["ndcg@10"])
        tp["rankd"].append(r["position_bias"]["t_plus"][:RANKS])
        tm["rankd"].append(r["position_bias"]["t_minus"][:RANKS])
        rows["rankd_naive"].append(run(base + ["--debias", "none"])["test"]["ndcg@10"])

        xs, ys, qids = session_groups(s, x_train, g_train)
        dm = xgb.DMatrix(xs, ys, qid=qids)
        unbiased = xgb.train(xgb_params(args, True, seed), dm, num_boost_round=100)
        rows["xgb_ndcg"].append(ndcg10(y_test, unbiased.predict(xgb.DMatrix(x_test)), g_test))
        obj = json.loads(unbiased.save_config())["learner"]["objective"]
        tp["xgb"].append([float(v) for v in obj["ti+"][:RANKS]])
        tm["xgb"].append([float(v) for v in obj["tj-"][:RANKS]])
        naive = xgb.train(xgb_params(args, False, seed), dm, num_boost_round=100)
        rows["xgb_naive"].append(ndcg10(y_test, naive.predict(xgb.DMatrix(x_test)), g_test))
        os.remove(s)
        print(f"seed {seed}: t⁺ rankd " + " ".join(f"{v:.3f}" for v in tp["rankd"][-1])
              + " | XGBoost " + " ".join(f"{v:.3f}" for v in tp["xgb"][-1])
              + f"; NDCG@10 rankd {rows['rankd_ndcg'][-1]:.4f} XGBoost {rows['xgb_ndcg'][-1]:.4f}",
              flush=True)

    m = lambda v: f"{statistics.mean(v):.4f} ± {statistics.stdev(v) if len(v) > 1 else 0:.4f}"
    mean_at = lambda vs: " ".join(f"{statistics.mean(v[k] for v in vs):.3f}" for k in range(RANKS))
    print()
    print("| | rankd (--debias pairwise) | XGBoost (lambdarank_unbiased) |")
    print("|---|---|---|")
    print(f"| test NDCG@10, debiased | {m(rows['rankd_ndcg'])} | {m(rows['xgb_ndcg'])} |")
    print(f"| test NDCG@10, same clicks naive | {m(rows['rankd_naive'])} | {m(rows['xgb_naive'])} |")
    print(f"| test NDCG@10, full information | {rankd_full:.4f} | {full_ndcg:.4f} |")
    print(f"| t⁺ rank 1..{RANKS} | {mean_at(tp['rankd'])} | {mean_at(tp['xgb'])} |")
    print(f"| t⁻ rank 1..{RANKS} | {mean_at(tm['rankd'])} | {mean_at(tm['xgb'])} |")


if __name__ == "__main__":
    sys.exit(main())
