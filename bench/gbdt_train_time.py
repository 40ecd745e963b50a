"""Training time of rankd's trees against LightGBM with the same settings and threads.

    python bench/gbdt_train_time.py [--runs 5] [--threads 2] [--rankd target/release/rankd]

Both train LightGBM's examples/lambdarank/train.conf (100 trees, lr 0.1, 31 leaves,
max_bin 255, min_data_in_leaf 50, min_sum_hessian 5, bagging 0.9 every round) with
lambdarank / LambdaMART-NDCG on rank.train, all queries, no early stopping, on `--threads`
threads (rankd: RAYON_NUM_THREADS). LightGBM's time is `lgb.train` including its Dataset
construction (binning), rankd's the `train_seconds` eval-letor reports (binning included,
reading the file not). Medians of `--runs` runs, seeds 1..runs.
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import lightgbm as lgb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "letor-lightgbm")
TRAIN, TEST = os.path.join(DATA, "rank.train"), os.path.join(DATA, "rank.test")
COMMON = ["--trees", "100", "--leaves", "31", "--max-bins", "255", "--tree-lr", "0.1",
          "--min-data-in-leaf", "50", "--min-sum-hessian", "5", "--row-fraction", "0.9"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    args = ap.parse_args()
    lgb_s, rankd_s = [], []
    for seed in range(1, args.runs + 1):
        params = {"objective": "lambdarank", "max_bin": 255, "learning_rate": 0.1,
                  "num_leaves": 31, "bagging_freq": 1, "bagging_fraction": 0.9,
                  "min_data_in_leaf": 50, "min_sum_hessian_in_leaf": 5.0,
                  "num_threads": args.threads, "deterministic": True, "seed": seed,
                  "verbose": -1}
        started = time.perf_counter()
        train = lgb.Dataset(TRAIN, params={"max_bin": 255, "verbose": -1})
        lgb.train(params, train, num_boost_round=100)
        lgb_s.append(time.perf_counter() - started)
        env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
        out = subprocess.run([args.rankd, "eval-letor", "--train", TRAIN, "--test", TEST,
                              "--model", "gbdt", "--objective", "lambda-ndcg",
                              "--seed", str(seed), "--json"] + COMMON,
                             check=True, capture_output=True, text=True, env=env).stdout
        rankd_s.append(json.loads(out)["train_seconds"])
    result = {"lightgbm_s": lgb_s, "rankd_s": rankd_s,
              "lightgbm_median": statistics.median(lgb_s),
              "rankd_median": statistics.median(rankd_s),
              "ratio": statistics.median(rankd_s) / statistics.median(lgb_s),
              "threads": args.threads, "load": os.getloadavg()}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
