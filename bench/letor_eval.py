#!/usr/bin/env python3
"""The LETOR table of docs/EVALUATION.md and the training-throughput table of
docs/BENCHMARKS.md, in one run:

    cargo build --release
    bench/.venv/bin/python bench/letor_eval.py [--seeds 1,2,3,4,5] [--jobs 2] [--only LABEL] [--flags F]

- `rankd eval-letor` for each objective x {linear, MLP} x seed, with the hyperparameters in
  CONFIGS (chosen by bench/letor_tune.py on a held-out split of rank.train; rank.test is only
  ever used for the numbers reported here); the stable AP MLP also with SPEC defaults;
- LightGBM lambdarank with the example's train.conf, same seeds (bench/lightgbm_letor.py, which
  also cross-checks rankd's metric code on LightGBM's predictions and fails on a mismatch);
- unlearned baselines scored by rankd: file order, the best single feature chosen on rank.train
  (by NDCG@10), and feature 164 (the data README's best single feature, chosen on rank.test).
Every number is under LightGBM's convention (gain 2^l - 1, all-zero query NDCG = 1; MAP over
queries with a relevant row). Prints markdown tables; writes raw results to bench/out/.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lightgbm_letor  # noqa: E402

ROOT = lightgbm_letor.ROOT
DATA = lightgbm_letor.DATA
METRICS = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map"]

# (label, objective, model, flags). Chosen with bench/letor_tune.py on the held-out split of
# rank.train (criterion: mean of held-out MAP and NDCG@10; grids in docs/EVALUATION.md).
CONFIGS = [
    ("stable AP, graded, linear", "stable-ap", "linear",
     "--graded --tau 0.1 --weight-a 10 --lr 0.01 --batch 16"),
    ("stable AP, graded, MLP 32 ReLU", "stable-ap", "mlp",
     "--graded --tau 0.1 --weight-a 10 --lr 0.01 --batch 4"),
    ("stable AP, SPEC defaults (binary, a = 0.1, t = 2), MLP 32 ReLU", "stable-ap", "mlp",
     "--tau 0.1 --lr 0.01 --batch 16"),
    ("RankNet, linear", "ranknet", "linear", "--sigma 1 --lr 0.01 --batch 4"),
    ("RankNet, MLP 32 ReLU", "ranknet", "mlp", "--sigma 1 --lr 0.03 --batch 4"),
    ("naive smoothed AP, graded, linear", "smooth-ap", "linear",
     "--graded --tau 0.1 --lr 0.003 --batch 4"),
    ("naive smoothed AP, graded, MLP 32 ReLU", "smooth-ap", "mlp",
     "--graded --tau 0.1 --lr 0.01 --batch 4"),
    # SOPRC (seed 003): tau1 = --tau; tau2 0.001, beta 0.1, K 100, lambda 1 / 5 (defaults,
    # kept after a grid over beta x tau2 x regulariser on/off).
    ("SOPRC, graded, linear", "soprc", "linear", "--graded --tau 1 --lr 0.01 --batch 4"),
    ("SOPRC, graded, MLP 32 ReLU", "soprc", "mlp", "--graded --tau 0.1 --lr 0.01 --batch 4"),
    # Ensembles of 5 networks over initialisation seeds (--ensemble 5), every objective,
    # each re-tuned with the ensemble on (lr x batch, x hidden {32, 64} for the MLPs; seeds
    # 1-10 of bench/letor_tune.py). Linear members fold into one linear model.
    ("stable AP, graded, linear, ensemble of 5", "stable-ap", "linear",
     "--graded --tau 0.1 --weight-a 10 --lr 0.03 --batch 4 --ensemble 5"),
    ("stable AP, graded, MLP 64 ReLU, ensemble of 5", "stable-ap", "mlp",
     "--graded --tau 0.1 --weight-a 10 --lr 0.03 --batch 4 --hidden 64 --ensemble 5"),
    ("stable AP, SPEC defaults (binary, a = 0.1, t = 2), MLP 32 ReLU, ensemble of 5", "stable-ap",
     "mlp", "--tau 0.1 --lr 0.01 --batch 16 --ensemble 5"),
    ("RankNet, linear, ensemble of 5", "ranknet", "linear",
     "--sigma 1 --lr 0.01 --batch 4 --ensemble 5"),
    ("RankNet, MLP 64 ReLU, ensemble of 5", "ranknet", "mlp",
     "--sigma 1 --lr 0.01 --batch 4 --hidden 64 --ensemble 5"),
    ("naive smoothed AP, graded, linear, ensemble of 5", "smooth-ap", "linear",
     "--graded --tau 0.1 --lr 0.01 --batch 4 --ensemble 5"),
    ("naive smoothed AP, graded, MLP 64 ReLU, ensemble of 5", "smooth-ap", "mlp",
     "--graded --tau 0.1 --lr 0.01 --batch 4 --hidden 64 --ensemble 5"),
    ("SOPRC, graded, linear, ensemble of 5", "soprc", "linear",
     "--graded --tau 1 --lr 0.01 --batch 4 --ensemble 5"),
    ("SOPRC, graded, MLP 32 ReLU, ensemble of 5", "soprc", "mlp",
     "--graded --tau 0.1 --lr 0.01 --batch 4 --hidden 32 --ensemble 5"),
]


def rankd_run(rankd, config, seed, extra=""):
    _, objective, model, flags = config
    cmd = [rankd, "eval-letor", "--train", os.path.join(DATA, "rank.train"),
           "--test", os.path.join(DATA, "rank.test"), "--objective", objective, "--model", model,
           "--seed", str(seed), "--json"] + flags.split() + extra.split()
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def score_file_metrics(rankd, scores):
    return lightgbm_letor.rankd_metrics(rankd, scores)


def read_dense(path, width=300):
    rows = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            x = np.zeros(width)
            for tok in line.split("#")[0].split()[1:]:
                i, v = tok.split(":")
                x[int(i) - 1] = float(v)
            rows.append(x)
    return np.array(rows)


def baselines(rankd):
    train_x = read_dense(os.path.join(DATA, "rank.train"))
    train_y = lightgbm_letor.read_labels(os.path.join(DATA, "rank.train"))
    train_g = lightgbm_letor.read_groups(os.path.join(DATA, "rank.train.query"))
    best, best_ndcg = None, -1
    for j in range(train_x.shape[1]):
        n = lightgbm_letor.numpy_metrics(train_y, train_g, train_x[:, j])["ndcg@10"]
        if n > best_ndcg:
            best, best_ndcg = j, n
    test_x = read_dense(os.path.join(DATA, "rank.test"))
    out = {
        "file order": score_file_metrics(rankd, -np.arange(len(test_x), dtype=float)),
        f"best single feature on train (f{best + 1})": score_file_metrics(rankd, test_x[:, best]),
        "feature 164 (README's best, chosen on test)": score_file_metrics(rankd, test_x[:, 163]),
    }
    return out


def fmt(values):
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.pstdev(values):.4f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    ap.add_argument("--only", action="append", default=[],
                    help="run only the rankd rows whose label contains this (repeatable)")
    ap.add_argument("--flags", default="", help="extra rankd flags for every rankd row, "
                    "e.g. '--sample-rows 4'")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    configs = [c for c in CONFIGS if not args.only or any(o in c[0] for o in args.only)]

    lgb_runs, failures = [], []
    for seed in seeds:
        r, bad = lightgbm_letor.run_seed(seed, args.rankd)
        lgb_runs.append(r)
        failures += bad

    jobs = [(c, s) for c in configs for s in seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(
            lambda j: (j[0][0], rankd_run(args.rankd, j[0], j[1], args.flags)), jobs))
    base = baselines(args.rankd)

    os.makedirs(os.path.join(ROOT, "bench", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "out", "letor_eval.json"), "w") as f:
        json.dump({"lightgbm": lgb_runs, "rankd": [{"label": label, **r} for label, r in results],
                   "baselines": base}, f)

    print(f"| method | {' | '.join(n.upper() for n in METRICS)} |")
    print("|---|" + "---|" * len(METRICS))
    print("| LightGBM lambdarank (train.conf) | " + " | ".join(fmt([r[n] for r in lgb_runs]) for n in METRICS) + " |")
    for label, *_ in configs:
        rs = [r for lab, r in results if lab == label]
        print(f"| rankd {label}{' ' + args.flags if args.flags else ''} | " + " | ".join(fmt([r['test'][n] for r in rs]) for n in METRICS) + " |")
    for name, r in base.items():
        print(f"| {name} | " + " | ".join(fmt([r[n]]) for n in METRICS) + " |")

    print()
    print("| configuration | epochs run (mean) | best epoch (mean) | queries/s per epoch (median) | pairs/s per epoch (median) |")
    print("|---|---|---|---|---|")
    for label, *_ in configs:
        rs = [r for lab, r in results if lab == label]
        qps = statistics.median(e["queries_per_s"] for r in rs for e in r["log"])
        pps = statistics.median(e["pairs_per_s"] for r in rs for e in r["log"])
        epochs = statistics.mean(r["epochs_run"] for r in rs)
        best = statistics.mean(r["best_epoch"] for r in rs)
        print(f"| {label} | {epochs:.1f} | {best:.1f} | {qps:,.0f} | {pps:,.0f} |")
    if failures:
        for f in failures:
            print("MISMATCH " + f, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
